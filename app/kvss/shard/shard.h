/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The shard role's parts, private to them (kvss.h is what the rest sees).
 * Each file is named for its job; calls go one way, down this list (a file
 * calls only files below it), and the state they share is struct
 * shard_state below, whose fields say who writes them:
 *
 *   shard.c    the ingest lcore: frames received, the control stream
 *              (seq order, the window of early messages), the loop
 *   status.c   STATUS: both tiers' counts, for the driver
 *   refillq.c  the refill queue (DELETE, REFILL) on the ingest lcore or on
 *              the refill lcore, refills running ahead
 *   refill.c   REFILL_DATA as gather lists over the store
 *   evict.c    the evict queue (RESERVE, EVICT), EVICT_DATA stored or held
 *              for its EVICT, batches lost at the timeout
 *   level_msg.c  the levels below DRAM on the ingest lcore: L2_DOWN,
 *              SH_DOWN, L2_UP, SH_UP, L2_DELETE, the inventory (PROTOCOL.md
 *              sections 9, 10); level.c, level_disk.c, level_shared.c:
 *              the levels themselves, each an object with its worker (level.h)
 *   tx.c       TX with retry, the ACK, the reliable reports and the
 *              batcher that packs ERROR, REFILL_DONE and TOKEN_LOST records
 *
 * Every frame is parsed once, when it is received: what the queues need of
 * it later stays beside it as a struct shard_rec, and shard_msg() gives the
 * accessors of lib/proto a view of its body without parsing it again.
 */
#ifndef KVSS_SHARD_H
#define KVSS_SHARD_H

#include <stdbool.h>
#include <stdint.h>

#include <rte_mbuf.h>

#include "kvss.h"
#include "level.h"
#include "shared_obj.h"

#define SHARD_WINDOW 64	       /* early control messages held */
#define SHARD_QMAX 1024	       /* messages in each queue */
#define SHARD_REFILL_AHEAD 64  /* REFILLs may run before this many messages of the refill queue */
#define SHARD_EARLY_MAX 1024   /* data frames held before their EVICT */
#define SHARD_HOLD_AHEAD 16    /* ... of batches at most this far past the last EVICT accepted */
#define SHARD_DEL_SLOTS 4096   /* the DELETE barrier's slots, by prompt hash */

/* What a queued frame's later stages need of it: decoded at receive. */
struct shard_rec {
	struct proto_hdr hdr;
	struct proto_addr addr; /* its sender: REFILL_DONE goes back there */
	uint32_t payload_off;	/* the KVSS header in the frame */
	union {
		struct proto_evict_hdr evict; /* EVICT */
		struct proto_data_hdr data;   /* EVICT_DATA */
	} u;
	uint32_t data_off, data_len; /* EVICT_DATA: the bytes in the frame */
	uint64_t gate;		     /* DELETE, REFILL: the largest evict_count it names;
				      * EVICT: the seq of the DELETE it waits for (0: none) */
	uint64_t l2gate;	     /* L2_UP: the seq of the last L2_DOWN accepted before it */
};

/** Decode what the later stages need of the parsed message @p msg. */
void shard_rec_of(struct shard_rec *r, const struct proto_msg *msg);

/*
 * The second tier's and the shared level's messages run the same way
 * (PROTOCOL.md sections 9 and 10): an SH_UP as an L2_UP (an EVICT whose
 * bytes a thread brings), an SH_DOWN as an L2_DOWN (refill queue, after its
 * evict_count); only where the bytes go or come from differs (l2.c).
 */
static inline bool
shard_type_up(unsigned int type)
{
	return type == PROTO_T_L2_UP || type == PROTO_T_SH_UP;
}

static inline bool
shard_type_down(unsigned int type)
{
	return type == PROTO_T_L2_DOWN || type == PROTO_T_SH_DOWN;
}

/** EVICT, L2_UP, SH_UP: an EvictBatch. */
static inline bool
shard_type_batch(unsigned int type)
{
	return type == PROTO_T_EVICT || shard_type_up(type);
}

/**
 * A view of frame @p m (decoded into @p r at receive) for lib/proto's
 * accessors, in @p out: its header and addresses, and its body, in the
 * frame when the frame is one segment (else copied into out->scratch).
 */
static inline const struct proto_msg *
shard_msg(const struct shard_rec *r, const struct rte_mbuf *m, struct proto_msg *out)
{
	uint32_t body_off = r->payload_off + PROTO_HDR_LEN;

	out->addr = r->addr;
	out->hdr = r->hdr;
	out->payload_off = r->payload_off;
	out->data_off = r->data_off;
	out->data_len = r->data_len;
	if (shard_type_batch(r->hdr.type))
		out->u.evict = r->u.evict;
	else if (r->hdr.type == PROTO_T_EVICT_DATA)
		out->u.data = r->u.data;
	/* The frame was whole when parsed: the body is there. */
	if (rte_pktmbuf_is_contiguous(m))
		out->body = rte_pktmbuf_mtod_offset(m, const uint8_t *, body_off);
	else
		out->body = rte_pktmbuf_read(m, body_off, r->hdr.body_len, out->scratch);
	return out;
}

/* One of the two queues of accepted messages, in seq order. */
struct shard_fifo {
	struct rte_mbuf *m[SHARD_QMAX]; /* NULL: it ran ahead */
	struct shard_rec rec[SHARD_QMAX];
	uint64_t seq[SHARD_QMAX];   /* control seq of each message */
	uint64_t since[SHARD_QMAX]; /* when the head first had to wait (0: not yet) */
	uint32_t head, tail;
	/* The store's room when the head was last refused for it, and that
	 * head's index + 1 (0: none): until the room changes, it is not tried. */
	struct kvstore_room refused;
	uint32_t refused_head;
};

/*
 * The shard's state. The ingest lcore writes all of it but ahead_seen_not,
 * which the lcore running the refill queue writes: the refill lcore when
 * the shard has one (it has its rings, kvss.h), the ingest lcore when not.
 */
#define SHARD_REPORTS 256

struct shard_report {
	uint64_t sent;	 /* tsc of its last send; its round trip if sent once only (Karn) */
	uint32_t sends;
	uint32_t len;
	struct proto_addr to;
	uint8_t p[PROTO_PAYLOAD_MAX];
};

struct shard_state {
	/* shard.c: the control stream. */
	uint64_t next_seq;		       /* expected control seq (1 after HELLO) */
	struct rte_mbuf *window[SHARD_WINDOW]; /* early messages by seq % SHARD_WINDOW */
	struct shard_rec window_rec[SHARD_WINDOW];
	uint64_t window_seq[SHARD_WINDOW];
	struct shard_fifo evictq, refillq;
	uint64_t queued_batch; /* highest batch_no of an EVICT accepted into the evict queue */
	/*
	 * The DELETE barrier (PROTOCOL.md section 4): an EVICT runs after
	 * every DELETE accepted before it that names one of its prompts. By
	 * prompt hash, the seq of the latest DELETE accepted naming it; the
	 * DELETEs run in seq order, so del_applied (the seq of the last one
	 * run) says which have.
	 */
	uint64_t del_seq[SHARD_DEL_SLOTS];
	uint64_t del_id[SHARD_DEL_SLOTS]; /* its prompt; 0 when DELETEs of several wait */
	uint64_t del_last;     /* seq of the latest DELETE accepted */
	uint64_t del_applied;  /* seq of the latest DELETE run (applied or refused) */
	uint64_t del_gate_max; /* largest evict_count of a DELETE accepted in this stream */
	/* An L2_UP runs after the L2_DOWNs accepted before it (a column sent
	 * down may come up at once): the seq of the latest accepted, and of the
	 * latest run (its column handed to the tier thread, which writes
	 * before it reads). */
	uint64_t l2down_last, l2down_done;
	/* Second-tier and shared-level operations the ingest lcore took back
	 * from their threads: with del_applied and the batches published, the
	 * progress the space timeout counts from (evict.c). */
	uint64_t tier_done;
	/* l2.c: requests given to those threads; tier_done short of it: some in
	 * flight, which will end (done, failed or timed out) and may make room. */
	uint64_t tier_given;
	/* tx.c: acknowledgements. */
	int ack_due;
	uint64_t ack_sent; /* the last cum_seq sent */
	uint64_t recv_sent; /* the last recv_seq sent (version 2) */
	/* tx.c: reliable reports (version 2): ERROR, TOKEN_LOST and
	 * L2_DONE frames of the ingest lcore carry a report seq and are kept,
	 * by seq % SHARD_REPORTS, until the driver's REPORT_ACK covers them. */
	struct shard_report *rep;
	uint64_t rep_next;  /* the seq the next report gets (1 after HELLO) */
	uint64_t rep_acked; /* every report <= it arrived */
	uint64_t rep_due;   /* tsc: resend what is not acknowledged */
	uint64_t rep_rto;   /* in tsc cycles; doubles while nothing is acknowledged */
	uint64_t rep_base;  /* the timeout the round trip says (5 to 200 ms); rep_rto after an ACK */
	int64_t rep_srtt8, rep_rttvar4; /* the round trip to the REPORT_ACK (proto_rtt_sample) */
	uint64_t rep_recover; /* at the last timeout, the last report sent then (0: none) */
	/* evict.c: data held for its EVICT, batches' clocks. */
	struct rte_mbuf *early[SHARD_EARLY_MAX];
	struct shard_rec early_rec[SHARD_EARLY_MAX];
	uint64_t early_t[SHARD_EARLY_MAX];
	/* early_rec[i]'s batch_no again, side by side: a full hold looks
	 * through all of them for the batch furthest ahead at every frame. */
	uint64_t early_no[SHARD_EARLY_MAX];
	uint32_t nearly;
	/* The first held frame of the batch furthest ahead, as a full hold's
	 * look through early_no finds it, kept while the hold is unchanged
	 * (early_far_ok): data keeps coming for batches past it, each frame
	 * refused, and each look was a thousand loads. */
	uint32_t early_far;
	bool early_far_ok;
	/* evict.c: the seq of the last EVICT counted waiting for a DELETE; what
	 * had run when the waiting EVICT last saw progress (the space timeout). */
	uint64_t evict_counted, evict_progress;
	/* refillq.c: what the last look past the waiting head of the refill
	 * queue saw, each word complemented (zero, as the shard starts: never
	 * looked); and a DELETE taken from the refill lcore that waits for an
	 * EVICT before it. The shard's, not its lcore's: a process that starts
	 * a shard again (the fuzzer, each input) starts them with it. */
	uint64_t ahead_seen_not[3];
	struct rte_mbuf *posted_waiting;
	uint64_t batch_t[256]; /* when each open batch's EVICT ran, by batch_no % 256 */
	uint8_t batch_up[256]; /* its bytes come from a tier (L2_UP, SH_UP), not EVICT_DATA */
	/* Reads of each such batch still with the tier: its bytes come from them,
	 * and the tier bounds each (its op timeout: level.h, silent_ms), so the
	 * batch waits for them while the tier answers, and up to the batch
	 * timeout plus that once it is silent (a hung disk); once none is out,
	 * what it misses is lost. */
	uint16_t up_reads[256];
	uint64_t up_no[256]; /* the batch up_reads counts for (an answer after it was cut is not) */
	/* Of them, those still out at each level (enum shard_level_kind): a
	 * batch's reads wait behind the level's queue, so it is the silence of
	 * a level it still waits on (by the level's own clock, level.h), not
	 * the batch's age, that says a read is not coming (a slow disk answers
	 * late but answers; a hung one is silent, however busy the other level
	 * is; a level's worker starved of its core is neither). */
	uint16_t up_reads_at[256][SHARD_LEVELS];
	/* And for each, the level's given count once its last read was given
	 * (level.h), and when the ingest lcore first saw the level take them
	 * all (0: not yet): a level's silence about a batch counts from then. */
	uint64_t up_need[256][SHARD_LEVELS];
	uint64_t up_took[256][SHARD_LEVELS];
	/* evict.c: when the first EVICT_DATA frame of each batch arrived (by
	 * batch_no % 256, the batch in data_no), and the highest batch seen:
	 * data of a later batch says what an open one misses was lost
	 * (PROTOCOL.md section 5, "Sooner on evidence"). */
	uint64_t data_t[256];
	uint64_t data_no[256];
	uint64_t data_max;
	uint64_t data_last; /* when the last EVICT_DATA frame taken (stored or held) arrived */
	/*
	 * shard.c: the clock the timeouts read (the batch timeout, data held
	 * for its EVICT, the space timeout), not the time now: the start of the
	 * last poll that read the receive queue empty (a burst short of BURST,
	 * the port's gate open), set once what that poll took in had run. What
	 * had arrived by then was taken in; a shard late to its own queue (its
	 * core taken by other work, or stopped) has not seen the time pass, and
	 * a timeout measures the sender's silence, not the shard's lateness.
	 */
	uint64_t looked;
	struct proto_msg msg, msg2; /* the frame received; a view of a queued one */
	uint64_t hz;
	/* level_msg.c: the columns a level let go on its own, being told as
	 * L2_GONE records (NULL: none), and how far the telling is. */
	struct kvdisk_meta *gone;
	uint32_t ngone, gone_at;
};


/* ---- tx.c ---- */

/* Records of one type, packed into as few frames as the MTU allows. */
struct shard_batcher {
	struct proto_builder b;
	uint8_t buf[PROTO_PAYLOAD_MAX];
	uint8_t type;
	uint16_t queue;
	const struct proto_addr *to; /* NULL: the driver's last control source */
	struct kvss_shard_inst *me;  /* the shard whose frames these are */
	struct kvss_lcore_stats *st;
};

void shard_batcher_init(struct shard_batcher *bt, uint8_t type, struct kvss_shard_inst *me,
			struct kvss_lcore_stats *st);
/** Send what it holds (if anything) and begin the next frame. */
void shard_batcher_flush(struct shard_batcher *bt);
/** Send its frame even with no record (a header alone), and begin the next. */
void shard_batcher_send(struct shard_batcher *bt);
/**
 * Pack record @p rec into @p bt with @p build (lib/proto's builder of its
 * type, proto_build_error say): when the frame is full it is sent and the
 * record begins the next. A macro: each builder takes its own record type.
 */
#define SHARD_BATCHER_ADD(bt, build, rec)                                                        \
	do {                                                                                     \
		if (build(&(bt)->b, (rec)) == -ENOSPC) {                                         \
			shard_batcher_flush(bt);                                                 \
			build(&(bt)->b, (rec));                                                  \
		}                                                                                \
	} while (0)
void shard_add_error(struct shard_batcher *bt, uint64_t seq, uint64_t prompt, uint32_t token,
		     uint16_t cache, uint16_t code);
void shard_add_lost(struct shard_batcher *bt, uint16_t cache_id, uint64_t prompt_id,
		    uint32_t first, uint32_t count);

/** Begin a reply frame of @p type in @p buf from this shard (its ids, its epoch). */
void shard_begin_reply(struct kvss_shard_inst *me, struct proto_builder *b, uint8_t *buf,
		       uint32_t cap, uint8_t type);
/** From the ingest lcore: @p payload to where the driver's last control came from. */
void shard_send_control(struct kvss_shard_inst *me, struct kvss_lcore_stats *st,
			const uint8_t *payload, uint32_t len);

/* ---- status.c ---- */

/** STATUS now: both tiers' counts, batches complete, uptime (PROTOCOL.md section 5). */
void shard_send_status(struct kvss_shard_inst *me, struct kvss_lcore_stats *st);

/* ---- tx.c: reports ---- */

/**
 * A REPORT_ACK: every report <= @p cum arrived. Its round trip sets the
 * timeout; after a timeout, one that stops short sends the next at once.
 */
void shard_report_acked(struct kvss_shard_inst *me, struct kvss_lcore_stats *st, uint64_t cum);
/** At the timeout, the oldest report not acknowledged again (the ingest lcore's loop). */
void shard_report_poll(struct kvss_shard_inst *me, struct kvss_lcore_stats *st, uint64_t now);
/** A new stream (HELLO with a new driver epoch), or the end: nothing kept. */
void shard_report_reset(struct kvss_shard_inst *me, bool release);
/** Reports that may be sent now before one goes unsequenced (SHARD_REPORTS less those unacknowledged). */
unsigned int shard_report_room(struct kvss_shard_inst *me);
/** The cumulative ACK now (PROTOCOL.md section 3, AckBody). */
uint64_t shard_ack_value(struct kvss_shard_inst *me);
void shard_send_ack(struct kvss_shard_inst *me, struct kvss_lcore_stats *st);

/* ---- evict.c ---- */

/** Store EVICT_DATA frame @p m; -EAGAIN when its batch's EVICT has not run. */
int shard_store_data(struct kvss_shard_inst *me, const struct rte_mbuf *m,
		     const struct shard_rec *r);
/**
 * Hold @p m (its EVICT has not run) until @p now + the batch timeout.
 * false (counted): its batch is too far ahead, or no room is left that a
 * batch further ahead holds.
 */
bool shard_hold_data(struct kvss_shard_inst *me, struct kvss_lcore_stats *st, struct rte_mbuf *m,
		     const struct shard_rec *r, uint64_t now);
/** Store what was held, now that its EVICT ran; drop what waited too long (by the looked clock). */
void shard_retry_held(struct kvss_shard_inst *me, struct kvss_lcore_stats *st);
/** Drop everything held (a new driver epoch); returns how many. */
uint32_t shard_drop_held(struct kvss_shard_inst *me);
/** At acceptance, in seq order: a DELETE's slots; the DELETE an EVICT waits for (its gate). */
void shard_barrier_accept(struct kvss_shard_inst *me, struct kvss_lcore_stats *st,
			  struct shard_rec *r, const struct rte_mbuf *m);
/** Must DELETE @p msg wait for an EVICT before it naming its prompt to run? */
bool shard_delete_must_wait(struct kvss_shard_inst *me, const struct proto_msg *msg);
/** Forget the barrier (a new stream). */
void shard_barrier_reset(struct kvss_shard_inst *me);
/** Run the evict queue's head messages; stop at one that must wait. */
void shard_run_evictq(struct kvss_shard_inst *me, struct kvss_lcore_stats *st,
		      struct shard_batcher *err, uint64_t now);
/** An EVICT_DATA frame of batch @p batch_no arrived at @p now (stored or held). */
void shard_data_seen(struct kvss_shard_inst *me, uint64_t batch_no, uint64_t now);
/** Forget which batches' data came (a new stream). */
void shard_loss_reset(struct kvss_shard_inst *me);
/**
 * Batches whose streams are not whole by the timeout complete with loss;
 * sooner, by the reorder allowance, once data of a later batch came. Both
 * by the looked clock (struct shard_state), from the later of the EVICT's
 * run and the last EVICT_DATA frame taken: the wafer's silence.
 */
void shard_expire_batches(struct kvss_shard_inst *me, struct kvss_lcore_stats *st);

/* ---- refillq.c ---- */

/**
 * The refill queue on the ingest lcore (a port with one TX queue). The
 * cycles of the REFILLs it runs go to st->refill_cycles (kvss.h).
 */
void shard_run_refillq(struct kvss_shard_inst *me, struct kvss_lcore_stats *st,
		       struct shard_batcher *err);
/** With a refill lcore: the refill queue, in order, onto its ring. */
void shard_pass_to_refill(struct kvss_shard_inst *me, struct kvss_lcore_stats *st);
/** DELETEs the refill lcore handed back: applied by the store's writer. */
void shard_apply_posted_deletes(struct kvss_shard_inst *me, struct kvss_lcore_stats *st,
				struct shard_batcher *err);

/* ---- level.c, level_msg.c: the levels below DRAM (level.h; PROTOCOL.md sections 9, 10) ---- */

/** Does shard @p me have the level message type @p type is for (L2_*, SH_*)? */
bool shard_level_on(struct kvss_shard_inst *me, unsigned int type);
/** Run L2_DOWN, SH_DOWN or L2_DELETE @p msg (its gate open). -EAGAIN: the level is behind; again later. */
int shard_level_run(struct kvss_shard_inst *me, struct kvss_lcore_stats *st,
		    struct shard_batcher *err, const struct proto_msg *msg);
/** Is there room to run L2_UP or SH_UP @p msg (0), or must it wait (-EAGAIN)? */
int shard_level_up_room(struct kvss_shard_inst *me, const struct proto_msg *msg);
/**
 * L2_UP or SH_UP @p msg, its batch just opened (entries @p e, kvstore's
 * @p codes for them): its columns are read, their tokens stored; an accepted
 * entry no column covers is lost with its batch, never stored.
 */
void shard_level_up(struct kvss_shard_inst *me, struct kvss_lcore_stats *st,
		    const struct proto_msg *msg, const struct proto_evict_entry *e,
		    const uint16_t *codes);
/** After a STATUS answering a HELLO: the inventory goes out when the second tier has it. */
void shard_level_inventory(struct kvss_shard_inst *me, struct kvss_lcore_stats *st);
/** What the levels finished: L2_DONE, ERROR, tokens stored, the inventory sent. */
void shard_level_poll(struct kvss_shard_inst *me, struct kvss_lcore_stats *st,
		      struct shard_batcher *err);
/**
 * The ingest lcore ends: the L2_GONE records it had yet to send are
 * dropped (a driver that asks for those columns is answered UNKNOWN_PROMPT).
 */
void shard_level_gone_drop(struct kvss_shard_inst *me);

#endif
