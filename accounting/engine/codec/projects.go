package codec

import (
	"github.com/llmgw/gateway/accounting/engine/machine"
	journalv1 "github.com/llmgw/gateway/proto/accounting/journal/v1"
)

// The project events, each way.

func projectCreated(en *enc, e machine.ProjectCreated) *journalv1.ProjectCreated {
	en.buf = make([]byte, 0, textSize(e.ID, e.AccountID, e.ParentID, e.Name)+textSize(e.Models...))
	models, empty := en.texts(e.Models)
	return &journalv1.ProjectCreated{
		Id: en.id(e.ID), AccountId: en.id(e.AccountID), ParentId: en.id(e.ParentID), Name: en.text(e.Name),
		DailyLimit: copyPtr(e.DailyLimit), MonthlyLimit: copyPtr(e.MonthlyLimit), Limit: copyPtr(e.Limit),
		Rpm: copyPtr(e.RPM), Tpm: copyPtr(e.TPM), Models: models, EmptyModels: empty, At: en.time(e.At),
	}
}

func projectCreatedEvent(d *dec, v *journalv1.ProjectCreated) machine.ProjectCreated {
	d.known(v)
	return machine.ProjectCreated{
		ID: d.id(v.Id), AccountID: d.id(v.AccountId), ParentID: d.id(v.ParentId), Name: string(v.Name),
		DailyLimit: v.DailyLimit, MonthlyLimit: v.MonthlyLimit, Limit: v.Limit, RPM: v.Rpm, TPM: v.Tpm,
		Models: decodeTexts(v.Models, v.EmptyModels), At: decodeTime(v.At),
	}
}

func projectChanged(en *enc, e machine.ProjectChanged) *journalv1.ProjectChanged {
	en.buf = make([]byte, 0, textSize(e.ProjectID, e.Name)+textSize(e.Models...))
	models, empty := en.texts(e.Models)
	return &journalv1.ProjectChanged{
		ProjectId: en.id(e.ProjectID), Name: en.text(e.Name), DailyLimit: copyPtr(e.DailyLimit),
		MonthlyLimit: copyPtr(e.MonthlyLimit), Limit: copyPtr(e.Limit), Rpm: copyPtr(e.RPM), Tpm: copyPtr(e.TPM),
		Models: models, EmptyModels: empty, At: en.time(e.At),
	}
}

func projectChangedEvent(d *dec, v *journalv1.ProjectChanged) machine.ProjectChanged {
	d.known(v)
	return machine.ProjectChanged{
		ProjectID: d.id(v.ProjectId), Name: string(v.Name), DailyLimit: v.DailyLimit, MonthlyLimit: v.MonthlyLimit,
		Limit: v.Limit, RPM: v.Rpm, TPM: v.Tpm, Models: decodeTexts(v.Models, v.EmptyModels), At: decodeTime(v.At),
	}
}

func keyPlaced(en *enc, e machine.KeyPlaced) *journalv1.KeyPlaced {
	en.buf = make([]byte, 0, textSize(e.KeyID, e.ProjectID))
	return &journalv1.KeyPlaced{KeyId: en.id(e.KeyID), ProjectId: en.id(e.ProjectID), Rpm: copyPtr(e.RPM),
		Tpm: copyPtr(e.TPM), At: en.time(e.At)}
}

func keyPlacedEvent(d *dec, v *journalv1.KeyPlaced) machine.KeyPlaced {
	d.known(v)
	return machine.KeyPlaced{KeyID: d.id(v.KeyId), ProjectID: d.id(v.ProjectId), RPM: v.Rpm, TPM: v.Tpm,
		At: decodeTime(v.At)}
}
