package envoy_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/llmgw/gateway/accounting/client"
	"github.com/llmgw/gateway/accounting/server/servertest"
	"github.com/llmgw/gateway/extproc/internal/replay"
	"github.com/llmgw/gateway/extproc/ledgerclient"
	"github.com/llmgw/gateway/extproc/video"
	accountingv1 "github.com/llmgw/gateway/proto/accounting/v1"
)

// TestVideoRetentionThroughAccounting runs submission and reads against the real
// accounting gRPC service (its in-memory store) with a controlled clock: ownership and
// age come from accounting, not from extproc's clock.
func TestVideoRetentionThroughAccounting(t *testing.T) {
	var mu sync.Mutex
	now := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
	h, admin := throughAccounting(t, clock)
	ctx := context.Background()

	newKey := func(account string, adminCreated bool) string {
		k, err := admin.CreateKey(ctx, &accountingv1.CreateKeyRequest{AccountId: account, AdminCreated: adminCreated})
		if err != nil {
			t.Fatal(err)
		}
		return k.GetSecret()
	}
	newAccount := func() string {
		a, err := admin.CreateAccount(ctx, &accountingv1.CreateAccountRequest{})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := admin.TopUp(ctx, &accountingv1.TopUpRequest{AccountId: a.GetAccount().GetId(), AmountMicros: 10_000_000, IdempotencyKey: a.GetAccount().GetId()}); err != nil {
			t.Fatal(err)
		}
		return a.GetAccount().GetId()
	}
	acc1, acc2 := newAccount(), newAccount()
	k1, k1b, kAdm, k2 := newKey(acc1, false), newKey(acc1, false), newKey(acc1, true), newKey(acc2, false)

	submit := func(key, taskID string) string {
		t.Helper()
		x, _, resp := h.Post(t, "/v1/video/generations", []byte(`{"model":"demo-video","prompt":"a wave","duration":3}`), bearer(key)...)
		if resp.GetRequestBody() == nil {
			t.Fatalf("not admitted: %v", resp)
		}
		x.Send(replay.ResponseHeaders(200, "content-type", "application/json"))
		r := x.Send(replay.ResponseBody([]byte(`{"id":"`+taskID+`","model":"mock-video","status":"queued"}`), true))
		if r.GetResponseBody() == nil {
			t.Fatalf("submission answered %v", r)
		}
		x.Close()
		return gjson.GetBytes(r.GetResponseBody().GetResponse().GetBodyMutation().GetBody(), "id").Str
	}
	read := func(key, taskID string) string {
		t.Helper()
		x := h.Open(t)
		r := x.Send(replay.RequestHeaders(true, ":method", "GET", ":path", "/v1/videos/"+taskID, "authorization", "Bearer "+key))
		x.Close()
		if ir := r.GetImmediateResponse(); ir != nil {
			return strings.TrimPrefix(ir.GetDetails(), "extproc_")
		}
		return "routed"
	}
	acc1Task := submit(k1, "vid_acc1")
	admTask := submit(kAdm, "vid_admin")
	a, err := admin.GetAccount(ctx, &accountingv1.GetAccountRequest{AccountId: acc1})
	if err != nil {
		t.Fatal(err)
	}
	// Two tasks of 3 s at 100,000 per second, charged on acceptance.
	if got := a.GetAccount().GetBalanceMicros(); got != 10_000_000-600_000 {
		t.Errorf("balance %d", got)
	}

	checks := func(stage string, want map[[2]string]string) {
		t.Helper()
		for q, w := range want {
			if got := read(q[0], q[1]); got != w {
				t.Errorf("%s: key %s… reading %s = %s, want %s", stage, q[0][:8], q[1], got, w)
			}
		}
	}
	visibility := map[[2]string]string{
		{k1, acc1Task}: "routed", {k1b, acc1Task}: "routed", {k2, acc1Task}: "task_not_found",
		{kAdm, admTask}: "routed", {k1, admTask}: "task_not_found", {k2, admTask}: "task_not_found",
		{k1, "vid_never"}: "task_not_found",
	}
	checks("fresh", visibility)
	advance(24*time.Hour - time.Second)
	checks("just under 24 h", visibility)
	advance(time.Second)
	checks("24 h", map[[2]string]string{
		{k1, acc1Task}: "task_expired", {kAdm, admTask}: "task_expired",
		{k2, acc1Task}: "task_not_found", {k1, admTask}: "task_not_found",
	})
}

// throughAccounting is a replay harness whose extproc talks to the real accounting gRPC
// service (its in-memory store, on clock), and that service's admin client.
func throughAccounting(t *testing.T, clock func() time.Time) (*replay.Harness, accountingv1.AdminServiceClient) {
	t.Helper()
	mem := servertest.NewMemory()
	mem.Now = clock
	fx := servertest.Start(t, mem, servertest.Options{Now: clock})
	conn, err := client.Dial(context.Background(), fx.Addr, servertest.ServiceToken)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	lc := ledgerclient.New(accountingv1.NewLedgerServiceClient(conn), ledgerclient.Options{})
	return replay.Start(t, replay.Service(t, lc)), fx.Admin(t, servertest.AdminToken)
}

// TestVideoTaskIDCollision: a provider that reuses task ids (restarted on an existing
// database, or two channels counting from 1) hands out the same id twice. Both tasks
// are accepted, charged and readable: the client holds the gateway's ids, and a read is
// routed to the channel that accepted the task under the provider's id, its answer
// carrying the gateway's id.
func TestVideoTaskIDCollision(t *testing.T) {
	h, admin := throughAccounting(t, time.Now)
	ctx := context.Background()
	a, err := admin.CreateAccount(ctx, &accountingv1.CreateAccountRequest{})
	if err != nil {
		t.Fatal(err)
	}
	acct := a.GetAccount().GetId()
	if _, err := admin.TopUp(ctx, &accountingv1.TopUpRequest{AccountId: acct, AmountMicros: 10_000_000, IdempotencyKey: "t"}); err != nil {
		t.Fatal(err)
	}
	k, err := admin.CreateKey(ctx, &accountingv1.CreateKeyRequest{AccountId: acct})
	if err != nil {
		t.Fatal(err)
	}
	const upstream = `{"id":"vid_mock-1","object":"video.generation","model":"mock-video","status":"queued"}`
	var ids []string
	for i := range 2 {
		x, _, resp := h.Post(t, "/v1/video/generations", []byte(`{"model":"demo-video","prompt":"a wave","duration":3}`), bearer(k.GetSecret())...)
		if resp.GetRequestBody() == nil {
			t.Fatalf("submission %d not admitted: %v", i, resp)
		}
		x.Send(replay.ResponseHeaders(200, "content-type", "application/json"))
		r := x.Send(replay.ResponseBody([]byte(upstream), true))
		x.Close()
		if r.GetResponseBody() == nil {
			t.Fatalf("submission %d answered %v, want the accepted task", i, r)
		}
		ids = append(ids, gjson.GetBytes(r.GetResponseBody().GetResponse().GetBodyMutation().GetBody(), "id").Str)
	}
	if ids[0] == ids[1] || !video.ValidTaskID(ids[0]) || !video.ValidTaskID(ids[1]) {
		t.Fatalf("task ids %q", ids)
	}
	got, err := admin.GetAccount(ctx, &accountingv1.GetAccountRequest{AccountId: acct})
	if err != nil {
		t.Fatal(err)
	}
	if b := got.GetAccount().GetBalanceMicros(); b != 10_000_000-2*300_000 {
		t.Errorf("balance %d, want both tasks charged (3 s at 100,000 per second each)", b)
	}
	for _, id := range ids {
		x := h.Open(t)
		r := x.Send(replay.RequestHeaders(true, ":method", "GET", ":path", "/v1/videos/"+id, "authorization", "Bearer "+k.GetSecret()))
		hs := setHeaders(t, r.GetRequestHeaders().GetResponse())
		if hs[":path"] != "/v1/videos/vid_mock-1" || hs["x-gateway-upstream"] != "mock-providers" {
			t.Errorf("read of %s routed %v, want the provider's id on the accepting channel", id, hs)
		}
		x.Send(replay.ResponseHeaders(200, "content-type", "application/json"))
		r = x.Send(replay.ResponseBody([]byte(`{"id":"vid_mock-1","model":"mock-video","status":"completed"}`), true))
		x.Close()
		if body := r.GetResponseBody().GetResponse().GetBodyMutation().GetBody(); gjson.GetBytes(body, "id").Str != id {
			t.Errorf("read of %s answered %s, want the gateway's id", id, body)
		}
	}
}
