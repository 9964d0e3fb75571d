#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# The monitoring kit (tools/monitoring, docs/monitoring.md) against the real
# thing. promtool checks the example prometheus.yml and the alerting rules,
# runs the rules' unit tests (kvss-alerts.test.yml), and those tests must
# fail when a rule is broken on purpose. Every series the rules and the
# Grafana dashboard name is one docs/metrics.md lists. Then one kvss process
# (role "all", its misses costing the emulated wafer time so that the run
# lasts ~8 s) is scraped by tools/kvss-exporter every second through a real
# Prometheus on loopback configured from the example (its rules loaded):
# each of the dashboard's queries, its variables substituted, must parse and
# return a result, the dashboard's variable must list the process, every
# rule must load healthy, and on this healthy run the rules that mean
# something is wrong must stay quiet. Only this test's own processes, ports
# and files.
set -u
BUILD=${1:-build}
cd "$(dirname "$0")/.."
. scripts/check-lib.sh
M=tools/monitoring
X=${X:-tools/kvss-exporter}
PY=/usr/bin/python3
if ! command -v promtool >/dev/null || ! command -v prometheus >/dev/null ||
	! $PY -c "import prometheus_client, yaml" 2>/dev/null; then
	echo "monitoring: skipped: prometheus, python3-prometheus-client or python3-yaml missing (scripts/deps.sh)"
	check_summary "monitoring"
	exit $?
fi
tmp=$(mktemp -d)
prefix=kvss_monitoring_$$
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null; done
	wait 2>/dev/null
	rm -rf "$tmp" "/var/run/dpdk/$prefix"
}
trap cleanup EXIT
port() { $PY -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# ---- The files alone ----------------------------------------------------------
check "promtool check config: the example prometheus.yml and its rules" \
	sh -c "promtool check config '$M/prometheus.yml' >'$tmp/config.log' 2>&1"
sed 's/^/  /' "$tmp/config.log" | grep -i -E 'success|error|fail'
promtool test rules "$M/kvss-alerts.test.yml" >"$tmp/rules.log" 2>&1
rc=$?
check "promtool test rules kvss-alerts.test.yml" test $rc -eq 0
sed 's/^/  /' "$tmp/rules.log"

# The rules' tests must catch a broken rule: each mutant of kvss-alerts.yml
# (sed expression, what it breaks) must fail them.
mutant() {
	mkdir -p "$tmp/mutant"
	cp "$M/kvss-alerts.test.yml" "$tmp/mutant/"
	sed "$1" "$M/kvss-alerts.yml" >"$tmp/mutant/kvss-alerts.yml"
	if cmp -s "$M/kvss-alerts.yml" "$tmp/mutant/kvss-alerts.yml"; then
		echo "  mutant '$2' changed nothing" >&2
		return 1
	fi
	! promtool test rules "$tmp/mutant/kvss-alerts.test.yml" >/dev/null 2>&1
}
check "the rules' tests fail when the shared level's rule forgets the driver's SHARED_* errors" \
	mutant '/or increase(kvss_driver_errors_received_total/d' "shared level, driver side"
check "the rules' tests fail when the shared level's rule forgets a driver that gave up on it" \
	mutant '/or kvss_driver_shared_unavailable == 1/d' "shared level unavailable"
check "the rules' tests fail when KvssShardDown forgets silent shards" \
	mutant 's/ or kvss_driver_shard_heard_seconds_ago > 10//' "silent shards"
check "the rules' tests fail when KvssRefillTimeouts pages on a blip (no 'for')" \
	mutant '/alert: KvssRefillTimeouts/,/severity/{/for: 5m/d}' "refill timeouts for"
check "the rules' tests fail when KvssProcessDown fires at once" \
	mutant '/alert: KvssProcessDown/,/severity/{/for: 1m/d}' "process down for"

# Every series named in the rules and the dashboard is one the exporter gives.
$PY - "$M/kvss-alerts.yml" "$M/kvss-dashboard.json" docs/metrics.md >"$tmp/names.txt" 2>&1 <<'PY'
import json, re, sys, yaml
documented = set()
for line in open(sys.argv[3]):
    m = re.match(r"\| `(kvss_\w+)` \| (\w+) ", line)
    if m:
        documented.add(m.group(1))
        if m.group(2) == "histogram":
            documented |= {m.group(1) + s for s in ("_bucket", "_sum", "_count")}
exprs = [r["expr"] for g in yaml.safe_load(open(sys.argv[1]))["groups"] for r in g["rules"]]
def targets(panels):
    for p in panels:
        yield from (t["expr"] for t in p.get("targets", []))
        yield from targets(p.get("panels", []))
exprs += list(targets(json.load(open(sys.argv[2]))["panels"]))
names = {n for e in exprs for n in re.findall(r"\bkvss_\w+", e)}
missing = sorted(names - documented)
print(f"{len(names)} series named, {len(missing)} not in docs/metrics.md {missing}")
sys.exit(1 if missing or not names else 0)
PY
rc=$?
check "every series the rules and the dashboard name is in docs/metrics.md ($(cat "$tmp/names.txt"))" test $rc -eq 0
sed 's/^/  /' "$tmp/names.txt"

# ---- Live: kvss, the exporter, Prometheus --------------------------------------
# Misses cost the wafer 20 us a token: 300 requests take ~8 s, long enough
# for several scrapes of a run under way.
sed 's/^  policy = "lru";$/&\n  recompute_tokens_per_s = 50000;/' config/all-in-one.cfg >"$tmp/kvss.cfg"
check "the run's configuration slows the wafer's misses" grep -q recompute_tokens_per_s "$tmp/kvss.cfg"
ep=$(port)
"$X" --prefix "$prefix" --listen "127.0.0.1:$ep" >"$tmp/exp.log" 2>&1 &
pids+=($!)
# The example configuration, pointed at this exporter, every second.
pp=$(port)
sed -e "s/127\.0\.0\.1:9479/127.0.0.1:$ep/" -e 's/^  scrape_interval: 15s$/  scrape_interval: 1s/' \
	-e 's/^  evaluation_interval: 15s$/  evaluation_interval: 1s/' -e 's/^  scrape_timeout: 10s$/  scrape_timeout: 1s/' \
	-e "s|^  - kvss-alerts.yml$|  - $PWD/$M/kvss-alerts.yml|" "$M/prometheus.yml" >"$tmp/prometheus.yml"
check "the live configuration is the example's, pointed here (target, 1 s, the rules)" \
	sh -c "grep -q '127.0.0.1:$ep' '$tmp/prometheus.yml' && grep -q 'scrape_interval: 1s' '$tmp/prometheus.yml' && grep -q '$PWD/$M/kvss-alerts.yml' '$tmp/prometheus.yml'"
prometheus --config.file="$tmp/prometheus.yml" --storage.tsdb.path="$tmp/tsdb" \
	--web.listen-address="127.0.0.1:$pp" >"$tmp/prom.log" 2>&1 &
pids+=($!)
"$BUILD/kvss" --no-pci --no-huge -m 1024 --lcores "0@0,1@1" --log-level lib.eal:error \
	--file-prefix "$prefix" -- --config "$tmp/kvss.cfg" --trace "" --limit 300 \
	--linger 60000 >"$tmp/kvss.log" 2>&1 &
pids+=($!)
for _ in $(seq 300); do
	grep -q "telemetry answers for" "$tmp/kvss.log" && break
	sleep 0.1
done
check "kvss ran its 300 requests and lingers" grep -q "telemetry answers for" "$tmp/kvss.log"
# api PATH [QUERY]: Prometheus' JSON answer (a query: instant, now).
api() {
	$PY - "$pp" "$@" <<'PY'
import json, sys, urllib.parse, urllib.request
port, path = sys.argv[1], sys.argv[2]
url = f"http://127.0.0.1:{port}{path}"
if len(sys.argv) > 3:
    url += "?" + urllib.parse.urlencode({"query": sys.argv[3]})
try:
    print(urllib.request.urlopen(url, timeout=5).read().decode())
except urllib.error.HTTPError as e:
    print(e.read().decode())
except Exception as e:
    print(json.dumps({"status": "error", "error": str(e)}))
PY
}
# Two scrapes of the final figures after the run, so every rate has its end.
for _ in $(seq 50); do
	n=$(api /api/v1/query "count_over_time(kvss_up{prefix=\"$prefix\"}[1m])" |
		$PY -c 'import json,sys; r=json.load(sys.stdin)["data"]["result"]; print(r[0]["value"][1] if r else 0)' 2>/dev/null)
	[ "${n:-0}" -ge 12 ] && break
	sleep 0.5
done
check "Prometheus scraped the run under way ($n scrapes in the last minute)" test "${n:-0}" -ge 12

# The dashboard's variable lists the process.
api "/api/v1/label/prefix/values?match%5B%5D=kvss_up" >"$tmp/labels.json"
check "the dashboard's variable (label_values(kvss_up, prefix)) lists $prefix" \
	$PY -c "import json,sys; sys.exit(0 if '$prefix' in json.load(open(sys.argv[1]))['data'] else 1)" "$tmp/labels.json"

# Each of the dashboard's queries, as Grafana would send it for this process.
$PY - "$M/kvss-dashboard.json" "$pp" "$prefix" >"$tmp/dash.txt" 2>&1 <<'PY'
import json, math, sys, urllib.parse, urllib.request
dash, port, prefix = json.load(open(sys.argv[1])), sys.argv[2], sys.argv[3]
def targets(panels):
    for p in panels:
        for t in p.get("targets", []):
            yield p["title"], t["expr"]
        yield from targets(p.get("panels", []))
bad, n, nan = [], 0, 0
for title, expr in targets(dash["panels"]):
    q = expr.replace("$__rate_interval", "1m").replace("$prefix", prefix)
    n += 1
    if "$" in q:
        bad.append(f"{title}: a variable left in {q}")
        continue
    url = f"http://127.0.0.1:{port}/api/v1/query?" + urllib.parse.urlencode({"query": q})
    try:
        r = json.load(urllib.request.urlopen(url, timeout=5))
    except urllib.error.HTTPError as e:
        r = json.loads(e.read().decode())
    if r.get("status") != "success":
        bad.append(f"{title}: {q}: {r.get('error')}")
        continue
    res = r["data"]["result"]
    if not res:
        bad.append(f"{title}: {q}: no result")
        continue
    nan += sum(1 for s in res if math.isnan(float(s["value"][1])))
    print(f"ok {title}: {q} = {', '.join(s['value'][1][:8] for s in res[:3])}")
for b in bad:
    print("BAD " + b)
print(f"{n - len(bad)} of {n} dashboard queries parse and return a result ({nan} NaN values)")
sys.exit(1 if bad or n == 0 else 0)
PY
rc=$?
check "every dashboard query parses and returns a result ($(tail -n 1 "$tmp/dash.txt"))" test $rc -eq 0
grep -E '^(ok Refill latency|ok Hit ratio|ok Lcore busy|BAD)' "$tmp/dash.txt" | cut -c1-200 | sed 's/^/  /'
tail -n 1 "$tmp/dash.txt" | sed 's/^/  /'

# The rules as Prometheus loaded them, and what they say of a healthy run.
api /api/v1/rules >"$tmp/rules.json"
$PY - "$tmp/rules.json" "$prefix" >"$tmp/rulestate.txt" 2>&1 <<'PY'
import json, sys
rules = [r for g in json.load(open(sys.argv[1]))["data"]["groups"] for r in g["rules"]]
unhealthy = [r["name"] for r in rules if r.get("health") != "ok"]
firing = {r["name"]: [a["labels"].get("prefix") for a in r.get("alerts", [])] for r in rules}
print(f"{len(rules)} rules loaded, {len(unhealthy)} unhealthy {unhealthy}; active: "
      + (", ".join(f"{k} {v}" for k, v in firing.items() if v) or "none"))
wrong = [k for k in ("KvssVerifyFailures", "KvssOverCapacity", "KvssShardDown", "KvssProcessDown")
         if sys.argv[2] in firing.get(k, [])]
sys.exit(1 if len(rules) < 7 or unhealthy or wrong else 0)
PY
rc=$?
check "the live Prometheus loaded every rule healthy, and none that means a wrong byte, a lost shard or process, or a cache over capacity is active on this run ($(cat "$tmp/rulestate.txt"))" test $rc -eq 0
sed 's/^/  /' "$tmp/rulestate.txt"
check_summary "monitoring"
