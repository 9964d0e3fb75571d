#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
#
# Run a command beside CPU hogs: a busy machine, as a user's is. Starts
# HOGS (default 2) `yes >/dev/null` processes, runs the command, ends the
# hogs it started (by their ids) and exits with the command's status.
#
# usage: scripts/with-hogs.sh COMMAND [ARGS...]
#   e.g. scripts/with-hogs.sh make soak SEEDS=20
#        HOGS=2 scripts/with-hogs.sh scripts/test-poll.sh build
set -u
HOGS=${HOGS:-2}
case $HOGS in
'' | *[!0-9]*)
	echo "with-hogs: HOGS must be a whole number (was '$HOGS')" >&2
	exit 2
	;;
esac
[ $# -gt 0 ] || {
	echo "usage: scripts/with-hogs.sh COMMAND [ARGS...]" >&2
	exit 2
}
hogs=()
stop_hogs() {
	local p
	for p in "${hogs[@]}"; do
		kill "$p" 2>/dev/null
		wait "$p" 2>/dev/null
	done
	hogs=()
}
trap stop_hogs EXIT
trap 'exit 130' INT TERM
for ((i = 0; i < HOGS; i++)); do
	yes >/dev/null &
	hogs+=($!)
done
"$@"
rc=$?
stop_hogs
exit $rc
