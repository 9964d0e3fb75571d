/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * kvss-shared's organization keys (lib/seal/orgkeys.h; docs/SECURITY.md):
 * `keys --org-keys FILE [--init]` makes a store or says what it holds (no
 * cluster needed), and `reset --org-keys FILE` retires keys before the
 * generation is bumped (kvss_shared.c): one organization's, or with no
 * --org every key of the store. Only key ids are printed, never a key.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "kvss_shared.h"
#include "orgkeys.h"

static void
show(const char *path, const struct seal_orgs *o)
{
	uint32_t i, n = seal_orgs_count(o);

	printf("%s: default key %08x (every organization not named), %u named\n", path,
	       seal_orgs_default(o)->id, n);
	for (i = 0; i < n; i++) {
		const struct seal_key *k;
		uint64_t org;

		seal_orgs_at(o, i, &org, &k);
		printf("  organization 0x%016" PRIx64 ": key %08x\n", org, k->id);
	}
}

int
ks_keys(const char *path, bool init)
{
	struct seal_orgs *o;
	struct stat st;
	char err[600];

	if (init) {
		int there = lstat(path, &st) == 0 ? 0 : errno;

		if (there != ENOENT) {
			fprintf(stderr, "kvss-shared keys --init: %s: %s: a store is never made over "
					"another (its keys would be lost)\n", path,
				there == 0 ? "exists" : strerror(there));
			return KS_USAGE;
		}
		o = seal_orgs_new();
		if (o == NULL) {
			fprintf(stderr, "kvss-shared keys --init: no memory or no randomness\n");
			return KS_FAILED;
		}
		if (seal_orgs_write(path, o, err, sizeof(err)) != 0) {
			fprintf(stderr, "kvss-shared keys --init: %s\n", err);
			seal_orgs_free(o);
			return KS_FAILED;
		}
		printf("%s: a new store (mode 0600): give it to every replica as "
		       "shared.org_key_file\n", path);
	} else if (seal_orgs_load(path, &o, err, sizeof(err)) != 0) {
		fprintf(stderr, "kvss-shared keys: %s\n", err);
		return KS_USAGE;
	}
	show(path, o);
	seal_orgs_free(o);
	return KS_OK;
}

int
ks_keys_retire(const char *path, bool have_org, uint64_t org, const char *org_arg)
{
	struct seal_orgs *o;
	char err[600], safe[KS_SAFE_LEN];
	uint32_t before;

	if (seal_orgs_load(path, &o, err, sizeof(err)) != 0) {
		fprintf(stderr, "kvss-shared reset: --org-keys: %s (not reset)\n", err);
		return KS_USAGE;
	}
	before = have_org ? seal_orgs_key(o, org)->id : seal_orgs_default(o)->id;
	if (seal_orgs_retire(o, !have_org, org) != 0) {
		fprintf(stderr, "kvss-shared reset: --org-keys %s: no new key (no memory, no "
				"randomness, or %u organizations named already; not reset)\n",
			path, SEAL_ORGS_MAX);
		seal_orgs_free(o);
		return KS_FAILED;
	}
	if (seal_orgs_write(path, o, err, sizeof(err)) != 0) {
		fprintf(stderr, "kvss-shared reset: --org-keys: %s (not reset)\n", err);
		seal_orgs_free(o);
		return KS_FAILED;
	}
	if (have_org)
		printf("%s: organization %s's key retired (%08x -> %08x)\n", path,
		       ks_safe(org_arg, safe, sizeof(safe)), before, seal_orgs_key(o, org)->id);
	else
		printf("%s: every key retired (default %08x -> %08x, %u organizations named)\n",
		       path, before, seal_orgs_default(o)->id, seal_orgs_count(o));
	printf("every slice sealed under a retired key is unreadable, wherever a copy of it is; "
	       "copy %s to every replica's shared.org_key_file (each reads it again within a "
	       "generation interval)\n", path);
	seal_orgs_free(o);
	return KS_OK;
}
