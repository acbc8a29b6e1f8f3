package docs

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/yuin/goldmark"
	"github.com/yuin/goldmark/ast"
	"github.com/yuin/goldmark/extension"
	east "github.com/yuin/goldmark/extension/ast"
	"github.com/yuin/goldmark/text"

	"github.com/llmgw/gateway/extproc/catalog"
	"github.com/llmgw/gateway/internal/demoenv"
)

// priceTablePage is the page whose price list must match the catalogs.
const priceTablePage = "docs/pricing.md"

// priceCatalogs are the catalogs the price list covers, by the word of its last column.
var priceCatalogs = map[string]string{
	"demo":               "deploy/local/catalog.yaml",
	"production example": "deploy/overlays/production/catalog.yaml",
}

// TestPriceListMatchesTheCatalogs renders docs/pricing.md's tables and checks its price
// list (the table whose first column is "model" and last "catalog") against the
// catalogs, loaded with extproc/catalog: every model of each catalog has exactly one
// row, every row names models of its catalog only, and each model's kind and prices
// read as the catalog says (input / output per million tokens in credits, the rest of
// its rate card and per-unit prices in "other"). A table cut in two by a blank line
// loses the rows after the cut, and so fails here.
func TestPriceListMatchesTheCatalogs(t *testing.T) {
	rows := priceList(t)
	for word, file := range priceCatalogs {
		c := loadCatalog(t, file)
		seen := map[string]int{}
		for _, r := range rows {
			if r.catalog != word {
				continue
			}
			for _, id := range r.models {
				seen[id]++
				m, ok := c.Model(id)
				if !ok {
					t.Errorf("%s: %s is in the price list as %s, but not in %s", priceTablePage, id, word, file)
					continue
				}
				checkRow(t, r, m)
			}
		}
		for _, m := range c.Models() {
			if seen[m.ID] != 1 {
				t.Errorf("%s: %s (%s) has %d rows in the price list, want 1", priceTablePage, m.ID, file, seen[m.ID])
			}
		}
	}
	for _, r := range rows {
		if _, ok := priceCatalogs[r.catalog]; !ok {
			t.Errorf("%s: price list row %v names catalog %q, not one of %v", priceTablePage, r.models, r.catalog, keys(priceCatalogs))
		}
	}
}

// priceRow is one row of the price list, as plain text.
type priceRow struct {
	models              []string
	kind, tokens, other string
	catalog             string
	kinds               []string // the kind column split at commas
}

// priceList renders the price list of priceTablePage with goldmark's table extension.
func priceList(t *testing.T) []priceRow {
	t.Helper()
	src, err := os.ReadFile(filepath.Join(root, priceTablePage))
	if err != nil {
		t.Fatal(err)
	}
	md := goldmark.New(goldmark.WithExtensions(extension.Table))
	doc := md.Parser().Parse(text.NewReader(src))
	want := []string{"model", "kind", "input / output, credits per million tokens", "other", "catalog"}
	var rows []priceRow
	tables := 0
	_ = ast.Walk(doc, func(n ast.Node, entering bool) (ast.WalkStatus, error) {
		table, ok := n.(*east.Table)
		if !entering || !ok {
			return ast.WalkContinue, nil
		}
		header := cells(table.FirstChild(), src)
		if len(header) == 0 || header[0] != "model" || header[len(header)-1] != "catalog" {
			return ast.WalkSkipChildren, nil
		}
		tables++
		if !slices.Equal(header, want) {
			t.Fatalf("%s: price list columns %q, want %q", priceTablePage, header, want)
		}
		for r := table.FirstChild().NextSibling(); r != nil; r = r.NextSibling() {
			c := cells(r, src)
			row := priceRow{kind: c[1], tokens: c[2], other: c[3], catalog: c[4]}
			for _, id := range strings.Split(c[0], ",") {
				row.models = append(row.models, strings.TrimSpace(id))
			}
			for _, k := range strings.Split(c[1], ",") {
				row.kinds = append(row.kinds, strings.TrimSpace(k))
			}
			rows = append(rows, row)
		}
		return ast.WalkSkipChildren, nil
	})
	if tables != 1 {
		t.Fatalf("%s: %d price lists (a table headed model … catalog), want 1", priceTablePage, tables)
	}
	return rows
}

// cells are the plain texts of a table header's or row's cells.
func cells(row ast.Node, src []byte) []string {
	var out []string
	for c := row.FirstChild(); c != nil; c = c.NextSibling() {
		out = append(out, strings.TrimSpace(plainText(c, src)))
	}
	return out
}

// loadCatalog loads a catalog file with the project's loader, with stand-ins for the
// credentials it names (the demo's as the local stack sets them).
func loadCatalog(t *testing.T, file string) *catalog.Catalog {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(root, file))
	if err != nil {
		t.Fatal(err)
	}
	lookup := func(name string) (string, bool) {
		if v, ok := demoenv.Lookup(name); ok {
			return v, true
		}
		return "stand-in-" + name, true
	}
	readFile := func(name string) ([]byte, error) { return []byte("stand-in-key\n"), nil }
	c, err := catalog.Parse(data, lookup, readFile)
	if err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	return c
}

// checkRow checks that row says m's kind and prices.
func checkRow(t *testing.T, r priceRow, m *catalog.Model) {
	t.Helper()
	kind := string(m.Kind)
	if !slices.Contains(r.kinds, kind) {
		t.Errorf("%s: %s is a %s model, its row says %q", priceTablePage, m.ID, kind, r.kind)
	}
	if m.HighCost != slices.Contains(r.kinds, "high cost") {
		t.Errorf("%s: %s high cost = %v, its row says %q", priceTablePage, m.ID, m.HighCost, r.kind)
	}
	tokens, other := priceCells(m)
	if !saysExactly(r.tokens, tokens) {
		t.Errorf("%s: %s input / output = %q, want %q (a note in parentheses may follow)", priceTablePage, m.ID, r.tokens, tokens)
	}
	if !saysExactly(r.other, other) {
		t.Errorf("%s: %s other = %q, want %q (a note in parentheses may follow)", priceTablePage, m.ID, r.other, other)
	}
}

// saysExactly reports whether a cell is want, possibly followed by a note in
// parentheses.
func saysExactly(cell, want string) bool {
	if cell == want {
		return true
	}
	note, ok := strings.CutPrefix(cell, want+" (")
	if want == "" {
		note, ok = strings.CutPrefix(cell, "(")
	}
	return ok && strings.HasSuffix(note, ")")
}

// priceCells are what the price list's two price columns must say of m: input /
// output in credits per million tokens ("free", "—" for an unpublished price, empty for
// a model priced per unit), and the rest of its rate card and its per-unit prices.
func priceCells(m *catalog.Model) (tokens, other string) {
	if m.Free {
		return "free", ""
	}
	p := m.Prices
	if p.InputPerMTok != nil || p.OutputPerMTok != nil {
		tokens = credits(p.InputPerMTok) + " / " + credits(p.OutputPerMTok)
	}
	var parts []string
	if extra := rateExtras(p.Rates); extra != "" {
		parts = append(parts, extra)
	}
	if lc := p.LongContext; lc != nil {
		parts = append(parts, fmt.Sprintf("above %s input tokens: %s", thousands(lc.AboveInputTokens), rates(lc.Rates)))
	}
	for _, name := range sortedKeys(p.ServiceTiers) {
		parts = append(parts, "tier "+name+": "+rates(p.ServiceTiers[name]))
	}
	for _, name := range sortedKeys(p.InferenceGeo) {
		parts = append(parts, "region "+name+": "+rates(p.InferenceGeo[name]))
	}
	for _, u := range []struct {
		price *int64
		unit  string
	}{{p.PerMillionChars, "per million characters"}, {p.PerImage, "per image"}, {p.PerSecond, "per second"}} {
		if u.price != nil {
			parts = append(parts, credits(u.price)+" "+u.unit)
		}
	}
	return tokens, strings.Join(parts, "; ")
}

// rates reads one level of a rate card: "I / O" (or the one set) and its extras.
func rates(r catalog.Rates) string {
	var parts []string
	switch {
	case r.InputPerMTok != nil && r.OutputPerMTok != nil:
		parts = append(parts, credits(r.InputPerMTok)+" / "+credits(r.OutputPerMTok))
	case r.InputPerMTok != nil:
		parts = append(parts, "input "+credits(r.InputPerMTok))
	case r.OutputPerMTok != nil:
		parts = append(parts, "output "+credits(r.OutputPerMTok))
	}
	if extra := rateExtras(r); extra != "" {
		parts = append(parts, extra)
	}
	return strings.Join(parts, ", ")
}

// rateExtras reads the prices of a rate card level besides input and output.
func rateExtras(r catalog.Rates) string {
	var parts []string
	for _, f := range []struct {
		price *int64
		name  string
	}{
		{r.CacheReadPerMTok, "cache read"}, {r.CacheWritePerMTok, "cache write"},
		{r.CacheWrite1hPerMTok, "1-hour cache write"}, {r.AudioInputPerMTok, "audio input"},
		{r.AudioOutputPerMTok, "audio output"}, {r.ImageInputPerMTok, "image input"},
	} {
		if f.price != nil {
			parts = append(parts, f.name+" "+credits(f.price))
		}
	}
	return strings.Join(parts, ", ")
}

// credits prints micro-credits as credits with at least two decimals ("0.10",
// "0.125"), "—" when the price is unpublished.
func credits(micros *int64) string {
	if micros == nil {
		return "—"
	}
	frac := strings.TrimRight(fmt.Sprintf("%06d", *micros%1_000_000), "0")
	for len(frac) < 2 {
		frac += "0"
	}
	return strconv.FormatInt(*micros/1_000_000, 10) + "." + frac
}

// thousands prints n with commas between groups of three digits.
func thousands(n int64) string {
	s := strconv.FormatInt(n, 10)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

func sortedKeys[V any](m map[string]V) []string {
	out := keys(m)
	slices.Sort(out)
	return out
}

func keys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}
