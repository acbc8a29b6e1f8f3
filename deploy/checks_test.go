package deploy_test

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/llmgw/gateway/extproc/catalog"
)

// externalSecrets are the Secrets an overlay references but does not contain, with the
// keys the manifests use: created by the operator before the first apply (documented
// in docs/operations.md) or by the CloudNativePG operator for the named Cluster.
var externalSecrets = map[string]map[string]externalSecret{
	"overlays/production": {
		"gateway-tokens":               {Keys: []string{"service-token", "admin-token"}},
		"gateway-provider-credentials": {Keys: []string{"openai-api-key", "anthropic-api-key"}},
		"gateway-db-app":               {Keys: []string{"uri"}, MadeByCluster: "gateway-db"},
		"gateway-db-ca":                {Keys: []string{"ca.crt"}, MadeByCluster: "gateway-db"},
	},
}

type externalSecret struct {
	Keys []string
	// MadeByCluster names the CloudNativePG Cluster whose operator creates the Secret.
	MadeByCluster string
}

// check is one family of wiring rules over a rendered overlay.
type check struct {
	name string
	run  func(b *bundle) []error
}

var checks = []check{
	{"workload selectors", checkWorkloadSelectors},
	{"services", checkServices},
	{"volumes and keys", checkVolumes},
	{"probes", checkProbes},
	{"pod security", checkPodSecurity},
	{"resources", checkResources},
	{"images", checkImages},
	{"disruption budgets and autoscaling", checkPDBsAndHPA},
	{"network policies", checkNetworkPolicies},
	{"reachability", checkReachability},
	{"envoy wiring", checkEnvoy},
	{"scrapes and the envoy admin port", checkScrapes},
	{"extproc wiring", checkExtproc},
	{"accounting wiring", checkAccounting},
	{"graceful stop", checkGracefulStop},
	{"catalog", checkCatalog},
}

// runChecks returns every problem found by every check.
func runChecks(b *bundle) []error {
	var errs []error
	for _, c := range checks {
		for _, err := range c.run(b) {
			errs = append(errs, fmt.Errorf("%s: %w", c.name, err))
		}
	}
	return errs
}

func selects(sel map[string]string, lbls map[string]string) bool {
	return len(sel) > 0 && labels.SelectorFromSet(sel).Matches(labels.Set(lbls))
}

func labelSelects(sel *metav1.LabelSelector, lbls map[string]string) (bool, error) {
	s, err := metav1.LabelSelectorAsSelector(sel)
	if err != nil {
		return false, err
	}
	return s.Matches(labels.Set(lbls)), nil
}

func checkWorkloadSelectors(b *bundle) []error {
	var errs []error
	sels := map[string]*metav1.LabelSelector{}
	for n, d := range b.Deployments {
		sels["Deployment/"+n] = d.Spec.Selector
	}
	for n, s := range b.StatefulSets {
		sels["StatefulSet/"+n] = s.Spec.Selector
		if _, ok := b.Services[s.Spec.ServiceName]; !ok {
			errs = append(errs, fmt.Errorf("StatefulSet/%s: serviceName %q is not a Service", n, s.Spec.ServiceName))
		}
	}
	for _, w := range b.Workloads() {
		sel, ok := sels[w.Kind+"/"+w.Name]
		if !ok {
			continue
		}
		if ok, err := labelSelects(sel, w.Template.Labels); err != nil || !ok {
			errs = append(errs, fmt.Errorf("%s/%s: selector does not select its own pod template (%v)", w.Kind, w.Name, err))
		}
		// No other workload's pods may match, or the controllers fight over them.
		for _, o := range b.Workloads() {
			if o.Kind+o.Name == w.Kind+w.Name {
				continue
			}
			if ok, _ := labelSelects(sel, o.Template.Labels); ok {
				errs = append(errs, fmt.Errorf("%s/%s: selector also selects the pods of %s/%s", w.Kind, w.Name, o.Kind, o.Name))
			}
		}
	}
	return errs
}

// containerPort resolves a port (number or name) on a container.
func containerPort(c *corev1.Container, p intstr.IntOrString) (int32, bool) {
	for _, cp := range c.Ports {
		if p.Type == intstr.String && cp.Name == p.StrVal || p.Type == intstr.Int && cp.ContainerPort == p.IntVal {
			return cp.ContainerPort, true
		}
	}
	return 0, false
}

// podPort resolves a port (number or name) on any container of a pod template.
func podPort(t *corev1.PodTemplateSpec, p intstr.IntOrString) (int32, *corev1.Container, bool) {
	for i := range t.Spec.Containers {
		if n, ok := containerPort(&t.Spec.Containers[i], p); ok {
			return n, &t.Spec.Containers[i], true
		}
	}
	return 0, nil, false
}

func checkServices(b *bundle) []error {
	var errs []error
	for n, s := range b.Services {
		var matched []workload
		for _, w := range b.Workloads() {
			if selects(s.Spec.Selector, w.Template.Labels) {
				matched = append(matched, w)
			}
		}
		if len(matched) == 0 {
			errs = append(errs, fmt.Errorf("Service/%s: selector %v selects no pod template", n, s.Spec.Selector))
		}
		for _, w := range matched {
			if !w.LongRunning {
				errs = append(errs, fmt.Errorf("Service/%s: selects the pods of %s/%s", n, w.Kind, w.Name))
			}
			for _, sp := range s.Spec.Ports {
				if _, _, ok := podPort(w.Template, sp.TargetPort); !ok {
					errs = append(errs, fmt.Errorf("Service/%s port %s: targetPort %s is not a container port of %s/%s", n, sp.Name, sp.TargetPort.String(), w.Kind, w.Name))
				}
			}
		}
	}
	return errs
}

// secretKeys returns the keys of a Secret in the overlay or of a documented external
// one, and whether it is known at all.
func (b *bundle) secretKeys(name string) ([]string, bool) {
	if s, ok := b.Secrets[name]; ok {
		var keys []string
		for k := range s.Data {
			keys = append(keys, k)
		}
		for k := range s.StringData {
			keys = append(keys, k)
		}
		return keys, true
	}
	if ext, ok := externalSecrets[b.Overlay][name]; ok {
		if ext.MadeByCluster != "" {
			if _, ok := b.Clusters[ext.MadeByCluster]; !ok {
				return nil, false
			}
		}
		return ext.Keys, true
	}
	return nil, false
}

// secretValue returns a key's value of a Secret in the overlay, or a stand-in for an
// external one.
func (b *bundle) secretValue(name, key string) (string, bool) {
	if s, ok := b.Secrets[name]; ok {
		if v, ok := s.Data[key]; ok {
			return string(v), true
		}
		v, ok := s.StringData[key]
		return v, ok
	}
	keys, ok := b.secretKeys(name)
	if ok && slices.Contains(keys, key) {
		return "external-" + name + "-" + key, true
	}
	return "", false
}

func checkVolumes(b *bundle) []error {
	var errs []error
	for _, w := range b.Workloads() {
		where := w.Kind + "/" + w.Name
		vols := map[string]*corev1.Volume{}
		for i := range w.Template.Spec.Volumes {
			v := &w.Template.Spec.Volumes[i]
			vols[v.Name] = v
			switch {
			case v.ConfigMap != nil:
				cm, ok := b.ConfigMaps[v.ConfigMap.Name]
				if !ok {
					errs = append(errs, fmt.Errorf("%s volume %s: ConfigMap %q is not in the overlay", where, v.Name, v.ConfigMap.Name))
					continue
				}
				for _, it := range v.ConfigMap.Items {
					if _, ok := cm.Data[it.Key]; !ok {
						errs = append(errs, fmt.Errorf("%s volume %s: ConfigMap %s has no key %q", where, v.Name, cm.Name, it.Key))
					}
				}
			case v.Secret != nil:
				keys, ok := b.secretKeys(v.Secret.SecretName)
				if !ok {
					errs = append(errs, fmt.Errorf("%s volume %s: Secret %q is neither in the overlay nor a documented external Secret", where, v.Name, v.Secret.SecretName))
					continue
				}
				for _, it := range v.Secret.Items {
					if !slices.Contains(keys, it.Key) {
						errs = append(errs, fmt.Errorf("%s volume %s: Secret %s has no key %q", where, v.Name, v.Secret.SecretName, it.Key))
					}
				}
			case v.EmptyDir != nil:
			default:
				errs = append(errs, fmt.Errorf("%s volume %s: only configMap, secret and emptyDir volumes are expected", where, v.Name))
			}
		}
		for _, claim := range w.Claims {
			vols[claim] = &corev1.Volume{Name: claim}
		}
		used := map[string]bool{}
		all := append(slices.Clone(w.Template.Spec.InitContainers), w.Template.Spec.Containers...)
		for _, c := range all {
			for _, m := range c.VolumeMounts {
				used[m.Name] = true
				if _, ok := vols[m.Name]; !ok {
					errs = append(errs, fmt.Errorf("%s container %s mounts undeclared volume %q", where, c.Name, m.Name))
				}
			}
			for _, e := range c.Env {
				if e.ValueFrom == nil {
					continue
				}
				if r := e.ValueFrom.SecretKeyRef; r != nil {
					if _, ok := b.secretValue(r.Name, r.Key); !ok {
						errs = append(errs, fmt.Errorf("%s container %s env %s: Secret %s key %s is not defined", where, c.Name, e.Name, r.Name, r.Key))
					}
				}
				if r := e.ValueFrom.ConfigMapKeyRef; r != nil {
					if cm, ok := b.ConfigMaps[r.Name]; !ok || cm.Data[r.Key] == "" {
						errs = append(errs, fmt.Errorf("%s container %s env %s: ConfigMap %s key %s is not defined", where, c.Name, e.Name, r.Name, r.Key))
					}
				}
			}
		}
		for name := range vols {
			if !used[name] && !slices.Contains(w.Claims, name) {
				errs = append(errs, fmt.Errorf("%s: volume %s is never mounted", where, name))
			}
		}
	}
	return errs
}

// fileSource resolves a file path in a container to the ConfigMap or Secret key that
// provides it.
type fileSource struct {
	ConfigMap, Secret, Key string
}

func fileIn(t *corev1.PodTemplateSpec, c *corev1.Container, file string) (fileSource, error) {
	for _, m := range c.VolumeMounts {
		rel, ok := strings.CutPrefix(file, strings.TrimSuffix(m.MountPath, "/")+"/")
		if !ok || strings.Contains(rel, "/") {
			continue
		}
		for _, v := range t.Spec.Volumes {
			if v.Name != m.Name {
				continue
			}
			key := rel
			var items []corev1.KeyToPath
			src := fileSource{}
			switch {
			case v.ConfigMap != nil:
				src.ConfigMap, items = v.ConfigMap.Name, v.ConfigMap.Items
			case v.Secret != nil:
				src.Secret, items = v.Secret.SecretName, v.Secret.Items
			default:
				return fileSource{}, fmt.Errorf("%s is on a %s volume, not a ConfigMap or Secret", file, m.Name)
			}
			if len(items) > 0 {
				key = ""
				for _, it := range items {
					if it.Path == rel {
						key = it.Key
					}
				}
				if key == "" {
					return fileSource{}, fmt.Errorf("%s: volume %s does not project %s", file, v.Name, rel)
				}
			}
			src.Key = key
			return src, nil
		}
	}
	return fileSource{}, fmt.Errorf("container %s mounts nothing that provides %s", c.Name, file)
}

// readFile reads a file of a container from the overlay's ConfigMaps and Secrets.
func (b *bundle) readFile(t *corev1.PodTemplateSpec, c *corev1.Container, file string) ([]byte, error) {
	src, err := fileIn(t, c, file)
	if err != nil {
		return nil, err
	}
	if src.ConfigMap != "" {
		cm, ok := b.ConfigMaps[src.ConfigMap]
		if !ok {
			return nil, fmt.Errorf("%s: ConfigMap %s is not in the overlay", file, src.ConfigMap)
		}
		v, ok := cm.Data[src.Key]
		if !ok {
			return nil, fmt.Errorf("%s: ConfigMap %s has no key %s", file, src.ConfigMap, src.Key)
		}
		return []byte(v), nil
	}
	v, ok := b.secretValue(src.Secret, src.Key)
	if !ok {
		return nil, fmt.Errorf("%s: Secret %s has no key %s", file, src.Secret, src.Key)
	}
	return []byte(v), nil
}

// envValue returns a container's environment variable, resolving Secret references.
func (b *bundle) envValue(c *corev1.Container, name string) (string, bool) {
	for _, e := range c.Env {
		if e.Name != name {
			continue
		}
		if e.ValueFrom == nil {
			return e.Value, true
		}
		if r := e.ValueFrom.SecretKeyRef; r != nil {
			return b.secretValue(r.Name, r.Key)
		}
		return "", false
	}
	return "", false
}

func envRef(c *corev1.Container, name string) *corev1.EnvVar {
	for i := range c.Env {
		if c.Env[i].Name == name {
			return &c.Env[i]
		}
	}
	return nil
}

// flagValue returns the value of --name=v or --name v in args.
func flagValue(args []string, name string) (string, bool) {
	for i, a := range args {
		if v, ok := strings.CutPrefix(a, "--"+name+"="); ok {
			return v, true
		}
		if a == "--"+name && i+1 < len(args) {
			return args[i+1], true
		}
	}
	return "", false
}

// exemptFromProbes lists containers that the kubelet cannot probe, with the reason.
var exemptFromProbes = map[string]string{
	"mock-providers": "dev only; listens on the pod's loopback, which the kubelet cannot reach",
}

func checkProbes(b *bundle) []error {
	var errs []error
	for _, w := range b.Workloads() {
		for i := range w.Template.Spec.Containers {
			c := &w.Template.Spec.Containers[i]
			where := fmt.Sprintf("%s/%s container %s", w.Kind, w.Name, c.Name)
			if w.LongRunning && exemptFromProbes[c.Name] == "" {
				if c.ReadinessProbe == nil || c.LivenessProbe == nil {
					errs = append(errs, fmt.Errorf("%s: needs readiness and liveness probes", where))
				}
			}
			for kind, p := range map[string]*corev1.Probe{"startup": c.StartupProbe, "readiness": c.ReadinessProbe, "liveness": c.LivenessProbe} {
				if p == nil {
					continue
				}
				var port intstr.IntOrString
				switch {
				case p.HTTPGet != nil:
					port = p.HTTPGet.Port
				case p.TCPSocket != nil:
					port = p.TCPSocket.Port
				case p.Exec != nil:
					continue
				default:
					errs = append(errs, fmt.Errorf("%s: %s probe has no handler", where, kind))
					continue
				}
				if _, ok := containerPort(c, port); !ok {
					errs = append(errs, fmt.Errorf("%s: %s probe port %s is not a port of the container", where, kind, port.String()))
				}
			}
		}
	}
	return errs
}

func checkPodSecurity(b *bundle) []error {
	var errs []error
	for _, w := range b.Workloads() {
		ps := w.Template.Spec
		where := w.Kind + "/" + w.Name
		if ps.HostNetwork || ps.HostPID || ps.HostIPC {
			errs = append(errs, fmt.Errorf("%s: uses host namespaces", where))
		}
		if ps.AutomountServiceAccountToken == nil || *ps.AutomountServiceAccountToken {
			errs = append(errs, fmt.Errorf("%s: automountServiceAccountToken must be false (nothing calls the Kubernetes API)", where))
		}
		if ps.ServiceAccountName != "" {
			if _, ok := b.ServiceAccounts[ps.ServiceAccountName]; !ok {
				errs = append(errs, fmt.Errorf("%s: ServiceAccount %s is not in the overlay", where, ps.ServiceAccountName))
			}
		}
		podSC := ps.SecurityContext
		if podSC == nil || podSC.SeccompProfile == nil || podSC.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
			errs = append(errs, fmt.Errorf("%s: pod seccompProfile must be RuntimeDefault", where))
		}
		for _, c := range append(slices.Clone(ps.InitContainers), ps.Containers...) {
			sc := c.SecurityContext
			cw := where + " container " + c.Name
			if sc == nil {
				errs = append(errs, fmt.Errorf("%s: no securityContext", cw))
				continue
			}
			nonRoot := sc.RunAsNonRoot != nil && *sc.RunAsNonRoot || podSC != nil && podSC.RunAsNonRoot != nil && *podSC.RunAsNonRoot
			uid := sc.RunAsUser
			if uid == nil && podSC != nil {
				uid = podSC.RunAsUser
			}
			if !nonRoot || uid == nil || *uid == 0 {
				errs = append(errs, fmt.Errorf("%s: must run as a non-root numeric user", cw))
			}
			if sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
				errs = append(errs, fmt.Errorf("%s: allowPrivilegeEscalation must be false", cw))
			}
			if sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
				errs = append(errs, fmt.Errorf("%s: readOnlyRootFilesystem must be true", cw))
			}
			if sc.Privileged != nil && *sc.Privileged {
				errs = append(errs, fmt.Errorf("%s: privileged", cw))
			}
			if sc.Capabilities == nil || !slices.Contains(sc.Capabilities.Drop, "ALL") || len(sc.Capabilities.Add) > 0 {
				errs = append(errs, fmt.Errorf("%s: capabilities must drop ALL and add none", cw))
			}
		}
	}
	for n, ns := range b.Namespaces {
		if ns.Labels["pod-security.kubernetes.io/enforce"] != "restricted" {
			errs = append(errs, fmt.Errorf("Namespace/%s: must enforce the restricted Pod Security Standard", n))
		}
	}
	if _, ok := b.Namespaces[b.Namespace]; !ok {
		errs = append(errs, fmt.Errorf("the overlay's namespace %s is not created by it", b.Namespace))
	}
	return errs
}

func checkResources(b *bundle) []error {
	var errs []error
	for _, w := range b.Workloads() {
		for _, c := range w.Template.Spec.Containers {
			for _, r := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
				req, hasReq := c.Resources.Requests[r]
				lim, hasLim := c.Resources.Limits[r]
				if !hasReq || !hasLim {
					errs = append(errs, fmt.Errorf("%s/%s container %s: %s needs a request and a limit", w.Kind, w.Name, c.Name, r))
				} else if req.Cmp(lim) > 0 {
					errs = append(errs, fmt.Errorf("%s/%s container %s: %s request above limit", w.Kind, w.Name, c.Name, r))
				}
			}
		}
	}
	return errs
}

// pinnedEnvoyImage is the official Envoy image of the release named in envoy/VERSION, the
// single source of the Envoy version.
func pinnedEnvoyImage() (string, error) {
	b, err := os.ReadFile("../envoy/VERSION")
	if err != nil {
		return "", err
	}
	return "envoyproxy/envoy:v" + strings.TrimSpace(string(b)), nil
}

func checkImages(b *bundle) []error {
	var errs []error
	for _, w := range b.Workloads() {
		for _, c := range w.Template.Spec.Containers {
			img := c.Image
			name, tag, hasTag := strings.Cut(img[strings.LastIndex(img, "/")+1:], ":")
			_ = name
			switch {
			case strings.Contains(img, "@sha256:"):
			case !hasTag || tag == "" || tag == "latest" || strings.HasSuffix(tag, "-latest"):
				errs = append(errs, fmt.Errorf("%s/%s container %s: image %q is not pinned", w.Kind, w.Name, c.Name, img))
			}
			if c.Name == "envoy" {
				want, err := pinnedEnvoyImage()
				if err != nil {
					errs = append(errs, err)
				} else if img != want {
					errs = append(errs, fmt.Errorf("%s/%s container envoy: image %q, want %q (envoy/VERSION)", w.Kind, w.Name, img, want))
				}
			}
			if b.Overlay == "overlays/production" && strings.HasPrefix(img, "llmgw/") {
				errs = append(errs, fmt.Errorf("%s/%s container %s: production image %q has no registry", w.Kind, w.Name, c.Name, img))
			}
		}
	}
	return errs
}

func checkPDBsAndHPA(b *bundle) []error {
	var errs []error
	for n, d := range b.Deployments {
		found := false
		for _, p := range b.PDBs {
			if ok, _ := labelSelects(p.Spec.Selector, d.Spec.Template.Labels); ok {
				found = true
			}
		}
		if !found {
			errs = append(errs, fmt.Errorf("Deployment/%s: no PodDisruptionBudget selects its pods", n))
		}
	}
	for n, p := range b.PDBs {
		n2 := 0
		for _, w := range b.Workloads() {
			if ok, _ := labelSelects(p.Spec.Selector, w.Template.Labels); ok {
				n2++
				if !w.LongRunning {
					errs = append(errs, fmt.Errorf("PodDisruptionBudget/%s: selects Job pods", n))
				}
			}
		}
		if n2 != 1 {
			errs = append(errs, fmt.Errorf("PodDisruptionBudget/%s: selects the pods of %d workloads, want 1", n, n2))
		}
	}
	hpa, ok := b.HPAs["gateway"]
	if !ok {
		return append(errs, errors.New("no HorizontalPodAutoscaler for the gateway"))
	}
	ref := hpa.Spec.ScaleTargetRef
	d, ok := b.Deployments[ref.Name]
	if ref.Kind != "Deployment" || ref.APIVersion != "apps/v1" || !ok {
		errs = append(errs, fmt.Errorf("HorizontalPodAutoscaler/gateway: target %s %s/%s is not a Deployment of the overlay", ref.APIVersion, ref.Kind, ref.Name))
	} else if d.Spec.Replicas != nil {
		errs = append(errs, fmt.Errorf("Deployment/%s: sets replicas, which the HorizontalPodAutoscaler owns (every apply would reset it)", d.Name))
	}
	if hpa.Spec.MinReplicas == nil || *hpa.Spec.MinReplicas < 1 || *hpa.Spec.MinReplicas > hpa.Spec.MaxReplicas {
		errs = append(errs, errors.New("HorizontalPodAutoscaler/gateway: needs 1 <= minReplicas <= maxReplicas"))
	}
	if len(hpa.Spec.Metrics) == 0 {
		errs = append(errs, errors.New("HorizontalPodAutoscaler/gateway: no metrics"))
	}
	return errs
}

// podsSelectedBy returns the workloads of the overlay a NetworkPolicy pod selector matches.
func (b *bundle) podsSelectedBy(sel *metav1.LabelSelector) []workload {
	var out []workload
	for _, w := range b.Workloads() {
		if ok, _ := labelSelects(sel, w.Template.Labels); ok {
			out = append(out, w)
		}
	}
	return out
}

// selectsClusterPods reports whether sel selects the instance pods of one of the
// overlay's CloudNativePG Clusters (labelled cnpg.io/cluster and the Cluster's
// inherited labels).
func (b *bundle) selectsClusterPods(sel *metav1.LabelSelector) bool {
	for n, c := range b.Clusters {
		lbls := map[string]string{"cnpg.io/cluster": n}
		if c.Spec.InheritedMetadata != nil {
			for k, v := range c.Spec.InheritedMetadata.Labels {
				lbls[k] = v
			}
		}
		if ok, _ := labelSelects(sel, lbls); ok {
			return true
		}
	}
	return false
}

func checkNetworkPolicies(b *bundle) []error {
	var errs []error
	if p, ok := b.NetPols["default-deny-all"]; !ok || len(p.Spec.PodSelector.MatchLabels)+len(p.Spec.PodSelector.MatchExpressions) != 0 ||
		len(p.Spec.Ingress)+len(p.Spec.Egress) != 0 || len(p.Spec.PolicyTypes) != 2 {
		errs = append(errs, errors.New("no default-deny-all policy denying ingress and egress for every pod"))
	}
	for n, p := range b.NetPols {
		if n == "default-deny-all" {
			continue
		}
		targets := b.podsSelectedBy(&p.Spec.PodSelector)
		if len(targets) == 0 && !b.selectsClusterPods(&p.Spec.PodSelector) {
			errs = append(errs, fmt.Errorf("NetworkPolicy/%s: podSelector selects no pods", n))
		}
		var peers []networkingv1.NetworkPolicyPeer
		for _, r := range p.Spec.Ingress {
			peers = append(peers, r.From...)
			// Named ports must exist on every selected pod.
			for _, port := range r.Ports {
				if port.Port == nil || port.Port.Type != intstr.String {
					continue
				}
				for _, w := range targets {
					if _, _, ok := podPort(w.Template, *port.Port); !ok {
						errs = append(errs, fmt.Errorf("NetworkPolicy/%s: ingress port %q is not a port of %s/%s", n, port.Port.StrVal, w.Kind, w.Name))
					}
				}
			}
		}
		for _, r := range p.Spec.Egress {
			peers = append(peers, r.To...)
		}
		for _, peer := range peers {
			if peer.PodSelector == nil || peer.NamespaceSelector != nil {
				continue
			}
			if len(b.podsSelectedBy(peer.PodSelector)) == 0 && !b.selectsClusterPods(peer.PodSelector) {
				errs = append(errs, fmt.Errorf("NetworkPolicy/%s: peer %v selects no pods of the overlay", n, peer.PodSelector.MatchLabels))
			}
		}
	}
	for _, w := range b.Workloads() {
		covered := false
		for n, p := range b.NetPols {
			if n == "default-deny-all" {
				continue
			}
			if ok, _ := labelSelects(&p.Spec.PodSelector, w.Template.Labels); ok {
				covered = true
			}
		}
		if !covered {
			errs = append(errs, fmt.Errorf("%s/%s: no NetworkPolicy allows it anything (it would be cut off by default-deny-all)", w.Kind, w.Name))
		}
	}
	return errs
}

// portMatches reports whether a policy port admits the numbered port of a container.
func portMatches(pp networkingv1.NetworkPolicyPort, c *corev1.Container, number int32) bool {
	if pp.Protocol != nil && *pp.Protocol != corev1.ProtocolTCP {
		return false
	}
	if pp.Port == nil {
		return true
	}
	if pp.Port.Type == intstr.Int {
		end := pp.Port.IntVal
		if pp.EndPort != nil {
			end = *pp.EndPort
		}
		return number >= pp.Port.IntVal && number <= end
	}
	if c == nil {
		return false
	}
	n, ok := containerPort(c, *pp.Port)
	return ok && n == number
}

func portsAdmit(ports []networkingv1.NetworkPolicyPort, c *corev1.Container, number int32) bool {
	if len(ports) == 0 {
		return true
	}
	for _, pp := range ports {
		if portMatches(pp, c, number) {
			return true
		}
	}
	return false
}

// peerHasPod reports whether a same-namespace peer admits pods labelled lbls.
func peerHasPod(peer networkingv1.NetworkPolicyPeer, lbls map[string]string) bool {
	if peer.IPBlock != nil || peer.NamespaceSelector != nil || peer.PodSelector == nil {
		return false
	}
	ok, _ := labelSelects(peer.PodSelector, lbls)
	return ok
}

// ingressAllows reports whether the policies let a pod labelled from reach a pod labelled
// to on its port number (container c provides the named ports).
func (b *bundle) ingressAllows(from, to map[string]string, c *corev1.Container, number int32) bool {
	return b.ingressAdmits(to, c, number, func(peer networkingv1.NetworkPolicyPeer) bool { return peerHasPod(peer, from) })
}

// ingressAdmits reports whether some ingress rule of a policy selecting pods labelled to
// opens their port number (container c provides the named ports) to every source or to
// a peer that admits says yes to.
func (b *bundle) ingressAdmits(to map[string]string, c *corev1.Container, number int32, admits func(networkingv1.NetworkPolicyPeer) bool) bool {
	for _, p := range b.NetPols {
		if ok, _ := labelSelects(&p.Spec.PodSelector, to); !ok {
			continue
		}
		for _, r := range p.Spec.Ingress {
			if !portsAdmit(r.Ports, c, number) {
				continue
			}
			if len(r.From) == 0 || slices.ContainsFunc(r.From, admits) {
				return true
			}
		}
	}
	return false
}

// egressAllows reports whether the policies let a pod labelled from open a connection to
// a pod labelled to on port number.
func (b *bundle) egressAllows(from, to map[string]string, number int32) bool {
	for _, p := range b.NetPols {
		if ok, _ := labelSelects(&p.Spec.PodSelector, from); !ok {
			continue
		}
		for _, r := range p.Spec.Egress {
			if !portsAdmit(r.Ports, nil, number) {
				continue
			}
			if len(r.To) == 0 {
				return true
			}
			for _, peer := range r.To {
				if peerHasPod(peer, to) {
					return true
				}
			}
		}
	}
	return false
}

// egressToPublic reports whether pods labelled from may open port on a public address.
func (b *bundle) egressToPublic(from map[string]string, port int32, addr string) bool {
	ip := net.ParseIP(addr)
	for _, p := range b.NetPols {
		if ok, _ := labelSelects(&p.Spec.PodSelector, from); !ok {
			continue
		}
		for _, r := range p.Spec.Egress {
			if !portsAdmit(r.Ports, nil, port) {
				continue
			}
			for _, peer := range r.To {
				if peer.IPBlock == nil {
					continue
				}
				_, cidr, err := net.ParseCIDR(peer.IPBlock.CIDR)
				if err != nil || !cidr.Contains(ip) {
					continue
				}
				excluded := false
				for _, e := range peer.IPBlock.Except {
					if _, ex, err := net.ParseCIDR(e); err == nil && ex.Contains(ip) {
						excluded = true
					}
				}
				if !excluded {
					return true
				}
			}
		}
	}
	return false
}

// egressToDNS reports whether pods labelled from may query the cluster DNS.
func (b *bundle) egressToDNS(from map[string]string) bool {
	for _, proto := range []corev1.Protocol{corev1.ProtocolUDP, corev1.ProtocolTCP} {
		ok := false
		for _, p := range b.NetPols {
			if sel, _ := labelSelects(&p.Spec.PodSelector, from); !sel {
				continue
			}
			for _, r := range p.Spec.Egress {
				portOK := false
				for _, pp := range r.Ports {
					if pp.Port != nil && pp.Port.IntVal == 53 && pp.Protocol != nil && *pp.Protocol == proto {
						portOK = true
					}
				}
				for _, peer := range r.To {
					if portOK && peer.NamespaceSelector != nil && peer.NamespaceSelector.MatchLabels["kubernetes.io/metadata.name"] == "kube-system" &&
						peer.PodSelector != nil && peer.PodSelector.MatchLabels["k8s-app"] == "kube-dns" {
						ok = true
					}
				}
			}
		}
		if !ok {
			return false
		}
	}
	return true
}

// databasePodLabels returns labels of the overlay's ledger database pods and, for a
// database the overlay runs itself, its container (for named ports).
func (b *bundle) databasePodLabels() (map[string]string, *corev1.Container, bool) {
	for _, w := range b.Workloads() {
		if w.Template.Labels["llmgw.io/role"] == "ledger-database" {
			return w.Template.Labels, &w.Template.Spec.Containers[0], true
		}
	}
	for n, c := range b.Clusters {
		if c.Spec.InheritedMetadata != nil && c.Spec.InheritedMetadata.Labels["llmgw.io/role"] == "ledger-database" {
			l := map[string]string{"cnpg.io/cluster": n}
			for k, v := range c.Spec.InheritedMetadata.Labels {
				l[k] = v
			}
			return l, nil, true
		}
	}
	return nil, nil, false
}

func checkReachability(b *bundle) []error {
	var errs []error
	gw, ok := b.Deployments["gateway"]
	acc, ok2 := b.Deployments["accounting"]
	if !ok || !ok2 {
		return []error{errors.New("gateway and accounting Deployments are required")}
	}
	accC := findContainer(&acc.Spec.Template, "accounting")
	grpcPort, _ := containerPort(accC, intstr.FromString("grpc"))

	// Who may call accounting's gRPC port: the gateway and the web console (which calls the
	// AdminService with the operator's token), nothing else.
	for _, w := range b.Workloads() {
		allowed := b.ingressAllows(w.Template.Labels, acc.Spec.Template.Labels, accC, grpcPort) &&
			b.egressAllows(w.Template.Labels, acc.Spec.Template.Labels, grpcPort)
		want := w.Kind == "Deployment" && (w.Name == "gateway" || w.Name == "console")
		if allowed != want {
			errs = append(errs, fmt.Errorf("%s/%s reaching accounting:%d is %v, want %v", w.Kind, w.Name, grpcPort, allowed, want))
		}
	}
	// Who may reach PostgreSQL: accounting (the service and its migrations Job) only.
	db, dbC, ok := b.databasePodLabels()
	if !ok {
		errs = append(errs, errors.New("no pods labelled llmgw.io/role=ledger-database"))
	} else {
		for _, w := range b.Workloads() {
			if w.Template.Labels["llmgw.io/role"] == "ledger-database" {
				continue
			}
			allowed := b.ingressAllows(w.Template.Labels, db, dbC, 5432) && b.egressAllows(w.Template.Labels, db, 5432)
			want := w.Template.Labels["app.kubernetes.io/name"] == "accounting"
			if allowed != want {
				errs = append(errs, fmt.Errorf("%s/%s reaching PostgreSQL:5432 is %v, want %v", w.Kind, w.Name, allowed, want))
			}
		}
	}
	// Clients reach the gateway's listener; the gateway reaches providers on 443 at
	// public addresses only.
	envoy := findContainer(&gw.Spec.Template, "envoy")
	httpPort, _ := containerPort(envoy, intstr.FromString("http"))
	if !b.ingressAllows(map[string]string{"any": "client"}, gw.Spec.Template.Labels, envoy, httpPort) {
		errs = append(errs, fmt.Errorf("clients cannot reach the gateway on %d", httpPort))
	}
	if !b.egressToPublic(gw.Spec.Template.Labels, 443, "162.159.140.245") {
		errs = append(errs, errors.New("the gateway cannot reach providers on public addresses, port 443"))
	}
	for _, internal := range []string{"10.1.2.3", "172.16.0.1", "192.168.1.1", "169.254.169.254", "100.100.100.200"} {
		if b.egressToPublic(gw.Spec.Template.Labels, 443, internal) {
			errs = append(errs, fmt.Errorf("the gateway may reach the internal address %s on 443", internal))
		}
	}
	if b.egressToPublic(gw.Spec.Template.Labels, 80, "162.159.140.245") {
		errs = append(errs, errors.New("the gateway may reach the internet on port 80"))
	}
	for _, w := range b.Workloads() {
		needsDNS := w.Template.Labels["app.kubernetes.io/name"] == "gateway" || w.Template.Labels["app.kubernetes.io/name"] == "accounting"
		if needsDNS && !b.egressToDNS(w.Template.Labels) {
			errs = append(errs, fmt.Errorf("%s/%s: no egress to the cluster DNS on 53/UDP and 53/TCP", w.Kind, w.Name))
		}
	}
	return errs
}

func findContainer(t *corev1.PodTemplateSpec, name string) *corev1.Container {
	for i := range t.Spec.Containers {
		if t.Spec.Containers[i].Name == name {
			return &t.Spec.Containers[i]
		}
	}
	return &corev1.Container{Name: name + " (missing)"}
}

func isLoopback(host string) bool {
	ip := net.ParseIP(host)
	return host == "localhost" || ip != nil && ip.IsLoopback()
}

// checkListen checks that a container's health port env var binds the pod's interfaces
// on the port its probes use.
func checkListen(b *bundle, c *corev1.Container, env, portName string) []error {
	addr, ok := b.envValue(c, env)
	if !ok {
		return []error{fmt.Errorf("container %s: %s is not set", c.Name, env)}
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return []error{fmt.Errorf("container %s: %s=%q: %v", c.Name, env, addr, err)}
	}
	var errs []error
	if isLoopback(host) {
		errs = append(errs, fmt.Errorf("container %s: %s=%s binds loopback; probes and scrapes cannot reach it", c.Name, env, addr))
	}
	n, ok := containerPort(c, intstr.FromString(portName))
	if !ok || strconv.Itoa(int(n)) != port {
		errs = append(errs, fmt.Errorf("container %s: %s=%s but port %q is %d", c.Name, env, addr, portName, n))
	}
	return errs
}

// checkNoDeepSleep checks that a Go container keeps the runtime's system monitor out of
// its deep sleep: GODEBUG sets schedtrace to a period of at least a day, so that it never
// prints in practice (the repository's internal/goenv says why and what it costs).
func checkNoDeepSleep(b *bundle, c *corev1.Container) []error {
	v, ok := b.envValue(c, "GODEBUG")
	if !ok {
		return []error{fmt.Errorf("container %s: GODEBUG is not set (schedtrace keeps sysmon out of its deep sleep)", c.Name)}
	}
	for _, field := range strings.Split(v, ",") {
		if p, ok := strings.CutPrefix(field, "schedtrace="); ok {
			if n, err := strconv.ParseInt(p, 10, 32); err != nil || n < 24*3600*1000 {
				return []error{fmt.Errorf("container %s: GODEBUG schedtrace=%s, want a period of at least a day in milliseconds that fits an int32", c.Name, p)}
			}
			return nil
		}
	}
	return []error{fmt.Errorf("container %s: GODEBUG=%q has no schedtrace", c.Name, v)}
}

func checkExtproc(b *bundle) []error {
	gw, ok := b.Deployments["gateway"]
	if !ok {
		return []error{errors.New("no gateway Deployment")}
	}
	t := &gw.Spec.Template
	c := findContainer(t, "extproc")
	errs := checkListen(b, c, "EXTPROC_METRICS_ADDR", "metrics")
	errs = append(errs, checkNoDeepSleep(b, c)...)
	// The service token file is the gateway-tokens Secret's service-token; extproc never
	// holds the admin token.
	if f, ok := flagValue(c.Args, "service-token-file"); !ok {
		errs = append(errs, errors.New("extproc: no --service-token-file"))
	} else if src, err := fileIn(t, c, f); err != nil {
		errs = append(errs, fmt.Errorf("extproc: %w", err))
	} else if !strings.HasPrefix(src.Secret, "gateway-tokens") || src.Key != "service-token" {
		errs = append(errs, fmt.Errorf("extproc: service token file comes from %+v, want Secret gateway-tokens key service-token", src))
	}
	for _, v := range t.Spec.Volumes {
		if v.Secret == nil || !strings.HasPrefix(v.Secret.SecretName, "gateway-tokens") {
			continue
		}
		for _, it := range v.Secret.Items {
			if it.Key == "admin-token" {
				errs = append(errs, errors.New("the gateway pod mounts the admin token"))
			}
		}
		if len(v.Secret.Items) == 0 {
			errs = append(errs, errors.New("the gateway pod mounts every token key; project service-token only"))
		}
	}
	// extproc dials a Service that reaches accounting's gRPC port.
	addr, ok := b.envValue(c, "ACCOUNTING_ADDR")
	if !ok {
		return append(errs, errors.New("extproc: ACCOUNTING_ADDR is not set"))
	}
	addr = strings.TrimPrefix(addr, "dns:///")
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return append(errs, fmt.Errorf("extproc ACCOUNTING_ADDR %q: %v", addr, err))
	}
	svc, ok := b.Services[strings.SplitN(host, ".", 2)[0]]
	if !ok {
		return append(errs, fmt.Errorf("extproc ACCOUNTING_ADDR host %s is not a Service of the overlay", host))
	}
	acc, ok := b.Deployments["accounting"]
	if !ok || !selects(svc.Spec.Selector, acc.Spec.Template.Labels) {
		return append(errs, fmt.Errorf("Service/%s does not select the accounting pods", svc.Name))
	}
	found := false
	for _, sp := range svc.Spec.Ports {
		if strconv.Itoa(int(sp.Port)) != port {
			continue
		}
		found = true
		n, ok := containerPort(findContainer(&acc.Spec.Template, "accounting"), sp.TargetPort)
		grpc, _ := containerPort(findContainer(&acc.Spec.Template, "accounting"), intstr.FromString("grpc"))
		if !ok || n != grpc {
			errs = append(errs, fmt.Errorf("Service/%s port %s does not target accounting's grpc port", svc.Name, port))
		}
	}
	if !found {
		errs = append(errs, fmt.Errorf("Service/%s has no port %s", svc.Name, port))
	}
	return errs
}

func checkAccounting(b *bundle) []error {
	acc, ok := b.Deployments["accounting"]
	if !ok {
		return []error{errors.New("no accounting Deployment")}
	}
	t := &acc.Spec.Template
	c := findContainer(t, "accounting")
	errs := checkListen(b, c, "ACCOUNTING_METRICS_ADDR", "metrics")
	errs = append(errs, checkListen(b, c, "ACCOUNTING_ADDR", "grpc")...)
	errs = append(errs, checkNoDeepSleep(b, c)...)
	for flag, key := range map[string]string{"service-token-file": "service-token", "admin-token-file": "admin-token"} {
		f, ok := flagValue(c.Args, flag)
		if !ok {
			errs = append(errs, fmt.Errorf("accounting: no --%s", flag))
			continue
		}
		if src, err := fileIn(t, c, f); err != nil {
			errs = append(errs, fmt.Errorf("accounting: %w", err))
		} else if !strings.HasPrefix(src.Secret, "gateway-tokens") || src.Key != key {
			errs = append(errs, fmt.Errorf("accounting: --%s comes from %+v, want Secret gateway-tokens key %s", flag, src, key))
		}
	}
	// The database: the same source for the service and the migrations Job.
	job, ok := b.Jobs["accounting-migrate"]
	if !ok {
		return append(errs, errors.New("no accounting-migrate Job"))
	}
	jc := findContainer(&job.Spec.Template, "accounting")
	if jc.Image != c.Image {
		errs = append(errs, fmt.Errorf("migrations image %s differs from accounting's %s", jc.Image, c.Image))
	}
	if !slices.Contains(jc.Args, "--migrate-only") {
		errs = append(errs, errors.New("the migrations Job does not run --migrate-only"))
	}
	if job.Spec.Template.Spec.RestartPolicy == corev1.RestartPolicyAlways {
		errs = append(errs, errors.New("the migrations Job restarts Always"))
	}
	for _, name := range []string{"DATABASE_URL", "PGSSLMODE", "PGSSLROOTCERT"} {
		a, j := envRef(c, name), envRef(jc, name)
		if (a == nil) != (j == nil) || a != nil && fmt.Sprint(*a) != fmt.Sprint(*j) {
			errs = append(errs, fmt.Errorf("%s differs between accounting and its migrations Job", name))
		}
	}
	url, ok := b.envValue(c, "DATABASE_URL")
	if !ok {
		return append(errs, errors.New("accounting: DATABASE_URL is not resolvable"))
	}
	if len(b.Clusters) > 0 {
		// Production: CloudNativePG's app secret, over verified TLS.
		ref := envRef(c, "DATABASE_URL").ValueFrom
		if ref == nil || ref.SecretKeyRef == nil || ref.SecretKeyRef.Name != "gateway-db-app" || ref.SecretKeyRef.Key != "uri" {
			errs = append(errs, errors.New("accounting: DATABASE_URL must come from the CloudNativePG Secret gateway-db-app key uri"))
		}
		if v, _ := b.envValue(c, "PGSSLMODE"); v != "verify-full" {
			errs = append(errs, errors.New("accounting: PGSSLMODE must be verify-full"))
		}
		for _, tc := range []struct {
			t *corev1.PodTemplateSpec
			c *corev1.Container
		}{{t, c}, {&job.Spec.Template, jc}} {
			root, _ := b.envValue(tc.c, "PGSSLROOTCERT")
			if src, err := fileIn(tc.t, tc.c, root); err != nil || src.Secret != "gateway-db-ca" || src.Key != "ca.crt" {
				errs = append(errs, fmt.Errorf("PGSSLROOTCERT %q is not the CloudNativePG CA (gateway-db-ca ca.crt): %v", root, err))
			}
		}
		return errs
	}
	// dev: the URL names the in-namespace PostgreSQL Service.
	host := url[strings.LastIndex(url, "@")+1:]
	host = strings.SplitN(host, "/", 2)[0]
	h, p, err := net.SplitHostPort(host)
	if err != nil {
		return append(errs, fmt.Errorf("DATABASE_URL host %q: %v", host, err))
	}
	svc, ok := b.Services[h]
	if !ok {
		return append(errs, fmt.Errorf("DATABASE_URL host %s is not a Service of the overlay", h))
	}
	ss, ok := b.StatefulSets["postgres"]
	if !ok || !selects(svc.Spec.Selector, ss.Spec.Template.Labels) {
		errs = append(errs, fmt.Errorf("Service/%s does not select the postgres StatefulSet", h))
	}
	if len(svc.Spec.Ports) != 1 || strconv.Itoa(int(svc.Spec.Ports[0].Port)) != p {
		errs = append(errs, fmt.Errorf("Service/%s does not expose port %s", h, p))
	}
	return errs
}

func checkCatalog(b *bundle) []error {
	t, _, cfg, err := b.gatewayEnvoy()
	if err != nil {
		return []error{err}
	}
	c := findContainer(t, "extproc")
	path, ok := b.envValue(c, "GATEWAY_CATALOG")
	if !ok {
		return []error{errors.New("extproc: GATEWAY_CATALOG is not set")}
	}
	src, err := fileIn(t, c, path)
	if err != nil {
		return []error{fmt.Errorf("extproc catalog: %w", err)}
	}
	if src.ConfigMap == "" || !strings.HasPrefix(src.ConfigMap, "gateway-catalog") {
		return []error{fmt.Errorf("extproc catalog %s comes from %+v, want the gateway-catalog ConfigMap", path, src)}
	}
	data, err := b.readFile(t, c, path)
	if err != nil {
		return []error{err}
	}
	// Credentials resolve exactly as they would in the container: environment variables
	// it sets and files it mounts.
	lookupEnv := func(name string) (string, bool) { return b.envValue(c, name) }
	readFile := func(name string) ([]byte, error) {
		if !strings.HasPrefix(name, "/") || path2Clean(name) != name {
			return nil, fmt.Errorf("credential file %q must be an absolute, clean path", name)
		}
		return b.readFile(t, c, name)
	}
	cat, err := catalog.Parse([]byte(data), lookupEnv, readFile)
	if err != nil {
		return []error{fmt.Errorf("catalog %s does not load in the extproc container: %w", path, err)}
	}
	// Every channel names one of the catalog's clusters (catalog.Parse checks it);
	// extproc serves those to Envoy over xDS.
	var errs []error
	for _, cl := range cat.Clusters() {
		if _, static := cfg.cluster(cl.Name); static {
			errs = append(errs, fmt.Errorf("catalog cluster %s: envoy.yaml has a static cluster of that name, which CDS cannot replace", cl.Name))
		}
		if cfg.isAdminAddress(cl.Address) {
			errs = append(errs, fmt.Errorf("catalog cluster %s: %s is Envoy's admin interface", cl.Name, cl.Address))
		}
		if cl.Name != "mock-providers" {
			continue
		}
		if len(b.Clusters) > 0 {
			errs = append(errs, errors.New("catalog cluster mock-providers: production routes to the mock providers"))
		}
		mock := findContainer(t, "mock-providers")
		if listen, _ := flagValue(mock.Args, "listen"); listen != cl.Address {
			errs = append(errs, fmt.Errorf("catalog cluster mock-providers is %s but no mock providers listen there (%q)", cl.Address, listen))
		}
	}
	return errs
}

func path2Clean(p string) string { return path.Clean(p) }

// settleBound is how long extproc may take, after its drain deadline, to settle the
// streams it cut (envoy.SettleTimeout).
const settleBound = 5 * time.Second

// checkGracefulStop checks that each process's stop fits in its pod's grace period:
// extproc's preStop sleep + drain deadline + settlement, accounting's preStop sleep +
// shutdown timeout. A pod killed before extproc settled would leave holds to expire.
// It also checks that extproc knows its own public hostnames.
func checkGracefulStop(b *bundle) []error {
	var errs []error
	preStop := func(c *corev1.Container) time.Duration {
		if c.Lifecycle == nil || c.Lifecycle.PreStop == nil || c.Lifecycle.PreStop.Sleep == nil {
			return 0
		}
		return time.Duration(c.Lifecycle.PreStop.Sleep.Seconds) * time.Second
	}
	grace := func(t *corev1.PodTemplateSpec) time.Duration {
		if t.Spec.TerminationGracePeriodSeconds == nil {
			return 30 * time.Second
		}
		return time.Duration(*t.Spec.TerminationGracePeriodSeconds) * time.Second
	}
	if gw, ok := b.Deployments["gateway"]; ok {
		t := &gw.Spec.Template
		c := findContainer(t, "extproc")
		drain := 30 * time.Second // extproc's default
		if v, ok := b.envValue(c, "EXTPROC_DRAIN_TIMEOUT"); ok {
			d, err := time.ParseDuration(v)
			if err != nil || d <= 0 {
				errs = append(errs, fmt.Errorf("extproc EXTPROC_DRAIN_TIMEOUT %q is not a positive duration", v))
			}
			drain = d
		}
		if need := preStop(c) + drain + settleBound; need >= grace(t) {
			errs = append(errs, fmt.Errorf("gateway: extproc needs %v to stop (preStop %v + drain %v + settle %v) but the grace period is %v",
				need, preStop(c), drain, settleBound, grace(t)))
		}
		if v, ok := b.envValue(c, "GATEWAY_PUBLIC_HOSTS"); !ok || strings.TrimSpace(v) == "" {
			errs = append(errs, errors.New("extproc: GATEWAY_PUBLIC_HOSTS is not set (video webhooks could target the gateway itself)"))
		}
	}
	if acc, ok := b.Deployments["accounting"]; ok {
		t := &acc.Spec.Template
		c := findContainer(t, "accounting")
		stop := 10 * time.Second // accounting's default --shutdown-timeout
		if v, ok := flagValue(c.Args, "shutdown-timeout"); ok {
			d, err := time.ParseDuration(v)
			if err != nil {
				errs = append(errs, fmt.Errorf("accounting --shutdown-timeout %q: %v", v, err))
			}
			stop = d
		}
		if need := preStop(c) + stop; need >= grace(t) {
			errs = append(errs, fmt.Errorf("accounting needs %v to stop but the grace period is %v", need, grace(t)))
		}
	}
	return errs
}
