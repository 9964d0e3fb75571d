/* SPDX-License-Identifier: BSD-3-Clause */
/* A wafer's times to first token, computed: wafermodel.h. */
#include "wafermodel.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>

/*
 * The events of a discrete-event run, in a binary heap by time, then kind
 * (a slot freed before a refill done before a begin at the same instant,
 * as the emulator's step ends sequences, then runs those whose data is
 * whole), then request (the first arrived first).
 */
enum { EV_FREE, EV_READY, EV_ARRIVE };

struct ev {
	uint64_t t;
	uint32_t kind;
	uint32_t i;
};

struct heap {
	struct ev *v;
	size_t n;
};

static bool
before(const struct ev *a, const struct ev *b)
{
	if (a->t != b->t)
		return a->t < b->t;
	if (a->kind != b->kind)
		return a->kind < b->kind;
	return a->i < b->i;
}

static void
push(struct heap *h, struct ev e)
{
	size_t k = h->n++;

	while (k > 0 && before(&e, &h->v[(k - 1) / 2])) {
		h->v[k] = h->v[(k - 1) / 2];
		k = (k - 1) / 2;
	}
	h->v[k] = e;
}

static struct ev
pop(struct heap *h)
{
	struct ev top = h->v[0], last = h->v[--h->n];
	size_t k = 0;

	for (;;) {
		size_t c = 2 * k + 1;

		if (c >= h->n)
			break;
		if (c + 1 < h->n && before(&h->v[c + 1], &h->v[c]))
			c++;
		if (!before(&h->v[c], &last))
			break;
		h->v[k] = h->v[c];
		k = c;
	}
	if (h->n > 0)
		h->v[k] = last;
	return top;
}

uint64_t
wafermodel_prefill_ns(const struct wafermodel_params *p, uint32_t computed)
{
	double ns = (double)p->overhead_ns;

	if (p->tokens_per_ns > 0)
		ns += (double)computed / p->tokens_per_ns;
	/* A rate near 0 (1e-300 tokens/ns) is held at 2^50 ns (13 days),
	 * never a double past what a uint64_t holds; the queue's sums
	 * saturate (sat_add) rather than wrap. */
	return ns < (double)(1ull << 50) ? (uint64_t)ns : 1ull << 50;
}

/* a + b, held at UINT64_MAX: 2^14 prefills of 2^50 ns queued would wrap. */
static inline uint64_t
sat_add(uint64_t a, uint64_t b)
{
	return a > UINT64_MAX - b ? UINT64_MAX : a + b;
}

int
wafermodel_ttft(const struct wafermodel_params *p, const struct wafermodel_request *r, size_t n,
		uint64_t *ttft_ns)
{
	return wafermodel_ttft_chosen(p, r, n, ttft_ns, NULL, NULL);
}

int
wafermodel_ttft_chosen(const struct wafermodel_params *p, const struct wafermodel_request *r0,
		       size_t n, uint64_t *ttft_ns, wafermodel_choose_fn choose, void *arg)
{
	/* At most: every request's arrival or begin (one at a time: the
	 * next is pushed when this one is taken), its refill done, its slot
	 * freed. */
	struct heap h = {.v = malloc(sizeof(struct ev) * (2 * n + 2)), .n = 0};
	/* The requests as chosen at their begins, read through r (@p r0
	 * itself where nothing chooses). */
	struct wafermodel_request *w = choose != NULL ? malloc(sizeof(*w) * (n ? n : 1)) : NULL;
	const struct wafermodel_request *r = choose != NULL ? w : r0;
	/* The compute's end as it stood when the instant being run began:
	 * what a begin at that instant is told is queued (the emulator starts
	 * its new sequences, and looks them up, before it queues the prefills
	 * of those whose data became whole at the same instant). */
	uint64_t compute_free = 0, instant = UINT64_MAX, free_then = 0;
	size_t waiting_from = 0, arrived = 0, i;
	uint32_t free_slots;
	int rc = 0;

	if (h.v == NULL || (choose != NULL && w == NULL)) {
		rc = -ENOMEM;
		goto out;
	}
	for (i = 0; w != NULL && i < n; i++)
		w[i] = r0[i];
	if (p->slots == 0 || !(p->tokens_per_ns >= 0)) {
		rc = -EINVAL;
		goto out;
	}
	for (i = 1; i < n; i++)
		if (r[i].arrival_ns < r[i - 1].arrival_ns) {
			rc = -EINVAL;
			goto out;
		}
	free_slots = p->slots;
	if (n > 0)
		push(&h, (struct ev){r[0].arrival_ns, EV_ARRIVE, 0});
	while (h.n > 0) {
		struct ev e = pop(&h);

		if (e.t != instant) {
			instant = e.t;
			free_then = compute_free;
		}
		switch (e.kind) {
		case EV_ARRIVE:
			arrived = e.i + 1;
			if (arrived < n)
				push(&h, (struct ev){r[arrived].arrival_ns, EV_ARRIVE, (uint32_t)arrived});
			break;
		case EV_READY: {
			/* Its data is whole: its prefill, after those before it. */
			uint64_t cost = wafermodel_prefill_ns(p, r[e.i].computed);
			uint64_t start = compute_free > e.t ? compute_free : e.t;
			uint64_t end = sat_add(start, cost);

			/* Nothing to compute: the emulator does not queue it. */
			if (cost == 0)
				end = e.t;
			else
				compute_free = end;
			ttft_ns[e.i] = end - r[e.i].arrival_ns;
			push(&h, (struct ev){end, EV_FREE, e.i});
			break;
		}
		case EV_FREE:
			free_slots++;
			break;
		}
		/* Whoever has arrived and waits takes a free slot, in order. */
		while (free_slots > 0 && waiting_from < arrived) {
			size_t k = waiting_from++;
			uint64_t begin = e.t > r[k].arrival_ns ? e.t : r[k].arrival_ns;

			free_slots--;
			if (choose != NULL) {
				choose(arg, k, free_then > begin ? free_then - begin : 0, &w[k]);
				/* Its place in the arrivals is not the chooser's. */
				w[k].arrival_ns = r0[k].arrival_ns;
			}
			push(&h,
			     (struct ev){sat_add(begin, r[k].refill_ns), EV_READY, (uint32_t)k});
		}
	}
out:
	free(h.v);
	free(w);
	return rc;
}
