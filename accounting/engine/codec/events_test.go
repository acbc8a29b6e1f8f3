package codec

import (
	"time"

	"github.com/llmgw/gateway/accounting/engine/machine"
	"github.com/llmgw/gateway/accounting/ledger"
)

// Values the tests share: UUIDs as the owner makes them, times as the machine keeps them
// (UTC, whole microseconds).
const (
	acctID   = "0190f8a2-7c4e-7d1a-9b3f-2e4c6a8b0d1f"
	keyID    = "0190f8a2-8d5f-7e2b-8c40-3f5d7b9c1e2a"
	resvID   = "0190f8a2-9e60-7f3c-9d51-406e8cad2f3b"
	reqID    = "req_01HZX3K7Q9V2M4N6P8R0S2T4V6-aabbccdd"
	modelID  = "demo-chat"
	projID   = "0190f8a2-af71-7a4d-8e62-517f9dbe304c"
	parentID = "team-ml"
)

var (
	at        = time.Date(2026, 5, 17, 10, 4, 5, 123456000, time.UTC)
	later     = at.Add(5 * time.Minute)
	limit     = ledger.Micros(25_000_000)
	zeroLim   = ledger.Micros(0)
	epoch     = time.UnixMicro(0).UTC()
	rpm       = int64(600)
	tpm       = int64(90_000)
	zeroCount = int64(0)
)

// full is one value of every event type with every field set; the coverage test holds
// it to the event types the machine declares.
func full() []machine.Event {
	return []machine.Event{
		machine.AccountCreated{ID: acctID, Tier: "pro", Label: "Acme — research", At: at},
		machine.ToppedUp{AccountID: acctID, Amount: 10_000_000, IdempotencyKey: "stripe:pi_3Pq8ZkLx", At: at},
		machine.AccountSuspended{AccountID: acctID, Suspended: true, At: at},
		machine.TierPut{Tier: ledger.Tier{Name: "pro", RPMBeforeTopUp: 10, RPMAfterTopUp: 600,
			InFlightGeneral: 32, InFlightHighCost: 4}, At: at},
		machine.KeyCreated{ID: keyID, AccountID: acctID, Name: "ci runner", Prefix: "sk-demo1",
			Hash: []byte{0xde, 0xad, 0xbe, 0xef, 0, 1}, AllowedModels: []string{"demo-chat", "demo-video"},
			DailyLimit: &limit, MonthlyLimit: &zeroLim, ExpiresAt: &later, AdminCreated: true, At: at},
		machine.KeyChanged{KeyID: keyID, Name: "renamed", AllowedModels: []string{"demo-chat"},
			DailyLimit: &zeroLim, MonthlyLimit: &limit, ExpiresAt: &later, Disabled: true, RevokedAt: &at, At: later},
		machine.Reserved{ID: resvID, RequestID: reqID, AccountID: acctID, KeyID: keyID, Model: modelID,
			Amount: 48_000, Pool: ledger.PoolHighCost, At: at, ExpiresAt: later, Tokens: 4096},
		machine.Committed{ReservationID: resvID, Actual: 52_000, Charged: 48_000,
			Usage: ledger.Usage{InputTokens: 1200, OutputTokens: 300, Units: map[string]int64{"seconds": 8, "images": 2, "": 1},
				Components: []ledger.Component{{Name: "input", Units: 1200, PricePerMTok: 10_000_000, Amount: 12_000},
					{Name: "output", Units: 300, PricePerMTok: 133_333_334, Amount: 40_000}}, ServiceTier: "priority"},
			UpstreamModel: "demo-chat-2026-04", Channel: "mock-east", At: later},
		machine.Released{ReservationID: resvID, State: ledger.StateExpired, Reason: "lease ended", At: later},
		machine.Renewed{ReservationID: resvID, ExpiresAt: later.Add(time.Minute), At: later},
		machine.VideoTaskRecorded{Task: ledger.VideoTask{TaskID: "vt_0190f8a2aa", AccountID: acctID, KeyID: keyID,
			AdminCreatedKey: true, Model: "demo-video", CreatedAt: at,
			Origin: ledger.TaskOrigin{Channel: "mock-video", UpstreamTaskID: "upstream-task-000000000042"}}},
		machine.Forgotten{Before: at.AddDate(0, -3, 0), At: at},
		machine.ProjectCreated{ID: projID, AccountID: acctID, ParentID: parentID, Name: "research", DailyLimit: &limit,
			MonthlyLimit: &zeroLim, Limit: &limit, RPM: &rpm, TPM: &tpm, Models: []string{"demo-chat", "demo-free"}, At: at},
		machine.ProjectChanged{ProjectID: projID, Name: "research-2", DailyLimit: &zeroLim, MonthlyLimit: &limit,
			Limit: &zeroLim, RPM: &tpm, TPM: &rpm, Models: []string{"demo-chat"}, At: later},
		machine.ProjectDeleted{ProjectID: projID, At: later},
		machine.KeyPlaced{KeyID: keyID, ProjectID: projID, RPM: &rpm, TPM: &tpm, At: later},
		machine.AccountLabeled{AccountID: acctID, Label: "Acme, billing", At: later},
		machine.LowBalanceSet{AccountID: acctID, Threshold: &limit, At: later},
		machine.Alerted{ID: "evt_5f0c2d9a8b7e6f1d0c3b2a4958675a1b", Type: machine.AlertBudgetThreshold, AccountID: acctID,
			KeyID: keyID, ProjectID: projID, Window: machine.WindowMonth, Start: at.AddDate(0, 0, -16), Percent: 95,
			Limit: limit, Spent: 23_750_000, Threshold: 2_000_000, Available: -5, At: later},
		machine.Audited{Actor: "ada@example.com", Via: "console", Action: "key.revoke", Target: keyID, AccountID: acctID,
			Before: []byte(`{"id":"k","revoked":false}`), After: []byte(`{"id":"k","revoked":true}`), At: later},
		machine.Audited{Actor: "admin-token", Via: "gatewayctl", Action: "tier.set", Target: "enterprise-plus-2026",
			After: []byte(`{"name":"enterprise-plus-2026"}`), At: later},
	}
}

// zero is every event type with zero values, and with the nil-or-empty values the
// other way round from full: empty lists and hashes, nil limits.
func zero() []machine.Event {
	return []machine.Event{
		machine.AccountCreated{}, machine.ToppedUp{}, machine.AccountSuspended{}, machine.AccountLabeled{}, machine.TierPut{},
		machine.KeyCreated{}, machine.KeyChanged{}, machine.Reserved{}, machine.Committed{}, machine.Released{},
		machine.Renewed{}, machine.VideoTaskRecorded{}, machine.Forgotten{},
		machine.ProjectCreated{}, machine.ProjectChanged{}, machine.ProjectDeleted{}, machine.KeyPlaced{},
		machine.ProjectCreated{Models: []string{}, RPM: &zeroCount}, machine.ProjectChanged{Models: []string{}, TPM: &zeroCount},
		machine.KeyCreated{Hash: []byte{}, AllowedModels: []string{}},
		machine.KeyChanged{AllowedModels: []string{}, RevokedAt: &epoch},
		machine.Committed{Usage: ledger.Usage{Units: map[string]int64{}, Components: []ledger.Component{}}},
		machine.Committed{Usage: ledger.Usage{Units: map[string]int64{"tokens": 0}, Components: []ledger.Component{{}}}},
		machine.Reserved{At: epoch, ExpiresAt: at},
		machine.Reserved{At: at}, // expires at the zero time: a delta far below zero
		machine.Forgotten{Before: time.Date(1969, 12, 31, 23, 59, 59, 999999000, time.UTC), At: epoch},
		machine.ToppedUp{Amount: -1}, machine.TierPut{Tier: ledger.Tier{RPMBeforeTopUp: -1}},
		machine.LowBalanceSet{}, machine.LowBalanceSet{Threshold: &zeroLim}, machine.Alerted{}, machine.Alerted{Start: epoch},
		machine.Audited{},
	}
}
