/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * kvss-trace --ttft (trace_priv.h): sizing for what a user waits, the time
 * to first token (TTFT). A replay's requests, each with the hit the driver
 * library gave it and the part of that hit that came up from the second
 * tier, are put on a wafer by lib/wafermodel at the arrivals asked, three
 * ways on the same arrivals: compute-only (the cache off: every prompt
 * computed), io-only (every hit refilled) and adaptive (a hit refilled only
 * where the driver's rule says reading it beats computing it). Their p50
 * and p99 go under the replay's row, or into its JSON object.
 *
 * The replay takes every hit (its recompute rule is off with --ttft:
 * trace_run.c), so io-only is what it did and adaptive is the rule applied
 * to each of its hits afterwards: what the adaptive driver keeps or evicts
 * differently from then on is not replayed.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include "percentile.h"
#include "trace_priv.h"
#include "wafermodel.h"

const char *const ttft_opt_names[TTFT_OPTS] = {
	"--arrivals", "--time-scale", "--arrival-rate", "--arrival-seed", "--max-inflight",
	"--prefill-overhead-us", "--refill-latency-us", "--refill-read-gbps"};

int
ttft_check(const struct opts *o)
{
	unsigned int k;

	if (!o->ttft) {
		for (k = 0; k < TTFT_OPTS; k++)
			if (o->ttft_given & (1u << k)) {
				fprintf(stderr, "kvss-trace: %s: shapes --ttft's times to first token: "
						"give --ttft\n", ttft_opt_names[k]);
				return 2;
			}
		return 0;
	}
	if (o->recompute_tps == 0 || o->kv_bytes == 0) {
		fprintf(stderr, "kvss-trace: --ttft needs %s%s%s\n",
			o->recompute_tps == 0 ? "--recompute-tokens-per-s (the wafer's prefill rate, "
						"tokens/s)" : "",
			o->recompute_tps == 0 && o->kv_bytes == 0 ? " and " : "",
			o->kv_bytes == 0 ? "--kv-bytes-per-token (the KV bytes a refill moves per "
					   "token)" : "");
		return 2;
	}
	/* An option the arrivals asked do not read would be ignored without a word. */
	if (o->arrivals == TTFT_ARRIVALS_TRACE &&
	    (o->ttft_given & (1u << TTFT_OPT_ARRIVAL_RATE | 1u << TTFT_OPT_ARRIVAL_SEED))) {
		fprintf(stderr, "kvss-trace: %s: for --arrivals poisson (the arrivals are the trace's "
				"times, --arrivals trace)\n",
			ttft_opt_names[o->ttft_given & (1u << TTFT_OPT_ARRIVAL_RATE)
					       ? TTFT_OPT_ARRIVAL_RATE
					       : TTFT_OPT_ARRIVAL_SEED]);
		return 2;
	}
	if (o->arrivals == TTFT_ARRIVALS_POISSON && (o->ttft_given & (1u << TTFT_OPT_TIME_SCALE))) {
		fprintf(stderr, "kvss-trace: --time-scale: for --arrivals trace (scales the trace's "
				"times; --arrival-rate sets a Poisson process's)\n");
		return 2;
	}
	/* One wafer: replicas would be as many wafers, each with its own compute. */
	if (o->replicas > 1) {
		fprintf(stderr, "kvss-trace: --ttft models one wafer: not with --replicas %u\n",
			o->replicas);
		return 2;
	}
	return 0;
}

int
ttft_arrivals(const struct opts *o, const struct workload *t, size_t n, uint64_t **arrival_ns)
{
	char err[256];

	*arrival_ns = malloc(sizeof(**arrival_ns) * (n ? n : 1));
	if (*arrival_ns == NULL) {
		fprintf(stderr, "kvss-trace: out of memory\n");
		return 1;
	}
	if (workload_arrivals(t, n, o->time_scale,
			      o->arrivals == TTFT_ARRIVALS_POISSON ? o->arrival_rate : 0,
			      o->arrival_seed, *arrival_ns, err, sizeof(err)) != 0) {
		fprintf(stderr, "kvss-trace: --ttft --arrivals %s: %s: %s\n",
			o->arrivals == TTFT_ARRIVALS_POISSON ? "poisson" : "trace",
			o->trace != NULL ? o->trace : "the built-in workload", err);
		free(*arrival_ns);
		*arrival_ns = NULL;
		return 2;
	}
	return 0;
}

enum ttft_mode { TTFT_COMPUTE_ONLY, TTFT_IO_ONLY, TTFT_ADAPTIVE, TTFT_MODES };

/* One level's refill line: latency + tokens x bytes per token / bandwidth (as pc_lookup.c's). */
static uint64_t
line_ns(const struct opts *o, double latency_us, double gb_per_s, uint32_t tokens)
{
	/* GB/s is bytes per ns. */
	double ns = latency_us * 1000 + (double)tokens * (double)o->kv_bytes / gb_per_s;

	/* A bandwidth near 0 is held at 2^50 ns (13 days): never a double
	 * past what a uint64_t holds (undefined); lib/wafermodel's sums
	 * saturate. */
	return ns < (double)(1ull << 50) ? (uint64_t)ns : 1ull << 50;
}

/*
 * Reading @p tokens in @p ns beats computing them after @p wait_ns of
 * prefills queued ahead (dram_worth, pc_l2_worth: strictly sooner).
 */
static bool
worth(const struct opts *o, uint64_t ns, uint32_t tokens, uint64_t wait_ns)
{
	return (double)ns < (double)wait_ns + (double)tokens / (o->recompute_tps / 1e9);
}

/*
 * Request @p q under @p mode, begun with @p wait_ns of prefills queued on
 * the wafer's compute: the tokens its prefill computes and its refill's
 * time, into @p w; the hit tokens it refills, returned. The adaptive rule
 * is the driver's (pc_lookup.c, pc_l2.c) with the wafer's prefill queue
 * (lib/wafermodel gives it at each begin, as the emulator gives its
 * driver at the lookup) and without probes (DESIGN.md, "Refill or
 * recompute"): configured lines are never probed; probes of learned ones
 * are the driver's. The hit's DRAM part not worth its refill, none of the
 * hit is taken (the prompt is computed from its first token, and the L2
 * part past it is not looked at); else its L2 part not worth its own line,
 * only the DRAM part is. A hit's refill is the DRAM line over all its
 * tokens, plus the L2 line over those from L2 (they come up to the shard
 * first).
 */
static uint32_t
ttft_choose(const struct opts *o, enum ttft_mode mode, const struct ttft_req *q, uint64_t wait_ns,
	    struct wafermodel_request *w)
{
	uint32_t hit = q->hit, l2 = q->l2, dram = q->hit - q->l2;

	if (mode == TTFT_COMPUTE_ONLY) {
		hit = l2 = 0;
	} else if (mode == TTFT_ADAPTIVE) {
		if (dram > 0 &&
		    !worth(o, line_ns(o, o->refill_lat_us, o->refill_gbps, dram), dram, wait_ns))
			hit = l2 = 0;
		else if (l2 > 0 && !worth(o, line_ns(o, o->l2_lat_us, o->l2_gbps, l2), l2, wait_ns))
			hit = dram, l2 = 0;
	}
	w->computed = q->n - hit;
	w->refill_ns = hit ? line_ns(o, o->refill_lat_us, o->refill_gbps, hit) : 0;
	if (l2)
		w->refill_ns += line_ns(o, o->l2_lat_us, o->l2_gbps, l2);
	return hit;
}

/* The adaptive rule at each begin, with the queue then (wafermodel_choose_fn). */
struct ttft_adaptive {
	const struct opts *o;
	const struct result *res;
	uint64_t hit; /* the hit tokens it refilled */
};

static void
adaptive_at_begin(void *arg, size_t i, uint64_t wait_ns, struct wafermodel_request *w)
{
	struct ttft_adaptive *a = arg;

	a->hit += ttft_choose(a->o, TTFT_ADAPTIVE, &a->res->ttft[i], wait_ns, w);
}

/* The arrivals asked, as the line says them. */
static void
arrivals_str(const struct opts *o, char *b, size_t n)
{
	if (o->arrivals == TTFT_ARRIVALS_POISSON)
		snprintf(b, n, "poisson %g/s, seed %" PRIu64, o->arrival_rate, o->arrival_seed);
	else
		snprintf(b, n, "the trace's times x %g", o->time_scale);
}

int
ttft_print(const struct opts *o, const uint64_t *arrival_ns, const struct result *res,
	   const char *indent)
{
	static const char *const names[TTFT_MODES] = {"compute-only", "io-only", "adaptive"};
	static const char *const keys[TTFT_MODES] = {"compute_only", "io_only", "adaptive"};
	struct wafermodel_params mp = {.slots = o->max_inflight,
				       .tokens_per_ns = o->recompute_tps / 1e9,
				       .overhead_ns = (uint64_t)(o->prefill_overhead_us * 1000)};
	size_t n = res->requests, i;
	struct wafermodel_request *w = malloc(sizeof(*w) * (n ? n : 1));
	uint64_t *t = malloc(sizeof(*t) * (n ? n : 1)), p50[TTFT_MODES], p99[TTFT_MODES];
	uint64_t hit[TTFT_MODES] = {0};
	char arr[96];
	unsigned int m;
	int rc = -1;

	if (w == NULL || t == NULL) {
		fprintf(stderr, "kvss-trace: out of memory\n");
		goto out;
	}
	for (m = 0; m < TTFT_MODES; m++) {
		struct ttft_adaptive a = {o, res, 0};

		/* The fixed modes choose before; adaptive as each request begins. */
		for (i = 0; i < n; i++) {
			w[i].arrival_ns = arrival_ns[i];
			w[i].computed = res->ttft[i].n;
			w[i].refill_ns = 0;
			if (m != TTFT_ADAPTIVE)
				hit[m] +=
				    ttft_choose(o, (enum ttft_mode)m, &res->ttft[i], 0, &w[i]);
		}
		/* The arrivals do not go back and there is a slot: only memory fails. */
		if (wafermodel_ttft_chosen(
			&mp, w, n, t, m == TTFT_ADAPTIVE ? adaptive_at_begin : NULL, &a) != 0) {
			fprintf(stderr, "kvss-trace: out of memory\n");
			goto out;
		}
		if (m == TTFT_ADAPTIVE)
			hit[m] = a.hit;
		percentile_sort_u64(t, n);
		p50[m] = percentile_u64(t, n, 50);
		p99[m] = percentile_u64(t, n, 99);
	}
	if (o->json) {
		for (m = 0; m < TTFT_MODES; m++)
			printf(", \"ttft_%s_p50_ms\": %.3f, \"ttft_%s_p99_ms\": %.3f", keys[m],
			       (double)p50[m] / 1e6, keys[m], (double)p99[m] / 1e6);
		printf(", \"ttft_adaptive_hit_tokens\": %" PRIu64, hit[TTFT_ADAPTIVE]);
	} else {
		arrivals_str(o, arr, sizeof(arr));
		printf("%-12s %sttft (modelled; arrivals %s, %u slot%s, %g tokens/s):", "", indent,
		       arr, o->max_inflight, o->max_inflight == 1 ? "" : "s", o->recompute_tps);
		/* To the microsecond, as the JSON: a refill a few us sooner
		 * than computing is what the adaptive rule weighs. */
		for (m = 0; m < TTFT_MODES; m++)
			printf("%s %s p50 %.3f ms p99 %.3f ms", m ? ";" : "", names[m],
			       (double)p50[m] / 1e6, (double)p99[m] / 1e6);
		printf(", %" PRIu64 " of %" PRIu64 " hit tokens refilled", hit[TTFT_ADAPTIVE],
		       hit[TTFT_IO_ONLY]);
		if (p50[TTFT_ADAPTIVE] > 0)
			printf(" (p50 %.2fx sooner than compute-only)",
			       (double)p50[TTFT_COMPUTE_ONLY] / (double)p50[TTFT_ADAPTIVE]);
		printf("\n");
	}
	rc = 0;
out:
	free(w);
	free(t);
	return rc;
}
