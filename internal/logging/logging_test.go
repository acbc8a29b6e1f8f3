package logging_test

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"

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

// Buffered's lines reach w: by Sync, by the flush timer without any call, and by stop,
// each whole and in order.
func TestBufferedLinesReachTheWriter(t *testing.T) {
	var w logtest.Buffer
	log, stop := logging.Buffered(&w, "svc")
	log.Info("first")
	if err := log.Sync(); err != nil {
		t.Fatal(err)
	}
	if got := w.String(); strings.Count(got, "\n") != 1 || !strings.Contains(got, `"msg":"first"`) {
		t.Fatalf("after Sync: %q", got)
	}

	log.Info("second")
	for deadline := time.Now().Add(10 * time.Second); !strings.Contains(w.String(), `"second"`); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the flush timer never wrote the second line: %q", w.String())
		}
	}

	for i := range 1000 { // more than BufferSize in all: some are written when it fills
		log.Info("many", zap.Int("i", i))
	}
	stop()
	got := w.String()
	if err := logtest.Check(got); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(got, "\n"), "\n")
	if len(lines) != 1002 || !strings.Contains(lines[1001], `"i":999`) {
		t.Fatalf("%d lines after stop, the last %q", len(lines), lines[len(lines)-1])
	}
}
