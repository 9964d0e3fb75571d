/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The evict queue (shard.h): RESERVE and EVICT run in order; an EVICT runs
 * after the DELETEs before it that name its prompts (the barrier); an EVICT
 * with no room waits for DELETEs, then answers NO_SPACE once the space
 * timeout has passed with no progress: no DELETE run, no batch published,
 * no second-tier operation done. A DELETE waits for its batches, and those
 * for the second tier's reads: a shard that is slow (a busy disk, a busy
 * machine) makes room late, and is not stuck. Only a shard where nothing
 * moves (a DELETE that will not come, a batch that waits for this EVICT)
 * gives up.
 * EVICT_DATA is stored as it comes; a frame of a batch whose EVICT has not
 * run is held (at most SHARD_EARLY_MAX, for the batch timeout, or while its
 * EVICT waits in the queue); a batch not whole within the batch timeout of
 * its EVICT's run, and of the last EVICT_DATA frame taken, completes with
 * loss, its lost tokens in TOKEN_LOST. Every timeout here reads the looked
 * clock (shard.h): time the shard did not spend reading its queue (its
 * core taken away) does not count against what waits in it.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rte_mbuf.h>

#include "shard.h"

/*
 * Has @p limit passed from @p from by the looked clock? Never when the
 * shard last read its queue empty before @p from (what came since may
 * wait there unread).
 */
static inline bool
looked_past(struct kvss_shard_inst *me, uint64_t from, uint64_t limit)
{
	uint64_t seen = me->st->looked;

	return seen >= from && seen - from >= limit;
}

static inline uint64_t
ms_cycles(struct kvss_shard_inst *me, uint32_t ms)
{
	return me->st->hz / 1000 * ms;
}

int
shard_store_data(struct kvss_shard_inst *me, const struct rte_mbuf *m, const struct shard_rec *r)
{
	uint32_t off = r->data_off, left = r->data_len, so = r->u.data.stream_offset;
	const struct rte_mbuf *seg = m;
	int rc = 0;

	/* Walk the chain: each contiguous piece goes in with its stream offset. */
	while (seg != NULL && off >= seg->data_len) {
		off -= seg->data_len;
		seg = seg->next;
	}
	while (seg != NULL && left > 0 && rc == 0) {
		uint32_t n = seg->data_len - off < left ? seg->data_len - off : left;

		rc = kvstore_data(me->store, r->u.data.batch_no, r->u.data.cache_id, so,
				  r->u.data.stream_len,
				  rte_pktmbuf_mtod_offset(seg, uint8_t *, off), n);
		so += n;
		left -= n;
		off = 0;
		seg = seg->next;
	}
	return rc;
}

/*
 * Hold @p m until its EVICT runs. What may be held is bounded so that no
 * volume of data for batches that are never announced can push out the
 * data of one that is announced, or about to be (PROTOCOL.md section 5):
 * data for a batch more than SHARD_HOLD_AHEAD past the last EVICT accepted
 * is dropped at once; and when the room is full, the held frame of the
 * batch furthest ahead gives way to one of a nearer batch.
 */
bool
shard_hold_data(struct kvss_shard_inst *me, struct kvss_lcore_stats *st, struct rte_mbuf *m,
		const struct shard_rec *r, uint64_t now)
{
	uint64_t b = r->u.data.batch_no;
	uint32_t i, far = 0;

	if (b > me->st->queued_batch + SHARD_HOLD_AHEAD) {
		st->data_unannounced++;
		return false;
	}
	if (me->st->nearly == SHARD_EARLY_MAX) {
		if (!me->st->early_far_ok) {
			for (i = 1; i < me->st->nearly; i++)
				if (me->st->early_no[i] > me->st->early_no[far])
					far = i;
			me->st->early_far = far;
			me->st->early_far_ok = true;
		}
		far = me->st->early_far;
		if (me->st->early_no[far] <= b) {
			st->data_hold_full++;
			return false;
		}
		rte_pktmbuf_free(me->st->early[far]);
		st->data_displaced++;
		me->st->nearly--;
		me->st->early[far] = me->st->early[me->st->nearly];
		me->st->early_rec[far] = me->st->early_rec[me->st->nearly];
		me->st->early_t[far] = me->st->early_t[me->st->nearly];
		me->st->early_no[far] = me->st->early_no[me->st->nearly];
		me->st->early_far_ok = false; /* the furthest is gone: looked for again */
	}
	/* A frame of a batch further ahead is the furthest now (the first such). */
	if (me->st->early_far_ok && b > me->st->early_no[me->st->early_far])
		me->st->early_far = me->st->nearly;
	me->st->early[me->st->nearly] = m;
	me->st->early_rec[me->st->nearly] = *r;
	me->st->early_no[me->st->nearly] = b;
	me->st->early_t[me->st->nearly++] = now;
	return true;
}

uint32_t
shard_drop_held(struct kvss_shard_inst *me)
{
	uint32_t n = me->st->nearly;

	me->st->early_far_ok = false;
	while (me->st->nearly)
		rte_pktmbuf_free(me->st->early[--me->st->nearly]);
	return n;
}

void
shard_retry_held(struct kvss_shard_inst *me, struct kvss_lcore_stats *st)
{
	uint32_t i = 0;
	/* The last batch asked about, and the answer: held frames come in runs
	 * of one batch, and no EVICT runs in this loop (a batch seen stays seen). */
	uint64_t asked = 0;
	bool unseen = false;

	while (i < me->st->nearly) {
		const struct shard_rec *r = &me->st->early_rec[i];
		int rc;

		/*
		 * Held, its first store reached the store (-EAGAIN: the frame has
		 * bytes of the batch). While the batch's EVICT has not run, so it
		 * would answer again, without reading the frame and its record: a
		 * thousand held frames were a thousand cache misses a poll.
		 */
		if (i == 0 || me->st->early_no[i] != asked) {
			asked = me->st->early_no[i];
			unseen = kvstore_batch_unseen(me->store, asked);
		}
		rc = unseen ? -EAGAIN : shard_store_data(me, me->st->early[i], r);

		/*
		 * Held while its EVICT has not arrived (for the batch timeout), or
		 * while it waits in the evict queue for room (as long as it waits).
		 */
		if (rc == -EAGAIN && (me->st->early_no[i] <= me->st->queued_batch ||
				      !looked_past(me, me->st->early_t[i],
						   ms_cycles(me, me->cfg->batch_timeout_ms)))) {
			i++;
			continue;
		}
		if (rc == -EAGAIN) {
			st->data_expired++;
		} else if (rc == 0) {
			st->data_frames++;
			st->data_bytes += r->data_len;
		} else {
			st->data_dropped++;
		}
		rte_pktmbuf_free(me->st->early[i]);
		me->st->early_far_ok = false;
		me->st->nearly--;
		me->st->early[i] = me->st->early[me->st->nearly];
		me->st->early_rec[i] = me->st->early_rec[me->st->nearly];
		me->st->early_t[i] = me->st->early_t[me->st->nearly];
		me->st->early_no[i] = me->st->early_no[me->st->nearly];
	}
}

/* The barrier's slot of a prompt. */
static inline uint32_t
del_slot(uint64_t prompt)
{
	return (uint32_t)((prompt * 0x9E3779B97F4A7C15ULL) >> 40) % SHARD_DEL_SLOTS;
}

/*
 * A DELETE accepted: it marks its prompts' slots. An EVICT accepted: its
 * gate is the latest DELETE before it naming one of its prompts that has
 * not run, so that it runs on the state that DELETE leaves (a prompt
 * deleted and evicted again is the new prompt, not the old one cut).
 * Unless a DELETE before it waits for this batch or a later one, which a
 * driver must not send: waiting, the EVICT would wait for ever.
 */
void
shard_barrier_accept(struct kvss_shard_inst *me, struct kvss_lcore_stats *st, struct shard_rec *r,
		     const struct rte_mbuf *m)
{
	static __thread struct proto_msg view; /* the ingest lcore's */
	const struct proto_msg *msg;
	uint64_t seq = r->hdr.seq;
	unsigned int i;
	uint32_t k;

	if (r->hdr.type == PROTO_T_DELETE) {
		msg = shard_msg(r, m, &view);
		for (i = 0; i < msg->hdr.count; i++) {
			struct proto_delete d;

			proto_get_delete(msg, i, &d);
			k = del_slot(d.prompt_id);
			if (me->st->del_seq[k] > me->st->del_applied &&
			    me->st->del_id[k] != d.prompt_id)
				me->st->del_id[k] =
					0; /* two prompts' DELETEs wait: either matches */
			else
				me->st->del_id[k] = d.prompt_id;
			me->st->del_seq[k] = seq;
		}
		me->st->del_last = seq;
		if (r->gate > me->st->queued_batch)
			st->delete_gate_ahead++;
		if (r->gate > me->st->del_gate_max)
			me->st->del_gate_max = r->gate;
		return;
	}
	r->gate = 0;
	if (!shard_type_batch(r->hdr.type) || me->st->del_last <= me->st->del_applied ||
	    me->st->del_gate_max >= r->u.evict.batch_no)
		return;
	msg = shard_msg(r, m, &view);
	for (i = 0; i < msg->hdr.count; i++) {
		struct proto_evict_entry e;
		uint64_t s;

		proto_get_evict_entry(msg, i, &e);
		k = del_slot(e.prompt_id);
		s = me->st->del_seq[k];
		if (e.prompt_id != 0 && s > me->st->del_applied && s > r->gate &&
		    (me->st->del_id[k] == e.prompt_id || me->st->del_id[k] == 0))
			r->gate = s;
	}
}

/*
 * The other half of the barrier: must the DELETE @p msg wait for an EVICT
 * accepted before it that names one of its prompts and has not run (it
 * waits for room, or for a DELETE before it)? Exact, by prompt id: the
 * DELETEs that make room for a waiting EVICT name other prompts, and a
 * false match would hold them until the space timeout.
 */
bool
shard_delete_must_wait(struct kvss_shard_inst *me, const struct proto_msg *msg)
{
	static __thread struct proto_msg view; /* the ingest lcore's */
	const struct shard_fifo *q = &me->st->evictq;
	uint32_t i;

	for (i = q->head; i != q->tail && q->seq[i % SHARD_QMAX] < msg->hdr.seq; i++) {
		const struct shard_rec *r = &q->rec[i % SHARD_QMAX];
		const struct proto_msg *ev;
		unsigned int a, b;

		if (!shard_type_batch(r->hdr.type))
			continue;
		ev = shard_msg(r, q->m[i % SHARD_QMAX], &view);
		for (b = 0; b < msg->hdr.count; b++) {
			struct proto_delete d;

			proto_get_delete(msg, b, &d);
			for (a = 0; a < ev->hdr.count; a++) {
				struct proto_evict_entry e;

				proto_get_evict_entry(ev, a, &e);
				if (e.prompt_id == d.prompt_id)
					return true;
			}
		}
	}
	return false;
}

void
shard_barrier_reset(struct kvss_shard_inst *me)
{
	memset(me->st->del_seq, 0, sizeof(me->st->del_seq));
	memset(me->st->del_id, 0, sizeof(me->st->del_id));
	me->st->del_last = me->st->del_applied = me->st->del_gate_max = 0;
	me->st->l2down_last = me->st->l2down_done = 0;
}

/* REFILL_DATA frames this shard has sent, on whichever lcore runs its refill queue. */
static inline uint64_t
refills_sent(struct kvss_shard_inst *me)
{
	unsigned int lc = me->refill_lcore_on ? me->refill_lcore : me->ingest_lcore;

	return __atomic_load_n(&kvss.stats[lc].refill_frames, __ATOMIC_RELAXED);
}

/* The store's room is what @p was says it was when an EVICT was refused. */
static bool
room_same(struct kvss_shard_inst *me, const struct kvstore_room *was)
{
	struct kvstore_room now;

	kvstore_room(me->store, &now);
	return now.gen == was->gen && now.oldest_reader == was->oldest_reader;
}

/*
 * The EVICT at the head of the queue found no room: it waits for DELETEs (or
 * for batches to complete), its wait counted from @p *since.
 */
static void
evict_no_room(struct kvss_shard_inst *me, struct kvss_lcore_stats *st, uint64_t *since,
	      uint64_t now)
{
	uint64_t p = me->st->del_applied + me->st->tier_done + kvstore_batches_complete(me->store) +
		     refills_sent(me);

	/*
	 * The space timeout counts from the last progress (a DELETE run, a
	 * tier operation done, a batch published, a refill's frame sent), and
	 * not while something ahead waits on a clock of its own: the second
	 * tier's or the shared level's operations in flight (an L2_DOWN ahead
	 * of a DELETE holds it until its column is written; a slow disk is not
	 * a shard where nothing moves), or a batch whose EVICT ran waiting for
	 * its data (the DELETE that makes room waits for it; a wafer late with
	 * its data, its core taken, is not a shard where nothing moves). Each
	 * ends, done, failed or timed out by its own clock (a batch:
	 * batch_timeout_ms from its EVICT's run or its last data), and only
	 * then does this one count: NO_SPACE comes at most that much later.
	 * What it still breaks: a REFILL ahead that waits for this very batch,
	 * or room no DELETE will make.
	 */
	if (*since == 0 || p != me->st->evict_progress || me->st->tier_given != me->st->tier_done ||
	    kvstore_oldest_open(me->store) != 0) {
		*since = now;
		me->st->evict_progress = p;
	}
	st->evict_waits++;
}

/*
 * The EVICT @p msg ran (kvstore_evict's @p rc, each entry's refusal in
 * @p codes): its batch's clock started, and what it refused answered; an
 * L2_UP or SH_UP's bytes asked of its level.
 */
static void
evict_ran(struct kvss_shard_inst *me, struct kvss_lcore_stats *st, struct shard_batcher *err,
	  const struct proto_msg *msg, const struct proto_evict_entry *e, const uint16_t *codes,
	  int rc, uint64_t now)
{
	unsigned int i;

	me->st->batch_t[msg->u.evict.batch_no % 256] = now;
	me->st->batch_up[msg->u.evict.batch_no % 256] = shard_type_up(msg->hdr.type);
	if (rc == 0 && shard_type_up(msg->hdr.type) && shard_level_on(me, msg->hdr.type)) {
		/* Its bytes come from the second tier (or the shared level), not from EVICT_DATA. */
		for (i = 0; i < msg->hdr.count; i++)
			if (codes[i] != 0)
				shard_add_error(err, msg->hdr.seq, e[i].prompt_id, e[i].token_idx,
					  (uint16_t)(i % msg->u.evict.num_caches), codes[i]);
		shard_level_up(me, st, msg, e, codes);
		st->batches++;
	} else if (rc == 0 && shard_type_up(msg->hdr.type)) {
		/* No second tier (shared level) to read its bytes from: refused
		 * whole, its batch lost at once when its turn comes (sections 9, 10). */
		me->st->batch_t[msg->u.evict.batch_no % 256] =
			now - ms_cycles(me, me->cfg->batch_timeout_ms);
		shard_add_error(err, msg->hdr.seq, 0, 0, 0, PROTO_E_NO_TIER);
		st->batches++;
	} else if (rc == -EPROTO) {
		shard_add_error(err, msg->hdr.seq, 0, 0, 0, PROTO_E_BAD_CACHE);
	} else if (rc != 0) {
		shard_add_error(err, msg->hdr.seq, 0, 0, 0, PROTO_E_MALFORMED);
	} else {
		for (i = 0; i < msg->hdr.count; i++)
			if (codes[i] != 0)
				shard_add_error(err, msg->hdr.seq, e[i].prompt_id, e[i].token_idx,
					  (uint16_t)(i % msg->u.evict.num_caches),
					  codes[i]);
		st->batches++;
	}
}

void
shard_run_evictq(struct kvss_shard_inst *me, struct kvss_lcore_stats *st, struct shard_batcher *err,
		 uint64_t now)
{
	struct shard_fifo *q = &me->st->evictq;

	while (q->head != q->tail) {
		struct rte_mbuf *m = q->m[q->head % SHARD_QMAX];
		const struct proto_msg *msg =
			shard_msg(&q->rec[q->head % SHARD_QMAX], m, &me->st->msg2);
		uint16_t codes[PROTO_PAYLOAD_MAX / PROTO_EVICT_ENTRY_LEN];
		struct proto_evict_entry e[PROTO_PAYLOAD_MAX / PROTO_EVICT_ENTRY_LEN];
		struct kvstore_room room;
		unsigned int i, flags = 0;
		int rc;

		if (msg->hdr.type == PROTO_T_RESERVE) {
			for (i = 0; i < msg->hdr.count; i++) {
				struct proto_reserve r;

				proto_get_reserve(msg, i, &r);
				kvstore_reserve(me->store, &r);
			}
		} else {
			uint64_t *since = &q->since[q->head % SHARD_QMAX];

			if (q->rec[q->head % SHARD_QMAX].gate > me->st->del_applied) {
				if (me->st->evict_counted != q->seq[q->head % SHARD_QMAX]) {
					me->st->evict_counted = q->seq[q->head % SHARD_QMAX];
					st->evict_after_delete++;
				}
				return; /* runs once the DELETE before it has */
			}
			if (shard_type_up(msg->hdr.type) && shard_level_on(me, msg->hdr.type) &&
			    (q->rec[q->head % SHARD_QMAX].l2gate > me->st->l2down_done ||
			     shard_level_up_room(me, msg) != 0))
				return; /* an L2_DOWN before it has not run, or the tier thread is behind */
			/* Waited long enough, by the looked clock: NO_SPACE. (A DELETE
			 * that would make room may wait unread in the receive queue
			 * of a shard that was not running.) */
			if (*since &&
			    looked_past(me, *since, ms_cycles(me, me->cfg->space_timeout_ms)))
				flags = KVSTORE_EVICT_FORCE;
			else if (*since && q->refused_head == q->head + 1 &&
				 room_same(me, &q->refused)) {
				evict_no_room(me, st, since, now);
				return; /* refused, and nothing has made room since */
			}
			for (i = 0; i < msg->hdr.count; i++)
				proto_get_evict_entry(msg, i, &e[i]);
			/* Looked at before the try: a refill ending during it shows
			 * as a change (kvstore_room). */
			kvstore_room(me->store, &room);
			rc = kvstore_evict(me->store, msg->u.evict.batch_no,
					   msg->u.evict.num_caches, msg->u.evict.g, e, codes,
					   flags);
			if (rc == -ENOSPC || rc == -EBUSY) {
				q->refused = room;
				q->refused_head = q->head + 1;
				evict_no_room(me, st, since, now);
				return; /* waits for DELETEs (or for batches to complete) */
			}
			evict_ran(me, st, err, msg, e, codes, rc, now);
			*since = 0;
		}
		rte_pktmbuf_free(m);
		q->head++;
	}
}

static void
on_lost(void *arg, uint16_t cache_id, uint64_t prompt_id, uint32_t first, uint32_t count)
{
	shard_add_lost(arg, cache_id, prompt_id, first, count);
}

/* The reorder allowance (PROTOCOL.md section 5, "Sooner on evidence"). */
#define SHARD_REORDER_MS 50u

void
shard_data_seen(struct kvss_shard_inst *me, uint64_t batch_no, uint64_t now)
{
	struct shard_state *s = me->st;

	if (s->data_no[batch_no % 256] != batch_no) {
		s->data_no[batch_no % 256] = batch_no;
		s->data_t[batch_no % 256] = now;
	}
	if (batch_no > s->data_max)
		s->data_max = batch_no;
	s->data_last = now;
}

void
shard_loss_reset(struct kvss_shard_inst *me)
{
	memset(me->st->data_no, 0, sizeof(me->st->data_no));
	me->st->data_max = 0;
	memset(me->st->up_reads, 0, sizeof(me->st->up_reads));
	memset(me->st->up_no, 0, sizeof(me->st->up_no));
	me->st->data_last = 0;
}

/*
 * Is open batch @p b lost by the evidence of later data: a frame of a later
 * batch came, and the reorder allowance has passed (by the looked clock)
 * since then and since @p b's EVICT ran? Data comes in batch order, so the
 * first later batch with data holds the earliest such frame; visits at most
 * 255 slots.
 */
static bool
lost_by_later_data(struct kvss_shard_inst *me, uint64_t b, uint64_t allow)
{
	const struct shard_state *s = me->st;
	uint64_t n, since = s->batch_t[b % 256];

	if (s->batch_up[b % 256] || s->data_max <= b)
		return false;
	for (n = b + 1; n <= s->data_max && n - b < 256; n++)
		if (s->data_no[n % 256] == n)
			break;
	if (n > s->data_max || n - b >= 256)
		return false;
	if (s->data_t[n % 256] > since)
		since = s->data_t[n % 256];
	return looked_past(me, since, allow);
}

/* A read out this long past the silence limit is not coming, whatever its
 * level answers meanwhile: at 20 reads a second a full queue of a level's
 * requests takes under a minute. */
#define SHARD_UP_READ_CAP_MS 120000u

/* Said once a second at most: a hung tier cuts many batches. */
static void
say_cut(struct kvss_shard_inst *me, uint64_t b, const struct shard_level *lv, uint64_t since,
	bool capped)
{
	static __thread uint64_t said;
	uint64_t now = rte_get_tsc_cycles(), ms = me->st->hz / 1000;

	if (said != 0 && now - said < me->st->hz)
		return;
	said = now;
	if (capped)
		fprintf(stderr,
			"kvss: shard %u of model %u: batch %" PRIu64
			"'s reads at the %s thread still out "
			"%" PRIu64 " ms after it ran, past %s plus two minutes: not waited for, "
				   "their tokens lost\n",
			(unsigned int)me->cfg->id, (unsigned int)me->cfg->model, b, lv->ops->thread,
			(now - since) / ms, lv->ops->timeout_key);
	else
		fprintf(stderr,
			"kvss: shard %u of model %u: batch %" PRIu64
			"'s reads at the %s thread not waited for: "
			"its store finished nothing for %" PRIu64
			" ms (the batch timeout plus %s = %u); "
			"their tokens lost\n",
			(unsigned int)me->cfg->id, (unsigned int)me->cfg->model, b, lv->ops->thread,
			(now - since) / ms, lv->ops->timeout_key, RTE_MAX(lv->silent_ms, 1000u));
}

/*
 * Is a read of up batch @p b (run at @p from) not coming: a level it still
 * has reads at silent for @p limit (the batch timeout) plus its own
 * silence limit (level.h, silent_ms) since @p from or that level's last
 * answer, whichever is later; or two minutes past that since @p from?
 */
static bool
up_read_dead(struct kvss_shard_inst *me, uint64_t b, uint64_t from, uint64_t limit)
{
	struct shard_state *s = me->st;
	unsigned int k;

	for (k = 0; k < SHARD_LEVELS; k++) {
		const struct shard_level *lv = shard_level_of(me, (enum shard_level_kind)k);
		uint64_t *took = &s->up_took[b % 256][k];
		uint64_t lim, since;

		if (s->up_reads_at[b % 256][k] == 0 || lv == NULL)
			continue;
		lim = limit + ms_cycles(me, RTE_MAX(lv->silent_ms, 1000u));
		if (looked_past(me, from, lim + ms_cycles(me, SHARD_UP_READ_CAP_MS))) {
			say_cut(me, b, lv, from, true);
			return true;
		}
		/*
		 * The level's silence by its own clock (level.h): a level worker
		 * starved of its core is late, not silent. Counted from when it
		 * took the batch's reads (as the ingest lcore first saw): reads
		 * given to a worker that was not running wait on its lateness too.
		 */
		if (*took == 0) {
			if (__atomic_load_n(&lv->taken, __ATOMIC_ACQUIRE) < s->up_need[b % 256][k])
				continue; /* not taken yet */
			*took = rte_get_tsc_cycles(); /* no earlier than the take */
		}
		since = *took > from ? *took : from;
		if (shard_level_silent(lv, since, lim)) {
			uint64_t answered = __atomic_load_n(&lv->answered, __ATOMIC_ACQUIRE);

			say_cut(me, b, lv, answered > since ? answered : since, false);
			return true;
		}
	}
	return false;
}

void
shard_expire_batches(struct kvss_shard_inst *me, struct kvss_lcore_stats *st)
{
	const struct shard_state *s = me->st;
	uint64_t b, limit = ms_cycles(me, me->cfg->batch_timeout_ms);
	uint64_t allow = ms_cycles(me, RTE_MIN(SHARD_REORDER_MS, me->cfg->batch_timeout_ms));
	static __thread struct shard_batcher lost;
	int any = 0;

	while ((b = kvstore_oldest_open(me->store)) != 0) {
		/*
		 * The wafer's silence: from the EVICT's run, or from the last
		 * EVICT_DATA frame taken if later. Data comes in batch order, so
		 * data of an earlier batch still coming (a wafer sending batches'
		 * data one after another, at the pace its core allows) says this
		 * batch's turn has not come; of a later one, that what it misses
		 * was lost (the allowance below).
		 */
		uint64_t from = s->batch_t[b % 256];

		if (s->batch_up[b % 256]) {
			/*
			 * Its bytes come from the tier's reads, not from the wafer:
			 * it waits for them (each bounded by the tier: a slow
			 * cluster costs the columns it fails, never the batch), and
			 * once every one has answered, what it misses (a column
			 * missing, bad or failed) will never come: lost at once.
			 * Its reads wait in the level's queue behind others, so
			 * a read still out is waited for while its level answers
			 * (a slow or busy disk: late, but coming); once a level
			 * it still has reads at has said nothing for the batch
			 * timeout plus the level's own limit (its op timeout)
			 * since the batch ran, or a read is out
			 * SHARD_UP_READ_CAP_MS past that, it is not waited for.
			 */
			if (s->up_reads[b % 256] > 0 && !up_read_dead(me, b, from, limit))
				break;
			if (s->up_reads[b % 256] > 0) {
				st->up_batches_cut++; /* its late reads' bytes are refused */
				me->st->up_reads[b % 256] = 0;
			} else {
				st->up_batches_lost++;
			}
		} else {
			if (s->data_last > from)
				from = s->data_last;
			if (!looked_past(me, from, limit)) {
				if (!lost_by_later_data(me, b, allow))
					break;
				st->batches_lost_early++;
			}
		}
		if (!any)
			shard_batcher_init(&lost, PROTO_T_TOKEN_LOST, me, st);
		any = 1;
		kvstore_batch_lose(me->store, b, on_lost, &lost);
		st->batches_lost++;
	}
	if (any)
		shard_batcher_flush(&lost);
}
