package contract

import (
	"maps"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/llmgw/gateway/accounting/ledger"
	accountingv1 "github.com/llmgw/gateway/proto/accounting/v1"
)

func tsOrNil(t *time.Time) *timestamppb.Timestamp {
	if t == nil {
		return nil
	}
	return timestamppb.New(*t)
}

// Timestamp is an instant on the wire; the zero time is absent.
func Timestamp(t time.Time) *timestamppb.Timestamp {
	if t.IsZero() {
		return nil
	}
	return timestamppb.New(t)
}

// timeOrNil reads an optional timestamp: absent, invalid and the epoch all mean none.
func timeOrNil(ts *timestamppb.Timestamp) *time.Time {
	if ts == nil || !ts.IsValid() || (ts.GetSeconds() == 0 && ts.GetNanos() == 0) {
		return nil
	}
	t := ts.AsTime()
	return &t
}

func copyMicros(p *ledger.Micros) *int64 {
	if p == nil {
		return nil
	}
	v := *p
	return &v
}

// AccountToProto is an account as the admin API shows it.
func AccountToProto(a ledger.Account) *accountingv1.Account {
	return &accountingv1.Account{
		Id:               a.ID,
		Tier:             a.Tier,
		Label:            a.Label,
		BalanceMicros:    a.Balance,
		ReservedMicros:   a.Reserved,
		AvailableMicros:  a.Available(),
		Suspended:        a.Suspended,
		ToppedUp:         a.ToppedUp,
		CreatedAt:        Timestamp(a.CreatedAt),
		InFlight:         int32(a.InFlight),
		InFlightHighCost: int32(a.InFlightHighCost),
		LowBalanceMicros: copyMicros(a.LowBalance),
	}
}

// KeyToProto is a key as the admin API shows it (never its secret: the domain has none).
func KeyToProto(k ledger.Key) *accountingv1.Key {
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
		CreatedAt:          Timestamp(k.CreatedAt),
		SpentTodayMicros:   k.SpentToday,
		HeldTodayMicros:    k.HeldToday,
		SpentMonthMicros:   k.SpentMonth,
		HeldMonthMicros:    k.HeldMonth,
		Prefix:             k.Prefix,
		ProjectId:          k.ProjectID,
		Rpm:                copyMicros(k.RPM),
		Tpm:                copyMicros(k.TPM),
	}
}

// GrantToProto is what an authenticated key may do, on the wire.
func GrantToProto(g ledger.Grant) *accountingv1.KeyGrant {
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
		EffectiveModels:    modelScopeToProto(g.EffectiveModels),
	}
}

// modelScopeToProto is a restricting set of models on the wire: nil (no restriction)
// stays absent, an empty one is present and empty.
func modelScopeToProto(models []string) *accountingv1.ModelScope {
	if models == nil {
		return nil
	}
	return &accountingv1.ModelScope{Models: append([]string(nil), models...)}
}

// GrantFromProto reads a grant off the wire.
func GrantFromProto(g *accountingv1.KeyGrant) ledger.Grant {
	out := ledger.Grant{
		KeyID: g.GetKeyId(), AccountID: g.GetAccountId(), AllowedModels: g.GetAllowedModels(),
		AdminCreated: g.GetAdminCreated(), Tier: g.GetTier(),
		AccountSuspended: g.GetAccountSuspended(), AccountToppedUp: g.GetAccountToppedUp(),
		ExpiresAt: timeOrNil(g.GetExpiresAt()),
	}
	if g.EffectiveModels != nil {
		out.EffectiveModels = append([]string{}, g.GetEffectiveModels().GetModels()...)
	}
	if g.DailyLimitMicros != nil {
		v := g.GetDailyLimitMicros()
		out.DailyLimit = &v
	}
	if g.MonthlyLimitMicros != nil {
		v := g.GetMonthlyLimitMicros()
		out.MonthlyLimit = &v
	}
	return out
}

// VideoTaskToProto is a video task's owner record; its age is counted at now.
func VideoTaskToProto(t ledger.VideoTask, now time.Time) *accountingv1.VideoTask {
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
		CreatedAt:       Timestamp(t.CreatedAt),
		AgeSeconds:      age,
		Channel:         t.Origin.Channel,
		UpstreamTaskId:  t.Origin.UpstreamTaskID,
	}
}

// UsageToProto is what a request consumed, on the wire.
func UsageToProto(u ledger.Usage) *accountingv1.Usage {
	return &accountingv1.Usage{InputTokens: u.InputTokens, OutputTokens: u.OutputTokens, Units: maps.Clone(u.Units),
		ServiceTier: u.ServiceTier, Components: ComponentsToProto(u.Components)}
}

// ComponentsToProto is a charge's priced components on the wire.
func ComponentsToProto(cs []ledger.Component) []*accountingv1.ChargeComponent {
	var out []*accountingv1.ChargeComponent
	for _, c := range cs {
		out = append(out, &accountingv1.ChargeComponent{
			Name: c.Name, Units: c.Units, PricePerMtok: c.PricePerMTok, AmountMicros: c.Amount})
	}
	return out
}

// ComponentsFromProto reads a charge's priced components (nil for none).
func ComponentsFromProto(cs []*accountingv1.ChargeComponent) []ledger.Component {
	var out []ledger.Component
	for _, c := range cs {
		out = append(out, ledger.Component{
			Name: c.GetName(), Units: c.GetUnits(), PricePerMTok: c.GetPricePerMtok(), Amount: c.GetAmountMicros()})
	}
	return out
}

// UsageFromProto reads what a request consumed; a missing usage is zero.
func UsageFromProto(u *accountingv1.Usage) ledger.Usage {
	if u == nil {
		return ledger.Usage{}
	}
	var units map[string]int64
	if len(u.GetUnits()) > 0 {
		units = maps.Clone(u.GetUnits())
	}
	return ledger.Usage{InputTokens: u.GetInputTokens(), OutputTokens: u.GetOutputTokens(), Units: units,
		ServiceTier: u.GetServiceTier(), Components: ComponentsFromProto(u.GetComponents())}
}

// TierToProto is a tier's limits on the wire.
func TierToProto(t ledger.Tier) *accountingv1.Tier {
	return &accountingv1.Tier{
		Name:             t.Name,
		RpmBeforeTopup:   int32(t.RPMBeforeTopUp),
		RpmAfterTopup:    int32(t.RPMAfterTopUp),
		InFlightGeneral:  int32(t.InFlightGeneral),
		InFlightHighCost: int32(t.InFlightHighCost),
	}
}

// TierFromProto reads a tier's limits off the wire.
func TierFromProto(t *accountingv1.Tier) ledger.Tier {
	return ledger.Tier{
		Name:             t.GetName(),
		RPMBeforeTopUp:   int(t.GetRpmBeforeTopup()),
		RPMAfterTopUp:    int(t.GetRpmAfterTopup()),
		InFlightGeneral:  int(t.GetInFlightGeneral()),
		InFlightHighCost: int(t.GetInFlightHighCost()),
	}
}

// UsageRowToProto is one group of a usage report on the wire.
func UsageRowToProto(r ledger.UsageRow) *accountingv1.UsageRow {
	return &accountingv1.UsageRow{
		Group:            r.Group,
		UpstreamModel:    r.UpstreamModel,
		Requests:         r.Requests,
		InputTokens:      r.InputTokens,
		OutputTokens:     r.OutputTokens,
		CacheReadTokens:  r.CacheReadTokens,
		CacheWriteTokens: r.CacheWriteTokens,
		ChargedMicros:    r.Charged,
	}
}

// UsageRowFromProto reads one group of a usage report.
func UsageRowFromProto(r *accountingv1.UsageRow) ledger.UsageRow {
	return ledger.UsageRow{
		Group:            r.GetGroup(),
		UpstreamModel:    r.GetUpstreamModel(),
		Requests:         r.GetRequests(),
		InputTokens:      r.GetInputTokens(),
		OutputTokens:     r.GetOutputTokens(),
		CacheReadTokens:  r.GetCacheReadTokens(),
		CacheWriteTokens: r.GetCacheWriteTokens(),
		Charged:          r.GetChargedMicros(),
	}
}

// EntryToProto is one ledger entry of a statement on the wire.
func EntryToProto(e ledger.Entry) *accountingv1.LedgerEntry {
	return &accountingv1.LedgerEntry{
		Id:            e.ID,
		Kind:          EntryKindToProto(e.Kind),
		AmountMicros:  e.Amount,
		CreatedAt:     Timestamp(e.CreatedAt),
		ReservationId: e.ReservationID,
		KeyId:         e.KeyID,
		Model:         e.Model,
		InputTokens:   e.InputTokens,
		OutputTokens:  e.OutputTokens,
		Channel:       e.Channel,
		UpstreamModel: e.UpstreamModel,
		Components:    ComponentsToProto(e.Components),
		ServiceTier:   e.ServiceTier,
	}
}

// EntryFromProto reads one ledger entry of a statement.
func EntryFromProto(e *accountingv1.LedgerEntry) ledger.Entry {
	out := ledger.Entry{
		ID:            e.GetId(),
		Kind:          EntryKindFromProto(e.GetKind()),
		Amount:        e.GetAmountMicros(),
		ReservationID: e.GetReservationId(),
		KeyID:         e.GetKeyId(),
		Model:         e.GetModel(),
		InputTokens:   e.GetInputTokens(),
		OutputTokens:  e.GetOutputTokens(),
		Channel:       e.GetChannel(),
		UpstreamModel: e.GetUpstreamModel(),
		Components:    ComponentsFromProto(e.GetComponents()),
		ServiceTier:   e.GetServiceTier(),
	}
	if at := timeOrNil(e.GetCreatedAt()); at != nil {
		out.CreatedAt = at.UTC()
	}
	return out
}

// ReconcileRowToProto is one day, channel and upstream model of a reconciliation.
func ReconcileRowToProto(r ledger.ReconcileRow) *accountingv1.ReconcileRow {
	out := &accountingv1.ReconcileRow{Day: r.Day, Channel: r.Channel, UpstreamModel: r.UpstreamModel,
		Requests: r.Requests, ChargedMicros: r.Charged}
	for _, c := range r.Components {
		out.Components = append(out.Components, &accountingv1.ChargeComponent{Name: c.Name, Units: c.Units, AmountMicros: c.Amount})
	}
	return out
}

// ReconcileRowFromProto reads one row of a reconciliation.
func ReconcileRowFromProto(r *accountingv1.ReconcileRow) ledger.ReconcileRow {
	out := ledger.ReconcileRow{Day: r.GetDay(), Channel: r.GetChannel(), UpstreamModel: r.GetUpstreamModel(),
		Requests: r.GetRequests(), Charged: r.GetChargedMicros()}
	for _, c := range r.GetComponents() {
		out.Components = append(out.Components, ledger.ComponentTotal{Name: c.GetName(), Units: c.GetUnits(), Amount: c.GetAmountMicros()})
	}
	return out
}

// VideoTaskFromProto reads a video task's owner record and its age when it was read.
func VideoTaskFromProto(t *accountingv1.VideoTask) (ledger.VideoTask, time.Duration) {
	out := ledger.VideoTask{
		TaskID: t.GetTaskId(), AccountID: t.GetAccountId(), KeyID: t.GetKeyId(),
		AdminCreatedKey: t.GetAdminCreatedKey(), Model: t.GetModel(),
		Origin: ledger.TaskOrigin{Channel: t.GetChannel(), UpstreamTaskID: t.GetUpstreamTaskId()},
	}
	if at := timeOrNil(t.GetCreatedAt()); at != nil {
		out.CreatedAt = *at
	}
	return out, time.Duration(t.GetAgeSeconds()) * time.Second
}
