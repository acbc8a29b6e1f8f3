// Package serve runs the e2e commands' HTTP servers (the mock providers and the Envoy
// test front) until their context ends.
package serve

import (
	"context"
	"errors"
	"net"
	"net/http"
	"time"
)

// Until serves srv on ln until ctx is done, then shuts it down gracefully (waiting at
// most 5 s for requests in flight). It returns nil after a shutdown and the error that
// stopped the server otherwise.
func Until(ctx context.Context, srv *http.Server, ln net.Listener) error {
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case <-ctx.Done():
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
		return nil
	case err := <-errc:
		if errors.Is(err, http.ErrServerClosed) {
			return nil
		}
		return err
	}
}
