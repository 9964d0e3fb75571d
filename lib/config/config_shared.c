/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The configuration's shared level (config.h, struct kvss_shared_cfg;
 * PROTOCOL.md section 10):
 *
 *   shared = { conf = "/etc/ceph/ceph.conf"; pool = "kvss"; client = "client.admin";
 *              op_timeout_ms = 5000; depth = 16; column = 64;
 *              deadline_ms = 20; generation_ms = 1000; lookahead = 32;
 *              max_columns = 32; staged = 4096; admit = "all"; write = true;
 *              max_up = 256; latency_us = 20000; gbps = 2;
 *              key_file = "/etc/kvss/shared.key"; old_key_file = "";
 *              org_key_file = "/etc/kvss/org.keys"; }
 *
 * Without the group (or with conf = "") there is no shared level and
 * nothing changes. Whether the cluster is there is kvss's to find at start
 * (it stops naming shared.conf); here only the values.
 */
#include <string.h>

#include "config_priv.h"

int
kvss_cfg_load_shared(struct ctx *c, const config_setting_t *root, struct kvss_config *cfg)
{
	static const char *const admits[] = {"l2", "hit", "all", NULL};
	const config_setting_t *g = cfg_member(c, root, "shared");
	struct kvss_shared_cfg *sc = &cfg->shared;
	int v;

	memset(sc, 0, sizeof(*sc));
	if (g == NULL)
		return 0;
	if (!config_setting_is_group(g))
		return cfg_fail(c, root, "shared", "want a group { ... }, not a value");
	if (cfg_get_str(c, g, "conf", sc->conf, sizeof(sc->conf)) != 0)
		return -1;
	snprintf(sc->pool, sizeof(sc->pool), "kvss");
	snprintf(sc->client, sizeof(sc->client), "client.admin");
	if (cfg_get_str(c, g, "pool", sc->pool, sizeof(sc->pool)) != 0 ||
	    cfg_get_str(c, g, "client", sc->client, sizeof(sc->client)) != 0)
		return -1;
	if (sc->conf[0] != '\0' && sc->pool[0] == '\0')
		return cfg_fail(c, g, "pool", "empty: name the RADOS pool");
	if (sc->conf[0] != '\0' && strncmp(sc->client, "client.", 7) != 0)
		return cfg_fail(c, g, "client", "'%s': a Ceph client name starts with \"client.\"",
				sc->client);
	/* librados counts its op timeout in whole seconds (at least one). */
	GET_INT(c, g, "op_timeout_ms", 1000, 600000, 5000, false, sc->op_timeout_ms);
	GET_INT(c, g, "depth", 1, 256, 16, false, sc->depth);
	GET_INT(c, g, "column", 1, 4096, 64, false, sc->column);
	GET_INT(c, g, "deadline_ms", 1, 60000, 20, false, sc->deadline_ms);
	GET_INT(c, g, "generation_ms", 10, 3600000, 1000, false, sc->generation_ms);
	GET_INT(c, g, "lookahead", 1, 1024, 32, false, sc->lookahead);
	GET_INT(c, g, "max_columns", 1, 256, 32, false, sc->max_columns);
	GET_INT(c, g, "staged", 1, 1 << 20, 4096, false, sc->staged);
	GET_INT(c, g, "max_up", 1, 8192, 256, false, sc->max_up);
	/* The refill-time model's line for columns brought up from the shared
	 * level, where learning starts (refill_model "learned"): a read of a
	 * whole slice from the cluster, about 20 ms and 2 Gb/s on this kind of
	 * machine (docs/results.md). */
	GET_INT(c, g, "latency_us", 0, 10000000, 20000, false, sc->latency_us);
	if (cfg_get_gbps(c, g, "gbps", 2, &sc->gbps) != 0)
		return -1;
	/* Every column by default: what a replica keeps hot stays in its DRAM
	 * and never goes down to its second tier, so "l2" would share only what
	 * it is done with, never the prefixes another replica needs first. */
	v = cfg_get_choice(c, g, "admit", admits, KVSS_SHARED_ADMIT_ALL, false);
	if (v < 0)
		return -1;
	sc->admit = (uint8_t)v;
	if (cfg_get_bool(c, g, "write", true, &sc->write) != 0)
		return -1;
	/* The files themselves are checked where they are read (the shard's
	 * start, naming the key): here that the pair makes sense. */
	if (cfg_get_str(c, g, "key_file", sc->key_file, sizeof(sc->key_file)) != 0 ||
	    cfg_get_str(c, g, "old_key_file", sc->old_key_file, sizeof(sc->old_key_file)) != 0 ||
	    cfg_get_str(c, g, "org_key_file", sc->org_key_file, sizeof(sc->org_key_file)) != 0)
		return -1;
	if (sc->org_key_file[0] != '\0' && sc->key_file[0] == '\0')
		return cfg_fail(c, g, "org_key_file",
				"given without key_file: organization keys are mixed with the master key");
	if (sc->org_key_file[0] != '\0' && (strcmp(sc->org_key_file, sc->key_file) == 0 ||
					    strcmp(sc->org_key_file, sc->old_key_file) == 0))
		return cfg_fail(c, g, "org_key_file", "'%s' is a master key file too: the store is "
				"a file of its own (kvss-shared keys --init)", sc->org_key_file);
	if (sc->old_key_file[0] != '\0' && sc->key_file[0] == '\0')
		return cfg_fail(c, g, "old_key_file",
				"given without key_file: the key slices are sealed with now comes first");
	if (sc->old_key_file[0] != '\0' && strcmp(sc->old_key_file, sc->key_file) == 0)
		return cfg_fail(c, g, "old_key_file", "'%s' is key_file too: name the key before it",
				sc->old_key_file);
	return 0;
}
