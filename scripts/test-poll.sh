#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# poll_mode "interrupt": an lcore with nothing to do
# sleeps in epoll until an RX interrupt, as DPDK's l3fwd-power. On a port
# that has them (net_tap, here: two taps joined by a bridge in a network
# namespace this script makes and deletes) the shard and the driver sleep
# and are woken by frames, and the run is whole; on one that has none
# (net_ring, role all) kvss says so and naps as in "idle". The figures of
# the three modes: scripts/bench-poll.py (make bench).
set -u
BUILD=${1:-build}
cd "$(dirname "$0")/.."
. scripts/check-lib.sh
tmp=$(mktemp -d)
NSP=kvpoll_t$$
pids=()
cleanup() {
	local p
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
	for p in "${pids[@]}"; do wait "$p" 2>/dev/null; done
	ip netns del $NSP 2>/dev/null
	rm -rf "$tmp" /var/run/dpdk/kvpoll_*_$$
}
trap cleanup EXIT
field() { python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])' "$1" "$2" 2>/dev/null; }

# No RX interrupts on net_ring: said, and the run is whole anyway.
timeout 60 "$BUILD/kvss" --no-pci --no-huge -m 1024 --lcores "0@0,1@1" --log-level lib.eal:error \
	--no-telemetry --file-prefix "kvpoll_all_$$" -- --config config/all-in-one.cfg --poll interrupt \
	--limit 60 >"$tmp/all.log" 2>&1
check "net_ring: --poll interrupt runs whole (exit 0)" test $? -eq 0
check "net_ring: it says the port has no RX interrupts and naps instead" \
	grep -q 'port 0 (net_ring) has no RX interrupts: poll_mode "interrupt" sleeps briefly' "$tmp/all.log"
"$BUILD/kvss" --no-pci --no-huge -m 256 --file-prefix "kvpoll_bad_$$" --log-level lib.eal:error \
	-- --config config/all-in-one.cfg --poll nap >"$tmp/bad.log" 2>&1
check "--poll nap is refused (exit 2), naming the modes" \
	sh -c "[ $? -eq 2 ] && grep -q \"'nap' is not busy, idle or interrupt\" '$tmp/bad.log'"

if ! ip netns add $NSP 2>/dev/null; then
	echo "poll: net_tap part skipped: cannot create network namespaces here"
	check_summary "poll"
	exit
fi
ip netns exec $NSP sysctl -qw net.ipv6.conf.all.disable_ipv6=1
ip netns exec $NSP sysctl -qw net.ipv6.conf.default.disable_ipv6=1
ip -n $NSP link add br0 type bridge && ip -n $NSP link set br0 up
python3 - "$tmp" <<'PY'
import re, sys
src = open("scripts/bench-poll.py").read()
for name in ["SHARD", "DRIVER"]:
    body = re.search(name + r' = """(.*?)"""', src, re.S).group(1)
    open(sys.argv[1] + "/" + name.lower() + ".cfg", "w").write(body)
PY
# tap NAME: wait for the PMD's tap, then into the bridge (deep queue: data is not resent).
tap() {
	for _ in $(seq 100); do ip -n $NSP link show "$1" >/dev/null 2>&1 && break; sleep 0.1; done
	ip -n $NSP link set "$1" master br0 txqueuelen 20000 up
}
# The shard stops after 5 s without a frame: the driver, started after it,
# takes seconds to start EAL on a busy machine (1 s was too short beside two
# CPU hogs: the shard had stopped before the driver's HELLO).
ip netns exec $NSP timeout 60 "$BUILD/kvss" --no-pci --no-huge -m 256 --lcores "0@0,1@1" \
	--log-level lib.eal:error --no-telemetry --file-prefix "kvpoll_s_$$" --vdev net_tap0,iface=kvtS$$ \
	-- --config "$tmp/shard.cfg" --poll interrupt --exit-when-idle 5000 >"$tmp/shard.log" 2>&1 &
sp=$!
pids+=($sp)
tap kvtS$$
ip netns exec $NSP timeout 60 "$BUILD/kvss" --no-pci --no-huge -m 256 --lcores "0@0" \
	--log-level lib.eal:error --no-telemetry --file-prefix "kvpoll_d_$$" --vdev net_tap0,iface=kvtD$$ \
	-- --config "$tmp/driver.cfg" --poll interrupt >"$tmp/driver.log" 2>&1 &
dp=$!
pids+=($dp)
tap kvtD$$
wait $dp
drc=$?
wait $sp
grep '^{' "$tmp/driver.log" | tail -1 >"$tmp/driver.json"
check "net_tap: the run is whole in interrupt mode (exit 0, 200 requests, 0 errors)" \
	test "$drc $(field "$tmp/driver.json" requests) $(field "$tmp/driver.json" verify_failures) $(field "$tmp/driver.json" protocol_errors)" = "0 200 0 0"
check "net_tap: neither side said its port lacks RX interrupts" \
	sh -c "! grep -q 'has no RX interrupts' '$tmp/driver.log' '$tmp/shard.log'"
check "net_tap: the shard's lcore slept, and frames woke it" \
	grep -q 'final stats: polls .*intr_sleeps=[1-9][0-9]* intr_wakeups=[1-9]' "$tmp/shard.log"
echo "poll: $(grep -o 'intr_sleeps=[0-9]* intr_wakeups=[0-9]*' "$tmp/shard.log") (the shard); hit ratio $(field "$tmp/driver.json" hit_ratio)"
[ "$fail" -eq 0 ] || tail -n 5 "$tmp"/*.log >&2
check_summary "poll"
