package deploy_test

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// envoyCopyHeader starts deploy/base/envoy/envoy.yaml.
const envoyCopyHeader = `# GENERATED from envoy/envoy.yaml by deploy/copies_test.go; do not edit. Edit
# envoy/envoy.yaml, then run: cd deploy && go test -run TestEnvoyConfigCopy -update .
# In the gateway pod the listener and the admin interface bind every interface, so the
# Service and the kubelet's probes reach them; the extproc and mock-providers clusters
# stay on the pod's loopback.
`

// podAddresses are the socket addresses of envoy/envoy.yaml that the pod binds
// differently (the local stack's loopback defaults → the pod's interfaces).
var podAddresses = map[string]string{
	"127.0.0.1:8080": "0.0.0.0:8080",
	"127.0.0.1:9901": "0.0.0.0:9901",
}

// envoyForPod derives the pod's envoy.yaml from envoy/envoy.yaml: socket addresses are
// written as an `address: H` line followed, within the same socket_address, by a
// `port_value: P` line (envoy/envoy.yaml keeps that shape for the local stack too).
func envoyForPod(src []byte) ([]byte, error) {
	lines := strings.Split(string(src), "\n")
	done := map[string]bool{}
	for i := range lines {
		host, ok := strings.CutPrefix(strings.TrimSpace(lines[i]), "address: ")
		if !ok {
			continue
		}
		for j := i + 1; j < len(lines) && j <= i+3; j++ {
			port, ok := strings.CutPrefix(strings.TrimSpace(lines[j]), "port_value: ")
			if !ok {
				continue
			}
			to, ok := podAddresses[host+":"+port]
			if !ok {
				break
			}
			nh, np, _ := strings.Cut(to, ":")
			lines[i] = strings.Replace(lines[i], host, nh, 1)
			lines[j] = strings.Replace(lines[j], port, np, 1)
			done[host+":"+port] = true
			break
		}
	}
	for from := range podAddresses {
		if !done[from] {
			return nil, fmt.Errorf("envoy/envoy.yaml has no socket address %s to rebind", from)
		}
	}
	return []byte(envoyCopyHeader + strings.Join(lines, "\n")), nil
}

// checkCopy compares a generated file with what it should hold, rewriting it with -update.
func checkCopy(t *testing.T, path string, want []byte, how string) {
	t.Helper()
	if *update {
		if err := os.WriteFile(path, want, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s is stale: it must equal %s. Run: cd deploy && go test -run %s -update .", path, how, t.Name())
	}
}

func TestEnvoyConfigCopy(t *testing.T) {
	src, err := os.ReadFile(filepath.Join("..", "envoy", "envoy.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	want, err := envoyForPod(src)
	if err != nil {
		t.Fatal(err)
	}
	checkCopy(t, filepath.Join("base", "envoy", "envoy.yaml"), want,
		"envoy/envoy.yaml with the listener and admin on 0.0.0.0")
}

func TestEnvoyForPodRebindsOnlyListenerAndAdmin(t *testing.T) {
	src := []byte("admin:\n  address:\n    socket_address:\n      address: 127.0.0.1\n      port_value: 9901\n" +
		"x:\n  address: 127.0.0.1\n  port_value: 8080\n" +
		"y:\n  socket_address:\n    address: 127.0.0.1\n    port_value: 50051\n")
	got, err := envoyForPod(src)
	if err != nil {
		t.Fatal(err)
	}
	body := strings.TrimPrefix(string(got), envoyCopyHeader)
	for _, want := range []string{"address: 0.0.0.0\n      port_value: 9901", "address: 0.0.0.0\n  port_value: 8080", "address: 127.0.0.1\n    port_value: 50051"} {
		if !strings.Contains(body, want) {
			t.Errorf("missing %q in:\n%s", want, body)
		}
	}
	if _, err := envoyForPod([]byte("admin: {}\n")); err == nil {
		t.Error("a config without the listener and admin addresses was accepted")
	}
}

func TestDevCatalogIsTheDemoCatalog(t *testing.T) {
	src, err := os.ReadFile(filepath.Join("local", "catalog.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	checkCopy(t, filepath.Join("overlays", "dev", "catalog.yaml"), src, "deploy/local/catalog.yaml")
}

func TestDockerfiles(t *testing.T) {
	gomod, err := os.ReadFile(filepath.Join("..", "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	goVersion := regexp.MustCompile(`(?m)^go (\S+)$`).FindSubmatch(gomod)
	if goVersion == nil {
		t.Fatal("no go directive in ../go.mod")
	}
	tests := []struct {
		name, pkg string
	}{
		{"accounting", "./accounting/cmd/accounting"},
		{"extproc", "./extproc/cmd/extproc"},
		{"gatewayctl", "./accounting/cmd/gatewayctl"},
		{"mockproviders", "./e2e/cmd/mockproviders"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b, err := os.ReadFile(filepath.Join("docker", tc.name+".Dockerfile"))
			if err != nil {
				t.Fatal(err)
			}
			text := string(b)
			froms := regexp.MustCompile(`(?m)^FROM (\S+)`).FindAllStringSubmatch(text, -1)
			if len(froms) != 2 {
				t.Fatalf("%d FROM lines, want a build stage and a runtime stage", len(froms))
			}
			if want := "golang:" + string(goVersion[1]); !strings.HasPrefix(froms[0][1], want) {
				t.Errorf("build stage %s, want %s (the go directive of go.mod)", froms[0][1], want)
			}
			if froms[1][1] != "gcr.io/distroless/static-debian12:nonroot" {
				t.Errorf("runtime stage %s, want gcr.io/distroless/static-debian12:nonroot", froms[1][1])
			}
			for _, want := range []string{"CGO_ENABLED=0", "GOTOOLCHAIN=local", tc.pkg, "USER 65532:65532", `ENTRYPOINT ["/` + tc.name + `"]`} {
				if !strings.Contains(text, want) {
					t.Errorf("missing %q", want)
				}
			}
			if fi, err := os.Stat(filepath.Join("..", tc.pkg, "main.go")); err != nil || fi.IsDir() {
				t.Errorf("%s/main.go: %v", tc.pkg, err)
			}
			if _, err := os.Stat(filepath.Join("docker", tc.name+".Dockerfile.dockerignore")); err != nil {
				t.Errorf("no .dockerignore beside the Dockerfile: %v", err)
			}
		})
	}
}

// TestReadmeDocumentsWhatOperatorsProvide keeps deploy/README.md in step with the
// manifests: every external Secret and key, and every metric the gateway exports.
func TestReadmeDocumentsWhatOperatorsProvide(t *testing.T) {
	b, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	readme := string(b)
	var want []string
	for _, secrets := range externalSecrets {
		for name, s := range secrets {
			want = append(want, name)
			want = append(want, s.Keys...)
		}
	}
	want = append(want,
		"gateway_requests_total", "gateway_phase_duration_seconds", "gateway_accounting_call_duration_seconds",
		"gateway_tokens_total", "gateway_credits_micros_total", "gateway_reservations_in_flight",
		"gateway_upstream_errors_total", "accounting_ledger_errors_total",
		"kubectl apply -k", "--migrate-only", "message_timeout", "per_connection_buffer_limit_bytes")
	for _, w := range want {
		if !strings.Contains(readme, w) {
			t.Errorf("README.md does not mention %q", w)
		}
	}
}
