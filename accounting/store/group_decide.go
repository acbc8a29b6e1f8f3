package store

import (
	"math"
	"time"

	"github.com/google/uuid"
)

// The decisions of a group-commit batch, made in Go on the rows readGroup locked and
// read, operation after operation in queue order, each seeing what the ones before it
// did. Each is exactly the decision of its PL/pgSQL function in migrations/0001_init.sql
// (ledger_reserve, ledger_commit, ledger_release): same checks, same order, same
// outcomes. An operation whose rows the batch did not lock gets outcome "deferred" and
// runs alone.

const deferred = "deferred"

// opTime is the operation's clock (the database's when it has none), at the
// database's precision.
func (st *groupState) opTime(op *batchOp) time.Time {
	t := st.now
	if op.now != nil {
		t = *op.now
	}
	return t.Truncate(time.Microsecond).UTC()
}

func (st *groupState) decide(op *batchOp) opOutcome {
	switch op.kind {
	case opReserve:
		return st.reserve(op)
	case opCommit:
		return st.commit(op)
	}
	return st.release(op)
}

func (st *groupState) reserve(op *batchOp) opOutcome {
	r := op.reserve
	now := st.opTime(op)
	k := st.keys[r.KeyID]
	if k == nil {
		return opOutcome{outcome: "invalid_api_key"}
	}
	a := st.accounts[k.account]
	if a == nil {
		return opOutcome{outcome: deferred}
	}
	if prior := st.byRequest[r.RequestID]; prior != nil {
		if prior.key != r.KeyID {
			return opOutcome{outcome: "already_exists"}
		}
		return resOutcome("replayed", prior)
	}
	switch {
	case k.disabled || k.revoked || (k.expires != nil && !k.expires.After(now)):
		return opOutcome{outcome: "invalid_api_key"}
	case a.suspended:
		return opOutcome{outcome: "account_suspended"}
	case a.balance-a.reserved < r.Amount:
		return opOutcome{outcome: "insufficient_credits"}
	}
	day := time.Date(now.Year(), now.Month(), now.Day(), 0, 0, 0, 0, time.UTC)
	month := monthStart(now)
	dayW, monthW := windowsOf(r.KeyID, now)
	if r.Amount > 0 {
		for _, w := range []struct {
			limit *int64
			win   spendWindow
			name  string
			end   time.Time
		}{{k.monthly, monthW, "monthly", month.AddDate(0, 1, 0)}, {k.daily, dayW, "daily", day.AddDate(0, 0, 1)}} {
			if w.limit == nil {
				continue
			}
			used := st.used[w.win]
			if used > math.MaxInt64-r.Amount {
				return opOutcome{outcome: deferred} // the statement alone reports the overflow
			}
			if used+r.Amount > *w.limit {
				return refused("key_limit_reached", w.name, retryAfter(now, w.end))
			}
		}
	}
	if a.inFlight >= a.poolGeneral {
		return refused("concurrency_limit_exceeded", "general", nil)
	}
	if r.Pool == 2 && a.inFlightHigh >= a.poolHigh {
		return refused("concurrency_limit_exceeded", "high_cost", nil)
	}
	minute := now.Truncate(time.Minute)
	count := int32(0)
	if a.rpmMinute != nil && !a.rpmMinute.Before(minute) {
		minute, count = *a.rpmMinute, a.rpmCount
	}
	rpm := a.rpmBefore
	if a.toppedUp {
		rpm = a.rpmAfter
	}
	if count >= rpm {
		return refused("rate_limit_exceeded", "rpm", retryAfter(now, minute.Add(time.Minute)))
	}

	res := &gRes{id: newReservationID(), requestID: r.RequestID, account: k.account, key: r.KeyID, model: r.Model,
		amount: r.Amount, pool: int16(r.Pool), state: "held", created: now,
		expires: now.Add(r.TTL.Truncate(time.Microsecond)), fresh: true}
	st.byRequest[r.RequestID] = res
	a.reserved += r.Amount
	a.inFlight++
	if r.Pool == 2 {
		a.inFlightHigh++
	}
	m := minute
	a.rpmMinute, a.rpmCount, a.rpmChanged = &m, count+1, true
	if r.Amount > 0 {
		st.used[dayW] += r.Amount
		st.used[monthW] += r.Amount
	}
	return resOutcome("admitted", res)
}

func (st *groupState) commit(op *batchOp) opOutcome {
	c := op.commit
	res := st.locked[c.ReservationID]
	if res == nil || st.accounts[res.account] == nil {
		return opOutcome{outcome: deferred}
	}
	if res.state != "held" {
		capped := res.actual != nil && *res.actual > res.amount
		out := opOutcome{outcome: "settled", state: ptrTo(res.state), charged: ptrTo(res.charged), capped: &capped}
		if res.state == "committed" {
			out.outcome = "replayed"
		}
		return out
	}
	a := st.accounts[res.account]
	charged := min(c.Actual, res.amount)
	res.state, res.actual, res.charged, res.settledAt, res.settled = "committed", ptrTo(c.Actual), charged, st.opTime(op), true
	a.balance -= charged
	a.release(res)
	st.settleWindows(res, charged)
	capped := c.Actual > res.amount
	return opOutcome{outcome: "committed", state: ptrTo("committed"), charged: &charged, capped: &capped}
}

func (st *groupState) release(op *batchOp) opOutcome {
	res := st.locked[op.resID]
	if res == nil || st.accounts[res.account] == nil {
		return opOutcome{outcome: deferred}
	}
	if res.state != "held" {
		return opOutcome{outcome: "released", state: ptrTo(res.state), charged: ptrTo(res.charged)}
	}
	res.state, res.settledAt, res.settled = "released", st.opTime(op), true
	if op.reason != "" {
		res.reason = ptrTo(op.reason)
	}
	st.accounts[res.account].release(res)
	st.settleWindows(res, 0)
	return opOutcome{outcome: "released", state: ptrTo("released"), charged: ptrTo(int64(0))}
}

// settleWindows moves a settled reservation out of its key's spend windows (those of
// its creation time), as ledger_settle_windows does: held -= amount, committed +=
// charged. Later admissions of the same batch see it.
func (st *groupState) settleWindows(res *gRes, charged int64) {
	if res.amount <= 0 {
		return
	}
	day, month := windowsOf(res.key, res.created)
	st.used[day] += charged - res.amount
	st.used[month] += charged - res.amount
}

// release frees what res held on a.
func (a *gAccount) release(res *gRes) {
	a.reserved -= res.amount
	a.inFlight--
	if res.pool == 2 {
		a.inFlightHigh--
	}
}

func refused(outcome, limit string, retry *int32) opOutcome {
	return opOutcome{outcome: outcome, limit: &limit, retryAfter: retry}
}

// retryAfter is whole seconds from now to end, at least 1.
func retryAfter(now, end time.Time) *int32 {
	s := int32(max(1, math.Ceil(end.Sub(now).Seconds())))
	return &s
}

func resOutcome(outcome string, r *gRes) opOutcome {
	return opOutcome{outcome: outcome, id: ptrTo(r.id), account: ptrTo(r.account), keyID: ptrTo(r.key),
		model: ptrTo(r.model), amount: ptrTo(r.amount), pool: ptrTo(r.pool), state: ptrTo(r.state),
		charged: ptrTo(r.charged), created: ptrTo(r.created), expires: ptrTo(r.expires)}
}

func ptrTo[T any](v T) *T { return &v }

// newReservationID is a new reservation's id in its text form: a version 7 UUID (the
// time in milliseconds, then random bits), as the column's default, ledger_new_id(),
// makes them for ledger_reserve; why ids in time order, migrations/0006.
func newReservationID() string {
	return uuid.Must(uuid.NewV7()).String()
}
