package catalog

import "slices"

// Rates are the token prices of one level of a model's rate card, in micro-credits per
// million tokens; a nil field is not set at that level. At the base level an absent
// cache, audio or image input price falls back to InputPerMTok and an absent audio
// output price to OutputPerMTok (pricing resolves the card), so a catalog that sets
// only input and output prices keeps its meaning.
type Rates struct {
	InputPerMTok  *int64 `json:"input_per_mtok,omitempty"`
	OutputPerMTok *int64 `json:"output_per_mtok,omitempty"`
	// CacheReadPerMTok prices input tokens served from the provider's prompt cache.
	CacheReadPerMTok *int64 `json:"cache_read_per_mtok,omitempty"`
	// CacheWritePerMTok prices input tokens written to the cache (5-minute and default
	// writes); CacheWrite1hPerMTok those written for an hour (Anthropic).
	CacheWritePerMTok   *int64 `json:"cache_write_per_mtok,omitempty"`
	CacheWrite1hPerMTok *int64 `json:"cache_write_1h_per_mtok,omitempty"`
	AudioInputPerMTok   *int64 `json:"audio_input_per_mtok,omitempty"`
	AudioOutputPerMTok  *int64 `json:"audio_output_per_mtok,omitempty"`
	ImageInputPerMTok   *int64 `json:"image_input_per_mtok,omitempty"`
}

// LongContext is a rate card's long-context band: a request whose input tokens exceed
// AboveInputTokens is priced entirely at the band's rates (falling back to the base
// rates for what the band does not set).
type LongContext struct {
	AboveInputTokens int64 `json:"above_input_tokens"`
	Rates
}

// The service tiers a request may name without the card listing them: auto lets the
// provider choose (the hold takes the dearest tier the card lists), default (OpenAI),
// standard and standard_only (Anthropic) are the base card.
const (
	TierAuto    = "auto"
	TierDefault = "default"
)

// IsBaseTier reports whether a tier name, as requested or answered, means the base card.
func IsBaseTier(name string) bool {
	switch name {
	case "", TierDefault, "standard", "standard_only":
		return true
	}
	return false
}

// Tier returns the rates of the service tier name; ok is false when the card does not
// price it (the base names are not listed: see IsBaseTier).
func (p *Prices) Tier(name string) (Rates, bool) {
	r, ok := p.ServiceTiers[name]
	return r, ok
}

// Geo returns the rates of the inference_geo value; ok is false when the card does not
// price it.
func (p *Prices) Geo(value string) (Rates, bool) {
	r, ok := p.InferenceGeo[value]
	return r, ok
}

// fields lists the rates' fields by their catalog names, for validation.
func (r *Rates) fields() []namedPrice {
	return []namedPrice{
		{"input_per_mtok", r.InputPerMTok}, {"output_per_mtok", r.OutputPerMTok},
		{"cache_read_per_mtok", r.CacheReadPerMTok}, {"cache_write_per_mtok", r.CacheWritePerMTok},
		{"cache_write_1h_per_mtok", r.CacheWrite1hPerMTok}, {"audio_input_per_mtok", r.AudioInputPerMTok},
		{"audio_output_per_mtok", r.AudioOutputPerMTok}, {"image_input_per_mtok", r.ImageInputPerMTok},
	}
}

type namedPrice struct {
	name string
	v    *int64
}

// rateCardSet reports whether any part of a token rate card beyond the base input and
// output prices is set: cache, audio and image prices and the overrides.
func (p *Prices) rateCardSet() bool {
	for _, f := range p.fields()[2:] {
		if f.v != nil {
			return true
		}
	}
	return p.LongContext != nil || len(p.ServiceTiers) > 0 || len(p.InferenceGeo) > 0
}

// MaxPricePerMTok bounds a token price (micro-credits per million tokens: a million credits
// per million tokens). Below it no charge of a request's clamped usage can overflow, in
// the gateway's pricing or in the ledger's check of it (ledger.ComponentAmount).
const MaxPricePerMTok = 1_000_000_000_000

// validateRateCard reports the rate card's problems: prices out of range at any level, a
// band without its threshold, a tier named like a base or auto tier, an empty override.
func validateRateCard(p *Prices, where string, bad func(string, ...any)) {
	check := func(level string, r *Rates) {
		for _, f := range r.fields() {
			if f.v != nil && (*f.v < 0 || *f.v > MaxPricePerMTok) {
				bad("%s: prices.%s%s must be between 0 and %d", where, level, f.name, MaxPricePerMTok)
			}
		}
	}
	check("", &p.Rates)
	if lc := p.LongContext; lc != nil {
		check("long_context.", &lc.Rates)
		if lc.AboveInputTokens < 1 {
			bad("%s: prices.long_context.above_input_tokens must be > 0", where)
		}
	}
	for _, name := range sortedKeys(p.ServiceTiers) {
		r := p.ServiceTiers[name]
		check("service_tiers."+name+".", &r)
		if name == TierAuto || IsBaseTier(name) {
			bad("%s: prices.service_tiers.%s: %q is not a tier of its own (the base prices are the default tier)", where, name, name)
		}
	}
	for _, value := range sortedKeys(p.InferenceGeo) {
		r := p.InferenceGeo[value]
		check("inference_geo."+value+".", &r)
		if value == "" {
			bad("%s: prices.inference_geo: empty value", where)
		}
	}
}

func sortedKeys(m map[string]Rates) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
