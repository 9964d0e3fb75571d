/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * What the driver shows (driver_priv.h): /swdriver/stats, /orgs and /shards from a
 * snapshot the control lcore copies every 100 ms (telemetry's thread reads
 * only the snapshot, under its lock), the progress line, and the summary
 * (lines for people, then one JSON line for scripts).
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <rte_cycles.h>
#include <rte_lcore.h>
#include <rte_spinlock.h>
#include <rte_telemetry.h>

#include "driver_priv.h"
#include "plot.h"
#include "emulator/emulator.h"
#include "kvss.h"
#include "percentile.h"

/* A shard and its control stream, as /swdriver/shards shows them (u64 each). */
#define SHARD_SNAP_FIELDS(X)                                                                       \
	X(model) X(shard_id) X(port) X(up) X(seq_sent) X(seq_acked) X(seq_received) X(backlog)      \
	X(retransmits) X(rtt_samples) X(stale_acks) X(bogus_acks) X(srtt_us) X(timeout_us)         \
	X(evict_sent) X(evict_acked) X(batches_complete) X(stored_tokens)                         \
	X(l2_stored_tokens) X(l2_capacity_tokens) X(reports_taken)                                 \
	X(model_refills_timed) X(model_estimate_latency_us) X(model_estimate_mbps) X(hops)
#define SHARD_SNAP_DECL(n) uint64_t n;
struct shard_snap {
	SHARD_SNAP_FIELDS(SHARD_SNAP_DECL)
	uint64_t heard_ms_ago, status_ms_ago; /* UINT64_MAX: never */
	uint32_t epoch; /* shown as the logs show it: 0x%08x */
};
#undef SHARD_SNAP_DECL

struct snapshot {
	rte_spinlock_t lock; /* the control lcore writes under it; telemetry reads */
	struct kvss_drv_stats st;
	struct prefixcache_stats pc;
	struct prefixcache_org_stats org[KVSS_MAX_ORGS + 64];
	size_t norg;
	struct shard_snap sh[DRV_MAX_SHARDS];
	uint16_t nsh;
	uint64_t refill_hist[DRV_REFILL_BUCKETS + 1], refill_sum_ns; /* drv_learn's */
	uint64_t ttft_hist[DRV_TTFT_BUCKETS + 1], ttft_sum_us;       /* ttft.c's */
	struct drv_sh_stats shared; /* the shared level's (shared.c) */
};

/*
 * The one piece of the driver's state at file scope, forced by DPDK: its
 * telemetry callbacks take no argument (22.11) and may run on the
 * telemetry thread until the process exits, after the driver is freed. So
 * they read this copy, which drv_report_snapshot() writes under its lock.
 */
static struct snapshot snap = {.lock = RTE_SPINLOCK_INITIALIZER};

/* ---- Telemetry ---------------------------------------------------------------------- */

/* Counters derived when read: the emulator's (its own, copied in), what
 * the streams count themselves (messages pushed and sent again), and the
 * fitted refill model. */
void
drv_report_derive(struct drv *d)
{
	double lat_us, gbps;
	uint16_t i;

	if (d->emu != NULL)
		kvss_drv_stats_take(&d->st, emu_stats(d->emu));
	if (drv_learn_fit(&d->learn.fit, &lat_us, &gbps) == 0) {
		d->st.fit_latency_us = (uint64_t)lat_us;
		d->st.fit_mbps = (uint64_t)(gbps * 1000);
	}
	d->st.late_us = d->learn.late_ns / 1000;
	d->st.early_us = d->learn.early_ns / 1000;
	d->st.held_us = d->emu != NULL ? emu_held_ns(d->emu) / 1000 : 0;
	drv_ttft_derive(d);
	if (d->pc != NULL) {
		struct prefixcache_stats ps;

		prefixcache_stats(d->pc, &ps);
		d->st.recomputed_by_choice_tokens =
			ps.recompute_faster_tokens + ps.l2_recompute_faster_tokens;
		d->st.split_requests = ps.split_requests;
		d->st.split_tokens = ps.split_tokens;
	}

	d->st.control_msgs = d->st.retransmits = 0;
	for (i = 0; i < d->nsh; i++) {
		d->st.control_msgs += d->sh[i].stream.st.sent;
		d->st.retransmits += d->sh[i].stream.st.retransmits;
	}
}

static uint64_t
tsc_ms_ago(struct drv *d, uint64_t now, uint64_t then)
{
	return then == 0 || now < then ? UINT64_MAX : (now - then) * 1000 / d->hz;
}

static void
snapshot_shards(struct drv *d, struct snapshot *sn)
{
	uint64_t now = rte_get_tsc_cycles(), lat_ns;
	double bytes_per_ns;
	uint16_t i, c;

	sn->nsh = d->nsh < DRV_MAX_SHARDS ? d->nsh : DRV_MAX_SHARDS;
	for (i = 0; i < sn->nsh; i++) {
		const struct drv_shard *sh = &d->sh[i];
		const struct proto_stream *ps = &sh->stream;
		struct shard_snap *x = &sn->sh[i];

		x->model = sh->model;
		x->shard_id = sh->ref->id;
		x->port = sh->ref->port;
		x->up = (uint64_t)sh->up;
		x->hops = sh->hops;
		x->epoch = sh->epoch;
		x->seq_sent = ps->next_seq - 1;
		x->seq_acked = ps->acked;
		x->seq_received = ps->received > ps->acked ? ps->received : ps->acked;
		x->reports_taken = sh->report_next ? sh->report_next - 1 : 0;
		x->backlog = sh->q.backlog;
		x->retransmits = ps->st.retransmits;
		x->rtt_samples = ps->st.rtt_samples;
		x->stale_acks = ps->st.stale_acks;
		x->bogus_acks = ps->st.bogus_acks;
		x->srtt_us = (uint64_t)(ps->srtt8 >> 3) * 1000000 / d->hz;
		x->timeout_us = ps->timeout * 1000000 / d->hz;
		x->evict_sent = sh->evict_sent;
		x->evict_acked = sh->evict_acked;
		x->batches_complete = sh->batches_complete;
		x->stored_tokens = x->l2_stored_tokens = x->l2_capacity_tokens = 0;
		for (c = 0; c < PREFIXCACHE_MAX_CACHES; c++) {
			x->stored_tokens += sh->stored[c];
			x->l2_stored_tokens += sh->l2_stored[c];
			x->l2_capacity_tokens += sh->l2_capacity[c];
		}
		/* Its model's refill estimates (0 Mb/s: no bandwidth term). */
		x->model_refills_timed = d->learn.ml[sh->model].fit.n;
		if (prefixcache_refill_model(d->pc, sh->model, &lat_ns, &bytes_per_ns) == 0) {
			x->model_estimate_latency_us = lat_ns / 1000;
			x->model_estimate_mbps = (uint64_t)(bytes_per_ns * 8000);
		}
		x->heard_ms_ago = tsc_ms_ago(d, now, sh->last_rx);
		x->status_ms_ago = tsc_ms_ago(d, now, sh->status_at);
	}
}

void
drv_report_snapshot(struct drv *d)
{
	struct snapshot *sn = &snap;

	drv_report_derive(d);
	rte_spinlock_lock(&sn->lock);
	sn->st = d->st;
	memcpy(sn->refill_hist, d->learn.hist, sizeof(sn->refill_hist));
	sn->refill_sum_ns = d->learn.hist_sum_ns;
	memcpy(sn->ttft_hist, d->ttft_hist, sizeof(sn->ttft_hist));
	sn->ttft_sum_us = d->ttft_sum_us;
	sn->shared = *drv_sh_stats(d);
	snapshot_shards(d, sn);
	prefixcache_stats(d->pc, &sn->pc);
	sn->norg = prefixcache_orgs(d->pc, sn->org, RTE_DIM(sn->org));
	if (sn->norg > RTE_DIM(sn->org))
		sn->norg = RTE_DIM(sn->org);
	rte_spinlock_unlock(&sn->lock);
}

static int
tel_drv_stats(const char *cmd, const char *params, struct rte_tel_data *td)
{
	struct snapshot *sn = &snap;
	int c;

	(void)cmd;
	(void)params;
	rte_tel_data_start_dict(td);
	rte_spinlock_lock(&sn->lock);
#define KVSS_DRV_TEL(n) rte_tel_data_add_dict_u64(td, #n, sn->st.n);
	KVSS_DRV_STATS(KVSS_DRV_TEL)
	EMU_STATS(KVSS_DRV_TEL)
#undef KVSS_DRV_TEL
	for (c = 1; c < PROTO_E_MAX; c++) {
		char key[48];

		snprintf(key, sizeof(key), "error_%s", proto_err_name((unsigned int)c));
		rte_tel_data_add_dict_u64(td, key, sn->st.errors_by_code[c]);
	}
#define PC_TEL(n, k) rte_tel_data_add_dict_u64(td, k, sn->pc.n);
	PREFIXCACHE_STATS(PC_TEL)
#undef PC_TEL
	rte_spinlock_unlock(&sn->lock);
	return 0;
}

static const char *
org_name(uint64_t iso, char *buf, size_t cap)
{
	uint16_t i;

	for (i = 0; i < kvss.cfg.driver.num_orgs; i++) {
		const char *n = kvss.cfg.driver.org[i].name;

		if (proto_ref_isolation_id(n, strlen(n)) == iso)
			return n;
	}
	if (iso == proto_ref_isolation_id("default", 7))
		return "default";
	snprintf(buf, cap, "%016" PRIx64, iso);
	return buf;
}

static int
tel_drv_orgs(const char *cmd, const char *params, struct rte_tel_data *td)
{
	struct snapshot *sn = &snap;
	size_t i;

	(void)cmd;
	(void)params;
	rte_tel_data_start_dict(td);
	rte_spinlock_lock(&sn->lock);
	for (i = 0; i < sn->norg; i++) {
		struct rte_tel_data *o = rte_tel_data_alloc();
		char buf[24];

		if (o == NULL)
			break;
		rte_tel_data_start_dict(o);
		/* A 64-bit id as a decimal string, exact beyond 2^53 (jq, JavaScript). */
		snprintf(buf, sizeof(buf), "%" PRIu64, sn->org[i].isolation_id);
		rte_tel_data_add_dict_string(o, "isolation_id", buf);
		rte_tel_data_add_dict_u64(o, "entries", sn->org[i].entries);
		rte_tel_data_add_dict_u64(o, "cached_tokens", sn->org[i].cached_tokens);
		rte_tel_data_add_dict_u64(o, "hit_tokens", sn->org[i].hit_tokens);
		rte_tel_data_add_dict_u64(o, "requests", sn->org[i].requests);
		rte_tel_data_add_dict_u64(o, "dram_tokens", sn->org[i].dram_tokens);
		rte_tel_data_add_dict_u64(o, "dram_share_tokens", sn->org[i].dram_share_tokens);
		rte_tel_data_add_dict_u64(o, "dram_cap_tokens", sn->org[i].dram_cap_tokens);
		rte_tel_data_add_dict_u64(o, "dram_yielded", sn->org[i].dram_yielded);
		rte_tel_data_add_dict_u64(o, "l2_tokens", sn->org[i].l2_tokens);
		rte_tel_data_add_dict_u64(o, "l2_share_tokens", sn->org[i].l2_share_tokens);
		rte_tel_data_add_dict_u64(o, "l2_cap_tokens", sn->org[i].l2_cap_tokens);
		rte_tel_data_add_dict_u64(o, "l2_yielded", sn->org[i].l2_yielded);
		rte_tel_data_add_dict_container(td, org_name(sn->org[i].isolation_id, buf, sizeof(buf)),
						o, 0);
	}
	rte_spinlock_unlock(&sn->lock);
	return 0;
}

static int
tel_drv_shards(const char *cmd, const char *params, struct rte_tel_data *td)
{
	struct snapshot *sn = &snap;
	uint16_t i;

	(void)cmd;
	(void)params;
	rte_tel_data_start_dict(td);
	rte_spinlock_lock(&sn->lock);
	for (i = 0; i < sn->nsh; i++) {
		const struct shard_snap *x = &sn->sh[i];
		struct rte_tel_data *o = rte_tel_data_alloc();
		char key[32];

		if (o == NULL)
			break;
		rte_tel_data_start_dict(o);
#define SHARD_SNAP_TEL(n) rte_tel_data_add_dict_u64(o, #n, x->n);
		SHARD_SNAP_FIELDS(SHARD_SNAP_TEL)
#undef SHARD_SNAP_TEL
		/* Epochs read as in the logs ("epoch 0x1d04328f"). */
		snprintf(key, sizeof(key), "0x%08x", x->epoch);
		rte_tel_data_add_dict_string(o, "epoch", key);
		/* Never heard from (yet): -1 reads better than 2^64 - 1. */
		rte_tel_data_add_dict_int(o, "heard_ms_ago",
					  x->heard_ms_ago > INT32_MAX ? -1 : (int)x->heard_ms_ago);
		rte_tel_data_add_dict_int(o, "status_ms_ago",
					  x->status_ms_ago > INT32_MAX ? -1 : (int)x->status_ms_ago);
		snprintf(key, sizeof(key), "model%" PRIu64 "_shard%" PRIu64, x->model, x->shard_id);
		rte_tel_data_add_dict_container(td, key, o, 0);
	}
	rte_spinlock_unlock(&sn->lock);
	return 0;
}

/*
 * A histogram as Prometheus' le buckets: @p nb bounds @p le_us, the counts
 * @p hist by bucket (nb + 1 of them, the last past every bound) made
 * cumulative (le_count), their total (count) and @p sum_us. @p hist is a
 * copy taken under the snapshot's lock.
 */
static int
tel_cum_hist(struct rte_tel_data *td, const uint32_t *le_us, const uint64_t *hist, unsigned int nb,
	     uint64_t sum_us)
{
	struct rte_tel_data *le = rte_tel_data_alloc(), *n = rte_tel_data_alloc();
	uint64_t cum = 0;
	unsigned int b;

	if (le == NULL || n == NULL) {
		rte_tel_data_free(le);
		rte_tel_data_free(n);
		return -ENOMEM;
	}
	rte_tel_data_start_dict(td);
	rte_tel_data_start_array(le, RTE_TEL_U64_VAL);
	rte_tel_data_start_array(n, RTE_TEL_U64_VAL);
	for (b = 0; b < nb; b++) {
		cum += hist[b];
		rte_tel_data_add_array_u64(le, le_us[b]);
		rte_tel_data_add_array_u64(n, cum);
	}
	cum += hist[nb];
	rte_tel_data_add_dict_container(td, "le_us", le, 0);
	rte_tel_data_add_dict_container(td, "le_count", n, 0);
	rte_tel_data_add_dict_u64(td, "count", cum);
	rte_tel_data_add_dict_u64(td, "sum_us", sum_us);
	return 0;
}

/*
 * A histogram of the snapshot, copied under its lock: @p nb + 1 counts
 * from @p hist and the sum @p sum divided by @p sum_div (1,000: ns to
 * us); made Prometheus' le buckets by tel_cum_hist() outside it.
 */
static int
tel_snap_hist(struct rte_tel_data *td, const uint32_t *le_us, const uint64_t *hist, unsigned int nb,
	      const uint64_t *sum, uint64_t sum_div)
{
	uint64_t h[DRV_REFILL_BUCKETS > DRV_TTFT_BUCKETS ? DRV_REFILL_BUCKETS + 1 : DRV_TTFT_BUCKETS + 1], s;

	rte_spinlock_lock(&snap.lock);
	memcpy(h, hist, sizeof(h[0]) * (nb + 1));
	s = *sum;
	rte_spinlock_unlock(&snap.lock);
	return tel_cum_hist(td, le_us, h, nb, s / sum_div);
}

/*
 * /swdriver/refill_latency: each sequence's refill time (the summary's
 * refill p50 and p99) by bucket, cumulative as Prometheus' le buckets.
 */
static int
tel_drv_refill_latency(const char *cmd, const char *params, struct rte_tel_data *td)
{
	(void)cmd;
	(void)params;
	return tel_snap_hist(td, drv_refill_le_us, snap.refill_hist, DRV_REFILL_BUCKETS,
			     &snap.refill_sum_ns, 1000);
}

/*
 * /swdriver/ttft: each request's time to first token (the summary's TTFT
 * p50, p90 and p99) by bucket, as /swdriver/refill_latency gives refill
 * times.
 */
static int
tel_drv_ttft(const char *cmd, const char *params, struct rte_tel_data *td)
{
	(void)cmd;
	(void)params;
	return tel_snap_hist(td, drv_ttft_le_us, snap.ttft_hist, DRV_TTFT_BUCKETS, &snap.ttft_sum_us, 1);
}

/* /swdriver/shared: the shared level as the driver sees it (the summary's "shared"). */
static int
tel_drv_shared(const char *cmd, const char *params, struct rte_tel_data *td)
{
	struct snapshot *sn = &snap;
	const struct drv_sh_stats *h = &sn->shared;
	unsigned int r;

	(void)cmd;
	(void)params;
	rte_tel_data_start_dict(td);
	rte_spinlock_lock(&sn->lock);
	rte_tel_data_add_dict_u64(td, "configured", kvss.cfg.shared.conf[0] != '\0');
#define DRV_SH_TEL(n) rte_tel_data_add_dict_u64(td, #n, h->n);
	DRV_SH_STATS(DRV_SH_TEL)
#undef DRV_SH_TEL
	for (r = 1; r < SHARED_BAD_COUNT; r++) {
		char key[48];

		snprintf(key, sizeof(key), "records_bad_%s", shared_bad_name((enum shared_bad)r));
		rte_tel_data_add_dict_u64(td, key, h->bad[r]);
	}
	rte_spinlock_unlock(&sn->lock);
	return 0;
}

int
kvss_driver_telemetry_register(struct drv *d)
{
	(void)d; /* telemetry reads the snapshot (snap), which outlives the driver */
	if (rte_telemetry_register_cmd("/swdriver/stats", tel_drv_stats,
				       "Driver: requests, hits, refills, evictions, deletes, "
				       "expiries, retransmits, verify failures") != 0 ||
	    rte_telemetry_register_cmd("/swdriver/orgs", tel_drv_orgs,
				       "Driver, per organization: entries, cached tokens, hits") != 0 ||
	    rte_telemetry_register_cmd("/swdriver/shards", tel_drv_shards,
				       "Driver, per shard: up, epoch, control stream (seqs, "
				       "retransmits, round trip, timeout), batches, stored") != 0 ||
	    rte_telemetry_register_cmd("/swdriver/refill_latency", tel_drv_refill_latency,
				       "Driver: sequences' refill times by bucket (le_us, "
				       "cumulative le_count), count, sum_us") != 0 ||
	    rte_telemetry_register_cmd("/swdriver/ttft", tel_drv_ttft,
				       "Driver: requests' times to first token by bucket (le_us, "
				       "cumulative le_count), count, sum_us") != 0 ||
	    rte_telemetry_register_cmd("/swdriver/shared", tel_drv_shared,
				       "Driver: the shared level (configured, unavailable, "
				       "lookups, records, failures)") != 0)
		return -1;
	return 0;
}

void
drv_report_progress(struct drv *d, uint64_t tsc)
{
	double s = (double)(tsc - d->t_start) / (double)d->hz;

	drv_report_derive(d);
	printf("kvss: driver: %6.1f s  %" PRIu64 "/%zu requests, hit ratio %.4f, evicted %.2f GB "
	       "(%.2f GB/s), refilled %.2f GB (%.2f GB/s), verify failures %" PRIu64 "\n",
	       s, d->st.completed, d->nreq,
	       d->st.prompt_tokens ? (double)d->st.hit_tokens / (double)d->st.prompt_tokens : 0.0,
	       (double)d->st.evict_bytes / 1e9, s > 0 ? (double)d->st.evict_bytes / 1e9 / s : 0,
	       (double)d->st.refill_bytes / 1e9, s > 0 ? (double)d->st.refill_bytes / 1e9 / s : 0,
	       d->st.verify_failures);
	fflush(stdout);
}

/* ---- The summary -------------------------------------------------------------------- */

/*
 * --plot-refills: the distribution of the refill times measured, beside
 * that of the model's estimates for the same refills (both sorted), as a
 * PNG through gnuplot; said on stdout, or why not on stderr.
 */
static int
plot_refills(struct drv *d)
{
	size_t n = d->learn.nlat, i, step = n > 2000 ? n / 2000 : 1, k = 0;
	double *x = malloc(sizeof(double) * (n / step + 1) * 3), *xe, *y;
	struct plot p = {.png = kvss.plot_refills, .title = "kvss: refill times, measured and estimated",
			 .xlabel = "refill time (us)", .ylabel = "share of refills taking at most this",
			 .logx = true, .ymin = 0, .ymax = 1};
	struct plot_series s[2];
	char err[512];

	if (x == NULL || n == 0) {
		fprintf(stderr, "kvss: --plot-refills: %s\n", n == 0 ? "no refill was timed" : "out of memory");
		free(x);
		return n == 0 ? 0 : -1; /* nothing to draw is no failure */
	}
	xe = x + n / step + 1;
	y = xe + n / step + 1;
	for (i = 0; i < n; i += step, k++) {
		x[k] = d->learn.lat_us[i] ? d->learn.lat_us[i] : 1;
		xe[k] = d->learn.est_us[i] ? d->learn.est_us[i] : 1;
		y[k] = (double)(i + 1) / (double)n;
	}
	s[0] = (struct plot_series){"measured", x, y, k, false};
	s[1] = (struct plot_series){"the driver's estimate (refill_model)", xe, y, k, false};
	if (plot_png(&p, s, 2, err, sizeof(err)) != 0) {
		fprintf(stderr, "kvss: --plot-refills %s: %s\n", kvss.plot_refills, err);
		free(x);
		return -1;
	}
	printf("kvss: summary: refill times drawn in %s (%zu refills)\n", kvss.plot_refills, n);
	free(x);
	return 0;
}

/*
 * --ttft-out: each request's time to first token and hit tokens, by its
 * index in the workload, as CSV (request,ttft_us,hit_tokens,org,salted; a
 * request with no first token has an empty ttft_us, one never begun (a run
 * stopped early) an empty hit_tokens too): what a timing audit of the
 * cache reads. Said on stdout, or why not on stderr.
 */
static int
ttft_out(struct drv *d)
{
	const uint32_t *hits;
	size_t i, n, timed = 0;
	const uint64_t *t = emu_ttft_by_request(d->emu, &hits, &n);
	char err[512], name[256];
	FILE *f;
	int fd = plot_open_output(kvss.ttft_out, err, sizeof(err)), bad, e = 0;

	if (fd < 0 || (f = fdopen(fd, "w")) == NULL) {
		fprintf(stderr, "kvss: --ttft-out %s: %s\n", plot_shown(kvss.ttft_out, name, sizeof(name)),
			fd < 0 ? err : strerror(errno));
		if (fd >= 0)
			close(fd);
		return -1;
	}
	bad = fprintf(f, "request,ttft_us,hit_tokens,org,salted\n") < 0;
	for (i = 0; i < n && !bad; i++) {
		const struct wl_req *q = &d->wl.r[i];

		if (hits[i] == UINT32_MAX)
			bad = fprintf(f, "%zu,,,%016" PRIx64 ",%d\n", i, q->iso, q->salt != 0) < 0;
		else if (t[i] == UINT64_MAX)
			bad = fprintf(f, "%zu,,%u,%016" PRIx64 ",%d\n", i, hits[i], q->iso, q->salt != 0) < 0;
		else
			bad = fprintf(f, "%zu,%" PRIu64 ",%u,%016" PRIx64 ",%d\n", i, t[i], hits[i], q->iso,
				      q->salt != 0) < 0;
		timed += t[i] != UINT64_MAX;
		if (bad)
			e = errno;
	}
	if (!bad && (fflush(f) != 0 || ferror(f))) {
		bad = 1;
		e = errno;
	}
	if (fclose(f) != 0 && !bad) {
		bad = 1;
		e = errno;
	}
	if (bad) {
		fprintf(stderr, "kvss: --ttft-out %s: writing it: %s\n",
			plot_shown(kvss.ttft_out, name, sizeof(name)), e ? strerror(e) : "failed");
		return -1;
	}
	printf("kvss: summary: times to first token written to %s: %zu of %zu requests timed\n",
	       plot_shown(kvss.ttft_out, name, sizeof(name)), timed, n);
	return 0;
}

/* The most routers any shard's STATUS crossed (0: every shard on the rail). */
static unsigned int
max_hops(struct drv *d)
{
	unsigned int h = 0;
	uint16_t i;

	for (i = 0; i < d->nsh; i++)
		if (d->sh[i].hops > h)
			h = d->sh[i].hops;
	return h;
}

/* [{"model":M,"refills":N,"latency_us":X,"gbps":Y,"scale":S}, ...]: each model's own line. */
static void
model_fits_json(struct drv *d, char *out, size_t size)
{
	size_t n = 0;
	uint16_t m;

	n += (size_t)snprintf(out, size, "[");
	for (m = 0; m < kvss.cfg.driver.pc.num_models && n < size; m++) {
		const struct drv_model_learn *l = &d->learn.ml[m];
		char line[64] = "\"latency_us\":null,\"gbps\":null";
		double us, gbps;

		if (drv_learn_fit(&l->fit, &us, &gbps) == 0)
			snprintf(line, sizeof(line), "\"latency_us\":%.0f,\"gbps\":%.3f", us, gbps);
		n += (size_t)snprintf(out + n, size - n,
				      "%s{\"model\":%u,\"refills\":%" PRIu64 ",%s,\"scale\":%.3f}",
				      m ? "," : "", m, l->fit.n, line, l->factor);
	}
	if (n < size)
		snprintf(out + n, size - n, "]");
}

/*
 * Model 0's hit ratio over the requests begun since snapshot @p at
 * (requests, prompt tokens, hit tokens), up to @p now (NULL: up to the
 * snapshot itself, from the start), as JSON: a number, or null when none.
 */
static void
ratio_since(const uint64_t at[3], const struct kvss_drv_stats *now, char *out, size_t cap)
{
	uint64_t prompt = now ? now->prompt_tokens - at[1] : at[1];
	uint64_t hit = now ? now->hit_tokens - at[2] : at[2];

	if (now != NULL && now->shards_back == 0)
		prompt = 0;
	if (prompt == 0)
		snprintf(out, cap, "null");
	else
		snprintf(out, cap, "%.4f", (double)hit / (double)prompt);
}

/* How the summary names a level's line of the refill-time model. */
struct line_words {
	const char *name; /* "<name> fitted to N refills", "<name>: N refills" */
	const char *from; /* "with hits from <from>" */
	const char *past; /* "their time past <past>" */
	const char *key;  /* the printed keys' prefix: "<key>latency_us = " */
	const char *json; /* the JSON's: "fit_<json>_refills", "<json>_model_updates" */
	/* The shared level's: the configured line in the too-few line too, and
	 * its JSON keys even then (0 latency and bandwidth); the L2 line's
	 * JSON keys come only with a fit. */
	bool unfitted_says_configured;
	bool unfitted_json;
};

static const struct line_words l2_line = {
	"the second tier's line", "L2", "the model's line", "l2_", "l2", false, false,
};
static const struct line_words shared_line = {
	"the shared level's line", "it", "the model's and the L2 lines", "", "shared", true, true,
};

/*
 * The summary's line on a level's fitted line @p f (configured as
 * @p cfg_lat_us and @p cfg_gbps; @p updates times taken by the estimates),
 * and its JSON keys appended to @p j.
 */
static void
line_summary(const struct linfit *f, const struct line_words *w, double cfg_lat_us, double cfg_gbps,
	     uint64_t updates, char *j, size_t jsize)
{
	double lus = 0, gbps = 0;
	bool fitted = drv_learn_fit(f, &lus, &gbps) == 0;
	size_t n = strlen(j);
	char cfg[64] = "";

	if (fitted) {
		printf("kvss: summary: %s fitted to %" PRIu64 " refills with hits from %s (their time "
		       "past %s): %slatency_us = %.0f, %sgbps = %.2f (configured: %.0f and %.2f%s)\n",
		       w->name, f->n, w->from, w->past, w->key, lus, w->key, gbps, cfg_lat_us, cfg_gbps,
		       updates ? "; the estimates took it" : "");
	} else {
		if (w->unfitted_says_configured)
			snprintf(cfg, sizeof(cfg), " (%.0f us, %.2f Gb/s)", cfg_lat_us, cfg_gbps);
		printf("kvss: summary: %s: %" PRIu64 " refills with hits from %s, too few to fit; the "
		       "estimates use the configured one%s\n", w->name, f->n, w->from, cfg);
	}
	if (fitted || w->unfitted_json)
		snprintf(j + n, jsize - n, ",\"fit_%s_refills\":%" PRIu64 ",\"fit_%s_latency_us\":%.0f"
			 ",\"fit_%s_gbps\":%.3f,\"%s_model_updates\":%" PRIu64, w->json, f->n, w->json,
			 lus, w->json, gbps, w->json, updates);
}

/*
 * The summary's shared-level line and its part of the JSON line (appended
 * to @p l2j, @p cap bytes): what the driver's shared level did this run.
 */
static void
summary_shared(struct drv *d, const struct kvss_drv_stats *s, const struct prefixcache_stats *ps, char *l2j,
	       size_t cap)
{
	const struct drv_sh_stats *h = drv_sh_stats(d);
	uint64_t l50, l99, w50, w99;
	size_t n = strlen(l2j);
	unsigned int r;
	char badj[256] = "";

	drv_sh_lookup_pct(d, &l50, &l99);
	drv_sh_wait_pct(d, &w50, &w99);
	for (r = 1; r < SHARED_BAD_COUNT; r++)
		snprintf(badj + strlen(badj), sizeof(badj) - strlen(badj), "%s\"%s\":%" PRIu64,
			 r > 1 ? "," : "", shared_bad_name((enum shared_bad)r), h->bad[r]);
	printf("kvss: summary: shared level: hit tokens %" PRIu64 " (staged %" PRIu64 " columns "
	       "from %" PRIu64 " found in %" PRIu64 " lookups of %" PRIu64 " columns; lookup p50 %"
	       PRIu64 " us, p99 %" PRIu64 " us, %" PRIu64 " past the %u ms deadline or given up "
	       "when computing would have been done (%" PRIu64 "); a request's "
	       "start held back p50 %" PRIu64 " us, p99 %" PRIu64 " us); %" PRIu64
	       " columns sent down, %" PRIu64 " slices written, %" PRIu64 " failed or shed, %"
	       PRIu64 " records written; %" PRIu64 " bad records, %" PRIu64 " bad and %" PRIu64
	       " missing slices dropped; generation %" PRIu64 " (%" PRIu64 " changes seen, %" PRIu64
	       " reads refused)%s%s\n",
	       ps->shared_hit_tokens, h->staged_cols, h->lookup_found_cols, h->lookups,
	       h->lookup_cols, l50 / 1000, l99 / 1000, h->lookups_late,
	       kvss.cfg.shared.deadline_ms, h->lookups_abandoned, w50 / 1000, w99 / 1000, h->down_cols, h->down_slices, h->down_failed,
	       h->records_written, h->records_bad, h->slices_bad, h->slices_missing, h->generation,
	       h->generations_seen, h->generation_refused,
	       h->unavailable ? "; UNAVAILABLE at the end" : "",
	       h->off_at_start ? "; NOT USED by this run (its generation, said at start)" : "");
	/* Its line of the refill-time model, as the second tier's above. */
	line_summary(&d->learn.ml[0].fit3, &shared_line, kvss.cfg.shared.latency_us,
		     kvss.cfg.shared.gbps, d->learn.shared_updates, l2j, cap);
	n = strlen(l2j);
	snprintf(l2j + n, cap - n,
		 ",\"hit_tokens_shared\":%" PRIu64 ",\"shared\":{\"lookups\":%" PRIu64
		 ",\"lookup_cols\":%" PRIu64 ",\"found_cols\":%" PRIu64 ",\"staged_cols\":%" PRIu64
		 ",\"lookups_late\":%" PRIu64 ",\"lookups_abandoned\":%" PRIu64
		 ",\"found_expired\":%" PRIu64 ",\"lookup_p50_us\":%" PRIu64
		 ",\"lookup_p99_us\":%" PRIu64 ",\"start_wait_p50_us\":%" PRIu64
		 ",\"start_wait_p99_us\":%" PRIu64 ",\"lookup_errors\":%" PRIu64
		 ",\"down_cols\":%" PRIu64 ",\"down_slices\":%" PRIu64 ",\"down_failed\":%" PRIu64
		 ",\"down_busy\":%" PRIu64 ",\"down_no_parent\":%" PRIu64 ",\"down_gone\":%" PRIu64
		 ",\"records_written\":%" PRIu64 ",\"records_failed\":%" PRIu64
		 ",\"records_bad\":%" PRIu64 ",\"records_deleted\":%" PRIu64
		 ",\"up_batches\":%" PRIu64 ",\"up_failed\":%" PRIu64 ",\"slices_bad\":%" PRIu64
		 ",\"slices_missing\":%" PRIu64 ",\"up_keyless\":%" PRIu64
		 ",\"keyless_skipped\":%" PRIu64 ",\"down_keyless\":%" PRIu64
		 ",\"down_keyless_skipped\":%" PRIu64 ",\"down_restart\":%" PRIu64
		 ",\"bad\":{%s},\"generation\":%" PRIu64 ",\"generations_seen\":%" PRIu64
		 ",\"unavailable_times\":%" PRIu64 ",\"unavailable\":%s"
		 ",\"generation_refused\":%" PRIu64 ",\"generation_bad\":%" PRIu64
		 ",\"off_at_start\":%" PRIu64 "}",
		 ps->shared_hit_tokens, h->lookups, h->lookup_cols, h->lookup_found_cols,
		 h->staged_cols, h->lookups_late, h->lookups_abandoned, h->found_expired, l50 / 1000, l99 / 1000,
		 w50 / 1000, w99 / 1000, h->lookup_errors,
		 h->down_cols, h->down_slices, h->down_failed, h->down_busy, h->down_no_parent,
		 h->down_gone, h->records_written,
		 h->records_failed, h->records_bad, h->records_deleted, s->shared_up_batches,
		 h->up_failed, h->slices_bad, h->slices_missing, h->up_keyless, h->keyless_skipped,
		 h->down_keyless, h->down_keyless_skipped, h->down_restart, badj,
		 h->generation, h->generations_seen,
		 h->unavailable_times, h->unavailable ? "true" : "false", h->generation_refused,
		 h->generation_bad, h->off_at_start);
}

/*
 * The summary's lines on the refill-time model: how often its estimates fell
 * short and by how much, the line fitted to this run's refills (in the
 * configuration's keys, its JSON fields into @p fitj, @p cap bytes), and
 * each model's own when there are several.
 */
static void
summary_model(struct drv *d, const struct kvss_drv_stats *s, char *fitj, size_t cap)
{
	bool learned = kvss.cfg.driver.refill_model == KVSS_MODEL_LEARNED;
	double fit_us, fit_gbps;
	uint16_t m;

	/* The design picks a sequence again once its estimate has passed: a
	 * refill that took longer would make the wafer wait for its data. */
	if (d->learn.fit.n)
		printf("kvss: summary: the model's estimate fell short of the time taken for %" PRIu64
		       " of %" PRIu64 " refills (%.1f%%)%s\n", s->model_short, d->learn.fit.n,
		       100.0 * (double)s->model_short / (double)d->learn.fit.n,
		       !learned ? "; the estimates stayed as configured (refill_model = \"configured\")"
		       : kvss.cfg.driver.refill_short_pct
			       ? "; the estimates followed the line of the last 64 refills, scaled for a "
				 "share short (refill_model = \"learned\", refill_short_pct)"
			       : "; the estimates followed the line of the last 64 refills (refill_model = "
				 "\"learned\")");
	if (learned && kvss.cfg.driver.refill_short_pct)
		printf("kvss: summary: the learned model's scale: %.3f, for %u%% of refills to take "
		       "longer than estimated\n", d->learn.ml[0].factor, kvss.cfg.driver.refill_short_pct);
	/* Both ways an estimate costs: past it the wafer waits for data (wait_recv);
	 * before it, the sequence waits to be picked. */
	if (d->learn.fit.n) {
		uint64_t early = d->learn.fit.n - s->model_short;

		printf("kvss: summary: refills past their estimate by %.1f ms in all (%.0f us each), "
		       "the wafer waiting for their data; before it by %.1f ms in all (%.0f us each)%s",
		       (double)d->learn.late_ns / 1e6,
		       s->model_short ? (double)d->learn.late_ns / 1e3 / (double)s->model_short : 0.0,
		       (double)d->learn.early_ns / 1e6, early ? (double)d->learn.early_ns / 1e3 / (double)early : 0.0,
		       kvss.cfg.wafer.resume == KVSS_RESUME_ESTIMATE
			       ? ", their sequences waiting to be picked"
			       : ", which the design would have made their sequences wait "
				 "(wafer.resume = \"whole\" did not)");
		if (kvss.cfg.wafer.resume == KVSS_RESUME_ESTIMATE)
			printf(" (%.1f ms held in all)", (double)emu_held_ns(d->emu) / 1e6);
		printf("\n");
	}
	/* What the model would have to say to match: in the configuration's own
	 * keys and units, for an operator to copy (model 0's shown beside it). */
	if (drv_learn_fit(&d->learn.fit, &fit_us, &fit_gbps) == 0) {
		const struct prefixcache_model *pm = &kvss.cfg.driver.pc.model[0];
		char gbps[64] = "no bound (the times did not grow with the bytes)", used[64] = "";

		if (learned && d->learn.learned_at)
			snprintf(used, sizeof(used), ", used for the first %" PRIu64 " refills", d->learn.learned_at);
		else if (learned)
			snprintf(used, sizeof(used), ", used for all of them");

		if (fit_gbps > 0) {
			snprintf(gbps, sizeof(gbps), "%.2f", fit_gbps);
			snprintf(fitj, cap, "\"fit_refill_latency_us\":%.0f,\"fit_refill_gbps\":%.3f",
				 fit_us, fit_gbps);
		} else {
			snprintf(fitj, cap, "\"fit_refill_latency_us\":%.0f,\"fit_refill_gbps\":null",
				 fit_us);
		}
		printf("kvss: summary: the model fitted to these %" PRIu64 " refills: refill_latency_us = %.0f, "
		       "refill_gbps = %s (configured: %.0f and %.2f%s)\n", d->learn.fit.n, fit_us, gbps,
		       (double)pm->refill_latency_ns / 1000, pm->refill_bytes_per_ns * 8, used);
	} else {
		printf("kvss: summary: the model fitted to these refills: too few, or all of one size\n");
	}
	/* Each model learns apart (a draft's shards are not the target's). */
	for (m = 0; kvss.cfg.driver.pc.num_models > 1 && m < kvss.cfg.driver.pc.num_models; m++) {
		const struct drv_model_learn *l = &d->learn.ml[m];

		if (drv_learn_fit(&l->fit, &fit_us, &fit_gbps) == 0)
			printf("kvss: summary: model %u's own %" PRIu64 " refills fit refill_latency_us = "
			       "%.0f, refill_gbps = %.2f (0: no bound)%s%.3f\n", m, l->fit.n, fit_us, fit_gbps,
			       learned ? ", its estimates scaled by " : ", scale ", l->factor);
		else
			printf("kvss: summary: model %u's own %" PRIu64 " refills: too few to fit, or all of "
			       "one size\n", m, l->fit.n);
	}
}

/*
 * The summary's line on picks (a sequence's data whole when a run slot took
 * it, or waited for) and the JSON fields of the run's features (@p pickj,
 * @p cap bytes).
 */
static void
summary_picks(struct drv *d, const struct kvss_drv_stats *s, char *pickj, size_t cap)
{
	uint64_t np = s->picks_ready + s->picks_waited;

	snprintf(pickj, cap, "\"ahead_of_pick\":%u,\"picks_ready\":%" PRIu64
		 ",\"picks_waited\":%" PRIu64 ",\"refill_wait_at_pick_us\":%.1f"
		 ",\"l2_hit_seqs\":%" PRIu64 ",\"l2_ready_at_pick\":%" PRIu64
		 ",\"multimodal_trimmed_tokens\":%" PRIu64 ",\"generated_hit_tokens\":%" PRIu64
		 ",\"model1_hit_tokens\":%" PRIu64 ",\"hit_model0_only\":%" PRIu64
		 ",\"hit_model1_only\":%" PRIu64 ",\"spec_tokens\":%u,\"spec_rounds\":%" PRIu64
		 ",\"spec_proposed\":%" PRIu64 ",\"spec_accepted\":%" PRIu64
		 ",\"spec_overwrites\":%" PRIu64 ",\"spec_overwrites_draft\":%" PRIu64
		 ",\"routed_shards\":%" PRIu64
		 ",\"max_shard_hops\":%u,\"seqs_given_up\":%" PRIu64 ",\"refills_given_up\":%" PRIu64
		 ",\"given_up_tokens\":%" PRIu64 ",\"wafer_held\":%" PRIu64 ",\"wafer_held_ms\":%.1f"
		 ",\"skipped_seqs\":%" PRIu64 ",\"skipped_tokens\":%" PRIu64,
		 kvss.cfg.wafer.ahead_of_pick, s->picks_ready, s->picks_waited,
		 np ? (double)s->pick_wait_us / (double)np : 0.0, s->l2_hit_seqs,
		 s->l2_ready_at_pick, s->multimodal_trimmed, s->generated_hit_tokens,
		 s->model1_hit_tokens, s->hit_model0_only, s->hit_model1_only,
		 kvss.cfg.wafer.spec_tokens, s->spec_rounds, s->spec_proposed,
		 s->spec_accepted, s->spec_overwrites, s->spec_overwrites_draft,
		 s->routed_shards, max_hops(d), s->seqs_given_up, s->refills_given_up, s->given_up_tokens,
		 s->wafer_held, (double)s->wafer_held_us / 1000.0, s->skipped_seqs, s->skipped_tokens);
	printf("kvss: summary: picks: of %" PRIu64 " sequences with a refill, %" PRIu64
	       " had their data whole when a run slot took them, %" PRIu64 " waited (%.1f us "
	       "each on average, from the pick); of %" PRIu64 " with hits from L2, %" PRIu64
	       " ready at the pick (wafer.ahead_of_pick = %u)\n", np, s->picks_ready,
	       s->picks_waited, np ? (double)s->pick_wait_us / (double)np : 0.0, s->l2_hit_seqs,
	       s->l2_ready_at_pick, kvss.cfg.wafer.ahead_of_pick);
	if (s->seqs_given_up > 0)
		printf("kvss: summary: picks: %" PRIu64 " stopped waiting for their refills once computing "
		       "what they bring was sooner (refill policy adaptive): %" PRIu64 " refills, %" PRIu64
		       " tokens computed instead; their data still checked as it came\n",
		       s->seqs_given_up, s->refills_given_up, s->given_up_tokens);
	if (s->wafer_held > 0)
		printf("kvss: summary: the wafer stopped %" PRIu64 " times, %.1f ms in all, its EVICT path "
		       "backed up (a shard's control queue or its data jobs): meanwhile no request began "
		       "and no prefill ran\n", s->wafer_held, (double)s->wafer_held_us / 1000.0);
	if (s->skipped_seqs > 0)
		printf("kvss: summary: %" PRIu64 " sequences stopped caching while the EVICT path was backed "
		       "up (wafer.backpressure \"skip\"): %" PRIu64 " tokens not evicted\n",
		       s->skipped_seqs, s->skipped_tokens);
}

/*
 * The summary's second-tier line (when model 0 has one) and the JSON fields
 * of both tiers' hits (@p l2j, @p cap bytes; the shared level's follow).
 */
static void
summary_tier(struct drv *d, const struct kvss_drv_stats *s, const struct prefixcache_stats *ps, char *l2j,
	     size_t cap)
{
	uint64_t l2hit = ps->l2_hit_tokens < s->hit_tokens ? ps->l2_hit_tokens : s->hit_tokens;
	char l2fitj[200] = "";
	uint64_t l2_status = 0; /* what the shards' STATUS says their tiers hold (v2) */
	uint16_t k, c;

	if (drv_l2_model(0)) {
		const struct prefixcache_model *p0 = &kvss.cfg.driver.pc.model[0];

		line_summary(&d->learn.ml[0].fit2, &l2_line, (double)p0->l2_latency_ns / 1000,
			     p0->l2_bytes_per_ns * 8, s->l2_model_updates, l2fitj, sizeof(l2fitj));
	}
	for (k = 0; k < d->nsh; k++)
		for (c = 0; c < PREFIXCACHE_MAX_CACHES; c++)
			l2_status += d->sh[k].up ? d->sh[k].l2_stored[c] : 0;
	snprintf(l2j, cap,
		 "\"hit_tokens_l1\":%" PRIu64 ",\"hit_tokens_l2\":%" PRIu64
		 ",\"l2_stored_by_status\":%" PRIu64 ",\"l2_down_tokens\":%" PRIu64
		 ",\"l2_stored_tokens\":%" PRIu64 ",\"l2_deleted_tokens\":%" PRIu64
		 ",\"l2_adopted_cols\":%" PRIu64 ",\"l2_refused_cols\":%" PRIu64
		 ",\"l2_failed\":%" PRIu64 ",\"l2_up_failed_cols\":%" PRIu64
		 ",\"l2_gone_cols\":%" PRIu64 ",\"l2_recompute_faster_tokens\":%" PRIu64
		 ",\"l2_refill_probes\":%" PRIu64 "%s",
		 s->hit_tokens - l2hit, l2hit, l2_status, ps->l2_down_tokens, ps->l2_stored_tokens,
		 ps->l2_deleted_tokens, s->l2_adopted_cols, s->l2_refused_cols, s->l2_failed,
		 s->l2_up_failed_cols, s->l2_gone_cols, ps->l2_recompute_faster_tokens,
		 ps->l2_refill_probes, l2fitj);
	if (drv_l2_model(0))
		printf("kvss: summary: second tier: hit tokens %" PRIu64 " from DRAM, %" PRIu64
		       " from L2 (moved up in %" PRIu64 " batches); %" PRIu64
		       " tokens written down "
		       "(%.1f MB), %" PRIu64 " deleted by the driver, %" PRIu64
		       " held at the end; %" PRIu64 " columns taken back after restarts, %" PRIu64
		       " let go instead; %" PRIu64 " failures; %" PRIu64
		       " tokens recomputed, faster than L2 (%" PRIu64
		       " hits brought up anyway as probes of its line)\n",
		       s->hit_tokens - l2hit, l2hit, s->l2_up_batches, ps->l2_down_tokens,
		       (double)ps->l2_down_tokens *
			   (double)kvss.cfg.driver.pc.model[0].refill_bytes_per_token / 1e6,
		       ps->l2_deleted_tokens, ps->l2_stored_tokens, s->l2_adopted_cols,
		       s->l2_refused_cols, s->l2_failed, ps->l2_recompute_faster_tokens,
		       ps->l2_refill_probes);
	if (drv_l2_model(0) && s->l2_gone_recs > 0)
		printf("kvss: summary: second tier: %" PRIu64 " columns forgotten before they were "
		       "asked for: a shard's disk let them go, their organization's key retired "
		       "(%" PRIu64 " L2_GONE records)\n", s->l2_gone_cols, s->l2_gone_recs);
}

/* What the summary's lines and its JSON share, measured once. */
struct summary {
	const struct kvss_drv_stats *s;
	struct prefixcache_stats ps;
	double secs, hr, egbs, rgbs;
	double busy; /* the control lcore's share of busy polls (the wafer emulator's) */
	uint32_t p50, p99, e50, e99; /* refill times and the model's estimates, us */
	uint64_t perr, lost;
	char fitj[112], fitsj[PREFIXCACHE_MAX_MODELS * 112 + 4];
	char faultj[512], awayj[16], backj[16];
	char l2j[3072], pickj[1024], ttftj[768];
};

static void
summary_measure(struct drv *d, struct summary *x)
{
	const struct kvss_drv_stats *s = &d->st;
	/* The control lcore, where the wafer emulator makes and checks every
	 * byte: its share of busy polls, the run's pace when near 1. */
	const struct kvss_lcore_stats *cl = &kvss.stats[rte_get_main_lcore()];

	drv_report_derive(d);
	x->s = s;
	prefixcache_stats(d->pc, &x->ps);
	x->secs = d->started ? (double)(d->t_end - d->t_start) / (double)d->hz : 0;
	x->hr = s->prompt_tokens ? (double)s->hit_tokens / (double)s->prompt_tokens : 0;
	x->egbs = x->secs > 0 ? (double)s->evict_bytes / 1e9 / x->secs : 0;
	x->rgbs = x->secs > 0 ? (double)s->refill_bytes / 1e9 / x->secs : 0;
	x->busy = cl->busy_cycles + cl->idle_cycles
			  ? (double)cl->busy_cycles / (double)(cl->busy_cycles + cl->idle_cycles)
			  : 0;
	if (d->learn.nlat) {
		percentile_sort_u32(d->learn.lat_us, d->learn.nlat);
		percentile_sort_u32(d->learn.est_us, d->learn.nlat);
		x->p50 = percentile_u32(d->learn.lat_us, d->learn.nlat, 50);
		x->p99 = percentile_u32(d->learn.lat_us, d->learn.nlat, 99);
		x->e50 = percentile_u32(d->learn.est_us, d->learn.nlat, 50);
		x->e99 = percentile_u32(d->learn.est_us, d->learn.nlat, 99);
	}
	x->perr = drv_protocol_errors(d);
	x->lost = drv_unaccounted(d, true);
	snprintf(x->fitj, sizeof(x->fitj), "\"fit_refill_latency_us\":null,\"fit_refill_gbps\":null");
	snprintf(x->awayj, sizeof(x->awayj), "null");
	snprintf(x->backj, sizeof(x->backj), "null");
}

/* What went through: requests, bytes, refill times, deletes, the ports. */
static void
summary_traffic(struct drv *d, struct summary *x)
{
	const struct kvss_drv_stats *s = x->s;

	printf("kvss: summary: %s%s\n", d->finished ? "" : "(stopped early) ", d->source);
	printf("kvss: summary: requests %" PRIu64 " of %zu, prompt tokens %" PRIu64 ", hit tokens %" PRIu64
	       ", hit ratio %.4f\n", s->completed, d->nreq, s->prompt_tokens, s->hit_tokens, x->hr);
	printf("kvss: summary: evicted %" PRIu64 " tokens, %" PRIu64 " bytes, %.3f GB/s; refilled %" PRIu64
	       " tokens, %" PRIu64 " bytes, %.3f GB/s; %.2f s; the control lcore (the wafer "
	       "emulator's) %.0f%% busy\n",
	       s->evicted_tokens, s->evict_bytes, x->egbs, s->refilled_tokens, s->refill_bytes, x->rgbs, x->secs,
	       x->busy * 100);
	printf("kvss: summary: refills %" PRIu64 ", latency p50 %u us, p99 %u us (the driver's model: "
	       "p50 %u us, p99 %u us)", s->refills, x->p50, x->p99, x->e50, x->e99);
	if (s->seq_refill_failed)
		printf("; %" PRIu64 " sequences' refills failed, not timed", s->seq_refill_failed);
	printf("\n");
	summary_model(d, s, x->fitj, sizeof(x->fitj));
	model_fits_json(d, x->fitsj, sizeof(x->fitsj));
	printf("kvss: summary: deletes %" PRIu64 ", policy deletes %" PRIu64 ", expiries %" PRIu64
	       ", retransmits %" PRIu64 ", shard restarts %" PRIu64 ", peak stored %" PRIu64 " tokens\n",
	       s->deletes, x->ps.policy_deletes, s->expiries, s->retransmits, s->shard_restarts,
	       x->ps.peak_stored_tokens);
	printf("kvss: summary: ports: %" PRIu64 " restarted after their link went down, %" PRIu64
	       " frames dropped for a link that was down, %" PRIu64 " control frames for a full queue; %"
	       PRIu64 " times a shard was away, %" PRIu64 " requests begun as misses meanwhile, %" PRIu64
	       " shards back; %" PRIu64 " times a shard was silent (its model ran as misses until it "
	       "was heard again)\n",
	       s->link_restarts, s->tx_link_drops, s->tx_full_drops, s->shards_away, s->away_requests,
	       s->shards_back, s->shards_silent);
}

/* What happened on the way, each said only when it did: a shard away, a router, drafts. */
static void
summary_events(struct drv *d, struct summary *x)
{
	const struct kvss_drv_stats *s = x->s;

	if (s->shards_away) {
		ratio_since(d->away_at, NULL, x->awayj, sizeof(x->awayj));
		ratio_since(d->back_at, s, x->backj, sizeof(x->backj));
		printf("kvss: summary: hit ratio before a shard was first away %s; of the %" PRIu64
		       " requests begun after one last came back %s\n", x->awayj,
		       s->shards_back ? s->requests - d->back_at[0] : 0, x->backj);
	}
	if (s->driver_absent)
		printf("kvss: summary: this process did not run for %" PRIu64 " ms in all, %" PRIu64
		       " times (stopped, its core taken; a jump of its clock not counted): left out of its shards' "
		       "silence and its refills' deadlines\n", s->driver_absent_us / 1000, s->driver_absent);
	if (s->multimodal_trimmed)
		printf("kvss: summary: multimodal: %" PRIu64 " tokens not cached, after a multimodal token "
		       "(the design: caching stops before the first)\n", s->multimodal_trimmed);
	if (s->routed_shards) {
		uint16_t i;

		printf("kvss: summary: rail: %" PRIu64 " shard(s) reached through a router:", s->routed_shards);
		for (i = 0; i < d->nsh; i++)
			if (d->sh[i].hops)
				printf(" shard %u of model %u %u hop(s);", d->sh[i].ref->id, d->sh[i].model,
				       d->sh[i].hops);
		printf(" KVSS traffic belongs on one segment (driver.routed)\n");
	}
	if (s->generated_hit_tokens)
		printf("kvss: summary: %" PRIu64 " of the hit tokens are an earlier turn's answer "
		       "(generated; its last token is never evicted)\n", s->generated_hit_tokens);
	if (kvss.cfg.driver.pc.num_models > 1)
		printf("kvss: summary: model 1: %" PRIu64 " prompt tokens hit, hit ratio %.4f; requests "
		       "that hit in model 0 only %" PRIu64 ", in model 1 only %" PRIu64 "\n",
		       s->model1_hit_tokens,
		       s->prompt_tokens ? (double)s->model1_hit_tokens / (double)s->prompt_tokens : 0.0,
		       s->hit_model0_only, s->hit_model1_only);
	if (kvss.cfg.wafer.spec_tokens) {
		/* With one model there is no draft: its share is said only when
		 * there is one to have a share. */
		char draft[48] = "";
		if (kvss.cfg.driver.pc.num_models > 1)
			snprintf(draft, sizeof(draft), "; %" PRIu64 " by the draft",
				 s->spec_overwrites_draft);
		printf("kvss: summary: speculative decoding (wafer.spec_tokens = %u, spec_reject_pct = %u, "
		       "spec_seed = %" PRIu64 "): %" PRIu64 " rounds, %" PRIu64 " of %" PRIu64
		       " proposals accepted; %" PRIu64 " rejected tokens evicted, then overwritten in "
		       "place (every model%s)\n", kvss.cfg.wafer.spec_tokens,
		       kvss.cfg.wafer.spec_reject_pct, kvss.cfg.wafer.spec_seed, s->spec_rounds,
		       s->spec_accepted, s->spec_proposed, s->spec_overwrites, draft);
	}
	if (kvss.cfg.driver.recompute_tokens_per_s)
		printf("kvss: summary: the wafer's prefill of %" PRIu64 " missed tokens took %.1f ms "
		       "(driver.recompute_tokens_per_s = %u)\n", s->miss_tokens,
		       (double)s->compute_us / 1e3, kvss.cfg.driver.recompute_tokens_per_s);
}

/* Whether every byte was right and every token accounted for, and what losses cost. */
static void
summary_verdict(struct drv *d, struct summary *x)
{
	const struct kvss_drv_stats *s = x->s;

	printf("kvss: summary: verify failures %" PRIu64 " (bad bytes %" PRIu64 ", bad frames %" PRIu64
	       ", bad glue %" PRIu64 "), protocol errors %" PRIu64 " (ERROR records %" PRIu64
	       ", refill failures %" PRIu64
	       ", refill timeouts %" PRIu64 ", lost tokens %" PRIu64 ", dropped frames %" PRIu64 ")\n",
	       s->verify_failures, s->verify_bad_bytes, s->verify_bad_frames, s->verify_bad_glue, x->perr,
	       s->errors,
	       s->refill_failures, s->refill_timeouts, s->lost_tokens, s->rx_drops);
	printf("kvss: summary: resyncs %" PRIu64 " (data frames withheld on purpose %" PRIu64
	       "); the shards hold what the driver accounts for: %s (%" PRIu64 " tokens off)\n",
	       s->resyncs, s->data_withheld,
	       !d->finished ? "not checked" : x->lost == 0 ? "yes" : "NO", x->lost);
	printf("kvss: summary: on loss %s: %" PRIu64 " tokens lost in %" PRIu64 " TOKEN_LOST ranges, "
	       "%" PRIu64 " control messages sent again\n",
	       kvss.cfg.driver.on_loss == KVSS_LOSS_RESYNC ? "resync" : "exact", s->lost_tokens,
	       s->lost_records, s->retransmits);
	/*
	 * What the losses cost the cache, which lost_tokens (what the shards
	 * held from each cut, per shard) understates: a x->lost token drops its
	 * column and every later one of its prompt, and the sequence, if still
	 * sending, caches nothing more (docs/kvss.md, "what a loss costs").
	 */
	if (s->lost_records > 0 || s->errors > 0)
		printf("kvss: summary: what they cost the cache: %" PRIu64 " tokens dropped (the "
		       "columns from each lost token to its prompt's end as sent), %" PRIu64
		       " sequences stopped caching at the cut\n",
		       x->ps.loss_dropped_tokens, x->ps.loss_stopped);
	kvss_faults_json(x->faultj, sizeof(x->faultj));
	if (kvss_faults_on())
		printf("kvss: summary: faults injected %" PRIu64 ": %s\n", kvss_faults_total(), x->faultj);
}

/* The same as one JSON line (what was not measured or not checked is null, not 0). */
static void
summary_json(struct drv *d, struct summary *x)
{
	const struct kvss_drv_stats *s = x->s;
	bool learned = kvss.cfg.driver.refill_model == KVSS_MODEL_LEARNED;
	char pctj[160], shortj[16] = "null", lostj[24] = "null";
	char linej[80] = "\"model_short_share_line\":null,\"model_short_share_scaled\":null";

	if (d->learn.nlat)
		snprintf(pctj, sizeof(pctj), "\"refill_p50_us\":%u,\"refill_p99_us\":%u,\"model_p50_us\":%u,"
			 "\"model_p99_us\":%u", x->p50, x->p99, x->e50, x->e99);
	else
		snprintf(pctj, sizeof(pctj), "\"refill_p50_us\":null,\"refill_p99_us\":null,"
			 "\"model_p50_us\":null,\"model_p99_us\":null");
	if (d->learn.fit.n)
		snprintf(shortj, sizeof(shortj), "%.4f",
			 (double)s->model_short / (double)d->learn.fit.n);
	if (d->learn.line_timed)
		snprintf(linej, sizeof(linej), "\"model_short_share_line\":%.4f,\"model_short_share_scaled\":%.4f",
			 (double)d->learn.line_short / (double)d->learn.line_timed,
			 (double)d->learn.line_short_scaled / (double)d->learn.line_timed);
	if (d->finished && !d->open_loop)
		snprintf(lostj, sizeof(lostj), "%" PRIu64, x->lost);
	printf("{\"requests\":%" PRIu64 ",\"prompt_tokens\":%" PRIu64 ",\"hit_tokens\":%" PRIu64
	       ",\"hit_ratio\":%.4f,\"evicted_tokens\":%" PRIu64 ",\"refilled_tokens\":%" PRIu64
	       ",\"evict_bytes\":%" PRIu64 ",\"refill_bytes\":%" PRIu64 ",\"evict_gbps\":%.3f"
	       ",\"refill_gbps\":%.3f,\"seconds\":%.2f,\"control_lcore_busy\":%.3f,\"refills\":%" PRIu64
	       ",\"refills_timed\":%" PRIu64 ",\"refills_failed\":%" PRIu64
	       ",%s"
	       ",\"refill_model\":\"%s\",\"model_scale\":%.3f,\"model_short_share\":%s,%s,%s"
	       ",\"model_fits\":%s,\"resume\":\"%s\",\"refill_late_ms\":%.3f,\"refill_early_ms\":%.3f,\"held_ms\":%.3f"
	       ",\"retransmits\":%" PRIu64 ",\"control_frames_dropped\":%" PRIu64
	       ",\"shard_restarts\":%" PRIu64 ",\"shards_back\":%" PRIu64
	       ",\"hit_ratio_before_away\":%s,\"hit_ratio_after_return\":%s,%s,%s,\"verify_failures\":%" PRIu64
	       ",\"protocol_errors\":%" PRIu64 ",\"resyncs\":%" PRIu64 ",\"on_loss\":\"%s\""
	       ",\"lost_tokens\":%" PRIu64 ",\"lost_records\":%" PRIu64
	       ",\"loss_dropped_tokens\":%" PRIu64 ",\"loss_stopped_seqs\":%" PRIu64
	       ",\"over_capacity\":%" PRIu64
	       ",\"expiries\":%" PRIu64 ",\"expired_served\":%" PRIu64
	       ",\"faults\":%s"
	       ",\"unaccounted_tokens\":%s"
	       ",%s"
	       ",\"exit_status\":%d,\"finished\":%s}\n",
	       s->completed, s->prompt_tokens, s->hit_tokens, x->hr, s->evicted_tokens, s->refilled_tokens,
	       s->evict_bytes, s->refill_bytes, x->egbs, x->rgbs, x->secs, x->busy, s->refills, d->learn.fit.n,
	       s->seq_refill_failed, pctj,
	       learned ? "learned" : "configured", d->learn.ml[0].factor, shortj, linej,
	       x->fitj, x->fitsj, kvss.cfg.wafer.resume == KVSS_RESUME_ESTIMATE ? "estimate" : "whole",
	       (double)d->learn.late_ns / 1e6, (double)d->learn.early_ns / 1e6, (double)emu_held_ns(d->emu) / 1e6,
	       s->retransmits, s->tx_full_drops, s->shard_restarts, s->shards_back, x->awayj, x->backj, x->l2j, x->pickj,
	       s->verify_failures, x->perr, s->resyncs,
	       kvss.cfg.driver.on_loss == KVSS_LOSS_RESYNC ? "resync" : "exact", s->lost_tokens,
	       s->lost_records, x->ps.loss_dropped_tokens, x->ps.loss_stopped, s->over_capacity,
	       s->expiries, s->expired_served, x->faultj, lostj, x->ttftj,
	       kvss_driver_status(d), d->finished ? "true" : "false");
}

void
kvss_driver_summary(struct drv *d)
{
	struct summary *x;

	if (d->pc == NULL)
		return;
	x = calloc(1, sizeof(*x));
	if (x == NULL) {
		fprintf(stderr, "kvss: summary: no memory\n");
		return;
	}
	emu_stop(d->emu); /* what had not begun is counted */
	summary_measure(d, x);
	if (kvss.plot_refills != NULL && plot_refills(d) != 0)
		d->plot_failed = true;
	if (kvss.ttft_out != NULL && d->emu != NULL && ttft_out(d) != 0)
		d->plot_failed = true;
	summary_traffic(d, x);
	summary_events(d, x);
	summary_picks(d, x->s, x->pickj, sizeof(x->pickj));
	summary_tier(d, x->s, &x->ps, x->l2j, sizeof(x->l2j));
	if (kvss.cfg.shared.conf[0] != '\0')
		summary_shared(d, x->s, &x->ps, x->l2j, sizeof(x->l2j));
	drv_ttft_summary(d, x->ttftj, sizeof(x->ttftj));
	summary_verdict(d, x);
	summary_json(d, x);
	fflush(stdout);
	free(x);
}

/* ---- The verdict: what the run left, and its exit status ---- */

uint64_t
drv_unaccounted(struct drv *d, bool say)
{
	if (!d->finished)
		return 0;
	return drv_account_off(d, say);
}

uint64_t
drv_account_off(struct drv *d, bool say)
{
	uint64_t sum = 0;
	uint16_t i, c;

	if (d->open_loop)
		return 0;
	for (i = 0; i < d->nsh; i++) {
		const struct drv_shard *sh = &d->sh[i];

		if (!sh->up)
			continue;
		for (c = 0; c < kvss.cfg.driver.pc.model[sh->model].num_caches; c++) {
			uint64_t mine = prefixcache_stored(d->pc, sh->model, c);
			uint64_t diff = sh->stored[c] > mine ? sh->stored[c] - mine : mine - sh->stored[c];

			if (diff && say)
				printf("kvss: summary: shard %u of model %u holds %" PRIu64
				       " tokens in cache %u; the driver accounts for %" PRIu64 "\n",
				       sh->ref->id, sh->model, sh->stored[c], c, mine);
			sum += diff;
		}
	}
	return sum;
}

/*
 * Tokens by which what the shards' latest STATUS says their second tiers
 * hold differs from the driver's count, over the shards with a tier: an
 * L2_DELETE or L2_DOWN acknowledged may still wait in a shard's queue
 * behind a slow disk, and its STATUS then counts the tokens as before.
 */
uint64_t
drv_l2_account_off(const struct drv *d)
{
	uint64_t sum = 0;
	uint16_t i, c;

	if (d->open_loop)
		return 0;
	for (i = 0; i < d->nsh; i++) {
		const struct drv_shard *sh = &d->sh[i];

		/* A shard with a tier its model does not use: the driver never
		 * takes back or lets go what it kept, and counts none of it. */
		if (!sh->up || !drv_l2_model(sh->model))
			continue;
		for (c = 0; c < kvss.cfg.driver.pc.model[sh->model].num_caches; c++) {
			uint64_t mine = prefixcache_l2_stored(d->pc, sh->model, c);

			if (sh->l2_capacity[c] != 0)
				sum += sh->l2_stored[c] > mine ? sh->l2_stored[c] - mine : mine - sh->l2_stored[c];
		}
	}
	return sum;
}

uint64_t
drv_protocol_errors(struct drv *d)
{
	return d->st.errors + d->st.refill_failures + d->st.refill_timeouts + d->st.rx_drops +
	       d->st.too_big + d->st.lost_tokens;
}

/*
 * The run's exit status (docs/kvss.md, "Exit status"): what was wrong
 * first, then what could not run, then what was degraded. A wrong byte,
 * a wrong account, a cache over capacity or an expired token served is
 * wrong whatever else happened. Refills that failed because a shard
 * restarted or went away, lost data, an L2 column that failed its
 * checksum, frames dropped: counted, expected under faults, and the
 * cache stayed right; they make the status DEGRADED unless faults were
 * injected on purpose (--faults), when they are the point of the run.
 */
int
kvss_driver_status(struct drv *d)
{
	bool wrong, degraded;

	drv_report_derive(d); /* the emulator's counters, as of now */
	wrong = d->st.verify_failures || drv_unaccounted(d, false) || d->st.over_capacity ||
		d->st.expired_served;
	/* A column that did not come up (L2_UP, SH_UP: a checksum, a read)
	 * lost its tokens, which TOKEN_LOST counts; an L2_DOWN refused for
	 * room (NO_SPACE) only means the column was not kept, which the
	 * driver forgets: not degraded. */
	degraded = drv_protocol_errors(d) || d->st.resyncs || d->st.shard_restarts || d->st.shards_away;
	if (wrong)
		return KVSS_EXIT_WRONG;
	if (d->fatal)
		return d->fatal == 2 ? KVSS_EXIT_CONFIG : KVSS_EXIT_NOT_RUN;
	if (d->plot_failed)
		return KVSS_EXIT_CONFIG; /* the command line asked for a file it did not get */
	return degraded && !kvss_faults_on() ? KVSS_EXIT_DEGRADED : KVSS_EXIT_OK;
}
