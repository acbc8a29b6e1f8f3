package pprof_test

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/llmgw/gateway/internal/pprof"
)

func TestWrap(t *testing.T) {
	base := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/metrics" {
			_, _ = w.Write([]byte("ok"))
			return
		}
		http.NotFound(w, r)
	})
	get := func(h http.Handler, path string) int {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		return rec.Code
	}
	off, on := pprof.Wrap(base, false), pprof.Wrap(base, true)
	for _, tc := range []struct {
		h    http.Handler
		path string
		want int
	}{
		{off, "/debug/pprof/", 404}, {off, "/debug/pprof/goroutine", 404}, {off, "/metrics", 200},
		{on, "/debug/pprof/", 200}, {on, "/debug/pprof/goroutine?debug=1", 200}, {on, "/debug/pprof/cmdline", 200}, {on, "/metrics", 200},
	} {
		if got := get(tc.h, tc.path); got != tc.want {
			t.Errorf("GET %s = %d, want %d", tc.path, got, tc.want)
		}
	}
	for v, want := range map[string]bool{"": false, "0": false, "1": true, "true": true} {
		if got, err := pprof.Enabled(v); err != nil || got != want {
			t.Errorf("Enabled(%q) = %v, %v", v, got, err)
		}
	}
	if _, err := pprof.Enabled("yes please"); err == nil {
		t.Error("Enabled accepted a non-boolean")
	}
}
