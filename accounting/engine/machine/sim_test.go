package machine

import (
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"

	"github.com/llmgw/gateway/accounting/ledger"
)

var seedFlag = flag.Uint64("seed", 0, "seed of TestSimulation (0: the time)")

// snapshotDiff names the first part in which a and b differ ("" when equal).
func snapshotDiff(a, b Snapshot) string {
	va, vb := reflect.ValueOf(a), reflect.ValueOf(b)
	for i := range va.NumField() {
		fa, fb := va.Field(i), vb.Field(i)
		if reflect.DeepEqual(fa.Interface(), fb.Interface()) {
			continue
		}
		name := va.Type().Field(i).Name
		for j := range min(fa.Len(), fb.Len()) {
			if !reflect.DeepEqual(fa.Index(j).Interface(), fb.Index(j).Interface()) {
				return fmt.Sprintf("%s[%d]: %+v != %+v", name, j, fa.Index(j).Interface(), fb.Index(j).Interface())
			}
		}
		return fmt.Sprintf("%s: %d entries != %d", name, fa.Len(), fb.Len())
	}
	return ""
}

// modelRes is the reference model's reservation.
type modelRes struct {
	acct      string
	amount    ledger.Micros
	state     ledger.ReservationState
	charged   ledger.Micros
	expires   time.Time
	settledAt time.Time
}

// sim drives random commands against a state and a reference model of balances and holds.
type sim struct {
	t        *testing.T
	seed     uint64
	rng      *rand.Rand
	s        *State
	now      time.Time
	events   []Event
	snap     Snapshot // a snapshot taken when len(events) was snapAt
	snapAt   int
	accounts []string
	keys     []string
	hashes   [][]byte
	resIDs   []string
	reqs     []ledger.ReserveRequest
	n        int

	balance  map[string]ledger.Micros
	reserved map[string]ledger.Micros
	res      map[string]*modelRes
	toppedUp ledger.Micros
	charges  ledger.Micros
	step     int
	crashes  int
	alertIDs map[string]bool // every alert id generated, to prove none twice
	pm       *projModel
}

func (m *sim) fatalf(format string, args ...any) {
	m.t.Helper()
	m.t.Fatalf("seed %d step %d: %s", m.seed, m.step, fmt.Sprintf(format, args...))
}

func (m *sim) newID(kind int) string {
	m.n++
	return uuidOf(kind, m.n)
}

func TestSimulation(t *testing.T) {
	seed := *seedFlag
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	t.Logf("seed %d (rerun with -seed %d)", seed, seed)
	m := &sim{t: t, seed: seed, rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)), s: New(), now: t0,
		balance: map[string]ledger.Micros{}, reserved: map[string]ledger.Micros{}, res: map[string]*modelRes{},
		pm: newProjModel(), alertIDs: map[string]bool{}}
	m.snap = New().Snapshot()
	for m.step = 0; m.step < 6000; m.step++ {
		m.advance()
		m.do(m.command())
		m.checkInvariants()
		if m.rng.IntN(200) == 0 {
			m.crash()
		}
		if m.rng.IntN(300) == 0 {
			m.snap, m.snapAt = m.s.Snapshot(), len(m.events)
		}
	}
	m.crash()
	t.Logf("%d events, %d reservations admitted (%d in projects), %d projects, %d crashes",
		len(m.events), len(m.resIDs), m.pm.admitted, len(m.pm.ids), m.crashes)
}

func (m *sim) advance() {
	switch r := m.rng.IntN(100); {
	case r < 70:
		m.now = m.now.Add(time.Duration(m.rng.IntN(3_000_000)) * time.Microsecond)
	case r < 95:
		m.now = m.now.Add(time.Duration(m.rng.IntN(120)) * time.Second)
	default:
		m.now = m.now.Add(time.Duration(m.rng.IntN(30)) * time.Hour)
	}
}

func pick[T any](m *sim, xs []T) (T, bool) {
	var zero T
	if len(xs) == 0 {
		return zero, false
	}
	return xs[m.rng.IntN(len(xs))], true
}

func (m *sim) limit() *ledger.Micros {
	if m.rng.IntN(3) == 0 {
		return nil
	}
	return ptr(ledger.Micros(m.rng.IntN(3000)))
}

// command is a random command: mostly the hot path, sometimes administration.
func (m *sim) command() Command {
	acct, _ := pick(m, m.accounts)
	keyID, _ := pick(m, m.keys)
	resID, _ := pick(m, m.resIDs)
	if m.rng.IntN(2) == 0 && len(m.resIDs) > 0 { // prefer recent reservations
		resID = m.resIDs[len(m.resIDs)-1-m.rng.IntN(min(len(m.resIDs), 8))]
	}
	if c := m.projectCommand(); c != nil {
		return c
	}
	switch r := m.rng.IntN(1000); {
	case r < 10 || len(m.accounts) == 0:
		tiers := []string{"", "tight", "enterprise", "sim"}
		return CreateAccount{ID: m.newID(1), Tier: tiers[m.rng.IntN(len(tiers))], At: m.now}
	case r < 25 || len(m.keys) == 0:
		id := m.newID(2)
		return CreateKey{ID: id, Key: ledger.NewKey{AccountID: acct, Hash: hashOf(id), DailyLimit: m.limit(),
			MonthlyLimit: m.limit()}, At: m.now}
	case r < 60:
		return TopUp{AccountID: acct, Amount: ledger.Micros(1 + m.rng.IntN(5000)),
			IdempotencyKey: fmt.Sprint(m.rng.IntN(20)), At: m.now}
	case r < 64:
		return SetAccountSuspended{AccountID: acct, Suspended: m.rng.IntN(3) == 0, At: m.now}
	case r < 65:
		return UpdateAccount{Update: ledger.AccountUpdate{ID: acct, Label: ledger.To(fmt.Sprint("team ", m.rng.IntN(3))),
			LowBalance: ledger.To(m.limit())}, At: m.now}
	case r < 68:
		g := 1 + m.rng.IntN(6)
		return PutTier{Tier: ledger.Tier{Name: "sim", RPMBeforeTopUp: m.rng.IntN(10), RPMAfterTopUp: 5 + m.rng.IntN(50),
			InFlightGeneral: g, InFlightHighCost: m.rng.IntN(g + 1)}, At: m.now}
	case r < 72:
		return SetKeyDisabled{KeyID: keyID, Disabled: m.rng.IntN(4) == 0, At: m.now}
	case r < 73:
		return RevokeKey{KeyID: keyID, At: m.now}
	case r < 78:
		return UpdateKey{Update: ledger.KeyUpdate{ID: keyID, DailyLimit: ledger.To(m.limit())}, At: m.now}
	case r < 480:
		if q, ok := pick(m, m.reqs); ok && m.rng.IntN(10) == 0 {
			if m.rng.IntN(3) == 0 {
				q.KeyID = keyID
			}
			return Reserve{ID: m.newID(3), Request: q, At: m.now}
		}
		q := ledger.ReserveRequest{RequestID: m.newID(4), KeyID: keyID, Model: [3]string{"m", "m", "n"}[m.rng.IntN(3)],
			Amount: ledger.Micros(m.rng.IntN(600)), Pool: ledger.Pool(1 + m.rng.IntN(2)),
			TTL: time.Duration(m.rng.IntN(300)) * time.Second, Tokens: int64(m.rng.IntN(600))}
		m.reqs = append(m.reqs, q)
		return Reserve{ID: m.newID(3), Request: q, At: m.now}
	case r < 760:
		return Commit{Request: ledger.CommitRequest{ReservationID: resID, Actual: ledger.Micros(m.rng.IntN(700)),
			Usage: ledger.Usage{InputTokens: int64(m.rng.IntN(1000)), OutputTokens: int64(m.rng.IntN(1000))}}, At: m.now}
	case r < 880:
		return Release{ReservationID: resID, Reason: "r", At: m.now}
	case r < 930:
		return Renew{ReservationID: resID, TTL: time.Duration(m.rng.IntN(600)) * time.Second, At: m.now}
	case r < 975:
		return ExpireDue{Limit: 1 + m.rng.IntN(5), At: m.now}
	case r < 978:
		return Forget{Before: m.now.Add(-36 * time.Hour), At: m.now}
	case r < 990:
		h, _ := pick(m, m.hashes)
		return Authenticate{Hash: h, At: m.now}
	default:
		return GetKey{KeyID: keyID, At: m.now}
	}
}

func (m *sim) do(c Command) {
	before := map[string]ledger.Micros{}
	if r, ok := c.(Reserve); ok {
		if k := m.s.keys[r.Request.KeyID]; k != nil {
			before[k.acct.id] = m.balance[k.acct.id] - m.reserved[k.acct.id]
		}
	}
	ans, evs := m.s.Decide(c)
	if ans.Err != nil && len(evs) > 0 {
		m.fatalf("%#v refused (%v) with events", c, ans.Err)
	}
	for _, e := range evs {
		if a, ok := e.(Alerted); ok {
			if m.alertIDs[a.ID] {
				m.fatalf("alert id %s generated twice", a.ID)
			}
			m.alertIDs[a.ID] = true
		}
	}
	m.events = append(m.events, evs...)
	for _, e := range evs {
		m.fold(e)
		m.foldProjects(e)
	}
	switch c := c.(type) {
	case CreateAccount:
		if ans.Err == nil {
			m.accounts = append(m.accounts, c.ID)
		}
	case CreateKey:
		if ans.Err == nil {
			m.keys = append(m.keys, c.ID)
			m.hashes = append(m.hashes, c.Key.Hash)
		}
	case Reserve:
		m.checkReserve(c, ans, evs, before)
	case Commit:
		m.checkCommit(c, ans, evs)
	case Release:
		mr := m.res[c.ReservationID]
		switch {
		case mr == nil && !errors.Is(ans.Err, ledger.ErrNotFound):
			m.fatalf("release of an unknown reservation: %+v", ans)
		case mr != nil && (ans.Err != nil || ans.Release.State != mr.state || ans.Release.Charged != mr.charged):
			m.fatalf("release: %+v, model %+v", ans, mr)
		}
	case ExpireDue:
		if ans.Expired != len(evs) || ans.Expired > c.Limit {
			m.fatalf("expired %d with %d events, limit %d", ans.Expired, len(evs), c.Limit)
		}
		if ans.Expired < c.Limit {
			for id, mr := range m.res {
				if mr.state == ledger.StateHeld && !mr.expires.After(m.s.norm(c.At)) {
					m.fatalf("reservation %s due at %v left held at %v", id, mr.expires, c.At)
				}
			}
		}
	}
}

func (s *State) norm(t time.Time) time.Time { return norm(t) }

func (m *sim) checkReserve(c Reserve, ans Answer, evs []Event, before map[string]ledger.Micros) {
	if len(evs) > 0 { // Reserved, and balance.low when it took the account below its threshold
		m.resIDs = append(m.resIDs, c.ID)
		if avail, ok := before[ans.Reservation.AccountID]; !ok || avail < c.Request.Amount {
			m.fatalf("admitted %d with %d available", c.Request.Amount, avail)
		}
		return
	}
	if ledger.ReasonOf(ans.Err) == ledger.ReasonInsufficientCredits {
		for _, avail := range before {
			if avail >= c.Request.Amount {
				m.fatalf("refused %d for credits with %d available", c.Request.Amount, avail)
			}
		}
	}
	if ans.Err == nil { // a replay
		mr := m.res[ans.Reservation.ID]
		if mr == nil || mr.state != ans.Reservation.State || mr.charged != ans.Reservation.Charged {
			m.fatalf("replay %+v, model %+v", ans.Reservation, mr)
		}
	}
}

func (m *sim) checkCommit(c Commit, ans Answer, evs []Event) {
	mr := m.res[c.Request.ReservationID]
	switch {
	case mr == nil:
		if !errors.Is(ans.Err, ledger.ErrNotFound) {
			m.fatalf("commit of an unknown reservation: %+v", ans)
		}
	case len(evs) > 0: // Committed, and the budget alerts it caused
		want := ledger.CommitResult{Charged: min(c.Request.Actual, mr.amount), Capped: c.Request.Actual > mr.amount}
		if ans.Commit != want {
			m.fatalf("commit %+v, want %+v", ans.Commit, want)
		}
	case mr.state == ledger.StateCommitted:
		if !ans.Commit.Replayed || ans.Commit.Charged != mr.charged {
			m.fatalf("commit replay %+v, model %+v", ans.Commit, mr)
		}
	default:
		if ledger.ReasonOf(ans.Err) != ledger.ReasonReservationSettled {
			m.fatalf("commit of a %v reservation: %+v", mr.state, ans)
		}
	}
}

// fold updates the reference model from one event, checking it against the model.
func (m *sim) fold(e Event) {
	switch e := e.(type) {
	case ToppedUp:
		m.balance[e.AccountID] += e.Amount
		m.toppedUp += e.Amount
	case Reserved:
		if m.res[e.ID] != nil {
			m.fatalf("reservation %s reserved twice", e.ID)
		}
		m.res[e.ID] = &modelRes{acct: e.AccountID, amount: e.Amount, state: ledger.StateHeld, expires: e.ExpiresAt}
		m.reserved[e.AccountID] += e.Amount
	case Renewed:
		m.res[e.ReservationID].expires = e.ExpiresAt
	case Committed:
		mr := m.settled(e.ReservationID, ledger.StateCommitted, e.At)
		if e.Charged > mr.amount || e.Charged != min(e.Actual, mr.amount) {
			m.fatalf("charged %d of a hold of %d for %d", e.Charged, mr.amount, e.Actual)
		}
		mr.charged = e.Charged
		m.balance[mr.acct] -= e.Charged
		m.charges += e.Charged
	case Released:
		mr := m.settled(e.ReservationID, e.State, e.At)
		if e.State == ledger.StateExpired && mr.expires.After(e.At) {
			m.fatalf("reservation %s expired at %v, due %v", e.ReservationID, e.At, mr.expires)
		}
	case Forgotten:
		for id, mr := range m.res {
			if mr.state != ledger.StateHeld && mr.settledAt.Before(e.Before) {
				delete(m.res, id)
			}
		}
	}
}

// settled moves a model reservation out of held, at most once.
func (m *sim) settled(id string, st ledger.ReservationState, at time.Time) *modelRes {
	mr := m.res[id]
	if mr == nil || mr.state != ledger.StateHeld {
		m.fatalf("reservation %s settled while not held: %+v", id, mr)
	}
	mr.state, mr.settledAt = st, at
	m.reserved[mr.acct] -= mr.amount
	return mr
}

func (m *sim) checkInvariants() {
	if err := m.s.Check(); err != nil {
		m.fatalf("check: %v", err)
	}
	var sum ledger.Micros
	for id, a := range m.s.accounts {
		sum += a.balance
		if a.balance != m.balance[id] || a.reserved != m.reserved[id] {
			m.fatalf("account %s: balance %d reserved %d, model %d %d", id, a.balance, a.reserved, m.balance[id], m.reserved[id])
		}
	}
	if sum != m.toppedUp-m.charges {
		m.fatalf("balances sum to %d, top-ups %d − charges %d", sum, m.toppedUp, m.charges)
	}
	m.checkProjects()
}

// crash rebuilds the state from its events (from the start, or from the last snapshot),
// checks it equals the deciding one, and goes on with the rebuilt one.
func (m *sim) crash() {
	var rebuilt *State
	if m.rng.IntN(2) == 0 {
		rebuilt = New()
		for _, e := range m.events {
			rebuilt.Apply(e)
		}
	} else {
		rebuilt = Restore(m.snap)
		for _, e := range m.events[m.snapAt:] {
			rebuilt.Apply(e)
		}
	}
	want := m.s.Snapshot()
	if d := snapshotDiff(want, rebuilt.Snapshot()); d != "" {
		m.fatalf("rebuilt state differs: %s", d)
	}
	if d := snapshotDiff(want, Restore(want).Snapshot()); d != "" {
		m.fatalf("snapshot round trip differs: %s", d)
	}
	m.s = rebuilt
	m.crashes++
}
