/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * lib/prefixcache's insides, shared by its files (nothing else includes
 * this): the SwDriver's cache logic, prefixcache.h says what it does.
 *
 *   prefixcache.c          create, free, the shards' events, expiry, inspection
 *   pc_map.c               the map: entries, prompts, organizations, column ends
 *   pc_lookup.c            the request path: lookups, pins, refills
 *   pc_record.c            tokens evicted, columns recorded, sequences ended
 *   pc_delete.c            batches flushed, DELETEs sent, columns deleted
 *   pc_policy*.c           deletion policies behind struct pc_policy_ops
 *
 * Data. Entries (one per cached column of one cache group) live in a pool
 * and are found through one chained hash table keyed by (group,
 * organization, chained hash). Each entry knows its parent and children
 * (deleting a column takes what hangs on it), the prompt that holds its
 * tokens (and that prompt's other entries, in order), and its place in the
 * policy's lists of leaves (only leaves can be freed: a shard shrinks a
 * prompt from the right).
 *
 * Prompts. Each sequence evicts into a new prompt per cache group, starting
 * at its hit length; the driver tracks each prompt's range [offset, end) as
 * the shards hold it, which is what capacity counts.
 */
#ifndef PC_PRIV_H
#define PC_PRIV_H

#include "ilist.h"
#include "prefixcache.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define NIL UINT32_MAX
#define MAX_GROUPS 4 /* per model */
#define NBUCKETS 8   /* policy lists per group */
#define FU_CLASSES 16 /* followup: classes by bit length of the answer */

/*
 * Uses are kept in ticks of 100 ms (32 bits: 13 years): an entry may expire
 * up to one tick early, never late.
 */
#define TICK_NS 100000000ull

struct pc_entry {
	uint64_t hash;
	uint64_t evict_count;
	uint32_t first_used, last_used; /* ticks */
	uint32_t start, length; /* logical tokens [start, length) */
	uint32_t org;
	uint32_t prompt; /* prompt record holding the tokens */
	uint32_t parent, first_child, next_sib, prev_sib;
	struct ilist_link lru;	     /* policy list (leaves only) */
	uint32_t p_prev, p_next;     /* the prompt's entries, by start */
	uint32_t hnext;		     /* hash chain; free list */
	uint32_t gen;	/* bumped on reuse: refills check it before unpinning */
	uint16_t hits;	/* saturating */
	uint16_t pins;	/* refills in flight, and a live sequence continuing it */
	uint8_t gid;	/* global group id: model * MAX_GROUPS + group */
	uint8_t bucket; /* policy list, or NO_BUCKET when not a leaf */
	uint8_t prio : 1; /* under a request's priority hint */
	uint8_t prot : 1; /* SLRU: protected (else on probation) */
	uint8_t cold : 1; /* followup: its sequence's class is seldom followed up */
	uint8_t brief : 1; /* L2 admit short: its sequence's answer was short */
};
#define NO_BUCKET 0xff

struct pc_prompt {
	uint64_t id;
	uint32_t offset, end; /* range the shards hold */
	uint32_t hi;	      /* the largest end it had */
	uint32_t first, last; /* entries, by start */
	uint64_t last_batch;  /* batch of its latest eviction */
	struct prefixcache_seq *seq; /* live: evicting into it */
	uint32_t hnext;		     /* id hash chain; free list */
	uint32_t tmp;		     /* truncation point during a deletion, or NIL */
	uint32_t org;		     /* its organization (its tokens count in its DRAM share) */
	uint8_t gid;
};

struct pc_group {
	enum prefixcache_rule rule;
	uint32_t window, sinks;
	uint16_t ncaches;
	uint16_t cache[PREFIXCACHE_MAX_CACHES]; /* cache ids */
	uint16_t cache_pos[PREFIXCACHE_MAX_CACHES]; /* index in the model's EVICT entries */
	uint64_t capacity, stored;
	uint64_t protected_tokens; /* SLRU: tokens of protected columns */
	struct ilist lru[NBUCKETS]; /* head: most recent */
	/* The second tier (pc_l2.c): columns, and their LRU (head: most recent). */
	uint64_t l2_capacity, l2_stored; /* tokens */
	struct ilist l2_lru; /* head: most recent */
};

/* A column in the second tier: what the driver knows of it (pc_l2.c). */
struct pc_l2e {
	uint64_t hash, parent;
	uint32_t org;
	uint32_t start, length;
	uint32_t first_used, last_used; /* ticks */
	uint32_t hnext;			/* hash chain; free list */
	struct ilist_link lru;		/* on its group's l2_lru */
	uint8_t gid;
	uint8_t pending; /* sent down, not yet confirmed (l2_confirm): not served */
	/* Staged from the shared level (prefixcache_shared_stage): not on any
	 * shard's disk, in no LRU, not counted in l2_stored; served once. */
	uint8_t shared;
};

struct pc_model {
	struct prefixcache_model p;
	uint16_t ngroups;
	struct pc_group g[MAX_GROUPS];
	uint8_t group_of_cache[PREFIXCACHE_MAX_CACHES];
	uint64_t batches_sent;
	uint16_t batch_g; /* tokens in the current batch */
	struct proto_evict_entry *batch;
	/* While columns come up from L2 (pc_l2.c): the batch is theirs. */
	struct prefixcache_l2col *up;
	uint32_t nup;
	/* DRAM hits refused in a row by the refill-or-recompute rule (dram_worth). */
	uint32_t refused_run;
	/* Hits below DRAM refused in a row (pc_l2_worth); per level (the
	 * disks, the shared level), the run that takes one all the same
	 * (PREFIXCACHE_PROBE_EVERY from the start, set by
	 * prefixcache_l2_sampled()) and the probes taken at
	 * PREFIXCACHE_PROBE_FAST since that level's last refill came back. */
	uint32_t l2_refused_run;
	uint32_t l2_probe_every[2];
	uint32_t l2_fast_probes[2];
};

#define MAX_GIDS (PREFIXCACHE_MAX_MODELS * MAX_GROUPS)

struct pc_org {
	uint64_t isolation_id;
	uint64_t ttl_last, ttl_first;
	struct prefixcache_org_stats st;
	uint32_t hnext;
	/* DRAM shares (prefixcache_org_dram_share): fractions of a group's
	 * capacity; cap 1 is none. Tokens it holds in each group. */
	double share, cap;
	uint64_t stored[MAX_GIDS];
	/* The same in the second tier (prefixcache_org_l2_share). */
	double l2_share, l2_cap;
	uint64_t l2_stored[MAX_GIDS];
};

struct seq_group {
	bool caching;
	uint32_t prompt;     /* record, NIL until the first eviction */
	uint32_t cur_end;    /* end of the last column recorded or hit */
	uint32_t last_entry; /* its entry (parent of the next), or NIL */
	uint32_t last_gen;   /* that record's gen: it may be freed and reused */
	uint64_t last_hash;  /* its hash (the chain's root at the start) */
};

struct prefixcache_seq {
	struct prefixcache_seq *prev, *next; /* live sequences */
	uint16_t model;
	uint32_t org;
	uint64_t isolation_id;
	uint64_t root; /* where its chain of column hashes starts (proto_ref_chain_root) */
	uint32_t *tokens; /* tokens from tbase on (those before are hashed: the hit, recorded columns) */
	uint32_t tbase;
	uint32_t ntok, cap; /* ntok: absolute count; cap: from tbase */
	uint32_t pos;	  /* next token index */
	uint32_t verified; /* speculative decoding: tokens known right */
	uint32_t allowed;
	uint32_t sketched; /* SLRU: columns ending here or before were sighted at lookup */
	bool resumes;	   /* SLRU: the hit reached the end of an earlier prompt (a chat) */
	uint32_t seen_end; /* admit: the prompt's columns ending here or before were seen before */
	uint32_t prompt_len; /* followup: what the sequence sent past this is its answer */
	bool cut;	     /* stopped before its end (prefixcache_cut): its answer's length unknown */
	uint32_t priority;
	uint32_t seq_id;
	uint64_t prompt_id;
	uint64_t *tok_batch; /* batch of each token's latest eviction (for spec) */
	struct seq_group g[MAX_GROUPS];
};

struct pc_pin {
	uint32_t entry, gen;
};

/* One prefixcache_begin()'s refill: ids [id, id + n), one per cache. */
struct pc_refill {
	uint64_t id;
	uint32_t n, pending;
	struct pc_pin *pin;
	uint32_t npin, pincap;
};

struct prefixcache {
	struct prefixcache_params p;
	struct prefixcache_sink sink;
	struct pc_model m[PREFIXCACHE_MAX_MODELS];
	/* Entries. */
	struct pc_entry *e;
	uint32_t ecap, efree, nentries;
	uint32_t ehigh; /* records ever handed out: [0, ehigh) (taken lowest first; expiry sweeps these) */
	uint32_t *ebucket;
	uint32_t emask;
	uint32_t expire_cursor;
	/* Prompts. */
	struct pc_prompt *pr;
	uint32_t prcap, prfree;
	uint32_t *prbucket;
	uint32_t prmask;
	uint64_t next_prompt;
	/* Organizations. */
	struct pc_org *org;
	uint32_t norg, orgcap;
	uint32_t *orgbucket;
	uint32_t orgmask;
	bool shares_on; /* some organization has a DRAM share or a cap: room is made by them */
	bool l2_shares_on; /* the same in the second tier */
	/* Refills in flight. */
	struct pc_refill *rf;
	uint32_t nrf, rfcap;
	uint64_t next_refill;
	struct prefixcache_seq *live;
	/* Lookup paths, per group. */
	uint32_t *path[MAX_GROUPS];
	uint32_t pathcap[MAX_GROUPS];
	/* The last lookup's REFILLs (prefixcache_hit.refills) and their chunks, every group's. */
	struct proto_refill_chunk *chunks;
	uint32_t chunkcap;
	struct prefixcache_refill refills[PREFIXCACHE_MAX_CACHES];
	/* The deletion policy (pc_policy.c); the state below is its own. */
	const struct pc_policy_ops *pol;
	/* SLRU, admit: a count-min sketch of column sightings, 4 rows (pc_policy_slru.c). */
	uint64_t *ghost;
	uint32_t ghost_mask;
	uint64_t sketch_adds;
	/*
	 * followup (pc_policy_followup.c): by column hash, the class of the sequence that stored the
	 * column (low 8 bits) under 24 bits of the hash (0: none).
	 */
	uint32_t *tag;
	uint32_t tag_mask;
	uint64_t fu_stored[FU_CLASSES], fu_reused[FU_CLASSES]; /* tokens, per class */
	/* Scratch. */
	uint32_t *stack, stackcap;
	uint32_t *touched, ntouched, touchedcap;
	struct prefixcache_stats st;
	uint64_t stored_total;
	/* The second tier (pc_l2.c). */
	struct pc_l2e *l2;
	uint32_t l2cap, l2free, l2mask;
	/* Staged shared-level columns, oldest first (index, hash): at most
	 * p.shared_staged; the oldest goes when a new one needs its place. */
	struct {
		uint32_t i;
		uint64_t hash;
	} *staged;
	uint32_t staged_head, staged_n;
	uint32_t *l2bucket;
	uint32_t *l2path, l2pathcap; /* a lookup's L2 columns */
	struct prefixcache_l2col *upcols;
	struct prefixcache_l2col *upsel; /* those a batch reads (pc_flush_model) */
	uint32_t upselcap;
	struct pc_run *upruns; /* the batch's runs of tokens (pc_up_select) */
	uint32_t uprunscap;
	uint32_t upcap;
};

/* ---- Small shared helpers ---- */

static inline uint64_t
mix64(uint64_t x)
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdULL;
	x ^= x >> 33;
	x *= 0xc4ceb9fe1a85ec53ULL;
	x ^= x >> 33;
	return x;
}

static inline uint32_t
ebucket_of(const struct prefixcache *pc, uint8_t gid, uint32_t org, uint64_t hash)
{
	return (uint32_t)mix64(hash ^ ((uint64_t)org << 8 | gid) * 0x9E3779B97F4A7C15ULL) &
	       pc->emask;
}

static inline uint32_t
tick(uint64_t now_ns)
{
	uint64_t t = now_ns / TICK_NS;

	return t > UINT32_MAX ? UINT32_MAX : (uint32_t)t;
}

/* An organization's TTLs, in ticks (0: none). */
struct ttl {
	uint64_t last, first;
};

static inline struct ttl
org_ttl(const struct prefixcache *pc, uint32_t org)
{
	const struct pc_org *o = &pc->org[org];
	uint64_t tl = o->ttl_last ? o->ttl_last : pc->p.ttl_last_ns;
	uint64_t tf = o->ttl_first ? o->ttl_first : pc->p.ttl_first_ns;
	/* Whole ticks, rounded down: an entry expires up to a tick early. */
	struct ttl t = {tl ? (tl + TICK_NS - 1) / TICK_NS : 0, tf ? (tf + TICK_NS - 1) / TICK_NS : 0};

	return t;
}

static inline bool
expired_t(const struct pc_entry *e, struct ttl ttl, uint32_t t)
{
	return (ttl.last && t >= e->last_used && (uint64_t)(t - e->last_used) + 1 > ttl.last) ||
	       (ttl.first && t >= e->first_used && (uint64_t)(t - e->first_used) + 1 > ttl.first);
}

static inline bool
expired(const struct prefixcache *pc, const struct pc_entry *e, uint64_t now)
{
	return expired_t(e, org_ttl(pc, e->org), tick(now));
}

/* Bits needed for @x (0 for 0), at most @max: LFU's lists, followup's classes. */
static inline unsigned int
bit_length(uint64_t x, unsigned int max)
{
	unsigned int n = x ? 64 - (unsigned int)__builtin_clzll(x) : 0;

	return n < max ? n : max;
}

static inline struct pc_group *
group_of(struct prefixcache *pc, uint8_t gid)
{
	return &pc->m[gid / MAX_GROUPS].g[gid % MAX_GROUPS];
}

/* The batch a token evicted now goes into. */
static inline uint64_t
current_batch(const struct pc_model *m)
{
	return m->batches_sent + 1;
}

/* Record @i still holds the entry it held at generation @gen (records are reused). */
static inline bool
entry_is(const struct prefixcache *pc, uint32_t i, uint32_t gen)
{
	return i < pc->ecap && pc->e[i].length != 0 && pc->e[i].gen == gen;
}

/*
 * End of the column after the one ending at @end, or 0 when caching stops.
 * Full attention: every C tokens. Sliding window W with S sinks: every C
 * tokens up to W; then the wafer loops over positions [S, W), and a column
 * of positions completes whenever its last position is written, at lengths
 * W + C - S, +C, ..., with a short column (C - S tokens) at each lap start.
 * When W is not a multiple of C, caching stops at the window.
 */
static inline uint32_t
pc_next_end(const struct pc_group *g, uint32_t C, uint32_t end)
{
	uint32_t W = g->window, S = g->sinks, x, p, q;

	if (g->rule == PREFIXCACHE_FULL)
		return end > UINT32_MAX - C ? 0 : end + C;
	if (end + C <= W)
		return end + C;
	if (W % C != 0 || end < W)
		return 0;
	x = end - W;
	p = S + x % (W - S); /* position the next token writes */
	q = (p / C + 1) * C - 1;  /* last position of its column */
	return end + (q - p + 1);
}

#define TOK(s, pos) ((s)->tokens[(pos) - (s)->tbase])
#define TOKP(s, pos) ((s)->tokens + ((pos) - (s)->tbase))
#define TBATCH(s, pos) ((s)->tok_batch[(pos) - (s)->tbase])

/*
 * A deletion policy: which of a group's lists each leaf goes on (list 0 is
 * freed first), and what it watches to decide that. Every hook may be NULL.
 * As l3fwd does with its lookup modes, adding a policy touches its own file
 * and the pc_policies table.
 */
struct pc_policy_ops {
	const char *name;
	/* Its state beside the map: 0, or -1 (no memory). */
	int (*init)(struct prefixcache *pc);
	void (*fini)(struct prefixcache *pc);
	/* The list leaf @e goes on (NULL: 0). */
	uint8_t (*bucket)(const struct prefixcache *pc, const struct pc_entry *e);
	/* Before a column of @g is freed for room (SLRU: demote over its share). */
	void (*before_free)(struct prefixcache *pc, struct pc_group *g);
	/* Entry @i is used by a lookup's hit. */
	void (*touch)(struct prefixcache *pc, uint32_t i);
	/* A lookup found np[g] columns of each group's path (pc->path), limit tokens asked. */
	void (*sight)(struct prefixcache *pc, struct prefixcache_seq *s,
		      const struct prefixcache_request *req, const uint32_t *np, uint32_t limit);
	/* ... and its hit is np[g] columns of each group, trimmed to what all can refill. */
	void (*hit)(struct prefixcache *pc, struct prefixcache_seq *s, const uint32_t *np);
	/* A column of @tokens, hash @h, is about to be recorded in group @gid. */
	void (*column_seen)(struct prefixcache *pc, uint8_t gid, uint64_t h, uint32_t tokens);
	/* Entry @i (hash @h, ending at @end) was recorded for @s, before it joins its list. */
	void (*recorded)(struct prefixcache *pc, struct prefixcache_seq *s, uint32_t i, uint64_t h,
			 uint32_t end);
	/* Sequence @s ends. */
	void (*end)(struct prefixcache *pc, const struct prefixcache_seq *s);
	/* May token @pos of @s take only the room of new columns (admit)? */
	bool (*new_only)(const struct prefixcache *pc, const struct prefixcache_seq *s, uint32_t pos);
};

/* By enum prefixcache_policy (pc_policy.c). */
extern const struct pc_policy_ops *const pc_policies[];
extern const struct pc_policy_ops pc_policy_slru, pc_policy_admit, pc_policy_followup;

static inline uint8_t
pc_bucket(const struct prefixcache *pc, const struct pc_entry *e)
{
	return pc->pol->bucket != NULL ? pc->pol->bucket(pc, e) : 0;
}

/* ---- Between the files ---- */

/* pc_map.c */
uint32_t pc_entry_alloc(struct prefixcache *pc);
/*
 * @k EVICT entries from @ent on, token_idx counting up, written by the
 * widest stores the CPU has (PC_FILL_BEST) or by @how's alone (a test
 * compares them); returns the kind used, or -1 when @how is not on this
 * build or CPU.
 */
enum { PC_FILL_BEST, PC_FILL_PLAIN, PC_FILL_SSE2, PC_FILL_AVX2, PC_FILL_AVX512 };
int pc_fill_entries(struct proto_evict_entry *be, struct proto_evict_entry ent, uint32_t k, int how);
/* The pool at least @n records long and the index sized for them, now (prefixcache_params.reserve). */
int pc_entry_reserve(struct prefixcache *pc, uint32_t n);
uint32_t pc_entry_find(const struct prefixcache *pc, uint8_t gid, uint32_t org, uint64_t hash);
void pc_entry_hash_unlink(struct prefixcache *pc, uint32_t i);
void pc_entry_release(struct prefixcache *pc, uint32_t i);
int pc_gid_of_cache(const struct prefixcache *pc, uint16_t mi, uint16_t cache_id);
int pc_grow(void **p, uint32_t *cap, size_t elem, uint32_t want);
uint32_t pc_org_get(struct prefixcache *pc, uint64_t iso);
uint32_t pc_pow2_ghost(uint32_t n);
uint32_t pc_prompt_find(const struct prefixcache *pc, uint8_t gid, uint64_t id);
uint32_t pc_prompt_new(struct prefixcache *pc, uint8_t gid, uint64_t id, uint32_t offset, struct prefixcache_seq *s);
void pc_prompt_release(struct prefixcache *pc, uint32_t i);

/* pc_policy.c */
void pc_lru_insert(struct prefixcache *pc, uint32_t i, uint8_t bucket, bool oldest);
void pc_lru_insert_by_use(struct prefixcache *pc, uint32_t i, uint8_t bucket);
void pc_lru_requeue(struct prefixcache *pc, uint32_t i);
void pc_lru_unlink(struct prefixcache *pc, uint32_t i);

/* pc_delete.c */
uint32_t pc_delete_subtree(struct prefixcache *pc, uint32_t root, bool send);
void pc_flush_model(struct prefixcache *pc, uint16_t mi);
/* A run of a batch's rows: consecutive tokens of one prompt in one cache. */
struct pc_run {
	uint64_t prompt_id;
	uint32_t lo, hi; /* its first and last token */
	uint16_t cache_id;
};
uint32_t pc_up_select(const struct proto_evict_entry *batch, uint32_t g, uint16_t num_caches,
		      const struct prefixcache_l2col *up, uint32_t nup, struct pc_run *runs,
		      struct prefixcache_l2col *out);
bool pc_free_one(struct prefixcache *pc, uint8_t gid, bool first_list_only, uint32_t for_org);

/* The tokens organization @p o may hold in group @p g at most (its DRAM cap). */
static inline uint64_t
pc_org_cap_tokens(const struct prefixcache *pc, uint32_t o, const struct pc_group *g)
{
	return pc->org[o].cap >= 1 ? g->capacity : (uint64_t)(pc->org[o].cap * (double)g->capacity);
}

/* Whether organization @p o holds more than its DRAM share of group @p g (@p gid). */
static inline bool
pc_org_over_share(const struct prefixcache *pc, uint32_t o, const struct pc_group *g, uint8_t gid)
{
	return pc->org[o].stored[gid] > (uint64_t)(pc->org[o].share * (double)g->capacity);
}

/*
 * Tokens a batch takes: max_batch_tokens, or for a batch coming up from L2
 * (its L2Columns follow its entries in the frame: up to G / C + 2 per cache,
 * 64 bytes each) three quarters of it.
 */
static inline uint16_t
pc_batch_limit(const struct pc_model *m)
{
	return m->nup > 0 ? (uint16_t)(m->p.max_batch_tokens * 3 / 4) : m->p.max_batch_tokens;
}

/* ---- pc_l2.c: the second tier ---- */
int pc_l2_init(struct prefixcache *pc);
void pc_l2_fini(struct prefixcache *pc);
bool pc_l2_on(const struct prefixcache *pc, uint16_t mi);
/* Entry @i is about to be freed by the policy: down to L2 if it admits it. */
void pc_l2_demote(struct prefixcache *pc, uint32_t i);
/*
 * The columns after a DRAM hit ending at @end (hash @h) that L2 holds, up
 * to @limit: their records in pc->l2path. @return how many.
 */
uint32_t pc_l2_walk(struct prefixcache *pc, uint16_t mi, uint32_t org,
		    const struct prefixcache_request *req, uint32_t end, uint64_t h, uint32_t limit,
		    uint64_t now);
/* A column DRAM records again (computed, not brought up): L2 lets its copy go. */
void pc_l2_forget(struct prefixcache *pc, uint8_t gid, uint32_t org, uint64_t hash);
/* The model's shards restart: its L2 columns forgotten, nothing sent (their inventories come). */
void pc_l2_reset_model(struct prefixcache *pc, uint16_t mi);
/* Of the first @p n columns of pc->l2path, the tokens staged from the shared level. */
uint32_t pc_l2_path_shared(const struct prefixcache *pc, uint32_t n);
/* The estimate for bringing @p tokens up (ns): the L2 line for those on the
 * shards' disks, the shared level's for the @p shared of them staged from it. */
uint64_t pc_l2_estimate_ns(const struct prefixcache *pc, uint16_t mi, uint32_t tokens,
			   uint32_t shared);
/* Are @p tokens found (@p shared of them staged) worth taking, or is
 * computing them faster, the compute taken by others for @p wait_ns first
 * (counted)? */
bool pc_l2_worth(struct prefixcache *pc, uint16_t mi, uint32_t tokens, uint32_t shared,
		 uint64_t wait_ns);
/* Move the @n columns of pc->l2path up into @s's prompt; the tokens now in
 * DRAM (@p shared_up: of them, those staged from the shared level). */
uint32_t pc_l2_promote(struct prefixcache *pc, struct prefixcache_seq *s, uint32_t n,
		       const struct prefixcache_request *req, uint64_t now, uint32_t *shared_up);
void pc_prompt_truncate(struct prefixcache *pc, uint32_t pi, uint32_t x, bool send);
bool pc_subtree_pinned(struct prefixcache *pc, uint32_t root);

/* pc_lookup.c */
void pc_seq_pin_last(struct prefixcache *pc, struct seq_group *sg, uint32_t i);
int pc_seq_reserve_tokens(struct prefixcache_seq *s, uint32_t n);

/* pc_record.c */
void pc_stop_caching(struct prefixcache *pc, struct prefixcache_seq *s, unsigned int gi);

#endif
