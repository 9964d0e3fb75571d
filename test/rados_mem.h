/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * lib/shared's API (shared.h) over objects in this process's memory, in
 * place of librados (lib/shared/shared_rados.c): what the tests that drive
 * the driver's shared level (test/test_drv_shared.c) and the shard fuzzer
 * (test/fuzz/fuzz_shard_rados.c) link instead of a Ceph cluster. A cluster
 * takes 20 s to come up and an operation milliseconds; a test wants its
 * answers at once, in an order it chooses, and failures it asks for.
 *
 * Semantics as shared.h documents them: objects by (namespace, name); an
 * exclusive create (shared_put) that finds the name taken completes -EEXIST
 * and keeps the old object; shared_replace writes over it; a read of an
 * object larger than asked completes -EFBIG, a missing one -ENOENT; a DEL
 * of a missing one -ENOENT; a submit past the depth (max_inflight) is
 * refused -EBUSY and counted busy; completions are counted in struct
 * shared_stats as the library counts them. The generation objects hold
 * decimal text, read and written with a version (every write of an object
 * gives it a new one), so shared_gen_read_ver / set / bump behave as on a
 * cluster. shared_open() refuses a configuration that is not a regular
 * file, as the library does (with its check, shared_conf_check()); nothing
 * else of it is read.
 *
 * Asynchronous ops complete only in shared_poll(), in order of submission
 * (or newest first: struct rmem_params), never while held; a wait does not
 * wait (nothing else would complete them). Not thread-safe: one caller.
 *
 * What a test may ask of the cluster: the next N ops fail with an errno
 * (async ones complete so, synchronous ones return it), ops held until
 * released (its submitted hook holds them), objects written, rewritten or
 * removed where they lie. The fuzzer's lies go through its hooks (struct
 * rmem_hooks).
 */
#ifndef KVSS_TEST_RADOS_MEM_H
#define KVSS_TEST_RADOS_MEM_H

#include <stdbool.h>
#include <stdint.h>

#include "shared.h"

/** Objects held at most (a write to a full store drops the first slot's). */
#define RMEM_OBJS_MAX 256

/** An object in the store. */
struct rmem_obj {
	bool used;
	char ns[SHARED_NS_MAX], name[SHARED_NAME_MAX];
	uint32_t len;
	uint8_t *b;
	uint64_t ver;	/**< its version: every write a new one (never 0) */
	int64_t mtime;	/**< wall-clock seconds of its last write */
};

/** An op submitted and not yet completed. */
struct rmem_op {
	uint8_t kind;	/**< enum shared_op */
	bool over;	/**< PUT: over what is there (shared_replace), not exclusive */
	bool held;	/**< not completed until released */
	uint8_t tag;	/**< the hooks' own (the fuzzer's fault) */
	int fail;	/**< completes with this -errno (rmem_fail) */
	uint64_t cookie;
	char ns[SHARED_NS_MAX], name[SHARED_NAME_MAX];
	uint8_t *buf;
	uint32_t len;	/**< PUT: its length; GET: the room */
};

/** A harness's say in each op (each may be NULL). */
struct rmem_hooks {
	/** An op was taken (its fields set): may set its tag and hold it. */
	void (*submitted)(struct rmem_op *o);
	/** Before the store answers @p o (@p x: the object of its name, or NULL):
	 *  true when the hook answered @p d itself. */
	bool (*complete)(const struct rmem_op *o, struct rmem_obj *x, struct shared_done *d);
	/** A read answered from @p x into o->buf (d->status 0): may change what it says. */
	void (*read)(const struct rmem_op *o, struct rmem_obj *x, struct shared_done *d);
	/** shared_poll() entered, before anything completes. */
	void (*poll)(uint32_t wait_ms);
	/** shared_inflight() entered. */
	void (*inflight)(void);
};

/** How the store behaves (rmem_setup; without it: the defaults below). */
struct rmem_params {
	uint32_t max_objs;	/**< 0: RMEM_OBJS_MAX (at most it) */
	uint32_t max_ops;	/**< caps the depth; 0: SHARED_INFLIGHT_MAX */
	bool newest_first;	/**< complete the newest op first (answers out of order) */
	bool any_conf;		/**< shared_open takes any configuration name (the fuzzer names none) */
	struct rmem_hooks hooks;
};

void rmem_setup(const struct rmem_params *p);

/* ---- The objects -------------------------------------------------------------- */

/** Every object gone (ops in flight stay). */
void rmem_clear(void);
/** The object @p ns / @p name, or NULL. */
struct rmem_obj *rmem_find(const char *ns, const char *name);
/** The @p which'th object held (modulo how many there are), or NULL when none. */
struct rmem_obj *rmem_nth(unsigned int which);
/** Objects held in @p ns (NULL: in all). */
unsigned int rmem_count(const char *ns);
/** Write @p len bytes as @p ns / @p name, over what is there (a new version). */
struct rmem_obj *rmem_write(const char *ns, const char *name, const void *buf, uint32_t len);
/** Write a generation object's text ("7\n"; or anything, to break it). */
void rmem_write_text(const char *ns, const char *name, const char *text);
/** Remove @p o where it lies. */
void rmem_drop(struct rmem_obj *o);
/** Remove @p ns / @p name: true when it was there. */
bool rmem_remove(const char *ns, const char *name);

/* ---- The ops ---------------------------------------------------------------------- */

/** The next @p n ops (async or synchronous) fail with @p err (a -errno). */
void rmem_fail(unsigned int n, int err);
/** Every op held is released (completes at the next shared_poll). */
void rmem_release(void);
/** Ops in flight. */
unsigned int rmem_nops(void);
/** Is every op in flight held (true when none is)? */
bool rmem_all_held(void);
/** Ops submitted since the start, of @p kind (enum shared_op; 0: every kind). */
uint64_t rmem_submitted(uint8_t kind);

#endif
