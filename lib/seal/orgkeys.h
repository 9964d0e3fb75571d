/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Organization keys (docs/SECURITY.md, "A reset that retires a key"): a
 * store of one random 32-byte key per organization named in it and one for
 * every other, each mixed with the master key (seal_key_with_org()) into
 * the key that seals that organization's slices. Replacing an
 * organization's key retires every slice sealed under the old one: the
 * master key and the store that remain derive nothing that opens them, in
 * the pool, on a disk or in a backup, so nothing has to be found and
 * deleted first.
 *
 * The file is text, checked as the master key file is (seal_private_open())
 * and written only by kvss-shared (seal_orgs_write()):
 *
 *     # comment lines and empty lines are skipped
 *     default 64-HEX-DIGITS
 *     org 0xISOLATION-ID 64-HEX-DIGITS
 *     end N
 *
 * exactly one `default` line; at most one line per organization (its
 * isolation id as 0x and 1 to 16 hexadecimal digits, as kvss-shared takes
 * it); last, `end` and the number of organization lines (a copy cut short
 * lacks it); fields separated by one space; lines end with a newline (the
 * last may not); no key of zeros. Anything else is refused, naming the
 * line.
 */
#ifndef KVSS_ORGKEYS_H
#define KVSS_ORGKEYS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>

#include "seal.h"

/* The most organizations a store names, and its largest file. */
#define SEAL_ORGS_MAX 65536u
#define SEAL_ORGS_FILE_MAX (SEAL_ORGS_MAX * 96u + 4096u)

/**
 * Parse a store's @p len bytes at @p text (@p name says where they came
 * from in errors: "NAME: line N: ..."). 0 and a new store in @p out, or -1
 * with @p err saying why in one line.
 */
int seal_orgs_parse(const char *text, size_t len, const char *name, struct seal_orgs **out,
		    char *err, size_t errlen);

/**
 * Read store file @p path, checked as a master key file (seal_private_open)
 * and parsed (seal_orgs_parse). 0 or -1 with @p err.
 */
int seal_orgs_load(const char *path, struct seal_orgs **out, char *err, size_t errlen);

/** A store with a new random default key and no organization named. NULL: no memory or randomness. */
struct seal_orgs *seal_orgs_new(void);

/** The key of organization @p org: its own where the store names it, else the default. */
const struct seal_key *seal_orgs_key(const struct seal_orgs *o, uint64_t org);

/** The organizations named; the i-th's isolation id and key (ascending ids). */
uint32_t seal_orgs_count(const struct seal_orgs *o);
void seal_orgs_at(const struct seal_orgs *o, uint32_t i, uint64_t *org, const struct seal_key **k);

/** The default key. */
const struct seal_key *seal_orgs_default(const struct seal_orgs *o);

/**
 * Give organization @p org a key of its own, so that a reset retires its
 * key alone (kvss-shared keys --org): 0; 1 when it has one already
 * (nothing changed); -1 (no memory, no randomness, the store full).
 * Slices it sealed under the default key before are then refused.
 */
int seal_orgs_name(struct seal_orgs *o, uint64_t org);

/**
 * Retire keys: with @p all, a new default key and a new key for every
 * organization named; else a new key for organization @p org. An
 * organization not named has its slices under the default key: that key
 * is retired too (@p default_too says so: every organization not named
 * loses its slices) and @p org is named from now on. 0, or -1 (no memory,
 * no randomness, or the store is full: nothing changed).
 */
int seal_orgs_retire(struct seal_orgs *o, bool all, uint64_t org, bool *default_too);

/**
 * Write @p o to @p path: a new file beside it (mode 0600 whatever the
 * umask), synced; with @p create, linked as @p path (never over a file),
 * else renamed over the store, which must be the very file @p o was read
 * from (another writer came between: refused) and have no other name; the
 * directory synced; then the file it replaced, held open, is overwritten
 * with zeros and synced, so its blocks keep no retired key on a file
 * system that writes in place. 0; -1 with @p err when nothing was
 * replaced; 1 with @p err when the new store is in place but a later step
 * failed (the directory's sync, the overwrite).
 */
int seal_orgs_write(const char *path, const struct seal_orgs *o, bool create, char *err,
		    size_t errlen);

/** Are @p a and @p b the same file as it was (device, inode, size, modification and change times)? */
bool seal_file_same(const struct stat *a, const struct stat *b);

/** Is @p path's file another than the one @p o was loaded from (its inode, size, times)? */
bool seal_orgs_changed(const char *path, const struct seal_orgs *o);

/**
 * The key a ring seals with for organization @p org: its current master
 * key, mixed with @p org's key where the ring holds a store (@p r->orgs).
 * 0 or -1 (libcrypto).
 */
int seal_ring_key(const struct seal_ring *r, uint64_t org, struct seal_key *out);

/**
 * The key of @p r whose id is @p id, for what organization @p org sealed
 * (the current master key, then the one before it, each mixed with @p
 * org's key where the ring holds a store: the one before is mixed only
 * when the current one is not it). 0 and the key in @p out; 1 when the
 * ring holds none of that id (a retired key's, or a forgery's); -1 when
 * libcrypto failed here.
 */
int seal_ring_find(const struct seal_ring *r, uint64_t org, uint32_t id, struct seal_key *out);

/** Free @p o, its keys wiped (NULL: nothing). */
void seal_orgs_free(struct seal_orgs *o);

#endif
