/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * kvss-plan's model on small clusters whose answers are computed by hand in
 * the comments, its bad inputs, and its emitted shard configurations.
 */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "config.h"
#include "plan.h"

static struct plan_cluster c;
static struct plan_result r;
static char err[512], path[64];

/* Write @p text to a file and load it; returns kvss_cluster_load's result. */
static int
load(const char *text)
{
	FILE *f;
	int rc;

	snprintf(path, sizeof(path), "/tmp/kvss_plan_test_%d.cfg", (int)getpid());
	f = fopen(path, "w");
	cr_assert_not_null(f);
	fputs(text, f);
	fclose(f);
	rc = kvss_cluster_load(path, &c, err, sizeof(err));
	unlink(path);
	return rc;
}

/*
 * One node of 100 GB; one box with two shards of 1 and 3 weight-I/O streams;
 * 1 MB per token per stream; base 10 GB; no discount; exact tokens.
 */
#define ONE_NODE                                                                                   \
	"nodes = ( { name = \"n0\"; ram_gb = 100; } );\n"                                          \
	"boxes = ( { name = \"b0\"; shards = ( { domain = 0; wio = 1; node = \"n0\"; },\n"         \
	"                                      { domain = 1; wio = 3; node = \"n0\"; } ); } );\n"

#define JOB(name, extra)                                                                           \
	"{ name = \"" name "\"; boxes = [\"b0\"]; bytes_per_token_per_wio = 1000000; base_mem_gb = 10; " \
	extra " }"

static void
run(void)
{
	cr_assert_eq(plan_run(&c, &r, err, sizeof(err)), 0, "%s", err);
}

Test(plan, equal_memory_wastes_what_the_smallest_shard_cannot_use)
{
	cr_assert_eq(load(ONE_NODE "jobs = ( " JOB("j", "") " );\n"
				   "policy = { kind = \"equal\"; discount = 0.0; round_tokens = 1; };\n"),
		     0, "%s", err);
	run();
	/* 50 GB each: (50 - 10) GB / 1 MB = 40000 tokens, / 3 MB = 13333. */
	cr_assert_eq(r.ngrants, 2);
	cr_assert_eq(r.grant[0].tokens, 40000);
	cr_assert_eq(r.grant[1].tokens, 13333);
	cr_assert_eq(r.job[0].usable, 13333);
	/* One pool of 100 GB: (100 - 10) GB / 4 MB = 22500. */
	cr_assert_eq(r.job[0].ideal, 22500);
	/* The 1-stream shard holds 13333 usable tokens in 50 GB: 26.667 GB wasted. */
	cr_assert_eq(r.grant[0].wasted, 50000000000ull - 10000000000ull - 13333000000ull);
	cr_assert_eq(r.grant[1].wasted, 50000000000ull - 10000000000ull - 39999000000ull);
}

Test(plan, fair_with_keep_ratio_scales_every_shard_together)
{
	cr_assert_eq(load(ONE_NODE "jobs = ( " JOB("j", "") " );\n"
				   "policy = { kind = \"fair\"; keep_ratio = true; discount = 0.0; round_tokens = 1; };\n"),
		     0, "%s", err);
	run();
	/* 2 x 10 GB + T x 4 MB <= 100 GB: T = 20000 on both. */
	cr_assert_eq(r.grant[0].tokens, 20000);
	cr_assert_eq(r.grant[1].tokens, 20000);
	cr_assert_eq(r.job[0].usable, 20000);
	cr_assert_eq(r.grant[0].wasted + r.grant[1].wasted, 0);
	cr_assert_float_eq(r.job[0].ratio, 20000.0 / 22500.0, 1e-9);
	/* Without keep_ratio each shard takes half the node: as equal memory. */
	c.keep_ratio = false;
	run();
	cr_assert_eq(r.job[0].usable, 13333);
}

Test(plan, the_discount_and_the_search_round_down)
{
	cr_assert_eq(load(ONE_NODE "jobs = ( " JOB("j", "") " );\n"
				   "policy = { kind = \"fair\"; discount = 0.2; round_tokens = 1000; };\n"),
		     0, "%s", err);
	run();
	/* 80 GB: (80 - 20) GB / 4 MB = 15000. */
	cr_assert_eq(r.job[0].usable, 15000);
	c.round_tokens = 7000;
	run();
	cr_assert_eq(r.job[0].usable, 14000, "rounded down to a multiple of 7000");
	c.job[0].tokens_upper = 9000;
	run();
	cr_assert_eq(r.job[0].usable, 7000, "never above tokens_upper");
}

Test(plan, exact_grants_are_taken_as_given_and_checked_against_the_node)
{
	cr_assert_eq(load(ONE_NODE "jobs = ( " JOB("j", "grants = ( { box = \"b0\"; domain = 0; tokens = 5000; },"
						     " { box = \"b0\"; domain = 1; tokens = 5000; } );") " );\n"
				   "policy = { kind = \"exact\"; };\n"),
		     0, "%s", err);
	run();
	cr_assert_eq(r.grant[0].tokens, 5000);
	cr_assert_eq(r.grant[0].bytes, 15000000000ull);
	cr_assert_eq(r.grant[1].bytes, 25000000000ull);
	cr_assert_eq(r.overcommitted, 0);
	c.job[0].grant[0] = c.job[0].grant[1] = 40000; /* 50 + 130 GB > 100 GB */
	run();
	cr_assert_eq(r.overcommitted, 1);
	c.job[0].has_grant[1] = false;
	cr_assert_eq(plan_run(&c, &r, err, sizeof(err)), -1);
	cr_assert_not_null(strstr(err, "grants: none for box 'b0' domain 1"), "%s", err);
}

Test(plan, ratios_share_the_memory_across_jobs)
{
	cr_assert_eq(load(ONE_NODE "jobs = ( " JOB("hot", "ratio = 3.0;") ", " JOB("cold", "ratio = 1.0;") " );\n"
				   "policy = { kind = \"ratio\"; discount = 0.0; round_tokens = 1; };\n"),
		     0, "%s", err);
	run();
	/* 75 GB and 25 GB: (75 - 20) / 4 MB = 13750, (25 - 20) / 4 MB = 1250. */
	cr_assert_eq(r.job[0].usable, 13750);
	cr_assert_eq(r.job[1].usable, 1250);
	/* fair by boxes: both use the one box, each gets it all: over-committed. */
	c.policy = PLAN_FAIR;
	run();
	cr_assert_eq(r.job[0].usable, 20000);
	cr_assert_eq(r.overcommitted, 1);
}

Test(plan, the_example_cluster_shows_the_designs_point)
{
	cr_assert_eq(kvss_cluster_load("config/cluster-70b.cfg", &c, err, sizeof(err)), 0, "%s", err);
	c.discount = 0;
	run();
	/* Perfect proportional sharding sits between equal memory and the ideal pool. */
	{
		uint64_t ideal = r.job[0].ideal, perfect = r.job[0].usable, equal;

		c.policy = PLAN_EQUAL;
		run();
		equal = r.job[0].usable;
		cr_assert(ideal > perfect && perfect > equal, "%lu %lu %lu", (unsigned long)ideal,
			  (unsigned long)perfect, (unsigned long)equal);
		cr_assert(ideal > 27000000 && ideal < 27700000, "ideal %lu", (unsigned long)ideal);
	}
}

struct bad {
	char text[600];
	char want[96];
};

static struct bad bads[] = {
	{ONE_NODE, "jobs: want a list of 1..16 jobs"},
	{"nodes = ( { name = \"n0\"; ram_gb = -5; } );\n", "nodes.[0].ram_gb: -5 is out of range"},
	{"nodes = ( { name = \"n0\"; ram_gb = 10; reserved_gb = 12; } );\n",
	 "nodes.[0].reserved_gb: 12 leaves no memory of 10"},
	{"nodes = ( { name = \"n0\"; ram_gb = 100; } );\n"
	 "boxes = ( { name = \"b0\"; shards = ( { domain = 0; wio = 1; node = \"n9\"; } ); } );\n",
	 ":2: boxes.[0].shards.[0].node: no storage node named 'n9'"},
	{ONE_NODE "jobs = ( { name = \"j\"; boxes = [\"b7\"]; bytes_per_token_per_wio = 1; } );\n",
	 "jobs.[0].boxes: element 0: no box named 'b7'"},
	{ONE_NODE "jobs = ( " JOB("j", "") " );\npolicy = { kind = \"greedy\"; };\n",
	 "policy.kind: 'greedy' is not one of equal, exact, fair, ratio"},
	{ONE_NODE "jobs = ( " JOB("j", "tokens_lower = 10; tokens_upper = 5;") " );\n",
	 "jobs.[0].tokens_lower: 10 is above tokens_upper"},
};

ParameterizedTestParameters(plan, a_bad_cluster_names_its_key)
{
	return cr_make_param_array(struct bad, bads, sizeof(bads) / sizeof(bads[0]));
}

ParameterizedTest(struct bad *b, plan, a_bad_cluster_names_its_key)
{
	cr_assert_eq(load(b->text), -1, "accepted: %s", b->text);
	cr_assert(strstr(err, path) == err, "message does not start with the file: %s", err);
	cr_assert_not_null(strstr(err, b->want), "message '%s' lacks '%s'", err, b->want);
}

Test(plan, emitted_shard_configurations_load_in_kvss)
{
	char cmd[512], dir[64], f[128];
	struct kvss_config kc;
	char kerr[512];

	snprintf(dir, sizeof(dir), "/tmp/kvss_plan_emit_%d", (int)getpid());
	snprintf(cmd, sizeof(cmd), "build/kvss-plan config/cluster-70b.cfg --emit-config %s >/dev/null", dir);
	cr_assert_eq(system(cmd), 0);
	snprintf(f, sizeof(f), "%s/llama70b-csx1-d0.cfg", dir);
	cr_assert_eq(kvss_config_load(f, &kc, kerr, sizeof(kerr)), 0, "%s", kerr);
	cr_assert_eq(kc.role, KVSS_ROLE_SHARD);
	cr_assert_eq(kc.shard.store.cache[0].bytes_per_token, 5 * 13653);
	cr_assert_eq(kc.shard.store.cache[0].num_buffers, 5);
	cr_assert_gt(kc.shard.store.cache[0].capacity_tokens, 1000000);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	cr_assert_eq(system(cmd), 0);
}

Test(plan, strict_makes_a_node_that_cannot_hold_its_grants_an_error)
{
	char file[64], cmd[256];
	FILE *f;

	snprintf(file, sizeof(file), "/tmp/kvss_plan_strict_%d.cfg", (int)getpid());
	f = fopen(file, "w");
	cr_assert_not_null(f);
	/* Two jobs on the one box, each given all of it by box share: 200% of the node. */
	fputs(ONE_NODE "jobs = ( " JOB("a", "") ", " JOB("b", "") " );\n"
		       "policy = { kind = \"fair\"; discount = 0.0; };\n", f);
	fclose(f);
	snprintf(cmd, sizeof(cmd), "build/kvss-plan %s >/dev/null 2>&1", file);
	cr_assert_eq(system(cmd), 0, "without --strict: a warning only");
	snprintf(cmd, sizeof(cmd), "build/kvss-plan %s --strict >/dev/null 2>&1", file);
	cr_assert_eq(WEXITSTATUS(system(cmd)), 1);
	snprintf(cmd, sizeof(cmd), "build/kvss-plan %s --policy ratio --strict >/dev/null 2>&1", file);
	cr_assert_eq(system(cmd), 0, "ratios share the node: it fits");
	unlink(file);
}
