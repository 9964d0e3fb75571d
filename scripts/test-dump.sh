#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# kvss-dump end to end: the committed captures regenerate byte for byte from
# lib/proto's builders, decode to the expected JSON, and bad files fail cleanly.
set -u
BUILD=${1:-build}
cd "$(dirname "$0")/.."
DUMP=$BUILD/kvss-dump
GEN=$BUILD/tools/gen_frames
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
. scripts/check-lib.sh

for set in section8:golden section8_bad:bad every_type:all; do
	name=${set%%:*}
	kind=${set##*:}
	"$GEN" pcap "$tmp/$name.pcap" "$kind"
	check "$name.pcap regenerates identically" cmp -s "$tmp/$name.pcap" "pcap/$name.pcap"
	"$DUMP" --json "pcap/$name.pcap" >"$tmp/$name.jsonl" 2>"$tmp/err"
	check "$name decodes to test/expected/$name.jsonl" diff -u "test/expected/$name.jsonl" "$tmp/$name.jsonl"
	check "$name: nothing on stderr" test ! -s "$tmp/err"
	lines=$("$DUMP" "pcap/$name.pcap" | wc -l)
	check "$name: one text line per frame" test "$lines" -eq "$(wc -l <"test/expected/$name.jsonl")"
done

# Version 1: a capture made before protocol v2 (pcap/section8_v1.pcap, kept
# as it was recorded) still decodes, version 1's layout.
"$DUMP" --json pcap/section8_v1.pcap >"$tmp/v1.jsonl" 2>"$tmp/err"
check "a version 1 capture decodes to test/expected/section8_v1.jsonl" \
	diff -u test/expected/section8_v1.jsonl "$tmp/v1.jsonl"
check "the version 1 capture says version 1" grep -q '"version": 1' "$tmp/v1.jsonl"
check "the version 2 capture says version 2" grep -q '"version": 2' test/expected/section8.jsonl

# 64-bit fields are exact for a reader whose numbers are doubles (jq,
# JavaScript): the JSON of every_type, read that way, must give the same
# values as read exactly, and every 64-bit id must match the text mode's.
check "64-bit fields survive a double-only JSON reader" python3 -c '
import json, re, sys
wide = 0
for line in open(sys.argv[1]):
    exact, dbl = json.loads(line), json.loads(line, parse_int=float)
    def walk(a, b):
        global wide
        if isinstance(a, dict):
            for k in a: walk(a[k], b[k])
        elif isinstance(a, list):
            for x, y in zip(a, b): walk(x, y)
        elif isinstance(a, int) and not isinstance(a, bool):
            if int(b) != a:
                sys.exit("%r read as %r" % (a, b))
        elif a != b:
            sys.exit("%r read as %r" % (a, b))
        elif isinstance(a, str) and a.isdigit() and int(a) > 2**53:
            wide += 1
    walk(exact, dbl)
text = open(sys.argv[2]).read()
ids = set(re.findall(r"\"prompt_id\": \"(\d+)\"", open(sys.argv[1]).read()))
missing = [i for i in ids if "prompt_id=" + i not in text]
sys.exit("no id above 2^53 in the capture" if wide == 0 else
         "text mode lacks %s" % missing if missing else 0)
' "$tmp/every_type.jsonl" <("$DUMP" pcap/every_type.pcap)

# Frames are numbered across files.
"$DUMP" --json pcap/section8.pcap pcap/section8.pcap >"$tmp/two"
check "numbering continues across files" grep -q '^{"frame": 4, "type": "REFILL"' "$tmp/two"

# Other ports: nothing is KVSS any more.
"$DUMP" --json --ports 9400,9401,9402 pcap/section8.pcap >"$tmp/ports"
check "--ports changes what is KVSS" test "$(grep -c not_kvss "$tmp/ports")" -eq 2

# Not a pcap: one line on stderr, nothing on stdout, exit 2.
echo "this is not a capture" >"$tmp/x.pcap"
"$DUMP" --json "$tmp/x.pcap" >"$tmp/out" 2>"$tmp/err"
rc=$?
check "a non-pcap file exits 2" test $rc -eq 2
check "a non-pcap file gives one error line" test "$(wc -l <"$tmp/err")" -eq 1
check "a non-pcap file prints nothing on stdout" test ! -s "$tmp/out"
"$DUMP" --json "$tmp/missing.pcap" >/dev/null 2>&1
check "a missing file exits 2" test $? -eq 2
"$DUMP" --ports 1,2 pcap/section8.pcap >/dev/null 2>&1
check "bad --ports exits 2" test $? -eq 2

check_summary "kvss-dump"
