#!/usr/bin/env bash
# bench/postgres.sh: spent's PostgreSQL store against the bare engine, on one
# throwaway cluster with durable settings (fsync=on, synchronous_commit=on),
# same run, same server:
#
#   1. pgbench, prepared mode, N clients on 2 threads, for DURATION seconds,
#      running the bare INSERT ... ON CONFLICT DO NOTHING RETURNING of a row
#      like spent's (same columns and sizes, random 16-byte keys, primary key
#      only);
#   2. the Go benchmarks of package postgres (BenchmarkPostgres: Bare, Claim,
#      ClaimBatch100, BareBatch100; BenchmarkLedgerClaim) at the same N,
#      against the same server;
#   3. pgbench again, so that drift of the machine during the run shows.
#
# Usage: bench/postgres.sh [N] [DURATION] [BENCHTIME]
#   N          concurrency: pgbench clients and Go goroutines (default 32)
#   DURATION   seconds per pgbench run (default 20)
#   BENCHTIME  go test -benchtime per Go benchmark (default 10s)
# Environment: SPENT_BENCH_BATCH_CALLERS (default 4) callers of ClaimBatch;
# SPENT_BENCH_COUNT (default 1) repetitions of the Go benchmarks.
#
# Needs initdb, pg_ctl, postgres, psql and pgbench (Debian: postgresql,
# postgresql-client). Run as root, it runs the cluster as the user postgres.
set -euo pipefail

N=${1:-32}
DURATION=${2:-20}
BENCHTIME=${3:-10s}
CALLERS=${SPENT_BENCH_BATCH_CALLERS:-4}
COUNT=${SPENT_BENCH_COUNT:-1}
cd "$(dirname "$0")/.."

bindir=""
for d in "$(dirname "$(command -v initdb 2>/dev/null || echo /nonexistent/x)")" $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -t/ -k4 -n -r); do
	if [ -x "$d/initdb" ] && [ -x "$d/pg_ctl" ] && [ -x "$d/postgres" ] && [ -x "$d/psql" ]; then
		bindir=$d
		break
	fi
done
if [ -z "$bindir" ]; then
	echo "postgres.sh: initdb, pg_ctl, postgres and psql not found: install the Debian package postgresql" >&2
	exit 1
fi
PGBENCH=$(command -v pgbench || echo "$bindir/pgbench")
[ -x "$PGBENCH" ] || { echo "postgres.sh: pgbench not found: install postgresql-client" >&2; exit 1; }

base=$(mktemp -d /tmp/spent-pgbench-XXXXXX)
as_pg() { "$@"; }
if [ "$(id -u)" = 0 ]; then
	chown postgres: "$base"
	as_pg() { runuser -u postgres -- "$@"; }
fi
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
data=$base/data
cleanup() {
	as_pg "$bindir/pg_ctl" stop -D "$data" -m fast -w >/dev/null 2>&1 || true
	rm -rf "$base"
}
trap cleanup EXIT

as_pg "$bindir/initdb" -D "$data" -U postgres --auth=trust -E UTF8 --locale=C --no-instructions >/dev/null
# The durable settings are explicit; the rest keeps the cluster small and
# the same as the tests' clusters.
as_pg "$bindir/pg_ctl" start -D "$data" -w -l "$base/postgres.log" -o "-p $port -k $base -c listen_addresses=127.0.0.1 \
	-c fsync=on -c synchronous_commit=on -c full_page_writes=on -c wal_sync_method=fdatasync \
	-c shared_buffers=128MB -c max_connections=300 -c max_wal_size=1GB" >/dev/null
DSN="postgres://postgres@127.0.0.1:$port/postgres?sslmode=disable"
psql() { "$bindir/psql" -X -q -v ON_ERROR_STOP=1 "$DSN" "$@"; }

psql -c "CREATE SCHEMA bench" -c "CREATE TABLE bench.bare (
	key bytea PRIMARY KEY, namespace bytea NOT NULL, raw_key bytea NOT NULL, first_seen bigint, place bytea NOT NULL,
	fingerprint bytea, state smallint NOT NULL, result bytea, expires_at bigint NOT NULL, lease_until bigint,
	seq_node bigint NOT NULL, seq_counter bigint NOT NULL)"
cat >"$base/insert.sql" <<'EOF'
\set a random(1, 4611686018427387903)
\set b random(1, 4611686018427387903)
INSERT INTO bench.bare (key, namespace, raw_key, first_seen, place, fingerprint, state, result, expires_at, lease_until, seq_node, seq_counter)
VALUES (int8send(:a) || int8send(:b), 'tickets', '', (extract(epoch FROM clock_timestamp()) * 1e9)::bigint, 'gate-12', NULL, 2, '',
	(extract(epoch FROM clock_timestamp() + interval '30 hours') * 1e9)::bigint, NULL, 1, :a)
ON CONFLICT DO NOTHING RETURNING key;
EOF

echo "== machine: $(nproc) CPUs, $(uname -r); PostgreSQL: $("$bindir/postgres" --version)"
echo "== server settings:"
psql -At -c "SELECT name || '=' || setting FROM pg_settings WHERE name IN ('fsync', 'synchronous_commit', 'full_page_writes', 'wal_sync_method', 'shared_buffers') ORDER BY name"

run_pgbench() {
	echo "== pgbench -M prepared -c $N -j 2 -T $DURATION -f insert.sql (bare INSERT ... ON CONFLICT DO NOTHING RETURNING)"
	"$PGBENCH" -n -M prepared -c "$N" -j 2 -T "$DURATION" -f "$base/insert.sql" "$DSN" | grep -E '^(number of transactions actually processed|latency average|tps)'
}
run_pgbench

echo "== go test -bench (same server): N=$N, batch callers=$CALLERS, benchtime=$BENCHTIME, count=$COUNT"
SPENT_TEST_POSTGRES_DSN=$DSN SPENT_BENCH_CONCURRENCY=$N SPENT_BENCH_BATCH_CALLERS=$CALLERS \
	go test -run '^$' -bench 'BenchmarkPostgres|BenchmarkLedgerClaim' -benchtime "$BENCHTIME" -count "$COUNT" ./postgres/ 2>&1 |
	grep -E '^(Benchmark|ok|FAIL|---)' || true

run_pgbench
