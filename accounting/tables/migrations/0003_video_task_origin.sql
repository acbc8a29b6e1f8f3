-- A video task's id is the gateway's own (it cannot collide across channels or across a
-- provider that reuses ids); the channel that accepted the task and the provider's id
-- for it are kept to route GET /videos/{id}. Tasks recorded before this migration have
-- an empty channel and a NULL upstream id: their provider id is task_id.
ALTER TABLE video_tasks
    ADD COLUMN channel text NOT NULL DEFAULT '',
    ADD COLUMN upstream_task_id text;
