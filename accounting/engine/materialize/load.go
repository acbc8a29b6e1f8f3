package materialize

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/llmgw/gateway/accounting/engine/machine"
	"github.com/llmgw/gateway/accounting/ledger"
)

// SettledHorizon is how long before the load a settled reservation was settled for Load
// to keep it: a Reserve retried with its request id, or a Commit or Release replayed with
// the reservation's id, is answered from it as the store answered. The store's own
// retries end within minutes (its archive waits 15 minutes by default before a settled
// reservation leaves the hot table, and at least 5); an hour is well past every one of
// them, and a retry after it is answered as the store answers one after archiving.
const SettledHorizon = time.Hour

// Load reads the PostgreSQL store's tables into a machine.Snapshot at the current time:
// see LoadAt.
func Load(ctx context.Context, pool *pgxpool.Pool) (machine.Snapshot, error) {
	return LoadAt(ctx, pool, time.Now())
}

// LoadAt reads the store's tables, in one read-only repeatable-read transaction (one
// consistent view), into the snapshot of a state machine deciding from time at on:
//   - every tier, account (balance, holds, pools, flags, requests-per-minute window)
//     and key (with its hash);
//   - held reservations, and those settled within SettledHorizon before at, from the
//     reservations table and its archive;
//   - key spend windows of at's UTC month (the month's and each of its days'), and any
//     older window that still holds an amount (a reservation held across midnight);
//   - every top-up idempotency key, and every video task with its origin.
//
// The store must not be deciding meanwhile: what it decides after the read is not in
// the snapshot. Tables the Materializer kept since migration 0023 hold no reservation
// rows: read back, they give the balances and counters without the holds behind them,
// so a ledger the journal engine kept restarts from its journal, never from here.
func LoadAt(ctx context.Context, pool *pgxpool.Pool, at time.Time) (machine.Snapshot, error) {
	var sn machine.Snapshot
	at = at.UTC()
	err := pgx.BeginTxFunc(ctx, pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly},
		func(tx pgx.Tx) error {
			for _, read := range []func(context.Context, pgx.Tx, time.Time, *machine.Snapshot) error{
				loadTiers, loadAccounts, loadKeys, loadReservations, loadWindows, loadTopUpKeys, loadVideoTasks,
			} {
				if err := read(ctx, tx, at, &sn); err != nil {
					return err
				}
			}
			return nil
		})
	if err != nil {
		return machine.Snapshot{}, fmt.Errorf("materialize: load: %w", err)
	}
	sortSnapshot(&sn)
	return sn, nil
}

// collect runs sql and scans each row with scan.
func collect[T any](ctx context.Context, tx pgx.Tx, what, sql string, scan func(pgx.CollectableRow) (T, error), args ...any) ([]T, error) {
	rows, err := tx.Query(ctx, sql, args...)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	out, err := pgx.CollectRows(rows, scan)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	return out, nil
}

func loadTiers(ctx context.Context, tx pgx.Tx, _ time.Time, sn *machine.Snapshot) (err error) {
	sn.Tiers, err = collect(ctx, tx, "tiers", `
		SELECT name, rpm_before_topup, rpm_after_topup, in_flight_general, in_flight_high_cost FROM tiers`,
		func(r pgx.CollectableRow) (t ledger.Tier, err error) {
			err = r.Scan(&t.Name, &t.RPMBeforeTopUp, &t.RPMAfterTopUp, &t.InFlightGeneral, &t.InFlightHighCost)
			return t, err
		})
	return err
}

func loadAccounts(ctx context.Context, tx pgx.Tx, _ time.Time, sn *machine.Snapshot) (err error) {
	// rpm_minute is '-infinity' for an account that never reserved: the zero time.
	sn.Accounts, err = collect(ctx, tx, "accounts", `
		SELECT id::text, tier, label, balance, reserved, suspended, topped_up, in_flight, in_flight_high_cost,
			CASE WHEN isfinite(rpm_minute) THEN rpm_minute END, rpm_count, created_at
		FROM accounts`,
		func(r pgx.CollectableRow) (a machine.AccountState, err error) {
			var minute *time.Time
			err = r.Scan(&a.ID, &a.Tier, &a.Label, &a.Balance, &a.Reserved, &a.Suspended, &a.ToppedUp, &a.InFlight,
				&a.InFlightHighCost, &minute, &a.RPMCount, &a.CreatedAt)
			if minute != nil {
				a.RPMMinute = minute.UTC()
			}
			a.CreatedAt = a.CreatedAt.UTC()
			return a, err
		})
	return err
}

func loadKeys(ctx context.Context, tx pgx.Tx, _ time.Time, sn *machine.Snapshot) (err error) {
	sn.Keys, err = collect(ctx, tx, "keys", `
		SELECT id::text, account_id::text, hash, prefix, name, allowed_models, daily_limit, monthly_limit,
			expires_at, admin_created, disabled, revoked_at, created_at
		FROM api_keys`,
		func(r pgx.CollectableRow) (k machine.KeyState, err error) {
			err = r.Scan(&k.ID, &k.AccountID, &k.Hash, &k.Prefix, &k.Name, &k.AllowedModels, &k.DailyLimit,
				&k.MonthlyLimit, &k.ExpiresAt, &k.AdminCreated, &k.Disabled, &k.RevokedAt, &k.CreatedAt)
			if len(k.AllowedModels) == 0 {
				k.AllowedModels = nil
			}
			k.ExpiresAt, k.RevokedAt, k.CreatedAt = utc(k.ExpiresAt), utc(k.RevokedAt), k.CreatedAt.UTC()
			return k, err
		})
	return err
}

// reservationColumns are read from reservations and from reservations_archive alike.
const reservationColumns = `id::text, request_id, account_id::text, key_id::text, model, amount, pool, state,
	actual, charged, created_at, expires_at, settled_at, coalesce(release_reason, '')`

func loadReservations(ctx context.Context, tx pgx.Tx, at time.Time, sn *machine.Snapshot) (err error) {
	sn.Reservations, err = collect(ctx, tx, "reservations", `
		SELECT `+reservationColumns+` FROM reservations WHERE state = 'held' OR settled_at >= $1
		UNION ALL
		SELECT `+reservationColumns+` FROM reservations_archive WHERE settled_at >= $1`,
		scanReservation, at.Add(-SettledHorizon))
	return err
}

var states = map[string]ledger.ReservationState{
	"held": ledger.StateHeld, "committed": ledger.StateCommitted,
	"released": ledger.StateReleased, "expired": ledger.StateExpired,
}

func scanReservation(r pgx.CollectableRow) (machine.ReservationState, error) {
	var (
		s     machine.ReservationState
		state string
		pool  int16
	)
	err := r.Scan(&s.ID, &s.RequestID, &s.AccountID, &s.KeyID, &s.Model, &s.Amount, &pool, &state,
		&s.Actual, &s.Charged, &s.CreatedAt, &s.ExpiresAt, &s.SettledAt, &s.Reason)
	if err != nil {
		return s, err
	}
	var ok bool
	if s.State, ok = states[state]; !ok {
		return s, fmt.Errorf("reservation %s: unknown state %q", s.ID, state)
	}
	s.Pool = ledger.Pool(pool)
	s.CreatedAt, s.ExpiresAt, s.SettledAt = s.CreatedAt.UTC(), s.ExpiresAt.UTC(), utc(s.SettledAt)
	return s, nil
}

func loadWindows(ctx context.Context, tx pgx.Tx, at time.Time, sn *machine.Snapshot) (err error) {
	month := time.Date(at.Year(), at.Month(), 1, 0, 0, 0, 0, time.UTC)
	sn.Windows, err = collect(ctx, tx, "key spend", `
		SELECT key_id::text, period, period_start, committed, held FROM key_spend
		WHERE period_start >= $1::date OR held > 0`,
		func(r pgx.CollectableRow) (w machine.SpendWindow, err error) {
			err = r.Scan(&w.KeyID, &w.Period, &w.Start, &w.Committed, &w.Held)
			w.Start = time.Date(w.Start.Year(), w.Start.Month(), w.Start.Day(), 0, 0, 0, 0, time.UTC)
			return w, err
		}, month.Format(time.DateOnly))
	return err
}

func loadTopUpKeys(ctx context.Context, tx pgx.Tx, _ time.Time, sn *machine.Snapshot) (err error) {
	sn.TopUpKeys, err = collect(ctx, tx, "top-up keys", `
		SELECT account_id::text, idempotency_key FROM ledger_entries WHERE idempotency_key IS NOT NULL`,
		func(r pgx.CollectableRow) (k machine.TopUpKey, err error) {
			err = r.Scan(&k.AccountID, &k.Key)
			return k, err
		})
	return err
}

func loadVideoTasks(ctx context.Context, tx pgx.Tx, _ time.Time, sn *machine.Snapshot) (err error) {
	// A task recorded without an upstream id lives under its own id (as the store reads it).
	sn.VideoTasks, err = collect(ctx, tx, "video tasks", `
		SELECT task_id, account_id::text, key_id::text, admin_created_key, model, created_at, channel,
			coalesce(upstream_task_id, task_id)
		FROM video_tasks`,
		func(r pgx.CollectableRow) (v ledger.VideoTask, err error) {
			err = r.Scan(&v.TaskID, &v.AccountID, &v.KeyID, &v.AdminCreatedKey, &v.Model, &v.CreatedAt,
				&v.Origin.Channel, &v.Origin.UpstreamTaskID)
			v.CreatedAt = v.CreatedAt.UTC()
			return v, err
		})
	return err
}

// sortSnapshot puts every slice in the order machine.Snapshot documents (by id; windows
// by key, period, start), in Go's byte order rather than a database collation's.
func sortSnapshot(sn *machine.Snapshot) {
	slices.SortFunc(sn.Tiers, func(a, b ledger.Tier) int { return cmp.Compare(a.Name, b.Name) })
	slices.SortFunc(sn.Accounts, func(a, b machine.AccountState) int { return cmp.Compare(a.ID, b.ID) })
	slices.SortFunc(sn.Keys, func(a, b machine.KeyState) int { return cmp.Compare(a.ID, b.ID) })
	slices.SortFunc(sn.Reservations, func(a, b machine.ReservationState) int { return cmp.Compare(a.ID, b.ID) })
	slices.SortFunc(sn.Windows, func(a, b machine.SpendWindow) int {
		return cmp.Or(cmp.Compare(a.KeyID, b.KeyID), cmp.Compare(a.Period, b.Period), a.Start.Compare(b.Start))
	})
	slices.SortFunc(sn.TopUpKeys, func(a, b machine.TopUpKey) int {
		return cmp.Or(cmp.Compare(a.AccountID, b.AccountID), cmp.Compare(a.Key, b.Key))
	})
	slices.SortFunc(sn.VideoTasks, func(a, b ledger.VideoTask) int { return cmp.Compare(a.TaskID, b.TaskID) })
}

// utc returns t in UTC, or nil.
func utc(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	u := t.UTC()
	return &u
}
