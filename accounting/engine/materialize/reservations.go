package materialize

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/llmgw/gateway/accounting/engine/machine"
	"github.com/llmgw/gateway/accounting/ledger"
)

// resRow is a reservations row as one call's events leave it: inserted once in its final
// state when the call reserved it, else updated once to it.
type resRow struct {
	r       machine.Reserved // ExpiresAt: the last renewal's
	insert  bool
	state   string
	actual  *int64
	charged int64
	settled *time.Time
	reason  *string
	order   int // of the Reserved events of the call
}

// rowOf returns r's row of the call, made (as an update of a held row) when missing.
func (w *writes) rowOf(r machine.Reserved) *resRow {
	if w.rows == nil {
		w.rows = make(map[string]*resRow)
	}
	row, ok := w.rows[r.ID]
	if !ok {
		row = &resRow{r: r, state: "held"}
		w.rows[r.ID] = row
	}
	return row
}

// reserve records a new hold's row.
func (w *writes) reserve(r machine.Reserved) {
	row := w.rowOf(r)
	row.insert, row.order = true, len(w.rows)
}

// settle records the end of r's hold as ledger_commit, ledger_release and
// ledger_expire_due write it: committed with what the caller reported and the charge,
// released with the caller's reason (NULL when none), expired with the sweeper's.
func (w *writes) settle(r machine.Reserved, state ledger.ReservationState, actual *int64, charged int64,
	reason string, at time.Time) error {
	row := w.rowOf(r)
	switch state {
	case ledger.StateCommitted:
		row.state = "committed"
	case ledger.StateReleased:
		row.state = "released"
	case ledger.StateExpired:
		row.state = "expired"
	default:
		return fmt.Errorf("reservation %s settled to state %d", r.ID, state)
	}
	row.actual, row.charged, row.settled, row.reason = actual, charged, &at, nonEmpty(reason)
	return nil
}

// renew records a held reservation's new expiry.
func (w *writes) renew(r machine.Reserved) { w.rowOf(r).r.ExpiresAt = r.ExpiresAt }

// resColumns are every column of a reservations row, as the archive has them too.
const resColumns = `id, request_id, account_id, key_id, model, amount, pool, state, actual, charged,
	created_at, expires_at, settled_at, release_reason`

// insertRows is the statement that inserts rows into table, in the order given (by id:
// time order, the primary key's right edge), then suffix.
func insertRows(table, suffix string) string {
	return `
	INSERT INTO ` + table + ` (` + resColumns + `)
	SELECT id::uuid, req, account::uuid, key::uuid, model, amount, pool, state, actual, charged, created, expires,
		settled, reason
	FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::bigint[], $7::smallint[],
		$8::text[], $9::bigint[], $10::bigint[], $11::timestamptz[], $12::timestamptz[], $13::timestamptz[],
		$14::text[])
		WITH ORDINALITY AS u(id, req, account, key, model, amount, pool, state, actual, charged, created, expires,
			settled, reason, n)
	ORDER BY n ` + suffix
}

// insertReservations inserts the call's new rows; a request id already taken is
// skipped (see archiveReused).
var insertReservations = insertRows("reservations", "ON CONFLICT ON CONSTRAINT reservations_request_id_unique DO NOTHING")

// rowArgs are the arguments of insertRows for rows.
func rowArgs(rows []*resRow) []any {
	var (
		ids, reqs, accounts, keys, models, states []string
		amounts, charged                          []int64
		pools                                     []int16
		actual                                    []*int64
		created, expires                          []time.Time
		settled                                   []*time.Time
		reasons                                   []*string
	)
	for _, row := range rows {
		r := row.r
		ids, reqs, accounts, keys, models = append(ids, r.ID), append(reqs, r.RequestID), append(accounts, r.AccountID),
			append(keys, r.KeyID), append(models, r.Model)
		amounts, pools, states = append(amounts, r.Amount), append(pools, int16(r.Pool)), append(states, row.state)
		actual, charged, created = append(actual, row.actual), append(charged, row.charged), append(created, r.At)
		expires, settled, reasons = append(expires, r.ExpiresAt), append(settled, row.settled), append(reasons, row.reason)
	}
	return []any{ids, reqs, accounts, keys, models, amounts, pools, states, actual, charged, created, expires,
		settled, reasons}
}

// resInserts are the arguments of insertReservations and how many rows they are.
type resInserts struct {
	n    int
	args []any
}

// queueReservations queues the call's reservations rows: one insert of the new ones and
// one update of those reserved in an earlier call (settled, or renewed while held). It
// returns the insert's arguments, and sets *inserted to how many rows it inserted. A
// request id reserved again in the call (forgotten by the machine in between) sends
// its earlier rows, settled, straight to the archive, as ArchiveSettled would have.
func (w *writes) queueReservations(b *pgx.Batch, inserted *int64) (resInserts, error) {
	var inserts, archived []*resRow
	var up struct {
		ids, states []string
		actual      []*int64
		charged     []int64
		settled     []*time.Time
		reasons     []*string
		expires     []time.Time
	}
	for _, id := range sortedKeys(w.rows) {
		row := w.rows[id]
		if row.insert {
			inserts = append(inserts, row)
			continue
		}
		up.ids, up.states, up.actual = append(up.ids, id), append(up.states, row.state), append(up.actual, row.actual)
		up.charged, up.settled, up.reasons = append(up.charged, row.charged), append(up.settled, row.settled), append(up.reasons, row.reason)
		up.expires = append(up.expires, row.r.ExpiresAt)
	}
	last := make(map[string]*resRow, len(inserts)) // by request id, the last reserved
	for _, row := range inserts {
		if l := last[row.r.RequestID]; l == nil || row.order > l.order {
			last[row.r.RequestID] = row
		}
	}
	if len(last) < len(inserts) {
		kept := inserts[:0]
		for _, row := range inserts {
			switch {
			case last[row.r.RequestID] == row:
				kept = append(kept, row)
			case row.state == "held":
				return resInserts{}, fmt.Errorf("request id %s reserved by %s while %s holds it",
					row.r.RequestID, last[row.r.RequestID].r.ID, row.r.ID)
			default:
				archived = append(archived, row)
			}
		}
		inserts = kept
		b.Queue(insertRows("reservations_archive", ""), rowArgs(archived)...)
	}
	ins := resInserts{n: len(inserts)}
	if len(inserts) > 0 {
		ins.args = rowArgs(inserts)
		b.Queue(insertReservations, ins.args...).Exec(func(ct pgconn.CommandTag) error {
			*inserted = ct.RowsAffected()
			return nil
		})
	}
	if len(up.ids) > 0 {
		b.Queue(`
			UPDATE reservations r SET state = u.state, actual = u.actual, charged = u.charged, settled_at = u.settled,
				release_reason = u.reason, expires_at = u.expires
			FROM unnest($1::text[], $2::text[], $3::bigint[], $4::bigint[], $5::timestamptz[], $6::text[],
				$7::timestamptz[]) AS u(id, state, actual, charged, settled, reason, expires)
			WHERE r.id = u.id::uuid`,
			up.ids, up.states, up.actual, up.charged, up.settled, up.reasons, up.expires)
	}
	return ins, nil
}

// archiveReused inserts the rows insertReservations skipped, of which inserted of ins.n
// went in: a request id the machine forgot (an hour after its settlement, by default)
// may be reserved again while its old settled row is still in the table, which the
// store's sweeper archives only when it runs. The old row moves to the archive first,
// as ArchiveSettled would move it; a held one never moves, and then the insert fails.
func archiveReused(ctx context.Context, tx pgx.Tx, ins resInserts, inserted int64) error {
	if inserted == int64(ins.n) {
		return nil
	}
	_, err := tx.Exec(ctx, `
		WITH moved AS (
			DELETE FROM reservations r
			WHERE r.request_id = ANY ($2::text[]) AND r.id <> ALL ($1::text[]::uuid[]) AND r.state <> 'held'
			RETURNING r.*)
		INSERT INTO reservations_archive (`+resColumns+`) SELECT `+resColumns+` FROM moved`,
		ins.args[0], ins.args[1])
	if err != nil {
		return fmt.Errorf("archiving reservations of reused request ids: %w", err)
	}
	ct, err := tx.Exec(ctx, insertReservations, ins.args...)
	if err != nil {
		return err
	}
	if got := inserted + ct.RowsAffected(); got != int64(ins.n) {
		return fmt.Errorf("%d of %d reservations inserted: a request id is held by another reservation", got, ins.n)
	}
	return nil
}
