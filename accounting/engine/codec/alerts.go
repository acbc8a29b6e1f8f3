package codec

import (
	"github.com/llmgw/gateway/accounting/engine/machine"
	journalv1 "github.com/llmgw/gateway/proto/accounting/journal/v1"
)

// The alert events, each way.

func lowBalanceSet(en *enc, e machine.LowBalanceSet) *journalv1.LowBalanceSet {
	en.buf = make([]byte, 0, textSize(e.AccountID))
	return &journalv1.LowBalanceSet{AccountId: en.id(e.AccountID), Threshold: copyPtr(e.Threshold), At: en.time(e.At)}
}

func lowBalanceSetEvent(d *dec, v *journalv1.LowBalanceSet) machine.LowBalanceSet {
	d.known(v)
	return machine.LowBalanceSet{AccountID: d.id(v.AccountId), Threshold: v.Threshold, At: decodeTime(v.At)}
}

func alerted(en *enc, e machine.Alerted) *journalv1.Alerted {
	en.buf = make([]byte, 0, textSize(e.ID, e.Type, e.AccountID, e.KeyID, e.ProjectID, e.Window))
	m := &journalv1.Alerted{
		Id: en.id(e.ID), Type: en.text(e.Type), AccountId: en.id(e.AccountID), KeyId: en.id(e.KeyID),
		ProjectId: en.id(e.ProjectID), Window: en.text(e.Window), Percent: e.Percent, Limit: e.Limit,
		Spent: e.Spent, Threshold: e.Threshold, Available: e.Available, At: en.time(e.At),
	}
	if !e.Start.IsZero() {
		start := en.time(e.Start)
		m.Start = &start
	}
	return m
}

func alertedEvent(d *dec, v *journalv1.Alerted) machine.Alerted {
	d.known(v)
	e := machine.Alerted{
		ID: d.id(v.Id), Type: string(v.Type), AccountID: d.id(v.AccountId), KeyID: d.id(v.KeyId),
		ProjectID: d.id(v.ProjectId), Window: string(v.Window), Percent: v.Percent, Limit: v.Limit,
		Spent: v.Spent, Threshold: v.Threshold, Available: v.Available, At: decodeTime(v.At),
	}
	if v.Start != nil {
		e.Start = decodeTime(*v.Start)
	}
	return e
}
