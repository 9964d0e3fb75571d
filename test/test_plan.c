/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * kvss-plan's model on small clusters whose answers are computed by hand in
 * the comments, its bad inputs, and its emitted shard configurations.
 */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
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

/* Write @p text to /tmp/kvss_plan_TAG_PID.cfg, named in @p file. */
static void
write_cluster(char *file, size_t n, const char *tag, const char *text)
{
	FILE *f;

	snprintf(file, n, "/tmp/kvss_plan_%s_%d.cfg", tag, (int)getpid());
	f = fopen(file, "w");
	cr_assert_not_null(f);
	fputs(text, f);
	fclose(f);
}

/* Run @p cmd (stderr joined to stdout), its output into @p out: its wait status. */
static int
capture(const char *cmd, char *out, size_t cap)
{
	FILE *p = popen(cmd, "r");
	size_t n;

	cr_assert_not_null(p);
	n = fread(out, 1, cap - 1, p);
	out[n] = '\0';
	return pclose(p);
}

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
	/* The 1-stream shard holds 40000 tokens, 13333 usable: 26.667 GB wasted.
	 * The 3-stream one uses all it holds; 3 MB of its budget is left. */
	cr_assert_eq(r.grant[0].wasted, 50000000000ull - 10000000000ull - 13333000000ull);
	cr_assert_eq(r.grant[0].left, 0);
	cr_assert_eq(r.grant[1].wasted, 0);
	cr_assert_eq(r.grant[1].left, 50000000000ull - 10000000000ull - 39999000000ull);
	/* What is allocated is what is used plus what is wasted, per shard and job. */
	for (unsigned int g = 0; g < r.ngrants; g++)
		cr_assert_eq(r.grant[g].bytes, r.grant[g].used + r.grant[g].wasted, "grant %u", g);
	cr_assert_eq(r.job[0].bytes, r.job[0].used + r.job[0].wasted);
	cr_assert_eq(r.job[0].budget, r.job[0].bytes + r.job[0].left);
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
	char want[160];
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
	/* The same box, shard, job or a job's box twice. */
	{"nodes = ( { name = \"n0\"; ram_gb = 100; } );\n"
	 "boxes = ( { name = \"b0\"; shards = ( { domain = 0; wio = 1; node = \"n0\"; } ); },\n"
	 "          { name = \"b0\"; shards = ( { domain = 1; wio = 1; node = \"n0\"; } ); } );\n",
	 ":3: boxes.[1].name: box 'b0' appears twice"},
	{"nodes = ( { name = \"n0\"; ram_gb = 100; } );\n"
	 "boxes = ( { name = \"b0\"; shards = ( { domain = 2; wio = 1; node = \"n0\"; },\n"
	 "                                      { domain = 2; wio = 3; node = \"n0\"; } ); } );\n",
	 ":3: boxes.[0].shards.[1].domain: box 'b0' has a shard in domain 2 already"},
	{ONE_NODE "jobs = ( " JOB("j", "") ",\n " JOB("j", "") " );\n",
	 ":5: jobs.[1].name: job 'j' appears twice"},
	{ONE_NODE "jobs = ( { name = \"j\"; boxes = [\"b0\", \"b0\"]; bytes_per_token_per_wio = 1; } );\n",
	 "jobs.[0].boxes: element 1: box 'b0' is listed twice"},
	/* Names become file names and lines of emitted configurations. */
	{ONE_NODE "jobs = ( " JOB("../../../../x", "") " );\n",
	 "jobs.[0].name: '../../../../x' is not a name: letters, digits"},
	{ONE_NODE "jobs = ( " JOB("a\\nrole = \\\"driver\\\";", "") " );\n",
	 "jobs.[0].name: 'a?role = \"driver\";' is not a name"},
	{"nodes = ( { name = \"n0\"; ram_gb = 100; } );\n"
	 "boxes = ( { name = \".hidden\"; shards = ( { domain = 0; wio = 1; node = \"n0\"; } ); } );\n",
	 "boxes.[0].name: '.hidden' is not a name"},
	{"nodes = ( { name = \"n/0\"; ram_gb = 100; } );\n", "nodes.[0].name: 'n/0' is not a name"},
	/* Counts are whole: never cut silently. */
	{"nodes = ( { name = \"n0\"; ram_gb = 100; } );\n"
	 "boxes = ( { name = \"b0\"; shards = ( { domain = 0; wio = 2.7; node = \"n0\"; } ); } );\n",
	 "boxes.[0].shards.[0].wio: 2.7 is not a whole number"},
	{"nodes = ( { name = \"n0\"; ram_gb = 100; } );\n"
	 "boxes = ( { name = \"b0\"; shards = ( { domain = 0.5; wio = 1; node = \"n0\"; } ); } );\n",
	 "boxes.[0].shards.[0].domain: 0.5 is not a whole number"},
	{ONE_NODE "jobs = ( " JOB("j", "") " );\npolicy = { round_tokens = 999.9; };\n",
	 "policy.round_tokens: 999.9 is not a whole number"},
	{ONE_NODE "jobs = ( " JOB("j", "grants = ( { box = \"b0\"; domain = 0; tokens = 10.5; } );")
	 " );\n", "jobs.[0].grants.[0].tokens: 10.5 is not a whole number"},
	{ONE_NODE "jobs = ( { name = \"j\"; boxes = [\"b0\"]; bytes_per_token_per_wio = 1000.5; } );\n",
	 "jobs.[0].bytes_per_token_per_wio: 1000.5 is not a whole number"},
	/* A key nobody reads is refused with the nearest known one, never a silent default. */
	{ONE_NODE "jobs = ( " JOB("j", "token_upper = 5;") " );\n",
	 ":4: jobs.[0].token_upper: unknown key (did you mean tokens_upper?)"},
	{ONE_NODE "jobs = ( " JOB("j", "") " );\npolicy = { kidn = \"equal\"; };\n",
	 ":5: policy.kidn: unknown key (did you mean kind?)"},
	{ONE_NODE "jobs = ( " JOB("j", "") " );\npolicy = { keep_ration = false; };\n",
	 "policy.keep_ration: unknown key (did you mean keep_ratio?)"},
	{ONE_NODE "jobs = ( " JOB("j", "") " );\npolcy = { kind = \"equal\"; };\n",
	 ":5: polcy: unknown key (did you mean policy?)"},
	{ONE_NODE "jobs = ( " JOB("j", "") " );\nshard = { id = 1; };\n", ":5: shard: unknown key"},
	{"nodes = ( { name = \"n0\"; ram_gb = 100; ram_bg = 5; } );\n"
	 "boxes = ( { name = \"b0\"; shards = ( { domain = 0; wio = 1; node = \"n0\"; } ); } );\n"
	 "jobs = ( " JOB("j", "") " );\n",
	 ":1: nodes.[0].ram_bg: unknown key (did you mean ram_gb?)"},
	{ONE_NODE "jobs = ( " JOB("j", "grants = ( { box = \"b0\"; domian = 0; domain = 0; tokens = 1; } );")
	 " );\n", "jobs.[0].grants.[0].domian: unknown key (did you mean domain?)"},
	{ONE_NODE "jobs = ( " JOB("j", "") " );\npolicy = { kind = 5; };\n",
	 "policy.kind: must be a string"},
	{ONE_NODE "jobs = ( " JOB("j", "") " );\npolicy = { keep_ratio = 1; };\n",
	 "policy.keep_ratio: must be true or false"},
	{ONE_NODE "jobs = ( " JOB("j", "") " );\npolicy = \"fair\";\n",
	 "policy: want a group { ... }, not a value"},
	/* A job's organizations: named once, at least a token guaranteed, a cap not under it. */
	{ONE_NODE "jobs = ( " JOB("j", "orgs = ( { name = \"a\"; tokens = 5; }, { name = \"a\"; tokens = 6; } );")
	 " );\n", "jobs.[0].orgs.[1].name: organization 'a' appears twice in job 'j'"},
	{ONE_NODE "jobs = ( " JOB("j", "orgs = ( { name = \"a\"; tokens = 0; } );") " );\n",
	 "jobs.[0].orgs.[0].tokens: 0 is out of range"},
	{ONE_NODE "jobs = ( " JOB("j", "orgs = ( { name = \"a\"; tokens = -3; } );") " );\n",
	 "jobs.[0].orgs.[0].tokens: -3 is out of range"},
	{ONE_NODE "jobs = ( " JOB("j", "orgs = ( { name = \"a\"; tokens = 2.5; } );") " );\n",
	 "jobs.[0].orgs.[0].tokens: 2.5 is not a whole number"},
	{ONE_NODE "jobs = ( " JOB("j", "orgs = ( { name = \"a\"; } );") " );\n",
	 "jobs.[0].orgs.[0].tokens"},
	{ONE_NODE "jobs = ( " JOB("j", "orgs = ( { name = \"a\"; tokens = 10; cap_tokens = 9; } );") " );\n",
	 "jobs.[0].orgs.[0].cap_tokens: 9 is below its tokens (10)"},
	{ONE_NODE "jobs = ( " JOB("j", "orgs = ( { name = \"a\"; tokens = 10; cap = 20; } );") " );\n",
	 "jobs.[0].orgs.[0].cap: unknown key"},
	{ONE_NODE "jobs = ( " JOB("j", "orgs = ( { name = \"a\\\"; x\"; tokens = 10; } );") " );\n",
	 "jobs.[0].orgs.[0].name: 'a\"; x' is not a name"},
	{ONE_NODE "jobs = ( " JOB("j", "orgs = { name = \"a\"; tokens = 10; };") " );\n",
	 "jobs.[0].orgs: want a list of 1 to 64 organizations"},
	{ONE_NODE "jobs = ( " JOB("j", "orgs = ( );") " );\n",
	 "jobs.[0].orgs: want a list of 1 to 64 organizations ( { name; tokens; cap_tokens; } ); "
	 "leave it out for none"},
	{ONE_NODE "jobs = ( " JOB("j", "orgs = ( { name = \"a\"; tokens = 5; },\n 5 );") " );\n",
	 ":5: jobs.[0].orgs.[1]: want a group"},
	{ONE_NODE "jobs = ( " JOB("j", "orgs = ( { name = 5; tokens = 5; } );") " );\n",
	 "jobs.[0].orgs.[0].name: not a string"},
	{ONE_NODE "jobs = ( " JOB("j", "orgs = ( { name = \"\"; tokens = 5; } );") " );\n",
	 "jobs.[0].orgs.[0].name: empty"},
	{ONE_NODE "jobs = ( " JOB("j", "orgs = ( { name = \"a\"; tokens = 10; cap_tokens = 0; } );") " );\n",
	 "jobs.[0].orgs.[0].cap_tokens: 0 is out of range"},
	{ONE_NODE "jobs = ( " JOB("j", "orgs = ( { name = \"a\"; tokens = 2000000; cap_tokens = 1999999; "
				"} );") " );\n",
	 "jobs.[0].orgs.[0].cap_tokens: 1999999 is below its tokens (2000000)"},
	/* Past 32 bits without its L, libconfig 1.5 keeps the low 32 bits: refused, never read wrong. */
	{ONE_NODE "jobs = ( " JOB("j", "orgs = ( { name = \"a\"; tokens = 4296967296; } );") " );\n",
	 ":4: 4296967296 does not fit libconfig's 32-bit integers, which would read it wrong: "
	 "write 4296967296L"},
	{ONE_NODE "jobs = ( " JOB("j", "tokens_upper = 2147483648;") " );\n",
	 ":4: 2147483648 does not fit libconfig's 32-bit integers"},
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

/*
 * Two jobs over 132 shards (264 grants, past every byte of the address
 * scheme's counters): every emitted configuration loads, no two share a
 * MAC or an IPv4 address, none has the wafer's, and shard ids do not
 * repeat within a job.
 */
Test(plan, emitted_addresses_and_shard_ids_are_unique)
{
	static struct {
		char job[8];
		uint16_t id;
		uint8_t mac[6];
		uint32_t ip;
	} seen[600];
	static struct kvss_config kc;
	char file[64], dir[64], cmd[256], kerr[512], line[128];
	unsigned int n = 0, a, b;
	FILE *f, *ls;

	snprintf(file, sizeof(file), "/tmp/kvss_plan_many_%d.cfg", (int)getpid());
	snprintf(dir, sizeof(dir), "/tmp/kvss_plan_many_%d.d", (int)getpid());
	f = fopen(file, "w");
	cr_assert_not_null(f);
	fputs("nodes = ( { name = \"n0\"; ram_gb = 100000; } );\nboxes = (\n", f);
	for (a = 0; a < 33; a++)
		fprintf(f, "%s{ name = \"b%u\"; shards = ( { domain = 0; wio = 1; node = \"n0\"; }, "
			   "{ domain = 1; wio = 1; node = \"n0\"; }, { domain = 2; wio = 1; node = \"n0\"; }, "
			   "{ domain = 3; wio = 1; node = \"n0\"; } ); }\n", a ? ", " : "", a);
	fputs(");\njobs = (", f);
	for (b = 0; b < 2; b++) {
		fprintf(f, "%s{ name = \"j%c\"; bytes_per_token_per_wio = 10000; base_mem_gb = 1; boxes = [",
			b ? ", " : "", 'a' + b);
		for (a = 0; a < 33; a++)
			fprintf(f, "%s\"b%u\"", a ? ", " : "", a);
		fputs("]; }\n", f);
	}
	fputs(");\n", f);
	fclose(f);
	snprintf(cmd, sizeof(cmd), "build/kvss-plan %s --emit-config %s >/dev/null 2>&1", file, dir);
	cr_assert_eq(system(cmd), 0);
	snprintf(cmd, sizeof(cmd), "ls %s", dir);
	ls = popen(cmd, "r");
	cr_assert_not_null(ls);
	while (fgets(line, sizeof(line), ls) != NULL && n < 600) {
		char p[256];

		line[strcspn(line, "\n")] = '\0';
		snprintf(p, sizeof(p), "%s/%s", dir, line);
		cr_assert_eq(kvss_config_load(p, &kc, kerr, sizeof(kerr)), 0, "%s", kerr);
		snprintf(seen[n].job, sizeof(seen[n].job), "%.*s", (int)strcspn(line, "-"), line);
		seen[n].id = kc.shard.id;
		memcpy(seen[n].mac, kc.shard.addr.mac, 6);
		seen[n].ip = kc.shard.addr.ipv4;
		cr_assert(memcmp(seen[n].mac, kc.shard.wafer.mac, 6) != 0, "%s has the wafer's MAC", line);
		cr_assert_neq(seen[n].ip, kc.shard.wafer.ipv4, "%s has the wafer's IPv4", line);
		n++;
	}
	pclose(ls);
	cr_assert_eq(n, 264);
	for (a = 0; a < n; a++)
		for (b = a + 1; b < n; b++) {
			cr_assert(memcmp(seen[a].mac, seen[b].mac, 6) != 0, "MAC twice (%u, %u)", a, b);
			cr_assert_neq(seen[a].ip, seen[b].ip, "IPv4 twice (%u, %u)", a, b);
			cr_assert(strcmp(seen[a].job, seen[b].job) != 0 || seen[a].id != seen[b].id,
				  "job %s: shard id %u twice", seen[a].job, seen[a].id);
		}
	snprintf(cmd, sizeof(cmd), "rm -rf %s %s", dir, file);
	cr_assert_eq(system(cmd), 0);
}

/* --compare fails (exit 1) when a policy leaves the job nothing; --json parses. */
Test(plan, compare_fails_when_a_policy_does_and_speaks_json)
{
	char file[64], cmd[512];

	/* 55 GB of base per shard: equal memory (50 GB each) holds nothing. */
	write_cluster(file, sizeof(file), "cmp",
		      ONE_NODE "jobs = ( { name = \"j\"; boxes = [\"b0\"]; bytes_per_token_per_wio = 1000; "
			       "base_mem_gb = 55; } );\n");
	snprintf(cmd, sizeof(cmd), "build/kvss-plan %s --compare >/dev/null 2>&1", file);
	cr_assert_eq(WEXITSTATUS(system(cmd)), 1, "equal memory leaves no token: exit 1");
	/* 1 byte per token: more tokens than a shard's cache takes; emitting fails. */
	write_cluster(file, sizeof(file), "cmp",
		      ONE_NODE "jobs = ( { name = \"j\"; boxes = [\"b0\"]; bytes_per_token_per_wio = 1; } );\n");
	snprintf(cmd, sizeof(cmd), "build/kvss-plan %s --emit-config /tmp/kvss_plan_cmp_%d.d 2>&1 | "
		 "grep -q 'more than one kvss shard cache holds'", file, (int)getpid());
	cr_assert_eq(system(cmd), 0, "too many tokens for a shard: said");
	snprintf(cmd, sizeof(cmd), "build/kvss-plan %s --emit-config /tmp/kvss_plan_cmp_%d.d >/dev/null 2>&1",
		 file, (int)getpid());
	cr_assert_eq(WEXITSTATUS(system(cmd)), 1, "too many tokens for a shard: exit 1");
	snprintf(cmd, sizeof(cmd), "rm -rf /tmp/kvss_plan_cmp_%d.d", (int)getpid());
	cr_assert_eq(system(cmd), 0);
	snprintf(cmd, sizeof(cmd), "build/kvss-plan config/cluster-70b.cfg --compare >/dev/null 2>&1");
	cr_assert_eq(system(cmd), 0);
	snprintf(cmd, sizeof(cmd),
		 "build/kvss-plan config/cluster-70b.cfg --json | python3 -c 'import json, sys; "
		 "d = json.load(sys.stdin); j = d[\"jobs\"][0]; "
		 "sys.exit(0 if j[\"bytes\"] == j[\"used\"] + j[\"wasted\"] == sum(s[\"bytes\"] for s in d[\"shards\"]) "
		 "and j[\"budget\"] == j[\"bytes\"] + j[\"left\"] and len(d[\"shards\"]) == 8 else 1)'");
	cr_assert_eq(system(cmd), 0, "--json: one object whose figures add up");
	snprintf(cmd, sizeof(cmd), "build/kvss-plan config/cluster-70b.cfg --compare --json | python3 -c "
		 "'import json, sys; d = json.load(sys.stdin); sys.exit(0 if d[\"equal_pct\"] == 62.2 else 1)'");
	cr_assert_eq(system(cmd), 0, "--compare --json");
	unlink(file);
}

/*
 * --emit-config writes into its directory only. The reader refuses a job
 * named "../x" (above); here, through the program: exit 2, nothing written
 * anywhere, the directory not even made.
 */
Test(plan, emit_config_never_writes_outside_its_directory)
{
	char file[64], cmd[512], dir[64], escaped[96];
	int st;

	snprintf(dir, sizeof(dir), "/tmp/kvss_plan_esc_%d.d", (int)getpid());
	snprintf(escaped, sizeof(escaped), "/tmp/kvss_plan_esc_%d-b0-d0.cfg", (int)getpid());
	snprintf(cmd, sizeof(cmd), ONE_NODE "jobs = ( { name = \"../kvss_plan_esc_%d\"; boxes = [\"b0\"]; "
		 "bytes_per_token_per_wio = 1000000; base_mem_gb = 10; } );\n", (int)getpid());
	write_cluster(file, sizeof(file), "esc", cmd);
	snprintf(cmd, sizeof(cmd), "build/kvss-plan %s --emit-config %s >/dev/null 2>&1", file, dir);
	st = system(cmd);
	cr_assert_eq(WEXITSTATUS(st), 2, "a job named ../x: exit 2 (was %d)", WEXITSTATUS(st));
	cr_assert_neq(access(escaped, F_OK), 0, "%s was written", escaped);
	cr_assert_neq(access(dir, F_OK), 0, "%s was made", dir);
	unlink(escaped);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	cr_assert_eq(system(cmd), 0);
	unlink(file);
}

/*
 * A budget the job's base memory does not fit: 62,500 GB x 0.8 = 50,000 GB
 * for a shard whose base alone is 100,000 GB. The plan allocates the base
 * anyway (no token): 50,000 GB over, said, exit 1, nothing emitted.
 */
Test(plan, a_plan_over_its_budget_is_an_error)
{
	char file[64], cmd[512], dir[64];
	char out[4096];
	int st;

	write_cluster(file, sizeof(file), "over",
		      "nodes = ( { name = \"n0\"; ram_gb = 62500; } );\n"
		      "boxes = ( { name = \"b0\"; shards = ( { domain = 0; wio = 1; node = \"n0\"; } ); } );\n"
		      "jobs = ( { name = \"j\"; boxes = [\"b0\"]; bytes_per_token_per_wio = 1000; "
		      "base_mem_gb = 100000; } );\npolicy = { kind = \"equal\"; };\n");
	snprintf(dir, sizeof(dir), "/tmp/kvss_plan_over_%d.d", (int)getpid());
	snprintf(cmd, sizeof(cmd), "build/kvss-plan %s --emit-config %s 2>&1", file, dir);
	st = capture(cmd, out, sizeof(out));
	cr_assert_eq(WEXITSTATUS(st), 1, "over budget: exit 1 (was %d)\n%s", WEXITSTATUS(st), out);
	cr_assert_not_null(strstr(out, "budget 50000.0 GB, OVER BUDGET by 50000.0 GB"), "%s", out);
	cr_assert_not_null(strstr(out, "kvss-plan: job j: allocated 100000.0 GB, 50000.0 GB over its "
				       "budget of 50000.0 GB: a shard's base memory (base_mem_gb"), "%s", out);
	cr_assert_neq(access(dir, F_OK), 0, "%s was made", dir);
	snprintf(cmd, sizeof(cmd), "build/kvss-plan %s --json 2>/dev/null | python3 -c 'import json, sys; "
		 "d = json.load(sys.stdin); j = d[\"jobs\"][0]; "
		 "sys.exit(0 if j[\"over\"] == 50000 * 10**9 and j[\"budget\"] + j[\"over\"] == j[\"bytes\"] + j[\"left\"] else 1)'",
		 file);
	cr_assert_eq(system(cmd), 0, "--json: the job's over, and budget + over = bytes + left");
	unlink(file);
}

Test(plan, strict_makes_a_node_that_cannot_hold_its_grants_an_error)
{
	char file[64], cmd[256];

	/* Two jobs on the one box, each given all of it by box share: 200% of the node. */
	write_cluster(file, sizeof(file), "strict",
		      ONE_NODE "jobs = ( " JOB("a", "") ", " JOB("b", "") " );\n"
			       "policy = { kind = \"fair\"; discount = 0.0; };\n");
	snprintf(cmd, sizeof(cmd), "build/kvss-plan %s >/dev/null 2>&1", file);
	cr_assert_eq(system(cmd), 0, "without --strict: a warning only");
	snprintf(cmd, sizeof(cmd), "build/kvss-plan %s --strict >/dev/null 2>&1", file);
	cr_assert_eq(WEXITSTATUS(system(cmd)), 1);
	snprintf(cmd, sizeof(cmd), "build/kvss-plan %s --policy ratio --strict >/dev/null 2>&1", file);
	cr_assert_eq(system(cmd), 0, "ratios share the node: it fits");
	unlink(file);
}

/*
 * The driver's fraction for a count of tokens, worked by hand: a share is
 * the least six-decimal fraction whose tokens (rounded down, as the driver
 * makes them) reach the guarantee; a cap the most whose tokens stay within.
 */
Test(plan, a_guarantee_becomes_the_least_share_that_gives_it)
{
	cr_assert_float_eq(plan_fraction(1, 3, true), 0.333334, 1e-12); /* 0.333333 x 3 = 0.99.. */
	cr_assert_float_eq(plan_fraction(2, 3, false), 0.999999, 1e-12); /* any f < 1: 2 of 3 */
	cr_assert_float_eq(plan_fraction(500000, 1000000, true), 0.5, 1e-12);
	cr_assert_float_eq(plan_fraction(500000, 1000000, false), 0.5, 1e-12);
	cr_assert_float_eq(plan_fraction(7, 5, true), 1, 1e-12); /* does not fit: 1, seen by its tokens */
	cr_assert_float_eq(plan_fraction(1, 0, true), 1, 1e-12);
}

/*
 * A job's organizations on a plan whose usable tokens are not round: each
 * share gives at least its guarantee and one step less would not; each cap
 * at most its tokens and one step more would pass them; no cap is 1; the
 * sums are the guarantees'.
 */
Test(plan, organizations_get_the_drivers_shares_of_what_the_job_can_use)
{
	uint16_t k;

	cr_assert_eq(load(ONE_NODE "jobs = ( " JOB("j", "orgs = ( { name = \"acme\"; tokens = 7001; "
						    "cap_tokens = 12345; }, { name = \"initech\"; tokens = 333; } );")
			  " );\npolicy = { kind = \"fair\"; discount = 0.13; round_tokens = 1; };\n"),
		     0, "%s", err);
	run();
	cr_assert_eq(c.job[0].norgs, 2);
	cr_assert_gt(r.job[0].usable, 12345);
	for (k = 0; k < 2; k++) {
		const struct plan_org *o = &c.job[0].org[k];
		const struct plan_org_result *x = &r.job[0].org[k];
		double u = (double)r.job[0].usable;

		cr_assert_geq((uint64_t)(x->share * u), o->tokens, "%s: share %.6f", o->name, x->share);
		cr_assert_lt((uint64_t)((x->share - 1e-6) * u), o->tokens, "%s: not the least", o->name);
		cr_assert_eq(x->share_tokens, (uint64_t)(x->share * u));
		if (o->cap_tokens) {
			cr_assert_leq((uint64_t)(x->cap * u), o->cap_tokens, "%s: cap %.6f", o->name, x->cap);
			cr_assert_gt((uint64_t)((x->cap + 1e-6) * u), o->cap_tokens, "%s: not the most", o->name);
		} else {
			cr_assert_float_eq(x->cap, 1, 1e-12);
		}
	}
	cr_assert_eq(r.job[0].org_tokens, 7001 + 333);
	cr_assert_float_eq(r.job[0].org_share_sum, r.job[0].org[0].share + r.job[0].org[1].share, 1e-12);
	cr_assert(!r.job[0].orgs_over);
}

/*
 * Guarantees past what the job can use: an error (exit 1) naming the job,
 * the tokens and jobs.orgs, before any configuration is written; --json
 * says the organizations do not fit.
 */
Test(plan, guarantees_past_what_the_job_can_use_are_an_error)
{
	char file[64], cmd[512], dir[64], out[4096];
	int st;

	write_cluster(file, sizeof(file), "orgs_over",
		      ONE_NODE "jobs = ( " JOB("j", "orgs = ( { name = \"a\"; tokens = 15000; }, "
						  "{ name = \"b\"; tokens = 10000; } );")
			       " );\npolicy = { kind = \"fair\"; discount = 0.0; };\n");
	snprintf(dir, sizeof(dir), "/tmp/kvss_plan_orgs_over_%d.d", (int)getpid());
	snprintf(cmd, sizeof(cmd), "build/kvss-plan %s --emit-config %s 2>&1", file, dir);
	st = capture(cmd, out, sizeof(out));
	cr_assert_eq(WEXITSTATUS(st), 1, "exit %d\n%s", WEXITSTATUS(st), out);
	cr_assert_not_null(strstr(out, "kvss-plan: job j: its organizations are guaranteed 25000 tokens"),
			   "%s", out);
	cr_assert_not_null(strstr(out, "(jobs.orgs)"), "%s", out);
	cr_assert_not_null(strstr(out, "MORE THAN THE JOB CAN USE"), "%s", out);
	cr_assert_neq(access(dir, F_OK), 0, "%s was made", dir);
	snprintf(cmd, sizeof(cmd), "build/kvss-plan %s --json 2>/dev/null | python3 -c 'import json, sys; "
		 "j = json.load(sys.stdin)[\"jobs\"][0]; "
		 "sys.exit(0 if j[\"orgs_fit\"] is False and j[\"org_tokens\"] == 25000 else 1)'", file);
	cr_assert_eq(system(cmd), 0, "--json: orgs_fit false, org_tokens 25000");
	unlink(file);
}

/*
 * What --emit-config writes for the organizations is what a driver loads:
 * spliced into the all-in-one example's driver section, kvss's own
 * configuration reader takes it, with the plan's shares and caps.
 */
Test(plan, emitted_organizations_load_in_a_kvss_driver)
{
	char cmd[512], dir[64], f[128], cfgf[128], kerr[512], line[256];
	static struct kvss_config kc;
	FILE *in, *orgs, *out;

	write_cluster(f, sizeof(f), "orgs_emit",
		      ONE_NODE "jobs = ( " JOB("j", "orgs = ( { name = \"acme\"; tokens = 4000; "
						  "cap_tokens = 9000; }, { name = \"initech\"; tokens = 333; } );")
			       " );\npolicy = { kind = \"fair\"; discount = 0.13; round_tokens = 1; };\n");
	cr_assert_eq(load(ONE_NODE "jobs = ( " JOB("j", "orgs = ( { name = \"acme\"; tokens = 4000; "
						    "cap_tokens = 9000; }, { name = \"initech\"; tokens = 333; } );")
			  " );\npolicy = { kind = \"fair\"; discount = 0.13; round_tokens = 1; };\n"),
		     0, "%s", err);
	run();
	snprintf(dir, sizeof(dir), "/tmp/kvss_plan_orgs_emit_%d.d", (int)getpid());
	snprintf(cmd, sizeof(cmd), "build/kvss-plan %s --emit-config %s >/dev/null", f, dir);
	cr_assert_eq(system(cmd), 0);
	snprintf(cmd, sizeof(cmd), "%s/j-orgs.cfg", dir);
	orgs = fopen(cmd, "r");
	cr_assert_not_null(orgs, "%s not written", cmd);
	in = fopen("config/all-in-one.cfg", "r");
	cr_assert_not_null(in);
	snprintf(cfgf, sizeof(cfgf), "/tmp/kvss_plan_orgs_driver_%d.cfg", (int)getpid());
	out = fopen(cfgf, "w");
	cr_assert_not_null(out);
	while (fgets(line, sizeof(line), in) != NULL) {
		fputs(line, out);
		if (strcmp(line, "driver = {\n") == 0) {
			char l2[256];

			while (fgets(l2, sizeof(l2), orgs) != NULL)
				fputs(l2, out);
		}
	}
	fclose(in);
	fclose(orgs);
	fclose(out);
	cr_assert_eq(kvss_config_load(cfgf, &kc, kerr, sizeof(kerr)), 0, "%s", kerr);
	cr_assert_eq(kc.driver.num_orgs, 2);
	cr_assert_str_eq(kc.driver.org[0].name, "acme");
	cr_assert_float_eq(kc.driver.org[0].dram_share, r.job[0].org[0].share, 1e-9);
	cr_assert_float_eq(kc.driver.org[0].dram_cap, r.job[0].org[0].cap, 1e-9);
	cr_assert_float_eq(kc.driver.org[1].dram_share, r.job[0].org[1].share, 1e-9);
	cr_assert_float_eq(kc.driver.org[1].dram_cap, 1, 1e-9);
	unlink(cfgf);
	unlink(f);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	cr_assert_eq(system(cmd), 0);
}

/*
 * Guarantees that fit in tokens, summing to exactly what the job can use,
 * with shares that are not exact in six decimals: each rounded up, they
 * sum past 1, which the driver would refuse; the plan says they do not
 * fit. One token less for one of them and they do.
 */
Test(plan, guarantees_that_fit_only_before_rounding_do_not_fit)
{
	uint64_t u;

	cr_assert_eq(load(ONE_NODE "jobs = ( " JOB("j", "orgs = ( { name = \"a\"; tokens = 1; }, "
						    "{ name = \"b\"; tokens = 1; } );")
			  " );\npolicy = { kind = \"fair\"; discount = 0.13; round_tokens = 1; };\n"),
		     0, "%s", err);
	run();
	u = r.job[0].usable;
	cr_assert_gt(u, 1000);
	c.job[0].org[0].tokens = u / 3;
	c.job[0].org[1].tokens = u - u / 3;
	run();
	cr_assert_eq(r.job[0].org_tokens, u);
	cr_assert(r.job[0].org_share_sum > 1, "shares sum to %.9f", r.job[0].org_share_sum);
	cr_assert(r.job[0].orgs_over, "the shares past 1 taken as fitting");
	c.job[0].org[1].tokens -= u / 500; /* room for the rounding */
	run();
	cr_assert(!r.job[0].orgs_over, "shares %.9f", r.job[0].org_share_sum);
}

/*
 * A cap the guarantee's share passes once rounded up (a cap equal to the
 * guarantee, on a job of billions of tokens, where a millionth is
 * thousands of them): exit 1,
 * naming the organization and what to raise its cap to, nothing written.
 * A cap of 2^32 written with its L is read as written.
 */
Test(plan, a_cap_below_its_shares_tokens_is_an_error)
{
	char file[64], cmd[512], dir[64], out[4096];
	int st;

	write_cluster(file, sizeof(file), "capshort",
		      ONE_NODE "jobs = ( { name = \"j\"; boxes = [\"b0\"]; bytes_per_token_per_wio = 10; "
			       "base_mem_gb = 10; orgs = ( { name = \"a\"; tokens = 7001; cap_tokens = 7001; } ); } );\n"
			       "policy = { kind = \"fair\"; discount = 0.13; round_tokens = 1; };\n");
	snprintf(dir, sizeof(dir), "/tmp/kvss_plan_capshort_%d.d", (int)getpid());
	snprintf(cmd, sizeof(cmd), "build/kvss-plan %s --emit-config %s 2>&1", file, dir);
	st = capture(cmd, out, sizeof(out));
	cr_assert_eq(WEXITSTATUS(st), 1, "exit %d\n%s", WEXITSTATUS(st), out);
	cr_assert_not_null(strstr(out, "kvss-plan: job j: organization a's cap of 7001 tokens is below the "),
			   "%s", out);
	cr_assert_not_null(strstr(out, "A CAP BELOW ITS SHARE'S TOKENS"), "%s", out);
	cr_assert_neq(access(dir, F_OK), 0, "%s was made", dir);
	unlink(file);
	cr_assert_eq(load(ONE_NODE "jobs = ( " JOB("j", "orgs = ( { name = \"a\"; tokens = 10; "
						    "cap_tokens = 4294967296L; } );") " );\n"),
		     0, "%s", err);
	cr_assert_eq(c.job[0].org[0].cap_tokens, 4294967296ull);
}

/*
 * What --emit-config finds at a file's name in DIR: a FIFO is not waited
 * on, a hard link to a file outside DIR is not written through (that file
 * keeps its bytes); each an error naming the file.
 */
Test(plan, emit_config_refuses_a_fifo_and_a_hard_link_in_its_directory)
{
	char file[64], cmd[512], dir[64], out[4096], victim[96], at[160], back[32];
	FILE *f;
	int st;

	write_cluster(file, sizeof(file), "emitodd",
		      ONE_NODE "jobs = ( " JOB("j", "orgs = ( { name = \"a\"; tokens = 10; } );") " );\n");
	snprintf(dir, sizeof(dir), "/tmp/kvss_plan_emitodd_%d.d", (int)getpid());
	snprintf(victim, sizeof(victim), "/tmp/kvss_plan_victim_%d", (int)getpid());
	cr_assert_eq(mkdir(dir, 0700), 0);
	snprintf(at, sizeof(at), "%s/j-orgs.cfg", dir);
	cr_assert_eq(mkfifo(at, 0600), 0);
	snprintf(cmd, sizeof(cmd), "timeout 10 build/kvss-plan %s --emit-config %s 2>&1", file, dir);
	st = capture(cmd, out, sizeof(out));
	cr_assert_eq(WEXITSTATUS(st), 1, "a FIFO: exit %d (124: it waited)\n%s", WEXITSTATUS(st), out);
	cr_assert_not_null(strstr(out, "j-orgs.cfg: not a regular file: not written"), "%s", out);
	/* Refused before anything is written: not the shard configurations
	 * of a plan whose organizations' file could not be. */
	snprintf(victim, sizeof(victim), "%s/j-b0-d0.cfg", dir);
	cr_assert_neq(access(victim, F_OK), 0, "%s was written before the refusal", victim);
	snprintf(victim, sizeof(victim), "/tmp/kvss_plan_victim_%d", (int)getpid());
	unlink(at);
	f = fopen(victim, "w");
	cr_assert_not_null(f);
	fputs("keep", f);
	fclose(f);
	cr_assert_eq(link(victim, at), 0);
	st = capture(cmd, out, sizeof(out));
	cr_assert_eq(WEXITSTATUS(st), 1, "a hard link: exit %d\n%s", WEXITSTATUS(st), out);
	cr_assert_not_null(strstr(out, "j-orgs.cfg: a file with another name (a hard link): not written"),
			   "%s", out);
	f = fopen(victim, "r");
	cr_assert_not_null(f);
	cr_assert_not_null(fgets(back, sizeof(back), f));
	fclose(f);
	cr_assert_str_eq(back, "keep", "the file outside DIR was written: %s", back);
	unlink(victim);
	unlink(file);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	cr_assert_eq(system(cmd), 0);
}

/*
 * --discount is a number from 0 to 0.95 in digits: strtod alone took
 * "nan" (which passed both bounds), "" (read as 0), leading blanks, hex
 * and exponents. Each is a usage error naming the option; 0.2 still runs.
 */
Test(plan, a_discount_that_is_not_digits_is_refused)
{
	static const char *bad[] = {"nan", "", " 0.2", "0x0.1", "2e-1", "-0", "0.96", "inf", "0.2x"};
	char file[64], cmd[512], out[4096];
	int st;

	write_cluster(file, sizeof(file), "discount", ONE_NODE "jobs = ( " JOB("j", "") " );\n");
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		snprintf(cmd, sizeof(cmd), "build/kvss-plan %s --discount '%s' 2>&1", file, bad[i]);
		st = capture(cmd, out, sizeof(out));
		cr_expect_eq(WEXITSTATUS(st), 2, "--discount '%s': exit %d\n%s", bad[i], WEXITSTATUS(st),
			     out);
		cr_expect_not_null(strstr(out, "--discount"), "--discount '%s': %s", bad[i], out);
	}
	snprintf(cmd, sizeof(cmd), "build/kvss-plan %s --discount 0.2 2>&1", file);
	st = capture(cmd, out, sizeof(out));
	cr_expect_eq(WEXITSTATUS(st), 0, "--discount 0.2: exit %d\n%s", WEXITSTATUS(st), out);
	cr_expect_not_null(strstr(out, "discount 20%"), "%s", out);
	unlink(file);
}
