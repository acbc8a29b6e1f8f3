package catalog

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/llmgw/gateway/internal/demoenv"
)

func TestSourceReloadsAValidCatalogAndKeepsServingOnABadOne(t *testing.T) {
	demo, err := os.ReadFile(filepath.Join("..", "..", "deploy", "local", "catalog.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range demoenv.Vars() {
		v, _ := demoenv.Lookup(k)
		t.Setenv(k, v)
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "catalog.yaml")
	write := func(b []byte) {
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(demo)
	s, err := LoadSource(path)
	if err != nil {
		t.Fatal(err)
	}
	first := s.Current()
	if r := s.Check(path); r.Changed || r.Err != nil || s.Current() != first {
		t.Fatalf("unchanged file: %+v", r)
	}

	// A new model: served after the check, under a new version.
	more := strings.Replace(string(demo), "models:\n", "models:\n  - id: demo-new\n    kind: chat\n    prices: {input_per_mtok: 1, output_per_mtok: 1}\n    max_output_tokens: 10\n", 1)
	more = strings.Replace(more, "channels:\n", "channels:\n  - {name: new-one, model: demo-new, cluster: mock-providers, format: openai, upstream_model: mock-gpt, credential_env: DEMO_OPENAI_KEY}\n", 1)
	write([]byte(more))
	r := s.Check(path)
	if !r.Changed || r.Err != nil {
		t.Fatalf("changed file: %+v", r)
	}
	if _, ok := s.Current().Model("demo-new"); !ok || s.Version() != Version([]byte(more)) {
		t.Errorf("new model not served (version %s)", s.Version())
	}
	if _, ok := first.Model("demo-new"); ok {
		t.Error("the catalog a request already holds changed")
	}

	// An invalid catalog is refused with its problems; the last good one serves.
	write([]byte(strings.Replace(more, "channels:\n", "channels:\n  - {name: broken, model: ghost, cluster: c, format: openai, upstream_model: x, credential_env: DEMO_OPENAI_KEY}\n", 1)))
	r = s.Check(path)
	if r.Err == nil || !strings.Contains(r.Err.Error(), "ghost") {
		t.Fatalf("invalid catalog: %+v", r)
	}
	if _, ok := s.Current().Model("demo-new"); !ok {
		t.Error("the good catalog stopped serving")
	}
}
