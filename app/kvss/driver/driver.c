/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The driver role: the control lcore runs lib/prefixcache for every model,
 * one control stream per (model, shard), and the wafer emulator. Its parts
 * (driver_priv.h lists them, and the order calls go in): the sink turns
 * library calls into records (sink.c), the link sends them and the evicted
 * bytes (link.c), refill times are learned (learn.c), what the shards send is
 * taken in (rx.c), a model whose shards lost their state restarts with a new
 * epoch (epoch.c), telemetry, the summary and the verdict show it
 * (report.c), and the emulator (emulator/emulator.c) runs the requests and
 * checks every refilled byte. This file sets them up and runs the loop: it
 * is the top, and no part calls back into it.
 *
 * The wafer emulator shares the control lcore: on this project's machines
 * the three processes of the demo share two cores, and one lcore per role
 * keeps them from starving each other. It sends data only for batches whose
 * EVICT has left (so a shard never holds data past its batch timeout
 * because the EVICT waited for the window).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <rte_cycles.h>
#include <rte_ethdev.h>
#include <rte_lcore.h>
#include <rte_malloc.h>
#include <rte_mbuf.h>
#include <rte_random.h>

#include "driver_priv.h"
#include "emulator/emulator.h"
#include "kvss.h"
#include "mono.h"

#define BURST 32
/* Backpressure: stop sending tokens while this much waits to go out. */
#define BACKLOG_HIGH 256
#define JOBS_HIGH 32

static struct kvss_lcore_stats *
lst(void)
{
	return &kvss.stats[rte_lcore_id()];
}

/* ---- What the emulator asks --------------------------------------------------------- */

/* Every shard of @p model answered our HELLO and none is silent: the model caches. */
static bool
hook_model_up(void *arg, uint16_t model)
{
	uint16_t i;

	struct drv *d = arg;

	for (i = 0; i < d->nshards[model]; i++)
		if (!d->sh[d->first_shard[model] + i].up || d->sh[d->first_shard[model] + i].silent)
			return false;
	return true;
}

static bool
hook_shard_up(void *arg, uint16_t k)
{
	struct drv *d = arg;

	return k < d->nsh && d->sh[k].up;
}

static void
hook_model_refilled(void *arg, uint16_t m, uint64_t ns, uint64_t bytes, uint64_t l2_bytes,
		    uint64_t shared_bytes)
{
	struct drv *d = arg;

	drv_learn_model(&d->learn, m, ns, bytes, l2_bytes, shared_bytes);
}

static void
hook_seq_refilled(void *arg, uint64_t ns, uint64_t est_ns, uint64_t est_bytes)
{
	struct drv *d = arg;

	drv_learn_seq(&d->learn, ns, est_ns, est_bytes);
}

/* Its shared-level lookups are back, or late (shared.c). */
static bool
hook_request_ready(void *arg, uint32_t req, uint64_t now)
{
	struct drv *d = arg;

	return drv_sh_request_ready(d, req, now);
}

static const struct emu_hooks hooks = {
	.model_up = hook_model_up,
	.request_ready = hook_request_ready,
	.shard_up = hook_shard_up,
	.model_refilled = hook_model_refilled,
	.seq_refilled = hook_seq_refilled,
};

static bool
all_up(struct drv *d)
{
	uint16_t i;

	for (i = 0; i < d->nsh; i++)
		if (!d->sh[i].up)
			return false;
	return true;
}

/*
 * A shard that is away (its port's link went down, or nothing heard from it
 * for away_ms) holds nothing we can count on: its model drops its prefixes,
 * fails its refills and takes a new epoch at once (drv_model_restart), and runs
 * as misses until every shard answers the new HELLO. Without this, requests
 * waited for refills to time out and the wafer stopped on the backlog. With
 * away_ms = 0 no shard is ever away: the wafer waits while one is not up.
 */
static void
shard_away(struct drv *d, struct drv_shard *sh, uint64_t tsc, const char *why)
{
	if (kvss.cfg.driver.away_ms == 0 || !sh->up)
		return; /* away_ms = 0: never away, the driver waits for it */
	if (d->st.shards_away == 0) {
		const struct emu_stats *es = emu_stats(d->emu);

		d->away_at[0] = es->requests;
		d->away_at[1] = es->prompt_tokens;
		d->away_at[2] = es->hit_tokens;
	}
	d->st.shards_away++;
	sh->away = true;
	sh->silent = false;
	drv_model_restart(d, sh->model, tsc, why, sh, &d->st.shard_restarts);
}

static void
link_went_down(void *arg, struct drv_shard *sh, uint64_t tsc)
{
	struct drv *d = arg;

	shard_away(d, sh, tsc, "is away (its link went down)");
}

/*
 * Its port's link is up again. A shard still taken for up (away_ms = 0, or
 * a link that flapped faster than we looked) is sent a HELLO of the epoch in
 * force: the same shard answers STATUS as before and nothing changes; one
 * started in its place answers with its new epoch, and its model starts
 * over (rx.c). Without it, a shard whose stream had nothing in flight when
 * it was replaced heard nothing from us, and its successor, which speaks
 * only once it has a HELLO, never spoke: the run waited for ever.
 */
static void
link_came_up(void *arg, struct drv_shard *sh, uint64_t tsc)
{
	struct drv *d = arg;

	if (!sh->up)
		return; /* not up: its HELLOs go every hello_ms anyway */
	d->st.link_hellos++;
	drv_link_hello(&d->link, sh, d->model_epoch[sh->model], tsc);
}

/*
 * Shards that have sent nothing for away_ms are silent: busy, most likely
 * (a shard's second tier on a loaded machine), or gone. Nothing a silent
 * shard holds is lost while its epoch holds, so its model runs as misses
 * (no new lookups, nothing new stored) and keeps its prefixes; heard again
 * with the same epochs (rx.c), it caches again as it was. Silent for
 * dead_ms, it is taken for gone (shard_away). A link that went down is
 * gone at once (link_went_down). Drops of a healthy shard's cache on a
 * false "away" cost the demo 4 points of hit ratio and failed refills.
 */
static void
watch_silence(struct drv *d, uint64_t tsc)
{
	uint64_t away = d->hz / 1000 * kvss.cfg.driver.away_ms;
	uint64_t dead = d->hz / 1000 * kvss.cfg.driver.dead_ms;
	uint16_t i;

	if (kvss.cfg.driver.away_ms == 0)
		return;
	for (i = 0; i < d->nsh; i++) {
		struct drv_shard *sh = &d->sh[i];
		/* A clock that went back (another CPU's TSC) is no silence. */
		uint64_t quiet = tsc > sh->last_rx ? tsc - sh->last_rx : 0;

		if (!sh->up)
			continue;
		if (quiet > dead) {
			sh->silent = false;
			shard_away(d, sh, tsc, "is away (nothing heard from it for driver.dead_ms)");
		} else if (quiet > away && !sh->silent) {
			sh->silent = true;
			d->st.shards_silent++;
			printf("kvss: driver: model %u shard %u: nothing heard for %" PRIu64 " ms: its "
			       "model runs as misses, its prefixes kept until it is heard again "
			       "(or gone after driver.dead_ms = %u)\n", sh->model, sh->ref->id,
			       quiet * 1000 / d->hz, kvss.cfg.driver.dead_ms);
			fflush(stdout);
		}
	}
}

/*
 * The loop's longest own wait is 1 ms (a sleep in poll_mode "interrupt"),
 * and its turns are short (a burst, a wafer step): a gap this long between
 * two turns is time the process did not run (or, were a turn ever this
 * long, time it did not listen either way).
 */
#define DRV_ABSENT_MS 250u

/*
 * At TSC @p t0: how far the TSC has run ahead of CLOCK_MONOTONIC since
 * they were last read together (a VM restored on another host), in TSC
 * ticks; 0 within 50 ms (the two clocks' reads are not one instant).
 */
static uint64_t
tsc_jump(const struct drv *d, uint64_t t0)
{
	uint64_t seen, ran;

	if (t0 < d->clk_tsc)
		return 0;
	seen = mono_ns() - d->clk_mono_ns;
	ran = mono_ticks_to(t0 - d->clk_tsc, d->hz, 1000000000);
	/* 50 ms, and 1% of what passed for an error in the TSC's measured rate. */
	if (ran < seen + 50000000 + seen / 100)
		return 0;
	return mono_ticks_to(ran - seen, 1000000000, d->hz);
}

/* The TSC and CLOCK_MONOTONIC, read back to back (tsc_jump's pair). */
static void
clk_pair(struct drv *d)
{
	d->clk_tsc = rte_get_tsc_cycles();
	d->clk_mono_ns = mono_ns();
}

/*
 * The loop did not run from @p from to @p to: the process was stopped
 * (SIGSTOP, a VM's snapshot), its core was taken, or the clock jumped (a
 * VM restored on another host: the TSC this VM reads went 89,094 s forward
 * once here, CLOCK_MONOTONIC 2 s). What the shards sent meanwhile waits in
 * the receive queues, so the gap says nothing of them: their silence is
 * measured while this loop listens, and each shard's last word moves on by
 * the gap (a shard gone is still found away_ms after the loop runs again).
 * The end-of-run settle starts over (a STATUS read now may be from before
 * the gap), and what the shared level owes is not later by it.
 *
 * The @p jump of the TSC is no time at all: the run's clock (drv_now_ns:
 * expiry by first and last use, records' first use, arrivals) starts that
 * much later, so that a jump neither expires the prefix map nor dates
 * records in the future. The rest of the gap is time that passed: the
 * refills' deadlines move on by it, as for a hold of the wafer (which
 * covers them already when the wafer was held).
 */
void
drv_absent(struct drv *d, uint64_t from, uint64_t to, uint64_t jump)
{
	uint64_t gap = to - from, from_ns, us, jump_ms;
	char more[80];
	uint16_t i;

	if (jump > gap)
		jump = gap;
	for (i = 0; i < d->nsh; i++) {
		struct drv_shard *sh = &d->sh[i];

		proto_stream_absent(&sh->stream, to); /* what is acked now waited for it */
		if (sh->last_rx == 0)
			continue; /* never heard: it stays so */
		if (sh->last_rx < from)
			sh->last_rx += gap;
		else if (sh->last_rx < to)
			sh->last_rx = to;
	}
	from_ns = drv_now_ns(d, from);
	d->t_start += jump;
	if (d->wafer_held_at != 0)
		d->wafer_held_at += jump; /* its hold counts no jump either */
	else
		emu_hold_ended(d->emu, from_ns, drv_now_ns(d, to));
	emu_absent(d->emu); /* what was out took the gap too: no sample of the tiers */
	d->settle_at = 0;
	us = mono_ticks_to(gap - jump, d->hz, 1000000);
	jump_ms = mono_ticks_to(jump, d->hz, 1000);
	drv_sh_absent(d, us * 1000);
	d->st.driver_absent++;
	d->st.driver_absent_us += us;
	if (us < 1000000 && jump_ms < 1000)
		return; /* counted; a busy machine's shorter ones would crowd the log */
	more[0] = '\0';
	if (jump_ms != 0)
		snprintf(more, sizeof(more),
			 ", and its clock jumped %" PRIu64 " ms more (not counted)", jump_ms);
	printf("kvss: driver: this process did not run for %" PRIu64
	       " ms (stopped, its core taken)%s: "
	       "its shards' silence and its refills' deadlines leave it out\n",
	       us / 1000, more);
	fflush(stdout);
}

void
drv_gap(struct drv *d, uint64_t prev, uint64_t t0, uint64_t *start_deadline)
{
	if (d->started)
		drv_absent(d, prev, t0, tsc_jump(d, t0));
	else
		*start_deadline += t0 - prev; /* the shards' time to answer HELLO, not its own */
}

/* ---- Set-up ------------------------------------------------------------------------- */

static void
endpoint_addr(struct proto_addr *a, const struct kvss_endpoint *to, uint16_t dst_port)
{
	const struct kvss_endpoint *me = &kvss.cfg.driver.addr;

	memset(a, 0, sizeof(*a));
	memcpy(a->dst_mac, to->mac, 6);
	memcpy(a->src_mac, me->mac, 6);
	a->dst_ip = to->ipv4;
	a->src_ip = me->ipv4;
	a->src_port = kvss.cfg.udp.ctrl;
	a->dst_port = dst_port;
	a->has_vlan = to->vlan != 0;
	a->vlan_tci = to->vlan;
}

static bool
quitting(void)
{
	return kvss_quitting() != 0;
}

/*
 * d->source for the built-in workload: "the built-in workload", "with a
 * library of N documents" when it has one (make demo's verdict reads the
 * library's size here, as kvss-trace --documents), and "(the trace is not
 * there)" when @p trace_named.
 */
static void
builtin_source(struct drv *d, uint32_t documents, bool trace_named)
{
	char lib[48] = "";

	if (documents > 0)
		snprintf(lib, sizeof(lib), " with a library of %u documents", documents);
	snprintf(d->source, sizeof(d->source), "the built-in workload%s%s", lib,
		 trace_named ? " (the trace is not there)" : "");
}

/*
 * When each request arrives (wafer.arrivals): none for a closed loop. A
 * trace that cannot be replayed at its times is refused naming its line.
 */
static int
load_arrivals(struct drv *d, const struct kvss_config *cfg)
{
	char err[256];

	if (cfg->wafer.arrivals == KVSS_ARRIVALS_CLOSED)
		return 0;
	d->arrival_ns = malloc(sizeof(*d->arrival_ns) * (d->nreq ? d->nreq : 1));
	if (d->arrival_ns == NULL)
		return -1;
	if (workload_arrivals(&d->wl, d->nreq, cfg->wafer.time_scale,
			      cfg->wafer.arrivals == KVSS_ARRIVALS_POISSON ? cfg->wafer.arrival_rate : 0,
			      cfg->wafer.arrival_seed, d->arrival_ns, err, sizeof(err)) != 0) {
		fprintf(stderr, "kvss: %s: wafer.arrivals = \"%s\": %s: %s\n", cfg->path,
			cfg->wafer.arrivals == KVSS_ARRIVALS_TRACE ? "trace" : "poisson", d->source, err);
		return -2;
	}
	return 0;
}

/* The requests: the trace, or the built-in workload when it is not there. */
static int
load_workload(struct drv *d, const struct kvss_config *cfg)
{
	char err[512];

	if (cfg->wafer.trace[0] != '\0' && access(cfg->wafer.trace, R_OK) == 0) {
		/* A long trace: a signal stops the load (then the program). */
		workload_set_stop(quitting);
		if (workload_load(cfg->wafer.trace, 512, cfg->wafer.limit, &d->wl, err, sizeof(err)) != 0) {
			if (kvss_quitting()) {
				printf("kvss: driver: %s\n", err);
				return -3;
			}
			fprintf(stderr, "kvss: %s: wafer.trace: %s\n", cfg->path, err);
			return -2;
		}
		snprintf(d->source, sizeof(d->source), "%s", cfg->wafer.trace);
	} else {
		uint32_t n = cfg->wafer.limit ? cfg->wafer.limit : cfg->wafer.generate;

		if (workload_generate_docs(n, cfg->wafer.documents, &d->wl) != 0) {
			fprintf(stderr, "kvss: driver: out of memory for the built-in workload (%u "
					"requests)\n", n);
			return -1;
		}
		/* wafer.multimodal_every: an image of 64 tokens ends every Nth prompt. */
		workload_mark_multimodal(&d->wl, cfg->wafer.multimodal_every, 64);
		builtin_source(d, cfg->wafer.documents, cfg->wafer.trace[0] != '\0');
	}
	d->nreq = d->wl.n;
	if (cfg->wafer.limit && d->nreq > cfg->wafer.limit)
		d->nreq = cfg->wafer.limit;
	return load_arrivals(d, cfg);
}

/* The longest first-use TTL of any organization (theirs, or the driver's
 * they inherit; 0: none, no check). */
static uint64_t
expiry_check_ns(const struct kvss_config *cfg)
{
	uint64_t t = cfg->driver.pc.ttl_first_ns;
	uint16_t i;

	for (i = 0; t != 0 && i < cfg->driver.num_orgs; i++)
		if (cfg->driver.org[i].ttl_first_ns > t)
			t = cfg->driver.org[i].ttl_first_ns;
	return t;
}

static int
create_emulator(struct drv *d, const struct kvss_config *cfg)
{
	struct emu_shard *es = calloc(d->nsh, sizeof(*es));
	struct emu_params ep = {
		.pc = d->pc, .pcp = &cfg->driver.pc, .wl = &d->wl, .nreq = d->nreq,
		.num_models = cfg->driver.pc.num_models, .max_inflight = cfg->wafer.max_inflight,
		.ahead = cfg->wafer.ahead_of_pick,
		.step_tokens = cfg->wafer.step_tokens,
		.spec_tokens = cfg->wafer.spec_tokens,
		.spec_reject = cfg->wafer.spec_reject_pct / 100.0,
		.spec_seed = cfg->wafer.spec_seed,
		.refill_timeout_ns = (uint64_t)cfg->driver.refill_timeout_ms * 1000000,
		.expiry_check_ns = expiry_check_ns(cfg),
		.recompute_tokens_per_s = cfg->driver.recompute_tokens_per_s,
		.prefill_overhead_ns = (uint64_t)cfg->wafer.prefill_overhead_us * 1000,
		.arrival_ns = d->arrival_ns,
		.compute_only = cfg->driver.refill_policy == KVSS_POLICY_COMPUTE_ONLY,
		.give_up = kvss_policy_adaptive(cfg->driver.refill_policy) &&
			   cfg->driver.recompute_tokens_per_s > 0,
		.skip_backed_up = cfg->wafer.backpressure == KVSS_BP_SKIP,
		.resume_estimate = cfg->wafer.resume == KVSS_RESUME_ESTIMATE,
		.open_loop = d->open_loop, .nshards = d->nsh, .shard = es,
		.hooks = &hooks, .arg = d};
	uint16_t k, c;

	if (es == NULL)
		return -1;
	for (k = 0; k < d->nsh; k++) {
		es[k].model = d->sh[k].model;
		es[k].id = d->sh[k].ref->id;
		memcpy(es[k].bytes_per_token, d->sh[k].ref->bytes_per_token,
		       sizeof(es[k].bytes_per_token));
	}
	d->emu = emu_create(&ep);
	free(es);
	if (d->emu == NULL)
		return -1;
	/* Open loop: no STATUS will say the buffers; the configuration does. */
	for (k = 0; d->open_loop && k < d->nsh; k++)
		for (c = 0; c < PREFIXCACHE_MAX_CACHES; c++)
			emu_shard_buffers(d->emu, k, c, d->sh[k].ref->buffers[c]);
	return 0;
}

/* When requests arrive, what a prefill costs, and which hits are refilled. */
static void
drv_say_ttft_setup(const struct drv *d, const struct kvss_config *cfg)
{
	const char *pol = cfg->driver.refill_policy == KVSS_POLICY_IO_ONLY ? "io-only: every hit refilled"
			  : cfg->driver.refill_policy == KVSS_POLICY_COMPUTE_ONLY
				  ? "compute-only: the cache is off, every prompt computed"
			  : cfg->driver.recompute_tokens_per_s == 0
				  ? (cfg->driver.refill_policy == KVSS_POLICY_SPLIT
					     ? "split, but no prefill rate (driver.recompute_tokens_per_s): every hit "
					       "refilled whole"
					     : "adaptive, but no prefill rate (driver.recompute_tokens_per_s): every hit "
					       "refilled")
			  : cfg->driver.refill_policy == KVSS_POLICY_SPLIT
				  ? "split: a hit refilled only where that beats computing it, and a DRAM hit's "
				    "front computed while its back refills (Cake's split)"
				  : "adaptive: a hit refilled only where that beats computing it";

	if (cfg->wafer.arrivals == KVSS_ARRIVALS_CLOSED)
		printf("kvss: driver: arrivals closed (each request as a slot frees; its time to first "
		       "token counts from then)");
	else
		printf("kvss: driver: arrivals %s over %.1f s (%s)",
		       cfg->wafer.arrivals == KVSS_ARRIVALS_TRACE ? "at the trace's times" : "poisson",
		       d->nreq ? (double)d->arrival_ns[d->nreq - 1] / 1e9 : 0.0,
		       cfg->wafer.arrivals == KVSS_ARRIVALS_TRACE ? "wafer.time_scale" : "wafer.arrival_rate");
	printf("; prefill %u tokens/s + %u us a request; refill policy %s\n",
	       cfg->driver.recompute_tokens_per_s, cfg->wafer.prefill_overhead_us, pol);
}

struct drv *
kvss_driver_new(void)
{
	return calloc(1, sizeof(struct drv));
}

int
kvss_driver_load(struct drv *d)
{
	return load_workload(d, &kvss.cfg); /* -2: the configuration's trace; -3: a signal; -1: no memory */
}

/*
 * The driver's library (its PrefixMap) from the configuration: EVICT
 * batches as large as a frame holds, its entries made at start, the
 * shared level's starting line, the organizations' TTLs and shares. 0, or -2 (said: a configuration the
 * library refuses).
 */
static int
library_make(struct drv *d, const struct kvss_config *cfg, struct prefixcache_params *pp)
{
	uint32_t max_entries = proto_evict_max_entries(cfg->mtu);
	struct prefixcache_sink sink;
	uint16_t m, i;

	*pp = cfg->driver.pc;
	pp->l2_confirm = true; /* a column is served once every shard said it is on disk */
	/* Every entry the caches' capacities can hold made now, not while a prompt is recorded. */
	pp->reserve = true;
	/* Columns found in the shared level are staged in the library's second tier. */
	pp->shared_staged = cfg->shared.conf[0] != '\0' ? cfg->shared.staged : 0;
	/* One EVICT frame holds G x C entries: G follows from the MTU. */
	for (m = 0; m < pp->num_models; m++) {
		uint32_t g = max_entries / pp->model[m].num_caches;

		if (pp->model[m].max_batch_tokens == 0 || pp->model[m].max_batch_tokens > g)
			pp->model[m].max_batch_tokens = (uint16_t)(g > 65535 ? 65535 : g);
		/* The shared level's line, where its learning starts (learn.c). */
		pp->model[m].shared_latency_ns = (uint64_t)cfg->shared.latency_us * 1000;
		pp->model[m].shared_bytes_per_ns = cfg->shared.gbps / 8.0;
	}
	drv_sink_ops(&d->sink, &sink);
	d->pc = prefixcache_create(pp, &sink);
	if (d->pc == NULL) {
		fprintf(stderr, "kvss: %s: driver: the models do not make a valid driver\n", cfg->path);
		return -2;
	}
	drv_learn_init(&d->learn, d->pc, &d->st, cfg->driver.refill_model == KVSS_MODEL_LEARNED,
		       cfg->driver.refill_short_pct);
	for (i = 0; i < cfg->driver.num_orgs; i++) {
		const struct kvss_org_ttl *o = &cfg->driver.org[i];
		uint64_t iso = proto_ref_isolation_id(o->name, strlen(o->name));

		prefixcache_org_ttl(d->pc, iso, o->ttl_last_ns, o->ttl_first_ns);
		/* In range: the configuration's loader checked it. */
		prefixcache_org_dram_share(d->pc, iso, o->dram_share, o->dram_cap);
		prefixcache_org_l2_share(d->pc, iso, o->l2_share, o->l2_cap);
	}
	return 0;
}

/* The shards of every model: their addresses, control streams and ports. 0, or -1. */
static int
shards_make(struct drv *d, const struct kvss_config *cfg, uint16_t num_models)
{
	uint16_t m, i, k = 0;

	for (m = 0; m < num_models; m++)
		d->nsh = (uint16_t)(d->nsh + cfg->driver.models[m].num_shards);
	d->sh = rte_zmalloc("kvss_drv_shards", sizeof(*d->sh) * d->nsh, 64);
	if (d->sh == NULL)
		return -1;
	for (m = 0; m < num_models; m++) {
		d->model_epoch[m] = kvss.epoch;
		d->l2_pending[m] = drv_l2_model(m);
		d->first_shard[m] = k;
		d->nshards[m] = cfg->driver.models[m].num_shards;
		for (i = 0; i < d->nshards[m]; i++, k++) {
			struct drv_shard *sh = &d->sh[k];

			sh->model = m;
			sh->idx = i;
			sh->k = k;
			sh->ref = &cfg->driver.models[m].shard[i];
			endpoint_addr(&sh->ctrl, &sh->ref->addr, cfg->udp.ctrl);
			endpoint_addr(&sh->evict, &sh->ref->addr, cfg->udp.evict);
			if (proto_stream_init(&sh->stream, PROTO_STREAM_WINDOW_MAX,
					      d->hz / 1000 * cfg->driver.retransmit_ms) != 0 ||
			    drv_link_add_port(&d->link, sh->ref->port) != 0)
				return -1;
		}
	}
	return 0;
}

/*
 * What the library's sink reaches: the shards, the wafer emulator, an
 * expectations file (--record-expect), the shared level. 0, -1, or -2
 * (said: the shared level's configuration refused).
 */
static int
sink_wire(struct drv *d, const struct kvss_config *cfg)
{
	char err[600];

	if (kvss.record_expect != NULL) {
		d->sink.expect = fopen(kvss.record_expect, "w");
		if (d->sink.expect == NULL) {
			fprintf(stderr, "kvss: --record-expect %s: %s\n", kvss.record_expect,
				strerror(errno));
			return -1;
		}
		fprintf(d->sink.expect, "kvss-expect 1 driver-epoch %u\n", kvss.epoch);
		printf("kvss: driver: recording open loop; expectations in %s\n", kvss.record_expect);
	}
	if (create_emulator(d, cfg) != 0)
		return -1;
	d->sink.nsh = d->nsh;
	memcpy(d->sink.first_shard, d->first_shard, sizeof(d->first_shard));
	memcpy(d->sink.nshards, d->nshards, sizeof(d->nshards));
	d->sink.sh = d->sh;
	d->sink.model_epoch = d->model_epoch;
	d->sink.payload_cap = kvss_payload_cap();
	d->sink.emu = d->emu;
	d->sink.st = &d->st;
	if (drv_sh_open(d, err, sizeof(err)) != 0) {
		fprintf(stderr, "kvss: %s: %s\n", cfg->path, err);
		return -2;
	}
	if (cfg->shared.conf[0] != '\0') {
		d->sink.sh_drv = d;
		d->sink.shl = &drv_sh_sink_ops;
	}
	return 0;
}

int
kvss_driver_init(struct drv *d)
{
	struct kvss_config *cfg = &kvss.cfg;
	struct prefixcache_params pp;
	uint16_t m;
	int rc;

	d->hz = rte_get_tsc_hz();
	d->link.st = &d->st;
	d->link.model_epoch = d->model_epoch;
	d->link.lose_data_every = cfg->wafer.lose_data_every;
	d->open_loop = d->link.open_loop = kvss.record_expect != NULL;
	if ((rc = library_make(d, cfg, &pp)) != 0 || (rc = shards_make(d, cfg, pp.num_models)) != 0)
		return rc;
	if (kvss.faults.on) {
		kvss_faults_init(&kvss.faults, kvss.pool);
		kvss_faults_describe(stdout);
	}
	if ((rc = sink_wire(d, cfg)) != 0)
		return rc;
	printf("kvss: driver: %zu requests from %s; %u model(s), %u shard(s), epoch 0x%08x\n", d->nreq,
	       d->source, pp.num_models, d->nsh, kvss.epoch);
	drv_say_ttft_setup(d, cfg);
	/* Say where the refill estimates come from, and what they start at. */
	for (m = 0; m < pp.num_models; m++)
		printf("kvss: driver: model %u refill estimates: %s %" PRIu64 " us + %.3g Gb/s%s\n", m,
		       cfg->driver.refill_model == KVSS_MODEL_LEARNED ? "learned, starting from"
								    : "configured,",
		       pp.model[m].refill_latency_ns / 1000, pp.model[m].refill_bytes_per_ns * 8,
		       cfg->driver.refill_model == KVSS_MODEL_LEARNED
			       ? " (refill_latency_us, refill_gbps), then the line fitted to its refills "
				 "from the 20th (refill_model = \"learned\", the default)"
			       : " (refill_latency_us, refill_gbps; refill_model = \"configured\")");
	fflush(stdout);
	return 0;
}

void
kvss_driver_free(struct drv *d)
{
	uint32_t i;

	if (d == NULL)
		return;
	kvss_faults_fini();
	drv_sh_close(d);
	emu_free(d->emu);
	d->emu = NULL;
	drv_sink_l2_clear(&d->sink, -1);
	if (d->sh != NULL)
		drv_l2_forget_tolerated(d, UINT16_MAX);
	for (i = 0; d->sh != NULL && i < d->nsh; i++) {
		free(d->sh[i].inv);
		free(d->sh[i].inv_gone);
		drv_ctlq_clear(&d->sh[i].q);
		proto_stream_fini(&d->sh[i].stream);
	}
	drv_link_free(&d->link);
	rte_free(d->sh);
	d->sh = NULL;
	drv_learn_free(&d->learn);
	prefixcache_free(d->pc);
	workload_free(&d->wl);
	free(d->arrival_ns);
	d->arrival_ns = NULL;
	free(d);
}

/* ---- The loop ----------------------------------------------------------------------- */

/* One wafer step, unless what waits to go out says the shards are behind. */
/* The wafer goes (again) at @p tsc: how long it was stopped, counted. */
static void
wafer_going(struct drv *d, uint64_t tsc)
{
	if (d->wafer_held_at != 0) {
		d->st.wafer_held_us += mono_ticks_to(tsc - d->wafer_held_at, d->hz, 1000000);
		emu_hold_ended(d->emu, drv_now_ns(d, d->wafer_held_at), drv_now_ns(d, tsc));
		d->wafer_held_at = 0;
	}
}

static int
wafer_step(struct drv *d, uint64_t tsc)
{
	uint32_t backlog = 0;
	bool backed;
	uint16_t i;

	/*
	 * A model with a shard not up runs as misses (the emulator asks); the
	 * rest go on. What waits for a shard that is away holds nothing back.
	 */
	if (d->fatal || (kvss.cfg.driver.away_ms == 0 && !all_up(d)))
		return 0; /* away_ms = 0: wait for every shard */
	for (i = 0; i < d->nsh; i++)
		if (d->sh[i].up && d->sh[i].q.backlog > backlog)
			backlog = d->sh[i].q.backlog;
	/*
	 * The EVICT path backed up: the whole wafer waits (counted), or, with
	 * wafer.backpressure "skip", it goes on and what would be sent is not.
	 */
	backed = backlog > BACKLOG_HIGH || emu_jobs_pending(d->emu, JOBS_HIGH + 1) > JOBS_HIGH;
	emu_backed_up(d->emu, backed);
	/* Skipping too, a control queue four times past its mark stops the wafer:
	 * new requests' REFILLs and DELETEs would only queue behind it. */
	if (backed && (kvss.cfg.wafer.backpressure == KVSS_BP_WAIT || backlog > 4 * BACKLOG_HIGH)) {
		if (d->wafer_held_at == 0) {
			d->wafer_held_at = tsc;
			d->st.wafer_held++;
		}
		return 0;
	}
	wafer_going(d, tsc);
	return emu_step(d->emu, drv_now_ns(d, tsc));
}

/*
 * Every request done and every message acknowledged; then every shard's
 * STATUS shows all its batches complete (so every DELETE can run), and one
 * more STATUS after that gives what it holds (the summary's check).
 */
/* How long the run's end waits for the shards' queues to run what they took. */
#define DRV_SETTLE_MAX_MS 10000u

static bool
quiet(struct drv *d, uint64_t tsc)
{
	uint16_t i;

	/* Any condition that breaks starts the settling over: what runs after
	 * it needs a STATUS from after it. */
	if (!emu_done(d->emu))
		goto not_yet;
	/* What waits only for a shard that is away waits for nobody. */
	if (emu_jobs_pending(d->emu, 1) > 0)
		goto not_yet;
	/* Columns on their way up: their slices' answers, their records. */
	if (drv_sh_busy(d, drv_now_ns(d, tsc)))
		goto not_yet;
	for (i = 0; i < d->nsh; i++)
		if (d->sh[i].up && (d->sh[i].q.backlog || d->sh[i].q.open_on ||
				     proto_stream_unacked(&d->sh[i].stream) ||
				     drv_link_queued(&d->link, d->sh[i].ref->port)))
			goto not_yet;
	if (d->open_loop)
		return true;
	/* Every batch complete, and every report the shard had sent by its
	 * STATUS taken (version 2: a report still on its way, say a TOKEN_LOST
	 * resent, would change the account after the check). */
	for (i = 0; i < d->nsh; i++)
		if (d->sh[i].up && (d->sh[i].batches_complete < d->sh[i].evict_sent ||
				     d->sh[i].report_next - 1 < d->sh[i].status_reports))
			goto not_yet;
	if (d->settle_at == 0) {
		d->settle_at = tsc;
		return false;
	}
	for (i = 0; i < d->nsh; i++)
		if (d->sh[i].up && d->sh[i].status_at <= d->settle_at)
			return false;
	/*
	 * A DELETE acknowledged is queued, not yet run: behind the second
	 * tier's work in its shard's queue (a thousand L2_DELETEs of columns let
	 * go at start, a disk thread slow on a busy machine) it runs later, and
	 * a STATUS sent meanwhile counts its tokens. The later STATUSes are
	 * waited for until what the shards hold agrees, in DRAM and in their
	 * second tiers (whose L2_DELETEs wait for the disk thread), for at
	 * most DRV_SETTLE_MAX_MS; past that the summary says what is off
	 * (DRAM's in a line, the tiers' in its JSON: l2_stored_by_status
	 * against l2_stored_tokens).
	 */
	if ((drv_account_off(d, false) != 0 || drv_l2_account_off(d) != 0) &&
	    tsc - d->settle_at < d->hz / 1000 * DRV_SETTLE_MAX_MS)
		return false;
	return true;
not_yet:
	d->settle_at = 0;
	return false;
}

/* Version 2: a REPORT_ACK to each shard whose reports came in this poll. */
static void
send_report_acks(struct drv *d)
{
	uint16_t i;

	for (i = 0; i < d->nsh; i++) {
		struct drv_shard *sh = &d->sh[i];
		struct proto_builder b;
		struct proto_hdr h;
		uint8_t buf[PROTO_HDR_LEN + PROTO_ACK_LEN];

		if (!sh->report_ack_due)
			continue;
		sh->report_ack_due = false;
		drv_hdr_for(&h, sh, d->model_epoch[sh->model], PROTO_T_REPORT_ACK);
		h.seq = 0;
		proto_build_begin(&b, buf, sizeof(buf), &h);
		proto_build_report_ack(&b, sh->report_next - 1);
		drv_link_send_ctl(&d->link, sh, buf, proto_build_end(&b));
		d->st.report_acks++;
	}
}

/* What a frame the fault injector held is received with. */
struct faulted {
	struct drv *d;
	uint64_t tsc;
};

/* A frame the fault injector held (delayed, reordered), due now. */
static void
faulted_in(void *arg, struct rte_mbuf *m, uint32_t tag)
{
	const struct faulted *f = arg;

	(void)tag;
	drv_receive(f->d, m, f->tsc);
	rte_pktmbuf_free(m);
}

/* Poll every RX queue of every port; returns the frames taken. */
static int
poll_ports(struct drv *d, uint64_t t0)
{
	struct rte_mbuf *pkts[BURST];
	uint16_t p, q, n, k;
	int work = 0;

	for (p = 0; p < d->link.nports; p++) {
		if (d->link.port_stopped[p])
			continue;
		for (q = 0; q < d->link.nrxq[p]; q++) {
			n = kvss_rx_burst(d->link.ports[p], q, pkts, BURST);
			for (k = 0; k < n; k++) {
				struct rte_mbuf *o[2] = {pkts[k], NULL};
				unsigned int i, m = 1;

				if (kvss_faults_on())
					m = kvss_faults_pass(KVSS_F_IN, pkts[k], 0, o);
				for (i = 0; i < m; i++) {
					drv_receive(d, o[i], t0);
					rte_pktmbuf_free(o[i]);
				}
			}
			work += n;
		}
	}
	if (kvss_faults_on()) {
		struct faulted f = {d, t0};

		work += (int)kvss_faults_due(KVSS_F_IN, faulted_in, &f);
	}
	send_report_acks(d);
	return work;
}

/* Before the replay: every shard up, or the start timeout. false: give up. */
static bool
wait_for_shards(struct drv *d, uint64_t t0, uint64_t start_deadline)
{
	uint16_t i;

	uint16_t m;
	bool ready = all_up(d);

	for (m = 0; m < kvss.cfg.driver.pc.num_models; m++)
		ready = ready && drv_l2_ready(d, m);
	if (ready) {
		d->started = true;
		drv_clock_start(d, t0);
		d->cpu_wait_start = drv_cpu_wait_ns();
		d->cpu_wait_tsc[0] = t0;
		printf("kvss: driver: every shard is up; replaying\n");
		fflush(stdout);
		drv_l2_adopt_ready(d, t0); /* what the second tiers kept, before the first request */
	} else if (t0 > start_deadline) {
		for (i = 0; i < d->nsh; i++)
			if (d->sh[i].up && !d->sh[i].inv_done && drv_l2_model(d->sh[i].model))
				fprintf(stderr, "kvss: driver: shard %u of model %u did not list its second "
						"tier (L2_INVENTORY) in %u ms\n", d->sh[i].ref->id,
					d->sh[i].model, kvss.cfg.driver.start_timeout_ms);
			else if (!d->sh[i].up)
				fprintf(stderr, "kvss: driver: shard %u of model %u (port %u, %s) "
						"did not answer HELLO in %u ms\n",
					d->sh[i].ref->id, d->sh[i].model, d->sh[i].ref->port,
					kvss.cfg.path, kvss.cfg.driver.start_timeout_ms);
		d->fatal = 3;
		return false;
	}
	return true;
}

/* The open loop's record ends: each stream's length and epoch. */
static void
record_end(struct drv *d)
{
	FILE *f = d->sink.expect;
	uint16_t i;

	if (f == NULL)
		return;
	for (i = 0; i < d->nsh; i++)
		fprintf(f, "control model %u shard %u messages %" PRIu64 " epoch %u\n", d->sh[i].model,
			d->sh[i].ref->id, d->sh[i].stream.next_seq - 1, d->model_epoch[d->sh[i].model]);
	fprintf(f, "end %s\n", d->finished ? "finished" : "stopped");
	fclose(f);
	d->sink.expect = NULL;
}

/* When the driver loop's periodic work is next due (TSC). */
struct drv_due {
	uint64_t progress, expire, snap, link;
};

/* The driver loop's periodic work, each when due: expiry, the telemetry snapshot, the links, progress. */
static void
periodic(struct drv *d, struct drv_due *due, uint64_t t0)
{
	if (d->started && t0 >= due->expire) {
		d->st.expiries += prefixcache_expire(d->pc, drv_now_ns(d, t0), 1024);
		due->expire = t0 + d->hz / 100;
	}
	if (t0 >= due->snap) {
		clk_pair(d);
		drv_report_snapshot(d);
		due->snap = t0 + d->hz / 10;
	}
	if (t0 >= due->link && !d->open_loop) {
		drv_link_watch(&d->link, d->sh, d->nsh, t0, link_went_down, link_came_up, d);
		if (d->started)
			watch_silence(d, t0);
		due->link = t0 + d->hz / 2;
	}
	if (d->started && t0 >= due->progress) {
		drv_report_progress(d, t0);
		due->progress = t0 + 2 * d->hz;
	}
}

/*
 * --linger: the run is done and its figures final; telemetry keeps
 * answering (the shards' too in role all) while the links are kept.
 */
static void
linger(struct drv *d)
{
	uint64_t until = rte_get_tsc_cycles() + d->hz / 1000 * kvss.linger_ms, t;

	printf("kvss: driver: done; telemetry answers for %u ms more (--linger), or until "
	       "SIGINT/SIGTERM; then the summary\n", kvss.linger_ms);
	fflush(stdout);
	while (!kvss_quitting() && (t = rte_get_tsc_cycles()) < until) {
		poll_ports(d, t);
		drv_link_pump_streams(&d->link, d->sh, d->nsh, t);
		drv_link_flush(&d->link);
		rte_delay_us_sleep(1000);
	}
}

/* Every shard greeted (and its ports watched, poll_mode "interrupt"): the loop's start. */
static void
start_links(struct drv *d, uint64_t tsc0)
{
	uint16_t i;

	for (i = 0; i < d->link.nports; i++) { /* poll_mode "interrupt": what wakes this lcore */
		uint16_t q;

		for (q = 0; q < d->link.nrxq[i]; q++)
			kvss_intr_watch(d->link.ports[i], q);
	}
	for (i = 0; i < d->nsh; i++) {
		drv_link_hello(&d->link, &d->sh[i], d->model_epoch[d->sh[i].model], tsc0);
		if (d->open_loop)
			d->sh[i].up = true;
	}
}

int
kvss_driver_main(void *arg)
{
	struct kvss_lcore_stats *st = lst();
	uint64_t tsc0 = rte_get_tsc_cycles(), start_deadline, prev, absent;
	struct drv *d = arg;
	struct drv_due due = {.progress = tsc0 + 2 * d->hz, .expire = tsc0, .snap = tsc0,
			      .link = tsc0 + d->hz};
	unsigned int empty = 0;
	uint16_t i;

	if (d->pc == NULL || d->shl == NULL)
		return -1; /* never set up (kvss_driver_init did not run or failed): nothing to run */
	d->t_start = tsc0;
	start_deadline = tsc0 + d->hz / 1000 * kvss.cfg.driver.start_timeout_ms;
	start_links(d, tsc0);
	prev = tsc0;
	clk_pair(d);
	absent = d->hz / 1000 * DRV_ABSENT_MS;
	while (!kvss_quitting() && !d->fatal) {
		uint64_t t0 = rte_get_tsc_cycles();
		int work;

		/* Before the ports are read: what waited there came while it did not run. */
		if (t0 > prev && t0 - prev >= absent)
			drv_gap(d, prev, t0, &start_deadline);
		prev = t0;
		work = poll_ports(d, t0);

		for (i = 0; i < d->nsh; i++)
			if (!d->sh[i].up &&
			    t0 - d->sh[i].hello_at > d->hz / 1000 * kvss.cfg.driver.hello_ms)
				drv_link_hello(&d->link, &d->sh[i], d->model_epoch[d->sh[i].model], t0);
		if (!d->started) {
			if (!wait_for_shards(d, t0, start_deadline))
				break;
		} else {
			drv_sh_poll(d, drv_now_ns(d, t0));
			work += wafer_step(d, t0);
			/* Held, the wafer's refills wait on the driver's own queue. */
			if (d->wafer_held_at == 0)
				emu_check_timeouts(d->emu, drv_now_ns(d, t0));
		}
		drv_link_pump_streams(&d->link, d->sh, d->nsh, t0);
		work += drv_link_pump_data(&d->link, d->emu, d->sh, d->nsh);
		drv_link_flush(&d->link);
		if (d->sink.failed || d->link.failed || emu_failed(d->emu))
			d->fatal = 1; /* out of memory */
		periodic(d, &due, t0);
		if (d->started && quiet(d, t0)) {
			d->finished = true;
			break;
		}
		if (work)
			kvss_poll_busy(st, t0, &empty);
		else
			kvss_poll_idle(st, t0, &empty);
	}
	d->t_end = rte_get_tsc_cycles();
	d->cpu_wait_end = drv_cpu_wait_ns();
	d->cpu_wait_tsc[1] = d->t_end;
	wafer_going(d, d->t_end); /* a stop still open at the end counts too */
	/* The run's time ends when the shards had it all, not after the check's wait. */
	if (d->finished && d->settle_at != 0)
		d->t_end = d->settle_at;
	drv_link_flush(&d->link);
	record_end(d);
	drv_report_snapshot(d);
	if (d->started)
		drv_report_progress(d, d->t_end);
	if (d->finished && kvss.linger_ms)
		linger(d);
	/* 2, not a signal's 1: main() then takes the exit status from the run. */
	__atomic_store_n(&kvss.quit, 2, __ATOMIC_RELAXED);
	return 0;
}
