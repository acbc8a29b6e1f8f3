package lifecycle

import (
	"context"
	"errors"

	"github.com/llmgw/gateway/extproc/apierr"
	"github.com/llmgw/gateway/extproc/response"
	"go.uber.org/zap"
)

// responseState is the response side of an admitted request.
//
// A usable success (2xx with the media type asked for) is rewritten by extproc/response:
// JSON bodies are buffered, SSE bodies streamed chunk by chunk (content-length removed);
// the public model id is written back and usage read. Anything else is buffered,
// classified by response.ClassifyUpstream and replaced by our envelope (the provider's
// message is never shown), and the hold is released.
//
// Settlement: upstream usage → commit its cost. A stream that ended without usage (cut,
// client gone) → commit what was delivered, counted locally (input as counted, output
// text as sent). A JSON body without usage → release: it cannot be priced, and the full
// hold is never charged.
type responseState struct {
	status    int
	ct        string
	rw        response.Rewriter
	stream    bool
	delivered bool // some bytes of a streamed success went downstream
	broken    bool // the rewriter failed mid-stream; later chunks pass unchanged
}

func (r *Request) format() response.Format {
	if r.endpoint == EndpointMessages {
		return response.AnthropicMessages
	}
	return response.OpenAIChat
}

// ResponseHeaders handles the upstream's response headers (or Envoy's own local reply
// when no upstream answered).
func (r *Request) ResponseHeaders(ctx context.Context, status int, headers []Header) Action {
	if r.reservation == nil || r.settled {
		return Action{}
	}
	st := &responseState{status: status}
	r.resp = st
	for _, h := range headers {
		if h.Name == "content-type" {
			st.ct = h.Value
		}
	}
	if status < 200 || status > 299 {
		// Buffer the error body so it can be classified before anything reaches the
		// client.
		return Action{ResponseBodyMode: ModeBuffered}
	}
	if !response.UsableSuccess(r.parsed.Stream, status, st.ct) {
		r.release(ctx, "upstream_unusable_response")
		return r.fail(upstreamError(response.ClassifyUpstream(r.format(), status, st.ct, nil)))
	}
	rw, err := response.New(response.Options{
		Format:           r.format(),
		PublicModel:      r.model.ID,
		Stream:           r.parsed.Stream,
		ClientWantsUsage: r.parsed.IncludeUsage,
		CountTokens:      r.svc.cfg.Counter.Text,
		InputTokens:      r.promptTokens(),
	})
	if err != nil {
		r.svc.cfg.Log.Error("response rewriter", zap.Error(err))
		r.release(ctx, "internal_error")
		return r.fail(apierr.New(apierr.InternalError, "The response could not be processed."))
	}
	st.rw, st.stream = rw, r.parsed.Stream
	if st.stream {
		return Action{ResponseBodyMode: ModeStreamed, RemoveHeaders: []string{"content-length"}}
	}
	return Action{ResponseBodyMode: ModeBuffered}
}

// ResponseBody handles a response body message: the whole body (buffered) or one chunk
// (streamed). endOfStream true is the only proof that the response is complete.
func (r *Request) ResponseBody(ctx context.Context, chunk []byte, endOfStream bool) Action {
	st := r.resp
	if st == nil || r.reservation == nil {
		return Action{}
	}
	if st.rw == nil {
		r.release(ctx, "upstream_status")
		return r.fail(upstreamError(response.ClassifyUpstream(r.format(), st.status, st.ct, chunk)))
	}
	if st.broken {
		return Action{}
	}
	out, err := st.rw.Write(chunk, endOfStream)
	if err != nil {
		if !st.stream {
			r.release(ctx, "upstream_unusable_response")
			code := apierr.UpstreamError
			if !errors.Is(err, response.ErrUnusable) && !errors.Is(err, response.ErrTooLarge) {
				code = apierr.InternalError
			}
			return r.fail(upstreamError(code))
		}
		// Headers already went downstream: an immediate response would only reset the
		// stream. Pass the rest unchanged and settle on what was delivered.
		r.svc.cfg.Log.Warn("response rewrite failed mid-stream", zap.Error(err))
		st.broken = true
		r.settleDelivered(ctx)
		return Action{}
	}
	if st.stream {
		if len(out) > 0 {
			st.delivered = true
		}
		if endOfStream {
			r.settleStream(ctx)
		}
		return Action{ReplaceBody: true, Body: out}
	}
	if endOfStream {
		if u, ok := st.rw.Usage(); ok {
			r.commit(ctx, u.InputTokens, u.OutputTokens)
		} else {
			r.svc.cfg.Log.Warn("response without usage: releasing the hold", zap.String("model", r.model.ID))
			r.release(ctx, "usage_unavailable")
		}
	}
	return Action{ReplaceBody: true, Body: out, SetHeaders: []Header{{"content-length", itoa(len(out))}}}
}

// settleStream settles a streamed success: upstream usage when it came, else what was
// delivered.
func (r *Request) settleStream(ctx context.Context) {
	if u, ok := r.resp.rw.Usage(); ok {
		r.commit(ctx, u.InputTokens, u.OutputTokens)
		return
	}
	r.settleDelivered(ctx)
}

// settleDelivered charges what a stream delivered, counted locally; nothing delivered
// means nothing is charged.
func (r *Request) settleDelivered(ctx context.Context) {
	if !r.resp.delivered {
		r.release(ctx, "nothing_delivered")
		return
	}
	u := r.resp.rw.Delivered()
	r.commit(ctx, u.InputTokens, u.OutputTokens)
}

var upstreamMessages = map[apierr.Code]string{
	apierr.UpstreamAccountUnavailable: "The upstream account behind this model cannot serve requests right now; nothing was charged.",
	apierr.ServiceUnavailable:         "No healthy upstream channel is available for this model; nothing was charged.",
	apierr.InvalidRequest:             "The upstream provider rejected the request as invalid; nothing was charged.",
	apierr.UpstreamError:              "The upstream provider returned an unusable response; nothing was charged.",
}

func upstreamError(code apierr.Code) *apierr.Error {
	msg, ok := upstreamMessages[code]
	if !ok {
		msg = "The request could not be completed; nothing was charged."
	}
	return apierr.New(code, msg)
}

func itoa(n int) string {
	var b [20]byte
	i := len(b)
	if n == 0 {
		return "0"
	}
	for n > 0 {
		i--
		b[i] = byte('0' + n%10)
		n /= 10
	}
	return string(b[i:])
}
