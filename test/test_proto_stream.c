/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The sending side of a control stream: seq stamping, the window,
 * cumulative ACKs, retransmission. The last test runs it against a receiver
 * that follows PROTOCOL.md section 5 over a channel that loses, duplicates
 * and reorders both ways; every message must be accepted exactly once, in
 * order, byte for byte.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proto_stream.h"
#include "test_rng.h"

static struct proto_stream s;
static struct proto_msg msg;

/* A DELETE of prompt @p id (a different body per message), seq 0. */
static uint32_t
build(uint8_t *buf, uint64_t id)
{
	struct proto_builder b;
	struct proto_hdr h = {.type = PROTO_T_DELETE, .shard_id = 1, .epoch = 0xE, .seq = 0};
	struct proto_delete d = {id, id / 2, (uint32_t)id, (uint32_t)id + 3, 0};

	proto_build_begin(&b, buf, PROTO_PAYLOAD_MAX, &h);
	proto_build_delete(&b, &d);
	return proto_build_end(&b);
}

static void
parse(const uint8_t *p, uint32_t len)
{
	cr_assert_eq(proto_parse_payload(p, len, PROTO_PORT_CTRL_DEFAULT, &proto_ports_default, &msg),
		     PROTO_OK);
}

static void
teardown(void)
{
	proto_stream_fini(&s);
}

TestSuite(stream, .fini = teardown);

Test(stream, init_checks_window_and_timeout)
{
	cr_assert_eq(proto_stream_init(&s, 0, 10), -EINVAL);
	cr_assert_eq(proto_stream_init(&s, 65, 10), -EINVAL);
	cr_assert_eq(proto_stream_init(&s, 8, 0), -EINVAL);
	cr_assert_eq(proto_stream_init(&s, 64, 10), 0);
	cr_assert_eq(proto_stream_unacked(&s), 0);
}

Test(stream, push_stamps_seq_until_the_window_is_full)
{
	uint8_t buf[PROTO_PAYLOAD_MAX];
	uint32_t n;
	uint64_t i;

	cr_assert_eq(proto_stream_init(&s, 4, 100), 0);
	for (i = 1; i <= 4; i++) {
		n = build(buf, i);
		buf[6] |= PROTO_F_RETRANSMIT; /* a stale flag is cleared */
		cr_assert_eq(proto_stream_push(&s, buf, n, 0), i);
		parse(buf, n);
		cr_assert_eq(msg.hdr.seq, i);
		cr_assert_eq(msg.hdr.flags & PROTO_F_RETRANSMIT, 0);
	}
	n = build(buf, 5);
	cr_assert_eq(proto_stream_push(&s, buf, n, 0), 0, "a fifth message fits a window of 4");
	cr_assert_eq(proto_stream_unacked(&s), 4);
	cr_assert_eq(proto_stream_ack(&s, 2), 2);
	cr_assert_eq(proto_stream_push(&s, buf, n, 0), 5);
	cr_assert_eq(proto_stream_push(&s, buf, 10, 0), 0, "a payload shorter than a header");
	cr_assert_eq(s.st.sent, 5);
}

Test(stream, stale_and_bogus_acks_change_nothing)
{
	uint8_t buf[PROTO_PAYLOAD_MAX];
	uint32_t n = build(buf, 1);

	cr_assert_eq(proto_stream_init(&s, 8, 100), 0);
	proto_stream_push(&s, buf, n, 0);
	proto_stream_push(&s, buf, n, 0);
	proto_stream_push(&s, buf, n, 0);
	cr_assert_eq(proto_stream_ack(&s, 7), 0);
	cr_assert_eq(proto_stream_ack(&s, 4), 0, "seq 4 was never sent");
	cr_assert_eq(s.st.bogus_acks, 2);
	cr_assert_eq(proto_stream_ack(&s, 3), 3);
	cr_assert_eq(proto_stream_ack(&s, 2), 0);
	cr_assert_eq(proto_stream_ack(&s, 3), 0);
	cr_assert_eq(s.st.stale_acks, 2);
	cr_assert_eq(s.acked, 3);
	cr_assert_eq(s.st.acked, 3);
}

Test(stream, the_oldest_unacked_message_goes_again_alone_after_the_timeout)
{
	uint8_t buf[PROTO_PAYLOAD_MAX], first[PROTO_PAYLOAD_MAX];
	const struct proto_stream_msg *m;
	uint32_t n1, n;

	cr_assert_eq(proto_stream_init(&s, 8, 100), 0);
	n1 = build(first, 11);
	proto_stream_push(&s, first, n1, 1000); /* seq 1 at t=1000 */
	n = build(buf, 22);
	proto_stream_push(&s, buf, n, 1050); /* seq 2 at t=1050 */
	cr_assert_null(proto_stream_due(&s, 1099));
	m = proto_stream_due(&s, 1100);
	cr_assert_not_null(m);
	cr_assert_eq(m->len, n1);
	parse(m->payload, m->len);
	cr_assert_eq(msg.hdr.seq, 1);
	cr_assert_eq(msg.hdr.flags & PROTO_F_RETRANSMIT, PROTO_F_RETRANSMIT);
	/* Apart from the flag, the same bytes as first sent. */
	cr_assert_eq(memcmp(m->payload + 8, first + 8, n1 - 8), 0);
	cr_assert_eq(memcmp(m->payload, first, 6), 0);
	cr_assert_eq(s.timeout, 200, "a retransmission doubles the timeout");
	cr_assert_null(proto_stream_due(&s, 1100), "one message per timeout");
	cr_assert_null(proto_stream_due(&s, 1299),
		       "seq 2 (sent at 1050) does not go while seq 1 is unacknowledged");
	/* The copy's ACK stops short of seq 2, sent before the timeout: partial. */
	cr_assert_eq(proto_stream_ack_at(&s, 1, 1310), 1);
	cr_assert_eq(s.st.rtt_samples, 0, "a message sent twice gives no round trip (Karn)");
	m = proto_stream_due(&s, 1310);
	cr_assert_not_null(m, "after a partial ACK the next message goes at once");
	parse(m->payload, m->len);
	cr_assert_eq(msg.hdr.seq, 2);
	cr_assert_eq(m->sends, 2);
	cr_assert_eq(s.timeout, 200, "a copy for a partial ACK does not back off");
	cr_assert_null(proto_stream_due(&s, 1310));
	cr_assert_eq(proto_stream_ack(&s, 2), 1);
	cr_assert_null(proto_stream_due(&s, 100000));
	cr_assert_eq(s.st.retransmits, 2);
}

Test(stream, an_ack_that_releases_something_starts_the_timer_over)
{
	uint8_t buf[PROTO_PAYLOAD_MAX];

	cr_assert_eq(proto_stream_init(&s, 8, 100), 0);
	proto_stream_push(&s, buf, build(buf, 1), 1000);
	proto_stream_push(&s, buf, build(buf, 2), 1050);
	/* No timeout yet: seq 1's round trip, 80, makes the timeout 3 x 80. */
	cr_assert_eq(proto_stream_ack_at(&s, 1, 1080), 1);
	cr_assert_eq(s.timeout, 240);
	cr_assert_null(proto_stream_due(&s, 1080), "not a partial ACK: no timeout came before it");
	cr_assert_null(proto_stream_due(&s, 1319), "seq 2 was sent at 1050, but the ACK came at 1080");
	cr_assert_not_null(proto_stream_due(&s, 1320));
}

/*
 * A receiver that holds a message in a queue (a shard's EVICT waiting for
 * space) acknowledges nothing past it until it runs. Each timeout sends one
 * copy of that message, not the window: 8 messages held for 7 timeouts
 * cost 3 copies with the timeout doubling (100, 200, 400), not 24; and
 * when it runs, the next one waiting is not taken for lost.
 */
Test(stream, a_message_held_by_the_receiver_costs_one_copy_per_timeout)
{
	uint8_t buf[PROTO_PAYLOAD_MAX];
	const struct proto_stream_msg *m;
	uint64_t t, copies = 0;
	int i;

	cr_assert_eq(proto_stream_init(&s, 8, 100), 0);
	for (i = 0; i < 8; i++)
		proto_stream_push(&s, buf, build(buf, 1 + (uint64_t)i), 1000 + (uint64_t)i);
	for (t = 1000; t <= 1700; t++)
		while ((m = proto_stream_due(&s, t)) != NULL) {
			parse(m->payload, m->len);
			cr_assert_eq(msg.hdr.seq, 1, "only the oldest goes again (t=%lu, seq %lu)",
				     (unsigned long)t, (unsigned long)msg.hdr.seq);
			copies++;
		}
	/* Sent at 1000; copies at 1100, 1300 and 1700. */
	cr_assert_eq(copies, 3);
	cr_assert_eq(s.st.retransmits, 3);
	/* It ran, and 2 to 5 after it; 6 waits there now. An ACK past the copy
	 * says what came after it arrived: no copy of 6 at once. */
	cr_assert_eq(proto_stream_ack_at(&s, 5, 1750), 5);
	cr_assert_null(proto_stream_due(&s, 1750), "an ACK beyond the copy is not taken for a loss");
	cr_assert_eq(proto_stream_ack_at(&s, 8, 1760), 3);
	cr_assert_null(proto_stream_due(&s, 1000000));
	cr_assert_eq(s.st.retransmits, 3);
}

/*
 * Every message of a window lost at once (a TX queue that overflowed): the
 * first goes again after the timeout, and each ACK of a copy then sends the
 * next, a round trip apart. With the timeout doubling per copy instead, 32
 * losses would take minutes of ticks here.
 */
Test(stream, a_burst_of_losses_costs_a_round_trip_per_message)
{
	uint8_t buf[PROTO_PAYLOAD_MAX];
	const struct proto_stream_msg *m;
	uint64_t t, next = 1, ack_at = 0, ack = 0;
	const uint64_t rtt = 10;
	int i;

	cr_assert_eq(proto_stream_init(&s, 32, 100), 0);
	for (i = 0; i < 32; i++)
		proto_stream_push(&s, buf, build(buf, 1 + (uint64_t)i), 0); /* all lost */
	for (t = 0; s.acked < 32 && t < 100000; t++) {
		if (ack_at != 0 && t == ack_at) {
			proto_stream_ack_at(&s, ack, t);
			ack_at = 0;
		}
		while ((m = proto_stream_due(&s, t)) != NULL) {
			parse(m->payload, m->len);
			/* The receiver has everything before it: in order, acknowledged. */
			cr_assert_eq(msg.hdr.seq, next, "copy of seq %lu, want %lu",
				     (unsigned long)msg.hdr.seq, (unsigned long)next);
			next++;
			ack = msg.hdr.seq;
			ack_at = t + rtt;
		}
	}
	cr_assert_eq(s.acked, 32);
	cr_assert_eq(s.st.retransmits, 32, "each lost message sent again once");
	/* The timeout (100), then 32 round trips. */
	cr_assert_eq(t, 100 + 32 * rtt + 1, "all acknowledged at tick %lu", (unsigned long)(t - 1));
}

Test(stream, the_timeout_follows_the_measured_round_trip)
{
	uint8_t buf[PROTO_PAYLOAD_MAX];
	uint64_t t = 1000, seq;
	int i;

	cr_assert_eq(proto_stream_init(&s, 8, 10), 0);
	/* First sample 100: srtt 100, rttvar 50, timeout 300. */
	seq = proto_stream_push(&s, buf, build(buf, 1), t);
	cr_assert_eq(proto_stream_ack_at(&s, seq, t + 100), 1);
	cr_assert_eq(s.st.rtt_samples, 1);
	cr_assert_eq(s.timeout, 300);
	proto_stream_push(&s, buf, build(buf, 2), 2000);
	cr_assert_null(proto_stream_due(&s, 2299), "not before srtt + 4 rttvar");
	cr_assert_not_null(proto_stream_due(&s, 2300));
	cr_assert_eq(proto_stream_ack_at(&s, 2, 2400), 1);
	cr_assert_eq(s.st.rtt_samples, 1, "a retransmitted message gives no sample");
	/* A steady 100 brings the variation down: the timeout comes close to 100. */
	for (i = 0; i < 60; i++) {
		t += 1000;
		seq = proto_stream_push(&s, buf, build(buf, 3 + (uint64_t)i), t);
		cr_assert_eq(proto_stream_ack_at(&s, seq, t + 100), 1);
	}
	/* (Integer smoothing leaves a variation of a few units.) */
	cr_assert(s.timeout >= 100 && s.timeout <= 115, "timeout %lu", (unsigned long)s.timeout);
	/* Never above 64 times the minimum, never below it. */
	seq = proto_stream_push(&s, buf, build(buf, 100), t);
	proto_stream_ack_at(&s, seq, t + 1000000);
	cr_assert_eq(s.timeout, 640);
	for (i = 0; i < 200; i++) {
		t += 1000;
		seq = proto_stream_push(&s, buf, build(buf, 200 + (uint64_t)i), t);
		proto_stream_ack_at(&s, seq, t + 1);
	}
	cr_assert_eq(s.timeout, 10);
	proto_stream_reset(&s);
	cr_assert_eq(s.timeout, 10);
	cr_assert_eq(s.srtt8, 0);
}

/*
 * A sender that did not run from 1,100 to 50,000: the ACK of the message
 * sent at 1,000 waited for it, so its round trip (49,000) is no sample; a
 * message sent after it is one.
 * Catches: a stop of the sender taken as the link's round trip, which
 * holds the timeout at its maximum for many messages after.
 */
Test(stream, a_round_trip_over_the_senders_absence_is_no_sample)
{
	uint8_t buf[PROTO_PAYLOAD_MAX];
	uint64_t seq;

	cr_assert_eq(proto_stream_init(&s, 8, 10), 0);
	seq = proto_stream_push(&s, buf, build(buf, 1), 1000);
	proto_stream_absent(&s, 50000);
	cr_assert_eq(proto_stream_ack2(&s, seq, seq, 50000), 1);
	cr_assert_eq(s.st.rtt_samples, 0, "its ACK waited for the sender");
	cr_assert_eq(s.timeout, 10);
	seq = proto_stream_push(&s, buf, build(buf, 2), 50000);
	cr_assert_eq(proto_stream_ack2(&s, seq, seq, 50100), 1);
	cr_assert_eq(s.st.rtt_samples, 1, "sent after it: a sample");
	cr_assert_eq(s.timeout, 300);
}

Test(stream, reset_starts_over_at_seq_1)
{
	uint8_t buf[PROTO_PAYLOAD_MAX];
	uint32_t n = build(buf, 1);

	cr_assert_eq(proto_stream_init(&s, 8, 100), 0);
	proto_stream_push(&s, buf, n, 0);
	proto_stream_push(&s, buf, n, 0);
	proto_stream_reset(&s);
	cr_assert_eq(proto_stream_unacked(&s), 0);
	cr_assert_null(proto_stream_due(&s, 1000));
	cr_assert_eq(proto_stream_push(&s, buf, n, 0), 1);
}

/* ---- Against a section-5 receiver over a bad channel --------------------- */

#define RWIN 64
#define NMSG 20000
#define INFLIGHT 4096

struct pkt {
	uint32_t len;
	uint64_t ack; /* ACK packets: the cumulative seq; else 0 */
	uint8_t p[128];
};

static struct pkt net[INFLIGHT]; /* in flight, both ways; delivered in random order */
static unsigned int nnet;
static uint64_t rng;

static uint64_t
rnd(void)
{
	return test_xorshift(&rng);
}

/* The channel: loses 10%, duplicates 5%. */
static void
send_pkt(const uint8_t *p, uint32_t len, uint64_t ack)
{
	unsigned int copies = rnd() % 100 < 10 ? 0 : rnd() % 100 < 5 ? 2 : 1;

	while (copies-- && nnet < INFLIGHT) {
		net[nnet].len = len;
		net[nnet].ack = ack;
		if (len)
			memcpy(net[nnet].p, p, len);
		nnet++;
	}
}

Test(stream, every_message_is_accepted_once_in_order_over_a_lossy_reordering_channel)
{
	static uint8_t held[RWIN][128];
	static uint32_t held_len[RWIN];
	static uint64_t held_seq[RWIN];
	uint8_t buf[PROTO_PAYLOAD_MAX];
	uint64_t seed = test_seed("stream channel test", 0x5eed5eedULL);
	uint64_t now = 0, pushed = 0, accepted = 0, next = 1, dups = 0, flagged = 0;

	rng = seed | 1;
	cr_assert_eq(proto_stream_init(&s, RWIN, 50), 0);
	while (accepted < NMSG) {
		const struct proto_stream_msg *m;
		unsigned int k;

		cr_assert_lt(now, 10000000, "no progress: %lu of %d accepted", (unsigned long)accepted,
			     NMSG);
		now++;
		/* The driver: push while the window allows, retransmit what is due. */
		while (pushed < NMSG && proto_stream_can_push(&s) && rnd() % 4 != 0) {
			uint32_t n = build(buf, pushed + 1);

			cr_assert_eq(proto_stream_push(&s, buf, n, now), pushed + 1);
			pushed++;
			send_pkt(buf, n, 0);
		}
		while ((m = proto_stream_due(&s, now)) != NULL)
			send_pkt(m->payload, m->len, 0);
		/* Deliver a few packets, picked at random (reordering). */
		for (k = 0; k < 8 && nnet > 0; k++) {
			unsigned int i = (unsigned int)(rnd() % nnet);
			struct pkt p = net[i];

			net[i] = net[--nnet];
			if (p.len == 0) {
				proto_stream_ack(&s, p.ack);
				continue;
			}
			/* The receiver (section 5): strict order, 64 held, duplicates ignored. */
			parse(p.p, p.len);
			flagged += (msg.hdr.flags & PROTO_F_RETRANSMIT) != 0;
			if (msg.hdr.seq < next || msg.hdr.seq >= next + RWIN) {
				dups += msg.hdr.seq < next;
			} else {
				unsigned int w = msg.hdr.seq % RWIN;

				memcpy(held[w], p.p, p.len);
				held_len[w] = p.len;
				held_seq[w] = msg.hdr.seq;
				while (held_seq[next % RWIN] == next) {
					w = next % RWIN;
					parse(held[w], held_len[w]);
					/* Message n is the DELETE of prompt n, exactly. */
					struct proto_delete d;

					proto_get_delete(&msg, 0, &d);
					cr_assert_eq(d.prompt_id, next, "seq %lu carries prompt %lu",
						     (unsigned long)next, (unsigned long)d.prompt_id);
					cr_assert_eq(d.end_token_idx, (uint32_t)next + 3);
					held_seq[w] = 0;
					accepted++;
					next++;
				}
			}
			send_pkt(NULL, 0, next - 1); /* cumulative ACK */
		}
	}
	printf("stream channel test: %lu accepted in order, %lu retransmissions, %lu duplicates "
	       "ignored, %lu flagged copies received, %lu ticks\n",
	       (unsigned long)accepted, (unsigned long)s.st.retransmits, (unsigned long)dups,
	       (unsigned long)flagged, (unsigned long)now);
	cr_assert_eq(accepted, NMSG);
	cr_assert_gt(s.st.retransmits, 0, "a channel losing 10%% needs retransmissions");
	cr_assert_gt(flagged, 0);
}
