package lifecycle

// Settlement: the hold committed or released, once, after the reply (budget.go,
// settlement.go), and the one record of the request's money.

import (
	"context"
	"maps"
	"slices"
	"strconv"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

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
	r.verdict = verdict{outcome: OutcomeRelease}
	id := r.reservation.ID
	record := r.settledRecord(ledger.Usage{})
	sp := r.traceSettlement("release")
	r.svc.settle(r.hold, func(ctx context.Context) error {
		_, err := r.svc.cfg.Ledger.Release(sp.ctx(ctx), id, reason)
		return err
	}, func(err error) {
		sp.end("released", 0, err)
		if err != nil {
			// The hold expires server-side at the end of its lease.
			r.log().Warn("release failed", zap.String("reservation", id), zap.Error(err))
			return
		}
		r.svc.cfg.Log.Info("settled", append(record, zap.String("outcome", "released"),
			zap.Int64("charged_micros", 0), zap.String("reason", reason))...)
	})
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
	// Accounting charges the hold at most (Capped).
	r.verdict = verdict{outcome: OutcomeCommit, charge: min(actual, r.reservation.Amount), usage: u}
	cr := ledger.CommitRequest{
		ReservationID: r.reservation.ID,
		Actual:        actual,
		Usage:         u,
		UpstreamModel: r.channel.UpstreamModel,
		Channel:       r.channel.Name,
	}
	record := r.settledRecord(u)
	var res ledger.CommitResult
	sp := r.traceSettlement("commit")
	r.svc.settle(r.hold, func(ctx context.Context) error {
		var err error
		res, err = r.svc.cfg.Ledger.Commit(sp.ctx(ctx), cr)
		return err
	}, func(err error) {
		sp.end("committed", res.Charged, err)
		if err != nil {
			r.log().Error("commit failed", zap.String("reservation", cr.ReservationID), zap.Error(err))
			return
		}
		r.svc.cfg.Log.Info("settled", append(record, zap.String("outcome", "committed"),
			zap.Int64("charged_micros", res.Charged), zap.Int64("actual_micros", actual), zap.Bool("capped", res.Capped))...)
	})
}

// settledRecord is the one record of a request's money, but its outcome and charge: the
// request id (as r.log's lines carry it: the record is logged without r.log, whose
// logger each request would make only for this line), who, what, usage and hold. It
// never carries a secret: keys appear by id only. It is built on the request's
// goroutine; the settlement logs it when it has landed.
func (r *Request) settledRecord(u ledger.Usage) []zap.Field {
	var channel, upstream string
	if r.channel != nil {
		channel, upstream = r.channel.Name, r.channel.UpstreamModel
	}
	// Room for the attempts and what the settlement adds when it lands (outcome, charge,
	// …): appending to a full slice copied the whole record (≈1.4 KB a request).
	fields := append(make([]zap.Field, 0, 17),
		r.idField(),
		zap.String("reservation", r.reservation.ID),
		zap.String("account", r.grant.AccountID),
		zap.String("key_id", r.grant.KeyID),
		zap.String("model", r.model.ID),
		zap.String("upstream_model", upstream),
		zap.String("channel", channel),
		zap.Int64("input_tokens", u.InputTokens),
		zap.Int64("output_tokens", u.OutputTokens),
		zap.Object("units", unitsField(u.Units)),
		zap.Int64("hold_micros", r.reservation.Amount),
	)
	if at := r.Attempts(); len(at) > 0 {
		// Every attempt of a failover request, in order: channel:outcome:status.
		names := make([]string, len(at))
		for i, a := range at {
			names[i] = a.Channel + ":" + a.Outcome.String() + ":" + strconv.Itoa(a.Status)
		}
		fields = append(fields, zap.Strings("attempts", names))
	}
	return fields
}

// unitsField logs billed units as an object, keys in order, without the reflection
// zap.Any pays (encoding/json for every settlement's map, empty or not: ≈3 % of
// extproc's CPU at 1,000 requests/s).
type unitsField map[string]int64

func (u unitsField) MarshalLogObject(enc zapcore.ObjectEncoder) error {
	for _, k := range slices.Sorted(maps.Keys(u)) {
		enc.AddInt64(k, u[k])
	}
	return nil
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
