package lifecycle_test

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/llmgw/gateway/accounting/ledger"
	"github.com/llmgw/gateway/extproc/credential"
	"github.com/llmgw/gateway/extproc/internal/replay"
	"github.com/llmgw/gateway/extproc/lifecycle"
	"github.com/llmgw/gateway/extproc/video"
	"github.com/llmgw/gateway/internal/testkit"
)

// admit plays a POST of body to path with replay.KeyPaid, which must be admitted, and
// checks its routing: the demo cluster picked again (route cache cleared) with the
// channel's key, an identity answer asked of the upstream, no public model id sent.
func admit(t *testing.T, svc *lifecycle.Service, path, body string) *lifecycle.Request {
	t.Helper()
	r, a := post(t, svc, path, body, bearer(replay.KeyPaid)...)
	mustAdmit(t, a)
	hs := setHeaders(a)
	if hs["x-gateway-upstream"] != "mock-providers" || !a.ClearRouteCache || !strings.HasPrefix(hs["authorization"], "Bearer sk-mock-") {
		t.Errorf("routing headers %v", hs)
	}
	if hs["accept-encoding"] != "identity" {
		t.Errorf("accept-encoding %q, want identity asked of the upstream", hs["accept-encoding"])
	}
	if strings.Contains(string(a.Body), `"demo-`) {
		t.Errorf("public model sent upstream: %s", a.Body)
	}
	return r
}

// respond plays the upstream's JSON answer: its headers, whose reply must ask for the
// body buffered, then the whole body. It returns the reply to the body.
func respond(t *testing.T, r *lifecycle.Request, status int, body string) lifecycle.Action {
	t.Helper()
	ctx := context.Background()
	a := r.ResponseHeaders(ctx, status, []lifecycle.Header{{":status", strconv.Itoa(status)}, {"content-type", "application/json"}}, false)
	if a.ResponseBodyMode != lifecycle.ModeBuffered {
		t.Fatalf("mode %v", a.ResponseBodyMode)
	}
	return r.ResponseBody(ctx, []byte(body), true)
}

// replaced is the body a reply sends on instead of the message's ("" when it keeps it).
func replaced(a lifecycle.Action) string {
	if !a.ReplaceBody {
		return ""
	}
	return string(a.Body)
}

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
			f := replay.DemoLedger()
			f.RecordE = tt.recordE
			// More failures than fit in the reply's budget: the recording lands after it.
			f.RecordFailures = 8
			svc := replay.Service(t, f, withDNS)
			r := admit(t, svc, "/v1/video/generations", tt.body)
			a := respond(t, r, tt.status, tt.upstream)
			finish(t, svc, r)
			switch {
			case tt.recordE != nil && len(f.Recorded) < 2:
				t.Errorf("a failed recording was not retried: %v", f.Recorded)
			case tt.recordE == nil && (len(f.Recorded) == 1) != tt.recorded:
				t.Errorf("recorded %v", f.Recorded)
			}
			if tt.w != nil {
				checkRefused(t, a.Immediate, *tt.w, false)
				if len(f.Reserves) != 1 || f.Reserves[0].Amount != tt.hold || len(f.Commits) != 0 || len(f.Releases) != 1 {
					t.Errorf("reserves %+v commits %v releases %v", f.Reserves, f.Commits, f.Releases)
				}
				return
			}
			body := replaced(a)
			id := gjson.Get(body, "id").Str
			if !strings.HasPrefix(id, video.TaskIDPrefix) || !video.ValidTaskID(id) ||
				body != strings.Replace(strings.Replace(tt.upstream, "mock-video", "demo-video", 1), "vid_mock-1", id, 1) {
				t.Errorf("body %s, want the upstream's with the gateway's task id", body)
			}
			f.CheckCharged(t, tt.hold, tt.hold)
			want := ledger.TaskOrigin{Channel: "mock-demo-video", UpstreamTaskID: "vid_mock-1"}
			if f.Recorded[len(f.Recorded)-1] != id || f.Tasks[id].KeyID != "k-paid" || f.Tasks[id].Model != "demo-video" || f.Tasks[id].Origin != want {
				t.Errorf("task %+v", f.Tasks)
			}
		})
	}
}

// getTask plays the headers of GET /v1/videos/{id} with the key (none when empty) and a
// client's routing header, and returns the request. A routed read must go to the
// channel with its key and the task's id (the provider's, recorded as the same), the
// client's routing header and every header any credential sets removed (removes run
// before sets); an answer at the headers is the caller's.
func getTask(t *testing.T, svc *lifecycle.Service, id, key string) *lifecycle.Request {
	t.Helper()
	hs := []lifecycle.Header{{":method", "GET"}, {":path", "/v1/videos/" + id}, {"x-gateway-upstream", "evil"}}
	if key != "" {
		hs = append(hs, lifecycle.Header{Name: "authorization", Value: "Bearer " + key})
	}
	r := svc.NewRequest()
	a := r.RequestHeaders(context.Background(), hs, true)
	if a.Immediate != nil {
		return r
	}
	set := setHeaders(a)
	if set["x-gateway-upstream"] != "mock-providers" || set["authorization"] != "Bearer sk-mock-video" || !a.ClearRouteCache {
		t.Errorf("routing %v", set)
	}
	if set[":path"] != "/v1/videos/"+id {
		t.Errorf("read sent upstream as %q, want the provider's id (the task's own)", set[":path"])
	}
	if !slices.Equal(a.RemoveHeaders, append([]string{"x-gateway-upstream"}, credential.HeaderNames...)) {
		t.Errorf("removes %v", a.RemoveHeaders)
	}
	return r
}

func TestVideoTaskVisibility(t *testing.T) {
	const (
		keyOther = "gw-other0000000000000000000000000000000000000000"
		keyAdm   = "gw-admin0000000000000000000000000000000000000000"
		keyAdm2  = "gw-admin2000000000000000000000000000000000000000"
	)
	f := replay.DemoLedger()
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
		{name: "owner's key", id: "vid_a1", key: replay.KeyPaid},
		{name: "another key of the same account", id: "vid_a1", key: replay.KeyScoped},
		{name: "admin key of the same account reads an account task", id: "vid_a1", key: keyAdm},
		{name: "another account", id: "vid_a1", key: keyOther, w: notFound},
		{name: "admin-created key reads its own task", id: "vid_adm", key: keyAdm},
		{name: "admin task, other key of the same account", id: "vid_adm", key: replay.KeyPaid, w: notFound},
		{name: "admin task, other admin key", id: "vid_adm", key: keyAdm2, w: notFound},
		{name: "admin task, other account", id: "vid_adm", key: keyOther, w: notFound},
		{name: "unknown task", id: "vid_nope", key: replay.KeyPaid, w: notFound},
		{name: "just under 24 h", id: "vid_almost", key: replay.KeyPaid},
		{name: "24 h old", id: "vid_old", key: replay.KeyPaid, w: testkit.WantError(404, "task_expired", "invalid_request_error").Ptr()},
		{name: "expired task of another account is not found", id: "vid_old", key: keyOther, w: notFound},
		{name: "bad characters", id: "vid%2F..", key: replay.KeyPaid, w: testkit.WantError(400, "invalid_task_id", "invalid_request_error").WithParam("task_id").Ptr()},
		{name: "slash", id: "a/b", key: replay.KeyPaid, w: testkit.WantError(400, "invalid_task_id", "invalid_request_error").WithParam("task_id").Ptr()},
		{name: "too long", id: strings.Repeat("v", 201), key: replay.KeyPaid, w: testkit.WantError(400, "invalid_task_id", "invalid_request_error").WithParam("task_id").Ptr()},
		{name: "empty", id: "", key: replay.KeyPaid, w: testkit.WantError(400, "invalid_task_id", "invalid_request_error").WithParam("task_id").Ptr()},
		{name: "no key", id: "vid_a1", w: testkit.WantError(401, "invalid_api_key", "invalid_request_error").Ptr()},
		{name: "unknown key", id: "vid_a1", key: replay.KeyUnknown, w: testkit.WantError(401, "invalid_api_key", "invalid_request_error").Ptr()},
		{name: "suspended", id: "vid_a1", key: replay.KeySuspended, w: testkit.WantError(403, "account_suspended", "permission_error").Ptr()},
	}
	svc := replay.Service(t, f)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := svc.NewRequest()
			hs := []lifecycle.Header{{":method", "GET"}, {":path", "/v1/videos/" + tt.id}}
			if tt.key != "" {
				hs = append(hs, lifecycle.Header{Name: "authorization", Value: "Bearer " + tt.key})
			}
			a := r.RequestHeaders(context.Background(), hs, true)
			defer finish(t, svc, r)
			if tt.w != nil {
				checkRefused(t, a.Immediate, *tt.w, false)
				return
			}
			if a.Immediate != nil {
				t.Fatalf("not routed: %d %s", a.Immediate.Status, a.Immediate.Body)
			}
		})
	}
	if n, _, _ := f.Counts(); n != 0 {
		t.Errorf("task reads reserved %d times", n)
	}
	// 405 for another method.
	r := svc.NewRequest()
	a := r.RequestHeaders(context.Background(), postHeaders("/v1/videos/vid_a1", 2, bearer(replay.KeyPaid)...), false)
	checkRefused(t, a.Immediate, testkit.WantError(405, "method_not_allowed", "invalid_request_error"), false)
	finish(t, svc, r)
}

func TestVideoTaskRead(t *testing.T) {
	f := replay.DemoLedger()
	f.SetTask(lifecycle.VideoTask{VideoTask: ledger.VideoTask{TaskID: "vid_1", KeyID: "k-paid", AccountID: "a1", Model: "demo-video"}})
	svc := replay.Service(t, f)
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
			r := getTask(t, svc, "vid_1", replay.KeyPaid)
			a := respond(t, r, tt.status, tt.body)
			finish(t, svc, r)
			if tt.w != nil {
				checkRefused(t, a.Immediate, *tt.w, false)
				return
			}
			if got := replaced(a); got != strings.Replace(tt.body, "mock-video", "demo-video", 1) {
				t.Errorf("body %s", got)
			}
		})
	}
	if r, c, rel := f.Counts(); r+c+rel != 0 {
		t.Errorf("a task read touched the ledger: %d %d %d", r, c, rel)
	}
}
