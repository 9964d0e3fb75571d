/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * lib/kvstore against a plain reference model (arrays), over a seeded random
 * sequence of evicts (growth, overwrite, new prompts, illegal entries,
 * prompt 0), data fragments in random order with repeats, lost batches,
 * deletes and refills, under capacity pressure. Every code, range, capacity
 * figure and refilled byte must agree. KVSS_SEED=N replays a run.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <inttypes.h>
#include <time.h>

#include "kv_harness.h"
#include "test_rng.h"

#define NC 2
#define NIDS 24
#define MAXTOK 400
#define MAXOPEN 3
static const uint32_t Bc[NC] = {24, 40};
static const uint16_t NBc[NC] = {2, 4};
static const uint64_t CAP[NC] = {150, 120};

struct mprompt {
	bool live; /* known to the store (version 2: also when a loss emptied it) */
	uint32_t offset, n_claim, n_pub;
	uint32_t lost_at; /* version 2: a loss cut it here (UINT32_MAX: none) */
	uint32_t ver[MAXTOK]; /* published version of each relative token */
};

struct mentry {
	uint16_t cache;
	uint64_t prompt;
	uint32_t token, version;
	bool grow, over, dead;
};

struct mbatch {
	uint64_t no;
	uint32_t g;
	struct mentry e[8 * NC];
	uint8_t *stream[NC];
	bool sent[NC];
};

static struct mprompt model[NC][NIDS];
static uint64_t ids[NIDS];
static struct mbatch open_b[MAXOPEN];
static unsigned int nopen;
static uint64_t next_batch = 1, stored[NC];
static uint64_t rng;
static struct {
	unsigned long evicts, enospc, data, losses, deletes, deletes_ok, refills, refills_ok, tokens_checked, codes, held, slot_short;
	unsigned long room_same, room_changed;
} cnt;
/* The last EVICT refused for room, and the store's room then (kvstore_room). */
static struct {
	bool on;
	struct proto_evict_entry e[8 * NC];
	uint16_t g;
	uint64_t batch;
	struct kvstore_room room;
} refused;
static struct kvstore *s;
static void *mem;

static uint64_t
rnd(void)
{
	return test_xorshift(&rng);
}

static uint32_t
rn(uint32_t n)
{
	return (uint32_t)(rnd() % n);
}

static int
id_index(uint64_t id)
{
	int i;

	for (i = 0; i < NIDS; i++)
		if (ids[i] == id)
			return i;
	return -1;
}

/* Mark open entries of (cache, prompt) at relative >= rel dead. */
static void
model_kill(uint16_t c, uint64_t id, uint32_t token_from)
{
	unsigned int b, i;

	for (b = 0; b < nopen; b++)
		for (i = 0; i < open_b[b].g * NC; i++) {
			struct mentry *e = &open_b[b].e[i];

			if (e->cache == c && e->prompt == id && (e->grow || e->over) &&
			    e->token >= token_from)
				e->dead = true;
		}
}

static void
model_truncate(uint16_t c, int pi, uint32_t rel, bool lost)
{
	struct mprompt *p = &model[c][pi];

	if (lost && p->offset + rel < p->lost_at)
		p->lost_at = p->offset + rel;
	model_kill(c, ids[pi], p->offset + rel);
	stored[c] -= p->n_claim - rel;
	p->n_claim = rel;
	if (p->n_pub > rel)
		p->n_pub = rel;
	if (rel == 0 && !lost)
		p->live = false;
}

static void
model_publish(struct mbatch *b)
{
	unsigned int i;

	for (i = 0; i < b->g * NC; i++) {
		struct mentry *e = &b->e[i];
		struct mprompt *p;
		uint32_t rel;

		if (e->dead || (!e->grow && !e->over))
			continue;
		p = &model[e->cache][id_index(e->prompt)];
		rel = e->token - p->offset;
		p->ver[rel] = e->version;
		if (e->grow && rel + 1 > p->n_pub)
			p->n_pub = rel + 1;
	}
}

static void
pop_oldest(void)
{
	unsigned int c;

	for (c = 0; c < NC; c++)
		free(open_b[0].stream[c]);
	memmove(&open_b[0], &open_b[1], sizeof(open_b[0]) * (nopen - 1));
	nopen--;
}

/* Publish, in order, every batch at the head whose streams were all sent. */
static void
model_advance(void)
{
	while (nopen > 0) {
		unsigned int c;

		for (c = 0; c < NC; c++)
			if (!open_b[0].sent[c])
				return;
		model_publish(&open_b[0]);
		pop_oldest();
	}
}

static uint32_t
pick_token_for(uint16_t c, int pi, unsigned int kind)
{
	struct mprompt *p = &model[c][pi];

	switch (kind) {
	case 0: /* grow */
		return p->offset + p->n_claim;
	case 1: /* overwrite */
		return p->offset + rn(p->n_claim);
	case 2: /* hole */
		return p->offset + p->n_claim + 1 + rn(3);
	default: /* left growth */
		return p->offset - 1 - rn(p->offset);
	}
}

static void
remember_refused(const struct proto_evict_entry *e, uint32_t g)
{
	memcpy(refused.e, e, g * NC * sizeof(*e));
	refused.g = (uint16_t)g;
	refused.batch = next_batch;
	/* After the try: one thread here, nothing ended in between. */
	kvstore_room(s, &refused.room);
	refused.on = true;
}

/*
 * After each operation, the last EVICT refused for room is tried again
 * while the store says its room has not changed since: it must be refused
 * again (a shard does not try it then). A path that makes room without
 * saying so would let it run here.
 */
static void
retry_refused(unsigned int step)
{
	struct kvstore_room now;
	uint16_t codes[8 * NC];
	int rc;

	if (!refused.on)
		return;
	kvstore_room(s, &now);
	if (now.gen != refused.room.gen || now.oldest_reader != refused.room.oldest_reader) {
		cnt.room_changed++;
		refused.on = false;
		return;
	}
	cr_assert_eq(next_batch, refused.batch, "step %u: a batch opened, the room unchanged", step);
	rc = kvstore_evict(s, refused.batch, NC, refused.g, refused.e, codes, 0);
	cr_assert(rc == -ENOSPC || rc == -EBUSY, "step %u: the room unchanged, an EVICT refused for it ran (%d)",
		  step, rc);
	cnt.room_same++;
	refused.room = now; /* the look before this try, as a shard keeps it */
}

static void
op_evict(unsigned int step)
{
	struct proto_evict_entry e[8 * NC];
	uint16_t codes[8 * NC];
	struct mbatch *b = &open_b[nopen];
	uint32_t g = 1 + rn(6), t, c, i;
	uint64_t add[NC] = {0};
	bool force = rn(4) == 0, force_done = false, slot_short[NC];
	int rc;

	memset(b, 0, sizeof(*b));
	/* Choose entries against the claimed state as it will be, in order. */
	for (t = 0; t < g; t++)
		for (c = 0; c < NC; c++) {
			struct mentry *me = &b->e[t * NC + c];
			int pi = (int)rn(NIDS);
			struct mprompt *p = &model[c][pi];
			unsigned int kind = rn(20);

			me->cache = (uint16_t)c;
			me->version = 1 + rn(1000);
			if (kind == 0) {
				me->prompt = 0;
				me->token = rn(100);
			} else if (!p->live) {
				me->prompt = ids[pi];
				me->token = 10 + rn(100);
			} else {
				me->prompt = ids[pi];
				kind = kind < 12 ? 0 : kind < 16 ? 1 : kind < 18 ? 2 : 3;
				if (kind == 3 && p->offset == 0)
					kind = 2;
				if (kind == 0 && p->n_claim + 1 >= MAXTOK - 20)
					kind = 1;
				if (kind == 1 && p->n_claim == 0)
					kind = 0; /* emptied by a loss: nothing to overwrite */
				me->token = pick_token_for((uint16_t)c, pi, kind);
			}
			e[t * NC + c] = (struct proto_evict_entry){me->prompt, me->token, step};
		}
	/* The store's capacity bound: entries past the end or of unknown prompts. */
	for (i = 0; i < g * NC; i++) {
		int pi = e[i].prompt_id ? id_index(e[i].prompt_id) : -1;

		if (pi < 0)
			continue;
		if (!model[i % NC][pi].live ||
		    e[i].token_idx >= model[i % NC][pi].offset + model[i % NC][pi].n_claim)
			add[i % NC]++;
	}
	/*
	 * Slots beyond capacity are few (spare 64) and refills held open pin
	 * retired ones: when the store is short of free slots it may refuse
	 * for that reason too. Allowed only when it really was short.
	 */
	for (c = 0; c < NC; c++) {
		struct kvstore_cache_stats st;
		uint64_t need = 0;

		kvstore_cache_stats(s, (uint16_t)c, &st);
		for (i = c; i < g * NC; i += NC)
			need += e[i].prompt_id != 0;
		slot_short[c] = st.free_slots + st.limbo_slots < need + 8 || st.free_slots < need;
	}
	if (!force && (slot_short[0] || slot_short[1])) {
		rc = kvstore_evict(s, next_batch, NC, (uint16_t)g, e, codes, 0);
		if (rc == -ENOSPC) {
			cnt.enospc++;
			cnt.slot_short++;
			remember_refused(e, g);
			return;
		}
		/* It found room after all: undo nothing, it was accepted. */
		cr_assert_eq(rc, 0);
		force_done = true;
	}
	if (!force_done && !force && (stored[0] + add[0] > CAP[0] || stored[1] + add[1] > CAP[1])) {
		rc = kvstore_evict(s, next_batch, NC, (uint16_t)g, e, codes, 0);
		cr_assert_eq(rc, -ENOSPC, "step %u: want ENOSPC, got %d", step, rc);
		cnt.enospc++;
		remember_refused(e, g);
		return;
	}
	if (!force_done) {
		rc = kvstore_evict(s, next_batch, NC, (uint16_t)g, e, codes,
				   force ? KVSTORE_EVICT_FORCE : 0);
		cr_assert_eq(rc, 0, "step %u: evict %d", step, rc);
	}
	cnt.evicts++;
	/* Apply to the model in entry order; compare codes. */
	for (i = 0; i < g * NC; i++) {
		struct mentry *me = &b->e[i];
		uint16_t c16 = me->cache, want = 0;
		int pi = me->prompt ? id_index(me->prompt) : -1;

		if (pi >= 0 && codes[i] == PROTO_E_NO_SPACE && slot_short[c16]) {
			/* Refused for want of a slot: legal, the model skips it (a new
			 * prompt so refused is known, empty and marked: version 2). */
			struct mprompt *p = &model[c16][pi];

			want = PROTO_E_NO_SPACE;
			cnt.slot_short++;
			if (!p->live) {
				p->live = true;
				p->offset = me->token;
				p->n_claim = p->n_pub = 0;
				p->lost_at = me->token;
			}
		} else if (pi >= 0) {
			struct mprompt *p = &model[c16][pi];

			if (!p->live) {
				if (stored[c16] >= CAP[c16]) {
					/* Version 2: known, empty, marked from this token. */
					want = PROTO_E_NO_SPACE;
					p->live = true;
					p->offset = me->token;
					p->n_claim = p->n_pub = 0;
					p->lost_at = me->token;
				} else {
					p->live = true;
					p->lost_at = UINT32_MAX;
					p->offset = me->token;
					p->n_claim = 1;
					p->n_pub = 0;
					stored[c16]++;
					me->grow = true;
				}
			} else if (me->token < p->offset) {
				want = PROTO_E_LEFT_GROWTH;
			} else if (me->token > p->offset + p->n_claim || me->token >= p->lost_at) {
				unsigned int j;

				/* Version 2: a prompt cut by a loss refuses EVICTs from
				 * the cut on until a DELETE clears it. */

				want = PROTO_E_HOLE;
				/* Past a token refused for room: that is the cause. */
				for (j = c16; force && j < i; j += NC)
					if (b->e[j].prompt == me->prompt && codes[j] == PROTO_E_NO_SPACE)
						want = PROTO_E_NO_SPACE;
			} else if (me->token < p->offset + p->n_claim) {
				me->over = true;
			} else if (stored[c16] >= CAP[c16]) {
				want = PROTO_E_NO_SPACE;
			} else {
				p->n_claim++;
				stored[c16]++;
				me->grow = true;
			}
		}
		cnt.codes += want != 0;
		cr_assert_eq(codes[i], want, "step %u entry %u (prompt %" PRIu64 " token %u): code %u, want %u",
			     step, i, me->prompt, me->token, codes[i], want);
	}
	/* Streams. */
	for (c = 0; c < NC; c++) {
		b->stream[c] = malloc((size_t)g * Bc[c]);
		for (t = 0; t < g; t++) {
			struct mentry *me = &b->e[t * NC + c];

			if (me->prompt)
				kvh_fill(me->prompt, me->token, me->version, (uint16_t)c,
					 b->stream[c] + (size_t)t * Bc[c], Bc[c]);
			else
				memset(b->stream[c] + (size_t)t * Bc[c], 0x55, Bc[c]);
		}
	}
	b->no = next_batch++;
	b->g = g;
	nopen++;
}

/* Send one cache's stream of an open batch: random pieces, any order, repeats. */
static void
op_data(unsigned int step)
{
	struct mbatch *b;
	uint32_t c, len, cuts[16], ncut = 0, i, k;
	int rc;

	if (nopen == 0)
		return;
	b = &open_b[rn(nopen)];
	c = rn(NC);
	if (b->sent[c])
		return;
	len = b->g * Bc[c];
	cuts[ncut++] = 0;
	for (i = 0; i < 1 + rn(6); i++)
		cuts[ncut++] = rn(len);
	cuts[ncut++] = len;
	/* sort cuts */
	for (i = 0; i < ncut; i++)
		for (k = i + 1; k < ncut; k++)
			if (cuts[k] < cuts[i]) {
				uint32_t x = cuts[i];

				cuts[i] = cuts[k];
				cuts[k] = x;
			}
	/* The pieces between cuts, shuffled (Fisher-Yates), each sent once. */
	{
		struct kv_iv_t {
			uint32_t a, z;
		} pc[16];
		uint32_t np = 0;

		for (i = 0; i + 1 < ncut; i++)
			if (cuts[i + 1] > cuts[i])
				pc[np++] = (struct kv_iv_t){cuts[i], cuts[i + 1]};
		for (i = np; i > 1; i--) {
			struct kv_iv_t x;

			k = rn(i);
			x = pc[i - 1];
			pc[i - 1] = pc[k];
			pc[k] = x;
		}
		for (i = 0; i < np; i++) {
			rc = kvstore_data(s, b->no, (uint16_t)c, pc[i].a, len, b->stream[c] + pc[i].a,
					  pc[i].z - pc[i].a);
			cr_assert(rc == 0 || rc == -ESTALE, "step %u: data %d", step, rc);
		}
	}
	/* Then the whole stream once more, in two halves (repeats must not harm). */
	rc = kvstore_data(s, b->no, (uint16_t)c, len / 2, len, b->stream[c] + len / 2, len - len / 2);
	cr_assert(rc == 0 || rc == -ESTALE, "step %u: data %d", step, rc);
	rc = kvstore_data(s, b->no, (uint16_t)c, 0, len, b->stream[c], len / 2);
	cr_assert(rc == 0 || rc == -ESTALE, "step %u: data %d", step, rc);
	b->sent[c] = true;
	cnt.data++;
	model_advance();
	cr_assert_eq(kvstore_batches_complete(s),
		     nopen ? open_b[0].no - 1 : next_batch - 1, "step %u: batches_complete", step);
}

static void
op_lose(unsigned int step)
{
	struct mbatch *b;
	unsigned int i, c, want = 0;
	int got;

	if (nopen == 0)
		return;
	b = &open_b[0];
	/* Send part of one stream first, sometimes. */
	for (i = 0; i < b->g * NC; i++) {
		struct mentry *me = &b->e[i];
		int pi;

		c = me->cache;
		if (b->sent[c] || me->dead || (!me->grow && !me->over))
			continue;
		pi = id_index(me->prompt);
		want += model[c][pi].n_claim - (me->token - model[c][pi].offset);
		model_truncate((uint16_t)c, pi, me->token - model[c][pi].offset, true);
	}
	got = kvstore_batch_lose(s, b->no, NULL, NULL);
	cnt.losses++;
	cr_assert_eq(got, (int)want, "step %u: lost %d, want %u", step, got, want);
	model_publish(b);
	pop_oldest();
	model_advance();
}

static void
op_delete(unsigned int step)
{
	uint16_t c = (uint16_t)rn(NC);
	int pi = (int)rn(NIDS);
	struct mprompt *p = &model[c][pi];
	struct proto_delete d = {.prompt_id = ids[pi], .cache_id = c};
	int want, got;

	if (p->live && p->lost_at != UINT32_MAX && rn(10) < 8) {
		/* The driver that heard of the loss: from the cut or before it. */
		d.start_token_idx = p->offset + rn(p->n_claim + 1);
		d.end_token_idx = p->offset + p->n_claim + rn(30);
	} else if (p->live && p->n_claim > 0 && rn(10) < 7) {
		d.start_token_idx = p->offset + rn(p->n_claim);
		d.end_token_idx = p->offset + p->n_claim - 1 + (rn(4) == 0 ? rn(20) : 0);
	} else if (p->live && rn(10) < 7) {
		/* Version 2: from the cut a loss made, or before it, past the end. */
		d.start_token_idx = p->offset + rn(p->n_claim + 3);
		d.end_token_idx = d.start_token_idx + rn(30);
	} else {
		d.start_token_idx = rn(150);
		d.end_token_idx = d.start_token_idx + rn(150) - 20;
	}
	if (!p->live)
		want = PROTO_E_UNKNOWN_PROMPT;
	else if (d.start_token_idx > d.end_token_idx)
		want = PROTO_E_MALFORMED;
	else if (d.start_token_idx < p->offset)
		want = PROTO_E_RANGE;
	else if (p->n_claim > 0 && d.end_token_idx < p->offset + p->n_claim - 1)
		want = PROTO_E_DELETE_NOT_RIGHT;
	else
		want = 0; /* version 2: an end past the last token is fine */
	got = kvstore_delete(s, &d);
	cnt.deletes++;
	cnt.deletes_ok += want == 0;
	cr_assert_eq(got, want, "step %u: delete %u..%u of %d: %d, want %d", step,
		     d.start_token_idx, d.end_token_idx, pi, got, want);
	if (want == 0) {
		if (d.start_token_idx <= p->lost_at)
			p->lost_at = UINT32_MAX;
		if (d.start_token_idx < p->offset + p->n_claim)
			model_truncate(c, pi, d.start_token_idx - p->offset, false);
		else if (p->n_claim == 0 && p->lost_at == UINT32_MAX)
			p->live = false;
	}
}

static void
op_refill(unsigned int step)
{
	struct proto_refill_chunk ch[4];
	uint16_t c = (uint16_t)rn(NC), code, want = 0;
	unsigned int n = 1 + rn(4), i, k, b, t;
	uint32_t bb = Bc[c] / NBc[c], tokens = 0;
	struct kvstore_refill *r;
	uint8_t *got, *ref;

	for (i = 0; i < n; i++) {
		int pi = (int)rn(NIDS);
		struct mprompt *p = &model[c][pi];

		ch[i].prompt_id = ids[pi];
		if (p->live && p->n_pub > 0 && rn(10) < 8) {
			uint32_t a = rn(p->n_pub);

			ch[i].start_token_idx = p->offset + a;
			ch[i].num_tokens = 1 + rn(p->n_pub - a);
		} else {
			ch[i].start_token_idx = rn(200);
			ch[i].num_tokens = 1 + rn(40);
		}
		if (want == 0) {
			if (!p->live || p->n_pub == 0)
				want = PROTO_E_UNKNOWN_PROMPT;
			else if (ch[i].start_token_idx < p->offset ||
				 ch[i].start_token_idx + ch[i].num_tokens > p->offset + p->n_pub)
				want = PROTO_E_RANGE;
		}
		tokens += ch[i].num_tokens;
	}
	r = kvstore_refill_begin(s, c, ch, n, &code);
	cnt.refills++;
	if (want != 0) {
		cr_assert_null(r, "step %u: refill should fail with %u", step, want);
		cr_assert_eq(code, want, "step %u: refill code %u, want %u", step, code, want);
		return;
	}
	cr_assert_not_null(r, "step %u: refill refused with %u", step, code);
	got = malloc((size_t)tokens * bb);
	ref = malloc(Bc[c]);
	for (b = 0; b < NBc[c]; b++) {
		cr_assert_eq(kvh_gather(r, (uint16_t)b, 1 + rn(200), got), (uint64_t)tokens * bb);
		for (i = 0, t = 0; i < n; i++) {
			struct mprompt *p = &model[c][id_index(ch[i].prompt_id)];

			for (k = 0; k < ch[i].num_tokens; k++, t++) {
				uint32_t tok = ch[i].start_token_idx + k;

				kvh_fill(ch[i].prompt_id, tok, p->ver[tok - p->offset], c, ref, Bc[c]);
				cnt.tokens_checked++;
				cr_assert(memcmp(got + (size_t)t * bb, ref + b * bb, bb) == 0,
					  "step %u: refill byte mismatch, cache %u buffer %u token %u",
					  step, c, b, tok);
			}
		}
	}
	kvstore_refill_end(r);
	cnt.refills_ok++;
	free(got);
	free(ref);
}

/*
 * Refills kept open across later operations: their segments are taken at
 * once, with the bytes they must hold; whatever is deleted, overwritten or
 * evicted meanwhile, those bytes must not change until the refill ends.
 */
#define HELD_MAX 2
static struct held {
	struct kvstore_refill *r;
	unsigned int until;
	unsigned int nseg;
	struct kvstore_seg seg[512];
	uint8_t *want;
} held[HELD_MAX];

static void
held_check(unsigned int step, bool all)
{
	unsigned int h, i;

	for (h = 0; h < HELD_MAX; h++) {
		uint64_t off = 0;

		if (held[h].r == NULL || (!all && step < held[h].until))
			continue;
		for (i = 0; i < held[h].nseg; i++) {
			cr_assert(memcmp(held[h].seg[i].addr, held[h].want + off, held[h].seg[i].len) == 0,
				  "step %u: memory of a held refill changed", step);
			off += held[h].seg[i].len;
		}
		kvstore_refill_end(held[h].r);
		free(held[h].want);
		held[h].r = NULL;
		cnt.held++;
	}
}

static void
op_hold(unsigned int step)
{
	struct proto_refill_chunk ch;
	uint16_t c = (uint16_t)rn(NC), code;
	int pi = (int)rn(NIDS);
	struct mprompt *p = &model[c][pi];
	struct held *hd = NULL;
	struct kvstore_refill_pos pos;
	uint64_t off = 0;
	unsigned int h, n, i;

	for (h = 0; h < HELD_MAX; h++)
		if (held[h].r == NULL)
			hd = &held[h];
	if (hd == NULL || !p->live || p->n_pub == 0)
		return;
	ch = (struct proto_refill_chunk){ids[pi], p->offset, p->n_pub};
	hd->r = kvstore_refill_begin(s, c, &ch, 1, &code);
	cr_assert_not_null(hd->r, "step %u: hold refused %u", step, code);
	hd->want = malloc((size_t)p->n_pub * Bc[c]);
	hd->nseg = 0;
	for (i = 0; i < NBc[c]; i++) {
		memset(&pos, 0, sizeof(pos));
		while ((n = kvstore_refill_next(hd->r, (uint16_t)i, &pos, 1u << 30, hd->seg + hd->nseg,
						512 - hd->nseg)) > 0)
			hd->nseg += n;
	}
	cr_assert_eq(pos.chunk, 1, "step %u: held refill did not fit the segment table", step);
	for (i = 0; i < hd->nseg; i++) {
		memcpy(hd->want + off, hd->seg[i].addr, hd->seg[i].len);
		off += hd->seg[i].len;
	}
	hd->until = step + 1 + rn(10);
}

static void
check_counts(unsigned int step)
{
	unsigned int c, i;

	for (c = 0; c < NC; c++) {
		struct kvstore_cache_stats st;
		uint64_t prompts = 0;

		kvstore_cache_stats(s, (uint16_t)c, &st);
		for (i = 0; i < NIDS; i++) {
			uint32_t o, n;
			int rc = kvstore_prompt(s, (uint16_t)c, ids[i], &o, &n);

			prompts += model[c][i].live;
			cr_assert_eq(rc == 0, model[c][i].live && model[c][i].n_pub > 0,
				     "step %u: prompt %u liveness", step, i);
			if (rc == 0) {
				cr_assert_eq(o, model[c][i].offset, "step %u: offset", step);
				cr_assert_eq(n, model[c][i].n_pub, "step %u: prompt %u n %u want %u",
					     step, i, n, model[c][i].n_pub);
			}
		}
		cr_assert_eq(st.prompts, prompts, "step %u: prompts", step);
		cr_assert_eq(st.stored_tokens, stored[c], "step %u: stored %" PRIu64 " want %" PRIu64,
			     step, st.stored_tokens, stored[c]);
		cr_assert_leq(st.stored_tokens, CAP[c]);
	}
}

/*
 * The run, with @p spare tokens of slots past the capacity (kvstore_params;
 * slots come in blocks of 64): 64 leaves slots to spare, 8 leaves cache 1
 * eight, so that refills held across operations keep retired slots from
 * reuse and EVICTs are refused for want of a slot, not only of a count.
 */
static void
model_run(uint32_t spare)
{
	struct kvstore_params p = {.num_caches = NC, .max_prompts = 64, .spare_tokens = spare,
				   .max_batch_entries = 8 * NC};
	uint64_t seed = test_seed("kvstore model test", (uint64_t)time(NULL));
	struct kvstore_cache_stats st0[NC];
	unsigned int step, i, c, steps = 100000;

	rng = seed * 2654435761u + 1;
	for (c = 0; c < NC; c++)
		p.cache[c] = (struct kvstore_cache_params){Bc[c], NBc[c], CAP[c]};
	s = kvh_create(&p, &mem);
	cr_assert_not_null(s);
	for (c = 0; c < NC; c++)
		kvstore_cache_stats(s, (uint16_t)c, &st0[c]);
	for (i = 0; i < NIDS; i++)
		ids[i] = i < NIDS / 2 ? i + 1 : rnd() | 1;

	for (step = 0; step < steps; step++) {
		unsigned int op = rn(100);

		if (op < 30 && nopen < MAXOPEN)
			op_evict(step);
		else if (op < 62)
			op_data(step);
		else if (op < 65)
			op_lose(step);
		else if (op < 72)
			op_delete(step);
		else if (op < 95)
			op_refill(step);
		else
			op_hold(step);
		retry_refused(step);
		held_check(step, false);
		if (step % 97 == 0)
			check_counts(step);
	}
	printf("kvstore model test: %lu batches (%lu ENOSPC), %lu entry errors, %lu streams, "
	       "%lu losses, %lu deletes (%lu ok), %lu refills (%lu ok, %lu token-buffers checked)\n",
	       cnt.evicts, cnt.enospc, cnt.codes, cnt.data, cnt.losses, cnt.deletes, cnt.deletes_ok,
	       cnt.refills, cnt.refills_ok, cnt.tokens_checked);
	held_check(steps, true);
	printf("kvstore model test: %lu refills held across operations, %lu slot-short refusals; "
	       "%lu refused EVICTs tried again with the room unchanged (refused again), %lu after "
	       "it changed\n", cnt.held, cnt.slot_short, cnt.room_same, cnt.room_changed);
	cr_assert_gt(cnt.room_same, 100, "the room-unchanged retry exercised");
	cr_assert_gt(cnt.held, 1000);
	/* A run that exercised too little proves nothing. */
	cr_assert_gt(cnt.evicts, 10000);
	cr_assert_gt(cnt.enospc, 100);
	cr_assert_gt(cnt.losses, 1000);
	cr_assert_gt(cnt.deletes_ok, 2000);
	cr_assert_gt(cnt.refills_ok, 5000);
	cr_assert_gt(cnt.tokens_checked, 80000); /* v2: a loss refuses growth until a DELETE */
	/* Drain, then delete everything: the store is back to where it began. */
	while (nopen > 0) {
		for (c = 0; c < NC; c++)
			if (!open_b[0].sent[c]) {
				uint32_t len = open_b[0].g * Bc[c];

				cr_assert_eq(kvstore_data(s, open_b[0].no, (uint16_t)c, 0, len,
							  open_b[0].stream[c], len), 0);
				open_b[0].sent[c] = true;
			}
		model_advance();
	}
	check_counts(steps);
	for (c = 0; c < NC; c++)
		for (i = 0; i < NIDS; i++)
			if (model[c][i].live) {
				struct proto_delete d = {ids[i], 0, model[c][i].offset,
							 model[c][i].offset + model[c][i].n_claim + 5,
							 (uint16_t)c};

				cr_assert_eq(kvstore_delete(s, &d), 0);
				model[c][i].lost_at = UINT32_MAX;
				model_truncate((uint16_t)c, (int)i, 0, false);
			}
	check_counts(steps + 1);
	for (c = 0; c < NC; c++) {
		struct kvstore_cache_stats st;

		kvstore_cache_stats(s, (uint16_t)c, &st);
		cr_assert_eq(st.prompts, 0);
		cr_assert_eq(st.stored_tokens, 0);
		cr_assert_eq(st.limbo_slots, 0);
		cr_assert_eq(st.free_slots, st0[c].free_slots, "cache %u: %" PRIu64 " free slots, want %" PRIu64,
			     c, st.free_slots, st0[c].free_slots);
	}
	free(mem);
}

Test(model, matches_the_reference_over_100k_random_operations, .timeout = 300)
{
	model_run(64);
}

/*
 * Catches: the store and the reference parting where EVICTs are refused for
 * want of a slot, and such a refusal run again while the room says
 * unchanged (the run with slots to spare has no such refusal). A refill's
 * end unseen by kvstore_room is test_kvstore's case: here other operations
 * change the room first.
 */
Test(model, matches_the_reference_with_slots_short_too, .timeout = 300)
{
	model_run(8);
	cr_assert_gt(cnt.slot_short, 100, "refusals for want of a slot exercised");
}
