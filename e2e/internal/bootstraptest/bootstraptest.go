// Package bootstraptest lets a test change envoy/envoy.yaml as Envoy's own parsed
// bootstrap (go-control-plane's v3 protos), not as YAML text: an edit names the field it
// changes, fails the test when the field it looks for is gone, and the result is parsed
// again as strictly as Envoy reads it (envoy/config.Parse) before the test uses it.
//
// It is for tests only (the Envoy test front's and the e2e suite's); production code
// must not import it.
package bootstraptest

import (
	"fmt"
	"net"
	"os"
	"strconv"
	"testing"

	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	overloadv3 "github.com/envoyproxy/go-control-plane/envoy/config/overload/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/llmgw/gateway/envoy/config"
)

// Bootstrap is a parsed Envoy bootstrap being edited by a test.
type Bootstrap struct {
	t  testing.TB
	pb *bootstrapv3.Bootstrap
}

// Load parses the bootstrap YAML at path (envoy/envoy.yaml, or the stack's rendered copy).
func Load(t testing.TB, path string) *Bootstrap {
	t.Helper()
	pb, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	return &Bootstrap{t: t, pb: pb}
}

// TB is the test the bootstrap belongs to (for EditAny in an edit).
func (b *Bootstrap) TB() testing.TB { return b.t }

// Proto is the bootstrap message itself, for edits no helper below covers.
func (b *Bootstrap) Proto() *bootstrapv3.Bootstrap { return b.pb }

// Clone returns an independent copy (for a table of edits of one loaded file).
func (b *Bootstrap) Clone() *Bootstrap {
	return &Bootstrap{t: b.t, pb: proto.Clone(b.pb).(*bootstrapv3.Bootstrap)}
}

// Equal reports whether b and o are the same configuration (a test checks that its
// edit changed something).
func (b *Bootstrap) Equal(o *Bootstrap) bool { return proto.Equal(b.pb, o.pb) }

// JSON is the bootstrap as JSON, which Envoy (and config.Parse) read as YAML.
func (b *Bootstrap) JSON() []byte {
	b.t.Helper()
	js, err := protojson.Marshal(b.pb)
	if err != nil {
		b.t.Fatal(err)
	}
	return js
}

// Parsed is the edited bootstrap after a round trip through config.Parse: an edit Envoy
// would refuse (a validation rule, an unknown extension) fails the test here.
func (b *Bootstrap) Parsed() *bootstrapv3.Bootstrap {
	b.t.Helper()
	pb, err := config.Parse(b.JSON())
	if err != nil {
		b.t.Fatalf("edited bootstrap does not parse: %v", err)
	}
	return pb
}

// Write writes the edited bootstrap to path, for a front started from a file.
func (b *Bootstrap) Write(path string) {
	b.t.Helper()
	b.Parsed()
	if err := os.WriteFile(path, b.JSON(), 0o600); err != nil {
		b.t.Fatal(err)
	}
}

// Listener is the single listener.
func (b *Bootstrap) Listener() *listenerv3.Listener {
	b.t.Helper()
	ls := b.pb.GetStaticResources().GetListeners()
	if len(ls) != 1 {
		b.t.Fatalf("bootstrap has %d listeners, want 1", len(ls))
	}
	return ls[0]
}

// HCM edits the listener's HTTP connection manager.
func (b *Bootstrap) HCM(edit func(*hcmv3.HttpConnectionManager)) {
	b.t.Helper()
	fc := b.Listener().GetFilterChains()
	if len(fc) != 1 || len(fc[0].GetFilters()) != 1 {
		b.t.Fatal("listener has not exactly one filter chain with one filter")
	}
	EditAny(b.t, fc[0].GetFilters()[0].GetTypedConfig(), edit)
}

// ExtProc edits the connection manager's ext_proc filter.
func (b *Bootstrap) ExtProc(edit func(*extprocv3.ExternalProcessor)) {
	b.t.Helper()
	b.HCM(func(h *hcmv3.HttpConnectionManager) {
		for _, f := range h.GetHttpFilters() {
			if f.GetName() == "envoy.filters.http.ext_proc" {
				EditAny(b.t, f.GetTypedConfig(), edit)
				return
			}
		}
		b.t.Fatal("connection manager has no ext_proc filter")
	})
}

// VirtualHost edits the route configuration's single virtual host.
func (b *Bootstrap) VirtualHost(edit func(*routev3.VirtualHost)) {
	b.t.Helper()
	b.HCM(func(h *hcmv3.HttpConnectionManager) {
		vh := h.GetRouteConfig().GetVirtualHosts()
		if len(vh) != 1 {
			b.t.Fatalf("route configuration has %d virtual hosts, want 1", len(vh))
		}
		edit(vh[0])
	})
}

// Route edits the virtual host's single route (the /v1/ route).
func (b *Bootstrap) Route(edit func(*routev3.Route)) {
	b.t.Helper()
	b.VirtualHost(func(vh *routev3.VirtualHost) {
		if len(vh.GetRoutes()) != 1 {
			b.t.Fatalf("virtual host has %d routes, want 1", len(vh.GetRoutes()))
		}
		edit(vh.GetRoutes()[0])
	})
}

// Cluster is the static cluster named name.
func (b *Bootstrap) Cluster(name string) *clusterv3.Cluster {
	b.t.Helper()
	for _, c := range b.pb.GetStaticResources().GetClusters() {
		if c.GetName() == name {
			return c
		}
	}
	b.t.Fatalf("bootstrap has no static cluster %q", name)
	return nil
}

// ClusterAddress points the single endpoint of the static cluster name at addr
// (host:port).
func (b *Bootstrap) ClusterAddress(name, addr string) {
	b.t.Helper()
	eps := b.Cluster(name).GetLoadAssignment().GetEndpoints()
	if len(eps) != 1 || len(eps[0].GetLbEndpoints()) != 1 {
		b.t.Fatalf("cluster %s has not exactly one endpoint", name)
	}
	b.setAddress(eps[0].GetLbEndpoints()[0].GetEndpoint().GetAddress().GetSocketAddress(), addr)
}

// ListenerAddress makes the listener listen on addr (host:port).
func (b *Bootstrap) ListenerAddress(addr string) {
	b.t.Helper()
	b.setAddress(b.Listener().GetAddress().GetSocketAddress(), addr)
}

func (b *Bootstrap) setAddress(sa *corev3.SocketAddress, addr string) {
	b.t.Helper()
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		b.t.Fatal(err)
	}
	p, err := strconv.ParseUint(port, 10, 32)
	if err != nil {
		b.t.Fatal(err)
	}
	if sa == nil {
		b.t.Fatal("no socket address to set")
	}
	sa.Address = host
	sa.PortSpecifier = &corev3.SocketAddress_PortValue{PortValue: uint32(p)}
}

// ResourceMonitor edits the typed configuration of the overload manager's resource
// monitor name; T is its configuration message.
func ResourceMonitor[T proto.Message](b *Bootstrap, name string, edit func(T)) {
	b.t.Helper()
	for _, m := range b.pb.GetOverloadManager().GetResourceMonitors() {
		if m.GetName() == name {
			EditAny(b.t, m.GetTypedConfig(), edit)
			return
		}
	}
	b.t.Fatalf("overload manager has no resource monitor %q", name)
}

// OverloadAction is the overload manager's action name.
func (b *Bootstrap) OverloadAction(name string) *overloadv3.OverloadAction {
	b.t.Helper()
	for _, a := range b.pb.GetOverloadManager().GetActions() {
		if a.GetName() == name {
			return a
		}
	}
	b.t.Fatalf("overload manager has no action %q", name)
	return nil
}

// EditAny unpacks a (a typed_config) as T, lets edit change it, and packs it back.
func EditAny[T proto.Message](t testing.TB, a *anypb.Any, edit func(T)) {
	t.Helper()
	var zero T
	m := zero.ProtoReflect().New().Interface().(T)
	if a == nil {
		t.Fatalf("no typed_config for %s", m.ProtoReflect().Descriptor().FullName())
	}
	if err := a.UnmarshalTo(m); err != nil {
		t.Fatal(fmt.Errorf("typed_config: %w", err))
	}
	edit(m)
	packed, err := anypb.New(m)
	if err != nil {
		t.Fatal(err)
	}
	a.TypeUrl, a.Value = packed.GetTypeUrl(), packed.GetValue()
}

// MustNew packs m into an Any (a typed_config a test adds).
func MustNew(t testing.TB, m proto.Message) *anypb.Any {
	t.Helper()
	a, err := anypb.New(m)
	if err != nil {
		t.Fatal(err)
	}
	return a
}
