/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The block references' insides, shared by oracle.c (the one-tier
 * references) and tier2.c (the two-tier model): the trace flattened into
 * block accesses, a recency list, a request's tokens per block.
 */
#ifndef KVSS_ORACLE_PRIV_H
#define KVSS_ORACLE_PRIV_H

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>

#include "ilist.h"
#include "oracle.h"

#define NONE UINT32_MAX

/* A block's uses: the requests of its first and last, and how many. */
struct block_use {
	uint32_t first, last, n;
};

/* The trace flattened: every (request, block) access, blocks numbered densely. */
struct oracle_blocks {
	const struct workload *t;
	size_t nreq;
	uint32_t *first; /* request i's accesses: [first[i], first[i + 1]) */
	uint32_t *blk;	 /* dense block number of each access */
	uint32_t *next;	 /* request of the block's next use, or NONE */
	uint32_t *left;	 /* how many more times the block is used after this */
	struct block_use *use; /* per block */
	uint32_t nblk;
	uint32_t column;       /* the replay rule (oracle_blocks_replay_rule) */
	bool minus_one;
};

/*
 * Of the @p h leading tokens of request @p q a cache holds, those a refill
 * can bring: whole columns, and (the -1 rule) never the prompt's last token.
 */
static inline uint64_t
replayable(const struct oracle_blocks *a, const struct wl_req *q, uint64_t h)
{
	uint64_t lim = a->minus_one && q->n > 0 ? q->n - 1 : q->n;

	if (h > lim)
		h = lim;
	return h / a->column * a->column;
}

/* Blocks in recency order (lib/ilist): list.head the most recent, list.tail the next to go. */
struct lru {
	struct ilist_link *link; /* per block */
	struct ilist list;
};

static inline int
lru_init(struct lru *l, uint32_t nblk)
{
	l->link = malloc(sizeof(l->link[0]) * (nblk + 1));
	ilist_init(&l->list);
	return l->link != NULL ? 0 : -1;
}

static inline void
lru_fini(struct lru *l)
{
	free(l->link);
}

static inline void
lru_unlink(struct lru *l, uint32_t b)
{
	ilist_unlink(&l->list, ILIST_LINK_ARRAY(l->link), b);
}

static inline void
lru_push(struct lru *l, uint32_t b)
{
	ilist_push_head(&l->list, ILIST_LINK_ARRAY(l->link), b);
}

/* Block @b, which is on @l, the most recent now (a hit). */
static inline void
lru_touch(struct lru *l, uint32_t b)
{
	ilist_move_head(&l->list, ILIST_LINK_ARRAY(l->link), b);
}

/* Tokens of block @k of request @q. */
static inline uint32_t
block_tokens(const struct wl_req *q, uint32_t k, uint32_t block)
{
	uint32_t end = (k + 1) * block < q->n ? (k + 1) * block : q->n;

	return end > k * block ? end - k * block : 0;
}

#endif
