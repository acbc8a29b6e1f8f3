package store

import (
	"context"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/llmgw/gateway/accounting/ledger"
)

// The lone decisions: one operation, one statement — the PL/pgSQL functions of
// migrations/0001_init.sql. An operation group commit does not decide runs here in a
// transaction of its own (through the account gate: alone), and a small
// batch in the writer (batch.go) runs its operations here one after another in one
// transaction: one round trip where a large batch takes two.

// loneCall is one operation's statement and how its row is read into an opOutcome.
type loneCall struct {
	sql  string
	args []any
	scan func(pgx.Row) error
}

// alone runs c, an operation op of account, in a transaction of its own, through the
// account's gate. Its waits for the account (a gate slot, the row lock) end before
// ctx's deadline would (deadline.go); a wait that ends fails with ledger.ErrBusy. The
// gate hears the outcome before any caller turns it into a refusal.
func (s *Store) alone(ctx context.Context, account, op string, c loneCall) (err error) {
	pass, err := s.enterAccount(ctx, account)
	if err != nil {
		return err
	}
	defer func() { pass.done(err) }()
	left, bounded := waitLeft(ctx)
	switch {
	case !bounded || left >= s.opts.StatementTimeout:
		// The connection's own timeouts are the bounds.
		return dbError(op, c.scan(s.pool.QueryRow(ctx, c.sql, c.args...)))
	case left < minWait:
		return errNoTimeLeft("the account's row")
	}
	// lock_timeout bounds each lock a statement waits for, not the statement: behind
	// another waiter, a row lock is two waits (the tuple's lock, then the holder's
	// transaction), so only statement_timeout bounds the whole. Set for this transaction
	// only (set_config's true: SET LOCAL).
	ms := func(d time.Duration) string { return strconv.FormatInt(d.Milliseconds(), 10) }
	b := &pgx.Batch{}
	b.Queue(`BEGIN`)
	b.Queue(`SELECT set_config('lock_timeout', $1, true), set_config('statement_timeout', $2, true)`,
		ms(min(left, s.opts.LockTimeout)), ms(left))
	b.Queue(c.sql, c.args...).QueryRow(c.scan)
	b.Queue(`COMMIT`)
	return dbError(op, s.sendTx(ctx, b))
}

// sendTx sends b, a transaction from BEGIN to COMMIT, in one round trip on a connection
// of the pool. When it fails, the transaction is rolled back before the connection goes
// back to the pool (which would close a connection left inside a transaction).
func (s *Store) sendTx(ctx context.Context, b *pgx.Batch) error {
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return err
	}
	defer conn.Release()
	if err = conn.SendBatch(ctx, b).Close(); err != nil {
		rctx, rcancel := context.WithTimeout(context.Background(), s.opts.LockTimeout)
		defer rcancel()
		_, _ = conn.Exec(rctx, "ROLLBACK")
	}
	return err
}

func reserveCall(r ledger.ReserveRequest, now *time.Time, o *opOutcome) loneCall {
	return loneCall{
		sql: `SELECT o_outcome, o_limit, o_retry_after, o_id::text, o_account_id::text, o_key_id::text,
			o_model, o_amount, o_pool, o_state, o_charged, o_created_at, o_expires_at
		FROM ledger_reserve($1, $2, $3, $4, $5, $6, $7)`,
		args: []any{r.RequestID, r.KeyID, r.Model, r.Amount, int16(r.Pool), r.TTL, now},
		scan: func(row pgx.Row) error {
			return row.Scan(&o.outcome, &o.limit, &o.retryAfter, &o.id, &o.account, &o.keyID, &o.model, &o.amount,
				&o.pool, &o.state, &o.charged, &o.created, &o.expires)
		},
	}
}

func commitCall(c ledger.CommitRequest, now *time.Time, o *opOutcome) loneCall {
	return loneCall{
		sql: `SELECT o_outcome, o_charged, o_capped, o_state
		FROM ledger_commit($1, $2, $3, $4, $5, $6, $7, $8)`,
		args: []any{c.ReservationID, c.Actual, c.Usage.InputTokens, c.Usage.OutputTokens, unitsArg(c.Usage),
			c.UpstreamModel, c.Channel, now},
		scan: func(row pgx.Row) error { return row.Scan(&o.outcome, &o.charged, &o.capped, &o.state) },
	}
}

func releaseCall(id, reason string, now *time.Time, o *opOutcome) loneCall {
	return loneCall{
		sql:  `SELECT o_state, o_charged FROM ledger_release($1, $2, $3)`,
		args: []any{id, reason, now},
		scan: func(row pgx.Row) error { return row.Scan(&o.state, &o.charged) },
	}
}

// writerLockWait bounds how long a batch waits for a row lock in the writer (the Store's
// writerLockWait, a test may change it): the writer serves every caller, so a row
// another transaction holds (a lone operation, the other replica's writer) must not
// stall it for long; past the wait every caller of the batch runs its operation alone,
// through the account gate, with the full lock timeout.
const writerLockWait = "10ms"

// decideLone runs batch's operations as their lone functions, in queue order, in one
// transaction and one round trip: BEGIN, the short lock wait, the lock of the batch's
// accounts in id order (lockorder.go), the statements and COMMIT travel together. Any
// error fails the whole batch (it changed nothing).
func (s *Store) decideLone(batch []*batchOp) (outs []opOutcome, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), s.opts.StatementTimeout+s.opts.LockTimeout)
	defer cancel()
	outs = make([]opOutcome, len(batch))
	b := &pgx.Batch{}
	b.Queue(`BEGIN`)
	b.Queue(`SET LOCAL lock_timeout = '` + s.writerLockWait + `'`)
	if sql, args := s.accountLocks(batch); sql != "" {
		b.Queue(sql, args...)
	}
	for i, op := range batch {
		var c loneCall
		switch op.kind {
		case opReserve:
			c = reserveCall(op.reserve, op.now, &outs[i])
		case opCommit:
			c = commitCall(op.commit, op.now, &outs[i])
		default:
			c = releaseCall(op.resID, op.reason, op.now, &outs[i])
		}
		b.Queue(c.sql, c.args...).QueryRow(c.scan)
	}
	b.Queue(`COMMIT`)
	if err := s.sendTx(ctx, b); err != nil {
		return nil, dbError("group commit", err)
	}
	return outs, nil
}
