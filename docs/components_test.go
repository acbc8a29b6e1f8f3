package docs

import (
	"strings"
	"testing"

	"github.com/yuin/goldmark/ast"
)

// TestChargeComponentsSayTheirSign checks that every paragraph or list item of the
// documentation that says a charge's components sum to something also says which way
// the signs go: a charge's ledger amount is negative (a debit) and its components are
// listed positive, so "they sum to the amount" alone reads wrong by a sign.
func TestChargeComponentsSayTheirSign(t *testing.T) {
	found := 0
	for _, file := range append(pages(t), checked...) {
		doc, src := parse(t, file)
		_ = ast.Walk(doc, func(n ast.Node, entering bool) (ast.WalkStatus, error) {
			if !entering || (n.Kind() != ast.KindParagraph && n.Kind() != ast.KindListItem) {
				return ast.WalkContinue, nil
			}
			text := strings.Join(strings.Fields(string(n.Lines().Value(src))), " ")
			if n.Kind() == ast.KindListItem {
				text = strings.Join(strings.Fields(plainText(n, src)), " ")
			}
			if !strings.Contains(text, "components") || !strings.Contains(text, "sum to") {
				return ast.WalkContinue, nil
			}
			found++
			if !strings.Contains(text, "negative") || !strings.Contains(text, "positive") {
				t.Errorf("%s: says components sum to an amount without saying the charge is negative and its components positive:\n%s", file, text)
			}
			return ast.WalkSkipChildren, nil
		})
	}
	if found == 0 {
		t.Error("no page says what a charge's components sum to")
	}
}
