package lifecycle

import "testing"

// TestDecideEnd mirrors docs/lifecycle.md's settlement rules for a stream that ended before
// its request was settled.
func TestDecideEnd(t *testing.T) {
	for _, c := range []struct {
		name string
		f    endFacts
		want endRule
	}{
		{"rejected or left before the request was sent", endFacts{Tokens: true}, endRelease},
		{"left before the request was sent, usage impossible", endFacts{Sent: false, Usage: true, Tokens: true}, endRelease},
		{"provider error", endFacts{Sent: true, Failed: true, Tokens: true}, endRelease},
		{"provider error after a usage event", endFacts{Sent: true, Failed: true, Usage: true, Tokens: true}, endRelease},
		{"usage came, then the client left", endFacts{Sent: true, Usage: true, Delivered: true, Tokens: true}, endUsage},
		{"usage came before anything was delivered", endFacts{Sent: true, Usage: true, Tokens: true}, endUsage},
		{"stream cut after delivering, no usage", endFacts{Sent: true, Delivered: true, Tokens: true}, endDelivered},
		{"left after the request was sent, before the first byte", endFacts{Sent: true, Tokens: true, ClientLeft: true}, endPrompt},
		{"extproc failed (panic, cut) after the request was sent, before the first byte", endFacts{Sent: true, Tokens: true}, endRelease},
		{"extproc failed after a usage event", endFacts{Sent: true, Usage: true, Tokens: true}, endUsage},
		{"extproc failed after delivering", endFacts{Sent: true, Delivered: true, Tokens: true}, endDelivered},
		{"per-unit request left before its answer", endFacts{Sent: true, ClientLeft: true}, endRelease},
		{"per-unit request with a delivered stream", endFacts{Sent: true, Delivered: true}, endDelivered},
	} {
		if got := decideEnd(c.f); got != c.want {
			t.Errorf("%s: %+v → %v, want %v", c.name, c.f, got, c.want)
		}
	}
}
