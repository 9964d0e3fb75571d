/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * What the shard sends, checked as the fuzzer's driver and wafer take it
 * (fuzz_shard.c has the design). Every frame must parse. Then:
 *
 *  - REFILL_DATA: every token refilled is byte for byte what one complete
 *    batch wrote: each buffer's slice carries the wafer's tag (fz_slice),
 *    all of a token's slices the same one, of that token (or, for a token
 *    an L2_UP brought, of whatever token its column held; zeros where an
 *    L2_UP named a token no column covered), of a batch complete when the
 *    frame left. A REFILL_DONE says as many tokens and bytes as came.
 *  - STATUS: stored tokens within capacity in both tiers; the inventory
 *    without a column twice, and as many columns as STATUS counts.
 *  - ACK: cum_seq <= recv_seq, nothing acknowledged that was not sent.
 *  - Reports (ERROR, TOKEN_LOST, L2_DONE) taken once, in order, as a
 *    driver does.
 *  - The shared level: an SH_DOWN's records each get one L2_DONE (op 3),
 *    the shard's own at once or the level's thread's (0, SHARED_FAILED)
 *    later; an SH_UP's columns are never answered NO_TIER; a read the
 *    cluster lied in is refused (fuzz_shard_rados.c checks it), and what
 *    the shard writes there is checked as it goes.
 *  - The second tier against the driver's model (at the end of the
 *    input): the columns held are the distinct keys the L2_DOWNs and
 *    L2_DELETEs that ran leave, in seq order, on the inventory the stream
 *    began with; an L2_DELETE fails exactly when its column is not there;
 *    an L2_DOWN is refused NO_SPACE only when no slot is free (the columns
 *    held, and a replacement's old one while the new one is written).
 *
 * The model-based checks stand down when an input had the shard accept a
 * message the model cannot follow (OP_RAW: fz.tainted), or lose one (a
 * queue full, the window passed).
 */
#include <inttypes.h>
#include <sanitizer/asan_interface.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rte_mbuf.h>

#include "fuzz_shard.h"
#include "kvss.h"
#include "shard/shard.h"

#define HELD_MAX 2048
#define HELD_SEGS_MAX 4096 /* mbufs of held frames: half of kvss.pool */
#define DONE_MAX 1024
#define INV_MAX 64
#define NKEY 7 /* keys 0..6 */
#define NORG 3 /* orgs 1, 2 (0 unused) */

/* A column as the driver names it. */
struct col {
	uint16_t cache;
	uint64_t key, org;
};

static struct {
	bool hold;
	struct rte_mbuf *held[HELD_MAX];
	unsigned int nheld, held_segs;
	uint64_t rep_taken;		    /* reports taken in order */
	struct proto_l2done done[DONE_MAX]; /* L2_DONE records of this poll */
	uint64_t done_seq[DONE_MAX];	    /* ... the L2_DOWN's seq, for the shard's own answers */
	unsigned int ndone;
	/* The inventory being received; the last whole one. */
	struct col inv[INV_MAX];
	unsigned int ninv;
	bool inv_bad;
	/* The stream's first inventory: what its L2 held when it began. */
	uint32_t base_epoch;
	bool base_known;
	uint32_t base[FZ_CACHES]; /* a bit per (key, org) */
	/* The look at the end: its STATUS and inventory. */
	bool final_mark, final_status, final_inv;
	uint64_t status_l2[FZ_CACHES];
	uint32_t inv_set[FZ_CACHES];
	uint32_t uncertain[FZ_CACHES]; /* columns dropped by a failed read: the model cannot say */
} C;

static struct proto_msg rx; /* one lcore at a time sends (the turns of fuzz_shard_env.c) */

/* How much the checks saw, for FUZZ_SHARD_STATS=1 (printed at exit). */
static struct {
	uint64_t inputs, refills, tokens, tokens_l2, zeros, l2_exact, l2_waiting, l2_unknown,
		tainted, statuses, inventories;
} N;

static void
print_counts(void)
{
	fprintf(stderr,
		"fuzz_shard: %" PRIu64 " inputs: refills checked %" PRIu64 " (%" PRIu64
		" tokens, %" PRIu64 " from L2, %" PRIu64 " zeros); second tier exact %" PRIu64
		", waiting %" PRIu64 ", start unknown %" PRIu64 ", tainted %" PRIu64
		"; STATUS %" PRIu64 ", inventories %" PRIu64 "\n",
		N.inputs, N.refills, N.tokens, N.tokens_l2, N.zeros, N.l2_exact, N.l2_waiting,
		N.l2_unknown, N.tainted, N.statuses, N.inventories);
}

static inline unsigned int
bit(uint64_t key, uint64_t org)
{
	return (unsigned int)(key * NORG + org);
}

static bool
is_col(uint16_t cache, uint64_t key, uint64_t org)
{
	return cache < FZ_CACHES && key < NKEY && org < NORG;
}

void
fz_check_begin(bool hold_refills)
{
	static bool said;

	if (!said && getenv("FUZZ_SHARD_STATS") != NULL)
		atexit(print_counts);
	said = true;
	memset(&C, 0, sizeof(C));
	C.hold = hold_refills;
	N.inputs++;
}

void
fz_check_release(void)
{
	rte_pktmbuf_free_bulk(C.held, C.nheld);
	C.nheld = 0;
	C.held_segs = 0;
}

unsigned int
fz_check_held(void)
{
	return C.nheld;
}

void
fz_check_final_look(void)
{
	C.final_mark = true;
	C.final_status = C.final_inv = false;
}

/* ---- STATUS, ACK ------------------------------------------------------------------ */

static void
check_status(const struct proto_msg *m)
{
	const struct kvstore_params *kp = &fz_shard->cfg->store;
	unsigned int i;

	N.statuses++;
	if (m->hdr.count != FZ_CACHES)
		fz_fail("STATUS with %u caches", m->hdr.count);
	for (i = 0; i < m->hdr.count; i++) {
		struct proto_cache_info ci;

		proto_get_cache_info(m, i, &ci);
		if (ci.capacity_tokens != FZ_CAPACITY || ci.stored_tokens > ci.capacity_tokens)
			fz_fail("STATUS cache %u: %" PRIu64 " tokens stored, capacity %" PRIu64, i,
				ci.stored_tokens, ci.capacity_tokens);
		if (ci.prompts > kp->max_prompts)
			fz_fail("STATUS cache %u: %" PRIu64 " prompts, at most %u", i, ci.prompts,
				kp->max_prompts);
		if (ci.l2_capacity_tokens != FZ_COLUMN * FZ_L2_SLOTS ||
		    ci.l2_stored_tokens > ci.l2_capacity_tokens || ci.l2_stored_tokens % FZ_COLUMN)
			fz_fail("STATUS cache %u: L2 %" PRIu64 " tokens stored, capacity %" PRIu64,
				i, ci.l2_stored_tokens, ci.l2_capacity_tokens);
		if (C.final_mark && !C.final_status)
			C.status_l2[i] = ci.l2_stored_tokens;
	}
	if (C.final_mark)
		C.final_status = true;
}

static void
check_ack(const struct proto_msg *m)
{
	if (m->u.ack.cum_seq > m->u.ack.recv_seq)
		fz_fail("ACK cum_seq %" PRIu64 " past recv_seq %" PRIu64, m->u.ack.cum_seq,
			m->u.ack.recv_seq);
	if (!fz.tainted && fz_shard->driver_epoch == fz.epoch && m->u.ack.recv_seq >= fz.next_seq)
		fz_fail("ACK recv_seq %" PRIu64 ": only %" PRIu64 " sent", m->u.ack.recv_seq,
			fz.next_seq - 1);
}

/* ---- The inventory ------------------------------------------------------------------ */

static void
take_inventory(const struct proto_msg *m)
{
	uint32_t total, first, i, k;
	uint32_t set[FZ_CACHES] = {0}, per[FZ_CACHES] = {0};

	proto_get_l2_inventory_hdr(m, &total, &first);
	if (first == 0) {
		C.ninv = 0;
		C.inv_bad = false;
	}
	if (first != C.ninv)
		fz_fail("L2_INVENTORY frame from column %u, %u taken", first, C.ninv);
	for (i = 0; i < m->hdr.count; i++) {
		struct proto_l2col c;

		proto_get_l2_inventory(m, i, &c);
		if (C.ninv == INV_MAX || !is_col(c.cache_id, c.key, c.isolation_id)) {
			if (!fz.tainted)
				fz_fail("L2_INVENTORY lists cache %u key %" PRIu64 " org %" PRIu64
					": no driver sent it down",
					c.cache_id, c.key, c.isolation_id);
			C.inv_bad = true;
			continue;
		}
		C.inv[C.ninv++] =
			(struct col){.cache = c.cache_id, .key = c.key, .org = c.isolation_id};
	}
	if (first + m->hdr.count < total)
		return;
	/* Whole: no column twice, no more than the tier holds. */
	N.inventories++;
	for (i = 0; i < C.ninv; i++) {
		const struct col *c = &C.inv[i];

		if (set[c->cache] & (1u << bit(c->key, c->org)))
			fz_fail("L2_INVENTORY lists cache %u key %" PRIu64 " org %" PRIu64 " twice",
				c->cache, c->key, c->org);
		set[c->cache] |= 1u << bit(c->key, c->org);
		per[c->cache]++;
	}
	for (k = 0; k < FZ_CACHES; k++)
		if (per[k] > FZ_L2_SLOTS)
			fz_fail("L2_INVENTORY: %u columns of cache %u, room for %u", per[k], k,
				FZ_L2_SLOTS);
	if (C.inv_bad)
		return;
	/* The first of a stream: what the driver takes back (its model's start). */
	if (C.base_epoch != fz.epoch && fz_shard->driver_epoch == fz.epoch) {
		C.base_epoch = fz.epoch;
		C.base_known = true;
		memcpy(C.base, set, sizeof(set));
		memset(C.uncertain, 0, sizeof(C.uncertain));
	}
	if (C.final_mark && C.final_status && !C.final_inv) {
		C.final_inv = true;
		memcpy(C.inv_set, set, sizeof(set));
	}
}

/* ---- Reports ------------------------------------------------------------------------- */

static void
take_error(const struct proto_msg *m)
{
	unsigned int i, k, r;

	for (i = 0; i < m->hdr.count; i++) {
		struct proto_error e;

		proto_get_error(m, i, &e);
		/* An L2_DELETE's: its column was not there (the model knows if it should be). */
		for (k = 0; k < fz.nl2; k++) {
			struct fz_l2msg *l = &fz.l2[k];

			if (l->seq != e.seq || l->type != PROTO_T_L2_DELETE)
				continue;
			for (r = 0; r < l->nrec; r++)
				if (l->rec[r].key == e.prompt_id && l->rec[r].cache == e.cache_id) {
					l->rec[r].errors++;
					break;
				}
		}
	}
}

/* Did the shard drop frames it sent (out of mbufs, a TX that took nothing)? */
static bool
tx_lossy(void)
{
	unsigned int l;

	for (l = 0; l < 2; l++)
		if (kvss.stats[l].no_mbuf != 0 || kvss.stats[l].tx_drops != 0)
			return true;
	return false;
}

static void
take_report(const struct proto_msg *m)
{
	uint64_t seq = m->hdr.seq;
	unsigned int i;

	if (seq != 0) {
		if (seq == 1 && !(m->hdr.flags & PROTO_F_RETRANSMIT))
			C.rep_taken = 0; /* a new stream's reports */
		if (seq <= C.rep_taken)
			return; /* again: a driver takes it once */
		if (seq != C.rep_taken + 1 && !tx_lossy())
			fz_fail("report seq %" PRIu64 " after %" PRIu64 ": one lost on a lossless link",
				seq, C.rep_taken);
		if (seq != C.rep_taken + 1)
			fz.tainted = true; /* lost to the shard's own TX: what it said is not known */
		C.rep_taken = seq;
	}
	if (fz_shard->driver_epoch != fz.epoch)
		return; /* of a stream the driver has left */
	if (m->hdr.type == PROTO_T_ERROR) {
		take_error(m);
	} else if (m->hdr.type == PROTO_T_L2_DONE) {
		/*
		 * The shard's own answers (the column could not be read out of
		 * DRAM) leave from inside shard_level_run, which both the refill
		 * queue and the refill lcore's hand-back run on st->msg2: that
		 * says whose they are, which the records (no seq) do not.
		 */
		for (i = 0; i < m->hdr.count && C.ndone < DONE_MAX; i++) {
			C.done_seq[C.ndone] = fz_shard->st->msg2.hdr.seq;
			proto_get_l2_done(m, i, &C.done[C.ndone++]);
		}
	}
}

/* ---- Refills -------------------------------------------------------------------------- */

static uint32_t
bpt_of(uint16_t cache)
{
	return cache == 0 ? FZ_B0 : FZ_B1;
}

static bool
named_l2(const struct fz_refill *f, uint16_t c, uint32_t p, uint32_t t)
{
	return c < FZ_CACHES && p < FZ_PROMPTS && t < FZ_TOKENS &&
	       (fz.named_l2[f->gen & 1][c][p][t / 8] & (1u << (t % 8)));
}

/*
 * What came of each refill (its buffers' bytes, a byte each saying which
 * came, the batches complete as each token left) lives in memory of its
 * slot (by its id), kept from input to input: calloc'd for each refill
 * and freed as the input ended, it was fresh memory every time (ASan's
 * quarantine), a page fault a page. A refill's blocks are carved from its
 * slot's as calloc would give them (zeros, 16-byte aligned) with a
 * poisoned gap between them, and all of it is poisoned again as the input
 * ends: a read past a block, or of an input before, is a report as on the
 * heap.
 */
static struct {
	uint8_t *b;
	size_t cap, used;
} rmem[FZ_MAX_REFILLS];

#define ALIGN16(n) (((n) + 15) & ~(size_t)15)

/* @p n zeros for refill @p f (the blocks of one refill fit its slot: sized for them all). */
static void *
refill_calloc(const struct fz_refill *f, size_t n)
{
	size_t buf = ALIGN16((size_t)f->tokens * FZ_SLICE + 1) + 16;
	size_t need = 8 * buf + ALIGN16(((size_t)f->tokens * 4 + 1) * sizeof(*f->bc)) + 16;
	__typeof__(rmem[0]) *m = &rmem[f->id - 1];
	uint8_t *p;

	if (m->used == 0 && m->cap < need) {
		free(m->b);
		m->cap = need;
		if ((m->b = malloc(m->cap)) == NULL)
			fz_fail("no memory for refill %" PRIu64, f->id);
		ASAN_POISON_MEMORY_REGION(m->b, m->cap);
	}
	if (m->used + ALIGN16(n) + 16 > m->cap)
		fz_fail("refill %" PRIu64 ": its blocks outgrow its slot", f->id);
	p = m->b + m->used;
	m->used += ALIGN16(n) + 16;
	ASAN_UNPOISON_MEMORY_REGION(p, n);
	memset(p, 0, n);
	return p;
}

void
fz_check_end(void)
{
	uint64_t i;

	for (i = 0; i < fz.refill_id && i < FZ_MAX_REFILLS; i++)
		if (rmem[i].used != 0) {
			ASAN_POISON_MEMORY_REGION(rmem[i].b, rmem[i].cap);
			rmem[i].used = 0;
		}
}

static bool
take_refill_data(struct rte_mbuf *m, const struct proto_msg *msg, uint16_t queue)
{
	const struct proto_refill_data_hdr *h = &msg->u.refill_data;
	struct fz_refill *f = fz_refill_find(h->refill_id);
	uint32_t nb, len = msg->data_len, x, t;
	uint64_t bc = kvstore_batches_complete(fz_shard->store);
	const uint8_t *p;

	if (f != NULL && fz_shard->driver_epoch != FZ_EPOCH(f->gen))
		bc = UINT64_MAX; /* the store is another stream's now: its count says nothing */
	if (f == NULL || f->done) {
		if (!fz.tainted)
			fz_fail("REFILL_DATA of refill %" PRIu64 ", which is not in flight",
				h->refill_id);
		return false;
	}
	nb = bpt_of(f->cache) / FZ_SLICE;
	if (h->cache_id != f->cache || h->buffer_id >= nb || h->sequence_id != 11 ||
	    h->cache_idx != 22 || h->stream_len != f->tokens * FZ_SLICE ||
	    (uint64_t)h->stream_offset + len > h->stream_len)
		fz_fail("REFILL_DATA of refill %" PRIu64
			": cache %u buffer %u offset %u len %u stream "
			"%u; asked cache %u, %u tokens",
			h->refill_id, h->cache_id, h->buffer_id, h->stream_offset, len,
			h->stream_len, f->cache, f->tokens);
	if (f->bytes[h->buffer_id] == NULL) {
		f->bytes[h->buffer_id] = refill_calloc(f, f->tokens * FZ_SLICE + 1);
		f->have[h->buffer_id] = refill_calloc(f, f->tokens * FZ_SLICE + 1);
	}
	if (f->bc == NULL)
		f->bc = refill_calloc(f, ((size_t)f->tokens * 4 + 1) * sizeof(*f->bc));
	p = rte_pktmbuf_read(m, msg->data_off, len, rx.scratch);
	for (x = 0; x < len; x++) {
		uint32_t o = h->stream_offset + x;

		if (f->have[h->buffer_id][o])
			fz_fail("REFILL_DATA of refill %" PRIu64
				" sends byte %u of buffer %u twice",
				f->id, o, h->buffer_id);
		f->have[h->buffer_id][o] = 1;
		f->bytes[h->buffer_id][o] = p[x];
	}
	/* The batches complete now: whatever the frame holds was read before. */
	for (t = h->stream_offset / FZ_SLICE; len && t <= (h->stream_offset + len - 1) / FZ_SLICE;
	     t++)
		if (f->bc[t * 4 + h->buffer_id] < bc)
			f->bc[t * 4 + h->buffer_id] = bc;
	f->data_bytes += len;
	(void)queue;
	/* In flight: the store keeps its memory as it is. At most half the pool
	 * held, so that the shard's replies still find mbufs. */
	if (!C.hold || C.nheld == HELD_MAX || C.held_segs + m->nb_segs > HELD_SEGS_MAX ||
	    __atomic_load_n(&kvss.quit, __ATOMIC_ACQUIRE))
		return false;
	C.held_segs += m->nb_segs;
	C.held[C.nheld++] = m;
	return true;
}

/* The prompt and token of the refill's glued token @p i. */
static void
glued(const struct fz_refill *f, uint32_t i, uint32_t *p, uint32_t *t)
{
	uint32_t k;

	for (k = 0; k < f->nchunks; k++) {
		if (i < f->chunk[k].n) {
			*p = f->chunk[k].prompt;
			*t = f->chunk[k].start + i;
			return;
		}
		i -= f->chunk[k].n;
	}
	*p = *t = 0;
}

struct tag {
	uint64_t batch;
	uint32_t idx, prompt, token;
	uint16_t gen; /* the stream that wrote it */
	int kind;     /* 0 zeros, 1 a tag and its bytes, -1 neither */
};

/*
 * What slice @p s of buffer @p buf holds. The refill's own stream wrote it,
 * or (a column the second tier kept across a new driver epoch) one before.
 */
static struct tag
read_slice(const struct fz_refill *f, const uint8_t *s, uint16_t buf)
{
	struct tag g = {0};
	uint8_t want[FZ_SLICE];
	unsigned int k;

	for (k = 0; k < FZ_SLICE && s[k] == 0; k++)
		;
	if (k == FZ_SLICE)
		return g;
	g.batch = proto_ld32(s);
	g.idx = proto_ld16(s + 4);
	g.prompt = proto_ld16(s + 6);
	g.token = proto_ld32(s + 8);
	g.kind = -1;
	for (g.gen = f->gen; g.gen >= 1; g.gen--) {
		fz_slice(want, g.gen, g.batch, (uint16_t)g.idx, g.prompt, g.token, f->cache, buf);
		if (memcmp(want, s, FZ_SLICE) == 0) {
			g.kind = 1;
			break;
		}
	}
	return g;
}

/* Two slices of one token carry the same write. */
static bool
same_tag(const struct tag *a, const struct tag *b)
{
	return a->kind == b->kind && a->batch == b->batch && a->idx == b->idx &&
	       a->prompt == b->prompt && a->token == b->token && a->gen == b->gen;
}

bool
fz_token_written(uint16_t cache, const uint8_t *bytes)
{
	struct fz_refill f = {.gen = fz.gen, .cache = cache};
	uint32_t nb = bpt_of(cache) / FZ_SLICE, u;
	struct tag g0 = read_slice(&f, bytes, 0), g;

	if (g0.kind < 0)
		return false;
	for (u = 1; u < nb; u++) {
		g = read_slice(&f, bytes + (size_t)u * FZ_SLICE, (uint16_t)u);
		if (!same_tag(&g, &g0))
			return false;
	}
	return true;
}

static void
check_refilled_tokens(const struct fz_refill *f)
{
	uint32_t nb = bpt_of(f->cache) / FZ_SLICE, i, u;
	bool now = f->gen == fz.gen;

	if (fz.tainted || (f->gen != fz.gen && f->gen + 1 != fz.gen))
		return;
	N.refills++;
	N.tokens += f->tokens;
	for (i = 0; i < f->tokens; i++) {
		struct tag g[4];
		uint32_t p, t;

		glued(f, i, &p, &t);
		for (u = 0; u < nb; u++)
			g[u] = read_slice(f, f->bytes[u] + (size_t)i * FZ_SLICE, (uint16_t)u);
		for (u = 1; u < nb; u++)
			if (!same_tag(&g[u], &g[0]))
				break;
		if (u < nb || g[0].kind < 0) {
			char why[256];
			int n = 0;

			for (u = 0; u < nb; u++)
				n += snprintf(why + n, sizeof(why) - (size_t)n,
					      " [buffer %u: %s batch %" PRIu64
					      " entry %u prompt %u token %u]",
					      u,
					      g[u].kind == 0  ? "zeros"
					      : g[u].kind > 0 ? "written by"
							      : "garbage,",
					      g[u].batch, g[u].idx, g[u].prompt, g[u].token);
			fz_fail("refill %" PRIu64
				" cache %u: token %u of prompt %u is not one batch's "
				"write:%s",
				f->id, f->cache, t, p, why);
		}
		N.zeros += g[0].kind == 0;
		N.tokens_l2 += g[0].kind > 0 && (g[0].prompt != p || g[0].token != t);
		if (g[0].kind == 0 && !named_l2(f, f->cache, p, t))
			fz_fail("refill %" PRIu64
				" cache %u: token %u of prompt %u is zeros, and no L2_UP "
				"named it",
				f->id, f->cache, t, p);
		if (g[0].kind > 0 && (g[0].prompt != p || g[0].token != t || g[0].gen != f->gen) &&
		    !named_l2(f, f->cache, p, t))
			fz_fail("refill %" PRIu64
				" cache %u: token %u of prompt %u holds token %u of "
				"prompt %u (batch %" PRIu64 ")",
				f->id, f->cache, t, p, g[0].token, g[0].prompt, g[0].batch);
		for (u = 0; now && g[0].kind > 0 && g[0].gen == f->gen && u < nb; u++)
			if (g[0].batch > f->bc[i * 4 + u])
				fz_fail("refill %" PRIu64
					" cache %u: token %u of prompt %u, buffer %u, from "
					"batch %" PRIu64 " while %" PRIu64
					" were complete: an open batch seen",
					f->id, f->cache, t, p, u, g[0].batch, f->bc[i * 4 + u]);
	}
}

static void
take_refill_done(const struct proto_msg *m)
{
	unsigned int i;

	for (i = 0; i < m->hdr.count; i++) {
		struct proto_refill_done d;
		struct fz_refill *f;

		proto_get_refill_done(m, i, &d);
		f = fz_refill_find(d.refill_id);
		if (f == NULL || f->done) {
			if (!fz.tainted)
				fz_fail("REFILL_DONE of refill %" PRIu64 ", which is not in flight",
					d.refill_id);
			continue;
		}
		f->done = true;
		if (d.status != 0) {
			if (d.tokens != 0 || d.bytes != 0)
				fz_fail("REFILL_DONE of refill %" PRIu64 ": %s with %u tokens",
					f->id, proto_err_name(d.status), d.tokens);
			continue;
		}
		if (d.tokens != f->tokens || d.bytes != (uint64_t)f->tokens * bpt_of(f->cache) ||
		    f->data_bytes != d.bytes)
			fz_fail("REFILL_DONE of refill %" PRIu64 " (cache %u, %u tokens: %" PRIu64
				" bytes): OK with %u tokens and %" PRIu64 " bytes; %" PRIu64
				" bytes of REFILL_DATA came",
				f->id, f->cache, f->tokens, (uint64_t)f->tokens * bpt_of(f->cache),
				d.tokens, d.bytes, f->data_bytes);
		check_refilled_tokens(f);
	}
}

/* ---- Every frame ----------------------------------------------------------------------- */

bool
fz_check_tx(struct rte_mbuf *m, uint16_t queue)
{
	enum proto_reason r = proto_parse_mbuf(m, &proto_ports_default, &rx);

	if (r != PROTO_OK)
		fz_fail("the shard sent a frame that does not parse: %s", proto_reason_name(r));
	if (fz_trace) {
		char x[160] = "";

		if (rx.hdr.type == PROTO_T_ERROR || rx.hdr.type == PROTO_T_L2_DONE) {
			int n = 0;
			unsigned int i;

			for (i = 0; i < rx.hdr.count && n < 120; i++) {
				struct proto_error e;
				struct proto_l2done d;

				if (rx.hdr.type == PROTO_T_ERROR) {
					proto_get_error(&rx, i, &e);
					n += snprintf(x + n, sizeof(x) - (size_t)n,
						      " [seq %" PRIu64 " %" PRIu64 "/%u c%u %s]",
						      e.seq, e.prompt_id, e.token_idx, e.cache_id,
						      proto_err_name(e.code));
				} else {
					proto_get_l2_done(&rx, i, &d);
					n += snprintf(x + n, sizeof(x) - (size_t)n,
						      " [op%u c%u key %" PRIu64 " org %" PRIu64
						      " %s]",
						      d.op, d.cache_id, d.key, d.isolation_id,
						      d.status ? proto_err_name(d.status) : "ok");
				}
			}
		} else if (rx.hdr.type == PROTO_T_ACK) {
			snprintf(x, sizeof(x), " cum %" PRIu64 " recv %" PRIu64, rx.u.ack.cum_seq,
				 rx.u.ack.recv_seq);
		}
		fprintf(stderr, "  sent %s%s seq %" PRIu64 " count %u%s\n",
			proto_type_name(rx.hdr.type), queue ? " (refill lcore)" : "", rx.hdr.seq,
			rx.hdr.count, x);
	}
	switch (rx.hdr.type) {
	case PROTO_T_STATUS:
		check_status(&rx);
		break;
	case PROTO_T_ACK:
		check_ack(&rx);
		break;
	case PROTO_T_ERROR:
	case PROTO_T_TOKEN_LOST:
	case PROTO_T_L2_DONE:
		take_report(&rx);
		break;
	case PROTO_T_REFILL_DONE:
		take_refill_done(&rx);
		break;
	case PROTO_T_REFILL_DATA:
		return take_refill_data(m, &rx, queue);
	case PROTO_T_L2_INVENTORY:
		take_inventory(&rx);
		break;
	default:
		fz_fail("the shard sent %s", proto_type_name(rx.hdr.type));
	}
	return false;
}

/* ---- The second tier's answers, matched to what was sent --------------------------------- */

static bool
tier_code(uint16_t status)
{
	return status == 0 || status == PROTO_E_NO_SPACE || status == PROTO_E_L2_FAILED;
}

/* An SH_DOWN's answer from the shared level's thread (else the shard's own, at once). */
static bool
sh_code(uint16_t status)
{
	return status == 0 || status == PROTO_E_SHARED_FAILED;
}

/*
 * At the end of each ingest poll. L2_DOWN records get their L2_DONE in one
 * of two ways: at once, when the shard cannot read the column out of DRAM
 * (UNKNOWN_PROMPT, RANGE, BAD_CACHE: in the poll that ran the message), or
 * from the tier thread (written, NO_SPACE, L2_FAILED: a later poll, the
 * tier running only between polls). The messages that ran in this poll
 * are those l2down_done passed, the shard's own answers each noted with
 * its message (take_report); a tier answer is the oldest record of its
 * column waiting for one.
 */
void
fz_check_poll_end(void)
{
	uint64_t done = fz_shard->st->l2down_done;
	unsigned int i, k, r;

	if (fz_shard->driver_epoch != fz.epoch) {
		C.ndone = 0; /* the shard has not taken the driver's new stream yet */
		return;
	}
	for (i = 0; i < C.ndone; i++) {
		const struct proto_l2done *d = &C.done[i];
		bool found = false;

		if (d->op == 2 || d->op == 4) {
			/* An L2_UP's column (an SH_UP's from the disk): gone
			 * (checksum), or never there. An SH_UP's from the shared
			 * level: missing, failed or refused, nothing the model keeps. */
			if (d->status == PROTO_E_L2_FAILED &&
			    is_col(d->cache_id, d->key, d->isolation_id))
				C.uncertain[d->cache_id] |= 1u << bit(d->key, d->isolation_id);
			if (d->op == 4 && d->status == PROTO_E_NO_TIER)
				fz_fail("SH_UP of cache %u key %" PRIu64
					" answered NO_TIER by a shard with both levels",
					d->cache_id, d->key);
			continue;
		}
		if (d->op != 1 && d->op != 3)
			fz_fail("L2_DONE op %u", d->op);
		if (!(d->op == 1 ? tier_code(d->status) : sh_code(d->status)))
			continue; /* the shard's own answer: below */
		for (k = 0; k < fz.nl2 && !found; k++)
			for (r = 0; r < fz.l2[k].nrec && !found; r++) {
				struct fz_l2rec *x = &fz.l2[k].rec[r];

				if (fz.l2[k].type == (d->op == 1 ? PROTO_T_L2_DOWN : PROTO_T_SH_DOWN) &&
				    x->outcome == L2O_TIER_PENDING && x->cache == d->cache_id &&
				    x->key == d->key && x->org == d->isolation_id) {
					x->outcome = L2O_DONE;
					x->status = d->status;
					found = true;
				}
			}
		if (!found && !fz.tainted)
			fz_fail("L2_DONE op %u (%s) for cache %u key %" PRIu64 " org %" PRIu64
				": no %s of it waits for its level",
				d->op, d->status ? proto_err_name(d->status) : "ok", d->cache_id,
				d->key, d->isolation_id, d->op == 1 ? "L2_DOWN" : "SH_DOWN");
	}
	for (k = 0; k < fz.nl2; k++) {
		struct fz_l2msg *l = &fz.l2[k];
		uint8_t op = l->type == PROTO_T_SH_DOWN ? 3 : 1;

		if ((l->type != PROTO_T_L2_DOWN && l->type != PROTO_T_SH_DOWN) || l->ran ||
		    l->seq > done)
			continue;
		l->ran = true;
		l->poll = fz.iter;
		for (r = 0; r < l->nrec; r++) {
			struct fz_l2rec *x = &l->rec[r];

			x->outcome = L2O_TIER_PENDING;
			for (i = 0; i < C.ndone; i++) {
				struct proto_l2done *d = &C.done[i];

				if (d->op == op &&
				    !(op == 1 ? tier_code(d->status) : sh_code(d->status)) &&
				    C.done_seq[i] == l->seq &&
				    d->cache_id == x->cache && d->key == x->key &&
				    d->isolation_id == x->org) {
					x->outcome = L2O_DONE;
					x->status = d->status;
					d->op = 0; /* taken */
					break;
				}
			}
		}
	}
	C.ndone = 0;
}

/* ---- The end of the input ----------------------------------------------------------------- */

/*
 * Both tiers against the driver's model, after the drain and the look.
 * Exact only when every L2 message of the stream ran: the drain lets
 * everything run whose batches came; an evict_count never reached keeps a
 * message (and those behind it in the refill queue) waiting for ever.
 */
/* FUZZ_SHARD_TRACE: the shard's counters at the end of the input, beside its log. */
static void
trace_counters(void)
{
	struct kvss_lcore_stats t;
	struct kvstore_stats ks;

	if (!fz_trace)
		return;
	kvss_stats_total(&t);
	kvstore_stats(fz_shard->store, &ks);
	fprintf(stderr,
		"counters: batches %" PRIu64 " lost %" PRIu64 " evict_waits %" PRIu64
		" evict_after_delete %" PRIu64 " data_frames %" PRIu64 " data_dropped %" PRIu64
		" refills %" PRIu64 " deletes %" PRIu64 " l2_down %" PRIu64 " l2_up %" PRIu64
		" l2_errors %" PRIu64 " queue_full %" PRIu64 " out_of_window %" PRIu64
		"; store: batches opened %" PRIu64 " complete %" PRIu64 " oldest open %" PRIu64
		"; evict queue %u, refill queue %u\n",
		t.batches, t.batches_lost, t.evict_waits, t.evict_after_delete, t.data_frames,
		t.data_dropped, t.refills, t.deletes, t.l2_down, t.l2_up, t.l2_errors, t.queue_full,
		t.out_of_window, ks.batches_opened, kvstore_batches_complete(fz_shard->store),
		kvstore_oldest_open(fz_shard->store),
		fz_shard->st->evictq.tail - fz_shard->st->evictq.head,
		fz_shard->st->refillq.tail - fz_shard->st->refillq.head);
}

void
fz_check_final(void)
{
	const struct kvss_lcore_stats *s = &kvss.stats[0];
	uint32_t held[FZ_CACHES], start[FZ_CACHES] = {0, 0}, extra[FZ_CACHES] = {0, 0};
	uint64_t burst = 0;
	unsigned int k, r;
	uint16_t c;

	trace_counters();
	if (!C.final_status || !C.final_inv) {
		if (tx_lossy())
			return; /* lost to the shard's own TX, out of mbufs */
		fz_fail("the look at the end got no STATUS or no inventory");
	}
	for (c = 0; c < FZ_CACHES; c++)
		if (C.status_l2[c] != (uint64_t)__builtin_popcount(C.inv_set[c]) * FZ_COLUMN)
			fz_fail("STATUS says %" PRIu64
				" L2 tokens of cache %u, the inventory %u columns "
				"of %u",
				C.status_l2[c], c, __builtin_popcount(C.inv_set[c]), FZ_COLUMN);
	N.tainted += fz.tainted;
	if (!C.base_known || C.base_epoch != fz.epoch)
		N.l2_unknown++;
	if (fz.tainted || !C.base_known || C.base_epoch != fz.epoch || s->queue_full ||
	    s->out_of_window)
		return;
	/*
	 * Every message of the refill queue whose batches came has run (the
	 * drain). One that waits for a batch never sent holds those behind it:
	 * then the model cannot say which ran.
	 */
	if (fz.max_gate > kvstore_batches_complete(fz_shard->store)) {
		N.l2_waiting++;
		return;
	}
	N.l2_exact++;
	for (k = 0; k < fz.nl2; k++) {
		const struct fz_l2msg *l = &fz.l2[k];

		if ((l->type == PROTO_T_L2_DOWN || l->type == PROTO_T_SH_DOWN) && !l->ran)
			fz_fail("%s seq %" PRIu64 " never ran, its batches complete",
				proto_type_name(l->type), l->seq);
		/* Every SH_DOWN record answered once (held writes released by the drain). */
		for (r = 0; l->type == PROTO_T_SH_DOWN && r < l->nrec; r++)
			if (l->rec[r].outcome != L2O_DONE)
				fz_fail("SH_DOWN seq %" PRIu64 " of cache %u key %" PRIu64
					" org %" PRIu64 ": no L2_DONE",
					l->seq, l->rec[r].cache, l->rec[r].key, l->rec[r].org);
	}
	memcpy(held, C.base, sizeof(held));
	for (k = 0; k < fz.nl2; k++) {
		const struct fz_l2msg *l = &fz.l2[k];
		unsigned int want[2] = {0, 0};

		if (l->type == PROTO_T_SH_DOWN)
			continue; /* the shared level: not the disk's columns */

		if (l->type == PROTO_T_L2_DOWN && l->poll != burst) {
			/*
			 * The tier takes one poll's requests together, a burst,
			 * and answers them in the order its writes end: a record
			 * refused NO_SPACE may have waited on any write of its
			 * burst, whichever the model matched its answer to. Its
			 * bound: the columns held when the burst began, and one
			 * slot for each write of the burst that was taken.
			 */
			unsigned int k2, r2;

			burst = l->poll;
			memcpy(start, held, sizeof(start));
			memset(extra, 0, sizeof(extra));
			for (k2 = k; k2 < fz.nl2; k2++)
				for (r2 = 0; fz.l2[k2].type == PROTO_T_L2_DOWN &&
					     fz.l2[k2].poll == burst && r2 < fz.l2[k2].nrec;
				     r2++) {
					const struct fz_l2rec *y = &fz.l2[k2].rec[r2];

					if (y->outcome == L2O_DONE && y->status == 0 &&
					    is_col(y->cache, y->key, y->org))
						extra[y->cache]++;
				}
		}

		for (r = 0; r < l->nrec; r++) {
			const struct fz_l2rec *x = &l->rec[r];
			bool col = is_col(x->cache, x->key, x->org);
			uint32_t b = col ? 1u << bit(x->key, x->org) : 0;

			if (col && (C.uncertain[x->cache] & b))
				continue;
			if (l->type == PROTO_T_L2_DELETE) {
				unsigned int g;

				/* An ERROR for each record whose column is not there. */
				for (g = 0; l->rec[g].cache != x->cache || l->rec[g].key != x->key;
				     g++)
					;
				want[g] += !(col && (held[x->cache] & b));
				if (col)
					held[x->cache] &= ~b;
				continue;
			}
			if (x->outcome != L2O_DONE)
				fz_fail("L2_DOWN seq %" PRIu64 " of cache %u key %" PRIu64
					": no L2_DONE",
					l->seq, x->cache, x->key);
			/*
			 * A column needs a free slot while it is written, a
			 * replacement too (section 9). A column the model is
			 * unsure of (an L2_UP found it bad, later or earlier) may
			 * have taken a slot then.
			 */
			if (x->status == PROTO_E_NO_SPACE && col &&
			    __builtin_popcount(start[x->cache] | C.uncertain[x->cache]) +
					    extra[x->cache] <
				    FZ_L2_SLOTS)
				fz_fail("L2_DOWN seq %" PRIu64 " of cache %u key %" PRIu64
					" org %" PRIu64 " refused NO_SPACE with %u columns held "
					"(%u of them uncertain) and %u written in its burst (room "
					"for %u)",
					l->seq, x->cache, x->key, x->org,
					__builtin_popcount(start[x->cache] | C.uncertain[x->cache]),
					__builtin_popcount(C.uncertain[x->cache]), extra[x->cache],
					FZ_L2_SLOTS);
			if (x->status == 0 && col)
				held[x->cache] |= b;
		}
		for (r = 0; l->type == PROTO_T_L2_DELETE && r < l->nrec; r++)
			if ((r == 0 || l->rec[1].cache != l->rec[0].cache ||
			     l->rec[1].key != l->rec[0].key) &&
			    want[r] != l->rec[r].errors &&
			    !(is_col(l->rec[r].cache, l->rec[r].key, 1) &&
			      (C.uncertain[l->rec[r].cache] & (3u << bit(l->rec[r].key, 1)))))
				fz_fail("L2_DELETE seq %" PRIu64 " of cache %u key %" PRIu64
					": %u ERROR(s), "
					"%u of its records named a column not there",
					l->seq, l->rec[r].cache, l->rec[r].key, l->rec[r].errors,
					want[r]);
	}
	for (c = 0; c < FZ_CACHES; c++) {
		uint32_t mask = ~C.uncertain[c];

		if ((held[c] & mask) != (C.inv_set[c] & mask))
			fz_fail("L2 cache %u holds %u columns (inventory %#x), the driver's "
				"L2_DOWNs and "
				"L2_DELETEs leave %u (%#x); STATUS %" PRIu64 " tokens",
				c, __builtin_popcount(C.inv_set[c]), C.inv_set[c],
				__builtin_popcount(held[c]), held[c], C.status_l2[c]);
	}
}
