/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The shard's second tier (PROTOCOL.md section 9, shard.h): a tier thread
 * owns the shard's kvdisk (lib/kvdisk: io_uring, O_DIRECT) and does every
 * disk operation; the ingest lcore, kvstore's one writer, never waits for
 * the disk. They meet through two rte_rings of requests drawn from one
 * mempool, each with room for a column's bytes:
 *
 *   L2_DOWN   (refill queue, after its evict_count) the ingest lcore copies
 *             the column's tokens out of DRAM into a request; the DELETE
 *             after it may then free them. The tier thread writes it; its
 *             L2Done (op 1) goes to the driver.
 *   L2_DELETE (refill queue) the tier thread clears the column's header;
 *             an unknown one is answered ERROR UNKNOWN_PROMPT (the key).
 *   L2_UP     (evict queue) runs as an EVICT: the batch opens, then each
 *             column it names is read and its tokens are stored as that
 *             batch's EVICT_DATA would be; a column missing or corrupt is
 *             reported (L2Done op 2) and its tokens are lost (TOKEN_LOST),
 *             never stored, once every read of its batch has answered: the
 *             batch waits for its reads, not for a sender (evict.c).
 *   inventory after each STATUS answering a HELLO: every column on disk,
 *             in L2_INVENTORY frames.
 *
 * The tier thread drains the writes in flight before it reads or deletes:
 * a column the driver just sent down may be asked for at once.
 *
 * The shared level (PROTOCOL.md section 10) runs the same way through its
 * own thread (shared.c), from the same pool: SH_DOWN as L2_DOWN (its
 * L2Done op 3), SH_UP as L2_UP (op 4); an SH_UP's column whose object id
 * is 0 is read from this shard's disk, so that one batch may bring columns
 * from both levels.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include <rte_cycles.h>
#include <rte_lcore.h>
#include <rte_mbuf.h>
#include <rte_mempool.h>
#include <rte_ring.h>

#include "kvdisk.h"
#include "l2_priv.h"
#include "shard.h"
#include "shared_obj.h"

#define L2_RING 1024
#define L2_POOL 511
/*
 * An L2_UP column's (stream token, column token) pairs: one per entry of its
 * cache that names one of its tokens, and a token may be named more than
 * once in a batch (section 3), so the bound is the entries a frame can
 * carry, not the column's length (a column's worth of room let one frame
 * naming a token 500 times write past its request).
 */
#define L2_POS_MAX (PROTO_PAYLOAD_MAX / PROTO_EVICT_ENTRY_LEN)

static struct {
	struct kvdisk *d;
	struct rte_mempool *pool;
	struct rte_ring *to_tier, *from_tier;
	pthread_t thread;
	int started;
	int stop;
	/* The ingest lcore waits for requests (ingest: wo, tier: rw): the
	 * deletes waiting in kvdisk for a put, each holding one, are written. */
	int starved;
	uint32_t col_bytes; /* the largest column's bytes (all caches, both levels) */
	uint32_t column;    /* the second tier's column, tokens */
	uint32_t shcolumn;  /* the shared level's largest column, tokens */
} l2;

bool
shard_l2_on(void)
{
	return l2.d != NULL;
}

bool
shard_l2_direct(void)
{
	return l2.d != NULL && kvdisk_direct(l2.d);
}

/* ---- The tier thread ---------------------------------------------------- */

static void
inv_add(void *arg, const struct kvdisk_meta *m)
{
	struct l2_req *q = arg;

	q->inv[q->ninv++] = *m;
}

static void
finish(struct l2_req *q, uint16_t status)
{
	unsigned int turns = 0;

	q->status = status;
	while (rte_ring_enqueue(l2.from_tier, q) != 0 && !__atomic_load_n(&l2.stop, __ATOMIC_RELAXED))
		kvss_wait_turn(&turns);
}

static uint16_t
code_of(int status)
{
	if (status == 0)
		return 0;
	if (status == -ENOENT)
		return PROTO_E_UNKNOWN_PROMPT;
	if (status == -ENOSPC)
		return PROTO_E_NO_SPACE;
	return PROTO_E_L2_FAILED; /* EBADMSG (checksum: dropped), EIO, a short write */
}

/* Take what finished; @p wait: for at least one. */
static unsigned int
reap(bool wait, unsigned int *puts)
{
	struct kvdisk_done done[32];
	unsigned int n = kvdisk_poll(l2.d, done, 32, wait), i;

	for (i = 0; i < n; i++) {
		struct l2_req *q = (struct l2_req *)(uintptr_t)done[i].cookie;

		if (done[i].type == KVDISK_PUT)
			(*puts)--;
		if (done[i].type == KVDISK_GET && done[i].status == 0) {
			if (done[i].len != q->len) {
				finish(q, PROTO_E_L2_FAILED);
				continue;
			}
			memcpy(q->data, done[i].data, q->len);
		}
		finish(q, code_of(done[i].status));
	}
	return n;
}

/* Submit one request: retried while the queue is full or a slot is being cleared. */
static void
submit(struct l2_req *q, unsigned int *puts)
{
	int rc;

	/* A column written just before may be read, deleted or listed now: writes land first. */
	while (q->op != L2R_PUT && *puts > 0)
		reap(true, puts);
	if (q->op == L2R_INV) {
		struct kvdisk_stats st;
		uint64_t total = 0;
		uint16_t c;

		kvdisk_stats(l2.d, &st);
		for (c = 0; c < KVDISK_MAX_CACHES; c++)
			total += st.stored[c];
		q->inv = malloc((total ? total : 1) * sizeof(*q->inv));
		q->ninv = 0;
		if (q->inv != NULL)
			kvdisk_foreach(l2.d, inv_add, q);
		finish(q, q->inv != NULL ? 0 : PROTO_E_L2_FAILED);
		return;
	}
	for (;;) {
		if (q->op == L2R_PUT)
			rc = kvdisk_put(l2.d, &q->meta, q->data, q->len, (uintptr_t)q);
		else if (q->op == L2R_GET)
			rc = kvdisk_get(l2.d, q->meta.cache, q->meta.key, q->meta.org, (uintptr_t)q);
		else
			rc = kvdisk_del(l2.d, q->meta.cache, q->meta.key, q->meta.org, (uintptr_t)q);
		if (rc != -EBUSY && rc != -EAGAIN)
			break;
		reap(kvdisk_inflight(l2.d) > 0, puts);
	}
	if (rc == 0 && q->op == L2R_PUT)
		(*puts)++;
	else if (rc != 0)
		finish(q, code_of(rc));
}

static void *
tier_main(void *arg)
{
	unsigned int puts = 0, idle = 0;

	kvss_me = arg; /* the shard it serves, as the shared level's thread */
	while (!__atomic_load_n(&l2.stop, __ATOMIC_RELAXED)) {
		void *qs[32];
		unsigned int n = rte_ring_dequeue_burst(l2.to_tier, qs, 32, NULL), i, got;

		if (__atomic_load_n(&l2.starved, __ATOMIC_RELAXED) &&
		    __atomic_exchange_n(&l2.starved, 0, __ATOMIC_RELAXED))
			kvdisk_flush(l2.d);

		for (i = 0; i < n; i++)
			submit(qs[i], &puts);
		got = reap(false, &puts);
		if (n == 0 && got == 0) {
			struct timespec ts = {0, idle < 64 ? 2000 : 50000};

			/* Nothing to do: wait for the disk, or sleep briefly. Deletes
			 * waiting for a put to take their slot are no I/O to wait
			 * for (waiting would write them: a third of the demo's
			 * deletes were written so): they wait their 50 ms. */
			if (kvdisk_inflight(l2.d) > kvdisk_deferred(l2.d))
				reap(true, &puts);
			else {
				idle++;
				nanosleep(&ts, NULL);
			}
		} else {
			idle = 0;
		}
	}
	while (kvdisk_inflight(l2.d) > 0)
		reap(true, &puts);
	return NULL;
}

/* ---- Start and stop ----------------------------------------------------- */

int
shard_l2_open(char *err, size_t errlen)
{
	const struct kvstore_params *kp = kvstore_params(kvss_me->store);
	struct kvdisk_params p = {.num_caches = kp->num_caches,
				  .queue_depth = kvss_me->cfg->l2.queue_depth,
				  .model = kvss_me->cfg->model, .shard = kvss_me->cfg->id,
				  .format = kvss_me->cfg->l2.format};
	uint32_t sum = 0;
	char name[RTE_MEMPOOL_NAMESIZE];
	uint16_t c;

	bool disk = kvss_me->cfg->l2.path[0] != '\0', shared = kvss.cfg.shared.conf[0] != '\0';
	int rc;

	if (!disk && !shared)
		return 0;
	l2.column = disk ? kvss_me->cfg->l2.column : 0;
	l2.shcolumn = shared ? kvss.cfg.shared.column : 0;
	for (c = 0; c < kp->num_caches; c++) {
		uint32_t most = l2.column > l2.shcolumn ? l2.column : l2.shcolumn;

		p.cache[c].bytes_per_token = kp->cache[c].bytes_per_token;
		p.cache[c].column_tokens = l2.column;
		p.cache[c].capacity_tokens = kvss_me->cfg->l2.capacity_tokens[c];
		if (kp->cache[c].bytes_per_token * most > sum)
			sum = kp->cache[c].bytes_per_token * most;
	}
	l2.col_bytes = sum;
	if (disk) {
		/* Its directory, made if missing (0700: the columns are a customer's
		 * data); one that exists is kvdisk_open's to check (owner, mode). */
		char dir[KVSS_PATH_MAX];
		char *slash;

		snprintf(dir, sizeof(dir), "%s", kvss_me->cfg->l2.path);
		slash = strrchr(dir, '/');
		if (slash != NULL && slash != dir) {
			*slash = '\0';
			if (mkdir(dir, 0700) != 0 && errno != EEXIST) {
				snprintf(err, errlen, "%s: cannot make the directory: %s", dir, strerror(errno));
				return -1;
			}
		}
	}
	if (disk) {
		l2.d = kvdisk_open(kvss_me->cfg->l2.path, &p, err, errlen);
		if (l2.d == NULL) {
			size_t n = strlen(err);

			/* What formatting would lift: say how, and what it costs. */
			if (errno == EEXIST && n < errlen)
				snprintf(err + n, errlen - n, " (shard.l2.format = true formats it: "
					 "what it holds is lost)");
			return -1;
		}
	}
	snprintf(name, sizeof(name), "l2req_%u", kvss_me->cfg->id);
	l2.pool = rte_mempool_create(name, L2_POOL,
				     sizeof(struct l2_req) + SHARED_HDR_LEN + l2.col_bytes +
					     L2_POS_MAX * 4u,
				     0, 0, NULL, NULL, NULL, NULL, (int)rte_socket_id(), 0);
	snprintf(name, sizeof(name), "l2to_%u", kvss_me->cfg->id);
	l2.to_tier = rte_ring_create(name, L2_RING, (int)rte_socket_id(),
				     RING_F_SP_ENQ | RING_F_SC_DEQ);
	snprintf(name, sizeof(name), "l2from_%u", kvss_me->cfg->id);
	l2.from_tier = rte_ring_create(name, L2_RING, (int)rte_socket_id(),
				       RING_F_SP_ENQ | RING_F_SC_DEQ);
	if (l2.pool == NULL || l2.to_tier == NULL || l2.from_tier == NULL) {
		snprintf(err, errlen, "shard.l2: no memory for the tier's requests (%u of %zu bytes)",
			 L2_POOL, sizeof(struct l2_req) + l2.col_bytes);
		shard_l2_close();
		return -1;
	}
	if (disk) {
		if (pthread_create(&l2.thread, NULL, tier_main, kvss_me) != 0) {
			snprintf(err, errlen, "shard.l2: cannot start the tier thread");
			shard_l2_close();
			return -1;
		}
		pthread_setname_np(l2.thread, "kvss-tier");
		l2.started = 1;
	}
	rc = shard_sh_open(err, errlen);
	if (rc != 0) {
		shard_l2_close();
		return -2; /* the shared level's: err names its key */
	}
	return 0;
}

void
shard_l2_stop(void)
{
	shard_sh_stop();
	if (l2.started) {
		__atomic_store_n(&l2.stop, 1, __ATOMIC_RELAXED);
		pthread_join(l2.thread, NULL);
		l2.started = 0;
	}
}

void
shard_l2_close(void)
{
	void *p;

	shard_l2_stop();
	while (shard_sh_take(&p, 1) == 1)
		rte_mempool_put(l2.pool, p);
	shard_sh_close();
	while (l2.from_tier != NULL && rte_ring_dequeue(l2.from_tier, &p) == 0) {
		free(((struct l2_req *)p)->inv);
		rte_mempool_put(l2.pool, p);
	}
	while (l2.to_tier != NULL && rte_ring_dequeue(l2.to_tier, &p) == 0)
		rte_mempool_put(l2.pool, p);
	rte_ring_free(l2.to_tier);
	rte_ring_free(l2.from_tier);
	rte_mempool_free(l2.pool);
	if (l2.d != NULL)
		kvdisk_close(l2.d);
	memset(&l2, 0, sizeof(l2));
}

void
shard_l2_stats(struct kvdisk_stats *st)
{
	memset(st, 0, sizeof(*st));
	/* Read while the tier thread runs: counters, torn values at worst. */
	if (l2.d != NULL)
		kvdisk_stats(l2.d, st);
}

void
shard_l2_tokens(uint16_t cache, uint64_t *capacity, uint64_t *stored)
{
	struct kvdisk_stats st;

	*capacity = *stored = 0;
	if (l2.d == NULL || cache >= KVDISK_MAX_CACHES)
		return;
	shard_l2_stats(&st);
	*capacity = kvdisk_slots(l2.d, cache) * l2.column;
	*stored = st.stored[cache] * l2.column;
}

/* ---- The ingest lcore's side ---------------------------------------------- */

static struct l2_req *
req_get(uint8_t op, uint64_t seq)
{
	void *p;
	struct l2_req *q;

	if (rte_mempool_get(l2.pool, &p) != 0)
		return NULL;
	q = p;
	memset(q, 0, sizeof(*q));
	q->op = op;
	q->seq = seq;
	q->epoch = kvss_me->driver_epoch;
	q->obj = (uint8_t *)(q + 1);
	q->data = q->obj + SHARED_HDR_LEN;
	q->pos = (uint16_t *)(q->data + l2.col_bytes);
	return q;
}

static void
req_put(struct l2_req *q)
{
	free(q->inv);
	rte_mempool_put(l2.pool, q);
}

/* To the tier thread, or the shared level's; each ring holds every request of the pool. */
static void
to_tier(struct l2_req *q)
{
	if (q->op == L2R_SHPUT || q->op == L2R_SHGET ? shard_sh_submit(q) != 0
						      : rte_ring_enqueue(l2.to_tier, q) != 0)
		req_put(q); /* cannot happen: the ring is larger than the pool */
	else
		kvss_me->st->tier_given++;
}

static void
add_done(struct shard_batcher *bt, uint64_t key, uint64_t iso, uint16_t cache, uint8_t op,
	 uint16_t status)
{
	struct proto_l2done d = {key, iso, cache, op, status};

	if (proto_build_l2_done(&bt->b, &d) == -ENOSPC) {
		shard_batcher_flush(bt);
		proto_build_l2_done(&bt->b, &d);
	}
}

static struct shard_batcher l2done;

static void
meta_of(struct l2_req *q, const struct proto_l2col *c)
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
shard_l2_run(struct kvss_lcore_stats *st, struct shard_batcher *err, const struct proto_msg *msg)
{
	const struct kvstore_params *kp = kvss_me->store ? kvstore_params(kvss_me->store) : NULL;
	unsigned int i;

	if (rte_mempool_avail_count(l2.pool) < msg->hdr.count) {
		__atomic_store_n(&l2.starved, 1, __ATOMIC_RELAXED);
		return -EAGAIN; /* the tier is behind: the queue waits */
	}
	shard_batcher_init(&l2done, PROTO_T_L2_DONE, st);
	for (i = 0; i < msg->hdr.count; i++) {
		struct l2_req *q = req_get(msg->hdr.type == PROTO_T_L2_DOWN   ? L2R_PUT
					   : msg->hdr.type == PROTO_T_SH_DOWN ? L2R_SHPUT
									      : L2R_DEL,
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
				req_put(q);
				continue;
			}
			to_tier(q);
			continue;
		}
		{
			struct proto_l2col c;
			uint16_t code = 0;
			uint8_t op = q->op == L2R_SHPUT ? PROTO_L2OP_SH_DOWN : PROTO_L2OP_L2_DOWN;

			proto_get_l2_down(msg, i, &c);
			meta_of(q, &c);
			if (c.cache_id >= kp->num_caches)
				code = PROTO_E_BAD_CACHE;
			else if (c.key == 0 || (op == PROTO_L2OP_SH_DOWN && c.object_id == 0))
				code = PROTO_E_MALFORMED; /* sections 9, 10: a key (an object id) is nonzero */
			else if (c.num_tokens == 0 ||
				 c.num_tokens > (op == PROTO_L2OP_SH_DOWN ? l2.shcolumn : l2.column))
				code = PROTO_E_RANGE;
			B = code ? 0 : kp->cache[c.cache_id].bytes_per_token;
			/* The tokens as DRAM holds them now: a DELETE after it may free them. */
			for (t = 0; code == 0 && t < c.num_tokens; t++)
				if (kvstore_read_token(kvss_me->store, c.cache_id, c.prompt_id,
						       c.start_token_idx + t, q->data + (size_t)t * B) != 0)
					code = t == 0 ? PROTO_E_UNKNOWN_PROMPT : PROTO_E_RANGE;
			if (code != 0) {
				add_done(&l2done, c.key, c.isolation_id, c.cache_id, op, code);
				if (op == PROTO_L2OP_SH_DOWN)
					st->shared_errors++;
				else
					st->l2_errors++;
				req_put(q);
				continue;
			}
			q->len = c.num_tokens * B;
			q->bytes_per_token = B;
			to_tier(q);
		}
	}
	shard_batcher_flush(&l2done);
	if (shard_type_down(msg->hdr.type))
		kvss_me->st->l2down_done = msg->hdr.seq; /* L2_UPs after it may run */
	return 0;
}

int
shard_l2_up_room(const struct proto_msg *msg)
{
	if (l2.pool != NULL && rte_mempool_avail_count(l2.pool) >= msg->u.evict.ncols)
		return 0;
	__atomic_store_n(&l2.starved, 1, __ATOMIC_RELAXED);
	return -EAGAIN;
}

void
shard_l2_up(struct kvss_lcore_stats *st, const struct proto_msg *msg,
	    const struct proto_evict_entry *e, const uint16_t *codes)
{
	const struct kvstore_params *kp = kvstore_params(kvss_me->store);
	uint16_t nc = msg->u.evict.num_caches, g = msg->u.evict.g, c;
	static uint8_t covered[PROTO_PAYLOAD_MAX / PROTO_EVICT_ENTRY_LEN];
	static uint8_t zero[1 << 16];
	unsigned int k, t;

	memset(covered, 0, (size_t)nc * g);
	shard_batcher_init(&l2done, PROTO_T_L2_DONE, st);
	/* The reads of this batch, counted as they go (its slot's earlier batch is done). */
	kvss_me->st->up_no[msg->u.evict.batch_no % 256] = msg->u.evict.batch_no;
	kvss_me->st->up_reads[msg->u.evict.batch_no % 256] = 0;
	for (k = 0; k < msg->u.evict.ncols; k++) {
		struct proto_l2col col;
		struct l2_req *q;
		bool shared;
		uint8_t op;
		uint16_t code;

		proto_get_l2_up_col(msg, k, &col);
		/* An SH_UP's column with object id 0 comes from this shard's disk. */
		shared = msg->hdr.type == PROTO_T_SH_UP && col.object_id != 0;
		op = shared ? PROTO_L2OP_SH_UP : PROTO_L2OP_L2_UP; /* a disk's column answers as an L2_UP's */
		q = req_get(shared ? L2R_SHGET : L2R_GET, msg->hdr.seq);
		if (q == NULL) /* not reached: shard_l2_up_room() said there is room */
			break;
		meta_of(q, &col);
		q->batch_no = msg->u.evict.batch_no;
		code = col.cache_id >= nc ? PROTO_E_BAD_CACHE
		       : col.key == 0	  ? PROTO_E_MALFORMED
		       : col.num_tokens == 0 || col.num_tokens > (shared ? l2.shcolumn : l2.column)
			       ? PROTO_E_RANGE
		       : !shared && l2.d == NULL ? PROTO_E_NO_TIER
						 : 0;
		if (code != 0) {
			add_done(&l2done, col.key, col.isolation_id, col.cache_id, op, code);
			if (shared)
				st->shared_errors++;
			else
				st->l2_errors++;
			req_put(q);
			continue;
		}
		q->bytes_per_token = kp->cache[col.cache_id].bytes_per_token;
		q->len = col.num_tokens * kp->cache[col.cache_id].bytes_per_token;
		q->stream_len = (uint32_t)g * kp->cache[col.cache_id].bytes_per_token;
		for (t = 0; t < g; t++) {
			const struct proto_evict_entry *en = &e[t * nc + col.cache_id];

			if (en->prompt_id == col.prompt_id && en->token_idx >= col.start_token_idx &&
			    en->token_idx - col.start_token_idx < col.num_tokens &&
			    q->npos < L2_POS_MAX) {
				q->pos[2 * q->npos] = (uint16_t)t;
				q->pos[2 * q->npos + 1] = (uint16_t)(en->token_idx - col.start_token_idx);
				q->npos++;
				covered[t * nc + col.cache_id] = 1;
			}
		}
		if (q->npos == 0) {
			req_put(q); /* none of its tokens in this batch */
			continue;
		}
		kvss_me->st->up_reads[q->batch_no % 256]++;
		to_tier(q);
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
				kvstore_data(kvss_me->store, msg->u.evict.batch_no, c, t * B, (uint32_t)g * B,
					     zero, B);
		}
	}
	shard_batcher_flush(&l2done);
}

void
shard_l2_inventory(struct kvss_lcore_stats *st)
{
	struct l2_req *q;

	if (l2.d == NULL)
		return;
	q = req_get(L2R_INV, 0);
	if (q == NULL) {
		st->l2_errors++;
		return;
	}
	to_tier(q);
}

/* The inventory, in as many frames as it takes (section 9). */
static void
send_inventory(struct kvss_lcore_stats *st, const struct l2_req *q)
{
	uint32_t cap = kvss_payload_cap(), per = (cap - PROTO_HDR_LEN - PROTO_L2INV_HDR_LEN) /
						 PROTO_L2COL_LEN, i = 0;
	static struct shard_batcher inv;

	do {
		uint32_t k;

		shard_batcher_init(&inv, PROTO_T_L2_INVENTORY, st);
		/* Only to the driver whose HELLO took control (shard.c). */
		inv.to = &kvss_me->ctl_addr;
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

void
shard_l2_poll(struct kvss_lcore_stats *st, struct shard_batcher *err)
{
	const struct kvstore_params *kp;
	void *qs[32];
	unsigned int n, i, j;

	if (l2.pool == NULL)
		return;
	n = l2.from_tier != NULL ? rte_ring_dequeue_burst(l2.from_tier, qs, 32, NULL) : 0;
	n += shard_sh_take(qs + n, 32 - n);
	if (n == 0)
		return;
	kp = kvstore_params(kvss_me->store);
	shard_batcher_init(&l2done, PROTO_T_L2_DONE, st);
	kvss_me->st->tier_done += n;
	for (i = 0; i < n; i++) {
		struct l2_req *q = qs[i];

		if (q->epoch != kvss_me->driver_epoch) {
			st->dropped_restart++; /* asked for by a driver that has restarted since */
			req_put(q);
			continue;
		}
		if ((q->op == L2R_GET || q->op == L2R_SHGET) &&
		    kvss_me->st->up_no[q->batch_no % 256] == q->batch_no &&
		    kvss_me->st->up_reads[q->batch_no % 256] > 0)
			kvss_me->st->up_reads[q->batch_no % 256]--; /* its batch waits for one read less */
		if (q->op == L2R_INV) {
			if (q->status == 0)
				send_inventory(st, q);
		} else if (q->op == L2R_PUT || q->op == L2R_SHPUT) {
			bool sh = q->op == L2R_SHPUT;

			add_done(&l2done, q->meta.key, q->meta.org, q->meta.cache,
				 sh ? PROTO_L2OP_SH_DOWN : PROTO_L2OP_L2_DOWN, q->status);
			if (q->status == 0)
				(*(sh ? &st->shared_down : &st->l2_down))++;
			else
				(*(sh ? &st->shared_errors : &st->l2_errors))++;
		} else if (q->op == L2R_DEL) {
			if (q->status != 0) {
				shard_add_error(err, q->seq, q->meta.key, 0, q->meta.cache, q->status);
				st->l2_errors++;
			} else {
				st->l2_deleted++;
			}
		} else if (q->status != 0) {
			/* Not stored: what its batch misses is lost once its other reads are in (TOKEN_LOST). */
			bool sh = q->op == L2R_SHGET;

			add_done(&l2done, q->meta.key, q->meta.org, q->meta.cache,
				 sh ? PROTO_L2OP_SH_UP : PROTO_L2OP_L2_UP, q->status);
			(*(sh ? &st->shared_errors : &st->l2_errors))++;
		} else {
			uint32_t B = kp->cache[q->meta.cache].bytes_per_token;

			for (j = 0; j < q->npos; j++)
				kvstore_data(kvss_me->store, q->batch_no, q->meta.cache, q->pos[2 * j] * B,
					     q->stream_len, q->data + (size_t)q->pos[2 * j + 1] * B, B);
			(*(q->op == L2R_SHGET ? &st->shared_up : &st->l2_up))++;
		}
		req_put(q);
	}
	shard_batcher_flush(&l2done);
}
