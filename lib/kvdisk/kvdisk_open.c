/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * A shard's second tier (kvdisk.h): open (the path as kvdisk_file.c checks
 * it; the superblock's owner and geometry against the caller's, or a blank
 * file formatted; the ring and the op buffers), the index rebuilt from the
 * slot headers (only those whose own checksum holds: XXH3 seeded with the
 * file's id and the place, or a sealed file's MAC), and close.
 */
#define _GNU_SOURCE
#include "kvdisk_priv.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <openssl/crypto.h>

/* ---- Open, rebuild, close ------------------------------------------------ */

static void __attribute__((format(printf, 4, 5)))
fail(char *err, size_t errlen, const char *path, const char *fmt, ...)
{
	char what[1600];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(what, sizeof(what), fmt, ap);
	va_end(ap);
	snprintf(err, errlen, "%s: %s", path, what);
}

/* The owner and the geometry @p p asks for, laid out after the superblock
 * (its file id and hash are made when it is formatted). */
static void
layout(const struct kvdisk_params *p, struct sb *sb)
{
	uint64_t off = KVDISK_ALIGN;
	uint16_t c;

	memset(sb, 0, sizeof(*sb));
	sb->magic = SB_MAGIC;
	sb->version = VERSION;
	sb->model = p->model;
	sb->shard = p->shard;
	sb->num_caches = p->num_caches;
	sb->flags = p->ring != NULL ? KD_SB_SEALED : 0;
	for (c = 0; c < p->num_caches; c++) {
		struct sb_cache *g = &sb->cache[c];
		uint64_t bytes = KVDISK_HDR_LEN + (uint64_t)p->cache[c].column_tokens *
							  p->cache[c].bytes_per_token +
				 (p->ring != NULL ? KD_TRAILER_LEN : 0);

		g->bytes_per_token = p->cache[c].bytes_per_token;
		g->column_tokens = p->cache[c].column_tokens;
		g->slots = p->cache[c].capacity_tokens / p->cache[c].column_tokens;
		g->slot_bytes = (bytes + KVDISK_ALIGN - 1) / KVDISK_ALIGN * KVDISK_ALIGN;
		g->offset = off;
		off += g->slots * g->slot_bytes;
	}
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

/*
 * Read every slot's header: what checks goes in the index; the rest is
 * cleared. A file this open made holds zeros only (write_once): every slot
 * free, none read (a tier's worth of 4 KiB reads at start, through a disk
 * that may be slow).
 */
static int
rebuild(struct kvdisk *d)
{
	uint16_t c;

	for (c = 0; c < d->nc; c++) {
		struct region *r = &d->r[c];
		uint64_t next = 0, done = d->made ? r->g.slots : 0;

		while (done < r->g.slots) {
			struct io_uring_cqe *cqe;
			struct op *o;

			while (next < r->g.slots && (o = kd_op_get(d)) != NULL) {
				o->type = KVDISK_GET;
				o->cache = c;
				o->slot = (uint32_t)next++;
				kd_submit(d, o, false, KVDISK_ALIGN, slot_off(r, o->slot));
			}
			if ((o = kd_submit_wait(d, &cqe)) == NULL)
				return -EIO;
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
				    kd_hdr_ok(d, h, c, o->slot) && h->cache == c &&
				    h->tokens > 0 && h->tokens <= r->g.column_tokens &&
				    h->key != 0 && find(r, h->key, h->org) == NIL) {
					s->m = (struct kvdisk_meta){h->key, h->parent, h->org,
								    h->first_use_ns, h->start,
								    h->tokens, c};
					index_add(r, o->slot);
					d->st.stored[c]++;
					d->st.rebuilt++;
				} else if (h->magic != 0 || h->hdr_hash != 0) {
					/* Torn, of another file or place, or a second
					 * copy: cleared, never served. */
					d->st.rebuild_dropped++;
					d->unopened += h->magic == HDR_MAGIC;
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

/* "model 0, shard 1, 2 caches: ..." for the messages. */
static void
say_owner(const struct sb *sb, char *out, size_t cap)
{
	char g[512];

	say_geometry(sb, g, sizeof(g));
	snprintf(out, cap, "model %u, shard %u, %s", sb->model, sb->shard, g);
}

/*
 * Every byte of a file's first @p total written once (zeros), so that a
 * column's write is an overwrite in place. fallocate alone leaves the
 * blocks unwritten: the first write into each then changes the file's
 * extents as it completes, which waits on the file system's journal, and
 * the journal on whatever it does then. On ext4 mounted with online
 * discard beside two CPU hogs, writes whose bytes had reached the disk in
 * under a millisecond were answered 1 to 25 s later (traced: the block
 * requests done at once, the completions posted later, all together), so
 * the tier stood still and every batch waiting on it with it; written
 * once, none was. Sequential, 1 MiB at a time: 2 s for 2.5 GB here, once,
 * when the file is made.
 */
static int
write_once(int fd, uint64_t total)
{
	const size_t chunk = 1u << 20;
	uint64_t off;
	void *z;

	if (posix_memalign(&z, KVDISK_ALIGN, chunk) != 0)
		return ENOMEM;
	memset(z, 0, chunk);
	for (off = 0; off < total;) {
		size_t n = total - off < chunk ? (size_t)(total - off) : chunk;
		ssize_t w = pwrite(fd, z, n, (off_t)off);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0) {
			int e = w < 0 ? errno : EIO;

			free(z);
			return e;
		}
		off += (uint64_t)w;
	}
	free(z);
	return 0;
}

/*
 * Make the file this shard's, empty: a new id, the first MiB zeroed (what
 * a blank-looking disk held before is not recognised as it any more), the
 * whole length allocated for a file (a disk too small says so now) and
 * written once (write_once), then the superblock, on the disk before the
 * first column.
 */
static int
format(struct kvdisk *d, const struct kd_file *f, struct sb *want, uint8_t *head, char *err,
       size_t errlen)
{
	uint64_t total = file_end(want), zero = total < KD_PROBE_LEN ? total : KD_PROBE_LEN;
	const char *what = "allocate";
	int rc;

	if (getrandom(want->file_id, sizeof(want->file_id), 0) != (ssize_t)sizeof(want->file_id)) {
		snprintf(err, errlen, "cannot make its file id (getrandom): %s", strerror(errno));
		return -1;
	}
	want->hash = XXH3_64bits(want, offsetof(struct sb, hash));
	if (f->blk && f->size < total) {
		snprintf(err, errlen, "the device (%llu bytes) is smaller than the second tier "
			 "asks (%llu)", (unsigned long long)f->size, (unsigned long long)total);
		return -1;
	}
	if (!f->blk) {
		/* What was there goes (blank, or the caller said format). */
		if (f->size > 0 && ftruncate(d->fd, 0) != 0)
			rc = errno;
		else if ((rc = posix_fallocate(d->fd, 0, (off_t)total)) == 0 &&
			 (rc = write_once(d->fd, total)) != 0)
			what = "write once";
		if (rc != 0) {
			snprintf(err, errlen, "cannot %s %llu bytes for the second tier: %s", what,
				 (unsigned long long)total, strerror(rc));
			if (ftruncate(d->fd, 0) != 0) {
				/* what fallocate took stays; said above */
			}
			return -1;
		}
	}
	memset(head, 0, zero);
	if (f->blk && pwrite(d->fd, head, zero, 0) != (ssize_t)zero) {
		snprintf(err, errlen, "cannot clear its first %llu bytes: %s",
			 (unsigned long long)zero, strerror(errno));
		return -1;
	}
	memcpy(head, want, sizeof(*want));
	if (pwrite(d->fd, head, KVDISK_ALIGN, 0) != (ssize_t)KVDISK_ALIGN ||
	    fdatasync(d->fd) != 0) {
		snprintf(err, errlen, "cannot write its superblock: %s", strerror(errno));
		return -1;
	}
	return 0;
}

/*
 * What the file holds, against what @p want asks: 0 to use it as it is, 1
 * to format it (blank, or not this shard's and @p p->format), -1 refused
 * with @p err (and *@p why EEXIST when formatting it would do).
 */
static int
judge(const struct kvdisk_params *p, const struct kd_file *f, const struct sb *want,
      const uint8_t *head, size_t n, char *err, size_t errlen, int *why)
{
	const struct sb *have = (const struct sb *)head;
	char a[600], b[600];
	const char *what;

	if (f->created || n == 0)
		return 1;
	*why = EEXIST;
	if (n >= sizeof(*have) && have->magic == SB_MAGIC) {
		if (have->version != VERSION)
			snprintf(err, errlen, "written by another kvss (on-disk version %u; this "
				 "one reads version %u, whose superblock says whose file it is): "
				 "what it holds cannot be used; format it or remove it",
				 have->version, VERSION);
		else if (have->hash != XXH3_64bits(have, offsetof(struct sb, hash)))
			snprintf(err, errlen, "its superblock fails its checksum: format it or "
				 "remove it");
		else if ((have->flags & ~KD_SB_SEALED) != 0)
			/* Reserved bits: zero in version 2, so that a later version may use them. */
			snprintf(err, errlen, "its superblock's flags are %#x, of which only %#x is "
				 "known: not written by this kvss; format it or remove it",
				 have->flags, KD_SB_SEALED);
		else if (have->flags != want->flags)
			snprintf(err, errlen, "%s", have->flags & KD_SB_SEALED
				 ? "its columns are sealed (written with l2.key_file) and this shard "
				   "has no key file: they cannot be read; configure the key, or format it"
				 : "its columns are plain (written without l2.key_file) and this shard "
				   "seals: a plain file is not sealed in place; format it (its columns are "
				   "lost), or run without the key");
		else if (have->model != want->model || have->shard != want->shard ||
			 have->num_caches != want->num_caches ||
			 memcmp(have->cache, want->cache, sizeof(want->cache)) != 0) {
			say_owner(have, a, sizeof(a));
			say_owner(want, b, sizeof(b));
			snprintf(err, errlen, "made for another shard or configuration (it holds "
				 "%s; this one is %s): name this shard's own file, or format it",
				 a, b);
		} else if (f->size < file_end(want)) {
			snprintf(err, errlen, "shorter than its superblock says (%llu bytes of "
				 "%llu: truncated?)", (unsigned long long)f->size,
				 (unsigned long long)file_end(want));
		} else {
			return 0;
		}
		return p->format ? 1 : -1;
	}
	if ((what = kd_file_content(head, n, a, sizeof(a))) == NULL)
		return 1;
	snprintf(err, errlen, "holds %s, not a kvss second tier: not formatted over; name another "
		 "file, or format it", what);
	return p->format ? 1 : -1;
}

/* The caller's geometry: 1 to 16 caches, each of 1 to 2^32 - 2 columns; a ring with its key. */
static int
check_params(const struct kvdisk_params *p, const char *path, char *err, size_t errlen)
{
	uint16_t c;

	if (p->num_caches == 0 || p->num_caches > KVDISK_MAX_CACHES) {
		fail(err, errlen, path, "1 to 16 caches");
		return -1;
	}
	for (c = 0; c < p->num_caches; c++)
		if (p->cache[c].bytes_per_token == 0 || p->cache[c].column_tokens == 0 ||
		    p->cache[c].capacity_tokens / p->cache[c].column_tokens == 0 ||
		    p->cache[c].capacity_tokens / p->cache[c].column_tokens > UINT32_MAX - 1) {
			fail(err, errlen, path, "a cache's capacity must hold 1 to 2^32 - 2 columns");
			return -1;
		}
	if (p->ring != NULL && !p->ring->cur.loaded) {
		fail(err, errlen, path, "sealed with no key loaded");
		return -1;
	}
	return 0;
}

/*
 * The file at @path, locked for this process, judged by its first MiB:
 * this shard's (its file id into @want), or blank (or told to) and
 * formatted with @want. 0, or -1 with the error written and *@e its errno.
 */
static int
open_file(struct kvdisk *d, const char *path, const struct kvdisk_params *p, struct sb *want,
	  char *err, size_t errlen, int *e)
{
	struct kd_file f;
	uint8_t *head = NULL;
	char why[1536];
	size_t n;
	int rc = -1, j;

	if (kd_file_open(path, &f, why, sizeof(why)) != 0) {
		fail(err, errlen, path, "%s", why);
		*e = EACCES;
		return -1;
	}
	d->fd = f.fd;
	d->direct = f.direct;
	/* One process per file: a second one would scribble over the first's
	 * index. A process that ended with I/O in flight (killed, or crashed)
	 * holds the lock until the kernel has torn its ring down, which runs
	 * after it is gone: a restart at once found it held about once in a
	 * hundred, for up to 1.5 ms here. So a held lock is asked for again
	 * for up to KD_LOCK_WAIT_MS before the file is called in use. */
	if (flock(d->fd, LOCK_EX | LOCK_NB) != 0) {
		unsigned int tries = 0;
		int held = -1;

		/* A file system without locks (ENOLCK) is not one in use. */
		if (errno != EWOULDBLOCK) {
			int fe = errno;

			fail(err, errlen, path, "cannot be locked (%s)", strerror(fe));
			*e = fe;
			return -1;
		}
		/* Counted, not timed: a harness may give this library a
		 * clock of its own (fuzz_shard's moves 1 ns a call). */
		while (tries++ < KD_LOCK_WAIT_MS && (held = flock(d->fd, LOCK_EX | LOCK_NB)) != 0 &&
		       errno == EWOULDBLOCK)
			usleep(1000);
		if (held != 0) {
			fail(err, errlen, path,
			     "in use by another process, or still held by one that "
			     "ended with I/O in flight (%s)",
			     strerror(errno));
			*e = EBUSY;
			return -1;
		}
	}
	fcntl(d->fd, F_SETFL, fcntl(d->fd, F_GETFL) & ~O_NONBLOCK);
	if (posix_memalign((void **)&head, KVDISK_ALIGN, KD_PROBE_LEN) != 0) {
		fail(err, errlen, path, "out of memory");
		*e = ENOMEM;
		return -1;
	}
	/* The first MiB (all of it, when smaller): blank, this shard's, or something else. */
	n = f.size < KD_PROBE_LEN ? (size_t)f.size : KD_PROBE_LEN;
	memset(head, 0, KD_PROBE_LEN);
	if (n > 0 && pread(d->fd, head, (n + KVDISK_ALIGN - 1) / KVDISK_ALIGN * KVDISK_ALIGN, 0) <
			     (ssize_t)n) {
		fail(err, errlen, path, "cannot read its first %zu bytes: %s", n, strerror(errno));
		*e = EIO;
		goto out;
	}
	j = judge(p, &f, want, head, n, why, sizeof(why), e);
	if (j < 0) {
		fail(err, errlen, path, "%s", why);
		goto out;
	}
	if (j == 0) {
		memcpy(want->file_id, ((const struct sb *)head)->file_id, sizeof(want->file_id));
	} else if (format(d, &f, want, head, why, sizeof(why)) != 0) {
		fail(err, errlen, path, "%s", why);
		*e = ENOSPC;
		goto out;
	} else {
		d->made = !f.blk; /* a device's past format: its headers are read */
	}
	rc = 0;
out:
	free(head);
	return rc;
}

/* Each cache's slots and index, by the superblock's geometry @want: 0, or -1 (out of memory). */
static int
alloc_index(struct kvdisk *d, const struct sb *want, const char *path, char *err, size_t errlen)
{
	uint32_t i;
	uint16_t c;

	for (c = 0; c < d->nc; c++) {
		struct region *r = &d->r[c];

		r->g = want->cache[c];
		r->nbucket = (uint32_t)(r->g.slots < 16 ? 16 : r->g.slots);
		r->s = calloc(r->g.slots, sizeof(*r->s));
		r->bucket = malloc(sizeof(uint32_t) * r->nbucket);
		r->free = malloc(sizeof(uint32_t) * r->g.slots);
		r->pend = malloc(sizeof(*r->pend) * kd_pend_cap(d));
		if (r->s == NULL || r->bucket == NULL || r->free == NULL || r->pend == NULL) {
			fail(err, errlen, path, "out of memory for the index");
			return -1;
		}
		memset(r->bucket, 0xff, sizeof(uint32_t) * r->nbucket);
		for (i = 0; i < r->g.slots; i++)
			r->s[i].hnext = r->s[i].del_op = NIL;
		if (r->g.slot_bytes > d->max_slot)
			d->max_slot = r->g.slot_bytes;
		d->clears_cap += (uint32_t)r->g.slots;
	}
	return 0;
}

/* The queue's ops, each with a buffer of the largest slot, all free: 0, or -1 (out of memory). */
static int
alloc_ops(struct kvdisk *d, const char *path, char *err, size_t errlen)
{
	uint32_t i;

	d->ops = calloc(d->qd, sizeof(*d->ops));
	d->held = malloc(sizeof(uint32_t) * d->qd);
	d->clears = malloc(sizeof(*d->clears) * (d->clears_cap + 1));
	d->ready = malloc(sizeof(*d->ready) * d->qd);
	if (d->ops == NULL || d->held == NULL || d->clears == NULL || d->ready == NULL ||
	    posix_memalign((void **)&d->bufs, KVDISK_ALIGN, d->max_slot * d->qd) != 0) {
		fail(err, errlen, path, "out of memory for its buffers");
		return -1;
	}
	d->op_free = NIL;
	for (i = d->qd; i-- > 0;) {
		d->ops[i].buf = d->bufs + (size_t)i * d->max_slot;
		kd_op_put(d, &d->ops[i]);
	}
	return 0;
}

struct kvdisk *
kvdisk_open(const char *path, const struct kvdisk_params *p, char *err, size_t errlen)
{
	struct kvdisk *d = calloc(1, sizeof(*d));
	struct sb want;
	int rc, e = EINVAL;
	uint32_t i;

	if (d == NULL) {
		fail(err, errlen, path, "out of memory");
		errno = ENOMEM;
		return NULL;
	}
	d->fd = -1;
	if (check_params(p, path, err, errlen) != 0)
		goto bad;
	layout(p, &want);
	if (open_file(d, path, p, &want, err, errlen, &e) != 0)
		goto bad;
	memcpy(d->file_id, want.file_id, sizeof(d->file_id));
	d->seed = XXH3_64bits(d->file_id, sizeof(d->file_id));
	e = ENOMEM;
	/* Memory: slots and index per cache, ops with their buffers. */
	d->nc = p->num_caches;
	d->qd = p->queue_depth ? p->queue_depth : 64;
	d->clear_at_once = p->clear_at_once;
	d->model = p->model;
	d->shard = p->shard;
	if (p->ring != NULL) {
		if ((d->keys = malloc(sizeof(*d->keys))) == NULL) {
			fail(err, errlen, path, "out of memory for its keys");
			goto bad;
		}
		*d->keys = *p->ring;
		d->keys->orgs = NULL; /* kvdisk_set_orgs()'s */
		if (kd_hdr_keys(d) != 0) {
			fail(err, errlen, path, "its header keys could not be derived (libcrypto)");
			goto bad;
		}
	}
	if (alloc_index(d, &want, path, err, errlen) != 0 || alloc_ops(d, path, err, errlen) != 0)
		goto bad;
	if ((rc = io_uring_queue_init(d->qd, &d->ring, 0)) != 0) {
		fail(err, errlen, path, "io_uring: %s", strerror(-rc));
		e = -rc;
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
		e = -rc;
		goto bad;
	}
	/* Sealed, and more of its column headers fail under the keys given
	 * than hold: another key's file (a key file swapped or mistyped, a
	 * rotation rolled back), not columns to drop one by one. Refused,
	 * nothing cleared: with its key it opens. A disk's damage or a forger
	 * costs fewer (a forger who can rewrite most of the file can as well
	 * remove it). */
	if (d->keys != NULL && d->unopened > 0 && d->unopened > d->st.rebuilt) {
		fail(err, errlen, path, "sealed, and %u of its %" PRIu64 " column headers do not hold "
		     "under the key given (key %08x%s): another key's file? Give its key (or keep it as "
		     "the old key to rotate), or remove it", d->unopened,
		     d->unopened + d->st.rebuilt, d->keys->cur.id,
		     d->keys->old.loaded ? " or the old one" : "");
		d->nclears = 0;
		e = EKEYREJECTED;
		goto bad;
	}
	return d;
bad:
	if (d->ops != NULL && d->qd && d->ring.ring_fd > 0) {
		struct io_uring_cqe *cqe;

		/* A rebuild that failed on one header left the others' reads
		 * in flight into the op buffers: they land before the buffers
		 * are freed, not in memory malloc may have handed out again.
		 * If the ring cannot say, the buffers are left, not freed. */
		while (d->inflight > 0 && kd_submit_wait(d, &cqe) != NULL)
			io_uring_cqe_seen(&d->ring, cqe);
		if (d->inflight > 0)
			d->bufs = NULL;
		io_uring_queue_exit(&d->ring);
	}
bad_noring:
	d->ring.ring_fd = 0;
	kvdisk_close(d);
	errno = e;
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
	/* The lock goes now, not when the file's last reference does: the
	 * ring's teardown runs after io_uring_queue_exit() returns, and what
	 * it still holds of the file kept the lock for a while after close(),
	 * so that this process reopening the file at once was refused as
	 * another process. What was asked is done (above); the open's
	 * failure path drains what its rebuild left first. */
	if (d->fd >= 0) {
		flock(d->fd, LOCK_UN);
		close(d->fd);
	}
	for (c = 0; c < KVDISK_MAX_CACHES; c++) {
		free(d->r[c].s);
		free(d->r[c].bucket);
		free(d->r[c].free);
		free(d->r[c].pend);
	}
	free(d->ops);
	free(d->held);
	free(d->clears);
	free(d->ready);
	free(d->bufs);
	if (d->keys != NULL) {
		OPENSSL_cleanse(d->keys, sizeof(*d->keys)); /* the keys leave no copy */
		seal_forget();				    /* nor do threads' */
	}
	OPENSSL_cleanse(d->hdr_key, sizeof(d->hdr_key));
	free(d->keys);
	free(d);
}
