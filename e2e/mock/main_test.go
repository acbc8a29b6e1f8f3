package mock_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/llmgw/gateway/e2e/mock"
	"github.com/llmgw/gateway/internal/logging/logtest"
)

// TestMainLogsInTheGatewayFormat: the mock's log lines use the one log format of every
// process (JSON, RFC 3339 UTC timestamps).
func TestMainLogsInTheGatewayFormat(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out logtest.Buffer
	done := make(chan int, 1)
	go func() { done <- mock.Main(ctx, []string{"--listen", "127.0.0.1:0"}, &out) }()
	for !strings.Contains(out.String(), "listening on") {
		select {
		case code := <-done:
			t.Fatalf("Main exited %d: %s", code, out.String())
		case <-time.After(10 * time.Millisecond):
		}
	}
	cancel()
	if code := <-done; code != 0 {
		t.Fatalf("Main exited %d: %s", code, out.String())
	}
	if err := logtest.Check(out.String()); err != nil {
		t.Fatal(err)
	}
}
