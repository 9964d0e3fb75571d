/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The request path (pc_priv.h): a lookup walks each cache group's chain of
 * column hashes as far as it is cached and not expired, pins what a refill
 * will read, and sends one REFILL per cache glued from the prompts that
 * hold the hit; prefixcache_refill_done releases the pins.
 */
#include "pc_priv.h"

/* ---- Lookup and refill -------------------------------------------------------------- */

static inline void
touch(struct prefixcache *pc, uint32_t i, uint64_t now)
{
	struct pc_entry *e = &pc->e[i];

	e->last_used = tick(now);
	if (e->hits < UINT16_MAX)
		e->hits++;
	/* Checked here: an inner column of a long hit is not a leaf. */
	if (pc->pol->touch != NULL)
		pc->pol->touch(pc, i);
	if (e->bucket != NO_BUCKET)
		pc_lru_requeue(pc, i);
}

static int
pin_add(struct pc_refill *r, const struct pc_entry *e, uint32_t i)
{
	if (r->npin == r->pincap &&
	    pc_grow((void **)&r->pin, &r->pincap, sizeof(*r->pin), r->npin + 1) != 0)
		return -ENOMEM;
	r->pin[r->npin++] = (struct pc_pin){i, e->gen};
	return 0;
}

static void
unpin(struct prefixcache *pc, uint32_t i, uint32_t gen)
{
	if (entry_is(pc, i, gen) && pc->e[i].pins > 0)
		pc->e[i].pins--;
}

/* Append chunk (prompt, [a, z)) to @out, merging with the previous one. */
static void
chunk_add(struct proto_refill_chunk *out, uint16_t *n, uint64_t prompt, uint32_t a, uint32_t z)
{
	if (a >= z)
		return;
	if (*n > 0 && out[*n - 1].prompt_id == prompt &&
	    out[*n - 1].start_token_idx + out[*n - 1].num_tokens == a) {
		out[*n - 1].num_tokens += z - a;
		return;
	}
	out[*n] = (struct proto_refill_chunk){prompt, a, z - a};
	(*n)++;
}

/* Logical range [a, z) as chunks of the prompts holding it, along @path. */
static void
chunks_of_range(struct prefixcache *pc, const uint32_t *path, uint32_t np, uint32_t a, uint32_t z,
		struct proto_refill_chunk *out, uint16_t *n)
{
	uint32_t k;

	for (k = 0; k < np && a < z; k++) {
		const struct pc_entry *e = &pc->e[path[k]];
		uint32_t lo = a > e->start ? a : e->start, hi = z < e->length ? z : e->length;

		if (lo < hi)
			chunk_add(out, n, pc->pr[e->prompt].id, lo, hi);
	}
}

/*
 * The refill of @L logical tokens for group @g along @path: in wafer position
 * order. Full attention: [0, L). Sliding window with L > W: the S sinks, then
 * the part of the window written since the last lap began, then the rest.
 */
static uint16_t
build_chunks(struct prefixcache *pc, const struct pc_group *g, const uint32_t *path, uint32_t np,
	     uint32_t from, uint32_t L, struct proto_refill_chunk *out)
{
	uint16_t n = 0;

	/* A split (from > 0) is made only for a full-attention group. */
	if (g->rule == PREFIXCACHE_FULL || L <= g->window) {
		chunks_of_range(pc, path, np, from, L, out, &n);
	} else {
		uint32_t W = g->window, S = g->sinks, a = L - (W - S);
		/* The window token at position S: (t - S) a multiple of W - S. */
		uint32_t t0 = a + (W - S - (a - S) % (W - S)) % (W - S);

		chunks_of_range(pc, path, np, 0, S, out, &n);
		chunks_of_range(pc, path, np, t0, L, out, &n);
		chunks_of_range(pc, path, np, a, t0, out, &n);
	}
	return n;
}

static struct pc_refill *
refill_new(struct prefixcache *pc, uint32_t nreq)
{
	struct pc_refill *r;

	if (pc->nrf == pc->rfcap) {
		uint32_t old = pc->rfcap;

		if (pc_grow((void **)&pc->rf, &pc->rfcap, sizeof(*pc->rf), pc->nrf + 1) != 0)
			return NULL;
		memset(&pc->rf[old], 0, sizeof(*pc->rf) * (pc->rfcap - old));
	}
	r = &pc->rf[pc->nrf++];
	r->id = pc->next_refill;
	pc->next_refill += nreq;
	r->n = r->pending = nreq;
	r->npin = 0;
	return r;
}

/* Token @pos of the sequence (pos >= tbase), and its latest eviction batch. */

/* Room for tokens up to absolute index @n. */
int
pc_seq_reserve_tokens(struct prefixcache_seq *s, uint32_t n)
{
	uint32_t cap = s->cap;

	n -= s->tbase;
	if (n <= cap)
		return 0;
	if (pc_grow((void **)&s->tokens, &cap, sizeof(uint32_t), n) != 0)
		return -ENOMEM;
	cap = s->cap;
	if (pc_grow((void **)&s->tok_batch, &cap, sizeof(uint64_t), n) != 0)
		return -ENOMEM;
	s->cap = cap;
	return 0;
}

void
pc_seq_pin_last(struct prefixcache *pc, struct seq_group *sg, uint32_t i)
{
	if (sg->last_entry != NIL)
		unpin(pc, sg->last_entry, sg->last_gen);
	sg->last_entry = i;
	if (i != NIL) {
		sg->last_gen = pc->e[i].gen;
		pc->e[i].pins++;
	}
}

/*
 * Walk group @gi's PrefixMap, column by column, to the first miss: its hit
 * path goes into pc->path[gi], np[gi] entries. With one group every hit is
 * used, so each is touched while it is in cache and *@p ec1 takes the
 * largest evict count. -ENOMEM.
 */
static int
walk_group(struct prefixcache *pc, uint16_t mi, unsigned int gi, const struct prefixcache_request *req,
	   uint32_t org, uint32_t limit, uint64_t now, uint32_t *np, uint64_t *ec1)
{
	const struct pc_model *m = &pc->m[mi];
	const struct pc_group *g = &m->g[gi];
	const uint32_t C = pc->p.column;
	uint8_t gid = (uint8_t)(mi * MAX_GROUPS + gi);
	uint64_t h = proto_ref_chain_root(req->isolation_id, req->salt), h2 = 0;
	uint32_t ne, ne2 = 0;
	struct ttl ttl = org_ttl(pc, org);
	uint32_t tnow = tick(now);

	/*
	 * Software-pipelined: while the next column is hashed (it is chained
	 * on this column's hash alone), this column's bucket and entry are
	 * on their way from memory.
	 */
	if ((ne = pc_next_end(g, C, 0)) != 0 && ne <= limit) {
		h = prefixcache_column_hash(h, req->tokens, ne);
		__builtin_prefetch(&pc->ebucket[ebucket_of(pc, gid, org, h)]);
	}
	while (ne != 0 && ne <= limit) {
		uint32_t i = pc->ebucket[ebucket_of(pc, gid, org, h)];

		if (i != NIL)
			__builtin_prefetch(&pc->e[i]);
		ne2 = pc_next_end(g, C, ne);
		if (ne2 != 0 && ne2 <= limit) {
			h2 = prefixcache_column_hash(h, req->tokens + ne, ne2 - ne);
			__builtin_prefetch(&pc->ebucket[ebucket_of(pc, gid, org, h2)]);
		}
		while (i != NIL && (pc->e[i].hash != h || pc->e[i].org != org || pc->e[i].gid != gid))
			i = pc->e[i].hnext;
		if (i == NIL || expired_t(&pc->e[i], ttl, tnow) || pc->e[i].length != ne)
			break;
		if (m->ngroups == 1) {
			touch(pc, i, now);
			if (pc->e[i].evict_count > *ec1)
				*ec1 = pc->e[i].evict_count;
		}
		if (np[gi] == pc->pathcap[gi] &&
		    pc_grow((void **)&pc->path[gi], &pc->pathcap[gi], sizeof(uint32_t), np[gi] + 1) != 0)
			return -ENOMEM;
		pc->path[gi][np[gi]++] = i;
		ne = ne2;
		h = h2;
	}
	return 0;
}

/*
 * The longest length every group can refill: the shortest group's hit.
 * A group's hit chain certifies every token before its end, and the
 * shard holds them all (a prompt only shrinks from the right), so a
 * group can refill any prefix of its hit: a full cache tokens [0, L), a
 * sliding window its sinks and the W - S tokens before L. (Requiring a
 * length that ends an entry in every group stopped a model with a full
 * cache and a window at the window: after its first lap the window's
 * entries are off the column grid.) Each path keeps the entry holding
 * token L - 1, which may end past L.
 */
static uint32_t
hit_length(const struct prefixcache *pc, const struct pc_model *m, uint32_t *np)
{
	uint32_t L = 0;
	unsigned int gi;

	for (gi = 0; gi < m->ngroups; gi++) {
		uint32_t end = np[gi] ? pc->e[pc->path[gi][np[gi] - 1]].length : 0;

		if (gi == 0 || end < L)
			L = end;
	}
	for (gi = 0; gi < m->ngroups; gi++)
		while (np[gi] > 0 &&
		       (np[gi] == 1 ? L == 0 : pc->e[pc->path[gi][np[gi] - 2]].length >= L))
			np[gi]--;
	return L;
}

/*
 * Each group of @s caches from its hit on: a group whose last used entry
 * ends past L (another group's hit was shorter) caches from that entry's
 * end on, the tokens before it being that entry's, held by its prompt.
 */
static void
start_groups(struct prefixcache *pc, struct prefixcache_seq *s, const struct pc_model *m,
	     const uint32_t *np, uint32_t L, uint64_t root)
{
	unsigned int gi;

	for (gi = 0; gi < m->ngroups; gi++) {
		struct seq_group *sg = &s->g[gi];
		uint32_t last = np[gi] ? pc->path[gi][np[gi] - 1] : NIL;

		sg->cur_end = last != NIL && pc->e[last].length > L ? pc->e[last].length : L;
		sg->caching = s->allowed > sg->cur_end;
		sg->prompt = NIL;
		sg->last_entry = NIL;
		sg->last_hash = last != NIL ? pc->e[last].hash : root;
		if (sg->caching)
			pc_seq_pin_last(pc, sg, last);
	}
}

/*
 * The hit of L tokens is refilled from token @p from on (0, or a split's
 * front the wafer computes): its path pinned, one REFILL per cache, glued
 * from the prompts that hold it, and the estimate in @p hit. -ENOMEM.
 */
static int
send_refill(struct prefixcache *pc, struct prefixcache_seq *s, uint16_t mi, const uint32_t *np,
	    uint32_t from, uint32_t L, uint64_t ec, uint64_t now, struct prefixcache_hit *hit)
{
	struct pc_model *m = &pc->m[mi];
	uint32_t at[PREFIXCACHE_MAX_CACHES]; /* each REFILL's first chunk in pc->chunks */
	uint32_t k, used = 0;		    /* chunks of the groups so far */
	struct pc_refill *r;
	unsigned int gi;
	uint16_t n = 0;

	/* More than one group: the hit is what all can refill, touched now. */
	for (gi = 0; gi < m->ngroups && m->ngroups > 1; gi++)
		for (k = 0; k < np[gi]; k++) {
			struct pc_entry *e = &pc->e[pc->path[gi][k]];

			touch(pc, pc->path[gi][k], now);
			if (e->evict_count > ec)
				ec = e->evict_count;
		}
	/*
	 * A refill never waits for a batch not yet sent: the shard runs
	 * REFILLs and DELETEs in one ordered queue, so a REFILL waiting
	 * for the open batch would hold back the DELETEs that make room
	 * for that batch (a deadlock until NO_SPACE).
	 */
	if (ec > m->batches_sent)
		pc_flush_model(pc, mi);
	r = refill_new(pc, m->p.num_caches);
	if (r == NULL)
		return -ENOMEM;
	for (gi = 0; gi < m->ngroups; gi++) {
		const struct pc_group *g = &m->g[gi];
		struct proto_refill_chunk *ch;
		uint16_t nch, c;

		if (pc_grow((void **)&pc->chunks, &pc->chunkcap, sizeof(*ch), used + 2 * np[gi] + 4) != 0)
			return -ENOMEM;
		ch = pc->chunks + used;
		/*
		 * Pinning the deepest entry protects the whole path: its
		 * ancestors are not leaves while it lives, and expiry skips
		 * subtrees holding a pin.
		 */
		if (np[gi] > 0) {
			uint32_t i = pc->path[gi][np[gi] - 1];

			if (pin_add(r, &pc->e[i], i) == 0)
				pc->e[i].pins++;
		}
		nch = build_chunks(pc, g, pc->path[gi], np[gi], from, L, ch);
		for (c = 0; c < g->ncaches; c++) {
			struct proto_refill_req rq = {
				.refill_id = r->id + g->cache_pos[c], .evict_count = ec,
				.sequence_id = s->seq_id, .cache_idx = from,
				.cache_id = g->cache[c], .num_chunks = nch};

			if (pc->sink.refill != NULL)
				pc->sink.refill(pc->sink.arg, mi, &rq, ch);
			if (n < PREFIXCACHE_MAX_CACHES) {
				pc->refills[n].rq = rq;
				at[n++] = used;
			}
		}
		used += nch;
	}
	/* The chunks may have moved as they grew: pointed at once all are in. */
	for (k = 0; k < n; k++)
		pc->refills[k].chunks = pc->chunks + at[k];
	hit->refills = pc->refills;
	hit->num_refills = n;
	hit->refill_id = r->id;
	hit->evict_count = ec;
	hit->estimate_bytes = (uint64_t)(L - from) * m->p.refill_bytes_per_token;
	hit->estimate_ns = m->p.refill_latency_ns;
	if (m->p.refill_bytes_per_ns > 0)
		hit->estimate_ns += (uint64_t)((double)hit->estimate_bytes / m->p.refill_bytes_per_ns);
	pc->st.refills++;
	return 0;
}

/* Reserve space for the evictions to come: each cache, from where its group caches on. */
static void
send_reserve(struct prefixcache *pc, const struct prefixcache_seq *s, uint16_t mi,
	     const uint32_t *np)
{
	const struct pc_model *m = &pc->m[mi];
	unsigned int gi;

	for (gi = 0; gi < m->ngroups; gi++) {
		const struct pc_group *g = &m->g[gi];
		uint32_t last = np[gi] ? pc->path[gi][np[gi] - 1] : NIL;
		uint16_t c;

		for (c = 0; c < g->ncaches; c++) {
			uint32_t from = s->g[gi].cur_end;
			struct proto_reserve rv = {
				.prompt_id = s->prompt_id,
				.continue_id = last != NIL ? pc->pr[pc->e[last].prompt].id : 0,
				.start_token_idx = from, .num_tokens = s->allowed - from,
				.cache_id = g->cache[c]};

			if (s->allowed > from)
				pc->sink.reserve(pc->sink.arg, mi, &rv);
		}
	}
}

/*
 * Where a hit of @p L tokens splits (params.split): the k at which
 * computing [0, k) and refilling [k, L) end together, the refill taking
 * @p up_ns first (its columns brought up from a tier: their line's time)
 * and then DRAM's line, k = (up_ns + latency + L x b) / (c + b), at most
 * @p cap (the front is DRAM's part: a column that comes up is refilled,
 * never computed); 0 when nothing would be computed. Called only where
 * refilling all of it is sooner than computing it (not for a probe of
 * the line), so k < L.
 */
static uint32_t
split_at(const struct pc_model *m, uint32_t L, uint64_t up_ns, uint32_t cap)
{
	double c = 1.0 / m->p.recompute_tokens_per_ns, b = 0, k;

	if (m->p.refill_bytes_per_ns > 0)
		b = (double)m->p.refill_bytes_per_token / m->p.refill_bytes_per_ns;
	k = ((double)up_ns + (double)m->p.refill_latency_ns + (double)L * b) / (c + b);
	if (cap >= L)
		cap = L - 1;
	if (!(k >= 1))
		return 0;
	return k >= (double)cap ? cap : (uint32_t)k;
}

/* DRAM's line for a refill of @p tokens (the estimate send_refill gives). */
static uint64_t
dram_estimate_ns(const struct pc_model *m, uint32_t tokens)
{
	uint64_t ns = m->p.refill_latency_ns;

	if (m->p.refill_bytes_per_ns > 0)
		ns += (uint64_t)((double)tokens * (double)m->p.refill_bytes_per_token /
				 m->p.refill_bytes_per_ns);
	return ns;
}

/*
 * Is refilling a DRAM hit of @p tokens sooner than computing them, the
 * wafer's compute first taken for @p wait_ns by others? Counted when not;
 * every PREFIXCACHE_PROBE_EVERY-th refusal in a row is refilled all the
 * same (a probe), so that the learned line can come back.
 */
static bool
dram_worth(struct prefixcache *pc, uint16_t mi, uint32_t tokens, uint64_t wait_ns)
{
	struct pc_model *m = &pc->m[mi];

	if (m->p.recompute_tokens_per_ns <= 0 ||
	    (double)dram_estimate_ns(m, tokens) <
		(double)wait_ns + (double)tokens / m->p.recompute_tokens_per_ns) {
		m->refused_run = 0;
		return true;
	}
	if (++m->refused_run >= PREFIXCACHE_PROBE_EVERY) {
		m->refused_run = 0;
		pc->st.refill_probes++;
		return true;
	}
	pc->st.recompute_faster_tokens += tokens;
	return false;
}

/* A sequence of model @mi for organization @org's request, nothing looked up yet; NULL: no memory. */
static struct prefixcache_seq *
seq_new(uint16_t mi, uint32_t org, const struct prefixcache_request *req)
{
	struct prefixcache_seq *s = calloc(1, sizeof(*s));

	if (s == NULL)
		return NULL;
	s->ntok = s->prompt_len = req->num_tokens;
	s->model = mi;
	s->org = org;
	s->isolation_id = req->isolation_id;
	s->root = proto_ref_chain_root(req->isolation_id, req->salt);
	s->seq_id = req->sequence_id;
	s->priority = req->priority_tokens;
	s->allowed = req->cache_length_allowed;
	if (req->first_multimodal < s->allowed)
		s->allowed = req->first_multimodal;
	return s;
}

/*
 * The @l2n columns past the DRAM hit that L2 holds come up into @s's
 * prompt and join the hit (@hit's hit_tokens, and what of it came from L2
 * and from the shared level), their entries on the group's path @np and
 * their batches in @ec1. -ENOMEM.
 */
static int
l2_join(struct prefixcache *pc, struct prefixcache_seq *s, uint32_t l2n,
	const struct prefixcache_request *req, uint64_t now, uint32_t *np, uint64_t *ec1,
	struct prefixcache_hit *hit)
{
	uint32_t shared_up, up = pc_l2_promote(pc, s, l2n, req, now, &shared_up), i;

	s->pos = s->verified = hit->hit_tokens + up;
	if (up == 0)
		return 0;
	for (i = pc->pr[s->g[0].prompt].first; i != NIL; i = pc->e[i].p_next) {
		if (np[0] == pc->pathcap[0] &&
		    pc_grow((void **)&pc->path[0], &pc->pathcap[0], sizeof(uint32_t), np[0] + 1) != 0)
			return -ENOMEM;
		pc->path[0][np[0]++] = i;
		if (pc->e[i].evict_count > *ec1)
			*ec1 = pc->e[i].evict_count;
	}
	hit->l2_hit_tokens = up;
	hit->shared_hit_tokens = shared_up;
	hit->hit_tokens += up;
	return 0;
}

/*
 * The hit of @s (hit_tokens of @hit, on the groups' paths @np, its batches
 * up to @ec1) refilled: Cake's split taken where it pays, the REFILLs sent,
 * the estimate with what comes up from a tier first. -ENOMEM.
 */
static int
refill_hit(struct prefixcache *pc, struct prefixcache_seq *s, const uint32_t *np, uint64_t ec1,
	   uint64_t now, struct prefixcache_hit *hit)
{
	const struct pc_model *m = &pc->m[s->model];
	uint32_t L = hit->hit_tokens;
	uint64_t up_ns = hit->l2_hit_tokens > 0 ? pc_l2_estimate_ns(pc, s->model, hit->l2_hit_tokens,
								   hit->shared_hit_tokens)
						: 0;

	/*
	 * Cake's split: the front computed while the back refills (split_at);
	 * not a probe's hit (refilled though computing is sooner: its whole
	 * refill is the sample the line learns from).
	 */
	if (m->p.split && m->p.recompute_tokens_per_ns > 0 && m->ngroups == 1 &&
	    m->g[0].rule == PREFIXCACHE_FULL &&
	    (double)(dram_estimate_ns(m, L) + up_ns) < (double)L / m->p.recompute_tokens_per_ns)
		hit->split_tokens = split_at(m, L, up_ns, L - hit->l2_hit_tokens);
	if (send_refill(pc, s, s->model, np, hit->split_tokens, L, ec1, now, hit) != 0)
		return -ENOMEM;
	if (hit->split_tokens > 0) {
		pc->st.split_requests++;
		pc->st.split_tokens += hit->split_tokens;
	}
	/* Bringing them up first: the L2 line's time before the refill's. */
	hit->estimate_ns += up_ns;
	return 0;
}

struct prefixcache_seq *
prefixcache_begin(struct prefixcache *pc, uint16_t mi, const struct prefixcache_request *req,
		  uint64_t now, struct prefixcache_hit *hit)
{
	struct pc_model *m;
	struct prefixcache_seq *s;
	uint32_t limit, allowed, L, np[MAX_GROUPS] = {0}, org, gi, l2n;
	bool computed = false; /* the DRAM hit was not worth refilling */
	uint64_t ec1 = 0;

	memset(hit, 0, sizeof(*hit));
	if (mi >= pc->p.num_models || (req->num_tokens > 0 && req->tokens == NULL)) {
		errno = EINVAL;
		return NULL;
	}
	m = &pc->m[mi];
	org = pc_org_get(pc, req->isolation_id);
	s = org != NIL ? seq_new(mi, org, req) : NULL;
	if (s == NULL)
		goto enomem;
	allowed = s->allowed;
	limit = pc->p.no_minus_one ? req->num_tokens : req->num_tokens ? req->num_tokens - 1 : 0;
	if (limit > allowed)
		limit = allowed;

	for (gi = 0; gi < m->ngroups; gi++)
		if (walk_group(pc, mi, gi, req, org, limit, now, np, &ec1) != 0)
			goto enomem;
	/* The policy sights the prompt's columns (the hit ones are hashed). */
	if (pc->pol->sight != NULL)
		pc->pol->sight(pc, s, req, np, limit);
	L = hit_length(pc, m, np);
	/*
	 * Computing the hit is sooner than refilling it: none of it is
	 * refilled (what lies past it, in L2, is slower still). Its path is
	 * kept: the sequence computes from token 0 but caches from the end of
	 * its last entry on (start_groups), as a group whose hit is longer
	 * than the others' does, so what DRAM holds is not evicted twice.
	 */
	if (L > 0 && !dram_worth(pc, mi, L, req->compute_wait_ns)) {
		L = 0;
		computed = true;
	}
	if (pc->pol->hit != NULL)
		pc->pol->hit(pc, s, np);

	/* Past the DRAM hit, the columns L2 holds (pc_l2.c), when the sequence caches. */
	l2n = allowed > L && !computed ? pc_l2_walk(pc, mi, org, req, L,
				       np[0] ? pc->e[pc->path[0][np[0] - 1]].hash : s->root,
				       limit, now)
			  : 0;

	/* The sequence keeps its tokens from L on (the hit ones are hashed
	 * already), each as it is evicted: the prompt's are not copied here,
	 * nothing reads a token before its eviction writes it. */
	s->tbase = L;
	if (pc_seq_reserve_tokens(s, L + 4 * pc->p.column + 64) != 0)
		goto enomem;
	s->pos = s->verified = L;
	s->prompt_id = mix64(pc->next_prompt++ * 0x9E3779B97F4A7C15ULL) | 1;
	hit->prompt_id = s->prompt_id;
	hit->hit_tokens = L;
	hit->lookup_tokens = limit;
	start_groups(pc, s, m, np, L, s->root);
	/* Taken only when reading them beats computing them (counted when not). */
	if (l2n > 0 && !pc_l2_worth(pc, mi, pc->l2[pc->l2path[l2n - 1]].length - L,
				    pc_l2_path_shared(pc, l2n), req->compute_wait_ns))
		l2n = 0;
	if (l2n > 0 && l2_join(pc, s, l2n, req, now, np, &ec1, hit) != 0)
		goto enomem;
	L = hit->hit_tokens;
	if (L > 0 && refill_hit(pc, s, np, ec1, now, hit) != 0)
		goto enomem;
	if (allowed > L && pc->sink.reserve != NULL)
		send_reserve(pc, s, mi, np);
	pc->st.requests++;
	pc->st.lookup_tokens += limit;
	pc->st.hit_tokens += L;
	pc->org[org].st.requests++;
	pc->org[org].st.hit_tokens += L;
	s->next = pc->live;
	if (pc->live != NULL)
		pc->live->prev = s;
	pc->live = s;
	return s;
enomem:
	if (s != NULL) {
		free(s->tokens);
		free(s->tok_batch);
		free(s);
	}
	errno = ENOMEM;
	return NULL;
}

void
prefixcache_refill_done(struct prefixcache *pc, uint64_t refill_id)
{
	uint32_t i, k;

	for (i = 0; i < pc->nrf; i++) {
		struct pc_refill *r = &pc->rf[i];

		if (refill_id < r->id || refill_id >= r->id + r->n)
			continue;
		if (--r->pending > 0)
			return;
		for (k = 0; k < r->npin; k++)
			unpin(pc, r->pin[k].entry, r->pin[k].gen);
		/* Swap the last record in; keep its pin array. */
		{
			struct pc_refill t = *r;

			*r = pc->rf[pc->nrf - 1];
			pc->rf[pc->nrf - 1] = t;
			pc->nrf--;
		}
		return;
	}
}
