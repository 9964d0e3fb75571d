/* SPDX-License-Identifier: BSD-3-Clause */
/* lib/proto's mbuf entry points, on real mbufs from a real mempool. */
#include <criterion/criterion.h>
#include <errno.h>

#include <rte_errno.h>
#include <rte_mbuf.h>

#include "eal_fixture.h"
#include "frames.h"
#include "proto.h"

static struct rte_mempool *pool;
static struct proto_msg flat, seg;

static void
setup(void)
{
	cr_assert_geq(test_eal_start("test_proto_mbuf"), 0, "EAL init failed");
	pool = rte_pktmbuf_pool_create("test_pool", 1024, 0, 0, RTE_MBUF_DEFAULT_BUF_SIZE,
				       SOCKET_ID_ANY);
	cr_assert_not_null(pool);
}

static void
teardown(void)
{
	cr_assert_eq(rte_mempool_in_use_count(pool), 0, "mbufs leaked");
	rte_mempool_free(pool);
	test_eal_stop();
}

TestSuite(mbuf, .init = setup, .fini = teardown);

/* A chain holding @frame cut at @cuts (ascending), one mbuf per piece. */
static struct rte_mbuf *
chain_of(const uint8_t *frame, uint32_t n, const uint32_t *cuts, unsigned int ncuts)
{
	struct rte_mbuf *head = NULL;
	uint32_t from = 0;
	unsigned int i;

	for (i = 0; i <= ncuts; i++) {
		uint32_t to = i < ncuts ? cuts[i] : n;
		struct rte_mbuf *m = rte_pktmbuf_alloc(pool);
		char *p;

		cr_assert_not_null(m);
		p = rte_pktmbuf_append(m, (uint16_t)(to - from));
		cr_assert(to == from || p != NULL);
		memcpy(p, frame + from, to - from);
		if (head == NULL)
			head = m;
		else
			cr_assert_eq(rte_pktmbuf_chain(head, m), 0);
		from = to;
	}
	return head;
}

Test(mbuf, a_header_split_anywhere_across_segments_still_parses)
{
	uint8_t frame[PROTO_FRAME_MAX];
	unsigned int i;
	uint32_t n, a, b;

	for (i = 0; i < frames_count(); i++) {
		n = frames_frame(i, i % 2, frame, sizeof(frame));
		cr_assert_eq(proto_parse(frame, n, &proto_ports_default, &flat), PROTO_OK);
		/* Every cut through the headers, and a second cut after it. */
		for (a = 1; a < 90 && a < n; a++) {
			for (b = a; b <= n; b += 17) {
				uint32_t cuts[2] = {a, b};
				struct rte_mbuf *m = chain_of(frame, n, cuts, 2);
				enum proto_reason r = proto_parse_mbuf(m, &proto_ports_default, &seg);

				cr_assert_eq(r, PROTO_OK, "sample %u cut %u,%u: %s", i, a, b,
					     proto_reason_name(r));
				cr_assert_eq(memcmp(&flat.hdr, &seg.hdr, sizeof(flat.hdr)), 0);
				cr_assert_eq(flat.data_off, seg.data_off);
				if (flat.body != NULL)
					cr_assert_eq(memcmp(flat.body, seg.body, flat.hdr.body_len), 0);
				rte_pktmbuf_free(m);
			}
		}
	}
}

Test(mbuf, a_truncated_chain_is_truncated_not_overread)
{
	uint8_t frame[PROTO_FRAME_MAX];
	uint32_t n = frames_frame(3, false, frame, sizeof(frame)), len;

	for (len = 1; len < n; len++) {
		uint32_t cuts[1] = {len / 2};
		struct rte_mbuf *m = chain_of(frame, len, cuts, 1);

		cr_assert_eq(proto_parse_mbuf(m, &proto_ports_default, &seg), PROTO_R_TRUNCATED);
		rte_pktmbuf_free(m);
	}
}

Test(mbuf, encap_prepends_headers_that_parse)
{
	uint8_t pay[PROTO_PAYLOAD_MAX];
	struct proto_addr a;
	unsigned int type, i;

	for (i = 0; i < frames_count(); i++) {
		uint32_t n = frames_payload(i, pay, sizeof(pay), &type);
		struct rte_mbuf *m = rte_pktmbuf_alloc(pool);

		cr_assert_not_null(m);
		memcpy(rte_pktmbuf_append(m, (uint16_t)n), pay, n);
		frames_addr(&a, type, i % 2);
		cr_assert_eq(proto_mbuf_encap(m, &a), 0);
		cr_assert_eq(rte_pktmbuf_pkt_len(m), n + proto_l2l4_len(&a));
		cr_assert_eq(proto_parse_mbuf(m, &proto_ports_default, &seg), PROTO_OK);
		cr_assert_eq(seg.hdr.type, type);
		rte_pktmbuf_free(m);
	}
}

Test(mbuf, frame_builds_one_segment_or_refuses)
{
	uint8_t pay[PROTO_PAYLOAD_MAX];
	struct proto_addr a;
	unsigned int type;
	uint32_t n = frames_payload(0, pay, sizeof(pay), &type);
	struct rte_mbuf *m;

	frames_addr(&a, type, true);
	m = proto_mbuf_frame(pool, &a, pay, n);
	cr_assert_not_null(m);
	cr_assert_eq(proto_parse_mbuf(m, &proto_ports_default, &seg), PROTO_OK);
	cr_assert(seg.addr.has_vlan);
	rte_pktmbuf_free(m);

	m = proto_mbuf_frame(pool, &a, pay, 4000); /* larger than one 2 KiB mbuf */
	cr_assert_null(m);
	cr_assert_eq(rte_errno, EMSGSIZE);
}
