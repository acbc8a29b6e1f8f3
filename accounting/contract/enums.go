package contract

import (
	"github.com/llmgw/gateway/accounting/ledger"
	accountingv1 "github.com/llmgw/gateway/proto/accounting/v1"
)

var pools = newEnum(
	pair[ledger.Pool, accountingv1.Pool]{ledger.PoolGeneral, accountingv1.Pool_POOL_GENERAL},
	pair[ledger.Pool, accountingv1.Pool]{ledger.PoolHighCost, accountingv1.Pool_POOL_HIGH_COST},
)

// PoolToProto is a request pool on the wire; the general pool is the default.
func PoolToProto(p ledger.Pool) accountingv1.Pool {
	if w, ok := pools.toWire(p); ok {
		return w
	}
	return accountingv1.Pool_POOL_GENERAL
}

// PoolFromProto is the pool a wire value names; ok is false for an unknown value.
func PoolFromProto(p accountingv1.Pool) (ledger.Pool, bool) { return pools.toDomain(p) }

var states = newEnum(
	pair[ledger.ReservationState, accountingv1.ReservationState]{ledger.StateHeld, accountingv1.ReservationState_RESERVATION_STATE_HELD},
	pair[ledger.ReservationState, accountingv1.ReservationState]{ledger.StateCommitted, accountingv1.ReservationState_RESERVATION_STATE_COMMITTED},
	pair[ledger.ReservationState, accountingv1.ReservationState]{ledger.StateReleased, accountingv1.ReservationState_RESERVATION_STATE_RELEASED},
	pair[ledger.ReservationState, accountingv1.ReservationState]{ledger.StateExpired, accountingv1.ReservationState_RESERVATION_STATE_EXPIRED},
)

// StateToProto is a reservation state on the wire (UNSPECIFIED for an unknown one).
func StateToProto(s ledger.ReservationState) accountingv1.ReservationState {
	w, _ := states.toWire(s)
	return w
}

// StateFromProto is the state a wire value names (0 for an unknown one).
func StateFromProto(s accountingv1.ReservationState) ledger.ReservationState {
	d, _ := states.toDomain(s)
	return d
}

var changeKinds = newEnum(
	pair[ledger.ChangeKind, accountingv1.ChangeKind]{ledger.ChangeReset, accountingv1.ChangeKind_CHANGE_KIND_RESET},
	pair[ledger.ChangeKind, accountingv1.ChangeKind]{ledger.ChangeKey, accountingv1.ChangeKind_CHANGE_KIND_KEY},
	pair[ledger.ChangeKind, accountingv1.ChangeKind]{ledger.ChangeAccount, accountingv1.ChangeKind_CHANGE_KIND_ACCOUNT},
)

// ChangeToProto is a cache change on the wire. A kind the contract cannot describe
// becomes a reset: the receiver drops everything rather than miss a change.
func ChangeToProto(c ledger.Change) *accountingv1.WatchChangesResponse {
	kind, ok := changeKinds.toWire(c.Kind)
	if !ok {
		kind = accountingv1.ChangeKind_CHANGE_KIND_RESET
	}
	return &accountingv1.WatchChangesResponse{Kind: kind, KeyId: c.KeyID, AccountId: c.AccountID}
}

// ChangeFromProto is the change a wire message describes; an unknown kind is a reset.
func ChangeFromProto(c *accountingv1.WatchChangesResponse) ledger.Change {
	kind, ok := changeKinds.toDomain(c.GetKind())
	if !ok {
		kind = ledger.ChangeReset
	}
	return ledger.Change{Kind: kind, KeyID: c.GetKeyId(), AccountID: c.GetAccountId()}
}

var usageGroups = newEnum(
	pair[ledger.UsageGroup, accountingv1.UsageGroup]{ledger.ByModel, accountingv1.UsageGroup_USAGE_GROUP_MODEL},
	pair[ledger.UsageGroup, accountingv1.UsageGroup]{ledger.ByKey, accountingv1.UsageGroup_USAGE_GROUP_KEY},
	pair[ledger.UsageGroup, accountingv1.UsageGroup]{ledger.ByDay, accountingv1.UsageGroup_USAGE_GROUP_DAY},
	pair[ledger.UsageGroup, accountingv1.UsageGroup]{ledger.ByChannel, accountingv1.UsageGroup_USAGE_GROUP_CHANNEL},
	pair[ledger.UsageGroup, accountingv1.UsageGroup]{ledger.ByProject, accountingv1.UsageGroup_USAGE_GROUP_PROJECT},
)

// UsageGroupToProto is a report grouping on the wire.
func UsageGroupToProto(g ledger.UsageGroup) accountingv1.UsageGroup {
	w, _ := usageGroups.toWire(g)
	return w
}

// UsageGroupFromProto is the grouping a wire value asks for: unspecified means by model;
// ok is false for a value this side does not know.
func UsageGroupFromProto(g accountingv1.UsageGroup) (ledger.UsageGroup, bool) {
	if g == accountingv1.UsageGroup_USAGE_GROUP_UNSPECIFIED {
		return ledger.ByModel, true
	}
	return usageGroups.toDomain(g)
}

var entryKinds = newEnum(
	pair[ledger.EntryKind, accountingv1.EntryKind]{ledger.EntryTopUp, accountingv1.EntryKind_ENTRY_KIND_TOP_UP},
	pair[ledger.EntryKind, accountingv1.EntryKind]{ledger.EntryCharge, accountingv1.EntryKind_ENTRY_KIND_CHARGE},
)

// EntryKindToProto is a ledger entry's kind on the wire.
func EntryKindToProto(k ledger.EntryKind) accountingv1.EntryKind {
	w, _ := entryKinds.toWire(k)
	return w
}

// EntryKindFromProto is the kind a wire value names ("" for an unknown one); its string
// is the name gatewayctl and the console print ("top_up", "charge").
func EntryKindFromProto(k accountingv1.EntryKind) ledger.EntryKind {
	d, _ := entryKinds.toDomain(k)
	return d
}
