#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# kvss-udp-client (app/udpclient, docs/INTEGRATION.md) against a real
# shard: the client, a driver and a wafer in one over the kernel's UDP
# sockets, in one network namespace; the shard (kvss --role shard) in
# another, on its end of a veth pair through DPDK's net_af_packet. The
# client evicts a prompt and refills it (whole, glued, a middle range, in
# both caches), checks every byte, the REFILL_DONEs that must fail, the
# DELETE; then again with one expected byte flipped, which must fail.
# Then, on a second shard process, the batch timeout: a shard stopped
# (SIGSTOP) longer than the batch timeout, a batch's data arriving in its
# receive queue meanwhile, loses nothing; a wafer silent that long after
# the batch's EVICT ran loses the batch.
# The namespaces, the veth pair, the shard and its EAL prefix are this
# script's own (named by its PID) and go at its end, whatever happens.
set -u
BUILD=${1:-build}
cd "$(dirname "$0")/.."
. scripts/check-lib.sh
tmp=$(mktemp -d)
NC=kvudp_c$$ NS=kvudp_s$$ VC=kvuC$$ VS=kvuS$$ PREFIX=kvudp_$$
C_IP=10.97.0.1 S_IP=10.97.0.10 S_MAC=02:00:00:00:cc:10
sp=
cp=
cleanup() {
	if [ -n "$sp" ]; then
		kill -CONT "$sp" 2>/dev/null # a stopped shard takes no SIGINT
		kill -INT "$sp" 2>/dev/null
		wait "$sp" 2>/dev/null
	fi
	if [ -n "$cp" ]; then
		kill "$cp" 2>/dev/null
		wait "$cp" 2>/dev/null
	fi
	ip netns del $NC 2>/dev/null
	ip netns del $NS 2>/dev/null
	rm -rf "$tmp" "/var/run/dpdk/$PREFIX"
}
trap cleanup EXIT
trap 'exit 1' INT TERM

if [ ! -x "$BUILD/kvss-udp-client" ] || [ ! -x "$BUILD/kvss" ]; then
	echo "udpclient: $BUILD/kvss-udp-client or $BUILD/kvss is not built (make)" >&2
	exit 1
fi
if ! ip netns add $NC 2>/dev/null; then
	echo "udpclient: skipped: cannot create network namespaces here (root, iproute2)"
	check_summary "udpclient"
	exit 0
fi
ip netns add $NS
for n in $NC $NS; do # nothing of the kernel's own on these links
	ip netns exec $n sysctl -qw net.ipv6.conf.all.disable_ipv6=1
	ip netns exec $n sysctl -qw net.ipv6.conf.default.disable_ipv6=1
done
# DPDK 22.11's net_af_packet keeps MTU 1500 (its frame size); a jumbo rail
# takes --mtu 9000 on both sides.
ip link add $VC type veth peer name $VS && ip link set $VC netns $NC && ip link set $VS netns $NS &&
	ip -n $NC link set $VC up && ip -n $NS link set $VS up &&
	ip -n $NC addr add $C_IP/24 dev $VC &&
	ip -n $NC neigh replace $S_IP lladdr $S_MAC dev $VC nud permanent # a shard answers no ARP
C_MAC=$(ip -n $NC -o link show $VC | grep -o 'link/ether [0-9a-f:]*' | cut -d' ' -f2)
check "the namespaces and the veth pair are up" test -n "$C_MAC"

# shard_cfg CACHES: the shard, model 1, shard 2 (the reference content
# depends on all three), control only from the client, nothing that crossed
# a router; CACHES its caches' list.
shard_cfg() {
	cat <<EOF
role = "shard";
poll_mode = "idle";
mtu = 1500;
lcores = { ingest = [1]; refill = []; control = 0; };
shard = {
  id = 2; model = 1; routed = "refuse";
  address = { mac = "$S_MAC"; ipv4 = "$S_IP"; };
  wafer = { mac = "$C_MAC"; ipv4 = "$C_IP"; };
  drivers = [ "$C_IP" ];
  batch_timeout_ms = 1000;
  caches = ( $1 );
};
EOF
}
# start_shard LOG [stoppable]: the shard of $tmp/shard.cfg, its output in
# LOG, bounded to 60 s; "stoppable": kvss itself is the process in $sp (ip
# netns exec execs it), with no timeout between, so that SIGSTOP stops it
# (the cleanup ends it).
start_shard() {
	local bound="timeout 60"

	[ "${2:-}" = stoppable ] && bound=
	# shellcheck disable=SC2086
	ip netns exec $NS $bound "$BUILD/kvss" --no-pci --no-huge -m 256 --lcores "0@0,1@1" \
		--log-level lib.eal:error --no-telemetry --file-prefix "$PREFIX" \
		--vdev "net_af_packet0,iface=$VS,framecnt=4096" -- --config "$tmp/shard.cfg" \
		>"$1" 2>&1 &
	sp=$!
	for _ in $(seq 100); do grep -q ' up, epoch ' "$1" && break; sleep 0.1; done
}
# stop_shard: the shard in $sp ends (SIGINT: it prints its final stats).
stop_shard() {
	kill -INT "$sp" 2>/dev/null
	wait "$sp" 2>/dev/null
	sp=
}

# Two caches of different geometry.
shard_cfg '{ id = 0; bytes_per_token = 1024; buffers = 2; capacity_tokens = 4096; },
    { id = 1; bytes_per_token = 384;  buffers = 3; capacity_tokens = 4096; }' >"$tmp/shard.cfg"
start_shard "$tmp/shard.log"
check "the shard is up on its end of the veth" grep -q 'shard 2 of model 1 up, epoch ' "$tmp/shard.log"

# client TAG ARGS...: a run; its exit status in rc_TAG, stdout and stderr in TAG.out, TAG.err.
client() {
	local tag=$1
	shift
	ip netns exec $NC timeout 30 "$BUILD/kvss-udp-client" --shard $S_IP --bind $C_IP --model 1 \
		--no-udp-checksum "$@" >"$tmp/$tag.out" 2>"$tmp/$tag.err"
	eval "rc_$tag=$?"
	if [ "$tag" = main ]; then
		sed "s/^/  $tag: /" "$tmp/$tag.out" "$tmp/$tag.err"
	else
		grep -h 'PASS\|FAIL' "$tmp/$tag.out" "$tmp/$tag.err" | sed "s/^/  $tag: /"
	fi
}

# KVSS_UDPCLIENT_FLIP=K flips expected byte K of this run too: the test must fail then.
client main --tokens 1000 ${KVSS_UDPCLIENT_FLIP:+--flip-expected "$KVSS_UDPCLIENT_FLIP"}
check "a prompt of 1000 tokens evicted and refilled: every check held (exit 0)" \
	sh -c "[ $rc_main = 0 ] && grep -q '^udp-client: PASS: 10 refills, 3168000 bytes checked' '$tmp/main.out'"
check "the shard took the client's HELLO and showed its two caches" \
	grep -q 'established; cache 0: 1024 B/token in 2 buffer(s), room for 4096 tokens; cache 1: 384 B/token in 3 buffer(s)' "$tmp/main.out"
check "every batch complete, 1000 tokens of 1 prompt in each cache" \
	grep -q 'STATUS: 23 batches complete, 1000 tokens of 1 prompt in each cache' "$tmp/main.out"
check "six refills (whole, glued in reverse, a middle range; both caches): every byte as evicted" \
	test "$(grep -c ': every byte as evicted$' "$tmp/main.out")" = 6
check "an unknown prompt, a range past the end, an unknown cache: their REFILL_DONE codes, no data" \
	sh -c "grep -q 'never evicted): REFILL_DONE UNKNOWN_PROMPT, no data' '$tmp/main.out' &&
		grep -q 'past the prompt.s end): REFILL_DONE RANGE, no data' '$tmp/main.out' &&
		grep -q 'does not have): REFILL_DONE BAD_CACHE, no data' '$tmp/main.out'"
check "the DELETE: STATUS says 0, and a refill finds nothing" \
	sh -c "grep -q 'deleted: STATUS says 0 tokens, 0 prompts in every cache' '$tmp/main.out' &&
		grep -q 'the deleted prompt): REFILL_DONE UNKNOWN_PROMPT, no data' '$tmp/main.out'"
check "nothing on stderr" test ! -s "$tmp/main.err"

# Another organization, prompt and token ids, batches of 7 tokens (EVICT_DATA
# frames that cut tokens), one shard process: a new driver epoch starts over.
client small --org globex --prompt 77 --seed 9 --tokens 333 --batch 7
check "another organization, 48 batches of at most 7 tokens: every check held (exit 0)" \
	sh -c "[ $rc_small = 0 ] && grep -q 'STATUS: 48 batches complete, 333 tokens' '$tmp/small.out' &&
		grep -q '^udp-client: PASS: 10 refills' '$tmp/small.out'"

# The check can fail: one byte of what refill 1000 should be, flipped.
client flip --tokens 1000 --flip-expected 1000
check "a flipped expected byte fails the run (exit 1)" \
	sh -c "[ $rc_flip = 1 ] && grep -q '^udp-client: FAIL: 10 refills' '$tmp/flip.out'"
check "... naming the refill, cache, buffer, byte, token, what came and what was expected" \
	grep -q 'FAIL: refill 1000 (the whole prompt): cache 0 buffer 0 stream byte 1000 (token 1, byte 488 of the buffer.s 512) is 0x[0-9a-f]*, expected 0x' "$tmp/flip.err"
check "... that one byte only: the other five refills held" \
	sh -c "grep -q 'FAIL: refill 1000: 1 byte(s) wrong' '$tmp/flip.err' &&
		test \$(grep -c ': every byte as evicted\$' '$tmp/flip.out') = 5 &&
		test \$(grep -c FAIL '$tmp/flip.err') = 2"

# The shard's side: stopped, its counters.
stop_shard
stats=$(grep 'final stats' "$tmp/shard.log")
check "the shard stopped and said its counts" test -n "$stats"
check "the shard refused exactly what the client asked to fail, 3 runs: 6 x UNKNOWN_PROMPT, 3 x RANGE, 3 x BAD_CACHE" \
	grep -q 'final stats: errors refill_failed_UNKNOWN_PROMPT=6 refill_failed_RANGE=3 refill_failed_BAD_CACHE=3$' \
	<<<"$stats"
# What the shard dropped: only the ICMP "port unreachable" of its periodic
# STATUS to a client that has exited (not_kvss), never one of the client's frames.
others=$(grep 'final stats: dropped' <<<"$stats" | grep -o 'drop_[a-z_]*=[0-9]*' | grep -v '^drop_not_kvss=')
check "the shard dropped none of the client's frames" test -z "$others"
check "the client's frames came with TTL 64: one segment, served under routed = \"refuse\"" \
	grep -q "the rail: the driver's frames crossed 0 router(s), the wafer's 0" "$tmp/shard.log"
echo "udpclient: $(grep -h '^udp-client: PASS' "$tmp/main.out"); shard: $(grep -o 'frames rx_frames.*' <<<"$stats")"
[ "$fail" -eq 0 ] || tail -n 12 "$tmp/shard.log" >&2

# The batch timeout measures the wafer's silence, not the shard's lateness
# (PROTOCOL.md section 5). A second shard process, the same configuration
# (batch_timeout_ms 1000), stoppable: SIGSTOP stops the shard.
start_shard "$tmp/shard2.log" stoppable
check "the second shard is up" grep -q 'shard 2 of model 1 up, epoch ' "$tmp/shard2.log"
# late TAG GATE ARGS...: a client in the background whose batch 1 data waits
# for file GATE; returns once batch 1's EVICT ran (0) or the client ended (1).
late() {
	local tag=$1 gate=$2
	shift 2
	ip netns exec $NC "$BUILD/kvss-udp-client" --shard $S_IP --bind $C_IP --model 1 \
		--no-udp-checksum --timeout 30000 --data-gate "$gate" "$@" \
		>"$tmp/$tag.out" 2>"$tmp/$tag.err" &
	cp=$!
	for _ in $(seq 300); do
		grep -q "^udp-client: batch 1's EVICT ran" "$tmp/$tag.out" && return 0
		kill -0 "$cp" 2>/dev/null || return 1
		sleep 0.1
	done
	return 1
}
# late_end TAG: the client's exit status in rc_TAG.
late_end() {
	wait "$cp"
	eval "rc_$1=$?"
	cp=
	grep -h 'PASS\|FAIL' "$tmp/$1.out" "$tmp/$1.err" | head -3 | sed "s/^/  $1: /"
}
# The shard stopped once batch 1's EVICT ran; the batch's data (44 frames,
# more than one receive burst) sent to it while stopped, and it stays
# stopped 2 s (twice the batch timeout). Continued, it finds the data in its
# queue: nothing lost, every byte refilled. (Before, the first burst after
# the stop was followed by the timeout: batch 1 lost, TOKEN_LOST.)
if late stalled "$tmp/gate1" --prompt 3000 --tokens 300; then
	kill -STOP "$sp"
	touch "$tmp/gate1"
	for _ in $(seq 300); do
		grep -q "^udp-client: batch 1's data sent" "$tmp/stalled.out" && break
		sleep 0.1
	done
	sleep 2
	kill -CONT "$sp"
fi
late_end stalled
check "a shard stopped 2 s (batch timeout 1 s), a batch's data waiting in its queue: every check held (exit 0)" \
	sh -c "[ $rc_stalled = 0 ] && grep -q '^udp-client: PASS: 10 refills' '$tmp/stalled.out'"
check "... batch 1's data went while it was stopped: 44 frames" \
	grep -q "^udp-client: batch 1's data sent: 44 EVICT_DATA frames" "$tmp/stalled.out"
check "... no TOKEN_LOST, every batch complete with all 300 tokens" \
	sh -c "! grep -q TOKEN_LOST '$tmp/stalled.err' && grep -q 'STATUS: 7 batches complete, 300 tokens of 1 prompt in each cache' '$tmp/stalled.out'"
# The timeout still works: the shard running, the wafer silent 2 s after
# batch 1's EVICT ran. The batch is lost, and said so.
if late silent "$tmp/gate2" --prompt 4000 --tokens 300; then
	sleep 2
	touch "$tmp/gate2"
fi
late_end silent
check "a wafer silent 2 s after its EVICT ran (batch timeout 1 s): the run fails (exit 1)" \
	test "$rc_silent" = 1
check "... batch 1's tokens lost, said in TOKEN_LOST" \
	grep -q 'TOKEN_LOST: prompt 4000 tokens \[0, ' "$tmp/silent.err"
stop_shard
stats2=$(grep 'final stats' "$tmp/shard2.log")
check "the second shard lost one batch in all (the silent wafer's)" \
	grep -q 'batches_lost=1 ' <<<"$stats2"
[ "$fail" -eq 0 ] || tail -n 12 "$tmp/shard2.log" >&2

# As many caches as a shard may have, and counts between: 1, 4, 5 (more
# refills than the client once had room for) and 16 (its REFILL in several
# datagrams), each cache of its own geometry (1 to 3 buffers).
for n in 1 4 5 16; do
	caches=
	for k in $(seq 0 $((n - 1))); do
		b=$((1 + k % 3))
		caches="$caches${caches:+, }{ id = $k; bytes_per_token = $((128 * b)); buffers = $b; capacity_tokens = 1024; }"
	done
	shard_cfg "$caches" >"$tmp/shard.cfg"
	start_shard "$tmp/shard$n.log"
	client "caches$n" --tokens 300 --prompt $((500 + n))
	rc=$(eval echo "\$rc_caches$n")
	check "$n cache(s): every check held (exit 0), $((3 * n + 4)) refills" \
		sh -c "[ $rc = 0 ] && grep -q '^udp-client: PASS: $((3 * n + 4)) refills' '$tmp/caches$n.out' &&
			test ! -s '$tmp/caches$n.err'"
	if [ $n = 4 ]; then
		# A cache salt: the prompt's bytes are its salted chain's (PROTOCOL.md
		# section 6), evicted and refilled as any other's.
		client salted --tokens 300 --prompt 601 --salt 'user-42'
		check "a salted prompt (--salt user-42): every check held (exit 0)" \
			sh -c "[ $rc_salted = 0 ] && grep -q '^udp-client: PASS: 16 refills' '$tmp/salted.out'"
	fi
	stop_shard
	[ "$rc" = 0 ] || { tail -n 5 "$tmp/caches$n.err" "$tmp/shard$n.log" >&2; }
done
# A salt not of the documented form: refused before anything is sent.
for bad in '' 'a b' 'a"b' 'a\b' "$(printf 'caf\303\251')" "$(head -c 257 /dev/zero | tr '\0' x)"; do
	"$BUILD/kvss-udp-client" --shard 127.0.0.1 --salt "$bad" >"$tmp/badsalt.out" 2>"$tmp/badsalt.err"
	check "--salt '${bad:0:12}' (${#bad} bytes): refused (exit 2), naming --salt" \
		sh -c "[ $? = 2 ] && grep -q '^udp-client: --salt: want 1 to 256' '$tmp/badsalt.err'"
done
check_summary "udpclient"
