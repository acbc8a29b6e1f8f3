package metrics_test

import (
	"encoding/json"
	"os"
	"regexp"
	"strings"
	"testing"

	accmetrics "github.com/llmgw/gateway/accounting/metrics"
	"github.com/llmgw/gateway/extproc/metrics"
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
	names := append(registered(metrics.New(nil).Registry()), registered(accmetrics.New().Registry())...)
	for _, n := range append(names, envoyMetrics...) {
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
