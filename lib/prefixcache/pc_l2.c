/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The second tier (pc_priv.h): each shard's local disk behind its
 * DRAM, driven by the driver like DRAM, whose every column the driver
 * knows. A column the policy frees goes down when L2 admits it (l2_down,
 * before the DELETE that frees its DRAM); L2 frees its least recent
 * columns for room (l2_del). A lookup that ends in DRAM goes on in L2;
 * the columns it finds there come up into the sequence's own prompt as a
 * batch of their own (l2_up: an EVICT whose bytes the shard reads from its
 * L2), and the refill brings them with the rest of the hit. A column is in
 * one tier at most: moved, never copied.
 *
 * Only for models whose caches are all full attention, one group: a
 * sliding window's column means nothing without the window's glue, so a
 * model with a window stays DRAM-only.
 */
#include "pc_priv.h"

bool
pc_l2_on(const struct prefixcache *pc, uint16_t mi)
{
	const struct pc_model *m = &pc->m[mi];

	/* A second tier, or the shared level's staging alone (DRAM, then the
	 * shared level: nothing goes down, what is staged comes up). */
	return (m->p.l2_capacity_tokens > 0 || pc->p.shared_staged > 0) && m->ngroups == 1 &&
	       m->g[0].rule == PREFIXCACHE_FULL && pc->sink.l2_down != NULL &&
	       pc->sink.l2_up != NULL && pc->sink.l2_del != NULL;
}

int
pc_l2_init(struct prefixcache *pc)
{
	uint64_t cols = 0;
	uint32_t k, n = 16;
	uint16_t mi;

	pc->l2free = NIL;
	for (mi = 0; mi < pc->p.num_models; mi++) {
		struct pc_group *g = &pc->m[mi].g[0];

		ilist_init(&g->l2_lru);
		if (!pc_l2_on(pc, mi))
			continue;
		g->l2_capacity = pc->m[mi].p.l2_capacity_tokens;
		cols += g->l2_capacity / pc->p.column + 1;
	}
	if (cols == 0)
		return 0;
	cols += pc->p.shared_staged;
	if (cols > UINT32_MAX / 4)
		return -EINVAL;
	if (pc->p.shared_staged > 0) {
		pc->staged = calloc(pc->p.shared_staged, sizeof(*pc->staged));
		if (pc->staged == NULL)
			return -ENOMEM;
	}
	pc->l2 = calloc(cols, sizeof(*pc->l2));
	while (n < cols)
		n <<= 1;
	pc->l2bucket = malloc(sizeof(uint32_t) * n);
	if (pc->l2 == NULL || pc->l2bucket == NULL)
		return -ENOMEM;
	pc->l2mask = n - 1;
	for (k = 0; k < n; k++)
		pc->l2bucket[k] = NIL;
	pc->l2cap = (uint32_t)cols;
	for (k = pc->l2cap; k-- > 0;) {
		pc->l2[k].hnext = pc->l2free;
		pc->l2free = k;
	}
	return 0;
}

void
pc_l2_fini(struct prefixcache *pc)
{
	free(pc->l2);
	free(pc->l2bucket);
	free(pc->l2path);
	free(pc->upcols);
	free(pc->upsel);
	free(pc->upruns);
	free(pc->staged);
}

static inline uint32_t
l2_bucket(const struct prefixcache *pc, uint8_t gid, uint32_t org, uint64_t hash)
{
	return (uint32_t)mix64(hash ^ ((uint64_t)org << 8 | gid) * 0x9E3779B97F4A7C15ULL) &
	       pc->l2mask;
}

static uint32_t
l2_find(const struct prefixcache *pc, uint8_t gid, uint32_t org, uint64_t hash)
{
	uint32_t i;

	for (i = pc->l2bucket[l2_bucket(pc, gid, org, hash)]; i != NIL; i = pc->l2[i].hnext)
		if (pc->l2[i].hash == hash && pc->l2[i].org == org && pc->l2[i].gid == gid)
			return i;
	return NIL;
}

/*
 * Unlink record @i from the index and the LRU: no lookup finds it, no room
 * making takes it. It still counts as stored: the shards hold it until
 * they are told to let it go (l2_release).
 */
static void
l2_detach(struct prefixcache *pc, uint32_t i)
{
	struct pc_l2e *e = &pc->l2[i];
	struct pc_group *g = group_of(pc, e->gid);
	uint32_t *p = &pc->l2bucket[l2_bucket(pc, e->gid, e->org, e->hash)];

	while (*p != i)
		p = &pc->l2[*p].hnext;
	*p = e->hnext;
	if (!e->shared)
		ilist_unlink(&g->l2_lru, ILIST_LINKS(pc->l2, lru), i);
}

static void
l2_release(struct prefixcache *pc, uint32_t i)
{
	struct pc_l2e *e = &pc->l2[i];
	struct pc_group *g = group_of(pc, e->gid);

	if (!e->shared) {
		g->l2_stored -= e->length - e->start;
		pc->org[e->org].l2_stored[e->gid] -= e->length - e->start;
		pc->st.l2_stored_tokens -= e->length - e->start;
	}
	pc->l2[i].length = 0;
	pc->l2[i].shared = 0;
	pc->l2[i].hnext = pc->l2free;
	pc->l2free = i;
}

/* The shards let column @i go (every cache of its group), after batch @ec. */
static void
l2_tell_del(struct prefixcache *pc, const struct pc_l2e *e, uint64_t ec)
{
	const struct pc_group *g = group_of(pc, e->gid);
	uint16_t c;

	if (e->shared)
		return; /* on no shard's disk: nothing to let go */
	for (c = 0; c < g->ncaches; c++)
		pc->sink.l2_del(pc->sink.arg, e->gid / MAX_GROUPS, g->cache[c], e->hash,
				pc->org[e->org].isolation_id, ec);
}

/* L2 lets column @i go for room or expiry, at once. */
static void
l2_drop(struct prefixcache *pc, uint32_t i)
{
	struct pc_l2e *e = &pc->l2[i];

	l2_detach(pc, i);
	l2_tell_del(pc, e, 0);
	if (!e->shared)
		pc->st.l2_deleted_tokens += e->length - e->start;
	l2_release(pc, i);
}

/*
 * Room in group @p g (@p gid) of the second tier for @p n tokens of
 * organization @p org: the LRU's cold end goes; with disk shares, only the
 * columns of organizations above their share (round 0), then @p org's own
 * (round 1), or only its own when it is past its cap. False when no more
 * can go.
 */
static bool
l2_make_room(struct prefixcache *pc, struct pc_group *g, uint8_t gid, uint32_t org, uint32_t n)
{
	struct pc_org *o = &pc->org[org];
	uint64_t cap = o->l2_cap >= 1 ? g->l2_capacity : (uint64_t)(o->l2_cap * (double)g->l2_capacity);

	if (!pc->l2_shares_on) {
		while (g->l2_stored + n > g->l2_capacity && g->l2_lru.tail != NIL)
			l2_drop(pc, g->l2_lru.tail);
		return true;
	}
	while (g->l2_stored + n > g->l2_capacity || o->l2_stored[gid] + n > cap) {
		bool over_cap = o->l2_stored[gid] + n > cap;
		uint32_t i = NIL, seen;
		int round;

		for (round = 0; round < (over_cap ? 1 : 2) && i == NIL; round++)
			for (i = g->l2_lru.tail, seen = 0; i != NIL && seen < 4096;
			     i = ilist_prev(ILIST_LINKS(pc->l2, lru), i), seen++) {
				const struct pc_l2e *v = &pc->l2[i];
				const struct pc_org *vo = &pc->org[v->org];

				if (over_cap || round == 1 ? v->org == org
				    : vo->l2_stored[gid] > (uint64_t)(vo->l2_share * (double)g->l2_capacity))
					break;
			}
		if (i == NIL)
			return false;
		if (pc->l2[i].org != org)
			pc->org[pc->l2[i].org].st.l2_yielded++;
		l2_drop(pc, i);
	}
	return true;
}

void
pc_l2_demote(struct prefixcache *pc, uint32_t i)
{
	const struct pc_entry *e = &pc->e[i];
	uint16_t mi = e->gid / MAX_GROUPS;
	struct pc_group *g = group_of(pc, e->gid);
	uint32_t n = e->length - e->start, k;
	uint64_t parent;
	uint16_t c;

	if (!pc_l2_on(pc, mi) || n > g->l2_capacity ||
	    (pc->m[mi].p.l2_admit == PREFIXCACHE_L2_SEEN2 && e->hits == 0) ||
	    (pc->m[mi].p.l2_admit == PREFIXCACHE_L2_SHORT && e->hits == 0 && !e->brief))
		return;
	k = l2_find(pc, e->gid, e->org, e->hash);
	if (k != NIL)
		l2_drop(pc, k); /* an older copy: this one replaces it */
	/* No room left (but columns on their way up, or other organizations'
	 * within their share): this one is deleted, not kept. */
	if (!l2_make_room(pc, g, e->gid, e->org, n) || g->l2_stored + n > g->l2_capacity ||
	    (k = pc->l2free) == NIL)
		return;
	pc->l2free = pc->l2[k].hnext;
	parent = e->parent != NIL ? pc->e[e->parent].hash : pc->org[e->org].isolation_id;
	pc->l2[k] = (struct pc_l2e){.hash = e->hash, .parent = parent, .org = e->org,
				    .start = e->start, .length = e->length,
				    .first_used = e->first_used, .last_used = e->last_used,
				    .gid = e->gid, .pending = pc->p.l2_confirm};
	{
		uint32_t b = l2_bucket(pc, e->gid, e->org, e->hash);

		pc->l2[k].hnext = pc->l2bucket[b];
		pc->l2bucket[b] = k;
	}
	ilist_push_head(&g->l2_lru, ILIST_LINKS(pc->l2, lru), k);
	g->l2_stored += n;
	pc->org[e->org].l2_stored[e->gid] += n;
	pc->st.l2_stored_tokens += n;
	pc->st.l2_down_tokens += n;
	for (c = 0; c < g->ncaches; c++) {
		struct prefixcache_l2col col = {
			.key = e->hash, .parent = parent,
			.isolation_id = pc->org[e->org].isolation_id,
			.prompt_id = pc->pr[e->prompt].id, .evict_count = e->evict_count,
			.first_use_ns = (uint64_t)e->first_used * TICK_NS, .start = e->start,
			.tokens = n, .cache_id = g->cache[c], .hits = e->hits};

		pc->sink.l2_down(pc->sink.arg, mi, &col);
	}
}

uint32_t
pc_l2_walk(struct prefixcache *pc, uint16_t mi, uint32_t org, const struct prefixcache_request *req,
	   uint32_t end, uint64_t h, uint32_t limit, uint64_t now)
{
	const struct pc_group *g = &pc->m[mi].g[0];
	const uint32_t C = pc->p.column;
	uint8_t gid = (uint8_t)(mi * MAX_GROUPS);
	struct ttl ttl = org_ttl(pc, org);
	uint32_t ne, n = 0, t = tick(now);

	if (!pc_l2_on(pc, mi))
		return 0;
	while ((ne = pc_next_end(g, C, end)) != 0 && ne <= limit) {
		uint32_t i;
		struct pc_entry probe;

		h = prefixcache_column_hash(h, req->tokens + end, ne - end);
		i = l2_find(pc, gid, org, h);
		if (i == NIL || pc->l2[i].length != ne || pc->l2[i].start != end || pc->l2[i].pending)
			break; /* not there, or not yet on every shard's disk */
		probe.first_used = pc->l2[i].first_used;
		probe.last_used = pc->l2[i].last_used;
		if (expired_t(&probe, ttl, t)) {
			l2_drop(pc, i); /* expired on disk too */
			break;
		}
		if (n == pc->l2pathcap &&
		    pc_grow((void **)&pc->l2path, &pc->l2pathcap, sizeof(uint32_t), n + 1) != 0)
			break;
		pc->l2path[n++] = i;
		end = ne;
	}
	return n;
}

void
pc_l2_forget(struct prefixcache *pc, uint8_t gid, uint32_t org, uint64_t hash)
{
	uint32_t i;

	if (pc->l2 == NULL || (i = l2_find(pc, gid, org, hash)) == NIL)
		return;
	l2_drop(pc, i); /* DRAM has it again (computed): one tier at most */
}

uint32_t
pc_l2_path_shared(const struct prefixcache *pc, uint32_t n)
{
	uint32_t k, t = 0;

	for (k = 0; k < n; k++) {
		const struct pc_l2e *e = &pc->l2[pc->l2path[k]];

		if (e->shared)
			t += e->length - e->start;
	}
	return t;
}

/* One level's line: latency + tokens x bytes per token / bandwidth. */
static uint64_t
line_ns(const struct prefixcache_model *p, uint64_t latency_ns, double bytes_per_ns, uint32_t tokens)
{
	uint64_t ns = latency_ns;

	if (bytes_per_ns > 0)
		ns += (uint64_t)((double)tokens * (double)p->refill_bytes_per_token / bytes_per_ns);
	return ns;
}

uint64_t
pc_l2_estimate_ns(const struct prefixcache *pc, uint16_t mi, uint32_t tokens, uint32_t shared)
{
	const struct prefixcache_model *p = &pc->m[mi].p;
	uint64_t ns = 0;

	if (shared > tokens)
		shared = tokens;
	/* The shards read both at once, each its own level, but a request
	 * waits for the batch whole: the two lines add (the learned ones
	 * take what a real overlap saves). */
	if (tokens > shared || shared == 0)
		ns += line_ns(p, p->l2_latency_ns, p->l2_bytes_per_ns, tokens - shared);
	if (shared > 0)
		ns += line_ns(p, p->shared_latency_ns, p->shared_bytes_per_ns, shared);
	return ns;
}

bool
pc_l2_worth(struct prefixcache *pc, uint16_t mi, uint32_t tokens, uint32_t shared, uint64_t wait_ns)
{
	struct pc_model *m = &pc->m[mi];
	const struct prefixcache_model *p = &m->p;
	/* The levels the hit's part comes from: probed at the shorter interval of theirs. */
	unsigned int lv = shared == 0					? 0
			  : shared >= tokens				? 1
			  : m->l2_probe_every[1] < m->l2_probe_every[0] ? 1
									: 0;
	uint32_t every = m->l2_probe_every[lv];

	if (p->recompute_tokens_per_ns <= 0 ||
	    (double)pc_l2_estimate_ns(pc, mi, tokens, shared) <
		(double)wait_ns + (double)tokens / p->recompute_tokens_per_ns) {
		m->l2_refused_run = 0;
		return true;
	}
	/* A probe, as dram_worth() takes one: the lines below DRAM are
	 * learned from what comes up, and a line slowed at the start (a
	 * disk busy with the first writes) would otherwise keep every hit
	 * there computed for the rest of the run. */
	if (++m->l2_refused_run >= every) {
		m->l2_refused_run = 0;
		pc->st.l2_refill_probes++;
		/* Fast probes whose refills never come back (failed, given
		 * up and timed out) end it: the slow count again. */
		if (every == PREFIXCACHE_PROBE_FAST &&
		    ++m->l2_fast_probes[lv] >= PREFIXCACHE_PROBE_FAST_MAX) {
			m->l2_probe_every[lv] = PREFIXCACHE_PROBE_EVERY;
			m->l2_fast_probes[lv] = 0;
		}
		return true;
	}
	pc->st.l2_recompute_faster_tokens += tokens;
	return false;
}

uint32_t
prefixcache_l2_probe_every(const struct prefixcache *pc, uint16_t model,
			   enum prefixcache_level level)
{
	if (model >= pc->p.num_models ||
	    (level != PREFIXCACHE_LEVEL_L2 && level != PREFIXCACHE_LEVEL_SHARED))
		return 0;
	return pc->m[model].l2_probe_every[level == PREFIXCACHE_LEVEL_SHARED];
}

int
prefixcache_l2_sampled(struct prefixcache *pc, uint16_t model, enum prefixcache_level level,
		       bool under_line)
{
	unsigned int lv = level == PREFIXCACHE_LEVEL_SHARED;

	if (model >= pc->p.num_models ||
	    (level != PREFIXCACHE_LEVEL_L2 && level != PREFIXCACHE_LEVEL_SHARED))
		return -EINVAL;
	pc->m[model].l2_probe_every[lv] =
	    under_line ? PREFIXCACHE_PROBE_FAST : PREFIXCACHE_PROBE_EVERY;
	pc->m[model].l2_fast_probes[lv] = 0;
	return 0;
}

uint32_t
pc_l2_promote(struct prefixcache *pc, struct prefixcache_seq *s, uint32_t n,
	      const struct prefixcache_request *req, uint64_t now, uint32_t *shared_up)
{
	struct pc_model *m = &pc->m[s->model];
	const struct pc_group *g = &m->g[0];
	uint32_t k, from = s->pos, to, c, nc = 0, up;

	*shared_up = 0;
	if (n == 0 || !s->g[0].caching)
		return 0;
	if (pc_grow((void **)&pc->upcols, &pc->upcap, sizeof(*pc->upcols), n * g->ncaches) != 0)
		return 0;
	/* Out of L2's index and LRU first: room made meanwhile cannot take them. */
	for (k = 0; k < n; k++) {
		const struct pc_l2e *e = &pc->l2[pc->l2path[k]];

		l2_detach(pc, pc->l2path[k]);
		for (c = 0; c < g->ncaches; c++)
			pc->upcols[nc++] = (struct prefixcache_l2col){
				.key = e->hash, .parent = e->parent,
				.isolation_id = pc->org[e->org].isolation_id, .prompt_id = s->prompt_id,
				.first_use_ns = (uint64_t)e->first_used * TICK_NS, .start = e->start,
				.tokens = e->length - e->start, .cache_id = g->cache[c],
				.shared = e->shared};
	}
	to = pc->l2[pc->l2path[n - 1]].length;
	/* A batch of their own: what is pending goes first. */
	pc_flush_model(pc, s->model);
	m->up = pc->upcols;
	m->nup = nc;
	for (k = from; k < to && s->g[0].caching; k++)
		prefixcache_token(pc, s, req->tokens[k], now);
	pc_flush_model(pc, s->model);
	m->up = NULL;
	m->nup = 0;
	/* What DRAM holds of them now: all, unless caching stopped for want of
	 * room (then none: the sequence computes them, its prompt went); and
	 * of those, the ones staged from the shared level. */
	up = s->g[0].caching && s->g[0].prompt != NIL && s->g[0].cur_end > from
		     ? s->g[0].cur_end - from
		     : 0;
	*shared_up = 0;
	for (k = 0; k < n; k++) {
		const struct pc_l2e *e = &pc->l2[pc->l2path[k]];

		if (e->shared && e->start < from + up)
			*shared_up += (e->length < from + up ? e->length : from + up) - e->start;
	}
	/* Read by the batches just sent (or not wanted any more): L2 lets them go after. */
	for (k = 0; k < n; k++) {
		l2_tell_del(pc, &pc->l2[pc->l2path[k]], m->batches_sent);
		l2_release(pc, pc->l2path[k]);
	}
	pc->st.l2_hit_tokens += up;
	pc->st.shared_hit_tokens += *shared_up;
	return up;
}

void
pc_l2_reset_model(struct prefixcache *pc, uint16_t mi)
{
	struct pc_group *g = &pc->m[mi].g[0];

	if (pc->l2 == NULL || !pc_l2_on(pc, mi))
		return;
	/* Forgotten, nothing sent: the shards' inventories say again what they hold. */
	while (g->l2_lru.tail != NIL) {
		uint32_t i = g->l2_lru.tail;

		l2_detach(pc, i);
		l2_release(pc, i);
	}
}

/* The oldest staged column goes (if it is still staged: not brought up, not expired). */
static void
staged_pop(struct prefixcache *pc)
{
	uint32_t j = pc->staged[pc->staged_head].i;

	if (pc->l2[j].shared && pc->l2[j].length != 0 &&
	    pc->l2[j].hash == pc->staged[pc->staged_head].hash) {
		l2_detach(pc, j);
		l2_release(pc, j);
	}
	pc->staged_head = (pc->staged_head + 1) % pc->p.shared_staged;
	pc->staged_n--;
}

/* ... when all are taken. */
static void
staged_make_room(struct prefixcache *pc)
{
	if (pc->staged_n == pc->p.shared_staged)
		staged_pop(pc);
}

/*
 * A column the driver did not send down itself goes into L2's index: taken
 * back from the shards' inventories (at the LRU's cold end, counted as
 * stored), or staged from the shared level (in no LRU, counted nowhere).
 * The checks are one: whole, on the grid, not known, its parent in a tier,
 * not expired; then room.
 */
static int
l2_place(struct prefixcache *pc, uint16_t mi, const struct prefixcache_l2col *c, uint64_t now,
	 bool staged)
{
	struct pc_group *g;
	struct pc_entry probe;
	uint8_t gid = (uint8_t)(mi * MAX_GROUPS);
	uint32_t org, k, b, n;

	if (mi >= pc->p.num_models || !pc_l2_on(pc, mi) || (staged && pc->staged == NULL))
		return -EINVAL;
	g = &pc->m[mi].g[0];
	n = c->tokens;
	if (n != pc->p.column || c->start % pc->p.column != 0)
		return -EINVAL; /* whole columns only, on the column grid */
	org = pc_org_get(pc, c->isolation_id);
	if (org == NIL)
		return -ENOMEM;
	if (l2_find(pc, gid, org, c->key) != NIL)
		return -EEXIST;
	/* Its parent: the organization's root, or a column before it, in either tier. */
	if (c->start == 0 ? c->parent != c->isolation_id
			  : (k = l2_find(pc, gid, org, c->parent)) == NIL
				    ? pc_entry_find(pc, gid, org, c->parent) == NIL
				    : pc->l2[k].length != c->start)
		return -ENOENT;
	probe.first_used = probe.last_used = tick(c->first_use_ns);
	if (expired_t(&probe, org_ttl(pc, org), tick(now)))
		return -ETIME;
	if (staged) {
		staged_make_room(pc);
		if ((k = pc->l2free) == NIL)
			return -ENOMEM;
	} else if (g->l2_stored + n > g->l2_capacity || (k = pc->l2free) == NIL) {
		return -ENOSPC;
	}
	pc->l2free = pc->l2[k].hnext;
	pc->l2[k] = (struct pc_l2e){.hash = c->key, .parent = c->parent, .org = org,
				    .start = c->start, .length = c->start + n,
				    .first_used = probe.first_used, .last_used = probe.last_used,
				    .gid = gid, .shared = staged};
	b = l2_bucket(pc, gid, org, c->key);
	pc->l2[k].hnext = pc->l2bucket[b];
	pc->l2bucket[b] = k;
	if (staged) {
		pc->staged[(pc->staged_head + pc->staged_n) % pc->p.shared_staged].i = k;
		pc->staged[(pc->staged_head + pc->staged_n) % pc->p.shared_staged].hash = c->key;
		pc->staged_n++;
		pc->st.shared_staged_tokens += n;
		return 0;
	}
	/* At the LRU's cold end: taken back from a restart, it goes before what this run used. */
	ilist_push_tail(&g->l2_lru, ILIST_LINKS(pc->l2, lru), k);
	g->l2_stored += n;
	pc->org[org].l2_stored[gid] += n;
	pc->st.l2_stored_tokens += n;
	pc->st.l2_adopted_tokens += n;
	return 0;
}

int
prefixcache_l2_adopt(struct prefixcache *pc, uint16_t mi, const struct prefixcache_l2col *c,
		     uint64_t now)
{
	return l2_place(pc, mi, c, now, false);
}

int
prefixcache_shared_stage(struct prefixcache *pc, uint16_t mi, const struct prefixcache_l2col *c,
			 uint64_t now)
{
	return l2_place(pc, mi, c, now, true);
}

uint32_t
prefixcache_columns(struct prefixcache *pc, uint16_t mi, const struct prefixcache_request *req,
		    uint64_t *keys, uint32_t max, uint32_t *known)
{
	const uint32_t C = pc->p.column;
	uint8_t gid = (uint8_t)(mi * MAX_GROUPS);
	uint32_t allowed = req->cache_length_allowed, limit, n = 0, org;
	uint64_t h = proto_ref_chain_root(req->isolation_id, req->salt);
	bool held = true;

	*known = 0;
	if (mi >= pc->p.num_models || !pc_l2_on(pc, mi))
		return 0;
	if (req->first_multimodal < allowed)
		allowed = req->first_multimodal;
	/* As a lookup: the prompt's last token is never replayed (-1 rule). */
	limit = pc->p.no_minus_one ? req->num_tokens : req->num_tokens ? req->num_tokens - 1 : 0;
	if (limit > allowed)
		limit = allowed;
	org = pc_org_get(pc, req->isolation_id);
	for (; n < max && (n + 1) * C <= limit; n++) {
		h = prefixcache_column_hash(h, req->tokens + n * C, C);
		keys[n] = h;
		if (held && org != NIL &&
		    (pc_entry_find(pc, gid, org, h) != NIL || l2_find(pc, gid, org, h) != NIL))
			(*known)++;
		else
			held = false;
	}
	return n;
}

bool
prefixcache_column_held(const struct prefixcache *pc, uint16_t mi, uint64_t isolation_id,
			uint64_t key, uint64_t prompt_id, uint32_t start, uint64_t evict_count)
{
	uint32_t o, i;

	if (mi >= pc->p.num_models)
		return false;
	/* The organization, without creating it. */
	for (o = pc->orgbucket[(uint32_t)mix64(isolation_id) & pc->orgmask]; o != NIL;
	     o = pc->org[o].hnext)
		if (pc->org[o].isolation_id == isolation_id)
			break;
	if (o == NIL)
		return false;
	i = pc_entry_find(pc, (uint8_t)(mi * MAX_GROUPS), o, key);
	return i != NIL && pc->e[i].prompt != NIL && pc->pr[pc->e[i].prompt].id == prompt_id &&
	       pc->e[i].start == start && pc->e[i].evict_count == evict_count;
}

void
prefixcache_shared_unstage(struct prefixcache *pc)
{
	while (pc->staged_n > 0)
		staged_pop(pc);
}

bool
prefixcache_l2_forget(struct prefixcache *pc, uint16_t mi, uint64_t isolation_id, uint64_t key)
{
	uint32_t org, i;

	if (mi >= pc->p.num_models || !pc_l2_on(pc, mi) || pc->l2 == NULL)
		return false;
	/* The organization, without creating it: a shard's word on a column
	 * of an organization never seen makes no entry. */
	for (org = pc->orgbucket[(uint32_t)mix64(isolation_id) & pc->orgmask]; org != NIL;
	     org = pc->org[org].hnext)
		if (pc->org[org].isolation_id == isolation_id)
			break;
	if (org == NIL || (i = l2_find(pc, (uint8_t)(mi * MAX_GROUPS), org, key)) == NIL ||
	    pc->l2[i].shared)
		return false; /* a shared level's column is on no shard's disk */
	l2_detach(pc, i);
	l2_release(pc, i);
	return true;
}

bool
prefixcache_l2_confirm(struct prefixcache *pc, uint16_t mi, uint64_t isolation_id, uint64_t key)
{
	uint32_t org, i;

	if (mi >= pc->p.num_models || !pc_l2_on(pc, mi) || pc->l2 == NULL)
		return false;
	org = pc_org_get(pc, isolation_id);
	if (org == NIL || (i = l2_find(pc, (uint8_t)(mi * MAX_GROUPS), org, key)) == NIL)
		return false;
	pc->l2[i].pending = 0;
	return true;
}
