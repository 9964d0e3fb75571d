/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The replay system's parts (replay.h): replay.c (the driver library, the
 * emulated shards' DRAM and wafer, the checks) and replay_l2.c (the
 * emulated shards' second tier, a lib/kvdisk file per model).
 */
#ifndef KVSS_REPLAY_PRIV_H
#define KVSS_REPLAY_PRIV_H

#include "kvdisk.h"
#include "replay.h"

struct replay_seq {
	struct prefixcache_seq *s;
	uint16_t model;
	uint64_t iso;
	uint64_t prompt_id;
	uint32_t *tok;	/* prompt, then generated */
	uint64_t *h;	/* reference prefix hash of every token */
	uint32_t n, cap, pos, prompt_len;
	uint32_t spec_from; /* the first speculative position, while speculating */
	bool speculating;
	struct replay_seq *hnext;
};

struct pending_refill {
	uint16_t model;
	struct proto_refill_req req;
	struct proto_refill_chunk *ch;
	struct replay_seq *seq; /* the requester, for the reference bytes */
	uint64_t *h;		/* its prefix hashes (kept even if it ends first) */
	uint32_t nh;
};

struct replay {
	struct replay_params p;
	struct prefixcache *pc;
	struct kvstore *kv[PREFIXCACHE_MAX_MODELS];
	void *kvmem[PREFIXCACHE_MAX_MODELS];
	struct replay_seq **bucket; /* prompt id -> live sequence */
	uint32_t nbucket;
	struct pending_refill *pend;
	uint32_t npend, pendcap;
	uint64_t *done;
	uint32_t ndone, donecap;
	struct replay_seq *cur; /* sequence being begun (its refill is verified against it) */
	uint8_t *buf;
	size_t bufcap;
	struct replay_stats st;
	/* The second tier: one L2 per model's shard, in a file (kvdisk). */
	struct kvdisk *l2[PREFIXCACHE_MAX_MODELS];
	uint8_t *l2buf;
	size_t l2bufcap;
};

/* replay_l2.c: the sink's second-tier operations, and waiting for the file. */
void replay_l2_down(void *arg, uint16_t model, const struct prefixcache_l2col *c);
void replay_l2_up(void *arg, uint16_t model, uint64_t batch_no, uint16_t nc, uint16_t g,
		  const struct proto_evict_entry *e, const struct prefixcache_l2col *cols,
		  uint32_t ncols);
void replay_l2_del(void *arg, uint16_t model, uint16_t cache_id, uint64_t key, uint64_t iso,
		   uint64_t ec);
int replay_l2_settle(struct replay *r, struct kvdisk *d);

#endif
