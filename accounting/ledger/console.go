package ledger

import (
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// Set is a field of an update: the field changes only when Set is true, to Value
// (which for a pointer may be nil: cleared).
type Set[T any] struct {
	Set   bool
	Value T
}

// To returns a Set that changes the field to v.
func To[T any](v T) Set[T] { return Set[T]{Set: true, Value: v} }

// KeyUpdate changes some of a key's settings; fields not Set keep their value.
type KeyUpdate struct {
	ID   string
	Name Set[string]
	// AllowedModels: an empty list means every model.
	AllowedModels Set[[]string]
	DailyLimit    Set[*Micros]
	MonthlyLimit  Set[*Micros]
	ExpiresAt     Set[*time.Time]
	// ProjectID moves the key into a project of its account ("": out of any); RPM and
	// TPM set (or, nil, clear) its own rate limits.
	ProjectID Set[string]
	RPM, TPM  Set[*int64]
}

// AccountUpdate changes some of an account's settings; fields not Set keep their value.
type AccountUpdate struct {
	ID    string
	Label Set[string]
	// LowBalance sets the balance.low threshold (nil: none); it must not be negative.
	LowBalance Set[*Micros]
}

// AccountQuery selects a page of the account list (Store.ListAccounts).
type AccountQuery struct {
	AfterID string
	Limit   int
	// Label, when not empty, keeps the accounts whose label contains it, ignoring case.
	Label string
}

// UsageGroup is what a usage report's rows are per.
type UsageGroup int

const (
	ByModel UsageGroup = iota + 1
	ByKey
	ByDay
	// ByChannel groups by the channel that served the charge and its upstream model.
	ByChannel
	// ByProject groups each charge under the project its key was in when the request
	// was admitted ("" for none): its own project only, not the ancestors.
	ByProject
)

var usageGroupNames = map[UsageGroup]string{ByModel: "model", ByKey: "key", ByDay: "day", ByChannel: "channel",
	ByProject: "project"}

// String is the group's name as operators type it (gatewayctl usage --by, the console).
func (g UsageGroup) String() string { return usageGroupNames[g] }

// UsageGroupNamed is the group an operator named; ok is false for an unknown name.
func UsageGroupNamed(name string) (UsageGroup, bool) {
	for g, n := range usageGroupNames {
		if n == name {
			return g, true
		}
	}
	return 0, false
}

// UsageQuery asks for an account's charges in the UTC days From..To, both included
// (dates at midnight UTC), optionally of one key.
type UsageQuery struct {
	AccountID string
	KeyID     string // empty: every key
	// ProjectID: only the charges of keys in this project or its descendants (when
	// the request was admitted); empty: every charge.
	ProjectID string
	From, To  time.Time
	By        UsageGroup
}

// UsageRow is the charges of one group: the model, key id, day ("2006-01-02"),
// channel (with UpstreamModel) or project id.
type UsageRow struct {
	Group         string
	UpstreamModel string // ByChannel only
	Requests      int64
	InputTokens   int64
	OutputTokens  int64
	// Input tokens read from and written to a prompt cache (both write windows), as
	// the charges' components recorded them: part of InputTokens.
	CacheReadTokens  int64
	CacheWriteTokens int64
	Charged          Micros
}

// UsageReport is a usage report's rows, ordered by group, and their total.
type UsageReport struct {
	Rows  []UsageRow
	Total UsageRow
}

// EntryKind is a ledger entry's kind.
type EntryKind string

const (
	EntryTopUp  EntryKind = "top_up"
	EntryCharge EntryKind = "charge"
)

// Entry is one line of an account's statement: a top-up (positive) or a charge (zero
// or negative, with the reservation, key, model and tokens it was for).
type Entry struct {
	ID            int64
	Kind          EntryKind
	Amount        Micros
	CreatedAt     time.Time
	ReservationID string
	KeyID         string
	Model         string
	InputTokens   int64
	OutputTokens  int64
	// A charge's channel and upstream model, its priced components and tier, as
	// committed (empty for charges recorded without them). The components keep the
	// amounts they were priced at: when the hold capped the charge (Capped), they sum
	// to more than -Amount.
	Channel       string
	UpstreamModel string
	Components    []Component
	ServiceTier   string
}

// Capped reports whether the charge is less than its components priced: the hold,
// not the card, set its amount.
func (e Entry) Capped() bool {
	return e.Kind == EntryCharge && len(e.Components) > 0 && PricedAmount(e.Components) > -e.Amount
}

// MaxTierLimit bounds each of a tier's limits.
const MaxTierLimit = 1 << 30

// Validate reports what is wrong with a tier: an empty or long name, a negative or
// absurd limit, or a high-cost pool larger than the general pool it is part of.
func (t Tier) Validate() error {
	switch {
	case t.Name == "" || len(t.Name) > 64:
		return Refuse(ReasonInvalidArgument, "a tier needs a name of 1 to 64 characters")
	case t.RPMBeforeTopUp < 0 || t.RPMAfterTopUp < 0 || t.InFlightGeneral < 0 || t.InFlightHighCost < 0:
		return Refuse(ReasonInvalidArgument, "tier limits must not be negative")
	case max(t.RPMBeforeTopUp, t.RPMAfterTopUp, t.InFlightGeneral, t.InFlightHighCost) > MaxTierLimit:
		return Refuse(ReasonInvalidArgument, fmt.Sprintf("tier limits must not exceed %d", MaxTierLimit))
	case t.InFlightHighCost > t.InFlightGeneral:
		return Refuse(ReasonInvalidArgument, "the high-cost pool must not be larger than the general pool")
	}
	return nil
}

// A key's name and allowlist are labels an operator types; they are stored, listed and
// sent to every gateway cache on each change, so each is bounded. Counts are characters
// (runes), as an operator counts them.
const (
	MaxKeyNameChars  = 200
	MaxAllowedModels = 200
	MaxModelIDChars  = 200
)

// MaxAccountLabelChars bounds an account's label, an operator's name for it.
const MaxAccountLabelChars = 200

// CheckAccountLabel reports a label longer than MaxAccountLabelChars or holding a
// control character (a line break included), naming the field. Empty is allowed (no
// label).
func CheckAccountLabel(label string) error {
	if err := checkLabel("label", label, MaxAccountLabelChars); err != nil {
		return err
	}
	if strings.ContainsFunc(label, unicode.IsControl) {
		return errors.New("label must not contain control characters")
	}
	return nil
}

// CheckKeyName reports a key name longer than MaxKeyNameChars, naming the field. Empty
// is allowed (an unnamed key). Names arrive over gRPC, whose strings are UTF-8.
func CheckKeyName(name string) error {
	return checkLabel("name", name, MaxKeyNameChars)
}

// CheckAllowedModels reports what is wrong with an allowlist, naming the field: more
// than MaxAllowedModels entries, or an entry that is empty or longer than
// MaxModelIDChars. An empty list (every model) is allowed.
func CheckAllowedModels(models []string) error {
	if len(models) > MaxAllowedModels {
		return fmt.Errorf("allowed_models lists %d models, at most %d", len(models), MaxAllowedModels)
	}
	for i, m := range models {
		if m == "" {
			return errors.New("allowed_models must not contain empty names")
		}
		if err := checkLabel(fmt.Sprintf("allowed_models[%d]", i), m, MaxModelIDChars); err != nil {
			return err
		}
	}
	return nil
}

func checkLabel(field, s string, most int) error {
	if n := utf8.RuneCountInString(s); n > most {
		return fmt.Errorf("%s has %d characters, at most %d", field, n, most)
	}
	return nil
}
