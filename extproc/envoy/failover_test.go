package envoy_test

import (
	"bytes"
	"os"
	"strings"
	"testing"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"

	"github.com/llmgw/gateway/accounting/server/servertest"
	"github.com/llmgw/gateway/extproc/catalog"
	"github.com/llmgw/gateway/extproc/health"
	"github.com/llmgw/gateway/extproc/internal/replay"
	"github.com/llmgw/gateway/extproc/lifecycle"
	"github.com/llmgw/gateway/internal/demoenv"
	"github.com/llmgw/gateway/internal/testkit"
	accountingv1 "github.com/llmgw/gateway/proto/accounting/v1"
)

// failoverCatalog is demo-failover of the local stack (docs/local-stack.md): an out-of-funds
// OpenAI account, a port where nothing listens, an out-of-funds Anthropic account, then
// a working OpenAI account.
const failoverCatalog = `
models:
  - {id: demo-failover, kind: chat, prices: {input_per_mtok: 1000000, output_per_mtok: 2000000}, max_output_tokens: 4096}
channels:
  - {name: fo-openai-exhausted, model: demo-failover, cluster: mock, format: openai, upstream_model: mock-gpt, credential_env: DEMO_EXHAUSTED_KEY}
  - {name: fo-unreachable, model: demo-failover, cluster: unreachable, format: openai, upstream_model: mock-gpt, credential_env: DEMO_OPENAI_KEY, priority: 1}
  - {name: fo-anthropic-exhausted, model: demo-failover, cluster: mock, format: anthropic, upstream_model: mock-claude, credential_env: DEMO_EXHAUSTED_KEY, priority: 2}
  - {name: fo-openai, model: demo-failover, cluster: mock, format: openai, upstream_model: mock-gpt, credential_env: DEMO_OPENAI_KEY, priority: 3}
clusters:
  - {name: mock, address: "127.0.0.1:18080"}
  - {name: unreachable, address: "127.0.0.1:1"}
`

// failoverStack is extproc with failover on doc's catalog (a real health tracker, so
// cooldowns last) over the real accounting service, and a funded account's key.
func failoverStack(t *testing.T, doc string) (s *realStack, cat *catalog.Catalog, tracker *health.Tracker, acct, key string) {
	t.Helper()
	cat, err := catalog.Parse([]byte(doc), demoenv.Lookup, os.ReadFile)
	if err != nil {
		t.Fatal(err)
	}
	tracker = health.New(health.Config{})
	s = startRealService(t, servertest.Options{}, func(c *lifecycle.Config) {
		c.Catalog, c.Failover, c.Health = cat, true, tracker
	})
	acct = s.account(t, "default", 1_000_000)
	_, key = s.key(t, &accountingv1.CreateKeyRequest{AccountId: acct})
	return s, cat, tracker, acct, key
}

// header is the value a header mutation sets for name.
func header(hm *extprocv3.HeaderMutation, name string) (string, bool) {
	for _, h := range hm.GetSetHeaders() {
		if h.GetHeader().GetKey() == name {
			return string(h.GetHeader().GetRawValue()), true
		}
	}
	return "", false
}

// TestFailoverReplay plays the exact message sequence Envoy sends for a request whose
// first three attempts fail (an account out of funds answering 429, a connection that
// never happens, an Anthropic account out of funds answering 400) and whose fourth
// succeeds, against the real accounting service: the request is held once, each
// attempt gets its channel's request, each failure becomes the router's retriable 503,
// the answer goes on and is charged exactly once; a second request skips the cooling
// channels (one attempt allowed).
func TestFailoverReplay(t *testing.T) {
	s, cat, tracker, acct, key := failoverStack(t, failoverCatalog)
	m, _ := cat.Model("demo-failover")
	cluster := catalog.FailoverCluster(m, m.Candidates("default"))
	body := `{"model":"demo-failover","max_tokens":64,"messages":[{"role":"user","content":"hello there"}]}`
	const rid = "8a0f3d4e-1c2b-4a5d-9e6f-7a8b9c0d1e2f"

	// The request's own stream: admitted, held once, routed to the failover cluster.
	d := s.h.Open(t)
	hr := d.Send(replay.PostHeaders("/v1/chat/completions", len(body), "authorization", "Bearer "+key, "x-request-id", rid))
	if hr.GetImmediateResponse() != nil {
		t.Fatalf("refused: %v", hr)
	}
	br := d.Send(replay.RequestBody([]byte(body), true))
	mut := br.GetRequestBody().GetResponse().GetHeaderMutation()
	if v, _ := header(mut, lifecycle.RoutingHeader); v != cluster {
		t.Fatalf("routed to %q, want the failover cluster %q (%v)", v, cluster, br)
	}
	if v, _ := header(mut, "x-envoy-max-retries"); v != "3" {
		t.Errorf("x-envoy-max-retries = %q, want 3 (four candidates)", v)
	}
	if br.GetRequestBody().GetResponse().GetBodyMutation() != nil {
		t.Error("the request's own stream rewrote the body: each attempt does")
	}
	_, reserved := s.balance(t, acct)
	if reserved == 0 {
		t.Fatal("nothing held")
	}

	// Attempt 1: OpenAI, out of funds (429 insufficient_quota).
	a1 := s.h.OpenAttempt(t)
	r1 := a1.Send(replay.AttemptHeaders(rid, "fo-openai-exhausted"))
	c1 := r1.GetRequestHeaders().GetResponse()
	if c1.GetStatus() != extprocv3.CommonResponse_CONTINUE_AND_REPLACE || !bytes.Contains(c1.GetBodyMutation().GetBody(), []byte(`"model":"mock-gpt"`)) {
		t.Fatalf("attempt 1 request = %v", r1)
	}
	if v, _ := header(c1.GetHeaderMutation(), "authorization"); v != "Bearer sk-mock-exhausted" {
		t.Errorf("attempt 1 credential = %q", v)
	}
	checkMode(t, a1.Send(replay.ResponseHeaders(429, "content-type", "application/json")), none, buffered)
	r := a1.Send(replay.ResponseBody([]byte(`{"error":{"message":"You exceeded your current quota","type":"insufficient_quota","code":"insufficient_quota"}}`), true))
	if v, _ := header(r.GetResponseBody().GetResponse().GetHeaderMutation(), ":status"); v != "503" {
		t.Fatalf("attempt 1 not turned into the retriable status: %v", r)
	}
	a1.Close()

	// Attempt 2: the connection never happens — Envoy ends the stream after the headers.
	a2 := s.h.OpenAttempt(t)
	if r := a2.Send(replay.AttemptHeaders(rid, "fo-unreachable")); r.GetRequestHeaders() == nil {
		t.Fatalf("attempt 2: %v", r)
	}
	a2.Close()

	// Attempt 3: Anthropic, out of funds (400 with a message): translated, refused.
	a3 := s.h.OpenAttempt(t)
	r3 := a3.Send(replay.AttemptHeaders(rid, "fo-anthropic-exhausted"))
	c3 := r3.GetRequestHeaders().GetResponse()
	if v, _ := header(c3.GetHeaderMutation(), ":path"); v != "/v1/messages" {
		t.Errorf("attempt 3 path = %q", v)
	}
	if v, _ := header(c3.GetHeaderMutation(), "x-api-key"); v != "sk-mock-exhausted" {
		t.Errorf("attempt 3 credential = %q", v)
	}
	if !bytes.Contains(c3.GetBodyMutation().GetBody(), []byte(`"model":"mock-claude"`)) {
		t.Errorf("attempt 3 body = %s", c3.GetBodyMutation().GetBody())
	}
	a3.Send(replay.ResponseHeaders(400, "content-type", "application/json"))
	r = a3.Send(replay.ResponseBody([]byte(`{"type":"error","error":{"type":"invalid_request_error","message":"Your credit balance is too low to access the Anthropic API."}}`), true))
	if v, _ := header(r.GetResponseBody().GetResponse().GetHeaderMutation(), lifecycle.AttemptFailureHeader); v != "account" {
		t.Fatalf("attempt 3 = %v", r)
	}
	a3.Close()

	// Attempt 4 answers; a channel never gets a second attempt.
	if r := s.h.OpenAttempt(t).Send(replay.AttemptHeaders(rid, "fo-openai-exhausted")); r.GetImmediateResponse() == nil {
		t.Errorf("a second attempt on one channel was made: %v", r)
	}
	a4 := s.h.OpenAttempt(t)
	a4.Send(replay.AttemptHeaders(rid, "fo-openai"))
	if r := a4.Send(replay.ResponseHeaders(200, "content-type", "application/json")); r.GetResponseHeaders().GetResponse() != nil {
		t.Errorf("a success was changed by its attempt: %v", r)
	}
	a4.Close()

	// The request's own stream sees the success and charges it once.
	d.Send(replay.ResponseHeaders(200, "content-type", "application/json"))
	out := d.Send(replay.ResponseBody([]byte(`{"id":"x","object":"chat.completion","model":"mock-gpt","choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}],"usage":{"prompt_tokens":12,"completion_tokens":5,"total_tokens":17}}`), true))
	if !bytes.Contains(out.GetResponseBody().GetResponse().GetBodyMutation().GetBody(), []byte(`"model":"demo-failover"`)) {
		t.Errorf("answer not under the public model: %v", out)
	}
	d.Close()
	balance, reserved := s.balance(t, acct)
	if want := int64(1_000_000 - (12*1 + 5*2)); balance != want || reserved != 0 {
		t.Errorf("balance %d reserved %d, want %d and 0: one charge, the usage's price", balance, reserved, want)
	}
	for _, ch := range []string{"fo-openai-exhausted", "fo-unreachable", "fo-anthropic-exhausted"} {
		if tracker.Usable(ch) {
			t.Errorf("%s is not cooling after its failure", ch)
		}
	}

	// The next request may still try every channel: the router skips the cooling ones as
	// long as its view of their health is current, and a view a moment older than this
	// replica's must not cost the request the attempt its answer needs.
	d2 := s.h.Open(t)
	d2.Send(replay.PostHeaders("/v1/chat/completions", len(body), "authorization", "Bearer "+key, "x-request-id", rid+"-2"))
	br2 := d2.Send(replay.RequestBody([]byte(body), true))
	if v, _ := header(br2.GetRequestBody().GetResponse().GetHeaderMutation(), "x-envoy-max-retries"); v != "3" {
		t.Errorf("second request: x-envoy-max-retries = %q, want 3 (four candidates, three cooling)", v)
	}
	d2.Cancel()
}

// TestFailoverEveryAttemptFailed: when no attempt's answer goes on, the client gets the
// verdict over all of them and nothing is charged.
func TestFailoverEveryAttemptFailed(t *testing.T) {
	s, _, _, acct, key := failoverStack(t, strings.Replace(failoverCatalog, "credential_env: DEMO_OPENAI_KEY, priority: 3", "credential_env: DEMO_EXHAUSTED_KEY, priority: 3", 1))
	body := `{"model":"demo-failover","messages":[{"role":"user","content":"hello"}]}`
	const rid = "0b1c2d3e-4f50-4617-8829-3a4b5c6d7e8f"
	d := s.h.Open(t)
	d.Send(replay.PostHeaders("/v1/chat/completions", len(body), "authorization", "Bearer "+key, "x-request-id", rid))
	d.Send(replay.RequestBody([]byte(body), true))
	for _, ch := range []string{"fo-openai-exhausted", "fo-unreachable", "fo-anthropic-exhausted", "fo-openai"} {
		a := s.h.OpenAttempt(t)
		a.Send(replay.AttemptHeaders(rid, ch))
		if ch != "fo-unreachable" {
			a.Send(replay.ResponseHeaders(429, "content-type", "application/json"))
			a.Send(replay.ResponseBody([]byte(`{"error":{"message":"quota","type":"insufficient_quota","code":"insufficient_quota"}}`), true))
		}
		a.Close()
	}
	// The last attempt's 503 reaches the request's stream.
	d.Send(replay.ResponseHeaders(503, "content-type", "application/json", lifecycle.AttemptFailureHeader, "account"))
	r := d.Send(replay.ResponseBody([]byte(`{"error":{"message":"quota","type":"insufficient_quota","code":"insufficient_quota"}}`), true))
	im := r.GetImmediateResponse()
	if im == nil || im.GetStatus().GetCode() != 503 || !bytes.Contains(im.GetBody(), []byte(`"code":"service_unavailable"`)) ||
		bytes.Contains(im.GetBody(), []byte("quota")) {
		t.Errorf("answer = %v, want 503 service_unavailable (one channel could not be reached) without the provider's words", r)
	}
	d.Close()
	if balance, reserved := s.balance(t, acct); balance != 1_000_000 || reserved != 0 {
		t.Errorf("balance %d reserved %d: a failed request cost something", balance, reserved)
	}
}

// TestFailoverClientLeavesMidway: a client that leaves while the router is between
// attempts releases the hold; nothing is charged, and an attempt arriving after that is
// not made.
func TestFailoverClientLeavesMidway(t *testing.T) {
	s, _, _, acct, key := failoverStack(t, failoverCatalog)
	body := `{"model":"demo-failover","messages":[{"role":"user","content":"hello"}]}`
	const rid = "5c6d7e8f-9a0b-4c1d-8e2f-3a4b5c6d7e8f"
	d := s.h.Open(t)
	d.Send(replay.PostHeaders("/v1/chat/completions", len(body), "authorization", "Bearer "+key, "x-request-id", rid))
	d.Send(replay.RequestBody([]byte(body), true))
	a := s.h.OpenAttempt(t)
	a.Send(replay.AttemptHeaders(rid, "fo-openai-exhausted"))
	a.Send(replay.ResponseHeaders(503, "content-type", "application/json"))
	a.Send(replay.ResponseBody([]byte(`{"error":{"message":"overloaded","type":"server_error"}}`), true))
	a.Close()
	d.Cancel() // the client is gone: Envoy resets the request's stream
	testkit.WaitFor(t, "the hold released", func() bool { _, reserved := s.balance(t, acct); return reserved == 0 })
	if balance, reserved := s.balance(t, acct); balance != 1_000_000 || reserved != 0 {
		t.Errorf("balance %d reserved %d after the client left mid-failover", balance, reserved)
	}
	late := s.h.OpenAttempt(t)
	if r := late.Send(replay.AttemptHeaders(rid, "fo-openai")); r.GetImmediateResponse() == nil {
		t.Errorf("an attempt after the request ended was made: %v", r)
	}
}
