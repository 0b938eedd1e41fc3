#!/usr/bin/env bash
# bench/resp-ab.sh: two or more builds of spent's RESP listener side by side
# (issue 20), not run by CI.
#
# Each variant is LABEL=COMMAND, COMMAND being how to run a spent binary
# ("/tmp/spent", or "env GOMAXPROCS=1 /tmp/spent"; it runs from the
# repository's root). Round after round, each
# variant in turn starts `spent serve` on a fresh embedded store (prefix
# "key:" to a refuse namespace of 30 h retention, as bench/resp.sh) and
# redis-benchmark sends it
#
#   SET key:__rand_int__ v NX EX 108000
#
# from 64 connections at the given pipeline. Each run prints the label, the
# requests a second, the server's CPU a request (from /proc) and the claims
# a store round (from spent_store_rounds_total); the end, each label's runs
# in order.
#
# Usage: bench/resp-ab.sh [--pipeline P] [--requests N] [--rounds R] [--dir DIR] LABEL=COMMAND...
#   --pipeline  redis-benchmark's -P (default 1)
#   --requests  requests a run (default 100000)
#   --rounds    runs a variant (default 3)
#   --dir       where the work directory goes (default /var/tmp)
#
# Example, the build of HEAD with one P against two:
#   go build -o /tmp/spent ./cmd/spent
#   bench/resp-ab.sh base=/tmp/spent "g1=env GOMAXPROCS=1 /tmp/spent"
set -euo pipefail
cd "$(dirname "$0")/.."

pipeline=1
requests=100000
rounds=3
dir=/var/tmp
while [ $# -gt 0 ]; do
	case $1 in
	--pipeline) pipeline=$2; shift 2 ;;
	--requests) requests=$2; shift 2 ;;
	--rounds) rounds=$2; shift 2 ;;
	--dir) dir=$2; shift 2 ;;
	--*|-h) sed -n '2,/^set -euo/p' "$0" | sed '$d' >&2; exit 2 ;;
	*) break ;;
	esac
done
[ $# -ge 1 ] || { sed -n '2,/^set -euo/p' "$0" | sed '$d' >&2; exit 2; }
for b in redis-benchmark redis-cli curl python3; do
	command -v $b >/dev/null || { echo "resp-ab.sh: $b is missing (Debian: redis-tools, curl, python3)" >&2; exit 1; }
done

work=$(mktemp -d "$dir/spent-ab-XXXXXX")
spid=
cleanup() {
	[ -n "$spid" ] && kill "$spid" 2>/dev/null || true
	rm -rf "$work"
}
trap cleanup EXIT

. bench/resp-common.sh
sport=$(free_port)
hport=$(free_port)
spent_config "$work/spent.toml" "$hport" "$sport" "$work/data"

declare -A got
echo "== $(nproc) vCPU, $(uname -srm); pipeline $pipeline, $requests requests a run, 64 connections"
for _ in $(seq "$rounds"); do
	for v in "$@"; do
		label=${v%%=*}
		rm -rf "$work/data"
		# shellcheck disable=SC2086 # the command is words on purpose
		${v#*=} serve --config "$work/spent.toml" >"$work/out" 2>&1 &
		spid=$!
		wait_ping "$sport"
		pid=$spid # env, as a wrapper, execs spent in its own process
		before=$(cpu "$pid")
		rps=$(redis-benchmark -p "$sport" -c 64 -n "$requests" -P "$pipeline" -r 100000000 --csv \
			SET 'key:__rand_int__' v NX EX 108000 2>/dev/null | awk -F'","' 'NR == 2 { gsub(/"/, "", $2); print $2 }')
		after=$(cpu "$pid")
		rounds_done=$(curl -s "127.0.0.1:$hport/metrics" | awk '/^spent_store_rounds_total/ { print $2 }')
		awk -v l="$label" -v r="$rps" -v b="$before" -v a="$after" -v n="$requests" -v k="$rounds_done" \
			'BEGIN { printf "%s: %s requests/s; server CPU %.1f µs a request; %.0f claims a round\n", l, r, (a - b) * 1e6 / n, n / k }'
		got[$label]+="$rps "
		kill "$spid"
		wait "$spid" 2>/dev/null || true
		spid=
	done
done
for v in "$@"; do
	label=${v%%=*}
	echo "== $label: ${got[$label]% }"
done
