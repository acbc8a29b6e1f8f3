package ctl

import (
	"encoding/json"
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
	ID               string      `json:"id"`
	Tier             string      `json:"tier"`
	Balance          json.Number `json:"balance"`
	BalanceMicros    int64       `json:"balance_micros"`
	Reserved         json.Number `json:"reserved"`
	ReservedMicros   int64       `json:"reserved_micros"`
	Available        json.Number `json:"available"`
	AvailableMicros  int64       `json:"available_micros"`
	Suspended        bool        `json:"suspended"`
	ToppedUp         bool        `json:"topped_up"`
	InFlight         int32       `json:"in_flight"`
	InFlightHighCost int32       `json:"in_flight_high_cost"`
	CreatedAt        *string     `json:"created_at"`
}

func accountJSON(a *accountingv1.Account) Account {
	return Account{
		ID:               a.GetId(),
		Tier:             a.GetTier(),
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
	}
	out.DailyLimit, out.DailyLimitMicros = optCredits(k.DailyLimitMicros)
	out.MonthlyLimit, out.MonthlyLimitMicros = optCredits(k.MonthlyLimitMicros)
	return out
}
