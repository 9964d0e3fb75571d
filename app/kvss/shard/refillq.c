/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The refill queue (shard.h): DELETE and REFILL in order, each waiting for
 * its evict_count, with the result of running in order: a REFILL whose
 * batches are complete may run before a DELETE that waits, when that
 * DELETE names no prompt it reads (run_ahead). On a port with one TX queue
 * the ingest lcore runs the queue; with a second TX queue the refill lcore
 * does (kvss_shard_refill), handing DELETEs back to the ingest lcore, the
 * store's one writer. REFILL_DATA itself is refill.c's.
 */
#include <errno.h>
#include <string.h>

#include <rte_cycles.h>
#include <rte_ethdev.h>
#include <rte_lcore.h>
#include <rte_mbuf.h>
#include <rte_ring.h>

#include "shard.h"

/* Apply a DELETE message (the kvstore writer's side); ERRORs to its sender. */
static void
apply_delete(struct kvss_shard_inst *me, struct kvss_lcore_stats *st, struct shard_batcher *err,
	     const struct proto_msg *msg)
{
	unsigned int i;

	me->st->del_applied = msg->hdr.seq; /* EVICTs behind it may run (the barrier) */
	for (i = 0; i < msg->hdr.count; i++) {
		struct proto_delete d;
		int code;

		proto_get_delete(msg, i, &d);
		code = kvstore_delete(me->store, &d);
		if (code != 0)
			shard_add_error(err, msg->hdr.seq, d.prompt_id, d.start_token_idx, d.cache_id,
				  (uint16_t)code);
		else
			st->deletes++;
	}
}

/* A message of a driver that has restarted since it came (a new epoch is in force). */
static bool
stale(struct kvss_shard_inst *me, const struct proto_msg *msg)
{
	return msg->hdr.epoch != __atomic_load_n(&me->driver_epoch, __ATOMIC_ACQUIRE);
}

static void
run_refill_msg(struct kvss_shard_inst *me, struct kvss_lcore_stats *st, uint16_t queue,
	       const struct proto_msg *msg)
{
	static struct shard_batcher done[RTE_MAX_LCORE];
	struct shard_batcher *bt = &done[rte_lcore_id()];
	struct proto_refill_req rq;
	const uint8_t *ch;
	uint32_t off = 0;
	unsigned int i;

	shard_batcher_init(bt, PROTO_T_REFILL_DONE, me, st);
	bt->queue = queue;
	bt->to = &msg->addr; /* to the REFILL's sender */
	while (proto_next_refill(msg, &off, &rq, &ch)) {
		struct proto_refill_chunk chunks[256];
		struct proto_refill_done rd = {rq.refill_id, 0, 0, 0};
		struct kvstore_refill *r = NULL;
		uint16_t code = 0;
		int64_t sent;

		for (i = 0; i < rq.num_chunks && i < 256; i++)
			proto_get_refill_chunk(ch, i, &chunks[i]);
		/*
		 * A driver gone (a HELLO of a new epoch reset the store): the
		 * refill lcore checks the epoch before it waits for the DELETEs
		 * before the REFILL to be applied, and a new driver's batches
		 * may write the prompt again meanwhile. Its bytes are not the
		 * old refill's: checked again here, and once the refill holds
		 * the prompt (the store is reset only after the epoch changes).
		 */
		if (stale(me, msg))
			break;
		if (rq.num_chunks > 256)
			code = PROTO_E_MALFORMED;
		else
			r = kvstore_refill_begin(me->store, rq.cache_id, chunks, rq.num_chunks,
						 &code);
		if (r != NULL && stale(me, msg)) {
			kvstore_refill_end(r);
			break;
		}
		if (r == NULL && code == 0)
			code = PROTO_E_NO_SPACE; /* too many refills in flight */
		if (r != NULL) {
			sent = kvss_refill_send(me, st, queue, &rq, r);
			if (sent == -2) {
				code = PROTO_E_RANGE; /* cut short under it: the tokens are gone */
			} else if (sent < 0) {
				code = PROTO_E_NO_SPACE;
			} else {
				rd.tokens = kvstore_refill_tokens(r);
				rd.bytes = (uint64_t)sent;
				st->refills++;
				st->refill_bytes += (uint64_t)sent;
			}
		}
		rd.status = code;
		st->refill_errors[code < PROTO_E_MAX ? code : 0] += code != 0;
		SHARD_BATCHER_ADD(bt, proto_build_refill_done, &rd);
	}
	if (stale(me, msg))
		st->dropped_restart++; /* what it asked from here on: nothing sent */
	shard_batcher_flush(bt);
}

/* Is every evict_count the message names complete? */
static int
gate_open(struct kvss_shard_inst *me, const struct proto_msg *msg)
{
	uint64_t complete = kvstore_batches_complete(me->store);
	unsigned int i;

	if (msg->hdr.type == PROTO_T_DELETE) {
		for (i = 0; i < msg->hdr.count; i++) {
			struct proto_delete d;

			proto_get_delete(msg, i, &d);
			if (d.evict_count > complete)
				return 0;
		}
	} else if (shard_type_down(msg->hdr.type) || msg->hdr.type == PROTO_T_L2_DELETE) {
		for (i = 0; i < msg->hdr.count; i++) {
			struct proto_l2col c;
			struct proto_l2del d;

			if (shard_type_down(msg->hdr.type))
				proto_get_l2_down(msg, i, &c);
			else
				proto_get_l2_delete(msg, i, &d);
			if ((shard_type_down(msg->hdr.type) ? c.evict_count : d.evict_count) > complete)
				return 0;
		}
	} else {
		struct proto_refill_req rq;
		const uint8_t *ch;
		uint32_t off = 0;

		while (proto_next_refill(msg, &off, &rq, &ch))
			if (rq.evict_count > complete)
				return 0;
	}
	return 1;
}

/* Does the DELETE message @p del name a prompt that a chunk of @p refill reads? */
static int
touches(const struct proto_msg *del, const struct proto_msg *refill)
{
	struct proto_refill_req rq;
	const uint8_t *ch;
	uint32_t off = 0;
	unsigned int i, k;

	while (proto_next_refill(refill, &off, &rq, &ch))
		for (k = 0; k < rq.num_chunks; k++) {
			struct proto_refill_chunk c;

			proto_get_refill_chunk(ch, k, &c);
			for (i = 0; i < del->hdr.count; i++) {
				struct proto_delete d;

				proto_get_delete(del, i, &d);
				if (d.prompt_id == c.prompt_id)
					return 1;
			}
		}
	return 0;
}

/*
 * The head of the refill queue waits for its batches. A REFILL behind it
 * whose own batches are complete, and that reads no prompt a DELETE before
 * it names, runs now: that gives what running in order gives (a REFILL only
 * reads; a DELETE changes only the prompts it names), sooner. Otherwise a
 * small REFILL waits behind every DELETE of the sequences that just ended
 * until their last batches are stored.
 *
 * @p slot: the queue's first @p n messages, in order (NULL: ran already);
 * each that runs is freed and its slot set to NULL. The queue runs on one
 * lcore (ingest or refill), so one set of parsed messages serves.
 */
static void
run_ahead(struct kvss_shard_inst *me, struct kvss_lcore_stats *st, struct rte_mbuf **slot[],
	  unsigned int n, uint16_t queue)
{
	/* The instance's: one lcore runs its queue (too big for each thread's own). */
	static struct proto_msg msgs[KVSS_MAX_LOCAL_SHARDS][SHARD_REFILL_AHEAD];
	struct proto_msg *msg = msgs[me - kvss_shards];
	const struct proto_msg *del[SHARD_REFILL_AHEAD];
	unsigned int i, k, nd = 0;

	for (i = 0; i < n && i < SHARD_REFILL_AHEAD; i++) {
		struct proto_msg *m = &msg[i];

		if (*slot[i] == NULL)
			continue;
		proto_parse_mbuf(*slot[i], &kvss.cfg.udp, m);
		if (m->hdr.type == PROTO_T_DELETE) {
			del[nd++] = m;
			continue;
		}
		if (m->hdr.type != PROTO_T_REFILL)
			continue; /* L2_DOWN, L2_DELETE: in their turn (they change nothing a REFILL reads) */
		/* The head; or a stale driver's (dropped when it is the head). */
		if (i == 0 || stale(me, m) || !gate_open(me, m) || stale(me, m))
			continue;
		for (k = 0; k < nd && !touches(del[k], m); k++)
			;
		if (k < nd)
			continue;
		run_refill_msg(me, st, queue, m);
		rte_pktmbuf_free(*slot[i]);
		*slot[i] = NULL;
		st->refills_ahead++;
	}
}

/*
 * Is a look past the waiting head worth it: have batches completed,
 * messages come or gone since the last look? (A look parses up to
 * SHARD_REFILL_AHEAD messages; a poll loop would repeat it for nothing.)
 */
static int
ahead_changed(struct kvss_shard_inst *me, uint64_t came, uint64_t gone)
{
	uint64_t *seen = me->st->ahead_seen_not; /* complemented: zero is never looked */
	uint64_t now[3] = {~kvstore_batches_complete(me->store), ~came, ~gone};

	if (memcmp(now, seen, sizeof(now)) == 0)
		return 0;
	memcpy(seen, now, sizeof(now));
	return 1;
}

void
shard_run_refillq(struct kvss_shard_inst *me, struct kvss_lcore_stats *st,
		  struct shard_batcher *err)
{
	struct shard_fifo *q = &me->st->refillq;

	while (q->head != q->tail) {
		struct rte_mbuf *m = q->m[q->head % SHARD_QMAX];
		struct proto_msg *msg = &me->st->msg2;

		if (m == NULL) {
			q->head++; /* it ran ahead */
			continue;
		}
		/* Its batches: from the record decoded at receive, no parse. */
		if (q->rec[q->head % SHARD_QMAX].gate > kvstore_batches_complete(me->store)) {
			struct rte_mbuf **slot[SHARD_REFILL_AHEAD];
			uint32_t i, n = q->tail - q->head < SHARD_REFILL_AHEAD ? q->tail - q->head : SHARD_REFILL_AHEAD;

			if (n > 1 && ahead_changed(me, q->tail, q->head)) {
				uint64_t t = rte_get_tsc_cycles();

				for (i = 0; i < n; i++)
					slot[i] = &q->m[(q->head + i) % SHARD_QMAX];
				run_ahead(me, st, slot, n, 0);
				st->refill_cycles += rte_get_tsc_cycles() - t;
			}
			return;
		}
		shard_msg(&q->rec[q->head % SHARD_QMAX], m, msg);
		if (msg->hdr.type == PROTO_T_DELETE && shard_delete_must_wait(me, msg))
			return; /* an EVICT before it, of its prompt, has not run */
		if (msg->hdr.type == PROTO_T_DELETE) {
			apply_delete(me, st, err, msg);
		} else if (shard_type_down(msg->hdr.type) || msg->hdr.type == PROTO_T_L2_DELETE) {
			if (shard_level_run(me, st, err, msg) != 0)
				return; /* the tier thread is behind */
		} else {
			/* Refill work, timed (the poll's rest is ingest work or idle). */
			uint64_t t = rte_get_tsc_cycles();

			run_refill_msg(me, st, 0, msg);
			st->refill_cycles += rte_get_tsc_cycles() - t;
		}
		rte_pktmbuf_free(m);
		q->head++;
	}
}

/*
 * With a refill lcore: accepted DELETE and REFILL messages go to it over the
 * ingest_to_refill ring, in order; it gates each on its evict_count, builds
 * and sends refills on TX queue 1, and hands each DELETE back over
 * refill_to_ingest to the ingest lcore (kvstore's only writer); a REFILL
 * runs once every DELETE before it has been applied, so the refill queue
 * stays in order.
 */
void
shard_pass_to_refill(struct kvss_shard_inst *me, struct kvss_lcore_stats *st)
{
	struct shard_fifo *q = &me->st->refillq;

	while (q->head != q->tail) {
		if (rte_ring_enqueue(me->ingest_to_refill, q->m[q->head % SHARD_QMAX]) != 0) {
			st->ring_full++;
			return;
		}
		q->head++;
	}
}

void
shard_apply_posted_deletes(struct kvss_shard_inst *me, struct kvss_lcore_stats *st,
			   struct shard_batcher *err)
{
	struct rte_mbuf **wait =
		&me->st->posted_waiting; /* taken from the ring, waits for an EVICT */
	void *p;

	while (*wait != NULL || rte_ring_dequeue(me->refill_to_ingest, &p) == 0) {
		struct rte_mbuf *m = *wait != NULL ? *wait : p;

		proto_parse_mbuf(m, &kvss.cfg.udp, &me->st->msg2);
		if (me->st->msg2.hdr.epoch == me->driver_epoch &&
		    me->st->msg2.hdr.type == PROTO_T_DELETE &&
		    shard_delete_must_wait(me, &me->st->msg2)) {
			*wait = m; /* an EVICT before it, of its prompt, has not run */
			return;
		}
		if (me->st->msg2.hdr.epoch == me->driver_epoch &&
		    me->st->msg2.hdr.type != PROTO_T_DELETE &&
		    shard_level_run(me, st, err, &me->st->msg2) != 0) {
			*wait = m; /* L2_DOWN, L2_DELETE: the tier thread is behind */
			return;
		}
		*wait = NULL;
		if (me->st->msg2.hdr.epoch == me->driver_epoch &&
		    me->st->msg2.hdr.type == PROTO_T_DELETE)
			apply_delete(me, st, err, &me->st->msg2);
		else if (me->st->msg2.hdr.epoch != me->driver_epoch)
			st->dropped_restart++;
		rte_pktmbuf_free(m);
		__atomic_fetch_add(&me->deletes_applied, 1, __ATOMIC_RELEASE);
	}
}

/*
 * Wait until the ingest lcore has applied the @p posted DELETEs the refill
 * lcore handed it: a REFILL runs only after every DELETE before it. (Each
 * DELETE waiting for its own application cost a round trip between the two
 * lcores: the refill queue fell behind by its whole ring.)
 */
static void
deletes_applied(struct kvss_shard_inst *me, uint64_t posted)
{
	unsigned int turns = 0;

	while (__atomic_load_n(&me->deletes_applied, __ATOMIC_ACQUIRE) < posted && !kvss_quitting())
		kvss_wait_turn(&turns);
}

int
kvss_shard_refill(void *arg)
{
	struct kvss_shard_inst *me =
		&kvss_shards[(uintptr_t)arg]; /* the shard it serves (main.c) */
	struct kvss_lcore_stats *st = &kvss.stats[rte_lcore_id()];
	static __thread struct proto_msg msg; /* one per lcore: only this one runs here */
	struct rte_mbuf *pend[SHARD_REFILL_AHEAD], *parsed = NULL;
	uint64_t posted = 0, came = 0, gone = 0;
	unsigned int empty = 0, np = 0, i, k;
	void *p;

	while (!kvss_quitting()) {
		uint64_t t0 = rte_get_tsc_cycles();

		/* The queue's first messages, in order; those that ran ahead go. */
		for (i = k = 0; i < np; i++)
			if (pend[i] != NULL)
				pend[k++] = pend[i];
		gone += np - k;
		np = k;
		while (np < SHARD_REFILL_AHEAD && rte_ring_dequeue(me->ingest_to_refill, &p) == 0) {
			pend[np++] = p;
			came++;
		}
		if (np == 0) {
			rte_eth_tx_done_cleanup(me->cfg->port, 1, 0);
			kvss_poll_idle(st, t0, &empty);
			continue;
		}
		if (pend[0] != parsed) {
			parsed = pend[0];
			proto_parse_mbuf(parsed, &kvss.cfg.udp, &msg);
		}
		/* A DELETE or REFILL of a driver that has restarted since: its
		 * gate could open on the new driver's batches. Dropped. Checked
		 * after the gate too: batches the gate saw that were published
		 * after a reset come after the new epoch's store (acquire). */
		if (stale(me, &msg)) {
			rte_pktmbuf_free(pend[0]);
			pend[0] = parsed = NULL;
			st->dropped_restart++;
			continue;
		}
		if (gate_open(me, &msg) && !stale(me, &msg)) {
			if (msg.hdr.type != PROTO_T_REFILL) {
				/* DELETE, L2_DOWN, L2_DELETE: the writer runs them, in order. */
				unsigned int turns = 0;

				/* The writer applies it, in order; a REFILL waits for that. */
				while (rte_ring_enqueue(me->refill_to_ingest, pend[0]) != 0 &&
				       !kvss_quitting())
					kvss_wait_turn(&turns);
				posted++;
			} else {
				deletes_applied(me, posted);
				run_refill_msg(me, st, 1, &msg);
				rte_pktmbuf_free(pend[0]);
			}
			pend[0] = parsed = NULL;
			st->refill_cycles += kvss_poll_busy(st, t0, &empty); /* all of it refill work */
			continue;
		}
		if (np > 1 && ahead_changed(me, came, gone)) {
			struct rte_mbuf **slot[SHARD_REFILL_AHEAD];
			uint64_t before = st->refills_ahead;

			for (i = 0; i < np; i++)
				slot[i] = &pend[i];
			deletes_applied(me, posted);
			run_ahead(me, st, slot, np, 1);
			if (st->refills_ahead != before) {
				st->refill_cycles += kvss_poll_busy(st, t0, &empty);
				continue;
			}
		}
		/* Waiting for batches: let completions come. */
		rte_eth_tx_done_cleanup(me->cfg->port, 1, 0);
		kvss_poll_idle(st, t0, &empty);
	}
	for (i = 0; i < np; i++)
		rte_pktmbuf_free(pend[i]);
	while (rte_ring_dequeue(me->ingest_to_refill, &p) == 0)
		rte_pktmbuf_free(p);
	return 0;
}
