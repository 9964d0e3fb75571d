/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The driver's side of the shards' second tiers (driver_priv.h; PROTOCOL.md
 * section 9). The library decides what goes down, comes up and goes
 * (lib/prefixcache/pc_l2.c; sink.c makes the messages); here:
 *
 *   - a shard's STATUS says whether it has a second tier: a model whose
 *     configuration gives l2_tokens needs every shard to have one;
 *   - L2_INVENTORY: after each HELLO a shard lists what its L2 holds (kept
 *     across restarts, even kill -9). Once every shard of a model has
 *     listed all of it, the columns every shard holds in every cache are
 *     taken back (prefixcache_l2_adopt, in token order, parents first);
 *     the rest (on some shards only, parent gone, first use past its TTL,
 *     no room) each shard that holds them is told to let go;
 *   - L2_DONE: a column that did not go down is forgotten, and the shards
 *     that wrote it let it go (DRAM untouched); one that did not come up
 *     lost its tokens: the model starts over, as for any loss, and the
 *     inventories say again what is there. One a shard's disk let go on
 *     its own (op L2_GONE: its organization's key retired) is forgotten.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "driver_priv.h"
#include "kvss.h"

bool
drv_l2_model(uint16_t m)
{
	return kvss.cfg.driver.pc.model[m].l2_capacity_tokens > 0;
}

/* Every shard of model @p m has listed its whole inventory (or the model has no L2). */
bool
drv_l2_ready(struct drv *d, uint16_t m)
{
	uint16_t i;

	if (!drv_l2_model(m) || d->open_loop)
		return true;
	for (i = 0; i < d->nshards[m]; i++)
		if (!d->sh[d->first_shard[m] + i].inv_done)
			return false;
	return true;
}

void
drv_l2_status(struct drv *d, struct drv_shard *sh, const struct proto_msg *msg)
{
	bool has = (msg->u.status.flags & PROTO_STATUS_F_L2) != 0;

	if (drv_l2_model(sh->model) && !has) {
		fprintf(stderr, "kvss: driver: shard %u of model %u has no second tier (its shard.l2), "
				"but %s gives it driver.models.[%u].shards l2_tokens\n",
			sh->ref->id, sh->model, kvss.cfg.path, sh->model);
		d->fatal = 2;
	}
	sh->has_l2 = has;
	sh->has_shared = (msg->u.status.flags & PROTO_STATUS_F_SHARED) != 0;
	if (kvss.cfg.shared.conf[0] != '\0' && !sh->has_shared && !sh->no_shared_said) {
		sh->no_shared_said = true;
		fprintf(stderr, "kvss: driver: shard %u of model %u does not reach the shared level "
				"(its STATUS): the model neither looks up nor writes there while it "
				"does not\n", sh->ref->id, sh->model);
	}
}

/* A new HELLO's answer is coming: the shard's inventory is listed again. */
void
drv_l2_forget_inventory(struct drv_shard *sh)
{
	sh->inv_done = false;
	sh->inv_n = 0;
	sh->inv_total = 0;
	sh->inv_gone_n = 0;
}

static int
gone_cmp(const void *a, const void *b)
{
	const struct drv_gone *x = a, *y = b;

	if (x->iso != y->iso)
		return x->iso < y->iso ? -1 : 1;
	if (x->key != y->key)
		return x->key < y->key ? -1 : 1;
	return x->cache < y->cache ? -1 : x->cache > y->cache;
}

/* Did shard @p sh let column @p c go while its inventory waited (its inv_gone sorted)? */
static bool
gone_since_listed(const struct drv_shard *sh, const struct proto_l2col *c)
{
	struct drv_gone g = {c->isolation_id, c->key, c->cache_id};

	return sh->inv_gone_n > 0 &&
	       bsearch(&g, sh->inv_gone, sh->inv_gone_n, sizeof(g), gone_cmp) != NULL;
}

/* Order: organization, key, then shard and cache (a column's copies side by side). */
struct inv_rec {
	struct proto_l2col c;
	uint16_t shard; /* index within the model */
};

static int
by_key(const void *a, const void *b)
{
	const struct inv_rec *x = a, *y = b;

	if (x->c.isolation_id != y->c.isolation_id)
		return x->c.isolation_id < y->c.isolation_id ? -1 : 1;
	if (x->c.key != y->c.key)
		return x->c.key < y->c.key ? -1 : 1;
	if (x->shard != y->shard)
		return x->shard < y->shard ? -1 : 1;
	return x->c.cache_id < y->c.cache_id ? -1 : x->c.cache_id > y->c.cache_id;
}

static int
by_start(const void *a, const void *b)
{
	const struct inv_rec *x = *(struct inv_rec *const *)a, *y = *(struct inv_rec *const *)b;

	return x->c.start_token_idx < y->c.start_token_idx ? -1 : x->c.start_token_idx > y->c.start_token_idx;
}

/* Each shard of the group [g, g + n) that holds it lets it go. */
static void
refuse(struct drv *d, struct inv_rec *r, size_t n, uint16_t m)
{
	size_t k;

	for (k = 0; k < n; k++) {
		struct proto_l2del del = {r[k].c.key, r[k].c.isolation_id, 0, r[k].c.cache_id};

		drv_sink_l2_delete_one(&d->sink, &d->sh[d->first_shard[m] + r[k].shard], &del);
		d->st.l2_del_cols++;
	}
	d->st.l2_refused_cols++;
}

/* Model @p m's inventories, taken back: their lists go. */
static void
inv_free(struct drv *d, uint16_t m)
{
	uint16_t i;

	for (i = 0; i < d->nshards[m]; i++) {
		struct drv_shard *sh = &d->sh[d->first_shard[m] + i];

		free(sh->inv);
		sh->inv = NULL;
		sh->inv_n = sh->inv_cap = 0;
		free(sh->inv_gone);
		sh->inv_gone = NULL;
		sh->inv_gone_n = sh->inv_gone_cap = 0;
	}
}

/* Every shard of model @p m has listed its L2: take back what all hold. */
static void
adopt(struct drv *d, uint16_t m, uint64_t tsc)
{
	const struct prefixcache_model *pm = &kvss.cfg.driver.pc.model[m];
	uint16_t ns = d->nshards[m], nc = pm->num_caches, i;
	size_t total = 0, n = 0, a = 0, g, k;
	struct inv_rec *r, **heads;
	uint64_t now_wall = drv_wall_ns(), now = drv_now_ns(d, tsc);

	for (i = 0; i < ns; i++)
		total += d->sh[d->first_shard[m] + i].inv_n;
	if (total == 0) {
		inv_free(d, m);
		return;
	}
	r = malloc(sizeof(*r) * total);
	heads = malloc(sizeof(*heads) * total);
	if (r == NULL || heads == NULL) {
		free(r);
		free(heads);
		d->fatal = 1;
		return;
	}
	for (i = 0; i < ns; i++) {
		struct drv_shard *sh = &d->sh[d->first_shard[m] + i];

		if (sh->inv_gone_n > 1)
			qsort(sh->inv_gone, sh->inv_gone_n, sizeof(*sh->inv_gone), gone_cmp);
		for (k = 0; k < sh->inv_n; k++)
			if (sh->inv[k].key != 0 && !gone_since_listed(sh, &sh->inv[k]))
				r[n++] = (struct inv_rec){sh->inv[k], i};
	}
	qsort(r, n, sizeof(*r), by_key);
	/* A column is whole when every shard lists it in every cache, alike. */
	for (g = 0; g < n; g = k) {
		bool ok = true;

		for (k = g + 1; k < n && r[k].c.key == r[g].c.key &&
				r[k].c.isolation_id == r[g].c.isolation_id; k++)
			if (r[k].c.start_token_idx != r[g].c.start_token_idx ||
			    r[k].c.num_tokens != r[g].c.num_tokens || r[k].c.parent != r[g].c.parent ||
			    (r[k].shard == r[k - 1].shard && r[k].c.cache_id == r[k - 1].c.cache_id))
				ok = false;
		if (!ok || k - g != (size_t)ns * nc ||
		    drv_expired_wall(r[g].c.isolation_id, r[g].c.first_use_ns, now_wall))
			refuse(d, &r[g], k - g, m);
		else
			heads[a++] = &r[g];
	}
	/* Parents first: a column is taken only after the one before it. */
	qsort(heads, a, sizeof(*heads), by_start);
	for (k = 0; k < a; k++) {
		struct inv_rec *h = heads[k];
		struct prefixcache_l2col c = {
			.key = h->c.key, .parent = h->c.parent, .isolation_id = h->c.isolation_id,
			.first_use_ns = h->c.first_use_ns > d->sink.wall_base_ns
						? h->c.first_use_ns - d->sink.wall_base_ns
						: 0,
			.start = h->c.start_token_idx, .tokens = h->c.num_tokens};
		int rc = prefixcache_l2_adopt(d->pc, m, &c, now);

		if (rc == 0) {
			d->st.l2_adopted_cols++;
		} else if (rc != -EEXIST) {
			size_t e = 0;

			while (&h[e] < r + n && h[e].c.key == h->c.key &&
			       h[e].c.isolation_id == h->c.isolation_id)
				e++;
			refuse(d, h, e, m);
		}
	}
	printf("kvss: driver: model %u: %" PRIu64 " columns taken back from the shards' second tiers, "
	       "%" PRIu64 " let go\n", m, d->st.l2_adopted_cols, d->st.l2_refused_cols);
	fflush(stdout);
	free(r);
	free(heads);
	inv_free(d, m);
}

void
drv_l2_adopt_ready(struct drv *d, uint64_t tsc)
{
	uint16_t m;

	for (m = 0; m < kvss.cfg.driver.pc.num_models; m++)
		if (drv_l2_model(m) && d->l2_pending[m] && drv_l2_ready(d, m)) {
			d->l2_pending[m] = false;
			adopt(d, m, tsc);
		}
}

void
drv_l2_inventory(struct drv *d, struct drv_shard *sh, const struct proto_msg *msg, uint64_t tsc)
{
	uint32_t total, first, i;

	if (!drv_l2_model(sh->model) || sh->inv_done)
		return;
	proto_get_l2_inventory_hdr(msg, &total, &first);
	if (first != sh->inv_n) {
		/* A frame lost or out of order: the list starts again with the next HELLO. */
		d->st.stale++;
		return;
	}
	if (sh->inv_n + msg->hdr.count > sh->inv_cap) {
		uint32_t cap = sh->inv_n + msg->hdr.count + 1024;
		struct proto_l2col *p = realloc(sh->inv, sizeof(*p) * cap);

		if (p == NULL) {
			d->fatal = 1;
			return;
		}
		sh->inv = p;
		sh->inv_cap = cap;
	}
	for (i = 0; i < msg->hdr.count; i++)
		proto_get_l2_inventory(msg, i, &sh->inv[sh->inv_n++]);
	d->st.l2_inventory_cols += msg->hdr.count;
	sh->inv_total = total;
	if (sh->inv_n >= total) {
		sh->inv_done = true;
		if (d->started)
			drv_l2_adopt_ready(d, tsc);
	}
}

/*
 * At most this many: an entry whose L2_DELETE found the column after all
 * (a read that failed on a column still there) is never taken, and without
 * a model restart to clear them they would pile up. Past it, the oldest go
 * (an UNKNOWN_PROMPT for one of them is then counted as an error).
 */
#define TOLERATE_MAX 4096

static void
tolerate_add(struct drv *d, uint16_t k, uint64_t key)
{
	if (d->ntolerate == TOLERATE_MAX) {
		memmove(d->tolerate, d->tolerate + TOLERATE_MAX / 4,
			sizeof(*d->tolerate) * (TOLERATE_MAX - TOLERATE_MAX / 4));
		d->ntolerate -= TOLERATE_MAX / 4;
		d->st.l2_tolerated_dropped += TOLERATE_MAX / 4;
	}
	if (d->ntolerate == d->tolerate_cap) {
		size_t cap = d->tolerate_cap ? 2 * d->tolerate_cap : 256;
		struct drv_tolerated *p = realloc(d->tolerate, sizeof(*p) * cap);

		if (p == NULL)
			return; /* the ERROR, if it comes, restarts the model: still exact */
		d->tolerate = p;
		d->tolerate_cap = cap;
	}
	d->tolerate[d->ntolerate++] = (struct drv_tolerated){k, key};
}

/*
 * Column @p key of @p iso in cache @p cache, let go by shard @p sh or
 * deleted from it on an L2_GONE, while its model's inventories wait to be
 * taken back: listed already or listed later, it is not taken back (the
 * driver would ask for what the shard let go) nor refused (a second
 * L2_DELETE would find nothing). Kept in a list adopt() sorts once (a scan
 * of the inventory for each record was quadratic: 100,000 records against
 * 100,000 columns held the driver 33 s). Past INV_GONE_MAX, or without
 * memory, the columns listed so far are scanned as before (key 0: skipped
 * by adopt()).
 */
#define INV_GONE_MAX (1u << 20)

static void
inv_keep_out(struct drv *d, struct drv_shard *sh, uint64_t iso, uint64_t key, uint16_t cache)
{
	uint32_t i;

	if (!d->l2_pending[sh->model])
		return; /* taken back: nothing to keep it out of */
	if (sh->inv_gone_n == sh->inv_gone_cap && sh->inv_gone_cap < INV_GONE_MAX) {
		uint32_t cap = sh->inv_gone_cap ? 2 * sh->inv_gone_cap : 256;
		struct drv_gone *g = realloc(sh->inv_gone, sizeof(*g) * cap);

		if (g != NULL) {
			sh->inv_gone = g;
			sh->inv_gone_cap = cap;
		}
	}
	if (sh->inv_gone_n < sh->inv_gone_cap) {
		sh->inv_gone[sh->inv_gone_n++] = (struct drv_gone){iso, key, cache};
		return;
	}
	for (i = 0; i < sh->inv_n; i++)
		if (sh->inv[i].key == key && sh->inv[i].isolation_id == iso &&
		    sh->inv[i].cache_id == cache)
			sh->inv[i].key = 0;
}

/*
 * Column @p key of @p iso, forgotten: every shard of model @p m lets it go,
 * in every cache (an L2_DELETE each), and while the inventories wait it
 * is kept out of each one's (adopt() would refuse it again: a second
 * delete, which finds nothing).
 */
static void
delete_everywhere(struct drv *d, uint16_t m, uint64_t iso, uint64_t key)
{
	uint16_t j, c;

	for (j = 0; j < d->nshards[m]; j++) {
		struct drv_shard *o = &d->sh[d->first_shard[m] + j];

		for (c = 0; c < kvss.cfg.driver.pc.model[m].num_caches; c++) {
			struct proto_l2del del = {key, iso, 0, c};

			drv_sink_l2_delete_one(&d->sink, o, &del);
			d->st.l2_del_cols++;
			inv_keep_out(d, o, iso, key, c);
		}
	}
}

bool
drv_l2_expected_unknown(struct drv *d, const struct drv_shard *sh, uint64_t key)
{
	size_t i;

	for (i = d->ntolerate; i-- > 0;)
		if (d->tolerate[i].k == sh->k && d->tolerate[i].key == key) {
			d->tolerate[i] = d->tolerate[--d->ntolerate];
			return true;
		}
	return false;
}

void
drv_l2_forget_tolerated(struct drv *d, uint16_t model)
{
	size_t i = 0;

	while (i < d->ntolerate)
		if (model == UINT16_MAX || d->sh[d->tolerate[i].k].model == model)
			d->tolerate[i] = d->tolerate[--d->ntolerate];
		else
			i++;
	if (model == UINT16_MAX) {
		free(d->tolerate);
		d->tolerate = NULL;
		d->ntolerate = d->tolerate_cap = 0;
	}
}

/*
 * A column that did not go down (no room, a write that failed): DRAM is not
 * touched (its DELETE frees it as planned), the driver forgets the column
 * and the shards that wrote it let it go. A column that did not come up (not
 * there, a checksum, a read that failed) lost its tokens: they come as
 * TOKEN_LOST, which takes the column and what hangs on it out of DRAM
 * (on_loss "exact"), and the rest of the model stays. The library let it go
 * from L2 when it asked for it (a column is in one tier at most); the
 * L2_DELETE it sent after the batch finds nothing where the shard dropped a
 * column that failed its checksum: expected. Every record of the frame is
 * taken.
 */
void
drv_l2_done(struct drv *d, struct drv_shard *sh, const struct proto_msg *msg)
{
	uint16_t i;

	for (i = 0; i < msg->hdr.count; i++) {
		struct proto_l2done done;

		proto_get_l2_done(msg, i, &done);
		if (done.op == PROTO_L2OP_SH_DOWN || done.op == PROTO_L2OP_SH_UP) {
			drv_sh_done(d, sh, &done); /* the shared level's (section 10) */
			continue;
		}
		if (done.op == PROTO_L2OP_L2_GONE) {
			/*
			 * Unasked: the shard's disk let the column go, its
			 * organization's key retired. Forgotten before it is
			 * asked for: a lookup misses it, no refill loses it.
			 * Every shard of the model is told to let its copies
			 * go: one under another store (not read the new one
			 * yet, or given another) still holds its copy, which
			 * nothing would delete and which would fill its disk;
			 * the one that said so may hold a copy written again
			 * since (the record says nothing of which). One that
			 * let its copy go answers the delete as done, as it
			 * does a delete the library sent before (section 9).
			 */
			d->st.l2_gone_recs++;
			drv_sink_l2_drop(&d->sink, sh->model, done.isolation_id, done.key);
			if (!prefixcache_l2_forget(d->pc, sh->model, done.isolation_id, done.key)) {
				/* Not held, or forgotten at another shard's word:
				 * kept out of this one's inventory all the same
				 * (delete_everywhere keeps it out of every one's). */
				inv_keep_out(d, sh, done.isolation_id, done.key, done.cache_id);
				continue;
			}
			d->st.l2_gone_cols++;
			delete_everywhere(d, sh->model, done.isolation_id, done.key);
			continue;
		}
		d->st.l2_done++;
		if (done.status == 0) {
			/* Written: once every shard has, in every cache, it is served. */
			if (done.op == PROTO_L2OP_L2_DOWN && drv_sink_l2_written(&d->sink, sh->model, done.isolation_id, done.key) == 1)
				prefixcache_l2_confirm(d->pc, sh->model, done.isolation_id, done.key);
			continue;
		}
		d->st.l2_failed++;
		if (d->st.l2_failed <= 5)
			fprintf(stderr, "kvss: driver: shard %u: second tier: %s of column %016" PRIx64
					" (cache %u) failed: %s\n", sh->ref->id,
				done.op == PROTO_L2OP_L2_DOWN ? "L2_DOWN" : "L2_UP", done.key, done.cache_id,
				proto_err_name(done.status) ? proto_err_name(done.status) : "?");
		if (done.op != PROTO_L2OP_L2_DOWN) {
			d->st.l2_up_failed_cols++;
			tolerate_add(d, sh->k, done.key);
			continue;
		}
		/*
		 * An L2_DELETE of it the library sent before it knew (room made,
		 * a newer copy) finds nothing here: expected, as is the one sent
		 * below. Either may find a newer copy written meanwhile instead,
		 * and delete it, which the library forgets too: the tiers agree.
		 */
		tolerate_add(d, sh->k, done.key);
		drv_sink_l2_drop(&d->sink, sh->model, done.isolation_id, done.key);
		if (!prefixcache_l2_forget(d->pc, sh->model, done.isolation_id, done.key))
			continue; /* forgotten at another shard's (or cache's) failure */
		tolerate_add(d, sh->k, done.key);
		d->st.l2_down_failed_cols++;
		delete_everywhere(d, sh->model, done.isolation_id, done.key);
	}
}
