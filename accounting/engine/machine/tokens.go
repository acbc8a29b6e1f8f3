package machine

import (
	"time"

	"github.com/llmgw/gateway/accounting/ledger"
)

// Requests and tokens per minute, of a key or a project.
//
// rpm counts the requests admitted in the last 60 s: the admission times of that
// minute are kept, oldest first, while an rpm is set. tpm is a bucket of N tokens, full
// when set, refilled continuously at N/60 a second; an admission takes the request's
// token bound, and its settlement gives back the part it did not use.

// tokenScale is the unit of a bucket's level: tokens × tokenScale, so that a bucket of
// N tokens a minute refills by exactly N units a microsecond.
const tokenScale = int64(time.Minute / time.Microsecond)

// maxTPM keeps a full bucket, and a full bucket plus a full refill, within an int64.
const maxTPM = 1 << 36

type rates struct {
	rpm, tpm *int64
	admitted []time.Time // admissions of the last minute, while rpm is set
	bucket   bucket
}

type bucket struct {
	level int64     // tokens × tokenScale at `at` (0 while no tpm is set)
	at    time.Time // when level was last brought up to date
	held  int64     // tokens taken by holds in flight (their bounds)
}

// levelAt is the bucket's level at now, refilled at n tokens a minute.
func (b *bucket) levelAt(n int64, now time.Time) int64 {
	full := n * tokenScale
	dt := now.Sub(b.at).Microseconds()
	switch {
	case dt <= 0:
		return min(b.level, full)
	case dt >= tokenScale:
		return full
	}
	return min(full, b.level+n*dt)
}

// take takes tokens at now from a bucket of n tokens a minute.
func (b *bucket) take(n, tokens int64, now time.Time) {
	b.level = b.levelAt(n, now) - tokens*tokenScale
	if now.After(b.at) {
		b.at = now
	}
	b.held += tokens
}

// giveBack ends a hold of tokens of which used stay taken, at now; n is the bucket's
// tpm now (nil: none, and the level does not count).
func (b *bucket) giveBack(n *int64, tokens, used int64, now time.Time) {
	b.held -= tokens
	if n == nil {
		return
	}
	b.level = min(*n*tokenScale, b.levelAt(*n, now)+(tokens-used)*tokenScale)
	if now.After(b.at) {
		b.at = now
	}
}

// recent is how many requests were admitted in the minute before now.
func (r *rates) recent(now time.Time) int {
	cut := now.Add(-time.Minute)
	i := 0
	for i < len(r.admitted) && !r.admitted[i].After(cut) {
		i++
	}
	return len(r.admitted) - i
}

// admit records an admission at now: a request against rpm, tokens against tpm.
// It reports whether tokens were taken from the bucket.
func (r *rates) admit(tokens int64, now time.Time) bool {
	if r.rpm != nil {
		cut := now.Add(-time.Minute)
		i := 0
		for i < len(r.admitted) && !r.admitted[i].After(cut) {
			i++
		}
		if i > 0 {
			n := copy(r.admitted, r.admitted[i:])
			clear(r.admitted[n:])
			r.admitted = r.admitted[:n]
		}
		r.admitted = append(r.admitted, now)
	}
	if r.tpm == nil {
		return false
	}
	r.bucket.take(*r.tpm, tokens, now)
	return true
}

// set changes the limits at now. A new rpm counts from now; a new tpm starts full; a
// changed tpm keeps the bucket's level, at most the new full.
func (r *rates) set(rpm, tpm *int64, now time.Time) {
	if rpm == nil {
		r.admitted = nil
	}
	switch {
	case tpm == nil:
		r.bucket.level, r.bucket.at = 0, time.Time{}
	case r.tpm == nil:
		r.bucket.level, r.bucket.at = *tpm*tokenScale, now
	case *tpm != *r.tpm:
		r.bucket.level = min(r.bucket.levelAt(*r.tpm, now), *tpm*tokenScale)
		if now.After(r.bucket.at) {
			r.bucket.at = now
		}
	}
	r.rpm, r.tpm = clonePtr(rpm), clonePtr(tpm)
}

// refusal is the refusal of one more request of tokens at now by these limits, those
// of p (nil: of the key), or nil.
func (r *rates) refusal(tokens int64, now time.Time, p *project) *ledger.Refusal {
	if r.rpm != nil {
		if n := r.recent(now); n >= int(*r.rpm) {
			first := r.admitted[len(r.admitted)-int(*r.rpm)]
			who, prefix := rateNames(p)
			return &ledger.Refusal{
				Reason: ledger.ReasonRateLimitExceeded, Limit: prefix + "rpm",
				RetryAfter: retryAfter(now, first.Add(time.Minute)),
				Detail:     who + "'s requests per minute are used up",
			}
		}
	}
	if r.tpm == nil {
		return nil
	}
	n := *r.tpm
	if tokens > n {
		who, prefix := rateNames(p)
		return &ledger.Refusal{
			Reason: ledger.ReasonRateLimitExceeded, Limit: prefix + "tpm",
			Detail: "the request's token bound is larger than " + who + "'s tokens-per-minute limit",
		}
	}
	level := r.bucket.levelAt(n, now)
	need := tokens * tokenScale
	if level >= need {
		return nil
	}
	micros := (need - level + n - 1) / n
	who, prefix := rateNames(p)
	return &ledger.Refusal{
		Reason: ledger.ReasonRateLimitExceeded, Limit: prefix + "tpm",
		RetryAfter: int(max(1, (micros+999_999)/1_000_000)),
		Detail:     who + "'s tokens per minute are used up",
	}
}

// rateNames names the owner of rate limits in a refusal: its detail's subject and its
// limit's prefix ("key:" or "project:ID:").
func rateNames(p *project) (who, prefix string) {
	if p == nil {
		return "the key", "key:"
	}
	return p.who(), "project:" + p.id + ":"
}

// usedTokens is what a settlement's usage keeps of a token bound: the tokens used, at
// most the bound.
func usedTokens(u ledger.Usage, bound int64) int64 {
	used := min(bound, max(0, u.InputTokens))
	return used + min(bound-used, max(0, u.OutputTokens))
}

// validRates is the detail of invalid rate limits, or "".
func validRates(rpm, tpm *int64) string {
	switch {
	case rpm != nil && (*rpm < 1 || *rpm > 1<<31-1):
		return "an rpm must be between 1 and 2147483647"
	case tpm != nil && (*tpm < 1 || *tpm > maxTPM):
		return "a tpm must be between 1 and 68719476736"
	}
	return ""
}
