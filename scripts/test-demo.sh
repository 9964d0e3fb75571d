#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# make demo (scripts/demo.sh) as a new user meets it, in short runs:
#  - KVSS_DEMO_TRACE naming no file, or a directory, a switch or number
#    that is not one, soak.sh's and soak-procs.sh's SEEDS that are not
#    whole numbers: one line naming the variable, exit 2, nothing started;
#  - a shard's configuration with a typo, then the driver's: the verdict's
#    FAIL line gives the cause (the file, its line, the key), exit 2;
#  - KVSS_DEMO_TRACE naming a file that is no trace: the FAIL line names
#    the key, the file and its line, and the driver closes its ports;
#  - KVSS_DEMO_TRACE=PATH (relative to the caller), a small trace written
#    here, twice on one second tier: the verdict says what the shards found
#    in it (empty, then the columns the first run left), what bounds the
#    run's throughput, and each shard's own rates (its bytes over its busy
#    time by role, as its final stats and the driver's bytes agree);
#  - KVSS_DEMO_TRACE=none, interrupted by SIGINT to its process group (a
#    Ctrl-C): STOPPED, no PASS, no comparison over an input it did not
#    finish, exit 130.
# The test-e2e sections run the demo's whole paths.
set -u
BUILD=${1:-build}
cd "$(dirname "$0")/.."
tmp=$(mktemp -d)
tag=tdemo$$
trap 'rm -rf "$tmp" /var/run/dpdk/kvss_demo_*_${tag}*' EXIT
. scripts/check-lib.sh
export KVSS_DEMO_DOCUMENTS=0

# One second tier kept across the runs that check no more of it than that
# they start (the faults, the configuration typos, a trace that is none): a
# tier made new costs each shard a write of its whole file (a first start
# writes it once, kvdisk's write_once), seconds a run. The runs that check
# the default (a tier made for the run, sealed with a key made for it) and
# Ctrl-C keep the default.
mkdir -m 700 "$tmp/l2kept"
kept=KVSS_DEMO_L2_DIR=$tmp/l2kept

# demo LOG [VAR=VALUE...]: run the demo with those variables, its status.
demo() {
	local log=$1
	shift
	env KVSS_DEMO_TAG="$tag" "$@" timeout 300 scripts/demo.sh "$BUILD" >"$log" 2>&1
}

# 1. A trace asked for that is not there.
demo "$tmp/notrace.log" KVSS_DEMO_TRACE="$tmp/nonexistent.jsonl"
rc=$?
check "no trace: exit 2 (got $rc)" test $rc -eq 2
check "no trace: one line, naming KVSS_DEMO_TRACE" \
	bash -c "[ \$(wc -l <'$tmp/notrace.log') = 1 ] && grep -q '^demo: KVSS_DEMO_TRACE=$tmp/nonexistent.jsonl: no such file' '$tmp/notrace.log'"

# 1a. The runners' other variables, checked before anything starts (exit 2,
#     one line naming the variable): a number that is not one (bash
#     arithmetic on SEEDS='s[$(touch F)]' ran the command), a trace that is
#     a directory, a switch that is neither 0 nor 1.
for s in soak soak-procs; do
	for v in 0 -1 abc 1.5 "s[\$(touch $tmp/PWNED)]*0"; do
		env SEEDS="$v" timeout 20 scripts/$s.sh "$BUILD" >"$tmp/seeds.log" 2>&1
		rc=$?
		check "$s SEEDS='$v': exit 2, naming SEEDS (got $rc)" \
			sh -c "[ $rc -eq 2 ] && [ \$(wc -l <'$tmp/seeds.log') = 1 ] && grep -q '^$s: SEEDS=.*: a whole number from 1 to' '$tmp/seeds.log'"
	done
done
check "SEEDS is never evaluated (no file made)" test ! -e "$tmp/PWNED"
mkdir -p "$tmp/adir"
demo "$tmp/dirtrace.log" KVSS_DEMO_TRACE="$tmp/adir"
rc=$?
check "KVSS_DEMO_TRACE a directory: exit 2, one line saying so (got $rc)" \
	sh -c "[ $rc -eq 2 ] && [ \$(wc -l <'$tmp/dirtrace.log') = 1 ] && grep -q 'KVSS_DEMO_TRACE=$tmp/adir: not a regular file (a directory' '$tmp/dirtrace.log'"
for kv in KVSS_DEMO_KEEP_L2=yes KVSS_DEMO_STATS_WIDTH=abc KVSS_DEMO_SHARD0_CFG=nonexistent.cfg \
	KVSS_DEMO_LIMIT=0 KVSS_DEMO_LIMIT=20abc KVSS_DEMO_DOCUMENTS= KVSS_DEMO_DOCUMENTS=-1 \
	KVSS_DEMO_ARRIVALS=closed KVSS_DEMO_ARRIVALS=x KVSS_DEMO_PREFILL_TPS=0 KVSS_DEMO_PREFILL_TPS=1e6 \
	KVSS_DEMO_PREFILL_TPS=99999999999 KVSS_DEMO_TIME_SCALE=-1 KVSS_DEMO_TIME_SCALE=0.1.2 KVSS_DEMO_TIME_SCALE= \
	KVSS_DEMO_TIME_SCALE=0.0000001 KVSS_DEMO_TIME_SCALE=2000000; do
	demo "$tmp/var.log" "$kv" KVSS_DEMO_TRACE=none
	rc=$?
	check "$kv: exit 2 before anything starts, naming it (got $rc)" \
		sh -c "[ $rc -eq 2 ] && [ \$(wc -l <'$tmp/var.log') = 1 ] && grep -q '^demo: ${kv%%=*}=' '$tmp/var.log'"
done

# 1b. The fault injector on (--faults, passed to the driver): a run that
#     exits 0 with protocol errors says what the faults cost, never "no
#     protocol error".
env KVSS_DEMO_TAG="$tag" "$kept" KVSS_DEMO_TRACE=none KVSS_DEMO_LIMIT=100 timeout 300 scripts/demo.sh "$BUILD" \
	--faults seed=3,drop=0.1 >"$tmp/faults.log" 2>&1
rc=$?
check "faults: exit 0 (got $rc)" test $rc -eq 0
check "faults: PASS says the faults' protocol errors" \
	grep -q '^demo: PASS: 100 requests, every refilled byte right; with faults injected (--faults): protocol errors [1-9]' "$tmp/faults.log"
check "faults: not 'no protocol error'" sh -c "! grep -q 'no protocol error' '$tmp/faults.log'"
[ "$fail" -eq 0 ] || grep '^demo:' "$tmp/faults.log" | tail -n 12

# 1c. Requests arriving at the workload's times (make demo's way): the
#     verdict gives the time to first token beside compute-only's on the
#     same arrivals.
env KVSS_DEMO_TAG="$tag" KVSS_DEMO_TRACE=none KVSS_DEMO_LIMIT=100 KVSS_DEMO_ARRIVALS=trace timeout 300 \
	scripts/demo.sh "$BUILD" >"$tmp/arr.log" 2>&1
rc=$?
check "arrivals: exit 0 (got $rc)" test $rc -eq 0
check "arrivals: the demo says how requests arrive and what computing costs" \
	grep -q "^demo: requests arrive at the workload's times x 0.1; the wafer computes what is not refilled at 607000 tokens/s" "$tmp/arr.log"
check "arrivals: PASS" grep -q '^demo: PASS: 100 requests' "$tmp/arr.log"
check "arrivals: its second tiers sealed with a key made for the run (the shards started on it)" \
	grep -q '^demo: the second tiers are sealed (AES-256-GCM) with a key made for this run' "$tmp/arr.log"
check "arrivals: the verdict gives TTFT p50 and p99 beside recomputing's" \
	grep -q '^demo: TTFT p50 [0-9.]* ms, [0-9.]*x \(sooner\|slower\) than recomputing ([0-9.]* ms); p99 [0-9.]* ms, [0-9.]*x \(sooner\|slower\) than recomputing ([0-9.]* ms): compute-only on the same arrivals, modelled; refill policy adaptive' "$tmp/arr.log"
[ "$fail" -eq 0 ] || grep '^demo:' "$tmp/arr.log" | tail -n 12

# 2. A shard's configuration with a typo (idd for id).
sed 's/^  id = 0;/  idd = 0;/' config/memif-shard0.cfg >"$tmp/shard0.cfg"
check "bad shard: the typo is in" grep -q '^  idd = 0;' "$tmp/shard0.cfg"
demo "$tmp/badshard.log" "$kept" KVSS_DEMO_SHARD0_CFG="$tmp/shard0.cfg" KVSS_DEMO_TRACE=none
rc=$?
check "bad shard: exit 2, a configuration (got $rc)" test $rc -eq 2
check "bad shard: the FAIL line gives the cause" \
	grep -q "^demo: FAIL: shard 0 did not start: kvss: $tmp/shard0.cfg:[0-9]*: shard\.idd: unknown key (did you mean id?)" "$tmp/badshard.log"
[ "$fail" -eq 0 ] || tail -n 5 "$tmp/badshard.log"

# 3. The driver's configuration with a typo (limt for limit).
sed 's/^  limit = 0;/  limt = 0;/' config/memif-driver.cfg >"$tmp/driver.cfg"
check "bad driver: the typo is in" grep -q '^  limt = 0;' "$tmp/driver.cfg"
demo "$tmp/baddrv.log" "$kept" KVSS_DEMO_DRIVER_CFG="$tmp/driver.cfg" KVSS_DEMO_TRACE=none
rc=$?
check "bad driver: exit 2 (got $rc)" test $rc -eq 2
check "bad driver: the FAIL line gives the cause" \
	grep -q "^demo: FAIL: .*: kvss: $tmp/driver.cfg:[0-9]*: wafer\.limt: unknown key" "$tmp/baddrv.log"
[ "$fail" -eq 0 ] || tail -n 5 "$tmp/baddrv.log"

# 3b. A trace that is a file but not a trace: the driver reads it before
#     any port starts (it read it after: its ports left started to EAL's
#     cleanup, the verdict said 'FAIL: ... Cannot close started device
#     (port 0)'). The cause is the trace's line (the key, the file, its
#     line).
printf 'root:x:0:0:root:/root:/bin/bash\n' >"$tmp/notatrace.jsonl"
demo "$tmp/badtrace.log" "$kept" KVSS_DEMO_TRACE="$tmp/notatrace.jsonl"
rc=$?
check "not a trace: exit 2 (got $rc)" test $rc -eq 2
check "not a trace: the FAIL line names the key, the file and its line" \
	grep -q "^demo: FAIL: .*: kvss: config/memif-driver.cfg: wafer\.trace: $tmp/notatrace.jsonl:1: " "$tmp/badtrace.log"
check "not a trace: nothing said of ports left started" \
	sh -c "! grep -q 'Cannot close started device' '$tmp/badtrace.log'"
[ "$fail" -eq 0 ] || tail -n 8 "$tmp/badtrace.log"

# 3c. A shard that stops after its port started: its second tier's
#     directory is writable by others. The FAIL line names shard.l2 and
#     why (it named 'port 0 (net_memif) started': a key with a digit was
#     passed over), and the shard stops and closes the port it started.
mkdir -p "$tmp/open"
chmod 0777 "$tmp/open"
demo "$tmp/openl2.log" KVSS_DEMO_L2_DIR="$tmp/open" KVSS_DEMO_TRACE=none
rc=$?
check "L2 dir writable by others: exit 1, a shard did not start (got $rc)" test $rc -eq 1
check "L2 dir writable by others: the FAIL line names shard.l2 and why" \
	grep -q "^demo: FAIL: shard 0 did not start: kvss: .*: shard\.l2: .*its directory $tmp/open is writable by others" "$tmp/openl2.log"
check "L2 dir writable by others: the shard closed the port it started" \
	sh -c "grep -q 'port 0 (net_memif) started' '$tmp/openl2.log' && ! grep -q 'Cannot close started device' '$tmp/openl2.log'"
[ "$fail" -eq 0 ] || tail -n 8 "$tmp/openl2.log"

# 4. A trace of this test's (Mooncake's format: 160 requests of 17 blocks
#    of 512 tokens, the first 3 shared by all: 1.4M tokens, more than the
#    demo's DRAM), named relative to the caller's directory, twice on one
#    second tier.
python3 - "$tmp/small.jsonl" <<'EOF'
import json, sys
with open(sys.argv[1], "w") as f:
    for i in range(160):
        ids = [1, 2, 3] + [100 * i + k for k in range(14)]
        f.write(json.dumps({"timestamp": 100 * i, "input_length": 512 * len(ids) - 100,
                            "output_length": 16, "hash_ids": ids}) + "\n")
EOF
for run in 1 2; do
	# Both paths relative to the caller's directory, as a user names them.
	(cd "$tmp" && env KVSS_DEMO_TAG="$tag" KVSS_DEMO_TRACE=small.jsonl KVSS_DEMO_L2_DIR=l2 \
		KVSS_DEMO_JSON=small$run.json timeout 300 "$OLDPWD/scripts/demo.sh" "$BUILD" \
		>"$tmp/small$run.log" 2>&1)
	rc=$?
	check "trace, run $run: PASS, exit 0 (got $rc)" \
		bash -c "[ $rc = 0 ] && grep -q '^demo: PASS: 160 requests' '$tmp/small$run.log'"
	check "trace, run $run: the driver replayed KVSS_DEMO_TRACE" \
		grep -q "driver: 160 requests from $tmp/small.jsonl;" "$tmp/small$run.log"
done
check "trace, run 1: the second tiers were empty, as the shards found them" \
	grep -q "^demo: hits by tier: .* second tiers empty at the start (0 columns kept)$" "$tmp/small1.log"
check "trace, run 2: warm, with the columns the shards found" \
	grep -q "^demo: hits by tier: .* second tiers warm: [1-9][0-9]* columns kept from an earlier run$" "$tmp/small2.log"
check "trace: KVSS_DEMO_L2_DIR=l2 is the caller's ($tmp/l2), not the checkout's" \
	sh -c "ls '$tmp/l2' | grep -q '\.l2\$' && [ ! -e l2 ]"
check "trace: KVSS_DEMO_JSON=small1.json is the caller's too" \
	python3 -c "import json; json.load(open('$tmp/small1.json'))"
grep "^demo: hits by tier" "$tmp/small1.log" "$tmp/small2.log"
[ "$fail" -eq 0 ] || tail -n 5 "$tmp/small1.log" "$tmp/small2.log"

# 4b. The verdict's rates (run 1): the throughput line says what bounds the
#     run, as the figures show it (the wafer emulator's lcore, the JSON's
#     control_lcore_busy, and the shards'); each shard's own rates, all
#     positive, are its bytes over its busy time by role as its final stats
#     give them (printed above the verdict, "demo: shard K: GROUP k=v ...");
#     and those bytes are the driver's: every byte evicted was stored, every
#     byte refilled was sent (a PASS run loses none).
verdict_rates() {
	python3 - "$1" <<'EOF'
import json, re, sys
log = open(sys.argv[1], errors="replace").read().splitlines()
j = json.loads([l for l in log if l.startswith("{")][-1])
st = {0: {}, 1: {}}
for l in log:
    m = re.match(r"demo: shard ([01]): [a-z]+ (.*)", l)
    if m:
        st[int(m.group(1))].update((a, int(b)) for a, b in re.findall(r"(\w+)=(\d+)", m.group(2)))
pct = {}
for l in log:
    m = re.match(r"demo:   shard ([01]): ingest ([0-9.]+) GB/s over ([0-9.]+) s busy, refill ([0-9.]+) GB/s "
                 r"over ([0-9.]+) s busy; its lcore ([0-9]+)% busy$", l)
    if not m:
        continue
    k, s = int(m.group(1)), st[int(m.group(1))]
    gi, ti, gr, tr, p = map(float, m.group(2, 3, 4, 5, 6))
    ing, ref, idle = s.get("ingest_busy_us", 0), s.get("refill_busy_us", 0), s.get("idle_us", 0)
    if min(gi, ti, gr, tr, p) <= 0 or not ing or not ref:
        sys.exit("shard %d: a rate or a busy time is not positive: %s" % (k, l))
    # Printed with three decimals: within one unit of the last (half a unit
    # and a float's error when the exact value ends in 5).
    if (abs(ti - ing / 1e6) > 1e-3 or abs(tr - ref / 1e6) > 1e-3
            or abs(gi - s.get("data_bytes", 0) / 1e3 / ing) > 1e-3
            or abs(gr - s.get("refill_bytes", 0) / 1e3 / ref) > 1e-3
            or abs(p - 100.0 * (ing + ref) / (ing + ref + idle)) > 0.5):
        sys.exit("shard %d: '%s' is not its final stats' %s" % (k, l, s))
    pct[k] = 100.0 * (ing + ref) / (ing + ref + idle)  # as the verdict weighs it, unrounded
if sorted(pct) != [0, 1]:
    sys.exit("the shards' rate lines: %s of 2" % sorted(pct))
for key, drv in (("data_bytes", "evict_bytes"), ("refill_bytes", "refill_bytes")):
    if st[0].get(key, 0) + st[1].get(key, 0) != j[drv]:
        sys.exit("the shards' %s %d + %d, the driver's %s %d"
                 % (key, st[0].get(key, 0), st[1].get(key, 0), drv, j[drv]))
d, top = j["control_lcore_busy"], max(pct.values())
b = [l for l in log if re.match(r"demo: [0-9.]+ s; evicted [0-9.]+ GB/s, refilled [0-9.]+ GB/s: bound by ", l)]
if not b or not 0 < d <= 1:
    sys.exit("no throughput line saying what bounds the run, or control_lcore_busy %s" % d)
want = "wafer" if d >= 0.9 and top < 50 else "shard" if top >= 90 else "none"
said = ("wafer" if "bound by the wafer emulator on one lcore" in b[0] else
        "shard" if "bound by shard " in b[0] else "none" if "bound by no lcore" in b[0] else "?")
if said != want:
    sys.exit("'%s' with the wafer emulator's lcore %.0f%% busy, the shards' at most %.0f%%"
             % (b[0], 100 * d, top))
EOF
}
check "trace, run 1: the verdict says what bounds the run, and each shard's own rates are its bytes over its busy time" \
	verdict_rates "$tmp/small1.log"
grep -E "^demo: [0-9.]+ s; evicted|^demo:   shard" "$tmp/small1.log"

# 5. Ctrl-C: SIGINT to the demo's process group while the driver replays
#    (the demo started as from a terminal: SIGINT not ignored, a group of its own).
env KVSS_DEMO_TAG="$tag" KVSS_DEMO_TRACE=none KVSS_DEMO_LIMIT=20000 python3 -c '
import os, signal, sys
signal.signal(signal.SIGINT, signal.SIG_DFL)
os.setsid()
os.execvp(sys.argv[1], sys.argv[1:])' scripts/demo.sh "$BUILD" >"$tmp/int.log" 2>&1 &
pid=$!
for _ in $(seq 1 300); do
	grep -q "every shard is up" "$tmp/int.log" 2>/dev/null && break
	sleep 0.1
done
sleep 2
kill -INT -- "-$pid"
# Its output elsewhere: a sleep left holding this script's stdout would keep
# whoever reads it (make check's tee) waiting for it.
(exec >/dev/null 2>&1; sleep 120 && kill -TERM -- "-$pid") &
watchdog=$!
wait "$pid"
rc=$?
pkill -P "$watchdog" sleep 2>/dev/null
kill "$watchdog" 2>/dev/null
check "SIGINT: exit 130 (got $rc)" test $rc -eq 130
check "SIGINT: the driver stopped early" grep -q "summary: (stopped early)" "$tmp/int.log"
check "SIGINT: the verdict says interrupted, after how many of the 20000 requests" \
	grep -q "^demo: STOPPED: interrupted (SIGINT) after [0-9]* of 20000 requests" "$tmp/int.log"
check "SIGINT: no PASS" bash -c "! grep -q '^demo: PASS' '$tmp/int.log'"
check "SIGINT: no comparison with DRAM alone over the whole input" bash -c "! grep -q 'same input' '$tmp/int.log'"
grep "^demo: STOPPED" "$tmp/int.log"
[ "$fail" -eq 0 ] || tail -n 8 "$tmp/int.log"
check "no file prefix left" bash -c "! ls -d /var/run/dpdk/kvss_demo_*_${tag} 2>/dev/null | grep -q ."

check_summary "test-demo"
