package ctl

import (
	"strings"
	"testing"

	"github.com/llmgw/gateway/accounting/ledger"
)

// TestEveryRefusalReads: every refusal reason of the ledger reads as words on the
// console (an invalid argument reads as accounting's own message instead).
func TestEveryRefusalReads(t *testing.T) {
	for r := ledger.Reason(1); !strings.HasPrefix(r.String(), "reason("); r++ {
		if r != ledger.ReasonInvalidArgument && reasonText[r] == "" {
			t.Errorf("no text for %s", r)
		}
	}
}
