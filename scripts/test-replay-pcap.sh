#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Captures recorded from the driver role (scripts/record-pcap.sh) replayed
# into a shard over net_pcap: its output capture must hold every refill
# whole with every byte equal to the reference content, a REFILL_DONE for
# each, ACKs up to the last control message, and no ERROR or TOKEN_LOST.
# The capture with malformed and illegal frames mixed in must give the same
# good traffic, plus exactly the answers the illegal frames call for. With
# one lcore, and with a refill lcore on its own TX queue.
set -u
BUILD=${1:-build}
cd "$(dirname "$0")/.."
tmp=$(mktemp -d)
prefix=kvss_replaytest_$$
trap 'rm -rf "$tmp" /var/run/dpdk/${prefix}_*' EXIT
. scripts/check-lib.sh
EAL=(--no-pci --no-huge -m 256 --log-level lib.eal:error --no-telemetry)

replay() { # NAME CAPTURE LCORES: the shard's output in $tmp/NAME_q*.pcap
	local name=$1 cap=$2 lc=$3 tx
	tx="tx_pcap=$tmp/${name}_q0.pcap"
	[ "$lc" = 2 ] && tx="$tx,tx_pcap=$tmp/${name}_q1.pcap"
	timeout 60 "$BUILD/kvss" "${EAL[@]}" --file-prefix "${prefix}_$name" \
		$([ "$lc" = 2 ] && echo "--lcores 0@0,1@1,2@1" || echo "--lcores 0@0,1@1") \
		--vdev "net_pcap0,rx_pcap=$cap,$tx" \
		-- --config config/ci-pcap-shard.cfg --exit-when-idle 400 >"$tmp/$name.log" 2>&1
}

for lc in 1 2; do
	replay "clean$lc" pcap/driver-replay.pcap $lc
	check "clean, $lc lcore(s): the shard exits 0" test $? -eq 0
	"$BUILD/tools/replay_check" check pcap/driver-replay.expect "$tmp"/clean${lc}_q*.pcap \
		>"$tmp/clean$lc.out"
	check "clean, $lc lcore(s): every refilled byte and every answer" test $? -eq 0
	cat "$tmp/clean$lc.out" | tail -1

	replay "bad$lc" pcap/driver-replay-bad.pcap $lc
	check "mixed, $lc lcore(s): the shard exits 0" test $? -eq 0
	"$BUILD/tools/replay_check" check pcap/driver-replay.expect "$tmp"/bad${lc}_q*.pcap --mixed \
		>"$tmp/bad$lc.out"
	check "mixed, $lc lcore(s): every refilled byte, and exactly the answers the bad frames call for" \
		test $? -eq 0
	check "mixed, $lc lcore(s): the good traffic as if the bad frames were not there" \
		test "$(grep '^good:' "$tmp/clean$lc.out")" = "$(grep '^good:' "$tmp/bad$lc.out")"
	stats=$(grep "final stats" "$tmp/bad$lc.log")
	for want in drop_truncated drop_bad_magic drop_bad_version drop_bad_body_len \
		drop_bad_ip_checksum drop_bad_udp_len; do
		check "mixed, $lc lcore(s): $want counted" grep -q " $want=[1-9]" <<<"$stats"
	done
	check "mixed, $lc lcore(s): the stale-epoch frame counted" grep -q " stale_epoch=1\b" <<<"$stats"
	check "mixed, $lc lcore(s): the duplicate counted" grep -q " duplicates=[1-9]" <<<"$stats"
done
check "no file prefix is left" test -z "$(ls -d /var/run/dpdk/${prefix}_* 2>/dev/null)"
check_summary "kvss replay of recorded captures"
