/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * A shard's storage levels below DRAM, each an object: the second tier on
 * the shard's own disk (level_disk.c over lib/kvdisk) and the shared level
 * on Ceph RADOS (level_shared.c over lib/shared). A level is a struct with
 * one ops table and one worker thread (level.c), and it knows the shard it
 * serves: its slices are named and stamped with that shard's id and model,
 * whatever thread runs them, so that several shards in one process never
 * share a level or a name.
 *
 * The ingest lcore (level_msg.c) turns L2_DOWN, SH_DOWN, L2_DELETE, L2_UP
 * and SH_UP into requests, hands each to the level its message is for, and
 * answers what the levels finished; it names no backend. The ingest lcore
 * never waits for a disk or a cluster: a request goes to the level's worker
 * over a ring and comes back over another, both holding every request of
 * the shard's pool.
 *
 *   ingest lcore                      the level's worker (one thread)
 *   req_get, shard_level_give --to--> ops->start: begin it, or queue it
 *                                     ops->poll: what finished -> level_done
 *   shard_level_take        <-from--- level_done (its status, a protocol code)
 *
 * Who writes what: the ingest lcore writes a request until it gives it, the
 * worker from then until level_done, the ingest lcore again after it takes
 * it back. A level's counters are its worker's (read by telemetry: torn
 * values at worst).
 */
#ifndef KVSS_SHARD_LEVEL_H
#define KVSS_SHARD_LEVEL_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>

#include "kvdisk.h"
#include "proto.h"
#include "shard_api.h"

struct kvss_shard_inst;
struct rte_ring;
struct rte_mempool;


/**
 * The level a level message of type @p type is for: SH_DOWN and SH_UP the
 * shared level's, the others (L2_*) the second tier's.
 */
static inline enum shard_level_kind
shard_level_kind_of(unsigned int type)
{
	return type == PROTO_T_SH_DOWN || type == PROTO_T_SH_UP ? SHARD_LEVEL_SHARED
								: SHARD_LEVEL_DISK;
}

/* What a request asks of its level. */
enum level_op {
	LEVEL_PUT,  /* write the column (L2_DOWN, SH_DOWN) */
	LEVEL_GET,  /* read the column whole (L2_UP, SH_UP) */
	LEVEL_DEL,  /* forget the column (L2_DELETE) */
	LEVEL_LIST, /* every column held (the inventory after a HELLO) */
	LEVEL_GONE, /* from a worker, unasked: columns its level let go (inv);
		     * calloc'd by the worker, not the pool's */
};

/*
 * One column on its way between DRAM and a level. Requests come from the
 * shard's one pool (level.c); each has room for the largest column's
 * bytes of either level, an object header before them (SHARED_HDR_LEN: a
 * slice is written and read whole, header and bytes in one buffer), and
 * an up message's token positions after them.
 */
struct level_req {
	uint8_t op;	  /* enum level_op */
	uint8_t level;	  /* enum shard_level_kind: whose request it is */
	uint16_t status;  /* the result: 0 or a protocol code */
	uint32_t epoch;	  /* the driver epoch it was made in */
	uint64_t seq;	  /* its message's control seq (ERROR records) */
	struct kvdisk_meta meta;
	uint32_t len;	  /* PUT, GET: the column's bytes in data */
	uint32_t bytes_per_token;
	/* GET: the batch, and where the column's tokens go in its stream. */
	uint64_t batch_no;
	uint32_t stream_len;
	uint16_t npos;
	uint16_t *pos;	  /* npos pairs (stream token, column token), after data */
	/* LIST, GONE: the columns, malloc'd by the worker, freed with the request. */
	struct kvdisk_meta *inv;
	uint32_t ninv;
	/* The shared level's name for the column (section 10): what the driver sent. */
	uint64_t object_id;
	uint32_t gen_global, gen_org, layout;
	uint8_t bad;	  /* GET refused by its check: enum shared_bad */
	uint8_t *obj;	  /* SHARED_HDR_LEN bytes of header, then data */
	uint8_t *data;
	/* The shared level's PUT whose name was taken: the object there, read
	 * back (malloc'd and freed by the worker), and its step (level_shared.c). */
	uint8_t *back;
	uint8_t phase;
	uint64_t t_ns;	  /* GET: when the worker took it (CLOCK_MONOTONIC) */
};


/*
 * An up column's (stream token, column token) pairs: one per entry of its
 * cache that names one of its tokens, and a token may be named more than
 * once in a batch (section 3), so the bound is the entries a frame can
 * carry, not the column's length.
 */
#define LEVEL_POS_MAX (PROTO_PAYLOAD_MAX / PROTO_EVICT_ENTRY_LEN)

struct shard_level;

/*
 * A backend. Every function but counters runs on the level's worker
 * thread; open and close on the main thread before it starts and after it
 * ends.
 */
struct shard_level_ops {
	const char *thread;  /* the worker's name */
	const char *prefix;  /* its counters' keys start so ("disk_") */
	const char *timeout_key; /* the configuration key of its silence limit */
	/**
	 * Connect or open what the level stores in; -1: @p err says why
	 * (naming its key); -2: a bad configuration (a key file), @p err
	 * beginning with the key's name.
	 */
	int (*open)(struct shard_level *lv, char *err, size_t errlen);
	/** A request from the ingest lcore: begin it, or queue it; its answer is a level_done(). */
	void (*start)(struct shard_level *lv, struct level_req *q);
	/**
	 * What finished, each answered with level_done(). @p idle: nothing came
	 * this turn, so it may wait a little for an answer in flight. true: it
	 * made progress or waited (the worker does not sleep).
	 */
	bool (*poll)(struct shard_level *lv, bool idle);
	/** Stopping: what is queued is answered, what is in flight finishes. */
	void (*drain)(struct shard_level *lv);
	void (*close)(struct shard_level *lv);
	/** Its counters into @p c (at most LEVEL_COUNTERS_MAX); how many. */
	unsigned int (*counters)(const struct shard_level *lv, struct level_counter *c);
};

/*
 * Requests of a shard's levels, all levels together (a mempool): every
 * request is in one place at a time, so a ring or a backend's list of
 * this many holds them all.
 */
#define LEVEL_POOL 511
/*
 * Requests writes and deletes leave free, so that an L2_UP or SH_UP of
 * this many columns starts however far behind the writes are (a larger one
 * waits for room as before; a batch's columns are far fewer: its tokens
 * in columns of 64). Not more: kvdisk's deferred deletes hold up to 256
 * requests, and 256 + the largest L2_DOWN (139 columns at MTU 9000) + 64
 * fit the pool, so deletes waiting alone never starve a write (which has
 * them written at once, not taken by the writes that follow).
 */
#define LEVEL_UP_ROOM 64u

struct shard_level {
	const struct shard_level_ops *ops;
	struct kvss_shard_inst *shard; /* the shard it serves: its id, model, caches */
	uint32_t column;	       /* its largest column, tokens */
	struct rte_ring *to, *from;    /* requests to the worker, and back */
	pthread_t thread;
	int started;
	int stop;
	/* The ingest lcore waits for requests (ingest: wo, worker: rw): a
	 * backend holding requests it could finish now (kvdisk's deferred
	 * deletes) finishes them. */
	int starved;
	/*
	 * The level's own clock (TSC cycles, the worker writes, the ingest
	 * lcore reads): the start of the worker's last turn in which nothing
	 * was answered (everything its backend had finished by then was taken
	 * in, and there was none; or of a poll that found nothing: level_quiet),
	 * and when its store last finished an operation, whatever it was (a
	 * read, a write, a delete's header cleared: level_spoke; an answer
	 * given from memory, a request refused or given up, is not the store
	 * speaking). A level is silent when the first has gone far
	 * past the second: a worker late to its own completions (its core
	 * taken by other work, or stopped) has not seen the time pass, as the
	 * shard's looked clock (shard.h) does not for its receive queue.
	 */
	uint64_t looked;
	uint64_t answered;
	/*
	 * How long the level may answer nothing while reads wait on it, by
	 * its own clock, before the batches waiting on it stop waiting (their
	 * reads' tokens lost), beyond the batch timeout: its backend's op
	 * timeout (shard.l2.op_timeout_ms, shared.op_timeout_ms; at least
	 * 1 s), set at open. A disk on a busy machine was seen to answer
	 * nothing for 6 s and then go on (docs/results.md, "A busy machine's disk").
	 */
	uint32_t silent_ms;
	/* Requests given (the ingest lcore's count) and taken by the worker
	 * (its count, published): a read given but not yet taken waits on the
	 * worker's lateness, and a level is never silent about it. */
	uint64_t given;
	uint64_t taken;
	uint64_t turn;	  /* the worker's: the start of its current turn */
	uint64_t answers; /* the worker's: level_done calls so far */
	void *be; /* the backend's own state */
};

/**
 * Has level @p lv said nothing for @p limit cycles since @p from, by its
 * own clock: not answered since then, and its worker has run a turn that
 * late (a worker not run since is starved, not silent)?
 */
static inline bool
shard_level_silent(const struct shard_level *lv, uint64_t from, uint64_t limit)
{
	/* @p from is the later of the batch's run and when the ingest lcore
	 * first saw the level take its reads (evict.c). */
	uint64_t looked = __atomic_load_n(&lv->looked, __ATOMIC_ACQUIRE);
	uint64_t answered = __atomic_load_n(&lv->answered, __ATOMIC_ACQUIRE);
	uint64_t since = answered > from ? answered : from;

	return looked >= since && looked - since >= limit;
}

extern const struct shard_level_ops level_disk_ops;
extern const struct shard_level_ops level_shared_ops;

struct seal_ring;
/**
 * The keys a level seals with (a backend's open): master key files
 * @p key_file and @p old_key_file (either ""), read and checked
 * (lib/seal) into *@p out, NULL when @p key_file is "" (plain). An error
 * names the configuration key: @p group "." "key_file" ("shard.l2",
 * "shared"). 0 or -1. Freed, its keys wiped, by level_keys_free().
 */
int level_keys_load(const char *group, const char *key_file, const char *old_key_file,
		    struct seal_ring **out, char *err, size_t errlen);
void level_keys_free(struct seal_ring *r);

struct seal_orgs;

/*
 * A level's organization key store (lib/seal/orgkeys.h), looked at by its
 * worker: read at open, read again once its file is replaced (a reset
 * retired a key). A replaced file that is refused makes the level
 * "behind" until it reads a store: it seals nothing more under keys
 * perhaps retired (and the second tier, whose columns no generation
 * hides, opens none either); the file is tried again when it changes, or
 * every ten looks (an error that passes: no memory, a read that raced);
 * each refusal is said once per reason.
 */
struct level_orgs {
	struct seal_orgs *cur; /* the store held (NULL: none configured) */
	const char *path, *key; /* its file and its configuration key */
	uint64_t looked_ns, reloaded, refused, behind_refused;
	uint64_t refused_ns; /* when the refused file was last tried */
	bool behind;
	struct stat refused_st;
	char said[512];
};

/**
 * Read @p path (the configuration's @p key, "" for none) into @p lo at a
 * level's open. 0, or -1 with @p err naming @p key.
 */
int level_orgs_load(struct level_orgs *lo, const char *key, const char *path, char *err,
		    size_t errlen);

/**
 * Look at the store's file once per @p every_ms (shard @p shard's level
 * @p what, and what it does while behind, @p meanwhile, for what is
 * said): true when a new store took lo->cur's place,
 * the one it replaced in *@p old for the caller to free once its backend
 * holds the new one.
 */
bool level_orgs_look(struct level_orgs *lo, uint32_t every_ms, unsigned int shard,
		     const char *what, const char *meanwhile, struct seal_orgs **old);

/** Free the store held. */
void level_orgs_free(struct level_orgs *lo);

/** The worker: @p q is answered with @p status (0 or a protocol code). */
void level_done(struct shard_level *lv, struct level_req *q, uint16_t status);

/**
 * The worker: the backend's store finished operations (a poll of it
 * returned some): the level's answered clock moves to now. A disk busy
 * clearing deletes' headers while reads wait behind them is speaking.
 */
void level_spoke(struct shard_level *lv);

/**
 * The worker: a poll of the backend begun at @p t0 (TSC) found nothing
 * finished; the level's clock (looked) moves to it. A backend that waits
 * for its store inside one turn (a read that must follow a write still in
 * flight) says so at each such poll: its store's silence is then seen
 * while the turn goes on.
 */
void level_quiet(struct shard_level *lv, uint64_t t0);

/* ---- level.c: the shard's levels, for the ingest lcore and main ---- */

/* A shard's levels and the pool of requests they share. */
struct shard_levels {
	struct shard_level *lv[SHARD_LEVELS]; /* NULL: not configured */
	struct rte_mempool *pool;
	uint32_t col_bytes; /* the largest column's bytes (all caches, both levels) */
};

/** To @p q's level's worker: 0, or -ENOBUFS (not reached: the ring holds the pool). */
int shard_level_give(struct shard_levels *ls, struct level_req *q);
/** What the levels finished, up to @p n. */
unsigned int shard_level_take(struct shard_levels *ls, void **qs, unsigned int n);

#endif
