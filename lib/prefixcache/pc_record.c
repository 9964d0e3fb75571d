/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Tokens evicted and columns recorded (pc_priv.h): each token the wafer
 * sends joins the current EVICT batch of every cache group that still
 * caches (freeing room by the policy first); a completed column becomes an
 * entry under its parent. Speculative tokens, their verification, and a
 * sequence's end (its trailing tokens that fill no column go).
 */
#include "pc_priv.h"

#if defined(__SSE2__)
#include <emmintrin.h>
#endif
#if defined(__x86_64__) && defined(__GNUC__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
#include <immintrin.h>
#define PC_AVX2 1

/*
 * @k EVICT entries from @v on (token_idx, lane 2, counting up), two a
 * 32-byte store: where the CPU has AVX2 (asked once, at run time), the
 * run's loop takes half the stores of SSE2's.
 */
__attribute__((target("avx2"))) static void
fill_entries_avx2(struct proto_evict_entry *be, __m128i v, uint32_t k)
{
	__m256i w = _mm256_add_epi32(_mm256_broadcastsi128_si256(v), _mm256_set_epi32(0, 1, 0, 0, 0, 0, 0, 0));
	const __m256i two = _mm256_set_epi32(0, 2, 0, 0, 0, 2, 0, 0);
	uint32_t i;

	for (i = 0; i + 2 <= k; i += 2, w = _mm256_add_epi32(w, two))
		_mm256_storeu_si256((__m256i *)&be[i], w);
	if (i < k)
		_mm_storeu_si128((__m128i *)&be[i], _mm256_castsi256_si128(w));
}

/*
 * The same, four a 64-byte store, where the CPU has AVX-512 (F): a whole
 * cache line an entry's store, half of AVX2's stores again (a column's 64
 * entries took a sixth of a cold prompt's recording with AVX2).
 */
__attribute__((target("avx512f"))) static void
fill_entries_avx512(struct proto_evict_entry *be, __m128i v, uint32_t k)
{
	__m512i w = _mm512_add_epi32(_mm512_broadcast_i32x4(v),
				     _mm512_set_epi32(0, 3, 0, 0, 0, 2, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0));
	const __m512i four = _mm512_set_epi32(0, 4, 0, 0, 0, 4, 0, 0, 0, 4, 0, 0, 0, 4, 0, 0);
	uint32_t i;

	for (i = 0; i + 4 <= k; i += 4, w = _mm512_add_epi32(w, four))
		_mm512_storeu_si512((void *)&be[i], w);
	/* The last one to three: a mask of their lanes (four 32-bit lanes an entry). */
	if (i < k)
		_mm512_mask_storeu_epi32((void *)&be[i], (__mmask16)((1u << (4 * (k - i))) - 1), w);
}
#endif

int
pc_fill_entries(struct proto_evict_entry *be, struct proto_evict_entry ent, uint32_t k, int how)
{
	uint32_t i = 0;

#if defined(__SSE2__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
	/* An entry a store (token_idx is lane 2), not two. */
	__m128i v = _mm_set_epi32((int)ent.sequence_id, (int)ent.token_idx, (int)(ent.prompt_id >> 32),
				  (int)ent.prompt_id);
	const __m128i one = _mm_set_epi32(0, 1, 0, 0);

#if PC_AVX2
	if (how == PC_FILL_BEST)
		how = __builtin_cpu_supports("avx512f") ? PC_FILL_AVX512
		      : __builtin_cpu_supports("avx2")  ? PC_FILL_AVX2
							: PC_FILL_SSE2;
	/* A way asked for by name that this CPU does not have: not run (an illegal instruction). */
	else if ((how == PC_FILL_AVX512 && !__builtin_cpu_supports("avx512f")) ||
		 (how == PC_FILL_AVX2 && !__builtin_cpu_supports("avx2")))
		return -1;
	if (how == PC_FILL_AVX512) {
		fill_entries_avx512(be, v, k);
		return how;
	}
	if (how == PC_FILL_AVX2) {
		fill_entries_avx2(be, v, k);
		return how;
	}
#endif
	if (how == PC_FILL_BEST || how == PC_FILL_SSE2) {
		for (; i < k; i++, v = _mm_add_epi32(v, one))
			_mm_storeu_si128((__m128i *)&be[i], v);
		return PC_FILL_SSE2;
	}
#endif
	if (how != PC_FILL_BEST && how != PC_FILL_PLAIN)
		return -1; /* not on this build or CPU */
	for (; i < k; i++, ent.token_idx++)
		be[i] = ent;
	return PC_FILL_PLAIN;
}

/* ---- Evicting tokens and recording columns ------------------------------------------------ */

/*
 * record_column() writes a new entry field by field: a field added to
 * struct pc_entry must be set there too (this fails to build until the
 * size below is updated with it).
 */
_Static_assert(sizeof(struct pc_entry) == 88, "pc_entry_init_covers_all: record_column sets every field");

/*
 * The sequence lets go of group @gi: its pin, and its prompt, whose tokens no
 * entry references (a partial column, columns stored twice) are deleted.
 */
static void
seq_release_group(struct prefixcache *pc, struct prefixcache_seq *s, unsigned int gi)
{
	struct seq_group *sg = &s->g[gi];

	pc_seq_pin_last(pc, sg, NIL);
	if (sg->prompt != NIL) {
		uint32_t pi = sg->prompt;

		pc->pr[pi].seq = NULL;
		sg->prompt = NIL;
		pc_prompt_truncate(pc, pi, pc->pr[pi].end, true);
	}
}

void
pc_stop_caching(struct prefixcache *pc, struct prefixcache_seq *s, unsigned int gi)
{
	if (!s->g[gi].caching)
		return;
	s->g[gi].caching = false;
	pc->st.stopped++;
	seq_release_group(pc, s, gi);
}

/* Entry @i in the hash index, and the last of prompt @p's entries. */
static inline void
entry_index(struct prefixcache *pc, uint32_t i, struct pc_prompt *p)
{
	struct pc_entry *e = &pc->e[i];
	uint32_t k = ebucket_of(pc, e->gid, e->org, e->hash);

	e->hnext = pc->ebucket[k];
	pc->ebucket[k] = i;
	if (p->last != NIL)
		pc->e[p->last].p_next = i;
	else
		p->first = i;
	p->last = i;
}

/* Entry @i the first of @parent's children; the parent no longer a leaf. */
static inline void
child_link(struct prefixcache *pc, uint32_t parent, uint32_t i)
{
	struct pc_entry *pe = &pc->e[parent];

	pc_lru_unlink(pc, parent);
	pc->e[i].next_sib = pe->first_child;
	if (pe->first_child != NIL)
		pc->e[pe->first_child].prev_sib = i;
	pe->first_child = i;
}

/* A whole column of group 0 just recorded as entry @i, told to the sink, one call per cache of the group. */
static void
whole_column(struct prefixcache *pc, const struct prefixcache_seq *s, uint32_t i)
{
	const struct pc_entry *e = &pc->e[i];
	const struct pc_group *g = &pc->m[s->model].g[0];
	uint16_t c;

	for (c = 0; c < g->ncaches; c++) {
		struct prefixcache_l2col col = {
			.key = e->hash, .parent = e->parent != NIL ? pc->e[e->parent].hash : s->isolation_id,
			.isolation_id = s->isolation_id, .prompt_id = pc->pr[e->prompt].id,
			.evict_count = e->evict_count, .first_use_ns = (uint64_t)e->first_used * TICK_NS,
			.start = e->start, .tokens = e->length - e->start, .cache_id = g->cache[c]};

		pc->sink.whole_column(pc->sink.arg, s->model, &col);
	}
}

/*
 * Record column [a, b) of @p s's group @p gi: its tokens are at @p src, or
 * (NULL) in the sequence. Its evict_count is the largest batch its tokens
 * went in; the caller may know that those from @p known on went in batch
 * @p known_batch (a run of them just did), and the rest are read.
 */
static void
record_column(struct prefixcache *pc, struct prefixcache_seq *s, unsigned int gi, uint32_t a,
	      uint32_t b, uint64_t now, const uint32_t *src, uint32_t known, uint64_t known_batch,
	      const uint64_t *hp)
{
	struct seq_group *sg = &s->g[gi];
	uint8_t gid = (uint8_t)(s->model * MAX_GROUPS + gi);
	/* @p hp: the column's hash, computed ahead (struct ahead) from the same parent and tokens. */
	uint64_t h = hp != NULL ? *hp
				: prefixcache_column_hash(sg->last_hash, src != NULL ? src : TOKP(s, a), b - a);
	uint64_t ec = 0;
	uint32_t i, parent = sg->last_entry, t;
	struct pc_entry *e;
	struct pc_prompt *p;

	if (pc->pol->column_seen != NULL)
		pc->pol->column_seen(pc, gid, h, b - a);
	/*
	 * The parent must still be there, or this column is unreachable (a
	 * restart or a lost token may have freed it, and its record may hold
	 * another column since).
	 */
	if (parent != NIL && !entry_is(pc, parent, sg->last_gen)) {
		sg->last_entry = NIL;
		pc_stop_caching(pc, s, gi);
		return;
	}
	i = pc_entry_find(pc, gid, s->org, h);
	if (i != NIL && expired(pc, &pc->e[i], now) && !pc_subtree_pinned(pc, i)) {
		pc_delete_subtree(pc, i, true);
		i = NIL;
		if (!sg->caching)
			return;
	}
	if (i != NIL) {
		/* Stored twice (another sequence got there first): ours is unreferenced. */
		pc->st.dup_columns++;
		pc_seq_pin_last(pc, sg, i);
		sg->last_hash = h;
		sg->cur_end = b;
		return;
	}
	i = pc_entry_alloc(pc);
	if (i == NIL) {
		pc_stop_caching(pc, s, gi);
		return;
	}
	ec = known < b ? known_batch : 0;
	for (t = a; t < known && t < b; t++)
		if (TBATCH(s, t) > ec)
			ec = TBATCH(s, t);
	e = &pc->e[i];
	p = &pc->pr[sg->prompt];
	/*
	 * Field by field: a compound literal was a rep stos over the record
	 * (its startup a tenth of a column's recording) before the same
	 * stores. Every field is written (pc_entry_init_covers_all below).
	 */
	e->hash = h;
	e->evict_count = ec;
	e->first_used = e->last_used = tick(now);
	e->start = a;
	e->length = b;
	e->org = s->org;
	e->prompt = sg->prompt;
	e->parent = parent;
	e->first_child = e->next_sib = e->prev_sib = NIL;
	e->lru.prev = e->lru.next = NIL;
	e->p_prev = p->last;
	e->p_next = NIL;
	e->gen++;
	e->hits = e->pins = 0;
	e->gid = gid;
	e->bucket = NO_BUCKET;
	e->prio = b <= s->priority;
	e->prot = e->cold = e->brief = 0;
	/* Index, prompt list, family. */
	entry_index(pc, i, p);
	if (parent != NIL)
		child_link(pc, parent, i);
	if (pc->pol->recorded != NULL)
		pc->pol->recorded(pc, s, i, h, b);
	pc_lru_insert(pc, i, pc_bucket(pc, e), false);
	if (pc->sink.column != NULL)
		pc->sink.column(pc->sink.arg, s->model, pc->m[s->model].g[gi].cache[0], s->isolation_id,
				s->prompt_id, a, b);
	pc_l2_forget(pc, gid, s->org, h);
	if (pc->sink.whole_column != NULL && gi == 0 && b - a == pc->p.column &&
	    pc_l2_on(pc, s->model))
		whole_column(pc, s, i);
	pc->org[s->org].st.entries++;
	pc->org[s->org].st.cached_tokens += b - a;
	pc_seq_pin_last(pc, sg, i);
	sg->last_hash = h;
	sg->cur_end = b;
}

/*
 * Evict token @pos of @s into the current batch; complete columns if
 * @complete. Making room may send DELETEs, and a DELETE first flushes the
 * batch it waits for: so the token's entries, and the batch number its
 * prompts record, are taken only once every group has its room.
 */
static int
evict_token(struct prefixcache *pc, struct prefixcache_seq *s, uint32_t pos, uint64_t now,
	    bool complete)
{
	struct pc_model *m = &pc->m[s->model];
	struct proto_evict_entry *be;
	const uint32_t C = pc->p.column;
	uint64_t pid[MAX_GROUPS] = {0}, batch;
	unsigned int gi;
	int evicted = 0;
	/* admit: a token of a new column only takes the room of new ones. */
	const bool is_new = pc->pol->new_only != NULL && pc->pol->new_only(pc, s, pos);

	for (gi = 0; gi < m->ngroups; gi++) {
		struct pc_group *g = &m->g[gi];
		struct seq_group *sg = &s->g[gi];
		uint8_t gid = (uint8_t)(s->model * MAX_GROUPS + gi);
		struct pc_prompt *p;

		if (sg->caching && pc_next_end(g, C, sg->cur_end) == 0)
			pc_stop_caching(pc, s, gi); /* past the last column (window) */
		if (pos < sg->cur_end && sg->prompt == NIL)
			continue; /* inside its last hit entry (held by that entry's prompt) */
		if (sg->caching) {
			bool growth = sg->prompt == NIL || pos >= pc->pr[sg->prompt].end;

			while (growth && sg->caching &&
			       (g->stored + 1 > g->capacity ||
				(pc->shares_on && pc->org[s->org].stored[gid] + 1 > pc_org_cap_tokens(pc, s->org, g))))
				if (!pc_free_one(pc, gid, is_new, s->org)) {
					if (is_new)
						pc->st.bypassed++;
					pc_stop_caching(pc, s, gi);
				}
		}
		if (!sg->caching)
			continue;
		if (sg->prompt == NIL) {
			sg->prompt = pc_prompt_new(pc, gid, s->prompt_id, pos, s);
			if (sg->prompt == NIL) {
				pc_stop_caching(pc, s, gi);
				continue;
			}
		}
		p = &pc->pr[sg->prompt];
		if (pos == p->end) {
			p->end++;
			if (p->end > p->hi)
				p->hi = p->end;
			g->stored++;
			pc->org[p->org].stored[gid]++;
			pc->stored_total++;
			if (pc->stored_total > pc->st.peak_stored_tokens)
				pc->st.peak_stored_tokens = pc->stored_total;
		}
		pid[gi] = s->prompt_id;
		evicted = 1;
	}
	/* Now no more flushes: this is the batch the token goes in. */
	batch = current_batch(m);
	be = m->batch + (size_t)m->batch_g * m->p.num_caches;
	for (gi = 0; gi < m->ngroups; gi++) {
		const struct pc_group *g = &m->g[gi];
		uint16_t c;

		/* A group that stopped after an earlier one's room-making: not stored. */
		if (pid[gi] != 0 && !s->g[gi].caching)
			pid[gi] = 0;
		if (pid[gi] != 0)
			pc->pr[s->g[gi].prompt].last_batch = batch;
		for (c = 0; c < g->ncaches; c++)
			be[g->cache_pos[c]] = (struct proto_evict_entry){pid[gi], pos, s->seq_id};
	}
	TBATCH(s, pos) = batch;
	m->batch_g++;
	if (evicted)
		pc->st.evicted_tokens++;
	if (complete) {
		for (gi = 0; gi < m->ngroups; gi++) {
			struct seq_group *sg = &s->g[gi];
			uint32_t ne;

			while (sg->caching && (ne = pc_next_end(&m->g[gi], C, sg->cur_end)) != 0 &&
			       ne <= s->verified && sg->prompt != NIL)
				record_column(pc, s, gi, sg->cur_end, ne, now, NULL, ne, 0, NULL);
		}
	}
	if (m->batch_g >= pc_batch_limit(m))
		pc_flush_model(pc, s->model);
	return evicted;
}

int
prefixcache_token(struct prefixcache *pc, struct prefixcache_seq *s, uint32_t token, uint64_t now)
{
	uint32_t pos = s->pos;

	if (pc_seq_reserve_tokens(s, pos + 1) != 0)
		return 0;
	TOK(s, pos) = token;
	if (pos + 1 > s->ntok)
		s->ntok = pos + 1;
	s->pos = pos + 1;
	s->verified = s->pos;
	if (pos >= s->allowed)
		return 0;
	return evict_token(pc, s, pos, now, true);
}

/*
 * The whole columns that follow in one prefixcache_tokens() call's tokens,
 * hashed up to AHEAD columns before their turn: each one's bucket is
 * prefetched when it is hashed, and the first entry of its chain one column
 * before its turn. In a map larger than the caches (a driver that has run a
 * while) finding that a column is new was two dependent misses, half of
 * its recording; now they overlap the columns before. The hashes are the
 * ones recording would compute, only earlier: one is used for the column it
 * was computed for alone (the same tokens, at the same address, under the
 * same parent), and none is computed twice. A bucket is prefetched AHEAD - 1
 * columns before its turn, its chain's first entry two columns after that.
 */
#define AHEAD 4 /* 3 to 6 measured: 4 the fastest warm; a power of two (a ring) */

/* A ring: the column hashed k-th after the oldest is c[(head + k) % AHEAD]. */
struct ahead {
	const uint32_t *start, *end; /* the call's tokens */
	uint32_t head, n;	     /* columns hashed ahead, in order */
	struct {
		const uint32_t *src;
		uint64_t parent, h;
		bool chased; /* its chain's first entry prefetched */
	} c[AHEAD];
};

#define LA(la, k) (&(la)->c[((la)->head + (k)) % AHEAD])

/* The oldest @k gone: a step of the ring's head (copying them down was a fortieth of recording). */
static inline void
ahead_pop(struct ahead *la, uint32_t k)
{
	la->head = (la->head + k) % AHEAD;
	la->n -= k;
}

/* The hash of the whole column of @len tokens at @src under @parent; the next ones hashed ahead. */
static uint64_t
ahead_hash(struct prefixcache *pc, const struct prefixcache_seq *s, struct ahead *la,
	   const uint32_t *src, uint32_t len, uint64_t parent)
{
	const uint8_t gid = (uint8_t)(s->model * MAX_GROUPS);
	const uint32_t *nsrc;
	uint64_t h;
	uint32_t k;

	/* Columns that went by recorded another way (a run cut by a batch's end). */
	for (k = 0; k < la->n && LA(la, k)->src < src; k++)
		;
	ahead_pop(la, k);
	if (la->n > 0 && LA(la, 0)->src == src && LA(la, 0)->parent == parent) {
		h = LA(la, 0)->h;
		ahead_pop(la, 1);
	} else {
		h = prefixcache_column_hash(parent, src, len);
		la->n = 0;
	}
	nsrc = la->n > 0 ? LA(la, la->n - 1)->src + len : src + len;
	while (la->n < AHEAD && la->end - nsrc >= (ptrdiff_t)len) {
		uint64_t ph = la->n > 0 ? LA(la, la->n - 1)->h : h;
		__typeof__(&la->c[0]) c = LA(la, la->n);

		c->src = nsrc;
		c->parent = ph;
		c->h = prefixcache_column_hash(ph, nsrc, len);
		c->chased = false;
		__builtin_prefetch(&pc->ebucket[ebucket_of(pc, gid, s->org, c->h)]);
		la->n++;
		nsrc += len;
	}
	/* Buckets fetched two columns ago have come in: the first entry of their chains now. */
	for (k = 0; k + 2 < AHEAD && k < la->n; k++)
		if (!LA(la, k)->chased) {
			uint32_t i = pc->ebucket[ebucket_of(pc, gid, s->org, LA(la, k)->h)];

			if (i != NIL) {
				__builtin_prefetch(&pc->e[i].hash);
				__builtin_prefetch(&pc->e[i].hnext);
			}
			LA(la, k)->chased = true;
		}
	return h;
}

/* The EVICT entries of a run of @k tokens from @ent on, in group @g's caches of model @m's batch. */
static inline void
run_entries(struct pc_model *m, const struct pc_group *g, struct proto_evict_entry ent, uint32_t k)
{
	/* Invariants in locals: stores through be would otherwise make
	 * the compiler load g's and m's fields again every token. */
	const uint16_t nc = g->ncaches, stride = m->p.num_caches;
	struct proto_evict_entry *be = m->batch + (size_t)m->batch_g * stride;
	uint16_t at[PREFIXCACHE_MAX_CACHES], c;
	uint32_t i;

	if (nc == 1 && stride == 1) { /* a model of one cache: the usual case */
		pc_fill_entries(be, ent, k, PC_FILL_BEST);
		return;
	}
	for (c = 0; c < nc; c++)
		at[c] = g->cache_pos[c];
	for (i = 0; i < k; i++, ent.token_idx++, be += stride)
		for (c = 0; c < nc; c++)
			be[at[c]] = ent;
}

/*
 * A run of the @p n tokens at @p tokens that evict_token() would take one by
 * one with nothing but bookkeeping: one full-attention group still caching
 * into its prompt, which grows; room for all of them; the batch not filled;
 * nothing verified ahead; up to the end of the column in progress (which
 * is then recorded as evict_token() would). The same state and entries as
 * token by token; returns how many it took (0: the slow path must).
 */
static uint32_t
fast_run(struct prefixcache *pc, struct prefixcache_seq *s, const uint32_t *tokens, uint32_t n,
	 uint64_t now, struct ahead *la)
{
	struct pc_model *m = &pc->m[s->model];
	struct pc_group *g = &m->g[0];
	struct seq_group *sg = &s->g[0];
	uint32_t pos = s->pos, k, i, ne;
	struct pc_prompt *p;
	uint64_t batch;
	bool whole, tail;

	if (m->ngroups != 1 || g->rule != PREFIXCACHE_FULL || !sg->caching || sg->prompt == NIL ||
	    s->verified != pos || pos >= s->allowed)
		return 0;
	p = &pc->pr[sg->prompt];
	ne = pc_next_end(g, pc->p.column, sg->cur_end);
	if (pos != p->end || pos < sg->cur_end || ne == 0 || ne <= pos)
		return 0;
	k = n;
	if (k > s->allowed - pos)
		k = s->allowed - pos;
	if (k > ne - pos)
		k = ne - pos; /* up to the end of the column in progress */
	if (g->stored + k > g->capacity)
		k = g->capacity > g->stored ? (uint32_t)(g->capacity - g->stored) : 0;
	if (pc->shares_on) {
		/* Within its cap too; past it, the token by token path makes room. */
		uint64_t cap = pc_org_cap_tokens(pc, s->org, g);
		uint64_t held = pc->org[s->org].stored[s->model * MAX_GROUPS];

		if (held + k > cap)
			k = cap > held ? (uint32_t)(cap - held) : 0;
	}
	if (k > (uint32_t)(pc_batch_limit(m) - m->batch_g))
		k = pc_batch_limit(m) - m->batch_g;
	if (k == 0 || pc_seq_reserve_tokens(s, pos + k) != 0)
		return 0;
	batch = current_batch(m);
	/* A run that is a whole column is hashed where the caller has it, and
	 * the sequence forgets it at once: it keeps neither tokens nor batches. */
	whole = pos == sg->cur_end && pos + k == ne;
	/*
	 * The run that ends a column an earlier run of this call began (a
	 * batch's end cut it): the whole column is in the caller's array too,
	 * so it is hashed there, as a whole one is (and was, ahead), and this
	 * run's tokens are not kept either. Only the first part's are: were
	 * the rest to go token by token, record_column() would read them.
	 */
	tail = !whole && pos > sg->cur_end && pos + k == ne &&
	       (size_t)(pos - sg->cur_end) <= (size_t)(tokens - la->start);
	if (!whole && !tail) {
		uint64_t *tb = &TBATCH(s, pos);

		memcpy(TOKP(s, pos), tokens, sizeof(uint32_t) * k);
		for (i = 0; i < k; i++)
			tb[i] = batch;
	}
	run_entries(m, g, (struct proto_evict_entry){s->prompt_id, pos, s->seq_id}, k);
	m->batch_g = (uint16_t)(m->batch_g + k);
	p->end += k;
	if (p->end > p->hi)
		p->hi = p->end;
	p->last_batch = batch;
	g->stored += k;
	pc->org[p->org].stored[p->gid] += k;
	pc->stored_total += k;
	if (pc->stored_total > pc->st.peak_stored_tokens)
		pc->st.peak_stored_tokens = pc->stored_total;
	pc->st.evicted_tokens += k;
	s->pos = s->verified = pos + k;
	if (s->pos > s->ntok)
		s->ntok = s->pos;
	if (ne <= s->verified && (whole || tail)) {
		const uint32_t *col = tokens - (pos - sg->cur_end);
		uint64_t h = ahead_hash(pc, s, la, col, ne - sg->cur_end, sg->last_hash);

		/* Tokens before @p pos have their batches kept (none in a whole run). */
		record_column(pc, s, 0, sg->cur_end, ne, now, col, pos, batch, &h);
	} else if (ne <= s->verified) {
		record_column(pc, s, 0, sg->cur_end, ne, now, NULL, pos, batch, NULL);
	}
	/* Every token so far is hashed into its column: none is read again
	 * (only a column in progress is, from cur_end on), so the arrays start
	 * over here, and stay a column long and in cache instead of growing
	 * with the prompt (1.5 MiB at 128k tokens, written once each). */
	if (sg->cur_end == s->pos)
		s->tbase = s->pos;
	if (m->batch_g >= pc_batch_limit(m))
		pc_flush_model(pc, s->model);
	return k;
}

int
prefixcache_tokens(struct prefixcache *pc, struct prefixcache_seq *s, const uint32_t *tokens,
		   uint32_t n, uint64_t now)
{
	struct ahead la = {.start = tokens, .end = tokens + n, .n = 0};
	int ev = 0;

	while (n > 0) {
		uint32_t k = fast_run(pc, s, tokens, n, now, &la);

		if (k == 0) {
			ev += prefixcache_token(pc, s, *tokens, now);
			k = 1;
		} else {
			ev += (int)k;
		}
		tokens += k;
		n -= k;
	}
	return ev;
}

int
prefixcache_speculate(struct prefixcache *pc, struct prefixcache_seq *s, const uint32_t *tokens,
		      uint32_t n, uint64_t now)
{
	uint32_t k;
	int ev = 0;

	if (pc_seq_reserve_tokens(s, s->pos + n) != 0)
		return -ENOMEM;
	for (k = 0; k < n; k++) {
		uint32_t pos = s->pos++;

		TOK(s, pos) = tokens[k];
		if (pos + 1 > s->ntok)
			s->ntok = pos + 1;
		if (pos < s->allowed)
			ev += evict_token(pc, s, pos, now, false);
	}
	return ev;
}

int
prefixcache_verify(struct prefixcache *pc, struct prefixcache_seq *s, uint32_t accepted,
		   uint64_t now)
{
	struct pc_model *m = &pc->m[s->model];
	unsigned int gi;

	if (s->verified + accepted > s->pos)
		return -EINVAL;
	s->verified += accepted;
	/* Rejected tokens are sent again (corrected), overwriting in place. */
	s->pos = s->verified;
	s->ntok = s->pos;
	for (gi = 0; gi < m->ngroups; gi++) {
		struct seq_group *sg = &s->g[gi];
		uint32_t ne;

		while (sg->caching && sg->prompt != NIL &&
		       (ne = pc_next_end(&m->g[gi], pc->p.column, sg->cur_end)) != 0 &&
		       ne <= s->verified)
			record_column(pc, s, gi, sg->cur_end, ne, now, NULL, ne, 0, NULL);
	}
	return 0;
}

void
prefixcache_cut(struct prefixcache_seq *s)
{
	s->cut = true;
}

void
prefixcache_end(struct prefixcache *pc, struct prefixcache_seq *s, uint64_t now)
{
	struct pc_model *m = &pc->m[s->model];
	unsigned int gi;

	(void)now;
	if (pc->pol->end != NULL && !s->cut)
		pc->pol->end(pc, s);
	/* L2 admit short: the columns this sequence stored, if it answered briefly. */
	if (!s->cut && m->p.l2_admit == PREFIXCACHE_L2_SHORT && pc_l2_on(pc, s->model) &&
	    s->ntok >= s->prompt_len && s->ntok - s->prompt_len <= PREFIXCACHE_L2_SHORT_ANSWER)
		for (gi = 0; gi < m->ngroups; gi++) {
			uint32_t pi = s->g[gi].prompt, i;

			if (pi == NIL)
				continue;
			for (i = pc->pr[pi].first; i != NIL; i = pc->e[i].p_next)
				pc->e[i].brief = 1;
		}
	/* The trailing tokens that fill no column go. */
	for (gi = 0; gi < m->ngroups; gi++)
		seq_release_group(pc, s, gi);
	if (s->prev != NULL)
		s->prev->next = s->next;
	else
		pc->live = s->next;
	if (s->next != NULL)
		s->next->prev = s->prev;
	free(s->tokens);
	free(s->tok_batch);
	free(s);
}
