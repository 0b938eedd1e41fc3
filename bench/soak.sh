#!/usr/bin/env bash
# bench/soak.sh: a long run of mixed load on the embedded store, to see that
# memory and latency stay flat once the record count is steady.
#
# It starts `spent serve` on the embedded store in a temporary data directory,
# with one echo namespace, "soak", whose records expire after SOAK_RETENTION
# and whose two-step claims hold their lease for SOAK_LEASE (then any claim
# may retake the key), swept every SOAK_SWEEP. From a second process,
# `spent bench --soak` sends SOAK_RATE requests/s on a fixed schedule for
# SOAK_DURATION: one-step claims of new keys, repeats of earlier keys, and
# two-step claims that are completed, released or abandoned to their lease
# (--mix). Claims add records, sweeps remove the expired ones, so the record
# count levels off after SOAK_RETENTION.
#
# Every SOAK_INTERVAL it prints one row: the time since the load started, the
# requests answered and failed in the interval, their p50 and p99 latency
# (from each request's scheduled time), and, from the server's /metrics, its
# own p99 time per claim (the bound of its histogram bucket: what the server
# took, without the wait for a CPU), RSS, Go heap in use, goroutines, records
# held (expired but unswept ones included) and records the sweeper removed in
# the interval. At the end: the
# requests by kind (claim, repeat; two_step: pending claims then completed or
# released; complete; release; abandon: pending claims left to their lease),
# the claims' outcomes, the rows as a markdown table, the commands, and the
# machine. It exits non-zero if any request failed or was answered wrongly (a
# new key not fresh, a replay of other bytes), if /metrics could not be read,
# or if the server did not stop cleanly.
#
# Usage: bench/soak.sh   (or make soak), tuned by the environment:
#   SOAK_DURATION     length of the load (default 30m)
#   SOAK_INTERVAL     time between rows (default 1m)
#   SOAK_RATE         requests/s in all (default 2000, a small share of what
#                     the server takes on two cores, so that latency reflects
#                     the server and not a saturated CPU)
#   SOAK_CONCURRENCY  workers, each with one request in flight (default 16)
#   SOAK_RETENTION    how long the namespace keeps a record (default 90s)
#   SOAK_LEASE        how long a pending two-step claim blocks (default 10s)
#   SOAK_SWEEP        sweep_interval of the server (default 10s)
#   SOAK_FLAGS        more flags for spent bench, e.g. "--mix claim=1,repeat=1"
#   SOAK_CONFIG       more TOML appended to the server's config, e.g.
#                     $'[store]\nmemtable_size = 8388608'
set -euo pipefail

DURATION=${SOAK_DURATION:-30m}
INTERVAL=${SOAK_INTERVAL:-1m}
RATE=${SOAK_RATE:-2000}
CONCURRENCY=${SOAK_CONCURRENCY:-16}
RETENTION=${SOAK_RETENTION:-90s}
LEASE=${SOAK_LEASE:-10s}
SWEEP=${SOAK_SWEEP:-10s}
FLAGS=${SOAK_FLAGS:-}
EXTRA_CONFIG=${SOAK_CONFIG:-}
cd "$(dirname "$0")/.."

dir=$(mktemp -d /tmp/spent-soak-XXXXXX)
server=
cleanup() {
	if [ -n "$server" ]; then kill "$server" 2>/dev/null || true; fi
	rm -rf "$dir"
}
trap cleanup EXIT

go build -o "$dir/spent" ./cmd/spent
cat >"$dir/spent.toml" <<EOF
sweep_interval = "$SWEEP"

[namespaces.soak]
mode = "echo"
retention = "$RETENTION"
lease = "$LEASE"
on_lease_expiry = "retake"
EOF
if [ -n "$EXTRA_CONFIG" ]; then printf '\n%s\n' "$EXTRA_CONFIG" >>"$dir/spent.toml"; fi

serve_cmd=(spent serve --listen 127.0.0.1:0 --data "$dir/data" --config "$dir/spent.toml")
"$dir/spent" "${serve_cmd[@]:1}" >"$dir/serve.out" 2>"$dir/serve.log" &
server=$!
addr=
for _ in $(seq 300); do
	addr=$(sed -n 's/^spent listening on //p' "$dir/serve.out")
	if [ -n "$addr" ] && curl -fs "$addr/readyz" >/dev/null; then break; fi
	if ! kill -0 "$server" 2>/dev/null; then
		echo "soak.sh: spent serve did not start:" >&2
		cat "$dir/serve.log" >&2
		exit 1
	fi
	sleep 0.1
done
[ -n "$addr" ] || { echo "soak.sh: spent serve printed no address in 30 s" >&2; exit 1; }

# shellcheck disable=SC2206 # SOAK_FLAGS is split into words on purpose
bench_cmd=(spent bench --soak --addr "$addr" --namespace soak --duration "$DURATION" --interval "$INTERVAL"
	--rate "$RATE" --concurrency "$CONCURRENCY" $FLAGS)
status=0
"$dir/spent" "${bench_cmd[@]:1}" || status=$?

kill -TERM "$server"
serve_status=0
wait "$server" || serve_status=$?
server=
if [ "$serve_status" -ne 0 ]; then
	echo "soak.sh: spent serve exited $serve_status" >&2
	status=1
fi
if grep -E 'level=(WARN|ERROR)' "$dir/serve.log" | grep -v 'auth is off' >"$dir/warnings"; then
	echo "== the server's warnings and errors ($(wc -l <"$dir/warnings") lines, the first 20):"
	head -20 "$dir/warnings"
fi

echo
echo "== command: SOAK_DURATION=$DURATION SOAK_INTERVAL=$INTERVAL SOAK_RATE=$RATE SOAK_CONCURRENCY=$CONCURRENCY SOAK_RETENTION=$RETENTION SOAK_LEASE=$LEASE SOAK_SWEEP=$SWEEP${FLAGS:+ SOAK_FLAGS='$FLAGS'}${EXTRA_CONFIG:+ SOAK_CONFIG=(below)} bench/soak.sh"
echo "   server: ${serve_cmd[*]}, config:"
sed 's/^/     /' "$dir/spent.toml"
echo "   load:   ${bench_cmd[*]}"
echo "== uname -a: $(uname -a)"
echo "== nproc: $(nproc)"
echo "== CPU: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)"
echo "== $(go version)"
echo "== commit: $(git rev-parse --short HEAD 2>/dev/null || echo unknown)$(git diff --quiet 2>/dev/null || echo ' (with local changes)')"
exit "$status"
