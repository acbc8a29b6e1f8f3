package lifecycle

// The endpoints' own steps, which the endpoint table (api.go) hooks into the lifecycle:
// rules that need the admitted model, answers that are not an upstream's, and
// settlements that are not a token usage's.

import (
	"context"
	"slices"
	"strconv"
	"strings"

	"github.com/llmgw/gateway/extproc/apierr"
	"github.com/llmgw/gateway/extproc/video"
)

// answerEstimate answers count_tokens with the prompt's estimate.
func (r *Request) answerEstimate() Action {
	return Action{Immediate: &Immediate{
		Status:  200,
		Headers: []Header{{"content-type", "application/json"}},
		Body:    []byte(`{"input_tokens":` + strconv.FormatInt(r.promptTokens(), 10) + `}`),
		Details: "extproc_count_tokens",
	}}
}

// speechRules: a voice the model lists; the input's characters are billed.
func (r *Request) speechRules(ctx context.Context) *apierr.Error {
	if !slices.Contains(r.model.Voices, r.parsed.Voice) {
		return apierr.Param(apierr.InvalidRequest, "voice",
			"The voice '"+truncate(r.parsed.Voice, 64)+"' is not supported by the model '"+r.model.ID+"'; use one of: "+strings.Join(r.model.Voices, ", ")+".")
	}
	return r.unitRules(ctx)
}

// unitRules bills the units the request asked for (images).
func (r *Request) unitRules(context.Context) *apierr.Error {
	r.units = r.parsed.Units
	return nil
}

// videoRules: a duration inside the model's range and its resolution tier, and a
// webhook URL whose host resolves to public addresses. The webhook is resolved only
// here, after the key was accepted, so that unauthenticated callers cannot make the
// gateway resolve names.
func (r *Request) videoRules(ctx context.Context) *apierr.Error {
	d, e := video.Admit(r.parsed.Video, r.model)
	if e != nil {
		return e
	}
	r.units = d
	if u := r.parsed.Video.WebhookURL; u != "" {
		if e := r.svc.cfg.Webhooks.Check(ctx, u); e != nil {
			return e
		}
	}
	return nil
}

// settleAudio settles a speech success at its headers: audio goes to the client as the
// provider sent it, billed by the characters held; an answer that is not audio is
// unusable.
func (r *Request) settleAudio(ctx context.Context, st *responseState, private []string) Action {
	if !audioType(st.ct) {
		r.release(ctx, "upstream_unusable_response")
		r.reportHealth(st.status, apierr.UpstreamError, nil)
		return r.fail(upstreamError(apierr.UpstreamError))
	}
	r.reportHealth(st.status, "", nil)
	r.commitUnits(ctx, r.units)
	return Action{ResponseBodyMode: ModeNone, RemoveHeaders: private}
}

// settleImages settles an images answer at its end. The rewriter has checked the body
// is one JSON object with "data": the images asked for are billed, none when "data"
// came back empty.
func (r *Request) settleImages(ctx context.Context) {
	if f, ok := r.resp.rw.(interface{ RequiredFilled() bool }); ok && !f.RequiredFilled() {
		r.release(ctx, "no_image")
		return
	}
	r.commitUnits(ctx, r.units)
}
