/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The second tier as a level (level.h; PROTOCOL.md section 9): the shard's
 * kvdisk (lib/kvdisk: io_uring, O_DIRECT), owned by the level's worker,
 * which does every disk operation.
 *
 *   PUT   (L2_DOWN) the column's bytes, copied out of DRAM by the ingest
 *         lcore, written under its key
 *   GET   (L2_UP, and an SH_UP's column with object id 0) read whole;
 *         a missing or corrupt one answers a code, its tokens are lost
 *   DEL   (L2_DELETE) its header cleared
 *   LIST  every column held, for the inventory after a HELLO
 *   GONE  (from the worker, unasked) the columns a new organization key
 *         store made unreadable, let go at once: the driver is told
 *         (L2_GONE) before it asks for them
 *
 * A column's write lands before a read or a delete of that column begins
 * (the driver may ask for a column it just sent down at once), and every
 * write before a list. Nothing else waits for a write: a request that
 * cannot start when taken (that wait, or no op free: kvdisk keeps a
 * quarter of its queue for reads) waits in the backend's list, in the
 * order taken, while the worker goes on taking requests. Writes into the
 * file's unallocated blocks go through the kernel's io_uring workers, and
 * were seen to finish nothing for 20 s beside two CPU hogs while reads
 * went on: a read queued behind them had its batch cut, its tokens lost.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <rte_cycles.h>

#include "kvdisk.h"
#include "level.h"
#include "orgkeys.h"
#include "shard.h"

struct disk {
	struct kvdisk *d;
	unsigned int puts; /* writes in flight */
	/* Requests that could not start when taken, in the order taken
	 * (start(), again(): at most every request there is). */
	struct level_req *wait[LEVEL_POOL];
	unsigned int nwait;
	uint64_t waited; /* requests that could not start when taken */
	uint64_t back_then; /* kvdisk's ops given back when again() last ran */
	/* The organization key store kvdisk seals under (kvdisk_set_orgs). */
	struct level_orgs orgs;
	/* Columns let go under a retired key, not yet handed to the ingest
	 * lcore (a request of the pool carries them: tell_gone()). */
	struct kvdisk_meta *gone;
	uint32_t ngone, gone_cap;
	uint64_t gone_told; /* columns let go that the ingest lcore was given to tell */
	/* The organizations whose columns the last store read let go
	 * (ascending): a delete of one of their columns that finds nothing
	 * was let go with them, and is done (PROTOCOL.md section 9). */
	uint64_t *retired_orgs;
	uint32_t nretired_orgs;
	uint64_t gone_dels; /* such deletes answered as done */
};

/* How often the second tier looks at its organization key store's file. */
#define DISK_ORGS_LOOK_MS 1000

static struct kvdisk *
kd(const struct shard_level *lv)
{
	return ((const struct disk *)lv->be)->d;
}

static void
inv_add(void *arg, const struct kvdisk_meta *m)
{
	struct level_req *q = arg;

	q->inv[q->ninv++] = *m;
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

/*
 * How long the worker waits for the disk at most before its turn ends: a
 * turn that ends with nothing answered moves the level's clock (level.h),
 * so a disk that stopped answering is told from a worker that is late.
 */
#define DISK_WAIT_US 1000u

/* Take what finished; @p wait: for at least one, up to DISK_WAIT_US. */
static unsigned int
reap(struct shard_level *lv, bool wait)
{
	struct disk *b = lv->be;
	struct kvdisk_done done[32];
	uint64_t t0 = rte_get_tsc_cycles();
	unsigned int n = kvdisk_poll_for(b->d, done, 32, wait ? DISK_WAIT_US : 0), i;

	if (n == 0)
		level_quiet(lv, t0);
	else
		level_spoke(lv); /* reads, writes, deletes' headers cleared: the disk answers */
	for (i = 0; i < n; i++) {
		struct level_req *q = (struct level_req *)(uintptr_t)done[i].cookie;

		if (done[i].type == KVDISK_PUT)
			b->puts--;
		if (done[i].type == KVDISK_GET && done[i].status == 0) {
			if (done[i].len != q->len) {
				level_done(lv, q, PROTO_E_L2_FAILED);
				continue;
			}
			if (done[i].data != q->data) /* kvdisk_get_into() put it there */
				memcpy(q->data, done[i].data, q->len);
		}
		level_done(lv, q, code_of(done[i].status));
	}
	return n;
}

static void
list(struct shard_level *lv, struct level_req *q)
{
	struct kvdisk_stats st;
	uint64_t total = 0;
	uint16_t c;

	kvdisk_stats(kd(lv), &st);
	for (c = 0; c < KVDISK_MAX_CACHES; c++)
		total += st.stored[c];
	q->inv = malloc((total ? total : 1) * sizeof(*q->inv));
	q->ninv = 0;
	if (q->inv != NULL)
		kvdisk_foreach(kd(lv), inv_add, q);
	level_done(lv, q, q->inv != NULL ? 0 : PROTO_E_L2_FAILED);
}

static bool
same_column(const struct level_req *a, const struct level_req *b)
{
	return a->meta.cache == b->meta.cache && a->meta.key == b->meta.key &&
	       a->meta.org == b->meta.org;
}

/*
 * Must @p q wait behind one of the first @p n waiting requests? A list
 * follows every write and list before it, and no write passes a waiting
 * list (it would wait for that write too, and for the next); requests of
 * one column keep their order, but for two reads.
 */
static bool
behind(const struct disk *b, const struct level_req *q, unsigned int n)
{
	unsigned int i;

	for (i = 0; i < n; i++) {
		const struct level_req *p = b->wait[i];

		if (q->op == LEVEL_LIST || p->op == LEVEL_LIST) {
			if (q->op != LEVEL_GET && p->op != LEVEL_GET)
				return true;
			continue;
		}
		if ((q->op != LEVEL_GET || p->op != LEVEL_GET) && same_column(p, q))
			return true;
	}
	return false;
}

static int
cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

static bool
org_retired(const struct disk *b, uint64_t org)
{
	return b->nretired_orgs > 0 &&
	       bsearch(&org, b->retired_orgs, b->nretired_orgs, sizeof(org), cmp_u64) != NULL;
}

/* Begin one request: false when it cannot yet (it waits, as start() says). */
static bool
begin(struct shard_level *lv, struct level_req *q)
{
	struct disk *b = lv->be;
	int rc;

	/* Its store refused (a reset it could not read): nothing sealed under
	 * keys perhaps retired, nothing opened under them either (no
	 * generation hides this disk's columns). L2_FAILED: the shard has
	 * said why. */
	if (b->orgs.behind && (q->op == LEVEL_PUT || q->op == LEVEL_GET)) {
		b->orgs.behind_refused++;
		level_done(lv, q, PROTO_E_L2_FAILED);
		return true;
	}
	switch (q->op) {
	case LEVEL_LIST:
		if (b->puts > 0)
			return false; /* what was written before it is listed */
		list(lv, q);
		return true;
	case LEVEL_PUT:
		rc = kvdisk_put(b->d, &q->meta, q->data, q->len, (uintptr_t)q);
		break;
	default:
		/* A column written just before may be read or deleted now: its write lands first. */
		if (kvdisk_writing(b->d, q->meta.cache, q->meta.key, q->meta.org))
			return false;
		if (q->op == LEVEL_GET)
			/* Opened straight into the request: the worker's one copy. */
			rc = kvdisk_get_into(b->d, q->meta.cache, q->meta.key, q->meta.org, q->data,
					     q->len, (uintptr_t)q);
		else
			rc = kvdisk_del(b->d, q->meta.cache, q->meta.key, q->meta.org, (uintptr_t)q);
		if (rc == -ENOENT && q->op == LEVEL_DEL && org_retired(b, q->meta.org)) {
			b->gone_dels++;
			level_done(lv, q, 0);
			return true;
		}
		break;
	}
	/* No op free, a slot being cleared, this column's write in flight: later. */
	if (rc == -EBUSY || rc == -EAGAIN)
		return false;
	if (rc == 0 && q->op == LEVEL_PUT)
		b->puts++;
	else if (rc != 0)
		level_done(lv, q, code_of(rc));
	return true;
}

/* A request taken: begun, or waiting behind what it must follow or for room. */
static void
start(struct shard_level *lv, struct level_req *q)
{
	struct disk *b = lv->be;

	if (behind(b, q, b->nwait) || !begin(lv, q)) {
		b->wait[b->nwait++] = q; /* room: every request there is */
		b->waited++;
	}
}

/* The waiting requests, in order, begun where they now can. */
static void
again(struct shard_level *lv)
{
	struct disk *b = lv->be;
	unsigned int i, kept = 0;

	for (i = 0; i < b->nwait; i++) {
		struct level_req *q = b->wait[i];

		if (behind(b, q, kept) || !begin(lv, q))
			b->wait[kept++] = q;
	}
	b->nwait = kept;
	b->back_then = kvdisk_ops_back(b->d);
}

/*
 * The organizations of b->gone[from..] added to the set org_retired() looks
 * in: every organization a store read since the tier opened let columns
 * of go. Cumulative, not the last read's alone: the driver deletes a
 * column let go from its other shards (PROTOCOL.md section 9, L2_GONE),
 * and those deletes may come after a later read here. No memory: the set
 * stays as it was (such a delete is then answered UNKNOWN_PROMPT).
 */
static void
retired_orgs_add(struct disk *b, uint32_t from)
{
	uint32_t i, all = b->nretired_orgs, n = 1, add = b->ngone > from ? b->ngone - from : 0;
	uint64_t *o;

	if (add == 0 || (o = realloc(b->retired_orgs, sizeof(*o) * ((size_t)all + add))) == NULL)
		return;
	for (i = from; i < b->ngone; i++)
		o[all++] = b->gone[i].org;
	qsort(o, all, sizeof(*o), cmp_u64);
	for (i = 1; i < all; i++)
		if (o[i] != o[n - 1])
			o[n++] = o[i]; /* each organization once */
	b->retired_orgs = o;
	b->nretired_orgs = n;
}

static void
gone_add(void *arg, const struct kvdisk_meta *m)
{
	struct disk *b = arg;

	if (b->ngone == b->gone_cap) {
		uint32_t cap = b->gone_cap ? 2 * b->gone_cap : 256;
		struct kvdisk_meta *g = realloc(b->gone, cap * sizeof(*g));

		if (g == NULL)
			return; /* unsaid: asked for, it is lost as before (UNKNOWN_PROMPT) */
		b->gone = g;
		b->gone_cap = cap;
	}
	b->gone[b->ngone++] = *m;
}

/*
 * The columns let go, to the ingest lcore in one request (its inv), which
 * sends each as an L2_GONE record. The request is not the pool's: the
 * pool's requests are the ingest lcore's to count (an L2_UP takes as many
 * as it has columns, counted first). No memory: the next poll tries again.
 */
static void
tell_gone(struct shard_level *lv)
{
	struct disk *b = lv->be;
	struct level_req *q;

	if (b->ngone == 0 || (q = calloc(1, sizeof(*q))) == NULL)
		return;
	q->op = LEVEL_GONE;
	q->level = SHARD_LEVEL_DISK;
	q->inv = b->gone;
	q->ninv = b->ngone;
	b->gone_told += b->ngone;
	b->gone = NULL;
	b->ngone = b->gone_cap = 0;
	level_done(lv, q, 0);
}

static bool
poll_disk(struct shard_level *lv, bool idle)
{
	struct disk *b = lv->be;
	struct seal_orgs *old;
	unsigned int n;
	bool busy;

	/* A reset retired an organization's key: what it sealed on this disk
	 * can no longer be opened. It is let go now and the driver told, so
	 * that a lookup misses it rather than a refill losing its tokens. */
	if (level_orgs_look(&b->orgs, DISK_ORGS_LOOK_MS, lv->shard->cfg->id, "the second tier",
			    "neither writes nor reads", &old)) {
		uint32_t from = b->ngone;
		int k = kvdisk_retire_orgs(b->d, b->orgs.cur, gone_add, b);

		seal_orgs_free(old);
		retired_orgs_add(b, from);
		if (k > 0) {
			printf("kvss: shard %u: the second tier let %d columns go, sealed under "
			       "organization keys the new store retired; the driver is told\n",
			       lv->shard->cfg->id, k);
			fflush(stdout);
		}
	}
	tell_gone(lv);

	/* The ingest lcore waits for requests: the deletes waiting in kvdisk
	 * for a put, each holding one, are written. */
	if (__atomic_load_n(&lv->starved, __ATOMIC_RELAXED) &&
	    __atomic_exchange_n(&lv->starved, 0, __ATOMIC_RELAXED))
		kvdisk_flush(b->d);
	/* Nothing came: wait for the disk, or let the worker sleep. Deletes
	 * waiting for a put to take their slot are no I/O to wait for (waiting
	 * would write them: a third of the demo's deletes were written so):
	 * they wait their 50 ms. */
	n = reap(lv, false);
	busy = n > 0;
	if (!busy && idle && kvdisk_inflight(b->d) > kvdisk_deferred(b->d)) {
		n = reap(lv, true);
		busy = true; /* it waited */
	}
	/* What waits can begin once something finished (a slot, a column's
	 * write) or an op came free (a read's is held until the poll after its
	 * answer, which may finish nothing: writes slow, or only deletes
	 * deferred). */
	if (b->nwait > 0 && (n > 0 || kvdisk_ops_back(b->d) != b->back_then))
		again(lv);
	return busy;
}

static void
drain(struct shard_level *lv)
{
	struct disk *b = lv->be;

	while (kvdisk_inflight(kd(lv)) > 0 || b->nwait > 0) {
		unsigned int before = b->nwait;

		/* A poll even with nothing out gives back the ops reads held. */
		reap(lv, kvdisk_inflight(kd(lv)) > 0);
		again(lv);
		if (b->nwait > 0 && b->nwait == before && kvdisk_inflight(kd(lv)) == 0) {
			/* Stopping, and nothing out will make room: not done. */
			while (b->nwait > 0)
				level_done(lv, b->wait[--b->nwait], PROTO_E_L2_FAILED);
		}
	}
}

static int
open_disk(struct shard_level *lv, char *err, size_t errlen)
{
	const struct kvss_shard_cfg *cfg = lv->shard->cfg;
	const struct kvstore_params *kp = kvstore_params(lv->shard->store);
	struct kvdisk_params p = {.num_caches = kp->num_caches, .queue_depth = cfg->l2.queue_depth,
				  .model = cfg->model, .shard = cfg->id, .format = cfg->l2.format};
	struct disk *b = calloc(1, sizeof(*b));
	struct seal_ring *keys = NULL;
	char dir[KVSS_PATH_MAX];
	int e;
	char *slash;
	uint16_t c;

	if (b == NULL) {
		snprintf(err, errlen, "no memory for the second tier");
		return -1;
	}
	if (level_keys_load("shard.l2", cfg->l2.key_file, cfg->l2.old_key_file, &keys, err,
			    errlen) != 0) {
		free(b);
		return -2; /* the configuration's: err names the key */
	}
	p.ring = keys; /* copied by kvdisk_open() */
	/* The store before the directory and the file: a bad one stops the
	 * shard with nothing made or touched (format = true would have
	 * formatted the file first). */
	if (level_orgs_load(&b->orgs, "shard.l2.org_key_file", cfg->l2.org_key_file, err,
			    errlen) != 0) {
		level_keys_free(keys);
		free(b);
		return -2; /* the configuration's: err names the key */
	}
	for (c = 0; c < kp->num_caches; c++) {
		p.cache[c].bytes_per_token = kp->cache[c].bytes_per_token;
		p.cache[c].column_tokens = lv->column;
		p.cache[c].capacity_tokens = cfg->l2.capacity_tokens[c];
	}
	/* Its directory, made if missing (0700: the columns are a customer's
	 * data); one that exists is kvdisk_open's to check (owner, mode). */
	snprintf(dir, sizeof(dir), "%s", cfg->l2.path);
	slash = strrchr(dir, '/');
	if (slash != NULL && slash != dir) {
		*slash = '\0';
		if (mkdir(dir, 0700) != 0 && errno != EEXIST) {
			snprintf(err, errlen, "%s: cannot make the directory: %s", dir, strerror(errno));
			level_keys_free(keys);
			level_orgs_free(&b->orgs);
			free(b);
			return -1;
		}
	}
	b->d = kvdisk_open(cfg->l2.path, &p, err, errlen);
	e = errno;
	if (b->d != NULL && b->orgs.cur != NULL)
		kvdisk_set_orgs(b->d, b->orgs.cur);
	if (b->d == NULL)
		level_orgs_free(&b->orgs);
	if (b->d != NULL && keys != NULL)
		printf("kvss: shard %u: the second tier's columns are sealed (AES-256-GCM, key %08x%s)\n",
		       cfg->id, keys->cur.id, keys->old.loaded ? "; its old key still opened" : "");
	else if (b->d != NULL)
		printf("kvss: shard %u: the second tier's columns are written in plain (no "
		       "shard.l2.key_file): whoever reads %s reads the KV bytes\n", cfg->id,
		       cfg->l2.path);
	if (b->d != NULL && b->orgs.cur != NULL) {
		/* Written under a store replaced since (a reset while it was
		 * down): let go now, so that the inventory does not offer what
		 * no read would open. */
		int k = kvdisk_retire_unheld(b->d);

		printf("kvss: shard %u: the second tier's columns under each organization's own key "
		       "from %s (%u named, default key %08x): a reset that replaces it makes them "
		       "unreadable\n", cfg->id, cfg->l2.org_key_file, seal_orgs_count(b->orgs.cur),
		       seal_orgs_default(b->orgs.cur)->id);
		if (k > 0)
			printf("kvss: shard %u: the second tier let %d columns go at start, sealed under "
			       "organization keys the store no longer holds\n", cfg->id, k);
		else if (k < 0)
			printf("kvss: shard %u: the second tier could not read its columns' key ids "
			       "(%s): those under retired keys are dropped as they are read\n", cfg->id,
			       strerror(-k));
	}
	level_keys_free(keys);
	if (b->d == NULL) {
		size_t n = strlen(err);

		free(b);
		/* Another key's file: the key given is the configuration's mistake
		 * (exit 2, naming it); the file is left whole. */
		if (e == EKEYREJECTED) {
			char why[768];

			snprintf(why, sizeof(why), "%s", err);
			snprintf(err, errlen, "shard.l2.key_file: %s", why);
			return -2;
		}
		/* What formatting would lift: say how, and what it costs. */
		if (e == EEXIST && n < errlen)
			snprintf(err + n, errlen - n, " (shard.l2.format = true formats it: "
				 "what it holds is lost)");
		return -1;
	}
	lv->be = b;
	/* A disk that answers nothing this long while reads wait on it is
	 * hung; shorter stalls are a busy machine's (level.h, silent_ms). */
	lv->silent_ms = lv->shard->cfg->l2.op_timeout_ms;
	return 0;
}

static void
close_disk(struct shard_level *lv)
{
	struct disk *b = lv->be;

	if (b != NULL) {
		kvdisk_close(b->d);
		level_orgs_free(&b->orgs);
		free(b->gone);
		free(b->retired_orgs);
	}
	free(b);
	lv->be = NULL;
}

static unsigned int
counters(const struct shard_level *lv, struct level_counter *c)
{
	struct kvdisk_stats st;
	uint64_t held = 0;
	unsigned int n = 0, k;

	memset(&st, 0, sizeof(st));
	/* Read while the worker runs: counters, torn values at worst. */
	if (lv != NULL)
		kvdisk_stats(kd(lv), &st);
	for (k = 0; k < KVDISK_MAX_CACHES; k++)
		held += st.stored[k];
	/* corrupt: a slot whose header or checksum did not match, refused. */
#define DISK_COUNTER(f, refused) c[n++] = (struct level_counter){"", #f, st.f, refused};
	DISK_COUNTER(puts, false)
	DISK_COUNTER(gets, false)
	DISK_COUNTER(dels, false)
	DISK_COUNTER(dels_absorbed, false)
	DISK_COUNTER(dels_written, false)
	DISK_COUNTER(bytes_written, false)
	DISK_COUNTER(bytes_read, false)
	DISK_COUNTER(corrupt, true)
	DISK_COUNTER(write_errors, false)
	DISK_COUNTER(read_errors, false)
	DISK_COUNTER(rebuilt, false)
	DISK_COUNTER(rebuild_dropped, false)
	/* A sealed file's (lib/kvdisk "Sealed files"): bad_tag and bad_key
	 * are refusals counted in corrupt already (not twice). */
	DISK_COUNTER(sealed, false)
	DISK_COUNTER(opened, false)
	DISK_COUNTER(bad_tag, false)
	DISK_COUNTER(bad_key, false)
	DISK_COUNTER(seal_errors, false)
	DISK_COUNTER(retired, false)
#undef DISK_COUNTER
	c[n++] = (struct level_counter){"", "columns", held, false};
	/* Requests that could not start when taken (a column's write in
	 * flight, no op free): writes holding reads up show here. */
	c[n++] = (struct level_counter){"", "waited", lv != NULL ? ((const struct disk *)lv->be)->waited : 0,
					false};
	{
		static const struct level_orgs none;
		const struct level_orgs *o = lv != NULL ? &((const struct disk *)lv->be)->orgs : &none;

		c[n++] = (struct level_counter){"", "org_keys_reloaded", o->reloaded, false};
		c[n++] = (struct level_counter){"", "org_keys_refused", o->refused, false};
		c[n++] = (struct level_counter){"", "org_keys_behind_refused", o->behind_refused, false};
		c[n++] = (struct level_counter){"", "gone_told",
						lv != NULL ? ((const struct disk *)lv->be)->gone_told : 0, false};
		c[n++] = (struct level_counter){"", "gone_dels",
						lv != NULL ? ((const struct disk *)lv->be)->gone_dels : 0, false};
	}
	return n;
}

const struct shard_level_ops level_disk_ops = {
	.thread = "kvss-tier",
	.prefix = "disk_",
	.timeout_key = "shard.l2.op_timeout_ms",
	.open = open_disk,
	.start = start,
	.poll = poll_disk,
	.drain = drain,
	.close = close_disk,
	.counters = counters,
};

/* ---- What only the second tier has ---------------------------------------- */

bool
level_disk_direct(const struct shard_level *lv)
{
	return lv != NULL && kvdisk_direct(kd(lv));
}

void
level_disk_found(const struct shard_level *lv, uint64_t *kept, uint64_t *dropped)
{
	struct kvdisk_stats st;
	unsigned int k;

	*kept = *dropped = 0;
	if (lv == NULL)
		return;
	kvdisk_stats(kd(lv), &st);
	for (k = 0; k < KVDISK_MAX_CACHES; k++)
		*kept += st.stored[k];
	*dropped = st.rebuild_dropped;
}

void
level_disk_tokens(const struct shard_level *lv, uint16_t cache, uint64_t *capacity, uint64_t *stored)
{
	struct kvdisk_stats st;

	*capacity = *stored = 0;
	if (lv == NULL || cache >= KVDISK_MAX_CACHES)
		return;
	kvdisk_stats(kd(lv), &st);
	*capacity = kvdisk_slots(kd(lv), cache) * lv->column;
	*stored = st.stored[cache] * lv->column;
}
