/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The driver role's parts, private to them (driver.h is what main.c sees).
 * Everything here runs on the control lcore, except where a field says
 * otherwise. Calls go one way, down this list: a file calls only files
 * below it (report.c reads every part's state and calls none that change
 * it). The state they share is struct drv at the end, one value that
 * kvss_driver_new() makes and every function is passed (struct drv *d):
 * no part keeps state at file scope (report.c's telemetry snapshot is the
 * one exception, forced by DPDK; it says why). Each struct says which
 * part writes each field:
 *
 *   driver.c   set-up, the loop, the shards' liveness
 *   report.c   telemetry (/swdriver/...), progress, the summary, the verdict
 *   rx.c       what the shards send, taken in
 *   epoch.c    epochs, and the restart of a model whose shards lost state
 *   l2.c       the shards' second tiers: inventories, L2_DONE, adoption
 *   shared.c   the shared level (Ceph RADOS): generations, lookups ahead of
 *              a request's start, records of columns gone up, op 3 and 4
 *              L2_DONEs (it calls lib/shared; the sink calls it through
 *              its callbacks)
 *   link.c     ports and TX queues, control streams pushed and resent,
 *              EVICT_DATA framed and sent, links watched
 *   sink.c     lib/prefixcache's sink: RESERVE, EVICT, REFILL and DELETE
 *              records into the queues, evicted batches and refills to the
 *              wafer emulator, and (open loop) what each shard must send
 *              back, to a file (no EAL)
 *   ctlq.c     a shard's queue of control messages waiting for its
 *              stream's window, and the message records are being put into
 *              (no EAL)
 *   learn.c    refill times learned: the fitted lines, the estimates'
 *              scale, the latency percentiles (no EAL)
 *   ../emulator/ the wafer emulator (emulator.h), called by driver.c, rx.c,
 *              sink.c, link.c and epoch.c; it calls none of them
 */
#ifndef KVSS_DRV_H
#define KVSS_DRV_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <time.h>

#include "config.h"
#include "driver.h"
#include "linfit.h"
#include "prefixcache.h"
#include "proto.h"
#include "proto_stream.h"
#include "shared_obj.h"
#include "workload.h"

struct drv;
struct drv_shl;
struct emu;
struct rte_mbuf;

#define DRV_MAX_SHARDS (PREFIXCACHE_MAX_MODELS * KVSS_MAX_SHARDS)
#define DRV_MAX_PORTS 32

/* ---- ctlq.c --------------------------------------------------------------------- */

/* A control message waiting for room in its stream's window. */
struct drv_ctl_msg {
	struct drv_ctl_msg *next;
	uint64_t batch_no; /* EVICT: its batch; else 0 */
	uint32_t len;
	uint8_t p[];
};

/*
 * One shard's control messages, in order: the sink writes records into the
 * open message and queues whole ones (sink.c); the link pushes them into
 * the stream as its window allows (link.c). Both on the control lcore.
 */
struct drv_ctlq {
	struct drv_ctl_msg *head, *tail;
	uint32_t backlog; /* messages queued */
	bool open_on;	  /* records are being put into open */
	struct proto_builder open;
	uint8_t open_buf[PROTO_PAYLOAD_MAX];
};

/** Queue a whole message (a copy of @p p). 0, or -ENOMEM. */
int drv_ctlq_push(struct drv_ctlq *q, const uint8_t *p, uint32_t len, uint64_t batch_no);

/** The open message, if it holds a record, joins the queue. 0, or -ENOMEM. */
int drv_ctlq_close(struct drv_ctlq *q);

/**
 * The message whose header is @p h that records of @p need bytes go into:
 * the open one if it is of that type with room, else a new one (the open
 * one queued first). NULL when a record that size fits no message of
 * @p cap bytes, or the queue has no memory.
 */
struct proto_builder *drv_ctlq_open(struct drv_ctlq *q, const struct proto_hdr *h, uint32_t need,
				    uint32_t cap);

/** The oldest queued message, taken off the queue (the caller frees it); NULL: none. */
struct drv_ctl_msg *drv_ctlq_pop(struct drv_ctlq *q);

/** The oldest queued message, left on the queue (the stream writes its seq); NULL: none. */
static inline struct drv_ctl_msg *
drv_ctlq_peek(struct drv_ctlq *q)
{
	return q->head;
}

/** Drop everything queued and the open message. */
void drv_ctlq_clear(struct drv_ctlq *q);

/* ---- A shard as the driver knows it -------------------------------------------------- */

/* A column a shard's second tier let go, by organization, key and cache (l2.c). */
struct drv_gone {
	uint64_t iso, key;
	uint16_t cache;
};

struct drv_shard {
	/* Set at start, read-only after. */
	uint16_t model, idx; /* idx: position in the model's shard list */
	uint16_t k;	     /* position in the driver's shard array */
	const struct kvss_shard_ref *ref;
	struct proto_addr ctrl, evict;
	/* The link (link.c): its control stream and what it sent. */
	struct proto_stream stream;
	struct drv_ctlq q; /* sink: writes records; link: drains */
	uint64_t hello_at;
	uint64_t evict_sent;  /* highest batch whose EVICT has gone out */
	uint64_t evict_acked; /* highest batch whose EVICT an ACK covers: it ran */
	uint64_t ev_seq[PROTO_STREAM_WINDOW_MAX], ev_batch[PROTO_STREAM_WINDOW_MAX];
	uint32_t ev_head, ev_tail; /* EVICTs sent and not yet acknowledged */
	/* What it says (driver.c, from its frames). */
	uint32_t epoch;	  /* the shard's; 0: not up */
	bool up;	  /* answered our HELLO with our epoch */
	bool away;	  /* found away (driver.c), not yet back */
	bool silent;	  /* nothing heard for away_ms (driver.c): its model runs as misses,
			   * its prefixes kept; heard again (rx.c): it caches again */
	uint64_t last_rx; /* tsc of its last frame (away after away_ms of silence) */
	uint64_t batches_complete;
	uint64_t status_at;			 /* tsc of its latest STATUS */
	uint64_t status_uptime;			 /* its uptime_ns: an older STATUS is stale */
	uint64_t report_next; /* the report seq expected next (1 once up; version 2) */
	uint64_t status_reports; /* reports it had sent by its latest STATUS */
	bool report_ack_due;  /* reports came: REPORT_ACK after this poll */
	uint64_t stored[PREFIXCACHE_MAX_CACHES]; /* tokens it holds, by that STATUS */
	uint64_t l2_stored[PREFIXCACHE_MAX_CACHES];   /* in its second tier (version 2 STATUS) */
	uint64_t l2_capacity[PREFIXCACHE_MAX_CACHES];
	uint8_t hops; /* routers its STATUS crossed (PROTOCOL.md section 1: the rail) */
	bool routed_said; /* counted in routed_shards and said, once */
	/* Its second tier (l2.c): does it have one, and its inventory being listed. */
	bool has_l2;
	/* It reaches the shared level (STATUS bit 2): a model uses the level
	 * only while every shard of it does (shared.c, drv_sh_on). */
	bool has_shared;
	bool no_shared_said;
	bool inv_done;
	struct proto_l2col *inv;
	uint32_t inv_n, inv_cap, inv_total;
	/* Columns it let go (L2_GONE) while its inventory waits to be taken
	 * back, listed or not yet: adopt() takes none of them. */
	struct drv_gone *inv_gone;
	uint32_t inv_gone_n, inv_gone_cap;
};

/* ---- sink.c ------------------------------------------------------------------------ */

/*
 * lib/prefixcache's sink (prefixcache_sink.arg points here). Turns each
 * library call into records for every shard of the model it names; the
 * requester of a REFILL is the wafer sequence its sequence_id names.
 */
/*
 * The shared level as the sink reaches it: an ops table (shared.c's
 * drv_sh_sink_ops), so that the sink, which the library calls for every
 * column, names no function of the level's and holds nothing of it.
 */
struct drv_sink_shared_ops {
	/* Does a column sent down go up too (then @p o's object fields are
	 * set: SH_DOWN)? */
	bool (*down)(struct drv *d, uint16_t model, const struct prefixcache_l2col *c,
		     struct proto_l2col *o);
	/* A column just recorded whole (the rule "all" queues it). */
	void (*whole)(struct drv *d, uint16_t model, const struct prefixcache_l2col *c);
	/* A staged column's object, for SH_UP (false: not nameable now). */
	bool (*name)(struct drv *d, uint16_t model, const struct prefixcache_l2col *c,
		     struct proto_l2col *o);
	/* Does every shard of the model reach the level (drv_sh_on)? */
	bool (*on)(struct drv *d, uint16_t model);
};

struct drv_sink {
	/* Set at start, read-only after. */
	uint16_t nsh;
	uint16_t first_shard[PREFIXCACHE_MAX_MODELS], nshards[PREFIXCACHE_MAX_MODELS];
	struct drv_shard *sh;	    /* [nsh]: the queues it writes */
	const uint32_t *model_epoch; /* the driver's, per model (driver.c writes) */
	uint32_t payload_cap;	    /* largest UDP payload at the MTU */
	struct emu *emu;
	struct kvss_drv_stats *st; /* it writes deletes, too_big */
	FILE *expect;		   /* open loop: what each shard must send back (NULL: closed) */
	uint64_t wall_base_ns;	   /* wall clock (ns since 1970) at the library's time 0 (DRV_PAST_NS) */
	struct drv_l2wait **l2w;   /* columns sent down, L2_DONEs awaited (sink.c) */
	/* The shared level (NULL: none), and the driver its ops are called with. */
	const struct drv_sink_shared_ops *shl;
	struct drv *sh_drv;
	bool failed;		   /* out of memory: the run stops */
	uint8_t scratch[PROTO_PAYLOAD_MAX];
};

/** The callbacks, for prefixcache_create (arg: the drv_sink). */
void drv_sink_ops(struct drv_sink *s, struct prefixcache_sink *out);

/**
 * An L2_DONE of a column sent down came back fine: 1 when it was the last
 * one awaited (every shard, every cache: the library may serve it), 0 when
 * more are, -1 when none is (a model restarted since).
 */
int drv_sink_l2_written(struct drv_sink *s, uint16_t model, uint64_t iso, uint64_t key);
/** A column failed to go down: its L2_DONEs are no longer counted. */
void drv_sink_l2_drop(struct drv_sink *s, uint16_t model, uint64_t iso, uint64_t key);
/** Forget every awaited column of @p model (a restart), or of all (-1: the end, freed). */
void drv_sink_l2_clear(struct drv_sink *s, int model);

/** SH_DOWN of @p o to every shard of @p model (a column sent down later than recorded). */
void drv_sink_sh_down(struct drv_sink *s, uint16_t model, const struct proto_l2col *o);
/** An L2_DELETE record for shard @p sh alone (a column the others do not hold). */
void drv_sink_l2_delete_one(struct drv_sink *s, struct drv_shard *sh, const struct proto_l2del *d);

/** A header for a message to shard @p sh of @p type, in its model's epoch. */
void drv_hdr_for(struct proto_hdr *h, const struct drv_shard *sh, uint32_t epoch, uint8_t type);

/* ---- learn.c ------------------------------------------------------------------------ */

/* What refill_model "learned" knows of one model's refills. */
struct drv_model_learn {
	struct linfit fit; /* time (ns) from the lookup to its refills whole, by the bytes charged */
	struct ratioq rq;  /* those times over its line in force, unscaled (refill_short_pct) */
	double factor;	   /* its line's scale: 1, or from rq */
	/* Refills with hits from the second tier: what they took past the
	 * line above, by the bytes brought up from L2 (the L2 line). */
	struct linfit fit2;
	/* Those with hits staged from the shared level: what they took past
	 * both lines above, by the bytes brought up from there (its line). */
	struct linfit fit3;
	/* The same points, the last LINWIN of each: the lines the estimates
	 * take (linfit.h says why not the whole run's). The fits above are
	 * what the summary reports, for an operator to configure. */
	struct linwin win, win2, win3;
	/* win's line when last refitted (line_ok: it has been), unscaled. */
	bool line_ok;
	double lat_ns, ns_per_byte;
};

/* The refill-time histogram's bounds (/swdriver/refill_latency), us: 1-2-5 from 10 us to 1 s. */
#define DRV_REFILL_BUCKETS 16
/* Time to first token by bucket: 1 ms to 60 s, 1, 2, 5 per decade (ttft.c). */
#define DRV_TTFT_BUCKETS 15
extern const uint32_t drv_ttft_le_us[DRV_TTFT_BUCKETS];
extern const uint32_t drv_refill_le_us[DRV_REFILL_BUCKETS];

/* Refill times against estimates. All written by learn.c; reports read them. */
struct drv_learn {
	struct prefixcache *pc;	   /* the estimates it updates */
	struct kvss_drv_stats *st; /* it writes model_updates, model_short */
	bool learned;		   /* refill_model "learned": estimates follow the fit */
	unsigned int short_pct;	   /* refill_short_pct: scale for this share of refills short */
	struct linfit fit;  /* a sequence's refill time (ns) by the bytes of its longest estimate */
	uint64_t learned_at; /* refills seen when a model first took the fit (0: not yet) */
	struct drv_model_learn ml[PREFIXCACHE_MAX_MODELS];
	uint64_t late_ns, early_ns; /* refill time past its estimate, and short of it, summed */
	/*
	 * With refill_short_pct, the same refills against both estimates as
	 * each came (once a line is fitted): the line, and the line scaled by
	 * the factor then in force. The scale's effect within one run, under
	 * one machine's load (a share compared across two runs is not).
	 */
	uint64_t line_timed, line_short, line_short_scaled;
	uint32_t *lat_us, *est_us;  /* each sequence's refill time and estimate */
	size_t nlat, latcap;
	/* The same times by bucket: hist[i] those in (le_us[i - 1], le_us[i]],
	 * hist[DRV_REFILL_BUCKETS] those past every bound; and their sum. */
	uint64_t hist[DRV_REFILL_BUCKETS + 1], hist_sum_ns;
	uint64_t shared_updates; /* times the estimates took the shared level's fitted line */
};

void drv_learn_init(struct drv_learn *l, struct prefixcache *pc, struct kvss_drv_stats *st,
		    bool learned, unsigned int short_pct);
void drv_learn_free(struct drv_learn *l);

/**
 * Model @p m's refills of one sequence were whole after @p ns, for @p bytes
 * charged, @p l2_bytes of them brought up, @p shared_bytes of those staged
 * from the shared level: with none brought up, a point of the model's
 * line; with some from the shards' disks only, what it took past that line
 * a point of the L2 line; with some from the shared level, what it took
 * past both a point of the shared level's line (each taken by the
 * library's estimates from 20 refills on).
 */
void drv_learn_model(struct drv_learn *l, uint16_t m, uint64_t ns, uint64_t bytes, uint64_t l2_bytes,
		     uint64_t shared_bytes);

/** A sequence's refills were all whole after @p ns; its longest estimate. */
void drv_learn_seq(struct drv_learn *l, uint64_t ns, uint64_t est_ns, uint64_t est_bytes);

/**
 * The line fitted so far: *@p lat_ns plus *@p ns_per_byte for each byte
 * charged. -1 under 20 refills or with one size only. When the times do
 * not grow with the bytes (a fixed wait swamps the transfer), no bandwidth
 * can be told: the slope is 0 and the latency is their mean time.
 */
int drv_learn_line(const struct linfit *f, double *lat_ns, double *ns_per_byte);

/** The same for a window's robust line (linfit.h): the line the estimates take. */
int drv_learn_wline(const struct linwin *w, double *lat_ns, double *ns_per_byte);

/** The same in the configuration's units (refill_latency_us, refill_gbps; 0: no bound). */
int drv_learn_fit(const struct linfit *f, double *lat_us, double *gbps);

/* ---- link.c --------------------------------------------------------------------------- */

#define DRV_TXQ_MAX 64
/*
 * Control frames wait in a queue of their own, sent before any data: a
 * REFILL does not queue behind megabytes of evicted bytes, and a full data
 * queue never drops one. What waits here is bounded by two windows per
 * stream (drv_link_pump_streams): room for four shards on one port.
 */
#define DRV_CTLQ_MAX (8 * PROTO_STREAM_WINDOW_MAX)

struct drv_txq {
	struct rte_mbuf *m[DRV_TXQ_MAX];  /* data */
	struct rte_mbuf *c[DRV_CTLQ_MAX]; /* control, first */
	uint16_t n, nc;
};

/* The driver's ports. All written by link.c. */
struct drv_link {
	uint16_t ports[DRV_MAX_PORTS], nports;
	uint16_t nrxq[DRV_MAX_PORTS];	     /* RX queues configured: each is polled */
	uint8_t port_stopped[DRV_MAX_PORTS]; /* a restart failed: no bursts until one works */
	uint64_t down_since[DRV_MAX_PORTS];  /* tsc its link was first seen down (0: up) */
	uint32_t down_restarts[DRV_MAX_PORTS]; /* restarts since it went down (said at 1, 2, 4...) */
	struct drv_txq txq[DRV_MAX_PORTS];
	struct kvss_drv_stats *st; /* it writes the tx_*, hellos, evict_*, no_mbuf counters */
	bool open_loop;		   /* recording: what is pushed counts as acknowledged */
	uint32_t lose_data_every;  /* wafer.lose_data_every: withhold every Nth data frame */
	uint64_t data_count;	   /* EVICT_DATA frames made */
	const uint32_t *model_epoch; /* each model's driver epoch: EVICT_DATA's stream (v2) */
	bool failed;		   /* out of memory: the run stops */
};

/** Take @p port on (once). 0, or -1 (too many ports, or no such port). */
int drv_link_add_port(struct drv_link *L, uint16_t port);

/** The index of @p port among the link's, or -1. */
int drv_link_slot(const struct drv_link *L, uint16_t port);

/** Send what waits on each port, control frames first. */
void drv_link_flush(struct drv_link *L);

/** Frames queued for @p port, control and data. */
uint32_t drv_link_queued(const struct drv_link *L, uint16_t port);

/** A control payload to shard @p sh, now (a HELLO, or a message of its stream). */
void drv_link_send_ctl(struct drv_link *L, const struct drv_shard *sh, const uint8_t *p,
		       uint32_t len);

/** HELLO to @p sh with @p epoch (the model's). */
void drv_link_hello(struct drv_link *L, struct drv_shard *sh, uint32_t epoch, uint64_t tsc);

/** Push what each shard's window allows; resend what is due. */
void drv_link_pump_streams(struct drv_link *L, struct drv_shard *sh, uint16_t nsh, uint64_t tsc);

/**
 * Send each shard's EVICT_DATA from the emulator, as far as its EVICTs have
 * gone out and run (DRV_DATA_AHEAD); returns the frames sent.
 */
int drv_link_pump_data(struct drv_link *L, struct emu *emu, struct drv_shard *sh, uint16_t nsh);

/** An ACK for @p sh: its stream takes it, EVICTs it covers ran. */
void drv_link_ack(struct drv_shard *sh, uint64_t cum_seq, uint64_t recv_seq, uint64_t tsc);

/** @p sh's stream starts over (a new epoch): nothing queued or in flight. */
void drv_link_reset(struct drv_shard *sh);

/**
 * Restart ports whose link has been down for a second (a memif client
 * connects when its port starts); @p went_down (with @p arg) is called once for each
 * shard on a port whose link is first seen down, @p came_up (may be NULL)
 * once for each shard on a port whose link is up again after that.
 */
void drv_link_watch(struct drv_link *L, struct drv_shard *sh, uint16_t nsh, uint64_t tsc,
		    void (*went_down)(void *arg, struct drv_shard *sh, uint64_t tsc),
		    void (*came_up)(void *arg, struct drv_shard *sh, uint64_t tsc), void *arg);

void drv_link_free(struct drv_link *L);

/* ---- report.c ------------------------------------------------------------------------- */

/** Counters derived when read (streams, the fitted model, late / early / held). */
void drv_report_derive(struct drv *d);

/* ttft.c: the time to first token, its percentiles derived when read (the
 * snapshot's, the summary's), and the summary's line and JSON fields. */
struct drv_ttft_figures {
	/* [i]: times in (drv_ttft_le_us[i - 1], drv_ttft_le_us[i]]; the last,
	 * those past every bound. */
	uint64_t hist[DRV_TTFT_BUCKETS + 1];
	uint64_t sum_us, p50_us, p90_us, p99_us; /* percentiles by lib/percentile's rule */
};
/** The times @p v[0..n), us, in any order, as figures into *@p f. 0, or -ENOMEM. */
int drv_ttft_figures(const uint64_t *v, size_t n, struct drv_ttft_figures *f);
void drv_ttft_derive(struct drv *d);
void drv_ttft_summary(struct drv *d, char *json, size_t cap);
/**
 * The calling thread's time waiting for a CPU while runnable, ns, since
 * it began (the second field of /proc/thread-self/schedstat): what other
 * processes on its core took from it. UINT64_MAX where the kernel does not
 * say (no schedstat, a line that is not three numbers, no run time).
 */
uint64_t drv_cpu_wait_ns(void);
/**
 * The same from a schedstat line @p text: 0 and *@p wait_ns, or -EINVAL
 * (not three numbers, or no run time counted).
 */
int drv_schedstat_wait(const char *text, uint64_t *wait_ns);
/** The share of the run the control lcore waited for a CPU, in [0, 1]; -1 where unknown. */
double drv_cpu_wait_share(const struct drv *d);

/** Copy what telemetry shows (the control lcore, every 100 ms). */
void drv_report_snapshot(struct drv *d);

/** One progress line. */
void drv_report_progress(struct drv *d, uint64_t tsc);

/* ---- driver.c: the state every part is a piece of (passed as struct drv *d) --------- */

struct drv {
	struct prefixcache *pc;
	struct emu *emu;
	struct workload wl;
	size_t nreq;
	uint64_t *arrival_ns; /* [nreq] when each request arrives (wafer.arrivals), or NULL: a closed loop */
	size_t ttft_derived;  /* times to first token the TTFT percentiles were last made from */
	/* The same by bucket (ttft.c, drv_ttft_le_us): [i] those in
	 * (le_us[i - 1], le_us[i]], [DRV_TTFT_BUCKETS] those past every bound;
	 * and their sum, us: /swdriver/ttft, the exporter's histogram. */
	uint64_t ttft_hist[DRV_TTFT_BUCKETS + 1], ttft_sum_us;
	uint16_t nsh;
	struct drv_shard *sh; /* [nsh] */
	uint16_t first_shard[PREFIXCACHE_MAX_MODELS], nshards[PREFIXCACHE_MAX_MODELS];
	uint32_t model_epoch[PREFIXCACHE_MAX_MODELS]; /* a new one at every restart of the model */
	struct drv_link link;
	struct drv_sink sink;
	struct drv_learn learn;
	struct kvss_drv_stats st; /* every part writes its own counters (driver.h) */
	uint64_t hz, t_start, t_end;
	/* The control lcore's time waiting for a CPU (drv_cpu_wait_ns()) at
	 * the run's start and end: how far another process starved the
	 * wafer emulator. UINT64_MAX: the kernel does not say. Each with the
	 * TSC it was read at (the run's end may be moved back to when the
	 * shards had it all). */
	uint64_t cpu_wait_start, cpu_wait_end, cpu_wait_tsc[2];
	uint64_t wafer_held_at; /* TSC the wafer stopped at (wafer_step), 0: running */
	bool started, finished, open_loop;
	int fatal;
	bool plot_failed; /* --plot-refills or --ttft-out not written: exit status 2 (report.c) */
	uint64_t settle_at; /* tsc when the shards had every batch complete (quiet) */
	/* The TSC and CLOCK_MONOTONIC read together (every 100 ms, driver.c):
	 * what of a gap the monotonic clock did not see is a jump of the TSC. */
	uint64_t clk_tsc, clk_mono_ns;
	/* Model 0's requests, prompt and hit tokens when a shard was first
	 * away, and when one last came back: the hit ratio before and after. */
	uint64_t away_at[3], back_at[3];
	bool l2_pending[PREFIXCACHE_MAX_MODELS]; /* inventories to take back (l2.c) */
	/*
	 * After a column failed to go down on one shard (cache), the others
	 * are told to let it go; one whose own L2_DOWN of it failed too
	 * answers that L2_DELETE with UNKNOWN_PROMPT, which is expected: the
	 * (shard, key) pairs here (l2.c writes them).
	 */
	struct drv_tolerated {
		uint16_t k;
		uint64_t key;
	} *tolerate;
	size_t ntolerate, tolerate_cap;
	struct drv_shl *shl; /* the shared level's state (shared.c; NULL before drv_sh_open) */
	char source[KVSS_PATH_MAX + 64];
	struct proto_msg msg;
	uint8_t scratch[PROTO_PAYLOAD_MAX];
};

/*
 * The library's time 0 lies a year before the run's start (wall_base_ns
 * too): a column first used before the run (found in the shared level,
 * kept on a shard's disk) keeps its first use. With time 0 at the start,
 * those were all taken as first used at the start: their TTLs ran from
 * then, and a slice of the shared level, put back to a shard against that
 * later first use, was refused as older than its record (STALE) once the
 * run was a minute past its writer's. (The library's ticks of 100 ms in 32
 * bits leave a run 12 years from there.)
 */
#define DRV_PAST_NS (365ull * 24 * 3600 * 1000000000ull)

/** Nanoseconds of the library's clock at @p tsc: the run's, plus DRV_PAST_NS. */
static inline uint64_t
drv_now_ns(struct drv *d, uint64_t tsc)
{
	/* Through a double, not mono_ticks_to: this runs per poll and per
	 * REFILL_DATA frame, where the exact sum's two 64-bit divisions cost
	 * 6 ns against 1.2 (measured here), and a double is exact to the ns
	 * for 2^53 ns, 104 days of a run. */
	return DRV_PAST_NS + (uint64_t)((double)(tsc - d->t_start) * 1e9 / (double)d->hz);
}

/* ---- report.c: the verdict ---- */

/** Tokens a shard holds against what the driver accounts for (after the run). */
uint64_t drv_unaccounted(struct drv *d, bool say);
/** The same whether or not the run finished: the shards' last STATUS against the account. */
uint64_t drv_account_off(struct drv *d, bool say);
/** The same for their second tiers: tokens off, over the shards that have one. */
uint64_t drv_l2_account_off(const struct drv *d);

/** Protocol errors the run counted (as of the last drv_report_derive()). */
uint64_t drv_protocol_errors(struct drv *d);

/* ---- epoch.c ---- */

/**
 * A shard of @p model lost what it held: the model's prefixes go, it takes
 * a new driver epoch and all its shards start over with it; @p why said
 * (unless NULL), @p count counted.
 */
void drv_model_restart(struct drv *d, uint16_t model, uint64_t tsc, const char *why,
		       const struct drv_shard *who,
		       uint64_t *count);

/** Shard @p sh's state left the driver's: with on_loss "resync", the model restarts (1). */
int drv_resync(struct drv *d, struct drv_shard *sh, uint64_t tsc, const char *why);

/* ---- l2.c: the shards' second tiers ---- */

/** Wall-clock time, ns since 1970 (first use on disk outlives a run). */
static inline uint64_t
drv_wall_ns(void)
{
	return shared_wall_ns();
}

/** The run starts at @p tsc: its clock, and the wall clock at the library's time 0 (DRV_PAST_NS before). */
static inline void
drv_clock_start(struct drv *d, uint64_t tsc)
{
	d->t_start = tsc;
	d->sink.wall_base_ns = drv_wall_ns() - DRV_PAST_NS;
}
/**
 * The loop did not run from TSC @p from to @p to, of which @p jump ticks
 * (at most to - from) are a jump of the TSC that CLOCK_MONOTONIC did not
 * see (driver.c).
 */
void drv_absent(struct drv *d, uint64_t from, uint64_t to, uint64_t jump);
/**
 * The loop's turns at TSC @p prev and @p t0 are DRV_ABSENT_MS or more
 * apart (driver.c): this process did not run. Started, drv_absent(); before
 * the start, the shards' time to answer HELLO (@p start_deadline, TSC)
 * moves on by the gap, so that a driver stopped while it waited does not
 * give up on shards that answered meanwhile.
 */
void drv_gap(struct drv *d, uint64_t prev, uint64_t t0, uint64_t *start_deadline);
/** Does model @p m have a second tier (l2_tokens)? */
bool drv_l2_model(uint16_t m);
/** Has every shard of @p m listed its inventory (true without a second tier)? */
bool drv_l2_ready(struct drv *d, uint16_t m);
/** A STATUS answering our HELLO: does the shard have the tier its model needs? */
void drv_l2_status(struct drv *d, struct drv_shard *sh, const struct proto_msg *msg);
/** @p sh answers a new HELLO: its inventory is listed again. */
void drv_l2_forget_inventory(struct drv_shard *sh);
void drv_l2_inventory(struct drv *d, struct drv_shard *sh, const struct proto_msg *msg,
		      uint64_t tsc);
/**
 * L2_DONE records from @p sh taken in, every one of the frame. A column that
 * did not come up costs that column: its tokens come as TOKEN_LOST (the
 * column and what hangs on it go, on_loss "exact"), the tier forgets it.
 */
void drv_l2_done(struct drv *d, struct drv_shard *sh, const struct proto_msg *msg);
/* ---- shared.c: the shared level ---- */

/*
 * What the driver's shared level counts, each once: the struct, the
 * telemetry endpoint /swdriver/shared (every one, by its name), and through
 * it the exporter and docs/telemetry.md (scripts/telemetry-doc.py reads the
 * comments) are made from this list.
 */
#define DRV_SH_STATS(X)                                                                             \
	X(unavailable)		/* 1: marked unavailable after failures for the op timeout (no lookups, no writes) */ \
	X(unavailable_times)	/* times it was marked so */                                        \
	X(available_again)	/* times it worked again after */                                   \
	X(generation)		/* the generation followed */                                       \
	X(generations_seen)	/* generation changes followed (resets seen) */                     \
	X(lookups)		/* lookups begun: a request's columns past what the driver holds */ \
	X(lookup_cols)		/* columns looked up */                                             \
	X(lookup_found_cols)	/* of them, found (checked, not expired) */                         \
	X(found_expired)	/* records found past their organization's TTLs (not used) */       \
	X(lookups_late)		/* lookups still out at the deadline (the request went on without them) */ \
	X(lookups_abandoned)	/* lookups given up before the deadline: computing their columns would have been done */ \
	X(lookup_late_cols)	/* columns whose record came after their request started */          \
	X(lookups_skipped)	/* requests that went without a lookup: its slot's reads still out */ \
	X(lookups_busy)		/* record reads not begun: the cluster's queue full */              \
	X(lookups_no_generation) /* lookups given up at the deadline: the organization's generation unread */ \
	X(lookup_errors)	/* record reads that failed (a missing record is not one) */        \
	X(started)		/* requests started past the shared level's lookups */              \
	X(waits)		/* of them, held back for their lookups */                          \
	X(wait_us)		/* the time they were held back, summed */                          \
	X(staged_cols)		/* columns found, checked and staged for SH_UP */                   \
	X(down_cols)		/* columns sent to the shared level (SH_DOWN) */                    \
	X(down_slices)		/* slices the shards wrote */                                       \
	X(down_failed)		/* slices a shard did not write (SH_DOWN answered with a failure) */ \
	X(down_keyless)		/* of them, names a shard kept another's slice under, sealed under a key its store does not make (SHARED_KEY): the column not sent down again this generation */ \
	X(down_keyless_skipped)	/* columns kept local: a shard kept another's slice of it (SHARED_KEY) */ \
	X(down_busy)		/* columns kept local: too many awaited their slices */             \
	X(down_no_generation)	/* columns kept local: their organization's generation unread */   \
	X(down_no_parent)	/* columns kept local: their parent neither written nor found */    \
	X(down_gone)		/* columns freed or replaced before their slices were written */    \
	X(down_unmatched)	/* slices answered for a column already given up */                 \
	X(down_restart)		/* columns on their way up given up when their model restarted (never answered) */ \
	X(records_written)	/* column records written (every shard wrote its slices) */         \
	X(records_failed)	/* records whose write failed */                                    \
	X(records_busy)		/* records not written: too many writes out */                      \
	X(records_bad)		/* records read that failed their checks (deleted) */               \
	X(records_deleted)	/* records deleted: bad, or a slice of theirs missing or bad */     \
	X(up_failed)		/* slices a shard did not bring up (SH_UP failed: their tokens lost) */ \
	X(slices_bad)		/* of them, slices that failed their checks (SHARED_BAD: the record deleted) */ \
	X(slices_missing)	/* of them, slices not in the cluster (UNKNOWN_PROMPT: the record deleted) */ \
	X(up_keyless)		/* slices refused as sealed under a key the shard's store does not make (SHARED_KEY): the record kept, the column not asked for again this generation */ \
	X(keyless_skipped)	/* lookups that found such a column and staged neither it nor what follows it */ \
	X(up_failed_kept)	/* missing or bad slices whose record was left alone: read just after a generation changed, it may name another column's record */ \
	X(generation_refused)	/* generation reads refused: lower than the highest read, absent where a higher one was read, or not a generation (the highest is kept) */ \
	X(generation_bad)	/* of them, generation objects that are not a generation (garbage, 4294967295) */ \
	X(orgs_full)		/* organizations not followed: the table of their generations full */ \
	X(op_timeouts)		/* cluster operations past the op timeout (shared.op_timeout_ms) */ \
	X(ops_busy)		/* cluster operations not begun: as many in flight as shared.depth */ \
	X(off_at_start)		/* 1: not used by this run: at start its global generation was not a generation, or below one its records were written under (kvss-shared gen --repair) */

/** What the driver's shared level counted (report.c shows them). */
struct drv_sh_stats {
#define DRV_SH_FIELD(n) uint64_t n;
	DRV_SH_STATS(DRV_SH_FIELD)
#undef DRV_SH_FIELD
	uint64_t bad[SHARED_BAD_COUNT]; /* records refused, by reason (/swdriver/shared: records_bad_*) */
};

/** Connect (shared = { ... }); 0 when not configured. -1: @p err names the key. */
int drv_sh_open(struct drv *d, char *err, size_t errlen);
void drv_sh_close(struct drv *d);
/** First used at wall-clock @p first_wall: past organization @p iso's TTLs at @p now? */
bool drv_expired_wall(uint64_t iso, uint64_t first_wall, uint64_t now);
/** Does model @p m use the shared level now? */
bool drv_sh_on(struct drv *d, uint16_t m);

/** The shared level's ops for the sink (drv_sink.shl). */
extern const struct drv_sink_shared_ops drv_sh_sink_ops;
/** Completions, the generations again when due. */
void drv_sh_poll(struct drv *d, uint64_t now_ns);
/** May request @p req start (its lookups back or late)? Begins the lookups of the next ones. */
bool drv_sh_request_ready(struct drv *d, uint32_t req, uint64_t now_ns);
/** What drv_sh_sink_ops calls (drv_sink.shl). */
bool drv_sh_down(struct drv *d, uint16_t m, const struct prefixcache_l2col *c,
		 struct proto_l2col *o);
void drv_sh_whole(struct drv *d, uint16_t m, const struct prefixcache_l2col *c);
bool drv_sh_name(struct drv *d, uint16_t m, const struct prefixcache_l2col *c,
		 struct proto_l2col *o);
/**
 * An L2_DONE of op 3 or 4 from @p sh. A slice that did not come up costs its
 * column (its tokens come as TOKEN_LOST); a missing or bad one also its
 * record, so that no replica asks for it again.
 */
void drv_sh_done(struct drv *d, struct drv_shard *sh, const struct proto_l2done *done);
/** @p m restarts: the SH_DOWNs its shards had will not be answered, nor its queued ones sent. */
void drv_sh_model_restart(struct drv *d, uint16_t m);
const struct drv_sh_stats *drv_sh_stats(struct drv *d);
/**
 * Is anything of the shared level still on its way (columns queued to go
 * up, slices' answers awaited, records being written)? False past
 * op_timeout_ms of waiting: a cluster that does not answer does not hold
 * the run's end.
 */
bool drv_sh_busy(struct drv *d, uint64_t now_ns);
/**
 * The driver did not run for @p ns (driver.c, drv_absent): what the
 * shared level owes is not later by it.
 */
void drv_sh_absent(struct drv *d, uint64_t ns);
/** The lookups' cost (sent to back or abandoned), p50 and p99, ns. */
void drv_sh_lookup_pct(struct drv *d, uint64_t *p50, uint64_t *p99);
/** What they held requests back at their start, over every request started: p50, p99, ns. */
void drv_sh_wait_pct(struct drv *d, uint64_t *p50, uint64_t *p99);

/** Is ERROR UNKNOWN_PROMPT for @p key from @p sh the answer to an L2_DELETE sent after a failure? */
bool drv_l2_expected_unknown(struct drv *d, const struct drv_shard *sh, uint64_t key);
/** A model restarts (its old stream's answers will not come): forget what was expected (UINT16_MAX: all, freed). */
void drv_l2_forget_tolerated(struct drv *d, uint16_t model);
/** Models whose inventories are all in: their columns are taken back (once per restart). */
void drv_l2_adopt_ready(struct drv *d, uint64_t tsc);

/* ---- rx.c ---- */

/** One frame from a shard (the caller frees it). */
void drv_receive(struct drv *d, struct rte_mbuf *mb, uint64_t tsc);

#endif
