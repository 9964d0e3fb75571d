/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * KVSS wire protocol v1: parsing (the builders are proto_build.c). No DPDK,
 * no allocation.
 *
 * The parser reads the frame only through a proto_src read callback that
 * refuses any range outside the frame, so no input can make it read past the
 * end; every length taken from the wire is checked against what is left
 * before it is used, in 64-bit arithmetic so that no sum can wrap.
 */
#include "proto_priv.h"

#include <errno.h>


const struct proto_ports proto_ports_default = {
	.ctrl = PROTO_PORT_CTRL_DEFAULT,
	.evict = PROTO_PORT_EVICT_DEFAULT,
	.refill = PROTO_PORT_REFILL_DEFAULT,
};

static const char *const reason_names[PROTO_R_MAX] = {
	[PROTO_OK] = "ok",
#define PROTO_REASON_NAME(name, str) [PROTO_R_##name] = str,
	PROTO_REASONS(PROTO_REASON_NAME)
#undef PROTO_REASON_NAME
};

const char *
proto_reason_name(enum proto_reason r)
{
	if ((unsigned int)r >= PROTO_R_MAX)
		return "unknown";
	return reason_names[r];
}

const char *
proto_type_name(unsigned int type)
{
	switch (type) {
#define PROTO_TYPE_CASE(name, val)                                                                 \
	case val:                                                                                  \
		return #name;
		PROTO_TYPES(PROTO_TYPE_CASE)
#undef PROTO_TYPE_CASE
	default:
		return NULL;
	}
}

bool
proto_type_is_control(unsigned int type)
{
	return type < 0x20 && proto_type_name(type) != NULL;
}

const char *
proto_err_name(unsigned int code)
{
	switch (code) {
	case 0:
		return "OK";
#define PROTO_ERR_CASE(name, val)                                                                  \
	case val:                                                                                  \
		return #name;
		PROTO_ERRS(PROTO_ERR_CASE)
#undef PROTO_ERR_CASE
	default:
		return NULL;
	}
}

/* ---- Sources ------------------------------------------------------------ */

static const void *
flat_read(const void *ctx, uint32_t off, uint32_t len, void *buf)
{
	const struct proto_seg *s = ctx;

	(void)buf;
	if ((uint64_t)off + len > s->len)
		return NULL;
	return s->data + off;
}

void
proto_src_bytes(struct proto_src *src, const void *frame, uint32_t len)
{
	src->flat.data = frame;
	src->flat.len = len;
	src->read = flat_read;
	src->ctx = &src->flat;
	src->len = len;
}

static const void *
segs_read(const void *ctx, uint32_t off, uint32_t len, void *buf)
{
	const struct proto_segs *s = ctx;
	uint8_t *out = buf;
	unsigned int i = 0;
	uint32_t done = 0;

	/* Find the segment holding @off. */
	while (i < s->nsegs && off >= s->seg[i].len) {
		off -= s->seg[i].len;
		i++;
	}
	if (len == 0)
		return i < s->nsegs ? (const void *)(s->seg[i].data + off) : buf;
	if (i == s->nsegs)
		return NULL;
	if ((uint64_t)off + len <= s->seg[i].len)
		return s->seg[i].data + off;
	/* Spans segments: copy piecewise, never past any segment's length. */
	while (done < len) {
		uint32_t n;

		if (i == s->nsegs)
			return NULL;
		n = s->seg[i].len - off;
		if (n > len - done)
			n = len - done;
		memcpy(out + done, s->seg[i].data + off, n);
		done += n;
		off = 0;
		i++;
	}
	return buf;
}

void
proto_src_segs(struct proto_src *src, const struct proto_segs *segs)
{
	uint64_t total = 0;
	unsigned int i;

	for (i = 0; i < segs->nsegs; i++)
		total += segs->seg[i].len;
	src->read = segs_read;
	src->ctx = segs;
	src->len = total > UINT32_MAX ? UINT32_MAX : (uint32_t)total;
	src->flat.data = NULL;
	src->flat.len = 0;
}

/* ---- Checksums ---------------------------------------------------------- */

static uint32_t
csum_add(uint32_t sum, const uint8_t *p, uint32_t len)
{
	uint32_t i;

	for (i = 0; i + 1 < len; i += 2)
		sum += (uint32_t)(p[i] << 8 | p[i + 1]);
	if (len & 1)
		sum += (uint32_t)p[len - 1] << 8;
	return sum;
}

static uint16_t
csum_fold(uint32_t sum)
{
	while (sum >> 16)
		sum = (sum & 0xffff) + (sum >> 16);
	return (uint16_t)sum;
}

uint16_t
proto_ip4_cksum(const void *iphdr, uint32_t len)
{
	return (uint16_t)~csum_fold(csum_add(0, iphdr, len));
}

/*
 * Verify a nonzero UDP checksum: pseudo-header, UDP header and payload, read
 * through the source in even-sized chunks so a segmented frame works too.
 */
static bool
udp_cksum_ok(const struct proto_src *src, uint32_t l4, uint32_t ulen, uint32_t sip, uint32_t dip)
{
	uint8_t pseudo[12], chunk[256];
	uint32_t sum, off = 0;

	put_be32(pseudo, sip);
	put_be32(pseudo + 4, dip);
	pseudo[8] = 0;
	pseudo[9] = IPPROTO_UDP_NUM;
	put_be16(pseudo + 10, (uint16_t)ulen);
	sum = csum_add(0, pseudo, sizeof(pseudo));
	while (off < ulen) {
		uint32_t n = ulen - off > sizeof(chunk) ? sizeof(chunk) : ulen - off;
		const uint8_t *p = src->read(src->ctx, l4 + off, n, chunk);

		if (p == NULL)
			return false;
		sum = csum_add(sum, p, n);
		/* Fold as we go: the 32-bit sum cannot overflow on any length. */
		sum = csum_fold(sum);
		off += n;
	}
	return csum_fold(sum) == 0xffff;
}

/* ---- Parsing ------------------------------------------------------------ */

static void
decode_hdr(const uint8_t *p, struct proto_hdr *h)
{
	h->version = p[4];
	h->type = p[5];
	h->flags = proto_ld16(p + 6);
	h->model_id = proto_ld32(p + 8);
	h->shard_id = proto_ld16(p + 12);
	h->count = proto_ld16(p + 14);
	h->epoch = proto_ld32(p + 16);
	h->body_len = proto_ld32(p + 20);
	h->seq = proto_ld64(p + 24);
}

static enum proto_reason
check_records(uint32_t body_len, uint32_t count, uint32_t rec_len)
{
	return (uint64_t)count * rec_len == body_len ? PROTO_OK : PROTO_R_BAD_COUNT;
}

static enum proto_reason
check_refill(const uint8_t *body, uint32_t body_len, uint32_t count)
{
	uint64_t off = 0;
	uint32_t n = 0;

	while (off < body_len) {
		if (off + PROTO_REFILL_REQ_LEN > body_len)
			return PROTO_R_BAD_COUNT;
		off += PROTO_REFILL_REQ_LEN +
		       (uint64_t)proto_ld16(body + off + 26) * PROTO_REFILL_CHUNK_LEN;
		n++;
	}
	if (off != body_len || n != count)
		return PROTO_R_BAD_COUNT;
	return PROTO_OK;
}

static enum proto_reason
parse_control_body(struct proto_msg *m)
{
	const struct proto_hdr *h = &m->hdr;
	const uint8_t *b = m->body;

	switch (h->type) {
	case PROTO_T_HELLO:
		if (h->count != 0)
			return PROTO_R_BAD_COUNT;
		return h->body_len == 0 ? PROTO_OK : PROTO_R_BAD_BODY_LEN;
	case PROTO_T_ACK:
		if (h->count != 0)
			return PROTO_R_BAD_COUNT;
		if (h->body_len != PROTO_ACK_LEN)
			return PROTO_R_BAD_BODY_LEN;
		m->u.ack.cum_seq = proto_ld64(b);
		m->u.ack.recv_seq = h->version == 1 ? m->u.ack.cum_seq : proto_ld64(b + 8);
		return PROTO_OK;
	case PROTO_T_REPORT_ACK:
		if (h->count != 0)
			return PROTO_R_BAD_COUNT;
		if (h->body_len != PROTO_ACK_LEN)
			return PROTO_R_BAD_BODY_LEN;
		m->u.ack.cum_seq = m->u.ack.recv_seq = proto_ld64(b);
		return PROTO_OK;
	case PROTO_T_RESERVE:
		return check_records(h->body_len, h->count, PROTO_RESERVE_LEN);
	case PROTO_T_DELETE:
		return check_records(h->body_len, h->count, PROTO_DELETE_LEN);
	case PROTO_T_L2_DOWN:
	case PROTO_T_SH_DOWN:
		return check_records(h->body_len, h->count, proto_col_len(h->type));
	case PROTO_T_L2_DELETE:
		return check_records(h->body_len, h->count, PROTO_L2DEL_LEN);
	case PROTO_T_L2_DONE:
		return check_records(h->body_len, h->count, PROTO_L2DONE_LEN);
	case PROTO_T_L2_INVENTORY:
		if (h->body_len < PROTO_L2INV_HDR_LEN)
			return PROTO_R_BAD_BODY_LEN;
		return check_records(h->body_len - PROTO_L2INV_HDR_LEN, h->count, PROTO_L2COL_LEN);
	case PROTO_T_L2_UP:
	case PROTO_T_SH_UP:
		if (h->body_len < PROTO_EVICT_HDR_LEN)
			return PROTO_R_BAD_BODY_LEN;
		m->u.evict.batch_no = proto_ld64(b);
		m->u.evict.num_caches = proto_ld16(b + 8);
		m->u.evict.g = proto_ld16(b + 10);
		m->u.evict.ncols = proto_ld16(b + 12);
		if ((uint32_t)m->u.evict.num_caches * m->u.evict.g != h->count ||
		    (uint64_t)h->count * PROTO_EVICT_ENTRY_LEN + (uint64_t)m->u.evict.ncols * proto_col_len(h->type) !=
			    (uint64_t)h->body_len - PROTO_EVICT_HDR_LEN)
			return PROTO_R_BAD_COUNT;
		return PROTO_OK;
	case PROTO_T_ERROR:
		return check_records(h->body_len, h->count, PROTO_ERROR_LEN);
	case PROTO_T_REFILL_DONE:
		return check_records(h->body_len, h->count, PROTO_REFILL_DONE_LEN);
	case PROTO_T_TOKEN_LOST:
		return check_records(h->body_len, h->count,
				     h->version == 1 ? PROTO_LOST_V1_LEN : PROTO_LOST_LEN);
	case PROTO_T_EVICT:
		if (h->body_len < PROTO_EVICT_HDR_LEN)
			return PROTO_R_BAD_BODY_LEN;
		m->u.evict.batch_no = proto_ld64(b);
		m->u.evict.num_caches = proto_ld16(b + 8);
		m->u.evict.g = proto_ld16(b + 10);
		m->u.evict.ncols = 0; /* reserved in an EVICT */
		if ((uint32_t)m->u.evict.num_caches * m->u.evict.g != h->count)
			return PROTO_R_BAD_COUNT;
		return check_records(h->body_len - PROTO_EVICT_HDR_LEN, h->count,
				     PROTO_EVICT_ENTRY_LEN);
	case PROTO_T_REFILL:
		return check_refill(b, h->body_len, h->count);
	case PROTO_T_STATUS:
		if (h->body_len < PROTO_STATUS_LEN)
			return PROTO_R_BAD_BODY_LEN;
		m->u.status.batches_complete = proto_ld64(b);
		m->u.status.reports = proto_ld64(b + 8);
		m->u.status.uptime_ns = proto_ld64(b + 16);
		m->u.status.flags = proto_ld32(b + 24);
		m->u.status.driver_epoch = proto_ld32(b + 28);
		return check_records(h->body_len - PROTO_STATUS_LEN, h->count,
				     h->version == 1 ? PROTO_CACHE_INFO_V1_LEN : PROTO_CACHE_INFO_LEN);
	default:
		return PROTO_R_BAD_TYPE;
	}
}

static enum proto_reason
parse_data(const struct proto_src *src, uint32_t body_off, struct proto_msg *m)
{
	const struct proto_hdr *h = &m->hdr;
	uint8_t tmp[PROTO_REFILL_DATA_HDR_LEN];
	uint32_t hl = h->type == PROTO_T_EVICT_DATA ? PROTO_DATA_HDR_LEN : PROTO_REFILL_DATA_HDR_LEN;
	const uint8_t *p;
	uint32_t s_off, s_len;

	if (h->count != 0)
		return PROTO_R_BAD_COUNT;
	if (h->body_len < hl)
		return PROTO_R_BAD_BODY_LEN;
	p = src->read(src->ctx, body_off, hl, tmp);
	if (p == NULL)
		return PROTO_R_TRUNCATED;
	if (h->type == PROTO_T_EVICT_DATA) {
		m->u.data.batch_no = proto_ld64(p);
		m->u.data.cache_id = proto_ld16(p + 8);
		m->u.data.stream_offset = s_off = proto_ld32(p + 12);
		m->u.data.stream_len = s_len = proto_ld32(p + 16);
		m->u.data.driver_epoch = h->version == 1 ? 0 : proto_ld32(p + 20);
	} else {
		m->u.refill_data.refill_id = proto_ld64(p);
		m->u.refill_data.sequence_id = proto_ld32(p + 8);
		m->u.refill_data.cache_idx = proto_ld32(p + 12);
		m->u.refill_data.cache_id = proto_ld16(p + 16);
		m->u.refill_data.buffer_id = proto_ld16(p + 18);
		m->u.refill_data.stream_offset = s_off = proto_ld32(p + 20);
		m->u.refill_data.stream_len = s_len = proto_ld32(p + 24);
	}
	m->data_off = body_off + hl;
	m->data_len = h->body_len - hl;
	if ((uint64_t)s_off + m->data_len > s_len)
		return PROTO_R_BAD_DATA_RANGE;
	return PROTO_OK;
}

static bool
type_fits_port(unsigned int type, uint16_t dport, const struct proto_ports *ports)
{
	if (type == PROTO_T_EVICT_DATA)
		return dport == ports->evict;
	if (type == PROTO_T_REFILL_DATA)
		return dport == ports->refill;
	return dport == ports->ctrl;
}

/* Sections 2 and 3 on the UDP payload at @off (@plen bytes) of @src. */
static enum proto_reason
parse_kvss(const struct proto_src *src, uint32_t off, uint32_t plen, uint16_t dport,
	   const struct proto_ports *ports, struct proto_msg *m)
{
	uint8_t tmp[PROTO_HDR_LEN];
	const uint8_t *p;
	enum proto_reason r;

	m->payload_off = off;
	if (plen < PROTO_HDR_LEN)
		return PROTO_R_TRUNCATED;
	p = src->read(src->ctx, off, PROTO_HDR_LEN, tmp);
	if (p == NULL)
		return PROTO_R_TRUNCATED;
	if (memcmp(p, PROTO_MAGIC, 4) != 0)
		return PROTO_R_BAD_MAGIC;
	decode_hdr(p, &m->hdr);
	if (m->hdr.version != PROTO_VERSION && !(ports->accept_v1 && m->hdr.version == 1))
		return PROTO_R_BAD_VERSION;
	if (proto_type_name(m->hdr.type) == NULL)
		return PROTO_R_BAD_TYPE;
	if (!type_fits_port(m->hdr.type, dport, ports))
		return PROTO_R_WRONG_PORT;
	if (m->hdr.body_len != plen - PROTO_HDR_LEN)
		return PROTO_R_BAD_BODY_LEN;
	if (!proto_type_is_control(m->hdr.type))
		return parse_data(src, off + PROTO_HDR_LEN, m);
	if (m->hdr.body_len > PROTO_SCRATCH_LEN)
		return PROTO_R_BAD_BODY_LEN;
	if (m->hdr.body_len == 0) {
		m->body = m->scratch;
	} else {
		m->body = src->read(src->ctx, off + PROTO_HDR_LEN, m->hdr.body_len, m->scratch);
		if (m->body == NULL)
			return PROTO_R_TRUNCATED;
	}
	r = parse_control_body(m);
	if (r != PROTO_OK)
		m->body = NULL;
	return r;
}

static void
msg_reset(struct proto_msg *m)
{
	memset(&m->addr, 0, sizeof(m->addr));
	memset(&m->hdr, 0, sizeof(m->hdr));
	memset(&m->u, 0, sizeof(m->u));
	m->body = NULL;
	m->payload_off = 0;
	m->data_off = 0;
	m->data_len = 0;
}

static bool
is_kvss_port(uint16_t port, const struct proto_ports *ports)
{
	return port == ports->ctrl || port == ports->evict || port == ports->refill;
}

enum proto_reason
proto_parse_src(const struct proto_src *src, const struct proto_ports *ports,
		struct proto_msg *m)
{
	uint8_t tmp[PROTO_IP4_LEN];
	const uint8_t *p;
	uint32_t l3 = PROTO_ETH_LEN, l4, tot;
	uint16_t et, frag, ulen, ucsum;
	struct proto_addr *a = &m->addr;

	msg_reset(m);
	p = src->read(src->ctx, 0, PROTO_ETH_LEN, tmp);
	if (p == NULL)
		return PROTO_R_TRUNCATED;
	memcpy(a->dst_mac, p, 6);
	memcpy(a->src_mac, p + 6, 6);
	et = be16(p + 12);
	if (et == ETH_P_VLAN) {
		p = src->read(src->ctx, PROTO_ETH_LEN, PROTO_VLAN_LEN, tmp);
		if (p == NULL)
			return PROTO_R_TRUNCATED;
		a->has_vlan = true;
		a->vlan_tci = be16(p);
		et = be16(p + 2);
		l3 += PROTO_VLAN_LEN;
		if (et == ETH_P_VLAN || et == ETH_P_QINQ || et == ETH_P_QINQ_OLD)
			return PROTO_R_VLAN_STACKED;
	} else if (et == ETH_P_QINQ || et == ETH_P_QINQ_OLD) {
		return PROTO_R_VLAN_STACKED;
	}
	if (et != ETH_P_IPV4)
		return PROTO_R_NOT_KVSS;

	p = src->read(src->ctx, l3, PROTO_IP4_LEN, tmp);
	if (p == NULL)
		return PROTO_R_TRUNCATED;
	if ((p[0] >> 4) != 4 || (p[0] & 0xf) < 5 || p[9] != IPPROTO_UDP_NUM)
		return PROTO_R_NOT_KVSS;
	if ((p[0] & 0xf) != 5)
		return PROTO_R_IP_OPTIONS;
	if (csum_fold(csum_add(0, p, PROTO_IP4_LEN)) != 0xffff)
		return PROTO_R_BAD_IP_CHECKSUM;
	tot = be16(p + 2);
	frag = be16(p + 6);
	a->ttl = p[8];
	a->src_ip = be32(p + 12);
	a->dst_ip = be32(p + 16);
	if (tot < PROTO_IP4_LEN)
		return PROTO_R_NOT_KVSS;
	if ((uint64_t)l3 + tot > src->len)
		return PROTO_R_TRUNCATED;
	if ((frag & IP4_MF) || (frag & IP4_FRAG_OFF))
		return PROTO_R_IP_FRAGMENT;
	if (tot < PROTO_IP4_LEN + PROTO_UDP_LEN)
		return PROTO_R_BAD_UDP_LEN;

	l4 = l3 + PROTO_IP4_LEN;
	p = src->read(src->ctx, l4, PROTO_UDP_LEN, tmp);
	if (p == NULL)
		return PROTO_R_TRUNCATED;
	a->src_port = be16(p);
	a->dst_port = be16(p + 2);
	ulen = be16(p + 4);
	ucsum = be16(p + 6);
	if (!is_kvss_port(a->dst_port, ports))
		return PROTO_R_NOT_KVSS;
	if (ulen != tot - PROTO_IP4_LEN)
		return PROTO_R_BAD_UDP_LEN;
	if (ucsum != 0 && !udp_cksum_ok(src, l4, ulen, a->src_ip, a->dst_ip))
		return PROTO_R_BAD_UDP_CHECKSUM;
	return parse_kvss(src, l4 + PROTO_UDP_LEN, ulen - PROTO_UDP_LEN, a->dst_port, ports, m);
}

enum proto_reason
proto_parse(const void *frame, uint32_t len, const struct proto_ports *ports,
	    struct proto_msg *msg)
{
	struct proto_src src;

	proto_src_bytes(&src, frame, len);
	return proto_parse_src(&src, ports, msg);
}

enum proto_reason
proto_parse_payload(const void *payload, uint32_t len, uint16_t dst_port,
		    const struct proto_ports *ports, struct proto_msg *msg)
{
	struct proto_src src;

	msg_reset(msg);
	msg->addr.dst_port = dst_port;
	proto_src_bytes(&src, payload, len);
	return parse_kvss(&src, 0, len, dst_port, ports, msg);
}

