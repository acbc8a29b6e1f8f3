package ctl

import (
	"encoding/json"
	"strconv"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/llmgw/gateway/accounting/ledger"
	accountingv1 "github.com/llmgw/gateway/proto/accounting/v1"
)

// credits is an amount printed as an exact decimal JSON number of credits.
func credits(m int64) json.Number { return json.Number(ledger.FormatCredits(m)) }

func optCredits(m *int64) (*json.Number, *int64) {
	if m == nil {
		return nil, nil
	}
	c, v := credits(*m), *m
	return &c, &v
}

func timeOrNil(ts *timestamppb.Timestamp) *string {
	if ts == nil {
		return nil
	}
	s := ts.AsTime().UTC().Format(time.RFC3339Nano)
	return &s
}

// Account is the JSON shape of an account.
type Account struct {
	ID               string       `json:"id"`
	Tier             string       `json:"tier"`
	Label            string       `json:"label"`
	Balance          json.Number  `json:"balance"`
	BalanceMicros    int64        `json:"balance_micros"`
	Reserved         json.Number  `json:"reserved"`
	ReservedMicros   int64        `json:"reserved_micros"`
	Available        json.Number  `json:"available"`
	AvailableMicros  int64        `json:"available_micros"`
	Suspended        bool         `json:"suspended"`
	ToppedUp         bool         `json:"topped_up"`
	InFlight         int32        `json:"in_flight"`
	InFlightHighCost int32        `json:"in_flight_high_cost"`
	CreatedAt        *string      `json:"created_at"`
	LowBalance       *json.Number `json:"low_balance"`
	LowBalanceMicros *int64       `json:"low_balance_micros"`
}

func accountJSON(a *accountingv1.Account) Account {
	low, lowMicros := optCredits(a.LowBalanceMicros)
	return Account{
		ID:               a.GetId(),
		Tier:             a.GetTier(),
		Label:            a.GetLabel(),
		Balance:          credits(a.GetBalanceMicros()),
		BalanceMicros:    a.GetBalanceMicros(),
		Reserved:         credits(a.GetReservedMicros()),
		ReservedMicros:   a.GetReservedMicros(),
		Available:        credits(a.GetAvailableMicros()),
		AvailableMicros:  a.GetAvailableMicros(),
		Suspended:        a.GetSuspended(),
		ToppedUp:         a.GetToppedUp(),
		InFlight:         a.GetInFlight(),
		InFlightHighCost: a.GetInFlightHighCost(),
		CreatedAt:        timeOrNil(a.GetCreatedAt()),
		LowBalance:       low,
		LowBalanceMicros: lowMicros,
	}
}

// Key is the JSON shape of a key; Secret is set only by key create.
type Key struct {
	ID                 string       `json:"id"`
	AccountID          string       `json:"account_id"`
	Name               string       `json:"name"`
	Prefix             string       `json:"prefix"`
	Secret             string       `json:"key,omitempty"`
	Models             []string     `json:"models"`
	DailyLimit         *json.Number `json:"daily_limit"`
	DailyLimitMicros   *int64       `json:"daily_limit_micros"`
	MonthlyLimit       *json.Number `json:"monthly_limit"`
	MonthlyLimitMicros *int64       `json:"monthly_limit_micros"`
	ExpiresAt          *string      `json:"expires_at"`
	Admin              bool         `json:"admin"`
	Disabled           bool         `json:"disabled"`
	Revoked            bool         `json:"revoked"`
	SpentToday         json.Number  `json:"spent_today"`
	SpentTodayMicros   int64        `json:"spent_today_micros"`
	HeldToday          json.Number  `json:"held_today"`
	HeldTodayMicros    int64        `json:"held_today_micros"`
	SpentMonth         json.Number  `json:"spent_month"`
	SpentMonthMicros   int64        `json:"spent_month_micros"`
	HeldMonth          json.Number  `json:"held_month"`
	HeldMonthMicros    int64        `json:"held_month_micros"`
	CreatedAt          *string      `json:"created_at"`
	ProjectID          string       `json:"project_id"` // "" in no project
	RPM                *int64       `json:"rpm"`
	TPM                *int64       `json:"tpm"`
}

func keyJSON(k *accountingv1.Key) Key {
	out := Key{
		ID:               k.GetId(),
		AccountID:        k.GetAccountId(),
		Name:             k.GetName(),
		Prefix:           k.GetPrefix(),
		Models:           append([]string{}, k.GetAllowedModels()...),
		ExpiresAt:        timeOrNil(k.GetExpiresAt()),
		Admin:            k.GetAdminCreated(),
		Disabled:         k.GetDisabled(),
		Revoked:          k.GetRevoked(),
		SpentToday:       credits(k.GetSpentTodayMicros()),
		SpentTodayMicros: k.GetSpentTodayMicros(),
		HeldToday:        credits(k.GetHeldTodayMicros()),
		HeldTodayMicros:  k.GetHeldTodayMicros(),
		SpentMonth:       credits(k.GetSpentMonthMicros()),
		SpentMonthMicros: k.GetSpentMonthMicros(),
		HeldMonth:        credits(k.GetHeldMonthMicros()),
		HeldMonthMicros:  k.GetHeldMonthMicros(),
		CreatedAt:        timeOrNil(k.GetCreatedAt()),
		ProjectID:        k.GetProjectId(),
		RPM:              k.Rpm,
		TPM:              k.Tpm,
	}
	out.DailyLimit, out.DailyLimitMicros = optCredits(k.DailyLimitMicros)
	out.MonthlyLimit, out.MonthlyLimitMicros = optCredits(k.MonthlyLimitMicros)
	return out
}

// AccountList is the JSON shape of account list.
type AccountList struct {
	Accounts  []Account `json:"accounts"`
	NextAfter string    `json:"next_after"`
}

// KeyList is the JSON shape of key list.
type KeyList struct {
	Keys []Key `json:"keys"`
}

// UsageTotals is the JSON shape of a usage report's total.
type UsageTotals struct {
	Requests         int64       `json:"requests"`
	InputTokens      int64       `json:"input_tokens"`
	OutputTokens     int64       `json:"output_tokens"`
	CacheReadTokens  int64       `json:"cache_read_tokens"`
	CacheWriteTokens int64       `json:"cache_write_tokens"`
	Charged          json.Number `json:"charged"`
	ChargedMicros    int64       `json:"charged_micros"`
}

func usageJSON(r ledger.UsageRow) UsageTotals {
	return UsageTotals{
		Requests:         r.Requests,
		InputTokens:      r.InputTokens,
		OutputTokens:     r.OutputTokens,
		CacheReadTokens:  r.CacheReadTokens,
		CacheWriteTokens: r.CacheWriteTokens,
		Charged:          credits(r.Charged),
		ChargedMicros:    r.Charged,
	}
}

// UsageReport is the JSON shape of usage: each row carries its group under "model",
// "key_id" or "day", as --by asked.
type UsageReport struct {
	Rows  []map[string]any `json:"rows"`
	Total UsageTotals      `json:"total"`
}

// Entry is the JSON shape of a ledger entry. A charge carries its components (amounts
// as priced: when the hold capped the charge, "capped" is true and they sum to more
// than the amount) and its service tier; a top-up has none.
type Entry struct {
	ID            string      `json:"id"`
	Kind          string      `json:"kind"`
	Amount        json.Number `json:"amount"`
	AmountMicros  int64       `json:"amount_micros"`
	CreatedAt     *string     `json:"created_at"`
	ReservationID string      `json:"reservation_id"`
	KeyID         string      `json:"key_id"`
	Model         string      `json:"model"`
	InputTokens   int64       `json:"input_tokens"`
	OutputTokens  int64       `json:"output_tokens"`
	Channel       string      `json:"channel"`
	UpstreamModel string      `json:"upstream_model"`
	// Components sum to the entry's amount: a capped charge's are cut to the hold
	// (ledger.ChargedComponents), and PricedComponents then has them as priced.
	Components       []Component `json:"components"`
	PricedComponents []Component `json:"priced_components,omitempty"`
	ServiceTier      string      `json:"service_tier"`
	Capped           bool        `json:"capped"`
}

// Component is the JSON shape of one priced part of a charge.
type Component struct {
	Name         string      `json:"name"`
	Units        int64       `json:"units"`
	PricePerMTok json.Number `json:"price_per_mtok"`
	Amount       json.Number `json:"amount"`
	AmountMicros int64       `json:"amount_micros"`
}

func entryJSON(e ledger.Entry) Entry {
	out := Entry{
		ID:            strconv.FormatInt(e.ID, 10),
		Kind:          string(e.Kind),
		Amount:        credits(e.Amount),
		AmountMicros:  e.Amount,
		ReservationID: e.ReservationID,
		KeyID:         e.KeyID,
		Model:         e.Model,
		InputTokens:   e.InputTokens,
		OutputTokens:  e.OutputTokens,
		Channel:       e.Channel,
		UpstreamModel: e.UpstreamModel,
		Components:    []Component{},
		ServiceTier:   e.ServiceTier,
		Capped:        e.Capped(),
	}
	if !e.CreatedAt.IsZero() {
		at := e.CreatedAt.UTC().Format(time.RFC3339Nano)
		out.CreatedAt = &at
	}
	if e.Kind == ledger.EntryCharge {
		out.Components = append(out.Components, componentsJSON(ledger.ChargedComponents(e.Components, -e.Amount))...)
	}
	if out.Capped {
		out.PricedComponents = componentsJSON(e.Components)
	}
	return out
}

func componentsJSON(cs []ledger.Component) []Component {
	out := make([]Component, 0, len(cs))
	for _, c := range cs {
		out = append(out, Component{Name: c.Name, Units: c.Units,
			PricePerMTok: json.Number(strconv.FormatInt(c.PricePerMTok, 10)), Amount: credits(c.Amount), AmountMicros: c.Amount})
	}
	return out
}

// Reconciliation is the JSON shape of reconcile.
type Reconciliation struct {
	Rows []ReconcileRow `json:"rows"`
}

// ReconcileRow is one UTC day, channel and upstream model of a reconciliation: each
// component's units and amount at the card's prices, their sum ("priced") and what the
// accounts were charged (less than priced where holds capped charges).
type ReconcileRow struct {
	Day           string                    `json:"day"`
	Channel       string                    `json:"channel"`
	UpstreamModel string                    `json:"upstream_model"`
	Requests      int64                     `json:"requests"`
	Components    map[string]ComponentTotal `json:"components"`
	Priced        json.Number               `json:"priced"`
	PricedMicros  int64                     `json:"priced_micros"`
	Charged       json.Number               `json:"charged"`
	ChargedMicros int64                     `json:"charged_micros"`
}

// ComponentTotal is the JSON shape of one component's units and amount, summed.
type ComponentTotal struct {
	Units        int64       `json:"units"`
	Amount       json.Number `json:"amount"`
	AmountMicros int64       `json:"amount_micros"`
}

func reconcileJSON(r ledger.ReconcileRow) ReconcileRow {
	out := ReconcileRow{Day: r.Day, Channel: r.Channel, UpstreamModel: r.UpstreamModel, Requests: r.Requests,
		Components: map[string]ComponentTotal{}, Charged: credits(r.Charged), ChargedMicros: r.Charged}
	for _, c := range r.Components {
		out.Components[c.Name] = ComponentTotal{Units: c.Units, Amount: credits(c.Amount), AmountMicros: c.Amount}
		out.PricedMicros += c.Amount
	}
	out.Priced = credits(out.PricedMicros)
	return out
}

// Statement is the JSON shape of ledger.
type Statement struct {
	Entries    []Entry `json:"entries"`
	NextBefore string  `json:"next_before"`
}

// Tier is the JSON shape of a tier.
type Tier struct {
	Name             string `json:"name"`
	RPMBeforeTopUp   int32  `json:"rpm_before_topup"`
	RPMAfterTopUp    int32  `json:"rpm_after_topup"`
	InFlightGeneral  int32  `json:"in_flight_general"`
	InFlightHighCost int32  `json:"in_flight_high_cost"`
}

func tierJSON(t *accountingv1.Tier) Tier {
	return Tier{
		Name:             t.GetName(),
		RPMBeforeTopUp:   t.GetRpmBeforeTopup(),
		RPMAfterTopUp:    t.GetRpmAfterTopup(),
		InFlightGeneral:  t.GetInFlightGeneral(),
		InFlightHighCost: t.GetInFlightHighCost(),
	}
}

// TierList is the JSON shape of tier list.
type TierList struct {
	Tiers []Tier `json:"tiers"`
}
