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
//
// The arrays are unnested in a select list, never as functions in FROM: PostgreSQL
// materializes each function of a FROM clause into a tuplestore of its own (an 8 KB
// array of tuple pointers before the first row), so a statement over eleven arrays
// took more than glibc's 128 KB trim threshold and gave it back at its end: a brk
// system call down and up again per statement, each shrink a TLB flush on every core
// the backend ran on. A select list's functions run in step (ProjectSet), with no
// tuplestore; as unnest(a, b, …) in FROM, a shorter array would end in NULLs.
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
			SELECT unnest($1::text[]::uuid[]), unnest($2::text[]), unnest($3::text[]::uuid[]), unnest($4::text[]::uuid[]),
				unnest($5::text[]), unnest($6::bigint[]), unnest($7::smallint[]), unnest($8::timestamptz[]),
				unnest($9::timestamptz[])`,
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
			FROM (SELECT unnest($1::text[]::uuid[]) AS id, unnest($2::text[]) AS state, unnest($3::bigint[]) AS actual,
				unnest($4::bigint[]) AS charged, unnest($5::timestamptz[]) AS settled_at, unnest($6::text[]) AS reason) AS u
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
			FROM (SELECT unnest($1::text[]::uuid[]) AS id, unnest($2::bigint[]) AS balance, unnest($3::bigint[]) AS reserved,
				unnest($4::integer[]) AS n, unnest($5::integer[]) AS nh, unnest($6::timestamptz[]) AS minute,
				unnest($7::integer[]) AS count) AS d
			WHERE a.id = d.id AND a.id = ANY ($1::text[]::uuid[])`, acc.id, acc.balance, acc.reserved, acc.n, acc.nh, acc.minute, acc.count)
	}

	var ch struct {
		acct, res, key, model []string
		amount                []int64
		upstream, channel     []*string
		in, out               []int64
		units, components     []*string
		tier                  []*string
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
		ch.components, ch.tier = append(ch.components, componentsArg(c.Usage)), append(ch.tier, nonEmpty(c.Usage.ServiceTier))
		ch.at = append(ch.at, r.settledAt)
	}
	if len(ch.res) > 0 {
		b.Queue(`INSERT INTO ledger_entries (account_id, kind, amount, reservation_id, key_id, model, upstream_model,
				channel, input_tokens, output_tokens, units, components, service_tier, created_at)
			SELECT u.acct, 'charge', u.amount, u.res, u.key, u.model, u.upstream, u.channel, u.inp, u.outp,
				u.units::jsonb, u.components::jsonb, u.tier, u.at
			FROM (SELECT unnest($1::text[]::uuid[]) AS acct, unnest($2::bigint[]) AS amount, unnest($3::text[]::uuid[]) AS res,
				unnest($4::text[]::uuid[]) AS key, unnest($5::text[]) AS model, unnest($6::text[]) AS upstream,
				unnest($7::text[]) AS channel, unnest($8::bigint[]) AS inp, unnest($9::bigint[]) AS outp,
				unnest($10::text[]) AS units, unnest($11::text[]) AS components, unnest($12::text[]) AS tier,
				unnest($13::timestamptz[]) AS at) AS u`,
			ch.acct, ch.amount, ch.res, ch.key, ch.model, ch.upstream, ch.channel, ch.in, ch.out, ch.units, ch.components,
			ch.tier, ch.at)
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
			USING (SELECT unnest($1::text[]::uuid[]) AS key_id, unnest($2::text[]) AS period, unnest($3::text[]) AS start,
				unnest($4::bigint[]) AS held, unnest($5::bigint[]) AS committed) AS u
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
