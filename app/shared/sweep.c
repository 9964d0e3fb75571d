/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * kvss-shared sweep: delete what no replica may read any more.
 *
 * A column is its record ("<object_id>.r", written last) and its slices
 * ("<object_id>.s<shard>.c<cache>"), all named by one object id, in its
 * organization's namespace. Only records are read (128 bytes each, checked
 * by shared_obj_decode() and against their name and namespace); a slice is
 * judged by its record:
 *
 *  - a record of another generation than the current global and
 *    organization's ones (an emergency reset since): deleted, with its
 *    slices;
 *  - with --ttl-first S, a record whose column was first used more than S
 *    seconds ago (the header's first use, wall clock): deleted, with its
 *    slices;
 *  - a record that fails its checks (a torn or forged object, another
 *    organization's in this namespace, a name that is not its id, an id
 *    that its key, generations and layout do not give, longer than a
 *    record, first used or written in the future past the clock
 *    skew allowed, SHARED_SKEW_NS): deleted; its slices become slices
 *    without a record;
 *  - a record of a newer generation than the one read (the generation
 *    object removed or rewritten lower since it was written: it went
 *    backwards): kept with its slices, said, and the exit status is 1
 *    (kvss-shared gen --repair sets the generation above it);
 *  - a record with fewer slices than its model has shards times caches (a
 *    slice removed, or lost with its OSDs): no reader can bring its column
 *    up, so it is deleted, with the slices it has, once written longer ago
 *    than the grace (a listing taken while it was written may have missed
 *    a slice written just before it);
 *  - a slice without a record: deleted once older than the grace (the
 *    OSD's modification time; slices are written before their record, so
 *    a young one may be a column being written).
 *
 * The record goes first, so a column disappears for readers at once.
 * Whatever is not named like ours (and the generation objects) is left
 * alone and counted. A namespace whose generation cannot be read is
 * skipped (its objects cannot be judged) and the exit status is 1.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kvss_shared.h"

#define DEPTH 16

/* From V_STALE on, deleted. */
enum verdict { V_UNKNOWN = 0, V_LIVE, V_NEWER, V_STALE, V_EXPIRED, V_INCOMPLETE, V_CORRUPT };

struct rec {
	uint64_t object_id;
	uint32_t obj; /* index in the listing */
	enum verdict v;
	uint32_t need, have; /* live: slices its model writes (shards x caches), listed */
	uint64_t written_ns;
	uint64_t first_use_ns; /* live: what the shares order by */
	uint64_t key, parent;  /* live: what hangs on what, for the shares */
	uint32_t layout, tokens;
};

struct tally {
	uint64_t namespaces, orgs, skipped_ns;
	uint64_t live, newer, stale, expired, incomplete, corrupt, unreadable;
	uint64_t bad[SHARED_BAD_COUNT];
	uint32_t newest_global, newest_org; /* the highest generations of newer records */
	uint64_t slices_live, slices_newer, slices_dropped, orphans_old, orphans_young, orphans_unknown;
	uint64_t not_ours;
	uint64_t deleted, delete_failed;
	struct ks_lives lives; /* with shares: every live column, for shares_apply */
	bool lives_short;      /* out of memory collecting them: no column deleted for room */
	bool shares_done, shares_failed;
	uint64_t share_before, share_cols[3], share_toks[3]; /* by enum ks_victim */
};

static int
by_id(const void *a, const void *b)
{
	const struct rec *x = a, *y = b;

	return x->object_id < y->object_id ? -1 : x->object_id > y->object_id;
}

static void
say(const struct ks_sweep_opts *o, const struct ks_obj *x, const char *why)
{
	char ns[KS_SAFE_LEN], name[KS_SAFE_LEN];

	if (o->verbose)
		printf("  %s %s/%s: %s\n", o->dry_run ? "would delete" : "delete",
		       ks_safe(x->ns, ns, sizeof(ns)), ks_safe(x->name, name, sizeof(name)), why);
}

/*
 * Read the 128-byte headers of the listed objects l->v[idx[0..n)] at DEPTH
 * in flight, and give each to @p fn (its place in @p idx, the GET's status,
 * the bytes read), in the order they come back. A GET the library refuses
 * is given with the status it returned.
 */
typedef void (*hdr_fn)(void *arg, uint32_t i, int status, const uint8_t *buf, uint32_t len);

static void
read_hdrs(struct shared *s, const struct ks_list *l, const uint32_t *idx, uint32_t n,
	  uint8_t (*bufs)[SHARED_HDR_LEN], hdr_fn fn, void *arg)
{
	struct shared_done d[DEPTH];
	uint32_t next = 0, done = 0, slot_of[DEPTH], freeslot[DEPTH], nfree = DEPTH, i;

	for (i = 0; i < DEPTH; i++)
		freeslot[i] = i;
	while (done < n) {
		while (next < n && nfree > 0) {
			const struct ks_obj *x = &l->v[idx[next]];
			uint32_t slot = freeslot[--nfree];
			int rc = shared_get(s, x->ns, x->name, bufs[slot], SHARED_HDR_LEN, slot);

			slot_of[slot] = next;
			if (rc < 0) {
				freeslot[nfree++] = slot;
				fn(arg, next, rc, NULL, 0);
				done++;
			}
			next++;
		}
		if (done >= n)
			break;
		unsigned int got = shared_poll(s, d, DEPTH, 1000), k;

		for (k = 0; k < got; k++) {
			uint32_t slot = (uint32_t)d[k].cookie;

			freeslot[nfree++] = slot;
			done++;
			fn(arg, slot_of[slot], d[k].status, bufs[slot], d[k].len);
		}
	}
}

struct judge {
	const struct ks_list *l;
	struct rec *recs;
	uint32_t gen_global, gen_org;
	uint64_t now, ttl_ns;
	struct tally *t;
};

/* One record's header back: its verdict. */
static void
judge_one(void *arg, uint32_t i, int status, const uint8_t *buf, uint32_t len)
{
	struct judge *j = arg;
	struct rec *r = &j->recs[i];
	const struct ks_obj *x = &j->l->v[r->obj];
	struct tally *t = j->t;
	struct shared_hdr h;
	enum shared_bad why;

	if (status == -ENOENT) { /* deleted since the listing */
		r->v = V_UNKNOWN;
		return;
	}
	if (status == -EFBIG) { /* a record has no payload */
		r->v = V_CORRUPT;
		t->bad[SHARED_BAD_TOO_BIG]++;
		t->corrupt++;
		return;
	}
	if (status != 0) {
		r->v = V_UNKNOWN;
		t->unreadable++;
		return;
	}
	why = shared_record_check(buf, len, x->org, x->object_id, j->now, &h);
	/* Its id must be the one its fields give, as a lookup derives it: one
	 * that is not is found by no lookup, and would pass for the column of
	 * its key that is (the shares would take that one for a leaf). */
	if (why == SHARED_OK &&
	    h.object_id != shared_object_id(h.org, h.key, h.gen_global, h.gen_org, h.layout))
		why = SHARED_BAD_IDENTITY;
	if (why != SHARED_OK) {
		r->v = V_CORRUPT;
		t->bad[why]++;
		t->corrupt++;
	} else if (h.gen_global > j->gen_global || h.gen_org > j->gen_org) {
		/* Written under a generation above the one read: the
		 * generation went backwards. Never deleted as older. */
		r->v = V_NEWER;
		t->newer++;
		if (h.gen_global > t->newest_global)
			t->newest_global = h.gen_global;
		if (h.gen_org > t->newest_org)
			t->newest_org = h.gen_org;
	} else if (h.gen_global != j->gen_global || h.gen_org != j->gen_org) {
		r->v = V_STALE;
		t->stale++;
	} else if (j->ttl_ns != 0 && h.first_use_ns < j->now && j->now - h.first_use_ns > j->ttl_ns) {
		r->v = V_EXPIRED;
		t->expired++;
	} else {
		r->v = V_LIVE;
		r->need = (uint32_t)h.shard * h.cache;
		r->written_ns = h.written_ns;
		r->first_use_ns = h.first_use_ns;
		r->key = h.key;
		r->parent = h.parent;
		r->layout = h.layout;
		r->tokens = h.tokens;
		t->live++;
	}
}

/* Read and judge the records recs[0..n) of one organization's namespace (@p idx: room for n). */
static void
judge_records(struct shared *s, const struct ks_list *l, struct rec *recs, uint32_t n,
	      uint32_t gen_global, uint32_t gen_org, const struct ks_sweep_opts *o,
	      struct tally *t, uint8_t (*bufs)[SHARED_HDR_LEN], uint32_t *idx)
{
	struct judge j = {.l = l, .recs = recs, .gen_global = gen_global, .gen_org = gen_org,
			  .now = shared_wall_ns(), .ttl_ns = o->ttl_first_s * 1000000000u, .t = t};
	uint32_t i;

	for (i = 0; i < n; i++)
		idx[i] = recs[i].obj;
	read_hdrs(s, l, idx, n, bufs, judge_one, &j);
}

/* Delete the listed objects dels[0..n) at DEPTH in flight. */
static void
delete_all(struct shared *s, const struct ks_list *l, const uint32_t *dels, uint32_t n,
	   struct tally *t)
{
	struct shared_done d[DEPTH];
	uint32_t next = 0, done = 0;

	while (done < n) {
		while (next < n && shared_inflight(s) < DEPTH) {
			const struct ks_obj *x = &l->v[dels[next]];

			if (shared_del(s, x->ns, x->name, next) < 0) {
				t->delete_failed++;
				done++;
			}
			next++;
		}
		unsigned int got = shared_poll(s, d, DEPTH, 1000), k;

		for (k = 0; k < got; k++) {
			done++;
			if (d[k].status == 0 || d[k].status == -ENOENT)
				t->deleted++;
			else
				t->delete_failed++;
		}
	}
}

static const char *
verdict_text(enum verdict v)
{
	switch (v) {
	case V_STALE:
		return "of an older generation";
	case V_EXPIRED:
		return "past its first-use TTL";
	case V_INCOMPLETE:
		return "a slice of its column is missing";
	case V_CORRUPT:
		return "corrupt";
	default:
		return "?";
	}
}

/*
 * Live records of l->v[a..b) whose slices are not all listed, written
 * longer ago than the grace: V_INCOMPLETE (a reader would lose the column).
 */
static void
mark_incomplete(const struct ks_list *l, uint32_t a, uint32_t b, struct rec *recs, uint32_t nrec,
		const struct ks_sweep_opts *o, struct tally *t)
{
	uint64_t now = shared_wall_ns(), grace_ns = o->grace_s * 1000000000ull;
	uint32_t i;

	for (i = a; i < b; i++) {
		struct rec key = {.object_id = l->v[i].object_id}, *r;

		if (l->v[i].kind != SHARED_SLICE)
			continue;
		r = bsearch(&key, recs, nrec, sizeof(*recs), by_id);
		if (r != NULL && r->v == V_LIVE)
			r->have++;
	}
	for (i = 0; i < nrec; i++) {
		struct rec *r = &recs[i];

		if (r->v != V_LIVE || r->have >= r->need)
			continue;
		if (r->written_ns >= now || now - r->written_ns < grace_ns)
			continue; /* young (or its writer's clock ahead): the listing may have missed a slice */
		r->v = V_INCOMPLETE;
		t->live--;
		t->incomplete++;
	}
}

/* One organization's namespace, l->v[a..b). Returns 0, or -1 when skipped. */
static int
sweep_ns(struct shared *s, const struct ks_list *l, uint32_t a, uint32_t b, uint32_t gen_global,
	 const struct ks_sweep_opts *o, struct tally *t, uint8_t (*bufs)[SHARED_HDR_LEN])
{
	struct rec *recs = NULL;
	uint32_t *dels = NULL, nrec = 0, ndel = 0, i, gen_org;
	int64_t now = (int64_t)time(NULL);
	char label[KS_SAFE_LEN];
	int rc = shared_gen_read(s, l->v[a].ns, &gen_org);

	if (rc < 0) {
		fprintf(stderr, "kvss-shared sweep: namespace %s skipped: its generation: %s\n",
			ks_ns_label(l->v[a].ns, label, sizeof(label)), ks_gen_why(rc));
		t->skipped_ns++;
		return -1;
	}
	recs = calloc(b - a, sizeof(*recs));
	dels = calloc(b - a, sizeof(*dels));
	if (recs == NULL || dels == NULL) {
		free(recs);
		free(dels);
		fprintf(stderr, "kvss-shared sweep: out of memory\n");
		t->skipped_ns++;
		return -1;
	}
	for (i = a; i < b; i++) {
		if (l->v[i].kind == SHARED_RECORD) {
			recs[nrec].object_id = l->v[i].object_id;
			recs[nrec].obj = i;
			nrec++;
		}
	}
	judge_records(s, l, recs, nrec, gen_global, gen_org, o, t, bufs, dels); /* dels: its scratch */
	qsort(recs, nrec, sizeof(*recs), by_id);
	mark_incomplete(l, a, b, recs, nrec, o, t);

	/* Records first: a column disappears for readers with its record. */
	for (i = 0; i < nrec; i++) {
		if (recs[i].v >= V_STALE) {
			say(o, &l->v[recs[i].obj], verdict_text(recs[i].v));
			dels[ndel++] = recs[i].obj;
		}
	}
	for (i = a; i < b; i++) {
		const struct ks_obj *x = &l->v[i];
		struct rec key = { .object_id = x->object_id }, *r;
		uint64_t size;
		int64_t mtime;

		if (x->kind != SHARED_SLICE) {
			t->not_ours += x->kind == 0 && !x->gen_obj;
			continue;
		}
		r = bsearch(&key, recs, nrec, sizeof(*recs), by_id);
		if (r != NULL && r->v == V_LIVE) {
			t->slices_live++;
		} else if (r != NULL && r->v == V_NEWER) {
			t->slices_newer++; /* kept with their record */
		} else if (r != NULL && r->v >= V_STALE && r->v != V_CORRUPT) {
			t->slices_dropped++;
			say(o, x, "its column's record is dropped");
			dels[ndel++] = i;
		} else if (r != NULL && r->v == V_UNKNOWN) {
			t->orphans_unknown++; /* its record unread: kept */
		} else if (shared_stat(s, x->ns, x->name, &size, &mtime) != 0) {
			t->orphans_unknown++;
		} else if (now - mtime >= (int64_t)o->grace_s) {
			t->orphans_old++;
			say(o, x, "no record, older than the grace");
			dels[ndel++] = i;
		} else {
			t->orphans_young++;
		}
	}
	if (!o->dry_run)
		delete_all(s, l, dels, ndel, t);
	else
		t->deleted += ndel;
	/* What stays live, for the level's shares once every namespace is read. */
	for (i = 0; o->shares.capacity_tokens > 0 && i < nrec; i++) {
		const struct rec *r = &recs[i];
		struct ks_live x = {.org = l->v[r->obj].org, .object_id = r->object_id,
				    .key = r->key, .parent = r->parent, .layout = r->layout,
				    .first_use_ns = r->first_use_ns, .written_ns = r->written_ns,
				    .tokens = r->tokens, .obj = r->obj};

		if (r->v == V_LIVE && ks_lives_add(&t->lives, &x) != 0)
			t->lives_short = true;
	}
	free(recs);
	free(dels);
	return 0;
}

/*
 * The level's shares (shares.c): the live columns picked to go, each its
 * record and then its slices (named by the same object id in the same
 * namespace, so next to it in the listing's order: "<id>.r", "<id>.s..").
 */
static void
shares_apply(struct shared *s, const struct ks_list *l, const struct ks_sweep_opts *o,
	     struct tally *t)
{
	struct ks_lives *lv = &t->lives;
	uint64_t before = 0, cols[3] = {0}, toks[3] = {0};
	uint32_t *dels, ndel = 0, i, k;

	for (i = 0; i < lv->n; i++)
		before += lv->v[i].tokens;
	if (t->lives_short || ks_shares_pick(&o->shares, lv) != 0 ||
	    (dels = calloc(l->n ? l->n : 1, sizeof(*dels))) == NULL) {
		fprintf(stderr, "kvss-shared sweep: out of memory for the shares: no column "
				"deleted for room\n");
		t->shares_failed = true; /* said in the exit status */
		return;
	}
	for (i = 0; i < lv->n; i++) {
		const struct ks_live *x = &lv->v[i];
		const struct ks_obj *r = &l->v[x->obj];

		cols[x->victim]++;
		toks[x->victim] += x->tokens;
		if (x->victim == KS_KEPT)
			continue;
		say(o, r, x->victim == KS_OVER_CAP ? "its organization is above its cap"
						   : "the level is full and its organization is "
						     "above its guarantee");
		dels[ndel++] = x->obj;
	}
	/* Then the slices of those columns. */
	for (i = 0; i < lv->n; i++) {
		const struct ks_live *x = &lv->v[i];
		uint32_t a = x->obj, b = x->obj + 1;

		if (x->victim == KS_KEPT)
			continue;
		while (a > 0 && l->v[a - 1].object_id == x->object_id &&
		       strcmp(l->v[a - 1].ns, l->v[x->obj].ns) == 0)
			a--;
		while (b < l->n && l->v[b].object_id == x->object_id &&
		       strcmp(l->v[b].ns, l->v[x->obj].ns) == 0)
			b++;
		for (k = a; k < b; k++)
			if (l->v[k].kind == SHARED_SLICE) {
				say(o, &l->v[k], "its column goes for the shares");
				dels[ndel++] = k;
			}
	}
	if (!o->dry_run)
		delete_all(s, l, dels, ndel, t);
	else
		t->deleted += ndel;
	free(dels);
	t->shares_done = true;
	memcpy(t->share_cols, cols, sizeof(cols));
	memcpy(t->share_toks, toks, sizeof(toks));
	t->share_before = before;
}

/* What the shares took, in the sweep's report. */
static void
shares_say(const struct ks_sweep_opts *o, const struct tally *t)
{
	const struct ks_lives *lv = &t->lives;
	const uint64_t *cols = t->share_cols, *toks = t->share_toks;
	char label[KS_SAFE_LEN];
	uint32_t i, k;

	if (!t->shares_done)
		return;
	printf("  shares: capacity %" PRIu64 " tokens, %" PRIu64 " live in %" PRIu64
	       " columns of %u organizations; %s %" PRIu64 " columns (%" PRIu64 " tokens) above "
	       "a cap and %" PRIu64 " (%" PRIu64 " tokens) for room; %" PRIu64 " tokens left\n",
	       o->shares.capacity_tokens, t->share_before, (uint64_t)lv->n, lv->norg,
	       o->dry_run ? "would delete" : "deleting", cols[KS_OVER_CAP], toks[KS_OVER_CAP],
	       cols[KS_OVER_SHARE], toks[KS_OVER_SHARE], lv->total_tokens);
	if (lv->total_tokens > o->shares.capacity_tokens)
		printf("  shares: the level stays %" PRIu64 " tokens above its capacity: no "
		       "organization above its guarantee has a column to give (the guarantees of "
		       "the %u present sum to %" PRIu64 " tokens)\n",
		       lv->total_tokens - o->shares.capacity_tokens, lv->norg, lv->guaranteed_tokens);
	for (k = 0; o->verbose && k < lv->norg; k++) {
		const struct ks_org_use *u = &lv->org[k];
		const char *named = "";
		char ns[SHARED_NS_MAX];

		for (i = 0; i < o->shares.n; i++)
			if (o->shares.org[i].org == u->org)
				named = o->shares.org[i].label;
		shared_ns(ns, u->org);
		printf("  organization %s%s%s: %" PRIu64 " tokens left, guaranteed %" PRIu64
		       ", cap %" PRIu64 ", %" PRIu64 " columns (%" PRIu64 " tokens) %s\n",
		       ks_ns_label(ns, label, sizeof(label)), named[0] ? " " : "", named, u->tokens,
		       u->guaranteed, u->cap, u->deleted, u->deleted_tokens,
		       o->dry_run ? "would go" : "deleted");
	}
}

int
ks_sweep(struct shared *s, const struct ks_sweep_opts *o)
{
	struct tally t;
	struct ks_list l;
	uint8_t (*bufs)[SHARED_HDR_LEN];
	uint32_t gen_global, a, b, i;
	int rc;

	memset(&t, 0, sizeof(t));
	rc = shared_gen_read(s, "", &gen_global);
	if (rc < 0) {
		fprintf(stderr, "kvss-shared sweep: the global generation: %s; nothing deleted\n",
			ks_gen_why(rc));
		return KS_FAILED;
	}
	rc = ks_list_all(s, NULL, &l);
	if (rc < 0) {
		fprintf(stderr, "kvss-shared sweep: listing: %s; nothing deleted\n", strerror(-rc));
		return KS_FAILED;
	}
	bufs = malloc(DEPTH * sizeof(*bufs));
	if (bufs == NULL) {
		ks_list_free(&l);
		fprintf(stderr, "kvss-shared sweep: out of memory\n");
		return KS_FAILED;
	}
	for (a = 0; a < l.n; a = b) {
		for (b = a + 1; b < l.n && strcmp(l.v[b].ns, l.v[a].ns) == 0; b++)
			;
		t.namespaces++;
		if (!l.v[a].org_ns) {
			for (i = a; i < b; i++)
				t.not_ours += !(l.v[i].gen_obj && l.v[i].ns[0] == '\0');
			continue;
		}
		t.orgs++;
		sweep_ns(s, &l, a, b, gen_global, o, &t, bufs);
	}
	free(bufs);
	if (o->shares.capacity_tokens > 0)
		shares_apply(s, &l, o, &t);

	printf("sweep%s: global generation %u; %" PRIu64 " namespaces, %" PRIu64
	       " of organizations", o->dry_run ? " (dry run)" : "", gen_global, t.namespaces,
	       t.orgs);
	if (t.skipped_ns > 0)
		printf(" (%" PRIu64 " skipped: generation unreadable)", t.skipped_ns);
	printf("\n  records: %" PRIu64 " live, %" PRIu64 " of an older generation, %" PRIu64
	       " past the first-use TTL%s, %" PRIu64 " missing a slice, %" PRIu64 " corrupt",
	       t.live, t.stale, t.expired, o->ttl_first_s ? "" : " (no TTL given)", t.incomplete,
	       t.corrupt);
	if (t.corrupt > 0) {
		printf(" (");
		const char *sep = "";

		for (i = 1; i < SHARED_BAD_COUNT; i++) {
			if (t.bad[i] > 0) {
				printf("%s%s %" PRIu64, sep, shared_bad_name((enum shared_bad)i),
				       t.bad[i]);
				sep = ", ";
			}
		}
		printf(")");
	}
	printf(", %" PRIu64 " unreadable (kept)", t.unreadable);
	if (t.newer > 0)
		printf(", %" PRIu64 " of a NEWER generation (kept)", t.newer);
	printf("\n");
	printf("  slices: %" PRIu64 " of live columns, %" PRIu64 " of dropped columns, %" PRIu64
	       " without a record past the %" PRIu64 " s grace, %" PRIu64
	       " without a record younger (kept), %" PRIu64 " unjudged (kept)",
	       t.slices_live, t.slices_dropped, t.orphans_old, o->grace_s, t.orphans_young,
	       t.orphans_unknown);
	if (t.slices_newer > 0)
		printf(", %" PRIu64 " of newer columns (kept)", t.slices_newer);
	printf("\n");
	printf("  not kvss's: %" PRIu64 " objects (kept)\n", t.not_ours);
	shares_say(o, &t);
	ks_lives_free(&t.lives);
	printf("  %s %" PRIu64 " objects", o->dry_run ? "would delete" : "deleted", t.deleted);
	if (t.delete_failed > 0)
		printf(", %" PRIu64 " deletes failed", t.delete_failed);
	printf("\n");
	ks_list_free(&l);
	if (t.newer > 0)
		fprintf(stderr, "kvss-shared sweep: %" PRIu64 " records were written under a generation "
				"above the one read (global up to %u, an organization's up to %u): the "
				"generation went backwards (its object removed or rewritten lower); they are "
				"kept; 'kvss-shared gen --repair' sets it above them\n",
			t.newer, t.newest_global, t.newest_org);
	return t.skipped_ns > 0 || t.delete_failed > 0 || t.unreadable > 0 || t.newer > 0 ||
			       t.shares_failed
		       ? KS_FAILED : KS_OK;
}

/* One record's header back: evidence of the generations it was written under. */
struct gens_read {
	const struct ks_list *l;
	const uint32_t *idx;
	uint64_t now;
	struct ks_gens *g;
};

static void
gens_one(void *arg, uint32_t i, int status, const uint8_t *buf, uint32_t len)
{
	struct gens_read *r = arg;
	const struct ks_obj *x = &r->l->v[r->idx[i]];
	struct ks_gens *g = r->g;
	struct shared_hdr h;

	if (status != 0) {
		/* Gone since the listing, or longer than a record (a bad
		 * record, which sweep deletes): no evidence either way. */
		g->unreadable += status != -ENOENT && status != -EFBIG;
		return;
	}
	/* Only what passes every check of a record counts as evidence, its
	 * id the one its fields give among them. */
	if (shared_record_check(buf, len, x->org, x->object_id, r->now, &h) != SHARED_OK ||
	    h.object_id != shared_object_id(h.org, h.key, h.gen_global, h.gen_org, h.layout))
		return;
	g->records++;
	if (h.gen_global > g->max_global)
		g->max_global = h.gen_global;
	if (h.gen_org > g->max_org)
		g->max_org = h.gen_org;
}

int
ks_record_gens(struct shared *s, const char *ns, struct ks_gens *g)
{
	struct ks_list l;
	uint8_t (*bufs)[SHARED_HDR_LEN];
	uint32_t *idx, n = 0, i;
	struct gens_read r = {.now = shared_wall_ns(), .g = g};
	int rc;

	memset(g, 0, sizeof(*g));
	rc = ks_list_all(s, ns, &l);
	if (rc < 0)
		return rc;
	bufs = malloc(DEPTH * sizeof(*bufs));
	idx = malloc((l.n ? l.n : 1) * sizeof(*idx));
	if (bufs == NULL || idx == NULL) {
		free(bufs);
		free(idx);
		ks_list_free(&l);
		return -ENOMEM;
	}
	for (i = 0; i < l.n; i++)
		if (l.v[i].kind == SHARED_RECORD && l.v[i].org_ns)
			idx[n++] = i;
	r.l = &l;
	r.idx = idx;
	read_hdrs(s, &l, idx, n, bufs, gens_one, &r);
	free(idx);
	free(bufs);
	ks_list_free(&l);
	return 0;
}
