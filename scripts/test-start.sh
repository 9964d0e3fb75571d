#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# What kvss says when it cannot start, or must wait: each message names the
# cause and the fix in its own words, once. Two processes with one
# --file-prefix; no hugepages; --plot-refills into a directory that is not
# there; a driver on memif started before its shards (it waits for them:
# one line of its own, not memif_connect_client() ten times a second).
# Only this test's own processes, prefixes and files.
set -u
BUILD=${1:-build}
cd "$(dirname "$0")/.."
. scripts/check-lib.sh
. scripts/procs-lib.sh
K=$BUILD/kvss
tmp=$(mktemp -d)
pids=()
base=kvss_start_$$
prefixes=("${base}_a" "${base}_s0" "${base}_s1" "${base}_d" "${base}_nohuge" "${base}_plot")
cleanup() {
	procs_stop TERM
	rm -rf "$tmp"
}
trap cleanup EXIT
EAL=(--no-pci --no-huge -m 512 --log-level lib.eal:error)

# Two processes, one --file-prefix: the second says whose it is (EAL left
# rte_errno 0: it printed "EAL init failed: Success").
"$K" "${EAL[@]}" --lcores 0@0,1@1 --file-prefix "${base}_a" -- --config config/all-in-one.cfg \
	--trace "" --limit 50 --linger 60000 >"$tmp/first.log" 2>&1 &
pids+=($!)
first=$!
for _ in $(seq 150); do
	grep -q "telemetry answers for" "$tmp/first.log" && break
	sleep 0.2
done
check "the first process is up" grep -q "telemetry answers for" "$tmp/first.log"
timeout 60 "$K" "${EAL[@]}" --lcores 0@0,1@1 --file-prefix "${base}_a" -- \
	--config config/all-in-one.cfg --trace "" --limit 10 >"$tmp/second.log" 2>&1
rc=$?
grep '^kvss:' "$tmp/second.log" | sed 's/^/  /'
check "one --file-prefix twice: exit 1, naming the other process and the fix" \
	sh -c "[ $rc -eq 1 ] && grep -q '^kvss: EAL init failed: another process (pid $first) runs with --file-prefix ${base}_a; give every kvss process its own --file-prefix$' '$tmp/second.log'"
check "one --file-prefix twice: never 'Success'" sh -c "! grep -q 'Success' '$tmp/second.log'"
check "one --file-prefix twice: the first process's runtime directory is left alone" \
	test -e "/var/run/dpdk/${base}_a/config"

# No hugepages it can use (here: a --huge-dir that is no hugetlbfs, so the
# test holds on a machine with hugepages too): it said "Permission denied".
mkdir "$tmp/nohuge"
timeout 60 "$K" --no-pci -m 64 --log-level lib.eal:error --huge-dir "$tmp/nohuge" \
	--file-prefix "${base}_nohuge" -- --config config/all-in-one.cfg >"$tmp/nohuge.log" 2>&1
rc=$?
grep '^kvss:' "$tmp/nohuge.log" | sed 's/^/  /'
check "no hugepages: exit 1, suggesting --no-huge (and how to reserve some)" \
	sh -c "[ $rc -eq 1 ] && grep -q '^kvss: EAL init failed: no hugepages .*dpdk-hugepages.py --setup .* or run with --no-huge' '$tmp/nohuge.log'"

# --plot-refills into a directory that is not there: refused at once.
timeout 60 "$K" "${EAL[@]}" --lcores 0@0,1@1 --file-prefix "${base}_plot" -- \
	--config config/all-in-one.cfg --trace "" --limit 10 --plot-refills /nonexistent/r.png \
	>"$tmp/plot.log" 2>&1
rc=$?
check "--plot-refills /nonexistent/r.png: exit 2 before the run, naming the directory" \
	sh -c "[ $rc -eq 2 ] && grep -q '^kvss: --plot-refills /nonexistent/r.png: the directory /nonexistent does not exist' '$tmp/plot.log' && ! grep -q 'final stats' '$tmp/plot.log'"

# --plot-refills into a file that cannot be written (a full disk): the run
# goes on, the line says why, exit 2 (a file the command line asked for).
if command -v gnuplot >/dev/null; then
	timeout 120 "$K" "${EAL[@]}" --lcores 0@0,1@1 --file-prefix "${base}_full" -- \
		--config config/all-in-one.cfg --trace "" --limit 10 --plot-refills /dev/full \
		>"$tmp/full.log" 2>&1
	rc=$?
	check "--plot-refills /dev/full: exit 2 after the run, saying why (got $rc)" \
		sh -c "[ $rc -eq 2 ] && grep -q '^kvss: --plot-refills /dev/full: ' '$tmp/full.log' && grep -q '\"exit_status\":2' '$tmp/full.log'"
else
	echo "--plot-refills /dev/full not tested: no gnuplot (scripts/deps.sh installs gnuplot-nox)"
fi

# --ttft-out (each request's time to first token, a CSV at the end) and
# --plot-refills: a path that cannot be written is refused before the run
# (a directory not there, a directory, a FIFO: which would have held the
# program at its end for ever, waiting for a reader); one that fails at the
# end (a full disk) is said, exit 2; a shard refuses the option.
mkfifo "$tmp/fifo"
touch "$tmp/target"
ln -s "$tmp/target" "$tmp/link"
ln -s "$tmp/nowhere/x.csv" "$tmp/dangling"
for opt in --ttft-out --plot-refills; do
	for bad in /nonexistent/t.csv "$tmp" "$tmp/fifo" "$tmp/link" "$tmp/dangling"; do
		timeout 60 "$K" "${EAL[@]}" --lcores 0@0,1@1 --file-prefix "${base}_out" -- \
			--config config/all-in-one.cfg --trace "" --limit 10 $opt "$bad" >"$tmp/out.log" 2>&1
		rc=$?
		check "$opt $bad: exit 2 before the run, saying why" \
			sh -c "[ $rc -eq 2 ] && grep -q '^kvss: $opt $bad: .*\(does not exist\|is a directory\|is a FIFO, not a file\|is a symbolic link\)' '$tmp/out.log' &&
				! grep -q 'final stats' '$tmp/out.log'"
	done
done
timeout 120 "$K" "${EAL[@]}" --lcores 0@0,1@1 --file-prefix "${base}_out" -- \
	--config config/all-in-one.cfg --trace "" --limit 10 --ttft-out /dev/full >"$tmp/out.log" 2>&1
rc=$?
check "--ttft-out /dev/full: exit 2 after the run, saying why (got $rc)" \
	sh -c "[ $rc -eq 2 ] && grep -q '^kvss: --ttft-out /dev/full: writing it: No space left on device' '$tmp/out.log' &&
		grep -q '\"exit_status\":2' '$tmp/out.log'"
timeout 120 "$K" "${EAL[@]}" --lcores 0@0,1@1 --file-prefix "${base}_out" -- \
	--config config/all-in-one.cfg --trace "" --limit 10 --ttft-out "$tmp/t.csv" >"$tmp/out.log" 2>&1
rc=$?
check "--ttft-out FILE: exit 0, a header and a line per request, each timed" \
	sh -c "[ $rc -eq 0 ] && head -1 '$tmp/t.csv' | grep -qx 'request,ttft_us,hit_tokens,org,salted' &&
		[ \$(grep -c '^[0-9]*,[0-9][0-9]*,[0-9]*,[0-9a-f]\{16\},[01]\$' '$tmp/t.csv') = 10 ]"
cp test/data/chat.jsonl "$tmp/same.jsonl"
timeout 60 "$K" "${EAL[@]}" --lcores 0@0,1@1 --file-prefix "${base}_out" -- \
	--config config/all-in-one.cfg --trace "$tmp/same.jsonl" --ttft-out "$tmp/same.jsonl" >"$tmp/out.log" 2>&1
rc=$?
check "--ttft-out naming the trace it replays: exit 2, the trace untouched" \
	sh -c "[ $rc -eq 2 ] && grep -q 'is the trace it replays' '$tmp/out.log' && cmp -s test/data/chat.jsonl '$tmp/same.jsonl'"
timeout 60 "$K" "${EAL[@]}" --lcores 0@0,1@1 --file-prefix "${base}_out" -- \
	--config config/all-in-one.cfg --role shard --ttft-out "$tmp/s.csv" >"$tmp/out.log" 2>&1
rc=$?
check "--ttft-out on a shard: exit 2, it means nothing there" \
	sh -c "[ $rc -eq 2 ] && grep -q '^kvss: --ttft-out: means nothing to a shard' '$tmp/out.log'"

# A driver on memif started 3 s before its shards: it waits, says so once
# a port (the second may wait for its shard too), and runs; memif's own failure to connect is not repeated every 100 ms.
LC="0@(0-$(($(nproc) - 1)))"
"$K" "${EAL[@]}" -m 1024 --file-prefix "${base}_d" --lcores "$LC" \
	--vdev "net_memif0,role=client,id=0,bsize=10240,socket=$tmp/memif0.sock" \
	--vdev "net_memif1,role=client,id=1,bsize=10240,socket=$tmp/memif1.sock" \
	-- --config config/memif-driver.cfg --poll idle --limit 20 >"$tmp/driver.log" 2>&1 &
drv=$!
pids+=($drv)
sleep 3
for k in 0 1; do
	"$K" "${EAL[@]}" -m 1024 --file-prefix "${base}_s$k" --lcores "$LC,1@(0-$(($(nproc) - 1)))" \
		--vdev "net_memif0,role=server,id=$k,bsize=10240,socket=$tmp/memif$k.sock" \
		-- --config "config/memif-shard$k.cfg" --poll idle --l2-dir "$tmp" >"$tmp/shard$k.log" 2>&1 &
	pids+=($!)
done
timeout 120 tail --pid="$drv" -f /dev/null
wait "$drv"
rc=$?
n=$(grep -c 'memif_connect_client' "$tmp/driver.log")
echo "start: a driver 3 s before its shards: exit $rc, $n memif_connect_client() lines"
grep '^kvss: port' "$tmp/driver.log" | sed 's/^/  /'
[ "$rc" -eq 0 ] || grep -v memif_connect_client "$tmp/driver.log" | tail -n 20 | sed 's/^/  driver: /'
check "driver before its shards: it waited and ran (exit 0)" test "$rc" -eq 0
w=$(grep -c "its shard is not there yet; waiting" "$tmp/driver.log")
check "driver before its shards: it said it waits, once for each port that waited ($w)" \
	sh -c "[ $w -ge 1 ] && [ $w -le 2 ]"
check "driver before its shards: memif_connect_client() at most once a port, not every 100 ms ($n)" \
	test "$n" -le 2
check_summary "start"
