#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
#
# Hugepages (scripts/hugepages.sh, scripts/eal-mem.sh): reserved by the
# script, used by kvss when free (its log says which pages it runs in),
# nothing left in the mount after it ends, and given back exactly: the
# pages this test added, not others'. Where they cannot be had (not root,
# no 2 MiB pages in the kernel) it says "not run". Its own state file, so
# a reservation made by someone else on this machine is not touched.
set -u
BUILD=${1:-build}
cd "$(dirname "$0")/.."
. scripts/check-lib.sh
. scripts/eal-mem.sh
tmp=$(mktemp -d)
export KVSS_HUGEPAGES_STATE=$tmp/state
export KVSS_HUGEPAGES_LOCKDIR=$tmp # its locks and run state files are its own
SYS=/sys/kernel/mm/hugepages/hugepages-2048kB
# The runs it starts in the background (their commands too): ended however
# the test ends, a failed check included (a command that outlived its
# script was left looping once).
bg=()
cleanup() {
	local p

	for p in "${bg[@]}"; do
		# Its command first: the run then gives back its pages and ends.
		pkill -KILL -P "$p" 2>/dev/null
		for _ in $(seq 50); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
		kill -KILL "$p" 2>/dev/null
	done
	[ -f "$KVSS_HUGEPAGES_STATE" ] && scripts/hugepages.sh release >/dev/null
	rm -rf "$tmp" /var/run/dpdk/kvss_hp_$$
}
trap cleanup EXIT

# Usage errors need nothing.
scripts/hugepages.sh reserve abc >/dev/null 2>"$tmp/err"
check "reserve abc: exit 2, saying what MB takes" \
	sh -c "[ $? -eq 2 ] && grep -q 'reserve MB: a whole number of MB from 2' '$tmp/err'"
scripts/hugepages.sh reserve 1 >/dev/null 2>&1
check "reserve 1: exit 2 (less than a page)" test $? -eq 2
scripts/hugepages.sh frobnicate >/dev/null 2>&1
check "an unknown command: exit 2" test $? -eq 2
scripts/hugepages.sh release >"$tmp/out" 2>&1
check "release with nothing reserved: exit 0, says so" \
	sh -c "[ $? -eq 0 ] && grep -q 'nothing reserved by this script' '$tmp/out'"
# A state file that is not the script's is refused, never evaluated.
printf '%s\n' 'a[$(touch '"$tmp"'/PWNED)] 0' >"$tmp/evil"
KVSS_HUGEPAGES_STATE=$tmp/evil scripts/hugepages.sh status >/dev/null 2>"$tmp/err"
check "a state file with a command in it: exit 1, nothing run" \
	sh -c "[ $? -eq 1 ] && [ ! -e '$tmp/PWNED' ] && grep -q 'is not this script.s' '$tmp/err'"
(KVSS_HUGE=off eal_mem test 64) >/dev/null 2>"$tmp/err"
check "KVSS_HUGE=off: refused (exit 2), naming the variable and its values" \
	sh -c "[ $? -eq 2 ] && grep -q 'KVSS_HUGE=off: 0 (--no-huge), 1' '$tmp/err'"
# KVSS_HUGE=0: --no-huge whatever is free.
(KVSS_HUGE=0 eal_mem test 64 && echo "${EAL_MEM[*]}") >"$tmp/out" 2>"$tmp/err"
check "KVSS_HUGE=0: --no-huge, said in one line" \
	sh -c "grep -qx -- '--no-huge -m 64' '$tmp/out' && [ \$(wc -l <'$tmp/err') = 1 ]"

# run MB CMD: its usage errors, and KVSS_HUGE=0 (CMD runs, nothing reserved).
scripts/hugepages.sh run abc true >/dev/null 2>"$tmp/err"
check "run abc CMD: exit 2, saying what MB takes" \
	sh -c "[ $? -eq 2 ] && grep -q 'run MB: a whole number of MB from 2' '$tmp/err'"
scripts/hugepages.sh run 64 >/dev/null 2>&1
check "run 64 with no command: exit 2" test $? -eq 2
KVSS_HUGE=0 scripts/hugepages.sh run 64 sh -c 'exit 5' >/dev/null 2>"$tmp/err"
check "KVSS_HUGE=0 run: the command's exit status, nothing reserved, said" \
	sh -c "[ $? -eq 5 ] && grep -q 'none reserved (KVSS_HUGE=0)' '$tmp/err'"

if [ "$(id -u)" != 0 ] || [ ! -w "$SYS/nr_hugepages" ]; then
	echo "hugepages: reserving not run (not root, or no 2 MiB hugepages in this kernel)"
	check_summary "hugepages"
	exit
fi
before=$(cat "$SYS/nr_hugepages")
scripts/hugepages.sh reserve 1100 >"$tmp/out" 2>&1
rc=$?
sed 's/^/  /' "$tmp/out"
if [ $rc -ne 0 ]; then
	# The kernel may not find the pages (memory fragmented): the machine's, said.
	check "reserve 1100: refused only with the kernel's count said" grep -q 'MB free' "$tmp/out"
	echo "hugepages: not run further: the kernel gave fewer pages than asked"
	check_summary "hugepages"
	exit
fi
check "reserve 1100: at least 550 pages free, hugetlbfs mounted" \
	sh -c "[ \$(cat $SYS/free_hugepages) -ge 550 ] && awk '\$3 == \"hugetlbfs\"' /proc/mounts | grep -q ."
eal_mem test 1024 2>"$tmp/err"
check "eal_mem: hugepages when free, said in one line" \
	sh -c "[ '${EAL_MEM[*]}' = '-m 1024 --huge-unlink' ] && grep -q '^test: hugepages: 1024 MB of the' '$tmp/err'"
mnt=$(awk '$3 == "hugetlbfs" { print $2; exit }' /proc/mounts)
timeout 120 "$BUILD/kvss" --no-pci "${EAL_MEM[@]}" --lcores 0@0,1@1 --log-level lib.eal:error \
	--no-telemetry --file-prefix "kvss_hp_$$" -- --config config/all-in-one.cfg --limit 50 \
	>"$tmp/run.log" 2>&1
rc=$?
check "kvss on hugepages: exit 0, its log says so, zero verify failures" \
	sh -c "[ $rc -eq 0 ] && grep -q '^kvss: memory in hugepages$' '$tmp/run.log' &&
		grep -q '\"verify_failures\":0,' '$tmp/run.log'"
check "nothing of it left in $mnt (--huge-unlink)" sh -c "! ls '$mnt' | grep -q 'kvss_hp_$$'"
check "its pages given back to the free pool" test "$(cat "$SYS/free_hugepages")" -ge 550
timeout 60 "$BUILD/kvss" --no-pci --no-huge -m 512 --lcores 0@0,1@1 --log-level lib.eal:error \
	--no-telemetry --file-prefix "kvss_hp_$$" -- --config config/all-in-one.cfg --limit 5 \
	>"$tmp/nohuge.log" 2>&1
check "kvss with --no-huge says it runs in 4 KiB pages, and how to have hugepages" \
	grep -q '^kvss: memory in 4 KiB pages (--no-huge; hugepages are faster: scripts/hugepages.sh reserve MB' \
	"$tmp/nohuge.log"
scripts/hugepages.sh release >"$tmp/out" 2>&1
check "release: exactly the pages it added given back ($before before)" \
	sh -c "[ $? -eq 0 ] && [ \$(cat $SYS/nr_hugepages) = $before ] && [ ! -f '$KVSS_HUGEPAGES_STATE' ]"
# run: the pages free while its command runs, and exactly what it added
# given back however the command ends (an exit status of its own, a
# signal), an operator's reservation (this test's, made first) kept.
scripts/hugepages.sh reserve 64 >/dev/null 2>&1
op=$(cat "$SYS/nr_hugepages")
scripts/hugepages.sh run 1100 sh -c "[ \$(cat $SYS/free_hugepages) -ge 550 ] && exit 7" >/dev/null 2>&1
check "run 1100 CMD: the pages free while CMD ran, CMD's exit status (7)" test $? -eq 7
check "run: exactly what it added given back, the operator's 64 MB kept" \
	sh -c "[ \$(cat $SYS/nr_hugepages) = $op ] && [ -f '$KVSS_HUGEPAGES_STATE' ]"
timeout -s TERM 3 scripts/hugepages.sh run 1100 sleep 60 >/dev/null 2>&1
check "run killed (SIGTERM to its group): exit 124, what it added given back" \
	sh -c "[ $? -eq 124 ] && [ \$(cat $SYS/nr_hugepages) = $op ]"
# Called from another directory by a relative path: it finds itself.
(cd scripts && bash hugepages.sh run 1100 sh -c "[ \$(cat $SYS/free_hugepages) -ge 550 ] && exit 7") >/dev/null 2>&1
check "run from scripts/ as 'bash hugepages.sh': pages reserved, CMD's status (7), given back" \
	sh -c "[ $? -eq 7 ] && [ \$(cat $SYS/nr_hugepages) = $op ]"
KVSS_HUGE=maybe scripts/hugepages.sh run 64 true >/dev/null 2>"$tmp/err"
check "KVSS_HUGE=maybe run: exit 2 naming its values, nothing reserved" \
	sh -c "[ $? -eq 2 ] && grep -q 'KVSS_HUGE=maybe' '$tmp/err' && [ \$(cat $SYS/nr_hugepages) = $op ]"
# Two runs at once: the second waits for the first (each finding the
# other's pages free would take none of its own, then lose them).
scripts/hugepages.sh run 1100 sh -c "sleep 2; [ \$(cat $SYS/free_hugepages) -ge 550 ]" >/dev/null 2>"$tmp/a.err" &
first=$!
bg+=("$first")
sleep 0.5
scripts/hugepages.sh run 1100 sh -c "[ \$(cat $SYS/free_hugepages) -ge 550 ]" >/dev/null 2>"$tmp/b.err"
second=$?
wait "$first"
check "two runs at once: each had its pages, the second waited saying so" \
	sh -c "[ $? -eq 0 ] && [ $second -eq 0 ] && grep -q 'waiting' '$tmp/b.err'"
check "two runs at once: the operator's 64 MB kept, nothing else left" test "$(cat "$SYS/nr_hugepages")" = "$op"
# ready FILE: wait (up to 60 s) until the run's command has made FILE, the
# first thing it does. Not "pages free and a child there": the child may
# be the script's own reserve, the pages free before it returns, and a
# signal then is one while reserving (the run ends, as it should).
ready() {
	local _
	for _ in $(seq 600); do
		[ -e "$1" ] && return 0
		sleep 0.1
	done
	return 1
}
# A hangup to the script alone: held until the command has ended (it is
# not the command's to take), the pages kept until then and given back after.
scripts/hugepages.sh run 1100 sh -c "trap 'cat $SYS/free_hugepages >$tmp/held; exit 5' TERM; : >$tmp/hup.up; while :; do sleep 0.1; done" >/dev/null 2>&1 &
hup=$!
bg+=("$hup")
check "SIGHUP to run alone: its command started within 60 s" ready "$tmp/hup.up"
kill -HUP "$hup"
sleep 1
check "SIGHUP to run alone: the script and its command still there, the pages too" \
	sh -c "kill -0 $hup && [ \$(cat $SYS/free_hugepages) -ge 550 ]"
kill -TERM "$(pgrep -P "$hup")"
wait "$hup"
check "the command ended: its status (5), the pages free until then, given back after" \
	sh -c "[ $? -eq 5 ] && [ \$(cat '$tmp/held' 2>/dev/null || echo 0) -ge 550 ] && [ \$(cat $SYS/nr_hugepages) = $op ]"
# Ctrl-C (SIGINT to the whole group): the command gets it as it would
# without the script, and ends; the pages go back; 130. Started as a
# terminal would start it: in a group of its own, SIGINT not ignored (a
# background job of this script inherits it ignored, and bash cannot undo
# that), hence setsid and a reset before the exec.
setsid python3 -c "import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_DFL); os.execvp(sys.argv[1], sys.argv[1:])" \
	scripts/hugepages.sh run 1100 sh -c ": >$tmp/int.up; exec sleep 30" >/dev/null 2>&1 &
grp=$!
bg+=("$grp")
check "SIGINT to the group: its command started within 60 s" ready "$tmp/int.up"
t0=$SECONDS
kill -INT -- -"$grp"
wait "$grp"
check "SIGINT to the group: the command ended at once (exit 130), the pages given back" \
	sh -c "[ $? -eq 130 ] && [ $((SECONDS - t0)) -lt 20 ] && [ \$(cat $SYS/nr_hugepages) = $op ]"
# Through a symbolic link to it: it finds its own directory.
ln -s "$PWD/scripts/hugepages.sh" "$tmp/hp-link"
mounts=$(grep -c hugetlbfs /proc/mounts)
"$tmp/hp-link" run 1100 sh -c "[ \$(cat $SYS/free_hugepages) -ge 550 ] && [ \$(grep -c hugetlbfs /proc/mounts) = $mounts ] && exit 7" >/dev/null 2>&1
check "run through a symbolic link: pages reserved, no second mount, CMD's status (7), given back" \
	sh -c "[ $? -eq 7 ] && [ \$(cat $SYS/nr_hugepages) = $op ] && [ \$(grep -c hugetlbfs /proc/mounts) = $mounts ]"
# A state file that is not a plain file: refused before a page is taken.
ln -s "$tmp/elsewhere" "$tmp/link"
mkdir "$tmp/dir"
mkfifo "$tmp/fifo"
for bad in link dir fifo; do
	KVSS_HUGEPAGES_STATE=$tmp/$bad timeout 10 scripts/hugepages.sh reserve 64 >/dev/null 2>"$tmp/err"
	check "state file a $bad: reserve refused (exit 1), no page taken" \
		sh -c "[ $? -eq 1 ] && grep -q 'not a regular file' '$tmp/err' && [ \$(cat $SYS/nr_hugepages) = $op ] && [ ! -e '$tmp/elsewhere' ]"
done
scripts/hugepages.sh release >/dev/null 2>&1
check "the operator's release: back to $before pages" test "$(cat "$SYS/nr_hugepages")" = "$before"
# KVSS_HUGE=1 with none free: refused, saying how to reserve.
(KVSS_HUGE=1 eal_mem test 999999) >/dev/null 2>"$tmp/err"
check "KVSS_HUGE=1 with too few free: exit 1, naming the reserve command" \
	sh -c "[ $? -eq 1 ] && grep -q 'scripts/hugepages.sh reserve 999999' '$tmp/err'"
check_summary "hugepages"
