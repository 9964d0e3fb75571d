/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * lib/prefixcache's sink in the driver (driver_priv.h): every call the library makes
 * becomes records for the shards of its model, queued on their control
 * streams; evicted batches and refills also go to the wafer emulator, which
 * sends the bytes and checks what comes back. In open loop (recording) each
 * REFILL also writes what every shard must send back, for the capture's
 * checker (test/replay_check.c).
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "driver_priv.h"
#include "emulator/emulator.h"

void
drv_hdr_for(struct proto_hdr *h, const struct drv_shard *sh, uint32_t epoch, uint8_t type)
{
	memset(h, 0, sizeof(*h));
	h->version = PROTO_VERSION;
	h->type = type;
	h->model_id = sh->model;
	h->shard_id = sh->ref->id;
	h->epoch = epoch;
}

/* The message of shard @p sh records of @p type go into, with room for @p need bytes. */
static struct proto_builder *
open_for(struct drv_sink *s, struct drv_shard *sh, uint8_t type, uint32_t need)
{
	struct proto_builder *b;
	struct proto_hdr h;

	if (PROTO_HDR_LEN + need > s->payload_cap) {
		s->st->too_big++;
		return NULL;
	}
	drv_hdr_for(&h, sh, s->model_epoch[sh->model], type);
	b = drv_ctlq_open(&sh->q, &h, need, s->payload_cap);
	if (b == NULL)
		s->failed = true;
	return b;
}

static struct drv_shard *
shard_of(struct drv_sink *s, uint16_t model, uint16_t i)
{
	return &s->sh[s->first_shard[model] + i];
}

static void
on_reserve(void *arg, uint16_t model, const struct proto_reserve *r)
{
	struct drv_sink *s = arg;
	uint16_t i;

	for (i = 0; i < s->nshards[model]; i++) {
		struct proto_builder *b = open_for(s, shard_of(s, model, i), PROTO_T_RESERVE,
						   PROTO_RESERVE_LEN);

		if (b != NULL)
			proto_build_reserve(b, r);
	}
}

static void
on_evict(void *arg, uint16_t model, uint64_t batch_no, uint16_t nc, uint16_t g,
	 const struct proto_evict_entry *e)
{
	struct drv_sink *s = arg;
	struct proto_evict_hdr eh = {batch_no, nc, g, 0};
	uint32_t t;
	uint16_t i;

	if (emu_evict(s->emu, model, batch_no, nc, g, e) != 0)
		s->failed = true;
	for (i = 0; i < s->nshards[model]; i++) {
		struct drv_shard *sh = shard_of(s, model, i);
		struct proto_builder b;
		struct proto_hdr h;

		/* An EVICT is a message of its own, after what was open. */
		if (drv_ctlq_close(&sh->q) != 0)
			s->failed = true;
		drv_hdr_for(&h, sh, s->model_epoch[model], PROTO_T_EVICT);
		proto_build_begin(&b, s->scratch, s->payload_cap, &h);
		proto_build_evict_hdr(&b, &eh);
		for (t = 0; t < (uint32_t)g * nc; t++)
			if (proto_build_evict_entry(&b, &e[t]) != 0) {
				s->st->too_big++;
				break;
			}
		if (drv_ctlq_push(&sh->q, s->scratch, proto_build_end(&b), batch_no) != 0)
			s->failed = true;
	}
}

/* Open loop: what each shard of @p model must send back for this refill. */
static void
record_refill(struct drv_sink *s, uint16_t model, const struct proto_refill_req *rq,
	      const struct proto_refill_chunk *ch)
{
	uint32_t ntok = 0, nh = 0, j;
	const uint64_t *h = emu_seq_hashes(s->emu, rq->sequence_id, &nh);
	uint16_t i, k;

	if (h == NULL)
		return;
	for (k = 0; k < rq->num_chunks; k++)
		ntok += ch[k].num_tokens;
	for (i = 0; i < s->nshards[model]; i++) {
		const struct kvss_shard_ref *ref = shard_of(s, model, i)->ref;

		fprintf(s->expect, "refill %" PRIu64 " model %u shard %u cache %u bytes %u buffers %u "
			"tokens %u", rq->refill_id, model, ref->id, rq->cache_id,
			ref->bytes_per_token[rq->cache_id], ref->buffers[rq->cache_id], ntok);
		for (k = 0; k < rq->num_chunks; k++)
			for (j = 0; j < ch[k].num_tokens; j++) {
				uint32_t idx = ch[k].start_token_idx + j;

				fprintf(s->expect, " %" PRIx64, idx < nh ? h[idx] : 0);
			}
		fprintf(s->expect, "\n");
	}
}

static void
on_refill(void *arg, uint16_t model, const struct proto_refill_req *rq,
	  const struct proto_refill_chunk *ch)
{
	struct drv_sink *s = arg;
	uint16_t i, k;

	for (i = 0; i < s->nshards[model]; i++) {
		struct proto_builder *b =
			open_for(s, shard_of(s, model, i), PROTO_T_REFILL,
				 PROTO_REFILL_REQ_LEN + (uint32_t)rq->num_chunks * PROTO_REFILL_CHUNK_LEN);

		if (b == NULL)
			continue;
		proto_build_refill_req(b, rq);
		for (k = 0; k < rq->num_chunks; k++)
			proto_build_refill_chunk(b, &ch[k]);
	}
	if (s->expect != NULL)
		record_refill(s, model, rq, ch);
	/* The requester (the sequence the REFILL names) has it from its lookup's return. */
}

static void
on_delete(void *arg, uint16_t model, struct prefixcache_shards to, const struct proto_delete *d)
{
	struct drv_sink *s = arg;
	uint16_t i;

	for (i = 0; i < s->nshards[model]; i++) {
		struct proto_builder *b;

		if ((to.only >= 0 && i != to.only) || i == to.except)
			continue;
		b = open_for(s, shard_of(s, model, i), PROTO_T_DELETE, PROTO_DELETE_LEN);
		if (b != NULL) {
			proto_build_delete(b, d);
			s->st->deletes++;
		}
	}
}

/* ---- The second tier (PROTOCOL.md section 9) ---- */

static void
l2col_of(const struct drv_sink *s, struct proto_l2col *o, const struct prefixcache_l2col *c)
{
	*o = (struct proto_l2col){.key = c->key, .parent = c->parent, .isolation_id = c->isolation_id,
				  .prompt_id = c->prompt_id, .evict_count = c->evict_count,
				  /* on disk, first use is wall-clock time: it outlives this run */
				  .first_use_ns = s->wall_base_ns + c->first_use_ns,
				  .start_token_idx = c->start, .num_tokens = c->tokens,
				  .cache_id = c->cache_id};
}

/*
 * Columns sent down and not yet written by every shard (in every cache):
 * the library serves them only once all have said so (l2_confirm).
 */
#define L2W_BUCKETS 65536u

struct drv_l2wait {
	struct drv_l2wait *next;
	uint64_t key, iso;
	uint16_t model;
	uint32_t left; /* L2_DONEs still to come */
};

static uint32_t
l2w_bucket(uint16_t model, uint64_t iso, uint64_t key)
{
	uint64_t h = (key ^ iso * 0x9E3779B97F4A7C15ull ^ model) * 0xBF58476D1CE4E5B9ull;

	return (uint32_t)(h >> 40) % L2W_BUCKETS;
}

static struct drv_l2wait **
l2w_find(struct drv_sink *s, uint16_t model, uint64_t iso, uint64_t key)
{
	struct drv_l2wait **p;

	if (s->l2w == NULL)
		return NULL;
	for (p = &s->l2w[l2w_bucket(model, iso, key)]; *p != NULL; p = &(*p)->next)
		if ((*p)->key == key && (*p)->iso == iso && (*p)->model == model)
			return p;
	return NULL;
}

static void
l2w_expect(struct drv_sink *s, uint16_t model, uint64_t iso, uint64_t key, uint32_t n)
{
	struct drv_l2wait **p, *w;

	if (s->l2w == NULL && (s->l2w = calloc(L2W_BUCKETS, sizeof(*s->l2w))) == NULL) {
		s->failed = true;
		return;
	}
	p = l2w_find(s, model, iso, key);
	if (p != NULL) {
		(*p)->left += n; /* sent down again before the first was written */
		return;
	}
	w = malloc(sizeof(*w));
	if (w == NULL) {
		s->failed = true;
		return;
	}
	*w = (struct drv_l2wait){s->l2w[l2w_bucket(model, iso, key)], key, iso, model, n};
	s->l2w[l2w_bucket(model, iso, key)] = w;
}

int
drv_sink_l2_written(struct drv_sink *s, uint16_t model, uint64_t iso, uint64_t key)
{
	struct drv_l2wait **p = l2w_find(s, model, iso, key), *w;

	if (p == NULL)
		return -1;
	if (--(*p)->left > 0)
		return 0;
	w = *p;
	*p = w->next;
	free(w);
	return 1;
}

void
drv_sink_l2_drop(struct drv_sink *s, uint16_t model, uint64_t iso, uint64_t key)
{
	struct drv_l2wait **p = l2w_find(s, model, iso, key), *w;

	if (p != NULL) {
		w = *p;
		*p = w->next;
		free(w);
	}
}

void
drv_sink_l2_clear(struct drv_sink *s, int model)
{
	uint32_t b;

	for (b = 0; s->l2w != NULL && b < L2W_BUCKETS; b++) {
		struct drv_l2wait **p = &s->l2w[b];

		while (*p != NULL) {
			struct drv_l2wait *w = *p;

			if (model < 0 || w->model == model) {
				*p = w->next;
				free(w);
			} else {
				p = &w->next;
			}
		}
	}
	if (model < 0) {
		free(s->l2w);
		s->l2w = NULL;
	}
}

static void
on_l2_down(void *arg, uint16_t model, const struct prefixcache_l2col *c)
{
	struct drv_sink *s = arg;
	struct proto_l2col o;
	uint16_t i;

	l2w_expect(s, model, c->isolation_id, c->key, s->nshards[model]);

	l2col_of(s, &o, c);
	for (i = 0; i < s->nshards[model]; i++) {
		struct proto_builder *b = open_for(s, shard_of(s, model, i), PROTO_T_L2_DOWN,
						   PROTO_L2COL_LEN);

		if (b != NULL)
			proto_build_l2_down(b, &o);
	}
	s->st->l2_down_cols++;
	/* The shared level takes it too (its rule, shared.c): every shard writes
	 * its slice from DRAM, in the same turn of the refill queue. */
	if (s->shl != NULL && s->shl->down(s->sh_drv, model, c, &o))
		for (i = 0; i < s->nshards[model]; i++) {
			struct proto_builder *b = open_for(s, shard_of(s, model, i), PROTO_T_SH_DOWN,
							   PROTO_SHCOL_LEN);

			if (b != NULL)
				proto_build_l2_down(b, &o);
		}
}

/* A column recorded whole: the shared level's rule may send it down later (shared.c queues it). */
static void
on_whole_column(void *arg, uint16_t model, const struct prefixcache_l2col *c)
{
	struct drv_sink *s = arg;

	if (s->shl != NULL)
		s->shl->whole(s->sh_drv, model, c);
}

void
drv_sink_sh_down(struct drv_sink *s, uint16_t model, const struct proto_l2col *o)
{
	uint16_t i;

	for (i = 0; i < s->nshards[model]; i++) {
		struct proto_builder *b = open_for(s, shard_of(s, model, i), PROTO_T_SH_DOWN,
						   PROTO_SHCOL_LEN);

		if (b != NULL)
			proto_build_l2_down(b, o);
	}
}

static void
on_l2_up(void *arg, uint16_t model, uint64_t batch_no, uint16_t nc, uint16_t g,
	 const struct proto_evict_entry *e, const struct prefixcache_l2col *cols, uint32_t ncols)
{
	struct drv_sink *s = arg;
	struct proto_evict_hdr eh = {batch_no, nc, g, (uint16_t)ncols};
	uint8_t type = PROTO_T_L2_UP;
	uint32_t t, k;
	uint16_t i;

	/* A column staged from the shared level makes it an SH_UP (section 10),
	 * whose columns from the disk have object id 0. */
	for (k = 0; k < ncols; k++)
		if (cols[k].shared)
			type = PROTO_T_SH_UP;
	/* A batch of the library's that names no column goes as an SH_UP where
	 * the shared level is: a shard without a second tier refuses an L2_UP
	 * whole (NO_TIER), whatever it carries. Such a batch comes when DRAM
	 * had no room while columns came up (pc_l2_promote): caching stopped,
	 * the rest of the batch's entries are padding (prompt 0), and the
	 * batch still goes, numbered, since the shards count batches in turn.
	 * Only where every shard reaches the level (STATUS bit 2): one without
	 * it refuses an SH_UP whole as well. */
	if (ncols == 0 && s->shl != NULL && s->shl->on(s->sh_drv, model))
		type = PROTO_T_SH_UP;
	for (i = 0; i < s->nshards[model]; i++) {
		struct drv_shard *sh = shard_of(s, model, i);
		struct proto_builder b;
		struct proto_hdr h;
		int rc = 0;

		/* A batch of its own, after what was open; no EVICT_DATA follows it. */
		if (drv_ctlq_close(&sh->q) != 0)
			s->failed = true;
		drv_hdr_for(&h, sh, s->model_epoch[model], type);
		proto_build_begin(&b, s->scratch, s->payload_cap, &h);
		proto_build_l2_up_hdr(&b, &eh);
		for (t = 0; t < (uint32_t)g * nc && rc == 0; t++)
			rc = proto_build_l2_up_entry(&b, &e[t]);
		for (k = 0; k < ncols && rc == 0; k++) {
			struct proto_l2col o;

			l2col_of(s, &o, &cols[k]);
			/* Not nameable (a new generation since it was staged): its
			 * object id stays 0 and the shard has no such column on disk,
			 * so the batch loses it, as any column that does not come up. */
			if (cols[k].shared && s->shl != NULL)
				s->shl->name(s->sh_drv, model, &cols[k], &o);
			rc = proto_build_l2_up_col(&b, &o);
		}
		if (rc != 0) {
			s->st->too_big++;
			continue;
		}
		if (drv_ctlq_push(&sh->q, s->scratch, proto_build_end(&b), batch_no) != 0)
			s->failed = true;
	}
	s->st->l2_up_batches++;
	if (type == PROTO_T_SH_UP)
		s->st->shared_up_batches++;
}

static void
on_l2_del(void *arg, uint16_t model, uint16_t cache_id, uint64_t key, uint64_t iso, uint64_t ec)
{
	struct drv_sink *s = arg;
	struct proto_l2del d = {key, iso, ec, cache_id};
	uint16_t i;

	for (i = 0; i < s->nshards[model]; i++) {
		struct proto_builder *b = open_for(s, shard_of(s, model, i), PROTO_T_L2_DELETE,
						   PROTO_L2DEL_LEN);

		if (b != NULL)
			proto_build_l2_delete(b, &d);
	}
	s->st->l2_del_cols++;
}

void
drv_sink_l2_delete_one(struct drv_sink *s, struct drv_shard *sh, const struct proto_l2del *d)
{
	struct proto_builder *b = open_for(s, sh, PROTO_T_L2_DELETE, PROTO_L2DEL_LEN);

	if (b != NULL)
		proto_build_l2_delete(b, d);
}

void
drv_sink_ops(struct drv_sink *s, struct prefixcache_sink *out)
{
	memset(out, 0, sizeof(*out));
	out->arg = s;
	out->reserve = on_reserve;
	out->evict = on_evict;
	out->refill = on_refill;
	out->del = on_delete;
	out->l2_down = on_l2_down;
	out->l2_up = on_l2_up;
	out->l2_del = on_l2_del;
	out->whole_column = on_whole_column;
}
