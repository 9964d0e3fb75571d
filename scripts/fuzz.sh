#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Run a libFuzzer target for SECONDS over a working corpus seeded from the
# generated seeds and the stored regression inputs. A crash leaves its input
# in build/fuzz/artifacts/: copy it into the regression folder and fix the bug.
#   FUZZ_REGRESS  regression inputs (default test/fuzz/regress)
#   FUZZ_MAX_LEN  longest input (default 9700: a jumbo frame)
set -eu
BIN=$1
CORPUS=$2
SECONDS_=${3:-30}
REGRESS=${FUZZ_REGRESS:-test/fuzz/regress}
cd "$(dirname "$0")/.."
ART=$(dirname "$BIN")/artifacts
mkdir -p "$CORPUS" "$ART" "$REGRESS"
LOG=$(dirname "$BIN")/$(basename "$BIN").log
set +e
"$BIN" -max_total_time="$SECONDS_" -max_len="${FUZZ_MAX_LEN:-9700}" -print_final_stats=1 \
	-artifact_prefix="$ART/" "$CORPUS" "$REGRESS" >"$LOG" 2>&1
rc=$?
set -e
runs=$(awk '/stat::number_of_executed_units/ {print $2}' "$LOG")
rate=$(awk '/stat::average_exec_per_sec/ {print $2}' "$LOG")
echo "fuzz: $(basename "$BIN") ran ${runs:-0} executions in ${SECONDS_}s (${rate:-0}/s), exit $rc"
if [ $rc -ne 0 ]; then
	# First what a reader needs when only the start of this is seen: the
	# seed, then what the target and the sanitizer said (and where the
	# input was written: "Test unit written to"), without libFuzzer's
	# progress lines and stack frames; the stack follows, and the log
	# stays. -a: a target's output may hold bytes grep takes for binary.
	grep -a -m1 '^INFO: Seed:' "$LOG" || true
	grep -a -v -e '^#[0-9]' -e '^INFO:' -e '^ *#[0-9]' -e 'NEW_FUNC' "$LOG" | head -n 20
	echo "fuzz: the stack and the whole run: $LOG"
	tail -n 40 "$LOG"
	exit 1
fi
