/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * lib/ilist: each operation at each place (the only element, the head, the
 * tail, the middle), links kept inside a struct at an offset and in an
 * array of their own, and a randomized run against a plain array in list
 * order (the seed is printed: KVSS_SEED=N replays it).
 */
#include <criterion/criterion.h>
#include <stdint.h>
#include <string.h>

#include "ilist.h"
#include "test_rng.h"

#define N 64

/* The link deliberately not first, and the struct not a multiple of it. */
struct item {
	uint64_t key;
	uint8_t pad;
	struct ilist_link lru;
	uint16_t tail_pad;
};

/* The list from head to tail into @p out; checks prev against next on the way. */
static unsigned int
walk(const struct ilist *l, struct ilist_links v, uint32_t *out)
{
	uint32_t i, prev = ILIST_NIL;
	unsigned int n = 0;

	for (i = l->head; i != ILIST_NIL; i = ilist_next(v, i)) {
		cr_assert_lt(n, N, "a cycle");
		cr_assert_eq(ilist_prev(v, i), prev, "%u's prev is %u, want %u", i, ilist_prev(v, i), prev);
		out[n++] = i;
		prev = i;
	}
	cr_assert_eq(l->tail, prev, "tail %u, want %u", l->tail, prev);
	return n;
}

static void
expect_order(const struct ilist *l, struct ilist_links v, const uint32_t *want, unsigned int n)
{
	uint32_t got[N];
	unsigned int k, m = walk(l, v, got);

	cr_assert_eq(m, n, "%u elements, want %u", m, n);
	for (k = 0; k < n; k++)
		cr_assert_eq(got[k], want[k], "at %u: %u, want %u", k, got[k], want[k]);
}

/* @p l made 0 1 .. n-1, head to tail, each pushed at the tail. */
static void
count_up(struct ilist *l, struct ilist_links v, uint32_t n)
{
	uint32_t i;

	ilist_init(l);
	for (i = 0; i < n; i++)
		ilist_push_tail(l, v, i);
}

Test(ilist, an_empty_list_has_no_ends)
{
	struct ilist l;

	ilist_init(&l);
	cr_expect_eq(l.head, ILIST_NIL);
	cr_expect_eq(l.tail, ILIST_NIL);
}

Test(ilist, the_only_element_is_head_and_tail_and_leaves_it_empty)
{
	struct item it[N];
	struct ilist_links v = ILIST_LINKS(it, lru);
	struct ilist l;

	ilist_init(&l);
	ilist_push_head(&l, v, 7);
	cr_expect_eq(l.head, 7);
	cr_expect_eq(l.tail, 7);
	cr_expect_eq(ilist_prev(v, 7), ILIST_NIL);
	cr_expect_eq(ilist_next(v, 7), ILIST_NIL);
	ilist_unlink(&l, v, 7);
	cr_expect_eq(l.head, ILIST_NIL);
	cr_expect_eq(l.tail, ILIST_NIL);
	ilist_push_tail(&l, v, 3);
	cr_expect_eq(l.head, 3);
	cr_expect_eq(l.tail, 3);
}

Test(ilist, push_head_and_tail_and_insert_before_keep_order)
{
	struct item it[N];
	struct ilist_links v = ILIST_LINKS(it, lru);
	struct ilist l;

	ilist_init(&l);
	ilist_push_head(&l, v, 1);			     /* 1 */
	ilist_push_head(&l, v, 2);			     /* 2 1 */
	ilist_push_tail(&l, v, 3);			     /* 2 1 3 */
	ilist_insert_before(&l, v, 4, 1);		     /* 2 4 1 3 */
	ilist_insert_before(&l, v, 5, 2);		     /* 5 2 4 1 3: before the head */
	ilist_insert_before(&l, v, 6, ILIST_NIL);	     /* 5 2 4 1 3 6: at the tail */
	expect_order(&l, v, (const uint32_t[]){5, 2, 4, 1, 3, 6}, 6);
}

Test(ilist, unlink_at_head_middle_and_tail)
{
	struct item it[N];
	struct ilist_links v = ILIST_LINKS(it, lru);
	struct ilist l;

	count_up(&l, v, 5); /* 0 1 2 3 4 */
	ilist_unlink(&l, v, 2);
	expect_order(&l, v, (const uint32_t[]){0, 1, 3, 4}, 4);
	ilist_unlink(&l, v, 0);
	expect_order(&l, v, (const uint32_t[]){1, 3, 4}, 3);
	ilist_unlink(&l, v, 4);
	expect_order(&l, v, (const uint32_t[]){1, 3}, 2);
}

Test(ilist, move_head_is_just_used)
{
	struct item it[N];
	struct ilist_links v = ILIST_LINKS(it, lru);
	struct ilist l;

	count_up(&l, v, 4);	   /* 0 1 2 3 */
	ilist_move_head(&l, v, 0); /* already the head: nothing moves */
	expect_order(&l, v, (const uint32_t[]){0, 1, 2, 3}, 4);
	ilist_move_head(&l, v, 3);
	expect_order(&l, v, (const uint32_t[]){3, 0, 1, 2}, 4);
	ilist_move_head(&l, v, 1);
	expect_order(&l, v, (const uint32_t[]){1, 3, 0, 2}, 4);
}

Test(ilist, the_links_touch_nothing_else_of_an_element)
{
	struct item it[N];
	struct ilist_links v = ILIST_LINKS(it, lru);
	struct ilist l;
	uint32_t i;

	memset(it, 0xa5, sizeof(it));
	for (i = 0; i < N; i++)
		it[i].key = i * 1000003u;
	ilist_init(&l);
	for (i = 0; i < N; i++)
		ilist_push_head(&l, v, i);
	for (i = 0; i < N; i += 3)
		ilist_unlink(&l, v, i);
	for (i = 0; i < N; i++) {
		cr_assert_eq(it[i].key, i * 1000003u);
		cr_assert_eq(it[i].pad, 0xa5);
		cr_assert_eq(it[i].tail_pad, 0xa5a5);
	}
}

/* A plain array in list order: the model. */
struct model {
	uint32_t v[N];
	unsigned int n;
	int on[N]; /* is it on the list? */
};

static unsigned int
model_find(const struct model *m, uint32_t i)
{
	unsigned int k;

	for (k = 0; k < m->n && m->v[k] != i; k++)
		;
	return k;
}

static void
model_insert_at(struct model *m, unsigned int k, uint32_t i)
{
	memmove(m->v + k + 1, m->v + k, (m->n - k) * sizeof(m->v[0]));
	m->v[k] = i;
	m->n++;
	m->on[i] = 1;
}

static void
model_remove(struct model *m, uint32_t i)
{
	unsigned int k = model_find(m, i);

	memmove(m->v + k, m->v + k + 1, (m->n - k - 1) * sizeof(m->v[0]));
	m->n--;
	m->on[i] = 0;
}

Test(ilist, random_operations_agree_with_an_array)
{
	struct ilist_link links[N]; /* an array of links alone, as app/trace's oracle keeps */
	struct ilist_links v = ILIST_LINK_ARRAY(links);
	uint64_t rng = test_seed("ilist", 0x11571);
	struct model m = {0};
	struct ilist l;
	unsigned int op;

	ilist_init(&l);
	for (op = 0; op < 200000; op++) {
		uint32_t i = (uint32_t)(test_xorshift(&rng) % N);
		unsigned int what = (unsigned int)(test_xorshift(&rng) % 5);

		if (!m.on[i]) {
			if (what == 0 || m.n == 0) {
				ilist_push_head(&l, v, i);
				model_insert_at(&m, 0, i);
			} else if (what == 1) {
				ilist_push_tail(&l, v, i);
				model_insert_at(&m, m.n, i);
			} else {
				unsigned int k = (unsigned int)(test_xorshift(&rng) % m.n);

				ilist_insert_before(&l, v, i, m.v[k]);
				model_insert_at(&m, k, i);
			}
		} else if (what < 2) {
			ilist_move_head(&l, v, i);
			model_remove(&m, i);
			model_insert_at(&m, 0, i);
		} else {
			ilist_unlink(&l, v, i);
			model_remove(&m, i);
		}
		if (op % 97 == 0)
			expect_order(&l, v, m.v, m.n);
	}
	expect_order(&l, v, m.v, m.n);
}
