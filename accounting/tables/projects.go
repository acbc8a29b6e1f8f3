package tables

import (
	"context"

	"github.com/llmgw/gateway/accounting/ledger"
)

// Projects' reports: the usage of a project and its descendants. The projects table,
// api_keys' project and rates and the charges' project are the materializer's
// (migrations/0018_projects.sql).

// projectFilter is what a usage query of the account $1 adds for the charges of the
// project id and its descendants (deleted ones included: their charges stay theirs):
// a CTE to put first, a condition on usage_daily to AND, and its argument ($5). All
// empty when id is; ErrNotFound unless id is a project (deleted or not) of the account.
func (s *Store) projectFilter(ctx context.Context, accountID, id string) (cte, where string, args []any, err error) {
	if id == "" {
		return "", "", nil, nil
	}
	if !validID(id) {
		return "", "", nil, ledger.ErrNotFound
	}
	var n int
	err = s.pool.QueryRow(ctx, `SELECT count(*) FROM projects WHERE id = $1 AND account_id = $2`, id, accountID).Scan(&n)
	if err != nil || n == 0 {
		return "", "", nil, notFoundOr("usage", err)
	}
	return `
		WITH RECURSIVE tree AS (
			SELECT id FROM projects WHERE id = $5::uuid
			UNION ALL
			SELECT p.id FROM projects p JOIN tree t ON p.parent_id = t.id)`,
		` AND project_id IN (SELECT id::text FROM tree)`, []any{id}, nil
}
