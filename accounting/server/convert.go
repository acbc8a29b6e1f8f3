package server

import (
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/llmgw/gateway/accounting/ledger"
	accountingv1 "github.com/llmgw/gateway/proto/accounting/v1"
)

// This file is the only place where wire types and domain types meet.

func tsOrNil(t *time.Time) *timestamppb.Timestamp {
	if t == nil {
		return nil
	}
	return timestamppb.New(*t)
}

func tsOrZeroNil(t time.Time) *timestamppb.Timestamp {
	if t.IsZero() {
		return nil
	}
	return timestamppb.New(t)
}

func copyMicros(p *ledger.Micros) *int64 {
	if p == nil {
		return nil
	}
	v := *p
	return &v
}

func accountToProto(a ledger.Account) *accountingv1.Account {
	return &accountingv1.Account{
		Id:               a.ID,
		Tier:             a.Tier,
		BalanceMicros:    a.Balance,
		ReservedMicros:   a.Reserved,
		AvailableMicros:  a.Available(),
		Suspended:        a.Suspended,
		ToppedUp:         a.ToppedUp,
		CreatedAt:        tsOrZeroNil(a.CreatedAt),
		InFlight:         int32(a.InFlight),
		InFlightHighCost: int32(a.InFlightHighCost),
	}
}

func keyToProto(k ledger.Key) *accountingv1.Key {
	return &accountingv1.Key{
		Id:                 k.ID,
		AccountId:          k.AccountID,
		Name:               k.Name,
		AllowedModels:      append([]string(nil), k.AllowedModels...),
		DailyLimitMicros:   copyMicros(k.DailyLimit),
		MonthlyLimitMicros: copyMicros(k.MonthlyLimit),
		ExpiresAt:          tsOrNil(k.ExpiresAt),
		AdminCreated:       k.AdminCreated,
		Disabled:           k.Disabled,
		Revoked:            k.Revoked,
		CreatedAt:          tsOrZeroNil(k.CreatedAt),
		SpentTodayMicros:   k.SpentToday,
		HeldTodayMicros:    k.HeldToday,
		SpentMonthMicros:   k.SpentMonth,
		HeldMonthMicros:    k.HeldMonth,
		Prefix:             k.Prefix,
	}
}

func grantToProto(g ledger.Grant) *accountingv1.KeyGrant {
	return &accountingv1.KeyGrant{
		KeyId:              g.KeyID,
		AccountId:          g.AccountID,
		AllowedModels:      append([]string(nil), g.AllowedModels...),
		DailyLimitMicros:   copyMicros(g.DailyLimit),
		MonthlyLimitMicros: copyMicros(g.MonthlyLimit),
		ExpiresAt:          tsOrNil(g.ExpiresAt),
		AdminCreated:       g.AdminCreated,
		Tier:               g.Tier,
		AccountSuspended:   g.AccountSuspended,
		AccountToppedUp:    g.AccountToppedUp,
	}
}

func videoTaskToProto(t ledger.VideoTask, now time.Time) *accountingv1.VideoTask {
	age := int64(0)
	if !t.CreatedAt.IsZero() && now.After(t.CreatedAt) {
		age = int64(now.Sub(t.CreatedAt) / time.Second)
	}
	return &accountingv1.VideoTask{
		TaskId:          t.TaskID,
		AccountId:       t.AccountID,
		KeyId:           t.KeyID,
		AdminCreatedKey: t.AdminCreatedKey,
		Model:           t.Model,
		CreatedAt:       tsOrZeroNil(t.CreatedAt),
		AgeSeconds:      age,
		Channel:         t.Origin.Channel,
		UpstreamTaskId:  t.Origin.UpstreamTaskID,
	}
}

var poolFromProto = map[accountingv1.Pool]ledger.Pool{
	accountingv1.Pool_POOL_GENERAL:   ledger.PoolGeneral,
	accountingv1.Pool_POOL_HIGH_COST: ledger.PoolHighCost,
}

var stateToProto = map[ledger.ReservationState]accountingv1.ReservationState{
	ledger.StateHeld:      accountingv1.ReservationState_RESERVATION_STATE_HELD,
	ledger.StateCommitted: accountingv1.ReservationState_RESERVATION_STATE_COMMITTED,
	ledger.StateReleased:  accountingv1.ReservationState_RESERVATION_STATE_RELEASED,
	ledger.StateExpired:   accountingv1.ReservationState_RESERVATION_STATE_EXPIRED,
}

var changeKindToProto = map[ledger.ChangeKind]accountingv1.ChangeKind{
	ledger.ChangeReset:   accountingv1.ChangeKind_CHANGE_KIND_RESET,
	ledger.ChangeKey:     accountingv1.ChangeKind_CHANGE_KIND_KEY,
	ledger.ChangeAccount: accountingv1.ChangeKind_CHANGE_KIND_ACCOUNT,
}

func changeToProto(c ledger.Change) *accountingv1.WatchChangesResponse {
	kind, ok := changeKindToProto[c.Kind]
	if !ok {
		// An unknown kind can only mean a change we cannot describe: drop everything.
		kind = accountingv1.ChangeKind_CHANGE_KIND_RESET
	}
	return &accountingv1.WatchChangesResponse{Kind: kind, KeyId: c.KeyID, AccountId: c.AccountID}
}

func usageFromProto(u *accountingv1.Usage) ledger.Usage {
	if u == nil {
		return ledger.Usage{}
	}
	var units map[string]int64
	if len(u.GetUnits()) > 0 {
		units = make(map[string]int64, len(u.GetUnits()))
		for k, v := range u.GetUnits() {
			units[k] = v
		}
	}
	return ledger.Usage{InputTokens: u.GetInputTokens(), OutputTokens: u.GetOutputTokens(), Units: units}
}

func tierToProto(t ledger.Tier) *accountingv1.Tier {
	return &accountingv1.Tier{
		Name:             t.Name,
		RpmBeforeTopup:   int32(t.RPMBeforeTopUp),
		RpmAfterTopup:    int32(t.RPMAfterTopUp),
		InFlightGeneral:  int32(t.InFlightGeneral),
		InFlightHighCost: int32(t.InFlightHighCost),
	}
}

func tierFromProto(t *accountingv1.Tier) ledger.Tier {
	return ledger.Tier{
		Name:             t.GetName(),
		RPMBeforeTopUp:   int(t.GetRpmBeforeTopup()),
		RPMAfterTopUp:    int(t.GetRpmAfterTopup()),
		InFlightGeneral:  int(t.GetInFlightGeneral()),
		InFlightHighCost: int(t.GetInFlightHighCost()),
	}
}

var usageGroupFromProto = map[accountingv1.UsageGroup]ledger.UsageGroup{
	accountingv1.UsageGroup_USAGE_GROUP_UNSPECIFIED: ledger.ByModel,
	accountingv1.UsageGroup_USAGE_GROUP_MODEL:       ledger.ByModel,
	accountingv1.UsageGroup_USAGE_GROUP_KEY:         ledger.ByKey,
	accountingv1.UsageGroup_USAGE_GROUP_DAY:         ledger.ByDay,
}

func usageRowToProto(r ledger.UsageRow) *accountingv1.UsageRow {
	return &accountingv1.UsageRow{
		Group:         r.Group,
		Requests:      r.Requests,
		InputTokens:   r.InputTokens,
		OutputTokens:  r.OutputTokens,
		ChargedMicros: r.Charged,
	}
}

var entryKindToProto = map[ledger.EntryKind]accountingv1.EntryKind{
	ledger.EntryTopUp:  accountingv1.EntryKind_ENTRY_KIND_TOP_UP,
	ledger.EntryCharge: accountingv1.EntryKind_ENTRY_KIND_CHARGE,
}

func entryToProto(e ledger.Entry) *accountingv1.LedgerEntry {
	return &accountingv1.LedgerEntry{
		Id:            e.ID,
		Kind:          entryKindToProto[e.Kind],
		AmountMicros:  e.Amount,
		CreatedAt:     tsOrZeroNil(e.CreatedAt),
		ReservationId: e.ReservationID,
		KeyId:         e.KeyID,
		Model:         e.Model,
		InputTokens:   e.InputTokens,
		OutputTokens:  e.OutputTokens,
	}
}

// keyUpdateFromProto reads which settings an UpdateKeyRequest changes.
func keyUpdateFromProto(req *accountingv1.UpdateKeyRequest) (ledger.KeyUpdate, error) {
	u := ledger.KeyUpdate{ID: req.GetKeyId()}
	if req.Name != nil {
		if err := ledger.CheckKeyName(req.GetName()); err != nil {
			return u, invalidArgument(err.Error())
		}
		u.Name = ledger.To(req.GetName())
	}
	if req.AllowedModels != nil {
		models := append([]string(nil), req.GetAllowedModels().GetModels()...)
		if err := ledger.CheckAllowedModels(models); err != nil {
			return u, invalidArgument(err.Error())
		}
		u.AllowedModels = ledger.To(models)
	}
	for _, lim := range []struct {
		in   *accountingv1.LimitUpdate
		out  *ledger.Set[*ledger.Micros]
		name string
	}{{req.DailyLimit, &u.DailyLimit, "daily_limit"}, {req.MonthlyLimit, &u.MonthlyLimit, "monthly_limit"}} {
		if lim.in == nil {
			continue
		}
		if lim.in.Micros != nil && lim.in.GetMicros() < 0 {
			return u, invalidArgument(lim.name + " must not be negative")
		}
		*lim.out = ledger.To(copyMicros(lim.in.Micros))
	}
	if req.Expiry != nil {
		var t *time.Time
		if ts := req.GetExpiry().GetExpiresAt(); ts != nil {
			if err := ts.CheckValid(); err != nil {
				return u, invalidArgument("expires_at is not a valid timestamp")
			}
			v := ts.AsTime()
			t = &v
		}
		u.ExpiresAt = ledger.To(t)
	}
	return u, nil
}
