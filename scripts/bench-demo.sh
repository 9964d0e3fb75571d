#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# The whole system against its parts: make demo's processes (a
# driver and two shards over net_memif, scripts/demo.sh) on the same input
# twice, side by side on the same minutes: first with DRAM alone (the
# shards' second tiers taken out of copies of the demo's configurations),
# then with both tiers as make demo runs them. Then fio on the file system
# the second tiers were on, reading at the slot size and queue depth the
# shards read at. Prints:
#
#   bench: demo_both_tiers_ttft_p50  the time to first token with both tiers
#   bench: demo_both_tiers_ttft_p99  against DRAM alone (ratio: both / DRAM
#                                    alone; below 1, the disk tier helps)
#   bench: demo_ttft_p50_vs_compute_only  both tiers against the same
#                                    arrivals with the cache off (modelled;
#                                    ratio: compute-only / both, goal >= 3)
#   bench: demo_both_tiers_hit_ratio its hit ratio, against DRAM alone
#                                    (goal: at least 0.05 higher)
#   bench: demo_l2_read_vs_fio       what the shards read from their second
#                                    tiers per second of the run, against
#                                    fio's random reads of the same size and
#                                    depth (goal: ratio >= 0.5)
#   bench: demo_ahead_of_pick_ttft_p99
#                                    a third run, both tiers with requests
#                                    begun ahead of the pick
#                                    (wafer.ahead_of_pick = BENCH_DEMO_AHEAD,
#                                    default 8; 0 leaves the run out),
#                                    against the run at the configuration's
#                                    value; and its mean refill wait at the
#                                    pick (demo_ahead_of_pick_wait_at_pick)
#   bench: demo_sealed_ttft_p50      a fourth run, both tiers with their
#   bench: demo_sealed_ttft_p99      columns sealed (shard.l2.key_file, a key
#                                    made for the run; BENCH_DEMO_SEALED=0
#                                    leaves it out), against the plain run
#                                    (ratio: sealed / plain, goal <= 1.05)
#
# Requests arrive as make demo has them (BENCH_DEMO_ARRIVALS, default
# "trace": the workload's times x 0.1, the wafer computing what is not
# refilled: KVSS_DEMO_ARRIVALS in demo.sh), so the runs compare what a user
# waits for, not how long the emulator took.
# The input: the public trace where make demo finds it, else the built-in
# workload (KVSS_DEMO_TRACE as in demo.sh). The configurations: demo.sh's
# defaults or KVSS_DEMO_DRIVER_CFG, KVSS_DEMO_SHARD0_CFG,
# KVSS_DEMO_SHARD1_CFG (how another column width was measured:
# docs/results.md). KVSS_BENCH_DIR: where the second tiers and fio's file go
# (default /var/tmp, a disk, not tmpfs; exit 2 when it cannot be written).
# A demo that does not pass is a failure of this bench (exit 1): its
# figures would not be the system's.
set -u
BUILD=${1:-build}
cd "$(dirname "$0")/.."
dir=${KVSS_BENCH_DIR:-/var/tmp}
if ! command -v fio >/dev/null; then
	echo "bench: demo skipped (no fio; scripts/deps.sh installs it)"
	exit 0
fi
if [ ! -d "$dir" ] || [ ! -w "$dir" ]; then
	echo "bench-demo: skipped: KVSS_BENCH_DIR=$dir is not a directory this user can write" >&2
	exit 2
fi
tmp=$(mktemp -d "$dir/kvss-bench-demo.XXXXXX") || {
	echo "bench-demo: skipped: cannot make a directory in KVSS_BENCH_DIR=$dir" >&2
	exit 2
}
trap 'rm -rf "$tmp"' EXIT
dcfg=${KVSS_DEMO_DRIVER_CFG:-config/memif-driver.cfg}
s0cfg=${KVSS_DEMO_SHARD0_CFG:-config/memif-shard0.cfg}
s1cfg=${KVSS_DEMO_SHARD1_CFG:-config/memif-shard1.cfg}
# DRAM alone: no l2 group on the shards, no l2_tokens in the driver's model.
sed -e 's/ l2_tokens = \[[0-9]*\];//' "$dcfg" >"$tmp/dram-driver.cfg"
for k in 0 1; do
	src=$s0cfg
	[ $k = 1 ] && src=$s1cfg
	sed -e '/^ *l2 = {/d' "$src" >"$tmp/dram-shard$k.cfg"
done
if grep -q 'l2_tokens' "$tmp/dram-driver.cfg" || grep -q '^ *l2 = {' "$tmp"/dram-shard*.cfg; then
	echo "bench-demo: could not take the second tier out of $dcfg, $s0cfg, $s1cfg" >&2
	exit 1
fi

run() { # NAME DRIVER SHARD0 SHARD1: one demo, its log and JSON in $tmp
	local name=$1 rc
	mkdir -p "$tmp/$name-l2"
	echo "bench-demo: running the demo with $name ..." >&2
	KVSS_DEMO_ARRIVALS=${BENCH_DEMO_ARRIVALS-trace} \
		KVSS_DEMO_DRIVER_CFG=$2 KVSS_DEMO_SHARD0_CFG=$3 KVSS_DEMO_SHARD1_CFG=$4 \
		KVSS_DEMO_L2_DIR="$tmp/$name-l2" KVSS_DEMO_JSON="$tmp/$name.json" \
		KVSS_DEMO_TAG="bench_$name$$" scripts/demo.sh "$BUILD" >"$tmp/$name.log" 2>&1
	rc=$?
	rm -rf "$tmp/$name-l2"
	if [ $rc != 0 ] || ! grep -q '^demo: PASS' "$tmp/$name.log"; then
		echo "bench-demo: the run with $name did not pass (exit $rc); its log ends:" >&2
		tail -n 20 "$tmp/$name.log" >&2
		cp "$tmp/$name.log" "/tmp/kvss-bench-demo-$name.log" 2>/dev/null &&
			echo "bench-demo: the whole log kept in /tmp/kvss-bench-demo-$name.log" >&2
		exit 1
	fi
}
run dram "$tmp/dram-driver.cfg" "$tmp/dram-shard0.cfg" "$tmp/dram-shard1.cfg"
run both "$dcfg" "$s0cfg" "$s1cfg"
ahead=${BENCH_DEMO_AHEAD:-8}
if [ "$ahead" != 0 ]; then
	sed "s/^  ahead_of_pick = [0-9]*;/  ahead_of_pick = $ahead;/" "$dcfg" >"$tmp/ahead-driver.cfg"
	grep -q "^  ahead_of_pick = $ahead;" "$tmp/ahead-driver.cfg" || {
		echo "bench-demo: no 'ahead_of_pick = N;' line in $dcfg to change" >&2
		exit 1
	}
	run ahead "$tmp/ahead-driver.cfg" "$s0cfg" "$s1cfg"
fi
if [ "${BENCH_DEMO_SEALED:-1}" != 0 ]; then
	(umask 077 && python3 -c 'import os; print(os.urandom(32).hex())' >"$tmp/l2.key")
	for k in 0 1; do
		src=$s0cfg
		[ $k = 1 ] && src=$s1cfg
		sed "s#^\( *l2 = {.*\) };\$#\1 key_file = \"$tmp/l2.key\"; };#" "$src" >"$tmp/sealed-shard$k.cfg"
		grep -q "key_file = \"$tmp/l2.key\"" "$tmp/sealed-shard$k.cfg" || {
			echo "bench-demo: no one-line 'l2 = { ... };' in $src to seal" >&2
			exit 1
		}
	done
	run sealed "$dcfg" "$tmp/sealed-shard0.cfg" "$tmp/sealed-shard1.cfg"
fi

# The slot the shards read: a column's bytes and its 64-byte header, in
# 4 KiB pages (lib/kvdisk); the queue depth kvdisk's default (64) unless the
# shard's configuration sets one.
column=$(sed -n 's/^ *l2 = {.*column = \([0-9]*\);.*/\1/p' "$s0cfg" | head -1)
bpt=$(sed -n 's/.*bytes_per_token = \([0-9]*\);.*/\1/p' "$s0cfg" | head -1)
qd=$(sed -n 's/^ *l2 = {.*queue_depth = \([0-9]*\);.*/\1/p' "$s0cfg" | head -1)
qd=${qd:-64}
slot=$(((column * bpt + 64 + 4095) / 4096 * 4096))
cols=$((1024 * 1024 * 1024 / slot))
f="$tmp/fio.bin"
fio --name=l2 --filename="$f" --rw=write --bs="$slot" --size=$((slot * cols)) \
	--iodepth="$qd" --ioengine=io_uring --direct=1 --output-format=json >/dev/null 2>&1 &&
	fio --name=l2 --filename="$f" --rw=randread --bs="$slot" --size=$((slot * cols)) \
		--iodepth="$qd" --ioengine=io_uring --direct=1 --runtime=15 --time_based \
		--output-format=json >"$tmp/fio.json" 2>/dev/null || {
	echo "bench-demo: fio failed on $dir" >&2
	exit 1
}
rm -f "$f"

python3 - "$tmp" "$slot" "$qd" "$ahead" <<'PY'
import json, os, re, sys
tmp, slot, qd, ahead = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
def js(name):
    return json.load(open(f"{tmp}/{name}.json"))
dram, both = js("dram"), js("both")
# Each shard's bytes read from its second tier, from the demo's copy of its
# final stats (demo: shard K: disk ... disk_bytes_read=N).
read = 0
for line in open(f"{tmp}/both.log"):
    m = re.search(r"^demo: shard \d+: disk .*disk_bytes_read=(\d+)", line)
    if m:
        read += int(m.group(1))
fio = json.load(open(f"{tmp}/fio.json"))["jobs"][0]["read"]["bw_bytes"]
ts, td = both["seconds"], dram["seconds"]
hs, hd = both["hit_ratio"], dram["hit_ratio"]
rate = read / ts
for p in ("p50", "p99"):
    b, d = both.get(f"ttft_{p}_ms"), dram.get(f"ttft_{p}_ms")
    if b is not None and d is not None:
        print(f"bench: demo_both_tiers_ttft_{p} {b:.2f} ms (baseline {d:.2f} ms, ratio {b / max(d, 1e-3):.2f})")
m50 = both.get("model_compute_only_ttft_p50_ms")
if m50 is not None and both.get("ttft_p50_ms"):
    print(f"bench: demo_ttft_p50_vs_compute_only {both['ttft_p50_ms']:.2f} ms (baseline {m50:.2f} ms, "
          f"ratio {m50 / max(both['ttft_p50_ms'], 1e-3):.2f})")
print(f"bench: demo_both_tiers_hit_ratio {hs:.4f} ratio (baseline {hd:.4f} ratio, ratio {hs / hd:.2f})")
print(f"bench: note demo_both_tiers_hit_ratio is {hs - hd:+.4f} over DRAM alone (goal: at least +0.05)")
print(f"bench: demo_l2_read_vs_fio {rate / 1e6:.1f} MB/s (baseline {fio / 1e6:.1f} MB/s, ratio {rate / fio:.3f})")
print(f"demo: {both['requests']} requests; both tiers {ts:.1f} s, hit {hs:.4f} "
      f"({both['hit_tokens_l2']} tokens from the second tier), refill p50 {both['refill_p50_us'] / 1e3:.0f} ms, "
      f"p99 {both['refill_p99_us'] / 1e3:.0f} ms; DRAM alone {td:.1f} s, hit {hd:.4f}; "
      f"the second tiers read {read / 1e9:.2f} GB; fio random reads of {slot} bytes at depth {qd}")
if os.path.exists(f"{tmp}/sealed.json"):
    z = js("sealed")
    for p in ("p50", "p99"):
        b, d = z.get(f"ttft_{p}_ms"), both.get(f"ttft_{p}_ms")
        if b is not None and d is not None:
            print(f"bench: demo_sealed_ttft_{p} {b:.2f} ms (baseline {d:.2f} ms, ratio {b / max(d, 1e-3):.3f})")
    print(f"demo: sealed: hit {z['hit_ratio']:.4f} (plain {hs:.4f}), {z['hit_tokens_l2']} tokens from the second tier "
          f"(plain {both['hit_tokens_l2']})")
if os.path.exists(f"{tmp}/ahead.json"):
    a = js("ahead")
    w0, wa = both["refill_wait_at_pick_us"] / 1e3, a["refill_wait_at_pick_us"] / 1e3
    if a.get("ttft_p99_ms") is not None and both.get("ttft_p99_ms"):
        print(f"bench: demo_ahead_of_pick_ttft_p99 {a['ttft_p99_ms']:.2f} ms (baseline {both['ttft_p99_ms']:.2f} ms, "
              f"ratio {a['ttft_p99_ms'] / both['ttft_p99_ms']:.2f})")
    print(f"bench: demo_ahead_of_pick_wait_at_pick {wa:.1f} ms (baseline {w0:.1f} ms, ratio {wa / w0 if w0 else 0:.3f})")
    print(f"demo: ahead_of_pick {ahead}: hit {a['hit_ratio']:.4f} (against {hs:.4f}), data whole at the pick "
          f"for {a['picks_ready']} of {a['picks_ready'] + a['picks_waited']} refills (against {both['picks_ready']})")
PY
