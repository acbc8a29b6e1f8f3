package machine

import (
	"time"

	"github.com/llmgw/gateway/accounting/ledger"
)

// DefaultTTL is a reservation's lease when a Reserve or Renew names none: the
// PostgreSQL store's default.
const DefaultTTL = 10 * time.Minute

// builtinTiers are the tiers migrations/0001_init.sql seeds.
var builtinTiers = []ledger.Tier{
	{Name: "default", RPMBeforeTopUp: 20, RPMAfterTopUp: 600, InFlightGeneral: 16, InFlightHighCost: 2},
	{Name: "tight", RPMBeforeTopUp: 3, RPMAfterTopUp: 3, InFlightGeneral: 2, InFlightHighCost: 1},
	{Name: "enterprise", RPMBeforeTopUp: 600, RPMAfterTopUp: 6000, InFlightGeneral: 64, InFlightHighCost: 8},
}

const stateHeld = ledger.StateHeld

// Window periods, as SpendWindow.Period names them.
const (
	periodDay   = "d"
	periodMonth = "m"
)

type account struct {
	id           string
	tier         *ledger.Tier // the tiers map's value: PutTier changes it in place
	label        string
	balance      ledger.Micros
	reserved     ledger.Micros
	suspended    bool
	toppedUp     bool
	inFlight     int
	inFlightHigh int
	rpmMinute    time.Time // zero: never
	rpmCount     int
	createdAt    time.Time
	topUpKeys    map[string]struct{} // nil until the first idempotent top-up
	lowBalance   *ledger.Micros      // the balance.low threshold; nil: none
	lowFired     bool                // balance.low fired since the threshold was set or a top-up lifted it
}

type key struct {
	id            string
	acct          *account
	hash          []byte
	prefix        string
	name          string
	allowedModels []string // nil: every model
	daily         *ledger.Micros
	monthly       *ledger.Micros
	expiresAt     *time.Time
	adminCreated  bool
	disabled      bool
	revokedAt     *time.Time
	createdAt     time.Time
	windows       spendWindows // few: the days and months with spend not yet forgotten
	project       *project     // nil: in no project
	rates                      // the key's own rpm and tpm
}

// window is one key's spend in one UTC day or month.
type window struct {
	period    string
	start     time.Time
	end       time.Time
	committed ledger.Micros
	held      ledger.Micros
	fired     uint8 // the budget thresholds that alerted in it (bit i: thresholds[i])
}

type reservation struct {
	id        string
	requestID string
	acct      *account
	key       *key
	model     string
	amount    ledger.Micros
	pool      ledger.Pool
	state     ledger.ReservationState
	charged   ledger.Micros
	actual    *ledger.Micros
	createdAt time.Time
	expiresAt time.Time
	settledAt time.Time // zero while held
	reason    string
	// The windows of the creation time the amount is held in (nil when amount is 0).
	day, month *window
	hold       pathHold // what it holds on its key's projects and token buckets
}

func empty() *State {
	return &State{
		accounts:     map[string]*account{},
		tiers:        map[string]*ledger.Tier{},
		keys:         map[string]*key{},
		byHash:       map[string]*key{},
		reservations: map[string]*reservation{},
		byRequest:    map[string]*reservation{},
		videoTasks:   map[string]*ledger.VideoTask{},
		projects:     map[string]*project{},
	}
}

// putTier creates t or changes the tier of its name in place, so that accounts that
// point at it see the change.
func (s *State) putTier(t ledger.Tier) {
	if cur := s.tiers[t.Name]; cur != nil {
		*cur = t
		return
	}
	s.tiers[t.Name] = &t
}

// norm is a command's time as the ledger keeps it: UTC, microseconds.
func norm(t time.Time) time.Time { return t.Truncate(time.Microsecond).UTC() }

func normPtr(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	u := norm(*t)
	return &u
}

func dayStart(t time.Time) time.Time { return t.Truncate(24 * time.Hour) }

func monthStart(t time.Time) time.Time {
	y, m, _ := t.Date()
	return time.Date(y, m, 1, 0, 0, 0, 0, time.UTC)
}

// windowAt returns k's window of period containing t, or nil.
func (k *key) windowAt(period string, start time.Time) *window { return k.windows.at(period, start) }

// used is what the window of period starting at start has spent or holds.
func (k *key) used(period string, start time.Time) ledger.Micros {
	return k.windows.used(period, start)
}

// openWindow returns k's window of period starting at start, creating it.
func (k *key) openWindow(period string, start time.Time) *window {
	return k.windows.open(period, start)
}

// spendWindows are the day and month windows of a key or a project.
type spendWindows []*window

// at returns the window of period starting at start, or nil.
func (ws spendWindows) at(period string, start time.Time) *window {
	for i := len(ws) - 1; i >= 0; i-- {
		if w := ws[i]; w.start.Equal(start) && w.period == period {
			return w
		}
	}
	return nil
}

// used is what the window of period starting at start has spent or holds.
func (ws spendWindows) used(period string, start time.Time) ledger.Micros {
	if w := ws.at(period, start); w != nil {
		return w.committed + w.held
	}
	return 0
}

// open returns the window of period starting at start, creating it.
func (ws *spendWindows) open(period string, start time.Time) *window {
	if w := ws.at(period, start); w != nil {
		return w
	}
	w := &window{period: period, start: start, end: windowEnd(period, start)}
	*ws = append(*ws, w)
	return w
}

// forget drops the windows that ended by before and hold nothing.
func (ws *spendWindows) forget(before time.Time) {
	kept := (*ws)[:0]
	for _, w := range *ws {
		if w.held != 0 || w.end.After(before) {
			kept = append(kept, w)
		}
	}
	clear((*ws)[len(kept):])
	*ws = kept
}

// forgets reports whether forget(before) would drop a window.
func (ws spendWindows) forgets(before time.Time) bool {
	for _, w := range ws {
		if w.held == 0 && !w.end.After(before) {
			return true
		}
	}
	return false
}

func windowEnd(period string, start time.Time) time.Time {
	if period == periodDay {
		return start.AddDate(0, 0, 1)
	}
	return start.AddDate(0, 1, 0)
}

func (a *account) view() ledger.Account {
	return ledger.Account{
		ID: a.id, Tier: a.tier.Name, Label: a.label, Balance: a.balance, Reserved: a.reserved,
		Suspended: a.suspended, ToppedUp: a.toppedUp, InFlight: a.inFlight,
		InFlightHighCost: a.inFlightHigh, CreatedAt: a.createdAt, LowBalance: a.lowBalance,
	}
}

// view is k as the store returns it after a change: without its spend.
func (k *key) view() ledger.Key {
	return ledger.Key{
		ID: k.id, AccountID: k.acct.id, Name: k.name, Prefix: k.prefix,
		AllowedModels: k.allowedModels, DailyLimit: k.daily, MonthlyLimit: k.monthly,
		ExpiresAt: k.expiresAt, AdminCreated: k.adminCreated, Disabled: k.disabled,
		Revoked: k.revokedAt != nil, CreatedAt: k.createdAt, ProjectID: k.projectID(), RPM: k.rpm, TPM: k.tpm,
	}
}

// viewAt is k with its spend in the UTC day and month of at, as GetKey returns it.
func (k *key) viewAt(at time.Time) ledger.Key {
	v := k.view()
	if w := k.windowAt(periodDay, dayStart(at)); w != nil {
		v.SpentToday, v.HeldToday = w.committed, w.held
	}
	if w := k.windowAt(periodMonth, monthStart(at)); w != nil {
		v.SpentMonth, v.HeldMonth = w.committed, w.held
	}
	return v
}

func (r *reservation) view() ledger.Reservation {
	return ledger.Reservation{
		ID: r.id, AccountID: r.acct.id, KeyID: r.key.id, Model: r.model, Amount: r.amount,
		Pool: r.pool, State: r.state, Charged: r.charged, CreatedAt: r.createdAt, ExpiresAt: r.expiresAt,
	}
}

// usable reports whether k may authenticate or reserve at t.
func (k *key) usable(t time.Time) bool {
	return !k.disabled && k.revokedAt == nil && (k.expiresAt == nil || k.expiresAt.After(t))
}
