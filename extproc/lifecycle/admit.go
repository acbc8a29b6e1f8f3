package lifecycle

// Admission (package doc, steps 3 to 11): the key's grant, the model and its rules, the
// maximum cost, and the hold.

import (
	"context"
	"slices"
	"strconv"
	"time"

	"github.com/llmgw/gateway/accounting/ledger"
	"github.com/llmgw/gateway/extproc/apierr"
	"github.com/llmgw/gateway/extproc/catalog"
	"github.com/llmgw/gateway/extproc/pricing"
	"github.com/llmgw/gateway/extproc/tokens"
)

// admit runs steps 3 to 10 of the admission order (see the package doc).
func (r *Request) admit(ctx context.Context) *apierr.Error {
	if e := r.authenticate(ctx); e != nil {
		return e
	}
	g := &r.grant
	if g.AccountSuspended {
		return apiAccountSuspended()
	}
	id := r.parsed.Model
	m, ok := r.cat.Model(id)
	if !ok || !r.endpoint.spec().serves(m.Kind) {
		return apierr.Param(apierr.ModelNotAvailable, "model", "The model '"+id+"' is not available on this endpoint.")
	}
	r.model = m
	if e := modelRefusal(g, m, len(r.candidates()) > 0); e != nil {
		return e
	}
	priced := r.endpoint.spec().estimate == nil // an estimate is never priced
	if f := r.parsed.Unpriced; f != "" && priced {
		return apierr.Param(apierr.PricingUnavailable, f,
			"'"+f+"' asks for server-side tools that have no published price on this gateway; use client-side (function) tools.")
	}
	if f := r.parsed.Prompt.Unbounded; f != "" && priced {
		return apierr.Param(apierr.PricingUnavailable, f,
			"'"+f+"' refers to content the request does not carry (a URL, a file id, an earlier answer), so its cost cannot be bounded before the provider fetches it; send the content itself (base64 bytes or text).")
	}
	if e := r.countPages(); e != nil {
		return e
	}
	if r.parsed.MaxOutput > m.MaxOutputTokens && priced {
		return apierr.Param(apierr.InvalidMaxTokens, r.parsed.MaxOutputParam,
			"'"+r.parsed.MaxOutputParam+"' is too large: the model '"+id+"' supports at most "+strconv.FormatInt(m.MaxOutputTokens, 10)+" output tokens.")
	}
	if r.endpoint.spec().billing == BillTokens && priced {
		return rateCardRefusal(m, r.parsed.RateCard)
	}
	return nil
}

// modelRefusal is the first of the model rules of the admission order (steps 6 to 9)
// that the grant fails for model m — the key's allowlist and its projects', top-up, a
// channel open to the tier (hasCandidate), a complete price — or nil when it may call
// m. Admission and the models list share it, so the list shows exactly what admission
// would let through.
func modelRefusal(g *ledger.Grant, m *catalog.Model, hasCandidate bool) *apierr.Error {
	switch {
	case len(g.AllowedModels) > 0 && !slices.Contains(g.AllowedModels, m.ID):
		return apierr.Param(apierr.ModelNotAllowed, "model", "This key is not allowed to call the model '"+m.ID+"'.")
	case g.EffectiveModels != nil && !slices.Contains(g.EffectiveModels, m.ID):
		return modelNotAllowed(m.ID, nil)
	case !m.Free && !g.AccountToppedUp:
		return apierr.Param(apierr.ModelRequiresTopUp, "model", "The model '"+m.ID+"' requires a top-up; free models remain callable.")
	case !hasCandidate:
		return apierr.Param(apierr.ModelNotAvailable, "model", "No route for the model '"+m.ID+"' is available to this key.")
	case !m.PriceComplete():
		return apierr.Param(apierr.PricingUnavailable, "model", "No complete published price exists for the model '"+m.ID+"'.")
	}
	return nil
}

// modelRules applies the endpoint's rules that need the model (step 10 of the
// admission order; the table's rules hook, endpoints.go).
func (r *Request) modelRules(ctx context.Context) *apierr.Error {
	if rules := r.endpoint.spec().rules; rules != nil {
		return rules(r, ctx)
	}
	return nil
}

// MaxCost is the request's maximum estimated cost in micro-credits (pricing), by the
// endpoint's billing. Tokens: the prompt's estimate at the dearest input-side price the
// request can incur plus the output limit (the request's, else the model's) and what is
// billed as output beyond it (prediction) at the dearest output-side price, at the
// dearest admissible tier and long-context band (pricing.Max). Input tokens (embeddings): the input's estimate,
// token ids counted exactly. Units: the exact cost of the request's units (speech
// characters, images, video seconds). Free models cost 0.
func (r *Request) MaxCost() int64 {
	m := r.model
	if m == nil || m.Free {
		return 0
	}
	sp := r.endpoint.spec()
	switch sp.billing {
	case BillInputTokens:
		return pricing.Tokens(m.Prices, r.inputBound(), 0)
	case BillUnits:
		return pricing.Units(m.Prices, sp.unit, r.units)
	case BillNone:
		return 0
	}
	return pricing.Max(&m.Prices, pricing.Bound{
		InputTokens:  r.inputBound(),
		OutputTokens: r.outputBound(),
		Parts:        holdParts(&r.parsed),
		Sels:         holdSels(&m.Prices, r.parsed.RateCard),
	})
}

// TokenBound is the request's token bound, what its admission takes from the
// tokens-per-minute buckets of its key and projects: the hold's input bound plus its
// output bound (the figures MaxCost prices), for free models too. Embeddings: the
// input's bound. Endpoints billed by units (speech, images, video) or not at all: 0,
// they take no tokens.
func (r *Request) TokenBound() int64 {
	if r.model == nil {
		return 0
	}
	switch r.endpoint.spec().billing {
	case BillTokens:
		return r.inputBound() + r.outputBound()
	case BillInputTokens:
		return r.inputBound()
	}
	return 0
}

// inputBound is the input tokens a hold bounds: the prompt's count with its margin
// (media parts at their fixed bound); for embeddings the given token ids count exactly.
func (r *Request) inputBound() int64 {
	media := tokens.Media(r.parsed.Prompt)
	if r.endpoint.spec().billing == BillInputTokens {
		known := r.parsed.KnownTokens
		return tokens.WithMargin(r.promptTokens()-known, media) + known
	}
	return tokens.WithMargin(r.promptTokens(), media)
}

// outputBound is the output tokens a hold bounds: the output limit (the request's, else
// the model's) and what is billed as output beyond it (prediction).
func (r *Request) outputBound() int64 {
	out := r.parsed.MaxOutput
	if out == 0 {
		out = r.model.MaxOutputTokens
	}
	return out + r.svc.cfg.Counter.Output(r.parsed.Prompt)
}

// promptTokens is the prompt's plain count (no margin), counted once per request.
// Embedding inputs have no message framing: their count is the texts' tokens, media
// parts at their fixed bound, and the token ids given.
func (r *Request) promptTokens() int64 {
	r.tally()
	return r.counted.Bound
}

// knownPromptTokens is what an early end charges for the prompt (settlement policy): the
// parts counted as the provider counts them (tokens.Known; for embeddings the texts and
// the token ids given), never the bounds of media, tools prompt or margin that the hold
// carries.
func (r *Request) knownPromptTokens() int64 {
	r.tally()
	return r.counted.Known
}

// tally counts the prompt, once per request (the tokenizer is the costliest part of a
// request's own work).
func (r *Request) tally() {
	if r.counted.Bound >= 0 {
		return
	}
	p := r.parsed.Prompt
	if r.endpoint.spec().billing != BillInputTokens {
		r.counted = r.svc.cfg.Counter.Tally(p)
		return
	}
	n := r.parsed.KnownTokens
	for _, t := range p.Texts {
		n += int64(r.svc.cfg.Counter.Text(t))
	}
	r.counted = tokens.Tally{Bound: n + tokens.Media(p), Known: n}
}

func (r *Request) reserve(ctx context.Context) *apierr.Error {
	pool := ledger.PoolGeneral
	if r.model.HighCost {
		pool = ledger.PoolHighCost
	}
	// ctx carries the admission budget and no cancellation (RequestBody). A reply lost
	// in transit is retried with the same request id, which accounting answers with the
	// same reservation, so a hold is never made twice. When no answer came within the
	// budget, the client is told to retry and the request id is abandoned: whatever
	// hold it made is found and released in the background.
	req := ledger.ReserveRequest{
		RequestID: r.svc.cfg.NewID(),
		KeyID:     r.grant.KeyID,
		Model:     r.model.ID,
		Amount:    r.MaxCost(),
		Pool:      pool,
		TTL:       r.svc.cfg.LeaseTTL,
		Tokens:    r.TokenBound(),
	}
	deadline, _ := ctx.Deadline()
	var res ledger.Reservation
	err := r.svc.retry(func() time.Time { return deadline }, func(actx context.Context) error {
		actx, cancel := context.WithDeadline(actx, deadline)
		defer cancel()
		var err error
		res, err = r.svc.cfg.Ledger.Reserve(r.traceCtx(actx), req)
		return err
	})
	if err != nil {
		if !final(err) {
			r.abandonReserve(req)
		}
		return r.ledgerError(err, "reserve")
	}
	r.reservation = &res
	r.hold = r.svc.newHold(res, r.log)
	r.svc.held(res)
	return nil
}
