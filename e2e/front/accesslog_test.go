package front

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	extprocsvc "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/llmgw/gateway/e2e/internal/bootstraptest"
	"github.com/llmgw/gateway/internal/logging/logtest"
	"github.com/llmgw/gateway/internal/testkit"
)

// accessLines waits for n access log lines in out and decodes them.
func accessLines(t *testing.T, out *logtest.Buffer, n int) []map[string]any {
	t.Helper()
	deadline := time.Now().Add(testkit.Deadline)
	for {
		text := out.String()
		if got := strings.Split(strings.TrimSuffix(text, "\n"), "\n"); text != "" && len(got) >= n {
			var lines []map[string]any
			for _, line := range got {
				var m map[string]any
				if err := json.Unmarshal([]byte(line), &m); err != nil {
					t.Fatalf("access log line is not JSON: %q", line)
				}
				lines = append(lines, m)
			}
			return lines
		}
		if time.Now().After(deadline) {
			t.Fatalf("want %d access log lines, have %q", n, text)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// withMetadata puts dynamic metadata {ns: kv} on a reply.
func withMetadata(t *testing.T, r *extprocsvc.ProcessingResponse, ns string, kv map[string]any) *extprocsvc.ProcessingResponse {
	t.Helper()
	s, err := structpb.NewStruct(map[string]any{ns: kv})
	if err != nil {
		t.Fatal(err)
	}
	r.DynamicMetadata = s
	return r
}

// TestAccessLog: envoy.yaml's access log is one JSON line per request with the typed
// values of its operators; the llmgw fields come from the dynamic metadata of extproc's
// replies — every reply kind, an immediate response included, merged key by key — and
// only when the filter's receiving namespaces list llmgw (else they are null).
func TestAccessLog(t *testing.T) {
	upstream := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"usage":{}}`))
	})
	proc := func(s *session) error {
		m := s.next()
		if m == nil {
			return nil
		}
		if strings.HasSuffix(headerMap(m.GetRequestHeaders().GetHeaders())[":path"][0], "/refused") {
			return s.send(withMetadata(t, immediate(401, `{"error":{}}`, "extproc_invalid_api_key"), "llmgw",
				map[string]any{"endpoint": "/v1/chat/completions", "outcome": "error", "error": "invalid_api_key"}))
		}
		if err := s.send(withMetadata(t, routeTo("mock-providers"), "llmgw", map[string]any{"endpoint": "/v1/chat/completions", "model": "asked"})); err != nil {
			return err
		}
		for m := s.next(); m != nil; m = s.next() {
			var r *extprocsvc.ProcessingResponse
			switch {
			case m.GetRequestBody() != nil:
				r = withMetadata(t, reqBodyReply(nil), "llmgw", map[string]any{"model": "demo-chat", "channel": "mock-demo-chat", "hold_micros": 9000})
			case m.GetResponseHeaders() != nil:
				r = respHeadersReply(nil)
			default:
				r = withMetadata(t, respBodyReply(nil), "llmgw", map[string]any{"outcome": "commit", "charge_micros": 80, "input_tokens": 12, "output_tokens": 34})
				r.DynamicMetadata.Fields["elsewhere"] = structpb.NewStructValue(&structpb.Struct{Fields: map[string]*structpb.Value{"model": structpb.NewStringValue("x")}})
			}
			if err := s.send(r); err != nil {
				return err
			}
		}
		return nil
	}
	// The response body is buffered (it reaches extproc) when extproc's headers reply
	// would ask for it: here the configured mode says so.
	buffered := func(b *bootstraptest.Bootstrap) {
		b.ExtProc(func(ep *extprocv3.ExternalProcessor) {
			ep.ProcessingMode.ResponseBodyMode = extprocv3.ProcessingMode_BUFFERED
		})
	}
	tests := []struct {
		name  string
		edit  bootstrapEdit
		path  string
		want  map[string]any
		model any
	}{
		{
			name: "success", edit: buffered, path: "/v1/chat/completions",
			want: map[string]any{"method": "POST", "status": float64(200), "endpoint": "/v1/chat/completions",
				"model": "demo-chat", "channel": "mock-demo-chat", "hold_micros": float64(9000), "outcome": "commit",
				"charge_micros": float64(80), "input_tokens": float64(12), "output_tokens": float64(34), "error": nil},
		},
		{
			name: "immediate response", path: "/v1/refused",
			want: map[string]any{"method": "POST", "status": float64(401), "endpoint": "/v1/chat/completions", "model": nil,
				"channel": nil, "hold_micros": nil, "outcome": "error", "charge_micros": nil, "input_tokens": nil,
				"output_tokens": nil, "error": "invalid_api_key"},
		},
		{
			name: "namespace not received",
			edit: func(b *bootstraptest.Bootstrap) {
				buffered(b)
				b.ExtProc(func(ep *extprocv3.ExternalProcessor) {
					ep.MetadataOptions.ReceivingNamespaces.Untyped = []string{"elsewhere"}
				})
			},
			path: "/v1/chat/completions",
			want: map[string]any{"method": "POST", "status": float64(200), "endpoint": nil, "model": nil, "channel": nil,
				"hold_micros": nil, "outcome": nil, "charge_micros": nil, "input_tokens": nil, "output_tokens": nil, "error": nil},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, upstream, proc, tt.edit)
			out := &logtest.Buffer{}
			h.envoy.accessLog = &accessLogWriter{w: out}
			status, hdr, _ := h.do(t, http.MethodPost, tt.path, map[string]string{"Authorization": "Bearer gw-secret"}, strings.NewReader(`{"messages":"secret prompt"}`))
			line := accessLines(t, out, 1)[0]
			if id := hdr.Get("X-Request-Id"); line["request_id"] != id || !uuid4.MatchString(id) {
				t.Errorf("request_id %v, want the response's x-request-id %q", line["request_id"], id)
			}
			if d, ok := line["duration_ms"].(float64); !ok || d < 0 {
				t.Errorf("duration_ms %v, want a number", line["duration_ms"])
			}
			if st, _ := line["start_time"].(string); len(st) != len("2006-01-02T15:04:05.000Z") || !strings.HasSuffix(st, "Z") {
				t.Errorf("start_time %v", line["start_time"])
			}
			for k, want := range tt.want {
				if got, ok := line[k]; !ok || got != want {
					t.Errorf("%s = %v, want %v (status %d)", k, got, want, status)
				}
			}
			raw, _ := json.Marshal(line)
			if strings.Contains(string(raw), "secret") {
				t.Errorf("the line carries a secret or the prompt: %s", raw)
			}
		})
	}
}
