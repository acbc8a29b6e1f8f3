package store

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/llmgw/gateway/accounting/ledger"
)

// The lone decisions: one operation, one statement, one transaction — the PL/pgSQL
// functions of migrations/0001_init.sql. An operation group commit does not decide runs
// here (through the account gate, reservations.go), and so does a batch of one in the
// writer (batch.go): one round trip where a batch takes two.

// queryRower runs one statement returning one row.
type queryRower interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

func callReserve(ctx context.Context, q queryRower, r ledger.ReserveRequest, now *time.Time) (o opOutcome, err error) {
	err = q.QueryRow(ctx, `
		SELECT o_outcome, o_limit, o_retry_after, o_id::text, o_account_id::text, o_key_id::text,
			o_model, o_amount, o_pool, o_state, o_charged, o_created_at, o_expires_at
		FROM ledger_reserve($1, $2, $3, $4, $5, $6, $7)`,
		r.RequestID, r.KeyID, r.Model, r.Amount, int16(r.Pool), r.TTL, now).Scan(
		&o.outcome, &o.limit, &o.retryAfter, &o.id, &o.account, &o.keyID, &o.model, &o.amount, &o.pool,
		&o.state, &o.charged, &o.created, &o.expires)
	return o, err
}

func callCommit(ctx context.Context, q queryRower, c ledger.CommitRequest, now *time.Time) (o opOutcome, err error) {
	err = q.QueryRow(ctx, `
		SELECT o_outcome, o_charged, o_capped, o_state
		FROM ledger_commit($1, $2, $3, $4, $5, $6, $7, $8)`,
		c.ReservationID, c.Actual, c.Usage.InputTokens, c.Usage.OutputTokens, unitsArg(c.Usage),
		c.UpstreamModel, c.Channel, now).Scan(&o.outcome, &o.charged, &o.capped, &o.state)
	return o, err
}

func callRelease(ctx context.Context, q queryRower, id, reason string, now *time.Time) (o opOutcome, err error) {
	err = q.QueryRow(ctx, `SELECT o_state, o_charged FROM ledger_release($1, $2, $3)`,
		id, reason, now).Scan(&o.state, &o.charged)
	return o, err
}

// decideOne runs op as its lone function, in the writer (no account gate: the writer is
// one connection at a time).
func (s *Store) decideOne(op *batchOp) (opOutcome, error) {
	ctx, cancel := context.WithTimeout(context.Background(), s.opts.StatementTimeout+s.opts.LockTimeout)
	defer cancel()
	switch op.kind {
	case opReserve:
		return callReserve(ctx, s.pool, op.reserve, op.now)
	case opCommit:
		return callCommit(ctx, s.pool, op.commit, op.now)
	}
	return callRelease(ctx, s.pool, op.resID, op.reason, op.now)
}
