# SPDX-License-Identifier: BSD-3-Clause
#
# Sourced by the scripts that start kvss processes of their own (demo.sh,
# soak-procs.sh). They keep the PIDs in pids[] and the EAL file prefixes in
# prefixes[]; procs_stop SIGNAL sends SIGNAL to each process, waits for each,
# and removes the DPDK runtime directories of those prefixes.

procs_stop() {
	local p
	for p in "${pids[@]}"; do
		kill "-$1" "$p" 2>/dev/null
	done
	for p in "${pids[@]}"; do
		wait "$p" 2>/dev/null
	done
	pids=()
	for p in "${prefixes[@]}"; do
		rm -rf "/var/run/dpdk/$p" "${XDG_RUNTIME_DIR:-/nonexistent}/dpdk/$p"
	done
}
