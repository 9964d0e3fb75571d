/* SPDX-License-Identifier: BSD-3-Clause */
/* The sending side of a control stream: seq, window, cumulative ACK, retransmission. */
#include "proto_stream.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define OFF_FLAGS 6
#define OFF_SEQ 24

int
proto_stream_init(struct proto_stream *s, uint32_t window, uint64_t timeout)
{
	memset(s, 0, sizeof(*s));
	if (window == 0 || window > PROTO_STREAM_WINDOW_MAX || timeout == 0)
		return -EINVAL;
	s->msg = calloc(window, sizeof(*s->msg));
	if (s->msg == NULL)
		return -ENOMEM;
	s->window = window;
	s->timeout = timeout;
	s->min_timeout = timeout;
	s->max_timeout = timeout * PROTO_STREAM_BACKOFF_MAX;
	s->next_seq = 1;
	return 0;
}

void
proto_stream_fini(struct proto_stream *s)
{
	free(s->msg);
	s->msg = NULL;
}

void
proto_stream_reset(struct proto_stream *s)
{
	s->next_seq = 1;
	s->acked = 0;
	s->received = 0;
	s->srtt8 = s->rttvar4 = 0;
	s->timeout = s->min_timeout;
	s->progress_at = 0;
	s->recover = 0;
	s->rtx_seq = 0;
	s->sample_after = 0;
}

static struct proto_stream_msg *
slot(struct proto_stream *s, uint64_t seq)
{
	return &s->msg[seq % s->window];
}

uint64_t
proto_stream_push(struct proto_stream *s, uint8_t *payload, uint32_t len, uint64_t now)
{
	struct proto_stream_msg *m;
	uint64_t seq = s->next_seq;

	if (!proto_stream_can_push(s) || len < PROTO_HDR_LEN || len > PROTO_PAYLOAD_MAX)
		return 0;
	proto_st64(payload + OFF_SEQ, seq);
	proto_st16(payload + OFF_FLAGS,
		   (uint16_t)(proto_ld16(payload + OFF_FLAGS) & ~PROTO_F_RETRANSMIT));
	m = slot(s, seq);
	memcpy(m->payload, payload, len);
	m->len = len;
	m->last_send = now;
	m->sends = 1;
	s->next_seq++;
	s->st.sent++;
	return seq;
}

uint32_t
proto_stream_ack(struct proto_stream *s, uint64_t cum_seq)
{
	uint32_t n;

	if (cum_seq <= s->acked) {
		s->st.stale_acks++;
		return 0;
	}
	if (cum_seq >= s->next_seq) {
		/* Acknowledges what was never sent: not this stream's. */
		s->st.bogus_acks++;
		return 0;
	}
	n = (uint32_t)(cum_seq - s->acked);
	s->acked = cum_seq;
	s->st.acked += n;
	return n;
}

/*
 * Jacobson/Karels, in fixed point as TCP keeps it (srtt x 8, rttvar x 4):
 * srtt += (r - srtt) / 8, rttvar += (|r - srtt| - rttvar) / 4, timeout =
 * srtt + 4 rttvar within [min, max]. Karn: a message sent more than once
 * gives no sample (which send did the ACK answer?).
 */
uint64_t
proto_rtt_sample(int64_t *srtt8, int64_t *rttvar4, uint64_t r, uint64_t lo, uint64_t hi)
{
	uint64_t rto;

	int64_t x = (int64_t)r, err;

	if (*srtt8 == 0 && *rttvar4 == 0) {
		*srtt8 = x << 3;
		*rttvar4 = x << 1;
	} else {
		err = x - (*srtt8 >> 3);
		*srtt8 += err;
		if (err < 0)
			err = -err;
		*rttvar4 += err - (*rttvar4 >> 2);
	}
	rto = (uint64_t)((*srtt8 >> 3) + *rttvar4);
	return rto < lo ? lo : rto > hi ? hi : rto;
}

/* Jacobson/Karels from message @seq's single send (Karn: none from a resent one). */
static void
rtt_sample(struct proto_stream *s, uint64_t seq, uint64_t now)
{
	const struct proto_stream_msg *m = slot(s, seq);

	if (m->sends == 1 && now >= m->last_send && m->last_send >= s->sample_after) {
		s->timeout = proto_rtt_sample(&s->srtt8, &s->rttvar4, now - m->last_send, s->min_timeout,
					      s->max_timeout);
		s->st.rtt_samples++;
	}
}

void
proto_stream_absent(struct proto_stream *s, uint64_t now)
{
	s->sample_after = now;
}

uint32_t
proto_stream_ack_at(struct proto_stream *s, uint64_t cum_seq, uint64_t now)
{
	if (cum_seq <= s->acked || cum_seq >= s->next_seq)
		return proto_stream_ack(s, cum_seq);
	rtt_sample(s, cum_seq, now);
	s->progress_at = now; /* something was released: the timer starts over */
	return proto_stream_ack(s, cum_seq);
}

uint32_t
proto_stream_ack2(struct proto_stream *s, uint64_t done_seq, uint64_t recv_seq, uint64_t now)
{
	if (recv_seq > s->received && recv_seq < s->next_seq && recv_seq >= done_seq) {
		/* Arrival, not execution, is what the timer is about. */
		if (recv_seq > s->acked)
			rtt_sample(s, recv_seq, now);
		s->received = recv_seq;
		s->progress_at = now;
	}
	if (done_seq > s->acked && done_seq < s->next_seq)
		s->progress_at = now;
	return proto_stream_ack(s, done_seq);
}

/*
 * One retransmission timer per stream, as TCP keeps it (RFC 6298): it runs
 * from the later of the oldest message's last send and the last ACK that
 * released something, and when it expires only that oldest message goes
 * again. A cumulative ACK cannot tell a lost message from one the shard
 * holds in a queue (an EVICT waiting for space is acknowledged when it
 * runs): resending the whole window sent up to 64 copies of what had
 * arrived, per timeout. What followed a lost message is held by the shard
 * and released by the same ACK as the copy. An ACK of exactly the copy,
 * after a timeout and short of what had been sent by then (partial, as
 * NewReno calls it), sends the next message at once, without waiting for
 * another timeout: a burst of losses costs a round trip per message, not a
 * timeout each (and a timeout doubled each time).
 */
const struct proto_stream_msg *
proto_stream_due(struct proto_stream *s, uint64_t now)
{
	struct proto_stream_msg *m;
	uint64_t since;
	/*
	 * After a timeout, an ACK short of what was sent by then is partial
	 * (NewReno). One that stopped exactly at the copy says the receiver
	 * holds nothing after it: the next message was lost too (or waits
	 * there). One that went further says the messages after the copy
	 * arrived; the next one most likely waits at the receiver, and the
	 * timer will tell.
	 */
	/* Version 2: what arrived waits at the receiver; the first not known
	 * to have arrived is the one to send again. */
	uint64_t base = s->received > s->acked ? s->received : s->acked;
	int partial = base == s->rtx_seq && base < s->recover;

	if (base + 1 >= s->next_seq)
		return NULL;
	m = slot(s, base + 1);
	since = m->last_send > s->progress_at ? m->last_send : s->progress_at;
	if (!partial && (now < since || now - since < s->timeout))
		return NULL;
	proto_st16(m->payload + OFF_FLAGS,
		   (uint16_t)(proto_ld16(m->payload + OFF_FLAGS) | PROTO_F_RETRANSMIT));
	m->last_send = now;
	m->sends++;
	s->st.retransmits++;
	s->rtx_seq = base + 1;
	if (partial)
		return m;
	s->recover = s->next_seq - 1;
	/* The path is slower than we thought, or lossy: back off until a sample. */
	if (s->timeout < s->max_timeout)
		s->timeout = s->timeout * 2 < s->max_timeout ? s->timeout * 2 : s->max_timeout;
	return m;
}
