package machine

import (
	"encoding/json"
	"time"
)

// Audited is the audit record of one change made through the admin API (see
// ledger.AuditEntry): the owner decides it with the change, in the same journal
// batch right after the change's events, so the journal holds both or neither. It
// changes nothing in the state; the materializer writes it to the audit log.
type Audited struct {
	Actor     string
	Via       string
	Action    string
	Target    string
	AccountID string
	Before    json.RawMessage // nil: none
	After     json.RawMessage // nil: none
	At        time.Time
}

func (Audited) event() {}
