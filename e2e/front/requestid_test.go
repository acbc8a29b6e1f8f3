package front

import (
	"net/http"
	"regexp"
	"strings"
	"testing"

	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	extprocsvc "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"github.com/llmgw/gateway/e2e/internal/bootstraptest"
)

var uuid4 = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)

// TestRequestIDInEveryResponse: with always_set_request_id_in_response (envoy.yaml),
// the x-request-id Envoy generated (a UUID4 replacing the client's) is the one extproc
// and the upstream see and the one every response carries: an upstream answer (whose own
// x-request-id is replaced), an ext_proc immediate response and a router local reply.
// Without the setting no response carries it.
func TestRequestIDInEveryResponse(t *testing.T) {
	upstreamIDs := make(chan string, 4)
	upstream := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		upstreamIDs <- r.Header.Get("X-Request-Id")
		w.Header().Set("X-Request-Id", "provider-id")
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{}`))
	})
	proc := func(s *session) error {
		m := s.next()
		if m == nil {
			return nil
		}
		path := headerMap(m.GetRequestHeaders().GetHeaders())[":path"][0]
		switch {
		case strings.HasSuffix(path, "/immediate"):
			return s.send(immediate(429, `{"error":{}}`, "extproc_refused"))
		case strings.HasSuffix(path, "/nocluster"):
			if err := s.send(routeTo("no-such-cluster")); err != nil {
				return err
			}
		default:
			if err := s.send(routeTo("mock-providers")); err != nil {
				return err
			}
		}
		for m := s.next(); m != nil; m = s.next() {
			var r *extprocsvc.ProcessingResponse
			switch {
			case m.GetResponseHeaders() != nil:
				r = respHeadersReply(nil)
			case m.GetResponseBody() != nil:
				r = respBodyReply(nil)
			default:
				r = reqBodyReply(nil)
			}
			if err := s.send(r); err != nil {
				return err
			}
		}
		return nil
	}
	off := func(b *bootstraptest.Bootstrap) {
		b.HCM(func(h *hcmv3.HttpConnectionManager) { h.AlwaysSetRequestIdInResponse = false })
	}
	for _, set := range []bool{true, false} {
		var edit bootstrapEdit
		if !set {
			edit = off
		}
		h := newHarness(t, upstream, proc, edit)
		for _, tt := range []struct {
			path     string
			status   int
			upstream bool
		}{
			{"/v1/models", 200, true},
			{"/v1/immediate", 429, false},
			{"/v1/nocluster", 503, false},
		} {
			status, hdr, _ := h.do(t, http.MethodGet, tt.path, map[string]string{"X-Request-Id": "client-id"}, nil)
			if status != tt.status {
				t.Fatalf("%s: status %d, want %d", tt.path, status, tt.status)
			}
			seen := headerMap(h.session(t).log[0].GetRequestHeaders().GetHeaders())["x-request-id"]
			if len(seen) != 1 || !uuid4.MatchString(seen[0]) {
				t.Fatalf("%s: extproc saw x-request-id %v, want one generated UUID4", tt.path, seen)
			}
			if tt.upstream {
				if up := <-upstreamIDs; up != seen[0] {
					t.Errorf("%s: upstream got x-request-id %q, extproc %q", tt.path, up, seen[0])
				}
			}
			got := hdr.Values("X-Request-Id")
			switch {
			case set && (len(got) != 1 || got[0] != seen[0]):
				t.Errorf("%s: response x-request-id %v, want [%s]", tt.path, got, seen[0])
			case !set && tt.upstream && (len(got) != 1 || got[0] != "provider-id"):
				t.Errorf("%s (setting off): response x-request-id %v, want the provider's", tt.path, got)
			case !set && !tt.upstream && len(got) != 0:
				t.Errorf("%s (setting off): response x-request-id %v, want none", tt.path, got)
			}
		}
	}
}

func TestRequestIDIsUUID4(t *testing.T) {
	seen := map[string]bool{}
	for range 3 * randomBufferSize / 16 { // across refills of the random buffer
		id := newRequestID()
		if !uuid4.MatchString(id) || seen[id] {
			t.Fatalf("request id %q: not a fresh UUID v4", id)
		}
		seen[id] = true
	}
}
