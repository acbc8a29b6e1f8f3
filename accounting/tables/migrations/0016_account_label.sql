-- 0016_account_label: an account's label, the operator's name for it ("Acme research"),
-- set when the account is created or later and searched in the console's account list
-- (a part of it, ignoring case). Empty: no label.
--
-- The journal engine carries it in its events (AccountCreated, AccountLabeled) and the
-- materializer writes it here; the column is data derived from the journal like the
-- rest of the row. A constant default adds the column without rewriting the table.

ALTER TABLE accounts ADD COLUMN IF NOT EXISTS label text NOT NULL DEFAULT '';
