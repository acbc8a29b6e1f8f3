package translate

import (
	"flag"
	"os"
	"strings"
	"testing"
)

// update rewrites the generated sections of the docs instead of comparing them:
// go test ./extproc/translate/ -run TestConformanceTablesDoc -update
var update = flag.Bool("update", false, "rewrite the docs' generated conformance tables")

// TestConformanceTablesDoc: the conformance tables of docs/translation.md are the
// tables (the one home of each field's and feature's fate), rendered: the client fields
// (fields.go) and, per upstream API, what it maps, drops or refuses (upstream_fields.go).
func TestConformanceTablesDoc(t *testing.T) {
	const path = "../../docs/translation.md"
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	for _, s := range []struct{ name, want string }{
		{"requests", ConformanceTable()},
		{"upstreams", UpstreamTables()},
	} {
		start, end := "<!-- conformance:"+s.name+" -->\n", "<!-- /conformance:"+s.name+" -->"
		i, j := strings.Index(doc, start), strings.Index(doc, end)
		if i < 0 || j < i {
			t.Fatalf("%s lacks the %q ... %q section", path, start, end)
		}
		if got := doc[i+len(start) : j]; got != s.want {
			if *update {
				doc = doc[:i+len(start)] + s.want + doc[j:]
				continue
			}
			t.Errorf("%s's %s table is stale (go test -run TestConformanceTablesDoc -update rewrites it); it must read:\n%s", path, s.name, s.want)
		}
	}
	if *update {
		if err := os.WriteFile(path, []byte(doc), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
