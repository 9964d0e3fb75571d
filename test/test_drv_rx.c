/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * What the driver does with what a shard sends (rx.c), its epochs (epoch.c)
 * and its second tier's answers (l2.c), on the whole driver as the program
 * makes it: EAL with one net_ring port, config/all-in-one.cfg read for the
 * driver role, kvss_driver_load() and kvss_driver_init(). Each test builds
 * the frames shard 0 of model 0 would send (lib/proto's builders, from the
 * shard's configured address to the driver's), hands them to drv_receive()
 * as the poll loop does, and checks the driver's counters (d->st) and what
 * it knows of the shard (d->sh[0]) to the exact count. Nothing is polled
 * or flushed: the HELLOs a restart queues stay in the port's queue. The
 * cases cover each message a shard sends the driver: STATUS, ERROR,
 * REFILL_DONE, TOKEN_LOST, ACK, L2_DONE, L2_INVENTORY (in a suite of its own,
 * the shard given a second tier), and a frame that does not parse; and
 * what the driver's own absence (driver.c, drv_absent) does to its shard's
 * silence and its run's clock.
 */
#include <criterion/criterion.h>
#include <inttypes.h>
#include <string.h>

#include <rte_cycles.h>
#include <rte_ethdev.h>
#include <rte_mbuf.h>

#include "drv_fixture.h"
#include "kvss.h"
#include "mono.h"

#define CFG "config/all-in-one.cfg"
#define DRIVER_EPOCH 0x0d0d0d0du /* the process's epoch: model 0's first driver epoch */
#define SHARD_EPOCH 0x5a5a0001u	 /* the shard's, as it started */
#define SHARD_EPOCH2 0x5a5a0002u /* the shard's after it restarted */

static struct drv *d; /* the driver under test: made, loaded and set up by setup() */
static struct drv_shard *sh;

static void
setup(void)
{
	d = test_driver_loaded(CFG, DRIVER_EPOCH);
	cr_assert_eq(kvss_driver_init(d), 0);
	/* What the cases below take for granted of the example: one model,
	 * one shard (id 0) of one cache of 256 bytes a token, no second tier,
	 * no shared level, on_loss "exact". */
	cr_assert_eq(d->nsh, 1);
	cr_assert_eq(kvss.cfg.driver.pc.num_models, 1);
	cr_assert_eq(kvss.cfg.driver.pc.model[0].num_caches, 1);
	cr_assert_eq(kvss.cfg.shared.conf[0], '\0');
	cr_assert_not(drv_l2_model(0));
	cr_assert_eq(kvss.cfg.driver.on_loss, KVSS_LOSS_EXACT);
	sh = &d->sh[0];
	cr_assert_eq(sh->ref->id, 0);
	cr_assert_eq(sh->ref->bytes_per_token[0], 256, "what status_from()'s cache info says");
	cr_assert_eq(d->model_epoch[0], DRIVER_EPOCH);
	cr_assert_not(sh->up);
	/* tsc_jump()'s pair, as the loop reads it at its start. */
	d->clk_tsc = rte_get_tsc_cycles();
	d->clk_mono_ns = mono_ns();
}

static void
teardown(void)
{
	test_driver_stop(d);
}

TestSuite(drv_rx, .init = setup, .fini = teardown);

/* ---- Frames as a shard sends them -------------------------------------------------- */

static uint8_t payload[PROTO_PAYLOAD_MAX];
static uint32_t status_flags; /* what a shard's STATUS says it has (PROTO_STATUS_F_L2: a second tier) */

/* Begin a message of @p type from shard @p shard_id of @p model in shard epoch @p epoch. */
static void
begin(struct proto_builder *b, uint8_t type, uint32_t model, uint16_t shard_id, uint32_t epoch,
      uint64_t seq, uint16_t flags)
{
	struct proto_hdr h = {.version = PROTO_VERSION, .type = type, .flags = flags,
			      .model_id = model, .shard_id = shard_id, .epoch = epoch, .seq = seq};

	cr_assert_eq(proto_build_begin(b, payload, sizeof(payload), &h), 0);
}

/*
 * End the message and hand it to the driver in a frame from @p src_ip (the
 * shard's configured address when 0) to the driver's, on the control port
 * both use, as the poll loop would at @p tsc.
 */
static void
deliver_from(struct proto_builder *b, uint32_t src_ip, uint64_t tsc)
{
	uint32_t len = proto_build_end(b);
	struct proto_addr a;
	struct rte_mbuf *m;

	memset(&a, 0, sizeof(a));
	memcpy(a.src_mac, sh->ref->addr.mac, 6);
	memcpy(a.dst_mac, kvss.cfg.driver.addr.mac, 6);
	a.src_ip = src_ip != 0 ? src_ip : sh->ref->addr.ipv4;
	a.dst_ip = kvss.cfg.driver.addr.ipv4;
	a.src_port = kvss.cfg.udp.ctrl;
	a.dst_port = kvss.cfg.udp.ctrl;
	m = proto_mbuf_frame(kvss.pool, &a, payload, len);
	cr_assert_not_null(m);
	drv_receive(d, m, tsc);
	rte_pktmbuf_free(m);
}

static void
deliver(struct proto_builder *b, uint64_t tsc)
{
	deliver_from(b, 0, tsc);
}

/*
 * A STATUS from shard @p shard_id of @p model, in shard epoch @p epoch,
 * naming @p driver_epoch as the one it has established, holding @p stored
 * tokens of its cache, up for @p uptime_ns.
 */
static void
status_from(uint32_t model, uint16_t shard_id, uint32_t src_ip, uint32_t epoch,
	    uint32_t driver_epoch, uint64_t stored, uint64_t uptime_ns, uint64_t tsc)
{
	struct proto_status s = {.batches_complete = 3, .reports = 0, .uptime_ns = uptime_ns,
				 .flags = status_flags, .driver_epoch = driver_epoch};
	struct proto_cache_info ci = {.cache_id = 0, .num_buffers = 2, .bytes_per_token = 256,
				      .capacity_tokens = 100000, .stored_tokens = stored};
	struct proto_builder b;

	begin(&b, PROTO_T_STATUS, model, shard_id, epoch, 0, 0);
	cr_assert_eq(proto_build_status(&b, &s), 0);
	cr_assert_eq(proto_build_cache_info(&b, &ci), 0);
	deliver_from(&b, src_ip, tsc);
}

static void
status(uint32_t epoch, uint32_t driver_epoch, uint64_t stored, uint64_t uptime_ns, uint64_t tsc)
{
	status_from(0, sh->ref->id, 0, epoch, driver_epoch, stored, uptime_ns, tsc);
}

/* The shard answers the driver's first HELLO: up, in SHARD_EPOCH. */
static void
bring_up(uint64_t tsc)
{
	status(SHARD_EPOCH, d->model_epoch[0], 0, 1000, tsc);
	cr_assert(sh->up, "the shard answered our HELLO: up");
}

/* A TOKEN_LOST of report seq @p seq: @p n ranges, @p counts[i] tokens each. */
static void
token_lost(uint64_t seq, uint16_t flags, const uint32_t *counts, unsigned int n, uint64_t tsc)
{
	struct proto_builder b;
	unsigned int i;

	begin(&b, PROTO_T_TOKEN_LOST, 0, sh->ref->id, sh->epoch, seq, flags);
	for (i = 0; i < n; i++) {
		struct proto_lost l = {.prompt_id = 0x1000 + i, .token_idx = 64 * i,
				       .count = counts[i], .cache_id = 0};

		cr_assert_eq(proto_build_lost(&b, &l), 0);
	}
	deliver(&b, tsc);
}

/* ---- STATUS: up, heard ---------------------------------------------------------------- */

Test(drv_rx, a_status_answering_our_hello_marks_the_shard_up)
{
	uint64_t t = rte_get_tsc_cycles();

	/* Before our HELLO reached it, it names no driver epoch: counted, not up. */
	status(SHARD_EPOCH, 0, 0, 500, t);
	cr_assert_eq(d->st.statuses, 1);
	cr_assert_not(sh->up, "a STATUS that is not our HELLO's answer does not make it up");
	cr_assert_eq(sh->epoch, 0);

	status(SHARD_EPOCH, DRIVER_EPOCH, 40, 1000, t + 10);
	cr_assert_eq(d->st.statuses, 2);
	cr_assert(sh->up);
	cr_assert_eq(sh->epoch, SHARD_EPOCH, "its epoch, from the header");
	cr_assert_eq(sh->last_rx, t + 10, "heard");
	cr_assert_eq(sh->status_at, t + 10);
	cr_assert_eq(sh->status_uptime, 1000);
	cr_assert_eq(sh->batches_complete, 3);
	cr_assert_eq(sh->stored[0], 40, "what it holds, by its cache info");
	cr_assert_eq(sh->report_next, 1, "its reports of this stream start at 1");
	cr_assert_eq(d->st.shard_restarts, 0);
	cr_assert_eq(d->st.stale, 0);
	cr_assert_eq(d->model_epoch[0], DRIVER_EPOCH, "no restart");
	cr_assert_eq(d->fatal, 0, "its caches agree with the configuration");

	/* An older STATUS (delayed on the way) changes nothing it said. */
	status(SHARD_EPOCH, DRIVER_EPOCH, 99, 900, t + 20);
	cr_assert_eq(d->st.statuses, 3);
	cr_assert_eq(d->st.stale, 1);
	cr_assert_eq(sh->stored[0], 40);
	cr_assert_eq(sh->status_at, t + 10);
}

/* ---- What comes from no shard of the configuration -------------------------------------- */

/*
 * rx.c finds the shard by the header's model and shard id (shard_of), not
 * by the source address (a shard behind a router, or a second address, is
 * still itself): what is no shard of the configuration is a frame naming
 * one it does not list. These come from an address no shard has as well.
 */
Test(drv_rx, a_frame_from_no_configured_shard_is_stale_and_changes_nothing)
{
	uint64_t t = rte_get_tsc_cycles();
	uint32_t stranger = 0x0a630063; /* 10.99.0.99: no shard's */
	struct kvss_drv_stats st0;
	struct drv_shard sh0;
	uint32_t ep0;

	bring_up(t);
	/* Copied byte for byte: compared so below. */
	memcpy(&st0, &d->st, sizeof(st0));
	memcpy(&sh0, sh, sizeof(sh0));
	ep0 = d->model_epoch[0];

	/* Shard 7 of model 0: the model has shard 0 only. */
	status_from(0, 7, stranger, SHARD_EPOCH2, DRIVER_EPOCH, 5, 2000, t + 100);
	/* Model 3: the driver runs one model. */
	status_from(3, 0, stranger, SHARD_EPOCH2, DRIVER_EPOCH, 5, 2000, t + 100);
	cr_assert_eq(d->st.stale, st0.stale + 2, "each counted stale");
	st0.stale += 2;
	cr_assert_eq(memcmp(&d->st, &st0, sizeof(st0)), 0, "no other counter moved");
	cr_assert_eq(memcmp(sh, &sh0, sizeof(sh0)), 0, "the shard is as it was (not even heard)");
	cr_assert_eq(d->model_epoch[0], ep0);
}

/* ---- A new shard epoch: the model restarts (epoch.c) ------------------------------------ */

Test(drv_rx, a_status_with_a_new_shard_epoch_restarts_the_model)
{
	uint64_t t = rte_get_tsc_cycles(), hellos;

	bring_up(t);
	hellos = d->st.hellos;
	/* The shard restarted: it answers our epoch's HELLO again, in an epoch of its own. */
	status(SHARD_EPOCH2, DRIVER_EPOCH, 0, 10, t + 100);
	cr_assert_eq(d->st.statuses, 2);
	cr_assert_eq(d->st.shard_restarts, 1);
	cr_assert_eq(d->st.resyncs, 0);
	cr_assert_neq(d->model_epoch[0], DRIVER_EPOCH, "the model takes a new driver epoch");
	cr_assert_neq(d->model_epoch[0], 0);
	cr_assert_not(sh->up, "its shards start over with it");
	cr_assert_eq(sh->epoch, 0);
	cr_assert_eq(d->st.hellos, hellos + 1, "a HELLO in the new epoch to each shard");

	/* Its answer to that HELLO brings it up again, in its new epoch, with no more restarts. */
	status(SHARD_EPOCH2, d->model_epoch[0], 0, 20, t + 200);
	cr_assert(sh->up);
	cr_assert_eq(sh->epoch, SHARD_EPOCH2);
	cr_assert_eq(d->st.shard_restarts, 1);
}

Test(drv_rx, a_status_that_no_longer_names_our_epoch_restarts_the_model)
{
	uint64_t t = rte_get_tsc_cycles();

	bring_up(t);
	/* Restarted, it has no driver epoch yet (0), in the same shard epoch or not. */
	status(SHARD_EPOCH, 0, 0, 10, t + 100);
	cr_assert_eq(d->st.shard_restarts, 1);
	cr_assert_neq(d->model_epoch[0], DRIVER_EPOCH);
	cr_assert_not(sh->up);
	/* Another such STATUS before our new HELLO reached it: not up, not again. */
	status(SHARD_EPOCH, 0, 0, 20, t + 200);
	cr_assert_eq(d->st.shard_restarts, 1);
	cr_assert_eq(d->st.statuses, 3);
}

/* ---- TOKEN_LOST: a reliable report, taken once and in order --------------------------- */

Test(drv_rx, token_lost_is_counted_once_in_report_order)
{
	static const uint32_t two[] = {5, 7}, one[] = {4};
	uint64_t t = rte_get_tsc_cycles();

	bring_up(t);
	token_lost(1, 0, two, 2, t + 1);
	cr_assert_eq(d->st.lost_records, 2);
	cr_assert_eq(d->st.lost_tokens, 12, "ranges of 5 and 7 tokens");
	cr_assert_eq(d->st.reports_dropped, 0);
	cr_assert_eq(sh->report_next, 2);
	cr_assert(sh->report_ack_due, "a REPORT_ACK is due after this poll");

	/* Its REPORT_ACK was lost: the shard sends the same report again. */
	token_lost(1, PROTO_F_RETRANSMIT, two, 2, t + 2);
	cr_assert_eq(d->st.reports_dropped, 1, "the copy dropped");
	cr_assert_eq(d->st.lost_records, 2, "not counted twice");
	cr_assert_eq(d->st.lost_tokens, 12);

	/* One ahead of a gap (2 still on its way) waits for the shard to resend. */
	token_lost(3, 0, one, 1, t + 3);
	cr_assert_eq(d->st.reports_dropped, 2);
	cr_assert_eq(d->st.lost_records, 2);
	cr_assert_eq(sh->report_next, 2);

	token_lost(2, 0, one, 1, t + 4);
	cr_assert_eq(d->st.lost_records, 3);
	cr_assert_eq(d->st.lost_tokens, 16);
	cr_assert_eq(sh->report_next, 3);
	/* on_loss "exact": the library drops what was lost, the model goes on. */
	cr_assert_eq(d->st.resyncs, 0);
	cr_assert_eq(d->model_epoch[0], DRIVER_EPOCH);
	cr_assert(sh->up);
}

Test(drv_rx, token_lost_with_on_loss_resync_starts_the_model_over)
{
	static const uint32_t one[] = {4};
	uint64_t t = rte_get_tsc_cycles();

	kvss.cfg.driver.on_loss = KVSS_LOSS_RESYNC;
	bring_up(t);
	token_lost(1, 0, one, 1, t + 1);
	cr_assert_eq(d->st.lost_tokens, 4);
	cr_assert_eq(d->st.resyncs, 1, "drv_resync: the model starts over");
	cr_assert_eq(d->st.shard_restarts, 0, "counted as a resync, not a shard restart");
	cr_assert_neq(d->model_epoch[0], DRIVER_EPOCH);
	cr_assert_not(sh->up);
	/* What the shard sends in its old epoch now is stale. */
	token_lost(2, 0, one, 1, t + 2);
	cr_assert_eq(d->st.stale, 1);
	cr_assert_eq(d->st.lost_tokens, 4);
}

/* ---- L2_DONE: every record of the frame is taken (l2.c, shared.c) ------------------- */

Test(drv_rx, l2_done_takes_every_record_past_a_failed_shared_one)
{
	/* L2_DOWNs fine and failed, with a failed SH_UP slice (op 4) in the middle. */
	static const struct proto_l2done recs[] = {
		{.key = 0xa1, .isolation_id = 9, .op = PROTO_L2OP_L2_DOWN},
		{.key = 0xa2, .isolation_id = 9, .op = PROTO_L2OP_L2_DOWN,
		 .status = PROTO_E_L2_FAILED},
		{.key = 0xa3, .isolation_id = 9, .op = PROTO_L2OP_SH_UP,
		 .status = PROTO_E_SHARED_BAD},
		{.key = 0xa4, .isolation_id = 9, .op = PROTO_L2OP_L2_DOWN},
		{.key = 0xa5, .isolation_id = 9, .op = PROTO_L2OP_L2_DOWN,
		 .status = PROTO_E_L2_FAILED},
	};
	uint64_t t = rte_get_tsc_cycles();
	const struct drv_sh_stats *ss = drv_sh_stats(d);
	struct proto_builder b;
	unsigned int i;

	bring_up(t);
	begin(&b, PROTO_T_L2_DONE, 0, sh->ref->id, sh->epoch, 1, 0);
	for (i = 0; i < sizeof(recs) / sizeof(recs[0]); i++)
		cr_assert_eq(proto_build_l2_done(&b, &recs[i]), 0);
	deliver(&b, t + 1);

	cr_assert_eq(d->st.reports_dropped, 0);
	cr_assert_eq(sh->report_next, 2, "taken as report 1");
	cr_assert_eq(d->st.l2_done, 4, "the four L2_DOWN records, those after the SH_UP too");
	cr_assert_eq(d->st.l2_failed, 2);
	cr_assert_eq(d->st.l2_up_failed_cols, 0);
	/* The shared level's record went to shared.c, which has no cluster here. */
	cr_assert_eq(ss->up_failed, 1);
	cr_assert_eq(ss->slices_bad, 1);
	cr_assert_eq(ss->records_deleted, 0, "no cluster, no record deleted");
	/* Each failed L2_DOWN's column is let go: its L2_DELETE's UNKNOWN_PROMPT is expected. */
	cr_assert(drv_l2_expected_unknown(d, sh, 0xa2));
	cr_assert(drv_l2_expected_unknown(d, sh, 0xa5), "the record after the last failure was read");
	cr_assert_not(drv_l2_expected_unknown(d, sh, 0xa4), "a column written is not let go");
	cr_assert_eq(d->fatal, 0);
	cr_assert_eq(d->st.resyncs + d->st.shard_restarts, 0, "the model goes on");
}

/* ---- ERROR, REFILL_DONE, ACK: counted as the protocol says ------------------------------ */

/* An ERROR report of seq @p seq: one record per code in @p codes. */
static void
errors(uint64_t seq, const uint16_t *codes, unsigned int n, uint64_t tsc)
{
	struct proto_builder b;
	unsigned int i;

	begin(&b, PROTO_T_ERROR, 0, sh->ref->id, sh->epoch, seq, 0);
	for (i = 0; i < n; i++) {
		struct proto_error e = {.seq = 10 + i, .prompt_id = 0x2000 + i, .token_idx = 0,
					.cache_id = 0, .code = codes[i]};

		cr_assert_eq(proto_build_error(&b, &e), 0);
	}
	deliver(&b, tsc);
}

Test(drv_rx, errors_are_counted_by_code_and_on_loss_exact_keeps_the_model)
{
	static const uint16_t two[] = {PROTO_E_RANGE, PROTO_E_NO_SPACE}, odd[] = {250};
	uint64_t t = rte_get_tsc_cycles();

	bring_up(t);
	errors(1, two, 2, t + 1);
	cr_assert_eq(d->st.errors, 2);
	cr_assert_eq(d->st.errors_by_code[PROTO_E_RANGE], 1);
	cr_assert_eq(d->st.errors_by_code[PROTO_E_NO_SPACE], 1);
	cr_assert_eq(sh->report_next, 2, "a report, taken in order");
	/* A code this driver does not know: counted, under 0. */
	errors(2, odd, 1, t + 2);
	cr_assert_eq(d->st.errors, 3);
	cr_assert_eq(d->st.errors_by_code[0], 1);
	/* The same report again (its REPORT_ACK lost): not counted twice. */
	errors(2, odd, 1, t + 3);
	cr_assert_eq(d->st.errors, 3);
	cr_assert_eq(d->st.reports_dropped, 1);
	cr_assert_eq(d->st.resyncs, 0, "on_loss exact: the library drops what was refused");
	cr_assert_eq(d->model_epoch[0], DRIVER_EPOCH);
	cr_assert(sh->up);
}

Test(drv_rx, an_error_with_on_loss_resync_starts_the_model_over)
{
	static const uint16_t one[] = {PROTO_E_HOLE};
	uint64_t t = rte_get_tsc_cycles();

	kvss.cfg.driver.on_loss = KVSS_LOSS_RESYNC;
	bring_up(t);
	errors(1, one, 1, t + 1);
	cr_assert_eq(d->st.errors_by_code[PROTO_E_HOLE], 1);
	cr_assert_eq(d->st.resyncs, 1);
	cr_assert_neq(d->model_epoch[0], DRIVER_EPOCH);
	cr_assert_not(sh->up);
}

Test(drv_rx, a_refill_done_naming_no_refill_of_ours_is_counted_and_changes_nothing)
{
	struct proto_refill_done rd = {.refill_id = 0xdead0001, .tokens = 64, .status = PROTO_E_RANGE,
				       .bytes = 0};
	struct proto_builder b;
	uint64_t t = rte_get_tsc_cycles();

	kvss.cfg.driver.on_loss = KVSS_LOSS_RESYNC; /* a failed refill of ours would restart the model */
	bring_up(t);
	begin(&b, PROTO_T_REFILL_DONE, 0, sh->ref->id, sh->epoch, 0, 0);
	cr_assert_eq(proto_build_refill_done(&b, &rd), 0);
	deliver(&b, t + 1);
	cr_assert_eq(d->st.refill_done, 1);
	cr_assert_eq(d->st.resyncs, 0, "not a refill the wafer waits for: nothing to resync");
	cr_assert_eq(d->model_epoch[0], DRIVER_EPOCH);
	cr_assert(sh->up);
}

Test(drv_rx, an_ack_past_what_was_sent_is_counted_and_ignored)
{
	struct proto_ack a = {.cum_seq = 5, .recv_seq = 5};
	struct proto_builder b;
	uint64_t t = rte_get_tsc_cycles();

	bring_up(t);
	cr_assert_eq(sh->stream.acked, 0, "nothing sent yet");
	begin(&b, PROTO_T_ACK, 0, sh->ref->id, sh->epoch, 0, 0);
	cr_assert_eq(proto_build_ack(&b, &a), 0);
	deliver(&b, t + 1);
	cr_assert_eq(d->st.acks, 1);
	cr_assert_eq(sh->stream.st.bogus_acks, 1);
	cr_assert_eq(sh->stream.acked, 0, "an ACK of what was never sent moves nothing");
	cr_assert_eq(sh->evict_acked, 0);
}

Test(drv_rx, a_frame_that_does_not_parse_is_dropped_by_reason)
{
	struct proto_builder b;
	struct rte_mbuf *m;
	uint64_t t = rte_get_tsc_cycles(), drops = d->st.rx_drops;
	uint64_t truncated = kvss.stats[rte_lcore_id()].drops[PROTO_R_TRUNCATED];
	struct proto_addr a;
	uint32_t len;

	bring_up(t);
	begin(&b, PROTO_T_ACK, 0, sh->ref->id, sh->epoch, 0, 0);
	len = proto_build_end(&b);
	memset(&a, 0, sizeof(a));
	a.src_ip = sh->ref->addr.ipv4;
	a.dst_ip = kvss.cfg.driver.addr.ipv4;
	a.src_port = a.dst_port = kvss.cfg.udp.ctrl;
	m = proto_mbuf_frame(kvss.pool, &a, payload, len);
	cr_assert_not_null(m);
	/* A byte short: its headers say more than the frame holds. */
	cr_assert_eq(rte_pktmbuf_trim(m, 1), 0);
	drv_receive(d, m, t + 1);
	rte_pktmbuf_free(m);
	cr_assert_eq(d->st.rx_drops, drops + 1);
	cr_assert_eq(kvss.stats[rte_lcore_id()].drops[PROTO_R_TRUNCATED], truncated + 1,
		     "its reason: shorter than its headers say");
	cr_assert_eq(d->st.acks, 0);
	cr_assert_eq(sh->last_rx, t, "not heard: it did not parse");
}

/* ---- L2_INVENTORY: a restarted shard's second tier taken back (l2.c) ----------------- */

static char l2cfg[64];

/* The same example, its shard with a second tier of a million tokens. */
static void
setup_l2(void)
{
	FILE *in = fopen(CFG, "r"), *out;
	char line[512];
	int fd, edits = 0;

	snprintf(l2cfg, sizeof(l2cfg), "/tmp/kvss-test-drv-l2-XXXXXX");
	fd = mkstemp(l2cfg);
	cr_assert_not_null(in);
	cr_assert_geq(fd, 0);
	out = fdopen(fd, "w");
	while (fgets(line, sizeof(line), in) != NULL) {
		char *at = strstr(line, "capacity_tokens = [100000]; }");

		if (at != NULL) {
			fprintf(out, "%.*scapacity_tokens = [100000]; l2_tokens = [1000000]; }%s",
				(int)(at - line), line, at + strlen("capacity_tokens = [100000]; }"));
			edits++;
		} else {
			fputs(line, out);
		}
	}
	fclose(in);
	fclose(out);
	cr_assert_eq(edits, 1, "the example's one shard found");
	d = test_driver_loaded(l2cfg, DRIVER_EPOCH);
	cr_assert_eq(kvss_driver_init(d), 0);
	cr_assert(drv_l2_model(0));
	sh = &d->sh[0];
	status_flags = PROTO_STATUS_F_L2;
}

static void
teardown_l2(void)
{
	test_driver_stop(d);
	unlink(l2cfg);
	status_flags = 0;
}

TestSuite(drv_l2, .init = setup_l2, .fini = teardown_l2);

#define ISO 0x77aa77aa77aa77aaull

/* One frame of shard 0's inventory: @p n columns from index @p first of @p total. */
static void
inventory(uint32_t total, uint32_t first, const struct proto_l2col *c, unsigned int n, uint64_t tsc)
{
	struct proto_builder b;
	unsigned int i;

	begin(&b, PROTO_T_L2_INVENTORY, 0, sh->ref->id, sh->epoch, 0, 0);
	cr_assert_eq(proto_build_l2_inventory_hdr(&b, total, first), 0);
	for (i = 0; i < n; i++)
		cr_assert_eq(proto_build_l2_inventory_col(&b, &c[i]), 0);
	deliver(&b, tsc);
}

static struct proto_l2col
col(uint64_t key, uint64_t parent, uint32_t start)
{
	return (struct proto_l2col){.key = key, .parent = parent, .isolation_id = ISO,
				    .first_use_ns = drv_wall_ns(), .start_token_idx = start,
				    .num_tokens = 64, .cache_id = 0};
}

Test(drv_l2, an_inventory_in_order_is_taken_back_parents_first_and_the_rest_let_go)
{
	/* Listed child first, and its key sorts first too (the inventory is
	 * sorted by key before it is walked); a column whose parent nobody
	 * holds; one listed twice. */
	struct proto_l2col first[2] = {col(0x1, 0xa0, 64), col(0xa0, ISO, 0)};
	struct proto_l2col rest[3] = {col(0xc, 0xd, 128), col(0xe, ISO, 0), col(0xe, ISO, 0)};
	struct prefixcache_stats ps;
	uint64_t t = rte_get_tsc_cycles();

	bring_up(t);
	cr_assert(sh->has_l2, "its STATUS says it has a second tier");
	cr_assert_eq(d->fatal, 0);
	inventory(5, 0, first, 2, t + 1);
	cr_assert_eq(d->st.l2_inventory_cols, 2);
	cr_assert_not(sh->inv_done);
	/* A frame past a gap (its first is not what came so far): the list waits for the next HELLO. */
	inventory(5, 3, rest + 1, 2, t + 2);
	cr_assert_eq(d->st.stale, 1);
	cr_assert_eq(d->st.l2_inventory_cols, 2);
	inventory(5, 2, rest, 3, t + 3);
	cr_assert_eq(d->st.l2_inventory_cols, 5);
	cr_assert(sh->inv_done, "all 5 listed");
	cr_assert(d->l2_pending[0], "a model with a second tier waits for its shards' inventories");
	drv_l2_adopt_ready(d, t + 4);
	cr_assert_not(d->l2_pending[0]);
	cr_assert_eq(d->st.l2_adopted_cols, 2, "0xa0, then its child 0x1 (listed and sorted before it)");
	cr_assert_eq(d->st.l2_refused_cols, 2, "0xc (its parent held by none), 0xe (listed twice)");
	cr_assert_eq(d->st.l2_del_cols, 3, "an L2_DELETE for 0xc and for each copy of 0xe");
	prefixcache_stats(d->pc, &ps);
	cr_assert_eq(ps.l2_adopted_tokens, 128);
	cr_assert_eq(ps.l2_stored_tokens, 128);
}

/* Report @p seq of shard 0: one L2_GONE record per key of @p keys (cache 0). */
static void
gone(uint64_t seq, const uint64_t *keys, unsigned int n, uint64_t tsc)
{
	struct proto_builder b;
	unsigned int i;

	begin(&b, PROTO_T_L2_DONE, 0, sh->ref->id, sh->epoch, seq, 0);
	for (i = 0; i < n; i++) {
		struct proto_l2done g = {.key = keys[i], .isolation_id = ISO, .cache_id = 0,
					 .op = PROTO_L2OP_L2_GONE, .status = PROTO_E_L2_FAILED};

		cr_assert_eq(proto_build_l2_done(&b, &g), 0);
	}
	deliver(&b, tsc);
}

Test(drv_l2, a_column_a_shard_let_go_under_a_retired_key_is_forgotten_before_it_is_asked_for)
{
	struct proto_l2col cols[3] = {col(0xa0, ISO, 0), col(0x1, 0xa0, 64), col(0xe, ISO, 0)};
	static const uint64_t first[2] = {0xa0, 0xbad}, again[1] = {0xa0}, listed[1] = {0xe};
	struct proto_l2done stranger = {.key = 0xa0, .isolation_id = 0xdeadbeef, .cache_id = 0,
					.op = PROTO_L2OP_L2_GONE, .status = PROTO_E_L2_FAILED};
	struct prefixcache_stats ps;
	struct proto_builder b;
	uint64_t t = rte_get_tsc_cycles(), del;
	size_t orgs;

	bring_up(t);
	inventory(3, 0, cols, 3, t + 1);
	/* 0xe let go after it was listed, before the inventory is taken back:
	 * not taken back, and nothing to delete (the shard let it go). */
	del = d->st.l2_del_cols;
	gone(1, listed, 1, t + 2);
	drv_l2_adopt_ready(d, t + 2);
	cr_assert_eq(d->st.l2_adopted_cols, 2, "0xa0 and 0x1; not 0xe, let go since it was listed");
	cr_assert_eq(d->st.l2_refused_cols, 0);
	cr_assert_eq(d->st.l2_del_cols, del);
	/* 0xa0 let go, and a key the driver never knew (a lying or late shard). */
	gone(2, first, 2, t + 3);
	cr_assert_eq(sh->report_next, 3, "taken as report 2");
	cr_assert_eq(d->st.l2_gone_recs, 3);
	cr_assert_eq(d->st.l2_gone_cols, 1, "0xa0 forgotten; the unknown key changes nothing");
	prefixcache_stats(d->pc, &ps);
	cr_assert_eq(ps.l2_stored_tokens, 64, "0xa0's 64 tokens no longer counted as held");
	cr_assert_eq(d->st.l2_del_cols, del + 1,
		     "one L2_DELETE of 0xa0, to the shard itself (a copy written again since goes "
		     "too); none for the unknown key");
	cr_assert_eq(d->st.l2_done + d->st.l2_failed + d->st.l2_up_failed_cols +
			     d->st.l2_down_failed_cols, 0, "not an answer to anything asked");
	/* Another cache's record of the same column: nothing more to forget. */
	gone(3, again, 1, t + 4);
	cr_assert_eq(d->st.l2_gone_recs, 4);
	cr_assert_eq(d->st.l2_gone_cols, 1);
	/* An organization the driver never saw: no entry made for it. */
	orgs = prefixcache_orgs(d->pc, NULL, 0);
	begin(&b, PROTO_T_L2_DONE, 0, sh->ref->id, sh->epoch, 4, 0);
	cr_assert_eq(proto_build_l2_done(&b, &stranger), 0);
	deliver(&b, t + 5);
	cr_assert_eq(d->st.l2_gone_recs, 5);
	cr_assert_eq(prefixcache_orgs(d->pc, NULL, 0), orgs, "a shard's word made an organization");
	cr_assert_eq(d->fatal, 0);
	cr_assert_eq(d->st.resyncs + d->st.shard_restarts, 0, "the model goes on");
}

/*
 * An L2_GONE may come before the inventory frame that lists its column
 * (reports and the inventory are separate streams): the column is not
 * taken back either, and what hangs on it has no parent to hang on.
 */
Test(drv_l2, a_column_let_go_before_it_is_listed_is_not_taken_back)
{
	struct proto_l2col cols[3] = {col(0xa0, ISO, 0), col(0x1, 0xa0, 64), col(0xe, ISO, 0)};
	static const uint64_t early[1] = {0xa0};
	uint64_t t = rte_get_tsc_cycles(), del;

	bring_up(t);
	del = d->st.l2_del_cols;
	gone(1, early, 1, t + 1);
	cr_assert_eq(d->st.l2_gone_recs, 1);
	cr_assert_eq(d->st.l2_gone_cols, 0, "not held yet: nothing to forget");
	inventory(3, 0, cols, 3, t + 2);
	drv_l2_adopt_ready(d, t + 3);
	cr_assert_eq(d->st.l2_adopted_cols, 1, "0xe alone; not 0xa0, let go before it was listed");
	cr_assert_eq(d->st.l2_refused_cols, 1, "0x1: its parent is held by none");
	cr_assert_eq(d->st.l2_del_cols, del + 1, "an L2_DELETE for 0x1, none for 0xa0 (let go)");
	cr_assert_eq(d->fatal, 0);
	cr_assert_eq(d->st.resyncs + d->st.shard_restarts, 0, "the model goes on");
}

Test(drv_l2, a_shard_without_the_second_tier_its_model_counts_on_stops_the_driver)
{
	uint64_t t = rte_get_tsc_cycles();

	status_flags = 0;
	status(SHARD_EPOCH, d->model_epoch[0], 0, 1000, t);
	cr_assert_eq(d->fatal, 2, "a configuration error: the driver stops, naming the key");
	cr_assert_not(sh->has_l2);
}

/* ---- The driver's own absence (driver.c, drv_absent) ----------------------------------- */

Test(drv_rx, a_jump_of_the_clock_is_neither_the_shards_silence_nor_the_runs_time)
{
	uint64_t t = rte_get_tsc_cycles(), hz = d->hz;
	/* What a VM restored on another host did here: 89,094 s of TSC in a
	 * gap that CLOCK_MONOTONIC saw as 2 s (and 10 ms of turns before it). */
	uint64_t from = t + hz / 100, gap = 89094 * hz, jump = gap - 2 * hz, before, ran;

	status(SHARD_EPOCH, DRIVER_EPOCH, 40, 1000, t);
	cr_assert(sh->up);
	d->settle_at = t;
	before = drv_now_ns(d, t);
	drv_absent(d, from, from + gap, jump);
	ran = drv_now_ns(d, from + gap) - before;
	cr_assert(ran > 2010000000ull - 1000 && ran < 2010000000ull + 1000,
		  "the run's clock took the 2 s that passed and the 10 ms before: %" PRIu64 " ns", ran);
	cr_assert_eq(sh->last_rx, t + gap, "its last word moved on by the gap: 10 ms of silence");
	cr_assert_eq(d->settle_at, 0, "the settle starts over");
	cr_assert_eq(d->st.driver_absent, 1);
	cr_assert_eq(d->st.driver_absent_us, 2000000, "the time that passed, the jump not counted");
}

Test(drv_rx, a_shard_never_heard_stays_never_heard_through_an_absence)
{
	uint64_t t = rte_get_tsc_cycles();

	cr_assert_eq(sh->last_rx, 0);
	drv_absent(d, t, t + 3 * d->hz, 0);
	cr_assert_eq(sh->last_rx, 0, "telemetry still says never heard");
	cr_assert_eq(d->st.driver_absent_us, 3000000);
}

Test(drv_rx, a_driver_stopped_before_its_start_gives_its_shards_the_time_it_did_not_run)
{
	uint64_t t = rte_get_tsc_cycles(), deadline = t + d->hz;

	d->started = false;
	drv_gap(d, t, t + 5 * d->hz, &deadline);
	cr_assert_eq(deadline, t + 6 * d->hz, "5 s stopped: the deadline 5 s later");
	cr_assert_eq(d->st.driver_absent, 0, "nothing to leave out before the run");
	d->started = true;
	drv_gap(d, t, t + d->hz, &deadline);
	cr_assert_eq(deadline, t + 6 * d->hz, "started: the deadline is past use");
	cr_assert_eq(d->st.driver_absent, 1);
}

/*
 * The jump itself, from the pair of clocks: both moved 5 s since they were
 * read (a stop: all of it counted), then the TSC 100 s and CLOCK_MONOTONIC
 * 2 s (a VM restored on another host: 2 s counted, the run's clock 2 s on).
 * Catches: a stop taken for a jump (its time dropped from the run's clock
 * and from driver_absent_us), a jump taken for time that passed.
 */
Test(drv_rx, a_jump_is_what_the_tsc_ran_ahead_of_the_monotonic_clock)
{
	uint64_t hz = d->hz, t = rte_get_tsc_cycles(), deadline = 0, before, ran;

	d->started = true;
	d->clk_tsc = t - 5 * hz;
	d->clk_mono_ns = mono_ns() - 5000000000ull;
	drv_gap(d, t - 5 * hz, t, &deadline);
	cr_assert(d->st.driver_absent_us > 4950000 && d->st.driver_absent_us < 5050000,
		  "a stop: %" PRIu64 " us counted", d->st.driver_absent_us);

	t = rte_get_tsc_cycles();
	d->clk_tsc = t - 100 * hz;
	d->clk_mono_ns = mono_ns() - 2000000000ull;
	before = drv_now_ns(d, t - 100 * hz);
	drv_gap(d, t - 100 * hz, t, &deadline);
	ran = drv_now_ns(d, t) - before;
	cr_assert(d->st.driver_absent_us > 6950000 && d->st.driver_absent_us < 7050000,
		  "a jump: 2 s more counted, not 100: %" PRIu64 " us", d->st.driver_absent_us);
	cr_assert(ran > 1950000000ull && ran < 2050000000ull, "the run's clock: %" PRIu64 " ns",
		  ran);
	cr_assert_eq(d->st.driver_absent, 2);
}
