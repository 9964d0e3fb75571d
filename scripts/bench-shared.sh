#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# The shared level: lib/shared's client (bench/bench_shared.c)
# against fio's rados engine (Debian's fio) on the same pool of a throwaway
# cluster this script starts (scripts/ceph-cluster.sh: 3 OSDs on sparse
# files, pool size 2) and stops, with the same object size (a whole column,
# 1 MiB), the same number of objects (256) and depth (16), in the same run:
# write them, then read them back. Goal: >= 0.8x of fio both ways. And
# the same sealed (AES-256-GCM before each write, opened after each read:
# shared.key_file's cost), against ours plain: goal >= 0.8x; and the same under
# organization keys (shared.org_key_file), against sealed: goal >= 0.8x.
# Ours: exclusive create + write_full in one op, then a stat + read op that
# reads the object whole (checked); fio: rados_aio_write of each whole
# object (touched first), then rados_aio_read (fio reads objects our client
# wrote, "fill", so that both read the same kind of object).
# Three rounds, each ours then fio's, and the median of each.
#   scripts/bench-shared.sh [BUILD]
set -u
BUILD=${1:-build}
cd "$(dirname "$0")/.."
B=$BUILD/bench/bench_shared
N=${SHARED_BENCH_OBJECTS:-256}
DEPTH=16
SIZE=$((1 << 20))
for c in fio ceph-mon; do
	if ! command -v $c >/dev/null; then
		echo "bench: shared skipped (no $c; scripts/deps.sh installs it)"
		exit 0
	fi
done
[ -x "$B" ] || { echo "bench-shared: $B is missing (make all)" >&2; exit 1; }
tmp=$(mktemp -d /tmp/kvss-bench-shared.XXXXXX)
C=$tmp/cluster
cleanup() {
	[ -f "$C/.kvss-ceph-cluster" ] && scripts/ceph-cluster.sh stop "$C" >/dev/null
	rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
scripts/ceph-cluster.sh start "$C" --op-timeout 30 | grep -v '^ceph-cluster: [0-9]* s:' || exit 1

names() { # names PREFIX: fio's --filename list, PREFIX.0:...:PREFIX.<N-1>
	seq -f "$1.%g" 0 $((N - 1)) | paste -sd:
}
fiobw() { # fiobw RW PREFIX [fio options]: bytes per second
	local rw=$1 prefix=$2
	shift 2
	fio --name=shared --ioengine=rados --conf="$C/ceph.conf" --clientname=admin --pool=kvss \
		--rw="$rw" --bs=$SIZE --size=$((N * SIZE)) --iodepth=$DEPTH \
		--filename="$(names "$prefix")" "$@" --output-format=json 2>"$tmp/fio.err" |
		python3 -c "import json,sys; t=sys.stdin.read(); j=json.loads(t[t.index('{'):])['jobs'][0]
if j['error']: sys.exit(1)
print(j['$rw']['bw_bytes'])" || { cat "$tmp/fio.err" >&2; return 1; }
}
rounds=()
for round in 1 2 3; do
	out=$("$B" "$C/ceph.conf" both "ks$round" $N $DEPTH $SIZE) || {
		echo "bench: bench_shared failed" >&2
		exit 1
	}
	echo "$out" | sed 's/^/  /'
	fw=$(fiobw write "fw$round") || { echo "bench: fio write failed" >&2; exit 1; }
	# fio removes its objects at the end of each job; the read job's are ours.
	"$B" "$C/ceph.conf" fill "fr$round" $N $DEPTH $SIZE || exit 1
	fr=$(fiobw read "fr$round" --touch_objects=0) || { echo "bench: fio read failed" >&2; exit 1; }
	echo "  fio: write $fw B/s, read $fr B/s"
	# The same again, every object sealed and opened (shared.key_file's cost).
	sout=$("$B" "$C/ceph.conf" sealed "kz$round" $N $DEPTH $SIZE) || {
		echo "bench: bench_shared sealed failed" >&2
		exit 1
	}
	echo "$sout" | sed 's/^/  sealed: /'
	# And under organization keys (shared.org_key_file's cost over the seal's).
	oout=$("$B" "$C/ceph.conf" orgkeys "ko$round" $N $DEPTH $SIZE) || {
		echo "bench: bench_shared orgkeys failed" >&2
		exit 1
	}
	echo "$oout" | sed 's/^/  organization keys: /'
	g() { sed -n "s/^shared: $1_gbps \([0-9.]*\).*/\1/p" <<<"$2"; }
	rounds+=("$(g write "$out") $(g read "$out") $fw $fr $(g write "$sout") $(g read "$sout") $(g write "$oout") $(g read "$oout")")
done
python3 - "$N" "${rounds[@]}" <<'PY'
import statistics, sys
kw, kr, fw, fr, sw, sr, ow, orr = [], [], [], [], [], [], [], []
for r in sys.argv[2:]:
    t = r.split()
    kw.append(float(t[0])); kr.append(float(t[1]))
    fw.append(float(t[2]) / 1e9); fr.append(float(t[3]) / 1e9)
    sw.append(float(t[4])); sr.append(float(t[5]))
    ow.append(float(t[6])); orr.append(float(t[7]))
m = statistics.median
print(f"bench: shared_write_gbps {m(kw):.3f} GB/s (baseline {m(fw):.3f} GB/s, ratio {m(kw) / m(fw):.3f})")
print(f"bench: shared_read_gbps {m(kr):.3f} GB/s (baseline {m(fr):.3f} GB/s, ratio {m(kr) / m(fr):.3f})")
print(f"bench: shared_write_sealed_gbps {m(sw):.3f} GB/s (baseline {m(kw):.3f} GB/s, ratio {m(sw) / m(kw):.3f})")
print(f"bench: shared_read_sealed_gbps {m(sr):.3f} GB/s (baseline {m(kr):.3f} GB/s, ratio {m(sr) / m(kr):.3f})")
print(f"bench: shared_write_orgkeys_gbps {m(ow):.3f} GB/s (baseline {m(sw):.3f} GB/s, ratio {m(ow) / m(sw):.3f})")
print(f"bench: shared_read_orgkeys_gbps {m(orr):.3f} GB/s (baseline {m(sr):.3f} GB/s, ratio {m(orr) / m(sr):.3f})")
rng = lambda v: f"{min(v):.3f} to {max(v):.3f}"
print(f"shared: three rounds of {sys.argv[1]} x 1 MiB at depth 16: write {rng(kw)} GB/s (fio {rng(fw)}); "
      f"read {rng(kr)} (fio {rng(fr)})")
PY
