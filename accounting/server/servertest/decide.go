package servertest

import (
	"time"

	"github.com/llmgw/gateway/accounting/engine/machine"
)

// Decide decides any command of the ledger's state machine, built for the present
// time, as the store's calls do: for tests that set up what no store call offers, such
// as projects and a key's own rate limits. Commands that create something carry the
// id the test chose.
func (m *Memory) Decide(build func(at time.Time) machine.Command) (machine.Answer, error) {
	return m.decide("", func(_ string, at time.Time) machine.Command { return build(at) })
}
