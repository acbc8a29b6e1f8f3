package store

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"

	"github.com/llmgw/gateway/accounting/ledger"
)

const videoColumns = `task_id, account_id::text, key_id::text, admin_created_key, model, created_at,
	channel, coalesce(upstream_task_id, task_id)`

func scanVideoTask(row pgx.Row) (ledger.VideoTask, error) {
	var v ledger.VideoTask
	err := row.Scan(&v.TaskID, &v.AccountID, &v.KeyID, &v.AdminCreatedKey, &v.Model, &v.CreatedAt,
		&v.Origin.Channel, &v.Origin.UpstreamTaskID)
	v.CreatedAt = v.CreatedAt.UTC()
	return v, err
}

// RecordVideoTask records that keyID's account submitted taskID (the gateway's id), with
// the key's admin_created flag as of now, and where the task lives (origin; an empty
// UpstreamTaskID means taskID). An unknown key is ErrNotFound; a task id already
// recorded is refused with ReasonAlreadyExists.
func (s *Store) RecordVideoTask(ctx context.Context, taskID, keyID, model string, origin ledger.TaskOrigin) (ledger.VideoTask, error) {
	if taskID == "" {
		return ledger.VideoTask{}, ledger.Refuse(ledger.ReasonInvalidArgument, "a video task needs an id")
	}
	if !validID(keyID) {
		return ledger.VideoTask{}, ledger.ErrNotFound
	}
	// No row back: either the key is unknown or the task id was taken (ON CONFLICT).
	v, err := scanVideoTask(s.pool.QueryRow(ctx, `
		INSERT INTO video_tasks (task_id, account_id, key_id, admin_created_key, model, created_at,
			channel, upstream_task_id)
		SELECT $1, k.account_id, k.id, k.admin_created, $3, coalesce($4::timestamptz, now()), $5, nullif($6, '')
		FROM api_keys k WHERE k.id = $2
		ON CONFLICT (task_id) DO NOTHING
		RETURNING `+videoColumns, taskID, keyID, model, s.now(), origin.Channel, origin.UpstreamTaskID))
	if errors.Is(err, pgx.ErrNoRows) {
		var keyExists bool
		if err := s.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM api_keys WHERE id = $1)`, keyID).Scan(&keyExists); err != nil {
			return ledger.VideoTask{}, dbError("record video task", err)
		}
		if !keyExists {
			return ledger.VideoTask{}, ledger.ErrNotFound
		}
		return ledger.VideoTask{}, ledger.Refuse(ledger.ReasonAlreadyExists, "the video task is already recorded")
	}
	if err != nil {
		return ledger.VideoTask{}, dbError("record video task", err)
	}
	return v, nil
}

// GetVideoTask returns who submitted a video task; an unknown id is ErrNotFound.
func (s *Store) GetVideoTask(ctx context.Context, taskID string) (ledger.VideoTask, error) {
	v, err := scanVideoTask(s.pool.QueryRow(ctx, `SELECT `+videoColumns+` FROM video_tasks WHERE task_id = $1`, taskID))
	if err != nil {
		return ledger.VideoTask{}, dbError("get video task", err)
	}
	return v, nil
}
