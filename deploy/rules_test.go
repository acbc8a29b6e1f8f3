package deploy_test

import (
	"go/ast"
	goparser "go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/rulefmt"
	"github.com/prometheus/prometheus/promql/parser"
)

// promql parses rule expressions as Prometheus does by default.
var promql = parser.NewParser(parser.Options{})

// rulesFile holds the alert rules, in Prometheus's rule-file format.
const rulesFile = "prometheus/rules.yaml"

// wantAlerts are the conditions a platform team is paged or warned for.
var wantAlerts = []string{
	"LedgerNoOwner", "LedgerJournalAppendErrors", "LedgerTakeover", "SettlementsPilingUp",
	"WebhookDeliveriesFailing", "ExtprocErrorRate", "UpstreamChannelDown",
}

// exportedSources are the packages whose collectors the gateway serves.
var exportedSources = []string{"../accounting/metrics", "../extproc/metrics"}

// TestAlertRulesParse loads the rule file as Prometheus does (rulefmt checks each
// expression with the PromQL parser and each template) and wants every alert listed.
func TestAlertRulesParse(t *testing.T) {
	groups, errs := rulefmt.ParseFile(rulesFile, false, model.UTF8Validation, promql, nil)
	for _, err := range errs {
		t.Error(err)
	}
	if groups == nil {
		t.FailNow()
	}
	var got []string
	for _, g := range groups.Groups {
		for _, r := range g.Rules {
			got = append(got, r.Alert)
			if r.Labels["severity"] == "" {
				t.Errorf("alert %s has no severity label", r.Alert)
			}
		}
	}
	for _, w := range wantAlerts {
		if !slices.Contains(got, w) {
			t.Errorf("no alert %s in %s", w, rulesFile)
		}
	}
}

// TestAlertRulesUseRealMetrics wants every metric a rule selects to be one the code
// exports: a name registered in accounting/metrics or extproc/metrics (a histogram's
// _count, _sum and _bucket series included), a process_ metric of the process
// collector both registries carry, or up, which Prometheus writes for every target.
func TestAlertRulesUseRealMetrics(t *testing.T) {
	defined := definedMetrics(t)
	if len(defined) < 10 {
		t.Fatalf("found only %d metric names in %v", len(defined), exportedSources)
	}
	for _, name := range ruleMetrics(t) {
		if !exported(defined, name) {
			t.Errorf("%s names metric %s, which the code does not export", rulesFile, name)
		}
	}
}

func TestExportedRecognisesOnlyRealNames(t *testing.T) {
	defined := map[string]string{"accounting_grpc_request_duration_seconds": "histogram", "gateway_requests_total": "counter"}
	for name, want := range map[string]bool{
		"accounting_grpc_request_duration_seconds_count": true,
		"gateway_requests_total":                         true,
		"gateway_requests_total_count":                   false,
		"accounting_owner_up":                            false,
		"process_start_time_seconds":                     false, // no process collector in defined
		"go_goroutines":                                  false,
		"up":                                             true,
	} {
		if got := exported(defined, name); got != want {
			t.Errorf("exported(%s) = %v, want %v", name, got, want)
		}
	}
}

// processMetrics are the series of client_golang's process collector that rules may use.
var processMetrics = []string{"process_start_time_seconds", "process_cpu_seconds_total", "process_resident_memory_bytes", "process_open_fds"}

// exported says whether the code exports series name; defined maps names to their
// type (histogram or other).
func exported(defined map[string]string, name string) bool {
	if _, ok := defined[name]; ok {
		return true
	}
	for _, suffix := range []string{"_count", "_sum", "_bucket"} {
		if base, ok := strings.CutSuffix(name, suffix); ok && defined[base] == "histogram" {
			return true
		}
	}
	return name == "up"
}

// ruleMetrics returns the metric names the rules' expressions select.
func ruleMetrics(t *testing.T) []string {
	t.Helper()
	groups, errs := rulefmt.ParseFile(rulesFile, false, model.UTF8Validation, promql, nil)
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	seen := map[string]bool{}
	for _, g := range groups.Groups {
		for _, r := range g.Rules {
			expr, err := promql.ParseExpr(r.Expr)
			if err != nil {
				t.Fatalf("%s: %v", r.Alert, err)
			}
			parser.Inspect(expr, func(n parser.Node, _ []parser.Node) error {
				if vs, ok := n.(*parser.VectorSelector); ok {
					if vs.Name == "" {
						t.Errorf("%s: a selector without a metric name: %s", r.Alert, vs)
					}
					seen[vs.Name] = true
				}
				return nil
			})
		}
	}
	names := make([]string, 0, len(seen))
	for n := range seen {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// definedMetrics reads the Go sources of exportedSources for the metric names they
// register: the Name of each prometheus.*Opts literal and the first argument of each
// prometheus.NewDesc, with histograms marked as such, and the process collector's
// series where collectors.NewProcessCollector is registered.
func definedMetrics(t *testing.T) map[string]string {
	t.Helper()
	out := map[string]string{}
	fset := token.NewFileSet()
	for _, dir := range exportedSources {
		err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return err
			}
			src, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			f, err := goparser.ParseFile(fset, path, src, 0)
			if err != nil {
				return err
			}
			ast.Inspect(f, func(n ast.Node) bool {
				switch n := n.(type) {
				case *ast.CompositeLit:
					sel, ok := n.Type.(*ast.SelectorExpr)
					if !ok || !strings.HasSuffix(sel.Sel.Name, "Opts") {
						return true
					}
					for _, e := range n.Elts {
						if kv, ok := e.(*ast.KeyValueExpr); ok && isIdent(kv.Key, "Name") {
							if s, ok := stringLit(kv.Value); ok {
								out[s] = strings.ToLower(strings.TrimSuffix(sel.Sel.Name, "Opts"))
							}
						}
					}
				case *ast.CallExpr:
					sel, ok := n.Fun.(*ast.SelectorExpr)
					if ok && sel.Sel.Name == "NewProcessCollector" {
						for _, m := range processMetrics {
							out[m] = "process"
						}
					}
					if ok && sel.Sel.Name == "NewDesc" && len(n.Args) > 0 {
						if s, ok := stringLit(n.Args[0]); ok {
							out[s] = "desc"
						}
					}
				}
				return true
			})
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return out
}

func isIdent(e ast.Expr, name string) bool {
	id, ok := e.(*ast.Ident)
	return ok && id.Name == name
}

func stringLit(e ast.Expr) (string, bool) {
	lit, ok := e.(*ast.BasicLit)
	if !ok || lit.Kind != token.STRING {
		return "", false
	}
	s, err := strconv.Unquote(lit.Value)
	return s, err == nil
}
