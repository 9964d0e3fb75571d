#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
#
# make bench's steps, in hugepages where the machine allows them: the
# pages its heaviest step needs (bench-memif's open pipe: a shard of 5,200
# MB and a driver of 1,024) reserved for the run and exactly what that
# added given back at the end, however it ends (scripts/hugepages.sh run:
# pages an operator reserved stay). Not root, or the kernel short of pages:
# one line says so and the steps run with --no-huge, as every step says for
# itself (scripts/eal-mem.sh). KVSS_HUGE=0: no reservation, no hugepages.
#
#   scripts/bench.sh BUILD BENCH...    (BENCH: the C benchmarks, run first)
set -u
BUILD=${1:?usage: scripts/bench.sh BUILD BENCH...}
shift
cd "$(dirname "$0")/.."
# In hugepages, reserved for the run and given back after it.
if [ -z "${KVSS_BENCH_IN_HUGEPAGES:-}" ]; then
	export KVSS_BENCH_IN_HUGEPAGES=1
	exec scripts/hugepages.sh run 6400 scripts/bench.sh "$BUILD" "$@"
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
