package console

import (
	"strings"

	"github.com/llmgw/gateway/accounting/ledger"
	accountingv1 "github.com/llmgw/gateway/proto/accounting/v1"
)

// A key's settings in words, as the account page shows them next to the form that
// edits them.

// allowlistText is "all models" for an empty allowlist, else its models.
func allowlistText(models []string) string {
	if len(models) == 0 {
		return "all models"
	}
	return strings.Join(models, ", ")
}

// limitsText is a key's spend limits: "daily 1.000000 credits, monthly none".
func limitsText(k *accountingv1.Key) string {
	limit := func(m *int64) string {
		if m == nil {
			return "none"
		}
		return ledger.FormatCredits6(*m) + " credits"
	}
	return "daily " + limit(k.DailyLimitMicros) + ", monthly " + limit(k.MonthlyLimitMicros)
}

// expiryText is "expires 2031-01-02" (UTC), or "no expiry".
func expiryText(k *accountingv1.Key) string {
	if k.GetExpiresAt() == nil {
		return "no expiry"
	}
	return "expires " + k.GetExpiresAt().AsTime().UTC().Format("2006-01-02")
}

// keyNames names each of an account's keys for the reports: its name, else (an unnamed
// key) its prefix.
func keyNames(keys []*accountingv1.Key) map[string]string {
	names := make(map[string]string, len(keys))
	for _, k := range keys {
		names[k.GetId()] = k.GetName()
		if names[k.GetId()] == "" {
			names[k.GetId()] = "unnamed " + k.GetPrefix()
		}
	}
	return names
}
