/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * A cluster as kvss-plan reads it: nodes with their RAM, boxes holding
 * shards (each on a node, with its weight-I/O count), jobs with their
 * boxes, bytes per token and grants, and the policy. The planning itself
 * is app/plan's; this is only the file and what it says.
 */
#ifndef KVSS_CLUSTER_H
#define KVSS_CLUSTER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define PLAN_MAX_NODES 64
#define PLAN_MAX_SHARDS 256
#define PLAN_MAX_JOBS 16
#define PLAN_NAME 48
#define PLAN_MAX_ORGS 64 /* as many as a driver's orgs (KVSS_MAX_ORGS) */

enum plan_policy { PLAN_EQUAL, PLAN_EXACT, PLAN_FAIR, PLAN_RATIO };

struct plan_node {
	char name[PLAN_NAME];
	uint64_t ram;	   /* bytes */
	uint64_t reserved; /* bytes taken by other services (CHIEF, ACT, ...) */
};

struct plan_shard {
	char box[PLAN_NAME];
	uint16_t domain;
	uint16_t wio;	/* weight-I/O streams: bytes per token scale with it */
	uint16_t node;	/* index into nodes */
};

/*
 * An organization a job serves, with the tokens of DRAM it is guaranteed
 * (its working set) and, optionally, at most: kvss-plan turns them into the
 * driver's dram_share and dram_cap, fractions of what the job can use.
 */
struct plan_org {
	char name[PLAN_NAME];
	uint64_t tokens;     /* guaranteed */
	uint64_t cap_tokens; /* at most; 0: no cap */
};

struct plan_job {
	char name[PLAN_NAME];
	char model[PLAN_NAME];
	uint32_t nboxes;
	char box[PLAN_MAX_SHARDS][PLAN_NAME]; /* boxes the job uses */
	uint64_t bytes_per_token_per_wio;
	uint64_t base_mem;
	uint64_t tokens_lower, tokens_upper;
	double ratio;			      /* PLAN_RATIO: priority */
	uint64_t grant[PLAN_MAX_SHARDS];      /* PLAN_EXACT: tokens, per shard index */
	bool has_grant[PLAN_MAX_SHARDS];
	uint16_t norgs;
	struct plan_org org[PLAN_MAX_ORGS];
};

struct plan_cluster {
	uint16_t nnodes, nshards, njobs;
	struct plan_node node[PLAN_MAX_NODES];
	struct plan_shard shard[PLAN_MAX_SHARDS];
	struct plan_job job[PLAN_MAX_JOBS];
	enum plan_policy policy;
	bool keep_ratio;
	double discount;	/* 0.2: budgets x 0.8 */
	uint64_t round_tokens;	/* the search rounds down to a multiple of this (>= 1) */
};

/**
 * Read and check a cluster description. @return 0, or -1 with one line in
 * @p err naming the file, line and key.
 */
int kvss_cluster_load(const char *path, struct plan_cluster *c, char *err, size_t errlen);

#endif
