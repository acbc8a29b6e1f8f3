package console

// One-time forms: the top-up and new-key forms each carry a token of their own, issued
// when the page is rendered. The first submission of a token does the work; a second
// one (a reload of the answer, a double click, the same page submitted again) is
// refused and shown as refused, so one rendered form tops up or mints a key at most
// once, and two rendered forms are two operations.

import (
	"sync"
)

// maxForms bounds the tokens a session remembers: the oldest are forgotten first (a
// form that old is refused as stale and must be reloaded).
const maxForms = 512

// formState is where a form token is in its life.
type formState int

const (
	formIssued  formState = iota // rendered, not yet submitted
	formPending                  // submitted, its operation under way
	formDone                     // its operation succeeded: never again
)

// form is one issued token; value is what its first submission carried (the top-up
// amount), which a retry after a failure must repeat.
type form struct {
	state formState
	value string
}

// forms are a session's one-time form tokens. Safe for concurrent use.
type forms struct {
	mu    sync.Mutex
	by    map[string]*form
	order []string
}

// issue returns a new token for a rendered form.
func (f *forms) issue() string {
	tok := randomHex(16)
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.by == nil {
		f.by = map[string]*form{}
	}
	if len(f.order) >= maxForms {
		delete(f.by, f.order[0])
		f.order = f.order[1:]
	}
	f.by[tok] = &form{}
	f.order = append(f.order, tok)
	return tok
}

// formRefusal says why a submission was refused; empty: it may proceed.
type formRefusal string

const (
	formUnknown  formRefusal = "This form is stale or was not issued by this console: reload the page and try again."
	formRepeated formRefusal = "Refused: this form was already submitted, and it acts once. Nothing was changed now; reload the page to do it again."
	formChanged  formRefusal = "Refused: this form was already submitted with a different amount, which may have been applied. Nothing was changed now; check the balance and reload the page."
)

// begin claims tok for one submission carrying value. A token is claimed once at a
// time; after a failure (end with ok false) it may be claimed again with the same value
// only, since the failed attempt may have taken effect.
func (f *forms) begin(tok, value string) formRefusal {
	f.mu.Lock()
	defer f.mu.Unlock()
	fm := f.by[tok]
	switch {
	case tok == "" || fm == nil:
		return formUnknown
	case fm.state != formIssued:
		return formRepeated
	case fm.value != "" && fm.value != value:
		return formChanged
	}
	fm.state, fm.value = formPending, value
	return ""
}

// end records the outcome of the submission begin allowed.
func (f *forms) end(tok string, ok bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if fm := f.by[tok]; fm != nil {
		fm.state = map[bool]formState{true: formDone, false: formIssued}[ok]
	}
}
