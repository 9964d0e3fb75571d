/* SPDX-License-Identifier: BSD-3-Clause */
/* References over a trace's blocks for kvss-trace: see oracle.h. */
#include "oracle.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "oracle_priv.h"

void
oracle_blocks_replay_rule(struct oracle_blocks *a, uint32_t column, bool minus_one)
{
	a->column = column ? column : 1;
	a->minus_one = minus_one;
}

void
oracle_blocks_free(struct oracle_blocks *a)
{
	if (a == NULL)
		return;
	free(a->first);
	free(a->blk);
	free(a->next);
	free(a->left);
	free(a->use);
	free(a);
}

struct oracle_blocks *
oracle_blocks_new(const struct workload *t, size_t limit)
{
	size_t n = limit && limit < t->n ? limit : t->n, i, total = 0, mask = 1023, k;
	struct oracle_blocks *a = calloc(1, sizeof(*a));
	uint64_t *key = NULL;
	uint32_t *val = NULL, *last = NULL, *cnt = NULL, j;

	if (a == NULL)
		return NULL;
	a->column = 1; /* every token counts until a replay rule is set */
	for (i = 0; i < n; i++)
		total += t->r[i].nids;
	if (total >= NONE)
		goto fail;
	while (mask + 1 < 2 * total)
		mask = mask * 2 + 1;
	a->t = t;
	a->nreq = n;
	a->first = malloc(sizeof(uint32_t) * (n + 1));
	a->blk = malloc(sizeof(uint32_t) * (total + 1));
	a->next = malloc(sizeof(uint32_t) * (total + 1));
	a->left = malloc(sizeof(uint32_t) * (total + 1));
	key = malloc(sizeof(uint64_t) * (mask + 1));
	val = malloc(sizeof(uint32_t) * (mask + 1));
	if (!a->first || !a->blk || !a->next || !a->left || !key || !val)
		goto fail;
	memset(val, 0xff, sizeof(uint32_t) * (mask + 1));
	total = 0;
	for (i = 0; i < n; i++) {
		a->first[i] = (uint32_t)total;
		for (j = 0; j < t->r[i].nids; j++) {
			uint64_t id = t->r[i].ids[j];

			/* Another cache salt's block is another block (0: none). */
			if (t->r[i].salt != 0)
				id = (id ^ t->r[i].salt) * 0xD6E8FEB86659FD93ULL;

			for (k = (id * 0x9E3779B97F4A7C15ULL) >> 20 & mask; val[k] != NONE && key[k] != id;
			     k = (k + 1) & mask)
				;
			if (val[k] == NONE) {
				key[k] = id;
				val[k] = a->nblk++;
			}
			a->blk[total++] = val[k];
		}
	}
	a->first[n] = (uint32_t)total;
	last = malloc(sizeof(uint32_t) * (a->nblk + 1));
	cnt = calloc(a->nblk + 1, sizeof(uint32_t));
	a->use = malloc(sizeof(*a->use) * (a->nblk + 1));
	if (last == NULL || cnt == NULL || a->use == NULL)
		goto fail;
	memset(last, 0xff, sizeof(uint32_t) * (a->nblk + 1));
	for (i = n; i-- > 0;)
		for (k = a->first[i]; k < a->first[i + 1]; k++) {
			uint32_t b = a->blk[k];

			if (last[b] == NONE)
				a->use[b].last = (uint32_t)i;
			a->use[b].first = (uint32_t)i;
			a->next[k] = last[b];
			a->left[k] = cnt[b]++;
			last[b] = (uint32_t)i;
		}
	for (j = 0; j < a->nblk; j++)
		a->use[j].n = cnt[j];
	free(cnt);
	free(last);
	free(key);
	free(val);
	return a;
fail:
	free(cnt);
	free(last);
	free(key);
	free(val);
	oracle_blocks_free(a);
	return NULL;
}

/* Tokens request @i hits: its leading blocks with a nonzero @size. */
static uint64_t
stored_prefix_tokens(const struct oracle_blocks *a, size_t i, const uint32_t *size, uint32_t block)
{
	const struct wl_req *q = &a->t->r[i];
	uint64_t hit = 0;
	uint32_t k;

	for (k = 0; k < q->nids && size[a->blk[a->first[i] + k]] != 0; k++)
		hit += block_tokens(q, k, block);
	return replayable(a, q, hit);
}

/* ---- Replacement told the future: Belady with bypass and kin ------------------ */

struct heap_item {
	uint64_t key; /* larger: freed first; KEY_NEVER: never used again */
	uint32_t depth, blk;
};

#define KEY_NEVER UINT64_MAX

/* Max-heap by (key, depth): the block to free first on top. */
static inline bool
heap_above(const struct heap_item *x, const struct heap_item *y)
{
	return x->key > y->key || (x->key == y->key && x->depth > y->depth);
}

static void
heap_push(struct heap_item *h, size_t *n, struct heap_item it)
{
	size_t i = (*n)++;

	while (i > 0 && heap_above(&it, &h[(i - 1) / 2])) {
		h[i] = h[(i - 1) / 2];
		i = (i - 1) / 2;
	}
	h[i] = it;
}

static void
heap_pop(struct heap_item *h, size_t *n)
{
	struct heap_item it = h[--(*n)];
	size_t i = 0;

	for (;;) {
		size_t c = 2 * i + 1;

		if (c >= *n)
			break;
		if (c + 1 < *n && heap_above(&h[c + 1], &h[c]))
			c++;
		if (!heap_above(&h[c], &it))
			break;
		h[i] = h[c];
		i = c;
	}
	if (*n > 0)
		h[i] = it;
}

double
oracle_plain_lru(const struct oracle_blocks *a, uint64_t capacity, uint32_t block)
{
	uint64_t maxb = capacity ? capacity / block : UINT64_MAX, used = 0, hit = 0, input = 0;
	uint8_t *stored = calloc(a->nblk + 1, 1);
	struct lru l;
	size_t i;
	double r = -1;

	if (lru_init(&l, a->nblk) != 0 || stored == NULL)
		goto out;
	for (i = 0; i < a->nreq; i++) {
		const struct wl_req *q = &a->t->r[i];
		uint32_t k, base = a->first[i];
		bool prefix = true;
		uint64_t h = 0;

		input += q->n;
		for (k = 0; k < q->nids; k++) {
			uint32_t b = a->blk[base + k];

			if (stored[b]) {
				if (prefix)
					h += block_tokens(q, k, block);
				lru_touch(&l, b);
				continue;
			}
			prefix = false;
			if (maxb == 0)
				continue;
			if (used == maxb) {
				stored[l.list.tail] = 0;
				lru_unlink(&l, l.list.tail);
				used--;
			}
			stored[b] = 1;
			lru_push(&l, b);
			used++;
		}
		hit += replayable(a, q, h);
	}
	r = input ? (double)hit / input : 0;
out:
	lru_fini(&l);
	free(stored);
	return r;
}

/* A wait in sixteenths of a millisecond, as the high half of a key. */
static inline uint64_t
wait_key(uint64_t ms16, uint32_t i)
{
	return (ms16 < NONE - 1 ? ms16 : NONE - 1) << 32 | (NONE - i);
}

/*
 * The key of access @at (of request @i) under what the reference is told
 * (oracle.h): ORACLE_BELADY, the request of the next use; ORACLE_TOLD_USES,
 * the uses left, fewest on top, then the least recent; ORACLE_TOLD_RATE and
 * ORACLE_TOLD_LIFE_RATE, a wait per use in sixteenths of a millisecond.
 */
static inline uint64_t
told_key(const struct oracle_blocks *a, enum oracle_told told, const uint8_t *seen, size_t i,
	 uint32_t at)
{
	const struct block_use *u = &a->use[a->blk[at]];

	switch (told) {
	case ORACLE_BELADY_SEEN:
		if (!seen[a->blk[at]])
			return KEY_NEVER; /* not told: taken as never used again */
		/* fall through */
	case ORACLE_BELADY:
		return a->next[at] == NONE ? KEY_NEVER : a->next[at];
	case ORACLE_TOLD_USES:
		if (a->left[at] == 0)
			return KEY_NEVER;
		return (uint64_t)(NONE - a->left[at]) << 32 | (NONE - (uint32_t)i);
	case ORACLE_TOLD_RATE:
		if (a->left[at] == 0)
			return KEY_NEVER;
		return wait_key((a->t->r[u->last].ts_ms - a->t->r[i].ts_ms) * 16 / a->left[at],
				(uint32_t)i);
	case ORACLE_TOLD_LIFE_RATE:
		if (u->n < 2)
			return wait_key(UINT64_MAX, (uint32_t)i);
		return wait_key((a->t->r[u->last].ts_ms - a->t->r[u->first].ts_ms) * 16 / (u->n - 1),
				(uint32_t)i);
	}
	return KEY_NEVER;
}

/* Replacement with bypass by the keys above: the largest key is freed first. */
double
oracle_told(const struct oracle_blocks *a, uint64_t capacity, uint32_t block, enum oracle_told told)
{
	struct heap_item *heap = malloc(sizeof(*heap) * (a->first[a->nreq] + 1));
	uint64_t *key = malloc(sizeof(uint64_t) * (a->nblk + 1));
	uint32_t *size = calloc(a->nblk + 1, sizeof(uint32_t)); /* 0: not stored */
	uint8_t *seen = told == ORACLE_BELADY_SEEN ? calloc(a->nblk + 1, 1) : NULL;
	size_t nh = 0, i;
	uint64_t used = 0, hit = 0, input = 0, cap = capacity ? capacity : UINT64_MAX;
	double r = -1;

	if (!heap || !key || !size || (told == ORACLE_BELADY_SEEN && !seen))
		goto out;
	for (i = 0; i < a->nreq; i++) {
		const struct wl_req *q = &a->t->r[i];
		uint32_t k, base = a->first[i];
		bool prefix = true;
		uint64_t h = 0;

		input += q->n;
		for (k = 0; k < q->nids; k++) {
			uint32_t b = a->blk[base + k], s = block_tokens(q, k, block);
			uint64_t n = told_key(a, told, seen, i, base + k);

			if (size[b] != 0) {
				if (prefix)
					h += s;
				key[b] = n;
				heap_push(heap, &nh, (struct heap_item){n, k, b});
				continue;
			}
			prefix = false;
			/* Never used again, or no room worth making: it and all after it go unstored. */
			if (n == KEY_NEVER || s == 0)
				break;
			while (used + s > cap && nh > 0) {
				const struct heap_item *top = &heap[0];

				if (size[top->blk] == 0 || key[top->blk] != top->key) {
					heap_pop(heap, &nh); /* stale */
					continue;
				}
				if (top->key <= n)
					break; /* bypass: everything stored ranks above it */
				used -= size[top->blk];
				size[top->blk] = 0;
				heap_pop(heap, &nh);
			}
			if (used + s > cap)
				break;
			size[b] = s;
			used += s;
			key[b] = n;
			heap_push(heap, &nh, (struct heap_item){n, k, b});
		}
		hit += replayable(a, q, h);
		for (k = 0; seen != NULL && k < q->nids; k++)
			seen[a->blk[base + k]] = 1;
	}
	r = input ? (double)hit / input : 0;
out:
	free(heap);
	free(key);
	free(size);
	free(seen);
	return r;
}

/* ---- LRU told the future reuse ------------------------------------------------ */

double
oracle_lru_told(const struct oracle_blocks *a, uint64_t capacity, uint32_t block,
		uint64_t horizon_ms)
{
	const struct workload *t = a->t;
	uint32_t *size = calloc(a->nblk + 1, sizeof(uint32_t));
	uint64_t used = 0, hit = 0, input = 0, cap = capacity ? capacity : UINT64_MAX;
	struct lru l;
	size_t i;
	double r = -1;

	if (lru_init(&l, a->nblk) != 0 || size == NULL)
		goto out;
	for (i = 0; i < a->nreq; i++) {
		const struct wl_req *q = &t->r[i];
		uint32_t k, base = a->first[i];

		input += q->n;
		hit += stored_prefix_tokens(a, i, size, block);
		/* Deepest first, so the root ends most recent and only leaves go first. */
		for (k = q->nids; k-- > 0;) {
			uint32_t b = a->blk[base + k], n = a->next[base + k], s = block_tokens(q, k, block);
			bool wanted = n != NONE && s > 0 &&
				      (horizon_ms == 0 || t->r[n].ts_ms - q->ts_ms <= horizon_ms);

			if (size[b] != 0) {
				lru_unlink(&l, b);
				used -= size[b];
				size[b] = 0;
			}
			if (!wanted)
				continue;
			size[b] = s;
			used += s;
			lru_push(&l, b);
		}
		while (used > cap && l.list.tail != NONE) {
			uint32_t v = l.list.tail;

			lru_unlink(&l, v);
			used -= size[v];
			size[v] = 0;
		}
	}
	r = input ? (double)hit / input : 0;
out:
	lru_fini(&l);
	free(size);
	return r;
}

/* ---- Replacement by a table fitted in hindsight --------------------------------- */

#define FIT_CLASSES 13 /* bit length of the answer, 12 and more together */
#define FIT_USES 5     /* uses before this one, 4 and more together */
#define FIT_DEPTHS 9   /* bit length of the block's position, 8 and more together */
#define FIT_LENS 10    /* bit length of the prompt's block count, 9 and more together */
#define FIT_TAILS 4    /* blocks after it in the prompt, 3 and more together */
#define FIT_KEYS (FIT_CLASSES * FIT_USES * FIT_DEPTHS * FIT_LENS * FIT_TAILS)
#define FIT_AGES 12 /* ages from 0, 1, 2, 4, ... 1024 s on */
#define FIT_HORIZON_MS 200000u
#define FIT_SAMPLE 64

static inline uint32_t
fit_cap(uint32_t v, uint32_t max)
{
	return v < max ? v : max;
}

static inline uint32_t
fit_bits(uint64_t v)
{
	return v ? 64 - (uint32_t)__builtin_clzll(v) : 0;
}

/* The kind of every access (see oracle.h), by access; NULL when out of memory. */
static uint32_t *
fit_kinds(const struct oracle_blocks *a)
{
	uint32_t *kind = malloc(sizeof(uint32_t) * (a->first[a->nreq] + 1));
	uint32_t *uses = calloc(a->nblk + 1, sizeof(uint32_t)); /* so far */
	size_t i;

	if (kind == NULL || uses == NULL) {
		free(kind);
		free(uses);
		return NULL;
	}
	for (i = 0; i < a->nreq; i++) {
		const struct wl_req *q = &a->t->r[i];
		uint32_t k;

		for (k = 0; k < q->nids; k++) {
			uint32_t at = a->first[i] + k, key;

			key = fit_cap(fit_bits(q->out), FIT_CLASSES - 1);
			key = key * FIT_USES + fit_cap(uses[a->blk[at]]++, FIT_USES - 1);
			key = key * FIT_DEPTHS + fit_cap(fit_bits(k), FIT_DEPTHS - 1);
			key = key * FIT_LENS + fit_cap(fit_bits(q->nids), FIT_LENS - 1);
			kind[at] = key * FIT_TAILS + fit_cap(q->nids - 1 - k, FIT_TAILS - 1);
		}
	}
	free(uses);
	return kind;
}

static inline uint64_t
fit_age_ms(uint32_t a)
{
	return a == 0 ? 0 : 1000ull << (a - 1);
}

static inline uint32_t
fit_age(uint64_t age_ms)
{
	uint32_t a = 0;

	while (a + 1 < FIT_AGES && age_ms >= fit_age_ms(a + 1))
		a++;
	return a;
}

/*
 * score[key * FIT_AGES + a]: over the trace's accesses of that kind whose
 * block is not used again by age a, the uses within the horizon after a
 * over the time spent waiting for them (capped at the horizon): hits per
 * millisecond of residence. 0 where no access of the kind lived that long.
 */
static double *
fit_table(const struct oracle_blocks *a, const uint32_t *kind)
{
	double *score = calloc((size_t)FIT_KEYS * FIT_AGES, sizeof(double));
	double *life = calloc((size_t)FIT_KEYS * FIT_AGES, sizeof(double));
	uint32_t *num = calloc((size_t)FIT_KEYS * FIT_AGES, sizeof(uint32_t));
	uint32_t *den = calloc((size_t)FIT_KEYS * FIT_AGES, sizeof(uint32_t));
	size_t i, x;

	if (!score || !life || !num || !den) {
		free(score);
		score = NULL;
		goto out;
	}
	for (i = 0; i < a->nreq; i++) {
		const struct wl_req *q = &a->t->r[i];
		uint32_t at, age;

		for (at = a->first[i]; at < a->first[i + 1]; at++) {
			size_t row = (size_t)kind[at] * FIT_AGES;
			uint32_t n = a->next[at];
			uint64_t gap = n == NONE ? UINT64_MAX : a->t->r[n].ts_ms - q->ts_ms;

			for (age = 0; age < FIT_AGES; age++) {
				uint64_t from = fit_age_ms(age), wait;

				if (gap <= from)
					break; /* used again by this age: no later row sees it */
				wait = gap - from < FIT_HORIZON_MS ? gap - from : FIT_HORIZON_MS;
				den[row + age]++;
				life[row + age] += (double)wait;
				num[row + age] += gap - from <= FIT_HORIZON_MS;
			}
		}
	}
	for (x = 0; x < (size_t)FIT_KEYS * FIT_AGES; x++)
		if (den[x] != 0) {
			double mean = life[x] / den[x];

			score[x] = (double)num[x] / den[x] / (mean > 1 ? mean : 1);
		}
out:
	free(life);
	free(num);
	free(den);
	return score;
}

/* The stored blocks without a stored child, for sampling victims. */
struct fit_leaves {
	uint32_t *at; /* position in list, NONE when not a leaf */
	uint32_t *list, n;
};

static void
fit_leaf_add(struct fit_leaves *l, uint32_t b)
{
	l->at[b] = l->n;
	l->list[l->n++] = b;
}

static void
fit_leaf_del(struct fit_leaves *l, uint32_t b)
{
	uint32_t i = l->at[b], last = l->list[--l->n];

	l->list[i] = last;
	l->at[last] = i;
	l->at[b] = NONE;
}

/*
 * The lowest ranked of FIT_SAMPLE leaves drawn with @rng (its score in
 * @worst) at time @now, or NONE when there is no leaf.
 */
static uint32_t
fit_victim(const struct fit_leaves *l, const double *score, const uint32_t *key,
	   const uint64_t *last, uint64_t now, uint64_t *rng, double *worst)
{
	uint32_t v = NONE, n;

	for (n = 0; n < FIT_SAMPLE && l->n > 0; n++) {
		uint32_t c;
		double sc;

		*rng ^= *rng >> 12, *rng ^= *rng << 25, *rng ^= *rng >> 27;
		c = l->list[(*rng * 0x2545F4914F6CDD1DULL >> 32) % l->n];
		sc = score[(size_t)key[c] * FIT_AGES + fit_age(now - last[c])];
		if (v == NONE || sc < *worst)
			v = c, *worst = sc;
	}
	return v;
}

double
oracle_fitted_table(const struct oracle_blocks *a, uint64_t capacity, uint32_t block)
{
	uint32_t *kind = fit_kinds(a);
	double *score = kind ? fit_table(a, kind) : NULL;
	uint32_t *size = calloc(a->nblk + 1, sizeof(uint32_t)); /* 0: not stored */
	uint32_t *key = malloc(sizeof(uint32_t) * (a->nblk + 1)); /* kind of the last access */
	uint32_t *parent = malloc(sizeof(uint32_t) * (a->nblk + 1));
	uint32_t *nchild = calloc(a->nblk + 1, sizeof(uint32_t));
	uint64_t *last = malloc(sizeof(uint64_t) * (a->nblk + 1));
	struct fit_leaves l = {malloc(sizeof(uint32_t) * (a->nblk + 1)),
			       malloc(sizeof(uint32_t) * (a->nblk + 1)), 0};
	uint64_t used = 0, hit = 0, input = 0, cap = capacity ? capacity : UINT64_MAX;
	uint64_t rng = 0x9E3779B97F4A7C15ULL;
	size_t i;
	double r = -1;

	if (!score || !size || !key || !parent || !nchild || !last || !l.at || !l.list)
		goto out;
	for (i = 0; i < a->nreq; i++) {
		const struct wl_req *q = &a->t->r[i];
		uint32_t k, base = a->first[i];
		uint64_t now = q->ts_ms;

		input += q->n;
		hit += stored_prefix_tokens(a, i, size, block);
		for (k = 0; k < q->nids; k++) {
			key[a->blk[base + k]] = kind[base + k];
			last[a->blk[base + k]] = now;
		}
		for (k = 0; k < q->nids; k++) {
			uint32_t b = a->blk[base + k], s = block_tokens(q, k, block);
			uint32_t p = k ? a->blk[base + k - 1] : NONE;
			double mine, worst;

			if (size[b] != 0)
				continue;
			if ((p != NONE && size[p] == 0) || s == 0)
				break;
			mine = score[(size_t)key[b] * FIT_AGES];
			while (used + s > cap) {
				uint32_t v = fit_victim(&l, score, key, last, now, &rng, &worst);

				if (v == NONE || worst >= mine || v == p)
					break; /* bypass: it ranks no higher than what it would push out */
				used -= size[v];
				size[v] = 0;
				fit_leaf_del(&l, v);
				if (parent[v] != NONE && --nchild[parent[v]] == 0)
					fit_leaf_add(&l, parent[v]);
			}
			if (used + s > cap)
				break;
			size[b] = s;
			used += s;
			parent[b] = p;
			nchild[b] = 0;
			fit_leaf_add(&l, b);
			if (p != NONE && nchild[p]++ == 0)
				fit_leaf_del(&l, p);
		}
	}
	r = input ? (double)hit / input : 0;
out:
	free(kind);
	free(score);
	free(size);
	free(key);
	free(parent);
	free(nchild);
	free(last);
	free(l.at);
	free(l.list);
	return r;
}
