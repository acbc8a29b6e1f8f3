// Package machine is the ledger's state machine: accounts, tiers, API keys with their
// spend windows, rate and concurrency limits, holds with leases, settlements, top-ups
// and video-task ownership, decided in memory. It is the only implementation of the
// money rules.
//
// It does no I/O and reads no clock: every command carries its time and the ids it
// creates, so the same commands in the same order give the same answers and the same
// events on every machine. Decide checks a command and, when it changes something,
// returns the events that record the change, already applied. Apply folds one event
// into the state; it is the only code that mutates it, so a state rebuilt by applying
// the journal's events in order is the state that decided them (replay).
//
// It must not import anything but the standard library and accounting/ledger (for the
// domain's values and refusals): no database, no gRPC, no logging.
package machine

import (
	"time"

	"github.com/llmgw/gateway/accounting/ledger"
)

// Command is one operation to decide. Its concrete types are below; At is the
// command's time (UTC, microsecond precision), set by the owner.
type Command interface{ command() }

// Event is one decided change, the unit of the journal. Its concrete types are below.
type Event interface{ event() }

// Answer is what a command answers: the field of its kind, or Err (a *ledger.Refusal
// or ledger.ErrNotFound, as the PostgreSQL store answers).
type Answer struct {
	Account     ledger.Account
	Key         ledger.Key
	Grant       ledger.Grant
	Reservation ledger.Reservation
	Commit      ledger.CommitResult
	Release     ledger.ReleaseResult
	Expires     time.Time // Renew
	Expired     int       // ExpireDue
	VideoTask   ledger.VideoTask
	Tier        ledger.Tier
	Tiers       []ledger.Tier // ListTiers, by name
	Project     ledger.Project
	Projects    []ledger.Project // ListProjects, by id
	Err         error
}

// Commands. Those that create something carry the new id (a UUID chosen by the owner).
type (
	CreateAccount struct {
		ID    string
		Tier  string // DefaultTier when empty
		Label string
		At    time.Time
	}
	TopUp struct {
		AccountID      string
		Amount         ledger.Micros
		IdempotencyKey string
		At             time.Time
	}
	SetAccountSuspended struct {
		AccountID string
		Suspended bool
		At        time.Time
	}
	UpdateAccount struct {
		Update ledger.AccountUpdate
		At     time.Time
	}
	PutTier struct {
		Tier ledger.Tier
		At   time.Time
	}
	CreateKey struct {
		ID  string
		Key ledger.NewKey
		At  time.Time
	}
	SetKeyDisabled struct {
		KeyID    string
		Disabled bool
		At       time.Time
	}
	RevokeKey struct {
		KeyID string
		At    time.Time
	}
	UpdateKey struct {
		Update ledger.KeyUpdate
		At     time.Time
	}
	Reserve struct {
		ID      string // the new reservation's id, used only when it is admitted
		Request ledger.ReserveRequest
		At      time.Time
	}
	Commit struct {
		Request ledger.CommitRequest
		At      time.Time
	}
	Release struct {
		ReservationID string
		Reason        string
		At            time.Time
	}
	Renew struct {
		ReservationID string
		TTL           time.Duration
		At            time.Time
	}
	ExpireDue struct {
		Limit int
		At    time.Time
	}
	RecordVideoTask struct {
		TaskID string
		KeyID  string
		Model  string
		Origin ledger.TaskOrigin
		At     time.Time
	}
	// GraceLapsed gives every held reservation whose lease ran out before At a lease
	// until At + Grace: the clients that would have renewed them could not reach an
	// owner meanwhile (a takeover, an outage). Answer.Expired counts them.
	GraceLapsed struct {
		Grace time.Duration
		At    time.Time
	}
	// Forget drops from memory what no decision needs any more: reservations settled
	// before Before (a commit or release retried after that is answered from the
	// materialized tables) and spend windows that ended before Before.
	Forget struct {
		Before time.Time
		At     time.Time
	}
)

// Reads, decided like commands so that they see every decision made before them.
type (
	GetAccount struct{ AccountID string }
	GetKey     struct {
		KeyID string
		At    time.Time
	}
	Authenticate struct {
		Hash []byte
		At   time.Time
	}
	GetVideoTask   struct{ TaskID string }
	ListTiers      struct{}
	GetReservation struct{ ReservationID string }
)

// State is one shard's decided state. It is not safe for concurrent use: one owner
// decides, one goroutine at a time.
//
// Slices and pointers in answers and events (a key's allowed models and limits, a key
// hash) are shared with the state: callers must not modify them.
type State struct {
	accounts     map[string]*account
	tiers        map[string]*ledger.Tier
	keys         map[string]*key
	byHash       map[string]*key // string(hash) → key
	reservations map[string]*reservation
	byRequest    map[string]*reservation
	videoTasks   map[string]*ledger.VideoTask
	projects     map[string]*project
	expiry       expiryHeap // held reservations by expiry, with stale entries
	held         int        // held reservations
	alerts       uint64     // alerts generated: part of the next alert's id
	// complete is true while every window's Committed is the sum of charges of the
	// reservations the state knows (nothing forgotten since it was checked).
	complete bool
}

// New returns the state of an empty ledger with the built-in tiers (default, tight,
// enterprise) that migrations/0001_init.sql seeds.
func New() *State {
	s := empty()
	for _, t := range builtinTiers {
		s.putTier(t)
	}
	s.complete = true
	return s
}

// Decide decides c at its time: the answer, and the events that record what it
// changed, already applied to s (none for a read, a refusal or a replay).
func (s *State) Decide(c Command) (Answer, []Event) { return s.decide(c) }

// Apply folds e into s.
func (s *State) Apply(e Event) { s.apply(e) }
