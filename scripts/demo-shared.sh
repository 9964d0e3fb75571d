#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
#
# The shared level in the whole system (make demo-shared): a throwaway Ceph
# cluster (scripts/ceph-cluster.sh), then two replicas in turn, each a
# driver and its two shards over net_memif (scripts/demo.sh with the
# shared level added to its configurations), each with second tiers of its
# own, empty at its start. The first replica runs the first half of the
# public trace (../shared/traces/mooncake_synthetic.jsonl; without it, the
# built-in workload), the second, started empty, the second half: its hits
# from the shared level are what the first one wrote, every byte checked
# by its wafer emulator; the shards seal their slices with a key made for
# the run, each organization's under its own key from a store made for the
# run too. Then the emergency reset under a running replica, retiring every
# organization's key (how long until it stops finding the old generation,
# and until its shards read the new keys), and, with
# KVSS_DEMO_SHARED_KILL_OSD=1, the second replica again with one OSD killed
# with kill -9 mid-run.
#
# usage: scripts/demo-shared.sh [BUILD]
#   KVSS_DEMO_SHARED_LIMIT=N  requests of the trace in all (default: all of it)
#   KVSS_DEMO_SHARED_KILL_OSD=1  also run the second half with osd.1 killed
#   KVSS_DEMO_SHARED_SLOW_MS=D   also run the second half on a slow level (an
#                             OSD holds KVSS_DEMO_SHARED_SLOW_PCT percent of the
#                             messages it takes, default 10, for D ms each, and
#                             what waits behind them: osd_debug_inject_dispatch_delay),
#                             requests at the trace's times x 0.1 and a prefill
#                             rate, with refill_policy "adaptive" (twice: the
#                             wafer stopped while its EVICT path is backed
#                             up, and not: wafer.backpressure "skip"), "io-only" and
#                             "compute-only" (the cache off), a lookup deadline
#                             of 2 s: each one's time to first token, beside
#                             compute-only's modelled for the same arrivals
#   KVSS_DEMO_SHARED_OUT=D    keep the runs' JSON lines and logs in D
#
# Exit status: 0 when the second replica hit the shared level with 0 verify
# failures in every run, 1 otherwise. Everything it started is stopped.
set -u
BUILD=${1:-build}
cd "$(dirname "$0")/.."
tmp=$(mktemp -d /tmp/kvss-demo-shared.XXXXXX)
cluster=$tmp/ceph
out=${KVSS_DEMO_SHARED_OUT:-$tmp}
mkdir -p "$out"
cleanup() {
	jobs -p | xargs -r kill -TERM 2>/dev/null
	wait 2>/dev/null
	scripts/ceph-cluster.sh stop "$cluster" >/dev/null 2>&1
	rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

say() { echo "demo-shared: $*"; }
field() { # field JSONFILE KEY[.KEY]
	python3 -c '
import json, sys
d = json.loads(open(sys.argv[1]).read())
for k in sys.argv[2].split("."):
    d = d[k]
print(d)' "$1" "$2" 2>/dev/null || echo "?"
}

t0=$(date +%s)
scripts/ceph-cluster.sh start "$cluster" || exit 1
conf=$cluster/ceph.conf

# The halves of the trace (made here, in the temporary directory: the
# trace is read from ../shared, never copied into the repository).
MC=../shared/traces/mooncake_synthetic.jsonl
if [ -f "$MC" ]; then
	python3 - "$MC" "$tmp" "${KVSS_DEMO_SHARED_LIMIT:-0}" <<'EOF'
import sys
src, d, limit = sys.argv[1], sys.argv[2], int(sys.argv[3])
lines = [l for l in open(src) if l.strip()]
if limit > 0:
    lines = lines[:limit]
h = len(lines) // 2
open(f"{d}/first.jsonl", "w").writelines(lines[:h])
open(f"{d}/second.jsonl", "w").writelines(lines[h:])
print(f"demo-shared: {len(lines)} requests of {src}: the first replica runs {h}, the second {len(lines) - h}")
EOF
	first=$tmp/first.jsonl
	second=$tmp/second.jsonl
else
	say "no trace at $MC: both replicas run the built-in workload (the second finds what the first wrote)"
	first=""
	second=""
fi

# The shared level's column is the driver's (config.c refuses another).
column=$(sed -n 's/^  column = \([0-9]*\);.*/\1/p' config/memif-driver.cfg)
shared_group() {
	[ "${1:-}" = none ] && set --
	cat <<EOF

shared = {
  conf = "$conf";
  pool = "kvss";
  column = $column;
  deadline_ms = 50;
  generation_ms = ${1:-1000};
};
EOF
}
# The shards seal their slices with a key made for this run (docs/kvss.md,
# "Sealing the slices"): what the pool holds is ciphertext.
(umask 077 && python3 -c 'import os; print(os.urandom(32).hex())' >"$tmp/shared.key")
# ... and each organization's under a key of its own, which the reset retires
# (docs/kvss.md, "A reset that retires a key").
"$BUILD/kvss-shared" keys --org-keys "$tmp/org.keys" --init >/dev/null
# A replica's configurations: the demo's, the trace replaced, the shared level added.
mkcfgs() { # mkcfgs TAG TRACE [GENERATION_MS]
	sed -e "s#^  trace = .*#  trace = \"$2\";#" -e 's/^  limit = .*/  limit = 0;/' \
		config/memif-driver.cfg >"$tmp/$1-driver.cfg"
	shared_group "${3:-}" >>"$tmp/$1-driver.cfg"
	for k in 0 1; do
		cp "config/memif-shard$k.cfg" "$tmp/$1-shard$k.cfg"
		shared_group "${3:-}" | sed "s#^  pool = \"kvss\";#&\n  key_file = \"$tmp/shared.key\";\n  org_key_file = \"$tmp/org.keys\";#" \
			>>"$tmp/$1-shard$k.cfg"
	done
}
replica() { # replica TAG TRACE [GENERATION_MS|none]: its status (none: no shared level)
	mkcfgs "$1" "$2" "${3:-}"
	if [ "${3:-}" = none ]; then
		sed -i '/^shared = {/,/^};/d' "$tmp/$1-driver.cfg" "$tmp/$1-shard0.cfg" "$tmp/$1-shard1.cfg"
	fi
	mkdir -p "$tmp/$1-l2"
	KVSS_DEMO_DRIVER_CFG=$tmp/$1-driver.cfg KVSS_DEMO_SHARD0_CFG=$tmp/$1-shard0.cfg \
		KVSS_DEMO_SHARD1_CFG=$tmp/$1-shard1.cfg KVSS_DEMO_L2_DIR=$tmp/$1-l2 \
		KVSS_DEMO_JSON=$out/$1.json KVSS_DEMO_TAG="sh$1$$" \
		scripts/demo.sh "$BUILD" >"$out/$1.log" 2>&1
}
report() { # report TAG LABEL
	local j=$out/$1.json
	say "$2: exit $(field "$j" exit_status), hit ratio $(field "$j" hit_ratio), from the shared level" \
		"$(field "$j" hit_tokens_shared) tokens, verify failures $(field "$j" verify_failures)," \
		"$(field "$j" seconds) s"
	grep -o 'shared level: hit tokens.*' "$out/$1.log" | head -1 | sed 's/^/demo-shared:   /'
}

status=0
replica one "$first"
report one "replica 1 (first half, empty)"
replica two "$second"
report two "replica 2 (second half, started empty)"
[ "$(field "$out/two.json" verify_failures)" = 0 ] || status=1
[ "$(field "$out/one.json" verify_failures)" = 0 ] || status=1
python3 -c "import sys; sys.exit(0 if int('$(field "$out/two.json" hit_tokens_shared)') > 0 else 1)" 2>/dev/null ||
	{ say "FAIL: the second replica found nothing of the first's"; status=1; }
# The same second half without the shared level, for comparison (its own
# second tiers, empty).
replica alone "$second" none
report alone "replica 2 again without the shared level"

# A slow level: whether the driver's choice keeps a replica's time to first
# token at or below recomputing's, where refilling every hit (io-only)
# waits on the level. Every run finds what the first replica wrote; each
# also writes, so a later one finds a little more.
slow_ms=${KVSS_DEMO_SHARED_SLOW_MS:-0}
slow_pct=${KVSS_DEMO_SHARED_SLOW_PCT:-10}
case "$slow_ms" in "" | *[!0-9]* | ??????*) say "KVSS_DEMO_SHARED_SLOW_MS=$slow_ms: want whole milliseconds, below 100000"; exit 2 ;; esac
case "$slow_pct" in "" | *[!0-9]* | ????*) say "KVSS_DEMO_SHARED_SLOW_PCT=$slow_pct: want a whole percent, 1 to 100"; exit 2 ;; esac
[ "$slow_pct" -ge 1 ] && [ "$slow_pct" -le 100 ] || { say "KVSS_DEMO_SHARED_SLOW_PCT=$slow_pct: want 1 to 100"; exit 2; }
osd_delay() { # osd_delay SECONDS PROBABILITY
	local i
	for i in 0 1 2; do
		ceph -c "$conf" tell "osd.$i" config set osd_debug_inject_dispatch_delay_duration "$1" >/dev/null 2>&1 &&
			ceph -c "$conf" tell "osd.$i" config set osd_debug_inject_dispatch_delay_probability "$2" \
				>/dev/null 2>&1 || say "osd.$i: the delay was not set"
	done
}
ttft() { # ttft TAG: "p50 X ms, p99 Y ms" of its run, and compute-only's beside it
	python3 - "$out/$1.json" <<'PYEOF'
import json, sys
j = json.loads(open(sys.argv[1]).read())
g = lambda k: j.get(k) if j.get(k) is not None else float("nan")
print("TTFT p50 %.1f ms, p99 %.1f ms (compute-only, modelled: p50 %.1f ms, p99 %.1f ms); hit tokens %s, "
      "from the shared level %s, lookups abandoned %s, exit %s, verify failures %s" %
      (g("ttft_p50_ms"), g("ttft_p99_ms"), g("model_compute_only_ttft_p50_ms"),
       g("model_compute_only_ttft_p99_ms"), j.get("hit_tokens"), j.get("hit_tokens_shared"),
       (j.get("shared") or {}).get("lookups_abandoned"), j.get("exit_status"), j.get("verify_failures")))
PYEOF
}
slow_replica() { # slow_replica TAG POLICY [BACKPRESSURE]
	mkcfgs "$1" "$second"
	sed -i -e "s/^\( *\)# refill_policy = \"adaptive\";/\1refill_policy = \"$2\";/" \
		-e 's/^  deadline_ms = 50;/  deadline_ms = 2000;/' "$tmp/$1-driver.cfg"
	grep -q "refill_policy = \"$2\";" "$tmp/$1-driver.cfg" || say "$1: refill_policy not set"
	if [ -n "${3:-}" ]; then
		sed -i "s/^wafer = {/wafer = { backpressure = \"$3\";/" "$tmp/$1-driver.cfg"
		grep -q "backpressure = \"$3\";" "$tmp/$1-driver.cfg" || say "$1: backpressure not set"
	fi
	mkdir -p "$tmp/$1-l2"
	KVSS_DEMO_DRIVER_CFG=$tmp/$1-driver.cfg KVSS_DEMO_SHARD0_CFG=$tmp/$1-shard0.cfg \
		KVSS_DEMO_SHARD1_CFG=$tmp/$1-shard1.cfg KVSS_DEMO_L2_DIR=$tmp/$1-l2 \
		KVSS_DEMO_JSON=$out/$1.json KVSS_DEMO_TAG="sh$1$$" KVSS_DEMO_ARRIVALS=trace \
		scripts/demo.sh "$BUILD" >"$out/$1.log" 2>&1
	say "  $2${3:+, backpressure $3}: $(ttft "$1")"
	[ "$(field "$out/$1.json" verify_failures)" = 0 ] || status=1
}
if [ "$slow_ms" -gt 0 ]; then
	say "a slow level: each OSD holds $slow_pct% of its messages $slow_ms ms; the second half again, at the trace's times x 0.1:"
	osd_delay "$(awk -v m="$slow_ms" 'BEGIN { printf "%.3f", m / 1000 }')" \
		"$(awk -v p="$slow_pct" 'BEGIN { printf "%.2f", p / 100 }')"
	# Adaptive first: a run right after io-only's found the cluster still
	# busy with what io-only read and wrote (its refills 15x their estimate).
	slow_replica slowad adaptive
	# The wafer not stopped while its EVICT path is backed up: what is not
	# sent then is not cached (wafer.backpressure "skip").
	slow_replica slowsk adaptive skip
	slow_replica slowio io-only
	# The baseline measured, not only modelled: the cache off, the same arrivals.
	slow_replica slowco compute-only
	osd_delay 0 0
fi

# The reset under a running replica: how long until it stops finding the
# old generation (it reads the generation every generation_ms, 200 here).
mkcfgs reset "$first" 200
mkdir -p "$tmp/reset-l2"
KVSS_DEMO_DRIVER_CFG=$tmp/reset-driver.cfg KVSS_DEMO_SHARD0_CFG=$tmp/reset-shard0.cfg \
	KVSS_DEMO_SHARD1_CFG=$tmp/reset-shard1.cfg KVSS_DEMO_L2_DIR=$tmp/reset-l2 \
	KVSS_DEMO_JSON=$out/reset.json KVSS_DEMO_TAG="shreset$$" \
	scripts/demo.sh "$BUILD" >"$out/reset.log" 2>&1 &
rpid=$!
for _ in $(seq 1 600); do
	grep -q "every shard is up" "$out/reset.log" 2>/dev/null && break
	sleep 0.1
done
sleep 3
t1=$(date +%s%N)
"$BUILD/kvss-shared" --conf "$conf" reset --org-keys "$tmp/org.keys" >"$tmp/reset.txt" 2>&1
seen=""
keyed=""
for _ in $(seq 1 1000); do
	if [ -z "$seen" ] && grep -q "generation of every organization" "$out/reset.log" 2>/dev/null; then
		seen=$(( ($(date +%s%N) - t1) / 1000000 ))
	fi
	# Both shards of the replica (their logs: the two that name this run's
	# store): every slice sealed before is unreadable to it.
	if [ -z "$keyed" ] &&
		[ "$(grep -l "organization keys read again from $tmp/org.keys" $(grep -l "$tmp/org.keys" /tmp/kvss-demo.*/shard[01].log 2>/dev/null) /dev/null 2>/dev/null | wc -l)" -ge 2 ]; then
		keyed=$(( ($(date +%s%N) - t1) / 1000000 ))
	fi
	[ -n "$seen" ] && [ -n "$keyed" ] && break
	sleep 0.01
done
wait "$rpid"
say "reset under a running replica: $(grep -m1 "generation:" "$tmp/reset.txt"); the replica stopped reading the old" \
	"generation after ${seen:-?} ms (generation_ms = 200; a lookup in flight ends within deadline_ms = 50)"
say "... with every organization's key retired ($(head -1 "$tmp/reset.txt" | sed 's/.*(\(default.*\))/\1/')):" \
	"both shards read the new keys after ${keyed:-?} ms; what they sealed before opens nowhere"
[ -n "$keyed" ] || status=1

if [ "${KVSS_DEMO_SHARED_KILL_OSD:-0}" = 1 ]; then
	replica kill0 "$first" # writes under the new generation
	replica kill "$second" &
	kpid=$!
	sleep 8
	scripts/ceph-cluster.sh kill-osd "$cluster" 1
	wait "$kpid"
	report kill "replica 2 with osd.1 killed mid-run"
	[ "$(field "$out/kill.json" verify_failures)" = 0 ] || status=1
fi
say "$(($(date +%s) - t0)) s in all; $([ "$status" -eq 0 ] && echo PASS || echo FAIL)"
exit "$status"
