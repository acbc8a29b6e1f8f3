package front

import (
	"bytes"
	"net/http"
	"testing"

	"github.com/llmgw/gateway/e2e/internal/bootstraptest"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// TestCircuitBreakers checks the emulation of the clusters' max_requests: a request
// past the ext_proc cluster's limit fails closed (500 internal_error, the side stream
// never opens), one past a provider cluster's limit gets Envoy's 503 overflow, mapped
// to service_unavailable. The ADS stream is a request on the extproc cluster too (Envoy's
// gRPC async client goes through the cluster's pool and its circuit breakers).
func TestCircuitBreakers(t *testing.T) {
	tests := []struct {
		name string
		// edit lowers max_requests of the extproc cluster to 2 (the ADS stream and one
		// request); provider sets the provider cluster's max_requests.
		edit       bootstrapEdit
		provider   uint32
		wantStatus int
		wantCode   string
		// wantSessions is how many ext_proc streams the two requests open.
		wantSessions int
	}{
		{
			name: "ext_proc cluster",
			edit: func(b *bootstraptest.Bootstrap) {
				b.Cluster("extproc").CircuitBreakers.Thresholds[0].MaxRequests = wrapperspb.UInt32(2)
			},
			provider:   10000,
			wantStatus: 500, wantCode: "internal_error", wantSessions: 1,
		},
		{
			name:       "provider cluster",
			provider:   1,
			wantStatus: 503, wantCode: "service_unavailable", wantSessions: 2,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			started, release := make(chan struct{}), make(chan struct{})
			upstream := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				close(started)
				<-release
				w.Header().Set("Content-Type", "application/json")
				_, _ = w.Write([]byte(`{}`))
			})
			sessions := make(chan struct{}, 4)
			mock := testCluster("mock-providers", "127.0.0.1:1")
			mock.GetCircuitBreakers().GetThresholds()[0].MaxRequests = wrapperspb.UInt32(tt.provider)
			h := newHarnessClusters(t, upstream, func(s *session) error {
				sessions <- struct{}{}
				for m := s.next(); m != nil; m = s.next() {
					switch {
					case m.GetRequestHeaders() != nil:
						_ = s.send(routeTo("mock-providers"))
					case m.GetResponseHeaders() != nil:
						_ = s.send(respHeadersReply(nil))
					}
				}
				return nil
			}, tt.edit, mock)

			first := make(chan int, 1)
			go func() {
				resp, err := http.Get(h.front.URL + "/v1/models")
				if err != nil {
					first <- 0
					return
				}
				resp.Body.Close()
				first <- resp.StatusCode
			}()
			<-started // the first request holds a slot on both clusters
			status, _, b := h.do(t, http.MethodGet, "/v1/models", nil, nil)
			close(release)
			if status != tt.wantStatus || !bytes.Contains(b, []byte(`"code":"`+tt.wantCode+`"`)) {
				t.Errorf("second request: got %d %s, want %d %s", status, b, tt.wantStatus, tt.wantCode)
			}
			if got := <-first; got != 200 {
				t.Errorf("first request: got %d, want 200", got)
			}
			if got := len(sessions); got != tt.wantSessions {
				t.Errorf("ext_proc streams: got %d, want %d", got, tt.wantSessions)
			}
		})
	}
}

// TestClusterLimitsAndKeepalive checks what FromBootstrap reads from envoy/envoy.yaml:
// raised circuit breakers on every cluster and HTTP/2 keepalive towards extproc.
func TestClusterLimitsAndKeepalive(t *testing.T) {
	cfg, err := FromBootstrap(loadBootstrap(t).Parsed())
	if err != nil {
		t.Fatal(err)
	}
	for name, c := range cfg.Clusters {
		if c.MaxInFlight != 10000 {
			t.Errorf("cluster %s: MaxInFlight %d, want 10000", name, c.MaxInFlight)
		}
	}
	ep := cfg.Clusters["extproc"]
	if ep.KeepaliveInterval.Seconds() != 30 || ep.KeepaliveTimeout.Seconds() != 5 {
		t.Errorf("extproc keepalive %v/%v, want 30s/5s", ep.KeepaliveInterval, ep.KeepaliveTimeout)
	}
}
