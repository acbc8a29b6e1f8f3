package logging_test

import (
	"bytes"
	"strings"
	"testing"

	"github.com/llmgw/gateway/internal/logging"
	"github.com/llmgw/gateway/internal/logging/logtest"
)

// Every entry's "ts" is RFC 3339 in UTC, from the zap logger and from its
// standard-library adapter alike, with sub-second precision.
func TestTimestampsAreRFC3339UTC(t *testing.T) {
	var buf bytes.Buffer
	logging.New(&buf, "svc").Info("hello")
	logging.Std(&buf, "front").Printf("listening on %s", "127.0.0.1:1")
	if err := logtest.Check(buf.String()); err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(buf.String(), "\n"); n != 2 {
		t.Fatalf("%d lines, want 2: %s", n, buf.String())
	}
	for _, bad := range []string{`{"ts":1764000000.5}`, `{"ts":"2026-11-24T10:00:00.5+0000"}`, `{"ts":"2026-11-24T11:00:00.5+01:00"}`, "2026/11/24 10:00:00 plain"} {
		if logtest.Check(bad) == nil {
			t.Errorf("Check accepted %s", bad)
		}
	}
}
