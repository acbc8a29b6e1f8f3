package store

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"
)

// The rows a group-commit batch decides on, read under their locks (see group.go).

// gAccount is a locked account row with its tier's limits; the batch's decisions update
// the current values, and the writes apply what changed.
type gAccount struct {
	balance, reserved, origBalance, origReserved int64
	suspended, toppedUp                          bool
	inFlight, inFlightHigh, origIn, origHigh     int32
	rpmMinute                                    *time.Time // nil: never (-infinity)
	rpmCount                                     int32
	rpmChanged                                   bool
	rpmBefore, rpmAfter, poolGeneral, poolHigh   int32
}

// gKey is a key row.
type gKey struct {
	account        string
	disabled       bool
	revoked        bool
	expires        *time.Time
	daily, monthly *int64
}

// gRes is a reservation row; settled marks one the batch settles, fresh one it creates.
type gRes struct {
	id, requestID, account, key, model string
	amount, charged                    int64
	actual                             *int64
	pool                               int16
	state                              string
	created, expires                   time.Time
	settledAt                          time.Time
	reason                             *string
	settled, fresh                     bool
}

// spendWindow names one key_spend row.
type spendWindow struct {
	key    string
	period string // "d" or "m"
	start  string // the window's first day, YYYY-MM-DD
}

// windowsOf is key's spend windows at t: its UTC day's and its UTC month's.
func windowsOf(key string, t time.Time) (day, month spendWindow) {
	t = t.UTC()
	return spendWindow{key, "d", t.Format(time.DateOnly)}, spendWindow{key, "m", monthStart(t).Format(time.DateOnly)}
}

// groupState is everything a batch decides on.
type groupState struct {
	now       time.Time // the transaction's now(), for operations without a clock
	accounts  map[string]*gAccount
	keys      map[string]*gKey
	locked    map[string]*gRes // reservations this batch holds the lock of, by id
	byRequest map[string]*gRes // reservations by request id
	used      map[spendWindow]int64
}

const resColumns = `id::text, request_id, account_id::text, key_id::text, model, amount, pool, state,
	actual, charged, created_at, expires_at`

func scanRes(row pgx.Rows) (*gRes, error) {
	r := &gRes{}
	err := row.Scan(&r.id, &r.requestID, &r.account, &r.key, &r.model, &r.amount, &r.pool, &r.state,
		&r.actual, &r.charged, &r.created, &r.expires)
	return r, err
}

// readGroup locks the batch's reservation rows, then its account rows (0001's order, each
// in id order), then reads the keys, the reservations of the request ids and the keys'
// spend windows, in one round trip. A reservation row another transaction holds is left
// out (SKIP LOCKED: the operations on it run alone); an account row another
// transaction holds (most often the other replica's writer, on a busy account) is waited
// for, as long as the writer's short lock wait (writerLockWait), past which the whole
// batch fails and each operation runs alone. Skipping held accounts too made two
// replicas on busy accounts send most operations alone (lockorder.go).
//
// Ids travel as text[] cast to uuid[] in the statements ($1::text[]::uuid[]), here and in
// writeGroup: pgx sends a []string for a uuid[] parameter only after its binary encoding
// failed (an error built and dropped for every array of every batch), while text[] it
// encodes at once.
func readGroup(ctx context.Context, tx batchSender, batch []*batchOp, lockWait string) (*groupState, error) {
	var resIDs, keyIDs, requestIDs []string
	var since *time.Time
	for _, op := range batch {
		switch op.kind {
		case opReserve:
			keyIDs = append(keyIDs, op.reserve.KeyID)
			requestIDs = append(requestIDs, op.reserve.RequestID)
			if op.now != nil {
				m := monthStart(op.now.UTC())
				if since == nil || m.Before(*since) {
					since = &m
				}
			}
		case opCommit:
			resIDs = append(resIDs, op.commit.ReservationID)
		case opRelease:
			resIDs = append(resIDs, op.resID)
		}
	}
	st := &groupState{accounts: map[string]*gAccount{}, keys: map[string]*gKey{}, locked: map[string]*gRes{},
		byRequest: map[string]*gRes{}, used: map[spendWindow]int64{}}

	b := &pgx.Batch{}
	// The transaction starts in this round trip (no BEGIN of its own).
	b.Queue(`BEGIN`)
	// Every statement below names its rows by key. Their plans are cached, and one made
	// while a table was small would scan it whole for ever after: index scans only. And
	// each is planned once per connection (a generic plan): by default PostgreSQL planned
	// every execution anew whenever it judged a custom plan cheaper, which was most of a
	// small batch's cost (a batch of one: ≈2.2 → ≈1.3 ms of PostgreSQL CPU per
	// reserve+commit). Both for this transaction only (set_config's true: SET LOCAL),
	// set in the statement that reads the clock.
	b.Queue(`SELECT now(), set_config('enable_seqscan', 'off', true), set_config('plan_cache_mode', 'force_generic_plan', true),
		set_config('lock_timeout', $1, true)`, lockWait).QueryRow(func(row pgx.Row) error {
		return row.Scan(&st.now, nil, nil, nil)
	})
	// A statement whose ids are all missing finds nothing and is not sent: a batch of
	// reserves locks no reservation by id, a batch of settlements reads no key.
	if len(resIDs) > 0 {
		b.Queue(`SELECT `+resColumns+` FROM reservations WHERE id = ANY ($1::text[]::uuid[]) ORDER BY id FOR UPDATE SKIP LOCKED`,
			resIDs).Query(func(rows pgx.Rows) error {
			for rows.Next() {
				r, err := scanRes(rows)
				if err != nil {
					return err
				}
				st.locked[r.id] = r
			}
			return rows.Err()
		})
	}
	b.Queue(`
		SELECT a.id::text, a.balance, a.reserved, a.suspended, a.topped_up, a.in_flight, a.in_flight_high_cost,
			nullif(a.rpm_minute, '-infinity'), a.rpm_count,
			t.rpm_before_topup, t.rpm_after_topup, t.in_flight_general, t.in_flight_high_cost
		FROM accounts a JOIN tiers t ON t.name = a.tier
		WHERE a.id IN (SELECT r.account_id FROM reservations r WHERE r.id = ANY ($1::text[]::uuid[])
		               UNION SELECT k.account_id FROM api_keys k WHERE k.id = ANY ($2::text[]::uuid[]))
		ORDER BY a.id FOR UPDATE OF a`, resIDs, keyIDs).Query(func(rows pgx.Rows) error {
		for rows.Next() {
			var id string
			a := &gAccount{}
			if err := rows.Scan(&id, &a.balance, &a.reserved, &a.suspended, &a.toppedUp, &a.inFlight, &a.inFlightHigh,
				&a.rpmMinute, &a.rpmCount, &a.rpmBefore, &a.rpmAfter, &a.poolGeneral, &a.poolHigh); err != nil {
				return err
			}
			a.origBalance, a.origReserved, a.origIn, a.origHigh = a.balance, a.reserved, a.inFlight, a.inFlightHigh
			st.accounts[id] = a
		}
		return rows.Err()
	})
	if len(keyIDs) > 0 {
		b.Queue(`SELECT id::text, account_id::text, disabled, revoked_at IS NOT NULL, expires_at, daily_limit, monthly_limit
			FROM api_keys WHERE id = ANY ($1::text[]::uuid[])`, keyIDs).Query(func(rows pgx.Rows) error {
			for rows.Next() {
				var id string
				k := &gKey{}
				if err := rows.Scan(&id, &k.account, &k.disabled, &k.revoked, &k.expires, &k.daily, &k.monthly); err != nil {
					return err
				}
				st.keys[id] = k
			}
			return rows.Err()
		})
		b.Queue(`SELECT `+resColumns+` FROM reservations WHERE request_id = ANY ($1::text[])`, requestIDs).Query(
			func(rows pgx.Rows) error {
				for rows.Next() {
					r, err := scanRes(rows)
					if err != nil {
						return err
					}
					if l := st.locked[r.id]; l != nil {
						r = l
					}
					st.byRequest[r.requestID] = r
				}
				return rows.Err()
			})
		b.Queue(`SELECT key_id::text, period, to_char(period_start, 'YYYY-MM-DD'), committed + held FROM key_spend
			WHERE key_id = ANY ($1::text[]::uuid[])
			  AND period_start >= least($2::date, date_trunc('month', now() AT TIME ZONE 'UTC')::date)`,
			keyIDs, since).Query(func(rows pgx.Rows) error {
			for rows.Next() {
				var w spendWindow
				var used int64
				if err := rows.Scan(&w.key, &w.period, &w.start, &used); err != nil {
					return err
				}
				st.used[w] = used
			}
			return rows.Err()
		})
	}
	if err := tx.SendBatch(ctx, b).Close(); err != nil {
		return nil, err
	}
	return st, nil
}

// batchSender sends a pipeline of statements on one connection.
type batchSender interface {
	SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults
}

// monthStart is the first day of t's month (t in UTC).
func monthStart(t time.Time) time.Time {
	return time.Date(t.Year(), t.Month(), 1, 0, 0, 0, 0, time.UTC)
}
