/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * lib/shared: the shared level's client, a small librados user.
 * It stores, reads and deletes whole objects in one pool, each in a RADOS
 * namespace; it decides nothing (names and namespaces come from
 * shared_obj.h's helpers, what to put or read from the driver) and trusts
 * nothing it reads: a GET returns bytes, which the caller checks with
 * shared_obj_decode() before anything is served.
 *
 * Thread-confined: one struct shared per thread (its own librados handle,
 * I/O context and slots; no lock). Asynchronous and polled: a submit
 * returns at once, shared_poll() hands back what completed. librados
 * completes on its own threads; this library's completion hook only marks
 * the op's slot and wakes an eventfd, it never calls into the caller.
 *
 * An op keeps the namespace it was submitted with: librados copies the I/O
 * context's namespace into the op at submission (test/test_shared_rados.c
 * checks it: puts to several namespaces submitted back to back, each found
 * in its own).
 *
 * Every op is bounded by the op timeout (librados' rados_osd_op_timeout,
 * set here: without it a request to a placement group with no live OSD
 * blocks for ever); a timed-out op completes with -ETIMEDOUT. librados
 * counts timeouts in whole seconds: op_timeout_ms is rounded up to one.
 *
 * The generation objects (the emergency reset, shared_obj.h) hold their
 * number as decimal text ("3\n"); anything else there reads as -EBADMSG,
 * 4294967295 as -ERANGE (shared_gen_parse()).
 */
#ifndef KVSS_SHARED_H
#define KVSS_SHARED_H

#include <stddef.h>
#include <stdint.h>

#include "shared_obj.h"

struct shared;

/** What shared_open() needs. */
struct shared_params {
	const char *conf;	/**< a Ceph configuration file (mon_host, auth) */
	const char *pool;	/**< NULL: "kvss" */
	const char *client;	/**< e.g. "client.admin"; NULL: "client.admin" */
	uint32_t op_timeout_ms; /**< every op, the connect and the mon's; 0: 5,000 */
	uint32_t max_inflight;	/**< async ops at once; 0: 16; at most SHARED_INFLIGHT_MAX */
};

#define SHARED_INFLIGHT_MAX 1024
/** Longest namespace and object name taken (RADOS takes longer; ours are short). */
#define SHARED_RADOS_NS_MAX 255
#define SHARED_RADOS_NAME_MAX 255
/** Largest PUT: a header and the largest payload (shared_obj.h). */
#define SHARED_PUT_MAX (SHARED_HDR_LEN + SHARED_PAYLOAD_MAX)

/**
 * Is @p path a Ceph configuration file kvss may hand to librados: a
 * regular file, readable (lib/fileio's check: opened without blocking, so
 * a FIFO cannot hang the caller)? 0, or -1 with @p err saying what it is
 * ("Ceph configuration PATH: not a regular file (a FIFO)").
 */
int shared_conf_check(const char *path, char *err, size_t errlen);

/**
 * Connect to the cluster and open the pool. Returns NULL on failure with
 * @p err (@p errlen bytes) naming the cause: the configuration missing,
 * unreadable or not a regular file (shared_conf_check(); so must be every
 * keyring and key file it names that exists), the cluster unreachable
 * within the timeout, the pool missing.
 */
struct shared *shared_open(const struct shared_params *p, char *err, size_t errlen);

/**
 * Wait for the ops in flight (each bounded by the op timeout), then
 * disconnect and free. NULL does nothing.
 */
void shared_close(struct shared *s);

enum shared_op { SHARED_OP_PUT = 1, SHARED_OP_GET = 2, SHARED_OP_DEL = 3 };

/** A completed op. */
struct shared_done {
	uint64_t cookie;
	uint8_t op;	/**< enum shared_op */
	int status;	/**< 0 or -errno: -EEXIST, -ENOENT, -ETIMEDOUT, -EFBIG ... */
	uint32_t len;	/**< GET: bytes read (0 unless status is 0) */
};

/**
 * PUT: exclusive create and write_full in one write op
 * (LIBRADOS_CREATE_EXCLUSIVE): a second PUT of a name completes -EEXIST.
 * @p buf must live until the op is done. @p len at most SHARED_PUT_MAX.
 * @return 0, -EBUSY when max_inflight ops are in flight, or -errno
 *   (-EINVAL, -ENAMETOOLONG, -EFBIG).
 */
int shared_put(struct shared *s, const char *ns, const char *name, const void *buf, uint32_t len,
	       uint64_t cookie);

/**
 * PUT over what is there (write_full, no exclusive create): for an object
 * found under its name that is not what it must be. Completes as a PUT
 * (op SHARED_OP_PUT). Returns as shared_put().
 */
int shared_replace(struct shared *s, const char *ns, const char *name, const void *buf,
		   uint32_t len, uint64_t cookie);

/**
 * GET: read the whole object into @p buf (@p cap bytes, live until done).
 * An object larger than @p cap completes -EFBIG (never a silent
 * truncation); a missing one -ENOENT. Returns as shared_put().
 */
int shared_get(struct shared *s, const char *ns, const char *name, void *buf, uint32_t cap,
	       uint64_t cookie);

/** DEL: remove the object; a missing one completes -ENOENT. Returns as shared_put(). */
int shared_del(struct shared *s, const char *ns, const char *name, uint64_t cookie);

/**
 * Up to @p max completed ops into @p out; when none has completed, waits up
 * to @p wait_ms for one (0: do not wait). Returns how many.
 */
unsigned int shared_poll(struct shared *s, struct shared_done *out, unsigned int max,
			 uint32_t wait_ms);

/** Ops submitted and not yet returned by shared_poll(). */
unsigned int shared_inflight(const struct shared *s);

/* Synchronous, for tools and slow paths (each bounded by the op timeout). */

/**
 * The generation object (SHARED_GEN_OBJECT) of @p ns ("" : the default
 * namespace, every organization's) into @p gen; an absent one is 0.
 * @return 0 or -errno (-EBADMSG: not a generation).
 */
int shared_gen_read(struct shared *s, const char *ns, uint32_t *gen);

/**
 * The generation object of @p ns and its version (for shared_gen_set()).
 * @return 0; -ENOENT when absent (@p gen and @p ver 0); -EBADMSG or
 *   -ERANGE when it is not a generation (@p ver set: it can be replaced);
 *   or -errno.
 */
int shared_gen_read_ver(struct shared *s, const char *ns, uint32_t *gen, uint64_t *ver);

/**
 * Write generation @p gen (at most SHARED_GEN_MAX) into the object of
 * @p ns, only if it is still at version @p ver (0: only if absent), as
 * shared_gen_read_ver() read it: kvss-shared gen --repair.
 * @return 0, -ECANCELED (written or removed by another since), -errno.
 */
int shared_gen_set(struct shared *s, const char *ns, uint32_t gen, uint64_t ver);

/**
 * Add one to the generation of @p ns, atomically even with several
 * bumpers at once (read with its version, write asserting that version,
 * retried), and return the new one in @p gen.
 * @return 0 or -errno (-EBADMSG or -ERANGE: not a generation; -EOVERFLOW
 *   at SHARED_GEN_MAX, @p gen set to it: never wrapped; -EAGAIN after 64
 *   lost races).
 */
int shared_gen_bump(struct shared *s, const char *ns, uint32_t *gen);

/**
 * Size and modification time (the OSD's clock, seconds) of one object.
 * @return 0, -ENOENT or -errno.
 */
int shared_stat(struct shared *s, const char *ns, const char *name, uint64_t *size,
		int64_t *mtime);

/**
 * Call @p fn for each object of @p ns (NULL: every namespace; "" the
 * default one). A nonzero return of @p fn stops the listing and is
 * returned. Names with a NUL inside (not ours; RADOS allows them) are
 * skipped. @return 0, @p fn's nonzero value, or -errno.
 */
int shared_list(struct shared *s, const char *ns,
		int (*fn)(void *arg, const char *ns, const char *name), void *arg);

/** What this handle did, per op and outcome (one writer: the owner thread). */
struct shared_stats {
	uint64_t submitted[4];	/**< by enum shared_op */
	uint64_t ok[4];
	uint64_t exists;	/**< -EEXIST */
	uint64_t missing;	/**< -ENOENT */
	uint64_t timeouts;	/**< -ETIMEDOUT */
	uint64_t too_big;	/**< -EFBIG */
	uint64_t other_errors;	/**< anything else */
	uint64_t busy;		/**< submits refused -EBUSY */
	uint64_t names_skipped; /**< shared_list: names with a NUL */
};

/** A copy of the counters. */
void shared_stats_get(const struct shared *s, struct shared_stats *out);

/**
 * Count in @p st a completion of @p op (enum shared_op) with @p status: ok,
 * or the outcome its -errno names. For the clients of this API
 * (shared_rados.c, and test/rados_mem.c in its place), so that they count
 * alike; a caller reads the counts with shared_stats_get().
 */
void shared_stats_count(struct shared_stats *st, uint8_t op, int status);

/** The op timeout in force, in ms (a whole number of seconds). */
uint32_t shared_op_timeout_ms(const struct shared *s);

#endif /* KVSS_SHARED_H */
