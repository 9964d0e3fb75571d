/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * lib/config's insides shared by its files: config.c (the settings of a
 * kvss configuration), config_read.c (reading a file: its pre-checks, the
 * error messages, unknown keys) and cluster.c (kvss-plan's cluster files).
 * Nothing outside lib/config includes this.
 */
#ifndef KVSS_CONFIG_PRIV_H
#define KVSS_CONFIG_PRIV_H

#include <libconfig.h>
#include <stdbool.h>

#include "config.h"

/* Every (group, key) the loader asked for: what is not among them is unknown. */
#define SEEN_MAX 2048

struct ctx {
	const char *path;
	char *err;
	size_t errlen;
	struct {
		const config_setting_t *g;
		const char *name;
	} seen[SEEN_MAX];
	unsigned int nseen;
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

#endif
