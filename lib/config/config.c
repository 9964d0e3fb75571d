/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The settings of a kvss configuration (config.h): every value is checked
 * here, at start; an error names the file, the line and the key, so the
 * program can stop before any port starts. Reading the file and refusing
 * unknown keys is config_read.c's; lib/config is the only code that
 * includes libconfig.
 */
#include "config_priv.h"
#include "shared_obj.h"

#include <errno.h>
#include <inttypes.h>
#include <libconfig.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* ---- Sections ---------------------------------------------------------------- */

/* shard.drivers = ["10.99.0.1", ...]: the only senders of control it takes. */
static int
get_drivers(struct ctx *c, const config_setting_t *sh, struct kvss_config *cfg)
{
	const config_setting_t *d = cfg_member(c, sh, "drivers");
	int i, n;

	cfg->shard.num_drivers = 0;
	if (d == NULL)
		return 0;
	if (!config_setting_is_array(d) || (n = config_setting_length(d)) < 1 ||
	    n > KVSS_MAX_DRIVERS)
		return cfg_fail(c, sh, "drivers", "want an array of 1..%d IPv4 addresses in quotes",
			    KVSS_MAX_DRIVERS);
	for (i = 0; i < n; i++) {
		const char *v = config_setting_get_string_elem(d, (unsigned int)i);

		if (v == NULL || kvss_parse_ipv4(v, &cfg->shard.driver_ip[i]) != 0)
			return cfg_fail(c, sh, "drivers", "element %d: want an IPv4 address in quotes", i);
	}
	cfg->shard.num_drivers = (uint16_t)n;
	return 0;
}

/*
 * shard.l2 = { dir = "/var/lib/kvss"; column = 64; capacity_tokens = [N, ...]; }:
 * the second tier. A file path, or a directory where the file is named after
 * the shard (the embedded default: shard-MODEL-ID.l2).
 */
static int
load_shard_l2(struct ctx *c, const config_setting_t *sh, struct kvss_config *cfg)
{
	const config_setting_t *l2 = cfg_member(c, sh, "l2");
	char dir[KVSS_PATH_MAX] = "";
	uint16_t n = cfg->shard.store.num_caches, i;

	cfg->shard.l2.path[0] = '\0';
	if (l2 == NULL)
		return 0;
	if (!config_setting_is_group(l2))
		return cfg_fail(c, sh, "l2", "want a group { ... }, not a value");
	if (cfg_get_str(c, l2, "path", cfg->shard.l2.path, sizeof(cfg->shard.l2.path)) != 0 ||
	    cfg_get_str(c, l2, "dir", dir, sizeof(dir)) != 0)
		return -1;
	if ((cfg->shard.l2.path[0] != '\0') == (dir[0] != '\0'))
		return cfg_fail(c, sh, "l2", "give one of path (a file or block device) and dir");
	if (dir[0] != '\0' &&
	    snprintf(cfg->shard.l2.path, sizeof(cfg->shard.l2.path), "%s/shard-%u-%u.l2", dir,
		     cfg->shard.model, cfg->shard.id) >= (int)sizeof(cfg->shard.l2.path))
		return cfg_fail(c, l2, "dir", "too long");
	/* Formatting over what is not blank loses it: only when told, per shard. */
	if (cfg_get_bool(c, l2, "format", false, &cfg->shard.l2.format) != 0)
		return -1;
	/* Sealed columns: the key files are read (and checked) by the shard at start. */
	if (cfg_get_str(c, l2, "key_file", cfg->shard.l2.key_file, sizeof(cfg->shard.l2.key_file)) != 0 ||
	    cfg_get_str(c, l2, "old_key_file", cfg->shard.l2.old_key_file,
			sizeof(cfg->shard.l2.old_key_file)) != 0 ||
	    cfg_get_str(c, l2, "org_key_file", cfg->shard.l2.org_key_file,
			sizeof(cfg->shard.l2.org_key_file)) != 0)
		return -1;
	if (cfg->shard.l2.org_key_file[0] != '\0' && cfg->shard.l2.key_file[0] == '\0')
		return cfg_fail(c, l2, "org_key_file",
				"given without key_file: organization keys are mixed with the master key");
	if (cfg->shard.l2.org_key_file[0] != '\0' &&
	    (strcmp(cfg->shard.l2.org_key_file, cfg->shard.l2.key_file) == 0 ||
	     strcmp(cfg->shard.l2.org_key_file, cfg->shard.l2.old_key_file) == 0))
		return cfg_fail(c, l2, "org_key_file", "'%s' is a master key file too: the store is "
				"a file of its own (kvss-shared keys --init)", cfg->shard.l2.org_key_file);
	if (cfg->shard.l2.old_key_file[0] != '\0' && cfg->shard.l2.key_file[0] == '\0')
		return cfg_fail(c, l2, "old_key_file",
				"given without key_file: the key columns are sealed with now comes first");
	if (cfg->shard.l2.old_key_file[0] != '\0' &&
	    strcmp(cfg->shard.l2.old_key_file, cfg->shard.l2.key_file) == 0)
		return cfg_fail(c, l2, "old_key_file", "'%s' is key_file too: name the key before it",
				cfg->shard.l2.old_key_file);
	GET_INT(c, l2, "column", 1, 4096, 64, false, cfg->shard.l2.column);
	GET_INT(c, l2, "queue_depth", 1, 4096, 64, false, cfg->shard.l2.queue_depth);
	GET_INT(c, l2, "op_timeout_ms", 1000, 600000, 10000, false, cfg->shard.l2.op_timeout_ms);
	if (cfg_get_u64_array(c, l2, "capacity_tokens", n, 1, 1ull << 40, cfg->shard.l2.capacity_tokens) != 0)
		return -1;
	for (i = 0; i < n; i++) {
		uint64_t col = (uint64_t)cfg->shard.l2.column * cfg->shard.store.cache[i].bytes_per_token;
		/* A slot: the column, its 64-byte header, a sealed file's 32-byte
		 * trailer, to 4 KiB (lib/kvdisk). */
		uint64_t slot = (col + 64 + (cfg->shard.l2.key_file[0] != '\0' ? 32 : 0) + 4095) /
				4096 * 4096;

		if (cfg->shard.l2.capacity_tokens[i] < cfg->shard.l2.column)
			return cfg_fail(c, l2, "capacity_tokens", "element %u (%" PRIu64 ") holds no whole "
				    "column of %u tokens", i, cfg->shard.l2.capacity_tokens[i],
				    cfg->shard.l2.column);
		/* Columns move as one request of 32-bit length, and the tier holds
		 * a pool of them: bound a column's bytes where both stay sane. */
		if (col > KVSS_L2_COLUMN_BYTES_MAX)
			return cfg_fail(c, l2, "column", "%u tokens x cache %u's bytes_per_token (%u) "
				    "is %" PRIu64 " bytes a column, more than %llu: lower "
				    "shard.l2.column or shard.caches.[%u].bytes_per_token",
				    cfg->shard.l2.column, i, cfg->shard.store.cache[i].bytes_per_token,
				    col, (unsigned long long)KVSS_L2_COLUMN_BYTES_MAX, i);
		if (cfg->shard.l2.capacity_tokens[i] / cfg->shard.l2.column > (1ull << 62) / slot)
			return cfg_fail(c, l2, "capacity_tokens", "element %u: %" PRIu64 " columns of "
				    "%" PRIu64 " bytes each overflow a file's size: lower it or "
				    "shard.l2.column", i,
				    cfg->shard.l2.capacity_tokens[i] / cfg->shard.l2.column, slot);
	}
	return 0;
}

static int
load_shard(struct ctx *c, const config_setting_t *sh, struct kvss_config *cfg)
{
	const config_setting_t *caches;
	struct kvstore_params *kp = &cfg->shard.store;
	int i, n;

	if (sh == NULL)
		return cfg_fail(c, NULL, "shard", "missing: the role needs a shard section");
	if (!config_setting_is_group(sh))
		return cfg_fail(c, config_setting_parent(sh), "shard", "want a group { ... }, not a value");
	GET_INT(c, sh, "port", 0, 31, 0, false, cfg->shard.port);
	GET_INT(c, sh, "id", 0, 65534, 0, true, cfg->shard.id);
	GET_INT(c, sh, "model", 0, PREFIXCACHE_MAX_MODELS - 1, 0, false, cfg->shard.model);
	if (cfg_get_endpoint(c, sh, "address", true, &cfg->shard.addr) != 0 ||
	    cfg_get_endpoint(c, sh, "wafer", true, &cfg->shard.wafer) != 0)
		return -1;
	GET_INT(c, sh, "batch_timeout_ms", 1, 60000, 50, false, cfg->shard.batch_timeout_ms);
	GET_INT(c, sh, "space_timeout_ms", 1, 600000, 1000, false, cfg->shard.space_timeout_ms);
	GET_INT(c, sh, "status_interval_ms", 1, 60000, 100, false, cfg->shard.status_interval_ms);
	if (get_drivers(c, sh, cfg) != 0)
		return -1;
	{
		static const char *const routed[] = {"warn", "refuse", NULL};
		int r = cfg_get_choice(c, sh, "routed", routed, KVSS_ROUTED_WARN, false);

		if (r < 0)
			return -1;
		cfg->shard.routed = (uint8_t)r;
	}
	GET_INT(c, sh, "max_prompts", 0, 1 << 28, 0, false, kp->max_prompts);
	GET_INT(c, sh, "spare_tokens", 0, 1 << 28, 0, false, kp->spare_tokens);
	caches = cfg_member(c, sh, "caches");
	if (caches == NULL || !config_setting_is_list(caches) ||
	    (n = config_setting_length(caches)) < 1 || n > KVSTORE_MAX_CACHES)
		return cfg_fail(c, sh, "caches", "want a list of 1..%d caches ( { id = 0; ... } )",
			    KVSTORE_MAX_CACHES);
	kp->num_caches = (uint16_t)n;
	for (i = 0; i < n; i++) {
		const config_setting_t *e = config_setting_get_elem(caches, (unsigned int)i);
		struct kvstore_cache_params *cp = &kp->cache[i];
		long long id;

		if (cfg_get_int(c, e, "id", 0, KVSTORE_MAX_CACHES - 1, 0, true, &id) != 0)
			return -1;
		if (id != i)
			return cfg_fail(c, e, "id", "caches must be numbered 0, 1, ... in order (want %d)", i);
		GET_INT(c, e, "bytes_per_token", 1, 1 << 26, 0, true, cp->bytes_per_token);
		GET_INT(c, e, "buffers", 1, 256, 1, false, cp->num_buffers);
		GET_INT(c, e, "capacity_tokens", 1, (long long)KVSS_MAX_CAPACITY_TOKENS, 0, true,
			cp->capacity_tokens);
		if (cp->bytes_per_token % cp->num_buffers != 0)
			return cfg_fail(c, e, "buffers", "must divide bytes_per_token (%u)",
				    cp->bytes_per_token);
		/* A batch's stream is addressed in 32 bits on the wire (DataHeader
		 * offset and length): the most tokens one EVICT can name at this mtu,
		 * times a token's bytes, must fit, or a driver's full batch wraps. */
		{
			uint64_t g = proto_evict_max_entries(cfg->mtu);

			if (g * cp->bytes_per_token > UINT32_MAX)
				return cfg_fail(c, e, "bytes_per_token",
						"%u bytes x the %" PRIu64 " tokens an EVICT can name "
						"at mtu %u is %" PRIu64 " bytes, past the 4 GiB a "
						"batch's stream can address (PROTOCOL.md section 3): "
						"lower bytes_per_token or mtu", cp->bytes_per_token, g,
						cfg->mtu, g * cp->bytes_per_token);
		}
	}
	if (kvstore_memsize(kp) == 0)
		return cfg_fail(c, sh, "caches", "these caches do not make a valid store");
	return load_shard_l2(c, sh, cfg);
}

/* A model's caches = ( { id; rule; window; sinks; }, ... ), numbered 0, 1, ... in order. */
static int
load_model_caches(struct ctx *c, const config_setting_t *me, const config_setting_t *caches,
		  struct prefixcache_model *pm, uint32_t column)
{
	static const char *const rules[] = {"full", "swa", NULL};
	int i, n;

	if (caches == NULL || !config_setting_is_list(caches) || (n = config_setting_length(caches)) < 1 ||
	    n > PREFIXCACHE_MAX_CACHES)
		return cfg_fail(c, me, "caches", "want a list of 1..%d caches", PREFIXCACHE_MAX_CACHES);
	pm->num_caches = (uint16_t)n;
	for (i = 0; i < n; i++) {
		const config_setting_t *e = config_setting_get_elem(caches, (unsigned int)i);
		struct prefixcache_cache *cc = &pm->cache[i];
		long long id;
		int rule;

		if (cfg_get_int(c, e, "id", 0, PREFIXCACHE_MAX_CACHES - 1, 0, true, &id) != 0)
			return -1;
		if (id != i)
			return cfg_fail(c, e, "id", "caches must be numbered 0, 1, ... in order (want %d)", i);
		cc->cache_id = (uint16_t)id;
		rule = cfg_get_choice(c, e, "rule", rules, 0, false);
		if (rule < 0)
			return -1;
		cc->rule = rule == 1 ? PREFIXCACHE_SWA : PREFIXCACHE_FULL;
		if (cc->rule == PREFIXCACHE_SWA) {
			GET_INT(c, e, "window", 1, 1 << 24, 0, true, cc->window);
			GET_INT(c, e, "sinks", 0, 1 << 24, 0, false, cc->sinks);
			if (cc->sinks >= column || cc->sinks >= cc->window)
				return cfg_fail(c, e, "sinks", "must be below the column (%u) and the window",
					    column);
		}
	}
	return 0;
}

/*
 * Shard @k of a model's shards: where it is and what it holds per cache.
 * The model's capacity is the least any shard holds, its refill bytes per
 * token the most any shard sends.
 */
static int
load_model_shard(struct ctx *c, const config_setting_t *e, int k, struct prefixcache_model *pm,
		 struct kvss_model_ref *mr, uint16_t def_port)
{
	struct kvss_shard_ref *sr = &mr->shard[k];
	uint64_t b[PREFIXCACHE_MAX_CACHES], sum = 0;
	int i, j, n = pm->num_caches;

	GET_INT(c, e, "id", 0, 65534, 0, true, sr->id);
	for (j = 0; j < k; j++)
		if (mr->shard[j].id == sr->id)
			return cfg_fail(c, e, "id", "shard %u appears twice", sr->id);
	GET_INT(c, e, "port", 0, 31, def_port, false, sr->port);
	if (cfg_get_endpoint(c, e, "address", true, &sr->addr) != 0 ||
	    cfg_get_u64_array(c, e, "bytes_per_token", (unsigned int)n, 1, 1 << 26, b) != 0 ||
	    cfg_get_u64_array(c, e, "capacity_tokens", (unsigned int)n, 1, KVSS_MAX_CAPACITY_TOKENS,
			  sr->capacity_tokens) != 0)
		return -1;
	if (cfg_member(c, e, "buffers") != NULL) {
		uint64_t nb[PREFIXCACHE_MAX_CACHES];

		if (cfg_get_u64_array(c, e, "buffers", (unsigned int)n, 1, 256, nb) != 0)
			return -1;
		for (i = 0; i < n; i++) {
			if (b[i] % nb[i] != 0)
				return cfg_fail(c, e, "buffers", "element %d (%" PRIu64 ") must divide "
					    "bytes_per_token (%" PRIu64 ")", i, nb[i], b[i]);
			sr->buffers[i] = (uint16_t)nb[i];
		}
	} else {
		for (i = 0; i < n; i++)
			sr->buffers[i] = 1;
	}
	if (cfg_member(c, e, "l2_tokens") != NULL) {
		if (cfg_get_u64_array(c, e, "l2_tokens", (unsigned int)n, 1, 1ull << 40, sr->l2_tokens) != 0)
			return -1;
		for (i = 0; i < n; i++)
			if (pm->cache[i].rule != PREFIXCACHE_FULL)
				return cfg_fail(c, e, "l2_tokens", "cache %d is a sliding window: "
					    "its columns mean nothing without the window's glue, "
					    "so it stays in DRAM (no second tier for this model)", i);
	}
	if (k > 0 && (sr->l2_tokens[0] != 0) != (mr->shard[0].l2_tokens[0] != 0))
		return cfg_fail(c, e, "l2_tokens", "every shard of a model has a second tier, or none");
	for (i = 0; i < n; i++) {
		if (sr->l2_tokens[i] != 0 &&
		    (k == 0 && i == 0 ? true : sr->l2_tokens[i] < pm->l2_capacity_tokens))
			pm->l2_capacity_tokens = sr->l2_tokens[i]; /* the minimum, as for DRAM */
		sr->bytes_per_token[i] = (uint32_t)b[i];
		sum += b[i];
		/* A token is cached only when every shard holds it: the minimum. */
		if (sr->capacity_tokens[i] < pm->cache[i].capacity_tokens)
			pm->cache[i].capacity_tokens = sr->capacity_tokens[i];
	}
	if (sum > pm->refill_bytes_per_token)
		pm->refill_bytes_per_token = sum;
	return 0;
}

/* The refill-time model's two lines: a refill from DRAM's and a read from the second tier's. */
static int
load_model_refill(struct ctx *c, const config_setting_t *me, struct prefixcache_model *pm)
{
	double gbps = 0;

	{
		long long us;

		if (cfg_get_int(c, me, "refill_latency_us", 0, 10000000, 20, false, &us) != 0)
			return -1;
		pm->refill_latency_ns = (uint64_t)us * 1000;
	}
	if (cfg_get_gbps(c, me, "refill_gbps", 100, &gbps) != 0)
		return -1;
	pm->refill_bytes_per_ns = gbps / 8.0;
	GET_INT(c, me, "max_batch_tokens", 0, 65535, 0, false, pm->max_batch_tokens);
	{
		long long us;

		/* The second tier's line of the refill-time model (a read of a column). */
		if (cfg_get_int(c, me, "l2_latency_us", 0, 10000000, 200, false, &us) != 0)
			return -1;
		pm->l2_latency_ns = (uint64_t)us * 1000;
		if (cfg_get_gbps(c, me, "l2_gbps", 16, &gbps) != 0)
			return -1;
		pm->l2_bytes_per_ns = gbps / 8.0;
	}
	return 0;
}

static int
load_model(struct ctx *c, const config_setting_t *me, struct prefixcache_model *pm,
	   struct kvss_model_ref *mr, uint32_t column, uint16_t def_port)
{
	const config_setting_t *caches = cfg_member(c, me, "caches");
	const config_setting_t *shards = cfg_member(c, me, "shards");
	int i, k, ns;

	if (cfg_get_str(c, me, "name", mr->name, sizeof(mr->name)) != 0)
		return -1;
	if (load_model_caches(c, me, caches, pm, column) != 0)
		return -1;
	if (shards == NULL || !config_setting_is_list(shards) || (ns = config_setting_length(shards)) < 1 ||
	    ns > KVSS_MAX_SHARDS)
		return cfg_fail(c, me, "shards", "want a list of 1..%d shards", KVSS_MAX_SHARDS);
	mr->num_shards = (uint16_t)ns;
	for (i = 0; i < pm->num_caches; i++)
		pm->cache[i].capacity_tokens = UINT64_MAX;
	pm->refill_bytes_per_token = 0;
	for (k = 0; k < ns; k++)
		if (load_model_shard(c, config_setting_get_elem(shards, (unsigned int)k), k, pm, mr,
				     def_port) != 0)
			return -1;
	return load_model_refill(c, me, pm);
}

/* ttl_last_s and ttl_first_s of @g (at most ten years), in ns; 0: none. */
static int
get_ttls(struct ctx *c, const config_setting_t *g, uint64_t *last_ns, uint64_t *first_ns)
{
	long long v;

	if (cfg_get_int(c, g, "ttl_last_s", 0, 10ll * 365 * 86400, 0, false, &v) != 0)
		return -1;
	*last_ns = (uint64_t)v * 1000000000ull;
	if (cfg_get_int(c, g, "ttl_first_s", 0, 10ll * 365 * 86400, 0, false, &v) != 0)
		return -1;
	*first_ns = (uint64_t)v * 1000000000ull;
	return 0;
}

/*
 * The driver's named choices: what it does on a lost message, with control
 * from an unexpected sender, where its refill-time model comes from, and
 * what its second tier admits (into @l2_admit, for every model).
 */
static int
load_driver_choices(struct ctx *c, const config_setting_t *d, struct kvss_config *cfg,
		    uint8_t *l2_admit)
{
	{
		static const char *const on_loss[] = {"resync", "exact", "truncate", NULL};
		int ol = cfg_get_choice(c, d, "on_loss", on_loss, KVSS_LOSS_DEFAULT, false);

		if (ol < 0)
			return -1;
		cfg->driver.on_loss = (uint8_t)(ol == 2 ? KVSS_LOSS_EXACT : ol);
	}
	{
		static const char *const routed[] = {"warn", "refuse", NULL};
		int r = cfg_get_choice(c, d, "routed", routed, KVSS_ROUTED_WARN, false);

		if (r < 0)
			return -1;
		cfg->driver.routed = (uint8_t)r;
	}
	{
		static const char *const policy[] = {"adaptive", "io-only", "compute-only", "split", NULL};
		int rp = cfg_get_choice(c, d, "refill_policy", policy, KVSS_POLICY_ADAPTIVE, false);

		if (rp < 0)
			return -1;
		cfg->driver.refill_policy = (uint8_t)rp;
	}
	{
		static const char *const sources[] = {"configured", "learned", NULL};
		/* Learned by default: the configured line is a guess that, on the
		 * README's own example, fell short of every refill. */
		int rm = cfg_get_choice(c, d, "refill_model", sources, KVSS_MODEL_LEARNED, false);

		if (rm < 0)
			return -1;
		cfg->driver.refill_model = (uint8_t)rm;
	}
	{
		static const char *const admit[] = {"all", "seen2", "short", NULL};
		/* All by default: measured on the trace (docs/DESIGN.md, the second tier). */
		int a = cfg_get_choice(c, d, "l2_admit", admit, PREFIXCACHE_L2_ALL, false);

		if (a < 0)
			return -1;
		*l2_admit = (uint8_t)a;
	}
	return 0;
}

/*
 * A tier's shares: @p share guaranteed (key @p ks) and @p cap at most (key
 * @p kc), fractions of each cache group's capacity in that tier, from group
 * @p g (@p def_share, @p def_cap when not given): 0 <= share <= cap <= 1.
 * The keys are literals: the loader keeps the names it was asked for.
 */
static int
get_share(struct ctx *c, const config_setting_t *g, const char *ks, const char *kc,
	  double def_share, double def_cap, double *share, double *cap)
{
	if (cfg_get_real(c, g, ks, 0, true, 1, def_share, share) != 0 ||
	    cfg_get_real(c, g, kc, 0, false, 1, def_cap, cap) != 0)
		return -1;
	if (*share > *cap)
		return cfg_fail(c, g, ks, "%g is above %s (%g%s): a guarantee past the cap could "
			    "not be kept", *share, kc, *cap,
			    g != NULL && config_setting_get_member(g, kc) == NULL
			    ? ", driver.org_default's" : "");
	return 0;
}

/*
 * driver.orgs = ( { name; ttl_last_s; ttl_first_s; dram_share; dram_cap;
 * l2_share; l2_cap; }, ... ): TTLs and shares of DRAM and of the second
 * tier per organization; driver.org_default = { the four } for those not
 * named. In each tier the shares named, and the default's once more (for
 * at least one organization not named), sum to at most the whole.
 */
static int
load_driver_orgs(struct ctx *c, const config_setting_t *d, struct kvss_config *cfg)
{
	const config_setting_t *orgs = cfg_member(c, d, "orgs");
	const config_setting_t *def = cfg_member(c, d, "org_default");
	struct prefixcache_params *pp = &cfg->driver.pc;
	double sum, sum2;
	uint16_t k;
	int i;

	if (def != NULL && !config_setting_is_group(def))
		return cfg_fail(c, d, "org_default", "want a group { dram_share; dram_cap; l2_share; "
			    "l2_cap; }");
	if (get_share(c, def, "dram_share", "dram_cap", 0, 1, &pp->dram_share_default,
		      &pp->dram_cap_default) != 0 ||
	    get_share(c, def, "l2_share", "l2_cap", 0, 1, &pp->l2_share_default,
		      &pp->l2_cap_default) != 0)
		return -1;
	sum = pp->dram_share_default;
	sum2 = pp->l2_share_default;
	if (orgs == NULL)
		return 0;
	if (!config_setting_is_list(orgs) || config_setting_length(orgs) > KVSS_MAX_ORGS)
		return cfg_fail(c, d, "orgs", "want a list of at most %d organizations",
			    KVSS_MAX_ORGS);
	cfg->driver.num_orgs = (uint16_t)config_setting_length(orgs);
	for (i = 0; i < cfg->driver.num_orgs; i++) {
		const config_setting_t *o = config_setting_get_elem(orgs, (unsigned int)i);
		struct kvss_org_ttl *ot = &cfg->driver.org[i];

		if (cfg_get_str(c, o, "name", ot->name, sizeof(ot->name)) != 0)
			return -1;
		if (ot->name[0] == '\0')
			return cfg_fail(c, o, "name", "missing");
		for (k = 0; k < i; k++)
			if (strcmp(cfg->driver.org[k].name, ot->name) == 0)
				return cfg_fail(c, o, "name", "'%s' is named twice (also orgs.[%u])",
					    ot->name, k);
		if (get_ttls(c, o, &ot->ttl_last_ns, &ot->ttl_first_ns) != 0)
			return -1;
		if (get_share(c, o, "dram_share", "dram_cap", pp->dram_share_default,
			      pp->dram_cap_default, &ot->dram_share, &ot->dram_cap) != 0 ||
		    get_share(c, o, "l2_share", "l2_cap", pp->l2_share_default, pp->l2_cap_default,
			      &ot->l2_share, &ot->l2_cap) != 0)
			return -1;
		sum += ot->dram_share;
		sum2 += ot->l2_share;
		/* An organization without a share of its own has org_default's: said. */
		if (sum > 1 + 1e-9)
			return cfg_fail(c, o, "dram_share", "the DRAM shares sum to %g with this one%s%s: "
				    "above the whole (1)", sum, pp->dram_share_default > 0
				    ? " and driver.org_default's" : "",
				    config_setting_get_member(o, "dram_share") == NULL
				    ? " (which has driver.org_default's, not being given one)" : "");
		if (sum2 > 1 + 1e-9)
			return cfg_fail(c, o, "l2_share", "the second tier's shares sum to %g with this "
				    "one%s%s: above the whole (1)", sum2, pp->l2_share_default > 0
				    ? " and driver.org_default's" : "",
				    config_setting_get_member(o, "l2_share") == NULL
				    ? " (which has driver.org_default's, not being given one)" : "");
	}
	return 0;
}

static int
load_driver(struct ctx *c, const config_setting_t *d, struct kvss_config *cfg)
{
	struct prefixcache_params *pp = &cfg->driver.pc;
	const config_setting_t *models;
	uint8_t l2_admit;
	int i, n, pol;

	if (d == NULL)
		return cfg_fail(c, NULL, "driver", "missing: the role needs a driver section");
	if (!config_setting_is_group(d))
		return cfg_fail(c, config_setting_parent(d), "driver", "want a group { ... }, not a value");
	GET_INT(c, d, "port", 0, 31, 0, false, cfg->driver.port);
	if (cfg_get_endpoint(c, d, "address", true, &cfg->driver.addr) != 0)
		return -1;
	GET_INT(c, d, "column", 1, 4096, 64, false, pp->column);
	pol = cfg_get_choice(c, d, "policy", prefixcache_policy_names, 0, false);
	if (pol < 0)
		return -1;
	pp->policy = (enum prefixcache_policy)pol;
	GET_INT(c, d, "probation_pct", 1, 90, 10, false, pp->probation_pct);
	GET_INT(c, d, "followup_pct", 1, 100, 10, false, pp->followup_pct);
	if (get_ttls(c, d, &pp->ttl_last_ns, &pp->ttl_first_ns) != 0)
		return -1;
	if (cfg_get_bool(c, d, "no_minus_one", false, &pp->no_minus_one) != 0)
		return -1;
	GET_INT(c, d, "retransmit_ms", 1, 60000, 5, false, cfg->driver.retransmit_ms);
	GET_INT(c, d, "hello_ms", 1, 60000, 100, false, cfg->driver.hello_ms);
	GET_INT(c, d, "start_timeout_ms", 1, 3600000, 10000, false, cfg->driver.start_timeout_ms);
	GET_INT(c, d, "refill_timeout_ms", 1, 600000, 2000, false, cfg->driver.refill_timeout_ms);
	GET_INT(c, d, "away_ms", 0, 600000, 1000, false, cfg->driver.away_ms);
	/* Silence past away_ms holds a shard's model back (misses) but keeps
	 * its prefixes: a busy shard comes back with them. Past dead_ms it is
	 * taken for gone. */
	GET_INT(c, d, "dead_ms", 0, 3600000, 10 * (long long)cfg->driver.away_ms, false,
		cfg->driver.dead_ms);
	if (cfg->driver.away_ms != 0 && cfg->driver.dead_ms < cfg->driver.away_ms)
		return cfg_fail(c, d, "dead_ms", "%u is below driver.away_ms (%u): a shard is "
			    "silent for away_ms before it can be taken for gone",
			    cfg->driver.dead_ms, cfg->driver.away_ms);
	GET_INT(c, d, "recompute_tokens_per_s", 0, 1000000000, 0, false,
		cfg->driver.recompute_tokens_per_s);
	if (load_driver_choices(c, d, cfg, &l2_admit) != 0)
		return -1;
	GET_INT(c, d, "refill_short_pct", 0, 99, 0, false, cfg->driver.refill_short_pct);
	if (cfg->driver.refill_short_pct && cfg->driver.refill_model != KVSS_MODEL_LEARNED)
		return cfg_fail(c, d, "refill_short_pct", "needs refill_model = \"learned\"");
	models = cfg_member(c, d, "models");
	if (models == NULL || !config_setting_is_list(models) || (n = config_setting_length(models)) < 1 ||
	    n > PREFIXCACHE_MAX_MODELS)
		return cfg_fail(c, d, "models", "want a list of 1..%d models", PREFIXCACHE_MAX_MODELS);
	pp->num_models = (uint16_t)n;
	for (i = 0; i < n; i++) {
		if (load_model(c, config_setting_get_elem(models, (unsigned int)i), &pp->model[i],
			       &cfg->driver.models[i], pp->column, cfg->driver.port) != 0)
			return -1;
		pp->model[i].l2_admit = l2_admit;
		/* The adaptive policy's rule (prefixcache.h): a hit refilled only
		 * where that beats computing it. Without a rate nothing is known
		 * to beat, and every hit is refilled. */
		if (kvss_policy_adaptive(cfg->driver.refill_policy))
			pp->model[i].recompute_tokens_per_ns = cfg->driver.recompute_tokens_per_s / 1e9;
		/* The first model's hits only: the wafer's prefill (its one
		 * compute, which a front takes) is the first model's; a draft's
		 * front would be neither refilled nor computed. */
		pp->model[i].split = cfg->driver.refill_policy == KVSS_POLICY_SPLIT && i == 0;
	}
	return load_driver_orgs(c, d, cfg);
}


int
kvss_config_load(const char *path, struct kvss_config *cfg, char *err, size_t errlen)
{
	return kvss_config_load_as(path, 0, cfg, err, errlen);
}

/* role, poll_mode and mtu: the top-level values. @as, when not 0, overrides the role. */
static int
load_top(struct ctx *c, const config_setting_t *root, enum kvss_role as, struct kvss_config *cfg)
{
	static const char *const roles[] = {"shard", "driver", "all", NULL};
	static const char *const polls[] = {"busy", "idle", "interrupt", NULL};
	long long mtu;
	int v;

	v = cfg_get_choice(c, root, "role", roles, 0, true);
	if (v < 0)
		return -1;
	cfg->role = as != 0 ? as : (enum kvss_role)(v + 1);
	v = cfg_get_choice(c, root, "poll_mode", polls, 0, false);
	if (v < 0)
		return -1;
	cfg->poll = (enum kvss_poll)v;
	if (cfg_get_int(c, root, "mtu", 1500, PROTO_MTU_MAX, PROTO_MTU_DEFAULT, false, &mtu) != 0)
		return -1;
	cfg->mtu = (uint32_t)mtu;
	return 0;
}

/* udp = { control; evict; refill; }: three ports, all different. */
static int
load_udp(struct ctx *c, const config_setting_t *root, struct kvss_config *cfg)
{
	const config_setting_t *g = cfg_member(c, root, "udp");
	long long a, b, d;

	if (g != NULL && !config_setting_is_group(g))
		return cfg_fail(c, root, "udp", "want a group { ... }, not a value");
	if (cfg_get_int(c, g, "control", 1, 65535, PROTO_PORT_CTRL_DEFAULT, false, &a) != 0 ||
	    cfg_get_int(c, g, "evict", 1, 65535, PROTO_PORT_EVICT_DEFAULT, false, &b) != 0 ||
	    cfg_get_int(c, g, "refill", 1, 65535, PROTO_PORT_REFILL_DEFAULT, false, &d) != 0)
		return -1;
	if (a == b || a == d || b == d)
		return cfg_fail(c, g, "refill", "the three UDP ports must differ");
	cfg->udp = (struct proto_ports){(uint16_t)a, (uint16_t)b, (uint16_t)d, false};
	return 0;
}

/* lcores = { ingest; refill; control; }: no lcore has two of these jobs. */
static int
load_lcores(struct ctx *c, const config_setting_t *root, struct kvss_config *cfg)
{
	const config_setting_t *g = cfg_member(c, root, "lcores");
	unsigned int i, j;
	long long ctl;

	if (g != NULL && !config_setting_is_group(g))
		return cfg_fail(c, root, "lcores", "want a group { ... }, not a value");
	/* refill = []: none; the ingest lcore runs the refill queue. */
	if (cfg_get_lcores(c, g, "ingest", 1, false, cfg->ingest_lcore, &cfg->num_ingest) != 0 ||
	    cfg_get_lcores(c, g, "refill", 2, true, cfg->refill_lcore, &cfg->num_refill) != 0)
		return -1;
	if (cfg_get_int(c, g, "control", 0, 1023, 0, false, &ctl) != 0)
		return -1;
	cfg->control_lcore = (unsigned int)ctl;
	for (i = 0; i < cfg->num_ingest; i++)
		if (cfg->ingest_lcore[i] == cfg->control_lcore)
			return cfg_fail(c, g, "ingest", "lcore %u is also lcores.control",
					cfg->control_lcore);
	for (j = 0; j < cfg->num_refill; j++) {
		for (i = 0; i < cfg->num_ingest; i++)
			if (cfg->ingest_lcore[i] == cfg->refill_lcore[j])
				return cfg_fail(c, g, "refill", "lcore %u is also lcores.ingest",
						cfg->refill_lcore[j]);
		if (cfg->refill_lcore[j] == cfg->control_lcore)
			return cfg_fail(c, g, "refill", "lcore %u is also lcores.control",
					cfg->control_lcore);
	}
	return 0;
}

/*
 * Role all with shard = ( { ... }, ... ): one shard per group (a target's
 * and its draft's, say), each on its own ingest lcore.
 */
static int
load_local_shards(struct ctx *c, const config_setting_t *root, const config_setting_t *sl,
		  struct kvss_config *cfg)
{
	int n = config_setting_length(sl), i, j;

	if (n < 1 || n > KVSS_MAX_LOCAL_SHARDS)
		return cfg_fail(c, root, "shard", "want 1..%d shard groups ( { ... }, ... )",
				KVSS_MAX_LOCAL_SHARDS);
	for (i = 0; i < n; i++) {
		const config_setting_t *e = config_setting_get_elem(sl, (unsigned int)i);

		if (load_shard(c, e, cfg) != 0)
			return -1;
		for (j = 0; j < i; j++) {
			if (cfg->local[j].model == cfg->shard.model &&
			    cfg->local[j].id == cfg->shard.id)
				return cfg_fail(c, e, "id", "shard %u of model %u is hosted twice",
						cfg->shard.id, cfg->shard.model);
			/* Each shard's second tier is its own file (its own
			 * worker, index and owner in the superblock). */
			if (cfg->shard.l2.path[0] != '\0' &&
			    strcmp(cfg->local[j].l2.path, cfg->shard.l2.path) == 0)
				return cfg_fail(c, e, "l2", "%s is shard %u of model %u's second "
						"tier too: each shard needs its own file",
						cfg->shard.l2.path, cfg->local[j].id,
						cfg->local[j].model);
		}
		cfg->local[i] = cfg->shard;
	}
	cfg->num_local = (uint16_t)n;
	cfg->shard = cfg->local[0];
	if (cfg->num_ingest < n)
		return cfg_fail(c, cfg_member(c, root, "lcores"), "ingest",
				"%d shards: one ingest lcore each (%u given)", n, cfg->num_ingest);
	if (n > 1 && cfg->num_refill > 0)
		return cfg_fail(c, cfg_member(c, root, "lcores"), "refill",
				"%d shards: their refills run on their ingest lcores (want [])", n);
	return 0;
}

/* The shard role's section: one group, or with role all a list of them. */
static int
load_shards(struct ctx *c, const config_setting_t *root, struct kvss_config *cfg)
{
	const config_setting_t *sl = cfg_member(c, root, "shard");

	if (sl != NULL && config_setting_is_list(sl) && cfg->role == KVSS_ROLE_ALL)
		return load_local_shards(c, root, sl, cfg);
	if (load_shard(c, sl, cfg) != 0)
		return -1;
	cfg->local[0] = cfg->shard;
	cfg->num_local = 1;
	return 0;
}

/*
 * Role all: the shards this process hosts and the driver's models agree:
 * each shard's model exists, with as many caches.
 */
static int
check_all(struct ctx *c, const config_setting_t *root, const struct kvss_config *cfg)
{
	const struct prefixcache_model *pm;
	uint16_t i, m, k;

	for (i = 0; i < cfg->num_local; i++) {
		const struct kvss_shard_cfg *sc = &cfg->local[i];
		const config_setting_t *sg = cfg_member(c, root, "shard");

		if (config_setting_is_list(sg))
			sg = config_setting_get_elem(sg, i);
		if (sc->model >= cfg->driver.pc.num_models)
			return cfg_fail(c, sg, "model", "no such model in driver.models");
		pm = &cfg->driver.pc.model[sc->model];
		if (pm->num_caches != sc->store.num_caches)
			return cfg_fail(c, sg, "caches", "%u caches, but driver.models.[%u] has %u",
					sc->store.num_caches, sc->model, pm->num_caches);
	}
	/* Several shards: each of the driver's is one of them (its own ring pair). */
	for (m = 0; cfg->num_local > 1 && m < cfg->driver.pc.num_models; m++)
		for (k = 0; k < cfg->driver.models[m].num_shards; k++) {
			for (i = 0; i < cfg->num_local; i++)
				if (cfg->local[i].model == m &&
				    cfg->local[i].id == cfg->driver.models[m].shard[k].id)
					break;
			if (i == cfg->num_local)
				return cfg_fail(c, cfg_member(c, root, "driver"), "models",
						"model %u's shard %u is not one this process hosts (shard)",
						m, cfg->driver.models[m].shard[k].id);
		}
	return 0;
}

/*
 * When requests arrive, and what a prefill costs beside its tokens. A
 * scale or rate of 0, below, NaN or infinite is refused naming the key:
 * each would put every arrival at one instant or never.
 */
static int
load_wafer_arrivals(struct ctx *c, const config_setting_t *g, struct kvss_config *cfg)
{
	static const char *const arrivals[] = {"closed", "trace", "poisson", NULL};
	long long seed, over;
	int a = cfg_get_choice(c, g, "arrivals", arrivals, KVSS_ARRIVALS_CLOSED, false);

	if (a < 0)
		return -1;
	cfg->wafer.arrivals = (uint8_t)a;
	/* Up to a million times faster or slower than the trace: past that
	 * one request's milliseconds would be a day, or nothing. */
	if (cfg_get_real(c, g, "time_scale", 0, false, 1e6, 1.0, &cfg->wafer.time_scale) != 0 ||
	    cfg_get_real(c, g, "arrival_rate", 0, false, 1e6, 5.0, &cfg->wafer.arrival_rate) != 0)
		return -1;
	if (cfg->wafer.time_scale < 1e-6)
		return cfg_fail(c, g, "time_scale", "%g is below 1e-6", cfg->wafer.time_scale);
	if (cfg->wafer.arrival_rate < 1e-6)
		return cfg_fail(c, g, "arrival_rate", "%g is below 1e-6", cfg->wafer.arrival_rate);
	if (cfg_get_int(c, g, "arrival_seed", 0, 1ll << 62, 1, false, &seed) != 0 ||
	    cfg_get_int(c, g, "prefill_overhead_us", 0, 10000000, 0, false, &over) != 0)
		return -1;
	cfg->wafer.arrival_seed = (uint64_t)seed;
	cfg->wafer.prefill_overhead_us = (uint32_t)over;
	return 0;
}

/* wafer = { ... }: the emulator's workload and how it behaves. */
static int
load_wafer(struct ctx *c, const config_setting_t *root, struct kvss_config *cfg)
{
	static const char *const resume[] = {"estimate", "whole", NULL};
	static const char *const backpressure[] = {"wait", "skip", NULL};
	const config_setting_t *g = cfg_member(c, root, "wafer");
	long long lim, gen, docs, inflight, step, lose, ahead, mm, spk, spr, sps;
	int r;

	if (g != NULL && !config_setting_is_group(g))
		return cfg_fail(c, root, "wafer", "want a group { ... }, not a value");
	if (cfg_get_str(c, g, "trace", cfg->wafer.trace, sizeof(cfg->wafer.trace)) != 0)
		return -1;
	if (cfg_get_int(c, g, "limit", 0, 100000000, 0, false, &lim) != 0 ||
	    cfg_get_int(c, g, "lose_data_every", 0, 1000000000, 0, false, &lose) != 0 ||
	    cfg_get_int(c, g, "step_tokens", 1, 1 << 20, 256, false, &step) != 0 ||
	    cfg_get_int(c, g, "generate", 1, 100000000, 2000, false, &gen) != 0 ||
	    cfg_get_int(c, g, "documents", 0, 1000000, 0, false, &docs) != 0 ||
	    cfg_get_int(c, g, "max_inflight", 1, 4096, 8, false, &inflight) != 0 ||
	    cfg_get_int(c, g, "ahead_of_pick", 0, 4096, 0, false, &ahead) != 0 ||
	    cfg_get_int(c, g, "multimodal_every", 0, 1000000, 0, false, &mm) != 0 ||
	    cfg_get_int(c, g, "spec_tokens", 0, 64, 0, false, &spk) != 0 ||
	    cfg_get_int(c, g, "spec_reject_pct", 0, 100, 20, false, &spr) != 0 ||
	    cfg_get_int(c, g, "spec_seed", 0, 1ll << 62, 1, false, &sps) != 0)
		return -1;
	cfg->wafer.spec_tokens = (uint32_t)spk;
	cfg->wafer.spec_reject_pct = (uint32_t)spr;
	cfg->wafer.spec_seed = (uint64_t)sps;
	cfg->wafer.multimodal_every = (uint32_t)mm;
	cfg->wafer.ahead_of_pick = (uint32_t)ahead;
	cfg->wafer.limit = (uint32_t)lim;
	cfg->wafer.generate = (uint32_t)gen;
	cfg->wafer.documents = (uint32_t)docs;
	cfg->wafer.max_inflight = (uint32_t)inflight;
	cfg->wafer.step_tokens = (uint32_t)step;
	cfg->wafer.lose_data_every = (uint32_t)lose;
	r = cfg_get_choice(c, g, "resume", resume, KVSS_RESUME_ESTIMATE, false);
	if (r < 0)
		return -1;
	cfg->wafer.resume = (uint8_t)r;
	r = cfg_get_choice(c, g, "backpressure", backpressure, KVSS_BP_WAIT, false);
	if (r < 0)
		return -1;
	cfg->wafer.backpressure = (uint8_t)r;
	return load_wafer_arrivals(c, g, cfg);
}

/*
 * With the shared level (shared.conf given): every model is named, the
 * shared column is the driver's, and a slice fits one object.
 */
static int
check_shared(struct ctx *c, const config_setting_t *root, const struct kvss_config *cfg)
{
	const config_setting_t *sg = cfg_member(c, root, "shared");
	uint16_t i, k;

	for (i = 0; (cfg->role & KVSS_ROLE_DRIVER) && i < cfg->driver.pc.num_models; i++)
		if (cfg->driver.models[i].name[0] == '\0') {
			const config_setting_t *ms = cfg_member(c, cfg_member(c, root, "driver"),
								"models");

			return cfg_fail(c, config_setting_get_elem(ms, i), "name",
					"missing: with the shared level every model is named (what "
					"its KV bytes are of, e.g. \"llama-3.1-70b\"), so that two "
					"models of one geometry never read each other's objects");
		}
	if ((cfg->role & KVSS_ROLE_DRIVER) && cfg->shared.column != cfg->driver.pc.column)
		return cfg_fail(c, sg, "column", "%u, but driver.column is %u: the shards' slices are "
				"the driver's columns", cfg->shared.column, cfg->driver.pc.column);
	/* A slice is one object of at most SHARED_PAYLOAD_MAX bytes (a sealed
	 * one's 16-byte tag included). */
	for (i = 0; (cfg->role & KVSS_ROLE_SHARD) && i < cfg->num_local; i++)
		for (k = 0; k < cfg->local[i].store.num_caches; k++) {
			uint64_t b = (uint64_t)cfg->shared.column *
				     cfg->local[i].store.cache[k].bytes_per_token +
				     (cfg->shared.key_file[0] != '\0' ? 16u : 0u);

			if (b > SHARED_PAYLOAD_MAX)
				return cfg_fail(c, sg, "column", "%u tokens x shard.caches.[%u]."
						"bytes_per_token (%u) is %llu bytes a slice, more "
						"than %u: lower one of them", cfg->shared.column, k,
						cfg->local[i].store.cache[k].bytes_per_token,
						(unsigned long long)b, SHARED_PAYLOAD_MAX);
		}
	return 0;
}

/*
 * The sections in the order their errors are reported: the first error in
 * that order is the one the caller sees, and every key read is marked as
 * known before cfg_check_keys looks for unknown ones.
 */
static int
load_sections(struct ctx *c, const config_setting_t *root, enum kvss_role as,
	      struct kvss_config *cfg)
{
	if (load_top(c, root, as, cfg) != 0 || load_udp(c, root, cfg) != 0 ||
	    load_lcores(c, root, cfg) != 0)
		return -1;
	if ((cfg->role & KVSS_ROLE_SHARD) && load_shards(c, root, cfg) != 0)
		return -1;
	if ((cfg->role & KVSS_ROLE_DRIVER) &&
	    load_driver(c, cfg_member(c, root, "driver"), cfg) != 0)
		return -1;
	if (cfg->role == KVSS_ROLE_ALL && check_all(c, root, cfg) != 0)
		return -1;
	if (load_wafer(c, root, cfg) != 0 || kvss_cfg_load_shared(c, root, cfg) != 0)
		return -1;
	if (cfg->shared.conf[0] != '\0' && check_shared(c, root, cfg) != 0)
		return -1;
	return cfg_check_keys(c, root);
}

int
kvss_config_load_as(const char *path, enum kvss_role as, struct kvss_config *cfg, char *err,
		    size_t errlen)
{
	struct ctx c = {.path = path, .err = err, .errlen = errlen};
	config_t lc;
	int rc = -1;

	memset(cfg, 0, sizeof(*cfg));
	snprintf(cfg->path, sizeof(cfg->path), "%s", path);
	config_init(&lc);
	if (kvss_cfg_read(&lc, path, err, errlen) == 0 &&
	    load_sections(&c, config_root_setting(&lc), as, cfg) == 0)
		rc = 0;
	config_destroy(&lc);
	return rc;
}
