#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# The second tier's engine (bench/bench_kvdisk.c) against fio (Debian's
# package) on the same file system, with the same block size (a column's
# slot, 260 KiB), queue depth (32), O_DIRECT and io_uring, in the same run:
# write the file, then read it. Goal: >= 0.8x of fio both ways.
# kvdisk registers its buffers with the ring; fio is run both without
# (its default) and with --fixedbufs.
# Three rounds, each kvdisk then fio, and the median of each (a virtual
# disk's rate moves by a third from one run to the next). KVSS_BENCH_DIR
# picks the file system (default /var/tmp).
# bench_kvdisk also replaces columns of the demo's size in a full file, a
# delete and a put each: deletes deferred for a put to take
# their slot, against the baseline of every delete writing its cleared
# header at once, in the same run; the median of the ratios. And the
# write and read again on a sealed file (shard.l2.key_file: AES-256-GCM
# per column), against the plain ones of the same round: goal >= 0.8x;
# the median of the ratios.
set -u
BUILD=${1:-build}
cd "$(dirname "$0")/.."
dir=${KVSS_BENCH_DIR:-/var/tmp}
cols=4096
qd=32
if ! command -v fio >/dev/null; then
	echo "bench: kvdisk skipped (no fio; scripts/deps.sh installs it)"
	exit 0
fi
f="$dir/kvss_bench_fio_$$.bin"
trap 'rm -f "$f"' EXIT
fiobw() { # RW SLOT [fio options]: bytes per second of fio's job
	local rw=$1 bs=$2
	shift 2
	fio --name=l2 --filename="$f" --rw="$rw" --bs="$bs" --size=$((bs * cols)) \
		--iodepth=$qd --ioengine=io_uring --direct=1 "$@" --output-format=json 2>/dev/null |
		python3 -c "import json,sys; j=json.load(sys.stdin)['jobs'][0]; print(j['$rw']['bw_bytes'])"
}
rounds=()
for round in 1 2 3; do
	out=$("$BUILD/bench/bench_kvdisk" "$dir" $cols $qd) || {
		echo "bench: bench_kvdisk failed" >&2
		exit 1
	}
	slot=$(sed -n 's/^kvdisk: slot_bytes \([0-9]*\) .*/\1/p' <<<"$out")
	wbw=$(fiobw write "$slot") && rbw=$(fiobw read "$slot") || {
		echo "bench: fio failed" >&2
		exit 1
	}
	rm -f "$f"
	# fio with registered buffers too, as kvdisk registers its own.
	wfx=$(fiobw write "$slot" --fixedbufs) && rfx=$(fiobw read "$slot" --fixedbufs) || {
		echo "bench: fio --fixedbufs failed" >&2
		exit 1
	}
	rm -f "$f"
	rep=$(sed -n 's/^bench: kvdisk_replace \([0-9]*\) ops\/s (baseline \([0-9]*\) ops\/s.*/\1 \2/p' <<<"$out")
	seal=$(sed -n 's/^bench: kvdisk_\(write\|read\)_sealed \([0-9.]*\) GB\/s.*ratio \([0-9.]*\))/\2 \3/p' <<<"$out" | tr '\n' ' ')
	rounds+=("$(grep -o 'kvdisk_write [0-9.]*\|kvdisk_read [0-9.]*' <<<"$out" | tr '\n' ' ')$wbw $rbw $wfx $rfx $rep $seal")
done
grep '^bench: note' <<<"$out"
python3 - "${rounds[@]}" <<'PY'
import statistics, sys
kw, kr, fw, fr, xw, xr, rn, ro = [], [], [], [], [], [], [], []
sw, swr, sr, srr = [], [], [], []
for r in sys.argv[1:]:
    t = r.split()
    kw.append(float(t[1])); kr.append(float(t[3]))
    fw.append(float(t[4]) / 1e9); fr.append(float(t[5]) / 1e9)
    xw.append(float(t[6]) / 1e9); xr.append(float(t[7]) / 1e9)
    rn.append(float(t[8])); ro.append(float(t[9]))
    sw.append(float(t[10])); swr.append(float(t[11]))
    sr.append(float(t[12])); srr.append(float(t[13]))
m = statistics.median
print(f"bench: kvdisk_write {m(kw):.3f} GB/s (baseline {m(fw):.3f} GB/s, ratio {m(kw) / m(fw):.3f})")
print(f"bench: kvdisk_read {m(kr):.3f} GB/s (baseline {m(fr):.3f} GB/s, ratio {m(kr) / m(fr):.3f})")
print(f"bench: kvdisk_write_vs_fio_fixedbufs {m(kw):.3f} GB/s (baseline {m(xw):.3f} GB/s, ratio {m(kw) / m(xw):.3f})")
print(f"bench: kvdisk_read_vs_fio_fixedbufs {m(kr):.3f} GB/s (baseline {m(xr):.3f} GB/s, ratio {m(kr) / m(xr):.3f})")
ratios = sorted(n / o for n, o in zip(rn, ro))
print(f"bench: kvdisk_replace {m(rn):.0f} ops/s (baseline {m(ro):.0f} ops/s, ratio {ratios[1]:.3f})")
print(f"bench: kvdisk_write_sealed {m(sw):.3f} GB/s (baseline {m(kw):.3f} GB/s, ratio {m(swr):.3f})")
print(f"bench: kvdisk_read_sealed {m(sr):.3f} GB/s (baseline {m(kr):.3f} GB/s, ratio {m(srr):.3f})")
rng = lambda v: f"{min(v):.3f} to {max(v):.3f}"
print(f"kvdisk: three rounds: write {rng(kw)} GB/s (fio {rng(fw)}, --fixedbufs {rng(xw)}); "
      f"read {rng(kr)} (fio {rng(fr)}, --fixedbufs {rng(xr)}); sealed: write ratio {rng(swr)}, "
      f"read ratio {rng(srr)}")
PY
