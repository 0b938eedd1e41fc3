#!/usr/bin/env bash
# bench/redis.sh: spent's redis store against the bare engine, on one
# redis-server with durable settings (appendonly yes, appendfsync always),
# same run, same server:
#
#   1. redis-benchmark, 50 clients, SET key:__rand_int__ val NX EX 108000
#      (random keys out of 100,000,000);
#   2. the Go benchmarks of package redis (BenchmarkClaim: the bare
#      SET NX EX through go-redis and the store's Claim, both from 50
#      goroutines; the ledger's claim path; ClaimBatch of 100 against the
#      bare SET NX EX pipelined by 100), against the same server;
#   3. redis-benchmark again, so that drift of the machine during the run
#      shows;
#
# then the ratios of the store's claims/s to the bare figures.
#
# Usage: bench/redis.sh [REQUESTS] [BENCHTIME]
#   REQUESTS   requests per redis-benchmark run (default 200000)
#   BENCHTIME  go test -benchtime per Go benchmark (default 10s)
# Environment: SPENT_BENCH_COUNT (default 1) repetitions of the Go benchmarks.
#
# Needs redis-server, redis-cli and redis-benchmark (Debian: redis-server,
# redis-tools).
set -euo pipefail

REQUESTS=${1:-200000}
BENCHTIME=${2:-10s}
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

echo "== go test -bench BenchmarkClaim (same server): benchtime=$BENCHTIME, count=$COUNT"
out=$(SPENT_REDIS_BENCH_ADDR=127.0.0.1:$port go test -run '^$' -bench 'BenchmarkClaim' -benchtime "$BENCHTIME" -count "$COUNT" ./redis/ 2>&1 |
	grep -E '^(Benchmark|ok|FAIL|---)' || true)
echo "$out"

run_redis_benchmark

# rate NAME: the mean claims/s of the benchmarks named NAME.
rate() {
	echo "$out" | awk -v name="$1" '$1 ~ name { for (i = 2; i < NF; i++) if ($(i+1) == "claims/s") { s += $i; n++ } }
		END { if (n) printf "%.0f", s / n; else print 0 }'
}
store=$(rate '/Store/c50')
gobare=$(rate '/BareSETNX/c50')
batch1=$(rate '/StoreBatch100/callers1')
batch4=$(rate '/StoreBatch100/callers4')
rb=$(echo "${bare[@]}" | awk '{ for (i = 1; i <= NF; i++) s += $i; printf "%.0f", s / NF }')
echo "== ratios (claims/s)"
awk -v s="$store" -v g="$gobare" -v r="$rb" -v b1="$batch1" -v b4="$batch4" 'BEGIN {
	printf "store Claim c50 / bare SET NX EX c50 through go-redis:  %d / %d = %.2f\n", s, g, (g ? s / g : 0)
	printf "store Claim c50 / redis-benchmark c50 (mean of two):    %d / %d = %.2f\n", s, r, (r ? s / r : 0)
	printf "store ClaimBatch100 x1 / bare SET NX EX c50 (go-redis): %d / %d = %.2f\n", b1, g, (g ? b1 / g : 0)
	printf "store ClaimBatch100 x4 / bare SET NX EX c50 (go-redis): %d / %d = %.2f\n", b4, g, (g ? b4 / g : 0)
}'
