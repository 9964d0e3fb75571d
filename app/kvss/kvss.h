/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The kvss application: what every role's files share (the process's
 * configuration, epoch, pool, quit flag, per-lcore stats, the port gate and
 * the poll helpers). Each lcore writes only its own stats struct; telemetry
 * and the final report read them. A role's own parts have their own header:
 * shard/shard.h (the shard), driver/driver_priv.h (the driver), emulator/emulator.h
 * (the wafer); what the launcher and telemetry call of a role is in its
 * public header (shard/shard_api.h, driver/driver.h), never its private
 * one. Each role is a folder; this folder holds what they share:
 * main.c (the launcher), app.c, ports.c, portgate.c, telemetry.c, faults.c.
 */
#ifndef KVSS_APP_H
#define KVSS_APP_H

#include <stdbool.h>
#include <stdint.h>

#include <rte_common.h>
#include <rte_mempool.h>
#include <rte_ring.h>

#include "config.h"
#include "faults.h"
#include "kvstore.h"
#include "proto.h"

/* Counters of one lcore, declared once: the struct, the names, the keys. */
#define KVSS_STATS(X)                                                                              \
	X(rx_frames)    /* frames received */                                                      \
	X(rx_bytes)     /* bytes received */                                                       \
	X(tx_frames)    /* frames sent */                                                          \
	X(tx_bytes)     /* bytes sent */                                                           \
	X(tx_drops)     /* the NIC took nothing for 1 s: freed, counted */                         \
	X(tx_full)      /* frames that waited for room in the TX ring */                           \
	X(no_mbuf)      /* the pool was empty */                                                   \
	X(hello)        /* HELLOs received */                                                      \
	X(hello_foreign) /* HELLOs of the current epoch from another address: ignored */          \
	X(status_sent)  /* STATUS frames sent */                                                   \
	X(stale_epoch)  /* control frames of another driver epoch */                               \
	X(dropped_restart) /* DELETE, REFILL, held data of a restarted driver */                   \
	X(not_handled)  /* valid messages not for a shard */                                       \
	X(not_mine_mac) /* frames to another MAC (not broadcast): dropped */                       \
	X(not_mine_ip)  /* frames to another IPv4 address: dropped */                              \
	X(not_mine_model) /* frames of another model: dropped */                                   \
	X(not_mine_shard) /* frames to another shard (not 0xFFFF): dropped */                      \
	X(not_a_driver) /* control from an address shard.drivers does not list */                  \
	X(routed)       /* frames that crossed a router (IPv4 TTL below 64): off the rail */      \
	X(routed_refused) /* of them, dropped (shard.routed = "refuse") */                         \
	X(acks)         /* ACKs sent */                                                            \
	X(duplicates)   /* control seq already accepted */                                         \
	X(early)        /* control seq ahead: held */                                              \
	X(out_of_window) /* control seq past the window of 64: dropped, the driver resends */      \
	X(queue_full)   /* accepted messages dropped, queue full (1,024): sent again */         \
	X(batches)      /* EVICT batches run */                                                    \
	X(batches_lost) /* batches completed with loss: data not whole (batch timeout, or sooner) */ \
	X(batches_lost_early) /* of them, before the timeout: a later batch's data came first */   \
	X(up_batches_lost) /* of them, L2_UP or SH_UP batches, once every read had answered */       \
	X(up_batches_cut) /* of them, with reads out to a tier silent past the batch and op timeouts */      \
	X(lost_tokens)  /* tokens reported lost in TOKEN_LOST */                                    \
	X(lost_records) /* TOKEN_LOST records sent (version 2: a range each) */                    \
	X(reports)      /* ERROR, TOKEN_LOST, L2_DONE frames sent with a report seq (version 2) */ \
	X(reports_resent) /* of them, sent again: no REPORT_ACK in time */                         \
	X(reports_unsequenced) /* sent without one: SHARD_REPORTS unacknowledged already */        \
	X(report_acks)  /* REPORT_ACKs received */                                                 \
	X(evict_waits)  /* EVICT found no room, waiting for DELETEs */                             \
	X(evict_after_delete) /* EVICT waited for a DELETE before it naming its prompt */          \
	X(delete_gate_ahead) /* DELETE waiting for a batch not sent before it: no barrier */       \
	X(data_frames)  /* EVICT_DATA frames stored */                                             \
	X(data_bytes)   /* EVICT_DATA payload bytes stored */                                      \
	X(data_dropped) /* EVICT_DATA frames the store refused (stale or outside its batch) */     \
	X(data_stale_stream) /* EVICT_DATA of another driver epoch's stream (v2): dropped */      \
	X(data_expired) /* held for an EVICT that never came */                                    \
	X(data_unannounced) /* data for a batch too far past the last EVICT: dropped */            \
	X(data_hold_full) /* data to hold, no room a later batch held: dropped */                  \
	X(data_displaced) /* held data of the batch furthest ahead, given up for a nearer one */   \
	X(deletes)      /* DELETE records applied */                                               \
	X(refills)      /* refills sent */                                                         \
	X(refills_ahead) /* ran before DELETEs that waited for their batches */                    \
	X(refill_frames) /* REFILL_DATA frames sent */                                             \
	X(refill_bytes) /* REFILL_DATA payload bytes sent */                                       \
	X(ring_full)    /* times the refill lcore's ring was full */                               \
	X(l2_down)      /* columns written to the second tier (L2_DOWN) */                         \
	X(l2_up)        /* columns read from it into a batch (L2_UP) */                            \
	X(l2_deleted)   /* columns it let go (L2_DELETE) */                                        \
	X(l2_gone)      /* columns it let go on its own, the driver told (L2_GONE: a key retired) */ \
	X(l2_errors)    /* second-tier operations that failed (L2_DONE or ERROR sent) */           \
	X(shared_down)  /* slices written to the shared level (SH_DOWN; one already there counts) */ \
	X(shared_up)    /* slices read from it, checked, into a batch (SH_UP) */                   \
	X(shared_errors) /* shared-level operations that failed (L2_DONE op 3 or 4 sent) */        \
	X(idle_polls)   /* polls that found nothing */                                             \
	X(intr_sleeps)  /* poll_mode "interrupt": sleeps until a frame came or 1 ms passed */      \
	X(intr_wakeups) /* of them, ended by a frame (an RX interrupt) */                          \
	X(busy_polls)   /* polls that found work */

struct kvss_lcore_stats {
#define KVSS_STAT_FIELD(n) uint64_t n;
	KVSS_STATS(KVSS_STAT_FIELD)
#undef KVSS_STAT_FIELD
	uint64_t drops[PROTO_R_MAX]; /* frames dropped, by parse reason */
	uint64_t errors[PROTO_E_MAX]; /* ERROR records sent, by code */
	uint64_t refill_errors[PROTO_E_MAX]; /* refills answered with a failure, by code */
	uint64_t busy_cycles, idle_cycles;
	/*
	 * A shard lcore's busy_cycles by role, summing to them: refill work
	 * (REFILLs received, REFILL_DATA built and sent; every busy poll of a
	 * refill lcore) and ingest work (the rest: EVICT_DATA stored, the
	 * control stream, EVICT, DELETE, ACK, STATUS). shard/shard.c says how
	 * a poll that did both is split.
	 */
	uint64_t ingest_cycles, refill_cycles;
} __rte_cache_aligned;

enum kvss_lcore_role { KVSS_LCORE_NONE, KVSS_LCORE_INGEST, KVSS_LCORE_REFILL, KVSS_LCORE_CONTROL };

/*
 * The process. main.c writes everything before the lcores start, except
 * where a field says otherwise.
 */
struct kvss_app {
	struct kvss_config cfg;
	struct kvss_faults_cfg faults; /* --faults: the driver's fault injector (faults.h) */
	/* 1: a signal (or --exit-when-idle); 2: the driver finished. Any thread
	 * writes it (__atomic); every loop reads it. */
	int quit;
	uint32_t exit_idle_ms; /* --exit-when-idle: stop after this long with no RX */
	uint32_t linger_ms;    /* --linger: a finished driver keeps serving telemetry */
	const char *record_expect; /* driver, --record-expect: open loop, refills written there */
	const char *plot_refills;  /* driver, --plot-refills: a PNG of refill times at the end */
	const char *ttft_out;	   /* driver, --ttft-out: each request's TTFT, a CSV at the end */
	uint32_t epoch;	       /* this process's epoch: random, nonzero */
	uint64_t start_tsc;
	struct rte_mempool *pool;
	/* Shard role: the shards this process hosts (kvss_shards[], below). */
	uint16_t num_shards;
	/* One per lcore: that lcore writes it; telemetry and the report read. */
	struct kvss_lcore_stats stats[RTE_MAX_LCORE];
	enum kvss_lcore_role lcore_role[RTE_MAX_LCORE];
};

extern struct kvss_app kvss;

struct shard_state;
struct shard_levels;

/*
 * One shard this process hosts: role "shard" hosts one; role "all" one per
 * group of its shard list (a target model's and its draft's, say), each
 * with its own ingest lcore, port pair, store and control stream.
 */
struct kvss_shard_inst {
	struct kvss_shard_cfg *cfg; /* kvss.cfg.local[i] */
	struct shard_state *st;	    /* its protocol state (shard.h) */
	struct shard_levels *levels; /* its levels below DRAM (shard/level.h); NULL: none */
	unsigned int ingest_lcore, refill_lcore;
	struct kvstore *store;
	void *store_mem;
	/* Established by HELLO; 0: none. Written by the ingest lcore (release),
	 * before it resets the store; the refill lcore reads it (acquire). */
	uint32_t driver_epoch;
	/* Where STATUS, ACK, ... go (the last control sender): ingest lcore: wo. */
	struct proto_addr driver_addr;
	int have_driver; /* ingest lcore: wo */
	/* Where the HELLO that took control (a new driver epoch) came from: the
	 * only address the L2 inventory goes to, and the only one whose HELLO of
	 * that epoch is answered again (ingest lcore: wo). */
	struct proto_addr ctl_addr;
	/* The refill lcore (when the port has a second TX queue for it). */
	bool refill_lcore_on;
	struct rte_ring *ingest_to_refill; /* accepted DELETE and REFILL, in order */
	struct rte_ring *refill_to_ingest; /* DELETEs for the writer to apply */
	uint64_t deletes_applied;	   /* by the ingest lcore; the refill lcore waits on it */
	/* The rail (PROTOCOL.md section 1): routers crossed by the latest
	 * control frame (the driver's) and EVICT_DATA frame (the wafer's);
	 * ingest lcore: wo, telemetry reads. Said once each. */
	uint8_t driver_hops, wafer_hops;
	bool routed_said;
};

extern struct kvss_shard_inst kvss_shards[KVSS_MAX_LOCAL_SHARDS];

static inline int
kvss_quitting(void)
{
	return __atomic_load_n(&kvss.quit, __ATOMIC_RELAXED);
}

/** The ingest lcore of shard kvss_shards[(uintptr_t)@p arg] (shard.c). */
int kvss_shard_ingest(void *arg);

/** The refill lcore of shard kvss_shards[(uintptr_t)@p arg] (refillq.c). */
int kvss_shard_refill(void *arg);

/** Transmit one frame on @p queue of the shard's port; frees and counts it on failure. */
void kvss_tx_one(struct kvss_shard_inst *me, struct kvss_lcore_stats *st, uint16_t queue,
		 struct rte_mbuf *m, uint32_t len);

/** Largest UDP payload at the configured MTU (every role's). */
static inline uint32_t
kvss_payload_cap(void)
{
	return kvss.cfg.mtu - PROTO_IP4_LEN - PROTO_UDP_LEN;
}

/**
 * Send refill @p r (begun by the caller) as REFILL_DATA streams, one per
 * buffer, on @p queue, to the wafer (refill.c). The refill ends when the last
 * mbuf referencing it is freed.
 * @return payload bytes sent, -1 (out of mbufs or refill slots), or -2 (a
 *   buffer's transfer ended short: the prompt was cut under the refill); the
 *   refill is ended all the same.
 */
int64_t kvss_refill_send(struct kvss_shard_inst *me, struct kvss_lcore_stats *st, uint16_t queue,
			 const struct proto_refill_req *rq, struct kvstore_refill *r);

/** Refills whose mbufs have not all been freed yet, sent by any lcore. */
unsigned int kvss_refills_in_flight(void);

/* ---- ports.c ---- */

/**
 * Set up and start @p port for a shard (@p is_shard: one RX queue, a TX
 * queue for the refill lcore when @p want_refill and the port has two) or
 * the driver: 0, -EDOM for a configuration the port cannot take, or an
 * error, said. A shard's @p refill_on says whether it got that queue.
 */
int kvss_port_init(uint16_t port, uint32_t mtu, int want_refill, int is_shard, bool *refill_on);
int kvss_port_started(uint16_t port);
/** Stop and close every port kvss_port_init() started (once, on the way out). */
void kvss_ports_close(void);
/** Role all: a net_ring pair per hosted shard; the configured ports replaced by them. */
int kvss_ring_ports(void);
void kvss_ring_ports_free(void);

/** Register the /kvss/... telemetry commands (telemetry.c). */
int kvss_telemetry_register(void);
/** The shards' stores are about to be freed: the telemetry handlers see none from now on. */
void kvss_telemetry_stores_gone(void);

/**
 * End of one poll of an lcore loop that began at @p t0: count it busy, or
 * idle (then pause, or in idle poll mode sleep briefly after 64 empty polls
 * in a row; @p empty counts them). After 64 empty polls the port gate may
 * let memif's control run (kvss_gate_idle). kvss_poll_busy returns the
 * cycles it counted (a shard gives them to a role).
 */
uint64_t kvss_poll_busy(struct kvss_lcore_stats *st, uint64_t t0, unsigned int *empty);
void kvss_poll_idle(struct kvss_lcore_stats *st, uint64_t t0, unsigned int *empty);

/*
 * poll_mode "interrupt" (as DPDK's l3fwd-power): an lcore that found nothing
 * for 64 polls sleeps in epoll until a frame comes on one of the RX queues
 * it watches, or 1 ms passes (its timers), instead of spinning or napping.
 * kvss_intr_port_probe: after the port started, whether its queues can
 * (RX interrupts; net_memif and net_ring cannot: those lcores nap as in
 * "idle"). kvss_intr_watch: the calling lcore polls @p port's queue @p q.
 */
void kvss_intr_port_probe(uint16_t port);
bool kvss_intr_port_ok(uint16_t port);
void kvss_intr_watch(uint16_t port, uint16_t q);

/**
 * One turn of a wait for another thread (a full TX ring, a DELETE the ingest
 * lcore has yet to apply): a pause, or in idle poll mode, after 16 turns in
 * a row (@p turns counts them), a 20 us sleep, so that the thread waited
 * for can have the core.
 */
void kvss_wait_turn(unsigned int *turns);

/*
 * Stop EAL and remove this process's runtime directory (/var/run/dpdk/PREFIX),
 * which EAL leaves behind: a stopped kvss (or test) leaves no file prefix.
 * Only a primary process owns it.
 */
void kvss_eal_stop(void);
/*
 * The same without rte_eal_cleanup, for a process about to exit whose
 * devices cannot be closed safely (see test/memif_flap.c).
 */
void kvss_eal_leave(void);

/** Remove directory @p dir and the files in it (a runtime directory). */
void kvss_remove_dir(const char *dir);

/*
 * The port gate (portgate.c): with a memif port, lcores burst only while
 * EAL's interrupt thread, where the memif PMD tears a connection down, is
 * parked; elsewhere it costs one branch.
 */
/** Turn the gate on if a memif port is there (after the ports start). */
int kvss_gate_init(void);
/** Let the interrupt thread go for good (after the lcores stopped). */
void kvss_gate_fini(void);
/** 1: the caller may touch the ports until kvss_gate_leave(); 0: not now. */
int kvss_gate_enter(void);
void kvss_gate_leave(void);
/** kvss_gate_enter(), retried for up to @p ms: 1 when in (the caller leaves). */
int kvss_gate_wait(unsigned int ms);
/** An lcore with nothing to do (64 empty polls): the interrupt thread may run now. */
void kvss_gate_idle(void);
/** 1: bursts are skipped now (the interrupt thread is not parked). */
int kvss_gate_shut(void);
/** Times the interrupt thread was parked (0 when the gate is off). */
uint64_t kvss_gate_parks(void);
/** rte_eth_rx_burst / rte_eth_tx_burst through the gate: 0 while it is shut. */
uint16_t kvss_rx_burst(uint16_t port, uint16_t queue, struct rte_mbuf **pkts, uint16_t n);
/**
 * kvss_rx_burst, and in @p read whether the queue was read at all (false:
 * the gate was shut, so an empty answer says nothing of what waits there).
 */
uint16_t kvss_rx_burst_read(uint16_t port, uint16_t queue, struct rte_mbuf **pkts, uint16_t n,
			    bool *read);
uint16_t kvss_tx_burst(uint16_t port, uint16_t queue, struct rte_mbuf **pkts, uint16_t n);

/** Sum of every lcore's stats. */
void kvss_stats_total(struct kvss_lcore_stats *t);

/*
 * The shard's lcores' time (those whose role is ingest or refill), in
 * microseconds: busy on ingest work, busy on refill work, idle. A driver's
 * control lcore is not among them (role all).
 */
struct kvss_shard_time {
	uint64_t ingest_busy_us, refill_busy_us, idle_us;
};
void kvss_shard_time(struct kvss_shard_time *t);

#endif
