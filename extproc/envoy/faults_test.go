package envoy_test

import (
	"context"
	"errors"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"github.com/llmgw/gateway/accounting/ledger"
	"github.com/llmgw/gateway/extproc/internal/replay"
	"github.com/llmgw/gateway/extproc/lifecycle"
	"github.com/llmgw/gateway/extproc/metrics"
	"github.com/llmgw/gateway/internal/testkit"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// stuckLedger's Commit, Renew and Reserve calls wait until their gate opens (or their
// context ends), as when accounting is paused or a row lock is held.
type stuckLedger struct {
	*replay.FakeLedger
	commitGate, reserveGate chan struct{}
}

func wait(ctx context.Context, gate chan struct{}) error {
	if gate == nil {
		return nil
	}
	select {
	case <-gate:
		return nil
	case <-ctx.Done():
		return errors.New("accounting did not answer: " + ctx.Err().Error())
	}
}

func (s *stuckLedger) Commit(ctx context.Context, c ledger.CommitRequest) (ledger.CommitResult, error) {
	if err := wait(ctx, s.commitGate); err != nil {
		return ledger.CommitResult{}, err
	}
	return s.FakeLedger.Commit(ctx, c)
}

// Reserve makes the hold at once and waits to answer: a reply that does not come in time
// leaves a hold behind.
func (s *stuckLedger) Reserve(ctx context.Context, r ledger.ReserveRequest) (ledger.Reservation, error) {
	res, err := s.FakeLedger.Reserve(ctx, r)
	if werr := wait(ctx, s.reserveGate); werr != nil {
		return ledger.Reservation{}, werr
	}
	return res, err
}

// replyWithin sends msg on x and returns its reply, or fails the test when none came
// while the ledger was stuck (then it opens gate, so the test can end).
func replyWithin(t *testing.T, x *replay.Exchange, msg *extprocv3.ProcessingRequest, gate chan struct{}) *extprocv3.ProcessingResponse {
	t.Helper()
	got := make(chan *extprocv3.ProcessingResponse, 1)
	go func() { got <- x.Send(msg) }()
	select {
	case r := <-got:
		return r
	case <-time.After(10 * time.Second):
		close(gate)
		t.Fatal("no reply while accounting was stuck: the reply waited for a ledger call")
		return nil
	}
}

// TestReplyDoesNotWaitForSettlement (money under faults, item 1): the reply that
// completes an answer never waits for the commit, so a slow accounting can never turn a
// delivered answer into Envoy's message-timeout error while the charge lands later. The
// commit lands once accounting answers.
func TestReplyDoesNotWaitForSettlement(t *testing.T) {
	for _, tt := range []struct {
		name, body, ct string
		chunks         []string
	}{
		{"json", chatOK, "application/json", []string{
			`{"id":"c","object":"chat.completion","model":"mock-gpt","choices":[{"index":0,"message":{"role":"assistant","content":"x"},"finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":1,"total_tokens":4}}`}},
		{"stream", `{"model":"demo-chat","stream":true,"messages":[{"role":"user","content":"x"}]}`, "text/event-stream", []string{
			"data: {\"model\":\"mock-gpt\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"a\"}}]}\n\n" +
				"data: {\"model\":\"mock-gpt\",\"choices\":[],\"usage\":{\"prompt_tokens\":3,\"completion_tokens\":1}}\n\ndata: [DONE]\n\n", ""}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f := &stuckLedger{FakeLedger: newFake(), commitGate: make(chan struct{})}
			h := replay.Start(t, replay.Service(t, f))
			x := admit(t, h, tt.body)
			x.Send(replay.ResponseHeaders(200, "content-type", tt.ct))
			for i, c := range tt.chunks {
				r := replyWithin(t, x, replay.ResponseBody([]byte(c), i == len(tt.chunks)-1), f.commitGate)
				if r.GetResponseBody() == nil {
					t.Fatalf("reply %d = %v, want the body passed on", i, r)
				}
			}
			if _, commits, _ := f.Counts(); commits != 0 {
				t.Fatalf("committed while accounting was stuck")
			}
			close(f.commitGate)
			x.Close()
			if _, commits, releases := f.Counts(); commits != 1 || releases != 0 || f.Commits[0].Actual != 3+2 {
				t.Errorf("commits %+v releases %v, want one commit of the usage (5)", f.Commits, f.Releases)
			}
		})
	}
}

// TestReserveOverBudgetIsRefusedAndReleased (item 1): a Reserve that does not answer
// within the admission budget is answered with our 503 (the spec's service_unavailable) before Envoy's message
// timeout, and the hold it made meanwhile is found under its request id and released.
func TestReserveOverBudgetIsRefusedAndReleased(t *testing.T) {
	// Before Envoy's message timeout by construction, not by a clock read here: the
	// budget is shorter, and the stuck ledger never answers, so a 503 can only come from
	// the budget running out.
	if lifecycle.AdmitBudget >= lifecycle.EnvoyMessageTimeout {
		t.Fatalf("admission budget %v not below Envoy's message timeout %v", lifecycle.AdmitBudget, lifecycle.EnvoyMessageTimeout)
	}
	f := &stuckLedger{FakeLedger: newFake(), reserveGate: make(chan struct{})}
	m := metrics.New(replay.DemoCatalog(t))
	h := replay.Start(t, replay.Service(t, f, func(c *lifecycle.Config) { c.Observers = []lifecycle.Observer{m} }))
	x, _, resp := h.Post(t, "/v1/chat/completions", []byte(chatOK), bearer(keyPaid)...)
	checkError(t, resp, testkit.WantError(503, "service_unavailable", "api_error"), false)
	close(f.reserveGate) // accounting answers again
	x.Close()
	reserves, commits, releases := f.Counts()
	if reserves < 2 || f.Reserves[0].RequestID != f.Reserves[len(f.Reserves)-1].RequestID {
		t.Fatalf("reserves %+v: want the abandoned request id reserved again", f.Reserves)
	}
	if commits != 0 || releases != 1 || !strings.HasSuffix(f.Releases[0], ":reserve_timed_out") {
		t.Errorf("commits %d releases %v: the abandoned hold must be released", commits, f.Releases)
	}
	// The abandoned hold is the request's settlement: held and released once, none left
	// in flight.
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	hold := strconv.FormatInt(f.Reserves[0].Amount, 10)
	for _, want := range []string{
		`gateway_credits_micros_total{kind="held"} ` + hold + "\n",
		`gateway_credits_micros_total{kind="released"} ` + hold + "\n",
		`gateway_credits_micros_total{kind="committed"} 0` + "\n",
		"gateway_reservations_in_flight 0\n",
		`gateway_requests_total{channel="none",code="service_unavailable",endpoint="/v1/chat/completions",model="demo-chat"} 1` + "\n",
	} {
		if !strings.Contains(rec.Body.String(), want) {
			t.Errorf("no %q in the metrics", want)
		}
	}
}

// outageLedger fails every Commit and Renew (accounting unreachable) until up is closed.
type outageLedger struct {
	*replay.FakeLedger
	up       chan struct{}
	mu       sync.Mutex
	attempts int
}

func (o *outageLedger) down() bool {
	select {
	case <-o.up:
		return false
	default:
		return true
	}
}

func (o *outageLedger) Commit(ctx context.Context, c ledger.CommitRequest) (ledger.CommitResult, error) {
	o.mu.Lock()
	o.attempts++
	o.mu.Unlock()
	if o.down() {
		// What grpc-go answers while accounting cannot be reached.
		return ledger.CommitResult{}, status.Error(codes.Unavailable, "connection refused")
	}
	return o.FakeLedger.Commit(ctx, c)
}

func (o *outageLedger) Renew(ctx context.Context, id string, ttl time.Duration) (time.Time, error) {
	if o.down() {
		return time.Time{}, errors.New("connection refused")
	}
	return o.FakeLedger.Renew(ctx, id, ttl)
}

const streamDone = "data: {\"model\":\"mock-gpt\",\"choices\":[],\"usage\":{\"prompt_tokens\":3,\"completion_tokens\":1}}\n\ndata: [DONE]\n\n"

// TestCommitOutlastsAnOutage (item 5): an accounting outage at the end of a stream that
// is shorter than what is left of the hold's lease loses no charge: the commit keeps
// trying and lands once, when accounting is back (here after 11 s, past the 10 s a
// commit used to give up after).
func TestCommitOutlastsAnOutage(t *testing.T) {
	t.Parallel()
	f := &outageLedger{FakeLedger: newFake(), up: make(chan struct{})}
	h := replay.Start(t, replay.Service(t, f, func(c *lifecycle.Config) { c.LeaseTTL = 30 * time.Second }))
	x := admit(t, h, `{"model":"demo-chat","stream":true,"messages":[{"role":"user","content":"x"}]}`)
	x.Send(replay.ResponseHeaders(200, "content-type", "text/event-stream"))
	x.Send(replay.ResponseBody([]byte(streamDone), false))
	x.Send(replay.ResponseBody(nil, true))
	time.AfterFunc(11*time.Second, func() { close(f.up) })
	x.Close()
	if _, commits, releases := f.Counts(); commits != 1 || releases != 0 || f.Commits[0].Actual != 3+2 {
		t.Errorf("commits %+v releases %v, want one commit of the usage", f.Commits, f.Releases)
	}
}

// TestCommitOutlastsItsLease (item 5): an accounting outage longer than the hold's
// lease loses no charge either: the commit keeps trying until accounting answers (whose
// sweeper gives a lease that ran out while it was away a grace period), and lands once.
func TestCommitOutlastsItsLease(t *testing.T) {
	t.Parallel()
	f := &outageLedger{FakeLedger: newFake(), up: make(chan struct{})}
	h := replay.Start(t, replay.Service(t, f, func(c *lifecycle.Config) { c.LeaseTTL = 3 * time.Second }))
	x := admit(t, h, `{"model":"demo-chat","stream":true,"messages":[{"role":"user","content":"x"}]}`)
	x.Send(replay.ResponseHeaders(200, "content-type", "text/event-stream"))
	x.Send(replay.ResponseBody([]byte(streamDone), false))
	x.Send(replay.ResponseBody(nil, true))
	time.AfterFunc(8*time.Second, func() { close(f.up) }) // past the lease and one more
	x.Close()                                             // returns once the settlement landed
	f.mu.Lock()
	attempts := f.attempts
	f.mu.Unlock()
	if _, commits, _ := f.Counts(); commits != 1 || attempts < 3 || f.Commits[0].Actual != 3+2 {
		t.Errorf("commits %+v after %d attempts: want retries, then one commit of the usage", f.Commits, attempts)
	}
}

// TestCommitFailingInsideAccountingIsGivenUp: an accounting that is there and keeps
// failing a commit with an error of its own (not unreachable, not busy) gets the commit
// for one lease; then extproc gives it up and stops renewing, so the lease frees the
// hold instead of keeping the account's credits reserved for as long as extproc runs.
func TestCommitFailingInsideAccountingIsGivenUp(t *testing.T) {
	t.Parallel()
	const lease = 2 * time.Second
	f := newFake()
	f.CommitE = status.Error(codes.Internal, "internal error")
	svc := replay.Service(t, f, func(c *lifecycle.Config) { c.LeaseTTL = lease })
	m := metrics.New(replay.DemoCatalog(t))
	m.WatchSettlements(svc.SettleStats)
	h := replay.Start(t, svc)
	x := admit(t, h, `{"model":"demo-chat","stream":true,"messages":[{"role":"user","content":"x"}]}`)
	x.Send(replay.ResponseHeaders(200, "content-type", "text/event-stream"))
	// The settlement starts once the answer is complete (its last event or the end of
	// its body): time it from before both.
	start := time.Now()
	x.Send(replay.ResponseBody([]byte(streamDone), false))
	x.Send(replay.ResponseBody(nil, true))
	x.Close() // returns once the settlement ended
	if took := time.Since(start); took < lease || took > 3*lease {
		t.Errorf("the settlement ended after %v, want about one lease (%v)", took, lease)
	}
	n := f.RenewalCount()
	time.Sleep(lease)
	if m := f.RenewalCount(); m != n {
		t.Errorf("renewed %d more times after the settlement was given up", m-n)
	}
	if _, commits, releases := f.Counts(); commits != 0 || releases != 0 {
		t.Errorf("%d commits and %d releases landed, want none", commits, releases)
	}
	body := served(t, m)
	for _, want := range []string{"gateway_settlements_given_up_total 1\n", "gateway_settlements_retrying 0\n"} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %q:\n%s", want, body)
		}
	}
	if retries := seriesValue(t, body, "gateway_settlement_retries_total"); retries < 1 {
		t.Errorf("gateway_settlement_retries_total %v, want the commit's retries", retries)
	}
}

// TestHoldIsALeaseItsOwnerRenews (item 4): a hold is reserved for the lease only and
// renewed by its owner while the request runs, whatever the gaps between Envoy's
// messages (here one longer than the lease), and no longer once it is settled.
func TestHoldIsALeaseItsOwnerRenews(t *testing.T) {
	t.Parallel()
	const lease = 3 * time.Second
	f := newFake()
	h := replay.Start(t, replay.Service(t, f, func(c *lifecycle.Config) { c.LeaseTTL = lease }))
	x := admit(t, h, `{"model":"demo-chat","stream":true,"messages":[{"role":"user","content":"x"}]}`)
	if f.Reserves[0].TTL != lease {
		t.Errorf("reserved for %v, want the lease %v", f.Reserves[0].TTL, lease)
	}
	x.Send(replay.ResponseHeaders(200, "content-type", "text/event-stream"))
	testkit.WaitFor(t, "three lease renewals", func() bool { return f.RenewalCount() >= 3 }) // more than a lease
	x.Send(replay.ResponseBody([]byte(streamDone), false))
	x.Send(replay.ResponseBody(nil, true))
	x.Close()
	n := f.RenewalCount()
	time.Sleep(lease / 2) // past the next renewal, were it still kept
	if m := f.RenewalCount(); m != n {
		t.Errorf("renewed %d more times after the settlement", m-n)
	}
}

// TestEarlyEndChargesTheKnownPrompt: a client that leaves after its request reached the
// provider pays its prompt as counted (text, framing), not the bounds the hold carries
// for an image, a PDF or the tools prompt, which the provider may bill far below.
func TestEarlyEndChargesTheKnownPrompt(t *testing.T) {
	f := newFake()
	h := replay.Start(t, replay.Service(t, f))
	x := admit(t, h, `{"model":"demo-chat","messages":[{"role":"user","content":[{"type":"text","text":"hello world"},`+
		`{"type":"image_url","image_url":{"url":"https://example.com/cat.png"}}]}]}`)
	x.Close()
	if len(f.Commits) != 1 {
		t.Fatalf("commits %+v releases %v, want the prompt charged", f.Commits, f.Releases)
	}
	// "hello world" (2) + one message (4) + reply priming (3); the image's 2,000-token
	// bound is held, not charged.
	if c := f.Commits[0]; c.Usage.InputTokens != 9 || c.Usage.OutputTokens != 0 || c.Actual != 9 {
		t.Errorf("commit = %+v, want 9 input tokens", c)
	}
	if f.Reserves[0].Amount <= 2000 {
		t.Errorf("hold %d does not bound the image", f.Reserves[0].Amount)
	}
}

// served returns what m serves at /metrics.
func served(t *testing.T, m *metrics.Metrics) string {
	t.Helper()
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	return rec.Body.String()
}

// seriesValue reads the value of the unlabelled series name from a /metrics body.
func seriesValue(t *testing.T, body, name string) float64 {
	t.Helper()
	for _, line := range strings.Split(body, "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatal(err)
			}
			return f
		}
	}
	t.Fatalf("no series %s", name)
	return 0
}

// TestSettlementRetriesOnMetrics: a commit that accounting cannot take is counted as
// retrying on /metrics while it is retried, and no longer once it landed; its retries
// stay counted, and nothing is given up.
func TestSettlementRetriesOnMetrics(t *testing.T) {
	t.Parallel()
	f := &outageLedger{FakeLedger: newFake(), up: make(chan struct{})}
	svc := replay.Service(t, f, func(c *lifecycle.Config) { c.LeaseTTL = 30 * time.Second })
	m := metrics.New(replay.DemoCatalog(t))
	m.WatchSettlements(svc.SettleStats)
	h := replay.Start(t, svc)
	x := admit(t, h, `{"model":"demo-chat","stream":true,"messages":[{"role":"user","content":"x"}]}`)
	x.Send(replay.ResponseHeaders(200, "content-type", "text/event-stream"))
	x.Send(replay.ResponseBody([]byte(streamDone), false))
	x.Send(replay.ResponseBody(nil, true))
	closed := make(chan struct{})
	go func() { defer close(closed); x.Close() }()
	for deadline := time.Now().Add(10 * time.Second); seriesValue(t, served(t, m), "gateway_settlements_retrying") != 1; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			close(f.up)
			t.Fatalf("the commit is not counted as retrying while accounting is away:\n%s", served(t, m))
		}
	}
	close(f.up)
	<-closed
	body := served(t, m)
	if v := seriesValue(t, body, "gateway_settlements_retrying"); v != 0 {
		t.Errorf("gateway_settlements_retrying %v after the commit landed, want 0", v)
	}
	f.mu.Lock()
	attempts := f.attempts
	f.mu.Unlock()
	if v := seriesValue(t, body, "gateway_settlement_retries_total"); v != float64(attempts-1) || v < 1 {
		t.Errorf("gateway_settlement_retries_total %v, want %d (the attempts after the first)", v, attempts-1)
	}
	if v := seriesValue(t, body, "gateway_settlements_given_up_total"); v != 0 {
		t.Errorf("gateway_settlements_given_up_total %v, want 0", v)
	}
	if _, commits, _ := f.Counts(); commits != 1 {
		t.Errorf("%d commits landed, want 1", commits)
	}
}
