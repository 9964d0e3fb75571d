/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * kvss-shared's organization keys (lib/seal/orgkeys.h; docs/SECURITY.md):
 * `keys --org-keys FILE [--init] [--org ORG]` makes a store, gives an
 * organization a key of its own, or says what a store holds (no cluster
 * needed), and `reset --org-keys FILE` retires keys before the generation
 * is bumped (kvss_shared.c): one organization's, or with no --org every
 * key of the store. Only key ids are printed, never a key. Each change
 * holds a lock on the store's directory from its read to its write, so
 * that two resets at once never bring a retired key back.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <libgen.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

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

/*
 * Exit status: 2 for a command line that is wrong; 1 for whatever the
 * store refuses (its file, its content, or the change asked of it) or
 * fails to do, as the usage says.
 */

/* The store's directory, locked (flock) for one change: its descriptor, or -1 (said). */
static int
lock_dir(const char *path, const char *what)
{
	char dir[4096];
	int fd;

	if (snprintf(dir, sizeof(dir), "%s", path) >= (int)sizeof(dir)) {
		fprintf(stderr, "kvss-shared %s: %s: name too long\n", what, path);
		return -1;
	}
	fd = open(dirname(dir), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0 || flock(fd, LOCK_EX) != 0) {
		fprintf(stderr, "kvss-shared %s: %s: cannot lock its directory: %s\n", what, path,
			strerror(errno));
		if (fd >= 0)
			close(fd);
		return -1;
	}
	return fd;
}

/*
 * seal_orgs_write()'s outcome said: KS_OK (written; a later step that
 * failed is a warning, the store being in place), or KS_FAILED.
 */
static int
written(const char *what, const char *path, const struct seal_orgs *o, bool create)
{
	char err[600];
	int rc = seal_orgs_write(path, o, create, err, sizeof(err));

	if (rc < 0) {
		fprintf(stderr, "kvss-shared %s: %s (nothing changed)\n", what, err);
		return KS_FAILED;
	}
	if (rc > 0)
		fprintf(stderr, "kvss-shared %s: warning: %s\n", what, err);
	return KS_OK;
}

int
ks_keys(const char *path, bool init, bool have_org, uint64_t org, const char *org_arg)
{
	struct seal_orgs *o = NULL;
	char err[600], safe[KS_SAFE_LEN];
	int lk, rc = KS_OK;

	if (init) {
		struct stat st;
		int there = lstat(path, &st) == 0 ? 0 : errno;

		/* Said plainly here; the link that makes it refuses a file made since. */
		if (there != ENOENT) {
			fprintf(stderr, "kvss-shared keys --init: %s: %s: a store is made only where "
					"nothing is (never over a file, whose keys would be lost)\n", path,
				there == 0 ? "something is there already" : strerror(there));
			return KS_FAILED;
		}
		o = seal_orgs_new();
		if (o == NULL) {
			fprintf(stderr, "kvss-shared keys --init: no memory or no randomness\n");
			return KS_FAILED;
		}
		if (have_org && seal_orgs_name(o, org) != 0)
			rc = KS_FAILED;
		else
			rc = written("keys --init", path, o, true);
		if (rc == KS_OK)
			printf("%s: a new store (mode 0600): give every replica a copy as "
			       "shared.org_key_file\n", path);
	} else if (have_org) {
		lk = lock_dir(path, "keys");
		if (lk < 0)
			return KS_FAILED;
		if (seal_orgs_load(path, &o, err, sizeof(err)) != 0) {
			fprintf(stderr, "kvss-shared keys: %s\n", err);
			close(lk);
			return KS_FAILED;
		}
		rc = seal_orgs_name(o, org);
		if (rc == 1) {
			fprintf(stderr, "kvss-shared keys: %s: organization %s has a key of its own "
					"already (reset --org retires it)\n", path,
				ks_safe(org_arg, safe, sizeof(safe)));
			rc = KS_FAILED;
		} else if (rc != 0) {
			fprintf(stderr, "kvss-shared keys: %s: no new key (no memory, no randomness, or "
					"%u organizations named already)\n", path, SEAL_ORGS_MAX);
			rc = KS_FAILED;
		} else if ((rc = written("keys", path, o, false)) == KS_OK) {
			printf("%s: organization %s has a key of its own (%08x): a reset retires it "
			       "alone. What it sealed under the default key before is not opened by "
			       "replicas with this store, but whoever holds the master key and the "
			       "default key still can, until every key is retired (reset with no "
			       "--org); copy the store to every replica\n", path,
			       ks_safe(org_arg, safe, sizeof(safe)), seal_orgs_key(o, org)->id);
		}
		close(lk);
	} else if (seal_orgs_load(path, &o, err, sizeof(err)) != 0) {
		fprintf(stderr, "kvss-shared keys: %s\n", err);
		return KS_FAILED;
	}
	if (rc == KS_OK)
		show(path, o);
	seal_orgs_free(o);
	return rc;
}

int
ks_keys_retire(const char *path, bool have_org, uint64_t org, const char *org_arg)
{
	struct seal_orgs *o;
	char err[600], safe[KS_SAFE_LEN];
	uint32_t before, dflt;
	bool default_too; /* never, for a named organization (refused above otherwise) */
	int lk, rc;

	lk = lock_dir(path, "reset");
	if (lk < 0)
		return KS_FAILED;
	if (seal_orgs_load(path, &o, err, sizeof(err)) != 0) {
		fprintf(stderr, "kvss-shared reset: --org-keys: %s (not reset)\n", err);
		close(lk);
		return KS_FAILED;
	}
	dflt = seal_orgs_default(o)->id;
	/* One organization's slices under the default key are every other
	 * unnamed organization's key too: retiring it for one would leave the
	 * others' records pointing at slices nobody opens, under a generation
	 * nobody bumped. Not done for one: said how. */
	if (have_org && seal_orgs_key(o, org) == seal_orgs_default(o)) {
		fprintf(stderr, "kvss-shared reset: organization %s has no key of its own in %s: its "
				"slices are under the default key (%08x), which every organization not "
				"named shares. Retire every key with 'reset --org-keys %s' (no --org; the "
				"global generation is bumped), and name an organization with 'keys --org' "
				"before it writes to reset it alone (not reset)\n",
			ks_safe(org_arg, safe, sizeof(safe)), path, dflt, path);
		seal_orgs_free(o);
		close(lk);
		return KS_FAILED;
	}
	before = have_org ? seal_orgs_key(o, org)->id : dflt;
	if (seal_orgs_retire(o, !have_org, org, &default_too) != 0) {
		fprintf(stderr, "kvss-shared reset: --org-keys %s: no new key (no memory, no "
				"randomness, or %u organizations named already; not reset)\n",
			path, SEAL_ORGS_MAX);
		seal_orgs_free(o);
		close(lk);
		return KS_FAILED;
	}
	rc = written("reset", path, o, false);
	close(lk);
	if (rc != KS_OK) {
		seal_orgs_free(o);
		return rc;
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
