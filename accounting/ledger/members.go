package ledger

import (
	"context"
	"time"
)

// Member is one role of one person (their email, lower case) over a scope:
// everything (AccountID ""), an account (ProjectID "") or a project subtree.
type Member struct {
	ID        string
	Email     string
	Role      string
	AccountID string
	ProjectID string
	CreatedAt time.Time
}

// Members keeps who may do what in the admin API: admin data, not money, written
// outside the journal. An unknown member is ErrNotFound.
type Members interface {
	// AddMember records m; the same role of the same person over the same scope
	// added again returns the row already there.
	AddMember(ctx context.Context, m Member) (Member, error)
	// ListMembers returns every member, or with accountID those of that account and
	// its projects, oldest first.
	ListMembers(ctx context.Context, accountID string) ([]Member, error)
	// GetMember returns one member.
	GetMember(ctx context.Context, id string) (Member, error)
	// RemoveMember deletes one and returns it as it was.
	RemoveMember(ctx context.Context, id string) (Member, error)
	// MembershipsOf returns every role of the person with email.
	MembershipsOf(ctx context.Context, email string) ([]Member, error)
}
