/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * lib/ilist: a doubly linked list of array elements by index, intrusive:
 * each element carries its own struct ilist_link (the indices of its
 * neighbours), so putting an element on a list, moving it to an end or
 * taking it off allocates nothing and costs O(1), and the array may be
 * reallocated (a list holds indices, never pointers). An element is on at
 * most one list per link it carries; the list does not know which
 * elements are on it, the caller does (an LRU's "is it held?").
 *
 * A list's two ends are head and tail: ilist_push_head adds at the head,
 * so an LRU keeps its most recent element at the head and frees from the
 * tail. ILIST_NIL is "none": an empty list's ends, the head's prev, the
 * tail's next.
 *
 * The functions are told where the links are by a struct ilist_links
 * (ILIST_LINKS(array, field)): element i's link is at
 * base + i * stride + offset, so one list code serves links kept inside a
 * struct of any layout, or in an array of links of their own. Header only
 * (static inline: one load and store per neighbour once inlined). No DPDK.
 */
#ifndef KVSS_ILIST_H
#define KVSS_ILIST_H

#include <stddef.h>
#include <stdint.h>

#define ILIST_NIL UINT32_MAX

/** An element's place on a list: its neighbours' indices, or ILIST_NIL. */
struct ilist_link {
	uint32_t prev; /* towards the head */
	uint32_t next; /* towards the tail */
};

/** A list: its ends' indices, ILIST_NIL when empty. */
struct ilist {
	uint32_t head, tail;
};

/** Where a list's elements keep their links (ILIST_LINKS). */
struct ilist_links {
	void *base;	/* the array's first element */
	size_t stride;	/* bytes from one element to the next */
	size_t offset;	/* of the link within an element */
};

/** The links of @p array (a pointer to its elements), each in its member @p field. */
#define ILIST_LINKS(array, field)                                                                 \
	((struct ilist_links){(void *)(array), sizeof(*(array)),                                   \
			      offsetof(__typeof__(*(array)), field)})

/** An array of struct ilist_link alone (one per element, beside the elements). */
#define ILIST_LINK_ARRAY(links)                                                                   \
	((struct ilist_links){(void *)(links), sizeof(struct ilist_link), 0})

/** Element @p i's link. */
static inline struct ilist_link *
ilist_link(struct ilist_links v, uint32_t i)
{
	return (struct ilist_link *)((char *)v.base + (size_t)i * v.stride + v.offset);
}

/** Make @p l empty (its elements' links are left as they were). */
static inline void
ilist_init(struct ilist *l)
{
	l->head = l->tail = ILIST_NIL;
}

/** The element after @p i (towards the tail), or ILIST_NIL. */
static inline uint32_t
ilist_next(struct ilist_links v, uint32_t i)
{
	return ilist_link(v, i)->next;
}

/** The element before @p i (towards the head), or ILIST_NIL. */
static inline uint32_t
ilist_prev(struct ilist_links v, uint32_t i)
{
	return ilist_link(v, i)->prev;
}

/**
 * Take @p i, which must be on @p l, off it. Its own link is left as it
 * was (a caller may reuse it, as a free list's next).
 */
static inline void
ilist_unlink(struct ilist *l, struct ilist_links v, uint32_t i)
{
	const struct ilist_link *e = ilist_link(v, i);

	if (e->prev != ILIST_NIL)
		ilist_link(v, e->prev)->next = e->next;
	else
		l->head = e->next;
	if (e->next != ILIST_NIL)
		ilist_link(v, e->next)->prev = e->prev;
	else
		l->tail = e->prev;
}

/**
 * Put @p i, which must be on no list of this link, on @p l just before
 * @p at (on the head's side of it); @p at ILIST_NIL: at the tail.
 */
static inline void
ilist_insert_before(struct ilist *l, struct ilist_links v, uint32_t i, uint32_t at)
{
	struct ilist_link *e = ilist_link(v, i);

	e->next = at;
	e->prev = at != ILIST_NIL ? ilist_link(v, at)->prev : l->tail;
	if (e->prev != ILIST_NIL)
		ilist_link(v, e->prev)->next = i;
	else
		l->head = i;
	if (at != ILIST_NIL)
		ilist_link(v, at)->prev = i;
	else
		l->tail = i;
}

/** Put @p i (on no list of this link) at the head of @p l. */
static inline void
ilist_push_head(struct ilist *l, struct ilist_links v, uint32_t i)
{
	ilist_insert_before(l, v, i, l->head);
}

/** Put @p i (on no list of this link) at the tail of @p l. */
static inline void
ilist_push_tail(struct ilist *l, struct ilist_links v, uint32_t i)
{
	ilist_insert_before(l, v, i, ILIST_NIL);
}

/** Move @p i, which is on @p l, to its head (an LRU's "just used"). */
static inline void
ilist_move_head(struct ilist *l, struct ilist_links v, uint32_t i)
{
	if (l->head == i)
		return;
	ilist_unlink(l, v, i);
	ilist_push_head(l, v, i);
}

#endif
