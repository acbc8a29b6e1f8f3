package mock_test

import (
	"io"
	"net/http"
	"strings"
	"testing"
)

// rawPost sends body to path with the provider's credential headers.
func strictPost(t *testing.T, url, path, body string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url+path, strings.NewReader(body))
	req.Header.Set("content-type", "application/json")
	req.Header.Set("authorization", "Bearer sk-mock-test")
	req.Header.Set("x-api-key", "sk-mock-test")
	req.Header.Set("anthropic-version", "2023-06-01")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestStrictLikeTheRealAPIs(t *testing.T) {
	srv := newServer(t)
	for _, tc := range []struct {
		name, path, body, want string
	}{
		{"chat unknown field", "/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":"x"}],"bogus":1}`, `"error":{"code":null,"message":"Unrecognized request argument supplied: bogus"`},
		{"chat orphan tool message", "/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":"x"},{"role":"tool","tool_call_id":"call_1","content":"r"}]}`, "must be a response to a preceeding message with 'tool_calls'"},
		{"chat bad image url", "/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"ftp://x"}}]}]}`, "Invalid image URL"},
		{"messages unknown field", "/v1/messages", `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"x"}],"n":1}`, `"message":"n: Extra inputs are not permitted"`},
		{"messages without max_tokens", "/v1/messages", `{"model":"m","messages":[{"role":"user","content":"x"}]}`, "max_tokens: Field required"},
		{"messages system role", "/v1/messages", `{"model":"m","max_tokens":5,"messages":[{"role":"system","content":"x"}]}`, "Input should be 'user' or 'assistant'"},
		{"messages orphan tool_result", "/v1/messages", `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":"r"}]}]}`, "unexpected `tool_use_id`"},
		{"messages image without data", "/v1/messages", `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":[{"type":"image","source":{"type":"base64","media_type":"image/png"}}]}]}`, "media_type and data are required"},
		{"responses orphan output", "/v1/responses", `{"model":"m","input":[{"type":"function_call_output","call_id":"call_1","output":"r"}]}`, "No tool call found"},
	} {
		status, body := strictPost(t, srv.URL, tc.path, tc.body)
		if status != http.StatusBadRequest || !strings.Contains(body, tc.want) {
			t.Errorf("%s: %d %s, want 400 with %q", tc.name, status, body, tc.want)
		}
	}
	// A well-formed tool round trip passes.
	status, body := strictPost(t, srv.URL, "/v1/messages", `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"x"},
		{"role":"assistant","content":[{"type":"tool_use","id":"toolu_1","name":"f","input":{}}]},
		{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":"r"}]}]}`)
	if status != http.StatusOK {
		t.Errorf("tool round trip: %d %s", status, body)
	}
}

func TestToolDirectiveAndStopSequences(t *testing.T) {
	srv := newServer(t)
	tools := `"tools":[{"type":"function","function":{"name":"lookup","parameters":{"type":"object"}}}]`
	status, body := strictPost(t, srv.URL, "/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":"find  red [[mock:tool=lookup]]"}],`+tools+`}`)
	if status != 200 || !strings.Contains(body, `"finish_reason":"tool_calls"`) || !strings.Contains(body, `"arguments":"{\"text\":\"find red\"}"`) {
		t.Errorf("chat tool call: %d %s", status, body)
	}
	// Without the tool offered the directive is ignored.
	_, body = strictPost(t, srv.URL, "/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":"find red [[mock:tool=lookup]]"}]}`)
	if strings.Contains(body, "tool_calls") {
		t.Errorf("tool call without the tool offered: %s", body)
	}
	status, body = strictPost(t, srv.URL, "/v1/messages", `{"model":"m","max_tokens":50,"stop_sequences":["gamma"],"messages":[{"role":"user","content":"alpha beta gamma delta"}]}`)
	if status != 200 || !strings.Contains(body, `"stop_reason":"stop_sequence"`) || !strings.Contains(body, `"stop_sequence":"gamma"`) ||
		strings.Contains(body, "delta") || !strings.Contains(body, `"output_tokens":2`) {
		t.Errorf("stop sequence: %d %s", status, body)
	}
	status, body = strictPost(t, srv.URL, "/v1/responses", `{"model":"m","stream":true,"input":"find red [[mock:tool=lookup]]","tools":[{"type":"function","name":"lookup"}]}`)
	if status != 200 || strings.Count(body, "response.function_call_arguments.delta") < 2 || !strings.Contains(body, `"type":"function_call"`) {
		t.Errorf("responses streamed tool call: %d %s", status, body)
	}
}

func TestGapDirectiveSpacesTheChunks(t *testing.T) {
	srv := newServer(t)
	req, _ := http.NewRequest(http.MethodPost, srv.URL+"/v1/chat/completions",
		strings.NewReader(`{"model":"m","stream":true,"messages":[{"role":"user","content":"a b c [[mock:gap=30]]"}]}`))
	req.Header.Set("authorization", "Bearer sk-mock-test")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	// Each content chunk arrives in a read of its own: the next is 30 ms away.
	buf := make([]byte, 64<<10)
	reads := 0
	for {
		n, err := resp.Body.Read(buf)
		if n > 0 && strings.Contains(string(buf[:n]), `"content":"`) {
			reads++
		}
		if err != nil {
			break
		}
	}
	if reads < 3 {
		t.Errorf("content arrived in %d reads, want one per chunk (3)", reads)
	}
}
