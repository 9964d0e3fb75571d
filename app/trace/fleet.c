/* SPDX-License-Identifier: BSD-3-Clause */
/* A fleet of replicas and a level they share, over a trace's columns: fleet.h. */
#include "fleet.h"

#include <stdlib.h>
#include <string.h>

#include <xxhash.h>

#include "proto.h"

const char *const fleet_admit_names[] = {"evicted", "all", NULL};

/* ---- The LRU set ---------------------------------------------------------------- */

static uint32_t
slot_of(uint64_t key, uint32_t mask)
{
	return (uint32_t)((key * 0x9E3779B97F4A7C15ULL) >> 32) & mask;
}

int
colset_init(struct colset *s, uint64_t max)
{
	memset(s, 0, sizeof(*s));
	s->max = max;
	s->free = FLEET_NONE;
	ilist_init(&s->lru);
	s->mask = 1023;
	s->tab = calloc(s->mask + 1, sizeof(uint32_t));
	return s->tab != NULL ? 0 : -1;
}

void
colset_fini(struct colset *s)
{
	free(s->e);
	free(s->tab);
	memset(s, 0, sizeof(*s));
}

void
colset_clear(struct colset *s)
{
	memset(s->tab, 0, ((size_t)s->mask + 1) * sizeof(uint32_t));
	s->n = s->used = 0;
	s->free = FLEET_NONE;
	ilist_init(&s->lru);
}

uint32_t
colset_find(const struct colset *s, uint64_t key)
{
	uint32_t i = slot_of(key, s->mask);

	for (; s->tab[i] != 0; i = (i + 1) & s->mask)
		if (s->e[s->tab[i] - 1].key == key)
			return s->tab[i] - 1;
	return FLEET_NONE;
}

void
colset_touch(struct colset *s, uint32_t i)
{
	ilist_move_head(&s->lru, ILIST_LINKS(s->e, lru), i);
}

void
colset_remove(struct colset *s, uint32_t i)
{
	uint32_t pos = slot_of(s->e[i].key, s->mask), j;

	while (s->tab[pos] != i + 1)
		pos = (pos + 1) & s->mask;
	/* Backward-shift deletion: no tombstones, probes stay short. */
	for (j = (pos + 1) & s->mask; s->tab[j] != 0; j = (j + 1) & s->mask) {
		uint32_t k = slot_of(s->e[s->tab[j] - 1].key, s->mask);

		/* The entry at j may fill the hole unless its home lies in (pos, j]. */
		if (pos <= j ? (k <= pos || k > j) : (k <= pos && k > j)) {
			s->tab[pos] = s->tab[j];
			pos = j;
		}
	}
	s->tab[pos] = 0;
	ilist_unlink(&s->lru, ILIST_LINKS(s->e, lru), i);
	s->e[i].lru.next = s->free;
	s->free = i;
	s->n--;
}

/* Room for one more entry, and the table at most half full. */
static int
grow(struct colset *s)
{
	if (s->free == FLEET_NONE && s->used == s->nent) {
		uint32_t m = s->nent ? s->nent * 2 : 1024;
		struct colset_ent *e;

		if (s->nent >= (1u << 30))
			return -1;
		e = realloc(s->e, (size_t)m * sizeof(*e));
		if (e == NULL)
			return -1;
		s->e = e;
		s->nent = m;
	}
	if (2 * ((uint64_t)s->n + 1) > (uint64_t)s->mask + 1) {
		uint32_t mask = s->mask * 2 + 1, *tab = calloc((size_t)mask + 1, sizeof(uint32_t)), i;

		if (tab == NULL)
			return -1;
		/* Every entry held is on the recency list. */
		for (i = s->lru.head; i != FLEET_NONE; i = s->e[i].lru.next) {
			uint32_t k = slot_of(s->e[i].key, mask);

			while (tab[k] != 0)
				k = (k + 1) & mask;
			tab[k] = i + 1;
		}
		free(s->tab);
		s->tab = tab;
		s->mask = mask;
	}
	return 0;
}

int
colset_insert(struct colset *s, uint64_t key, uint64_t first_ms, struct colset_ent *victim)
{
	int out = 0;
	uint32_t i, k;

	if (s->max == 0) {
		*victim = (struct colset_ent){.key = key, .first_ms = first_ms};
		return 1;
	}
	if ((uint64_t)s->n >= s->max) {
		*victim = s->e[s->lru.tail];
		colset_remove(s, s->lru.tail);
		out = 1;
	}
	if (grow(s) != 0)
		return -1;
	if (s->free != FLEET_NONE) {
		i = s->free;
		s->free = s->e[i].lru.next;
	} else {
		i = s->used++;
	}
	s->e[i].key = key;
	s->e[i].first_ms = first_ms;
	for (k = slot_of(key, s->mask); s->tab[k] != 0; k = (k + 1) & s->mask)
		;
	s->tab[k] = i + 1;
	ilist_push_head(&s->lru, ILIST_LINKS(s->e, lru), i);
	s->n++;
	return out;
}

/* ---- The fleet ------------------------------------------------------------------ */

enum { LVL_NONE, LVL_DRAM, LVL_DISK, LVL_SHARED };

/* The last FLEET_WINDOW requests of something: prompt and hit tokens each. */
struct ring {
	uint64_t in[FLEET_WINDOW], hit[FLEET_WINDOW];
	uint32_t pos, n;
};

struct replica {
	struct colset dram, disk;
};

struct fleet {
	const struct fleet_params *p;
	struct fleet_result *r;
	struct replica rep[ROUTE_MAX_REPLICAS];
	uint32_t nrep;
	struct colset shared;
	bool has_shared;
	uint64_t next_sweep;
	int nomem;
	/* Per request: its cacheable tokens, its columns' keys, where each was, first uses. */
	uint32_t *seq;
	uint64_t *key, *first;
	uint8_t *lvl;
	size_t seqcap, colcap;
	struct ring before_rs, before_add;
	uint64_t rs_seen, add_seen, new_seen; /* requests since the event (its replica's, the fleet's) */
};

static void
ring_add(struct ring *g, uint64_t in, uint64_t hit)
{
	g->in[g->pos] = in;
	g->hit[g->pos] = hit;
	g->pos = (g->pos + 1) % FLEET_WINDOW;
	if (g->n < FLEET_WINDOW)
		g->n++;
}

static struct fleet_window
ring_sum(const struct ring *g)
{
	struct fleet_window w = {.requests = g->n};
	uint32_t i;

	for (i = 0; i < g->n; i++) {
		w.input += g->in[i];
		w.hit += g->hit[i];
	}
	return w;
}

static void
win_add(struct fleet_window *w, uint64_t in, uint64_t hit)
{
	w->requests++;
	w->input += in;
	w->hit += hit;
}

static uint64_t
cols(uint64_t tokens, uint32_t column)
{
	return tokens == FLEET_UNLIMITED ? FLEET_UNLIMITED : tokens / column;
}

static int
replica_init(struct fleet *f, uint32_t k)
{
	if (colset_init(&f->rep[k].dram, cols(f->p->dram_tokens, f->p->column)) != 0 ||
	    colset_init(&f->rep[k].disk, cols(f->p->disk_tokens, f->p->column)) != 0)
		return -1;
	return 0;
}

static bool
expired(const struct fleet *f, uint64_t first_ms, uint64_t now)
{
	return f->p->shared_ttl_ms != 0 && now >= first_ms + f->p->shared_ttl_ms;
}

/* The shared level's entry for @p key, read (most recent), or FLEET_NONE; an expired one goes. */
static uint32_t
shared_get(struct fleet *f, uint64_t key, uint64_t now)
{
	uint32_t i = colset_find(&f->shared, key);

	if (i == FLEET_NONE)
		return FLEET_NONE;
	if (expired(f, f->shared.e[i].first_ms, now)) {
		colset_remove(&f->shared, i);
		f->r->shared_expired += f->p->column;
		return FLEET_NONE;
	}
	colset_touch(&f->shared, i);
	return i;
}

/* A column goes down to the shared level: written unless there already (or past its TTL). */
static void
shared_put(struct fleet *f, uint64_t key, uint64_t first_ms, uint64_t now)
{
	struct colset_ent v;
	uint32_t i = colset_find(&f->shared, key);
	int rc;

	if (i != FLEET_NONE && !expired(f, f->shared.e[i].first_ms, now)) {
		f->r->shared_exists += f->p->column;
		return;
	}
	if (i != FLEET_NONE) {
		colset_remove(&f->shared, i);
		f->r->shared_expired += f->p->column;
	}
	if (expired(f, first_ms, now)) {
		f->r->shared_expired += f->p->column; /* refused: no one may read it */
		return;
	}
	rc = colset_insert(&f->shared, key, first_ms, &v);
	if (rc < 0) {
		f->nomem = 1;
		return;
	}
	f->r->shared_written += f->p->column;
	if (rc == 1)
		f->r->shared_evicted += f->p->column;
	if ((uint64_t)f->shared.n * f->p->column > f->r->shared_peak)
		f->r->shared_peak = (uint64_t)f->shared.n * f->p->column;
}

/* Every expired column of the shared level goes (the sweeper). */
static void
sweep(struct fleet *f, uint64_t now)
{
	uint32_t i = f->shared.lru.tail;

	while (i != FLEET_NONE) {
		uint32_t prev = f->shared.e[i].lru.prev;

		if (expired(f, f->shared.e[i].first_ms, now)) {
			colset_remove(&f->shared, i);
			f->r->shared_expired += f->p->column;
		}
		i = prev;
	}
}

/* A column leaves its replica's last local tier: dropped, or up under "evicted". */
static void
drop(struct fleet *f, const struct colset_ent *v, uint64_t now)
{
	if (f->has_shared && f->p->admit == FLEET_ADMIT_EVICTED)
		shared_put(f, v->key, v->first_ms, now);
}

/* A column most recent in replica @p rp's DRAM; what DRAM frees goes down. */
static void
to_dram(struct fleet *f, struct replica *rp, uint64_t key, uint64_t first_ms, uint64_t now)
{
	struct colset_ent v, w;
	int rc = colset_insert(&rp->dram, key, first_ms, &v);

	if (rc < 0) {
		f->nomem = 1;
		return;
	}
	if (rc == 0)
		return;
	if (rp->disk.max == 0) {
		drop(f, &v, now);
		return;
	}
	rc = colset_insert(&rp->disk, v.key, v.first_ms, &w);
	if (rc < 0) {
		f->nomem = 1;
		return;
	}
	f->r->disk_written += f->p->column;
	if (rc == 1)
		drop(f, &w, now);
}

/* Room for a request of @p len cacheable tokens. */
static int
scratch(struct fleet *f, size_t len)
{
	size_t nc = len / f->p->column + 1;

	if (len > f->seqcap) {
		uint32_t *s = realloc(f->seq, len * sizeof(uint32_t));

		if (s == NULL)
			return -1;
		f->seq = s;
		f->seqcap = len;
	}
	if (nc > f->colcap) {
		uint64_t *k = realloc(f->key, nc * sizeof(uint64_t));
		uint64_t *fi = k ? realloc(f->first, nc * sizeof(uint64_t)) : NULL;
		uint8_t *l = fi ? realloc(f->lvl, nc) : NULL;

		if (k != NULL)
			f->key = k;
		if (fi != NULL)
			f->first = fi;
		if (l == NULL)
			return -1;
		f->lvl = l;
		f->colcap = nc;
	}
	return 0;
}

/*
 * One request on replica @p k: its hit by level (returned in @p h: DRAM,
 * disk, shared tokens), then its columns into the replica's DRAM.
 */
static int
request(struct fleet *f, uint32_t k, const struct wl_req *q, uint64_t iso, uint64_t h[3])
{
	struct replica *rp = &f->rep[k];
	uint32_t C = f->p->column, gen = workload_evicted_answer(q->out);
	uint64_t len = (uint64_t)q->n + gen, lim, now = q->ts_ms;
	uint64_t parent = proto_ref_chain_root(iso, q->salt); /* the chain's root */
	size_t ncol, maxhit, j, c;
	bool hitting = true;

	if (len > q->allowed)
		len = q->allowed;
	if (len > q->first_mm)
		len = q->first_mm;
	if (scratch(f, (size_t)len) != 0)
		return -1;
	memcpy(f->seq, q->tokens, sizeof(uint32_t) * (len < q->n ? len : q->n));
	for (j = q->n; j < len; j++)
		f->seq[j] = workload_answer_token((uint32_t)j);
	ncol = (size_t)(len / C);
	lim = f->p->minus_one && q->n > 0 ? q->n - 1 : q->n;
	maxhit = (size_t)(lim / C) < ncol ? (size_t)(lim / C) : ncol;
	h[0] = h[1] = h[2] = 0;
	/* Where each column is: the hit runs while one level or another holds them. */
	for (c = 0; c < ncol; c++) {
		uint32_t i;

		parent = XXH3_64bits_withSeed(f->seq + c * C, sizeof(uint32_t) * C, parent);
		f->key[c] = parent;
		f->lvl[c] = LVL_NONE;
		f->first[c] = now;
		if ((i = colset_find(&rp->dram, parent)) != FLEET_NONE) {
			f->lvl[c] = LVL_DRAM;
			f->first[c] = rp->dram.e[i].first_ms;
		} else if ((i = colset_find(&rp->disk, parent)) != FLEET_NONE) {
			f->lvl[c] = LVL_DISK; /* moved up below */
			f->first[c] = rp->disk.e[i].first_ms;
			colset_remove(&rp->disk, i);
		} else if (hitting && c < maxhit && f->has_shared &&
			   (i = shared_get(f, parent, now)) != FLEET_NONE) {
			f->lvl[c] = LVL_SHARED;
			f->first[c] = f->shared.e[i].first_ms;
		}
		if (c >= maxhit || f->lvl[c] == LVL_NONE)
			hitting = false;
		if (hitting)
			h[f->lvl[c] - LVL_DRAM] += C;
		/* A local hit tells the shared level its copy is in use (a batch per request). */
		if (hitting && f->p->shared_touch && f->has_shared && f->lvl[c] != LVL_SHARED &&
		    (i = colset_find(&f->shared, parent)) != FLEET_NONE) {
			colset_touch(&f->shared, i);
			f->r->shared_touched += C;
		}
	}
	/* Deepest first, so a column ends more recent than its descendants. */
	for (c = ncol; c-- > 0;) {
		uint32_t i = colset_find(&rp->dram, f->key[c]);

		if (i != FLEET_NONE) {
			colset_touch(&rp->dram, i);
		} else {
			/* Held in DRAM at the lookup, it may have gone down since, under this request's own. */
			if ((i = colset_find(&rp->disk, f->key[c])) != FLEET_NONE)
				colset_remove(&rp->disk, i);
			to_dram(f, rp, f->key[c], f->first[c], now);
		}
		if (f->lvl[c] == LVL_NONE && f->has_shared && f->p->admit == FLEET_ADMIT_ALL)
			shared_put(f, f->key[c], now, now);
	}
	return f->nomem ? -1 : 0;
}

static void
fleet_free(struct fleet *f)
{
	uint32_t k;

	for (k = 0; k < ROUTE_MAX_REPLICAS; k++) {
		colset_fini(&f->rep[k].dram);
		colset_fini(&f->rep[k].disk);
	}
	colset_fini(&f->shared);
	free(f->seq);
	free(f->key);
	free(f->first);
	free(f->lvl);
	free(f);
}

/* Before request @p i: a restart, a replica added. */
static int
events(struct fleet *f, struct router *rt, size_t i)
{
	const struct fleet_params *p = f->p;

	if (p->add_at != 0 && i == p->add_at) {
		if (!p->add_watch_only) {
			if (rt == NULL || f->nrep >= ROUTE_MAX_REPLICAS || replica_init(f, f->nrep) != 0)
				return -2;
			f->r->add_moved = route_add_replica(rt);
			f->nrep++;
		}
		f->r->add_before = ring_sum(&f->before_add);
		f->r->add_done = true;
	}
	if (p->restart_replica >= 0 && i == p->restart_at) {
		struct replica *rp;

		if ((uint32_t)p->restart_replica >= f->nrep)
			return -2;
		rp = &f->rep[p->restart_replica];
		if (!p->restart_watch_only) {
			colset_clear(&rp->dram);
			colset_clear(&rp->disk);
		}
		f->r->rs_before = ring_sum(&f->before_rs);
		f->r->rs_done = true;
	}
	return 0;
}

/* What the windows around the events see of request @p i on replica @p k. */
static void
windows(struct fleet *f, uint32_t k, uint64_t in, const uint64_t h[3])
{
	const struct fleet_params *p = f->p;
	struct fleet_result *r = f->r;
	uint64_t hit = h[0] + h[1] + h[2];

	if (p->restart_replica >= 0 && k == (uint32_t)p->restart_replica) {
		if (!r->rs_done) {
			ring_add(&f->before_rs, in, hit);
		} else if (f->rs_seen < FLEET_WINDOW) {
			if (f->rs_seen == 0) {
				r->rs_first_local = h[0] + h[1];
				r->rs_first_shared = h[2];
				r->rs_first_input = in;
			}
			win_add(&r->rs_after, in, hit);
			win_add(&r->rs_part[f->rs_seen * FLEET_PARTS / FLEET_WINDOW], in, hit);
			f->rs_seen++;
		}
	}
	if (p->add_at != 0) {
		if (!r->add_done) {
			ring_add(&f->before_add, in, hit);
		} else {
			if (f->add_seen++ < FLEET_WINDOW)
				win_add(&r->add_after, in, hit);
			if (!p->add_watch_only && k == f->nrep - 1 && f->new_seen++ < FLEET_WINDOW)
				win_add(&r->add_new, in, hit);
		}
	}
}

int
fleet_run(const struct workload *w, size_t n, const struct fleet_params *p, struct fleet_result *r)
{
	struct fleet *f;
	struct router *rt = NULL;
	size_t i;
	uint32_t k;
	int rc = -1;

	memset(r, 0, sizeof(*r));
	if (p->replicas == 0 || p->replicas > ROUTE_MAX_REPLICAS || p->column == 0 ||
	    p->dram_tokens < p->column || (p->restart_replica >= 0 && p->restart_at == 0))
		return -2;
	if (n > w->n)
		n = w->n;
	f = calloc(1, sizeof(*f));
	if (f == NULL)
		return -1;
	f->p = p;
	f->r = r;
	f->nrep = p->replicas;
	f->has_shared = p->shared_tokens >= p->column;
	if (colset_init(&f->shared, f->has_shared ? cols(p->shared_tokens, p->column) : 0) != 0)
		goto out;
	for (k = 0; k < f->nrep; k++)
		if (replica_init(f, k) != 0)
			goto out;
	if (p->replicas > 1 || p->add_at != 0) {
		struct route_params rp = {.replicas = p->replicas, .policy = p->route, .seed = 0x5eed};

		if ((rt = route_create(&rp)) == NULL)
			goto out;
	}
	for (i = 0; i < n; i++) {
		const struct wl_req *q = &w->r[i];
		uint64_t iso = p->iso != NULL ? p->iso[i] : q->iso, h[3];

		if ((rc = events(f, rt, i)) != 0)
			goto out;
		rc = -1;
		k = rt != NULL ? route_pick(rt, iso, q->tokens, q->n, q->ts_ms) : 0;
		if (f->has_shared && p->shared_ttl_ms != 0 && q->ts_ms >= f->next_sweep) {
			sweep(f, q->ts_ms);
			f->next_sweep = q->ts_ms + (p->sweep_ms ? p->sweep_ms : 60000);
		}
		if (request(f, k, q, iso, h) != 0)
			goto out;
		r->requests++;
		r->input += q->n;
		r->hit_dram += h[0];
		r->hit_disk += h[1];
		r->hit_shared += h[2];
		windows(f, k, q->n, h);
	}
	/* An event past the trace's end is a bad parameter, not a silent nothing. */
	rc = (p->restart_replica >= 0 && !r->rs_done) || (p->add_at != 0 && !r->add_done) ? -2 : 0;
out:
	route_free(rt);
	fleet_free(f);
	return rc;
}
