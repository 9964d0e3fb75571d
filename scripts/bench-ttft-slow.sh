#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Time to first token with a slow tier: make demo's processes (a driver and
# two shards over net_memif, each shard with its second tier on disk) on
# the built-in workload's library of documents (their reuse is far apart,
# so the disk tier serves a share of the hits), requests arriving as a
# Poisson process, once refilling every hit (io-only) and once with the
# adaptive policy, the shards' disk reads throttled in the kernel (the
# blkio cgroup's read IOPS on the device the second tiers are on, for the
# demo's processes only). The adaptive driver learns the disk's line from
# its refills and computes what reading would make later. Prints:
#
#   bench: ttft_p99_vs_io_only_slow_disk  the adaptive p99 against io-only's;
#                                         ratio io-only / adaptive (goal >= 1.5)
#   bench: ttft_p50_vs_io_only_slow_disk  the same at the median
#
# BENCH_TTFT_SLOW_IOPS (default 100) the reads a second the disk is given;
# BENCH_TTFT_SLOW_RATE (default 8) the requests a second; the prefill rate
# is 694,000 tokens/s (ten times the default one, docs/results.md: where a
# disk read is worth less than computing). KVSS_BENCH_DIR: where the
# second tiers go (default /var/tmp: a disk, not tmpfs). Where the blkio
# cgroup is not mounted (cgroup v2 only) the bench says so and is skipped.
set -u
BUILD=${1:-build}
cd "$(dirname "$0")/.."
dir=${KVSS_BENCH_DIR:-/var/tmp}
iops=${BENCH_TTFT_SLOW_IOPS:-100}
rate=${BENCH_TTFT_SLOW_RATE:-8}
cg=/sys/fs/cgroup/blkio
if [ ! -w "$cg" ] || [ ! -e "$cg/blkio.throttle.read_iops_device" ]; then
	echo "bench: ttft slow disk skipped (no cgroup v1 blkio controller at $cg to throttle the disk)"
	exit 0
fi
tmp=$(mktemp -d "$dir/kvss-bench-ttft-slow.XXXXXX") || exit 2
grp=$cg/kvss_bench_ttft_$$
dev=$(lsblk -no MAJ:MIN "$(findmnt -no SOURCE --target "$tmp")" 2>/dev/null | head -n 1 | tr -d ' ')
cleanup() {
	rm -rf "$tmp"
	[ -d "$grp" ] && rmdir "$grp" 2>/dev/null
}
trap cleanup EXIT
if [ -z "$dev" ] || ! mkdir "$grp" || ! echo "$dev $iops" >"$grp/blkio.throttle.read_iops_device"; then
	echo "bench: ttft slow disk skipped (cannot throttle the device of $tmp: '$dev')"
	exit 0
fi

# run POLICY: one demo, in the throttled group, its JSON in $tmp/POLICY.json
run() {
	local pol=$1 rc
	sed -e "s/^  arrivals = \"closed\";/  arrivals = \"poisson\"; arrival_rate = $rate;/" \
		-e "s/^  # refill_policy = \"adaptive\";/  refill_policy = \"$pol\"; recompute_tokens_per_s = 694000;/" \
		config/memif-driver.cfg >"$tmp/$pol.cfg"
	if ! grep -q "refill_policy = \"$pol\"" "$tmp/$pol.cfg" || ! grep -q 'arrivals = "poisson"' "$tmp/$pol.cfg"; then
		echo "bench-ttft-slow: could not set the policy and arrivals in a copy of config/memif-driver.cfg" >&2
		exit 1
	fi
	mkdir -p "$tmp/l2-$pol"
	echo "bench-ttft-slow: the demo with $pol, the disk at $iops reads/s ..." >&2
	(
		echo $BASHPID >"$grp/tasks"
		exec env KVSS_DEMO_DRIVER_CFG="$tmp/$pol.cfg" KVSS_DEMO_TRACE=none KVSS_DEMO_DOCUMENTS=300 \
			KVSS_DEMO_LIMIT=600 KVSS_DEMO_L2_DIR="$tmp/l2-$pol" KVSS_DEMO_JSON="$tmp/$pol.json" \
			KVSS_DEMO_TAG="bench_slow_$pol$$" scripts/demo.sh "$BUILD"
	) >"$tmp/$pol.log" 2>&1
	rc=$?
	rm -rf "$tmp/l2-$pol"
	if [ $rc != 0 ] || ! grep -q '^demo: PASS' "$tmp/$pol.log"; then
		echo "bench-ttft-slow: the run with $pol did not pass (exit $rc); its log ends:" >&2
		tail -n 20 "$tmp/$pol.log" >&2
		exit 1
	fi
}

run io-only
run adaptive
python3 - "$tmp" "$iops" <<'PY'
import json, sys
tmp, iops = sys.argv[1], sys.argv[2]
io = json.loads(open(f"{tmp}/io-only.json").read())
a = json.loads(open(f"{tmp}/adaptive.json").read())
for p in ("p99", "p50"):
    v, b = a[f"ttft_{p}_ms"], io[f"ttft_{p}_ms"]
    print(f"bench: ttft_{p}_vs_io_only_slow_disk {v:.2f} ms (baseline {b:.2f} ms, ratio {b / max(v, 1e-3):.2f})")
print(f"bench-ttft-slow: disk at {iops} reads/s: hit tokens from L2 io-only {io['hit_tokens_l2']}, "
      f"adaptive {a['hit_tokens_l2']}; hit tokens computed by choice {a['recomputed_by_choice_tokens']}; "
      f"L2 line learned {a.get('fit_l2_latency_us')} us + {a.get('fit_l2_gbps')} Gb/s; "
      f"compute-only (modelled) p50 {a.get('model_compute_only_ttft_p50_ms')} ms, p99 {a.get('model_compute_only_ttft_p99_ms')} ms",
      file=sys.stderr)
PY
