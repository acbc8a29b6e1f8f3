package machine

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/llmgw/gateway/accounting/ledger"
)

// Snapshot is the whole state as plain values: what a journal snapshot stores, what
// the migration from the PostgreSQL store's tables builds, and what two states are
// compared by. Every slice is sorted by its id (windows by key, period, start) so
// equal states give equal snapshots.
type Snapshot struct {
	Accounts       []AccountState
	Tiers          []ledger.Tier
	Keys           []KeyState
	Reservations   []ReservationState // held ones, and settled ones not yet forgotten
	Windows        []SpendWindow
	TopUpKeys      []TopUpKey
	VideoTasks     []ledger.VideoTask
	Projects       []ProjectState  `json:",omitempty"`
	ProjectWindows []ProjectWindow `json:",omitempty"`
	Alerts         uint64          `json:",omitempty"` // alerts generated
}

// AccountState is an account with what its limits count.
type AccountState struct {
	ID               string
	Tier             string
	Label            string
	Balance          ledger.Micros
	Reserved         ledger.Micros
	Suspended        bool
	ToppedUp         bool
	InFlight         int
	InFlightHighCost int
	RPMMinute        time.Time // zero: never
	RPMCount         int
	CreatedAt        time.Time
	LowBalance       *ledger.Micros `json:",omitempty"`
	LowFired         bool           `json:",omitempty"` // balance.low fired; a top-up above arms it
}

// KeyState is a key as stored (spend lives in Windows).
type KeyState struct {
	ID            string
	AccountID     string
	Hash          []byte
	Prefix        string
	Name          string
	AllowedModels []string
	DailyLimit    *ledger.Micros
	MonthlyLimit  *ledger.Micros
	ExpiresAt     *time.Time
	AdminCreated  bool
	Disabled      bool
	RevokedAt     *time.Time
	CreatedAt     time.Time
	ProjectID     string    `json:",omitempty"`
	RPM           *int64    `json:",omitempty"`
	TPM           *int64    `json:",omitempty"`
	Rates         RateState `json:",omitzero"`
}

// ReservationState is a reservation with what its settlement recorded.
type ReservationState struct {
	ledger.Reservation
	RequestID string
	Actual    *ledger.Micros // what the commit reported; nil unless committed
	SettledAt *time.Time
	Reason    string
	// The projects it was admitted on (nearest first), its token bound, and the buckets
	// it took the bound from while held (bit 0 its key's, bit i+1 Projects[i]'s).
	Projects    []string `json:",omitempty"`
	Tokens      int64    `json:",omitempty"`
	TokensTaken uint8    `json:",omitempty"`
}

// SpendWindow is one key's spend in one UTC day ("d") or month ("m") starting at Start:
// Committed = charges of reservations created in it, Held = amounts still held.
type SpendWindow struct {
	KeyID     string
	Period    string
	Start     time.Time
	Committed ledger.Micros
	Held      ledger.Micros
	Fired     uint8 `json:",omitempty"` // budget thresholds alerted (bit i: 50, 80, 95, 100 %)
}

// TopUpKey is an idempotency key a top-up of an account used.
type TopUpKey struct {
	AccountID string
	Key       string
}

// Snapshot returns s as plain values (sharing no memory with s).
func (s *State) Snapshot() Snapshot { return s.Capture().Snapshot() }

// Reservations is how many reservations s holds, held and settled: what most of a
// snapshot's size is in proportion to.
func (s *State) Reservations() int { return len(s.reservations) }

// A Capture is a snapshot in the making: what Capture copied of the state, and the
// settled reservations, which it only points at. Capture costs the decide loop a
// pointer per settled reservation (there may be an hour of them, kept for retried
// settlements); turning them into values, sorting and encoding happen in
// Capture.Snapshot, off the loop, while the state goes on deciding.
//
// That is sound because a settled reservation never changes again: nothing writes to
// a reservation once settle has run (Forget only drops it from the maps), nor to the
// ids of the account, key and projects it points at. Code that changes a settled
// reservation must copy it here instead (TestCaptureWhileDeciding, under -race).
type Capture struct {
	sn      Snapshot
	settled []*reservation
}

// Capture copies s but for its settled reservations (see Capture). The state may go on
// deciding once it returns.
func (s *State) Capture() Capture {
	var c Capture
	sn := &c.sn
	for _, a := range s.accounts {
		sn.Accounts = append(sn.Accounts, AccountState{
			ID: a.id, Tier: a.tier.Name, Label: a.label, Balance: a.balance, Reserved: a.reserved, Suspended: a.suspended,
			ToppedUp: a.toppedUp, InFlight: a.inFlight, InFlightHighCost: a.inFlightHigh,
			RPMMinute: a.rpmMinute, RPMCount: a.rpmCount, CreatedAt: a.createdAt,
			LowBalance: clonePtr(a.lowBalance), LowFired: a.lowFired,
		})
		for k := range a.topUpKeys {
			sn.TopUpKeys = append(sn.TopUpKeys, TopUpKey{AccountID: a.id, Key: k})
		}
	}
	for _, t := range s.tiers {
		sn.Tiers = append(sn.Tiers, *t)
	}
	for _, k := range s.keys {
		sn.Keys = append(sn.Keys, KeyState{
			ID: k.id, AccountID: k.acct.id, Hash: slices.Clone(k.hash), Prefix: k.prefix, Name: k.name,
			AllowedModels: slices.Clone(k.allowedModels), DailyLimit: clonePtr(k.daily),
			MonthlyLimit: clonePtr(k.monthly), ExpiresAt: clonePtr(k.expiresAt), AdminCreated: k.adminCreated,
			Disabled: k.disabled, RevokedAt: clonePtr(k.revokedAt), CreatedAt: k.createdAt,
			ProjectID: k.projectID(), RPM: clonePtr(k.rpm), TPM: clonePtr(k.tpm), Rates: k.rates.state(),
		})
		for _, w := range k.windows {
			sn.Windows = append(sn.Windows, SpendWindow{KeyID: k.id, Period: w.period, Start: w.start,
				Committed: w.committed, Held: w.held, Fired: w.fired})
		}
	}
	if s.held > 0 {
		sn.Reservations = make([]ReservationState, 0, s.held) // nil when none, as before: snapshots compare with DeepEqual
	}
	c.settled = make([]*reservation, 0, len(s.reservations)-s.held)
	for _, r := range s.reservations {
		if r.state != stateHeld {
			c.settled = append(c.settled, r)
			continue
		}
		sn.Reservations = append(sn.Reservations, r.snapshot())
	}
	for _, t := range s.videoTasks {
		sn.VideoTasks = append(sn.VideoTasks, *t)
	}
	s.snapshotProjects(sn)
	sn.Alerts = s.alerts
	return c
}

// Snapshot returns the snapshot c was taken for. It may run while the state decides,
// and only once per Capture.
func (c Capture) Snapshot() Snapshot {
	sn := c.sn
	sn.Reservations = slices.Grow(sn.Reservations, len(c.settled))
	for _, r := range c.settled {
		sn.Reservations = append(sn.Reservations, r.snapshot())
	}
	sn.sort()
	return sn
}

// snapshot is r as a snapshot holds it.
func (r *reservation) snapshot() ReservationState {
	rs := ReservationState{Reservation: r.view(), RequestID: r.requestID, Actual: clonePtr(r.actual), Reason: r.reason,
		Projects: r.hold.projectIDs(), Tokens: r.hold.tokens, TokensTaken: r.hold.taken}
	if r.state != stateHeld {
		rs.SettledAt = clonePtr(&r.settledAt)
	}
	return rs
}

func (sn *Snapshot) sort() {
	slices.SortFunc(sn.Accounts, func(a, b AccountState) int { return strings.Compare(a.ID, b.ID) })
	slices.SortFunc(sn.Tiers, func(a, b ledger.Tier) int { return strings.Compare(a.Name, b.Name) })
	slices.SortFunc(sn.Keys, func(a, b KeyState) int { return strings.Compare(a.ID, b.ID) })
	slices.SortFunc(sn.Reservations, func(a, b ReservationState) int { return strings.Compare(a.ID, b.ID) })
	slices.SortFunc(sn.Windows, func(a, b SpendWindow) int {
		return cmp.Or(strings.Compare(a.KeyID, b.KeyID), strings.Compare(a.Period, b.Period), a.Start.Compare(b.Start))
	})
	slices.SortFunc(sn.TopUpKeys, func(a, b TopUpKey) int {
		return cmp.Or(strings.Compare(a.AccountID, b.AccountID), strings.Compare(a.Key, b.Key))
	})
	slices.SortFunc(sn.VideoTasks, func(a, b ledger.VideoTask) int { return strings.Compare(a.TaskID, b.TaskID) })
	slices.SortFunc(sn.Projects, func(a, b ProjectState) int { return strings.Compare(a.ID, b.ID) })
	slices.SortFunc(sn.ProjectWindows, func(a, b ProjectWindow) int {
		return cmp.Or(strings.Compare(a.ProjectID, b.ProjectID), strings.Compare(a.Period, b.Period), a.Start.Compare(b.Start))
	})
}

// Restore returns the state sn describes. A snapshot naming an account, tier, key or
// reservation it does not hold is not a snapshot of any state: Restore panics.
func Restore(sn Snapshot) *State {
	s := empty()
	s.alerts = sn.Alerts
	for _, t := range sn.Tiers {
		s.putTier(t)
	}
	for _, as := range sn.Accounts {
		a := &account{
			id: as.ID, tier: s.tiers[as.Tier], label: as.Label, balance: as.Balance, reserved: as.Reserved, suspended: as.Suspended,
			toppedUp: as.ToppedUp, inFlight: as.InFlight, inFlightHigh: as.InFlightHighCost,
			rpmMinute: as.RPMMinute, rpmCount: as.RPMCount, createdAt: as.CreatedAt,
			lowBalance: clonePtr(as.LowBalance), lowFired: as.LowFired,
		}
		if a.tier == nil {
			panic("machine: snapshot account of unknown tier " + as.Tier)
		}
		s.accounts[a.id] = a
	}
	for _, tk := range sn.TopUpKeys {
		a := s.mustAccount(tk.AccountID)
		if a.topUpKeys == nil {
			a.topUpKeys = map[string]struct{}{}
		}
		a.topUpKeys[tk.Key] = struct{}{}
	}
	restoreProjects(s, &sn)
	for _, ks := range sn.Keys {
		k := &key{
			id: ks.ID, acct: s.mustAccount(ks.AccountID), hash: slices.Clone(ks.Hash), prefix: ks.Prefix, name: ks.Name,
			allowedModels: models(ks.AllowedModels), daily: clonePtr(ks.DailyLimit), monthly: clonePtr(ks.MonthlyLimit),
			expiresAt: clonePtr(ks.ExpiresAt), adminCreated: ks.AdminCreated, disabled: ks.Disabled,
			revokedAt: clonePtr(ks.RevokedAt), createdAt: ks.CreatedAt,
		}
		s.keys[k.id] = k
		s.byHash[string(k.hash)] = k
		s.restoreKeyPlace(k, &ks)
	}
	for _, ws := range sn.Windows {
		w := s.mustKey(ws.KeyID).openWindow(ws.Period, ws.Start)
		w.committed, w.held, w.fired = ws.Committed, ws.Held, ws.Fired
	}
	for _, rs := range sn.Reservations {
		k := s.mustKey(rs.KeyID)
		r := &reservation{
			id: rs.ID, requestID: rs.RequestID, acct: s.mustAccount(rs.AccountID), key: k, model: rs.Model,
			amount: rs.Amount, pool: rs.Pool, state: rs.State, charged: rs.Charged, actual: clonePtr(rs.Actual),
			createdAt: rs.CreatedAt, expiresAt: rs.ExpiresAt, reason: rs.Reason,
		}
		if rs.SettledAt != nil {
			r.settledAt = *rs.SettledAt
		}
		s.reservations[r.id] = r
		s.byRequest[r.requestID] = r
		s.restoreHold(r, &rs)
		if r.state == stateHeld {
			s.held++
			if r.amount > 0 {
				r.day = k.openWindow(periodDay, dayStart(r.createdAt))
				r.month = k.openWindow(periodMonth, monthStart(r.createdAt))
			}
			s.track(r)
		}
	}
	for _, t := range sn.VideoTasks {
		s.videoTasks[t.TaskID] = &t
	}
	s.complete = s.checkCommitted() == nil
	return s
}

// Check returns an error naming the first invariant s breaks: balance ≥ reserved ≥ 0,
// reserved and in-flight counts equal to the held reservations', charge ≤ hold, each
// spend window equal to its reservations' amounts (when none was forgotten).
func (s *State) Check() error {
	type sums struct {
		reserved         ledger.Micros
		inFlight, inHigh int
	}
	per := map[*account]*sums{}
	held := map[*window]ledger.Micros{}
	nHeld := 0
	for _, r := range s.reservations {
		switch {
		case r.charged < 0 || r.charged > r.amount:
			return fmt.Errorf("reservation %s charged %d of a hold of %d", r.id, r.charged, r.amount)
		case r.state != ledger.StateCommitted && r.charged != 0:
			return fmt.Errorf("reservation %s is %s with a charge", r.id, stateName(r.state))
		case s.byRequest[r.requestID] != r:
			return fmt.Errorf("reservation %s is not indexed by its request id", r.id)
		}
		if r.state != stateHeld {
			continue
		}
		nHeld++
		sm := per[r.acct]
		if sm == nil {
			sm = &sums{}
			per[r.acct] = sm
		}
		sm.reserved += r.amount
		sm.inFlight++
		if r.pool == ledger.PoolHighCost {
			sm.inHigh++
		}
		if r.amount > 0 {
			if r.day == nil || r.month == nil {
				return fmt.Errorf("held reservation %s of %d is in no window", r.id, r.amount)
			}
			held[r.day] += r.amount
			held[r.month] += r.amount
		}
	}
	if nHeld != s.held {
		return fmt.Errorf("%d reservations held, the state counts %d", nHeld, s.held)
	}
	for id, a := range s.accounts {
		var sm sums
		if p := per[a]; p != nil {
			sm = *p
		}
		switch {
		case a.reserved < 0 || a.balance < a.reserved:
			return fmt.Errorf("account %s: balance %d, reserved %d", id, a.balance, a.reserved)
		case a.reserved != sm.reserved || a.inFlight != sm.inFlight || a.inFlightHigh != sm.inHigh:
			return fmt.Errorf("account %s: reserved %d, in flight %d, high-cost %d; its holds: %d, %d, %d",
				id, a.reserved, a.inFlight, a.inFlightHigh, sm.reserved, sm.inFlight, sm.inHigh)
		}
	}
	if err := s.checkProjects(); err != nil {
		return err
	}
	for id, k := range s.keys {
		for _, w := range k.windows {
			if w.held != held[w] || w.committed < 0 {
				return fmt.Errorf("key %s window %s %s: held %d, committed %d; its holds %d",
					id, w.period, w.start.Format(time.DateOnly), w.held, w.committed, held[w])
			}
		}
	}
	if s.complete {
		return s.checkCommitted()
	}
	return nil
}

// checkCommitted returns an error unless each window's committed spend is the sum of
// the charges of the reservations created in it.
func (s *State) checkCommitted() error {
	type at struct {
		k      *key
		period string
		start  time.Time
	}
	charged := map[at]ledger.Micros{}
	for _, r := range s.reservations {
		if r.charged > 0 {
			charged[at{r.key, periodDay, dayStart(r.createdAt)}] += r.charged
			charged[at{r.key, periodMonth, monthStart(r.createdAt)}] += r.charged
		}
	}
	for id, k := range s.keys {
		for _, w := range k.windows {
			if c := charged[at{k, w.period, w.start}]; c != w.committed {
				return fmt.Errorf("key %s window %s %s: committed %d, its charges %d",
					id, w.period, w.start.Format(time.DateOnly), w.committed, c)
			}
			delete(charged, at{k, w.period, w.start})
		}
	}
	for w, c := range charged {
		return fmt.Errorf("key %s: charges of %d in no %s window of %s", w.k.id, c, w.period, w.start.Format(time.DateOnly))
	}
	return s.checkProjectsCommitted()
}
