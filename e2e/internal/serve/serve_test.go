package serve

import (
	"context"
	"errors"
	"net"
	"net/http"
	"testing"
)

func TestUntil(t *testing.T) {
	tests := []struct {
		name    string
		stop    func(cancel context.CancelFunc, srv *http.Server, ln net.Listener)
		wantErr bool
	}{
		{
			name: "context done shuts down cleanly",
			stop: func(cancel context.CancelFunc, _ *http.Server, _ net.Listener) { cancel() },
		},
		{
			name: "server closed elsewhere is a clean end",
			stop: func(_ context.CancelFunc, srv *http.Server, _ net.Listener) { _ = srv.Close() },
		},
		{
			name:    "listener failure is returned",
			stop:    func(_ context.CancelFunc, _ *http.Server, ln net.Listener) { _ = ln.Close() },
			wantErr: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			served := make(chan struct{})
			srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {})}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			errc := make(chan error, 1)
			go func() { errc <- Until(ctx, srv, ln) }()
			// A request answered proves the server is serving before it is stopped.
			go func() {
				defer close(served)
				if resp, err := http.Get("http://" + ln.Addr().String()); err == nil {
					_ = resp.Body.Close()
				}
			}()
			<-served
			tt.stop(cancel, srv, ln)
			err = <-errc
			if (err != nil) != tt.wantErr {
				t.Fatalf("Until() = %v, want error %v", err, tt.wantErr)
			}
			if err != nil && errors.Is(err, http.ErrServerClosed) {
				t.Fatalf("Until() returned ErrServerClosed")
			}
		})
	}
}
