#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
#
# Hugepages for kvss's processes (2 MiB pages; DPDK maps its memory from
# them, so the store, the mbuf pools and the PrefixMap cost no page walk
# per 4 KiB and no first-touch fault per page):
#
#   scripts/hugepages.sh reserve MB   as root: make MB of 2 MiB pages free,
#                                     mounting hugetlbfs at /dev/hugepages
#                                     if nothing is mounted; what it added
#                                     is written down, so that
#   scripts/hugepages.sh release      gives back exactly that (pages others
#                                     reserved, and a mount it did not make,
#                                     stay)
#   scripts/hugepages.sh status       what is free, and where it is mounted
#   scripts/hugepages.sh run MB CMD...
#                                     CMD with MB made free for it (as
#                                     reserve, under a state file of its
#                                     own), then exactly what that added
#                                     given back, however CMD ends; its
#                                     exit status is CMD's. Not root, the
#                                     kernel short, or KVSS_HUGE=0: one
#                                     line, and CMD runs without them
#                                     (make bench: scripts/bench.sh).
#                                     CMD runs in the foreground (its
#                                     stdin, Ctrl-C and a signal to the
#                                     group reach it as they would without
#                                     this script); a signal to the script
#                                     alone is held until CMD has ended,
#                                     and the pages go back only then. Two
#                                     runs at once take turns (the second
#                                     says it waits).
#
# Exit 0 done; 1 the kernel gave fewer pages than asked (said: how many;
# what it gave is released again) or not root; 2 a usage error. The
# scripts that start kvss (demo.sh, the benches) use reserved pages when
# enough are free and say so in one line, else run with --no-huge
# (scripts/eal-mem.sh).
set -u
SYS=/sys/kernel/mm/hugepages/hugepages-2048kB
STATE=${KVSS_HUGEPAGES_STATE:-/run/kvss-hugepages}
MNT=/dev/hugepages
# This script, by a path that works from anywhere (it calls itself),
# through a symbolic link too.
SELF=$(readlink -f -- "$0")
# Held while the page count and the mount change (reserve, release), and
# for a whole run: two at once would each count the other's pages as theirs.
# KVSS_HUGEPAGES_LOCKDIR: where (a test's own directory; /run else).
LOCKDIR=${KVSS_HUGEPAGES_LOCKDIR:-/run}
LOCK=$LOCKDIR/kvss-hugepages.lock
RUNLOCK=$LOCKDIR/kvss-hugepages-run.lock

usage() {
	echo "usage: scripts/hugepages.sh reserve MB | release | status | run MB CMD..." >&2
	exit 2
}

# The probes eal-mem.sh starts kvss by (hugetlb_mount, hugetlb_free_mb):
# without them, nothing would read as mounted and hugetlbfs be mounted twice.
. "${SELF%/*}/eal-mem.sh" || { echo "hugepages: ${SELF%/*}/eal-mem.sh not read" >&2; exit 1; }
command -v flock >/dev/null || { echo "hugepages: flock (util-linux) is needed" >&2; exit 1; }
mounted() { hugetlb_mount; }
free_mb() { hugetlb_free_mb; }

# The state file is a regular file of this script's, or absent: anything
# else (a symlink, a directory, a FIFO) is refused before a page is taken.
check_state() {
	if [ -L "$STATE" ] || { [ -e "$STATE" ] && [ ! -f "$STATE" ]; }; then
		echo "hugepages: $STATE is not a regular file of this script's: left alone" >&2
		exit 1
	fi
}

# The state file's two numbers (pages added, 1 when it mounted) into
# st_added and st_mounted, read as digits and never evaluated: bash
# arithmetic on what a file says runs what a[$(...)] in it names.
read_state() {
	local a m
	st_added=0
	st_mounted=0
	[ -f "$STATE" ] || return 0
	read -r a m <"$STATE"
	if ! [[ "${a:-}" =~ ^[0-9]{1,9}$ && "${m:-}" =~ ^[01]$ ]]; then
		echo "hugepages: $STATE is not this script's (want two numbers): left alone" >&2
		exit 1
	fi
	st_added=$((10#$a))
	st_mounted=$m
}

# run's MB: digits, 2 to 9999999, or a usage error.
check_mb() {
	if ! [[ "$1" =~ ^[0-9]{1,7}$ ]] || [ "$((10#$1))" -lt 2 ]; then
		echo "hugepages: $2 MB: a whole number of MB from 2 to 9999999 (was '$1')" >&2
		exit 2
	fi
}

# What the state file says was added, given back (the caller holds LOCK:
# two releases of one file, or a reserve between, would count it twice).
give_back() {
	local added did_mount now

	[ -f "$STATE" ] || { echo "hugepages: nothing reserved by this script"; return 0; }
	read_state
	added=$st_added
	did_mount=$st_mounted
	if [ "$added" -gt 0 ]; then
		now=$(cat "$SYS/nr_hugepages")
		echo $((now > added ? now - added : 0)) >"$SYS/nr_hugepages"
	fi
	if [ "${did_mount:-0}" = 1 ] && [ "$(mounted)" = "$MNT" ]; then
		umount "$MNT" 2>/dev/null || echo "hugepages: $MNT is busy: left mounted" >&2
	fi
	rm -f "$STATE"
	echo "hugepages: released $((added * 2)) MB; $(free_mb) MB still free"
}

case ${1:-} in
run)
	[ $# -ge 3 ] || usage
	check_mb "$2" run
	mb=$((10#$2))
	shift 2
	case ${KVSS_HUGE:-} in
	'' | 1) ;;
	0)
		echo "hugepages: none reserved (KVSS_HUGE=0)" >&2
		"$@"
		exit
		;;
	*)
		echo "hugepages: KVSS_HUGE=$KVSS_HUGE: 0 (--no-huge), 1 (hugepages or an error) or unset" >&2
		exit 2
		;;
	esac
	# One run at a time (the second waits, saying so): a run that found
	# another's pages free would add none, and lose them when it ends.
	if [ "$(id -u)" = 0 ]; then
		exec 8>"$RUNLOCK"
		flock -n 8 || { echo "hugepages: another run holds its pages: waiting for it" >&2; flock 8; }
	fi
	# A state file of its own: an operator's reservation is never released here.
	own=$(mktemp "$LOCKDIR/kvss-hugepages-run.XXXXXX" 2>/dev/null || mktemp)
	rm -f "$own"
	# Given back however this script ends. A signal that comes while a
	# command runs in the foreground (reserve, CMD) is held by bash until
	# that command has ended (a signal to the whole group reaches CMD too,
	# and ends it), so the pages never go while CMD may be using them.
	trap 'KVSS_HUGEPAGES_STATE=$own "$SELF" release >&2' EXIT
	sig=
	for s in TERM INT HUP USR1 USR2 ALRM; do
		trap "sig=$s" "$s"
	done
	KVSS_HUGEPAGES_STATE=$own "$SELF" reserve "$mb" >&2 ||
		echo "hugepages: $mb MB not reserved: what follows runs with --no-huge unless some are free" >&2
	if [ -n "$sig" ]; then
		echo "hugepages: SIG$sig while reserving: $* not run" >&2
		exit $((128 + $(kill -l "$sig")))
	fi
	"$@" 8>&-
	exit
	;;
status)
	[ $# -eq 1 ] || usage
	if [ ! -d "$SYS" ]; then
		echo "hugepages: none (the kernel has no 2 MiB hugepages)"
		exit 0
	fi
	m=$(mounted)
	where="hugetlbfs not mounted"
	[ -n "$m" ] && where="hugetlbfs at $m"
	mine=
	read_state
	[ -f "$STATE" ] && mine="; $((st_added * 2)) MB of them reserved by this script"
	echo "hugepages: $(free_mb) MB free of $(($(cat "$SYS/nr_hugepages") * 2)) MB (2 MiB pages), $where$mine"
	;;
reserve)
	[ $# -eq 2 ] || usage
	check_mb "$2" reserve
	mb=$((10#$2))
	if [ "$(id -u)" != 0 ]; then
		echo "hugepages: reserving needs root (it writes $SYS/nr_hugepages)" >&2
		exit 1
	fi
	if [ ! -d "$SYS" ]; then
		echo "hugepages: the kernel has no 2 MiB hugepages ($SYS)" >&2
		exit 1
	fi
	check_state
	exec 9>"$LOCK"
	flock 9
	read_state
	want=$(((mb + 1) / 2))
	have=$(cat "$SYS/free_hugepages")
	added=0
	if [ "$have" -lt "$want" ]; then
		before=$(cat "$SYS/nr_hugepages")
		echo $((before + want - have)) >"$SYS/nr_hugepages"
		added=$(($(cat "$SYS/nr_hugepages") - before))
	fi
	did_mount=0
	if [ -z "$(mounted)" ]; then
		mkdir -p "$MNT"
		mount -t hugetlbfs -o pagesize=2M nodev "$MNT" || {
			echo "hugepages: cannot mount hugetlbfs at $MNT" >&2
			[ "$added" -gt 0 ] && echo $(($(cat "$SYS/nr_hugepages") - added)) >"$SYS/nr_hugepages"
			exit 1
		}
		did_mount=1
	fi
	# What was added before (an earlier reserve) is added to.
	read_state
	echo "$((st_added + added)) $((st_mounted | did_mount))" >"$STATE"
	if [ "$(cat "$SYS/free_hugepages")" -lt "$want" ]; then
		echo "hugepages: asked for $mb MB, the kernel has $(free_mb) MB free (memory fragmented or short); releasing" >&2
		give_back >/dev/null
		exit 1
	fi
	echo "hugepages: $(free_mb) MB free in 2 MiB pages at $(mounted) ($((added * 2)) MB added by this call)"
	;;
release)
	[ $# -eq 1 ] || usage
	check_state
	exec 9>"$LOCK"
	flock 9
	give_back
	;;
*)
	usage
	;;
esac
