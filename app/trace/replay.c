/* SPDX-License-Identifier: BSD-3-Clause */
#include "replay.h"
#include "kvdisk.h"
#include "wafer.h"
#include "workload.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "replay_priv.h"

static uint32_t
bucket_of(const struct replay *r, uint64_t id)
{
	return (uint32_t)((id * 0x9E3779B97F4A7C15ULL) >> 40) % r->nbucket;
}

static struct replay_seq *
seq_of(struct replay *r, uint64_t prompt_id)
{
	struct replay_seq *s;

	for (s = r->bucket[bucket_of(r, prompt_id)]; s != NULL; s = s->hnext)
		if (s->prompt_id == prompt_id)
			return s;
	return NULL;
}

static uint8_t *
scratch(struct replay *r, size_t n)
{
	if (n > r->bufcap) {
		free(r->buf);
		r->buf = malloc(n);
		r->bufcap = r->buf ? n : 0;
	}
	return r->buf;
}

/* ---- The emulated shards ---------------------------------------------------- */

static void
on_evict(void *arg, uint16_t model, uint64_t batch_no, uint16_t nc, uint16_t g,
	 const struct proto_evict_entry *e)
{
	struct replay *r = arg;
	struct kvstore *kv = r->kv[model];
	uint16_t codes[PROTO_PAYLOAD_MAX / 16];
	uint32_t B = r->p.bytes_per_token, t, c;
	uint8_t *stream = scratch(r, (size_t)g * B);
	int rc;

	if (r->p.observe.evict != NULL)
		r->p.observe.evict(r->p.observe.arg, model, batch_no, nc, g, e);
	r->st.evict_batches++;
	rc = kvstore_evict(kv, batch_no, nc, g, e, codes, 0);
	if (rc != 0) {
		/* -ENOSPC here means the driver asked for more than capacity. */
		r->st.protocol_errors++;
		return;
	}
	for (t = 0; t < (uint32_t)g * nc; t++)
		if (codes[t] != 0)
			r->st.protocol_errors++;
	for (c = 0; c < nc; c++) {
		for (t = 0; t < g; t++) {
			const struct proto_evict_entry *en = &e[t * nc + c];
			const struct wafer_place at = {model, 0, (uint16_t)c, B};
			struct replay_seq *s = en->prompt_id ? seq_of(r, en->prompt_id) : NULL;

			if (s != NULL && en->token_idx < s->n)
				wafer_fill(&at, &s->h[en->token_idx], 0, stream + (size_t)t * B, B);
			else
				memset(stream + (size_t)t * B, 0, B);
		}
		if (kvstore_data(kv, batch_no, (uint16_t)c, 0, g * B, stream, g * B) != 0)
			r->st.protocol_errors++;
	}
	if (kvstore_batches_complete(kv) != batch_no)
		r->st.protocol_errors++;
	for (c = 0; c < nc; c++) {
		struct kvstore_cache_stats cs;

		kvstore_cache_stats(kv, (uint16_t)c, &cs);
		if (cs.stored_tokens > r->st.max_stored)
			r->st.max_stored = cs.stored_tokens;
	}
}

static void
on_delete(void *arg, uint16_t model, struct prefixcache_shards to, const struct proto_delete *d)
{
	struct replay *r = arg;

	if (r->p.observe.del != NULL)
		r->p.observe.del(r->p.observe.arg, model, to, d);
	/* Each model has one shard here, index 0. */
	if (to.only > 0 || to.except == 0)
		return;
	r->st.deletes++;
	if (d->evict_count > kvstore_batches_complete(r->kv[model]) ||
	    kvstore_delete(r->kv[model], d) != 0)
		r->st.protocol_errors++;
}

static void
on_reserve(void *arg, uint16_t model, const struct proto_reserve *rv)
{
	struct replay *r = arg;

	if (r->p.observe.reserve != NULL)
		r->p.observe.reserve(r->p.observe.arg, model, rv);
	kvstore_reserve(r->kv[model], rv);
}

static void
on_column(void *arg, uint16_t model, uint16_t cache_id, uint64_t iso, uint64_t prompt_id,
	  uint32_t a, uint32_t b)
{
	struct replay *r = arg;

	if (r->p.observe.column != NULL)
		r->p.observe.column(r->p.observe.arg, model, cache_id, iso, prompt_id, a, b);
}

/*
 * Check one refill against the requester's reference content, through the
 * wafer's own checker (lib/wafer) as kvss checks REFILL_DATA; then it is
 * done.
 */
static void
run_refill(struct replay *r, struct pending_refill *pr)
{
	struct kvstore *kv = r->kv[pr->model];
	const struct kvstore_params *kp = kvstore_params(kv);
	uint16_t c = pr->req.cache_id, code, nb = kp->cache[c].num_buffers, b;
	struct wafer_place at = {pr->model, 0, c, kp->cache[c].bytes_per_token};
	uint32_t tokens = 0, k, j, t = 0;
	struct kvstore_refill *rf;
	struct wafer_refill chk;
	uint64_t *glued;

	for (k = 0; k < pr->req.num_chunks; k++)
		tokens += pr->ch[k].num_tokens;
	rf = kvstore_refill_begin(kv, c, pr->ch, pr->req.num_chunks, &code);
	r->st.refills++;
	if (rf == NULL) {
		r->st.protocol_errors++;
		goto done;
	}
	/* Glued token t is token chunk.start + j of the requester's prefix. */
	glued = calloc(tokens ? tokens : 1, sizeof(*glued));
	for (k = 0; k < pr->req.num_chunks; k++)
		for (j = 0; j < pr->ch[k].num_tokens; j++, t++) {
			uint32_t idx = pr->ch[k].start_token_idx + j;

			if (idx < pr->nh)
				glued[t] = pr->h[idx];
			else
				r->st.verify_failures++;
		}
	if (glued == NULL || wafer_refill_init(&chk, &at, nb, pr->req.refill_id, glued, tokens) != 0) {
		r->st.verify_failures++;
		goto end;
	}
	for (b = 0; b < nb; b++) {
		struct kvstore_refill_pos pos;
		struct kvstore_seg seg[64];
		unsigned int n, i;

		memset(&pos, 0, sizeof(pos));
		while ((n = kvstore_refill_next(rf, b, &pos, 8916, seg, 64)) > 0)
			for (i = 0; i < n; i++)
				if (wafer_refill_bytes(&chk, b, chk.got[b], seg[i].addr, seg[i].len) != 0)
					r->st.verify_failures++;
	}
	if (!wafer_refill_whole(&chk))
		r->st.verify_failures++;
	r->st.refill_tokens += tokens;
end:
	free(glued);
	kvstore_refill_end(rf);
done:
	if (r->ndone == r->donecap) {
		r->donecap = r->donecap ? 2 * r->donecap : 64;
		r->done = realloc(r->done, sizeof(uint64_t) * r->donecap);
	}
	r->done[r->ndone++] = pr->req.refill_id;
}

static void
on_refill(void *arg, uint16_t model, const struct proto_refill_req *rq,
	  const struct proto_refill_chunk *ch)
{
	struct replay *r = arg;
	struct pending_refill *p;

	if (r->p.observe.refill != NULL)
		r->p.observe.refill(r->p.observe.arg, model, rq, ch);
	if (r->npend == r->pendcap) {
		r->pendcap = r->pendcap ? 2 * r->pendcap : 16;
		r->pend = realloc(r->pend, sizeof(*r->pend) * r->pendcap);
	}
	p = &r->pend[r->npend++];
	p->model = model;
	p->req = *rq;
	p->ch = malloc(sizeof(*ch) * (rq->num_chunks ? rq->num_chunks : 1));
	memcpy(p->ch, ch, sizeof(*ch) * rq->num_chunks);
	p->seq = r->cur;
	p->nh = r->cur ? r->cur->prompt_len : 0;
	p->h = malloc(sizeof(uint64_t) * (p->nh ? p->nh : 1));
	if (p->nh)
		memcpy(p->h, r->cur->h, sizeof(uint64_t) * p->nh);
}

/* Run refills whose batches are in; tell the driver they are done. */
static void
drain(struct replay *r)
{
	uint32_t i = 0;

	while (i < r->npend) {
		struct pending_refill *p = &r->pend[i];

		if (p->req.evict_count > kvstore_batches_complete(r->kv[p->model])) {
			i++;
			continue;
		}
		run_refill(r, p);
		free(p->ch);
		free(p->h);
		r->pend[i] = r->pend[--r->npend];
	}
	for (i = 0; i < r->ndone; i++)
		prefixcache_refill_done(r->pc, r->done[i]);
	r->ndone = 0;
}

/* ---- Life cycle ---------------------------------------------------------------- */

struct replay *
replay_create(const struct replay_params *p)
{
	struct replay *r = calloc(1, sizeof(*r));
	struct prefixcache_sink sink = {.evict = on_evict, .del = on_delete, .refill = on_refill,
					.reserve = on_reserve, .column = on_column};
	static unsigned int nl2;
	uint16_t mi, c;

	if (r == NULL)
		return NULL;
	r->p = *p;
	sink.arg = r;
	for (mi = 0; p->l2_dir != NULL && mi < p->pc.num_models; mi++) {
		const struct prefixcache_model *m = &p->pc.model[mi];
		struct kvdisk_params kp = {.num_caches = m->num_caches, .queue_depth = 32};
		char err[1024], path[512];

		if (m->l2_capacity_tokens == 0)
			continue;
		for (c = 0; c < m->num_caches; c++)
			kp.cache[c] = (struct kvdisk_cache_params){
				p->bytes_per_token, p->pc.column ? p->pc.column : PREFIXCACHE_COLUMN_DEFAULT,
				m->l2_capacity_tokens};
		snprintf(path, sizeof(path), "%s/kvss_replay_l2_%d_%u_%u.bin", p->l2_dir, (int)getpid(),
			 nl2++, mi);
		unlink(path);
		r->l2[mi] = kvdisk_open(path, &kp, err, sizeof(err));
		/* Open, its name is not needed: gone now, the file goes with the
		 * process however it ends (a signal left 128 MB files behind). */
		unlink(path);
		if (r->l2[mi] == NULL) {
			fprintf(stderr, "replay: the second tier: %s\n", err);
			goto fail;
		}
		sink.l2_down = replay_l2_down;
		sink.l2_up = replay_l2_up;
		sink.l2_del = replay_l2_del;
	}
	r->nbucket = 4099;
	r->bucket = calloc(r->nbucket, sizeof(*r->bucket));
	r->pc = prefixcache_create(&p->pc, &sink);
	if (r->bucket == NULL || r->pc == NULL)
		goto fail;
	for (mi = 0; mi < p->pc.num_models; mi++) {
		const struct prefixcache_model *m = &p->pc.model[mi];
		struct kvstore_params kp = {.num_caches = m->num_caches};
		size_t sz;

		kp.max_batch_entries = (uint16_t)(m->max_batch_tokens * m->num_caches);
		if (kp.max_batch_entries == 0)
			kp.max_batch_entries = (uint16_t)proto_evict_max_entries(9000);
		kp.max_refill_chunks = 4096;
		kp.max_prompts = 1 << 16;
		for (c = 0; c < m->num_caches; c++) {
			if (m->cache[c].cache_id != c)
				goto fail; /* the emulated shard numbers caches 0..C-1 */
			kp.cache[c] = (struct kvstore_cache_params){
				p->bytes_per_token, p->num_buffers ? p->num_buffers : 1,
				m->cache[c].capacity_tokens};
			if (m->cache[c].capacity_tokens / 32 > kp.max_prompts)
				kp.max_prompts = (uint32_t)(m->cache[c].capacity_tokens / 32);
		}
		sz = kvstore_memsize(&kp);
		if (sz == 0 || posix_memalign(&r->kvmem[mi], 64, sz) != 0)
			goto fail;
		r->kv[mi] = kvstore_init(r->kvmem[mi], sz, &kp);
		if (r->kv[mi] == NULL)
			goto fail;
	}
	return r;
fail:
	replay_free(r);
	return NULL;
}

void
replay_free(struct replay *r)
{
	uint32_t i;

	if (r == NULL)
		return;
	prefixcache_free(r->pc);
	for (i = 0; i < PREFIXCACHE_MAX_MODELS; i++)
		if (r->l2[i] != NULL)
			kvdisk_close(r->l2[i]);
	free(r->l2buf);
	for (i = 0; i < PREFIXCACHE_MAX_MODELS; i++)
		free(r->kvmem[i]);
	for (i = 0; i < r->npend; i++) {
		free(r->pend[i].ch);
		free(r->pend[i].h);
	}
	for (i = 0; r->bucket != NULL && i < r->nbucket; i++)
		while (r->bucket[i] != NULL) {
			struct replay_seq *s = r->bucket[i];

			r->bucket[i] = s->hnext;
			free(s->tok);
			free(s->h);
			free(s);
		}
	free(r->bucket);
	free(r->pend);
	free(r->done);
	free(r->buf);
	free(r);
}

struct prefixcache *
replay_pc(struct replay *r)
{
	return r->pc;
}

struct kvstore *
replay_kv(struct replay *r, uint16_t model)
{
	return r->kv[model];
}

void
replay_stats(const struct replay *r, struct replay_stats *st)
{
	uint16_t m, c;

	*st = r->st;
	st->unaccounted_tokens = 0;
	st->l2_columns = 0;
	st->l2_deletes = st->l2_deletes_absorbed = 0;
	for (m = 0; m < r->p.pc.num_models; m++)
		if (r->l2[m] != NULL) {
			struct kvdisk_stats ks;

			kvdisk_stats(r->l2[m], &ks);
			st->l2_deletes += ks.dels;
			st->l2_deletes_absorbed += ks.dels_absorbed;
			for (c = 0; c < r->p.pc.model[m].num_caches; c++)
				st->l2_columns += ks.stored[c];
		}
	for (m = 0; m < r->p.pc.num_models; m++)
		for (c = 0; c < r->p.pc.model[m].num_caches; c++) {
			struct kvstore_cache_stats cs;
			uint64_t mine = prefixcache_stored(r->pc, m, c);

			kvstore_cache_stats(r->kv[m], c, &cs);
			st->unaccounted_tokens += cs.stored_tokens > mine ? cs.stored_tokens - mine
									  : mine - cs.stored_tokens;
		}
}

uint64_t
replay_prompt_id(const struct replay_seq *s)
{
	return s->prompt_id;
}

static int
seq_room(struct replay_seq *s, uint32_t n)
{
	uint32_t cap = s->cap ? s->cap : 64;

	if (n <= s->cap)
		return 0;
	while (cap < n)
		cap *= 2;
	s->tok = realloc(s->tok, sizeof(uint32_t) * cap);
	s->h = realloc(s->h, sizeof(uint64_t) * cap);
	if (s->tok == NULL || s->h == NULL)
		return -ENOMEM;
	s->cap = cap;
	return 0;
}

static void
seq_append(struct replay_seq *s, uint32_t token)
{
	uint64_t prev = s->n ? s->h[s->n - 1] : s->iso;

	s->tok[s->n] = token;
	s->h[s->n] = proto_ref_hash_next(prev, token);
	s->n++;
}

/*
 * The refills this sequence's begin asked for bring exactly its hit, glued
 * token t being the position the wafer keeps in slot cache_idx + t
 * (prefixcache_slot; cache_idx > 0: a split's front, the wafer's to compute).
 * The bytes are checked later by position; this checks that the positions
 * are the right ones.
 */
static void
check_glue(struct replay *r, struct replay_seq *s, uint16_t model, uint32_t L)
{
	uint32_t k;

	for (k = 0; k < r->npend; k++) {
		const struct pending_refill *pr = &r->pend[k];
		const struct prefixcache_cache *cc;
		uint32_t t = 0, j, c;
		bool ok = true;

		if (pr->seq != s || pr->model != model)
			continue;
		cc = &r->p.pc.model[model].cache[pr->req.cache_id];
		for (c = 0; c < pr->req.num_chunks; c++)
			for (j = 0; j < pr->ch[c].num_tokens; j++, t++) {
				uint32_t p = pr->ch[c].start_token_idx + j;

				ok = ok && p < L && prefixcache_slot(cc, L, p) == pr->req.cache_idx + t;
			}
		if (!ok || pr->req.cache_idx + t != prefixcache_glue_len(cc, L))
			r->st.verify_failures++;
	}
}

struct replay_seq *
replay_begin(struct replay *r, uint16_t model, const struct prefixcache_request *req, uint64_t now,
	     struct prefixcache_hit *hit)
{
	struct replay_seq *s = calloc(1, sizeof(*s));
	uint32_t i, b;

	if (s == NULL || seq_room(s, req->num_tokens + 1) != 0) {
		free(s);
		return NULL;
	}
	s->model = model;
	s->iso = proto_ref_chain_root(req->isolation_id, req->salt); /* h(-1): the chain's root */
	s->prompt_len = req->num_tokens;
	for (i = 0; i < req->num_tokens; i++)
		seq_append(s, req->tokens[i]);
	r->cur = s;
	s->s = prefixcache_begin(r->pc, model, req, now, hit);
	r->cur = NULL;
	if (s->s == NULL) {
		free(s->tok);
		free(s->h);
		free(s);
		return NULL;
	}
	s->prompt_id = hit->prompt_id;
	s->pos = hit->hit_tokens;
	check_glue(r, s, model, hit->hit_tokens);
	b = bucket_of(r, s->prompt_id);
	s->hnext = r->bucket[b];
	r->bucket[b] = s;
	drain(r);
	return s;
}

void
replay_send(struct replay *r, struct replay_seq *s, uint32_t n, const uint32_t *gen, uint64_t now)
{
	uint32_t k, g = 0;

	/* The tokens past the prompt are generated: known from here on. */
	for (k = s->pos; k < s->pos + n; k++) {
		if (k < s->n)
			continue; /* the prompt's */
		if (seq_room(s, s->n + 1) != 0)
			return;
		seq_append(s, gen != NULL ? gen[g++] : workload_answer_token(k));
	}
	while (n > 0) {
		/* In runs (prefixcache_tokens), each followed by what came in meanwhile. */
		k = n < 16 ? n : 16;
		prefixcache_tokens(r->pc, s->s, s->tok + s->pos, k, now);
		s->pos += k;
		n -= k;
		drain(r);
	}
}

void
replay_end(struct replay *r, struct replay_seq *s, uint64_t now)
{
	struct replay_seq **pp = &r->bucket[bucket_of(r, s->prompt_id)];
	uint16_t k;

	/* The wafer step ends: batches go out before the sequence's deletes. */
	prefixcache_flush(r->pc);
	drain(r);
	prefixcache_end(r->pc, s->s, now);
	drain(r);
	/* The second tier's writes, pipelined meanwhile, are done too. */
	for (k = 0; k < PREFIXCACHE_MAX_MODELS; k++)
		if (r->l2[k] != NULL)
			replay_l2_settle(r, r->l2[k]);
	while (*pp != s)
		pp = &(*pp)->hnext;
	*pp = s->hnext;
	free(s->tok);
	free(s->h);
	free(s);
}

uint32_t
replay_request(struct replay *r, uint16_t model, const struct prefixcache_request *req,
	       const uint32_t *gen, uint32_t ngen, uint64_t now)
{
	struct prefixcache_hit hit;
	struct replay_seq *s = replay_begin(r, model, req, now, &hit);

	if (s == NULL)
		return 0;
	replay_send(r, s, req->num_tokens - hit.hit_tokens + ngen, gen, now);
	replay_end(r, s, now);
	return hit.hit_tokens;
}

void
replay_speculate(struct replay *r, struct replay_seq *s, const uint32_t *tokens, uint32_t n,
		 uint64_t now)
{
	uint32_t k;

	/* Speculation follows the prompt: positions are generated ones. */
	if (s->pos < s->prompt_len || s->pos != s->n || seq_room(s, s->n + n) != 0) {
		r->st.protocol_errors++;
		return;
	}
	/* Batches already built carry the bytes of what they were built with. */
	prefixcache_flush(r->pc);
	drain(r);
	if (!s->speculating) {
		s->spec_from = s->pos;
		s->speculating = true;
	}
	for (k = 0; k < n; k++)
		seq_append(s, tokens[k]);
	prefixcache_speculate(r->pc, s->s, tokens, n, now);
	prefixcache_flush(r->pc);
	s->pos += n;
	drain(r);
}

void
replay_verify(struct replay *r, struct replay_seq *s, uint32_t accepted, uint64_t now)
{
	if (!s->speculating || prefixcache_verify(r->pc, s->s, accepted, now) != 0) {
		r->st.protocol_errors++;
		return;
	}
	/* The rejected tail is gone: its positions are sent again. */
	s->n = s->pos = s->spec_from + accepted;
	s->speculating = false;
	prefixcache_flush(r->pc);
	drain(r);
}
