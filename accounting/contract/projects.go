package contract

import (
	"github.com/llmgw/gateway/accounting/ledger"
	accountingv1 "github.com/llmgw/gateway/proto/accounting/v1"
)

// ProjectToProto is a project as the admin API shows it.
func ProjectToProto(p ledger.Project) *accountingv1.Project {
	return &accountingv1.Project{
		Id:                 p.ID,
		AccountId:          p.AccountID,
		ParentId:           p.ParentID,
		Name:               p.Name,
		DailyLimitMicros:   copyMicros(p.DailyLimit),
		MonthlyLimitMicros: copyMicros(p.MonthlyLimit),
		LimitMicros:        copyMicros(p.Limit),
		Rpm:                copyMicros(p.RPM),
		Tpm:                copyMicros(p.TPM),
		Models:             append([]string(nil), p.Models...),
		SpentTodayMicros:   p.SpentToday,
		SpentMonthMicros:   p.SpentMonth,
		SpentMicros:        p.Spent,
		ReservedMicros:     p.Reserved,
		CreatedAt:          Timestamp(p.CreatedAt),
	}
}

// ProjectFromProto is a project read from the admin API (nil models: every model).
func ProjectFromProto(p *accountingv1.Project) ledger.Project {
	v := ledger.Project{
		ID:           p.GetId(),
		AccountID:    p.GetAccountId(),
		ParentID:     p.GetParentId(),
		Name:         p.GetName(),
		DailyLimit:   copyMicros(p.DailyLimitMicros),
		MonthlyLimit: copyMicros(p.MonthlyLimitMicros),
		Limit:        copyMicros(p.LimitMicros),
		RPM:          copyMicros(p.Rpm),
		TPM:          copyMicros(p.Tpm),
		SpentToday:   p.GetSpentTodayMicros(),
		SpentMonth:   p.GetSpentMonthMicros(),
		Spent:        p.GetSpentMicros(),
		Reserved:     p.GetReservedMicros(),
	}
	if len(p.GetModels()) > 0 {
		v.Models = append([]string(nil), p.GetModels()...)
	}
	if p.GetCreatedAt() != nil {
		v.CreatedAt = p.GetCreatedAt().AsTime()
	}
	return v
}
