package metrics_test

import (
	"context"
	"errors"
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/llmgw/gateway/accounting/ledger"
	"github.com/llmgw/gateway/accounting/metrics"
	"github.com/llmgw/gateway/accounting/server/servertest"
)

// value reads one series (a counter's value, a histogram's sample count) by name and
// label pairs; 0 when absent.
func value(t *testing.T, m *metrics.Metrics, name string, labels ...string) float64 {
	t.Helper()
	fams, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		if f.GetName() != name {
			continue
		}
		for _, mt := range f.GetMetric() {
			if !match(mt.GetLabel(), labels) {
				continue
			}
			if mt.Histogram != nil {
				return float64(mt.GetHistogram().GetSampleCount())
			}
			if mt.Gauge != nil {
				return mt.GetGauge().GetValue()
			}
			return mt.GetCounter().GetValue()
		}
	}
	return 0
}

func match(have []*dto.LabelPair, want []string) bool {
	if len(have) != len(want)/2 {
		return false
	}
	got := map[string]string{}
	for _, l := range have {
		got[l.GetName()] = l.GetValue()
	}
	for i := 0; i+1 < len(want); i += 2 {
		if got[want[i]] != want[i+1] {
			return false
		}
	}
	return true
}

func TestLedgerErrorsCountOnlyFailures(t *testing.T) {
	canceled, cancel := context.WithCancel(context.Background())
	cancel()
	tests := []struct {
		name    string
		ctx     context.Context
		err     error
		counted bool
	}{
		{"database down", context.Background(), errors.New("ledger store: reserve failed: database unavailable"), true},
		{"statement timeout of the server", context.Background(), context.DeadlineExceeded, true},
		{"refusal", context.Background(), ledger.Refuse(ledger.ReasonInsufficientCredits, "no"), false},
		{"wrapped refusal", context.Background(), errors.Join(errors.New("x"), ledger.Refuse(ledger.ReasonRateLimitExceeded, "no")), false},
		{"not found", context.Background(), ledger.ErrNotFound, false},
		{"caller gone", canceled, context.Canceled, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := metrics.New()
			mem := servertest.NewMemory()
			st := m.WrapStore(mem)
			mem.FailNext(tt.err)
			if _, err := st.GetAccount(tt.ctx, "acct_1"); !errors.Is(err, tt.err) {
				t.Fatalf("error %v not passed through", err)
			}
			want := 0.0
			if tt.counted {
				want = 1
			}
			if got := value(t, m, "accounting_ledger_errors_total", "op", "GetAccount"); got != want {
				t.Errorf("ledger errors = %v, want %v", got, want)
			}
		})
	}
}

func TestExpiredCounted(t *testing.T) {
	m := metrics.New()
	st := m.WrapStore(expiring{Store: servertest.NewMemory(), n: 3})
	for range 2 {
		if _, err := st.ExpireDue(context.Background(), 500); err != nil {
			t.Fatal(err)
		}
	}
	if got := value(t, m, "accounting_reservations_expired_total"); got != 6 {
		t.Errorf("expired = %v, want 6", got)
	}
}

// The group-commit counters are read from the store at each scrape.
func TestGroupCommitCounted(t *testing.T) {
	m := metrics.New()
	g := [3]int64{3, 10, 1}
	m.CountGroupCommit(func() (int64, int64, int64) { return g[0], g[1], g[2] })
	for _, want := range [][3]int64{g, {7, 30, 2}} {
		g = want
		for i, name := range []string{"accounting_ledger_group_transactions_total",
			"accounting_ledger_group_operations_total", "accounting_ledger_group_alone_total"} {
			if got := value(t, m, name); got != float64(want[i]) {
				t.Errorf("%s = %v, want %d", name, got, want[i])
			}
		}
	}
}

func TestLedgerOwner(t *testing.T) {
	m := metrics.New()
	owning := false
	m.WatchOwner(func() bool { return owning })
	for _, o := range []bool{false, true, false} {
		owning = o
		want := 0.0
		if o {
			want = 1
		}
		if got := value(t, m, "accounting_ledger_owner"); got != want {
			t.Errorf("owning %v: accounting_ledger_owner = %v", o, got)
		}
	}
}

// expiring is a store whose every sweep expires n reservations.
type expiring struct {
	ledger.Store
	n int
}

func (e expiring) ExpireDue(context.Context, int) (int, error) { return e.n, nil }

func TestInterceptorByMethodAndCode(t *testing.T) {
	m := metrics.New()
	ic := m.UnaryServerInterceptor()
	info := &grpc.UnaryServerInfo{FullMethod: "/accounting.v1.LedgerService/Reserve"}
	ok := func(context.Context, any) (any, error) { return "ok", nil }
	refused := func(context.Context, any) (any, error) {
		return nil, status.Error(codes.FailedPrecondition, "insufficient credits")
	}
	for _, h := range []grpc.UnaryHandler{ok, ok, refused} {
		_, _ = ic(context.Background(), nil, info, h)
	}
	if got := value(t, m, "accounting_grpc_request_duration_seconds", "method", "Reserve", "code", "OK"); got != 2 {
		t.Errorf("OK calls = %v, want 2", got)
	}
	if got := value(t, m, "accounting_grpc_request_duration_seconds", "method", "Reserve", "code", "FailedPrecondition"); got != 1 {
		t.Errorf("refused calls = %v, want 1", got)
	}
}

// CountArchive counts what the archiving moved, and its failures as ledger errors (not
// refusals, not a caller that gave up).
func TestCountArchive(t *testing.T) {
	m := metrics.New()
	results := []struct {
		n   int
		err error
	}{{1000, nil}, {7, nil}, {0, errors.New("database down")}, {0, ledger.Refuse(ledger.ReasonInvalidArgument, "too soon")}}
	i := 0
	archive := m.CountArchive(func(context.Context, time.Duration, int) (int, error) {
		r := results[i]
		i++
		return r.n, r.err
	})
	for range results {
		_, _ = archive(context.Background(), 20*time.Minute, 1000)
	}
	if got := value(t, m, "accounting_reservations_archived_total"); got != 1007 {
		t.Errorf("archived = %v, want 1007", got)
	}
	if got := value(t, m, "accounting_ledger_errors_total", "op", "ArchiveSettled"); got != 1 {
		t.Errorf("ArchiveSettled errors = %v, want 1", got)
	}
}

func TestAlertMetrics(t *testing.T) {
	m := metrics.New()
	a := m.Alerts()
	a.Generated("balance.low")
	a.Attempted(true)
	a.Attempted(false)
	a.Undelivered(3 * time.Second)
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	for _, want := range []string{`accounting_alert_events_total{type="balance.low"} 1`, "accounting_webhook_attempts_total 2",
		"accounting_webhook_failures_total 1", "accounting_webhook_oldest_undelivered_seconds 3"} {
		if !strings.Contains(rec.Body.String(), want) {
			t.Errorf("metrics lack %q", want)
		}
	}
}

// scrape returns what m serves at /metrics.
func scrape(t *testing.T, m *metrics.Metrics) string {
	t.Helper()
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	if rec.Code != 200 {
		t.Fatalf("/metrics answered %d", rec.Code)
	}
	return rec.Body.String()
}

// Refusals are counted by operation and reason, not as ledger errors: a reserve the
// ledger's state machine refuses for want of credits.
func TestRefusalsByReason(t *testing.T) {
	m := metrics.New()
	st := m.WrapStore(servertest.NewMemory())
	ctx := context.Background()
	tier := ledger.Tier{Name: "bulk", RPMBeforeTopUp: 1000, RPMAfterTopUp: 1000, InFlightGeneral: 10, InFlightHighCost: 10}
	if _, err := st.PutTier(ctx, tier); err != nil {
		t.Fatal(err)
	}
	a, err := st.CreateAccount(ctx, ledger.NewAccount{Tier: tier.Name})
	if err != nil {
		t.Fatal(err)
	}
	k, err := st.CreateKey(ctx, ledger.NewKey{AccountID: a.ID, Hash: []byte("0123456789abcdef0123456789abcdef")})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		_, err := st.Reserve(ctx, ledger.ReserveRequest{RequestID: fmt.Sprint("r", i), KeyID: k.ID, Amount: 10, Pool: ledger.PoolGeneral})
		if ledger.ReasonOf(err) != ledger.ReasonInsufficientCredits {
			t.Fatalf("reserve on an empty account: %v, want insufficient_credits", err)
		}
	}
	body := scrape(t, m)
	if want := `accounting_ledger_refusals_total{op="Reserve",reason="insufficient_credits"} 2`; !strings.Contains(body, want) {
		t.Errorf("/metrics lacks %q", want)
	}
	if strings.Contains(body, `accounting_ledger_errors_total{op="Reserve"}`) {
		t.Error("a refusal is counted as a ledger error")
	}
}

// The journal's counters are read from the engine at each scrape.
func TestJournalCounters(t *testing.T) {
	m := metrics.New()
	var appendErrors, takeovers int64 = 0, 1
	m.CountJournal(func() int64 { return appendErrors }, func() int64 { return takeovers })
	for _, want := range [][2]int64{{0, 1}, {1, 2}} {
		appendErrors, takeovers = want[0], want[1]
		body := scrape(t, m)
		for _, line := range []string{fmt.Sprint("accounting_journal_append_errors_total ", want[0]),
			fmt.Sprint("accounting_ledger_takeovers_total ", want[1])} {
			if !strings.Contains(body, line+"\n") {
				t.Errorf("/metrics lacks %q", line)
			}
		}
	}
}
