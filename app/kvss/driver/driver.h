/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The driver role (driver.c and its parts, driver_priv.h): lib/prefixcache on the
 * control lcore, talking to every shard of every model over its own control
 * stream, with the wafer emulator (emulator.h) that produces evicted bytes
 * and checks refilled ones. This is what main.c sees.
 */
#ifndef KVSS_DRIVER_H
#define KVSS_DRIVER_H

#include <stdint.h>

#include "emulator/emulator.h"
#include "proto.h"

/*
 * The driver's own counters: /swdriver/stats, the final summary. The wafer
 * emulator counts its own (EMU_STATS, emulator.h: requests, hits, refills
 * checked); struct kvss_drv_stats holds both, the emulator's copied in
 * when read (kvss_drv_stats_take).
 */
#define KVSS_DRV_STATS(X)                                                                          \
	X(evict_bytes)	    /* EVICT_DATA payload bytes sent */                                    \
	X(evict_frames) /* EVICT_DATA frames sent */                                               \
	X(deletes)	    /* DELETE records sent (per shard) */                                  \
	X(expiries)	    /* entries removed by expiry */                                        \
	X(control_msgs)	    /* control messages pushed (all shards) */                             \
	X(retransmits) /* control messages sent again */                                           \
	X(hellos)   /* HELLOs sent */                                                              \
	X(statuses) /* STATUS frames received */                                                   \
	X(acks)     /* ACKs received */                                                            \
	X(errors)	    /* ERROR records received */                                           \
	X(lost_tokens)	    /* tokens TOKEN_LOST reported lost */                                  \
	X(lost_records)	    /* TOKEN_LOST records received (version 2: a range each) */            \
	X(refill_done)	    /* REFILL_DONE records received */                                     \
	X(reports_dropped)  /* reports out of order or again (the shard resends; version 2) */     \
	X(report_acks)      /* REPORT_ACKs sent */                                                 \
	X(shard_restarts)   /* new shard epochs: the model's prefixes dropped */                   \
	X(resyncs)	    /* models started over because a shard's state left the driver's */    \
	X(over_capacity)    /* a STATUS showed a cache over its capacity, or the account did */    \
	X(data_withheld)    /* EVICT_DATA frames not sent (wafer.lose_data_every) */               \
	X(link_restarts)    /* ports restarted after their link went down */                       \
	X(link_hellos)      /* HELLOs to shards still up whose port came back up (who is there now?) */ \
	X(stale)	    /* frames of an old shard epoch, or of no known shard */               \
	X(rx_drops)	    /* kvss frames that did not parse (other traffic: by reason only) */   \
	X(tx_retries)	    /* data frames the port did not take at once */                        \
	X(tx_link_drops)    /* frames queued for a port whose link went down */                    \
	X(tx_full_drops)    /* control frames dropped: the port's control queue stayed full */     \
	X(shards_away)	    /* shards found away (link down, or silent for away_ms) */             \
	X(shards_back)      /* shards that were away and answered again */                         \
	X(shards_silent)    /* shards silent for away_ms: their models ran as misses */            \
	X(shards_heard_again) /* silent shards heard again, same epoch: prefixes kept */           \
	X(driver_absent)    /* times this process did not run for 250 ms or more (stopped, its core taken, the clock jumped) */ \
	X(driver_absent_us) /* the time it did not run, those times (a jump of the TSC not counted): its shards' silence and its refills' deadlines leave it out */ \
	X(routed_shards)    /* shards whose STATUS crossed a router (IPv4 TTL below 64): off the rail */ \
	X(no_mbuf)  /* the pool was empty */                                                       \
	X(too_big)	    /* a control record that cannot fit a frame */                         \
	X(l2_down_cols)     /* columns sent down to the second tier (L2_DOWN, per cache group) */  \
	X(l2_up_batches)    /* batches whose bytes the shards read from their second tier (L2_UP) */ \
	X(shared_up_batches) /* of them, with columns from the shared level (SH_UP) */             \
	X(l2_del_cols)      /* columns the second tier let go (L2_DELETE, per cache) */            \
	X(l2_done)          /* L2_DONE records received */                                         \
	X(l2_failed)        /* of them, failures */                                                \
	X(l2_down_failed_cols) /* columns that did not go down: forgotten, DRAM untouched */       \
	X(l2_up_failed_cols) /* columns that did not come up: forgotten, their tokens lost (not the model) */ \
	X(l2_gone_recs)     /* L2_GONE records: a column a shard's disk let go, its key retired */  \
	X(l2_gone_cols)     /* columns forgotten by them before they were asked for */             \
	X(l2_unknown_expected) /* L2_DELETEs after such a failure to a shard that had failed too */ \
	X(l2_tolerated_dropped) /* such expectations dropped, the oldest, past 4096 waiting */     \
	X(l2_inventory_cols) /* columns shards listed in their inventories */                      \
	X(l2_adopted_cols)  /* columns taken back from them (held by every shard of the model) */  \
	X(l2_refused_cols)  /* columns let go instead: parent gone, expired, no room, on some shards only */ \
	X(fit_latency_us)   /* the refill model fitted so far (0 before 20 refills) ... */         \
	X(fit_mbps)	    /* ... and its bandwidth, in Mb/s (refill_gbps x 1000; 0: no bound seen) */ \
	X(model_updates)    /* times the estimates took the fitted model (refill_model "learned") */ \
	X(l2_model_updates) /* times they took the fitted second-tier line */                      \
	X(model_short)	    /* refills that took longer than their estimate */                     \
	X(late_us)	    /* by how much those took longer, summed */                            \
	X(early_us)	    /* by how much the others took less, summed */                         \
	X(held_us)	    /* sequences with their data whole waiting for their estimate (resume) */ \
	X(wafer_held)	    /* times the wafer stopped: the EVICT path backed up (a shard's queue, its data jobs) */ \
	X(wafer_held_us)    /* how long it stayed stopped, summed (no request began, no prefill ran) */ \
	X(ttft_p50_us)	    /* time to first token of the requests so far: the median (lib/percentile) */ \
	X(ttft_p90_us)	    /* ... the 90th percentile */                                          \
	X(ttft_p99_us)	    /* ... the 99th percentile */                                          \
	X(recomputed_by_choice_tokens) /* hit tokens computed, not refilled: computing them was sooner */ \
	X(split_requests) /* hits split (refill_policy "split"): the front computed while the back refilled */ \
	X(split_tokens)	  /* the hit tokens those fronts computed, not refilled */

struct kvss_drv_stats {
#define KVSS_DRV_FIELD(n) uint64_t n;
	KVSS_DRV_STATS(KVSS_DRV_FIELD)
	EMU_STATS(KVSS_DRV_FIELD) /* copies of the emulator's (kvss_drv_stats_take) */
#undef KVSS_DRV_FIELD
	uint64_t errors_by_code[PROTO_E_MAX]; /* ERROR records received, by code */
};

/** Take the emulator's counters @p es into @p st, which reports read. */
static inline void
kvss_drv_stats_take(struct kvss_drv_stats *st, const struct emu_stats *es)
{
#define KVSS_DRV_TAKE(n) st->n = es->n;
	EMU_STATS(KVSS_DRV_TAKE)
#undef KVSS_DRV_TAKE
}

/* The driver's state: one value, passed by pointer to every part (driver_priv.h). */
struct drv;

/** A driver, zeroed (NULL: no memory); kvss_driver_free() ends it. */
struct drv *kvss_driver_new(void);

/**
 * Load the driver's requests (wafer.trace, or the built-in workload),
 * before any port starts: a trace that does not parse stops the program
 * before the shards see it connect. 0, or with a message printed -2 (the
 * trace), -3 (a signal stopped the load) or -1 (no memory). Then
 * kvss_driver_init(), or kvss_driver_free().
 */
int kvss_driver_load(struct drv *d);

/**
 * Set up the driver (after kvss_driver_load() and the ports started): 0,
 * or with a message printed -2 (the configuration: its models), or -1 (no
 * memory).
 */
int kvss_driver_init(struct drv *d);

/** The control lcore's loop (@p arg: the struct drv): runs the workload, prints the summary, sets quit. */
int kvss_driver_main(void *arg);

/** Print the summary of what has run (also after a signal). */
void kvss_driver_summary(struct drv *d);

/** Exit status the run earned: 0, or 1 with verify failures or protocol errors. */
/*
 * Exit statuses of a run (docs/kvss.md, "Exit status"). 2 is also what a
 * bad configuration or command line stops the program with at start.
 */
enum kvss_exit {
	KVSS_EXIT_OK = 0,	/* every request done, every byte right */
	KVSS_EXIT_WRONG = 1,	/* a wrong byte, a wrong account, over capacity, expired served */
	KVSS_EXIT_CONFIG = 2,	/* the configuration, or a shard that disagrees with it */
	KVSS_EXIT_DEGRADED = 3, /* right, but with counted failures (refills lost to a shard's
				 * restart or absence, lost data, an L2 checksum) without --faults */
	KVSS_EXIT_NOT_RUN = 4,	/* could not run: shards never answered, out of memory */
};

int kvss_driver_status(struct drv *d);

/** End @p d (NULL: nothing), whatever of it was set up. */
void kvss_driver_free(struct drv *d);

/** /swdriver/stats and /swdriver/orgs. */
int kvss_driver_telemetry_register(struct drv *d);

#endif
