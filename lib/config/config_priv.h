/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * lib/config's insides shared by its files: config.c (the settings of a
 * kvss configuration), config_read.c (reading a file: its pre-checks, the
 * error messages, unknown keys), config_get.c (typed settings) and cluster.c
 * (kvss-plan's cluster files).
 * Nothing outside lib/config includes this.
 */
#ifndef KVSS_CONFIG_PRIV_H
#define KVSS_CONFIG_PRIV_H

#include <libconfig.h>
#include <stdbool.h>

#include "config.h"

/*
 * Every (group, key) the loader asked for: what is not among them is unknown.
 * Enough for kvss-plan's largest cluster (256 shards, 16 jobs granting each).
 */
#define SEEN_MAX 16384

struct ctx {
	const char *path;
	char *err;
	size_t errlen;
	struct {
		const config_setting_t *g;
		const char *name;
	} seen[SEEN_MAX];
	unsigned int nseen;
	/* A file without role sections (a cluster): top-level shard, driver are unknown too. */
	bool no_roles;
};

/* config_setting_get_member, remembering that @p name is a key of @p g. */
config_setting_t *cfg_member(struct ctx *c, const config_setting_t *g, const char *name);

/* "FILE:LINE: KEY: why" into the context's error: -1. */
int cfg_fail(struct ctx *c, const config_setting_t *s, const char *child, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

/*
 * Every key in the groups the loader read is one it asked for (else an
 * error with the nearest known key); a section given as a value is refused.
 */
int cfg_check_keys(struct ctx *c, const config_setting_t *g);

/* A required key missing: "missing WHAT", or the typo of it that is there. -1. */
int cfg_missing(struct ctx *c, const config_setting_t *g, const char *name, const char *what);

/* ---- config_get.c: typed settings; each fails with cfg_fail() ---- */

/* A setting as a whole number (1e6 too): NULL, or why not. */
const char *cfg_whole(const config_setting_t *m, long long *v);
/* An integer member within [lo, hi]; @p def when missing unless @p required. */
int cfg_get_int(struct ctx *c, const config_setting_t *g, const char *name, long long lo,
		long long hi, long long def, bool required, long long *out);
/* A bandwidth member in Gb/s, in (0, 100000] (a float, or a whole number); @p def when missing. */
int cfg_get_gbps(struct ctx *c, const config_setting_t *g, const char *name, long long def,
		 double *out);
/* A number (integer or float) in (lo, hi], or [lo, hi] with @p lo_ok; @p def when missing. */
int cfg_get_real(struct ctx *c, const config_setting_t *g, const char *name, double lo, bool lo_ok,
		 double hi, double def, double *out);
int cfg_get_bool(struct ctx *c, const config_setting_t *g, const char *name, bool def, bool *out);
/* The index of the member's string among @p choices (NULL-ended); @p def when missing. */
int cfg_get_choice(struct ctx *c, const config_setting_t *g, const char *name,
		   const char *const *choices, int def, bool required);
int cfg_get_str(struct ctx *c, const config_setting_t *g, const char *name, char *out, size_t n);
int cfg_get_endpoint(struct ctx *c, const config_setting_t *g, const char *name, bool required,
		     struct kvss_endpoint *ep);
int cfg_get_u64_array(struct ctx *c, const config_setting_t *g, const char *name, unsigned int n,
		      uint64_t lo, uint64_t hi, uint64_t *out);
int cfg_get_lcores(struct ctx *c, const config_setting_t *g, const char *name, unsigned int def,
		   bool may_be_empty, unsigned int *out, uint16_t *n);

/* ---- config_shared.c: the top-level shared group (the shared level) ---- */
int kvss_cfg_load_shared(struct ctx *c, const config_setting_t *root, struct kvss_config *cfg);

#define GET_INT(c, g, name, lo, hi, def, req, dst)                                                 \
	do {                                                                                       \
		long long v_;                                                                      \
		if (cfg_get_int(c, g, name, lo, hi, def, req, &v_) != 0)                               \
			return -1;                                                                 \
		(dst) = (__typeof__(dst))v_;                                                       \
	} while (0)

#endif
