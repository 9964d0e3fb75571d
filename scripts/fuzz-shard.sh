#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Fuzz the shard with its state (test/fuzz/fuzz_shard.c) for SECONDS over a
# working corpus: the generated seeds (fuzz_shard_seeds, beside the binary),
# what earlier runs found, and the stored regression inputs
# (test/fuzz/regress_shard/). On a finding, its input and log are kept in
# $(dirname BIN)/failed_shard/ and printed: the input as operations
# (FUZZ_SHARD_TRACE=1 replays it: each operation, poll and frame sent),
# then the report. Copy the input into test/fuzz/regress_shard/ and fix the
# bug.
#   FUZZ_SHARD_ARGS  more libFuzzer options (-jobs=2, -fork=1, -seed=N)
set -eu
BIN=$1
CORPUS=$2
SECONDS_=${3:-30}
REGRESS=test/fuzz/regress_shard
cd "$(dirname "$0")/.."
OUT=$(dirname "$BIN")
ART=$OUT/artifacts_shard
KEEP=$OUT/failed_shard
LOG=$OUT/fuzz_shard.log
mkdir -p "$CORPUS" "$ART" "$REGRESS"
"$OUT/fuzz_shard_seeds" "$CORPUS"
rm -f "$ART"/*
set +e
# An input runs in milliseconds: 20 s is a hang (the turns of the shard's threads).
# shellcheck disable=SC2086
"$BIN" -max_total_time="$SECONDS_" -max_len=4096 -timeout=20 -print_final_stats=1 \
	-artifact_prefix="$ART/" ${FUZZ_SHARD_ARGS:-} "$CORPUS" "$REGRESS" >"$LOG" 2>&1
rc=$?
set -e
runs=$(awk '/stat::number_of_executed_units/ {print $2}' "$LOG")
rate=$(awk '/stat::average_exec_per_sec/ {print $2}' "$LOG")
cov=$(grep -ao 'cov: [0-9]*' "$LOG" | tail -n 1)
echo "fuzz: fuzz_shard ran ${runs:-0} executions in ${SECONDS_}s (${rate:-0}/s," \
	"${cov:-cov: ?}), exit $rc"
if [ $rc -ne 0 ]; then
	input=$(ls -t "$ART"/* 2>/dev/null | head -n 1)
	mkdir -p "$KEEP"
	cp "$LOG" "$KEEP/fuzz_shard.log"
	if [ -n "$input" ]; then
		cp "$input" "$KEEP/"
		echo "fuzz_shard: the input, kept in $KEEP/$(basename "$input"):"
		od -A d -t x1 "$input" | head -n 40
		echo "fuzz_shard: replayed (FUZZ_SHARD_TRACE=1), the last of it:"
		FUZZ_SHARD_TRACE=1 "$BIN" "$input" 2>&1 | grep -av '^ *#[0-9]' | tail -n 60 || true
	fi
	echo "fuzz_shard: the run's log, kept in $KEEP/fuzz_shard.log:"
	grep -av '^#[0-9]' "$LOG" | tail -n 40
	exit 1
fi
