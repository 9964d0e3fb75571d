/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * lib/prefixcache (prefixcache.h, pc_priv.h for the parts): create and
 * free, the refill model's settings, what the shards report (lost tokens,
 * errors, capacity, restarts), expiry, and inspection.
 */
#include "pc_priv.h"

const char *const prefixcache_policy_names[] = {"lru",	 "lfu",	     "priority", "slru",
						 "admit", "followup", NULL};

int
prefixcache_set_refill_model(struct prefixcache *pc, uint16_t model, uint64_t latency_ns,
			     double bytes_per_ns)
{
	if (model >= pc->p.num_models || !(bytes_per_ns >= 0))
		return -EINVAL;
	pc->m[model].p.refill_latency_ns = latency_ns;
	pc->m[model].p.refill_bytes_per_ns = bytes_per_ns;
	return 0;
}

int
prefixcache_refill_model(const struct prefixcache *pc, uint16_t model, uint64_t *latency_ns,
			 double *bytes_per_ns)
{
	if (model >= pc->p.num_models)
		return -EINVAL;
	*latency_ns = pc->m[model].p.refill_latency_ns;
	*bytes_per_ns = pc->m[model].p.refill_bytes_per_ns;
	return 0;
}

int
prefixcache_set_level_model(struct prefixcache *pc, uint16_t model, enum prefixcache_level level,
			    uint64_t latency_ns, double bytes_per_ns)
{
	struct prefixcache_model *p;

	if (model >= pc->p.num_models || !(bytes_per_ns >= 0))
		return -EINVAL;
	p = &pc->m[model].p;
	switch (level) {
	case PREFIXCACHE_LEVEL_L2:
		p->l2_latency_ns = latency_ns;
		p->l2_bytes_per_ns = bytes_per_ns;
		return 0;
	case PREFIXCACHE_LEVEL_SHARED:
		p->shared_latency_ns = latency_ns;
		p->shared_bytes_per_ns = bytes_per_ns;
		return 0;
	}
	return -EINVAL;
}

int
prefixcache_level_model(const struct prefixcache *pc, uint16_t model, enum prefixcache_level level,
			uint64_t *latency_ns, double *bytes_per_ns)
{
	const struct prefixcache_model *p;

	if (model >= pc->p.num_models)
		return -EINVAL;
	p = &pc->m[model].p;
	switch (level) {
	case PREFIXCACHE_LEVEL_L2:
		*latency_ns = p->l2_latency_ns;
		*bytes_per_ns = p->l2_bytes_per_ns;
		return 0;
	case PREFIXCACHE_LEVEL_SHARED:
		*latency_ns = p->shared_latency_ns;
		*bytes_per_ns = p->shared_bytes_per_ns;
		return 0;
	}
	return -EINVAL;
}

/* ---- Create ------------------------------------------------------------------------ */

static int
build_groups(struct pc_model *m, uint32_t C)
{
	uint16_t c, gi;

	m->ngroups = 0;
	for (c = 0; c < m->p.num_caches; c++) {
		const struct prefixcache_cache *cc = &m->p.cache[c];

		if (cc->capacity_tokens == 0)
			return -EINVAL;
		if (cc->rule == PREFIXCACHE_SWA && (cc->window == 0 || cc->sinks >= C ||
						    cc->sinks >= cc->window))
			return -EINVAL;
		for (gi = 0; gi < m->ngroups; gi++) {
			struct pc_group *g = &m->g[gi];

			if (g->rule == cc->rule &&
			    (cc->rule == PREFIXCACHE_FULL ||
			     (g->window == cc->window && g->sinks == cc->sinks)))
				break;
		}
		if (gi == m->ngroups) {
			if (gi == MAX_GROUPS)
				return -EINVAL;
			memset(&m->g[gi], 0, sizeof(m->g[gi]));
			m->g[gi].rule = cc->rule;
			m->g[gi].window = cc->window;
			m->g[gi].sinks = cc->sinks;
			m->g[gi].capacity = UINT64_MAX;
			memset(m->g[gi].lru, 0xff, sizeof(m->g[gi].lru)); /* every list empty */
			m->ngroups++;
		}
		m->g[gi].cache_pos[m->g[gi].ncaches] = c;
		m->g[gi].cache[m->g[gi].ncaches++] = cc->cache_id;
		if (cc->capacity_tokens < m->g[gi].capacity)
			m->g[gi].capacity = cc->capacity_tokens;
		m->group_of_cache[c] = (uint8_t)gi;
	}
	return 0;
}

/*
 * The entries the groups' capacities can hold: a column holds at least one
 * token of its group's capacity, and all but a window's first are a whole
 * column, so capacity over the column (rounded up) per group, in all, up to
 * PREFIXCACHE_RESERVE_MAX (a group of no capacity limit counts that much).
 */
static uint32_t
reserved_entries(const struct prefixcache *pc)
{
	uint64_t n = 0;
	uint16_t mi, gi;

	for (mi = 0; mi < pc->p.num_models; mi++)
		for (gi = 0; gi < pc->m[mi].ngroups; gi++) {
			uint64_t cap = pc->m[mi].g[gi].capacity;

			n += cap / pc->p.column + (cap % pc->p.column != 0);
			if (n >= PREFIXCACHE_RESERVE_MAX)
				return PREFIXCACHE_RESERVE_MAX;
		}
	return (uint32_t)n;
}

struct prefixcache *
prefixcache_create(const struct prefixcache_params *p, const struct prefixcache_sink *sink)
{
	struct prefixcache *pc;
	uint16_t mi;
	uint32_t k;

	if (p == NULL || p->num_models == 0 || p->num_models > PREFIXCACHE_MAX_MODELS) {
		errno = EINVAL;
		return NULL;
	}
	pc = calloc(1, sizeof(*pc));
	if (pc == NULL)
		return NULL;
	pc->p = *p;
	if (pc->p.column == 0)
		pc->p.column = PREFIXCACHE_COLUMN_DEFAULT;
	if (pc->p.probation_pct == 0)
		pc->p.probation_pct = 10;
	if (pc->p.followup_pct == 0)
		pc->p.followup_pct = 10;
	if (pc->p.probation_pct > 90 || pc->p.followup_pct > 100 ||
	    (unsigned int)pc->p.policy > PREFIXCACHE_FOLLOWUP)
		goto einval;
	if (pc->p.dram_cap_default == 0)
		pc->p.dram_cap_default = 1;
	if (!(pc->p.dram_share_default >= 0 && pc->p.dram_share_default <= pc->p.dram_cap_default &&
	      pc->p.dram_cap_default <= 1))
		goto einval;
	pc->shares_on = pc->p.dram_share_default > 0 || pc->p.dram_cap_default < 1;
	if (pc->p.l2_cap_default == 0)
		pc->p.l2_cap_default = 1;
	if (!(pc->p.l2_share_default >= 0 && pc->p.l2_share_default <= pc->p.l2_cap_default &&
	      pc->p.l2_cap_default <= 1))
		goto einval;
	pc->l2_shares_on = pc->p.l2_share_default > 0 || pc->p.l2_cap_default < 1;
	if (sink != NULL)
		pc->sink = *sink;
	for (mi = 0; mi < p->num_models; mi++) {
		struct pc_model *m = &pc->m[mi];

		m->p = p->model[mi];
		/* Each level below DRAM probes at the slow count until the
		 * driver says its refills come back under the line. */
		m->l2_probe_every[0] = m->l2_probe_every[1] = PREFIXCACHE_PROBE_EVERY;
		if (m->p.num_caches == 0 || m->p.num_caches > PREFIXCACHE_MAX_CACHES ||
		    build_groups(m, pc->p.column) != 0)
			goto einval;
		if (m->p.max_batch_tokens == 0)
			m->p.max_batch_tokens = (uint16_t)(proto_evict_max_entries(9000) / m->p.num_caches);
		if (m->p.max_batch_tokens == 0 ||
		    (uint32_t)m->p.max_batch_tokens * m->p.num_caches > 65535)
			goto einval;
		m->batch = calloc((size_t)m->p.max_batch_tokens * m->p.num_caches,
				  sizeof(*m->batch));
		if (m->batch == NULL)
			goto enomem;
	}
	pc->efree = pc->prfree = NIL;
	pc->emask = 1023;
	pc->ebucket = malloc(sizeof(uint32_t) * 1024);
	pc->prmask = 1023;
	pc->prbucket = malloc(sizeof(uint32_t) * 1024);
	pc->orgmask = 63;
	pc->orgbucket = malloc(sizeof(uint32_t) * 64);
	pc->stackcap = 1024;
	pc->stack = malloc(sizeof(uint32_t) * pc->stackcap);
	if (!pc->ebucket || !pc->prbucket || !pc->orgbucket || !pc->stack)
		goto enomem;
	for (k = 0; k < 1024; k++)
		pc->ebucket[k] = pc->prbucket[k] = NIL;
	for (k = 0; k < 64; k++)
		pc->orgbucket[k] = NIL;
	pc->pol = pc_policies[pc->p.policy];
	if (pc->pol->init != NULL && pc->pol->init(pc) != 0)
		goto enomem;
	k = (uint32_t)-pc_l2_init(pc);
	if (k == EINVAL)
		goto einval;
	if (k != 0)
		goto enomem;
	if (pc->p.reserve && pc_entry_reserve(pc, reserved_entries(pc)) != 0)
		goto enomem;
	pc->next_prompt = 1;
	pc->next_refill = 1;
	return pc;
einval:
	prefixcache_free(pc);
	errno = EINVAL;
	return NULL;
enomem:
	prefixcache_free(pc);
	errno = ENOMEM;
	return NULL;
}

void
prefixcache_free(struct prefixcache *pc)
{
	uint16_t mi;
	uint32_t i;

	if (pc == NULL)
		return;
	while (pc->live != NULL) {
		struct prefixcache_seq *s = pc->live;

		pc->live = s->next;
		free(s->tokens);
		free(s->tok_batch);
		free(s);
	}
	for (mi = 0; mi < PREFIXCACHE_MAX_MODELS; mi++)
		free(pc->m[mi].batch);
	/* Records past nrf keep their pin arrays for reuse: free them all. */
	for (i = 0; i < pc->rfcap; i++)
		free(pc->rf[i].pin);
	for (i = 0; i < MAX_GROUPS; i++)
		free(pc->path[i]);
	pc_l2_fini(pc);
	free(pc->rf);
	free(pc->chunks);
	free(pc->e);
	free(pc->ebucket);
	free(pc->pr);
	free(pc->prbucket);
	free(pc->org);
	free(pc->orgbucket);
	if (pc->pol != NULL && pc->pol->fini != NULL)
		pc->pol->fini(pc);
	free(pc->stack);
	free(pc->touched);
	free(pc);
}

/* ---- Events from the shards ---------------------------------------------------------- */

void
prefixcache_token_lost(struct prefixcache *pc, uint16_t mi, uint16_t shard, uint16_t cache_id,
		       uint64_t prompt_id, uint32_t token_idx)
{
	int gid = pc_gid_of_cache(pc, mi, cache_id);
	uint64_t deleted = pc->st.deleted_tokens, stopped = pc->st.stopped;
	uint32_t pi, i;

	(void)shard; /* which one lost it changes nothing: every shard gets the same DELETE */
	if (gid < 0)
		return;
	pi = pc_prompt_find(pc, (uint8_t)gid, prompt_id);
	pc->st.lost_tokens++;
	if (pi == NIL || token_idx >= pc->pr[pi].end || token_idx < pc->pr[pi].offset)
		return; /* already gone */
	/* The first column holding the token, and all after it. */
	for (i = pc->pr[pi].first; i != NIL && pc->e[i].length <= token_idx; i = pc->e[i].p_next)
		;
	if (i != NIL)
		pc_delete_subtree(pc, i, true);
	else
		pc_prompt_truncate(pc, pi, token_idx, true);
	pc->st.loss_dropped_tokens += pc->st.deleted_tokens - deleted;
	pc->st.loss_stopped += pc->st.stopped - stopped;
}

void
prefixcache_error(struct prefixcache *pc, uint16_t mi, uint16_t shard, uint16_t cache_id,
		  uint64_t prompt_id, uint32_t token_idx, uint16_t code)
{
	pc->st.shard_errors++;
	switch (code) {
	case PROTO_E_HOLE:
	case PROTO_E_LEFT_GROWTH:
	case PROTO_E_NO_SPACE:
	case PROTO_E_BAD_CACHE:
		if (prompt_id != 0) {
			pc->st.lost_tokens--; /* counted as an error, not a loss */
			prefixcache_token_lost(pc, mi, shard, cache_id, prompt_id, token_idx);
		}
		break;
	default:
		break;
	}
}

uint64_t
prefixcache_status(struct prefixcache *pc, uint16_t mi, uint16_t cache_id, uint64_t capacity)
{
	int gid = pc_gid_of_cache(pc, mi, cache_id);
	struct pc_group *g;

	if (gid < 0)
		return 0;
	g = group_of(pc, (uint8_t)gid);
	if (capacity < g->capacity) {
		g->capacity = capacity;
		/* Live sequences' columns may go too: the shard cannot hold more. */
		while (g->stored > g->capacity && pc_free_one(pc, (uint8_t)gid, false, NIL))
			;
	}
	return g->capacity;
}

void
prefixcache_shard_restart(struct prefixcache *pc, uint16_t mi)
{
	struct pc_model *m;
	uint32_t i;

	if (mi >= pc->p.num_models)
		return;
	m = &pc->m[mi];
	/* The shard holds nothing: drop every entry and prompt, sending nothing. */
	for (i = 0; i < pc->ecap; i++)
		if (pc->e[i].length != 0 && pc->e[i].gid / MAX_GROUPS == mi &&
		    pc->e[i].parent == NIL)
			pc_delete_subtree(pc, i, false);
	for (i = 0; i < pc->prcap; i++)
		if (pc->pr[i].id != 0 && pc->pr[i].gid / MAX_GROUPS == mi) {
			struct prefixcache_seq *s = pc->pr[i].seq;

			if (s != NULL)
				pc_stop_caching(pc, s, pc->pr[i].gid % MAX_GROUPS);
			if (pc->pr[i].id != 0)
				pc_prompt_truncate(pc, i, pc->pr[i].offset, false);
		}
	pc_l2_reset_model(pc, mi);
	/* A new control stream: batches count from 1 again. */
	m->batches_sent = 0;
	m->batch_g = 0;
}

size_t
prefixcache_expire(struct prefixcache *pc, uint64_t now, size_t max_visits)
{
	size_t removed = 0, v;
	uint64_t deleted0 = pc->st.deleted_tokens;

	/* Only records ever handed out: a reserved pool's untouched tail would slow the sweep. */
	if (pc->ehigh == 0)
		return 0;
	for (v = 0; v < max_visits && v < pc->ehigh; v++) {
		uint32_t i = pc->expire_cursor++ % pc->ehigh;

		if (pc->e[i].length == 0 || !expired(pc, &pc->e[i], now))
			continue;
		if (pc_subtree_pinned(pc, i))
			continue; /* a refill needs it; next sweep */
		removed += pc_delete_subtree(pc, i, true);
	}
	pc->st.expired_entries += removed;
	pc->st.expired_tokens += pc->st.deleted_tokens - deleted0;
	return removed;
}

/* ---- Inspection -------------------------------------------------------------------- */

void
prefixcache_stats(const struct prefixcache *pc, struct prefixcache_stats *st)
{
	*st = pc->st;
	st->entries = pc->nentries;
}

uint64_t
prefixcache_stored(const struct prefixcache *pc, uint16_t mi, uint16_t cache_id)
{
	int gid = pc_gid_of_cache(pc, mi, cache_id);

	return gid < 0 ? 0 : pc->m[mi].g[gid % MAX_GROUPS].stored;
}

uint64_t
prefixcache_l2_stored(const struct prefixcache *pc, uint16_t mi, uint16_t cache_id)
{
	int gid = pc_gid_of_cache(pc, mi, cache_id);

	return gid < 0 ? 0 : pc->m[mi].g[gid % MAX_GROUPS].l2_stored;
}

size_t
prefixcache_orgs(const struct prefixcache *pc, struct prefixcache_org_stats *out, size_t max)
{
	size_t i;

	for (i = 0; i < pc->norg && i < max; i++) {
		const struct pc_org *o = &pc->org[i];
		uint16_t mi;
		unsigned int gi;

		out[i] = o->st;
		out[i].dram_tokens = out[i].dram_share_tokens = out[i].dram_cap_tokens = 0;
		out[i].l2_tokens = out[i].l2_share_tokens = out[i].l2_cap_tokens = 0;
		for (mi = 0; mi < pc->p.num_models; mi++)
			for (gi = 0; gi < pc->m[mi].ngroups; gi++) {
				uint64_t c = pc->m[mi].g[gi].capacity;

				uint64_t c2 = pc->m[mi].g[gi].l2_capacity;

				out[i].dram_tokens += o->stored[mi * MAX_GROUPS + gi];
				out[i].dram_share_tokens += (uint64_t)(o->share * (double)c);
				out[i].dram_cap_tokens += (uint64_t)(o->cap * (double)c);
				out[i].l2_tokens += o->l2_stored[mi * MAX_GROUPS + gi];
				out[i].l2_share_tokens += (uint64_t)(o->l2_share * (double)c2);
				out[i].l2_cap_tokens += (uint64_t)(o->l2_cap * (double)c2);
			}
	}
	return pc->norg;
}

int
prefixcache_find(const struct prefixcache *pc, uint16_t mi, uint16_t cache_id, uint64_t isolation_id,
		 const uint32_t *tokens, uint32_t len, uint64_t now, struct prefixcache_entry_info *out)
{
	return prefixcache_find_salted(pc, mi, cache_id, isolation_id, 0, tokens, len, now, out);
}

int
prefixcache_find_salted(const struct prefixcache *pc, uint16_t mi, uint16_t cache_id,
			uint64_t isolation_id, uint64_t salt, const uint32_t *tokens, uint32_t len,
			uint64_t now, struct prefixcache_entry_info *out)
{
	const struct pc_group *g;
	uint32_t b, o, i = NIL, end = 0, ne;
	uint64_t h = proto_ref_chain_root(isolation_id, salt);
	int gid = pc_gid_of_cache(pc, mi, cache_id);

	if (gid < 0)
		return -EINVAL;
	g = &pc->m[mi].g[gid % MAX_GROUPS];
	/* The organization, without creating it. */
	for (o = pc->orgbucket[(uint32_t)mix64(isolation_id) & pc->orgmask]; o != NIL;
	     o = pc->org[o].hnext)
		if (pc->org[o].isolation_id == isolation_id)
			break;
	if (o == NIL)
		return -ENOENT;
	while (end < len && (ne = pc_next_end(g, pc->p.column, end)) != 0 && ne <= len) {
		h = prefixcache_column_hash(h, tokens + end, ne - end);
		i = pc_entry_find(pc, (uint8_t)gid, o, h);
		if (i == NIL || expired(pc, &pc->e[i], now))
			return -ENOENT;
		end = ne;
	}
	if (end != len || i == NIL)
		return -ENOENT;
	b = pc->e[i].parent;
	out->prompt_id = pc->pr[pc->e[i].prompt].id;
	out->start = pc->e[i].start;
	out->length = pc->e[i].length;
	out->evict_count = pc->e[i].evict_count;
	out->first_used = pc->e[i].first_used * TICK_NS;
	out->last_used = pc->e[i].last_used * TICK_NS;
	out->hash = pc->e[i].hash;
	out->parent_hash = b != NIL ? pc->e[b].hash : 0;
	out->hits = pc->e[i].hits;
	return 0;
}

size_t
prefixcache_memory(const struct prefixcache *pc)
{
	return (size_t)pc->ecap * sizeof(*pc->e) + (size_t)(pc->emask + 1) * sizeof(uint32_t) +
	       (size_t)pc->prcap * sizeof(*pc->pr) + (size_t)(pc->prmask + 1) * sizeof(uint32_t) +
	       (size_t)pc->orgcap * sizeof(*pc->org) + (size_t)(pc->orgmask + 1) * sizeof(uint32_t);
}
