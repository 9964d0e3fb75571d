/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Refills on the wire: REFILL_DATA frames as gather lists. Each frame is a
 * header mbuf chained to mbufs with external buffers that point into the
 * store (no payload copy); all of one refill's attachments share one
 * rte_mbuf_ext_shared_info, whose free callback ends the refill in the store
 * when the last of them is freed, by the PMD after transmission or by
 * whoever drops them. Until then the store keeps that memory as it is.
 */
#include <rte_ethdev.h>
#include <rte_lcore.h>
#include <rte_memory.h>
#include <rte_mbuf.h>

#include "kvss.h"

#define REFILLS_MAX 128 /* refills whose mbufs are in flight */
/* Attached mbufs per refill at most: the shared info's refcount is 16-bit. */
#define REFILL_SEGS_MAX 60000

struct refill_ctx {
	struct rte_mbuf_ext_shared_info sh;
	struct kvstore_refill *r;
	int used; /* taken by the sending lcore, given back by the free callback */
} __rte_cache_aligned; /* whoever frees one refill's mbufs does not slow the next one's */

/*
 * The IOVA of stored bytes at @p addr, for a buffer attached to them.
 * rte_mem_virt2iova() reads /proc/self/pagemap when IOVA is a physical
 * address (hugepages without --iova-mode=va), a system call per buffer
 * that made a shard's 16 KiB refills 50 times slower (bench_shard: 1.7
 * against 81 GB/s); the store is DPDK's memory, whose segment knows its
 * IOVA. (rte_malloc_virt2iova() takes an allocation's start only: inside
 * it, it reads a header that is not there.) Within one page: the PMDs kvss
 * runs on here read buffers by their virtual address.
 */
static inline rte_iova_t
store_iova(void *addr)
{
	const struct rte_memseg *ms;

	if (rte_eal_iova_mode() == RTE_IOVA_VA)
		return (rte_iova_t)(uintptr_t)addr;
	ms = rte_mem_virt2memseg(addr, NULL);
	if (ms != NULL && ms->iova != RTE_BAD_IOVA)
		return ms->iova + RTE_PTR_DIFF(addr, ms->addr);
	return rte_mem_virt2iova(addr);
}

/*
 * Each lcore's own, by lcore id (each shard's ingest or refill lcore sends
 * its refills; a thread that is no lcore takes the last row): taken by
 * that lcore only, given back by whoever frees the last mbuf, and counted
 * from any thread (kvss_refills_in_flight: a shard stopping waits for
 * them before its store's memory goes).
 */
static struct refill_ctx rctx[RTE_MAX_LCORE + 1][REFILLS_MAX];

static struct refill_ctx *
rctx_mine(void)
{
	unsigned int id = rte_lcore_id();

	return rctx[id < RTE_MAX_LCORE ? id : RTE_MAX_LCORE];
}

static void
refill_release(void *addr, void *opaque)
{
	struct refill_ctx *c = opaque;

	(void)addr;
	kvstore_refill_end(c->r);
	__atomic_store_n(&c->used, 0, __ATOMIC_RELEASE);
}

static struct refill_ctx *
rctx_get(void)
{
	struct refill_ctx *row = rctx_mine();
	unsigned int i;

	for (i = 0; i < REFILLS_MAX; i++)
		if (!__atomic_load_n(&row[i].used, __ATOMIC_ACQUIRE)) {
			row[i].used = 1;
			return &row[i];
		}
	return NULL;
}

/*
 * Send one refill as REFILL_DATA streams, one per buffer: each frame is a
 * header mbuf chained to external-buffer mbufs over the store's memory (no
 * copy). Returns bytes sent, or -1 when out of mbufs or contexts.
 */
static int64_t
send_refill(struct kvss_shard_inst *me, struct kvss_lcore_stats *st, uint16_t queue,
	    const struct proto_refill_req *rq, struct kvstore_refill *r, struct refill_ctx *ctx)
{
	const struct kvstore_params *kp = kvstore_params(me->store);
	uint16_t nb = kp->cache[rq->cache_id].num_buffers, b;
	uint32_t max = kvss_payload_cap() - PROTO_HDR_LEN - PROTO_REFILL_DATA_HDR_LEN;
	uint64_t stream_len = kvstore_refill_buffer_len(r), sent = 0;
	uint32_t attached = 0;
	bool cut = false;
	struct proto_addr a = {0};

	memcpy(a.src_mac, me->cfg->addr.mac, 6);
	memcpy(a.dst_mac, me->cfg->wafer.mac, 6);
	a.src_ip = me->cfg->addr.ipv4;
	a.dst_ip = me->cfg->wafer.ipv4;
	a.src_port = a.dst_port = kvss.cfg.udp.refill;
	a.has_vlan = me->cfg->addr.vlan != 0;
	a.vlan_tci = me->cfg->addr.vlan;
	/* One reference held while building, dropped at the end. */
	rte_mbuf_ext_refcnt_set(&ctx->sh, 1);
	ctx->sh.free_cb = refill_release;
	ctx->sh.fcb_opaque = ctx;
	ctx->r = r;
	for (b = 0; b < nb; b++) {
		struct kvstore_refill_pos pos;
		struct kvstore_seg seg[16];
		unsigned int n, i;

		memset(&pos, 0, sizeof(pos));
		while ((n = kvstore_refill_next(r, b, &pos, max, seg, 16)) > 0) {
			struct rte_mbuf *h = rte_pktmbuf_alloc(kvss.pool);
			uint32_t len = 0, hl = proto_l2l4_len(&a);
			struct proto_refill_data_hdr dh;
			struct proto_builder bb;
			struct proto_hdr ph = {.type = PROTO_T_REFILL_DATA,
					       .model_id = me->cfg->model,
					       .shard_id = me->cfg->id,
					       .epoch = kvss.epoch};
			uint8_t *p;

			for (i = 0; i < n; i++)
				len += seg[i].len;
			if (h == NULL || attached + n > REFILL_SEGS_MAX) {
				rte_pktmbuf_free(h);
				st->no_mbuf++;
				goto fail;
			}
			p = (uint8_t *)rte_pktmbuf_append(h, (uint16_t)(hl + PROTO_HDR_LEN +
								     PROTO_REFILL_DATA_HDR_LEN));
			proto_write_l2l4(p, &a, PROTO_HDR_LEN + PROTO_REFILL_DATA_HDR_LEN + len);
			dh = (struct proto_refill_data_hdr){rq->refill_id, rq->sequence_id, rq->cache_idx,
							    rq->cache_id, b,
							    (uint32_t)(pos.done - len), (uint32_t)stream_len};
			/* The header mbuf holds the headers; the bytes follow chained. */
			proto_build_begin(&bb, p + hl, PROTO_HDR_LEN + PROTO_REFILL_DATA_HDR_LEN, &ph);
			proto_build_refill_data_hdr(&bb, &dh);
			proto_build_gather(&bb, len);
			proto_build_end(&bb);
			for (i = 0; i < n; i++) {
				struct rte_mbuf *x = rte_pktmbuf_alloc(kvss.pool);
				void *addr = (void *)(uintptr_t)seg[i].addr;

				if (x == NULL) {
					rte_pktmbuf_free(h);
					st->no_mbuf++;
					goto fail;
				}
				rte_mbuf_ext_refcnt_update(&ctx->sh, 1);
				attached++;
				rte_pktmbuf_attach_extbuf(x, addr, store_iova(addr),
							  (uint16_t)seg[i].len, &ctx->sh);
				x->data_len = (uint16_t)seg[i].len;
				x->pkt_len = seg[i].len;
				if (rte_pktmbuf_chain(h, x) != 0) {
					rte_pktmbuf_free(x);
					rte_pktmbuf_free(h);
					goto fail;
				}
			}
			kvss_tx_one(me, st, queue, h, len);
			sent += len;
			st->refill_frames++;
		}
		/* A buffer's transfer that ended short: a loss or a new epoch cut
		 * the prompt under the refill (a refill lcore runs it between the
		 * ingest lcore's batches). Its REFILL_DONE must not say OK. */
		if (pos.done != stream_len)
			cut = true;
	}
	/* Drop the building reference: the refill ends when the NIC is done. */
	if (rte_mbuf_ext_refcnt_update(&ctx->sh, -1) == 0)
		refill_release(NULL, ctx);
	return cut ? -2 : (int64_t)sent;
fail:
	if (rte_mbuf_ext_refcnt_update(&ctx->sh, -1) == 0)
		refill_release(NULL, ctx);
	return -1;
}

int64_t
kvss_refill_send(struct kvss_shard_inst *me, struct kvss_lcore_stats *st, uint16_t queue,
		 const struct proto_refill_req *rq, struct kvstore_refill *r)
{
	struct refill_ctx *ctx = rctx_get();

	if (ctx == NULL) {
		kvstore_refill_end(r);
		return -1;
	}
	return send_refill(me, st, queue, rq, r, ctx);
}

unsigned int
kvss_refills_in_flight(void)
{
	unsigned int l, i, n = 0;

	for (l = 0; l <= RTE_MAX_LCORE; l++)
		for (i = 0; i < REFILLS_MAX; i++)
			n += __atomic_load_n(&rctx[l][i].used, __ATOMIC_ACQUIRE) != 0;
	return n;
}
