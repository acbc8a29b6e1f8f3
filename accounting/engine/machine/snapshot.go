package machine

import (
	"time"

	"github.com/llmgw/gateway/accounting/ledger"
)

// Snapshot is the whole state as plain values: what a journal snapshot stores, what
// the migration from the PostgreSQL store's tables builds, and what two states are
// compared by. Every slice is sorted by its id (windows by key, period, start) so
// equal states give equal snapshots.
type Snapshot struct {
	Accounts     []AccountState
	Tiers        []ledger.Tier
	Keys         []KeyState
	Reservations []ReservationState // held ones, and settled ones not yet forgotten
	Windows      []SpendWindow
	TopUpKeys    []TopUpKey
	VideoTasks   []ledger.VideoTask
}

// AccountState is an account with what its limits count.
type AccountState struct {
	ID               string
	Tier             string
	Balance          ledger.Micros
	Reserved         ledger.Micros
	Suspended        bool
	ToppedUp         bool
	InFlight         int
	InFlightHighCost int
	RPMMinute        time.Time // zero: never
	RPMCount         int
	CreatedAt        time.Time
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
}

// ReservationState is a reservation with what its settlement recorded.
type ReservationState struct {
	ledger.Reservation
	RequestID string
	Actual    *ledger.Micros // what the commit reported; nil unless committed
	SettledAt *time.Time
	Reason    string
}

// SpendWindow is one key's spend in one UTC day ("d") or month ("m") starting at Start:
// Committed = charges of reservations created in it, Held = amounts still held.
type SpendWindow struct {
	KeyID     string
	Period    string
	Start     time.Time
	Committed ledger.Micros
	Held      ledger.Micros
}

// TopUpKey is an idempotency key a top-up of an account used.
type TopUpKey struct {
	AccountID string
	Key       string
}

// Snapshot returns s as plain values.
func (s *State) Snapshot() Snapshot { panic("not built") }

// Restore returns the state sn describes.
func Restore(sn Snapshot) *State { panic("not built") }

// Check returns an error naming the first invariant s breaks: balance ≥ reserved ≥ 0,
// reserved and in-flight counts equal to the held reservations', charge ≤ hold, each
// spend window equal to its reservations' amounts (when none was forgotten).
func (s *State) Check() error { panic("not built") }
