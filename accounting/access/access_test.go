package access

import (
	"strings"
	"testing"
)

// allowed is the contract's table, written out: which roles may do each action (A
// admin, O operator, B billing, V viewer, M member).
var allowed = map[Action]string{
	ListTiers: "AOBVM", SetTier: "A", ListAccounts: "AOBVM", CreateAccount: "AO", GetAccount: "AOBVM",
	UpdateAccount: "AO", SuspendAcct: "AO", TopUp: "AB", Statement: "AOBV", Usage: "AOBVM", Reconcile: "AB",
	ListKeys: "AOBVM", GetKey: "AOBVM", CreateKey: "AOM", UpdateKey: "AO", DisableKey: "AOM", EnableKey: "AO",
	RevokeKey: "AOM", ListMembers: "AOBV", AddMember: "A", RemoveMember: "A",
	ListProjects: "AOBVM", GetProject: "AOBVM", CreateProject: "AO", UpdateProject: "AO", DeleteProject: "AO", Webhooks: "A",
	ListAudit: "AOBV",
}

var letter = map[Role]string{Admin: "A", Operator: "O", Billing: "B", Viewer: "V", Member: "M"}

// The world: account acme with project research and its child research/vision,
// project sales beside them; account other.
var (
	nowhere   = Target{}
	acme      = Target{Account: "acme"}
	research  = Target{Account: "acme", Projects: []string{"research"}}
	vision    = Target{Account: "acme", Projects: []string{"vision", "research"}}
	sales     = Target{Account: "acme", Projects: []string{"sales"}}
	other     = Target{Account: "other"}
	otherProj = Target{Account: "other", Projects: []string{"x"}}
)

// Scopes, and where each target stands for each: in scope, only in sight (the
// account of the scope's project itself), or out of sight (another account, another
// project of the account, a parent project).
var scopes = []struct {
	name  string
	scope Membership
	where map[string]string // target name -> "in" | "sight" | "out"
}{
	{"everything", Membership{}, map[string]string{"acme": "in", "research": "in", "vision": "in", "sales": "in", "other": "in", "otherProj": "in"}},
	{"account acme", Membership{Account: "acme"}, map[string]string{"acme": "in", "research": "in", "vision": "in", "sales": "in", "other": "out", "otherProj": "out"}},
	{"project research", Membership{Account: "acme", Project: "research"}, map[string]string{"acme": "sight", "research": "in", "vision": "in", "sales": "out", "other": "out", "otherProj": "out"}},
	{"project vision", Membership{Account: "acme", Project: "vision"}, map[string]string{"acme": "sight", "research": "out", "vision": "in", "sales": "out", "other": "out", "otherProj": "out"}},
}

var targets = map[string]Target{"acme": acme, "research": research, "vision": vision, "sales": sales, "other": other, "otherProj": otherProj}

// Every action × role × scope × target: allowed when the role may and the target is in
// scope (or is only in sight and the action reads the account itself); forbidden
// when in sight; hidden when out of sight. Global actions need an unscoped membership;
// listings are allowed to every role that may list.
func TestEveryActionRoleScope(t *testing.T) {
	for _, a := range Actions {
		if allowed[a] == "" {
			t.Fatalf("%s missing from the test's table", a)
		}
		for _, r := range Roles {
			may := strings.Contains(allowed[a], letter[r])
			if got := Allows(r, a); got != may {
				t.Errorf("Allows(%s, %s) = %v, want %v", r, a, got, may)
			}
			for _, sc := range scopes {
				m := sc.scope
				m.Role = r
				ms := []Membership{m}
				isListing := a == ListTiers || a == ListAccounts || a == ListMembers
				isGlobal := a == SetTier || a == CreateAccount || a == Reconcile
				if isListing || isGlobal {
					want := Forbidden
					if may && (isListing || m.Account == "") {
						want = Allowed
					}
					if got := Decide(ms, a, nowhere); got != want {
						t.Errorf("%s as %s over %s: %s, want %s", a, r, sc.name, got, want)
					}
					continue
				}
				if got := Decide(ms, a, nowhere); got != Forbidden && !(may && m.Account == "") {
					t.Errorf("%s on nothing as %s over %s: %s", a, r, sc.name, got)
				}
				for name, tg := range targets {
					var want Decision
					switch sc.where[name] {
					case "in":
						want = map[bool]Decision{true: Allowed, false: Forbidden}[may]
					case "sight":
						want = Forbidden
						if may && len(tg.Projects) == 0 && (a == GetAccount || a == ListKeys || a == ListProjects) {
							want = Allowed
						}
					case "out":
						want = Hidden
					default:
						t.Fatalf("scope %s: no place for %s", sc.name, name)
					}
					if got := Decide(ms, a, tg); got != want {
						t.Errorf("%s on %s as %s over %s: %s, want %s", a, name, r, sc.name, got, want)
					}
				}
			}
		}
	}
}

// Several memberships: the most any of them allows; none at all sees nothing.
func TestMembershipsAddUp(t *testing.T) {
	ms := []Membership{{Role: Viewer, Account: "acme"}, {Role: Billing, Account: "other"}}
	for _, c := range []struct {
		a    Action
		t    Target
		want Decision
	}{
		{TopUp, acme, Forbidden}, {TopUp, other, Allowed}, {GetAccount, acme, Allowed}, {CreateKey, other, Forbidden},
		{GetAccount, Target{Account: "third"}, Hidden},
	} {
		if got := Decide(ms, c.a, c.t); got != c.want {
			t.Errorf("%s on %v: %s, want %s", c.a, c.t, got, c.want)
		}
	}
	if got := Decide(nil, GetAccount, acme); got != Hidden {
		t.Errorf("no membership: %s", got)
	}
	if got := Decide(nil, ListAccounts, nowhere); got != Forbidden {
		t.Errorf("no membership lists: %s", got)
	}
}

func TestMembershipValidate(t *testing.T) {
	for _, c := range []struct {
		m  Membership
		ok bool
	}{
		{Membership{Role: Admin}, true}, {Membership{Role: Member, Account: "a"}, false}, {Membership{Role: Member, Account: "a", Project: "p"}, true},
		{Membership{Role: "owner"}, false}, {Membership{Role: Viewer, Project: "p"}, false},
	} {
		if err := c.m.Validate(); (err == nil) != c.ok {
			t.Errorf("%+v: %v", c.m, err)
		}
	}
}

// A listing shows what a listing membership covers; an account listing also the
// account of a project membership; nothing to one who may not list.
func TestShows(t *testing.T) {
	ms := []Membership{{Role: Member, Account: "acme", Project: "research"}}
	for _, c := range []struct {
		a    Action
		t    Target
		want bool
	}{
		{ListKeys, research, true}, {ListKeys, vision, true}, {ListKeys, sales, false}, {ListKeys, acme, false},
		{ListKeys, other, false}, {ListAccounts, acme, true}, {ListAccounts, other, false},
		{ListProjects, research, true}, {ListProjects, sales, false}, {ListMembers, research, false},
	} {
		if got := Shows(ms, c.a, c.t); got != c.want {
			t.Errorf("%s shows %v: %v, want %v", c.a, c.t, got, c.want)
		}
	}
	if Shows(nil, ListAccounts, acme) {
		t.Error("no membership shows an account")
	}
}
