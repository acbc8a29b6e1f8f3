package lifecycle

// Settlement: the hold committed or released, once, after the reply (budget.go,
// settlement.go); the request's Record carries it as it landed (record.go).

import (
	"context"

	"github.com/llmgw/gateway/accounting/ledger"
	"github.com/llmgw/gateway/extproc/pricing"
	"github.com/llmgw/gateway/extproc/response"
)

// release returns the hold, once, after the reply (budget.go).
func (r *Request) release(_ context.Context, reason string) {
	if r.reservation == nil || r.settled {
		return
	}
	r.settled = true
	r.settlement = Settlement{Outcome: OutcomeRelease, Reason: reason}
	id := r.reservation.ID
	sp := r.traceSettlement("release")
	r.settleInBackground(func(ctx context.Context) error {
		_, err := r.svc.cfg.Ledger.Release(sp.ctx(ctx), id, reason)
		return err
	}, func(err error) { sp.end("released", 0, err) })
}

// commit charges the actual cost of token usage, once: the sum of its parts at the
// model's rate card, at the tier the answer reports (pricedTier) and the region the
// request named.
func (r *Request) commit(ctx context.Context, u response.Usage) {
	parts, in, out := usageParts(u)
	rec := ledger.Usage{InputTokens: in, OutputTokens: out}
	var actual int64
	if m := r.model; !m.Free {
		rc := r.parsed.RateCard
		sel := pricing.Sel{Tier: pricedTier(&m.Prices, u.ServiceTier, rc.ServiceTier), Geo: rc.InferenceGeo}
		cs := pricing.Charge(&m.Prices, parts, sel)
		actual = pricing.Sum(cs)
		rec.Components, rec.ServiceTier = components(cs), sel.Tier
	}
	r.charge(ctx, actual, rec)
}

// commitUnits charges n of the endpoint's units (characters, images, seconds), once.
func (r *Request) commitUnits(ctx context.Context, n int64) {
	unit := r.endpoint.spec().unit
	var actual int64
	if m := r.model; !m.Free {
		actual = pricing.Units(m.Prices, unit, n)
	}
	r.charge(ctx, actual, ledger.Usage{Units: map[string]int64{string(unit): n}})
}

// charge commits actual with its usage record, once, after the reply (budget.go).
func (r *Request) charge(_ context.Context, actual int64, u ledger.Usage) {
	if r.reservation == nil || r.settled {
		return
	}
	r.settled = true
	r.settlement = Settlement{Outcome: OutcomeCommit, ActualMicros: actual, Usage: u}
	cr := ledger.CommitRequest{
		ReservationID: r.reservation.ID,
		Actual:        actual,
		Usage:         u,
		UpstreamModel: r.channel.UpstreamModel,
		Channel:       r.channel.Name,
	}
	sp := r.traceSettlement("commit")
	r.settleInBackground(func(ctx context.Context) error {
		res, err := r.svc.cfg.Ledger.Commit(sp.ctx(ctx), cr)
		if err == nil {
			r.landed.charged, r.landed.capped, r.landed.replayed = res.Charged, res.Capped, res.Replayed
		}
		return err
	}, func(err error) { sp.end("committed", r.landed.charged, err) })
}

// tokenPriced reports whether the endpoint is priced by tokens.
func (r *Request) tokenPriced() bool {
	b := r.endpoint.spec().billing
	return b == BillTokens || b == BillInputTokens
}

// maxUsage bounds a usage count taken from an upstream: beyond it the number is not a
// real count, and the charge is capped at the hold anyway.
const maxUsage = 1 << 40

// clampUsage turns an upstream's usage count into one that prices safely: negative
// counts are zero, absurd ones are maxUsage (so the cost never overflows).
func clampUsage(n int64) int64 {
	return min(max(n, 0), maxUsage)
}
