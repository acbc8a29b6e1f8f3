package front

import (
	"context"
	"testing"
	"time"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	extprocsvc "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"github.com/llmgw/gateway/e2e/internal/bootstraptest"
	"github.com/llmgw/gateway/internal/testkit"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
)

// hold keeps a stream open until the front resets it.
func hold(s *session) error {
	<-s.stream.Context().Done()
	return nil
}

// TestAwaitOutcomes drives one exchange's ext_proc stream directly: what each way a
// wait for a reply ends gives, under a 100 ms message_timeout.
func TestAwaitOutcomes(t *testing.T) {
	headers := &extprocsvc.ProcessingRequest{Request: &extprocsvc.ProcessingRequest_RequestHeaders{RequestHeaders: &extprocsvc.HttpHeaders{}}}
	tests := []struct {
		name    string
		handler func(s *session) error
		cancel  time.Duration // the downstream goes away after this long (0: never)
		want    awaitResult
		reset   bool // the stream is reset (not closed by the server)
	}{
		{name: "reply", handler: func(s *session) error {
			s.next()
			return s.send(reqHeadersReply(nil))
		}, want: awaitResult{st: awaitReply}},
		{name: "no reply", handler: func(s *session) error {
			s.next()
			return hold(s)
		}, want: awaitResult{st: awaitFailed, status: 504, details: detailsMessageTimeout}, reset: true},
		{name: "reply after the timeout", handler: func(s *session) error {
			s.next()
			time.Sleep(300 * time.Millisecond)
			_ = s.send(reqHeadersReply(nil))
			return hold(s)
		}, want: awaitResult{st: awaitFailed, status: 504, details: detailsMessageTimeout}, reset: true},
		{name: "timeout extended", handler: func(s *session) error {
			s.next()
			if err := s.send(&extprocsvc.ProcessingResponse{OverrideMessageTimeout: durationpb.New(time.Second)}); err != nil {
				return err
			}
			time.Sleep(300 * time.Millisecond)
			return s.send(reqHeadersReply(nil))
		}, want: awaitResult{st: awaitReply}},
		{name: "extension out of range ignored", handler: func(s *session) error {
			s.next()
			if err := s.send(&extprocsvc.ProcessingResponse{OverrideMessageTimeout: durationpb.New(time.Hour)}); err != nil {
				return err
			}
			return hold(s)
		}, want: awaitResult{st: awaitFailed, status: 504, details: detailsMessageTimeout}, reset: true},
		{name: "gRPC error", handler: func(s *session) error {
			s.next()
			return status.Error(codes.Unavailable, "down")
		}, want: awaitResult{st: awaitFailed, status: 500, details: "ext_proc_error_gRPC_error_14"}},
		{name: "closed by the server", handler: func(s *session) error {
			s.next()
			return nil
		}, want: awaitResult{st: awaitClosed}},
		{name: "spurious reply", handler: func(s *session) error {
			s.next()
			return s.send(respBodyReply(nil))
		}, want: awaitResult{st: awaitFailed, status: 500, details: detailsSpurious}},
		{name: "downstream gone", handler: func(s *session) error {
			s.next()
			return hold(s)
		}, cancel: 30 * time.Millisecond, want: awaitResult{st: awaitCanceled}, reset: true},
	}
	short := func(b *bootstraptest.Bootstrap) {
		b.ExtProc(func(ep *extprocv3.ExternalProcessor) {
			ep.MessageTimeout = durationpb.New(100 * time.Millisecond)
			ep.MaxMessageTimeout = durationpb.New(2 * time.Second)
		})
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, nil, tt.handler, short)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			if tt.cancel > 0 {
				time.AfterFunc(tt.cancel, cancel)
			}
			x := &exchange{f: h.envoy, ctx: ctx}
			if err := x.openStream(); err != nil {
				t.Fatal(err)
			}
			defer x.releaseSlots()
			x.send(headers)
			s := h.session(t)
			start := time.Now()
			got := x.await(isRequestHeaders)
			if got.st != tt.want.st || got.status != tt.want.status || got.details != tt.want.details {
				t.Errorf("await = %+v, want %+v", got, tt.want)
			}
			if tt.want.st == awaitFailed && tt.want.status == 504 && time.Since(start) > time.Second {
				t.Errorf("the timeout took %v", time.Since(start))
			}
			if tt.reset {
				select {
				case <-s.stream.Context().Done():
				case <-time.After(testkit.Deadline):
					t.Error("the wait did not reset the stream")
				}
			}
			x.closeStream()
		})
	}
}
