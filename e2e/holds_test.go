package e2e_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/llmgw/gateway/accounting/tables/tablestest"
	"github.com/llmgw/gateway/internal/pdfpages/pdfpagestest"
)

// reservationRow is a key's one reservation as the ledger's journal holds it: the hold,
// what extproc reported as the actual cost, and what was charged.
func reservationRow(t *testing.T, keyID string) (amount, actual, charged int64) {
	t.Helper()
	rs := keyReservations(t, keyID)
	if len(rs) != 1 {
		t.Fatalf("%d reservations for the key, want 1", len(rs))
	}
	r := rs[0]
	if r.Actual != nil {
		actual = *r.Actual
	}
	return r.Amount, actual, r.Charged
}

// keyReservations are a key's reservations, settled or not, from the ledger's journal
// (the derived tables keep no row per reservation).
func keyReservations(t *testing.T, keyID string) []tablestest.Reservation {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, gw.DatabaseURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	rs, err := tablestest.KeyReservations(ctx, conn, keyID)
	if err != nil {
		t.Fatal(err)
	}
	return rs
}

// TestHoldBoundsTheBill sends material through every part a provider bills — schemas,
// legacy functions, prediction, text.format, PDFs by bytes — and checks against the
// ledger that the charge is exactly the catalog price of the mock provider's usage
// (which bills those parts the way the providers do) and never above the hold: the
// hold bounds the bill, and no charge is capped.
func TestHoldBoundsTheBill(t *testing.T) {
	t.Parallel()
	// 150 KB that the o200k vocabulary merges into few tokens, but that the provider
	// bills by its size.
	material := strings.Repeat("=", 150_000)
	pdf := pdfpagestest.BlankBase64(t, 2)
	user := `"messages":[{"role":"user","content":"summarise [[mock:tokens=3]]"}]`
	tests := []struct {
		name, path, body string
		anthropic        bool
		inPerM, outPerM  int64
	}{
		{name: "chat response_format", path: "/chat/completions", inPerM: 1_000_000, outPerM: 2_000_000,
			body: `{"model":"demo-chat","max_tokens":16,` + user + `,"response_format":{"type":"json_schema","json_schema":{"name":"s","schema":{"type":"object","description":"` + material + `"}}}}`},
		{name: "chat functions", path: "/chat/completions", inPerM: 1_000_000, outPerM: 2_000_000,
			body: `{"model":"demo-chat","max_tokens":16,` + user + `,"functions":[{"name":"f","description":"` + material + `","parameters":{"type":"object"}}]}`},
		{name: "chat prediction", path: "/chat/completions", inPerM: 1_000_000, outPerM: 2_000_000,
			body: `{"model":"demo-chat","max_tokens":16,` + user + `,"prediction":{"type":"content","content":"` + material + `"}}`},
		{name: "chat PDF by bytes", path: "/chat/completions", inPerM: 1_000_000, outPerM: 2_000_000,
			body: `{"model":"demo-chat","max_tokens":16,"messages":[{"role":"user","content":[{"type":"text","text":"summarise [[mock:tokens=3]]"},{"type":"file","file":{"filename":"a.pdf","file_data":"data:application/pdf;base64,` + pdf + `"}}]}]}`},
		{name: "responses text.format", path: "/responses", inPerM: 1_000_000, outPerM: 2_000_000,
			body: `{"model":"demo-responses","max_output_tokens":16,"input":"summarise [[mock:tokens=3]]","text":{"format":{"type":"json_schema","name":"s","schema":{"type":"object","description":"` + material + `"}}}}`},
		{name: "messages PDF by bytes", path: "/messages", anthropic: true, inPerM: 3_000_000, outPerM: 15_000_000,
			body: `{"model":"demo-claude","max_tokens":16,"messages":[{"role":"user","content":[{"type":"document","source":{"type":"base64","media_type":"application/pdf","data":"` + pdf + `"}},{"type":"text","text":"summarise [[mock:tokens=3]]"}]}]}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := newCustomer(t, customerOpts{topup: "10"})
			before := c.balance(t)
			var headers []string
			if tt.anthropic {
				headers = []string{"anthropic-version", "2023-06-01"}
			}
			status, _, body := rawRequest(t, http.MethodPost, tt.path, c.key, []byte(tt.body), headers...)
			if status != http.StatusOK {
				t.Fatalf("status %d: %s", status, body)
			}
			var resp struct {
				Usage map[string]any `json:"usage"`
			}
			if err := json.Unmarshal(body, &resp); err != nil {
				t.Fatal(err)
			}
			inField, outField := "input_tokens", "output_tokens"
			if tt.path == "/chat/completions" {
				inField, outField = "prompt_tokens", "completion_tokens"
			}
			in, _ := resp.Usage[inField].(float64)
			out, _ := resp.Usage[outField].(float64)
			if in+out < 1000 {
				t.Fatalf("the provider billed %v: the part was not billed", resp.Usage)
			}
			checkBill(t, c, before, tokenCost(int64(in), int64(out), tt.inPerM, tt.outPerM))
		})
	}
}

// checkBill waits until c's one request is settled and checks the ledger against want,
// the catalog price of the provider's usage: the reservation's actual cost and charge
// are want, within its hold, and the balance moved from before by want. It returns the
// hold.
func checkBill(t *testing.T, c customer, before, want int64) (hold int64) {
	t.Helper()
	acc := c.waitSettled(t)
	hold, actual, charged := reservationRow(t, c.keyID)
	if charged != want || actual != want {
		t.Errorf("charged %d (actual %d), want %d: the catalog price of the provider's usage", charged, actual, want)
	}
	if charged > hold {
		t.Errorf("charged %d above the hold %d", charged, hold)
	}
	if got := before - micros(t, acc, "balance"); got != want {
		t.Errorf("balance moved by %d, want %d", got, want)
	}
	return hold
}

// TestUnboundedDocumentRefused checks that a document by URL, whose size the gateway
// cannot know before the provider fetches it, is refused as 503 pricing_unavailable in
// the route's envelope, naming the part, and changes nothing in the ledger.
func TestUnboundedDocumentRefused(t *testing.T) {
	t.Parallel()
	c := newCustomer(t, customerOpts{topup: "10"})
	before := c.balance(t)
	status, h, body := rawRequest(t, http.MethodPost, "/messages", c.key,
		[]byte(`{"model":"demo-claude","max_tokens":16,"messages":[{"role":"user","content":[{"type":"document","source":{"type":"url","url":"https://example.com/a.pdf"}},{"type":"text","text":"summarise"}]}]}`),
		"anthropic-version", "2023-06-01")
	checkAnthropicError(t, status, h, body, 503, "api_error", "pricing_unavailable")
	status, h, body = rawRequest(t, http.MethodPost, "/responses", c.key,
		[]byte(`{"model":"demo-responses","input":[{"role":"user","content":[{"type":"input_file","file_url":"https://example.com/a.pdf"}]}]}`))
	checkOpenAIError(t, status, h, body, 503, "pricing_unavailable", "api_error", false)
	if !strings.Contains(string(body), `"param":"input[0].content[0].file_url"`) {
		t.Errorf("the refusal does not name the part: %s", body)
	}
	if got := c.balance(t); got != before {
		t.Errorf("balance moved from %d to %d", before, got)
	}
	acc := ctl(t, "account", "show", c.account)
	if r := micros(t, acc, "reserved"); r != 0 {
		t.Errorf("reserved %d", r)
	}
}
