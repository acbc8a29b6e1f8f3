package ledger

import "time"

// MaxProjectNameChars bounds a project's name, as a key's.
const MaxProjectNameChars = MaxKeyNameChars

// CheckProjectName reports an empty name or one longer than MaxProjectNameChars.
func CheckProjectName(name string) error {
	if name == "" {
		return Refuse(ReasonInvalidArgument, "a project needs a name")
	}
	return checkLabel("name", name, MaxProjectNameChars)
}

// MaxProjectLevels is how deep projects nest: a top-level project is level 1.
const MaxProjectLevels = 4

// Project divides an account: a node of the account's tree of projects, with optional
// spend windows (UTC day, UTC month, lifetime), rate limits and a model allowlist.
// The spend and holds count the project and its descendants.
type Project struct {
	ID           string
	AccountID    string
	ParentID     string // "" for a top-level project
	Name         string
	DailyLimit   *Micros
	MonthlyLimit *Micros
	Limit        *Micros // lifetime
	RPM          *int64
	TPM          *int64
	Models       []string // nil: every model
	SpentToday   Micros
	SpentMonth   Micros
	Spent        Micros
	Reserved     Micros // held by requests in flight
	CreatedAt    time.Time
}

// NewProject is what creating a project takes.
type NewProject struct {
	AccountID    string
	ParentID     string
	Name         string
	DailyLimit   *Micros
	MonthlyLimit *Micros
	Limit        *Micros
	RPM          *int64
	TPM          *int64
	Models       []string
}

// ProjectUpdate changes the fields that are Set; a Set nil limit clears it, a Set nil
// Models allows every model.
type ProjectUpdate struct {
	ID           string
	Name         Set[string]
	DailyLimit   Set[*Micros]
	MonthlyLimit Set[*Micros]
	Limit        Set[*Micros]
	RPM          Set[*int64]
	TPM          Set[*int64]
	Models       Set[[]string]
}

// KeyPlacement moves a key into a project of its account ("" for none) and sets its
// own rate limits: the fields that are Set change.
type KeyPlacement struct {
	KeyID     string
	ProjectID Set[string]
	RPM       Set[*int64]
	TPM       Set[*int64]
}
