package server_test

import (
	"context"
	"slices"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/llmgw/gateway/accounting/engine/enginetest"
	"github.com/llmgw/gateway/accounting/server/servertest"
	"github.com/llmgw/gateway/accounting/tables"
	accountingv1 "github.com/llmgw/gateway/proto/accounting/v1"
)

// TestPersonAuthorizedByMembership: a call made for a person (the admin token plus
// the person's email, as the console makes it) is allowed, refused (403) or answered
// as not found (404) by the person's memberships; lists show only the scope; the
// admin token alone keeps every right.
func TestPersonAuthorizedByMembership(t *testing.T) {
	st, pool := enginetest.NewLedger(t, 4)
	f := servertest.Start(t, st, servertest.Options{Members: tables.New(pool, tables.Options{})})
	admin := f.Admin(t, servertest.AdminToken)
	ctx := context.Background()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}

	acc := func() string {
		r, err := admin.CreateAccount(ctx, &accountingv1.CreateAccountRequest{})
		must(err)
		return r.GetAccount().GetId()
	}
	acme, other := acc(), acc()
	proj := func(account, parent, name string) string {
		r, err := admin.CreateProject(ctx, &accountingv1.CreateProjectRequest{AccountId: account, ParentId: parent, Name: name})
		must(err)
		return r.GetProject().GetId()
	}
	research := proj(acme, "", "research")
	vision := proj(acme, research, "vision")
	sales := proj(acme, "", "sales")
	key := func(account, project string) string {
		r, err := admin.CreateKey(ctx, &accountingv1.CreateKeyRequest{AccountId: account, ProjectId: project})
		must(err)
		return r.GetKey().GetId()
	}
	kR, kV, kS, kA, kO := key(acme, research), key(acme, vision), key(acme, sales), key(acme, ""), key(other, "")
	for _, m := range []*accountingv1.AddMemberRequest{
		{Email: "Admin@Example.com", Role: "admin"},
		{Email: "op@example.com", Role: "operator", AccountId: acme},
		{Email: "bill@example.com", Role: "billing", AccountId: acme},
		{Email: "view@example.com", Role: "viewer", AccountId: acme},
		{Email: "mem@example.com", Role: "member", ProjectId: research},
	} {
		r, err := admin.AddMember(ctx, m)
		must(err)
		if m.ProjectId != "" && r.GetMember().GetAccountId() != acme {
			t.Fatalf("a project membership names its account: %v", r.GetMember())
		}
	}

	type call func(c accountingv1.AdminServiceClient) error
	topUp := func(a string) call {
		return func(c accountingv1.AdminServiceClient) error {
			_, err := c.TopUp(ctx, &accountingv1.TopUpRequest{AccountId: a, AmountMicros: 1})
			return err
		}
	}
	getKey := func(k string) call {
		return func(c accountingv1.AdminServiceClient) error {
			_, err := c.GetKey(ctx, &accountingv1.GetKeyRequest{KeyId: k})
			return err
		}
	}
	disable := func(k string) call {
		return func(c accountingv1.AdminServiceClient) error {
			_, err := c.SetKeyDisabled(ctx, &accountingv1.SetKeyDisabledRequest{KeyId: k, Disabled: true})
			return err
		}
	}
	revoke := func(k string) call {
		return func(c accountingv1.AdminServiceClient) error {
			_, err := c.RevokeKey(ctx, &accountingv1.RevokeKeyRequest{KeyId: k})
			return err
		}
	}
	createKey := func(a, p string) call {
		return func(c accountingv1.AdminServiceClient) error {
			_, err := c.CreateKey(ctx, &accountingv1.CreateKeyRequest{AccountId: a, ProjectId: p})
			return err
		}
	}
	getProject := func(p string) call {
		return func(c accountingv1.AdminServiceClient) error {
			_, err := c.GetProject(ctx, &accountingv1.GetProjectRequest{ProjectId: p})
			return err
		}
	}
	createAccount := func(c accountingv1.AdminServiceClient) error {
		_, err := c.CreateAccount(ctx, &accountingv1.CreateAccountRequest{})
		return err
	}
	addMember := func(c accountingv1.AdminServiceClient) error {
		_, err := c.AddMember(ctx, &accountingv1.AddMemberRequest{Email: "new@example.com", Role: "viewer", AccountId: acme})
		return err
	}
	suspend := func(a string) call {
		return func(c accountingv1.AdminServiceClient) error {
			_, err := c.SetAccountSuspended(ctx, &accountingv1.SetAccountSuspendedRequest{AccountId: a})
			return err
		}
	}
	statement := func(c accountingv1.AdminServiceClient) error {
		_, err := c.ListLedgerEntries(ctx, &accountingv1.ListLedgerEntriesRequest{AccountId: acme})
		return err
	}

	const ok, no, hid = codes.OK, codes.PermissionDenied, codes.NotFound
	for _, tc := range []struct {
		person, what string
		call         call
		want         codes.Code
	}{
		{"admin@example.com", "top up", topUp(acme), ok},
		{"admin@example.com", "create account", createAccount, ok},
		{"admin@example.com", "add member", addMember, ok},
		{"op@example.com", "top up", topUp(acme), no},
		{"op@example.com", "top up another account", topUp(other), hid},
		{"op@example.com", "create account", createAccount, no},
		{"op@example.com", "suspend", suspend(acme), ok},
		{"op@example.com", "create key", createKey(acme, ""), ok},
		{"op@example.com", "add member", addMember, no},
		{"op@example.com", "key of another account", getKey(kO), hid},
		{"bill@example.com", "top up", topUp(acme), ok},
		{"bill@example.com", "statement", statement, ok},
		{"bill@example.com", "create key", createKey(acme, ""), no},
		{"bill@example.com", "suspend", suspend(acme), no},
		{"view@example.com", "top up", topUp(acme), no},
		{"view@example.com", "show key", getKey(kS), ok},
		{"view@example.com", "disable key", disable(kS), no},
		{"view@example.com", "statement", statement, ok},
		{"mem@example.com", "top up its account", topUp(acme), no},
		{"mem@example.com", "top up another account", topUp(other), hid},
		{"mem@example.com", "show key of its project", getKey(kR), ok},
		{"mem@example.com", "show key of a child project", getKey(kV), ok},
		{"mem@example.com", "show key of another project", getKey(kS), hid},
		{"mem@example.com", "show key of the account itself", getKey(kA), no},
		{"mem@example.com", "create key in its project", createKey(acme, research), ok},
		{"mem@example.com", "create key in a child project", createKey(acme, vision), ok},
		{"mem@example.com", "create key in another project", createKey(acme, sales), hid},
		{"mem@example.com", "create key in the account", createKey(acme, ""), no},
		{"mem@example.com", "disable key of its project", disable(kR), ok},
		{"mem@example.com", "disable key of another project", disable(kS), hid},
		{"mem@example.com", "revoke key of a child project", revoke(kV), ok},
		{"mem@example.com", "revoke key of another project", revoke(kS), hid},
		{"mem@example.com", "show another project", getProject(sales), hid},
		{"mem@example.com", "show its project", getProject(research), ok},
		{"mem@example.com", "statement", statement, no},
		{"nobody@example.com", "show key", getKey(kR), no},
		{"nobody@example.com", "list tiers", func(c accountingv1.AdminServiceClient) error {
			_, err := c.ListTiers(ctx, &accountingv1.ListTiersRequest{})
			return err
		}, no},
	} {
		err := tc.call(f.Person(t, tc.person))
		if got := status.Code(err); got != tc.want {
			t.Errorf("%s: %s: %v, want %v", tc.person, tc.what, err, tc.want)
		}
	}
	// The 404 of a scope is the 404 of a key that does not exist.
	_, hidden := f.Person(t, "mem@example.com").GetKey(ctx, &accountingv1.GetKeyRequest{KeyId: kS})
	_, missing := admin.GetKey(ctx, &accountingv1.GetKeyRequest{KeyId: "3f6b1c9e-0000-4000-8000-000000000000"})
	if hidden.Error() != missing.Error() {
		t.Errorf("hidden %v, missing %v", hidden, missing)
	}

	// Lists show the scope only.
	mem := f.Person(t, "mem@example.com")
	keys, err := mem.ListKeys(ctx, &accountingv1.ListKeysRequest{AccountId: acme})
	must(err)
	var ids []string
	for _, k := range keys.GetKeys() {
		ids = append(ids, k.GetId())
		if p := k.GetProjectId(); p != research && p != vision {
			t.Errorf("a member lists key %s of project %q", k.GetId(), p)
		}
	}
	for _, k := range []string{kR, kV} {
		if !slices.Contains(ids, k) {
			t.Errorf("a member does not list key %s of its subtree: %v", k, ids)
		}
	}
	projs, err := mem.ListProjects(ctx, &accountingv1.ListProjectsRequest{AccountId: acme})
	must(err)
	var pids []string
	for _, p := range projs.GetProjects() {
		pids = append(pids, p.GetId())
	}
	slices.Sort(pids)
	want := []string{research, vision}
	slices.Sort(want)
	if !slices.Equal(pids, want) {
		t.Errorf("a member lists projects %v, want %v", pids, want)
	}
	for _, who := range []string{"mem@example.com", "op@example.com"} {
		accs, err := f.Person(t, who).ListAccounts(ctx, &accountingv1.ListAccountsRequest{})
		must(err)
		if len(accs.GetAccounts()) != 1 || accs.GetAccounts()[0].GetId() != acme {
			t.Errorf("%s lists accounts %v, want only %s", who, accs.GetAccounts(), acme)
		}
	}
	if _, err := mem.ListKeys(ctx, &accountingv1.ListKeysRequest{AccountId: other}); status.Code(err) != hid {
		t.Errorf("a member lists another account's keys: %v", err)
	}

	// The admin token alone keeps every right.
	if _, err := admin.TopUp(ctx, &accountingv1.TopUpRequest{AccountId: other, AmountMicros: 1}); err != nil {
		t.Error(err)
	}
	all, err := admin.ListKeys(ctx, &accountingv1.ListKeysRequest{AccountId: acme})
	must(err)
	if len(all.GetKeys()) < 4 {
		t.Errorf("the admin token lists %d keys", len(all.GetKeys()))
	}

	// Members: listed and removed; a removed membership grants nothing.
	list, err := admin.ListMembers(ctx, &accountingv1.ListMembersRequest{AccountId: acme})
	must(err)
	var memID string
	for _, m := range list.GetMembers() {
		if m.GetEmail() == "mem@example.com" {
			memID = m.GetId()
		}
	}
	if memID == "" {
		t.Fatalf("member list of acme: %v", list.GetMembers())
	}
	if _, err := admin.RemoveMember(ctx, &accountingv1.RemoveMemberRequest{MemberId: memID}); err != nil {
		t.Fatal(err)
	}
	if _, err := mem.GetKey(ctx, &accountingv1.GetKeyRequest{KeyId: kR}); status.Code(err) != no {
		t.Errorf("after removal: %v", err)
	}
}

// TestCheckAccessDecidesWithoutActing: CheckAccess answers as the call it names
// would (allowed, 403, 404), changing nothing; without a person it allows.
func TestCheckAccessDecidesWithoutActing(t *testing.T) {
	st, pool := enginetest.NewLedger(t, 4)
	f := servertest.Start(t, st, servertest.Options{Members: tables.New(pool, tables.Options{})})
	admin := f.Admin(t, servertest.AdminToken)
	ctx := context.Background()
	acc, err := admin.CreateAccount(ctx, &accountingv1.CreateAccountRequest{})
	if err != nil {
		t.Fatal(err)
	}
	acme := acc.GetAccount().GetId()
	other, _ := admin.CreateAccount(ctx, &accountingv1.CreateAccountRequest{})
	if _, err := admin.AddMember(ctx, &accountingv1.AddMemberRequest{Email: "vi@example.com", Role: "viewer", AccountId: acme}); err != nil {
		t.Fatal(err)
	}
	vi := f.Person(t, "vi@example.com")
	for _, c := range []struct {
		req  *accountingv1.CheckAccessRequest
		want codes.Code
	}{
		{&accountingv1.CheckAccessRequest{Method: "TopUp", AccountId: acme}, codes.PermissionDenied},
		{&accountingv1.CheckAccessRequest{Method: "GetAccount", AccountId: acme}, codes.OK},
		{&accountingv1.CheckAccessRequest{Method: "TopUp", AccountId: other.GetAccount().GetId()}, codes.NotFound},
		{&accountingv1.CheckAccessRequest{Method: "SetTier"}, codes.PermissionDenied},
		{&accountingv1.CheckAccessRequest{Method: "NoSuchMethod"}, codes.InvalidArgument},
	} {
		if _, err := vi.CheckAccess(ctx, c.req); status.Code(err) != c.want {
			t.Errorf("%v: %v, want %v", c.req, err, c.want)
		}
	}
	if _, err := admin.CheckAccess(ctx, &accountingv1.CheckAccessRequest{Method: "TopUp", AccountId: acme}); err != nil {
		t.Errorf("the admin token: %v", err)
	}
	a, _ := admin.GetAccount(ctx, &accountingv1.GetAccountRequest{AccountId: acme})
	if a.GetAccount().GetBalanceMicros() != 0 {
		t.Error("a check changed the balance")
	}
}
