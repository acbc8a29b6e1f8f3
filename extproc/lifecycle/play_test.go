package lifecycle_test

import (
	"context"
	"strconv"
	"strings"
	"testing"

	"github.com/llmgw/gateway/extproc/internal/replay"
	"github.com/llmgw/gateway/extproc/lifecycle"
	"github.com/llmgw/gateway/internal/testkit"
)

// This file plays requests through the lifecycle's API as the Envoy adapter does (one
// Request per stream, its phases in order, End when the stream closes), so tests of
// what the gateway answers need no gRPC stream; extproc/envoy tests that the adapter
// carries these answers to Envoy unchanged.

func bearer(k string) []string { return []string{"authorization", "Bearer " + k} }

const chatOK = `{"model":"demo-chat","messages":[{"role":"user","content":"hi"}]}`

// postHeaders are the request headers of a JSON POST to path as Envoy hands them over,
// with content-length n (n < 0: chunked, none) and the extra name/value pairs.
func postHeaders(path string, n int, extra ...string) []lifecycle.Header {
	hs := []lifecycle.Header{{":method", "POST"}, {":path", path}, {":authority", "gateway"}, {":scheme", "http"},
		{"content-type", "application/json"}, {"x-forwarded-proto", "http"}}
	if n >= 0 {
		hs = append(hs, lifecycle.Header{Name: "content-length", Value: strconv.Itoa(n)})
	}
	return append(hs, pairs(extra...)...)
}

// pairs are name/value pairs as headers.
func pairs(kv ...string) []lifecycle.Header {
	var hs []lifecycle.Header
	for i := 0; i+1 < len(kv); i += 2 {
		hs = append(hs, lifecycle.Header{Name: kv[i], Value: kv[i+1]})
	}
	return hs
}

// post starts a request on svc and plays a JSON POST of body to path: the headers (with
// content-length) then, unless they were answered, the whole body in one message. It
// returns the request, to play its response or end it, and the last answer.
func post(t testing.TB, svc *lifecycle.Service, path, body string, headers ...string) (*lifecycle.Request, lifecycle.Action) {
	t.Helper()
	return postAs(svc, postHeaders(path, len(body), headers...), body)
}

// postAs is post with the request headers as given.
func postAs(svc *lifecycle.Service, hs []lifecycle.Header, body string) (*lifecycle.Request, lifecycle.Action) {
	ctx := context.Background()
	r := svc.NewRequest()
	a := r.RequestHeaders(ctx, hs, false)
	if a.Immediate == nil {
		a = r.RequestBody(ctx, []byte(body), true)
	}
	return r, a
}

// finish ends r as the adapter does when Envoy closes the stream, and waits until the
// settlements in the background have ended.
func finish(t testing.TB, svc *lifecycle.Service, r *lifecycle.Request) {
	t.Helper()
	ctx := context.Background()
	r.End(ctx, lifecycle.CauseClientLeft)
	wctx, cancel := context.WithTimeout(ctx, testkit.Deadline)
	defer cancel()
	if err := svc.WaitSettled(wctx); err != nil {
		t.Fatalf("settlements did not end: %v", err)
	}
}

// mustAdmit fails the test when a answers the client instead of admitting the request.
func mustAdmit(t testing.TB, a lifecycle.Action) {
	t.Helper()
	if im := a.Immediate; im != nil {
		t.Fatalf("not admitted: %d %s", im.Status, im.Body)
	}
}

// setHeaders are the headers an answer sets, by name.
func setHeaders(a lifecycle.Action) map[string]string {
	m := map[string]string{}
	for _, h := range a.SetHeaders {
		m[h.Name] = h.Value
	}
	return m
}

// checkRefused asserts the lifecycle's immediate answer is w, in the OpenAI envelope or
// the Anthropic one, with details naming the code for Envoy's local_reply_config.
func checkRefused(t *testing.T, im *lifecycle.Immediate, w testkit.APIError, anthropic bool) {
	t.Helper()
	if im == nil {
		t.Fatalf("admitted, want %d %s", w.Status, w.Code)
	}
	if im.Details != "extproc_"+w.Code {
		t.Errorf("details = %q", im.Details)
	}
	h := map[string]string{}
	for _, kv := range im.Headers {
		h[kv.Name] = kv.Value
	}
	w.Check(t, im.Status, h, im.Body, anthropic)
}

// refusal is a request admission must refuse: w in the path's envelope, with nothing
// held or settled except the one reservation the ledger itself refused (reserveE).
type refusal struct {
	name     string
	path     string // the table's path when empty
	body     string
	headers  []string
	chunked  bool // sent without content-length
	reserveE error
	w        testkit.APIError
	reserved bool   // a Reserve call is expected (refused by the ledger)
	message  string // a part of the error message, when it must name something
}

// checkRefusals plays each case on a fresh service over replay.DemoLedger (adjusted by
// opts), on path unless the case names its own.
func checkRefusals(t *testing.T, path string, anthropic bool, tests []refusal, opts ...func(*lifecycle.Config)) {
	t.Helper()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := replay.DemoLedger()
			f.ReserveE = tt.reserveE
			svc := replay.Service(t, f, opts...)
			p, n := path, len(tt.body)
			if tt.path != "" {
				p = tt.path
			}
			if tt.chunked {
				n = -1
			}
			r, a := postAs(svc, postHeaders(p, n, tt.headers...), tt.body)
			checkRefused(t, a.Immediate, tt.w, anthropic)
			if tt.message != "" && !strings.Contains(string(a.Immediate.Body), tt.message) {
				t.Errorf("message does not name %q: %s", tt.message, a.Immediate.Body)
			}
			finish(t, svc, r)
			reserves, commits, releases := f.Counts()
			if tt.reserved != (reserves == 1) || commits != 0 || releases != 0 {
				t.Errorf("ledger saw %d reserves, %d commits, %d releases", reserves, commits, releases)
			}
		})
	}
}
