/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * kvss-trace's parts: kvss_trace.c (options, the table), trace_run.c (the
 * replays), trace_report.c (the usage, the second tier's lines, the plot)
 * and ttft.c (--ttft: each replay's times to first token, modelled).
 */
#ifndef KVSS_TRACE_PRIV_H
#define KVSS_TRACE_PRIV_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "oracle.h"
#include "prefixcache.h"
#include "route.h"
#include "workload.h"

struct opts {
	size_t generate;
	const char *trace;
	uint64_t capacity[16];
	unsigned int ncap;
	uint32_t column;
	enum prefixcache_policy policy;
	uint32_t probation_pct;
	uint32_t followup_pct;
	uint64_t ttl_last_s, ttl_first_s;
	uint32_t block;
	bool json;
	bool baseline;
	bool oracle;
	bool no_minus_one;
	size_t limit;
	uint32_t orgs;
	uint32_t replicas; /* 0 or 1: one driver */
	enum route_policy route;
	uint64_t kv_bytes; /* KV bytes per token, over a model's shards (0: not given) */
	/* --l2: the two-tier block model (tier2.h) per L2 capacity and admission rule. */
	uint64_t l2[16];
	unsigned int nl2;
	unsigned int l2_admit; /* bit per enum tier2_admit */
	double recompute_tps, l2_gbps, l2_lat_us;
	const char *l2_dir; /* --l2-dir: the library's replay keeps its L2 files here */
	enum prefixcache_policy pols[8]; /* --policy P[,P...]: each in turn */
	unsigned int npol;
	const char *plot; /* --plot FILE.png */
	/* --org-ttl NAME:LAST:FIRST, --orgs-from FILE: per-organization TTLs
	 * on the trace's clock, and the hit ratio of each so named. */
	struct org_ttl {
		char name[64];
		uint64_t iso, last_s, first_s;
		double share, cap; /* --org-share: its DRAM share and cap (0, 1: none) */
		double l2_share, l2_cap; /* --orgs-from: its second tier's (0, 1: none) */
	} ottl[64];
	unsigned int nottl;
	/* driver.org_default's DRAM share and cap (--orgs-from): the others'. */
	double share_default, cap_default;
	double l2_share_default, l2_cap_default;
	uint32_t mm_every; /* --multimodal-every N: the built-in workload's images */
	uint32_t documents; /* --documents N: the built-in workload's library */
	/* --speculate K, --spec-reject-pct P, --spec-seed S: speculative decoding. */
	uint32_t spec_tokens, spec_reject_pct;
	uint64_t spec_seed;
	/* --draft CAP: a draft model (model 1) beside the target, its own map and shard. */
	bool draft;
	uint64_t draft_cap;
	/* The fleet model (fleet.h): --shared SIZE[,SIZE...] (FLEET_UNLIMITED: inf),
	 * --shared-admit (bit per enum fleet_admit), --shared-ttl (first use, s), --shared-touch,
	 * --disk (each replica's, tokens), --restart R@I (restart_rep -1: none),
	 * --add-replica-at I (0: none). */
	uint64_t shared[8];
	unsigned int nshared;
	unsigned int shared_admit;
	uint64_t shared_ttl_s;
	bool shared_touch; /* --shared-touch: a local hit refreshes the shared copy */
	uint64_t disk;
	bool disk_set;
	int32_t restart_rep;
	size_t restart_at, add_at;
	/* --ttft (ttft.c): times to first token on a wafer of max_inflight slots, the
	 * requests arriving at the trace's times x time_scale (arrivals TTFT_ARRIVALS_TRACE)
	 * or as a Poisson process of arrival_rate a second from arrival_seed; a prefill
	 * costs prefill_overhead_us beside its tokens at recompute_tps; a refill from DRAM
	 * refill_lat_us + bytes / refill_gbps (GB/s), from L2 the l2_ line besides. */
	bool ttft;
	unsigned int ttft_given; /* bit per TTFT_OPT_*: those options given (checked against --ttft) */
	unsigned int arrivals;
	double time_scale, arrival_rate;
	uint64_t arrival_seed;
	uint32_t max_inflight;
	double prefill_overhead_us, refill_lat_us, refill_gbps;
};

enum { TTFT_ARRIVALS_TRACE, TTFT_ARRIVALS_POISSON };

/* The options that shape --ttft, bits of opts.ttft_given (ttft_opt_names[] in their order). */
enum {
	TTFT_OPT_ARRIVALS,
	TTFT_OPT_TIME_SCALE,
	TTFT_OPT_ARRIVAL_RATE,
	TTFT_OPT_ARRIVAL_SEED,
	TTFT_OPT_MAX_INFLIGHT,
	TTFT_OPT_PREFILL_OVERHEAD,
	TTFT_OPT_REFILL_LATENCY,
	TTFT_OPT_REFILL_GBPS,
	TTFT_OPTS
};
extern const char *const ttft_opt_names[TTFT_OPTS];

/* --ttft: one request of a replay as the library served it, taking every hit. */
struct ttft_req {
	uint32_t n;   /* prompt tokens */
	uint32_t hit; /* hit tokens refilled, those from L2 included */
	uint32_t l2;  /* of them, those that came up from the second tier */
};

/* Whether any fleet option was given (the fleet's lines are printed). */
static inline bool
fleet_asked(const struct opts *o)
{
	return o->nshared || o->restart_rep >= 0 || o->add_at;
}

/* What --plot draws: per policy, the hit ratio at each capacity; the references. */
struct curves {
	double x[16], hit[8][16], base[16], belady[16], l2[16];
	unsigned int n;
};

struct result {
	/* Per --org-ttl organization: prompt tokens, and hit tokens. */
	uint64_t org_input[64], org_hit[64];
	uint64_t mm_trimmed; /* tokens not cached: after a multimodal token */
	uint64_t gen_hit;    /* hit tokens into an earlier turn's answer */
	/* --draft: the draft's hit tokens; requests hit in one model only. */
	uint64_t draft_hit, only_target, only_draft;
	/* --speculate: rounds, tokens proposed and accepted, rejected ones
	 * evicted (each overwritten in place later), in every model. */
	uint64_t spec_rounds, spec_proposed, spec_accepted, spec_overwrites;
	uint64_t capacity, requests, input, hit, evicted, deleted, expired, peak, perr, vfail;
	double wall;
	double baseline;
	double belady, belady_seen, told, told120, told_uses, told_rate, life_rate, fitted; /* --oracle */
	double balance_mean, balance_worst; /* max over mean tokens per replica, per minute */
	/* Tokens per second of trace time evicted to and refilled from the shards:
	 * over the whole trace, and over its busiest PEAK_WINDOW_S seconds. */
	double evict_rate, evict_peak, refill_rate, refill_peak;
	unsigned int peak_window_s;
	/* With the driver's second tier (run_l2). */
	uint64_t l2_hit, l2_down, l2_read, l2_slower;
	uint64_t l2_dels, l2_dels_absorbed; /* the L2 files' deletes; absorbed by a put */
	/* --ttft: each request's, in the trace's order (requests of them); run_tiers
	 * allocates it, its caller frees it. NULL without --ttft. */
	struct ttft_req *ttft;
};

/* The admission rules' names (tier2.h's order). */
extern const char *const admit_names[];

int run_tiers(const struct opts *o, const struct workload *t, uint64_t capacity, uint64_t l2,
	      unsigned int admit, struct result *res);
double gbps(const struct opts *o, double tokens_per_s);
void usage(FILE *f);
int draw(const struct opts *o, const struct curves *cv);
int print_l2(const struct opts *o, const struct workload *wl, const struct oracle_blocks *b,
	     uint64_t cap, const uint64_t *arrival_ns);
/* The fleet's options against each other and a trace of @p n requests: 0, or a message and -1. */
int fleet_check(const struct opts *o, size_t n, bool shaped);
/* The fleet's lines at DRAM capacity @p cap (0: unlimited): 0, 1 bad, -1 no memory. */
int print_fleet(const struct opts *o, const struct workload *wl, uint64_t cap);
/*
 * --ttft's options against each other (a message naming the option and 2),
 * or 0. Before anything is read.
 */
int ttft_check(const struct opts *o);
/*
 * --ttft: when each of the first @p n requests of @p t arrives, ns after
 * the first, into a new array *@p arrival_ns (the caller frees it): 0, or
 * the exit status with a message (2: a trace that cannot be replayed at its
 * times, naming its line; 1: no memory).
 */
int ttft_arrivals(const struct opts *o, const struct workload *t, size_t n, uint64_t **arrival_ns);
/*
 * --ttft: replay @p res's times to first token, modelled three ways, as a
 * line (after @p indent) or as keys of the JSON object being printed: 0,
 * or -1 (no memory, said).
 */
int ttft_print(const struct opts *o, const uint64_t *arrival_ns, const struct result *res,
	       const char *indent);

#endif
