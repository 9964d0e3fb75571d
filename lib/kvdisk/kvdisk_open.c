/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * A shard's second tier (kvdisk.h): open (the file, its geometry, the ring
 * and the op buffers), the index rebuilt from the slot headers (only what
 * both checksums pass), and close.
 */
#define _GNU_SOURCE
#include "kvdisk_priv.h"

#include <errno.h>
#include <fcntl.h>
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

			while (next < r->g.slots && (o = kd_op_get(d)) != NULL) {
				o->type = KVDISK_GET;
				o->cache = c;
				o->slot = (uint32_t)next++;
				kd_submit(d, o, false, KVDISK_ALIGN, slot_off(r, o->slot));
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
				kd_op_put(d, o);
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
			kd_op_put(d, o);
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
		kd_op_put(d, &d->ops[i]);
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
