/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * What a request's user waits for: its time to first token (TTFT), from
 * its arrival to the end of its prefill (queueing, the lookup, the refill
 * and the computing of what was not refilled). The emulator measures each
 * request's; here they become percentiles for telemetry, a line of the
 * summary and fields of its JSON, beside what the prefill computed and
 * what the hits saved it.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "driver_priv.h"
#include "percentile.h"
#include "wafermodel.h"
#include "emulator/emulator.h"
#include "kvss.h"

const uint32_t drv_ttft_le_us[DRV_TTFT_BUCKETS] = {
	1000, 2000, 5000, 10000, 20000, 50000, 100000, 200000, 500000,
	1000000, 2000000, 5000000, 10000000, 20000000, 60000000,
};

/* The sorted times @p c[0..n), us, into their buckets (one pass), and their sum. */
static void
ttft_buckets(struct drv_ttft_figures *f, const uint64_t *c, size_t n)
{
	unsigned int k = 0;
	size_t i;

	memset(f->hist, 0, sizeof(f->hist));
	f->sum_us = 0;
	for (i = 0; i < n; i++) {
		while (k < DRV_TTFT_BUCKETS && c[i] > drv_ttft_le_us[k])
			k++;
		f->hist[k]++;
		f->sum_us += c[i];
	}
}

int
drv_ttft_figures(const uint64_t *v, size_t n, struct drv_ttft_figures *f)
{
	uint64_t *c = malloc(sizeof(*c) * (n ? n : 1));

	if (c == NULL)
		return -ENOMEM;
	if (n > 0)
		memcpy(c, v, sizeof(*c) * n);
	percentile_sort_u64(c, n);
	ttft_buckets(f, c, n);
	f->p50_us = percentile_u64(c, n, 50);
	f->p90_us = percentile_u64(c, n, 90);
	f->p99_us = percentile_u64(c, n, 99);
	free(c);
	return 0;
}

/*
 * p50, p90 and p99 by lib/percentile's rule, over a sorted copy (the
 * emulator keeps them in the order they came), made again only when a
 * request was added: the snapshot for telemetry reads them several times
 * a second.
 */
void
drv_ttft_derive(struct drv *d)
{
	struct drv_ttft_figures f;
	const uint64_t *v;
	size_t n;

	if (d->emu == NULL || (v = emu_ttft_us(d->emu, &n), n == d->ttft_derived))
		return; /* none new since the last time: the same figures */
	if (drv_ttft_figures(v, n, &f) != 0)
		return; /* made again at the next read: nothing is lost */
	memcpy(d->ttft_hist, f.hist, sizeof(d->ttft_hist));
	d->ttft_sum_us = f.sum_us;
	d->st.ttft_p50_us = f.p50_us;
	d->st.ttft_p90_us = f.p90_us;
	d->st.ttft_p99_us = f.p99_us;
	d->ttft_derived = n;
}

int
drv_schedstat_wait(const char *text, uint64_t *wait_ns)
{
	unsigned long long run, wait, slices;
	int end = 0;

	/* A thread that has run shows its run time; 0 0 0 is a kernel that
	 * keeps none of it (no schedstats, no delay accounting). */
	if (sscanf(text, "%llu %llu %llu%n", &run, &wait, &slices, &end) != 3 ||
	    (text[end] != '\0' && text[end] != '\n') || run == 0)
		return -EINVAL;
	*wait_ns = wait;
	return 0;
}

uint64_t
drv_cpu_wait_ns(void)
{
	char line[128];
	uint64_t w;
	FILE *f = fopen("/proc/thread-self/schedstat", "r");
	bool ok =
	    f != NULL && fgets(line, sizeof(line), f) != NULL && drv_schedstat_wait(line, &w) == 0;

	if (f != NULL)
		fclose(f);
	return ok ? w : UINT64_MAX;
}

double
drv_cpu_wait_share(const struct drv *d)
{
	double secs = d->hz && d->cpu_wait_tsc[1] > d->cpu_wait_tsc[0]
			  ? (double)(d->cpu_wait_tsc[1] - d->cpu_wait_tsc[0]) / (double)d->hz
			  : 0;
	double w;

	if (!d->started || secs <= 0 || d->cpu_wait_start == UINT64_MAX ||
	    d->cpu_wait_end == UINT64_MAX || d->cpu_wait_end < d->cpu_wait_start)
		return -1;
	w = (double)(d->cpu_wait_end - d->cpu_wait_start) / 1e9 / secs;
	return w > 1 ? 1 : w;
}

/*
 * The same arrivals with the cache off, computed (lib/wafermodel, which is
 * the emulator's compute-only run: test_emulator checks them equal): every
 * prompt computed, one prefill at a time, max_inflight slots. Its p50 and
 * p99 in *@p p50 and *@p p99, ns. -1 when there is nothing to model: a
 * closed loop (no arrivals), no prefill rate (computing is free), or no
 * memory.
 */
static int
compute_only_model(const struct drv *d, uint64_t *p50, uint64_t *p99)
{
	const struct kvss_config *cfg = &kvss.cfg;
	struct wafermodel_params mp = {
		.slots = cfg->wafer.max_inflight,
		.tokens_per_ns = cfg->driver.recompute_tokens_per_s / 1e9,
		.overhead_ns = (uint64_t)cfg->wafer.prefill_overhead_us * 1000};
	struct wafermodel_request *r;
	uint64_t *t;
	size_t i;
	int rc = -1;

	if (d->arrival_ns == NULL || cfg->driver.recompute_tokens_per_s == 0 || d->nreq == 0)
		return -1;
	r = malloc(sizeof(*r) * d->nreq);
	t = malloc(sizeof(*t) * d->nreq);
	if (r != NULL && t != NULL) {
		for (i = 0; i < d->nreq; i++)
			r[i] = (struct wafermodel_request){d->arrival_ns[i], d->wl.r[i].n, 0};
		if (wafermodel_ttft(&mp, r, d->nreq, t) == 0) {
			percentile_sort_u64(t, d->nreq);
			*p50 = percentile_u64(t, d->nreq, 50);
			*p99 = percentile_u64(t, d->nreq, 99);
			rc = 0;
		}
	}
	free(r);
	free(t);
	return rc;
}

static const char *
arrivals_name(uint8_t a)
{
	return a == KVSS_ARRIVALS_TRACE ? "trace" : a == KVSS_ARRIVALS_POISSON ? "poisson" : "closed";
}

static const char *
policy_name(uint8_t p)
{
	return p == KVSS_POLICY_IO_ONLY	       ? "io-only"
	       : p == KVSS_POLICY_COMPUTE_ONLY ? "compute-only"
	       : p == KVSS_POLICY_SPLIT	       ? "split"
					       : "adaptive";
}

/*
 * The summary's line, and its JSON fields into @p json (no braces; null
 * where no request got its first token). Derived first by the caller.
 */
void
drv_ttft_summary(struct drv *d, char *json, size_t cap)
{
	const struct kvss_drv_stats *s = &d->st;
	const struct kvss_config *cfg = &kvss.cfg;
	double mean = s->first_tokens ? (double)s->ttft_us / (double)s->first_tokens / 1e3 : 0;
	double queue = s->requests ? (double)s->queue_us / (double)s->requests / 1e3 : 0;
	char figs[200] = "\"ttft_p50_ms\":null,\"ttft_p90_ms\":null,\"ttft_p99_ms\":null,"
			 "\"ttft_mean_ms\":null";
	char model[120] = "\"model_compute_only_ttft_p50_ms\":null,\"model_compute_only_ttft_p99_ms\":null";
	char waitj[16] = "null", cpuj[24] = "null";
	struct rusage ru;
	double wait = drv_cpu_wait_share(d);
	uint64_t m50, m99;
	struct prefixcache_stats ps;

	if (s->first_tokens) {
		printf("kvss: summary: time to first token (arrivals %s, refill policy %s): p50 %.2f ms, "
		       "p90 %.2f ms, p99 %.2f ms, mean %.2f ms over %" PRIu64 " requests; queued %.2f ms "
		       "on average before they began\n",
		       arrivals_name(cfg->wafer.arrivals), policy_name(cfg->driver.refill_policy),
		       (double)s->ttft_p50_us / 1e3, (double)s->ttft_p90_us / 1e3,
		       (double)s->ttft_p99_us / 1e3, mean, s->first_tokens, queue);
		snprintf(figs, sizeof(figs),
			 "\"ttft_p50_ms\":%.3f,\"ttft_p90_ms\":%.3f,\"ttft_p99_ms\":%.3f,\"ttft_mean_ms\":%.3f",
			 (double)s->ttft_p50_us / 1e3, (double)s->ttft_p90_us / 1e3,
			 (double)s->ttft_p99_us / 1e3, mean);
	}
	prefixcache_stats(d->pc, &ps);
	printf("kvss: summary: prefill: %" PRIu64 " prompt tokens computed, %" PRIu64 " refilled "
	       "(%" PRIu64 " hit tokens computed by choice: sooner than refilling; %" PRIu64
	       " hits refilled anyway as probes of the line); %.1f ms of "
	       "compute saved by the hits (driver.recompute_tokens_per_s = %u, "
	       "wafer.prefill_overhead_us = %u)\n",
	       s->miss_tokens, s->hit_tokens, s->recomputed_by_choice_tokens, ps.refill_probes,
	       (double)s->compute_saved_us / 1e3, cfg->driver.recompute_tokens_per_s,
	       cfg->wafer.prefill_overhead_us);
	if (cfg->driver.refill_policy == KVSS_POLICY_SPLIT)
		printf("kvss: summary: split: %" PRIu64 " hits split, their fronts' %" PRIu64
		       " tokens computed while the rest refilled (of the refilled above)\n",
		       ps.split_requests, ps.split_tokens);
	if (compute_only_model(d, &m50, &m99) == 0) {
		printf("kvss: summary: compute-only on the same arrivals (modelled, lib/wafermodel): "
		       "TTFT p50 %.2f ms, p99 %.2f ms", (double)m50 / 1e6, (double)m99 / 1e6);
		if (s->first_tokens < d->nreq)
			printf("; no ratio: %" PRIu64 " of %zu requests reached a first token (the run stopped)",
			       s->first_tokens, d->nreq);
		else if (s->ttft_p50_us && s->ttft_p99_us)
			printf("; this run's p50 %.2fx sooner, p99 %.2fx",
			       (double)m50 / 1e3 / (double)s->ttft_p50_us,
			       (double)m99 / 1e3 / (double)s->ttft_p99_us);
		/* The model has the wafer's whole time; the emulator had what
		 * the machine left its lcore (the shards' lcores and any other
		 * process on its core), and its lateness is in every TTFT. */
		if (wait >= 0)
			printf(
			    "; the wafer emulator's lcore waited for a CPU %.0f%% of the run, the "
			    "model never",
			    100 * wait);
		printf("\n");
		snprintf(model, sizeof(model),
			 "\"model_compute_only_ttft_p50_ms\":%.3f,\"model_compute_only_ttft_p99_ms\":%.3f",
			 (double)m50 / 1e6, (double)m99 / 1e6);
	}
	if (s->arrivals_unbegun)
		printf("kvss: summary: %" PRIu64 " requests had not begun when the run stopped\n",
		       s->arrivals_unbegun);
	if (wait >= 0)
		snprintf(waitj, sizeof(waitj), "%.3f", wait);
	/* This process's CPU time, so that a script beside it can tell what
	 * other processes took of the machine during the run. */
	if (getrusage(RUSAGE_SELF, &ru) == 0)
		snprintf(cpuj, sizeof(cpuj), "%.3f",
			 (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
			     (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6);
	snprintf(
	    json, cap,
	    "%s,%s,\"control_lcore_cpu_wait\":%s,\"process_cpu_s\":%s,\"first_tokens\":%" PRIu64
	    ",\"queue_mean_ms\":%.3f,\"arrivals\":\"%s\","
	    "\"refill_policy\":\"%s\",\"prefill_computed_tokens\":%" PRIu64
	    ",\"prefill_refilled_tokens\":%" PRIu64 ",\"recomputed_by_choice_tokens\":%" PRIu64
	    ",\"compute_saved_ms\":%.3f,\"arrivals_unbegun\":%" PRIu64 ",\"refill_probes\":%" PRIu64
	    ",\"split_requests\":%" PRIu64 ",\"split_tokens\":%" PRIu64,
	    figs, model, waitj, cpuj, s->first_tokens, queue, arrivals_name(cfg->wafer.arrivals),
	    policy_name(cfg->driver.refill_policy), s->miss_tokens, s->hit_tokens,
	    s->recomputed_by_choice_tokens, (double)s->compute_saved_us / 1e3, s->arrivals_unbegun,
	    ps.refill_probes, ps.split_requests, ps.split_tokens);
}
