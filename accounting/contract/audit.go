package contract

import (
	"encoding/json"
	"io"
	"strconv"
	"time"

	accountingv1 "github.com/llmgw/gateway/proto/accounting/v1"
)

// AuditRecord is the JSON shape of one audit log entry wherever it is printed: an
// entry of `gatewayctl audit list`, and one line of the JSON-lines exports
// (`gatewayctl audit export`, the console's /audit.jsonl). The field names are stable:
// id (a decimal string), at (RFC 3339, UTC), actor, via, action, target, and the
// record before and after as the API shows it, or null.
type AuditRecord struct {
	ID     string          `json:"id"`
	At     *string         `json:"at"`
	Actor  string          `json:"actor"`
	Via    string          `json:"via"`
	Action string          `json:"action"`
	Target string          `json:"target"`
	Before json.RawMessage `json:"before"`
	After  json.RawMessage `json:"after"`
}

// AuditRecordOf is e in its JSON shape.
func AuditRecordOf(e *accountingv1.AuditEntry) AuditRecord {
	r := AuditRecord{ID: strconv.FormatInt(e.GetId(), 10), Actor: e.GetActor(), Via: e.GetVia(), Action: e.GetAction(),
		Target: e.GetTarget(), Before: rawOrNull(e.GetBeforeJson()), After: rawOrNull(e.GetAfterJson())}
	if e.GetAt() != nil {
		at := e.GetAt().AsTime().UTC().Format(time.RFC3339Nano)
		r.At = &at
	}
	return r
}

func rawOrNull(s string) json.RawMessage {
	if s == "" {
		return json.RawMessage("null")
	}
	return json.RawMessage(s)
}

// AuditExportPage is how many entries an export asks for at a time.
const AuditExportPage = 500

// ExportAudit writes every entry list answers, newest first, one JSON object
// (AuditRecord) and a newline each, asking for the page before the last one written
// until none follows. req selects the entries (its BeforeId: where to start, 0 the
// newest); list is called with req's BeforeId and Limit set.
func ExportAudit(req *accountingv1.ListAuditRequest, list func(*accountingv1.ListAuditRequest) (*accountingv1.ListAuditResponse, error),
	w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	for {
		req.Limit = AuditExportPage
		resp, err := list(req)
		if err != nil {
			return err
		}
		for _, e := range resp.GetEntries() {
			if err := enc.Encode(AuditRecordOf(e)); err != nil {
				return err
			}
		}
		if resp.GetNextBeforeId() == 0 {
			return nil
		}
		req.BeforeId = resp.GetNextBeforeId()
	}
}
