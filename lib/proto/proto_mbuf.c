/* SPDX-License-Identifier: BSD-3-Clause */
/* mbuf entry points of lib/proto: the parser's read callback over a chain. */
#include <errno.h>

#include <rte_errno.h>
#include <rte_mbuf.h>

#include "proto.h"

static const void *
mbuf_read(const void *ctx, uint32_t off, uint32_t len, void *buf)
{
	return rte_pktmbuf_read(ctx, off, len, buf);
}

enum proto_reason
proto_parse_mbuf(const struct rte_mbuf *m, const struct proto_ports *ports,
		 struct proto_msg *msg)
{
	struct proto_src src = {
		.read = mbuf_read,
		.ctx = m,
		.len = rte_pktmbuf_pkt_len(m),
	};

	return proto_parse_src(&src, ports, msg);
}

int
proto_mbuf_encap(struct rte_mbuf *m, const struct proto_addr *a)
{
	uint32_t plen = rte_pktmbuf_pkt_len(m);
	uint16_t hl = (uint16_t)proto_l2l4_len(a);
	char *p;

	if (plen > PROTO_PAYLOAD_MAX)
		return -EMSGSIZE;
	p = rte_pktmbuf_prepend(m, hl);
	if (p == NULL)
		return -ENOSPC;
	proto_write_l2l4(p, a, plen);
	m->l2_len = hl - PROTO_IP4_LEN - PROTO_UDP_LEN;
	m->l3_len = PROTO_IP4_LEN;
	m->l4_len = PROTO_UDP_LEN;
	return 0;
}

struct rte_mbuf *
proto_mbuf_frame(struct rte_mempool *mp, const struct proto_addr *a, const void *payload,
		 uint32_t payload_len)
{
	uint32_t hl = proto_l2l4_len(a);
	struct rte_mbuf *m;
	char *p;

	m = rte_pktmbuf_alloc(mp);
	if (m == NULL) {
		rte_errno = ENOMEM;
		return NULL;
	}
	if (hl + payload_len > rte_pktmbuf_tailroom(m)) {
		rte_pktmbuf_free(m);
		rte_errno = EMSGSIZE;
		return NULL;
	}
	p = rte_pktmbuf_append(m, (uint16_t)(hl + payload_len));
	proto_write_l2l4(p, a, payload_len);
	memcpy(p + hl, payload, payload_len);
	return m;
}
