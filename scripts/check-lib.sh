# SPDX-License-Identifier: BSD-3-Clause
# Sourced by the test scripts: `check NAME COMMAND...` runs COMMAND and
# counts it passed or failed (naming it on stderr); `check_summary TITLE`
# prints "TITLE: N passed, M failed" and returns nonzero on any failure.
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
check_summary() {
	echo "$1: $ok passed, $fail failed"
	[ "$fail" -eq 0 ]
}
