#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Hit ratio on the Mooncake synthetic trace at 1e6, 3e6, 1e7 tokens and
# unlimited, beside a plain LRU over the trace's 512-token blocks computed in
# the same run, with offline references (Belady with bypass, told of every
# block or not of first sightings; LRU told which blocks return; a cache told
# how many more times each block is used, and also when the last use comes, or
# only each block's mean gap between uses; replacement by a table fitted on the
# trace in hindsight); a second tier behind 1e6 (kvss-trace --l2); then the
# other policies beside LRU.
set -u
BUILD=${1:-build}
cd "$(dirname "$0")/.."
MC=../shared/traces/mooncake_synthetic.jsonl
if [ ! -f "$MC" ]; then
	echo "bench: trace_synthetic skipped (no $MC)"
	exit 0
fi
names=(1e6 3e6 1e7 inf)
out=$("$BUILD/kvss-trace" --trace "$MC" --capacity 1e6,3e6,1e7,inf --json --baseline --oracle \
	--l2 1e7 --l2-admit all,seen2 2>/dev/null) || {
	echo "bench: kvss-trace failed" >&2
	exit 1
}
i=0
while read -r line; do
	python3 - "$line" "${names[$i]}" <<'PY'
import json, sys
d = json.loads(sys.argv[1]); n = sys.argv[2]
b = d["baseline_lru_hit_ratio"]
print(f"bench: trace_synthetic_hit_{n} {d['hit_ratio']:.4f} hit_ratio (baseline {b:.4f} hit_ratio, ratio {d['hit_ratio']/b:.3f})")
if n != "inf":
    # Offline references over the same blocks: what knowing the future gives.
    print(f"bench: trace_synthetic_belady_{n} {d['belady_hit_ratio']:.4f} hit_ratio")
    print(f"bench: trace_synthetic_belady_seen_{n} {d['belady_seen_hit_ratio']:.4f} hit_ratio")
    print(f"bench: trace_synthetic_told_lru_{n} {d['told_lru_hit_ratio']:.4f} hit_ratio")
    print(f"bench: trace_synthetic_told_lru_120s_{n} {d['told_lru_120s_hit_ratio']:.4f} hit_ratio")
    print(f"bench: trace_synthetic_told_uses_{n} {d['told_uses_hit_ratio']:.4f} hit_ratio")
    print(f"bench: trace_synthetic_told_rate_{n} {d['told_rate_hit_ratio']:.4f} hit_ratio")
    print(f"bench: trace_synthetic_told_life_rate_{n} {d['told_life_rate_hit_ratio']:.4f} hit_ratio")
    print(f"bench: trace_synthetic_fitted_table_{n} {d['fitted_table_hit_ratio']:.4f} hit_ratio")
if d["protocol_errors"] or d["verify_failures"]:
    print(f"bench: trace_synthetic_{n}: {d['protocol_errors']} protocol errors, {d['verify_failures']} verify failures")
PY
	i=$((i + 1))
done <<<"$out"
# A second tier of 1e7 tokens behind 1e6 of DRAM (kvss-trace --l2, the block
# model of app/trace/tier2.h) against one tier of 1.1e7 (the library's LRU,
# this run) and against the best use of 1e6 alone (Belady with bypass); and
# what each admission rule writes for its hits.
one=$("$BUILD/kvss-trace" --trace "$MC" --capacity 1.1e7 --json 2>/dev/null) || {
	echo "bench: kvss-trace failed" >&2
	exit 1
}
python3 - "$(head -n 1 <<<"$out")" "$one" <<'PY'
import json, sys
d = json.loads(sys.argv[1]); one = json.loads(sys.argv[2])["hit_ratio"]; bel = d["belady_hit_ratio"]
for t in d["l2"]:
    name = "" if t["admit"] == "all" else "_" + t["admit"]
    h = t["hit_ratio"]
    print(f"bench: trace_synthetic_hit_1e6_l2_1e7{name} {h:.4f} hit_ratio (baseline {one:.4f} hit_ratio, ratio {h/one:.3f})")
    print(f"bench: trace_synthetic_hit_1e6_l2_1e7{name}_vs_belady_1e6 {h:.4f} hit_ratio (baseline {bel:.4f} hit_ratio, ratio {h/bel:.3f})")
    print(f"bench: trace_synthetic_l2_written_1e6_l2_1e7{name} {t['l2_written_tokens']} tokens")
    print(f"bench: trace_synthetic_l2_write_peak_1e6_l2_1e7{name} {t['l2_write_tokens_per_s_peak']:.0f} tokens/s")
    print(f"bench: trace_synthetic_l2_hits_per_written_1e6_l2_1e7{name} {t['l2_read_tokens'] / max(t['l2_written_tokens'], 1):.3f} fraction")
PY
# The same through the driver library's own second tier, its shard's L2 in a
# lib/kvdisk file (in a directory of its own under KVSS_BENCH_DIR, default
# /var/tmp: kvdisk refuses a directory others can write), every refilled
# byte checked (about two minutes here).
l2dir=$(mktemp -d "${KVSS_BENCH_DIR:-/var/tmp}/kvss-bench-trace.XXXXXX")
trap 'rm -rf "$l2dir"' EXIT
lib=$("$BUILD/kvss-trace" --trace "$MC" --capacity 1e6 --l2 1e7 --l2-dir "$l2dir" \
	--json 2>/dev/null) || {
	echo "bench: kvss-trace --l2-dir failed" >&2
	exit 1
}
python3 - "$lib" "$one" <<'PY'
import json, sys
t = json.loads(sys.argv[1])["l2"][0]["library"]; one = json.loads(sys.argv[2])["hit_ratio"]
h = t["hit_ratio"]
print(f"bench: trace_synthetic_hit_1e6_l2_1e7_library {h:.4f} hit_ratio (baseline {one:.4f} hit_ratio, ratio {h/one:.3f})")
print(f"bench: trace_synthetic_l2_library_hit_tokens_l2 {t['hit_tokens_l2']} tokens")
print(f"bench: trace_synthetic_l2_library_written {t['l2_written_tokens']} tokens")
if t["protocol_errors"] or t["verify_failures"]:
    print(f"bench: trace_synthetic_l2_library: {t['protocol_errors']} protocol errors, {t['verify_failures']} verify failures")
PY
# The other policies beside LRU (the library's, this run), and the share of
# the gap from LRU to Belady each closes.
for pol in lfu slru admit followup; do
	"$BUILD/kvss-trace" --trace "$MC" --capacity 1e6,3e6,1e7 --policy "$pol" --json 2>/dev/null |
		python3 -c "
import json, sys
ref = [json.loads(l) for l in sys.argv[1].splitlines()[:3]]
for n, l, r in zip(['1e6', '3e6', '1e7'], sys.stdin, ref):
    d = json.loads(l)
    h, lru, bel = d['hit_ratio'], r['hit_ratio'], r['belady_hit_ratio']
    print(f'bench: trace_synthetic_hit_{n}_$pol {h:.4f} hit_ratio (baseline {lru:.4f} hit_ratio, ratio {h/lru:.3f})')
    print(f'bench: trace_synthetic_gap_closed_{n}_$pol {(h-lru)/(bel-lru):.3f} fraction')
    if d['protocol_errors'] or d['verify_failures']:
        print(f'bench: trace_synthetic_{n}_$pol: {d[\"protocol_errors\"]} protocol errors, {d[\"verify_failures\"]} verify failures')
" "$out"
done
# Routing across 4 replicas of 1e6 tokens each (16 organizations by first
# block): hit ratio against load balance (the busiest replica's tokens over
# the mean, per minute of trace time; mean over minutes and the worst).
echo "bench: routing table, 4 replicas x 1e6 tokens, --orgs 16 (policy: hit_ratio, balance mean, worst)"
for route in affinity org prefix chash random; do
	"$BUILD/kvss-trace" --trace "$MC" --capacity 1e6 --replicas 4 --route "$route" --orgs 16 --json \
		2>/dev/null | python3 -c "
import json, sys
d = json.loads(sys.stdin.read())
print(f'bench: route_{d[\"route\"]}_hit_ratio {d[\"hit_ratio\"]:.4f} hit_ratio')
print(f'bench: route_{d[\"route\"]}_balance_mean {d[\"balance_mean\"]:.3f} max_over_mean')
print(f'bench: route_{d[\"route\"]}_balance_worst {d[\"balance_worst\"]:.3f} max_over_mean')
"
done
