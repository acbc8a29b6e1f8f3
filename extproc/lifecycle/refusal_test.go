package lifecycle_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/llmgw/gateway/accounting/ledger"
	"github.com/llmgw/gateway/extproc/internal/replay"
	"github.com/llmgw/gateway/extproc/lifecycle"
)

// TestUpstreamRefusalNamesTheField: a provider's 400 refusing a field the client sent (a
// misspelt name) reaches the client as 400 invalid_request in the gateway's own words with
// param, and the log has the upstream status and the provider's error type; a refusal
// that names no field keeps the generic message without param. Nothing is charged.
func TestUpstreamRefusalNamesTheField(t *testing.T) {
	for _, tt := range []struct {
		name, path, model, upstream string
		param, msg                  string
		anthropic                   bool // its envelope has no param: the message names the field
	}{
		{name: "openai unknown field", path: "/v1/chat/completions", model: "demo-chat",
			upstream: `{"error":{"message":"Unrecognized request argument supplied: foo","type":"invalid_request_error","param":null,"code":null}}`,
			param:    "foo", msg: `does not accept the field \"foo\"`},
		{name: "anthropic unknown field", path: "/v1/messages", model: "demo-claude",
			upstream: `{"type":"error","error":{"type":"invalid_request_error","message":"foo: Extra inputs are not permitted"}}`,
			param:    "foo", msg: `does not accept the field \"foo\"`, anthropic: true},
		{name: "no field named", path: "/v1/chat/completions", model: "demo-chat",
			upstream: `{"error":{"message":"The model mock-gpt cannot do that.","type":"invalid_request_error","param":null,"code":null}}`,
			msg:      "rejected the request as invalid"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			core, logs := observer.New(zap.InfoLevel)
			f := &replay.FakeLedger{}
			f.AddKey(secKey, ledger.Grant{KeyID: "k-sec", AccountID: "a-sec", Tier: "default", AccountToppedUp: true})
			svc := replay.Service(t, f, func(c *lifecycle.Config) { c.Log = zap.New(core) })
			ctx := context.Background()
			r := svc.NewRequest()
			hs := secHeaders(tt.path)
			if strings.HasPrefix(tt.path, "/v1/messages") {
				hs = append(hs, lifecycle.Header{Name: "anthropic-version", Value: "2023-06-01"})
			}
			r.RequestHeaders(ctx, hs, false)
			if a := r.RequestBody(ctx, []byte(`{"model":"`+tt.model+`","max_tokens":16,"foo":1,"messages":[{"role":"user","content":"hi"}]}`), true); a.Immediate != nil {
				t.Fatalf("refused: %s", a.Immediate.Body)
			}
			r.ResponseHeaders(ctx, 400, []lifecycle.Header{{Name: ":status", Value: "400"}, {Name: "content-type", Value: "application/json"}}, false)
			a := r.ResponseBody(ctx, []byte(tt.upstream), true)
			r.End(ctx, "done")
			if err := svc.WaitSettled(ctx); err != nil {
				t.Fatal(err)
			}
			im := a.Immediate
			if im == nil || im.Status != 400 {
				t.Fatalf("answer %+v, want 400", a)
			}
			var env struct {
				Error struct{ Code, Message, Param string }
			}
			if err := json.Unmarshal(im.Body, &env); err != nil {
				t.Fatal(err)
			}
			wantParam := tt.param
			if tt.anthropic {
				wantParam = ""
			}
			if env.Error.Param != wantParam || !strings.Contains(string(im.Body), tt.msg) || strings.Contains(string(im.Body), "mock-") ||
				strings.Contains(string(im.Body), "Extra inputs") || strings.Contains(string(im.Body), "Unrecognized") {
				t.Errorf("answer %s, want param %q and %q in the gateway's words, no upstream id", im.Body, wantParam, tt.msg)
			}
			if _, commits, _ := f.Counts(); commits != 0 {
				t.Errorf("%d commits for a refused request", commits)
			}
			lines := logs.FilterMessage("upstream refused the request as invalid").All()
			if len(lines) != 1 {
				t.Fatalf("%d refusal log lines, want 1", len(lines))
			}
			fields := lines[0].ContextMap()
			if fields["upstream_status"] != int64(400) || fields["upstream_type"] != "invalid_request_error" || fields["param"] != tt.param {
				t.Errorf("log fields %v", fields)
			}
		})
	}
}
