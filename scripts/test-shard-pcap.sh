#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# The kvss shard over net_pcap: a capture of a driver's HELLO, malformed and
# stale frames is replayed into it; its output capture must hold the STATUS
# answers, and its stats every drop by reason. Bad configurations stop it
# with exit 2 naming the key. No process or file prefix is left behind.
set -u
BUILD=${1:-build}
cd "$(dirname "$0")/.."
tmp=$(mktemp -d)
prefix=kvss_shardtest_$$
trap 'rm -rf "$tmp" /var/run/dpdk/$prefix /var/run/dpdk/${prefix}_st /var/run/dpdk/${prefix}_bad /var/run/dpdk/${prefix}_tel /var/run/dpdk/${prefix}_sc /var/run/dpdk/${prefix}_sc2 /var/run/dpdk/${prefix}_sp /var/run/dpdk/${prefix}_rs /var/run/dpdk/${prefix}_mb /var/run/dpdk/${prefix}_ah /var/run/dpdk/${prefix}_ah2 /var/run/dpdk/${prefix}_reevict /var/run/dpdk/${prefix}_notier /var/run/dpdk/${prefix}_l2h /var/run/dpdk/${prefix}_busy /var/run/dpdk/${prefix}_early' EXIT
. scripts/check-lib.sh
EAL=(--no-pci --no-huge -m 256 --lcores 0@0,1@1 --log-level lib.eal:error --no-telemetry)

"$BUILD/tools/gen_frames" pcap "$tmp/in.pcap" shard
timeout 60 "$BUILD/kvss" "${EAL[@]}" --file-prefix "$prefix" \
	--vdev "net_pcap0,rx_pcap=$tmp/in.pcap,tx_pcap=$tmp/out.pcap" \
	-- --config config/ci-pcap-shard.cfg --exit-when-idle 300 >"$tmp/log" 2>&1
check "the shard exits 0" test $? -eq 0
check "it reports its memory as base + per-token x tokens" \
	grep -q "shard memory .* = base .* + 64 bytes/token x 4096 tokens" "$tmp/log"
stats=$(grep "final stats" "$tmp/log")
for want in rx_frames=15 hello=2 stale_epoch=1 not_mine_mac=1 drop_truncated=2 drop_bad_magic=1 \
	drop_bad_version=1 drop_bad_type=1 drop_bad_body_len=1 drop_bad_count=1 drop_ip_fragment=1 \
	drop_bad_ip_checksum=1 drop_bad_udp_len=1 drop_not_kvss=1; do
	check "stats: $want" stat_has "$want" "$stats"
done
"$BUILD/kvss-dump" --json "$tmp/out.pcap" >"$tmp/out.json"
check "the first answer is a STATUS with the HELLO's epoch" \
	grep -q '^{"frame": 1, "type": "STATUS".*"driver_epoch": 287454020' "$tmp/out.json"
check "the new driver's HELLO is answered with its epoch" \
	grep -q '"type": "STATUS".*"driver_epoch": 1432778632' "$tmp/out.json"
check "STATUS lists the cache" grep -q '"caches": \[{"cache_id": 0, "num_buffers": 2, "bytes_per_token": 64, "capacity_tokens": "4096"' "$tmp/out.json"

# Frames not for this shard (another model, shard, IPv4 address, MAC;
# PROTOCOL.md section 1) among a real stream: each a DELETE of the stored
# prompt with the next seq. None is obeyed: the real REFILL with that seq
# finds the prompt whole. Then with shard.drivers listing the driver, a
# DELETE from another address is refused too.
for run in strangers strangers_src; do
	cfg=config/ci-pcap-shard.cfg
	if [ $run = strangers ]; then
		# The example lists its driver; this run is of a shard that lists none.
		grep -v '^  drivers = ' config/ci-pcap-shard.cfg >"$tmp/nodrivers.cfg"
		cfg=$tmp/nodrivers.cfg
	fi
	"$BUILD/tools/gen_frames" pcap "$tmp/$run.pcap" $run
	timeout 60 "$BUILD/kvss" "${EAL[@]}" --file-prefix "${prefix}_st" \
		--vdev "net_pcap0,rx_pcap=$tmp/$run.pcap,tx_pcap=$tmp/${run}_out.pcap" \
		-- --config "$cfg" --exit-when-idle 300 >"$tmp/$run.log" 2>&1
	check "$run: exits 0" test $? -eq 0
	ststats=$(grep "final stats" "$tmp/$run.log")
	for want in not_mine_model=1 not_mine_shard=1 not_mine_ip=1 not_mine_mac=1 deletes=0 duplicates=0; do
		check "$run: stats: $want" stat_has "$want" "$ststats"
	done
	"$BUILD/kvss-dump" --json "$tmp/${run}_out.pcap" >"$tmp/${run}_out.json"
	check "$run: the real REFILL with seq 2 finds the prompt whole" \
		grep -q '"type": "REFILL_DONE".*"refill_id": "77", "tokens": 4, "status": 0' "$tmp/${run}_out.json"
	rm -rf "/var/run/dpdk/${prefix}_st"
done
check "strangers_src: a DELETE from an address shard.drivers does not list is refused" \
	grep -q " not_a_driver=1\b" "$tmp/strangers_src.log"
check "strangers_src: it says whose control it takes" \
	grep -q "control taken from 10.99.0.1;" "$tmp/strangers_src.log"
check "strangers: without shard.drivers, it says it takes any driver's" \
	grep -q "control taken from any driver" "$tmp/strangers.log"
check "strangers: without shard.drivers, it warns what that lets anyone do" \
	grep -q "WARNING: shard.drivers is not set: any host on the fabric" "$tmp/strangers.log"
check "strangers_src: with shard.drivers, no warning" \
	bash -c "! grep -q 'WARNING: shard.drivers' '$tmp/strangers_src.log'"

# Data for batches never announced (1,100 frames far ahead, 1,100 near
# enough to hold) must not push out the data of the batch that is: batch
# 1's data comes after them all, before its EVICT; the REFILL finds it whole.
"$BUILD/tools/gen_frames" pcap "$tmp/junk.pcap" junkdata
timeout 60 "$BUILD/kvss" "${EAL[@]}" --file-prefix "${prefix}_st" \
	--vdev "net_pcap0,rx_pcap=$tmp/junk.pcap,tx_pcap=$tmp/junk_out.pcap" \
	-- --config config/ci-pcap-shard.cfg --exit-when-idle 300 >"$tmp/junk.log" 2>&1
check "junk data: exits 0" test $? -eq 0
jstats=$(grep "final stats" "$tmp/junk.log")
for want in data_unannounced=1100 data_displaced=1 data_hold_full=76 data_expired=1023 \
	batches_lost=0 lost_tokens=0; do
	check "junk data: stats: $want" stat_has "$want" "$jstats"
done
"$BUILD/kvss-dump" --json "$tmp/junk_out.pcap" >"$tmp/junk_out.json"
check "junk data: the announced batch's data was kept: the REFILL finds it whole" \
	grep -q '"type": "REFILL_DONE".*"refill_id": "78", "tokens": 4, "status": 0' "$tmp/junk_out.json"
rm -rf "/var/run/dpdk/${prefix}_st"

# A whole control stream (test/shard_scenario.c): RESERVE, EVICT batches with
# data out of order and early, a retransmission, an early seq, a HOLE, a
# DELETE that is no suffix, a batch whose data never completes, REFILLs
# waiting for their batches; every answer and every refilled byte checked.
"$BUILD/tools/shard_scenario" gen "$tmp/sc_in.pcap"
timeout 60 "$BUILD/kvss" "${EAL[@]}" --file-prefix "${prefix}_sc" \
	--vdev "net_pcap0,rx_pcap=$tmp/sc_in.pcap,tx_pcap=$tmp/sc_out.pcap" \
	-- --config config/ci-pcap-shard.cfg --exit-when-idle 400 >"$tmp/sclog" 2>&1
check "the scenario run exits 0" test $? -eq 0
check "the scenario's answers and refilled bytes" "$BUILD/tools/shard_scenario" check "$tmp/sc_out.pcap"
scstats=$(grep "final stats" "$tmp/sclog")
# Version 2: reports are resent until a REPORT_ACK, which a capture never
# sends: the TOKEN_LOST and ERROR frames went again, the same report seqs.
check "scenario: reports kept and resent with no REPORT_ACK" \
	grep -q " reports_resent=[1-9]" <<<"$scstats"
check "scenario: a resent report has its first copy's seq" python3 - "$BUILD/kvss-dump" "$tmp/sc_out.pcap" <<'PY'
import json, subprocess, sys
out = subprocess.run([sys.argv[1], "--json", sys.argv[2]], capture_output=True, text=True).stdout
first, again = set(), []
for l in out.splitlines():
    d = json.loads(l)
    if d.get("type") not in ("ERROR", "TOKEN_LOST"):
        continue
    if d["flags"] & 2:
        again.append(d["seq"])
    else:
        first.add(d["seq"])
sys.exit(0 if again and all(s in first and s != "0" for s in again) else 1)
PY
for want in duplicates=1 early=1 batches=3 batches_lost=1 lost_tokens=1 deletes=1 refills=2 \
	data_frames=6 data_stale_stream=1 error_HOLE=1 error_DELETE_NOT_RIGHT=1; do
	check "scenario stats: $want" stat_has "$want" "$scstats"
done
rm -rf "/var/run/dpdk/${prefix}_sc"

# The same with a refill lcore: a second TX queue (a second tx_pcap) lets the
# refill queue run on its own lcore, joined to ingest by rte_rings.
timeout 60 "$BUILD/kvss" --no-pci --no-huge -m 256 --lcores 0@0,1@1,2@1 --log-level lib.eal:error \
	--no-telemetry --file-prefix "${prefix}_sc2" \
	--vdev "net_pcap0,rx_pcap=$tmp/sc_in.pcap,tx_pcap=$tmp/sc2_q0.pcap,tx_pcap=$tmp/sc2_q1.pcap" \
	-- --config config/ci-pcap-shard.cfg --exit-when-idle 400 >"$tmp/sc2log" 2>&1
check "two lcores: exits 0" test $? -eq 0
check "two lcores: the refill lcore runs" grep -q "refill on lcore 2" "$tmp/sc2log"
check "two lcores: the scenario's answers and refilled bytes" \
	"$BUILD/tools/shard_scenario" check "$tmp/sc2_q0.pcap" "$tmp/sc2_q1.pcap"
rm -rf "/var/run/dpdk/${prefix}_sc2"

# The same stream with a broken copy after every frame (truncated, bad magic,
# version, body_len, IPv4 checksum, UDP length): the good traffic must come
# out exactly as before, and every broken frame is counted as a drop.
nbad=$("$BUILD/tools/shard_scenario" gen "$tmp/mb_in.pcap" --mix-bad | sed -n 's/^bad frames: //p')
timeout 60 "$BUILD/kvss" "${EAL[@]}" --file-prefix "${prefix}_mb" \
	--vdev "net_pcap0,rx_pcap=$tmp/mb_in.pcap,tx_pcap=$tmp/mb_out.pcap" \
	-- --config config/ci-pcap-shard.cfg --exit-when-idle 400 >"$tmp/mblog" 2>&1
check "bad frames mixed in: exits 0" test $? -eq 0
check "bad frames mixed in: the same answers and refilled bytes" \
	"$BUILD/tools/shard_scenario" check "$tmp/mb_out.pcap"
mbstats=$(grep "final stats" "$tmp/mblog")
for want in duplicates=1 early=1 batches=3 batches_lost=1 lost_tokens=1 deletes=1 refills=2 \
	data_frames=6 data_stale_stream=1 error_HOLE=1 error_DELETE_NOT_RIGHT=1; do
	check "bad frames mixed in: stats: $want" stat_has "$want" "$mbstats"
done
ndrop=$(grep -o ' drop_[a-z_]*=[0-9]*' <<<"$mbstats" | awk -F= '{s += $2} END {print s + 0}')
check "bad frames mixed in: all ${nbad:-?} dropped and counted (drops: $ndrop)" \
	test -n "$nbad" -a "$nbad" -gt 0 -a "$ndrop" = "$nbad"
rm -rf "/var/run/dpdk/${prefix}_mb"

# REFILLs behind a DELETE that waits for its batch (test/shard_scenario.c,
# gen_ahead): one that reads no prompt the DELETE names runs at once, one
# that reads its prompt waits for it; with one TX queue the capture shows the
# order, and with a refill lcore the stats do.
"$BUILD/tools/shard_scenario" gen-ahead "$tmp/ah_in.pcap"
timeout 60 "$BUILD/kvss" "${EAL[@]}" --file-prefix "${prefix}_ah" \
	--vdev "net_pcap0,rx_pcap=$tmp/ah_in.pcap,tx_pcap=$tmp/ah_out.pcap" \
	-- --config test/data/shard-slow-batch.cfg --exit-when-idle 1500 >"$tmp/ahlog" 2>&1
check "run ahead: exits 0" test $? -eq 0
check "run ahead: refill of A before the batch timeout, of B after the DELETE" \
	"$BUILD/tools/shard_scenario" check-ahead "$tmp/ah_out.pcap"
check "run ahead: counted" grep -q " refills_ahead=1\b" "$tmp/ahlog"
check "run ahead: the refill that found A cut is counted failed, by reason, not as a refill" \
	bash -c "grep -q ' refills=3\b' '$tmp/ahlog' && grep -q ' refill_failed_RANGE=1\b' '$tmp/ahlog'"
rm -rf "/var/run/dpdk/${prefix}_ah"
timeout 60 "$BUILD/kvss" --no-pci --no-huge -m 256 --lcores 0@0,1@1,2@1 --log-level lib.eal:error \
	--no-telemetry --file-prefix "${prefix}_ah2" \
	--vdev "net_pcap0,rx_pcap=$tmp/ah_in.pcap,tx_pcap=$tmp/ah2_q0.pcap,tx_pcap=$tmp/ah2_q1.pcap" \
	-- --config test/data/shard-slow-batch.cfg --exit-when-idle 1500 >"$tmp/ah2log" 2>&1
check "run ahead, refill lcore: exits 0" test $? -eq 0
check "run ahead, refill lcore: the refills' answers and bytes" \
	"$BUILD/tools/shard_scenario" check-ahead "$tmp/ah2_q0.pcap" "$tmp/ah2_q1.pcap"
check "run ahead, refill lcore: counted" grep -q " refills_ahead=1\b" "$tmp/ah2log"
rm -rf "/var/run/dpdk/${prefix}_ah2"

# Deleted and evicted again (test/shard_scenario_order.c, gen_reevict): a
# REFILL reads what complete batches left (a prompt only an open batch holds
# is UNKNOWN_PROMPT, not RANGE), and a DELETE and an EVICT of one prompt run
# in their order whichever queue each waits in; on one lcore and on two.
# on_lcores NAME CFG WHAT STAT: shard_scenario gen-NAME replayed into a shard
# on one lcore and on a refill lcore too, checked by check-NAME, with the
# final stat STAT (key=value) there.
on_lcores() {
	local name=$1 cfg=$2 what=$3 want=$4 lc lcores tx outs
	"$BUILD/tools/shard_scenario" "gen-$name" "$tmp/${name}_in.pcap"
	for lc in one two; do
		if [ $lc = one ]; then
			lcores=0@0,1@1 tx="tx_pcap=$tmp/${name}1.pcap" outs=("$tmp/${name}1.pcap")
		else
			lcores=0@0,1@1,2@1 tx="tx_pcap=$tmp/${name}2_q0.pcap,tx_pcap=$tmp/${name}2_q1.pcap"
			outs=("$tmp/${name}2_q0.pcap" "$tmp/${name}2_q1.pcap")
		fi
		timeout 60 "$BUILD/kvss" --no-pci --no-huge -m 256 --lcores $lcores \
			--log-level lib.eal:error --no-telemetry --file-prefix "${prefix}_$name" \
			--vdev "net_pcap0,rx_pcap=$tmp/${name}_in.pcap,$tx" \
			-- --config "$cfg" --exit-when-idle 1500 >"$tmp/${name}_$lc.log" 2>&1
		check "$name, $lc lcore(s): exits 0" test $? -eq 0
		check "$name, $lc lcore(s): $what" "$BUILD/tools/shard_scenario" "check-$name" "${outs[@]}"
		check "$name, $lc lcore(s): $want" stat_has "$want" "$(grep 'final stats' "$tmp/${name}_$lc.log")"
		rm -rf "/var/run/dpdk/${prefix}_$name"
	done
}
on_lcores reevict test/data/shard-slow-batch.cfg "every refill's code and bytes" evict_after_delete=1
# The shard's lcores' time by role (kvss.h): with REFILLs among the frames,
# both ingest and refill busy time, on one lcore and with a refill lcore;
# the first run above had none (HELLO, strangers, broken frames): ingest
# time, and not a microsecond of refill time.
for lc in one two; do
	check "reevict, $lc lcore(s): busy time on ingest and on refill work, idle time" \
		grep -q "final stats: time ingest_busy_us=[1-9][0-9]* refill_busy_us=[1-9][0-9]* idle_us=[1-9]" \
		"$tmp/reevict_$lc.log"
done
check "no REFILL received: ingest busy time, no refill time" \
	grep -q "final stats: time ingest_busy_us=[1-9][0-9]* idle_us=[1-9][0-9]*$" "$tmp/log"

# A shard with no second tier (PROTOCOL.md section 9): L2_DOWN, L2_UP and
# L2_DELETE each refused NO_TIER (the UP's tokens lost), each taking its seq,
# and what follows works as ever; on one lcore and on two.
on_lcores notier config/ci-pcap-shard.cfg "NO_TIER each, seqs taken, the rest whole" error_NO_TIER=4
# Its NO_TIER reports are never acknowledged (a replay sends no REPORT_ACK):
# the oldest resent alone after 5 ms, the wait doubling up to 200 ms and no
# further (until 2026-11-27 each timeout sent every report again).
check "notier: the oldest unacknowledged report resent alone, the wait capped at 200 ms" \
	"$BUILD/tools/shard_scenario" check-backoff "$tmp/notier1.pcap"

# A shard with a second tier, sent what a lying driver or a hostile sender
# may (test/shard_scenario_l2.c, gen_l2hostile): an L2_UP naming one token
# 500 times (it wrote past the shard's request object), two L2_DOWNs of one
# key (two columns were left), an L2_DELETE of cache 9 and records of key 0
# (answered L2_FAILED, which blames the disk). Each answered by its fault,
# the refill of the repeated token byte for byte, and a second shard on the
# same file finds the two columns the first held; on one lcore and on two.
"$BUILD/tools/shard_scenario" gen-l2hostile "$tmp/l2h_in.pcap"
for lc in one two; do
	mkdir -m 0700 "$tmp/l2h_$lc"
	sed "s#@DIR@#$tmp/l2h_$lc#" test/data/shard-l2.cfg >"$tmp/l2h_$lc.cfg"
	if [ $lc = one ]; then
		lcores=0@0,1@1 tx="tx_pcap=$tmp/l2h1.pcap" outs=("$tmp/l2h1.pcap")
	else
		lcores=0@0,1@1,2@1 tx="tx_pcap=$tmp/l2h2_q0.pcap,tx_pcap=$tmp/l2h2_q1.pcap"
		outs=("$tmp/l2h2_q0.pcap" "$tmp/l2h2_q1.pcap")
	fi
	for run in 1 2; do
		timeout 60 "$BUILD/kvss" --no-pci --no-huge -m 256 --lcores $lcores \
			--log-level lib.eal:error --no-telemetry --file-prefix "${prefix}_l2h" \
			--vdev "net_pcap0,rx_pcap=$tmp/l2h_in.pcap,$tx" \
			-- --config "$tmp/l2h_$lc.cfg" --exit-when-idle 1500 >"$tmp/l2h_${lc}_$run.log" 2>&1
		check "second tier, hostile, $lc lcore(s), run $run: exits 0" test $? -eq 0
		check "second tier, hostile, $lc lcore(s), run $run: each answered by its fault" \
			"$BUILD/tools/shard_scenario" check-l2hostile "${outs[@]}"
		rm -rf "/var/run/dpdk/${prefix}_l2h"
	done
	check "second tier, hostile, $lc lcore(s): the next shard finds K1 once and K2, no copy" \
		grep -q ": 2 columns kept from before, 0 dropped" "$tmp/l2h_${lc}_2.log"
done

# HELLOs of the epoch in force from another address (test/shard_scenario_l2.c,
# gen_l2hello): ignored and counted; the inventory goes only to the driver
# whose HELLO took control (it went to any HELLO's source: 74 bytes in,
# megabytes out).
"$BUILD/tools/shard_scenario" gen-l2hello "$tmp/l2hello_in.pcap"
mkdir -m 0700 "$tmp/l2hello"
sed "s#@DIR@#$tmp/l2hello#" test/data/shard-l2.cfg >"$tmp/l2hello.cfg"
timeout 60 "$BUILD/kvss" "${EAL[@]}" --file-prefix "${prefix}_l2h" \
	--vdev "net_pcap0,rx_pcap=$tmp/l2hello_in.pcap,tx_pcap=$tmp/l2hello_out.pcap" \
	-- --config "$tmp/l2hello.cfg" --exit-when-idle 1000 >"$tmp/l2hello.log" 2>&1
check "foreign HELLO: exits 0" test $? -eq 0
check "foreign HELLO: the inventory only to the driver that took control" \
	"$BUILD/tools/shard_scenario" check-l2hello "$tmp/l2hello_out.pcap"
check "foreign HELLO: counted" stat_has hello_foreign=5 "$(grep 'final stats' "$tmp/l2hello.log")"
rm -rf "/var/run/dpdk/${prefix}_l2h"

# L2_UP entries no accepted column covers (test/shard_scenario_l2.c,
# gen_l2uncov): lost (TOKEN_LOST), never stored; until 2026-12 they were
# stored as zeros and served. Also: an SH_DOWN to a shard without the shared
# level is ERROR NO_TIER, its STATUS says so (bit 2 clear), and a REFILL of a
# prompt a loss emptied is UNKNOWN_PROMPT.
"$BUILD/tools/shard_scenario" gen-l2uncov "$tmp/l2uncov_in.pcap"
mkdir -m 0700 "$tmp/l2uncov"
sed "s#@DIR@#$tmp/l2uncov#" test/data/shard-l2.cfg >"$tmp/l2uncov.cfg"
timeout 60 "$BUILD/kvss" "${EAL[@]}" --file-prefix "${prefix}_l2h" \
	--vdev "net_pcap0,rx_pcap=$tmp/l2uncov_in.pcap,tx_pcap=$tmp/l2uncov_out.pcap" \
	-- --config "$tmp/l2uncov.cfg" --exit-when-idle 2000 >"$tmp/l2uncov.log" 2>&1
check "uncovered L2_UP entries: exits 0" test $? -eq 0
check "uncovered L2_UP entries: lost, never stored" \
	"$BUILD/tools/shard_scenario" check-l2uncov "$tmp/l2uncov_out.pcap"
rm -rf "/var/run/dpdk/${prefix}_l2h"

# A shard that reads frames at every poll (test/shard_scenario_report.c,
# gen_busy: 64 MiB of batches back to back) still sends its periodic STATUS
# (it did only when a poll found nothing, and a driver then declared a busy
# shard away).
"$BUILD/tools/shard_scenario" gen-busy "$tmp/busy_in.pcap"
timeout 60 "$BUILD/kvss" --no-pci --no-huge -m 512 --lcores 0@0,1@1 --log-level lib.eal:error \
	--no-telemetry --file-prefix "${prefix}_busy" \
	--vdev "net_pcap0,rx_pcap=$tmp/busy_in.pcap,tx_pcap=$tmp/busy_out.pcap" \
	-- --config test/data/shard-busy.cfg --exit-when-idle 300 >"$tmp/busy.log" 2>&1
check "busy shard: exits 0" test $? -eq 0
check "busy shard: STATUS while it reads at every poll" \
	"$BUILD/tools/shard_scenario" check-busy "$tmp/busy_out.pcap"
rm -rf "/var/run/dpdk/${prefix}_busy" "$tmp/busy_in.pcap" "$tmp/busy_out.pcap"

# Lost data found by the data after it (test/shard_scenario_report.c,
# gen_early; PROTOCOL.md section 5, "Sooner on evidence"): with a batch
# timeout of five seconds, a batch missing a frame is reported lost about
# 50 ms after a later batch's data came, and one with no data after it is
# not (the run ends first). Before, every loss cost the batch timeout.
"$BUILD/tools/shard_scenario" gen-early "$tmp/early_in.pcap"
timeout 60 "$BUILD/kvss" "${EAL[@]}" --file-prefix "${prefix}_early" \
	--vdev "net_pcap0,rx_pcap=$tmp/early_in.pcap,tx_pcap=$tmp/early_out.pcap" \
	-- --config test/data/shard-slow-loss.cfg --exit-when-idle 300 >"$tmp/early.log" 2>&1
check "lost data by evidence: exits 0" test $? -eq 0
check "lost data by evidence: the batch before later data lost at once, the last one not" \
	"$BUILD/tools/shard_scenario" check-early "$tmp/early_out.pcap"
check "lost data by evidence: counted" stat_has batches_lost_early=1 "$(grep 'final stats' "$tmp/early.log")"
rm -rf "/var/run/dpdk/${prefix}_early"

# A driver restart: the old driver's DELETE and REFILL, waiting on the refill
# lcore for a batch that never came, and its data held for a batch not yet
# evicted, must not act on the new driver's batches (batch numbers restart);
# the new driver's refill gets every token.
"$BUILD/tools/shard_scenario" gen-restart "$tmp/rs_in.pcap"
timeout 60 "$BUILD/kvss" --no-pci --no-huge -m 256 --lcores 0@0,1@1,2@1 --log-level lib.eal:error \
	--no-telemetry --file-prefix "${prefix}_rs" \
	--vdev "net_pcap0,rx_pcap=$tmp/rs_in.pcap,tx_pcap=$tmp/rs_q0.pcap,tx_pcap=$tmp/rs_q1.pcap" \
	-- --config config/ci-pcap-shard.cfg --exit-when-idle 400 >"$tmp/rslog" 2>&1
check "restart: exits 0" test $? -eq 0
check "restart: the old driver's messages dropped, the new refill whole" \
	"$BUILD/tools/shard_scenario" check-restart "$tmp/rs_q0.pcap" "$tmp/rs_q1.pcap"
check "restart: both old messages and the held data counted as dropped" \
	grep -q " dropped_restart=3\b" "$tmp/rslog"
rm -rf "/var/run/dpdk/${prefix}_rs"

# Room: a shard of 8 tokens; an EVICT that does not fit waits for the DELETE
# queued after it, then fits; one that never fits is answered NO_SPACE after
# the space timeout (its data, held meanwhile, is not lost).
"$BUILD/tools/shard_scenario" gen-space "$tmp/sp_in.pcap"
timeout 60 "$BUILD/kvss" "${EAL[@]}" --file-prefix "${prefix}_sp" \
	--vdev "net_pcap0,rx_pcap=$tmp/sp_in.pcap,tx_pcap=$tmp/sp_out.pcap" \
	-- --config test/data/shard-small.cfg --exit-when-idle 600 >"$tmp/splog" 2>&1
check "space: exits 0" test $? -eq 0
check "space: waited, then NO_SPACE; the refill's bytes" \
	"$BUILD/tools/shard_scenario" check-space "$tmp/sp_out.pcap"
check "space: it waited for room" grep -q " evict_waits=[1-9]" "$tmp/splog"
spstats=$(grep "final stats" "$tmp/splog")
check "space: no data lost while waiting" stat_has data_expired=0 "$spstats"
check "space: no token lost while waiting" stat_has lost_tokens=0 "$spstats"
rm -rf "/var/run/dpdk/${prefix}_sp"

# Telemetry while it runs, then SIGTERM: it drains, prints its stats, exits 0.
EAL_T=(--no-pci --no-huge -m 256 --lcores 0@0,1@1 --log-level lib.eal:error)
"$BUILD/kvss" "${EAL_T[@]}" --file-prefix "${prefix}_tel" \
	--vdev "net_pcap0,rx_pcap=$tmp/sc_in.pcap,tx_pcap=$tmp/tel.pcap" \
	-- --config config/ci-pcap-shard.cfg >"$tmp/tellog" 2>&1 &
pid=$!
for _ in $(seq 50); do
	echo /kvss/stats | dpdk-telemetry.py -f "${prefix}_tel" 2>/dev/null | tail -n 1 >"$tmp/tel.json"
	grep -q '"refills": 2' "$tmp/tel.json" && break
	sleep 0.2
done
check "/kvss/stats counts the frames" grep -q '"rx_frames": 17, .*"hello": 1' "$tmp/tel.json"
check "/kvss/stats counts errors by code" grep -q '"error_HOLE": 1' "$tmp/tel.json"
echo "/kvss/prompt,0,0xA000000000000001" | dpdk-telemetry.py -f "${prefix}_tel" 2>/dev/null | tail -n 1 >"$tmp/prompt.json"
check "/kvss/prompt: A holds tokens 0..5" grep -q '"offset": 0, "tokens": 6' "$tmp/prompt.json"
# The id kvss-dump --json writes (a string, exact above 2^53) is what
# /kvss/prompt takes, passed through as read.
id=$("$BUILD/kvss-dump" --json "$tmp/sc_in.pcap" | python3 -c '
import json, sys
for line in sys.stdin:
    m = json.loads(line, parse_int=float)  # as JavaScript reads JSON
    if m.get("type") == "RESERVE":
        print(m["records"][0]["prompt_id"]); break')
echo "/kvss/prompt,0,$id" | dpdk-telemetry.py -f "${prefix}_tel" 2>/dev/null | tail -n 1 >"$tmp/prompt2.json"
check "/kvss/prompt takes kvss-dump's prompt_id ($id) as written" grep -q '"offset": 0, "tokens": 6' "$tmp/prompt2.json"
echo /kvss/caches | dpdk-telemetry.py -f "${prefix}_tel" 2>/dev/null | tail -n 1 >"$tmp/caches.json"
check "/kvss/caches lists the cache" grep -q '"capacity_tokens": \[4096\]' "$tmp/caches.json"
echo /kvss/lcores | dpdk-telemetry.py -f "${prefix}_tel" 2>/dev/null | tail -n 1 >"$tmp/lcores.json"
check "/kvss/lcores names the roles" grep -q '"role": \["control", "ingest"\]' "$tmp/lcores.json"
kill -TERM $pid
wait $pid
check "SIGTERM: exit 0" test $? -eq 0
check "SIGTERM: final stats printed" grep -q "final stats: frames rx_frames=17 " "$tmp/tellog"
# Readable: a line per group, none long, and no counter printed as 0.
check "final stats: a line per group, each under 160 characters" \
	test "$(grep "final stats" "$tmp/tellog" | wc -l)" -ge 3 -a \
	"$(grep "final stats" "$tmp/tellog" | awk '{ if (length($0) > m) m = length($0) } END { print m }')" -lt 160
check "final stats: zero counters left out" bash -c "! grep 'final stats' '$tmp/tellog' | grep -q '=0\b'"
rm -rf "/var/run/dpdk/${prefix}_tel"

# A bad configuration stops it before any port starts, naming file, line, key.
sed 's/buffers = 2;/buffers = 3;/' config/ci-pcap-shard.cfg >"$tmp/bad.cfg"
timeout 60 "$BUILD/kvss" "${EAL[@]}" --file-prefix "${prefix}_bad" \
	--vdev "net_pcap0,rx_pcap=$tmp/in.pcap,tx_pcap=$tmp/bad.pcap" \
	-- --config "$tmp/bad.cfg" >"$tmp/badlog" 2>&1
check "a bad config exits 2" test $? -eq 2
check "the message names file, line and key" \
	grep -q "bad.cfg:[0-9]*: shard.caches.\[0\].buffers: must divide bytes_per_token (64)" "$tmp/badlog"
check "no port started" sh -c "! grep -q 'started' '$tmp/badlog'"
"$BUILD/kvss" --help >"$tmp/help" 2>&1
check "--help lists the options" grep -q -- "--config FILE" "$tmp/help"
check "--help lists --lose-data" grep -q -- "--lose-data N" "$tmp/help"
# A bad option value stops it too (exit 2), naming the option.
badopt() {
	timeout 60 "$BUILD/kvss" "${EAL[@]}" --file-prefix "${prefix}_opt" -- \
		--config config/all-in-one.cfg "$@" >"$tmp/optlog" 2>&1
}
badopt --role bogus
check "--role bogus exits 2, naming it" sh -c "[ $? -eq 2 ] && grep -q -- \"--role: 'bogus'\" '$tmp/optlog'"
badopt --limit 0
check "--limit 0 exits 2, naming it" sh -c "[ $? -eq 2 ] && grep -q -- \"--limit: '0'\" '$tmp/optlog'"
badopt --lose-data 3x
check "--lose-data 3x exits 2, naming it" sh -c "[ $? -eq 2 ] && grep -q -- \"--lose-data: '3x'\" '$tmp/optlog'"
# Options that mean nothing to a shard, a trace that is not there, a file
# run as a role it does not describe: usage and configuration errors, exit 2.
timeout 60 "$BUILD/kvss" "${EAL[@]}" --file-prefix "${prefix}_opt" -- \
	--config config/ci-pcap-shard.cfg --trace test/data/chat.jsonl >"$tmp/optlog" 2>&1
check "--trace on a shard exits 2, naming it" sh -c \
	"[ $? -eq 2 ] && grep -q -- '--trace: means nothing to a shard' '$tmp/optlog'"
timeout 60 "$BUILD/kvss" "${EAL[@]}" --file-prefix "${prefix}_opt" -- \
	--config config/ci-pcap-shard.cfg --role driver >"$tmp/optlog" 2>&1
check "--role driver with a shard's file exits 2, naming the missing section" sh -c \
	"[ $? -eq 2 ] && grep -q 'driver: missing: the role needs a driver section' '$tmp/optlog'"
badopt --trace /nonexistent/trace.jsonl
check "--trace of a missing file exits 2 (no fall-back to the built-in workload)" sh -c \
	"[ $? -eq 2 ] && grep -q -- '--trace: /nonexistent/trace.jsonl: cannot read' '$tmp/optlog'"
"$BUILD/kvss" >"$tmp/bare" 2>&1
check "kvss with no arguments prints its usage, exit 2, before EAL" sh -c \
	"[ $? -eq 2 ] && grep -q '^usage:' '$tmp/bare' && ! grep -q EAL: '$tmp/bare'"
for tool in kvss kvss-trace kvss-dump kvss-plan; do
	[ -x "$BUILD/$tool" ] || continue # the sanitizer build has kvss and two tools only
	check "$tool --version" sh -c "'$BUILD/$tool' --version | grep -q '^$tool [0-9.]* (wire protocol v2)$'"
done

# A failed EAL start leaves no runtime directory behind, and does not take
# one that was there before (it may be another process's).
rm -rf "/var/run/dpdk/${prefix}_eal"
"$BUILD/kvss" --no-pci --no-huge -m 256 --file-prefix "${prefix}_eal" --vdev net_bogus0 -- \
	--config config/ci-pcap-shard.cfg >"$tmp/eal.log" 2>&1
check "a failed EAL start exits 1, naming it" sh -c "[ $? -eq 1 ] && grep -q 'EAL init failed' '$tmp/eal.log'"
check "a failed EAL start leaves no runtime directory" test ! -e "/var/run/dpdk/${prefix}_eal"
mkdir -p "/var/run/dpdk/${prefix}_eal" && touch "/var/run/dpdk/${prefix}_eal/theirs"
"$BUILD/kvss" --no-pci --no-huge -m 256 --file-prefix "${prefix}_eal" --vdev net_bogus0 -- \
	--config config/ci-pcap-shard.cfg >"$tmp/eal.log" 2>&1
check "a failed EAL start keeps a runtime directory that was there" \
	test -e "/var/run/dpdk/${prefix}_eal/theirs"
rm -rf "/var/run/dpdk/${prefix}_eal"

# Numbers are read whole: never a prefix of what was given.
badopt --exit-when-idle abc
check "--exit-when-idle abc exits 2, naming it" sh -c \
	"[ $? -eq 2 ] && grep -q -- \"--exit-when-idle: 'abc' is not a whole number\" '$tmp/optlog'"
badopt --limit 1e3x
check "--limit 1e3x exits 2, naming it" sh -c \
	"[ $? -eq 2 ] && grep -q -- \"--limit: '1e3x' is not a whole number\" '$tmp/optlog'"
# A trace that never ends is refused before it is read (it grew memory
# until the kernel killed the process), and the runtime directory goes.
badopt --trace /dev/zero
check "--trace /dev/zero stops at once, naming it (exit 2)" sh -c "[ $? -eq 2 ] && grep -q \
	'trace: /dev/zero: not a regular file (a character device)' '$tmp/optlog'"
# The same as wafer.trace in the file: the driver refuses it as it starts.
sed 's|^  trace = "";|  trace = "/dev/zero";|' config/all-in-one.cfg >"$tmp/zero.cfg"
timeout 60 "$BUILD/kvss" "${EAL[@]}" --file-prefix "${prefix}_opt" -- --config "$tmp/zero.cfg" \
	>"$tmp/optlog" 2>&1
check "wafer.trace = /dev/zero stops at once, naming it (exit 2)" sh -c "[ $? -eq 2 ] && grep -q \
	'wafer.trace: /dev/zero: not a regular file (a character device)' '$tmp/optlog'"

# Only this test's own processes: another kvss on the machine is not ours.
check "no process of this test is left" test -z "$(pgrep -f "file-prefix ${prefix}(_[^ ]*)?( |\$)")"
rm -rf "/var/run/dpdk/$prefix" "/var/run/dpdk/${prefix}_bad" "/var/run/dpdk/${prefix}_opt"
check_summary "kvss shard over pcap"
