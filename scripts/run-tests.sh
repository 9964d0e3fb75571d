#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Run every test: the Criterion suites, the kvss-dump golden checks, and the
# fuzzers (frames, files read at start, the second tier's file) for a
# bounded time. Prints one summary line at the end.
set -u
BUILD=${1:-build}
FUZZ_SECONDS=${2:-30}
export TSAN_OPTIONS="halt_on_error=1 ${TSAN_OPTIONS:-}"
cd "$(dirname "$0")/.."

failed=0
passed=0
times=()
log=$(mktemp)
trap 'rm -f "$log"' EXIT
# Run one step; count its individual tests from the Criterion synthesis line
# or a closing "N passed, M failed" line, else count the step itself.
run() {
	local name=$1 rc p f t0
	shift
	echo "== $name"
	t0=$SECONDS
	"$@" 2>&1 | tee "$log"
	rc=${PIPESTATUS[0]}
	# What each step costs, for make check's budget (25 minutes here).
	echo "== $name: $((SECONDS - t0)) s"
	times+=("$((SECONDS - t0)) $name")
	p=$(sed -n 's/.*Passing: \([0-9]*\).*/\1/p' "$log" | tail -n 1)
	f=$(sed -n 's/.*Failing: \([0-9]*\) | Crashing: \([0-9]*\).*/\1+\2/p' "$log" | tail -n 1)
	if [ -z "$p" ]; then
		p=$(sed -n 's/.*: \([0-9]*\) passed, \([0-9]*\) failed$/\1/p' "$log" | tail -n 1)
		f=$(sed -n 's/.*: \([0-9]*\) passed, \([0-9]*\) failed$/\2/p' "$log" | tail -n 1)
	fi
	if [ -z "$p" ]; then
		if [ "$rc" -eq 0 ]; then p=1; f=0; else p=0; f=1; fi
	fi
	f=$((${f:-0}))
	if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then
		f=1
	fi
	[ "$f" -eq 0 ] || echo "FAILED: $name" >&2
	passed=$((passed + p))
	failed=$((failed + f))
}

# The Criterion suites, then those built with AddressSanitizer and UBSan
# (make check-sanitize-build) again.
for t in "$BUILD"/test/test_* "$BUILD"/asan/test/test_*; do
	[ -x "$t" ] || continue
	run "${t#"$BUILD"/}" "$t" --jobs 2 --short-filename
done
[ -x "$BUILD/asan/kvss-trace" ] && run kvss-trace-asan scripts/test-trace.sh "$BUILD/asan"
if [ -x "$BUILD/asan/kvss" ]; then
	# DPDK's own memory (rte_malloc, mbufs) is not instrumented; kvss's is.
	run kvss-shard-pcap-asan scripts/test-shard-pcap.sh "$BUILD/asan"
	run kvss-replay-pcap-asan scripts/test-replay-pcap.sh "$BUILD/asan"
	# The end-to-end runs that move and check bytes through kvss's memory
	# (one process: multimodal, speculation, two models, a sliding window,
	# lost data; the memif demo, with a refill lcore; telemetry), kvss and
	# its tools built so. The plain run below has every section; those
	# left out here wait on restarts and timers (4*, 5), repeat a path
	# over more processes (2b, 2d) or fit estimates (1a): 334 s with them,
	# about 80 s without.
	run kvss-e2e-asan env E2E_SECTIONS="1 1b 1s 1t 1w 1c 2 2c 3" \
		scripts/test-e2e.sh "$BUILD/asan"
	# The fault soak's first seeds, so built.
	run kvss-soak-asan env SEEDS=4 SOAK_TIMEOUT=240 scripts/soak.sh "$BUILD/asan"
fi

run stress_kvstore "$BUILD/test/stress_kvstore" 2000000
run stress_kvstore_tsan "$BUILD/test/stress_kvstore_tsan" 1000000
run kvss-dump scripts/test-dump.sh "$BUILD"
# Every tool at its edges: stdout that cannot be written, -h, unknown keys.
run tools scripts/test-tools.sh "$BUILD"
run wireshark scripts/test-wireshark.sh "$BUILD"
run telemetry-doc scripts/telemetry-doc.py --check docs/telemetry.md
run metrics scripts/test-metrics.sh "$BUILD"
# The monitoring kit: the example prometheus.yml, the alerting rules and their
# tests, every query of the Grafana dashboard against a live scrape.
run monitoring scripts/test-monitoring.sh "$BUILD"
run exporter scripts/test-exporter.sh "$BUILD"
run words scripts/test-words.sh "$BUILD"
run kvss-trace scripts/test-trace.sh "$BUILD"
run kvss-shard-pcap scripts/test-shard-pcap.sh "$BUILD"
run kvss-replay-pcap scripts/test-replay-pcap.sh "$BUILD"
run kvss-e2e scripts/test-e2e.sh "$BUILD"
# The timing side channel: a probe of another salt or organization looks
# cold to a two-sample test; with the victim's salt it does not.
run kvss-audit scripts/test-audit.sh "$BUILD"
# make demo as a new user meets it: a missing trace, configuration typos,
# KVSS_DEMO_TRACE, the second tiers as found, Ctrl-C (short runs).
run kvss-demo scripts/test-demo.sh "$BUILD"
# A sample of the fault soak (make soak SEEDS=N runs more).
run kvss-soak env SEEDS=20 FIRST=1001 scripts/soak.sh "$BUILD"
# ... with columns living past their TTL: none may be refilled expired.
run kvss-soak-ttl env SOAK_TTL=1 SEEDS=3 FIRST=3001 scripts/soak.sh "$BUILD"
# ... and with processes: a shard or the driver killed (SIGKILL) mid-run.
run kvss-soak-procs env SEEDS=3 FIRST=1001 scripts/soak-procs.sh "$BUILD"
# ... a shard silent for a while (SIGSTOP) keeps its cache.
run kvss-silent scripts/test-silent.sh "$BUILD"
run kvss-start scripts/test-start.sh "$BUILD"
# Hugepages reserved by the script, used when free, given back exactly.
run hugepages scripts/test-hugepages.sh "$BUILD"
run kvss-l2 scripts/test-l2.sh "$BUILD"
# The shared level's client and kvss-shared against a throwaway Ceph cluster
# (started and stopped by the script; an OSD killed, then all).
run shared-rados scripts/test-shared.sh "$BUILD"
# ... and in the whole system: replicas in turn on one cluster, every byte
# checked (isolation, corruption, expiry, the reset, an OSD killed).
run shared-kvss scripts/test-shared-kvss.sh "$BUILD"
run kvss-rail scripts/test-rail.sh "$BUILD"
run kvss-poll scripts/test-poll.sh "$BUILD"
# A second producer of the protocol: kvss-udp-client over kernel UDP sockets
# against a real shard on a veth pair in namespaces of its own.
run kvss-udpclient scripts/test-udpclient.sh "$BUILD"
run kvss-examples scripts/test-examples.sh "$BUILD"
run fuzz_proto scripts/fuzz.sh "$BUILD/fuzz/fuzz_proto" "$BUILD/fuzz/corpus_proto" "$FUZZ_SECONDS"
run fuzz_files scripts/fuzz-files.sh "$BUILD/fuzz/fuzz_files" "$BUILD/fuzz/corpus_files" \
	"$(( (FUZZ_SECONDS + 1) / 2 ))"
# The second tier's file: mutated images opened, rebuilt and served.
run fuzz_kvdisk scripts/fuzz-kvdisk.sh "$BUILD/fuzz/fuzz_kvdisk" "$BUILD/fuzz/corpus_kvdisk" \
	"$(( (FUZZ_SECONDS + 1) / 2 ))"
# Objects and names read from the shared level (another machine wrote them).
run fuzz_shared_obj env FUZZ_REGRESS=test/fuzz/regress_shared FUZZ_MAX_LEN=4096 scripts/fuzz.sh \
	"$BUILD/fuzz/fuzz_shared_obj" "$BUILD/fuzz/corpus_shared_obj" "$(( (FUZZ_SECONDS + 1) / 2 ))"
# kvss-udp-client's decoder: what a shard can make the client read.
run fuzz_ucwire scripts/fuzz-ucwire.sh "$BUILD/fuzz/fuzz_ucwire" "$BUILD/fuzz/corpus_ucwire" \
	"$(( (FUZZ_SECONDS + 1) / 2 ))" "$BUILD/tools/gen_frames"
# The shard with its state: frames of every type through its lcores and tiers.
# Here its seeds and regression inputs (every input that once broke it: an
# L2_UP repeating a token, a refill of two versions, a refill cut short...),
# then 10,000 inputs from seed 1: bounded, and as far as the threads' turns
# allow the same run on every machine; make fuzz explores for FUZZ_SECONDS.
run fuzz_shard env FUZZ_SHARD_ARGS="-seed=1 -runs=10000" scripts/fuzz-shard.sh \
	"$BUILD/fuzz/fuzz_shard" "$BUILD/fuzz/corpus_shard" "$(( FUZZ_SECONDS < 60 ? FUZZ_SECONDS : 60 ))"

echo "check: the slowest steps: $(printf '%s\n' "${times[@]}" | sort -rn | head -8 | awk '{printf "%s %s s, ", $2, $1}')"
echo "check: $passed passed, $failed failed in $SECONDS s"
[ "$failed" -eq 0 ]
