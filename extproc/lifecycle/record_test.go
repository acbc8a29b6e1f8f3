package lifecycle_test

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/llmgw/gateway/accounting/ledger"
	"github.com/llmgw/gateway/extproc/apierr"
	"github.com/llmgw/gateway/extproc/internal/replay"
	"github.com/llmgw/gateway/extproc/lifecycle"
)

// recorder is an Observer that keeps what it heard.
type recorder struct {
	mu      sync.Mutex
	held    []ledger.Reservation
	records []lifecycle.Record
}

func (o *recorder) Held(r ledger.Reservation) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.held = append(o.held, r)
}

func (o *recorder) Observe(r lifecycle.Record) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.records = append(o.records, r)
}

// TestRecordOncePerRequest: each request's record reaches every observer exactly once,
// after its settlement landed, with the settlement as accounting answered it; the
// settlement log reads the same record.
func TestRecordOncePerRequest(t *testing.T) {
	const usage = `{"id":"c","object":"chat.completion","model":"mock-gpt","choices":[],"usage":{"prompt_tokens":12,"completion_tokens":34}}`
	refused := ledger.Refuse(ledger.ReasonReservationSettled, "the reservation expired")
	tests := []struct {
		name    string
		ledger  func(*replay.FakeLedger)
		status  int
		body    string
		want    lifecycle.Settlement // but the reservation and hold, checked apart
		wantErr error
		code    apierr.Code
		log     string // the settlement's log line
	}{
		{
			name: "commit", status: 200, body: usage,
			want: lifecycle.Settlement{Outcome: lifecycle.OutcomeCommit, ActualMicros: 80, ChargedMicros: 80,
				Usage: ledger.Usage{InputTokens: 12, OutputTokens: 34}},
			log: "settled",
		},
		{
			name: "release", status: 500, body: `{"error":{"message":"boom"}}`,
			want: lifecycle.Settlement{Outcome: lifecycle.OutcomeRelease, Reason: "upstream_status"},
			code: apierr.UpstreamError, log: "settled",
		},
		{
			name: "failed commit", status: 200, body: usage,
			ledger: func(f *replay.FakeLedger) { f.CommitE = refused },
			want: lifecycle.Settlement{Outcome: lifecycle.OutcomeCommit, ActualMicros: 80,
				Usage: ledger.Usage{InputTokens: 12, OutputTokens: 34}},
			wantErr: refused, log: "commit failed",
		},
		{
			// The commit landed but its answer was lost; the retry is answered as a replay.
			name: "replayed commit", status: 200, body: usage,
			ledger: func(f *replay.FakeLedger) { f.LostCommitAnswers = 1 },
			want: lifecycle.Settlement{Outcome: lifecycle.OutcomeCommit, ActualMicros: 80, ChargedMicros: 80, Replayed: true,
				Usage: ledger.Usage{InputTokens: 12, OutputTokens: 34}},
			log: "settled",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			core, logs := observer.New(zap.InfoLevel)
			f := &replay.FakeLedger{}
			f.AddKey(secKey, ledger.Grant{KeyID: "k-sec", AccountID: "a-sec", Tier: "default", AccountToppedUp: true})
			if tt.ledger != nil {
				tt.ledger(f)
			}
			a, b := &recorder{}, &recorder{}
			svc := replay.Service(t, f, func(c *lifecycle.Config) {
				c.Log, c.Observers = zap.New(core), []lifecycle.Observer{a, b}
			})
			ctx := context.Background()
			r := svc.NewRequest()
			r.RequestHeaders(ctx, secHeaders("/v1/chat/completions", lifecycle.Header{Name: "x-request-id", Value: "rid-1"}), false)
			if a := r.RequestBody(ctx, []byte(`{"model":"demo-chat","max_tokens":100,"messages":[{"role":"user","content":"hi"}]}`), true); a.Immediate != nil {
				t.Fatalf("refused: %s", a.Immediate.Body)
			}
			r.ResponseHeaders(ctx, tt.status, []lifecycle.Header{{Name: ":status", Value: strconv.Itoa(tt.status)}, {Name: "content-type", Value: "application/json"}}, false)
			r.ResponseBody(ctx, []byte(tt.body), true)
			r.End(ctx, lifecycle.CauseClientLeft)
			r.End(ctx, lifecycle.CauseClientLeft) // a second End hands nothing more over
			if err := svc.WaitSettled(ctx); err != nil {
				t.Fatal(err)
			}
			hold := f.Reserves[0].Amount
			for i, o := range []*recorder{a, b} {
				if len(o.held) != 1 || o.held[0].Amount != hold {
					t.Errorf("observer %d: held %+v, want one hold of %d", i, o.held, hold)
				}
				if len(o.records) != 1 {
					t.Fatalf("observer %d: %d records, want 1", i, len(o.records))
				}
				rec := o.records[0]
				got := rec.Settlement
				if got.Reservation != o.held[0].ID || got.HoldMicros != hold {
					t.Errorf("observer %d: settled %s of %d, want %s of %d", i, got.Reservation, got.HoldMicros, o.held[0].ID, hold)
				}
				if !errors.Is(got.Err, tt.wantErr) {
					t.Errorf("observer %d: error %v, want %v", i, got.Err, tt.wantErr)
				}
				if !sameSettlement(got, tt.want) {
					t.Errorf("observer %d: settlement\n%+v, want\n%+v", i, got, tt.want)
				}
				if rec.RequestID != "rid-1" || rec.Model != "demo-chat" || rec.Channel == "" || rec.KeyID != "k-sec" ||
					!rec.Held || rec.HoldMicros != hold || rec.Reply.Code != tt.code || rec.Reply.UpstreamStatus != tt.status {
					t.Errorf("observer %d: record %+v", i, rec)
				}
			}
			lines := logs.FilterMessage(tt.log).All()
			if len(lines) != 1 {
				t.Fatalf("%d %q lines, want 1; all: %v", len(lines), tt.log, logs.All())
			}
			if tt.log == "settled" {
				fields := lines[0].ContextMap()
				if fields["charged_micros"] != tt.want.ChargedMicros || fields["hold_micros"] != hold || fields["request_id"] != "rid-1" {
					t.Errorf("settled line %v", fields)
				}
			}
		})
	}
}

// sameSettlement compares what a settlement decided and what accounting answered: its
// outcome, amounts and token counts.
func sameSettlement(a, b lifecycle.Settlement) bool {
	return a.Outcome == b.Outcome && a.Reason == b.Reason && a.ActualMicros == b.ActualMicros &&
		a.ChargedMicros == b.ChargedMicros && a.Capped == b.Capped && a.Replayed == b.Replayed &&
		a.Usage.InputTokens == b.Usage.InputTokens && a.Usage.OutputTokens == b.Usage.OutputTokens
}
