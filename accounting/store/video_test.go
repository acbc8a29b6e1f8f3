package store_test

import (
	"context"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/llmgw/gateway/accounting/ledger"
)

func TestVideoTasks(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 4)
	ctx := context.Background()
	a := f.account(t, "default", 0)
	k, _ := f.key(t, a.ID, func(nk *ledger.NewKey) { nk.AdminCreated = true })

	got, err := f.s.RecordVideoTask(ctx, "video_123", k.ID, "demo-video", ledger.TaskOrigin{})
	if err != nil {
		t.Fatal(err)
	}
	want := ledger.VideoTask{TaskID: "video_123", AccountID: a.ID, KeyID: k.ID, AdminCreatedKey: true, Model: "demo-video", CreatedAt: t0,
		Origin: ledger.TaskOrigin{UpstreamTaskID: "video_123"}} // no origin given: the provider id is the task id
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("RecordVideoTask (-want +got):\n%s", diff)
	}
	if got, err := f.s.GetVideoTask(ctx, "video_123"); err != nil || got != want {
		t.Errorf("GetVideoTask = %+v, %v; want %+v", got, err, want)
	}

	tests := []struct {
		name    string
		call    func() error
		wantErr error
	}{
		{"duplicate task", func() error {
			return errOf(f.s.RecordVideoTask(ctx, "video_123", k.ID, "demo-video", ledger.TaskOrigin{}))
		},
			&ledger.Refusal{Reason: ledger.ReasonAlreadyExists}},
		{"unknown key", func() error {
			return errOf(f.s.RecordVideoTask(ctx, "video_456", "00000000-0000-0000-0000-000000000000", "demo-video", ledger.TaskOrigin{}))
		}, ledger.ErrNotFound},
		{"empty task id", func() error { return errOf(f.s.RecordVideoTask(ctx, "", k.ID, "demo-video", ledger.TaskOrigin{})) },
			&ledger.Refusal{Reason: ledger.ReasonInvalidArgument}},
		{"unknown task", func() error { return errOf(f.s.GetVideoTask(ctx, "video_999")) }, ledger.ErrNotFound},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.call(); !errors.Is(err, tt.wantErr) {
				t.Errorf("error = %v, want %v", err, tt.wantErr)
			}
		})
	}
}

// TestVideoTaskOrigins: two channels (or one provider after a restart) may hand out the
// same task id; the gateway's own ids keep both tasks, each with its channel and the
// provider's id.
func TestVideoTaskOrigins(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 4)
	ctx := context.Background()
	a := f.account(t, "default", 0)
	k, _ := f.key(t, a.ID, nil)
	origins := map[string]ledger.TaskOrigin{
		"vtask-1": {Channel: "video-a", UpstreamTaskID: "vid_mock-1"},
		"vtask-2": {Channel: "video-b", UpstreamTaskID: "vid_mock-1"},
	}
	for id, o := range origins {
		if _, err := f.s.RecordVideoTask(ctx, id, k.ID, "demo-video", o); err != nil {
			t.Fatalf("record %s: %v", id, err)
		}
	}
	for id, o := range origins {
		got, err := f.s.GetVideoTask(ctx, id)
		if err != nil || got.Origin != o || got.TaskID != id {
			t.Errorf("GetVideoTask(%s) = %+v, %v; want origin %+v", id, got, err, o)
		}
	}
}
