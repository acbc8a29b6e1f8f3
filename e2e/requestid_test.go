package e2e_test

import (
	"bufio"
	"encoding/json"
	"net/http"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"
)

var uuid4 = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)

// TestRequestIDOnEveryAnswer: successes and errors (extproc's own refusals and the
// provider's failures) carry a gateway-generated x-request-id, never the client's; a
// charged request's settlement record in extproc's log carries the same id.
func TestRequestIDOnEveryAnswer(t *testing.T) {
	t.Parallel()
	c := newCustomer(t, customerOpts{topup: "10"})
	tests := []struct {
		name, key, model string
		status           int
		settled          bool
	}{
		{name: "success", key: c.key, model: "demo-chat", status: 200, settled: true},
		{name: "no key", model: "demo-chat", status: 401},
		{name: "unknown model", key: c.key, model: "no-such-model", status: 403},
		{name: "provider failure", key: c.key, model: "demo-broken", status: 502},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, h, b := rawRequest(t, http.MethodPost, "/chat/completions", tt.key, chatBody(tt.model, ""), "x-request-id", "client-chosen-id")
			if status != tt.status {
				t.Fatalf("status %d, want %d: %s", status, tt.status, b)
			}
			ids := h.Values("x-request-id")
			if len(ids) != 1 || !uuid4.MatchString(ids[0]) {
				t.Fatalf("x-request-id %v, want one gateway-generated UUID4", ids)
			}
			if tt.settled {
				c.waitSettled(t)
				rec := settlementRecord(t, ids[0])
				if rec["model"] != tt.model || rec["outcome"] != "committed" {
					t.Errorf("settlement record %v", rec)
				}
			}
		})
	}
}

// settlementRecord waits for extproc's settlement line carrying request id.
func settlementRecord(t *testing.T, id string) map[string]any {
	t.Helper()
	rec, _ := stackLogLine(t, "settlement record with request_id "+id, func(part, text string) map[string]any {
		i := strings.Index(text, "{")
		if i < 0 || part != "extproc" || !strings.Contains(text, id) {
			return nil
		}
		var rec map[string]any
		if json.Unmarshal([]byte(text[i:]), &rec) == nil && rec["msg"] == "settled" && rec["request_id"] == id {
			return rec
		}
		return nil
	})
	return rec
}

// stackLogLine waits for the first line of the stack log that match decodes (non-nil),
// given the line's part ("extproc", "front", ...) and its text; it returns the decoded
// line and its text. what names the line in the failure.
func stackLogLine(t *testing.T, what string, match func(part, text string) map[string]any) (map[string]any, string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		f, err := os.Open(gwLog)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			part, text, ok := strings.Cut(sc.Text(), " | ")
			if !ok {
				continue
			}
			if m := match(strings.TrimSpace(part), text); m != nil {
				f.Close()
				return m, text
			}
		}
		f.Close()
		if time.Now().After(deadline) {
			t.Fatalf("no %s in the stack log", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
