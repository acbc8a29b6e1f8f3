package translate

import (
	"os"
	"strings"
	"testing"
)

// TestReadmeConformanceTable: the README's request conformance table is the fields
// table (the one home of each field's fate), rendered.
func TestReadmeConformanceTable(t *testing.T) {
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	const start, end = "<!-- conformance:requests -->\n", "<!-- /conformance:requests -->"
	s := string(b)
	i, j := strings.Index(s, start), strings.Index(s, end)
	if i < 0 || j < i {
		t.Fatalf("README.md lacks the %q ... %q section", start, end)
	}
	if got, want := s[i+len(start):j], ConformanceTable(); got != want {
		t.Errorf("README.md's conformance table is stale; it must read:\n%s", want)
	}
}
