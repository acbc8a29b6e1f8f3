package tables

// Members: who may do what in the admin API (migration 0020). A plain table written
// by accounting's admin API directly: members are admin data, not money, and not
// derived from the journal. A change's audit entry (ledger.TakeAudit) is written in
// the change's transaction.

import (
	"context"
	"errors"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/llmgw/gateway/accounting/ledger"
)

// Member is one role of one person over a scope (ledger.Member).
type Member = ledger.Member

var _ ledger.Members = (*Store)(nil)

const memberColumns = `id::text, email, role, coalesce(account_id::text, ''), coalesce(project_id, ''), created_at`

func scanMembers(rows interface {
	Next() bool
	Scan(...any) error
	Err() error
	Close()
}) ([]Member, error) {
	defer rows.Close()
	out := []Member{}
	for rows.Next() {
		var m Member
		if err := rows.Scan(&m.ID, &m.Email, &m.Role, &m.AccountID, &m.ProjectID, &m.CreatedAt); err != nil {
			return nil, err
		}
		out = append(out, m)
	}
	return out, rows.Err()
}

// AddMember records m (its email in lower case) and returns it; the same role of the
// same person over the same scope added again returns the row already there.
func (s *Store) AddMember(ctx context.Context, m Member) (Member, error) {
	m.Email = strings.ToLower(strings.TrimSpace(m.Email))
	var out []Member
	err := s.audited(ctx, "add member", func(tx pgx.Tx) (before, after any, err error) {
		rows, err := tx.Query(ctx, `
WITH added AS (
    INSERT INTO members (email, role, account_id, project_id)
    VALUES ($1, $2, nullif($3, '')::uuid, nullif($4, ''))
    ON CONFLICT DO NOTHING
    RETURNING `+memberColumns+`)
SELECT * FROM added
UNION ALL
SELECT `+memberColumns+` FROM members
 WHERE email = $1 AND role = $2 AND coalesce(account_id::text, '') = $3 AND coalesce(project_id, '') = $4
   AND NOT EXISTS (SELECT 1 FROM added)`, m.Email, m.Role, m.AccountID, m.ProjectID)
		if err != nil {
			return nil, nil, err
		}
		if out, err = scanMembers(rows); err != nil {
			return nil, nil, err
		}
		if len(out) != 1 {
			return nil, nil, ledger.ErrNotFound
		}
		return nil, out[0], nil
	})
	if err != nil {
		return Member{}, err
	}
	return out[0], nil
}

// audited is Audited on the store's pool, its failures as the store's.
func (s *Store) audited(ctx context.Context, op string, change func(pgx.Tx) (before, after any, err error)) error {
	err := Audited(ctx, s.pool, change)
	if errors.Is(err, ledger.ErrNotFound) {
		return ledger.ErrNotFound
	}
	return dbError(op, err)
}

// ListMembers returns the members, oldest first: every one, or with accountID those
// scoped to that account or its projects.
func (s *Store) ListMembers(ctx context.Context, accountID string) ([]Member, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+memberColumns+` FROM members
 WHERE $1 = '' OR account_id = nullif($1, '')::uuid ORDER BY created_at, id`, accountID)
	if err != nil {
		return nil, dbError("list members", err)
	}
	out, err := scanMembers(rows)
	return out, dbError("list members", err)
}

// MembershipsOf returns every role of the person with email (compared in lower case).
func (s *Store) MembershipsOf(ctx context.Context, email string) ([]Member, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+memberColumns+` FROM members WHERE email = $1 ORDER BY created_at, id`,
		strings.ToLower(strings.TrimSpace(email)))
	if err != nil {
		return nil, dbError("memberships", err)
	}
	out, err := scanMembers(rows)
	return out, dbError("memberships", err)
}

// GetMember returns one member; ledger.ErrNotFound when there is none.
func (s *Store) GetMember(ctx context.Context, id string) (Member, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+memberColumns+` FROM members WHERE id::text = $1`, id)
	if err != nil {
		return Member{}, dbError("get member", err)
	}
	out, err := scanMembers(rows)
	if err != nil {
		return Member{}, dbError("get member", err)
	}
	if len(out) == 0 {
		return Member{}, ledger.ErrNotFound
	}
	return out[0], nil
}

// RemoveMember deletes one member and returns it as it was; ledger.ErrNotFound when
// there is none.
func (s *Store) RemoveMember(ctx context.Context, id string) (Member, error) {
	var out []Member
	err := s.audited(ctx, "remove member", func(tx pgx.Tx) (before, after any, err error) {
		rows, err := tx.Query(ctx, `DELETE FROM members WHERE id::text = $1 RETURNING `+memberColumns, id)
		if err != nil {
			return nil, nil, err
		}
		if out, err = scanMembers(rows); err != nil {
			return nil, nil, err
		}
		if len(out) == 0 {
			return nil, nil, ledger.ErrNotFound
		}
		return out[0], nil, nil
	})
	if err != nil {
		return Member{}, err
	}
	return out[0], nil
}
