/* SPDX-License-Identifier: BSD-3-Clause */
/* lib/config/config.c: the examples load; every bad value names file, line and key. */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config.h"

static struct kvss_config cfg;
static char err[512];

static int example_variant(const char *example, const char *const *from, const char *const *to,
			   unsigned int n);

Test(config, every_example_in_config_loads)
{
	static const char *const files[] = {"config/bare-metal-shard.cfg", "config/ci-pcap-shard.cfg",
					    "config/memif-driver.cfg", "config/memif-shard0.cfg",
					    "config/memif-shard1.cfg", "config/all-in-one.cfg",
					    "config/record-driver.cfg", "config/all-in-one-hybrid.cfg",
					    "config/memif-two-models.cfg",
					    "config/memif-shard-draft.cfg", "config/bare-metal-shard.cfg",
					    "bench/shard.cfg", "test/data/shard-small.cfg",
					    "test/data/shard-slow-batch.cfg"};
	unsigned int i;

	for (i = 0; i < sizeof(files) / sizeof(files[0]); i++)
		cr_assert_eq(kvss_config_load(files[i], &cfg, err, sizeof(err)), 0, "%s", err);
}

Test(config, the_ci_shard_example_reads_as_written)
{
	cr_assert_eq(kvss_config_load("config/ci-pcap-shard.cfg", &cfg, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(cfg.role, KVSS_ROLE_SHARD);
	cr_assert_eq(cfg.poll, KVSS_POLL_IDLE);
	cr_assert_eq(cfg.mtu, 9000);
	cr_assert_eq(cfg.udp.ctrl, 7400);
	cr_assert_eq(cfg.shard.store.num_caches, 1);
	cr_assert_eq(cfg.shard.store.cache[0].bytes_per_token, 64);
	cr_assert_eq(cfg.shard.store.cache[0].num_buffers, 2);
	cr_assert_eq(cfg.shard.store.cache[0].capacity_tokens, 4096);
	cr_assert_eq(cfg.shard.addr.ipv4, 0x0a63000a);
	cr_assert_eq(cfg.shard.wafer.mac[5], 1);
	cr_assert_eq(cfg.shard.space_timeout_ms, 200);
	cr_assert_eq(cfg.shard.batch_timeout_ms, 50);
	cr_assert_eq(cfg.num_ingest, 1);
	cr_assert_eq(cfg.ingest_lcore[0], 1);
}

/* The README's example sets no refill_model: the estimates are learned. */
/* refill = []: no refill lcore; absent, lcore 2 as before. */
Test(config, an_empty_refill_list_means_no_refill_lcore)
{
	cr_assert_eq(kvss_config_load("config/all-in-one.cfg", &cfg, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(cfg.num_refill, 0);
	cr_assert_eq(kvss_config_load("config/ci-pcap-shard.cfg", &cfg, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(cfg.num_refill, 1);
	cr_assert_eq(cfg.refill_lcore[0], 2);
}

/* A driver's configuration with organization "c"'s DRAM share @p c_share, into @p path. */
static void
shares_cfg(const char *path, const char *c_share)
{
	FILE *f = fopen(path, "w");

	cr_assert_not_null(f);
	fprintf(f, "role = \"driver\";\ndriver = { address = { mac = \"02:00:00:00:00:01\"; ipv4 = \"10.0.0.1\"; };\n"
		   " models = ( { caches = ( { id = 0; } ); shards = ( { id = 0;\n"
		   "  address = { mac = \"02:00:00:00:00:02\"; ipv4 = \"10.0.0.2\"; };\n"
		   "  bytes_per_token = [64]; capacity_tokens = [10]; } ); } );\n"
		   " org_default = { dram_share = 0.1; dram_cap = 0.5; };\n"
		   " orgs = ( { name = \"a\"; dram_share = 0.4; }, { name = \"b\"; dram_cap = 0.25; },\n"
		   "  { name = \"c\"; dram_share = %s; dram_cap = 1; } ); };\n", c_share);
	fclose(f);
}

Test(config, dram_shares_and_caps_come_from_the_orgs_or_their_default)
{
	char path[64];

	/* This process's file: another run of the suite (plain, ASan) may be at work. */
	snprintf(path, sizeof(path), "/tmp/kvss_test_shares_%d.cfg", (int)getpid());
	shares_cfg(path, "0.5");
	cr_assert_eq(kvss_config_load(path, &cfg, err, sizeof(err)), -1,
		     "0.1 + 0.4 + 0.1 + 0.5 is above 1");
	shares_cfg(path, "0.3");
	cr_assert_eq(kvss_config_load(path, &cfg, err, sizeof(err)), 0, "%s", err);
	unlink(path);
	cr_assert_float_eq(cfg.driver.pc.dram_share_default, 0.1, 1e-12);
	cr_assert_float_eq(cfg.driver.pc.dram_cap_default, 0.5, 1e-12);
	cr_assert_float_eq(cfg.driver.org[0].dram_share, 0.4, 1e-12);
	cr_assert_float_eq(cfg.driver.org[0].dram_cap, 0.5, 1e-12, "the default's cap");
	cr_assert_float_eq(cfg.driver.org[1].dram_share, 0.1, 1e-12, "the default's share");
	cr_assert_float_eq(cfg.driver.org[1].dram_cap, 0.25, 1e-12);
	cr_assert_float_eq(cfg.driver.org[2].dram_cap, 1, 1e-12);
	cr_assert_float_eq(cfg.driver.org[0].l2_share, 0, 1e-12, "no second-tier share given");
	cr_assert_float_eq(cfg.driver.org[0].l2_cap, 1, 1e-12);
	/* None configured: no share, no cap. */
	cr_assert_eq(kvss_config_load("config/memif-driver.cfg", &cfg, err, sizeof(err)), 0, "%s", err);
	cr_assert_float_eq(cfg.driver.pc.dram_share_default, 0, 1e-12);
	cr_assert_float_eq(cfg.driver.org[0].dram_share, 0, 1e-12);
	cr_assert_float_eq(cfg.driver.org[0].dram_cap, 1, 1e-12);
}

Test(config, refill_estimates_are_learned_unless_configured_otherwise)
{
	cr_assert_eq(kvss_config_load("config/all-in-one.cfg", &cfg, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(cfg.driver.refill_model, KVSS_MODEL_LEARNED);
}

Test(config, the_driver_takes_the_smallest_shard_and_the_busiest_one)
{
	cr_assert_eq(kvss_config_load("config/memif-driver.cfg", &cfg, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(cfg.role, KVSS_ROLE_DRIVER);
	cr_assert_eq(cfg.driver.pc.num_models, 1);
	cr_assert_eq(cfg.driver.models[0].num_shards, 2);
	cr_assert_eq(cfg.driver.pc.model[0].cache[0].capacity_tokens, 1000000);
	cr_assert_eq(cfg.driver.pc.model[0].refill_bytes_per_token, 256);
	cr_assert_eq(cfg.driver.pc.ttl_last_ns, 3600ull * 1000000000ull);
	cr_assert_eq(cfg.driver.num_orgs, 1);
	cr_assert_str_eq(cfg.driver.org[0].name, "acme");
	cr_assert_eq(cfg.driver.org[0].ttl_last_ns, 600ull * 1000000000ull);
	cr_assert_eq(cfg.wafer.limit, 0);
	cr_assert_eq(cfg.driver.models[0].shard[1].port, 1);
	cr_assert_eq(cfg.driver.models[0].shard[1].bytes_per_token[0], 128);
	cr_assert_eq(cfg.driver.away_ms, 1000);
	/* Both tiers: the smallest L2 of the model's shards, admitting all by default. */
	cr_assert_eq(cfg.driver.pc.model[0].l2_capacity_tokens, 10000000);
	cr_assert_eq(cfg.driver.pc.model[0].l2_admit, PREFIXCACHE_L2_ALL);
	{
		/* "short" is read as PREFIXCACHE_L2_SHORT (the same config, its choice changed). */
		const char *from = "l2_admit = \"all\";", *to = "l2_admit = \"short\";";

		cr_assert_eq(example_variant("config/memif-driver.cfg", &from, &to, 1), 0, "%s", err);
		cr_assert_eq(cfg.driver.pc.model[0].l2_admit, PREFIXCACHE_L2_SHORT);
	}
	cr_assert_eq(cfg.driver.refill_model, KVSS_MODEL_LEARNED);
	cr_assert_eq(cfg.wafer.resume, KVSS_RESUME_ESTIMATE);
	cr_assert_eq(cfg.wafer.backpressure, KVSS_BP_WAIT);
	{
		/* "skip" is read as KVSS_BP_SKIP (the example's commented line, set). */
		const char *from = "  # backpressure = \"wait\";", *to = "  backpressure = \"skip\";";

		cr_assert_eq(example_variant("config/memif-driver.cfg", &from, &to, 1), 0, "%s", err);
		cr_assert_eq(cfg.wafer.backpressure, KVSS_BP_SKIP);
	}
	/* The rail: warn (this example says so), the production example refuses. */
	cr_assert_eq(cfg.driver.routed, KVSS_ROUTED_WARN);
	/* Speculative decoding: off unless asked, 20% rejected, seed 1. */
	cr_assert_eq(cfg.wafer.spec_tokens, 0);
	cr_assert_eq(cfg.wafer.spec_reject_pct, 20);
	cr_assert_eq(cfg.wafer.spec_seed, 1);
}

Test(config, role_all_hosts_a_shard_per_group_of_its_list)
{
	cr_assert_eq(kvss_config_load("config/all-in-one-draft.cfg", &cfg, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(cfg.role, KVSS_ROLE_ALL);
	cr_assert_eq(cfg.num_local, 2);
	cr_assert_eq(cfg.local[0].model, 0);
	cr_assert_eq(cfg.local[1].model, 1);
	cr_assert_eq(cfg.local[1].store.cache[0].capacity_tokens, 30000);
	cr_assert_eq(cfg.shard.model, 0, "shard is the first");
	cr_assert_eq(cfg.num_ingest, 2);
	cr_assert_eq(cfg.wafer.spec_tokens, 4);
	/* One group: one shard, as ever. */
	cr_assert_eq(kvss_config_load("config/all-in-one.cfg", &cfg, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(cfg.num_local, 1);
	cr_assert_eq(cfg.local[0].id, cfg.shard.id);
}

/*
 * The example @p example with each of @p n @p from[i] replaced by @p to[i]:
 * loaded into cfg; 0, or the load's failure with err.
 */
static int
example_variant(const char *example, const char *const *from, const char *const *to, unsigned int n)
{
	char path[] = "/tmp/kvss_cfg_variant_XXXXXX", *text, *out;
	FILE *f = fopen(example, "r");
	size_t len;
	unsigned int i;
	int fd, rc;

	cr_assert_not_null(f);
	text = calloc(1, 1 << 16);
	out = calloc(1, 1 << 16);
	len = fread(text, 1, (1 << 16) - 1, f);
	fclose(f);
	cr_assert_gt(len, 0);
	for (i = 0; i < n; i++) {
		char *at = strstr(text, from[i]);

		cr_assert_not_null(at, "%s has '%s'", example, from[i]);
		snprintf(out, 1 << 16, "%.*s%s%s", (int)(at - text), text, to[i], at + strlen(from[i]));
		memcpy(text, out, 1 << 16);
	}
	fd = mkstemp(path);
	cr_assert_geq(fd, 0);
	f = fdopen(fd, "w");
	fputs(text, f);
	fclose(f);
	free(text);
	free(out);
	rc = kvss_config_load(path, &cfg, err, sizeof(err));
	unlink(path);
	return rc;
}

/* config/all-in-one-draft.cfg so changed (example_variant). */
static int
draft_variant(const char *const *from, const char *const *to, unsigned int n)
{
	return example_variant("config/all-in-one-draft.cfg", from, to, n);
}

/* config/all-in-one-draft.cfg with @p from replaced by @p to: the load must fail naming @p want. */
static void
draft_variant_fails(const char *from, const char *to, const char *want)
{
	cr_assert_neq(draft_variant(&from, &to, 1), 0, "'%s' must be refused", to);
	cr_assert(strstr(err, want) != NULL, "'%s' in: %s", want, err);
}

/*
 * A model's bandwidths take fractions (12.5 Gb/s) as they take whole
 * numbers; what is not a bandwidth (0, negative, past 100000, or a float
 * that overflows to infinity) is refused naming its key.
 */
Test(config, a_models_bandwidths_take_fractions_and_refuse_what_is_not_one)
{
	const char *from = "refill_gbps = 10;", *to = "refill_gbps = 12.5;";

	cr_assert_eq(draft_variant(&from, &to, 1), 0, "%s", err);
	cr_assert_float_eq(cfg.driver.pc.model[0].refill_bytes_per_ns, 12.5 / 8.0, 1e-12);
	draft_variant_fails("refill_gbps = 10;", "refill_gbps = 0.0;", "refill_gbps");
	draft_variant_fails("refill_gbps = 10;", "refill_gbps = -2.5;", "refill_gbps");
	draft_variant_fails("refill_gbps = 10;", "refill_gbps = 1e400;", "refill_gbps");
	draft_variant_fails("refill_gbps = 10;", "refill_gbps = 100000.5;", "refill_gbps");
}

Test(config, role_all_with_several_shards_is_checked)
{
	draft_variant_fails("ingest = [1, 2];", "ingest = [1];",
			    "lcores.ingest: 2 shards: one ingest lcore each (1 given)");
	draft_variant_fails("id = 0;\n    model = 1;", "id = 0;\n    model = 0;",
			    "shard.[1].id: shard 0 of model 0 is hosted twice");
	draft_variant_fails("{ id = 0; address = { mac = \"02:00:00:00:01:01\"",
			    "{ id = 5; address = { mac = \"02:00:00:00:01:01\"",
			    "model 1's shard 5 is not one this process hosts");
	draft_variant_fails("refill = [];", "refill = [3];", "refills run on their ingest lcores");
}

/*
 * Several shards in one process each have their own levels below DRAM
 * (shard/level.h: a worker each, slices named by their own shard): a
 * second tier per shard and the shared level are taken, and two shards
 * naming one second-tier file are refused, naming the key.
 */
Test(config, several_shards_each_have_their_own_levels)
{
	static const char *const from[] = {
		"batch_timeout_ms = 1000;\n    caches = ( { id = 0; bytes_per_token = 256;",
		"batch_timeout_ms = 1000;\n    caches = ( { id = 0; bytes_per_token = 128;",
		"driver = {", "models = (\n    {", "    },\n    {\n"};
	const char *to[] = {
		"batch_timeout_ms = 1000; l2 = { dir = \"/tmp/kvss_cfg_l2\"; capacity_tokens = [100000]; };\n"
		"    caches = ( { id = 0; bytes_per_token = 256;",
		"batch_timeout_ms = 1000; l2 = { dir = \"/tmp/kvss_cfg_l2\"; capacity_tokens = [100000]; };\n"
		"    caches = ( { id = 0; bytes_per_token = 128;",
		"shared = { conf = \"/etc/ceph/ceph.conf\"; column = 64; };\ndriver = {",
		"models = (\n    { name = \"target\";", "    },\n    { name = \"draft\";\n"};
	cr_assert_eq(draft_variant(from, to, 5), 0, "%s", err);
	cr_assert_eq(cfg.num_local, 2);
	cr_assert_str_neq(cfg.local[0].l2.path, cfg.local[1].l2.path);
	cr_assert_str_eq(cfg.shared.conf, "/etc/ceph/ceph.conf");
	/* One file named by both: refused at start, naming the second shard's key. */
	to[1] = "batch_timeout_ms = 1000; l2 = { path = \"/tmp/kvss_cfg_l2/one.l2\"; "
		"capacity_tokens = [100000]; };\n    caches = ( { id = 0; bytes_per_token = 128;";
	to[0] = "batch_timeout_ms = 1000; l2 = { path = \"/tmp/kvss_cfg_l2/one.l2\"; "
		"capacity_tokens = [100000]; };\n    caches = ( { id = 0; bytes_per_token = 256;";
	cr_assert_neq(draft_variant(from, to, 5), 0);
	cr_assert(strstr(err, "shard.[1].l2: /tmp/kvss_cfg_l2/one.l2 is shard 0 of model 0's second "
			      "tier too") != NULL, "%s", err);
}

/*
 * The draft configuration with one shard whose second tier's group holds
 * @p extra besides its dir and capacity: draft_variant's status.
 */
static int
l2_variant(const char *extra)
{
	static const char *const from[] = {
		"batch_timeout_ms = 1000;\n    caches = ( { id = 0; bytes_per_token = 256;"};
	char to0[400];
	const char *to[1] = {to0};

	snprintf(to0, sizeof(to0), "batch_timeout_ms = 1000; l2 = { dir = \"/tmp/kvss_cfg_l2\"; "
		 "capacity_tokens = [100000]; %s };\n    caches = ( { id = 0; "
		 "bytes_per_token = 256;", extra);
	return draft_variant(from, to, 1);
}

/*
 * The second tier's keys (shard.l2.key_file, old_key_file, org_key_file): taken per
 * shard; an old key without a current one, or the same file twice, or a
 * key that is not a path, refused naming the key. (The files themselves
 * are read and checked by the shard at start: test_kvdisk_seal.c,
 * scripts/test-l2.sh.)
 */
Test(config, the_second_tiers_keys_are_taken_and_their_misuse_refused)
{
	static const struct {
		const char *keys, *want; /* want NULL: loads */
	} c[] = {
		{"key_file = \"/k\"; old_key_file = \"/o\";", NULL},
		{"key_file = \"/k\"; org_key_file = \"/s\";", NULL},
		{"org_key_file = \"/s\";", "l2.org_key_file: given without key_file"},
		{"key_file = \"/k\"; org_key_file = \"/k\";", "l2.org_key_file: '/k' is a master key file too"},
		{"old_key_file = \"/o\";", "l2.old_key_file: given without key_file"},
		{"key_file = \"/k\"; old_key_file = \"/k\";", "l2.old_key_file: '/k' is key_file too"},
		{"key_file = 5;", "l2.key_file"},
	};
	unsigned int i;

	for (i = 0; i < sizeof(c) / sizeof(c[0]); i++) {
		int rc = l2_variant(c[i].keys);

		if (c[i].want == NULL) {
			cr_assert_eq(rc, 0, "case %u: %s", i, err);
			cr_assert_str_eq(cfg.local[0].l2.key_file, "/k");
			cr_assert_str_eq(cfg.local[0].l2.old_key_file, i == 0 ? "/o" : "");
			cr_assert_str_eq(cfg.local[0].l2.org_key_file, i == 0 ? "" : "/s");
		} else {
			cr_assert_neq(rc, 0, "case %u loaded", i);
			cr_assert(strstr(err, c[i].want) != NULL, "case %u: %s", i, err);
		}
	}
}

/*
 * How long the second tier may say nothing while reads wait on it
 * (shard.l2.op_timeout_ms): 10 s unless given; under a second, over ten
 * minutes or not a number refused, naming the key.
 */
Test(config, the_second_tiers_op_timeout_is_taken_and_bounded)
{
	static const struct {
		const char *line, *want; /* want NULL: loads */
		uint32_t ms;
	} c[] = {
		{"", NULL, 10000},
		{"op_timeout_ms = 2000;", NULL, 2000},
		{"op_timeout_ms = 999;", "l2.op_timeout_ms: 999 is out of range 1000..600000", 0},
		{"op_timeout_ms = 600001;", "l2.op_timeout_ms: 600001 is out of range", 0},
		{"op_timeout_ms = \"5s\";", "l2.op_timeout_ms", 0},
	};
	unsigned int i;

	for (i = 0; i < sizeof(c) / sizeof(c[0]); i++) {
		int rc = l2_variant(c[i].line);

		if (c[i].want == NULL) {
			cr_assert_eq(rc, 0, "case %u: %s", i, err);
			cr_assert_eq(cfg.local[0].l2.op_timeout_ms, c[i].ms, "case %u", i);
		} else {
			cr_assert_neq(rc, 0, "case %u loaded", i);
			cr_assert(strstr(err, c[i].want) != NULL, "case %u: %s", i, err);
		}
	}
}

struct bad {
	char text[512];
	char want[128]; /* what the message must contain */
};

static struct bad bads[] = {
	{"role = \"router\";\n", ":1: role: 'router' is not one of shard, driver, all"},
	{"mtu = 9000;\n", "role: missing"},
	{"role = \"shard\";\n", "shard: missing"},
	{"role = \"shard\";\nmtu = 100;\n", ":2: mtu: 100 is out of range 1500..9600"},
	/* libconfig 1.5 keeps the low 32 bits of 4294968796 (1500): refused, never read so. */
	{"role = \"shard\";\nmtu = 4294968796;\n",
	 ":2: 4294968796 does not fit libconfig's 32-bit integers, which would read it wrong: write 4294968796L"},
	{"role = \"shard\";\nudp = { control = 7400; evict = 7400; };\n", "the three UDP ports must differ"},
	{"role = \"shard\";\nlcores = { ingest = [1]; refill = [1]; };\n",
	 ":2: lcores.refill: lcore 1 is also lcores.ingest"},
	{"role = \"shard\";\nlcores = { ingest = [1, 1]; };\n",
	 ":2: lcores.ingest: lcore 1 listed twice (each runs one loop)"},
	{"role = \"shard\";\nlcores = { ingest = [1]; refill = [2, 2]; };\n",
	 ":2: lcores.refill: lcore 2 listed twice (each runs one loop)"},
	/* With no refill lcore, ingest and control still may not meet. */
	{"role = \"shard\";\nlcores = { ingest = [0]; refill = []; };\n",
	 ":2: lcores.ingest: lcore 0 is also lcores.control"},
	{"role = \"shard\";\nlcores = { ingest = [2]; refill = [0]; };\n",
	 ":2: lcores.refill: lcore 0 is also lcores.control"},
	{"role = \"shard\";\nshard = { id = 0;\n address = { mac = \"zz\"; ipv4 = \"10.0.0.1\"; };\n"
	 " wafer = { mac = \"02:00:00:00:00:01\"; ipv4 = \"10.0.0.2\"; }; caches = (); };\n",
	 ":3: shard.address.mac: want a MAC address"},
	{"role = \"shard\";\nshard = { id = 0;\n address = { mac = \"02:00:00:00:00:01\"; ipv4 = \"10.0.0.256\"; };\n"
	 " wafer = { mac = \"02:00:00:00:00:01\"; ipv4 = \"10.0.0.2\"; }; caches = (); };\n",
	 "shard.address.ipv4: want a dotted IPv4 address"},
	{"role = \"shard\";\nshard = { id = 0; address = { mac = \"02:00:00:00:00:01\"; ipv4 = \"10.0.0.1\"; };\n"
	 " wafer = { mac = \"02:00:00:00:00:01\"; ipv4 = \"10.0.0.2\"; };\n caches = (\n"
	 "  { id = 0; bytes_per_token = 100; buffers = 3; capacity_tokens = 10; } ); };\n",
	 ":5: shard.caches.[0].buffers: must divide bytes_per_token (100)"},
	{"role = \"shard\";\nshard = { id = 0; address = { mac = \"02:00:00:00:00:01\"; ipv4 = \"10.0.0.1\"; };\n"
	 " wafer = { mac = \"02:00:00:00:00:01\"; ipv4 = \"10.0.0.2\"; };\n caches = (\n"
	 "  { id = 1; bytes_per_token = 64; capacity_tokens = 10; } ); };\n",
	 "shard.caches.[0].id: caches must be numbered 0, 1, ... in order"},
	{"role = \"shard\";\nshard = { id = 0; address = { mac = \"02:00:00:00:00:01\"; ipv4 = \"10.0.0.1\"; };\n"
	 " wafer = { mac = \"02:00:00:00:00:01\"; ipv4 = \"10.0.0.2\"; };\n caches = (\n"
	 "  { id = 0; bytes_per_token = 64; capacity_tokens = -5; } ); };\n",
	 "shard.caches.[0].capacity_tokens: -5 is out of range"},
	{"role = \"shard\";\nshard = { id = 0; address = { mac = \"02:00:00:00:00:01\"; ipv4 = \"10.0.0.1\"; };\n"
	 " wafer = { mac = \"02:00:00:00:00:01\"; ipv4 = \"10.0.0.2\"; };\n drivers = [\"10.0.0.3\", \"host\"];\n"
	 " caches = ( { id = 0; bytes_per_token = 64; capacity_tokens = 5; } ); };\n",
	 "shard.drivers: element 1: want an IPv4 address in quotes"},
	{"role = \"shard\";\nshard = { id = 0; address = { mac = \"02:00:00:00:00:01\"; ipv4 = \"10.0.0.1\"; };\n"
	 " wafer = { mac = \"02:00:00:00:00:01\"; ipv4 = \"10.0.0.2\"; };\n drivers = \"10.0.0.3\";\n"
	 " caches = ( { id = 0; bytes_per_token = 64; capacity_tokens = 5; } ); };\n",
	 "shard.drivers: want an array of 1..16 IPv4 addresses"},
	{"role = \"driver\";\ndriver = { address = { mac = \"02:00:00:00:00:01\"; ipv4 = \"10.0.0.1\"; };\n"
	 " policy = \"fifo\"; models = (); };\n", ":3: driver.policy: 'fifo' is not one of lru, lfu"},
	{"role = \"driver\";\ndriver = { address = { mac = \"02:00:00:00:00:01\"; ipv4 = \"10.0.0.1\"; };\n"
	 " models = (); };\n", "driver.models: want a list of 1..4 models"},
	{"role = \"driver\";\ndriver = { address = { mac = \"02:00:00:00:00:01\"; ipv4 = \"10.0.0.1\"; };\n"
	 " policy = \"slru\"; probation_pct = 95; models = (); };\n",
	 ":3: driver.probation_pct: 95 is out of range"},
	{"role = \"driver\";\ndriver = { address = { mac = \"02:00:00:00:00:01\"; ipv4 = \"10.0.0.1\"; };\n"
	 " policy = \"followup\"; followup_pct = 0; models = (); };\n",
	 ":3: driver.followup_pct: 0 is out of range"},
	{"role = \"driver\";\ndriver = { address = { mac = \"02:00:00:00:00:01\"; ipv4 = \"10.0.0.1\"; };\n"
	 " away_ms = -1; models = (); };\n",
	 ":3: driver.away_ms: -1 is out of range"},
	{"role = \"driver\";\ndriver = { address = { mac = \"02:00:00:00:00:01\"; ipv4 = \"10.0.0.1\"; };\n"
	 " on_loss = \"ignore\"; models = (); };\n",
	 ":3: driver.on_loss: 'ignore' is not one of resync, exact, truncate"},
	{"role = \"driver\";\ndriver = { address = { mac = \"02:00:00:00:00:01\"; ipv4 = \"10.0.0.1\"; };\n"
	 " refill_model = \"fitted\"; models = (); };\n",
	 ":3: driver.refill_model: 'fitted' is not one of configured, learned"},
	{"role = \"driver\";\ndriver = { address = { mac = \"02:00:00:00:00:01\"; ipv4 = \"10.0.0.1\"; };\n"
	 " refill_model = \"configured\"; refill_short_pct = 10; models = (); };\n",
	 "driver.refill_short_pct: needs refill_model = \"learned\""},
	{"role = \"driver\";\ndriver = { address = { mac = \"02:00:00:00:00:01\"; ipv4 = \"10.0.0.1\"; };\n"
	 " refill_model = \"learned\"; refill_short_pct = 100; models = (); };\n",
	 ":3: driver.refill_short_pct: 100 is out of range 0..99"},
	{"role = \"driver\";\ndriver = { address = { mac = \"02:00:00:00:00:01\"; ipv4 = \"10.0.0.1\"; };\n"
	 " models = ( { caches = ( { id = 0; } ); shards = ( { id = 0;\n"
	 "  address = { mac = \"02:00:00:00:00:02\"; ipv4 = \"10.0.0.2\"; };\n"
	 "  bytes_per_token = [64, 64]; capacity_tokens = [10]; } ); } ); };\n",
	 "driver.models.[0].shards.[0].bytes_per_token: has 2 elements, want 1"},
	{"role = \"driver\";\ndriver = { address = { mac = \"02:00:00:00:00:01\"; ipv4 = \"10.0.0.1\"; };\n"
	 " models = ( { caches = ( { id = 0; rule = \"swa\"; window = 100; sinks = 80; } );\n"
	 " shards = ( { id = 0; address = { mac = \"02:00:00:00:00:02\"; ipv4 = \"10.0.0.2\"; };\n"
	 "  bytes_per_token = [64]; capacity_tokens = [10]; } ); } ); };\n",
	 "driver.models.[0].caches.[0].sinks: must be below the column"},
	{"role = \"driver\";\ndriver = { address = { mac = \"02:00:00:00:00:01\"; ipv4 = \"10.0.0.1\"; };\n"
	 " models = ( { caches = ( { id = 0; } ); shards = ( { id = 0;\n"
	 "  address = { mac = \"02:00:00:00:00:02\"; ipv4 = \"10.0.0.2\"; };\n"
	 "  bytes_per_token = [64]; buffers = [3]; capacity_tokens = [10]; } ); } ); };\n",
	 ":5: driver.models.[0].shards.[0].buffers: element 0 (3) must divide bytes_per_token (64)"},
	{"role = \"driver\";\ndriver = { address = { mac = \"02:00:00:00:00:01\"; ipv4 = \"10.0.0.1\"; };\n"
	 " models = ( { caches = ( { id = 0; } ); shards = ( { id = 0; port = 40;\n"
	 "  address = { mac = \"02:00:00:00:00:02\"; ipv4 = \"10.0.0.2\"; };\n"
	 "  bytes_per_token = [64]; capacity_tokens = [10]; } ); } ); };\n",
	 "driver.models.[0].shards.[0].port: 40 is out of range 0..31"},
	{"role = \"driver\";\ndriver = { address = { mac = \"02:00:00:00:00:01\"; ipv4 = \"10.0.0.1\"; };\n"
	 " models = ( { caches = ( { id = 0; } ); shards = ( { id = 0;\n"
	 "  address = { mac = \"02:00:00:00:00:02\"; ipv4 = \"10.0.0.2\"; };\n"
	 "  bytes_per_token = [64]; capacity_tokens = [10]; } ); } ); };\n"
	 "wafer = { resume = \"data\"; };\n",
	 ":6: wafer.resume: 'data' is not one of estimate, whole"},
	{"role = \"driver\";\ndriver = { address = { mac = \"02:00:00:00:00:01\"; ipv4 = \"10.0.0.1\"; };\n"
	 " models = ( { caches = ( { id = 0; } ); shards = ( { id = 0;\n"
	 "  address = { mac = \"02:00:00:00:00:02\"; ipv4 = \"10.0.0.2\"; };\n"
	 "  bytes_per_token = [64]; capacity_tokens = [10]; } ); } ); };\n"
	 "wafer = { backpressure = \"drop\"; };\n",
	 ":6: wafer.backpressure: 'drop' is not one of wait, skip"},
	{"role = \"driver\";\ndriver = { address = { mac = \"02:00:00:00:00:01\"; ipv4 = \"10.0.0.1\"; };\n"
	 " models = ( { caches = ( { id = 0; } ); shards = ( { id = 0;\n"
	 "  address = { mac = \"02:00:00:00:00:02\"; ipv4 = \"10.0.0.2\"; };\n"
	 "  bytes_per_token = [64]; capacity_tokens = [10]; } ); } ); };\n"
	 "wafer = { backpressure = 1; };\n",
	 ":6: wafer.backpressure"},
	{"role = \"driver\";\ndriver = { address = { mac = \"02:00:00:00:00:01\"; ipv4 = \"10.0.0.1\"; };\n"
	 " models = ( { caches = ( { id = 0; } ); shards = ( { id = 0;\n"
	 "  address = { mac = \"02:00:00:00:00:02\"; ipv4 = \"10.0.0.2\"; };\n"
	 "  bytes_per_token = [64]; capacity_tokens = [10]; } ); } ); };\n"
	 "wafer = { spec_tokens = 65; };\n",
	 ":6: wafer.spec_tokens: 65 is out of range 0..64"},
	/* The built-in workload's library of documents (make demo's). */
	{"role = \"driver\";\ndriver = { address = { mac = \"02:00:00:00:00:01\"; ipv4 = \"10.0.0.1\"; };\n"
	 " models = ( { caches = ( { id = 0; } ); shards = ( { id = 0;\n"
	 "  address = { mac = \"02:00:00:00:00:02\"; ipv4 = \"10.0.0.2\"; };\n"
	 "  bytes_per_token = [64]; capacity_tokens = [10]; } ); } ); };\n"
	 "wafer = { documents = -1; };\n",
	 ":6: wafer.documents: -1 is out of range 0..1000000"},
	{"role = \"driver\";\ndriver = { address = { mac = \"02:00:00:00:00:01\"; ipv4 = \"10.0.0.1\"; };\n"
	 " models = ( { caches = ( { id = 0; } ); shards = ( { id = 0;\n"
	 "  address = { mac = \"02:00:00:00:00:02\"; ipv4 = \"10.0.0.2\"; };\n"
	 "  bytes_per_token = [64]; capacity_tokens = [10]; } ); } ); };\n"
	 "wafer = { documents = \"many\"; };\n",
	 ":6: wafer.documents"},
	{"role = \"shard\";\npoll_mode = \"nap\";\nshard = { id = 0; address = { mac = \"02:00:00:00:00:01\"; ipv4 = \"10.0.0.1\"; };\n"
	 " wafer = { mac = \"02:00:00:00:00:01\"; ipv4 = \"10.0.0.2\"; };\n"
	 " caches = ( { id = 0; bytes_per_token = 64; capacity_tokens = 10; } ); };\n",
	 ":2: poll_mode: 'nap' is not one of busy, idle, interrupt"},
	{"role = \"driver\";\ndriver = { address = { mac = \"02:00:00:00:00:01\"; ipv4 = \"10.0.0.1\"; };\n"
	 " routed = \"maybe\";\n models = ( { caches = ( { id = 0; } ); shards = ( { id = 0;\n"
	 "  address = { mac = \"02:00:00:00:00:02\"; ipv4 = \"10.0.0.2\"; };\n"
	 "  bytes_per_token = [64]; capacity_tokens = [10]; } ); } ); };\n",
	 ":3: driver.routed: 'maybe' is not one of warn, refuse"},
	{"role = \"shard\";\nshard = { id = 0; address = { mac = \"02:00:00:00:00:01\"; ipv4 = \"10.0.0.1\"; };\n"
	 " wafer = { mac = \"02:00:00:00:00:01\"; ipv4 = \"10.0.0.2\"; }; routed = 1;\n"
	 " caches = ( { id = 0; bytes_per_token = 64; capacity_tokens = 10; } ); };\n",
	 "shard.routed: "},
	{"role = \"driver\";\ndriver = { address = { mac = \"02:00:00:00:00:01\"; ipv4 = \"10.0.0.1\"; };\n"
	 " models = ( { caches = ( { id = 0; } ); shards = ( { id = 0;\n"
	 "  address = { mac = \"02:00:00:00:00:02\"; ipv4 = \"10.0.0.2\"; };\n"
	 "  bytes_per_token = [64]; capacity_tokens = [10]; } ); } ); };\n"
	 "wafer = { spec_tokens = 4; spec_reject_pct = 101; };\n",
	 ":6: wafer.spec_reject_pct: 101 is out of range 0..100"},
	/* Unknown keys: an error naming the nearest known one, never a silent default. */
	{"role = \"shard\";\nshard = { id = 0; address = { mac = \"02:00:00:00:00:01\"; ipv4 = \"10.0.0.1\"; };\n"
	 " wafer = { mac = \"02:00:00:00:00:01\"; ipv4 = \"10.0.0.2\"; };\n"
	 " caches = ( { id = 0; bytes_per_token = 64; capacity_tokens = 5; } );\n"
	 " batch_timout_ms = 200; };\n",
	 ":5: shard.batch_timout_ms: unknown key (did you mean batch_timeout_ms?)"},
	{"role = \"shard\";\nshard = { id = 0; address = { mac = \"02:00:00:00:00:01\"; ipv4 = \"10.0.0.1\"; };\n"
	 " wafer = { mac = \"02:00:00:00:00:01\"; ipv4 = \"10.0.0.2\"; };\n"
	 " caches = ( { id = 0; bytes_per_token = 64; capacity_tokens = 5; } );\n"
	 " };\nwafer = 5;\n", ":6: wafer: want a group { ... }, not a value"},
	{"role = \"shard\";\nshard = { id = 0; address = { mac = \"02:00:00:00:00:01\"; ipv4 = \"10.0.0.1\"; };\n"
	 " wafer = { mac = \"02:00:00:00:00:01\"; ipv4 = \"10.0.0.2\"; };\n"
	 " caches = ( { id = 0; bytes_per_token = 64; capacity_tokens = 5; } );\n"
	 " };\npoll_mod = \"idle\";\n", ":6: poll_mod: unknown key (did you mean poll_mode?)"},
	{"role = \"shard\";\nshard = { id = 0; address = { mac = \"02:00:00:00:00:01\"; ipv4 = \"10.0.0.1\"; };\n"
	 " wafer = { mac = \"02:00:00:00:00:01\"; ipv4 = \"10.0.0.2\"; };\n"
	 " caches = ( { id = 0; bytes_per_token = 64; capacity_tokens = 5; } );\n"
	 " };\nfrobnicate = 1;\n", ":6: frobnicate: unknown key"},
	/* A required key misspelt: the typo named, not "missing". */
	{"role = \"shard\";\nshard = { idd = 0; address = { mac = \"02:00:00:00:00:01\"; ipv4 = \"10.0.0.1\"; };\n"
	 " wafer = { mac = \"02:00:00:00:00:01\"; ipv4 = \"10.0.0.2\"; };\n"
	 " caches = ( { id = 0; bytes_per_token = 64; capacity_tokens = 5; } ); };\n",
	 ":2: shard.idd: unknown key (did you mean id?)"},
	{"role = \"shard\";\nshard = { id = 0; adress = { mac = \"02:00:00:00:00:01\"; ipv4 = \"10.0.0.1\"; };\n"
	 " wafer = { mac = \"02:00:00:00:00:01\"; ipv4 = \"10.0.0.2\"; };\n"
	 " caches = ( { id = 0; bytes_per_token = 64; capacity_tokens = 5; } ); };\n",
	 ":2: shard.adress: unknown key (did you mean address?)"},
	{"role = \"driver\";\ndriver = { address = { mac = \"02:00:00:00:00:01\"; ipv4 = \"10.0.0.1\"; };\n"
	 " models = ( { caches = ( { id = 0; } ); shards = ( { id = 0;\n"
	 "  address = { mac = \"02:00:00:00:00:02\"; ipv4 = \"10.0.0.2\"; };\n"
	 "  bytes_per_token = [64]; capacity_tokens = [10]; buffer = [1]; } ); } ); };\n",
	 "driver.models.[0].shards.[0].buffer: unknown key (did you mean buffers?)"},
	{"role = \"driver\";\ndriver = { address = { mac = \"02:00:00:00:00:01\"; ipv4 = \"10.0.0.1\"; };\n"
	 " models = ( { caches = ( { id = 0; } ); shards = ( { id = 0;\n"
	 "  address = { mac = \"02:00:00:00:00:02\"; ipv4 = \"10.0.0.2\"; };\n"
	 "  bytes_per_token = [64]; capacity_tokens = [10]; } ); } );\n"
	 " orgs = ( { name = \"acme\"; ttl_last_s = 5; }, { name = \"acme\"; } ); };\n",
	 "driver.orgs.[1].name: 'acme' is named twice (also orgs.[0])"},
	/* DRAM shares: in range, within their cap, summing to at most the whole. */
	{"role = \"driver\";\ndriver = { address = { mac = \"02:00:00:00:00:01\"; ipv4 = \"10.0.0.1\"; };\n"
	 " models = ( { caches = ( { id = 0; } ); shards = ( { id = 0;\n"
	 "  address = { mac = \"02:00:00:00:00:02\"; ipv4 = \"10.0.0.2\"; };\n"
	 "  bytes_per_token = [64]; capacity_tokens = [10]; } ); } );\n"
	 " orgs = ( { name = \"a\"; dram_share = 0.6; }, { name = \"b\"; dram_share = 0.5; } ); };\n",
	 "driver.orgs.[1].dram_share: the DRAM shares sum to 1.1 with this one: above the whole (1)"},
	{"role = \"driver\";\ndriver = { address = { mac = \"02:00:00:00:00:01\"; ipv4 = \"10.0.0.1\"; };\n"
	 " models = ( { caches = ( { id = 0; } ); shards = ( { id = 0;\n"
	 "  address = { mac = \"02:00:00:00:00:02\"; ipv4 = \"10.0.0.2\"; };\n"
	 "  bytes_per_token = [64]; capacity_tokens = [10]; } ); } );\n"
	 " org_default = { dram_share = 0.3; };\n orgs = ( { name = \"a\"; dram_share = 0.8; } ); };\n",
	 "driver.orgs.[0].dram_share: the DRAM shares sum to 1.1 with this one and driver.org_default's"},
	{"role = \"driver\";\ndriver = { address = { mac = \"02:00:00:00:00:01\"; ipv4 = \"10.0.0.1\"; };\n"
	 " models = ( { caches = ( { id = 0; } ); shards = ( { id = 0;\n"
	 "  address = { mac = \"02:00:00:00:00:02\"; ipv4 = \"10.0.0.2\"; };\n"
	 "  bytes_per_token = [64]; capacity_tokens = [10]; } ); } );\n"
	 " orgs = ( { name = \"a\"; dram_share = 0.5; dram_cap = 0.4; } ); };\n",
	 "driver.orgs.[0].dram_share: 0.5 is above dram_cap (0.4)"},
	{"role = \"driver\";\ndriver = { address = { mac = \"02:00:00:00:00:01\"; ipv4 = \"10.0.0.1\"; };\n"
	 " models = ( { caches = ( { id = 0; } ); shards = ( { id = 0;\n"
	 "  address = { mac = \"02:00:00:00:00:02\"; ipv4 = \"10.0.0.2\"; };\n"
	 "  bytes_per_token = [64]; capacity_tokens = [10]; } ); } );\n"
	 " orgs = ( { name = \"a\"; dram_share = -0.1; } ); };\n",
	 "driver.orgs.[0].dram_share: -0.1 is out of range [0, 1]"},
	{"role = \"driver\";\ndriver = { address = { mac = \"02:00:00:00:00:01\"; ipv4 = \"10.0.0.1\"; };\n"
	 " models = ( { caches = ( { id = 0; } ); shards = ( { id = 0;\n"
	 "  address = { mac = \"02:00:00:00:00:02\"; ipv4 = \"10.0.0.2\"; };\n"
	 "  bytes_per_token = [64]; capacity_tokens = [10]; } ); } );\n"
	 " orgs = ( { name = \"a\"; dram_cap = 0; } ); };\n",
	 "driver.orgs.[0].dram_cap: 0 is out of range (0, 1]"},
	{"role = \"driver\";\ndriver = { address = { mac = \"02:00:00:00:00:01\"; ipv4 = \"10.0.0.1\"; };\n"
	 " models = ( { caches = ( { id = 0; } ); shards = ( { id = 0;\n"
	 "  address = { mac = \"02:00:00:00:00:02\"; ipv4 = \"10.0.0.2\"; };\n"
	 "  bytes_per_token = [64]; capacity_tokens = [10]; } ); } );\n"
	 " orgs = ( { name = \"a\"; dram_share = \"half\"; } ); };\n",
	 "driver.orgs.[0].dram_share: must be a number"},
	{"role = \"driver\";\ndriver = { address = { mac = \"02:00:00:00:00:01\"; ipv4 = \"10.0.0.1\"; };\n"
	 " models = ( { caches = ( { id = 0; } ); shards = ( { id = 0;\n"
	 "  address = { mac = \"02:00:00:00:00:02\"; ipv4 = \"10.0.0.2\"; };\n"
	 "  bytes_per_token = [64]; capacity_tokens = [10]; } ); } );\n"
	 " org_default = 0.2; };\n",
	 "driver.org_default: want a group { dram_share; dram_cap; l2_share; l2_cap; }"},
	{"role = \"driver\";\ndriver = { address = { mac = \"02:00:00:00:00:01\"; ipv4 = \"10.0.0.1\"; };\n"
	 " models = ( { caches = ( { id = 0; } ); shards = ( { id = 0;\n"
	 "  address = { mac = \"02:00:00:00:00:02\"; ipv4 = \"10.0.0.2\"; };\n"
	 "  bytes_per_token = [64]; capacity_tokens = [10]; } ); } );\n"
	 " org_default = { dram_shares = 0.2; }; };\n",
	 "driver.org_default.dram_shares: unknown key (did you mean dram_share?)"},
	{"role = \"driver\";\ndriver = { address = { mac = \"02:00:00:00:00:01\"; ipv4 = \"10.0.0.1\"; };\n"
	 " models = ( { caches = ( { id = 0; } ); shards = ( { id = 0;\n"
	 "  address = { mac = \"02:00:00:00:00:02\"; ipv4 = \"10.0.0.2\"; };\n"
	 "  bytes_per_token = [64]; capacity_tokens = [10]; } ); } );\n"
	 " orgs = ( { name = \"a\"; l2_share = 0.7; }, { name = \"b\"; l2_share = 0.4; } ); };\n",
	 "driver.orgs.[1].l2_share: the second tier's shares sum to 1.1 with this one: above the whole (1)"},
	{"role = \"driver\";\ndriver = { address = { mac = \"02:00:00:00:00:01\"; ipv4 = \"10.0.0.1\"; };\n"
	 " models = ( { caches = ( { id = 0; } ); shards = ( { id = 0;\n"
	 "  address = { mac = \"02:00:00:00:00:02\"; ipv4 = \"10.0.0.2\"; };\n"
	 "  bytes_per_token = [64]; capacity_tokens = [10]; } ); } );\n"
	 " orgs = ( { name = \"a\"; l2_share = 0.5; l2_cap = 0.2; } ); };\n",
	 "driver.orgs.[0].l2_share: 0.5 is above l2_cap (0.2)"},
	{"role = \"driver\";\ndriver = { address = { mac = \"02:00:00:00:00:01\"; ipv4 = \"10.0.0.1\"; };\n"
	 " models = ( { caches = ( { id = 0; } ); shards = ( { id = 0;\n"
	 "  address = { mac = \"02:00:00:00:00:02\"; ipv4 = \"10.0.0.2\"; };\n"
	 "  bytes_per_token = [64]; capacity_tokens = [10]; } ); } );\n"
	 " org_default = { l2_cap = 1.5; }; };\n",
	 "driver.org_default.l2_cap: 1.5 is out of range (0, 1]"},
	/* Messages that say what is wrong (they used to mislead). */
	{"role = \"shard\";\nlcores = { ingest = [1.0]; };\n",
	 ":2: lcores.ingest: element 0: want a whole lcore id"},
	{"role = \"shard\";\nmtu = 99999999999999999999;\n",
	 ":2: 99999999999999999999 is too large for a number"},
	{"role = \"shard\";\nshard = { id = 0; address = { mac = \"02:00:00:00:00:01\"; ipv4 = \"10.0.0.1\"; };\n"
	 " wafer = { mac = \"02:00:00:00:00:01\"; ipv4 = \"10.0.0.2\"; };\n"
	 " caches = ( { id = 0; bytes_per_token = 64; capacity_tokens = 5; } );\n"
	 " };\nmtu = 1e30;\n", ":6: mtu: is too large"},
	{"role = \"driver\";\ndriver = { address = { mac = \"02:00:00:00:00:01\"; ipv4 = \"10.0.0.1\"; };\n"
	 " models = ( { caches = ( { id = 0; } ); shards = ( { id = 0;\n"
	 "  address = { mac = \"02:00:00:00:00:02\"; ipv4 = \"10.0.0.2\"; };\n"
	 "  bytes_per_token = [1e30]; capacity_tokens = [10]; } ); } ); };\n",
	 "shards.[0].bytes_per_token: element 0 is too large"},
	{"role = \"shard\";\nmtu = 1500;\nmtu = 9000;\n", ":3: duplicate setting name 'mtu'"},
	{"\xef\xbb\xbfrole = \"shard\";\n", ":1: starts with a UTF-8 byte-order mark"},
	{"role = \"shard\";\nshard = 7;\n", ":2: shard: want a group { ... }, not a value"},
	{"role = \"shard\";\nmtu = ;\n", ":2: syntax error"},
	/* The second tier. */
	{"role = \"shard\";\nshard = { id = 0; address = { mac = \"02:00:00:00:00:01\"; ipv4 = \"10.0.0.1\"; };\n"
	 " wafer = { mac = \"02:00:00:00:00:01\"; ipv4 = \"10.0.0.2\"; };\n"
	 " caches = ( { id = 0; bytes_per_token = 64; capacity_tokens = 5; } );\n"
	 " l2 = { dir = \"/tmp\"; path = \"/tmp/x.l2\"; capacity_tokens = [640]; }; };\n",
	 "shard.l2: give one of path (a file or block device) and dir"},
	{"role = \"shard\";\nshard = { id = 0; address = { mac = \"02:00:00:00:00:01\"; ipv4 = \"10.0.0.1\"; };\n"
	 " wafer = { mac = \"02:00:00:00:00:01\"; ipv4 = \"10.0.0.2\"; };\n"
	 " caches = ( { id = 0; bytes_per_token = 64; capacity_tokens = 5; } );\n"
	 " l2 = { dir = \"/tmp\";\n capacity_tokens = [32]; }; };\n",
	 "shard.l2.capacity_tokens: element 0 (32) holds no whole column of 64 tokens"},
	{"role = \"shard\";\nshard = { id = 0; address = { mac = \"02:00:00:00:00:01\"; ipv4 = \"10.0.0.1\"; };\n"
	 " wafer = { mac = \"02:00:00:00:00:01\"; ipv4 = \"10.0.0.2\"; };\n"
	 " caches = ( { id = 0; bytes_per_token = 64; capacity_tokens = 5; } );\n"
	 " l2 = { dir = \"/tmp\"; }; };\n",
	 "shard.l2.capacity_tokens: missing (an array of 1 integers, one per cache)"},
	{"role = \"driver\";\ndriver = { address = { mac = \"02:00:00:00:00:01\"; ipv4 = \"10.0.0.1\"; };\n"
	 " models = ( { caches = ( { id = 0; rule = \"swa\"; window = 100; } );\n"
	 " shards = ( { id = 0; address = { mac = \"02:00:00:00:00:02\"; ipv4 = \"10.0.0.2\"; };\n"
	 "  bytes_per_token = [64]; capacity_tokens = [10]; l2_tokens = [100]; } ); } ); };\n",
	 "shards.[0].l2_tokens: cache 0 is a sliding window"},
	{"role = \"driver\";\ndriver = { address = { mac = \"02:00:00:00:00:01\"; ipv4 = \"10.0.0.1\"; };\n"
	 " models = ( { caches = ( { id = 0; } ); shards = ( { id = 0;\n"
	 "  address = { mac = \"02:00:00:00:00:02\"; ipv4 = \"10.0.0.2\"; };\n"
	 "  bytes_per_token = [64]; capacity_tokens = [10]; l2_tokens = [100]; },\n"
	 "  { id = 1; address = { mac = \"02:00:00:00:00:03\"; ipv4 = \"10.0.0.3\"; };\n"
	 "  bytes_per_token = [64]; capacity_tokens = [10]; } ); } ); };\n",
	 "shards.[1].l2_tokens: every shard of a model has a second tier, or none"},
	{"role = \"driver\";\ndriver = { address = { mac = \"02:00:00:00:00:01\"; ipv4 = \"10.0.0.1\"; };\n"
	 " l2_admit = \"twice\"; models = (); };\n",
	 ":3: driver.l2_admit: 'twice' is not one of all, seen2, short"},
	/* A choice is its whole word: neither a longer one nor one with more after it. */
	{"role = \"driver\";\ndriver = { address = { mac = \"02:00:00:00:00:01\"; ipv4 = \"10.0.0.1\"; };\n"
	 " l2_admit = \"shortest\"; models = (); };\n",
	 ":3: driver.l2_admit: 'shortest' is not one of all, seen2, short"},
	{"role = \"driver\";\ndriver = { address = { mac = \"02:00:00:00:00:01\"; ipv4 = \"10.0.0.1\"; };\n"
	 " l2_admit = \"short\\n\"; models = (); };\n",
	 "driver.l2_admit: "},
	{"role = \"driver\";\ndriver = { address = { mac = \"02:00:00:00:00:01\"; ipv4 = \"10.0.0.1\"; };\n"
	 " l2_admit = 2; models = (); };\n",
	 "driver.l2_admit"},
	/* Products of values that each check clean: a
	 * column of 4 GiB wrapped the tier's 32-bit request size to 0. */
	{"role = \"shard\";\nshard = { id = 0; address = { mac = \"02:00:00:00:00:01\"; ipv4 = \"10.0.0.1\"; };\n"
	 " wafer = { mac = \"02:00:00:00:00:01\"; ipv4 = \"10.0.0.2\"; };\n"
	 " caches = ( { id = 0; bytes_per_token = 1048576; capacity_tokens = 5; } );\n"
	 " l2 = { dir = \"/tmp\"; column = 4096; capacity_tokens = [8192]; }; };\n",
	 "shard.l2.column: 4096 tokens x cache 0's bytes_per_token (1048576) is 4294967296"},
	{"role = \"shard\";\nmtu = 9000;\nshard = { id = 0; address = { mac = \"02:00:00:00:00:01\"; ipv4 = \"10.0.0.1\"; };\n"
	 " wafer = { mac = \"02:00:00:00:00:01\"; ipv4 = \"10.0.0.2\"; };\n"
	 " caches = ( { id = 0; bytes_per_token = 67108864; capacity_tokens = 5; } ); };\n",
	 "bytes_per_token: 67108864 bytes x the 557 tokens an EVICT can name at mtu 9000"},
	{"role = \"shard\";\nmtu = 1500;\nshard = { id = 0; address = { mac = \"02:00:00:00:00:01\"; ipv4 = \"10.0.0.1\"; };\n"
	 " wafer = { mac = \"02:00:00:00:00:01\"; ipv4 = \"10.0.0.2\"; };\n"
	 " caches = ( { id = 0; bytes_per_token = 16777216; capacity_tokens = 5; } );\n"
	 " l2 = { dir = \"/tmp\"; column = 1; capacity_tokens = [1099511627776L]; }; };\n",
	 "shard.l2.capacity_tokens: element 0: 1099511627776 columns of 16781312 bytes"},
	/* A shard is silent for away_ms before it can be taken for gone. */
	{"role = \"driver\";\ndriver = { address = { mac = \"02:00:00:00:00:01\"; ipv4 = \"10.0.0.1\"; };\n"
	 " away_ms = 1000; dead_ms = 500; models = (); };\n",
	 "driver.dead_ms: 500 is below driver.away_ms (1000)"},
	/* libconfig 1.5 would exit the process on an include it cannot read. */
	{"role = \"shard\";\n  @include \".\"\n", ":2: @include: not supported"},
};

ParameterizedTestParameters(config, a_bad_value_names_its_file_line_and_key)
{
	return cr_make_param_array(struct bad, bads, sizeof(bads) / sizeof(bads[0]));
}

ParameterizedTest(struct bad *b, config, a_bad_value_names_its_file_line_and_key)
{
	char path[64];
	FILE *f;

	snprintf(path, sizeof(path), "/tmp/kvss_cfg_test_%d.cfg", (int)getpid());
	f = fopen(path, "w");
	cr_assert_not_null(f);
	fputs(b->text, f);
	fclose(f);
	cr_assert_eq(kvss_config_load(path, &cfg, err, sizeof(err)), -1, "accepted: %s", b->text);
	unlink(path);
	cr_assert(strstr(err, path) == err, "message does not start with the file: %s", err);
	cr_assert_not_null(strstr(err, b->want), "message '%s' lacks '%s'", err, b->want);
}

Test(config, a_missing_file_is_named)
{
	cr_assert_eq(kvss_config_load("/nonexistent/kvss.cfg", &cfg, err, sizeof(err)), -1);
	cr_assert_not_null(strstr(err, "/nonexistent/kvss.cfg: cannot read"), "%s", err);
}

Test(config, a_directory_is_refused_by_name)
{
	cr_assert_eq(kvss_config_load("/tmp", &cfg, err, sizeof(err)), -1);
	cr_assert_str_eq(err, "/tmp: not a regular file (a directory)");
}

Test(config, a_device_is_refused_before_it_is_read)
{
	cr_assert_eq(kvss_config_load("/dev/zero", &cfg, err, sizeof(err)), -1);
	cr_assert_str_eq(err, "/dev/zero: not a regular file (a character device)");
}

/* Opened the usual way, a FIFO with no writer blocks until the timeout. */
Test(config, a_fifo_with_no_writer_is_refused_at_once, .timeout = 20)
{
	char path[64];

	snprintf(path, sizeof(path), "/tmp/kvss_test_fifo_%d", (int)getpid());
	unlink(path);
	cr_assert_eq(mkfifo(path, 0600), 0);
	cr_assert_eq(kvss_config_load(path, &cfg, err, sizeof(err)), -1);
	unlink(path);
	cr_assert(strstr(err, "not a regular file (a FIFO)") != NULL, "%s", err);
}

/* What a parse may take is bounded: a huge file (of comments here) is no configuration. */
Test(config, a_file_over_the_bound_is_refused_by_size)
{
	char path[64];
	FILE *f;
	size_t i;

	snprintf(path, sizeof(path), "/tmp/kvss_test_huge_%d.cfg", (int)getpid());
	f = fopen(path, "w");
	cr_assert_not_null(f);
	for (i = 0; i <= KVSS_CFG_MAX_BYTES / 64; i++)
		fprintf(f, "# %061zu\n", i); /* 64 bytes */
	fclose(f);
	cr_assert_eq(kvss_config_load(path, &cfg, err, sizeof(err)), -1);
	unlink(path);
	cr_assert(strstr(err, "over 16 MiB: not a configuration") != NULL, "%s", err);
}

Test(config, shard_drivers_lists_the_addresses_control_is_taken_from)
{
	cr_assert_eq(kvss_config_load("config/bare-metal-shard.cfg", &cfg, err, sizeof(err)), 0, "%s",
		     err);
	cr_assert_eq(cfg.shard.num_drivers, 1);
	cr_assert_eq(cfg.shard.driver_ip[0], 0x0a140001);
	/* Every example shard lists its driver (control is taken only from it). */
	cr_assert_eq(kvss_config_load("config/ci-pcap-shard.cfg", &cfg, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(cfg.shard.num_drivers, 1);
	cr_assert_eq(cfg.shard.driver_ip[0], 0x0a630001);
	cr_assert_eq(kvss_config_load("config/memif-shard1.cfg", &cfg, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(cfg.shard.num_drivers, 1);
}

/* shard.l2.format: false unless said; a bool, named when it is not. */
Test(config, shard_l2_format_is_off_unless_set_and_a_bool)
{
	static const char *const base =
		"role = \"shard\";\nshard = { id = 3; model = 1;\n"
		" address = { mac = \"02:00:00:00:00:01\"; ipv4 = \"10.0.0.1\"; };\n"
		" wafer = { mac = \"02:00:00:00:00:01\"; ipv4 = \"10.0.0.2\"; };\n"
		" caches = ( { id = 0; bytes_per_token = 64; capacity_tokens = 5; } );\n"
		" l2 = { dir = \"/var/lib/kvss\"; capacity_tokens = [640];%s }; };\n";
	static const char *const fmt[] = {"", " format = true;", " format = 1;"};
	char path[64], text[600];
	unsigned int i;
	int rc[3];
	FILE *f;

	cr_assert_eq(kvss_config_load("config/memif-shard0.cfg", &cfg, err, sizeof(err)), 0, "%s", err);
	cr_assert_str_eq(cfg.shard.l2.path, "/var/lib/kvss/shard-0-0.l2",
			 "the examples keep L2 where only the service can write");
	cr_assert_not(cfg.shard.l2.format);
	snprintf(path, sizeof(path), "/tmp/kvss_cfg_fmt_%d.cfg", (int)getpid());
	for (i = 0; i < 3; i++) {
		snprintf(text, sizeof(text), base, fmt[i]);
		f = fopen(path, "w");
		cr_assert_not_null(f);
		fputs(text, f);
		fclose(f);
		rc[i] = kvss_config_load(path, &cfg, err, sizeof(err));
		if (i == 0)
			cr_assert(rc[0] == 0 && !cfg.shard.l2.format, "%s", err);
		if (i == 1)
			cr_assert(rc[1] == 0 && cfg.shard.l2.format &&
				  strcmp(cfg.shard.l2.path, "/var/lib/kvss/shard-1-3.l2") == 0, "%s", err);
	}
	unlink(path);
	cr_assert_eq(rc[2], -1);
	cr_assert(strstr(err, ":6: shard.l2.format: must be true or false") != NULL, "%s", err);
}

/*
 * The shared group (PROTOCOL.md section 10): missing, nothing changes;
 * given, every value read and every bad one refused naming its key.
 */
Test(config, the_shared_group_is_read_and_checked_by_key)
{
	static const char *const base =
		"role = \"shard\";\nshard = { id = 3; model = 1;\n"
		" address = { mac = \"02:00:00:00:00:01\"; ipv4 = \"10.0.0.1\"; };\n"
		" wafer = { mac = \"02:00:00:00:00:01\"; ipv4 = \"10.0.0.2\"; };\n"
		" caches = ( { id = 0; bytes_per_token = %s; capacity_tokens = 5; } ); };\n%s";
	static const struct {
		const char *bpt, *shared, *want; /* want NULL: loads */
	} c[] = {
		{"64", "", NULL},
		{"64", "shared = { conf = \"/etc/ceph/ceph.conf\"; };\n", NULL},
		{"64", "shared = { conf = \"/c\"; pool = \"p\"; client = \"client.kvss\"; depth = 4;"
		       " column = 32; admit = \"l2\"; write = false; max_up = 9; latency_us = 7000;"
		       " gbps = 0.5; };\n", NULL},
		{"64", "shared = 1;\n", ":6: shared: want a group"},
		{"64", "shared = { conf = \"/c\"; depth = 0; };\n", ":6: shared.depth: 0 is out of range"},
		{"64", "shared = { conf = \"/c\"; op_timeout_ms = 10; };\n",
		 ":6: shared.op_timeout_ms: 10 is out of range"},
		{"64", "shared = { conf = \"/c\"; client = \"admin\"; };\n",
		 "shared.client: 'admin': a Ceph client name starts with \"client.\""},
		{"64", "shared = { conf = \"/c\"; pool = \"\"; };\n", "shared.pool: empty"},
		{"64", "shared = { conf = \"/c\"; admit = \"some\"; };\n", "shared.admit: 'some' is not one of"},
		{"64", "shared = { conf = \"/c\"; write = 2; };\n", "shared.write: must be true or false"},
		{"64", "shared = { conf = \"/c\"; colum = 64; };\n", "colum"},
		{"64", "shared = { conf = \"/c\"; gbps = 0.0; };\n", "shared.gbps: 0: must be positive"},
		{"64", "shared = { conf = \"/c\"; gbps = -3; };\n", "shared.gbps: -3 is out of range"},
		{"64", "shared = { conf = \"/c\"; key_file = \"/k\"; old_key_file = \"/o\"; };\n", NULL},
		{"64", "shared = { conf = \"/c\"; old_key_file = \"/o\"; };\n",
		 "shared.old_key_file: given without key_file"},
		{"64", "shared = { conf = \"/c\"; key_file = \"/k\"; old_key_file = \"/k\"; };\n",
		 "shared.old_key_file: '/k' is key_file too"},
		{"64", "shared = { conf = \"/c\"; key_file = 5; };\n", "shared.key_file"},
		{"64", "shared = { conf = \"/c\"; key_file = \"/k\"; org_key_file = \"/s\"; };\n", NULL},
		{"64", "shared = { conf = \"/c\"; org_key_file = \"/s\"; };\n",
		 "shared.org_key_file: given without key_file"},
		{"64", "shared = { conf = \"/c\"; key_file = \"/k\"; org_key_file = \"/k\"; };\n",
		 "shared.org_key_file: '/k' is a master key file too"},
		{"64", "shared = { conf = \"/c\"; key_file = \"/k\"; old_key_file = \"/o\"; "
		       "org_key_file = \"/o\"; };\n", "shared.org_key_file: '/o' is a master key file too"},
		{"64", "shared = { conf = \"/c\"; key_file = \"/k\"; org_key_file = 1; };\n",
		 "shared.org_key_file"},
		{"64", "shared = { conf = \"/c\"; gbps = \"fast\"; };\n", "shared.gbps"},
		{"64", "shared = { conf = \"/c\"; latency_us = -1; };\n",
		 "shared.latency_us: -1 is out of range"},
		/* A slice is at most 64 MiB: 4096 tokens of 32 KiB is 128 MiB. */
		{"32768", "shared = { conf = \"/c\"; column = 4096; };\n",
		 "shared.column: 4096 tokens x shard.caches.[0].bytes_per_token (32768) is 134217728 bytes"},
	};
	char path[64], text[900];
	unsigned int i;
	FILE *f;

	snprintf(path, sizeof(path), "/tmp/kvss_cfg_sh_%d.cfg", (int)getpid());
	for (i = 0; i < sizeof(c) / sizeof(c[0]); i++) {
		int rc;

		snprintf(text, sizeof(text), base, c[i].bpt, c[i].shared);
		f = fopen(path, "w");
		cr_assert_not_null(f);
		fputs(text, f);
		fclose(f);
		rc = kvss_config_load(path, &cfg, err, sizeof(err));
		if (c[i].want == NULL) {
			cr_assert_eq(rc, 0, "case %u: %s", i, err);
		} else {
			cr_assert_eq(rc, -1, "case %u loads", i);
			cr_assert(strstr(err, c[i].want) != NULL, "case %u: '%s' lacks '%s'", i, err,
				  c[i].want);
		}
		if (i == 0)
			cr_assert_eq(cfg.shared.conf[0], '\0', "no group: no shared level");
		if (i == 1)
			cr_assert(strcmp(cfg.shared.pool, "kvss") == 0 &&
				  strcmp(cfg.shared.client, "client.admin") == 0 &&
				  cfg.shared.op_timeout_ms == 5000 && cfg.shared.admit == KVSS_SHARED_ADMIT_ALL &&
				  cfg.shared.write && cfg.shared.column == 64 && cfg.shared.max_up == 256 &&
				  cfg.shared.latency_us == 20000 && cfg.shared.gbps == 2,
				  "the defaults");
		if (i == 2)
			cr_assert(strcmp(cfg.shared.pool, "p") == 0 && cfg.shared.depth == 4 &&
				  cfg.shared.column == 32 && cfg.shared.admit == KVSS_SHARED_ADMIT_L2 &&
				  !cfg.shared.write && cfg.shared.max_up == 9 && cfg.shared.latency_us == 7000 &&
				  cfg.shared.gbps == 0.5, "as written");
	}
	unlink(path);
}

/*
 * With the shared level a driver names every model (driver.models.[m].name,
 * PROTOCOL.md section 10: part of the layout, so that two models of one
 * geometry never read each other's objects); without one the name is
 * optional.
 */
Test(config, the_shared_level_wants_every_model_named)
{
	char path[64], text[8192], *at;
	FILE *f = fopen("config/all-in-one.cfg", "r");
	size_t n;
	int k;

	cr_assert_not_null(f);
	n = fread(text, 1, sizeof(text) - 200, f);
	fclose(f);
	text[n] = '\0';
	snprintf(path, sizeof(path), "/tmp/kvss_cfg_nm_%d.cfg", (int)getpid());
	for (k = 0; k < 2; k++) {
		FILE *o = fopen(path, "w");

		cr_assert_not_null(o);
		if (k == 1) {
			at = strstr(text, "name = \"demo-model\";");
			cr_assert_not_null(at);
			memset(at, ' ', strlen("name = \"demo-model\";"));
		}
		fputs(text, o);
		fputs("\nshared = { conf = \"/c\"; };\n", o);
		fclose(o);
		if (k == 0) {
			cr_assert_eq(kvss_config_load(path, &cfg, err, sizeof(err)), 0, "%s", err);
			cr_assert_str_eq(cfg.driver.models[0].name, "demo-model");
		} else {
			cr_assert_eq(kvss_config_load(path, &cfg, err, sizeof(err)), -1, "loads unnamed");
			cr_assert(strstr(err, "driver.models.[0].name: missing") != NULL, "'%s'", err);
		}
	}
	unlink(path);
}

/* ---- When requests arrive, what a prefill costs, which hits are refilled ------------------- */

/*
 * A driver of @p nmodels models (one shard each) with @p driver_extra in
 * its group and @p wafer as its wafer group ("" for none), loaded into
 * cfg: 0, or the load's failure with err.
 */
static int
ttft_cfg(unsigned int nmodels, const char *driver_extra, const char *wafer)
{
	static const char *const model =
		"  { caches = ( { id = 0; } ); shards = ( { id = 0;\n"
		"    address = { mac = \"02:00:00:00:00:0%u\"; ipv4 = \"10.0.0.%u\"; };\n"
		"    bytes_per_token = [64]; capacity_tokens = [1000]; } ); }";
	char path[64], text[4096];
	size_t len;
	unsigned int i;
	FILE *f;
	int rc;

	len = (size_t)snprintf(text, sizeof(text),
			       "role = \"driver\";\ndriver = { address = { mac = \"02:00:00:00:00:01\"; "
			       "ipv4 = \"10.0.0.1\"; };\n %s\n models = (\n", driver_extra);
	for (i = 0; i < nmodels; i++) {
		len += (size_t)snprintf(text + len, sizeof(text) - len, model, i + 2, i + 2);
		len += (size_t)snprintf(text + len, sizeof(text) - len, "%s\n", i + 1 < nmodels ? "," : "");
	}
	snprintf(text + len, sizeof(text) - len, " ); };\n%s%s%s", wafer[0] ? "wafer = { " : "", wafer,
		 wafer[0] ? " };\n" : "");
	snprintf(path, sizeof(path), "/tmp/kvss_cfg_ttft_%d.cfg", (int)getpid());
	f = fopen(path, "w");
	cr_assert_not_null(f);
	fputs(text, f);
	fclose(f);
	memset(&cfg, 0xa5, sizeof(cfg)); /* nothing read is left from a load before */
	rc = kvss_config_load(path, &cfg, err, sizeof(err));
	unlink(path);
	return rc;
}

/*
 * Not given: a closed loop, the trace at its speed, 5 a second from seed 1,
 * no fixed prefill cost, the adaptive policy. Given: read as written, a
 * float or a whole number alike, the bounds themselves taken.
 * Catches: a default changed, a key read into the wrong field, an integer
 * refused where a number is wanted (cfg_get_real), a bound taken as
 * outside (1e6, 1e-6, 10000000, 2^62).
 */
Test(config, the_arrival_keys_have_defaults_and_take_what_is_written)
{
	cr_assert_eq(ttft_cfg(1, "", ""), 0, "%s", err);
	cr_assert_eq(cfg.wafer.arrivals, KVSS_ARRIVALS_CLOSED);
	cr_assert(cfg.wafer.time_scale == 1.0, "time_scale %g", cfg.wafer.time_scale);
	cr_assert(cfg.wafer.arrival_rate == 5.0, "arrival_rate %g", cfg.wafer.arrival_rate);
	cr_assert_eq(cfg.wafer.arrival_seed, 1);
	cr_assert_eq(cfg.wafer.prefill_overhead_us, 0);
	cr_assert_eq(cfg.driver.refill_policy, KVSS_POLICY_ADAPTIVE);
	cr_assert_eq(ttft_cfg(1, "refill_policy = \"io-only\";",
			      "arrivals = \"trace\"; time_scale = 0.25; arrival_rate = 2;"
			      " arrival_seed = 99; prefill_overhead_us = 1500;"),
		     0, "%s", err);
	cr_assert_eq(cfg.wafer.arrivals, KVSS_ARRIVALS_TRACE);
	cr_assert(cfg.wafer.time_scale == 0.25, "time_scale %g", cfg.wafer.time_scale);
	cr_assert(cfg.wafer.arrival_rate == 2.0, "an integer rate: %g", cfg.wafer.arrival_rate);
	cr_assert_eq(cfg.wafer.arrival_seed, 99);
	cr_assert_eq(cfg.wafer.prefill_overhead_us, 1500);
	cr_assert_eq(cfg.driver.refill_policy, KVSS_POLICY_IO_ONLY);
	cr_assert_eq(ttft_cfg(1, "refill_policy = \"compute-only\";",
			      "arrivals = \"poisson\"; time_scale = 3; arrival_rate = 0.5;"
			      " arrival_seed = 0;"),
		     0, "%s", err);
	cr_assert_eq(cfg.wafer.arrivals, KVSS_ARRIVALS_POISSON);
	cr_assert(cfg.wafer.time_scale == 3.0, "an integer scale: %g", cfg.wafer.time_scale);
	cr_assert(cfg.wafer.arrival_rate == 0.5, "arrival_rate %g", cfg.wafer.arrival_rate);
	cr_assert_eq(cfg.wafer.arrival_seed, 0);
	cr_assert_eq(cfg.driver.refill_policy, KVSS_POLICY_COMPUTE_ONLY);
	/* The bounds are in. */
	cr_assert_eq(ttft_cfg(1, "", "arrivals = \"closed\"; time_scale = 1e-6; arrival_rate = 1e6;"
				     " arrival_seed = 4611686018427387904L; prefill_overhead_us = 10000000;"),
		     0, "%s", err);
	cr_assert(cfg.wafer.time_scale == 1e-6 && cfg.wafer.arrival_rate == 1e6);
	cr_assert_eq(cfg.wafer.arrival_seed, 1ull << 62);
	cr_assert_eq(cfg.wafer.prefill_overhead_us, 10000000);
	cr_assert_eq(ttft_cfg(1, "", "time_scale = 1e6; arrival_rate = 1e-6;"), 0, "%s", err);
	cr_assert(cfg.wafer.time_scale == 1e6 && cfg.wafer.arrival_rate == 1e-6);
}

/*
 * Every hostile value of a new key refused, naming the key (and the line:
 * the wafer group is on line 9 of ttft_cfg's text, the driver's extra on
 * line 3). Catches: a bound dropped (0, negatives, 1e7, below 1e-6), a
 * string or a bool taken for a number, an unknown choice taken for the
 * default, a key named wrongly in the message.
 */
Test(config, hostile_arrival_and_policy_values_are_refused_naming_the_key)
{
	static const char *const real_keys[] = {"time_scale", "arrival_rate"};
	static const char *const hostile[] = {"0",   "0.0",  "-1",	 "-0.5", "1e7", "1000001",
					      "\"x\"", "1e-9", "9e-7", "true", "[1]", "1e400"};
	static const struct {
		const char *driver, *wafer, *want;
	} c[] = {
		{"", "arrivals = \"open\";", ":9: wafer.arrivals: 'open' is not one of closed, trace, poisson"},
		{"", "arrivals = \"Trace\";", ":9: wafer.arrivals: 'Trace' is not one of"},
		{"", "arrivals = 1;", ":9: wafer.arrivals"},
		{"refill_policy = \"never\";", "",
		 ":3: driver.refill_policy: 'never' is not one of adaptive, io-only, compute-only, split"},
		{"refill_policy = \"io_only\";", "", ":3: driver.refill_policy: 'io_only' is not one of"},
		{"refill_policy = \"\";", "", ":3: driver.refill_policy"},
		{"", "prefill_overhead_us = -1;", ":9: wafer.prefill_overhead_us: -1 is out of range"},
		{"", "prefill_overhead_us = 10000001;",
		 ":9: wafer.prefill_overhead_us: 10000001 is out of range"},
		{"", "prefill_overhead_us = 1.5;", ":9: wafer.prefill_overhead_us: must be a whole number"},
		{"", "prefill_overhead_us = \"x\";", ":9: wafer.prefill_overhead_us"},
		{"", "arrival_seed = -1;", ":9: wafer.arrival_seed: -1 is out of range"},
		{"", "arrival_seed = 4611686018427387905L;", ":9: wafer.arrival_seed: 4611686018427387905 is out"},
		{"", "arrival_seed = \"x\";", ":9: wafer.arrival_seed"},
	};
	char wafer[96], want[64];
	unsigned int i, k;

	for (k = 0; k < 2; k++)
		for (i = 0; i < sizeof(hostile) / sizeof(hostile[0]); i++) {
			snprintf(wafer, sizeof(wafer), "arrivals = \"poisson\"; %s = %s;", real_keys[k],
				 hostile[i]);
			cr_assert_eq(ttft_cfg(1, "", wafer), -1, "accepted: %s", wafer);
			snprintf(want, sizeof(want), ":9: wafer.%s: ", real_keys[k]);
			cr_assert(strstr(err, want) != NULL, "'%s': '%s' lacks '%s'", wafer, err, want);
		}
	for (i = 0; i < sizeof(c) / sizeof(c[0]); i++) {
		cr_assert_eq(ttft_cfg(1, c[i].driver, c[i].wafer), -1, "accepted: %s%s", c[i].driver,
			     c[i].wafer);
		cr_assert(strstr(err, c[i].want) != NULL, "'%s%s': '%s' lacks '%s'", c[i].driver,
			  c[i].wafer, err, c[i].want);
	}
}

/*
 * The adaptive policy gives every model the wafer's prefill rate in tokens
 * per ns (driver.recompute_tokens_per_s / 1e9), the rule prefixcache's
 * lookup compares a refill's estimate with; io-only and compute-only give
 * none (every hit refilled, or the emulator looks nothing up), and adaptive
 * without a rate none either.
 * Catches: the rate set for io-only (or compute-only), not set for
 * adaptive, set for model 0 only, set in tokens per s or per us, set
 * before the policy is read.
 */
/*
 * "split" is adaptive (every model gets the rate) with Cake's split for
 * the first model only: its prefill is the wafer's one compute, which a
 * front takes; a draft's front would be neither refilled nor computed.
 * The other policies split nothing.
 * Catches: split not read, split for every model, split without the rate,
 * split left on under adaptive.
 */
Test(config, the_split_policy_splits_the_first_models_hits_only)
{
	cr_assert_eq(ttft_cfg(2, "recompute_tokens_per_s = 2000000; refill_policy = \"split\";", ""), 0,
		     "%s", err);
	cr_assert_eq(cfg.driver.refill_policy, KVSS_POLICY_SPLIT);
	cr_assert(cfg.driver.pc.model[0].split && !cfg.driver.pc.model[1].split);
	cr_assert(cfg.driver.pc.model[0].recompute_tokens_per_ns == 2000000 / 1e9 &&
		  cfg.driver.pc.model[1].recompute_tokens_per_ns == 2000000 / 1e9);
	cr_assert_eq(ttft_cfg(2, "recompute_tokens_per_s = 2000000;", ""), 0, "%s", err);
	cr_assert(!cfg.driver.pc.model[0].split && !cfg.driver.pc.model[1].split, "adaptive splits");
}

Test(config, the_adaptive_policy_gives_each_model_the_prefill_rate_per_ns)
{
	cr_assert_eq(ttft_cfg(2, "recompute_tokens_per_s = 2000000;", ""), 0, "%s", err);
	cr_assert_eq(cfg.driver.refill_policy, KVSS_POLICY_ADAPTIVE, "the default");
	cr_assert_eq(cfg.driver.pc.num_models, 2);
	cr_assert(cfg.driver.pc.model[0].recompute_tokens_per_ns == 2000000 / 1e9 &&
		  cfg.driver.pc.model[1].recompute_tokens_per_ns == 2000000 / 1e9,
		  "%g and %g tokens/ns, want 0.002", cfg.driver.pc.model[0].recompute_tokens_per_ns,
		  cfg.driver.pc.model[1].recompute_tokens_per_ns);
	cr_assert_eq(ttft_cfg(1, "recompute_tokens_per_s = 3; refill_policy = \"adaptive\";", ""), 0, "%s",
		     err);
	cr_assert(cfg.driver.pc.model[0].recompute_tokens_per_ns == 3 / 1e9, "%g",
		  cfg.driver.pc.model[0].recompute_tokens_per_ns);
	cr_assert_eq(ttft_cfg(2, "recompute_tokens_per_s = 2000000; refill_policy = \"io-only\";", ""), 0,
		     "%s", err);
	cr_assert(cfg.driver.pc.model[0].recompute_tokens_per_ns == 0 &&
		  cfg.driver.pc.model[1].recompute_tokens_per_ns == 0,
		  "io-only refills every hit: %g", cfg.driver.pc.model[0].recompute_tokens_per_ns);
	cr_assert_eq(cfg.driver.recompute_tokens_per_s, 2000000, "the emulator's prefill rate stays");
	cr_assert_eq(ttft_cfg(1, "recompute_tokens_per_s = 2000000; refill_policy = \"compute-only\";",
			      ""),
		     0, "%s", err);
	cr_assert(cfg.driver.pc.model[0].recompute_tokens_per_ns == 0, "%g",
		  cfg.driver.pc.model[0].recompute_tokens_per_ns);
	cr_assert_eq(ttft_cfg(1, "", ""), 0, "%s", err);
	cr_assert(cfg.driver.pc.model[0].recompute_tokens_per_ns == 0, "adaptive, no rate: %g",
		  cfg.driver.pc.model[0].recompute_tokens_per_ns);
}
