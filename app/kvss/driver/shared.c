/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The driver's side of the shared level (driver_priv.h; PROTOCOL.md section
 * 10). The driver still decides everything; no driver knows what the other
 * replicas wrote, so it asks:
 *
 *   - Generations. The default namespace's object "generation" (every
 *     organization) and each organization's: read at start and every
 *     shared.generation_ms; every object is named under them
 *     (shared_object_id), so a raised one (kvss-shared reset) makes this
 *     replica stop finding the old objects at once, and what it staged
 *     from them is forgotten. An organization whose generation is not read
 *     yet neither looks up nor writes. A generation never goes down here:
 *     the highest read is kept, and one read lower, absent where a higher
 *     was read, or not a generation is refused (counted, said once per
 *     value): after a reset, an object removed or rewritten lower would
 *     otherwise bring back what the reset dropped. At start the driver
 *     reads a sample of the pool's records (evidence_scan): a global
 *     generation below one they were written under, or one that is not a
 *     generation, leaves this replica without the shared level (said; kvss-
 *     shared gen --repair is the way out); an organization's generation
 *     below its records' is refused as if read lower.
 *   - Down. A column the second tier takes (the sink's L2_DOWN) goes down
 *     to the shared level as well when shared.admit says so: every shard
 *     writes its slices (SH_DOWN); once each has answered 0 for every
 *     cache, the driver
 *     writes the column's record (exclusive create). Slices without a
 *     record are never read.
 *   - Lookups. A request's columns past what the driver holds are looked up
 *     (their records read, in one batch, all in flight at once) when the
 *     request is among the next shared.lookahead to start, so ahead of its
 *     start and of its pick; it starts when they are back or at
 *     shared.deadline_ms after they were sent, whichever is first: a record
 *     not back by then is a miss (counted). A record is checked (header,
 *     checksum, every field against what was asked, first use within the
 *     organization's TTL) and the found run is staged in the library
 *     (prefixcache_shared_stage), whose lookup then brings it up as from
 *     the second tier, if that beats recomputing (SH_UP).
 *   - Failures. A record that fails its check is deleted (the column is
 *     dropped from the shared level, counted); a slice a shard refuses
 *     (L2_DONE op 4 SHARED_BAD) has its record deleted too. A cluster that
 *     does not answer makes lookups misses and writes failures: DRAM and
 *     the disk serve as before; after shared.op_timeout_ms of failures in
 *     a row the level is marked unavailable (no lookups, no writes) and
 *     tried again every generation_ms by the generation read.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "driver_priv.h"
#include "kvss.h"
#include "percentile.h"
#include "shared.h"

#define SH_ORGS 1024
#define SH_PEND_BITS 14 /* uploads awaiting every shard's slices */
#define SH_RECS 64	/* records being written or deleted at once */
#define SH_INFLIGHT 512
#define SH_N(a) (sizeof(a) / sizeof((a)[0]))

enum ck_kind { CK_LOOKUP = 1, CK_REC = 2, CK_GEN = 3, CK_DEL = 4 };

static inline uint64_t
cookie(enum ck_kind k, uint32_t a, uint32_t b)
{
	return (uint64_t)k << 56 | (uint64_t)(a & 0xffffff) << 32 | b;
}

struct sh_org {
	uint64_t iso;
	uint32_t gen;	 /* the highest read (once known) */
	uint32_t floor;	 /* before: the highest its records name (evidence_scan) */
	bool known;
	bool reading;
	bool refused;	 /* its first read refused: read again every generation_ms only */
	uint64_t said;	 /* the last refusal said (verdict << 32 | value, + 1) */
	char buf[32];
};

/* What the start's sample of records says each organization's generation was at least. */
#define SH_FLOORS 256
struct sh_floor {
	uint64_t iso;
	uint32_t gen;
};

/* Where a request's lookup in one model stands. */
enum sh_lookup_state {
	LK_FREE = 0,	/* never used (the slots start zeroed) */
	LK_READING = 1, /* its records asked for: answers outstanding */
	LK_DONE = 2,	/* back, abandoned, or nothing to ask: its request may go */
	LK_NO_GEN = 3,	/* its organization's generation is being read: asked again */
};

struct sh_lookup {
	uint32_t req;	  /* the workload's request */
	uint8_t state;	  /* enum sh_lookup_state */
	uint16_t model;
	uint32_t first;	  /* the first column asked for */
	uint32_t n;	  /* columns asked for */
	uint32_t cols;	  /* columns it covers (asked, or to be asked once the generation is read) */
	uint32_t outstanding;
	uint32_t epoch;	  /* lookups of an older one are stale (a new generation) */
	uint64_t iso;
	uint64_t sent_ns;
	uint64_t *keys;	  /* [first + max_columns]: every column's key from 0 */
	uint64_t *first_use; /* [max_columns]: wall ns, when found */
	uint8_t *found;	  /* [max_columns] */
	uint8_t *buf;	  /* [max_columns][SHARED_HDR_LEN] */
};

struct sh_pend {
	uint64_t iso, key, parent, first_use_ns, object_id;
	uint32_t start, tokens, gen_global, gen_org;
	uint16_t model, got, need;
	bool used;
};

struct sh_rec {
	bool used;
	uint8_t buf[SHARED_HDR_LEN];
};

/* A whole column waiting for its batch to complete (the rule "all"). */
struct sh_whole {
	struct prefixcache_l2col c;
	uint16_t model;
};

#define SH_WHOLE 8192
#define SH_KNOWN_BITS 16
#define SH_KEYLESS_BITS 12
#define SH_KEYLESS_ROUNDS 10

struct drv_shl {
	struct shared *s;
	bool on, unavailable;
	uint32_t gen_global, epoch;
	bool gen_reading;
	uint64_t gen_said; /* the last refusal of the global generation said */
	char gen_buf[32];
	struct sh_floor floor[SH_FLOORS];
	uint32_t nfloor;
	struct sh_org org[SH_ORGS];
	uint32_t norg;
	uint16_t org_at[SH_ORGS * 2]; /* by the isolation id's hash: its org's index + 1 */
	uint32_t layout[PREFIXCACHE_MAX_MODELS];
	bool model_on[PREFIXCACHE_MAX_MODELS];
	uint64_t next_gen_ns;
	uint64_t fail_since_ns; /* failures in a row since (0: the last op went well) */
	/* Lookups: slot (req % lookahead) x model. */
	struct sh_lookup *lk;
	uint32_t nlk, next_issue;
	struct sh_pend pend[1u << SH_PEND_BITS];
	struct sh_rec rec[SH_RECS];
	uint32_t nrec; /* records in flight */
	struct sh_whole whole[SH_WHOLE];
	uint32_t whole_head, nwhole;
	uint32_t npend;			  /* columns awaiting their slices */
	uint64_t known[1u << SH_KNOWN_BITS];	  /* columns written or found (known_has) */
	/* Columns whose slice a shard refused as sealed under a key its store
	 * does not make (SHARED_KEY), by model: not staged again until a
	 * generation changes, SH_KEYLESS_ROUNDS generation intervals pass (a
	 * shard may read its new store after the reset's bump) or this driver
	 * writes the column's record itself (keyless_has; one a slot, the
	 * last one kept). */
	uint64_t keyless[1u << SH_KEYLESS_BITS];
	uint32_t keyless_rounds; /* generation intervals since the table was last cleared */
	uint64_t busy_since;
	bool busy_given_up;
	uint64_t gen_changed_ns; /* when a generation last changed (0: never) */
	/* What the run counted (report.c reads them; this file writes). */
	struct drv_sh_stats st;
	uint64_t lookup_ns[4096];
	uint32_t nlookup_ns;
	/* What a lookup takes now, as the level's answers show it (an average
	 * of 1/8 a lookup, every lookup's, whether its request waited or not):
	 * a request does not wait for a level slower than computing. */
	uint64_t level_ns;
	/* Requests held back for their lookups: which one waits, since when; the first 4,096 waits. */
	uint32_t wait_req; /* its index + 1 (0: none) */
	uint64_t wait_since;
	uint64_t wait_ns[4096];
	uint32_t nwait;
};

/*
 * The shared level serves model @p m: configured, available, and reached by
 * every shard of the model (STATUS bit 2, PROTOCOL.md section 10): a shard
 * without it would refuse an SH_DOWN (ERROR NO_TIER) and an SH_UP whole.
 */
bool
drv_sh_on(struct drv *d, uint16_t m)
{
	struct drv_shl *S = d->shl;
	uint16_t i;

	if (!S->on || S->unavailable || m >= PREFIXCACHE_MAX_MODELS || !S->model_on[m])
		return false;
	for (i = 0; i < d->nshards[m]; i++)
		if (!d->sh[d->first_shard[m] + i].has_shared)
			return false;
	return true;
}

const struct drv_sh_stats *
drv_sh_stats(struct drv *d)
{
	struct drv_shl *S = d->shl;

	S->st.generation = S->gen_global;
	S->st.unavailable = S->unavailable;
	if (S->s != NULL) {
		struct shared_stats ls;

		shared_stats_get(S->s, &ls);
		S->st.op_timeouts = ls.timeouts;
		S->st.ops_busy = ls.busy;
	}
	return &S->st;
}

/* A lookup's cost, for its percentiles: the first 4,096 kept. */
static void
note_lookup(struct drv *d, uint64_t ns)
{
	struct drv_shl *S = d->shl;

	if (S->nlookup_ns < SH_N(S->lookup_ns))
		S->lookup_ns[S->nlookup_ns++] = ns;
}

/* A lookup's whole time (or, given up, at least this): the level's pace. */
static void
note_level(struct drv_shl *S, uint64_t ns)
{
	S->level_ns = S->level_ns == 0 ? ns : S->level_ns - S->level_ns / 8 + ns / 8;
}

/* p50 and p99 of @p n values at @p v (sorted here; lib/percentile's rule); 0 and 0 for none. */
static void
pct(uint64_t *v, uint32_t n, uint64_t *p50, uint64_t *p99)
{
	percentile_sort_u64(v, n);
	*p50 = percentile_u64(v, n, 50);
	*p99 = percentile_u64(v, n, 99);
}

void
drv_sh_wait_pct(struct drv *d, uint64_t *p50, uint64_t *p99)
{
	struct drv_shl *S = d->shl;

	/* Every request that started counts: one that did not wait waited 0. */
	uint64_t all[4096 * 2];
	uint32_t n = S->nwait, zeros = (uint32_t)(S->st.started - S->st.waits);

	memcpy(all, S->wait_ns, sizeof(S->wait_ns[0]) * n);
	while (zeros-- > 0 && n < SH_N(all))
		all[n++] = 0;
	pct(all, n, p50, p99);
}

void
drv_sh_lookup_pct(struct drv *d, uint64_t *p50, uint64_t *p99)
{
	struct drv_shl *S = d->shl;

	pct(S->lookup_ns, S->nlookup_ns, p50, p99);
}

/* ---- The cluster's health ------------------------------------------------------ */

static void
went_well(struct drv *d)
{
	struct drv_shl *S = d->shl;

	S->fail_since_ns = 0;
	if (S->unavailable) {
		S->unavailable = false;
		S->st.available_again++;
		printf("kvss: driver: the shared level answers again\n");
	}
}

static void
went_wrong(struct drv *d, uint64_t now)
{
	struct drv_shl *S = d->shl;

	if (S->fail_since_ns == 0)
		S->fail_since_ns = now ? now : 1;
	else if (!S->unavailable && now - S->fail_since_ns >= (uint64_t)kvss.cfg.shared.op_timeout_ms * 1000000ull) {
		S->unavailable = true;
		S->st.unavailable_times++;
		printf("kvss: driver: the shared level fails for %u ms: not used until it answers "
		       "again\n", kvss.cfg.shared.op_timeout_ms);
	}
}

/* ---- Generations ----------------------------------------------------------------- */

/* An organization's generation, found by its isolation id's hash (added if new). */
static struct sh_org *
org_of(struct drv *d, uint64_t iso)
{
	struct drv_shl *S = d->shl;
	uint32_t i = (uint32_t)((iso * 0x9E3779B97F4A7C15ull) >> 53), k; /* 11 bits: SH_ORGS * 2 */

	for (;; i = (i + 1) & (SH_N(S->org_at) - 1)) {
		if (S->org_at[i] == 0)
			break;
		if (S->org[S->org_at[i] - 1].iso == iso)
			return &S->org[S->org_at[i] - 1];
	}
	if (S->norg == SH_ORGS) {
		S->st.orgs_full++;
		return NULL;
	}
	S->org[S->norg] = (struct sh_org){.iso = iso};
	for (k = 0; k < S->nfloor; k++)
		if (S->floor[k].iso == iso)
			S->org[S->norg].floor = S->floor[k].gen;
	S->org_at[i] = (uint16_t)(S->norg + 1);
	return &S->org[S->norg++];
}

static void
gen_read(struct drv *d, int32_t org)
{
	struct drv_shl *S = d->shl;
	char ns[SHARED_NS_MAX] = "";
	char *buf = org < 0 ? S->gen_buf : S->org[org].buf;

	if (org >= 0)
		shared_ns(ns, S->org[org].iso);
	if (shared_get(S->s, ns, SHARED_GEN_OBJECT, buf, 31,
		       cookie(CK_GEN, org < 0 ? 0xffffff : (uint32_t)org, 0)) == 0) {
		if (org < 0)
			S->gen_reading = true;
		else
			S->org[org].reading = true;
	}
}

/* A generation changed: nothing staged under the old ones is served. */
static void
new_generation(struct drv *d, const char *what, uint32_t from, uint32_t to)
{
	struct drv_shl *S = d->shl;
	uint32_t i;

	printf("kvss: driver: the shared level's generation %s %u -> %u: older objects are not "
	       "read any more\n", what, from, to);
	fflush(stdout); /* an operator (and demo-shared.sh) times the reset by it */
	S->st.generations_seen++;
	S->epoch++;
	prefixcache_shared_unstage(d->pc);
	for (i = 0; i < SH_N(S->pend); i++)
		S->pend[i].used = false;
	S->npend = 0;
	memset(S->known, 0, sizeof(S->known)); /* what was known is of the old generation */
	memset(S->keyless, 0, sizeof(S->keyless)); /* a reset: the shards' stores changed */
	S->keyless_rounds = 0;
}

/* A generation read refused: counted every time, said once per value. */
static void
gen_refuse(struct drv *d, const char *what, enum shared_gen_verdict v, uint32_t kept, int rc, uint32_t got,
	   uint64_t *said)
{
	struct drv_shl *S = d->shl;
	/* Said once per value read: a broken one reads 0 either way, so its
	 * two kinds (not a number, 4294967295) are told apart by @p rc. */
	uint32_t value = v == SHARED_GEN_BROKEN ? (uint32_t)(rc == -ERANGE) : got;
	uint64_t tag = ((uint64_t)v << 32 | value) + 1;

	S->st.generation_refused++;
	if (v == SHARED_GEN_BROKEN)
		S->st.generation_bad++;
	if (*said == tag)
		return;
	*said = tag;
	if (v == SHARED_GEN_BROKEN)
		printf("kvss: driver: the shared level's generation %s is not a generation (%s): "
		       "refused, generation %u kept (kvss-shared gen --repair)\n", what,
		       rc == -ERANGE ? "4294967295" : "not a number", kept);
	else if (v == SHARED_GEN_ABSENT)
		printf("kvss: driver: the shared level's generation %s is absent (it would read 0): "
		       "refused, generation %u kept: a generation never goes down (kvss-shared gen "
		       "--repair)\n", what, kept);
	else
		printf("kvss: driver: the shared level's generation %s reads %u, below %u: refused, "
		       "generation %u kept: a generation never goes down (kvss-shared gen --repair)\n",
		       what, got, kept, kept);
	fflush(stdout);
}

static void
gen_done(struct drv *d, uint32_t who, int status, uint32_t len, uint64_t now)
{
	struct drv_shl *S = d->shl;
	bool global = who == 0xffffff;
	struct sh_org *o = global || who >= S->norg ? NULL : &S->org[who];
	enum shared_gen_verdict v;
	uint32_t g = 0, highest;
	int rc = status;
	char what[48];

	if (global)
		S->gen_reading = false;
	else if (o != NULL)
		o->reading = false;
	else
		return;
	if (rc == -EFBIG)
		rc = -EBADMSG; /* longer than any generation's text: not one (as a start's read says) */
	if (rc == 0)
		rc = shared_gen_parse(global ? S->gen_buf : o->buf, len, &g);
	highest = global ? S->gen_global : o->known ? o->gen : o->floor;
	v = shared_gen_judge(highest, rc, g);
	if (v == SHARED_GEN_UNREAD) {
		went_wrong(d, now);
		return;
	}
	went_well(d);
	if (global)
		snprintf(what, sizeof(what), "of every organization");
	else
		snprintf(what, sizeof(what), "of organization %016" PRIx64, o->iso);
	if (v == SHARED_GEN_LOWER || v == SHARED_GEN_ABSENT || v == SHARED_GEN_BROKEN) {
		gen_refuse(d, what, v, highest, rc, g, global ? &S->gen_said : &o->said);
		if (o != NULL && !o->known)
			o->refused = true; /* unknown still: neither looks up nor writes */
		return;
	}
	if (global) {
		if (g != S->gen_global) {
			new_generation(d, what, S->gen_global, g);
			S->gen_changed_ns = now;
		}
		S->gen_global = g;
	} else {
		if (o->known && g != o->gen) {
			new_generation(d, what, o->gen, g);
			S->gen_changed_ns = now;
		}
		o->gen = g;
		o->known = true;
		o->refused = false;
	}
}

/* ---- Names ------------------------------------------------------------------------- */

static bool
names_of(struct drv *d, uint16_t m, uint64_t iso, uint64_t key, uint32_t *gg, uint32_t *go, uint64_t *id)
{
	struct drv_shl *S = d->shl;
	struct sh_org *o = org_of(d, iso);

	if (o == NULL || !o->known) {
		/* A refused one is read again every generation_ms (drv_sh_poll), not per request. */
		if (o != NULL && !o->reading && !o->refused && S->s != NULL)
			gen_read(d, (int32_t)(o - S->org));
		return false;
	}
	*gg = S->gen_global;
	*go = o->gen;
	*id = shared_object_id(iso, key, *gg, *go, S->layout[m]);
	return true;
}

/* A SharedColumn's object fields. */
static void
name_into(struct drv *d, struct proto_l2col *o, uint16_t m, uint32_t gg, uint32_t go, uint64_t id)
{
	struct drv_shl *S = d->shl;

	o->object_id = id;
	o->gen_global = gg;
	o->gen_org = go;
	o->layout = S->layout[m];
}

/* The record a column has in the shared level (kind 2). */
static void
record_hdr(struct drv *d, struct shared_hdr *h, uint16_t m, uint64_t iso, uint64_t key, uint64_t parent,
	   uint64_t first_use, uint32_t start, uint32_t tokens, uint32_t gg, uint32_t go,
	   uint64_t id)
{
	struct drv_shl *S = d->shl;

	*h = (struct shared_hdr){.kind = SHARED_RECORD, .org = iso, .key = key, .parent = parent,
				 .object_id = id, .first_use_ns = first_use, .gen_global = gg,
				 .gen_org = go, .layout = S->layout[m], .model = m,
				 .shard = d->nshards[m],
				 .cache = kvss.cfg.driver.pc.model[m].num_caches, .start = start,
				 .tokens = tokens};
}

static void
record_delete(struct drv *d, uint64_t iso, uint64_t id)
{
	struct drv_shl *S = d->shl;
	char ns[SHARED_NS_MAX], name[SHARED_NAME_MAX];

	shared_ns(ns, iso);
	shared_record_name(name, id);
	if (shared_del(S->s, ns, name, cookie(CK_DEL, 0, 0)) == 0)
		S->st.records_deleted++;
}

/* ---- Up: slices written, then the record ----------------------------------------------- */

static uint32_t
pend_slot(uint16_t m, uint64_t iso, uint64_t key)
{
	return (uint32_t)((key ^ iso * 0x9E3779B97F4A7C15ull ^ m) >> (64 - SH_PEND_BITS));
}

static void
pend_free(struct drv *d, struct sh_pend *p)
{
	struct drv_shl *S = d->shl;

	p->used = false;
	if (S->npend > 0)
		S->npend--;
}

/*
 * Two lossy sets of columns, one tag a slot (a newer tag takes it): known
 * (columns this driver wrote or found, whatever the model) and keyless
 * (columns a shard refused by key, by model). A column's tag mixes its
 * organization and, for keyless, its model (a column's key is the same in
 * every model); column key 0 is never in either (0 is an empty slot).
 */
static uint64_t
col_tag(uint64_t iso, uint64_t key, uint64_t salt)
{
	return key ^ iso ^ salt * 0xC2B2AE3D27D4EB4Full;
}

static uint64_t *
col_slot(uint64_t *set, unsigned int bits, uint64_t tag)
{
	return &set[(tag * 0x9E3779B97F4A7C15ull) >> (64 - bits)];
}

static bool
col_has(uint64_t *set, unsigned int bits, uint64_t key, uint64_t tag)
{
	return key != 0 && *col_slot(set, bits, tag) == tag;
}

static void
known_add(struct drv *d, uint64_t iso, uint64_t key)
{
	uint64_t t = col_tag(iso, key, 0);

	*col_slot(d->shl->known, SH_KNOWN_BITS, t) = t;
}

static bool
known_has(struct drv *d, uint64_t iso, uint64_t key)
{
	return col_has(d->shl->known, SH_KNOWN_BITS, key, col_tag(iso, key, 0));
}

static void
keyless_add(struct drv *d, uint16_t m, uint64_t iso, uint64_t key)
{
	uint64_t t = col_tag(iso, key, (uint64_t)m + 1);

	*col_slot(d->shl->keyless, SH_KEYLESS_BITS, t) = t;
}

static bool
keyless_has(struct drv *d, uint16_t m, uint64_t iso, uint64_t key)
{
	return col_has(d->shl->keyless, SH_KEYLESS_BITS, key, col_tag(iso, key, (uint64_t)m + 1));
}

/* This driver writes column @p key's record: what it refused before may open now. */
static void
keyless_forget(struct drv *d, uint16_t m, uint64_t iso, uint64_t key)
{
	uint64_t t = col_tag(iso, key, (uint64_t)m + 1);
	uint64_t *slot = col_slot(d->shl->keyless, SH_KEYLESS_BITS, t);

	if (*slot == t)
		*slot = 0;
}

static struct sh_pend *
pend_find(struct drv *d, uint16_t m, uint64_t iso, uint64_t key, bool make)
{
	struct drv_shl *S = d->shl;
	uint32_t i = pend_slot(m, iso, key), k;

	for (k = 0; k < 8; k++, i = (i + 1) & (SH_N(S->pend) - 1)) {
		struct sh_pend *p = &S->pend[i];

		if (p->used && p->model == m && p->iso == iso && p->key == key)
			return p;
		if (make && !p->used)
			return p;
	}
	return NULL;
}

/* A column goes down to the shared level (SH_DOWN): its record awaited, @p o's object fields set (false: not now). */
static bool
send_down(struct drv *d, uint16_t m, const struct prefixcache_l2col *c, struct proto_l2col *o)
{
	struct drv_shl *S = d->shl;
	struct sh_pend *p;
	uint32_t gg, go;
	uint64_t id;

	if (keyless_has(d, m, c->isolation_id, c->key)) {
		S->st.down_keyless_skipped++; /* a shard keeps another's slice of it (drv_sh_done) */
		return false;
	}
	if (!names_of(d, m, c->isolation_id, c->key, &gg, &go, &id)) {
		S->st.down_no_generation++;
		return false;
	}
	p = pend_find(d, m, c->isolation_id, c->key, false);
	if (p == NULL) {
		/*
		 * A lookup uses a run of columns from what a replica holds, so a
		 * column is worth writing only if its parent can be found: a
		 * prompt's first, or one whose parent this driver wrote or found
		 * (chain). And the cluster takes only so many at once: past
		 * shared.max_up columns awaiting their slices, what comes is not
		 * sent (a cluster slower than the columns made sheds their
		 * tails, never their roots).
		 */
		if (c->start != 0 && !known_has(d, c->isolation_id, c->parent)) {
			S->st.down_no_parent++;
			return false;
		}
		if (S->npend >= kvss.cfg.shared.max_up) {
			S->st.down_busy++;
			return false;
		}
		p = pend_find(d, m, c->isolation_id, c->key, true);
		if (p == NULL) {
			S->st.down_busy++; /* too many awaited: this one stays local */
			return false;
		}
		*p = (struct sh_pend){.iso = c->isolation_id, .key = c->key, .parent = c->parent,
				      .first_use_ns = o->first_use_ns, .object_id = id,
				      .start = c->start, .tokens = c->tokens, .gen_global = gg,
				      .gen_org = go, .model = m, .got = 0,
				      .need = (uint16_t)(d->nshards[m] *
							 kvss.cfg.driver.pc.model[m].num_caches),
				      .used = true};
		S->st.down_cols++;
		S->npend++;
		known_add(d, c->isolation_id, c->key);
	}
	name_into(d, o, m, gg, go, id);
	return true;
}

/* The second tier takes a column: the shared level too under "l2" (and "hit", once hit). */
bool
drv_sh_down(struct drv *d, uint16_t m, const struct prefixcache_l2col *c, struct proto_l2col *o)
{
	const uint8_t a = kvss.cfg.shared.admit;

	if (!drv_sh_on(d, m) || !kvss.cfg.shared.write || a == KVSS_SHARED_ADMIT_ALL ||
	    (a == KVSS_SHARED_ADMIT_HIT && c->hits == 0))
		return false;
	return send_down(d, m, c, o);
}

/*
 * A column recorded whole, under "all": queued, and sent down once every
 * shard of its model has completed its batch (an SH_DOWN waits for its
 * evict_count at the head of the refill queue, and the DELETEs behind it
 * with it: sent at once it would hold the shard's DRAM while the batch is
 * still being filled). Sent only if the library still holds it where it
 * was recorded: the SH_DOWN then goes into the stream ahead of any DELETE
 * that frees it.
 */
void
drv_sh_whole(struct drv *d, uint16_t m, const struct prefixcache_l2col *c)
{
	struct drv_shl *S = d->shl;

	if (!drv_sh_on(d, m) || !kvss.cfg.shared.write || kvss.cfg.shared.admit != KVSS_SHARED_ADMIT_ALL)
		return;
	if (S->nwhole == SH_WHOLE) {
		S->st.down_busy++;
		return;
	}
	S->whole[(S->whole_head + S->nwhole) % SH_WHOLE] = (struct sh_whole){.c = *c, .model = m};
	S->nwhole++;
}

static void
flush_whole(struct drv *d)
{
	struct drv_shl *S = d->shl;

	while (S->nwhole > 0) {
		struct sh_whole *u = &S->whole[S->whole_head];
		uint16_t m = u->model, i;
		struct proto_l2col o;
		bool done = true;

		for (i = 0; i < d->nshards[m]; i++)
			if (d->sh[d->first_shard[m] + i].batches_complete < u->c.evict_count)
				done = false;
		if (!done)
			return; /* in order: the ones after it are of later batches */
		S->whole_head = (S->whole_head + 1) % SH_WHOLE;
		S->nwhole--;
		if (!prefixcache_column_held(d->pc, m, u->c.isolation_id, u->c.key, u->c.prompt_id,
					     u->c.start, u->c.evict_count)) {
			S->st.down_gone++; /* freed (or replaced) before its batch completed */
			continue;
		}
		o = (struct proto_l2col){.key = u->c.key, .parent = u->c.parent,
					 .isolation_id = u->c.isolation_id, .prompt_id = u->c.prompt_id,
					 .evict_count = u->c.evict_count,
					 .first_use_ns = d->sink.wall_base_ns + u->c.first_use_ns,
					 .start_token_idx = u->c.start, .num_tokens = u->c.tokens,
					 .cache_id = u->c.cache_id};
		if (send_down(d, m, &u->c, &o))
			drv_sink_sh_down(&d->sink, m, &o);
	}
}

static void
record_write(struct drv *d, const struct sh_pend *p)
{
	struct drv_shl *S = d->shl;
	char ns[SHARED_NS_MAX], name[SHARED_NAME_MAX];
	struct shared_hdr h;
	uint32_t i;

	keyless_forget(d, p->model, p->iso, p->key); /* its slices are this driver's now */

	for (i = 0; i < SH_RECS && S->rec[i].used; i++)
		;
	if (i == SH_RECS) {
		S->st.records_busy++;
		return;
	}
	record_hdr(d, &h, p->model, p->iso, p->key, p->parent, p->first_use_ns, p->start, p->tokens,
		   p->gen_global, p->gen_org, p->object_id);
	h.written_ns = drv_wall_ns();
	shared_hdr_encode(S->rec[i].buf, &h, NULL);
	shared_ns(ns, p->iso);
	shared_record_name(name, p->object_id);
	if (shared_put(S->s, ns, name, S->rec[i].buf, SHARED_HDR_LEN, cookie(CK_REC, i, 0)) == 0) {
		S->rec[i].used = true;
		S->nrec++;
	} else
		S->st.records_failed++;
}

/* ---- Lookups ----------------------------------------------------------------------------- */

static struct sh_lookup *
lk_of(struct drv *d, uint32_t req, uint16_t m)
{
	struct drv_shl *S = d->shl;

	return &S->lk[(req % kvss.cfg.shared.lookahead) * PREFIXCACHE_MAX_MODELS + m];
}

/*
 * Look request @p req up in model @p m: its columns past what the driver
 * holds, their records read all at once. An organization whose generation
 * is not read yet (its first request) waits for it: state LK_NO_GEN, asked again
 * by drv_sh_request_ready(d) until the deadline.
 */
static void
lookup_one(struct drv *d, uint32_t req, uint16_t m, uint64_t now, bool again)
{
	struct drv_shl *S = d->shl;
	const struct wl_req *q = &d->wl.r[req];
	uint32_t max = kvss.cfg.shared.max_columns;
	struct sh_lookup *l = lk_of(d, req, m);
	struct prefixcache_request rq = {.isolation_id = q->iso, .salt = q->salt, .tokens = q->tokens,
					 .num_tokens = q->n, .cache_length_allowed = q->allowed,
					 .first_multimodal = q->first_mm};
	char ns[SHARED_NS_MAX];
	uint32_t n, known, j, gg, go;
	uint64_t id;

	if (l->outstanding > 0) {
		/* Its slot's last lookup still has reads in flight into its
		 * buffers: this request goes without one. */
		S->st.lookups_skipped++;
		return;
	}
	if (!again) {
		l->req = req;
		l->sent_ns = now;
	}
	l->state = LK_DONE; /* nothing to wait for, unless asked below */
	l->n = l->cols = 0;
	if (!drv_sh_on(d, m))
		return;
	n = prefixcache_columns(d->pc, m, &rq, l->keys, max * 2, &known);
	if (known >= n)
		return; /* held whole, or nothing to ask */
	if (n - known > max)
		n = known + max;
	l->cols = n - known;
	if (!names_of(d, m, q->iso, l->keys[known], &gg, &go, &id)) {
		l->state = LK_NO_GEN; /* its organization's generation is being read */
		return;
	}
	l->model = m;
	l->iso = q->iso;
	l->first = known;
	l->outstanding = 0;
	l->epoch = S->epoch;
	l->state = LK_READING;
	shared_ns(ns, q->iso);
	for (j = known; j < n; j++) {
		char name[SHARED_NAME_MAX];
		uint32_t k = j - known;

		l->found[k] = 0;
		/* The organization's generations were read above: the same for every column. */
		id = shared_object_id(q->iso, l->keys[j], gg, go, S->layout[m]);
		shared_record_name(name, id);
		if (shared_get(S->s, ns, name, l->buf + (size_t)k * SHARED_HDR_LEN, SHARED_HDR_LEN,
			       cookie(CK_LOOKUP, (uint32_t)(l - S->lk), k)) != 0) {
			S->st.lookups_busy++;
			break;
		}
		l->outstanding++;
		l->n = k + 1;
	}
	S->st.lookups++;
	S->st.lookup_cols += l->n;
	if (l->outstanding == 0)
		l->state = LK_DONE;
}

static void
lookup_issue(struct drv *d, uint32_t req, uint64_t now)
{
	uint16_t m;

	for (m = 0; m < kvss.cfg.driver.pc.num_models; m++)
		lookup_one(d, req, m, now, false);
}

/*
 * A column first used at wall-clock @p first_wall past organization
 * @p iso's TTLs at @p now (its last use, unknown here, taken as its first):
 * for what the shards' disks and the shared level kept from before this
 * run, whose age the library's clock (from this run's start) cannot say.
 */
bool
drv_expired_wall(uint64_t iso, uint64_t first_wall, uint64_t now)
{
	const struct prefixcache_params *pp = &kvss.cfg.driver.pc;
	uint64_t tl = pp->ttl_last_ns, tf = pp->ttl_first_ns, age;
	uint16_t i;

	for (i = 0; i < kvss.cfg.driver.num_orgs; i++) {
		const struct kvss_org_ttl *o = &kvss.cfg.driver.org[i];

		if (proto_ref_isolation_id(o->name, strlen(o->name)) == iso) {
			tl = o->ttl_last_ns ? o->ttl_last_ns : tl;
			tf = o->ttl_first_ns ? o->ttl_first_ns : tf;
		}
	}
	age = now > first_wall ? now - first_wall : 0;
	return (tf && age >= tf) || (tl && age >= tl);
}

static void
lookup_done(struct drv *d, uint32_t slot, uint32_t k, int status, uint32_t len, uint64_t now)
{
	struct drv_shl *S = d->shl;
	struct sh_lookup *l = &S->lk[slot];
	struct shared_hdr h, want;
	enum shared_bad why;
	uint32_t gg, go, j;
	uint64_t id;

	/* A slot is not reused while it has reads in flight: this is its lookup's. */
	if (l->outstanding > 0 && --l->outstanding == 0 && l->epoch == S->epoch)
		note_level(S, now - l->sent_ns); /* its request waiting for it or not */
	if (l->state != LK_READING || l->epoch != S->epoch || k >= l->n) {
		S->st.lookup_late_cols++; /* its request started without it, or a new generation */
		return;
	}
	if (l->outstanding == 0) {
		l->state = LK_DONE;
		note_lookup(d, now - l->sent_ns);
	}
	if (status == -ENOENT) {
		went_well(d);
		return;
	}
	/* A record longer than its header is a bad record, not the cluster's failure. */
	if (status != 0 && status != -EFBIG) {
		S->st.lookup_errors++;
		went_wrong(d, now);
		return;
	}
	went_well(d);
	j = l->first + k;
	if (!names_of(d, l->model, l->iso, l->keys[j], &gg, &go, &id))
		return;
	if (status == -EFBIG) {
		why = SHARED_BAD_TOO_BIG;
	} else {
		why = shared_obj_decode(l->buf + (size_t)k * SHARED_HDR_LEN, len, &h);
		if (why == SHARED_OK) {
			/* Everything but first use, which is the record's to say. */
			record_hdr(d, &want, l->model, l->iso, l->keys[j], j ? l->keys[j - 1] : l->iso,
				   h.first_use_ns, j * kvss.cfg.driver.pc.column,
				   kvss.cfg.driver.pc.column, gg, go, id);
			why = shared_hdr_match(&h, &want);
		}
		/* A first use in the future would never expire. */
		if (why == SHARED_OK)
			why = shared_hdr_times(&h, drv_wall_ns());
	}
	if (why != SHARED_OK) {
		S->st.records_bad++;
		S->st.bad[why]++;
		record_delete(d, l->iso, id); /* dropped from the shared level */
		return;
	}
	if (drv_expired_wall(l->iso, h.first_use_ns, drv_wall_ns())) {
		/* Past the organization's TTL by first use: never served from the
		 * shared level, by any replica (kvss-shared sweep deletes it). */
		S->st.found_expired++;
		return;
	}
	l->found[k] = 1;
	l->first_use[k] = h.first_use_ns;
	known_add(d, l->iso, l->keys[j]); /* its children may go down too */
	S->st.lookup_found_cols++;
}

/*
 * How long the wafer would take to compute @p cols columns (the adaptive
 * policy's prefill rate); UINT64_MAX when nothing is known to beat: the
 * policy is another, or no rate is set.
 */
static uint64_t
compute_ns(uint32_t cols)
{
	const struct kvss_config *c = &kvss.cfg;

	if (!kvss_policy_adaptive(c->driver.refill_policy) || c->driver.recompute_tokens_per_s == 0)
		return UINT64_MAX;
	return (uint64_t)cols * c->driver.pc.column * 1000000000ull / c->driver.recompute_tokens_per_s;
}

bool
drv_sh_request_ready(struct drv *d, uint32_t req, uint64_t now)
{
	struct drv_shl *S = d->shl;
	uint32_t ahead = kvss.cfg.shared.lookahead, j;
	uint16_t m;

	if (!S->on || kvss.cfg.driver.refill_policy == KVSS_POLICY_COMPUTE_ONLY)
		return true; /* the cache off: nothing to look up or wait for */
	if (S->next_issue < req)
		S->next_issue = req;
	/* The next ones, ahead of their start, once they have arrived:
	 * lookups take their time. */
	while (S->next_issue < d->nreq && S->next_issue < req + ahead &&
	       emu_arrived(d->emu, S->next_issue, now)) {
		lookup_issue(d, S->next_issue, now);
		S->next_issue++;
	}
	for (m = 0; m < kvss.cfg.driver.pc.num_models; m++) {
		struct sh_lookup *l = lk_of(d, req, m);
		bool late;

		if (l->req != req)
			continue;
		late = now - l->sent_ns >= (uint64_t)kvss.cfg.shared.deadline_ms * 1000000ull;
		if (!late && (l->state == LK_READING || l->state == LK_NO_GEN) && S->wait_req == req + 1 &&
		    now - S->wait_since >= compute_ns(l->cols)) {
			/* Its request has waited as long as computing what it
			 * looks up would take: whatever comes back now cannot
			 * beat computing it (refill_policy "adaptive"). */
			late = true;
			S->st.lookups_abandoned++;
			note_level(S, now - l->sent_ns); /* at least that */
		}
		if (!late && (l->state == LK_READING || l->state == LK_NO_GEN) && S->wait_req != req + 1 &&
		    S->level_ns >= compute_ns(l->cols)) {
			/* The level's lookups lately take longer than computing
			 * what this one looks up: not waited for at all (its
			 * answer still comes, and keeps the pace up to date; a
			 * level that is quick again is waited for again). */
			late = true;
			S->st.lookups_abandoned++;
		}
		if (l->state == LK_NO_GEN && !late)
			lookup_one(d, req, m, now, true); /* its generation may be known now */
		if (l->state == LK_NO_GEN && late) {
			S->st.lookups_no_generation++;
			l->state = LK_DONE;
		}
		if (l->state != LK_READING && l->state != LK_NO_GEN)
			continue;
		if (!late) {
			if (S->wait_req != req + 1) {
				S->wait_req = req + 1; /* this request's wait starts */
				S->wait_since = now;
			}
			return false; /* back soon: the request waits for it */
		}
		S->st.lookups_late++;
		note_lookup(d, now - l->sent_ns);
		l->state = LK_DONE; /* a miss past what came back */
	}
	/* Stage what was found, in token order from the first asked: parents first. */
	for (m = 0; m < kvss.cfg.driver.pc.num_models; m++) {
		struct sh_lookup *l = lk_of(d, req, m);
		uint32_t C = kvss.cfg.driver.pc.column;

		if (l->req != req || l->n == 0 || l->epoch != S->epoch)
			continue;
		for (j = 0; j < l->n && l->found[j]; j++) {
			uint32_t i = l->first + j;
			struct prefixcache_l2col c = {
				.key = l->keys[i], .parent = i ? l->keys[i - 1] : l->iso,
				.isolation_id = l->iso,
				.first_use_ns = l->first_use[j] > d->sink.wall_base_ns
							? l->first_use[j] - d->sink.wall_base_ns
							: 0,
				.start = i * C, .tokens = C};
			int rc;

			if (keyless_has(d, m, l->iso, c.key)) {
				/* Refused by key this generation: a miss, and what
				 * follows it (its parent not staged) too. */
				S->st.keyless_skipped++;
				break;
			}
			rc = prefixcache_shared_stage(d->pc, m, &c, now);

			if (rc == -ETIME)
				S->st.found_expired++;
			if (rc != 0 && rc != -EEXIST)
				break;
			if (rc == 0)
				S->st.staged_cols++;
		}
		l->n = 0;
	}
	if (S->wait_req == req + 1) {
		/* What the lookups cost this request: its start held back. */
		uint64_t w = now - S->wait_since;

		S->st.waits++;
		S->st.wait_us += w / 1000;
		if (S->nwait < SH_N(S->wait_ns))
			S->wait_ns[S->nwait++] = w;
		S->wait_req = 0;
	}
	S->st.started++;
	return true;
}

bool
drv_sh_name(struct drv *d, uint16_t m, const struct prefixcache_l2col *c, struct proto_l2col *o)
{
	uint32_t gg, go;
	uint64_t id;

	if (!names_of(d, m, c->isolation_id, c->key, &gg, &go, &id))
		return false;
	name_into(d, o, m, gg, go, id);
	return true;
}

/* ---- The shards' answers ------------------------------------------------------------- */

void
drv_sh_done(struct drv *d, struct drv_shard *sh, const struct proto_l2done *done)
{
	struct drv_shl *S = d->shl;
	uint16_t m = sh->model;

	if (done->status != 0 && (done->op == PROTO_L2OP_SH_DOWN ? S->st.down_failed : S->st.up_failed) < 5)
		fprintf(stderr, "kvss: driver: shard %u: shared level: %s of column %016" PRIx64
				" (cache %u) failed: %s\n", sh->ref->id, done->op == PROTO_L2OP_SH_DOWN ? "SH_DOWN" : "SH_UP",
			done->key, done->cache_id,
			proto_err_name(done->status) ? proto_err_name(done->status) : "?");

	if (done->op == PROTO_L2OP_SH_DOWN) {
		struct sh_pend *p = pend_find(d, m, done->isolation_id, done->key, false);

		if (done->status != 0) {
			S->st.down_failed++;
			if (p != NULL)
				pend_free(d, p); /* no record: its slices are swept */
			if (done->status == PROTO_E_SHARED_KEY && done->key != 0) {
				/* Another's slice kept under its name, sealed under
				 * a key this shard's store does not make (maybe
				 * newer): writing it again finds the same, and
				 * reading it here would be refused the same. */
				S->st.down_keyless++;
				keyless_add(d, m, done->isolation_id, done->key);
			}
			return;
		}
		if (p == NULL) {
			S->st.down_unmatched++; /* its column was given up (a generation, a failure) */
			return;
		}
		S->st.down_slices++;
		if (++p->got == p->need) {
			record_write(d, p);
			pend_free(d, p);
		}
		return;
	}
	/*
	 * op 4: a slice did not come up. Its tokens come as TOKEN_LOST: the
	 * column and what hangs on it go, as for any loss, and the model keeps
	 * the rest. A slice that is missing or fails its check will not come
	 * up for anyone: its record goes, so no replica finds the column again
	 * (until one writes it anew: its slices are then rewritten). A
	 * cluster that failed or was slow keeps the record: the next lookup
	 * may find it well.
	 */
	S->st.up_failed++;
	if (done->status == PROTO_E_SHARED_KEY && done->key != 0) {
		/* Sealed under a key the shard's store does not make: its record
		 * stays (another replica may open it), and this driver does not
		 * ask for it again until a generation changes (a reset). */
		S->st.up_keyless++;
		keyless_add(d, m, done->isolation_id, done->key);
		return;
	}
	if (done->status == PROTO_E_SHARED_BAD || done->status == PROTO_E_UNKNOWN_PROMPT) {
		uint64_t now = drv_now_ns(d, rte_rdtsc());
		uint64_t window = 3ull * kvss.cfg.shared.op_timeout_ms * 1000000ull;
		uint32_t gg, go;
		uint64_t id;

		if (done->status == PROTO_E_SHARED_BAD)
			S->st.slices_bad++;
		else
			S->st.slices_missing++;
		/*
		 * The record is named under the generations of now; the SH_UP
		 * was sent under those of then. Within a read's longest life
		 * (one op timeout queued, one in flight, and its way back) of a
		 * change, they may differ: the record named now may be another
		 * one, written well, and is left alone.
		 */
		if (S->gen_changed_ns != 0 && now - S->gen_changed_ns < window)
			S->st.up_failed_kept++;
		else if (names_of(d, m, done->isolation_id, done->key, &gg, &go, &id))
			record_delete(d, done->isolation_id, id);
	}
}

void
drv_sh_model_restart(struct drv *d, uint16_t m)
{
	struct drv_shl *S = d->shl;
	uint32_t i, n;

	if (!S->on)
		return;
	/* Its shards start a new epoch: what they were writing is not answered. */
	for (i = 0; i < SH_N(S->pend); i++)
		if (S->pend[i].used && S->pend[i].model == m) {
			pend_free(d, &S->pend[i]);
			S->st.down_restart++;
		}
	/* Queued whole columns of the old stream: their prompts are gone. */
	for (i = 0, n = S->nwhole; i < n; i++) {
		struct sh_whole u = S->whole[S->whole_head];

		S->whole_head = (S->whole_head + 1) % SH_WHOLE;
		S->nwhole--;
		if (u.model == m) {
			S->st.down_restart++;
			continue;
		}
		S->whole[(S->whole_head + S->nwhole) % SH_WHOLE] = u;
		S->nwhole++;
	}
}

void
drv_sh_absent(struct drv *d, uint64_t ns)
{
	struct drv_shl *S = d->shl;
	uint32_t i;

	if (S == NULL)
		return;
	if (S->busy_since != 0)
		S->busy_since += ns;
	/* A request waiting for its lookups has not waited the gap, nor have
	 * the lookups out taken it: neither the deadline, the give-up against
	 * computing, nor the level's pace (level_ns) counts it. */
	if (S->wait_req != 0)
		S->wait_since += ns;
	for (i = 0; i < S->nlk; i++)
		if (S->lk[i].outstanding > 0 || S->lk[i].state == LK_READING ||
		    S->lk[i].state == LK_NO_GEN)
			S->lk[i].sent_ns += ns;
}

bool
drv_sh_busy(struct drv *d, uint64_t now)
{
	struct drv_shl *S = d->shl;
	bool busy;

	if (!S->on)
		return false;
	busy = S->nwhole > 0 || S->npend > 0 || S->nrec > 0;
	if (!busy) {
		S->busy_since = 0;
		return false;
	}
	if (S->busy_since == 0)
		S->busy_since = now;
	/* An SH_DOWN takes up to three ops (a put, a read-back, a write over). */
	if (now - S->busy_since < 3ull * kvss.cfg.shared.op_timeout_ms * 1000000ull)
		return true;
	if (!S->busy_given_up) {
		S->busy_given_up = true;
		printf("kvss: driver: the shared level still owes answers after %u ms: the run ends "
		       "without them\n", 3 * kvss.cfg.shared.op_timeout_ms);
	}
	return false;
}

/* ---- The loop ----------------------------------------------------------------------------- */

void
drv_sh_poll(struct drv *d, uint64_t now)
{
	struct drv_shl *S = d->shl;
	struct shared_done dn[64];
	unsigned int n, i;
	uint32_t k;

	if (!S->on)
		return;
	flush_whole(d);
	n = shared_poll(S->s, dn, 64, 0);
	for (i = 0; i < n; i++) {
		enum ck_kind kind = (enum ck_kind)(dn[i].cookie >> 56);
		uint32_t a = (uint32_t)(dn[i].cookie >> 32) & 0xffffff, b = (uint32_t)dn[i].cookie;

		if (kind == CK_LOOKUP) {
			lookup_done(d, a, b, dn[i].status, dn[i].len, now);
		} else if (kind == CK_GEN) {
			gen_done(d, a, dn[i].status, dn[i].len, now);
		} else if (kind == CK_REC) {
			S->rec[a].used = false;
			S->nrec--;
			if (dn[i].status == 0 || dn[i].status == -EEXIST) {
				S->st.records_written++;
				went_well(d);
			} else {
				S->st.records_failed++;
				went_wrong(d, now);
			}
		}
	}
	if (now >= S->next_gen_ns) {
		S->next_gen_ns = now + (uint64_t)kvss.cfg.shared.generation_ms * 1000000ull;
		if (++S->keyless_rounds >= SH_KEYLESS_ROUNDS) {
			/* A shard that read its new store after the reset's bump
			 * opens what it refused: asked for again, at most once an
			 * interval of this many. */
			memset(S->keyless, 0, sizeof(S->keyless));
			S->keyless_rounds = 0;
		}
		if (!S->gen_reading)
			gen_read(d, -1);
		for (k = 0; k < S->norg; k++)
			if (!S->org[k].reading)
				gen_read(d, (int32_t)k);
	}
}

/* ---- Start and end ------------------------------------------------------------------------ */

/*
 * The evidence of the generations at start: a sample of the pool's records
 * (the first SH_EVIDENCE_RECORDS of a listing of at most SH_EVIDENCE_LIST
 * objects, in the listing's hash order: spread over every namespace),
 * each read and checked as a lookup checks one (header, checksum, its
 * namespace's organization, its name's object id, no time in the future).
 * A record is written only under generations its writer read, so one
 * written under a generation above what the object says now proves the
 * generation went backwards. *@p global: the highest global generation
 * they name; each organization's highest in S->floor. A sample: a pool
 * whose newer records are few may hide them (a running driver still never
 * goes down; kvss-shared sweep reads every record and keeps newer ones).
 */
#define SH_EVIDENCE_LIST 4096
#define SH_EVIDENCE_RECORDS 256

struct evidence {
	uint32_t listed, n;
	struct {
		char ns[SHARED_NS_MAX];
		char name[SHARED_NAME_MAX];
		uint64_t org, id;
	} r[SH_EVIDENCE_RECORDS];
};

static int
evidence_add(void *arg, const char *ns, const char *name)
{
	struct evidence *e = arg;
	uint64_t org, id;
	uint16_t shard, cache;

	if (++e->listed > SH_EVIDENCE_LIST)
		return 1;
	if (shared_parse_ns(ns, &org) != 0 || shared_parse_name(name, &id, &shard, &cache) != 0 ||
	    shard != 0xffff)
		return 0;
	snprintf(e->r[e->n].ns, SHARED_NS_MAX, "%s", ns);
	snprintf(e->r[e->n].name, SHARED_NAME_MAX, "%s", name);
	e->r[e->n].org = org;
	e->r[e->n].id = id;
	return ++e->n == SH_EVIDENCE_RECORDS ? 1 : 0;
}

static void
evidence_scan(struct drv *d, uint32_t *global)
{
	struct drv_shl *S = d->shl;
	struct evidence *e = calloc(1, sizeof(*e));
	uint8_t (*buf)[SHARED_HDR_LEN] = e != NULL ? malloc(SH_EVIDENCE_RECORDS * SHARED_HDR_LEN)
						   : NULL;
	uint32_t i, sent = 0, back = 0;
	uint64_t now = shared_wall_ns();

	*global = 0;
	if (e == NULL || buf == NULL || shared_list(S->s, NULL, evidence_add, e) < 0)
		goto out;
	for (i = 0; i < e->n; i++)
		sent += shared_get(S->s, e->r[i].ns, e->r[i].name, buf[i], SHARED_HDR_LEN, i) == 0;
	while (back < sent) {
		struct shared_done dn[64];
		unsigned int n = shared_poll(S->s, dn, 64, 1000), k;

		if (n == 0 && shared_inflight(S->s) == 0)
			break;
		for (k = 0; k < n; k++) {
			struct shared_hdr h;
			uint32_t j = (uint32_t)dn[k].cookie, f;

			back++;
			if (dn[k].status != 0 || j >= e->n ||
			    shared_record_check(buf[j], dn[k].len, e->r[j].org, e->r[j].id, now, &h) !=
				    SHARED_OK)
				continue;
			if (h.gen_global > *global)
				*global = h.gen_global;
			for (f = 0; f < S->nfloor && S->floor[f].iso != h.org; f++)
				;
			if (f == S->nfloor && S->nfloor < SH_FLOORS)
				S->floor[S->nfloor++] = (struct sh_floor){.iso = h.org};
			if (f < S->nfloor && h.gen_org > S->floor[f].gen)
				S->floor[f].gen = h.gen_org;
		}
	}
out:
	free(buf);
	free(e);
}

/* The shared level is not used by this run: said, counted, the handle closed. */
static void __attribute__((format(printf, 2, 3)))
off_at_start(struct drv *d, const char *fmt, ...)
{
	struct drv_shl *S = d->shl;
	char why[400];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(why, sizeof(why), fmt, ap);
	va_end(ap);
	printf("kvss: driver: the shared level is NOT used by this replica: %s; it runs without "
	       "it ('kvss-shared gen --repair' sets the generation above every record's; then "
	       "restart it)\n", why);
	fflush(stdout);
	S->st.off_at_start = 1;
	shared_close(S->s);
	S->s = NULL;
}

int
drv_sh_open(struct drv *d, char *err, size_t errlen)
{
	struct drv_shl *S = calloc(1, sizeof(*S));
	const struct kvss_shared_cfg *c = &kvss.cfg.shared;
	struct shared_params p = {.conf = c->conf, .pool = c->pool, .client = c->client,
				  .op_timeout_ms = c->op_timeout_ms, .max_inflight = SH_INFLIGHT};
	uint32_t i, max = c->max_columns, seen;
	uint64_t ver;
	uint16_t m;
	char why[256];
	int rc;

	if (S == NULL) {
		snprintf(err, errlen, "shared: no memory");
		return -1;
	}
	d->shl = S; /* the level's state, off or on (every entry point reads it) */
	if (c->conf[0] == '\0')
		return 0;
	S->s = shared_open(&p, why, sizeof(why));
	if (S->s == NULL) {
		snprintf(err, errlen, "shared.conf %s: %s", c->conf, why);
		return -1;
	}
	rc = shared_gen_read_ver(S->s, "", &S->gen_global, &ver);
	if (rc == -EBADMSG || rc == -ERANGE) {
		off_at_start(d, "the global generation (object \"generation\" of pool %s) is %s",
			     c->pool, rc == -EBADMSG ? "not a number" : "4294967295, not a generation");
		return 0;
	}
	if (rc != 0 && rc != -ENOENT) {
		snprintf(err, errlen, "shared.conf %s: the generation of pool %s cannot be read: %s",
			 c->conf, c->pool, strerror(-rc));
		return -1;
	}
	evidence_scan(d, &seen);
	if (seen > S->gen_global) {
		off_at_start(d, "the global generation of pool %s reads %u%s, below generation %u that "
			     "records in the pool were written under: it went backwards (its object "
			     "removed or rewritten lower)", c->pool, S->gen_global,
			     rc == -ENOENT ? " (absent)" : "", seen);
		return 0;
	}
	for (m = 0; m < kvss.cfg.driver.pc.num_models; m++) {
		const struct prefixcache_model *pm = &kvss.cfg.driver.pc.model[m];
		uint32_t bpt[64];
		uint16_t k, cc, nb = 0;

		/* With or without a second tier: what is found is staged in the
		 * library's second-tier index either way (a model whose caches
		 * are not all "full", a sliding window say, has none: the
		 * library's lookups then ask nothing). */
		S->model_on[m] = true;
		for (k = 0; k < d->nshards[m]; k++)
			for (cc = 0; cc < pm->num_caches && nb < 64; cc++)
				bpt[nb++] = d->sh[d->first_shard[m] + k].ref->bytes_per_token[cc];
		S->layout[m] = shared_layout(m, kvss.cfg.driver.models[m].name, d->nshards[m],
					    kvss.cfg.driver.pc.column, nb, bpt);
	}
	S->nlk = c->lookahead * PREFIXCACHE_MAX_MODELS;
	S->lk = calloc(S->nlk, sizeof(*S->lk));
	if (S->lk == NULL)
		goto nomem;
	for (i = 0; i < S->nlk; i++) {
		S->lk[i].keys = calloc(max * 2 + 1, sizeof(uint64_t));
		S->lk[i].first_use = calloc(max, sizeof(uint64_t));
		S->lk[i].found = calloc(max, 1);
		S->lk[i].buf = malloc((size_t)max * SHARED_HDR_LEN);
		S->lk[i].req = UINT32_MAX;
		if (S->lk[i].keys == NULL || S->lk[i].first_use == NULL || S->lk[i].found == NULL ||
		    S->lk[i].buf == NULL)
			goto nomem;
	}
	S->on = true;
	printf("kvss: driver: the shared level: pool %s of %s as %s, generation %u, admit \"%s\"%s, "
	       "lookups %u ahead, deadline %u ms\n", c->pool, c->conf, c->client, S->gen_global,
	       c->admit == KVSS_SHARED_ADMIT_HIT ? "hit" : c->admit == KVSS_SHARED_ADMIT_ALL ? "all" : "l2",
	       c->write ? "" : " (read only: shared.write = false)", c->lookahead, c->deadline_ms);
	return 0;
nomem:
	snprintf(err, errlen, "shared: no memory for %u lookups", S->nlk);
	return -1;
}

void
drv_sh_close(struct drv *d)
{
	struct drv_shl *S = d->shl;
	uint32_t i;

	if (S == NULL)
		return; /* never opened */
	/* First: it waits for what is in flight, lookups' reads into S->lk's buffers among it. */
	shared_close(S->s);
	for (i = 0; S->lk != NULL && i < S->nlk; i++) {
		free(S->lk[i].keys);
		free(S->lk[i].first_use);
		free(S->lk[i].found);
		free(S->lk[i].buf);
	}
	free(S->lk);
	S->lk = NULL;
	free(S);
	d->shl = NULL;
}

const struct drv_sink_shared_ops drv_sh_sink_ops = {
	.down = drv_sh_down,
	.whole = drv_sh_whole,
	.name = drv_sh_name,
	.on = drv_sh_on,
};
