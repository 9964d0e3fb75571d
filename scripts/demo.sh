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
# Paths in these variables are the caller's (a relative one too); each is
# checked, with the other values, before anything starts (exit 2, naming it):
#   KVSS_DEMO_TRACE=F   replay the trace F (Mooncake's format, README.md);
#                       none: the built-in workload even where the public
#                       trace is. Unset: the public trace where it is
#   KVSS_DEMO_LIMIT=N   replay N requests instead of the config's limit
#   KVSS_DEMO_JSON=F    also write the summary's JSON line to F
#   KVSS_DEMO_TAG=T     name the file prefixes kvss_demo_{s0,s1,drv}_T (default: the pid)
#   KVSS_DEMO_DRIVER_CFG=F  the driver's configuration (default config/memif-driver.cfg)
#   KVSS_DEMO_SHARD0_CFG=F, KVSS_DEMO_SHARD1_CFG=F  the shards' (default
#                       config/memif-shard0.cfg, config/memif-shard1.cfg)
#   KVSS_DEMO_REFILL_LCORE=1  give each shard its refill lcore too (lcore 2)
#   KVSS_DEMO_L2_DIR=D  the shards' second tiers in D (default: a directory of
#                       this run's, empty: a demo figure never depends on what
#                       an earlier run left)
#   KVSS_DEMO_KEEP_L2=1 the second tiers where the configuration says
#                       (/var/lib/kvss), kept from run to run: a warm restart
#   KVSS_DEMO_LOGS=D    keep each process's log in D at the end (made if missing)
#   KVSS_DEMO_STATS_WIDTH=N   cut each shard's final stats lines at N characters (300)
#   KVSS_DEMO_ARRIVALS=A   requests arrive as A says (make demo: "trace"): at
#                       the workload's timestamps ("trace", times
#                       KVSS_DEMO_TIME_SCALE, default 0.1: the public
#                       trace's 17 minutes in 1.7) or "poisson" (10 a
#                       second); the wafer computes what is not refilled at
#                       KVSS_DEMO_PREFILL_TPS tokens/s (default 607,000),
#                       and the verdict gives the time to first token beside
#                       compute-only's on the same arrivals. Unset: the
#                       driver configuration's (a closed loop, free compute)
#   KVSS_DEMO_DOCUMENTS=N  without the trace, the built-in workload reads a
#                       library of N documents (default 300, about 3.75M
#                       tokens: more than the demo's DRAM, less than its
#                       second tier; 0: the plain built-in workload)
#
# Exit status: the driver's (0: every request done, every refilled byte
# right, no protocol error; 2: a configuration, the driver's or a shard's,
# or KVSS_DEMO_TRACE naming no file); 1 when a shard did not start or ended
# badly; 130 (143) when the demo itself was interrupted by SIGINT (SIGTERM),
# its verdict then STOPPED, not PASS. Every process is stopped and every
# file prefix removed, whatever happens.
set -u
BUILD=${1:-build}
[ $# -gt 0 ] && shift
# The workload, checked before anything starts (a relative path is the caller's).
MC=../shared/traces/mooncake_synthetic.jsonl
trace_opt=()
case "${KVSS_DEMO_TRACE:-}" in
"") ;;
none) trace_opt=(--trace "") ;;
*)
	if [ ! -e "$KVSS_DEMO_TRACE" ]; then
		echo "demo: KVSS_DEMO_TRACE=$KVSS_DEMO_TRACE: no such file (a trace in Mooncake's format, or none)" >&2
		exit 2
	elif [ -d "$KVSS_DEMO_TRACE" ] || [ ! -f "$KVSS_DEMO_TRACE" ]; then
		what=$( [ -d "$KVSS_DEMO_TRACE" ] && echo "a directory" || echo "a FIFO, socket or device")
		echo "demo: KVSS_DEMO_TRACE=$KVSS_DEMO_TRACE: not a regular file ($what; a trace in Mooncake's format, or none)" >&2
		exit 2
	fi
	case "$KVSS_DEMO_TRACE" in /*) MC=$KVSS_DEMO_TRACE ;; *) MC=$PWD/$KVSS_DEMO_TRACE ;; esac
	trace_opt=(--trace "$MC")
	;;
esac
# The other variables, checked before anything starts too: each names itself.
demo_bad() {
	echo "demo: $1" >&2
	exit 2
}
. "$(dirname "$0")/env-lib.sh"
env_whole demo KVSS_DEMO_KEEP_L2 0 1 0
env_whole demo KVSS_DEMO_REFILL_LCORE 0 1 0
env_whole demo KVSS_DEMO_STATS_WIDTH 1 999999 300
[ -n "${KVSS_DEMO_LIMIT+set}" ] && env_whole demo KVSS_DEMO_LIMIT 1 100000000
[ -n "${KVSS_DEMO_DOCUMENTS+set}" ] && env_whole demo KVSS_DEMO_DOCUMENTS 0 1000000
# Paths the caller names are the caller's, relative ones too: the demo runs
# from the checkout, and a relative KVSS_DEMO_L2_DIR once filled a directory
# there with gigabytes of second tier.
for v in KVSS_DEMO_L2_DIR KVSS_DEMO_JSON KVSS_DEMO_DRIVER_CFG KVSS_DEMO_SHARD0_CFG KVSS_DEMO_SHARD1_CFG; do
	val=${!v:-}
	case "$val" in "" | /*) ;; *) printf -v "$v" '%s' "$PWD/$val" ;; esac
done
for v in KVSS_DEMO_DRIVER_CFG KVSS_DEMO_SHARD0_CFG KVSS_DEMO_SHARD1_CFG; do
	val=${!v:-}
	[ -z "$val" ] || [ -f "$val" ] || demo_bad "$v=$val: no such file (a kvss configuration)"
done
case "${KVSS_DEMO_ARRIVALS:-}" in
"" | trace | poisson) ;;
*) demo_bad "KVSS_DEMO_ARRIVALS=$KVSS_DEMO_ARRIVALS: want trace or poisson (or unset: the configuration's)" ;;
esac
demo_tps=${KVSS_DEMO_PREFILL_TPS-607000}
demo_scale=${KVSS_DEMO_TIME_SCALE-0.1}
case "$demo_tps" in "" | *[!0-9]* | 0*) demo_bad "KVSS_DEMO_PREFILL_TPS=$demo_tps: want a whole number of tokens a second, 1 to 1000000000" ;; esac
[ ${#demo_tps} -le 10 ] && [ "$demo_tps" -le 1000000000 ] ||
	demo_bad "KVSS_DEMO_PREFILL_TPS=$demo_tps: want a whole number of tokens a second, 1 to 1000000000"
case "$demo_scale" in "" | *[!0-9.]* | .* | *. | *.*.* | [!1-9]) demo_bad "KVSS_DEMO_TIME_SCALE=$demo_scale: want a number above 0, like 0.1" ;; esac
case "$demo_scale" in *[1-9]*) ;; *) demo_bad "KVSS_DEMO_TIME_SCALE=$demo_scale: want a number above 0, like 0.1" ;; esac
awk -v s="$demo_scale" 'BEGIN { exit !(s >= 1e-6 && s <= 1e6) }' ||
	demo_bad "KVSS_DEMO_TIME_SCALE=$demo_scale: want a number from 0.000001 to 1000000 (wafer.time_scale's range)"
if [ -n "${KVSS_DEMO_JSON:-}" ] && [ ! -d "$(dirname "$KVSS_DEMO_JSON")" ]; then
	demo_bad "KVSS_DEMO_JSON=$KVSS_DEMO_JSON: its directory $(dirname "$KVSS_DEMO_JSON") is not there"
fi
cd "$(dirname "$0")/.."

run=${KVSS_DEMO_TAG:-$$}
tmp=$(mktemp -d /tmp/kvss-demo.XXXXXX)
# Arrivals and a prefill rate: a copy of the driver's configuration with its
# wafer.arrivals and driver.recompute_tokens_per_s set (the example's lines).
if [ -n "${KVSS_DEMO_ARRIVALS:-}" ]; then
	src=${KVSS_DEMO_DRIVER_CFG:-config/memif-driver.cfg}
	sed -e "s/^\( *\)arrivals = \"closed\";/\1arrivals = \"$KVSS_DEMO_ARRIVALS\"; time_scale = $demo_scale; arrival_rate = 10.0;/" \
		-e "s/^\( *\)# recompute_tokens_per_s = [0-9]*;/\1recompute_tokens_per_s = $demo_tps;/" "$src" >"$tmp/driver-arrivals.cfg"
	if ! grep -q "arrivals = \"$KVSS_DEMO_ARRIVALS\"" "$tmp/driver-arrivals.cfg" ||
		! grep -q "^ *recompute_tokens_per_s = $demo_tps;" "$tmp/driver-arrivals.cfg"; then
		rm -rf "$tmp"
		demo_bad "KVSS_DEMO_ARRIVALS=$KVSS_DEMO_ARRIVALS: $src has no 'arrivals = \"closed\";' and '# recompute_tokens_per_s = N;' lines to set"
	fi
	KVSS_DEMO_DRIVER_CFG=$tmp/driver-arrivals.cfg
	if [ "$KVSS_DEMO_ARRIVALS" = trace ]; then
		echo "demo: requests arrive at the workload's times x $demo_scale; the wafer computes what is not refilled at $demo_tps tokens/s"
	else
		echo "demo: requests arrive as a Poisson process, 10 a second; the wafer computes what is not refilled at $demo_tps tokens/s"
	fi
fi
pids=()
prefixes=("kvss_demo_s0_$run" "kvss_demo_s1_$run" "kvss_demo_drv_$run")

. scripts/procs-lib.sh
# first_error LOG: the line of a process's log that says what went wrong (a
# configuration's FILE:LINE: message, else the first line saying an error,
# else its last line).
first_error() {
	local l
	l=$(grep -m1 -E '^kvss: [^ ]+:[0-9]+: ' "$1")
	# A configuration's value that fails (its file, then the key: the
	# driver's trace that does not parse is 'CFG: wafer.trace: FILE:1: ...').
	[ -z "$l" ] && l=$(grep -m1 -E '^kvss: [^ ]+\.cfg: [a-z_]+\.[a-z0-9_.]+: ' "$1")
	[ -z "$l" ] && l=$(grep -v '^TELEMETRY:' "$1" | grep -m1 -iE 'error|fail|cannot|refus|missing|unknown|invalid')
	[ -z "$l" ] && l=$(grep -v '^[[:space:]]*$' "$1" | tail -n 1)
	printf '%s' "${l:-(its log is empty)}"
}
cleanup() {
	procs_stop TERM
	# KVSS_DEMO_LOGS=DIR: each process's log kept there (a test that
	# fails wants the shards' own lines, not only the driver's).
	[ -n "${KVSS_DEMO_LOGS:-}" ] && mkdir -p "$KVSS_DEMO_LOGS" && cp "$tmp"/*.log "$KVSS_DEMO_LOGS"/ 2>/dev/null
	rm -rf "$tmp"
}
trap cleanup EXIT
# A signal before the driver runs ends the demo at once; while it runs, the
# driver (which takes it too from the terminal) drains and prints its summary,
# and the verdict says the run was interrupted. Bash runs a trap during
# `wait`, not while a foreground child that handles the signal runs: the
# driver runs in the background.
sig=
dpid=
on_signal() {
	sig=$1
	[ -z "$dpid" ] && exit "$2"
	kill "-$1" "$dpid" 2>/dev/null
}
trap 'on_signal INT 130' INT
trap 'on_signal TERM 143' TERM

# Three processes of 1 GiB: in hugepages when that much is reserved
# (scripts/hugepages.sh reserve 3072), else --no-huge; one line says which.
. scripts/eal-mem.sh
eal_mem demo 1024 3
EAL=(--no-pci "${EAL_MEM[@]}" --log-level lib.eal:error --log-level pmd.net.memif:error)
# The second tiers: in a directory of this run's unless asked otherwise;
# what they held at the start is what the shards say they found.
if [ -z "${KVSS_DEMO_L2_DIR:-}" ] && [ "$KVSS_DEMO_KEEP_L2" != 1 ]; then
	KVSS_DEMO_L2_DIR=$tmp/l2
	mkdir -p "$KVSS_DEMO_L2_DIR"
	l2_where="a directory of this run's (KVSS_DEMO_KEEP_L2=1 keeps /var/lib/kvss)"
elif [ -n "${KVSS_DEMO_L2_DIR:-}" ]; then
	l2_where="$KVSS_DEMO_L2_DIR (KVSS_DEMO_L2_DIR)"
else
	l2_where="/var/lib/kvss (KVSS_DEMO_KEEP_L2=1)"
fi
# While it runs: the processes' telemetry, and a Prometheus exporter.
echo "demo: file prefixes ${prefixes[*]}; while it runs:"
echo "demo:   dpdk-telemetry.py -f ${prefixes[2]}    (the driver; the shards: ${prefixes[0]}, ${prefixes[1]})"
echo "demo:   tools/kvss-exporter --prefix ${prefixes[0]} --prefix ${prefixes[1]} --prefix ${prefixes[2]}    (serves 127.0.0.1:9479/metrics)"
# Three processes share this machine's cores: let the scheduler place them.
LC="0@(0-$(($(nproc) - 1)))"

if [ "${KVSS_DEMO_TRACE:-}" = none ]; then
	echo "demo: replaying the built-in workload (KVSS_DEMO_TRACE=none) through a driver and two shards over net_memif"
elif [ -f "$MC" ]; then
	echo "demo: replaying $MC through a driver and two shards over net_memif"
else
	echo "demo: no trace at $MC (README.md says where to get it, or KVSS_DEMO_TRACE=F): replaying the built-in workload through a driver and two shards"
fi

SLC="1@(0-$(($(nproc) - 1)))"
[ "$KVSS_DEMO_REFILL_LCORE" = 1 ] && SLC="$SLC,2@(0-$(($(nproc) - 1)))"
scfg=("${KVSS_DEMO_SHARD0_CFG:-config/memif-shard0.cfg}" "${KVSS_DEMO_SHARD1_CFG:-config/memif-shard1.cfg}")
# The files as given: the copies below change lines in place (same line
# numbers), and a shard's error names the file given, not this run's copy.
given=("${scfg[@]}")
# The refill lcore: lcore 2 for EAL and a copy of each shard's file naming it.
if [ "$KVSS_DEMO_REFILL_LCORE" = 1 ]; then
	for k in 0 1; do
		sed 's/^\(lcores = { ingest = \[1\]; refill = \)\[\]/\1[2]/' "${scfg[$k]}" >"$tmp/shard$k.cfg"
		grep -q 'refill = \[2\]' "$tmp/shard$k.cfg" || {
			echo "demo: ${scfg[$k]}: no 'lcores = { ingest = [1]; refill = [];' line to give lcore 2" >&2
			exit 2
		}
		scfg[k]=$tmp/shard$k.cfg
	done
fi
# A second tier of this run's own is sealed with a key made for the run
# (shard.l2.key_file; docs/kvss.md, "Sealing the second tier"): its files
# hold ciphertext. One kept from run to run (KVSS_DEMO_KEEP_L2,
# KVSS_DEMO_L2_DIR) stays plain: a new key would not open it.
if [ "${KVSS_DEMO_L2_DIR:-}" = "$tmp/l2" ]; then
	(umask 077 && python3 -c 'import os; print(os.urandom(32).hex())' >"$tmp/l2.key")
	for k in 0 1; do
		grep -q '^ *l2 = {.* };$' "${scfg[$k]}" || continue
		sed "s#^\( *l2 = {.*\) };\$#\1 key_file = \"$tmp/l2.key\"; };#" "${scfg[$k]}" >"$tmp/shard$k-sealed.cfg"
		scfg[k]=$tmp/shard$k-sealed.cfg
	done
	echo "demo: the second tiers are sealed (AES-256-GCM) with a key made for this run"
else
	echo "demo: the second tiers are kept from run to run, in plain (a key made for one run would not open them)"
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
		rc=1
		if ! kill -0 "${pids[$k]}" 2>/dev/null; then
			wait "${pids[$k]}"
			[ $? -eq 2 ] && rc=2
		fi
		echo "demo: ---------------------------------------------------------------"
		echo "demo: FAIL: shard $k did not start: $(first_error "$tmp/shard$k.log" | sed "s#${scfg[$k]}#${given[$k]}#g")"
		exit $rc
	fi
	sed -n "s/^kvss: \(shard .* up, epoch .*\)/demo: \1/p" "$tmp/shard$k.log"
done
# What the second tiers held at the start, as the shards found them.
kept=$(cat "$tmp"/shard[01].log | sed -n 's/^kvss: second tier .*: \([0-9]*\) columns kept from before, \([0-9]*\) dropped.*/\1 \2/p' |
	awk '{ n++; k += $1; d += $2 } END { if (n) print k, d }')
if [ -z "$kept" ]; then
	l2_state="none (the shards' configurations have no second tier)"
elif [ "${kept% *}" = 0 ]; then
	l2_state="empty at the start (0 columns kept)"
else
	l2_state="warm: ${kept% *} columns kept from an earlier run"
fi
[ -n "$kept" ] && [ "${kept#* }" != 0 ] && l2_state="$l2_state, ${kept#* } dropped (checksum)"
echo "demo: second tiers $l2_state${kept:+, in $l2_where}"
drv=(--config "${KVSS_DEMO_DRIVER_CFG:-config/memif-driver.cfg}" --poll idle "${trace_opt[@]}")
[ -n "${KVSS_DEMO_LIMIT+set}" ] && drv+=(--limit "$KVSS_DEMO_LIMIT")
# Without the trace, a workload whose reuse DRAM alone cannot hold (a trace
# replayed ignores it).
drv+=(--documents "${KVSS_DEMO_DOCUMENTS-300}")
# Its output (stderr too: a configuration's message) shown as it comes.
: >"$tmp/driver.log"
# What the machine does beside the run: the busy time of the CPUs this
# script may run on (/proc/stat: user, nice, system and steal; not the
# interrupts, the run's own disk I/O among them), the run's own CPU time
# (the shards', alive, from /proc/PID/stat, and the children this shell
# has waited for: the driver once it ends, a shard that died), and the
# clock; now and when the driver ends.
machine_snapshot() {
	python3 - "$$" "$@" <<'PY'
import os, sys, time
def after_comm(pid):
    with open("/proc/%s/stat" % pid) as f:
        return f.read().rsplit(")", 1)[1].split()
cpus = os.sched_getaffinity(0)
busy = 0
for line in open("/proc/stat"):
    p = line.split()
    if p[0].startswith("cpu") and p[0][3:].isdigit() and int(p[0][3:]) in cpus:
        busy += int(p[1]) + int(p[2]) + int(p[3]) + (int(p[8]) if len(p) > 8 else 0)
f = after_comm(sys.argv[1])
own = int(f[13]) + int(f[14])  # cutime, cstime
for pid in sys.argv[2:]:
    try:
        f = after_comm(pid)
        own += int(f[11]) + int(f[12])  # utime, stime
    except (OSError, IndexError, ValueError):
        pass  # gone: reaped, its time is in cutime now
print(busy, own, "%.3f" % time.monotonic(), len(cpus))
PY
}
machine0=$(machine_snapshot "${pids[0]}" "${pids[1]}" 2>/dev/null)
"$BUILD/kvss" "${EAL[@]}" --file-prefix "${prefixes[2]}" --lcores "$LC" \
	--vdev "net_memif0,role=client,id=0,bsize=10240,socket=$tmp/memif0.sock" \
	--vdev "net_memif1,role=client,id=1,bsize=10240,socket=$tmp/memif1.sock" \
	-- "${drv[@]}" "$@" >"$tmp/driver.log" 2>&1 &
dpid=$!
pids+=("$dpid")
tail -s 0.2 -n +1 -f --pid="$dpid" "$tmp/driver.log" &
tpid=$!
while kill -0 "$dpid" 2>/dev/null; do
	wait "$dpid"
done
wait "$dpid"
drv_status=$?
machine1=$(machine_snapshot "${pids[0]}" "${pids[1]}" 2>/dev/null)
wait "$tpid"
unset 'pids[2]'
status=$drv_status
for k in 0 1; do
	# Interrupted from the terminal, the shards took the signal too.
	if [ -z "$sig" ] && ! kill -0 "${pids[$k]}" 2>/dev/null; then
		echo "demo: shard $k is gone; its log:"
		cat "$tmp/shard$k.log"
		status=1
	fi
done
if [ -n "${KVSS_DEMO_JSON:-}" ]; then
	# Only a summary that is there: a run that wrote none leaves no empty file.
	summary=$(grep '^{' "$tmp/driver.log" | tail -1)
	[ -n "$summary" ] && printf '%s\n' "$summary" >"$KVSS_DEMO_JSON"
fi
# The shards' own account, after a clean stop.
for k in 0 1; do
	kill -TERM "${pids[$k]}" 2>/dev/null
	wait "${pids[$k]}"
	rc=$?
	grep "final stats" "$tmp/shard$k.log" | sed "s/^kvss: final stats:/demo: shard $k:/" | cut -c1-"$KVSS_DEMO_STATS_WIDTH"
	[ "$rc" -ne 0 ] && { echo "demo: shard $k exited $rc"; cat "$tmp/shard$k.log"; status=1; }
done
pids=()

[ "$sig" = INT ] && status=130
[ "$sig" = TERM ] && status=143

# The verdict, to be read in five seconds.
verdict() {
	# DRAM alone is computed with the driver's column (kvss-trace's default is 64).
	DEMO_COLUMN=$(sed -n 's/^ *column = \([0-9]*\);.*/\1/p' "${KVSS_DEMO_DRIVER_CFG:-config/memif-driver.cfg}" | head -n 1) \
	DEMO_MACHINE="$machine0 $machine1 $(getconf CLK_TCK)" \
	python3 - "$tmp/driver.log" "$status" "$BUILD" "$sig" "$l2_state" "$(first_error "$tmp/driver.log")" \
		"$tmp/shard0.log" "$tmp/shard1.log" <<'EOF'
import json, os, subprocess, sys
log, status, build, sig, l2_state, cause = sys.argv[1:7]
shard_logs = sys.argv[7:]
status = int(status)
lines = [l for l in open(log, errors="replace") if l.startswith("{")]
j = json.loads(lines[-1]) if lines else None
print("demo: ---------------------------------------------------------------")
if j is None:
    print("demo: FAIL: the driver wrote no summary (exit %d): %s" % (status, cause or "its log is above"))
    sys.exit(0)
causes = {1: "wrong bytes, a failed refill, or a process that ended badly (verify failures %d; the logs above)"
              % j.get("verify_failures", 0),
          2: "the configuration (its message is above)",
          3: "degraded: protocol errors %d (lost tokens %d, refill timeouts in the summary), resyncs %d, "
             "shard restarts %d" % (j.get("protocol_errors", 0), j.get("lost_tokens", 0),
                                   j.get("resyncs", 0), j.get("shard_restarts", 0)),
          4: "the run did not happen (a signal, or the shards did not come up)"}
# DRAM alone on the same input (the driver says which: "N requests from
# SOURCE"), from kvss-trace: the demo's DRAM is the smaller shard's
# capacity, 1,000,000 tokens, at the driver's column.
import re
dram = None
src = None
for l in open(log, errors="replace"):
    m = re.search(r"driver: (\d+) requests from (.*?); \d+ model", l)
    if m:
        src = (int(m.group(1)), m.group(2))
finished = j.get("finished", True)
part = "%d of %s requests" % (j["requests"], src[0] if src else "?")
if sig or (status == 0 and not finished):
    print("demo: STOPPED: %s after %s (no verdict on a part of the run; verify failures so far %d)"
          % ("interrupted (SIG%s)" % sig if sig else "the driver was stopped", part,
             j.get("verify_failures", 0)))
elif status == 0 and j.get("protocol_errors", 0) > 0:
    # Only with the fault injector on (--faults) do protocol errors leave
    # the exit status 0: say what the faults cost, not "no protocol error".
    print("demo: PASS: %d requests, every refilled byte right; with faults injected (--faults): "
          "protocol errors %d (lost tokens %d, refills failed %d; the summary above says which), resyncs %d"
          % (j["requests"], j["protocol_errors"], j.get("lost_tokens", 0), j.get("refills_failed", 0),
             j.get("resyncs", 0)))
elif status == 0:
    print("demo: PASS: %d requests, every refilled byte right, no protocol error" % j["requests"])
else:
    print("demo: FAIL (exit %d): %s%s" % (status, causes.get(status, "see above"),
                                         "" if finished else " (stopped early: %s)" % part))
# A sanitizer's build (build/asan) uses the plain build's kvss-trace beside it: a figure, not a test.
trace = os.path.join(build, "kvss-trace")
plain = os.path.join(os.path.dirname(build.rstrip("/")), "kvss-trace")
if build.rstrip("/").endswith("asan") and os.path.exists(plain):
    trace = plain
cmd = None
if not finished:
    pass  # what DRAM alone gets on the whole input is no comparison for a part of it
elif src is not None and src[1].startswith("the built-in workload"):
    cmd = [trace, "--capacity", "1000000", "--json", "--generate", str(src[0])]
    lib = re.search(r"with a library of (\d+) documents", src[1])
    if lib:
        cmd += ["--documents", lib.group(1)]
elif src is not None:
    cmd = [trace, "--capacity", "1000000", "--json", "--trace", src[1].split(" (")[0], "--limit", str(src[0])]
column = os.environ.get("DEMO_COLUMN") or "64"
if cmd is not None:
    cmd += ["--column", column]
try:
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=120).stdout
    dram = json.loads([l for l in out.splitlines() if l.startswith("{")][-1])["hit_ratio"]
except Exception:
    pass
if not finished:
    print("demo: hit ratio %.4f with both tiers over the %d requests done" % (j["hit_ratio"], j["requests"]))
else:
    print("demo: hit ratio %.4f with both tiers; DRAM alone on the same input %s (kvss-trace --capacity 1e6 --column %s)%s"
          % (j["hit_ratio"], "%.4f" % dram if dram is not None else "? (kvss-trace did not run)", column,
             ": %.2fx" % (j["hit_ratio"] / dram) if dram else ""))
if j.get("hit_tokens_l1") is not None:
    print("demo: hits by tier: %d tokens from DRAM, %d from the second tier; second tiers %s"
          % (j["hit_tokens_l1"], j["hit_tokens_l2"], l2_state))
# Each shard's own rates: its bytes over its lcores' busy time by role (the
# final stats: time ingest_busy_us refill_busy_us idle_us, data_bytes,
# refill_bytes; a key left out is 0), and what bounds the run: the lcore
# that is full, if one is.
shards, own = [], []
for k, path in enumerate(shard_logs):
    st = {}
    try:
        for l in open(path, errors="replace"):
            if l.startswith("kvss: final stats:"):
                st.update((a, int(b)) for a, b in re.findall(r"(\w+)=(\d+)", l))
    except OSError:
        pass
    if not st:
        continue
    ing, ref, idle = (st.get(x, 0) / 1e6 for x in ("ingest_busy_us", "refill_busy_us", "idle_us"))
    busy = (ing + ref) / (ing + ref + idle) if ing + ref + idle else 0.0
    shards.append((k, busy))
    rate = lambda b, t: "%.3f GB/s over %.3f s busy" % (b / 1e9 / t, t) if t else "none"
    own.append("demo:   shard %d: ingest %s, refill %s; its lcore %.0f%% busy"
               % (k, rate(st.get("data_bytes", 0), ing), rate(st.get("refill_bytes", 0), ref), 100 * busy))
drv_busy = j.get("control_lcore_busy")
top = max(shards, key=lambda x: x[1]) if shards else None
if drv_busy is None or top is None:
    bound = "the run's pace (the lcores' busy time is missing)"
elif drv_busy >= 0.9 and top[1] < 0.5:
    bound = ("bound by the wafer emulator on one lcore (%.0f%% busy: it makes and checks every byte), "
             "not by the shards" % (100 * drv_busy))
elif top[1] >= 0.9:
    bound = "bound by shard %d's lcore (the wafer emulator's %.0f%% busy)" % (top[0], 100 * drv_busy)
else:
    # Neither is full: say what the run waited on, from its figures.
    l2 = j.get("hit_tokens_l2") or 0
    hits = (j.get("hit_tokens_l1") or 0) + l2
    on = ("the second tier's reads (%.0f%% of the hit tokens)" % (100.0 * l2 / hits) if l2 and hits
          else "the shards' answers (refill p50 %s us)" % j.get("refill_p50_us"))
    bound = ("bound by no lcore (the wafer emulator's %.0f%% busy, the shards' at most %.0f%%): it waits on %s"
             % (100 * drv_busy, 100 * top[1], on))
print("demo: %.1f s; evicted %.3f GB/s, refilled %.3f GB/s: %s%s"
      % (j["seconds"], j["evict_gbps"], j["refill_gbps"], bound, "; the shards' own rates:" if own else ""))
for l in own:
    print(l)
print("demo: refills %d, p50 %s us, p99 %s us" % (j["refills"], j.get("refill_p50_us"), j.get("refill_p99_us")))
# What the user waits for: time to first token, beside the same arrivals
# with the cache off (the driver's model of its own wafer, lib/wafermodel).
t50, t99 = j.get("ttft_p50_ms"), j.get("ttft_p99_ms")
m50, m99 = j.get("model_compute_only_ttft_p50_ms"), j.get("model_compute_only_ttft_p99_ms")
if t50 is not None and m50 is not None and t50 > 0 and t99 > 0:
    def than(m, t):
        return "%.1fx sooner than" % (m / t) if m >= t else "%.1fx slower than" % (t / m)
    print("demo: TTFT p50 %.1f ms, %s recomputing (%.1f ms); p99 %.1f ms, %s recomputing (%.1f ms): "
          "compute-only on the same arrivals, modelled; refill policy %s"
          % (t50, than(m50, t50), m50, t99, than(m99, t99), m99, j.get("refill_policy")))
    # The model has the wafer's whole time; the emulator only what the
    # machine left its lcore, and its lateness is in every TTFT: say what
    # other processes than the run's took of the machine meanwhile.
    try:
        b0, o0, t0, _, b1, o1, t1, ncpu, hz = os.environ["DEMO_MACHINE"].split()
        wall = float(t1) - float(t0)
        others = ((int(b1) - int(b0)) - (int(o1) - int(o0))) / int(hz) / wall if wall > 0 else None
    except (KeyError, ValueError, ZeroDivisionError):
        others = None
    w = j.get("control_lcore_cpu_wait")
    if others is not None and others >= 0.25:
        print("demo: but the machine is busy: other processes took %.1f of its %s CPUs during the run%s, "
              "and compute-only is modelled, never starved: that ratio is of a starved run"
              % (others, ncpu, "" if w is None else
                 " (the wafer emulator's lcore waited for a CPU %.0f%% of it)" % (100 * w)))
    elif others is not None:
        print("demo: a quiet machine: other processes took %.2f of its %s CPUs during the run" % (max(others, 0), ncpu))
elif t50 is not None:
    print("demo: TTFT p50 %.1f ms, p99 %.1f ms (arrivals %s: no compute-only beside it without arrivals and "
          "a prefill rate, wafer.arrivals and driver.recompute_tokens_per_s)" % (t50, t99, j.get("arrivals")))
EOF
}
verdict
exit "$status"
