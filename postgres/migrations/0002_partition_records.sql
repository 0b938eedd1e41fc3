-- 0002: records partitioned by range of expires_at, so that a sweep drops
-- a partition whose period has ended instead of deleting its rows.
--
-- A unique index of a partitioned table must hold the partition key, so
-- key is no longer unique by itself: the primary key is (key, expires_at),
-- and the store keeps one row per key by taking an advisory lock on the key
-- before any write that may add one (see sql.go).
--
-- The table of 0001 is renamed and kept locked against every other session
-- until this transaction ends: a claim waits instead of finding an empty
-- ledger. The store's code for this migration (migrate.go) then makes the
-- partitions the old rows need, copies the rows, and drops the old table,
-- in the same transaction.

LOCK TABLE records IN ACCESS EXCLUSIVE MODE;
ALTER TABLE records RENAME TO records_0001;
ALTER INDEX records_pkey RENAME TO records_0001_pkey;
ALTER INDEX records_expires_at RENAME TO records_0001_expires_at;
ALTER INDEX records_pending_ns RENAME TO records_0001_pending_ns;
ALTER INDEX records_pending RENAME TO records_0001_pending;

CREATE TABLE records (
    key         bytea    NOT NULL CHECK (length(key) = 16),
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
    seq_counter bigint   NOT NULL,
    PRIMARY KEY (key, expires_at)
) PARTITION BY RANGE (expires_at);

-- The same indexes as in 0001; each partition has its own, made with it
-- (partition.go, createPartition, must stay in step).
CREATE INDEX records_expires_at ON records (expires_at);
CREATE INDEX records_pending_ns ON records (namespace, lease_until, seq_node, seq_counter) WHERE state = 1;
CREATE INDEX records_pending ON records (lease_until, seq_node, seq_counter) WHERE state = 1;
