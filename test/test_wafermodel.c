/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * lib/wafermodel on cases worked by hand: a request alone, queueing for the
 * compute, queueing for a slot, a refill that overlaps another's prefill,
 * ties, and what is refused. test_emulator.c checks the model against the
 * emulator itself on the same arrivals.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <math.h>

#include "wafermodel.h"

#define US 1000ull
#define MS 1000000ull

/* 1 token a us, 2 us of overhead. */
static const struct wafermodel_params one = {.slots = 1, .tokens_per_ns = 1e-3, .overhead_ns = 2 * US};

Test(wafermodel, a_request_alone_waits_its_refill_then_its_prefill)
{
	struct wafermodel_request r = {.arrival_ns = 5 * MS, .computed = 10, .refill_ns = 7 * US};
	uint64_t t;

	cr_assert_eq(wafermodel_ttft(&one, &r, 1, &t), 0);
	cr_assert_eq(t, 7 * US + 10 * US + 2 * US, "refill 7 + 10 tokens + overhead 2: %lu", (unsigned long)t);
	cr_assert_eq(wafermodel_prefill_ns(&one, 10), 12 * US);
}

Test(wafermodel, one_slot_queues_the_second_behind_the_first)
{
	/* Both at 0: the second begins when the first's prefill ends (12 us). */
	struct wafermodel_request r[2] = {{0, 10, 0}, {0, 10, 0}};
	uint64_t t[2];

	cr_assert_eq(wafermodel_ttft(&one, r, 2, t), 0);
	cr_assert_eq(t[0], 12 * US);
	cr_assert_eq(t[1], 24 * US, "the slot's wait counts: %lu", (unsigned long)t[1]);
}

Test(wafermodel, two_slots_share_one_compute_and_a_refill_overlaps_a_prefill)
{
	struct wafermodel_params p = one;
	/* A computes 10 (12 us, from 0); B refills 5 us meanwhile, then waits
	 * for the compute (free at 12) and computes 4 (6 us): 18. C arrives at
	 * 1, waits for a slot (A's, free at 12), refills 3 (to 15), computes
	 * after B (18) for 2 + 2: 22, so 21 after its arrival. */
	struct wafermodel_request r[3] = {{0, 10, 0}, {0, 4, 5 * US}, {1 * US, 2, 3 * US}};
	uint64_t t[3];

	p.slots = 2;
	cr_assert_eq(wafermodel_ttft(&p, r, 3, t), 0);
	cr_assert_eq(t[0], 12 * US);
	cr_assert_eq(t[1], 18 * US, "%lu", (unsigned long)t[1]);
	cr_assert_eq(t[2], 21 * US, "%lu", (unsigned long)t[2]);
}

Test(wafermodel, the_first_ready_is_served_first_not_the_first_begun)
{
	struct wafermodel_params p = one;
	/* A begins first but refills 100 us; B, with nothing to refill,
	 * computes first (0 to 12); A's prefill then starts at 100. */
	struct wafermodel_request r[2] = {{0, 10, 100 * US}, {0, 10, 0}};
	uint64_t t[2];

	p.slots = 2;
	cr_assert_eq(wafermodel_ttft(&p, r, 2, t), 0);
	cr_assert_eq(t[1], 12 * US);
	cr_assert_eq(t[0], 112 * US);
}

Test(wafermodel, a_slot_freed_at_an_arrival_is_taken_at_once)
{
	/* The first's prefill ends at 12 us, when the second arrives. */
	struct wafermodel_request r[2] = {{0, 10, 0}, {12 * US, 10, 0}};
	uint64_t t[2];

	cr_assert_eq(wafermodel_ttft(&one, r, 2, t), 0);
	cr_assert_eq(t[1], 12 * US, "no wait: %lu", (unsigned long)t[1]);
}

Test(wafermodel, free_compute_costs_only_the_overhead_and_no_overhead_nothing)
{
	struct wafermodel_params p = {.slots = 1, .tokens_per_ns = 0, .overhead_ns = 0};
	struct wafermodel_request r[2] = {{0, 1000, 0}, {0, 1000, 3 * US}};
	uint64_t t[2];

	cr_assert_eq(wafermodel_ttft(&p, r, 2, t), 0);
	cr_assert_eq(t[0], 0);
	cr_assert_eq(t[1], 3 * US, "its refill alone");
}

Test(wafermodel, a_long_run_in_order_keeps_every_request_and_the_compute_busy)
{
	/* 10,000 requests arriving every 10 us, each 12 us of compute on 4
	 * slots: the compute is the bottleneck, so the last one's TTFT grows
	 * by 2 us a request: about 20 ms. */
	enum { N = 10000 };
	static struct wafermodel_request r[N];
	static uint64_t t[N];
	struct wafermodel_params p = one;
	size_t i;

	p.slots = 4;
	for (i = 0; i < N; i++)
		r[i] = (struct wafermodel_request){i * 10 * US, 10, 0};
	cr_assert_eq(wafermodel_ttft(&p, r, N, t), 0);
	/* Served in order, back to back: request i ends at 12 (i + 1) us. */
	for (i = 0; i < N; i++)
		cr_assert_eq(t[i], 12 * US * (i + 1) - r[i].arrival_ns, "request %zu", i);
}

Test(wafermodel, what_cannot_be_modelled_is_refused)
{
	struct wafermodel_request r[2] = {{5, 1, 0}, {4, 1, 0}};
	struct wafermodel_params p = one;
	uint64_t t[2];

	cr_assert_eq(wafermodel_ttft(&one, r, 2, t), -EINVAL, "arrivals going back");
	r[1].arrival_ns = 5;
	p.slots = 0;
	cr_assert_eq(wafermodel_ttft(&p, r, 2, t), -EINVAL, "no slot");
	p.slots = 1;
	p.tokens_per_ns = -1;
	cr_assert_eq(wafermodel_ttft(&p, r, 2, t), -EINVAL, "a negative rate");
	p.tokens_per_ns = NAN;
	cr_assert_eq(wafermodel_ttft(&p, r, 2, t), -EINVAL, "NaN");
	cr_assert_eq(wafermodel_ttft(&one, r, 0, t), 0, "nothing to model");
}

Test(wafermodel, a_prefill_that_costs_nothing_does_not_wait_for_the_compute)
{
	/* The emulator does not queue a prefill of no cost: the second, whole
	 * from its refill at 3 us with nothing to compute, has its first token
	 * then, while the first computes to 10 us. */
	struct wafermodel_params p = {.slots = 2, .tokens_per_ns = 1e-3, .overhead_ns = 0};
	struct wafermodel_request r[2] = {{0, 10, 0}, {0, 0, 3 * US}};
	uint64_t t[2];

	cr_assert_eq(wafermodel_ttft(&p, r, 2, t), 0);
	cr_assert_eq(t[0], 10 * US);
	cr_assert_eq(t[1], 3 * US, "queued behind the first: %lu", (unsigned long)t[1]);
}

Test(wafermodel, a_rate_near_zero_is_held_not_wrapped)
{
	struct wafermodel_params p = {.slots = 1, .tokens_per_ns = 1e-300, .overhead_ns = 0};
	struct wafermodel_request r[3] = {{0, 1000, 0}, {0, 1000, 0}, {0, 1000, 0}};
	uint64_t t[3];

	cr_assert_eq(wafermodel_ttft(&p, r, 3, t), 0);
	cr_assert(t[0] > 0 && t[0] < t[1] && t[1] < t[2], "%lu %lu %lu: in order, never wrapped",
		  (unsigned long)t[0], (unsigned long)t[1], (unsigned long)t[2]);
}

/*
 * More prefills of the 2^50 ns a rate near 0 is held at than 2^64 ns
 * holds (16,400 of them, all at 0 on 4,096 slots): the queue's end is held
 * at its most, never wrapped to a small time; the times to first token
 * never fall as the requests go.
 */
Test(wafermodel, a_queue_past_what_a_clock_holds_is_held_not_wrapped)
{
	struct wafermodel_params p = {.slots = 4096, .tokens_per_ns = 1e-300, .overhead_ns = 0};
	size_t n = 16400, i;
	struct wafermodel_request *r = calloc(n, sizeof(*r));
	uint64_t *t = calloc(n, sizeof(*t));

	cr_assert(r != NULL && t != NULL);
	for (i = 0; i < n; i++)
		r[i].computed = 1;
	cr_assert_eq(wafermodel_ttft(&p, r, n, t), 0);
	for (i = 1; i < n; i++)
		cr_assert_geq(t[i], t[i - 1], "request %zu's time fell: %lu after %lu", i,
			      (unsigned long)t[i], (unsigned long)t[i - 1]);
	cr_assert_eq(t[n - 1], UINT64_MAX, "the last held at the clock's end");
	free(r);
	free(t);
}

/* What a chooser saw (each request's index and wait) and what it chose. */
struct seen {
	size_t n, i[4];
	uint64_t wait[4];
};

/* The second request's refill taken only behind a queue (as a driver's
 * rule); its arrival moved, which the model must not take. */
static void
choose_behind_queue(void *arg, size_t i, uint64_t wait_ns, struct wafermodel_request *r)
{
	struct seen *s = arg;

	s->i[s->n] = i;
	s->wait[s->n++] = wait_ns;
	if (i == 1 && wait_ns > 0) {
		r->computed = 2;
		r->refill_ns = 5 * US;
	}
	r->arrival_ns = 0; /* never the model's order */
}

/*
 * Two slots, one compute (1 token a us, 2 us overhead). The first, 10
 * tokens at 0, computes 0 to 12 us; the second arrives at 4 us with 10
 * tokens, and begins with 8 us of the first's prefill queued: the chooser
 * is told 8 us and makes it 2 tokens behind a 5 us refill (ready at 9,
 * computed 12 to 16: TTFT 12). The third, at 20 us, finds the compute
 * free (0). The requests given stay as they were.
 */
Test(wafermodel, a_chooser_is_told_the_queue_at_each_begin_and_its_choice_is_run)
{
	static const struct wafermodel_params two = {
	    .slots = 2, .tokens_per_ns = 1e-3, .overhead_ns = 2 * US};
	struct wafermodel_request r[3] = {{0, 10, 0}, {4 * US, 10, 0}, {20 * US, 10, 0}};
	struct seen s = {0};
	uint64_t t[3], plain[3];

	cr_assert_eq(wafermodel_ttft_chosen(&two, r, 3, t, choose_behind_queue, &s), 0);
	cr_assert_eq(s.n, 3);
	for (size_t k = 0; k < 3; k++)
		cr_assert_eq(s.i[k], k, "begun in order");
	cr_assert_eq(s.wait[0], 0);
	cr_assert_eq(s.wait[1], 8 * US, "queued ahead of the second: %lu",
		     (unsigned long)s.wait[1]);
	cr_assert_eq(s.wait[2], 0);
	cr_assert_eq(t[0], 12 * US);
	cr_assert_eq(t[1], 12 * US, "its choice run: %lu", (unsigned long)t[1]);
	cr_assert_eq(t[2], 12 * US);
	cr_assert_eq(r[1].computed, 10, "the caller's requests are not written");
	cr_assert_eq(r[1].refill_ns, 0);
	/* Without the chooser: the second computes 10 tokens from 12 us (TTFT 20). */
	cr_assert_eq(wafermodel_ttft_chosen(&two, r, 3, plain, NULL, NULL), 0);
	cr_assert_eq(plain[1], 20 * US);
}

/*
 * Requests arriving at one instant are all looked up before any of their
 * prefills is queued (the emulator's step starts its sequences, then
 * queues the prefills of those whose data is whole): three at 0 on eight
 * slots, nothing to refill, are each told no queue; the prefills then
 * queue one behind another (12, 24, 36 us).
 */
Test(wafermodel, requests_begun_at_one_instant_are_told_the_queue_before_it)
{
	static const struct wafermodel_params eight = {
	    .slots = 8, .tokens_per_ns = 1e-3, .overhead_ns = 2 * US};
	struct wafermodel_request r[3] = {{0, 10, 0}, {0, 10, 0}, {0, 10, 0}};
	struct seen s = {0};
	uint64_t t[3];

	cr_assert_eq(wafermodel_ttft_chosen(&eight, r, 3, t, choose_behind_queue, &s), 0);
	cr_assert_eq(s.n, 3);
	for (size_t k = 0; k < 3; k++)
		cr_assert_eq(s.wait[k], 0, "request %zu told %lu ns queued", k,
			     (unsigned long)s.wait[k]);
	cr_assert_eq(t[0], 12 * US);
	cr_assert_eq(t[1], 24 * US);
	cr_assert_eq(t[2], 36 * US);
}
