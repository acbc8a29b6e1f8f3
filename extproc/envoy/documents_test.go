package envoy_test

import (
	"encoding/base64"
	"testing"

	"github.com/llmgw/gateway/extproc/internal/replay"
	"github.com/llmgw/gateway/extproc/pricing"
	"github.com/llmgw/gateway/extproc/tokens"
	"github.com/llmgw/gateway/internal/pdfpages/pdfpagestest"
)

// documentBodies are a request of each API carrying one document, its data field at
// the param path the API's refusal names.
var documentBodies = []struct {
	name, path, param string
	anthropic         bool
	inPerMTok         int64
	body              func(data string) string
}{
	{name: "chat", path: "/v1/chat/completions", param: "messages[0].content[1].file.file_data", inPerMTok: 1_000_000,
		body: func(d string) string {
			return `{"model":"demo-chat","max_tokens":10,"messages":[{"role":"user","content":[{"type":"text","text":"sum up"},{"type":"file","file":{"filename":"a.pdf","file_data":"data:application/pdf;base64,` + d + `"}}]}]}`
		}},
	{name: "responses", path: "/v1/responses", param: "input[0].content[1].file_data", inPerMTok: 1_000_000,
		body: func(d string) string {
			return `{"model":"demo-responses","max_output_tokens":10,"input":[{"role":"user","content":[{"type":"input_text","text":"sum up"},{"type":"input_file","filename":"a.pdf","file_data":"data:application/pdf;base64,` + d + `"}]}]}`
		}},
	{name: "messages", path: "/v1/messages", param: "messages[0].content[1].source.data", anthropic: true, inPerMTok: 3_000_000,
		body: func(d string) string {
			return `{"model":"demo-claude","max_tokens":10,"messages":[{"role":"user","content":[{"type":"text","text":"sum up"},{"type":"document","source":{"type":"base64","media_type":"application/pdf","data":"` + d + `"}}]}]}`
		}},
}

// TestDocumentHeldByPages checks that a PDF sent by its bytes is held at the per-page
// bound times its pages, counted from the file: 300 pages hold 297 pages more than 3,
// each at tokens.PageTokens at the input price.
func TestDocumentHeldByPages(t *testing.T) {
	three, hundreds := pdfpagestest.BlankBase64(t, 3), pdfpagestest.BlankBase64(t, 300)
	for _, tt := range documentBodies {
		t.Run(tt.name, func(t *testing.T) {
			hold := func(data string) int64 {
				f := newFake()
				h := replay.Start(t, replay.Service(t, f))
				x, hdr, resp := h.Post(t, tt.path, []byte(tt.body(data)), bearer(keyPaid)...)
				x.Close()
				if resp.GetRequestBody() == nil || len(f.Reserves) != 1 {
					t.Fatalf("not admitted: %v %v", hdr, resp)
				}
				return f.Reserves[0].Amount
			}
			got := hold(hundreds) - hold(three)
			want := pricing.PerMillion(297*tokens.PageTokens, tt.inPerMTok)
			if got != want {
				t.Errorf("297 more pages added %d micros to the hold, want %d", got, want)
			}
		})
	}
}

// TestUncountableDocumentRefused checks that a document whose pages cannot be counted
// is refused before any reservation as pricing_unavailable naming its data field.
func TestUncountableDocumentRefused(t *testing.T) {
	for _, tt := range documentBodies {
		for _, data := range []struct{ name, b64 string }{
			{"text", base64.StdEncoding.EncodeToString([]byte("not a PDF at all"))},
			{"header only", base64.StdEncoding.EncodeToString([]byte("%PDF-1.4\n"))},
			{"not base64", "%%%%"},
		} {
			t.Run(tt.name+" "+data.name, func(t *testing.T) {
				f := newFake()
				h := replay.Start(t, replay.Service(t, f))
				x, _, resp := h.Post(t, tt.path, []byte(tt.body(data.b64)), bearer(keyPaid)...)
				defer x.Close()
				checkError(t, resp, want{503, "pricing_unavailable", "api_error", tt.param, false, ""}, tt.anthropic)
				if reserves, _, _ := f.Counts(); reserves != 0 {
					t.Errorf("%d reservations for a refused request", reserves)
				}
			})
		}
	}
}
