package mock

import (
	"bytes"
	"compress/gzip"
	"io"
	"mime"
	"net/http"
	"strconv"
	"strings"
)

// gzipMarker in a request body makes the mock answer gzip-compressed even when the
// request's accept-encoding does not allow it, as a provider ignoring the gateway's
// accept-encoding: identity would.
const gzipMarker = "[[mock:gzip]]"

// compressing answers JSON and SSE gzip-compressed, like the real providers, when the
// request's accept-encoding allows gzip (or the body carries gzipMarker). Other answers
// (audio, probes) are sent as they are.
func compressing(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		force := false
		if r.Body != nil && r.Body != http.NoBody {
			raw, err := io.ReadAll(r.Body)
			if err != nil {
				http.Error(w, "bad body", http.StatusBadRequest)
				return
			}
			force = bytes.Contains(raw, []byte(gzipMarker))
			r.Body = io.NopCloser(bytes.NewReader(raw))
		}
		if !force && !acceptsGzip(r.Header.Values("Accept-Encoding")) {
			next.ServeHTTP(w, r)
			return
		}
		gw := &gzipWriter{ResponseWriter: w, rc: http.NewResponseController(w)}
		next.ServeHTTP(gw, r)
		// Not deferred: a cut stream (a panic) must stay cut, never get a gzip end.
		gw.close()
	})
}

// acceptsGzip reports whether accept-encoding values allow gzip (RFC 9110 section
// 12.5.3: gzip, or else *, listed with a non-zero q).
func acceptsGzip(values []string) bool {
	gz, star := -1.0, -1.0
	for _, v := range values {
		for _, item := range strings.Split(v, ",") {
			name, params, _ := strings.Cut(item, ";")
			q := 1.0
			if k, val, ok := strings.Cut(params, "="); ok && strings.TrimSpace(k) == "q" {
				if f, err := strconv.ParseFloat(strings.TrimSpace(val), 64); err == nil {
					q = f
				}
			}
			switch strings.ToLower(strings.TrimSpace(name)) {
			case "gzip", "x-gzip":
				gz = q
			case "*":
				star = q
			}
		}
	}
	if gz >= 0 {
		return gz > 0
	}
	return star > 0
}

// gzipWriter compresses the body of a JSON or SSE answer; flushes reach the client at
// once (SSE events stay events).
type gzipWriter struct {
	http.ResponseWriter
	rc      *http.ResponseController
	gz      *gzip.Writer
	decided bool
}

func (g *gzipWriter) WriteHeader(status int) {
	if !g.decided {
		g.decided = true
		mt, _, _ := mime.ParseMediaType(g.Header().Get("Content-Type"))
		if mt == "application/json" || mt == "text/event-stream" {
			g.Header().Set("Content-Encoding", "gzip")
			g.Header().Del("Content-Length")
			g.Header().Add("Vary", "Accept-Encoding")
			g.gz = gzip.NewWriter(g.ResponseWriter)
		}
	}
	g.ResponseWriter.WriteHeader(status)
}

func (g *gzipWriter) Write(p []byte) (int, error) {
	if !g.decided {
		g.WriteHeader(http.StatusOK)
	}
	if g.gz == nil {
		return g.ResponseWriter.Write(p)
	}
	return g.gz.Write(p)
}

// FlushError sends what was compressed so far (http.ResponseController finds it).
func (g *gzipWriter) FlushError() error {
	if g.gz != nil {
		if err := g.gz.Flush(); err != nil {
			return err
		}
	}
	return g.rc.Flush()
}

// Unwrap lets http.ResponseController reach the connection (a cut stream).
func (g *gzipWriter) Unwrap() http.ResponseWriter { return g.ResponseWriter }

func (g *gzipWriter) close() {
	if g.gz != nil {
		_ = g.gz.Close()
	}
}
