/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The driver's parts that need no EAL, run together without kvss: the wafer
 * emulator (sequences, data jobs, refill checks), the sink that turns
 * library calls into control messages (sink.c, ctlq.c) and the
 * refill-time learning (learn.c). A real lib/kvstore plays the shard:
 * every queued message is parsed back from its bytes and run on it, every
 * EVICT_DATA payload the emulator makes is stored, and every refill is read
 * from it into REFILL_DATA streams that the emulator checks byte by byte.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "driver/driver_priv.h"
#include "emulator/emulator.h"
#include "emulator/emulator_priv.h"
#include "kvstore.h"
#include "wafermodel.h"

#define B 64	  /* bytes per token */
#define NBUF 2	  /* buffers */
#define NSH 2	  /* shards of the model */
#define MS 1000000ull

struct pending {
	struct proto_refill_req rq;
	struct proto_refill_chunk ch[64];
};

/* One emulated driver and its two shards. */
static struct rig {
	struct prefixcache_params pp;
	struct prefixcache *pc;
	struct workload wl;
	struct kvss_shard_ref ref[NSH];
	struct drv_shard sh[NSH];
	struct drv_sink sink;
	struct drv_learn learn;
	struct emu *emu;
	struct kvss_drv_stats st;
	uint32_t epoch[PREFIXCACHE_MAX_MODELS];
	struct kvstore *kv[NSH];
	void *kvmem[NSH];
	struct pending pend[NSH][256];
	unsigned int npend[NSH];
	uint64_t flip_from; /* flip a byte of each EVICT_DATA payload from this one on (0: none) */
	uint64_t payloads, data_bytes;
	unsigned int up_mask; /* shards up */
	/* Speculative decoding for the next rig_up (0: off). */
	uint32_t spec_tokens, spec_reject_pct;
	/* A broken shard: it keeps the first bytes of every token, ignoring
	 * overwrites (EVICT entries at a (prompt, token) it took before). */
	bool ignore_overwrites;
	uint64_t *seen; /* open addressing: prompt_id ^ token * odd, 0 empty */
	uint64_t ignored;
} R;

#define SEEN_SLOTS (1u << 21)

/* Whether (@p pid, @p tok) was evicted before; it is from now on. */
static bool
seen_before(uint64_t pid, uint32_t tok)
{
	uint64_t key = (pid ^ ((uint64_t)tok * 0x9E3779B97F4A7C15ull)) | 1;
	uint32_t i = (uint32_t)(key >> 40) & (SEEN_SLOTS - 1);

	if (R.seen == NULL)
		R.seen = calloc(SEEN_SLOTS, sizeof(uint64_t));
	cr_assert_not_null(R.seen);
	for (; R.seen[i] != 0; i = (i + 1) & (SEEN_SLOTS - 1))
		if (R.seen[i] == key)
			return true;
	R.seen[i] = key;
	return false;
}

static bool
h_model_up(void *arg, uint16_t m)
{
	(void)arg;
	(void)m;
	return R.up_mask == (1u << NSH) - 1;
}

static bool
h_shard_up(void *arg, uint16_t k)
{
	(void)arg;
	return R.up_mask & (1u << k);
}

static void
h_model_refilled(void *arg, uint16_t m, uint64_t ns, uint64_t bytes, uint64_t l2_bytes,
		 uint64_t shared_bytes)
{
	(void)arg;
	drv_learn_model(&R.learn, m, ns, bytes, l2_bytes, shared_bytes);
}

static void
h_seq_refilled(void *arg, uint64_t ns, uint64_t est, uint64_t est_bytes)
{
	(void)arg;
	drv_learn_seq(&R.learn, ns, est, est_bytes);
}

static const struct emu_hooks hooks = {h_model_up, h_shard_up, h_model_refilled, h_seq_refilled, NULL};

/*
 * For the next rig_up (the time-to-first-token tests; zero: as before):
 * emu_params' arrivals, slots, prefill costs and compute_only, and a
 * workload of its own: request i a prompt of len[i] tokens base[i] + j
 * (equal bases, equal prompts), one organization, two tokens of answer.
 */
static struct rig_opt {
	const uint64_t *arrival_ns;
	uint32_t max_inflight;
	uint32_t recompute_tokens_per_s;
	uint64_t prefill_overhead_ns;
	bool compute_only;
	bool give_up, skip;
	const uint32_t *len, *base;
} O;

/* R.wl as O says: @p n requests. */
static void
rig_workload(uint32_t n)
{
	uint32_t i, j;

	R.wl.r = calloc(n, sizeof(*R.wl.r));
	cr_assert_not_null(R.wl.r);
	R.wl.n = R.wl.cap = n;
	for (i = 0; i < n; i++) {
		struct wl_req *q = &R.wl.r[i];

		q->n = q->allowed = O.len[i];
		q->tokens = malloc(sizeof(uint32_t) * q->n);
		cr_assert_not_null(q->tokens);
		for (j = 0; j < q->n; j++)
			q->tokens[j] = O.base[i] + j;
		q->out = 2;
		q->iso = 0x77;
		q->first_mm = UINT32_MAX;
		q->ts_ms = i;
		R.wl.tokens += q->n;
	}
}

static void
rig_up(uint32_t requests, uint64_t capacity, bool learned)
{
	struct prefixcache_sink sink;
	struct emu_shard es[NSH];
	struct emu_params ep;
	uint16_t k;

	uint32_t spk = R.spec_tokens, spr = R.spec_reject_pct;
	bool ign = R.ignore_overwrites;

	memset(&R, 0, sizeof(R));
	R.spec_tokens = spk;
	R.spec_reject_pct = spr;
	R.ignore_overwrites = ign;
	R.up_mask = (1u << NSH) - 1;
	R.pp.num_models = 1;
	R.pp.column = 16;
	R.pp.model[0].num_caches = 1;
	R.pp.model[0].cache[0] = (struct prefixcache_cache){0, PREFIXCACHE_FULL, 0, 0, capacity};
	R.pp.model[0].max_batch_tokens = 32;
	/* kvss's defaults: 20 us + 10 Gb/s. */
	R.pp.model[0].refill_latency_ns = 20000;
	R.pp.model[0].refill_bytes_per_ns = 1.25;
	R.pp.model[0].refill_bytes_per_token = B; /* a shard's bytes: they refill in parallel */
	drv_sink_ops(&R.sink, &sink);
	R.pc = prefixcache_create(&R.pp, &sink);
	cr_assert_not_null(R.pc);
	drv_learn_init(&R.learn, R.pc, &R.st, learned, 0);
	if (O.len != NULL)
		rig_workload(requests);
	else
		cr_assert_eq(workload_generate(requests, &R.wl), 0);
	for (k = 0; k < NSH; k++) {
		struct kvstore_params kp = {.num_caches = 1, .max_batch_entries = 32, .max_open_batches = 1024,
					    .max_refill_chunks = 64};
		size_t sz;

		R.ref[k] = (struct kvss_shard_ref){.id = k, .bytes_per_token = {B}, .buffers = {NBUF}};
		R.sh[k] = (struct drv_shard){.model = 0, .idx = k, .k = k, .ref = &R.ref[k], .up = true};
		es[k] = (struct emu_shard){0, k, {B}};
		kp.cache[0] = (struct kvstore_cache_params){B, NBUF, capacity};
		sz = kvstore_memsize(&kp);
		cr_assert_eq(posix_memalign(&R.kvmem[k], 64, sz), 0);
		R.kv[k] = kvstore_init(R.kvmem[k], sz, &kp);
		cr_assert_not_null(R.kv[k]);
	}
	R.epoch[0] = 0x1234;
	ep = (struct emu_params){.pc = R.pc, .pcp = &R.pp, .wl = &R.wl, .nreq = requests,
				 .num_models = 1, .max_inflight = O.max_inflight ? O.max_inflight : 8,
				 .step_tokens = 64,
				 .spec_tokens = spk, .spec_reject = spr / 100.0, .spec_seed = 1,
				 .refill_timeout_ns = 1000 * MS, .resume_estimate = false,
				 .recompute_tokens_per_s = O.recompute_tokens_per_s,
				 .prefill_overhead_ns = O.prefill_overhead_ns, .arrival_ns = O.arrival_ns,
				 .compute_only = O.compute_only, .give_up = O.give_up,
				 .skip_backed_up = O.skip,
				 .nshards = NSH, .shard = es, .hooks = &hooks};
	R.emu = emu_create(&ep);
	cr_assert_not_null(R.emu);
	for (k = 0; k < NSH; k++)
		emu_shard_buffers(R.emu, k, 0, NBUF);
	R.sink = (struct drv_sink){.nsh = NSH, .nshards = {NSH}, .sh = R.sh, .model_epoch = R.epoch,
				   .payload_cap = 1472, .emu = R.emu, .st = &R.st};
}

static void
rig_down(void)
{
	uint16_t k;

	emu_free(R.emu);
	prefixcache_free(R.pc);
	drv_learn_free(&R.learn);
	workload_free(&R.wl);
	for (k = 0; k < NSH; k++) {
		drv_ctlq_clear(&R.sh[k].q);
		free(R.kvmem[k]);
	}
	free(R.seen);
	R.seen = NULL;
	R.spec_tokens = R.spec_reject_pct = 0;
	R.ignore_overwrites = false;
	memset(&O, 0, sizeof(O));
}

/* Shard @p k runs one queued control message, parsed back from its bytes. */
static void
shard_run(uint16_t k, const uint8_t *p, uint32_t len)
{
	static struct proto_msg m;
	static struct proto_evict_entry e[64];
	uint32_t i, off = 0;

	cr_assert_eq(proto_parse_payload(p, len, PROTO_PORT_CTRL_DEFAULT, &proto_ports_default, &m),
		     PROTO_OK, "the sink's message parses");
	cr_assert_eq(m.hdr.shard_id, k, "addressed to its shard");
	cr_assert_eq(m.hdr.epoch, R.epoch[0], "in the model's epoch");
	switch (m.hdr.type) {
	case PROTO_T_RESERVE:
		break;
	case PROTO_T_EVICT:
		cr_assert_leq(m.hdr.count, 64);
		for (i = 0; i < m.hdr.count; i++) {
			proto_get_evict_entry(&m, i, &e[i]);
			/* Each shard keeps its own account. */
			if (R.ignore_overwrites && e[i].prompt_id != 0 &&
			    seen_before(e[i].prompt_id ^ ((uint64_t)k << 48), e[i].token_idx)) {
				e[i].prompt_id = 0; /* discarded: the old bytes stay */
				R.ignored++;
			}
		}
		cr_assert_eq(kvstore_evict(R.kv[k], m.u.evict.batch_no, m.u.evict.num_caches,
					   m.u.evict.g, e, NULL, 0),
			     0, "the shard takes every EVICT (within capacity)");
		break;
	case PROTO_T_DELETE:
		for (i = 0; i < m.hdr.count; i++) {
			struct proto_delete d;

			proto_get_delete(&m, i, &d);
			cr_assert_eq(kvstore_delete(R.kv[k], &d), 0, "every DELETE is legal");
		}
		break;
	case PROTO_T_REFILL: {
		struct proto_refill_req rq;
		const uint8_t *ch;

		while (proto_next_refill(&m, &off, &rq, &ch)) {
			struct pending *pd = &R.pend[k][R.npend[k]++];

			cr_assert_leq(rq.num_chunks, 64);
			pd->rq = rq;
			for (i = 0; i < rq.num_chunks; i++)
				proto_get_refill_chunk(ch, i, &pd->ch[i]);
		}
		break;
	}
	default:
		cr_assert_fail("type %u is not the driver's", m.hdr.type);
	}
}

/* Shard @p k sends refill @p pd from its store, a REFILL_DATA stream per buffer. */
static void
shard_refill(uint16_t k, const struct pending *pd, uint64_t now)
{
	struct kvstore_refill *rf;
	uint16_t code = 0, b;

	rf = kvstore_refill_begin(R.kv[k], pd->rq.cache_id, pd->ch, pd->rq.num_chunks, &code);
	cr_assert_not_null(rf, "refill %lu: the shard holds what the driver refills (code %u)",
			   (unsigned long)pd->rq.refill_id, code);
	for (b = 0; b < NBUF; b++) {
		struct kvstore_refill_pos pos = {0};
		struct kvstore_seg seg[8];
		struct proto_refill_data_hdr h = {pd->rq.refill_id, pd->rq.sequence_id, 0,
						  pd->rq.cache_id, b, 0,
						  (uint32_t)kvstore_refill_buffer_len(rf)};
		unsigned int n, i;

		/* Each segment as a frame of its own, at its place in the stream. */
		while ((n = kvstore_refill_next(rf, b, &pos, 1000, seg, 8)) > 0)
			for (i = 0; i < n; i++) {
				emu_refill_data(R.emu, k, &h, seg[i].addr, seg[i].len, now);
				h.stream_offset += seg[i].len;
			}
	}
	kvstore_refill_end(rf);
	cr_assert(emu_refill_done(R.emu, k, pd->rq.refill_id, 0, now));
}

/* The shards: control queues drained, data stored, refills whose batches are in sent. */
static void
shards_turn(uint64_t now)
{
	static uint8_t buf[PROTO_PAYLOAD_MAX];
	static struct proto_msg m;
	uint16_t k;
	uint32_t len, i;

	for (k = 0; k < NSH; k++) {
		struct drv_ctl_msg *x;

		if (!(R.up_mask & (1u << k)))
			continue;
		/* Refills queued in an earlier turn: a refill takes a turn (1 ms) at least. */
		for (i = 0; i < R.npend[k];) {
			if (R.pend[k][i].rq.evict_count > kvstore_batches_complete(R.kv[k])) {
				i++;
				continue;
			}
			shard_refill(k, &R.pend[k][i], now);
			memmove(&R.pend[k][i], &R.pend[k][i + 1], sizeof(R.pend[k][0]) * (R.npend[k] - i - 1));
			R.npend[k]--;
		}
		cr_assert_eq(drv_ctlq_close(&R.sh[k].q), 0);
		while ((x = drv_ctlq_pop(&R.sh[k].q)) != NULL) {
			shard_run(k, x->p, x->len);
			free(x);
		}
		while ((len = emu_data_next(R.emu, k, UINT64_MAX, 7, 0, buf, 1400)) != 0) {
			cr_assert_eq(proto_parse_payload(buf, len, PROTO_PORT_EVICT_DEFAULT,
							 &proto_ports_default, &m),
				     PROTO_OK);
			if (R.flip_from != 0 && ++R.payloads >= R.flip_from)
				buf[m.data_off + m.data_len / 2] ^= 0x10;
			R.data_bytes += m.data_len;
			cr_assert_eq(kvstore_data(R.kv[k], m.u.data.batch_no, m.u.data.cache_id,
						  m.u.data.stream_offset, m.u.data.stream_len,
						  buf + m.data_off, m.data_len),
				     0);
		}
	}
	emu_data_gc(R.emu);
}

static void
run(uint64_t *now)
{
	unsigned int steps = 0;

	while (!emu_done(R.emu) || emu_jobs_pending(R.emu, 1) > 0 || R.npend[0] || R.npend[1]) {
		emu_step(R.emu, *now);
		shards_turn(*now);
		*now += MS;
		cr_assert_lt(++steps, 100000, "the run ends");
	}
	cr_assert(!emu_failed(R.emu));
	cr_assert(!R.sink.failed);
}

static int
cmp_u64_test(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

TestSuite(emulator, .fini = rig_down);

Test(emulator, every_request_runs_and_every_refilled_byte_checks_out)
{
	uint64_t now = MS;

	rig_up(60, 1u << 20, false);
	run(&now);
	cr_assert_eq(emu_stats(R.emu)->requests, 60);
	cr_assert_eq(emu_stats(R.emu)->completed, 60);
	cr_assert_gt(emu_stats(R.emu)->hit_tokens, 0, "the built-in workload shares prefixes");
	cr_assert_gt(emu_stats(R.emu)->refills, 0);
	cr_assert_eq(emu_stats(R.emu)->verify_failures, 0, "%lu bad bytes, %lu bad frames",
		     (unsigned long)emu_stats(R.emu)->verify_bad_bytes, (unsigned long)emu_stats(R.emu)->verify_bad_frames);
	/* Both shards sent every refilled token's bytes: tokens x B, all shards. */
	cr_assert_eq(emu_stats(R.emu)->refill_bytes, emu_stats(R.emu)->refilled_tokens * B * NSH);
	/* Every evicted token's bytes went to both shards (entries of prompt 0 too). */
	cr_assert_geq(R.data_bytes, emu_stats(R.emu)->evicted_tokens * B * NSH);
	cr_assert_eq(R.learn.fit.n, emu_stats(R.emu)->refills, "each refilled sequence was timed");
}

Test(emulator, a_byte_flipped_in_the_store_fails_the_check)
{
	uint64_t now = MS;

	rig_up(60, 1u << 20, false);
	R.flip_from = 1;
	run(&now);
	cr_assert_gt(emu_stats(R.emu)->refills, 0);
	cr_assert_eq(emu_stats(R.emu)->verify_failures, emu_stats(R.emu)->refills, "every refill brings a flipped byte");
	cr_assert_geq(emu_stats(R.emu)->verify_bad_bytes, emu_stats(R.emu)->refills);
}

Test(emulator, deletes_keep_the_shards_within_capacity)
{
	uint64_t now = MS;
	struct kvstore_cache_stats cs;

	rig_up(60, 4096, false);
	run(&now);
	cr_assert_gt(R.st.deletes, 0, "a small cache deletes");
	cr_assert_eq(emu_stats(R.emu)->verify_failures, 0);
	kvstore_cache_stats(R.kv[0], 0, &cs);
	cr_assert_leq(cs.stored_tokens, 4096);
	cr_assert_eq(cs.stored_tokens, prefixcache_stored(R.pc, 0, 0),
		     "the shard holds what the driver accounts for");
}

Test(emulator, a_restart_fails_the_models_refills_and_drops_its_data)
{
	uint64_t now = MS;
	unsigned int i;

	rig_up(60, 1u << 20, false);
	/* Run until a refill is open, then the model's shards lose everything. */
	for (i = 0; i < 100000 && emu_stats(R.emu)->refills == 0; i++) {
		emu_step(R.emu, now);
		now += MS;
	}
	cr_assert_gt(emu_stats(R.emu)->refills, 0);
	prefixcache_shard_restart(R.pc, 0);
	emu_model_restart(R.emu, 0, now);
	cr_assert_gt(emu_stats(R.emu)->refill_failures, 0, "the open refills failed");
	cr_assert_eq(emu_jobs_pending(R.emu, 1), 0, "no data of the old stream waits");
	cr_assert_eq(emu_data_next(R.emu, 0, UINT64_MAX, 7, 0, (uint8_t[PROTO_PAYLOAD_MAX]){0}, 1400), 0);
}

Test(emulator, a_model_that_is_not_up_runs_as_misses)
{
	uint64_t now = MS;

	rig_up(10, 1u << 20, false);
	R.up_mask = 1; /* shard 1 is away */
	while (!emu_done(R.emu))
		emu_step(R.emu, now += MS);
	cr_assert_eq(emu_stats(R.emu)->completed, 10);
	cr_assert_eq(emu_stats(R.emu)->away_requests, 10);
	cr_assert_eq(emu_stats(R.emu)->hit_tokens, 0);
	cr_assert_eq(emu_stats(R.emu)->evicted_tokens, 0, "nothing is stored while a shard is away");
}

Test(emulator, learned_estimates_follow_the_refills)
{
	uint64_t now = MS, lat0, lat1;
	double bw;

	rig_up(200, 1u << 20, true);
	cr_assert_eq(prefixcache_refill_model(R.pc, 0, &lat0, &bw), 0);
	run(&now);
	cr_assert_geq(R.learn.ml[0].fit.n, 20, "%lu refills", (unsigned long)R.learn.ml[0].fit.n);
	cr_assert_gt(R.st.model_updates, 0, "the estimates took the fitted line");
	cr_assert_eq(prefixcache_refill_model(R.pc, 0, &lat1, &bw), 0);
	/* Each step is 1 ms here: a refill takes whole milliseconds, far above the default. */
	cr_assert_gt(lat1, lat0, "learned latency %lu ns, configured %lu", (unsigned long)lat1,
		     (unsigned long)lat0);
}

/*
 * A pause at the start (the first 20 refills 3 s each, as when a disk
 * answered nothing for seconds on a busy machine), then refills of 5 ms +
 * 2 GB/s: the estimates take the last refills' line, not the whole run's
 * (which still says 3e9 / 84 ns more for each), so sequences are not held
 * for the pause that ended. The summary's fit keeps every refill.
 */
Test(emulator, learned_estimates_forget_a_pause_that_ended)
{
	uint64_t lat, i;
	double bpn, fit_us, fit_gbps;

	rig_up(1, 1u << 20, true);
	for (i = 0; i < 20 + LINWIN; i++) {
		uint64_t bytes = 100000 + (i * 7919) % 100 * 100000;

		drv_learn_model(&R.learn, 0, 5000000 + bytes / 2 + (i < 20 ? 3000000000ull : 0), bytes, 0, 0);
	}
	cr_assert_gt(R.st.model_updates, 0);
	cr_assert_eq(prefixcache_refill_model(R.pc, 0, &lat, &bpn), 0);
	cr_assert(lat > 4000000 && lat < 6000000, "latency %lu ns, want 5 ms", (unsigned long)lat);
	cr_assert(bpn > 1.8 && bpn < 2.2, "%.3f bytes/ns, want 2", bpn);
	cr_assert_eq(drv_learn_fit(&R.learn.ml[0].fit, &fit_us, &fit_gbps), 0);
	cr_assert_gt(fit_us, 50000, "the whole run's line keeps the pause: %.0f us", fit_us);
}

/*
 * A refill from the disks (or the shared level) that comes back in under
 * half what its level's line gave it tells the library that level's line
 * is behind: the hits it refuses are probed every 2nd, until one comes back
 * that is not (every 32nd again); each level's count its own. Only with
 * learned lines: configured ones never move (no faster probing).
 */
Test(emulator, a_refill_from_below_dram_well_under_its_line_makes_the_library_probe_faster)
{
	uint64_t lat, i;
	double bpn;
	const uint64_t mb = 1000000;

	for (i = 0; i < 2; i++) {
		bool learned = i == 0;

		rig_up(1, 1u << 20, learned);
		/* The disks' line: 10 ms + 1 byte/ns; the shared level's: 20 ms. */
		cr_assert_eq(
		    prefixcache_set_level_model(R.pc, 0, PREFIXCACHE_LEVEL_L2, 10000000, 1), 0);
		cr_assert_eq(
		    prefixcache_set_level_model(R.pc, 0, PREFIXCACHE_LEVEL_SHARED, 20000000, 0), 0);
		cr_assert_eq(prefixcache_level_model(R.pc, 0, PREFIXCACHE_LEVEL_L2, &lat, &bpn), 0);
		cr_assert_eq(prefixcache_refill_model(R.pc, 0, &lat, &bpn), 0);
		cr_assert_eq(prefixcache_l2_probe_every(R.pc, 0, PREFIXCACHE_LEVEL_L2),
			     PREFIXCACHE_PROBE_EVERY);
		/* 1 MB from the disks: the line says 11 ms; 3 ms past DRAM's line. */
		drv_learn_model(&R.learn, 0, lat + (uint64_t)(mb / bpn) + 3000000, mb, mb, 0);
		cr_assert_eq(prefixcache_l2_probe_every(R.pc, 0, PREFIXCACHE_LEVEL_L2),
			     learned ? PREFIXCACHE_PROBE_FAST : PREFIXCACHE_PROBE_EVERY,
			     "learned %d", learned);
		cr_assert_eq(prefixcache_l2_probe_every(R.pc, 0, PREFIXCACHE_LEVEL_SHARED),
			     PREFIXCACHE_PROBE_EVERY, "the shared level's count is its own");
		/* 6 ms: over half of 11 ms. */
		drv_learn_model(&R.learn, 0, lat + (uint64_t)(mb / bpn) + 6000000, mb, mb, 0);
		cr_assert_eq(prefixcache_l2_probe_every(R.pc, 0, PREFIXCACHE_LEVEL_L2),
			     PREFIXCACHE_PROBE_EVERY);
		/* The shared level's (20 ms): 9 ms is under half. */
		drv_learn_model(&R.learn, 0, lat + (uint64_t)(mb / bpn) + 9000000, mb, mb, mb);
		cr_assert_eq(prefixcache_l2_probe_every(R.pc, 0, PREFIXCACHE_LEVEL_SHARED),
			     learned ? PREFIXCACHE_PROBE_FAST : PREFIXCACHE_PROBE_EVERY);
		cr_assert_eq(prefixcache_l2_probe_every(R.pc, 0, PREFIXCACHE_LEVEL_L2),
			     PREFIXCACHE_PROBE_EVERY);
		if (i == 0)
			rig_down(); /* the last: the suite's fini */
	}
}

/* /swdriver/refill_latency's buckets: a time on a bound counts in it (Prometheus' le). */
Test(emulator, the_refill_histogram_counts_each_sequence_in_its_bucket)
{
	static const uint64_t ns[] = {0, 10000, 10001, 20000, 999999999, 1000000000, 1000000001, 5000000000};
	static const unsigned int bucket[] = {0, 0, 1, 1, 15, 15, 16, 16};
	uint64_t want[DRV_REFILL_BUCKETS + 1] = {0}, sum = 0, total = 0, now = MS;
	struct kvss_drv_stats st = {0};
	struct drv_learn l;
	unsigned int i;

	cr_assert_eq(drv_refill_le_us[0], 10);
	cr_assert_eq(drv_refill_le_us[DRV_REFILL_BUCKETS - 1], 1000000);
	drv_learn_init(&l, NULL, &st, false, 0);
	for (i = 0; i < sizeof(ns) / sizeof(ns[0]); i++) {
		drv_learn_seq(&l, ns[i], 0, 0);
		want[bucket[i]]++;
		sum += ns[i];
	}
	for (i = 0; i <= DRV_REFILL_BUCKETS; i++)
		cr_assert_eq(l.hist[i], want[i], "bucket %u: %lu, want %lu", i, (unsigned long)l.hist[i],
			     (unsigned long)want[i]);
	cr_assert_eq(l.hist_sum_ns, sum);
	drv_learn_free(&l);
	/* A run: every timed sequence is in one bucket. */
	rig_up(200, 1u << 20, true);
	run(&now);
	for (i = 0; i <= DRV_REFILL_BUCKETS; i++)
		total += R.learn.hist[i];
	cr_assert_gt(R.learn.fit.n, 0);
	cr_assert_eq(total, R.learn.fit.n, "%lu in the buckets, %lu timed", (unsigned long)total,
		     (unsigned long)R.learn.fit.n);
	cr_assert_eq(total, R.learn.nlat);
}

/* The sink alone: records by type into one message per shard, DELETEs where the library says. */
Test(emulator, the_sink_packs_records_per_shard_and_sends_a_delete_only_where_told)
{
	struct prefixcache_sink ops;
	struct proto_reserve rv = {.prompt_id = 5, .start_token_idx = 0, .num_tokens = 64};
	struct proto_delete d = {.prompt_id = 5, .evict_count = 0, .start_token_idx = 16,
				 .end_token_idx = 31};
	struct proto_evict_entry e[2] = {{5, 0, 0}, {5, 1, 0}};
	static struct proto_msg m;
	struct drv_ctl_msg *x;
	uint16_t k;

	rig_up(1, 1u << 20, false);
	drv_sink_ops(&R.sink, &ops);
	ops.reserve(ops.arg, 0, &rv);
	ops.reserve(ops.arg, 0, &rv);
	ops.del(ops.arg, 0, (struct prefixcache_shards){.only = 1, .except = -1}, &d);
	ops.evict(ops.arg, 0, 1, 1, 2, e);
	for (k = 0; k < NSH; k++) {
		x = drv_ctlq_pop(&R.sh[k].q);
		cr_assert_not_null(x);
		cr_assert_eq(proto_parse_payload(x->p, x->len, PROTO_PORT_CTRL_DEFAULT,
						 &proto_ports_default, &m),
			     PROTO_OK);
		cr_assert_eq(m.hdr.type, PROTO_T_RESERVE);
		cr_assert_eq(m.hdr.count, 2, "both RESERVEs in one message");
		cr_assert_eq(m.hdr.shard_id, k);
		free(x);
		if (k == 1) {
			x = drv_ctlq_pop(&R.sh[k].q);
			cr_assert_not_null(x, "shard 1 gets the DELETE");
			cr_assert_eq(proto_parse_payload(x->p, x->len, PROTO_PORT_CTRL_DEFAULT,
							 &proto_ports_default, &m),
				     PROTO_OK);
			cr_assert_eq(m.hdr.type, PROTO_T_DELETE);
			free(x);
		}
		x = drv_ctlq_pop(&R.sh[k].q);
		cr_assert_not_null(x, "the EVICT, a message of its own, after what was open");
		cr_assert_eq(x->batch_no, 1);
		cr_assert_eq(proto_parse_payload(x->p, x->len, PROTO_PORT_CTRL_DEFAULT,
						 &proto_ports_default, &m),
			     PROTO_OK);
		cr_assert_eq(m.hdr.type, PROTO_T_EVICT);
		cr_assert_eq(m.u.evict.g, 2);
		free(x);
		cr_assert_null(drv_ctlq_pop(&R.sh[k].q), "nothing else for shard %u", k);
	}
	cr_assert_eq(R.st.deletes, 1, "one DELETE record, to one shard");
	cr_assert_eq(emu_jobs_pending(R.emu, 8), 1, "the batch's bytes wait to be sent");
}

/* The emulated answer: all its tokens but the last are evicted (a wafer never runs the last). */
Test(emulator, an_answer_is_evicted_but_its_last_token)
{
	uint64_t now = MS, want = 0;
	uint32_t i;

	rig_up(60, 1u << 20, false);
	run(&now);
	for (i = 0; i < 60; i++) {
		const struct wl_req *q = &R.wl.r[i];
		uint32_t end = q->n + q->out - 1;

		cr_assert_gt(q->out, 1);
		want += end < q->allowed ? end : q->allowed;
	}
	want -= emu_stats(R.emu)->hit_tokens;
	cr_assert_eq(emu_stats(R.emu)->evicted_tokens, want,
		     "evicted %lu: each request's prompt past its hit and its answer but the last "
		     "token (%lu)", (unsigned long)emu_stats(R.emu)->evicted_tokens, (unsigned long)want);
	cr_assert_gt(emu_stats(R.emu)->generated_hit_tokens, 0, "later turns hit into earlier answers");
}

/* Speculative decoding: rejected proposals evicted, overwritten in place; every byte right. */
Test(emulator, speculation_overwrites_rejected_tokens_and_refills_check_out)
{
	uint64_t now = MS;

	R.spec_tokens = 4;
	R.spec_reject_pct = 30;
	rig_up(60, 1u << 20, false);
	run(&now);
	cr_assert_eq(emu_stats(R.emu)->completed, 60);
	cr_assert_gt(emu_stats(R.emu)->spec_rounds, 100);
	cr_assert_gt(emu_stats(R.emu)->spec_overwrites, 100, "rejected proposals were evicted (%lu)",
		     (unsigned long)emu_stats(R.emu)->spec_overwrites);
	cr_assert_lt(emu_stats(R.emu)->spec_accepted, emu_stats(R.emu)->spec_proposed);
	cr_assert_gt(emu_stats(R.emu)->generated_hit_tokens, 0, "later turns hit into verified answers");
	cr_assert_eq(emu_stats(R.emu)->verify_failures, 0, "%lu bad bytes", (unsigned long)emu_stats(R.emu)->verify_bad_bytes);
}

/* ... and a shard that ignored those overwrites would be caught by the byte check. */
Test(emulator, a_shard_that_ignores_overwrites_fails_the_check)
{
	uint64_t now = MS;

	R.spec_tokens = 4;
	R.spec_reject_pct = 30;
	R.ignore_overwrites = true;
	rig_up(60, 1u << 20, false);
	run(&now);
	cr_assert_gt(R.ignored, 0, "overwrites came, and were ignored");
	cr_assert_gt(emu_stats(R.emu)->verify_failures, 0, "a refill brought a rejected proposal's bytes");
}

/* Without speculation there is nothing to overwrite: the same broken shard passes. */
Test(emulator, without_speculation_nothing_is_overwritten)
{
	uint64_t now = MS;

	R.ignore_overwrites = true;
	rig_up(60, 1u << 20, false);
	run(&now);
	cr_assert_eq(emu_stats(R.emu)->spec_rounds, 0);
	cr_assert_eq(R.ignored, 0);
	cr_assert_eq(emu_stats(R.emu)->verify_failures, 0);
}

/*
 * The emulator's own expiry check (emulator/data.c): a refilled token last
 * evicted longer than the longest first-use TTL ago is counted; one at the
 * TTL, one never noted, or one evicted again since, is not. A table noted
 * past half full keeps what it held and checks it still.
 */
Test(emulator, the_expiry_check_counts_a_token_last_evicted_longer_ago_than_the_ttl)
{
	struct emu *e;
	uint64_t h, a[2];

	rig_up(1, 100000, false);
	e = R.emu;
	e->p.expiry_check_ns = 1000;
	e->now_ns = 5000;
	emu_ev_note(e, 0xabc);
	emu_ev_note(e, 0xdef);
	e->now_ns = 6000;
	a[0] = 0xabc, a[1] = 0x123;
	emu_ev_check(e, a, 2);
	cr_assert_eq(emu_stats(R.emu)->expired_served, 0, "at the TTL, or never noted: not expired");
	e->now_ns = 6001;
	a[0] = 0x123, a[1] = 0xdef;
	emu_ev_check(e, a, 2);
	cr_assert_eq(emu_stats(R.emu)->expired_served, 1, "0xdef was last evicted 1,001 ns ago, the TTL 1,000");
	e->now_ns = 7000;
	emu_ev_note(e, 0xabc);
	e->now_ns = 7500;
	emu_ev_check(e, a, 1);
	emu_ev_check(e, (const uint64_t[]){0xabc}, 1);
	cr_assert_eq(emu_stats(R.emu)->expired_served, 1, "0xabc evicted again 500 ns ago is not expired");
	/* Past half full: new hashes are not noted, the old ones stay checked. */
	for (h = 1; h <= (1u << 22); h++)
		emu_ev_note(e, h * 0x9E3779B97F4A7C15ull);
	cr_assert_eq(e->ev_n, 1u << 21, "%u hashes noted", e->ev_n);
	e->now_ns = 100000;
	emu_ev_check(e, (const uint64_t[]){0xabc}, 1);
	cr_assert_eq(emu_stats(R.emu)->expired_served, 2, "0xabc is still checked once the table is full");
	emu_ev_check(e, (const uint64_t[]){(uint64_t)(1u << 22) * 0x9E3779B97F4A7C15ull}, 1);
	cr_assert_eq(emu_stats(R.emu)->expired_served, 2, "a hash not noted (the table full) is not counted");
}

/* ---- Arrivals and the time to first token ----------------------------------------------------- */

/* Requests begun by a step at @p now after an origin @p origin, per @p arr. */
static uint64_t
arrived_by(const uint64_t *arr, uint32_t n, uint64_t origin, uint64_t now)
{
	uint64_t k = 0;
	uint32_t i;

	for (i = 0; i < n; i++)
		k += arr[i] <= now - origin;
	return k;
}

/*
 * A request begins no sooner than its arrival (counted from the first
 * step's time), at the first step at or after it, every slot being free:
 * arrivals 0, 5, 5.5 and 40 ms after a first step at 10 ms begin at 10, 15,
 * 16 and 50 ms. With compute free and no hit, each has its first token at
 * the step it begins: its TTFT is that step less its arrival (500 us for
 * the third: it arrived between two steps), all of it queueing. The
 * arrivals are copied: the caller's array may change after emu_create; and
 * arrivals going back are refused there.
 * Catches: the arrival check dropped (all begin at the first step), <= for
 * < (one begins a step late), arrivals taken from 0 instead of the first
 * step, the caller's array kept (not copied), the TTFT or the queueing
 * counted from the begin instead of the arrival, a decreasing array taken.
 */
Test(emulator, a_request_does_not_begin_before_it_arrives)
{
	static const uint32_t len[4] = {100, 100, 100, 100}, base[4] = {1000, 2000, 3000, 4000};
	uint64_t arr[4] = {0, 5 * MS, 5 * MS + MS / 2, 40 * MS};
	const uint64_t want[4] = {0, 5 * MS, 5 * MS + MS / 2, 40 * MS};
	const uint64_t origin = 10 * MS;
	const uint64_t *tt;
	uint64_t now = origin;
	struct emu_params ep;
	size_t n;
	unsigned int steps = 0;

	O.len = len;
	O.base = base;
	O.arrival_ns = arr;
	rig_up(4, 1u << 20, false);
	memset(arr, 0, sizeof(arr)); /* emu_create took a copy */
	while (!emu_done(R.emu) || emu_jobs_pending(R.emu, 1) > 0) {
		emu_step(R.emu, now);
		cr_assert_eq(emu_stats(R.emu)->requests, arrived_by(want, 4, origin, now),
			     "%lu begun by %lu ms after the first step, %lu arrived",
			     (unsigned long)emu_stats(R.emu)->requests, (unsigned long)((now - origin) / MS),
			     (unsigned long)arrived_by(want, 4, origin, now));
		shards_turn(now);
		now += MS;
		cr_assert_lt(++steps, 10000);
	}
	cr_assert(!emu_failed(R.emu));
	cr_assert_eq(emu_stats(R.emu)->completed, 4);
	cr_assert_eq(emu_stats(R.emu)->hit_tokens, 0, "prompts of their own: no hit");
	tt = emu_ttft_us(R.emu, &n);
	cr_assert_eq(n, 4);
	cr_assert(tt[0] == 0 && tt[1] == 0 && tt[2] == 500 && tt[3] == 0,
		  "TTFTs %lu %lu %lu %lu us, want 0 0 500 0", (unsigned long)tt[0],
		  (unsigned long)tt[1], (unsigned long)tt[2], (unsigned long)tt[3]);
	cr_assert_eq(emu_stats(R.emu)->first_tokens, 4);
	cr_assert_eq(emu_stats(R.emu)->ttft_us, 500);
	cr_assert_eq(emu_stats(R.emu)->queue_us, 500, "arrived at 15.5 ms, begun at 16");
	emu_stop(R.emu);
	cr_assert_eq(emu_stats(R.emu)->arrivals_unbegun, 0, "all begun");
	/* Arrivals going back: refused (the caller orders them, or refuses the trace). */
	ep = R.emu->p;
	ep.arrival_ns = (const uint64_t[4]){0, 10 * MS, 5 * MS, 20 * MS};
	cr_assert_null(emu_create(&ep), "arrivals going back taken");
	ep.arrival_ns = (const uint64_t[4]){0, 5 * MS, 5 * MS, 20 * MS};
	{
		struct emu *e = emu_create(&ep);

		cr_assert_not_null(e, "equal arrivals refused");
		emu_free(e);
	}
}

/*
 * Three runs of three prompts of 1,000 tokens each their own (no hit), at
 * a million tokens a second plus 2.5 ms a prefill: each prefill takes
 * 3.5 ms, its first token at the 4th step (1 ms apart) after it begins.
 * One slot, a closed loop: each TTFT is 4 ms (it arrives as it begins).
 * One slot, all arriving at the first step: each after the first waited
 * for the ones before (the first's prefill, then its decode), and its TTFT
 * is that wait plus 4 ms, to the microsecond; the waits are queue_us. Two
 * slots, both arriving at once: one compute, the second's prefill after
 * the first's (7 ms).
 * Catches: the TTFT counted from the begin (the queueing left out), the
 * first token counted before the prefill is done, the fixed cost or the
 * tokens left out of the prefill, queue_us not kept, the TTFTs' sum
 * (ttft_us) not kept.
 */
Test(emulator, the_time_to_first_token_counts_the_queueing_and_the_prefill)
{
	static const uint32_t len[3] = {1000, 1000, 1000}, base[3] = {10000, 20000, 30000};
	static const uint64_t at0[3] = {0, 0, 0};
	unsigned int run_;

	for (run_ = 0; run_ < 3; run_++) {
		uint64_t now = 10 * MS, begun_at[3] = {0}, qsum = 0, tsum = 0;
		const uint64_t *tt;
		unsigned int steps = 0, i;
		size_t n;

		O.len = len;
		O.base = base;
		O.max_inflight = run_ == 2 ? 2 : 1;
		O.recompute_tokens_per_s = 1000000;
		O.prefill_overhead_ns = 2500000;
		O.arrival_ns = run_ == 0 ? NULL : at0;
		rig_up(3, 1u << 20, false);
		while (!emu_done(R.emu) || emu_jobs_pending(R.emu, 1) > 0) {
			uint64_t before = emu_stats(R.emu)->requests;

			emu_step(R.emu, now);
			for (i = (unsigned int)before; i < emu_stats(R.emu)->requests; i++)
				begun_at[i] = now;
			shards_turn(now);
			now += MS;
			cr_assert_lt(++steps, 10000);
		}
		cr_assert(!emu_failed(R.emu));
		cr_assert_eq(emu_stats(R.emu)->hit_tokens, 0);
		cr_assert_eq(emu_stats(R.emu)->compute_us, 3 * 3500);
		tt = emu_ttft_us(R.emu, &n);
		cr_assert_eq(n, 3);
		for (i = 0; i < 3; i++)
			tsum += tt[i];
		cr_assert_eq(emu_stats(R.emu)->ttft_us, tsum);
		if (run_ == 0) {
			for (i = 0; i < 3; i++)
				cr_assert_eq(tt[i], 4000, "closed loop, request %u: %lu us, want 4000", i,
					     (unsigned long)tt[i]);
			cr_assert_eq(emu_stats(R.emu)->queue_us, 0);
		} else if (run_ == 1) {
			cr_assert_gt(begun_at[1], begun_at[0] + 4 * MS, "one slot: the second waits");
			for (i = 0; i < 3; i++) {
				uint64_t q = (begun_at[i] - 10 * MS) / 1000;

				cr_assert_eq(tt[i], q + 4000, "request %u: %lu us, want %lu queued + 4000", i,
					     (unsigned long)tt[i], (unsigned long)q);
				qsum += q;
			}
			cr_assert_eq(emu_stats(R.emu)->queue_us, qsum);
			cr_assert_gt(qsum, 0);
		} else {
			cr_assert(begun_at[0] == 10 * MS && begun_at[1] == 10 * MS, "two slots: both begin");
			cr_assert(tt[0] == 4000 && tt[1] == 7000, "one compute: %lu and %lu us, want 4000 7000",
				  (unsigned long)tt[0], (unsigned long)tt[1]);
		}
		if (run_ < 2)
			rig_down(); /* the last: the suite's fini */
	}
}

/*
 * compute_only: the cache off. The same prompt of 200 tokens three times,
 * one slot, a closed loop: with the cache the second and third hit (the
 * hit's compute saved, at 1 us a token) and their TTFT counts their
 * refill's wait; without, nothing is looked up, refilled or stored, every
 * prompt token is computed, and no TTFT waits for a refill.
 * Catches: compute_only ignored (a lookup made), its requests counted as
 * hits or their misses left out, their prefill not charged for the whole
 * prompt, something evicted for them; compute_saved_us not kept (or kept
 * at the missed tokens); the first token counted before the refill is
 * whole.
 */
Test(emulator, compute_only_looks_nothing_up_and_computes_every_prompt)
{
	static const uint32_t len[3] = {200, 200, 200}, base[3] = {500, 500, 500};
	unsigned int k;

	for (k = 0; k < 2; k++) {
		const struct emu_stats *st;
		struct prefixcache_stats ps;
		const uint64_t *tt;
		uint64_t now = MS;
		size_t n;

		O.len = len;
		O.base = base;
		O.max_inflight = 1;
		O.recompute_tokens_per_s = 1000000;
		O.compute_only = k == 1;
		rig_up(3, 1u << 20, false);
		run(&now);
		st = emu_stats(R.emu);
		prefixcache_stats(R.pc, &ps);
		cr_assert_eq(st->completed, 3);
		cr_assert_eq(st->prompt_tokens, 600);
		if (k == 0) {
			cr_assert_gt(st->hit_tokens, 0, "the cache on: the same prompt hits");
			cr_assert_eq(st->miss_tokens, 600 - st->hit_tokens);
			cr_assert_eq(st->compute_saved_us, st->hit_tokens, "1 us a hit token");
			cr_assert_eq(st->compute_us, st->miss_tokens);
			cr_assert_gt(ps.requests, 0);
			/* The first: 200 us of prefill, its first token at the next
			 * step. The others: their refill whole at the shards' second
			 * turn after they begin (the harness' shard takes a turn to
			 * queue it, one to serve it), their 8 missed tokens' prefill
			 * at the step after: 3 ms. */
			cr_assert_eq(st->refills, 2);
			tt = emu_ttft_us(R.emu, &n);
			cr_assert(n == 3 && tt[0] == 1000 && tt[1] == 3000 && tt[2] == 3000,
				  "TTFTs %lu %lu %lu us, want 1000 3000 3000: the refill's wait counts",
				  (unsigned long)tt[0], (unsigned long)tt[1], (unsigned long)tt[2]);
		} else {
			cr_assert_eq(st->hit_tokens, 0);
			cr_assert_eq(st->miss_tokens, 600, "every prompt token computed");
			cr_assert_eq(st->lookup_tokens, 0);
			cr_assert_eq(st->refills, 0);
			cr_assert_eq(st->compute_saved_us, 0);
			cr_assert_eq(st->compute_us, 600, "each prefill the whole prompt");
			cr_assert_eq(st->evicted_tokens, 0, "nothing stored");
			cr_assert_eq(ps.requests, 0, "no lookup at all");
			cr_assert_eq(st->first_tokens, 3);
			tt = emu_ttft_us(R.emu, &n);
			cr_assert(n == 3 && tt[0] == 1000 && tt[1] == 1000 && tt[2] == 1000,
				  "TTFTs %lu %lu %lu us, want 1000 each: no refill to wait for",
				  (unsigned long)tt[0], (unsigned long)tt[1], (unsigned long)tt[2]);
		}
		if (k == 0)
			rig_down(); /* the last: the suite's fini */
	}
}

/*
 * emu_stop: what had not begun when the run stopped, arrived or not, is
 * counted once. One slot, five requests, three arriving at once and two
 * later: stopped while the first runs, four had not begun (two arrived);
 * stopped again, still four. A run stopped when all had begun: none.
 * Catches: the count left out, counted at each call (the summary's and
 * another), only those arrived counted, the begun ones counted.
 */
Test(emulator, emu_stop_counts_the_requests_never_begun_once)
{
	static const uint32_t len[5] = {300, 300, 300, 300, 300}, base[5] = {1, 5000, 9000, 13000, 17000};
	static const uint64_t arr[5] = {0, 0, 0, 500 * MS, 600 * MS};
	uint64_t now = 10 * MS;
	unsigned int i;

	O.len = len;
	O.base = base;
	O.max_inflight = 1;
	O.arrival_ns = arr;
	rig_up(5, 1u << 20, false);
	for (i = 0; i < 3; i++) {
		emu_step(R.emu, now);
		shards_turn(now);
		now += MS;
	}
	cr_assert_eq(emu_stats(R.emu)->requests, 1);
	cr_assert_eq(emu_stats(R.emu)->arrivals_unbegun, 0, "counted before the stop");
	emu_stop(R.emu);
	cr_assert_eq(emu_stats(R.emu)->arrivals_unbegun, 4);
	emu_stop(R.emu);
	cr_assert_eq(emu_stats(R.emu)->arrivals_unbegun, 4, "counted once");
	emu_stop(NULL); /* nothing to stop: nothing happens */
	rig_down();
	/* Every request begun: none. */
	rig_up(5, 1u << 20, false);
	now = MS;
	run(&now);
	emu_stop(R.emu);
	cr_assert_eq(emu_stats(R.emu)->arrivals_unbegun, 0);
}

/*
 * lib/wafermodel is the emulator, computed: with the cache off, the same
 * arrivals, slots and prefill give each request the model's TTFT, up to
 * what the emulator adds by stepping (a step of 1 us here; a sequence
 * frees its slot a few steps after its first token, sending the rest of
 * its tokens, 64 a step). 24 requests of 100 to 2,000 tokens, arriving
 * in bursts and gaps, on 3 slots, at 1 token a us plus 50 us a prefill:
 * the compute is busy most of the run, queues form and drain.
 * Catches: a model that serves the compute in begin order rather than
 * ready order, frees a slot at the wrong time, leaves the overhead or the
 * queueing out, or counts from the begin rather than the arrival.
 */
Test(emulator, the_wafer_model_gives_the_emulator_s_times_to_first_token)
{
	enum { N = 24 };
	static uint32_t len[N], base[N];
	static uint64_t at[N], model[N];
	struct wafermodel_request mr[N];
	struct wafermodel_params mp = {.slots = 3, .tokens_per_ns = 1e-3, .overhead_ns = 50000};
	const uint64_t *tt;
	uint64_t now = 0, worst = 0;
	unsigned int steps = 0, i;
	size_t n;

	for (i = 0; i < N; i++) {
		len[i] = 100 + (i * 7919) % 1900;
		base[i] = 100000 * (i + 1);
		/* Bursts of four 10 us apart, 3 ms between bursts. */
		at[i] = (i / 4) * 3000000ull + (i % 4) * 10000ull;
		mr[i] = (struct wafermodel_request){at[i], len[i], 0};
	}
	cr_assert_eq(wafermodel_ttft(&mp, mr, N, model), 0);
	O.len = len;
	O.base = base;
	O.max_inflight = 3;
	O.recompute_tokens_per_s = 1000000;
	O.prefill_overhead_ns = 50000;
	O.arrival_ns = at;
	O.compute_only = true;
	rig_up(N, 1u << 20, false);
	while (!emu_done(R.emu)) {
		emu_step(R.emu, now);
		now += 1000;
		cr_assert_lt(++steps, 10000000);
	}
	cr_assert(!emu_failed(R.emu));
	tt = emu_ttft_us(R.emu, &n);
	cr_assert_eq(n, N);
	/*
	 * The emulator keeps them in the order they came, the model by
	 * request: compared sorted, each at most 5 steps (5 us) later than
	 * the model's, never sooner. Exactly equal on this input, as run.
	 */
	{
		uint64_t e_sorted[N], m_sorted[N];

		for (i = 0; i < N; i++) {
			e_sorted[i] = tt[i];
			m_sorted[i] = model[i] / 1000;
		}
		qsort(e_sorted, N, sizeof(uint64_t), cmp_u64_test);
		qsort(m_sorted, N, sizeof(uint64_t), cmp_u64_test);
		for (i = 0; i < N; i++) {
			cr_assert_geq(e_sorted[i], m_sorted[i], "rank %u: emulator %lu us, model %lu us", i,
				      (unsigned long)e_sorted[i], (unsigned long)m_sorted[i]);
			cr_assert_leq(e_sorted[i], m_sorted[i] + 5, "rank %u: emulator %lu us, model %lu us",
				      i, (unsigned long)e_sorted[i], (unsigned long)m_sorted[i]);
			if (e_sorted[i] - m_sorted[i] > worst)
				worst = e_sorted[i] - m_sorted[i];
		}
		cr_assert_gt(m_sorted[N - 1], m_sorted[0] + 5000, "queues formed: a spread of TTFTs");
		cr_log_info("the wafer model against the emulator: at most %lu us apart", (unsigned long)worst);
	}
}

/*
 * A refill that fails (here, a shard answers so before it is served)
 * brings nothing: the request's prefill computes its hit tokens
 * too, and they saved nothing. Three requests of the same 200 tokens, one
 * slot, 1 us a token: the first computes 200, the second's refill of 192
 * fails so it computes 200, the third hits 192 and computes 8.
 * Catches: a failed refill's sequence run on the missed tokens' prefill
 * alone (compute_us 216), its hit still counted as saved (384).
 */
Test(emulator, a_failed_refill_s_tokens_are_computed_and_saved_nothing)
{
	static const uint32_t len[3] = {200, 200, 200}, base[3] = {700, 700, 700};
	const struct emu_stats *st;
	uint64_t now = MS;
	unsigned int steps = 0;
	bool failed = false;

	O.len = len;
	O.base = base;
	O.max_inflight = 1;
	O.recompute_tokens_per_s = 1000000;
	rig_up(3, 1u << 20, false);
	while (!emu_done(R.emu) || emu_jobs_pending(R.emu, 1) > 0 || R.npend[0] || R.npend[1]) {
		emu_step(R.emu, now);
		if (!failed && emu_stats(R.emu)->requests == 2) {
			struct emu_refill *rf = NULL;
			uint32_t i;

			cr_assert_eq(emu_stats(R.emu)->refills, 1, "the second request hit");
			for (i = 0; i < R.emu->nslots && rf == NULL; i++)
				if (R.emu->seq[i].state == SEQ_WAIT)
					rf = R.emu->seq[i].rec[0];
			cr_assert_not_null(rf, "its refill awaited");
			/* Shard 0 answers it failed, before any shard serves it. */
			cr_assert(emu_refill_done(R.emu, 0, rf->refill_id, 1, now));
			failed = true;
		}
		shards_turn(now);
		now += MS;
		cr_assert_lt(++steps, 100000);
	}
	cr_assert(failed);
	st = emu_stats(R.emu);
	cr_assert_eq(st->completed, 3);
	cr_assert_eq(st->refills, 2);
	cr_assert_eq(st->hit_tokens, 384, "two hits of 192 looked up");
	cr_assert_eq(st->compute_us, 408, "200 + 200 (the failed refill's tokens computed) + 8: %lu",
		     (unsigned long)st->compute_us);
	cr_assert_eq(st->compute_saved_us, 192, "only the hit that came saved compute: %lu",
		     (unsigned long)st->compute_saved_us);
}

/*
 * Refill policy adaptive (give_up): the same prompt of 200 tokens three
 * times, one slot, 1 us a token. The shards serve a refill a turn (1 ms)
 * after it is asked, so the hits' refills (192 tokens each) are still out
 * 1 ms after their pick, past the 192 us computing them takes: both are
 * given up, their tokens computed (600 us of compute in all, nothing
 * saved), and their data, when it comes, is checked (no verify failure)
 * but not counted refilled; the model still learns each one's time. Without
 * give_up, the same run waits for both and counts them refilled. And when
 * the shards never answer, a refill given up fails at the refill timeout,
 * and the run ends.
 * Catches: a refill waited for past computing it; a given-up refill's
 * tokens counted refilled or its compute not charged; its data unchecked;
 * its time not learned; a given-up refill that never comes never freed
 * (the run would not end).
 */
/* The same 200-token prompt three times, one run slot, a prefill of 1M tokens/s; @p give_up. */
static void
rig_three_prompts(bool give_up)
{
	static const uint32_t len[3] = {200, 200, 200}, base[3] = {700, 700, 700};

	O.len = len;
	O.base = base;
	O.max_inflight = 1;
	O.recompute_tokens_per_s = 1000000;
	O.give_up = give_up;
	rig_up(3, 1u << 20, false);
}

static void
give_up_run(bool give_up, bool answer)
{
	uint64_t now = MS;
	unsigned int steps = 0;

	rig_three_prompts(give_up);
	while (!emu_done(R.emu) || emu_jobs_pending(R.emu, 1) > 0 || R.npend[0] || R.npend[1]) {
		emu_step(R.emu, now);
		if (!answer)
			R.npend[0] = R.npend[1] = 0; /* the shards never serve a refill */
		shards_turn(now);
		emu_check_timeouts(R.emu, now);
		now += MS;
		cr_assert_lt(++steps, 100000, "the run ends");
	}
	cr_assert(!emu_failed(R.emu));
}

Test(emulator, a_refill_still_out_when_computing_it_would_be_done_is_given_up)
{
	const struct emu_stats *st;

	give_up_run(true, true);
	st = emu_stats(R.emu);
	cr_assert_eq(st->completed, 3);
	cr_assert_eq(st->refills, 2, "the second and third requests hit");
	cr_assert_eq(st->seqs_given_up, 2);
	cr_assert_eq(st->refills_given_up, 2);
	cr_assert_eq(st->given_up_tokens, 384, "two refills of 192 tokens");
	cr_assert_eq(st->refilled_tokens, 0, "a refill given up is not counted refilled");
	cr_assert_eq(st->verify_failures, 0);
	cr_assert_gt(st->refill_bytes, 0, "their data came, and was checked");
	cr_assert_eq(st->refill_timeouts, 0);
	cr_assert_eq(st->compute_us, 600, "every prompt token computed: %lu", (unsigned long)st->compute_us);
	cr_assert_eq(st->compute_saved_us, 0);
	cr_assert_eq(R.learn.ml[0].fit.n, 2, "each given-up refill's time learned: %lu",
		     (unsigned long)R.learn.ml[0].fit.n);
	rig_down();

	give_up_run(false, true);
	st = emu_stats(R.emu);
	cr_assert_eq(st->seqs_given_up, 0, "without give_up every refill is waited for");
	cr_assert_eq(st->refilled_tokens, 2 * 192, "both refills whole: %lu",
		     (unsigned long)st->refilled_tokens);
	cr_assert_eq(st->compute_us, 216, "200 + 8 + 8: %lu", (unsigned long)st->compute_us);
	rig_down();

	give_up_run(true, false);
	st = emu_stats(R.emu);
	cr_assert_eq(st->refills_given_up, 2);
	cr_assert_eq(st->refill_timeouts, 2, "given up, never answered: failed at the timeout");
	cr_assert_eq(st->completed, 3);
}

/*
 * The refill timeout (1 s here) is the shards' silence, not the driver's
 * own waits. The same prompt three times, one slot, the shards never
 * serving: the second request's refill is still out. A frame of its data
 * at 900 ms moves its deadline to 1.9 s (not failed at 1.5 s, failed at
 * 2 s); the third's, with the wafer held 5 s meanwhile (the driver's queue
 * to the shards backed up: no REFILL behind it went out), fails 5 s later
 * than it would have.
 * Catches: a refill failed while its data still comes; a refill failed for
 * the time the driver itself held it back (the load of a busy machine,
 * seen beside two CPU hogs and a Ceph cluster: 7 refills failed, exit 3).
 */
/* Steps the run, the shards never serving a refill, until @p find finds one. */
static struct emu_refill *
silent_until(uint64_t *now, struct emu_refill *(*find)(void), const char *what)
{
	unsigned int steps = 0;

	for (;;) {
		struct emu_refill *rf;

		emu_step(R.emu, *now);
		R.npend[0] = R.npend[1] = 0;
		shards_turn(*now);
		rf = find();
		if (rf != NULL)
			return rf;
		*now += MS;
		cr_assert_lt(++steps, 100000, "%s", what);
	}
}

/* The refill a request waits for. */
static struct emu_refill *
waited_for(void)
{
	uint32_t i;

	for (i = 0; i < R.emu->nslots; i++)
		if (R.emu->seq[i].state == SEQ_WAIT && R.emu->seq[i].rec[0] != NULL)
			return R.emu->seq[i].rec[0];
	return NULL;
}

/* A refill given up (its tokens computed) and not finished. */
static struct emu_refill *
given_up(void)
{
	unsigned int i;

	for (i = 0; i < HBUCKETS; i++)
		for (struct emu_refill *r = R.emu->rf[i]; r != NULL; r = r->hnext)
			if (r->given_up && !r->finished)
				return r;
	return NULL;
}

static struct emu_refill *
waiting_refill(uint64_t *now)
{
	return silent_until(now, waited_for, "a request waits for its refill");
}

/* A frame of @p rf's data 900 ms after its clock started at @p t: not failed at 1.5 s, failed at 2 s. */
static void
data_at_900_ms(struct emu_refill *rf, uint64_t t)
{
	struct proto_refill_data_hdr h = {.refill_id = rf->refill_id, .cache_idx = rf->cache_idx};
	uint64_t before = emu_stats(R.emu)->refill_timeouts;
	uint8_t byte = 0;

	emu_refill_data(R.emu, 0, &h, &byte, 0, t + 900 * MS);
	emu_check_timeouts(R.emu, t + 1500 * MS);
	cr_assert_eq(emu_stats(R.emu)->refill_timeouts, before, "its data came at 900 ms");
	emu_check_timeouts(R.emu, t + 2000 * MS);
	cr_assert_eq(emu_stats(R.emu)->refill_timeouts, before + 1, "silent for 1.1 s since");
}

Test(emulator, a_refill_times_out_on_the_shards_silence_not_the_driver_s_waits)
{
	static const uint32_t len[3] = {200, 200, 200}, base[3] = {700, 700, 700};
	struct proto_refill_data_hdr h = {0};
	struct emu_refill *rf;
	uint64_t now = MS, t;
	uint8_t byte = 0;

	O.len = len;
	O.base = base;
	O.max_inflight = 1;
	rig_up(3, 1u << 20, false);
	rf = waiting_refill(&now);
	t = now;
	data_at_900_ms(rf, t);

	/* The third waits from t; the wafer held from t to t + 5 s, a frame of
	 * its data at 3 s: 1 s of silence after the hold, not 1 s after the
	 * frame plus the whole hold again. */
	now = t + 2001 * MS;
	rf = waiting_refill(&now);
	t = now;
	h.refill_id = rf->refill_id;
	h.cache_idx = rf->cache_idx;
	emu_refill_data(R.emu, 0, &h, &byte, 0, t + 3000 * MS);
	emu_hold_ended(R.emu, t, t + 5000 * MS);
	emu_check_timeouts(R.emu, t + 5900 * MS);
	cr_assert_eq(emu_stats(R.emu)->refill_timeouts, 1, "the 5 s held are not the shards'");
	emu_check_timeouts(R.emu, t + 6100 * MS);
	cr_assert_eq(emu_stats(R.emu)->refill_timeouts, 2, "1 s of its own past the hold, no more");
}

/* A refill given up (its tokens computed) whose data still comes is not failed while it comes. */
Test(emulator, a_given_up_refill_times_out_on_its_shards_silence_too)
{
	struct emu_refill *rf;
	uint64_t now = MS;

	rig_three_prompts(true);
	rf = silent_until(&now, given_up, "a refill is given up");
	data_at_900_ms(rf, rf->given_up_ns);
}

/*
 * What a refill took while the driver did not run is the process's, not the
 * tiers': the same prompt three times, the shards answering a turn later,
 * no give-up. With the driver absent while the second request's refill is
 * out, only the third's is learned (each model's line and the whole
 * sequence's); without, both are.
 * Catches: a stop of seconds learned as a refill's time, which would make
 * the adaptive driver compute every hit after it.
 */
static void
absent_run(bool absent, bool give_up)
{
	uint64_t now = MS;
	unsigned int steps = 0;
	bool was = false;

	rig_three_prompts(give_up);
	while (!emu_done(R.emu) || emu_jobs_pending(R.emu, 1) > 0 || R.npend[0] || R.npend[1]) {
		emu_step(R.emu, now);
		if (absent && !was && (give_up ? given_up() : waited_for()) != NULL) {
			emu_absent(R.emu);
			was = true;
		}
		shards_turn(now);
		emu_check_timeouts(R.emu, now);
		now += MS;
		cr_assert_lt(++steps, 100000, "the run ends");
	}
	cr_assert(!emu_failed(R.emu));
	cr_assert_eq(emu_stats(R.emu)->refilled_tokens, give_up ? 0 : 2 * 192,
		     "both refills whole (given up: not counted refilled)");
}

Test(emulator, a_refill_out_while_the_driver_did_not_run_is_not_learned)
{
	absent_run(false, false);
	cr_assert_eq(R.learn.ml[0].fit.n, 2, "both refills learned: %lu",
		     (unsigned long)R.learn.ml[0].fit.n);
	cr_assert_eq(R.learn.fit.n, 2);
	rig_down();
	absent_run(true, false);
	cr_assert_eq(R.learn.ml[0].fit.n, 1, "the third's alone: %lu",
		     (unsigned long)R.learn.ml[0].fit.n);
	cr_assert_eq(R.learn.fit.n, 1);
}

/* The same with give_up: a given-up refill out while the driver did not run is not learned. */
Test(emulator, a_given_up_refill_out_while_the_driver_did_not_run_is_not_learned)
{
	absent_run(false, true);
	cr_assert_eq(emu_stats(R.emu)->refills_given_up, 2);
	cr_assert_eq(R.learn.ml[0].fit.n, 2, "both given-up refills learned: %lu",
		     (unsigned long)R.learn.ml[0].fit.n);
	rig_down();
	absent_run(true, true);
	cr_assert_eq(emu_stats(R.emu)->refills_given_up, 2);
	cr_assert_eq(R.learn.ml[0].fit.n, 1, "the third's alone: %lu",
		     (unsigned long)R.learn.ml[0].fit.n);
}

/*
 * A hold of the wafer (or the driver's own absence) is no time toward
 * giving a refill up: the same prompt three times, 1 us a token, the
 * shards silent. The second request is picked and waits for its refill
 * (192 us of computing); the wafer is held 5 s from its pick. 100 us after
 * the hold it still waits (what was held may come now); 300 us after, past
 * the 192 us, it gives the refill up.
 * Catches: a request that gives its refill up at once after a hold, its
 * refill's data then wasted on a wafer computing the same tokens.
 */
Test(emulator, a_hold_is_no_time_toward_giving_a_refill_up)
{
	struct emu_refill *rf;
	struct emu_seq *s;
	uint64_t now = MS, t;

	rig_three_prompts(true);
	rf = waiting_refill(&now);
	s = rf->seq;
	cr_assert(s->picked && s->give_up_ns == 192000, "picked, 192 us to give up: %lu",
		  (unsigned long)s->give_up_ns);
	cr_assert_eq(emu_stats(R.emu)->seqs_given_up, 0);
	t = s->pick_ns;
	emu_hold_ended(R.emu, t, t + 5000 * MS);
	emu_step(R.emu, t + 5000 * MS + 100000);
	cr_assert_eq(emu_stats(R.emu)->seqs_given_up, 0, "the 5 s held are no time toward it");
	emu_step(R.emu, t + 5000 * MS + 300000);
	cr_assert_eq(emu_stats(R.emu)->seqs_given_up, 1, "192 us of its own past the hold");
}

/*
 * wafer.backpressure "skip": the built-in workload, 60 requests, with the
 * driver saying its EVICT path is backed up in every other stretch of 20
 * steps. A sequence running then stops caching where it is: its tokens left
 * are not evicted, it completes, and its slot frees; every request still
 * completes, every refilled byte checks out, and each shard holds exactly
 * what the driver accounts for (the library ended those prompts at their
 * last whole column). Without skip, the same saying changes nothing.
 * Catches: a skipped sequence's tokens still sent, or counted sent; its
 * prompt left open in the library (the account off from the shards); a
 * sequence that never completes.
 */
static void
skip_run(bool skip)
{
	uint64_t now = MS;
	unsigned int steps = 0;

	O.skip = skip;
	rig_up(60, 1u << 20, false);
	while (!emu_done(R.emu) || emu_jobs_pending(R.emu, 1) > 0 || R.npend[0] || R.npend[1]) {
		emu_backed_up(R.emu, steps / 20 % 2 == 1);
		emu_step(R.emu, now);
		shards_turn(now);
		now += MS;
		cr_assert_lt(++steps, 100000, "the run ends");
	}
	cr_assert(!emu_failed(R.emu));
	cr_assert(!R.sink.failed);
}

Test(emulator, a_backed_up_evict_path_with_skip_stops_caching_not_the_wafer)
{
	struct kvstore_cache_stats cs;
	const struct emu_stats *st;
	uint64_t evicted_all;
	uint16_t k;

	skip_run(false);
	st = emu_stats(R.emu);
	cr_assert_eq(st->skipped_seqs, 0, "without skip, nothing is skipped");
	evicted_all = st->evicted_tokens;
	rig_down();

	skip_run(true);
	st = emu_stats(R.emu);
	cr_assert_eq(st->completed, 60);
	cr_assert_gt(st->skipped_seqs, 0);
	cr_assert_gt(st->skipped_tokens, 0);
	cr_assert_lt(st->evicted_tokens, evicted_all, "skipped tokens are not evicted: %lu of %lu",
		     (unsigned long)st->evicted_tokens, (unsigned long)evicted_all);
	cr_assert_eq(st->verify_failures, 0);
	for (k = 0; k < NSH; k++) {
		kvstore_cache_stats(R.kv[k], 0, &cs);
		cr_assert_eq(cs.stored_tokens, prefixcache_stored(R.pc, 0, 0),
			     "shard %u holds what the driver accounts for", k);
	}
}
