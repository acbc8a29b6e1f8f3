package metrics_test

import (
	"context"
	"io"
	"net/http/httptest"
	"strings"
	"testing"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"github.com/llmgw/gateway/accounting/ledger"
	"github.com/llmgw/gateway/extproc/apierr"
	"github.com/llmgw/gateway/extproc/envoy"
	"github.com/llmgw/gateway/extproc/health"
	"github.com/llmgw/gateway/extproc/internal/replay"
	"github.com/llmgw/gateway/extproc/lifecycle"
	"github.com/llmgw/gateway/extproc/metrics"
	dto "github.com/prometheus/client_model/go"
	"google.golang.org/grpc"
)

const keyPaid = "gw-paid0000000000000000000000000000000000000000"

// fakeStream is a channel-free envoy.Stream: Recv plays msgs in order, then io.EOF.
type fakeStream struct {
	msgs []*extprocv3.ProcessingRequest
	sent []*extprocv3.ProcessingResponse
}

var _ envoy.Stream = (*fakeStream)(nil)

func (f *fakeStream) Context() context.Context { return context.Background() }

func (f *fakeStream) Recv() (*extprocv3.ProcessingRequest, error) {
	if len(f.msgs) == 0 {
		return nil, io.EOF
	}
	m := f.msgs[0]
	f.msgs = f.msgs[1:]
	return m, nil
}

func (f *fakeStream) Send(r *extprocv3.ProcessingResponse) error {
	f.sent = append(f.sent, r)
	return nil
}

// fixture is the Envoy adapter over the demo catalog and a fake ledger, reporting to a
// fresh Metrics.
type fixture struct {
	m   *metrics.Metrics
	svc *lifecycle.Service
	srv *envoy.Server
	l   *replay.FakeLedger
}

func newFixture(t testing.TB) *fixture {
	t.Helper()
	l := &replay.FakeLedger{}
	l.AddKey(keyPaid, ledger.Grant{KeyID: "k1", AccountID: "a1", Tier: "default", AccountToppedUp: true})
	m := metrics.New(replay.DemoCatalog(t))
	svc := replay.Service(t, l, func(c *lifecycle.Config) { c.Observers = []lifecycle.Observer{m} })
	return &fixture{m: m, svc: svc, srv: envoy.New(svc, nil, envoy.WithObserver(m)), l: l}
}

// play serves msgs as one stream and waits for its settlement to land.
func (f *fixture) play(t *testing.T, msgs ...*extprocv3.ProcessingRequest) *fakeStream {
	t.Helper()
	s := &fakeStream{msgs: msgs}
	if err := f.srv.Serve(s); err != nil {
		t.Fatal(err)
	}
	if err := f.svc.WaitSettled(context.Background()); err != nil {
		t.Fatal(err)
	}
	return s
}

func post(path, body string, headers ...string) []*extprocv3.ProcessingRequest {
	return []*extprocv3.ProcessingRequest{
		replay.PostHeaders(path, len(body), headers...),
		replay.RequestBody([]byte(body), true),
	}
}

func auth() []string { return []string{"authorization", "Bearer " + keyPaid} }

const chat = `{"model":"demo-chat","max_tokens":100,"messages":[{"role":"user","content":"hello"}]}`

func TestRequestsAndCredits(t *testing.T) {
	type series struct {
		endpoint, model, channel, code string
	}
	tests := []struct {
		name     string
		msgs     []*extprocv3.ProcessingRequest
		want     series
		upstream string // the upstream error kind counted, "" for none
		commit   bool   // the hold is committed (else released, or never held)
		held     bool
		in, out  float64
	}{
		{
			name: "buffered success",
			msgs: append(post("/v1/chat/completions", chat, auth()...),
				replay.ResponseHeaders(200, "content-type", "application/json"),
				replay.ResponseBody([]byte(`{"model":"mock-gpt","choices":[],"usage":{"prompt_tokens":12,"completion_tokens":34}}`), true)),
			want: series{"/v1/chat/completions", "demo-chat", "mock-demo-chat", "ok"},
			held: true, commit: true, in: 12, out: 34,
		},
		{
			name: "no key: the model asked for is still a label",
			msgs: post("/v1/chat/completions", chat),
			want: series{"/v1/chat/completions", "demo-chat", "none", "invalid_api_key"},
		},
		{
			name: "a model outside the catalog is unknown",
			msgs: post("/v1/chat/completions", `{"model":"gpt-made-up-by-a-client","messages":[{"role":"user","content":"x"}]}`, auth()...),
			want: series{"/v1/chat/completions", "unknown", "none", "model_not_available"},
		},
		{
			name: "unknown path",
			msgs: []*extprocv3.ProcessingRequest{replay.RequestHeaders(true, ":method", "GET", ":path", "/v1/secret/admin?x=1")},
			want: series{"unknown", "none", "none", "not_found"},
		},
		{
			name: "model list is ok",
			msgs: []*extprocv3.ProcessingRequest{replay.RequestHeaders(true, ":method", "GET", ":path", "/v1/models")},
			want: series{"/v1/models", "none", "none", "ok"},
		},
		{
			name: "upstream account out of funds",
			msgs: append(post("/v1/chat/completions", chat, auth()...),
				replay.ResponseHeaders(429, "content-type", "application/json"),
				replay.ResponseBody([]byte(`{"error":{"type":"insufficient_quota","code":"insufficient_quota","message":"x"}}`), true)),
			want:     series{"/v1/chat/completions", "demo-chat", "mock-demo-chat", "upstream_account_unavailable"},
			upstream: metrics.KindAccountUnavailable, held: true,
		},
		{
			// Refused at its headers: the status is still the upstream's.
			name: "a 200 that is not what was asked for",
			msgs: append(post("/v1/chat/completions", chat, auth()...),
				replay.ResponseHeaders(200, "content-type", "text/html"),
				replay.ResponseBody([]byte(`<html>maintenance</html>`), true)),
			want:     series{"/v1/chat/completions", "demo-chat", "mock-demo-chat", "upstream_error"},
			upstream: metrics.KindUnusable, held: true,
		},
		{
			name: "envoy timed the upstream out",
			msgs: append(post("/v1/chat/completions", chat, auth()...),
				replay.ResponseHeaders(504, "content-type", "text/plain"),
				replay.ResponseBody([]byte(`upstream request timeout`), true)),
			want:     series{"/v1/chat/completions", "demo-chat", "mock-demo-chat", "upstream_error"},
			upstream: metrics.KindTimeout, held: true,
		},
		{
			name: "stream cut after a delivered event is charged and counted as a disconnect",
			msgs: append(post("/v1/chat/completions", `{"model":"demo-chat","stream":true,"max_tokens":100,"messages":[{"role":"user","content":"hello"}]}`, auth()...),
				replay.ResponseHeaders(200, "content-type", "text/event-stream"),
				replay.ResponseBody([]byte("data: {\"id\":\"c\",\"model\":\"mock-gpt\",\"choices\":[{\"delta\":{\"content\":\"hi there\"}}]}\n\n"), false)),
			want:     series{"/v1/chat/completions", "demo-chat", "mock-demo-chat", "ok"},
			upstream: metrics.KindDisconnect, held: true, commit: true,
		},
		{
			// The request reached the provider: its prompt is charged (settlement policy).
			name: "admitted but gone before any answer",
			msgs: post("/v1/chat/completions", chat, auth()...),
			want: series{"/v1/chat/completions", "demo-chat", "mock-demo-chat", "canceled"},
			held: true, commit: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t)
			f.play(t, tt.msgs...)
			m := f.m
			w := tt.want
			if got := value(t, m, "gateway_requests_total", "endpoint", w.endpoint, "model", w.model, "channel", w.channel, "code", w.code); got != 1 {
				t.Errorf("requests%v = %v, want 1; all:\n%s", w, got, scrape(t, m))
			}
			if n := count(t, m, "gateway_requests_total"); n != 1 {
				t.Errorf("%d request series, want 1", n)
			}
			kinds := count(t, m, "gateway_upstream_errors_total")
			switch {
			case tt.upstream == "" && kinds != 0:
				t.Errorf("upstream errors counted: %s", scrape(t, m))
			case tt.upstream != "" && value(t, m, "gateway_upstream_errors_total", "kind", tt.upstream) != 1:
				t.Errorf("upstream error %s not counted: %s", tt.upstream, scrape(t, m))
			}
			held := credits(m, "held")
			var hold float64
			if len(f.l.Reserves) > 0 {
				hold = float64(f.l.Reserves[0].Amount)
			}
			if !tt.held {
				if held != 0 || len(f.l.Reserves) != 0 {
					t.Errorf("held %v", held)
				}
				return
			}
			var charged float64
			if len(f.l.Commits) > 0 {
				charged = float64(f.l.Commits[0].Actual)
			}
			if (len(f.l.Commits) == 1) != tt.commit {
				t.Fatalf("commits %v, want commit %v", f.l.Commits, tt.commit)
			}
			if held != hold || credits(m, "committed") != charged || credits(m, "released") != hold-charged {
				t.Errorf("held %v committed %v released %v; want %v %v %v", held, credits(m, "committed"), credits(m, "released"), hold, charged, hold-charged)
			}
			if spent := value(t, m, "gateway_spend_micros_total", "model", w.model, "tier", "default"); spent != charged {
				t.Errorf("spend of %s = %v, want %v", w.model, spent, charged)
			}
			if g := value(t, m, "gateway_reservations_in_flight"); g != 0 {
				t.Errorf("in flight %v after settlement", g)
			}
			if tt.in > 0 || tt.out > 0 {
				if in, out := value(t, m, "gateway_tokens_total", "direction", "input"), value(t, m, "gateway_tokens_total", "direction", "output"); in != tt.in || out != tt.out {
					t.Errorf("tokens %v/%v, want %v/%v", in, out, tt.in, tt.out)
				}
			}
		})
	}
}

func credits(m *metrics.Metrics, kind string) float64 {
	return value(nil, m, "gateway_credits_micros_total", "kind", kind)
}

// value reads one series of m's registry (a counter's or gauge's value, a histogram's
// sample count) by name and label pairs; 0 when the series does not exist.
func value(t *testing.T, m *metrics.Metrics, name string, labels ...string) float64 {
	for _, mt := range family(t, m, name).GetMetric() {
		if !sameLabels(mt.GetLabel(), labels) {
			continue
		}
		switch {
		case mt.Counter != nil:
			return mt.GetCounter().GetValue()
		case mt.Gauge != nil:
			return mt.GetGauge().GetValue()
		case mt.Histogram != nil:
			return float64(mt.GetHistogram().GetSampleCount())
		}
	}
	return 0
}

// count is the number of series of a metric.
func count(t *testing.T, m *metrics.Metrics, name string) int {
	return len(family(t, m, name).GetMetric())
}

func family(t *testing.T, m *metrics.Metrics, name string) *dto.MetricFamily {
	fams, err := m.Registry().Gather()
	if err != nil && t != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		if f.GetName() == name {
			return f
		}
	}
	return nil
}

func sameLabels(have []*dto.LabelPair, want []string) bool {
	if len(have) != len(want)/2 {
		return false
	}
	for i := 0; i+1 < len(want); i += 2 {
		found := false
		for _, l := range have {
			if l.GetName() == want[i] && l.GetValue() == want[i+1] {
				found = true
			}
		}
		if !found {
			return false
		}
	}
	return true
}

func scrape(t *testing.T, m *metrics.Metrics) string {
	t.Helper()
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	var b strings.Builder
	for _, l := range strings.Split(rec.Body.String(), "\n") {
		if strings.HasPrefix(l, "gateway_") {
			b.WriteString(l + "\n")
		}
	}
	return b.String()
}

func TestInFlightWhileHeld(t *testing.T) {
	f := newFixture(t)
	f.l.LostCommitAnswers = 1
	ctx := context.Background()
	// Admit, then hold: the request is still open when the gauge is read.
	r := f.svc.NewRequest()
	r.RequestHeaders(ctx, []lifecycle.Header{{Name: ":method", Value: "POST"}, {Name: ":path", Value: "/v1/chat/completions"},
		{Name: "content-type", Value: "application/json"}, {Name: "authorization", Value: "Bearer " + keyPaid}}, false)
	if a := r.RequestBody(ctx, []byte(chat), true); a.Immediate != nil {
		t.Fatalf("refused: %s", a.Immediate.Body)
	}
	if g := value(t, f.m, "gateway_reservations_in_flight"); g != 1 {
		t.Fatalf("in flight %v, want 1", g)
	}
	hold := float64(f.l.Reserves[0].Amount)
	if held := credits(f.m, "held"); held != hold {
		t.Fatalf("held %v, want %v", held, hold)
	}
	r.ResponseHeaders(ctx, 200, []lifecycle.Header{{Name: ":status", Value: "200"}, {Name: "content-type", Value: "application/json"}}, false)
	r.ResponseBody(ctx, []byte(`{"model":"mock-gpt","choices":[],"usage":{"prompt_tokens":1,"completion_tokens":2}}`), true)
	r.End(ctx, lifecycle.CauseClientLeft)
	if err := f.svc.WaitSettled(ctx); err != nil {
		t.Fatal(err)
	}
	// The commit landed, its answer was lost, and its retry was answered as a replay:
	// one settlement, counted once.
	if n := len(f.l.Commits); n != 1 {
		t.Fatalf("%d commits landed, want 1", n)
	}
	charged := float64(f.l.Commits[0].Actual)
	if g := value(t, f.m, "gateway_reservations_in_flight"); g != 0 {
		t.Errorf("in flight %v, want 0", g)
	}
	if c, r := credits(f.m, "committed"), credits(f.m, "released"); c != charged || r != hold-charged {
		t.Errorf("committed %v released %v, want %v %v", c, r, charged, hold-charged)
	}
	if in, out := value(t, f.m, "gateway_tokens_total", "direction", "input"), value(t, f.m, "gateway_tokens_total", "direction", "output"); in != 1 || out != 2 {
		t.Errorf("tokens %v/%v, want 1/2", in, out)
	}
}

// TestFailedCommitReleasesTheHold: a commit accounting refuses for good (the hold had
// expired) charges nothing; the whole hold counts as released, once.
func TestFailedCommitReleasesTheHold(t *testing.T) {
	f := newFixture(t)
	f.l.CommitE = ledger.Refuse(ledger.ReasonReservationSettled, "the reservation expired")
	f.play(t, append(post("/v1/chat/completions", chat, auth()...),
		replay.ResponseHeaders(200, "content-type", "application/json"),
		replay.ResponseBody([]byte(`{"model":"mock-gpt","choices":[],"usage":{"prompt_tokens":12,"completion_tokens":34}}`), true))...)
	hold := float64(f.l.Reserves[0].Amount)
	if held, c, r := credits(f.m, "held"), credits(f.m, "committed"), credits(f.m, "released"); held != hold || c != 0 || r != hold {
		t.Errorf("held %v committed %v released %v, want %v 0 %v", held, c, r, hold, hold)
	}
	if g := value(t, f.m, "gateway_reservations_in_flight"); g != 0 {
		t.Errorf("in flight %v, want 0", g)
	}
	if in := value(t, f.m, "gateway_tokens_total", "direction", "input"); in != 0 {
		t.Errorf("tokens of a failed commit counted: %v", in)
	}
}

func TestUpstreamKind(t *testing.T) {
	tests := []struct {
		name string
		o    lifecycle.Reply
		want string
	}{
		{"success", lifecycle.Reply{Answered: true, UpstreamStatus: 200}, ""},
		{"complete stream", lifecycle.Reply{Answered: true, UpstreamStatus: 200, Streamed: true, Complete: true}, ""},
		{"cut stream", lifecycle.Reply{Answered: true, UpstreamStatus: 200, Streamed: true}, metrics.KindDisconnect},
		{"refused before upstream", lifecycle.Reply{Code: apierr.InsufficientCredits}, ""},
		{"invalid request of ours", lifecycle.Reply{Code: apierr.InvalidRequest}, ""},
		{"account", lifecycle.Reply{Code: apierr.UpstreamAccountUnavailable, CodeOnResponse: true, UpstreamStatus: 401}, metrics.KindAccountUnavailable},
		{"overloaded", lifecycle.Reply{Code: apierr.ServiceUnavailable, CodeOnResponse: true, UpstreamStatus: 529}, metrics.KindUnavailable},
		{"timeout", lifecycle.Reply{Code: apierr.UpstreamError, CodeOnResponse: true, UpstreamStatus: 504}, metrics.KindTimeout},
		{"provider says invalid", lifecycle.Reply{Code: apierr.InvalidRequest, CodeOnResponse: true, UpstreamStatus: 400}, metrics.KindRejected},
		{"html 200", lifecycle.Reply{Code: apierr.UpstreamError, CodeOnResponse: true, UpstreamStatus: 200}, metrics.KindUnusable},
		{"500", lifecycle.Reply{Code: apierr.UpstreamError, CodeOnResponse: true, UpstreamStatus: 500}, metrics.KindServerError},
		{"404", lifecycle.Reply{Code: apierr.UpstreamError, CodeOnResponse: true, UpstreamStatus: 404}, metrics.KindClientError},
		{"unknown video task", lifecycle.Reply{Code: apierr.TaskNotFound, CodeOnResponse: true, UpstreamStatus: 404}, ""},
		{"rewriter failure", lifecycle.Reply{Code: apierr.InternalError, CodeOnResponse: true, UpstreamStatus: 200}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := metrics.UpstreamKind(tt.o); got != tt.want {
				t.Errorf("kind = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestAccountingInterceptor(t *testing.T) {
	m := metrics.New(nil)
	ic := m.AccountingInterceptor()
	invoke := func(context.Context, string, any, any, *grpc.ClientConn, ...grpc.CallOption) error { return nil }
	for range 3 {
		_ = ic(context.Background(), "/accounting.v1.LedgerService/Reserve", nil, nil, nil, invoke)
	}
	if n := count(t, m, "gateway_accounting_call_duration_seconds"); n != 1 {
		t.Fatalf("%d series, want 1", n)
	}
	if !strings.Contains(scrape(t, m), `gateway_accounting_call_duration_seconds_count{method="Reserve"} 3`) {
		t.Errorf("scrape:\n%s", scrape(t, m))
	}
}

func TestPhasesObserved(t *testing.T) {
	f := newFixture(t)
	f.play(t, append(post("/v1/chat/completions", chat, auth()...),
		replay.ResponseHeaders(200, "content-type", "application/json"),
		replay.ResponseBody([]byte(`{"model":"mock-gpt","choices":[],"usage":{"prompt_tokens":1,"completion_tokens":1}}`), true))...)
	out := scrape(t, f.m)
	for _, p := range []envoy.Phase{envoy.PhaseRequestHeaders, envoy.PhaseRequestBody, envoy.PhaseResponseHeaders, envoy.PhaseResponseBody, envoy.PhaseSettle} {
		if !strings.Contains(out, `gateway_phase_duration_seconds_count{phase="`+string(p)+`"} 1`) {
			t.Errorf("phase %s not observed once:\n%s", p, out)
		}
	}
}

func TestChannelHealthMetrics(t *testing.T) {
	m := metrics.New(replay.DemoCatalog(t))
	tr := health.New(health.Config{Observe: m.ObserveAttempt})
	m.WatchHealth(tr)
	tr.Failed("mock-demo-chat", health.Account)
	tr.Succeeded("mock-demo-claude")
	tr.Failed("not-a-channel", health.Transport)
	for _, c := range []struct {
		labels []string
		want   float64
	}{
		{[]string{"channel", "mock-demo-chat", "outcome", "account"}, 1},
		{[]string{"channel", "mock-demo-claude", "outcome", "ok"}, 1},
		{[]string{"channel", "unknown", "outcome", "transport"}, 1},
	} {
		if got := value(t, m, "gateway_channel_attempts_total", c.labels...); got != c.want {
			t.Errorf("attempts %v = %v, want %v", c.labels, got, c.want)
		}
	}
	if got := value(t, m, "gateway_channel_state", "channel", "mock-demo-chat", "state", "cooling"); got != 1 {
		t.Errorf("cooling state = %v", got)
	}
	if got := value(t, m, "gateway_channel_state", "channel", "mock-demo-chat", "state", "healthy"); got != 0 {
		t.Errorf("healthy state of a cooling channel = %v", got)
	}
	if got := value(t, m, "gateway_channel_state", "channel", "mock-demo-claude", "state", "healthy"); got != 1 {
		t.Errorf("healthy state = %v", got)
	}
}

// TestAuthFailureMetrics: each answer to a failed key is counted by its code; both
// series exist from the start.
func TestAuthFailureMetrics(t *testing.T) {
	m := metrics.New(replay.DemoCatalog(t))
	if got := value(t, m, "gateway_auth_failures_total", "code", "rate_limit_exceeded"); got != 0 {
		t.Fatalf("at start: %v", got)
	}
	m.ObserveAuthFailure(apierr.InvalidAPIKey)
	m.ObserveAuthFailure(apierr.InvalidAPIKey)
	m.ObserveAuthFailure(apierr.RateLimitExceeded)
	m.ObserveAuthFailure(apierr.InternalError) // not an answer to a failed key: ignored
	for code, want := range map[string]float64{"invalid_api_key": 2, "rate_limit_exceeded": 1} {
		if got := value(t, m, "gateway_auth_failures_total", "code", code); got != want {
			t.Errorf("%s = %v, want %v", code, got, want)
		}
	}
}
