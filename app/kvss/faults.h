/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The driver's fault injector (`--faults SPEC`): between the driver and its
 * shards, on whatever link joins them (the rte_ring pair of role "all",
 * memif, a NIC), frames are dropped, duplicated, reordered, delayed,
 * truncated or corrupted, at rates a seed chooses; docs/kvss.md says how.
 *
 * Every frame the driver sends (control and EVICT_DATA) and every frame it
 * receives (STATUS, ACK, ERROR, REFILL_DONE, TOKEN_LOST, REFILL_DATA) passes
 * it. Its decisions are a function of the seed and of the frame's place on
 * its path (the nth frame out, the nth in): a seed gives the same plan each
 * run; which frame is nth depends on the lcores' timing, as on a real
 * fabric. A corrupted frame first gets the UDP checksum its sender would have
 * written with checksums on, so that the receiver can tell (PROTOCOL.md
 * section 1: a nonzero wrong checksum is dropped); it is a copy, never the
 * sender's memory (a shard's REFILL_DATA points into its store).
 */
#ifndef KVSS_FAULTS_H
#define KVSS_FAULTS_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

struct rte_mbuf;
struct rte_mempool;

enum kvss_fault { KVSS_F_DROP, KVSS_F_DUP, KVSS_F_REORDER, KVSS_F_DELAY, KVSS_F_TRUNCATE,
		  KVSS_F_CORRUPT, KVSS_F_N };

enum kvss_fault_dir { KVSS_F_OUT, KVSS_F_IN };

struct kvss_faults_cfg {
	bool on;
	uint64_t seed;
	uint32_t ppm[KVSS_F_N];	 /* per million frames */
	uint32_t delay_max_us;	 /* a delayed frame waits up to this */
	uint32_t reorder_max_us; /* a reordered one up to this: frames behind it overtake it */
};

/**
 * Parse @p spec: "seed=N" alone (the seed chooses every rate) or with any of
 * drop=P, dup=P, reorder=P, delay=P, truncate=P, corrupt=P (percent of frames,
 * each way) and delay_ms=M; rates not given are 0 then. 0, or -1 with one
 * line in @p err naming the bad part.
 */
int kvss_faults_parse(const char *spec, struct kvss_faults_cfg *f, char *err, size_t errlen);

/** Take @p f on (kvss_faults_on() says so from then); @p pool for copies. */
void kvss_faults_init(const struct kvss_faults_cfg *f, struct rte_mempool *pool);

bool kvss_faults_on(void);

/**
 * Frame @p m goes @p dir: returns how many frames of @p out (0, 1 or 2) to
 * deliver now, in order. A held frame (delayed, reordered) comes back from
 * kvss_faults_due() with its @p tag.
 */
unsigned int kvss_faults_pass(enum kvss_fault_dir dir, struct rte_mbuf *m, uint32_t tag,
			      struct rte_mbuf **out);

/** Held frames of @p dir now due: @p fn for each, oldest first; returns how many. */
unsigned int kvss_faults_due(enum kvss_fault_dir dir, void (*fn)(void *arg, struct rte_mbuf *m,
								 uint32_t tag), void *arg);

/** Free what is still held (at exit). */
void kvss_faults_fini(void);

/** The plan, one line (the rates in force). */
void kvss_faults_describe(FILE *f);

/** What was done, as a JSON object, into @p buf; "null" when off. */
int kvss_faults_json(char *buf, size_t len);

/** Frames faulted so far, both ways (for the summary). */
uint64_t kvss_faults_total(void);

#endif
