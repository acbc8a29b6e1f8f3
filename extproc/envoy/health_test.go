package envoy_test

import (
	"testing"
	"time"

	"github.com/llmgw/gateway/extproc/health"
	"github.com/llmgw/gateway/extproc/internal/replay"
	"github.com/llmgw/gateway/extproc/lifecycle"
	"github.com/llmgw/gateway/internal/testkit"
)

// TestACoolingChannelIsSkippedByLaterRequests: a channel whose provider account refused
// cools on this replica; while it does, a request for a model with no other channel is
// answered at once in the client's envelope (upstream_account_unavailable: every
// candidate cools for its account) and nothing is held; once the cooldown is over, one
// request probes the channel again.
func TestACoolingChannelIsSkippedByLaterRequests(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	tracker := health.New(health.Config{Now: func() time.Time { return now }})
	f := newFake()
	h := replay.Start(t, replay.Service(t, f, func(c *lifecycle.Config) { c.Health = tracker }))

	x := admit(t, h, chatOK)
	x.Send(replay.ResponseHeaders(429, "content-type", "application/json"))
	r := x.Send(replay.ResponseBody([]byte(`{"error":{"message":"slow down","type":"requests","code":"rate_limit_exceeded"}}`), true))
	checkError(t, r, testkit.WantError(503, "upstream_account_unavailable", "api_error").WithRetry(""), false)
	x.Close()
	if s, why := tracker.State("mock-demo-chat"); s != health.Cooling || why != health.RateLimited {
		t.Fatalf("channel state %v (%v), want cooling after the 429", s, why)
	}

	// While it cools: no upstream call, no hold, a retryable 503.
	_, _, resp := h.Post(t, "/v1/chat/completions", []byte(chatOK), bearer(keyPaid)...)
	checkError(t, resp, testkit.WantError(503, "service_unavailable", "api_error"), false)
	if len(f.Reserves) != 1 {
		t.Errorf("reserves %d, want only the first request's", len(f.Reserves))
	}

	// An exhausted account (OpenAI's 429 insufficient_quota) cools it for the account:
	// the answer says so.
	now = now.Add(time.Hour)
	x = admit(t, h, chatOK)
	x.Send(replay.ResponseHeaders(429, "content-type", "application/json"))
	x.Send(replay.ResponseBody([]byte(`{"error":{"message":"quota","type":"insufficient_quota","code":"insufficient_quota"}}`), true))
	x.Close()
	if _, why := tracker.State("mock-demo-chat"); why != health.Account {
		t.Errorf("last failure %v, want account", why)
	}
	_, _, resp = h.Post(t, "/v1/chat/completions", []byte(chatOK), bearer(keyPaid)...)
	checkError(t, resp, testkit.WantError(503, "upstream_account_unavailable", "api_error").WithRetry(""), false)

	// After the cooldown one request probes; its success makes the channel healthy.
	now = now.Add(time.Hour)
	x = admit(t, h, chatOK)
	if s, _ := tracker.State("mock-demo-chat"); s != health.Probing {
		t.Errorf("state %v, want probing", s)
	}
	x.Send(replay.ResponseHeaders(200, "content-type", "application/json"))
	x.Send(replay.ResponseBody([]byte(`{"id":"c","object":"chat.completion","model":"mock-gpt","choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}],"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}}`), true))
	x.Close()
	if s, _ := tracker.State("mock-demo-chat"); s != health.Healthy {
		t.Errorf("state %v after a good answer, want healthy", s)
	}
}
