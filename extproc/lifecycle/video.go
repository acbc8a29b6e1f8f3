package lifecycle

import (
	"context"
	"errors"

	"github.com/llmgw/gateway/accounting/ledger"
	"github.com/llmgw/gateway/extproc/apierr"
	"github.com/llmgw/gateway/extproc/catalog"
	"github.com/llmgw/gateway/extproc/video"
	"go.uber.org/zap"
)

// videoTask answers or routes GET /v1/videos/{taskId} in the request-headers phase:
// the id's shape (invalid_task_id, before the key), the key, the account, then the task
// as accounting recorded it. A task unknown to accounting, or owned by another account
// (or, for a task created with an admin-created key, by another key), is
// task_not_found: the answer never tells which. A task at least VideoRetention old by
// accounting's clock is task_expired. A readable task is routed to its model's
// highest-priority channel open to the key's tier, unbilled; the upstream's answer comes
// back with the public model id.
func (r *Request) videoTask(ctx context.Context, id string) Action {
	if !video.ValidTaskID(id) {
		return r.fail(apierr.Param(apierr.InvalidTaskID, "task_id",
			"The task id must be 1 to 200 characters from letters, digits, '.', '-', '_' and ':'."))
	}
	if e := r.authenticate(ctx); e != nil {
		return r.fail(e)
	}
	g := r.grant
	if g.AccountSuspended {
		return r.fail(apiAccountSuspended())
	}
	t, err := r.svc.cfg.Ledger.GetVideoTask(ctx, id)
	if errors.Is(err, ledger.ErrNotFound) {
		return r.fail(taskNotFound())
	}
	if err != nil {
		return r.fail(r.ledgerError(err, "get_video_task"))
	}
	owner := t.AccountID == g.AccountID
	if t.AdminCreatedKey {
		owner = t.KeyID == g.KeyID
	}
	if !owner {
		return r.fail(taskNotFound())
	}
	if t.Age >= VideoRetention {
		return r.fail(apierr.New(apierr.TaskExpired, "The video task is older than 24 hours and is no longer tracked; submit the generation again."))
	}
	m, ok := r.svc.cfg.Catalog.Model(t.Model)
	if !ok || m.Kind != catalog.KindVideo {
		r.svc.cfg.Log.Warn("video task of a model no longer in the catalog", zap.String("model", t.Model))
		return r.fail(apierr.New(apierr.ModelNotAvailable, "The model of this video task is no longer available."))
	}
	r.model = m
	cands := m.Candidates(g.Tier)
	if len(cands) == 0 {
		return r.fail(apierr.New(apierr.ModelNotAvailable, "No route for the model '"+m.ID+"' is available to this key."))
	}
	// The task lives at the provider that accepted it; the highest-priority channel is
	// the stable choice (no weighted draw).
	r.channel, r.proxied = cands[0], true
	return Action{
		ClearRouteCache: true,
		RemoveHeaders:   []string{RoutingHeader, "x-api-key"},
		SetHeaders: []Header{
			{RoutingHeader, r.channel.Cluster},
			{"authorization", "Bearer " + r.channel.Credential()},
		},
	}
}

func taskNotFound() *apierr.Error {
	return apierr.New(apierr.TaskNotFound, "No video task with this id is available to this key.")
}
