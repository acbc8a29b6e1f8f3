package materialize

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// batch returns w's statements, one per table that changes, in the order the foreign
// keys need (tiers before accounts, accounts before keys, keys before spend and tasks).
// Arrays go in as text and are cast in SQL; a multi-valued column (a key's models) as
// JSON, since unnest flattens an array of arrays.
func (w *writes) batch() *pgx.Batch {
	b := &pgx.Batch{}
	w.queueTiers(b)
	w.queueAccounts(b)
	w.queueProjects(b)
	w.queueKeys(b)
	w.queuePlacements(b)
	if len(w.entries) > 0 {
		// usage_daily's trigger (kept for an earlier version's materializer, migration
		// 0023) leaves this transaction's charges to queueUsage. The entries follow the
		// batch (copyEntries).
		b.Queue(`SELECT set_config('ledger.usage_written', 'on', true)`)
	}
	w.queueUsage(b)
	w.queueMoney(b)
	w.queueFlags(b)
	w.queueLabels(b)
	w.queueSpend(b)
	w.queueVideos(b)
	w.queueAlerts(b)
	w.queueAudits(b)
	return b
}

func (w *writes) queueTiers(b *pgx.Batch) {
	if len(w.tiers) == 0 {
		return
	}
	var names []string
	var before, after, general, high []int32
	for _, n := range sortedKeys(w.tiers) {
		t := w.tiers[n]
		names = append(names, n)
		before, after = append(before, int32(t.RPMBeforeTopUp)), append(after, int32(t.RPMAfterTopUp))
		general, high = append(general, int32(t.InFlightGeneral)), append(high, int32(t.InFlightHighCost))
	}
	b.Queue(`
		INSERT INTO tiers AS t (name, rpm_before_topup, rpm_after_topup, in_flight_general, in_flight_high_cost)
		SELECT * FROM unnest($1::text[], $2::int[], $3::int[], $4::int[], $5::int[])
		ON CONFLICT (name) DO UPDATE SET rpm_before_topup = EXCLUDED.rpm_before_topup,
			rpm_after_topup = EXCLUDED.rpm_after_topup, in_flight_general = EXCLUDED.in_flight_general,
			in_flight_high_cost = EXCLUDED.in_flight_high_cost`,
		names, before, after, general, high)
}

func (w *writes) queueAccounts(b *pgx.Batch) {
	if len(w.accounts) == 0 {
		return
	}
	var ids, tiers, labels []string
	var ats []time.Time
	for _, a := range w.accounts {
		ids, tiers, labels, ats = append(ids, a.ID), append(tiers, a.Tier), append(labels, a.Label), append(ats, a.At)
	}
	b.Queue(`
		INSERT INTO accounts (id, tier, label, created_at)
		SELECT id::uuid, tier, label, at
		FROM unnest($1::text[], $2::text[], $3::text[], $4::timestamptz[]) AS u(id, tier, label, at)`,
		ids, tiers, labels, ats)
}

func (w *writes) queueKeys(b *pgx.Batch) {
	if len(w.keys) > 0 {
		var ids, accounts, prefixes, names, models []string
		var hashes [][]byte
		var daily, monthly []*int64
		var expires []*time.Time
		var admin []bool
		var ats []time.Time
		for _, k := range w.keys {
			ids, accounts, hashes = append(ids, k.ID), append(accounts, k.AccountID), append(hashes, k.Hash)
			prefixes, names, models = append(prefixes, k.Prefix), append(names, k.Name), append(models, modelsJSON(k.AllowedModels))
			daily, monthly, expires = append(daily, k.DailyLimit), append(monthly, k.MonthlyLimit), append(expires, k.ExpiresAt)
			admin, ats = append(admin, k.AdminCreated), append(ats, k.At)
		}
		b.Queue(`
			INSERT INTO api_keys (id, account_id, hash, prefix, name, allowed_models, daily_limit, monthly_limit,
				expires_at, admin_created, created_at)
			SELECT id::uuid, account::uuid, hash, prefix, name, `+modelsArray+`, daily, monthly, expires, admin, at
			FROM unnest($1::text[], $2::text[], $3::bytea[], $4::text[], $5::text[], $6::text[], $7::bigint[],
				$8::bigint[], $9::timestamptz[], $10::bool[], $11::timestamptz[])
				WITH ORDINALITY AS u(id, account, hash, prefix, name, models, daily, monthly, expires, admin, at, n)
			ORDER BY n`,
			ids, accounts, hashes, prefixes, names, models, daily, monthly, expires, admin, ats)
	}
	if len(w.keyChanges) == 0 {
		return
	}
	var ids, names, models []string
	var daily, monthly []*int64
	var expires, revoked []*time.Time
	var disabled []bool
	for _, id := range sortedKeys(w.keyChanges) {
		k := w.keyChanges[id]
		ids, names, models = append(ids, id), append(names, k.Name), append(models, modelsJSON(k.AllowedModels))
		daily, monthly, expires = append(daily, k.DailyLimit), append(monthly, k.MonthlyLimit), append(expires, k.ExpiresAt)
		disabled, revoked = append(disabled, k.Disabled), append(revoked, k.RevokedAt)
	}
	b.Queue(`
		UPDATE api_keys k SET name = u.name, allowed_models = `+modelsArray+`, daily_limit = u.daily,
			monthly_limit = u.monthly, expires_at = u.expires, disabled = u.disabled, revoked_at = u.revoked
		FROM unnest($1::text[], $2::text[], $3::text[], $4::bigint[], $5::bigint[], $6::timestamptz[],
			$7::bool[], $8::timestamptz[]) AS u(id, name, models, daily, monthly, expires, disabled, revoked)
		WHERE k.id = u.id::uuid`,
		ids, names, models, daily, monthly, expires, disabled, revoked)
}

// modelsArray turns the JSON array u.models into text[] ('{}' for every model).
const modelsArray = `ARRAY(SELECT jsonb_array_elements_text(u.models::jsonb))`

func modelsJSON(models []string) string {
	if models == nil {
		models = []string{}
	}
	return *jsonText(models)
}

// entryColumns are the ledger_entries columns copyEntries writes, in its rows' order.
var entryColumns = []string{"account_id", "kind", "amount", "reservation_id", "idempotency_key", "key_id", "model",
	"upstream_model", "channel", "input_tokens", "output_tokens", "units", "components", "service_tier", "created_at",
	"project_id"}

// copyEntries writes the call's ledger entries, in journal order (entry ids follow the
// events), with COPY: one write-ahead log record per heap page of new rows rather than
// one per row, ≈50 bytes less a charge than an INSERT of the same rows.
func (w *writes) copyEntries(ctx context.Context, tx pgx.Tx) error {
	if len(w.entries) == 0 {
		return nil
	}
	rows := make([][]any, len(w.entries))
	for i, e := range w.entries {
		account, err := uuid.Parse(e.accountID)
		if err != nil {
			return fmt.Errorf("entry of account %q: %w", e.accountID, err)
		}
		var res, key, project *uuid.UUID
		for _, p := range []struct {
			s  *string
			to **uuid.UUID
		}{{e.reservationID, &res}, {e.keyID, &key}, {e.project, &project}} {
			if p.s == nil {
				continue
			}
			u, err := uuid.Parse(*p.s)
			if err != nil {
				return fmt.Errorf("entry of account %s: %w", e.accountID, err)
			}
			*p.to = &u
		}
		rows[i] = []any{account, e.kind, int64(e.amount), res, e.idempotencyKey, key, e.model, e.upstream, e.channel,
			e.input, e.output, e.units, e.components, e.serviceTier, e.at, project}
	}
	_, err := tx.CopyFrom(ctx, pgx.Identifier{"ledger_entries"}, entryColumns, pgx.CopyFromRows(rows))
	return err
}

// queueMoney updates the balances, holds and pools; not the flags, so that the
// accounts' NOTIFY trigger (on suspended, topped_up, tier) does not fire for a charge.
func (w *writes) queueMoney(b *pgx.Batch) {
	var ids []string
	var balance, reserved []int64
	var general, high []int32
	for _, id := range sortedKeys(w.money) {
		m := w.money[id]
		if *m == (money{}) {
			continue
		}
		ids, balance, reserved = append(ids, id), append(balance, m.balance), append(reserved, m.reserved)
		general, high = append(general, int32(m.inFlight)), append(high, int32(m.inFlightHighCost))
	}
	if len(ids) == 0 {
		return
	}
	b.Queue(`
		UPDATE accounts a SET balance = a.balance + d.balance, reserved = a.reserved + d.reserved,
			in_flight = a.in_flight + d.general, in_flight_high_cost = a.in_flight_high_cost + d.high
		FROM unnest($1::text[], $2::bigint[], $3::bigint[], $4::int[], $5::int[]) AS d(id, balance, reserved, general, high)
		WHERE a.id = d.id::uuid`,
		ids, balance, reserved, general, high)
}

// queueLabels sets the accounts' labels, after their inserts: an account created and
// labeled in one batch gets the later label.
func (w *writes) queueLabels(b *pgx.Batch) {
	if len(w.labels) == 0 {
		return
	}
	var ids, labels []string
	for _, id := range sortedKeys(w.labels) {
		ids, labels = append(ids, id), append(labels, w.labels[id])
	}
	b.Queue(`
		UPDATE accounts a SET label = d.label
		FROM unnest($1::text[], $2::text[]) AS d(id, label)
		WHERE a.id = d.id::uuid`,
		ids, labels)
}

func (w *writes) queueFlags(b *pgx.Batch) {
	if len(w.flags) == 0 {
		return
	}
	var ids []string
	var toppedUp []bool
	var suspended []*bool
	for _, id := range sortedKeys(w.flags) {
		f := w.flags[id]
		ids, toppedUp, suspended = append(ids, id), append(toppedUp, f.toppedUp), append(suspended, f.suspended)
	}
	b.Queue(`
		UPDATE accounts a SET topped_up = a.topped_up OR d.topped_up, suspended = coalesce(d.suspended, a.suspended)
		FROM unnest($1::text[], $2::bool[], $3::bool[]) AS d(id, topped_up, suspended)
		WHERE a.id = d.id::uuid`,
		ids, toppedUp, suspended)
}

func (w *writes) queueSpend(b *pgx.Batch) {
	var keys, periods, starts []string
	var committed, held []int64
	wins := make([]window, 0, len(w.spend))
	for win, s := range w.spend {
		if *s != (spend{}) {
			wins = append(wins, win)
		}
	}
	if len(wins) == 0 {
		return
	}
	sortWindows(wins)
	for _, win := range wins {
		s := w.spend[win]
		keys, periods, starts = append(keys, win.keyID), append(periods, win.period), append(starts, win.start.Format(time.DateOnly))
		committed, held = append(committed, s.committed), append(held, s.held)
	}
	// The changes of windows that exist update them; the others are new windows. (Not an
	// upsert: a CHECK applies to the row proposed for insertion before its conflict is
	// found, and a settlement's change of held is negative.) The shard's lock makes this
	// the only writer of its keys' windows.
	b.Queue(`
		WITH d AS (
			SELECT key::uuid AS key_id, period, start::date AS period_start, committed, held
			FROM unnest($1::text[], $2::text[], $3::text[], $4::bigint[], $5::bigint[]) AS u(key, period, start, committed, held)),
		changed AS (
			UPDATE key_spend s SET committed = s.committed + d.committed, held = s.held + d.held
			FROM d WHERE s.key_id = d.key_id AND s.period = d.period AND s.period_start = d.period_start
			RETURNING s.key_id, s.period, s.period_start)
		INSERT INTO key_spend (key_id, period, period_start, committed, held)
		SELECT d.key_id, d.period, d.period_start, d.committed, d.held FROM d
		WHERE NOT EXISTS (SELECT 1 FROM changed c
			WHERE c.key_id = d.key_id AND c.period = d.period AND c.period_start = d.period_start)`,
		keys, periods, starts, committed, held)
}

func sortWindows(wins []window) {
	slices.SortFunc(wins, func(a, b window) int {
		return cmp.Or(cmp.Compare(a.keyID, b.keyID), cmp.Compare(a.period, b.period), a.start.Compare(b.start))
	})
}

func (w *writes) queueVideos(b *pgx.Batch) {
	if len(w.videos) == 0 {
		return
	}
	var tasks, accounts, keys, models, channels, upstream []string
	var admin []bool
	var ats []time.Time
	for _, v := range w.videos {
		tasks, accounts, keys, models = append(tasks, v.TaskID), append(accounts, v.AccountID), append(keys, v.KeyID), append(models, v.Model)
		channels, upstream = append(channels, v.Origin.Channel), append(upstream, v.Origin.UpstreamTaskID)
		admin, ats = append(admin, v.AdminCreatedKey), append(ats, v.CreatedAt)
	}
	b.Queue(`
		INSERT INTO video_tasks (task_id, account_id, key_id, admin_created_key, model, created_at, channel,
			upstream_task_id)
		SELECT task, account::uuid, key::uuid, admin, model, at, channel, nullif(upstream, '')
		FROM unnest($1::text[], $2::text[], $3::text[], $4::bool[], $5::text[], $6::timestamptz[], $7::text[],
			$8::text[]) AS u(task, account, key, admin, model, at, channel, upstream)`,
		tasks, accounts, keys, admin, models, ats, channels, upstream)
}
