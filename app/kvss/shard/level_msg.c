/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The ingest lcore's side of the shard's levels (level.h): the messages
 * that move columns between DRAM and a level become requests, go to the
 * level the message is for, and what the levels finish is answered here.
 *
 *   L2_DOWN, SH_DOWN  (refill queue, after its evict_count) the column's
 *             tokens are copied out of DRAM into a request; the DELETE
 *             after it may then free them. Its L2Done (op L2_DOWN or
 *             SH_DOWN) goes to the driver when the level has written it.
 *   L2_DELETE (refill queue) the second tier forgets the column; an
 *             unknown one is answered ERROR UNKNOWN_PROMPT (the key).
 *   L2_UP, SH_UP (evict queue) runs as an EVICT: the batch opens, then
 *             each column it names is read and its tokens are stored as
 *             that batch's EVICT_DATA would be; a column missing or
 *             corrupt is reported (L2Done op L2_UP or SH_UP) and its
 *             tokens are lost (TOKEN_LOST), never stored, once every read
 *             of its batch has answered: the batch waits for its reads,
 *             not for a sender (evict.c). An SH_UP's column whose object
 *             id is 0 is read from this shard's disk, so that one batch
 *             may bring columns from both levels.
 *   inventory after each STATUS answering a HELLO: every column the
 *             second tier holds, in L2_INVENTORY frames.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rte_mbuf.h>
#include <rte_mempool.h>

#include "level.h"
#include "shard.h"
#include "shared_seal.h"
#include "shared_obj.h"


/* A level's column, tokens; 0 without the level. */
static uint32_t
column_of(struct kvss_shard_inst *me, enum shard_level_kind k)
{
	const struct shard_level *lv = shard_level_of(me, k);

	return lv != NULL ? lv->column : 0;
}

/*
 * The shard is short of requests: every level that holds some it could
 * finish now gives them back (the pool is both levels', so an SH_DOWN may
 * wait on the second tier's deferred deletes).
 */
static void
levels_starved(struct shard_levels *ls)
{
	unsigned int k;

	for (k = 0; ls != NULL && k < SHARD_LEVELS; k++)
		if (ls->lv[k] != NULL)
			__atomic_store_n(&ls->lv[k]->starved, 1, __ATOMIC_RELAXED);
}

/* The L2Done op that answers a request (an SH_UP's disk column answers as an L2_UP's). */
static uint8_t
done_op(const struct level_req *q)
{
	bool sh = q->level == SHARD_LEVEL_SHARED;

	if (q->op == LEVEL_PUT)
		return sh ? PROTO_L2OP_SH_DOWN : PROTO_L2OP_L2_DOWN;
	return sh ? PROTO_L2OP_SH_UP : PROTO_L2OP_L2_UP;
}

static struct level_req *
req_get(struct kvss_shard_inst *me, enum shard_level_kind level, uint8_t op, uint64_t seq)
{
	struct shard_levels *ls = me->levels;
	struct level_req *q;
	void *p;

	if (rte_mempool_get(ls->pool, &p) != 0)
		return NULL;
	q = p;
	memset(q, 0, sizeof(*q));
	q->level = (uint8_t)level;
	q->op = op;
	q->seq = seq;
	q->epoch = me->driver_epoch;
	q->obj = (uint8_t *)(q + 1);
	q->data = q->obj + SHARED_HDR_LEN;
	q->pos = (uint16_t *)(q->data + ls->col_bytes + SEAL_TAG_LEN); /* a sealed slice's tag between */
	return q;
}

static void
req_put(struct kvss_shard_inst *me, struct level_req *q)
{
	free(q->inv);
	rte_mempool_put(me->levels->pool, q);
}

/* To its level's worker; each ring holds every request of the pool. */
static void
give(struct kvss_shard_inst *me, struct level_req *q)
{
	if (shard_level_give(me->levels, q) != 0)
		req_put(me, q); /* cannot happen: the ring is larger than the pool */
	else
		me->st->tier_given++;
}

static void
add_done(struct shard_batcher *bt, uint64_t key, uint64_t iso, uint16_t cache, uint8_t op,
	 uint16_t status)
{
	struct proto_l2done d = {key, iso, cache, op, status};

	SHARD_BATCHER_ADD(bt, proto_build_l2_done, &d);
}

/*
 * The L2Done records being packed: one per lcore (__thread), begun for its
 * shard at each use. Each shard's ingest lcore answers what its levels
 * finished (the refill lcore posts level messages back to it): two
 * shards' lcores packing into one batcher would send frames of each
 * other's records (bad body lengths, found with two shards in one process).
 */
static __thread struct shard_batcher l2done;

static void
meta_of(struct level_req *q, const struct proto_l2col *c)
{
	q->meta = (struct kvdisk_meta){.key = c->key, .parent = c->parent, .org = c->isolation_id,
				       .first_use_ns = c->first_use_ns, .start = c->start_token_idx,
				       .tokens = c->num_tokens, .cache = c->cache_id};
	q->object_id = c->object_id;
	q->gen_global = c->gen_global;
	q->gen_org = c->gen_org;
	q->layout = c->layout;
}

int
shard_level_run(struct kvss_shard_inst *me, struct kvss_lcore_stats *st, struct shard_batcher *err,
		const struct proto_msg *msg)
{
	const struct kvstore_params *kp = me->store ? kvstore_params(me->store) : NULL;
	enum shard_level_kind level = shard_level_kind_of(msg->hdr.type);
	struct shard_level *lv = shard_level_of(me, level);
	unsigned int i;

	/* Writes and deletes leave room for the largest L2_UP or SH_UP: a
	 * level slow to write (its requests waiting there) still reads. */
	if (rte_mempool_avail_count(me->levels->pool) < msg->hdr.count + LEVEL_UP_ROOM) {
		levels_starved(me->levels);
		return -EAGAIN; /* the levels are behind: the queue waits */
	}
	shard_batcher_init(&l2done, PROTO_T_L2_DONE, me, st);
	for (i = 0; i < msg->hdr.count; i++) {
		struct level_req *q = req_get(
			me, level, msg->hdr.type == PROTO_T_L2_DELETE ? LEVEL_DEL : LEVEL_PUT,
			msg->hdr.seq);
		uint32_t t, B;

		if (q == NULL)
			return -EAGAIN; /* not reached: counted above */
		if (msg->hdr.type == PROTO_T_L2_DELETE) {
			struct proto_l2del d;

			proto_get_l2_delete(msg, i, &d);
			q->meta = (struct kvdisk_meta){.key = d.key, .org = d.isolation_id,
						       .cache = d.cache_id};
			/* Refused here, by what is wrong with the record: an L2_FAILED
			 * would send the operator to a disk that did nothing wrong. */
			if (d.cache_id >= kp->num_caches || d.key == 0) {
				shard_add_error(err, msg->hdr.seq, d.key, 0, d.cache_id,
						d.key == 0 && d.cache_id < kp->num_caches ?
						PROTO_E_MALFORMED : PROTO_E_BAD_CACHE);
				st->l2_errors++;
				req_put(me, q);
				continue;
			}
			give(me, q);
			continue;
		}
		{
			struct proto_l2col c;
			uint16_t code = 0;
			bool sh = level == SHARD_LEVEL_SHARED;

			proto_get_l2_down(msg, i, &c);
			meta_of(q, &c);
			if (c.cache_id >= kp->num_caches)
				code = PROTO_E_BAD_CACHE;
			else if (c.key == 0 || (sh && c.object_id == 0))
				code = PROTO_E_MALFORMED; /* sections 9, 10: a key (an object id) is nonzero */
			else if (c.num_tokens == 0 || c.num_tokens > lv->column)
				code = PROTO_E_RANGE;
			B = code ? 0 : kp->cache[c.cache_id].bytes_per_token;
			/* The tokens as DRAM holds them now: a DELETE after it may free them. */
			for (t = 0; code == 0 && t < c.num_tokens; t++)
				if (kvstore_read_token(me->store, c.cache_id, c.prompt_id,
						       c.start_token_idx + t,
						       q->data + (size_t)t * B) != 0)
					code = t == 0 ? PROTO_E_UNKNOWN_PROMPT : PROTO_E_RANGE;
			if (code != 0) {
				add_done(&l2done, c.key, c.isolation_id, c.cache_id, done_op(q), code);
				(*(sh ? &st->shared_errors : &st->l2_errors))++;
				req_put(me, q);
				continue;
			}
			q->len = c.num_tokens * B;
			q->bytes_per_token = B;
			give(me, q);
		}
	}
	shard_batcher_flush(&l2done);
	if (shard_type_down(msg->hdr.type))
		me->st->l2down_done = msg->hdr.seq; /* L2_UPs after it may run */
	return 0;
}

int
shard_level_up_room(struct kvss_shard_inst *me, const struct proto_msg *msg)
{
	struct shard_levels *ls = me->levels;

	if (ls != NULL && rte_mempool_avail_count(ls->pool) >= msg->u.evict.ncols)
		return 0;
	levels_starved(ls);
	return -EAGAIN;
}

void
shard_level_up(struct kvss_shard_inst *me, struct kvss_lcore_stats *st, const struct proto_msg *msg,
	       const struct proto_evict_entry *e, const uint16_t *codes)
{
	const struct kvstore_params *kp = kvstore_params(me->store);
	uint16_t nc = msg->u.evict.num_caches, g = msg->u.evict.g, c;
	static __thread uint8_t covered[LEVEL_POS_MAX]; /* this lcore's, as l2done */
	static uint8_t zero[1 << 16];
	unsigned int k, t;

	memset(covered, 0, (size_t)nc * g);
	shard_batcher_init(&l2done, PROTO_T_L2_DONE, me, st);
	/* The reads of this batch, counted as they go (its slot's earlier batch is done). */
	me->st->up_no[msg->u.evict.batch_no % 256] = msg->u.evict.batch_no;
	me->st->up_reads[msg->u.evict.batch_no % 256] = 0;
	memset(me->st->up_reads_at[msg->u.evict.batch_no % 256], 0, sizeof(me->st->up_reads_at[0]));
	memset(me->st->up_took[msg->u.evict.batch_no % 256], 0, sizeof(me->st->up_took[0]));
	for (k = 0; k < msg->u.evict.ncols; k++) {
		struct proto_l2col col;
		struct level_req *q;
		enum shard_level_kind level;
		uint16_t code;

		proto_get_l2_up_col(msg, k, &col);
		/* An SH_UP's column with object id 0 comes from this shard's disk. */
		level = msg->hdr.type == PROTO_T_SH_UP && col.object_id != 0 ? SHARD_LEVEL_SHARED
									     : SHARD_LEVEL_DISK;
		q = req_get(me, level, LEVEL_GET, msg->hdr.seq);
		if (q == NULL) /* not reached: shard_level_up_room(me) said there is room */
			break;
		meta_of(q, &col);
		q->batch_no = msg->u.evict.batch_no;
		code = col.cache_id >= nc		   ? PROTO_E_BAD_CACHE
		       : col.key == 0			   ? PROTO_E_MALFORMED
		       : shard_level_of(me, level) == NULL ? PROTO_E_NO_TIER
		       : col.num_tokens == 0 || col.num_tokens > column_of(me, level)
			       ? PROTO_E_RANGE
			       : 0;
		if (code != 0) {
			add_done(&l2done, col.key, col.isolation_id, col.cache_id, done_op(q), code);
			(*(level == SHARD_LEVEL_SHARED ? &st->shared_errors : &st->l2_errors))++;
			req_put(me, q);
			continue;
		}
		q->bytes_per_token = kp->cache[col.cache_id].bytes_per_token;
		q->len = col.num_tokens * kp->cache[col.cache_id].bytes_per_token;
		q->stream_len = (uint32_t)g * kp->cache[col.cache_id].bytes_per_token;
		for (t = 0; t < g; t++) {
			const struct proto_evict_entry *en = &e[t * nc + col.cache_id];

			if (en->prompt_id == col.prompt_id && en->token_idx >= col.start_token_idx &&
			    en->token_idx - col.start_token_idx < col.num_tokens &&
			    q->npos < LEVEL_POS_MAX) {
				q->pos[2 * q->npos] = (uint16_t)t;
				q->pos[2 * q->npos + 1] = (uint16_t)(en->token_idx - col.start_token_idx);
				q->npos++;
				covered[t * nc + col.cache_id] = 1;
			}
		}
		if (q->npos == 0) {
			req_put(me, q); /* none of its tokens in this batch */
			continue;
		}
		me->st->up_reads[q->batch_no % 256]++;
		me->st->up_reads_at[q->batch_no % 256][level]++;
		give(me, q);
		if (me->levels->lv[level] != NULL)
			me->st->up_need[q->batch_no % 256][level] = me->levels->lv[level]->given;
	}
	/*
	 * Entries no accepted column covers. Padding (prompt 0) and entries the
	 * batch refused (codes: their data is discarded) take zeros, as
	 * EVICT_DATA would bring. An accepted entry of a prompt gets no bytes:
	 * its token is lost when the batch completes (TOKEN_LOST), as a
	 * column's that is not there; never stored as zeros and served
	 * (sections 9, 10). The batch waits for its reads only (evict.c): one
	 * that reads no column at all completes, with its loss, at once.
	 */
	for (c = 0; c < nc; c++) {
		uint32_t B = kp->cache[c].bytes_per_token;

		for (t = 0; t < g; t++) {
			if (covered[t * nc + c])
				continue;
			if (e[t * nc + c].prompt_id != 0 && (codes == NULL || codes[t * nc + c] == 0))
				continue;
			if (B <= sizeof(zero))
				kvstore_data(me->store, msg->u.evict.batch_no, c, t * B,
					     (uint32_t)g * B, zero, B);
		}
	}
	shard_batcher_flush(&l2done);
}

void
shard_level_inventory(struct kvss_shard_inst *me, struct kvss_lcore_stats *st)
{
	struct level_req *q;

	if (shard_level_of(me, SHARD_LEVEL_DISK) == NULL)
		return;
	q = req_get(me, SHARD_LEVEL_DISK, LEVEL_LIST, 0);
	if (q == NULL) {
		st->l2_errors++;
		return;
	}
	give(me, q);
}

/* The inventory, in as many frames as it takes (section 9). */
static void
send_inventory(struct kvss_shard_inst *me, struct kvss_lcore_stats *st, const struct level_req *q)
{
	uint32_t cap = kvss_payload_cap(), per = (cap - PROTO_HDR_LEN - PROTO_L2INV_HDR_LEN) /
						 PROTO_L2COL_LEN, i = 0;
	static __thread struct shard_batcher inv;

	do {
		uint32_t k;

		shard_batcher_init(&inv, PROTO_T_L2_INVENTORY, me, st);
		/* Only to the driver whose HELLO took control (shard.c). */
		inv.to = &me->ctl_addr;
		proto_build_l2_inventory_hdr(&inv.b, q->ninv, i);
		for (k = 0; k < per && i < q->ninv; k++, i++) {
			const struct kvdisk_meta *m = &q->inv[i];
			struct proto_l2col c = {.key = m->key, .parent = m->parent, .isolation_id = m->org,
						.first_use_ns = m->first_use_ns,
						.start_token_idx = m->start, .num_tokens = m->tokens,
						.cache_id = m->cache};

			proto_build_l2_inventory_col(&inv.b, &c);
		}
		shard_batcher_send(&inv); /* an empty inventory is a frame too: total 0 */
	} while (i < q->ninv);
}

/*
 * The columns a level let go on its own, told as L2_GONE records (section
 * 9): as many a poll as half the report window has room for, so that a
 * large retire neither goes out unsequenced (past the window) nor keeps
 * other reports waiting. The list being told, and where, are the shard's
 * (shard.h, gone).
 */

/* Take GONE request @p q's columns after those shard @p s still has to tell; the request is freed. */
static void
gone_take(struct shard_state *s, struct level_req *q)
{
	struct kvdisk_meta *m;

	if (s->gone == NULL) {
		s->gone = q->inv;
		s->ngone = q->ninv;
		s->gone_at = 0;
		q->inv = NULL;
	} else if ((m = realloc(s->gone, sizeof(*m) * ((size_t)s->ngone + q->ninv))) != NULL) {
		memcpy(m + s->ngone, q->inv, sizeof(*m) * q->ninv);
		s->gone = m;
		s->ngone += q->ninv;
	} /* else unsaid: asked for, they answer UNKNOWN_PROMPT, as before L2_GONE */
	free(q->inv);
	free(q);
}

void
shard_level_gone_drop(struct kvss_shard_inst *me)
{
	free(me->st->gone);
	me->st->gone = NULL;
	me->st->ngone = me->st->gone_at = 0;
}

static void
gone_tell(struct kvss_shard_inst *me, struct kvss_lcore_stats *st)
{
	struct shard_state *s = me->st;
	uint32_t per = (kvss_payload_cap() - PROTO_HDR_LEN) / PROTO_L2DONE_LEN;
	uint64_t budget = (uint64_t)shard_report_room(me) / 2 * per;

	for (; s->gone_at < s->ngone && budget > 0; s->gone_at++, budget--) {
		const struct kvdisk_meta *g = &s->gone[s->gone_at];

		add_done(&l2done, g->key, g->org, g->cache, PROTO_L2OP_L2_GONE, PROTO_E_L2_FAILED);
		st->l2_gone++;
	}
	if (s->gone_at == s->ngone)
		shard_level_gone_drop(me);
}

void
shard_level_poll(struct kvss_shard_inst *me, struct kvss_lcore_stats *st, struct shard_batcher *err)
{
	const struct kvstore_params *kp;
	void *qs[32];
	unsigned int n, i, j;

	if (me->levels == NULL)
		return;
	n = shard_level_take(me->levels, qs, 32);
	if (n == 0 && me->st->gone == NULL)
		return;
	kp = kvstore_params(me->store);
	shard_batcher_init(&l2done, PROTO_T_L2_DONE, me, st);
	me->st->tier_done += n;
	for (i = 0; i < n; i++) {
		struct level_req *q = qs[i];
		bool sh = q->level == SHARD_LEVEL_SHARED;

		if (q->op == LEVEL_GONE) {
			/* Unasked (no request was given for it), so not in
			 * tier_done; told whatever the epoch (a driver that
			 * started since forgets nothing, or takes the record
			 * out of an inventory it has not taken back yet). */
			me->st->tier_done--;
			gone_take(me->st, q);
			continue;
		}
		if (q->epoch != me->driver_epoch) {
			st->dropped_restart++; /* asked for by a driver that has restarted since */
			req_put(me, q);
			continue;
		}
		if (q->op == LEVEL_GET && me->st->up_no[q->batch_no % 256] == q->batch_no &&
		    me->st->up_reads[q->batch_no % 256] > 0) {
			me->st->up_reads[q->batch_no %
					 256]--; /* its batch waits for one read less */
			if (q->level < SHARD_LEVELS &&
			    me->st->up_reads_at[q->batch_no % 256][q->level] > 0)
				me->st->up_reads_at[q->batch_no % 256][q->level]--;
		}
		if (q->op == LEVEL_LIST) {
			if (q->status == 0)
				send_inventory(me, st, q);
		} else if (q->op == LEVEL_PUT) {
			add_done(&l2done, q->meta.key, q->meta.org, q->meta.cache, done_op(q), q->status);
			if (q->status == 0)
				(*(sh ? &st->shared_down : &st->l2_down))++;
			else
				(*(sh ? &st->shared_errors : &st->l2_errors))++;
		} else if (q->op == LEVEL_DEL) {
			if (q->status != 0) {
				shard_add_error(err, q->seq, q->meta.key, 0, q->meta.cache, q->status);
				st->l2_errors++;
			} else {
				st->l2_deleted++;
			}
		} else if (q->status != 0) {
			/* Not stored: what its batch misses is lost once its other reads are in (TOKEN_LOST). */
			add_done(&l2done, q->meta.key, q->meta.org, q->meta.cache, done_op(q), q->status);
			(*(sh ? &st->shared_errors : &st->l2_errors))++;
		} else {
			uint32_t B = kp->cache[q->meta.cache].bytes_per_token;

			for (j = 0; j < q->npos; j++)
				kvstore_data(me->store, q->batch_no, q->meta.cache,
					     q->pos[2 * j] * B, q->stream_len,
					     q->data + (size_t)q->pos[2 * j + 1] * B, B);
			(*(sh ? &st->shared_up : &st->l2_up))++;
		}
		req_put(me, q);
	}
	if (me->st->gone != NULL)
		gone_tell(me, st);
	shard_batcher_flush(&l2done);
}
