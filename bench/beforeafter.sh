#!/usr/bin/env bash
# bench/beforeafter.sh: the in-process and HTTP claim rates of two commits,
# side by side in one run, so that a restructuring can show it cost nothing.
#
# It builds the test binaries of ./pebble and ./http at BASE (in a temporary
# git worktree) and at the working tree, then runs them in turn, ROUNDS
# times, alternating which goes first:
#
#   pebble: BenchmarkClaim, BenchmarkLedgerClaim and BenchmarkBareEngine
#           (one-step claims of fresh keys, each durable before it returns;
#           the bare engine is the baseline in the same binary);
#   http:   BenchmarkClaimHTTP and BenchmarkBareHandler (POST /v1/claim
#           through the server on the embedded store, and a bare handler).
#
# Each line printed is one benchmark result, prefixed by "base" or "head";
# a table of the medians of claims/s follows, with head ÷ base. The bare
# figures (BareEngine, BareHandler) show how much the machine itself moved
# between runs.
#
# Usage: bench/beforeafter.sh BASE [ROUNDS] [BENCHTIME]
#   BASE       the commit to compare against (e.g. the last commit before a change)
#   ROUNDS     rounds of each (default 3)
#   BENCHTIME  -test.benchtime of each benchmark (default 2s)
set -euo pipefail

BASE=${1:?usage: bench/beforeafter.sh BASE [ROUNDS] [BENCHTIME]}
ROUNDS=${2:-3}
BENCHTIME=${3:-2s}
cd "$(dirname "$0")/.."

tmp=$(mktemp -d /tmp/spent-beforeafter-XXXXXX)
cleanup() {
	git worktree remove --force "$tmp/base" >/dev/null 2>&1 || true
	rm -rf "$tmp"
}
trap cleanup EXIT

git worktree add -q --detach "$tmp/base" "$BASE"
for pkg in pebble http; do
	(cd "$tmp/base" && go test -c -o "$tmp/base-$pkg.test" ./$pkg)
	go test -c -o "$tmp/head-$pkg.test" ./$pkg
done
echo "base $(git rev-parse --short "$BASE"), head $(git rev-parse --short HEAD)$(git diff --quiet || echo ' + uncommitted changes'); $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"

run() { # which pkg pattern
	local which=$1 pkg=$2 pattern=$3
	(cd "$pkg" && "$tmp/$which-$pkg.test" -test.run '^$' -test.bench "$pattern" \
		-test.benchtime "$BENCHTIME" -test.benchmem) | grep '^Benchmark' | sed "s/^/$which /"
}

out="$tmp/results"
for round in $(seq 1 "$ROUNDS"); do
	order="base head"
	if ((round % 2 == 0)); then order="head base"; fi
	for which in $order; do
		run "$which" pebble 'Benchmark(Claim|LedgerClaim|BareEngine)$/^(Concurrent64|Batch100x1)$' | tee -a "$out"
		run "$which" http 'Benchmark(ClaimHTTP|BareHandler)$/^(pebble|single)$' | tee -a "$out"
	done
done

echo
echo "medians of claims/s over $ROUNDS rounds"
printf "%-40s %12s %12s %8s\n" benchmark base head head/base
awk '
	{ for (i = 3; i < NF; i++) if ($(i + 1) == "claims/s") v[$2, $1] = v[$2, $1] " " $i; names[$2] = 1 }
	function median(s,    a, n, i, j, t) {
		n = split(s, a, " ")
		for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
		return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
	}
	END {
		for (b in names) {
			mb = median(v[b, "base"]); mh = median(v[b, "head"])
			printf "%-40s %12.0f %12.0f %8.2f\n", b, mb, mh, mh / mb
		}
	}' "$out" | sort
