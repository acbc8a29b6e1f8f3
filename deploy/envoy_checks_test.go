package deploy_test

import (
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"

	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/llmgw/gateway/envoy/config"
)

// opsPaths are the admin endpoints the ops listener may forward, GET only: the kubelet's
// readiness probe and Prometheus' scrape. Every other admin endpoint is either mutating
// (/quitquitquit, /drain_listeners, /runtime_modify, /logging, /healthcheck/fail...) or
// reveals more than monitoring needs (/config_dump).
var opsPaths = []string{"/ready", "/stats/prometheus"}

// monitoringNamespace is the namespace whose Prometheus scrapes the gateway.
const monitoringNamespace = "monitoring"

// envoyConfig is the gateway pod's Envoy bootstrap, decoded as strictly as Envoy reads it
// (github.com/llmgw/gateway/envoy/config: unknown fields, unresolvable typed_configs and
// protoc-gen-validate violations are errors).
type envoyConfig struct {
	*bootstrapv3.Bootstrap
}

// gatewayEnvoy returns the gateway pod's Envoy container and the config it loads.
func (b *bundle) gatewayEnvoy() (*corev1.PodTemplateSpec, *corev1.Container, *envoyConfig, error) {
	gw, ok := b.Deployments["gateway"]
	if !ok {
		return nil, nil, nil, errors.New("no gateway Deployment")
	}
	t := &gw.Spec.Template
	c := findContainer(t, "envoy")
	cfgPath, ok := flagValue(c.Args, "config-path")
	if !ok {
		cfgPath, ok = flagValue(c.Args, "c")
	}
	if !ok {
		return nil, nil, nil, errors.New("envoy container: no --config-path")
	}
	data, err := b.readFile(t, c, cfgPath)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("envoy container: %w", err)
	}
	bs, err := config.Parse(data)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("envoy config %s: %w", cfgPath, err)
	}
	return t, c, &envoyConfig{bs}, nil
}

func sockAddr(a *corev3.Address) (string, uint32) {
	sa := a.GetSocketAddress()
	return sa.GetAddress(), sa.GetPortValue()
}

func (cfg *envoyConfig) listener(name string) *listenerv3.Listener {
	for _, l := range cfg.GetStaticResources().GetListeners() {
		if l.GetName() == name {
			return l
		}
	}
	return nil
}

// endpoints returns the socket addresses of a static cluster, and whether it exists.
func (cfg *envoyConfig) endpoints(name string) ([]string, bool) {
	for _, c := range cfg.GetStaticResources().GetClusters() {
		if c.GetName() != name {
			continue
		}
		var out []string
		for _, e := range c.GetLoadAssignment().GetEndpoints() {
			for _, lb := range e.GetLbEndpoints() {
				h, p := sockAddr(lb.GetEndpoint().GetAddress())
				out = append(out, net.JoinHostPort(h, strconv.Itoa(int(p))))
			}
		}
		return out, true
	}
	return nil, false
}

// cluster returns the first endpoint of a static cluster, and whether the cluster exists.
func (cfg *envoyConfig) cluster(name string) (string, bool) {
	eps, ok := cfg.endpoints(name)
	if len(eps) == 0 {
		return "", ok
	}
	return eps[0], true
}

// reachesAdmin reports whether a cluster has Envoy's own admin interface as an endpoint.
func (cfg *envoyConfig) reachesAdmin(name string) bool {
	eps, _ := cfg.endpoints(name)
	for _, e := range eps {
		if cfg.isAdminAddress(e) {
			return true
		}
	}
	return false
}

// isAdminAddress reports whether host:port is Envoy's own admin interface.
func (cfg *envoyConfig) isAdminAddress(e string) bool {
	ah, ap := sockAddr(cfg.GetAdmin().GetAddress())
	h, p, _ := net.SplitHostPort(e)
	if p != strconv.Itoa(int(ap)) {
		return false
	}
	ip := net.ParseIP(ah)
	return h == ah || isLoopback(h) && (isLoopback(ah) || ip != nil && ip.IsUnspecified())
}

// connectionManagers decodes the HTTP connection managers of a listener; any other
// network filter is an error.
func connectionManagers(l *listenerv3.Listener) ([]*hcmv3.HttpConnectionManager, error) {
	var out []*hcmv3.HttpConnectionManager
	chains := l.GetFilterChains()
	if l.GetDefaultFilterChain() != nil {
		chains = append(slices.Clone(chains), l.GetDefaultFilterChain())
	}
	for _, fc := range chains {
		for _, f := range fc.GetFilters() {
			hcm := &hcmv3.HttpConnectionManager{}
			if err := f.GetTypedConfig().UnmarshalTo(hcm); err != nil {
				return nil, fmt.Errorf("listener %s: filter %s is not an HTTP connection manager: %v", l.GetName(), f.GetName(), err)
			}
			out = append(out, hcm)
		}
	}
	return out, nil
}

// onlyGET reports whether header matchers restrict a route to GET.
func onlyGET(hs []*routev3.HeaderMatcher) bool {
	for _, h := range hs {
		if h.GetName() == ":method" && !h.GetInvertMatch() && h.GetStringMatch().GetExact() == "GET" {
			return true
		}
	}
	return false
}

// describeMatch names a route's path match for a report.
func describeMatch(m *routev3.RouteMatch) string {
	switch {
	case m.GetPath() != "":
		return "path " + m.GetPath()
	case m.GetPrefix() != "":
		return "prefix " + m.GetPrefix()
	case m.GetSafeRegex() != nil:
		return "safe_regex " + m.GetSafeRegex().GetRegex()
	case m.GetPathSeparatedPrefix() != "":
		return "path_separated_prefix " + m.GetPathSeparatedPrefix()
	default:
		return fmt.Sprintf("%T", m.GetPathSpecifier())
	}
}

// opsForwards checks the ops listener and returns the paths it forwards to the admin
// interface: only exact GET opsPaths, unrewritten, to a cluster that is the admin
// interface, everything else answered by a direct_response 404.
func (cfg *envoyConfig) opsForwards() (map[string]bool, []error) {
	l := cfg.listener(opsListenerName)
	var errs []error
	if h, _ := sockAddr(l.GetAddress()); isLoopback(h) {
		errs = append(errs, fmt.Errorf("envoy %s listener binds %s: the kubelet and Prometheus cannot reach it", opsListenerName, h))
	}
	if len(l.GetFilterChains()) != 1 || l.GetDefaultFilterChain() != nil || len(l.GetListenerFilters()) != 0 || len(l.GetFilterChains()[0].GetFilters()) != 1 {
		errs = append(errs, fmt.Errorf("envoy %s listener: want one filter chain holding only the HTTP connection manager", opsListenerName))
	}
	hcms, err := connectionManagers(l)
	if err != nil {
		return nil, append(errs, err)
	}
	forwards := map[string]bool{}
	for _, hcm := range hcms {
		var filters []string
		for _, f := range hcm.GetHttpFilters() {
			filters = append(filters, f.GetName())
		}
		if !slices.Equal(filters, []string{"envoy.filters.http.router"}) {
			errs = append(errs, fmt.Errorf("envoy %s listener: http filters %v, want the router only", opsListenerName, filters))
		}
		rc := hcm.GetRouteConfig()
		if rc == nil {
			errs = append(errs, fmt.Errorf("envoy %s listener: routes must be inline (route_config), not RDS or scoped routes", opsListenerName))
			continue
		}
		for _, vh := range rc.GetVirtualHosts() {
			catchAll := false
			for i, r := range vh.GetRoutes() {
				m := r.GetMatch()
				where := fmt.Sprintf("envoy %s listener, virtual host %s, route %d", opsListenerName, vh.GetName(), i)
				switch {
				case r.GetDirectResponse() != nil:
					if st := r.GetDirectResponse().GetStatus(); st != 404 {
						errs = append(errs, fmt.Errorf("%s: direct_response %d, want 404", where, st))
					}
					if m.GetPrefix() == "/" && len(m.GetHeaders())+len(m.GetQueryParameters()) == 0 {
						catchAll = true
					}
				case r.GetRoute() != nil:
					ra := r.GetRoute()
					path := m.GetPath()
					ok := true
					if path == "" || !slices.Contains(opsPaths, path) {
						ok = false
						errs = append(errs, fmt.Errorf("%s: forwards %s to the admin interface; only the exact paths %v may be", where, describeMatch(m), opsPaths))
					}
					if !onlyGET(m.GetHeaders()) {
						ok = false
						errs = append(errs, fmt.Errorf("%s: forwards %s for other methods than GET", where, path))
					}
					if ra.GetCluster() == "" {
						ok = false
						errs = append(errs, fmt.Errorf("%s: must name one static cluster (no cluster_header or weighted_clusters)", where))
					} else if !cfg.reachesAdmin(ra.GetCluster()) {
						ok = false
						errs = append(errs, fmt.Errorf("%s: cluster %s is not Envoy's admin interface", where, ra.GetCluster()))
					}
					if ra.GetPrefixRewrite() != "" || ra.GetRegexRewrite() != nil || ra.GetPathRewritePolicy() != nil {
						ok = false
						errs = append(errs, fmt.Errorf("%s: rewrites the path of %s", where, path))
					}
					if ok && !catchAll {
						forwards[path] = true
					}
				default:
					errs = append(errs, fmt.Errorf("%s: only routes to the admin interface and direct_response 404 are allowed", where))
				}
			}
			if !catchAll {
				errs = append(errs, fmt.Errorf("envoy %s listener, virtual host %s: no catch-all route (prefix /) answering direct_response 404", opsListenerName, vh.GetName()))
			}
		}
	}
	return forwards, errs
}

func checkEnvoy(b *bundle) []error {
	t, envoy, cfg, err := b.gatewayEnvoy()
	if err != nil {
		return []error{err}
	}
	var errs []error
	var names []string
	for _, l := range cfg.GetStaticResources().GetListeners() {
		names = append(names, l.GetName())
	}
	slices.Sort(names)
	if want := []string{"gateway", opsListenerName}; !slices.Equal(names, want) {
		return append(errs, fmt.Errorf("envoy.yaml: listeners %v, want %v", names, want))
	}
	// The gateway listener is what the Service's targetPort reaches, on the pod's interfaces.
	lisHost, lisPort := sockAddr(cfg.listener("gateway").GetAddress())
	if isLoopback(lisHost) {
		errs = append(errs, fmt.Errorf("envoy listener binds %s: unreachable from outside the pod", lisHost))
	}
	svc, ok := b.Services["gateway"]
	if !ok || len(svc.Spec.Ports) != 1 {
		errs = append(errs, errors.New("Service/gateway: want exactly one port"))
	} else if n, c, ok := podPort(t, svc.Spec.Ports[0].TargetPort); !ok || c.Name != "envoy" || uint32(n) != lisPort {
		errs = append(errs, fmt.Errorf("Service/gateway targetPort %s is not Envoy's listener port %d", svc.Spec.Ports[0].TargetPort.String(), lisPort))
	}
	// The admin interface binds the pod's loopback: whoever reaches it can stop or
	// reconfigure Envoy.
	adminHost, adminPort := sockAddr(cfg.GetAdmin().GetAddress())
	if !isLoopback(adminHost) {
		errs = append(errs, fmt.Errorf("envoy admin binds %s: anything reaching the pod could POST /quitquitquit, /drain_listeners, /runtime_modify, /logging; bind it to 127.0.0.1 and reach it through the %s listener", adminHost, opsListenerName))
	}
	// Every declared Envoy port is a listener bound on the pod's interfaces; the admin
	// port is not exposed.
	bound := map[uint32]string{}
	for _, l := range cfg.GetStaticResources().GetListeners() {
		h, p := sockAddr(l.GetAddress())
		bound[p] = h
	}
	for _, cp := range envoy.Ports {
		p := uint32(cp.ContainerPort)
		h, ok := bound[p]
		switch {
		case p == adminPort:
			errs = append(errs, fmt.Errorf("envoy container declares the admin port %d (%s): the admin interface must not be exposed", p, cp.Name))
		case !ok:
			errs = append(errs, fmt.Errorf("envoy container declares port %d that Envoy does not listen on", p))
		case isLoopback(h):
			errs = append(errs, fmt.Errorf("envoy container declares port %d that Envoy binds on %s", p, h))
		}
	}
	// Probes go through the ops listener, on paths it forwards to the admin interface.
	forwards, opsErrs := cfg.opsForwards()
	errs = append(errs, opsErrs...)
	_, opsP := sockAddr(cfg.listener(opsListenerName).GetAddress())
	if rp := envoy.ReadinessProbe; rp == nil || rp.HTTPGet == nil || rp.HTTPGet.Path != "/ready" {
		errs = append(errs, fmt.Errorf("envoy container: readiness probe must be GET /ready on the %s port", opsListenerName))
	}
	for _, pr := range []struct {
		kind  string
		probe *corev1.Probe
	}{{"startup", envoy.StartupProbe}, {"readiness", envoy.ReadinessProbe}, {"liveness", envoy.LivenessProbe}} {
		var port intstr.IntOrString
		switch {
		case pr.probe == nil:
			continue
		case pr.probe.HTTPGet != nil:
			port = pr.probe.HTTPGet.Port
		case pr.probe.TCPSocket != nil:
			port = pr.probe.TCPSocket.Port
		default:
			continue
		}
		n, ok := containerPort(envoy, port)
		if !ok {
			continue // checkProbes reports it
		}
		switch {
		case uint32(n) == adminPort:
			errs = append(errs, fmt.Errorf("envoy %s probe targets the admin port %d", pr.kind, n))
		case uint32(n) != opsP:
			errs = append(errs, fmt.Errorf("envoy %s probe port %d is not the %s listener's port %d", pr.kind, n, opsListenerName, opsP))
		case pr.probe.HTTPGet != nil && !forwards[pr.probe.HTTPGet.Path]:
			errs = append(errs, fmt.Errorf("envoy %s probe GET %s: the %s listener does not forward it to the admin interface", pr.kind, pr.probe.HTTPGet.Path, opsListenerName))
		}
	}
	// Only the ops listener routes to the admin interface.
	gwHCMs, err := connectionManagers(cfg.listener("gateway"))
	if err != nil {
		errs = append(errs, err)
	}
	for _, hcm := range gwHCMs {
		for _, vh := range hcm.GetRouteConfig().GetVirtualHosts() {
			for _, r := range vh.GetRoutes() {
				targets := []string{r.GetRoute().GetCluster()}
				for _, wc := range r.GetRoute().GetWeightedClusters().GetClusters() {
					targets = append(targets, wc.GetName())
				}
				for _, c := range targets {
					if c != "" && cfg.reachesAdmin(c) {
						errs = append(errs, fmt.Errorf("envoy gateway listener routes to cluster %s, Envoy's admin interface", c))
					}
				}
			}
		}
	}
	// ext_proc goes over the pod's loopback to the extproc container.
	ep, ok := cfg.cluster("extproc")
	if !ok {
		return append(errs, errors.New("envoy.yaml: no extproc cluster"))
	}
	listen, ok := b.envValue(findContainer(t, "extproc"), "EXTPROC_ADDR")
	if !ok {
		return append(errs, errors.New("extproc container: EXTPROC_ADDR is not set"))
	}
	if ep != listen {
		errs = append(errs, fmt.Errorf("envoy's extproc cluster is %s but extproc listens on %s", ep, listen))
	}
	if h, _, _ := net.SplitHostPort(ep); !isLoopback(h) {
		errs = append(errs, fmt.Errorf("envoy's extproc cluster %s is not on the pod's loopback", ep))
	}
	return errs
}

// ingressFromNamespace reports whether the policies let any pod of namespace ns reach a
// pod labelled to on its port number (container c provides the named ports).
func (b *bundle) ingressFromNamespace(ns string, to map[string]string, c *corev1.Container, number int32) bool {
	nsLabels := map[string]string{"kubernetes.io/metadata.name": ns}
	return b.ingressAdmits(to, c, number, func(peer networkingv1.NetworkPolicyPeer) bool {
		if peer.NamespaceSelector == nil || peer.PodSelector != nil && len(peer.PodSelector.MatchLabels)+len(peer.PodSelector.MatchExpressions) > 0 {
			return false
		}
		ok, _ := labelSelects(peer.NamespaceSelector, nsLabels)
		return ok
	})
}

// checkScrapes checks that the monitoring namespace reaches extproc's metrics port and
// Envoy's ops listener, and that no policy admits anything to Envoy's admin port.
func checkScrapes(b *bundle) []error {
	t, envoy, cfg, err := b.gatewayEnvoy()
	if err != nil {
		return []error{err}
	}
	var errs []error
	_, adminPort := sockAddr(cfg.GetAdmin().GetAddress())
	for n, p := range b.NetPols {
		if ok, _ := labelSelects(&p.Spec.PodSelector, t.Labels); !ok {
			continue
		}
		for _, r := range p.Spec.Ingress {
			if portsAdmit(r.Ports, envoy, int32(adminPort)) {
				errs = append(errs, fmt.Errorf("NetworkPolicy/%s admits ingress to Envoy's admin port %d", n, adminPort))
			}
		}
	}
	_, opsP := sockAddr(cfg.listener(opsListenerName).GetAddress())
	extproc := findContainer(t, "extproc")
	metrics, _ := containerPort(extproc, intstr.FromString("metrics"))
	for _, target := range []struct {
		what string
		c    *corev1.Container
		port int32
	}{{"Envoy's " + opsListenerName + " listener", envoy, int32(opsP)}, {"extproc's metrics", extproc, metrics}} {
		if !b.ingressFromNamespace(monitoringNamespace, t.Labels, target.c, target.port) {
			errs = append(errs, fmt.Errorf("the %s namespace cannot reach %s on %d", monitoringNamespace, target.what, target.port))
		}
	}
	if adm, ok := b.Deployments["accounting"]; ok {
		c := findContainer(&adm.Spec.Template, "accounting")
		if n, ok := containerPort(c, intstr.FromString("metrics")); !ok || !b.ingressFromNamespace(monitoringNamespace, adm.Spec.Template.Labels, c, n) {
			errs = append(errs, fmt.Errorf("the %s namespace cannot reach accounting's metrics on %d", monitoringNamespace, n))
		}
	}
	return errs
}
