package envoy_test

import (
	"context"
	"testing"
	"time"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"github.com/llmgw/gateway/accounting/client"
	"github.com/llmgw/gateway/accounting/engine/enginetest"
	"github.com/llmgw/gateway/accounting/server/servertest"
	"github.com/llmgw/gateway/accounting/tables/tablestest"
	"github.com/llmgw/gateway/extproc/internal/replay"
	"github.com/llmgw/gateway/extproc/ledgerclient"
	"github.com/llmgw/gateway/extproc/lifecycle"
	"github.com/llmgw/gateway/internal/testkit"
	accountingv1 "github.com/llmgw/gateway/proto/accounting/v1"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/timestamppb"
)

func TestMain(m *testing.M) { tablestest.Main(m) }

// realStack is extproc's replay harness wired to the real accounting service (gRPC
// server, PostgreSQL store on a fresh database), with the key cache following the
// change stream.
type realStack struct {
	h     *replay.Harness
	admin accountingv1.AdminServiceClient
	lc    *ledgerclient.Client
}

func startReal(t testing.TB) *realStack {
	t.Helper()
	return startRealWith(t, servertest.Options{})
}

// startRealWith is startReal with the server's options and extproc's dial options.
func startRealWith(t testing.TB, o servertest.Options, dial ...grpc.DialOption) *realStack {
	t.Helper()
	return startRealService(t, o, nil, dial...)
}

// startRealService is startRealWith with the lifecycle's configuration edited by svc.
func startRealService(t testing.TB, o servertest.Options, svc func(*lifecycle.Config), dial ...grpc.DialOption) *realStack {
	t.Helper()
	// The ledger accounting runs by default: the journal engine with its derived tables.
	st, _ := enginetest.Start(t, tablestest.NewPool(t, tablestest.NewDB(t), 8), true)
	fx := servertest.Start(t, st, o)
	conn, err := client.Dial(context.Background(), fx.Addr, servertest.ServiceToken, dial...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	lc := ledgerclient.New(accountingv1.NewLedgerServiceClient(conn), ledgerclient.Options{})
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go lc.Watch(ctx)
	testkit.WaitFor(t, "the ledger client to connect", lc.Connected)
	var opts []func(*lifecycle.Config)
	if svc != nil {
		opts = append(opts, svc)
	}
	return &realStack{h: replay.Start(t, replay.Service(t, lc, opts...)), admin: fx.Admin(t, servertest.AdminToken), lc: lc}
}

func (s *realStack) account(t testing.TB, tier string, topUp int64) string {
	t.Helper()
	ctx := context.Background()
	a, err := s.admin.CreateAccount(ctx, &accountingv1.CreateAccountRequest{Tier: tier})
	if err != nil {
		t.Fatal(err)
	}
	id := a.GetAccount().GetId()
	if topUp > 0 {
		if _, err := s.admin.TopUp(ctx, &accountingv1.TopUpRequest{AccountId: id, AmountMicros: topUp}); err != nil {
			t.Fatal(err)
		}
	}
	return id
}

func (s *realStack) key(t testing.TB, req *accountingv1.CreateKeyRequest) (id, secret string) {
	t.Helper()
	k, err := s.admin.CreateKey(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	return k.GetKey().GetId(), k.GetSecret()
}

func (s *realStack) balance(t testing.TB, account string) (balance, reserved int64) {
	t.Helper()
	a, err := s.admin.GetAccount(context.Background(), &accountingv1.GetAccountRequest{AccountId: account})
	if err != nil {
		t.Fatal(err)
	}
	return a.GetAccount().GetBalanceMicros(), a.GetAccount().GetReservedMicros()
}

// post plays a chat request and returns the body reply (or the immediate answer).
func (s *realStack) post(t testing.TB, path, body, key string) (*replay.Exchange, *extprocv3.ProcessingResponse) {
	t.Helper()
	x, hdr, resp := s.h.Post(t, path, []byte(body), "authorization", "Bearer "+key)
	if resp == nil {
		resp = hdr
	}
	return x, resp
}

const paidChat = `{"model":"demo-chat","max_completion_tokens":4096,"messages":[{"role":"user","content":"hello world"}]}`

// paidHold is the hold of paidChat: 74 input tokens at $1/M + 4096 at $2/M, + 2 for
// the rounding of the input's parts (pricing.Max).
const paidHold = 74 + 8192 + 2

func TestAdmissionAgainstRealAccounting(t *testing.T) {
	s := startReal(t)
	ctx := context.Background()

	t.Run("free model without top-up is admitted and settled", func(t *testing.T) {
		acct := s.account(t, "default", 0)
		_, key := s.key(t, &accountingv1.CreateKeyRequest{AccountId: acct})
		x, resp := s.post(t, "/v1/chat/completions", `{"model":"demo-free","messages":[{"role":"user","content":"hi"}]}`, key)
		if resp.GetRequestBody() == nil {
			t.Fatalf("refused: %v", resp)
		}
		x.Send(replay.ResponseHeaders(200, "content-type", "application/json"))
		x.Send(replay.ResponseBody([]byte(`{"model":"mock-small","choices":[],"usage":{"prompt_tokens":5,"completion_tokens":5}}`), true))
		x.Close()
		if b, r := s.balance(t, acct); b != 0 || r != 0 {
			t.Errorf("balance %d reserved %d", b, r)
		}
	})

	t.Run("paid model is charged the actual cost", func(t *testing.T) {
		acct := s.account(t, "default", 1_000_000)
		_, key := s.key(t, &accountingv1.CreateKeyRequest{AccountId: acct})
		x, resp := s.post(t, "/v1/chat/completions", paidChat, key)
		if resp.GetRequestBody() == nil {
			t.Fatalf("refused: %v", resp)
		}
		if _, r := s.balance(t, acct); r != paidHold {
			t.Errorf("reserved %d, want %d", r, paidHold)
		}
		x.Send(replay.ResponseHeaders(200, "content-type", "application/json"))
		x.Send(replay.ResponseBody([]byte(`{"model":"mock-gpt","choices":[],"usage":{"prompt_tokens":1000,"completion_tokens":1000}}`), true))
		x.Close()
		if b, r := s.balance(t, acct); b != 1_000_000-3000 || r != 0 {
			t.Errorf("balance %d reserved %d, want %d 0", b, r, 1_000_000-3000)
		}
	})

	t.Run("paid model refused without top-up", func(t *testing.T) {
		acct := s.account(t, "default", 0)
		_, key := s.key(t, &accountingv1.CreateKeyRequest{AccountId: acct})
		x, resp := s.post(t, "/v1/chat/completions", paidChat, key)
		checkError(t, resp, testkit.WantError(403, "model_requires_topup", "permission_error").WithParam("model"), false)
		x.Close()
	})

	t.Run("allowlist", func(t *testing.T) {
		acct := s.account(t, "default", 1_000_000)
		_, key := s.key(t, &accountingv1.CreateKeyRequest{AccountId: acct, AllowedModels: []string{"demo-free"}})
		x, resp := s.post(t, "/v1/chat/completions", paidChat, key)
		checkError(t, resp, testkit.WantError(403, "model_not_allowed", "permission_error").WithParam("model"), false)
		x.Close()
	})

	t.Run("suspension", func(t *testing.T) {
		acct := s.account(t, "default", 1_000_000)
		_, key := s.key(t, &accountingv1.CreateKeyRequest{AccountId: acct})
		// Warm the key cache first: the change stream must drop the entry.
		x, _ := s.post(t, "/v1/chat/completions", paidChat, key)
		x.Close()
		if _, err := s.admin.SetAccountSuspended(ctx, &accountingv1.SetAccountSuspendedRequest{AccountId: acct, Suspended: true}); err != nil {
			t.Fatal(err)
		}
		x, resp := s.post(t, "/v1/chat/completions", paidChat, key)
		checkError(t, resp, testkit.WantError(403, "account_suspended", "permission_error"), false)
		x.Close()
	})

	for _, tc := range []struct {
		name   string
		change func(t *testing.T, keyID string)
	}{
		{name: "disabled key", change: func(t *testing.T, id string) {
			if _, err := s.admin.SetKeyDisabled(ctx, &accountingv1.SetKeyDisabledRequest{KeyId: id, Disabled: true}); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "revoked key", change: func(t *testing.T, id string) {
			if _, err := s.admin.RevokeKey(ctx, &accountingv1.RevokeKeyRequest{KeyId: id}); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			acct := s.account(t, "default", 1_000_000)
			id, key := s.key(t, &accountingv1.CreateKeyRequest{AccountId: acct})
			x, resp := s.post(t, "/v1/chat/completions", paidChat, key)
			if resp.GetRequestBody() == nil {
				t.Fatalf("refused before the change: %v", resp)
			}
			x.Close()
			tc.change(t, id)
			// The cache entry is dropped by the change stream; and Reserve rechecks.
			x, resp = s.post(t, "/v1/chat/completions", paidChat, key)
			checkError(t, resp, testkit.WantError(401, "invalid_api_key", "invalid_request_error"), false)
			x.Close()
		})
	}

	t.Run("expired key", func(t *testing.T) {
		acct := s.account(t, "default", 1_000_000)
		_, key := s.key(t, &accountingv1.CreateKeyRequest{AccountId: acct, ExpiresAt: timestamppb.New(time.Now().Add(-time.Hour))})
		x, resp := s.post(t, "/v1/chat/completions", paidChat, key)
		checkError(t, resp, testkit.WantError(401, "invalid_api_key", "invalid_request_error"), false)
		x.Close()
	})

	t.Run("concurrency limit with Retry-After 5", func(t *testing.T) {
		acct := s.account(t, "tight", 1_000_000) // tight: 2 in flight
		_, key := s.key(t, &accountingv1.CreateKeyRequest{AccountId: acct})
		var open []*replay.Exchange
		for range 2 {
			x, resp := s.post(t, "/v1/chat/completions", paidChat, key)
			if resp.GetRequestBody() == nil {
				t.Fatalf("refused: %v", resp)
			}
			open = append(open, x)
		}
		x, resp := s.post(t, "/v1/chat/completions", paidChat, key)
		checkError(t, resp, testkit.WantError(429, "concurrency_limit_exceeded", "rate_limit_error").WithRetry("5"), false)
		x.Close()
		for _, x := range open {
			x.Close()
		}
		if _, r := s.balance(t, acct); r != 0 {
			t.Errorf("reserved %d after the streams ended", r)
		}
	})

	t.Run("rpm limit with Retry-After", func(t *testing.T) {
		acct := s.account(t, "tight", 1_000_000) // tight: 3 per minute
		_, key := s.key(t, &accountingv1.CreateKeyRequest{AccountId: acct})
		awayFromMinuteEnd(t)
		for range 3 {
			x, resp := s.post(t, "/v1/chat/completions", paidChat, key)
			if resp.GetRequestBody() == nil {
				t.Fatalf("refused: %v", resp)
			}
			x.Close()
		}
		x, resp := s.post(t, "/v1/chat/completions", paidChat, key)
		ir := resp.GetImmediateResponse()
		ra := testkit.MutationHeaders(t, ir.GetHeaders())["retry-after"]
		if ir.GetStatus().GetCode() != 429 || ra == "" || ra == "0" {
			t.Fatalf("4th request: %v", resp)
		}
		checkError(t, resp, testkit.WantError(429, "rate_limit_exceeded", "rate_limit_error").WithRetry(ra), false)
		x.Close()
	})

	t.Run("insufficient credits when in-flight holds use the balance", func(t *testing.T) {
		acct := s.account(t, "default", 10_000)
		_, key := s.key(t, &accountingv1.CreateKeyRequest{AccountId: acct})
		first, resp := s.post(t, "/v1/chat/completions", paidChat, key)
		if resp.GetRequestBody() == nil {
			t.Fatalf("first refused: %v", resp)
		}
		x, resp := s.post(t, "/v1/chat/completions", paidChat, key)
		checkError(t, resp, testkit.WantError(402, "insufficient_credits", "invalid_request_error"), false)
		x.Close()
		first.Close() // released: the second now fits
		x, resp = s.post(t, "/v1/chat/completions", paidChat, key)
		if resp.GetRequestBody() == nil {
			t.Fatalf("refused after the release: %v", resp)
		}
		x.Close()
	})

	t.Run("key daily limit", func(t *testing.T) {
		acct := s.account(t, "default", 1_000_000)
		limit := int64(5_000)
		_, key := s.key(t, &accountingv1.CreateKeyRequest{AccountId: acct, DailyLimitMicros: &limit})
		x, resp := s.post(t, "/v1/chat/completions", paidChat, key)
		ir := resp.GetImmediateResponse()
		ra := testkit.MutationHeaders(t, ir.GetHeaders())["retry-after"]
		if ra == "" {
			t.Fatalf("no retry-after: %v", resp)
		}
		checkError(t, resp, testkit.WantError(429, "key_limit_reached", "rate_limit_error").WithRetry(ra), false)
		x.Close()
	})

	t.Run("count_tokens is not reserved", func(t *testing.T) {
		acct := s.account(t, "tight", 1_000_000)
		_, key := s.key(t, &accountingv1.CreateKeyRequest{AccountId: acct})
		for range 5 { // more than tight's 3 per minute: nothing counts
			x, resp := s.post(t, "/v1/messages/count_tokens", `{"model":"demo-claude","messages":[{"role":"user","content":"hello world"}]}`, key)
			if ir := resp.GetImmediateResponse(); ir.GetStatus().GetCode() != 200 {
				t.Fatalf("count_tokens: %v", resp)
			}
			x.Close()
		}
	})
}

// awayFromMinuteEnd waits for the next minute when this one ends within 10 s: the rpm
// limit counts per calendar minute, so requests on both sides of a boundary would be
// counted in two windows.
func awayFromMinuteEnd(t *testing.T) {
	t.Helper()
	now := time.Now()
	if left := now.Truncate(time.Minute).Add(time.Minute).Sub(now); left < 10*time.Second {
		time.Sleep(left + 50*time.Millisecond)
	}
}
