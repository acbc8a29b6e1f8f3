package envoy_test

import (
	"bytes"
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"testing"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"github.com/llmgw/gateway/accounting/ledger"
	"github.com/llmgw/gateway/extproc/credential"
	"github.com/llmgw/gateway/extproc/internal/replay"
	"github.com/llmgw/gateway/internal/testkit"
	"github.com/tidwall/gjson"
)

// setHeaders returns a common response's set headers by name (testkit.MutationHeaders).
func setHeaders(t *testing.T, c *extprocv3.CommonResponse) map[string]string {
	t.Helper()
	return testkit.MutationHeaders(t, c.GetHeaderMutation())
}

func TestChatMutation(t *testing.T) {
	tests := []struct {
		name         string
		body         string
		headers      []string
		wantBody     string
		includeUsage bool
	}{
		{
			name:     "unknown provider fields kept byte for byte",
			body:     `{ "model" : "demo-chat", "messages":[{"role":"user","content":"hi \u00e9"}], "x_vendor": {"deep": [1, 2.50, "z"]},"max_tokens":7 }`,
			headers:  append(bearer(keyPaid), "x-api-key", keyPaid, "x-gateway-upstream", "evil"),
			wantBody: `{ "model" : "mock-gpt", "messages":[{"role":"user","content":"hi \u00e9"}], "x_vendor": {"deep": [1, 2.50, "z"]},"max_tokens":7 }`,
		},
		{
			name:         "stream gets include_usage",
			body:         `{"model":"demo-chat","stream":true,"messages":[{"role":"user","content":"hi"}]}`,
			headers:      bearer(keyPaid),
			wantBody:     `{"model":"mock-gpt","stream":true,"messages":[{"role":"user","content":"hi"}],"stream_options":{"include_usage":true}}`,
			includeUsage: true,
		},
		{
			name:         "stream_options kept, include_usage forced",
			body:         `{"model":"demo-chat","stream":true,"stream_options":{"include_usage":false,"x":1},"messages":[{"role":"user","content":"hi"}]}`,
			headers:      bearer(keyPaid),
			wantBody:     `{"model":"mock-gpt","stream":true,"stream_options":{"include_usage":true,"x":1},"messages":[{"role":"user","content":"hi"}]}`,
			includeUsage: true,
		},
		{
			name:     "free model without top-up",
			body:     `{"model":"demo-free","messages":[{"role":"user","content":"hi"}]}`,
			headers:  bearer(keyNew),
			wantBody: `{"model":"mock-small","messages":[{"role":"user","content":"hi"}]}`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFake()
			h := replay.Start(t, replay.Service(t, f))
			x, hdr, resp := h.Post(t, "/v1/chat/completions", []byte(tt.body), tt.headers...)
			if hdr.GetRequestHeaders() == nil {
				t.Fatalf("headers reply = %v", hdr)
			}
			if rm := hdr.GetRequestHeaders().GetResponse().GetHeaderMutation().GetRemoveHeaders(); !slices.Contains(rm, "x-gateway-upstream") || !slices.Contains(rm, "authorization") {
				t.Errorf("headers reply removes %v, want the client's x-gateway-upstream and key", rm)
			}
			c := resp.GetRequestBody().GetResponse()
			if c == nil {
				t.Fatalf("body reply = %v", resp)
			}
			got := c.GetBodyMutation().GetBody()
			if string(got) != tt.wantBody {
				t.Errorf("body =\n%s\nwant\n%s", got, tt.wantBody)
			}
			if !c.GetClearRouteCache() {
				t.Error("route cache not cleared")
			}
			hs := setHeaders(t, c)
			if hs["content-length"] != strconv.Itoa(len(got)) {
				t.Errorf("content-length = %q, body is %d bytes", hs["content-length"], len(got))
			}
			if hs["x-gateway-upstream"] != "mock-providers" || hs["authorization"] != "Bearer sk-mock-openai" {
				t.Errorf("headers = %v", hs)
			}
			// Every credential header the client could send goes; the channel's own is set
			// after (removes run before sets).
			if rm := c.GetHeaderMutation().GetRemoveHeaders(); !slices.Equal(rm, credential.HeaderNames) {
				t.Errorf("removes %v, want %v", rm, credential.HeaderNames)
			}
			for k, v := range hs {
				if strings.Contains(v, "gw-") {
					t.Errorf("gateway key leaks upstream in %s", k)
				}
			}
			x.Close()
			reserves, commits, releases := f.Counts()
			if reserves != 1 || commits != 1 || releases != 0 || f.Commits[0].Usage.OutputTokens != 0 {
				t.Errorf("reserves=%d commits=%v releases=%d: a request that reached the provider and ended without a response pays its prompt",
					reserves, f.Commits, releases)
			}
		})
	}
}

func TestMaxCostReserved(t *testing.T) {
	f := newFake()
	h := replay.Start(t, replay.Service(t, f))
	body := `{"model":"demo-chat","max_completion_tokens":1000,"messages":[{"role":"user","content":"hello world"}]}`
	x, _, _ := h.Post(t, "/v1/chat/completions", []byte(body), bearer(keyPaid)...)
	x.Close()
	// input: ceil(1.1*(2 text + 4 message + 3 priming)) + 64 = 10 + 64 = 74 tokens at
	// 1,000,000/M = 74 micros; output: 1000 tokens at 2,000,000/M = 2000 micros; 2
	// micros for the rounding of the input's three parts (plain, cache read, cache
	// write: each rounded up on its own).
	if len(f.Reserves) != 1 || f.Reserves[0].Amount != 2076 || f.Reserves[0].Pool != ledger.PoolGeneral || f.Reserves[0].KeyID != "k-paid" {
		t.Fatalf("reserves = %+v", f.Reserves)
	}
	f2 := newFake()
	h2 := replay.Start(t, replay.Service(t, f2))
	x, _, _ = h2.Post(t, "/v1/chat/completions", []byte(`{"model":"demo-premium","messages":[{"role":"user","content":"hello world"}]}`), bearer(keyPaid)...)
	x.Close()
	// No output limit in the request: the model's 4096 at 60,000,000/M = 245,760; input
	// 74 tokens at 30,000,000/M = 2,220; 2 for rounding.
	if len(f2.Reserves) != 1 || f2.Reserves[0].Amount != 245760+2220+2 || f2.Reserves[0].Pool != ledger.PoolHighCost {
		t.Fatalf("premium reserves = %+v", f2.Reserves)
	}
}

func TestMessagesMutationAndCountTokens(t *testing.T) {
	f := newFake()
	h := replay.Start(t, replay.Service(t, f))
	body := `{"model":"demo-claude","max_tokens":100,"messages":[{"role":"user","content":"hi"}],"metadata":{"user_id":"u"}}`
	x, _, resp := h.Post(t, "/v1/messages", []byte(body), "x-api-key", keyPaid, "authorization", "Bearer "+keyPaid)
	c := resp.GetRequestBody().GetResponse()
	if got := string(c.GetBodyMutation().GetBody()); got != strings.Replace(body, "demo-claude", "mock-claude", 1) {
		t.Errorf("body = %s", got)
	}
	hs := setHeaders(t, c)
	if hs["x-api-key"] != "sk-mock-anthropic" || hs["anthropic-version"] != "2023-06-01" || hs["x-gateway-upstream"] != "mock-providers" || !c.GetClearRouteCache() {
		t.Errorf("headers = %v", hs)
	}
	if rm := c.GetHeaderMutation().GetRemoveHeaders(); !slices.Equal(rm, credential.HeaderNames) {
		t.Errorf("removes %v, want %v", rm, credential.HeaderNames)
	}
	x.Close()

	// The client's anthropic-version is kept.
	x, _, resp = h.Post(t, "/v1/messages", []byte(body), "x-api-key", keyPaid, "anthropic-version", "2024-01-01")
	if _, set := setHeaders(t, resp.GetRequestBody().GetResponse())["anthropic-version"]; set {
		t.Error("client's anthropic-version overwritten")
	}
	x.Close()

	before, _, _ := f.Counts()
	ct := `{"model":"demo-claude","messages":[{"role":"user","content":"hello world"}]}`
	x, _, resp = h.Post(t, "/v1/messages/count_tokens", []byte(ct), "x-api-key", keyPaid)
	ir := resp.GetImmediateResponse()
	if ir == nil || ir.GetStatus().GetCode() != 200 || string(ir.GetBody()) != `{"input_tokens":9}` {
		t.Fatalf("count_tokens = %v", resp)
	}
	x.Close()
	if after, _, _ := f.Counts(); after != before {
		t.Error("count_tokens reserved")
	}
}

func TestModels(t *testing.T) {
	f := newFake()
	h := replay.Start(t, replay.Service(t, f))
	list := func(extra ...string) (int, []string) {
		x := h.Open(t)
		resp := x.Send(replay.RequestHeaders(true, append([]string{":method", "GET", ":path", "/v1/models"}, extra...)...))
		x.Close()
		ir := resp.GetImmediateResponse()
		var body struct {
			Object string `json:"object"`
			Data   []struct {
				ID      string `json:"id"`
				Object  string `json:"object"`
				Created int64  `json:"created"`
				OwnedBy string `json:"owned_by"`
			} `json:"data"`
		}
		if ir.GetStatus().GetCode() == 200 {
			if err := json.Unmarshal(ir.GetBody(), &body); err != nil || body.Object != "list" {
				t.Fatalf("body %s: %v", ir.GetBody(), err)
			}
		}
		var ids []string
		for _, d := range body.Data {
			if d.Object != "model" || d.Created == 0 || d.OwnedBy == "" {
				t.Errorf("entry %+v", d)
			}
			ids = append(ids, d.ID)
		}
		return int(ir.GetStatus().GetCode()), ids
	}
	// The demo models on every cloud (LOCAL-STACK.md), priced: listed for every account
	// that can pay.
	const cloudModels = "demo-gemini demo-vertex-gemini demo-vertex-claude demo-bedrock demo-azure demo-multicloud"
	tests := []struct {
		name    string
		headers []string
		status  int
		want    string
	}{
		{name: "public", status: 200, want: "demo-free demo-chat demo-claude demo-unpriced demo-exhausted demo-broken demo-unreachable demo-failover demo-premium demo-responses demo-embed demo-tts demo-image demo-video demo-restricted demo-cached demo-claude-cached " + cloudModels},
		{name: "paid default tier", headers: bearer(keyPaid), status: 200, want: "demo-free demo-chat demo-claude demo-exhausted demo-broken demo-unreachable demo-failover demo-premium demo-responses demo-embed demo-tts demo-image demo-video demo-cached demo-claude-cached " + cloudModels},
		{name: "enterprise tier", headers: bearer(keyEnterp), status: 200, want: "demo-free demo-chat demo-claude demo-exhausted demo-broken demo-unreachable demo-failover demo-premium demo-responses demo-embed demo-tts demo-image demo-video demo-restricted demo-cached demo-claude-cached " + cloudModels},
		{name: "no top-up", headers: bearer(keyNew), status: 200, want: "demo-free"},
		{name: "allowlist", headers: []string{"x-api-key", keyScoped}, status: 200, want: "demo-free"},
		{name: "invalid key", headers: bearer(keyUnknown), status: 401},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st, ids := list(tt.headers...)
			if st != tt.status || strings.Join(ids, " ") != tt.want {
				t.Errorf("status %d, ids %v; want %d %s", st, ids, tt.status, tt.want)
			}
		})
	}
}

// admit plays an admitted chat request and returns its exchange.
func admit(t *testing.T, h *replay.Harness, body string) *replay.Exchange {
	t.Helper()
	x, _, resp := h.Post(t, "/v1/chat/completions", []byte(body), bearer(keyPaid)...)
	if resp.GetRequestBody() == nil {
		t.Fatalf("not admitted: %v", resp)
	}
	return x
}

func TestResponseJSONCommits(t *testing.T) {
	f := newFake()
	h := replay.Start(t, replay.Service(t, f))
	x := admit(t, h, chatOK)
	r := x.Send(replay.ResponseHeaders(200, "content-type", "application/json", "content-length", "200"))
	checkMode(t, r, buffered, buffered)
	up := `{"id":"c1","object":"chat.completion","created":1,"model":"mock-gpt","choices":[],"usage":{"prompt_tokens":1000,"completion_tokens":500,"total_tokens":1500},"x":1}`
	r = x.Send(replay.ResponseBody([]byte(up), true))
	c := r.GetResponseBody().GetResponse()
	got := c.GetBodyMutation().GetBody()
	if string(got) != strings.Replace(up, "mock-gpt", "demo-chat", 1) {
		t.Errorf("body = %s", got)
	}
	if setHeaders(t, c)["content-length"] != strconv.Itoa(len(got)) {
		t.Error("content-length not fixed")
	}
	x.Close()
	// 1000 in at $1/M = 1000 micros, 500 out at $2/M = 1000 micros.
	if len(f.Commits) != 1 || f.Commits[0].Actual != 2000 || f.Commits[0].UpstreamModel != "mock-gpt" || len(f.Releases) != 0 {
		t.Errorf("commits %+v releases %v", f.Commits, f.Releases)
	}
}

func TestResponseSSECommits(t *testing.T) {
	f := newFake()
	h := replay.Start(t, replay.Service(t, f))
	stream := "data: {\"id\":\"c\",\"model\":\"mock-gpt\",\"choices\":[{\"delta\":{\"content\":\"hi\"}}],\"usage\":null}\n\n" +
		"data: {\"id\":\"c\",\"model\":\"mock-gpt\",\"choices\":[],\"usage\":{\"prompt_tokens\":10,\"completion_tokens\":3}}\n\ndata: [DONE]\n\n"
	for split := 1; split < len(stream); split += 7 {
		f.Commits = nil
		x := admit(t, h, `{"model":"demo-chat","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"x"}]}`)
		r := x.Send(replay.ResponseHeaders(200, "content-type", "text/event-stream"))
		checkMode(t, r, buffered, streamed)
		if rm := r.GetResponseHeaders().GetResponse().GetHeaderMutation().GetRemoveHeaders(); len(rm) != 1 || rm[0] != "content-length" {
			t.Errorf("removes %v", rm)
		}
		var out bytes.Buffer
		for _, part := range []string{stream[:split], stream[split:], ""} {
			r = x.Send(replay.ResponseBody([]byte(part), part == ""))
			out.Write(r.GetResponseBody().GetResponse().GetBodyMutation().GetBody())
		}
		x.Close()
		if want := strings.ReplaceAll(stream, "mock-gpt", "demo-chat"); out.String() != want {
			t.Fatalf("split %d: out =\n%q\nwant\n%q", split, out.String(), want)
		}
		if len(f.Commits) != 1 || f.Commits[0].Usage.InputTokens != 10 || f.Commits[0].Usage.OutputTokens != 3 {
			t.Fatalf("split %d: commits %+v", split, f.Commits)
		}
	}
}

func TestResponseErrorsRelease(t *testing.T) {
	tests := []struct {
		name   string
		status int
		ct     string
		body   string
		w      testkit.APIError
	}{
		{name: "openai out of funds", status: 429, ct: "application/json", body: `{"error":{"message":"You exceeded your current quota","type":"insufficient_quota","code":"insufficient_quota"}}`, w: testkit.WantError(503, "upstream_account_unavailable", "api_error").WithRetry("")},
		{name: "upstream 401", status: 401, ct: "application/json", body: `{"error":{"message":"bad key sk-mock"}}`, w: testkit.WantError(503, "upstream_account_unavailable", "api_error").WithRetry("")},
		{name: "no healthy upstream", status: 503, ct: "text/plain", body: `no healthy upstream`, w: testkit.WantError(503, "service_unavailable", "api_error")},
		{name: "upstream 500", status: 500, ct: "application/json", body: `{"error":{"message":"boom"}}`, w: testkit.WantError(502, "upstream_error", "api_error")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFake()
			h := replay.Start(t, replay.Service(t, f))
			x := admit(t, h, chatOK)
			r := x.Send(replay.ResponseHeaders(tt.status, "content-type", tt.ct))
			checkMode(t, r, buffered, buffered)
			r = x.Send(replay.ResponseBody([]byte(tt.body), true))
			checkError(t, r, tt.w, false)
			if bytes.Contains(r.GetImmediateResponse().GetBody(), []byte("sk-mock")) || bytes.Contains(r.GetImmediateResponse().GetBody(), []byte("quota")) {
				t.Error("provider message leaked")
			}
			x.Close()
			if len(f.Commits) != 0 || len(f.Releases) != 1 {
				t.Errorf("commits %v releases %v", f.Commits, f.Releases)
			}
		})
	}
	// An unusable 200 (HTML) is refused at the headers.
	f := newFake()
	h := replay.Start(t, replay.Service(t, f))
	x := admit(t, h, chatOK)
	r := x.Send(replay.ResponseHeaders(200, "content-type", "text/html"))
	checkError(t, r, testkit.WantError(502, "upstream_error", "api_error"), false)
	x.Close()
	if len(f.Commits) != 0 || len(f.Releases) != 1 {
		t.Errorf("commits %v releases %v", f.Commits, f.Releases)
	}
}

func TestCancelSettlesWhatWasDelivered(t *testing.T) {
	tests := []struct {
		name      string
		chunk     string
		committed bool
		prompt    bool // only the prompt is charged (the answer had begun, nothing was delivered)
	}{
		{name: "nothing delivered pays the prompt", chunk: "", prompt: true},
		{name: "delivered text is charged", chunk: "data: {\"model\":\"mock-gpt\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"hello world\"}}]}\n\n", committed: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFake()
			h := replay.Start(t, replay.Service(t, f))
			x := admit(t, h, `{"model":"demo-chat","stream":true,"messages":[{"role":"user","content":"x"}]}`)
			x.Send(replay.ResponseHeaders(200, "content-type", "text/event-stream"))
			x.Send(replay.ResponseBody([]byte(tt.chunk), false))
			x.Cancel()
			// The server settles after Recv fails; poll the fake until it has. Input is the
			// local count of "x" (1 token + 4 + 3 framing), output "hello world" (2).
			testkit.WaitFor(t, "the settlement", func() bool { _, c, rel := f.Counts(); return c+rel == 1 })
			_, commits, _ := f.Counts()
			if commits != 1 {
				t.Fatalf("commits %+v releases %v", f.Commits, f.Releases)
			}
			if tt.prompt && (f.Commits[0].Usage.OutputTokens != 0 || f.Commits[0].Usage.InputTokens != 8 || f.Commits[0].Actual != 8) {
				t.Errorf("commit = %+v, want the prompt alone (8 tokens)", f.Commits[0])
			}
			if tt.committed && (f.Commits[0].Usage.OutputTokens != 2 || f.Commits[0].Usage.InputTokens != 8 || f.Commits[0].Actual != 8+4) {
				t.Errorf("commit = %+v", f.Commits[0])
			}

		})
	}
}

func TestEmptyAndChunkedBodies(t *testing.T) {
	f := newFake()
	h := replay.Start(t, replay.Service(t, f))
	// HTTP/1 Content-Length: 0: headers only, end_of_stream true.
	x := h.Open(t)
	r := x.Send(replay.RequestHeaders(true, ":method", "POST", ":path", "/v1/chat/completions", "content-length", "0", "authorization", "Bearer "+keyPaid))
	checkError(t, r, testkit.WantError(400, "invalid_request", "invalid_request_error"), false)
	x.Close()
	// HTTP/2 empty DATA with END_STREAM: an empty body message.
	x = h.Open(t)
	x.Send(replay.PostHeaders("/v1/chat/completions", -1, bearer(keyPaid)...))
	r = x.Send(replay.RequestBody(nil, true))
	checkError(t, r, testkit.WantError(400, "invalid_request", "invalid_request_error"), false)
	x.Close()
	// Chunked body without content-length: admitted, content-length set.
	x = h.Open(t)
	x.Send(replay.PostHeaders("/v1/chat/completions", -1, bearer(keyPaid)...))
	r = x.Send(replay.RequestBody([]byte(chatOK), true))
	if setHeaders(t, r.GetRequestBody().GetResponse())["content-length"] != strconv.Itoa(len(gjson.Parse(chatOK).Raw)-len("demo-chat")+len("mock-gpt")) {
		t.Errorf("content-length = %v", setHeaders(t, r.GetRequestBody().GetResponse()))
	}
	x.Close()
}
