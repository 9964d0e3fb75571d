/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The wafer emulator (emulator.c): the accelerator that the driver serves,
 * as the design's wafer loop runs it. It takes requests from a workload,
 * begins each as a sequence on every model (a lookup through
 * lib/prefixcache, which emits REFILLs and a RESERVE through the driver's
 * sink), sends each running sequence's tokens, and ends it. It produces the
 * evicted bytes (EVICT_DATA payloads, lib/wafer) of every batch the driver
 * evicts, for every shard of its model, and checks every refilled byte
 * against the reference content of the requester's own prefix.
 *
 * A sequence with a refill resumes when every shard's REFILL_DATA for it is
 * whole and checked (the design's start_recv / wait_recv) and, with resume
 * "estimate", once its refill estimate has passed, as the design picks it
 * again only then.
 *
 * No EAL, no ports, no clock of its own: time comes in as nanoseconds, and
 * payloads go out as bytes for the driver's link to frame. So it runs in a
 * unit test (test/test_emulator.c) as it runs in kvss.
 */
#ifndef KVSS_EMULATOR_H
#define KVSS_EMULATOR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "prefixcache.h"
#include "proto.h"
#include "workload.h"

struct emu;

/*
 * What the emulator counts, each once: /swdriver/stats shows them beside
 * the driver's own (driver.h), and docs/telemetry.md is made from the
 * comments (scripts/telemetry-doc.py).
 */
#define EMU_STATS(X)                                                                               \
	X(requests)	    /* sequences begun */                                                  \
	X(completed)	    /* sequences ended */                                                  \
	X(prompt_tokens)    /* prompt tokens of the requests begun */                              \
	X(lookup_tokens) /* prompt tokens the lookups could hit (the -1 rule, allowed length) */   \
	X(hit_tokens) /* prompt tokens hit (model 0) */                                            \
	X(miss_tokens)	    /* prompt tokens computed, not refilled */                             \
	X(refills)	    /* refills asked (one per request with a hit) */                       \
	X(refilled_tokens)  /* tokens refilled whole and right (per cache, all shards together) */ \
	X(refill_bytes)	    /* REFILL_DATA payload bytes received */                               \
	X(refill_failures)  /* a shard answered a REFILL with an error */                          \
	X(refill_timeouts)  /* data not whole in time */                                           \
	X(verify_failures)  /* refills with a byte that differs from the reference */              \
	X(verify_bad_bytes) /* refilled bytes that differ from the reference */                    \
	X(verify_bad_frames) /* REFILL_DATA out of order, past the end, unknown refill */          \
	X(verify_bad_glue)  /* a refill that would not bring the whole hit, each token to its slot */ \
	X(evicted_tokens) /* tokens evicted (model 0's first cache counts each once) */            \
	X(evict_batches) /* EVICT batches made */                                                  \
	X(refill_done_missing) /* refills let go after the refill timeout without a REFILL_DONE */ \
	X(expired_served)   /* refills of a token last evicted longer ago than the first-use TTL */ \
	X(away_requests)    /* requests begun while a shard of model 0 was not up: all misses */   \
	X(compute_us)       /* the wafer's prefill of missed tokens (recompute_tokens_per_s) */    \
	X(multimodal_trimmed) /* tokens cut from what may be cached: after a multimodal token */   \
	X(generated_hit_tokens) /* of hit_tokens, those into an earlier turn's answer (generated) */ \
	X(model1_hit_tokens) /* prompt tokens hit in model 1 (a draft, say) */                     \
	X(hit_model0_only)  /* requests that hit in model 0 and missed in model 1 */               \
	X(hit_model1_only)  /* requests that hit in model 1 and missed in model 0 */               \
	X(spec_rounds)	    /* speculative rounds: a draft's proposals verified (model 0) */       \
	X(spec_proposed)    /* tokens proposed in them */                                          \
	X(spec_accepted)    /* of them, accepted by the target */                                  \
	X(spec_overwrites)  /* rejected tokens evicted, to be overwritten in place (all models) */ \
	X(spec_overwrites_draft) /* of them, by the models after model 0 (a draft's) */            \
	X(picks_ready)      /* sequences with a refill whose data was whole when a run slot took them */ \
	X(picks_waited)     /* ... and those that waited for it in their slot */                   \
	X(pick_wait_us)     /* how long those waited, from their pick, summed */                   \
	X(l2_hit_seqs)      /* sequences with hits from the second tier */                         \
	X(l2_ready_at_pick) /* of them, those whose data was whole at the pick */                  \
	X(seq_refill_failed) /* sequences a refill of which failed: not in the refill times */     \
	X(seqs_given_up)    /* sequences that stopped waiting for their refills: computing was sooner */ \
	X(refills_given_up) /* their refills, still out then (checked as they came, not waited for) */ \
	X(given_up_tokens)  /* the tokens those refills would have brought, computed instead */   \
	X(skipped_seqs)     /* sequences that stopped caching: the EVICT path backed up (backpressure skip) */ \
	X(skipped_tokens)   /* their tokens not evicted for it */                                  \
	X(refill_stale)   /* REFILL_DATA or REFILL_DONE for no refill awaited: finished, timed out, unknown */ \
	X(first_tokens)     /* requests that reached their first generated token (TTFT counted) */ \
	X(ttft_us)	    /* their times to first token, from arrival, summed */                 \
	X(queue_us)	    /* of that, time arrived but not begun (every slot taken), summed */    \
	X(compute_saved_us) /* the prefill the hit tokens would have cost (recompute_tokens_per_s) */ \
	X(arrivals_unbegun) /* requests not begun when the run stopped (arrived or not) */

struct emu_stats {
#define EMU_FIELD(n) uint64_t n;
	EMU_STATS(EMU_FIELD)
#undef EMU_FIELD
};

/** What the emulator asks of the driver around it. */
struct emu_hooks {
	/** Are all of @p model's shards up, so that a request may look it up? */
	bool (*model_up)(void *arg, uint16_t model);
	/** Is shard @p k (index in emu_params.shard) up: does its data wait for it? */
	bool (*shard_up)(void *arg, uint16_t k);
	/**
	 * Model @p m's refills of one sequence were whole after @p ns, for
	 * @p bytes charged, @p l2_bytes of them brought up from the second tier.
	 */
	void (*model_refilled)(void *arg, uint16_t m, uint64_t ns, uint64_t bytes, uint64_t l2_bytes,
			       uint64_t shared_bytes);
	/** A sequence's refills were all whole (none failed) after @p ns; its longest estimate. */
	void (*seq_refilled)(void *arg, uint64_t ns, uint64_t est_ns, uint64_t est_bytes);
	/**
	 * May request @p req (index in the workload) start at @p now (NULL:
	 * always)? The driver looks it up in the shared level first, ahead of
	 * its start; false: not yet (it is asked again).
	 */
	bool (*request_ready)(void *arg, uint32_t req, uint64_t now);
};

/** One shard of one model, as the emulator's data and checks need it. */
struct emu_shard {
	uint16_t model;
	uint16_t id;
	uint32_t bytes_per_token[PREFIXCACHE_MAX_CACHES];
};

struct emu_params {
	struct prefixcache *pc; /* the driver's library: lookups, tokens, ends, refills done */
	const struct prefixcache_params *pcp; /* what it was made with (the caches' windows) */
	const struct workload *wl;
	size_t nreq;	       /* requests to run (at most wl->n) */
	uint16_t num_models;
	uint32_t max_inflight; /* sequences running at once */
	/* Ahead of the pick (wafer.ahead_of_pick): sequences begun (looked up,
	 * their refills and L2 columns on the way) while they wait for a run
	 * slot; 0: a request is begun when it is picked. */
	uint32_t ahead;
	uint32_t step_tokens;  /* tokens a running sequence sends per step */
	/* Speculative decoding (wafer.speculate): after each verified generated
	 * token, a draft proposes up to spec_tokens more, each rejected with
	 * probability spec_reject (seeded by spec_seed); 0: none. */
	uint32_t spec_tokens;
	double spec_reject;
	uint64_t spec_seed;
	uint64_t refill_timeout_ns;
	uint64_t expiry_check_ns; /* > 0: count refills of tokens last evicted longer ago (expired_served) */
	uint32_t recompute_tokens_per_s; /* a sequence's missed tokens take this long to run (0: free) */
	uint64_t prefill_overhead_ns;	 /* and a prefill this much more, whatever its tokens */
	/* Request i arrives arrival_ns[i] after the first step ([nreq], copied;
	 * not decreasing): it begins no sooner, and its time to first token
	 * counts from then. NULL: a closed loop, each request arriving as it
	 * begins (when a slot is free). */
	const uint64_t *arrival_ns;
	bool compute_only;     /* no lookups: the cache off, every prompt computed (a baseline) */
	/*
	 * Refill policy "adaptive" with a prefill rate: a picked sequence whose
	 * refills are still out when computing what they bring would have been
	 * done (its refilled tokens at the rate, from the pick) stops waiting
	 * and computes them; the refills are still checked as they come.
	 */
	bool give_up;
	/*
	 * wafer.backpressure "skip": while the driver says the EVICT path is
	 * backed up (emu_backed_up), a running sequence with tokens left to send
	 * stops caching there instead (its tokens from there are not evicted;
	 * what it evicted stays), and its run slot frees; else the driver stops
	 * the wafer until the path drains.
	 */
	bool skip_backed_up;
	bool resume_estimate;  /* wafer.resume "estimate"; false: "whole" */
	bool open_loop;	       /* recording: refills are not awaited nor checked */
	uint16_t nshards;
	const struct emu_shard *shard; /* [nshards], a model's shards in a row (copied) */
	const struct emu_hooks *hooks;
	void *arg;
};

/** NULL on a bad parameter or no memory. */
struct emu *emu_create(const struct emu_params *p);

void emu_free(struct emu *e);

/** What it has counted so far. */
const struct emu_stats *emu_stats(const struct emu *e);

/**
 * One wafer step at @p now_ns: start what may start, send each running
 * sequence's next tokens, flush the batches, end the sequences that are
 * done. Returns 1 when a token was sent.
 */
int emu_step(struct emu *e, uint64_t now_ns);

/** The driver's EVICT path is backed up (@p on) or not: with skip_backed_up, steps skip what they would send. */
void emu_backed_up(struct emu *e, bool on);

/**
 * The driver held the wafer from @p from_ns to @p to_ns (a shard's control
 * queue backed up: no request began, and REFILLs waited behind it): that
 * time does not count toward the refill timeout of what waits (a
 * sequence's deadline, a given-up refill's, a finished one's wait for its
 * REFILL_DONE), which the driver does not check while it holds the wafer,
 * nor toward a picked sequence's giving its refill up (emu_params.give_up);
 * what of it came after each clock last started (a frame of data, the
 * pick) is added. A shard silent through
 * such a hold is the driver's to judge (away_ms, dead_ms), not this.
 */
void emu_hold_ended(struct emu *e, uint64_t from_ns, uint64_t to_ns);

/**
 * The driver did not run for a while (stopped, its core taken, a VM's
 * snapshot): the refills out now took that time too, which says nothing
 * of the tiers, so none of them is a sample of the refill-time model
 * (emu_hooks model_refilled, seq_refilled). Their deadlines are
 * emu_hold_ended()'s.
 */
void emu_absent(struct emu *e);

/** Refills past the refill timeout fail (their sequences go on). */
void emu_check_timeouts(struct emu *e, uint64_t now_ns);

/** The emulator ran out of memory, or the library refused a lookup: the run stops. */
bool emu_failed(const struct emu *e);

/** Everything run: no request left, no sequence running, no refill open. */
bool emu_done(const struct emu *e);

/** Requests begun so far (the next one's index). */
size_t emu_next_request(const struct emu *e);

/** Data jobs that some shard that is up has not sent, counted up to @p max. */
uint32_t emu_jobs_pending(const struct emu *e, uint32_t max);

/* ---- From the driver's sink ---- */

/** An EVICT batch went to the model's shards: its bytes are to be sent. -ENOMEM. */
int emu_evict(struct emu *e, uint16_t model, uint64_t batch_no, uint16_t nc, uint16_t g,
	      const struct proto_evict_entry *entries);

/**
 * The prefix hashes of the sequence with wafer id @p sequence_id (NULL
 * when none runs there), *@p n of them: the reference of what a refill for
 * it must bring.
 */
const uint64_t *emu_seq_hashes(const struct emu *e, uint32_t sequence_id, uint32_t *n);

/* ---- From the shards ---- */

/** Shard @p k's cache @p cache has @p num_buffers buffers (its STATUS). */
void emu_shard_buffers(struct emu *e, uint16_t k, uint16_t cache, uint16_t num_buffers);

/** A REFILL_DATA payload from shard @p k. */
void emu_refill_data(struct emu *e, uint16_t k, const struct proto_refill_data_hdr *h,
		     const uint8_t *data, uint32_t len, uint64_t now_ns);

/**
 * A REFILL_DONE record from shard @p k: its data for the refill went out,
 * or it failed. false: no such refill of the shard's model (counted stale).
 */
bool emu_refill_done(struct emu *e, uint16_t k, uint64_t refill_id, uint32_t status,
		     uint64_t now_ns);

/**
 * The next EVICT_DATA payload shard @p k sends (header and at most
 * @p max_data bytes, into @p buf of PROTO_PAYLOAD_MAX), of batches up to
 * @p through only (the driver's pacing: what the shard's EVICTs allow);
 * headers carry @p epoch (the wafer's) and @p stream (the driver epoch of the
 * model, version 2's DataHeader). 0: nothing to send now.
 */
uint32_t emu_data_next(struct emu *e, uint16_t k, uint64_t through, uint32_t epoch, uint32_t stream,
		       uint8_t *buf,
		       uint32_t max_data);

/** Has shard @p k data of a batch up to @p through to send? */
bool emu_data_ready(struct emu *e, uint16_t k, uint64_t through);

/** Free the jobs every shard is done with. */
void emu_data_gc(struct emu *e);

/**
 * Shard data of @p model is gone (a new driver epoch): its jobs are
 * dropped, its refills fail (their sequences go on).
 */
void emu_model_restart(struct emu *e, uint16_t model, uint64_t now_ns);

/**
 * Each request's time to first token so far, in us (from its arrival to
 * the end of its prefill, the refill and queueing included), *@p n of
 * them, in the order they got there.
 */
const uint64_t *emu_ttft_us(const struct emu *e, size_t *n);

/**
 * Each request's time to first token in us, by its index in the workload
 * (UINT64_MAX: it had none), and into *@p hit_tokens model 0's hit tokens
 * of each (what its lookup found to refill; 0 when computed; UINT32_MAX:
 * never begun); into *@p n how many requests there are of each.
 */
const uint64_t *emu_ttft_by_request(const struct emu *e, const uint32_t **hit_tokens, size_t *n);

/**
 * Has request @p req arrived at @p now (always, in a closed loop)? What
 * has not arrived is not looked up ahead either: no driver knows a prompt
 * before it is sent.
 */
bool emu_arrived(const struct emu *e, size_t req, uint64_t now);

/** The run stops here: requests not begun are counted (arrivals_unbegun). */
void emu_stop(struct emu *e);

/** Time sequences with their data whole waited for their estimate (resume "estimate"). */
uint64_t emu_held_ns(const struct emu *e);

#endif
