package console_test

import (
	"context"
	"encoding/csv"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/llmgw/gateway/accounting/engine/enginetest"
	"github.com/llmgw/gateway/accounting/server/servertest"
	"github.com/llmgw/gateway/console"
	accountingv1 "github.com/llmgw/gateway/proto/accounting/v1"
)

// signedInOnDatabase starts accounting on a fresh database and a console over it, and returns a
// browser signed in as the operator and the accounting fixture.
func signedInOnDatabase(t *testing.T) (*browser, *servertest.Fixture) {
	t.Helper()
	st, _ := enginetest.NewLedger(t, 4)
	fx := servertest.Start(t, st, servertest.Options{})
	conn, err := grpc.NewClient(fx.Addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	srv := httptest.NewServer(console.New(conn, console.Options{}))
	t.Cleanup(srv.Close)
	jar, _ := cookiejar.New(nil)
	b := &browser{t: t, base: srv.URL, c: &http.Client{Jar: jar}}
	if status, _ := b.post("/signin", url.Values{"token": {servertest.AdminToken}}); status != 200 {
		t.Fatalf("sign-in: %d", status)
	}
	return b, fx
}

// The statement shows each charge's channel, tier and components, and says when the
// hold capped it; its CSV carries them column by column. The usage page and its CSV
// show the cache tokens, and group by channel with the upstream model.
func TestReportsShowTheBreakdown(t *testing.T) {
	b, fx := signedInOnDatabase(t)
	ctx := context.Background()
	admin, led := fx.Admin(t, servertest.AdminToken), fx.Ledger(t, servertest.ServiceToken)
	acc, err := admin.CreateAccount(ctx, &accountingv1.CreateAccountRequest{})
	if err != nil {
		t.Fatal(err)
	}
	id := acc.GetAccount().GetId()
	if _, err := admin.TopUp(ctx, &accountingv1.TopUpRequest{AccountId: id, AmountMicros: 10_000_000}); err != nil {
		t.Fatal(err)
	}
	key, err := admin.CreateKey(ctx, &accountingv1.CreateKeyRequest{AccountId: id})
	if err != nil {
		t.Fatal(err)
	}
	components := []*accountingv1.ChargeComponent{
		{Name: "cache_read", Units: 80_000, PricePerMtok: 500_000, AmountMicros: 40_000},
		{Name: "cache_write_1h", Units: 3_000, PricePerMtok: 6_000_000, AmountMicros: 18_000},
		{Name: "output", Units: 1_000, PricePerMtok: 25_000_000, AmountMicros: 25_000},
	}
	res, err := led.Reserve(ctx, &accountingv1.ReserveRequest{RequestId: "console-1", KeyId: key.GetKey().GetId(),
		Model: "demo-claude-cached", AmountMicros: 50_000, Pool: accountingv1.Pool_POOL_GENERAL})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := led.Commit(ctx, &accountingv1.CommitRequest{ReservationId: res.GetReservationId(), ActualMicros: 83_000,
		Channel: "anthropic-main", UpstreamModel: "mock-claude",
		Usage: &accountingv1.Usage{InputTokens: 83_000, OutputTokens: 1_000, Components: components, ServiceTier: "priority"}}); err != nil {
		t.Fatal(err)
	}

	_, body := b.get("/accounts/" + id + "/statement")
	for _, want := range []string{"anthropic-main (mock-claude)", "<td>priority</td>", "cache_read 80000 × 500000 = 0.040000",
		"cache_write_1h 3000 × 6000000 = 0.018000", "output 1000 × 25000000 = 0.025000", "capped at the hold", "-0.050000"} {
		if !strings.Contains(body, want) {
			t.Errorf("statement lacks %q:\n%s", want, body)
		}
	}
	rows := readCSV(t, b, "/accounts/"+id+"/statement?format=csv")
	header, charge := rows[0], rows[1]
	field := func(name string) string { return charge[slices.Index(header, name)] }
	for name, want := range map[string]string{"kind": "charge", "amount": "-0.050000", "channel": "anthropic-main",
		"upstream_model": "mock-claude", "service_tier": "priority", "capped": "true", "cache_read_units": "80000",
		"cache_read_price_per_mtok": "500000", "cache_read_amount": "0.040000", "cache_write_1h_amount": "0.018000",
		"output_units": "1000", "input_units": "", "input_amount": ""} {
		if slices.Index(header, name) < 0 || field(name) != want {
			t.Errorf("statement CSV %s = %q, want %q (header %v)", name, field(name), want, header)
		}
	}

	if _, body = b.get("/accounts/" + id + "/usage?by=channel"); !strings.Contains(body, `id="usage-cache-read">80000<`) ||
		!strings.Contains(body, `id="usage-cache-write">3000<`) || !strings.Contains(body, "<td>anthropic-main</td><td>mock-claude</td>") {
		t.Errorf("usage by channel: %s", body)
	}
	rows = readCSV(t, b, "/accounts/"+id+"/usage?by=channel&format=csv")
	want := [][]string{
		{"channel", "upstream_model", "requests", "input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens", "charged"},
		{"anthropic-main", "mock-claude", "1", "83000", "1000", "80000", "3000", "0.050000"},
	}
	if !slices.EqualFunc(rows, want, slices.Equal) {
		t.Errorf("usage CSV %v, want %v", rows, want)
	}
}

func readCSV(t *testing.T, b *browser, path string) [][]string {
	t.Helper()
	status, body := b.get(path)
	if status != 200 {
		t.Fatalf("%s: %d %s", path, status, body)
	}
	rows, err := csv.NewReader(strings.NewReader(body)).ReadAll()
	if err != nil || len(rows) < 2 {
		t.Fatalf("%s: %v %q", path, err, body)
	}
	return rows
}
