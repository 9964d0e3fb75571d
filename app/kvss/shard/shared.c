/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The shard's side of the shared level (PROTOCOL.md section 10; l2_priv.h):
 * a thread owns the shard's librados handle (lib/shared) and does every
 * RADOS operation, so that the ingest lcore never waits for the cluster.
 * It writes a slice as one object (exclusive create: a slice already there
 * is the same bytes under the same name, and counts as written) and reads
 * one whole, then checks it before a byte of it reaches the store: the
 * header's and the payload's seeded checksums, and every field against the
 * SharedColumn the driver sent (organization, key, parent, object id, both
 * generations, layout, model, this shard, the cache, the token range, the
 * bytes per token). A slice that fails is refused (SHARED_BAD) and counted
 * by reason; a cluster that is slow or gone times out each operation
 * (shared.op_timeout_ms) and answers SHARED_FAILED, never blocks the shard.
 *
 * The thread never deletes: what the shared level keeps is the driver's to
 * decide (its records) and the sweeper's (kvss-shared sweep).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <rte_lcore.h>
#include <rte_ring.h>

#include "l2_priv.h"
#include "shard.h"
#include "shared.h"

#define SH_RING 1024

static struct {
	struct shared *s;
	struct rte_ring *to, *from;
	pthread_t thread;
	int started;
	int stop;
	/* Counted by the thread, read by telemetry (torn values at worst). */
	uint64_t bad[SHARED_BAD_COUNT];
	uint64_t failed, missing, exists, put_shed;
	uint64_t replaced; /* taken names that were not the slice: written over */
} sh;

/*
 * An SH_DOWN's slice whose name is taken is read back and compared before
 * it counts as written: the same header and bytes (another replica wrote
 * the column) count; anything else (a slice that fails its check, another
 * column's bytes, an object gone meanwhile) is written over, so that a bad
 * slice under the right name never stands for the column.
 */
enum sh_phase { SH_PUT = 0, SH_READ_BACK, SH_REPLACE };

bool
shard_sh_on(void)
{
	return sh.s != NULL;
}

bool
shard_level_on(unsigned int type)
{
	return type == PROTO_T_SH_DOWN || type == PROTO_T_SH_UP ? shard_sh_on() : shard_l2_on();
}

void
shard_sh_counts(struct shard_sh_counts *c)
{
	unsigned int i;

	for (i = 0; i < SHARED_BAD_COUNT; i++)
		c->bad[i] = __atomic_load_n(&sh.bad[i], __ATOMIC_RELAXED);
	c->failed = sh.failed;
	c->missing = sh.missing;
	c->exists = sh.exists;
	c->shed = sh.put_shed;
	c->replaced = sh.replaced;
	if (sh.s != NULL) {
		struct shared_stats ls;

		shared_stats_get(sh.s, &ls);
		c->timeouts = ls.timeouts;
		c->busy = ls.busy;
	}
}

static uint64_t
mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* The header a slice of @p q has (written) or must have (read). */
static void
hdr_of(const struct l2_req *q, struct shared_hdr *h)
{
	*h = (struct shared_hdr){.kind = SHARED_SLICE, .org = q->meta.org, .key = q->meta.key,
				 .parent = q->meta.parent, .object_id = q->object_id,
				 .first_use_ns = q->meta.first_use_ns, .gen_global = q->gen_global,
				 .gen_org = q->gen_org, .layout = q->layout,
				 .model = (uint16_t)kvss_me->cfg->model, .shard = kvss_me->cfg->id,
				 .cache = q->meta.cache, .start = q->meta.start,
				 .tokens = q->meta.tokens, .bytes_per_token = q->bytes_per_token,
				 .payload_len = q->len};
}

static void
finish(struct l2_req *q, uint16_t status)
{
	q->status = status;
	while (rte_ring_enqueue(sh.from, q) != 0 && !__atomic_load_n(&sh.stop, __ATOMIC_RELAXED)) {
		struct timespec ts = {0, 20000};

		nanosleep(&ts, NULL);
	}
}

/* Does the object read into @p buf (@p got bytes) decode and name the slice of @p q? */
static enum shared_bad
slice_check(const struct l2_req *q, const uint8_t *buf, uint32_t got)
{
	struct shared_hdr h, want;
	enum shared_bad why = shared_obj_decode(buf, got, &h);

	if (why != SHARED_OK)
		return why;
	hdr_of(q, &want);
	return shared_hdr_match(&h, &want);
}

/* The namespace and name of @p q's slice. */
static void
slice_names(const struct l2_req *q, char *ns, char *name)
{
	shared_ns(ns, q->meta.org);
	shared_slice_name(name, q->object_id, kvss_me->cfg->id, q->meta.cache);
}

/* A slice read whole: checked before anything of it is stored. */
static uint16_t
check_get(struct l2_req *q, uint32_t got)
{
	enum shared_bad why = slice_check(q, q->obj, got);

	if (why != SHARED_OK) {
		q->bad = (uint8_t)why;
		__atomic_fetch_add(&sh.bad[why], 1, __ATOMIC_RELAXED);
		return PROTO_E_SHARED_BAD;
	}
	return 0;
}

/* The object found under an SH_DOWN slice's name: is it that slice (@p got bytes)? */
static bool
same_slice(const struct l2_req *q, int status, uint32_t got)
{
	return status == 0 && slice_check(q, q->back, got) == SHARED_OK &&
	       memcmp(q->back + SHARED_HDR_LEN, q->data, q->len) == 0;
}

/*
 * The next step of an SH_DOWN whose name was taken (enum sh_phase); true
 * when it went on (its answer comes with a later completion).
 */
static bool
put_step(struct l2_req *q, int status, uint32_t got, uint16_t *code)
{
	char ns[SHARED_NS_MAX], name[SHARED_NAME_MAX];
	uint32_t len = SHARED_HDR_LEN + q->len;
	bool stopping = __atomic_load_n(&sh.stop, __ATOMIC_RELAXED);
	int rc;

	shared_ns(ns, q->meta.org);
	shared_slice_name(name, q->object_id, kvss_me->cfg->id, q->meta.cache);

	if (q->phase == SH_PUT && stopping) {
		rc = -ESHUTDOWN; /* stopping: no new operation on the cluster */
	} else if (q->phase == SH_PUT) {
		/* Exactly the slice's size: a larger object completes -EFBIG, not it. */
		slice_names(q, ns, name);
		q->back = malloc(len);
		rc = q->back == NULL ? -ENOMEM
				     : shared_get(sh.s, ns, name, q->back, len, (uintptr_t)q);
		q->phase = SH_READ_BACK;
	} else if (q->phase == SH_READ_BACK) {
		if (same_slice(q, status, got)) {
			sh.exists++; /* the same bytes under the same name, written by another */
			*code = 0;
			return false;
		}
		if ((status != 0 && status != -ENOENT && status != -EFBIG) || stopping) {
			sh.failed++; /* unread, or stopping: neither written nor known good */
			*code = PROTO_E_SHARED_FAILED;
			return false;
		}
		slice_names(q, ns, name);
		rc = shared_replace(sh.s, ns, name, q->obj, len, (uintptr_t)q);
		q->phase = SH_REPLACE;
	} else {
		if (status == 0) {
			sh.replaced++;
			*code = 0;
		} else {
			sh.failed++;
			*code = PROTO_E_SHARED_FAILED;
		}
		return false;
	}
	if (rc == 0)
		return true;
	sh.failed++;
	*code = PROTO_E_SHARED_FAILED;
	return false;
}

static void
reap(uint32_t wait_ms)
{
	struct shared_done d[32];
	unsigned int n = shared_poll(sh.s, d, 32, wait_ms), i;

	for (i = 0; i < n; i++) {
		struct l2_req *q = (struct l2_req *)(uintptr_t)d[i].cookie;
		uint16_t code = 0;

		if (q->op == L2R_SHPUT && (q->phase != SH_PUT || d[i].status == -EEXIST)) {
			if (put_step(q, d[i].status, d[i].len, &code))
				continue;
			free(q->back);
			q->back = NULL;
		} else if (d[i].status == -ENOENT) {
			sh.missing++;
			code = PROTO_E_UNKNOWN_PROMPT;
		} else if (d[i].status == -EFBIG && q->op == L2R_SHGET) {
			/* Larger than the slice asked for: not it. */
			__atomic_fetch_add(&sh.bad[SHARED_BAD_TOO_BIG], 1, __ATOMIC_RELAXED);
			q->bad = SHARED_BAD_TOO_BIG;
			code = PROTO_E_SHARED_BAD;
		} else if (d[i].status != 0) {
			sh.failed++;
			code = PROTO_E_SHARED_FAILED;
		} else if (q->op == L2R_SHGET) {
			code = check_get(q, d[i].len);
		}
		finish(q, code);
	}
}

/*
 * Submit one request; -EBUSY: the depth is reached (it stays queued).
 * Anything else is its answer.
 */
static int
submit(struct l2_req *q)
{
	char ns[SHARED_NS_MAX], name[SHARED_NAME_MAX];
	int rc;

	slice_names(q, ns, name);
	if (q->op == L2R_SHPUT) {
		struct shared_hdr h;

		hdr_of(q, &h);
		h.written_ns = shared_wall_ns();
		shared_hdr_encode(q->obj, &h, q->data);
		rc = shared_put(sh.s, ns, name, q->obj, SHARED_HDR_LEN + q->len, (uintptr_t)q);
	} else {
		/* Exactly the slice's size: a larger object completes -EFBIG. */
		rc = shared_get(sh.s, ns, name, q->obj, SHARED_HDR_LEN + q->len, (uintptr_t)q);
	}
	if (rc != 0 && rc != -EBUSY) {
		sh.failed++;
		finish(q, PROTO_E_SHARED_FAILED);
	}
	return rc == -EBUSY ? -EBUSY : 0;
}

/*
 * Reads before writes: a read is a batch waiting to complete (its tokens
 * are lost at the batch timeout), a write only a column that may be asked
 * for later. Writes wait in their own queue, take at most three quarters
 * of the depth, and when SH_PUT_BACKLOG wait already a new one is answered
 * SHARED_FAILED at once (the driver writes no record for it): a slow
 * cluster costs the shared level writes, never the shard its batches.
 */
#define SH_PUT_BACKLOG 256

struct fifo {
	struct l2_req *q[SH_RING];
	uint32_t head, n;
};

static struct fifo gets, wputs;

static void
push(struct fifo *f, struct l2_req *q)
{
	f->q[(f->head + f->n++) % SH_RING] = q;
}

/*
 * A read waits for its turn at most one op timeout: its batch waits for it
 * (evict.c), so a cluster that is slow to answer costs each read at most
 * twice the op timeout, queued or in flight, never a queue's worth of them.
 */
static void
drain(struct fifo *f, unsigned int limit)
{
	uint64_t late = (uint64_t)kvss.cfg.shared.op_timeout_ms * 1000000ull;
	uint64_t now = f == &gets && f->n > 0 ? mono_ns() : 0;

	while (f->n > 0) {
		struct l2_req *q = f->q[f->head];

		if (q->op == L2R_SHGET && now - q->t_ns > late) {
			sh.failed++; /* too late to send: as the cluster's failure */
			finish(q, PROTO_E_SHARED_FAILED);
		} else if (shared_inflight(sh.s) >= limit || submit(q) == -EBUSY) {
			return;
		}
		f->head = (f->head + 1) % SH_RING;
		f->n--;
	}
}

static void *
sh_main(void *arg)
{
	unsigned int idle = 0, depth = kvss.cfg.shared.depth;
	unsigned int put_limit = depth > 1 ? depth - (depth + 3) / 4 : 1;

	/* The shard it serves, named by whoever started it (slices are named
	 * and stamped with its id and model), not the thread-local default. */
	kvss_me = arg;
	while (!__atomic_load_n(&sh.stop, __ATOMIC_RELAXED)) {
		void *qs[32];
		unsigned int n = rte_ring_dequeue_burst(sh.to, qs, 32, NULL), i;
		uint64_t now = n > 0 ? mono_ns() : 0;

		for (i = 0; i < n; i++) {
			struct l2_req *q = qs[i];

			if (q->op == L2R_SHGET) {
				q->t_ns = now; /* its wait for a turn starts */
				push(&gets, q);
			} else if (wputs.n >= SH_PUT_BACKLOG) {
				sh.put_shed++;
				finish(q, PROTO_E_SHARED_FAILED);
			} else {
				push(&wputs, q);
			}
		}
		drain(&gets, depth);
		drain(&wputs, put_limit);
		if (shared_inflight(sh.s) > 0) {
			reap(n == 0 ? 1 : 0);
			idle = 0;
		} else if (n == 0) {
			struct timespec ts = {0, idle < 64 ? 2000 : 50000};

			idle++;
			nanosleep(&ts, NULL);
		}
	}
	/* Stopping: what is queued is answered, what is in flight finishes. */
	while (gets.n > 0) {
		finish(gets.q[gets.head], PROTO_E_SHARED_FAILED);
		gets.head = (gets.head + 1) % SH_RING;
		gets.n--;
	}
	while (wputs.n > 0) {
		finish(wputs.q[wputs.head], PROTO_E_SHARED_FAILED);
		wputs.head = (wputs.head + 1) % SH_RING;
		wputs.n--;
	}
	while (shared_inflight(sh.s) > 0)
		reap(100);
	return NULL;
}

int
shard_sh_open(char *err, size_t errlen)
{
	const struct kvss_shared_cfg *c = &kvss.cfg.shared;
	struct shared_params p = {.conf = c->conf, .pool = c->pool, .client = c->client,
				  .op_timeout_ms = c->op_timeout_ms, .max_inflight = c->depth};
	char name[RTE_RING_NAMESIZE], why[256];

	if (c->conf[0] == '\0')
		return 0;
	sh.s = shared_open(&p, why, sizeof(why));
	if (sh.s == NULL) {
		snprintf(err, errlen, "shared.conf %s: %s", c->conf, why);
		return -1;
	}
	snprintf(name, sizeof(name), "shto_%u", kvss_me->cfg->id);
	sh.to = rte_ring_create(name, SH_RING, (int)rte_socket_id(), RING_F_SP_ENQ | RING_F_SC_DEQ);
	snprintf(name, sizeof(name), "shfrom_%u", kvss_me->cfg->id);
	sh.from = rte_ring_create(name, SH_RING, (int)rte_socket_id(), RING_F_SP_ENQ | RING_F_SC_DEQ);
	if (sh.to == NULL || sh.from == NULL) {
		snprintf(err, errlen, "shared: no memory for the thread's rings");
		shard_sh_close();
		return -1;
	}
	if (pthread_create(&sh.thread, NULL, sh_main, kvss_me) != 0) {
		snprintf(err, errlen, "shared: cannot start the shared level's thread");
		shard_sh_close();
		return -1;
	}
	pthread_setname_np(sh.thread, "kvss-shared");
	sh.started = 1;
	return 0;
}

void
shard_sh_stop(void)
{
	if (sh.started) {
		__atomic_store_n(&sh.stop, 1, __ATOMIC_RELAXED);
		pthread_join(sh.thread, NULL);
		sh.started = 0;
	}
}

void
shard_sh_close(void)
{
	shard_sh_stop();
	/* The requests still in the rings are the pool's (l2.c frees the pool). */
	rte_ring_free(sh.to);
	rte_ring_free(sh.from);
	shared_close(sh.s);
	sh.s = NULL;
	sh.to = sh.from = NULL;
}

int
shard_sh_submit(struct l2_req *q)
{
	return rte_ring_enqueue(sh.to, q) == 0 ? 0 : -ENOBUFS;
}

unsigned int
shard_sh_take(void **qs, unsigned int n)
{
	return sh.from != NULL ? rte_ring_dequeue_burst(sh.from, qs, n, NULL) : 0;
}
