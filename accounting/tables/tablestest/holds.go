package tablestest

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/llmgw/gateway/accounting/engine/codec"
	"github.com/llmgw/gateway/accounting/engine/machine"
	"github.com/llmgw/gateway/accounting/ledger"
)

// Reservation is a hold as the journal tells it: since migration 0023 no table has a
// row per reservation (the owner keeps holds in memory and journals them), so a test
// that looks at reservations reads them from the journal.
type Reservation struct {
	ID, RequestID, AccountID, KeyID, Model string
	Amount                                 int64
	Pool                                   ledger.Pool
	State                                  string // held, committed, released or expired
	Actual                                 *int64 // what the caller reported, committed only
	Charged                                int64
	CreatedAt                              time.Time
}

// Querier is what JournalReservations reads with: a pool, a connection or a transaction.
type Querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// JournalReservations returns every reservation the journal (ledger_journal, every
// shard) holds, in the order they were reserved: none in a database without a journal.
// A journal whose early partitions retention dropped tells only the later ones.
func JournalReservations(ctx context.Context, q Querier) ([]Reservation, error) {
	return journalReservations(ctx, q, `SELECT seq, body FROM ledger_journal ORDER BY shard, seq`)
}

// materializedReservations are JournalReservations of the records the derived tables
// hold (ledger_materialized): read in the transaction that reads the tables, they are
// what the tables were written from.
func materializedReservations(ctx context.Context, q Querier) ([]Reservation, error) {
	return journalReservations(ctx, q, `
		SELECT j.seq, j.body FROM ledger_journal j
		JOIN ledger_materialized m ON m.shard = j.shard AND j.seq <= m.seq
		ORDER BY j.shard, j.seq`)
}

func journalReservations(ctx context.Context, q Querier, query string) ([]Reservation, error) {
	var has bool
	if err := q.QueryRow(ctx, `SELECT to_regclass('ledger_journal') IS NOT NULL`).Scan(&has); err != nil || !has {
		return nil, err
	}
	rows, err := q.Query(ctx, query)
	if err != nil {
		return nil, fmt.Errorf("reading the journal: %w", err)
	}
	var events []machine.Event
	var seq int64
	var body []byte
	_, err = pgx.ForEachRow(rows, []any{&seq, &body}, func() error {
		e, err := codec.Decode(body)
		if err != nil {
			return fmt.Errorf("journal seq %d: %w", seq, err)
		}
		events = append(events, e)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return ReservationsOf(events), nil
}

// ReservationsOf folds events into the reservations they reserve and settle, in the
// order they were reserved.
func ReservationsOf(events []machine.Event) []Reservation {
	var out []Reservation
	at := map[string]int{}
	for _, e := range events {
		switch e := e.(type) {
		case machine.Reserved:
			at[e.ID] = len(out)
			out = append(out, Reservation{ID: e.ID, RequestID: e.RequestID, AccountID: e.AccountID, KeyID: e.KeyID,
				Model: e.Model, Amount: int64(e.Amount), Pool: e.Pool, State: "held", CreatedAt: e.At})
		case machine.Committed:
			if i, ok := at[e.ReservationID]; ok {
				actual := int64(e.Actual)
				out[i].State, out[i].Actual, out[i].Charged = "committed", &actual, int64(e.Charged)
			}
		case machine.Released:
			if i, ok := at[e.ReservationID]; ok {
				out[i].State = map[ledger.ReservationState]string{ledger.StateReleased: "released",
					ledger.StateExpired: "expired"}[e.State]
			}
		}
	}
	return out
}

// KeyReservations returns the journal's reservations of key.
func KeyReservations(ctx context.Context, q Querier, keyID string) ([]Reservation, error) {
	all, err := JournalReservations(ctx, q)
	if err != nil {
		return nil, err
	}
	return slices.DeleteFunc(all, func(r Reservation) bool { return r.KeyID != keyID }), nil
}

// loadHolds puts rs in the temporary table journal_reservations of tx (dropped at its
// end), with the columns CheckInvariants reads of reservations.
func loadHolds(ctx context.Context, tx pgx.Tx, rs []Reservation) error {
	_, err := tx.Exec(ctx, `CREATE TEMPORARY TABLE journal_reservations (id text, account_id text, key_id text,
		amount bigint, pool smallint, state text, charged bigint, created_at timestamptz) ON COMMIT DROP`)
	if err != nil {
		return err
	}
	_, err = tx.CopyFrom(ctx, pgx.Identifier{"journal_reservations"},
		[]string{"id", "account_id", "key_id", "amount", "pool", "state", "charged", "created_at"},
		pgx.CopyFromSlice(len(rs), func(i int) ([]any, error) {
			r := rs[i]
			return []any{r.ID, r.AccountID, r.KeyID, r.Amount, int16(r.Pool), r.State, r.Charged, r.CreatedAt}, nil
		}))
	return err
}
