package catalog

import (
	"strings"
	"testing"
)

// TestRateCardRefusals: an unknown field or a negative price anywhere in a rate card is
// refused, naming the model and the field.
func TestRateCardRefusals(t *testing.T) {
	doc := `
models:
  - id: typo
    kind: chat
    max_output_tokens: 10
    prices: {input_per_mtok: 1, output_per_mtok: 2, cache_reed_per_mtok: 3}
  - id: tiertypo
    kind: chat
    max_output_tokens: 10
    prices: {input_per_mtok: 1, output_per_mtok: 2, service_tiers: {priority: {inptu_per_mtok: 2}}}
  - id: neg
    kind: chat
    max_output_tokens: 10
    prices:
      input_per_mtok: 1
      output_per_mtok: 2
      cache_write_1h_per_mtok: -1
      long_context: {above_input_tokens: 0, output_per_mtok: -2}
      service_tiers: {priority: {cache_read_per_mtok: -3}, auto: {input_per_mtok: 1}, standard: {input_per_mtok: 1}}
      inference_geo: {us: {audio_output_per_mtok: -4}, eu: {output_per_mtok: 1000000000001}}
  - id: embedcache
    kind: embeddings
    prices: {input_per_mtok: 1, cache_read_per_mtok: 1}
  - id: freecache
    kind: chat
    free: true
    max_output_tokens: 10
    prices: {cache_read_per_mtok: 1}
`
	_, err := Parse([]byte(doc), demoEnv, noFiles)
	if err == nil {
		t.Fatal("broken rate cards loaded")
	}
	msg := err.Error()
	for _, want := range []string{
		`models[0] (typo): json: unknown field "cache_reed_per_mtok"`,
		`models[1] (tiertypo): json: unknown field "inptu_per_mtok"`,
		`models[2] (neg): prices.cache_write_1h_per_mtok must be between 0 and 1000000000000`,
		`models[2] (neg): prices.long_context.output_per_mtok must be between 0 and 1000000000000`,
		`models[2] (neg): prices.long_context.above_input_tokens must be > 0`,
		`models[2] (neg): prices.service_tiers.priority.cache_read_per_mtok must be between 0 and 1000000000000`,
		`models[2] (neg): prices.inference_geo.us.audio_output_per_mtok must be between 0 and 1000000000000`,
		`models[2] (neg): prices.inference_geo.eu.output_per_mtok must be between 0 and 1000000000000`,
		`models[2] (neg): prices.service_tiers.auto: "auto" is not a tier of its own`,
		`models[2] (neg): prices.service_tiers.standard: "standard" is not a tier of its own`,
		`models[3] (embedcache): cache, audio, image, long-context, tier and region prices apply to chat models only`,
		`models[4] (freecache): a free model carries no prices (prices.cache_read_per_mtok is set)`,
	} {
		if !strings.Contains(msg, want) {
			t.Errorf("error lacks %q:\n%s", want, msg)
		}
	}
}

// TestDemoRateCards: the demo catalog's rate cards are LOCAL-STACK.md's.
func TestDemoRateCards(t *testing.T) {
	c := loadDemo(t)
	m, ok := c.Model("demo-cached")
	if !ok || !m.PriceComplete() || m.MaxOutputTokens != 4096 || m.Channels()[0].Format != Format("openai") {
		t.Fatalf("demo-cached = %+v", m)
	}
	p := m.Prices
	if *p.CacheReadPerMTok != 100_000 || *p.CacheWritePerMTok != 1_250_000 || p.CacheWrite1hPerMTok != nil ||
		*p.AudioInputPerMTok != 10_000_000 || *p.AudioOutputPerMTok != 20_000_000 {
		t.Errorf("demo-cached base = %+v", p.Rates)
	}
	if pr, ok := p.Tier("priority"); !ok || *pr.InputPerMTok != 2_000_000 || *pr.OutputPerMTok != 4_000_000 || *pr.CacheReadPerMTok != 200_000 || pr.CacheWritePerMTok != nil {
		t.Errorf("priority = %+v", pr)
	}
	if fl, ok := p.Tier("flex"); !ok || *fl.InputPerMTok != 500_000 || *fl.OutputPerMTok != 1_000_000 || *fl.CacheReadPerMTok != 50_000 {
		t.Errorf("flex = %+v", fl)
	}
	if lc := p.LongContext; lc == nil || lc.AboveInputTokens != 1000 || *lc.InputPerMTok != 2_000_000 || *lc.OutputPerMTok != 3_000_000 || *lc.CacheReadPerMTok != 200_000 {
		t.Errorf("long_context = %+v", lc)
	}
	m, ok = c.Model("demo-claude-cached")
	if !ok || m.Kind != KindMessages || m.MaxOutputTokens != 8192 || m.Channels()[0].Format != Format("anthropic") {
		t.Fatalf("demo-claude-cached = %+v", m)
	}
	p = m.Prices
	if *p.InputPerMTok != 3_000_000 || *p.OutputPerMTok != 15_000_000 || *p.CacheReadPerMTok != 300_000 ||
		*p.CacheWritePerMTok != 3_750_000 || *p.CacheWrite1hPerMTok != 6_000_000 || len(p.ServiceTiers) != 0 {
		t.Errorf("demo-claude-cached base = %+v", p.Rates)
	}
	us, ok := p.Geo("us")
	if !ok || *us.InputPerMTok != 3_300_000 || *us.OutputPerMTok != 16_500_000 || *us.CacheReadPerMTok != 330_000 ||
		*us.CacheWritePerMTok != 4_125_000 || *us.CacheWrite1hPerMTok != 6_600_000 {
		t.Errorf("us = %+v", us)
	}
}
