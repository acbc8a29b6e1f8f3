// Package codec turns the ledger state machine's events into the bytes of one journal
// record and back: Encode appends an event's record body, Decode reads one. The bytes
// are a protobuf message, accounting.journal.v1.Event (proto/accounting/journal/v1),
// whose schema says how each value travels: UUID ids as 16 bytes, other ids and all
// text unchanged, times as microseconds since the epoch.
//
// Decode(Encode(e)) is e for every event the machine makes: times are UTC with
// microsecond precision, and a decoded time is UTC (a time with another location
// decodes as the same instant in UTC; a time finer than a microsecond is refused by
// Encode). Nil and empty lists, hashes and usage maps, nil and zero limits and times
// all stay apart. Equal events encode to equal bytes (a usage's units are sorted by
// name), so a record can be compared as bytes.
//
// It imports only the machine's types, accounting/ledger, the generated journal
// package and the protobuf runtime: no database driver, no gRPC.
package codec

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"google.golang.org/protobuf/proto"

	"github.com/llmgw/gateway/accounting/engine/machine"
	"github.com/llmgw/gateway/accounting/ledger"
	journalv1 "github.com/llmgw/gateway/proto/accounting/journal/v1"
)

// Encode appends the record body of e to dst. It fails for a value that is not one of
// the machine's event types (a pointer to one included) and for a time finer than a
// microsecond.
func Encode(dst []byte, e machine.Event) ([]byte, error) {
	m, err := message(e)
	if err != nil {
		return dst, err
	}
	return proto.MarshalOptions{}.MarshalAppend(dst, m)
}

// Decode reads one record body. The event shares no memory with b.
func Decode(b []byte) (machine.Event, error) {
	var m journalv1.Event
	if err := proto.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("codec: %w", err)
	}
	return event(&m)
}

// errKind is a record with no event kind set (an empty record); a kind newer than
// this code is an unknown field, errUnknown.
var errKind = errors.New("codec: record holds no event kind this code knows")

// errUnknown is a record with fields this code does not know, written by newer code:
// replaying it without them would rebuild another state than the one that wrote it.
var errUnknown = errors.New("codec: record has fields this code does not know")

// message is e in the schema. The switch lists every event type: a test checks that
// each type declared in the machine package encodes.
func message(e machine.Event) (*journalv1.Event, error) {
	var en enc
	var m journalv1.Event
	switch e := e.(type) {
	case machine.AccountCreated:
		en.buf = make([]byte, 0, textSize(e.ID, e.Tier, e.Label))
		m.Kind = &journalv1.Event_AccountCreated{AccountCreated: &journalv1.AccountCreated{
			Id: en.id(e.ID), Tier: en.text(e.Tier), At: en.time(e.At), Label: en.text(e.Label)}}
	case machine.AccountLabeled:
		en.buf = make([]byte, 0, textSize(e.AccountID, e.Label))
		m.Kind = &journalv1.Event_AccountLabeled{AccountLabeled: &journalv1.AccountLabeled{
			AccountId: en.id(e.AccountID), Label: en.text(e.Label), At: en.time(e.At)}}
	case machine.ToppedUp:
		en.buf = make([]byte, 0, textSize(e.AccountID, e.IdempotencyKey))
		m.Kind = &journalv1.Event_ToppedUp{ToppedUp: &journalv1.ToppedUp{
			AccountId: en.id(e.AccountID), Amount: e.Amount, IdempotencyKey: en.id(e.IdempotencyKey), At: en.time(e.At)}}
	case machine.AccountSuspended:
		en.buf = make([]byte, 0, textSize(e.AccountID))
		m.Kind = &journalv1.Event_AccountSuspended{AccountSuspended: &journalv1.AccountSuspended{
			AccountId: en.id(e.AccountID), Suspended: e.Suspended, At: en.time(e.At)}}
	case machine.TierPut:
		t := e.Tier
		en.buf = make([]byte, 0, textSize(t.Name))
		m.Kind = &journalv1.Event_TierPut{TierPut: &journalv1.TierPut{
			Name: en.text(t.Name), RpmBeforeTopUp: int64(t.RPMBeforeTopUp), RpmAfterTopUp: int64(t.RPMAfterTopUp),
			InFlightGeneral: int64(t.InFlightGeneral), InFlightHighCost: int64(t.InFlightHighCost), At: en.time(e.At)}}
	case machine.KeyCreated:
		m.Kind = &journalv1.Event_KeyCreated{KeyCreated: keyCreated(&en, e)}
	case machine.KeyChanged:
		m.Kind = &journalv1.Event_KeyChanged{KeyChanged: keyChanged(&en, e)}
	case machine.Reserved:
		en.buf = make([]byte, 0, textSize(e.ID, e.RequestID, e.AccountID, e.KeyID, e.Model))
		at := en.time(e.At)
		m.Kind = &journalv1.Event_Reserved{Reserved: &journalv1.Reserved{
			Id: en.id(e.ID), RequestId: en.id(e.RequestID), AccountId: en.id(e.AccountID), KeyId: en.id(e.KeyID),
			Model: en.text(e.Model), Amount: e.Amount, Pool: int64(e.Pool), At: at, ExpiresAfter: en.time(e.ExpiresAt) - at,
			Tokens: e.Tokens}}
	case machine.Committed:
		m.Kind = &journalv1.Event_Committed{Committed: committed(&en, e)}
	case machine.Released:
		en.buf = make([]byte, 0, textSize(e.ReservationID, e.Reason))
		m.Kind = &journalv1.Event_Released{Released: &journalv1.Released{
			ReservationId: en.id(e.ReservationID), State: int64(e.State), Reason: en.text(e.Reason), At: en.time(e.At)}}
	case machine.Renewed:
		en.buf = make([]byte, 0, textSize(e.ReservationID))
		at := en.time(e.At)
		m.Kind = &journalv1.Event_Renewed{Renewed: &journalv1.Renewed{
			ReservationId: en.id(e.ReservationID), ExpiresAfter: en.time(e.ExpiresAt) - at, At: at}}
	case machine.VideoTaskRecorded:
		m.Kind = &journalv1.Event_VideoTaskRecorded{VideoTaskRecorded: videoTask(&en, e.Task)}
	case machine.Forgotten:
		m.Kind = &journalv1.Event_Forgotten{Forgotten: &journalv1.Forgotten{Before: en.time(e.Before), At: en.time(e.At)}}
	case machine.ProjectCreated:
		m.Kind = &journalv1.Event_ProjectCreated{ProjectCreated: projectCreated(&en, e)}
	case machine.ProjectChanged:
		m.Kind = &journalv1.Event_ProjectChanged{ProjectChanged: projectChanged(&en, e)}
	case machine.ProjectDeleted:
		en.buf = make([]byte, 0, textSize(e.ProjectID))
		m.Kind = &journalv1.Event_ProjectDeleted{ProjectDeleted: &journalv1.ProjectDeleted{
			ProjectId: en.id(e.ProjectID), At: en.time(e.At)}}
	case machine.KeyPlaced:
		m.Kind = &journalv1.Event_KeyPlaced{KeyPlaced: keyPlaced(&en, e)}
	case machine.LowBalanceSet:
		m.Kind = &journalv1.Event_LowBalanceSet{LowBalanceSet: lowBalanceSet(&en, e)}
	case machine.Alerted:
		m.Kind = &journalv1.Event_Alerted{Alerted: alerted(&en, e)}
	case machine.Audited:
		m.Kind = &journalv1.Event_Audited{Audited: audited(&en, e)}
	default:
		return nil, fmt.Errorf("codec: %T is not an event of the machine", e)
	}
	return &m, en.err
}

// event is m as the machine's event.
func event(m *journalv1.Event) (machine.Event, error) {
	var d dec
	d.known(m)
	var e machine.Event
	switch k := m.GetKind().(type) {
	case *journalv1.Event_AccountCreated:
		v := k.AccountCreated
		d.known(v)
		e = machine.AccountCreated{ID: d.id(v.Id), Tier: string(v.Tier), Label: string(v.Label), At: decodeTime(v.At)}
	case *journalv1.Event_AccountLabeled:
		v := k.AccountLabeled
		d.known(v)
		e = machine.AccountLabeled{AccountID: d.id(v.AccountId), Label: string(v.Label), At: decodeTime(v.At)}
	case *journalv1.Event_ToppedUp:
		v := k.ToppedUp
		d.known(v)
		e = machine.ToppedUp{AccountID: d.id(v.AccountId), Amount: v.Amount, IdempotencyKey: d.id(v.IdempotencyKey),
			At: decodeTime(v.At)}
	case *journalv1.Event_AccountSuspended:
		v := k.AccountSuspended
		d.known(v)
		e = machine.AccountSuspended{AccountID: d.id(v.AccountId), Suspended: v.Suspended, At: decodeTime(v.At)}
	case *journalv1.Event_TierPut:
		v := k.TierPut
		d.known(v)
		e = machine.TierPut{Tier: ledger.Tier{Name: string(v.Name), RPMBeforeTopUp: int(v.RpmBeforeTopUp),
			RPMAfterTopUp: int(v.RpmAfterTopUp), InFlightGeneral: int(v.InFlightGeneral),
			InFlightHighCost: int(v.InFlightHighCost)}, At: decodeTime(v.At)}
	case *journalv1.Event_KeyCreated:
		e = keyCreatedEvent(&d, k.KeyCreated)
	case *journalv1.Event_KeyChanged:
		e = keyChangedEvent(&d, k.KeyChanged)
	case *journalv1.Event_Reserved:
		v := k.Reserved
		d.known(v)
		e = machine.Reserved{ID: d.id(v.Id), RequestID: d.id(v.RequestId), AccountID: d.id(v.AccountId),
			KeyID: d.id(v.KeyId), Model: string(v.Model), Amount: v.Amount, Pool: ledger.Pool(v.Pool),
			At: decodeTime(v.At), ExpiresAt: decodeTime(v.At + v.ExpiresAfter), Tokens: v.Tokens}
	case *journalv1.Event_Committed:
		e = committedEvent(&d, k.Committed)
	case *journalv1.Event_Released:
		v := k.Released
		d.known(v)
		e = machine.Released{ReservationID: d.id(v.ReservationId), State: ledger.ReservationState(v.State),
			Reason: string(v.Reason), At: decodeTime(v.At)}
	case *journalv1.Event_Renewed:
		v := k.Renewed
		d.known(v)
		e = machine.Renewed{ReservationID: d.id(v.ReservationId), ExpiresAt: decodeTime(v.At + v.ExpiresAfter),
			At: decodeTime(v.At)}
	case *journalv1.Event_VideoTaskRecorded:
		e = machine.VideoTaskRecorded{Task: videoTaskValue(&d, k.VideoTaskRecorded)}
	case *journalv1.Event_Forgotten:
		v := k.Forgotten
		d.known(v)
		e = machine.Forgotten{Before: decodeTime(v.Before), At: decodeTime(v.At)}
	case *journalv1.Event_ProjectCreated:
		e = projectCreatedEvent(&d, k.ProjectCreated)
	case *journalv1.Event_ProjectChanged:
		e = projectChangedEvent(&d, k.ProjectChanged)
	case *journalv1.Event_ProjectDeleted:
		v := k.ProjectDeleted
		d.known(v)
		e = machine.ProjectDeleted{ProjectID: d.id(v.ProjectId), At: decodeTime(v.At)}
	case *journalv1.Event_KeyPlaced:
		e = keyPlacedEvent(&d, k.KeyPlaced)
	case *journalv1.Event_LowBalanceSet:
		e = lowBalanceSetEvent(&d, k.LowBalanceSet)
	case *journalv1.Event_Alerted:
		e = alertedEvent(&d, k.Alerted)
	case *journalv1.Event_Audited:
		e = auditedEvent(&d, k.Audited)
	}
	switch {
	case d.err != nil:
		return nil, d.err
	case e == nil:
		return nil, errKind
	}
	return e, nil
}

// dec keeps the first malformed value met while decoding.
type dec struct{ err error }

// known checks that m has no fields this code does not know; Decode checks every
// message of a record.
func (d *dec) known(m proto.Message) {
	if len(m.ProtoReflect().GetUnknown()) > 0 && d.err == nil {
		d.err = errUnknown
	}
}

func (d *dec) id(b []byte) string {
	s, err := decodeID(b)
	if err != nil && d.err == nil {
		d.err = err
	}
	return s
}

// sortedUnits is units as the schema's list, sorted by name.
func sortedUnits(en *enc, units map[string]int64) []*journalv1.Unit {
	out := make([]*journalv1.Unit, 0, len(units))
	for name, n := range units {
		out = append(out, &journalv1.Unit{Name: en.text(name), Count: n})
	}
	slices.SortFunc(out, func(a, b *journalv1.Unit) int { return strings.Compare(string(a.Name), string(b.Name)) })
	return out
}
