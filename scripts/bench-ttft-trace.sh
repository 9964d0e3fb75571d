#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Time to first token on the public trace at its own times: make demo's
# processes (a driver and two shards over net_memif, each shard with its
# second tier on disk), the trace's first BENCH_TTFT_TRACE_REQUESTS requests
# (default all 3,993; 600 for a check of a few minutes) arriving at their
# timestamps (time scale 1: as recorded), the wafer computing what is not
# refilled at 69,400 tokens/s (the default rate, docs/results.md says where
# it comes from), once with io-only (every hit refilled) and once with the
# adaptive policy. Compute-only is not run: every TTFT run's summary gives
# it modelled on the same arrivals
# (lib/wafermodel, equal to the emulator's own compute-only run to the
# microsecond, test_emulator). Prints:
#
#   bench: ttft_trace_p50_vs_compute_only  the adaptive p50 against compute-only's
#                                          (modelled); ratio compute-only / adaptive
#   bench: ttft_trace_p99_vs_best_baseline the adaptive p99 against the better of
#                                          compute-only's and io-only's; ratio
#                                          adaptive / best (goal <= 1.05)
#   bench: ttft_trace_p50_vs_io_only       the adaptive p50 against io-only's
#
# and each run's hit ratio. The trace is read where make demo reads it
# (../shared/traces/mooncake_synthetic.jsonl, or BENCH_TTFT_TRACE=F); without
# it the bench says so and is skipped. Each request's arrival is its own, so
# a run takes about as long as its requests' span (the whole trace: 17
# minutes, so the bench 35; the first 600: 166 s) plus what the last ones
# wait for.
set -u
BUILD=${1:-build}
cd "$(dirname "$0")/.." || exit 2
trace=${BENCH_TTFT_TRACE:-../shared/traces/mooncake_synthetic.jsonl}
n=${BENCH_TTFT_TRACE_REQUESTS:-3993}
tps=69400
case "$n" in '' | *[!0-9]* | 0*) echo "bench-ttft-trace: BENCH_TTFT_TRACE_REQUESTS=$n: want a whole number above 0" >&2; exit 2 ;; esac
if [ ! -f "$trace" ]; then
	echo "bench: ttft on the public trace skipped (no trace file at $trace; BENCH_TTFT_TRACE=F names one)"
	exit 0
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# run POLICY: one demo on the trace, its JSON in $tmp/POLICY.json
run() {
	local pol=$1 rc
	sed -e "s/^  # refill_policy = \"adaptive\";/  refill_policy = \"$pol\";/" \
		config/memif-driver.cfg >"$tmp/$pol.cfg"
	if ! grep -q "^  refill_policy = \"$pol\";" "$tmp/$pol.cfg"; then
		echo "bench-ttft-trace: config/memif-driver.cfg has no '# refill_policy = \"adaptive\";' line to set" >&2
		exit 1
	fi
	echo "bench-ttft-trace: $n requests of the trace at their times with $pol ..." >&2
	KVSS_DEMO_DRIVER_CFG="$tmp/$pol.cfg" KVSS_DEMO_TRACE="$trace" KVSS_DEMO_LIMIT="$n" \
		KVSS_DEMO_ARRIVALS=trace KVSS_DEMO_TIME_SCALE=1 KVSS_DEMO_PREFILL_TPS=$tps \
		KVSS_DEMO_JSON="$tmp/$pol.json" KVSS_DEMO_TAG="bench_tr_$pol$$" \
		scripts/demo.sh "$BUILD" >"$tmp/$pol.log" 2>&1
	rc=$?
	if [ $rc != 0 ] || ! grep -q '^demo: PASS' "$tmp/$pol.log" || [ ! -s "$tmp/$pol.json" ]; then
		echo "bench-ttft-trace: the run with $pol did not pass (exit $rc); its log ends:" >&2
		tail -n 20 "$tmp/$pol.log" >&2
		exit 1
	fi
}

run io-only
run adaptive
python3 - "$tmp" "$n" <<'PY'
import json, sys
tmp, n = sys.argv[1], sys.argv[2]
io = json.loads(open(f"{tmp}/io-only.json").read())
a = json.loads(open(f"{tmp}/adaptive.json").read())
if any(j["verify_failures"] for j in (io, a)):
    sys.exit("bench-ttft-trace: a refilled byte was wrong")
c50, c99 = a["model_compute_only_ttft_p50_ms"], a["model_compute_only_ttft_p99_ms"]
if c50 is None or a["ttft_p50_ms"] is None or io["ttft_p50_ms"] is None:
    sys.exit("bench-ttft-trace: a run gave no TTFT, or no compute-only beside it")
best = min(c99, io["ttft_p99_ms"])
print(f"bench: ttft_trace_p50_vs_compute_only {a['ttft_p50_ms']:.2f} ms "
      f"(baseline {c50:.2f} ms, ratio {c50 / a['ttft_p50_ms']:.2f})")
print(f"bench: ttft_trace_p99_vs_best_baseline {a['ttft_p99_ms']:.2f} ms "
      f"(baseline {best:.2f} ms, ratio {a['ttft_p99_ms'] / best:.2f})")
print(f"bench: ttft_trace_p50_vs_io_only {a['ttft_p50_ms']:.2f} ms "
      f"(baseline {io['ttft_p50_ms']:.2f} ms, ratio {io['ttft_p50_ms'] / a['ttft_p50_ms']:.2f})")
print(f"bench-ttft-trace: {n} requests at their times, 69,400 tokens/s: hit ratio io-only "
      f"{io['hit_ratio']:.4f}, adaptive {a['hit_ratio']:.4f}; adaptive computed "
      f"{a['recomputed_by_choice_tokens']} hit tokens by choice, {a['refill_probes']} probes")
PY
