#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
#
# The shard's own figures (bench_shard: ingest of 1 KiB and 16 KiB tokens,
# 16 KiB refills) in hugepages beside 4 KiB pages, in the same run, when
# 1,100 MB of hugepages are free (scripts/hugepages.sh reserve 1100); else
# one line saying they were not measured. Each _hugepages line is
# bench_shard's own (its baseline memcpy in the same memory); the _gain
# lines set each against the 4 KiB run just before it.
#
#   scripts/bench-shard-huge.sh [BUILD]
set -u
BUILD=${1:-build}
cd "$(dirname "$0")/.."
. scripts/eal-mem.sh
eal_mem bench-shard-huge 1100
if [ "$EAL_HUGE" != 1 ]; then
	echo "bench: note kvss_shard_hugepages not measured: none reserved (scripts/hugepages.sh reserve 1100)"
	exit 0
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for only in 1k 16k; do
	BENCH_SHARD_ONLY=$only "$BUILD/bench/bench_shard" >"$tmp/small_$only" 2>&1 || {
		echo "bench-shard-huge: bench_shard ($only, 4 KiB pages) failed:" >&2
		tail -n 5 "$tmp/small_$only" >&2
		exit 1
	}
	BENCH_SHARD_HUGE=1 BENCH_SHARD_ONLY=$only "$BUILD/bench/bench_shard" >"$tmp/huge_$only" 2>&1 || {
		echo "bench-shard-huge: bench_shard ($only, hugepages) failed:" >&2
		tail -n 5 "$tmp/huge_$only" >&2
		exit 1
	}
	grep '^bench: .*_hugepages .*GB/s' "$tmp/huge_$only"
done
python3 - "$tmp" <<'PY'
import re, sys
tmp = sys.argv[1]
def figs(path):
    return {m.group(1): float(m.group(2))
            for m in re.finditer(r"^bench: (\S+) ([0-9.]+) GB/s", open(path).read(), re.M)}
for only in ("1k", "16k"):
    small, huge = figs("%s/small_%s" % (tmp, only)), figs("%s/huge_%s" % (tmp, only))
    for name, v in sorted(small.items()):
        h = huge.get(name.replace("_" + only, "_" + only + "_hugepages", 1))
        if h is not None:
            print("bench: %s_hugepages_gain %.2f GB/s (baseline %.2f GB/s, ratio %.2f)" % (name, h, v, h / v if v else 0))
PY
