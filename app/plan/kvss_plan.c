/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * kvss-plan CLUSTER.cfg [options]: how many tokens each shard gets (plan.h).
 *
 *   --policy equal|exact|fair|ratio   override the file's policy.kind
 *   --no-keep-ratio                   shards of a job do not scale together
 *   --discount D                      budgets x (1 - D) (default: the file's, else 0.2)
 *   --strict                          a node whose grants do not fit is an error (exit 1)
 *   --emit-config DIR                 write each shard's kvss config (capacity per cache),
 *                                     and each job's organizations' shares (JOB-orgs.cfg)
 *   --compare                         the design's three numbers: an ideal unsharded
 *                                     pool, perfect proportional sharding, and equal
 *                                     memory per shard (no discount); exit 1 when a
 *                                     policy leaves the job no token or fewer than
 *                                     tokens_lower
 *   --json                            the same as one JSON object on stdout
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <fcntl.h>
#include <unistd.h>

#include "args.h"
#include "config.h"
#include "plan.h"
#include "proto.h"

#define GB 1e9

static void
usage(FILE *f)
{
	fprintf(f, "usage: kvss-plan CLUSTER.cfg [--policy equal|exact|fair|ratio] [--no-keep-ratio]\n"
		   "                 [--discount D] [--strict] [--emit-config DIR] [--compare] [--json]\n"
		   "       kvss-plan --version\n");
}

/* The driver's lines for job @p j's organizations (driver.orgs), to @p f. */
static void
orgs_lines(FILE *f, const struct plan_cluster *c, const struct plan_result *r, uint16_t j,
	   const char *indent)
{
	uint16_t k;

	fprintf(f, "%sorgs = (\n", indent);
	for (k = 0; k < c->job[j].norgs; k++)
		fprintf(f, "%s  { name = \"%s\"; dram_share = %.6f; dram_cap = %.6f; }%s\n", indent,
			c->job[j].org[k].name, r->job[j].org[k].share, r->job[j].org[k].cap,
			k + 1 < c->job[j].norgs ? "," : "");
	fprintf(f, "%s);\n", indent);
}

/*
 * Job @p j's organizations: each guarantee and cap in tokens and as the
 * driver's fractions, what the driver makes of them, and its lines.
 */
static void
print_orgs(const struct plan_cluster *c, const struct plan_result *r, uint16_t j)
{
	const struct plan_job_result *jr = &r->job[j];
	uint16_t k;

	if (c->job[j].norgs == 0)
		return;
	printf("job %s: its organizations' DRAM, of the %" PRIu64 " tokens it can use "
	       "(guaranteed: never evicted for another's sake; the rest lent):\n",
	       c->job[j].name, jr->usable);
	printf("  %-16s %14s %10s %14s %14s %10s %14s\n", "organization", "guaranteed", "share",
	       "= tokens", "cap", "cap share", "= tokens");
	for (k = 0; k < c->job[j].norgs; k++) {
		const struct plan_org *o = &c->job[j].org[k];
		const struct plan_org_result *x = &jr->org[k];
		char cap[24];

		if (o->cap_tokens)
			snprintf(cap, sizeof(cap), "%" PRIu64, o->cap_tokens);
		else
			snprintf(cap, sizeof(cap), "none");
		printf("  %-16s %14" PRIu64 " %10.6f %14" PRIu64 " %14s %10.6f %14" PRIu64 "\n", o->name,
		       o->tokens, x->share, x->share_tokens, cap, x->cap, x->cap_tokens);
	}
	printf("  guaranteed %" PRIu64 " of %" PRIu64 " tokens (shares sum to %.6f)%s\n",
	       jr->org_tokens, jr->usable, jr->org_share_sum,
	       jr->org_tokens > jr->usable ? ": MORE THAN THE JOB CAN USE"
	       : jr->orgs_over		   ? ": SHARES PAST 1 ONCE ROUNDED UP"
	       : jr->caps_short		   ? ": A CAP BELOW ITS SHARE'S TOKENS"
					   : "");
	if (!jr->orgs_over && !jr->caps_short) {
		printf("  in its driver's configuration (driver = { ... }):\n");
		orgs_lines(stdout, c, r, j, "    ");
	}
}

static void
print_plan(const struct plan_cluster *c, const struct plan_result *r)
{
	uint32_t g;
	uint16_t j, k;

	printf("policy %s, keep_ratio %s, discount %.0f%%, tokens rounded down to %" PRIu64 "\n",
	       plan_policy_name(c->policy), c->keep_ratio ? "yes" : "no", c->discount * 100,
	       c->round_tokens);
	printf("%-12s %-10s %6s %4s %-8s %12s %14s %10s %10s %10s %10s\n", "job", "box", "domain",
	       "wio", "node", "B/token", "tokens", "budget GB", "bytes GB", "wasted GB", "left GB");
	for (g = 0; g < r->ngrants; g++) {
		const struct plan_grant *x = &r->grant[g];
		const struct plan_shard *s = &c->shard[x->shard];

		printf("%-12s %-10s %6u %4u %-8s %12" PRIu64 " %14" PRIu64 " %10.1f %10.1f %10.1f %10.1f\n",
		       c->job[x->job].name, s->box, s->domain, s->wio, c->node[s->node].name,
		       x->mem_per_token, x->tokens, (double)x->budget / GB, (double)x->bytes / GB,
		       (double)x->wasted / GB, (double)x->left / GB);
	}
	for (j = 0; j < c->njobs; j++) {
		const struct plan_job_result *jr = &r->job[j];

		printf("job %s: usable %" PRIu64 " tokens (its smallest shard); an unsharded pool of the "
		       "same memory: %" PRIu64 " (%.1f%%); allocated %.1f GB = used %.1f GB + wasted "
		       "%.1f GB; budget %.1f GB, ",
		       c->job[j].name, jr->usable, jr->ideal, jr->ratio * 100, (double)jr->bytes / GB,
		       (double)jr->used / GB, (double)jr->wasted / GB, (double)jr->budget / GB);
		if (jr->over)
			printf("OVER BUDGET by %.1f GB (its base memory does not fit)",
			       (double)jr->over / GB);
		else
			printf("%.1f GB of it not allocated", (double)jr->left / GB);
		printf("%s\n", jr->below_lower ? "; BELOW tokens_lower" : "");
	}
	for (j = 0; j < c->njobs; j++)
		print_orgs(c, r, j);
	for (k = 0; k < c->nnodes; k++) {
		uint64_t av = c->node[k].ram - c->node[k].reserved;

		if (r->node_bytes[k] > av)
			fprintf(stderr, "kvss-plan: warning: node %s: grants need %.1f GB, it has %.1f GB\n",
				c->node[k].name, (double)r->node_bytes[k] / GB, (double)av / GB);
	}
}

/* JSON strings here are names from the cluster file: escape what JSON needs. */
static void
json_str(const char *s)
{
	putchar('"');
	for (; *s; s++) {
		if (*s == '"' || *s == '\\')
			printf("\\%c", *s);
		else if ((unsigned char)*s < 0x20)
			printf("\\u%04x", (unsigned char)*s);
		else
			putchar(*s);
	}
	putchar('"');
}

/* A job's organizations in its JSON object: their sums, then the list's opening. */
static void
json_orgs_begin(const struct plan_job_result *jr)
{
	printf(", \"org_tokens\": %" PRIu64 ", \"org_share_sum\": %.6f, \"orgs_fit\": %s, \"orgs\": [",
	       jr->org_tokens, jr->org_share_sum, jr->orgs_over ? "false" : "true");
}

/* --json: the plan as one object; bytes and tokens as numbers (below 2^53). */
static void
print_plan_json(const struct plan_cluster *c, const struct plan_result *r)
{
	uint32_t g;
	uint16_t j, k;

	printf("{\"policy\": \"%s\", \"keep_ratio\": %s, \"discount\": %g, \"round_tokens\": %" PRIu64
	       ", \"shards\": [", plan_policy_name(c->policy), c->keep_ratio ? "true" : "false",
	       c->discount, c->round_tokens);
	for (g = 0; g < r->ngrants; g++) {
		const struct plan_grant *x = &r->grant[g];
		const struct plan_shard *s = &c->shard[x->shard];

		printf("%s{\"job\": ", g ? ", " : "");
		json_str(c->job[x->job].name);
		printf(", \"box\": ");
		json_str(s->box);
		printf(", \"domain\": %u, \"wio\": %u, \"node\": ", s->domain, s->wio);
		json_str(c->node[s->node].name);
		printf(", \"bytes_per_token\": %" PRIu64 ", \"tokens\": %" PRIu64 ", \"budget\": %" PRIu64
		       ", \"bytes\": %" PRIu64 ", \"used\": %" PRIu64 ", \"wasted\": %" PRIu64
		       ", \"left\": %" PRIu64 ", \"over\": %" PRIu64 "}",
		       x->mem_per_token, x->tokens, x->budget, x->bytes, x->used, x->wasted, x->left,
		       x->over);
	}
	printf("], \"jobs\": [");
	for (j = 0; j < c->njobs; j++) {
		const struct plan_job_result *jr = &r->job[j];

		printf("%s{\"name\": ", j ? ", " : "");
		json_str(c->job[j].name);
		printf(", \"usable_tokens\": %" PRIu64 ", \"ideal_tokens\": %" PRIu64
		       ", \"ratio\": %.6f, \"budget\": %" PRIu64 ", \"bytes\": %" PRIu64
		       ", \"used\": %" PRIu64 ", \"wasted\": %" PRIu64 ", \"left\": %" PRIu64
		       ", \"over\": %" PRIu64 ", \"below_tokens_lower\": %s",
		       jr->usable, jr->ideal, jr->ratio, jr->budget, jr->bytes, jr->used, jr->wasted,
		       jr->left, jr->over, jr->below_lower ? "true" : "false");
		if (c->job[j].norgs > 0) {
			uint16_t o;

			json_orgs_begin(jr);
			for (o = 0; o < c->job[j].norgs; o++) {
				printf("%s{\"name\": ", o ? ", " : "");
				json_str(c->job[j].org[o].name);
				printf(", \"tokens\": %" PRIu64 ", \"cap_tokens\": %" PRIu64
				       ", \"dram_share\": %.6f, \"dram_cap\": %.6f, \"share_tokens\": %" PRIu64
				       ", \"cap_share_tokens\": %" PRIu64 "}",
				       c->job[j].org[o].tokens, c->job[j].org[o].cap_tokens, jr->org[o].share,
				       jr->org[o].cap, jr->org[o].share_tokens, jr->org[o].cap_tokens);
			}
			printf("]");
		}
		printf("}");
	}
	printf("], \"nodes\": [");
	for (k = 0; k < c->nnodes; k++) {
		printf("%s{\"name\": ", k ? ", " : "");
		json_str(c->node[k].name);
		printf(", \"available\": %" PRIu64 ", \"granted\": %" PRIu64 ", \"fits\": %s}",
		       c->node[k].ram - c->node[k].reserved, r->node_bytes[k],
		       r->node_bytes[k] <= c->node[k].ram - c->node[k].reserved ? "true" : "false");
	}
	printf("]}\n");
}

/* Why the file at @p st cannot be written as one of ours, or NULL when it can. */
static const char *
not_ours(const struct stat *st)
{
	if (S_ISLNK(st->st_mode))
		return "a symbolic link: not written through";
	if (!S_ISREG(st->st_mode))
		return "not a regular file: not written";
	if (st->st_nlink != 1)
		return "a file with another name (a hard link): not written";
	return NULL;
}

/*
 * @p path made (or emptied) inside the directory @p dfd (@p dir), never
 * through a link placed there; NULL, said, when it cannot be.
 */
static FILE *
create_in(int dfd, const char *dir, const char *path)
{
	/* Not blocking on a FIFO (no reader: ENXIO); not truncated before it
	 * is known to be a file of its own (a hard link's other name is
	 * another file's). */
	int fd = openat(dfd, path, O_WRONLY | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0644);
	struct stat st;
	FILE *f = NULL;

	if (fd < 0) {
		fprintf(stderr, "kvss-plan: --emit-config: %s/%s: %s\n", dir, path,
			errno == ELOOP ? "a symbolic link: not written through" : strerror(errno));
		return NULL;
	}
	if (fstat(fd, &st) != 0) {
		fprintf(stderr, "kvss-plan: --emit-config: %s/%s: %s\n", dir, path, strerror(errno));
	} else if (not_ours(&st) != NULL) {
		fprintf(stderr, "kvss-plan: --emit-config: %s/%s: %s\n", dir, path, not_ours(&st));
	} else if (ftruncate(fd, 0) != 0) {
		fprintf(stderr, "kvss-plan: --emit-config: %s/%s: %s\n", dir, path, strerror(errno));
	} else if ((f = fdopen(fd, "w")) == NULL) {
		fprintf(stderr, "kvss-plan: --emit-config: %s/%s: %s\n", dir, path, strerror(errno));
	}
	if (f == NULL)
		close(fd);
	return f;
}

/* @p f written and closed: 0, or -1, said, when a write failed. */
static int
finish(FILE *f, const char *dir, const char *path)
{
	if (ferror(f) | fclose(f)) {
		fprintf(stderr, "kvss-plan: --emit-config: %s/%s: %s\n", dir, path, strerror(errno));
		return -1;
	}
	return 0;
}

/*
 * The name of the @p i th file --emit-config writes, into @p path: first
 * one kvss shard configuration per grant (JOB-BOX-dD.cfg), then one
 * JOB-orgs.cfg per job with organizations. False past the last.
 */
static bool
file_name(const struct plan_cluster *c, const struct plan_result *r, uint32_t i, char *path,
	  size_t n, uint16_t *job)
{
	uint16_t j;

	if (i < r->ngrants) {
		const struct plan_grant *x = &r->grant[i];

		snprintf(path, n, "%s-%s-d%u.cfg", c->job[x->job].name, c->shard[x->shard].box,
			 c->shard[x->shard].domain);
		*job = x->job;
		return true;
	}
	for (i -= r->ngrants, j = 0; j < c->njobs; j++)
		if (c->job[j].norgs > 0 && i-- == 0) {
			snprintf(path, n, "%s-orgs.cfg", c->job[j].name);
			*job = j;
			return true;
		}
	return false;
}

/*
 * Every file's name and what lies there now, before anything is written:
 * 0, or -1, said, so that a refusal leaves DIR as it was (not the shard
 * configurations of a plan whose organizations' file could not be written).
 * create_in checks again as it opens (what lies there may change between).
 */
static int
emit_check(int dfd, const char *dir, const struct plan_cluster *c, const struct plan_result *r)
{
	char path[512];
	uint16_t j;
	uint32_t i;

	for (i = 0; file_name(c, r, i, path, sizeof(path), &j); i++) {
		struct stat st;

		if (i < r->ngrants && r->grant[i].tokens > KVSS_MAX_CAPACITY_TOKENS) {
			const struct plan_shard *s = &c->shard[r->grant[i].shard];

			fprintf(stderr, "kvss-plan: --emit-config: job %s, box %s, domain %u: %" PRIu64
				" tokens, more than one kvss shard cache holds (%llu, "
				"shard.caches.capacity_tokens); split the memory over more shards\n",
				c->job[j].name, s->box, s->domain, r->grant[i].tokens,
				(unsigned long long)KVSS_MAX_CAPACITY_TOKENS);
			return -1;
		}
		if (strchr(path, '/') != NULL || path[0] == '.') {
			/* The reader refuses such names; never write outside DIR. */
			fprintf(stderr, "kvss-plan: --emit-config: '%s' is not a file name in %s\n", path,
				dir);
			return -1;
		}
		if (fstatat(dfd, path, &st, AT_SYMLINK_NOFOLLOW) == 0) {
			if (not_ours(&st) != NULL) {
				fprintf(stderr, "kvss-plan: --emit-config: %s/%s: %s\n", dir, path,
					not_ours(&st));
				return -1;
			}
		} else if (errno != ENOENT) {
			fprintf(stderr, "kvss-plan: --emit-config: %s/%s: %s\n", dir, path, strerror(errno));
			return -1;
		}
	}
	return 0;
}

/* Shard configuration @p g's text, to @p f: deploy the plan as is. */
/*
 * Addresses: MAC 02:00:00:JJ:GG:GG (JJ the job + 1, so never the wafer's
 * 02:00:00:00:00:01) and IPv4 10.100.(1 + g / 240).(10 + g % 240) (never the
 * wafer's 10.100.0.1), g the grant's index: distinct across every shard of
 * the plan. Shard ids are 0.. within each job (its model 0).
 */
static void
shard_text(FILE *f, const struct plan_cluster *c, const struct plan_result *r, uint32_t g)
{
	const struct plan_grant *x = &r->grant[g];
	const struct plan_shard *s = &c->shard[x->shard];
	uint32_t first = g; /* a job's grants are consecutive: its first */

	while (first > 0 && r->grant[first - 1].job == x->job)
		first--;
	fprintf(f,
		"# kvss-plan: job %s, box %s, domain %u (%u weight-I/O streams), node %s.\n"
		"# Memory: %" PRIu64 " bytes = base + %" PRIu64 " bytes/token x %" PRIu64 " tokens.\n"
		"# Addresses are placeholders, unique across the plan (fill in the real ones\n"
		"# and the port before deploying); shard ids number the job's shards.\n"
		"role = \"shard\";\nmtu = 9000;\n"
		"lcores = { ingest = [1]; refill = [2]; control = 0; };\n"
		"shard = {\n  port = 0;\n  id = %u;\n  model = 0;\n"
		"  address = { mac = \"02:00:00:%02x:%02x:%02x\"; ipv4 = \"10.100.%u.%u\"; };\n"
		"  wafer = { mac = \"02:00:00:00:00:01\"; ipv4 = \"10.100.0.1\"; };\n"
		"  caches = (\n    { id = 0; bytes_per_token = %" PRIu64 "; buffers = %u; "
		"capacity_tokens = %" PRIu64 "; }\n  );\n};\n",
		c->job[x->job].name, s->box, s->domain, s->wio, c->node[s->node].name, x->bytes,
		x->mem_per_token, x->tokens, g - first, x->job + 1, (g >> 8) & 0xff, g & 0xff,
		1 + g / 240, 10 + g % 240, x->mem_per_token, s->wio, x->tokens ? x->tokens : 1);
}

/*
 * Every file goes into DIR itself: its name is JOB-BOX-dD.cfg or
 * JOB-orgs.cfg, names the cluster reader took (letters, digits, '.', '_',
 * '-'; never '/' nor a leading '.'), opened relative to DIR without
 * following a link there. All are checked before the first is written.
 */
static int
emit(const char *dir, const struct plan_cluster *c, const struct plan_result *r)
{
	char path[512];
	uint16_t j;
	uint32_t i;
	int dfd;

	if (mkdir(dir, 0755) != 0 && errno != EEXIST) {
		fprintf(stderr, "kvss-plan: --emit-config %s: %s\n", dir, strerror(errno));
		return -1;
	}
	dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0) {
		fprintf(stderr, "kvss-plan: --emit-config %s: %s\n", dir, strerror(errno));
		return -1;
	}
	if (emit_check(dfd, dir, c, r) != 0) {
		close(dfd);
		return -1;
	}
	for (i = 0; file_name(c, r, i, path, sizeof(path), &j); i++) {
		FILE *f = create_in(dfd, dir, path);

		if (f == NULL) {
			close(dfd);
			return -1;
		}
		if (i < r->ngrants) {
			shard_text(f, c, r, i);
		} else {
			fprintf(f, "# kvss-plan: job %s's organizations, for its driver's configuration\n"
				   "# (inside driver = { ... }): DRAM shares and caps of the %" PRIu64 " tokens\n"
				   "# the job can use (its smallest shard), each guarantee rounded up.\n",
				c->job[j].name, r->job[j].usable);
			orgs_lines(f, c, r, j, "");
		}
		if (finish(f, dir, path) != 0) {
			close(dfd);
			return -1;
		}
		if (i >= r->ngrants)
			printf("kvss-plan: job %s's organizations in %s/%s\n", c->job[j].name, dir, path);
	}
	close(dfd);
	printf("kvss-plan: %u shard configurations in %s\n", r->ngrants, dir);
	return 0;
}

/* A policy fails a job that gets no token, or fewer than its tokens_lower. */
static int
job_fails(const struct plan_cluster *c, uint64_t usable, const char *what)
{
	if (usable > 0 && usable >= c->job[0].tokens_lower)
		return 0;
	fprintf(stderr, "kvss-plan: --compare: %s gives job %s %" PRIu64 " tokens%s\n", what,
		c->job[0].name, usable,
		usable ? " (below its tokens_lower)" : ": its base memory does not fit");
	return 1;
}

static double
pct(uint64_t a, uint64_t b)
{
	return b ? 100.0 * (double)a / (double)b : 0;
}

static int
compare(struct plan_cluster *c, bool json)
{
	static struct plan_result r;
	char err[256];
	uint64_t ideal, perfect, equal;
	int failed;

	c->discount = 0;
	c->policy = PLAN_FAIR;
	c->keep_ratio = true;
	if (plan_run(c, &r, err, sizeof(err)) != 0)
		goto bad;
	ideal = r.job[0].ideal;
	perfect = r.job[0].usable;
	c->policy = PLAN_EQUAL;
	if (plan_run(c, &r, err, sizeof(err)) != 0)
		goto bad;
	equal = r.job[0].usable;
	if (json) {
		printf("{\"job\": ");
		json_str(c->job[0].name);
		printf(", \"ideal_tokens\": %" PRIu64 ", \"proportional_tokens\": %" PRIu64
		       ", \"equal_tokens\": %" PRIu64 ", \"proportional_pct\": %.1f, \"equal_pct\": %.1f}\n",
		       ideal, perfect, equal, pct(perfect, ideal), pct(equal, ideal));
	} else {
		printf("job %s (%s), all of the cluster's memory, no discount:\n", c->job[0].name,
		       c->job[0].model);
		printf("  ideal unsharded pool           %6.1fM tokens  100.0%%\n", (double)ideal / 1e6);
		printf("  perfect proportional sharding  %6.1fM tokens  %5.1f%%\n",
		       (double)perfect / 1e6, pct(perfect, ideal));
		printf("  equal memory per shard         %6.1fM tokens  %5.1f%%\n", (double)equal / 1e6,
		       pct(equal, ideal));
	}
	failed = job_fails(c, perfect, "perfect proportional sharding");
	failed |= job_fails(c, equal, "equal memory per shard");
	return failed;
bad:
	fprintf(stderr, "kvss-plan: %s\n", err);
	return 1;
}

/* kvss-plan's options as given. */
struct cli {
	const char *policy, *discount, *emit_dir;
	int strict, no_keep, cmp, json;
};

/* The options into @p o: -1 to go on, or the exit status (0 after --help or --version, 2 a usage error). */
static int
cli_read(int argc, char **argv, struct cli *o)
{
	static const struct option lo[] = {
		{"policy", required_argument, NULL, 'p'}, {"no-keep-ratio", no_argument, NULL, 'k'},
		{"discount", required_argument, NULL, 'd'}, {"strict", no_argument, NULL, 's'},
		{"emit-config", required_argument, NULL, 'e'}, {"compare", no_argument, NULL, 'c'},
		{"json", no_argument, NULL, 'j'},
		{"help", no_argument, NULL, 'h'}, {"version", no_argument, NULL, 'V'},
		{NULL, 0, NULL, 0}};
	int opt;

	while ((opt = getopt_long(argc, argv, "h", lo, NULL)) != -1) {
		switch (opt) {
		case 'p':
			o->policy = optarg;
			break;
		case 'k':
			o->no_keep = 1;
			break;
		case 'd':
			o->discount = optarg;
			break;
		case 's':
			o->strict = 1;
			break;
		case 'e':
			o->emit_dir = optarg;
			break;
		case 'c':
			o->cmp = 1;
			break;
		case 'j':
			o->json = 1;
			break;
		case 'V':
			args_version("kvss-plan", PROTO_VERSION);
			return 0;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (optind != argc - 1) {
		usage(stderr);
		return 2;
	}
	return -1;
}

/* --policy, --no-keep-ratio and --discount over the cluster file's: 0, or 2 (said). */
static int
cli_apply(const struct cli *o, struct plan_cluster *c)
{
	if (o->policy != NULL) {
		int i;

		for (i = 0; i < 4 && strcmp(o->policy, plan_policy_name((enum plan_policy)i)) != 0; i++)
			;
		if (i == 4) {
			fprintf(stderr, "kvss-plan: --policy: '%s' is not one of equal, exact, fair, ratio\n",
				o->policy);
			return 2;
		}
		c->policy = (enum plan_policy)i;
	}
	if (o->no_keep)
		c->keep_ratio = false;
	if (o->discount != NULL) {
		char *end;
		double d = strtod(o->discount, &end);

		/* Digits only: strtod also takes "nan" (which every comparison
		 * passes), "", leading blanks, hex and exponents. */
		if (end == o->discount || *end != '\0' || !(d >= 0 && d <= 0.95) ||
		    strspn(o->discount, "0123456789.") != strlen(o->discount)) {
			fprintf(stderr, "kvss-plan: --discount: '%s' is not in 0..0.95\n", o->discount);
			return 2;
		}
		c->discount = d;
	}
	return 0;
}

/* A plan that cannot be kept: each reason said; 1, or 0 when it can. */
static int
refused(const struct plan_cluster *c, const struct plan_result *r)
{
	if (r->over_budget) {
		uint16_t j;

		for (j = 0; j < c->njobs; j++)
			if (r->job[j].over)
				fprintf(stderr, "kvss-plan: job %s: allocated %.1f GB, %.1f GB over its "
						"budget of %.1f GB: a shard's base memory (base_mem_gb = %.1f) "
						"does not fit what the policy gives it; lower base_mem_gb, give "
						"the nodes more RAM or the job fewer shards\n",
					c->job[j].name, (double)r->job[j].bytes / GB,
					(double)r->job[j].over / GB, (double)r->job[j].budget / GB,
					(double)c->job[j].base_mem / GB);
		return 1;
	}
	for (uint16_t j = 0; j < c->njobs; j++)
		if (r->job[j].orgs_over && r->job[j].org_tokens > r->job[j].usable) {
			fprintf(stderr, "kvss-plan: job %s: its organizations are guaranteed %" PRIu64
					" tokens (shares summing to %.6f), more than the %" PRIu64 " it can "
					"use: give the job more memory or its organizations less (jobs.orgs)\n",
				c->job[j].name, r->job[j].org_tokens, r->job[j].org_share_sum, r->job[j].usable);
			return 1;
		} else if (r->job[j].caps_short) {
			for (uint16_t k = 0; k < c->job[j].norgs; k++)
				if (r->job[j].org[k].cap_short)
					fprintf(stderr, "kvss-plan: job %s: organization %s's cap of %" PRIu64
							" tokens is below the %" PRIu64 " its guarantee's share "
							"gives (six decimals of %" PRIu64 " tokens): raise its "
							"cap_tokens to %" PRIu64 " or drop it (jobs.orgs)\n",
						c->job[j].name, c->job[j].org[k].name, c->job[j].org[k].cap_tokens,
						r->job[j].org[k].share_tokens, r->job[j].usable,
						r->job[j].org[k].share_tokens);
			return 1;
		} else if (r->job[j].orgs_over) {
			/* The tokens fit, but each share is rounded up to six decimals. */
			fprintf(stderr, "kvss-plan: job %s: its organizations' %" PRIu64 " guaranteed tokens "
					"fit the %" PRIu64 " it can use, but as the driver's shares (each "
					"rounded up to six decimals so that it gives its guarantee) they sum to "
					"%.6f, above the whole: guarantee less (jobs.orgs)\n",
				c->job[j].name, r->job[j].org_tokens, r->job[j].usable, r->job[j].org_share_sum);
			return 1;
		}
	return 0;
}

int
main(int argc, char **argv)
{
	static struct plan_cluster c;
	static struct plan_result r;
	struct cli o = {0};
	char err[512];
	int rc;

	args_check_stdout_at_exit("kvss-plan");
	if ((rc = cli_read(argc, argv, &o)) != -1)
		return rc;
	if (kvss_cluster_load(argv[optind], &c, err, sizeof(err)) != 0) {
		fprintf(stderr, "kvss-plan: %s\n", err);
		return 2;
	}
	if (cli_apply(&o, &c) != 0)
		return 2;
	if (o.cmp)
		return compare(&c, o.json);
	if (plan_run(&c, &r, err, sizeof(err)) != 0) {
		fprintf(stderr, "kvss-plan: %s: %s\n", argv[optind], err);
		return 2;
	}
	if (o.json)
		print_plan_json(&c, &r);
	else
		print_plan(&c, &r);
	if (refused(&c, &r) != 0)
		return 1;
	if (r.overcommitted && o.strict) {
		fprintf(stderr, "kvss-plan: %u node(s) cannot hold their grants (--strict)\n",
			r.overcommitted);
		return 1;
	}
	if (o.emit_dir != NULL && emit(o.emit_dir, &c, &r) != 0)
		return 1;
	return 0;
}
