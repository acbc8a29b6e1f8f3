-- 0006_reservation_ids_by_time: a new reservation's id is a version 7 UUID (RFC 9562:
-- the Unix time in milliseconds in its first 48 bits, then random bits) instead of a
-- random (version 4) one.
--
-- Why: a B-tree takes a random key on a random leaf page, so with random ids every
-- reservation's insert and its settlement's new version (never HOT: 0004) touched a page
-- of the whole primary key, and so did every charge in ledger_entries' unique index on
-- reservation_id. Once those indexes outgrow the server's cache every insert reads a page
-- from disk, and after each checkpoint the first change of each page writes the whole
-- page to the write-ahead log again. Ids in time order go to the right edge of both
-- indexes: the pages a second of traffic touches are a few, and stay cached. The ids stay
-- unguessable enough for what they are (opaque handles passed between our own services,
-- never an authorization): 74 random bits per millisecond.
--
-- The group commit makes its ids in Go (accounting/store, newReservationID) the same way;
-- ledger_reserve, which names no id, takes the column's default. Existing rows keep their
-- ids; nothing reads an id's bits.
--
-- Only a function and a column default change: no data changes, no rewrite (ALTER
-- COLUMN … SET DEFAULT takes an ACCESS EXCLUSIVE lock on reservations for a catalog
-- update: milliseconds, once every transaction using the table has ended).

CREATE FUNCTION ledger_new_id() RETURNS uuid LANGUAGE sql VOLATILE PARALLEL SAFE AS $$
    -- A version 4 UUID's first 6 bytes replaced by the time in milliseconds, big-endian,
    -- and its version nibble (bits 52 to 55, 0100) turned to 0111; the variant stays.
    SELECT encode(
        set_bit(set_bit(
            overlay(uuid_send(gen_random_uuid())
                    PLACING substring(int8send(floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint) FROM 3)
                    FROM 1 FOR 6),
            52, 1), 53, 1),
        'hex')::uuid
$$;

ALTER TABLE reservations ALTER COLUMN id SET DEFAULT ledger_new_id();
