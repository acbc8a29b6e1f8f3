// Package logtest checks a process's log output against the gateway's one log format
// (package logging): JSON lines whose "ts" is RFC 3339 in UTC.
package logtest

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/llmgw/gateway/internal/logging"
)

// Check returns an error naming the first line of logs that is not a JSON entry with an
// RFC 3339 UTC "ts", or when logs has no line at all.
func Check(logs string) error {
	n := 0
	for _, line := range strings.Split(logs, "\n") {
		if strings.TrimSpace(line) == "" {
			continue
		}
		n++
		var e struct {
			TS any `json:"ts"`
		}
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			return fmt.Errorf("log line is not JSON: %q", line)
		}
		ts, ok := e.TS.(string)
		if !ok {
			return fmt.Errorf("log ts %#v is not an RFC 3339 string: %q", e.TS, line)
		}
		if _, err := time.Parse(logging.TimeFormat, ts); err != nil || !strings.HasSuffix(ts, "Z") {
			return fmt.Errorf("log ts %q is not RFC 3339 in UTC: %q", ts, line)
		}
	}
	if n == 0 {
		return fmt.Errorf("no log lines")
	}
	return nil
}

// Buffer collects a process's log output; safe for the process and the test to share.
type Buffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *Buffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// String is everything written so far.
func (l *Buffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
