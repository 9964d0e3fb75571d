/* SPDX-License-Identifier: BSD-3-Clause */
/* The replay system's emulated second tier: replay_priv.h. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "replay_priv.h"

/* ---- The emulated shards' second tier ------------------------------------------ */

/*
 * Until every L2 operation asked has finished: -1 when one failed. Deletes
 * kvdisk defers (waiting for a put to take their slot, which then writes
 * no header of its own) are not waited for: as on a shard, they are
 * written when a put takes the slot, when they are due, or at close.
 * Polling with wait while only they are out would write them at once, and
 * the replay's second tier would absorb none.
 */
int
replay_l2_settle(struct replay *r, struct kvdisk *d)
{
	struct kvdisk_done done[32];
	int bad = 0;

	while (kvdisk_inflight(d) > kvdisk_deferred(d)) {
		unsigned int n = kvdisk_poll(d, done, 32, true), i;

		for (i = 0; i < n; i++)
			if (done[i].status != 0)
				bad = -1;
	}
	if (bad)
		r->st.protocol_errors++;
	return bad;
}

static uint8_t *
l2_scratch(struct replay *r, size_t n)
{
	if (n > r->l2bufcap) {
		free(r->l2buf);
		r->l2buf = malloc(n);
		r->l2bufcap = r->l2buf ? n : 0;
	}
	return r->l2buf;
}

/* A column goes down: its tokens, as DRAM holds them now, into L2 (writes are pipelined). */
void
replay_l2_down(void *arg, uint16_t model, const struct prefixcache_l2col *c)
{
	struct replay *r = arg;
	struct kvdisk *d = r->l2[model];
	uint32_t B = r->p.bytes_per_token, t;
	uint8_t *buf = l2_scratch(r, (size_t)c->tokens * B);
	struct kvdisk_meta m = {.key = c->key, .parent = c->parent, .org = c->isolation_id,
				.first_use_ns = c->first_use_ns, .start = c->start,
				.tokens = c->tokens, .cache = c->cache_id};
	int rc;

	if (r->p.observe.l2_down != NULL)
		r->p.observe.l2_down(r->p.observe.arg, model, c);
	if (d == NULL || buf == NULL || c->evict_count > kvstore_batches_complete(r->kv[model])) {
		r->st.protocol_errors++;
		return;
	}
	for (t = 0; t < c->tokens; t++)
		if (kvstore_read_token(r->kv[model], c->cache_id, c->prompt_id, c->start + t,
				       buf + (size_t)t * B) != 0) {
			r->st.protocol_errors++; /* the driver sent down what DRAM does not hold */
			return;
		}
	while ((rc = kvdisk_put(d, &m, buf, c->tokens * B, 0)) == -EBUSY || rc == -EAGAIN) {
		struct kvdisk_done done[32];
		unsigned int n = kvdisk_poll(d, done, 32, true), i;

		for (i = 0; i < n; i++)
			if (done[i].status != 0)
				r->st.protocol_errors++;
	}
	if (rc != 0)
		r->st.protocol_errors++; /* full: the driver's account of L2 is off */
	else
		r->st.l2_written_tokens += c->tokens;
}

/* Read column @c whole from L2 into @out: 0, or -1 (counted). */
static int
l2_read(struct replay *r, struct kvdisk *d, const struct prefixcache_l2col *c, uint8_t *out)
{
	struct kvdisk_done done[32];
	bool got = false;
	int found = -1;

	if (replay_l2_settle(r, d) != 0 || kvdisk_get(d, c->cache_id, c->key, c->isolation_id, 1) != 0) {
		r->st.protocol_errors++;
		return -1;
	}
	/* Until the read's answer (deferred deletes stay deferred, as above). */
	while (!got && kvdisk_inflight(d) > kvdisk_deferred(d)) {
		unsigned int n = kvdisk_poll(d, done, 32, true), i;

		for (i = 0; i < n; i++) {
			if (done[i].type != KVDISK_GET) {
				if (done[i].status != 0)
					r->st.protocol_errors++;
				continue;
			}
			got = true;
			if (done[i].status == 0 && done[i].len == c->tokens * r->p.bytes_per_token) {
				memcpy(out, done[i].data, done[i].len);
				found = 0;
			}
		}
	}
	if (found != 0)
		r->st.protocol_errors++;
	return found;
}

/* Columns come up: an EVICT batch whose bytes the shard reads from its L2, then lets go. */
void
replay_l2_up(void *arg, uint16_t model, uint64_t batch_no, uint16_t nc, uint16_t g,
	 const struct proto_evict_entry *e, const struct prefixcache_l2col *cols, uint32_t ncols)
{
	struct replay *r = arg;
	struct kvdisk *d = r->l2[model];
	struct kvstore *kv = r->kv[model];
	uint16_t codes[PROTO_PAYLOAD_MAX / 16];
	uint32_t B = r->p.bytes_per_token, t, c, k, C = 0;
	uint8_t *stream, *colb;

	if (r->p.observe.l2_up != NULL)
		r->p.observe.l2_up(r->p.observe.arg, model, batch_no, nc, g, e, cols, ncols);
	r->st.evict_batches++;
	for (k = 0; k < ncols; k++)
		if (cols[k].tokens > C)
			C = cols[k].tokens;
	/* One stream per cache, then room for a column. */
	stream = l2_scratch(r, (size_t)nc * g * B + (size_t)C * B);
	if (d == NULL || stream == NULL || kvstore_evict(kv, batch_no, nc, g, e, codes, 0) != 0) {
		r->st.protocol_errors++;
		return;
	}
	memset(stream, 0, (size_t)nc * g * B);
	colb = stream + (size_t)nc * g * B;
	for (t = 0; t < (uint32_t)g * nc; t++)
		if (codes[t] != 0)
			r->st.protocol_errors++;
	/* The columns this batch has tokens of (an UP spans batches when it is long). */
	for (k = 0; k < ncols; k++) {
		const struct prefixcache_l2col *col = &cols[k];
		bool need = false, last = false;

		for (t = 0; t < g; t++) {
			const struct proto_evict_entry *en = &e[t * nc + col->cache_id];

			if (en->prompt_id == col->prompt_id && en->token_idx >= col->start &&
			    en->token_idx < col->start + col->tokens) {
				need = true;
				last |= en->token_idx == col->start + col->tokens - 1;
			}
		}
		if (!need)
			continue;
		if (l2_read(r, d, col, colb) != 0)
			memset(colb, 0, (size_t)C * B);
		for (t = 0; t < g; t++) {
			const struct proto_evict_entry *en = &e[t * nc + col->cache_id];

			if (en->prompt_id == col->prompt_id && en->token_idx >= col->start &&
			    en->token_idx < col->start + col->tokens)
				memcpy(stream + ((size_t)col->cache_id * g + t) * B,
				       colb + (size_t)(en->token_idx - col->start) * B, B);
		}
		if (last)
			r->st.l2_read_tokens += col->tokens;
	}
	for (c = 0; c < nc; c++)
		if (kvstore_data(kv, batch_no, (uint16_t)c, 0, g * B, stream + (size_t)c * g * B,
				 g * B) != 0)
			r->st.protocol_errors++;
	if (kvstore_batches_complete(kv) != batch_no)
		r->st.protocol_errors++;
}

/* L2 lets a column go (after its batch: here every batch is complete when sent). */
void
replay_l2_del(void *arg, uint16_t model, uint16_t cache_id, uint64_t key, uint64_t iso, uint64_t ec)
{
	struct replay *r = arg;

	if (r->p.observe.l2_del != NULL)
		r->p.observe.l2_del(r->p.observe.arg, model, cache_id, key, iso, ec);
	if (ec > kvstore_batches_complete(r->kv[model]))
		r->st.protocol_errors++;
	if (r->l2[model] == NULL || replay_l2_settle(r, r->l2[model]) != 0 ||
	    kvdisk_del(r->l2[model], cache_id, key, iso, 0) != 0)
		r->st.protocol_errors++; /* the driver's account of L2 is off */
}

