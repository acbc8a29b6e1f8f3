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
# In the gateway pod the gateway listener binds every interface (the Service reaches it);
# the admin interface stays on the pod's loopback, since whoever reaches it can POST
# /quitquitquit, /drain_listeners, /runtime_modify or /logging. The kubelet's probes and
# Prometheus go through the added ops listener instead, which forwards GET /ready and
# GET /stats/prometheus (nothing else) to the admin interface over loopback. The
# extproc cluster (also the xDS server of the catalog's clusters) stays on the pod's loopback.
`

// The pod's ops listener and the cluster it forwards to: Envoy's admin interface, which
// stays on the loopback address of envoy/envoy.yaml.
const (
	adminAddress     = "127.0.0.1:9901"
	opsListenerName  = "ops"
	opsPort          = 9902
	adminClusterName = "envoy-admin"
)

// podAddresses are the socket addresses of envoy/envoy.yaml that the pod binds
// differently (the local stack's loopback defaults → the pod's interfaces). The admin
// address is not among them.
var podAddresses = map[string]string{
	"127.0.0.1:8080": "0.0.0.0:8080",
}

// opsListener is inserted first under static_resources.listeners of the pod's copy.
const opsListener = `    # ops (deploy only): the kubelet's probes and Prometheus reach Envoy's admin
    # interface through this listener, for exactly GET /ready and GET
    # /stats/prometheus. Every other request is answered 404 here and never reaches
    # the admin interface (no path rewriting, no normalization: the exact path is
    # forwarded or nothing is).
    - name: ops
      address:
        socket_address:
          address: 0.0.0.0
          port_value: 9902
      filter_chains:
        - filters:
            - name: envoy.filters.network.http_connection_manager
              typed_config:
                "@type": type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager
                stat_prefix: ops
                codec_type: HTTP1
                route_config:
                  name: ops
                  virtual_hosts:
                    - name: ops
                      domains: ["*"]
                      routes:
                        - match:
                            path: /ready
                            headers:
                              - name: ":method"
                                string_match: {exact: GET}
                          route:
                            cluster: envoy-admin
                        - match:
                            path: /stats/prometheus
                            headers:
                              - name: ":method"
                                string_match: {exact: GET}
                          route:
                            cluster: envoy-admin
                        - match:
                            prefix: /
                          direct_response:
                            status: 404
                http_filters:
                  - name: envoy.filters.http.router
                    typed_config:
                      "@type": type.googleapis.com/envoy.extensions.filters.http.router.v3.Router
`

// adminCluster is inserted first under static_resources.clusters of the pod's copy.
const adminCluster = `    # envoy-admin (deploy only): Envoy's own admin interface on the pod's loopback, the
    # upstream of the ops listener. No catalog channel may name it.
    - name: envoy-admin
      type: STATIC
      connect_timeout: 1s
      load_assignment:
        cluster_name: envoy-admin
        endpoints:
          - lb_endpoints:
              - endpoint:
                  address:
                    socket_address:
                      address: 127.0.0.1
                      port_value: 9901
`

// envoyForPod derives the pod's envoy.yaml from envoy/envoy.yaml: it rebinds the
// gateway listener to the pod's interfaces, keeps the admin interface on loopback, and
// adds the ops listener and its envoy-admin cluster. Socket addresses are written as
// an `address: H` line followed, within the same socket_address, by a `port_value: P`
// line (envoy/envoy.yaml keeps that shape for the local stack too); the listeners and
// clusters lists start at lines `  listeners:` and `  clusters:` of static_resources.
func envoyForPod(src []byte) ([]byte, error) {
	lines := strings.Split(string(src), "\n")
	found := map[string]bool{}
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
			found[host+":"+port] = true
			to, ok := podAddresses[host+":"+port]
			if !ok {
				break
			}
			nh, np, _ := strings.Cut(to, ":")
			lines[i] = strings.Replace(lines[i], host, nh, 1)
			lines[j] = strings.Replace(lines[j], port, np, 1)
			break
		}
	}
	for from := range podAddresses {
		if !found[from] {
			return nil, fmt.Errorf("envoy/envoy.yaml has no socket address %s to rebind", from)
		}
	}
	if !found[adminAddress] {
		return nil, fmt.Errorf("envoy/envoy.yaml has no socket address %s (the admin interface the ops listener forwards to)", adminAddress)
	}
	var out []string
	inserted := map[string]int{}
	for _, l := range lines {
		out = append(out, l)
		switch l {
		case "  listeners:":
			out = append(out, strings.TrimSuffix(opsListener, "\n"))
			inserted[l]++
		case "  clusters:":
			out = append(out, strings.TrimSuffix(adminCluster, "\n"))
			inserted[l]++
		}
	}
	for _, l := range []string{"  listeners:", "  clusters:"} {
		if inserted[l] != 1 {
			return nil, fmt.Errorf("envoy/envoy.yaml has %d lines %q, want 1", inserted[l], l)
		}
	}
	return []byte(envoyCopyHeader + strings.Join(out, "\n")), nil
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
		"envoy/envoy.yaml with the listener on 0.0.0.0, admin on loopback and the ops listener added")
}

func TestEnvoyForPod(t *testing.T) {
	const (
		admin    = "admin:\n  address:\n    socket_address:\n      address: 127.0.0.1\n      port_value: 9901\n"
		listener = "static_resources:\n  listeners:\n    - name: gateway\n      address:\n        socket_address:\n          address: 127.0.0.1\n          port_value: 8080\n"
		cluster  = "  clusters:\n    - name: extproc\n      socket_address:\n        address: 127.0.0.1\n        port_value: 50051\n"
	)
	tests := []struct {
		name    string
		src     string
		want    []string // in the body, after the header
		wantErr string
	}{
		{
			name: "rebinds the listener only and adds ops",
			src:  admin + listener + cluster,
			want: []string{
				"address: 127.0.0.1\n      port_value: 9901",           // admin stays on loopback
				"address: 0.0.0.0\n          port_value: 8080",         // the gateway listener
				"address: 127.0.0.1\n        port_value: 50051",        // extproc
				"  listeners:\n" + opsListener + "    - name: gateway", // ops first
				"  clusters:\n" + adminCluster + "    - name: extproc",
			},
		},
		{name: "no listener address", src: admin + "static_resources:\n  listeners:\n" + cluster, wantErr: "no socket address 127.0.0.1:8080"},
		{name: "admin elsewhere", src: strings.Replace(admin, "9901", "9911", 1) + listener + cluster, wantErr: "no socket address 127.0.0.1:9901"},
		{name: "no clusters list", src: admin + listener, wantErr: `0 lines "  clusters:"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := envoyForPod([]byte(tc.src))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			body, ok := strings.CutPrefix(string(got), envoyCopyHeader)
			if !ok {
				t.Fatal("the copy does not start with its header")
			}
			for _, w := range tc.want {
				if !strings.Contains(body, w) {
					t.Errorf("missing %q in:\n%s", w, body)
				}
			}
			if strings.Contains(body, "address: 0.0.0.0\n      port_value: 9901") {
				t.Error("admin rebound to the pod's interfaces")
			}
		})
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

// TestDocsDescribeWhatOperatorsProvide keeps the operator docs in step with the
// manifests: every external Secret and key, the install steps and Envoy's ops listener in
// docs/operations.md, every metric the gateway exports in docs/observability.md, and the
// Envoy limits operators tune in docs/configuration.md.
func TestDocsDescribeWhatOperatorsProvide(t *testing.T) {
	var operations []string
	for _, secrets := range externalSecrets {
		for name, s := range secrets {
			operations = append(operations, name)
			operations = append(operations, s.Keys...)
		}
	}
	operations = append(operations, "kubectl apply -k", "--migrate-only",
		adminAddress, fmt.Sprintf("0.0.0.0:%d", opsPort), "GET /ready", "GET /stats/prometheus", adminClusterName)
	for page, want := range map[string][]string{
		"operations.md": operations,
		"observability.md": {
			"gateway_requests_total", "gateway_phase_duration_seconds", "gateway_accounting_call_duration_seconds",
			"gateway_tokens_total", "gateway_credits_micros_total", "gateway_reservations_in_flight",
			"gateway_upstream_errors_total", "gateway_channel_attempts_total", "gateway_channel_state", "accounting_ledger_errors_total"},
		"configuration.md": {"message_timeout", "per_connection_buffer_limit_bytes"},
	} {
		b, err := os.ReadFile(filepath.Join("..", "docs", page))
		if err != nil {
			t.Fatal(err)
		}
		for _, w := range want {
			if !strings.Contains(string(b), w) {
				t.Errorf("docs/%s does not mention %q", page, w)
			}
		}
	}
}
