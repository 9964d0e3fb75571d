#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
#
# Zero-copy ingest measured against copying. A shard
# that kept the frames it receives as its storage would do all it does now
# but the copy; its lcore's ceiling is measured with bench_shard built
# again with -DKVSTORE_NOCOPY_PROBE (the store keeps its books, copies
# nothing: $BUILD/probe, never a product build), run interleaved with the
# copying bench_shard of $BUILD, three times each, medians kept.
#
# The memory side is bench_shard's own *_zerocopy_bytes_per_token lines
# (frames kept as mbufs against bytes copied into slots). The ceiling is
# optimistic: a kept frame would also need its reference counted per token
# and freed at the last token's DELETE, and a refill would chain more
# pieces (a token can straddle two frames).
#
# Prints `bench:` lines: kvss_shard_ingest_{1k,16k}_nocopy, GB/s, against
# the copying ingest of the same run.
#
#   scripts/bench-zerocopy.sh [BUILD]
set -u
BUILD=${1:-build}
cd "$(dirname "$0")/.."
PROBE=$BUILD/probe
if ! make --no-print-directory -s BUILD="$PROBE" EXTRA_CFLAGS=-DKVSTORE_NOCOPY_PROBE \
	"$PROBE/bench/bench_shard" >"$BUILD/probe.log" 2>&1; then
	cat "$BUILD/probe.log" >&2
	echo "bench-zerocopy: the probe build failed" >&2
	exit 1
fi
tmp=$(mktemp -d /tmp/kvss-zc.XXXXXX)
trap 'rm -rf "$tmp"' EXIT

# one RUN: the ingest figure (GB/s) of BIN for SIZE (1k or 16k)
one() {
	BENCH_SHARD_ONLY=$2 "$1" 2>"$tmp/err" | awk -v n="kvss_shard_ingest_$2" '$2 == n { print $3 }'
}
median() { sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }

status=0
for size in 1k 16k; do
	: >"$tmp/copy"
	: >"$tmp/probe"
	for r in 1 2 3; do
		one "$BUILD/bench/bench_shard" "$size" >>"$tmp/copy"
		one "$PROBE/bench/bench_shard" "$size" >>"$tmp/probe"
	done
	if [ "$(wc -l <"$tmp/copy")" -ne 3 ] || [ "$(wc -l <"$tmp/probe")" -ne 3 ]; then
		echo "bench-zerocopy: a $size run failed:" >&2
		cat "$tmp/err" >&2
		status=1
		continue
	fi
	c=$(median <"$tmp/copy")
	p=$(median <"$tmp/probe")
	echo "bench: kvss_shard_ingest_${size}_nocopy $p GB/s (baseline $c GB/s, ratio $(awk -v p="$p" -v c="$c" 'BEGIN { printf "%.2f", p / c }'))"
	echo "bench-zerocopy: $size copying $(tr '\n' ' ' <"$tmp/copy")GB/s; without the copy $(tr '\n' ' ' <"$tmp/probe")GB/s" >&2
done
exit $status
