#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# What the product says to its user names no work tracking ("issue 27",
# "issue 29, item 1", "finding 3"): every tool's --help and --version, and
# every string literal of the C sources under app/ and lib/ (what they can
# print), all of tools/ (the exporter's --help is its docstring), and the
# documents, README.md and docs/*.md, but docs/results.md, whose history
# may say where a figure came from. Comments in the sources may say where
# a change came from; output and documents may not.
set -u
BUILD=${1:-build}
cd "$(dirname "$0")/.."
. scripts/check-lib.sh
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
WORDS='[Ii]ssue [0-9]|[Ii]ssues [0-9]|[Ff]inding [0-9]|[Ff]indings [0-9]'

for tool in kvss kvss-trace kvss-plan kvss-dump; do
	[ -x "$BUILD/$tool" ] || continue
	{ "$BUILD/$tool" --help; "$BUILD/$tool" --version; } >"$tmp/$tool" 2>&1
	check "$tool --help and --version name no work tracking" \
		sh -c "! grep -qE '$WORDS' '$tmp/$tool'"
	grep -nE "$WORDS" "$tmp/$tool" | sed "s/^/  $tool: /"
done
if /usr/bin/python3 -c "import prometheus_client" 2>/dev/null; then
	{ tools/kvss-exporter --help; tools/kvss-exporter --version; } >"$tmp/exporter" 2>&1
	check "kvss-exporter --help and --version name no work tracking" \
		sh -c "! grep -qE '$WORDS' '$tmp/exporter'"
	grep -nE "$WORDS" "$tmp/exporter" | sed 's/^/  kvss-exporter: /'
fi
check "tools/ names no work tracking" sh -c "! grep -rqE '$WORDS' tools/"
grep -rnE "$WORDS" tools/ | sed 's/^/  /'
docs=(README.md)
for f in docs/*.md; do
	[ "$f" = docs/results.md ] || docs+=("$f")
done
# Words split over two lines ("issue\n27") count too.
python3 - "$WORDS" "${docs[@]}" >"$tmp/docs" <<'PY'
import re, sys
words = re.compile(sys.argv[1].replace(" ", r"\s+"))
for f in sys.argv[2:]:
    text = open(f).read()
    for m in words.finditer(text):
        print(f"{f}:{text.count(chr(10), 0, m.start()) + 1}: {' '.join(m.group(0).split())}")
PY
check "README.md and docs/*.md but results.md name no work tracking (${#docs[@]} documents)" test ! -s "$tmp/docs"
sed 's/^/  /' "$tmp/docs"

# String literals of app/ and lib/ (comments removed; a literal split over
# lines is read piece by piece, so a number on the next line is missed).
python3 - "$WORDS" app lib >"$tmp/literals" <<'PY'
import glob, re, sys
words = re.compile(sys.argv[1])
lit = re.compile(r'"((?:[^"\\\n]|\\.)*)"')
for root in sys.argv[2:]:
    for f in sorted(glob.glob(f"{root}/**/*.[ch]", recursive=True)):
        src = open(f, errors="replace").read()
        src = re.sub(r"/\*.*?\*/", lambda m: "\n" * m.group(0).count("\n"), src, flags=re.S)
        src = re.sub(r"//[^\n]*", "", src)
        for n, line in enumerate(src.split("\n"), 1):
            for m in lit.finditer(line):
                if words.search(m.group(1)):
                    print(f"{f}:{n}: \"{m.group(1)}\"")
PY
check "no string literal of app/ or lib/ names work tracking" test ! -s "$tmp/literals"
sed 's/^/  /' "$tmp/literals"
check_summary "words"
