#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# kvss-trace end to end: exact figures on a small hand-checked trace, errors
# on bad input, and a replay of part of the public Mooncake trace (when
# ../shared/traces has it) with no protocol error and no verify failure.
set -u
BUILD=${1:-build}
cd "$(dirname "$0")/.."
T=$BUILD/kvss-trace
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
. scripts/check-lib.sh
field() { # FILE LINE KEY
	sed -n "${2}p" "$1" | python3 -c "import json,sys; print(json.load(sys.stdin)['$3'])"
}

# test/data/chat.jsonl, columns of 8, unlimited: acme 40 tokens (miss),
# acme 50 (hits 40), globex 40 (another org: miss), globex 40 allowed 16
# (hits 16), acme 65 (hits 48), acme 40 again (hits 32: the last prompt
# token is never replayed, so 39 rounds down): 136 of 275. Deleted: the
# trailing 2 and 1 tokens, and the last request's column 32..39, stored
# twice. Without the -1 rule the last request hits 40 and stores nothing.
"$T" --trace test/data/chat.jsonl --capacity inf,40 --column 8 --json >"$tmp/out" 2>/dev/null
check "exit 0" test $? -eq 0
check "two lines" test "$(wc -l <"$tmp/out")" -eq 2
check "hit tokens 136" test "$(field "$tmp/out" 1 hit_tokens)" = 136
check "input tokens 275" test "$(field "$tmp/out" 1 input_tokens)" = 275
check "deleted 11" test "$(field "$tmp/out" 1 deleted_tokens)" = 11
check "unlimited is null" test "$(field "$tmp/out" 1 capacity_tokens)" = None
check "capacity 40 holds 40 at most" test "$(field "$tmp/out" 2 peak_stored_tokens)" -le 40
check "no protocol errors" test "$(field "$tmp/out" 2 protocol_errors)" = 0
check "no verify failures" test "$(field "$tmp/out" 2 verify_failures)" = 0
"$T" --trace test/data/chat.jsonl --capacity inf --column 8 --json --no-minus-one >"$tmp/nm" 2>/dev/null
check "--no-minus-one hits 144" test "$(field "$tmp/nm" 1 hit_tokens)" = 144
check "--no-minus-one deletes 3" test "$(field "$tmp/nm" 1 deleted_tokens)" = 3

# Cache salts: one salt on every line shares as before (136 tokens); a
# salt per line shares nothing, in one replica and in two (the fleet's
# model), within and across organizations; a salt not of the documented
# form is refused naming the file and line.
sed 's/^{/{"cache_salt": "alice", /' test/data/chat.jsonl >"$tmp/salt1.jsonl"
awk '{sub(/^[{]/, "{\"cache_salt\": \"user-" NR "\", "); print}' test/data/chat.jsonl >"$tmp/saltn.jsonl"
"$T" --trace "$tmp/salt1.jsonl" --capacity inf --column 8 --json >"$tmp/s1" 2>/dev/null
check "salt: one salt on every line hits 136, as none" test "$(field "$tmp/s1" 1 hit_tokens)" = 136
"$T" --trace "$tmp/saltn.jsonl" --capacity inf --column 8 --json >"$tmp/sn" 2>/dev/null
check "salt: a salt per line hits nothing" test "$(field "$tmp/sn" 1 hit_tokens)" = 0
"$T" --trace "$tmp/saltn.jsonl" --capacity inf --column 8 --json --replicas 2 >"$tmp/sn2" 2>/dev/null
check "salt: nor across two replicas (the fleet)" test "$(field "$tmp/sn2" 1 hit_tokens)" = 0
sed '3s/^{/{"cache_salt": "a b", /' test/data/chat.jsonl >"$tmp/saltbad.jsonl"
"$T" --trace "$tmp/saltbad.jsonl" --capacity inf >/dev/null 2>"$tmp/err"
check "salt: 'a b' is refused (exit 2), naming the file, line and field" \
	sh -c "[ $? -eq 2 ] && grep -q 'saltbad.jsonl:3: cache_salt: want null' '$tmp/err'"

# A noisy neighbour: one organization sends 90% of the requests, each a
# new 4,000-token prompt; four quiet ones re-read two documents each (one
# in ten requests). In 100,000 tokens of DRAM without shares the noisy one
# flushes them; with a share of 0.1 each, each quiet one hits within 2
# points of what it gets alone in 10,000 tokens (its share); driver.orgs'
# dram_share (--orgs-from) gives the same as --org-share.
python3 scripts/gen-noisy.py "$tmp"
orgs_json() { # FILE: "org ratio" lines of the first JSON line's orgs
	head -1 "$1" | python3 -c 'import json,sys; [print(o["org"], o["hit_ratio"]) for o in json.loads(sys.stdin.readline())["orgs"]]'
}
named=() shared=()
for q in 0 1 2 3; do
	named+=(--org-ttl quiet$q:0:0)
	shared+=(--org-share quiet$q:0.1)
	"$T" --trace "$tmp/nn_q$q.jsonl" --capacity 10000 --org-ttl quiet$q:0:0 --json 2>/dev/null >"$tmp/nn_alone$q"
done
"$T" --trace "$tmp/nn.jsonl" --capacity 100000 "${named[@]}" --json 2>/dev/null >"$tmp/nn_none"
"$T" --trace "$tmp/nn.jsonl" --capacity 100000 "${shared[@]}" --json 2>/dev/null >"$tmp/nn_shares"
printf 'role = "driver";\ndriver = { address = { mac = "02:00:00:00:00:01"; ipv4 = "10.0.0.1"; };\n models = ( { caches = ( { id = 0; } ); shards = ( { id = 0;\n  address = { mac = "02:00:00:00:00:02"; ipv4 = "10.0.0.2"; };\n  bytes_per_token = [64]; capacity_tokens = [100000]; } ); } );\n orgs = ( %s ); };\n' \
	"$(for q in 0 1 2 3; do printf '{ name = "quiet%d"; dram_share = 0.1; }, ' $q; done | sed 's/, $//')" >"$tmp/nn.cfg"
"$T" --trace "$tmp/nn.jsonl" --capacity 100000 --orgs-from "$tmp/nn.cfg" --json 2>/dev/null >"$tmp/nn_cfg"
for q in 0 1 2 3; do
	a=$(orgs_json "$tmp/nn_alone$q" | awk '{print $2}')
	n=$(orgs_json "$tmp/nn_none" | awk -v o=quiet$q '$1 == o {print $2}')
	w=$(orgs_json "$tmp/nn_shares" | awk -v o=quiet$q '$1 == o {print $2}')
	c=$(orgs_json "$tmp/nn_cfg" | awk -v o=quiet$q '$1 == o {print $2}')
	echo "noisy neighbour: quiet$q hit ratio alone in its share ${a:-?}, beside the noisy one ${n:-?} without shares, ${w:-?} with a share of 0.1"
	check "noisy neighbour: quiet$q with its share hits within 2 points of alone" holds "abs(${a:-9} - ${w:-0}) <= 0.02"
	check "noisy neighbour: quiet$q without shares hits 20 points less (the test can fail)" holds "${a:-0} - ${n:-9} >= 0.2"
	check "noisy neighbour: quiet$q: driver.orgs' dram_share gives what --org-share does" test "${c:-x}" = "${w:-y}"
done
"$T" --trace "$tmp/nn.jsonl" --capacity 100000 --org-share quiet0:0.6 --org-share quiet1:0.6 >/dev/null 2>"$tmp/err"
check "--org-share: shares summing above 1 are refused (exit 2), saying so" \
	sh -c "[ $? -eq 2 ] && grep -q 'the DRAM shares sum to 1.2: above the whole' '$tmp/err'"
for bad in quiet0 quiet0:x quiet0:0.5:0.4 quiet0:-1 quiet0:nan quiet0:0.1:2 :0.1 quiet0:0.1:0 \
	quiet0:0,1 quiet0:0.1abc quiet0:1e-400 'quiet0:0.2 :0.1' quiet0:0.5,quiet1:0.9; do
	"$T" --trace "$tmp/nn.jsonl" --capacity 100000 --org-share "$bad" >/dev/null 2>"$tmp/err"
	check "--org-share $bad: refused (exit 2), saying the form" \
		sh -c "[ $? -eq 2 ] && grep -q 'org-share.*want NAME:SHARE\[:CAP\]\|an organization.s name of 1 to 63' '$tmp/err'"
done

# Rates over the trace's clock (seconds 0 to 5 here: a span of 6 s, shorter
# than the 10 s window, so the busiest window is the whole span): 115
# evicted and 136 refilled tokens over 6 s.
check "rates: the window is the 6 s span" test "$(field "$tmp/out" 1 peak_window_s)" = 6
check "rates: evicted 115 / 6 s, refilled 136 / 6 s, the busiest the same" \
	test "$(field "$tmp/out" 1 evict_tokens_per_s) $(field "$tmp/out" 1 evict_tokens_per_s_peak) $(field "$tmp/out" 1 refill_tokens_per_s) $(field "$tmp/out" 1 refill_tokens_per_s_peak)" = "19.2 19.2 22.7 22.7"
# A burst: three organizations' 64-token prompts (no hits) at 0, 20 and
# 20.5 s: each evicts the same E tokens; over 21 s that is 3E / 21 a second,
# and the busiest 10 s (those holding 20 s) 2E / 10.
for t in 0 20000 20500; do
	printf '{"org": "o%s", "timestamp": %s, "tokens": [%s], "output_length": 0}\n' "$t" "$t" \
		"$(seq -s, 1 64)"
done >"$tmp/burst.jsonl"
"$T" --trace "$tmp/burst.jsonl" --capacity inf --column 8 --kv-bytes-per-token 1000000 --json \
	>"$tmp/burst" 2>/dev/null
check "burst: exits 0" test $? -eq 0
check "burst: a 10 s window" test "$(field "$tmp/burst" 1 peak_window_s)" = 10
check "burst: evicted 3E / 21 s, the busiest 10 s 2E / 10, nothing refilled" \
	python3 -c "import json,sys; d=json.load(open('$tmp/burst')); e=d['evicted_tokens']; sys.exit(0 if e > 0 and e % 3 == 0 and abs(d['evict_tokens_per_s'] - e / 21) < 0.06 and abs(d['evict_tokens_per_s_peak'] - 2 * e / 30) < 0.06 and d['refill_tokens_per_s_peak'] == 0 else 1)"
check "burst: Gb/s are tokens/s x 1,000,000 bytes x 8" \
	python3 -c "import json,sys; d=json.load(open('$tmp/burst')); sys.exit(0 if abs(d['evict_gbps_peak'] - d['evict_tokens_per_s_peak'] * 8e6 / 1e9) < 1e-3 and d['evict_gbps_peak'] > 0.1 else 1)"
"$T" --trace "$tmp/burst.jsonl" --capacity inf --kv-bytes-per-token 0 >/dev/null 2>"$tmp/err"
check "a bad --kv-bytes-per-token exits 2, naming the option" \
	sh -c "test $? -eq 2 && grep -q -- --kv-bytes-per-token '$tmp/err'"

# Timestamps 285 years apart: the rates count the last 48 days' worth of
# seconds apart and say so, rather than ask for terabytes.
printf '{"org": "a", "timestamp": %s, "tokens": [1,2,3,4,5,6,7,8,9]}\n' 0 9000000000000 >"$tmp/far.jsonl"
"$T" --trace "$tmp/far.jsonl" --capacity inf --column 4 --json >"$tmp/far" 2>"$tmp/err"
check "a trace of 285 years: exits 0 and says how it counts the rates" \
	sh -c "test $? -eq 0 && grep -q 'the trace spans 9000000001 s' '$tmp/err'"

# Bad input: exit 2 and a message naming the file.
"$T" --trace "$tmp/missing.jsonl" --capacity 1 >/dev/null 2>"$tmp/err"
check "missing file exits 2" test $? -eq 2
check "message names the file" grep -q missing.jsonl "$tmp/err"
echo '{"timestamp": 1, "input_length": 600, "hash_ids": [1]}' >"$tmp/bad.jsonl"
"$T" --trace "$tmp/bad.jsonl" --capacity 1 >/dev/null 2>"$tmp/err"
check "inconsistent hash_ids exits 2" test $? -eq 2
check "message names the line" grep -q "bad.jsonl:1" "$tmp/err"
"$T" --trace test/data/chat.jsonl --capacity lots >/dev/null 2>&1
check "bad capacity exits 2" test $? -eq 2
# What is missing or wrong, by name, in one line (not 60 lines of usage).
"$T" --trace test/data/chat.jsonl >"$tmp/nocap" 2>&1
check "no --capacity: exit 2, one line naming --capacity" \
	sh -c "[ $? -eq 2 ] && [ \$(wc -l <'$tmp/nocap') -eq 1 ] && grep -q -- '^kvss-trace: --capacity: missing' '$tmp/nocap'"
sed 's/^/  /' "$tmp/nocap"
"$T" --capacity 1e5 >"$tmp/notrace" 2>&1
check "neither --trace nor --generate: exit 2, one line naming both" \
	sh -c "[ $? -eq 2 ] && [ \$(wc -l <'$tmp/notrace') -eq 1 ] && grep -q -- 'give --trace FILE .* or --generate N' '$tmp/notrace'"
"$T" --trace test/data/chat.jsonl --capacity 1e5 --policy lru2 >"$tmp/pol2" 2>&1
check "--policy lru2: exit 2, listing the policies" \
	sh -c "[ $? -eq 2 ] && grep -q -- \"^kvss-trace: --policy: 'lru2' is not one of lru, lfu, priority, slru, admit, followup\" '$tmp/pol2'"
# Capacities with k, M, G (thousands, millions, billions); what is not a
# whole number of tokens is refused, saying the forms.
"$T" --trace test/data/chat.jsonl --capacity 1M,2k,1.5M,0.001G --json >"$tmp/sfx" 2>/dev/null
check "--capacity 1M,2k,1.5M,0.001G: 1000000, 2000, 1500000, 1000000 tokens" \
	test "$(field "$tmp/sfx" 1 capacity_tokens) $(field "$tmp/sfx" 2 capacity_tokens) $(field "$tmp/sfx" 3 capacity_tokens) $(field "$tmp/sfx" 4 capacity_tokens)" = "1000000 2000 1500000 1000000"
for bad in 1X 1.5 2MB -1k; do
	"$T" --trace test/data/chat.jsonl --capacity "$bad" >"$tmp/capbad" 2>&1
	check "--capacity $bad: exit 2, saying the forms (k, M, G)" \
		sh -c "[ $? -eq 2 ] && grep -q -- \"^kvss-trace: --capacity: '$bad' is not a whole number of tokens .*k, M, G\" '$tmp/capbad'"
done
sed 's/^/  /' "$tmp/capbad"

# Replicas: the built-in workload through 4 drivers, each policy.
for route in affinity org prefix chash random; do
	"$T" --generate 400 --capacity 1e5 --replicas 4 --route "$route" --json >"$tmp/rt" 2>/dev/null
	check "replicas, $route: exits 0" test $? -eq 0
	check "replicas, $route: says its route" grep -q "\"route\": \"$route\"" "$tmp/rt"
	check "replicas, $route: no protocol errors or verify failures" \
		test "$(field "$tmp/rt" 1 protocol_errors)$(field "$tmp/rt" 1 verify_failures)" = 00
	check "replicas, $route: a balance figure of at least 1" \
		python3 -c "import json,sys; sys.exit(0 if json.loads(open('$tmp/rt').readline())['balance_mean'] >= 1 else 1)"
done
"$T" --generate 10 --capacity 1e5 --replicas 4 --route fastest >/dev/null 2>&1
check "an unknown route exits 2" test $? -eq 2

# Every deletion policy under pressure: the shard never refuses a message,
# every refilled byte is right, capacity is kept.
for pol in lru lfu priority slru admit followup; do
	"$T" --generate 400 --capacity 2e4 --policy "$pol" --json >"$tmp/pol" 2>/dev/null
	check "policy $pol: exits 0" test $? -eq 0
	check "policy $pol: no protocol errors or verify failures" \
		test "$(field "$tmp/pol" 1 protocol_errors)$(field "$tmp/pol" 1 verify_failures)" = 00
	check "policy $pol: capacity kept" test "$(field "$tmp/pol" 1 peak_stored_tokens)" -le 20000
	check "policy $pol: some hits" test "$(field "$tmp/pol" 1 hit_tokens)" -gt 0
done
"$T" --generate 10 --capacity 1e5 --policy followup --followup 0 >/dev/null 2>"$tmp/err"
check "--followup 0 exits 2" test $? -eq 2
check "--followup 0: message names the option" grep -q -- "--followup" "$tmp/err"

# --oracle on a Mooncake trace of 10-token blocks with room for one: x's
# answer class returns in 3 s, y's (a half block) in 1.5 s. Belady and the
# table fitted on the trace both keep x, 2 s old when y comes (10 of 30
# tokens hit); the plain LRU stores y over x, then x over y, and hits none.
# Told the wait per use left (x 3 s, y 1.5 s), or the mean gap over each
# block's life (the same here), a cache keeps y instead: 5 of 30. These
# count hits with --no-minus-one (whole columns of 5, the last token too);
# with the design's -1 rule x's hit is 9 tokens, a column of 5: 5 of 30.
{
	echo '{"timestamp": 0, "input_length": 10, "output_length": 1000, "hash_ids": [1]}'
	echo '{"timestamp": 2000, "input_length": 5, "output_length": 1, "hash_ids": [2]}'
	echo '{"timestamp": 3000, "input_length": 10, "output_length": 1000, "hash_ids": [1]}'
	echo '{"timestamp": 3500, "input_length": 5, "output_length": 1, "hash_ids": [2]}'
} >"$tmp/mc4.jsonl"
"$T" --trace "$tmp/mc4.jsonl" --capacity 10 --block-tokens 10 --column 5 --json --oracle \
	--baseline --no-minus-one >"$tmp/or" 2>/dev/null
check "--oracle exits 0" test $? -eq 0
check "--oracle: Belady 0.3333" test "$(field "$tmp/or" 1 belady_hit_ratio)" = 0.3333
check "--oracle: fitted table 0.3333" test "$(field "$tmp/or" 1 fitted_table_hit_ratio)" = 0.3333
check "--oracle: plain LRU 0.0" test "$(field "$tmp/or" 1 baseline_lru_hit_ratio)" = 0.0
check "--oracle: told the rate 0.1667" test "$(field "$tmp/or" 1 told_rate_hit_ratio)" = 0.1667
check "--oracle: told the life's gap 0.1667" \
	test "$(field "$tmp/or" 1 told_life_rate_hit_ratio)" = 0.1667
"$T" --trace "$tmp/mc4.jsonl" --capacity 10 --block-tokens 10 --column 5 --json --oracle \
	>"$tmp/or1" 2>/dev/null
check "--oracle, the -1 rule: Belady 0.1667 (x refills 5 of its 10 tokens)" \
	test "$(field "$tmp/or1" 1 belady_hit_ratio)" = 0.1667

# --l2 on the same trace, room for one block in each tier: x goes down when
# y comes, comes up when x returns (10 of 30 tokens, --no-minus-one, all from
# L2), y goes down; y's return hits L2 too (5 more). One block written per
# L1 miss after the first: x, y, x... Admitting only blocks used twice, x
# and y are each freed once before their second use: no hit from L2.
"$T" --trace "$tmp/mc4.jsonl" --capacity 10 --block-tokens 10 --column 5 --json \
	--no-minus-one --l2 10 --l2-admit all,seen2 >"$tmp/l2" 2>"$tmp/l2err"
check "--l2 exits 0" test $? -eq 0
l2f() { sed -n 1p "$tmp/l2" | python3 -c "import json,sys; print(json.load(sys.stdin)['l2'][$1]['$2'])"; }
check "--l2 all: hit ratio 0.5 (15 of 30)" test "$(l2f 0 hit_ratio)" = 0.5
check "--l2 all: all of it from L2" test "$(l2f 0 hit_tokens_l2)" = 15
check "--l2 all: 15 tokens read from L2" test "$(l2f 0 l2_read_tokens)" = 15
check "--l2 all: three blocks written (x, y, x)" test "$(l2f 0 l2_written_tokens)" = 30
check "--l2 seen2: no L2 hit" test "$(l2f 1 hit_tokens_l2)" = 0
# The same through the driver library's own second tier (--l2-dir: its
# shards' L2 in lib/kvdisk files), which frees columns (5 tokens), not
# blocks: y takes x's second column's room, so x's return hits its first
# column in DRAM and its second in L2, and y's return hits L2: 15 of 30
# again, 10 from L2. Every refilled byte checked, no file left behind.
"$T" --trace "$tmp/mc4.jsonl" --capacity 10 --block-tokens 10 --column 5 --json \
	--no-minus-one --l2 10 --l2-dir "$tmp" >"$tmp/l2lib" 2>"$tmp/l2err"
check "--l2-dir exits 0" test $? -eq 0
l2lib() { sed -n 1p "$tmp/l2lib" | python3 -c "import json,sys; print(json.load(sys.stdin)['l2'][0]['library']['$1'])"; }
check "--l2-dir: the library hits 15 of 30 too" test "$(l2lib hit_tokens)" = 15
check "--l2-dir: from L2, 10" test "$(l2lib hit_tokens_l2)" = 10
check "--l2-dir: no protocol error, no wrong byte" \
	test "$(l2lib protocol_errors)$(l2lib verify_failures)" = 00
check "--l2-dir: its L2 files are gone" test -z "$(ls "$tmp" | grep kvss_replay_l2)"
# Of its two L2 deletes, a put takes the first one's slot (its write is the
# clear, no header written). A replay that writes every waiting delete
# before each read, as a shard does not, absorbs none. (At least one: a
# delete still waiting 50 ms later, on a machine that stopped the replay
# that long, is written at the next poll.)
check "--l2-dir: 2 L2 deletes, at least 1 absorbed by a put" \
	sh -c "[ '$(l2lib l2_deletes)' = 2 ] && [ '$(l2lib l2_deletes_absorbed)' -ge 1 ]"
# A trace shorter than 10 s: its L2 line's busiest window is the whole
# trace, so its busiest rate is its mean (it said "busiest 10 s", below the
# mean: by whole seconds over more seconds than the span).
"$T" --trace "$tmp/mc4.jsonl" --capacity 10 --block-tokens 10 --column 5 --no-minus-one --l2 10 \
	>"$tmp/l2short" 2>/dev/null
check "a short trace: the L2 line's busiest is its window, at least its mean" python3 - "$tmp/l2short" <<'EOF2'
import re, sys
m = re.search(r"tokens/s written (\d+), busiest (\d+) s (\d+)", open(sys.argv[1]).read())
sys.exit(0 if m and int(m.group(2)) < 10 and int(m.group(3)) >= int(m.group(1)) > 0 else 1)
EOF2
# Refused before anything runs, exit 2, nothing on stdout (the main replay
# once ran first and its JSON ended half written): an --l2-dir with no
# --l2, empty (it wrote into /), a file, /tmp; an --l2 of inf (it read as
# no second tier) or 0; lists with an empty entry (they were skipped).
: >"$tmp/afile"
while IFS='|' read -r what args; do
	eval "\"\$T\" --trace \"\$tmp/mc4.jsonl\" --capacity 10 --block-tokens 10 --column 5 --json $args" \
		>"$tmp/refused.out" 2>"$tmp/refused.err"
	rc=$?
	check "refused: $what: exit 2, no stdout, one line (got $rc)" \
		sh -c "[ $rc -eq 2 ] && [ ! -s '$tmp/refused.out' ] && [ \$(wc -l <'$tmp/refused.err') = 1 ]"
	[ "$fail" -eq 0 ] || cat "$tmp/refused.err"
done <<EOF2
--l2-dir without --l2|--l2-dir "\$tmp"
--l2-dir ''|--l2 10 --l2-dir ''
--l2-dir a file|--l2 10 --l2-dir "\$tmp/afile"
--l2-dir /tmp|--l2 10 --l2-dir /tmp
--l2 inf|--l2 inf
--l2 10,0|--l2 10,0
--capacity 10, (a trailing comma)|--capacity 10,
--policy lru,,slru|--policy lru,,slru
--l2-admit ,all|--l2 10 --l2-admit ,all
EOF2
check "refused: no L2 file made in /" sh -c "! ls / | grep -q kvss_replay_l2"
# A disk slower than the wafer (1 MiB tokens at 1 GB/s against 1e6 tokens/s
# computed): neither takes its L2 hits, both count them.
"$T" --trace "$tmp/mc4.jsonl" --capacity 10 --block-tokens 10 --column 5 --json --no-minus-one \
	--l2 10 --l2-dir "$tmp" --kv-bytes-per-token 1048576 --recompute-tokens-per-s 1e6 \
	--l2-read-gbps 1 >"$tmp/l2lib" 2>"$tmp/l2err"
check "--recompute-tokens-per-s: the library takes no L2 hit" test "$(l2lib hit_tokens_l2)" = 0
check "--recompute-tokens-per-s: and counts the 10 tokens it left" \
	test "$(l2lib recompute_faster_tokens)" = 10
check "--recompute-tokens-per-s: the model counts its 15" test "$(sed -n 1p "$tmp/l2lib" |
	python3 -c "import json,sys; print(json.load(sys.stdin)['l2'][0]['recompute_faster_tokens'])")" = 15
"$T" --trace test/data/chat.jsonl --capacity 100 --l2 1000 >/dev/null 2>"$tmp/l2err"
check "--l2 on a trace without block ids exits 2, naming it" \
	sh -c "[ $? -eq 2 ] && grep -q -- '--l2 needs a trace with block ids' '$tmp/l2err'"
# --baseline too: its plain LRU runs over the trace's blocks; without them
# it printed a hit ratio of 0.0000 (and drew it).
"$T" --trace test/data/chat.jsonl --capacity 100 --baseline >"$tmp/bl.out" 2>"$tmp/bl.err"
check "--baseline on a trace without block ids: exit 2, naming it and the trace, no figure" \
	sh -c "[ $? -eq 2 ] && [ ! -s '$tmp/bl.out' ] && grep -q -- '^kvss-trace: --baseline needs a trace with block ids (the Mooncake format.s hash_ids); test/data/chat.jsonl has none$' '$tmp/bl.err'"
"$T" --trace "$tmp/mc4.jsonl" --capacity 10 --l2 10 --recompute-tokens-per-s 1e4 \
	>/dev/null 2>"$tmp/l2err"
check "--recompute-tokens-per-s without --kv-bytes-per-token exits 2, naming it" \
	sh -c "[ $? -eq 2 ] && grep -q -- '--kv-bytes-per-token' '$tmp/l2err'"
"$T" --trace "$tmp/mc4.jsonl" --capacity 10 --l2 10 --l2-admit twice >/dev/null 2>"$tmp/l2err"
check "--l2-admit twice exits 2, naming it" \
	sh -c "[ $? -eq 2 ] && grep -q -- \"--l2-admit: 'twice'\" '$tmp/l2err'"

# --plot: a PNG through gnuplot of each policy asked, the baseline, Belady
# and the second tier; a file that cannot be written is an error naming it.
if command -v gnuplot >/dev/null; then
	"$T" --trace "$tmp/mc4.jsonl" --capacity 10,20,40 --block-tokens 10 --column 5 \
		--policy lru,slru --baseline --oracle --l2 10 --plot "$tmp/hit.png" >"$tmp/plot.out" 2>"$tmp/plot.err"
	check "--plot exits 0" test $? -eq 0
	check "--plot writes a PNG" sh -c "head -c 4 '$tmp/hit.png' | od -An -tx1 | grep -q '89 50 4e 47'"
	check "--plot: each policy in turn" test "$(grep -c '^policy ' "$tmp/plot.out")" = 2
	"$T" --trace "$tmp/mc4.jsonl" --capacity 10 --block-tokens 10 --plot /nonexistent/x.png \
		>"$tmp/plot.out" 2>"$tmp/plot.err"
	check "--plot to a directory that is not there: exit 2 before the run, naming the directory" \
		sh -c "[ $? -eq 2 ] && [ ! -s '$tmp/plot.out' ] && grep -q -- '--plot /nonexistent/x.png: the directory /nonexistent does not exist' '$tmp/plot.err'"
	# The directory's mkdir, to paste: single-quoted for a shell (a backquote
	# runs nothing), no raw newline in the message.
	bad=$(printf '%s/nu-plot/a`touch %s/PWNED2`\nb/x.png' "$tmp" "$tmp")
	"$T" --trace "$tmp/mc4.jsonl" --capacity 10 --block-tokens 10 --plot "$bad" \
		>/dev/null 2>"$tmp/plot.err"
	check "--plot in a missing directory named with a backquote and a newline: exit 2, one line" \
		sh -c "[ $? -eq 2 ] && [ \$(wc -l <'$tmp/plot.err') -eq 1 ]"
	sed -n 's/.*(mkdir -p \(.*\))$/\1/p' "$tmp/plot.err" >"$tmp/mkdir.sh"
	# $'\n' (POSIX.1-2024) for the newline: bash, ksh, zsh, not yet dash.
	(cd "$tmp" && bash -c "mkdir -p $(cat "$tmp/mkdir.sh")")
	check "--plot's mkdir -p, pasted into a shell, runs nothing and makes that very directory" \
		sh -c "[ ! -e '$tmp/PWNED2' ] && [ -d \"\$(dirname \"\$1\")\" ]" _ "$bad"
	sed 's/^/  /' "$tmp/plot.err"
	# The file's name is never gnuplot's: a backquote runs nothing (gnuplot
	# substitutes them in double quotes), quotes, backslashes and newlines
	# name exactly that file, and a write that fails is an error.
	mkdir "$tmp/plotdir"
	Tabs=$(realpath "$T")
	(cd "$tmp/plotdir" && "$Tabs" --trace "$tmp/mc4.jsonl" --capacity 10,20 \
		--block-tokens 10 --column 5 --plot 'x`touch PWNED`.png' >/dev/null 2>&1)
	check "--plot 'x\`touch PWNED\`.png': exits 0" test $? -eq 0
	check "--plot 'x\`touch PWNED\`.png': no command ran (no PWNED)" test ! -e "$tmp/plotdir/PWNED"
	check "--plot 'x\`touch PWNED\`.png': a PNG by that very name" \
		sh -c "head -c 4 '$tmp/plotdir/x\`touch PWNED\`.png' | od -An -tx1 | grep -q '89 50 4e 47'"
	odd=$(printf '%s/plotdir/a"b\\c\nd%se.png' "$tmp" "'")
	"$T" --trace "$tmp/mc4.jsonl" --capacity 10,20 --block-tokens 10 --column 5 --plot "$odd" \
		>/dev/null 2>&1
	check "--plot with a quote, a backslash, a newline and an apostrophe: that very file" \
		sh -c "[ $? -eq 0 ] && [ \"\$(ls -b '$tmp/plotdir' | wc -l)\" -eq 2 ] && head -c 4 \"\$1\" | od -An -tx1 | grep -q '89 50 4e 47'" _ "$odd"
	"$T" --trace "$tmp/mc4.jsonl" --capacity 10,20 --block-tokens 10 --column 5 --plot /dev/full \
		>/dev/null 2>"$tmp/plot.err"
	check "--plot /dev/full: exit 1, the write's error" \
		sh -c "[ $? -eq 1 ] && grep -q -- '--plot /dev/full: writing it: No space left on device' '$tmp/plot.err'"
	sed -n 1,3p "$tmp/plot.err" | sed 's/^/  /'
else
	echo "kvss-trace: --plot not tested: no gnuplot (scripts/deps.sh installs gnuplot-nox)"
fi

# Part of the public trace, if it is there.
MC=../shared/traces/mooncake_synthetic.jsonl
if [ -f "$MC" ]; then
	"$T" --trace "$MC" --capacity 1e6,inf --limit 300 --json --baseline >"$tmp/mc" 2>/dev/null
	check "mooncake replay exits 0" test $? -eq 0
	check "mooncake: no protocol errors" test "$(field "$tmp/mc" 1 protocol_errors)" = 0
	check "mooncake: no verify failures" test "$(field "$tmp/mc" 2 verify_failures)" = 0
	check "mooncake: capacity kept" test "$(field "$tmp/mc" 1 peak_stored_tokens)" -le 1000000
else
	echo "  (../shared/traces absent: the Mooncake replay is skipped)"
fi
# Numbers are read whole, 1e6 notation too: --generate 3e3 is 3,000
# requests (it ran 3), and what is not a whole number is refused, exit 2.
"$BUILD/kvss-trace" --generate 2e2 --capacity 1e5 --json >"$tmp/gen2e2" 2>/dev/null
"$BUILD/kvss-trace" --generate 1k --limit 0.2k --capacity inf --json >"$tmp/gen1k" 2>/dev/null
check "--generate 1k --limit 0.2k: counts take k, M, G as --capacity does (200 requests)" \
	grep -q '"requests": 200,' "$tmp/gen1k"
check "--generate 2e2 replays 200 requests" grep -q '"requests": 200,' "$tmp/gen2e2"
"$BUILD/kvss-trace" --trace test/data/chat.jsonl --limit 2e0 --capacity inf --json >"$tmp/lim" 2>/dev/null
check "--limit 2e0 replays 2 requests" grep -q '"requests": 2,' "$tmp/lim"
for bad in "--generate 3e3x" "--generate 1.5" "--ttl-last -1" "--column 0" "--limit abc" "--orgs 2m"; do
	set -- $bad
	"$BUILD/kvss-trace" --trace test/data/chat.jsonl --capacity inf "$@" >"$tmp/bad" 2>&1
	check "$bad: exit 2, naming the option" sh -c "[ $? -eq 2 ] && grep -q -- '^kvss-trace: $1: ' '$tmp/bad'"
done

# Files that are not traces: refused before anything is read, exit 2.
timeout 20 "$BUILD/kvss-trace" --trace /dev/zero --capacity 1e6 >"$tmp/zero" 2>&1
check "--trace /dev/zero: exit 2, refused as a device" sh -c \
	"[ $? -eq 2 ] && grep -q 'not a regular file (a character device)' '$tmp/zero'"
mkfifo "$tmp/fifo"
timeout 20 "$BUILD/kvss-trace" --trace "$tmp/fifo" --capacity 1e6 >"$tmp/fifo.out" 2>&1
check "--trace FIFO: exit 2 at once, refused as a FIFO" sh -c \
	"[ $? -eq 2 ] && grep -q 'not a regular file (a FIFO)' '$tmp/fifo.out'"
# Per-organization TTLs on the trace's clock: two
# organizations whose system prompts come back every 20 s of trace time.
python3 - >"$tmp/orgs.jsonl" <<'PY'
import json
for i in range(40):
    org = "acme" if i % 2 == 0 else "zeta"
    base = 1000 if org == "acme" else 50000
    toks = [base + k for k in range(1024)] + [900000 + i * 100 + k for k in range(64)]
    print(json.dumps({"timestamp": i * 10000, "org": org, "tokens": toks}))
PY
orgratio() { # orgratio JSONFILE ORG
	python3 -c 'import json,sys; print([o["hit_ratio"] for o in json.loads(open(sys.argv[1]).readline())["orgs"] if o["org"] == sys.argv[2]][0])' "$1" "$2"
}
"$BUILD/kvss-trace" --trace "$tmp/orgs.jsonl" --capacity 100000 --json --org-ttl acme:15:0 \
	--org-ttl zeta:0:0 >"$tmp/orgttl.json" 2>/dev/null
check "--org-ttl: runs clean" test $? -eq 0
"$BUILD/kvss-trace" --trace "$tmp/orgs.jsonl" --capacity 100000 --json --org-ttl acme:30:0 \
	--org-ttl zeta:0:0 >"$tmp/orgttl30.json" 2>/dev/null
echo "kvss-trace: --org-ttl acme:15: acme $(orgratio "$tmp/orgttl.json" acme), zeta $(orgratio "$tmp/orgttl.json" zeta); acme:30: acme $(orgratio "$tmp/orgttl30.json" acme)"
check "--org-ttl: an organization whose prompt comes back after its TTL (20 s > 15 s) never hits" \
	test "$(orgratio "$tmp/orgttl.json" acme)" = 0.0
check "--org-ttl: ... another organization with none hits every time but its first" \
	holds "$(orgratio "$tmp/orgttl.json" zeta) > 0.85"
check "--org-ttl: ... and with a TTL above the gap (30 s) the first one hits too" \
	holds "$(orgratio "$tmp/orgttl30.json" acme) > 0.85"
"$BUILD/kvss-trace" --trace "$tmp/orgs.jsonl" --capacity 100000 --orgs-from config/memif-driver.cfg \
	>"$tmp/orgsfrom.out" 2>&1
check "--orgs-from: the application's driver.orgs, on the trace's clock" \
	grep -q "org acme (ttl_last_s 600, ttl_first_s 0; 0: the global; DRAM share 0, cap 1): 19456 of 21760 prompt tokens hit" \
	"$tmp/orgsfrom.out"
"$BUILD/kvss-trace" --trace "$tmp/orgs.jsonl" --org-ttl acme-15 >"$tmp/orgbad.out" 2>&1
check "--org-ttl: a bad value is refused with exit 2, saying the form" \
	sh -c "[ $? -eq 2 ] && grep -q 'want NAME:TTL_LAST_S:TTL_FIRST_S' '$tmp/orgbad.out'"
"$BUILD/kvss-trace" --trace "$tmp/orgs.jsonl" --orgs-from "$tmp/nonexistent.cfg" >"$tmp/orgbad2.out" 2>&1
check "--orgs-from: a missing file is refused with exit 2, named" \
	sh -c "[ $? -eq 2 ] && grep -q 'nonexistent.cfg' '$tmp/orgbad2.out'"
# Multimodal input: caching stops before the first
# multimodal token. Two requests with the same 1,056 tokens; in the first,
# tokens 512-575 are an image.
python3 - "$tmp/mm.jsonl" "$tmp/mm0.jsonl" <<'PY'
import json, sys
toks = list(range(1000, 2024)) + list(range(900000, 900032))
with open(sys.argv[1], "w") as a, open(sys.argv[2], "w") as b:
    for i in range(2):
        d = {"timestamp": i * 1000, "org": "acme", "tokens": toks}
        b.write(json.dumps(d) + "\n")
        if i == 0:
            d["multimodal"] = [512, 576]
        a.write(json.dumps(d) + "\n")
PY
jfield() { python3 -c 'import json,sys; print(json.loads(open(sys.argv[1]).readline())[sys.argv[2]])' "$1" "$2"; }
"$BUILD/kvss-trace" --trace "$tmp/mm.jsonl" --capacity 100000 --json >"$tmp/mm.json" 2>/dev/null
"$BUILD/kvss-trace" --trace "$tmp/mm0.jsonl" --capacity 100000 --json >"$tmp/mm0.json" 2>/dev/null
echo "kvss-trace: multimodal: the second request hits $(jfield "$tmp/mm.json" hit_tokens) tokens after an image at 512 ($(jfield "$tmp/mm.json" multimodal_trimmed_tokens) not cached), $(jfield "$tmp/mm0.json" hit_tokens) without"
check "multimodal: caching stopped before the image: the next request hits its first 512 tokens" \
	test "$(jfield "$tmp/mm.json" hit_tokens)" = 512
check "multimodal: the tokens not cached are counted (1,056 - 512)" \
	test "$(jfield "$tmp/mm.json" multimodal_trimmed_tokens)" = 544
check "multimodal: without the image, the whole prefix hits (16 columns)" \
	test "$(jfield "$tmp/mm0.json" hit_tokens)" = 1024 -a "$(jfield "$tmp/mm0.json" multimodal_trimmed_tokens)" = 0
printf '{"tokens": [1, 2, 3, 4], "multimodal": [3, 9]}\n' >"$tmp/mmbad.jsonl"
"$BUILD/kvss-trace" --trace "$tmp/mmbad.jsonl" --capacity 100 >"$tmp/mmbad.out" 2>&1
check "multimodal: a range past the prompt is refused (exit 2), naming line and field" \
	sh -c "[ $? -eq 2 ] && grep -q 'mmbad.jsonl:1: multimodal: want' '$tmp/mmbad.out'"
"$BUILD/kvss-trace" --generate 300 --multimodal-every 4 --capacity 1e6 --json >"$tmp/mmgen.json" 2>/dev/null
"$BUILD/kvss-trace" --generate 300 --capacity 1e6 --json >"$tmp/mmgen0.json" 2>/dev/null
check "multimodal: the built-in workload's images (--multimodal-every) cut what is cached, and hits" \
	holds "$(jfield "$tmp/mmgen.json" multimodal_trimmed_tokens) > 0 and $(jfield "$tmp/mmgen.json" hit_ratio) < $(jfield "$tmp/mmgen0.json" hit_ratio)"

# make demo's built-in workload (--documents 300): its reuse is far apart,
# so DRAM alone (the demo's 1e6 tokens) gets well under half of what a
# store holding everything gets (the demo's second tier holds 1e7): the
# figures the demo's verdict and docs/kvss-trace.md give.
"$BUILD/kvss-trace" --generate 2000 --documents 300 --capacity 1e6,inf --json >"$tmp/docs.json" 2>/dev/null
dram=$(sed -n 1p "$tmp/docs.json" | python3 -c 'import json,sys; print(json.load(sys.stdin)["hit_ratio"])')
all=$(sed -n 2p "$tmp/docs.json" | python3 -c 'import json,sys; print(json.load(sys.stdin)["hit_ratio"])')
echo "documents: the demo's built-in workload, DRAM 1e6 $dram, unlimited $all"
check "documents: DRAM alone gets under half of what holding everything gets ($dram, $all)" \
	holds "$dram < 0.5 * $all"
check "documents: exactly the documented figures (0.2823 and 0.7655)" \
	test "$dram $all" = "0.2823 0.7655"
"$BUILD/kvss-trace" --trace "$tmp/mmbad.jsonl" --documents 3 --capacity 1 >"$tmp/docsbad.out" 2>&1
check "documents: --documents with a trace is refused (exit 2), saying why" \
	sh -c "[ $? -eq 2 ] && grep -q 'only with --generate' '$tmp/docsbad.out'"

# The last generated token: a wafer never runs the last
# token of an answer, so its KV is never evicted. A 16-token prompt with a
# 4-token answer allowed 24: 16 + 3 tokens stored; the next turn (prompt,
# the answer, a new message) hits 16 in columns of 4, where storing all 4
# answer tokens would give 20.
python3 - "$tmp/last.jsonl" <<'PY'
import json, sys
def answer(pos): return (pos * 2654435761) & 0xffffffff
p = list(range(1, 17))
with open(sys.argv[1], "w") as f:
    f.write(json.dumps({"org": "a", "tokens": p, "cache_length_allowed": 24, "output_length": 4}) + "\n")
    t = p + [answer(16 + i) for i in range(4)] + [900, 901, 902, 903, 904]
    f.write(json.dumps({"org": "a", "tokens": t, "output_length": 1}) + "\n")
PY
"$T" --trace "$tmp/last.jsonl" --capacity inf --column 4 --json >"$tmp/last.json" 2>/dev/null
check "last generated token: the next turn hits 16 (16 + 3 stored), not 20" \
	test "$(jfield "$tmp/last.json" hit_tokens)" = 16
check "last generated token: 19 tokens evicted by the first request, 28 in all" \
	test "$(jfield "$tmp/last.json" evicted_tokens)" = 28

# Speculative decoding: rounds of 4 proposals, 30%
# rejected; the rejected ones are evicted and then overwritten in place, and
# the built-in workload's chats hit into earlier answers, so a shard that
# kept a rejected token's bytes would fail the byte check. The same seed
# replays exactly; another seed decides otherwise.
spec() { "$T" --generate 400 --capacity 2e5 --json "$@" 2>/dev/null | head -1; }
spec --speculate 4 --spec-reject-pct 30 >"$tmp/spec.json"
spec --speculate 4 --spec-reject-pct 30 >"$tmp/spec2.json"
spec --speculate 4 --spec-reject-pct 30 --spec-seed 7 >"$tmp/spec7.json"
spec >"$tmp/nospec.json"
echo "kvss-trace: speculation: $(jfield "$tmp/spec.json" spec_rounds) rounds, $(jfield "$tmp/spec.json" spec_accepted) of $(jfield "$tmp/spec.json" spec_proposed) accepted, $(jfield "$tmp/spec.json" spec_overwrites) overwritten, $(jfield "$tmp/spec.json" generated_hit_tokens) hit tokens in answers; hit ratio $(jfield "$tmp/spec.json" hit_ratio) (without: $(jfield "$tmp/nospec.json" hit_ratio))"
check "speculation: rejected tokens were evicted and overwritten" \
	holds "$(jfield "$tmp/spec.json" spec_overwrites) > 1000"
check "speculation: about 30% rejected per proposal: accepted share of proposals in (0.3, 0.7)" \
	holds "0.3 < $(jfield "$tmp/spec.json" spec_accepted) / $(jfield "$tmp/spec.json" spec_proposed) < 0.7"
check "speculation: later turns hit into verified generated tokens" \
	holds "$(jfield "$tmp/spec.json" generated_hit_tokens) > 1000"
check "speculation: every refilled byte right, no protocol error" \
	test "$(jfield "$tmp/spec.json" verify_failures) $(jfield "$tmp/spec.json" protocol_errors)" = "0 0"
check "speculation: the same seed replays exactly" cmp -s <(sed 's/"wall_s": [0-9.]*//' "$tmp/spec.json") <(sed 's/"wall_s": [0-9.]*//' "$tmp/spec2.json")
check "speculation: another seed decides otherwise" \
	test "$(jfield "$tmp/spec.json" spec_accepted)" != "$(jfield "$tmp/spec7.json" spec_accepted)"
check "speculation: off by default (no rounds reported)" \
	python3 -c "import json,sys; sys.exit('spec_rounds' in json.load(open('$tmp/nospec.json')))"
"$T" --generate 10 --capacity 1e5 --speculate 65 >/dev/null 2>"$tmp/specbad"
check "speculation: --speculate 65 is refused (exit 2), naming the option" \
	sh -c "[ $? -eq 2 ] && grep -q -- '--speculate' '$tmp/specbad'"

# Draft and target: a draft beside the target, its own
# map and shard; a smaller draft hits less (some requests hit in the target
# only), a larger one more (some in the draft only).
spec --draft 5e4 >"$tmp/draft-small.json"
spec --draft 5e5 --speculate 4 >"$tmp/draft-big.json"
echo "kvss-trace: draft: target hit ratio $(jfield "$tmp/draft-small.json" hit_ratio); draft of 5e4 $(jfield "$tmp/draft-small.json" draft_hit_ratio) ($(jfield "$tmp/draft-small.json" requests_hit_target_only) requests hit in the target only), of 5e5 $(jfield "$tmp/draft-big.json" draft_hit_ratio) ($(jfield "$tmp/draft-big.json" requests_hit_draft_only) in the draft only)"
check "draft: the target's hits are its own (the same as without a draft)" \
	test "$(jfield "$tmp/draft-small.json" hit_tokens)" = "$(jfield "$tmp/nospec.json" hit_tokens)"
check "draft: a smaller draft hits less; requests hit in the target only" \
	holds "$(jfield "$tmp/draft-small.json" draft_hit_tokens) < $(jfield "$tmp/draft-small.json" hit_tokens) and $(jfield "$tmp/draft-small.json" requests_hit_target_only) > 0"
check "draft: a larger draft hits more; requests hit in the draft only" \
	holds "$(jfield "$tmp/draft-big.json" draft_hit_tokens) > $(jfield "$tmp/draft-big.json" hit_tokens) and $(jfield "$tmp/draft-big.json" requests_hit_draft_only) > 0"
check "draft: with speculation in both models, every byte right" \
	holds "$(jfield "$tmp/draft-big.json" spec_overwrites) > 0 and $(jfield "$tmp/draft-big.json" verify_failures) == 0 and $(jfield "$tmp/draft-big.json" protocol_errors) == 0"
# The fleet model (docs/kvss-trace.md): 4 replicas of
# DRAM 1e5 on the built-in workload, a shared level of 4e5 or unbounded,
# each rule; replica 1 restarted empty at request 1000, a fifth added at
# 1500. Deterministic: exact figures. Without a shared level the model hits
# what the driver library's replay over the same replicas hits (within 0.1%
# of the tokens: the library also counts a prompt's partial last column).
fl() { python3 -c 'import json,sys; d=json.loads(open(sys.argv[1]).readline()); f=d.get("fleet"); print(eval(sys.argv[2]))' "$@"; }
"$T" --generate 2000 --capacity 1e5 --replicas 4 --shared 4e5,inf --restart 1@1000 \
	--add-replica-at 1500 --json >"$tmp/fleet.json" 2>/dev/null
check "fleet: exits 0" test $? -eq 0
echo "kvss-trace: fleet of 4 x 1e5: $(fl "$tmp/fleet.json" '[(r["shared_tokens"], r["admit"], r["hit_ratio"]) for r in f["runs"]]'); one replica of 4e5: $(fl "$tmp/fleet.json" 'f["one"][0]["hit_ratio"]')"
check "fleet: five runs (none; 4e5 and inf, evicted and all)" test "$(fl "$tmp/fleet.json" 'len(f["runs"])')" = 5
check "fleet: the model without a shared level hits what the library's replay does (0.1%)" \
	test "$(fl "$tmp/fleet.json" 'abs(f["runs"][0]["hit_tokens_dram"] - d["hit_tokens"]) < d["input_tokens"] / 1000')" = True
check "fleet: exact figures (none 3919872 from DRAM; 4e5 evicted 122880 and all 127552 from the shared level)" \
	test "$(fl "$tmp/fleet.json" '[f["runs"][0]["hit_tokens_dram"], f["runs"][1]["hit_tokens_shared"], f["runs"][2]["hit_tokens_shared"]]')" = "[3919872, 122880, 127552]"
check "fleet: one replica of 4e5 0.6042; the unbounded shared level taking all is one unbounded cache (0.6106)" \
	test "$(fl "$tmp/fleet.json" '[f["one"][0]["hit_ratio"], f["runs"][4]["hit_ratio"], f["one"][2]["hit_ratio"]]')" = "[0.6042, 0.6106, 0.6106]"
check "fleet: a restart empties the replica: its first request hits nothing locally (1664 without the restart)" \
	test "$(fl "$tmp/fleet.json" 'sorted(set((r["restart"]["first_local_hit_tokens"], r["restart"]["first_local_hit_tokens_same"]) for r in f["runs"]))')" = "[(0, 1664)]"
check "fleet: after the restart, the unbounded level holding all gives back those 1664 tokens at once" \
	test "$(fl "$tmp/fleet.json" 'f["runs"][4]["restart"]["first_shared_hit_tokens"]')" = 1664
check "fleet: without a shared level the restart costs hits (after 0.6325 < 0.6449 without it)" \
	test "$(fl "$tmp/fleet.json" '(f["runs"][0]["restart"]["after"], f["runs"][0]["restart"]["after_same"])')" = "(0.6325, 0.6449)"
check "fleet: a fifth replica added takes requests (102 of its first)" \
	test "$(fl "$tmp/fleet.json" '(f["runs"][0]["add"]["replicas"], f["runs"][0]["add"]["new_replica_requests"])')" = "(5, 102)"
"$T" --generate 2000 --capacity 1e5 --replicas 4 --shared 4e5,inf --restart 1@1000 \
	--add-replica-at 1500 --json 2>/dev/null | sed 's/"wall_s": [0-9.]*//' >"$tmp/fleet2.json"
check "fleet: the same run again gives the same figures" \
	cmp -s <(sed 's/"wall_s": [0-9.]*//' "$tmp/fleet.json") "$tmp/fleet2.json"
"$T" --generate 2000 --capacity 1e5 --replicas 4 --shared 4e5 --shared-admit all --shared-touch \
	--restart 1@1000 >"$tmp/fleet.txt" 2>/dev/null
check "fleet (text): with --shared-touch, all: hit ratio 0.6058, the restarted replica's first request 1664 from the shared level" \
	sh -c "grep -q 'fleet shared_tokens=400000 admit=all hit_ratio=0.6058 ' '$tmp/fleet.txt' && grep 'fleet-restart shared_tokens=400000' '$tmp/fleet.txt' | grep -q ' first_local_hit=0 first_shared_hit=1664 '"
for bad in "--restart 1" "--restart 4@10" "--restart 0@2000" "--restart x@5" "--shared 0" \
	"--shared 10" "--shared lots" "--shared 1e6 --shared-admit most" "--add-replica-at 0"; do
	opt=${bad%% *}
	# shellcheck disable=SC2086 # the options, split
	"$T" --generate 2000 --capacity 1e5 --replicas 4 $bad >/dev/null 2>"$tmp/err"
	check "fleet: $bad is refused (exit 2), naming $opt" sh -c "[ $? -eq 2 ] && grep -q -- '$opt' '$tmp/err'"
done
"$T" --generate 20 --capacity 1e5 --shared-ttl 60 >/dev/null 2>"$tmp/err"
check "fleet: --shared-ttl without the fleet is refused" sh -c "[ $? -eq 2 ] && grep -q -- '--shared-ttl' '$tmp/err'"
# --ttft: times to first token, modelled (lib/wafermodel) on the replay's
# hits. By hand first: three prompts of one organization, 64, 96 and 128
# tokens, each the one before and 32 more, columns of 8, 1 s apart: hits
# 0, 64 and 96. Computing 2 us a token (5e5 tokens/s); a refill 80 us and
# 1 us a token (1000 bytes at 1 GB/s). Compute-only: 128, 192, 256 us.
# Io-only: 128; 80 + 64 + 32 x 2 = 208; 80 + 96 + 64 = 240. Adaptive: the
# hit of 64 costs 144 us to refill against 128 to compute, so it is
# computed (192), the hit of 96 taken (176 against 192): 128, 192, 240, 96
# hit tokens. p50 is the middle one, p99 the last.
for i in 0 1 2; do
	printf '{"org": "a", "timestamp": %d, "tokens": [%s], "output_length": 0}\n' $((i * 1000)) \
		"$(seq -s, 1 $((64 + 32 * i)))"
done >"$tmp/ttft.jsonl"
ttft_hand=(--trace "$tmp/ttft.jsonl" --capacity inf --column 8 --ttft --recompute-tokens-per-s 5e5
	--kv-bytes-per-token 1000 --refill-latency-us 80 --refill-read-gbps 1 --json)
ttft_keys() { # the ttft keys of a JSON line, in order, and the hit tokens
	python3 -c 'import json,sys; d=json.loads(sys.stdin.readline()); print(d["hit_tokens"], *[d[k] for k in sys.argv[1:]])' \
		ttft_compute_only_p50_ms ttft_compute_only_p99_ms ttft_io_only_p50_ms ttft_io_only_p99_ms \
		ttft_adaptive_p50_ms ttft_adaptive_p99_ms ttft_adaptive_hit_tokens
}
check "ttft by hand: hits 160; compute-only 0.192/0.256 ms, io-only 0.208/0.240, adaptive 0.192/0.240 taking 96" \
	test "$("$T" "${ttft_hand[@]}" 2>/dev/null | ttft_keys)" = "160 0.192 0.256 0.208 0.24 0.192 0.24 96"
# The same 100 us apart (--time-scale 1e-4) on one slot: each waits for the
# one before. Compute-only: 128; 128 + 192 - 100 = 220; 320 + 256 - 200 =
# 376. Io-only: 128; 128 + 144 + 64 - 100 = 236; 336 + 176 + 64 - 200 = 376.
# Adaptive: 128; 220; 320 + 176 + 64 - 200 = 360.
check "ttft by hand, queued on one slot: compute-only 0.220/0.376, io-only 0.236/0.376, adaptive 0.220/0.360" \
	test "$("$T" "${ttft_hand[@]}" --time-scale 1e-4 --max-inflight 1 2>/dev/null | ttft_keys)" = \
	"160 0.22 0.376 0.236 0.376 0.22 0.36 96"
# The same 100 us apart on 8 slots: adaptive counts the prefills queued
# when a request begins, as the driver does. The second begins at 100
# with the first's prefill running to 128: its 64-token hit refilled ends
# at 244, computed it would end at 128 + 128 = 256 (28 us queued + 128):
# taken, though alone it is not (144 against 128). Adaptive: 128; 100 +
# 144 + 64 = 308, less 100 = 208; the third as before, 240; 160 hit tokens.
# Compute-only: 128; 128 + 192 - 100 = 220; 320 + 256 - 200 = 376.
check "ttft by hand, the prefill queue in the rule: compute-only 0.220/0.376, adaptive 0.208/0.240 taking 160" \
	test "$("$T" "${ttft_hand[@]}" --time-scale 1e-4 2>/dev/null | ttft_keys)" = \
	"160 0.22 0.376 0.208 0.24 0.208 0.24 160"
# With the library's second tier (--l2-dir) the hits come from L2 too: on
# the trace of --l2-dir above, x's return (10 tokens) hits 5 in DRAM and 5
# in L2, y's return (5) hits 5 in L2, nothing computed (--no-minus-one).
# Computing 10 us a token; DRAM's line 10 us + 1 us a token, L2's 100 us +
# 1 us a token. Compute-only: 100, 50, 100, 50 us. Io-only: the DRAM line
# over the whole hit and L2's over its L2 part: x 20 + 105 = 125, y 15 +
# 105 = 120. Adaptive: x's DRAM part is worth it (15 us against 50), its L2
# part not (105 against 50): 15 + 5 x 10 = 65; y's L2 part not: 50 (5 hit
# tokens). p50 is the third of four, p99 the fourth. The row above (no L2)
# hits only the 5 of y.
"$T" --trace "$tmp/mc4.jsonl" --capacity 10 --block-tokens 10 --column 5 --json --no-minus-one \
	--l2 10 --l2-dir "$tmp" --ttft --recompute-tokens-per-s 1e5 --kv-bytes-per-token 1000 \
	--refill-latency-us 10 --refill-read-gbps 1 --l2-latency-us 100 --l2-read-gbps 1 \
	>"$tmp/ttft-l2.json" 2>/dev/null
check "ttft with L2 by hand: exits 0" test $? -eq 0
check "ttft with L2 by hand: the library's hits 10 from L2 of 15; compute-only 0.100/0.100, io-only 0.120/0.125, adaptive 0.065/0.100 taking 5" \
	test "$(sed -n 1p "$tmp/ttft-l2.json" | python3 -c 'import json,sys; d=json.load(sys.stdin)["l2"][0]["library"]; print(d["hit_tokens_l2"], json.dumps(d))' |
		{ read -r l2 j; echo "$l2 $(ttft_keys <<<"$j")"; })" = \
	"10 15 0.1 0.1 0.12 0.125 0.065 0.1 5"
check "ttft with L2 by hand: the row (DRAM alone) hits 5, all taken: io-only 0.065/0.100" \
	test "$(ttft_keys <"$tmp/ttft-l2.json")" = "5 0.1 0.1 0.065 0.1 0.065 0.1 5"
check "ttft with L2: its files are gone" test -z "$(find "$tmp" -maxdepth 1 -name "*kvss_replay_l2*")"
# The built-in workload (it has timestamps), with hits.
ttft=(--generate 200 --capacity 1e5 --ttft --kv-bytes-per-token 256)
"$T" "${ttft[@]}" --recompute-tokens-per-s 1e4 >"$tmp/ttft.txt" 2>/dev/null
check "ttft: exits 0 and prints the line under the row" sh -c "[ $? -eq 0 ] && grep -qE \
'^ +ttft \(modelled; arrivals the trace.s times x 1, 8 slots, 10000 tokens/s\): compute-only p50 [0-9]+\.[0-9]{3} ms p99 [0-9]+\.[0-9]{3} ms; io-only p50 [0-9]+\.[0-9]{3} ms p99 [0-9]+\.[0-9]{3} ms; adaptive p50 [0-9]+\.[0-9]{3} ms p99 [0-9]+\.[0-9]{3} ms, [0-9]+ of [0-9]+ hit tokens refilled \(p50 [0-9.]+x sooner than compute-only\)$' '$tmp/ttft.txt'"
grep ' ttft ' "$tmp/ttft.txt" | sed 's/^ */  /'
"$T" "${ttft[@]}" --recompute-tokens-per-s 1e4 --json >"$tmp/ttft-slow.json" 2>/dev/null
"$T" "${ttft[@]}" --recompute-tokens-per-s 1e9 --json >"$tmp/ttft-fast.json" 2>/dev/null
# Computed, not timed: a hit at 10,000 tokens/s is far sooner than computing it.
check "ttft: at 10,000 tokens/s, with hits, compute-only p50 >= io-only p50" \
	holds "$(jfield "$tmp/ttft-slow.json" hit_tokens) > 0 and $(jfield "$tmp/ttft-slow.json" ttft_compute_only_p50_ms) >= $(jfield "$tmp/ttft-slow.json" ttft_io_only_p50_ms)"
check "ttft: at 10,000 tokens/s adaptive refills every hit the replay took" \
	test "$(jfield "$tmp/ttft-slow.json" ttft_adaptive_hit_tokens)" = "$(jfield "$tmp/ttft-slow.json" hit_tokens)"
check "ttft: at 1e9 tokens/s adaptive refills none (computing beats 20 us of latency)" \
	test "$(jfield "$tmp/ttft-fast.json" ttft_adaptive_hit_tokens)" = 0
check "ttft: the replay takes the same hits whatever the prefill rate (the io-only view)" \
	test "$(jfield "$tmp/ttft-fast.json" hit_tokens)" = "$(jfield "$tmp/ttft-slow.json" hit_tokens)"
# The same options twice: the same output (but the wall time).
for k in 1 2 3; do
	"$T" --generate 200 --capacity 1e5,inf --ttft --kv-bytes-per-token 256 \
		--recompute-tokens-per-s 69400 --policy lru,slru \
		--arrivals poisson --arrival-rate 10 --arrival-seed $((k < 3 ? 6 : 7)) --json 2>/dev/null |
		sed 's/"wall_s": [0-9.]*//' >"$tmp/ttft-det$k.json"
	"$T" "${ttft[@]}" --recompute-tokens-per-s 69400 --arrivals poisson --max-inflight 3 \
		--prefill-overhead-us 150 --refill-latency-us 0 2>/dev/null | grep ' ttft ' >"$tmp/ttft-det$k.txt"
done
check "ttft: the same options twice give the same output, JSON (4 rows) and text" \
	sh -c "[ \$(wc -l <'$tmp/ttft-det1.json') -eq 4 ] && [ -s '$tmp/ttft-det1.txt' ] && cmp -s '$tmp/ttft-det1.json' '$tmp/ttft-det2.json' && cmp -s '$tmp/ttft-det1.txt' '$tmp/ttft-det2.txt'"
check "ttft: another Poisson seed (7 against 6), other times" \
	sh -c "[ \$(wc -l <'$tmp/ttft-det3.json') -eq 4 ] && ! cmp -s '$tmp/ttft-det1.json' '$tmp/ttft-det3.json'"
# Refused, exit 2, naming what is wrong, before anything runs (nothing on stdout).
refused() { # refused NAME PATTERN ARGS...: exit 2, no stdout, stderr matching PATTERN
	local name=$1 pat=$2
	shift 2
	"$T" --generate 20 --capacity 1e5 "$@" >"$tmp/ttft-r.out" 2>"$tmp/ttft-r.err"
	local rc=$?
	check "ttft refused: $name (exit $rc)" \
		sh -c "[ $rc -eq 2 ] && [ ! -s '$tmp/ttft-r.out' ] && grep -qE -- \"\$1\" '$tmp/ttft-r.err'" _ "$pat"
}
refused "--ttft alone names both" '^kvss-trace: --ttft needs --recompute-tokens-per-s .* and --kv-bytes-per-token ' --ttft
refused "--ttft without the prefill rate" '^kvss-trace: --ttft needs --recompute-tokens-per-s [^-]*$' \
	--ttft --kv-bytes-per-token 256
refused "--ttft without the KV bytes" '^kvss-trace: --ttft needs --kv-bytes-per-token ' \
	--ttft --recompute-tokens-per-s 1e4
refused "--arrivals bogus" "^kvss-trace: --arrivals: 'bogus' is not trace or poisson" \
	--ttft --recompute-tokens-per-s 1e4 --kv-bytes-per-token 256 --arrivals bogus
for opt in --time-scale --arrival-rate --max-inflight --refill-read-gbps --arrival-seed \
	--prefill-overhead-us --refill-latency-us; do
	case $opt in
	--arrival-rate | --arrival-seed) mode=(--arrivals poisson) ;;
	*) mode=() ;;
	esac
	case $opt in
	--arrival-seed | --prefill-overhead-us | --refill-latency-us) bads=(-1 nan abc 1x '' -0) ;;
	*) bads=(0 -1 nan abc 1x '' inf) ;;
	esac
	for bad in "${bads[@]}"; do
		refused "$opt '$bad'" "^kvss-trace: $opt: '$bad' " --ttft --recompute-tokens-per-s 1e4 \
			--kv-bytes-per-token 256 "${mode[@]}" "$opt" "$bad"
	done
	refused "$opt without --ttft" "^kvss-trace: $opt: shapes --ttft's times to first token: give --ttft" \
		"$opt" 1
done
# Below kvss's floor (wafer.time_scale and arrival_rate, 1e-6; a token a
# second for the prefill rate, whose rate per ns would round to 0, read as
# computing for free): what kvss cannot run is not modelled either.
for bad in 1e-315 0.5 2e9 0 -1 nan abc 1x '' inf; do
	refused "--recompute-tokens-per-s '$bad'" "^kvss-trace: --recompute-tokens-per-s: '$bad' is not a number in \\[1, 1e\\+09\\]" \
		--ttft --recompute-tokens-per-s "$bad" --kv-bytes-per-token 256
done
# The second tier's latency: 0 to 1e7 us, as kvss's per-model l2_latency_us
# (not a --ttft option: --l2 uses it too).
for bad in -1 nan abc 1x '' -0 1e8; do
	refused "--l2-latency-us '$bad'" "^kvss-trace: --l2-latency-us: '$bad' is not a number in \\[0, 1e\\+07\\]" \
		--l2-latency-us "$bad"
done
refused "--time-scale 1e-300" "^kvss-trace: --time-scale: '1e-300' is not a number in \\[1e-06, " --ttft \
	--recompute-tokens-per-s 1e4 --kv-bytes-per-token 256 --time-scale 1e-300
refused "--arrival-rate 5e-7" "^kvss-trace: --arrival-rate: '5e-7' is not a number in \\[1e-06, " --ttft \
	--recompute-tokens-per-s 1e4 --kv-bytes-per-token 256 --arrivals poisson --arrival-rate 5e-7
refused "--arrival-seed 1.5" "^kvss-trace: --arrival-seed: '1.5' " --ttft --recompute-tokens-per-s 1e4 \
	--kv-bytes-per-token 256 --arrivals poisson --arrival-seed 1.5
refused "--max-inflight 4097" "^kvss-trace: --max-inflight: '4097' " --ttft --recompute-tokens-per-s 1e4 \
	--kv-bytes-per-token 256 --max-inflight 4097
refused "--arrivals without --ttft" "^kvss-trace: --arrivals: shapes --ttft" --arrivals poisson
refused "--arrival-rate with the trace's times" "^kvss-trace: --arrival-rate: for --arrivals poisson" \
	--ttft --recompute-tokens-per-s 1e4 --kv-bytes-per-token 256 --arrival-rate 3
refused "--arrival-seed with the trace's times" "^kvss-trace: --arrival-seed: for --arrivals poisson" \
	--ttft --recompute-tokens-per-s 1e4 --kv-bytes-per-token 256 --arrivals trace --arrival-seed 3
refused "--time-scale with Poisson arrivals" "^kvss-trace: --time-scale: for --arrivals trace" \
	--ttft --recompute-tokens-per-s 1e4 --kv-bytes-per-token 256 --arrivals poisson --time-scale 2
refused "--ttft with --replicas 2" "^kvss-trace: --ttft models one wafer: not with --replicas 2" \
	--ttft --recompute-tokens-per-s 1e4 --kv-bytes-per-token 256 --replicas 2
# A latency, an overhead and a seed of 0 are values (a fitted line's latency may be 0).
# kvss's per-model l2_latency_us takes 0 too. One slot is "1 slot".
"$T" "${ttft[@]}" --recompute-tokens-per-s 1e4 --arrivals poisson --arrival-seed 0 \
	--refill-latency-us 0 --prefill-overhead-us 0 --l2-latency-us 0 --max-inflight 1 \
	--limit 20 >"$tmp/ttft-zero.txt" 2>&1
check "ttft: --arrival-seed 0, --refill-latency-us 0, --prefill-overhead-us 0 and --l2-latency-us 0 are taken" test $? -eq 0
check "ttft: one run slot is said '1 slot'" grep -q ', 1 slot, 10000 tokens/s' "$tmp/ttft-zero.txt"
# A trace without timestamps: refused at the trace's times, naming the line,
# before any replay; Poisson arrivals need none.
printf '{"org": "a", "tokens": [1, 2, 3]}\n' >"$tmp/nots.jsonl"
"$T" --trace "$tmp/nots.jsonl" --capacity inf --ttft --recompute-tokens-per-s 1e4 \
	--kv-bytes-per-token 256 >"$tmp/ttft-r.out" 2>"$tmp/ttft-r.err"
check "ttft: a trace without timestamps is refused at its times (exit 2), naming the line" \
	sh -c "[ $? -eq 2 ] && [ ! -s '$tmp/ttft-r.out' ] && grep -q 'nots.jsonl: line 1 has no timestamp' '$tmp/ttft-r.err'"
"$T" --trace "$tmp/nots.jsonl" --capacity inf --ttft --recompute-tokens-per-s 1e4 \
	--kv-bytes-per-token 256 --arrivals poisson >/dev/null 2>&1
check "ttft: and taken with Poisson arrivals" test $? -eq 0
check_summary "kvss-trace"
