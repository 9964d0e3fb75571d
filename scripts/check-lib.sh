# SPDX-License-Identifier: BSD-3-Clause
# Sourced by the test scripts: `check NAME COMMAND...` runs COMMAND and
# counts it passed or failed (naming it on stderr); `check_summary TITLE`
# prints "TITLE: N passed, M failed" and returns nonzero on any failure;
# `holds EXPR` is true when the Python expression EXPR is (figures pasted
# in by the caller), for comparing numbers; `log_field LOG KEY` prints a
# field of the last JSON line (a driver's summary) of LOG.
ok=0
fail=0
check() {
	local name=$1
	shift
	if "$@"; then
		ok=$((ok + 1))
	else
		echo "  FAIL: $name" >&2
		fail=$((fail + 1))
	fi
}
holds() {
	python3 -c "import sys; sys.exit(0 if ($1) else 1)" && return 0
	echo "    not so: $1" >&2 # the figures it was given: the failure's own evidence
	return 1
}
# stat_has KEY=VALUE STATS: the final stats (every "final stats" line of a
# log) say KEY=VALUE; a counter they leave out is 0.
stat_has() {
	local key=${1%%=*} val=${1#*=}
	grep -q " $1\b" <<<"$2" || { [ "$val" = 0 ] && ! grep -q " $key=" <<<"$2"; }
}
log_field() {
	python3 -c 'import json,sys; print(json.loads([l for l in open(sys.argv[1]) if l.startswith("{")][-1])[sys.argv[2]])' "$1" "$2" 2>/dev/null
}
check_summary() {
	echo "$1: $ok passed, $fail failed"
	[ "$fail" -eq 0 ]
}
