#!/usr/bin/env bash
# bench/redis.sh: spent's redis store against the bare engine, on one
# redis-server with durable settings (appendonly yes, appendfsync always),
# same run, same server:
#
#   1. redis-benchmark, 50 clients, SET key:__rand_int__ val NX EX 108000
#      (random keys out of 100,000,000);
#   2. the Go benchmarks of package redis, against the same server:
#      BenchmarkClaim runs each contender for BENCHTIME, one after the other:
#      the bare SET NX EX through go-redis (sent one by one, and
#      autopipelined as the store sends its calls) and the store's Claim, all
#      from 50 goroutines; two-step claims (the claim script); the ledger's
#      claim path; ClaimBatch of 100 against the bare SET NX EX pipelined by
#      100.
#      BenchmarkClaimInterleaved runs the same contenders in alternating
#      rounds of 2,000 claims, so that all see the same drift of the machine,
#      and reports their ratios to the bare SET NX EX: the figures to quote;
#   3. redis-benchmark again, so that drift of the machine during the run
#      shows;
#
# then the ratios of the store's claims/s to the bare figures.
#
# Usage: bench/redis.sh [REQUESTS] [BENCHTIME] [CLAIMS]
#   REQUESTS   requests per redis-benchmark run (default 200000)
#   BENCHTIME  go test -benchtime per BenchmarkClaim contender (default 10s)
#   CLAIMS     claims per contender in BenchmarkClaimInterleaved (default 50000)
# Environment: SPENT_BENCH_COUNT (default 1) repetitions of the Go benchmarks.
#
# Needs redis-server, redis-cli and redis-benchmark (Debian: redis-server,
# redis-tools).
set -euo pipefail

REQUESTS=${1:-200000}
BENCHTIME=${2:-10s}
CLAIMS=${3:-50000}
COUNT=${SPENT_BENCH_COUNT:-1}
cd "$(dirname "$0")/.."

for b in redis-server redis-cli redis-benchmark; do
	command -v "$b" >/dev/null || { echo "redis.sh: $b not found: install the Debian packages redis-server and redis-tools" >&2; exit 1; }
done

dir=$(mktemp -d /tmp/spent-redisbench-XXXXXX)
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
cleanup() {
	redis-cli -p "$port" shutdown nosave >/dev/null 2>&1 || true
	rm -rf "$dir"
}
trap cleanup EXIT

redis-server --port "$port" --bind 127.0.0.1 --dir "$dir" --appendonly yes --appendfsync always --save "" \
	--daemonize yes --logfile "$dir/redis.log" --pidfile "$dir/redis.pid"
for _ in $(seq 100); do
	redis-cli -p "$port" ping >/dev/null 2>&1 && break
	sleep 0.1
done

echo "== machine: $(nproc) CPUs, $(uname -r); $(redis-server --version | cut -d' ' -f1-3)"
echo "== server settings:"
redis-cli -p "$port" config get appendonly | paste -sd=
redis-cli -p "$port" config get appendfsync | paste -sd=
redis-cli -p "$port" config get save | paste -sd=

bare=()
run_redis_benchmark() {
	echo "== redis-benchmark -c 50 -n $REQUESTS -r 100000000 SET key:__rand_int__ val NX EX 108000"
	local line rps
	line=$(redis-benchmark -p "$port" -c 50 -n "$REQUESTS" -r 100000000 --csv SET 'key:__rand_int__' val NX EX 108000 2>/dev/null | tail -1)
	rps=$(echo "$line" | cut -d, -f2 | tr -d '"')
	echo "requests/s: $rps  (csv: $line)"
	bare+=("$rps")
}
run_redis_benchmark

echo "== go test -bench 'BenchmarkClaim\$' (same server): benchtime=$BENCHTIME, count=$COUNT"
out=$(SPENT_REDIS_BENCH_ADDR=127.0.0.1:$port go test -run '^$' -bench 'BenchmarkClaim$' -benchtime "$BENCHTIME" -count "$COUNT" ./redis/ 2>&1 |
	grep -E '^(Benchmark|ok|FAIL|---)' || true)
echo "$out"
echo "== go test -bench BenchmarkClaimInterleaved (same server): benchtime=${CLAIMS}x, count=$COUNT"
inter=$(SPENT_REDIS_BENCH_ADDR=127.0.0.1:$port go test -run '^$' -bench 'BenchmarkClaimInterleaved' -benchtime "${CLAIMS}x" -count "$COUNT" ./redis/ 2>&1 |
	grep -E '^(Benchmark|ok|FAIL|---)' || true)
echo "$inter"

run_redis_benchmark

# metric UNIT: the mean of the interleaved benchmark's metric UNIT.
metric() {
	echo "$inter" | awk -v unit="$1" '$1 ~ /^BenchmarkClaimInterleaved/ { for (i = 2; i < NF; i++) if ($(i+1) == unit) { s += $i; n++ } }
		END { if (n) printf "%.2f", s / n; else print 0 }'
}
rb=$(echo "${bare[@]}" | awk '{ for (i = 1; i <= NF; i++) s += $i; printf "%.0f", s / NF }')
echo "== ratios (claims/s), from the interleaved rounds"
printf 'bare SET NX EX c50 through go-redis:      %.0f claims/s (redis-benchmark c50, mean of two runs: %s requests/s)\n' "$(metric bare-claims/s)" "$rb"
printf 'the same, autopipelined as the store:     %.0f claims/s = %s x bare\n' "$(metric bare-autopipelined-claims/s)" "$(metric bare-autopipelined/bare)"
printf 'store Claim c50 (one-step):               %.0f claims/s = %s x bare\n' "$(metric store-claims/s)" "$(metric store/bare)"
printf 'store Claim c50 (two-step, claim script): %.0f claims/s = %s x bare\n' "$(metric pending-claims/s)" "$(metric pending/bare)"
printf 'ledger Claim c50 (whole claim path):      %.0f claims/s = %s x bare\n' "$(metric ledger-claims/s)" "$(metric ledger/bare)"
printf 'store ClaimBatch100 from 4 callers:       %.0f claims/s = %s x bare\n' "$(metric batch100x4-claims/s)" "$(metric batch100x4/bare)"
awk -v s="$(metric store-claims/s)" -v a="$(metric bare-autopipelined-claims/s)" -v r="$rb" 'BEGIN {
	if (a > 0) printf "store Claim c50 / autopipelined bare:      %.2f\n", s / a
	if (r > 0) printf "store Claim c50 / redis-benchmark c50:     %.2f (different client, different moments: indicative only)\n", s / r
}'
