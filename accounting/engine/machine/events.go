package machine

import (
	"time"

	"github.com/llmgw/gateway/accounting/ledger"
)

// Events: what the journal records. Each carries what replay needs and no more; what
// can be derived from earlier events (a reservation's account, key and model when it is
// settled) is not repeated.
type (
	AccountCreated struct {
		ID    string
		Tier  string
		Label string
		At    time.Time
	}
	// AccountLabeled is an account's new label ("": none).
	AccountLabeled struct {
		AccountID string
		Label     string
		At        time.Time
	}
	ToppedUp struct {
		AccountID      string
		Amount         ledger.Micros
		IdempotencyKey string // "" when the top-up is not idempotent
		At             time.Time
	}
	AccountSuspended struct {
		AccountID string
		Suspended bool
		At        time.Time
	}
	TierPut struct {
		Tier ledger.Tier
		At   time.Time
	}
	KeyCreated struct {
		ID            string
		AccountID     string
		Name          string
		Prefix        string
		Hash          []byte
		AllowedModels []string
		DailyLimit    *ledger.Micros
		MonthlyLimit  *ledger.Micros
		ExpiresAt     *time.Time
		AdminCreated  bool
		At            time.Time
	}
	// KeyChanged is a key's whole mutable state after a change (disable, revoke, edit).
	KeyChanged struct {
		KeyID         string
		Name          string
		AllowedModels []string
		DailyLimit    *ledger.Micros
		MonthlyLimit  *ledger.Micros
		ExpiresAt     *time.Time
		Disabled      bool
		RevokedAt     *time.Time
		At            time.Time
	}
	Reserved struct {
		ID        string
		RequestID string
		AccountID string
		KeyID     string
		Model     string
		Amount    ledger.Micros
		Pool      ledger.Pool
		At        time.Time // created
		ExpiresAt time.Time
		Tokens    int64 // the token bound taken from the tpm buckets on the key's path
	}
	Committed struct {
		ReservationID string
		Actual        ledger.Micros
		Charged       ledger.Micros // min(Actual, the hold)
		Usage         ledger.Usage
		UpstreamModel string
		Channel       string
		At            time.Time
	}
	// Released ends a hold without a charge: State is StateReleased or StateExpired.
	Released struct {
		ReservationID string
		State         ledger.ReservationState
		Reason        string
		At            time.Time
	}
	Renewed struct {
		ReservationID string
		ExpiresAt     time.Time
		At            time.Time
	}
	VideoTaskRecorded struct {
		Task ledger.VideoTask
	}
	Forgotten struct {
		Before time.Time
		At     time.Time
	}
)

func (AccountCreated) event()    {}
func (ToppedUp) event()          {}
func (AccountSuspended) event()  {}
func (AccountLabeled) event()    {}
func (TierPut) event()           {}
func (KeyCreated) event()        {}
func (KeyChanged) event()        {}
func (Reserved) event()          {}
func (Committed) event()         {}
func (Released) event()          {}
func (Renewed) event()           {}
func (VideoTaskRecorded) event() {}
func (Forgotten) event()         {}

func (CreateAccount) command()       {}
func (TopUp) command()               {}
func (SetAccountSuspended) command() {}
func (UpdateAccount) command()       {}
func (PutTier) command()             {}
func (CreateKey) command()           {}
func (SetKeyDisabled) command()      {}
func (RevokeKey) command()           {}
func (UpdateKey) command()           {}
func (Reserve) command()             {}
func (Commit) command()              {}
func (Release) command()             {}
func (Renew) command()               {}
func (ExpireDue) command()           {}
func (RecordVideoTask) command()     {}
func (Forget) command()              {}
func (GetAccount) command()          {}
func (GetKey) command()              {}
func (Authenticate) command()        {}
func (GetVideoTask) command()        {}
func (GetReservation) command()      {}
func (ListTiers) command()           {}
func (GraceLapsed) command()         {}
