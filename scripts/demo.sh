#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# The main job on built-in defaults. Until the kvss DPDK application lands,
# it replays requests through the driver library, a real shard store and the
# emulated wafer (kvss-trace): the Mooncake synthetic trace when
# ../shared/traces has it, else the built-in workload generator.
set -eu
BUILD=${1:-build}
cd "$(dirname "$0")/.."
MC=../shared/traces/mooncake_synthetic.jsonl
if [ -f "$MC" ]; then
	src=(--trace "$MC")
	echo "demo: replaying $MC (3,993 requests, 61M tokens) at 1e6 and 1e7 tokens of shard capacity"
else
	src=(--generate 20000)
	echo "demo: no trace at $MC; replaying the built-in workload (20,000 requests)"
fi
"$BUILD/kvss-trace" "${src[@]}" --capacity 1e6,1e7 --baseline
echo "demo: the same, as JSON:"
"$BUILD/kvss-trace" "${src[@]}" --capacity 1e7 --json 2>/dev/null
