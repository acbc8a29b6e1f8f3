package front

import (
	"net/http"
	"net/netip"
	"slices"
	"strings"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	extprocsvc "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"github.com/llmgw/gateway/e2e/internal/bootstraptest"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// steering are x-envoy-* headers a client sends to steer the router; Envoy removes
// them from external requests.
var steering = map[string]string{
	"X-Envoy-Retry-On":                       "5xx,retriable-status-codes",
	"X-Envoy-Retriable-Status-Codes":         "429",
	"X-Envoy-Max-Retries":                    "3",
	"X-Envoy-Upstream-Rq-Timeout-Ms":         "1",
	"X-Envoy-Upstream-Rq-Per-Try-Timeout-Ms": "1",
	"X-Envoy-Hedge-On-Per-Try-Timeout":       "true",
}

// internalRange makes prefix/n the connection manager's only internal range.
func internalRange(prefix string, n uint32) bootstrapEdit {
	return func(b *bootstraptest.Bootstrap) {
		b.HCM(func(h *hcmv3.HttpConnectionManager) {
			h.InternalAddressConfig.CidrRanges = []*corev3.CidrRange{{AddressPrefix: prefix, PrefixLen: wrapperspb.UInt32(n)}}
		})
	}
}

func TestConnectionManagerRequestHeaders(t *testing.T) {
	node := nodeAddress().String()
	noURA := func(b *bootstraptest.Bootstrap) {
		b.HCM(func(h *hcmv3.HttpConnectionManager) { h.UseRemoteAddress = wrapperspb.Bool(false) })
	}
	tests := []struct {
		name   string
		edit   bootstrapEdit
		client map[string]string
		// want: exact values ("" = absent) of these headers as extproc sees them.
		want map[string]string
		// steeringKept: the steering headers reach extproc (an internal request).
		steeringKept bool
	}{
		{
			name:   "envoy.yaml: forged x-forwarded-for is external",
			client: map[string]string{"X-Forwarded-For": "10.0.0.1", "X-Forwarded-Proto": "https", "X-Request-Id": "client-id", "X-Envoy-Internal": "true", "X-Envoy-Decorator-Operation": "op", "X-Envoy-Custom": "kept"},
			want: map[string]string{"x-forwarded-for": "10.0.0.1," + node, "x-forwarded-proto": "http", "x-envoy-external-address": "127.0.0.1",
				"x-envoy-internal": "", "x-envoy-decorator-operation": "", "x-envoy-custom": "kept"},
		},
		{
			name:   "envoy.yaml: loopback peer without x-forwarded-for is external",
			client: map[string]string{"X-Request-Id": "client-id"},
			want:   map[string]string{"x-forwarded-for": node, "x-envoy-external-address": "127.0.0.1", "x-envoy-internal": ""},
		},
		{
			name:         "loopback listed as internal, no x-forwarded-for: internal",
			edit:         internalRange("127.0.0.0", 8),
			client:       map[string]string{"X-Request-Id": "client-id", "X-Envoy-Decorator-Operation": "op"},
			want:         map[string]string{"x-forwarded-for": node, "x-envoy-internal": "true", "x-envoy-external-address": "", "x-request-id": "client-id", "x-envoy-decorator-operation": "op"},
			steeringKept: true,
		},
		{
			name:   "loopback listed as internal, any x-forwarded-for: external",
			edit:   internalRange("127.0.0.0", 8),
			client: map[string]string{"X-Forwarded-For": "127.0.0.1"},
			want:   map[string]string{"x-forwarded-for": "127.0.0.1," + node, "x-envoy-internal": "", "x-envoy-external-address": "127.0.0.1"},
		},
		{
			name: "one trusted hop: the client address is read from x-forwarded-for",
			edit: func(b *bootstraptest.Bootstrap) {
				b.HCM(func(h *hcmv3.HttpConnectionManager) { h.XffNumTrustedHops = 1 })
			},
			client: map[string]string{"X-Forwarded-For": "198.51.100.9, 203.0.113.7", "X-Forwarded-Proto": "https"},
			want:   map[string]string{"x-forwarded-for": "198.51.100.9, 203.0.113.7," + node, "x-forwarded-proto": "https", "x-envoy-external-address": "203.0.113.7"},
		},
		{
			name:   "without use_remote_address, RFC 1918 not internal: cleaned, not edge",
			edit:   noURA,
			client: map[string]string{"X-Forwarded-For": "10.0.0.1", "X-Request-Id": "client-id", "X-Envoy-Decorator-Operation": "op"},
			want:   map[string]string{"x-forwarded-for": "10.0.0.1", "x-envoy-external-address": "", "x-envoy-internal": "", "x-request-id": "client-id", "x-envoy-decorator-operation": "op"},
		},
		{
			// The finding this configuration fixes: the client's own x-forwarded-for
			// made the request internal, so its retry instructions survived.
			name:         "without use_remote_address, RFC 1918 internal: a forged x-forwarded-for is trusted",
			edit:         func(b *bootstraptest.Bootstrap) { noURA(b); internalRange("10.0.0.0", 8)(b) },
			client:       map[string]string{"X-Forwarded-For": "10.0.0.1"},
			want:         map[string]string{"x-forwarded-for": "10.0.0.1", "x-envoy-internal": "true", "x-envoy-external-address": ""},
			steeringKept: true,
		},
		{
			name:   "without use_remote_address, two addresses: external",
			edit:   func(b *bootstraptest.Bootstrap) { noURA(b); internalRange("10.0.0.0", 8)(b) },
			client: map[string]string{"X-Forwarded-For": "10.0.0.2,10.0.0.1"},
			want:   map[string]string{"x-envoy-internal": ""},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, nil, func(s *session) error {
				if s.next() == nil {
					return nil
				}
				return s.send(immediate(200, `{}`, "extproc test"))
			}, tt.edit)
			hdrs := map[string]string{}
			for k, v := range steering {
				hdrs[k] = v
			}
			for k, v := range tt.client {
				hdrs[k] = v
			}
			status, _, _ := h.do(t, http.MethodGet, "/v1/models", hdrs, nil)
			if status != 200 {
				t.Fatalf("status %d", status)
			}
			got := headerMap(h.session(t).log[0].GetRequestHeaders().GetHeaders())
			for k, want := range tt.want {
				if v := strings.Join(got[k], "|"); v != want {
					t.Errorf("%s = %q, want %q", k, v, want)
				}
			}
			for k, v := range steering {
				k = strings.ToLower(k)
				if kept := slices.Equal(got[k], []string{v}); kept != tt.steeringKept {
					t.Errorf("%s = %v, want kept %v", k, got[k], tt.steeringKept)
				}
			}
			rid := got["x-request-id"]
			if len(rid) != 1 || rid[0] == "" {
				t.Errorf("x-request-id = %v", rid)
			}
			if _, pinned := tt.want["x-request-id"]; !pinned && tt.client["X-Request-Id"] != "" && rid[0] == tt.client["X-Request-Id"] {
				t.Errorf("edge request kept the client's x-request-id")
			}
		})
	}
}

func TestLastXFFAddress(t *testing.T) {
	tests := []struct {
		name       string
		xff        string
		skip       int
		want       string
		ok, single bool
	}{
		{name: "single", xff: "10.0.0.1", want: "10.0.0.1", ok: true, single: true},
		{name: "last of two", xff: "1.2.3.4, 10.0.0.1", want: "10.0.0.1", ok: true},
		{name: "skip one", xff: "1.2.3.4,10.0.0.1", skip: 1, want: "1.2.3.4", ok: true},
		{name: "skip past the start", xff: "10.0.0.1", skip: 1},
		{name: "ipv6", xff: "2001:db8::1", want: "2001:db8::1", ok: true, single: true},
		{name: "not an address", xff: "unknown"},
		{name: "with a port", xff: "10.0.0.1:80"},
		{name: "trailing comma", xff: "10.0.0.1,"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, ok, single := lastXFFAddress(headerList{{hdrXFF, tt.xff}}, tt.skip)
			if ok != tt.ok || single != tt.single || (ok && a != netip.MustParseAddr(tt.want)) {
				t.Errorf("got %v %v %v, want %s %v %v", a, ok, single, tt.want, tt.ok, tt.single)
			}
		})
	}
}

func TestMutationRulesAllowEnvoy(t *testing.T) {
	noRules := func(b *bootstraptest.Bootstrap) {
		b.ExtProc(func(ep *extprocv3.ExternalProcessor) { ep.MutationRules = nil })
	}
	routing := func(b *bootstraptest.Bootstrap) {
		b.ExtProc(func(ep *extprocv3.ExternalProcessor) { ep.MutationRules.AllowAllRouting = wrapperspb.Bool(true) })
	}
	tests := []struct {
		name string
		edit bootstrapEdit
		// envoyApplied: the x-envoy-* remove and set reach the upstream request;
		// routingApplied: the :authority set does.
		envoyApplied, routingApplied bool
	}{
		{name: "envoy.yaml (allow_envoy)", envoyApplied: true},
		{name: "default rules", edit: noRules},
		{name: "allow_all_routing", edit: routing, envoyApplied: true, routingApplied: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.edit != nil {
				orig := loadBootstrap(t)
				edited := orig.Clone()
				tt.edit(edited)
				if edited.Equal(orig) {
					t.Fatal("edit changed nothing")
				}
			}
			up := &upstreamRecorder{}
			h := newHarness(t, up, func(s *session) error {
				s.next()
				if err := s.send(reqHeadersReply(&extprocsvc.CommonResponse{
					HeaderMutation: &extprocsvc.HeaderMutation{
						SetHeaders:    []*corev3.HeaderValueOption{setHeader("x-gateway-upstream", "mock-providers"), setHeader("x-envoy-set", "1"), setHeader(":authority", "elsewhere.example")},
						RemoveHeaders: []string{"x-envoy-custom", "x-envoyish"},
					},
					ClearRouteCache: true,
				})); err != nil {
					return err
				}
				s.next() // request_body
				if err := s.send(reqBodyReply(nil)); err != nil {
					return err
				}
				s.next() // response_headers
				if err := s.send(respHeadersReply(nil)); err != nil {
					return err
				}
				_, _ = s.waitEnd()
				return nil
			}, tt.edit)
			status, _, body := h.do(t, http.MethodPost, "/v1/chat/completions",
				map[string]string{"X-Envoy-Custom": "client", "X-Envoyish": "client", "Content-Type": "application/json"}, strings.NewReader(`{}`))
			if status != 200 {
				t.Fatalf("status %d %s", status, body)
			}
			up.mu.Lock()
			defer up.mu.Unlock()
			// Envoy's prefix is "x-envoy", without a dash: x-envoyish is guarded too.
			applied := up.header.Get("X-Envoy-Set") == "1" && up.header.Get("X-Envoy-Custom") == "" && up.header.Get("X-Envoyish") == ""
			ignored := up.header.Get("X-Envoy-Set") == "" && up.header.Get("X-Envoy-Custom") == "client" && up.header.Get("X-Envoyish") == "client"
			if (tt.envoyApplied && !applied) || (!tt.envoyApplied && !ignored) {
				t.Errorf("upstream x-envoy-set %q x-envoy-custom %q x-envoyish %q, want applied %v", up.header.Get("X-Envoy-Set"), up.header.Get("X-Envoy-Custom"), up.header.Get("X-Envoyish"), tt.envoyApplied)
			}
			if got := up.host == "elsewhere.example"; got != tt.routingApplied {
				t.Errorf("upstream host %q, want :authority applied %v", up.host, tt.routingApplied)
			}
		})
	}
}
