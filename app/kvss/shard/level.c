/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * A shard's storage levels (level.h): each opened by its backend's ops,
 * run by one worker thread of its own, and met by the ingest lcore over
 * two rings; one pool of requests per shard, which both levels draw from
 * (an SH_UP may bring columns of both in one batch).
 *
 * The worker is the same loop for every backend: it takes what the ingest
 * lcore gave, lets the backend begin or queue it, and polls the backend
 * for what finished; with nothing to do it sleeps briefly (2 us at first,
 * 50 us after 64 idle turns), as a thread beside busy-polling lcores must.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <openssl/crypto.h>

#include <rte_cycles.h>
#include <rte_lcore.h>
#include <rte_mempool.h>
#include <rte_ring.h>
#include <rte_rwlock.h>

#include "level.h"
#include "mono.h"
#include "orgkeys.h"
#include "shard.h"
#include "shared_obj.h"
#include "seal.h"
#include "shared_seal.h"

#define LEVEL_RING 1024

/*
 * Telemetry (EAL's thread) sums the levels' counters while they run and
 * until EAL stops, after the levels are closed: the sum reads them under
 * this lock, and closing a shard's levels (freeing them) takes it to write.
 */
static rte_rwlock_t levels_lock = RTE_RWLOCK_INITIALIZER;

static const struct shard_level_ops *const backends[SHARD_LEVELS] = {
	[SHARD_LEVEL_DISK] = &level_disk_ops,
	[SHARD_LEVEL_SHARED] = &level_shared_ops,
};

void
level_done(struct shard_level *lv, struct level_req *q, uint16_t status)
{
	unsigned int turns = 0;

	q->status = status;
	lv->answers++;
	/* Not reached while running: the ring holds every request of the pool. */
	while (rte_ring_enqueue(lv->from, q) != 0 && !__atomic_load_n(&lv->stop, __ATOMIC_RELAXED))
		kvss_wait_turn(&turns);
}

void
level_spoke(struct shard_level *lv)
{
	__atomic_store_n(&lv->answered, rte_get_tsc_cycles(), __ATOMIC_RELEASE);
}

void
level_quiet(struct shard_level *lv, uint64_t t0)
{
	if (t0 > lv->looked)
		__atomic_store_n(&lv->looked, t0, __ATOMIC_RELEASE);
}

static void *
level_main(void *arg)
{
	struct shard_level *lv = arg;
	unsigned int idle = 0;

	while (!__atomic_load_n(&lv->stop, __ATOMIC_RELAXED)) {
		void *qs[32];
		uint64_t answers = lv->answers;
		unsigned int n, i;
		bool busy;

		lv->turn = rte_get_tsc_cycles();
		n = rte_ring_dequeue_burst(lv->to, qs, 32, NULL);
		if (n > 0)
			__atomic_store_n(&lv->taken, lv->taken + n, __ATOMIC_RELEASE);
		for (i = 0; i < n; i++)
			lv->ops->start(lv, qs[i]);
		busy = lv->ops->poll(lv, n == 0) || n > 0;
		/* Nothing answered this turn: whatever the backend had finished by
		 * its start was taken, and there was none; the level's clock moves
		 * (level.h, looked). A backend's wait is bounded, so a level whose
		 * answers never come still moves it. */
		if (lv->answers == answers)
			level_quiet(lv, lv->turn);
		if (busy) {
			idle = 0;
		} else {
			struct timespec ts = {0, idle < 64 ? 2000 : 50000};

			idle++;
			nanosleep(&ts, NULL);
		}
	}
	lv->ops->drain(lv);
	return NULL;
}

int
shard_level_give(struct shard_levels *ls, struct level_req *q)
{
	struct shard_level *lv = ls->lv[q->level];

	if (lv == NULL || rte_ring_enqueue(lv->to, q) != 0)
		return -ENOBUFS;
	lv->given++;
	return 0;
}

unsigned int
shard_level_take(struct shard_levels *ls, void **qs, unsigned int n)
{
	unsigned int k, got = 0;

	for (k = 0; k < SHARD_LEVELS && got < n; k++)
		if (ls->lv[k] != NULL)
			got += rte_ring_dequeue_burst(ls->lv[k]->from, qs + got, n - got, NULL);
	return got;
}

/* ---- Start and stop ----------------------------------------------------- */

static unsigned int
shard_index(const struct kvss_shard_inst *s)
{
	return (unsigned int)(s - kvss_shards);
}

static void
level_free(struct shard_levels *ls, enum shard_level_kind k)
{
	struct shard_level *lv = ls->lv[k];
	void *p;

	if (lv == NULL)
		return;
	/* The requests still in its rings are the pool's. */
	while (lv->from != NULL && rte_ring_dequeue(lv->from, &p) == 0) {
		free(((struct level_req *)p)->inv);
		if (((struct level_req *)p)->op == LEVEL_GONE)
			free(p); /* the worker's own (level_disk.c), not the pool's */
		else
			rte_mempool_put(ls->pool, p);
	}
	while (lv->to != NULL && rte_ring_dequeue(lv->to, &p) == 0)
		rte_mempool_put(ls->pool, p);
	rte_ring_free(lv->to);
	rte_ring_free(lv->from);
	if (lv->ops->close != NULL)
		lv->ops->close(lv);
	free(lv);
	ls->lv[k] = NULL;
}

/* Open level @p k of shard @p s (its backend, its rings) and start its worker. */
static int
level_open(struct kvss_shard_inst *s, enum shard_level_kind k, uint32_t column, char *err,
	   size_t errlen)
{
	struct shard_levels *ls = s->levels;
	struct shard_level *lv = calloc(1, sizeof(*lv));
	char name[RTE_RING_NAMESIZE];
	int rc;

	if (lv == NULL) {
		snprintf(err, errlen, "no memory for the level");
		return -1;
	}
	lv->ops = backends[k];
	lv->shard = s;
	lv->turn = lv->looked = lv->answered = rte_get_tsc_cycles();
	lv->column = column;
	ls->lv[k] = lv;
	if ((rc = lv->ops->open(lv, err, errlen)) != 0) {
		free(lv); /* nothing of it to close */
		ls->lv[k] = NULL;
		return rc == -2 ? -2 : -1;
	}
	snprintf(name, sizeof(name), "%sto_%u", lv->ops->prefix, shard_index(s));
	lv->to = rte_ring_create(name, LEVEL_RING, (int)rte_socket_id(),
				 RING_F_SP_ENQ | RING_F_SC_DEQ);
	snprintf(name, sizeof(name), "%sfrom_%u", lv->ops->prefix, shard_index(s));
	lv->from = rte_ring_create(name, LEVEL_RING, (int)rte_socket_id(),
				   RING_F_SP_ENQ | RING_F_SC_DEQ);
	if (lv->to == NULL || lv->from == NULL) {
		snprintf(err, errlen, "no memory for the %s thread's rings", lv->ops->thread);
		return -1;
	}
	if (pthread_create(&lv->thread, NULL, level_main, lv) != 0) {
		snprintf(err, errlen, "cannot start the %s thread", lv->ops->thread);
		return -1;
	}
	/* Told apart in top and gdb: the first shard's by the backend's name
	 * alone, the others' with their index ("kvss-tier1"). */
	if (shard_index(s) == 0)
		snprintf(name, sizeof(name), "%s", lv->ops->thread);
	else
		snprintf(name, sizeof(name), "%.12s%u", lv->ops->thread, shard_index(s));
	pthread_setname_np(lv->thread, name);
	lv->started = 1;
	return 0;
}

int
shard_levels_open(struct kvss_shard_inst *s, char *err, size_t errlen)
{
	const struct kvstore_params *kp = kvstore_params(s->store);
	bool disk = s->cfg->l2.path[0] != '\0', shared = kvss.cfg.shared.conf[0] != '\0';
	uint32_t column = disk ? s->cfg->l2.column : 0, shcolumn = shared ? kvss.cfg.shared.column : 0;
	uint32_t most = column > shcolumn ? column : shcolumn, sum = 0;
	struct shard_levels *ls;
	char name[RTE_MEMPOOL_NAMESIZE];
	uint16_t c;
	int rc;

	if (!disk && !shared)
		return 0;
	ls = calloc(1, sizeof(*ls));
	if (ls == NULL) {
		snprintf(err, errlen, "no memory for the shard's levels");
		return -1;
	}
	s->levels = ls;
	for (c = 0; c < kp->num_caches; c++)
		if (kp->cache[c].bytes_per_token * most > sum)
			sum = kp->cache[c].bytes_per_token * most;
	ls->col_bytes = sum;
	snprintf(name, sizeof(name), "lvreq_%u", shard_index(s));
	ls->pool = rte_mempool_create(name, LEVEL_POOL,
				      sizeof(struct level_req) + SHARED_HDR_LEN + sum +
					      SEAL_TAG_LEN + LEVEL_POS_MAX * 4u,
				      0, 0, NULL, NULL, NULL, NULL, (int)rte_socket_id(), 0);
	if (ls->pool == NULL) {
		snprintf(err, errlen, "no memory for the levels' requests (%u of %zu bytes)",
			 LEVEL_POOL, sizeof(struct level_req) + sum);
		shard_levels_close(s);
		return -1;
	}
	if (disk && (rc = level_open(s, SHARD_LEVEL_DISK, column, err, errlen)) != 0) {
		shard_levels_close(s);
		return rc; /* -2: its key files' (err names the key) */
	}
	if (shared && level_open(s, SHARD_LEVEL_SHARED, shcolumn, err, errlen) != 0) {
		shard_levels_close(s);
		return -2; /* the shared level's: err names its key */
	}
	return 0;
}

void
shard_levels_stop(struct kvss_shard_inst *s)
{
	unsigned int k;

	/* The shared level first: an SH_UP's columns may come from both. */
	for (k = SHARD_LEVELS; s->levels != NULL && k-- > 0;) {
		struct shard_level *lv = s->levels->lv[k];

		if (lv != NULL && lv->started) {
			__atomic_store_n(&lv->stop, 1, __ATOMIC_RELAXED);
			pthread_join(lv->thread, NULL);
			lv->started = 0;
		}
	}
}

void
shard_levels_close(struct kvss_shard_inst *s)
{
	struct shard_levels *ls = s->levels;
	unsigned int k;

	if (ls == NULL)
		return;
	shard_levels_stop(s);
	rte_rwlock_write_lock(&levels_lock);
	for (k = SHARD_LEVELS; k-- > 0;)
		level_free(ls, (enum shard_level_kind)k);
	rte_mempool_free(ls->pool);
	free(ls);
	s->levels = NULL;
	rte_rwlock_write_unlock(&levels_lock);
}

/* ---- What the rest of the shard asks -------------------------------------- */

struct shard_level *
shard_level_of(const struct kvss_shard_inst *s, enum shard_level_kind k)
{
	return s->levels != NULL ? s->levels->lv[k] : NULL;
}

bool
shard_level_on(struct kvss_shard_inst *me, unsigned int type)
{
	return shard_level_of(me, shard_level_kind_of(type)) != NULL;
}

uint64_t
shard_level_refused(const struct shard_level *lv)
{
	struct level_counter c[LEVEL_COUNTERS_MAX];
	uint64_t refused = 0;
	unsigned int i, n = lv->ops->counters(lv, c);

	for (i = 0; i < n; i++)
		if (c[i].refusal)
			refused += c[i].value;
	return refused;
}

unsigned int
shard_level_counters(enum shard_level_kind k, struct level_counter *c, const char **prefix)
{
	unsigned int n = backends[k]->counters(NULL, c), i, j;
	uint16_t s;

	/* Summed over the process's shards; each shard's list is the same (its backend's). */
	*prefix = backends[k]->prefix;
	rte_rwlock_read_lock(&levels_lock);
	for (s = 0; s < kvss.num_shards; s++) {
		struct shard_level *lv = shard_level_of(&kvss_shards[s], k);
		struct level_counter one[LEVEL_COUNTERS_MAX];

		if (lv == NULL)
			continue;
		j = lv->ops->counters(lv, one);
		for (i = 0; i < j && i < n; i++)
			c[i].value += one[i].value;
	}
	rte_rwlock_read_unlock(&levels_lock);
	return n;
}

/* ---- Keys ------------------------------------------------------------------- */

int
level_keys_load(const char *group, const char *key_file, const char *old_key_file,
		struct seal_ring **out, char *err, size_t errlen)
{
	struct seal_ring *r;
	char why[512]; /* a path of KVSS_PATH_MAX and what was wrong with it */

	*out = NULL;
	if (key_file[0] == '\0')
		return 0;
	r = calloc(1, sizeof(*r));
	if (r == NULL) {
		snprintf(err, errlen, "%s.key_file: no memory for the keys", group);
		return -1;
	}
	if (seal_key_load(key_file, &r->cur, why, sizeof(why)) != 0) {
		snprintf(err, errlen, "%s.key_file: %s", group, why);
		goto fail;
	}
	if (old_key_file[0] != '\0' && seal_key_load(old_key_file, &r->old, why, sizeof(why)) != 0) {
		snprintf(err, errlen, "%s.old_key_file: %s", group, why);
		goto fail;
	}
	if (r->old.loaded && r->old.id == r->cur.id) {
		snprintf(err, errlen, "%s.old_key_file: %s holds the same key as %s.key_file", group,
			 old_key_file, group);
		goto fail;
	}
	*out = r;
	return 0;
fail:
	level_keys_free(r);
	return -1;
}

void
level_keys_free(struct seal_ring *r)
{
	if (r != NULL)
		OPENSSL_cleanse(r, sizeof(*r)); /* the keys leave no copy (its store is level_orgs') */
	free(r);
}

/* ---- Organization keys ------------------------------------------------------ */

int
level_orgs_load(struct level_orgs *lo, const char *key, const char *path, char *err,
		size_t errlen)
{
	char why[512];

	memset(lo, 0, sizeof(*lo));
	lo->path = path;
	lo->key = key;
	lo->looked_ns = mono_ns();
	if (path[0] == '\0')
		return 0;
	if (seal_orgs_load(path, &lo->cur, why, sizeof(why)) != 0) {
		snprintf(err, errlen, "%s: %s", key, why);
		return -1;
	}
	return 0;
}

/* Is the file at @p path the one @p st describes (the one refused)? */
static bool
same_file(const char *path, const struct stat *st)
{
	struct stat now;

	return lstat(path, &now) == 0 && seal_file_same(&now, st);
}

bool
level_orgs_look(struct level_orgs *lo, uint32_t every_ms, unsigned int shard, const char *what,
		const char *meanwhile, struct seal_orgs **old)
{
	struct seal_orgs *o;
	char err[512];
	uint64_t now;

	*old = NULL;
	if (lo->cur == NULL)
		return false;
	now = mono_ns();
	if (now - lo->looked_ns < (uint64_t)every_ms * 1000000ull)
		return false;
	lo->looked_ns = now;
	if (!seal_orgs_changed(lo->path, lo->cur))
		return false;
	/* A file refused is read again when it changes, else every ten looks
	 * (a large one would stall the level's I/O every interval; an error
	 * that passes must not keep the level behind for good). */
	if (lo->behind && same_file(lo->path, &lo->refused_st) &&
	    now - lo->refused_ns < 10ull * every_ms * 1000000ull)
		return false;
	lo->refused_ns = now;
	if (lstat(lo->path, &lo->refused_st) != 0)
		memset(&lo->refused_st, 0, sizeof(lo->refused_st));
	if (seal_orgs_load(lo->path, &o, err, sizeof(err)) != 0) {
		lo->refused++;
		lo->behind = true;
		if (strcmp(err, lo->said) != 0) {
			snprintf(lo->said, sizeof(lo->said), "%s", err);
			printf("kvss: shard %u: %s changed but is refused: until it reads one, %s "
			       "%s: %s\n", shard, lo->key, what, meanwhile, err);
			fflush(stdout);
		}
		return false;
	}
	*old = lo->cur;
	lo->cur = o;
	lo->reloaded++;
	lo->behind = false;
	lo->said[0] = '\0';
	printf("kvss: shard %u: organization keys read again from %s for %s (%u named, default "
	       "key %08x)\n", shard, lo->path, what, seal_orgs_count(o), seal_orgs_default(o)->id);
	fflush(stdout);
	return true;
}

void
level_orgs_free(struct level_orgs *lo)
{
	seal_orgs_free(lo->cur);
	lo->cur = NULL;
}
