package metrics

import (
	"sync"

	"github.com/llmgw/gateway/extproc/lifecycle"
	"github.com/prometheus/client_golang/prometheus"
)

// MaxTierLabels bounds the tier label of gateway_spend_micros_total: the first tiers
// seen keep their name, any tier beyond is "other". Tiers are an operator's list (the
// ledger's tiers), a handful in practice.
const MaxTierLabels = 16

// tierLabels hands out the tier label values.
type tierLabels struct {
	mu   sync.Mutex
	seen map[string]bool
}

// label returns tier's label value: NoneLbl when there is none, the tier while it is
// one of the first MaxTierLabels seen, "other" otherwise.
func (t *tierLabels) label(tier string) string {
	if tier == "" {
		return NoneLbl
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.seen[tier] {
		return tier
	}
	if len(t.seen) >= MaxTierLabels {
		return "other"
	}
	if t.seen == nil {
		t.seen = map[string]bool{}
	}
	t.seen[tier] = true
	return tier
}

// WatchSettlements exports the settlements' retries, read from stats at each scrape
// (lifecycle.Service.SettleStats): gateway_settlement_retries_total (commit and release
// calls tried again after a failure), gateway_settlements_retrying (settlements being
// retried now: accounting away or failing them) and gateway_settlements_given_up_total
// (settlements accounting kept failing for a lease: their holds expire uncharged).
func (m *Metrics) WatchSettlements(stats func() lifecycle.SettleStats) {
	m.reg.MustRegister(
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "gateway_settlement_retries_total",
			Help: "Commit and release calls extproc made again after a failed attempt (accounting unreachable, busy or failing).",
		}, func() float64 { return float64(stats().Retries) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "gateway_settlements_retrying",
			Help: "Settlements whose first attempt failed and that extproc is still trying to land.",
		}, func() float64 { return float64(stats().Retrying) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "gateway_settlements_given_up_total",
			Help: "Settlements given up after accounting kept failing them for a lease: their holds expire and nothing is charged.",
		}, func() float64 { return float64(stats().GivenUp) }))
}
