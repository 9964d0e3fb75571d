#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# What every command-line tool does at its edges: stdout that cannot be
# written (/dev/full) is one line naming stdout and the error, exit 1, never
# a silent 0; -h and --help are taken by every tool; kvss-plan refuses a
# cluster file's unknown key (exit 2, file, line, key, the nearest known).
set -u
BUILD=${1:-build}
cd "$(dirname "$0")/.."
. scripts/check-lib.sh
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# One command a line: TOOL ARGS...
while read -r tool args; do
	[ -x "$BUILD/$tool" ] || continue
	# shellcheck disable=SC2086
	"$BUILD/$tool" $args >/dev/full 2>"$tmp/err"
	rc=$?
	check "$tool $args >/dev/full: exit 1, '$tool: stdout: No space left on device'" \
		sh -c "[ $rc -eq 1 ] && grep -qx '$tool: stdout: No space left on device' '$tmp/err'"
	[ $rc -eq 1 ] || echo "  exit $rc: $(tail -n 1 "$tmp/err")"
done <<'LIST'
kvss-trace --generate 100 --capacity 1e5 --json
kvss-trace --generate 100 --capacity 1e5
kvss-trace --version
kvss-trace --help
kvss-plan config/cluster-70b.cfg
kvss-plan config/cluster-70b.cfg --json
kvss-plan config/cluster-70b.cfg --compare
kvss-plan config/cluster-70b.cfg --compare --json
kvss-plan --version
kvss-plan --help
kvss-dump pcap/section8.pcap
kvss-dump --json pcap/section8.pcap
kvss-dump --version
kvss-dump --help
kvss-udp-client --version
kvss-udp-client --help
LIST
# Closed, not full: the same, with its error.
"$BUILD/kvss-plan" --version >&- 2>"$tmp/err"
check "kvss-plan --version with stdout closed: exit 1, naming stdout" \
	sh -c "[ $? -eq 1 ] && grep -q '^kvss-plan: stdout: ' '$tmp/err'"

# -h as --help, for every tool: usage on stdout, exit 0.
for tool in kvss-trace kvss-plan kvss-dump kvss-udp-client; do
	[ -x "$BUILD/$tool" ] || continue
	"$BUILD/$tool" -h >"$tmp/out" 2>"$tmp/err"
	check "$tool -h: exit 0, its usage on stdout, nothing on stderr" \
		sh -c "[ $? -eq 0 ] && grep -qi 'usage' '$tmp/out' && [ ! -s '$tmp/err' ]"
done

# kvss-plan: a key it does not know stops it (exit 2), with the file, the
# line, the key's path and the nearest known key.
plan_bad() { # NAME EXPECTED SED
	sed "$3" config/cluster-70b.cfg >"$tmp/c.cfg"
	"$BUILD/kvss-plan" "$tmp/c.cfg" >"$tmp/out" 2>"$tmp/err"
	local rc=$?
	check "kvss-plan, $1: exit 2, '$2', nothing on stdout" \
		sh -c "[ $rc -eq 2 ] && grep -qF -- '$2' '$tmp/err' && [ ! -s '$tmp/out' ] && [ \$(wc -l <'$tmp/err') -eq 1 ]"
	[ $rc -eq 2 ] || echo "  exit $rc: $(head -n 1 "$tmp/err")"
}
plan_bad "token_upper" ":41: jobs.[0].token_upper: unknown key (did you mean tokens_upper?)" \
	's/tokens_upper/token_upper/'
plan_bad "keep_ration" ":48: policy.keep_ration: unknown key (did you mean keep_ratio?)" \
	's/keep_ratio/keep_ration/'
plan_bad "polcy" ":48: polcy: unknown key (did you mean policy?)" 's/^policy/polcy/'
plan_bad "kidn" ":48: policy.kidn: unknown key (did you mean kind?)" 's/kind = "fair"/kidn = "equal"/'
check_summary "tools"
