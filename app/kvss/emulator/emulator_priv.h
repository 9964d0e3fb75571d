/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The wafer emulator's insides, shared by its two files: emulator.c
 * (sequences, refills and their checks) and data.c (the evicted bytes of
 * every batch, each shard at its own pace). Nothing else includes this.
 * They are one role in two files and call each other both ways on purpose:
 * data.c asks emulator.c which sequence owns a prompt (the reference its
 * bytes are made from), and emulator.c asks data.c to check a refilled
 * token against the bytes it produced; both read the one struct emu.
 */
#ifndef KVSS_EMU_PRIV_H
#define KVSS_EMU_PRIV_H

#include "emulator.h"
#include "wafer.h"

#define HBUCKETS 4096
#define MAX_REC_PER_SEQ (PREFIXCACHE_MAX_MODELS * PREFIXCACHE_MAX_CACHES)
#define MAX_SHARDS_PER_MODEL 32 /* a refill's masks are 32 bits */

/*
 * One batch's EVICT_DATA, for every shard of its model. Each shard walks the
 * job list at its own pace (emu_cursor), so a shard that is slow or down
 * never holds back another's data; a job goes when every shard is done.
 */
struct data_job {
	struct data_job *next;
	uint16_t model, nc, g;
	uint64_t batch_no;
	uint32_t done_mask, all_mask; /* shards (by index in the model) done with it */
	uint64_t hash[];	      /* hash[c * g + t]: the token's prefix hash (0: none) */
};

/* Where one shard stands in the job list. */
struct emu_cursor {
	struct data_job *j; /* the batch whose data it sends now (NULL: find it) */
	uint16_t cache;	    /* the cache whose stream it sends */
	bool on;	    /* w is set up for (j, cache) */
	struct wafer_evict w;
	uint16_t num_buffers[PREFIXCACHE_MAX_CACHES]; /* from its STATUS */
};

struct emu_seq;

/* One refill (one model, one cache) as every shard of the model sends it. */
struct emu_refill {
	struct emu_refill *hnext;
	uint64_t refill_id;
	struct emu_seq *seq; /* the requester, until finished */
	struct emu_seq *owner; /* the requester, for good: its rec[at] names this refill until freed */
	uint32_t at;
	uint16_t model, cache_id, nshards;
	uint32_t ntok;
	uint32_t whole_mask, done_mask, fail_mask, all_mask;
	bool finished;
	uint64_t finished_ns; /* when: a REFILL_DONE lost on the way is waited for this long at most */
	/* Its requester stopped waiting for it (give_up_ns) and computes its
	 * tokens: still checked as it comes, its tokens not counted refilled,
	 * failed at the refill timeout from then. Its model's only refill of
	 * that request (learn): its time, whole, is still the model's sample,
	 * from the request's start, for the bytes the lookup charged. */
	bool given_up, learn;
	uint64_t given_up_ns, t0, bytes, l2_bytes, shared_bytes;
	uint32_t glue_end; /* the last glued position + 1: must be the requester's hit */
	bool glue_bad;	   /* a glued token would land in the wrong slot */
	uint32_t cache_idx; /* the slot of its first glued token (a split's front: its length) */
	bool idx_bad;	   /* a REFILL_DATA named another slot (counted once) */
	uint64_t *hash;	   /* prefix hash of every glued token */
	struct wafer_refill chk[];
};

/*
 * SEQ_WAIT: its refills are not all finished. SEQ_HOLD (resume "estimate"):
 * they are, but its estimate has not passed, and the design picks it again
 * only then. SEQ_DONE: every token sent; it ends after the step's flush.
 */
enum { SEQ_FREE, SEQ_WAIT, SEQ_HOLD, SEQ_RUN, SEQ_DONE };

struct emu_seq {
	int state;
	uint32_t slot; /* its wafer sequence id */
	uint32_t req;  /* its request's index in the workload */
	const struct wl_req *q;
	struct prefixcache_seq *s[PREFIXCACHE_MAX_MODELS];
	uint64_t prompt_id[PREFIXCACHE_MAX_MODELS];
	uint32_t pos[PREFIXCACHE_MAX_MODELS];
	uint32_t *tok;
	uint64_t *h; /* prefix hash of every token: the reference content */
	uint32_t total;
	uint32_t wait; /* refills not finished */
	struct emu_refill *rec[MAX_REC_PER_SEQ];
	uint32_t nrec;
	uint64_t t0, deadline, estimate_ns;
	uint64_t estimate_bytes; /* what the model charges for the refill it estimates longest */
	uint64_t whole_ns;	 /* when its refills finished (SEQ_HOLD) */
	uint64_t compute_ns;	 /* its prefill: model 0's missed tokens at the recompute rate */
	uint64_t compute_end;	 /* when that prefill ends (0: not begun) */
	/* A split hit (prefixcache_hit.split_tokens): model 0's front, computed
	 * from its pick while the rest refills, on the same one compute. */
	uint32_t front_tokens;
	uint64_t front_ns;
	uint64_t front_end; /* when the front is computed (0: not begun) */
	uint64_t arrival;	 /* when its request arrived (a closed loop: when it began) */
	bool first_token;	 /* its time to first token is counted */
	/* A refill of it was out while the driver did not run (emu_absent):
	 * its time is the process's, not the tiers', and is not learned. */
	bool unsampled;
	/* Per model: refills not finished, one of them failed (its time says
	 * nothing of the model), the bytes it charged. */
	uint32_t mwait[PREFIXCACHE_MAX_MODELS];
	uint8_t mfailed[PREFIXCACHE_MAX_MODELS];
	uint64_t mbytes[PREFIXCACHE_MAX_MODELS];
	uint64_t ml2bytes[PREFIXCACHE_MAX_MODELS]; /* of them, brought up from L2 */
	uint64_t mshbytes[PREFIXCACHE_MAX_MODELS]; /* of those, staged from the shared level */
	/* Picked: it has a run slot (it sends tokens only then); order: when
	 * it was begun (the first begun is picked first). */
	bool picked, had_refill, l2hit;
	uint64_t order, pick_ns;
	/* emu_params.give_up: once picked, it waits for its refills this long at
	 * most (what computing model 0's refilled tokens takes, after the
	 * others' prefills queued when it was looked up), then computes them;
	 * 0: it waits (no hit, no rate, or not asked). */
	uint64_t give_up_ns;
	/* When it was looked up, how long the wafer's compute was taken by
	 * others' prefills (prefixcache_request.compute_wait_ns). */
	uint64_t wait_ns;
};

struct pid_node {
	struct pid_node *next;
	uint64_t prompt_id;
	struct emu_seq *seq;
};

struct emu {
	struct emu_params p;
	struct emu_stats st; /* what it counts (emu_stats) */
	uint16_t first_shard[PREFIXCACHE_MAX_MODELS], nshards[PREFIXCACHE_MAX_MODELS];
	size_t next_req;
	struct emu_seq *seq; /* [nslots]: max_inflight running, ahead more begun */
	uint32_t nslots, npicked;
	uint32_t ngiven; /* refills given up, not finished */
	bool backed_up;	 /* the driver's EVICT path (emu_backed_up) */
	uint64_t begun;
	uint32_t nactive;
	struct pid_node *pid[HBUCKETS]; /* prompt id -> its sequence */
	struct emu_refill *rf[HBUCKETS];
	uint32_t nrefill;
	uint32_t nlinger;	  /* refills finished, waiting for a shard's REFILL_DONE */
	/* The expiry check (data.c): when each token hash was last evicted,
	 * by the driver's clock as of the latest step (now_ns). */
	struct {
		uint64_t key, ns; /* a token hash, when it was last evicted */
	} *ev;
	uint64_t now_ns;
	uint32_t ev_n;
	uint64_t next_linger_ns;  /* when to look for those whose REFILL_DONE was lost */
	struct data_job *jhead, *jtail;
	uint32_t njobs;
	struct emu_cursor *cur; /* [nshards] */
	struct emu_shard *shard; /* [nshards], a copy of the caller's */
	uint64_t held_ns;
	uint64_t compute_free; /* when the wafer's compute is free (one prefill at a time) */
	uint64_t *arr;	       /* [nreq] arrivals after the origin (emu_params.arrival_ns), or NULL */
	uint64_t origin;       /* the first step's time: arrivals count from it */
	bool started, stopped;
	uint64_t *ttft;	       /* [nreq] times to first token, us, nttft of them */
	size_t nttft;
	/* [nreq] by request: its time to first token, us (UINT64_MAX: none
	 * yet), and model 0's hit tokens (what it refilled). */
	uint64_t *ttft_req;
	uint32_t *hit_req;
	bool failed;
};

static inline uint32_t
hbucket(uint64_t id)
{
	return (uint32_t)((id * 0x9E3779B97F4A7C15ULL) >> 52);
}

/* The sequence that prompt @p prompt_id belongs to, or NULL (emulator.c). */
struct emu_seq *emu_seq_of_prompt(const struct emu *e, uint64_t prompt_id);

/* The first job at or after @p j that shard @p k still has to send (data.c). */
struct data_job *emu_job_for(const struct emu *e, uint16_t k, struct data_job *j);

/* With TTLs, the expiry check's table, made and touched whole; -1: no memory (data.c). */
int emu_ev_alloc(struct emu *e);
/* Note the eviction of token hash @p h now; check refilled @p hash[0..n) for expiry. */
void emu_ev_note(struct emu *e, uint64_t h);
void emu_ev_check(struct emu *e, const uint64_t *hash, uint32_t n);

#endif
