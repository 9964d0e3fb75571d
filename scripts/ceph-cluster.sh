#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
#
# A throwaway Ceph cluster for tests and benchmarks: one mon, one
# mgr and N OSDs (bluestore on sparse files), auth none, every address
# 127.0.0.1, every file under DIR; a pool "kvss" (size 2, min_size 1, 32
# PGs). No cephadm, no containers, no service: the daemons are this
# script's children, recorded by PID in DIR/pids, and only those PIDs are
# ever signalled. ../shared/notes/ceph-local-cluster.md says why each
# setting is there.
#
#   ceph-cluster.sh start DIR [--port P] [--osds N (1..10, 3)] [--op-timeout S]
#       DIR must be missing or empty. P is the mon's msgr2 port (P+1 its v1
#       port, P+2..P+99 the other daemons'); without --port a free range of
#       100 is picked. Waits until every OSD is up and every PG
#       active+clean (at most CEPH_START_TIMEOUT, 90 s), printing progress;
#       on failure prints each daemon's log tail, stops what it started and
#       exits 1 (DIR is kept for the logs). Writes DIR/ceph.conf (clients:
#       rados_osd_op_timeout and rados_mon_op_timeout of S seconds, default
#       5) and DIR/pids ("NAME PID" lines).
#   ceph-cluster.sh stop DIR [--keep]      SIGTERM, 15 s, then SIGKILL; rm DIR
#   ceph-cluster.sh kill-osd DIR ID        SIGKILL osd.ID
#   ceph-cluster.sh status DIR             the daemons' PIDs and `ceph -s`
set -u

die() {
	echo "ceph-cluster: $*" >&2
	exit 1
}
usage() {
	sed -n '/^#   ceph-cluster.sh/,/^set -u/p' "$0" | sed -e 's/^#  //' -e '/^set -u/d' >&2
	exit 2
}

MARK=.kvss-ceph-cluster
START_TIMEOUT=${CEPH_START_TIMEOUT:-90}

# A daemon of this cluster: alive, and started with this DIR's ceph.conf (a
# PID reused by another program since is never signalled).
ours() { # ours DIR PID
	[ -r "/proc/$2/cmdline" ] && tr '\0' ' ' <"/proc/$2/cmdline" 2>/dev/null |
		grep -qF -- "-c $1/ceph.conf"
}

# A free range of 100 TCP ports from P: nothing listening in it, and no
# connection using one either (a client's source port taken from the
# kernel's ephemeral range makes the mon's bind fail, "Address already in
# use", found here with a range inside 32768..60999).
port_free() { # port_free P
	! ss -Htan 2>/dev/null | awk '{print $4}' | sed 's/.*://' |
		awk -v lo="$1" -v hi="$(($1 + 99))" '$1 >= lo && $1 <= hi {found=1} END {exit !found}'
}
# Picked below the kernel's ephemeral ports (ip_local_port_range), so that
# no outgoing connection takes one between the pick and the bind.
pick_port() {
	local i p lo top
	read -r lo _ </proc/sys/net/ipv4/ip_local_port_range 2>/dev/null || lo=32768
	top=$(((lo - 20000) / 100 - 1))
	[ "$top" -gt 0 ] || top=100
	for i in $(seq 1 50); do
		p=$(((RANDOM % top) * 100 + 20000))
		if port_free "$p"; then
			echo "$p"
			return 0
		fi
	done
	return 1
}

cceph() { # the CLI against DIR's cluster, bounded
	timeout 20 ceph -c "$D/ceph.conf" --connect-timeout 10 "$@"
}

log_tails() {
	local f
	for f in "$D"/log/*.log; do
		[ -f "$f" ] || continue
		echo "---- ${f#"$D"/} (last 15 lines)" >&2
		tail -n 15 "$f" >&2
	done
}

# Signal every recorded daemon that is still ours.
signal_all() { # signal_all SIG
	local name pid
	[ -f "$D/pids" ] || return 0
	while read -r name pid; do
		ours "$D" "$pid" && kill "-$1" "$pid" 2>/dev/null
	done <"$D/pids"
	return 0
}
alive_count() {
	local name pid n=0
	[ -f "$D/pids" ] || { echo 0; return; }
	while read -r name pid; do
		ours "$D" "$pid" && n=$((n + 1))
	done <"$D/pids"
	echo "$n"
}

stop_daemons() {
	local i
	signal_all TERM
	for i in $(seq 1 150); do
		[ "$(alive_count)" -eq 0 ] && return 0
		sleep 0.1
	done
	echo "ceph-cluster: $(alive_count) daemon(s) still up after 15 s: SIGKILL" >&2
	signal_all KILL
	for i in $(seq 1 50); do
		[ "$(alive_count)" -eq 0 ] && return 0
		sleep 0.1
	done
	return 1
}

# Start one daemon in the foreground (-f) as a child of ours, in the
# background, and record its PID.
spawn() { # spawn NAME CMD...
	local name=$1
	shift
	"$@" -c "$D/ceph.conf" -f </dev/null >>"$D/log/$name.out" 2>&1 &
	echo "$name $!" >>"$D/pids"
}

fail_start() {
	echo "ceph-cluster: $*" >&2
	log_tails
	stop_daemons
	echo "ceph-cluster: daemons stopped; logs kept in $D/log" >&2
	exit 1
}

write_conf() { # write_conf FSID PORT OP_TIMEOUT
	cat >"$D/ceph.conf" <<EOF
# A throwaway cluster of scripts/ceph-cluster.sh (kvss); removed by its stop.
[global]
fsid = $1
mon_host = [v2:127.0.0.1:$2,v1:127.0.0.1:$(($2 + 1))]
public_network = 127.0.0.0/8
ms_bind_ipv4 = true
ms_bind_ipv6 = false
ms_bind_port_min = $(($2 + 2))
ms_bind_port_max = $(($2 + 99))
auth_cluster_required = none
auth_service_required = none
auth_client_required = none
keyring = /dev/null
run_dir = $D/run
admin_socket = $D/run/\$cluster-\$name.asok
log_file = $D/log/\$name.log
crash_dir = $D/crash
mon_data = $D/data/\$name
mgr_data = $D/data/\$name
osd_data = $D/data/\$name
osd_crush_chooseleaf_type = 0
osd_pool_default_size = 2
osd_pool_default_min_size = 1
osd_pool_default_pg_num = 32
osd_pool_default_pgp_num = 32
osd_pool_default_pg_autoscale_mode = off
mon_allow_pool_delete = true
mon_allow_pool_size_one = true
mon_warn_on_pool_no_redundancy = false
mon_warn_on_insecure_global_id_reclaim = false
mon_warn_on_insecure_global_id_reclaim_allowed = false
mon_warn_on_osd_down_out_interval_zero = false
# The test's disk may be fuller than a production mon's 30 %.
mon_data_avail_warn = 5
# A killed OSD is marked down within seconds (kill tests), never out.
osd_heartbeat_interval = 1
osd_heartbeat_grace = 5
mon_osd_down_out_interval = 0
mon_osd_min_down_reporters = 1

[mon]
mon_cluster_log_file = $D/log/\$cluster.log

[osd]
osd_objectstore = bluestore
bluestore_block_create = true
# Sparse: 20 GiB costs nothing until written; far above any test's data
# (too small and an OSD aborts with ENOSPC rather than going read-only).
bluestore_block_size = 21474836480
bluestore_fsck_on_mkfs = false
bluestore_fsck_on_mount = false
osd_memory_target = 1073741824

[client]
# Without these a request to a PG with no live OSD blocks for ever.
rados_osd_op_timeout = $3
rados_mon_op_timeout = $3
client_mount_timeout = $3
log_file = $D/log/client.log
admin_socket =
EOF
}

cmd_start() {
	local port="" osds=3 opt=5 fsid t0 i uuid id pgs up states
	[ $# -ge 1 ] || usage
	D=$1
	shift
	while [ $# -gt 0 ]; do
		case $1 in
		--port) port=${2:-}; shift 2 ;;
		--osds) osds=${2:-}; shift 2 ;;
		--op-timeout) opt=${2:-}; shift 2 ;;
		*) usage ;;
		esac
	done
	[[ $osds =~ ^([1-9]|10)$ ]] || die "--osds: 1 to 10 (the range of ports holds 10), not '$osds'"
	[[ $opt =~ ^[0-9]+(\.[0-9]+)?$ ]] || die "--op-timeout: seconds, not '$opt'"
	for c in monmaptool ceph-mon ceph-mgr ceph-osd ceph uuidgen ss; do
		command -v "$c" >/dev/null || die "$c is missing (scripts/deps.sh installs Ceph)"
	done
	if [ -n "$port" ]; then
		[[ $port =~ ^[0-9]+$ ]] && [ "$port" -ge 1024 ] && [ "$port" -le 65400 ] ||
			die "--port: 1024 to 65400, not '$port'"
		port_free "$port" || die "a port in $port..$((port + 99)) is in use"
	else
		port=$(pick_port) || die "no free range of 100 ports found from 20000 up to the ephemeral ports"
	fi
	if [ -e "$D" ] && [ -n "$(ls -A "$D" 2>/dev/null)" ]; then
		die "$D exists and is not empty"
	fi
	mkdir -p "$D" || die "cannot make $D"
	D=$(cd "$D" && pwd)
	touch "$D/$MARK"
	mkdir -p "$D/run" "$D/log" "$D/crash" "$D/data/mon.a" "$D/data/mgr.x"
	: >"$D/pids"
	t0=$(date +%s%N)
	fsid=$(uuidgen)
	write_conf "$fsid" "$port" "$opt"
	echo "ceph-cluster: $D: mon at 127.0.0.1:$port, $osds OSDs"

	monmaptool --create --fsid "$fsid" \
		--addv a "[v2:127.0.0.1:$port,v1:127.0.0.1:$((port + 1))]" "$D/monmap" \
		>"$D/log/monmaptool.out" 2>&1 || fail_start "monmaptool failed"
	ceph-mon -c "$D/ceph.conf" --mkfs -i a --monmap "$D/monmap" >"$D/log/mon-mkfs.out" 2>&1 ||
		fail_start "ceph-mon --mkfs failed"
	spawn mon.a ceph-mon -i a
	spawn mgr.x ceph-mgr -i x

	# OSD ids from the mon (it must answer first), then every mkfs at once.
	for i in $(seq 1 50); do
		cceph mon stat >/dev/null 2>&1 && break
		[ "$(alive_count)" -eq 2 ] || fail_start "the mon or the mgr exited"
		sleep 0.2
	done
	cceph mon stat >/dev/null 2>&1 || fail_start "the mon does not answer"
	local mkfs=()
	for i in $(seq 1 "$osds"); do
		uuid=$(uuidgen)
		id=$(cceph osd new "$uuid" 2>>"$D/log/cli.out") || fail_start "ceph osd new failed"
		mkdir -p "$D/data/osd.$id"
		ceph-osd -c "$D/ceph.conf" -i "$id" --mkfs --osd-uuid "$uuid" \
			>"$D/log/osd.$id-mkfs.out" 2>&1 &
		mkfs+=("$id:$!")
	done
	for m in "${mkfs[@]}"; do
		wait "${m#*:}" || fail_start "ceph-osd --mkfs of osd.${m%%:*} failed"
		spawn "osd.${m%%:*}" ceph-osd -i "${m%%:*}"
	done
	cceph osd pool create kvss 32 32 replicated >>"$D/log/cli.out" 2>&1 &&
		cceph osd pool set kvss size 2 >>"$D/log/cli.out" 2>&1 &&
		cceph osd pool set kvss min_size 1 >>"$D/log/cli.out" 2>&1 &&
		cceph osd pool application enable kvss rados >>"$D/log/cli.out" 2>&1 ||
		fail_start "creating the pool kvss failed (log/cli.out)"

	# Healthy: every OSD up, every PG active+clean.
	local last="" last_t=0
	while :; do
		t=$((($(date +%s%N) - t0) / 1000000000))
		[ "$(alive_count)" -eq $((osds + 2)) ] || fail_start "a daemon exited during start"
		up=$(cceph osd stat -f json 2>/dev/null |
			python3 -c 'import json,sys; print(json.load(sys.stdin)["num_up_osds"])' 2>/dev/null)
		states=$(cceph pg stat -f json 2>/dev/null | python3 -c '
import json, sys
j = json.load(sys.stdin)
s = j.get("pg_summary", j)
tot = s.get("num_pgs", 0)
clean = sum(x["num"] for x in s.get("num_pg_by_state", []) if x["name"] == "active+clean")
print(f"{clean} {tot}")' 2>/dev/null)
		pgs=${states% *}
		local total=${states#* }
		if [ "${up:-0}" = "$osds" ] && [ -n "$states" ] && [ "$total" -gt 0 ] && [ "$pgs" = "$total" ]; then
			break
		fi
		local now="${up:-0}/$osds OSDs up, ${pgs:-0}/${total:-?} PGs active+clean"
		if [ "$now" != "$last" ] || [ $((t - last_t)) -ge 5 ]; then
			echo "ceph-cluster: $t s: $now"
			last=$now
			last_t=$t
		fi
		[ "$t" -lt "$START_TIMEOUT" ] || fail_start "not healthy after $START_TIMEOUT s ($now)"
		sleep 1
	done
	t=$((($(date +%s%N) - t0) / 100000000))
	echo "ceph-cluster: healthy in $((t / 10)).$((t % 10)) s: $osds OSDs up, $pgs PGs active+clean, pool kvss; clients: $D/ceph.conf"
}

check_dir() {
	[ $# -ge 1 ] || usage
	D=$1
	[ -f "$D/$MARK" ] || die "$D is not a cluster of this script (no $MARK)"
	D=$(cd "$D" && pwd)
}

cmd_stop() {
	local keep=0
	check_dir "$@"
	[ "${2:-}" = --keep ] && keep=1
	stop_daemons || die "daemons of $D survive SIGKILL"
	if [ $keep -eq 0 ]; then
		rm -rf "$D"
	fi
}

cmd_kill_osd() {
	check_dir "$@"
	local want=${2:-} name pid
	[[ $want =~ ^[0-9]+$ ]] || usage
	while read -r name pid; do
		if [ "$name" = "osd.$want" ]; then
			ours "$D" "$pid" || die "osd.$want (PID $pid) is not running"
			kill -KILL "$pid"
			echo "ceph-cluster: osd.$want (PID $pid) killed"
			return 0
		fi
	done <"$D/pids"
	die "no osd.$want in $D/pids"
}

cmd_status() {
	check_dir "$@"
	local name pid
	while read -r name pid; do
		if ours "$D" "$pid"; then
			echo "$name $pid up"
		else
			echo "$name $pid down"
		fi
	done <"$D/pids"
	cceph -s 2>&1
}

case ${1:-} in
start) shift; cmd_start "$@" ;;
stop) shift; cmd_stop "$@" ;;
kill-osd) shift; cmd_kill_osd "$@" ;;
status) shift; cmd_status "$@" ;;
-h|--help|help) usage ;;
*) usage ;;
esac
