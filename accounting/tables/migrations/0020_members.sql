-- 0020_members: who may do what in the admin API. One row is one role of one person
-- (their email, lower case) over everything (account_id NULL), an account (project_id
-- NULL) or a project subtree (project_id, with its account).
--
-- Members are admin data, not money: accounting's admin API writes this plain table
-- directly, outside the journal engine, and nothing here is derived from the journal.
-- No foreign key to accounts: that table is derived data the materializer rewrites.

CREATE TABLE IF NOT EXISTS members (
    id         uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    email      text NOT NULL CHECK (email <> '' AND email = lower(email)),
    role       text NOT NULL CHECK (role IN ('admin', 'operator', 'billing', 'viewer', 'member')),
    account_id uuid,
    project_id text,
    created_at timestamptz NOT NULL DEFAULT now(),
    CHECK (role <> 'member' OR project_id IS NOT NULL),
    CHECK (project_id IS NULL OR account_id IS NOT NULL)
);

-- One role per person and scope: adding it again finds the row.
CREATE UNIQUE INDEX IF NOT EXISTS members_one_role
    ON members (email, role, coalesce(account_id::text, ''), coalesce(project_id, ''));
CREATE INDEX IF NOT EXISTS members_by_account ON members (account_id);
