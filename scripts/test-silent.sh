#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
#
# A shard that is silent for a while but lost nothing keeps its cache:
# the demo's shape (a driver and two shards over
# net_memif, the built-in workload), shard 1 stopped with SIGSTOP for
# SILENT_S seconds (default 2.5: past driver.away_ms, 1 s, well short of
# driver.dead_ms, 10 s) and continued. The driver must say it heard nothing,
# run the model as misses meanwhile, hear it again in the same epoch and keep
# the model's prefixes (no "prefixes are dropped, new epoch"), and finish
# with every refilled byte right and the shards holding exactly what it
# accounts for. Before, a silent shard was "away" at once: the model's
# prefixes dropped, its refills failed.
#
# Then the driver itself stopped for DRIVER_STOP_S seconds (default 12: past
# driver.dead_ms): what the shards sent meanwhile waited in its queues, so
# the time it did not run is not their silence. It must say it did not run,
# take no shard for away or silent, drop no prefix, time out no refill, and
# lose nothing but what the shards reported lost (a batch whose data the
# stopped driver held past shard.batch_timeout_ms: TOKEN_LOST, exact).
# Before, every shard was "away" once it ran again (a VM's snapshot did the
# same here: the clock jumped 89,094 s).
#
# usage: scripts/test-silent.sh [BUILD]
set -u
BUILD=${1:-build}
cd "$(dirname "$0")/.."
. scripts/check-lib.sh
SILENT_S=${SILENT_S:-2.5}
DRIVER_STOP_S=${DRIVER_STOP_S:-12}
# Enough requests that the run outlasts the silence on a fast machine (400
# took 0.4 s here, over before the shard was stopped).
REQUESTS=${SILENT_REQUESTS:-4000}
tmp=$(mktemp -d /tmp/kvss-silent.XXXXXX)
run=$$
pids=()
prefixes=()
. scripts/procs-lib.sh
trap 'procs_stop KILL; rm -rf "$tmp"' EXIT
trap 'exit 130' INT TERM

EAL=(--no-pci --no-huge -m 1024 --log-level lib.eal:error --log-level pmd.net.memif:error --no-telemetry)
LC="0@(0-$(($(nproc) - 1)))"
SLC="1@(0-$(($(nproc) - 1)))"
declare -a spid

# scenario TAG WHO SECONDS: two shards and a driver over memif (logs
# $tmp/TAG.s0.log, .s1.log, .d.log), and once the driver replays WHO ("shard1"
# or "driver") stopped for SECONDS and continued; sets rc (the driver's exit
# status, 124 if it did not end) and running_at_stop.
scenario() {
	local tag=$1 who=$2 secs=$3 k dpid target
	prefixes=("kvss_silent_${tag}_s0_$run" "kvss_silent_${tag}_s1_$run" "kvss_silent_${tag}_drv_$run")
	for k in 0 1; do
		"$BUILD/kvss" "${EAL[@]}" --file-prefix "${prefixes[$k]}" --lcores "$LC,$SLC" \
			--vdev "net_memif0,role=server,id=$k,bsize=10240,socket=$tmp/$tag.memif$k.sock" \
			-- --config "config/memif-shard$k.cfg" --poll idle --l2-dir "$tmp/$tag.l2s$k" \
			>"$tmp/$tag.s$k.log" 2>&1 &
		spid[k]=$!
		pids+=($!)
	done
	for k in 0 1; do
		for _ in $(seq 1 300); do
			grep -q "up, epoch" "$tmp/$tag.s$k.log" 2>/dev/null && break
			sleep 0.1
		done
	done
	"$BUILD/kvss" "${EAL[@]}" --file-prefix "${prefixes[2]}" --lcores "$LC" \
		--vdev "net_memif0,role=client,id=0,bsize=10240,socket=$tmp/$tag.memif0.sock" \
		--vdev "net_memif1,role=client,id=1,bsize=10240,socket=$tmp/$tag.memif1.sock" \
		-- --config config/memif-driver.cfg --poll idle --trace "" --limit "$REQUESTS" \
		>"$tmp/$tag.d.log" 2>&1 &
	dpid=$!
	pids+=($!)
	# Once the driver replays, WHO stops for SECONDS.
	for _ in $(seq 1 300); do
		grep -q "every shard is up" "$tmp/$tag.d.log" 2>/dev/null && break
		sleep 0.1
	done
	sleep 0.2
	running_at_stop=0
	kill -0 "$dpid" 2>/dev/null && running_at_stop=1
	target=${spid[1]}
	[ "$who" = driver ] && target=$dpid
	kill -STOP "$target"
	sleep "$secs"
	kill -CONT "$target"
	for _ in $(seq 1 1200); do
		kill -0 "$dpid" 2>/dev/null || break
		sleep 0.1
	done
	if kill -0 "$dpid" 2>/dev/null; then
		rc=124
	else
		wait "$dpid"
		rc=$?
	fi
	procs_stop TERM
}

# 1. Shard 1 silent past away_ms, short of dead_ms.
scenario shard shard1 "$SILENT_S"
d=$tmp/shard.d.log
check "the driver finishes, exit 0 (was $rc)" test "$rc" -eq 0
check "the driver was still running when shard 1 stopped (else raise SILENT_REQUESTS)" \
	test "$running_at_stop" = 1
check "it heard nothing from shard 1 for away_ms" grep -q "shard 1: nothing heard for" "$d"
check "and heard it again in the same epoch, its prefixes kept" \
	grep -q "shard 1 heard again (epoch .*, as before)" "$d"
check "no prefix was dropped for it" bash -c "[ -s '$d' ] && ! grep -q 'prefixes are dropped' '$d'"
check "the summary counts the silence (not as away)" \
	grep -q "; 0 times a shard was away, .*; [1-9][0-9]* times a shard was silent" "$d"
json=$(grep '^{' "$d" | tail -1)
check "no wrong byte, nothing unaccounted" python3 -c "
import json, sys
d = json.loads(sys.argv[1])
sys.exit(0 if d['verify_failures'] == 0 and d['unaccounted_tokens'] == 0 and d['finished'] else 1)" "$json"
if [ "$fail" -ne 0 ]; then
	echo "test-silent: the driver's log:" >&2
	grep -v '^kvss: driver: .* s  ' "$d" | tail -30 >&2
fi

# 2. The driver stopped past dead_ms: its own absence, not the shards' silence.
fail0=$fail
scenario driver driver "$DRIVER_STOP_S"
d=$tmp/driver.d.log
json=$(grep '^{' "$d" | tail -1)
check "stopped driver: it was still running when stopped (else raise SILENT_REQUESTS)" \
	test "$running_at_stop" = 1
# What a stop past the batch timeout may cost (PROTOCOL.md section 4): the
# batches whose data the stopped driver held, lost by the shards
# (TOKEN_LOST); the EVICTs already out past those cuts, refused (HOLE); a
# refill already out for a prompt the loss emptied or cut short, failed
# (UNKNOWN_PROMPT, RANGE). Nothing else, and none of these without a loss:
# the driver's summary (LOG) and the shards' own error counts (SHARD_LOG...).
only_loss() {
	python3 -c "
import re, sys
log = open(sys.argv[1]).read()
m = re.search(r'protocol errors (\d+) \(ERROR records (\d+), refill failures (\d+), refill timeouts (\d+), lost tokens (\d+), dropped frames (\d+)\)', log)
if m is None:
    sys.exit('no summary in ' + sys.argv[1])
p, e, rf, rt, lost, dropped = map(int, m.groups())
codes = set()
for f in sys.argv[2:]:
    text = open(f).read()
    if 'kvss: final stats:' not in text:
        sys.exit('no final stats in ' + f + ': its error counts unknown')
    for line in text.splitlines():
        if 'final stats: errors' in line:
            codes |= set(re.findall(r'((?:error|refill_failed)_[A-Z0-9_]+)=', line))
allowed = {'error_HOLE', 'refill_failed_UNKNOWN_PROMPT', 'refill_failed_RANGE'}
ok = p == e + rf + lost and rt == dropped == 0 and codes <= allowed and (e + rf == 0 or lost > 0)
sys.exit(0 if ok else 'protocol errors %d: ERROR %d, refill failures %d, timeouts %d, lost %d, dropped %d; the shards: %s' % (p, e, rf, rt, lost, dropped, sorted(codes)))" "$@"
}
loss_only=0
only_loss "$d" "$tmp/driver.s0.log" "$tmp/driver.s1.log" 2>/dev/null && loss_only=1
check "stopped driver: it finishes, exit 0, or 3 for what the shards lost only (was $rc)" \
	bash -c '[ "$1" -eq 0 ] || { [ "$1" -eq 3 ] && [ "$2" = 1 ]; }' _ "$rc" "$loss_only"
check "stopped driver: it says it did not run, for about the stop" \
	python3 -c "
import re, sys
ms = [int(m) for m in re.findall(r'this process did not run for (\d+) ms', open(sys.argv[1]).read())]
sys.exit(0 if ms and max(ms) >= float(sys.argv[2]) * 1000 * 0.9 else 1)" "$d" "$DRIVER_STOP_S"
# A shard silent for a second of its own on a busy machine is the
# machine's, found within a check (every 500 ms) of away_ms (1 s); a
# silence found longer than that is the driver's absence counted as the
# shard's (and one past dead_ms an away).
check "stopped driver: no shard taken for away, none silent for longer than its own second" \
	python3 -c "
import re, sys
log = open(sys.argv[1]).read()
quiet = [int(m) for m in re.findall(r'nothing heard for (\d+) ms', log)]
ok = re.search(r'; 0 times a shard was away, ', log) and all(q < 2500 for q in quiet)
sys.exit(0 if ok else 'away, or silent through the stop: %s ms' % quiet)" "$d"
check "stopped driver: no prefix dropped" bash -c "[ -s '$d' ] && ! grep -q 'prefixes are dropped' '$d'"
check "stopped driver: no refill timed out; errors only what the shards' losses cause" \
	only_loss "$d" "$tmp/driver.s0.log" "$tmp/driver.s1.log"
check "stopped driver: and its JSON says no shard restart" test "$(log_field "$d" shard_restarts)" = 0
check "stopped driver: no wrong byte, nothing unaccounted, finished" python3 -c "
import json, sys
d = json.loads(sys.argv[1])
sys.exit(0 if d['verify_failures'] == 0 and d['unaccounted_tokens'] == 0 and d['finished'] else 1)" "$json"
python3 -c "
import json, sys
d = json.loads(sys.argv[1])
print('test-silent: the driver stopped %s s: %s tokens lost (reported by the shards), %s protocol errors, %s shard restarts, exit %s' % (sys.argv[2], d['lost_tokens'], d['protocol_errors'], d['shard_restarts'], sys.argv[3]))" "$json" "$DRIVER_STOP_S" "$rc"
if [ "$fail" -ne "$fail0" ]; then
	echo "test-silent: the stopped driver's log:" >&2
	grep -v '^kvss: driver: .* s  ' "$d" | tail -30 >&2
fi
check_summary "silent shard, stopped driver"
