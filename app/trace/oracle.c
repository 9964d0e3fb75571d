/* SPDX-License-Identifier: BSD-3-Clause */
/* Offline references for kvss-trace: see oracle.h. */
#include "oracle.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#define NONE UINT32_MAX

/* The trace flattened: every (request, block) access, blocks numbered densely. */
struct accesses {
	size_t nreq;
	uint32_t *first; /* request i's accesses: [first[i], first[i + 1]) */
	uint32_t *blk;	 /* dense block number of each access */
	uint32_t *next;	 /* request of the block's next use, or NONE */
	uint32_t nblk;
};

static void
accesses_free(struct accesses *a)
{
	free(a->first);
	free(a->blk);
	free(a->next);
}

static int
accesses_build(const struct workload *t, size_t limit, struct accesses *a)
{
	size_t n = limit && limit < t->n ? limit : t->n, i, total = 0, mask = 1023, k;
	uint64_t *key = NULL;
	uint32_t *val = NULL, *last = NULL, j;

	memset(a, 0, sizeof(*a));
	for (i = 0; i < n; i++)
		total += t->r[i].nids;
	if (total >= NONE)
		return -1;
	while (mask + 1 < 2 * total)
		mask = mask * 2 + 1;
	a->nreq = n;
	a->first = malloc(sizeof(uint32_t) * (n + 1));
	a->blk = malloc(sizeof(uint32_t) * (total + 1));
	a->next = malloc(sizeof(uint32_t) * (total + 1));
	key = malloc(sizeof(uint64_t) * (mask + 1));
	val = malloc(sizeof(uint32_t) * (mask + 1));
	if (!a->first || !a->blk || !a->next || !key || !val)
		goto fail;
	memset(val, 0xff, sizeof(uint32_t) * (mask + 1));
	total = 0;
	for (i = 0; i < n; i++) {
		a->first[i] = (uint32_t)total;
		for (j = 0; j < t->r[i].nids; j++) {
			uint64_t id = t->r[i].ids[j];

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
	free(key);
	free(val);
	key = NULL;
	val = NULL;
	last = malloc(sizeof(uint32_t) * (a->nblk + 1));
	if (last == NULL)
		goto fail;
	memset(last, 0xff, sizeof(uint32_t) * (a->nblk + 1));
	for (i = n; i-- > 0;)
		for (k = a->first[i]; k < a->first[i + 1]; k++) {
			a->next[k] = last[a->blk[k]];
			last[a->blk[k]] = (uint32_t)i;
		}
	free(last);
	return 0;
fail:
	free(key);
	free(val);
	accesses_free(a);
	return -1;
}

/* Tokens of block @k of request @q. */
static inline uint32_t
block_tokens(const struct wl_req *q, uint32_t k, uint32_t block)
{
	uint32_t end = (k + 1) * block < q->n ? (k + 1) * block : q->n;

	return end > k * block ? end - k * block : 0;
}

/* ---- Belady with bypass ------------------------------------------------------ */

struct heap_item {
	uint32_t next, depth, blk;
};

/* Max-heap by (next use, depth): the block to free first on top. */
static inline bool
heap_above(const struct heap_item *x, const struct heap_item *y)
{
	return x->next > y->next || (x->next == y->next && x->depth > y->depth);
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
oracle_belady(const struct workload *t, uint64_t capacity, uint32_t block, size_t limit)
{
	struct accesses a;
	struct heap_item *heap = NULL;
	uint32_t *nu = NULL, *size = NULL;
	size_t nh = 0, i;
	uint64_t used = 0, hit = 0, input = 0, cap = capacity ? capacity : UINT64_MAX;
	double r = -1;

	if (accesses_build(t, limit, &a) != 0)
		return -1;
	heap = malloc(sizeof(*heap) * (a.first[a.nreq] + 1));
	nu = malloc(sizeof(uint32_t) * (a.nblk + 1));
	size = calloc(a.nblk + 1, sizeof(uint32_t)); /* 0: not stored */
	if (!heap || !nu || !size)
		goto out;
	for (i = 0; i < a.nreq; i++) {
		const struct wl_req *q = &t->r[i];
		uint32_t k, base = a.first[i];
		bool prefix = true;

		input += q->n;
		for (k = 0; k < q->nids; k++) {
			uint32_t b = a.blk[base + k], n = a.next[base + k], s = block_tokens(q, k, block);

			if (size[b] != 0) {
				if (prefix)
					hit += s;
				nu[b] = n;
				heap_push(heap, &nh, (struct heap_item){n, k, b});
				continue;
			}
			prefix = false;
			/* Never used again, or no room worth making: it and all after it go unstored. */
			if (n == NONE || s == 0)
				break;
			while (used + s > cap && nh > 0) {
				const struct heap_item *top = &heap[0];

				if (size[top->blk] == 0 || nu[top->blk] != top->next) {
					heap_pop(heap, &nh); /* stale */
					continue;
				}
				if (top->next <= n)
					break; /* bypass: everything stored is wanted sooner */
				used -= size[top->blk];
				size[top->blk] = 0;
				heap_pop(heap, &nh);
			}
			if (used + s > cap)
				break;
			size[b] = s;
			used += s;
			nu[b] = n;
			heap_push(heap, &nh, (struct heap_item){n, k, b});
		}
	}
	r = input ? (double)hit / input : 0;
out:
	free(heap);
	free(nu);
	free(size);
	accesses_free(&a);
	return r;
}

/* ---- LRU told the future reuse ------------------------------------------------ */

double
oracle_lru_told(const struct workload *t, uint64_t capacity, uint32_t block, size_t limit,
		uint64_t horizon_ms)
{
	struct accesses a;
	uint32_t *prev = NULL, *next = NULL, *size = NULL, head = NONE, tail = NONE;
	uint64_t used = 0, hit = 0, input = 0, cap = capacity ? capacity : UINT64_MAX;
	size_t i;
	double r = -1;

	if (accesses_build(t, limit, &a) != 0)
		return -1;
	prev = malloc(sizeof(uint32_t) * (a.nblk + 1));
	next = malloc(sizeof(uint32_t) * (a.nblk + 1));
	size = calloc(a.nblk + 1, sizeof(uint32_t));
	if (!prev || !next || !size)
		goto out;
#define UNLINK(b)                                                                                  \
	do {                                                                                       \
		if (prev[b] != NONE)                                                               \
			next[prev[b]] = next[b];                                                   \
		else                                                                               \
			head = next[b];                                                            \
		if (next[b] != NONE)                                                               \
			prev[next[b]] = prev[b];                                                   \
		else                                                                               \
			tail = prev[b];                                                            \
	} while (0)
	for (i = 0; i < a.nreq; i++) {
		const struct wl_req *q = &t->r[i];
		uint32_t k, base = a.first[i];

		input += q->n;
		for (k = 0; k < q->nids && size[a.blk[base + k]] != 0; k++)
			hit += block_tokens(q, k, block);
		/* Deepest first, so the root ends most recent and only leaves go first. */
		for (k = q->nids; k-- > 0;) {
			uint32_t b = a.blk[base + k], n = a.next[base + k], s = block_tokens(q, k, block);
			bool wanted = n != NONE && s > 0 &&
				      (horizon_ms == 0 || t->r[n].ts_ms - q->ts_ms <= horizon_ms);

			if (size[b] != 0) {
				UNLINK(b);
				used -= size[b];
				size[b] = 0;
			}
			if (!wanted)
				continue;
			size[b] = s;
			used += s;
			prev[b] = NONE;
			next[b] = head;
			if (head != NONE)
				prev[head] = b;
			else
				tail = b;
			head = b;
		}
		while (used > cap && tail != NONE) {
			uint32_t v = tail;

			UNLINK(v);
			used -= size[v];
			size[v] = 0;
		}
	}
#undef UNLINK
	r = input ? (double)hit / input : 0;
out:
	free(prev);
	free(next);
	free(size);
	accesses_free(&a);
	return r;
}
