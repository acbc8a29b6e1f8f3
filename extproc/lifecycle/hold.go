package lifecycle

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/llmgw/gateway/accounting/ledger"
	"go.uber.org/zap"
)

// hold is an admitted request's reservation while extproc owns it: a keeper renews its
// lease until its settlement has ended (see budget.go).
type hold struct {
	res  ledger.Reservation
	log  func() *zap.Logger // the request's logger, made only when the keeper logs
	stop chan struct{}
	once sync.Once
}

// end stops the keeper: the hold is settled, or given up to the sweeper.
func (h *hold) end() { h.once.Do(func() { close(h.stop) }) }

// newHold starts keeping res; log makes the request's logger.
func (s *Service) newHold(res ledger.Reservation, log func() *zap.Logger) *hold {
	h := &hold{res: res, log: log, stop: make(chan struct{})}
	go s.keep(h)
	return h
}

// keep renews h every third of its lease until h ends. A failed renewal is tried again
// sooner (the lease still has two thirds left); a refusal (the hold is no longer held)
// or an unknown reservation ends the keeping.
func (s *Service) keep(h *hold) {
	period := s.cfg.LeaseTTL / 3
	t := time.NewTimer(period)
	defer t.Stop()
	for {
		select {
		case <-h.stop:
			return
		case <-t.C:
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

// settle runs call (the commit or release of h) in the background, after the client's
// reply: it is retried until accounting answers it — it lands, or is refused for good
// (accounting expired the hold: nothing is charged, never twice) — however long
// accounting is away. A settlement is idempotent by reservation id (a commit made twice
// is answered "replayed"), so a retry after a reply that was lost charges nothing more.
// done hears the last error. h's keeper stops when settle ends; until then it keeps
// renewing the lease, so that the hold is still held when accounting is back.
func (s *Service) settle(h *hold, call func(context.Context) error, done func(error)) {
	s.pending.add()
	backgroundWork.Go(func() {
		defer s.pending.done()
		defer h.end()
		done(s.retry(nil, call))
	})
}

// retry calls call until it succeeds or fails for good, or until the time until()
// returns has passed (checked after each failure; nil: no time bound), with a capped
// exponential backoff and a bound on each attempt. It is the one retry loop of every
// ledger call that must eventually land.
func (s *Service) retry(until func() time.Time, call func(context.Context) error) error {
	backoff := 50 * time.Millisecond
	for {
		ctx, cancel := context.WithTimeout(context.Background(), settleAttemptTimeout)
		err := call(ctx)
		cancel()
		if err == nil || final(err) || (until != nil && time.Now().After(until())) {
			return err
		}
		time.Sleep(backoff)
		backoff = min(2*backoff, maxSettleBackoff)
	}
}

// abandonReserve makes sure a reservation whose reply did not come within the admission
// budget leaves no hold: the client was already told to retry, so the same request id
// is reserved again (accounting answers a reservation that exists with that same
// reservation) until accounting answers, and whatever hold it names is released. Were
// it never answered, any hold made in between expires with its lease. log is the
// request's logger.
func (s *Service) abandonReserve(req ledger.ReserveRequest, log *zap.Logger) {
	s.pending.add()
	backgroundWork.Go(func() {
		defer s.pending.done()
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
		err = s.retry(func() time.Time { return deadline }, func(ctx context.Context) error {
			_, err := s.cfg.Ledger.Release(ctx, res.ID, "reserve_timed_out")
			return err
		})
		if err != nil && !final(err) {
			log.Warn("release of an abandoned reservation failed: its lease frees it",
				zap.String("reservation", res.ID), zap.Error(err))
		}
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
