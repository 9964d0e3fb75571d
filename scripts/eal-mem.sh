# SPDX-License-Identifier: BSD-3-Clause
#
# Sourced by the scripts that start kvss or testpmd. eal_mem WHO MB [N]: N
# processes (default 1) of MB each are about to start. When that much is
# free in 2 MiB hugepages on a hugetlbfs mount (scripts/hugepages.sh
# reserve), EAL_MEM is (-m MB --huge-unlink): the pages' files are
# unlinked once mapped, so nothing is left in the mount when a process
# ends, however it ends. Else EAL_MEM is (--no-huge -m MB). Either way WHO
# says which in one line on stderr (once per WHO). KVSS_HUGE=0 asks for
# --no-huge whatever is free; KVSS_HUGE=1 for hugepages or nothing (exit 1
# when they are not there).
#
# hugetlb_mount and hugetlb_free_mb are the probes scripts/hugepages.sh
# reserves by too: one reading of the machine for both.

# Where 2 MiB hugepages are mounted (a mount of another page size, 1 GiB
# say, is not one: its pages are not the ones counted below), or nothing.
hugetlb_mount() {
	awk '$3 == "hugetlbfs" && ($4 !~ /pagesize=/ || $4 ~ /pagesize=2M/) { print $2; exit }' /proc/mounts
}

# MB free in 2 MiB hugepages (0 where the kernel has none).
hugetlb_free_mb() {
	local sys=/sys/kernel/mm/hugepages/hugepages-2048kB

	if [ -r "$sys/free_hugepages" ]; then
		echo $(($(cat "$sys/free_hugepages") * 2))
	else
		echo 0
	fi
}

eal_mem() {
	local who=$1 mb=$2 n=${3:-1} free mnt

	case ${KVSS_HUGE:-} in
	'' | 0 | 1) ;;
	*)
		echo "$who: KVSS_HUGE=$KVSS_HUGE: 0 (--no-huge), 1 (hugepages or an error) or unset" >&2
		exit 2
		;;
	esac
	free=$(hugetlb_free_mb)
	mnt=$(hugetlb_mount)
	if [ "${KVSS_HUGE:-}" != 0 ] && [ -n "$mnt" ] && [ -w "$mnt" ] && [ "$free" -ge $((mb * n)) ]; then
		EAL_MEM=(-m "$mb" --huge-unlink)
		EAL_HUGE=1
		[ "${_eal_mem_said:-}" = "$who" ] ||
			echo "$who: hugepages: $((mb * n)) MB of the $free MB free at $mnt ($n x $mb MB)" >&2
	elif [ "${KVSS_HUGE:-}" = 1 ]; then
		echo "$who: KVSS_HUGE=1 but $free MB of hugepages free${mnt:+ at $mnt}$([ -z "$mnt" ] && echo " (hugetlbfs not mounted)")," \
			"$((mb * n)) MB needed: scripts/hugepages.sh reserve $((mb * n))" >&2
		exit 1
	else
		EAL_MEM=(--no-huge -m "$mb")
		EAL_HUGE=0
		[ "${_eal_mem_said:-}" = "$who" ] ||
			echo "$who: no hugepages (${free} MB free, $((mb * n)) MB needed; scripts/hugepages.sh reserve $((mb * n))):" \
				"--no-huge" >&2
	fi
	_eal_mem_said=$who
}
