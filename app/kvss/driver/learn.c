/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Refill times learned (driver_priv.h): each sequence's refill time against the
 * driver's estimate, a line fitted per model to its own refills, and
 * (refill_model "learned") the library's estimates set from those lines.
 */
#include <stdlib.h>
#include <string.h>

#include "driver_priv.h"

void
drv_learn_init(struct drv_learn *l, struct prefixcache *pc, struct kvss_drv_stats *st,
	       bool learned, unsigned int short_pct)
{
	uint16_t m;

	memset(l, 0, sizeof(*l));
	l->pc = pc;
	l->st = st;
	l->learned = learned;
	l->short_pct = short_pct;
	for (m = 0; m < PREFIXCACHE_MAX_MODELS; m++)
		l->ml[m].factor = 1;
}

void
drv_learn_free(struct drv_learn *l)
{
	free(l->lat_us);
	free(l->est_us);
	l->lat_us = l->est_us = NULL;
	l->nlat = l->latcap = 0;
}

/*
 * The estimate's terms from a line a + b x: with no slope (the times did not
 * grow with the bytes), a fixed time, @p level; a line below 0 at x = 0
 * starts at 0.
 */
static void
line_terms(double a, double b, double level, double *lat_ns, double *ns_per_byte)
{
	*lat_ns = b > 0 ? (a > 0 ? a : 0) : level;
	*ns_per_byte = b > 0 ? b : 0;
}

int
drv_learn_line(const struct linfit *f, double *lat_ns, double *ns_per_byte)
{
	double a, b;

	if (linfit_solve(f, 20, &a, &b) != 0)
		return -1;
	line_terms(a, b, f->my, lat_ns, ns_per_byte);
	return 0;
}

int
drv_learn_wline(const struct linwin *w, double *lat_ns, double *ns_per_byte)
{
	double a, b, level;

	if (linwin_solve(w, 20, &a, &b, &level) != 0)
		return -1;
	line_terms(a, b, level, lat_ns, ns_per_byte);
	return 0;
}

int
drv_learn_fit(const struct linfit *f, double *lat_us, double *gbps)
{
	double lat_ns, ns_per_byte;

	if (drv_learn_line(f, &lat_ns, &ns_per_byte) != 0)
		return -1;
	*lat_us = lat_ns / 1000;
	*gbps = ns_per_byte > 0 ? 8 / ns_per_byte : 0;
	return 0;
}

/*
 * A point (@p x bytes brought up from @p level, @p y ns past the lines
 * above it) of model @p m's line for that level, in @p f and @p w; with
 * refill_model "learned", from its 20th point on and every 16th after, the
 * library's estimates take the window's line refitted, counted in
 * *@p updates.
 */
static void
learn_level(struct drv_learn *l, uint16_t m, enum prefixcache_level level, struct linfit *f,
	    struct linwin *w, double x, double y, uint64_t *updates)
{
	double lat_ns, ns_per_byte;

	linfit_add(f, x, y);
	linwin_add(w, x, y);
	if (!l->learned || w->n < 20 || (w->n - 20) % 16 != 0 ||
	    drv_learn_wline(w, &lat_ns, &ns_per_byte) != 0)
		return;
	prefixcache_set_level_model(l->pc, m, level, lat_ns > 0 ? (uint64_t)lat_ns : 0,
				    ns_per_byte > 0 ? 1 / ns_per_byte : 0);
	(*updates)++;
}

/*
 * With refill_model "learned", whether a refill's time @p past from level
 * @p level (@p bytes of it from there) came in under half what that
 * level's line says now, told to the library: while such refills come
 * back, the hits its line refuses are probed more often, so that a line
 * learned slow (a disk busy with the first writes) catches up.
 */
static void
tell_sampled(struct drv_learn *l, uint16_t m, enum prefixcache_level level, double bytes,
	     double past)
{
	uint64_t lat;
	double bpn;

	if (!l->learned || prefixcache_level_model(l->pc, m, level, &lat, &bpn) != 0)
		return;
	prefixcache_l2_sampled(l->pc, m, level,
			       past < ((double)lat + (bpn > 0 ? bytes / bpn : 0)) / 2);
}

/*
 * refill_model "learned": the model's estimates take the line fitted to its
 * own last refills (draft and target models have their own shards), from
 * its 20th refill on and every 16th after. With refill_short_pct, the line is
 * scaled by the factor that share of its refills exceeded over what the
 * line said when each came (once 20 are counted).
 */
void
drv_learn_model(struct drv_learn *l, uint16_t m, uint64_t ns, uint64_t bytes, uint64_t l2_bytes,
		uint64_t shared_bytes)
{
	struct drv_model_learn *ml;
	double lat_ns, ns_per_byte;

	if (m >= PREFIXCACHE_MAX_MODELS)
		return;
	ml = &l->ml[m];
	if (shared_bytes > 0 || l2_bytes > 0) {
		/* Brought up from below DRAM: the time past the model's line. */
		uint64_t lat0, lat2, disk;
		double bpn0, bpn2, past;

		if (prefixcache_refill_model(l->pc, m, &lat0, &bpn0) != 0)
			return;
		past = (double)ns - (double)lat0 - (bpn0 > 0 ? (double)bytes / bpn0 : 0);
		if (shared_bytes == 0) {
			/* From the shards' disks only: a point of the L2 line. */
			tell_sampled(l, m, PREFIXCACHE_LEVEL_L2, (double)l2_bytes, past);
			learn_level(l, m, PREFIXCACHE_LEVEL_L2, &ml->fit2, &ml->win2,
				    (double)l2_bytes, past, &l->st->l2_model_updates);
			return;
		}
		/* Some from the shared level: a point of its line, past the L2
		 * line too for what came from the disks beside it. */
		if (prefixcache_level_model(l->pc, m, PREFIXCACHE_LEVEL_L2, &lat2, &bpn2) != 0)
			return;
		disk = l2_bytes > shared_bytes ? l2_bytes - shared_bytes : 0;
		if (disk > 0)
			past -= (double)lat2 + (bpn2 > 0 ? (double)disk / bpn2 : 0);
		tell_sampled(l, m, PREFIXCACHE_LEVEL_SHARED, (double)shared_bytes, past);
		learn_level(l, m, PREFIXCACHE_LEVEL_SHARED, &ml->fit3, &ml->win3,
			    (double)shared_bytes, past, &l->shared_updates);
		return;
	}
	if (l->short_pct && ml->line_ok) {
		double line = ml->lat_ns + (double)bytes * ml->ns_per_byte;

		ratioq_add(&ml->rq, (double)ns, line);
		l->line_timed++;
		l->line_short += (double)ns > line;
		l->line_short_scaled += (double)ns > line * ml->factor;
	}
	linfit_add(&ml->fit, (double)bytes, (double)ns);
	linwin_add(&ml->win, (double)bytes, (double)ns);
	if (!l->learned || ml->win.n < 20 || (ml->win.n - 20) % 16 != 0 ||
	    drv_learn_wline(&ml->win, &lat_ns, &ns_per_byte) != 0)
		return;
	ml->line_ok = true;
	ml->lat_ns = lat_ns;
	ml->ns_per_byte = ns_per_byte;
	ml->factor = l->short_pct && ml->rq.n >= 20 ? ratioq_factor(&ml->rq, l->short_pct / 100.0) : 1;
	prefixcache_set_refill_model(l->pc, m, (uint64_t)(lat_ns * ml->factor),
				     ns_per_byte > 0 ? 1 / (ns_per_byte * ml->factor) : 0);
	if (l->st->model_updates++ == 0)
		l->learned_at = ml->fit.n;
}

const uint32_t drv_refill_le_us[DRV_REFILL_BUCKETS] = {
	10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000, 20000, 50000, 100000, 200000, 500000, 1000000,
};

void
drv_learn_seq(struct drv_learn *l, uint64_t ns, uint64_t est_ns, uint64_t est_bytes)
{
	unsigned int k = 0;

	while (k < DRV_REFILL_BUCKETS && ns > (uint64_t)drv_refill_le_us[k] * 1000)
		k++;
	l->hist[k]++;
	l->hist_sum_ns += ns;
	linfit_add(&l->fit, (double)est_bytes, (double)ns);
	l->st->model_short += ns > est_ns;
	if (ns > est_ns)
		l->late_ns += ns - est_ns;
	else
		l->early_ns += est_ns - ns;
	if (l->nlat == l->latcap) {
		size_t cap = l->latcap ? 2 * l->latcap : 1024;
		uint32_t *a = realloc(l->lat_us, sizeof(uint32_t) * cap);
		uint32_t *b = a ? realloc(l->est_us, sizeof(uint32_t) * cap) : NULL;

		if (a != NULL)
			l->lat_us = a;
		if (b == NULL)
			return;
		l->est_us = b;
		l->latcap = cap;
	}
	l->lat_us[l->nlat] = (uint32_t)(ns / 1000);
	l->est_us[l->nlat++] = (uint32_t)(est_ns / 1000);
}
