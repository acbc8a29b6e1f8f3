package front

import (
	"strings"
	"testing"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
)

// TestRouteRequestHeadersToRemove: the route's request_headers_to_remove drops the
// routing header from the upstream request after it chose the cluster; a route that
// would remove a pseudo-header or host is refused, as Envoy refuses it at load.
func TestRouteRequestHeadersToRemove(t *testing.T) {
	up := &upstreamRecorder{}
	h := newHarness(t, up, continueAll, nil)
	code, _, _ := h.do(t, "POST", "/v1/embeddings", map[string]string{"Content-Type": "application/json"}, strings.NewReader(`{}`))
	if code != 200 || up.calls != 1 {
		t.Fatalf("status %d, %d upstream calls", code, up.calls)
	}
	if v := up.header.Get("x-gateway-upstream"); v != "" {
		t.Errorf("the provider received x-gateway-upstream %q", v)
	}
	for _, bad := range []string{":path", "host"} {
		b := loadBootstrap(t)
		b.Route(func(r *routev3.Route) { r.RequestHeadersToRemove = []string{bad} })
		if _, err := FromBootstrap(b.Parsed()); err == nil || !strings.Contains(err.Error(), "may not be removed") {
			t.Errorf("removing %s: err %v", bad, err)
		}
	}
}
