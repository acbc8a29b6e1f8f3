package deploy_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	"helm.sh/helm/v3/pkg/lint"
	"helm.sh/helm/v3/pkg/lint/support"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"
)

// chartDir is the Helm chart; chartProduction its values for overlays/production's shape.
const (
	chartDir         = "helm/model-gateway"
	chartProduction  = "helm/model-gateway/examples/production.yaml"
	chartRelease     = "llmgw"
	chartNamespace   = "llmgw"
	chartBundleLabel = "helm/production"
)

// releaseLabels are the labels the chart adds to what the overlays render: they name
// the release, so they differ between the two by design.
var releaseLabels = []string{"helm.sh/chart", "app.kubernetes.io/managed-by", "app.kubernetes.io/instance", "app.kubernetes.io/version"}

// chartOnlyKinds are what the chart renders beyond the overlays: monitoring objects for
// the Prometheus Operator and the optional ExternalSecrets.
var chartOnlyKinds = []string{"ServiceMonitor", "PodMonitor", "PrometheusRule", "ExternalSecret"}

func init() {
	// The chart with its production values uses the production overlay's external Secrets.
	externalSecrets[chartBundleLabel] = externalSecrets["overlays/production"]
}

func loadChart(t *testing.T) *chart.Chart {
	t.Helper()
	c, err := loader.Load(chartDir)
	if err != nil {
		t.Fatalf("load %s: %v", chartDir, err)
	}
	return c
}

// productionValues are examples/production.yaml with the production catalog, as
// `helm install -f examples/production.yaml --set-file catalog=...` gives them.
func productionValues(t *testing.T) map[string]any {
	t.Helper()
	vals, err := chartutil.ReadValuesFile(chartProduction)
	if err != nil {
		t.Fatal(err)
	}
	cat, err := os.ReadFile(filepath.Join("overlays", "production", "catalog.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	vals["catalog"] = string(cat)
	return vals
}

// renderChart renders the chart as `helm install --dry-run` would with vals (validated
// against values.schema.json first) and returns the manifests by template.
func renderChart(c *chart.Chart, vals map[string]any) (map[string]string, error) {
	rv, err := chartutil.ToRenderValues(c, vals, chartutil.ReleaseOptions{
		Name: chartRelease, Namespace: chartNamespace, Revision: 1, IsInstall: true,
	}, chartutil.DefaultCapabilities)
	if err != nil {
		return nil, err
	}
	return engine.Render(c, rv)
}

// chartObjects splits rendered templates into objects (JSON), in the release's
// namespace as Helm installs them.
func chartObjects(t *testing.T, files map[string]string) [][]byte {
	t.Helper()
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	var out [][]byte
	for _, n := range names {
		if strings.HasSuffix(n, "NOTES.txt") || strings.HasPrefix(filepath.Base(n), "_") {
			continue
		}
		for _, doc := range regexp.MustCompile(`(?m)^---\s*$`).Split(files[n], -1) {
			if strings.TrimSpace(stripComments(doc)) == "" {
				continue
			}
			js, err := yaml.YAMLToJSONStrict([]byte(doc))
			if err != nil {
				t.Fatalf("%s: %v\n%s", n, err, doc)
			}
			var obj map[string]any
			if err := json.Unmarshal(js, &obj); err != nil {
				t.Fatalf("%s: %v", n, err)
			}
			md, _ := obj["metadata"].(map[string]any)
			if md == nil {
				t.Fatalf("%s: object without metadata:\n%s", n, doc)
			}
			if _, ok := md["namespace"]; ok {
				t.Errorf("%s: sets metadata.namespace; the release's namespace applies", n)
			}
			if obj["kind"] != "Namespace" {
				md["namespace"] = chartNamespace
			}
			js, _ = json.Marshal(obj)
			out = append(out, js)
		}
	}
	return out
}

func stripComments(doc string) string {
	var b strings.Builder
	for _, l := range strings.Split(doc, "\n") {
		if !strings.HasPrefix(strings.TrimSpace(l), "#") {
			b.WriteString(l + "\n")
		}
	}
	return b.String()
}

// renderChartBundle renders the chart and decodes every object strictly into its API type.
func renderChartBundle(t *testing.T, vals map[string]any) (*bundle, [][]byte) {
	t.Helper()
	files, err := renderChart(loadChart(t), vals)
	if err != nil {
		t.Fatalf("render the chart: %v", err)
	}
	objs := chartObjects(t, files)
	b := newBundle(chartBundleLabel)
	for _, js := range objs {
		if err := b.add(js); err != nil {
			t.Error(err)
		}
	}
	if t.Failed() {
		t.FailNow()
	}
	return b, objs
}

func TestChartRendersStrictly(t *testing.T) {
	for name, vals := range map[string]func(*testing.T) map[string]any{
		"defaults":   func(t *testing.T) map[string]any { return map[string]any{"catalog": "models: []\n"} },
		"production": productionValues,
		"production with monitoring and external secrets": func(t *testing.T) map[string]any {
			v := productionValues(t)
			v["monitoring"] = map[string]any{
				"serviceMonitors": map[string]any{"enabled": true, "interval": "15s", "labels": map[string]any{"release": "prom"}},
				"prometheusRule":  map[string]any{"enabled": true, "labels": map[string]any{}},
			}
			v["externalSecrets"] = externalSecretValues()
			return v
		},
	} {
		t.Run(name, func(t *testing.T) {
			b, _ := renderChartBundle(t, vals(t))
			if len(b.Deployments) != 3 || len(b.Jobs) != 1 || len(b.PDBs) != 3 || len(b.NetPols) < 5 {
				t.Errorf("%d Deployments, %d Jobs, %d PDBs, %d NetworkPolicies", len(b.Deployments), len(b.Jobs), len(b.PDBs), len(b.NetPols))
			}
		})
	}
}

func externalSecretValues() map[string]any {
	ref := func(k, key string) map[string]any {
		return map[string]any{"secretKey": k, "remoteRef": map[string]any{"key": key}}
	}
	return map[string]any{
		"enabled": true, "refreshInterval": "1h",
		"secretStoreRef": map[string]any{"kind": "ClusterSecretStore", "name": "vault"},
		"tokens":         []any{ref("service-token", "llmgw/service-token"), ref("admin-token", "llmgw/admin-token")},
		"providerCredentials": []any{
			ref("openai-api-key", "llmgw/openai"), ref("anthropic-api-key", "llmgw/anthropic")},
		// The production values use CloudNativePG's Secret: no ExternalSecret for it.
		"database": []any{},
	}
}

func TestChartExtras(t *testing.T) {
	v := productionValues(t)
	v["monitoring"] = map[string]any{
		"serviceMonitors": map[string]any{"enabled": true, "interval": "15s", "labels": map[string]any{"release": "prom"}},
		"prometheusRule":  map[string]any{"enabled": true, "labels": map[string]any{}},
	}
	v["externalSecrets"] = externalSecretValues()
	b, _ := renderChartBundle(t, v)
	for _, name := range []string{"gateway-tokens", "gateway-provider-credentials"} {
		es := b.ExternalSecrets[name]
		if es == nil {
			t.Errorf("no ExternalSecret %s", name)
			continue
		}
		if es.Spec.Target.Name != name || len(es.Spec.Data) != 2 {
			t.Errorf("ExternalSecret %s: target %q, %d keys", name, es.Spec.Target.Name, len(es.Spec.Data))
		}
		keys, _ := externalSecrets[chartBundleLabel][name]
		for _, d := range es.Spec.Data {
			if !slices.Contains(keys.Keys, d.SecretKey) {
				t.Errorf("ExternalSecret %s makes key %s, which no pod reads", name, d.SecretKey)
			}
		}
	}
	if len(b.ExternalSecrets) != 2 {
		t.Errorf("%d ExternalSecrets, want 2 (none for the database Secret CloudNativePG makes)", len(b.ExternalSecrets))
	}
	// Without CloudNativePG, the database Secret may come from the store too.
	v["database"] = map[string]any{"cnpg": map[string]any{"enabled": false}, "secretName": "gateway-database"}
	v["externalSecrets"].(map[string]any)["database"] = []any{map[string]any{"secretKey": "uri", "remoteRef": map[string]any{"key": "llmgw/db"}}}
	b2, _ := renderChartBundle(t, v)
	if es := b2.ExternalSecrets["gateway-database"]; es == nil || es.Spec.Data[0].SecretKey != "uri" {
		t.Errorf("no ExternalSecret gateway-database with key uri: %+v", es)
	}
	if b.ServiceMonitors["accounting"] == nil || b.PodMonitors["gateway"] == nil {
		t.Fatalf("monitors: %v %v", b.ServiceMonitors, b.PodMonitors)
	}
	// Every scraped port is a port the network policies open to monitoring.
	for _, ep := range b.PodMonitors["gateway"].Spec.PodMetricsEndpoints {
		if findContainerPort(&b.Deployments["gateway"].Spec.Template, ep.Port) == 0 {
			t.Errorf("PodMonitor gateway scrapes port %s, which no gateway container declares", ep.Port)
		}
	}
	for _, ep := range b.ServiceMonitors["accounting"].Spec.Endpoints {
		found := false
		for _, p := range b.Services["accounting"].Spec.Ports {
			found = found || p.Name == ep.Port
		}
		if !found {
			t.Errorf("ServiceMonitor accounting scrapes port %s, which Service accounting lacks", ep.Port)
		}
	}
	rule := b.PrometheusRules["llmgw"]
	if rule == nil {
		t.Fatal("no PrometheusRule")
	}
	src, err := os.ReadFile(rulesFile)
	if err != nil {
		t.Fatal(err)
	}
	var want promRuleSpec
	if err := yaml.UnmarshalStrict(src, &want); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(rule.Spec, want) {
		t.Errorf("the PrometheusRule's groups differ from %s", rulesFile)
	}
}

// findContainerPort returns the number of the named port of a container of tpl, or 0.
func findContainerPort(tpl *corev1.PodTemplateSpec, name string) int32 {
	for _, c := range tpl.Spec.Containers {
		for _, p := range c.Ports {
			if p.Name == name {
				return p.ContainerPort
			}
		}
	}
	return 0
}

// TestChartMatchesProductionOverlay renders the chart with examples/production.yaml and
// kustomize's production overlay, and wants the same objects: the same kinds and names,
// and the same content once the labels naming the Helm release are removed (kustomize's
// hashed ConfigMap name and the chart's hook and checksum annotations aside).
func TestChartMatchesProductionOverlay(t *testing.T) {
	_, chartObjs := renderChartBundle(t, productionValues(t))
	k := krusty.MakeKustomizer(krusty.MakeDefaultOptions())
	rm, err := k.Run(filesys.MakeFsOnDisk(), filepath.FromSlash("overlays/production"))
	if err != nil {
		t.Fatal(err)
	}
	var kustObjs [][]byte
	for _, r := range rm.Resources() {
		if r.GetKind() == "Namespace" { // Helm installs into a namespace that exists
			continue
		}
		js, err := r.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		kustObjs = append(kustObjs, js)
	}
	for _, d := range compareObjects(t, kustObjs, chartObjs) {
		t.Error(d)
	}
}

// compareObjects returns the differences between two renderings, by kind/name.
func compareObjects(t *testing.T, want, got [][]byte) []string {
	t.Helper()
	index := func(objs [][]byte) map[string]map[string]any {
		out := map[string]map[string]any{}
		for _, js := range objs {
			js = regexp.MustCompile(`gateway-envoy-[a-z0-9]{10}\b`).ReplaceAll(js, []byte("gateway-envoy"))
			var o map[string]any
			if err := json.Unmarshal(js, &o); err != nil {
				t.Fatal(err)
			}
			if slices.Contains(chartOnlyKinds, o["kind"].(string)) {
				continue
			}
			normalize(o)
			md := o["metadata"].(map[string]any)
			out[o["kind"].(string)+"/"+md["name"].(string)] = o
		}
		return out
	}
	w, g := index(want), index(got)
	var diffs []string
	for id := range w {
		if _, ok := g[id]; !ok {
			diffs = append(diffs, fmt.Sprintf("%s: rendered by kustomize, not by the chart", id))
		}
	}
	for id, o := range g {
		wo, ok := w[id]
		if !ok {
			diffs = append(diffs, fmt.Sprintf("%s: rendered by the chart, not by kustomize", id))
			continue
		}
		diffs = append(diffs, diffJSON(id, wo, o)...)
	}
	sort.Strings(diffs)
	return diffs
}

// normalize drops what differs between the renderings by design: the release's labels,
// the chart's hook and checksum annotations, and maps left empty by the removal.
func normalize(v any) {
	m, ok := v.(map[string]any)
	if !ok {
		if l, ok := v.([]any); ok {
			for _, e := range l {
				normalize(e)
			}
			sortByName(l)
		}
		return
	}
	for k, e := range m {
		switch k {
		case "labels":
			if l, ok := e.(map[string]any); ok {
				for _, r := range releaseLabels {
					delete(l, r)
				}
			}
		case "annotations":
			if a, ok := e.(map[string]any); ok {
				for ak := range a {
					if strings.HasPrefix(ak, "helm.sh/hook") || strings.HasPrefix(ak, "checksum/") {
						delete(a, ak)
					}
				}
			}
		}
		normalize(e)
		if sub, ok := m[k].(map[string]any); ok && len(sub) == 0 && (k == "labels" || k == "annotations") {
			delete(m, k)
		}
	}
}

// sortByName orders a list whose items all have a name (containers, env, volumes,
// mounts, ports): kustomize's patches move the items they touch, which changes nothing
// for the API server. (The one order that matters, a variable defined before an env
// value that refers to it, is checked by the accounting wiring check.)
func sortByName(l []any) {
	for _, e := range l {
		if m, ok := e.(map[string]any); !ok || m["name"] == nil {
			return
		}
	}
	sort.SliceStable(l, func(i, j int) bool {
		return fmt.Sprint(l[i].(map[string]any)["name"]) < fmt.Sprint(l[j].(map[string]any)["name"])
	})
}

// diffJSON lists the paths where two decoded objects differ.
func diffJSON(path string, want, got any) []string {
	switch w := want.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			return []string{fmt.Sprintf("%s: kustomize %v, chart %v", path, short(want), short(got))}
		}
		var out []string
		for k := range w {
			out = append(out, diffJSON(path+"."+k, w[k], g[k])...)
		}
		for k := range g {
			if _, ok := w[k]; !ok {
				out = append(out, fmt.Sprintf("%s.%s: chart %v, not in kustomize", path, k, short(g[k])))
			}
		}
		return out
	case []any:
		g, ok := got.([]any)
		if !ok || len(g) != len(w) {
			return []string{fmt.Sprintf("%s: kustomize %v, chart %v", path, short(want), short(got))}
		}
		var out []string
		for i := range w {
			out = append(out, diffJSON(fmt.Sprintf("%s[%d]", path, i), w[i], g[i])...)
		}
		return out
	default:
		if !reflect.DeepEqual(want, got) {
			return []string{fmt.Sprintf("%s: kustomize %v, chart %v", path, short(want), short(got))}
		}
		return nil
	}
}

func short(v any) string {
	js, _ := json.Marshal(v)
	if len(js) > 200 {
		return string(js[:200]) + "..."
	}
	return string(js)
}

// TestChartWiring runs the overlays' wiring checks on the chart's production rendering.
func TestChartWiring(t *testing.T) {
	b, _ := renderChartBundle(t, productionValues(t))
	// The chart installs into a namespace the operator creates with the pod security
	// labels (docs/operations.md): overlays/production/namespace.yaml.
	ns, err := os.ReadFile(filepath.Join("overlays", "production", "namespace.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	js, err := yaml.YAMLToJSONStrict(ns)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.add(js); err != nil {
		t.Fatal(err)
	}
	for _, err := range runChecks(b) {
		t.Error(err)
	}
}

func TestChartLint(t *testing.T) {
	vals := productionValues(t)
	l := lint.AllWithKubeVersion(chartDir, vals, chartNamespace, nil)
	for _, m := range l.Messages {
		// As `helm lint --strict`: warnings and errors fail (INFO, like a missing icon, does not).
		if m.Severity >= support.WarningSev {
			t.Errorf("helm lint: %s", m)
		}
	}
}

// TestChartSchemaRejectsBadValues: values.schema.json refuses each bad value, and the
// chart's own checks refuse what the schema cannot express.
func TestChartSchemaRejectsBadValues(t *testing.T) {
	c := loadChart(t)
	tests := []struct {
		name string
		set  string // YAML merged over the production values
		want string
	}{
		{"replicas as a string", "accounting: {replicas: two}", "/accounting/replicas"},
		{"no accounting replica", "accounting: {replicas: 0}", "/accounting/replicas"},
		{"unknown value", "acounting: {replicas: 2}", "acounting"},
		{"public host list as a string", "gateway: {publicHosts: api.example.com}", "/gateway/publicHosts"},
		{"bad envoy log level", "gateway: {envoy: {logLevel: loud}}", "/gateway/envoy/logLevel"},
		{"bad resource quantity", "console: {resources: {limits: {memory: lots}}}", "/console/resources/limits/memory"},
		{"secret name not a DNS name", "secrets: {tokens: Gateway_Tokens}", "/secrets/tokens"},
		{"bad store kind", "externalSecrets: {secretStoreRef: {kind: Vault}}", "/externalSecrets/secretStoreRef/kind"},
		{"tls without a CA", "database: {tls: {enabled: true, caSecretName: ''}}", "caSecretName"},
		{"external secrets without a store", "externalSecrets: {enabled: true, secretStoreRef: {name: ''}}", "/externalSecrets/secretStoreRef/name"},
		{"no catalog", "catalog: ''", "catalog"},
		{"autoscaling min above max", "gateway: {autoscaling: {minReplicas: 12, maxReplicas: 10}}", "minReplicas"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			base := productionValues(t)
			if _, err := renderChart(c, base); err != nil {
				t.Fatalf("the production values already fail: %v", err)
			}
			var over map[string]any
			if err := yaml.Unmarshal([]byte(tc.set), &over); err != nil {
				t.Fatal(err)
			}
			vals := chartutil.CoalesceTables(over, base)
			_, err := renderChart(c, vals)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want one mentioning %q", err, tc.want)
			}
		})
	}
}

// TestChartCopies keeps the chart's copies of files outside it (Helm reads only files
// inside the chart) equal to their sources.
func TestChartCopies(t *testing.T) {
	for src, dst := range map[string]string{
		filepath.Join("base", "envoy", "envoy.yaml"): filepath.Join(chartDir, "files", "envoy.yaml"),
		rulesFile: filepath.Join(chartDir, "files", "prometheus-rules.yaml"),
	} {
		want, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		if *update {
			if err := os.WriteFile(dst, want, 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		got, err := os.ReadFile(dst)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s is stale: it must equal %s. Run: cd deploy && go test -run TestChartCopies -update .", dst, src)
		}
	}
}

// TestChartReadmeDocumentsValues wants every value of values.yaml in the chart's
// README: its dotted path, or on one line its parent's path and its own name in
// backquotes.
// Free-form maps (resources, labels, the Cluster's spec) count as one value.
func TestChartReadmeDocumentsValues(t *testing.T) {
	vals, err := chartutil.ReadValuesFile(filepath.Join(chartDir, "values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile(filepath.Join(chartDir, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	var missing []string
	var walk func(parent string, m map[string]any)
	walk = func(parent string, m map[string]any) {
		for k, v := range m {
			path := strings.TrimPrefix(parent+"."+k, ".")
			if sub, ok := v.(map[string]any); ok && !slices.Contains([]string{"resources", "labels", "spec"}, k) && !strings.HasPrefix(path, "images.") {
				walk(path, sub)
				continue
			}
			documented := false
			for _, line := range strings.Split(string(readme), "\n") {
				documented = documented || strings.Contains(line, "`"+path) ||
					strings.Contains(line, "`"+parent+".") && strings.Contains(line, "`"+k+"`")
			}
			if !documented {
				missing = append(missing, path)
			}
		}
	}
	walk("", vals)
	sort.Strings(missing)
	for _, m := range missing {
		t.Errorf("%s/README.md does not document %s", chartDir, m)
	}
}

// TestChartInstallsClientOnly runs `helm install --dry-run` without a cluster: the
// chart's kubeVersion constraint, its hooks and the ordering of its manifests pass
// Helm's install path, and the migrations Job is a hook run after install and before
// each upgrade.
func TestChartInstallsClientOnly(t *testing.T) {
	install := action.NewInstall(&action.Configuration{})
	install.DryRun, install.ClientOnly, install.Replace = true, true, true
	install.ReleaseName, install.Namespace = chartRelease, chartNamespace
	// Without a cluster Helm assumes Kubernetes 1.20; the chart needs 1.30 (the preStop
	// sleep action). A cluster's own version applies on a real install.
	kv, err := chartutil.ParseKubeVersion("v1.30.0")
	if err != nil {
		t.Fatal(err)
	}
	install.KubeVersion = kv
	rel, err := install.Run(loadChart(t), productionValues(t))
	if err != nil {
		t.Fatalf("helm install --dry-run: %v", err)
	}
	var hooks []string
	for _, h := range rel.Hooks {
		hooks = append(hooks, h.Kind+"/"+h.Name+fmt.Sprint(h.Events))
	}
	if want := "Job/accounting-migrate[post-install pre-upgrade]"; !slices.Equal(hooks, []string{want}) {
		t.Errorf("hooks %v, want [%s]", hooks, want)
	}
	if !strings.Contains(rel.Manifest, "kind: Deployment") || strings.Contains(rel.Manifest, "kind: Job\n") {
		t.Errorf("the release's manifest lacks the Deployments or carries the hook Job")
	}
}
