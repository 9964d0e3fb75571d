/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * kvss-shared: the operator's tool for the shared level on Ceph RADOS
 * (docs/kvss.md, "Pointing kvss at a Ceph cluster").
 *
 *   kvss-shared --conf C [--pool P] [--client NAME] [--timeout-ms MS] COMMAND
 *     gen [--org ORG]      the global generation, or the organization's
 *     gen --repair [--org ORG] [--dry-run]
 *                          the way out of a broken, removed or lowered
 *                          generation object: set it above every generation
 *                          a record names (a reset: nothing older is read)
 *     reset [--org ORG] [--org-keys FILE]
 *                          the emergency reset: one more generation (every
 *                          replica stops reading older objects when it reads
 *                          it); prints old -> new. With FILE, the
 *                          organization's key in it (or every key) is
 *                          retired first (keys.c)
 *     keys --org-keys FILE [--init] [--org ORG]
 *                          make a store of organization keys, give an
 *                          organization a key of its own, or show its key
 *                          ids; no cluster
 *     ls [--org ORG]       namespaces: generation, objects (records, slices,
 *                          not ours), bytes
 *     sweep [--ttl-first S] [--grace S] [--dry-run] [--verbose]
 *           [--capacity-tokens N [--share ORG:SHARE[:CAP]]... [--share-default S[:C]]]
 *                          delete what no replica may read any more
 *                          (sweep.c)
 *
 * ORG is an organization's name, as in the driver's configuration (its
 * isolation id is the name's hash), or its isolation id as 0x and up to 16
 * hex digits. Exit status: 0 done, 1 the cluster failed or refused
 * something (said on stderr), 2 a usage error (and --conf naming a file
 * that is missing, unreadable or not a regular file).
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "args.h"
#include "kvss_shared.h"
#include "proto.h"

struct ks_cmdline {
	struct shared_params p;
	const char *cmd;
	bool have_org;
	uint64_t org;
	const char *org_arg;
	struct ks_sweep_opts sweep;
	bool repair;
	const char *org_keys; /* --org-keys: the organization key store */
	bool init;
};

static void
usage(FILE *f)
{
	fprintf(f,
		"usage: kvss-shared --conf CEPH.conf [--pool kvss] [--client client.admin]\n"
		"                   [--timeout-ms 5000] COMMAND\n"
		"  gen [--org ORG]        print the global generation, or the organization's\n"
		"  gen --repair [--org ORG] [--dry-run]\n"
		"                         a broken, removed or lowered generation: set it above\n"
		"                         every generation a record names (nothing older is read)\n"
		"  reset [--org ORG] [--org-keys FILE]\n"
		"                         the emergency reset: bump that generation (old -> new);\n"
		"                         with FILE, first retire the organization's key in it (or\n"
		"                         every key): every copy of what it sealed is unreadable\n"
		"  keys --org-keys FILE [--init] [--org ORG]\n"
		"                         make a store of organization keys (--init), give ORG a\n"
		"                         key of its own (so that a reset retires it alone), or\n"
		"                         show its key ids (no cluster needed: no --conf)\n"
		"  ls [--org ORG]         namespaces: generation, objects, bytes\n"
		"  sweep [--ttl-first SECONDS] [--grace SECONDS] [--dry-run] [--verbose]\n"
		"                         delete objects of an older generation, columns past\n"
		"                         their first-use TTL, slices without a record older\n"
		"                         than the grace (default 600 s), corrupt records\n"
		"        [--capacity-tokens N [--share ORG:SHARE[:CAP]]... [--share-default SHARE[:CAP]]]\n"
		"                         and keep the level within N tokens of columns: each\n"
		"                         organization within its cap, the one furthest above its\n"
		"                         guaranteed share giving its oldest columns (fractions of\n"
		"                         N; organizations not named: share 0, cap 1)\n"
		"ORG: an organization's name (as in the driver's configuration) or its\n"
		"isolation id as 0x and hex digits.\n"
		"       kvss-shared --help | --version\n"
		"exit status: 0 done, 1 the cluster or the key store failed or refused, 2 usage\n");
}

/* The tool's options, before the command, and the command: 0, -1 (done: help), or KS_USAGE. */
static int
parse_global(int argc, char **argv, struct ks_cmdline *c)
{
	static const struct option global[] = {
		{ "conf", required_argument, NULL, 'c' },
		{ "pool", required_argument, NULL, 'p' },
		{ "client", required_argument, NULL, 'n' },
		{ "timeout-ms", required_argument, NULL, 't' },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
		{ NULL, 0, NULL, 0 },
	};
	char err[600];
	uint64_t v;
	int opt;

	c->p.pool = "kvss";
	c->p.client = "client.admin";
	c->p.op_timeout_ms = 5000;
	c->p.max_inflight = 16;
	c->sweep.grace_s = 600;
	opterr = 0;
	/* "+": the options before the command are the tool's. */
	while ((opt = getopt_long(argc, argv, "+h", global, NULL)) != -1) {
		switch (opt) {
		case 'c':
			c->p.conf = optarg;
			break;
		case 'p':
			c->p.pool = optarg;
			break;
		case 'n':
			c->p.client = optarg;
			break;
		case 't':
			if (args_u64("--timeout-ms", optarg, 1000, 600000, &v, err, sizeof(err)) != 0) {
				fprintf(stderr, "kvss-shared: %s\n", err);
				return KS_USAGE;
			}
			c->p.op_timeout_ms = (uint32_t)v;
			break;
		case 'h':
			usage(stdout);
			return -1;
		case 'V':
			args_version("kvss-shared", PROTO_VERSION);
			return -1;
		default:
			fprintf(stderr, "kvss-shared: unknown option %s\n", argv[optind - 1]);
			usage(stderr);
			return KS_USAGE;
		}
	}
	if (optind >= argc) {
		fprintf(stderr, "kvss-shared: no command (gen, reset, ls, sweep, keys)\n");
		usage(stderr);
		return KS_USAGE;
	}
	c->cmd = argv[optind];
	if (strcmp(c->cmd, "gen") != 0 && strcmp(c->cmd, "reset") != 0 &&
	    strcmp(c->cmd, "ls") != 0 && strcmp(c->cmd, "sweep") != 0 &&
	    strcmp(c->cmd, "keys") != 0) {
		fprintf(stderr, "kvss-shared: unknown command '%s' (gen, reset, ls, sweep, keys)\n",
			c->cmd);
		return KS_USAGE;
	}
	return 0;
}

/* One of the command's options (@p opt, getopt's): 0, -1 (done: help), or KS_USAGE. */
static int
sub_option(struct ks_cmdline *c, int opt, const char *given)
{
	bool sweep_opt = opt == 'T' || opt == 'g' || opt == 'v' || opt == 'C' || opt == 'S' ||
			 opt == 'D' || (opt == 'd' && strcmp(c->cmd, "gen") != 0);
	char err[600];
	uint64_t v;

	bool keys = strcmp(c->cmd, "keys") == 0;

	if ((opt == 'o' && strcmp(c->cmd, "sweep") == 0) ||
	    (sweep_opt && strcmp(c->cmd, "sweep") != 0) ||
	    (opt == 'R' && strcmp(c->cmd, "gen") != 0) ||
	    (opt == 'K' && !keys && strcmp(c->cmd, "reset") != 0) || (opt == 'I' && !keys)) {
		fprintf(stderr, "kvss-shared %s: %s is not one of its options\n", c->cmd, given);
		return KS_USAGE;
	}
	switch (opt) {
	case 'o':
		if (c->have_org) {
			fprintf(stderr, "kvss-shared: --org: given twice\n");
			return KS_USAGE;
		}
		if (ks_parse_org(optarg, &c->org) != 0) {
			char safe[KS_SAFE_LEN];

			fprintf(stderr, "kvss-shared: --org: '%s' is neither a name nor "
					"0x and 1 to 16 hex digits\n", ks_safe(optarg, safe, sizeof(safe)));
			return KS_USAGE;
		}
		c->have_org = true;
		c->org_arg = optarg;
		break;
	case 'T':
	case 'g':
		if (args_u64(opt == 'T' ? "--ttl-first" : "--grace", optarg, opt == 'T' ? 1 : 0,
			     UINT64_C(10) * 365 * 86400, &v, err, sizeof(err)) != 0) {
			fprintf(stderr, "kvss-shared: %s\n", err);
			return KS_USAGE;
		}
		if (opt == 'T')
			c->sweep.ttl_first_s = v;
		else
			c->sweep.grace_s = v;
		break;
	case 'C':
		if (c->sweep.shares.capacity_tokens != 0) {
			fprintf(stderr, "kvss-shared: --capacity-tokens: given twice\n");
			return KS_USAGE;
		}
		if (args_u64("--capacity-tokens", optarg, 1, UINT64_C(1) << 50, &v, err,
			     sizeof(err)) != 0) {
			fprintf(stderr, "kvss-shared: %s\n", err);
			return KS_USAGE;
		}
		c->sweep.shares.capacity_tokens = v;
		break;
	case 'S':
	case 'D':
		if (ks_share_parse(optarg, opt == 'D', &c->sweep.shares, err, sizeof(err)) != 0) {
			fprintf(stderr, "kvss-shared: %s\n", err);
			return KS_USAGE;
		}
		break;
	case 'd':
		c->sweep.dry_run = true;
		break;
	case 'v':
		c->sweep.verbose = true;
		break;
	case 'R':
		c->repair = true;
		break;
	case 'K':
		if (c->org_keys != NULL || (opt == 'I' && c->init)) {
			fprintf(stderr, "kvss-shared: --org-keys: given twice\n");
			return KS_USAGE;
		}
		if (optarg[0] == '\0') {
			fprintf(stderr, "kvss-shared: --org-keys: an empty name\n");
			return KS_USAGE;
		}
		c->org_keys = optarg;
		break;
	case 'I':
		if (c->init) {
			fprintf(stderr, "kvss-shared: --init: given twice\n");
			return KS_USAGE;
		}
		c->init = true;
		break;
	case 'h':
		usage(stdout);
		return -1;
	default:
		fprintf(stderr, "kvss-shared %s: unknown option %s\n", c->cmd, given);
		return KS_USAGE;
	}
	return 0;
}

static int
parse_cmdline(int argc, char **argv, struct ks_cmdline *c)
{
	static const struct option sub[] = {
		{ "org", required_argument, NULL, 'o' },
		{ "ttl-first", required_argument, NULL, 'T' },
		{ "grace", required_argument, NULL, 'g' },
		{ "dry-run", no_argument, NULL, 'd' },
		{ "verbose", no_argument, NULL, 'v' },
		{ "repair", no_argument, NULL, 'R' },
		{ "org-keys", required_argument, NULL, 'K' },
		{ "init", no_argument, NULL, 'I' },
		{ "capacity-tokens", required_argument, NULL, 'C' },
		{ "share", required_argument, NULL, 'S' },
		{ "share-default", required_argument, NULL, 'D' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	char err[600];
	int opt, rc = parse_global(argc, argv, c);

	if (rc != 0)
		return rc;
	argc -= optind;
	argv += optind;
	optind = 1;
	for (;;) {
		char given[80];
		int idx = -1;

		if ((opt = getopt_long(argc, argv, "+h", sub, &idx)) == -1)
			break;
		/* The option by its name: argv[optind - 1] is its value when
		 * the value is the next word. */
		if (idx >= 0)
			snprintf(given, sizeof(given), "--%s", sub[idx].name);
		else
			snprintf(given, sizeof(given), "%s", argv[optind - 1]);
		if ((rc = sub_option(c, opt, given)) != 0)
			return rc;
	}
	if (optind < argc) {
		fprintf(stderr, "kvss-shared %s: unexpected '%s'\n", c->cmd, argv[optind]);
		return KS_USAGE;
	}
	if (ks_shares_check(&c->sweep.shares, err, sizeof(err)) != 0) {
		fprintf(stderr, "kvss-shared sweep: %s\n", err);
		return KS_USAGE;
	}
	if (strcmp(c->cmd, "keys") == 0) {
		if (c->org_keys == NULL) {
			fprintf(stderr, "kvss-shared keys: --org-keys FILE is required\n");
			return KS_USAGE;
		}
		return 0; /* no cluster: --conf is not read */
	}
	if (c->p.conf == NULL) {
		fprintf(stderr, "kvss-shared: --conf CEPH.conf is required\n");
		return KS_USAGE;
	}
	if (c->sweep.dry_run && !c->repair && strcmp(c->cmd, "gen") == 0) {
		fprintf(stderr, "kvss-shared gen: --dry-run goes with --repair\n");
		return KS_USAGE;
	}
	/* The command line's file: refused at once when it is not a regular
	 * file (a FIFO would hang librados' read of it). */
	if (shared_conf_check(c->p.conf, err, sizeof(err)) != 0) {
		fprintf(stderr, "kvss-shared: --conf: %s\n", err);
		return KS_USAGE;
	}
	return 0;
}

/* The namespace a command is about: the organization's or the default one. */
static void
target_ns(const struct ks_cmdline *c, char *ns, char *what, size_t wlen)
{
	char safe[KS_SAFE_LEN];

	if (!c->have_org) {
		ns[0] = '\0';
		snprintf(what, wlen, "global generation");
		return;
	}
	shared_ns(ns, c->org);
	snprintf(what, wlen, "generation of organization %s (%s)",
		 ks_safe(c->org_arg, safe, sizeof(safe)), ns);
}

static int
gen_error(const char *what, const char *ns, int rc)
{
	char safe[KS_SAFE_LEN];

	if (rc == -EBADMSG || rc == -ERANGE)
		fprintf(stderr, "kvss-shared: the %s (object '%s' of namespace %s) is %s: "
				"'kvss-shared gen --repair%s%s' sets it above every generation a record "
				"names (removing it would start again at 0, where old objects may "
				"still be)\n",
			what, SHARED_GEN_OBJECT, ks_ns_label(ns, safe, sizeof(safe)), ks_gen_why(rc),
			ns[0] ? " --org " : "", ns[0] ? ns + 1 : "");
	else
		fprintf(stderr, "kvss-shared: reading the %s: %s\n", what, strerror(-rc));
	return KS_FAILED;
}

/*
 * gen --repair: the operator's way out of a generation object that is
 * broken (not a number, 4294967295), removed, or rewritten lower than
 * generations records were written under. Every record of the namespace
 * (of every organization's, for the global one) is read; the generation is
 * set one above the highest any record names and above what the object
 * says: a reset (nothing older is read any more), never a step back. One
 * that is readable and not below any record is left as it is.
 */
static int
cmd_repair(struct shared *s, const struct ks_cmdline *c, const char *ns, const char *what)
{
	struct ks_gens gs;
	uint32_t cur = 0, seen, want;
	uint64_t ver = 0;
	int rc = shared_gen_read_ver(s, ns, &cur, &ver), wrc;
	bool readable = rc == 0 || rc == -ENOENT;
	char was[96];

	if (!readable && rc != -EBADMSG && rc != -ERANGE)
		return gen_error(what, ns, rc);
	wrc = ks_record_gens(s, c->have_org ? ns : NULL, &gs);
	if (wrc < 0) {
		fprintf(stderr, "kvss-shared: reading the records: %s; nothing written\n",
			strerror(-wrc));
		return KS_FAILED;
	}
	if (gs.unreadable > 0) {
		fprintf(stderr, "kvss-shared: %" PRIu64 " records could not be read: their "
				"generations are unknown; nothing written (run it again)\n",
			gs.unreadable);
		return KS_FAILED;
	}
	seen = c->have_org ? gs.max_org : gs.max_global;
	if (rc == 0)
		snprintf(was, sizeof(was), "%u", cur);
	else if (rc == -ENOENT)
		snprintf(was, sizeof(was), "absent (0)");
	else
		snprintf(was, sizeof(was), "%s", rc == -EBADMSG ? "not a number" : "4294967295");
	printf("%s: %s; %" PRIu64 " records, written under generations up to %u\n", what, was,
	       gs.records, seen);
	if (readable && cur >= seen) {
		printf("nothing to repair: no record names a generation above it\n");
		return KS_OK;
	}
	want = (readable && cur > seen ? cur : seen);
	if (want >= SHARED_GEN_MAX) {
		fprintf(stderr, "kvss-shared: records name generation %u: nothing above it is left "
				"(4294967295 would wrap to 0); nothing written\n", want);
		return KS_FAILED;
	}
	want++;
	if (c->sweep.dry_run) {
		printf("would set it to %u (dry run)\n", want);
		return KS_OK;
	}
	rc = shared_gen_set(s, ns, want, ver);
	if (rc == -ECANCELED) {
		fprintf(stderr, "kvss-shared: the %s changed while it was repaired; nothing "
				"written (run it again)\n", what);
		return KS_FAILED;
	}
	if (rc < 0) {
		fprintf(stderr, "kvss-shared: writing the %s: %s\n", what, strerror(-rc));
		return KS_FAILED;
	}
	printf("%s: set to %u: every driver follows it at its next read; objects of generation "
	       "%u and older are never read again; 'kvss-shared sweep' deletes them\n",
	       what, want, want - 1);
	return KS_OK;
}

static int
cmd_gen(struct shared *s, const struct ks_cmdline *c)
{
	char ns[SHARED_NS_MAX], what[160];
	uint32_t g;
	int rc;

	target_ns(c, ns, what, sizeof(what));
	if (c->repair)
		return cmd_repair(s, c, ns, what);
	rc = shared_gen_read(s, ns, &g);
	if (rc < 0)
		return gen_error(what, ns, rc);
	printf("%s: %u\n", what, g);
	return KS_OK;
}

static int
cmd_reset(struct shared *s, const struct ks_cmdline *c)
{
	char ns[SHARED_NS_MAX], what[160];
	uint32_t g;
	int rc;

	target_ns(c, ns, what, sizeof(what));
	/* The keys first: a reset asked to be cryptographic is not done
	 * halfway (a generation bumped with the keys still able to open what
	 * it left behind would look done). */
	if (c->org_keys != NULL) {
		rc = ks_keys_retire(c->org_keys, c->have_org, c->org, c->org_arg);
		if (rc != KS_OK)
			return rc;
	}
	rc = shared_gen_bump(s, ns, &g);
	if (rc == -EOVERFLOW) {
		fprintf(stderr, "kvss-shared: the %s is %u, the largest: a reset past it would wrap "
				"to 0, where the oldest objects are; not reset. %s\n", what, g,
			c->have_org ? "Reset the global generation instead (every organization)."
				    : "Reset each organization's generation instead (--org), or empty "
				      "the pool and remove the generation objects.");
		return KS_FAILED;
	}
	if (rc < 0)
		return gen_error(what, ns, rc);
	printf("%s: %u -> %u\n", what, g - 1, g);
	printf("every driver reads it at its next lookup: objects of generation %u and older are "
	       "never read again; 'kvss-shared sweep' deletes them\n", g - 1);
	return KS_OK;
}

struct ns_tally {
	uint64_t objects, records, slices, other, bytes, unstat;
};

static void
print_ns(struct shared *s, const char *ns, const struct ns_tally *t)
{
	char label[KS_SAFE_LEN], gen[16];
	uint32_t g;
	int rc = shared_gen_read(s, ns, &g);

	if (rc == 0)
		snprintf(gen, sizeof(gen), "%u", g);
	else
		snprintf(gen, sizeof(gen), "%s", rc == -EBADMSG ? "bad" : "?");
	printf("%-20s %10s %9" PRIu64 " %9" PRIu64 " %9" PRIu64 " %9" PRIu64 " %14" PRIu64 "%s\n",
	       ks_ns_label(ns, label, sizeof(label)), gen, t->objects, t->records, t->slices,
	       t->other, t->bytes, t->unstat ? " (some sizes unknown)" : "");
}

static int
cmd_ls(struct shared *s, const struct ks_cmdline *c)
{
	struct ks_list l;
	struct ns_tally t = { 0 }, all = { 0 };
	char ns[SHARED_NS_MAX];
	uint32_t i, nns = 0;
	int rc, ret = KS_OK;

	if (c->have_org)
		shared_ns(ns, c->org);
	rc = ks_list_all(s, c->have_org ? ns : NULL, &l);
	if (rc < 0) {
		fprintf(stderr, "kvss-shared: listing the pool %s: %s\n", c->p.pool, strerror(-rc));
		return KS_FAILED;
	}
	printf("%-20s %10s %9s %9s %9s %9s %14s\n", "namespace", "generation", "objects",
	       "records", "slices", "not ours", "bytes");
	for (i = 0; i < l.n; i++) {
		const struct ks_obj *o = &l.v[i];
		uint64_t size = 0;
		int64_t mtime;

		t.objects++;
		if (o->kind == SHARED_RECORD)
			t.records++;
		else if (o->kind == SHARED_SLICE)
			t.slices++;
		else if (!o->gen_obj)
			t.other++;
		rc = shared_stat(s, o->ns, o->name, &size, &mtime);
		if (rc == 0) {
			t.bytes += size;
		} else if (rc != -ENOENT) { /* deleted since the listing: not counted */
			t.unstat++;
			ret = KS_FAILED;
		}
		if (i + 1 == l.n || strcmp(o->ns, l.v[i + 1].ns) != 0) {
			print_ns(s, o->ns, &t);
			all.objects += t.objects;
			all.records += t.records;
			all.slices += t.slices;
			all.other += t.other;
			all.bytes += t.bytes;
			all.unstat += t.unstat;
			nns++;
			memset(&t, 0, sizeof(t));
		}
	}
	if (c->have_org && l.n == 0)
		print_ns(s, ns, &t);
	printf("total: %u namespaces, %" PRIu64 " objects (%" PRIu64 " records, %" PRIu64
	       " slices, %" PRIu64 " not ours), %" PRIu64 " bytes\n",
	       nns, all.objects, all.records, all.slices, all.other, all.bytes);
	if (l.names_skipped > 0)
		printf("%u names with a NUL byte not listed (not kvss's)\n", l.names_skipped);
	if (all.unstat > 0)
		fprintf(stderr, "kvss-shared: %" PRIu64 " objects could not be sized\n", all.unstat);
	ks_list_free(&l);
	return ret;
}

int
main(int argc, char **argv)
{
	struct ks_cmdline c;
	struct shared *s;
	char err[512];
	int rc;

	memset(&c, 0, sizeof(c));
	rc = parse_cmdline(argc, argv, &c);
	if (rc != 0)
		return rc < 0 ? KS_OK : rc;
	if (strcmp(c.cmd, "keys") == 0)
		return ks_keys(c.org_keys, c.init, c.have_org, c.org, c.org_arg);
	s = shared_open(&c.p, err, sizeof(err));
	if (s == NULL) {
		fprintf(stderr, "kvss-shared: %s\n", err);
		return KS_FAILED;
	}
	if (strcmp(c.cmd, "gen") == 0)
		rc = cmd_gen(s, &c);
	else if (strcmp(c.cmd, "reset") == 0)
		rc = cmd_reset(s, &c);
	else if (strcmp(c.cmd, "ls") == 0)
		rc = cmd_ls(s, &c);
	else
		rc = ks_sweep(s, &c.sweep);
	shared_close(s);
	return rc;
}
