# bench/resp-common.sh: what bench/resp.sh and bench/resp-ab.sh share;
# sourced, not run.

# free_port prints a loopback port free at the moment.
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

# wait_ping waits until a RESP server answers PING on port $1 with $2
# (PONG unless given: bench/bareresp answers OK), or exits.
wait_ping() {
	for _ in $(seq 100); do
		redis-cli -p "$1" PING 2>/dev/null | grep -qx "${2:-PONG}" && return 0
		sleep 0.1
	done
	echo "$(basename "$0"): nothing answers PING on port $1" >&2
	exit 1
}

# spent_config FILE HTTP_PORT RESP_PORT DATA writes the config both scripts
# serve with: the embedded store in DATA, and the RESP prefix "key:" mapped
# to a refuse namespace of 30 h retention.
spent_config() {
	cat >"$1" <<TOML
listen = "127.0.0.1:$2"
resp_listen = "127.0.0.1:$3"
data = "$4"
log_level = "warn"

[namespaces.bench]
mode = "refuse"
retention = "30h"
lease = "30s"
on_lease_expiry = "hold"

[resp]
namespaces = { "key:" = "bench" }
TOML
}

# cpu prints the CPU seconds (user + system) process $1 has used.
cpu() { awk -v t="$(getconf CLK_TCK)" '{ print ($14 + $15) / t }' "/proc/$1/stat"; }
