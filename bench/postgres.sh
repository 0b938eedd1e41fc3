#!/usr/bin/env bash
# bench/postgres.sh: spent's PostgreSQL store against the bare engine, on one
# throwaway cluster with durable settings (fsync=on, synchronous_commit=on),
# same run, same server:
#
#   1. pgbench, prepared mode, N clients on 2 threads, for DURATION seconds,
#      running the bare INSERT ... ON CONFLICT DO NOTHING RETURNING of a row
#      like spent's (same columns and sizes, random 16-byte keys, primary key
#      only);
#   2. the Go benchmarks of package postgres against the same server, at the
#      same N: BenchmarkPostgres/Bare (the same INSERT through pgx) and
#      BenchmarkPostgres/Claim (the store's Claim), alternating, ROUNDS times
#      each (the machine's load drifts; alternating keeps the pairs fair),
#      then ClaimBatch100 and BareBatch100 (100 claims per call, from
#      SPENT_BENCH_BATCH_CALLERS callers, default 4) and BenchmarkLedgerClaim;
#   3. pgbench again, so that drift of the machine during the run shows;
#   4. a summary: medians, and the ratios the issue asks about.
#
# Usage: bench/postgres.sh [N] [DURATION] [BENCHTIME] [ROUNDS]
#   N          concurrency: pgbench clients and Go goroutines (default 32)
#   DURATION   seconds per pgbench run (default 20)
#   BENCHTIME  go test -benchtime per Go benchmark run (default 10s)
#   ROUNDS     Bare/Claim pairs (default 3)
#
# Needs initdb, pg_ctl, postgres, psql and pgbench (Debian: postgresql,
# postgresql-client). Run as root, it runs the cluster as the user postgres.
set -euo pipefail

N=${1:-32}
DURATION=${2:-20}
BENCHTIME=${3:-10s}
ROUNDS=${4:-3}
CALLERS=${SPENT_BENCH_BATCH_CALLERS:-4}
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

go test -c -o "$base/postgres.test" ./postgres/
results=$base/results.txt
: >"$results"

run_pgbench() {
	echo "== pgbench -n -M prepared -c $N -j 2 -T $DURATION -f insert.sql (bare INSERT ... ON CONFLICT DO NOTHING RETURNING)"
	"$PGBENCH" -n -M prepared -c "$N" -j 2 -T "$DURATION" -f "$base/insert.sql" "$DSN" | tee "$base/pgbench.out" |
		grep -E '^(number of transactions actually processed|latency average|tps)'
	awk '/^tps/ {print "pgbench", $3}' "$base/pgbench.out" >>"$results"
}

run_go() { # benchmark regexp
	(cd postgres && SPENT_TEST_POSTGRES_DSN=$DSN SPENT_BENCH_CONCURRENCY=$N SPENT_BENCH_BATCH_CALLERS=$CALLERS \
		"$base/postgres.test" -test.run '^$' -test.bench "$1" -test.benchtime "$BENCHTIME" 2>&1) |
		grep -E '^(Benchmark|FAIL|---)' | tee -a "$results" || true
}

run_pgbench
echo "== go test -bench, same server: N=$N, batch callers=$CALLERS, benchtime=$BENCHTIME, $ROUNDS rounds"
for r in $(seq "$ROUNDS"); do
	if [ $((r % 2)) = 1 ]; then
		run_go '^BenchmarkPostgres$/^Bare$/'
		run_go '^BenchmarkPostgres$/^Claim$/'
	else
		run_go '^BenchmarkPostgres$/^Claim$/'
		run_go '^BenchmarkPostgres$/^Bare$/'
	fi
done
run_go '^BenchmarkPostgres$/^(ClaimBatch100|BareBatch100)$/'
run_go '^BenchmarkLedgerClaim$'
run_pgbench

echo "== summary (claims/s; medians of the runs above)"
awk '
	function median(name,   n, i, j, t, a) {
		n = split(v[name], a, " ")
		for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
		return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
	}
	$1 == "pgbench" { v["pgbench"] = v["pgbench"] " " $2; next }
	/^Benchmark/ {
		name = $1; sub(/-[0-9]+$/, "", name); sub(/^Benchmark(Postgres\/)?/, "", name)
		for (i = 2; i < NF; i++) if ($(i + 1) == "claims/s") v[name] = v[name] " " $i
	}
	END {
		for (k in v) printf "%-28s %10.0f   (runs:%s)\n", k, median(k), v[k]
		bare = median("Bare/c='"$N"'"); claim = median("Claim/c='"$N"'"); pg = median("pgbench")
		batch = median("ClaimBatch100/callers='"$CALLERS"'")
		if (bare > 0) printf "Claim / Bare (Go, same N):          %.2f\n", claim / bare
		if (pg > 0)   printf "Claim / pgbench (same N):           %.2f\n", claim / pg
		if (bare > 0) printf "ClaimBatch100 / Bare single:        %.2f\n", batch / bare
		if (pg > 0)   printf "ClaimBatch100 / pgbench single:     %.2f\n", batch / pg
	}' "$results" | sort
