#!/usr/bin/env bash
# bench/scale.sh: the cost curve of spent's stores (issue 19), not run by CI.
#
# For each store and size it loads that many records in process (the Go
# driver in bench/scale, through the store package's ClaimBatch; one in ten
# records expires two days after the load starts, the rest after 30 days),
# checks a sample of them is there, then measures, each for DURATION:
#
#   claims/s and p99 per call of Claim of fresh keys from 16 goroutines, and
#   of ClaimBatch of 100 fresh keys from 4 goroutines;
#   RSS of the process holding the store, bytes per record on disk and in
#   memory (and the existence filter's, for pebble);
#   restart to ready after a clean stop and after kill -9, checking loaded
#   keys (and, for pebble, the claims acknowledged before the kill) are
#   still repeats afterwards;
#   the sweep of the expired tenth, DeleteExpired in calls of 1000 until it
#   returns 0 (pebble, and PostgreSQL; Redis and etcd forget by themselves),
#   and for pebble the LSM after it: compaction debt, point and range
#   deletions per level.
#
# pebble: `spent serve` starts once on an empty data directory (secret,
# fence), the driver loads DATA/pebble through pebble.Open and measures,
# then times `spent serve` from exec to /readyz 200 after a clean stop
# (SIGTERM) and after kill -9 under claims. Redis (appendonly yes,
# appendfsync always), PostgreSQL (fsync on, synchronous_commit on) and
# etcd (one member, durable defaults, --quota-backend-bytes 8 GiB) run on
# loopback ports in the work directory, one fresh server per size; their
# restart is server start to first answer.
#
# It writes bench/scale/results.json (the format `spent size` reads: see
# bench/scale/README.md), rewrites the table of BENCHMARKS.md's "Cost curve"
# section between its markers, and draws bench/scale/cost-curve.png with
# bench/plot/cost-curve.gp.
#
# Usage: bench/scale.sh [--pebble SIZES] [--redis SIZES] [--postgres SIZES]
#                       [--etcd SIZES] [--duration D] [--dir DIR] [--out FILE]
#                       [--no-md] [--keep] [--note TEXT]
#   SIZES       comma-separated record counts (1e6, 1000000 or 1M); "" skips
#               the store. Defaults: pebble 1e6,1e7,1e8; redis 1e6,1e7;
#               postgres 1e6,1e7; etcd 1e6.
#   --duration  each claim measurement, a Go duration (default 20s)
#   --dir       where the work directory (a new spent-scale-XXXXXX, removed
#               at the end) goes, on the disk to measure (default /var/tmp);
#               it must have room for the largest pebble size (about 120
#               bytes a record, times 1.5: a billion does not fit in 80 GB)
#   --out       results file (default bench/scale/results.json)
#   --no-md     leave BENCHMARKS.md and the PNG alone
#   --keep      keep the work directory
#   --note      TEXT appended to the notes of every run (say "development
#               run" when the sizes are not the ones to quote)
#
# Needs Go, redis-server and redis-cli (Debian: redis-server, redis-tools),
# PostgreSQL's initdb, pg_ctl, postgres and psql (Debian: postgresql), and
# gnuplot: it installs the Debian package gnuplot-nox with apt-get if gnuplot
# is missing. Run as root, PostgreSQL runs as the user postgres.
set -euo pipefail
cd "$(dirname "$0")/.."

command_line="bench/scale.sh"
for a in "$@"; do
	if [[ $a =~ ^[A-Za-z0-9_.,:/=+-]+$ ]]; then command_line+=" $a"; else command_line+=" '${a//\'/\'\\\'\'}'"; fi
done
pebble_sizes=1e6,1e7,1e8
redis_sizes=1e6,1e7
postgres_sizes=1e6,1e7
etcd_sizes=1e6
duration=20s
work=""
out=bench/scale/results.json
md=yes
keep=no
note=""
while [ $# -gt 0 ]; do
	case $1 in
	--pebble) pebble_sizes=$2; shift 2 ;;
	--redis) redis_sizes=$2; shift 2 ;;
	--postgres) postgres_sizes=$2; shift 2 ;;
	--etcd) etcd_sizes=$2; shift 2 ;;
	--duration) duration=$2; shift 2 ;;
	--dir) work=$2; shift 2 ;;
	--out) out=$2; shift 2 ;;
	--no-md) md=no; shift ;;
	--keep) keep=yes; shift ;;
	--note) note=$2; shift 2 ;;
	*) sed -n '2,/^set -euo/p' "$0" | sed '$d' >&2; exit 2 ;;
	esac
done

# count SIZE prints SIZE (1e6, 1M, 1000000) as an integer.
count() {
	awk -v s="$1" 'BEGIN { m = 1; if (s ~ /k$/) m = 1e3; if (s ~ /M$/) m = 1e6; if (s ~ /G$/) m = 1e9;
		sub(/[kMG]$/, "", s); printf "%.0f\n", s * m }'
}
sizes() { tr ',' ' ' <<<"$1"; }

mkdir -p "${work:=/var/tmp}"
work=$(mktemp -d "$(cd "$work" && pwd)/spent-scale-XXXXXX")
chmod 755 "$work" # PostgreSQL's user must reach its directory in it
pids=()
# forget PID drops an exited server from the ones cleanup kills, so that a
# process id reused later is never killed.
forget() {
	local keep=() p
	for p in "${pids[@]}"; do [ "$p" = "$1" ] || keep+=("$p"); done
	pids=("${keep[@]}")
}
cleanup() {
	for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null || true; done
	if [ "$keep" = no ]; then rm -rf "$work"; else echo "== kept $work"; fi
}
trap cleanup EXIT

# The largest pebble size must fit: about 120 bytes a record, and half as
# much again for compactions and the zero-filled WAL.
avail=$(df -P -B1 "$work" | awk 'NR == 2 { print $4 }')
for n in $(sizes "$pebble_sizes"); do
	need=$(awk -v n="$(count "$n")" 'BEGIN { printf "%.0f", n * 120 * 1.5 + 2^30 }')
	if [ "$need" -gt "$avail" ]; then
		echo "scale.sh: pebble at $n records needs about $((need >> 30)) GiB on the disk of $work; $((avail >> 30)) GiB are free. Leave that size out, or give --dir on a larger disk." >&2
		exit 1
	fi
done

if [ "$md" = yes ] && ! command -v gnuplot >/dev/null; then
	echo "== gnuplot missing: installing the Debian package gnuplot-nox"
	apt-get install -y -q gnuplot-nox >/dev/null
fi

echo "== building spent and the driver into $work"
go build -o "$work/spent" ./cmd/spent
go build -o "$work/scale" ./bench/scale
scale() { "$work/scale" "$@"; }

machine="$(nproc) vCPU, $(free -g | awk '/^Mem:/ { print $2 }') GiB RAM, $(uname -srm); data dir on $(df -P -T "$work" | awk 'NR == 2 { printf "%s (%s), %d GiB free", $1, $2, $5 / 2^20 }')"
scale init -out "$out" -command "$command_line" -machine "$machine"
echo "== machine: $machine"

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.3f", b - a }'; }
# gone PID waits until process PID has exited.
gone() {
	while kill -0 "$1" 2>/dev/null; do sleep 0.05; done
	forget "$1"
}

# --- pebble ---
for n in $(sizes "$pebble_sizes"); do
	echo "== pebble, $n records"
	scale pebble -out "$out" -records "$n" -duration "$duration" -dir "$work/pebble-$n" -spent "$work/spent"
	rm -rf "$work/pebble-$n"
done

# --- Redis ---
redis_start() { # DIR PORT: starts redis-server, prints its pid once it answers PONG
	redis-server --port "$2" --bind 127.0.0.1 --dir "$1" --appendonly yes --appendfsync always --save "" \
		--daemonize yes --logfile "$1/redis.log" --pidfile "$1/redis.pid"
	until [ "$(redis-cli -p "$2" ping 2>/dev/null)" = PONG ]; do sleep 0.01; done
	cat "$1/redis.pid"
}
for n in $(sizes "$redis_sizes"); do
	echo "== redis, $n records"
	command -v redis-server >/dev/null || { echo "scale.sh: redis-server not found: install redis-server and redis-tools" >&2; exit 1; }
	dir=$work/redis-$n port=$(free_port)
	mkdir -p "$dir"
	pid=$(redis_start "$dir" "$port")
	pids+=("$pid")
	scale shared -out "$out" -store redis -addr "127.0.0.1:$port" -pid "$pid" -records "$n" -duration "$duration"
	redis-cli -p "$port" shutdown >/dev/null 2>&1 || true
	gone "$pid"
	t=$(now) pid=$(redis_start "$dir" "$port") clean=$(since "$t")
	pids+=("$pid")
	scale check -store redis -addr "127.0.0.1:$port" -records "$n"
	kill -9 "$pid"
	gone "$pid"
	t=$(now) pid=$(redis_start "$dir" "$port") killed=$(since "$t")
	pids+=("$pid")
	scale check -store redis -addr "127.0.0.1:$port" -records "$n"
	scale set -out "$out" -store redis -records "$n" restart_clean_s="$clean" restart_kill_s="$killed" \
		"notes+=restarts are redis-server start to the first PONG (the AOF, never rewritten here, replayed), after SHUTDOWN and after kill -9 of the idle server"
	redis-cli -p "$port" shutdown nosave >/dev/null 2>&1 || true
	gone "$pid"
	rm -rf "$dir"
done

# --- PostgreSQL ---
pg_bindir() {
	for d in "$(dirname "$(command -v initdb 2>/dev/null || echo /nonexistent/x)")" $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -t/ -k4 -n -r); do
		if [ -x "$d/initdb" ] && [ -x "$d/pg_ctl" ] && [ -x "$d/postgres" ] && [ -x "$d/psql" ]; then
			echo "$d"
			return
		fi
	done
	echo "scale.sh: initdb, pg_ctl, postgres and psql not found: install the Debian package postgresql" >&2
	exit 1
}
as_pg() { "$@"; }
if [ "$(id -u)" = 0 ]; then as_pg() { runuser -u postgres -- "$@"; }; fi
pg_start() { # DIR PORT: starts the cluster, prints the postmaster's pid once it answers
	as_pg "$bindir/pg_ctl" start -W -D "$1/data" -l "$1/postgres.log" -o "-p $2 -k $1 -c listen_addresses=127.0.0.1 \
		-c fsync=on -c synchronous_commit=on -c full_page_writes=on -c wal_sync_method=fdatasync \
		-c shared_buffers=128MB -c max_connections=300 -c max_wal_size=1GB" >/dev/null
	until "$bindir/psql" -X -q -At "postgres://postgres@127.0.0.1:$2/postgres?sslmode=disable" -c 'SELECT 1' >/dev/null 2>&1; do sleep 0.01; done
	head -1 "$1/data/postmaster.pid"
}
for n in $(sizes "$postgres_sizes"); do
	echo "== postgres, $n records"
	bindir=$(pg_bindir)
	dir=$work/postgres-$n port=$(free_port)
	mkdir -p "$dir"
	[ "$(id -u)" = 0 ] && chown postgres: "$dir"
	as_pg "$bindir/initdb" -D "$dir/data" -U postgres --auth=trust -E UTF8 --locale=C --no-instructions >/dev/null
	dsn="postgres://postgres@127.0.0.1:$port/postgres?sslmode=disable"
	pid=$(pg_start "$dir" "$port")
	pids+=("$pid")
	scale shared -out "$out" -store postgres -addr "$dsn" -pid "$pid" -records "$n" -duration "$duration"
	as_pg "$bindir/pg_ctl" stop -D "$dir/data" -m fast -w >/dev/null
	forget "$pid"
	t=$(now) pid=$(pg_start "$dir" "$port") clean=$(since "$t")
	pids+=("$pid")
	scale check -store postgres -addr "$dsn" -records "$n"
	kill -9 "$pid" $(cat "/proc/$pid/task/$pid/children" 2>/dev/null) 2>/dev/null || true
	gone "$pid"
	t=$(now) pid=$(pg_start "$dir" "$port") killed=$(since "$t")
	pids+=("$pid")
	scale check -store postgres -addr "$dsn" -records "$n"
	scale set -out "$out" -store postgres -records "$n" restart_clean_s="$clean" restart_kill_s="$killed" \
		"notes+=restarts are pg_ctl start to the first SELECT 1, after pg_ctl stop -m fast and after kill -9 of the idle postmaster and its children (crash recovery)"
	as_pg "$bindir/pg_ctl" stop -D "$dir/data" -m fast -w >/dev/null
	forget "$pid"
	rm -rf "$dir"
done

# --- etcd ---
etcd_healthy() { [[ $( (exec 3<>"/dev/tcp/127.0.0.1/$1" && printf 'GET /health HTTP/1.0\r\n\r\n' >&3 && cat <&3) 2>/dev/null) == *'"health":"true"'* ]]; }
etcd_start() { # DIR CPORT PPORT: starts one member in the background; sets pid
	"$work/etcd" --name m0 --data-dir "$1/m0" --quota-backend-bytes $((8 << 30)) \
		--listen-client-urls "http://127.0.0.1:$2" --advertise-client-urls "http://127.0.0.1:$2" \
		--listen-peer-urls "http://127.0.0.1:$3" --initial-advertise-peer-urls "http://127.0.0.1:$3" \
		--initial-cluster "m0=http://127.0.0.1:$3" --initial-cluster-state new --initial-cluster-token "spent-scale-$$" \
		--log-level warn >>"$1/etcd.log" 2>&1 </dev/null &
	pid=$!
	pids+=("$pid")
	until etcd_healthy "$2"; do
		kill -0 "$pid" 2>/dev/null || { echo "scale.sh: etcd exited:" >&2; tail -n 5 "$1/etcd.log" >&2; exit 1; }
		sleep 0.01
	done
}
for n in $(sizes "$etcd_sizes"); do
	echo "== etcd, $n records"
	[ -x "$work/etcd" ] || go build -o "$work/etcd" ./internal/etcdtest/member
	dir=$work/etcd-$n cport=$(free_port) pport=$(free_port)
	mkdir -p "$dir"
	etcd_start "$dir" "$cport" "$pport"
	scale shared -out "$out" -store etcd -addr "127.0.0.1:$cport" -pid "$pid" -records "$n" -duration "$duration"
	kill -TERM "$pid"
	gone "$pid"
	t=$(now)
	etcd_start "$dir" "$cport" "$pport"
	clean=$(since "$t")
	scale check -store etcd -addr "127.0.0.1:$cport" -records "$n"
	kill -9 "$pid"
	gone "$pid"
	t=$(now)
	etcd_start "$dir" "$cport" "$pport"
	killed=$(since "$t")
	scale check -store etcd -addr "127.0.0.1:$cport" -records "$n"
	scale set -out "$out" -store etcd -records "$n" restart_clean_s="$clean" restart_kill_s="$killed" \
		"notes+=restarts are etcd start to /health true, after SIGTERM and after kill -9 of the idle member"
	kill -TERM "$pid"
	gone "$pid"
	rm -rf "$dir"
done

if [ -n "$note" ]; then scale set -out "$out" -all "notes+=$note"; fi
echo "== results: $out"
scale render -in "$out"
if [ "$md" = yes ]; then
	scale render -in "$out" -md BENCHMARKS.md -dat "$work/cost-curve.dat" -go cmd/spent/size_figures.go
	gnuplot -e "datafile='$work/cost-curve.dat'; outfile='bench/scale/cost-curve.png'" bench/plot/cost-curve.gp
	echo "== BENCHMARKS.md's cost-curve table, bench/scale/cost-curve.png and spent size's figures (cmd/spent/size_figures.go) rewritten"
fi
