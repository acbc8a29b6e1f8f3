package e2e_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"testing"
	"time"
)

// mockProbe is the mock providers' record of the requests that carried one probe.
type mockProbe struct {
	Attempts     int                 `json:"attempts"`
	EnvoyHeaders map[string][]string `json:"envoy_headers"`
	Refusals     []string            `json:"refusals"` // path: why, for each credential refused
	// Uncredentialed counts the attempts that carried no credential at all.
	Uncredentialed int `json:"uncredentialed"`
}

// findMockProbe reads the mock's record of a probe; ok is false when no attempt carried it.
func findMockProbe(t *testing.T, id string) (mockProbe, bool) {
	t.Helper()
	resp, err := http.Get("http://" + gw.MockAddr + "/mock/probes/" + id)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusNotFound {
		return mockProbe{}, false
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("probe %s: status %d", id, resp.StatusCode)
	}
	var p mockProbe
	if err := json.NewDecoder(resp.Body).Decode(&p); err != nil {
		t.Fatal(err)
	}
	return p, true
}

// TestClientCannotSteerEnvoyRetries: a client asking Envoy's router to retry a failing
// upstream (and pretending to be internal with x-forwarded-for) gets one upstream
// attempt and the gateway's own error envelope, and none of its x-envoy-* headers
// reaches the provider. The out-of-funds channel may already be cooling on extproc
// (another test exhausted it first): then the request reaches no provider at all and
// gets the same answer.
func TestClientCannotSteerEnvoyRetries(t *testing.T) {
	t.Parallel()
	c := newCustomer(t, customerOpts{topup: "10"})
	steering := []string{
		"x-envoy-retry-on", "5xx,retriable-status-codes,reset,connect-failure",
		"x-envoy-retriable-status-codes", "429,502",
		"x-envoy-max-retries", "3",
		"x-envoy-upstream-rq-timeout-ms", "60000",
		"x-envoy-upstream-rq-per-try-timeout-ms", "30000",
		"x-envoy-hedge-on-per-try-timeout", "true",
		// Not one Envoy itself strips: only extproc's removal keeps it from the provider.
		"x-envoy-gw-canary", "1",
		"x-forwarded-for", "10.0.0.1",
	}
	tests := []struct {
		name      string
		model     string
		status    int
		code      string
		retryable bool
		mayCool   bool
	}{
		{name: "provider out of funds (429 upstream)", model: "demo-exhausted", status: 503, code: "upstream_account_unavailable", retryable: true, mayCool: true},
		{name: "unusable upstream answer", model: "demo-broken", status: 502, code: "upstream_error", retryable: false},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			probe := fmt.Sprintf("envoyhdr-%d-%d", time.Now().UnixNano(), i)
			body := []byte(`{"model":` + strconv.Quote(tt.model) + `,"messages":[{"role":"user","content":"hi [[mock:probe=` + probe + `]]"}]}`)
			status, h, b := rawRequest(t, http.MethodPost, "/chat/completions", c.key, body, steering...)
			checkOpenAIError(t, status, h, b, tt.status, tt.code, "api_error", tt.retryable)
			p, ok := findMockProbe(t, probe)
			if !ok && tt.mayCool {
				return
			}
			if p.Attempts != 1 {
				t.Errorf("the provider saw %d attempts, want 1", p.Attempts)
			}
			for i := 0; i+1 < len(steering); i += 2 {
				if v, ok := p.EnvoyHeaders[steering[i]]; ok {
					t.Errorf("the provider got the client's %s: %v", steering[i], v)
				}
			}
		})
	}
	acc := c.waitSettled(t)
	if got := micros(t, acc, "balance"); got != 10_000_000 {
		t.Errorf("failed upstream requests charged %d micros", 10_000_000-got)
	}
}
