#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Fuzz the readers of configuration and trace files (test/fuzz/fuzz_files.c)
# for SECONDS. The seeds are this repository's own files: every config/*.cfg
# (selector byte 0: the configuration reader), test/data's traces plus
# Mooncake-format and cache-salted lines written here (1: the trace reader) and the cluster
# examples (2: kvss-plan's reader and planner), and organization key
# stores written here (3: lib/seal/orgkeys.c). A crash
# leaves its input in build/fuzz/artifacts/: copy it into
# test/fuzz/regress_files/ and fix the bug. The run itself is scripts/fuzz.sh.
set -eu
BIN=$1
CORPUS=$2
SECONDS_=${3:-15}
cd "$(dirname "$0")/.."
mkdir -p "$CORPUS"
i=0
for f in config/*.cfg test/data/*.cfg; do
	i=$((i + 1))
	{ printf '\000'; cat "$f"; } >"$CORPUS/seed_cfg_$i"
done
# Keys the examples leave commented out, set.
i=$((i + 1))
{ printf '\000'; sed 's/^  # backpressure = "wait";/  backpressure = "skip";/' config/memif-driver.cfg; } \
	>"$CORPUS/seed_cfg_$i"
for f in config/cluster-*.cfg; do
	i=$((i + 1))
	{ printf '\002'; cat "$f"; } >"$CORPUS/seed_plan_$i"
done
for f in test/data/*.jsonl; do
	i=$((i + 1))
	{ printf '\001'; head -c 16000 "$f"; } >"$CORPUS/seed_trace_$i"
done
{ printf '\001'; echo '{"timestamp": 0, "input_length": 1100, "output_length": 5, "hash_ids": [1, 2, 3]}'
  echo '{"timestamp": 9, "input_length": 600, "output_length": 50, "hash_ids": [1, 4]}'; } \
	>"$CORPUS/seed_mooncake"
# Cache salts: a salted native line, a salted Mooncake line, a null one.
{ printf '\001'; echo '{"org": "acme", "cache_salt": "user-42", "tokens": [1, 2, 3], "timestamp": 0}'
  echo '{"timestamp": 5, "input_length": 600, "hash_ids": [1, 4], "cache_salt": "a+/=~!"}'
  echo '{"tokens": [1, 2], "cache_salt": null}'; } >"$CORPUS/seed_salts"
# Organization key stores (selector 3): one as kvss-shared writes it, one
# with comments, empty lines and no newline at its end.
K1=1111111111111111111111111111111111111111111111111111111111111111
K2=2222222222222222222222222222222222222222222222222222222222222222
K3=3333333333333333333333333333333333333333333333333333333333333333
{ printf '\003# kvss organization keys\ndefault %s\norg 0x5 %s\norg 0x1f %s\nend 2\n' $K1 $K2 $K3; } \
	>"$CORPUS/seed_orgkeys"
{ printf '\003\n# a\n\norg 0xffffffffffffffff %s\ndefault %s\nend 1' $K2 $K1; } >"$CORPUS/seed_orgkeys_2"
# libconfig 1.5 leaks its scanner's string buffer on some syntax errors (a
# string cut off at the end of the file); the process exits after a bad file,
# so that leak is libconfig's alone and suppressed by name.
export LSAN_OPTIONS="suppressions=$PWD/test/fuzz/lsan_files.supp:print_suppressions=0"
FUZZ_REGRESS=test/fuzz/regress_files FUZZ_MAX_LEN=20000 exec scripts/fuzz.sh "$BIN" "$CORPUS" "$SECONDS_"
