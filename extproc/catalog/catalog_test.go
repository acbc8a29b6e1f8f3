package catalog

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/llmgw/gateway/extproc/credential"
	"github.com/llmgw/gateway/internal/demoenv"
)

// demoEnv resolves the demo catalog's credential variables as the local stack sets them.
var demoEnv = demoenv.Lookup

func noFiles(string) ([]byte, error) { return nil, os.ErrNotExist }

func demoPath(t *testing.T) string {
	_, here, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(here), "..", "..", "deploy", "local", "catalog.yaml")
}

// LoadDemo parses deploy/local/catalog.yaml with the local stack's credentials.
func loadDemo(t *testing.T) *Catalog {
	t.Helper()
	data, err := os.ReadFile(demoPath(t))
	if err != nil {
		t.Fatal(err)
	}
	c, err := Parse(data, demoEnv, noFiles)
	if err != nil {
		t.Fatalf("demo catalog: %v", err)
	}
	return c
}

func TestDemoCatalog(t *testing.T) {
	c := loadDemo(t)
	if got := len(c.Models()); got != 23 {
		t.Fatalf("models = %d, want 23", got)
	}
	tests := []struct {
		name, id      string
		kind          Kind
		complete      bool
		upstream      string
		credential    string
		tier          string
		hasCandidate  bool
		free, highCst bool
	}{
		{name: "free", id: "demo-free", kind: KindChat, complete: true, upstream: "mock-small", credential: "sk-mock-openai", tier: "default", hasCandidate: true, free: true},
		{name: "chat", id: "demo-chat", kind: KindChat, complete: true, upstream: "mock-gpt", credential: "sk-mock-openai", tier: "default", hasCandidate: true},
		{name: "claude", id: "demo-claude", kind: KindMessages, complete: true, upstream: "mock-claude", credential: "sk-mock-anthropic", tier: "default", hasCandidate: true},
		{name: "unpriced", id: "demo-unpriced", kind: KindChat, complete: false, upstream: "mock-gpt", credential: "sk-mock-openai", tier: "default", hasCandidate: true},
		{name: "exhausted", id: "demo-exhausted", kind: KindChat, complete: true, upstream: "mock-gpt", credential: "sk-mock-exhausted", tier: "default", hasCandidate: true},
		{name: "premium", id: "demo-premium", kind: KindChat, complete: true, upstream: "mock-gpt-premium", credential: "sk-mock-openai", tier: "default", hasCandidate: true, highCst: true},
		{name: "video", id: "demo-video", kind: KindVideo, complete: true, upstream: "mock-video", credential: "sk-mock-video", tier: "default", hasCandidate: true},
		{name: "restricted default tier", id: "demo-restricted", kind: KindChat, complete: true, upstream: "mock-gpt", credential: "sk-mock-openai", tier: "default", hasCandidate: false},
		{name: "restricted enterprise", id: "demo-restricted", kind: KindChat, complete: true, upstream: "mock-gpt", credential: "sk-mock-openai", tier: "enterprise", hasCandidate: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, ok := c.Model(tt.id)
			if !ok {
				t.Fatalf("%s missing", tt.id)
			}
			if m.Kind != tt.kind || m.PriceComplete() != tt.complete || m.Free != tt.free || m.HighCost != tt.highCst {
				t.Errorf("%s: kind=%s complete=%v free=%v high=%v", tt.id, m.Kind, m.PriceComplete(), m.Free, m.HighCost)
			}
			if got := m.HasCandidate(tt.tier); got != tt.hasCandidate {
				t.Errorf("HasCandidate(%s) = %v", tt.tier, got)
			}
			ch := m.Channels()[0]
			if ch.UpstreamModel != tt.upstream || keyOf(t, ch) != tt.credential || ch.Cluster != "mock-providers" {
				t.Errorf("channel = %+v", ch)
			}
			if strings.Contains(ch.String(), tt.credential) {
				t.Errorf("String leaks the credential: %s", ch)
			}
		})
	}
	if m, _ := c.Model("demo-chat"); *m.Prices.InputPerMTok != 1_000_000 || *m.Prices.OutputPerMTok != 2_000_000 || m.MaxOutputTokens != 4096 {
		t.Errorf("demo-chat prices = %+v", m.Prices)
	}
	if m, _ := c.Model("demo-tts"); len(m.Voices) != 2 || *m.Prices.PerMillionChars != 15_000_000 {
		t.Errorf("demo-tts = %+v", m)
	}
}

func TestBrokenCatalogReportsEveryProblem(t *testing.T) {
	doc := `
models:
  - id: "bad id"
    kind: chat
    max_output_tokens: 10
  - id: dup
    kind: chat
    max_output_tokens: 10
  - id: dup
    kind: chat
    max_output_tokens: 10
  - id: nokind
    kind: teleport
  - id: freepriced
    kind: chat
    free: true
    max_output_tokens: 10
    prices: {input_per_mtok: 5}
  - id: negative
    kind: embeddings
    prices: {input_per_mtok: -1, per_image: 3}
  - id: speechless
    kind: speech
  - id: vid
    kind: video
    video: {min_duration_seconds: 9, max_duration_seconds: 3, resolution: 720p}
  - id: nomax
    kind: chat
channels:
  - {name: a, model: ghost, cluster: c, format: openai, upstream_model: x, credential_env: K}
  - {name: a, model: dup, cluster: "", format: openai, upstream_model: "", credential_env: MISSING}
  - {name: b, model: vid, cluster: c, format: anthropic, upstream_model: x, credential_env: K}
  - {name: c, model: dup, cluster: c, format: grpc, upstream_model: x}
  - {name: d, model: dup, cluster: c, format: openai, upstream_model: x, credential_env: K, credential_file: /f, weight: 0, priority: -1}
  - {name: e, model: dup, cluster: c, format: openai, upstream_model: x, credential_env: K, multimodal_embeddings: true}
  - {name: f, model: dup, cluster: nowhere, format: openai, upstream_model: x, credential_env: K}
clusters:
  - {name: c, address: "127.0.0.1:80"}
  - {name: c, address: "127.0.0.1:81"}
  - {name: noport, address: "example.com"}
  - {name: badport, address: "example.com:70000", connect_timeout: soon}
  - {name: plain, address: ":443", ca_file: /ca.pem, max_requests: -1}
  - {name: "", address: "10.0.0.1:1"}
`
	_, err := Parse([]byte(doc), func(k string) (string, bool) {
		if k == "K" {
			return "secret", true
		}
		return "", false
	}, noFiles)
	if err == nil {
		t.Fatal("broken catalog loaded")
	}
	msg := err.Error()
	for _, want := range []string{
		`models[0] (bad id): id must be`,
		"duplicate model id",
		`kind "teleport"`,
		"a free model carries no prices",
		"prices.input_per_mtok must be between 0 and 1000000000000",
		"prices.per_image does not apply to a embeddings model",
		"a speech model needs at least one voice",
		"video durations",
		"max_output_tokens is required",
		`model "ghost" is not in the catalog`,
		"duplicate channel name",
		"cluster is required",
		"upstream_model is required",
		"environment variable MISSING is not set",
		`format "anthropic" cannot serve a video model`,
		`format "grpc" is not one of`,
		"one of credential_env and credential_file is required",
		"set only one of credential_env and credential_file",
		"weight must be >= 1",
		"priority must be >= 0",
		"multimodal_embeddings applies to embeddings models only",
		`cluster "nowhere" is not in the catalog's clusters`,
		"duplicate cluster name",
		`address "example.com" is not host:port`,
		"port must be 1 to 65535",
		`connect_timeout "soon" is not a positive duration`,
		`address ":443" has no host`,
		"tls_server_name and ca_file need tls: true",
		"max_requests must be >= 1",
		"clusters[5] (): name is required",
	} {
		if !strings.Contains(msg, want) {
			t.Errorf("error lacks %q", want)
		}
	}
	if strings.Contains(msg, "secret") {
		t.Error("error leaks a credential")
	}
	if n := len(strings.Split(msg, "\n")); n < 20 {
		t.Errorf("only %d problems reported:\n%s", n, msg)
	}
}

func TestStrictUnknownField(t *testing.T) {
	_, err := Parse([]byte("models:\n  - id: a\n    kind: chat\n    max_output_tokens: 1\n    colour: red\n"), demoEnv, noFiles)
	if err == nil || !strings.Contains(err.Error(), "colour") {
		t.Fatalf("err = %v, want unknown field colour", err)
	}
}

func TestCredentialFile(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "cred")
	if err := os.WriteFile(p, []byte("sk-file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	doc := "models:\n  - {id: m, kind: chat, max_output_tokens: 5, free: true}\nchannels:\n  - {name: c, model: m, cluster: x, format: openai, upstream_model: u, credential_file: " + p + "}\nclusters:\n  - {name: x, address: \"127.0.0.1:9\"}\n"
	c, err := Parse([]byte(doc), demoEnv, os.ReadFile)
	if err != nil {
		t.Fatal(err)
	}
	m, _ := c.Model("m")
	if got := keyOf(t, m.Channels()[0]); got != "sk-file" {
		t.Errorf("credential = %q", got)
	}
	_, err = Parse([]byte(strings.ReplaceAll(doc, p, filepath.Join(dir, "none"))), demoEnv, os.ReadFile)
	if !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing file: err = %v", err)
	}
}

func TestPick(t *testing.T) {
	w := func(n int) *int { return &n }
	off := false
	chans := []*Channel{
		{Name: "p0-a", Priority: 0, Weight: w(1)},
		{Name: "p0-b", Priority: 0, Weight: w(3)},
		{Name: "p1", Priority: 1},
	}
	m := &Model{channels: chans}
	tests := []struct {
		name  string
		cands []*Channel
		draw  int
		want  string
	}{
		{name: "first weight slot", cands: chans, draw: 0, want: "p0-a"},
		{name: "second weight slots", cands: chans, draw: 1, want: "p0-b"},
		{name: "last weight slot", cands: chans, draw: 3, want: "p0-b"},
		{name: "only lower priority", cands: chans[2:], draw: 0, want: "p1"},
		{name: "none", cands: nil, want: ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Pick(tt.cands, func(n int) int {
				if n != 4 {
					t.Errorf("intn(%d), want total weight 4", n)
				}
				return tt.draw
			})
			name := ""
			if got != nil {
				name = got.Name
			}
			if name != tt.want {
				t.Errorf("Pick = %q, want %q", name, tt.want)
			}
		})
	}
	chans[0].Enabled, chans[1].Enabled = &off, &off
	if c := m.Candidates("any"); len(c) != 1 || c[0].Name != "p1" {
		t.Errorf("candidates with p0 disabled = %v", c)
	}
}

func TestOrder(t *testing.T) {
	w := func(n int) *int { return &n }
	chans := []*Channel{
		{Name: "p0-a", Priority: 0, Weight: w(1)},
		{Name: "p0-b", Priority: 0, Weight: w(3)},
		{Name: "p1", Priority: 1},
		{Name: "p2", Priority: 2},
	}
	names := func(cs []*Channel) string {
		var s []string
		for _, c := range cs {
			s = append(s, c.Name)
		}
		return strings.Join(s, ",")
	}
	for _, tc := range []struct {
		draws []int
		want  string
	}{
		{[]int{0}, "p0-a,p0-b,p1,p2"}, // p0-a drawn from weight 4; p0-b alone then
		{[]int{1}, "p0-b,p0-a,p1,p2"},
		{[]int{3}, "p0-b,p0-a,p1,p2"},
	} {
		i := 0
		got := names(Order(chans, func(n int) int {
			d := tc.draws[min(i, len(tc.draws)-1)]
			i++
			return d % n
		}))
		if got != tc.want {
			t.Errorf("draws %v: order %s, want %s", tc.draws, got, tc.want)
		}
	}
	if got := Order(nil, nil); len(got) != 0 {
		t.Errorf("Order(nil) = %v", got)
	}
	if names(chans) != "p0-a,p0-b,p1,p2" {
		t.Error("Order changed its argument")
	}
}

// keyOf is the static key ch's credential sends.
func keyOf(t *testing.T, ch *Channel) string {
	t.Helper()
	hs, err := ch.Credential().Headers(context.Background(), credential.Request{})
	if err != nil || len(hs) != 1 {
		t.Fatalf("%s: headers %d, %v", ch.Name, len(hs), err)
	}
	return strings.TrimPrefix(hs[0].Value, "Bearer ")
}

// TestDemoCatalogCloudChannels: the demo catalog's cloud channels carry each cloud's own
// credential (LOCAL-STACK.md, "Models on every cloud"), and demo-multicloud tries the
// refused Bedrock and Vertex channels before Azure's.
func TestDemoCatalogCloudChannels(t *testing.T) {
	c := loadDemo(t)
	for _, tc := range []struct {
		channel, header, value, style string
	}{
		{channel: "mock-demo-gemini", header: "x-goog-api-key", value: "sk-mock-gemini"},
		{channel: "mock-demo-azure", header: "api-key", value: "sk-mock-azure"},
		{channel: "multicloud-3-azure", header: "api-key", value: "sk-mock-azure"},
		{channel: "mock-demo-vertex-gemini", style: "*credential.GCP"},
		{channel: "mock-demo-vertex-claude", style: "*credential.GCP"},
		{channel: "multicloud-2-vertex-refused", style: "*credential.GCP"},
		{channel: "mock-demo-bedrock", style: "*credential.AWS"},
		{channel: "multicloud-1-bedrock-refused", style: "*credential.AWS"},
	} {
		var ch *Channel
		for _, m := range c.Models() {
			for _, x := range m.Channels() {
				if x.Name == tc.channel {
					ch = x
				}
			}
		}
		if ch == nil {
			t.Errorf("%s: not in the demo catalog", tc.channel)
			continue
		}
		if tc.style != "" {
			if got := typeName(ch.Credential()); got != tc.style {
				t.Errorf("%s: credential %s, want %s", tc.channel, got, tc.style)
			}
			continue
		}
		hs, err := ch.Credential().Headers(context.Background(), credential.Request{})
		if err != nil || len(hs) != 1 || hs[0] != (credential.Header{Name: tc.header, Value: tc.value}) {
			t.Errorf("%s: headers %v, %v; want %s: %s", tc.channel, hs, err, tc.header, tc.value)
		}
	}
	m, _ := c.Model("demo-multicloud")
	var order []string
	for _, ch := range m.Channels() {
		order = append(order, ch.Name)
	}
	if want := "multicloud-1-bedrock-refused multicloud-2-vertex-refused multicloud-3-azure"; strings.Join(order, " ") != want {
		t.Errorf("demo-multicloud channels %v, want %s", order, want)
	}
}
