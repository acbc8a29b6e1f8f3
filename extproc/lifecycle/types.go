package lifecycle

import (
	"context"
	"time"

	"github.com/llmgw/gateway/accounting/ledger"
	"github.com/llmgw/gateway/extproc/apierr"
)

// Ledger is what the lifecycle needs from accounting. Refusals are *ledger.Refusal
// errors; an unknown video task is ledger.ErrNotFound; any other error means accounting
// could not be asked.
type Ledger interface {
	Authenticate(ctx context.Context, keyHash []byte) (ledger.Grant, error)
	Reserve(ctx context.Context, r ledger.ReserveRequest) (ledger.Reservation, error)
	Commit(ctx context.Context, c ledger.CommitRequest) (ledger.CommitResult, error)
	Release(ctx context.Context, reservationID, reason string) (ledger.ReleaseResult, error)
	// Renew pushes a held reservation's expiry ttl into the future (long streams).
	Renew(ctx context.Context, reservationID string, ttl time.Duration) (time.Time, error)
	// RecordVideoTask stores that the key's account submitted the task: taskID is the
	// gateway's id, model the public model id, origin the channel and the provider's id.
	RecordVideoTask(ctx context.Context, taskID, keyID, model string, origin ledger.TaskOrigin) error
	// GetVideoTask returns a task's owner and age.
	GetVideoTask(ctx context.Context, taskID string) (VideoTask, error)
}

// VideoTask is a recorded video task and its age by accounting's clock (so every
// replica agrees on retention).
type VideoTask struct {
	ledger.VideoTask
	Age time.Duration
}

// VideoRetention is how long a video task stays readable.
const VideoRetention = 24 * time.Hour

// Header is one HTTP header; names are lowercase.
type Header struct{ Name, Value string }

// Immediate is a complete local answer: the request goes no further.
type Immediate struct {
	Status  int
	Headers []Header
	Body    []byte
	// Details is a distinctive string for Envoy's response-code details
	// ("extproc_<code>"), so local_reply_config can tell our answers from Envoy's own.
	Details string
}

// BodyMode is how the adapter asks Envoy to send the response body.
type BodyMode int

const (
	// ModeUnchanged keeps the configured mode.
	ModeUnchanged BodyMode = iota
	// ModeNone: the body bypasses extproc.
	ModeNone
	// ModeBuffered: one message with the whole body.
	ModeBuffered
	// ModeStreamed: one message per chunk.
	ModeStreamed
)

// Action is a phase's answer. The zero Action means "continue unchanged".
type Action struct {
	// Immediate, when set, answers the client now; every other field but Facts is
	// ignored.
	Immediate *Immediate
	// Facts, when set, are the request's facts for the access log, changed since the
	// last reply (facts.go). They go with any reply, an immediate one included.
	Facts *Facts
	// FactsSent, with Facts, are the facts the previous replies carried (the zero Facts
	// before the first): Envoy keeps what they said, so only what differs needs to go.
	FactsSent Facts
	// SetHeaders replace (not append to) any existing values; RemoveHeaders run first.
	SetHeaders    []Header
	RemoveHeaders []string
	// Body, when ReplaceBody is set, replaces the message's body (or this chunk).
	Body        []byte
	ReplaceBody bool
	// ReplaceMessage (a reply to headers) replaces the whole message: the header
	// mutation, then Body as the complete body, and no body phase follows (ext_proc's
	// CONTINUE_AND_REPLACE).
	ReplaceMessage bool
	// ClearRouteCache makes Envoy pick the route again after the header mutation.
	ClearRouteCache bool
	// ResponseBodyMode overrides the response body mode (replies to response headers).
	ResponseBodyMode BodyMode
}

// errImmediate renders e in env as an Immediate.
func errImmediate(e *apierr.Error, env apierr.Envelope) *Immediate {
	r := e.Render(env)
	h := make([]Header, len(r.Headers))
	for i, x := range r.Headers {
		h[i] = Header{x.Name, x.Value}
	}
	return &Immediate{Status: r.Status, Headers: h, Body: r.Body, Details: "extproc_" + string(e.Code)}
}
