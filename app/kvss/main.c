/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * kvss [EAL options] -- --config FILE [--role shard|driver|all] [options]
 *
 * EAL consumes its arguments first (ports are whatever it gives: a PCI NIC,
 * or --vdev net_pcap/net_memif/net_ring/net_tap); then the application's
 * own options and its configuration, checked completely before any port
 * starts. SIGINT and SIGTERM stop the lcores, which drain; the final stats
 * are printed and the process exits 0.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <rte_cycles.h>
#include <rte_eal.h>
#include <rte_ethdev.h>
#include <rte_lcore.h>
#include <rte_malloc.h>
#include <rte_random.h>
#include <rte_ring.h>

#include "args.h"
#include "driver/driver.h"
#include "fileio.h"
#include "kvdisk.h"
#include "kvss.h"
#include "plot.h"
#include "shard/shard_api.h"


static void
on_signal(int sig)
{
	(void)sig;
	__atomic_store_n(&kvss.quit, 1, __ATOMIC_RELAXED);
}

/* Whose control the shard takes (shard.drivers), said at start. */
static void
say_drivers(struct kvss_shard_inst *me)
{
	const struct kvss_shard_cfg *c = me->cfg;
	uint16_t i;

	printf("kvss: shard %u of model %u at %u.%u.%u.%u: control taken from ", c->id,
	       c->model, c->addr.ipv4 >> 24, (c->addr.ipv4 >> 16) & 0xff,
	       (c->addr.ipv4 >> 8) & 0xff, c->addr.ipv4 & 0xff);
	if (c->num_drivers == 0)
		printf("any driver (shard.drivers lists none)");
	for (i = 0; i < c->num_drivers; i++)
		printf("%s%u.%u.%u.%u", i ? ", " : "", c->driver_ip[i] >> 24,
		       (c->driver_ip[i] >> 16) & 0xff, (c->driver_ip[i] >> 8) & 0xff,
		       c->driver_ip[i] & 0xff);
	printf("; frames to another address, model or shard are dropped\n");
	if (c->num_drivers == 0)
		fprintf(stderr, "kvss: WARNING: shard.drivers is not set: any host on the fabric can "
				"take control of shard %u (a HELLO resets it), store, delete and "
				"read back its tokens; list the driver's address (shard.drivers = "
				"[ \"IPv4\" ], docs/SECURITY.md)\n", c->id);
}

static void
usage(FILE *f, const char *prog)
{
	fprintf(f,
		"usage: %s [EAL options] -- --config FILE [options]\n"
		"  --config FILE        libconfig file (examples in config/)\n"
		"  --role R             shard, driver or all (overrides the file)\n"
		"  --poll MODE          busy (default: spin), idle (pause, then nap when idle)\n"
		"                       or interrupt (sleep until an RX interrupt or 1 ms)\n"
		"  --exit-when-idle MS  stop after MS without a received frame (replays)\n"
		"  --trace FILE         driver: replay this trace (wafer.trace; \"\": the built-in\n"
		"                       workload)\n"
		"  --limit N            driver: replay N requests (wafer.limit)\n"
		"  --documents N        driver: the built-in workload reads a library of N\n"
		"                       documents (wafer.documents; 0: one-off documents)\n"
		"  --lose-data N        driver: withhold every Nth EVICT_DATA frame, a lost\n"
		"                       frame on purpose (wafer.lose_data_every; for tests)\n"
		"  --faults SPEC        driver: inject faults on its link to the shards, seeded:\n"
		"                       seed=N (the seed chooses the rates) or seed=N,drop=P,\n"
		"                       dup=P,reorder=P,delay=P,truncate=P,corrupt=P (percent\n"
		"                       of frames each way),delay_ms=M (docs/kvss.md, soak)\n"
		"  --linger MS          driver: once the run is done, keep answering telemetry\n"
		"                       for MS (SIGINT/SIGTERM ends it sooner); the summary\n"
		"                       follows\n"
		"  --ttft-out FILE      driver: at the end, write each request's time to first\n"
		"                       token and hit tokens to FILE (CSV: request, ttft_us,\n"
		"                       hit_tokens, org, salted)\n"
		"  --plot-refills FILE  driver: at the end, draw the refill times measured\n"
		"                       against the model's estimates (a PNG, gnuplot)\n"
		"  --l2-dir DIR         shard: its second tier's file in DIR (shard-MODEL-ID.l2)\n"
		"                       instead of where shard.l2 says\n"
		"  --record-expect FILE driver: record open loop (no answers awaited: every\n"
		"                       message counts as acknowledged, refills as whole) and\n"
		"                       write each refill's expected content to FILE; with a\n"
		"                       net_pcap tx_pcap port this records a replayable capture\n"
		"  --help               this text\n"
		"  --version            the release and the wire protocol version\n"
		"EAL examples: --no-pci --no-huge -m 512 --file-prefix NAME\n"
		"  --vdev net_pcap0,rx_pcap=in.pcap,tx_pcap=/tmp/out.pcap\n"
		"  --vdev net_memif0,role=server,socket=/tmp/kvss.sock\n",
		prog);
}


/* Shard memory from DPDK (hugepages where reserved, --no-huge memory otherwise). */
static int
store_init(struct kvss_shard_inst *me)
{
	const struct kvstore_params *kp = &me->cfg->store;
	size_t sz = kvstore_memsize(kp), per_token = 0;
	uint64_t tokens = 0, kv = 0;
	uint16_t c;

	me->store_mem = rte_zmalloc_socket("kvss_store", sz, 64, (int)rte_socket_id());
	if (me->store_mem == NULL) {
		fprintf(stderr, "kvss: cannot get %zu bytes of shard memory from DPDK (raise -m or "
				"reserve hugepages)\n", sz);
		return -1;
	}
	me->store = kvstore_init(me->store_mem, sz, kp);
	if (me->store == NULL)
		return -1;
	for (c = 0; c < kp->num_caches; c++) {
		per_token += kp->cache[c].bytes_per_token;
		kv += (uint64_t)kp->cache[c].bytes_per_token * kp->cache[c].capacity_tokens;
		if (kp->cache[c].capacity_tokens > tokens)
			tokens = kp->cache[c].capacity_tokens;
	}
	/* The memory-scheduling design's form: base + per-token x tokens. */
	printf("kvss: shard memory %zu bytes = base %" PRIu64 " + %zu bytes/token x %" PRIu64
	       " tokens\n", sz, (uint64_t)(sz - kv), per_token, tokens);
	say_drivers(me);
	return 0;
}

/*
 * The final stats, a line per group ("kvss: final stats: GROUP k=v ..."),
 * counters that are 0 left out (a group with none, its line too): every
 * key=value is as telemetry names it, and a key not printed is 0. A group
 * runs from its first counter (in KVSS_STATS order) to the next group's;
 * then the lcores' time by role ("time"), the drops, the errors, the disk.
 */
/* One counter of a final stats group: opens the group's line if need be. */
static void
stat_put(bool *open, bool *any, const char *group, const char *prefix, const char *name, uint64_t v)
{
	if (v == 0)
		return;
	if (!*open)
		printf("kvss: final stats: %s", group);
	*open = *any = true;
	printf(" %s%s=%" PRIu64, prefix, name, v);
}

/* End a final stats group's line, if one was opened. */
static void
stat_end(bool *open)
{
	if (*open)
		printf("\n");
	*open = false;
}

static void
print_stats(void)
{
	static const struct {
		const char *first, *group;
	} groups[] = {{"rx_frames", "frames"},	  {"hello", "control"},	     {"not_mine_mac", "strangers"},
		      {"acks", "stream"},	  {"batches", "evict"},	     {"data_frames", "data"},
		      {"deletes", "refill"},	  {"l2_down", "tier"},	     {"idle_polls", "polls"}};
	static const char *const names[] = {
#define KVSS_STAT_NAME(n) #n,
		KVSS_STATS(KVSS_STAT_NAME)
#undef KVSS_STAT_NAME
	};
	struct kvss_lcore_stats t;
	struct kvss_shard_time tm;
	const uint64_t *v = (const uint64_t *)&t; /* KVSS_STATS' fields come first, in order */
	unsigned int i, g = 0, n = sizeof(names) / sizeof(names[0]);
	bool open = false, any = false;
	int r;

	_Static_assert(offsetof(struct kvss_lcore_stats, drops) == sizeof(names) / sizeof(names[0]) *
									 sizeof(uint64_t),
		       "KVSS_STATS' counters lead struct kvss_lcore_stats");
	kvss_stats_total(&t);
	for (i = 0; i < n; i++) {
		if (g + 1 < sizeof(groups) / sizeof(groups[0]) && strcmp(names[i], groups[g + 1].first) == 0) {
			g++;
			stat_end(&open);
		}
		stat_put(&open, &any, groups[g].group, "", names[i], v[i]);
	}
	stat_end(&open);
	/* The shard's lcores' time by role (kvss.h), as telemetry gives it. */
	kvss_shard_time(&tm);
	stat_put(&open, &any, "time", "", "ingest_busy_us", tm.ingest_busy_us);
	stat_put(&open, &any, "time", "", "refill_busy_us", tm.refill_busy_us);
	stat_put(&open, &any, "time", "", "idle_us", tm.idle_us);
	stat_end(&open);
	for (r = 1; r < PROTO_R_MAX; r++)
		stat_put(&open, &any, "dropped", "drop_", proto_reason_name((enum proto_reason)r),
			 t.drops[r]);
	stat_end(&open);
	for (r = 1; r < PROTO_E_MAX; r++)
		stat_put(&open, &any, "errors", "error_", proto_err_name((unsigned int)r), t.errors[r]);
	for (r = 1; r < PROTO_E_MAX; r++)
		stat_put(&open, &any, "errors", "refill_failed_", proto_err_name((unsigned int)r),
			 t.refill_errors[r]);
	stat_end(&open);
	/* Each level below DRAM (shard/level.h) as its worker left it, over
	 * the process's shards: "disk" the second tier, "shared" the Ceph level. */
	for (r = 0; r < SHARD_LEVELS; r++) {
		static const char *const group[SHARD_LEVELS] = {"disk", "shared"};
		struct level_counter lc[LEVEL_COUNTERS_MAX];
		const char *prefix;
		unsigned int k, nc;
		uint16_t s;

		for (s = 0; s < kvss.num_shards; s++)
			if (shard_level_of(&kvss_shards[s], (enum shard_level_kind)r) != NULL)
				break;
		if (s == kvss.num_shards)
			continue;
		nc = shard_level_counters((enum shard_level_kind)r, lc, &prefix);
		for (k = 0; k < nc; k++) {
			char key[48];

			snprintf(key, sizeof(key), "%s%s", prefix, lc[k].group);
			stat_put(&open, &any, group[r], key, lc[k].name, lc[k].value);
		}
		stat_end(&open);
	}
	if (!any)
		printf("kvss: final stats: every counter 0\n");
	fflush(stdout);
}

/*
 * Each level of shard @p s, on a line of its own: what its ingest lcore
 * moved through it and what the level refused or failed, so that with
 * several shards in a process each one's share is seen (final stats sum
 * them).
 */
static void
print_levels(const struct kvss_shard_inst *s)
{
	/* Every level message runs on the shard's ingest lcore (a refill lcore
	 * hands L2_DOWN, SH_DOWN and L2_DELETE back to it, refillq.c). */
	const struct kvss_lcore_stats *in = &kvss.stats[s->ingest_lcore];
	unsigned int k;

	for (k = 0; k < SHARD_LEVELS; k++) {
		const struct shard_level *lv = shard_level_of(s, (enum shard_level_kind)k);
		bool sh = k == SHARD_LEVEL_SHARED;

		if (lv == NULL)
			continue;
		printf("kvss: shard %u of model %u: %s: %" PRIu64 " columns down, %" PRIu64
		       " up, %" PRIu64 " refused by their check, %" PRIu64 " errors\n",
		       s->cfg->id, s->cfg->model, sh ? "the shared level" : "the second tier",
		       sh ? in->shared_down : in->l2_down, sh ? in->shared_up : in->l2_up,
		       shard_level_refused(lv),
		       sh ? in->shared_errors : in->l2_errors);
	}
}

/*
 * The runtime directory EAL will use for these arguments: its --file-prefix
 * (default "rte") under /var/run/dpdk for root, else $XDG_RUNTIME_DIR/dpdk
 * (or /tmp/dpdk). 0, or -1 (it cannot be told).
 */
static int
runtime_dir_of(int argc, char **argv, char *out, size_t cap)
{
	const char *prefix = "rte", *base;
	int i;

	out[0] = '\0';
	for (i = 1; i < argc && strcmp(argv[i], "--") != 0; i++) {
		if (strcmp(argv[i], "--file-prefix") == 0 && i + 1 < argc)
			prefix = argv[++i];
		else if (strncmp(argv[i], "--file-prefix=", 14) == 0)
			prefix = argv[i] + 14;
	}
	if (prefix[0] == '\0' || strchr(prefix, '/') != NULL)
		return -1;
	if (getuid() == 0) {
		snprintf(out, cap, "/var/run/dpdk/%s", prefix);
	} else {
		base = getenv("XDG_RUNTIME_DIR");
		snprintf(out, cap, "%s/dpdk/%s", base != NULL ? base : "/tmp", prefix);
	}
	return 0;
}

/* Whether argument @p name is among EAL's (before "--"). */
static bool
eal_has(int argc, char **argv, const char *name)
{
	int i;

	for (i = 1; i < argc && strcmp(argv[i], "--") != 0; i++)
		if (strcmp(argv[i], name) == 0)
			return true;
	return false;
}

/*
 * EAL did not start: why, in words that name the fix. rte_errno is 0 when
 * the runtime directory's lock is another process's (DPDK 22.11 sets
 * none), and EACCES when it found no hugepages.
 */
static void
eal_failed(int e, const char *rundir, int argc, char **argv)
{
	char path[PATH_MAX + 16];
	struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET};
	int fd;

	snprintf(path, sizeof(path), "%s/config", rundir);
	fd = rundir[0] != '\0' ? open(path, O_RDONLY | O_CLOEXEC) : -1;
	if (fd >= 0 && fcntl(fd, F_GETLK, &fl) == 0 && fl.l_type != F_UNLCK) {
		const char *slash = strrchr(rundir, '/');

		fprintf(stderr, "kvss: EAL init failed: another process (pid %ld) runs with "
				"--file-prefix %s; give every kvss process its own --file-prefix\n",
			(long)fl.l_pid, slash != NULL ? slash + 1 : rundir);
	} else if (e == EACCES && !eal_has(argc, argv, "--no-huge")) {
		fprintf(stderr, "kvss: EAL init failed: no hugepages it can use (none reserved, or "
				"hugetlbfs not mounted or not writable): reserve some (as root: "
				"dpdk-hugepages.py --setup 2G) or run with --no-huge -m MB, as the "
				"docs' examples do\n");
	} else {
		fprintf(stderr, "kvss: EAL init failed: %s\n",
			e != 0 ? rte_strerror(e) : "EAL's lines above say why");
	}
	if (fd >= 0)
		close(fd);
}

/*
 * The shards this process hosts: each one's store, port and levels below
 * DRAM. 0, or the exit status (what failed is said; what was made is the
 * caller's to free).
 */
static int
shards_start(const char *config)
{
	int ret = 0, c;

	/* lcores.refill = []: none asked for, nothing to say. */
	unsigned int rl = kvss.cfg.num_refill ? kvss.cfg.refill_lcore[0] : RTE_MAX_LCORE;
	int want = kvss.cfg.num_refill && rte_lcore_is_enabled(rl) &&
		   rl != rte_get_main_lcore() && rl != kvss.cfg.ingest_lcore[0];

	kvss.num_shards = kvss.cfg.num_local;
	for (c = kvss.num_shards - 1; c >= 0; c--) {
		struct kvss_shard_inst *me = &kvss_shards[c];

		/* Last to first, as before: the start's log keeps its order. */
		me->ingest_lcore = kvss.cfg.ingest_lcore[c];
		if (store_init(me) != 0 ||
		    (ret = kvss_port_init(me->cfg->port, kvss.cfg.mtu, c == 0 && want, 1,
					  &me->refill_lcore_on)) != 0)
			return ret == -EDOM ? 2 : 1; /* -EDOM: the configuration */
	}
	/* lcores.refill serves the first shard, the only one given a refill queue. */
	kvss_shards[0].refill_lcore = rl;
	for (c = 0; c < kvss.num_shards; c++) {
		struct kvss_shard_inst *si = &kvss_shards[c];
		const struct shard_level *disk;
		char l2err[512];
		int l2rc = shard_levels_open(si, l2err, sizeof(l2err));

		if (l2rc != 0) {
			/* -2: the shared level's or a key file's, whose message
			 * names its key: a start error of the configuration's
			 * (docs/kvss.md, "Exit status": 1 is a wrong byte's). */
			fprintf(stderr, "kvss: %s: %s%s\n", config, l2rc == -2 ? "" : "shard.l2: ",
				l2err);
			return l2rc == -2 ? 2 : 1;
		}
		disk = shard_level_of(si, SHARD_LEVEL_DISK);
		if (disk != NULL) {
			uint64_t held, dropped;

			level_disk_found(disk, &held, &dropped);
			/* A sealed file's headers fail their MAC when damaged, forged
			 * or sealed under a key not given (a few: more are refused). */
			printf("kvss: second tier %s%s: %" PRIu64 " columns kept from before, %" PRIu64
			       " dropped (%s)\n", si->cfg->l2.path,
			       level_disk_direct(disk) ? " (O_DIRECT)" : " (page cache: no O_DIRECT here)",
			       held, dropped, si->cfg->l2.key_file[0] != '\0'
						      ? "their MAC: damaged, forged or another key's"
						      : "checksum");
		}
	}
	if (!want && kvss.cfg.num_refill)
		printf("kvss: lcore %u (lcores.refill) is not an EAL worker: the refill queue runs "
		       "on the ingest lcore\n", rl);
	return 0;
}

/* kvss's own options as given, before they are read into kvss.cfg and kvss. */
struct cli {
	const char *config, *role, *poll, *trace, *limit, *lose, *idle, *linger, *l2dir, *faults,
		*docs;
};

/* The options (@p argc, @p argv past EAL's) into @p a: 0, or 2 (said). */
static int
cli_read(int argc, char **argv, const char *prog, struct cli *a)
{
	static const struct option lo[] = {
		{"config", required_argument, NULL, 'c'}, {"role", required_argument, NULL, 'r'},
		{"poll", required_argument, NULL, 'p'}, {"exit-when-idle", required_argument, NULL, 'x'},
		{"trace", required_argument, NULL, 't'}, {"limit", required_argument, NULL, 'n'},
		{"record-expect", required_argument, NULL, 'R'},
		{"plot-refills", required_argument, NULL, 'P'},
		{"ttft-out", required_argument, NULL, 'T'},
		{"l2-dir", required_argument, NULL, 'D'},
		{"lose-data", required_argument, NULL, 'L'}, {"linger", required_argument, NULL, 'G'},
		{"faults", required_argument, NULL, 'F'},
		{"documents", required_argument, NULL, 'd'},
		{"help", no_argument, NULL, 'h'}, {NULL, 0, NULL, 0}};
	char err[512], name[512];
	int c;

	optind = 1;
	while ((c = getopt_long(argc, argv, "h", lo, NULL)) != -1) {
		switch (c) {
		case 'c':
			a->config = optarg;
			break;
		case 'r':
			a->role = optarg;
			break;
		case 'p':
			a->poll = optarg;
			break;
		case 'x':
			a->idle = optarg;
			break;
		case 't':
			a->trace = optarg;
			break;
		case 'R':
			kvss.record_expect = optarg;
			break;
		case 'P':
			/* Refused now, not when the run ends. */
			if (plot_check_output(optarg, err, sizeof(err)) != 0) {
				fprintf(stderr, "kvss: --plot-refills %s: %s\n", plot_shown(optarg, name, sizeof(name)), err);
				return 2;
			}
			kvss.plot_refills = optarg;
			break;
		case 'T':
			/* As --plot-refills: refused now, not when the run ends. */
			if (plot_check_output(optarg, err, sizeof(err)) != 0) {
				fprintf(stderr, "kvss: --ttft-out %s: %s\n", plot_shown(optarg, name, sizeof(name)), err);
				return 2;
			}
			kvss.ttft_out = optarg;
			break;
		case 'D':
			a->l2dir = optarg;
			break;
		case 'n':
			a->limit = optarg;
			break;
		case 'd':
			a->docs = optarg;
			break;
		case 'L':
			a->lose = optarg;
			break;
		case 'G':
			a->linger = optarg;
			break;
		case 'F':
			a->faults = optarg;
			break;
		default:
			usage(stderr, prog);
			return 2;
		}
	}
	if (a->config == NULL) {
		fprintf(stderr, "kvss: --config FILE is required\n");
		usage(stderr, prog);
		return 2;
	}
	return 0;
}

/* The configuration file, read for the role asked (--role), and --l2-dir: 0, or 2 (said). */
static int
cli_load(const struct cli *a)
{
	const char *config = a->config;
	const char *role = a->role;
	const char *l2dir = a->l2dir;
	char err[512];
	unsigned int c;

	{
		enum kvss_role as = 0;

		if (role != NULL) {
			if (strcmp(role, "shard") == 0)
				as = KVSS_ROLE_SHARD;
			else if (strcmp(role, "driver") == 0)
				as = KVSS_ROLE_DRIVER;
			else if (strcmp(role, "all") == 0)
				as = KVSS_ROLE_ALL;
			else {
				fprintf(stderr, "kvss: --role: '%s' is not shard, driver or all\n", role);
				return 2;
			}
		}
		/* The file is read for the role it runs as: a shard's file run as
		 * a driver is a configuration error naming what is missing. */
		if (kvss_config_load_as(config, as, &kvss.cfg, err, sizeof(err)) != 0) {
			fprintf(stderr, "kvss: %s\n", err);
			return 2;
		}
	}
	if (l2dir != NULL) {
		/* Each hosted shard's second tier in another directory (its file
		 * named as shard.l2.dir names it). */
		bool any = false;

		for (c = 0; (kvss.cfg.role & KVSS_ROLE_SHARD) && c < kvss.cfg.num_local; c++) {
			struct kvss_shard_cfg *sc = &kvss.cfg.local[c];

			if (sc->l2.path[0] == '\0')
				continue;
			any = true;
			if (l2dir[0] == '\0' ||
			    snprintf(sc->l2.path, sizeof(sc->l2.path), "%s/shard-%u-%u.l2", l2dir,
				     sc->model, sc->id) >= (int)sizeof(sc->l2.path)) {
				fprintf(stderr, "kvss: --l2-dir: '%s' is empty or too long\n", l2dir);
				return 2;
			}
		}
		if (!any) {
			fprintf(stderr, "kvss: --l2-dir: %s gives this process no second tier (shard.l2)\n",
				config);
			return 2;
		}
	}
	return 0;
}

/* The driver's options (a shard refuses them), --faults and --trace: 0, or 2 (said). */
static int
cli_driver(const struct cli *cl)
{
	const char *trace = cl->trace;
	const char *limit = cl->limit;
	const char *lose = cl->lose;
	const char *linger = cl->linger;
	const char *faults = cl->faults;
	const char *docs = cl->docs;
	char err[512], name[512];

	/* An output over the trace it replays would destroy the input. */
	if (kvss.ttft_out != NULL && trace != NULL && trace[0] != '\0') {
		struct stat a, b;

		if (stat(kvss.ttft_out, &a) == 0 && stat(trace, &b) == 0 && a.st_dev == b.st_dev &&
		    a.st_ino == b.st_ino) {
			fprintf(stderr, "kvss: --ttft-out %s: is the trace it replays (--trace)\n",
				plot_shown(kvss.ttft_out, name, sizeof(name)));
			return 2;
		}
	}
	/* Options of the driver role mean nothing to a shard. */
	if (kvss.cfg.role == KVSS_ROLE_SHARD) {
		const char *what = trace ? "--trace" : limit ? "--limit" : docs ? "--documents"
				   : lose ? "--lose-data"
				   : faults ? "--faults"
				   : linger ? "--linger" : kvss.record_expect ? "--record-expect"
				   : kvss.plot_refills ? "--plot-refills"
				   : kvss.ttft_out ? "--ttft-out" : NULL;

		if (what != NULL) {
			fprintf(stderr, "kvss: %s: means nothing to a shard (the driver's wafer "
					"emulator replays requests)\n", what);
			return 2;
		}
	}
	if (faults != NULL && kvss_faults_parse(faults, &kvss.faults, err, sizeof(err)) != 0) {
		fprintf(stderr, "kvss: %s\n", err);
		return 2;
	}
	if (trace != NULL) {
		/* Given on the command line, a trace must be there: no silent
		 * fall-back to the built-in workload (wafer.trace has one).
		 * --trace "" asks for the built-in workload. */
		if (trace[0] != '\0') {
			FILE *f = fileio_open(trace, err, sizeof(err));

			if (f == NULL) {
				fprintf(stderr, "kvss: --trace: %s\n", err);
				return 2;
			}
			fclose(f);
		}
		snprintf(kvss.cfg.wafer.trace, sizeof(kvss.cfg.wafer.trace), "%s", trace);
	}
	return 0;
}

/* The numbers, --poll, and the lcores the configuration names: 0, or 2 (said). */
static int
cli_numbers(const struct cli *a)
{
	const char *config = a->config;
	const char *poll = a->poll;
	const char *limit = a->limit;
	const char *lose = a->lose;
	const char *idle = a->idle;
	const char *linger = a->linger;
	const char *docs = a->docs;
	char err[512];
	unsigned int c;

	/* Whole numbers, 1e6 notation too, never a prefix of what was given. */
	{
		const struct {
			const char *opt, *val;
			uint64_t lo, hi;
			uint32_t *dst;
		} nums[] = {
			{"--exit-when-idle", idle, 1, 86400000, &kvss.exit_idle_ms},
			{"--limit", limit, 1, 100000000, &kvss.cfg.wafer.limit},
			{"--documents", docs, 0, 1000000, &kvss.cfg.wafer.documents},
			{"--linger", linger, 1, 86400000, &kvss.linger_ms},
			{"--lose-data", lose, 0, 1000000000, &kvss.cfg.wafer.lose_data_every},
		};
		unsigned int i;
		uint64_t v;

		for (i = 0; i < sizeof(nums) / sizeof(nums[0]); i++) {
			if (nums[i].val == NULL)
				continue;
			if (args_u64(nums[i].opt, nums[i].val, nums[i].lo, nums[i].hi, &v, err,
				     sizeof(err)) != 0) {
				fprintf(stderr, "kvss: %s\n", err);
				return 2;
			}
			*nums[i].dst = (uint32_t)v;
		}
	}
	if (poll != NULL) {
		if (strcmp(poll, "busy") == 0)
			kvss.cfg.poll = KVSS_POLL_BUSY;
		else if (strcmp(poll, "idle") == 0)
			kvss.cfg.poll = KVSS_POLL_IDLE;
		else if (strcmp(poll, "interrupt") == 0)
			kvss.cfg.poll = KVSS_POLL_INTERRUPT;
		else {
			fprintf(stderr, "kvss: --poll: '%s' is not busy, idle or interrupt\n", poll);
			return 2;
		}
	}
	for (c = 0; (kvss.cfg.role & KVSS_ROLE_SHARD) && c < kvss.cfg.num_local; c++)
		if (!rte_lcore_is_enabled(kvss.cfg.ingest_lcore[c]) ||
		    kvss.cfg.ingest_lcore[c] == rte_get_main_lcore()) {
			fprintf(stderr, "kvss: %s: lcores.ingest: lcore %u is not an EAL worker lcore "
					"(-l/--lcores)\n", config, kvss.cfg.ingest_lcore[c]);
			return 2;
		}
	return 0;
}

/*
 * kvss's own options (@p argc, @p argv past EAL's) into kvss.cfg and kvss,
 * the configuration file's name in @p config: 0, or the exit status (2: a
 * usage or configuration error, said on stderr).
 */
static int
options(int argc, char **argv, const char *prog, const char **configp)
{
	struct cli a = {0}; /* its strings are argv's, which outlive the run */
	int rc;

	if ((rc = cli_read(argc, argv, prog, &a)) != 0 || (rc = cli_load(&a)) != 0 ||
	    (rc = cli_driver(&a)) != 0 || (rc = cli_numbers(&a)) != 0)
		return rc;
	*configp = a.config;
	return 0;
}

/* --help, --version and a bare `kvss`, before EAL: an exit status, or -1 to go on. */
static int
early_args(int argc, char **argv, const char *prog)
{
	int c;

	/* EAL would otherwise want devices and memory; a bare `kvss` would
	 * probe this machine's own NICs. */
	if (argc < 2) {
		usage(stderr, prog);
		return 2;
	}
	for (c = 1; c < argc; c++) {
		if (strcmp(argv[c], "--help") == 0 || strcmp(argv[c], "-h") == 0) {
			usage(stdout, prog);
			return 0;
		}
		if (strcmp(argv[c], "--version") == 0) {
			args_version("kvss", PROTO_VERSION);
			return 0;
		}
	}
	return -1;
}

/*
 * EAL, started: the arguments it took (as rte_eal_init), or -1 after
 * saying why, with what the failed start made removed, and only that: a
 * runtime directory that was there before may be another process's.
 */
static int
eal_start(int argc, char **argv)
{
	char rundir[PATH_MAX];
	bool had = runtime_dir_of(argc, argv, rundir, sizeof(rundir)) == 0 && access(rundir, F_OK) == 0;
	int ret = rte_eal_init(argc, argv);

	if (ret < 0) {
		eal_failed(rte_errno, rundir, argc, argv);
		if (!had && rundir[0] != '\0')
			kvss_remove_dir(rundir);
		return -1;
	}
	/* Which pages the store, the pools and the PrefixMap live in: said, as
	 * it changes every figure (a page walk per 4 KiB, a fault per first touch). */
	if (rte_eal_has_hugepages())
		printf("kvss: memory in hugepages\n");
	else
		printf("kvss: memory in 4 KiB pages (--no-huge; hugepages are faster: "
		       "scripts/hugepages.sh reserve MB, then run without --no-huge)\n");
	fflush(stdout);
	return ret;
}

/*
 * The driver's requests, before any port starts: a trace that does not
 * parse stops the program here, naming wafer.trace, not after its memif
 * ports connected to the shards (which then saw it go, and its ports'
 * teardown raced memif's interrupt thread). 0 with *@p out set, or the
 * exit status.
 */
static int
driver_load(struct drv **out)
{
	struct drv *d = kvss_driver_new();
	int ret = d == NULL ? -1 : kvss_driver_load(d);

	if (ret != 0) {
		kvss_driver_free(d);
		/* -2: the trace; -3: a signal while it loaded; -1: no memory */
		return ret == -2 ? 2 : ret == -3 ? 0 : 1;
	}
	*out = d;
	return 0;
}

/*
 * The driver's ports (those a shard of this process did not start), then
 * the driver: 0, -1 when a signal stopped the start (nothing runs; exit
 * 0), or the exit status.
 */
static int
driver_start(struct drv *d)
{
	uint16_t m, k;
	int ret;

	for (m = 0; m < kvss.cfg.driver.pc.num_models; m++)
		for (k = 0; k < kvss.cfg.driver.models[m].num_shards; k++) {
			uint16_t port = kvss.cfg.driver.models[m].shard[k].port;

			if (kvss_port_started(port))
				continue;
			if ((ret = kvss_port_init(port, kvss.cfg.mtu, 0, 0, NULL)) != 0)
				return ret == -EDOM ? 2 : kvss_quitting() ? -1 : 1;
		}
	ret = kvss_driver_init(d);
	return ret == 0 ? 0 : ret == -2 ? 2 : 1; /* 2: a configuration error */
}

/*
 * Everything this process's roles need before an lcore starts: the mbuf
 * pool, the ports, the shards (their stores and levels), the driver, the
 * rings and telemetry. 0, -1 when a signal stopped the start, or the exit
 * status (what was set up is freed by roles_stop()).
 */
static int
roles_start(const char *config, struct drv *d)
{
	/* The shard lcores.refill serves (shards_start). */
	struct kvss_shard_inst *first = &kvss_shards[0];
	int status;

	kvss.pool = rte_pktmbuf_pool_create("kvss_pool", 8191, 256, 0,
					    (uint16_t)(RTE_PKTMBUF_HEADROOM + PROTO_FRAME_MAX),
					    (int)rte_socket_id());
	if (kvss.pool == NULL) {
		fprintf(stderr, "kvss: mbuf pool: %s\n", rte_strerror(rte_errno));
		return 1;
	}
	if (kvss.cfg.role == KVSS_ROLE_ALL && kvss_ring_ports() != 0)
		return 1;
	if ((kvss.cfg.role & KVSS_ROLE_SHARD) && (status = shards_start(config)) != 0)
		return status;
	if (d != NULL && (status = driver_start(d)) != 0)
		return status;
	if (first->refill_lcore_on) {
		first->ingest_to_refill =
			rte_ring_create("ingest_to_refill", 1024, (int)rte_socket_id(),
					RING_F_SP_ENQ | RING_F_SC_DEQ);
		first->refill_to_ingest =
			rte_ring_create("refill_to_ingest", 64, (int)rte_socket_id(),
					RING_F_SP_ENQ | RING_F_SC_DEQ);
		if (first->ingest_to_refill == NULL || first->refill_to_ingest == NULL) {
			fprintf(stderr, "kvss: rings: %s\n", rte_strerror(rte_errno));
			return 1;
		}
	}
	if (kvss_gate_init() != 0)
		return 1;
	if (kvss_telemetry_register() != 0)
		fprintf(stderr, "kvss: telemetry commands not registered\n");
	if (d != NULL && kvss_driver_telemetry_register(d) != 0)
		fprintf(stderr, "kvss: driver telemetry commands not registered\n");
	return 0;
}

/*
 * Run @p fn for shard @p shard on @p lcore: 0, or -1 when the lcore cannot
 * take it (said). A shard whose loop never runs would answer nothing,
 * silently; the configuration gives each loop its own lcore, so this is
 * EAL's refusal, not the operator's.
 */
static int
launch(lcore_function_t *fn, unsigned int shard, unsigned int lcore, const char *what)
{
	int rc = rte_eal_remote_launch(fn, (void *)(uintptr_t)shard, lcore);

	if (rc != 0)
		fprintf(stderr, "kvss: shard %u's %s loop not started on lcore %u: %s\n", shard, what,
			lcore, strerror(-rc));
	return rc != 0 ? -1 : 0;
}

/*
 * Each shard's lcores, then the driver on the main lcore (or a wait for a
 * signal); back when all stopped: 0, or when a loop could not start the
 * exit status (docs/kvss.md, "Exit status": 4 with a driver, could not
 * run; 1 for a shard process, could not start).
 */
static int
roles_run(struct drv *d)
{
	unsigned int c;
	int failed = 0;

	kvss.lcore_role[rte_get_main_lcore()] = KVSS_LCORE_CONTROL;
	for (c = 0; (kvss.cfg.role & KVSS_ROLE_SHARD) && c < kvss.num_shards; c++) {
		const struct kvss_shard_inst *in = &kvss_shards[c];

		kvss.lcore_role[in->ingest_lcore] = KVSS_LCORE_INGEST;
		printf("kvss: shard %u of model %u up, epoch 0x%08x, ingest on lcore %u",
		       in->cfg->id, in->cfg->model, kvss.epoch, in->ingest_lcore);
		if (in->refill_lcore_on)
			printf(", refill on lcore %u", in->refill_lcore);
		printf("\n");
		fflush(stdout);
		failed |= launch(kvss_shard_ingest, c, in->ingest_lcore, "ingest");
	}
	if ((kvss.cfg.role & KVSS_ROLE_SHARD) && kvss_shards[0].refill_lcore_on) {
		kvss.lcore_role[kvss.cfg.refill_lcore[0]] = KVSS_LCORE_REFILL;
		/* The first shard's (shards_start). */
		failed |= launch(kvss_shard_refill, 0, kvss.cfg.refill_lcore[0], "refill");
	}
	if (failed) {
		__atomic_store_n(&kvss.quit, 2, __ATOMIC_RELAXED); /* what did start stops */
		rte_eal_mp_wait_lcore();
		return d != NULL ? 4 : 1;
	}
	if (d != NULL) {
		/* The control lcore is the main lcore: the driver runs here until done. */
		if (kvss.cfg.control_lcore != rte_get_main_lcore())
			printf("kvss: lcores.control = %u: the driver runs on the main lcore, %u\n",
			       kvss.cfg.control_lcore, rte_get_main_lcore());
		kvss_driver_main(d);
	} else {
		while (!kvss_quitting())
			usleep(10000);
	}
	rte_eal_mp_wait_lcore();
	return 0;
}

/* What the run did: the shards' counters, rails and levels, the driver's summary; the exit status. */
static int
roles_report(struct drv *d)
{
	unsigned int c;

	if (kvss.cfg.role & KVSS_ROLE_SHARD) {
		for (c = 0; c < kvss.num_shards; c++)
			shard_levels_stop(&kvss_shards[c]);
		print_stats();
		for (c = 0; c < kvss.num_shards; c++)
			printf("kvss: shard %u of model %u: the rail: the driver's frames crossed %u router(s), "
			       "the wafer's %u (0: one segment, or none came)\n", kvss_shards[c].cfg->id,
			       kvss_shards[c].cfg->model, kvss_shards[c].driver_hops,
			       kvss_shards[c].wafer_hops);
		for (c = 0; c < kvss.num_shards; c++)
			print_levels(&kvss_shards[c]);
	}
	if (d == NULL)
		return 0;
	kvss_driver_summary(d);
	/* A signal stops a run early: that is not a failure. */
	return __atomic_load_n(&kvss.quit, __ATOMIC_RELAXED) != 1 ? kvss_driver_status(d) : 0;
}

/*
 * Everything set up, freed, at the end and on the way out after a failure.
 * Every port started is closed first (a shard's second tier that does not
 * open, say): a port left started to EAL's cleanup prints "Cannot close
 * started device", which read as the cause.
 */
static void
roles_stop(struct drv *d)
{
	unsigned int c;

	kvss_ports_close();
	kvss_gate_fini();
	/* The lcores have stopped: each level's worker drains, then ends. */
	for (c = 0; c < KVSS_MAX_LOCAL_SHARDS; c++)
		shard_levels_close(&kvss_shards[c]);
	kvss_driver_free(d);
	rte_ring_free(kvss_shards[0].ingest_to_refill);
	rte_ring_free(kvss_shards[0].refill_to_ingest);
	kvss_telemetry_stores_gone(); /* a scrape now must not read them */
	for (c = 0; c < KVSS_MAX_LOCAL_SHARDS; c++)
		rte_free(kvss_shards[c].store_mem);
	kvss_ring_ports_free();
	rte_mempool_free(kvss.pool);
}

int
main(int argc, char **argv)
{
	const char *config = NULL, *prog = argv[0];
	struct drv *drv = NULL; /* the driver role's state (NULL: not this process's role) */
	int ret, status;

	if ((status = early_args(argc, argv, prog)) >= 0)
		return status;
	/*
	 * A signal at any moment stops the program within about a second and
	 * leaves no runtime directory: the handlers are in place before EAL
	 * starts, and every step after checks the flag they set.
	 */
	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);
	if ((ret = eal_start(argc, argv)) < 0)
		return 1;
	status = kvss_quitting() ? 0 : options(argc - ret, argv + ret, prog, &config);
	if (status != 0 || kvss_quitting())
		goto out_eal;
	do {
		kvss.epoch = (uint32_t)rte_rand();
	} while (kvss.epoch == 0);
	kvss.start_tsc = rte_get_tsc_cycles();
	if (kvss_quitting())
		goto out_eal;
	if ((kvss.cfg.role & KVSS_ROLE_DRIVER) && (status = driver_load(&drv)) != 0)
		goto out_eal;
	status = roles_start(config, drv);
	if (status == 0 && (status = roles_run(drv)) == 0)
		status = roles_report(drv);
	if (status < 0)
		status = 0; /* a signal stopped the start: nothing ran, nothing failed */
	roles_stop(drv);
out_eal:
	kvss_eal_stop();
	return status;
}
