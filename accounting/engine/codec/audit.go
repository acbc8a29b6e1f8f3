package codec

import (
	"github.com/llmgw/gateway/accounting/engine/machine"
	journalv1 "github.com/llmgw/gateway/proto/accounting/journal/v1"
)

// The audit record, each way. Before and after travel as their JSON bytes; nil and
// empty are both none.

func audited(en *enc, e machine.Audited) *journalv1.Audited {
	en.buf = make([]byte, 0, textSize(e.Actor, e.Via, e.Action, e.Target, e.AccountID))
	return &journalv1.Audited{Actor: en.text(e.Actor), Via: en.text(e.Via), Action: en.text(e.Action),
		Target: en.id(e.Target), AccountId: en.id(e.AccountID), Before: e.Before, After: e.After, At: en.time(e.At)}
}

func auditedEvent(d *dec, v *journalv1.Audited) machine.Audited {
	d.known(v)
	return machine.Audited{Actor: string(v.Actor), Via: string(v.Via), Action: string(v.Action), Target: d.id(v.Target),
		AccountID: d.id(v.AccountId), Before: rawJSON(v.Before), After: rawJSON(v.After), At: decodeTime(v.At)}
}

// rawJSON is b (proto.Unmarshal copied it out of the record), nil when empty.
func rawJSON(b []byte) []byte {
	if len(b) == 0 {
		return nil
	}
	return b
}
