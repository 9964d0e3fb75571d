/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * lib/wafermodel: the time to first token (TTFT) of each request on a wafer
 * as the emulator runs one (app/kvss/emulator), computed rather than run: a
 * model for sizing (kvss-trace) and for the baseline a run is compared with
 * (the same arrivals with the cache off), without the system.
 *
 * The wafer: requests arrive in order; each begins when it has arrived and
 * one of `slots` run slots is free (the first arrived first); its refill
 * takes `refill_ns` from its begin; then its prefill waits for the wafer's
 * one compute (first ready, first served) and takes
 * computed / tokens_per_ns + overhead_ns; its first token is at the end of
 * its prefill, and its slot is free again then (the emulator sends the rest
 * of its tokens, and decoding takes no time: the model frees the slot at the
 * first token, the emulator a few steps later, once it has sent the
 * rest, step_tokens a step). A prefill that costs nothing does not wait
 * for the compute. TTFT is first token minus arrival. Events at one instant: slots freed first, then refills done,
 * then begins. No DPDK, no clock: a function of its inputs.
 */
#ifndef KVSS_WAFERMODEL_H
#define KVSS_WAFERMODEL_H

#include <stddef.h>
#include <stdint.h>

struct wafermodel_params {
	uint32_t slots;	      /**< run slots (wafer.max_inflight), at least 1 */
	double tokens_per_ns; /**< the prefill rate (0: computing is free) */
	uint64_t overhead_ns; /**< a prefill's fixed cost, whatever its tokens */
};

struct wafermodel_request {
	uint64_t arrival_ns; /**< not below the request's before */
	uint32_t computed;   /**< prompt tokens its prefill computes */
	uint64_t refill_ns;  /**< its refill's time from its begin (0: none) */
};

/**
 * Each request's TTFT, in ns, into @p ttft_ns[n]. @return 0, or -EINVAL
 * (no slot, a negative or NaN rate, arrivals going back), -ENOMEM.
 */
int wafermodel_ttft(const struct wafermodel_params *p, const struct wafermodel_request *r, size_t n,
		    uint64_t *ttft_ns);

/**
 * Called as request @p i begins, with @p wait_ns the prefills already
 * queued on the compute then (its end past the begin, 0 if free; as the
 * emulator's driver is told at the lookup: not the prefills queued at that
 * same instant, whose refills ended with it): the
 * caller may set the request's computed tokens and refill time at *@p r
 * as a driver chooses at its lookup (refill a hit, or compute it, by
 * whether its refill ends before the queue and its computing would).
 */
typedef void (*wafermodel_choose_fn)(void *arg, size_t i, uint64_t wait_ns,
				     struct wafermodel_request *r);

/**
 * wafermodel_ttft(), each request's computed tokens and refill time as
 * @p choose sets them at its begin (from @p r's, which stay as they are).
 */
int wafermodel_ttft_chosen(const struct wafermodel_params *p, const struct wafermodel_request *r,
			   size_t n, uint64_t *ttft_ns, wafermodel_choose_fn choose, void *arg);

/** One prefill of @p computed tokens (0 for a free compute, but the overhead). */
uint64_t wafermodel_prefill_ns(const struct wafermodel_params *p, uint32_t computed);

#endif
