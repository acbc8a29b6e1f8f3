package codec

import (
	"errors"

	"github.com/llmgw/gateway/accounting/engine/machine"
	"github.com/llmgw/gateway/accounting/ledger"
	journalv1 "github.com/llmgw/gateway/proto/accounting/journal/v1"
)

// The events with nested values or lists, each way.

func keyCreated(en *enc, e machine.KeyCreated) *journalv1.KeyCreated {
	en.buf = make([]byte, 0, textSize(e.ID, e.AccountID, e.Name, e.Prefix)+textSize(e.AllowedModels...))
	models, empty := en.texts(e.AllowedModels)
	return &journalv1.KeyCreated{
		Id: en.id(e.ID), AccountId: en.id(e.AccountID), Name: en.text(e.Name), Prefix: en.text(e.Prefix),
		Hash: e.Hash, AllowedModels: models, EmptyAllowedModels: empty,
		DailyLimit: copyPtr(e.DailyLimit), MonthlyLimit: copyPtr(e.MonthlyLimit), ExpiresAt: en.timePtr(e.ExpiresAt),
		AdminCreated: e.AdminCreated, At: en.time(e.At),
	}
}

func keyCreatedEvent(d *dec, v *journalv1.KeyCreated) machine.KeyCreated {
	d.known(v)
	return machine.KeyCreated{
		ID: d.id(v.Id), AccountID: d.id(v.AccountId), Name: string(v.Name), Prefix: string(v.Prefix),
		Hash: v.Hash, AllowedModels: decodeTexts(v.AllowedModels, v.EmptyAllowedModels),
		DailyLimit: v.DailyLimit, MonthlyLimit: v.MonthlyLimit, ExpiresAt: decodeTimePtr(v.ExpiresAt),
		AdminCreated: v.AdminCreated, At: decodeTime(v.At),
	}
}

func keyChanged(en *enc, e machine.KeyChanged) *journalv1.KeyChanged {
	en.buf = make([]byte, 0, textSize(e.KeyID, e.Name)+textSize(e.AllowedModels...))
	models, empty := en.texts(e.AllowedModels)
	return &journalv1.KeyChanged{
		KeyId: en.id(e.KeyID), Name: en.text(e.Name), AllowedModels: models, EmptyAllowedModels: empty,
		DailyLimit: copyPtr(e.DailyLimit), MonthlyLimit: copyPtr(e.MonthlyLimit), ExpiresAt: en.timePtr(e.ExpiresAt),
		Disabled: e.Disabled, RevokedAt: en.timePtr(e.RevokedAt), At: en.time(e.At),
	}
}

func keyChangedEvent(d *dec, v *journalv1.KeyChanged) machine.KeyChanged {
	d.known(v)
	return machine.KeyChanged{
		KeyID: d.id(v.KeyId), Name: string(v.Name), AllowedModels: decodeTexts(v.AllowedModels, v.EmptyAllowedModels),
		DailyLimit: v.DailyLimit, MonthlyLimit: v.MonthlyLimit, ExpiresAt: decodeTimePtr(v.ExpiresAt),
		Disabled: v.Disabled, RevokedAt: decodeTimePtr(v.RevokedAt), At: decodeTime(v.At),
	}
}

func committed(en *enc, e machine.Committed) *journalv1.Committed {
	u := e.Usage
	n := textSize(e.ReservationID, e.UpstreamModel, e.Channel, u.ServiceTier)
	for name := range u.Units {
		n += len(name)
	}
	for _, c := range u.Components {
		n += len(c.Name)
	}
	en.buf = make([]byte, 0, n)
	usage := &journalv1.Usage{
		InputTokens: u.InputTokens, OutputTokens: u.OutputTokens,
		EmptyUnits: u.Units != nil && len(u.Units) == 0, EmptyComponents: u.Components != nil && len(u.Components) == 0,
		ServiceTier: en.text(u.ServiceTier),
	}
	if len(u.Units) > 0 {
		usage.Units = sortedUnits(en, u.Units)
	}
	if len(u.Components) > 0 {
		usage.Components = make([]*journalv1.Component, len(u.Components))
		for i, c := range u.Components {
			usage.Components[i] = &journalv1.Component{Name: en.text(c.Name), Units: c.Units, PricePerMtok: c.PricePerMTok, Amount: c.Amount}
		}
	}
	return &journalv1.Committed{
		ReservationId: en.id(e.ReservationID), Actual: e.Actual, Uncharged: e.Actual - e.Charged, Usage: usage,
		UpstreamModel: en.text(e.UpstreamModel), Channel: en.text(e.Channel), At: en.time(e.At),
	}
}

// errUnits is a usage naming one unit twice.
var errUnits = errors.New("codec: usage names a unit twice")

func committedEvent(d *dec, v *journalv1.Committed) machine.Committed {
	d.known(v)
	u := v.GetUsage()
	if u != nil {
		d.known(u)
	}
	usage := ledger.Usage{InputTokens: u.GetInputTokens(), OutputTokens: u.GetOutputTokens(), ServiceTier: string(u.GetServiceTier())}
	if units := u.GetUnits(); len(units) > 0 {
		usage.Units = make(map[string]int64, len(units))
		for _, unit := range units {
			d.known(unit)
			name := string(unit.GetName())
			if _, dup := usage.Units[name]; dup && d.err == nil {
				d.err = errUnits
			}
			usage.Units[name] = unit.GetCount()
		}
	} else if u.GetEmptyUnits() {
		usage.Units = map[string]int64{}
	}
	if comps := u.GetComponents(); len(comps) > 0 {
		usage.Components = make([]ledger.Component, len(comps))
		for i, c := range comps {
			d.known(c)
			usage.Components[i] = ledger.Component{Name: string(c.GetName()), Units: c.GetUnits(), PricePerMTok: c.GetPricePerMtok(), Amount: c.GetAmount()}
		}
	} else if u.GetEmptyComponents() {
		usage.Components = []ledger.Component{}
	}
	return machine.Committed{
		ReservationID: d.id(v.ReservationId), Actual: v.Actual, Charged: v.Actual - v.Uncharged, Usage: usage,
		UpstreamModel: string(v.UpstreamModel), Channel: string(v.Channel), At: decodeTime(v.At),
	}
}

func videoTask(en *enc, t ledger.VideoTask) *journalv1.VideoTaskRecorded {
	en.buf = make([]byte, 0, textSize(t.TaskID, t.AccountID, t.KeyID, t.Model, t.Origin.Channel, t.Origin.UpstreamTaskID))
	return &journalv1.VideoTaskRecorded{
		TaskId: en.id(t.TaskID), AccountId: en.id(t.AccountID), KeyId: en.id(t.KeyID), AdminCreatedKey: t.AdminCreatedKey,
		Model: en.text(t.Model), CreatedAt: en.time(t.CreatedAt),
		Channel: en.text(t.Origin.Channel), UpstreamTaskId: en.id(t.Origin.UpstreamTaskID),
	}
}

func videoTaskValue(d *dec, v *journalv1.VideoTaskRecorded) ledger.VideoTask {
	d.known(v)
	return ledger.VideoTask{
		TaskID: d.id(v.TaskId), AccountID: d.id(v.AccountId), KeyID: d.id(v.KeyId), AdminCreatedKey: v.AdminCreatedKey,
		Model: string(v.Model), CreatedAt: decodeTime(v.CreatedAt),
		Origin: ledger.TaskOrigin{Channel: string(v.Channel), UpstreamTaskID: d.id(v.UpstreamTaskId)},
	}
}
