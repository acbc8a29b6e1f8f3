package lifecycle

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/llmgw/gateway/extproc/catalog"
	"github.com/llmgw/gateway/extproc/translate"
)

// formatTable renders the channel format table (formats.go) as the package doc shows
// it: each chat format's chat API, default base path and the path of a complete answer
// and of a stream, for upstream model MODEL.
func formatTable() string {
	names := translate.Formats()
	slices.Sort(names)
	var b strings.Builder
	row := func(cols ...string) {
		fmt.Fprintf(&b, "//\t%-17s %-16s %-43s %s\n", cols[0], cols[1], cols[2], cols[3])
	}
	row("format", "chat API", "base", "path after the base: answer | stream")
	for _, n := range names {
		f, _ := translate.FormatNamed(n)
		if f.API == 0 {
			continue
		}
		base := f.Path.Base
		if base == "" {
			base = "-"
		}
		ch := &catalog.Channel{Format: catalog.Format(n), BasePath: "/BASE", UpstreamModel: "MODEL"}
		path := func(stream bool) string {
			return strings.TrimPrefix(upstreamPath(ch, "/v1/chat/completions", f.API, stream), "/BASE")
		}
		row(n, f.API.String(), base, path(false)+" | "+path(true))
	}
	return b.String()
}

// TestFormatTableInPackageDoc: the package doc's format table is the format table.
func TestFormatTableInPackageDoc(t *testing.T) {
	doc, err := os.ReadFile("doc.go")
	if err != nil {
		t.Fatal(err)
	}
	if want := formatTable(); !strings.Contains(string(doc), want) {
		t.Errorf("doc.go's format table differs from formats.go; it should read:\n%s", want)
	}
}
