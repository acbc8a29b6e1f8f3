package envoy_test

import (
	"testing"

	"github.com/llmgw/gateway/extproc/internal/replay"
	"github.com/llmgw/gateway/internal/testkit"
)

// TestServerToolsHaveNoPrice checks that a request asking the provider for tools it runs
// and bills per use (web search, code execution, ...) is refused before any reservation
// as pricing_unavailable naming the field, in the route's envelope, while client tools
// (functions, custom tools) pass and count_tokens is never refused for it.
func TestServerToolsHaveNoPrice(t *testing.T) {
	tests := []struct {
		name, path, body, param string
		anthropic, admitted     bool
	}{
		{name: "chat web_search_options", path: "/v1/chat/completions",
			body:  `{"model":"demo-chat","web_search_options":{},"messages":[{"role":"user","content":"hi"}]}`,
			param: "web_search_options"},
		{name: "chat function tool", path: "/v1/chat/completions",
			body:     `{"model":"demo-chat","tools":[{"type":"function","function":{"name":"f"}}],"messages":[{"role":"user","content":"hi"}]}`,
			admitted: true},
		{name: "responses web search", path: "/v1/responses",
			body:  `{"model":"demo-responses","input":"hi","tools":[{"type":"web_search_preview"}]}`,
			param: "tools"},
		{name: "responses function tool", path: "/v1/responses",
			body:     `{"model":"demo-responses","input":"hi","tools":[{"type":"function","name":"f","parameters":{}}]}`,
			admitted: true},
		{name: "messages web search", path: "/v1/messages", anthropic: true,
			body:  `{"model":"demo-claude","max_tokens":10,"tools":[{"type":"web_search_20250305","name":"web_search"}],"messages":[{"role":"user","content":"hi"}]}`,
			param: "tools"},
		{name: "messages MCP servers", path: "/v1/messages", anthropic: true,
			body:  `{"model":"demo-claude","max_tokens":10,"mcp_servers":[{"type":"url","url":"https://example.com/sse","name":"x"}],"messages":[{"role":"user","content":"hi"}]}`,
			param: "mcp_servers"},
		{name: "messages custom tool", path: "/v1/messages", anthropic: true,
			body:     `{"model":"demo-claude","max_tokens":10,"tools":[{"name":"f","input_schema":{"type":"object"}}],"messages":[{"role":"user","content":"hi"}]}`,
			admitted: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFake()
			h := replay.Start(t, replay.Service(t, f))
			x, hdr, bdy := h.Post(t, tt.path, []byte(tt.body), bearer(keyPaid)...)
			defer x.Close()
			if tt.admitted {
				if bdy.GetRequestBody() == nil {
					t.Fatalf("refused: %v %v", hdr, bdy)
				}
				return
			}
			w := testkit.WantError(503, "pricing_unavailable", "api_error").WithParam(tt.param)
			if tt.anthropic {
				w.Param = ""
			}
			checkError(t, bdy, w, tt.anthropic)
			if reserves, _, _ := f.Counts(); reserves != 0 {
				t.Errorf("%d reservations for a refused request", reserves)
			}
		})
	}
	// count_tokens is not billed: a server tool does not stop it.
	f := newFake()
	h := replay.Start(t, replay.Service(t, f))
	x, _, bdy := h.Post(t, "/v1/messages/count_tokens",
		[]byte(`{"model":"demo-claude","tools":[{"type":"web_search_20250305","name":"web_search"}],"messages":[{"role":"user","content":"hi"}]}`),
		bearer(keyPaid)...)
	defer x.Close()
	if ir := bdy.GetImmediateResponse(); ir == nil || ir.GetStatus().GetCode() != 200 {
		t.Errorf("count_tokens: %v", bdy)
	}
}
