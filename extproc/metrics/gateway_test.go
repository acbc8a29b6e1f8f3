package metrics_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/llmgw/gateway/extproc/internal/replay"
	"github.com/llmgw/gateway/extproc/lifecycle"
	"github.com/llmgw/gateway/extproc/metrics"
)

// committed is the record of a request on demo-chat whose commit of charged landed,
// billed to an account of tier.
func committed(tier string, charged int64) lifecycle.Record {
	rec := lifecycle.Record{Account: "a1", KeyID: "k1", Tier: tier}
	rec.Endpoint = "/v1/chat/completions"
	rec.Model = "demo-chat"
	rec.Settlement = lifecycle.Settlement{Reservation: "res-" + tier, HoldMicros: charged, Outcome: lifecycle.OutcomeCommit,
		ActualMicros: charged, ChargedMicros: charged}
	return rec
}

// Spend per tier keeps its label set bounded: the first MaxTierLabels tiers by name,
// every later one as "other", and the money adds up either way.
func TestSpendByTierIsBounded(t *testing.T) {
	m := metrics.New(replay.DemoCatalog(t))
	n := metrics.MaxTierLabels + 5
	for i := range n {
		m.Observe(committed(fmt.Sprint("tier", i), 100))
		m.Observe(committed(fmt.Sprint("tier", i), 10))
	}
	m.Observe(committed("", 1))
	if got := count(t, m, "gateway_spend_micros_total"); got != metrics.MaxTierLabels+2 {
		t.Errorf("%d spend series, want %d tiers, other and none:\n%s", got, metrics.MaxTierLabels, scrape(t, m))
	}
	body := scrape(t, m)
	for _, want := range []string{
		`gateway_spend_micros_total{model="demo-chat",tier="tier0"} 110` + "\n",
		fmt.Sprintf(`gateway_spend_micros_total{model="demo-chat",tier="tier%d"} 110`, metrics.MaxTierLabels-1) + "\n",
		fmt.Sprintf(`gateway_spend_micros_total{model="demo-chat",tier="other"} %d`, 5*110) + "\n",
		`gateway_spend_micros_total{model="demo-chat",tier="none"} 1` + "\n",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	if strings.Contains(body, fmt.Sprintf(`tier="tier%d"`, metrics.MaxTierLabels)) {
		t.Errorf("tier %d has a series of its own", metrics.MaxTierLabels)
	}
}

// The settlement counts are read from the lifecycle at each scrape.
func TestSettlementRetriesServed(t *testing.T) {
	m := metrics.New(nil)
	var st lifecycle.SettleStats
	m.WatchSettlements(func() lifecycle.SettleStats { return st })
	for _, want := range []lifecycle.SettleStats{{}, {Retries: 7, Retrying: 2, GivenUp: 1}, {Retries: 9, Retrying: 0, GivenUp: 1}} {
		st = want
		body := scrape(t, m)
		for _, line := range []string{fmt.Sprint("gateway_settlement_retries_total ", want.Retries),
			fmt.Sprint("gateway_settlements_retrying ", want.Retrying), fmt.Sprint("gateway_settlements_given_up_total ", want.GivenUp)} {
			if !strings.Contains(body, line+"\n") {
				t.Errorf("/metrics lacks %q", line)
			}
		}
	}
}
