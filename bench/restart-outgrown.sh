#!/usr/bin/env bash
# bench/restart-outgrown.sh: the restart after kill -9 of a store whose
# journal outgrew its saved filter (issue 31, attacker finding F8), for one
# or more builds of spent side by side; not run by CI.
#
# For each binary: spent serve on a fresh data directory, stopped cleanly
# (it saves the filter of an empty store: 256 lanes); started again, sent
# one-step claims of new keys by `spent bench` (8 workers, batches of 100)
# for DURATION, fewer than the 1,048,576 inserts after which a running
# store saves its filter; then kill -9, and spent serve again: the time from
# its start to /readyz 200, capped at --timeout, and its log lines about
# the filter.
#
# Usage: bench/restart-outgrown.sh [--duration 8s] [--timeout 240] BINARY...
# Example:
#   go build -o /tmp/spent ./cmd/spent && bench/restart-outgrown.sh /tmp/spent
set -euo pipefail
cd "$(dirname "$0")/.."

duration=8s
timeout=240
while [ $# -gt 0 ]; do
	case $1 in
	--duration) duration=$2; shift 2 ;;
	--timeout) timeout=$2; shift 2 ;;
	--*|-h) sed -n '2,/^set -euo/p' "$0" | sed '$d' >&2; exit 2 ;;
	*) break ;;
	esac
done
[ $# -ge 1 ] || { sed -n '2,/^set -euo/p' "$0" | sed '$d' >&2; exit 2; }
command -v curl >/dev/null || { echo "restart-outgrown.sh: curl is missing" >&2; exit 1; }

. bench/resp-common.sh
work=$(mktemp -d /var/tmp/spent-outgrown-XXXXXX)
spid=
cleanup() {
	[ -n "$spid" ] && kill -9 "$spid" 2>/dev/null || true
	rm -rf "$work"
}
trap cleanup EXIT

# ready waits for /readyz 200 on port $1 for at most $2 seconds and prints
# the seconds it took, or "not ready after N s".
ready() {
	local t0 now
	t0=$(date +%s%N)
	while :; do
		if curl -sf --max-time 1 -o /dev/null "http://127.0.0.1:$1/readyz"; then
			now=$(date +%s%N)
			echo "$(( (now - t0) / 1000000 )) ms"
			return 0
		fi
		now=$(date +%s%N)
		if [ $(( (now - t0) / 1000000000 )) -ge "$2" ]; then
			echo "not ready after $2 s"
			return 1
		fi
		sleep 0.05
	done
}

for bin in "$@"; do
	d="$work/data"
	rm -rf "$d"
	port=$(free_port)
	"$bin" serve --data "$d" --listen "127.0.0.1:$port" >"$work/log1" 2>&1 & spid=$!
	ready "$port" 30 >/dev/null
	kill -TERM "$spid"; wait "$spid" || true
	"$bin" serve --data "$d" --listen "127.0.0.1:$port" >"$work/log2" 2>&1 & spid=$!
	ready "$port" 30 >/dev/null
	claims=$("$bin" bench --addr "http://127.0.0.1:$port" --concurrency 8 --batch 100 --duration "$duration" 2>/dev/null |
		awk '$1 == "fresh" { print $2 }')
	kill -9 "$spid"; wait "$spid" 2>/dev/null || true
	"$bin" serve --data "$d" --listen "127.0.0.1:$port" >"$work/log3" 2>&1 & spid=$!
	took=$(ready "$port" "$timeout" || true)
	echo "$bin: $claims claims, kill -9, /readyz 200 after: $took"
	grep -i 'existence filter' "$work/log3" | sed 's/^/    /' | head -3
	kill -9 "$spid" 2>/dev/null; wait "$spid" 2>/dev/null || true
	spid=
done
