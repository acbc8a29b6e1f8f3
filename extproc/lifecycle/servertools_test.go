package lifecycle_test

import (
	"testing"

	"github.com/llmgw/gateway/extproc/internal/replay"
)

// TestServerToolsHaveNoPrice checks that a request asking the provider for tools it runs
// and bills per use (web search, code execution, ...) is refused before any reservation
// as pricing_unavailable naming the field, in the route's envelope, while client tools
// (functions, custom tools) pass and count_tokens is never refused for it.
func TestServerToolsHaveNoPrice(t *testing.T) {
	checkPriced(t, []priced{
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
	})
	// count_tokens is not billed: a server tool does not stop it.
	f := replay.DemoLedger()
	svc := replay.Service(t, f)
	r, a := post(t, svc, "/v1/messages/count_tokens",
		`{"model":"demo-claude","tools":[{"type":"web_search_20250305","name":"web_search"}],"messages":[{"role":"user","content":"hi"}]}`,
		bearer(replay.KeyPaid)...)
	defer finish(t, svc, r)
	if im := a.Immediate; im == nil {
		t.Errorf("count_tokens: not answered at the body")
	} else if im.Status != 200 {
		t.Errorf("count_tokens: %d %s", im.Status, im.Body)
	}
}
