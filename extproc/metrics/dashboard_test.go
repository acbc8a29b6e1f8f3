package metrics_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	accmetrics "github.com/llmgw/gateway/accounting/metrics"
	"github.com/llmgw/gateway/extproc/health"
	"github.com/prometheus/client_golang/prometheus"
)

// dashboardPath is the operators' Grafana dashboard.
const dashboardPath = "../../deploy/grafana/gateway.json"

// envoyMetrics are the Envoy statistics the dashboard reads, as Envoy's Prometheus
// endpoint names them: the stat name with its tags (connection manager prefix, cluster
// name, response code class) extracted into labels by the default tag rules
// (source/common/config/well_known_names.cc, TagNameValues). Envoy has no registry to
// read here; each is declared in Envoy's source: downstream_rq_{1..5}xx and
// downstream_rq_time in ALL_HTTP_CONN_MAN_STATS (source/common/http/conn_manager_config.h),
// upstream_rq_time and upstream_cx_connect_fail in ALL_CLUSTER_TRAFFIC_STATS
// (envoy/upstream/upstream.h). Histograms are exported with _bucket, _sum and _count.
var envoyMetrics = []string{
	"envoy_http_downstream_rq_xx",
	"envoy_http_downstream_rq_time",
	"envoy_cluster_upstream_rq_time",
	"envoy_cluster_upstream_cx_connect_fail",
}

var fqName = regexp.MustCompile(`fqName: "([^"]+)"`)

// registered returns the metric names on reg, read from its collectors' descriptors
// (a vector with no series yet is described too).
func registered(reg *prometheus.Registry) []string {
	ch := make(chan *prometheus.Desc)
	go func() { reg.Describe(ch); close(ch) }()
	var names []string
	for d := range ch {
		if m := fqName.FindStringSubmatch(d.String()); m != nil {
			names = append(names, m[1])
		}
	}
	return names
}

// exportedNames returns the names extproc and accounting serve, from registries that
// carry every collector the two processes register (extproc/app, accounting/app): the
// health, settlement, webhook, group-commit, owner and journal collectors too. The
// GenAI instruments are OpenTelemetry's, which describe nothing to Prometheus until
// they have a measurement: a buffered and a streamed request are played first, and the
// names are read from a gather as well.
func exportedNames(t *testing.T) []string {
	t.Helper()
	f := newFixture(t)
	f.m.WatchHealth(health.New(health.Config{}))
	f.m.WatchSettlements(f.svc.SettleStats)
	f.play(t, bufferedChat()...)
	f.play(t, streamedChat(3)...)
	acc := accmetrics.New()
	acc.Alerts()
	acc.CountGroupCommit(func() (int64, int64, int64) { return 0, 0, 0 })
	acc.WatchOwner(func() bool { return true })
	acc.CountJournal(func() int64 { return 0 }, func() int64 { return 1 })
	var names []string
	for _, reg := range []*prometheus.Registry{f.m.Registry(), acc.Registry()} {
		names = append(names, registered(reg)...)
		fams, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, fam := range fams {
			names = append(names, fam.GetName())
		}
	}
	return names
}

// sourceNames are the metric names the packages' Go sources declare: the Name of each
// prometheus.*Opts literal and the name of each prometheus.NewDesc.
var sourceNames = regexp.MustCompile(`(?:\bName:\s*|NewDesc\(\s*)"([a-z_:][a-z0-9_:]*)"`)

// TestDashboardRegistriesCarryEveryCollector: every metric extproc/metrics and
// accounting/metrics declare is on the registries the dashboard's queries are checked
// against, so a collector registered by a Watch or Count call is not left out.
func TestDashboardRegistriesCarryEveryCollector(t *testing.T) {
	have := map[string]bool{}
	for _, n := range exportedNames(t) {
		have[n] = true
	}
	declared := 0
	for _, dir := range []string{".", "../../accounting/metrics"} {
		files, err := filepath.Glob(filepath.Join(dir, "*.go"))
		if err != nil {
			t.Fatal(err)
		}
		for _, file := range files {
			if strings.HasSuffix(file, "_test.go") {
				continue
			}
			src, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			for _, m := range sourceNames.FindAllStringSubmatch(string(src), -1) {
				declared++
				if !have[m[1]] {
					t.Errorf("%s declares %s, which the dashboard test's registries lack", file, m[1])
				}
			}
		}
	}
	if declared < 20 {
		t.Fatalf("found only %d metric names in the sources", declared)
	}
}

// PromQL words that are not metric names.
var promqlWords = map[string]bool{}

func init() {
	for _, w := range strings.Fields(`sum avg min max count stddev stdvar topk bottomk quantile count_values group
		by without on ignoring group_left group_right bool and or unless offset
		rate irate increase delta idelta deriv histogram_quantile abs ceil floor round clamp_min clamp_max
		label_replace label_join vector scalar time absent absent_over_time
		sum_over_time avg_over_time max_over_time min_over_time count_over_time inf nan`) {
		promqlWords[w] = true
	}
}

var (
	labelMatchers = regexp.MustCompile(`\{[^}]*\}`)
	grouping      = regexp.MustCompile(`\b(by|without|on|ignoring)\s*\([^)]*\)`)
	rangeSel      = regexp.MustCompile(`\[[^\]]*\]`)
	strLit        = regexp.MustCompile(`"[^"]*"`)
	ident         = regexp.MustCompile(`[A-Za-z_:][A-Za-z0-9_:]*`)
)

// metricNames returns the metric names a PromQL expression reads.
func metricNames(expr string) []string {
	e := strLit.ReplaceAllString(expr, "")
	e = labelMatchers.ReplaceAllString(e, " ")
	e = grouping.ReplaceAllString(e, " ")
	e = rangeSel.ReplaceAllString(e, " ")
	var out []string
	for _, w := range ident.FindAllString(e, -1) {
		if !promqlWords[w] && !strings.HasPrefix(w, "$") {
			out = append(out, w)
		}
	}
	return out
}

type panel struct {
	Title   string  `json:"title"`
	Panels  []panel `json:"panels"`
	Targets []struct {
		Expr string `json:"expr"`
	} `json:"targets"`
}

// TestDashboardQueriesNameExistingMetrics: deploy/grafana/gateway.json parses, and every
// query reads at least one metric and only metrics extproc, accounting or Envoy export.
func TestDashboardQueriesNameExistingMetrics(t *testing.T) {
	raw, err := os.ReadFile(dashboardPath)
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Title  string  `json:"title"`
		Panels []panel `json:"panels"`
	}
	dec := json.NewDecoder(strings.NewReader(string(raw)))
	if err := dec.Decode(&d); err != nil {
		t.Fatalf("dashboard does not parse: %v", err)
	}
	known := map[string]bool{}
	for _, n := range append(exportedNames(t), envoyMetrics...) {
		for _, s := range []string{"", "_bucket", "_sum", "_count"} {
			known[n+s] = true
		}
	}
	queries := 0
	var walk func([]panel)
	walk = func(ps []panel) {
		for _, p := range ps {
			walk(p.Panels)
			for _, tg := range p.Targets {
				queries++
				got := metricNames(tg.Expr)
				if len(got) == 0 {
					t.Errorf("panel %q: query %q reads no metric", p.Title, tg.Expr)
				}
				for _, n := range got {
					if !known[n] {
						t.Errorf("panel %q: query %q reads %q, which nothing exports", p.Title, tg.Expr, n)
					}
				}
			}
		}
	}
	walk(d.Panels)
	if queries == 0 {
		t.Fatal("the dashboard has no query")
	}
}

// TestMetricNamesOfAQuery pins the query reader the dashboard test relies on.
func TestMetricNamesOfAQuery(t *testing.T) {
	got := metricNames(`histogram_quantile(0.99, sum by (le, phase) (rate(gateway_phase_duration_seconds_bucket{phase!="x"}[$__rate_interval]))) / on (phase) sum(up_typo)`)
	if strings.Join(got, ",") != "gateway_phase_duration_seconds_bucket,up_typo" {
		t.Errorf("metric names %v", got)
	}
}
