/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * A shard's second tier on its local disk (kvdisk.h): the operations, PUT,
 * GET and DEL on io_uring, and their completions. The layout and the slot
 * state are in kvdisk_priv.h; open, rebuild and close in kvdisk_open.c.
 *
 * Deferred deletes. Puts follow deletes: the driver's L2 is
 * full, so it deletes its least recent columns, then sends the new ones
 * down, and the room a column that came up leaves (deleted after its
 * batch) goes to the puts that come after. A delete therefore does not
 * write its cleared header at once: it waits in its cache's ring (no op
 * held); a put of that cache takes the oldest one's slot before a free
 * one, and the put's write of the whole slot, header included, is the
 * clear (one I/O instead of two). The delete's kvdisk_done comes only
 * when that write has landed; when it fails, the delete goes back to the
 * head of its ring, to be written at once (or taken by another put). A
 * delete no put takes is written as before: when the caller polls with
 * nothing else in flight (it would wait for nothing), after KD_DEFER_NS,
 * or when KD_DEFER_MAX are waiting. So a delete's done still means what
 * it meant: its header is not on the disk any more.
 */
#define _GNU_SOURCE
#include "kvdisk_priv.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <openssl/crypto.h>

#include "mono.h"
#include "orgkeys.h"
#include "proto.h"

/* ---- Operations ---------------------------------------------------------- */

struct op *
kd_op_get(struct kvdisk *d)
{
	struct op *o;

	if (d->op_free == NIL)
		return NULL;
	o = &d->ops[d->op_free];
	d->op_free = o->next_free;
	o->clear_only = false;
	o->old = NIL;
	o->absorbs = false;
	o->write = false;
	o->dst = NULL;
	return o;
}

/* An op for a write: NULL when writes hold their share (kd_write_ops()) or none is free. */
struct op *
kd_wop_get(struct kvdisk *d)
{
	struct op *o;

	if (d->writing >= kd_write_ops(d) || (o = kd_op_get(d)) == NULL)
		return NULL;
	o->write = true;
	d->writing++;
	return o;
}

void
kd_op_put(struct kvdisk *d, struct op *o)
{
	if (o->write) {
		o->write = false;
		d->writing--;
	}
	o->next_free = d->op_free;
	d->op_free = (uint32_t)(o - d->ops);
	d->ops_back++;
}

struct op *
kd_submit_wait(struct kvdisk *d, struct io_uring_cqe **cqe)
{
	io_uring_submit(&d->ring);
	d->unsubmitted = 0;
	if (io_uring_wait_cqe(&d->ring, cqe) != 0)
		return NULL;
	d->inflight--;
	return &d->ops[io_uring_cqe_get_data64(*cqe)];
}

uint64_t
kvdisk_ops_back(const struct kvdisk *d)
{
	return d->ops_back;
}

void
kd_submit(struct kvdisk *d, struct op *o, bool write, uint32_t len, uint64_t off)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(&d->ring);

	/* The ring has a slot per op: there is always an SQE for one. The
	 * op buffers are registered: no page pinning per I/O. */
	if (write && d->fixed)
		io_uring_prep_write_fixed(sqe, d->fd, o->buf, len, off, (int)(o - d->ops));
	else if (write)
		io_uring_prep_write(sqe, d->fd, o->buf, len, off);
	else if (d->fixed)
		io_uring_prep_read_fixed(sqe, d->fd, o->buf, len, off, (int)(o - d->ops));
	else
		io_uring_prep_read(sqe, d->fd, o->buf, len, off);
	io_uring_sqe_set_data64(sqe, (uint64_t)(o - d->ops));
	d->inflight++;
	d->unsubmitted++;
}

/* A cleared header over slot @i of cache @c, when an op is free; else queued. */
static void
clear_slot(struct kvdisk *d, uint16_t c, uint32_t i, struct op *o)
{
	struct region *r = &d->r[c];

	if (r->s[i].state != S_CLEAR)
		r->clearing++;
	r->s[i].state = S_CLEAR;
	if (r->s[i].readers > 0) {
		/* Cleared when its reads end (they read it whole: a refill that
		 * began before a delete ends as it began). */
		r->s[i].del_pending = 1;
		r->s[i].del_op = o != NULL ? (uint32_t)(o - d->ops) : NIL;
		return;
	}
	if (o == NULL && (o = kd_wop_get(d)) != NULL)
		o->clear_only = true;
	if (o == NULL) {
		d->clears[d->nclears++] = (struct clear_req){c, i};
		return;
	}
	o->type = KVDISK_DEL;
	o->cache = c;
	o->slot = i;
	if (!o->clear_only)
		d->st.dels_written++;
	memset(o->buf, 0, KVDISK_ALIGN);
	kd_submit(d, o, true, KVDISK_ALIGN, slot_off(r, i));
}

/* ---- Deferred deletes (above) ------------------------------------------- */

/* Into cache @p c's ring: at its tail, or at its head (@p first: before the others). */
static void
pend_push(struct kvdisk *d, uint16_t c, const struct pend_del *p, bool first)
{
	struct region *r = &d->r[c];
	uint32_t cap = kd_pend_cap(d);

	if (first) {
		r->pend_head = (r->pend_head + cap - 1) % cap;
		r->pend[r->pend_head] = *p;
	} else {
		r->pend[(r->pend_head + r->npend) % cap] = *p;
	}
	r->npend++;
	d->npend++;
}

/* The oldest of cache @p c's deferred deletes, out of its ring (it has one). */
static struct pend_del
pend_pop(struct kvdisk *d, uint16_t c)
{
	struct region *r = &d->r[c];
	struct pend_del p = r->pend[r->pend_head];

	r->pend_head = (r->pend_head + 1) % kd_pend_cap(d);
	r->npend--;
	d->npend--;
	return p;
}

/* The cache whose oldest deferred delete is the oldest of all (there is one). */
static uint16_t
pend_oldest(const struct kvdisk *d)
{
	uint16_t c, best = 0;
	uint64_t t = UINT64_MAX;

	for (c = 0; c < d->nc; c++)
		if (d->r[c].npend > 0 && d->r[c].pend[d->r[c].pend_head].since_ns < t) {
			t = d->r[c].pend[d->r[c].pend_head].since_ns;
			best = c;
		}
	return best;
}

/*
 * Write the oldest deferred delete's cleared header, cache @p c's oldest
 * (pend_oldest(); its slot is S_CLEAR, counted in clearing, with no
 * reads). @return 0, or -EBUSY: no free op.
 */
static int
write_oldest(struct kvdisk *d, uint16_t c)
{
	struct op *o = kd_wop_get(d);
	struct pend_del p;

	if (o == NULL)
		return -EBUSY;
	p = pend_pop(d, c);
	o->cookie = p.cookie;
	o->del = p;
	clear_slot(d, c, p.slot, o);
	return 0;
}

/*
 * Write the deferred deletes that waited KD_DEFER_NS by @p now or are due
 * now, or all of them.
 */
static void
write_overdue(struct kvdisk *d, bool all, uint64_t now)
{
	while (d->npend > 0) {
		uint16_t c = pend_oldest(d);
		const struct region *r = &d->r[c];
		uint64_t since = r->pend[r->pend_head].since_ns;

		if (!all && since != 0 && now - since < KD_DEFER_NS)
			break;
		if (write_oldest(d, c) != 0)
			break; /* no op free: at a later poll */
	}
}

/* Is a PUT of @p m's (key, org) in @p r in flight? At most queue-depth ops to look at. */
static bool
put_in_flight(const struct kvdisk *d, const struct region *r, const struct kvdisk_meta *m)
{
	uint32_t k;

	for (k = 0; k < d->qd; k++) {
		const struct op *o = &d->ops[k];
		const struct slot *s;

		if (o->type != KVDISK_PUT || o->cache != m->cache || o->slot >= r->g.slots)
			continue;
		s = &r->s[o->slot];
		if (s->state == S_PUT && s->m.key == m->key && s->m.org == m->org)
			return true;
	}
	return false;
}

int
kvdisk_put(struct kvdisk *d, const struct kvdisk_meta *m, const void *data, uint32_t len,
	   uint64_t cookie)
{
	struct region *r;
	struct hdr *h;
	struct op *o;
	uint32_t i;

	if (m->cache >= d->nc)
		return -EINVAL;
	r = &d->r[m->cache];
	if (m->tokens == 0 || m->tokens > r->g.column_tokens ||
	    len != m->tokens * r->g.bytes_per_token || m->key == 0)
		return -EINVAL;
	/* A column of this key still being written: this one must replace it,
	 * not stand beside it (its slot is indexed only once written). */
	if (put_in_flight(d, r, m))
		return -EAGAIN;
	if (r->npend == 0 && r->nfree == 0)
		return r->clearing > 0 ? -EAGAIN : -ENOSPC;
	if ((o = kd_wop_get(d)) == NULL)
		return -EBUSY;
	/* A deleted column's slot before a free one: this write is its clear. */
	i = r->npend > 0 ? r->pend[r->pend_head].slot : r->free[r->nfree - 1];
	h = (struct hdr *)o->buf;
	*h = (struct hdr){.magic = HDR_MAGIC, .version = VERSION, .cache = m->cache,
			  .key = m->key, .parent = m->parent, .org = m->org,
			  .first_use_ns = m->first_use_ns, .start = m->start, .tokens = m->tokens};
	if (d->keys == NULL) {
		memcpy(o->buf + KVDISK_HDR_LEN, data, len);
	} else if (kd_seal(d, m->cache, i, h, data, o->buf + KVDISK_HDR_LEN, len) != 0) {
		/* Nothing taken yet: the slot stays as it was. */
		d->st.seal_errors++;
		kd_op_put(d, o);
		return -EIO;
	} else {
		d->st.sealed++;
	}
	/* The bytes' checksum; a sealed column's is its tag (data_hash 0:
	 * an XXH3 of the ciphertext would say nothing the tag does not, and
	 * cost a fifth of a read). */
	if (d->keys == NULL)
		h->data_hash = data_hash(d, o->buf + KVDISK_HDR_LEN, len);
	h->hdr_hash = kd_hdr_sum(d, h, m->cache, i);
	memset(o->buf + KVDISK_HDR_LEN + len + kd_trailer(d), 0,
	       r->g.slot_bytes - KVDISK_HDR_LEN - len - kd_trailer(d));
	if (r->npend > 0) {
		o->del = pend_pop(d, m->cache);
		o->absorbs = true;
		r->clearing--;
	} else {
		r->nfree--;
	}
	r->s[i].m = *m;
	r->s[i].state = S_PUT;
	r->s[i].stale = 0;
	o->type = KVDISK_PUT;
	o->cache = m->cache;
	o->slot = i;
	o->cookie = cookie;
	o->old = find(r, m->key, m->org);
	kd_submit(d, o, true, (uint32_t)r->g.slot_bytes, slot_off(r, i));
	return 0;
}

bool
kvdisk_writing(const struct kvdisk *d, uint16_t cache, uint64_t key, uint64_t org)
{
	const struct kvdisk_meta m = {.cache = cache, .key = key, .org = org};

	return cache < d->nc && put_in_flight(d, &d->r[cache], &m);
}

int
kvdisk_get(struct kvdisk *d, uint16_t cache, uint64_t key, uint64_t org, uint64_t cookie)
{
	return kvdisk_get_into(d, cache, key, org, NULL, 0, cookie);
}

int
kvdisk_get_into(struct kvdisk *d, uint16_t cache, uint64_t key, uint64_t org, void *dst,
		uint32_t cap, uint64_t cookie)
{
	struct region *r;
	struct op *o;
	uint32_t i;

	if (cache >= d->nc || (dst == NULL && cap != 0))
		return -EINVAL;
	r = &d->r[cache];
	if ((i = find(r, key, org)) == NIL)
		return -ENOENT;
	/* The index says its length: a short buffer fails before the read. */
	if (dst != NULL && (uint64_t)r->s[i].m.tokens * r->g.bytes_per_token > cap)
		return -EMSGSIZE;
	if ((o = kd_op_get(d)) == NULL)
		return -EBUSY;
	o->type = KVDISK_GET;
	o->cache = cache;
	o->slot = i;
	o->cookie = cookie;
	o->dst = dst;
	r->s[i].readers++;
	kd_submit(d, o, false, (uint32_t)r->g.slot_bytes, slot_off(r, i));
	return 0;
}

int
kvdisk_del(struct kvdisk *d, uint16_t cache, uint64_t key, uint64_t org, uint64_t cookie)
{
	struct region *r;
	struct op *o = NULL;
	uint32_t i;
	bool defer;

	if (cache >= d->nc)
		return -EINVAL;
	r = &d->r[cache];
	if ((i = find(r, key, org)) == NIL)
		return -ENOENT;
	/* Deferred unless told otherwise or read now (cleared when its reads end). */
	defer = !d->clear_at_once && r->s[i].readers == 0;
	if (defer && d->npend >= KD_DEFER_MAX && write_oldest(d, pend_oldest(d)) != 0)
		return -EBUSY;
	if (!defer && (o = kd_wop_get(d)) == NULL)
		return -EBUSY;
	index_del(r, i);
	d->st.stored[cache]--;
	d->st.dels++;
	if (defer) {
		r->clearing++;
		r->s[i].state = S_CLEAR;
		pend_push(d, cache, &(struct pend_del){.slot = i, .cookie = cookie,
							 .since_ns = mono_ns(), .gone = r->s[i].m},
			  false);
		return 0;
	}
	o->cookie = cookie;
	o->del.gone = r->s[i].m;
	clear_slot(d, cache, i, o);
	return 0;
}

bool
kvdisk_has(const struct kvdisk *d, uint16_t cache, uint64_t key, uint64_t org)
{
	return cache < d->nc && find(&d->r[cache], key, org) != NIL;
}

/*
 * Does slot @p i of cache @p c, just read into @p buf, hold what the index
 * says, whole (and, sealed, does it open)? Then its column's bytes are
 * plain at @p out (NULL: in @p buf, after the header): a sealed column is
 * opened straight into @p out, a plain one checked in @p buf and copied.
 * 0, or the kd_open_result that failed (KD_OPEN_TAG for a checksum too).
 */
static int
check_read(struct kvdisk *d, uint16_t c, uint32_t i, uint8_t *buf, uint8_t *out)
{
	const struct region *r = &d->r[c];
	const struct slot *s = &r->s[i];
	const struct hdr *h = (const struct hdr *)buf;
	uint32_t len = (uint32_t)(s->m.tokens * r->g.bytes_per_token);

	if (!(h->magic == HDR_MAGIC && h->version == VERSION &&
	      kd_hdr_ok(d, h, c, i) && h->key == s->m.key && h->org == s->m.org &&
	      h->tokens == s->m.tokens))
		return KD_OPEN_TAG;
	if (out == NULL)
		out = buf + KVDISK_HDR_LEN;
	if (d->keys != NULL)
		return h->data_hash != 0 ? KD_OPEN_TAG
					 : kd_open(d, c, i, h, buf + KVDISK_HDR_LEN, out, len);
	if (h->data_hash != data_hash(d, buf + KVDISK_HDR_LEN, len))
		return KD_OPEN_TAG;
	if (out != buf + KVDISK_HDR_LEN)
		memcpy(out, buf + KVDISK_HDR_LEN, len);
	return KD_OPEN_OK;
}

/* What a finished op means; returns 1 when it gives the caller a kvdisk_done. */
static int
complete(struct kvdisk *d, struct op *o, int res, struct kvdisk_done *out)
{
	struct region *r = &d->r[o->cache];
	struct slot *s = &r->s[o->slot];
	int give = 0, why;

	*out = (struct kvdisk_done){.type = o->type, .cookie = o->cookie, .meta = s->m};
	switch (o->type) {
	case KVDISK_PUT:
		if (res != (int)r->g.slot_bytes) {
			d->st.write_errors++;
			out->status = res < 0 ? res : -ENOSPC;
			if (o->absorbs) {
				/* What it was to clear may be whole still: its delete
				 * goes back, first of its ring, due now. */
				s->state = S_CLEAR;
				r->clearing++;
				o->del.since_ns = 0;
				pend_push(d, o->cache, &o->del, true);
			} else {
				s->state = S_FREE;
				r->free[r->nfree++] = o->slot;
			}
		} else {
			d->st.puts++;
			d->st.bytes_written += (uint64_t)s->m.tokens * r->g.bytes_per_token;
			/* The column it replaces, if still there, goes now. */
			if (o->old != NIL && r->s[o->old].state == S_LIVE &&
			    r->s[o->old].m.key == s->m.key && r->s[o->old].m.org == s->m.org) {
				index_del(r, o->old);
				d->st.stored[o->cache]--;
				clear_slot(d, o->cache, o->old, NULL);
			}
			index_add(r, o->slot);
			d->st.stored[o->cache]++;
			if (o->absorbs) {
				/* The deleted column's header is gone: its delete is done. */
				d->ready[d->nready++] = (struct kvdisk_done){
					.type = KVDISK_DEL, .cookie = o->del.cookie, .meta = o->del.gone};
				d->st.dels_absorbed++;
			}
			if (s->stale) {
				/* Sealed under a key retired while it was written
				 * (kvdisk_retire_orgs()): never served, let go. */
				index_del(r, o->slot);
				d->st.stored[o->cache]--;
				clear_slot(d, o->cache, o->slot, NULL);
				out->status = -ESTALE;
			}
		}
		give = 1; /* kd_op_get() clears absorbs for the op's next use */
		break;
	case KVDISK_GET:
		s->readers--;
		if (res != (int)r->g.slot_bytes) {
			d->st.read_errors++;
			out->status = res < 0 ? res : -EIO;
		} else if ((why = check_read(d, o->cache, o->slot, o->buf, o->dst)) ==
			   KD_OPEN_LOCAL) {
			/* libcrypto failed here (out of memory, say): nothing is
			 * known of the column, which stays; this read failed. */
			d->st.seal_errors++;
			d->st.read_errors++;
			out->status = -EIO;
		} else if (why != KD_OPEN_OK) {
			/* Never returned: dropped, cleared, reported; what a
			 * failed tag opened into the caller's buffer wiped. */
			if (o->dst != NULL)
				memset(o->dst, 0, (size_t)s->m.tokens * r->g.bytes_per_token);
			d->st.corrupt++;
			if (d->keys != NULL && why == KD_OPEN_TAG)
				d->st.bad_tag++;
			else if (why == KD_OPEN_KEY)
				d->st.bad_key++;
			out->status = -EBADMSG;
			if (s->state == S_LIVE) {
				index_del(r, o->slot);
				d->st.stored[o->cache]--;
				clear_slot(d, o->cache, o->slot, NULL);
			}
		} else {
			d->st.gets++;
			d->st.opened += d->keys != NULL;
			d->st.bytes_read += (uint64_t)s->m.tokens * r->g.bytes_per_token;
			out->data = o->dst != NULL ? o->dst : o->buf + KVDISK_HDR_LEN;
			out->len = s->m.tokens * r->g.bytes_per_token;
		}
		if (s->readers == 0 && s->del_pending) {
			uint32_t w = s->del_op;

			s->del_pending = 0;
			s->del_op = NIL;
			clear_slot(d, o->cache, o->slot, w != NIL ? &d->ops[w] : NULL);
		}
		give = 1;
		break;
	case KVDISK_DEL:
		out->meta = o->del.gone;
		if (res != (int)KVDISK_ALIGN) {
			d->st.write_errors++;
			out->status = res < 0 ? res : -EIO;
			/* Not served either way; the slot stays out of use. */
		} else {
			s->state = S_FREE;
			r->free[r->nfree++] = o->slot;
		}
		r->clearing--;
		give = !o->clear_only;
		break;
	}
	return give;
}

unsigned int
kvdisk_poll(struct kvdisk *d, struct kvdisk_done *out, unsigned int max, bool wait)
{
	return kvdisk_poll_for(d, out, max, wait ? KVDISK_WAIT_FOREVER : 0);
}

unsigned int
kvdisk_poll_for(struct kvdisk *d, struct kvdisk_done *out, unsigned int max, uint32_t wait_us)
{
	bool wait = wait_us > 0;
	unsigned int n = 0;
	struct io_uring_cqe *cqe;
	struct op *o;
	/* The clock once a poll, and only when a delete waits: a failed put
	 * gives deletes back due now (since 0), which need none. */
	uint64_t now = d->npend > 0 ? mono_ns() : 0;

	/* The bytes of the GETs given last time are the caller's no more. */
	while (d->nheld > 0)
		kd_op_put(d, &d->ops[d->held[--d->nheld]]);
	/* Clears that waited for an op. */
	while (d->nclears > 0 && (o = kd_wop_get(d)) != NULL) {
		struct clear_req c = d->clears[--d->nclears];

		o->clear_only = true;
		clear_slot(d, c.cache, c.slot, o);
	}
	/* Deferred deletes no put took: overdue ones, or all when the caller
	 * would otherwise wait for nothing. */
	if (d->npend > 0)
		write_overdue(d, wait && d->inflight == 0 && d->nready == 0, now);
	while (n < max && d->nready > 0)
		out[n++] = d->ready[--d->nready];
	if (d->unsubmitted) {
		io_uring_submit(&d->ring);
		d->unsubmitted = 0;
	}
	while (n < max && d->inflight > 0) {
		int rc;

		if (!wait || n > 0) {
			rc = io_uring_peek_cqe(&d->ring, &cqe);
		} else if (wait_us == KVDISK_WAIT_FOREVER) {
			rc = io_uring_wait_cqe(&d->ring, &cqe);
		} else {
			struct __kernel_timespec ts = {.tv_sec = wait_us / 1000000u,
						       .tv_nsec = (long long)(wait_us % 1000000u) * 1000};

			rc = io_uring_wait_cqe_timeout(&d->ring, &cqe, &ts);
		}

		if (rc != 0)
			break;
		o = &d->ops[io_uring_cqe_get_data64(cqe)];
		d->inflight--;
		n += (unsigned int)complete(d, o, cqe->res, &out[n]);
		io_uring_cqe_seen(&d->ring, cqe);
		if (o->type == KVDISK_GET)
			d->held[d->nheld++] = (uint32_t)(o - d->ops); /* its bytes: until the next poll */
		else
			kd_op_put(d, o);
		while (n < max && d->nready > 0)
			out[n++] = d->ready[--d->nready];
	}
	/* Deletes a failed put gave back are due now (their since is 0). */
	if (d->npend > 0)
		write_overdue(d, false, now);
	if (d->unsubmitted) {
		io_uring_submit(&d->ring);
		d->unsubmitted = 0;
	}
	return n;
}

unsigned int
kvdisk_inflight(const struct kvdisk *d)
{
	return d->inflight + d->nclears + d->npend + d->nready;
}

unsigned int
kvdisk_deferred(const struct kvdisk *d)
{
	return d->npend;
}

void
kvdisk_flush(struct kvdisk *d)
{
	uint32_t cap = kd_pend_cap(d), k;
	uint16_t c;

	/* Due now (0): write_overdue() takes them, oldest first, as ops free. */
	for (c = 0; c < d->nc; c++)
		for (k = 0; k < d->r[c].npend; k++)
			d->r[c].pend[(d->r[c].pend_head + k) % cap].since_ns = 0;
}

void
kvdisk_foreach(const struct kvdisk *d, void (*fn)(void *arg, const struct kvdisk_meta *m),
	       void *arg)
{
	uint16_t c;
	uint64_t i;

	for (c = 0; c < d->nc; c++)
		for (i = 0; i < d->r[c].g.slots; i++)
			if (d->r[c].s[i].state == S_LIVE)
				fn(arg, &d->r[c].s[i].m);
}

/* Does organization @p org's key differ between stores @p a and @p b (NULL: the master keys alone)? */
static bool
org_key_moved(const struct seal_orgs *a, const struct seal_orgs *b, uint64_t org)
{
	if (a == NULL || b == NULL)
		return a != b;
	return CRYPTO_memcmp(seal_orgs_key(a, org)->key, seal_orgs_key(b, org)->key,
			     SEAL_KEY_LEN) != 0;
}

int
kvdisk_retire_orgs(struct kvdisk *d, struct seal_orgs *o,
		   void (*gone)(void *arg, const struct kvdisk_meta *m), void *arg)
{
	struct seal_orgs *was;
	int n = 0;
	uint16_t c;
	uint64_t i;

	if (d->keys == NULL)
		return -EINVAL;
	was = d->keys->orgs;
	d->keys->orgs = o;
	if (was == o)
		return 0;
	for (c = 0; c < d->nc; c++) {
		struct region *r = &d->r[c];

		for (i = 0; i < r->g.slots; i++) {
			struct slot *s = &r->s[i];

			if ((s->state != S_LIVE && s->state != S_PUT) ||
			    !org_key_moved(was, o, s->m.org))
				continue;
			d->st.retired++;
			if (s->state == S_PUT) {
				s->stale = 1; /* complete() lets it go */
				continue;
			}
			/* As a corrupt column read (complete()): out of the
			 * index at once, its header cleared (after the reads
			 * in flight, which fail their key id). */
			index_del(r, (uint32_t)i);
			d->st.stored[c]--;
			clear_slot(d, c, (uint32_t)i, NULL);
			if (gone != NULL)
				gone(arg, &s->m);
			n++;
		}
	}
	return n;
}

/* Column @p i of cache @p c let go at open: out of the index, its header cleared by the next poll. */
static void
drop_at_open(struct kvdisk *d, uint16_t c, uint32_t i)
{
	struct region *r = &d->r[c];

	index_del(r, i);
	d->st.stored[c]--;
	d->st.retired++;
	r->s[i].state = S_CLEAR;
	r->clearing++;
	d->clears[d->nclears++] = (struct clear_req){c, i};
}

int
kvdisk_retire_unheld(struct kvdisk *d)
{
	int n = 0;
	uint16_t c;

	if (d->keys == NULL)
		return -EINVAL;
	if (d->inflight > 0)
		return -EBUSY;
	for (c = 0; c < d->nc; c++) {
		struct region *r = &d->r[c];
		uint64_t next = 0, out = 0;

		while (next < r->g.slots || out > 0) {
			struct io_uring_cqe *cqe;
			struct op *o;

			/* Each held column's block holding its trailer's key id
			 * (two when the id straddles them), as many at once as
			 * there are ops. */
			for (; next < r->g.slots; next++) {
				const struct slot *s = &r->s[next];
				uint64_t at, blk;

				if (s->state != S_LIVE)
					continue;
				if ((o = kd_op_get(d)) == NULL)
					break;
				at = KVDISK_HDR_LEN + (uint64_t)s->m.tokens * r->g.bytes_per_token;
				blk = at / KVDISK_ALIGN * KVDISK_ALIGN;
				o->type = KVDISK_GET;
				o->cache = c;
				o->slot = (uint32_t)next;
				o->cookie = at - blk;
				kd_submit(d, o, false, at + 4 > blk + KVDISK_ALIGN ? 2 * KVDISK_ALIGN : KVDISK_ALIGN,
					  slot_off(r, o->slot) + blk);
				out++;
			}
			if (out == 0)
				break;
			if ((o = kd_submit_wait(d, &cqe)) == NULL)
				return -EIO;
			out--;
			if (cqe->res <= 0 || (uint64_t)cqe->res < o->cookie + 4) {
				/* Unread: kept, as any column a read may fail on later. */
				d->st.read_errors++;
			} else {
				struct seal_key k;
				int rc = seal_ring_find(d->keys, r->s[o->slot].m.org,
							proto_ld32(o->buf + o->cookie), &k);

				OPENSSL_cleanse(&k, sizeof(k));
				if (rc > 0) {
					drop_at_open(d, c, o->slot);
					n++;
				} else if (rc < 0) {
					d->st.seal_errors++; /* libcrypto failed: kept, checked when read */
				}
			}
			io_uring_cqe_seen(&d->ring, cqe);
			kd_op_put(d, o);
		}
	}
	return n;
}

void
kvdisk_stats(const struct kvdisk *d, struct kvdisk_stats *st)
{
	*st = d->st;
}

bool
kvdisk_direct(const struct kvdisk *d)
{
	return d->direct;
}

uint64_t
kvdisk_slots(const struct kvdisk *d, uint16_t cache)
{
	return cache < d->nc ? d->r[cache].g.slots : 0;
}
