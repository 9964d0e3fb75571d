/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The shared level as a level (level.h; PROTOCOL.md section 10): the
 * shard's librados handle (lib/shared), owned by the level's worker, which
 * does every RADOS operation, so that the ingest lcore never waits for the
 * cluster. PUT is SH_DOWN, GET is SH_UP; it has no DEL or LIST.
 *
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
 * The level never deletes: what the shared level keeps is the driver's to
 * decide (its records) and the sweeper's (kvss-shared sweep).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rte_cycles.h>
#include <rte_lcore.h>
#include <rte_ring.h>

#include <openssl/crypto.h>

#include "level.h"
#include "mono.h"
#include "orgkeys.h"
#include "shard.h"
#include "shared.h"
#include "shared_seal.h"

/*
 * Reads before writes: a read is a batch waiting to complete (its tokens
 * are lost at the batch timeout), a write only a column that may be asked
 * for later. Writes wait in their own queue, take at most three quarters
 * of the depth, and when SH_PUT_BACKLOG wait already a new one is answered
 * SHARED_FAILED at once (the driver writes no record for it): a slow
 * cluster costs the shared level writes, never the shard its batches.
 */
#define SH_PUT_BACKLOG 256
#define SH_QUEUE 1024 /* at least the shard's pool of requests */

struct fifo {
	struct level_req *q[SH_QUEUE];
	uint32_t head, n;
};

struct sh {
	struct shared *s;
	struct fifo gets, wputs;
	unsigned int depth, put_limit;
	/* Counted by the worker, read by telemetry (torn values at worst). */
	uint64_t bad[SHARED_BAD_COUNT];
	uint64_t failed, missing, exists, put_shed;
	uint64_t replaced; /* taken names that were not the slice: written over */
	uint64_t kept_unknown_key; /* taken names sealed under a key id the store does not make: kept */
	/* The keys slices are sealed with and opened by (NULL: plain slices). */
	struct seal_ring *ring;
	uint64_t sealed, opened;
	/* The organization key store (ring->orgs is its store held). */
	struct level_orgs orgs;
};

/* A slice's object: its header, its bytes, and a sealed one's tag. */
static uint32_t
obj_len(const struct sh *sh, const struct level_req *q)
{
	return SHARED_HDR_LEN + q->len + (sh->ring != NULL ? SEAL_TAG_LEN : 0);
}

/*
 * An SH_DOWN's slice whose name is taken is read back and compared before
 * it counts as written: the same header and bytes (another replica wrote
 * the column) count; anything else (a slice that fails its check, another
 * column's bytes, an object gone meanwhile) is written over, so that a bad
 * slice under the right name never stands for the column.
 */
enum sh_phase { SH_PUT = 0, SH_READ_BACK, SH_REPLACE };

/* The header a slice of @p q has (written) or must have (read): the level's own shard's. */
static void
hdr_of(const struct shard_level *lv, const struct level_req *q, struct shared_hdr *h)
{
	*h = (struct shared_hdr){.kind = SHARED_SLICE, .org = q->meta.org, .key = q->meta.key,
				 .parent = q->meta.parent, .object_id = q->object_id,
				 .first_use_ns = q->meta.first_use_ns, .gen_global = q->gen_global,
				 .gen_org = q->gen_org, .layout = q->layout,
				 .model = (uint16_t)lv->shard->cfg->model, .shard = lv->shard->cfg->id,
				 .cache = q->meta.cache, .start = q->meta.start,
				 .tokens = q->meta.tokens, .bytes_per_token = q->bytes_per_token,
				 .payload_len = q->len};
}

/*
 * Does the object read into @p buf (@p got bytes) decode and name the
 * slice of @p q? Its header, decoded, goes to @p h (the caller's, so that
 * nothing decodes it twice).
 */
static enum shared_bad
slice_check(const struct shard_level *lv, const struct level_req *q, const uint8_t *buf,
	    uint32_t got, struct shared_hdr *h)
{
	struct shared_hdr want;
	enum shared_bad why = shared_obj_decode(buf, got, h);

	if (why != SHARED_OK)
		return why;
	hdr_of(lv, q, &want);
	return shared_hdr_match(h, &want);
}

/* The namespace and name of @p q's slice: its organization's, this level's shard's. */
static void
slice_names(const struct shard_level *lv, const struct level_req *q, char *ns, char *name)
{
	shared_ns(ns, q->meta.org);
	shared_slice_name(name, q->object_id, lv->shard->cfg->id, q->meta.cache);
}

/*
 * Open the slice whose header @p h slice_check() passed: where the level is
 * sealed, under the ring's keys, decrypted in place in @p buf (its bytes
 * then follow the header, plain); a plain level's slice is open already.
 */
static enum shared_bad
slice_open(const struct shard_level *lv, const struct shared_hdr *h, uint8_t *buf)
{
	const struct sh *sh = lv->be;

	return shared_slice_open(h, buf + SHARED_HDR_LEN, sh->ring);
}

/* A slice read whole: checked (and opened) before anything of it is stored. */
static uint16_t
check_get(struct shard_level *lv, struct level_req *q, uint32_t got)
{
	struct sh *sh = lv->be;
	struct shared_hdr h;
	enum shared_bad why = slice_check(lv, q, q->obj, got, &h);

	if (why == SHARED_OK)
		why = slice_open(lv, &h, q->obj);
	if (why != SHARED_OK) {
		q->bad = (uint8_t)why;
		__atomic_fetch_add(&sh->bad[why], 1, __ATOMIC_RELAXED);
		/* Sealed where this shard holds no key, or libcrypto failing here:
		 * this replica, not the slice, is at fault (another opens it), so
		 * its record must stay: answered as a read that failed here. A key
		 * id not held is the slice's fault: with keys rolled out in two
		 * steps (PROTOCOL.md section 10) every replica holds every key a
		 * slice is sealed with, so an unknown id is a forgery (and a key id
		 * is not authenticated until the slice opens). */
		if (why == SHARED_BAD_SEALED || why == SHARED_BAD_LOCAL)
			return PROTO_E_SHARED_FAILED;
		/* With organization keys, replicas take a new store one by one
		 * (a copy each): a key id this one does not make may be a newer
		 * key it has not read yet, or one it still holds that the others
		 * retired. Not known to be the slice's fault: its record stays
		 * (a retired key's slices are of an older generation, which the
		 * sweeper deletes); SHARED_KEY, not SHARED_FAILED: it will not
		 * open here until this shard's store changes. */
		if (why == SHARED_BAD_KEY && sh->ring->orgs != NULL)
			return PROTO_E_SHARED_KEY; /* the driver asks no more this generation */
		return PROTO_E_SHARED_BAD;
	}
	if (sh->ring != NULL)
		sh->opened++;
	return 0;
}

/*
 * The object found under an SH_DOWN slice's name, its header @p h passed
 * by slice_check(): is it that slice?
 */
static bool
same_slice(const struct shard_level *lv, const struct level_req *q, const struct shared_hdr *h)
{
	const struct sh *sh = lv->be;

	/* Sealed, each writer's bytes differ (a nonce of its own): a slice of
	 * the column that opens under the key this shard writes with was
	 * written by a holder of that key, and stands for it (one sealed under
	 * the key before is written over: it would not open once that key
	 * is dropped). */
	if (sh->ring != NULL) {
		struct seal_key k;
		bool mine = seal_ring_key(sh->ring, q->meta.org, &k) == 0 && h->key_id == k.id;

		OPENSSL_cleanse(&k, sizeof(k));
		return mine && slice_open(lv, h, q->back) == SHARED_OK;
	}
	return memcmp(q->back + SHARED_HDR_LEN, q->data, q->len) == 0;
}

/*
 * Under an organization key store, is the slice whose header @p h holds
 * sealed under a key id the store does not make? Replicas take a new store
 * one by one: a key this one does not make may be a newer one, and the
 * slice the only copy every replica that holds it can open. Never written
 * over (PROTOCOL.md, SH_DOWN); a key this one still holds (its master key
 * before) is, as a slice that would not open once that key is dropped.
 */
static bool
newer_key_maybe(const struct sh *sh, const struct level_req *q, const struct shared_hdr *h)
{
	struct seal_key k;
	bool held;

	if (sh->ring == NULL || sh->ring->orgs == NULL || h->version != SHARED_OBJ_VERSION_SEALED)
		return false;
	held = seal_ring_find(sh->ring, q->meta.org, h->key_id, &k) == 0;
	OPENSSL_cleanse(&k, sizeof(k));
	return !held; /* libcrypto failing here too: kept, not known to be the slice's fault */
}

/*
 * The next step of an SH_DOWN whose name was taken (enum sh_phase); true
 * when it went on (its answer comes with a later completion).
 */
static bool
put_step(struct shard_level *lv, struct level_req *q, int status, uint32_t got, uint16_t *code)
{
	struct sh *sh = lv->be;
	char ns[SHARED_NS_MAX], name[SHARED_NAME_MAX];
	uint32_t len = obj_len(sh, q), back_len = SHARED_HDR_LEN + q->len + SEAL_TAG_LEN;
	bool stopping = __atomic_load_n(&lv->stop, __ATOMIC_RELAXED);
	struct shared_hdr bh;
	int rc;

	if (q->phase == SH_PUT && stopping) {
		rc = -ESHUTDOWN; /* stopping: no new operation on the cluster */
	} else if (q->phase == SH_PUT) {
		/* The slice's size, sealed or not: a larger object completes -EFBIG, not it. */
		slice_names(lv, q, ns, name);
		q->back = malloc(back_len);
		rc = q->back == NULL ? -ENOMEM
				     : shared_get(sh->s, ns, name, q->back, back_len, (uintptr_t)q);
		q->phase = SH_READ_BACK;
	} else if (q->phase == SH_READ_BACK) {
		enum shared_bad why = status == 0 ? slice_check(lv, q, q->back, got, &bh)
						  : SHARED_BAD_SHORT;
		/* The column's slice, but first used before this one by more
		 * than the skew: not the same (written over, so that its record
		 * and its slices agree on the first use), though still ours. */
		bool named = why == SHARED_OK, ours = named || why == SHARED_BAD_STALE;

		if (named && same_slice(lv, q, &bh)) {
			sh->exists++; /* the same bytes under the same name, written by another */
			*code = 0;
			return false;
		}
		if (ours && newer_key_maybe(sh, q, &bh)) {
			sh->kept_unknown_key++; /* not the cluster's failure: SHARED_KEY says why */
			*code = PROTO_E_SHARED_KEY;
			return false;
		}
		/* A shard without the key never writes a plain slice over a
		 * sealed one of this column: that is a replica configured
		 * otherwise than the one that sealed it, and the pool's slices
		 * stay sealed (its write fails here; the record is not written). */
		if (sh->ring == NULL && ours && bh.version == SHARED_OBJ_VERSION_SEALED) {
			sh->failed++;
			__atomic_fetch_add(&sh->bad[SHARED_BAD_SEALED], 1, __ATOMIC_RELAXED);
			*code = PROTO_E_SHARED_FAILED;
			return false;
		}
		if ((status != 0 && status != -ENOENT && status != -EFBIG) || stopping) {
			sh->failed++; /* unread, or stopping: neither written nor known good */
			*code = PROTO_E_SHARED_FAILED;
			return false;
		}
		slice_names(lv, q, ns, name);
		rc = shared_replace(sh->s, ns, name, q->obj, len, (uintptr_t)q);
		q->phase = SH_REPLACE;
	} else {
		if (status == 0) {
			sh->replaced++;
			*code = 0;
		} else {
			sh->failed++;
			*code = PROTO_E_SHARED_FAILED;
		}
		return false;
	}
	if (rc == 0)
		return true;
	sh->failed++;
	*code = PROTO_E_SHARED_FAILED;
	return false;
}

static void
reap(struct shard_level *lv, uint32_t wait_ms)
{
	struct sh *sh = lv->be;
	struct shared_done d[32];
	uint64_t t0 = rte_get_tsc_cycles();
	unsigned int n = shared_poll(sh->s, d, 32, wait_ms), i;

	if (n == 0)
		level_quiet(lv, t0);
	else
		level_spoke(lv); /* the cluster answered (a read-back step too) */
	for (i = 0; i < n; i++) {
		struct level_req *q = (struct level_req *)(uintptr_t)d[i].cookie;
		uint16_t code = 0;

		if (q->op == LEVEL_PUT && (q->phase != SH_PUT || d[i].status == -EEXIST)) {
			if (put_step(lv, q, d[i].status, d[i].len, &code))
				continue;
			free(q->back);
			q->back = NULL;
		} else if (d[i].status == -ENOENT) {
			sh->missing++;
			code = PROTO_E_UNKNOWN_PROMPT;
		} else if (d[i].status == -EFBIG && q->op == LEVEL_GET) {
			/* Larger than the slice asked for: not it. */
			__atomic_fetch_add(&sh->bad[SHARED_BAD_TOO_BIG], 1, __ATOMIC_RELAXED);
			q->bad = SHARED_BAD_TOO_BIG;
			code = PROTO_E_SHARED_BAD;
		} else if (d[i].status != 0) {
			sh->failed++;
			code = PROTO_E_SHARED_FAILED;
		} else if (q->op == LEVEL_GET) {
			code = check_get(lv, q, d[i].len);
		}
		level_done(lv, q, code);
	}
}

/*
 * Submit one request; -EBUSY: the depth is reached (it stays queued).
 * Anything else is its answer.
 */
static int
submit(struct shard_level *lv, struct level_req *q)
{
	struct sh *sh = lv->be;
	char ns[SHARED_NS_MAX], name[SHARED_NAME_MAX];
	int rc;

	slice_names(lv, q, ns, name);
	if (q->op == LEVEL_PUT) {
		/* Its object was made when it came (make_put): sealed once. */
		rc = shared_put(sh->s, ns, name, q->obj, obj_len(sh, q), (uintptr_t)q);
	} else {
		/* The slice's size, sealed or not (its tag's room is always
		 * there): a larger object completes -EFBIG; a sealed slice read
		 * by a shard without the key is read whole and said SEALED. */
		rc = shared_get(sh->s, ns, name, q->obj, SHARED_HDR_LEN + q->len + SEAL_TAG_LEN,
				(uintptr_t)q);
	}
	if (rc != 0 && rc != -EBUSY) {
		sh->failed++;
		level_done(lv, q, PROTO_E_SHARED_FAILED);
	}
	return rc == -EBUSY ? -EBUSY : 0;
}

static void
push(struct fifo *f, struct level_req *q)
{
	f->q[(f->head + f->n++) % SH_QUEUE] = q;
}

/*
 * A read waits for its turn at most one op timeout: its batch waits for it
 * (evict.c), so a cluster that is slow to answer costs each read at most
 * twice the op timeout, queued or in flight, never a queue's worth of them.
 */
static void
drain_fifo(struct shard_level *lv, struct fifo *f, unsigned int limit)
{
	struct sh *sh = lv->be;
	uint64_t late = (uint64_t)kvss.cfg.shared.op_timeout_ms * 1000000ull;
	uint64_t now = f == &sh->gets && f->n > 0 ? mono_ns() : 0;

	while (f->n > 0) {
		struct level_req *q = f->q[f->head];

		if (q->op == LEVEL_GET && now - q->t_ns > late) {
			sh->failed++; /* too late to send: as the cluster's failure */
			level_done(lv, q, PROTO_E_SHARED_FAILED);
		} else if (shared_inflight(sh->s) >= limit || submit(lv, q) == -EBUSY) {
			return;
		}
		f->head = (f->head + 1) % SH_QUEUE;
		f->n--;
	}
}

/*
 * An SH_DOWN's object, made once as it comes: its header and, sealed, its
 * bytes encrypted in place with the tag after them (a write sent again
 * after -EBUSY must not seal them twice). false: libcrypto failed, and it
 * is answered.
 */
static bool
make_put(struct shard_level *lv, struct level_req *q)
{
	struct sh *sh = lv->be;
	struct shared_hdr h;

	hdr_of(lv, q, &h);
	h.written_ns = shared_wall_ns();
	if (sh->ring != NULL) {
		struct seal_key k;
		int rc = seal_ring_key(sh->ring, q->meta.org, &k);

		if (rc == 0)
			rc = shared_slice_seal(&h, q->data, &k);
		OPENSSL_cleanse(&k, sizeof(k));
		if (rc != 0) {
			sh->failed++; /* nothing leaves in plain */
			level_done(lv, q, PROTO_E_SHARED_FAILED);
			return false;
		}
	}
	if (sh->ring != NULL)
		sh->sealed++;
	shared_hdr_encode(q->obj, &h, q->data);
	return true;
}

static void
start(struct shard_level *lv, struct level_req *q)
{
	struct sh *sh = lv->be;

	if (q->op == LEVEL_GET) {
		q->t_ns = mono_ns(); /* its wait for a turn starts */
		push(&sh->gets, q);
	} else if (q->op != LEVEL_PUT) {
		level_done(lv, q, PROTO_E_NO_TIER); /* not reached: the ingest lcore sends none */
	} else if (sh->wputs.n >= SH_PUT_BACKLOG) {
		sh->put_shed++;
		level_done(lv, q, PROTO_E_SHARED_FAILED);
	} else if (sh->orgs.behind) {
		sh->orgs.behind_refused++; /* nothing sealed under keys perhaps retired */
		level_done(lv, q, PROTO_E_SHARED_FAILED);
	} else if (make_put(lv, q)) {
		push(&sh->wputs, q);
	}
}

/*
 * The organization key store, read again once its file is replaced (a
 * reset retired a key: kvss-shared wrote a new one), looked at once per
 * generation interval, as the driver looks at the generations: within one
 * interval of a reset this replica neither seals under nor opens the key
 * retired. One refused keeps the keys held for reading, and the level
 * writes nothing until it reads a store (level_orgs_look): what it sealed
 * under a retired key would be refused by the replicas that read the new
 * store, never served, but it would be a copy of data under a key the
 * operator takes for gone.
 */
static void
orgs_look(struct shard_level *lv)
{
	struct sh *sh = lv->be;
	struct seal_orgs *old;

	if (level_orgs_look(&sh->orgs, kvss.cfg.shared.generation_ms, lv->shard->cfg->id,
			    "the shared level", "writes nothing", &old)) {
		sh->ring->orgs = sh->orgs.cur;
		seal_orgs_free(old);
	}
}

static bool
poll_shared(struct shard_level *lv, bool idle)
{
	struct sh *sh = lv->be;

	orgs_look(lv);
	drain_fifo(lv, &sh->gets, sh->depth);
	drain_fifo(lv, &sh->wputs, sh->put_limit);
	if (shared_inflight(sh->s) == 0)
		return false;
	reap(lv, idle ? 1 : 0);
	return true;
}

static void
give_back(struct shard_level *lv, struct fifo *f)
{
	while (f->n > 0) {
		level_done(lv, f->q[f->head], PROTO_E_SHARED_FAILED);
		f->head = (f->head + 1) % SH_QUEUE;
		f->n--;
	}
}

static void
drain(struct shard_level *lv)
{
	struct sh *sh = lv->be;

	give_back(lv, &sh->gets);
	give_back(lv, &sh->wputs);
	while (shared_inflight(sh->s) > 0)
		reap(lv, 100);
}

static void
close_shared(struct shard_level *lv)
{
	struct sh *sh = lv->be;

	if (sh != NULL) {
		shared_close(sh->s);
		level_keys_free(sh->ring);
		level_orgs_free(&sh->orgs);
	}
	free(sh);
	lv->be = NULL;
}

static int
open_shared(struct shard_level *lv, char *err, size_t errlen)
{
	const struct kvss_shared_cfg *c = &kvss.cfg.shared;
	struct shared_params p = {.conf = c->conf, .pool = c->pool, .client = c->client,
				  .op_timeout_ms = c->op_timeout_ms, .max_inflight = c->depth};
	struct sh *sh = calloc(1, sizeof(*sh));
	char why[256];

	if (sh == NULL) {
		snprintf(err, errlen, "shared: no memory for the shared level");
		return -1;
	}
	lv->be = sh;
	/* Every cluster operation is bounded by the op timeout: a level that
	 * says nothing for that long is past it (level.h, silent_ms). */
	lv->silent_ms = c->op_timeout_ms;
	/* The keys before the cluster: a bad key file stops the shard at once,
	 * with no cluster waited for on a configuration that cannot run. */
	if (level_keys_load("shared", c->key_file, c->old_key_file, &sh->ring, err, errlen) != 0) {
		close_shared(lv);
		return -1;
	}
	if (level_orgs_load(&sh->orgs, "shared.org_key_file", c->org_key_file, err, errlen) != 0) {
		close_shared(lv);
		return -1;
	}
	if (sh->ring != NULL)
		sh->ring->orgs = sh->orgs.cur;
	sh->s = shared_open(&p, why, sizeof(why));
	if (sh->s == NULL) {
		snprintf(err, errlen, "shared.conf %s: %s", c->conf, why);
		close_shared(lv);
		return -1;
	}
	sh->depth = c->depth;
	sh->put_limit = c->depth > 1 ? c->depth - (c->depth + 3) / 4 : 1;
	if (sh->ring == NULL)
		printf("kvss: shard %u: the shared level's slices are written and read in plain "
		       "(no shared.key_file): whoever reads the pool reads the KV bytes, whoever "
		       "writes it can make them\n", lv->shard->cfg->id);
	else if (sh->ring->old.loaded)
		printf("kvss: shard %u: the shared level's slices are sealed (AES-256-GCM, key %08x; "
		       "key %08x still opened)\n", lv->shard->cfg->id, sh->ring->cur.id,
		       sh->ring->old.id);
	else
		printf("kvss: shard %u: the shared level's slices are sealed (AES-256-GCM, key %08x)\n",
		       lv->shard->cfg->id, sh->ring->cur.id);
	if (sh->ring != NULL && sh->ring->orgs != NULL)
		printf("kvss: shard %u: each organization's slices under its own key from %s (%u "
		       "named, default key %08x): a reset that replaces it makes them unreadable\n",
		       lv->shard->cfg->id, c->org_key_file, seal_orgs_count(sh->ring->orgs),
		       seal_orgs_default(sh->ring->orgs)->id);
	else if (sh->ring != NULL)
		printf("kvss: shard %u: no shared.org_key_file: a reset does not retire keys (the "
		       "master key opens every slice sealed before it)\n", lv->shard->cfg->id);
	return 0;
}


/* The refusals by reason, thirteen of the level's own, ten of lib/shared's. */
_Static_assert(SHARED_BAD_COUNT - 1 + 23 <= LEVEL_COUNTERS_MAX, "the shared level's counters fit");

static unsigned int
counters(const struct shard_level *lv, struct level_counter *c)
{
	static const struct sh none;
	const struct sh *sh = lv != NULL ? lv->be : &none;
	struct shared_stats ls;
	unsigned int n = 0, r;

	memset(&ls, 0, sizeof(ls));
	if (sh->s != NULL)
		shared_stats_get(sh->s, &ls);
	for (r = 1; r < SHARED_BAD_COUNT; r++)
		c[n++] = (struct level_counter){"bad_", shared_bad_name((enum shared_bad)r),
						__atomic_load_n(&sh->bad[r], __ATOMIC_RELAXED), true};
	c[n++] = (struct level_counter){"", "failed", sh->failed, false};
	c[n++] = (struct level_counter){"", "missing", sh->missing, false};
	c[n++] = (struct level_counter){"", "exists", sh->exists, false};
	c[n++] = (struct level_counter){"", "shed", sh->put_shed, false};
	c[n++] = (struct level_counter){"", "replaced", sh->replaced, false};
	c[n++] = (struct level_counter){"", "kept_unknown_key", sh->kept_unknown_key, false};
	c[n++] = (struct level_counter){"", "sealed", sh->sealed, false};
	c[n++] = (struct level_counter){"", "opened", sh->opened, false};
	c[n++] = (struct level_counter){"", "org_keys_reloaded", sh->orgs.reloaded, false};
	c[n++] = (struct level_counter){"", "org_keys_refused", sh->orgs.refused, false};
	c[n++] = (struct level_counter){"", "org_keys_behind_refused", sh->orgs.behind_refused, false};
	c[n++] = (struct level_counter){"", "timeouts", ls.timeouts, false};
	c[n++] = (struct level_counter){"", "busy", ls.busy, false};
	/* lib/shared's own count of what it asked the cluster and how each
	 * ended (its names_skipped is of listing, which a shard never does). */
	c[n++] = (struct level_counter){"", "cluster_puts", ls.submitted[SHARED_OP_PUT], false};
	c[n++] = (struct level_counter){"", "cluster_puts_ok", ls.ok[SHARED_OP_PUT], false};
	c[n++] = (struct level_counter){"", "cluster_gets", ls.submitted[SHARED_OP_GET], false};
	c[n++] = (struct level_counter){"", "cluster_gets_ok", ls.ok[SHARED_OP_GET], false};
	c[n++] = (struct level_counter){"", "cluster_dels", ls.submitted[SHARED_OP_DEL], false};
	c[n++] = (struct level_counter){"", "cluster_dels_ok", ls.ok[SHARED_OP_DEL], false};
	c[n++] = (struct level_counter){"", "cluster_exists", ls.exists, false};
	c[n++] = (struct level_counter){"", "cluster_missing", ls.missing, false};
	c[n++] = (struct level_counter){"", "cluster_too_big", ls.too_big, false};
	c[n++] = (struct level_counter){"", "cluster_other_errors", ls.other_errors, false};
	return n;
}

const struct shard_level_ops level_shared_ops = {
	.thread = "kvss-shared",
	.prefix = "shared_",
	.timeout_key = "shared.op_timeout_ms",
	.open = open_shared,
	.start = start,
	.poll = poll_shared,
	.drain = drain,
	.close = close_shared,
	.counters = counters,
};
