package lifecycle_test

import (
	"context"
	"errors"
	"net/netip"
	"strings"
	"testing"

	"github.com/llmgw/gateway/accounting/ledger"
	"github.com/llmgw/gateway/extproc/internal/replay"
	"github.com/llmgw/gateway/extproc/lifecycle"
	"github.com/llmgw/gateway/extproc/webhook"
	"github.com/llmgw/gateway/internal/testkit"
)

// fakeDNS resolves a fixed table; other names do not resolve.
type fakeDNS map[string]string

var _ webhook.Resolver = fakeDNS(nil)

func (f fakeDNS) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	ip, ok := f[host]
	if !ok {
		return nil, errors.New("no such host")
	}
	return []netip.Addr{netip.MustParseAddr(ip)}, nil
}

// withDNS wires the webhook validator to the fake resolver, with llmgw.dev as the
// service's own domain.
func withDNS(c *lifecycle.Config) {
	c.Webhooks = &webhook.Validator{
		Resolver: fakeDNS{"hooks.example.com": "93.184.215.14", "evil.example.com": "10.0.0.8", "gw.llmgw.dev": "93.184.215.20"},
		OwnHosts: []string{"llmgw.dev"},
	}
}

// TestEndpointErrors: every refusal of admission on the other endpoints (Responses,
// embeddings, speech, images, video submission) is the spec's error naming the field at
// fault, and nothing is held or settled except the one reservation the ledger itself
// refused; a duration out of range names the range.
func TestEndpointErrors(t *testing.T) {
	const (
		responses  = "/v1/responses"
		embeddings = "/v1/embeddings"
		multimodal = "/v1/embeddings/multimodal"
		speech     = "/v1/audio/speech"
		images     = "/v1/images/generations"
		videos     = "/v1/video/generations"
	)
	bad := func(code, param string) testkit.APIError {
		return testkit.WantError(400, code, "invalid_request_error").WithParam(param)
	}
	tests := []refusal{
		// Responses (4.4)
		{name: "responses invalid json", path: responses, body: `{"model":`, w: bad("invalid_request", "")},
		{name: "responses model missing", path: responses, body: `{"input":"hi"}`, w: bad("invalid_model", "model")},
		{name: "responses model with space", path: responses, body: `{"model":"demo responses","input":"hi"}`, w: bad("invalid_model", "model")},
		{name: "responses input missing", path: responses, body: `{"model":"demo-responses"}`, w: bad("invalid_request", "input")},
		{name: "responses input number", path: responses, body: `{"model":"demo-responses","input":3}`, w: bad("invalid_request", "input")},
		{name: "responses input item not object", path: responses, body: `{"model":"demo-responses","input":["hi"]}`, w: bad("invalid_request", "input[0]")},
		{name: "responses part without type", path: responses, body: `{"model":"demo-responses","input":[{"role":"user","content":[{"text":"x"}]}]}`, w: bad("invalid_request", "input[0].content[0].type")},
		{name: "responses instructions number", path: responses, body: `{"model":"demo-responses","input":"hi","instructions":1}`, w: bad("invalid_request", "instructions")},
		{name: "responses max_output_tokens zero", path: responses, body: `{"model":"demo-responses","input":"hi","max_output_tokens":0}`, w: bad("invalid_max_tokens", "max_output_tokens")},
		{name: "responses max_output_tokens fraction", path: responses, body: `{"model":"demo-responses","input":"hi","max_output_tokens":2.5}`, w: bad("invalid_max_tokens", "max_output_tokens")},
		{name: "responses max_output_tokens above model", path: responses, body: `{"model":"demo-responses","input":"hi","max_output_tokens":4097}`, w: bad("invalid_max_tokens", "max_output_tokens")},
		{name: "responses stream string", path: responses, body: `{"model":"demo-responses","input":"hi","stream":"true"}`, w: bad("invalid_stream", "stream")},
		{name: "responses temperature", path: responses, body: `{"model":"demo-responses","input":"hi","temperature":-0.1}`, w: bad("invalid_request", "temperature")},
		{name: "responses top_p", path: responses, body: `{"model":"demo-responses","input":"hi","top_p":2}`, w: bad("invalid_request", "top_p")},
		{name: "responses tools not array", path: responses, body: `{"model":"demo-responses","input":"hi","tools":{}}`, w: bad("invalid_request", "tools")},
		{name: "responses metadata string", path: responses, body: `{"model":"demo-responses","input":"hi","metadata":"x"}`, w: bad("invalid_request", "metadata")},
		{name: "responses no key", path: responses, body: `{"model":"demo-responses","input":"hi"}`, headers: []string{}, w: testkit.WantError(401, "invalid_api_key", "invalid_request_error")},
		{name: "responses suspended", path: responses, body: `{"model":"demo-responses","input":"hi"}`, headers: bearer(replay.KeySuspended), w: testkit.WantError(403, "account_suspended", "permission_error")},
		{name: "responses embeddings model", path: responses, body: `{"model":"demo-embed","input":"hi"}`, w: testkit.WantError(403, "model_not_available", "permission_error").WithParam("model")},
		{name: "responses not allowed", path: responses, body: `{"model":"demo-responses","input":"hi"}`, headers: bearer(replay.KeyScoped), w: testkit.WantError(403, "model_not_allowed", "permission_error").WithParam("model")},
		{name: "responses requires top-up", path: responses, body: `{"model":"demo-responses","input":"hi"}`, headers: bearer(replay.KeyNew), w: testkit.WantError(403, "model_requires_topup", "permission_error").WithParam("model")},
		{name: "responses insufficient", path: responses, body: `{"model":"demo-responses","input":"hi"}`, reserveE: ledger.Refuse(ledger.ReasonInsufficientCredits, ""), reserved: true, w: testkit.WantError(402, "insufficient_credits", "invalid_request_error")},
		{name: "responses too large", path: responses, body: `{"model":"demo-responses","input":"` + strings.Repeat("a", 2<<20) + `"}`, w: testkit.WantError(413, "request_body_too_large", "invalid_request_error")},
		// Embeddings (4.5)
		{name: "embeddings input missing", path: embeddings, body: `{"model":"demo-embed"}`, w: bad("invalid_request", "input")},
		{name: "embeddings empty string", path: embeddings, body: `{"model":"demo-embed","input":""}`, w: bad("invalid_request", "input")},
		{name: "embeddings empty array", path: embeddings, body: `{"model":"demo-embed","input":[]}`, w: bad("invalid_request", "input")},
		{name: "embeddings mixed array", path: embeddings, body: `{"model":"demo-embed","input":["a",1]}`, w: bad("invalid_request", "input")},
		{name: "embeddings object", path: embeddings, body: `{"model":"demo-embed","input":{"text":"a"}}`, w: bad("invalid_request", "input")},
		{name: "embeddings negative token", path: embeddings, body: `{"model":"demo-embed","input":[1,-2]}`, w: bad("invalid_request", "input")},
		{name: "embeddings fractional token", path: embeddings, body: `{"model":"demo-embed","input":[1,2.5]}`, w: bad("invalid_request", "input")},
		{name: "embeddings empty token array", path: embeddings, body: `{"model":"demo-embed","input":[[1],[]]}`, w: bad("invalid_request", "input")},
		{name: "embeddings encoding_format", path: embeddings, body: `{"model":"demo-embed","input":"a","encoding_format":"int8"}`, w: bad("invalid_request", "encoding_format")},
		{name: "embeddings dimensions zero", path: embeddings, body: `{"model":"demo-embed","input":"a","dimensions":0}`, w: bad("invalid_request", "dimensions")},
		{name: "embeddings dimensions fraction", path: embeddings, body: `{"model":"demo-embed","input":"a","dimensions":1.5}`, w: bad("invalid_request", "dimensions")},
		{name: "embeddings stream string", path: embeddings, body: `{"model":"demo-embed","input":"a","stream":1}`, w: bad("invalid_stream", "stream")},
		{name: "embeddings stream true", path: embeddings, body: `{"model":"demo-embed","input":"a","stream":true}`, w: bad("invalid_request", "stream")},
		{name: "embeddings chat model", path: embeddings, body: `{"model":"demo-chat","input":"a"}`, w: testkit.WantError(403, "model_not_available", "permission_error").WithParam("model")},
		{name: "embeddings requires top-up", path: embeddings, body: `{"model":"demo-embed","input":"a"}`, headers: []string{"x-api-key", replay.KeyNew}, w: testkit.WantError(403, "model_requires_topup", "permission_error").WithParam("model")},
		{name: "embeddings key limit", path: embeddings, body: `{"model":"demo-embed","input":"a"}`, reserveE: &ledger.Refusal{Reason: ledger.ReasonKeyLimitReached, RetryAfter: 60, Limit: "daily"}, reserved: true, w: testkit.WantError(429, "key_limit_reached", "rate_limit_error").WithRetry("60")},
		{name: "multimodal without a channel that serves it", path: multimodal, body: `{"model":"demo-embed","input":[{"text":"a"}]}`, w: testkit.WantError(403, "model_not_available", "permission_error").WithParam("model")},
		{name: "multimodal input missing", path: multimodal, body: `{"model":"demo-embed"}`, w: bad("invalid_request", "input")},
		// Speech (4.6)
		{name: "speech input missing", path: speech, body: `{"model":"demo-tts","voice":"alloy"}`, w: bad("invalid_request", "input")},
		{name: "speech input empty", path: speech, body: `{"model":"demo-tts","input":"","voice":"alloy"}`, w: bad("invalid_request", "input")},
		{name: "speech voice missing", path: speech, body: `{"model":"demo-tts","input":"hi"}`, w: bad("invalid_request", "voice")},
		{name: "speech voice not the model's", path: speech, body: `{"model":"demo-tts","input":"hi","voice":"nova"}`, w: bad("invalid_request", "voice")},
		{name: "speech format", path: speech, body: `{"model":"demo-tts","input":"hi","voice":"alloy","response_format":"ogg"}`, w: bad("invalid_request", "response_format")},
		{name: "speech speed zero", path: speech, body: `{"model":"demo-tts","input":"hi","voice":"alloy","speed":0}`, w: bad("invalid_request", "speed")},
		{name: "speech speed string", path: speech, body: `{"model":"demo-tts","input":"hi","voice":"alloy","speed":"1"}`, w: bad("invalid_request", "speed")},
		{name: "speech image model", path: speech, body: `{"model":"demo-image","input":"hi","voice":"alloy"}`, w: testkit.WantError(403, "model_not_available", "permission_error").WithParam("model")},
		{name: "speech concurrency", path: speech, body: `{"model":"demo-tts","input":"hi","voice":"alloy"}`, reserveE: &ledger.Refusal{Reason: ledger.ReasonConcurrencyLimitExceeded}, reserved: true, w: testkit.WantError(429, "concurrency_limit_exceeded", "rate_limit_error").WithRetry("5")},
		// Images (4.7)
		{name: "images prompt missing", path: images, body: `{"model":"demo-image"}`, w: bad("invalid_request", "prompt")},
		{name: "images prompt empty", path: images, body: `{"model":"demo-image","prompt":""}`, w: bad("invalid_request", "prompt")},
		{name: "images n two", path: images, body: `{"model":"demo-image","prompt":"a cat","n":2}`, w: bad("invalid_n", "n")},
		{name: "images n string", path: images, body: `{"model":"demo-image","prompt":"a cat","n":"1"}`, w: bad("invalid_n", "n")},
		{name: "images response_format", path: images, body: `{"model":"demo-image","prompt":"a cat","response_format":"png"}`, w: bad("invalid_request", "response_format")},
		{name: "images size number", path: images, body: `{"model":"demo-image","prompt":"a cat","size":1024}`, w: bad("invalid_request", "size")},
		{name: "images model missing", path: images, body: `{"prompt":"a cat"}`, w: bad("invalid_model", "model")},
		{name: "images rate limit", path: images, body: `{"model":"demo-image","prompt":"a cat"}`, reserveE: &ledger.Refusal{Reason: ledger.ReasonRateLimitExceeded, RetryAfter: 7}, reserved: true, w: testkit.WantError(429, "rate_limit_exceeded", "rate_limit_error").WithRetry("7")},
		// Video submission
		{name: "video duration too short", path: videos, body: `{"model":"demo-video","prompt":"a wave","duration":1}`, w: bad("invalid_duration", "duration")},
		{name: "video duration too long", path: videos, body: `{"model":"demo-video","prompt":"a wave","duration":16}`, w: bad("invalid_duration", "duration")},
		{name: "video duration fraction", path: videos, body: `{"model":"demo-video","prompt":"a wave","duration":2.5}`, w: bad("invalid_duration", "duration")},
		{name: "video duration string", path: videos, body: `{"model":"demo-video","prompt":"a wave","duration":"5"}`, w: bad("invalid_duration", "duration")},
		{name: "video duration zero", path: videos, body: `{"model":"demo-video","prompt":"a wave","duration":0}`, w: bad("invalid_duration", "duration")},
		{name: "video resolution other tier", path: videos, body: `{"model":"demo-video","prompt":"a wave","resolution":"1080p"}`, w: bad("resolution_not_priced", "resolution")},
		{name: "video tier in prompt", path: videos, body: `{"model":"demo-video","prompt":"a wave in 4K"}`, w: bad("resolution_not_priced", "resolution")},
		{name: "video webhook http", path: videos, body: `{"model":"demo-video","prompt":"a wave","webhook_url":"http://hooks.example.com/x"}`, w: bad("invalid_webhook_url", "webhook_url")},
		{name: "video webhook ip", path: videos, body: `{"model":"demo-video","prompt":"a wave","webhook_url":"https://0x7f.1/x"}`, w: bad("invalid_webhook_url", "webhook_url")},
		{name: "video webhook resolves private", path: videos, body: `{"model":"demo-video","prompt":"a wave","webhook_url":"https://evil.example.com/x"}`, w: bad("invalid_webhook_url", "webhook_url")},
		{name: "video webhook own domain", path: videos, body: `{"model":"demo-video","prompt":"a wave","webhook_url":"https://gw.llmgw.dev/x"}`, w: bad("invalid_webhook_url", "webhook_url")},
		{name: "video webhook does not resolve", path: videos, body: `{"model":"demo-video","prompt":"a wave","webhook_url":"https://nx.example.com/x"}`, w: bad("invalid_webhook_url", "webhook_url")},
		{name: "video stream", path: videos, body: `{"model":"demo-video","prompt":"a wave","stream":true}`, w: bad("invalid_request", "stream")},
		{name: "video chat model", path: videos, body: `{"model":"demo-chat","prompt":"a wave"}`, w: testkit.WantError(403, "model_not_available", "permission_error").WithParam("model")},
		{name: "video insufficient", path: videos, body: `{"model":"demo-video","prompt":"a wave"}`, reserveE: ledger.Refuse(ledger.ReasonInsufficientCredits, ""), reserved: true, w: testkit.WantError(402, "insufficient_credits", "invalid_request_error")},
	}
	for i := range tests {
		if tests[i].headers == nil {
			tests[i].headers = bearer(replay.KeyPaid)
		}
		if tests[i].w.Code == "invalid_duration" {
			tests[i].message = "from 2 to 15"
		}
	}
	checkRefusals(t, "", false, tests, withDNS)
}
