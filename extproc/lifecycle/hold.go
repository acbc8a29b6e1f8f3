package lifecycle

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/llmgw/gateway/accounting/ledger"
	"go.uber.org/zap"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// hold is an admitted request's reservation while extproc owns it: a keeper renews its
// lease until its settlement has ended (see budget.go).
type hold struct {
	res  ledger.Reservation
	log  func() *zap.Logger // the request's logger, made only when the keeper logs
	stop chan struct{}
	done chan struct{} // closed when the keeper returned
	once sync.Once
}

// end stops the keeper: the hold is settled, or given up to the sweeper. A renewal
// already in flight still finishes.
func (h *hold) end() { h.once.Do(func() { close(h.stop) }) }

// endAndWait is end, then waits until the keeper returned (a renewal in flight ends
// within its timeout), so that nothing renews the hold afterwards. Only for a
// background settlement: it may wait up to a third of the lease.
func (h *hold) endAndWait() {
	h.end()
	<-h.done
}

// newHold starts keeping res; log makes the request's logger.
func (s *Service) newHold(res ledger.Reservation, log func() *zap.Logger) *hold {
	h := &hold{res: res, log: log, stop: make(chan struct{}), done: make(chan struct{})}
	go s.keep(h)
	return h
}

// keep renews h every third of its lease until h ends. A failed renewal is tried again
// sooner (the lease still has two thirds left); a refusal (the hold is no longer held)
// or an unknown reservation ends the keeping.
func (s *Service) keep(h *hold) {
	defer close(h.done)
	period := s.cfg.LeaseTTL / 3
	t := time.NewTimer(period)
	defer t.Stop()
	for {
		select {
		case <-h.stop:
			return
		case <-t.C:
		}
		select {
		case <-h.stop: // both were ready: ended, renew nothing more
			return
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), period)
		_, err := s.cfg.Ledger.Renew(ctx, h.res.ID, s.cfg.LeaseTTL)
		cancel()
		switch {
		case err == nil:
			t.Reset(period)
		case final(err):
			h.log().Info("hold no longer held: stop renewing", zap.String("reservation", h.res.ID), zap.Error(err))
			return
		default:
			h.log().Warn("renew failed", zap.String("reservation", h.res.ID), zap.Error(err))
			t.Reset(min(period, time.Second))
		}
	}
}

// final reports whether a ledger error is an answer (a refusal, an unknown reservation)
// rather than a failure to get one: only failures are retried.
func final(err error) bool {
	return ledger.ReasonOf(err) != 0 || errors.Is(err, ledger.ErrNotFound)
}

// settleInBackground runs call (the commit or release of the request's hold) in the
// background, after the client's reply: it is retried until accounting answers it — it
// lands, or is refused for good (accounting expired the hold: nothing is charged, never
// twice) — however long accounting is away (unreachable or busy). An accounting that is
// there and keeps failing the call otherwise (an internal error) is retried for one
// lease, then given up: the keeper stops and the lease frees the hold. A settlement is idempotent by reservation id
// (a commit made twice is answered "replayed"), so a retry after a reply that was lost
// charges nothing more. traced hears the last error. The hold's keeper stops when the
// call ends; until then it keeps renewing the lease, so that the hold is still held when
// accounting is back. The call is a part of the request: its record waits for it.
func (r *Request) settleInBackground(call func(context.Context) error, traced func(error)) {
	s, h := r.svc, r.hold
	s.pending.add()
	r.startPart()
	backgroundWork.Go(func() {
		defer s.pending.done()
		defer r.endPart()
		defer h.endAndWait()
		var giveUp time.Time // set by the first failure that is not accounting being away
		attempts := 0
		err := s.retry(func() time.Time {
			if giveUp.IsZero() {
				return farFuture
			}
			return giveUp
		}, func(ctx context.Context) error {
			if attempts++; attempts == 2 {
				s.settling.retrying.Add(1)
			}
			if attempts > 1 {
				s.settling.retries.Add(1)
			}
			err := call(ctx)
			if err != nil && !final(err) && !accountingAway(err) && giveUp.IsZero() {
				giveUp = time.Now().Add(s.cfg.LeaseTTL)
			}
			return err
		})
		if attempts > 1 {
			s.settling.retrying.Add(-1)
		}
		if err != nil && !final(err) {
			s.settling.givenUp.Add(1)
			r.log().Error("settlement given up: accounting keeps failing it; the lease frees the hold",
				zap.Error(err))
		}
		r.landed.err = err
		traced(err)
	})
}

// settleCounts count the settlements' retries (SettleStats).
type settleCounts struct {
	retries, retrying, givenUp atomic.Int64
}

// SettleStats is what became of the settlements' calls so far.
type SettleStats struct {
	// Retries: commit or release calls made again after a failed attempt.
	Retries int64
	// Retrying: settlements whose first attempt failed and that are still being tried.
	Retrying int64
	// GivenUp: settlements given up (accounting kept failing them for a lease): their
	// holds expire, and nothing is charged.
	GivenUp int64
}

// SettleStats returns the settlements' retry counts, for the metrics.
func (s *Service) SettleStats() SettleStats {
	return SettleStats{Retries: s.settling.retries.Load(), Retrying: s.settling.retrying.Load(), GivenUp: s.settling.givenUp.Load()}
}

// held tells the observers of a hold accounting granted.
func (s *Service) held(res ledger.Reservation) {
	for _, o := range s.observers {
		o.Held(res)
	}
}

// retry calls call until it succeeds or fails for good, or until the time until()
// returns has passed (checked after each failure; nil: no time bound), with a capped
// exponential backoff, never sleeping past that time, and a bound on each attempt. It
// is the one retry loop of every ledger call that must eventually land.
func (s *Service) retry(until func() time.Time, call func(context.Context) error) error {
	backoff := 50 * time.Millisecond
	for {
		ctx, cancel := context.WithTimeout(context.Background(), settleAttemptTimeout)
		err := call(ctx)
		cancel()
		if err == nil || final(err) {
			return err
		}
		wait := backoff
		if until != nil {
			left := time.Until(until())
			if left <= 0 {
				return err
			}
			wait = min(wait, left)
		}
		time.Sleep(wait)
		backoff = min(2*backoff, maxSettleBackoff)
	}
}

// farFuture is no time bound for retry.
var farFuture = time.Now().Add(100 * 365 * 24 * time.Hour)

// accountingAway reports whether a ledger call failed because accounting could not be
// reached or was busy (nothing changed; the same call can land later), as opposed to an
// accounting that answered with an error of its own.
func accountingAway(err error) bool {
	switch status.Code(err) {
	case codes.Unavailable, codes.DeadlineExceeded, codes.Canceled:
		return true
	}
	return errors.Is(err, context.DeadlineExceeded) || errors.Is(err, ledger.ErrBusy)
}

// reasonReserveTimedOut is the release reason of a hold made by a reservation whose
// reply did not come within the admission budget.
const reasonReserveTimedOut = "reserve_timed_out"

// abandonReserve makes sure a reservation whose reply did not come within the admission
// budget leaves no hold: the client was already told to retry, so the same request id
// is reserved again (accounting answers a reservation that exists with that same
// reservation) until accounting answers, and whatever hold it names is released. Were
// it never answered, any hold made in between expires with its lease. The hold it finds
// and its release are the request's settlement (record.go): a part of the request, its
// record waits for it.
func (r *Request) abandonReserve(req ledger.ReserveRequest) {
	s := r.svc
	s.pending.add()
	r.startPart()
	backgroundWork.Go(func() {
		defer s.pending.done()
		defer r.endPart()
		deadline := time.Now().Add(s.cfg.LeaseTTL)
		var res ledger.Reservation
		err := s.retry(func() time.Time { return deadline }, func(ctx context.Context) error {
			var err error
			res, err = s.cfg.Ledger.Reserve(ctx, req)
			return err
		})
		if err != nil {
			return // refused (no hold was made), or accounting never answered (the lease frees it)
		}
		s.held(res)
		err = s.retry(func() time.Time { return deadline }, func(ctx context.Context) error {
			_, err := s.cfg.Ledger.Release(ctx, res.ID, reasonReserveTimedOut)
			return err
		})
		r.abandoned = &Settlement{Reservation: res.ID, HoldMicros: res.Amount, Outcome: OutcomeRelease,
			Reason: reasonReserveTimedOut, Err: err}
	})
}

// WaitSettled waits until every settlement and abandoned reservation of the Service has
// finished, or ctx is done (a lease keeper ends with its hold's settlement). Drain calls it after the last stream ended,
// tests before they read the ledger.
func (s *Service) WaitSettled(ctx context.Context) error {
	select {
	case <-s.pending.idleC():
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
