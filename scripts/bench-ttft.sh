#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# What a hit is worth to the user: time to first token (TTFT) with the cache
# against the same arrivals without it. One process (role "all": driver,
# wafer emulator and a shard over net_ring), the built-in workload's first
# BENCH_TTFT_REQUESTS requests (default 100) arriving as a Poisson process of
# BENCH_TTFT_RATE a second (default 10, seed 1), at three prefill rates a
# decade apart around the default one (69,400 tokens/s: docs/results.md
# says where it comes from), each under the three refill policies. Prints,
# per prefill rate R (tokens/s):
#
#   bench: ttft_p50_vs_compute_only_R  the adaptive policy's TTFT p50 against
#                                      compute-only's (the cache off); ratio:
#                                      compute-only / adaptive (goal >= 3)
#   bench: ttft_p99_vs_best_baseline_R the adaptive p99 against the better of
#                                      compute-only's and io-only's; ratio:
#                                      adaptive / best (goal <= 1.05)
#   bench: ttft_p50_split_vs_adaptive_R Cake's split (refill_policy "split")
#                                      against adaptive; ratio: adaptive /
#                                      split (above 1: the split is sooner)
#   bench: ttft_p99_split_vs_adaptive_R the same at p99
#
# Every run must pass (exit 0, no wrong byte): a figure of a failing run
# would not be the system's (exit 1).
set -u
BUILD=${1:-build}
cd "$(dirname "$0")/.."
n=${BENCH_TTFT_REQUESTS:-100}
arr=${BENCH_TTFT_RATE:-10}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp" /var/run/dpdk/kvss_bench_ttft_$$' EXIT

# run POLICY RATE: one run's JSON line in $tmp/POLICY-RATE.json
run() {
	local name=$1-$2
	sed -e "s/^  generate = 200;\$/&\\n  arrivals = \"poisson\"; arrival_rate = $arr; arrival_seed = 1;/" \
		-e "s/^  policy = \"lru\";\$/&\\n  recompute_tokens_per_s = $2; refill_policy = \"$1\";/" \
		config/all-in-one.cfg >"$tmp/$name.cfg"
	if ! grep -q "refill_policy = \"$1\"" "$tmp/$name.cfg" || ! grep -q 'arrivals = "poisson"' "$tmp/$name.cfg"; then
		echo "bench-ttft: could not set the policy and arrivals in a copy of config/all-in-one.cfg" >&2
		exit 1
	fi
	if ! timeout 600 "$BUILD/kvss" --no-pci --no-huge -m 1024 --lcores "0@0,1@1" \
		--log-level lib.eal:error --no-telemetry --file-prefix "kvss_bench_ttft_$$" -- \
		--config "$tmp/$name.cfg" --limit "$n" >"$tmp/$name.log" 2>&1; then
		echo "bench-ttft: $name failed:" >&2
		tail -5 "$tmp/$name.log" >&2
		exit 1
	fi
	grep '^{' "$tmp/$name.log" | tail -1 >"$tmp/$name.json"
}

for rate in 6940 69400 694000; do
	for pol in compute-only io-only adaptive split; do
		run $pol $rate
	done
	python3 - "$tmp" "$rate" <<'PY'
import json, sys
tmp, rate = sys.argv[1], sys.argv[2]
j = {p: json.loads(open(f"{tmp}/{p}-{rate}.json").read()) for p in ("compute-only", "io-only", "adaptive", "split")}
if any(v["verify_failures"] or v["exit_status"] for v in j.values()):
    sys.exit(f"bench-ttft: a run at {rate} tokens/s was not right")
a, c, io = j["adaptive"], j["compute-only"], j["io-only"]
print(f"bench: ttft_p50_vs_compute_only_{rate} {a['ttft_p50_ms']:.2f} ms "
      f"(baseline {c['ttft_p50_ms']:.2f} ms, ratio {c['ttft_p50_ms'] / max(a['ttft_p50_ms'], 1e-3):.2f})")
best = min(c["ttft_p99_ms"], io["ttft_p99_ms"])
print(f"bench: ttft_p99_vs_best_baseline_{rate} {a['ttft_p99_ms']:.2f} ms "
      f"(baseline {best:.2f} ms, ratio {a['ttft_p99_ms'] / max(best, 1e-3):.2f})")
sp = j["split"]
for q in ("p50", "p99"):
    print(f"bench: ttft_{q}_split_vs_adaptive_{rate} {sp[f'ttft_{q}_ms']:.2f} ms "
          f"(baseline {a[f'ttft_{q}_ms']:.2f} ms, ratio {a[f'ttft_{q}_ms'] / max(sp[f'ttft_{q}_ms'], 1e-3):.2f})")
print(f"bench-ttft: {rate} tokens/s: split {sp['split_requests']} hits, fronts {sp['split_tokens']} tokens", file=sys.stderr)
print(f"bench-ttft: {rate} tokens/s: hit ratio {a['hit_ratio']:.3f}, io-only p50 {io['ttft_p50_ms']:.2f} ms, "
      f"hit tokens computed by choice {a['recomputed_by_choice_tokens']}", file=sys.stderr)
PY
	[ $? -eq 0 ] || exit 1
done
