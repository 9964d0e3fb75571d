#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# The documents' command lines are true (scripts/examples.py says how):
# - what every example of README.md and docs/*.md prints is what it prints:
#   each command whose output a document shows (`#   ...` lines) runs and
#   each line must match, every figure exactly but a timing-dependent one
#   the document writes as a range ([LO..HI]; never for kvss-trace,
#   kvss-dump or kvss-plan); the tables and sentences of docs/kvss-trace.md
#   built on them agree with them (the public trace's where it is here);
#   the exporter's labels named are docs/metrics.md's; the choices of an
#   option are those `kvss --help` gives;
# - no documented command writes into the checkout (only /tmp or a
#   directory the reader made);
# - the kvss command lines (docs/kvss.md, the comments heading config/*.cfg)
#   run as written on a two-core machine: scripts/examples.py checks each
#   one's lcores against its configuration and the files it reads, then
#   each is run here with only its file prefix, its memif sockets, the
#   captures it writes and its second tier's files moved to this test's own
#   names. None may say that an lcore its configuration names is missing,
#   and each ends with status 0; the telemetry query docs/kvss.md shows
#   answers while the example runs.
set -u
BUILD=${1:-build}
cd "$(dirname "$0")/.."
tmp=$(mktemp -d)
sfx=_ex$$
pids=()

cleanup() {
	local p
	for p in "${pids[@]}"; do
		kill -TERM "$p" 2>/dev/null
	done
	wait 2>/dev/null
	rm -rf "$tmp" /var/run/dpdk/*"$sfx"
}
trap cleanup EXIT
. scripts/check-lib.sh

while IFS=$'\t' read -r st src why; do
	check "$src: runs here ($why)" test "$st" != FAIL
done < <(python3 scripts/examples.py lint --cpus 2)
while IFS=$'\t' read -r st src why; do
	check "$src: $why" test "$st" = OK
done < <(python3 scripts/examples.py writes)
t0=$SECONDS
while IFS=$'\t' read -r st name why; do
	if [ "$st" = SKIP ]; then
		echo "examples: skipped: $name ($why)"
		continue
	fi
	check "$name" test "$st" = OK
	[ "$st" = OK ] || echo "    $why" >&2
done < <(python3 scripts/examples.py run --build "$BUILD" --tmp "$tmp" --suffix "$sfx")
echo "examples: what the documents print, compared in $((SECONDS - t0)) s"

# An example as this test runs it: its own prefix, sockets and output files.
own() {
	sed -e "s/--file-prefix \([A-Za-z0-9_]*\)/--file-prefix \1$sfx/" \
		-e "s#socket=/tmp/#socket=$tmp/#g" \
		-e "s#tx_pcap=\([^, ]*/\)\{0,1\}\([^/, ]*\)#tx_pcap=$tmp/\2#g" \
		-e "s#^build/#$BUILD/#" \
		-e "s#\(--config config/memif-shard[01].cfg\)#\1 --l2-dir $tmp/l2#" <<<"$1"
}
example() { python3 scripts/examples.py list | awk -F'\t' -v s="$1" '$1 ~ s { print $2 }'; }
# run NAME COMMAND: in the foreground, at most 120 s; its status.
run() {
	local name=$1 cmd
	cmd=$(own "$2")
	echo "examples: $name: $cmd"
	eval "timeout 120 $cmd" >"$tmp/$name.log" 2>&1
}
lacks_lcore_msg() { ! grep -q "is not an EAL worker" "$1"; }

# Ones that end by themselves.
for ex in "docs/kvss.md:13" "config/ci-pcap-shard.cfg" "config/all-in-one.cfg" \
	"config/all-in-one-hybrid.cfg"; do
	name=$(tr -c 'A-Za-z0-9\n' _ <<<"$ex")
	cmd=$(example "^$ex")
	check "$ex: the example is there" test -n "$cmd"
	[ -n "$cmd" ] || continue
	run "$name" "$cmd"
	check "$ex: exits 0" test $? -eq 0
	check "$ex: every lcore its configuration names is there" lacks_lcore_msg "$tmp/$name.log"
done
check "the capture example's refills went out on the second tx_pcap" test -s "$tmp/out-refill.pcap"

# The one-process example with --linger, and the query shown beside it.
cmd=$(example "^docs/kvss.md:18")
query=$(grep -m1 '^echo /swdriver/stats | dpdk-telemetry.py -f one' docs/kvss.md | sed 's/ *#.*//')
check "docs/kvss.md: the all-in-one example and its telemetry query are there" \
	test -n "$cmd" -a -n "$query"
cmd=$(own "${cmd% &}")
echo "examples: linger: $cmd"
eval "exec $cmd" >"$tmp/linger.log" 2>&1 &
pids+=($!)
for _ in $(seq 100); do
	grep -q "telemetry answers for" "$tmp/linger.log" && break
	sleep 0.2
done
check "--linger: the run is done and says telemetry stays" grep -q "telemetry answers for 60000 ms" "$tmp/linger.log"
eval "${query/-f one/-f one$sfx}" >"$tmp/q.json" 2>&1
check "docs/kvss.md's query answers while the example runs: every request done" \
	grep -q '"requests": 200, "completed": 200' "$tmp/q.json"
t0=$(date +%s%N)
kill -TERM "${pids[-1]}"
wait "${pids[-1]}"
rc=$?
ms=$((($(date +%s%N) - t0) / 1000000))
echo "examples: --linger ended by SIGTERM in $ms ms"
check "--linger: SIGTERM ends it with status 0" test $rc -eq 0
check "--linger: SIGTERM ends it within about a second" test $ms -lt 1500
check "--linger: the summary follows" grep -q "kvss: summary: requests 200 of 200" "$tmp/linger.log"
check "--linger: means nothing to a shard" \
	bash -c "$BUILD/kvss --no-pci --no-huge -m 64 --file-prefix lg$sfx -l 0-1 -- \
		--config config/ci-pcap-shard.cfg --linger 5 2>&1 | grep -q -- '--linger: means nothing to a shard'"

# The two-shard memif system of config/memif-*.cfg: shards first, then the
# driver (the trace it names, or the built-in workload), then SIGTERM.
for k in 0 1; do
	cmd=$(own "$(example "^config/memif-shard$k.cfg")")
	echo "examples: shard $k: $cmd"
	eval "exec $cmd" >"$tmp/memif$k.log" 2>&1 &
	pids+=($!)
done
run memif-driver "$(example "^config/memif-driver.cfg") --limit 300"
check "config/memif-driver.cfg (300 requests): exits 0" test $? -eq 0
check "config/memif-driver.cfg: every byte refilled right" \
	grep -q "verify failures 0 (bad bytes 0" "$tmp/memif-driver.log"
for k in 0 1; do
	kill -TERM "${pids[-1 - k]}"
	wait "${pids[-1 - k]}"
	rc=$?
	check "config/memif-shard$((1 - k)).cfg: exits 0 on SIGTERM" test $rc -eq 0
done
for k in 0 1; do
	check "config/memif-shard$k.cfg: every lcore its configuration names is there" \
		lacks_lcore_msg "$tmp/memif$k.log"
done
pids=()

# Without bsize= a memif buffer (2048 bytes) cannot hold the configuration's
# 9000-byte frames, which then arrived corrupted: refused at start, exit 2.
cmd=$(example "^config/memif-shard0.cfg")
run nobsize "${cmd/bsize=10240,/}"
check "memif without bsize: refused at start with exit 2" test $? -eq 2
check "memif without bsize: the message names bsize and mtu" \
	grep -q "mtu = 9000 wants 9018-byte frames, but its buffers hold 2048 (bsize unset" "$tmp/nobsize.log"

[ "$fail" -eq 0 ] || { mkdir -p "${KVSS_TEST_LOGS:-/tmp}/examples$sfx" && cp "$tmp"/*.log "${KVSS_TEST_LOGS:-/tmp}/examples$sfx/" && echo "examples: logs kept in ${KVSS_TEST_LOGS:-/tmp}/examples$sfx" >&2; }
check_summary "examples"
