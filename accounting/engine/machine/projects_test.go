package machine

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/llmgw/gateway/accounting/ledger"
)

func (h *harness) project(acct, parent string, edit func(*ledger.NewProject)) string {
	h.t.Helper()
	id := h.id(5)
	np := ledger.NewProject{AccountID: acct, ParentID: parent, Name: "p" + id[len(id)-3:]}
	if edit != nil {
		edit(&np)
	}
	h.must(CreateProject{ID: id, Project: np, At: h.now})
	return id
}

func (h *harness) place(keyID, projectID string) {
	h.t.Helper()
	h.must(PlaceKey{Placement: ledger.KeyPlacement{KeyID: keyID, ProjectID: ledger.To(projectID)}, At: h.now})
}

func (h *harness) getProject(id string) ledger.Project {
	h.t.Helper()
	return h.must(GetProject{ProjectID: id, At: h.now}).Project
}

// reserveTokens reserves amount with a token bound on model "m".
func (h *harness) reserveTokens(keyID string, amount ledger.Micros, tokens int64) (ledger.Reservation, error) {
	h.t.Helper()
	id := h.id(3)
	a, _ := h.do(Reserve{ID: id, Request: ledger.ReserveRequest{RequestID: "req-" + id, KeyID: keyID,
		Model: "m", Amount: amount, Pool: ledger.PoolGeneral, Tokens: tokens}, At: h.now})
	return a.Reservation, a.Err
}

// chain is an account with a key in the deepest of n nested projects, edit setting each
// project's limits (level 1 first).
func (h *harness) chain(n int, edit func(level int, np *ledger.NewProject)) (acct, key string, projects []string) {
	h.t.Helper()
	h.must(PutTier{Tier: ledger.Tier{Name: "wide", RPMBeforeTopUp: 1000, RPMAfterTopUp: 1000,
		InFlightGeneral: 100, InFlightHighCost: 10}, At: h.now})
	acct = h.account("wide", 1_000_000)
	parent := ""
	for level := 1; level <= n; level++ {
		parent = h.project(acct, parent, func(np *ledger.NewProject) {
			if edit != nil {
				edit(level, np)
			}
		})
		projects = append(projects, parent)
	}
	key, _ = h.key(acct, nil)
	if n > 0 {
		h.place(key, parent)
	}
	return acct, key, projects
}

func TestCreateProject(t *testing.T) {
	h := newHarness(t)
	a := h.account("", 0)
	other := h.account("", 0)
	p1 := h.project(a, "", func(np *ledger.NewProject) {
		np.Name, np.DailyLimit, np.RPM, np.Models = "top", ptr[ledger.Micros](5), ptr[int64](3), []string{"m"}
	})
	got := h.getProject(p1)
	want := ledger.Project{ID: p1, AccountID: a, Name: "top", DailyLimit: ptr[ledger.Micros](5), RPM: ptr[int64](3),
		Models: []string{"m"}, CreatedAt: t0}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("project %+v, want %+v", got, want)
	}
	p2 := h.project(a, p1, nil)
	p3 := h.project(a, p2, nil)
	p4 := h.project(a, p3, nil)
	if g := h.getProject(p4); g.ParentID != p3 {
		t.Fatalf("level 4's parent %q", g.ParentID)
	}
	tests := []struct {
		name string
		np   ledger.NewProject
		id   string
		want ledger.Refusal
	}{
		{"a fifth level", ledger.NewProject{AccountID: a, ParentID: p4, Name: "x"}, "", ledger.Refusal{Reason: ledger.ReasonInvalidArgument}},
		{"a parent of another account", ledger.NewProject{AccountID: other, ParentID: p1, Name: "x"}, "", ledger.Refusal{Reason: ledger.ReasonInvalidArgument}},
		{"an unknown parent", ledger.NewProject{AccountID: a, ParentID: "nope", Name: "x"}, "", ledger.Refusal{Reason: ledger.ReasonInvalidArgument}},
		{"an unknown account", ledger.NewProject{AccountID: "nope", Name: "x"}, "", ledger.Refusal{Detail: "not found"}},
		{"no name", ledger.NewProject{AccountID: a}, "", ledger.Refusal{Reason: ledger.ReasonInvalidArgument}},
		{"a negative limit", ledger.NewProject{AccountID: a, Name: "x", Limit: ptr[ledger.Micros](-1)}, "", ledger.Refusal{Reason: ledger.ReasonInvalidArgument}},
		{"an rpm of 0", ledger.NewProject{AccountID: a, Name: "x", RPM: ptr[int64](0)}, "", ledger.Refusal{Reason: ledger.ReasonInvalidArgument}},
		{"a tpm too large", ledger.NewProject{AccountID: a, Name: "x", TPM: ptr[int64](maxTPM + 1)}, "", ledger.Refusal{Reason: ledger.ReasonInvalidArgument}},
		{"an empty model", ledger.NewProject{AccountID: a, Name: "x", Models: []string{""}}, "", ledger.Refusal{Reason: ledger.ReasonInvalidArgument}},
		{"its id again", ledger.NewProject{AccountID: a, Name: "x"}, p1, ledger.Refusal{Reason: ledger.ReasonAlreadyExists}},
	}
	for _, tt := range tests {
		id := tt.id
		if id == "" {
			id = h.id(5)
		}
		ans, evs := h.do(CreateProject{ID: id, Project: tt.np, At: t0})
		if got := refusal(ans.Err); got != tt.want || len(evs) != 0 {
			t.Errorf("%s: %+v with %d events, want %+v", tt.name, got, len(evs), tt.want)
		}
	}
	if l := h.must(ListProjects{AccountID: a, At: t0}).Projects; len(l) != 4 {
		t.Fatalf("listed %d projects, want 4", len(l))
	}
}

func TestUpdateProject(t *testing.T) {
	h := newHarness(t)
	a := h.account("", 0)
	p := h.project(a, "", nil)
	tests := []struct {
		name   string
		u      ledger.ProjectUpdate
		check  func(ledger.Project) bool
		events int
		want   ledger.Reason
	}{
		{"nothing", ledger.ProjectUpdate{}, func(v ledger.Project) bool { return v.DailyLimit == nil }, 0, 0},
		{"every limit", ledger.ProjectUpdate{Name: ledger.To("n"), DailyLimit: ledger.To(ptr[ledger.Micros](1)),
			MonthlyLimit: ledger.To(ptr[ledger.Micros](2)), Limit: ledger.To(ptr[ledger.Micros](3)), RPM: ledger.To(ptr[int64](4)),
			TPM: ledger.To(ptr[int64](5)), Models: ledger.To([]string{"a"})}, func(v ledger.Project) bool {
			return v.Name == "n" && *v.DailyLimit == 1 && *v.MonthlyLimit == 2 && *v.Limit == 3 && *v.RPM == 4 && *v.TPM == 5 && v.Models[0] == "a"
		}, 1, 0},
		{"the same again", ledger.ProjectUpdate{DailyLimit: ledger.To(ptr[ledger.Micros](1))}, func(ledger.Project) bool { return true }, 0, 0},
		{"clear daily", ledger.ProjectUpdate{DailyLimit: ledger.To[*ledger.Micros](nil)},
			func(v ledger.Project) bool { return v.DailyLimit == nil && *v.MonthlyLimit == 2 }, 1, 0},
		{"clear monthly", ledger.ProjectUpdate{MonthlyLimit: ledger.To[*ledger.Micros](nil)}, func(v ledger.Project) bool { return v.MonthlyLimit == nil }, 1, 0},
		{"clear lifetime", ledger.ProjectUpdate{Limit: ledger.To[*ledger.Micros](nil)}, func(v ledger.Project) bool { return v.Limit == nil }, 1, 0},
		{"clear rpm", ledger.ProjectUpdate{RPM: ledger.To[*int64](nil)}, func(v ledger.Project) bool { return v.RPM == nil }, 1, 0},
		{"clear tpm", ledger.ProjectUpdate{TPM: ledger.To[*int64](nil)}, func(v ledger.Project) bool { return v.TPM == nil }, 1, 0},
		{"every model", ledger.ProjectUpdate{Models: ledger.To[[]string](nil)}, func(v ledger.Project) bool { return v.Models == nil }, 1, 0},
		{"a negative limit", ledger.ProjectUpdate{Limit: ledger.To(ptr[ledger.Micros](-1))}, nil, 0, ledger.ReasonInvalidArgument},
		{"an empty name", ledger.ProjectUpdate{Name: ledger.To("")}, nil, 0, ledger.ReasonInvalidArgument},
	}
	for _, tt := range tests {
		tt.u.ID = p
		ans, evs := h.do(UpdateProject{Update: tt.u, At: t0})
		if ledger.ReasonOf(ans.Err) != tt.want || len(evs) != tt.events {
			t.Errorf("%s: %v with %d events", tt.name, ans.Err, len(evs))
			continue
		}
		if tt.check != nil && !tt.check(ans.Project) {
			t.Errorf("%s: %+v", tt.name, ans.Project)
		}
	}
	if ans, _ := h.do(UpdateProject{Update: ledger.ProjectUpdate{ID: "nope"}, At: t0}); ans.Err != ledger.ErrNotFound {
		t.Errorf("an unknown project: %v", ans.Err)
	}
}

// TestDeleteProject: refused while it has keys, child projects or holds in flight.
func TestDeleteProject(t *testing.T) {
	h := newHarness(t)
	a := h.account("", 1000)
	top := h.project(a, "", nil)
	child := h.project(a, top, nil)
	k, _ := h.key(a, nil)
	h.place(k, child)
	r := h.mustReserve(k, 10, ledger.PoolGeneral)
	refusedWhile := func(what, id string) {
		t.Helper()
		if ans, evs := h.do(DeleteProject{ProjectID: id, At: h.now}); ledger.ReasonOf(ans.Err) != ledger.ReasonInUse || len(evs) != 0 {
			t.Fatalf("deleting %s: %v, %d events", what, ans.Err, len(evs))
		}
	}
	refusedWhile("a project with a child", top)
	refusedWhile("a project with a key", child)
	h.must(PlaceKey{Placement: ledger.KeyPlacement{KeyID: k, ProjectID: ledger.To("")}, At: h.now})
	refusedWhile("a project with a hold in flight", child)
	h.must(Commit{Request: ledger.CommitRequest{ReservationID: r.ID, Actual: 7}, At: h.now})
	if p := h.getProject(top); p.Spent != 7 || p.Reserved != 0 {
		t.Fatalf("the moved key's hold settled on %+v, want spent 7 on its old path", p)
	}
	h.must(DeleteProject{ProjectID: child, At: h.now})
	h.must(DeleteProject{ProjectID: top, At: h.now})
	if ans, _ := h.do(GetProject{ProjectID: top}); ans.Err != ledger.ErrNotFound {
		t.Fatalf("deleted project: %v", ans.Err)
	}
	// A snapshot still restores: the settled reservation no longer names them.
	if d := snapshotDiff(h.s.Snapshot(), Restore(h.s.Snapshot()).Snapshot()); d != "" {
		t.Fatal(d)
	}
}

func TestPlaceKey(t *testing.T) {
	h := newHarness(t)
	a := h.account("", 0)
	other := h.account("", 0)
	p := h.project(a, "", nil)
	po := h.project(other, "", nil)
	k, _ := h.key(a, nil)
	pl := func(pp ledger.KeyPlacement) (Answer, []Event) {
		pp.KeyID = k
		return h.do(PlaceKey{Placement: pp, At: t0})
	}
	if ans, evs := pl(ledger.KeyPlacement{ProjectID: ledger.To(po)}); ledger.ReasonOf(ans.Err) != ledger.ReasonInvalidArgument || len(evs) != 0 {
		t.Fatalf("into another account's project: %v", ans.Err)
	}
	if ans, evs := pl(ledger.KeyPlacement{ProjectID: ledger.To("nope")}); ledger.ReasonOf(ans.Err) != ledger.ReasonInvalidArgument || len(evs) != 0 {
		t.Fatalf("into an unknown project: %v", ans.Err)
	}
	if ans, evs := pl(ledger.KeyPlacement{RPM: ledger.To(ptr[int64](-1))}); ledger.ReasonOf(ans.Err) != ledger.ReasonInvalidArgument || len(evs) != 0 {
		t.Fatalf("a negative rpm: %v", ans.Err)
	}
	if _, evs := pl(ledger.KeyPlacement{ProjectID: ledger.To(p), RPM: ledger.To(ptr[int64](5)), TPM: ledger.To(ptr[int64](50))}); len(evs) != 1 {
		t.Fatalf("placing: %d events", len(evs))
	}
	if _, evs := pl(ledger.KeyPlacement{ProjectID: ledger.To(p)}); len(evs) != 0 {
		t.Fatalf("placing again: %d events", len(evs))
	}
	ks := h.s.Snapshot().Keys[0]
	if ks.ProjectID != p || *ks.RPM != 5 || *ks.TPM != 50 {
		t.Fatalf("key %+v", ks)
	}
	pl(ledger.KeyPlacement{ProjectID: ledger.To(""), RPM: ledger.To[*int64](nil)})
	ks = h.s.Snapshot().Keys[0]
	if ks.ProjectID != "" || ks.RPM != nil || *ks.TPM != 50 {
		t.Fatalf("key after leaving %+v", ks)
	}
}

// TestProjectSpendLimits: every window of the key's project and of its ancestors
// refuses with key_limit_reached naming the project and window, holding nothing.
func TestProjectSpendLimits(t *testing.T) {
	endOfDay := secondsUntil(t0, time.Date(2026, 3, 15, 0, 0, 0, 0, time.UTC))
	endOfMonth := secondsUntil(t0, time.Date(2026, 4, 1, 0, 0, 0, 0, time.UTC))
	tests := []struct {
		name   string
		level  int // whose limit (1: the top)
		set    func(*ledger.NewProject)
		held   ledger.Micros // admitted and left in flight first
		spent  ledger.Micros // admitted and committed first
		amount ledger.Micros
		window string
		retry  int
	}{
		{"daily of the key's project", 3, func(np *ledger.NewProject) { np.DailyLimit = ptr[ledger.Micros](100) }, 0, 60, 41, "daily", endOfDay},
		{"daily exactly reached is allowed", 3, func(np *ledger.NewProject) { np.DailyLimit = ptr[ledger.Micros](100) }, 0, 60, 40, "", 0},
		{"monthly of the top", 1, func(np *ledger.NewProject) { np.MonthlyLimit = ptr[ledger.Micros](100) }, 0, 100, 1, "monthly", endOfMonth},
		{"lifetime of the middle, never freed", 2, func(np *ledger.NewProject) { np.Limit = ptr[ledger.Micros](100) }, 0, 90, 20, "lifetime", 0},
		{"lifetime freed by a hold in flight", 2, func(np *ledger.NewProject) { np.Limit = ptr[ledger.Micros](100) }, 50, 0, 60, "lifetime", ledger.ConcurrencyRetryAfter},
		{"lifetime exactly freed by a hold in flight", 2, func(np *ledger.NewProject) { np.Limit = ptr[ledger.Micros](100) }, 10, 40, 60, "lifetime", ledger.ConcurrencyRetryAfter},
		{"daily freed by a hold in flight", 1, func(np *ledger.NewProject) { np.DailyLimit = ptr[ledger.Micros](100) }, 50, 0, 60, "daily", ledger.ConcurrencyRetryAfter},
		{"a free request is never refused by a limit", 3, func(np *ledger.NewProject) { np.Limit = ptr[ledger.Micros](0) }, 0, 0, 0, "", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t)
			acct, k, ps := h.chain(3, func(level int, np *ledger.NewProject) {
				if level == tt.level {
					tt.set(np)
				}
			})
			if tt.spent > 0 {
				r := h.mustReserve(k, tt.spent, ledger.PoolGeneral)
				h.must(Commit{Request: ledger.CommitRequest{ReservationID: r.ID, Actual: tt.spent}, At: h.now})
			}
			if tt.held > 0 {
				h.mustReserve(k, tt.held, ledger.PoolGeneral)
			}
			before := h.s.Snapshot()
			_, err := h.reserve(k, tt.amount, ledger.PoolGeneral)
			if tt.window == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			want := ledger.Refusal{Reason: ledger.ReasonKeyLimitReached, Limit: "project:" + ps[tt.level-1] + ":" + tt.window, RetryAfter: tt.retry}
			if got := refusal(err); got != want {
				t.Fatalf("refusal %+v, want %+v", got, want)
			}
			if d := snapshotDiff(before, h.s.Snapshot()); d != "" {
				t.Fatalf("a refusal changed %s", d)
			}
			if a := h.getAccount(acct); a.Reserved != tt.held {
				t.Fatalf("account reserved %d", a.Reserved)
			}
		})
	}
}

// TestProjectSpendCountsDescendants: a hold and its charge count on the key's project
// and every ancestor, not on siblings, and settle exactly what was held.
func TestProjectSpendCountsDescendants(t *testing.T) {
	h := newHarness(t)
	_, k, ps := h.chain(3, nil)
	acct := h.s.keys[k].acct.id
	sibling := h.project(acct, ps[0], nil)
	r := h.mustReserve(k, 100, ledger.PoolGeneral)
	for _, p := range ps {
		if v := h.getProject(p); v.Reserved != 100 || v.Spent != 0 {
			t.Fatalf("project %s while held: %+v", p, v)
		}
	}
	h.must(Commit{Request: ledger.CommitRequest{ReservationID: r.ID, Actual: 30}, At: h.now})
	for _, p := range ps {
		if v := h.getProject(p); v.Reserved != 0 || v.Spent != 30 || v.SpentToday != 30 || v.SpentMonth != 30 {
			t.Fatalf("project %s after commit: %+v", p, v)
		}
	}
	if v := h.getProject(sibling); v.Spent != 0 {
		t.Fatalf("the sibling spent %d", v.Spent)
	}
	r = h.mustReserve(k, 50, ledger.PoolGeneral)
	h.now = h.now.Add(DefaultTTL)
	h.must(ExpireDue{Limit: 10, At: h.now})
	if v := h.getProject(ps[0]); v.Reserved != 0 || v.Spent != 30 {
		t.Fatalf("after expiry: %+v", v)
	}
}

func TestProjectModels(t *testing.T) {
	h := newHarness(t)
	_, k, ps := h.chain(2, func(level int, np *ledger.NewProject) {
		if level == 1 {
			np.Models = []string{"m", "n"}
		}
	})
	h.mustReserve(k, 1, ledger.PoolGeneral) // "m": allowed by the top, the child allows all
	h.must(UpdateProject{Update: ledger.ProjectUpdate{ID: ps[1], Models: ledger.To([]string{"n"})}, At: h.now})
	_, err := h.reserve(k, 1, ledger.PoolGeneral)
	if got := refusal(err); got != (ledger.Refusal{Reason: ledger.ReasonModelNotAllowed, Limit: "project:" + ps[1] + ":models"}) {
		t.Fatalf("refusal %+v", got)
	}
	h.must(UpdateProject{Update: ledger.ProjectUpdate{ID: ps[1], Models: ledger.To[[]string](nil)}, At: h.now})
	h.must(UpdateProject{Update: ledger.ProjectUpdate{ID: ps[0], Models: ledger.To([]string{"x"})}, At: h.now})
	if got := refusal(h.reserveErr(k)); got.Reason != ledger.ReasonModelNotAllowed || got.Limit != "project:"+ps[0]+":models" {
		t.Fatalf("refusal by the top %+v", got)
	}
}

func (h *harness) reserveErr(k string) error {
	_, err := h.reserve(k, 1, ledger.PoolGeneral)
	return err
}

// TestRPM: requests admitted in the last 60 s, per key and per project.
func TestRPM(t *testing.T) {
	for _, who := range []string{"key", "project"} {
		t.Run(who, func(t *testing.T) {
			h := newHarness(t)
			_, k, ps := h.chain(2, func(level int, np *ledger.NewProject) {
				if who == "project" && level == 1 {
					np.RPM = ptr[int64](2)
				}
			})
			limit := "project:" + ps[0] + ":rpm"
			if who == "key" {
				h.must(PlaceKey{Placement: ledger.KeyPlacement{KeyID: k, RPM: ledger.To(ptr[int64](2))}, At: h.now})
				limit = "key:rpm"
			}
			h.mustReserve(k, 0, ledger.PoolGeneral)
			h.now = h.now.Add(20 * time.Second)
			h.mustReserve(k, 0, ledger.PoolGeneral)
			h.now = h.now.Add(10*time.Second + time.Millisecond)
			_, err := h.reserve(k, 0, ledger.PoolGeneral)
			if got := refusal(err); got != (ledger.Refusal{Reason: ledger.ReasonRateLimitExceeded, Limit: limit, RetryAfter: 30}) {
				t.Fatalf("third request: %+v", got)
			}
			h.now = t0.Add(time.Minute)
			h.mustReserve(k, 0, ledger.PoolGeneral) // the first left the minute
			if _, err := h.reserve(k, 0, ledger.PoolGeneral); refusal(err).RetryAfter != 20 {
				t.Fatalf("then: %v", err)
			}
		})
	}
}

// TestTPM: a bucket of N tokens, full when set, refilled at N/60 a second; admission
// takes the bound, commit gives back the unused part, release and expiry all of it.
func TestTPM(t *testing.T) {
	for _, who := range []string{"key", "project"} {
		t.Run(who, func(t *testing.T) {
			h := newHarness(t)
			_, k, ps := h.chain(3, func(level int, np *ledger.NewProject) {
				if who == "project" && level == 2 {
					np.TPM = ptr[int64](600) // 10 tokens a second
				}
			})
			limit := "project:" + ps[1] + ":tpm"
			if who == "key" {
				h.must(PlaceKey{Placement: ledger.KeyPlacement{KeyID: k, TPM: ledger.To(ptr[int64](600))}, At: h.now})
				limit = "key:tpm"
			}
			refusedWith := func(tokens int64, retry int) {
				t.Helper()
				before := h.s.Snapshot()
				_, err := h.reserveTokens(k, 10, tokens)
				if got := refusal(err); got != (ledger.Refusal{Reason: ledger.ReasonRateLimitExceeded, Limit: limit, RetryAfter: retry}) {
					t.Fatalf("%d tokens: %+v, want retry %d", tokens, got, retry)
				}
				if d := snapshotDiff(before, h.s.Snapshot()); d != "" {
					t.Fatalf("a refusal changed %s", d)
				}
			}
			refusedWith(601, 0) // larger than the bucket: never fits
			r1, err := h.reserveTokens(k, 10, 400)
			if err != nil {
				t.Fatal(err)
			}
			refusedWith(300, 10) // 200 left; 100 more take 10 s
			h.now = h.now.Add(9500 * time.Millisecond)
			refusedWith(300, 1) // 295 now: 0.5 s more, rounded up to a second
			// Commit with 150 tokens used: 250 come back at once.
			h.must(Commit{Request: ledger.CommitRequest{ReservationID: r1.ID, Actual: 5,
				Usage: ledger.Usage{InputTokens: 100, OutputTokens: 50}}, At: h.now})
			r2, err := h.reserveTokens(k, 10, 545)
			if err != nil {
				t.Fatal(err)
			}
			refusedWith(1, 1)
			h.must(Release{ReservationID: r2.ID, At: h.now}) // all 545 back
			r3, err := h.reserveTokens(k, 10, 545)
			if err != nil {
				t.Fatal(err)
			}
			h.now = h.now.Add(DefaultTTL)
			h.must(ExpireDue{Limit: 10, At: h.now}) // back, and refilled meanwhile: full
			if _, err := h.reserveTokens(k, 10, 600); err != nil {
				t.Fatalf("a full bucket after the expiry of %s: %v", r3.ID, err)
			}
		})
	}
}

// TestAllOrNothing: a refusal by the last project on the path takes nothing from the
// buckets, rpm counts and windows of the key and the projects before it.
func TestAllOrNothing(t *testing.T) {
	h := newHarness(t)
	_, k, _ := h.chain(3, func(level int, np *ledger.NewProject) {
		np.RPM, np.TPM, np.DailyLimit = ptr[int64](10), ptr[int64](1000), ptr[ledger.Micros](1000)
		if level == 1 {
			np.TPM = ptr[int64](100)
		}
	})
	h.must(PlaceKey{Placement: ledger.KeyPlacement{KeyID: k, RPM: ledger.To(ptr[int64](10)), TPM: ledger.To(ptr[int64](1000))}, At: h.now})
	before := h.s.Snapshot()
	if _, err := h.reserveTokens(k, 10, 101); ledger.ReasonOf(err) != ledger.ReasonRateLimitExceeded {
		t.Fatalf("%v", err)
	}
	if d := snapshotDiff(before, h.s.Snapshot()); d != "" {
		t.Fatalf("a refusal changed %s", d)
	}
	if _, err := h.reserveTokens(k, 10, 100); err != nil {
		t.Fatal(err)
	}
}

// TestTPMChanges: a tpm set later starts full; lowered, the bucket keeps at most the new
// full; a hold taken before a tpm was cleared gives back to nothing.
func TestTPMChanges(t *testing.T) {
	h := newHarness(t)
	_, k, ps := h.chain(1, nil)
	set := func(tpm *int64) {
		h.must(UpdateProject{Update: ledger.ProjectUpdate{ID: ps[0], TPM: ledger.To(tpm)}, At: h.now})
	}
	r, _ := h.reserveTokens(k, 1, 1000) // no tpm: nothing taken
	set(ptr[int64](600))
	h.must(Release{ReservationID: r.ID, At: h.now})
	r, err := h.reserveTokens(k, 1, 600)
	if err != nil {
		t.Fatal(err)
	}
	set(nil)
	h.must(Release{ReservationID: r.ID, At: h.now})
	set(ptr[int64](60))
	if _, err := h.reserveTokens(k, 1, 60); err != nil {
		t.Fatal(err)
	}
}

// TestReserveTokensValidated: a negative token bound is invalid.
func TestReserveTokensValidated(t *testing.T) {
	h := newHarness(t)
	_, k, _ := h.chain(0, nil)
	if _, err := h.reserveTokens(k, 1, -1); ledger.ReasonOf(err) != ledger.ReasonInvalidArgument {
		t.Fatal(err)
	}
}

// TestProjectsSnapshotJSON: a state with projects, placed keys, holds in flight on a
// path and used rate limits survives a snapshot's JSON, as the journal stores it.
func TestProjectsSnapshotJSON(t *testing.T) {
	h := newHarness(t)
	_, k, _ := h.chain(3, func(level int, np *ledger.NewProject) {
		np.RPM, np.TPM, np.Limit, np.Models = ptr[int64](10), ptr[int64](1000), ptr[ledger.Micros](500), []string{"m"}
	})
	h.must(PlaceKey{Placement: ledger.KeyPlacement{KeyID: k, RPM: ledger.To(ptr[int64](5)), TPM: ledger.To(ptr[int64](900))}, At: h.now})
	r, err := h.reserveTokens(k, 100, 300)
	if err != nil {
		t.Fatal(err)
	}
	h.now = h.now.Add(time.Second)
	if _, err := h.reserveTokens(k, 50, 200); err != nil {
		t.Fatal(err)
	}
	h.must(Commit{Request: ledger.CommitRequest{ReservationID: r.ID, Actual: 80, Usage: ledger.Usage{InputTokens: 10}}, At: h.now})
	want := h.s.Snapshot()
	b, err := json.Marshal(want)
	if err != nil {
		t.Fatal(err)
	}
	var back Snapshot
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if d := snapshotDiff(want, Restore(back).Snapshot()); d != "" {
		t.Fatalf("through JSON: %s", d)
	}
	if len(want.Projects) != 3 || want.Keys[0].Rates.TokensHeld != 200 || len(want.Keys[0].Rates.Admitted) != 2 {
		t.Fatalf("snapshot %+v", want)
	}
}
