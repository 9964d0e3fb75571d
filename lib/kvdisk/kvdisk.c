/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * A shard's second tier on its local disk: see kvdisk.h. One file on
 * purpose, a little over 800 lines: the on-disk layout (superblock, slot
 * headers), the index rebuilt from it at open, and the io_uring submission
 * and completion paths all read and write the same slot state, and each
 * operation's rules (a read checks the header the write made, a delete
 * clears it, the rebuild trusts only what both checksums pass) are easiest
 * to check against each other side by side.
 */
#define _GNU_SOURCE
#include "kvdisk.h"

#include <errno.h>
#include <fcntl.h>
#include <liburing.h>
#include <linux/fs.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>
#include <xxhash.h>

#define NIL UINT32_MAX
#define SB_MAGIC 0x3130324c53535b4bULL /* "K[SSL201" */
#define HDR_MAGIC 0x4c43564bu	       /* "KVCL" */
#define VERSION 1

/* The superblock, at offset 0: what the file was made for. */
struct sb_cache {
	uint32_t bytes_per_token, column_tokens;
	uint64_t slots, slot_bytes, offset;
};

struct sb {
	uint64_t magic;
	uint32_t version;
	uint16_t num_caches, pad;
	struct sb_cache cache[KVDISK_MAX_CACHES];
	uint64_t hash; /* XXH3 of everything before it */
};

/* A slot's header on disk: 64 bytes. */
struct hdr {
	uint32_t magic;
	uint16_t version;
	uint16_t cache;
	uint64_t key, parent, org, first_use_ns;
	uint32_t start, tokens;
	uint64_t data_hash;
	uint64_t hdr_hash; /* XXH3 of the 56 bytes before it */
};
_Static_assert(sizeof(struct hdr) == KVDISK_HDR_LEN, "the header is 64 bytes");

enum slot_state { S_FREE, S_LIVE, S_PUT, S_CLEAR };

struct slot {
	struct kvdisk_meta m;
	uint32_t hnext;
	uint16_t readers; /* gets in flight */
	uint8_t state;
	uint8_t del_pending; /* deleted while read: cleared when the reads end */
	uint32_t del_op;     /* ... by this op (a caller's DEL), or NIL */
};

struct region {
	struct sb_cache g;
	struct slot *s;
	uint32_t *bucket, nbucket;
	uint32_t *free, nfree;
	uint32_t clearing; /* slots being cleared: free once their cleared header is written */
};

struct op {
	enum kvdisk_op_type type;
	uint16_t cache;
	uint32_t slot;
	uint32_t old; /* PUT: the slot of the column it replaces, or NIL */
	uint64_t cookie;
	bool clear_only; /* a clear with no caller waiting (a replaced or corrupt column) */
	uint8_t *buf;	 /* slot_bytes, aligned */
	uint32_t next_free;
};

struct clear_req {
	uint16_t cache;
	uint32_t slot;
};

struct kvdisk {
	int fd;
	bool direct;
	bool fixed; /* the op buffers are registered with the ring */
	struct io_uring ring;
	uint32_t qd;
	struct region r[KVDISK_MAX_CACHES];
	uint16_t nc;
	struct op *ops;
	uint32_t op_free, inflight, unsubmitted;
	uint8_t *bufs;
	uint64_t max_slot;
	uint32_t *held, nheld; /* GET ops whose bytes the caller holds until the next poll */
	struct clear_req *clears; /* slots waiting for a free op to be cleared */
	uint32_t nclears, clears_cap;
	uint8_t *zero; /* a cleared header block */
	struct kvdisk_stats st;
};

static inline uint32_t
bucket_of(const struct region *r, uint64_t key)
{
	return (uint32_t)((key * 0x9E3779B97F4A7C15ULL) >> 32) % r->nbucket;
}

static uint32_t
find(const struct region *r, uint64_t key, uint64_t org)
{
	uint32_t i;

	for (i = r->bucket[bucket_of(r, key)]; i != NIL; i = r->s[i].hnext)
		if (r->s[i].m.key == key && r->s[i].m.org == org)
			return i;
	return NIL;
}

static void
index_add(struct region *r, uint32_t i)
{
	uint32_t b = bucket_of(r, r->s[i].m.key);

	r->s[i].hnext = r->bucket[b];
	r->bucket[b] = i;
	r->s[i].state = S_LIVE;
}

static void
index_del(struct region *r, uint32_t i)
{
	uint32_t *p = &r->bucket[bucket_of(r, r->s[i].m.key)];

	while (*p != i && *p != NIL)
		p = &r->s[*p].hnext;
	if (*p == i)
		*p = r->s[i].hnext;
	r->s[i].hnext = NIL;
}

static uint64_t
slot_off(const struct region *r, uint32_t i)
{
	return r->g.offset + (uint64_t)i * r->g.slot_bytes;
}

static uint64_t
hdr_hash(const struct hdr *h)
{
	return XXH3_64bits(h, offsetof(struct hdr, hdr_hash));
}

/* ---- Operations ---------------------------------------------------------- */

static struct op *
op_get(struct kvdisk *d)
{
	struct op *o;

	if (d->op_free == NIL)
		return NULL;
	o = &d->ops[d->op_free];
	d->op_free = o->next_free;
	o->clear_only = false;
	o->old = NIL;
	return o;
}

static void
op_put(struct kvdisk *d, struct op *o)
{
	o->next_free = d->op_free;
	d->op_free = (uint32_t)(o - d->ops);
}

static void
submit(struct kvdisk *d, struct op *o, bool write, uint32_t len, uint64_t off)
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
	if (o == NULL && (o = op_get(d)) != NULL)
		o->clear_only = true;
	if (o == NULL) {
		d->clears[d->nclears++] = (struct clear_req){c, i};
		return;
	}
	o->type = KVDISK_DEL;
	o->cache = c;
	o->slot = i;
	memset(o->buf, 0, KVDISK_ALIGN);
	submit(d, o, true, KVDISK_ALIGN, slot_off(r, i));
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
	if (r->nfree == 0)
		return r->clearing > 0 ? -EAGAIN : -ENOSPC;
	if ((o = op_get(d)) == NULL)
		return -EBUSY;
	i = r->free[--r->nfree];
	r->s[i].m = *m;
	r->s[i].state = S_PUT;
	o->type = KVDISK_PUT;
	o->cache = m->cache;
	o->slot = i;
	o->cookie = cookie;
	o->old = find(r, m->key, m->org);
	h = (struct hdr *)o->buf;
	*h = (struct hdr){.magic = HDR_MAGIC, .version = VERSION, .cache = m->cache,
			  .key = m->key, .parent = m->parent, .org = m->org,
			  .first_use_ns = m->first_use_ns, .start = m->start, .tokens = m->tokens,
			  .data_hash = XXH3_64bits(data, len)};
	h->hdr_hash = hdr_hash(h);
	memcpy(o->buf + KVDISK_HDR_LEN, data, len);
	memset(o->buf + KVDISK_HDR_LEN + len, 0, r->g.slot_bytes - KVDISK_HDR_LEN - len);
	submit(d, o, true, (uint32_t)r->g.slot_bytes, slot_off(r, i));
	return 0;
}

int
kvdisk_get(struct kvdisk *d, uint16_t cache, uint64_t key, uint64_t org, uint64_t cookie)
{
	struct region *r;
	struct op *o;
	uint32_t i;

	if (cache >= d->nc)
		return -EINVAL;
	r = &d->r[cache];
	if ((i = find(r, key, org)) == NIL)
		return -ENOENT;
	if ((o = op_get(d)) == NULL)
		return -EBUSY;
	o->type = KVDISK_GET;
	o->cache = cache;
	o->slot = i;
	o->cookie = cookie;
	r->s[i].readers++;
	submit(d, o, false, (uint32_t)r->g.slot_bytes, slot_off(r, i));
	return 0;
}

int
kvdisk_del(struct kvdisk *d, uint16_t cache, uint64_t key, uint64_t org, uint64_t cookie)
{
	struct region *r;
	struct op *o;
	uint32_t i;

	if (cache >= d->nc)
		return -EINVAL;
	r = &d->r[cache];
	if ((i = find(r, key, org)) == NIL)
		return -ENOENT;
	if ((o = op_get(d)) == NULL)
		return -EBUSY;
	index_del(r, i);
	d->st.stored[cache]--;
	d->st.dels++;
	o->cookie = cookie;
	clear_slot(d, cache, i, o);
	return 0;
}

bool
kvdisk_has(const struct kvdisk *d, uint16_t cache, uint64_t key, uint64_t org)
{
	return cache < d->nc && find(&d->r[cache], key, org) != NIL;
}

/* Does the slot just read hold what the index says, whole? */
static bool
check_read(const struct region *r, const struct slot *s, const uint8_t *buf)
{
	const struct hdr *h = (const struct hdr *)buf;

	return h->magic == HDR_MAGIC && h->version == VERSION && h->hdr_hash == hdr_hash(h) &&
	       h->key == s->m.key && h->org == s->m.org && h->tokens == s->m.tokens &&
	       h->data_hash == XXH3_64bits(buf + KVDISK_HDR_LEN,
					   (size_t)h->tokens * r->g.bytes_per_token);
}

/* What a finished op means; returns 1 when it gives the caller a kvdisk_done. */
static int
complete(struct kvdisk *d, struct op *o, int res, struct kvdisk_done *out)
{
	struct region *r = &d->r[o->cache];
	struct slot *s = &r->s[o->slot];
	int give = 0;

	*out = (struct kvdisk_done){.type = o->type, .cookie = o->cookie, .meta = s->m};
	switch (o->type) {
	case KVDISK_PUT:
		if (res != (int)r->g.slot_bytes) {
			d->st.write_errors++;
			out->status = res < 0 ? res : -ENOSPC;
			s->state = S_FREE;
			r->free[r->nfree++] = o->slot;
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
		}
		give = 1;
		break;
	case KVDISK_GET:
		s->readers--;
		if (res != (int)r->g.slot_bytes) {
			d->st.read_errors++;
			out->status = res < 0 ? res : -EIO;
		} else if (!check_read(r, s, o->buf)) {
			/* Never returned: dropped, cleared, reported. */
			d->st.corrupt++;
			out->status = -EBADMSG;
			if (s->state == S_LIVE) {
				index_del(r, o->slot);
				d->st.stored[o->cache]--;
				clear_slot(d, o->cache, o->slot, NULL);
			}
		} else {
			d->st.gets++;
			d->st.bytes_read += (uint64_t)s->m.tokens * r->g.bytes_per_token;
			out->data = o->buf + KVDISK_HDR_LEN;
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
	unsigned int n = 0;
	struct io_uring_cqe *cqe;
	struct op *o;

	/* The bytes of the GETs given last time are the caller's no more. */
	while (d->nheld > 0)
		op_put(d, &d->ops[d->held[--d->nheld]]);
	/* Clears that waited for an op. */
	while (d->nclears > 0 && (o = op_get(d)) != NULL) {
		struct clear_req c = d->clears[--d->nclears];

		o->clear_only = true;
		clear_slot(d, c.cache, c.slot, o);
	}
	if (d->unsubmitted) {
		io_uring_submit(&d->ring);
		d->unsubmitted = 0;
	}
	while (n < max && d->inflight > 0) {
		int rc = (wait && n == 0) ? io_uring_wait_cqe(&d->ring, &cqe)
					  : io_uring_peek_cqe(&d->ring, &cqe);

		if (rc != 0)
			break;
		o = &d->ops[io_uring_cqe_get_data64(cqe)];
		d->inflight--;
		n += (unsigned int)complete(d, o, cqe->res, &out[n]);
		io_uring_cqe_seen(&d->ring, cqe);
		if (o->type == KVDISK_GET)
			d->held[d->nheld++] = (uint32_t)(o - d->ops); /* its bytes: until the next poll */
		else
			op_put(d, o);
	}
	if (d->unsubmitted) {
		io_uring_submit(&d->ring);
		d->unsubmitted = 0;
	}
	return n;
}

unsigned int
kvdisk_inflight(const struct kvdisk *d)
{
	return d->inflight + d->nclears;
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

/* ---- Open, rebuild, close ------------------------------------------------ */

static void __attribute__((format(printf, 4, 5)))
fail(char *err, size_t errlen, const char *path, const char *fmt, ...)
{
	char what[1200];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(what, sizeof(what), fmt, ap);
	va_end(ap);
	snprintf(err, errlen, "%s: %s", path, what);
}

/* The geometry @p p asks for, laid out after the superblock. */
static void
layout(const struct kvdisk_params *p, struct sb *sb)
{
	uint64_t off = KVDISK_ALIGN;
	uint16_t c;

	memset(sb, 0, sizeof(*sb));
	sb->magic = SB_MAGIC;
	sb->version = VERSION;
	sb->num_caches = p->num_caches;
	for (c = 0; c < p->num_caches; c++) {
		struct sb_cache *g = &sb->cache[c];
		uint64_t bytes = KVDISK_HDR_LEN + (uint64_t)p->cache[c].column_tokens *
							  p->cache[c].bytes_per_token;

		g->bytes_per_token = p->cache[c].bytes_per_token;
		g->column_tokens = p->cache[c].column_tokens;
		g->slots = p->cache[c].capacity_tokens / p->cache[c].column_tokens;
		g->slot_bytes = (bytes + KVDISK_ALIGN - 1) / KVDISK_ALIGN * KVDISK_ALIGN;
		g->offset = off;
		off += g->slots * g->slot_bytes;
	}
	sb->hash = XXH3_64bits(sb, offsetof(struct sb, hash));
}

static uint64_t
file_end(const struct sb *sb)
{
	const struct sb_cache *g = &sb->cache[sb->num_caches - 1];

	return g->offset + g->slots * g->slot_bytes;
}

/* "2 caches: 64 tokens x 512 B, 1000 columns; ..." for the messages. */
static void
say_geometry(const struct sb *sb, char *out, size_t cap)
{
	size_t n = 0;
	uint16_t c;

	n += (size_t)snprintf(out + n, cap - n, "%u cache(s):", sb->num_caches);
	for (c = 0; c < sb->num_caches && c < KVDISK_MAX_CACHES && n < cap; c++)
		n += (size_t)snprintf(out + n, cap - n, " [%u] %u tokens x %u B, %llu columns", c,
				      sb->cache[c].column_tokens, sb->cache[c].bytes_per_token,
				      (unsigned long long)sb->cache[c].slots);
}

/* Read every slot's header: what checks goes in the index; the rest is cleared. */
static int
rebuild(struct kvdisk *d)
{
	uint16_t c;

	for (c = 0; c < d->nc; c++) {
		struct region *r = &d->r[c];
		uint64_t next = 0, done = 0;

		while (done < r->g.slots) {
			struct io_uring_cqe *cqe;
			struct op *o;

			while (next < r->g.slots && (o = op_get(d)) != NULL) {
				o->type = KVDISK_GET;
				o->cache = c;
				o->slot = (uint32_t)next++;
				submit(d, o, false, KVDISK_ALIGN, slot_off(r, o->slot));
			}
			io_uring_submit(&d->ring);
			d->unsubmitted = 0;
			if (io_uring_wait_cqe(&d->ring, &cqe) != 0)
				return -EIO;
			o = &d->ops[io_uring_cqe_get_data64(cqe)];
			d->inflight--;
			done++;
			if (cqe->res != (int)KVDISK_ALIGN) {
				int e = cqe->res < 0 ? -cqe->res : EIO;

				io_uring_cqe_seen(&d->ring, cqe);
				op_put(d, o);
				return -e;
			} else {
				const struct hdr *h = (const struct hdr *)o->buf;
				struct slot *s = &r->s[o->slot];

				if (h->magic == HDR_MAGIC && h->version == VERSION &&
				    h->hdr_hash == hdr_hash(h) && h->cache == c && h->tokens > 0 &&
				    h->tokens <= r->g.column_tokens && h->key != 0 &&
				    find(r, h->key, h->org) == NIL) {
					s->m = (struct kvdisk_meta){h->key, h->parent, h->org,
								    h->first_use_ns, h->start,
								    h->tokens, c};
					index_add(r, o->slot);
					d->st.stored[c]++;
					d->st.rebuilt++;
				} else if (h->magic != 0 || h->hdr_hash != 0) {
					/* Torn, of another cache, or a second copy: cleared. */
					d->st.rebuild_dropped++;
					s->state = S_CLEAR;
					r->clearing++;
					d->clears[d->nclears++] = (struct clear_req){c, o->slot};
				}
			}
			io_uring_cqe_seen(&d->ring, cqe);
			op_put(d, o);
		}
		for (next = r->g.slots; next-- > 0;)
			if (r->s[next].state == S_FREE)
				r->free[r->nfree++] = (uint32_t)next;
	}
	return 0;
}

struct kvdisk *
kvdisk_open(const char *path, const struct kvdisk_params *p, char *err, size_t errlen)
{
	struct kvdisk *d = calloc(1, sizeof(*d));
	struct sb want, *have = NULL;
	uint64_t total = 0, end = 0;
	struct stat stt;
	uint32_t i;
	uint16_t c;
	int rc;

	if (d == NULL) {
		fail(err, errlen, path, "out of memory");
		return NULL;
	}
	d->fd = -1;
	if (p->num_caches == 0 || p->num_caches > KVDISK_MAX_CACHES) {
		fail(err, errlen, path, "1 to 16 caches");
		goto bad;
	}
	for (c = 0; c < p->num_caches; c++)
		if (p->cache[c].bytes_per_token == 0 || p->cache[c].column_tokens == 0 ||
		    p->cache[c].capacity_tokens / p->cache[c].column_tokens == 0 ||
		    p->cache[c].capacity_tokens / p->cache[c].column_tokens > UINT32_MAX - 1) {
			fail(err, errlen, path, "a cache's capacity must hold 1 to 2^32 - 2 columns");
			goto bad;
		}
	layout(p, &want);
	/* Not blocking on a FIFO; then only a regular file or a block device. */
	d->fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NONBLOCK | O_DIRECT, 0600);
	d->direct = d->fd >= 0;
	if (d->fd < 0 && errno == EINVAL)
		d->fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NONBLOCK, 0600);
	if (d->fd < 0) {
		fail(err, errlen, path, "cannot open: %s", strerror(errno));
		goto bad;
	}
	if (fstat(d->fd, &stt) != 0 || (!S_ISREG(stt.st_mode) && !S_ISBLK(stt.st_mode))) {
		fail(err, errlen, path, "not a regular file or a block device");
		goto bad;
	}
	/* One process per file: a second one would scribble over the first's index. */
	if (flock(d->fd, LOCK_EX | LOCK_NB) != 0) {
		fail(err, errlen, path, "in use by another process (%s)", strerror(errno));
		goto bad;
	}
	fcntl(d->fd, F_SETFL, fcntl(d->fd, F_GETFL) & ~O_NONBLOCK);
	if (posix_memalign((void **)&have, KVDISK_ALIGN, KVDISK_ALIGN) != 0) {
		fail(err, errlen, path, "out of memory");
		goto bad;
	}
	memset(have, 0, KVDISK_ALIGN);
	if (S_ISBLK(stt.st_mode))
		rc = ioctl(d->fd, BLKGETSIZE64, &end);
	else
		end = (uint64_t)stt.st_size, rc = 0;
	if (rc != 0) {
		fail(err, errlen, path, "cannot size the device: %s", strerror(errno));
		goto bad;
	}
	if (end >= KVDISK_ALIGN && pread(d->fd, have, KVDISK_ALIGN, 0) != (ssize_t)KVDISK_ALIGN) {
		fail(err, errlen, path, "cannot read its superblock: %s", strerror(errno));
		goto bad;
	}
	if (have->magic == 0 && (S_ISBLK(stt.st_mode) || end == 0)) {
		/* New: allocated whole now, so that a disk too small says so here. */
		total = file_end(&want);
		if (S_ISREG(stt.st_mode) && (rc = posix_fallocate(d->fd, 0, (off_t)total)) != 0) {
			fail(err, errlen, path, "cannot allocate %llu bytes for the second tier: %s",
			     (unsigned long long)total, strerror(rc));
			if (ftruncate(d->fd, 0) != 0) {
				/* what fallocate took stays; said above */
			}
			goto bad;
		}
		if (S_ISBLK(stt.st_mode) && end < total) {
			fail(err, errlen, path, "the device is smaller than the second tier asks");
			goto bad;
		}
		memcpy(have, &want, sizeof(want));
		if (pwrite(d->fd, have, KVDISK_ALIGN, 0) != (ssize_t)KVDISK_ALIGN) {
			fail(err, errlen, path, "cannot write its superblock: %s", strerror(errno));
			goto bad;
		}
	} else if (have->magic != SB_MAGIC || have->hash != XXH3_64bits(have, offsetof(struct sb, hash))) {
		fail(err, errlen, path, "not a kvss second-tier file (its first 4 KiB say otherwise); "
			 "name another file, or remove this one");
		goto bad;
	} else if (memcmp(have, &want, offsetof(struct sb, hash)) != 0) {
		char a[512], b[512];

		say_geometry(have, a, sizeof(a));
		say_geometry(&want, b, sizeof(b));
		fail(err, errlen, path, "made for another configuration (it holds %s; this one asks "
		     "%s): remove it to start empty, or name another file", a, b);
		goto bad;
	} else if (end < file_end(&want)) {
		fail(err, errlen, path, "shorter than its superblock says (truncated?)");
		goto bad;
	}
	/* Memory: slots and index per cache, ops with their buffers. */
	d->nc = p->num_caches;
	for (c = 0; c < d->nc; c++) {
		struct region *r = &d->r[c];

		r->g = want.cache[c];
		r->nbucket = (uint32_t)(r->g.slots < 16 ? 16 : r->g.slots);
		r->s = calloc(r->g.slots, sizeof(*r->s));
		r->bucket = malloc(sizeof(uint32_t) * r->nbucket);
		r->free = malloc(sizeof(uint32_t) * r->g.slots);
		if (r->s == NULL || r->bucket == NULL || r->free == NULL) {
			fail(err, errlen, path, "out of memory for the index");
			goto bad;
		}
		memset(r->bucket, 0xff, sizeof(uint32_t) * r->nbucket);
		for (i = 0; i < r->g.slots; i++)
			r->s[i].hnext = r->s[i].del_op = NIL;
		if (r->g.slot_bytes > d->max_slot)
			d->max_slot = r->g.slot_bytes;
		d->clears_cap += (uint32_t)r->g.slots;
	}
	d->qd = p->queue_depth ? p->queue_depth : 64;
	d->ops = calloc(d->qd, sizeof(*d->ops));
	d->held = malloc(sizeof(uint32_t) * d->qd);
	d->clears = malloc(sizeof(*d->clears) * (d->clears_cap + 1));
	if (d->ops == NULL || d->held == NULL || d->clears == NULL ||
	    posix_memalign((void **)&d->bufs, KVDISK_ALIGN, d->max_slot * d->qd) != 0) {
		fail(err, errlen, path, "out of memory for its buffers");
		goto bad;
	}
	d->op_free = NIL;
	for (i = d->qd; i-- > 0;) {
		d->ops[i].buf = d->bufs + (size_t)i * d->max_slot;
		op_put(d, &d->ops[i]);
	}
	if ((rc = io_uring_queue_init(d->qd, &d->ring, 0)) != 0) {
		fail(err, errlen, path, "io_uring: %s", strerror(-rc));
		goto bad_noring;
	}
	{
		struct iovec *iov = malloc(sizeof(*iov) * d->qd);

		/* Registered when the memory lock limit allows; plain I/O otherwise. */
		for (i = 0; iov != NULL && i < d->qd; i++)
			iov[i] = (struct iovec){d->ops[i].buf, d->max_slot};
		d->fixed = iov != NULL && io_uring_register_buffers(&d->ring, iov, d->qd) == 0;
		free(iov);
	}
	if ((rc = rebuild(d)) != 0) {
		fail(err, errlen, path, "cannot read its columns back: %s", strerror(-rc));
		goto bad;
	}
	free(have);
	return d;
bad:
	if (d->ops != NULL && d->qd && d->ring.ring_fd > 0)
		io_uring_queue_exit(&d->ring);
bad_noring:
	free(have);
	d->ring.ring_fd = 0;
	kvdisk_close(d);
	return NULL;
}

void
kvdisk_close(struct kvdisk *d)
{
	struct kvdisk_done done[16];
	uint16_t c;

	if (d == NULL)
		return;
	if (d->ring.ring_fd > 0) {
		/* What was asked is written before the file closes. */
		while (kvdisk_inflight(d) > 0)
			kvdisk_poll(d, done, 16, true);
		io_uring_queue_exit(&d->ring);
	}
	if (d->fd >= 0)
		close(d->fd);
	for (c = 0; c < KVDISK_MAX_CACHES; c++) {
		free(d->r[c].s);
		free(d->r[c].bucket);
		free(d->r[c].free);
	}
	free(d->ops);
	free(d->held);
	free(d->clears);
	free(d->bufs);
	free(d);
}
