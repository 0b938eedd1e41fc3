#!/usr/bin/env bash
# bench/resp.sh: spent's RESP listener against redis-server, side by side in
# one run (issue 20), not run by CI.
#
# Both servers run on loopback ports in a fresh work directory on the same
# disk: redis-server with --appendonly yes --appendfsync always (every write
# on disk before its reply, as spent's are), and `spent serve` on the
# embedded store with a RESP listener whose prefix "key:" maps to a refuse
# namespace of 30 h retention. redis-benchmark then sends the same command
# to each:
#
#   SET key:__rand_int__ v NX EX 108000   (keys drawn from 10^8)
#
# from 64 connections, with pipeline 1 and pipeline 16, ROUNDS times,
# alternating the servers so that a slow moment of the machine falls on
# both. It prints each run's requests per second and the ratios of the
# medians (spent / redis-server), and the machine and the disk.
#
# Usage: bench/resp.sh [--requests N] [--rounds R] [--dir DIR]
#   --requests  requests per run at pipeline 1 (default 200000; pipeline 16
#               sends 4 times as many)
#   --rounds    runs per server and pipeline (default 3)
#   --dir       where the work directory goes (default /var/tmp): the disk
#               both servers write to
#
# Needs Go, redis-server and redis-benchmark (Debian: redis-server,
# redis-tools).
set -euo pipefail
cd "$(dirname "$0")/.."

requests=200000
rounds=3
dir=/var/tmp
while [ $# -gt 0 ]; do
	case $1 in
	--requests) requests=$2; shift 2 ;;
	--rounds) rounds=$2; shift 2 ;;
	--dir) dir=$2; shift 2 ;;
	*) sed -n '2,/^set -euo/p' "$0" | sed '$d' >&2; exit 2 ;;
	esac
done
for b in redis-server redis-benchmark go; do
	command -v $b >/dev/null || { echo "resp.sh: $b is missing (Debian: redis-server, redis-tools; or Go)" >&2; exit 1; }
done

work=$(mktemp -d "$dir/spent-resp-XXXXXX")
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	sleep 1
	for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null || true; done
	rm -rf "$work"
}
trap cleanup EXIT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
wait_ping() {
	for _ in $(seq 100); do
		redis-cli -p "$1" PING 2>/dev/null | grep -q PONG && return 0
		sleep 0.1
	done
	echo "resp.sh: nothing answers PING on port $1" >&2
	exit 1
}

go build -o "$work/spent" ./cmd/spent
machine="$(nproc) vCPU, $(free -g | awk '/^Mem:/ { print $2 }') GiB RAM, $(uname -srm); $(redis-server --version | cut -d' ' -f1-3); work dir on $(df -P -T "$work" | awk 'NR == 2 { printf "%s (%s)", $1, $2 }')"
echo "== machine: $machine"
echo "== commit: $(git rev-parse --short HEAD)"

rport=$(free_port)
mkdir "$work/redis"
redis-server --port "$rport" --bind 127.0.0.1 --dir "$work/redis" --appendonly yes --appendfsync always \
	--save '' --daemonize no --logfile "$work/redis/log" &
pids+=($!)

sport=$(free_port)
hport=$(free_port)
cat >"$work/spent.toml" <<TOML
listen = "127.0.0.1:$hport"
resp_listen = "127.0.0.1:$sport"
data = "$work/spent-data"
log_level = "warn"

[namespaces.bench]
mode = "refuse"
retention = "30h"
lease = "30s"
on_lease_expiry = "hold"

[resp]
namespaces = { "key:" = "bench" }
TOML
"$work/spent" serve --config "$work/spent.toml" >"$work/spent.out" 2>"$work/spent.err" &
pids+=($!)
wait_ping "$rport"
wait_ping "$sport"

# run NAME PORT PIPELINE prints the requests per second of one run.
run() {
	local n=$requests
	[ "$3" -gt 1 ] && n=$((requests * 4))
	redis-benchmark -h 127.0.0.1 -p "$2" -c 64 -n "$n" -P "$3" -r 100000000 --csv \
		SET 'key:__rand_int__' v NX EX 108000 | awk -F'","' 'NR == 2 { gsub(/"/, "", $2); print $2 }'
}

declare -A got
for p in 1 16; do
	for r in $(seq "$rounds"); do
		for s in redis spent; do
			port=$rport
			[ $s = spent ] && port=$sport
			v=$(run $s "$port" $p)
			echo "pipeline $p round $r $s: $v requests/s"
			got[$s-$p]+="$v "
		done
	done
done

median() { tr ' ' '\n' <<<"$1" | grep . | sort -g | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }'; }
echo "== medians of $rounds runs, 64 connections, SET key:__rand_int__ v NX EX 108000"
for p in 1 16; do
	r=$(median "${got[redis-$p]}")
	s=$(median "${got[spent-$p]}")
	echo "pipeline $p: redis-server (appendfsync always) $r/s [${got[redis-$p]% }], spent $s/s [${got[spent-$p]% }], spent/redis $(awk -v s="$s" -v r="$r" 'BEGIN { printf "%.2f", s / r }')"
done
