#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# kvss-udp-client's decoder (test/fuzz/fuzz_ucwire.c) for SECONDS. Its seeds
# are UDP payloads: gen_frames' samples of every type (scripts/fuzz.sh's
# frame seeds) cut to what follows their UDP header, and the regression
# inputs in test/fuzz/regress_ucwire.
#   fuzz-ucwire.sh BIN CORPUS SECONDS GEN_FRAMES
set -eu
BIN=$1
CORPUS=$2
SECONDS_=${3:-30}
GEN=${4:-build/tools/gen_frames}
cd "$(dirname "$0")/.."
mkdir -p "$CORPUS"
frames=$(mktemp -d)
trap 'rm -rf "$frames"' EXIT
"$GEN" corpus "$frames" >/dev/null
# Two split bytes, Ethernet (14), IPv4 (20), UDP (8): the payload from byte 45.
for f in "$frames"/sample_*_plain "$frames"/golden_*; do
	tail -c +45 "$f" >"$CORPUS/seed_$(basename "$f")"
done
FUZZ_REGRESS=test/fuzz/regress_ucwire scripts/fuzz.sh "$BIN" "$CORPUS" "$SECONDS_"
echo "fuzz: $(basename "$BIN"): $(grep -o 'cov: [0-9]* ft: [0-9]*' "$(dirname "$BIN")/$(basename "$BIN").log" | tail -n 1)"
