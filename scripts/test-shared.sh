#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# The shared level's Ceph side against a real cluster this test
# starts (scripts/ceph-cluster.sh, in a mktemp directory, stopped on exit
# whatever happens):
#  1. lib/shared's client (test/test_shared_rados.c live): whole columns
#     round trip, exclusive create, namespaces (an op keeps its own),
#     -EFBIG, -EBUSY, generations bumped by two at once, listing;
#  2. kvss-shared on a fixture of columns and garbage (forged, torn,
#     foreign, oversized records, a first use in the future; terminal
#     escapes in names): ls, gen, reset, sweep (dry run, TTL, generation,
#     orphans past the grace), a generation that is not a number and its
#     repair (gen --repair), a generation gone backwards (records newer
#     than it kept, then repaired), 4294967295 and 4294967294 (never
#     wrapped); --conf that is a FIFO, a device, a directory, a keyring
#     that is a FIFO (refused at once); usage errors; nothing crashes;
#  3. one OSD killed: every column is still read, right;
#  4. every OSD killed: ops end -ETIMEDOUT within the op timeout + 2 s;
#  5. the cluster stopped: connecting fails within the timeout + 2 s.
#   scripts/test-shared.sh [BUILD]
set -u
BUILD=${1:-build}
cd "$(dirname "$0")/.."
. scripts/check-lib.sh
T=$BUILD/tools/test_shared_rados
KS=$BUILD/kvss-shared
# Both built with ASan and UBSan, when make check built them.
[ -x "$BUILD/asan/kvss-shared" ] && KS=$BUILD/asan/kvss-shared
[ -x "$BUILD/asan/tools/test_shared_rados" ] && T=$BUILD/asan/tools/test_shared_rados
for b in "$T" "$KS"; do
	[ -x "$b" ] || { echo "test-shared: $b is missing (make all)" >&2; exit 1; }
done
command -v ceph-mon >/dev/null || {
	echo "test-shared: Ceph is missing (scripts/deps.sh installs it)" >&2
	exit 1
}
t_start=$(date +%s)
tmp=$(mktemp -d /tmp/kvss-shared.XXXXXX)
C=$tmp/cluster
cleanup() {
	[ -f "$C/.kvss-ceph-cluster" ] && scripts/ceph-cluster.sh stop "$C" >/dev/null
	rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

scripts/ceph-cluster.sh start "$C" || exit 1
export KVSS_CEPH_CONF=$C/ceph.conf
# Every ASan report fails the run; librados' own leaks are not ours.
export ASAN_OPTIONS="detect_leaks=0:abort_on_error=1 ${ASAN_OPTIONS:-}"
export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1 ${UBSAN_OPTIONS:-}"

# A phase of the C test: its checks count as this script's.
phase() {
	local out p f
	echo "== test_shared_rados $1"
	out=$(timeout 120 "$T" "$1" 2>&1)
	local rc=$?
	echo "$out"
	p=$(sed -n 's/^test_shared_rados [a-z0-9]*: \([0-9]*\) passed, \([0-9]*\) failed$/\1/p' <<<"$out")
	f=$(sed -n 's/^test_shared_rados [a-z0-9]*: \([0-9]*\) passed, \([0-9]*\) failed$/\2/p' <<<"$out")
	ok=$((ok + ${p:-0}))
	fail=$((fail + ${f:-0}))
	if [ -z "$p" ] || { [ "$rc" -ne 0 ] && [ "${f:-0}" -eq 0 ]; }; then
		echo "  FAIL: test_shared_rados $1 exited $rc" >&2
		fail=$((fail + 1))
	fi
}

# kvss-shared ARGS...: its output in $out, its status in $rc; a signal
# (a crash: 128 + N) or a sanitizer report always fails.
ks() {
	out=$("$KS" --conf "$C/ceph.conf" "$@" 2>&1)
	rc=$?
	echo "\$ kvss-shared $*  (exit $rc)"
	sed 's/^/    /' <<<"$out"
	if [ "$rc" -ge 128 ] || grep -q 'Sanitizer\|runtime error' <<<"$out"; then
		echo "  FAIL: kvss-shared $* crashed" >&2
		fail=$((fail + 1))
	fi
}
has() { grep -qF -- "$1" <<<"$out"; }

# 1. The client.
phase live

# 2. kvss-shared.
phase fixture
ks ls
check "ls exits 0" test "$rc" -eq 0
check "ls shows the organization's namespace" has "o0000000000001111"
check "ls counts its objects: generation 2, 19, 9 named as records (6 bad), 8 slices, 1 not ours" \
	grep -q '^o0000000000001111 *2 *19 *9 *8 *1 ' <<<"$out"
check "ls prints escapes in names as \\x1b, never raw" \
	eval 'has "\\x1b[31mevil\\x07" && ! grep -q $'"'"'\x1b'"'"' <<<"$out"'
ks ls --org 0x1111
check "ls --org 0x1111: only its namespace" eval \
	'[ "$rc" -eq 0 ] && has "o0000000000001111" && ! has "many"'
ks sweep --dry-run --ttl-first 3600
check "sweep --dry-run exits 0" test "$rc" -eq 0
check "sweep --dry-run: would delete 2 columns (6) and 6 corrupt records" has "would delete 12 objects"
phase swept0
ks sweep --ttl-first 3600 --verbose
check "sweep exits 0" test "$rc" -eq 0
check "sweep: 1 live, 1 older generation, 1 past the TTL, 6 corrupt" \
	has "records: 1 live, 1 of an older generation, 1 past the first-use TTL, 0 missing a slice, 6 corrupt"
check "sweep: the corrupt by reason (a first use in the future is one)" \
	has "(magic 1, identity 3, too_big 1, future 1)"
check "sweep: young slices without a record are kept" has "2 without a record younger (kept)"
check "sweep: names not ours are kept" has "not kvss's: "
phase swept1
ks sweep --grace 0
check "sweep --grace 0: the slices without a record go" \
	eval '[ "$rc" -eq 0 ] && has "2 without a record past the 0 s grace"'
phase swept2
# The level's shares, dry runs (phase swept2's objects stay): the live
# column, 64 tokens of 0x1111, in a level of 32 is above its organization's
# cap (the whole level: one organization alone never goes for room; that
# is test_shares'); under a cap of half of 64 too; where it fits, it stays.
ks sweep --dry-run --verbose --capacity-tokens 32
check "sweep --capacity-tokens 32: the live column (its record, 2 slices) would go, above the cap (the whole level)" \
	eval '[ "$rc" -eq 0 ] && has "1 columns (64 tokens) above a cap and 0 (0 tokens) for room" &&
		has "would delete 3 objects" && has "its organization is above its cap"'
ks sweep --dry-run --capacity-tokens 64 --share 0x1111:0.25:0.5
check "sweep --share 0x1111:0.25:0.5 of 64: above its cap of 32" \
	eval '[ "$rc" -eq 0 ] && has "1 columns (64 tokens) above a cap"'
ks sweep --dry-run --verbose --capacity-tokens 64 --share 0x1111:1
check "sweep --share 0x1111:1 of 64: within the level and its share, kept" \
	eval '[ "$rc" -eq 0 ] && has "would delete 0 objects" && has "guaranteed 64, cap 64"'
ks sweep --capacity-tokens 64 --share acme:0.7 --share-default 0.4
check "shares past the whole: exit 2, said" eval '[ "$rc" -eq 2 ] && has "above the whole"'
ks sweep --share acme:0.5
check "a share without --capacity-tokens: exit 2, said" \
	eval '[ "$rc" -eq 2 ] && has "need --capacity-tokens"'
ks sweep --capacity-tokens 64 --share "acme:0.5:nan"
check "a cap that is not a fraction: exit 2" eval '[ "$rc" -eq 2 ] && has "fractions"'
ks ls --share acme:0.5
check "--share is sweep's alone: exit 2" test "$rc" -eq 2
ks gen
check "gen: 0 before any reset" eval '[ "$rc" -eq 0 ] && has "global generation: 0"'
ks reset
check "reset: 0 -> 1" eval '[ "$rc" -eq 0 ] && has "global generation: 0 -> 1"'
ks gen
check "gen: 1 after it" has "global generation: 1"
ks reset --org 0x1111
check "reset --org 0x1111: 2 -> 3 in its namespace" \
	eval '[ "$rc" -eq 0 ] && has "(o0000000000001111): 2 -> 3"'
ks reset --org acme
check "reset --org NAME: the name's isolation id" eval '[ "$rc" -eq 0 ] && has "acme (o"'
ks sweep
check "sweep after the reset: the live column is of an older generation now" \
	eval '[ "$rc" -eq 0 ] && has "records: 0 live, 1 of an older generation"'
phase swept3
# A generation that is not a number: reported, never crashed on, never bumped.
"$T" badgen >/dev/null 2>&1
ks gen --org 0x3333
check "gen of a garbage generation: exit 1, named" \
	eval '[ "$rc" -eq 1 ] && has "is not a number"'
ks reset --org 0x3333
check "reset of a garbage generation: exit 1, not overwritten" \
	eval '[ "$rc" -eq 1 ] && has "is not a number"'
ks sweep
check "sweep skips that namespace and exits 1" eval '[ "$rc" -eq 1 ] && has "1 skipped"'
ks ls
check "ls shows it as bad" eval '[ "$rc" -eq 0 ] && grep -q "^o0000000000003333 *bad" <<<"$out"'
# Round 3's attacks on the generations, replayed with rados.
# The way out of a broken generation object: gen --repair (no record there: 1).
ks gen --repair --org 0x3333 --dry-run
check "gen --repair --dry-run of a garbage generation: says what it would write, writes nothing" \
	eval '[ "$rc" -eq 0 ] && has "would set it to 1"'
ks gen --repair --org 0x3333
check "gen --repair of a garbage generation: set above every record's (1)" \
	eval '[ "$rc" -eq 0 ] && has "set to 1"'
ks gen --org 0x3333
check "... and it reads 1 now" eval '[ "$rc" -eq 0 ] && has ": 1"'
ks gen --repair --org 0x3333
check "gen --repair of a sound generation: nothing to repair" \
	eval '[ "$rc" -eq 0 ] && has "nothing to repair"'
# Reset to 3, records written under it, then the generation object removed:
# the sweep keeps what is newer than what it reads (it deleted it as older).
phase newer
ks sweep
check "sweep with the generation gone backwards: the newer column kept, exit 1, said" \
	eval '[ "$rc" -eq 1 ] && has "1 of a NEWER generation (kept)" && has "2 of newer columns (kept)" && has "gen --repair"'
ks gen --repair --org 0x4444
check "gen --repair: one above the newest record's generation (3 -> 4)" \
	eval '[ "$rc" -eq 0 ] && has "absent (0); 2 records, written under generations up to 3" && has "set to 4"'
ks sweep
check "sweep after the repair: both columns are older now, deleted; exit 0" \
	eval '[ "$rc" -eq 0 ] && has "records: 0 live, 2 of an older generation"'
# The level's shares, for real: 384 tokens in a level of 256, a quiet
# organization guaranteed half of it holding the oldest columns.
phase shares
ks sweep --capacity-tokens 256 --share 0x7777:0.5 --verbose
check "sweep with shares: the noisy organization's two oldest columns go (6 objects), not the quiet one's older ones" \
	eval '[ "$rc" -eq 0 ] && has "0 columns (0 tokens) above a cap and 2 (128 tokens) for room; 256 tokens left" &&
		has "deleted 6 objects"'
phase sharesswept
# 4294967295 is not a generation: reset, sweep and gen say so, nothing deleted.
printf 4294967295 >"$tmp/genmax"
rados -c "$C/ceph.conf" -p kvss put generation "$tmp/genmax"
ks gen
check "gen of 4294967295: exit 1, not a generation" \
	eval '[ "$rc" -eq 1 ] && has "4294967295, which is not a generation" && has "gen --repair"'
ks reset
check "reset of 4294967295: exit 1, said as such (not an errno's text)" \
	eval '[ "$rc" -eq 1 ] && has "4294967295, which is not a generation" && ! has "Value too large"'
ks sweep
check "sweep under 4294967295: exit 1, nothing deleted" \
	eval '[ "$rc" -eq 1 ] && has "nothing deleted"'
ks gen --repair
check "gen --repair of 4294967295: set above every record (exit 0)" \
	eval '[ "$rc" -eq 0 ] && has "set to "'
# The largest generation is not passed: a reset from it wraps nothing.
printf 4294967294 >"$tmp/genmax"
rados -c "$C/ceph.conf" -p kvss -N o0000000000005555 put generation "$tmp/genmax"
ks reset --org 0x5555
check "reset of 4294967294: exit 1, the largest, not wrapped" \
	eval '[ "$rc" -eq 1 ] && has "the largest" && has "wrap"'
ks gen --org 0x5555
check "... and it still reads 4294967294" has ": 4294967294"
# Usage.
out=$("$KS" gen 2>&1); rc=$?
check "no --conf: exit 2" eval '[ "$rc" -eq 2 ] && has "--conf"'
ks frobnicate
check "an unknown command: exit 2" eval '[ "$rc" -eq 2 ] && has "unknown command"'
ks sweep --org 0x1
check "an option of another command: exit 2" test "$rc" -eq 2
ks sweep --ttl-first 1.5
check "a TTL that is not whole: exit 2" test "$rc" -eq 2
ks --timeout-ms 10 gen
check "a timeout below 1000 ms: exit 2" test "$rc" -eq 2
out=$("$KS" --conf /nonexistent/ceph.conf gen 2>&1); rc=$?
check "a missing configuration: exit 2 (the command line's), named" \
	eval '[ "$rc" -eq 2 ] && has "/nonexistent/ceph.conf"'
# A configuration that is not a regular file: refused at once, saying what it
# is (a FIFO hung librados' read of it for ever; /dev/zero and a directory
# read as "No such file or directory").
mkfifo "$tmp/fifo.conf"
mkdir "$tmp/dir.conf"
for p in "$tmp/fifo.conf:a FIFO" "/dev/zero:a character device" "$tmp/dir.conf:a directory"; do
	out=$(timeout 10 "$KS" --conf "${p%%:*}" gen 2>&1); rc=$?
	check "--conf ${p##*:}: exit 2 at once, saying so" \
		eval '[ "$rc" -eq 2 ] && has "not a regular file (${p##*:})"'
done
# And a keyring the configuration names (librados would open it blocking).
sed "s#^keyring = /dev/null#keyring = $tmp/fifo.conf#" "$C/ceph.conf" >"$tmp/kr.conf"
out=$(timeout 20 "$KS" --conf "$tmp/kr.conf" gen 2>&1); rc=$?
check "a keyring that is a FIFO: refused at once, named" \
	eval '[ "$rc" -eq 1 ] && has "keyring of Ceph configuration" && has "(a FIFO)"'
ks --pool nopool gen
check "a missing pool: exit 1, named" eval '[ "$rc" -eq 1 ] && has "pool nopool"'
out=$("$KS" --help 2>&1); rc=$?
check "--help: exit 0" eval '[ "$rc" -eq 0 ] && has "usage: kvss-shared"'
out=$("$KS" --version 2>&1); rc=$?
check "--version: exit 0" eval '[ "$rc" -eq 0 ] && has "kvss-shared"'

# 3. One OSD down: every column still read (the client asks for a new map
# within a second of an op stuck on the dead OSD).
scripts/ceph-cluster.sh kill-osd "$C" 0
phase degraded
# 4. Every OSD down.
scripts/ceph-cluster.sh kill-osd "$C" 1
scripts/ceph-cluster.sh kill-osd "$C" 2
phase down
# 5. Nothing left (the directory kept for the configuration).
scripts/ceph-cluster.sh stop "$C" --keep
phase unreachable
rm -rf "$C"

echo "test-shared: $(($(date +%s) - t_start)) s"
check_summary test-shared
