/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The application's zero-copy refills on a real port (net_ring, which loops
 * what it sends back to its receive side): the frames carry the stored bytes
 * through chained external-buffer mbufs, and the store keeps that memory,
 * even after the tokens are deleted, until the last mbuf is freed.
 */
#include <criterion/criterion.h>

#include <rte_ethdev.h>
#include <rte_malloc.h>
#include <rte_mbuf.h>

#include "eal_fixture.h"
#include "kvss.h"

/* The shard under test: the process's first. */
static struct kvss_shard_inst *const shard0 = &kvss_shards[0];

#define B 64
#define N 100

static struct kvss_lcore_stats st;
static uint64_t iso = 42;

static uint64_t
href(uint32_t t)
{
	uint64_t h = iso;
	uint32_t i;

	for (i = 0; i <= t; i++)
		h = proto_ref_hash_next(h, 1000 + i);
	return h;
}

static void
setup(void)
{
	struct kvstore_params kp = {.num_caches = 1};
	size_t sz;

	cr_assert_eq(test_eal_start_ring(&kvss.pool), 0, "EAL and a net_ring port");
	kvss.cfg.mtu = 1500; /* small frames: several per stream */
	kvss.cfg.udp = proto_ports_default;
	shard0->cfg->port = 0;
	shard0->cfg->addr.ipv4 = 0x0a00000a;
	shard0->cfg->wafer.ipv4 = 0x0a000001;
	kp.cache[0] = (struct kvstore_cache_params){B, 2, 1000};
	sz = kvstore_memsize(&kp);
	shard0->store_mem = rte_zmalloc("store", sz, 64);
	shard0->store = kvstore_init(shard0->store_mem, sz, &kp);
	cr_assert_not_null(shard0->store);
}

static void
teardown(void)
{
	rte_eth_dev_stop(0);
	rte_eth_dev_close(0);
	rte_free(shard0->store_mem);
	rte_mempool_free(kvss.pool);
	test_eal_stop();
}

TestSuite(refill, .init = setup, .fini = teardown);

/* Store tokens 0..N-1 of prompt 7, batch 1. */
static void
store_prompt(void)
{
	struct proto_evict_entry e[N];
	uint8_t stream[N * B];
	uint32_t t;

	for (t = 0; t < N; t++) {
		e[t] = (struct proto_evict_entry){7, t, 1};
		proto_ref_fill(href(t), 0, 0, 0, 0, stream + t * B, B);
	}
	cr_assert_eq(kvstore_evict(shard0->store, 1, 1, N, e, NULL, 0), 0);
	cr_assert_eq(kvstore_data(shard0->store, 1, 0, 0, N * B, stream, N * B), 0);
	cr_assert_eq(kvstore_batches_complete(shard0->store), 1);
}

Test(refill, frames_carry_the_stored_bytes_and_the_memory_waits_for_the_last_mbuf)
{
	struct proto_refill_chunk ch = {7, 0, N};
	struct proto_refill_req rq = {.refill_id = 5, .cache_id = 0, .num_chunks = 1};
	struct proto_delete d = {7, 1, 0, N - 1, 0};
	struct kvstore_cache_stats cs;
	struct rte_mbuf *pkts[64];
	static struct proto_msg m;
	uint64_t bytes[2] = {0, 0};
	struct kvstore_refill *r;
	uint16_t code, n, i;
	unsigned int chained = 0;

	store_prompt();
	r = kvstore_refill_begin(shard0->store, 0, &ch, 1, &code);
	cr_assert_not_null(r);
	cr_assert_eq(kvss_refill_send(shard0, &st, 0, &rq, r), N * B);
	cr_assert_eq(kvss_refills_in_flight(), 1, "the frames still reference the store");
	/* Delete the tokens while the frames are in flight: memory is kept. */
	cr_assert_eq(kvstore_delete(shard0->store, &d), 0);
	kvstore_cache_stats(shard0->store, 0, &cs);
	cr_assert_eq(cs.limbo_slots, N, "the deleted tokens' memory must wait for the refill");
	/* Receive the frames (net_ring loops them back) and check every byte. */
	n = rte_eth_rx_burst(0, 0, pkts, 64);
	cr_assert_gt(n, 2, "one stream per buffer, several frames at MTU 1500");
	for (i = 0; i < n; i++) {
		uint8_t buf[2048], want[2048];
		const uint8_t *p;
		uint32_t x;

		cr_assert_eq(proto_parse_mbuf(pkts[i], &proto_ports_default, &m), PROTO_OK);
		cr_assert_eq(m.hdr.type, PROTO_T_REFILL_DATA);
		cr_assert_eq(m.u.refill_data.refill_id, 5);
		chained += pkts[i]->nb_segs > 1;
		p = rte_pktmbuf_read(pkts[i], m.data_off, m.data_len, buf);
		for (x = 0; x < m.data_len; x++) {
			uint32_t o = m.u.refill_data.stream_offset + x, t = o / (B / 2);

			proto_ref_fill(href(t), 0, 0, 0, (uint64_t)m.u.refill_data.buffer_id * (B / 2) +
							     o % (B / 2), want + x, 1);
		}
		cr_assert_arr_eq(p, want, m.data_len, "frame %u", i);
		bytes[m.u.refill_data.buffer_id] += m.data_len;
		/* Still in flight: the memory is still held. */
		cr_assert_eq(kvss_refills_in_flight(), 1);
	}
	cr_assert_eq(chained, n, "every frame is a gather list");
	cr_assert_eq(bytes[0], N * B / 2);
	cr_assert_eq(bytes[1], N * B / 2);
	for (i = 0; i < n; i++)
		rte_pktmbuf_free(pkts[i]);
	cr_assert_eq(kvss_refills_in_flight(), 0, "the last free ends the refill");
	/* The next retirement reclaims the memory. */
	{
		struct proto_evict_entry e = {8, 0, 1};
		struct proto_delete d8 = {8, 2, 0, 0, 0};
		uint8_t tok[B] = {0};

		cr_assert_eq(kvstore_evict(shard0->store, 2, 1, 1, &e, NULL, 0), 0);
		cr_assert_eq(kvstore_data(shard0->store, 2, 0, 0, B, tok, B), 0);
		cr_assert_eq(kvstore_delete(shard0->store, &d8), 0);
	}
	kvstore_cache_stats(shard0->store, 0, &cs);
	cr_assert_eq(cs.limbo_slots, 0);
	cr_assert_eq(rte_mempool_in_use_count(kvss.pool), 0, "mbufs leaked");
}
