package lifecycle

// The client's key: read from the headers (only its hash is kept), resolved to a grant by
// accounting, and accounting's refusals turned into the client's errors.

import (
	"context"
	"crypto/sha256"
	"errors"
	"strings"

	"github.com/llmgw/gateway/accounting/ledger"
	"github.com/llmgw/gateway/extproc/apierr"
	"go.uber.org/zap"
)

// readKey takes the key from "authorization: Bearer" or x-api-key and keeps only its
// hash.
//
// The two headers are two ways to send the same key (spec section 5): a request that
// sends two different keys is refused rather than served on either.
func (r *Request) readKey(auth, xKey string) {
	bearer := ""
	if len(auth) > 7 && strings.EqualFold(auth[:7], "bearer ") {
		bearer = strings.TrimSpace(auth[7:])
	}
	other := strings.TrimSpace(xKey)
	key := bearer
	if key == "" {
		key = other
	}
	if key == "" {
		return
	}
	r.hasKey = true
	r.keyConflict = bearer != "" && other != "" && bearer != other
	r.keyOK = !r.keyConflict && strings.HasPrefix(key, "gw-") && len(key) >= 3+43
	r.keyHash = sha256.Sum256([]byte(key))
}

// authenticate resolves the key to a grant, or the error to answer with. A failed key
// counts against the client's address and is answered 401 invalid_api_key, or 429
// rate_limit_exceeded once the address used up its failures (AuthFailures); a key that
// authenticated is remembered as known.
func (r *Request) authenticate(ctx context.Context) *apierr.Error {
	e := r.authenticateKey(ctx)
	now := r.svc.cfg.Now()
	switch {
	case e == nil:
		r.svc.fails.valid(r.keyHash, now)
	case e.Code == apierr.InvalidAPIKey:
		code, wait := r.svc.fails.failed(r.keyAttempt(), now)
		r.svc.cfg.ObserveAuthFailure(code)
		if code == apierr.RateLimitExceeded {
			return tooManyFailures(wait)
		}
	}
	return e
}

// keyAttempt is the request's key as the failure limiter sees it.
func (r *Request) keyAttempt() keyAttempt {
	return keyAttempt{addr: r.addr, present: r.hasKey, wellFormed: r.hasKey && r.keyOK && !r.keyConflict, hash: r.keyHash}
}

func (r *Request) authenticateKey(ctx context.Context) *apierr.Error {
	if !r.hasKey {
		return apierr.New(apierr.InvalidAPIKey, "Missing API key: send 'Authorization: Bearer <key>' or 'x-api-key: <key>'.")
	}
	if r.keyConflict {
		return apierr.New(apierr.InvalidAPIKey, "The request carries different keys (in 'Authorization' and 'x-api-key', or in a repeated header): send one key.")
	}
	if !r.keyOK {
		return apierr.New(apierr.InvalidAPIKey, "Invalid API key.")
	}
	g, err := r.svc.cfg.Ledger.Authenticate(ctx, r.keyHash[:])
	if err != nil {
		return r.ledgerError(err, "authenticate")
	}
	if g.ExpiresAt != nil && !r.svc.cfg.Now().Before(*g.ExpiresAt) {
		return apierr.New(apierr.InvalidAPIKey, "Invalid API key.")
	}
	r.grant = g
	return nil
}

// ledgerError maps an accounting error to the client's error: a Refusal by its reason,
// anything else (accounting unreachable) as service_unavailable.
func (r *Request) ledgerError(err error, op string) *apierr.Error {
	var ref *ledger.Refusal
	if !errors.As(err, &ref) {
		r.log().Warn("accounting call failed", zap.String("op", op), zap.Error(err))
		return apierr.New(apierr.ServiceUnavailable, "The service is temporarily unable to authorize requests.")
	}
	switch ref.Reason {
	case ledger.ReasonInvalidAPIKey:
		return apierr.New(apierr.InvalidAPIKey, "Invalid API key.")
	case ledger.ReasonAccountSuspended:
		return apiAccountSuspended()
	case ledger.ReasonInsufficientCredits:
		return r.insufficientCredits(ref)
	case ledger.ReasonKeyLimitReached:
		return spendRefusal(ref)
	case ledger.ReasonConcurrencyLimitExceeded:
		e := apierr.New(apierr.ConcurrencyLimitExceeded, "Too many requests are in flight on the account.")
		e.RetryAfter = ref.RetryAfter
		if e.RetryAfter <= 0 {
			e.RetryAfter = ledger.ConcurrencyRetryAfter
		}
		return e
	case ledger.ReasonRateLimitExceeded:
		return rateRefusal(ref, r.TokenBound())
	case ledger.ReasonModelNotAllowed:
		return modelNotAllowed(r.parsed.Model, ref)
	}
	r.log().Warn("unexpected refusal", zap.String("op", op), zap.Stringer("reason", ref.Reason))
	return apierr.New(apierr.InternalError, "The request could not be processed.")
}

func apiAccountSuspended() *apierr.Error {
	return apierr.New(apierr.AccountSuspended, "The account is suspended.")
}
