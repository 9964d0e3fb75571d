#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# The whole system end to end, on the built-in workload (no outside data):
#  1. role "all": driver, wafer emulator and one shard in one process over a
#     net_ring pair (with cache salts, and a noisy neighbour with and
#     without DRAM shares, too);
#  2. the demo's shape: a driver process and two shard processes with
#     different bytes per token over net_memif (scripts/demo.sh);
#  3. the same while running: /swdriver/stats, /swdriver/orgs, /swdriver/shards, /swdriver/shared and a shard's
#     /kvss/stats answered through dpdk-telemetry.py, then SIGTERM: the driver
#     drains, prints its summary (stopped early) and exits 0;
#  4. a shard killed and restarted mid-run (the driver waiting for it, and
#     with the default away_ms), and one killed for good;
#  5. a memif link flapping under traffic (the port gate).
# Every summary must show zero verify failures and zero protocol errors; no
# process and no file prefix is left behind.
set -u
BUILD=${1:-build}
cd "$(dirname "$0")/.."
tmp=$(mktemp -d)
# Ended by a letter: another test-e2e on the machine (the ASan one, another
# checkout's) may have a pid that begins with this one's digits, and the
# patterns below match prefixes.
tag=e2e$$x
# A failing run's logs and summaries stay, named (a passing one's go): what
# failed beside a busy machine is read afterwards, not run again.
cleanup() {
	rm -rf /var/run/dpdk/kvss_e2e_all_$$ /var/run/dpdk/kvss_e2e_flap_$$ /var/run/dpdk/kvss_demo_*_${tag}*
	if [ "${fail:-1}" -eq 0 ]; then
		rm -rf "$tmp"
	else
		rm -rf "$tmp"/l2 2>/dev/null # the shards' second-tier files: large, and not logs
		echo "kvss end to end: the failing run's logs are kept in $tmp" >&2
	fi
}
trap cleanup EXIT
. scripts/check-lib.sh
# The demo's shards keep a second tier on disk: here, in this test's own
# directory (kept from one section to the next: each run takes back what the
# one before left, as a restarted shard does).
export KVSS_DEMO_L2_DIR="$tmp/l2"
# The plain built-in workload (make demo's default is its library of 300
# documents, about 3.75M tokens: each section here replays a part of it).
export KVSS_DEMO_DOCUMENTS=0

# want ID: whether to run section ID (every one unless E2E_SECTIONS lists
# some, "1 1b 2 3"); says how long the section before took. make check's
# AddressSanitizer run takes the sections that move and check bytes through
# kvss's memory (one process, the memif demos, telemetry) and leaves those
# that wait on restarts, timers and a flapping link to the plain run.
sec_name=
sec_t0=$SECONDS
want() {
	local s
	[ -n "$sec_name" ] && echo "-- section $sec_name: $((SECONDS - sec_t0)) s"
	sec_name=
	[ "$1" = end ] && return 0
	if [ -n "${E2E_SECTIONS:-}" ]; then
		for s in $E2E_SECTIONS; do [ "$s" = "$1" ] && break; s=; done
		if [ -z "$s" ]; then
			echo "-- section $1 not run (E2E_SECTIONS=\"$E2E_SECTIONS\")"
			return 1
		fi
	fi
	sec_name=$1
	sec_t0=$SECONDS
}

# field FILE KEY: a field of the summary's JSON line.
field() {
	python3 -c 'import json,sys; print(json.loads(open(sys.argv[1]).read().strip().splitlines()[-1])[sys.argv[2]])' "$1" "$2" 2>/dev/null
}

# check_exact LABEL JSON WHO: zero verify failures, and WHO ("the shard
# holds", "both shards hold") exactly what the driver accounts for.
check_exact() {
	check "$1: zero verify failures" test "$(field "$2" verify_failures)" = 0
	check "$1: $3 what the driver accounts for" test "$(field "$2" unaccounted_tokens)" = 0
}

# check_clean LABEL JSON WHO: check_exact, and zero protocol errors.
check_clean() {
	check_exact "$@"
	check "$1: zero protocol errors" test "$(field "$2" protocol_errors)" = 0
}

# Wait (up to 20 s) until the driver writing LOG has every shard up.
wait_replaying() {
	for _ in $(seq 1 200); do
		grep -q "every shard is up" "$1" 2>/dev/null && return
		sleep 0.1
	done
}

# run_all CONFIG LOG [kvss options...]: one process (role "all"), its exit status.
run_all() {
	local cfg=$1 log=$2

	shift 2
	timeout 120 "$BUILD/kvss" --no-pci --no-huge -m 1024 --lcores "0@0,1@1" \
		--log-level lib.eal:error --no-telemetry --file-prefix "kvss_e2e_all_$$" -- \
		--config "$cfg" "$@" >"$log" 2>&1
}

# restart_shard1 TAG PAUSE LOG: stop shard 1 of the demo tagged TAG (SIGTERM,
# waited for), PAUSE seconds later start it again on the same memif socket,
# its output in LOG; its pid in s1b.
restart_shard1() {
	local s1 sock
	s1=$(pgrep -f "file-prefix kvss_demo_s1_$1")
	sock=$(tr '\0' ' ' </proc/$s1/cmdline | grep -o 'socket=[^ ]*' | cut -d= -f2)
	kill -TERM $s1
	while kill -0 $s1 2>/dev/null; do sleep 0.1; done
	sleep "$2"
	"$BUILD/kvss" --no-pci --no-huge -m 1024 --log-level lib.eal:error --log-level pmd.net.memif:error \
		--file-prefix "kvss_demo_s1_$1" --lcores "0@(0-1),1@(0-1)" \
		--vdev "net_memif0,role=server,id=1,bsize=10240,socket=$sock" \
		-- --config config/memif-shard1.cfg --poll idle --l2-dir "$KVSS_DEMO_L2_DIR" >"$3" 2>&1 &
	s1b=$!
}

# 1. One process.
if want 1; then
	plot=()
	command -v gnuplot >/dev/null && plot=(--plot-refills "$tmp/refills.png")
	run_all config/all-in-one.cfg "$tmp/all.log" --limit 150 "${plot[@]}"
	check "role all: exits 0" test $? -eq 0
	if [ ${#plot[@]} -gt 0 ]; then
		check "role all: --plot-refills drew the refill times (a PNG)" \
			sh -c "head -c 4 '$tmp/refills.png' | od -An -tx1 | grep -q '89 50 4e 47' &&
			grep -q 'refill times drawn in $tmp/refills.png' '$tmp/all.log'"
	else
		echo "role all: --plot-refills not tested: no gnuplot (scripts/deps.sh installs gnuplot-nox)"
	fi
	grep '^{' "$tmp/all.log" | tail -1 >"$tmp/all.json"
	check "role all: 150 requests done" test "$(field "$tmp/all.json" requests)" = 150
	check "role all: every request hit or missed, none lost" test "$(field "$tmp/all.json" finished)" = True
	check_clean "role all" "$tmp/all.json" "the shard holds"
	check "role all: the chats hit (hit ratio above 0.2)" \
		holds "$(field "$tmp/all.json" hit_ratio) > 0.2"
	check "role all: refills were checked byte by byte" test "$(field "$tmp/all.json" refill_bytes)" -gt 0
	check "role all: a refill model was fitted to the refills (a latency; a bandwidth when one shows)" \
		holds "$(field "$tmp/all.json" fit_refill_latency_us) > 0 and (lambda g: g is None or g > 0)($(field "$tmp/all.json" fit_refill_gbps))"
	check "role all: the shard's final stats printed" grep -q "final stats: frames rx_frames=" "$tmp/all.log"
	check "role all: the estimates were learned (the default: the example does not set refill_model)" \
		test "$(field "$tmp/all.json" refill_model)" = learned -a -z "$(grep refill_model config/all-in-one.cfg)"
	check "role all: the log says where the estimates come from" \
		grep -q "model 0 refill estimates: learned, starting from 20 us + 10 Gb/s" "$tmp/all.log"
	check "role all: under 90% of refills fell short of the default estimates (configured: all of them)" \
		holds "$(field "$tmp/all.json" model_short_share) < 0.9"
	# A failure says why: the summary names each kind of protocol error.
	[ "$fail" -eq 0 ] || grep -E "summary:|final stats" "$tmp/all.log" >&2
fi

# 1p. Time to first token and the refill policy: the same Poisson arrivals
#     with the cache off (compute-only), every hit refilled (io-only) and the
#     adaptive rule, at a prefill rate a refill beats (its hits taken) and at
#     one no refill beats (every hit computed instead: the decision moved);
#     and Cake's split (refill_policy "split"), its hits' fronts computed.
#     Then a trace that cannot be replayed at its times, refused naming its line.
if want 1p; then
	for run in compute-only:50000 io-only:50000 adaptive:50000 adaptive:1000000000 split:500000; do
		pol=${run%%:*} rate=${run#*:} name=${run/:/-}
		# At 1e9 tokens/s no refill beats computing, unless it ends
		# within others' prefills queued before its request (the rule
		# counts the queue): one slot, so that none is ever queued.
		slots=8
		[ "$rate" = 1000000000 ] && slots=1
		sed -e 's/^  generate = 200;$/&\n  arrivals = "poisson"; arrival_rate = 40.0; prefill_overhead_us = 1000;/' \
			-e "s/^  policy = \"lru\";\$/&\n  recompute_tokens_per_s = $rate; refill_policy = \"$pol\";/" \
			-e "s/^  max_inflight = 8;/  max_inflight = $slots;/" \
			config/all-in-one.cfg >"$tmp/$name.cfg"
		run_all "$tmp/$name.cfg" "$tmp/$name.log" --limit 100
		check "ttft $name: exits 0" test $? -eq 0
		grep '^{' "$tmp/$name.log" | tail -1 >"$tmp/$name.json"
		check_clean "ttft $name" "$tmp/$name.json" "the shard holds"
		check "ttft $name: every request got its first token, its TTFT counted" \
			test "$(field "$tmp/$name.json" first_tokens)" = 100
		check "ttft $name: the summary gives TTFT p50, p90 and p99 under its policy" \
			grep -q "time to first token (arrivals poisson, refill policy $pol): p50 [0-9.]* ms, p90 [0-9.]* ms, p99" "$tmp/$name.log"
		check "ttft $name: p50 <= p90 <= p99, all above 0" \
			holds "0 < $(field "$tmp/$name.json" ttft_p50_ms) <= $(field "$tmp/$name.json" ttft_p90_ms) <= $(field "$tmp/$name.json" ttft_p99_ms)"
	done
	check "ttft compute-only: nothing looked up, refilled or stored" \
		test "$(field "$tmp/compute-only-50000.json" hit_tokens)/$(field "$tmp/compute-only-50000.json" refills)/$(field "$tmp/compute-only-50000.json" evicted_tokens)" = 0/0/0
	check "ttft compute-only: every prompt token computed" \
		test "$(field "$tmp/compute-only-50000.json" prefill_computed_tokens)" = "$(field "$tmp/compute-only-50000.json" prompt_tokens)"
	check "ttft io-only: the chats hit, and the hits saved compute" \
		holds "$(field "$tmp/io-only-50000.json" hit_ratio) > 0.2 and $(field "$tmp/io-only-50000.json" compute_saved_ms) > 0"
	check "ttft adaptive at 50k tokens/s: a refill beats computing, every hit taken" \
		holds "$(field "$tmp/adaptive-50000.json" hit_ratio) > 0.2 and $(field "$tmp/adaptive-50000.json" recomputed_by_choice_tokens) == 0"
	# Every 32nd refusal in a row is refilled all the same (a probe of the
	# line): the hits taken are those probes' alone.
	check "ttft adaptive at 1e9 tokens/s: no refill beats computing, every hit but the probes computed instead" \
		holds "$(field "$tmp/adaptive-1000000000.json" recomputed_by_choice_tokens) > 0 and $(field "$tmp/adaptive-1000000000.json" refills) == $(field "$tmp/adaptive-1000000000.json" refill_probes) and $(field "$tmp/adaptive-1000000000.json" hit_tokens) < 0.1 * $(field "$tmp/adaptive-1000000000.json" recomputed_by_choice_tokens)"
	# Cake's split: hits split (their fronts computed while the rest
	# refilled), every refilled byte right and in its slot (check_clean: no
	# verify failure, no bad glue), a front shorter than the hits.
	check "ttft split: hits split, their fronts part of the hits" \
		holds "$(field "$tmp/split-500000.json" split_requests) > 0 and 0 < $(field "$tmp/split-500000.json" split_tokens) < $(field "$tmp/split-500000.json" hit_tokens)"
	check "ttft split: the summary says so" grep -q "summary: split: [1-9][0-9]* hits split" "$tmp/split-500000.log"
	# Determinism: the same seed and arrivals, the line fixed (refill_model
	# "configured", 200 us + the link, where small hits lose to computing at
	# 2M tokens/s and large ones win), one slot: twice the same decisions
	# and hit tokens, whatever the machine's TTFT.
	for k in 1 2; do
		sed -e 's/^  generate = 200;$/&\n  arrivals = "poisson"; arrival_rate = 40.0; arrival_seed = 7; prefill_overhead_us = 1000;/' \
			-e 's/^  policy = "lru";$/&\n  recompute_tokens_per_s = 2000000; refill_policy = "adaptive"; refill_model = "configured";/' \
			-e 's/^  max_inflight = 8;/  max_inflight = 1;/' -e 's/^      refill_latency_us = 20;/      refill_latency_us = 200;/' \
			config/all-in-one.cfg >"$tmp/det$k.cfg"
		check "ttft determinism: run $k's configuration took" \
			test "$(grep -c 'refill_model = "configured"\|max_inflight = 1;\|refill_latency_us = 200;' "$tmp/det$k.cfg")" = 3
		run_all "$tmp/det$k.cfg" "$tmp/det$k.log" --limit 60
		check "ttft determinism: run $k exits 0" test $? -eq 0
		grep '^{' "$tmp/det$k.log" | tail -1 >"$tmp/det$k.json"
	done
	det() { # det JSON: the decisions and what they took
		local f
		for f in hit_tokens refills recomputed_by_choice_tokens refill_probes evicted_tokens; do
			printf '%s=%s ' "$f" "$(field "$1" $f)"
		done
	}
	echo "ttft determinism: $(det "$tmp/det1.json")| TTFT p50 $(field "$tmp/det1.json" ttft_p50_ms) and $(field "$tmp/det2.json" ttft_p50_ms) ms"
	check "ttft determinism: both runs refilled some hits and computed others by choice" \
		holds "$(field "$tmp/det1.json" refills) > 0 and $(field "$tmp/det1.json" recomputed_by_choice_tokens) > 0"
	check "ttft determinism: the same decisions and hit tokens twice" test "$(det "$tmp/det1.json")" = "$(det "$tmp/det2.json")"
	# A trace replayed at its times: one line going back in time, one without a time.
	printf '%s\n' '{"tokens": [1, 2, 3], "timestamp": 10}' '{"tokens": [4, 5, 6], "timestamp": 5}' >"$tmp/back.jsonl"
	printf '%s\n' '{"tokens": [1, 2, 3], "timestamp": 10}' '{"tokens": [4, 5, 6]}' >"$tmp/nots.jsonl"
	for t in back nots; do
		sed -e "s|^  trace = \"\";.*|  trace = \"$tmp/$t.jsonl\"; arrivals = \"trace\";|" config/all-in-one.cfg >"$tmp/$t.cfg"
		run_all "$tmp/$t.cfg" "$tmp/$t.log"
		check "ttft trace $t: refused at start (exit 2)" test $? -eq 2
	done
	check "ttft trace back: the error names line 2 and why" \
		grep -q "wafer.arrivals = \"trace\": $tmp/back.jsonl: line 2's timestamp is earlier" "$tmp/back.log"
	check "ttft trace nots: the error names line 2 and why" \
		grep -q "wafer.arrivals = \"trace\": $tmp/nots.jsonl: line 2 has no timestamp" "$tmp/nots.log"
	sed -e 's/^  generate = 200;$/&\n  arrivals = "trace"; time_scale = 0;/' config/all-in-one.cfg >"$tmp/scale0.cfg"
	run_all "$tmp/scale0.cfg" "$tmp/scale0.log"
	check "ttft: time_scale = 0 refused at start naming the key (exit 2)" \
		sh -c "test $? -eq 2 && grep -q 'time_scale' '$tmp/scale0.log'"
fi

# 1b. Multimodal input: an image of 64 tokens ends every
#     4th prompt of the built-in workload (wafer.multimodal_every); caching
#     stops before it, the summary counts what was not cached.
if want 1b; then
	sed 's/^  generate = 200;$/&\n  multimodal_every = 4;/' config/all-in-one.cfg >"$tmp/mm.cfg"
	run_all "$tmp/mm.cfg" "$tmp/mm.log" --limit 150
	check "multimodal: exits 0" test $? -eq 0
	grep '^{' "$tmp/mm.log" | tail -1 >"$tmp/mm.json"
	check_clean "multimodal" "$tmp/mm.json" "the shard holds"
	check "multimodal: tokens after an image were not cached, and counted" \
		holds "$(field "$tmp/mm.json" multimodal_trimmed_tokens) > 0"
	check "multimodal: the summary says so" grep -q "summary: multimodal: [1-9][0-9]* tokens not cached" "$tmp/mm.log"
fi

# 1s. Speculative decoding in the application: rounds of
#     4 proposals, 30% rejected (wafer.spec_tokens, spec_reject_pct); the
#     rejected ones are evicted, then overwritten in place on the shard, and
#     later turns hit into the answers: every refilled byte is checked, so a
#     shard that ignored an overwrite fails this run.
if want 1s; then
	sed 's/^  generate = 200;$/&\n  spec_tokens = 4;\n  spec_reject_pct = 30;/' config/all-in-one.cfg >"$tmp/spec.cfg"
	check "speculation: the config sets wafer.spec_tokens" grep -q '^  spec_tokens = 4;' "$tmp/spec.cfg"
	run_all "$tmp/spec.cfg" "$tmp/spec.log"
	check "speculation: exits 0" test $? -eq 0
	grep '^{' "$tmp/spec.log" | tail -1 >"$tmp/spec.json"
	check_clean "speculation" "$tmp/spec.json" "the shard holds"
	check "speculation: rejected tokens were evicted and overwritten in place" \
		holds "$(field "$tmp/spec.json" spec_overwrites) > 1000 and $(field "$tmp/spec.json" spec_rounds) > 1000"
	check "speculation: later turns hit into verified generated tokens, refilled right" \
		holds "$(field "$tmp/spec.json" generated_hit_tokens) > 0 and $(field "$tmp/spec.json" verify_failures) == 0"
	check "speculation: the summary says so" grep -q "summary: speculative decoding (wafer.spec_tokens = 4" "$tmp/spec.log"
	check "speculation: off by default (no rounds in the first run)" test "$(field "$tmp/all.json" spec_rounds)" = 0
fi

# 1t. A target and its draft in one process: role all
#     hosts a shard per model (config/all-in-one-draft.cfg), each on its
#     own ingest lcore and ring pair; each model has its own map, capacity
#     and shard, the draft's smaller, so some requests hit in the target
#     only; the answers are decoded speculatively in both models.
if want 1t; then
	timeout 120 "$BUILD/kvss" --no-pci --no-huge -m 1024 --lcores "0@0,1@1,2@1" \
		--log-level lib.eal:error --no-telemetry --file-prefix "kvss_e2e_draft_$$" -- \
		--config config/all-in-one-draft.cfg >"$tmp/draft.log" 2>&1
	check "draft: exits 0" test $? -eq 0
	grep '^{' "$tmp/draft.log" | tail -1 >"$tmp/draft.json"
	check_clean "draft" "$tmp/draft.json" "the shards hold"
	check "draft: both shards up in the one process, each on its own lcore and ring pair" \
		sh -c "grep -q 'shard 0 of model 0 up, .*ingest on lcore 1' '$tmp/draft.log' &&
		grep -q 'shard 0 of model 1 up, .*ingest on lcore 2' '$tmp/draft.log' &&
		grep -q 'shard 0 of model 1 on port 2, driver on port 3' '$tmp/draft.log'"
	# Each model's hits, not the one against the other: the target's are
	# timing's too (what its shard has taken when a request begins), and
	# under ASan beside two CPU hogs one run's came under the draft's. That
	# the draft, smaller, misses where the target hits is the next check.
	check "draft: 300 requests, each model looked up and hit on its own" \
		holds "$(field "$tmp/draft.json" requests) == 300 and $(field "$tmp/draft.json" model1_hit_tokens) > 0 and $(field "$tmp/draft.json" hit_tokens) > 0"
	check "draft: requests that hit in the target and missed in the smaller draft" \
		holds "$(field "$tmp/draft.json" hit_model0_only) > 0"
	check "draft: both models refilled and were timed apart" \
		python3 -c "import json,sys; d=json.load(open('$tmp/draft.json')); f=d['model_fits']; sys.exit(0 if len(f) == 2 and all(m['refills'] > 0 for m in f) else 1)"
	# Both models overwrote rejected tokens: the draft's own count and the
	# target's (the rest). (It compared all overwrites with the target's
	# rejections, a sum against one part: under ASan on two busy cores a
	# sequence that stops caching for want of room overwrites fewer, and
	# one CI run came under.)
	check "draft: speculation in both models, rejected tokens overwritten" \
		holds "$(field "$tmp/draft.json" spec_overwrites_draft) > 0 and $(field "$tmp/draft.json" spec_overwrites) - $(field "$tmp/draft.json" spec_overwrites_draft) > 0"
	check "draft: the summary gives model 1's hit ratio" grep -q "summary: model 1: [1-9][0-9]* prompt tokens hit" "$tmp/draft.log"
fi

# 1a. The same with refill_model = "learned": from the 20th refill the
#     estimates follow the line fitted to the refills taken. The configured
#     20 us + 10 Gb/s falls short of nearly every refill here (the wafer,
#     picking a sequence again once its estimate has passed, would wait for
#     its data); the learned line of about a third. Scaled for 10% short
#     (refill_short_pct), about 12-16% of 1,200 refills fell short (the
#     first 40 or so come before the scale is learned) on a quiet machine;
#     what is checked is the scale's effect on the same refills, in one run.
#     The first run resumes a sequence as soon as its data is whole
#     (wafer.resume = "whole"); the second as the design says (the default,
#     "estimate"): once its estimate has passed too, so each sequence whose
#     data came early waits at least that long (held_ms >= refill_early_ms).
if want 1a; then
	sed 's/^  retransmit_ms = 5;$/&\n  refill_model = "learned";/; s/^  generate = 200;$/  generate = 1500;/' \
		config/all-in-one.cfg >"$tmp/learn10.cfg"
	check "learned model: the config sets it" grep -q '^  refill_model = "learned";' "$tmp/learn10.cfg"
	sed 's/^wafer = {$/&\n  resume = "whole";/' "$tmp/learn10.cfg" >"$tmp/learn.cfg"
	check "learned model: the config sets wafer.resume" grep -q '^  resume = "whole";' "$tmp/learn.cfg"
	sed -i 's/^  refill_model = "learned";$/&\n  refill_short_pct = 10;/' "$tmp/learn10.cfg"
	check "learned model: the config sets refill_short_pct" grep -q '^  refill_short_pct = 10;' "$tmp/learn10.cfg"
	for v in learn learn10; do
		run_all "$tmp/$v.cfg" "$tmp/$v.log"
		check "$v: exits 0" test $? -eq 0
		grep '^{' "$tmp/$v.log" | tail -1 >"$tmp/$v.json"
		check_clean "$v" "$tmp/$v.json" "the shard holds"
		check "$v: the JSON says the model was learned" test "$(field "$tmp/$v.json" refill_model)" = learned
		check "$v: 1,500 requests done" test "$(field "$tmp/$v.json" requests)" = 1500
	done
	short_c=$(field "$tmp/all.json" model_short_share)
	short_l=$(field "$tmp/learn.json" model_short_share)
	short_10=$(field "$tmp/learn10.json" model_short_share)
	echo "refill estimates short of the time taken: default (learned, 150 requests) $short_c, learned $short_l, learned for 10% short $short_10 (scale $(field "$tmp/learn10.json" model_scale))"
	check "learned model: under 90% of refills took longer than estimated" \
		holds "$short_l < 0.9"
	# The scale's effect, on the same refills within one run (the share
	# short against the line, and against the line scaled as each came),
	# is a figure, not a check: two runs' shares compared also compare the
	# machine's load between them (0.1761 against 0.069 beside two CPU
	# hogs), and within one run the scale moves as the refills come (a CI
	# run: 0.1657 short of the scaled line against 0.1508 of the line,
	# with the scale ending at 1.189). What is checked is that both are
	# reported and that the scale was learned above 1.
	line_l=$(field "$tmp/learn10.json" model_short_share_line)
	line_s=$(field "$tmp/learn10.json" model_short_share_scaled)
	echo "learned for 10% short, the same refills: short of the line $line_l, of the scaled line $line_s"
	check "learned for 10% short: both shares of the same refills are reported" \
		holds "0 <= $line_s <= 1 and 0 <= $line_l <= 1"
	check "learned for 10% short: the scale is above 1" \
		holds "$(field "$tmp/learn10.json" model_scale) > 1"
	echo "refills before their estimate: $(field "$tmp/learn.json" refill_early_ms) ms in all (resume whole, held $(field "$tmp/learn.json" held_ms) ms); $(field "$tmp/learn10.json" refill_early_ms) ms (resume estimate, held $(field "$tmp/learn10.json" held_ms) ms)"
	check "resume whole: no sequence held for its estimate, though refills came early" \
		holds "$(field "$tmp/learn.json" held_ms) == 0 and $(field "$tmp/learn.json" refill_early_ms) > 0"
	check "resume estimate (the default): every early refill's sequence held until its estimate" \
		holds "0 < $(field "$tmp/learn10.json" refill_early_ms) <= $(field "$tmp/learn10.json" held_ms)"
	check "resume: the JSON names the mode" \
		test "$(field "$tmp/learn.json" resume)$(field "$tmp/learn10.json" resume)" = wholeestimate
fi

# 1w. A model with a full cache and a sliding-window cache (with sink tokens):
#     hits go past the window (capped at it, the hit ratio was 0.27), and
#     every refilled byte of both caches lands where the wafer keeps it.
#     Its estimates stay as configured (refill_model = "configured").
if want 1w; then
	sed 's/^  retransmit_ms = 5;$/&\n  refill_model = "configured";/' config/all-in-one-hybrid.cfg >"$tmp/hyb.cfg"
	check "hybrid: the config keeps the configured estimates" grep -q '^  refill_model = "configured";' "$tmp/hyb.cfg"
	run_all "$tmp/hyb.cfg" "$tmp/hyb.log"
	check "hybrid: exits 0" test $? -eq 0
	grep '^{' "$tmp/hyb.log" | tail -1 >"$tmp/hyb.json"
	check "hybrid: 400 requests done" test "$(field "$tmp/hyb.json" requests)" = 400
	check_clean "hybrid" "$tmp/hyb.json" "the shard holds"
	check "hybrid: hits go past the window (hit ratio above 0.4)" \
		holds "$(field "$tmp/hyb.json" hit_ratio) > 0.4"
	check "hybrid: the JSON and the log say the estimates were configured" \
		test "$(field "$tmp/hyb.json" refill_model)" = configured -a \
		-n "$(grep 'model 0 refill estimates: configured, 20 us + 10 Gb/s' "$tmp/hyb.log")"
	echo "refill estimates short of the time taken, configured: $(field "$tmp/hyb.json" model_short_share) (hybrid)"
	[ "$fail" -eq 0 ] || grep -E "summary:" "$tmp/hyb.log" >&2
fi

# 1c. The same with lost data: the wafer withholds every 400th EVICT_DATA frame
#     (--lose-data). With driver.on_loss = "exact" (the default since
#     protocol v2) the model keeps its cache: only the columns holding lost
#     tokens and their descendants go, no resync, and still no wrong byte is
#     refilled and at the end the shard holds exactly what the driver
#     accounts for. Then the same with "resync": each loss makes the model
#     start over; the hit ratios of the two say what exact recovery keeps.
#     Lost data is counted and expected under faults: the exit status is 3
#     (degraded), not 1 (wrong), and 0 with --faults.
if want 1c; then
	run_all config/all-in-one.cfg "$tmp/lose.log" --limit 150 --lose-data 400
	rc=$?
	grep '^{' "$tmp/lose.log" | tail -1 >"$tmp/lose.json"
	sed -n 's/^kvss: summary: \(resyncs .*\)/lost data, one process, exact: \1/p' "$tmp/lose.log"
	check "lost data: exit status 3 (degraded: protocol errors, every byte right), not a crash (got $rc)" test $rc -eq 3
	check "lost data: 150 requests done" test "$(field "$tmp/lose.json" requests)" = 150
	check "lost data: the run finished" test "$(field "$tmp/lose.json" finished)" = True
	check "lost data: frames were withheld" grep -q "withheld on purpose [1-9]" "$tmp/lose.log"
	check "lost data, exact: no resync" test "$(field "$tmp/lose.json" resyncs)" = 0
	check "lost data, exact: tokens were lost, reported as ranges" \
		holds "0 < $(field "$tmp/lose.json" lost_records) <= $(field "$tmp/lose.json" lost_tokens)"
	check_exact "lost data" "$tmp/lose.json" "the shard holds"
	sed 's/^  retransmit_ms = 5;$/&\n  on_loss = "resync";/' config/all-in-one.cfg >"$tmp/resync.cfg"
	check "lost data, resync: the config asks for it" grep -q '^  on_loss = "resync";' "$tmp/resync.cfg"
	run_all "$tmp/resync.cfg" "$tmp/loser.log" --limit 150 --lose-data 400
	grep '^{' "$tmp/loser.log" | tail -1 >"$tmp/loser.json"
	sed -n 's/^kvss: summary: \(resyncs .*\)/lost data, one process, resync: \1/p' "$tmp/loser.log"
	check "lost data, resync: the model started over" test "$(field "$tmp/loser.json" resyncs)" -ge 1
	check_exact "lost data, resync" "$tmp/loser.json" "the shard holds"
	echo "lost data (every 400th frame), hit ratio: exact $(field "$tmp/lose.json" hit_ratio), resync $(field "$tmp/loser.json" hit_ratio)"
fi

# 1k. Cache salts: 60 requests of two organizations, each with one system
#     prompt of 1,000 tokens, three users (salts) each, one at a time. With
#     the salts each (organization, salt) misses once: 54 hits of the 15
#     whole columns of 64 (51,840 tokens); without them each organization
#     misses once (58 hits, 55,680). A salted request's reference bytes are
#     its salted chain's, so a refill shared across salts fails the byte
#     check: zero verify failures is the isolation, byte for byte.
if want 1k; then
	python3 - >"$tmp/salted.jsonl" <<'PY'
import json, random
rng = random.Random(7)
sysp = {o: [rng.randrange(1, 100000) for _ in range(1000)] for o in ("acme", "globex")}
for i in range(60):
    org = ("acme", "globex")[i % 2]
    toks = sysp[org] + [rng.randrange(1, 100000) for _ in range(100)]
    print(json.dumps({"org": org, "cache_salt": "user-%d" % ((i // 2) % 3),
                      "timestamp": i * 100, "tokens": toks, "output_length": 16}))
PY
	sed 's/"cache_salt": "user-[0-9]", //' "$tmp/salted.jsonl" >"$tmp/unsalted.jsonl"
	check "salts: the unsalted copy has none" bash -c "! grep -q cache_salt '$tmp/unsalted.jsonl'"
	sed 's/^  max_inflight = 8;/  max_inflight = 1;/' config/all-in-one.cfg >"$tmp/one.cfg"
	check "salts: the config runs one request at a time" grep -q '^  max_inflight = 1;' "$tmp/one.cfg"
	for k in salted unsalted; do
		run_all "$tmp/one.cfg" "$tmp/$k.log" --trace "$tmp/$k.jsonl"
		check "salts ($k): exits 0" test $? -eq 0
		grep '^{' "$tmp/$k.log" | tail -1 >"$tmp/$k.json"
		check "salts ($k): 60 requests done" test "$(field "$tmp/$k.json" requests)" = 60
		check_clean "salts ($k)" "$tmp/$k.json" "the shard holds"
	done
	check "salts: each (organization, salt) misses once: 51,840 hit tokens" \
		test "$(field "$tmp/salted.json" hit_tokens)" = 51840
	check "salts: without them each organization misses once: 55,680" \
		test "$(field "$tmp/unsalted.json" hit_tokens)" = 55680
fi

# 1n. A noisy neighbour in the whole system (the scenario test-trace.sh
#     models): one organization sends 90% of the requests, each a new
#     4,000-token prompt, four quiet ones re-read two documents each; 100,000
#     tokens of DRAM, one request at a time. Each quiet one alone in 10,000
#     tokens (its share), beside the noisy one without shares, and with
#     driver.orgs' dram_share = 0.1 each: with shares each hits within 2
#     points of alone; without, 20 points less. Hit tokens per request from
#     --ttft-out; every refilled byte checked.
if want 1n; then
	python3 scripts/gen-noisy.py "$tmp"
	sed 's/^  max_inflight = 8;/  max_inflight = 1;/' config/all-in-one.cfg >"$tmp/nn_none.cfg"
	sed -e 's/capacity_tokens = 100000;/capacity_tokens = 10000;/' \
		-e 's/capacity_tokens = \[100000\];/capacity_tokens = [10000];/' "$tmp/nn_none.cfg" >"$tmp/nn_alone.cfg"
	python3 - "$tmp/nn_none.cfg" "$tmp/nn_shares.cfg" <<'PY'
import sys
s = open(sys.argv[1]).read()
i = s.index("driver = {")
j = s.index("\n};\n", i) + 1  # the driver group's end
orgs = ", ".join('{ name = "quiet%d"; dram_share = 0.1; }' % q for q in range(4))
open(sys.argv[2], "w").write(s[:j] + "  orgs = ( " + orgs + " );\n" + s[j:])
PY
	check "noisy neighbour: the configs (one at a time; 10,000 tokens alone; the shares)" \
		sh -c "grep -q '^  max_inflight = 1;' '$tmp/nn_none.cfg' && [ \$(grep -c 'capacity_tokens = \[*10000\]*;' '$tmp/nn_alone.cfg') = 2 ] &&
			[ \$(grep -o 'dram_share = 0.1' '$tmp/nn_shares.cfg' | wc -l) = 4 ]"
	# nn_run TAG CFG TRACE: a run, its CSV in TAG.csv.
	nn_run() {
		run_all "$2" "$tmp/nn_$1.log" --trace "$3" --ttft-out "$tmp/nn_$1.csv"
		check "noisy neighbour ($1): exit 0, zero verify failures" \
			sh -c "[ $? -eq 0 ] && grep -q '\"verify_failures\":0,' '$tmp/nn_$1.log'"
	}
	nn_run none "$tmp/nn_none.cfg" "$tmp/nn.jsonl"
	nn_run shares "$tmp/nn_shares.cfg" "$tmp/nn.jsonl"
	for q in 0 1 2 3; do
		nn_run alone$q "$tmp/nn_alone.cfg" "$tmp/nn_q$q.jsonl"
	done
	# ratio TRACE CSV ORG: that organization's hit tokens over its prompt tokens.
	ratio() {
		python3 - "$@" <<'PY'
import csv, json, sys
reqs = [json.loads(l) for l in open(sys.argv[1])]
rows = list(csv.DictReader(open(sys.argv[2])))
hit = sum(int(r["hit_tokens"] or 0) for r, q in zip(rows, reqs) if q["org"] == sys.argv[3])
n = sum(len(q["tokens"]) for q in reqs if q["org"] == sys.argv[3])
print("%.4f" % (hit / n if n and len(rows) == len(reqs) else -1))
PY
	}
	for q in 0 1 2 3; do
		a=$(ratio "$tmp/nn_q$q.jsonl" "$tmp/nn_alone$q.csv" quiet$q)
		n=$(ratio "$tmp/nn.jsonl" "$tmp/nn_none.csv" quiet$q)
		w=$(ratio "$tmp/nn.jsonl" "$tmp/nn_shares.csv" quiet$q)
		echo "noisy neighbour (kvss): quiet$q hit ratio alone in its share $a, beside the noisy one $n without shares, $w with dram_share 0.1"
		check "noisy neighbour: quiet$q with its share hits within 2 points of alone" holds "$a >= 0 and abs($a - $w) <= 0.02"
		check "noisy neighbour: quiet$q without shares hits 20 points less (the test can fail)" holds "$a - $n >= 0.2"
	done
fi

# 2. Three processes over memif.
if want 2; then
	KVSS_DEMO_TAG=${tag}a KVSS_DEMO_JSON="$tmp/memif.json" timeout 300 scripts/demo.sh "$BUILD" \
		--trace "" --limit 400 >"$tmp/memif.log" 2>&1
	check "memif: the demo exits 0" test $? -eq 0
	check "memif: 400 requests done" test "$(field "$tmp/memif.json" requests)" = 400
	check_clean "memif" "$tmp/memif.json" "both shards hold"
	check "memif: bytes were refilled and checked" test "$(field "$tmp/memif.json" refill_bytes)" -gt 0
	check "memif: the summary says what the model should be" \
		grep -q "the model fitted to these [0-9]* refills: refill_latency_us = [0-9]*, refill_gbps = \([0-9.]* \|no bound\)" "$tmp/memif.log"
	check "memif: no control frame dropped behind data (its own queue, sent first)" \
		test "$(field "$tmp/memif.json" control_frames_dropped)" = 0
	check "memif: both shards came up" test "$(grep -c 'of model 0 is up' "$tmp/memif.log")" -eq 2
	check "memif: the shards stopped cleanly" test "$(grep -c '^demo: shard [01]: frames rx_frames' "$tmp/memif.log")" -eq 2
	check "memif: shard 1 stores 128 bytes per token, shard 0 256" \
		grep -q "evicted .* tokens" "$tmp/memif.log"
	[ "$fail" -eq 0 ] || tail -30 "$tmp/memif.log"
fi

# 2b. Lost data with two shards: every 3000th EVICT_DATA frame withheld; the
#     demo's configuration keeps the cache through each (on_loss "exact").
if want 2b; then
	KVSS_DEMO_TAG=${tag}l KVSS_DEMO_JSON="$tmp/mlose.json" timeout 300 scripts/demo.sh "$BUILD" \
		--trace "" --limit 400 --lose-data 3000 >"$tmp/mlose.log" 2>&1
	sed -n 's/^kvss: summary: \(on loss .*\)/lost data, memif: \1/p' "$tmp/mlose.log"
	check "memif, lost data: 400 requests done" test "$(field "$tmp/mlose.json" requests)" = 400
	check "memif, lost data: tokens lost, no resync (exact)" \
		holds "$(field "$tmp/mlose.json" lost_tokens) > 0 and $(field "$tmp/mlose.json" resyncs) == 0"
	check_exact "memif, lost data" "$tmp/mlose.json" "both shards hold"
	# Each loss is found by the data of the batch after it, 50 ms on, not
	# at the demo's five-second batch timeout (PROTOCOL.md section 5,
	# "Sooner on evidence"); and the summary says what the losses cost.
	check "memif, lost data: batches lost on the evidence of later data, not the timeout" \
		grep -q '^demo: shard [01]: .* batches_lost_early=[1-9]' "$tmp/mlose.log"
	check "memif, lost data: the summary says what the losses cost the cache" \
		holds "$(field "$tmp/mlose.json" loss_dropped_tokens) > 0"
	sed -n 's/^kvss: summary: \(what they cost .*\)/lost data, memif: \1/p' "$tmp/mlose.log"
fi

# 2c. Shards with a refill lcore, which sends refills on the shard's second
#     TX queue. A memif peer maps rings only for the queues it configured:
#     the driver sets up and polls two RX queues (with one, every refill
#     failed; later shards fell back to the ingest lcore over memif).
if want 2c; then
	KVSS_DEMO_TAG=${tag}r KVSS_DEMO_JSON="$tmp/rl.json" KVSS_DEMO_REFILL_LCORE=1 timeout 300 \
		scripts/demo.sh "$BUILD" --trace "" --limit 300 >"$tmp/rl.log" 2>&1
	check "memif, refill lcores: the demo exits 0" test $? -eq 0
	check "memif, refill lcores: both shards refill on their refill lcore" \
		test "$(grep -c "^demo: shard .* refill on lcore 2" "$tmp/rl.log")" = 2
	check_clean "memif, refill lcores" "$tmp/rl.json" "both shards hold"
	check "memif, refill lcores: bytes were refilled and checked" \
		test "$(field "$tmp/rl.json" refill_bytes)" -gt 0
	[ "$fail" -eq 0 ] || tail -20 "$tmp/rl.log"
fi

# 2l. make demo's own built-in workload (its library of 300 documents: reuse
#     far apart, more than the demo's DRAM holds), 600 requests: the second
#     tier brings hits DRAM alone cannot (the verdict's kvss-trace figure on
#     the same input), every byte checked.
if want 2l; then
	KVSS_DEMO_DOCUMENTS=300 KVSS_DEMO_LIMIT=600 KVSS_DEMO_TAG=${tag}l KVSS_DEMO_L2_DIR="$tmp/l2docs" \
		KVSS_DEMO_JSON="$tmp/docs.json" timeout 300 scripts/demo.sh "$BUILD" --trace "" \
		>"$tmp/docs.log" 2>&1
	check "documents: the demo passes (exit 0)" test $? -eq 0
	check "documents: the driver replayed the library's workload" \
		grep -q "600 requests from the built-in workload with a library of 300 documents" "$tmp/docs.log"
	check_clean "documents" "$tmp/docs.json" "both shards hold"
	check "documents: hits from the second tier" holds "$(field "$tmp/docs.json" hit_tokens_l2) > 0"
	dram=$(sed -n 's/.*DRAM alone on the same input \([0-9.]*\) .*/\1/p' "$tmp/docs.log")
	grep "demo: hit ratio" "$tmp/docs.log"
	check "documents: both tiers hit at least 1.5 times what DRAM alone does (${dram:-?})" \
		holds "$(field "$tmp/docs.json" hit_ratio) >= 1.5 * ${dram:-1}"
fi

# 2d. A target model and its draft, each on its own shard process, with their
#     own capacities (config/memif-two-models.cfg), the driver learning each
#     model's refill times apart; then the same with lost data, where each
#     model starts over on its own.
if want 2d; then
	sed 's/^  on_loss = "resync";$/&\n  refill_model = "learned";/' config/memif-two-models.cfg >"$tmp/two.cfg"
	check "two models: the config learns the refill model" grep -q '^  refill_model = "learned";' "$tmp/two.cfg"
	KVSS_DEMO_TAG=${tag}m KVSS_DEMO_JSON="$tmp/two.json" KVSS_DEMO_DRIVER_CFG="$tmp/two.cfg" \
		KVSS_DEMO_SHARD1_CFG=config/memif-shard-draft.cfg timeout 300 scripts/demo.sh "$BUILD" \
		--limit 600 >"$tmp/two.log" 2>&1
	check "two models: the demo exits 0" test $? -eq 0
	check "two models: both are up" grep -q "shard 0 of model 1 is up" "$tmp/two.log"
	check "two models: 600 requests done" test "$(field "$tmp/two.json" requests)" = 600
	check_clean "two models" "$tmp/two.json" "both shards hold"
	sed -n "s/^kvss: summary: \(model [01]'s own .*\)/two models: \1/p" "$tmp/two.log"
	check "two models: each model's refill times fitted apart, each from 20 refills or more" \
		python3 -c 'import json,sys; f=json.load(open(sys.argv[1]))["model_fits"]; sys.exit(0 if [m["model"] for m in f] == [0, 1] and all(m["refills"] >= 20 and m["latency_us"] is not None for m in f) else 1)' "$tmp/two.json"
	[ "$fail" -eq 0 ] || tail -20 "$tmp/two.log"
	KVSS_DEMO_TAG=${tag}n KVSS_DEMO_JSON="$tmp/twol.json" KVSS_DEMO_DRIVER_CFG=config/memif-two-models.cfg \
		KVSS_DEMO_SHARD1_CFG=config/memif-shard-draft.cfg timeout 300 scripts/demo.sh "$BUILD" \
		--limit 600 --lose-data 2000 >"$tmp/twol.log" 2>&1
	sed -n 's/^kvss: summary: \(resyncs .*\)/lost data, two models: \1/p' "$tmp/twol.log"
	check "two models, lost data: 600 requests done" test "$(field "$tmp/twol.json" requests)" = 600
	check_exact "two models, lost data" "$tmp/twol.json" "both shards hold"
fi

# 3. Telemetry while it runs, then SIGTERM. The requests arrive 50 a second,
#    so that the 20,000 asked for take longer than the run is given: what
#    ends the run is the SIGTERM, however long the telemetry's clients take
#    on a busy machine (run closed, the driver replayed them all in 94 s
#    beside two CPU hogs, before the clients were done).
if want 3; then
	sed 's/^  arrivals = "closed";/  arrivals = "poisson"; arrival_rate = 50.0;/' \
		config/memif-driver.cfg >"$tmp/paced.cfg"
	check "telemetry: the config paces the arrivals" grep -q "arrival_rate = 50.0;" "$tmp/paced.cfg"
	KVSS_DEMO_DRIVER_CFG="$tmp/paced.cfg" KVSS_DEMO_TAG=${tag}b KVSS_DEMO_LOGS=$tmp/long.logs \
		timeout 300 scripts/demo.sh "$BUILD" --trace "" --limit 20000 >"$tmp/long.log" 2>&1 &
	demo=$!
	wait_replaying "$tmp/long.log"
	sleep 1
	tel() { echo "$2" | timeout 10 dpdk-telemetry.py -f "$1" 2>/dev/null | tail -n 1; }
	tel "kvss_demo_drv_${tag}b" /swdriver/stats >"$tmp/drv.json"
	tel "kvss_demo_drv_${tag}b" /swdriver/orgs >"$tmp/orgs.json"
	tel "kvss_demo_drv_${tag}b" /swdriver/shards >"$tmp/shards.json"
	tel "kvss_demo_drv_${tag}b" /swdriver/shared >"$tmp/shared.json"
	tel "kvss_demo_s1_${tag}b" /kvss/stats >"$tmp/s1.json"
	tel "kvss_demo_s1_${tag}b" /kvss/caches >"$tmp/s1c.json"
	jget() {
		python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); v=list(d.values())[0]
for k in sys.argv[2].split("."): v=v[k] if not isinstance(v,list) else v[int(k)]
print(v)' "$1" "$2" 2>/dev/null
	}
	check "telemetry: /swdriver/stats counts requests" test "$(jget "$tmp/drv.json" requests)" -gt 0
	check "telemetry: /swdriver/stats counts evictions" test "$(jget "$tmp/drv.json" evicted_tokens)" -gt 0
	check "telemetry: /swdriver/stats has verify_failures 0" test "$(jget "$tmp/drv.json" verify_failures)" = 0
	check "telemetry: /swdriver/stats has the fitted refill model (0 until 20 refills)" \
		test -n "$(jget "$tmp/drv.json" fit_mbps)" -a -n "$(jget "$tmp/drv.json" fit_latency_us)"
	check "telemetry: /swdriver/stats counts the estimates that fell short and the model's updates" \
		test -n "$(jget "$tmp/drv.json" model_short)" -a -n "$(jget "$tmp/drv.json" model_updates)" \
		-a -n "$(jget "$tmp/drv.json" late_us)" -a -n "$(jget "$tmp/drv.json" held_us)"
	check "telemetry: /swdriver/orgs lists organizations with entries" \
		python3 -c 'import json,sys; d=list(json.load(open(sys.argv[1])).values())[0]; sys.exit(0 if d and all("entries" in o for o in d.values()) and sum(o["entries"] for o in d.values()) > 0 else 1)' "$tmp/orgs.json"
	check "telemetry: /swdriver/shards shows both shards up, their streams acknowledged up to what was sent" \
		python3 -c 'import json,sys; d=list(json.load(open(sys.argv[1])).values())[0]
ok = d and sorted(d) == ["model0_shard0", "model0_shard1"] and all(s["up"] == 1 and 0 < s["seq_acked"] <= s["seq_sent"] and s["stored_tokens"] > 0 and 0 <= s["heard_ms_ago"] < 1000 for s in d.values())
sys.exit(0 if ok else 1)' "$tmp/shards.json"
	check "telemetry: /swdriver/shards gives each shard its model's refill estimate: the configured 20 us + 10 Gb/s under 20 timed refills, the learned line from then on" \
		python3 -c 'import json,sys; d=list(json.load(open(sys.argv[1])).values())[0]
conf = lambda s: (s["model_estimate_latency_us"], s["model_estimate_mbps"]) == (20, 10000)
sys.exit(0 if d and all(conf(s) == (s["model_refills_timed"] < 20) for s in d.values()) else 1)' "$tmp/shards.json"
	python3 -c 'import json,sys; d=list(json.load(open(sys.argv[1])).values())[0]; s=d["model0_shard0"]; print("telemetry: model 0 after %d timed refills estimates %d us + %d Mb/s" % (s["model_refills_timed"], s["model_estimate_latency_us"], s["model_estimate_mbps"]))' "$tmp/shards.json"
	# What every endpoint answers is what docs/telemetry.md lists (generated
	# from the code): no key missing, none undocumented.
	tel "kvss_demo_s1_${tag}b" /kvss/lcores >"$tmp/s1l.json"
	samekeys() { # JSON SHAPE ENDPOINT: its keys (of the first inner dict when nested) are the doc's
		scripts/telemetry-doc.py --keys "$3" >"$tmp/doc.keys" &&
			python3 -c 'import json,sys; d=list(json.load(open(sys.argv[1])).values())[0]
v = next(iter(d.values())) if sys.argv[2] == "nested" else d
doc = set(open(sys.argv[3]).read().split())
sys.exit(0 if v and set(v) == doc else "live only: %s; documented only: %s" % (sorted(set(v) - doc), sorted(doc - set(v))))' "$1" "$2" "$tmp/doc.keys"
	}
	for ep in /swdriver/stats:drv.json:flat /swdriver/shards:shards.json:nested /swdriver/orgs:orgs.json:nested \
		/swdriver/shared:shared.json:flat \
		/kvss/stats:s1.json:flat /kvss/caches:s1c.json:flat /kvss/lcores:s1l.json:flat; do
		IFS=: read -r name file shape <<<"$ep"
		check "telemetry: $name answers exactly the keys docs/telemetry.md lists" \
			samekeys "$tmp/$file" "$shape" "$name"
	done
	check "telemetry: a shard's /kvss/stats counts batches" test "$(jget "$tmp/s1.json" batches)" -gt 0
	check "telemetry: a shard's /kvss/stats gives its store's own counts (batches opened, bytes written)" \
		sh -c "[ $(jget "$tmp/s1.json" store_batches_opened) -gt 0 ] && [ $(jget "$tmp/s1.json" store_data_bytes) -gt 0 ]"
	check "telemetry: the driver's /swdriver/stats gives the prefix map's own counts (requests, tokens looked up)" \
		sh -c "[ $(jget "$tmp/drv.json" pc_requests) -gt 0 ] && [ $(jget "$tmp/drv.json" pc_lookup_tokens) -gt 0 ]"
	check "telemetry: a shard's /kvss/stats gives its busy time on ingest, the bytes it stored, its idle time" \
		holds "$(jget "$tmp/s1.json" ingest_busy_us) > 0 and $(jget "$tmp/s1.json" data_bytes) > 0 and $(jget "$tmp/s1.json" idle_us) > 0"
	# Epochs as the logs print them: shard 1's (its up line) and the driver's.
	sep=$(jget "$tmp/shards.json" model0_shard1.epoch)
	dep=$(jget "$tmp/s1.json" driver_epoch)
	check "telemetry: /swdriver/shards gives shard 1's epoch as its log line does ($sep)" \
		grep -q "shard 1 of model 0 up, epoch $sep\b" "$tmp/long.log"
	check "telemetry: /kvss/stats gives the driver's epoch as the driver's log does ($dep)" \
		grep -q "epoch $dep\b" "$tmp/long.log"
	check "telemetry: its port gate is on (memif)" test "$(jget "$tmp/s1.json" gate_parks)" -gt 0
	check "telemetry: shard 1's /kvss/caches says 128 bytes per token" \
		test "$(jget "$tmp/s1c.json" bytes_per_token.0)" = 128
	check "SIGTERM: the driver is still running when it is sent" \
		pgrep -f "file-prefix kvss_demo_drv_${tag}b" >/dev/null
	pkill -TERM -f "file-prefix kvss_demo_drv_${tag}b"
	wait $demo
	rc=$?
	check "SIGTERM: the demo (driver) exits 0" test $rc -eq 0
	check "SIGTERM: the summary says it stopped early" grep -q "summary: (stopped early)" "$tmp/long.log"
	grep '^{' "$tmp/long.log" | tail -1 >"$tmp/long.json"
	check "SIGTERM: its JSON says finished false" test "$(field "$tmp/long.json" finished)" = False
	check "SIGTERM: zero verify failures" test "$(field "$tmp/long.json" verify_failures)" = 0
	check "SIGTERM: zero protocol errors" test "$(field "$tmp/long.json" protocol_errors)" = 0
fi

# 4. A shard restarts mid-run, with away_ms = 0 (the driver waits for it
#    rather than run its model as misses, so the run outlasts the restart):
#    the driver sees its new epoch, drops the model's prefixes, starts over
#    with both shards, and finishes the run.
if want 4; then
	sed 's/^  away_ms = 1000;/  away_ms = 0;/' config/memif-driver.cfg >"$tmp/wait.cfg"
	check "restart: the config sets away_ms" grep -q "^  away_ms = 0;" "$tmp/wait.cfg"
	KVSS_DEMO_DRIVER_CFG="$tmp/wait.cfg" KVSS_DEMO_TAG=${tag}c KVSS_DEMO_JSON="$tmp/rs.json" \
		timeout 300 scripts/demo.sh "$BUILD" \
		--trace "" --limit 4000 >"$tmp/rs.log" 2>&1 &
	demo=$!
	wait_replaying "$tmp/rs.log"
	sleep 2
	restart_shard1 "${tag}c" 0 "$tmp/rs_s1.log"
	wait $demo
	rc=$?
	if [ ! -s "$tmp/rs.json" ]; then
		# No summary: show how the run ended (this has been seen once, not reproduced).
		echo "restart: the demo exited $rc without a summary; its log ends:" >&2
		tail -n 20 "$tmp/rs.log" >&2
		echo "restart: the restarted shard's log ends:" >&2
		tail -n 10 "$tmp/rs_s1.log" >&2
	fi
	# It asks who is there once the port is up again (a HELLO: the new shard
	# answers with its new epoch), or a message sent again reaches the new
	# shard first (it answers that it knows no epoch of ours).
	check "restart: the driver noticed the new shard epoch" \
		grep -Eq "shard 1 (no longer knows our epoch|has a new epoch)" "$tmp/rs.log"
	check "restart: and waited for it (away_ms = 0)" test "$(grep -c "shard 1 is away" "$tmp/rs.log")" = 0
	check "restart: and counted it" test "$(field "$tmp/rs.json" shard_restarts)" -ge 1
	check "restart: every request still done" test "$(field "$tmp/rs.json" requests)" = 4000
	check "restart: the run finished" test "$(field "$tmp/rs.json" finished)" = True
	check_exact "restart" "$tmp/rs.json" "the shards hold"
	perr=$(field "$tmp/rs.json" protocol_errors)
	echo "restart: protocol errors around the restart: $perr"
	# The refills in flight fail when the driver sees the shard go, at most
	# max_inflight (8) each time; it can see one restart twice (its link going
	# down, then its new epoch), and one run in five since the second tier came
	# had 9.
	check "restart: only the refills in flight fail (at most 2 x max_inflight = 16 errors)" test "${perr:-99}" -le 16
	echo "restart: refills $(field "$tmp/rs.json" refills), timed $(field "$tmp/rs.json" refills_timed), failed $(field "$tmp/rs.json" refills_failed)"
	check "restart: the refills that failed are not in the refill times the model learns from" \
		test "$(($(field "$tmp/rs.json" refills_timed) + $(field "$tmp/rs.json" refills_failed)))" = "$(field "$tmp/rs.json" refills)"
	kill -TERM $s1b 2>/dev/null
	wait $s1b
	# Frames queued for the dead shard: dropped by the driver when it saw the
	# link go down, or, when it saw none queued then, none reached the
	# successor from the old stream (it would count them stale_epoch).
	check "restart: frames queued for the dead shard were dropped, not sent to its successor" \
		bash -c "grep -q 'summary: ports: [0-9]* restarted after their link went down, [1-9][0-9]* frames dropped' '$tmp/rs.log' ||
		! grep -q 'final stats: control.* stale_epoch=' '$tmp/rs_s1.log'"
	check "restart: the driver's port gate was on (memif)" grep -q "kvss: port gate: the interrupt thread was parked [1-9]" "$tmp/rs.log"
fi

# 4b. The default (away_ms = 1000): a shard that goes and does not come
#     back. The driver sees its link go down, fails the refills in flight,
#     runs the model as misses, and finishes every request.
if want 4b; then
	KVSS_DEMO_TAG=${tag}d KVSS_DEMO_JSON="$tmp/gone.json" timeout 300 scripts/demo.sh "$BUILD" \
		--trace "" --limit 4000 >"$tmp/gone.log" 2>&1 &
	demo=$!
	wait_replaying "$tmp/gone.log"
	sleep 1
	kill -TERM "$(pgrep -f "file-prefix kvss_demo_s1_${tag}d")"
	wait $demo
	rc=$?
	if [ ! -s "$tmp/gone.json" ]; then
		echo "gone: the demo exited $rc without a summary; its log ends:" >&2
		tail -n 20 "$tmp/gone.log" >&2
	fi
	check "gone: the driver saw shard 1 go" grep -q "shard 1 is away" "$tmp/gone.log"
	# The driver's own verdict (the JSON's exit_status): demo.sh says 1 when a
	# shard process did not end cleanly, which a killed one may not.
	check "gone: the driver's exit status is 3 (degraded: a shard went), not 1 (wrong)" \
		test "$(field "$tmp/gone.json" exit_status)" = 3
	check "gone: every request still done" test "$(field "$tmp/gone.json" requests)" = 4000
	check "gone: the run finished" test "$(field "$tmp/gone.json" finished)" = True
	check "gone: zero verify failures" test "$(field "$tmp/gone.json" verify_failures)" = 0
	perr=$(field "$tmp/gone.json" protocol_errors)
	echo "gone: protocol errors: $perr"
	check "gone: only the refills in flight failed (at most 8)" test "${perr:-99}" -le 8
	check "gone: the requests after it ran as misses" \
		grep -q "times a shard was away, [1-9][0-9]* requests begun as misses" "$tmp/gone.log"
fi

# 4r. The default away_ms (1000) with a shard that comes back: killed
#     while the run goes on, restarted a second later. The
#     driver runs its model as misses meanwhile, retries its HELLO, takes it
#     back, and the hit ratio recovers. The wafer's prefill of missed tokens
#     takes time here (driver.recompute_tokens_per_s = 1e6), as on a real
#     accelerator: with misses free the rest of the run was over before the
#     shard was back (0.2 s), and it never got a frame. Every hit is
#     refilled (refill_policy "io-only"): the recovery checked is the
#     cache's, not the adaptive policy's choice at that rate.
if want 4r; then
	sed 's/^  away_ms = 1000;.*/  recompute_tokens_per_s = 1000000; refill_policy = "io-only";/' config/memif-driver.cfg >"$tmp/back.cfg"
	check "back: the config keeps the default away_ms" bash -c "! grep -q away_ms '$tmp/back.cfg'"
	KVSS_DEMO_DRIVER_CFG="$tmp/back.cfg" KVSS_DEMO_TAG=${tag}b2 KVSS_DEMO_JSON="$tmp/back.json" \
		timeout 300 scripts/demo.sh "$BUILD" --trace "" --limit 4000 >"$tmp/back.log" 2>&1 &
	demo=$!
	wait_replaying "$tmp/back.log"
	sleep 1.5
	restart_shard1 "${tag}b2" 1 "$tmp/back_s1.log"
	wait $demo
	kill -TERM $s1b 2>/dev/null
	wait $s1b
	check "back: the driver saw shard 1 go" grep -q "shard 1 is away" "$tmp/back.log"
	check "back: and took it back" grep -q "shard 1 of model 0 is up .*back from away" "$tmp/back.log"
	check "back: the restarted shard got the driver's frames" grep -q "hello=[1-9]" "$tmp/back_s1.log"
	check "back: counted" test "$(field "$tmp/back.json" shards_back)" -ge 1
	check "back: every request done" test "$(field "$tmp/back.json" requests)" = 4000
	check_exact "back" "$tmp/back.json" "the shards hold"
	before=$(field "$tmp/back.json" hit_ratio_before_away)
	after=$(field "$tmp/back.json" hit_ratio_after_return)
	echo "back: hit ratio before shard 1 was away $before, of the requests begun after it came back $after"
	check "back: the hit ratio recovers (at least 3/4 of the one before)" \
		python3 -c "import sys; b, a = float(sys.argv[1]), float(sys.argv[2]); sys.exit(not (b > 0 and a >= 0.75 * b))" "$before" "$after"
	perr=$(field "$tmp/back.json" protocol_errors)
	# The refills in flight fail when the driver sees the shard go, at most
	# max_inflight (8) each time; it can see one departure twice: on a busy
	# machine its silence (away_ms) can come before its link going down,
	# and each fails what is in flight then (seen beside two CPU hogs:
	# 8 timed out, then 8 failed; nothing lost, the account exact).
	check "back: only the refills in flight failed (at most 2 x max_inflight = 16)" test "${perr:-99}" -le 16
fi

# 4c. The driver first, its shards two seconds later (the demo's order is
#     only a convention): it waits for them within driver.start_timeout_ms.
#     Then a driver with no shard at all, stopped by SIGTERM while it waits:
#     it stops at once, exit 0, its runtime directory gone.
if want 4c; then
	MEAL=(--no-pci --no-huge -m 1024 --log-level lib.eal:error --log-level pmd.net.memif:critical)
	"$BUILD/kvss" "${MEAL[@]}" --file-prefix "kvss_demo_drv_${tag}e" --lcores "0@(0-1)" \
		--vdev "net_memif0,role=client,id=0,bsize=10240,socket=$tmp/late0.sock" \
		--vdev "net_memif1,role=client,id=1,bsize=10240,socket=$tmp/late1.sock" \
		-- --config config/memif-driver.cfg --poll idle --trace "" --limit 100 >"$tmp/late.log" 2>&1 &
	late=$!
	sleep 2
	for k in 0 1; do
		"$BUILD/kvss" "${MEAL[@]}" --file-prefix "kvss_demo_s${k}_${tag}e" --lcores "0@(0-1),1@(0-1)" \
			--vdev "net_memif0,role=server,id=$k,bsize=10240,socket=$tmp/late$k.sock" \
			-- --config config/memif-shard$k.cfg --poll idle --l2-dir "$KVSS_DEMO_L2_DIR" \
			>"$tmp/late_s$k.log" 2>&1 &
		lpids+=($!)
	done
	timeout 120 tail --pid=$late -f /dev/null
	wait $late
	rc=$?
	kill -TERM "${lpids[@]}" 2>/dev/null
	wait "${lpids[@]}" 2>/dev/null
	check "late shards: the driver waited for them and ran, exit 0 (got $rc)" test $rc -eq 0
	check "late shards: it said it was waiting" grep -q "its shard is not there yet; waiting" "$tmp/late.log"
	check "late shards: every request done" grep -q '"requests":100,' "$tmp/late.log"
	"$BUILD/kvss" "${MEAL[@]}" --file-prefix "kvss_demo_drv_${tag}f" --lcores "0@(0-1)" \
		--vdev "net_memif0,role=client,id=0,bsize=10240,socket=$tmp/none0.sock" \
		--vdev "net_memif1,role=client,id=1,bsize=10240,socket=$tmp/none1.sock" \
		-- --config config/memif-driver.cfg --poll idle --trace "" >"$tmp/none.log" 2>&1 &
	none=$!
	sleep 1.5
	t0=$(date +%s%N)
	kill -TERM $none
	wait $none
	rc=$?
	ms=$((($(date +%s%N) - t0) / 1000000))
	echo "no shard: SIGTERM while waiting stopped it in $ms ms"
	check "no shard: SIGTERM while it waits stops it within a second, exit 0 (got $rc, $ms ms)" \
		sh -c "[ $rc -eq 0 ] && [ $ms -lt 1000 ]"
	check "no shard: its runtime directory is gone" test ! -e "/var/run/dpdk/kvss_demo_drv_${tag}f"
fi

# 5. A memif link that goes away under full traffic, hundreds of times in 8 s
#    (test/memif_flap.c): EAL's interrupt thread unmaps the rings a worker
#    lcore receives from. With the port gate nothing crashes (without it, 7 of
#    10 such runs died of SIGSEGV within 8 s).
if want 5; then
	timeout 60 "$BUILD/tools/memif_flap" --no-pci --no-huge -m 256 --lcores 0@0,1@1 \
		--log-level lib.eal:error --log-level pmd.net.memif:error --no-telemetry \
		--file-prefix "kvss_e2e_flap_$$" \
		--vdev "net_memif0,role=server,id=0,socket=$tmp/flap.sock" \
		--vdev "net_memif1,role=client,id=0,socket=$tmp/flap.sock" -- 8 >"$tmp/flap.log" 2>&1
	rc=$?
	sed -n 's/^memif_flap: \([0-9]* cycles.*\)/flap: \1/p' "$tmp/flap.log"
	check "flap: no crash, exit 0 (got $rc)" test "$rc" -eq 0
	check "flap: the gate was on" grep -q "memif_flap: gate on" "$tmp/flap.log"
	check "flap: frames flowed in at least 100 link cycles" \
		test "$(sed -n 's/.* \([0-9]*\) with frames flowing.*/\1/p' "$tmp/flap.log")" -ge 100 2>/dev/null
fi

want end
sleep 0.5
check "no kvss process is left" test -z "$(pgrep -f "kvss_demo_.*_${tag}|kvss_e2e_all_$$( |\$)")"
check "no file prefix is left" test -z "$(ls -d /var/run/dpdk/kvss_demo_*_${tag}* /var/run/dpdk/kvss_e2e_all_$$ /var/run/dpdk/kvss_e2e_flap_$$ 2>/dev/null)"
check_summary "kvss end to end"
