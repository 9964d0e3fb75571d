/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * lib/proto's insides shared by its files (proto.c parses, proto_build.c
 * builds): the big-endian fields of the L2-L4 headers. Nothing outside
 * lib/proto includes this.
 */
#ifndef KVSS_PROTO_PRIV_H
#define KVSS_PROTO_PRIV_H

#include "proto.h"

#define ETH_P_IPV4 0x0800
#define ETH_P_VLAN 0x8100
#define ETH_P_QINQ 0x88a8
#define ETH_P_QINQ_OLD 0x9100
#define IPPROTO_UDP_NUM 17
#define IP4_MF 0x2000
#define IP4_DF 0x4000
#define IP4_FRAG_OFF 0x1fff

static inline uint16_t
be16(const uint8_t *p)
{
	return (uint16_t)(p[0] << 8 | p[1]);
}

static inline uint32_t
be32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static inline void
put_be16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)(v >> 8);
	p[1] = (uint8_t)v;
}

static inline void
put_be32(uint8_t *p, uint32_t v)
{
	put_be16(p, (uint16_t)(v >> 16));
	put_be16(p + 2, (uint16_t)v);
}

#endif
