package alerts

import (
	"encoding/json"
	"time"

	"github.com/llmgw/gateway/accounting/engine/machine"
	"github.com/llmgw/gateway/accounting/ledger"
)

// TypeTest is the event `webhook test` sends; it is no ledger fact.
const TypeTest = "webhook.test"

// Types are every event type a webhook may subscribe to.
var Types = append(append([]string(nil), machine.AlertTypes...), TypeTest)

// event is a webhook's JSON body. Data's keys are sorted (a map), so equal events give
// equal bytes.
type event struct {
	ID        string         `json:"id"`
	Type      string         `json:"type"`
	CreatedAt string         `json:"created_at"`
	Data      map[string]any `json:"data"`
}

// timeFormat is a body's time: UTC, microseconds, as the ledger keeps times.
const timeFormat = "2006-01-02T15:04:05.000000Z"

// Body is the JSON body delivered for e: {"id", "type", "created_at", "data"}, data
// with account_id, key_id or project_id where there is one, amounts in decimal credits.
func Body(e machine.Alerted) []byte {
	data := map[string]any{"account_id": e.AccountID}
	if e.KeyID != "" {
		data["key_id"] = e.KeyID
	}
	if e.ProjectID != "" {
		data["project_id"] = e.ProjectID
	}
	switch e.Type {
	case machine.AlertBudgetThreshold:
		data["window"] = e.Window
		data["percent"] = e.Percent
		data["limit"] = ledger.FormatCredits(e.Limit)
		data["spent"] = ledger.FormatCredits(e.Spent)
		if !e.Start.IsZero() {
			data["window_start"] = e.Start.UTC().Format(timeFormat)
		}
	case machine.AlertBalanceLow:
		data["threshold"] = ledger.FormatCredits(e.Threshold)
		data["available"] = ledger.FormatCredits(e.Available)
	}
	return marshal(event{ID: e.ID, Type: e.Type, CreatedAt: e.At.UTC().Format(timeFormat), Data: data})
}

// TestBody is the body of a webhook.test event sent to webhookID.
func TestBody(id, accountID, webhookID string, at time.Time) []byte {
	return marshal(event{ID: id, Type: TypeTest, CreatedAt: at.UTC().Format(timeFormat),
		Data: map[string]any{"account_id": accountID, "webhook_id": webhookID}})
}

func marshal(e event) []byte {
	b, err := json.Marshal(e)
	if err != nil {
		panic("alerts: " + err.Error()) // strings and integers only
	}
	return b
}
