-- 0024_webhook_retention: the indexes accounting's sweeper deletes old alerts along
-- (alerts.Webhooks.Prune, --webhook-retention): deliveries by when they were
-- delivered, events by age, and an event's deliveries (the check that none is left,
-- and the foreign key's when an event is deleted).

CREATE INDEX webhook_deliveries_delivered ON webhook_deliveries (delivered_at) WHERE delivered_at IS NOT NULL;
CREATE INDEX webhook_deliveries_event ON webhook_deliveries (event_id);
CREATE INDEX webhook_events_created ON webhook_events (created_at);
