-- 0017_drop_store_engine: the store engine's decision functions go (issue 47).
--
-- The journal engine (accounting/engine) decides every hold, charge and top-up in
-- memory and its materializer writes the tables; nothing calls these PL/pgSQL
-- functions since the store engine was deleted. The last commit that has both
-- engines, 60f75ee, holds their definitions (0001, 0008, 0012) for whoever must go back.
--
-- What stays: the triggers the tables still rely on (the ledger's append-only guard,
-- the usage rollup and its ledger_component_units, the change feed's notifications)
-- and ledger_new_id, the default of reservations.id. Dropping a function that no
-- statement in flight uses takes only its own catalog rows: nothing waits.
DROP FUNCTION IF EXISTS ledger_reserve(text, uuid, text, bigint, smallint, interval, timestamptz);
DROP FUNCTION IF EXISTS ledger_commit(uuid, bigint, bigint, bigint, jsonb, text, text, timestamptz);
DROP FUNCTION IF EXISTS ledger_commit(uuid, bigint, bigint, bigint, jsonb, text, text, timestamptz, jsonb, text);
DROP FUNCTION IF EXISTS ledger_release(uuid, text, timestamptz);
DROP FUNCTION IF EXISTS ledger_expire_due(integer, timestamptz);
DROP FUNCTION IF EXISTS ledger_top_up(uuid, bigint, text, timestamptz);
DROP FUNCTION IF EXISTS ledger_settle_windows(uuid, timestamptz, bigint, bigint);
