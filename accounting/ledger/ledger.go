// Package ledger is the accounting domain: accounts, API keys, reservations, charges,
// spend windows, tier limits and video-task ownership, with the errors each operation
// can refuse with.
//
// It depends on nothing but the standard library: the PostgreSQL store implements
// Store, and the gRPC server translates between these types and the wire.
package ledger

import (
	"context"
	"time"
)

// Micros is an amount of money in micro-credits (1 credit = 1,000,000 micros).
type Micros = int64

// Pool is the in-flight pool a reservation occupies.
type Pool int

const (
	// PoolGeneral holds every in-flight request of an account.
	PoolGeneral Pool = 1
	// PoolHighCost is the smaller pool for high-cost models; a high-cost request holds a
	// slot here and one in the general pool.
	PoolHighCost Pool = 2
)

// DefaultTier is the tier of an account created without one.
const DefaultTier = "default"

// Tier is a named set of limits.
type Tier struct {
	Name             string
	RPMBeforeTopUp   int
	RPMAfterTopUp    int
	InFlightGeneral  int
	InFlightHighCost int
}

// Account is a prepaid account as the console sees it.
type Account struct {
	ID               string
	Tier             string
	Label            string // the operator's name for the account; may be empty
	Balance          Micros // committed balance: top-ups minus charges
	Reserved         Micros // held by in-flight reservations
	Suspended        bool
	ToppedUp         bool
	InFlight         int // general pool slots in use (every in-flight request)
	InFlightHighCost int
	CreatedAt        time.Time
	// LowBalance is the threshold under which the account's available credits raise a
	// balance.low alert; nil: none.
	LowBalance *Micros
}

// NewAccount is what CreateAccount needs.
type NewAccount struct {
	Tier  string // DefaultTier when empty
	Label string
}

// Available is what a new reservation may still hold.
func (a Account) Available() Micros { return a.Balance - a.Reserved }

// Key is an API key's record. The secret is never stored, only its SHA-256.
type Key struct {
	ID            string
	AccountID     string
	Name          string
	Prefix        string // short non-secret prefix of the secret, for humans
	AllowedModels []string
	DailyLimit    *Micros
	MonthlyLimit  *Micros
	ExpiresAt     *time.Time
	AdminCreated  bool
	Disabled      bool
	Revoked       bool
	CreatedAt     time.Time
	ProjectID     string // "" when in no project
	RPM, TPM      *int64 // the key's own rate limits (nil: none)

	// Spend in the current UTC day and month (filled by GetKey).
	SpentToday, HeldToday Micros
	SpentMonth, HeldMonth Micros
}

// Grant is what an authenticated key may do: the key and its account's state.
type Grant struct {
	KeyID            string
	AccountID        string
	AllowedModels    []string
	DailyLimit       *Micros
	MonthlyLimit     *Micros
	ExpiresAt        *time.Time
	AdminCreated     bool
	Tier             string
	AccountSuspended bool
	AccountToppedUp  bool
	// EffectiveModels is what the key may call once the allowlists of the projects on
	// its path apply: AllowedModels intersected with every project's. nil when no
	// project restricts models (AllowedModels alone decides); empty when none is left.
	EffectiveModels []string
}

// NewKey is what CreateKey needs.
type NewKey struct {
	AccountID     string
	Name          string
	AllowedModels []string
	DailyLimit    *Micros
	MonthlyLimit  *Micros
	ExpiresAt     *time.Time
	AdminCreated  bool
	// ProjectID places the key in a project of its account ("": none); RPM and TPM
	// are its own rate limits (nil: none).
	ProjectID string
	RPM, TPM  *int64
	// Hash is the SHA-256 of the secret; Prefix a short non-secret part of it.
	Hash   []byte
	Prefix string
}

// ReserveRequest asks to hold a request's maximum cost.
type ReserveRequest struct {
	RequestID string // idempotency key
	KeyID     string
	Model     string
	Amount    Micros // 0 for free models
	Pool      Pool
	TTL       time.Duration
	// Tokens is the request's token bound (its input bound + its output limit), taken
	// from the tokens-per-minute buckets of the key and its projects; 0 takes none.
	Tokens int64
}

// Reservation is a hold on an account.
type Reservation struct {
	ID        string
	AccountID string
	KeyID     string
	Model     string
	Amount    Micros
	Pool      Pool
	State     ReservationState
	Charged   Micros
	CreatedAt time.Time
	ExpiresAt time.Time
}

// ReservationState is where a reservation is in its life.
type ReservationState int

const (
	StateHeld ReservationState = iota + 1
	StateCommitted
	StateReleased
	StateExpired
)

// Usage is what a request consumed, for the record.
type Usage struct {
	InputTokens  int64
	OutputTokens int64
	Units        map[string]int64
	// Components are the charge's priced parts (a rate card's input, cache_read,
	// cache_write, cache_write_1h, audio_input, image_input, output, audio_output), only
	// those with units > 0; their amounts sum to the actual cost. Empty for a charge
	// priced by units or before rate cards.
	Components []Component
	// ServiceTier is the tier the charge was priced at ("default": the base card).
	ServiceTier string
}

// Component is one priced part of a charge: units at a price per million units,
// rounded up to a micro-credit.
type Component struct {
	Name         string
	Units        int64
	PricePerMTok Micros
	Amount       Micros
}

// CommitRequest charges a reservation.
type CommitRequest struct {
	ReservationID string
	Actual        Micros
	Usage         Usage
	UpstreamModel string
	Channel       string
}

// CommitResult is the outcome of a commit; a replayed commit returns the first one.
type CommitResult struct {
	Charged  Micros
	Capped   bool // Actual exceeded the hold; the charge is the hold
	Replayed bool
}

// ReleaseResult is a reservation's final state after Release.
type ReleaseResult struct {
	State   ReservationState
	Charged Micros
}

// VideoTask records who submitted a video task, and where it lives.
type VideoTask struct {
	TaskID          string // the gateway's id, the one the client holds
	AccountID       string
	KeyID           string
	AdminCreatedKey bool
	Model           string
	CreatedAt       time.Time
	Origin          TaskOrigin
}

// TaskOrigin is where a video task lives: the catalog channel that accepted it and the
// provider's id for it there. A task recorded before gateway ids has an empty Channel,
// and its provider id is its TaskID.
type TaskOrigin struct {
	Channel        string
	UpstreamTaskID string
}

// ChangeKind says what changed in a Change.
type ChangeKind int

const (
	// ChangeReset means changes may have been missed: drop every cached entry.
	ChangeReset ChangeKind = iota + 1
	ChangeKey
	ChangeAccount
)

// Change tells caches that a key or an account changed.
type Change struct {
	Kind      ChangeKind
	KeyID     string
	AccountID string
}

// Store is what the gRPC server serves: the owner's decisions and the reports. Every
// method is safe for concurrent use. Refusals are *Refusal errors (read with
// errors.As); missing rows are ErrNotFound.
type Store interface {
	Decisions
	Reports
}

// Decisions are what the ledger's owner decides, and what it answers from its state
// now: every change, and the reads that must see the latest decision (a key
// authenticated, an account's balance). Each decision is atomic and exactly once,
// whatever the number of processes that call it.
type Decisions interface {
	// CreateAccount opens an empty account.
	CreateAccount(ctx context.Context, a NewAccount) (Account, error)
	GetAccount(ctx context.Context, id string) (Account, error)
	// TopUp adds credits; a repeated idempotencyKey (when not empty) adds nothing.
	TopUp(ctx context.Context, accountID string, amount Micros, idempotencyKey string) (Account, error)
	SetAccountSuspended(ctx context.Context, accountID string, suspended bool) (Account, error)
	// UpdateAccount changes the settings u sets and returns the account.
	UpdateAccount(ctx context.Context, u AccountUpdate) (Account, error)

	CreateKey(ctx context.Context, k NewKey) (Key, error)
	GetKey(ctx context.Context, id string) (Key, error)
	SetKeyDisabled(ctx context.Context, id string, disabled bool) (Key, error)
	RevokeKey(ctx context.Context, id string) (Key, error)
	// UpdateKey changes the fields u sets and returns the key as GetKey does.
	UpdateKey(ctx context.Context, u KeyUpdate) (Key, error)
	// Authenticate resolves a key hash; a missing, disabled, revoked or expired key is a
	// Refusal with ReasonInvalidAPIKey.
	Authenticate(ctx context.Context, hash []byte) (Grant, error)

	Reserve(ctx context.Context, r ReserveRequest) (Reservation, error)
	Commit(ctx context.Context, c CommitRequest) (CommitResult, error)
	Release(ctx context.Context, reservationID, reason string) (ReleaseResult, error)
	Renew(ctx context.Context, reservationID string, ttl time.Duration) (time.Time, error)
	// ExpireDue releases up to limit held reservations whose expiry has passed and
	// returns how many it expired.
	ExpireDue(ctx context.Context, limit int) (int, error)

	RecordVideoTask(ctx context.Context, taskID, keyID, model string, origin TaskOrigin) (VideoTask, error)
	GetVideoTask(ctx context.Context, taskID string) (VideoTask, error)

	// Tiers returns every tier, by name.
	Tiers(ctx context.Context) ([]Tier, error)
	// PutTier creates or changes a tier; new reservations use it at once.
	PutTier(ctx context.Context, t Tier) (Tier, error)

	// CreateProject, GetProject, ListProjects (an account's, by id), UpdateProject and
	// DeleteProject keep an account's projects; a project's spend and holds are the
	// ledger's state now. DeleteProject is refused (ReasonInUse) while the project has
	// keys, child projects or requests in flight, and returns it as it was.
	CreateProject(ctx context.Context, p NewProject) (Project, error)
	GetProject(ctx context.Context, id string) (Project, error)
	ListProjects(ctx context.Context, accountID string) ([]Project, error)
	UpdateProject(ctx context.Context, u ProjectUpdate) (Project, error)
	DeleteProject(ctx context.Context, id string) (Project, error)
}

// Reports are the reads of the derived data (the tables the owner's decisions are
// written into): lists, statements, usage, reconciliation and the change feed. They
// decide nothing, and any replica can answer them from the database.
type Reports interface {
	// ListAccounts returns up to q.Limit accounts, newest first (creation time, then id,
	// both descending), that come after the account q.AfterID in that order (from the
	// newest when empty): a new account is on the first page. With q.Label, only the
	// accounts whose label contains it, ignoring case.
	ListAccounts(ctx context.Context, q AccountQuery) ([]Account, error)
	// ListKeys returns an account's keys, oldest first, with their current spend.
	ListKeys(ctx context.Context, accountID string) ([]Key, error)
	// Usage sums an account's charges in a range of UTC days, grouped.
	Usage(ctx context.Context, q UsageQuery) (UsageReport, error)
	// LedgerEntries returns up to limit of an account's entries older than beforeID
	// (from the newest when 0), newest first.
	LedgerEntries(ctx context.Context, accountID string, beforeID int64, limit int) ([]Entry, error)
	// Reconcile sums every account's charges in a range of UTC days per day, channel
	// and upstream model, with their components.
	Reconcile(ctx context.Context, q ReconcileQuery) ([]ReconcileRow, error)
	// Changes delivers key and account changes made by any process on the database
	// until ctx ends. The first value is a ChangeReset; another follows whenever the
	// feed may have missed changes (a reconnect).
	Changes(ctx context.Context) (<-chan Change, error)
}
