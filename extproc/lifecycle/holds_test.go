package lifecycle_test

import (
	"strings"
	"testing"

	"github.com/llmgw/gateway/extproc/internal/replay"
	"github.com/llmgw/gateway/internal/pdfpages/pdfpagestest"
	"github.com/llmgw/gateway/internal/testkit"
)

// TestHoldBoundsEveryPart checks that the same material held through any billed part of
// a request — message text, a response_format schema, legacy functions, a Responses
// text.format schema, a chat prediction — adds at least what a provider could bill for
// it (one token per 4 bytes of its JSON) to the hold, input or output side at its price.
func TestHoldBoundsEveryPart(t *testing.T) {
	// 40,000 bytes the o200k vocabulary merges into few tokens.
	material := strings.Repeat("=", 40_000)
	const minTokens = 40_000 / 4
	tests := []struct {
		name, path, base, with string
		perMTok                int64 // price of the side the material is billed on
	}{
		{name: "chat response_format", path: "/v1/chat/completions", perMTok: 1_000_000,
			base: `{"model":"demo-chat","max_tokens":10,"messages":[{"role":"user","content":"hi"}]}`,
			with: `{"model":"demo-chat","max_tokens":10,"messages":[{"role":"user","content":"hi"}],"response_format":{"type":"json_schema","json_schema":{"name":"s","schema":{"description":"` + material + `"}}}}`},
		{name: "chat functions", path: "/v1/chat/completions", perMTok: 1_000_000,
			base: `{"model":"demo-chat","max_tokens":10,"messages":[{"role":"user","content":"hi"}]}`,
			with: `{"model":"demo-chat","max_tokens":10,"messages":[{"role":"user","content":"hi"}],"functions":[{"name":"f","description":"` + material + `"}]}`},
		{name: "chat prediction", path: "/v1/chat/completions", perMTok: 2_000_000,
			base: `{"model":"demo-chat","max_tokens":10,"messages":[{"role":"user","content":"hi"}]}`,
			with: `{"model":"demo-chat","max_tokens":10,"messages":[{"role":"user","content":"hi"}],"prediction":{"type":"content","content":"` + material + `"}}`},
		{name: "responses text.format", path: "/v1/responses", perMTok: 1_000_000,
			base: `{"model":"demo-responses","max_output_tokens":10,"input":"hi"}`,
			with: `{"model":"demo-responses","max_output_tokens":10,"input":"hi","text":{"format":{"type":"json_schema","name":"s","schema":{"description":"` + material + `"}}}}`},
		{name: "messages tool", path: "/v1/messages", perMTok: 3_000_000,
			base: `{"model":"demo-claude","max_tokens":10,"messages":[{"role":"user","content":"hi"}]}`,
			with: `{"model":"demo-claude","max_tokens":10,"messages":[{"role":"user","content":"hi"}],"tools":[{"name":"f","description":"` + material + `","input_schema":{}}]}`},
	}
	hold := func(t *testing.T, path, body string) int64 {
		f := replay.DemoLedger()
		svc := replay.Service(t, f)
		r, a := post(t, svc, path, body, bearer(replay.KeyPaid)...)
		finish(t, svc, r)
		mustAdmit(t, a)
		if len(f.Reserves) != 1 {
			t.Fatalf("admitted with %d reservations", len(f.Reserves))
		}
		return f.Reserves[0].Amount
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			added := hold(t, tt.path, tt.with) - hold(t, tt.path, tt.base)
			if least := minTokens * tt.perMTok / 1_000_000; added < least {
				t.Errorf("the part added %d micros to the hold, want at least %d", added, least)
			}
		})
	}
}

// TestUnboundedPartsHaveNoPrice checks that a document the gateway cannot size (by URL
// or by file id) is refused before any reservation as pricing_unavailable naming it,
// while the same document by its bytes is admitted.
func TestUnboundedPartsHaveNoPrice(t *testing.T) {
	checkPriced(t, []priced{
		{name: "messages document by URL", path: "/v1/messages", anthropic: true,
			body: `{"model":"demo-claude","max_tokens":10,"messages":[{"role":"user","content":[{"type":"document","source":{"type":"url","url":"https://example.com/a.pdf"}},{"type":"text","text":"sum up"}]}]}`},
		{name: "messages document by file id", path: "/v1/messages", anthropic: true,
			body: `{"model":"demo-claude","max_tokens":10,"messages":[{"role":"user","content":[{"type":"document","source":{"type":"file","file_id":"file_1"}}]}]}`},
		{name: "messages document by bytes", path: "/v1/messages", anthropic: true, admitted: true,
			body: `{"model":"demo-claude","max_tokens":10,"messages":[{"role":"user","content":[{"type":"document","source":{"type":"base64","media_type":"application/pdf","data":"` + pdfpagestest.BlankBase64(t, 2) + `"}}]}]}`},
		{name: "chat file by id", path: "/v1/chat/completions", param: "messages[0].content[0].file.file_id",
			body: `{"model":"demo-chat","messages":[{"role":"user","content":[{"type":"file","file":{"file_id":"file-1"}}]}]}`},
		{name: "responses file by URL", path: "/v1/responses", param: "input[0].content[0].file_url",
			body: `{"model":"demo-responses","input":[{"role":"user","content":[{"type":"input_file","file_url":"https://example.com/a.pdf"}]}]}`},
	})
}

// priced is a request whose every billed part admission must price: admitted, or
// refused before any reservation as pricing_unavailable naming param (the Anthropic
// envelope names no field).
type priced struct {
	name, path, body, param string
	anthropic, admitted     bool
}

// checkPriced plays each case with replay.KeyPaid on a fresh demo service.
func checkPriced(t *testing.T, tests []priced) {
	t.Helper()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := replay.DemoLedger()
			svc := replay.Service(t, f)
			r, a := post(t, svc, tt.path, tt.body, bearer(replay.KeyPaid)...)
			defer finish(t, svc, r)
			if tt.admitted {
				mustAdmit(t, a)
				return
			}
			checkRefused(t, a.Immediate, testkit.WantError(503, "pricing_unavailable", "api_error").WithParam(tt.param), tt.anthropic)
			if reserves, _, _ := f.Counts(); reserves != 0 {
				t.Errorf("%d reservations for a refused request", reserves)
			}
		})
	}
}
