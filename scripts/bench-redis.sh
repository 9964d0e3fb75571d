#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
#
# What an LMCache user would put behind an accelerator instead:
# Debian's redis-server, SET and GET of 16 KiB values pipelined
# over loopback, against kvss storing (EVICT_DATA) and refilling
# (REFILL_DATA) the same bytes, each on one core, in the same run.
#
#   redis: one redis-server (no persistence, its own port and directory)
#          pinned to core 1; redis-benchmark on core 0: 4 connections, 16
#          commands in flight on each (-P 16), 200,000 of each command,
#          values of 16,384 bytes (-d 16384).
#   kvss:  bench_shard's kvss_shard_ingest_16k and kvss_shard_refill_16k:
#          the shard's ingest lcore on core 1, the generator on core 0, over
#          a net_ring port pair (16 KiB tokens, jumbo frames; refills as
#          gather lists over the store).
#
# Prints `bench:` lines: each side's GB/s of values, and kvss's over
# redis's (goal: 5x per core).
#
#   scripts/bench-redis.sh [BUILD]
set -u
BUILD=${1:-build}
cd "$(dirname "$0")/.."
if ! command -v redis-server >/dev/null || ! command -v redis-benchmark >/dev/null; then
	echo "bench-redis: redis-server and redis-benchmark are missing (scripts/deps.sh installs them)" >&2
	exit 2
fi
tmp=$(mktemp -d /tmp/kvss-redis.XXXXXX)
port=$((20000 + $$ % 20000))
rpid=
cleanup() {
	[ -n "$rpid" ] && kill "$rpid" 2>/dev/null && wait "$rpid" 2>/dev/null
	rm -rf "$tmp"
}
trap cleanup EXIT

taskset -c 1 redis-server --port "$port" --bind 127.0.0.1 --save "" --appendonly no \
	--dir "$tmp" --protected-mode yes --io-threads 1 --loglevel warning >"$tmp/redis.log" 2>&1 &
rpid=$!
for _ in $(seq 100); do
	redis-cli -p "$port" ping 2>/dev/null | grep -q PONG && break
	sleep 0.05
done
redis-cli -p "$port" ping 2>/dev/null | grep -q PONG || {
	echo "bench-redis: redis-server did not start:" >&2
	cat "$tmp/redis.log" >&2
	exit 1
}
taskset -c 0 redis-benchmark -h 127.0.0.1 -p "$port" -t set,get -d 16384 -P 16 -c 4 -n 200000 \
	--csv >"$tmp/rb.csv" 2>/dev/null
rps() { awk -F'","' -v t="$1" 'gsub(/"/, "", $1) && $1 == t { print $2 + 0 }' "$tmp/rb.csv"; }
set_rps=$(rps SET)
get_rps=$(rps GET)
if [ -z "$set_rps" ] || [ -z "$get_rps" ]; then
	echo "bench-redis: redis-benchmark gave no figures:" >&2
	cat "$tmp/rb.csv" >&2
	exit 1
fi
kill "$rpid" && wait "$rpid" 2>/dev/null
rpid=

"$BUILD/bench/bench_shard" >"$tmp/shard.out" 2>&1 || {
	echo "bench-redis: bench_shard failed:" >&2
	cat "$tmp/shard.out" >&2
	exit 1
}
gb() { awk -v n="$1" '$1 == "bench:" && $2 == n { print $3 }' "$tmp/shard.out"; }
ingest=$(gb kvss_shard_ingest_16k)
refill=$(gb kvss_shard_refill_16k)
python3 - "$set_rps" "$get_rps" "$ingest" "$refill" <<'EOF'
import sys
set_rps, get_rps, ingest, refill = map(float, sys.argv[1:])
v = 16384
rs, rg = set_rps * v / 1e9, get_rps * v / 1e9
print(f"bench: redis_set_16k {rs:.2f} GB/s")
print(f"bench: redis_get_16k {rg:.2f} GB/s")
print(f"bench: kvss_ingest_vs_redis_set_16k {ingest:.2f} GB/s (baseline {rs:.2f} GB/s, ratio {ingest / rs:.2f})")
print(f"bench: kvss_refill_vs_redis_get_16k {refill:.2f} GB/s (baseline {rg:.2f} GB/s, ratio {refill / rg:.2f})")
EOF
