/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * What the rest of kvss (main.c, telemetry.c) may call of the shard's
 * levels below DRAM: open, stop and close them, find one, read its
 * counters. Everything else of the shard role is private to shard/
 * (shard.h, level.h), which include this too.
 */
#ifndef KVSS_SHARD_API_H
#define KVSS_SHARD_API_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct kvss_shard_inst;
struct shard_level;

/* The levels of a shard, by what the protocol's messages name (section 9: L2_*, section 10: SH_*). */
enum shard_level_kind { SHARD_LEVEL_DISK, SHARD_LEVEL_SHARED, SHARD_LEVELS };

/*
 * One counter of a level: its telemetry key is the level's prefix, group
 * and name ("shared_bad_checksum"). The backend that declares it says
 * whether it counts columns its check refused (a checksum, an owner, a
 * length that did not match), so that callers sum refusals without
 * knowing any backend's names (shard_level_refused).
 */
struct level_counter {
	const char *group; /* "" or a family ("bad_") */
	const char *name;
	uint64_t value;
	bool refusal; /* a column refused by the level's check */
};

#define LEVEL_COUNTERS_MAX 48

/**
 * Open shard @p s's levels (shard.l2, shared) and start their workers
 * (nothing when neither is configured). -1: the second tier's failure
 * (its file), -2: the configuration's (the shared level's, or a key
 * file's); @p err says why, naming its key.
 */
int shard_levels_open(struct kvss_shard_inst *s, char *err, size_t errlen);
/** Stop their workers (what they began, they finish); then their counters hold still. */
void shard_levels_stop(struct kvss_shard_inst *s);
void shard_levels_close(struct kvss_shard_inst *s);
/** Shard @p s's level @p k; NULL: not configured. */
struct shard_level *shard_level_of(const struct kvss_shard_inst *s, enum shard_level_kind k);
/**
 * Level @p k's counters summed over the process's shards, into @p c (at
 * most LEVEL_COUNTERS_MAX; zeros where no shard has it), their keys' prefix
 * in @p prefix; how many.
 */
unsigned int shard_level_counters(enum shard_level_kind k, struct level_counter *c,
				  const char **prefix);
/** The columns level @p lv's check refused (its counters marked refusal), since it opened. */
uint64_t shard_level_refused(const struct shard_level *lv);
/** The second tier: does it use O_DIRECT (false: the file system refused it)? */
bool level_disk_direct(const struct shard_level *lv);
/** Cache @p cache's second tier in tokens (whole columns), for STATUS (version 2); 0 without one. */
void level_disk_tokens(const struct shard_level *lv, uint16_t cache, uint64_t *capacity,
		       uint64_t *stored);
/**
 * What opening the second tier found on its disk: the columns it kept
 * from before, and those it dropped (their checksum did not match).
 */
void level_disk_found(const struct shard_level *lv, uint64_t *kept, uint64_t *dropped);

#endif /* KVSS_SHARD_API_H */
