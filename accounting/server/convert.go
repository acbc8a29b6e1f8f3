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
