/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * A fleet of replicas and a level they share (the SharedKVSS), for
 * kvss-trace --shared, --restart and --add-replica-at: what the shared level
 * is worth before it is built, over the trace's columns.
 *
 * The model. Each request goes to a replica by route.h (the same router and
 * loads as kvss-trace's library replay over replicas). The request's
 * cacheable tokens (its prompt, then its answer but the last token, up to
 * cache_length_allowed and before the first multimodal token: what the
 * driver library caches) are cut into whole columns of C tokens, each named
 * by the chained hash of its tokens seeded with the organization, as the
 * library names them. A replica has DRAM and optionally a local disk, each
 * an LRU of whole columns (capacities in tokens, counted as whole columns);
 * the fleet has one shared level, an LRU of whole columns too, with an
 * optional expiry by first use.
 *
 * A request hits its leading columns held in its replica's DRAM or disk or
 * in the shared level (the first held nowhere ends the hit), counted as the
 * driver refills: whole columns, never the prompt's last token (unless
 * minus_one is false). Each hit column is credited to the first level that
 * holds it: DRAM, disk, shared. Afterwards every column of the request is
 * most recent in the replica's DRAM, its first column last (so a column is
 * never less recent than its descendants, and LRU frees leaves first, as the
 * library's LRU does): one from disk is moved up, one from the shared level
 * copied (the shared level keeps it), the others computed. What DRAM frees
 * goes down to disk, what disk frees (DRAM's, without a disk) is dropped,
 * or goes down to the shared level under FLEET_ADMIT_EVICTED. Under
 * FLEET_ADMIT_ALL every column computed goes down to it at once. A column already
 * in the shared level is not written again (exclusive create, counted as
 * exists, and not made more recent by it): the shared level frees its least
 * recently read or written column when full. With shared_touch, a column a
 * replica hits in its own DRAM or disk is made most recent in the shared
 * level too, if it is there (the driver tells the level which of its
 * columns are in use): else what every replica keeps hitting locally is
 * never read from the shared level and ages out of it, and a replica that
 * restarts finds there least what it needs first.
 *
 * Expiry: a column past its first use + ttl is never served from the shared
 * level; a lookup that meets it deletes it, and a sweep every sweep_ms of
 * trace time deletes every expired one (the sweeper of the real level).
 * Local tiers have no expiry here.
 *
 * Events: at request restart_at (its index), replica restart_replica is
 * emptied (DRAM and disk), as a replica that restarts or is replaced; at
 * add_at, a replica is added (route_add_replica()), starting empty.
 */
#ifndef KVSS_FLEET_H
#define KVSS_FLEET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ilist.h"
#include "route.h"
#include "workload.h"

/* ---- An LRU set of columns: the bookkeeping of every level --------------------- */

#define FLEET_NONE UINT32_MAX
#define FLEET_UNLIMITED UINT64_MAX

struct colset_ent {
	uint64_t key, first_ms;
	struct ilist_link lru; /* on the set's recency list; a free entry's next: the free list */
};

struct colset {
	uint64_t max;	 /* columns held at most (FLEET_UNLIMITED: no bound) */
	uint32_t n;	 /* columns held */
	uint32_t nent;	 /* entries allocated */
	uint32_t free;	 /* free entries' list (through lru.next) */
	uint32_t used;	 /* entries ever used (the rest are past it) */
	struct colset_ent *e;
	uint32_t *tab;	 /* open addressing by key: entry + 1, 0 empty */
	uint32_t mask;
	struct ilist lru; /* the entries held: head the most recent */
};

/** An empty set of at most @p max columns (0: none; FLEET_UNLIMITED). @return 0, -1 no memory. */
int colset_init(struct colset *s, uint64_t max);
void colset_fini(struct colset *s);
/** Drop every column. */
void colset_clear(struct colset *s);
/** The entry holding @p key, or FLEET_NONE. */
uint32_t colset_find(const struct colset *s, uint64_t key);
/** Entry @p i most recent. */
void colset_touch(struct colset *s, uint32_t i);
/** Drop entry @p i. */
void colset_remove(struct colset *s, uint32_t i);
/**
 * Put @p key (not held) most recent. When the set is full its least recent
 * column goes first: returned in @p victim (1), else 0; a set of 0 columns
 * returns @p key itself as the victim. -1: no memory (nothing changed).
 */
int colset_insert(struct colset *s, uint64_t key, uint64_t first_ms, struct colset_ent *victim);

/* ---- The fleet ----------------------------------------------------------------- */

/** What goes down to the shared level. */
enum fleet_admit {
	FLEET_ADMIT_EVICTED, /**< whole columns freed by a replica's last local tier */
	FLEET_ADMIT_ALL,     /**< every whole column once computed */
};

/** The rules' names in enum order ("evicted", "all"), NULL-terminated. */
extern const char *const fleet_admit_names[];

/** Requests a window reports on, before and after an event. */
#define FLEET_WINDOW 500
/** The after-window in this many parts, to see when a replica is back. */
#define FLEET_PARTS 5

struct fleet_params {
	uint32_t replicas;	  /**< at the start (1 to ROUTE_MAX_REPLICAS) */
	enum route_policy route;
	uint32_t column;	  /**< C */
	bool minus_one;		  /**< never the prompt's last token */
	uint64_t dram_tokens;	  /**< per replica; FLEET_UNLIMITED */
	uint64_t disk_tokens;	  /**< per replica; 0: no disk */
	uint64_t shared_tokens;	  /**< 0: no shared level; FLEET_UNLIMITED */
	enum fleet_admit admit;
	bool shared_touch;	  /**< a local hit makes the shared copy most recent */
	uint64_t shared_ttl_ms;	  /**< expiry by first use (0: none) */
	uint64_t sweep_ms;	  /**< the sweeper's period (0: 60 s) */
	int32_t restart_replica;  /**< -1: none */
	size_t restart_at;
	size_t add_at;		  /**< 0: no replica added */
	/**
	 * The same windows with nothing done (what the fleet would have had):
	 * the replica is not emptied, no replica is added.
	 */
	bool restart_watch_only, add_watch_only;
	const uint64_t *iso;	  /**< per request, its organization (NULL: the trace's) */
};

/** A window's requests, prompt tokens and hit tokens. */
struct fleet_window {
	uint64_t requests, input, hit;
};

struct fleet_result {
	uint64_t requests, input;
	uint64_t hit_dram, hit_disk, hit_shared; /**< tokens, by the level they came from */
	/** Shared level, in tokens: written, not written (already there), freed for room, expired. */
	uint64_t shared_written, shared_exists, shared_evicted, shared_expired;
	uint64_t shared_peak;			/**< most tokens it held */
	uint64_t shared_touched;		/**< tokens of local hits made most recent there */
	uint64_t disk_written;			/**< tokens that went down to a local disk */
	/* --restart: the replica's own last FLEET_WINDOW requests before, and first after
	 * (the latter also in FLEET_PARTS parts); its first request's hits after. */
	struct fleet_window rs_before, rs_after, rs_part[FLEET_PARTS];
	uint64_t rs_first_local, rs_first_shared, rs_first_input;
	bool rs_done;
	/* --add-replica-at: the fleet's last FLEET_WINDOW requests before and first
	 * after; the new replica's first FLEET_WINDOW; organizations moved. */
	struct fleet_window add_before, add_after, add_new;
	int add_moved;
	bool add_done;
};

/**
 * Run the model over the first @p n requests of @p w.
 * @return 0, -1 no memory, -2 bad parameters.
 */
int fleet_run(const struct workload *w, size_t n, const struct fleet_params *p,
	      struct fleet_result *r);

/** A window's hit ratio (0 when it is empty). */
static inline double
fleet_ratio(const struct fleet_window *w)
{
	return w->input ? (double)w->hit / (double)w->input : 0.0;
}

#endif
