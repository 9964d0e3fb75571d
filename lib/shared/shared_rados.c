/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The shared level's librados client (shared.h): a fixed array of slots,
 * one per op in flight, each with its own completion; librados' finisher
 * thread marks a slot done (release) and wakes the owner's eventfd, the
 * owner reaps done slots in shared_poll() (acquire). Nothing else crosses
 * threads.
 */
#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <unistd.h>

#include <rados/librados.h>

#include "fileio.h"
#include "mono.h"
#include "shared.h"

#define DEFAULT_TIMEOUT_MS 5000
#define DEFAULT_INFLIGHT 16
#define BUMP_TRIES 64
/* "4294967295\n" and room to see that an object is longer. */
#define GEN_TEXT_MAX 16

struct shared_slot {
	/* Written by the owner before submission, read back after done. */
	struct shared *s;
	rados_completion_t c;
	rados_read_op_t rop;
	rados_write_op_t wop;
	uint64_t cookie;
	uint8_t op;
	uint32_t cap;
	/* GET's results: written by librados before the completion fires. */
	uint64_t size;
	time_t mtime;
	size_t bytes_read;
	int stat_rval;
	int read_rval;
	/* lib: wo (release), owner: ro (acquire), then reset by the owner. */
	int done;
};

struct shared {
	rados_t cluster;
	rados_ioctx_t io;
	int evfd; /* librados' thread: write; owner: poll, read */
	uint32_t timeout_ms;
	uint32_t nslots;
	struct shared_slot *slots;
	uint32_t *free;	  /* stack of free slot indices */
	uint32_t nfree;
	uint32_t *live;	  /* slots in flight, unordered */
	uint32_t nlive;
	struct shared_stats st;
};

static void __attribute__((format(printf, 3, 4)))
set_err(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	if (err == NULL || errlen == 0)
		return;
	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
}

/* librados' finisher thread: mark the slot and wake the owner; nothing more. */
static void
on_complete(rados_completion_t c, void *arg)
{
	struct shared_slot *sl = arg;
	uint64_t one = 1;
	ssize_t n;

	(void)c;
	__atomic_store_n(&sl->done, 1, __ATOMIC_RELEASE);
	n = write(sl->s->evfd, &one, sizeof(one));
	(void)n; /* EAGAIN: the counter is full, the owner is awake anyway */
}

static int
set_secs(rados_t cl, const char *opt, uint32_t ms)
{
	char v[16];

	snprintf(v, sizeof(v), "%u", (ms + 999) / 1000);
	return rados_conf_set(cl, opt, v);
}

/*
 * The files the configuration names for librados to open (its keyrings and
 * key file): librados opens them blocking, so a FIFO there would hang the
 * connect for ever, deaf to signals. Each that exists must be a regular
 * file (one that does not exist is librados' to skip or refuse), or
 * /dev/null (the usual "no keyring" of a cluster without cephx).
 */
static int
keyrings_check(rados_t cl, const char *conf, char *err, size_t errlen)
{
	static const char *const opts[] = {"keyring", "keyfile"};
	char v[4096], why[600];
	unsigned int i;

	for (i = 0; i < sizeof(opts) / sizeof(opts[0]); i++) {
		char *save = NULL, *path;

		if (rados_conf_get(cl, opts[i], v, sizeof(v)) < 0)
			continue;
		for (path = strtok_r(v, ",; \t", &save); path != NULL;
		     path = strtok_r(NULL, ",; \t", &save)) {
			struct stat st;
			FILE *f;

			if (stat(path, &st) != 0) {
				if (errno == ENOENT)
					continue;
			} else if (S_ISCHR(st.st_mode) && major(st.st_rdev) == 1 &&
				   minor(st.st_rdev) == 3) {
				continue; /* /dev/null */
			}
			f = fileio_open(path, why, sizeof(why));
			if (f == NULL) {
				set_err(err, errlen, "%s of Ceph configuration %s: %s", opts[i], conf, why);
				return -EINVAL;
			}
			fclose(f);
		}
	}
	return 0;
}

/* @p n request slots for @p s, all free: 0, or -1 (out of memory; the caller frees). */
static int
slots_make(struct shared *s, uint32_t n)
{
	uint32_t i;

	s->slots = calloc(n, sizeof(*s->slots));
	s->free = calloc(n, sizeof(*s->free));
	s->live = calloc(n, sizeof(*s->live));
	if (s->slots == NULL || s->free == NULL || s->live == NULL)
		return -1;
	s->nslots = n;
	for (i = 0; i < n; i++) {
		s->slots[i].s = s;
		s->free[i] = n - 1 - i;
	}
	s->nfree = n;
	return 0;
}

/*
 * Client @p c configured from file @p conf, its keyrings checked, and its
 * timeouts @p ms whatever the file says: 0, or -1 (said in @p err).
 */
static int
client_configure(rados_t c, const char *conf, uint32_t ms, char *err, size_t errlen)
{
	int rc;

	rc = rados_conf_read_file(c, conf);
	if (rc < 0) {
		set_err(err, errlen, "Ceph configuration %s unreadable: %s", conf, strerror(-rc));
		return -1;
	}
	rc = keyrings_check(c, conf, err, errlen);
	if (rc < 0)
		return -1;
	/* After the file: these are the caller's, whatever the file says. */
	if ((rc = set_secs(c, "rados_osd_op_timeout", ms)) < 0 ||
	    (rc = set_secs(c, "rados_mon_op_timeout", ms)) < 0 ||
	    (rc = set_secs(c, "client_mount_timeout", ms)) < 0) {
		set_err(err, errlen, "setting the op timeouts: %s", strerror(-rc));
		return -1;
	}
	/* An op sent to an OSD that died before the client heard of it waits
	 * for a newer map, which the objecter asks for only once an op is
	 * older than objecter_timeout (10 s), checked every tick (5 s): past
	 * any op timeout. Ask after 1 s, checked every second. */
	if ((rc = rados_conf_set(c, "objecter_timeout", "1")) < 0 ||
	    (rc = rados_conf_set(c, "objecter_tick_interval", "1")) < 0) {
		set_err(err, errlen, "setting the objecter's tick: %s", strerror(-rc));
		return -1;
	}
	return 0;
}

struct shared *
shared_open(const struct shared_params *p, char *err, size_t errlen)
{
	const char *pool = p->pool != NULL ? p->pool : "kvss";
	const char *client = p->client != NULL ? p->client : "client.admin";
	uint32_t ms = p->op_timeout_ms != 0 ? p->op_timeout_ms : DEFAULT_TIMEOUT_MS;
	uint32_t n = p->max_inflight != 0 ? p->max_inflight : DEFAULT_INFLIGHT;
	struct shared *s;
	int rc;

	if (p->conf == NULL || p->conf[0] == '\0') {
		set_err(err, errlen, "no Ceph configuration file given");
		return NULL;
	}
	if (shared_conf_check(p->conf, err, errlen) != 0)
		return NULL;
	if (n > SHARED_INFLIGHT_MAX) {
		set_err(err, errlen, "max_inflight %u above %u", n, SHARED_INFLIGHT_MAX);
		return NULL;
	}
	s = calloc(1, sizeof(*s));
	if (s == NULL) {
		set_err(err, errlen, "out of memory");
		return NULL;
	}
	if (slots_make(s, n) != 0) {
		set_err(err, errlen, "out of memory");
		goto out_free;
	}
	s->timeout_ms = (ms + 999) / 1000 * 1000;
	s->evfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (s->evfd < 0) {
		set_err(err, errlen, "eventfd: %s", strerror(errno));
		goto out_free;
	}

	rc = rados_create2(&s->cluster, "ceph", client, 0);
	if (rc < 0) {
		set_err(err, errlen, "rados_create2 as %s: %s", client, strerror(-rc));
		goto out_evfd;
	}
	if (client_configure(s->cluster, p->conf, ms, err, errlen) != 0)
		goto out_shutdown;
	rc = rados_connect(s->cluster);
	if (rc < 0) {
		if (rc == -ETIMEDOUT)
			set_err(err, errlen, "cluster of %s unreachable within %u s (mon_host)",
				p->conf, s->timeout_ms / 1000);
		else
			set_err(err, errlen, "connecting to the cluster of %s as %s: %s", p->conf,
				client, strerror(-rc));
		goto out_shutdown;
	}
	rc = rados_ioctx_create(s->cluster, pool, &s->io);
	if (rc < 0) {
		set_err(err, errlen, "pool %s: %s", pool,
			rc == -ENOENT ? "missing (ceph osd pool create)" : strerror(-rc));
		goto out_shutdown;
	}
	return s;

out_shutdown:
	rados_shutdown(s->cluster);
out_evfd:
	close(s->evfd);
out_free:
	free(s->live);
	free(s->free);
	free(s->slots);
	free(s);
	return NULL;
}

static void
slot_release(struct shared_slot *sl)
{
	rados_aio_release(sl->c);
	sl->c = NULL;
	if (sl->rop != NULL)
		rados_release_read_op(sl->rop);
	if (sl->wop != NULL)
		rados_release_write_op(sl->wop);
	sl->rop = NULL;
	sl->wop = NULL;
}

void
shared_close(struct shared *s)
{
	uint32_t i;

	if (s == NULL)
		return;
	/* Each op ends within the op timeout; the hook must have run too. */
	for (i = 0; i < s->nlive; i++) {
		struct shared_slot *sl = &s->slots[s->live[i]];

		rados_aio_wait_for_complete_and_cb(sl->c);
		slot_release(sl);
	}
	rados_ioctx_destroy(s->io);
	rados_shutdown(s->cluster);
	close(s->evfd);
	free(s->live);
	free(s->free);
	free(s->slots);
	free(s);
}

static int
check_names(const char *ns, const char *name)
{
	if (ns == NULL || name == NULL || name[0] == '\0')
		return -EINVAL;
	if (strlen(ns) > SHARED_RADOS_NS_MAX || strlen(name) > SHARED_RADOS_NAME_MAX)
		return -ENAMETOOLONG;
	return 0;
}

/* A free slot with its completion made into @p out; -EBUSY (counted) or -ENOMEM. */
static int
slot_take(struct shared *s, uint8_t op, uint64_t cookie, struct shared_slot **out)
{
	struct shared_slot *sl;

	if (s->nfree == 0) {
		s->st.busy++;
		return -EBUSY;
	}
	sl = &s->slots[s->free[s->nfree - 1]];
	if (rados_aio_create_completion2(sl, on_complete, &sl->c) < 0)
		return -ENOMEM;
	s->nfree--;
	sl->op = op;
	sl->cookie = cookie;
	sl->done = 0;
	sl->size = 0;
	sl->bytes_read = 0;
	sl->stat_rval = 0;
	sl->read_rval = 0;
	*out = sl;
	return 0;
}

/* Submitted: in flight. Refused: back to the free stack. */
static int
slot_submitted(struct shared *s, struct shared_slot *sl, int rc)
{
	uint32_t idx = (uint32_t)(sl - s->slots);

	if (rc < 0) {
		slot_release(sl);
		s->free[s->nfree++] = idx;
		s->st.other_errors++;
		return rc;
	}
	s->live[s->nlive++] = idx;
	s->st.submitted[sl->op]++;
	return 0;
}

/* A whole object written in one op: created exclusively (-EEXIST if there), or over what is. */
static int
put_op(struct shared *s, const char *ns, const char *name, const void *buf, uint32_t len,
       uint64_t cookie, bool exclusive)
{
	struct shared_slot *sl;
	int rc = check_names(ns, name);

	if (rc < 0)
		return rc;
	if (buf == NULL && len > 0)
		return -EINVAL;
	if (len > SHARED_PUT_MAX)
		return -EFBIG;
	rc = slot_take(s, SHARED_OP_PUT, cookie, &sl);
	if (rc < 0)
		return rc;
	sl->wop = rados_create_write_op();
	if (sl->wop == NULL)
		return slot_submitted(s, sl, -ENOMEM);
	if (exclusive)
		rados_write_op_create(sl->wop, LIBRADOS_CREATE_EXCLUSIVE, NULL);
	rados_write_op_write_full(sl->wop, buf, len);
	/* The op takes the namespace now (shared.h); the next set does not move it. */
	rados_ioctx_set_namespace(s->io, ns);
	rc = rados_aio_write_op_operate(sl->wop, s->io, sl->c, name, NULL, 0);
	return slot_submitted(s, sl, rc);
}

int
shared_put(struct shared *s, const char *ns, const char *name, const void *buf, uint32_t len,
	   uint64_t cookie)
{
	return put_op(s, ns, name, buf, len, cookie, true);
}

int
shared_replace(struct shared *s, const char *ns, const char *name, const void *buf, uint32_t len,
	       uint64_t cookie)
{
	return put_op(s, ns, name, buf, len, cookie, false);
}

int
shared_get(struct shared *s, const char *ns, const char *name, void *buf, uint32_t cap,
	   uint64_t cookie)
{
	struct shared_slot *sl;
	int rc = check_names(ns, name);

	if (rc < 0)
		return rc;
	if (buf == NULL && cap > 0)
		return -EINVAL;
	rc = slot_take(s, SHARED_OP_GET, cookie, &sl);
	if (rc < 0)
		return rc;
	sl->cap = cap;
	sl->rop = rados_create_read_op();
	if (sl->rop == NULL)
		return slot_submitted(s, sl, -ENOMEM);
	/* Size and bytes in one op on one version of the object: a size above
	 * cap is -EFBIG, never a short read taken for the whole. */
	rados_read_op_stat(sl->rop, &sl->size, &sl->mtime, &sl->stat_rval);
	/* A read of length 0 means "to the end" to an OSD: with no room, only
	 * the size is asked (an object of more than 0 bytes is -EFBIG). */
	if (cap > 0)
		rados_read_op_read(sl->rop, 0, cap, buf, &sl->bytes_read, &sl->read_rval);
	rados_ioctx_set_namespace(s->io, ns);
	rc = rados_aio_read_op_operate(sl->rop, s->io, sl->c, name, 0);
	return slot_submitted(s, sl, rc);
}

int
shared_del(struct shared *s, const char *ns, const char *name, uint64_t cookie)
{
	struct shared_slot *sl;
	int rc = check_names(ns, name);

	if (rc < 0)
		return rc;
	rc = slot_take(s, SHARED_OP_DEL, cookie, &sl);
	if (rc < 0)
		return rc;
	rados_ioctx_set_namespace(s->io, ns);
	rc = rados_aio_remove(s->io, name, sl->c);
	return slot_submitted(s, sl, rc);
}

/* A done slot's outcome into @p d; the slot is released and freed. */
static void
reap(struct shared *s, uint32_t live_i, struct shared_done *d)
{
	uint32_t idx = s->live[live_i];
	struct shared_slot *sl = &s->slots[idx];
	int rc = rados_aio_get_return_value(sl->c);

	d->cookie = sl->cookie;
	d->op = sl->op;
	d->len = 0;
	if (sl->op == SHARED_OP_GET && rc >= 0) {
		if (sl->stat_rval < 0)
			rc = sl->stat_rval;
		else if (sl->size > sl->cap)
			rc = -EFBIG;
		else if (sl->read_rval < 0)
			rc = sl->read_rval;
		else if (sl->bytes_read != sl->size)
			rc = -EIO; /* one op reads one version: never expected */
		else
			d->len = (uint32_t)sl->bytes_read;
	}
	d->status = rc > 0 ? 0 : rc;
	shared_stats_count(&s->st, sl->op, d->status);
	slot_release(sl);
	s->live[live_i] = s->live[--s->nlive];
	s->free[s->nfree++] = idx;
}

static unsigned int
reap_done(struct shared *s, struct shared_done *out, unsigned int max)
{
	unsigned int got = 0;
	uint32_t i = 0;

	while (i < s->nlive && got < max) {
		if (__atomic_load_n(&s->slots[s->live[i]].done, __ATOMIC_ACQUIRE))
			reap(s, i, &out[got++]); /* the last live slot moved to i */
		else
			i++;
	}
	return got;
}

unsigned int
shared_poll(struct shared *s, struct shared_done *out, unsigned int max, uint32_t wait_ms)
{
	uint64_t end = 0, t;
	unsigned int got;
	uint64_t drain;

	if (max == 0)
		return 0;
	for (;;) {
		/* Drain first: a completion after this read writes again. */
		if (read(s->evfd, &drain, sizeof(drain)) < 0 && errno != EAGAIN)
			return 0;
		got = reap_done(s, out, max);
		if (got > 0 || wait_ms == 0 || s->nlive == 0)
			return got;
		t = mono_ms();
		if (end == 0)
			end = t + wait_ms;
		if (t >= end)
			return 0;
		struct pollfd pfd = { .fd = s->evfd, .events = POLLIN };

		if (poll(&pfd, 1, (int)(end - t)) < 0 && errno != EINTR)
			return 0;
	}
}

unsigned int
shared_inflight(const struct shared *s)
{
	return s->nlive;
}

void
shared_stats_get(const struct shared *s, struct shared_stats *out)
{
	*out = s->st;
}

uint32_t
shared_op_timeout_ms(const struct shared *s)
{
	return s->timeout_ms;
}

/* ---- synchronous ---------------------------------------------------------- */

/* The generation and the object's version (0 when absent: -ENOENT). */
static int
gen_read_ver(struct shared *s, const char *ns, uint32_t *gen, uint64_t *ver)
{
	char b[GEN_TEXT_MAX];
	size_t n = 0;
	int rval = 0, rc;
	rados_read_op_t op = rados_create_read_op();

	if (op == NULL)
		return -ENOMEM;
	rados_read_op_read(op, 0, sizeof(b), b, &n, &rval);
	rados_ioctx_set_namespace(s->io, ns);
	rc = rados_read_op_operate(op, s->io, SHARED_GEN_OBJECT, 0);
	rados_release_read_op(op);
	*gen = 0;
	*ver = 0;
	if (rc == -ENOENT)
		return -ENOENT;
	if (rc < 0)
		return rc;
	if (rval < 0)
		return rval;
	*ver = rados_get_last_version(s->io);
	if (n >= sizeof(b))
		return -EBADMSG;
	return shared_gen_parse(b, n, gen);
}

int
shared_gen_read(struct shared *s, const char *ns, uint32_t *gen)
{
	uint64_t ver;
	int rc;

	if (ns == NULL || strlen(ns) > SHARED_RADOS_NS_MAX)
		return -EINVAL;
	rc = gen_read_ver(s, ns, gen, &ver);
	return rc == -ENOENT ? 0 : rc;
}

int
shared_gen_read_ver(struct shared *s, const char *ns, uint32_t *gen, uint64_t *ver)
{
	if (ns == NULL || strlen(ns) > SHARED_RADOS_NS_MAX)
		return -EINVAL;
	return gen_read_ver(s, ns, gen, ver);
}

/* Write @p gen over the object at version @p ver (0: create it, absent). */
static int
gen_write(struct shared *s, const char *ns, uint32_t gen, uint64_t ver)
{
	char b[GEN_TEXT_MAX];
	int n = snprintf(b, sizeof(b), "%u\n", gen), rc;
	rados_write_op_t op = rados_create_write_op();

	if (op == NULL)
		return -ENOMEM;
	/* Absent: whoever creates it first wins (the other sees EEXIST).
	 * Present: the write holds only if nobody wrote since our read. */
	if (ver == 0)
		rados_write_op_create(op, LIBRADOS_CREATE_EXCLUSIVE, NULL);
	else
		rados_write_op_assert_version(op, ver);
	rados_write_op_write_full(op, b, (size_t)n);
	rados_ioctx_set_namespace(s->io, ns);
	rc = rados_write_op_operate2(op, s->io, SHARED_GEN_OBJECT, NULL, 0);
	rados_release_write_op(op);
	return rc;
}

int
shared_gen_set(struct shared *s, const char *ns, uint32_t gen, uint64_t ver)
{
	int rc;

	if (ns == NULL || strlen(ns) > SHARED_RADOS_NS_MAX || gen > SHARED_GEN_MAX)
		return -EINVAL;
	rc = gen_write(s, ns, gen, ver);
	/* Another writer since the caller's read: the version moved (ERANGE,
	 * EOVERFLOW), or it was created (EEXIST) or removed (ENOENT). */
	if (rc == -ERANGE || rc == -EOVERFLOW || rc == -EEXIST || rc == -ENOENT)
		return -ECANCELED;
	return rc;
}

int
shared_gen_bump(struct shared *s, const char *ns, uint32_t *gen)
{
	uint32_t cur;
	uint64_t ver;
	int i, rc;

	if (ns == NULL || strlen(ns) > SHARED_RADOS_NS_MAX)
		return -EINVAL;
	for (i = 0; i < BUMP_TRIES; i++) {
		rc = gen_read_ver(s, ns, &cur, &ver);
		if (rc < 0 && rc != -ENOENT)
			return rc;
		/* Never past the largest: a wrap to 0 would bring back the oldest. */
		if (cur >= SHARED_GEN_MAX) {
			*gen = cur;
			return -EOVERFLOW;
		}
		rc = gen_write(s, ns, cur + 1, ver);
		if (rc == 0) {
			*gen = cur + 1;
			return 0;
		}
		/* Lost a race: another bumper wrote (ERANGE, EOVERFLOW: the
		 * version moved), created (EEXIST) or removed (ENOENT) it. */
		if (rc != -ERANGE && rc != -EOVERFLOW && rc != -EEXIST && rc != -ENOENT)
			return rc;
		usleep((useconds_t)(1000 + (unsigned int)rand() % 4000));
	}
	return -EAGAIN;
}

int
shared_stat(struct shared *s, const char *ns, const char *name, uint64_t *size, int64_t *mtime)
{
	time_t t = 0;
	int rc = check_names(ns, name);

	if (rc < 0)
		return rc;
	rados_ioctx_set_namespace(s->io, ns);
	rc = rados_stat(s->io, name, size, &t);
	*mtime = (int64_t)t;
	return rc;
}

int
shared_list(struct shared *s, const char *ns,
	    int (*fn)(void *arg, const char *ns, const char *name), void *arg)
{
	rados_list_ctx_t ctx;
	const char *entry, *key, *nspace;
	size_t elen, klen, nlen;
	int rc;

	if (fn == NULL || (ns != NULL && strlen(ns) > SHARED_RADOS_NS_MAX))
		return -EINVAL;
	rados_ioctx_set_namespace(s->io, ns != NULL ? ns : LIBRADOS_ALL_NSPACES);
	rc = rados_nobjects_list_open(s->io, &ctx);
	if (rc < 0)
		goto out;
	for (;;) {
		rc = rados_nobjects_list_next2(ctx, &entry, &key, &nspace, &elen, &klen, &nlen);
		if (rc == -ENOENT) {
			rc = 0;
			break;
		}
		if (rc < 0)
			break;
		if (strlen(entry) != elen || (nspace != NULL && strlen(nspace) != nlen)) {
			s->st.names_skipped++;
			continue;
		}
		rc = fn(arg, nspace != NULL ? nspace : "", entry);
		if (rc != 0)
			break;
	}
	rados_nobjects_list_close(ctx);
out:
	rados_ioctx_set_namespace(s->io, "");
	return rc;
}
