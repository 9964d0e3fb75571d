#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Fuzz the second tier's file (test/fuzz/fuzz_kvdisk.c: mutated images of a
# shard's L2 file opened, rebuilt and served; nothing served that is not
# what was written into that file, nothing formatted over that is not
# blank) for SECONDS. The seeds are written by the harness itself
# (KVSS_FUZZ_KVDISK_SEEDS): lists of mutations of its own file, and the
# three files it makes (this shard's, another shard's, this shard's from
# before a format). A crash leaves its input in build/fuzz/artifacts/:
# copy it into test/fuzz/regress_kvdisk/ and fix the bug. The run itself
# is scripts/fuzz.sh.
set -eu
BIN=$1
CORPUS=$2
SECONDS_=${3:-15}
cd "$(dirname "$0")/.."
mkdir -p "$CORPUS"
KVSS_FUZZ_KVDISK_SEEDS="$CORPUS" "$BIN" >/dev/null 2>&1 || {
	echo "fuzz: $(basename "$BIN") could not write its seeds" >&2
	exit 1
}
# A file image is 53,248 bytes (a 4 KiB superblock and 12 slots of 4 KiB).
FUZZ_REGRESS=test/fuzz/regress_kvdisk FUZZ_MAX_LEN=60000 exec scripts/fuzz.sh "$BIN" "$CORPUS" "$SECONDS_"
