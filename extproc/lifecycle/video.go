package lifecycle

import (
	"context"
	"errors"
	"net/http"

	"github.com/llmgw/gateway/accounting/ledger"
	"github.com/llmgw/gateway/extproc/apierr"
	"github.com/llmgw/gateway/extproc/catalog"
	"github.com/llmgw/gateway/extproc/credential"
	"github.com/llmgw/gateway/extproc/video"
	"go.uber.org/zap"
)

// videoTask answers or routes GET /v1/videos/{taskId} in the request-headers phase:
// the id's shape (invalid_task_id, before the key), the key, the account, then the task
// as accounting recorded it. A task unknown to accounting, or owned by another account
// (or, for a task created with an admin-created key, by another key), is
// task_not_found: the answer never tells which. A task at least VideoRetention old by
// accounting's clock is task_expired. A readable task is routed, unbilled, to the
// channel that accepted it (if still open to the key's tier) under the provider's id;
// the upstream's answer comes back with the public model id and the gateway's task id.
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
	m, ok := r.cat.Model(t.Model)
	if !ok || m.Kind != catalog.KindVideo {
		r.log().Warn("video task of a model no longer in the catalog", zap.String("model", t.Model))
		return r.fail(apierr.New(apierr.ModelNotAvailable, "The model of this video task is no longer available."))
	}
	r.model = m
	ch := taskChannel(m.Candidates(g.Tier), t.Origin.Channel)
	if ch == nil {
		return r.fail(apierr.New(apierr.ModelNotAvailable, "The channel that holds this video task is no longer available to this key."))
	}
	// The task lives at the channel that accepted it, under the provider's id; the
	// answer comes back with the gateway's id (settleBody). Envoy lets ext_proc set :path
	// under the default mutation rules: only host, :authority, :method and :scheme are
	// routing headers kept from it (Envoy's
	// source/extensions/filters/common/mutation_rules/mutation_rules.cc,
	// ExtraRoutingHeaders and Checker::check); the cleared route cache re-matches it.
	path := videoTaskPrefix + t.Origin.UpstreamTaskID
	cred, err := r.credentialHeaders(ch, http.MethodGet, r.upstreamHost(ch), path, nil)
	if err != nil {
		// Only the channel that accepted the task can answer for it: nothing goes upstream.
		return r.fail(upstreamError(apierr.ServiceUnavailable))
	}
	r.channel, r.proxied, r.taskID = ch, true, id
	return Action{
		ClearRouteCache: true,
		RemoveHeaders:   append([]string{RoutingHeader}, credential.HeaderNames...),
		SetHeaders: append([]Header{
			{":path", path},
			{RoutingHeader, r.channel.Cluster},
			identityEncoding,
		}, cred...),
	}
}

// taskChannel is the channel among cands that accepted a task: the one named channel,
// or, for a task recorded before gateway ids (no channel), the highest-priority one.
// nil when it is not (or no longer) open to the key.
func taskChannel(cands []*catalog.Channel, channel string) *catalog.Channel {
	for _, c := range cands {
		if channel == "" || c.Name == channel {
			return c
		}
	}
	return nil
}

func taskNotFound() *apierr.Error {
	return apierr.New(apierr.TaskNotFound, "No video task with this id is available to this key.")
}
