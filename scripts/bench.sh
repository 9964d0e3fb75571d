#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
#
# make bench's steps, in hugepages where the machine allows them. As root,
# the pages its heaviest step needs (bench-memif's open pipe: a shard of
# 5,200 MB and a driver of 1,024) are reserved first with
# scripts/hugepages.sh, under a state file of this run's own, and exactly
# what that added is given back at the end, however the run ends: pages an
# operator reserved before stay reserved. Not root, or the kernel short of
# pages: one line says so and the steps run with --no-huge, as every step
# says for itself (scripts/eal-mem.sh). KVSS_HUGE=0: no reservation, no
# hugepages.
#
#   scripts/bench.sh BUILD BENCH...    (BENCH: the C benchmarks, run first)
set -u
BUILD=${1:?usage: scripts/bench.sh BUILD BENCH...}
shift
cd "$(dirname "$0")/.."
BENCH_HUGE_MB=6400
export KVSS_HUGEPAGES_STATE=/run/kvss-hugepages-bench.$$
if [ "${KVSS_HUGE:-}" = 0 ]; then
	echo "bench: hugepages: none (KVSS_HUGE=0)" >&2
elif [ "$(id -u)" != 0 ]; then
	echo "bench: hugepages: not reserved (not root): steps run with --no-huge unless some are free" >&2
else
	trap 'scripts/hugepages.sh release >&2' EXIT
	scripts/hugepages.sh reserve "$BENCH_HUGE_MB" >&2 ||
		echo "bench: hugepages: $BENCH_HUGE_MB MB not reserved: steps run with --no-huge unless some are free" >&2
fi
for b in "$@"; do
	"$b" || exit 1
done
scripts/bench-shard-huge.sh "$BUILD" &&
	scripts/bench-kvdisk.sh "$BUILD" &&
	scripts/bench-trace.sh "$BUILD" &&
	scripts/bench-redis.sh "$BUILD" &&
	scripts/bench-poll.py "$BUILD" &&
	scripts/bench-memif.sh "$BUILD" &&
	scripts/bench-zerocopy.sh "$BUILD" &&
	scripts/bench-shared.sh "$BUILD" &&
	scripts/bench-reports.sh "$BUILD" &&
	scripts/bench-ttft.sh "$BUILD" &&
	scripts/bench-ttft-slow.sh "$BUILD" &&
	scripts/bench-ttft-trace.sh "$BUILD" &&
	scripts/bench-demo.sh "$BUILD"
