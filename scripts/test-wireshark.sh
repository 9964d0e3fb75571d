#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# The Wireshark dissector (tools/wireshark/kvss.lua) against kvss-dump, two
# independent decoders of docs/PROTOCOL.md: on every capture in pcap/, run
# by Debian's tshark (-X lua_script:), every field of every frame must equal
# what kvss-dump --json says, in the same order, and every frame kvss-dump
# drops must carry the same reason (kvss.error). Only where tshark's own
# layers stop before UDP (an IP fragment, a port that is not KVSS's) may the
# dissector not see a frame kvss-dump names.
set -u
BUILD=${1:-build}
cd "$(dirname "$0")/.."
. scripts/check-lib.sh
if ! command -v tshark >/dev/null; then
	echo "wireshark: skipped: no tshark (scripts/deps.sh installs it)"
	check_summary "wireshark"
	exit $?
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
LUA=tools/wireshark/kvss.lua
# The dissector's fields, as it declares them (str("...") and uint("...", bits), and
# the lists of names it declares at once).
fields=$(python3 - "$LUA" <<'PY'
import re, sys
src = open(sys.argv[1]).read()
names = re.findall(r'\b(?:str|uint)\("([a-z0-9_]+)"', src)
for block in re.findall(r'for _, n in ipairs\(\{([^}]*)\}\)', src):
    names += re.findall(r'"([a-z0-9_]+)"', block)
print("\n".join(sorted(set("kvss." + n for n in names))))
PY
)
args=()
for f in $fields; do args+=(-e "$f"); done
check "the dissector declares its fields ($(wc -w <<<"$fields"))" test "$(wc -w <<<"$fields")" -gt 40
for cap in pcap/*.pcap; do
	name=$(basename "$cap" .pcap)
	"$BUILD/kvss-dump" --json "$cap" >"$tmp/$name.dump" 2>/dev/null
	tshark -X lua_script:"$LUA" -r "$cap" -T fields -E header=y -E separator=/t \
		-E occurrence=a -E aggregator=, -e frame.number "${args[@]}" >"$tmp/$name.tshark" 2>"$tmp/$name.err"
	check "$name: tshark reads it with the dissector" \
		sh -c "[ $? -eq 0 ] && ! grep -v 'Running as user' '$tmp/$name.err' | grep -q ."
	check "$name: every field of every frame as kvss-dump says" \
		python3 - "$tmp/$name.dump" "$tmp/$name.tshark" <<'PY'
import json, sys
dump = [json.loads(l) for l in open(sys.argv[1])]
rows = open(sys.argv[2]).read().splitlines()
head = rows[0].split("\t")
got = {}
for r in rows[1:]:
    cells = r.split("\t")
    d = {head[i][5:]: cells[i].split(",") for i in range(1, len(head)) if i < len(cells) and cells[i] != ""}
    got[int(cells[0])] = d

def flat(o, out):
    for k, v in o.items():
        if k == "frame":
            continue
        if isinstance(v, list):
            for e in v:
                flat(e, out)
        else:
            out.setdefault(k, []).append(str(v))
    return out

bad = 0
for d in dump:
    n = d["frame"]
    g = got.get(n, {})
    if "error" in d and d["error"] in ("not_kvss", "ip_fragment") and not g:
        continue  # tshark's own layers stop before UDP, or the port is not ours
    want = flat(d, {})
    if want != g:
        bad += 1
        keys = sorted(set(want) | set(g))
        diff = {k: (want.get(k), g.get(k)) for k in keys if want.get(k) != g.get(k)}
        if bad <= 5:
            print(f"  frame {n}: kvss-dump / tshark differ: {diff}")
print(f"  {len(dump)} frames, {bad} differ")
sys.exit(1 if bad else 0)
PY
done
check_summary "wireshark"
