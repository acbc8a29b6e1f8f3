package envoy_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/llmgw/gateway/accounting/client"
	"github.com/llmgw/gateway/accounting/ledger"
	"github.com/llmgw/gateway/accounting/server/servertest"
	"github.com/llmgw/gateway/extproc/credential"
	"github.com/llmgw/gateway/extproc/internal/replay"
	"github.com/llmgw/gateway/extproc/ledgerclient"
	"github.com/llmgw/gateway/extproc/lifecycle"
	"github.com/llmgw/gateway/extproc/video"
	"github.com/llmgw/gateway/internal/testkit"
	accountingv1 "github.com/llmgw/gateway/proto/accounting/v1"
)

func TestVideoSubmission(t *testing.T) {
	const accepted = `{"id":"vid_mock-1","object":"video.generation","model":"mock-video","status":"queued","duration":4}`
	tests := []struct {
		name     string
		body     string
		status   int
		upstream string
		recordE  error
		hold     int64
		w        *testkit.APIError // the error answered instead of the task
		recorded bool
	}{
		// 4 s at 100,000 per second.
		{name: "accepted", body: `{"model":"demo-video","prompt":"a wave, 720p","duration":4,"resolution":"720p","webhook_url":"https://hooks.example.com/done"}`, status: 200, upstream: accepted, hold: 400000, recorded: true},
		// The model's default duration (5 s) when omitted.
		{name: "default duration", body: `{"model":"demo-video","prompt":"a wave"}`, status: 200, upstream: accepted, hold: 500000, recorded: true},
		{name: "no task id", body: `{"model":"demo-video","prompt":"a wave"}`, status: 200, upstream: `{"status":"queued"}`, hold: 500000, w: testkit.WantError(502, "upstream_error", "api_error").Ptr()},
		{name: "bad task id", body: `{"model":"demo-video","prompt":"a wave"}`, status: 200, upstream: `{"id":"../x"}`, hold: 500000, w: testkit.WantError(502, "upstream_error", "api_error").Ptr()},
		{name: "upstream refused", body: `{"model":"demo-video","prompt":"a wave"}`, status: 401, upstream: `{"error":{"message":"bad key"}}`, hold: 500000, w: testkit.WantError(503, "upstream_account_unavailable", "api_error").WithRetry("").Ptr()},
		// The provider accepted (and bills) the task: the client gets it and is charged;
		// recording goes on after the reply.
		{name: "accounting cannot record", body: `{"model":"demo-video","prompt":"a wave"}`, status: 200, upstream: accepted, recordE: errors.New("unavailable"), hold: 500000, recorded: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFake()
			f.RecordE = tt.recordE
			// More failures than fit in the reply's budget: the recording lands after it.
			f.RecordFailures = 8
			h := replay.Start(t, replay.Service(t, f, withDNS))
			x := admitPath(t, h, "/v1/video/generations", tt.body)
			r := x.Send(replay.ResponseHeaders(tt.status, "content-type", "application/json"))
			if r.GetModeOverride().GetResponseBodyMode().String() != "BUFFERED" {
				t.Fatalf("mode %v", r.GetModeOverride())
			}
			r = x.Send(replay.ResponseBody([]byte(tt.upstream), true))
			x.Close()
			switch {
			case tt.recordE != nil && len(f.Recorded) < 2:
				t.Errorf("a failed recording was not retried: %v", f.Recorded)
			case tt.recordE == nil && (len(f.Recorded) == 1) != tt.recorded:
				t.Errorf("recorded %v", f.Recorded)
			}
			if tt.w != nil {
				checkError(t, r, *tt.w, false)
				if len(f.Reserves) != 1 || f.Reserves[0].Amount != tt.hold || len(f.Commits) != 0 || len(f.Releases) != 1 {
					t.Errorf("reserves %+v commits %v releases %v", f.Reserves, f.Commits, f.Releases)
				}
				return
			}
			body := string(r.GetResponseBody().GetResponse().GetBodyMutation().GetBody())
			id := gjson.Get(body, "id").Str
			if !strings.HasPrefix(id, video.TaskIDPrefix) || !video.ValidTaskID(id) ||
				body != strings.Replace(strings.Replace(tt.upstream, "mock-video", "demo-video", 1), "vid_mock-1", id, 1) {
				t.Errorf("body %s, want the upstream's with the gateway's task id", body)
			}
			ledgerCheck(t, f, tt.hold, tt.hold)
			want := ledger.TaskOrigin{Channel: "mock-demo-video", UpstreamTaskID: "vid_mock-1"}
			if f.Recorded[len(f.Recorded)-1] != id || f.Tasks[id].KeyID != "k-paid" || f.Tasks[id].Model != "demo-video" || f.Tasks[id].Origin != want {
				t.Errorf("task %+v", f.Tasks)
			}
		})
	}
}

// getTask plays GET /v1/videos/{id} with the key and returns the headers reply.
func getTask(t *testing.T, h *replay.Harness, id, key string) (*replay.Exchange, *testkit.APIError) {
	t.Helper()
	x := h.Open(t)
	kv := []string{":method", "GET", ":path", "/v1/videos/" + id, "x-gateway-upstream", "evil"}
	if key != "" {
		kv = append(kv, "authorization", "Bearer "+key)
	}
	r := x.Send(replay.RequestHeaders(true, kv...))
	if r.GetImmediateResponse() != nil {
		return x, nil
	}
	c := r.GetRequestHeaders().GetResponse()
	hs := setHeaders(t, c)
	if hs["x-gateway-upstream"] != "mock-providers" || hs["authorization"] != "Bearer sk-mock-video" || !c.GetClearRouteCache() {
		t.Errorf("routing %v", hs)
	}
	// The client's authorization goes too, with every header any credential sets
	// (removes run before sets).
	if rm := c.GetHeaderMutation().GetRemoveHeaders(); !slices.Equal(rm, append([]string{"x-gateway-upstream"}, credential.HeaderNames...)) {
		t.Errorf("removes %v", rm)
	}
	return x, nil
}

func TestVideoTaskVisibility(t *testing.T) {
	const (
		keyOther = "gw-other0000000000000000000000000000000000000000"
		keyAdm   = "gw-admin0000000000000000000000000000000000000000"
		keyAdm2  = "gw-admin2000000000000000000000000000000000000000"
	)
	f := newFake()
	f.AddKey(keyOther, ledger.Grant{KeyID: "k-other", AccountID: "a9", Tier: "default", AccountToppedUp: true})
	f.AddKey(keyAdm, ledger.Grant{KeyID: "k-adm", AccountID: "a1", Tier: "default", AccountToppedUp: true, AdminCreated: true})
	f.AddKey(keyAdm2, ledger.Grant{KeyID: "k-adm2", AccountID: "a1", Tier: "default", AccountToppedUp: true, AdminCreated: true})
	task := func(id, key, account string, admin bool, age time.Duration) lifecycle.VideoTask {
		return lifecycle.VideoTask{VideoTask: ledger.VideoTask{TaskID: id, KeyID: key, AccountID: account, AdminCreatedKey: admin, Model: "demo-video"}, Age: age}
	}
	f.SetTask(task("vid_a1", "k-paid", "a1", false, time.Hour))
	f.SetTask(task("vid_adm", "k-adm", "a1", true, 0))
	f.SetTask(task("vid_old", "k-paid", "a1", false, 24*time.Hour))
	f.SetTask(task("vid_almost", "k-paid", "a1", false, 24*time.Hour-time.Second))
	notFound := testkit.WantError(404, "task_not_found", "invalid_request_error").Ptr()
	tests := []struct {
		name string
		id   string
		key  string
		w    *testkit.APIError // nil: routed upstream
	}{
		{name: "owner's key", id: "vid_a1", key: keyPaid},
		{name: "another key of the same account", id: "vid_a1", key: keyScoped},
		{name: "admin key of the same account reads an account task", id: "vid_a1", key: keyAdm},
		{name: "another account", id: "vid_a1", key: keyOther, w: notFound},
		{name: "admin-created key reads its own task", id: "vid_adm", key: keyAdm},
		{name: "admin task, other key of the same account", id: "vid_adm", key: keyPaid, w: notFound},
		{name: "admin task, other admin key", id: "vid_adm", key: keyAdm2, w: notFound},
		{name: "admin task, other account", id: "vid_adm", key: keyOther, w: notFound},
		{name: "unknown task", id: "vid_nope", key: keyPaid, w: notFound},
		{name: "just under 24 h", id: "vid_almost", key: keyPaid},
		{name: "24 h old", id: "vid_old", key: keyPaid, w: testkit.WantError(404, "task_expired", "invalid_request_error").Ptr()},
		{name: "expired task of another account is not found", id: "vid_old", key: keyOther, w: notFound},
		{name: "bad characters", id: "vid%2F..", key: keyPaid, w: testkit.WantError(400, "invalid_task_id", "invalid_request_error").WithParam("task_id").Ptr()},
		{name: "slash", id: "a/b", key: keyPaid, w: testkit.WantError(400, "invalid_task_id", "invalid_request_error").WithParam("task_id").Ptr()},
		{name: "too long", id: strings.Repeat("v", 201), key: keyPaid, w: testkit.WantError(400, "invalid_task_id", "invalid_request_error").WithParam("task_id").Ptr()},
		{name: "empty", id: "", key: keyPaid, w: testkit.WantError(400, "invalid_task_id", "invalid_request_error").WithParam("task_id").Ptr()},
		{name: "no key", id: "vid_a1", w: testkit.WantError(401, "invalid_api_key", "invalid_request_error").Ptr()},
		{name: "unknown key", id: "vid_a1", key: keyUnknown, w: testkit.WantError(401, "invalid_api_key", "invalid_request_error").Ptr()},
		{name: "suspended", id: "vid_a1", key: keySuspended, w: testkit.WantError(403, "account_suspended", "permission_error").Ptr()},
	}
	h := replay.Start(t, replay.Service(t, f))
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			x := h.Open(t)
			kv := []string{":method", "GET", ":path", "/v1/videos/" + tt.id}
			if tt.key != "" {
				kv = append(kv, "authorization", "Bearer "+tt.key)
			}
			r := x.Send(replay.RequestHeaders(true, kv...))
			if tt.w != nil {
				checkError(t, r, *tt.w, false)
				x.Close()
				return
			}
			if r.GetRequestHeaders() == nil {
				t.Fatalf("not routed: %v", r)
			}
			x.Close()
		})
	}
	if n, _, _ := f.Counts(); n != 0 {
		t.Errorf("task reads reserved %d times", n)
	}
	// 405 for another method.
	x := h.Open(t)
	checkError(t, x.Send(replay.PostHeaders("/v1/videos/vid_a1", 2, bearer(keyPaid)...)), testkit.WantError(405, "method_not_allowed", "invalid_request_error"), false)
	x.Close()
}

func TestVideoTaskRead(t *testing.T) {
	f := newFake()
	f.SetTask(lifecycle.VideoTask{VideoTask: ledger.VideoTask{TaskID: "vid_1", KeyID: "k-paid", AccountID: "a1", Model: "demo-video"}})
	h := replay.Start(t, replay.Service(t, f))
	tests := []struct {
		name   string
		status int
		body   string
		w      *testkit.APIError
	}{
		{name: "passed through with the public model", status: 200, body: `{"id":"vid_1","object":"video.generation","model":"mock-video","status":"completed","url":"https://videos.mock.invalid/vid_1.mp4"}`},
		{name: "upstream 404", status: 404, body: `{"error":{"message":"No video task"}}`, w: testkit.WantError(404, "task_not_found", "invalid_request_error").Ptr()},
		{name: "upstream 500", status: 500, body: `boom`, w: testkit.WantError(502, "upstream_error", "api_error").Ptr()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			x, _ := getTask(t, h, "vid_1", keyPaid)
			r := x.Send(replay.ResponseHeaders(tt.status, "content-type", "application/json"))
			if r.GetModeOverride().GetResponseBodyMode().String() != "BUFFERED" {
				t.Fatalf("mode %v", r.GetModeOverride())
			}
			r = x.Send(replay.ResponseBody([]byte(tt.body), true))
			x.Close()
			if tt.w != nil {
				checkError(t, r, *tt.w, false)
				return
			}
			if got := string(r.GetResponseBody().GetResponse().GetBodyMutation().GetBody()); got != strings.Replace(tt.body, "mock-video", "demo-video", 1) {
				t.Errorf("body %s", got)
			}
		})
	}
	if r, c, rel := f.Counts(); r+c+rel != 0 {
		t.Errorf("a task read touched the ledger: %d %d %d", r, c, rel)
	}
}

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
