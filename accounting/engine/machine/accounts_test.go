package machine

import (
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/llmgw/gateway/accounting/ledger"
)

func TestAccountsAndTopUps(t *testing.T) {
	h := newHarness(t)
	got := h.must(CreateAccount{ID: uuidOf(1, 1), At: t0.Add(5 * time.Nanosecond)}).Account
	want := ledger.Account{ID: uuidOf(1, 1), Tier: ledger.DefaultTier, CreatedAt: t0}
	if got != want {
		t.Errorf("CreateAccount: %+v, want %+v", got, want)
	}
	missing := uuidOf(1, 99)
	tests := []struct {
		name    string
		cmd     Command
		wantErr error
		balance ledger.Micros // of account 1 afterwards
		events  int
	}{
		{"unknown tier", CreateAccount{ID: uuidOf(1, 2), Tier: "gold"}, &ledger.Refusal{Reason: ledger.ReasonInvalidArgument}, 0, 0},
		{"same id", CreateAccount{ID: uuidOf(1, 1)}, &ledger.Refusal{Reason: ledger.ReasonAlreadyExists}, 0, 0},
		{"top-up", TopUp{AccountID: uuidOf(1, 1), Amount: 100, IdempotencyKey: "a"}, nil, 100, 1},
		{"same idempotency key", TopUp{AccountID: uuidOf(1, 1), Amount: 999, IdempotencyKey: "a"}, nil, 100, 0},
		{"another key", TopUp{AccountID: uuidOf(1, 1), Amount: 5, IdempotencyKey: "b"}, nil, 105, 1},
		{"no key", TopUp{AccountID: uuidOf(1, 1), Amount: 5}, nil, 110, 1},
		{"no key again", TopUp{AccountID: uuidOf(1, 1), Amount: 5}, nil, 115, 1},
		{"zero amount", TopUp{AccountID: uuidOf(1, 1), Amount: 0}, &ledger.Refusal{Reason: ledger.ReasonInvalidArgument}, 115, 0},
		{"overflow", TopUp{AccountID: uuidOf(1, 1), Amount: 1<<63 - 100}, &ledger.Refusal{Reason: ledger.ReasonInvalidArgument}, 115, 0},
		{"unknown account", TopUp{AccountID: missing, Amount: 5}, ledger.ErrNotFound, 115, 0},
		{"suspend unknown", SetAccountSuspended{AccountID: missing, Suspended: true}, ledger.ErrNotFound, 115, 0},
		{"get unknown", GetAccount{AccountID: missing}, ledger.ErrNotFound, 115, 0},
		{"suspend", SetAccountSuspended{AccountID: uuidOf(1, 1), Suspended: true}, nil, 115, 2}, // and its alert
		{"suspend again", SetAccountSuspended{AccountID: uuidOf(1, 1), Suspended: true}, nil, 115, 0},
	}
	for _, tt := range tests {
		a, evs := h.do(tt.cmd)
		if !errors.Is(a.Err, tt.wantErr) || (tt.wantErr == nil && a.Err != nil) {
			t.Errorf("%s: error %v, want %v", tt.name, a.Err, tt.wantErr)
		}
		if len(evs) != tt.events {
			t.Errorf("%s: %d events, want %d", tt.name, len(evs), tt.events)
		}
		if b := h.getAccount(uuidOf(1, 1)).Balance; b != tt.balance {
			t.Errorf("%s: balance %d, want %d", tt.name, b, tt.balance)
		}
	}
	acc := h.getAccount(uuidOf(1, 1))
	if !acc.ToppedUp || !acc.Suspended {
		t.Errorf("account %+v: want topped up and suspended", acc)
	}
}

func TestTiers(t *testing.T) {
	h := newHarness(t)
	tests := []struct {
		tier    ledger.Tier
		wantErr bool
	}{
		{ledger.Tier{Name: ""}, true},
		{ledger.Tier{Name: "x", RPMBeforeTopUp: -1}, true},
		{ledger.Tier{Name: "x", InFlightGeneral: 1, InFlightHighCost: 2}, true},
		{ledger.Tier{Name: "x", RPMBeforeTopUp: 1, RPMAfterTopUp: 1, InFlightGeneral: 1, InFlightHighCost: 1}, false},
	}
	for _, tt := range tests {
		if a, _ := h.do(PutTier{Tier: tt.tier, At: t0}); (a.Err != nil) != tt.wantErr {
			t.Errorf("PutTier %+v: %v", tt.tier, a.Err)
		}
	}
	a := h.account("x", 10)
	k, _ := h.key(a, nil)
	h.mustReserve(k, 0, ledger.PoolGeneral)
	if _, err := h.reserve(k, 0, ledger.PoolGeneral); refusal(err).Limit != "general" {
		t.Fatalf("second request in a pool of 1: %v", err)
	}
	// A changed tier applies to the next reservation at once.
	h.must(PutTier{Tier: ledger.Tier{Name: "x", RPMBeforeTopUp: 5, RPMAfterTopUp: 5, InFlightGeneral: 2, InFlightHighCost: 1}, At: t0})
	h.mustReserve(k, 0, ledger.PoolGeneral)
	if _, evs := h.do(PutTier{Tier: ledger.Tier{Name: "x", RPMBeforeTopUp: 5, RPMAfterTopUp: 5, InFlightGeneral: 2, InFlightHighCost: 1}, At: t0}); len(evs) != 0 {
		t.Errorf("an unchanged tier recorded %d events", len(evs))
	}
	if got := len(h.s.Snapshot().Tiers); got != 4 {
		t.Errorf("%d tiers, want the 3 built-in and x", got)
	}
}

func TestKeys(t *testing.T) {
	h := newHarness(t)
	a := h.account("", 1000)
	exp := t0.Add(48 * time.Hour)
	k, hash := h.key(a, func(nk *ledger.NewKey) {
		nk.Name, nk.AllowedModels = "ci", []string{"demo-chat"}
		nk.DailyLimit, nk.MonthlyLimit, nk.ExpiresAt, nk.AdminCreated = ptr[ledger.Micros](1000), ptr[ledger.Micros](0), &exp, true
	})
	want := ledger.Key{ID: k, AccountID: a, Name: "ci", Prefix: "sk-" + k[:4], AllowedModels: []string{"demo-chat"},
		DailyLimit: ptr[ledger.Micros](1000), MonthlyLimit: ptr[ledger.Micros](0), ExpiresAt: &exp, AdminCreated: true, CreatedAt: t0}
	if got := h.getKey(k); !reflect.DeepEqual(got, want) {
		t.Errorf("GetKey: %+v, want %+v", got, want)
	}
	creates := []struct {
		name string
		nk   ledger.NewKey
		want error
	}{
		{"unknown account", ledger.NewKey{AccountID: uuidOf(1, 99), Hash: hashOf("o")}, ledger.ErrNotFound},
		{"negative daily", ledger.NewKey{AccountID: a, Hash: hashOf("o"), DailyLimit: ptr[ledger.Micros](-1)}, &ledger.Refusal{Reason: ledger.ReasonInvalidArgument}},
		{"negative monthly", ledger.NewKey{AccountID: a, Hash: hashOf("o"), MonthlyLimit: ptr[ledger.Micros](-1)}, &ledger.Refusal{Reason: ledger.ReasonInvalidArgument}},
		{"short hash", ledger.NewKey{AccountID: a, Hash: []byte("short")}, &ledger.Refusal{Reason: ledger.ReasonInvalidArgument}},
		{"hash stored", ledger.NewKey{AccountID: a, Hash: hash}, &ledger.Refusal{Reason: ledger.ReasonAlreadyExists}},
	}
	for _, tt := range creates {
		if got := h.must2(CreateKey{ID: h.id(2), Key: tt.nk, At: t0}); !errors.Is(got, tt.want) {
			t.Errorf("%s: %v, want %v", tt.name, got, tt.want)
		}
	}

	auth := func(hash []byte, at time.Time) error { return h.must2(Authenticate{Hash: hash, At: at}) }
	g := h.must(Authenticate{Hash: hash, At: t0}).Grant
	if g.KeyID != k || g.AccountID != a || g.Tier != "default" || !g.AccountToppedUp || !g.AdminCreated || len(g.AllowedModels) != 1 {
		t.Errorf("grant %+v", g)
	}
	if err := auth(hash, exp); ledger.ReasonOf(err) != ledger.ReasonInvalidAPIKey {
		t.Errorf("at its expiry: %v", err)
	}
	if err := auth(hashOf("nobody"), t0); ledger.ReasonOf(err) != ledger.ReasonInvalidAPIKey {
		t.Errorf("unknown hash: %v", err)
	}
	h.must(SetAccountSuspended{AccountID: a, Suspended: true, At: t0})
	if g := h.must(Authenticate{Hash: hash, At: t0}).Grant; !g.AccountSuspended {
		t.Error("a suspended account's grant does not say so")
	}
	dis := h.must(SetKeyDisabled{KeyID: k, Disabled: true, At: t0}).Key
	if !dis.Disabled || auth(hash, t0) == nil {
		t.Errorf("disabled key %+v authenticates", dis)
	}
	h.must(SetKeyDisabled{KeyID: k, Disabled: false, At: t0})
	if err := auth(hash, t0); err != nil {
		t.Errorf("re-enabled key: %v", err)
	}
	h.must(RevokeKey{KeyID: k, At: t0.Add(time.Hour)})
	if _, evs := h.do(RevokeKey{KeyID: k, At: t0.Add(2 * time.Hour)}); len(evs) != 0 {
		t.Error("a second revocation changed the key")
	}
	if rev := h.s.keys[k].revokedAt; rev == nil || !rev.Equal(t0.Add(time.Hour)) {
		t.Errorf("revoked at %v, want the first revocation", rev)
	}
	if err := auth(hash, t0); ledger.ReasonOf(err) != ledger.ReasonInvalidAPIKey {
		t.Errorf("revoked key: %v", err)
	}
	for _, c := range []Command{GetKey{KeyID: uuidOf(2, 99)}, SetKeyDisabled{KeyID: uuidOf(2, 99)},
		RevokeKey{KeyID: uuidOf(2, 99)}, UpdateKey{Update: ledger.KeyUpdate{ID: uuidOf(2, 99)}}} {
		if err := h.must2(c); !errors.Is(err, ledger.ErrNotFound) {
			t.Errorf("%T of an unknown key: %v", c, err)
		}
	}
}

func TestUpdateKey(t *testing.T) {
	h := newHarness(t)
	a := h.account("", 1000)
	k, _ := h.key(a, func(nk *ledger.NewKey) { nk.Name, nk.AllowedModels = "old", []string{"m1"} })
	h.mustReserve(k, 40, ledger.PoolGeneral)
	exp := t0.Add(time.Hour + 3*time.Nanosecond)
	tests := []struct {
		name    string
		u       ledger.KeyUpdate
		wantErr ledger.Reason
		check   func(ledger.Key) bool
		events  int
	}{
		{"nothing set", ledger.KeyUpdate{}, 0, func(k ledger.Key) bool { return k.Name == "old" && k.HeldToday == 40 }, 0},
		{"name", ledger.KeyUpdate{Name: ledger.To("new")}, 0, func(k ledger.Key) bool { return k.Name == "new" && k.AllowedModels[0] == "m1" }, 1},
		{"every model", ledger.KeyUpdate{AllowedModels: ledger.To([]string{})}, 0, func(k ledger.Key) bool { return k.AllowedModels == nil }, 1},
		{"limits", ledger.KeyUpdate{DailyLimit: ledger.To(ptr[ledger.Micros](10)), MonthlyLimit: ledger.To(ptr[ledger.Micros](20))}, 0,
			func(k ledger.Key) bool { return *k.DailyLimit == 10 && *k.MonthlyLimit == 20 && k.HeldMonth == 40 }, 1},
		{"clear daily", ledger.KeyUpdate{DailyLimit: ledger.To[*ledger.Micros](nil)}, 0,
			func(k ledger.Key) bool { return k.DailyLimit == nil && *k.MonthlyLimit == 20 }, 1},
		{"expiry in microseconds", ledger.KeyUpdate{ExpiresAt: ledger.To(&exp)}, 0,
			func(k ledger.Key) bool { return k.ExpiresAt.Equal(t0.Add(time.Hour)) }, 1},
		{"negative limit", ledger.KeyUpdate{MonthlyLimit: ledger.To(ptr[ledger.Micros](-1))}, ledger.ReasonInvalidArgument, nil, 0},
		{"empty model name", ledger.KeyUpdate{AllowedModels: ledger.To([]string{"a", ""})}, ledger.ReasonInvalidArgument, nil, 0},
	}
	for _, tt := range tests {
		tt.u.ID = k
		a, evs := h.do(UpdateKey{Update: tt.u, At: t0})
		if ledger.ReasonOf(a.Err) != tt.wantErr || len(evs) != tt.events {
			t.Errorf("%s: %v with %d events", tt.name, a.Err, len(evs))
			continue
		}
		if tt.check != nil && !tt.check(a.Key) {
			t.Errorf("%s: key %+v", tt.name, a.Key)
		}
	}
	// A limit lowered below what is held refuses new reservations only.
	if _, err := h.reserve(k, 1, ledger.PoolGeneral); refusal(err).Limit != "monthly" {
		t.Errorf("over a lowered limit: %v", err)
	}
}

func TestVideoTasks(t *testing.T) {
	h := newHarness(t)
	a := h.account("", 0)
	k, _ := h.key(a, func(nk *ledger.NewKey) { nk.AdminCreated = true })
	got := h.must(RecordVideoTask{TaskID: "t1", KeyID: k, Model: "v", At: t0}).VideoTask
	want := ledger.VideoTask{TaskID: "t1", AccountID: a, KeyID: k, AdminCreatedKey: true, Model: "v", CreatedAt: t0,
		Origin: ledger.TaskOrigin{UpstreamTaskID: "t1"}}
	if got != want {
		t.Errorf("recorded %+v, want %+v", got, want)
	}
	origin := ledger.TaskOrigin{Channel: "c", UpstreamTaskID: "up"}
	if got := h.must(RecordVideoTask{TaskID: "t2", KeyID: k, Model: "v", Origin: origin, At: t0}).VideoTask; got.Origin != origin {
		t.Errorf("origin %+v", got.Origin)
	}
	if got := h.must(GetVideoTask{TaskID: "t1"}).VideoTask; got != want {
		t.Errorf("GetVideoTask %+v", got)
	}
	tests := []struct {
		c    Command
		want error
	}{
		{RecordVideoTask{TaskID: "", KeyID: k}, &ledger.Refusal{Reason: ledger.ReasonInvalidArgument}},
		{RecordVideoTask{TaskID: "t1", KeyID: uuidOf(2, 99)}, ledger.ErrNotFound},
		{RecordVideoTask{TaskID: "t1", KeyID: k}, &ledger.Refusal{Reason: ledger.ReasonAlreadyExists}},
		{GetVideoTask{TaskID: "t9"}, ledger.ErrNotFound},
	}
	for _, tt := range tests {
		if err := h.must2(tt.c); !errors.Is(err, tt.want) {
			t.Errorf("%+v: %v, want %v", tt.c, err, tt.want)
		}
	}
}

// TestForget: settled reservations and ended windows leave memory; held ones and the
// windows they hold in stay; the state keeps its invariants.
func TestForget(t *testing.T) {
	h := newHarness(t)
	a := h.account("", 1000)
	k, _ := h.key(a, nil)
	old := h.mustReserve(k, 10, ledger.PoolGeneral)
	held := h.mustReserve(k, 20, ledger.PoolGeneral)
	h.must(Commit{Request: ledger.CommitRequest{ReservationID: old.ID, Actual: 5}, At: t0})
	h.now = t0.Add(48 * time.Hour)
	recent := h.mustReserve(k, 30, ledger.PoolGeneral)
	h.must(Release{ReservationID: recent.ID, At: h.now})

	if _, evs := h.do(Forget{Before: t0, At: h.now}); len(evs) != 0 {
		t.Errorf("nothing to forget, %d events", len(evs))
	}
	_, evs := h.do(Forget{Before: t0.Add(24 * time.Hour), At: h.now})
	if len(evs) != 1 {
		t.Fatalf("%d events, want one Forgotten", len(evs))
	}
	for id, want := range map[string]bool{old.ID: false, held.ID: true, recent.ID: true} {
		if _, ok := h.s.reservations[id]; ok != want {
			t.Errorf("reservation %s kept %v, want %v", id, ok, want)
		}
	}
	if _, ok := h.s.byRequest["req-"+old.ID]; ok {
		t.Error("the forgotten reservation's request id is still indexed")
	}
	// The 14th's day window holds `held`; it stays.
	if len(h.s.keys[k].windows) != 3 {
		t.Errorf("%d windows, want the 14th's and the 16th's with March's", len(h.s.keys[k].windows))
	}
	h.must(Commit{Request: ledger.CommitRequest{ReservationID: held.ID, Actual: 20}, At: h.now})
	h.do(Forget{Before: t0.Add(24 * time.Hour), At: h.now})
	if len(h.s.keys[k].windows) != 2 {
		t.Errorf("%d windows, want March's and the 16th's", len(h.s.keys[k].windows))
	}
	if got := h.getAccount(a); got.Balance != 975 || got.Reserved != 0 {
		t.Errorf("account %+v", got)
	}
}

func TestAccountLabel(t *testing.T) {
	h := newHarness(t)
	a := uuidOf(1, 1)
	if got := h.must(CreateAccount{ID: a, Label: "Acme research", At: t0}).Account.Label; got != "Acme research" {
		t.Fatalf("created with label %q", got)
	}
	tests := []struct {
		name    string
		update  ledger.AccountUpdate
		wantErr error
		label   string // of the account afterwards
		events  int
	}{
		{"nothing set", ledger.AccountUpdate{ID: a}, nil, "Acme research", 0},
		{"same label", ledger.AccountUpdate{ID: a, Label: ledger.To("Acme research")}, nil, "Acme research", 0},
		{"new label", ledger.AccountUpdate{ID: a, Label: ledger.To("Acme, billing")}, nil, "Acme, billing", 1},
		{"unknown account", ledger.AccountUpdate{ID: uuidOf(1, 9), Label: ledger.To("x")}, ledger.ErrNotFound, "Acme, billing", 0},
		{"cleared", ledger.AccountUpdate{ID: a, Label: ledger.To("")}, nil, "", 1},
	}
	for _, tt := range tests {
		ans, evs := h.do(UpdateAccount{Update: tt.update, At: t0})
		if !errors.Is(ans.Err, tt.wantErr) || (tt.wantErr == nil && ans.Err != nil) {
			t.Errorf("%s: error %v, want %v", tt.name, ans.Err, tt.wantErr)
		}
		if len(evs) != tt.events {
			t.Errorf("%s: %d events, want %d", tt.name, len(evs), tt.events)
		}
		if got := h.getAccount(a).Label; got != tt.label {
			t.Errorf("%s: label %q, want %q", tt.name, got, tt.label)
		}
		if tt.wantErr == nil && ans.Account.Label != tt.label {
			t.Errorf("%s: answered label %q, want %q", tt.name, ans.Account.Label, tt.label)
		}
	}
	h.must(UpdateAccount{Update: ledger.AccountUpdate{ID: a, Label: ledger.To("kept")}, At: t0})
	if got := Restore(h.s.Snapshot()).Snapshot().Accounts[0].Label; got != "kept" {
		t.Errorf("restored label %q, want kept", got)
	}
}
