/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The wafer emulator (emulator.h): its sequences and their refills, checked
 * byte by byte; the evicted bytes of every batch are data.c's. One
 * thread (the driver's control lcore) calls everything here.
 */
#include "emulator.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "emulator_priv.h"

/* ---- Lookups -------------------------------------------------------------------- */

struct emu_seq *
emu_seq_of_prompt(const struct emu *e, uint64_t prompt_id)
{
	const struct pid_node *n;

	for (n = e->pid[hbucket(prompt_id)]; n != NULL; n = n->next)
		if (n->prompt_id == prompt_id)
			return n->seq;
	return NULL;
}

static void
pid_add(struct emu *e, uint64_t prompt_id, struct emu_seq *s)
{
	struct pid_node *n = malloc(sizeof(*n));

	if (n == NULL)
		return;
	n->prompt_id = prompt_id;
	n->seq = s;
	n->next = e->pid[hbucket(prompt_id)];
	e->pid[hbucket(prompt_id)] = n;
}

static void
pid_del(struct emu *e, uint64_t prompt_id)
{
	struct pid_node **pp = &e->pid[hbucket(prompt_id)];

	while (*pp != NULL && (*pp)->prompt_id != prompt_id)
		pp = &(*pp)->next;
	if (*pp != NULL) {
		struct pid_node *n = *pp;

		*pp = n->next;
		free(n);
	}
}

static struct emu_refill *
refill_of(const struct emu *e, uint64_t id)
{
	struct emu_refill *r;

	for (r = e->rf[hbucket(id)]; r != NULL; r = r->hnext)
		if (r->refill_id == id)
			return r;
	return NULL;
}

static void
refill_unlink(struct emu *e, struct emu_refill *r)
{
	struct emu_refill **pp = &e->rf[hbucket(r->refill_id)];

	while (*pp != r)
		pp = &(*pp)->hnext;
	*pp = r->hnext;
	e->nrefill--;
}

/* ---- Life ----------------------------------------------------------------------- */

struct emu *
emu_create(const struct emu_params *p)
{
	struct emu *e;
	uint16_t k;

	if (p->pc == NULL || p->pcp == NULL || p->wl == NULL || p->hooks == NULL ||
	    p->max_inflight == 0 || p->step_tokens == 0 || p->num_models == 0 ||
	    p->num_models > PREFIXCACHE_MAX_MODELS || p->nshards == 0 || p->shard == NULL)
		return NULL;
	e = calloc(1, sizeof(*e));
	if (e == NULL)
		return NULL;
	e->p = *p;
	if (e->p.nreq > p->wl->n)
		e->p.nreq = p->wl->n;
	/* A model's shards stand in a row. */
	for (k = 0; k < p->nshards; k++) {
		uint16_t m = p->shard[k].model;

		if (m >= p->num_models || (e->nshards[m] != 0 && e->first_shard[m] + e->nshards[m] != k) ||
		    e->nshards[m] == MAX_SHARDS_PER_MODEL)
			goto fail;
		if (e->nshards[m]++ == 0)
			e->first_shard[m] = k;
	}
	e->ttft = malloc(sizeof(*e->ttft) * (e->p.nreq ? e->p.nreq : 1));
	e->ttft_req = malloc(sizeof(*e->ttft_req) * (e->p.nreq ? e->p.nreq : 1));
	e->hit_req = malloc(sizeof(*e->hit_req) * (e->p.nreq ? e->p.nreq : 1));
	if (e->ttft == NULL || e->ttft_req == NULL || e->hit_req == NULL)
		goto fail;
	memset(e->ttft_req, 0xff, sizeof(*e->ttft_req) * (e->p.nreq ? e->p.nreq : 1));
	memset(e->hit_req, 0xff, sizeof(*e->hit_req) * (e->p.nreq ? e->p.nreq : 1));
	if (p->arrival_ns != NULL) {
		size_t i;

		e->arr = malloc(sizeof(*e->arr) * (e->p.nreq ? e->p.nreq : 1));
		if (e->arr == NULL)
			goto fail;
		for (i = 0; i < e->p.nreq; i++) {
			if (i > 0 && p->arrival_ns[i] < p->arrival_ns[i - 1])
				goto fail; /* the caller orders them (or refuses the trace) */
			e->arr[i] = p->arrival_ns[i];
		}
		e->p.arrival_ns = NULL;
	}
	e->nslots = p->max_inflight + p->ahead;
	e->seq = calloc(e->nslots, sizeof(*e->seq));
	e->cur = calloc(p->nshards, sizeof(*e->cur));
	e->shard = malloc(sizeof(*e->shard) * p->nshards);
	if (e->seq == NULL || e->cur == NULL || e->shard == NULL)
		goto fail;
	memcpy(e->shard, p->shard, sizeof(*e->shard) * p->nshards);
	e->p.shard = e->shard; /* the caller's array need not outlive this call */
	if (emu_ev_alloc(e) != 0)
		goto fail;
	return e;
fail:
	emu_free(e);
	return NULL;
}

const struct emu_stats *
emu_stats(const struct emu *e)
{
	return &e->st;
}

void
emu_free(struct emu *e)
{
	uint32_t b, i;

	if (e == NULL)
		return;
	free(e->ev);
	for (b = 0; b < HBUCKETS; b++) {
		while (e->rf[b] != NULL) {
			struct emu_refill *r = e->rf[b];

			e->rf[b] = r->hnext;
			free(r->hash);
			free(r);
		}
		while (e->pid[b] != NULL) {
			struct pid_node *n = e->pid[b];

			e->pid[b] = n->next;
			free(n);
		}
	}
	for (i = 0; e->seq != NULL && i < e->nslots; i++)
		if (e->seq[i].state != SEQ_FREE) {
			free(e->seq[i].tok);
			free(e->seq[i].h);
		}
	while (e->jhead != NULL) {
		struct data_job *j = e->jhead;

		e->jhead = j->next;
		free(j);
	}
	free(e->seq);
	free(e->cur);
	free(e->shard);
	free(e->arr);
	free(e->ttft);
	free(e->ttft_req);
	free(e->hit_req);
	free(e);
}

const uint64_t *
emu_ttft_us(const struct emu *e, size_t *n)
{
	*n = e->nttft;
	return e->ttft;
}

const uint64_t *
emu_ttft_by_request(const struct emu *e, const uint32_t **hit_tokens, size_t *n)
{
	*hit_tokens = e->hit_req;
	*n = e->p.nreq;
	return e->ttft_req;
}

bool
emu_arrived(const struct emu *e, size_t req, uint64_t now)
{
	if (e == NULL || e->arr == NULL)
		return true; /* a closed loop: each is there when a slot is free */
	return e->started && req < e->p.nreq && now - e->origin >= e->arr[req];
}

void
emu_stop(struct emu *e)
{
	if (e == NULL || e->stopped)
		return;
	e->stopped = true;
	e->st.arrivals_unbegun += e->p.nreq - e->next_req;
}

bool
emu_failed(const struct emu *e)
{
	return e->failed;
}

bool
emu_done(const struct emu *e)
{
	return e->next_req >= e->p.nreq && e->nactive == 0 && e->nrefill == 0;
}

size_t
emu_next_request(const struct emu *e)
{
	return e->next_req;
}

uint64_t
emu_held_ns(const struct emu *e)
{
	return e != NULL ? e->held_ns : 0;
}

const uint64_t *
emu_seq_hashes(const struct emu *e, uint32_t sequence_id, uint32_t *n)
{
	const struct emu_seq *s;

	if (sequence_id >= e->nslots || e->seq[sequence_id].state == SEQ_FREE)
		return NULL;
	s = &e->seq[sequence_id];
	*n = s->total;
	return s->h;
}

void
emu_shard_buffers(struct emu *e, uint16_t k, uint16_t cache, uint16_t num_buffers)
{
	if (k < e->p.nshards && cache < PREFIXCACHE_MAX_CACHES)
		e->cur[k].num_buffers[cache] = num_buffers;
}

/* ---- Refills -------------------------------------------------------------------- */

/* Has a refill of @p s, of any model, failed? */
static bool
seq_refill_failed(const struct emu *e, const struct emu_seq *s)
{
	uint16_t m;

	for (m = 0; m < e->p.num_models; m++)
		if (s->mfailed[m])
			return true;
	return false;
}

static uint64_t emu_tokens_ns(const struct emu *e, uint32_t tokens);

/*
 * Model @p m's hit will not come to @p s (a refill failed, or was given
 * up): model 0's prefill computes those tokens too (once), and they saved
 * nothing; the model's time says nothing of its line.
 */
static void
hit_not_come(struct emu *e, struct emu_seq *s, uint16_t m)
{
	struct emu_stats *st = &e->st;

	if (m == 0 && !s->mfailed[0] && s->compute_end == 0) {
		uint64_t ns = emu_tokens_ns(e, s->pos[0] - s->front_tokens);

		s->compute_ns += ns;
		st->compute_saved_us -= ns / 1000 < st->compute_saved_us ? ns / 1000 : st->compute_saved_us;
	}
	s->mfailed[m] = 1;
}

/* A refill is finished for its requester (whole, failed or timed out). */
static void
refill_finish(struct emu *e, struct emu_refill *r, uint64_t now)
{
	struct emu_stats *st = &e->st;
	struct emu_seq *s = r->seq;
	bool bad = false;
	uint16_t i;

	if (r->finished)
		return;
	r->finished = true;
	r->finished_ns = now;
	e->nlinger++;
	if (r->given_up)
		e->ngiven--;
	for (i = 0; i < r->nshards; i++) {
		st->verify_bad_bytes += r->chk[i].bad_bytes;
		st->verify_bad_frames += r->chk[i].bad_frames;
		bad |= r->chk[i].bad_bytes != 0 || r->chk[i].bad_frames != 0;
	}
	/* Every shard said its data went out, yet some is missing: also a failure. */
	if (r->whole_mask != r->all_mask && r->done_mask == r->all_mask && r->fail_mask == 0)
		bad = true;
	st->verify_failures += bad;
	/* Refilled: whole from every shard, every byte right. A refill that
	 * failed or timed out brought nothing the wafer could use. */
	if (!bad && r->fail_mask == 0 && r->whole_mask == r->all_mask && !r->given_up)
		st->refilled_tokens += r->ntok;
	/* Given up, but whole in the end: how long it took is the model's to learn. */
	if (!bad && r->fail_mask == 0 && r->whole_mask == r->all_mask && r->learn &&
	    e->p.hooks->model_refilled != NULL)
		e->p.hooks->model_refilled(e->p.arg, r->model, now - r->t0, r->bytes, r->l2_bytes,
					   r->shared_bytes);
	r->seq = NULL;
	if (s == NULL)
		return;
	if (r->fail_mask != 0) {
		st->seq_refill_failed += !seq_refill_failed(e, s);
		hit_not_come(e, s, r->model);
	}
	if (--s->mwait[r->model] == 0 && !s->mfailed[r->model] && !s->unsampled &&
	    e->p.hooks->model_refilled != NULL)
		e->p.hooks->model_refilled(e->p.arg, r->model, now - s->t0, s->mbytes[r->model],
					   s->ml2bytes[r->model], s->mshbytes[r->model]);
	if (s->wait == 1 && s->picked)
		st->pick_wait_us += (now - s->pick_ns) / 1000; /* it ran late by this much */
	if (--s->wait == 0 && s->state == SEQ_WAIT) {
		/* A refill that failed (a shard restarted, or it timed out) took
		 * however long the failure did: it would skew the learned model. */
		if (!seq_refill_failed(e, s) && !s->unsampled && e->p.hooks->seq_refilled != NULL)
			e->p.hooks->seq_refilled(e->p.arg, now - s->t0, s->estimate_ns, s->estimate_bytes);
		s->whole_ns = now;
		s->state = e->p.resume_estimate && now - s->t0 < s->estimate_ns ? SEQ_HOLD : SEQ_RUN;
	}
}

static void
refill_free(struct emu *e, struct emu_refill *r)
{
	/* Its requester may still wait for another (a second model's): it must
	 * not find this one freed (a timeout's check read it after free). */
	if (r->owner != NULL && r->at < MAX_REC_PER_SEQ && r->owner->rec[r->at] == r)
		r->owner->rec[r->at] = NULL;
	if (r->finished)
		e->nlinger--;
	refill_unlink(e, r);
	prefixcache_refill_done(e->p.pc, r->refill_id);
	free(r->hash);
	free(r);
}

/* Finished for the requester and answered by every shard: the columns may go. */
static void
refill_check(struct emu *e, struct emu_refill *r, uint64_t now)
{
	if (!r->finished && (r->whole_mask == r->all_mask || r->fail_mask != 0))
		refill_finish(e, r, now);
	if (r->finished && (r->done_mask | r->fail_mask) == r->all_mask)
		refill_free(e, r);
}

/*
 * A REFILL the lookup of sequence @p s asked of @p model's shards (its
 * return, prefixcache_hit.refills): each shard's REFILL_DATA will be
 * checked against it.
 */
static void
expect_refill(struct emu *e, uint16_t model, const struct proto_refill_req *rq,
	      const struct proto_refill_chunk *ch)
{
	uint32_t from = rq->cache_idx; /* the slot of the first glued token */
	const struct prefixcache_cache *cc;
	uint16_t ns, i, k;
	struct emu_refill *r;
	struct emu_seq *s;
	uint32_t ntok = 0, t = 0, j;

	if (model >= e->p.num_models || rq->sequence_id >= e->nslots)
		return;
	for (k = 0; k < rq->num_chunks; k++)
		ntok += ch[k].num_tokens;
	if (e->p.open_loop) {
		e->st.refilled_tokens += ntok; /* nothing awaited: done after its lookup (seq_start) */
		return;
	}
	s = &e->seq[rq->sequence_id];
	if (s->state != SEQ_WAIT || s->nrec == MAX_REC_PER_SEQ)
		return;
	cc = rq->cache_id < e->p.pcp->model[model].num_caches ? &e->p.pcp->model[model].cache[rq->cache_id]
							       : NULL;
	ns = e->nshards[model];
	r = calloc(1, sizeof(*r) + sizeof(r->chk[0]) * ns);
	if (r == NULL || (r->hash = malloc(sizeof(uint64_t) * (ntok ? ntok : 1))) == NULL) {
		free(r);
		e->failed = true;
		return;
	}
	r->refill_id = rq->refill_id;
	r->cache_idx = rq->cache_idx;
	r->seq = s;
	r->model = model;
	r->cache_id = rq->cache_id;
	r->nshards = ns;
	r->ntok = ntok;
	r->all_mask = (uint32_t)((1ull << ns) - 1);
	/*
	 * Glued token t is position chunk.start + j of the requester's own
	 * prefix, and must land in slot cache_idx + t (prefixcache_slot) of a
	 * prefix that ends at the last glued position, which emu_step checks
	 * is the hit: a split's front [0, cache_idx) is the wafer's to compute.
	 */
	for (k = 0; k < rq->num_chunks; k++)
		if (ch[k].num_tokens && ch[k].start_token_idx + ch[k].num_tokens > r->glue_end)
			r->glue_end = ch[k].start_token_idx + ch[k].num_tokens;
	r->glue_bad = cc == NULL || ntok + from != prefixcache_glue_len(cc, r->glue_end);
	for (k = 0; k < rq->num_chunks; k++)
		for (j = 0; j < ch[k].num_tokens; j++, t++) {
			uint32_t idx = ch[k].start_token_idx + j;

			r->hash[t] = idx < s->total ? s->h[idx] : 0;
			if (cc != NULL && prefixcache_slot(cc, r->glue_end, idx) != from + t)
				r->glue_bad = true;
		}
	emu_ev_check(e, r->hash, ntok); /* nothing served past its first-use TTL */
	for (i = 0; i < ns; i++) {
		uint16_t sk = (uint16_t)(e->first_shard[model] + i);
		const struct emu_shard *sh = &e->p.shard[sk];
		struct wafer_place at = {model, sh->id, rq->cache_id,
					 rq->cache_id < PREFIXCACHE_MAX_CACHES
						 ? sh->bytes_per_token[rq->cache_id] : 0};

		if (rq->cache_id >= PREFIXCACHE_MAX_CACHES ||
		    wafer_refill_init(&r->chk[i], &at, e->cur[sk].num_buffers[rq->cache_id],
				      rq->refill_id, r->hash, ntok) != 0)
			r->fail_mask |= 1u << i;
	}
	r->hnext = e->rf[hbucket(r->refill_id)];
	e->rf[hbucket(r->refill_id)] = r;
	e->nrefill++;
	r->owner = s;
	r->at = s->nrec;
	s->rec[s->nrec++] = r;
	s->wait++;
	s->mwait[model]++;
}

/* The refill @p id for shard @p k's model, NULL (counted refill_stale) when none. */
static struct emu_refill *
refill_for_shard(struct emu *e, uint16_t k, uint64_t id)
{
	struct emu_refill *r = k < e->p.nshards ? refill_of(e, id) : NULL;

	if (r == NULL || r->model != e->p.shard[k].model) {
		e->st.refill_stale++;
		return NULL;
	}
	return r;
}

void
emu_refill_data(struct emu *e, uint16_t k, const struct proto_refill_data_hdr *h,
		const uint8_t *data, uint32_t len, uint64_t now_ns)
{
	struct emu_refill *r = refill_for_shard(e, k, h->refill_id);
	uint16_t i;

	if (r == NULL)
		return;
	if (r->finished) {
		e->st.refill_stale++;
		return;
	}
	i = (uint16_t)(k - e->first_shard[r->model]);
	/* Its data lands where the REFILL said its first token goes. */
	if (h->cache_idx != r->cache_idx && !r->idx_bad) {
		r->idx_bad = true;
		e->st.verify_failures++;
		e->st.verify_bad_glue++;
	}
	e->st.refill_bytes += len;
	/* Its data coming: the shard is not silent, its deadline moves on
	 * (its sequence's; a refill given up has its own). */
	if (r->seq != NULL && r->seq->state == SEQ_WAIT && r->seq->deadline < now_ns + e->p.refill_timeout_ns)
		r->seq->deadline = now_ns + e->p.refill_timeout_ns;
	if (r->given_up && r->given_up_ns < now_ns)
		r->given_up_ns = now_ns;
	wafer_refill_data(&r->chk[i], h, data, len);
	if (wafer_refill_whole(&r->chk[i]))
		r->whole_mask |= 1u << i;
	refill_check(e, r, now_ns);
}

bool
emu_refill_done(struct emu *e, uint16_t k, uint64_t refill_id, uint32_t status, uint64_t now_ns)
{
	struct emu_refill *r = refill_for_shard(e, k, refill_id);
	uint16_t i;

	if (r == NULL)
		return false;
	i = (uint16_t)(k - e->first_shard[r->model]);
	r->done_mask |= 1u << i;
	if (status != 0) {
		e->st.refill_failures++;
		r->fail_mask |= 1u << i;
	}
	refill_check(e, r, now_ns);
	return true;
}

/* ---- Sequences ------------------------------------------------------------------ */

/* What computing @p tokens would take at the recompute rate (0: compute is free). */
static uint64_t
emu_tokens_ns(const struct emu *e, uint32_t tokens)
{
	if (e->p.recompute_tokens_per_s == 0)
		return 0;
	return (uint64_t)tokens * 1000000000ULL / e->p.recompute_tokens_per_s;
}

/*
 * The prefill of a request with @p tokens missed: those tokens, and its
 * fixed cost. Every request has one, even with its whole prompt hit: the
 * last prompt token is always run (the lookup's "-1" rule) to produce the
 * first generated one.
 */
static uint64_t
emu_compute_ns(const struct emu *e, uint32_t tokens)
{
	return emu_tokens_ns(e, tokens) + e->p.prefill_overhead_ns;
}

/* @p s gets a run slot: from now on it sends tokens once its data is whole. */
static void
seq_pick(struct emu *e, struct emu_seq *s, uint64_t now)
{
	struct emu_stats *st = &e->st;

	s->picked = true;
	s->pick_ns = now;
	e->npicked++;
	/* Its give-up deadline counts from the pick: the part of the prefill
	 * queue it was looked up behind that went by before (picked ahead of
	 * the pick: wafer.ahead_of_pick) is not waited for again. */
	if (s->give_up_ns != 0) {
		uint64_t gone = now - s->t0 < s->wait_ns ? now - s->t0 : s->wait_ns;

		s->give_up_ns -= gone;
	}
	if (!s->had_refill)
		return;
	if (s->wait == 0) {
		st->picks_ready++;
		st->l2_ready_at_pick += s->l2hit;
	} else {
		st->picks_waited++;
	}
}

/*
 * The prompt's tokens, and the answer but its last one (never run, so never
 * evicted: workload_evicted_answer()), with the reference content's chain
 * over them. The chain starts where its keys' does (PROTOCOL.md section
 * 6): a salted request's bytes are its own, so a refill that brought
 * another salt's would fail the check. -1: no memory.
 */
static int
seq_tokens(struct emu_seq *s)
{
	const struct wl_req *q = s->q;
	uint32_t k;

	s->total = q->n + workload_evicted_answer(q->out);
	s->tok = malloc(sizeof(uint32_t) * (s->total ? s->total : 1));
	s->h = malloc(sizeof(uint64_t) * (s->total ? s->total : 1));
	if (s->tok == NULL || s->h == NULL) {
		free(s->tok);
		free(s->h);
		s->tok = NULL;
		s->h = NULL;
		return -1;
	}
	for (k = 0; k < s->total; k++) {
		s->tok[k] = k < q->n ? q->tokens[k] : workload_answer_token(k);
		s->h[k] = proto_ref_hash_next(k ? s->h[k - 1] : proto_ref_chain_root(q->iso, q->salt),
					      s->tok[k]);
	}
	return 0;
}

/* What model @m's lookup found, counted (its refills are expected already). */
static void
hit_count(struct emu *e, struct emu_seq *s, uint16_t m, const struct prefixcache_hit *hit)
{
	const struct wl_req *q = s->q;
	struct emu_stats *st = &e->st;
	uint32_t k;

	s->prompt_id[m] = hit->prompt_id;
	s->pos[m] = hit->hit_tokens;
	/* Every refill brings the whole hit, each token to its slot. */
	for (k = 0; k < s->nrec; k++)
		if (s->rec[k] != NULL && s->rec[k]->model == m &&
		    (s->rec[k]->glue_bad || s->rec[k]->glue_end != hit->hit_tokens)) {
			st->verify_failures++;
			st->verify_bad_glue++;
		}
	pid_add(e, hit->prompt_id, s);
	if (m == 0) {
		/* Caching stops before the first multimodal token (the design). */
		if (q->first_mm < q->allowed)
			st->multimodal_trimmed += q->allowed - q->first_mm;
		st->lookup_tokens += hit->lookup_tokens;
		st->hit_tokens += hit->hit_tokens;
		if (s->req < e->p.nreq)
			e->hit_req[s->req] = hit->hit_tokens;
		if (q->ans_len != 0 && hit->hit_tokens > q->ans_at)
			st->generated_hit_tokens += hit->hit_tokens - q->ans_at < q->ans_len
							    ? hit->hit_tokens - q->ans_at
							    : q->ans_len;
		st->miss_tokens += q->n - hit->hit_tokens;
		s->compute_ns = emu_compute_ns(e, q->n - hit->hit_tokens);
		/* A split's front is computed as the rest refills (emu_step). */
		s->front_tokens = hit->split_tokens;
		s->front_ns = emu_tokens_ns(e, hit->split_tokens);
		if (e->p.give_up && hit->refill_id != 0)
			s->give_up_ns =
			    s->wait_ns + emu_tokens_ns(e, hit->hit_tokens - hit->split_tokens);
		st->compute_saved_us += emu_tokens_ns(e, hit->hit_tokens - hit->split_tokens) / 1000;
	}
	if (m == 1)
		st->model1_hit_tokens += hit->hit_tokens;
	if (m == 1 && (s->pos[0] != 0) != (hit->hit_tokens != 0) && s->s[0] != NULL) {
		if (s->pos[0] != 0)
			st->hit_model0_only++;
		else
			st->hit_model1_only++;
	}
	if (hit->refill_id != 0) {
		st->refills += m == 0;
		s->had_refill = true;
		if (m == 0 && hit->l2_hit_tokens > 0) {
			s->l2hit = true;
			st->l2_hit_seqs++;
		}
		s->mbytes[m] = hit->estimate_bytes;
		s->ml2bytes[m] = (uint64_t)hit->l2_hit_tokens * e->p.pcp->model[m].refill_bytes_per_token;
		s->mshbytes[m] = (uint64_t)hit->shared_hit_tokens * e->p.pcp->model[m].refill_bytes_per_token;
		if (hit->estimate_ns > s->estimate_ns) {
			s->estimate_ns = hit->estimate_ns;
			s->estimate_bytes = hit->estimate_bytes;
		}
	}
}

/*
 * Model @m's lookup for @s: its refills expected, what it found counted;
 * none with the cache off or a shard of the model away.
 */
static void
seq_lookup(struct emu *e, struct emu_seq *s, uint16_t m, uint64_t now)
{
	const struct wl_req *q = s->q;
	struct emu_stats *st = &e->st;
	struct prefixcache_request rq = {.isolation_id = q->iso, .salt = q->salt, .tokens = q->tokens,
					 .num_tokens = q->n, .cache_length_allowed = q->allowed,
					 .first_multimodal = q->first_mm, .sequence_id = s->slot};
	struct prefixcache_hit hit;
	uint32_t k;

	/* The prefills queued before it: a refill that ends within them costs
	 * it nothing (those picked and still waiting for refills are not
	 * counted: they may yet come after it). */
	s->wait_ns = e->compute_free > now ? e->compute_free - now : 0;
	rq.compute_wait_ns = s->wait_ns;
	if (e->p.compute_only || !e->p.hooks->model_up(e->p.arg, m)) {
		/* The cache off, or a shard of it away: no lookup, no refill, nothing stored. */
		if (m == 0) {
			st->miss_tokens += q->n;
			s->compute_ns = emu_compute_ns(e, q->n);
		}
		st->away_requests += !e->p.compute_only && m == 0;
		return;
	}
	/* Its REFILLs name this sequence by its id; the lookup returns them. */
	s->s[m] = prefixcache_begin(e->p.pc, m, &rq, now, &hit);
	if (s->s[m] == NULL) {
		e->failed = true;
		return;
	}
	for (k = 0; k < hit.num_refills; k++)
		expect_refill(e, m, &hit.refills[k].rq, hit.refills[k].chunks);
	/* Open loop: the refills count as done at once (the shard's ordered
	 * queue still keeps their columns until their data has left). Their
	 * ids are copied first: hit.refills lasts until the next library call. */
	if (e->p.open_loop) {
		uint64_t done[PREFIXCACHE_MAX_CACHES];
		uint16_t n = hit.num_refills;

		for (k = 0; k < n; k++)
			done[k] = hit.refills[k].rq.refill_id;
		for (k = 0; k < n; k++)
			prefixcache_refill_done(e->p.pc, done[k]);
	}
	hit_count(e, s, m, &hit);
}

/*
 * Start the next request in a free slot; false: it may not start yet (no
 * slot free, not arrived, the driver not ready for it) or no memory.
 */
static bool
seq_start(struct emu *e, uint64_t now)
{
	struct emu_seq *s = NULL;
	uint32_t i;
	uint16_t m;

	for (i = 0; i < e->nslots; i++)
		if (e->seq[i].state == SEQ_FREE) {
			s = &e->seq[i];
			break;
		}
	if (s == NULL)
		return false;
	/* Not arrived yet: nothing after it has either. */
	if (e->arr != NULL && now - e->origin < e->arr[e->next_req])
		return false;
	if (e->p.hooks->request_ready != NULL &&
	    !e->p.hooks->request_ready(e->p.arg, (uint32_t)e->next_req, now))
		return false;
	memset(s, 0, sizeof(*s));
	s->slot = i;
	s->req = (uint32_t)e->next_req;
	s->q = &e->p.wl->r[e->next_req];
	if (seq_tokens(s) != 0) {
		e->failed = true;
		return false;
	}
	e->next_req++;
	s->t0 = now;
	s->arrival = e->arr != NULL ? e->origin + e->arr[e->next_req - 1] : now;
	e->st.queue_us += (now - s->arrival) / 1000;
	s->deadline = now + e->p.refill_timeout_ns;
	s->state = SEQ_WAIT;
	e->nactive++;
	e->st.requests++;
	e->st.prompt_tokens += s->q->n;
	for (m = 0; m < e->p.num_models; m++)
		seq_lookup(e, s, m, now);
	if (s->wait == 0)
		s->state = SEQ_RUN;
	s->order = e->begun++; /* picked in this order (emu_step) */
	return true;
}

static void
seq_end(struct emu *e, struct emu_seq *s, uint64_t now)
{
	uint16_t m;

	for (m = 0; m < e->p.num_models; m++) {
		if (s->s[m] == NULL)
			continue; /* its model was not up when it began */
		prefixcache_end(e->p.pc, s->s[m], now);
		pid_del(e, s->prompt_id[m]);
	}
	free(s->tok);
	free(s->h);
	s->tok = NULL;
	s->h = NULL;
	s->state = SEQ_FREE;
	e->npicked -= s->picked;
	e->nactive--;
	e->st.completed++;
}

/* Positions [a, b) of @p s take tokens from s->tok again: their prefix hashes. */
static void
seq_rehash(struct emu_seq *s, uint32_t a, uint32_t b)
{
	uint32_t k;

	for (k = a; k < b; k++)
		s->h[k] = proto_ref_hash_next(k ? s->h[k - 1] : proto_ref_chain_root(s->q->iso, s->q->salt),
					      s->tok[k]);
}

/*
 * One round of speculative decoding for model @p m of @p s at its position
 * P (a generated one): the target's token at P (verified: the prefill's or
 * the last round's correction), then the draft's proposals after it, evicted
 * with the bytes of what was proposed; the target accepts them up to the
 * first it rejects, and the rejected positions are evicted again, right,
 * in later rounds (overwriting in place). @return the positions advanced.
 */
static uint32_t
seq_spec_round(struct emu *e, struct emu_seq *s, uint16_t m, uint64_t now)
{
	struct emu_stats *st = &e->st;
	uint32_t P = s->pos[m], K, j, i;
	int ov;

	prefixcache_tokens(e->p.pc, s->s[m], s->tok + P, 1, now);
	K = s->total - P - 1 < e->p.spec_tokens ? s->total - P - 1 : e->p.spec_tokens;
	if (K == 0) {
		s->pos[m] = P + 1;
		return 1;
	}
	j = workload_spec_accepted(e->p.spec_seed, (uint64_t)(s->q - e->p.wl->r), P + 1, K,
				   e->p.spec_reject);
	for (i = j; i < K; i++)
		s->tok[P + 1 + i] = workload_spec_wrong_token(P + 1 + i);
	seq_rehash(s, P + 1, P + 1 + K);
	prefixcache_speculate(e->p.pc, s->s[m], s->tok + P + 1, j, now);
	ov = prefixcache_speculate(e->p.pc, s->s[m], s->tok + P + 1 + j, K - j, now);
	/* The batch leaves with the proposals' bytes (emu_evict reads them now). */
	prefixcache_flush(e->p.pc);
	for (i = j; i < K; i++)
		s->tok[P + 1 + i] = workload_answer_token(P + 1 + i);
	seq_rehash(s, P + 1, P + 1 + K);
	prefixcache_verify(e->p.pc, s->s[m], j, now);
	if (m == 0) {
		st->spec_rounds++;
		st->spec_proposed += K;
		st->spec_accepted += j;
	}
	if (ov > 0) {
		st->spec_overwrites += (uint64_t)ov;
		if (m != 0)
			st->spec_overwrites_draft += (uint64_t)ov;
	}
	s->pos[m] = P + 1 + j;
	return 1 + j;
}

/* Model @p m's tokens of @p s for this step: returns how many were sent. */
static uint32_t
seq_send(struct emu *e, struct emu_seq *s, uint16_t m, uint64_t now)
{
	uint32_t sent = 0;

	while (sent < e->p.step_tokens && s->pos[m] < s->total) {
		uint32_t pos = s->pos[m], k = e->p.step_tokens - sent;

		if (e->p.spec_tokens != 0 && pos >= s->q->n && s->s[m] != NULL) {
			sent += seq_spec_round(e, s, m, now);
			continue;
		}
		if (k > s->total - pos)
			k = s->total - pos;
		if (e->p.spec_tokens != 0 && pos < s->q->n && k > s->q->n - pos)
			k = s->q->n - pos; /* the prompt, then rounds */
		if (s->s[m] != NULL)
			prefixcache_tokens(e->p.pc, s->s[m], s->tok + pos, k, now);
		s->pos[m] += k;
		sent += k;
	}
	return sent;
}

/*
 * @p s, picked, has waited for its refills as long as computing what they
 * bring takes: it stops waiting and computes those tokens (after those
 * queued before it on the wafer's one compute), as for a failed refill; the
 * refills stay out, their data checked as it comes and their columns kept
 * until then, and are not waited for.
 */
static void
give_up(struct emu *e, struct emu_seq *s, uint64_t now)
{
	struct emu_stats *st = &e->st;
	uint32_t k;

	st->seqs_given_up++;
	for (k = 0; k < s->nrec; k++) {
		struct emu_refill *r = s->rec[k];

		if (r == NULL || r->finished || r->seq != s)
			continue;
		r->given_up = true;
		r->given_up_ns = now;
		r->seq = NULL;
		e->ngiven++;
		st->refills_given_up++;
		if (s->mwait[r->model] == 1 && !s->mfailed[r->model] && !s->unsampled) {
			r->learn = true;
			r->t0 = s->t0;
			r->bytes = s->mbytes[r->model];
			r->l2_bytes = s->ml2bytes[r->model];
			r->shared_bytes = s->mshbytes[r->model];
		}
		st->given_up_tokens += r->ntok;
		hit_not_come(e, s, r->model); /* its time says nothing of the model either */
		s->mwait[r->model]--;
		s->wait--;
	}
	st->pick_wait_us += (now - s->pick_ns) / 1000;
	s->whole_ns = now;
	s->state = SEQ_RUN;
}

/*
 * The EVICT path backed up (backpressure "skip"): @p s stops caching where
 * it is, its tokens left not evicted (the library ends its prompt at its
 * last whole column), and it is done, its run slot free.
 */
static void
seq_skip(struct emu *e, struct emu_seq *s)
{
	bool any = false;
	uint16_t m;

	for (m = 0; m < e->p.num_models; m++)
		if (s->pos[m] < s->total) {
			e->st.skipped_tokens += s->total - s->pos[m];
			s->pos[m] = s->total;
			if (s->s[m] != NULL)
				prefixcache_cut(s->s[m]); /* what it sent is not its whole answer */
			any = true;
		}
	e->st.skipped_seqs += any;
}

void
emu_backed_up(struct emu *e, bool on)
{
	e->backed_up = on;
}

/* What of the hold [@p from, @p to) came after @p since (a refill clock's start). */
static uint64_t
held_after(uint64_t since, uint64_t from, uint64_t to)
{
	uint64_t start = since > from ? since : from;

	return to > start ? to - start : 0;
}

void
emu_hold_ended(struct emu *e, uint64_t from_ns, uint64_t to_ns)
{
	uint64_t T = e->p.refill_timeout_ns;
	uint32_t i;

	for (i = 0; i < e->nslots; i++) {
		struct emu_seq *s = &e->seq[i];

		if (s->state != SEQ_WAIT)
			continue;
		s->deadline += held_after(s->deadline - T, from_ns, to_ns);
		/* Nor toward giving its refill up: what was held comes now. */
		if (s->picked && s->give_up_ns != 0)
			s->give_up_ns += held_after(s->pick_ns, from_ns, to_ns);
	}
	for (i = 0; i < HBUCKETS; i++) {
		struct emu_refill *r;

		for (r = e->rf[i]; r != NULL; r = r->hnext)
			if (r->given_up && !r->finished)
				r->given_up_ns += held_after(r->given_up_ns, from_ns, to_ns);
			else if (r->finished) /* its REFILL_DONE may wait behind the hold */
				r->finished_ns += held_after(r->finished_ns, from_ns, to_ns);
	}
}

void
emu_absent(struct emu *e)
{
	uint32_t i;

	for (i = 0; i < e->nslots; i++)
		if (e->seq[i].wait > 0)
			e->seq[i].unsampled = true;
	for (i = 0; i < HBUCKETS; i++) {
		struct emu_refill *r;

		for (r = e->rf[i]; r != NULL; r = r->hnext)
			if (r->given_up && !r->finished)
				r->learn = false;
	}
}

/* @p s has its first generated token: its refill is whole and its prefill done. */
static void
first_token(struct emu *e, struct emu_seq *s, uint64_t now)
{
	uint64_t us = (now - s->arrival) / 1000;

	s->first_token = true;
	e->st.first_tokens++;
	e->st.ttft_us += us;
	if (e->nttft < e->p.nreq)
		e->ttft[e->nttft++] = us;
	if (s->req < e->p.nreq)
		e->ttft_req[s->req] = us;
}

int
emu_step(struct emu *e, uint64_t now)
{
	uint32_t i, sent = 0;
	uint16_t m;

	e->now_ns = now; /* for what the library calls back during the step */
	if (!e->started) {
		e->started = true;
		e->origin = now; /* arrivals count from here */
	}
	while (e->nactive < e->nslots && e->next_req < e->p.nreq && !e->failed)
		if (!seq_start(e, now))
			break;
	/* Free run slots go to the sequences begun first. */
	while (e->npicked < e->p.max_inflight && e->npicked < e->nactive) {
		struct emu_seq *first = NULL;

		for (i = 0; i < e->nslots; i++)
			if (e->seq[i].state != SEQ_FREE && !e->seq[i].picked &&
			    (first == NULL || e->seq[i].order < first->order))
				first = &e->seq[i];
		if (first == NULL)
			break;
		seq_pick(e, first, now);
	}
	for (i = 0; i < e->nslots; i++) {
		struct emu_seq *s = &e->seq[i];
		bool done = true;

		if (!s->picked)
			continue; /* begun ahead of its pick: its data comes meanwhile */
		if (s->front_ns != 0 && s->front_end == 0) {
			/* A split's front: computed from the pick, while its refill goes. */
			s->front_end = (e->compute_free > now ? e->compute_free : now) + s->front_ns;
			e->compute_free = s->front_end;
			e->st.compute_us += s->front_ns / 1000;
		}

		if (s->state == SEQ_WAIT && s->give_up_ns != 0 && now - s->pick_ns >= s->give_up_ns)
			give_up(e, s, now);
		if (s->state == SEQ_HOLD && now - s->t0 >= s->estimate_ns) {
			e->held_ns += now - s->whole_ns;
			s->state = SEQ_RUN;
		}
		if (s->state != SEQ_RUN)
			continue;
		if (s->compute_ns != 0) {
			/* Its prefill: on the wafer's one compute, after those before it. */
			if (s->compute_end == 0) {
				s->compute_end = (e->compute_free > now ? e->compute_free : now) + s->compute_ns;
				e->compute_free = s->compute_end;
				e->st.compute_us += s->compute_ns / 1000;
			}
			if (now < s->compute_end)
				continue;
		}
		if (now < s->front_end)
			continue; /* a split's front still computing (no prefill after it) */
		if (!s->first_token)
			first_token(e, s, now);
		if (e->backed_up && e->p.skip_backed_up)
			seq_skip(e, s);
		for (m = 0; m < e->p.num_models; m++) {
			sent += seq_send(e, s, m, now);
			done &= s->pos[m] == s->total;
		}
		if (done)
			s->state = SEQ_DONE;
	}
	/* The wafer step ends: its batches go out before any sequence's deletes. */
	prefixcache_flush(e->p.pc);
	for (i = 0; i < e->nslots; i++)
		if (e->seq[i].state == SEQ_DONE)
			seq_end(e, &e->seq[i], now);
	return sent > 0;
}

void
emu_check_timeouts(struct emu *e, uint64_t now)
{
	uint32_t i, k;

	/*
	 * A refill whole (or failed) whose REFILL_DONE never came: a reply is
	 * never resent, and a lossy fabric may drop it. After the refill
	 * timeout its columns are let go without it (the shard's store keeps
	 * what a refill in flight reads, whatever the driver deletes).
	 */
	if ((e->nlinger > 0 || e->ngiven > 0) && now >= e->next_linger_ns) {
		e->next_linger_ns = now + e->p.refill_timeout_ns / 4;
		for (i = 0; i < HBUCKETS; i++) {
			struct emu_refill *r = e->rf[i], *next;

			for (; r != NULL; r = next) {
				next = r->hnext;
				/* Given up and still not whole: it fails as a timed-out one does. */
				if (r->given_up && !r->finished && now - r->given_up_ns >= e->p.refill_timeout_ns) {
					e->st.refill_timeouts++;
					r->fail_mask = r->all_mask;
					refill_finish(e, r, now);
					refill_free(e, r);
					continue;
				}
				if (r->finished && now - r->finished_ns >= e->p.refill_timeout_ns) {
					e->st.refill_done_missing++;
					refill_free(e, r);
				}
			}
		}
	}

	for (i = 0; i < e->nslots; i++) {
		struct emu_seq *s = &e->seq[i];

		if (s->state != SEQ_WAIT || now < s->deadline)
			continue;
		for (k = 0; k < s->nrec; k++) {
			struct emu_refill *r = s->rec[k];

			if (r == NULL || r->finished || r->seq != s)
				continue;
			e->st.refill_timeouts++;
			r->fail_mask = r->all_mask;
			refill_finish(e, r, now);
			refill_free(e, r);
		}
	}
}

void
emu_model_restart(struct emu *e, uint16_t model, uint64_t now)
{
	struct data_job *j;
	uint32_t b;
	uint16_t i;

	if (model >= e->p.num_models)
		return;
	/* Its jobs name batches of a stream that is gone. */
	for (j = e->jhead; j != NULL; j = j->next)
		if (j->model == model)
			j->done_mask = j->all_mask;
	for (i = 0; i < e->nshards[model]; i++) {
		struct emu_cursor *c = &e->cur[e->first_shard[model] + i];

		c->j = NULL;
		c->on = false;
		c->cache = 0;
	}
	/* Refills of the old epoch will not come: their requesters go on. */
	for (b = 0; b < HBUCKETS; b++) {
		struct emu_refill *r = e->rf[b], *nx;

		for (; r != NULL; r = nx) {
			nx = r->hnext;
			if (r->model != model)
				continue;
			r->fail_mask = r->all_mask;
			e->st.refill_failures++;
			refill_finish(e, r, now);
			refill_free(e, r);
		}
	}
}
