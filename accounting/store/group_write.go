package store

import (
	"context"
	"encoding/json"
	"time"

	"github.com/jackc/pgx/v5"
)

// writeGroup applies a batch's decisions in one round trip of set-based statements: new
// reservations, settled reservations, each changed account once, the charges (whose
// trigger keeps the usage rollup), and the key spend windows (one row change per window).
// Every row it changes is locked by the batch (new rows aside). Each UPDATE and the MERGE
// also names its rows with = ANY, so the plan reads them by index whatever it guesses of
// unnest (in the MERGE's join condition that is safe: a window that matches has its key
// among them). Ids are text[] cast to uuid[] (why: readGroup).
func writeGroup(ctx context.Context, tx batchSender, st *groupState, batch []*batchOp, outs []opOutcome) error {
	b := &pgx.Batch{}

	var ins struct {
		id, req, acct, key, model []string
		amount                    []int64
		pool                      []int16
		created, expires          []time.Time
	}
	for _, r := range st.byRequest {
		if !r.fresh {
			continue
		}
		ins.id, ins.req, ins.acct, ins.key, ins.model = append(ins.id, r.id), append(ins.req, r.requestID),
			append(ins.acct, r.account), append(ins.key, r.key), append(ins.model, r.model)
		ins.amount, ins.pool = append(ins.amount, r.amount), append(ins.pool, r.pool)
		ins.created, ins.expires = append(ins.created, r.created), append(ins.expires, r.expires)
	}
	if len(ins.id) > 0 {
		b.Queue(`INSERT INTO reservations (id, request_id, account_id, key_id, model, amount, pool, created_at, expires_at)
			SELECT * FROM unnest($1::text[]::uuid[], $2::text[], $3::text[]::uuid[], $4::text[]::uuid[], $5::text[], $6::bigint[],
				$7::smallint[], $8::timestamptz[], $9::timestamptz[])`,
			ins.id, ins.req, ins.acct, ins.key, ins.model, ins.amount, ins.pool, ins.created, ins.expires)
	}

	var set struct {
		id, state []string
		actual    []*int64
		charged   []int64
		settled   []time.Time
		reason    []*string
	}
	// The key spend windows' changes, held and committed, from the new holds and the
	// settlements (each at its reservation's creation time).
	windows := map[spendWindow][2]int64{}
	change := func(r *gRes, held, committed int64) {
		if r.amount <= 0 {
			return
		}
		day, month := windowsOf(r.key, r.created)
		for _, w := range []spendWindow{day, month} {
			v := windows[w]
			windows[w] = [2]int64{v[0] + held, v[1] + committed}
		}
	}
	for _, r := range st.locked {
		if !r.settled {
			continue
		}
		set.id, set.state, set.actual = append(set.id, r.id), append(set.state, r.state), append(set.actual, r.actual)
		set.charged, set.settled, set.reason = append(set.charged, r.charged), append(set.settled, r.settledAt), append(set.reason, r.reason)
		change(r, -r.amount, r.charged)
	}
	if len(set.id) > 0 {
		b.Queue(`UPDATE reservations r SET state = u.state, actual = u.actual, charged = u.charged,
				settled_at = u.settled_at, release_reason = u.reason
			FROM unnest($1::text[]::uuid[], $2::text[], $3::bigint[], $4::bigint[], $5::timestamptz[], $6::text[])
				AS u (id, state, actual, charged, settled_at, reason)
			WHERE r.id = u.id AND r.id = ANY ($1::text[]::uuid[])`, set.id, set.state, set.actual, set.charged, set.settled, set.reason)
	}

	var acc struct {
		id                []string
		balance, reserved []int64
		n, nh             []int32
		minute            []*time.Time
		count             []*int32
	}
	for id, a := range st.accounts {
		if a.balance == a.origBalance && a.reserved == a.origReserved && a.inFlight == a.origIn &&
			a.inFlightHigh == a.origHigh && !a.rpmChanged {
			continue
		}
		acc.id = append(acc.id, id)
		acc.balance, acc.reserved = append(acc.balance, a.balance-a.origBalance), append(acc.reserved, a.reserved-a.origReserved)
		acc.n, acc.nh = append(acc.n, a.inFlight-a.origIn), append(acc.nh, a.inFlightHigh-a.origHigh)
		if a.rpmChanged {
			acc.minute, acc.count = append(acc.minute, a.rpmMinute), append(acc.count, &a.rpmCount)
		} else {
			acc.minute, acc.count = append(acc.minute, nil), append(acc.count, nil)
		}
	}
	if len(acc.id) > 0 {
		b.Queue(`UPDATE accounts a SET balance = a.balance + d.balance, reserved = a.reserved + d.reserved,
				in_flight = a.in_flight + d.n, in_flight_high_cost = a.in_flight_high_cost + d.nh,
				rpm_minute = coalesce(d.minute, a.rpm_minute), rpm_count = coalesce(d.count, a.rpm_count)
			FROM unnest($1::text[]::uuid[], $2::bigint[], $3::bigint[], $4::integer[], $5::integer[], $6::timestamptz[], $7::integer[])
				AS d (id, balance, reserved, n, nh, minute, count)
			WHERE a.id = d.id AND a.id = ANY ($1::text[]::uuid[])`, acc.id, acc.balance, acc.reserved, acc.n, acc.nh, acc.minute, acc.count)
	}

	var ch struct {
		acct, res, key, model []string
		amount                []int64
		upstream, channel     []*string
		in, out               []int64
		units                 []*string
		at                    []time.Time
	}
	for i, op := range batch {
		if op.kind != opCommit || outs[i].outcome != "committed" {
			continue
		}
		r := st.locked[op.commit.ReservationID]
		c := op.commit
		var units *string
		if len(c.Usage.Units) > 0 {
			j, err := json.Marshal(c.Usage.Units)
			if err != nil {
				return err
			}
			units = ptrTo(string(j))
		}
		ch.acct, ch.res, ch.key, ch.model = append(ch.acct, r.account), append(ch.res, r.id), append(ch.key, r.key), append(ch.model, r.model)
		ch.amount = append(ch.amount, -r.charged)
		ch.upstream, ch.channel = append(ch.upstream, nonEmpty(c.UpstreamModel)), append(ch.channel, nonEmpty(c.Channel))
		ch.in, ch.out, ch.units = append(ch.in, c.Usage.InputTokens), append(ch.out, c.Usage.OutputTokens), append(ch.units, units)
		ch.at = append(ch.at, r.settledAt)
	}
	if len(ch.res) > 0 {
		b.Queue(`INSERT INTO ledger_entries (account_id, kind, amount, reservation_id, key_id, model, upstream_model,
				channel, input_tokens, output_tokens, units, created_at)
			SELECT u.acct, 'charge', u.amount, u.res, u.key, u.model, u.upstream, u.channel, u.inp, u.outp,
				u.units::jsonb, u.at
			FROM unnest($1::text[]::uuid[], $2::bigint[], $3::text[]::uuid[], $4::text[]::uuid[], $5::text[], $6::text[], $7::text[],
				$8::bigint[], $9::bigint[], $10::text[], $11::timestamptz[])
				AS u (acct, amount, res, key, model, upstream, channel, inp, outp, units, at)`,
			ch.acct, ch.amount, ch.res, ch.key, ch.model, ch.upstream, ch.channel, ch.in, ch.out, ch.units, ch.at)
	}

	// Windows: one row change per window, the batch's new holds and its settlements
	// together, in one statement. A window a settlement names exists already (a hold made
	// it); one that does not exist is inserted with the new holds. Every key here is one
	// of an account the batch locked, so no other transaction inserts the same window
	// meanwhile.
	for _, r := range st.byRequest {
		if r.fresh {
			change(r, r.amount, 0)
		}
	}
	if len(windows) > 0 {
		var key, period, start []string
		var dHeld, dCommitted []int64
		for w, v := range windows {
			key, period, start = append(key, w.key), append(period, w.period), append(start, w.start)
			dHeld, dCommitted = append(dHeld, v[0]), append(dCommitted, v[1])
		}
		b.Queue(`MERGE INTO key_spend s
			USING unnest($1::text[]::uuid[], $2::text[], $3::text[], $4::bigint[], $5::bigint[]) AS u (key_id, period, start, held, committed)
			ON s.key_id = u.key_id AND s.period = u.period AND s.period_start = u.start::date
				AND s.key_id = ANY ($1::text[]::uuid[])
			WHEN MATCHED THEN UPDATE SET held = s.held + u.held, committed = s.committed + u.committed
			WHEN NOT MATCHED THEN INSERT (key_id, period, period_start, held, committed)
				VALUES (u.key_id, u.period, u.start::date, u.held, u.committed)`,
			key, period, start, dHeld, dCommitted)
	}
	// The transaction ends in this round trip (no COMMIT of its own), also when the batch
	// changed nothing (refusals and replays only): its BEGIN went with the reads.
	b.Queue(`COMMIT`)
	return tx.SendBatch(ctx, b).Close()
}

func nonEmpty(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}
