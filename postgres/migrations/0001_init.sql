-- 0001: records, counters and seq reservations.
--
-- Migrations run inside one transaction with search_path set to the store's
-- schema, so names here are unqualified. Times are int8 nanoseconds since
-- the Unix epoch (timestamptz keeps only microseconds; the ledger's expiry
-- boundary is exact to the nanosecond). Text that comes from clients
-- (namespace, raw key, place) is bytea, so any bytes round-trip exactly.

CREATE TABLE records (
    key         bytea    PRIMARY KEY CHECK (length(key) = 16),
    namespace   bytea    NOT NULL,
    raw_key     bytea    NOT NULL DEFAULT '',
    first_seen  bigint,
    place       bytea    NOT NULL DEFAULT '',
    fingerprint bytea,
    state       smallint NOT NULL CHECK (state IN (1, 2)),
    result      bytea,
    expires_at  bigint   NOT NULL,
    lease_until bigint,
    seq_node    bigint   NOT NULL,
    seq_counter bigint   NOT NULL
);

-- DeleteExpired walks this index from its start: a sweep costs what it
-- removes, not what the table holds.
CREATE INDEX records_expires_at ON records (expires_at);

-- ListPending: pending records only (state 1), oldest lease first, for one
-- namespace or for all.
CREATE INDEX records_pending_ns ON records (namespace, lease_until, seq_node, seq_counter) WHERE state = 1;
CREATE INDEX records_pending ON records (lease_until, seq_node, seq_counter) WHERE state = 1;

CREATE TABLE counters (
    key        bytea  PRIMARY KEY CHECK (length(key) = 16),
    value      bigint NOT NULL,
    expires_at bigint NOT NULL
);
CREATE INDEX counters_expires_at ON counters (expires_at);

-- The last seq counter reserved for each node.
CREATE TABLE seqs (
    node bigint PRIMARY KEY,
    last bigint NOT NULL
);
