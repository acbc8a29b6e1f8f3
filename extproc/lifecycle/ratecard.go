package lifecycle

// Rate cards (extproc/pricing): which tier and region a chat request may be priced at
// (refused at admission when the card does not price them), what its hold assumes, and
// how its answer's usage becomes the charge's components.

import (
	"slices"
	"strings"

	"github.com/llmgw/gateway/accounting/ledger"
	"github.com/llmgw/gateway/extproc/apierr"
	"github.com/llmgw/gateway/extproc/catalog"
	"github.com/llmgw/gateway/extproc/pricing"
	"github.com/llmgw/gateway/extproc/response"
	"github.com/llmgw/gateway/extproc/wire"
)

// rateCardRefusal refuses a service_tier or inference_geo value the model's card does
// not price (400 invalid_request naming the param), before anything is held: the
// provider would bill it at a price the gateway cannot charge. auto and the base tier
// names are always accepted.
func rateCardRefusal(m *catalog.Model, rc wire.RateCard) *apierr.Error {
	p := &m.Prices
	if t := rc.ServiceTier; t != "" && t != catalog.TierAuto && !catalog.IsBaseTier(t) {
		if _, ok := p.Tier(t); !ok {
			return apierr.Param(apierr.InvalidRequest, "service_tier", "The model '"+m.ID+"' has no price for service_tier '"+t+
				"'; priced: "+strings.Join(priced(catalog.TierAuto, catalog.TierDefault, p.ServiceTiers), ", ")+".")
		}
	}
	if g := rc.InferenceGeo; g != "" {
		if _, ok := p.Geo(g); !ok {
			return apierr.Param(apierr.InvalidRequest, "inference_geo", "The model '"+m.ID+"' has no price for inference_geo '"+g+
				"'; priced: "+strings.Join(orNone(priced("", "", p.InferenceGeo)), ", ")+".")
		}
	}
	return nil
}

// priced lists the names a card prices, after the given fixed ones (empty ones left out).
func priced(first, second string, m map[string]catalog.Rates) []string {
	var out []string
	for _, s := range []string{first, second} {
		if s != "" {
			out = append(out, s)
		}
	}
	names := make([]string, 0, len(m))
	for k := range m {
		names = append(names, k)
	}
	slices.Sort(names)
	return append(out, names...)
}

func orNone(s []string) []string {
	if len(s) == 0 {
		return []string{"none"}
	}
	return s
}

// holdSels are the selections a request's answer can be priced at: the tier it names,
// or (auto, or none: the provider's default is auto) the base card and every tier the
// card lists; always in the region it names.
func holdSels(p *catalog.Prices, rc wire.RateCard) []pricing.Sel {
	geo := rc.InferenceGeo
	if t := rc.ServiceTier; t != "" && t != catalog.TierAuto {
		return []pricing.Sel{{Tier: t, Geo: geo}}
	}
	sels := []pricing.Sel{{Tier: catalog.TierDefault, Geo: geo}}
	for _, t := range priced("", "", p.ServiceTiers) {
		sels = append(sels, pricing.Sel{Tier: t, Geo: geo})
	}
	return sels
}

// holdParts are the priced parts beyond plain input, cache reads and writes and output
// that the request can incur: a 1-hour cache write needs a cache_control marker, audio
// and image input their parts, audio output a request for it.
func holdParts(parsed *wire.Parsed) []pricing.Part {
	var parts []pricing.Part
	if parsed.RateCard.CacheMarkers {
		parts = append(parts, pricing.CacheWrite1h)
	}
	if parsed.Prompt.AudioBytes > 0 {
		parts = append(parts, pricing.AudioInput)
	}
	if parsed.Prompt.Images > 0 {
		parts = append(parts, pricing.ImageInput)
	}
	if parsed.RateCard.AudioOutput {
		parts = append(parts, pricing.AudioOutput)
	}
	return parts
}

// pricedTier is the tier a charge is priced at: the one the answer reports when the
// card prices it, else the one requested, else the base card ("default").
func pricedTier(p *catalog.Prices, reported, requested string) string {
	for _, t := range []string{reported, requested} {
		if t == "" || t == catalog.TierAuto {
			continue
		}
		if catalog.IsBaseTier(t) {
			return catalog.TierDefault
		}
		if _, ok := p.Tier(t); ok {
			return t
		}
	}
	return catalog.TierDefault
}

// usageParts splits an answer's usage into the card's disjoint parts, and returns the
// totals it bills (counts clamped; parts a total leaves out are billed all the same).
func usageParts(u response.Usage) (parts pricing.Usage, in, out int64) {
	parts[pricing.CacheRead] = clampUsage(u.CacheReadInputTokens)
	parts[pricing.CacheWrite] = clampUsage(u.CacheWriteInputTokens)
	parts[pricing.CacheWrite1h] = clampUsage(u.CacheWrite1hInputTokens)
	parts[pricing.AudioInput] = clampUsage(u.AudioInputTokens)
	parts[pricing.ImageInput] = clampUsage(u.ImageInputTokens)
	inside := parts.InputTokens()
	in = max(clampUsage(u.InputTokens), inside)
	parts[pricing.Input] = in - inside
	out = clampUsage(u.OutputTokens)
	parts[pricing.AudioOutput] = min(clampUsage(u.AudioOutputTokens), out)
	parts[pricing.Output] = out - parts[pricing.AudioOutput]
	return parts, in, out
}

// components are the ledger's record of a charge's priced parts.
func components(cs []pricing.Component) []ledger.Component {
	out := make([]ledger.Component, len(cs))
	for i, c := range cs {
		out[i] = ledger.Component{Name: c.Part.String(), Units: c.Units, PricePerMTok: c.PricePerMTok, Amount: c.Amount}
	}
	return out
}
