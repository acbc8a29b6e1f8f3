package front

import (
	"net/http"
	"strconv"
	"strings"
	"testing"
)

func TestKeyCacheConvertsAsUncached(t *testing.T) {
	names := []string{"Content-Type", "content-type", "X-Request-Id", "x-envoy-external-address", "WWW-Authenticate",
		"bad key", "ünïcode", "", "a_b", ":authority"}
	for i := range keyCacheMax + 10 {
		names = append(names, "X-Many-"+strconv.Itoa(i))
	}
	for round := range 2 {
		for _, k := range names {
			if got, want := lowerKey(k), strings.ToLower(k); got != want {
				t.Errorf("round %d: lowerKey(%q) = %q, want %q", round, k, got, want)
			}
			if got, want := canonicalKey(k), http.CanonicalHeaderKey(k); got != want {
				t.Errorf("round %d: canonicalKey(%q) = %q, want %q", round, k, got, want)
			}
		}
	}
	if n := len(*lowerKeys.cur.Load()); n > keyCacheMax {
		t.Errorf("%d names remembered, want at most %d", n, keyCacheMax)
	}
}
