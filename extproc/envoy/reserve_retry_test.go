package envoy_test

import (
	"context"
	"errors"
	"testing"

	"github.com/llmgw/gateway/accounting/ledger"
	"github.com/llmgw/gateway/extproc/internal/replay"
)

// lossyLedger makes the first Reserve's reply get lost after accounting made the hold.
type lossyLedger struct {
	*replay.FakeLedger
	lost bool
}

func (l *lossyLedger) Reserve(ctx context.Context, r ledger.ReserveRequest) (ledger.Reservation, error) {
	res, err := l.FakeLedger.Reserve(ctx, r)
	if err == nil && !l.lost {
		l.lost = true
		return ledger.Reservation{}, errors.New("connection reset")
	}
	return res, err
}

// TestLostReserveReplyIsRetriedWithTheSameRequestID checks that a Reserve whose reply was
// lost is retried under the same idempotency key (accounting answers it with the same
// hold), so the request is admitted and no second or unknown hold is made.
func TestLostReserveReplyIsRetriedWithTheSameRequestID(t *testing.T) {
	f := &lossyLedger{FakeLedger: newFake()}
	h := replay.Start(t, replay.Service(t, f))
	x := admit(t, h, chatOK)
	x.Close()
	if len(f.Reserves) != 2 || f.Reserves[0].RequestID != f.Reserves[1].RequestID {
		t.Fatalf("reserves = %+v, want one retry with the same request id", f.Reserves)
	}
	if _, commits, releases := f.Counts(); commits+releases != 1 {
		t.Errorf("commits %d releases %d: the hold must be settled once", commits, releases)
	}
}
