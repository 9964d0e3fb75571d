/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The sending side of a control stream (PROTOCOL.md section 5): what a
 * driver keeps per (driver epoch, shard epoch, model, shard).
 *
 * Every control payload pushed gets the next seq (1, 2, ...) written into
 * its header, and a copy is kept until a cumulative ACK covers it. At most
 * `window` messages are unacknowledged: the shard holds 64 early ones, so a
 * window of 64 or less never sends what the shard must drop. When nothing
 * has been released for a timeout, the oldest unacknowledged message goes
 * again, alone, with the retransmission flag set (one timer per stream, as
 * TCP's); after that, each ACK of exactly the copy that stops short of what
 * had been sent sends the next one at once (NewReno's partial ACK). The timeout adapts to the measured round trip
 * (proto_stream_ack_at), so a shard whose ACKs queue behind data frames is
 * not flooded with copies of what it already has. A new stream (either
 * side restarted) starts over at seq 1 with nothing kept.
 *
 * No EAL, no allocation after init, no clock of its own: the caller passes
 * `now` in any unit it likes (the timeout is in the same unit).
 */
#ifndef PROTO_STREAM_H
#define PROTO_STREAM_H

#include <stdint.h>

#include "proto.h"

#define PROTO_STREAM_WINDOW_MAX 64
/** The timeout never exceeds this many times the minimum. */
#define PROTO_STREAM_BACKOFF_MAX 64

struct proto_stream_stats {
	uint64_t sent;		/* messages pushed */
	uint64_t retransmits;	/* messages sent again */
	uint64_t acked;		/* messages a cumulative ACK released */
	uint64_t stale_acks;	/* ACKs at or below what was already acked */
	uint64_t bogus_acks;	/* ACKs beyond the last seq sent: ignored */
	uint64_t rtt_samples;	/* round trips measured (proto_stream_ack_at) */
};

struct proto_stream_msg {
	uint64_t last_send;
	uint32_t len;
	uint32_t sends;
	uint8_t payload[PROTO_PAYLOAD_MAX];
};

struct proto_stream {
	uint64_t next_seq; /* the seq the next push gets */
	uint64_t acked;	   /* cumulative: every seq <= acked is released */
	uint64_t received; /* version 2: every seq <= it arrived (never sent again) */
	uint64_t timeout;     /* in force: adapts to the round trip when ACKs carry time */
	uint64_t min_timeout; /* as given to init */
	uint64_t max_timeout;
	int64_t srtt8, rttvar4; /* smoothed round trip x 8 and its variation x 4 (0: none yet) */
	uint64_t progress_at;	/* when an ACK last released something (proto_stream_ack_at) */
	uint64_t recover;	/* at the last timeout: the last seq sent then (0: none yet) */
	uint64_t rtx_seq;	/* the seq last sent again (0: none yet) */
	uint64_t sample_after;	/* a message last sent before it: no sample (proto_stream_absent) */
	uint32_t window;
	struct proto_stream_msg *msg; /* window slots, by seq % window */
	struct proto_stream_stats st;
};

/** Set up a stream: @p window in [1, 64], @p timeout > 0. 0 or -errno. */
int proto_stream_init(struct proto_stream *s, uint32_t window, uint64_t timeout);
void proto_stream_fini(struct proto_stream *s);

/** A new stream (a HELLO of a new driver epoch, or a shard restart). */
void proto_stream_reset(struct proto_stream *s);

/** Messages sent and not yet acknowledged. */
static inline uint32_t
proto_stream_unacked(const struct proto_stream *s)
{
	return (uint32_t)(s->next_seq - 1 - s->acked);
}

/** Room for one more message? */
static inline int
proto_stream_can_push(const struct proto_stream *s)
{
	return proto_stream_unacked(s) < s->window;
}

/**
 * Take a built control payload (header with any seq), stamp the next seq
 * into it, keep a copy. Returns the seq (the caller sends @p payload now),
 * 0 when the window is full, or 0 with nothing kept when @p len is not a
 * whole header or above PROTO_PAYLOAD_MAX.
 */
uint64_t proto_stream_push(struct proto_stream *s, uint8_t *payload, uint32_t len, uint64_t now);

/** A cumulative ACK: returns how many messages it released. */
uint32_t proto_stream_ack(struct proto_stream *s, uint64_t cum_seq);

/**
 * A cumulative ACK received at @p now: as proto_stream_ack(), and the round
 * trip of the newest message it releases (when that was sent only once)
 * updates the timeout: smoothed RTT + 4 x its variation, never below the
 * timeout given to init nor above PROTO_STREAM_BACKOFF_MAX times it. A
 * retransmission doubles the timeout until the next sample. Any ACK that
 * releases something starts the retransmission timer over.
 */
uint32_t proto_stream_ack_at(struct proto_stream *s, uint64_t cum_seq, uint64_t now);

/**
 * The oldest unacknowledged message, when neither its last send nor the
 * last ACK that released something (proto_stream_ack_at) is less than the
 * timeout ago: marked as a retransmission, stamped sent at @p now, and the
 * timeout doubled until the next round-trip sample. Also, at once and with
 * no doubling, after an ACK that followed such a timeout and released up to
 * the copy exactly, short of the last seq sent by then (a partial ACK: the
 * receiver holds nothing after the copy). NULL when nothing is due.
 * Only that one message goes: the rest were sent no earlier, and a
 * cumulative ACK cannot tell a lost message from one the receiver still
 * holds in a queue. Call until NULL, sending each (payload, len).
 */
/**
 * A version 2 ACK: every seq <= @p done_seq is released (as
 * proto_stream_ack()), and every seq <= @p recv_seq arrived: it is never
 * sent again, however long it waits at the receiver, and round trips are
 * measured from arrival (not from execution, which may wait for room).
 * @return messages released.
 */
uint32_t proto_stream_ack2(struct proto_stream *s, uint64_t done_seq, uint64_t recv_seq,
			   uint64_t now);

const struct proto_stream_msg *proto_stream_due(struct proto_stream *s, uint64_t now);

/**
 * The sender did not run until @p now (stopped, its core taken): the ACKs of
 * what it had sent waited for it, so their round trips hold its absence and
 * are no samples (as Karn's resent messages are not).
 */
void proto_stream_absent(struct proto_stream *s, uint64_t now);

/**
 * One round-trip sample @p r (any unit) into a Jacobson/Karels estimate, in
 * fixed point as TCP keeps it (@p srtt8: smoothed round trip x 8, @p rttvar4:
 * its variation x 4; both 0 before the first sample). The stream's timeout
 * follows it; so does a shard's for its reports (PROTOCOL.md section 5).
 * @return srtt + 4 x rttvar, in the unit of @p r, within [@p lo, @p hi].
 */
uint64_t proto_rtt_sample(int64_t *srtt8, int64_t *rttvar4, uint64_t r, uint64_t lo, uint64_t hi);

#endif
