package lifecycle

import (
	"strconv"

	"github.com/llmgw/gateway/accounting/ledger"
	"github.com/llmgw/gateway/extproc/apierr"
	"github.com/llmgw/gateway/extproc/translate"
)

// insufficientCredits is the client's 402 when the ledger refused the request's hold:
// it says the hold (the request's maximum estimated cost) and what the account had
// available, in credits, and for a request priced by output tokens how to lower the hold.
func (r *Request) insufficientCredits(ref *ledger.Refusal) *apierr.Error {
	msg := "This request holds " + ledger.FormatCredits(r.MaxCost()) + " credits (its maximum estimated cost)"
	if ref.Available != nil {
		msg += "; the account has " + ledger.FormatCredits(max(*ref.Available, 0)) + " credits available"
	} else {
		msg += ", more than the account has available"
	}
	msg += " (credits held by in-flight requests are not available). "
	if p := r.outputLimitParam(); p != "" {
		if r.parsed.MaxOutput > 0 {
			msg += "Lower '" + p + "' (" + strconv.FormatInt(r.parsed.MaxOutput, 10) + " output tokens are held), "
		} else {
			msg += "Set a lower '" + p + "' (without it the model's maximum, " + strconv.FormatInt(r.model.MaxOutputTokens, 10) + " output tokens, is held), "
		}
		return apierr.New(apierr.InsufficientCredits, msg+"wait for a request to finish, or add credits.")
	}
	return apierr.New(apierr.InsufficientCredits, msg+"Wait for a request to finish, or add credits.")
}

// outputLimitParam names the request's output-token limit field when its hold depends on
// one (an endpoint priced by output tokens): the one the client sent, else the field its
// API uses; "" otherwise.
func (r *Request) outputLimitParam() string {
	if r.endpoint.spec().billing != BillTokens || r.model == nil {
		return ""
	}
	if p := r.parsed.MaxOutputParam; p != "" {
		return p
	}
	switch r.endpoint.spec().chat {
	case translate.Chat, translate.Messages:
		return "max_tokens"
	case translate.Responses:
		return "max_output_tokens"
	}
	return ""
}
