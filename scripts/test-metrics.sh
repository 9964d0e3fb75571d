#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# The Prometheus exporter (tools/kvss-exporter) against the real thing: one
# kvss process (role "all") runs 300 requests and lingers with its final
# figures; the exporter reads its telemetry socket; promtool (Debian's
# prometheus package) checks the exposition; a Prometheus server scrapes the
# exporter on loopback, and its HTTP API must give what telemetry says.
# Also: docs/metrics.md matches the mapping; a process that is gone is
# kvss_up 0. Only this test's own processes, ports and files. X=PATH tests
# another exporter.
set -u
BUILD=${1:-build}
cd "$(dirname "$0")/.."
. scripts/check-lib.sh
X=${X:-tools/kvss-exporter}
check "docs/metrics.md matches the exporter's mapping of docs/telemetry.md" \
	"$X" --doc --check docs/metrics.md
if ! /usr/bin/python3 -c "import prometheus_client" 2>/dev/null || ! command -v prometheus >/dev/null; then
	echo "metrics: skipped: python3-prometheus-client or prometheus missing (scripts/deps.sh)"
	check_summary "metrics"
	exit $?
fi
tmp=$(mktemp -d)
prefix=kvss_metrics_$$
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null; done
	wait 2>/dev/null
	rm -rf "$tmp" "/var/run/dpdk/$prefix"
}
trap cleanup EXIT
# A free loopback port (the kernel's pick).
port() { /usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

t_start=$(date +%s)
# It lingers until this test's SIGTERM (below), however long a busy machine
# makes the checks before it: ten minutes at most.
"$BUILD/kvss" --no-pci --no-huge -m 1024 --lcores "0@0,1@1" --log-level lib.eal:error \
	--file-prefix "$prefix" -- --config config/all-in-one.cfg --trace "" --limit 300 \
	--linger 600000 >"$tmp/kvss.log" 2>&1 &
kvss_pid=$!
pids+=($!)
for _ in $(seq 150); do
	grep -q "telemetry answers for" "$tmp/kvss.log" && break
	sleep 0.2
done
check "kvss ran its 300 requests and lingers" grep -q "telemetry answers for" "$tmp/kvss.log"

# Once, on stdout: promtool's own check of the exposition.
"$X" --prefix "$prefix" --once >"$tmp/once.txt" 2>"$tmp/once.err"
check "the exporter's exposition (--once)" test -s "$tmp/once.txt"
check "promtool check metrics passes on it" sh -c "promtool check metrics <'$tmp/once.txt' >'$tmp/promtool.log' 2>&1"
cat "$tmp/promtool.log" | head -5
check "kvss_up is 1" grep -q "^kvss_up{prefix=\"$prefix\"} 1.0" "$tmp/once.txt"
# Every kvss series is in docs/metrics.md, its HELP the meaning said there
# (not the bare telemetry key).
/usr/bin/python3 - "$tmp/once.txt" docs/metrics.md >"$tmp/help.txt" 2>&1 <<'PY'
import re, sys
doc = {}
for line in open(sys.argv[2]):
    m = re.match(r"\| `(\w+)` \| (\w+) \|[^|]*\|[^|]*\| (.*) \|$", line)
    if m:
        doc[m.group(1)] = m.group(3)
helps = {}
for line in open(sys.argv[1]):
    m = re.match(r"# HELP (kvss_\w+) (.*)$", line)
    if m:
        helps[m.group(1)] = m.group(2).replace("\\n", "\n").replace("\\\\", "\\")
bad = [f"{s}: HELP {h!r}, docs/metrics.md {doc.get(s)!r}" for s, h in sorted(helps.items())
       if doc.get(s) != h]
print(f"{len(helps) - len(bad)} of {len(helps)} kvss series have docs/metrics.md's meaning as HELP")
for b in bad[:5]:
    print("  " + b)
sys.exit(1 if bad or not helps else 0)
PY
rc=$?
check "every series' HELP is its meaning in docs/metrics.md ($(head -n 1 "$tmp/help.txt"))" test $rc -eq 0
sed -n '2,6p' "$tmp/help.txt"

ep=$(port)
"$X" --prefix "$prefix" --prefix "kvss_metrics_gone_$$" --listen "127.0.0.1:$ep" >"$tmp/exp.log" 2>&1 &
pids+=($!)
pp=$(port)
cat >"$tmp/prom.yml" <<YML
global:
  scrape_interval: 1s
scrape_configs:
  - job_name: kvss
    static_configs:
      - targets: ["127.0.0.1:$ep"]
YML
prometheus --config.file="$tmp/prom.yml" --storage.tsdb.path="$tmp/tsdb" \
	--web.listen-address="127.0.0.1:$pp" >"$tmp/prom.log" 2>&1 &
pids+=($!)
# query EXPR: the value Prometheus has for it (empty when none yet).
query() {
	/usr/bin/python3 - "$pp" "$1" <<'PY'
import json, sys, urllib.parse, urllib.request
url = f"http://127.0.0.1:{sys.argv[1]}/api/v1/query?" + urllib.parse.urlencode({"query": sys.argv[2]})
try:
    r = json.load(urllib.request.urlopen(url, timeout=5))["data"]["result"]
except Exception:
    r = []
print(r[0]["value"][1] if r else "")
PY
}
for _ in $(seq 100); do
	[ -n "$(query "kvss_driver_requests_total{prefix=\"$prefix\"}")" ] && break
	sleep 0.2
done
# tel ENDPOINT KEY: what the telemetry socket says.
tel() {
	echo "$1" | dpdk-telemetry.py -f "$prefix" 2>/dev/null | tail -n 1 |
		python3 -c "import json,sys; d=json.load(sys.stdin)['$1']; print(d$2)"
}
for pair in "kvss_driver_requests_total|/swdriver/stats|['requests']" \
	"kvss_driver_hit_tokens_total|/swdriver/stats|['hit_tokens']" \
	"kvss_shard_refills_total|/kvss/stats|['refills']" \
	"kvss_shard_batches_total|/kvss/stats|['batches']" \
	"kvss_shard_ingest_busy_seconds_total|/kvss/stats|['ingest_busy_us'] / 1e6" \
	"kvss_shard_refill_busy_seconds_total|/kvss/stats|['refill_busy_us'] / 1e6" \
	"kvss_shard_cache_stored_tokens{cache=\"0\"}|/kvss/caches|['stored_tokens'][0]"; do
	IFS='|' read -r series endpoint key <<<"$pair"
	sel=${series/\}/,prefix=\"$prefix\"\}}
	[ "$sel" = "$series" ] && sel="$series{prefix=\"$prefix\"}"
	got=$(query "$sel")
	want=$(tel "$endpoint" "$key")
	check "Prometheus has $series = telemetry's $endpoint $key ($got, $want)" \
		python3 -c "import sys; sys.exit(not (sys.argv[1] != '' and float(sys.argv[1]) == float(sys.argv[2])))" "$got" "$want"
done
/usr/bin/python3 - "$pp" "kvss_build_info{prefix=\"$prefix\"}" >"$tmp/build.txt" <<'PY'
import json, sys, urllib.parse, urllib.request
url = f"http://127.0.0.1:{sys.argv[1]}/api/v1/query?" + urllib.parse.urlencode({"query": sys.argv[2]})
r = json.load(urllib.request.urlopen(url, timeout=5))["data"]["result"]
m = r[0]["metric"] if r else {}
print(m.get("version"), m.get("commit"), m.get("dpdk", "").replace(" ", "_"), r[0]["value"][1] if r else None)
PY
read -r b_version b_commit b_dpdk b_value <"$tmp/build.txt"
want_release=$("$BUILD/kvss-trace" --version 2>/dev/null | awk '{print $2}')
# The commit: the one the binary was built with (make writes $BUILD/commit,
# but a partial build may have moved it on since), a commit of this checkout.
check "kvss_build_info 1: release $b_version = $want_release, commit $b_commit (in $BUILD/kvss, a commit here), $b_dpdk" \
	sh -c "[ '$b_value $b_version' = '1 $want_release' ] && [ '${b_dpdk#DPDK_}' != '$b_dpdk' ] &&
		grep -q -a -F '$b_commit' '$BUILD/kvss' &&
		{ [ '$b_commit' = unknown ] || git cat-file -e '$b_commit^{commit}'; }"
up_s=$(($(date +%s) - t_start + 1))
lc=$(query "kvss_lcore_busy_seconds_total{prefix=\"$prefix\",lcore=\"1\"} + kvss_lcore_idle_seconds_total{prefix=\"$prefix\",lcore=\"1\"}")
check "lcore time in seconds: the ingest lcore's busy + idle ($lc s) within the process's life ($up_s s)" \
	python3 -c "import sys; v=float(sys.argv[1] or -1); sys.exit(not (0.2 * $up_s < v <= $up_s))" "$lc"
# The shard's time by role splits its ingest lcore's busy time (the run is
# over: neither moves while it lingers), to the microsecond each is rounded to.
split=$(query "kvss_shard_ingest_busy_seconds_total{prefix=\"$prefix\"} + kvss_shard_refill_busy_seconds_total{prefix=\"$prefix\"}")
busy=$(query "kvss_lcore_busy_seconds_total{prefix=\"$prefix\",lcore=\"1\"}")
check "the shard's ingest + refill busy time ($split s) is its ingest lcore's busy time ($busy s), both there" \
	python3 -c "import sys; a, b = float(sys.argv[1] or -1), float(sys.argv[2] or -9); sys.exit(not (a > 0 and abs(a - b) <= 2e-6))" "$split" "$busy"
check "the requests were 300" test "$(query "kvss_driver_requests_total{prefix=\"$prefix\"}")" = 300
check "the driver's shared level: not configured here, not unavailable (/swdriver/shared)" \
	test "$(query "kvss_driver_shared_configured{prefix=\"$prefix\"}") $(query "kvss_driver_shared_unavailable{prefix=\"$prefix\"}")" = "0 0"
check "a process that is not there is kvss_up 0" \
	test "$(query "kvss_up{prefix=\"kvss_metrics_gone_$$\"}")" = 0
check "units in names: the fitted refill latency in seconds, below a second" \
	python3 -c "import sys; v=float(sys.argv[1] or -1); sys.exit(not (0 < v < 1))" \
	"$(query "kvss_driver_fit_latency_seconds{prefix=\"$prefix\"}")"
# 64-bit ids are JSON strings (jq and JavaScript read numbers as doubles,
# which round anything above 2^53): /swdriver/orgs' isolation_id.
echo /swdriver/orgs | dpdk-telemetry.py -f "$prefix" 2>/dev/null | tail -n 1 >"$tmp/orgs.json"
check "/swdriver/orgs: every isolation_id a decimal string ($(python3 -c "import json,sys; print(', '.join(repr(o['isolation_id']) for o in json.load(open(sys.argv[1]))['/swdriver/orgs'].values()))" "$tmp/orgs.json" 2>&1 | cut -c1-80))" \
	python3 -c "import json,sys; d=json.load(open(sys.argv[1]))['/swdriver/orgs']; sys.exit(0 if d and all(isinstance(o['isolation_id'], str) and o['isolation_id'].isdigit() and int(o['isolation_id']) < 2**64 for o in d.values()) else 1)" "$tmp/orgs.json"

# The endpoints the monitoring kit added answer exactly the keys
# docs/telemetry.md lists (test-e2e checks the others).
for endpoint in /kvss/build /kvss/lcores /swdriver/refill_latency /swdriver/ttft /swdriver/shared; do
	echo "$endpoint" | dpdk-telemetry.py -f "$prefix" 2>/dev/null | tail -n 1 >"$tmp/ep.json"
	scripts/telemetry-doc.py --keys "$endpoint" >"$tmp/ep.keys"
	check "telemetry: $endpoint answers exactly the keys docs/telemetry.md lists ($(tr '\n' ' ' <"$tmp/ep.keys" | cut -c1-60))" \
		python3 -c 'import json,sys; d=json.load(open(sys.argv[1]))[sys.argv[3]]
sys.exit(0 if d and set(d) == set(open(sys.argv[2]).read().split()) else 1)' "$tmp/ep.json" "$tmp/ep.keys" "$endpoint"
done

# 30 scrapes at once (Prometheus, dashboards, a colleague's curl): each
# says the process is up, and the operator's dpdk-telemetry.py is answered
# meanwhile (DPDK's telemetry takes 10 connections; the exporter holds one).
/usr/bin/python3 - "$ep" "$prefix" >"$tmp/conc.txt" 2>&1 <<'PY' &
import sys, threading, urllib.request
port, prefix = sys.argv[1], sys.argv[2]
ups = []
def scrape():
    try:
        body = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=20).read().decode()
        ups.append(f'kvss_up{{prefix="{prefix}"}} 1.0' in body)
    except Exception:
        ups.append(False)
threads = [threading.Thread(target=scrape) for _ in range(30)]
for t in threads:
    t.start()
for t in threads:
    t.join()
print("up in", sum(ups), "of", len(ups))
PY
conc=$!
echo /swdriver/stats | timeout 20 dpdk-telemetry.py -f "$prefix" >"$tmp/operator.txt" 2>&1
wait "$conc"
check "30 concurrent scrapes: the process is up in each ($(cat "$tmp/conc.txt"))" \
	grep -q '^up in 30 of 30$' "$tmp/conc.txt"
check "30 concurrent scrapes: the operator's dpdk-telemetry.py is answered meanwhile" \
	grep -q '"requests": 300' "$tmp/operator.txt"

# The refill-latency histogram against the run's own summary (SIGTERM ends
# the linger; the summary's JSON line follows): every timed sequence
# counted, and the summary's p50 and p99 in the buckets the histogram puts
# them in.
hcount=$(query "kvss_driver_refill_latency_seconds_count{prefix=\"$prefix\"}")
tcount=$(query "kvss_driver_ttft_seconds_count{prefix=\"$prefix\"}")
kill -TERM "$kvss_pid" 2>/dev/null
for _ in $(seq 100); do
	grep -q '^{"requests"' "$tmp/kvss.log" && break
	sleep 0.1
done
grep '^{"requests"' "$tmp/kvss.log" | tail -n 1 >"$tmp/summary.json"
/usr/bin/python3 - "$tmp/once.txt" "$tmp/summary.json" "$prefix" >"$tmp/hist.txt" 2>&1 <<'PY'
import json, re, sys
summary = json.load(open(sys.argv[2]))
buckets = []
for line in open(sys.argv[1]):
    m = re.match(r'kvss_driver_refill_latency_seconds_bucket\{le="([^"]+)",prefix="%s"\} (\S+)' % sys.argv[3], line)
    if m:
        buckets.append((float(m.group(1)), float(m.group(2))))
n = buckets[-1][1] if buckets else 0
def bucket_of(q):
    """The histogram's bound for quantile q: the least le holding q of the refills."""
    return next(le for le, c in buckets if c >= q * n)
ok = n > 0 and n == summary["refills_timed"]
for q, key in ((0.5, "refill_p50_us"), (0.99, "refill_p99_us")):
    v = summary[key] / 1e6
    hi = bucket_of(q)
    lo = max([le for le, _ in buckets if le < hi], default=0)
    # The summary's times are whole microseconds, cut down (a refill of
    # 2000.4 us says 2000 and is counted above le 0.002): the time it
    # stands for is in [v, v + 1 us), which must meet (lo, hi].
    inb = lo < v + 1e-6 and v <= hi
    print(f"{key} {summary[key]} us in ({lo * 1e6:g}, {hi * 1e6:g}] us: {inb}")
    ok = ok and inb
print(f"count {n:g}, the summary's refills_timed {summary['refills_timed']}")
sys.exit(0 if ok else 1)
PY
rc=$?
check "refill latency histogram: Prometheus' count ($hcount) = the summary's refills_timed, p50 and p99 in their buckets ($(tr '\n' ';' <"$tmp/hist.txt" | cut -c1-200))" \
	sh -c "[ $rc -eq 0 ] && [ '$hcount' = \"\$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))[\"refills_timed\"])' '$tmp/summary.json')\" ]"
# The time-to-first-token histogram the same way: every request counted,
# and the summary's p50 and p99 (lib/percentile: the value of rank
# floor(n p) + 1) in the buckets that hold those ranks.
/usr/bin/python3 - "$tmp/once.txt" "$tmp/summary.json" "$prefix" >"$tmp/thist.txt" 2>&1 <<'PY'
import json, re, sys
summary = json.load(open(sys.argv[2]))
buckets = []
for line in open(sys.argv[1]):
    m = re.match(r'kvss_driver_ttft_seconds_bucket\{le="([^"]+)",prefix="%s"\} (\S+)' % sys.argv[3], line)
    if m:
        buckets.append((float(m.group(1)), float(m.group(2))))
n = buckets[-1][1] if buckets else 0
ok = n > 0 and n == summary["first_tokens"]
for p, key in ((50, "ttft_p50_ms"), (99, "ttft_p99_ms")):
    rank = min(int(n * p // 100) + 1, n)
    hi = next(le for le, c in buckets if c >= rank)
    lo = max([le for le, _ in buckets if le < hi], default=0)
    v = summary[key] / 1e3
    inb = lo < v + 1e-6 and v <= hi
    print(f"{key} {summary[key]} ms in ({lo * 1e3:g}, {hi * 1e3:g}] ms: {inb}")
    ok = ok and inb
print(f"count {n:g}, the summary's first_tokens {summary['first_tokens']}")
sys.exit(0 if ok else 1)
PY
rc=$?
check "TTFT histogram: Prometheus' count ($tcount) = the summary's first_tokens, p50 and p99 in their buckets ($(tr '\n' ';' <"$tmp/thist.txt" | cut -c1-200))" \
	sh -c "[ $rc -eq 0 ] && [ '$tcount' = \"\$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))[\"first_tokens\"])' '$tmp/summary.json')\" ]"
check_summary "metrics"
