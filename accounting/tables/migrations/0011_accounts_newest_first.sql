---- tern: disable-tx ----
-- 0011_accounts_newest_first: the console's account list shows the newest accounts
-- first (store.ListAccounts), a page at a time; this index reads each page without
-- sorting the whole table. created_at never changes, so the account row's frequent
-- updates stay heap-only.
--
-- Built CONCURRENTLY, outside a transaction (the line above), as 0007: accounts are
-- reserved against while it is built. The DROP first makes a rerun after an
-- interrupted build start over instead of keeping an invalid index.

DROP INDEX CONCURRENTLY IF EXISTS accounts_newest_first;

CREATE INDEX CONCURRENTLY accounts_newest_first ON accounts (created_at DESC, id DESC);
