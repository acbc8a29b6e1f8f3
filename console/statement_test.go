package console_test

import (
	"regexp"
	"strings"
	"testing"

	"github.com/llmgw/gateway/console"
)

var statementSignsRE = regexp.MustCompile(`(?s)<p class="hint" id="statement-signs">(.*?)</p>`)

// The statement says which way the amounts go: a charge's amount is negative (a debit)
// while its components, the parts of it, are listed positive, so that nobody adds them
// up to the opposite of what was charged.
func TestStatementExplainsTheSigns(t *testing.T) {
	b, _ := startConsole(t, console.Options{})
	_, acc := signedIn(t, b)
	_, body := b.get("/accounts/" + acc + "/statement")
	note := match(t, statementSignsRE, body)
	for _, want := range []string{"negative", "positive", "add up to", "capped"} {
		if !strings.Contains(note, want) {
			t.Errorf("the statement's note on signs does not say %q: %q", want, note)
		}
	}
	if strings.Index(body, `id="statement-signs"`) > strings.Index(body, `<table id="statement">`) {
		t.Error("the note on signs comes after the table it explains")
	}
}
