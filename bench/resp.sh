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
# both, and against bench/bareresp, the bare handler: a Go RESP server with
# one goroutine a connection, as spent's, that answers +OK and keeps
# nothing, the ceiling of a Go front end on the machine; and against
# bench/bareresp --pebble --group, the bare handler over Pebble: the same
# server committing the SETs it has read to Pebble, synced, from one
# goroutine, three keys a SET as the embedded store writes (and one key),
# with no spent code, the floor of a Go front end over Pebble. Each round also
# measures the bare engine: the same claims straight
# into the ledger in process (no network, no RESP), one claim a call for
# pipeline 1 and batches of 16 for pipeline 16, which bounds what any front
# end over it can reach on this machine; and at pipeline 16, Pebble alone
# (resp's BenchmarkBarePebble: batches of 16 synced, with the store's three
# keys a claim and with one). It prints each run's requests per
# second and the ratios of the medians (spent / redis-server, bare engine /
# redis-server, spent / bare engine), the CPU each used a request (the
# servers' from /proc, redis-benchmark's and the bare engine's process's
# from bash's time: on a 2-core machine the client takes its share of the
# cores from the server), and the machine and the disk.
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

. bench/resp-common.sh

go build -o "$work/spent" ./cmd/spent
go build -o "$work/bareresp" ./bench/bareresp
machine="$(nproc) vCPU, $(free -g | awk '/^Mem:/ { print $2 }') GiB RAM, $(uname -srm); $(redis-server --version | cut -d' ' -f1-3); work dir on $(df -P -T "$work" | awk 'NR == 2 { printf "%s (%s)", $1, $2 }')"
echo "== machine: $machine"
echo "== commit: $(git rev-parse --short HEAD)"

rport=$(free_port)
mkdir "$work/redis"
redis-server --port "$rport" --bind 127.0.0.1 --dir "$work/redis" --appendonly yes --appendfsync always \
	--save '' --daemonize no --logfile "$work/redis/log" &
rpid=$!
pids+=($rpid)

sport=$(free_port)
hport=$(free_port)
spent_config "$work/spent.toml" "$hport" "$sport" "$work/spent-data"
"$work/spent" serve --config "$work/spent.toml" >"$work/spent.out" 2>"$work/spent.err" &
spid=$!
pids+=($spid)
bport=$(free_port)
"$work/bareresp" --listen "127.0.0.1:$bport" &
bpid=$!
pids+=($bpid)
# The bare handler over Pebble, with the embedded store's three keys a SET
# and with one.
p3port=$(free_port)
"$work/bareresp" --listen "127.0.0.1:$p3port" --pebble "$work/bare-pebble-3" --group --keys 3 &
p3pid=$!
pids+=($p3pid)
p1port=$(free_port)
"$work/bareresp" --listen "127.0.0.1:$p1port" --pebble "$work/bare-pebble-1" --group --keys 1 &
p1pid=$!
pids+=($p1pid)
wait_ping "$rport"
wait_ping "$sport"
wait_ping "$bport" OK
wait_ping "$p3port" OK
wait_ping "$p1port" OK

# The bare engine: the same claims straight into the ledger over the
# embedded store, in the same process, no network, from 64 goroutines, one
# claim a call and batches of 16 (resp's BenchmarkClaim), on the same disk.
go test -c -o "$work/resp.test" ./resp
# bare NAME N prints the claims per second of the bare engine (NAME a
# sub-benchmark of BenchmarkClaim, or BarePebble/keys-K: Pebble alone) and
# the CPU microseconds a claim of its whole process (the setup included).
bare() {
	local out bench="Claim/$1\$"
	case $1 in BarePebble/*) bench="$1\$" ;; esac
	out=$( { TIMEFORMAT='%U %S'; time (cd "$work" && TMPDIR="$work" ./resp.test -test.run '^$' -test.bench "$bench" -test.benchtime "$2x" 2>/dev/null); } 2>&1)
	awk -v n="$2" '
		/claims\/s/ { for (i = 1; i < NF; i++) if ($(i + 1) == "claims/s") rate = $i }
		/^[0-9.]+ [0-9.]+$/ { split($0, c, " "); cpu = c[1] + c[2] }
		END { printf "%s %.1f\n", rate, cpu * 1e6 / n }' <<<"$out"
}


# run NAME PORT PIPELINE PID prints the requests per second of one run, the
# server's CPU microseconds a request (PID's) and redis-benchmark's.
run() {
	local n=$requests before after out
	[ "$3" -gt 1 ] && n=$((requests * 4))
	before=$(cpu "$4")
	out=$( { TIMEFORMAT='%U %S'; time redis-benchmark -h 127.0.0.1 -p "$2" -c 64 -n "$n" -P "$3" -r 100000000 --csv \
		SET 'key:__rand_int__' v NX EX 108000 2>/dev/null; } 2>&1)
	after=$(cpu "$4")
	awk -F'","' -v n="$n" -v b="$before" -v a="$after" '
		NR == 2 { gsub(/"/, "", $2); rps = $2 }
		/^[0-9.]+ [0-9.]+$/ { split($0, c, " "); client = c[1] + c[2] }
		END { printf "%s %.1f %.1f\n", rps, (a - b) * 1e6 / n, client * 1e6 / n }' <<<"$out"
}

declare -A got
for p in 1 16; do
	for r in $(seq "$rounds"); do
		for s in redis spent handler hpebble3 hpebble1; do
			port=$rport pid=$rpid
			[ $s = spent ] && port=$sport pid=$spid
			[ $s = handler ] && port=$bport pid=$bpid
			[ $s = hpebble3 ] && port=$p3port pid=$p3pid
			[ $s = hpebble1 ] && port=$p1port pid=$p1pid
			read -r v scpu ccpu <<<"$(run $s "$port" $p "$pid")"
			echo "pipeline $p round $r $s: $v requests/s; CPU a request: server $scpu µs, redis-benchmark $ccpu µs"
			got[$s-$p]+="$v "
			got[$s-cpu-$p]+="$scpu "
			got[client-cpu-$s-$p]+="$ccpu "
		done
		if [ "$p" = 1 ]; then read -r v bcpu <<<"$(bare ledger "$requests")"; else read -r v bcpu <<<"$(bare ledger-batch-16 $((requests * 4)))"; fi
		echo "pipeline $p round $r bare engine: $v claims/s; CPU a claim: $bcpu µs"
		got[bare-$p]+="$v "
		got[bare-cpu-$p]+="$bcpu "
		if [ "$p" = 16 ]; then
			# Pebble alone, batches of 16, with the embedded store's three
			# keys a claim and with one: the bound of any design over it.
			for k in 3 1; do
				read -r v bcpu <<<"$(bare BarePebble/keys-$k $((requests * 4)))"
				echo "pipeline $p round $r bare Pebble, $k key(s) a claim: $v claims/s; CPU a claim: $bcpu µs"
				got[pebble$k]+="$v "
			done
		fi
	done
done

median() { tr ' ' '\n' <<<"$1" | grep . | sort -g | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }'; }
echo "== medians of $rounds runs, 64 connections, SET key:__rand_int__ v NX EX 108000"
for p in 1 16; do
	r=$(median "${got[redis-$p]}")
	s=$(median "${got[spent-$p]}")
	e=$(median "${got[bare-$p]}")
	h=$(median "${got[handler-$p]}")
	echo "pipeline $p: CPU µs a request (medians): redis-server $(median "${got[redis-cpu-$p]}"), spent $(median "${got[spent-cpu-$p]}"), bare handler $(median "${got[handler-cpu-$p]}"), bare handler over Pebble (3 keys) $(median "${got[hpebble3-cpu-$p]}"), bare engine $(median "${got[bare-cpu-$p]}"); redis-benchmark $(median "${got[client-cpu-redis-$p]}") against redis-server, $(median "${got[client-cpu-spent-$p]}") against spent, $(median "${got[client-cpu-handler-$p]}") against the bare handler"
	echo "           bare handler (Go RESP server answering +OK, bench/bareresp) $h/s [${got[handler-$p]% }], handler/redis $(awk -v s="$h" -v r="$(median "${got[redis-$p]}")" 'BEGIN { printf "%.2f", s / r }'), spent/handler $(awk -v s="$(median "${got[spent-$p]}")" -v r="$h" 'BEGIN { printf "%.2f", s / r }')"
	for k in 3 1; do
		hp=$(median "${got[hpebble$k-$p]}")
		echo "           bare handler over Pebble (bench/bareresp --pebble --group, $k key(s) a SET, synced, no spent code) $hp/s [${got[hpebble$k-$p]% }], it/redis $(awk -v s="$hp" -v r="$(median "${got[redis-$p]}")" 'BEGIN { printf "%.2f", s / r }'), spent/it $(awk -v s="$(median "${got[spent-$p]}")" -v r="$hp" 'BEGIN { printf "%.2f", s / r }')"
	done
	echo "pipeline $p: redis-server (appendfsync always) $r/s [${got[redis-$p]% }], spent $s/s [${got[spent-$p]% }], spent/redis $(awk -v s="$s" -v r="$r" 'BEGIN { printf "%.2f", s / r }')"
	echo "           bare engine (in process, $([ "$p" = 1 ] && echo "one claim a call" || echo "batches of 16")) $e/s [${got[bare-$p]% }], bare/redis $(awk -v s="$e" -v r="$r" 'BEGIN { printf "%.2f", s / r }'), spent/bare $(awk -v s="$s" -v r="$e" 'BEGIN { printf "%.2f", s / r }')"
	if [ "$p" = 16 ]; then
		for k in 3 1; do
			v=$(median "${got[pebble$k]}")
			echo "           bare Pebble, $k key(s) a claim, batches of 16: $v/s [${got[pebble$k]% }], pebble/redis $(awk -v s="$v" -v r="$r" 'BEGIN { printf "%.2f", s / r }')"
		done
	fi
done
