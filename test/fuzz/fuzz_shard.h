/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The shard's stateful fuzzer (fuzz_shard.c has the design): what its
 * files share, and the input's encoding, which the seed generator
 * (fuzz_shard_seeds.c) writes too.
 *
 * An input: one byte of configuration (FZ_CFG_*), then operations of
 * FZ_OP_LEN bytes each: the code in the low 4 bits of the first byte, its
 * flags (FZ_F_*) in the high 4, then 7 arguments. OP_RAW takes a[1] more
 * bytes after its 8.
 */
#ifndef KVSS_FUZZ_SHARD_H
#define KVSS_FUZZ_SHARD_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#define FZ_OP_LEN 8

#define FZ_CFG_REFILL_LCORE 0x01 /* the refill queue on its own lcore (a second thread) */
#define FZ_CFG_MTU_1500 0x02	 /* else 9000 */
#define FZ_CFG_HOLD_REFILLS 0x04 /* REFILL_DATA frames held until OP_RELEASE (memory in flight) */
/* L2_DOWN, L2_UP and L2_DELETE whose a0 has its high bit are the shared
 * level's: SH_DOWN, SH_UP, and an act of the cluster (fuzz_shard_rados.c) */
#define FZ_CFG_SHARED 0x08

/* The operations, and what their arguments a0..a6 say. */
enum fz_op {
	/* a0 & 1: a new driver epoch (a new stream); else a look: STATUS, inventory */
	OP_HELLO,
	/* a0 prompt, a1 start, a2 tokens, a3 cache */
	OP_RESERVE,
	/* a0 prompt, a1 start, a2 g - 1, a3 pattern, a4 data mode, a5 fragment, a6 cache 1 */
	OP_EVICT,
	/* a0 which recent batch, a1 how: its fragments not sent, one of them, all again */
	OP_DATA,
	/* a0 prompt, a1 start, a2 tokens, a3 cache, a4 gate, a5 more chunks, a6 second prompt */
	OP_REFILL,
	/* a0 prompt, a1 start, a2 end - start, a3 cache, a4 gate, a5 a second record */
	OP_DELETE,
	/* a0 key, a1 org, a2 prompt, a3 start, a4 tokens, a5 cache and gate, a6 a second record */
	OP_L2_DOWN,
	/* a0 prompt, a1 start, a2 g - 1, a3 pattern, a4 columns, a5 first key, a6 their org, form */
	OP_L2_UP,
	/* a0 key, a1 org, a2 cache, a3 gate, a4 a second record */
	OP_L2_DELETE,
	/*
	 * With FZ_CFG_SHARED and a0 & 0x80, the three above are the shared
	 * level's (section 10):
	 *  SH_DOWN: a0 & 7 key, a0 >> 3 & 15 the cluster's fault for it, a1 org,
	 *     name (a1 >> 1 & 3: its own, another column's, 0) and generation,
	 *     a2 prompt, a3 start, a4 tokens, a5 cache and gate, a6 a second record
	 *  SH_UP: a0 & 7 which column written before, a0 >> 3 & 15 the fault,
	 *     a1 what the batch's entries name, a2 g - 1, a3 pattern, a4 columns
	 *     and how they lie (a range, a name, from the disk), a5 second column,
	 *     a6 their org, form
	 *  (L2_DELETE) an object rots or is deleted where it lies: a1 how, a2 which
	 */
	/* a0 & 3: what it acknowledges (all taken, less, more, a stale epoch) */
	OP_REPORT_ACK,
	/* a0 turns of the refill lcore; a1 its REFILL_DATA frames before it stops mid-refill */
	OP_RUN_REFILL,
	/* every timeout fires in the next poll */
	OP_TIME,
	/* a0 & 1: free the REFILL_DATA frames held; a1 % 4 idle polls */
	OP_RELEASE,
	/* send the control frames held back (FZ_F_DEFER) */
	OP_FLUSH,
	/* a0 type, a1 body bytes that follow, a2 count: a control message as the input says */
	OP_RAW,
	/* a0 which batch, a1 how: EVICT_DATA the shard must drop */
	OP_ODD_DATA,
	OP_COUNT
};

/* Flags of an operation (its first byte's high bits). */
#define FZ_F_DEFER 0x10	/* its control frame is sent after the next one (reordered) */
#define FZ_F_DUP 0x20	/* its frames go twice (a retransmission; data fragments again) */
#define FZ_F_MORE 0x40	/* the next operation's frames come in the same burst */
#define FZ_F_ODD 0x80	/* a stranger's copy first: another shard, model, address or epoch */

/* The shard the harness runs: two caches of 32-byte buffer slices. */
#define FZ_CACHES 2
#define FZ_SLICE 32		/* bytes of one buffer of one token, both caches */
#define FZ_B0 128		/* cache 0: 4 buffers */
#define FZ_B1 64		/* cache 1: 2 buffers */
#define FZ_CAPACITY 96		/* DRAM tokens per cache */
#define FZ_COLUMN 8		/* L2 column, tokens */
#define FZ_L2_SLOTS 4		/* L2 columns per cache */
#define FZ_PROMPTS 7		/* prompt ids 0..6 (0: discarded) */
#define FZ_TOKENS 512		/* token indices the operations can name */
#define FZ_MAX_BATCHES 640
#define FZ_MAX_REFILLS 1024	/* REFILL requests an input makes */
#define FZ_MAX_G 278		/* 557 entries at most, two caches */
#define FZ_MAX_L2MSG 600
#define FZ_EPOCH(gen) (0x1000u + (gen)) /* the driver epoch of the input's stream @p gen */

/* ---- fuzz_shard_env.c: the process around the shard ---- */

struct rte_mbuf;

/** EAL, pools, the store, the second tier: once per process. */
int fz_env_init(void);
/** A fresh shard for one input (its state, its store); the second tier emptied. */
void fz_env_begin(bool refill_lcore, uint32_t mtu);
/** The input ends: the shard's report ring is kept for the next (fuzz_shard_env.c says why). */
void fz_env_keep_reports(void);
/** After the input: threads stopped, frames freed; false if mbufs leaked. */
bool fz_env_end(void);
/** The harness's scheduler, called at the top of each ingest poll (the rx hook). */
uint16_t fz_sched(struct rte_mbuf **pkts, uint16_t n);
/** Give the refill lcore a turn: to its poll's end, or (@p frames) after so many REFILL_DATA. */
void fz_refill_turn(unsigned int frames);
/** Did the refill lcore's last turn end idle (a poll that found nothing)? */
bool fz_refill_idle(void);
/** Let the tier thread do what the ingest lcore gave it, and wait until it is idle again. */
void fz_tier_settle(void);
/** Requests the ingest lcore has still to take back from the tier (0 when settled). */
unsigned int fz_tier_backlog(void);
/** The input is over (kvss.quit set): the refill lcore runs to its end, its thread joins. */
void fz_env_stop_refill(void);
/** The shared level's thread: its turn (until it parks), and where it parks. */
void fz_sh_turn(void);
void fz_sh_park(void);
/** The mbuf pool of frames the harness sends the shard. */
extern struct rte_mempool *fz_rx_pool;
/* The one shard fuzzed (kvss_shards[0]): the shard code takes it as its first argument. */
struct kvss_shard_inst;
extern struct kvss_shard_inst *const fz_shard;

/* ---- fuzz_shard_rados.c: the shared level, lib/shared's API in memory ---- */

/* A fault of the cluster (its low 4 bits; the high 4 its argument). */
enum {
	FZ_SH_OK,
	FZ_SH_TIMEOUT,	 /* -ETIMEDOUT (a write: landed all the same when arg & 1) */
	FZ_SH_EIO,	 /* -EIO */
	FZ_SH_HOLD,	 /* answered only once OP_FLUSH (or the drain) releases it */
	FZ_SH_FLIP_HDR,	 /* a read: a bit of the header flipped */
	FZ_SH_FLIP_DATA, /* a read: a bit of the payload flipped */
	FZ_SH_SHORT,	 /* a read: cut short */
	FZ_SH_LONGER,	 /* a read: longer than asked (-EFBIG) */
	FZ_SH_OTHER,	 /* a read: another object's bytes */
	FZ_SH_RESIGN,	 /* a read: a field of its header changed, checksums made again */
};

struct rte_ring;

/** A new input: an empty cluster, no faults waiting. */
void fz_sh_reset(void);
/** The next operation submitted fails or lies as @p fault says. */
void fz_sh_fault(uint8_t fault);
/** An object stored (the @p which'th) rots (@p how even) or goes (odd). */
void fz_sh_act(uint8_t how, uint8_t which);
/** What is held is answered at the thread's next turn. */
void fz_sh_release(void);
/** The thread's turns: gate it (its rings), let it answer what it was given. */
void fz_sh_gate(struct rte_ring *to, struct rte_ring *from);
void fz_sh_settle(void);
/** Nothing the thread can do now (what it holds waits for a release). */
bool fz_sh_idle(void);
/** Requests l2.c gave the thread and has not taken back. */
uint64_t fz_sh_outstanding(void);

/* ---- fuzz_shard_check.c: what the shard sends ---- */

/** A frame the shard sent (@p queue 1: its refill lcore's). The caller frees it unless kept. */
bool fz_check_tx(struct rte_mbuf *m, uint16_t queue);
/** Free the REFILL_DATA frames held. */
void fz_check_release(void);
/** Forget everything (a new input). */
void fz_check_begin(bool hold_refills);
/** The input is over: what came of its refills is let go. */
void fz_check_end(void);
/** The end of an ingest poll: match what the second tier answered to what was sent. */
void fz_check_poll_end(void);
/** The look at the end begins: the STATUS and inventory after it are the final ones. */
void fz_check_final_look(void);
/** The end of the input: both tiers against what the driver knows. */
void fz_check_final(void);
/** Token bytes of @p cache (a whole token): one batch's write as the wafer made it, or zeros. */
bool fz_token_written(uint16_t cache, const uint8_t *bytes);
/** Frames held (REFILL_DATA). */
unsigned int fz_check_held(void);

/* FUZZ_SHARD_TRACE=1: each operation, poll and frame on stderr (to read a finding). */
extern bool fz_trace;
#define FZ_TRACE(...)                                                                              \
	do {                                                                                       \
		if (fz_trace)                                                                      \
			fprintf(stderr, __VA_ARGS__);                                              \
	} while (0)

/* Findings: one line, then abort (the input and this log are the report). */
void fz_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));

/* ---- The driver's model (fuzz_shard.c writes it, the checks read it) ---- */

struct fz_batch {
	uint16_t g;
	bool l2_up;
	uint32_t frag;	   /* fragment size of its streams */
	uint8_t sent[FZ_CACHES][(FZ_MAX_G * FZ_B0 / 16 + 7) / 8]; /* fragments sent, a bit each */
	uint32_t prompt[FZ_MAX_G][FZ_CACHES];
	uint32_t token[FZ_MAX_G][FZ_CACHES];
};

struct fz_refill {
	uint64_t id;
	uint16_t gen;	/* the stream it belongs to */
	uint16_t cache;
	uint16_t nchunks;
	struct {
		uint32_t prompt, start, n;
	} chunk[2];
	uint32_t tokens;
	uint8_t *bytes[4]; /* each buffer's stream as received (NULL: nothing yet) */
	uint8_t *have[4];  /* a byte each: received */
	uint64_t *bc;	   /* per token and buffer: batches complete when last sent */
	uint64_t data_bytes;
	bool done;
};

enum fz_l2_outcome { L2O_UNKNOWN, L2O_TIER_PENDING, L2O_DONE };

struct fz_l2rec {
	uint16_t cache;
	uint64_t key, org;
	uint8_t outcome;
	uint16_t status;   /* L2_DOWN: its L2_DONE's status */
	uint8_t errors;	   /* L2_DELETE: ERRORs for its (cache, key) in its message (an
			    * ERROR names no org: counted on the first record of the two) */
};

struct fz_l2msg {
	uint64_t seq;
	uint8_t type;	   /* PROTO_T_L2_DOWN, PROTO_T_L2_DELETE or PROTO_T_SH_DOWN */
	bool ran;
	uint64_t poll;	   /* L2_DOWN: the poll it ran in (one poll's records: one tier burst) */
	uint8_t nrec;
	struct fz_l2rec rec[2];
};

struct fz_model {
	uint32_t epoch;	   /* the driver epoch of the stream */
	uint16_t gen;	   /* streams so far in this input: the wafer's bytes say which */
	uint64_t next_seq;
	uint64_t batch_no; /* the last batch made */
	uint64_t max_gate; /* the largest evict_count of the stream's refill queue */
	struct fz_batch batch[FZ_MAX_BATCHES + 1];
	uint64_t refill_id;
	struct fz_l2msg l2[FZ_MAX_L2MSG];
	unsigned int nl2;
	/* (cache, prompt, token) an L2_UP named, this stream and the one before. */
	uint8_t named_l2[2][FZ_CACHES][FZ_PROMPTS][FZ_TOKENS / 8];
	bool tainted;	   /* a message the model cannot follow was accepted */
	uint64_t iter;	   /* ingest polls so far */
};

extern struct fz_model fz;

/** The refill @p id the driver sent (NULL: none). */
struct fz_refill *fz_refill_find(uint64_t id);

/** The 32 bytes entry @p idx of batch @p batch writes in buffer @p buf of (@p prompt, @p token). */
void fz_slice(uint8_t *out, uint16_t gen, uint64_t batch, uint16_t idx, uint32_t prompt,
	      uint32_t token, uint16_t cache, uint16_t buf);

#endif
