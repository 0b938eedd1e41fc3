package postgres

import (
	"strings"

	"github.com/jackc/pgx/v5"
)

// recordCols are the columns of a record, in the order scanRecord reads them.
const recordCols = "key, namespace, raw_key, first_seen, place, fingerprint, state, result, expires_at, lease_until, seq_node, seq_counter"

// limitedCols are recordCols with a result longer than the limit {lim} (a
// positive bigint parameter; zero for none) left out as NULL, then the
// result's length: a long result never leaves the server.
const limitedCols = "key, namespace, raw_key, first_seen, place, fingerprint, state, " +
	"CASE WHEN {lim}::bigint > 0 AND octet_length(result) > {lim}::bigint THEN NULL ELSE result END, " +
	"expires_at, lease_until, seq_node, seq_counter, octet_length(result)::bigint"

// seqCols are recordCols without the result (NULL), then the result's
// length (NULL for none).
const seqCols = "key, namespace, raw_key, first_seen, place, fingerprint, state, NULL::bytea, " +
	"expires_at, lease_until, seq_node, seq_counter, octet_length(result)::bigint"

// queries are the statements of one store, with its schema's table names
// filled in. Each is prepared once per connection (pgx's statement cache).
type queries struct {
	claim, lockKey, lockKeys                          string
	get, getAny, getAnyLimit, complete, release       string
	listPending, listPendingAll, deleteExpired, purge string
	listSeq, listSeqDesc                              string
	reserveSeq, count, getCounter, durabilitySettings string
}

func newQueries(schema string) queries {
	t := func(name string) string { return pgx.Identifier{schema, name}.Sanitize() }
	r := strings.NewReplacer("{records}", t("records"), "{counters}", t("counters"), "{seqs}", t("seqs"), "{cols}", recordCols)
	return queries{
		// The claim runs after lockKey (or lockKeys) in one implicit
		// transaction: the advisory lock on the key, taken by a statement
		// of its own and held until the commit, makes every claim of one
		// key wait for the one before it to commit, and this statement's
		// snapshot, taken after the lock, sees that claim's row. So the
		// statement reads the key's row (cur; there is at most one, in
		// whichever partition) and either inserts the claim's record when
		// there is none, or replaces the row when it is free at $13
		// (expired, or a pending record whose lease ran out, when $14
		// allows a retake; UPDATE moves it to the partition of its new
		// expiry), or else returns the row. The partitions cannot keep one
		// row per key (their unique indexes hold expires_at too): the lock
		// does, as every write that adds a row is a claim. The update may
		// find the row gone (a sweep or a purge deleted it meanwhile); then
		// the statement returns the row as read, free, and Claim runs it
		// again. The first two branches only say that the claim was
		// written (their other columns are placeholders).
		claim: r.Replace(`WITH cur AS (
	SELECT {cols} FROM {records} WHERE key = $1
), upd AS (
	UPDATE {records} AS r SET
		namespace = $2, raw_key = $3, first_seen = $4, place = $5, fingerprint = $6, state = $7,
		result = $8, expires_at = $9, lease_until = $10, seq_node = $11, seq_counter = $12
	WHERE r.key = $1 AND r.expires_at = (SELECT expires_at FROM cur)
		AND (r.expires_at <= $13 OR ($14 AND r.state = 1 AND r.lease_until <= $13))
	RETURNING 1
), ins AS (
	INSERT INTO {records} ({cols})
	SELECT $1::bytea, $2::bytea, $3::bytea, $4::bigint, $5::bytea, $6::bytea, $7::smallint, $8::bytea,
		$9::bigint, $10::bigint, $11::bigint, $12::bigint
	WHERE NOT EXISTS (SELECT 1 FROM cur)
	RETURNING 1
)
SELECT true, NULL::bytea, NULL::bytea, NULL::bytea, NULL::bigint, NULL::bytea, NULL::bytea, 0::smallint,
	NULL::bytea, 0::bigint, NULL::bigint, 0::bigint, 0::bigint, NULL::bigint FROM (SELECT 1 FROM upd UNION ALL SELECT 1 FROM ins) w
UNION ALL
SELECT false, ` + strings.ReplaceAll(limitedCols, "{lim}", "$15") + ` FROM cur WHERE NOT EXISTS (SELECT 1 FROM upd)`),

		// The lock of one claim on its key (keyLock), or of a batch on
		// its keys, sorted and without repeats, so that batches take their
		// locks in one order and cannot deadlock.
		lockKey:  `SELECT pg_advisory_xact_lock($1)`,
		lockKeys: `SELECT pg_advisory_xact_lock(k) FROM unnest($1::bigint[]) AS k`,

		get:         r.Replace(`SELECT {cols} FROM {records} WHERE key = $1 AND expires_at > $2`),
		getAny:      r.Replace(`SELECT {cols} FROM {records} WHERE key = $1`),
		getAnyLimit: r.Replace(`SELECT ` + strings.ReplaceAll(limitedCols, "{lim}", "$2") + ` FROM {records} WHERE key = $1`),

		// Complete: the update, or else the live row as the snapshot saw
		// it, from which Complete tells which error applies. The update
		// notifies the ends channel $6 of the key (ends.go) in its own
		// transaction, so that the notice goes out when, and only if, the
		// completion commits; the outer query reads the notice's column,
		// so that it is computed.
		complete: r.Replace(`WITH upd AS (
	UPDATE {records} SET state = 2, result = $2, lease_until = NULL
	WHERE key = $1 AND expires_at > $3 AND state = 1 AND seq_node = $4 AND seq_counter = $5
	RETURNING {cols}, pg_notify($6, encode(key, 'hex')) IS NULL AS unsent
)
SELECT true, {cols} FROM upd WHERE NOT unsent
UNION ALL
SELECT false, {cols} FROM {records} WHERE key = $1 AND expires_at > $3 AND NOT EXISTS (SELECT 1 FROM upd)`),

		// Release: the delete, notifying the ends channel $5 as complete
		// does, or else the live row's state and seq.
		release: r.Replace(`WITH del AS (
	DELETE FROM {records}
	WHERE key = $1 AND expires_at > $2 AND state = 1 AND seq_node = $3 AND seq_counter = $4
	RETURNING pg_notify($5, encode(key, 'hex')) IS NULL AS unsent
)
SELECT true, 0::smallint, 0::bigint, 0::bigint FROM del WHERE NOT unsent
UNION ALL
SELECT false, state, seq_node, seq_counter FROM {records}
WHERE key = $1 AND expires_at > $2 AND NOT EXISTS (SELECT 1 FROM del)`),

		// Both walk a partial index of pending records in lease order.
		listPending: r.Replace(`SELECT {cols} FROM {records}
WHERE state = 1 AND namespace = $1 AND lease_until <= $2 AND expires_at > $2
ORDER BY lease_until, seq_node, seq_counter LIMIT $3`),
		// Both walk the index by seq of each partition, merged (Merge
		// Append), reading the records they return and those in range that
		// expired but are not swept yet. The result is left on the server:
		// only its length comes back.
		listSeq: r.Replace(`SELECT ` + seqCols + ` FROM {records}
WHERE seq_node = $1 AND seq_counter BETWEEN $2 AND $3 AND expires_at > $4
ORDER BY seq_counter LIMIT $5`),
		listSeqDesc: r.Replace(`SELECT ` + seqCols + ` FROM {records}
WHERE seq_node = $1 AND seq_counter BETWEEN $2 AND $3 AND expires_at > $4
ORDER BY seq_counter DESC LIMIT $5`),
		listPendingAll: r.Replace(`SELECT {cols} FROM {records}
WHERE state = 1 AND lease_until <= $1 AND expires_at > $1
ORDER BY lease_until, seq_node, seq_counter LIMIT $2`),

		// The sweep walks the expiry indexes from their start, records
		// first, then counters with what is left of the limit, and deletes
		// the keys found by primary key: the array is computed first, so the
		// delete looks up those keys and reads nothing else (a join on the
		// subquery may instead scan every expired row). The outer
		// "expires_at <= $1" is checked again on the row's newest version
		// (a row retaken since the subquery's snapshot has a new expiry and
		// is kept).
		deleteExpired: r.Replace(`WITH r AS (
	DELETE FROM {records}
	WHERE key = ANY (ARRAY (SELECT key FROM {records} WHERE expires_at <= $1 ORDER BY expires_at LIMIT $2))
		AND expires_at <= $1
	RETURNING 1
), c AS (
	DELETE FROM {counters}
	WHERE key = ANY (ARRAY (SELECT key FROM {counters} WHERE expires_at <= $1 ORDER BY expires_at
		LIMIT greatest($2 - (SELECT count(*) FROM r), 0)))
		AND expires_at <= $1
	RETURNING 1
)
SELECT (SELECT count(*) FROM r) + (SELECT count(*) FROM c)`),

		// Purge walks one page of the primary key in order, at most $5
		// rows from just after $2 up to $3 (included), reading each row's
		// namespace, and deletes by primary key the first $4 rows of
		// namespace $1 among them (if they still belong to it). It
		// returns how many rows the page held and its last key, how many
		// rows of $1 it found (at most $4) and the last of their keys, and
		// how many were deleted.
		purge: r.Replace(`WITH w AS (
	SELECT key, namespace = $1 AS hit FROM {records} WHERE key > $2 AND key <= $3 ORDER BY key LIMIT $5
), m AS (
	SELECT key FROM w WHERE hit ORDER BY key LIMIT $4
), d AS (
	DELETE FROM {records} WHERE key = ANY (ARRAY (SELECT key FROM m)) AND namespace = $1
	RETURNING 1
)
SELECT (SELECT count(*) FROM w), (SELECT key FROM w ORDER BY key DESC LIMIT 1),
	(SELECT count(*) FROM m), (SELECT key FROM m ORDER BY key DESC LIMIT 1), (SELECT count(*) FROM d)`),

		reserveSeq: r.Replace(`INSERT INTO {seqs} AS s (node, last) VALUES ($1, $2)
ON CONFLICT (node) DO UPDATE SET last = s.last + EXCLUDED.last
RETURNING s.last - $2 + 1`),

		// The bounded counter: one statement, as the claim. A counter that
		// expired at $4 starts again from one with the new expiry. $3 is the
		// limit: at it, nothing is written, and the second branch returns
		// the counter as the snapshot saw it.
		count: r.Replace(`WITH up AS (
	INSERT INTO {counters} AS c (key, value, expires_at)
	SELECT $1::bytea, 1, $2::bigint WHERE $3::bigint > 0
	ON CONFLICT (key) DO UPDATE SET
		value = CASE WHEN c.expires_at <= $4 THEN 1 ELSE c.value + 1 END,
		expires_at = CASE WHEN c.expires_at <= $4 THEN EXCLUDED.expires_at ELSE c.expires_at END
	WHERE c.expires_at <= $4 OR c.value < $3
	RETURNING c.value, c.expires_at
)
SELECT true, value, expires_at FROM up
UNION ALL
SELECT false, value, expires_at FROM {counters} WHERE key = $1 AND NOT EXISTS (SELECT 1 FROM up)`),
		getCounter: r.Replace(`SELECT value, expires_at FROM {counters} WHERE key = $1`),

		durabilitySettings: `SELECT version(),
	coalesce(current_setting('synchronous_commit', true), ''),
	coalesce(current_setting('fsync', true), ''),
	coalesce(current_setting('full_page_writes', true), ''),
	coalesce(current_setting('synchronous_standby_names', true), '')`,
	}
}
