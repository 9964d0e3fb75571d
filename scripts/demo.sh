#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
#
# The main job on built-in defaults: a driver-with-wafer process and two shard
# processes with different bytes per token (256 and 128), joined over
# net_memif, replaying ../shared/traces/mooncake_synthetic.jsonl (its first
# wafer.limit requests, config/memif-driver.cfg) or, when the trace is not
# there, the built-in workload. The driver prints a progress line every 2 s
# and a summary ending in one JSON line.
#
# usage: scripts/demo.sh [BUILD] [extra driver options...]
#   KVSS_DEMO_LIMIT=N   replay N requests instead of the config's limit
#   KVSS_DEMO_JSON=F    also write the summary's JSON line to F
#   KVSS_DEMO_TAG=T     name the file prefixes kvss_demo_{s0,s1,drv}_T (default: the pid)
#   KVSS_DEMO_DRIVER_CFG=F  the driver's configuration (default config/memif-driver.cfg)
#   KVSS_DEMO_SHARD0_CFG=F, KVSS_DEMO_SHARD1_CFG=F  the shards' (default
#                       config/memif-shard0.cfg, config/memif-shard1.cfg)
#   KVSS_DEMO_REFILL_LCORE=1  give each shard its refill lcore too (lcore 2)
#   KVSS_DEMO_L2_DIR=D  the shards' second tiers in D (default: where their
#                       configuration says, /var/lib/kvss, kept from run to run)
#   KVSS_DEMO_STATS_WIDTH=N   cut each shard's final stats lines at N characters (300)
#
# Exit status: the driver's (0: every request done, every refilled byte
# right, no protocol error). Every process is stopped and every file
# prefix removed, whatever happens.
set -u
BUILD=${1:-build}
[ $# -gt 0 ] && shift
cd "$(dirname "$0")/.."

run=${KVSS_DEMO_TAG:-$$}
tmp=$(mktemp -d /tmp/kvss-demo.XXXXXX)
pids=()
prefixes=("kvss_demo_s0_$run" "kvss_demo_s1_$run" "kvss_demo_drv_$run")

. scripts/procs-lib.sh
cleanup() {
	procs_stop TERM
	rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

EAL=(--no-pci --no-huge -m 1024 --log-level lib.eal:error --log-level pmd.net.memif:error)
# Three processes share this machine's cores: let the scheduler place them.
LC="0@(0-$(($(nproc) - 1)))"

MC=../shared/traces/mooncake_synthetic.jsonl
if [ -f "$MC" ]; then
	echo "demo: replaying $MC through a driver and two shards over net_memif"
else
	echo "demo: no trace at $MC: replaying the built-in workload through a driver and two shards"
fi

SLC="1@(0-$(($(nproc) - 1)))"
[ "${KVSS_DEMO_REFILL_LCORE:-0}" = 1 ] && SLC="$SLC,2@(0-$(($(nproc) - 1)))"
scfg=("${KVSS_DEMO_SHARD0_CFG:-config/memif-shard0.cfg}" "${KVSS_DEMO_SHARD1_CFG:-config/memif-shard1.cfg}")
# The refill lcore: lcore 2 for EAL and a copy of each shard's file naming it.
if [ "${KVSS_DEMO_REFILL_LCORE:-0}" = 1 ]; then
	for k in 0 1; do
		sed 's/^\(lcores = { ingest = \[1\]; refill = \)\[\]/\1[2]/' "${scfg[$k]}" >"$tmp/shard$k.cfg"
		grep -q 'refill = \[2\]' "$tmp/shard$k.cfg" || {
			echo "demo: ${scfg[$k]}: no 'lcores = { ingest = [1]; refill = [];' line to give lcore 2" >&2
			exit 2
		}
		scfg[k]=$tmp/shard$k.cfg
	done
fi
for k in 0 1; do
	l2=()
	# KVSS_DEMO_L2_DIR: for the shards whose configuration has a second tier.
	[ -n "${KVSS_DEMO_L2_DIR:-}" ] && grep -q '^ *l2 = {' "${scfg[$k]}" && l2=(--l2-dir "$KVSS_DEMO_L2_DIR")
	"$BUILD/kvss" "${EAL[@]}" --file-prefix "${prefixes[$k]}" --lcores "$LC,$SLC" \
		--vdev "net_memif0,role=server,id=$k,bsize=10240,socket=$tmp/memif$k.sock" \
		-- --config "${scfg[$k]}" --poll idle "${l2[@]}" >"$tmp/shard$k.log" 2>&1 &
	pids+=($!)
done
# A memif client connects once, when its port starts: wait for the servers.
for k in 0 1; do
	for _ in $(seq 1 300); do
		grep -q "up, epoch" "$tmp/shard$k.log" 2>/dev/null && break
		kill -0 "${pids[$k]}" 2>/dev/null || break
		sleep 0.1
	done
	if ! grep -q "up, epoch" "$tmp/shard$k.log" 2>/dev/null; then
		echo "demo: shard $k did not start; its log:"
		cat "$tmp/shard$k.log"
		exit 1
	fi
	sed -n "s/^kvss: \(shard .* up, epoch .*\)/demo: \1/p" "$tmp/shard$k.log"
done
drv=(--config "${KVSS_DEMO_DRIVER_CFG:-config/memif-driver.cfg}" --poll idle)
[ -n "${KVSS_DEMO_LIMIT:-}" ] && drv+=(--limit "$KVSS_DEMO_LIMIT")
"$BUILD/kvss" "${EAL[@]}" --file-prefix "${prefixes[2]}" --lcores "$LC" \
	--vdev "net_memif0,role=client,id=0,bsize=10240,socket=$tmp/memif0.sock" \
	--vdev "net_memif1,role=client,id=1,bsize=10240,socket=$tmp/memif1.sock" \
	-- "${drv[@]}" "$@" | tee "$tmp/driver.log"
status=${PIPESTATUS[0]}
for k in 0 1; do
	if ! kill -0 "${pids[$k]}" 2>/dev/null; then
		echo "demo: shard $k is gone; its log:"
		cat "$tmp/shard$k.log"
		status=1
	fi
done
if [ -n "${KVSS_DEMO_JSON:-}" ]; then
	grep '^{' "$tmp/driver.log" | tail -1 >"$KVSS_DEMO_JSON"
fi
# The shards' own account, after a clean stop.
for k in 0 1; do
	kill -TERM "${pids[$k]}" 2>/dev/null
	wait "${pids[$k]}"
	rc=$?
	grep "final stats" "$tmp/shard$k.log" | sed "s/^kvss: final stats:/demo: shard $k:/" | cut -c1-${KVSS_DEMO_STATS_WIDTH:-300}
	[ "$rc" -ne 0 ] && { echo "demo: shard $k exited $rc"; cat "$tmp/shard$k.log"; status=1; }
done
pids=()
exit "$status"
