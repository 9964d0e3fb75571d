/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Telemetry: /kvss/stats, /kvss/caches, /kvss/lcores, answered from the
 * telemetry thread by reading the lcores' stats (approximate while running).
 */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rte_cycles.h>
#include <rte_lcore.h>
#include <rte_telemetry.h>
#include <rte_version.h>

#include "args.h"
#include "kvss.h"
#include "shard/shard_api.h"

/*
 * The counters of the shard's levels below DRAM (shard/level.c). Weak: a
 * program built without the shard (the telemetry test supplies its own)
 * reports none.
 */
unsigned int shard_level_counters(enum shard_level_kind k, struct level_counter *c,
				  const char **prefix) __attribute__((weak));

#ifndef KVSS_COMMIT
#define KVSS_COMMIT "unknown" /* the Makefile names the commit built from */
#endif

/*
 * The shards' stores, as the handlers below read them from DPDK's
 * telemetry thread, which runs until EAL's cleanup: held while one reads a
 * store, and by kvss_telemetry_stores_gone() while the stores are let go
 * (a scrape at the end read memory already freed).
 */
static rte_spinlock_t stores_lock = RTE_SPINLOCK_INITIALIZER;

void
kvss_telemetry_stores_gone(void)
{
	unsigned int c;

	rte_spinlock_lock(&stores_lock);
	for (c = 0; c < KVSS_MAX_LOCAL_SHARDS; c++)
		kvss_shards[c].store = NULL;
	rte_spinlock_unlock(&stores_lock);
}

/* The shards this process hosts (kvss_shards[0 .. n)); none in a driver's. */
static unsigned int
shards_here(void)
{
	return kvss.num_shards < KVSS_MAX_LOCAL_SHARDS ? kvss.num_shards : KVSS_MAX_LOCAL_SHARDS;
}

static int
tel_stats(const char *cmd, const char *params, struct rte_tel_data *d)
{
	struct kvss_lcore_stats t;
	int r;

	(void)cmd;
	(void)params;
	kvss_stats_total(&t);
	rte_tel_data_start_dict(d);
#define KVSS_STAT_TEL(n) rte_tel_data_add_dict_u64(d, #n, t.n);
	KVSS_STATS(KVSS_STAT_TEL)
#undef KVSS_STAT_TEL
	for (r = 1; r < PROTO_R_MAX; r++) {
		char key[48];

		snprintf(key, sizeof(key), "drop_%s", proto_reason_name((enum proto_reason)r));
		rte_tel_data_add_dict_u64(d, key, t.drops[r]);
	}
	for (r = 1; r < PROTO_E_MAX; r++) {
		char key[48];

		snprintf(key, sizeof(key), "error_%s", proto_err_name((unsigned int)r));
		rte_tel_data_add_dict_u64(d, key, t.errors[r]);
	}
	for (r = 1; r < PROTO_E_MAX; r++) {
		char key[48];

		snprintf(key, sizeof(key), "refill_failed_%s", proto_err_name((unsigned int)r));
		rte_tel_data_add_dict_u64(d, key, t.refill_errors[r]);
	}
	{
		/* Each shard's driver epoch, as the logs print them: driver_epoch
		 * the first shard's, driver_epochs every shard's in this
		 * process, in order (two models may have two drivers). */
		struct rte_tel_data *eps = rte_tel_data_alloc();
		char ep[16];
		unsigned int k;

		snprintf(ep, sizeof(ep), "0x%08x", kvss_shards[0].driver_epoch);
		rte_tel_data_add_dict_string(d, "driver_epoch", ep);
		if (eps != NULL) {
			rte_tel_data_start_array(eps, RTE_TEL_STRING_VAL);
			for (k = 0; k < shards_here(); k++) {
				snprintf(ep, sizeof(ep), "0x%08x",
					 __atomic_load_n(&kvss_shards[k].driver_epoch, __ATOMIC_ACQUIRE));
				rte_tel_data_add_array_string(eps, ep);
			}
			rte_tel_data_add_dict_container(d, "driver_epochs", eps, 0);
		}
	}
	{
		/* The shard's lcores' time by role, busy and idle (kvss.h). */
		struct kvss_shard_time tm;

		kvss_shard_time(&tm);
		rte_tel_data_add_dict_u64(d, "ingest_busy_us", tm.ingest_busy_us);
		rte_tel_data_add_dict_u64(d, "refill_busy_us", tm.refill_busy_us);
		rte_tel_data_add_dict_u64(d, "idle_us", tm.idle_us);
	}
	/* Each level below DRAM (disk_*, shared_*), summed over the process's
	 * shards; zeros where none has it. */
	for (r = 0; shard_level_counters != NULL && r < SHARD_LEVELS; r++) {
		struct level_counter lc[LEVEL_COUNTERS_MAX];
		const char *prefix;
		unsigned int k, n = shard_level_counters((enum shard_level_kind)r, lc, &prefix);

		for (k = 0; k < n; k++) {
			char key[64];

			snprintf(key, sizeof(key), "%s%s%s", prefix, lc[k].group, lc[k].name);
			rte_tel_data_add_dict_u64(d, key, lc[k].value);
		}
	}
	{
		/* The stores' own counters, summed over the process's shards
		 * (zeros in a process without one). */
		struct kvstore_stats sum = {0}, ks;
		unsigned int c;

		rte_spinlock_lock(&stores_lock);
		for (c = 0; c < kvss.num_shards; c++) {
			if (kvss_shards[c].store == NULL)
				continue;
			kvstore_stats(kvss_shards[c].store, &ks);
#define KVSTORE_SUM(n) sum.n += ks.n;
			KVSTORE_STATS(KVSTORE_SUM)
#undef KVSTORE_SUM
		}
		rte_spinlock_unlock(&stores_lock);
#define KVSTORE_TEL(n) rte_tel_data_add_dict_u64(d, "store_" #n, sum.n);
		KVSTORE_STATS(KVSTORE_TEL)
#undef KVSTORE_TEL
	}
	rte_tel_data_add_dict_u64(d, "gate_parks", kvss_gate_parks());
	{
		/* Routers crossed: the most any shard here saw (any is off the rail). */
		uint8_t dh = 0, wh = 0, h;
		unsigned int k;

		for (k = 0; k < shards_here(); k++) {
			h = __atomic_load_n(&kvss_shards[k].driver_hops, __ATOMIC_RELAXED);
			dh = h > dh ? h : dh;
			h = __atomic_load_n(&kvss_shards[k].wafer_hops, __ATOMIC_RELAXED);
			wh = h > wh ? h : wh;
		}
		rte_tel_data_add_dict_u64(d, "driver_hops", dh);
		rte_tel_data_add_dict_u64(d, "wafer_hops", wh);
	}
	return 0;
}

/*
 * DPDK 22.11 containers hold only arrays of numbers or strings: per-cache and
 * per-lcore figures come as a dict of arrays, element i for cache (lcore) i.
 */
static int
add_u64_array(struct rte_tel_data *d, const char *name, const uint64_t *v, unsigned int n)
{
	struct rte_tel_data *a = rte_tel_data_alloc();
	unsigned int i;

	if (a == NULL)
		return -ENOMEM;
	rte_tel_data_start_array(a, RTE_TEL_U64_VAL);
	for (i = 0; i < n; i++)
		rte_tel_data_add_array_u64(a, v[i]);
	return rte_tel_data_add_dict_container(d, name, a, 0);
}

/*
 * Every cache of every shard this process hosts, a row each: shard and
 * model say whose (two shards of one process have caches of the same ids).
 */
static int
tel_caches(const char *cmd, const char *params, struct rte_tel_data *d)
{
#define ROWS (KVSS_MAX_LOCAL_SHARDS * KVSTORE_MAX_CACHES)
	/* On the stack: EAL answers each client from a thread of its own. */
	uint64_t shard[ROWS], model[ROWS], id[ROWS], bpt[ROWS], nb[ROWS], cap[ROWS], stored[ROWS],
		prompts[ROWS], freeslots[ROWS], limbo[ROWS];
	unsigned int k, c, n = 0;

	(void)cmd;
	(void)params;
	rte_tel_data_start_dict(d);
	rte_spinlock_lock(&stores_lock);
	for (k = 0; k < KVSS_MAX_LOCAL_SHARDS; k++) {
		const struct kvss_shard_inst *sh = &kvss_shards[k];
		unsigned int nc;

		if (sh->store == NULL)
			continue;
		nc = kvstore_params(sh->store)->num_caches;
		for (c = 0; c < nc && n < ROWS; c++, n++) {
			struct kvstore_cache_stats cs;

			kvstore_cache_stats(sh->store, (uint16_t)c, &cs);
			shard[n] = sh->cfg->id;
			model[n] = sh->cfg->model;
			id[n] = c;
			bpt[n] = cs.bytes_per_token;
			nb[n] = cs.num_buffers;
			cap[n] = cs.capacity_tokens;
			stored[n] = cs.stored_tokens;
			prompts[n] = cs.prompts;
			freeslots[n] = cs.free_slots;
			limbo[n] = cs.limbo_slots;
		}
	}
	rte_spinlock_unlock(&stores_lock);
	add_u64_array(d, "shard", shard, n);
	add_u64_array(d, "model", model, n);
	add_u64_array(d, "cache_id", id, n);
	add_u64_array(d, "bytes_per_token", bpt, n);
	add_u64_array(d, "buffers", nb, n);
	add_u64_array(d, "capacity_tokens", cap, n);
	add_u64_array(d, "stored_tokens", stored, n);
	add_u64_array(d, "prompts", prompts, n);
	add_u64_array(d, "free_slots", freeslots, n);
	add_u64_array(d, "limbo_slots", limbo, n);
	return 0;
#undef ROWS
}

static int
tel_lcores(const char *cmd, const char *params, struct rte_tel_data *d)
{
	static const char *const names[] = {"none", "ingest", "refill", "control"};
	static uint64_t id[RTE_MAX_LCORE], busy[RTE_MAX_LCORE], idle[RTE_MAX_LCORE];
	struct rte_tel_data *roles = rte_tel_data_alloc();
	unsigned int l, n = 0;

	(void)cmd;
	(void)params;
	if (roles == NULL)
		return -ENOMEM;
	rte_tel_data_start_dict(d);
	rte_tel_data_start_array(roles, RTE_TEL_STRING_VAL);
	RTE_LCORE_FOREACH(l) {
		id[n] = l;
		busy[n] = kvss.stats[l].busy_cycles;
		idle[n] = kvss.stats[l].idle_cycles;
		rte_tel_data_add_array_string(roles, names[kvss.lcore_role[l]]);
		n++;
	}
	add_u64_array(d, "lcore", id, n);
	rte_tel_data_add_dict_container(d, "role", roles, 0);
	add_u64_array(d, "busy_cycles", busy, n);
	add_u64_array(d, "idle_cycles", idle, n);
	/* Cycles into seconds (the exporter's kvss_lcore_busy_seconds_total). */
	rte_tel_data_add_dict_u64(d, "tsc_hz", rte_get_tsc_hz());
	return 0;
}

/* /kvss/prompt,CACHE,PROMPT_ID: that prompt's range (approximate while running). */
static int
tel_prompt(const char *cmd, const char *params, struct rte_tel_data *d)
{
	unsigned long long cache, id;
	char idbuf[24];
	const struct kvss_shard_inst *sh = NULL;
	unsigned int k, shard_id = 0, model = 0;
	uint32_t off, n;
	bool found = false;
	char *end;

	(void)cmd;
	if (params == NULL)
		return -EINVAL;
	/* Prompt ids use all 64 bits: decimal or 0x hex. */
	/* Digits only: strtoull takes a sign and spaces ("-0" read as 0). */
	if (!isdigit((unsigned char)params[0]))
		return -EINVAL;
	cache = strtoull(params, &end, 10);
	if (*end != ',' || cache > 65535)
		return -EINVAL;
	/* Not empty, no sign (strtoull would wrap "-1"), no octal reading of "01". */
	params = end + 1;
	if (!isxdigit((unsigned char)params[0]) || (params[0] == '0' && isdigit((unsigned char)params[1])))
		return -EINVAL;
	errno = 0;
	id = strtoull(params, &end, 0);
	if (*end != '\0' || errno == ERANGE)
		return -EINVAL;
	rte_tel_data_start_dict(d);
	/* The first shard of this process that holds it (prompt ids are the
	 * driver's, one per request: two shards hold one only if they are
	 * of two models asked for one request). */
	rte_spinlock_lock(&stores_lock);
	for (k = 0; k < KVSS_MAX_LOCAL_SHARDS && !found; k++) {
		sh = &kvss_shards[k];
		found = sh->store != NULL && cache < kvstore_params(sh->store)->num_caches &&
			kvstore_prompt(sh->store, (uint16_t)cache, id, &off, &n) == 0;
	}
	if (found) {
		shard_id = sh->cfg->id;
		model = sh->cfg->model;
	}
	rte_spinlock_unlock(&stores_lock);
	if (!found) {
		rte_tel_data_add_dict_string(d, "error", "no such prompt");
		return 0;
	}
	rte_tel_data_add_dict_u64(d, "shard", shard_id);
	rte_tel_data_add_dict_u64(d, "model", model);
	rte_tel_data_add_dict_u64(d, "cache_id", cache);
	/* As kvss-dump --json writes it: a string, exact beyond 2^53. */
	snprintf(idbuf, sizeof(idbuf), "%llu", id);
	rte_tel_data_add_dict_string(d, "prompt_id", idbuf);
	rte_tel_data_add_dict_u64(d, "offset", off);
	rte_tel_data_add_dict_u64(d, "tokens", n);
	return 0;
}

/* /kvss/build: what this process is (the exporter's kvss_build_info). */
static int
tel_build(const char *cmd, const char *params, struct rte_tel_data *d)
{
	(void)cmd;
	(void)params;
	rte_tel_data_start_dict(d);
	rte_tel_data_add_dict_string(d, "version", KVSS_RELEASE);
	rte_tel_data_add_dict_string(d, "commit", KVSS_COMMIT);
	rte_tel_data_add_dict_string(d, "dpdk", rte_version());
	return 0;
}

int
kvss_telemetry_register(void)
{
	if (rte_telemetry_register_cmd("/kvss/stats", tel_stats,
				       "Frames, bytes, drops by reason, HELLO and STATUS counts") ||
	    rte_telemetry_register_cmd("/kvss/caches", tel_caches,
				       "Per cache: bytes per token, buffers, capacity, stored, prompts") ||
	    rte_telemetry_register_cmd("/kvss/lcores", tel_lcores,
				       "Per lcore: role, busy and idle cycles") ||
	    rte_telemetry_register_cmd("/kvss/prompt", tel_prompt,
				       "A prompt's stored range. Parameters: cache_id,prompt_id") ||
	    rte_telemetry_register_cmd("/kvss/build", tel_build,
				       "This kvss: release, git commit built from, DPDK version"))
		return -1;
	return 0;
}
