#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# The Prometheus exporter (tools/kvss-exporter) against stand-in telemetry
# sockets (scripts/fake-telemetry.py: DPDK 22.11's protocol and its limit of
# 10 connections, or a socket that never answers), so that hung and busy
# processes are exactly what the test says: hung processes are asked at
# once, each within --timeout; 30 concurrent scrapes share collections and
# hold one connection to a process, leaving room for the operator's own
# dpdk-telemetry.py; and its command line (--version, --listen) says what is
# wrong without a traceback. scripts/test-metrics.sh runs it against a real
# kvss process and a real Prometheus. X=PATH tests another exporter.
set -u
BUILD=${1:-build}
cd "$(dirname "$0")/.."
. scripts/check-lib.sh
X=${X:-tools/kvss-exporter}
PY=/usr/bin/python3
if ! $PY -c "import prometheus_client" 2>/dev/null; then
	echo "exporter: skipped: python3-prometheus-client missing (scripts/deps.sh)"
	check_summary "exporter"
	exit $?
fi
tmp=$(mktemp -d)
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null; done
	wait 2>/dev/null
	rm -rf "$tmp"
}
trap cleanup EXIT
port() { $PY -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
export RUNTIME_DIRECTORY=$tmp/run

# --version and --listen: one line, exit 0 or 2, never a traceback.
timeout 10 "$X" --version >"$tmp/v" 2>&1
check "--version: exit 0" test $? -eq 0
want="kvss-exporter $("$BUILD/kvss-trace" --version 2>/dev/null | awk '{print $2}')"
check "--version says the release every tool says ($want)" test "$(cat "$tmp/v")" = "$want"
for bad in 127.0.0.1:99999 127.0.0.1:0 127.0.0.1: 127.0.0.1:http ::1:9479 9479; do
	timeout 10 "$X" --prefix p --listen "$bad" >"$tmp/l" 2>&1
	rc=$?
	check "--listen $bad: exit 2, naming the form, no traceback" \
		sh -c "[ $rc -eq 2 ] && grep -q -- \"--listen: '$bad'\" '$tmp/l' && ! grep -q Traceback '$tmp/l'"
done
sed -n '$p' "$tmp/l" | sed 's/^/  /'
# A port left out says so (not "an IPv6 address goes in brackets").
for bad in '[::1]' '[::1]:' 127.0.0.1 127.0.0.1: localhost; do
	timeout 10 "$X" --prefix p --listen "$bad" >"$tmp/l" 2>&1
	rc=$?
	check "--listen $bad: exit 2, the port is missing, one line" \
		sh -c "[ $rc -eq 2 ] && grep -qF -- \"--listen: '$bad': the port is missing\" '$tmp/l' && [ \$(wc -l <'$tmp/l') -eq 1 ]"
done
sed -n 1p "$tmp/l" | sed 's/^/  /'
timeout 10 "$X" --prefix p --listen ::1 >"$tmp/l" 2>&1
check "--listen ::1: exit 2, the address in brackets with a port" \
	sh -c "[ $? -eq 2 ] && grep -q -- 'in brackets: \[::1\]:9479' '$tmp/l'"
# Every argument error: one line (no usage block), exit 2.
for args in "--bogus" "--timeout 0" "--listen" "" "--prefix p --listen 9479"; do
	timeout 10 "$X" $args >"$tmp/l" 2>&1
	rc=$?
	check "'kvss-exporter $args': exit 2, one line" \
		sh -c "[ $rc -eq 2 ] && [ \$(wc -l <'$tmp/l') -eq 1 ] && grep -q '^kvss-exporter: ' '$tmp/l' && ! grep -q '^usage:' '$tmp/l'"
done
# stdout that cannot be written: one line naming it, exit 1, no traceback.
for args in "--prefix nobody --once" "--version" "--help" "--doc"; do
	timeout 10 "$X" $args >/dev/full 2>"$tmp/l"
	rc=$?
	check "'kvss-exporter $args' >/dev/full: exit 1, 'stdout: No space left on device', one line" \
		sh -c "[ $rc -eq 1 ] && [ \"\$(cat '$tmp/l')\" = 'kvss-exporter: stdout: No space left on device' ]"
done

mkdir -p "$RUNTIME_DIRECTORY"
$PY scripts/fake-telemetry.py "$RUNTIME_DIRECTORY" "$tmp/stats.json" --live live --driver drv --hung hung1 \
	--hung hung2 --hung hung3 --delay 0.05 >"$tmp/fake.log" 2>&1 &
pids+=($!)
for _ in $(seq 100); do
	grep -q ready "$tmp/fake.log" && break
	sleep 0.05
done
check "the stand-in sockets are up" grep -q ready "$tmp/fake.log"

# Three hung processes and a live one: one scrape, all at once, within the
# default 2 s deadline (Prometheus gives a scrape 10 s by default).
t0=$(date +%s.%N)
timeout 60 "$X" --prefix hung1 --prefix live --prefix hung2 --prefix hung3 --once \
	>"$tmp/once.txt" 2>"$tmp/once.err"
rc=$?
t1=$(date +%s.%N)
secs=$($PY -c "print(round($t1 - $t0, 1))")
echo "exporter: three hung processes and a live one: one scrape in $secs s (the default --timeout, 2 s)"
check "hung processes: the scrape exits 0" test $rc -eq 0
check "hung processes: the scrape takes under 4 s, not 5 s a process in turn ($secs s)" \
	holds "$secs < 4"
check "hung processes: the live one is up, with its figures" \
	sh -c "grep -q '^kvss_up{prefix=\"live\"} 1.0' '$tmp/once.txt' && grep -q '^kvss_driver_requests_total{prefix=\"live\"} 300.0' '$tmp/once.txt'"
check "hung processes: each is kvss_up 0" \
	test "$(grep -c '^kvss_up{prefix="hung[123]"} 0.0' "$tmp/once.txt")" = 3

# A driver process (no shard: /kvss/caches lists no cache): its driver
# series, no shard series of zeros.
timeout 60 "$X" --prefix drv --prefix live --once >"$tmp/drv.txt" 2>&1
check "a driver process: up, with its driver series" \
	sh -c "grep -q '^kvss_up{prefix=\"drv\"} 1.0' '$tmp/drv.txt' && grep -q '^kvss_driver_requests_total{prefix=\"drv\"} 40.0' '$tmp/drv.txt'"
check "a driver process: no kvss_shard_* series" sh -c "! grep '^kvss_shard_' '$tmp/drv.txt' | grep -q 'prefix=\"drv\"'"
check "beside it, a process with shard series keeps them" \
	grep -q '^kvss_shard_refills_total{prefix="live"} 7.0' "$tmp/drv.txt"
grep 'prefix="drv"' "$tmp/drv.txt" | sed 's/^/  /'

# 30 concurrent scrapes of one exporter: each says the live process is up;
# it never had more than one connection from the exporter, none refused;
# and the operator's own connection, opened meanwhile, is greeted.
ep=$(port)
"$X" --prefix live --listen "127.0.0.1:$ep" >"$tmp/exp.log" 2>&1 &
pids+=($!)
for _ in $(seq 100); do
	grep -q serving "$tmp/exp.log" && break
	sleep 0.05
done
$PY - "$ep" "$RUNTIME_DIRECTORY/live/dpdk_telemetry.v2" >"$tmp/conc.txt" 2>&1 <<'PY'
import socket, sys, threading, urllib.request
port, path = sys.argv[1], sys.argv[2]
ups, errors = [], []
def scrape():
    try:
        body = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=20).read().decode()
        ups.extend(l for l in body.splitlines() if l.startswith('kvss_up{prefix="live"}'))
    except Exception as e:
        errors.append(repr(e))
threads = [threading.Thread(target=scrape) for _ in range(30)]
for t in threads:
    t.start()
# The operator's dpdk-telemetry.py, meanwhile: greeted, not closed.
s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
s.settimeout(5)
s.connect(path)
greeting = s.recv(1024)
s.close()
for t in threads:
    t.join()
print("scrapes", len(ups), "up", sum(l.endswith(" 1.0") for l in ups), "errors", len(errors))
print("operator", "greeted" if greeting else "refused")
PY
cat "$tmp/conc.txt" | sed 's/^/  /'
check "30 concurrent scrapes: every one says the live process is up" \
	grep -q '^scrapes 30 up 30 errors 0$' "$tmp/conc.txt"
check "30 concurrent scrapes: the operator's own connection is greeted meanwhile" \
	grep -q '^operator greeted$' "$tmp/conc.txt"
stat() { $PY -c "import json,sys; print(json.load(open('$tmp/stats.json'))['live']['$1'])"; }
echo "exporter: the live process: at most $(stat max_active) connections at once, $(stat accepted) accepted, $(stat refused) refused"
check "30 concurrent scrapes: never two connections to the process from the exporter (and the operator's)" \
	holds "$(stat max_active) <= 2"
check "30 concurrent scrapes: none refused" test "$(stat refused)" = 0
check "30 concurrent scrapes: served from fewer collections than scrapes" \
	holds "$(stat accepted) < 30"

# [::1]:PORT, where the host has IPv6 loopback.
if $PY -c 'import socket; socket.socket(socket.AF_INET6).bind(("::1", 0))' 2>/dev/null; then
	p6=$(port)
	"$X" --prefix live --listen "[::1]:$p6" >"$tmp/exp6.log" 2>&1 &
	pids+=($!)
	for _ in $(seq 100); do
		grep -q serving "$tmp/exp6.log" && break
		sleep 0.05
	done
	check "--listen [::1]:PORT serves /metrics over IPv6" \
		sh -c "$PY -c \"import urllib.request; print(urllib.request.urlopen('http://[::1]:$p6/metrics', timeout=10).read().decode())\" 2>/dev/null | grep -q '^kvss_up{prefix=\"live\"} 1.0'"
	sed -n 1p "$tmp/exp6.log" | sed 's/^/  /'
else
	echo "exporter: [::1] not tested: no IPv6 loopback here"
fi
check_summary "exporter"
