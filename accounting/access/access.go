// Package access is who may do what in accounting's admin API: the roles a person's
// membership gives (admin, operator, billing, viewer, member), each scoped to
// everything, an account or a project subtree, and the one table of actions × roles.
// Decide answers one call: allowed, forbidden (403: the target is in the person's
// sight, the role may not do this) or hidden (404: nothing of the target is in the
// person's sight, so its existence is not hinted).
//
// It is pure: it knows no store, no gRPC and no proto, and imports nothing of the
// gateway. The server resolves a call's target (its account and project path) and
// the person's memberships, then asks Decide.
package access

import (
	"fmt"
	"slices"
)

// Role is what a membership lets a person do.
type Role string

// The roles.
const (
	Admin    Role = "admin"    // everything in scope: tiers, members, webhooks included
	Operator Role = "operator" // accounts, projects and keys, but no top-ups
	Billing  Role = "billing"  // top-ups, statements, usage and reconciliation
	Viewer   Role = "viewer"   // reads everything in scope
	Member   Role = "member"   // a project subtree: reads it, creates keys, disables and revokes any key
)

// Roles are every role, in the order the docs list them.
var Roles = []Role{Admin, Operator, Billing, Viewer, Member}

// ParseRole reads a role's name.
func ParseRole(s string) (Role, error) {
	if r := Role(s); slices.Contains(Roles, r) {
		return r, nil
	}
	return "", fmt.Errorf("unknown role %q: one of admin, operator, billing, viewer, member", s)
}

// Action is one thing the admin API does.
type Action string

// The actions.
const (
	ListTiers     Action = "tier.list"
	SetTier       Action = "tier.set"
	ListAccounts  Action = "account.list"
	CreateAccount Action = "account.create"
	GetAccount    Action = "account.show"
	UpdateAccount Action = "account.update"
	SuspendAcct   Action = "account.suspend" // suspend and unsuspend
	TopUp         Action = "account.topup"
	Statement     Action = "account.ledger"
	Usage         Action = "usage"
	Reconcile     Action = "reconcile"
	ListKeys      Action = "key.list"
	GetKey        Action = "key.show"
	CreateKey     Action = "key.create"
	UpdateKey     Action = "key.update"
	DisableKey    Action = "key.disable"
	EnableKey     Action = "key.enable"
	RevokeKey     Action = "key.revoke"
	ListMembers   Action = "member.list"
	AddMember     Action = "member.add"
	RemoveMember  Action = "member.remove"
	ListProjects  Action = "project.list"
	GetProject    Action = "project.show"
	CreateProject Action = "project.create"
	UpdateProject Action = "project.update"
	DeleteProject Action = "project.delete"
	Webhooks      Action = "webhook" // every webhook call: admin only
	ListAudit     Action = "audit.list"
)

// Actions are every action.
var Actions = []Action{ListTiers, SetTier, ListAccounts, CreateAccount, GetAccount, UpdateAccount, SuspendAcct, TopUp,
	Statement, Usage, Reconcile, ListKeys, GetKey, CreateKey, UpdateKey, DisableKey, EnableKey, RevokeKey,
	ListMembers, AddMember, RemoveMember, ListProjects, GetProject, CreateProject, UpdateProject, DeleteProject, Webhooks, ListAudit}

// Reads reports whether a changes nothing.
func Reads(a Action) bool { return slices.Contains(reads, a) }

// reads are the actions that change nothing.
var reads = []Action{ListTiers, ListAccounts, GetAccount, Statement, Usage, ListKeys, GetKey, ListMembers, ListProjects, GetProject, ListAudit}

// table is the one table of what each role may do (inside its scope).
var table = map[Role][]Action{
	Admin: Actions,
	Operator: append(slices.Clone(reads), CreateAccount, UpdateAccount, SuspendAcct, CreateKey, UpdateKey, DisableKey, EnableKey, RevokeKey,
		CreateProject, UpdateProject, DeleteProject),
	Billing: append(slices.Clone(reads), TopUp, Reconcile),
	Viewer:  slices.Clone(reads),
	Member:  {ListTiers, ListAccounts, GetAccount, Usage, ListKeys, GetKey, CreateKey, DisableKey, RevokeKey, ListProjects, GetProject},
}

// Allows reports whether role may do a inside its scope.
func Allows(role Role, a Action) bool { return slices.Contains(table[role], a) }

// global are the actions on no account: only an unscoped membership reaches them,
// except listings every person may ask (the server shows only what is in scope).
var global = []Action{SetTier, CreateAccount, Reconcile}

// listings are asked of no target and filtered to the scope by the server.
var listings = []Action{ListTiers, ListAccounts, ListMembers}

// Membership is one role of a person over a scope: everything (Account ""), an
// account (Project ""), or a project subtree (Project, with its Account).
type Membership struct {
	Role    Role
	Account string
	Project string
}

// Target is what a call acts on: nothing in particular (Account ""), an account
// (Projects empty), or something inside a project: Projects is the project and its
// ancestors, nearest first.
type Target struct {
	Account  string
	Projects []string
}

// covers reports whether m's scope contains t.
func (m Membership) covers(t Target) bool {
	switch {
	case m.Account == "":
		return true
	case t.Account != m.Account:
		return false
	case m.Project == "":
		return true
	}
	return slices.Contains(t.Projects, m.Project)
}

// sees reports whether t is in m's sight: covered, or the account of m's project
// itself (whose page a project's people open); another project of that account is
// out of sight.
func (m Membership) sees(t Target) bool {
	return m.covers(t) || (m.Account != "" && m.Account == t.Account && len(t.Projects) == 0)
}

// accountReads are what a project's membership may do on its project's account
// itself: see it, and list its keys and projects (the server shows only the
// subtree's, through Shows).
var accountReads = []Action{GetAccount, ListKeys, ListProjects}

// Decision is Decide's answer.
type Decision int

const (
	// Allowed: the call may proceed.
	Allowed Decision = iota
	// Forbidden: the target is in sight, no role in scope may do this (403).
	Forbidden
	// Hidden: nothing of the target is in sight (404, as if it did not exist).
	Hidden
)

func (d Decision) String() string {
	return [...]string{"allowed", "forbidden", "hidden"}[d]
}

// Decide answers whether a person with memberships ms may do a on t.
func Decide(ms []Membership, a Action, t Target) Decision {
	if slices.Contains(listings, a) {
		for _, m := range ms {
			if Allows(m.Role, a) {
				return Allowed
			}
		}
		return Forbidden
	}
	if slices.Contains(global, a) || t.Account == "" {
		for _, m := range ms {
			if m.Account == "" && Allows(m.Role, a) {
				return Allowed
			}
		}
		return Forbidden
	}
	seen := false
	for _, m := range ms {
		if !m.sees(t) {
			continue
		}
		seen = true
		if !Allows(m.Role, a) {
			continue
		}
		if m.covers(t) || slices.Contains(accountReads, a) {
			return Allowed
		}
	}
	if seen {
		return Forbidden
	}
	return Hidden
}

// Validate reports what is wrong with a membership: a member needs a project; a
// project names its account.
func (m Membership) Validate() error {
	if _, err := ParseRole(string(m.Role)); err != nil {
		return err
	}
	if m.Role == Member && m.Project == "" {
		return fmt.Errorf("the member role needs a project (--project)")
	}
	if m.Project != "" && m.Account == "" {
		return fmt.Errorf("a project membership names the project's account")
	}
	return nil
}

// Shows reports whether a listing a, allowed by Decide, shows the item t: some
// membership whose role may list covers t; an account listing also shows the account
// of a project's membership (it is in sight).
func Shows(ms []Membership, a Action, t Target) bool {
	for _, m := range ms {
		if Allows(m.Role, a) && (m.covers(t) || (a == ListAccounts && m.sees(t))) {
			return true
		}
	}
	return false
}
