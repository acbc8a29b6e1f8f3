package client

import (
	"context"
	"errors"
	"net"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/health/grpc_health_v1"
)

// TestReconnectBackoffIsBounded: while accounting cannot be reached, a connection made
// by Dial tries again at least every MaxReconnectDelay (plus its jitter), not with gRPC's
// default back-off, which waits 2.6 s, 4 s, 6.5 s… up to 120 s between attempts.
func TestReconnectBackoffIsBounded(t *testing.T) {
	var (
		mu       sync.Mutex
		attempts []time.Time
	)
	refuse := grpc.WithContextDialer(func(context.Context, string) (net.Conn, error) {
		mu.Lock()
		attempts = append(attempts, time.Now())
		mu.Unlock()
		return nil, errors.New("connection refused")
	})
	conn, err := Dial(context.Background(), "127.0.0.1:1", "tok", refuse)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Second)
	defer cancel()
	_, err = grpc_health_v1.NewHealthClient(conn).Check(ctx, &grpc_health_v1.HealthCheckRequest{}, grpc.WaitForReady(true))
	if err == nil {
		t.Fatal("a call through a refusing dialer succeeded")
	}
	mu.Lock()
	defer mu.Unlock()
	if len(attempts) < 6 {
		t.Fatalf("%d connection attempts in 6 s, want one at least every %v", len(attempts), MaxReconnectDelay)
	}
	limit := MaxReconnectDelay*6/5 + 200*time.Millisecond // the jitter, and a busy machine
	for i := 1; i < len(attempts); i++ {
		if gap := attempts[i].Sub(attempts[i-1]); gap > limit {
			t.Errorf("attempt %d came %v after the one before, want at most %v", i+1, gap, limit)
		}
	}
}
