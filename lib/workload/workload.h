/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Request workloads for kvss-trace and the kvss driver role: a trace file
 * read into memory, or the built-in generator for when no trace is at hand.
 *
 * Formats, one JSON object per line:
 *  - Mooncake: {"timestamp": ms, "input_length": n, "output_length": k,
 *    "hash_ids": [...]}: 512-token blocks named by chained hash ids; token
 *    ids are made from (hash id, position in block), so equal ids give equal
 *    tokens; the last block may be partial.
 *  - native: {"org": "acme", "tokens": [...], "cache_length_allowed": n,
 *    "output_length": k, "timestamp": ms} (all but tokens optional).
 * Either may carry "cache_salt": "..." (1 to WL_MAX_SALT printable ASCII
 * bytes, no space, '"' or '\\'; null: none): requests of one organization
 * with different salts share no cached column (proto_ref_chain_root).
 */
#ifndef KVSS_WORKLOAD_H
#define KVSS_WORKLOAD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct wl_req {
	uint64_t ts_ms;
	uint64_t iso;	   /* the organization's isolation_id */
	uint64_t salt;	   /* its cache salt's id (proto_ref_salt; 0: none) */
	uint32_t *tokens;  /* the prompt */
	uint32_t n;
	uint32_t allowed;  /* cache_length_allowed (may exceed n: the answer is cached) */
	uint32_t out;	   /* tokens generated */
	uint64_t first_block; /* Mooncake: first hash id (native: first token), for --orgs */
	uint64_t *ids;	      /* Mooncake: block hash ids, for the block-LRU baseline */
	uint32_t nids;
	/* The first multimodal token (an image's, say): caching stops before
	 * it, as the design says. UINT32_MAX: none. */
	uint32_t first_mm;
	/* Built-in workload: where the prompt holds the previous turn's answer
	 * (generated tokens), and how many (0: none), for counting hits into
	 * generated tokens. */
	uint32_t ans_at, ans_len;
	/* A trace line without a timestamp (ts_ms is then its line number). */
	uint8_t no_ts;
};

/* The most tokens a trace line may declare (prompt, or answer): a bound on what a
 * bad line can make the reader allocate. 16M: far above any model's context. */
#define WL_MAX_TOKENS (1u << 24)

/* A cache salt's bytes at most. */
#define WL_MAX_SALT 256

/* The largest timestamp a trace may give, in ms: 2^53, what JSON readers keep exactly. */
#define WL_MAX_TS_MS (1ull << 53)

/* A trace line's bytes at most (a line of WL_MAX_TOKENS ids fits), and the
 * most requests a trace may hold: what a file with no newline, or with no
 * end, can make the reader take before it stops with an error. */
#define WL_MAX_LINE (256u << 20)
#define WL_MAX_REQUESTS (1u << 24)

struct workload {
	struct wl_req *r;
	size_t n, cap;
	uint64_t tokens; /* prompt tokens of all requests */
	/*
	 * A trace's first line without a timestamp, and its first line whose
	 * timestamp is earlier than the request's before it (0: none). Read
	 * in order they do no harm; a replay at the trace's times
	 * (wafer.arrivals = "trace") refuses the trace naming the line.
	 */
	unsigned long ts_missing_line, ts_back_line;
};

/**
 * Read a trace (@p block tokens per Mooncake block; at most @p limit
 * requests, 0: all). @return 0, or -1 with one line in @p err naming the
 * file and line.
 */
int workload_load(const char *path, uint32_t block, size_t limit, struct workload *w, char *err,
		  size_t errlen);

/**
 * A long load asks @p stop (NULL: never) every WL_STOP_EVERY lines, or
 * every line of more than 64 KiB, whether to give up: a program that
 * caught a signal stops within that much reading, with an error saying so
 * and errno EINTR.
 */
void workload_set_stop(bool (*stop)(void));
#define WL_STOP_EVERY 1024

/**
 * workload_load() with other bounds than WL_MAX_LINE and WL_MAX_REQUESTS
 * (tests use small ones). Only a regular file is read (fileio.h): a FIFO,
 * a device or a directory is refused before anything is read.
 */
int workload_load_bounded(const char *path, uint32_t block, size_t limit, size_t max_line,
			  size_t max_requests, struct workload *w, char *err, size_t errlen);

/**
 * The built-in workload: @p n requests from 8 organizations, each with 2
 * system prompts (500-3000 tokens). 30% start a chat (a system prompt and a
 * first message), 60% continue one (the last prompt, its answer and a new
 * message: the answer is cached, since cache_length_allowed covers it), 10%
 * are one-off documents (5k-20k tokens). About 5 requests a second. The
 * same @p n always gives the same requests.
 */
int workload_generate(size_t n, struct workload *w);

/**
 * The built-in workload with a library of @p documents documents (0: as
 * workload_generate): 60% of requests read one of them, drawn uniformly
 * (5k-20k tokens each, the same tokens every time, about 12,500 on
 * average: a library of 300 is about 3.75M tokens, more than the demo's
 * DRAM and less than its second tier), 10% start a chat, 30% continue one.
 * Its reuse is far apart, so DRAM alone gets a fraction of what a second
 * tier adds (make demo without the trace; docs/kvss-trace.md).
 */
int workload_generate_docs(size_t n, uint32_t documents, struct workload *w);

/**
 * In the built-in workload, every @p every-th request (0: none) carries a
 * multimodal input of @p len tokens at the end of its prompt (an image
 * with the message): its first_mm. Returns the requests marked.
 */
size_t workload_mark_multimodal(struct workload *w, uint32_t every, uint32_t len);

void workload_free(struct workload *w);

/* The longest span of arrivals workload_arrivals() makes: a day. */
#define WL_MAX_ARRIVAL_NS (86400ull * 1000000000ull)

/**
 * When the first @p n requests of @p w arrive, in ns after the first
 * (into @p out_ns[n], not decreasing): with @p rate 0, at the workload's
 * timestamps times @p scale (a trace of 17 minutes at scale 0.1 takes
 * 1.7); else a Poisson process of @p rate requests a second, drawn from
 * @p seed (the same seed, the same times). @return 0; -1 with @p err
 * saying why: a line without a timestamp or with one earlier than the
 * line's before it (never reordered, never made up: @p err names the
 * line), or a span of more than WL_MAX_ARRIVAL_NS.
 */
int workload_arrivals(const struct workload *w, size_t n, double scale, double rate,
		      uint64_t seed, uint64_t *out_ns, char *err, size_t errlen);

/**
 * The token a sequence generates at position @p pos (the emulated model's
 * answer): the generator's continued chats contain these, so a replayer
 * that generates them finds its cached answers again.
 */
static inline uint32_t
workload_answer_token(uint32_t pos)
{
	return pos * 2654435761u;
}

/**
 * Of an answer of @p out generated tokens, how many a wafer evicts: all but
 * the last. Each generated token is run (its KV computed) only to produce
 * the next one, so the last is never run and has no KV to evict (the
 * design's generated-token caching); the next turn's prompt computes it.
 */
static inline uint32_t
workload_evicted_answer(uint32_t out)
{
	return out ? out - 1 : 0;
}

/*
 * Speculative decoding, emulated: after each verified token a draft model
 * proposes up to k more; the target accepts them up to the first it
 * rejects, each being rejected with probability @p reject, decided by a
 * hash of (@p seed, request @p req, position @p pos of the first proposal)
 * so that a run replays exactly and every model of a request sees the same
 * rounds. @return how many of the @p k proposals were accepted.
 */
uint32_t workload_spec_accepted(uint64_t seed, uint64_t req, uint32_t pos, uint32_t k,
				double reject);

/** A proposal the target rejects at @p pos: never the answer's token there. */
static inline uint32_t
workload_spec_wrong_token(uint32_t pos)
{
	return workload_answer_token(pos) ^ 0x5bd1e995u;
}

#endif
