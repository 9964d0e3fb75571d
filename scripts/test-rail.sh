#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# The rail-optimized path (PROTOCOL.md section 1): KVSS
# traffic must not cross a router, and a router decrements the IPv4 TTL.
# A real router: three network namespaces, the driver's and the shard's
# joined through a third that forwards (veth pairs, ip_forward), each kvss
# process on its veth through DPDK's net_af_packet; and once on one segment
# (one veth pair). Every namespace and process is this script's own, and
# all of them go at its end.
#
#   one segment, both sides "refuse":   served, 0 hops on both sides
#   routed, "warn" (the default):       served and said: 1 hop, both sides
#   routed, shard.routed = "refuse":    the shard drops the driver's frames
#   routed, driver.routed = "refuse":   the driver refuses the shard
set -u
BUILD=${1:-build}
cd "$(dirname "$0")/.."
. scripts/check-lib.sh
tmp=$(mktemp -d)
ND=kvrail_d$$ NR=kvrail_r$$ NS=kvrail_s$$
pids=()
cleanup() {
	local p
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
	for p in "${pids[@]}"; do wait "$p" 2>/dev/null; done
	for n in $ND $NR $NS; do ip netns del $n 2>/dev/null; done
	rm -rf "$tmp" /var/run/dpdk/kvss_rail_*_$$
}
trap cleanup EXIT

if ! ip netns add $ND 2>/dev/null; then
	echo "rail: skipped: cannot create network namespaces here (root, iproute2)"
	check_summary "rail"
	exit 0
fi
ip netns add $NR && ip netns add $NS
for n in $ND $NR $NS; do # nothing of the kernel's own on these links
	ip netns exec $n sysctl -qw net.ipv6.conf.all.disable_ipv6=1
	ip netns exec $n sysctl -qw net.ipv6.conf.default.disable_ipv6=1
done

DRV_MAC=02:00:00:00:aa:01 DRV_IP=10.98.1.1
SH_MAC=02:00:00:00:bb:10 SH_IP=10.98.2.10

# veth NAME_A in namespace A, NAME_B in namespace B, both up, MTU 9000.
pair() {
	ip link add "$1" type veth peer name "$3" &&
		ip link set "$1" netns "$2" && ip link set "$3" netns "$4" &&
		ip -n "$2" link set "$1" mtu 9000 up && ip -n "$4" link set "$3" mtu 9000 up
}
mac_of() { ip -n "$1" -o link show "$2" | grep -o 'link/ether [0-9a-f:]*' | cut -d' ' -f2; }

# The routed path: driver -- dA | rA (router) rB | sB -- shard.
pair dA$$ $ND rA$$ $NR
pair rB$$ $NR sB$$ $NS
ip -n $NR addr add 10.98.1.254/24 dev rA$$
ip -n $NR addr add 10.98.2.254/24 dev rB$$
ip netns exec $NR sysctl -qw net.ipv4.ip_forward=1
ip netns exec $NR sysctl -qw net.ipv4.conf.all.rp_filter=0
# The kvss endpoints answer no ARP: the router knows them.
ip -n $NR neigh replace $DRV_IP lladdr $DRV_MAC dev rA$$ nud permanent
ip -n $NR neigh replace $SH_IP lladdr $SH_MAC dev rB$$ nud permanent
RA_MAC=$(mac_of $NR rA$$) RB_MAC=$(mac_of $NR rB$$)
# One segment: driver -- dX | sX -- shard.
pair dX$$ $ND sX$$ $NS
check "the three namespaces and their links are up" test -n "$RA_MAC" -a -n "$RB_MAC"

# shard.cfg ROUTED WAFER_MAC
shard_cfg() {
	cat <<EOF
role = "shard";
poll_mode = "idle";
mtu = 1500;
lcores = { ingest = [1]; refill = []; control = 0; };
shard = {
  id = 0; model = 0; routed = "$1";
  address = { mac = "$SH_MAC"; ipv4 = "$SH_IP"; };
  wafer = { mac = "$2"; ipv4 = "$DRV_IP"; };
  batch_timeout_ms = 1000;
  caches = ( { id = 0; bytes_per_token = 256; buffers = 2; capacity_tokens = 50000; } );
};
EOF
}
# driver.cfg ROUTED SHARD_MAC (the next hop to the shard)
driver_cfg() {
	cat <<EOF
role = "driver";
poll_mode = "idle";
mtu = 1500;
lcores = { control = 0; };
driver = {
  port = 0; routed = "$1";
  address = { mac = "$DRV_MAC"; ipv4 = "$DRV_IP"; };
  column = 64; retransmit_ms = 20; hello_ms = 100; start_timeout_ms = 4000; away_ms = 0;
  models = ( {
    caches = ( { id = 0; rule = "full"; } );
    shards = ( { id = 0; address = { mac = "$2"; ipv4 = "$SH_IP"; };
                 bytes_per_token = [256]; capacity_tokens = [50000]; } );
  } );
};
wafer = { trace = ""; generate = 60; max_inflight = 4; };
EOF
}

# run TAG SHARD_IF DRIVER_IF SHARD_ROUTED DRIVER_ROUTED WAFER_MAC SHARD_MAC:
# a shard and a driver, each in its namespace; the driver's status in rc_TAG.
run() {
	local tag=$1 sp
	shard_cfg "$4" "$6" >"$tmp/$tag-shard.cfg"
	driver_cfg "$5" "$7" >"$tmp/$tag-driver.cfg"
	ip netns exec $NS timeout 60 "$BUILD/kvss" --no-pci --no-huge -m 256 --lcores "0@0,1@1" \
		--log-level lib.eal:error --no-telemetry --file-prefix "kvss_rail_s_$$" \
		--vdev "net_af_packet0,iface=$2,framecnt=16384" -- --config "$tmp/$tag-shard.cfg" \
		--exit-when-idle 5000 >"$tmp/$tag-shard.log" 2>&1 &
	sp=$!
	pids+=($sp)
	# A busy machine takes seconds to start EAL. The driver gives its shard
	# start_timeout_ms from its own start, so it starts once the shard's
	# port is up, not after a fixed second; the shard stops 5 s after its
	# last frame, so it is still there when the driver's HELLO comes.
	for _ in $(seq 1 600); do
		grep -q "port 0 (net_af_packet) started" "$tmp/$tag-shard.log" 2>/dev/null && break
		kill -0 $sp 2>/dev/null || break
		sleep 0.1
	done
	ip netns exec $ND timeout 60 "$BUILD/kvss" --no-pci --no-huge -m 256 --lcores "0@0" \
		--log-level lib.eal:error --no-telemetry --file-prefix "kvss_rail_d_$$" \
		--vdev "net_af_packet0,iface=$3,framecnt=16384" -- --config "$tmp/$tag-driver.cfg" \
		>"$tmp/$tag-driver.log" 2>&1
	eval "rc_$tag=$?"
	wait $sp
	grep '^{' "$tmp/$tag-driver.log" | tail -1 >"$tmp/$tag.json"
}
jf() { python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])' "$1" "$2" 2>/dev/null; }

# One segment, both sides refusing routed traffic: nothing crossed a router.
run seg sX$$ dX$$ refuse refuse "$DRV_MAC" "$SH_MAC"
check "one segment: the run is served whole (exit 0)" test "$rc_seg" = 0
check "one segment: every request ran, every refilled byte right" \
	test "$(jf "$tmp/seg.json" finished) $(jf "$tmp/seg.json" verify_failures) $(jf "$tmp/seg.json" requests)" = "True 0 60"
check "one segment: the driver counts 0 hops to its shard" \
	test "$(jf "$tmp/seg.json" routed_shards) $(jf "$tmp/seg.json" max_shard_hops)" = "0 0"
check "one segment: the shard counts 0 hops from the driver and the wafer" \
	grep -q "the rail: the driver's frames crossed 0 router(s), the wafer's 0" "$tmp/seg-shard.log"

# Through the router, warning (testing): served, and said on both sides.
run warn sB$$ dA$$ warn warn "$RB_MAC" "$RA_MAC"
check "routed, warn: the run is served whole through the router (exit 0)" test "$rc_warn" = 0
check "routed, warn: every request ran, every refilled byte right" \
	test "$(jf "$tmp/warn.json" finished) $(jf "$tmp/warn.json" verify_failures) $(jf "$tmp/warn.json" requests)" = "True 0 60"
check "routed, warn: the driver found its shard 1 hop away and said so" \
	sh -c "test \"$(jf "$tmp/warn.json" routed_shards) $(jf "$tmp/warn.json" max_shard_hops)\" = '1 1' &&
		grep -q 'is 1 router(s) away (its STATUS came with IPv4 TTL 63).*serving anyway' '$tmp/warn-driver.log' &&
		grep -q 'summary: rail: 1 shard(s) reached through a router: shard 0 of model 0 1 hop(s)' '$tmp/warn-driver.log'"
check "routed, warn: the shard found the driver's and the wafer's frames 1 hop away" \
	sh -c "grep -q 'crossed 1 router(s) (IPv4 TTL 63).*serving it anyway' '$tmp/warn-shard.log' &&
		grep -q \"the rail: the driver's frames crossed 1 router(s), the wafer's 1\" '$tmp/warn-shard.log' &&
		grep -q 'final stats: strangers.* routed=[1-9]' '$tmp/warn-shard.log'"

# Through the router, the shard refusing (production): it never answers.
run srefuse sB$$ dA$$ refuse warn "$RB_MAC" "$RA_MAC"
check "routed, shard refuses: the driver never sees it up (exit not 0)" \
	sh -c "test '$rc_srefuse' != 0 && grep -q 'did not answer HELLO' '$tmp/srefuse-driver.log'"
check "routed, shard refuses: it said so, and dropped and counted every frame" \
	sh -c "grep -q 'refusing it (shard.routed = \"refuse\")' '$tmp/srefuse-shard.log' &&
		grep -q 'routed_refused=[1-9]' '$tmp/srefuse-shard.log' &&
		! grep -q 'acks_sent=[1-9]\| status_sent=' '$tmp/srefuse-shard.log'"

# Through the router, the driver refusing: it stops at the shard's first STATUS.
run drefuse sB$$ dA$$ warn refuse "$RB_MAC" "$RA_MAC"
check "routed, driver refuses: it stops with a configuration error (exit 2), naming driver.routed" \
	sh -c "test '$rc_drefuse' = 2 && grep -q 'refusing to serve (driver.routed = \"refuse\")' '$tmp/drefuse-driver.log'"
check "routed, driver refuses: no request ran" test "$(jf "$tmp/drefuse.json" requests)" = 0

for t in seg warn srefuse drefuse; do
	echo "rail: $t: driver exit $(eval echo \$rc_$t); $(grep -h -o 'the rail: .*' "$tmp/$t-shard.log")"
done
[ "$fail" -eq 0 ] || tail -n 6 "$tmp"/*-driver.log >&2
check_summary "rail"
