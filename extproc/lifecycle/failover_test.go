package lifecycle

import (
	"testing"

	"github.com/llmgw/gateway/extproc/apierr"
)

func TestFailoverVerdict(t *testing.T) {
	const last = apierr.UpstreamError
	for _, tt := range []struct {
		name     string
		outcomes []AttemptOutcome
		want     apierr.Code
	}{
		{"no attempt: the answer's own classification", nil, last},
		{"every account refused", []AttemptOutcome{AttemptAccount, AttemptAccount}, apierr.UpstreamAccountUnavailable},
		{"nothing reachable", []AttemptOutcome{AttemptUnreachable, AttemptUnreachable}, apierr.ServiceUnavailable},
		{"unreachable and refused accounts", []AttemptOutcome{AttemptAccount, AttemptUnreachable, AttemptAccount}, apierr.ServiceUnavailable},
		{"a channel gave an unusable answer", []AttemptOutcome{AttemptAccount, AttemptFailed}, last},
		{"only unusable answers", []AttemptOutcome{AttemptFailed}, last},
		{"refused accounts and a channel without its credential", []AttemptOutcome{AttemptAccount, AttemptNoCredential}, apierr.ServiceUnavailable},
	} {
		if got := failoverVerdict(tt.outcomes, last); got != tt.want {
			t.Errorf("%s: %s, want %s", tt.name, got, tt.want)
		}
	}
}
