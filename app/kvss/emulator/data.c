/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The wafer emulator's evicted bytes (emulator.h): one job per EVICT batch,
 * holding each token's prefix hash; each shard of the model walks the jobs
 * at its own pace and sends its slice of every token as EVICT_DATA
 * payloads (lib/wafer), as far as the driver lets it.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "emulator_priv.h"

/* ---- The expiry check ------------------------------------------------------------ */

/*
 * With TTLs (emu_params.expiry_check_ns, the longest first-use TTL), the
 * emulator keeps, apart from the driver's library, when each token hash was
 * last evicted. A column's first use is at or before its latest eviction, so
 * a refilled token last evicted longer than the TTL ago was served expired:
 * counted (expired_served), and the run fails. (One-sided: a token served up
 * to the library's slack past its TTL is not caught.) A table of 2^22
 * hashes by open addressing, each slot its hash and its time side by side
 * (one cache line a probe); when it is half full, new ones are not noted.
 * (It was 2^20 slots in two arrays, filled to three quarters: on the public
 * trace it stayed full, a lookup of a hash not in it walked about eight
 * slots in two places, and noting and checking every token took a quarter
 * of the driver's time; at half full the walk is about two and a half.)
 * The table (64 MiB) is made and touched whole when the emulator is made,
 * in huge pages where the kernel gives them: touched slot by slot as tokens
 * come, its first pages faulted in while the run went, 230-330 ms of one
 * driver loop on a virtual machine with two CPU hogs, the wafer silent
 * that long in the middle of its batches' data.
 */
#define EV_SLOTS (1u << 22)
#define EV_ALIGN (2u << 20) /* a huge page */

int
emu_ev_alloc(struct emu *e)
{
	size_t len = (size_t)EV_SLOTS * sizeof(*e->ev);
	void *p;

	if (e->p.expiry_check_ns == 0)
		return 0;
	if (posix_memalign(&p, EV_ALIGN, len) != 0)
		return -1;
	(void)madvise(p, len, MADV_HUGEPAGE); /* a hint: without it, 4 KiB pages */
	memset(p, 0, len);
	e->ev = p;
	return 0;
}

static uint32_t
ev_find(const struct emu *e, uint64_t h)
{
	uint32_t i = (uint32_t)(h ^ (h >> 32)) & (EV_SLOTS - 1);

	while (e->ev[i].key != 0 && e->ev[i].key != h)
		i = (i + 1) & (EV_SLOTS - 1);
	return i;
}

void
emu_ev_note(struct emu *e, uint64_t h)
{
	uint32_t i;

	if (e->p.expiry_check_ns == 0 || h == 0)
		return;
	if (e->ev == NULL && emu_ev_alloc(e) != 0) { /* a TTL set after emu_create */
		e->failed = true;
		return;
	}
	i = ev_find(e, h);
	if (e->ev[i].key == 0) {
		if (e->ev_n >= EV_SLOTS / 2)
			return;
		e->ev[i].key = h;
		e->ev_n++;
	}
	e->ev[i].ns = e->now_ns;
}

void
emu_ev_check(struct emu *e, const uint64_t *hash, uint32_t n)
{
	uint64_t now = e->now_ns;
	uint32_t k;

	if (e->p.expiry_check_ns == 0 || e->ev == NULL)
		return;
	for (k = 0; k < n; k++) {
		uint32_t i = ev_find(e, hash[k]);

		if (hash[k] != 0 && e->ev[i].key == hash[k] && now - e->ev[i].ns > e->p.expiry_check_ns) {
			e->st.expired_served++;
			return;
		}
	}
}

/* ---- Evicted bytes -------------------------------------------------------------- */

int
emu_evict(struct emu *e, uint16_t model, uint64_t batch_no, uint16_t nc, uint16_t g,
	  const struct proto_evict_entry *en)
{
	struct data_job *j;
	const struct emu_seq *s = NULL;
	uint64_t last_id = 0;
	uint32_t t, c;

	if (model >= e->p.num_models)
		return -EINVAL;
	j = malloc(sizeof(*j) + sizeof(uint64_t) * nc * g);
	if (j == NULL) {
		e->failed = true;
		return -ENOMEM;
	}
	memset(j, 0, sizeof(*j));
	j->model = model;
	j->nc = nc;
	j->g = g;
	j->batch_no = batch_no;
	j->all_mask = (uint32_t)((1ull << e->nshards[model]) - 1);
	for (t = 0; t < g; t++)
		for (c = 0; c < nc; c++) {
			const struct proto_evict_entry *x = &en[t * nc + c];

			/* A batch holds runs of one prompt: look each run up once. */
			if (x->prompt_id != last_id) {
				last_id = x->prompt_id;
				s = last_id ? emu_seq_of_prompt(e, last_id) : NULL;
			}
			j->hash[(size_t)c * g + t] =
				s != NULL && x->token_idx < s->total ? s->h[x->token_idx] : 0;
			if (x->prompt_id != 0 && c == 0) {
				e->st.evicted_tokens++;
				emu_ev_note(e, j->hash[t]);
			}
		}
	e->st.evict_batches++;
	j->next = NULL;
	if (e->jtail != NULL)
		e->jtail->next = j;
	else
		e->jhead = j;
	e->jtail = j;
	e->njobs++;
	return 0;
}

struct data_job *
emu_job_for(const struct emu *e, uint16_t k, struct data_job *j)
{
	uint16_t m = e->p.shard[k].model, idx = (uint16_t)(k - e->first_shard[m]);

	for (; j != NULL; j = j->next)
		if (j->model == m && !(j->done_mask & (1u << idx)))
			return j;
	return NULL;
}

static void
job_done(struct emu *e, uint16_t k, struct data_job *j)
{
	struct emu_cursor *c = &e->cur[k];

	j->done_mask |= 1u << (k - e->first_shard[j->model]);
	c->on = false;
	c->cache = 0;
	c->j = emu_job_for(e, k, j->next);
}

bool
emu_data_ready(struct emu *e, uint16_t k, uint64_t through)
{
	struct emu_cursor *c;

	if (k >= e->p.nshards)
		return false;
	c = &e->cur[k];
	if (c->j == NULL)
		c->j = emu_job_for(e, k, e->jhead);
	return c->j != NULL && c->j->batch_no <= through;
}

uint32_t
emu_data_next(struct emu *e, uint16_t k, uint64_t through, uint32_t epoch, uint32_t stream,
	      uint8_t *buf,
	      uint32_t max_data)
{
	struct emu_cursor *c;

	if (k >= e->p.nshards)
		return 0;
	c = &e->cur[k];
	for (;;) {
		struct data_job *j = c->j != NULL ? c->j : emu_job_for(e, k, e->jhead);
		uint32_t len;

		c->j = j;
		if (j == NULL || j->batch_no > through)
			return 0; /* nothing, or its EVICT may not have run yet */
		if (!c->on) {
			const struct emu_shard *sh = &e->p.shard[k];
			struct wafer_place at = {j->model, sh->id, c->cache,
						 sh->bytes_per_token[c->cache]};

			wafer_evict_init(&c->w, &at, j->batch_no, &j->hash[(size_t)c->cache * j->g],
					 j->g, epoch);
			c->w.stream = stream;
			c->on = true;
		}
		len = wafer_evict_next(&c->w, buf, max_data);
		if (len != 0)
			return len;
		c->on = false;
		if (++c->cache == j->nc)
			job_done(e, k, j);
	}
}

void
emu_data_gc(struct emu *e)
{
	uint16_t k;

	while (e->jhead != NULL && e->jhead->done_mask == e->jhead->all_mask) {
		struct data_job *j = e->jhead;

		for (k = 0; k < e->p.nshards; k++)
			if (e->cur[k].j == j) {
				e->cur[k].j = NULL;
				e->cur[k].on = false;
				e->cur[k].cache = 0;
			}
		e->jhead = j->next;
		if (e->jhead == NULL)
			e->jtail = NULL;
		e->njobs--;
		free(j);
	}
}

uint32_t
emu_jobs_pending(const struct emu *e, uint32_t max)
{
	const struct data_job *j;
	uint32_t n = 0;
	uint16_t i;

	for (j = e->jhead; j != NULL && n < max; j = j->next)
		for (i = 0; i < e->nshards[j->model]; i++)
			if (!(j->done_mask & (1u << i)) &&
			    e->p.hooks->shard_up(e->p.arg, (uint16_t)(e->first_shard[j->model] + i))) {
				n++;
				break;
			}
	return n;
}
