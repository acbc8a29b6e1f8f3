package lifecycle_test

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/llmgw/gateway/accounting/ledger"
	"github.com/llmgw/gateway/extproc/internal/replay"
	"github.com/llmgw/gateway/extproc/lifecycle"
	"github.com/llmgw/gateway/extproc/wire"
	"github.com/tidwall/gjson"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
)

const secKey = "gw-secu0000000000000000000000000000000000000000"

func secService(t *testing.T) (*lifecycle.Service, *replay.FakeLedger) {
	t.Helper()
	f := &replay.FakeLedger{}
	f.AddKey(secKey, ledger.Grant{KeyID: "k-sec", AccountID: "a-sec", Tier: "default", AccountToppedUp: true})
	return replay.Service(t, f), f
}

func secHeaders(path string, extra ...lifecycle.Header) []lifecycle.Header {
	return append([]lifecycle.Header{
		{":method", "POST"}, {":path", path}, {":authority", "gw"}, {":scheme", "http"},
		{"content-type", "application/json"}, {"authorization", "Bearer " + secKey},
	}, extra...)
}

// TestNestedDuplicateKeysRefused: JSON parsers disagree on which copy of a repeated key
// wins (gjson, which extproc reads with, takes the first; the providers' parsers take the
// last). A repeated key at any depth must therefore be refused before anything is held
// or sent: otherwise extproc validates and prices one request while the provider serves
// another (a stream that never reports usage is not charged; a message whose content the
// estimate never saw runs past the hold).
func TestNestedDuplicateKeysRefused(t *testing.T) {
	msgs := `"messages":[{"role":"user","content":"hi"}]`
	cases := []struct {
		name, path, body, param string
	}{
		{
			name:  "stream usage switched off by a second copy",
			path:  "/v1/chat/completions",
			body:  `{"model":"demo-chat","stream":true,"stream_options":{"include_usage":true,"include_usage":false},` + msgs + `}`,
			param: "stream_options.include_usage",
		},
		{
			name:  "message content the estimate never sees",
			path:  "/v1/chat/completions",
			body:  `{"model":"demo-chat","messages":[{"role":"user","content":"hi","content":"` + strings.Repeat("long ", 200) + `"}]}`,
			param: "messages[0].content",
		},
		{
			name:  "escaped spelling of the same key",
			path:  "/v1/chat/completions",
			body:  `{"model":"demo-chat","stream":true,"stream_options":{"include_usage":true,"include_\u0075sage":false},` + msgs + `}`,
			param: "stream_options.include_usage",
		},
		{
			name:  "anthropic message content",
			path:  "/v1/messages",
			body:  `{"model":"demo-claude","max_tokens":16,"messages":[{"role":"user","content":"a"},{"role":"user","content":"b","content":"c"}]}`,
			param: "messages[1].content",
		},
		{
			name:  "deep in an array of objects",
			path:  "/v1/chat/completions",
			body:  `{"model":"demo-chat","messages":[{"role":"user","content":[{"type":"text","text":"a"},{"type":"text","text":"b","text":"c"}]}]}`,
			param: "messages[0].content[1].text",
		},
		{
			name:  "top level, after many keys",
			path:  "/v1/chat/completions",
			body:  `{"model":"demo-chat",` + msgs + manyKeys(40) + `,"k17":1}`,
			param: "k17",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			svc, f := secService(t)
			r := svc.NewRequest()
			ctx := context.Background()
			if a := r.RequestHeaders(ctx, secHeaders(tc.path), false); a.Immediate != nil {
				t.Fatalf("headers answered %d: %s", a.Immediate.Status, a.Immediate.Body)
			}
			a := r.RequestBody(ctx, []byte(tc.body), true)
			if a.Immediate == nil {
				t.Fatalf("a body with a repeated key was admitted and sent upstream")
			}
			if a.Immediate.Status != 400 {
				t.Fatalf("status %d, want 400: %s", a.Immediate.Status, a.Immediate.Body)
			}
			// The Anthropic envelope has no param field; both name the field in the message.
			if msg := gjson.GetBytes(a.Immediate.Body, "error.message").Str; !strings.Contains(msg, "'"+tc.param+"'") {
				t.Errorf("message %q does not name %q", msg, tc.param)
			}
			if p := gjson.GetBytes(a.Immediate.Body, "error.param"); p.Exists() && p.Str != tc.param {
				t.Errorf("param %q, want %q", p.Str, tc.param)
			}
			if res, _, _ := f.Counts(); res != 0 {
				t.Errorf("%d reservations made for a refused body", res)
			}
			r.End(ctx, "done")
		})
	}
}

// TestDistinctKeysAdmitted: the same key in sibling objects, or in an object and its
// child, is not a repetition.
func TestDistinctKeysAdmitted(t *testing.T) {
	svc, f := secService(t)
	r := svc.NewRequest()
	ctx := context.Background()
	r.RequestHeaders(ctx, secHeaders("/v1/chat/completions"), false)
	body := `{"model":"demo-chat","messages":[{"role":"system","content":"s"},{"role":"user","content":[{"type":"text","text":"a \"role\": {}"}]}],` +
		`"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object","properties":{"type":{"type":"string"},"name":{"type":"object","properties":{}}}}}}]}`
	a := r.RequestBody(ctx, []byte(body), true)
	if a.Immediate != nil {
		t.Fatalf("refused %d: %s", a.Immediate.Status, a.Immediate.Body)
	}
	if res, _, _ := f.Counts(); res != 1 {
		t.Fatalf("%d reservations, want 1", res)
	}
	r.End(ctx, "done")
}

// TestDeepNestingRefused: a 2 MiB body of nested arrays made the recursive JSON
// validator grow a goroutine stack of hundreds of megabytes per request, before any key
// was checked. Nesting is bounded first, in one linear pass.
func TestDeepNestingRefused(t *testing.T) {
	cases := []struct {
		name  string
		depth int
		ok    bool
	}{
		{name: "at the limit", depth: lifecycle.MaxJSONDepth - 3},
		{name: "past the limit", depth: lifecycle.MaxJSONDepth},
		{name: "a megabyte deep", depth: 1<<20 - 64},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			svc, _ := secService(t)
			r := svc.NewRequest()
			ctx := context.Background()
			r.RequestHeaders(ctx, secHeaders("/v1/chat/completions"), false)
			// The messages array (depth 2) holds a message (3) whose content holds the
			// nested arrays.
			body := `{"model":"demo-chat","messages":[{"role":"user","content":` +
				strings.Repeat("[", tc.depth) + strings.Repeat("]", tc.depth) + `}]}`
			a := r.RequestBody(ctx, []byte(body), true)
			if a.Immediate == nil {
				t.Fatal("admitted")
			}
			msg := gjson.GetBytes(a.Immediate.Body, "error.message").Str
			deep := strings.Contains(msg, "nest")
			if want := tc.depth+3 > lifecycle.MaxJSONDepth; deep != want {
				t.Errorf("refused for depth: %v, want %v (%s)", deep, want, msg)
			}
		})
	}
}

func manyKeys(n int) string {
	var b strings.Builder
	for i := range n {
		b.WriteString(`,"k` + strconv.Itoa(i) + `":0`)
	}
	return b.String()
}

// TestProviderAccountHeadersRemoved: a provider's success carries headers about the
// operator's provider account (organization and project ids, its rate limits and what is
// left of them). They describe the gateway's upstream account, not the client's, and are
// removed before the response goes downstream; the rest passes.
func TestProviderAccountHeadersRemoved(t *testing.T) {
	leaky := []string{
		"openai-organization", "openai-project", "x-ratelimit-limit-requests",
		"x-ratelimit-remaining-tokens", "x-ratelimit-reset-tokens", "anthropic-organization-id",
		"anthropic-ratelimit-requests-remaining", "anthropic-ratelimit-input-tokens-limit",
		"anthropic-ratelimit-tokens-reset",
		"x-amzn-requestid", "x-amzn-bedrock-input-token-count", "x-amzn-bedrock-invocation-latency", "x-amz-id-2",
	}
	cases := []struct {
		name, path, body, ct string
	}{
		{name: "chat json", path: "/v1/chat/completions", body: `{"model":"demo-chat","messages":[{"role":"user","content":"hi"}]}`, ct: "application/json"},
		{name: "chat stream", path: "/v1/chat/completions", body: `{"model":"demo-chat","stream":true,"messages":[{"role":"user","content":"hi"}]}`, ct: "text/event-stream"},
		{name: "messages", path: "/v1/messages", body: `{"model":"demo-claude","max_tokens":16,"messages":[{"role":"user","content":"hi"}]}`, ct: "application/json"},
		{name: "speech", path: "/v1/audio/speech", body: `{"model":"demo-tts","input":"hello","voice":"alloy"}`, ct: "audio/mpeg"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			svc, _ := secService(t)
			r := svc.NewRequest()
			ctx := context.Background()
			r.RequestHeaders(ctx, secHeaders(tc.path), false)
			if a := r.RequestBody(ctx, []byte(tc.body), true); a.Immediate != nil {
				t.Fatalf("refused %d: %s", a.Immediate.Status, a.Immediate.Body)
			}
			hs := []lifecycle.Header{{":status", "200"}, {"content-type", tc.ct}, {"x-request-id", "up-1"}}
			for _, n := range leaky {
				hs = append(hs, lifecycle.Header{Name: n, Value: "v"})
			}
			a := r.ResponseHeaders(ctx, 200, hs, false)
			if a.Immediate != nil {
				t.Fatalf("answered %d: %s", a.Immediate.Status, a.Immediate.Body)
			}
			for _, n := range leaky {
				if !slices.Contains(a.RemoveHeaders, n) {
					t.Errorf("%s reaches the client", n)
				}
			}
			for _, n := range []string{"content-type", "x-request-id"} {
				if slices.Contains(a.RemoveHeaders, n) {
					t.Errorf("%s removed", n)
				}
			}
			r.End(ctx, "done")
		})
	}
}

// TestSettlementLogBoundsClientRequestID: x-request-id comes from the client whenever the
// front keeps a caller's copy; the settlement record must not carry an arbitrarily long
// client string (one 60 KiB header per request would multiply the log volume), and never
// the key.
func TestSettlementLogBoundsClientRequestID(t *testing.T) {
	core, logs := observer.New(zap.InfoLevel)
	f := &replay.FakeLedger{}
	f.AddKey(secKey, ledger.Grant{KeyID: "k-sec", AccountID: "a-sec", Tier: "default", AccountToppedUp: true})
	svc := replay.Service(t, f, func(c *lifecycle.Config) { c.Log = zap.New(core) })
	r := svc.NewRequest()
	ctx := context.Background()
	long := strings.Repeat("r", 60<<10)
	r.RequestHeaders(ctx, secHeaders("/v1/chat/completions", lifecycle.Header{Name: "x-request-id", Value: long}), false)
	if a := r.RequestBody(ctx, []byte(`{"model":"demo-chat","messages":[{"role":"user","content":"hi"}]}`), true); a.Immediate != nil {
		t.Fatalf("refused: %s", a.Immediate.Body)
	}
	r.ResponseHeaders(ctx, 200, []lifecycle.Header{{":status", "200"}, {"content-type", "application/json"}}, false)
	r.ResponseBody(ctx, []byte(`{"id":"c","object":"chat.completion","model":"mock-gpt","choices":[{"index":0,"message":{"role":"assistant","content":"x"},"finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":1,"total_tokens":4}}`), true)
	r.End(ctx, "done")
	if err := svc.WaitSettled(ctx); err != nil {
		t.Fatal(err)
	}
	entries := logs.All()
	if len(entries) == 0 {
		t.Fatal("no settlement record")
	}
	for _, e := range entries {
		for k, v := range e.ContextMap() {
			s, _ := v.(string)
			if k == "request_id" && len(s) > lifecycle.MaxLoggedRequestID {
				t.Errorf("request_id logged with %d bytes", len(s))
			}
			if strings.Contains(s, secKey) {
				t.Errorf("%s carries the key", k)
			}
		}
	}
}

// TestClientCannotPickTheCluster: a client's x-gateway-upstream is removed in the
// headers reply, and the body reply sets the channel's cluster (replacing any copy) with
// the route cache cleared; the client's credentials headers go too.
func TestClientCannotPickTheCluster(t *testing.T) {
	cases := []struct {
		name, path, body, cluster, dropped string
	}{
		{name: "openai format", path: "/v1/chat/completions", body: `{"model":"demo-chat","messages":[{"role":"user","content":"hi"}]}`, cluster: "mock-providers", dropped: "x-api-key"},
		{name: "anthropic format", path: "/v1/messages", body: `{"model":"demo-claude","max_tokens":8,"messages":[{"role":"user","content":"hi"}]}`, cluster: "mock-providers", dropped: "authorization"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			svc, _ := secService(t)
			r := svc.NewRequest()
			ctx := context.Background()
			forged := []lifecycle.Header{{lifecycle.RoutingHeader, "openai"}, {lifecycle.RoutingHeader, "extproc"}, {"x-api-key", secKey}}
			h := r.RequestHeaders(ctx, secHeaders(tc.path, forged...), false)
			if h.Immediate != nil || !slices.Contains(h.RemoveHeaders, lifecycle.RoutingHeader) {
				t.Fatalf("headers reply %+v keeps the client's routing header", h)
			}
			b := r.RequestBody(ctx, []byte(tc.body), true)
			if b.Immediate != nil {
				t.Fatalf("refused: %s", b.Immediate.Body)
			}
			if !b.ClearRouteCache {
				t.Error("route cache not cleared")
			}
			var got []string
			for _, s := range b.SetHeaders {
				if s.Name == lifecycle.RoutingHeader {
					got = append(got, s.Value)
				}
				if strings.Contains(s.Value, secKey) {
					t.Errorf("%s carries the client's key upstream", s.Name)
				}
			}
			if len(got) != 1 || got[0] != tc.cluster {
				t.Errorf("routing header set to %q, want [%s]", got, tc.cluster)
			}
			if !slices.Contains(b.RemoveHeaders, tc.dropped) {
				t.Errorf("%s not removed (%v)", tc.dropped, b.RemoveHeaders)
			}
			r.End(ctx, "done")
		})
	}
}

// TestOnlyAllowedHeadersReachTheProvider: the headers reply removes every client header
// but content type, accept, Envoy's own and (on the Anthropic endpoints)
// anthropic-version; the query string is cut from :path; a client's routing header is
// removed with the route cache cleared.
func TestOnlyAllowedHeadersReachTheProvider(t *testing.T) {
	leaky := []string{"openai-organization", "openai-project", "openai-beta", "anthropic-beta", "cookie",
		"proxy-authorization", "x-custom", "user-agent", "x-forwarded-for", "x-envoy-max-retries"}
	cases := []struct {
		path, wantPath string
		keep           []string
		drop           string
	}{
		{path: "/v1/chat/completions?api_key=" + secKey, wantPath: "/v1/chat/completions", keep: []string{"content-type", "accept", "x-request-id", "content-length"}, drop: "anthropic-version"},
		{path: "/v1/messages", keep: []string{"content-type", "accept", "anthropic-version"}},
	}
	for _, tc := range cases {
		t.Run(tc.path, func(t *testing.T) {
			svc, _ := secService(t)
			hs := []lifecycle.Header{{"accept", "application/json"}, {"x-request-id", "r1"}, {"content-length", "10"},
				{"anthropic-version", "2023-06-01"}, {lifecycle.RoutingHeader, "openai"}, {"x-api-key", secKey}}
			for _, n := range leaky {
				hs = append(hs, lifecycle.Header{Name: n, Value: "v"})
			}
			a := svc.NewRequest().RequestHeaders(context.Background(), secHeaders(tc.path, hs...), false)
			if a.Immediate != nil {
				t.Fatalf("refused %d: %s", a.Immediate.Status, a.Immediate.Body)
			}
			for _, n := range append(leaky, "authorization", "x-api-key", lifecycle.RoutingHeader) {
				if !slices.Contains(a.RemoveHeaders, n) {
					t.Errorf("%s reaches the provider", n)
				}
			}
			if tc.drop != "" && !slices.Contains(a.RemoveHeaders, tc.drop) {
				t.Errorf("%s reaches the provider", tc.drop)
			}
			for _, n := range tc.keep {
				if slices.Contains(a.RemoveHeaders, n) {
					t.Errorf("%s removed", n)
				}
			}
			for _, n := range a.RemoveHeaders {
				if strings.HasPrefix(n, ":") {
					t.Errorf("pseudo-header %s removed", n)
				}
			}
			if !a.ClearRouteCache {
				t.Error("route cache not cleared after removing the routing header")
			}
			var path []string
			for _, s := range a.SetHeaders {
				if s.Name == ":path" {
					path = append(path, s.Value)
				}
			}
			if tc.wantPath == "" && len(path) != 0 || tc.wantPath != "" && !slices.Equal(path, []string{tc.wantPath}) {
				t.Errorf(":path set to %v, want %q", path, tc.wantPath)
			}
		})
	}
}

// TestRepeatedKeyHeaderRefused: two Authorization (or two x-api-key) headers with
// different keys are refused like Authorization and x-api-key disagreeing, before any
// accounting call; a repeated identical key is served.
func TestRepeatedKeyHeaderRefused(t *testing.T) {
	other := "gw-othe" + strings.Repeat("0", 40)
	cases := []struct {
		name   string
		hs     []lifecycle.Header
		refuse bool
	}{
		{"two bearers", []lifecycle.Header{{"authorization", "Bearer " + other}}, true},
		{"two x-api-key", []lifecycle.Header{{"x-api-key", other}, {"x-api-key", secKey}}, true},
		{"same bearer twice", []lifecycle.Header{{"authorization", "Bearer " + secKey}}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			svc, f := secService(t)
			f.AddKey(other, ledger.Grant{KeyID: "k-other", AccountID: "a-other", Tier: "default", AccountToppedUp: true})
			r := svc.NewRequest()
			ctx := context.Background()
			hs := secHeaders("/v1/chat/completions", tc.hs...)
			if tc.name == "two x-api-key" {
				hs = slices.DeleteFunc(hs, func(h lifecycle.Header) bool { return h.Name == "authorization" })
			}
			r.RequestHeaders(ctx, hs, false)
			a := r.RequestBody(ctx, []byte(`{"model":"demo-chat","messages":[{"role":"user","content":"hi"}]}`), true)
			if !tc.refuse {
				if a.Immediate != nil {
					t.Fatalf("refused %d: %s", a.Immediate.Status, a.Immediate.Body)
				}
				r.End(ctx, "done")
				return
			}
			if a.Immediate == nil || a.Immediate.Status != 401 || gjson.GetBytes(a.Immediate.Body, "error.code").String() != "invalid_api_key" {
				t.Fatalf("served: %+v", a)
			}
			if _, held := r.Reservation(); held {
				t.Error("a hold was placed")
			}
		})
	}
}

// TestInvalidUTF8Refused: a JSON body with a byte sequence that is not UTF-8 is refused
// with 400 invalid_request before anything is held or forwarded.
func TestInvalidUTF8Refused(t *testing.T) {
	for _, body := range []string{
		"{\"model\":\"demo-chat\",\"messages\":[{\"role\":\"user\",\"content\":\"h\xffi\"}]}",
		"{\"model\":\"demo-chat\",\"messages\":[{\"role\":\"user\",\"content\":\"\xed\xa0\x80\"}]}",
	} {
		svc, _ := secService(t)
		r := svc.NewRequest()
		ctx := context.Background()
		r.RequestHeaders(ctx, secHeaders("/v1/chat/completions"), false)
		a := r.RequestBody(ctx, []byte(body), true)
		if a.Immediate == nil || a.Immediate.Status != 400 || gjson.GetBytes(a.Immediate.Body, "error.code").String() != "invalid_request" {
			t.Fatalf("%q: not refused: %+v", body, a)
		}
		if _, held := r.Reservation(); held {
			t.Errorf("%q: a hold was placed", body)
		}
	}
}

// TestRewriteGrowsWithinEnvoysBuffer: the 2 MiB rule is about the client's bytes. A body
// of exactly 2 MiB that the rewrite grows past it is held and forwarded whole, within
// Envoy's buffer: streamed toward an OpenAI channel (stream_options.include_usage
// added), and translated for an Anthropic channel from text that doubles in JSON (each
// raw U+2028 becomes its six-byte escape, the most any character grows).
func TestRewriteGrowsWithinEnvoysBuffer(t *testing.T) {
	body := func(model, unit string, size int) []byte {
		head, tail := `{"model":"`+model+`","stream":true,"messages":[{"role":"user","content":"`, `"}]}`
		fill := strings.Repeat(unit, (size-len(head)-len(tail))/len(unit))
		b := []byte(head + fill + strings.Repeat(" ", size-len(head)-len(fill)-len(tail)) + tail)
		if len(b) != size {
			t.Fatalf("body of %d bytes, want %d", len(b), size)
		}
		return b
	}
	for _, tc := range []struct {
		name string
		body []byte
	}{
		{"stream_options added", body("demo-chat", "lorem ipsum dolor ", wire.MaxBodyBytes)},
		{"translated, doubled", body("demo-claude", "\u2028", wire.MaxBodyBytes)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			svc, f := secService(t)
			r := svc.NewRequest()
			ctx := context.Background()
			r.RequestHeaders(ctx, secHeaders("/v1/chat/completions"), false)
			a := r.RequestBody(ctx, tc.body, true)
			reserves, _, _ := f.Counts()
			if a.Immediate != nil || len(a.Body) <= len(tc.body) || len(a.Body) > lifecycle.EnvoyBufferLimit || reserves != 1 {
				t.Fatalf("%+v, rewritten to %d bytes, %d holds", a.Immediate, len(a.Body), reserves)
			}
			r.End(ctx, "client_disconnected")
		})
	}
}

// TestBadKeyRefusedAtHeaders: a missing, malformed or ambiguous key is refused in the
// request-headers reply (before Envoy buffers the body), without an accounting call; a
// well-formed key goes on to the body phase.
func TestBadKeyRefusedAtHeaders(t *testing.T) {
	for _, tc := range []struct {
		name string
		hs   []lifecycle.Header
		want int
	}{
		{"missing", nil, 401},
		{"malformed", []lifecycle.Header{{"authorization", "Bearer sk-not-ours"}}, 401},
		{"two keys", []lifecycle.Header{{"authorization", "Bearer " + secKey}, {"x-api-key", "gw-" + strings.Repeat("y", 43)}}, 401},
		{"well-formed", []lifecycle.Header{{"authorization", "Bearer " + secKey}}, 0},
	} {
		svc, f := secService(t)
		hs := append([]lifecycle.Header{{":method", "POST"}, {":path", "/v1/chat/completions"}, {"content-type", "application/json"}}, tc.hs...)
		a := svc.NewRequest().RequestHeaders(context.Background(), hs, false)
		switch {
		case tc.want == 0 && a.Immediate != nil:
			t.Errorf("%s: refused %d", tc.name, a.Immediate.Status)
		case tc.want != 0 && (a.Immediate == nil || a.Immediate.Status != tc.want || gjson.GetBytes(a.Immediate.Body, "error.code").String() != "invalid_api_key"):
			t.Errorf("%s: %+v, want %d invalid_api_key at the headers", tc.name, a.Immediate, tc.want)
		}
		if f.Auths != 0 {
			t.Errorf("%s: accounting asked %d times", tc.name, f.Auths)
		}
	}
}
