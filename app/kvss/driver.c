/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The driver role: the control lcore runs lib/prefixcache for every model,
 * one control stream per (model, shard) with sequence numbers, cumulative
 * ACKs and retransmission (proto_stream), and the wafer emulator:
 *
 *  - requests come from a trace (or the built-in workload); each begins with
 *    a lookup on every model, which emits REFILLs and a RESERVE; a sequence
 *    with a refill resumes only when every shard's REFILL_DATA for it is
 *    whole and checked byte by byte against the reference content of the
 *    sequence's own prefix (the design's start_recv/wait_recv), and (as
 *    the design picks it again only then) its estimate has passed;
 *  - every token sent goes through prefixcache_token(); the EVICT batches it
 *    emits go to every shard of the model, and their bytes follow as
 *    EVICT_DATA, each shard its own slice (its bytes per token);
 *  - STATUS, ACK, ERROR, REFILL_DONE and TOKEN_LOST come back and are fed to
 *    the library; expiry cleanup runs between bursts.
 *
 * Epochs. Every model has its own driver epoch. When a shard restarts (a new
 * shard epoch, or a STATUS that no longer names our epoch), everything the
 * model cached is gone as far as the driver can prove: prefixcache drops the
 * model's prefixes, the model takes a new driver epoch and says HELLO to all
 * its shards again, so they all forget the old data and count seq and
 * batch_no from 1 together.
 *
 * The wafer emulator shares the control lcore: on this project's machines
 * the three processes of the demo share two cores, and one lcore per role
 * keeps them from starving each other. It sends data only for batches whose
 * EVICT has left (so a shard never holds data past its batch timeout
 * because the EVICT waited for the window).
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <rte_cycles.h>
#include <rte_ethdev.h>
#include <rte_lcore.h>
#include <rte_malloc.h>
#include <rte_mbuf.h>
#include <rte_random.h>
#include <rte_spinlock.h>
#include <rte_telemetry.h>

#include "driver.h"
#include "kvss.h"
#include "linfit.h"
#include "prefixcache.h"
#include "proto_stream.h"
#include "wafer.h"
#include "workload.h"

#define DRV_MAX_SHARDS (PREFIXCACHE_MAX_MODELS * KVSS_MAX_SHARDS)
#define DRV_MAX_PORTS 32
#define BURST 32
#define TXQ_MAX 64
/*
 * Control frames wait in a queue of their own, sent before any data: a
 * REFILL does not queue behind megabytes of evicted bytes, and a full data
 * queue never drops one. What waits here is bounded by two windows per
 * stream (pump_streams): room for four shards on one port.
 */
#define CTLQ_MAX (8 * PROTO_STREAM_WINDOW_MAX)
#define HBUCKETS 4096
#define MAX_REC_PER_SEQ (PREFIXCACHE_MAX_MODELS * PREFIXCACHE_MAX_CACHES)
/* Backpressure: stop sending tokens while this much waits to go out. */
#define BACKLOG_HIGH 256
#define JOBS_HIGH 32
/*
 * A batch's data goes out once the EVICT this many batches before it has run
 * at the shard (its ACK came): a shard whose EVICTs wait for space is not
 * sent data it can only hold (and drop after the batch timeout).
 */
#define DATA_AHEAD 4

/* A control message waiting for room in its stream's window. */
struct ctl_msg {
	struct ctl_msg *next;
	uint64_t batch_no; /* EVICT: its batch; else 0 */
	uint32_t len;
	uint8_t p[];
};

struct drv_shard {
	uint16_t model, idx; /* idx: position in the model's shard list */
	const struct kvss_shard_ref *ref;
	struct proto_addr ctrl, evict;
	struct proto_stream stream;
	uint32_t epoch; /* the shard's (from its frames); 0: not up */
	int up;		/* answered our HELLO with our epoch */
	uint64_t hello_at;
	uint64_t last_rx; /* tsc of its last frame (away after away_ms of silence) */
	uint16_t num_buffers[PREFIXCACHE_MAX_CACHES]; /* from its STATUS */
	struct ctl_msg *head, *tail;
	uint32_t backlog;
	int open_on;
	struct proto_builder open;
	uint8_t open_buf[PROTO_PAYLOAD_MAX];
	struct data_job *jcur; /* the batch whose data this shard sends now (NULL: find it) */
	uint16_t jcache;
	int jw_on;
	struct wafer_evict jw;
	uint64_t evict_sent;  /* highest batch whose EVICT has gone out */
	uint64_t evict_acked; /* highest batch whose EVICT an ACK covers: it ran */
	uint64_t ev_seq[PROTO_STREAM_WINDOW_MAX], ev_batch[PROTO_STREAM_WINDOW_MAX];
	uint32_t ev_head, ev_tail; /* EVICTs sent and not yet acknowledged */
	uint64_t batches_complete;
	uint64_t status_at;			       /* tsc of its latest STATUS */
	uint64_t stored[PREFIXCACHE_MAX_CACHES];       /* tokens it holds, by that STATUS */
};

/*
 * One batch's EVICT_DATA, for every shard of its model. Each shard walks the
 * job list at its own pace (drv_shard.jcur), so a shard that is slow or down
 * never holds back another's data; a job goes when every shard is done.
 */
struct data_job {
	struct data_job *next;
	uint16_t model, nc, g;
	uint32_t epoch; /* the model's when made: a restart drops it */
	uint64_t batch_no;
	uint32_t done_mask, all_mask; /* shards (by index in the model) done with it */
	uint64_t hash[];	      /* hash[c * g + t] */
};

struct drv_seq;

/* One refill (one model, one cache) as every shard of the model sends it. */
struct drv_refill {
	struct drv_refill *hnext;
	uint64_t refill_id;
	struct drv_seq *seq; /* the requester, until finished */
	uint16_t model, cache_id, nshards;
	uint32_t ntok;
	uint32_t whole_mask, done_mask, fail_mask, all_mask;
	int finished;
	uint32_t glue_end; /* the last glued position + 1: must be the requester's hit */
	int glue_bad;	   /* a glued token would land in the wrong slot */
	uint64_t *hash; /* prefix hash of every glued token */
	struct wafer_refill chk[];
};

/*
 * SEQ_WAIT: its refills are not all finished. SEQ_HOLD (wafer.resume
 * "estimate"): they are, but its estimate has not passed, and the design
 * picks it again only then.
 */
enum { SEQ_FREE, SEQ_WAIT, SEQ_HOLD, SEQ_RUN };

struct drv_seq {
	int state;
	uint32_t slot;
	const struct wl_req *q;
	struct prefixcache_seq *s[PREFIXCACHE_MAX_MODELS];
	uint64_t prompt_id[PREFIXCACHE_MAX_MODELS];
	uint32_t pos[PREFIXCACHE_MAX_MODELS];
	uint32_t *tok;
	uint64_t *h;
	uint32_t total;
	uint32_t wait; /* refills not finished */
	struct drv_refill *rec[MAX_REC_PER_SEQ];
	uint32_t nrec;
	uint64_t t0, deadline, estimate_ns;
	uint64_t estimate_bytes; /* what the model charges for the refill it estimates longest */
	uint64_t whole_ns;	 /* when its refills finished (SEQ_HOLD) */
	/* Per model: refills not finished, one of them failed (its time says
	 * nothing of the model), the bytes it charged. */
	uint32_t mwait[PREFIXCACHE_MAX_MODELS];
	uint8_t mfailed[PREFIXCACHE_MAX_MODELS];
	uint64_t mbytes[PREFIXCACHE_MAX_MODELS];
};

/* What refill_model "learned" knows of one model's refills. */
struct model_learn {
	struct linfit fit; /* time (ns) from the lookup to its refills whole, by the bytes charged */
	struct ratioq rq;  /* those times over what its fitted line said (refill_short_pct) */
	double factor;	   /* its line's scale: 1, or from rq */
};

struct pid_node {
	struct pid_node *next;
	uint64_t prompt_id;
	struct drv_seq *seq;
};

struct txq {
	struct rte_mbuf *m[TXQ_MAX];   /* data */
	struct rte_mbuf *c[CTLQ_MAX];  /* control, first */
	uint16_t n, nc;
};

/* A shard and its control stream, as /swdriver/shards shows them (u64 each). */
#define SHARD_SNAP_FIELDS(X)                                                                       \
	X(model) X(shard_id) X(port) X(up) X(epoch) X(seq_sent) X(seq_acked) X(backlog)            \
	X(retransmits) X(rtt_samples) X(stale_acks) X(bogus_acks) X(srtt_us) X(timeout_us)         \
	X(evict_sent) X(evict_acked) X(batches_complete) X(stored_tokens)                         \
	X(model_refills_timed) X(model_estimate_latency_us) X(model_estimate_mbps)
#define SHARD_SNAP_DECL(n) uint64_t n;
struct shard_snap {
	SHARD_SNAP_FIELDS(SHARD_SNAP_DECL)
	uint64_t heard_ms_ago, status_ms_ago; /* UINT64_MAX: never */
};
#undef SHARD_SNAP_DECL

struct snapshot {
	rte_spinlock_t lock;
	struct kvss_drv_stats st;
	struct prefixcache_stats pc;
	struct prefixcache_org_stats org[KVSS_MAX_ORGS + 64];
	size_t norg;
	struct shard_snap sh[DRV_MAX_SHARDS];
	uint16_t nsh;
};

static struct {
	struct prefixcache *pc;
	struct workload wl;
	size_t nreq, next_req;
	uint16_t nsh;
	struct drv_shard *sh; /* [nsh] */
	uint16_t first_shard[PREFIXCACHE_MAX_MODELS], nshards[PREFIXCACHE_MAX_MODELS];
	uint32_t model_epoch[PREFIXCACHE_MAX_MODELS];
	uint16_t ports[DRV_MAX_PORTS], nports;
	uint16_t nrxq[DRV_MAX_PORTS]; /* RX queues configured: each is polled */
	uint8_t port_stopped[DRV_MAX_PORTS]; /* a restart failed: no bursts until one works */
	struct txq txq[DRV_MAX_PORTS];
	struct data_job *jhead, *jtail;
	uint32_t njobs;
	struct drv_seq *seq; /* [max_inflight] */
	uint32_t nactive;
	struct pid_node *pid[HBUCKETS];
	struct drv_refill *rf[HBUCKETS];
	uint32_t nrefill;
	struct drv_seq *cur; /* the sequence being begun: its REFILLs are checked against it */
	uint64_t hz, t_start, t_end;
	int started, finished, fatal;
	struct kvss_drv_stats st;
	uint32_t *lat_us, *est_us;
	size_t nlat, latcap;
	struct linfit fit; /* a sequence's refill time (ns) by the bytes of its longest estimate */
	uint64_t learned_at; /* refills seen when a learned model first took the fit (0: not yet) */
	struct model_learn ml[PREFIXCACHE_MAX_MODELS];
	/* Refill time against estimate, summed: past it, before it; and the time
	 * sequences whose data was whole waited for their estimate. */
	uint64_t late_ns, early_ns, held_ns;
	struct proto_msg msg;
	uint8_t scratch[PROTO_PAYLOAD_MAX];
	struct snapshot snap;
	char source[KVSS_PATH_MAX + 64];
	/* Open loop (--record-expect): nothing is awaited; refills are written out. */
	int open_loop;
	FILE *expect;
	uint64_t ol_done[PREFIXCACHE_MAX_MODELS * PREFIXCACHE_MAX_CACHES * 4];
	uint32_t nol_done;
	uint64_t data_count; /* EVICT_DATA frames made (wafer.lose_data_every) */
	uint64_t settle_at;  /* tsc when the shards had every batch complete (quiet) */
} D;

static inline uint64_t
now_ns(uint64_t tsc)
{
	return (uint64_t)((double)(tsc - D.t_start) * 1e9 / (double)D.hz);
}

static inline uint32_t
hbucket(uint64_t id)
{
	return (uint32_t)((id * 0x9E3779B97F4A7C15ULL) >> 52);
}

/* ---- Lookups -------------------------------------------------------------------- */

static struct drv_seq *
seq_of_prompt(uint64_t prompt_id)
{
	struct pid_node *n;

	for (n = D.pid[hbucket(prompt_id)]; n != NULL; n = n->next)
		if (n->prompt_id == prompt_id)
			return n->seq;
	return NULL;
}

static void
pid_add(uint64_t prompt_id, struct drv_seq *s)
{
	struct pid_node *n = malloc(sizeof(*n));

	if (n == NULL)
		return;
	n->prompt_id = prompt_id;
	n->seq = s;
	n->next = D.pid[hbucket(prompt_id)];
	D.pid[hbucket(prompt_id)] = n;
}

static void
pid_del(uint64_t prompt_id)
{
	struct pid_node **pp = &D.pid[hbucket(prompt_id)];

	while (*pp != NULL && (*pp)->prompt_id != prompt_id)
		pp = &(*pp)->next;
	if (*pp != NULL) {
		struct pid_node *n = *pp;

		*pp = n->next;
		free(n);
	}
}

static struct drv_shard *
shard_of(uint32_t model, uint16_t id)
{
	uint16_t i;

	if (model >= PREFIXCACHE_MAX_MODELS || model >= kvss.cfg.driver.pc.num_models)
		return NULL;
	for (i = 0; i < D.nshards[model]; i++)
		if (D.sh[D.first_shard[model] + i].ref->id == id)
			return &D.sh[D.first_shard[model] + i];
	return NULL;
}

static struct drv_refill *
refill_of(uint64_t id)
{
	struct drv_refill *r;

	for (r = D.rf[hbucket(id)]; r != NULL; r = r->hnext)
		if (r->refill_id == id)
			return r;
	return NULL;
}

static void
refill_unlink(struct drv_refill *r)
{
	struct drv_refill **pp = &D.rf[hbucket(r->refill_id)];

	while (*pp != r)
		pp = &(*pp)->hnext;
	*pp = r->hnext;
	D.nrefill--;
}

/* ---- Sending -------------------------------------------------------------------- */

static int
port_slot(uint16_t port)
{
	uint16_t i;

	for (i = 0; i < D.nports; i++)
		if (D.ports[i] == port)
			return i;
	return -1;
}

static struct kvss_lcore_stats *
lst(void)
{
	return &kvss.stats[rte_lcore_id()];
}

static int
link_down(uint16_t port)
{
	struct rte_eth_link link;

	return rte_eth_link_get_nowait(port, &link) == 0 && !link.link_status;
}

/* Send the first @p *n frames of @p v on @p port; what it does not take stays, in order. */
static uint16_t
txq_send(uint16_t i, struct rte_mbuf **v, uint16_t *n)
{
	uint16_t sent = D.port_stopped[i] ? 0 : kvss_tx_burst(D.ports[i], 0, v, *n);

	if (sent < *n) {
		D.st.tx_retries++;
		memmove(v, v + sent, sizeof(v[0]) * (*n - sent));
	}
	*n = (uint16_t)(*n - sent);
	return sent;
}

/*
 * Send what waits on each port, control frames first; data only once no
 * control frame waits. What the port does not take stays, in order, unless
 * its link is down (then it is dropped).
 */
static void
txq_flush(void)
{
	uint16_t i;

	for (i = 0; i < D.nports; i++) {
		struct txq *q = &D.txq[i];
		uint16_t sent = 0;

		if (q->n == 0 && q->nc == 0)
			continue;
		if (q->nc > 0)
			sent = txq_send(i, q->c, &q->nc);
		if (q->nc == 0 && q->n > 0)
			sent += txq_send(i, q->m, &q->n);
		if (sent == 0 && link_down(D.ports[i])) {
			/*
			 * No peer (a memif shard that went away): these frames were
			 * for it. Streams resend their control messages; data is
			 * never resent. Kept, they would reach the shard that
			 * replaces it before it tells us its new epoch, and its
			 * data names batches of a stream that is gone.
			 */
			rte_pktmbuf_free_bulk(q->c, q->nc);
			rte_pktmbuf_free_bulk(q->m, q->n);
			D.st.tx_link_drops += q->nc + q->n;
			q->nc = q->n = 0;
		}
	}
}

/* Queue one frame for @p port: a data frame, or (@p ctl) a control frame. */
static void
send_frame(uint16_t port, struct rte_mbuf *m, uint32_t len, int ctl)
{
	int k = port_slot(port);
	struct txq *q;
	uint16_t *n, max;

	if (k < 0) {
		rte_pktmbuf_free(m);
		return;
	}
	q = &D.txq[k];
	n = ctl ? &q->nc : &q->n;
	max = ctl ? CTLQ_MAX : TXQ_MAX;
	if (*n == max)
		txq_flush();
	if (*n == max) {
		/* A control frame: the stream resends it; a data frame: never made. */
		rte_pktmbuf_free(m);
		lst()->tx_drops++;
		D.st.tx_full_drops += ctl;
		return;
	}
	(ctl ? q->c : q->m)[(*n)++] = m;
	lst()->tx_frames++;
	lst()->tx_bytes += len;
}

static void
send_ctl(struct drv_shard *sh, const uint8_t *p, uint32_t len)
{
	struct rte_mbuf *m = proto_mbuf_frame(kvss.pool, &sh->ctrl, p, len);

	if (m == NULL) {
		D.st.no_mbuf++;
		return;
	}
	send_frame(sh->ref->port, m, len, 1);
}

static void
hdr_for(struct proto_hdr *h, const struct drv_shard *sh, uint8_t type)
{
	memset(h, 0, sizeof(*h));
	h->version = PROTO_VERSION;
	h->type = type;
	h->model_id = sh->model;
	h->shard_id = sh->ref->id;
	h->epoch = D.model_epoch[sh->model];
}

static void
send_hello(struct drv_shard *sh, uint64_t tsc)
{
	struct proto_builder b;
	struct proto_hdr h;
	uint8_t buf[PROTO_HDR_LEN];

	hdr_for(&h, sh, PROTO_T_HELLO);
	proto_build_begin(&b, buf, sizeof(buf), &h);
	send_ctl(sh, buf, proto_build_end(&b));
	sh->hello_at = tsc;
	D.st.hellos++;
}

static void
enqueue(struct drv_shard *sh, const uint8_t *p, uint32_t len, uint64_t batch_no)
{
	struct ctl_msg *m = malloc(sizeof(*m) + len);

	if (m == NULL) {
		D.fatal = 1;
		return;
	}
	m->next = NULL;
	m->batch_no = batch_no;
	m->len = len;
	memcpy(m->p, p, len);
	if (sh->tail != NULL)
		sh->tail->next = m;
	else
		sh->head = m;
	sh->tail = m;
	sh->backlog++;
}

static void
close_open(struct drv_shard *sh)
{
	uint32_t len;

	if (!sh->open_on)
		return;
	sh->open_on = 0;
	if (sh->open.count == 0)
		return;
	len = proto_build_end(&sh->open);
	enqueue(sh, sh->open_buf, len, 0);
}

/* The message records of @p type go into, with room for @p need bytes; NULL if none can. */
static struct proto_builder *
open_for(struct drv_shard *sh, uint8_t type, uint32_t need)
{
	uint32_t cap = kvss_payload_cap();

	if (PROTO_HDR_LEN + need > cap) {
		D.st.too_big++;
		return NULL;
	}
	if (sh->open_on && (sh->open.type != type || proto_build_room(&sh->open) < need))
		close_open(sh);
	if (!sh->open_on) {
		struct proto_hdr h;

		hdr_for(&h, sh, type);
		proto_build_begin(&sh->open, sh->open_buf, cap, &h);
		sh->open_on = 1;
	}
	return &sh->open;
}

static void
free_backlog(struct drv_shard *sh)
{
	while (sh->head != NULL) {
		struct ctl_msg *m = sh->head;

		sh->head = m->next;
		free(m);
	}
	sh->tail = NULL;
	sh->backlog = 0;
	sh->open_on = 0;
}

/* Push what the window allows; resend what is due. */
static void
pump_streams(uint64_t tsc)
{
	uint16_t i;

	for (i = 0; i < D.nsh; i++) {
		struct drv_shard *sh = &D.sh[i];
		const struct proto_stream_msg *r;

		if (!sh->up)
			continue;
		close_open(sh);
		/*
		 * Resend what timed out, oldest first, but not while control
		 * frames still wait for this port: the copies sent before have
		 * not even left, and a stuck port would fill the queue with
		 * copies. So the queue holds at most two windows per stream.
		 */
		if (D.txq[port_slot(sh->ref->port)].nc == 0)
			while ((r = proto_stream_due(&sh->stream, tsc)) != NULL)
				send_ctl(sh, r->payload, r->len);
		while (sh->head != NULL && proto_stream_can_push(&sh->stream)) {
			struct ctl_msg *m = sh->head;

			uint64_t seq = proto_stream_push(&sh->stream, m->p, m->len, tsc);

			if (seq == 0)
				break;
			if (D.open_loop) {
				/* Recording: what is sent counts as run. */
				proto_stream_ack(&sh->stream, seq);
				if (m->batch_no > sh->evict_acked)
					sh->evict_acked = m->batch_no;
			} else if (m->batch_no != 0) {
				sh->ev_seq[sh->ev_tail % PROTO_STREAM_WINDOW_MAX] = seq;
				sh->ev_batch[sh->ev_tail % PROTO_STREAM_WINDOW_MAX] = m->batch_no;
				sh->ev_tail++;
			}
			send_ctl(sh, m->p, m->len);
			if (m->batch_no > sh->evict_sent)
				sh->evict_sent = m->batch_no;
			sh->head = m->next;
			if (sh->head == NULL)
				sh->tail = NULL;
			sh->backlog--;
			free(m);
		}
	}
}

/* ---- The wafer: EVICT_DATA ----------------------------------------------------- */

/* The first job at or after @p j that shard @p sh still has to send. */
static struct data_job *
job_for(const struct drv_shard *sh, struct data_job *j)
{
	for (; j != NULL; j = j->next)
		if (j->model == sh->model && !(j->done_mask & (1u << sh->idx)))
			return j;
	return NULL;
}

static void
job_done(struct drv_shard *sh, struct data_job *j)
{
	j->done_mask |= 1u << sh->idx;
	sh->jw_on = 0;
	sh->jcache = 0;
	sh->jcur = job_for(sh, j->next);
}

/*
 * Send data of each shard's oldest batches, as far as their EVICTs have gone
 * out and run (DATA_AHEAD); then free the jobs every shard is done with.
 */
static int
pump_data(void)
{
	uint32_t maxdata = kvss_payload_cap() - PROTO_HDR_LEN - PROTO_DATA_HDR_LEN;
	int frames = 0;
	uint16_t i;

	for (i = 0; i < D.nsh; i++) {
		struct drv_shard *sh = &D.sh[i];
		int k = port_slot(sh->ref->port), budget = 2 * BURST;

		if (!sh->up)
			continue;
		while (budget > 0) {
			struct data_job *j = sh->jcur != NULL ? sh->jcur : job_for(sh, D.jhead);
			struct rte_mbuf *m;
			uint32_t hl, len;

			sh->jcur = j;
			if (j == NULL)
				break;
			if (j->epoch != D.model_epoch[j->model]) {
				job_done(sh, j);
				continue;
			}
			if (sh->evict_sent < j->batch_no || sh->evict_acked + DATA_AHEAD < j->batch_no)
				break; /* its EVICT has not gone out, or the shard is behind */
			if (!sh->jw_on) {
				struct wafer_place at = {j->model, sh->ref->id, sh->jcache,
							       sh->ref->bytes_per_token[sh->jcache]};

				wafer_evict_init(&sh->jw, &at, j->batch_no,
						       &j->hash[(size_t)sh->jcache * j->g], j->g, kvss.epoch);
				sh->jw_on = 1;
			}
			if (D.txq[k].n == TXQ_MAX) {
				txq_flush();
				if (D.txq[k].n == TXQ_MAX)
					break;
			}
			m = rte_pktmbuf_alloc(kvss.pool);
			if (m == NULL) {
				D.st.no_mbuf++;
				break;
			}
			hl = proto_l2l4_len(&sh->evict);
			len = wafer_evict_next(&sh->jw, rte_pktmbuf_mtod(m, uint8_t *) + hl, maxdata);
			if (len == 0) {
				rte_pktmbuf_free(m);
				sh->jw_on = 0;
				if (++sh->jcache == j->nc)
					job_done(sh, j);
				continue;
			}
			budget--;
			if (kvss.cfg.wafer.lose_data_every &&
			    ++D.data_count % kvss.cfg.wafer.lose_data_every == 0) {
				/* Fault injection: this frame is lost on the way. */
				rte_pktmbuf_free(m);
				D.st.data_withheld++;
				continue;
			}
			proto_write_l2l4(rte_pktmbuf_mtod(m, uint8_t *), &sh->evict, len);
			m->data_len = (uint16_t)(hl + len);
			m->pkt_len = hl + len;
			D.st.evict_frames++;
			D.st.evict_bytes += len - PROTO_HDR_LEN - PROTO_DATA_HDR_LEN;
			send_frame(sh->ref->port, m, hl + len, 0);
			frames++;
		}
	}
	/* Jobs every shard is done with, or of a model that restarted, go. */
	while (D.jhead != NULL && (D.jhead->done_mask == D.jhead->all_mask ||
				   D.jhead->epoch != D.model_epoch[D.jhead->model])) {
		struct data_job *j = D.jhead;

		for (i = 0; i < D.nsh; i++)
			if (D.sh[i].jcur == j) {
				D.sh[i].jcur = NULL;
				D.sh[i].jw_on = 0;
				D.sh[i].jcache = 0;
			}
		D.jhead = j->next;
		if (D.jhead == NULL)
			D.jtail = NULL;
		D.njobs--;
		free(j);
	}
	return frames;
}

/* ---- The prefixcache sink -------------------------------------------------------- */

static void
on_reserve(void *arg, uint16_t model, const struct proto_reserve *r)
{
	uint16_t i;

	(void)arg;
	for (i = 0; i < D.nshards[model]; i++) {
		struct drv_shard *sh = &D.sh[D.first_shard[model] + i];
		struct proto_builder *b = open_for(sh, PROTO_T_RESERVE, PROTO_RESERVE_LEN);

		if (b != NULL)
			proto_build_reserve(b, r);
	}
}

static void
on_evict(void *arg, uint16_t model, uint64_t batch_no, uint16_t nc, uint16_t g,
	 const struct proto_evict_entry *e)
{
	struct data_job *j = malloc(sizeof(*j) + sizeof(uint64_t) * nc * g);
	struct drv_seq *s = NULL;
	uint64_t last_id = 0;
	uint8_t *buf = D.scratch;
	uint32_t t, c, len;
	uint16_t i;

	(void)arg;
	if (j == NULL) {
		D.fatal = 1;
		return;
	}
	memset(j, 0, sizeof(*j));
	j->model = model;
	j->nc = nc;
	j->g = g;
	j->batch_no = batch_no;
	j->epoch = D.model_epoch[model];
	j->all_mask = (1u << D.nshards[model]) - 1;
	for (t = 0; t < g; t++)
		for (c = 0; c < nc; c++) {
			const struct proto_evict_entry *en = &e[t * nc + c];

			/* A batch holds runs of one prompt: look each run up once. */
			if (en->prompt_id != last_id) {
				last_id = en->prompt_id;
				s = last_id ? seq_of_prompt(last_id) : NULL;
			}
			j->hash[(size_t)c * g + t] =
				s != NULL && en->token_idx < s->total ? s->h[en->token_idx] : 0;
			if (en->prompt_id != 0 && c == 0)
				D.st.evicted_tokens++;
		}
	D.st.evict_batches++;
	for (i = 0; i < D.nshards[model]; i++) {
		struct drv_shard *sh = &D.sh[D.first_shard[model] + i];
		struct proto_builder b;
		struct proto_hdr h;
		struct proto_evict_hdr eh = {batch_no, nc, g};

		close_open(sh);
		hdr_for(&h, sh, PROTO_T_EVICT);
		proto_build_begin(&b, buf, kvss_payload_cap(), &h);
		proto_build_evict_hdr(&b, &eh);
		for (t = 0; t < (uint32_t)g * nc; t++)
			if (proto_build_evict_entry(&b, &e[t]) != 0) {
				D.st.too_big++;
				break;
			}
		len = proto_build_end(&b);
		enqueue(sh, buf, len, batch_no);
	}
	j->next = NULL;
	if (D.jtail != NULL)
		D.jtail->next = j;
	else
		D.jhead = j;
	D.jtail = j;
	D.njobs++;
}

static void
on_refill(void *arg, uint16_t model, const struct proto_refill_req *rq,
	  const struct proto_refill_chunk *ch)
{
	struct drv_seq *s = D.cur;
	const struct prefixcache_cache *cc = &kvss.cfg.driver.pc.model[model].cache[rq->cache_id];
	uint16_t ns = D.nshards[model], i, k;
	struct drv_refill *r;
	uint32_t ntok = 0, t = 0, j;

	(void)arg;
	for (k = 0; k < rq->num_chunks; k++)
		ntok += ch[k].num_tokens;
	for (i = 0; i < ns; i++) {
		struct drv_shard *sh = &D.sh[D.first_shard[model] + i];
		struct proto_builder *b =
			open_for(sh, PROTO_T_REFILL,
				 PROTO_REFILL_REQ_LEN + (uint32_t)rq->num_chunks * PROTO_REFILL_CHUNK_LEN);

		if (b == NULL)
			continue;
		proto_build_refill_req(b, rq);
		for (k = 0; k < rq->num_chunks; k++)
			proto_build_refill_chunk(b, &ch[k]);
	}
	if (D.open_loop) {
		/* What each shard must send back, for the capture's checker. */
		for (i = 0; i < ns && s != NULL && D.expect != NULL; i++) {
			const struct kvss_shard_ref *ref = D.sh[D.first_shard[model] + i].ref;

			fprintf(D.expect, "refill %" PRIu64 " model %u shard %u cache %u bytes %u buffers %u "
				"tokens %u", rq->refill_id, model, ref->id, rq->cache_id,
				ref->bytes_per_token[rq->cache_id], ref->buffers[rq->cache_id], ntok);
			for (k = 0; k < rq->num_chunks; k++)
				for (j = 0; j < ch[k].num_tokens; j++) {
					uint32_t idx = ch[k].start_token_idx + j;

					fprintf(D.expect, " %" PRIx64, idx < s->total ? s->h[idx] : 0);
				}
			fprintf(D.expect, "\n");
		}
		if (D.nol_done < RTE_DIM(D.ol_done))
			D.ol_done[D.nol_done++] = rq->refill_id;
		D.st.refilled_tokens += ntok;
		return;
	}
	if (s == NULL || s->nrec == MAX_REC_PER_SEQ)
		return;
	r = calloc(1, sizeof(*r) + sizeof(r->chk[0]) * ns);
	if (r == NULL || (r->hash = malloc(sizeof(uint64_t) * (ntok ? ntok : 1))) == NULL) {
		free(r);
		D.fatal = 1;
		return;
	}
	r->refill_id = rq->refill_id;
	r->seq = s;
	r->model = model;
	r->cache_id = rq->cache_id;
	r->nshards = ns;
	r->ntok = ntok;
	r->all_mask = (1u << ns) - 1;
	/*
	 * Glued token t is position chunk.start + j of the requester's own
	 * prefix, and must land in slot t (prefixcache_slot) of a prefix that
	 * ends at the last glued position, which seq_start checks is the hit.
	 */
	for (k = 0; k < rq->num_chunks; k++)
		if (ch[k].num_tokens && ch[k].start_token_idx + ch[k].num_tokens > r->glue_end)
			r->glue_end = ch[k].start_token_idx + ch[k].num_tokens;
	r->glue_bad = ntok != prefixcache_glue_len(cc, r->glue_end);
	for (k = 0; k < rq->num_chunks; k++)
		for (j = 0; j < ch[k].num_tokens; j++, t++) {
			uint32_t idx = ch[k].start_token_idx + j;

			r->hash[t] = idx < s->total ? s->h[idx] : 0;
			if (prefixcache_slot(cc, r->glue_end, idx) != t)
				r->glue_bad = 1;
		}
	for (i = 0; i < ns; i++) {
		struct drv_shard *sh = &D.sh[D.first_shard[model] + i];
		struct wafer_place at = {model, sh->ref->id, rq->cache_id,
					       sh->ref->bytes_per_token[rq->cache_id]};

		if (wafer_refill_init(&r->chk[i], &at, sh->num_buffers[rq->cache_id],
					    rq->refill_id, r->hash, ntok) != 0)
			r->fail_mask |= 1u << i;
	}
	r->hnext = D.rf[hbucket(r->refill_id)];
	D.rf[hbucket(r->refill_id)] = r;
	D.nrefill++;
	s->rec[s->nrec++] = r;
	s->wait++;
	s->mwait[model]++;
	D.st.refilled_tokens += ntok;
}

static void
on_delete(void *arg, uint16_t model, struct prefixcache_shards to, const struct proto_delete *d)
{
	uint16_t i;

	(void)arg;
	for (i = 0; i < D.nshards[model]; i++) {
		struct drv_shard *sh = &D.sh[D.first_shard[model] + i];
		struct proto_builder *b;

		if ((to.only >= 0 && i != to.only) || i == to.except)
			continue;
		b = open_for(sh, PROTO_T_DELETE, PROTO_DELETE_LEN);

		if (b != NULL) {
			proto_build_delete(b, d);
			D.st.deletes++;
		}
	}
}

/* ---- Refills and sequences -------------------------------------------------------- */

/*
 * The line fitted to the refills of @p f so far: *@p lat_ns plus
 * *@p ns_per_byte for each byte the model charged. -1 under 20 refills or
 * with one size only. When the times do not grow with the bytes (a fixed
 * wait swamps the transfer), no bandwidth can be told: the slope is 0 and
 * the latency is their mean time.
 */
static int
model_line(const struct linfit *f, double *lat_ns, double *ns_per_byte)
{
	double a, b;

	if (linfit_solve(f, 20, &a, &b) != 0)
		return -1;
	*lat_ns = b > 0 ? (a > 0 ? a : 0) : f->my;
	*ns_per_byte = b > 0 ? b : 0;
	return 0;
}

/* The same in the configuration's units (refill_latency_us, refill_gbps; 0: no bound). */
static int
model_fit(const struct linfit *f, double *lat_us, double *gbps)
{
	double lat_ns, ns_per_byte;

	if (model_line(f, &lat_ns, &ns_per_byte) != 0)
		return -1;
	*lat_us = lat_ns / 1000;
	*gbps = ns_per_byte > 0 ? 8 / ns_per_byte : 0;
	return 0;
}

/*
 * Model @p m's refills of one sequence are whole after @p ns, for
 * @p bytes charged. refill_model "learned": the model's estimates take the
 * line fitted to its own refills (draft and target models have their own
 * shards), from its 20th refill on and every 16th after. With
 * refill_short_pct, the line is scaled by the factor that share of its
 * refills exceeded over what the line said when each came (once 20 are
 * counted).
 */
static void
model_sample(uint16_t m, uint64_t ns, uint64_t bytes)
{
	struct model_learn *l = &D.ml[m];
	double lat_ns, ns_per_byte;

	if (kvss.cfg.driver.refill_short_pct && model_line(&l->fit, &lat_ns, &ns_per_byte) == 0)
		ratioq_add(&l->rq, (double)ns, lat_ns + (double)bytes * ns_per_byte);
	linfit_add(&l->fit, (double)bytes, (double)ns);
	if (kvss.cfg.driver.refill_model != KVSS_MODEL_LEARNED || l->fit.n < 20 ||
	    (l->fit.n - 20) % 16 != 0 || model_line(&l->fit, &lat_ns, &ns_per_byte) != 0)
		return;
	l->factor = kvss.cfg.driver.refill_short_pct && l->rq.n >= 20
			    ? ratioq_factor(&l->rq, kvss.cfg.driver.refill_short_pct / 100.0)
			    : 1;
	prefixcache_set_refill_model(D.pc, m, (uint64_t)(lat_ns * l->factor),
				     ns_per_byte > 0 ? 1 / (ns_per_byte * l->factor) : 0);
	if (D.st.model_updates++ == 0)
		D.learned_at = l->fit.n;
}

/* A sequence's refills are all whole after @p ns: against its longest estimate. */
static void
latency_sample(uint64_t ns, uint64_t est_ns, uint64_t est_bytes)
{
	linfit_add(&D.fit, (double)est_bytes, (double)ns);
	D.st.model_short += ns > est_ns;
	if (ns > est_ns)
		D.late_ns += ns - est_ns;
	else
		D.early_ns += est_ns - ns;
	if (D.nlat == D.latcap) {
		size_t cap = D.latcap ? 2 * D.latcap : 1024;
		uint32_t *a = realloc(D.lat_us, sizeof(uint32_t) * cap);
		uint32_t *b = a ? realloc(D.est_us, sizeof(uint32_t) * cap) : NULL;

		if (a != NULL)
			D.lat_us = a;
		if (b == NULL)
			return;
		D.est_us = b;
		D.latcap = cap;
	}
	D.lat_us[D.nlat] = (uint32_t)(ns / 1000);
	D.est_us[D.nlat++] = (uint32_t)(est_ns / 1000);
}

/* Has a refill of @p s, of any model, failed? */
static bool
seq_refill_failed(const struct drv_seq *s)
{
	uint16_t m;

	for (m = 0; m < kvss.cfg.driver.pc.num_models; m++)
		if (s->mfailed[m])
			return true;
	return false;
}

/* A refill is finished for its requester (whole, failed or timed out). */
static void
refill_finish(struct drv_refill *r, uint64_t tsc)
{
	struct drv_seq *s = r->seq;
	uint16_t i;
	int bad = 0;

	if (r->finished)
		return;
	r->finished = 1;
	for (i = 0; i < r->nshards; i++) {
		D.st.verify_bad_bytes += r->chk[i].bad_bytes;
		D.st.verify_bad_frames += r->chk[i].bad_frames;
		bad |= r->chk[i].bad_bytes != 0 || r->chk[i].bad_frames != 0;
	}
	/* Every shard said its data went out, yet some is missing: also a failure. */
	if (r->whole_mask != r->all_mask && r->done_mask == r->all_mask && r->fail_mask == 0)
		bad = 1;
	D.st.verify_failures += bad;
	r->seq = NULL;
	if (s != NULL && r->fail_mask != 0) {
		D.st.seq_refill_failed += !seq_refill_failed(s);
		s->mfailed[r->model] = 1;
	}
	if (s != NULL && --s->mwait[r->model] == 0 && !s->mfailed[r->model])
		model_sample(r->model, now_ns(tsc) - s->t0, s->mbytes[r->model]);
	if (s != NULL && --s->wait == 0 && s->state == SEQ_WAIT) {
		uint64_t now = now_ns(tsc);

		/* A refill that failed (a shard restarted, or it timed out) took
		 * however long the failure did: it would skew the learned model. */
		if (!seq_refill_failed(s))
			latency_sample(now - s->t0, s->estimate_ns, s->estimate_bytes);
		s->whole_ns = now;
		s->state = kvss.cfg.wafer.resume == KVSS_RESUME_ESTIMATE &&
					   now - s->t0 < s->estimate_ns
				   ? SEQ_HOLD
				   : SEQ_RUN;
	}
}

static void
refill_free(struct drv_refill *r)
{
	refill_unlink(r);
	prefixcache_refill_done(D.pc, r->refill_id);
	free(r->hash);
	free(r);
}

/* Finished for the requester and answered by every shard: the columns may go. */
static void
refill_check(struct drv_refill *r, uint64_t tsc)
{
	if (!r->finished && (r->whole_mask == r->all_mask || r->fail_mask != 0))
		refill_finish(r, tsc);
	if (r->finished && (r->done_mask | r->fail_mask) == r->all_mask)
		refill_free(r);
}

/* Every shard of @p model answered our HELLO: the model caches. */
static int
model_up(uint16_t model)
{
	uint16_t i;

	for (i = 0; i < D.nshards[model]; i++)
		if (!D.sh[D.first_shard[model] + i].up)
			return 0;
	return 1;
}

static void
seq_start(uint64_t tsc)
{
	const struct wl_req *q = &D.wl.r[D.next_req];
	struct drv_seq *s = NULL;
	uint32_t i, k;
	uint16_t m;

	for (i = 0; i < kvss.cfg.wafer.max_inflight; i++)
		if (D.seq[i].state == SEQ_FREE) {
			s = &D.seq[i];
			break;
		}
	if (s == NULL)
		return;
	memset(s, 0, sizeof(*s));
	s->slot = i;
	s->q = q;
	s->total = q->n + q->out;
	s->tok = malloc(sizeof(uint32_t) * (s->total ? s->total : 1));
	s->h = malloc(sizeof(uint64_t) * (s->total ? s->total : 1));
	if (s->tok == NULL || s->h == NULL) {
		free(s->tok);
		free(s->h);
		D.fatal = 1;
		return;
	}
	D.next_req++;
	for (k = 0; k < s->total; k++) {
		s->tok[k] = k < q->n ? q->tokens[k] : workload_answer_token(k);
		s->h[k] = proto_ref_hash_next(k ? s->h[k - 1] : q->iso, s->tok[k]);
	}
	s->t0 = now_ns(tsc);
	s->deadline = tsc + D.hz / 1000 * kvss.cfg.driver.refill_timeout_ms;
	s->state = SEQ_WAIT;
	D.nactive++;
	D.st.requests++;
	D.st.prompt_tokens += q->n;
	for (m = 0; m < kvss.cfg.driver.pc.num_models; m++) {
		struct prefixcache_request rq = {.isolation_id = q->iso, .tokens = q->tokens,
						 .num_tokens = q->n, .cache_length_allowed = q->allowed,
						 .first_multimodal = UINT32_MAX, .sequence_id = s->slot};
		struct prefixcache_hit hit;

		if (!model_up(m)) {
			/* A shard of it is away: no lookup, no refill, nothing stored. */
			s->s[m] = NULL;
			s->prompt_id[m] = 0;
			s->pos[m] = 0;
			if (m == 0)
				D.st.miss_tokens += q->n;
			D.st.away_requests += m == 0;
			continue;
		}
		D.cur = s;
		s->s[m] = prefixcache_begin(D.pc, m, &rq, now_ns(tsc), &hit);
		D.cur = NULL;
		/* Open loop: the refills count as done at once (the shard's ordered
		 * queue still keeps their columns until their data has left). */
		while (D.nol_done > 0)
			prefixcache_refill_done(D.pc, D.ol_done[--D.nol_done]);
		if (s->s[m] == NULL) {
			D.fatal = 1;
			continue;
		}
		s->prompt_id[m] = hit.prompt_id;
		s->pos[m] = hit.hit_tokens;
		/* Every refill brings the whole hit, each token to its slot. */
		for (k = 0; k < s->nrec; k++)
			if (s->rec[k]->model == m &&
			    (s->rec[k]->glue_bad || s->rec[k]->glue_end != hit.hit_tokens)) {
				D.st.verify_failures++;
				D.st.verify_bad_glue++;
			}
		pid_add(hit.prompt_id, s);
		if (m == 0) {
			D.st.lookup_tokens += hit.lookup_tokens;
			D.st.hit_tokens += hit.hit_tokens;
			D.st.miss_tokens += q->n - hit.hit_tokens;
		}
		if (hit.refill_id != 0) {
			D.st.refills += m == 0;
			s->mbytes[m] = hit.estimate_bytes;
			if (hit.estimate_ns > s->estimate_ns) {
				s->estimate_ns = hit.estimate_ns;
				s->estimate_bytes = hit.estimate_bytes;
			}
		}
	}
	if (s->wait == 0)
		s->state = SEQ_RUN;
}

static void
seq_end(struct drv_seq *s, uint64_t tsc)
{
	uint16_t m;

	for (m = 0; m < kvss.cfg.driver.pc.num_models; m++) {
		if (s->s[m] == NULL)
			continue; /* its model was not up when it began */
		prefixcache_end(D.pc, s->s[m], now_ns(tsc));
		pid_del(s->prompt_id[m]);
	}
	free(s->tok);
	free(s->h);
	s->state = SEQ_FREE;
	D.nactive--;
	D.st.completed++;
}

static int
all_up(void)
{
	uint16_t i;

	for (i = 0; i < D.nsh; i++)
		if (!D.sh[i].up)
			return 0;
	return 1;
}

/* Data jobs some shard that is up has not sent yet (counted up to @p max). */
static uint32_t
jobs_for_up_shards(uint32_t max)
{
	const struct data_job *j;
	uint32_t n = 0;
	uint16_t k;

	for (j = D.jhead; j != NULL && n < max; j = j->next)
		for (k = 0; k < D.nshards[j->model]; k++)
			if (!(j->done_mask & (1u << k)) && D.sh[D.first_shard[j->model] + k].up) {
				n++;
				break;
			}
	return n;
}

/* One wafer step: start what may start, send each running sequence's next tokens. */
static int
engine(uint64_t tsc)
{
	uint32_t i, backlog = 0, sent = 0;
	uint64_t now = now_ns(tsc);
	uint16_t m;

	/*
	 * A model with a shard not up runs as misses (seq_start); the rest go
	 * on. What waits for a shard that is away holds nothing back.
	 */
	if (D.fatal || (kvss.cfg.driver.away_ms == 0 && !all_up()))
		return 0; /* away_ms = 0: wait for every shard */
	for (i = 0; i < D.nsh; i++)
		if (D.sh[i].up && D.sh[i].backlog > backlog)
			backlog = D.sh[i].backlog;
	if (backlog > BACKLOG_HIGH ||
	    (D.njobs > JOBS_HIGH && jobs_for_up_shards(JOBS_HIGH + 1) > JOBS_HIGH))
		return 0;
	while (D.nactive < kvss.cfg.wafer.max_inflight && D.next_req < D.nreq && !D.fatal)
		seq_start(tsc);
	for (i = 0; i < kvss.cfg.wafer.max_inflight; i++) {
		struct drv_seq *s = &D.seq[i];
		int done = 1;

		if (s->state == SEQ_HOLD && now - s->t0 >= s->estimate_ns) {
			D.held_ns += now - s->whole_ns;
			s->state = SEQ_RUN;
		}
		if (s->state != SEQ_RUN)
			continue;
		for (m = 0; m < kvss.cfg.driver.pc.num_models; m++) {
			uint32_t k;

			for (k = 0; k < kvss.cfg.wafer.step_tokens && s->pos[m] < s->total; k++) {
				if (s->s[m] != NULL)
					prefixcache_token(D.pc, s->s[m], s->tok[s->pos[m]], now);
				s->pos[m]++;
				sent++;
			}
			done &= s->pos[m] == s->total;
		}
		if (done)
			s->state = SEQ_FREE + 100; /* ends after the flush below */
	}
	/* The wafer step ends: its batches go out before any sequence's deletes. */
	prefixcache_flush(D.pc);
	for (i = 0; i < kvss.cfg.wafer.max_inflight; i++)
		if (D.seq[i].state == SEQ_FREE + 100)
			seq_end(&D.seq[i], tsc);
	return sent > 0;
}

static void
check_timeouts(uint64_t tsc)
{
	uint32_t i, k;

	for (i = 0; i < kvss.cfg.wafer.max_inflight; i++) {
		struct drv_seq *s = &D.seq[i];

		if (s->state != SEQ_WAIT || tsc < s->deadline)
			continue;
		for (k = 0; k < s->nrec; k++) {
			struct drv_refill *r = s->rec[k];

			if (r->finished || r->seq != s)
				continue;
			D.st.refill_timeouts++;
			r->fail_mask = r->all_mask;
			refill_finish(r, tsc);
			refill_free(r);
		}
	}
}

/* ---- Epochs ------------------------------------------------------------------------ */

static uint32_t
new_epoch(void)
{
	uint32_t e;

	do {
		e = (uint32_t)rte_rand();
	} while (e == 0);
	return e;
}

/*
 * A shard of @p model lost what it held: the model's prefixes go, the model
 * takes a new driver epoch and all its shards start over with it.
 */
static void
model_restart(uint16_t model, uint64_t tsc, const char *why, const struct drv_shard *who,
	      uint64_t *count)
{
	uint32_t b;
	uint16_t i;

	(*count)++;
	if (why != NULL) {
		printf("kvss: driver: model %u shard %u %s: its prefixes are dropped, new epoch\n",
		       model, who->ref->id, why);
		fflush(stdout);
	}
	prefixcache_shard_restart(D.pc, model);
	D.model_epoch[model] = new_epoch();
	for (i = 0; i < D.nshards[model]; i++) {
		struct drv_shard *sh = &D.sh[D.first_shard[model] + i];

		proto_stream_reset(&sh->stream);
		free_backlog(sh);
		sh->up = 0;
		sh->epoch = 0;
		sh->evict_sent = sh->evict_acked = 0;
		sh->ev_head = sh->ev_tail = 0;
		sh->jcur = NULL; /* the model's jobs are stale now */
		sh->jw_on = 0;
		sh->jcache = 0;
		send_hello(sh, tsc);
	}
	/* Refills of the old epoch will not come: their requesters go on. */
	for (b = 0; b < HBUCKETS; b++) {
		struct drv_refill *r = D.rf[b], *nx;

		for (; r != NULL; r = nx) {
			nx = r->hnext;
			if (r->model != model)
				continue;
			r->fail_mask = r->all_mask;
			D.st.refill_failures++;
			refill_finish(r, tsc);
			refill_free(r);
		}
	}
}

/*
 * Shard @p sh says its state is not what this driver sent it: data was lost
 * (TOKEN_LOST), a message was refused (ERROR) or a refill named tokens it
 * does not hold. With driver.on_loss = "resync" (the default) the model
 * starts over (model_restart): PROTOCOL.md's DELETE must name a prompt's
 * exact end, and after a loss the driver cannot know it for the messages
 * still in flight (docs/DESIGN.md, "Lost data"). Returns 1 if it did.
 */
static int
resync(struct drv_shard *sh, uint64_t tsc, const char *why)
{
	if (kvss.cfg.driver.on_loss != KVSS_LOSS_RESYNC || D.open_loop)
		return 0;
	if (D.st.resyncs < 5 || (D.st.resyncs + 1) % 1000 == 0) {
		printf("kvss: driver: model %u shard %u %s: the model starts over with a new epoch "
		       "(resync %" PRIu64 ")\n", sh->model, sh->ref->id, why, D.st.resyncs + 1);
		fflush(stdout);
	}
	model_restart(sh->model, tsc, NULL, sh, &D.st.resyncs);
	return 1;
}

/* ---- Receiving --------------------------------------------------------------------- */

static void
on_status(struct drv_shard *sh, const struct proto_msg *msg, uint64_t tsc)
{
	const struct proto_status *st = &msg->u.status;
	uint16_t m = sh->model, c, n = msg->hdr.count;
	const struct prefixcache_model *pm = &kvss.cfg.driver.pc.model[m];

	D.st.statuses++;
	if (st->driver_epoch != D.model_epoch[m]) {
		if (sh->up)
			model_restart(m, tsc, "no longer knows our epoch (it restarted)", sh,
				      &D.st.shard_restarts);
		return; /* not yet our HELLO's answer */
	}
	if (sh->up && msg->hdr.epoch != sh->epoch) {
		model_restart(m, tsc, "has a new epoch", sh, &D.st.shard_restarts);
		return;
	}
	if (!sh->up) {
		if (n != pm->num_caches) {
			fprintf(stderr, "kvss: driver: shard %u of model %u has %u caches; %s says %u\n",
				sh->ref->id, m, n, kvss.cfg.path, pm->num_caches);
			D.fatal = 2;
			return;
		}
		for (c = 0; c < n; c++) {
			struct proto_cache_info ci;

			proto_get_cache_info(msg, c, &ci);
			if (ci.cache_id >= n || ci.bytes_per_token != sh->ref->bytes_per_token[ci.cache_id]) {
				fprintf(stderr,
					"kvss: driver: shard %u of model %u stores %u bytes per token in cache %u; "
					"%s: driver.models.[%u] says %u\n",
					sh->ref->id, m, ci.bytes_per_token, ci.cache_id, kvss.cfg.path, m,
					ci.cache_id < n ? sh->ref->bytes_per_token[ci.cache_id] : 0);
				D.fatal = 2;
				return;
			}
			sh->num_buffers[ci.cache_id] = ci.num_buffers;
		}
		sh->up = 1;
		sh->last_rx = tsc;
		sh->epoch = msg->hdr.epoch;
		proto_stream_reset(&sh->stream);
		printf("kvss: driver: shard %u of model %u is up (epoch 0x%08x)\n", sh->ref->id, m,
		       sh->epoch);
		fflush(stdout);
	}
	sh->batches_complete = st->batches_complete;
	sh->status_at = tsc;
	for (c = 0; c < n; c++) {
		struct proto_cache_info ci;

		proto_get_cache_info(msg, c, &ci);
		if (ci.cache_id < pm->num_caches) {
			prefixcache_status(D.pc, m, ci.cache_id, ci.capacity_tokens);
			sh->stored[ci.cache_id] = ci.stored_tokens;
		}
	}
}

static void
on_refill_data(struct drv_shard *sh, struct rte_mbuf *mb, const struct proto_msg *msg,
	       uint64_t tsc)
{
	const struct proto_refill_data_hdr *h = &msg->u.refill_data;
	struct drv_refill *r = refill_of(h->refill_id);
	const uint8_t *p;
	int64_t bad;

	if (r == NULL || r->model != sh->model || r->finished) {
		D.st.stale++;
		return;
	}
	p = rte_pktmbuf_read(mb, msg->data_off, msg->data_len, D.scratch);
	if (p == NULL) {
		D.st.verify_bad_frames++;
		return;
	}
	D.st.refill_bytes += msg->data_len;
	bad = wafer_refill_data(&r->chk[sh->idx], h, p, msg->data_len);
	(void)bad;
	if (wafer_refill_whole(&r->chk[sh->idx]))
		r->whole_mask |= 1u << sh->idx;
	refill_check(r, tsc);
}

static void
receive(struct rte_mbuf *mb, uint64_t tsc)
{
	struct proto_msg *msg = &D.msg;
	enum proto_reason why = proto_parse_mbuf(mb, &kvss.cfg.udp, msg);
	struct drv_shard *sh;
	uint16_t i;

	lst()->rx_frames++;
	lst()->rx_bytes += rte_pktmbuf_pkt_len(mb);
	if (why != PROTO_OK) {
		lst()->drops[why]++;
		D.st.rx_drops++;
		return;
	}
	sh = shard_of(msg->hdr.model_id, msg->hdr.shard_id);
	if (sh == NULL) {
		D.st.stale++;
		return;
	}
	sh->last_rx = tsc;
	if (msg->hdr.type == PROTO_T_STATUS) {
		on_status(sh, msg, tsc);
		return;
	}
	if (!sh->up || (msg->hdr.type != PROTO_T_REFILL_DATA && msg->hdr.epoch != sh->epoch)) {
		D.st.stale++;
		return;
	}
	switch (msg->hdr.type) {
	case PROTO_T_ACK:
		D.st.acks++;
		proto_stream_ack_at(&sh->stream, msg->u.ack.cum_seq, tsc);
		while (sh->ev_head != sh->ev_tail &&
		       sh->ev_seq[sh->ev_head % PROTO_STREAM_WINDOW_MAX] <= sh->stream.acked)
			sh->evict_acked = sh->ev_batch[sh->ev_head++ % PROTO_STREAM_WINDOW_MAX];
		break;
	case PROTO_T_ERROR:
		for (i = 0; i < msg->hdr.count; i++) {
			struct proto_error e;

			proto_get_error(msg, i, &e);
			D.st.errors++;
			D.st.errors_by_code[e.code < 16 ? e.code : 0]++;
			if (D.st.errors <= 5)
				fprintf(stderr, "kvss: driver: shard %u: ERROR %s (seq %" PRIu64
						", prompt %" PRIx64 ", token %u, cache %u)\n",
					sh->ref->id, proto_err_name(e.code) ? proto_err_name(e.code) : "?",
					e.seq, e.prompt_id, e.token_idx, e.cache_id);
			prefixcache_error(D.pc, sh->model, sh->idx, e.cache_id, e.prompt_id, e.token_idx,
					  e.code);
		}
		if (msg->hdr.count > 0)
			resync(sh, tsc, "refused a message");
		break;
	case PROTO_T_REFILL_DONE:
		for (i = 0; i < msg->hdr.count; i++) {
			struct proto_refill_done d;
			struct drv_refill *r;

			proto_get_refill_done(msg, i, &d);
			D.st.refill_done++;
			r = refill_of(d.refill_id);
			if (r == NULL || r->model != sh->model) {
				D.st.stale++;
				continue;
			}
			r->done_mask |= 1u << sh->idx;
			if (d.status != 0) {
				D.st.refill_failures++;
				r->fail_mask |= 1u << sh->idx;
			}
			refill_check(r, tsc);
			if (d.status != 0 && resync(sh, tsc, "does not hold what a refill named"))
				break;
		}
		break;
	case PROTO_T_TOKEN_LOST:
		for (i = 0; i < msg->hdr.count; i++) {
			struct proto_lost l;

			proto_get_lost(msg, i, &l);
			D.st.lost_tokens++;
			prefixcache_token_lost(D.pc, sh->model, sh->idx, l.cache_id, l.prompt_id,
					       l.token_idx);
		}
		if (msg->hdr.count > 0)
			resync(sh, tsc, "lost data (TOKEN_LOST)");
		break;
	case PROTO_T_REFILL_DATA:
		on_refill_data(sh, mb, msg, tsc);
		break;
	default:
		lst()->not_handled++;
		break;
	}
}

/* ---- Telemetry ---------------------------------------------------------------------- */

/* Counters derived when read: what the streams count themselves (messages
 * pushed and sent again), and the fitted refill model. */
static void
derived_totals(void)
{
	double lat_us, gbps;
	uint16_t i;

	if (model_fit(&D.fit, &lat_us, &gbps) == 0) {
		D.st.fit_latency_us = (uint64_t)lat_us;
		D.st.fit_mbps = (uint64_t)(gbps * 1000);
	}
	D.st.late_us = D.late_ns / 1000;
	D.st.early_us = D.early_ns / 1000;
	D.st.held_us = D.held_ns / 1000;

	D.st.control_msgs = D.st.retransmits = 0;
	for (i = 0; i < D.nsh; i++) {
		D.st.control_msgs += D.sh[i].stream.st.sent;
		D.st.retransmits += D.sh[i].stream.st.retransmits;
	}
}

static uint64_t
tsc_ms_ago(uint64_t now, uint64_t then)
{
	return then == 0 || now < then ? UINT64_MAX : (now - then) * 1000 / D.hz;
}

static void
snapshot_shards(struct snapshot *sn)
{
	uint64_t now = rte_get_tsc_cycles(), lat_ns;
	double bytes_per_ns;
	uint16_t i, c;

	sn->nsh = D.nsh < DRV_MAX_SHARDS ? D.nsh : DRV_MAX_SHARDS;
	for (i = 0; i < sn->nsh; i++) {
		const struct drv_shard *sh = &D.sh[i];
		const struct proto_stream *ps = &sh->stream;
		struct shard_snap *x = &sn->sh[i];

		x->model = sh->model;
		x->shard_id = sh->ref->id;
		x->port = sh->ref->port;
		x->up = (uint64_t)sh->up;
		x->epoch = sh->epoch;
		x->seq_sent = ps->next_seq - 1;
		x->seq_acked = ps->acked;
		x->backlog = sh->backlog;
		x->retransmits = ps->st.retransmits;
		x->rtt_samples = ps->st.rtt_samples;
		x->stale_acks = ps->st.stale_acks;
		x->bogus_acks = ps->st.bogus_acks;
		x->srtt_us = (uint64_t)(ps->srtt8 >> 3) * 1000000 / D.hz;
		x->timeout_us = ps->timeout * 1000000 / D.hz;
		x->evict_sent = sh->evict_sent;
		x->evict_acked = sh->evict_acked;
		x->batches_complete = sh->batches_complete;
		x->stored_tokens = 0;
		for (c = 0; c < PREFIXCACHE_MAX_CACHES; c++)
			x->stored_tokens += sh->stored[c];
		/* Its model's refill estimates (0 Mb/s: no bandwidth term). */
		x->model_refills_timed = D.ml[sh->model].fit.n;
		if (prefixcache_refill_model(D.pc, sh->model, &lat_ns, &bytes_per_ns) == 0) {
			x->model_estimate_latency_us = lat_ns / 1000;
			x->model_estimate_mbps = (uint64_t)(bytes_per_ns * 8000);
		}
		x->heard_ms_ago = tsc_ms_ago(now, sh->last_rx);
		x->status_ms_ago = tsc_ms_ago(now, sh->status_at);
	}
}

static void
snapshot(void)
{
	struct snapshot *sn = &D.snap;

	derived_totals();
	rte_spinlock_lock(&sn->lock);
	sn->st = D.st;
	snapshot_shards(sn);
	prefixcache_stats(D.pc, &sn->pc);
	sn->norg = prefixcache_orgs(D.pc, sn->org, RTE_DIM(sn->org));
	if (sn->norg > RTE_DIM(sn->org))
		sn->norg = RTE_DIM(sn->org);
	rte_spinlock_unlock(&sn->lock);
}

static int
tel_drv_stats(const char *cmd, const char *params, struct rte_tel_data *d)
{
	struct snapshot *sn = &D.snap;
	int c;

	(void)cmd;
	(void)params;
	rte_tel_data_start_dict(d);
	rte_spinlock_lock(&sn->lock);
#define KVSS_DRV_TEL(n) rte_tel_data_add_dict_u64(d, #n, sn->st.n);
	KVSS_DRV_STATS(KVSS_DRV_TEL)
#undef KVSS_DRV_TEL
	for (c = 1; c < PROTO_E_MAX; c++) {
		char key[48];

		snprintf(key, sizeof(key), "error_%s", proto_err_name((unsigned int)c));
		rte_tel_data_add_dict_u64(d, key, sn->st.errors_by_code[c]);
	}
	rte_tel_data_add_dict_u64(d, "entries", sn->pc.entries);
	rte_tel_data_add_dict_u64(d, "policy_deletes", sn->pc.policy_deletes);
	rte_tel_data_add_dict_u64(d, "policy_bypassed", sn->pc.bypassed);
	rte_tel_data_add_dict_u64(d, "policy_cold_columns", sn->pc.cold_columns);
	rte_tel_data_add_dict_u64(d, "deleted_tokens", sn->pc.deleted_tokens);
	rte_tel_data_add_dict_u64(d, "expired_tokens", sn->pc.expired_tokens);
	rte_tel_data_add_dict_u64(d, "peak_stored_tokens", sn->pc.peak_stored_tokens);
	rte_spinlock_unlock(&sn->lock);
	return 0;
}

static const char *
org_name(uint64_t iso, char *buf, size_t cap)
{
	uint16_t i;

	for (i = 0; i < kvss.cfg.driver.num_orgs; i++) {
		const char *n = kvss.cfg.driver.org[i].name;

		if (proto_ref_isolation_id(n, strlen(n)) == iso)
			return n;
	}
	if (iso == proto_ref_isolation_id("default", 7))
		return "default";
	snprintf(buf, cap, "%016" PRIx64, iso);
	return buf;
}

static int
tel_drv_orgs(const char *cmd, const char *params, struct rte_tel_data *d)
{
	struct snapshot *sn = &D.snap;
	size_t i;

	(void)cmd;
	(void)params;
	rte_tel_data_start_dict(d);
	rte_spinlock_lock(&sn->lock);
	for (i = 0; i < sn->norg; i++) {
		struct rte_tel_data *o = rte_tel_data_alloc();
		char buf[24];

		if (o == NULL)
			break;
		rte_tel_data_start_dict(o);
		rte_tel_data_add_dict_u64(o, "isolation_id", sn->org[i].isolation_id);
		rte_tel_data_add_dict_u64(o, "entries", sn->org[i].entries);
		rte_tel_data_add_dict_u64(o, "cached_tokens", sn->org[i].cached_tokens);
		rte_tel_data_add_dict_u64(o, "hit_tokens", sn->org[i].hit_tokens);
		rte_tel_data_add_dict_u64(o, "requests", sn->org[i].requests);
		rte_tel_data_add_dict_container(d, org_name(sn->org[i].isolation_id, buf, sizeof(buf)),
						o, 0);
	}
	rte_spinlock_unlock(&sn->lock);
	return 0;
}

static int
tel_drv_shards(const char *cmd, const char *params, struct rte_tel_data *d)
{
	struct snapshot *sn = &D.snap;
	uint16_t i;

	(void)cmd;
	(void)params;
	rte_tel_data_start_dict(d);
	rte_spinlock_lock(&sn->lock);
	for (i = 0; i < sn->nsh; i++) {
		const struct shard_snap *x = &sn->sh[i];
		struct rte_tel_data *o = rte_tel_data_alloc();
		char key[32];

		if (o == NULL)
			break;
		rte_tel_data_start_dict(o);
#define SHARD_SNAP_TEL(n) rte_tel_data_add_dict_u64(o, #n, x->n);
		SHARD_SNAP_FIELDS(SHARD_SNAP_TEL)
#undef SHARD_SNAP_TEL
		/* Never heard from (yet): -1 reads better than 2^64 - 1. */
		rte_tel_data_add_dict_int(o, "heard_ms_ago",
					  x->heard_ms_ago > INT32_MAX ? -1 : (int)x->heard_ms_ago);
		rte_tel_data_add_dict_int(o, "status_ms_ago",
					  x->status_ms_ago > INT32_MAX ? -1 : (int)x->status_ms_ago);
		snprintf(key, sizeof(key), "model%" PRIu64 "_shard%" PRIu64, x->model, x->shard_id);
		rte_tel_data_add_dict_container(d, key, o, 0);
	}
	rte_spinlock_unlock(&sn->lock);
	return 0;
}

int
kvss_driver_telemetry_register(void)
{
	if (rte_telemetry_register_cmd("/swdriver/stats", tel_drv_stats,
				       "Driver: requests, hits, refills, evictions, deletes, "
				       "expiries, retransmits, verify failures") != 0 ||
	    rte_telemetry_register_cmd("/swdriver/orgs", tel_drv_orgs,
				       "Driver, per organization: entries, cached tokens, hits") != 0 ||
	    rte_telemetry_register_cmd("/swdriver/shards", tel_drv_shards,
				       "Driver, per shard: up, epoch, control stream (seqs, "
				       "retransmits, round trip, timeout), batches, stored") != 0)
		return -1;
	return 0;
}

/* ---- Set-up ------------------------------------------------------------------------- */

static void
endpoint_addr(struct proto_addr *a, const struct kvss_endpoint *to, uint16_t dst_port)
{
	const struct kvss_endpoint *me = &kvss.cfg.driver.addr;

	memset(a, 0, sizeof(*a));
	memcpy(a->dst_mac, to->mac, 6);
	memcpy(a->src_mac, me->mac, 6);
	a->dst_ip = to->ipv4;
	a->src_ip = me->ipv4;
	a->src_port = kvss.cfg.udp.ctrl;
	a->dst_port = dst_port;
	a->has_vlan = to->vlan != 0;
	a->vlan_tci = to->vlan;
}

int
kvss_driver_init(void)
{
	struct kvss_config *cfg = &kvss.cfg;
	struct prefixcache_params pp = cfg->driver.pc;
	struct prefixcache_sink sink = {.reserve = on_reserve, .evict = on_evict,
					.refill = on_refill, .del = on_delete};
	uint32_t max_entries = proto_evict_max_entries(cfg->mtu);
	char err[512];
	uint16_t m, i, k;

	memset(&D, 0, sizeof(D));
	for (m = 0; m < PREFIXCACHE_MAX_MODELS; m++)
		D.ml[m].factor = 1;
	rte_spinlock_init(&D.snap.lock);
	D.hz = rte_get_tsc_hz();
	/* One EVICT frame holds G x C entries: G follows from the MTU. */
	for (m = 0; m < pp.num_models; m++) {
		uint32_t g = max_entries / pp.model[m].num_caches;

		if (pp.model[m].max_batch_tokens == 0 || pp.model[m].max_batch_tokens > g)
			pp.model[m].max_batch_tokens = (uint16_t)(g > 65535 ? 65535 : g);
	}
	D.pc = prefixcache_create(&pp, &sink);
	if (D.pc == NULL) {
		fprintf(stderr, "kvss: %s: driver: the models do not make a valid driver\n", cfg->path);
		return -1;
	}
	for (i = 0; i < cfg->driver.num_orgs; i++) {
		const struct kvss_org_ttl *o = &cfg->driver.org[i];

		prefixcache_org_ttl(D.pc, proto_ref_isolation_id(o->name, strlen(o->name)),
				    o->ttl_last_ns, o->ttl_first_ns);
	}
	for (m = 0; m < pp.num_models; m++)
		D.nsh = (uint16_t)(D.nsh + cfg->driver.models[m].num_shards);
	D.sh = rte_zmalloc("kvss_drv_shards", sizeof(*D.sh) * D.nsh, 64);
	D.seq = calloc(cfg->wafer.max_inflight, sizeof(*D.seq));
	if (D.sh == NULL || D.seq == NULL)
		return -1;
	k = 0;
	for (m = 0; m < pp.num_models; m++) {
		D.model_epoch[m] = kvss.epoch;
		D.first_shard[m] = k;
		D.nshards[m] = cfg->driver.models[m].num_shards;
		for (i = 0; i < D.nshards[m]; i++, k++) {
			struct drv_shard *sh = &D.sh[k];

			sh->model = m;
			sh->idx = i;
			sh->ref = &cfg->driver.models[m].shard[i];
			endpoint_addr(&sh->ctrl, &sh->ref->addr, cfg->udp.ctrl);
			endpoint_addr(&sh->evict, &sh->ref->addr, cfg->udp.evict);
			if (proto_stream_init(&sh->stream, PROTO_STREAM_WINDOW_MAX,
					      D.hz / 1000 * cfg->driver.retransmit_ms) != 0)
				return -1;
			if (port_slot(sh->ref->port) < 0) {
				struct rte_eth_dev_info info;

				if (D.nports == DRV_MAX_PORTS ||
				    rte_eth_dev_info_get(sh->ref->port, &info) != 0)
					return -1;
				D.nrxq[D.nports] = RTE_MAX(info.nb_rx_queues, 1);
				D.ports[D.nports++] = sh->ref->port;
			}
		}
	}
	/* The requests: the trace, or the built-in workload when it is not there. */
	if (cfg->wafer.trace[0] != '\0' && access(cfg->wafer.trace, R_OK) == 0) {
		if (workload_load(cfg->wafer.trace, 512, cfg->wafer.limit, &D.wl, err, sizeof(err)) != 0) {
			fprintf(stderr, "kvss: %s: wafer.trace: %s\n", cfg->path, err);
			return -1;
		}
		snprintf(D.source, sizeof(D.source), "%s", cfg->wafer.trace);
	} else {
		uint32_t n = cfg->wafer.limit ? cfg->wafer.limit : cfg->wafer.generate;

		if (workload_generate(n, &D.wl) != 0)
			return -1;
		snprintf(D.source, sizeof(D.source), "the built-in workload%s",
			 cfg->wafer.trace[0] ? " (the trace is not there)" : "");
	}
	if (kvss.record_expect != NULL) {
		D.open_loop = 1;
		D.expect = fopen(kvss.record_expect, "w");
		if (D.expect == NULL) {
			fprintf(stderr, "kvss: --record-expect %s: %s\n", kvss.record_expect,
				strerror(errno));
			return -1;
		}
		fprintf(D.expect, "kvss-expect 1 driver-epoch %u\n", kvss.epoch);
		printf("kvss: driver: recording open loop; expectations in %s\n", kvss.record_expect);
	}
	D.nreq = D.wl.n;
	if (cfg->wafer.limit && D.nreq > cfg->wafer.limit)
		D.nreq = cfg->wafer.limit;
	printf("kvss: driver: %zu requests from %s; %u model(s), %u shard(s), epoch 0x%08x\n", D.nreq,
	       D.source, pp.num_models, D.nsh, kvss.epoch);
	fflush(stdout);
	return 0;
}

void
kvss_driver_free(void)
{
	uint32_t b, i;

	for (b = 0; b < HBUCKETS; b++) {
		while (D.rf[b] != NULL) {
			struct drv_refill *r = D.rf[b];

			D.rf[b] = r->hnext;
			free(r->hash);
			free(r);
		}
		while (D.pid[b] != NULL) {
			struct pid_node *n = D.pid[b];

			D.pid[b] = n->next;
			free(n);
		}
	}
	for (i = 0; D.seq != NULL && i < kvss.cfg.wafer.max_inflight; i++)
		if (D.seq[i].state != SEQ_FREE) {
			free(D.seq[i].tok);
			free(D.seq[i].h);
		}
	while (D.jhead != NULL) {
		struct data_job *j = D.jhead;

		D.jhead = j->next;
		free(j);
	}
	for (i = 0; i < D.nsh; i++) {
		free_backlog(&D.sh[i]);
		proto_stream_fini(&D.sh[i].stream);
	}
	for (i = 0; i < D.nports; i++) {
		rte_pktmbuf_free_bulk(D.txq[i].c, D.txq[i].nc);
		rte_pktmbuf_free_bulk(D.txq[i].m, D.txq[i].n);
	}
	free(D.seq);
	rte_free(D.sh);
	free(D.lat_us);
	free(D.est_us);
	prefixcache_free(D.pc);
	workload_free(&D.wl);
	D.pc = NULL;
}

/* ---- The loop ----------------------------------------------------------------------- */

/*
 * A shard that is away (its port's link went down, or nothing heard from it
 * for away_ms) holds nothing we can count on: its model drops its prefixes,
 * fails its refills and takes a new epoch at once (model_restart), and runs
 * as misses until every shard answers the new HELLO. Without this, requests
 * waited for refills to time out and the wafer stopped on the backlog. With
 * away_ms = 0 no shard is ever away: the wafer waits while one is not up.
 */
static void
shard_away(struct drv_shard *sh, uint64_t tsc, const char *why)
{
	if (kvss.cfg.driver.away_ms == 0 || !sh->up)
		return; /* away_ms = 0: never away, the driver waits for it */
	D.st.shards_away++;
	model_restart(sh->model, tsc, why, sh, &D.st.shard_restarts);
}

/* Shards that have sent nothing for away_ms. */
static void
watch_silence(uint64_t tsc)
{
	uint16_t i;

	for (i = 0; i < D.nsh; i++)
		if (tsc - D.sh[i].last_rx > D.hz / 1000 * kvss.cfg.driver.away_ms)
			shard_away(&D.sh[i], tsc, "is away (nothing heard from it)");
}

/*
 * A link that went down (a memif peer that restarted) comes back only when
 * the port starts again: a memif client connects when its port starts.
 * Checked every 500 ms; a port down for a second is restarted.
 */
static void
watch_links(uint64_t tsc)
{
	static uint64_t down_since[DRV_MAX_PORTS];
	uint16_t i, k;

	for (i = 0; i < D.nports; i++) {
		struct rte_eth_link link;

		if (rte_eth_link_get_nowait(D.ports[i], &link) != 0 || link.link_status) {
			down_since[i] = 0;
			continue;
		}
		if (down_since[i] == 0) {
			down_since[i] = tsc;
			for (k = 0; k < D.nsh; k++)
				if (D.sh[k].ref->port == D.ports[i])
					shard_away(&D.sh[k], tsc, "is away (its link went down)");
			continue;
		}
		if (tsc - down_since[i] < D.hz)
			continue;
		/* Not while the interrupt thread may be connecting it (portgate.c). */
		if (!kvss_gate_enter())
			continue;
		printf("kvss: driver: port %u is down: restarting it\n", D.ports[i]);
		fflush(stdout);
		if (!D.port_stopped[i])
			rte_eth_dev_stop(D.ports[i]);
		D.port_stopped[i] = rte_eth_dev_start(D.ports[i]) != 0;
		if (D.port_stopped[i])
			fprintf(stderr, "kvss: driver: port %u: restart failed (its peer is not there yet?); "
					"trying again in a second\n", D.ports[i]);
		kvss_gate_leave();
		D.st.link_restarts++;
		down_since[i] = tsc;
	}
}

/*
 * Every request done and every message acknowledged; then every shard's
 * STATUS shows all its batches complete (so every DELETE can run), and one
 * more STATUS after that gives what it holds (the summary's check).
 */
static int
quiet(uint64_t tsc)
{
	uint16_t i;

	if (D.next_req < D.nreq || D.nactive || D.nrefill)
		return 0;
	/* What waits only for a shard that is away waits for nobody. */
	if (jobs_for_up_shards(1) > 0)
		return 0;
	for (i = 0; i < D.nsh; i++)
		if (D.sh[i].up && (D.sh[i].backlog || D.sh[i].open_on ||
				   proto_stream_unacked(&D.sh[i].stream) ||
				   D.txq[port_slot(D.sh[i].ref->port)].n ||
				   D.txq[port_slot(D.sh[i].ref->port)].nc))
			return 0;
	if (D.open_loop)
		return 1;
	for (i = 0; i < D.nsh; i++)
		if (D.sh[i].up && D.sh[i].batches_complete < D.sh[i].evict_sent)
			return 0;
	if (D.settle_at == 0) {
		D.settle_at = tsc;
		return 0;
	}
	for (i = 0; i < D.nsh; i++)
		if (D.sh[i].up && D.sh[i].status_at <= D.settle_at)
			return 0;
	return 1;
}

/*
 * What each shard holds (its last STATUS, after everything ran) against what
 * the driver accounts for it: tokens stored that nobody can delete, or
 * tokens the driver would refill that are not there. Both must be 0.
 */
static uint64_t
unaccounted(int say)
{
	uint64_t sum = 0;
	uint16_t i, c;

	if (!D.finished || D.open_loop)
		return 0;
	for (i = 0; i < D.nsh; i++) {
		const struct drv_shard *sh = &D.sh[i];

		if (!sh->up)
			continue;
		for (c = 0; c < kvss.cfg.driver.pc.model[sh->model].num_caches; c++) {
			uint64_t mine = prefixcache_stored(D.pc, sh->model, c);
			uint64_t d = sh->stored[c] > mine ? sh->stored[c] - mine : mine - sh->stored[c];

			if (d && say)
				printf("kvss: summary: shard %u of model %u holds %" PRIu64
				       " tokens in cache %u; the driver accounts for %" PRIu64 "\n",
				       sh->ref->id, sh->model, sh->stored[c], c, mine);
			sum += d;
		}
	}
	return sum;
}

static void
progress(uint64_t tsc)
{
	double s = (double)(tsc - D.t_start) / (double)D.hz;

	printf("kvss: driver: %6.1f s  %" PRIu64 "/%zu requests, hit ratio %.4f, evicted %.2f GB "
	       "(%.2f GB/s), refilled %.2f GB (%.2f GB/s), verify failures %" PRIu64 "\n",
	       s, D.st.completed, D.nreq,
	       D.st.prompt_tokens ? (double)D.st.hit_tokens / (double)D.st.prompt_tokens : 0.0,
	       (double)D.st.evict_bytes / 1e9, s > 0 ? (double)D.st.evict_bytes / 1e9 / s : 0,
	       (double)D.st.refill_bytes / 1e9, s > 0 ? (double)D.st.refill_bytes / 1e9 / s : 0,
	       D.st.verify_failures);
	fflush(stdout);
}

int
kvss_driver_main(void *arg)
{
	struct kvss_lcore_stats *st = lst();
	uint64_t tsc0 = rte_get_tsc_cycles(), next_progress, next_expire, next_snap, start_deadline,
		 next_link;
	struct rte_mbuf *pkts[BURST];
	unsigned int empty = 0;
	uint16_t i;

	(void)arg;
	D.t_start = tsc0;
	next_progress = tsc0 + 2 * D.hz;
	next_expire = tsc0;
	next_snap = tsc0;
	next_link = tsc0 + D.hz;
	start_deadline = tsc0 + D.hz / 1000 * kvss.cfg.driver.start_timeout_ms;
	for (i = 0; i < D.nsh; i++) {
		send_hello(&D.sh[i], tsc0);
		if (D.open_loop) {
			uint16_t c;

			D.sh[i].up = 1;
			for (c = 0; c < PREFIXCACHE_MAX_CACHES; c++)
				D.sh[i].num_buffers[c] = D.sh[i].ref->buffers[c];
		}
	}
	while (!kvss_quitting() && !D.fatal) {
		uint64_t t0 = rte_get_tsc_cycles();
		int work = 0;
		uint16_t p, q, n, k;

		for (p = 0; p < D.nports; p++) {
			if (D.port_stopped[p])
				continue;
			for (q = 0; q < D.nrxq[p]; q++) {
				n = kvss_rx_burst(D.ports[p], q, pkts, BURST);
				for (k = 0; k < n; k++) {
					receive(pkts[k], t0);
					rte_pktmbuf_free(pkts[k]);
				}
				work += n;
			}
		}
		for (i = 0; i < D.nsh; i++)
			if (!D.sh[i].up && t0 - D.sh[i].hello_at > D.hz / 1000 * kvss.cfg.driver.hello_ms)
				send_hello(&D.sh[i], t0);
		if (!D.started) {
			if (all_up()) {
				D.started = 1;
				D.t_start = t0;
				printf("kvss: driver: every shard is up; replaying\n");
				fflush(stdout);
			} else if (t0 > start_deadline) {
				for (i = 0; i < D.nsh; i++)
					if (!D.sh[i].up)
						fprintf(stderr, "kvss: driver: shard %u of model %u (port %u, %s) "
								"did not answer HELLO in %u ms\n",
							D.sh[i].ref->id, D.sh[i].model, D.sh[i].ref->port,
							kvss.cfg.path, kvss.cfg.driver.start_timeout_ms);
				D.fatal = 3;
				break;
			}
		} else {
			work += engine(t0);
			check_timeouts(t0);
		}
		pump_streams(t0);
		work += pump_data();
		txq_flush();
		if (D.started && t0 >= next_expire) {
			D.st.expiries += prefixcache_expire(D.pc, now_ns(t0), 1024);
			next_expire = t0 + D.hz / 100;
		}
		if (t0 >= next_snap) {
			snapshot();
			next_snap = t0 + D.hz / 10;
		}
		if (t0 >= next_link && !D.open_loop) {
			watch_links(t0);
			if (D.started)
				watch_silence(t0);
			next_link = t0 + D.hz / 2;
		}
		if (D.started && t0 >= next_progress) {
			progress(t0);
			next_progress = t0 + 2 * D.hz;
		}
		if (D.started && quiet(t0)) {
			D.finished = 1;
			break;
		}
		if (work)
			kvss_poll_busy(st, t0, &empty);
		else
			kvss_poll_idle(st, t0, &empty);
	}
	D.t_end = rte_get_tsc_cycles();
	/* The run's time ends when the shards had it all, not after the check's wait. */
	if (D.finished && D.settle_at != 0)
		D.t_end = D.settle_at;
	txq_flush();
	if (D.expect != NULL) {
		for (i = 0; i < D.nsh; i++)
			fprintf(D.expect, "control model %u shard %u messages %" PRIu64 " epoch %u\n",
				D.sh[i].model, D.sh[i].ref->id, D.sh[i].stream.next_seq - 1,
				D.model_epoch[D.sh[i].model]);
		fprintf(D.expect, "end %s\n", D.finished ? "finished" : "stopped");
		fclose(D.expect);
		D.expect = NULL;
	}
	snapshot();
	if (D.started)
		progress(D.t_end);
	/* 2, not a signal's 1: main() then takes the exit status from the run. */
	__atomic_store_n(&kvss.quit, 2, __ATOMIC_RELAXED);
	return 0;
}

/* ---- The summary -------------------------------------------------------------------- */

static int
cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return x < y ? -1 : x > y;
}

static uint32_t
pct(const uint32_t *v, size_t n, double p)
{
	size_t i;

	if (n == 0)
		return 0;
	i = (size_t)ceil(p * (double)n) - 1;
	return v[i < n ? i : n - 1];
}

static uint64_t
protocol_errors(void)
{
	return D.st.errors + D.st.refill_failures + D.st.refill_timeouts + D.st.rx_drops +
	       D.st.too_big + D.st.lost_tokens;
}

int
kvss_driver_status(void)
{
	if (D.fatal)
		return D.fatal == 2 ? 2 : 1;
	return D.st.verify_failures || protocol_errors() || unaccounted(0) ? 1 : 0;
}

/* [{"model":M,"refills":N,"latency_us":X,"gbps":Y,"scale":S}, ...]: each model's own line. */
static void
model_fits_json(char *out, size_t size)
{
	size_t n = 0;
	uint16_t m;

	n += (size_t)snprintf(out, size, "[");
	for (m = 0; m < kvss.cfg.driver.pc.num_models && n < size; m++) {
		const struct model_learn *l = &D.ml[m];
		char line[64] = "\"latency_us\":null,\"gbps\":null";
		double us, gbps;

		if (model_fit(&l->fit, &us, &gbps) == 0)
			snprintf(line, sizeof(line), "\"latency_us\":%.0f,\"gbps\":%.3f", us, gbps);
		n += (size_t)snprintf(out + n, size - n,
				      "%s{\"model\":%u,\"refills\":%" PRIu64 ",%s,\"scale\":%.3f}",
				      m ? "," : "", m, l->fit.n, line, l->factor);
	}
	if (n < size)
		snprintf(out + n, size - n, "]");
}

void
kvss_driver_summary(void)
{
	const struct kvss_drv_stats *s = &D.st;
	double secs = D.started ? (double)(D.t_end - D.t_start) / (double)D.hz : 0;
	double hr = s->prompt_tokens ? (double)s->hit_tokens / (double)s->prompt_tokens : 0;
	double egbs = secs > 0 ? (double)s->evict_bytes / 1e9 / secs : 0;
	double rgbs = secs > 0 ? (double)s->refill_bytes / 1e9 / secs : 0;
	uint32_t p50 = 0, p99 = 0, e50 = 0, e99 = 0;
	uint64_t perr = protocol_errors(), lost = unaccounted(1);
	double fit_us, fit_gbps;
	char fitj[112] = "\"fit_refill_latency_us\":null,\"fit_refill_gbps\":null";
	struct prefixcache_stats ps;
	bool learned = kvss.cfg.driver.refill_model == KVSS_MODEL_LEARNED;
	char fitsj[PREFIXCACHE_MAX_MODELS * 112 + 4];
	uint16_t m;

	if (D.pc == NULL)
		return;
	derived_totals();
	prefixcache_stats(D.pc, &ps);
	if (D.nlat) {
		qsort(D.lat_us, D.nlat, sizeof(uint32_t), cmp_u32);
		qsort(D.est_us, D.nlat, sizeof(uint32_t), cmp_u32);
		p50 = pct(D.lat_us, D.nlat, 0.50);
		p99 = pct(D.lat_us, D.nlat, 0.99);
		e50 = pct(D.est_us, D.nlat, 0.50);
		e99 = pct(D.est_us, D.nlat, 0.99);
	}
	printf("kvss: summary: %s%s\n", D.finished ? "" : "(stopped early) ", D.source);
	printf("kvss: summary: requests %" PRIu64 " of %zu, prompt tokens %" PRIu64 ", hit tokens %" PRIu64
	       ", hit ratio %.4f\n", s->completed, D.nreq, s->prompt_tokens, s->hit_tokens, hr);
	printf("kvss: summary: evicted %" PRIu64 " tokens, %" PRIu64 " bytes, %.3f GB/s; refilled %" PRIu64
	       " tokens, %" PRIu64 " bytes, %.3f GB/s; %.2f s\n",
	       s->evicted_tokens, s->evict_bytes, egbs, s->refilled_tokens, s->refill_bytes, rgbs, secs);
	printf("kvss: summary: refills %" PRIu64 ", latency p50 %u us, p99 %u us (the driver's model: "
	       "p50 %u us, p99 %u us)", s->refills, p50, p99, e50, e99);
	if (s->seq_refill_failed)
		printf("; %" PRIu64 " sequences' refills failed, not timed", s->seq_refill_failed);
	printf("\n");
	/* The design picks a sequence again once its estimate has passed: a
	 * refill that took longer would make the wafer wait for its data. */
	if (D.fit.n)
		printf("kvss: summary: the model's estimate fell short of the time taken for %" PRIu64
		       " of %" PRIu64 " refills (%.1f%%)%s\n", s->model_short, D.fit.n,
		       100.0 * (double)s->model_short / (double)D.fit.n,
		       !learned ? ""
		       : kvss.cfg.driver.refill_short_pct
			       ? "; the estimates followed the fitted model, scaled for a share short "
				 "(refill_model = \"learned\", refill_short_pct)"
			       : "; the estimates followed the fitted model (refill_model = \"learned\")");
	if (learned && kvss.cfg.driver.refill_short_pct)
		printf("kvss: summary: the learned model's scale: %.3f, for %u%% of refills to take "
		       "longer than estimated\n", D.ml[0].factor, kvss.cfg.driver.refill_short_pct);
	/* Both ways an estimate costs: past it the wafer waits for data (wait_recv);
	 * before it, the sequence waits to be picked. */
	if (D.fit.n) {
		uint64_t early = D.fit.n - s->model_short;

		printf("kvss: summary: refills past their estimate by %.1f ms in all (%.0f us each), "
		       "the wafer waiting for their data; before it by %.1f ms in all (%.0f us each)%s",
		       (double)D.late_ns / 1e6,
		       s->model_short ? (double)D.late_ns / 1e3 / (double)s->model_short : 0.0,
		       (double)D.early_ns / 1e6, early ? (double)D.early_ns / 1e3 / (double)early : 0.0,
		       kvss.cfg.wafer.resume == KVSS_RESUME_ESTIMATE
			       ? ", their sequences waiting to be picked"
			       : ", which the design would have made their sequences wait "
				 "(wafer.resume = \"whole\" did not)");
		if (kvss.cfg.wafer.resume == KVSS_RESUME_ESTIMATE)
			printf(" (%.1f ms held in all)", (double)D.held_ns / 1e6);
		printf("\n");
	}
	/* What the model would have to say to match: in the configuration's own
	 * keys and units, for an operator to copy (model 0's shown beside it). */
	if (model_fit(&D.fit, &fit_us, &fit_gbps) == 0) {
		const struct prefixcache_model *pm = &kvss.cfg.driver.pc.model[0];
		char gbps[64] = "no bound (the times did not grow with the bytes)", used[64] = "";

		if (learned && D.learned_at)
			snprintf(used, sizeof(used), ", used for the first %" PRIu64 " refills", D.learned_at);
		else if (learned)
			snprintf(used, sizeof(used), ", used for all of them");

		if (fit_gbps > 0) {
			snprintf(gbps, sizeof(gbps), "%.2f", fit_gbps);
			snprintf(fitj, sizeof(fitj), "\"fit_refill_latency_us\":%.0f,\"fit_refill_gbps\":%.3f",
				 fit_us, fit_gbps);
		} else {
			snprintf(fitj, sizeof(fitj), "\"fit_refill_latency_us\":%.0f,\"fit_refill_gbps\":null",
				 fit_us);
		}
		printf("kvss: summary: the model fitted to these %" PRIu64 " refills: refill_latency_us = %.0f, "
		       "refill_gbps = %s (configured: %.0f and %.2f%s)\n", D.fit.n, fit_us, gbps,
		       (double)pm->refill_latency_ns / 1000, pm->refill_bytes_per_ns * 8, used);
	} else {
		printf("kvss: summary: the model fitted to these refills: too few, or all of one size\n");
	}
	/* Each model learns apart (a draft's shards are not the target's). */
	for (m = 0; kvss.cfg.driver.pc.num_models > 1 && m < kvss.cfg.driver.pc.num_models; m++) {
		const struct model_learn *l = &D.ml[m];

		if (model_fit(&l->fit, &fit_us, &fit_gbps) == 0)
			printf("kvss: summary: model %u's own %" PRIu64 " refills fit refill_latency_us = "
			       "%.0f, refill_gbps = %.2f (0: no bound)%s%.3f\n", m, l->fit.n, fit_us, fit_gbps,
			       learned ? ", its estimates scaled by " : ", scale ", l->factor);
		else
			printf("kvss: summary: model %u's own %" PRIu64 " refills: too few to fit, or all of "
			       "one size\n", m, l->fit.n);
	}
	model_fits_json(fitsj, sizeof(fitsj));
	printf("kvss: summary: deletes %" PRIu64 ", policy deletes %" PRIu64 ", expiries %" PRIu64
	       ", retransmits %" PRIu64 ", shard restarts %" PRIu64 ", peak stored %" PRIu64 " tokens\n",
	       s->deletes, ps.policy_deletes, s->expiries, s->retransmits, s->shard_restarts,
	       ps.peak_stored_tokens);
	printf("kvss: summary: ports: %" PRIu64 " restarted after their link went down, %" PRIu64
	       " frames dropped for a link that was down, %" PRIu64 " control frames for a full queue; %"
	       PRIu64 " times a shard was away, %" PRIu64 " requests begun as misses meanwhile\n",
	       s->link_restarts, s->tx_link_drops, s->tx_full_drops, s->shards_away, s->away_requests);
	printf("kvss: summary: verify failures %" PRIu64 " (bad bytes %" PRIu64 ", bad frames %" PRIu64
	       ", bad glue %" PRIu64 "), protocol errors %" PRIu64 " (ERROR records %" PRIu64
	       ", refill failures %" PRIu64
	       ", refill timeouts %" PRIu64 ", lost tokens %" PRIu64 ", dropped frames %" PRIu64 ")\n",
	       s->verify_failures, s->verify_bad_bytes, s->verify_bad_frames, s->verify_bad_glue, perr,
	       s->errors,
	       s->refill_failures, s->refill_timeouts, s->lost_tokens, s->rx_drops);
	printf("kvss: summary: resyncs %" PRIu64 " (data frames withheld on purpose %" PRIu64
	       "); the shards hold what the driver accounts for: %s (%" PRIu64 " tokens off)\n",
	       s->resyncs, s->data_withheld,
	       !D.finished ? "not checked" : lost == 0 ? "yes" : "NO", lost);
	printf("{\"requests\":%" PRIu64 ",\"prompt_tokens\":%" PRIu64 ",\"hit_tokens\":%" PRIu64
	       ",\"hit_ratio\":%.4f,\"evicted_tokens\":%" PRIu64 ",\"refilled_tokens\":%" PRIu64
	       ",\"evict_bytes\":%" PRIu64 ",\"refill_bytes\":%" PRIu64 ",\"evict_gbps\":%.3f"
	       ",\"refill_gbps\":%.3f,\"seconds\":%.2f,\"refills\":%" PRIu64
	       ",\"refills_timed\":%" PRIu64 ",\"refills_failed\":%" PRIu64
	       ",\"refill_p50_us\":%u,\"refill_p99_us\":%u,\"model_p50_us\":%u,\"model_p99_us\":%u"
	       ",\"refill_model\":\"%s\",\"model_scale\":%.3f,\"model_short_share\":%.4f,%s"
	       ",\"model_fits\":%s,\"resume\":\"%s\",\"refill_late_ms\":%.3f,\"refill_early_ms\":%.3f,\"held_ms\":%.3f"
	       ",\"retransmits\":%" PRIu64 ",\"control_frames_dropped\":%" PRIu64
	       ",\"shard_restarts\":%" PRIu64 ",\"verify_failures\":%" PRIu64
	       ",\"protocol_errors\":%" PRIu64 ",\"resyncs\":%" PRIu64 ",\"unaccounted_tokens\":%" PRIu64
	       ",\"finished\":%s}\n",
	       s->completed, s->prompt_tokens, s->hit_tokens, hr, s->evicted_tokens, s->refilled_tokens,
	       s->evict_bytes, s->refill_bytes, egbs, rgbs, secs, s->refills, D.fit.n,
	       s->seq_refill_failed, p50, p99, e50, e99,
	       learned ? "learned" : "configured", D.ml[0].factor,
	       D.fit.n ? (double)s->model_short / (double)D.fit.n : 0.0,
	       fitj, fitsj, kvss.cfg.wafer.resume == KVSS_RESUME_ESTIMATE ? "estimate" : "whole",
	       (double)D.late_ns / 1e6, (double)D.early_ns / 1e6, (double)D.held_ns / 1e6,
	       s->retransmits, s->tx_full_drops, s->shard_restarts, s->verify_failures, perr, s->resyncs, lost,
	       D.finished ? "true" : "false");
	fflush(stdout);
}
