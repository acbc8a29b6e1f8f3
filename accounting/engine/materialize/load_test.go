package materialize_test

import (
	"cmp"
	"context"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/llmgw/gateway/accounting/engine/machine"
	"github.com/llmgw/gateway/accounting/engine/materialize"
	"github.com/llmgw/gateway/accounting/ledger"
	"github.com/llmgw/gateway/accounting/store"
	"github.com/llmgw/gateway/accounting/store/storetest"
)

// oldLedger is a ledger kept by the PostgreSQL store, with the ids of what it holds
// (only the first two accounts reserved).
type oldLedger struct {
	s        *store.Store
	clk      *clock
	accounts []string
	keys     []string
	hashes   map[string][]byte             // by key id
	held     map[string]ledger.Reservation // by id
	settled  map[string]ledger.Reservation // settled within the horizon, by id
	old      []string                      // settled before the horizon
	videos   []string                      // task ids
	topUps   map[[2]string]bool            // account, idempotency key
}

// t1 is the load's time: 06:00 on the first of a month, so that the previous day is in
// the previous month.
var t1 = time.Date(2031, 3, 1, 6, 0, 0, 0, time.UTC)

func TestLoadReadsTheStoresTables(t *testing.T) {
	ctx := context.Background()
	clk := &clock{t: t1.Add(-10 * time.Hour)}
	pool := storetest.NewPool(t, storetest.NewDB(t), 8)
	s := store.New(pool, store.Options{Now: clk.Now})
	l := &oldLedger{s: s, clk: clk, hashes: map[string][]byte{}, held: map[string]ledger.Reservation{},
		settled: map[string]ledger.Reservation{}, topUps: map[[2]string]bool{}}

	must(s.PutTier(ctx, ledger.Tier{Name: "gold", RPMBeforeTopUp: 50, RPMAfterTopUp: 500, InFlightGeneral: 20, InFlightHighCost: 4}))(t)
	a1 := must(s.CreateAccount(ctx, ledger.NewAccount{}))(t).ID
	a2 := must(s.CreateAccount(ctx, ledger.NewAccount{Tier: "gold"}))(t).ID
	a3 := must(s.CreateAccount(ctx, ledger.NewAccount{Tier: "tight"}))(t).ID
	a4 := must(s.CreateAccount(ctx, ledger.NewAccount{Tier: "enterprise"}))(t).ID // never topped up, never reserved
	l.accounts = []string{a1, a2, a3, a4}
	topUp := func(a string, amount ledger.Micros, key string) {
		must(s.TopUp(ctx, a, amount, key))(t)
		if key != "" {
			l.topUps[[2]string{a, key}] = true
		}
	}
	topUp(a1, 20_000_000, "t-1")
	topUp(a1, 20_000_000, "t-1") // repeated: adds nothing
	topUp(a1, 5_000_000, "")
	topUp(a2, 50_000_000, "x")
	topUp(a3, 1_000_000, "")
	must(s.SetAccountSuspended(ctx, a3, true))(t)

	key := func(name string, nk ledger.NewKey) string {
		nk.Hash, nk.Prefix, nk.Name = hash(name), name[:2], name
		k := must(s.CreateKey(ctx, nk))(t)
		l.keys, l.hashes[k.ID] = append(l.keys, k.ID), nk.Hash
		return k.ID
	}
	k1 := key("k1", ledger.NewKey{AccountID: a1, DailyLimit: ptr[ledger.Micros](9_000_000), MonthlyLimit: ptr[ledger.Micros](30_000_000)})
	key("k2", ledger.NewKey{AccountID: a1, AllowedModels: []string{"m-a", "m-b"}, ExpiresAt: ptr(t1.Add(72 * time.Hour)), AdminCreated: true})
	k3 := key("k3", ledger.NewKey{AccountID: a1})
	k4 := key("k4", ledger.NewKey{AccountID: a1})
	k5 := key("k5", ledger.NewKey{AccountID: a2})
	key("k6", ledger.NewKey{AccountID: a3})
	must(s.SetKeyDisabled(ctx, k3, true))(t)
	must(s.RevokeKey(ctx, k4))(t)

	n := 0
	reserve := func(k string, amount ledger.Micros, p ledger.Pool, ttl time.Duration) ledger.Reservation {
		n++
		return must(s.Reserve(ctx, ledger.ReserveRequest{RequestID: "req-" + string(rune('a'+n)), KeyID: k,
			Model: "m-a", Amount: amount, Pool: p, TTL: ttl}))(t)
	}
	commit := func(r ledger.Reservation, actual ledger.Micros) {
		must(s.Commit(ctx, ledger.CommitRequest{ReservationID: r.ID, Actual: actual, UpstreamModel: "up-a", Channel: "ch",
			Usage: ledger.Usage{InputTokens: 10, OutputTokens: 20, Components: []ledger.Component{
				{Name: "input", Units: 10, PricePerMTok: 1000, Amount: actual / 2},
				{Name: "output", Units: 20, PricePerMTok: 1000, Amount: actual - actual/2}}}}))(t)
	}

	// February: a charge of k5 (its windows then hold nothing) and a hold of k1 across
	// midnight (its February windows still hold it).
	feb := reserve(k5, 3_000_000, ledger.PoolGeneral, 0)
	commit(feb, 2_000_000)
	l.old = append(l.old, feb.ID)
	clk.Set(t1.Add(-7 * time.Hour))
	across := reserve(k1, 1_000_000, ledger.PoolGeneral, 24*time.Hour)
	l.held[across.ID] = across

	// Settled before the horizon, and settled within it then archived.
	clk.Set(t1.Add(-3 * time.Hour))
	early := reserve(k1, 500_000, ledger.PoolGeneral, 0)
	commit(early, 400_000)
	l.old = append(l.old, early.ID)
	clk.Set(t1.Add(-40 * time.Minute))
	archived := reserve(k5, 700_000, ledger.PoolHighCost, 0)
	commit(archived, 900_000) // capped at the hold
	l.settled[archived.ID] = archived
	clk.Set(t1)
	if n := must(s.ArchiveSettled(ctx, 15*time.Minute, 100))(t); n != 3 {
		t.Fatalf("archived %d reservations, want 3", n)
	}

	// Now: held, committed, released, expired.
	for _, r := range []ledger.Reservation{
		reserve(k1, 1_500_000, ledger.PoolGeneral, 0),
		reserve(k5, 2_000_000, ledger.PoolHighCost, 0),
		reserve(k1, 0, ledger.PoolGeneral, 0), // free
	} {
		l.held[r.ID] = r
	}
	c := reserve(k1, 2_000_000, ledger.PoolHighCost, 0)
	commit(c, 1_250_000)
	rel := reserve(k5, 1_000_000, ledger.PoolGeneral, 0)
	must(s.Release(ctx, rel.ID, "client gone"))(t)
	exp := reserve(k1, 600_000, ledger.PoolGeneral, time.Minute)
	clk.Set(t1.Add(2 * time.Minute))
	if n := must(s.ExpireDue(ctx, 100))(t); n != 1 {
		t.Fatalf("expired %d reservations, want 1", n)
	}
	for _, r := range []ledger.Reservation{c, rel, exp} {
		l.settled[r.ID] = r
	}

	must(s.RecordVideoTask(ctx, "vt-1", k1, "video-m", ledger.TaskOrigin{Channel: "vc", UpstreamTaskID: "up-1"}))(t)
	must(s.RecordVideoTask(ctx, "vt-2", k5, "video-m", ledger.TaskOrigin{}))(t)
	l.videos = []string{"vt-1", "vt-2"}

	at := t1.Add(3 * time.Minute)
	clk.Set(at)
	sn := must(materialize.LoadAt(ctx, pool, at))(t)
	l.check(t, sn, at)
	l.checkMachine(t, sn, at)
}

// checkMachine restores a state machine from sn and checks its invariants and that it
// answers as the store does.
func (l *oldLedger) checkMachine(t *testing.T, sn machine.Snapshot, at time.Time) {
	t.Helper()
	ctx := context.Background()
	st := machine.Restore(sn)
	if err := st.Check(); err != nil {
		t.Errorf("the loaded state breaks an invariant: %v", err)
	}
	if back := st.Snapshot(); !reflect.DeepEqual(back, sn) {
		t.Errorf("restored and snapshot again:\n%+v\nloaded:\n%+v", back, sn)
	}
	for _, id := range l.accounts {
		ans, _ := st.Decide(machine.GetAccount{AccountID: id})
		if want := must(l.s.GetAccount(ctx, id))(t); ans.Err != nil || ans.Account != want {
			t.Errorf("machine's account %+v (%v), store's %+v", ans.Account, ans.Err, want)
		}
	}
	for _, id := range l.keys {
		ans, _ := st.Decide(machine.GetKey{KeyID: id, At: at})
		if want := must(l.s.GetKey(ctx, id))(t); ans.Err != nil || !reflect.DeepEqual(ans.Key, want) {
			t.Errorf("machine's key %+v (%v), store's %+v", ans.Key, ans.Err, want)
		}
	}
}

func (l *oldLedger) check(t *testing.T, sn machine.Snapshot, at time.Time) {
	t.Helper()
	ctx := context.Background()
	checkSorted(t, sn)

	if got := names(sn.Tiers); !slices.Equal(got, []string{"default", "enterprise", "gold", "tight"}) {
		t.Errorf("tiers %v", got)
	}
	if len(sn.Accounts) != len(l.accounts) {
		t.Errorf("%d accounts, want %d", len(sn.Accounts), len(l.accounts))
	}
	for _, id := range l.accounts {
		want := must(l.s.GetAccount(ctx, id))(t)
		a, ok := find(sn.Accounts, func(a machine.AccountState) bool { return a.ID == id })
		got := ledger.Account{ID: a.ID, Tier: a.Tier, Balance: a.Balance, Reserved: a.Reserved, Suspended: a.Suspended,
			ToppedUp: a.ToppedUp, InFlight: a.InFlight, InFlightHighCost: a.InFlightHighCost, CreatedAt: a.CreatedAt}
		if !ok || got != want {
			t.Errorf("account %s: loaded %+v, store %+v", id, got, want)
		}
		if used := slices.Contains(l.accounts[:2], id); used != (a.RPMCount > 0 && !a.RPMMinute.IsZero()) {
			t.Errorf("account %s: rpm window %v, %d", id, a.RPMMinute, a.RPMCount)
		}
	}

	day := time.Date(at.Year(), at.Month(), at.Day(), 0, 0, 0, 0, time.UTC)
	month := time.Date(at.Year(), at.Month(), 1, 0, 0, 0, 0, time.UTC)
	spent := func(key, period string, start time.Time) (committed, held ledger.Micros) {
		w, _ := find(sn.Windows, func(w machine.SpendWindow) bool {
			return w.KeyID == key && w.Period == period && w.Start.Equal(start)
		})
		return w.Committed, w.Held
	}
	for _, id := range l.keys {
		want := must(l.s.GetKey(ctx, id))(t)
		k, ok := find(sn.Keys, func(k machine.KeyState) bool { return k.ID == id })
		got := ledger.Key{ID: k.ID, AccountID: k.AccountID, Name: k.Name, Prefix: k.Prefix, AllowedModels: k.AllowedModels,
			DailyLimit: k.DailyLimit, MonthlyLimit: k.MonthlyLimit, ExpiresAt: k.ExpiresAt, AdminCreated: k.AdminCreated,
			Disabled: k.Disabled, Revoked: k.RevokedAt != nil, CreatedAt: k.CreatedAt}
		got.SpentToday, got.HeldToday = spent(id, "d", day)
		got.SpentMonth, got.HeldMonth = spent(id, "m", month)
		if !ok || !reflect.DeepEqual(got, want) {
			t.Errorf("key %s: loaded %+v, store %+v", id, got, want)
		}
		if !slices.Equal(k.Hash, l.hashes[id]) {
			t.Errorf("key %s: hash %x, want %x", id, k.Hash, l.hashes[id])
		}
	}
	// Windows of an earlier month only while they hold something.
	febDay := time.Date(2031, 2, 28, 0, 0, 0, 0, time.UTC)
	for _, w := range sn.Windows {
		if w.Start.Before(month) && w.Held == 0 {
			t.Errorf("window %+v of an earlier month holds nothing", w)
		}
	}
	if n := count(sn.Windows, func(w machine.SpendWindow) bool { return w.Start.Equal(febDay) }); n != 1 {
		t.Errorf("%d windows of %s, want the one that still holds", n, febDay)
	}

	var ids []string
	for _, r := range sn.Reservations {
		ids = append(ids, r.ID)
		want, held := l.held[r.ID]
		if !held {
			want = l.settled[r.ID]
		}
		if r.ID != want.ID {
			t.Errorf("reservation %s loaded, neither held nor settled within the horizon", r.ID)
			continue
		}
		if held && (r.State != ledger.StateHeld || !r.ExpiresAt.Equal(want.ExpiresAt) || r.Amount != want.Amount ||
			r.Pool != want.Pool || r.KeyID != want.KeyID || r.AccountID != want.AccountID || r.SettledAt != nil) {
			t.Errorf("held reservation %+v, reserved as %+v", r, want)
		}
		if !held && (r.State == ledger.StateHeld || r.SettledAt == nil || !r.CreatedAt.Equal(want.CreatedAt)) {
			t.Errorf("settled reservation %+v", r)
		}
		if r.State == ledger.StateCommitted && (r.Actual == nil || r.Charged != min(*r.Actual, r.Amount)) {
			t.Errorf("committed reservation %+v: charge and actual", r)
		}
	}
	if len(ids) != len(l.held)+len(l.settled) {
		t.Errorf("%d reservations loaded, want %d held and %d settled", len(ids), len(l.held), len(l.settled))
	}
	for _, id := range l.old {
		if slices.Contains(ids, id) {
			t.Errorf("reservation %s settled before the horizon was loaded", id)
		}
	}

	var topUps []machine.TopUpKey
	for k := range l.topUps {
		topUps = append(topUps, machine.TopUpKey{AccountID: k[0], Key: k[1]})
	}
	slices.SortFunc(topUps, func(a, b machine.TopUpKey) int { return cmp.Compare(a.AccountID+a.Key, b.AccountID+b.Key) })
	if !slices.Equal(sn.TopUpKeys, topUps) {
		t.Errorf("top-up keys %v, want %v", sn.TopUpKeys, topUps)
	}
	for _, id := range l.videos {
		want := must(l.s.GetVideoTask(ctx, id))(t)
		if got, ok := find(sn.VideoTasks, func(v ledger.VideoTask) bool { return v.TaskID == id }); !ok || got != want {
			t.Errorf("video task %s: loaded %+v, store %+v", id, got, want)
		}
	}
}

func checkSorted(t *testing.T, sn machine.Snapshot) {
	t.Helper()
	ok := slices.IsSortedFunc(sn.Accounts, func(a, b machine.AccountState) int { return cmp.Compare(a.ID, b.ID) }) &&
		slices.IsSortedFunc(sn.Keys, func(a, b machine.KeyState) int { return cmp.Compare(a.ID, b.ID) }) &&
		slices.IsSortedFunc(sn.Reservations, func(a, b machine.ReservationState) int { return cmp.Compare(a.ID, b.ID) }) &&
		slices.IsSortedFunc(sn.Windows, func(a, b machine.SpendWindow) int {
			return cmp.Or(cmp.Compare(a.KeyID, b.KeyID), cmp.Compare(a.Period, b.Period), a.Start.Compare(b.Start))
		})
	if !ok {
		t.Error("the snapshot is not sorted")
	}
}

func names(ts []ledger.Tier) []string {
	var out []string
	for _, t := range ts {
		out = append(out, t.Name)
	}
	return out
}

func find[T any](s []T, f func(T) bool) (T, bool) {
	if i := slices.IndexFunc(s, f); i >= 0 {
		return s[i], true
	}
	var zero T
	return zero, false
}

func count[T any](s []T, f func(T) bool) int {
	n := 0
	for _, v := range s {
		if f(v) {
			n++
		}
	}
	return n
}
