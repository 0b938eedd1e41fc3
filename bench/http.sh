#!/usr/bin/env bash
# bench/http.sh: POST /v1/claim over HTTP on the embedded store, side by
# side with a bare net/http handler (bench/barehttp) in one run:
#
#   1. ROUNDS rounds, each: wrk, 2 threads and 64 connections for DURATION,
#      one-step claims of fresh random keys (bench/claim.lua) against
#      `spent serve`, then the same wrk against the bare handler;
#   2. the store's claims per group commit, from /metrics;
#   3. open loop: `spent bench --addr --rate RATE` (requests sent on a fixed
#      schedule whatever the answers do; latency counts from each request's
#      scheduled time, so a stall is not hidden), ROUNDS runs of DURATION;
#   4. POST /v1/claims: `spent bench --addr --concurrency 16 --batch 100`,
#      ROUNDS runs of DURATION;
#
# then the medians and the ratio spent ÷ bare. Server, load generator and
# baseline share the machine's cores.
#
# Usage: bench/http.sh [ROUNDS] [DURATION] [RATE]
#   ROUNDS    rounds of each measurement (default 3)
#   DURATION  length of each run, for wrk and spent bench (default 10s)
#   RATE      open-loop requests/s (default 12500: half of issue 2's 25,000)
#
# Needs wrk (Debian: apt-get install wrk).
set -euo pipefail

ROUNDS=${1:-3}
DURATION=${2:-10s}
RATE=${3:-12500}
cd "$(dirname "$0")/.."

command -v wrk >/dev/null || { echo "http.sh: wrk not found: apt-get install wrk" >&2; exit 1; }

dir=$(mktemp -d /tmp/spent-httpbench-XXXXXX)
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	rm -rf "$dir"
}
trap cleanup EXIT

go build -o "$dir/spent" ./cmd/spent
go build -o "$dir/barehttp" ./bench/barehttp
sport=$(free_port)
bport=$(free_port)
"$dir/spent" serve --data "$dir/data" --listen "127.0.0.1:$sport" >"$dir/spent.log" 2>&1 &
pids+=($!)
"$dir/barehttp" --listen "127.0.0.1:$bport" 2>"$dir/bare.log" &
pids+=($!)
for _ in $(seq 100); do
	if curl -fs "127.0.0.1:$sport/readyz" >/dev/null && curl -s "127.0.0.1:$bport/" >/dev/null; then break; fi
	sleep 0.1
done

echo "== machine: $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(uname -r); $(go version | cut -d' ' -f3); load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "== disk: $(dd if=/dev/zero of="$dir/dsync" bs=4k count=1000 oflag=dsync 2>&1 | tail -1 | awk '{for (i = 2; i <= NF; i++) if ($i == "s,") printf "%.0f µs per 4 KiB synced write (dd oflag=dsync)", $(i-1) * 1e6 / 1000}')"

# wrk_run NAME PORT prints: NAME requests/s p50 p99
wrk_run() {
	wrk -t2 -c64 -d"$DURATION" --latency -s bench/claim.lua "http://127.0.0.1:$2/" |
		awk -v name="$1" '/^ +50%/ {p50=$2} /^ +99%/ {p99=$2} /^Requests\/sec/ {rps=$2}
			END {printf "%-6s %10.0f req/s  p50 %8s  p99 %8s\n", name, rps, p50, p99}'
}

echo "== wrk -t2 -c64 -d$DURATION, single one-step claims of fresh keys"
: >"$dir/wrk"
for r in $(seq "$ROUNDS"); do
	echo "-- round $r"
	wrk_run spent "$sport" | tee -a "$dir/wrk"
	wrk_run bare "$bport" | tee -a "$dir/wrk"
done

metrics=$(curl -fs "127.0.0.1:$sport/metrics")
claims=$(awk '$1 == "spent_store_claims_total" {print $2}' <<<"$metrics")
rounds=$(awk '$1 == "spent_store_rounds_total" {print $2}' <<<"$metrics")
echo "== store: $claims claims in $rounds group commits ($(awk -v c="$claims" -v r="$rounds" 'BEGIN {printf "%.1f", c / r}') per commit)"

# buckets prints the server's claim-latency histogram (endpoint "claim") as
# "le count" lines.
buckets() {
	curl -fs "127.0.0.1:$sport/metrics" |
		sed -n 's/^spent_claim_duration_seconds_bucket{endpoint="claim",le="\([^"]*\)"} \(.*\)$/\1 \2/p'
}

echo "== open loop: spent bench --addr --concurrency 64 --rate $RATE --duration $DURATION"
buckets >"$dir/before"
: >"$dir/open"
for r in $(seq "$ROUNDS"); do
	"$dir/spent" bench --addr "http://127.0.0.1:$sport" --concurrency 64 --rate "$RATE" --duration "$DURATION" --json 2>/dev/null | tail -1 |
		python3 -c 'import json, sys
d = json.load(sys.stdin)
l = d["latency_ms"]
print("open   %10.0f req/s  p50 %6.2fms  p99 %6.2fms  p99.9 %6.2fms  errors %d" % (d["claims_per_second"], l["p50"], l["p99"], l["p999"], d["errors"]))' | tee -a "$dir/open"
done

buckets >"$dir/after"
# The server's own view of the same requests: the ledger's time per claim
# (decode, HMAC, durable write, encode), from the histogram's change.
paste -d" " "$dir/before" "$dir/after" | awk '{print $1, $2, $4}' | python3 -c 'import sys
rows = [(float(le), float(b) - float(a)) for le, a, b in (l.split() for l in sys.stdin) if le != "+Inf"]
rows.sort()
total = max(c for _, c in rows)
over = ", ".join("%.1f ms: %d" % (le * 1e3, total - c) for le, c in rows if 0.0015 < le < 0.03)
p99 = next(le for le, c in rows if c >= 0.99 * total)
print("server %10d claims; p99 <= %.1f ms; claims over %s" % (total, p99 * 1e3, over))'

echo "== batches: spent bench --addr --concurrency 16 --batch 100 --duration $DURATION"
for r in $(seq "$ROUNDS"); do
	"$dir/spent" bench --addr "http://127.0.0.1:$sport" --concurrency 16 --batch 100 --duration "$DURATION" --json 2>/dev/null | tail -1 |
		python3 -c 'import json, sys
d = json.load(sys.stdin)
l = d["latency_ms"]
print("batch  %10.0f claims/s  p50 %6.2fms  p99 %6.2fms per batch of 100  errors %d" % (d["claims_per_second"], l["p50"], l["p99"], d["errors"]))'
done

echo "== medians"
awk '$1 == "spent" {print $2}' "$dir/wrk" | sort -n | awk '{v[NR]=$1} END {print "spent  " v[int((NR+1)/2)]}' >"$dir/med"
awk '$1 == "bare" {print $2}' "$dir/wrk" | sort -n | awk '{v[NR]=$1} END {print "bare   " v[int((NR+1)/2)]}' >>"$dir/med"
awk '{print $0 " req/s"} {m[$1]=$2} END {printf "ratio  %.2f (spent / bare, medians)\n", m["spent"] / m["bare"]}' "$dir/med"
