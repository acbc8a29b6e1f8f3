package envoy_test

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/grpc"

	"github.com/llmgw/gateway/accounting/client"
	"github.com/llmgw/gateway/accounting/engine/machine"
	"github.com/llmgw/gateway/accounting/ledger"
	"github.com/llmgw/gateway/accounting/server/servertest"
	"github.com/llmgw/gateway/extproc/internal/replay"
	"github.com/llmgw/gateway/extproc/ledgerclient"
	"github.com/llmgw/gateway/internal/testkit"
	accountingv1 "github.com/llmgw/gateway/proto/accounting/v1"
)

// projectStack is extproc's replay harness on the accounting service over the
// in-memory ledger, whose decisions are the ledger's state machine's; projects and a
// key's rates are set up through the machine (servertest.Memory.Decide).
type projectStack struct {
	mem   *servertest.Memory
	h     *replay.Harness
	admin accountingv1.AdminServiceClient
	acct  string
	// reserves counts the Reserve and Apply calls accounting served.
	reserves atomic.Int64
}

func startProjects(t *testing.T) *projectStack {
	t.Helper()
	s := &projectStack{mem: servertest.NewMemory()}
	count := func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		if strings.HasSuffix(info.FullMethod, "/Reserve") || strings.HasSuffix(info.FullMethod, "/Apply") {
			s.reserves.Add(1)
		}
		return handler(ctx, req)
	}
	fx := servertest.Start(t, s.mem, servertest.Options{ServerOptions: []grpc.ServerOption{grpc.ChainUnaryInterceptor(count)}})
	conn, err := client.Dial(context.Background(), fx.Addr, servertest.ServiceToken)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	lc := ledgerclient.New(accountingv1.NewLedgerServiceClient(conn), ledgerclient.Options{})
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go lc.Watch(ctx)
	testkit.WaitFor(t, "the ledger client to connect", lc.Connected)
	s.h, s.admin = replay.Start(t, replay.Service(t, lc)), fx.Admin(t, servertest.AdminToken)
	a, err := s.admin.CreateAccount(ctx, &accountingv1.CreateAccountRequest{})
	if err != nil {
		t.Fatal(err)
	}
	s.acct = a.GetAccount().GetId()
	if _, err := s.admin.TopUp(ctx, &accountingv1.TopUpRequest{AccountId: s.acct, AmountMicros: 10_000_000}); err != nil {
		t.Fatal(err)
	}
	return s
}

func (s *projectStack) decide(t *testing.T, build func(at time.Time) machine.Command) {
	t.Helper()
	if _, err := s.mem.Decide(build); err != nil {
		t.Fatal(err)
	}
}

// project creates a top-level project of the account.
func (s *projectStack) project(t *testing.T, id string, edit func(*ledger.NewProject)) {
	t.Helper()
	np := ledger.NewProject{AccountID: s.acct, Name: "team " + id}
	edit(&np)
	s.decide(t, func(at time.Time) machine.Command { return machine.CreateProject{ID: id, Project: np, At: at} })
}

// key creates a key of the account in project, with its own tpm (nil: none); it
// returns the key's secret.
func (s *projectStack) key(t *testing.T, project string, tpm *int64) string {
	t.Helper()
	k, err := s.admin.CreateKey(context.Background(), &accountingv1.CreateKeyRequest{AccountId: s.acct})
	if err != nil {
		t.Fatal(err)
	}
	s.decide(t, func(at time.Time) machine.Command {
		return machine.PlaceKey{Placement: ledger.KeyPlacement{KeyID: k.GetKey().GetId(), ProjectID: ledger.To(project),
			TPM: ledger.To(tpm)}, At: at}
	})
	return k.GetSecret()
}

func (s *projectStack) reserved(t *testing.T) int64 {
	t.Helper()
	a, err := s.admin.GetAccount(context.Background(), &accountingv1.GetAccountRequest{AccountId: s.acct})
	if err != nil {
		t.Fatal(err)
	}
	return a.GetAccount().GetReservedMicros()
}

func (s *projectStack) post(t *testing.T, path, body, key string) (*replay.Exchange, *extprocv3.ProcessingResponse) {
	t.Helper()
	x, hdr, resp := s.h.Post(t, path, []byte(body), "x-api-key", key)
	if resp == nil {
		resp = hdr
	}
	return x, resp
}

// wantMessage asserts an immediate answer's error message contains each part.
func wantMessage(t *testing.T, resp *extprocv3.ProcessingResponse, parts ...string) {
	t.Helper()
	var env testkit.ErrorEnvelope
	if err := json.Unmarshal(resp.GetImmediateResponse().GetBody(), &env); err != nil {
		t.Fatal(err)
	}
	for _, p := range parts {
		if !strings.Contains(env.Error.Message, p) {
			t.Errorf("message %q does not say %q", env.Error.Message, p)
		}
	}
}

// TestProjectsOnTheRequestPath: a key in a project is held to the project's allowlist
// before anything is reserved (the models list shows only what it allows), to its
// spend windows, and to its tokens per minute, which the request's token bound takes;
// a request larger than a tpm is refused without Retry-After.
func TestProjectsOnTheRequestPath(t *testing.T) {
	s := startProjects(t)
	s.project(t, "proj_web", func(np *ledger.NewProject) {
		np.Models, np.TPM = []string{"demo-chat", "demo-free", "demo-embed"}, ptr(int64(6000))
	})
	s.project(t, "proj_cheap", func(np *ledger.NewProject) { np.DailyLimit = ptr(ledger.Micros(1000)) })
	web := s.key(t, "proj_web", nil)

	t.Run("models list", func(t *testing.T) {
		x := s.h.Open(t)
		resp := x.Send(replay.RequestHeaders(true, ":method", "GET", ":path", "/v1/models", "x-api-key", web))
		x.Close()
		var body struct {
			Data []struct{ ID string } `json:"data"`
		}
		if err := json.Unmarshal(resp.GetImmediateResponse().GetBody(), &body); err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, d := range body.Data {
			ids = append(ids, d.ID)
		}
		slices.Sort(ids)
		if want := []string{"demo-chat", "demo-embed", "demo-free"}; !slices.Equal(ids, want) {
			t.Errorf("models %v, want %v", ids, want)
		}
	})

	t.Run("allowlist before the reserve", func(t *testing.T) {
		x, resp := s.post(t, "/v1/messages", `{"model":"demo-claude","max_tokens":10,"messages":[{"role":"user","content":"hi"}]}`, web)
		checkError(t, resp, testkit.WantError(403, "model_not_allowed", "permission_error"), true)
		wantMessage(t, resp, "project", "demo-claude")
		x.Close()
		if n := s.reserves.Load(); n != 0 {
			t.Errorf("%d reserve calls", n)
		}
	})

	t.Run("tpm", func(t *testing.T) {
		// A token bound of 73 + 4000 fits the project's 6000 tokens once.
		const big = `{"model":"demo-free","max_tokens":4000,"messages":[{"role":"user","content":"hi"}]}`
		first, resp := s.post(t, "/v1/chat/completions", big, web)
		if resp.GetRequestBody() == nil {
			t.Fatalf("refused: %v", resp)
		}
		x, resp := s.post(t, "/v1/chat/completions", big, web)
		ir := resp.GetImmediateResponse()
		checkError(t, resp, testkit.WantError(429, "rate_limit_exceeded", "rate_limit_error").
			WithRetry(testkit.MutationHeaders(t, ir.GetHeaders())["retry-after"]), false)
		if ra := testkit.MutationHeaders(t, ir.GetHeaders())["retry-after"]; ra == "" || ra == "0" {
			t.Errorf("retry-after %q", ra)
		}
		wantMessage(t, resp, "tokens-per-minute limit of project proj_web")
		x.Close()
		first.Close()
		s.h.WaitSettled(t)
		// The release gave the whole bound back.
		x, resp = s.post(t, "/v1/chat/completions", big, web)
		if resp.GetRequestBody() == nil {
			t.Fatalf("refused after the release: %v", resp)
		}
		x.Close()
	})

	t.Run("larger than the key's tpm", func(t *testing.T) {
		small := s.key(t, "proj_web", ptr(int64(100)))
		x, resp := s.post(t, "/v1/embeddings", `{"model":"demo-embed","input":"`+strings.Repeat("hello ", 40)+`"}`, small)
		checkError(t, resp, testkit.WantError(429, "rate_limit_exceeded", "rate_limit_error").WithRetry(""), false)
		wantMessage(t, resp, "larger than the tokens-per-minute limit of the key")
		x.Close()
	})

	t.Run("project spend", func(t *testing.T) {
		cheap := s.key(t, "proj_cheap", nil)
		x, resp := s.post(t, "/v1/messages", `{"model":"demo-claude","max_tokens":1000,"messages":[{"role":"user","content":"hi"}]}`, cheap)
		ir := resp.GetImmediateResponse()
		ra := testkit.MutationHeaders(t, ir.GetHeaders())["retry-after"]
		checkError(t, resp, testkit.WantError(429, "key_limit_reached", "rate_limit_error").WithRetry(ra), true)
		if ra == "" || ra == "0" {
			t.Errorf("retry-after %q, want the day's end", ra)
		}
		wantMessage(t, resp, "daily spend limit", "project proj_cheap")
		x.Close()
		if r := s.reserved(t); r != 0 {
			t.Errorf("reserved %d", r)
		}
	})
}

func ptr[T any](v T) *T { return &v }
