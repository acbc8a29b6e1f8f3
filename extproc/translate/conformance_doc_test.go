package translate

import (
	"os"
	"strings"
	"testing"
)

// TestConformanceTableDoc: the request conformance table of docs/translation.md is the
// fields table (the one home of each field's fate), rendered.
func TestConformanceTableDoc(t *testing.T) {
	b, err := os.ReadFile("../../docs/translation.md")
	if err != nil {
		t.Fatal(err)
	}
	const start, end = "<!-- conformance:requests -->\n", "<!-- /conformance:requests -->"
	s := string(b)
	i, j := strings.Index(s, start), strings.Index(s, end)
	if i < 0 || j < i {
		t.Fatalf("docs/translation.md lacks the %q ... %q section", start, end)
	}
	if got, want := s[i+len(start):j], ConformanceTable(); got != want {
		t.Errorf("docs/translation.md's conformance table is stale; it must read:\n%s", want)
	}
}
