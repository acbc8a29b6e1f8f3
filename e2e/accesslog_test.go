package e2e_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

// TestAccessLogLine: after a request, the front's access log (one JSON line on its
// stdout) carries the request's x-request-id, status, public model, channel, the tokens
// and charge of its settlement (as extproc's settled record has them), and never the
// key or the prompt.
func TestAccessLogLine(t *testing.T) {
	t.Parallel()
	c := newCustomer(t, customerOpts{topup: "10"})
	const prompt = "quokka-prompt-marker"
	body := []byte(`{"model":"demo-chat","messages":[{"role":"user","content":"` + prompt + `"}]}`)
	status, h, b := rawRequest(t, http.MethodPost, "/chat/completions", c.key, body)
	if status != 200 {
		t.Fatalf("status %d: %s", status, b)
	}
	id := h.Get("x-request-id")
	line, raw := accessLogLine(t, id)
	c.waitSettled(t)
	rec := settlementRecord(t, id)
	want := map[string]any{
		"request_id": id, "method": "POST", "status": float64(200), "endpoint": "/v1/chat/completions",
		"model": "demo-chat", "channel": rec["channel"], "outcome": "commit",
		"input_tokens": rec["input_tokens"], "output_tokens": rec["output_tokens"],
		"hold_micros": rec["hold_micros"], "charge_micros": rec["charged_micros"], "error": nil,
	}
	for k, w := range want {
		if got, ok := line[k]; !ok || got != w {
			t.Errorf("%s = %v, want %v", k, got, w)
		}
	}
	if n, _ := line["output_tokens"].(float64); n <= 0 {
		t.Errorf("output_tokens %v, want the usage", line["output_tokens"])
	}
	if strings.Contains(raw, c.key) || strings.Contains(raw, prompt) {
		t.Errorf("the access log line carries the key or the prompt: %s", raw)
	}
}

// TestAccessLogLineOfUnknownModel: the line of a refusal for a model the catalog does not
// know says the model that was asked for.
func TestAccessLogLineOfUnknownModel(t *testing.T) {
	t.Parallel()
	c := newCustomer(t, customerOpts{topup: "10"})
	status, h, b := rawRequest(t, http.MethodPost, "/chat/completions", c.key, chatBody("demo-chta", ""))
	if status != 403 {
		t.Fatalf("status %d: %s", status, b)
	}
	line, _ := accessLogLine(t, h.Get("x-request-id"))
	if line["model"] != "demo-chta" || line["error"] != "model_not_available" {
		t.Errorf("model %v, error %v; want the model asked for, model_not_available", line["model"], line["error"])
	}
}

// accessLogLine waits for the front's access log line of request id in the stack log
// and returns it decoded and raw.
func accessLogLine(t *testing.T, id string) (map[string]any, string) {
	t.Helper()
	return stackLogLine(t, "access log line with request_id "+id, func(part, text string) map[string]any {
		if part != "front" && part != "envoy" || !strings.HasPrefix(text, "{") {
			return nil
		}
		var m map[string]any
		if json.Unmarshal([]byte(text), &m) == nil && m["request_id"] == id {
			return m
		}
		return nil
	})
}
