package server

import (
	"time"

	"github.com/llmgw/gateway/accounting/ledger"
	accountingv1 "github.com/llmgw/gateway/proto/accounting/v1"
)

// Records and enums are converted by accounting/contract; this file reads the requests
// whose validation is the server's own.

func copyMicros(p *ledger.Micros) *int64 {
	if p == nil {
		return nil
	}
	v := *p
	return &v
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
	if err := limitUpdates(limitField{req.DailyLimit, &u.DailyLimit, "daily_limit"},
		limitField{req.MonthlyLimit, &u.MonthlyLimit, "monthly_limit"}); err != nil {
		return u, err
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
	if req.ProjectId != nil {
		u.ProjectID = ledger.To(req.GetProjectId())
	}
	u.RPM, u.TPM = rateUpdate(req.Rpm), rateUpdate(req.Tpm)
	return u, nil
}

// rateUpdate reads a rate limit's change (the machine checks its range).
func rateUpdate(in *accountingv1.RateUpdate) ledger.Set[*int64] {
	if in == nil {
		return ledger.Set[*int64]{}
	}
	return ledger.To(copyMicros(in.Value))
}

// limitUpdates reads the spend limits' changes, refusing a negative one by its field.
func limitUpdates(lims ...limitField) error {
	for _, lim := range lims {
		if lim.in == nil {
			continue
		}
		if lim.in.Micros != nil && lim.in.GetMicros() < 0 {
			return invalidArgument(lim.name + " must not be negative")
		}
		*lim.out = ledger.To(copyMicros(lim.in.Micros))
	}
	return nil
}

type limitField struct {
	in   *accountingv1.LimitUpdate
	out  *ledger.Set[*ledger.Micros]
	name string
}

// checkLimits refuses a negative limit by its field's name.
func checkLimits(names []string, limits ...*int64) error {
	for i, l := range limits {
		if l != nil && *l < 0 {
			return invalidArgument(names[i] + " must not be negative")
		}
	}
	return nil
}

// newProjectFromProto reads a CreateProjectRequest.
func newProjectFromProto(req *accountingv1.CreateProjectRequest) (ledger.NewProject, error) {
	np := ledger.NewProject{
		AccountID: req.GetAccountId(), ParentID: req.GetParentId(), Name: req.GetName(),
		DailyLimit: copyMicros(req.DailyLimitMicros), MonthlyLimit: copyMicros(req.MonthlyLimitMicros),
		Limit: copyMicros(req.LimitMicros), RPM: copyMicros(req.Rpm), TPM: copyMicros(req.Tpm),
	}
	if req.GetAccountId() == "" {
		return np, invalidArgument("account_id is required")
	}
	if err := ledger.CheckProjectName(np.Name); err != nil {
		return np, invalidArgument(err.Error())
	}
	if err := checkLimits([]string{"daily_limit_micros", "monthly_limit_micros", "limit_micros"},
		np.DailyLimit, np.MonthlyLimit, np.Limit); err != nil {
		return np, err
	}
	if len(req.GetModels()) > 0 {
		np.Models = append([]string(nil), req.GetModels()...)
		if err := ledger.CheckAllowedModels(np.Models); err != nil {
			return np, invalidArgument(err.Error())
		}
	}
	return np, nil
}

// projectUpdateFromProto reads which settings an UpdateProjectRequest changes.
func projectUpdateFromProto(req *accountingv1.UpdateProjectRequest) (ledger.ProjectUpdate, error) {
	u := ledger.ProjectUpdate{ID: req.GetProjectId()}
	if u.ID == "" {
		return u, invalidArgument("project_id is required")
	}
	if req.Name != nil {
		if err := ledger.CheckProjectName(req.GetName()); err != nil {
			return u, invalidArgument(err.Error())
		}
		u.Name = ledger.To(req.GetName())
	}
	if err := limitUpdates(limitField{req.DailyLimit, &u.DailyLimit, "daily_limit"},
		limitField{req.MonthlyLimit, &u.MonthlyLimit, "monthly_limit"}, limitField{req.Limit, &u.Limit, "limit"}); err != nil {
		return u, err
	}
	u.RPM, u.TPM = rateUpdate(req.Rpm), rateUpdate(req.Tpm)
	if req.Models != nil {
		var models []string
		if m := req.GetModels().GetModels(); len(m) > 0 {
			models = append(models, m...)
			if err := ledger.CheckAllowedModels(models); err != nil {
				return u, invalidArgument(err.Error())
			}
		}
		u.Models = ledger.To(models)
	}
	return u, nil
}
