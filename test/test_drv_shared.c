/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The driver's shared level (shared.c; PROTOCOL.md section 10), driven
 * directly: its generations, lookups, records and the shards' SH_DOWN and
 * SH_UP answers, on the whole driver as the program makes it (EAL with one
 * net_ring port, kvss_driver_new/load/init) over a cluster in this
 * process's memory (test/rados_mem.c, linked in place of librados). The
 * configuration is config/all-in-one.cfg's shape with a second shard in the
 * model and a shared level (written to a temporary folder, beside an empty
 * Ceph configuration). Each test sets what the cluster holds, calls
 * drv_sh_* as the loop and the receive path do, at times it chooses, and
 * checks the level's counters (drv_sh_stats) and the objects left to the
 * exact count.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <rte_ethdev.h>
#include <rte_mbuf.h>

#include "drv_fixture.h"
#include "pc_priv.h" /* the staged column's first use, read back */
#include "kvss.h"
#include "rados_mem.h"

#define DRIVER_EPOCH 0x0d0d0d0du
#define SEC 1000000000ull
#define COL 64 /* driver.column */

static const char cfg_text[] =
	"role = \"all\";\n"
	"poll_mode = \"idle\";\n"
	"mtu = 9000;\n"
	"lcores = { ingest = [1]; refill = []; control = 0; };\n"
	"shard = { id = 0; model = 0;\n"
	"  address = { mac = \"02:00:00:00:01:00\"; ipv4 = \"10.99.0.10\"; };\n"
	"  wafer = { mac = \"02:00:00:00:00:01\"; ipv4 = \"10.99.0.1\"; };\n"
	"  caches = ( { id = 0; bytes_per_token = 256; buffers = 2; capacity_tokens = 100000; } );\n"
	"};\n"
	"driver = {\n"
	"  address = { mac = \"02:00:00:00:00:01\"; ipv4 = \"10.99.0.1\"; };\n"
	"  column = 64;\n"
	"  models = ( { name = \"demo-model\"; caches = ( { id = 0; rule = \"full\"; } );\n"
	"    shards = (\n"
	"      { id = 0; address = { mac = \"02:00:00:00:01:00\"; ipv4 = \"10.99.0.10\"; };\n"
	"        bytes_per_token = [256]; capacity_tokens = [100000]; },\n"
	"      { id = 1; address = { mac = \"02:00:00:00:01:01\"; ipv4 = \"10.99.0.11\"; };\n"
	"        bytes_per_token = [256]; capacity_tokens = [100000]; } ); } );\n"
	"};\n"
	"wafer = { trace = \"\"; generate = 200; max_inflight = 8; };\n"
	/* One request looked up at a time; lookups wait up to a second; the
	 * generations read every second; a second of failures makes the level
	 * unavailable; columns go down as the second tier takes them ("l2"). */
	"shared = { conf = \"%s\"; pool = \"kvss\"; op_timeout_ms = 1000; deadline_ms = 1000;\n"
	"  generation_ms = 1000; lookahead = 1; max_columns = 8; admit = \"l2\"; };\n";

static char dir[64], conf[96], cfg[96];
static struct drv *d;
/* The level's counters as they are now (drv_sh_stats copies the cluster's in). */
#define ST (drv_sh_stats(d))

/* The temporary folder, its Ceph configuration (empty) and the configuration; EAL; loaded. */
static void
prepare(void)
{
	FILE *f;

	snprintf(dir, sizeof(dir), "/tmp/kvss_drvsh_XXXXXX");
	cr_assert_not_null(mkdtemp(dir));
	snprintf(conf, sizeof(conf), "%s/ceph.conf", dir);
	snprintf(cfg, sizeof(cfg), "%s/driver.cfg", dir);
	cr_assert_not_null(f = fopen(conf, "w"));
	fclose(f);
	cr_assert_not_null(f = fopen(cfg, "w"));
	fprintf(f, cfg_text, conf);
	fclose(f);
	d = test_driver_loaded(cfg, DRIVER_EPOCH);
}

/* kvss_driver_init, and what every case takes for granted. */
static void
start(void)
{
	cr_assert_eq(kvss_driver_init(d), 0);
	cr_assert_eq(d->nsh, 2);
	cr_assert_eq(d->nshards[0], 2);
	cr_assert_eq(kvss.cfg.driver.pc.model[0].num_caches, 1);
	cr_assert_eq(kvss.cfg.driver.pc.column, COL);
	cr_assert_eq(d->model_epoch[0], DRIVER_EPOCH);
	cr_assert_eq(d->fatal, 0);
}

/* As start(), and both shards said (STATUS bit 2) they reach the level. */
static void
setup(void)
{
	prepare();
	start();
	cr_assert_eq(ST->off_at_start, 0);
	cr_assert_not(drv_sh_on(d, 0), "no shard has said it reaches the level yet");
	d->sh[0].has_shared = d->sh[1].has_shared = true;
	cr_assert(drv_sh_on(d, 0));
}

static void
teardown(void)
{
	char f[160];

	test_driver_stop(d);
	snprintf(f, sizeof(f), "rm -rf %s", dir);
	if (dir[0] != '\0' && system(f) != 0)
		cr_log_warn("%s left behind", dir);
}

TestSuite(drv_shared, .init = setup, .fini = teardown);

/* As setup(), the next 8 requests looked up with each (shared.lookahead, read at start). */
static void
setup_ahead(void)
{
	prepare();
	kvss.cfg.shared.lookahead = 8;
	start();
	d->sh[0].has_shared = d->sh[1].has_shared = true;
	cr_assert(drv_sh_on(d, 0));
}

TestSuite(drv_shared_ahead, .init = setup_ahead, .fini = teardown);
/* Cases that set the cluster up before the driver starts (each its own .init). */
TestSuite(drv_shared_start, .fini = teardown);

/* ---- What a replica writes ---------------------------------------------------------- */

/* Model 0's geometry as every replica computes it: 2 shards of one cache of 256 bytes a token. */
static uint32_t
layout(void)
{
	uint32_t bpt[2] = {256, 256};

	return shared_layout(0, "demo-model", 2, COL, 2, bpt);
}

/* Column @p key's record name and namespace in organization @p iso under generations 0 and 0. */
static uint64_t
record_name(uint64_t iso, uint64_t key, char *ns, char *name)
{
	uint64_t id = shared_object_id(iso, key, 0, 0, layout());

	shared_ns(ns, iso);
	shared_record_name(name, id);
	return id;
}

/*
 * The record another replica wrote for column @p j (token @p j * COL) of
 * a prompt of organization @p iso whose columns' keys are @p keys, first
 * used at wall-clock @p first_use: into the cluster.
 */
static void
put_record(uint64_t iso, const uint64_t *keys, uint32_t j, uint64_t first_use)
{
	char ns[SHARED_NS_MAX], name[SHARED_NAME_MAX];
	uint8_t b[SHARED_HDR_LEN];
	uint64_t id = record_name(iso, keys[j], ns, name);
	struct shared_hdr h = {.kind = SHARED_RECORD, .org = iso, .key = keys[j],
			       .parent = j ? keys[j - 1] : iso, .object_id = id,
			       .first_use_ns = first_use, .written_ns = first_use,
			       .layout = layout(), .model = 0, .shard = 2, .cache = 1,
			       .start = j * COL, .tokens = COL};

	shared_hdr_encode(b, &h, NULL);
	rmem_write(ns, name, b, sizeof(b));
}

/* ---- Driving it ----------------------------------------------------------------------- */

/* The generations read at @p now (due): sent, then answered. */
static void
gen_round(uint64_t now)
{
	drv_sh_poll(d, now);
	drv_sh_poll(d, now + 1);
}

/* A request with at least @p cols whole columns: its index, its keys in @p keys (8 at most). */
static uint32_t
request_with(uint32_t cols, uint64_t *keys, uint32_t *n)
{
	uint32_t r, known;

	for (r = 0; r < d->nreq; r++) {
		const struct wl_req *q = &d->wl.r[r];
		struct prefixcache_request rq = {.isolation_id = q->iso, .tokens = q->tokens,
						 .num_tokens = q->n, .cache_length_allowed = q->allowed,
						 .first_multimodal = q->first_mm};
		uint64_t k[16];

		*n = prefixcache_columns(d->pc, 0, &rq, k, 16, &known);
		if (known == 0 && *n >= cols) {
			if (*n > 8)
				*n = 8; /* shared.max_columns */
			memcpy(keys, k, *n * sizeof(k[0]));
			return r;
		}
	}
	cr_assert_fail("no request of %u columns in the workload", cols);
	return 0;
}

/*
 * Request @p r's lookup, from its first ask to its start: its organization's
 * generation read, its records read, what was found staged. True: it
 * started (every step at 1 ns from the last, far within the deadline).
 */
static bool
look_up(uint32_t r, uint64_t t)
{
	cr_assert_not(drv_sh_request_ready(d, r, t), "its organization's generation is read first");
	drv_sh_poll(d, t + 1);
	cr_assert_not(drv_sh_request_ready(d, r, t + 2), "its records are being read");
	drv_sh_poll(d, t + 3);
	return drv_sh_request_ready(d, r, t + 4);
}

/* Organization @p iso's generation read (the first ask of a name sends the read). */
static void
know_org(uint64_t iso, uint64_t t)
{
	struct prefixcache_l2col c = {.key = 1, .isolation_id = iso};
	struct proto_l2col o;

	cr_assert_not(drv_sh_name(d, 0, &c, &o), "not known before its generation is read");
	drv_sh_poll(d, t);
	cr_assert(drv_sh_name(d, 0, &c, &o));
}

/* ---- Generations ------------------------------------------------------------------------ */

Test(drv_shared, a_generation_read_lower_absent_or_garbage_is_refused_and_the_highest_kept)
{
	uint64_t t = 10 * SEC;

	rmem_write_text("", SHARED_GEN_OBJECT, "5\n");
	gen_round(t);
	cr_assert_eq(ST->generation, 5, "read every generation_ms");
	cr_assert_eq(ST->generations_seen, 1, "0 -> 5: what was staged is forgotten");

	rmem_write_text("", SHARED_GEN_OBJECT, "3\n"); /* rewritten lower */
	gen_round(t + SEC);
	cr_assert_eq(ST->generation, 5, "a generation never goes down");
	cr_assert_eq(ST->generation_refused, 1);
	cr_assert_eq(ST->generation_bad, 0);

	rmem_remove("", SHARED_GEN_OBJECT); /* removed: it would read 0 */
	gen_round(t + 2 * SEC);
	cr_assert_eq(ST->generation, 5);
	cr_assert_eq(ST->generation_refused, 2);
	cr_assert_eq(ST->generation_bad, 0);

	rmem_write_text("", SHARED_GEN_OBJECT, "five\n"); /* not a generation */
	gen_round(t + 3 * SEC);
	cr_assert_eq(ST->generation, 5);
	cr_assert_eq(ST->generation_refused, 3);
	cr_assert_eq(ST->generation_bad, 1);
	rmem_write_text("", SHARED_GEN_OBJECT, "4294967295\n"); /* above SHARED_GEN_MAX */
	gen_round(t + 4 * SEC);
	cr_assert_eq(ST->generation_bad, 2);

	rmem_write_text("", SHARED_GEN_OBJECT, "7\n"); /* raised: kvss-shared reset */
	gen_round(t + 5 * SEC);
	cr_assert_eq(ST->generation, 7);
	cr_assert_eq(ST->generations_seen, 2);
	cr_assert_eq(ST->generation_refused, 4);
	cr_assert_eq(ST->unavailable_times, 0, "refusals are answers: the cluster works");
}

/* The cluster before the driver starts: a global generation that is not one. */
static void
setup_garbage_generation(void)
{
	prepare();
	rmem_write_text("", SHARED_GEN_OBJECT, "garbage\n");
	start();
	d->sh[0].has_shared = d->sh[1].has_shared = true;
}

Test(drv_shared_start, a_garbage_global_generation_at_start_leaves_the_level_off_and_the_driver_running,
     .init = setup_garbage_generation)
{
	struct prefixcache_l2col c = {.key = 0xc1, .isolation_id = 9, .tokens = COL};
	struct proto_l2col o = {0};

	cr_assert_eq(ST->off_at_start, 1);
	cr_assert_not(drv_sh_on(d, 0), "off, though every shard reaches it");
	cr_assert_not(drv_sh_down(d, 0, &c, &o), "nothing goes down");
	cr_assert(drv_sh_request_ready(d, 0, SEC), "requests start without lookups");
	drv_sh_poll(d, 2 * SEC);
	cr_assert_eq(ST->lookups, 0);
	cr_assert_eq(rmem_submitted(0), 0, "no op after the start's read");
	cr_assert_eq(d->fatal, 0, "the driver runs");
}

/* A record written under generation 5 while the generation object says 3. */
static void
setup_generation_behind_records(void)
{
	uint64_t keys[1] = {0xbeef};
	char ns[SHARED_NS_MAX], name[SHARED_NAME_MAX];
	uint8_t b[SHARED_HDR_LEN];
	struct shared_hdr h = {.kind = SHARED_RECORD, .org = 9, .key = keys[0], .parent = 9,
			       .gen_global = 5, .first_use_ns = shared_wall_ns() - SEC,
			       .layout = 1, .shard = 2, .cache = 1, .tokens = COL};

	prepare();
	rmem_write_text("", SHARED_GEN_OBJECT, "3\n");
	h.object_id = shared_object_id(9, keys[0], 5, 0, 1);
	shared_ns(ns, 9);
	shared_record_name(name, h.object_id);
	shared_hdr_encode(b, &h, NULL);
	rmem_write(ns, name, b, sizeof(b));
	start();
}

Test(drv_shared_start, a_global_generation_below_its_records_at_start_leaves_the_level_off,
     .init = setup_generation_behind_records)
{
	cr_assert_eq(ST->off_at_start, 1, "the evidence scan read a record of generation 5");
	cr_assert_eq(rmem_submitted(SHARED_OP_GET), 1, "that one record read");
	cr_assert_eq(rmem_count(NULL), 2, "nothing deleted");
	cr_assert_eq(d->fatal, 0);
}

/* ---- Lookups ------------------------------------------------------------------------------ */

Test(drv_shared, a_record_found_and_checked_is_staged)
{
	uint64_t keys[8], wall = shared_wall_ns();
	uint32_t n, r = request_with(3, keys, &n);

	put_record(d->wl.r[r].iso, keys, 0, wall - SEC);
	put_record(d->wl.r[r].iso, keys, 1, wall - SEC);
	cr_assert(look_up(r, SEC));
	cr_assert_eq(ST->lookups, 1);
	cr_assert_eq(ST->lookup_cols, n, "every column past what the driver holds");
	cr_assert_eq(ST->lookup_found_cols, 2, "the two with a record");
	cr_assert_eq(ST->staged_cols, 2, "staged in token order, parents first");
	cr_assert_eq(ST->records_bad, 0);
	cr_assert_eq(ST->found_expired, 0);
	cr_assert_eq(ST->lookup_errors, 0, "a missing record is a miss, not an error");
	cr_assert_eq(ST->started, 1);
	cr_assert_eq(ST->waits, 1, "held back for its lookup");
	cr_assert_eq(rmem_count(NULL), 2, "nothing deleted");
}

/*
 * A column another replica first used two minutes before this driver's run
 * began keeps that first use when staged (its TTLs count from it, and its
 * slices, asked back, are asked for it). With the library's time 0 at the
 * run's start, it was taken as first used at the start: the slices were
 * then refused as older than their record (STALE) once the writer's run was
 * a minute behind (make demo-shared, the whole trace: 473,392 tokens lost).
 */
Test(drv_shared, a_column_first_used_before_the_run_keeps_its_first_use)
{
	uint64_t keys[8], wall = shared_wall_ns(), first = wall - 120 * SEC, now, got = 0;
	uint32_t n, r = request_with(2, keys, &n), i;

	drv_clock_start(d, rte_rdtsc());
	now = drv_now_ns(d, rte_rdtsc());
	put_record(d->wl.r[r].iso, keys, 0, first);
	cr_assert(look_up(r, now));
	cr_assert_eq(ST->staged_cols, 1);
	for (i = 0; i < d->pc->l2cap; i++)
		if (d->pc->l2[i].shared && d->pc->l2[i].hash == keys[0])
			got = d->sink.wall_base_ns + (uint64_t)d->pc->l2[i].first_used * TICK_NS;
	cr_assert_neq(got, 0, "the staged column is in the library");
	cr_assert(got + TICK_NS > first && got < first + TICK_NS,
		  "staged as first used %.1f s from its record's first use", ((double)got - (double)first) / 1e9);
}

Test(drv_shared, a_bad_record_is_deleted)
{
	uint64_t keys[8], wall = shared_wall_ns(), iso;
	uint32_t n, r = request_with(2, keys, &n);
	char ns[SHARED_NS_MAX], name[SHARED_NAME_MAX];
	struct rmem_obj *x;

	iso = d->wl.r[r].iso;
	put_record(iso, keys, 0, wall - SEC);
	record_name(iso, keys[0], ns, name);
	x = rmem_find(ns, name);
	x->b[SHARED_HDR_LEN - 1] ^= 1; /* rotted: its checksum fails */
	cr_assert(look_up(r, SEC));
	cr_assert_eq(ST->lookup_found_cols, 0);
	cr_assert_eq(ST->staged_cols, 0);
	cr_assert_eq(ST->records_bad, 1);
	cr_assert_eq(ST->records_deleted, 1);
	cr_assert_eq(rmem_nops(), 1, "its DEL in flight");
	drv_sh_poll(d, SEC + 5);
	cr_assert_null(rmem_find(ns, name), "dropped from the shared level");
	cr_assert_eq(rmem_count(NULL), 0);
}

Test(drv_shared, a_record_of_another_column_is_deleted)
{
	uint64_t keys[8], wall = shared_wall_ns(), iso;
	uint32_t n, r = request_with(2, keys, &n);
	char ns[SHARED_NS_MAX], name[SHARED_NAME_MAX], ns1[SHARED_NS_MAX], name1[SHARED_NAME_MAX];
	struct rmem_obj *x;

	iso = d->wl.r[r].iso;
	/* Column 1's record, well made, found under column 0's name. */
	put_record(iso, keys, 1, wall - SEC);
	record_name(iso, keys[1], ns1, name1);
	record_name(iso, keys[0], ns, name);
	x = rmem_find(ns1, name1);
	rmem_write(ns, name, x->b, x->len);
	cr_assert(look_up(r, SEC));
	cr_assert_eq(ST->records_bad, 1);
	cr_assert_eq(ST->bad[SHARED_BAD_IDENTITY], 1, "it names another column");
	cr_assert_eq(ST->lookup_found_cols, 1, "column 1's own record is found");
	cr_assert_eq(ST->staged_cols, 0, "not staged without its parent");
	drv_sh_poll(d, SEC + 5);
	cr_assert_null(rmem_find(ns, name));
	cr_assert_not_null(rmem_find(ns1, name1), "column 1's own record kept");
}

Test(drv_shared, an_expired_record_is_not_used)
{
	uint64_t keys[8], wall = shared_wall_ns(), iso;
	uint32_t n, r = request_with(2, keys, &n);

	iso = d->wl.r[r].iso;
	kvss.cfg.driver.pc.ttl_first_ns = 3600 * SEC; /* first use at most an hour ago */
	put_record(iso, keys, 0, wall - 2 * 3600 * SEC);
	cr_assert(look_up(r, SEC));
	cr_assert_eq(ST->found_expired, 1);
	cr_assert_eq(ST->lookup_found_cols, 0);
	cr_assert_eq(ST->staged_cols, 0);
	cr_assert_eq(ST->records_bad, 0, "not a bad record: kvss-shared sweep deletes it");
	cr_assert_eq(ST->records_deleted, 0);
	cr_assert_eq(rmem_count(NULL), 1);
}

/* ---- Down: every shard's slices, then the record ------------------------------------------- */

/* Column @p key, a prompt's first of organization 9, goes down: true when sent. */
static bool
down(uint64_t key, struct proto_l2col *o)
{
	struct prefixcache_l2col c = {.key = key, .parent = 9, .isolation_id = 9, .start = 0,
				      .tokens = COL};

	memset(o, 0, sizeof(*o));
	o->first_use_ns = shared_wall_ns() - SEC;
	return drv_sh_down(d, 0, &c, o);
}

/* Shard @p k's answer to column @p key's SH_DOWN (op 3) or SH_UP (op 4). */
static void
answer(uint16_t k, uint8_t op, uint64_t key, uint16_t status)
{
	struct proto_l2done done = {.key = key, .isolation_id = 9, .op = op, .status = status,
				    .cache_id = 0};

	drv_sh_done(d, &d->sh[k], &done);
}

Test(drv_shared, sh_down_answers_from_every_shard_lead_to_an_exclusive_create_record_write)
{
	char ns[SHARED_NS_MAX], name[SHARED_NAME_MAX], ns2[SHARED_NS_MAX], name2[SHARED_NAME_MAX];
	static const uint8_t theirs[SHARED_HDR_LEN] = {1, 2, 3};
	struct shared_hdr h;
	struct proto_l2col o;
	struct rmem_obj *x;

	know_org(9, SEC);
	cr_assert(down(0xd1, &o));
	cr_assert_eq(ST->down_cols, 1);
	cr_assert_eq(o.object_id, record_name(9, 0xd1, ns, name), "named under generations 0, 0");
	cr_assert_eq(o.layout, layout());

	answer(0, PROTO_L2OP_SH_DOWN, 0xd1, 0);
	cr_assert_eq(ST->down_slices, 1);
	cr_assert_eq(rmem_submitted(SHARED_OP_PUT), 0, "shard 1's slice still awaited");
	answer(1, PROTO_L2OP_SH_DOWN, 0xd1, 0);
	cr_assert_eq(ST->down_slices, 2);
	cr_assert_eq(rmem_submitted(SHARED_OP_PUT), 1, "every slice written: the record");
	drv_sh_poll(d, SEC + 1);
	cr_assert_eq(ST->records_written, 1);
	cr_assert_eq(ST->records_failed, 0);
	cr_assert_not_null(x = rmem_find(ns, name));
	cr_assert_eq(shared_record_check(x->b, x->len, 9, o.object_id, shared_wall_ns(), &h),
		     SHARED_OK);
	cr_assert_eq(h.key, 0xd1);
	cr_assert_eq(h.shard, 2, "a record names its model's shards");
	cr_assert_eq(h.tokens, COL);

	/* Another replica wrote its record first: the create finds it, and keeps it. */
	record_name(9, 0xd2, ns2, name2);
	rmem_write(ns2, name2, theirs, sizeof(theirs));
	cr_assert(down(0xd2, &o));
	answer(0, PROTO_L2OP_SH_DOWN, 0xd2, 0);
	answer(1, PROTO_L2OP_SH_DOWN, 0xd2, 0);
	drv_sh_poll(d, SEC + 2);
	cr_assert_eq(ST->records_written, 2, "-EEXIST: the column is recorded all the same");
	cr_assert_not_null(x = rmem_find(ns2, name2));
	cr_assert_eq(memcmp(x->b, theirs, sizeof(theirs)), 0, "theirs kept, not written over");
	cr_assert_eq(rmem_count(NULL), 2);
}

/* Column 0xd1 of organization 9 sent down, and shard 0 answering @p code: counted failed. */
static void
down_answered(uint16_t code)
{
	struct proto_l2col o;

	know_org(9, SEC);
	cr_assert(down(0xd1, &o));
	answer(0, PROTO_L2OP_SH_DOWN, 0xd1, code);
	cr_assert_eq(ST->down_failed, 1);
}

Test(drv_shared, a_failed_sh_down_counts_down_failed_and_writes_no_record)
{
	down_answered(PROTO_E_SHARED_FAILED);
	answer(1, PROTO_L2OP_SH_DOWN, 0xd1, 0);
	cr_assert_eq(ST->down_unmatched, 1, "its column was given up at the failure");
	cr_assert_eq(ST->down_slices, 0);
	drv_sh_poll(d, SEC + 1);
	cr_assert_eq(ST->records_written, 0);
	cr_assert_eq(rmem_submitted(SHARED_OP_PUT), 0, "no record: its slices are swept");
	cr_assert_eq(rmem_count(NULL), 0);
}

/*
 * A shard that finds its slice's name taken by another's slice, sealed
 * under a key its store does not make (maybe newer), keeps it and answers
 * SHARED_KEY: the column is neither written nor sent down again (writing
 * it again would find the same slice, at a put and a read-back each time).
 */
Test(drv_shared, an_sh_down_answered_shared_key_is_not_sent_down_again)
{
	struct proto_l2col o;

	down_answered(PROTO_E_SHARED_KEY);
	cr_assert_eq(ST->down_keyless, 1);
	answer(1, PROTO_L2OP_SH_DOWN, 0xd1, 0);
	drv_sh_poll(d, SEC + 1);
	cr_assert_eq(ST->records_written, 0, "no record: another's slice stays under its name");
	cr_assert_not(down(0xd1, &o), "not sent down again");
	cr_assert_eq(ST->down_keyless_skipped, 1);
	cr_assert_eq(ST->down_cols, 1);
	cr_assert(down(0xd2, &o), "another column goes down as ever");
	cr_assert_eq(d->fatal, 0);
	cr_assert_eq(d->st.resyncs + d->st.shard_restarts, 0);
}

/* ---- Up: a slice that does not come up ------------------------------------------------------ */

/* Column @p key's record (a prompt's first of organization 9) in the cluster: its name. */
static void
recorded(uint64_t key, char *ns, char *name)
{
	uint64_t keys[1] = {key};

	put_record(9, keys, 0, shared_wall_ns() - SEC);
	record_name(9, key, ns, name);
	cr_assert_not_null(rmem_find(ns, name));
}

Test(drv_shared, an_sh_up_of_a_missing_or_bad_slice_deletes_the_record_and_costs_only_the_column)
{
	char ns[SHARED_NS_MAX], name[SHARED_NAME_MAX], ns2[SHARED_NS_MAX], name2[SHARED_NAME_MAX],
		ns3[SHARED_NS_MAX], name3[SHARED_NAME_MAX];

	know_org(9, SEC);
	recorded(0xe1, ns, name);
	recorded(0xe2, ns2, name2);
	recorded(0xe3, ns3, name3);

	answer(0, PROTO_L2OP_SH_UP, 0xe1, PROTO_E_UNKNOWN_PROMPT);
	cr_assert_eq(ST->up_failed, 1);
	cr_assert_eq(ST->slices_missing, 1);
	cr_assert_eq(ST->records_deleted, 1);
	answer(1, PROTO_L2OP_SH_UP, 0xe2, PROTO_E_SHARED_BAD);
	cr_assert_eq(ST->up_failed, 2);
	cr_assert_eq(ST->slices_bad, 1);
	cr_assert_eq(ST->records_deleted, 2);
	/* A cluster that failed or was slow keeps the record: the next lookup may find it well. */
	answer(0, PROTO_L2OP_SH_UP, 0xe3, PROTO_E_SHARED_FAILED);
	cr_assert_eq(ST->up_failed, 3);
	cr_assert_eq(ST->records_deleted, 2);
	drv_sh_poll(d, SEC + 1);
	cr_assert_null(rmem_find(ns, name));
	cr_assert_null(rmem_find(ns2, name2));
	cr_assert_not_null(rmem_find(ns3, name3));
	cr_assert_eq(ST->up_failed_kept, 0);
	/* The column, not the model: no restart, no resync. */
	cr_assert_eq(d->model_epoch[0], DRIVER_EPOCH);
	cr_assert_eq(d->st.resyncs + d->st.shard_restarts, 0);
	cr_assert_eq(d->fatal, 0);
	cr_assert(drv_sh_on(d, 0), "the level stays in use");
}

/* A request after @p r whose first column is @p key (the same prefix). */
static uint32_t
request_like(uint32_t r, uint64_t key)
{
	uint32_t q, known;

	for (q = r + 1; q < d->nreq; q++) {
		const struct wl_req *w = &d->wl.r[q];
		struct prefixcache_request rq = {.isolation_id = w->iso, .tokens = w->tokens,
						 .num_tokens = w->n, .cache_length_allowed = w->allowed,
						 .first_multimodal = w->first_mm};
		uint64_t k[16];

		if (prefixcache_columns(d->pc, 0, &rq, k, 16, &known) > 0 && k[0] == key)
			return q;
	}
	cr_assert_fail("no other request of that prefix in the workload");
	return 0;
}

/*
 * Another request of the prefix request @p r starts with (its first column
 * @p key), its records read from the level at @p at: the request waits for
 * the read, then is ready. The request.
 */
static uint32_t
look_up_again(uint32_t r, uint64_t key, uint64_t at)
{
	uint32_t q;

	prefixcache_shared_unstage(d->pc);
	q = request_like(r, key);
	cr_assert_not(drv_sh_request_ready(d, q, at), "its records are being read");
	drv_sh_poll(d, at + 1);
	cr_assert(drv_sh_request_ready(d, q, at + 2));
	return q;
}

/*
 * A slice a shard refuses as sealed under a key its organization key store
 * does not make (SHARED_KEY): its record stays, and the driver stages
 * neither that column nor what follows it again until a generation
 * changes, so that each later lookup is a miss, not a refill that loses it.
 */
Test(drv_shared, a_slice_refused_by_key_keeps_its_record_and_is_not_staged_again)
{
	uint64_t keys[8], wall = shared_wall_ns();
	uint32_t n, r = request_with(3, keys, &n), r2;
	uint64_t t;
	uint64_t iso = d->wl.r[r].iso;
	struct proto_l2done done = {.key = keys[0], .isolation_id = iso, .op = PROTO_L2OP_SH_UP,
				    .status = PROTO_E_SHARED_KEY, .cache_id = 0};

	put_record(iso, keys, 0, wall - SEC);
	put_record(iso, keys, 1, wall - SEC);
	cr_assert(look_up(r, SEC));
	cr_assert_eq(ST->staged_cols, 2);
	drv_sh_done(d, &d->sh[0], &done);
	cr_assert_eq(ST->up_failed, 1);
	cr_assert_eq(ST->up_keyless, 1);
	cr_assert_eq(ST->records_deleted, 0, "its record stays: another replica may open it");
	cr_assert_eq(rmem_count(NULL), 2);
	/* Another request of the same prefix finds both again: neither staged. */
	r2 = look_up_again(r, keys[0], 2 * SEC);
	cr_assert_eq(ST->lookup_found_cols, 4, "both records found again");
	cr_assert_eq(ST->staged_cols, 2, "nothing more staged");
	cr_assert_eq(ST->keyless_skipped, 1);
	/* Ten generation intervals later (a shard may have read its new store
	 * after the reset's bump), a request of that prefix stages it again. */
	for (t = 3; t < 3 + 10; t++)
		gen_round(t * SEC);
	look_up_again(r2, keys[0], 14 * SEC);
	cr_assert_eq(ST->staged_cols, 4, "asked for again");
	cr_assert_eq(ST->keyless_skipped, 1);
	cr_assert_eq(d->fatal, 0);
	cr_assert_eq(d->st.resyncs + d->st.shard_restarts, 0);
}

/* ---- A cluster that does not answer ----------------------------------------------------------- */

Test(drv_shared, a_cluster_failing_for_op_timeout_ms_is_unavailable_then_available_again)
{
	struct proto_l2col o;

	know_org(9, SEC);
	rmem_fail(1000, -ETIMEDOUT);
	gen_round(2 * SEC); /* its first failure */
	cr_assert_eq(ST->op_timeouts, 2, "the global generation's and organization 9's");
	cr_assert_eq(ST->unavailable, 0, "failing, not yet for op_timeout_ms");
	gen_round(2 * SEC + SEC / 2);
	cr_assert_eq(ST->unavailable, 0, "not due: no read, no failure");
	gen_round(3 * SEC);
	cr_assert_eq(ST->unavailable, 1, "failing for a second");
	cr_assert_eq(ST->unavailable_times, 1);
	cr_assert_eq(ST->op_timeouts, 4);
	cr_assert_not(drv_sh_on(d, 0));
	cr_assert_not(down(0xd1, &o), "no writes");
	cr_assert_eq(ST->down_cols, 0);
	gen_round(4 * SEC);
	cr_assert_eq(ST->unavailable_times, 1, "once");

	rmem_fail(0, 0); /* it answers again */
	gen_round(5 * SEC);
	cr_assert_eq(ST->unavailable, 0);
	cr_assert_eq(ST->available_again, 1);
	cr_assert(drv_sh_on(d, 0));
	cr_assert(down(0xd1, &o));
	cr_assert_eq(ST->down_cols, 1);
	cr_assert_eq(ST->generation_refused, 0, "a failed read is no answer: nothing refused");
}

/* ---- Refill or recompute: a lookup no sooner than computing is given up ---------------- */

/*
 * With the adaptive policy and a prefill rate, a request whose lookup is
 * still out when computing its columns would have been done starts without
 * it (counted abandoned), long before shared.deadline_ms (a second here);
 * with io-only it waits for the deadline. The organization's generation is
 * never answered here (no poll), which keeps the lookup out.
 */
Test(drv_shared, a_lookup_still_out_when_computing_would_be_done_is_abandoned)
{
	uint64_t keys[8], t = SEC, x;
	uint32_t n, r = request_with(3, keys, &n);

	kvss.cfg.driver.refill_policy = KVSS_POLICY_ADAPTIVE;
	kvss.cfg.driver.recompute_tokens_per_s = 64000000; /* a column of 64 tokens a us */
	cr_assert_not(drv_sh_request_ready(d, r, t), "its lookup is sent, its wait starts");
	x = (uint64_t)n * 1000; /* computing the n columns it looks up, ns */
	cr_assert_not(drv_sh_request_ready(d, r, t + x - 1), "computing would not be done yet");
	cr_assert_eq(ST->lookups_abandoned, 0);
	cr_assert(drv_sh_request_ready(d, r, t + x), "computing would be done: it goes on");
	cr_assert_eq(ST->lookups_abandoned, 1);
	cr_assert_eq(ST->started, 1);
	cr_assert_eq(ST->staged_cols, 0, "nothing came back: nothing staged");
}

/*
 * Once a level's lookups take longer than computing (the first request
 * waited that long and gave up), the next request looking up no more
 * columns does not wait for it at all: it starts at once, its lookup
 * counted abandoned, and no wait is counted.
 */
Test(drv_shared_ahead, a_level_slower_than_computing_is_not_waited_for)
{
	uint64_t keys[8], t = SEC, x;
	uint32_t n, n2 = 0, r = request_with(3, keys, &n), r2, known;

	kvss.cfg.driver.refill_policy = KVSS_POLICY_ADAPTIVE;
	kvss.cfg.driver.recompute_tokens_per_s = 64000000; /* a column of 64 tokens a us */
	for (r2 = r + 1; r2 < d->nreq && r2 < r + kvss.cfg.shared.lookahead; r2++) {
		const struct wl_req *q = &d->wl.r[r2];
		struct prefixcache_request rq = {.isolation_id = q->iso, .tokens = q->tokens,
						 .num_tokens = q->n, .cache_length_allowed = q->allowed,
						 .first_multimodal = q->first_mm};
		uint64_t k[16];

		n2 = prefixcache_columns(d->pc, 0, &rq, k, 16, &known);
		if (n2 > 8)
			n2 = 8; /* shared.max_columns: what its lookup asks for */
		if (known == 0 && n2 >= 1 && n2 <= n)
			break;
	}
	cr_assert_lt(r2, r + kvss.cfg.shared.lookahead, "no second request of 1 to %u columns in the "
		     "%u after request %u", n, kvss.cfg.shared.lookahead, r);
	cr_assert_not(drv_sh_request_ready(d, r, t), "its lookup is sent, its wait starts");
	x = (uint64_t)n * 1000;
	cr_assert(drv_sh_request_ready(d, r, t + x), "computing would be done: it goes on");
	cr_assert_eq(ST->lookups_abandoned, 1);
	cr_assert_eq(ST->waits, 1);
	/* Request r2's lookup went out with r's (ahead of it), and is still out. */
	cr_assert(drv_sh_request_ready(d, r2, t + x + 1), "the level is slower than computing: at once");
	cr_assert_eq(ST->lookups_abandoned, 2);
	cr_assert_eq(ST->waits, 1, "no wait for it");
	cr_assert_eq(ST->started, 2);
}

Test(drv_shared, io_only_waits_for_the_deadline_whatever_computing_would_take)
{
	uint64_t keys[8], t = SEC;
	uint32_t n, r = request_with(3, keys, &n);

	kvss.cfg.driver.refill_policy = KVSS_POLICY_IO_ONLY;
	kvss.cfg.driver.recompute_tokens_per_s = 64000000;
	cr_assert_not(drv_sh_request_ready(d, r, t));
	cr_assert_not(drv_sh_request_ready(d, r, t + SEC / 2), "io-only: the deadline alone decides");
	cr_assert_eq(ST->lookups_abandoned, 0);
	cr_assert(drv_sh_request_ready(d, r, t + SEC), "the deadline (shared.deadline_ms)");
	cr_assert_eq(ST->lookups_abandoned, 0);
}

/*
 * The driver not running for 5 s (drv_sh_absent, from drv_absent) is no
 * time of a lookup's or of its request's wait: neither the deadline (io-only)
 * nor the give-up against computing (adaptive) comes by it.
 * Catches: every lookup out given up at once after a stop, its stop learned
 * as the level's pace.
 */
Test(drv_shared, a_stop_of_the_driver_is_no_time_of_a_lookup)
{
	uint64_t keys[8], t = SEC, gap = 5 * SEC;
	uint32_t n, r = request_with(3, keys, &n);

	kvss.cfg.driver.refill_policy = KVSS_POLICY_IO_ONLY;
	cr_assert_not(drv_sh_request_ready(d, r, t));
	drv_sh_absent(d, gap);
	cr_assert_not(drv_sh_request_ready(d, r, t + SEC + gap - 1),
		      "the deadline moved on by the stop");
	cr_assert(drv_sh_request_ready(d, r, t + SEC + gap), "and comes after it");
	cr_assert_eq(ST->lookups_abandoned, 0);
}

Test(drv_shared, a_stop_of_the_driver_is_no_time_toward_computing_instead)
{
	uint64_t keys[8], t = SEC, x, gap = 5 * SEC;
	uint32_t n, r = request_with(3, keys, &n);

	kvss.cfg.driver.refill_policy = KVSS_POLICY_ADAPTIVE;
	kvss.cfg.driver.recompute_tokens_per_s = 64000000; /* a column of 64 tokens a us */
	cr_assert_not(drv_sh_request_ready(d, r, t));
	x = (uint64_t)n * 1000;
	drv_sh_absent(d, gap);
	cr_assert_not(drv_sh_request_ready(d, r, t + x + gap - 1), "its wait left the stop out");
	cr_assert_eq(ST->lookups_abandoned, 0);
	cr_assert(drv_sh_request_ready(d, r, t + x + gap), "computing would be done: it goes on");
	cr_assert_eq(ST->lookups_abandoned, 1);
}

Test(drv_shared, compute_only_looks_nothing_up_and_never_waits)
{
	uint64_t keys[8];
	uint32_t n, r = request_with(3, keys, &n);

	kvss.cfg.driver.refill_policy = KVSS_POLICY_COMPUTE_ONLY;
	cr_assert(drv_sh_request_ready(d, r, SEC), "the cache off: nothing to wait for");
	cr_assert_eq(ST->lookups, 0);
	cr_assert_eq(ST->waits, 0);
	kvss.cfg.driver.refill_policy = KVSS_POLICY_ADAPTIVE;
}
