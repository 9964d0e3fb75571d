/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * KVSS wire protocol v1: building (proto.h). Messages are written into the
 * caller's memory and never past the capacity given; count and body_len
 * are filled in at the end, so callers need not predict them. No DPDK, no
 * allocation.
 */
#include "proto_priv.h"

#include <errno.h>

int
proto_build_begin(struct proto_builder *b, void *buf, uint32_t cap, const struct proto_hdr *h)
{
	uint8_t *p = buf;

	if (proto_type_name(h->type) == NULL)
		return -EINVAL;
	if (cap < PROTO_HDR_LEN)
		return -ENOSPC;
	b->buf = p;
	b->cap = cap;
	b->len = PROTO_HDR_LEN;
	b->count = 0;
	b->type = h->type;
	b->cur_req = 0;
	b->gather = 0;
	memcpy(p, PROTO_MAGIC, 4);
	p[4] = PROTO_VERSION;
	p[5] = h->type;
	proto_st16(p + 6, h->flags);
	proto_st32(p + 8, h->model_id);
	proto_st16(p + 12, h->shard_id);
	proto_st16(p + 14, 0);
	proto_st32(p + 16, h->epoch);
	proto_st32(p + 20, 0);
	proto_st64(p + 24, h->seq);
	return 0;
}

/*
 * Reserve @n zeroed bytes for a record of a message of type @type.
 * @counted: the record counts in the header's count field.
 */
static uint8_t *
build_room(struct proto_builder *b, uint8_t type, uint32_t n, bool counted, int *err)
{
	uint8_t *p;

	if (b->type != type) {
		*err = -EINVAL;
		return NULL;
	}
	if (n > b->cap - b->len || (counted && b->count >= UINT16_MAX)) {
		*err = -ENOSPC;
		return NULL;
	}
	p = b->buf + b->len;
	memset(p, 0, n);
	b->len += n;
	if (counted)
		b->count++;
	*err = 0;
	return p;
}

int
proto_build_reserve(struct proto_builder *b, const struct proto_reserve *r)
{
	int err;
	uint8_t *p = build_room(b, PROTO_T_RESERVE, PROTO_RESERVE_LEN, true, &err);

	if (p == NULL)
		return err;
	proto_st64(p, r->prompt_id);
	proto_st64(p + 8, r->continue_id);
	proto_st32(p + 16, r->start_token_idx);
	proto_st32(p + 20, r->num_tokens);
	proto_st16(p + 24, r->cache_id);
	return 0;
}

int
proto_build_evict_hdr(struct proto_builder *b, const struct proto_evict_hdr *e)
{
	int err;
	uint8_t *p;

	if (b->len != PROTO_HDR_LEN)
		return -EINVAL;
	p = build_room(b, PROTO_T_EVICT, PROTO_EVICT_HDR_LEN, false, &err);
	if (p == NULL)
		return err;
	proto_st64(p, e->batch_no);
	proto_st16(p + 8, e->num_caches);
	proto_st16(p + 10, e->g);
	return 0;
}

int
proto_build_evict_entry(struct proto_builder *b, const struct proto_evict_entry *e)
{
	int err;
	uint8_t *p;

	if (b->len < PROTO_HDR_LEN + PROTO_EVICT_HDR_LEN)
		return -EINVAL;
	p = build_room(b, PROTO_T_EVICT, PROTO_EVICT_ENTRY_LEN, true, &err);
	if (p == NULL)
		return err;
	proto_st64(p, e->prompt_id);
	proto_st32(p + 8, e->token_idx);
	proto_st32(p + 12, e->sequence_id);
	return 0;
}

int
proto_build_refill_req(struct proto_builder *b, const struct proto_refill_req *r)
{
	int err;
	uint8_t *p = build_room(b, PROTO_T_REFILL, PROTO_REFILL_REQ_LEN, true, &err);

	if (p == NULL)
		return err;
	b->cur_req = (uint32_t)(p - b->buf);
	proto_st64(p, r->refill_id);
	proto_st64(p + 8, r->evict_count);
	proto_st32(p + 16, r->sequence_id);
	proto_st32(p + 20, r->cache_idx);
	proto_st16(p + 24, r->cache_id);
	proto_st16(p + 26, 0);
	return 0;
}

int
proto_build_refill_chunk(struct proto_builder *b, const struct proto_refill_chunk *c)
{
	int err;
	uint8_t *req, *p;
	uint16_t n;

	if (b->type != PROTO_T_REFILL || b->cur_req == 0)
		return -EINVAL;
	req = b->buf + b->cur_req;
	n = proto_ld16(req + 26);
	if (n == UINT16_MAX)
		return -ENOSPC;
	p = build_room(b, PROTO_T_REFILL, PROTO_REFILL_CHUNK_LEN, false, &err);
	if (p == NULL)
		return err;
	proto_st64(p, c->prompt_id);
	proto_st32(p + 8, c->start_token_idx);
	proto_st32(p + 12, c->num_tokens);
	proto_st16(req + 26, (uint16_t)(n + 1));
	return 0;
}

int
proto_build_delete(struct proto_builder *b, const struct proto_delete *d)
{
	int err;
	uint8_t *p = build_room(b, PROTO_T_DELETE, PROTO_DELETE_LEN, true, &err);

	if (p == NULL)
		return err;
	proto_st64(p, d->prompt_id);
	proto_st64(p + 8, d->evict_count);
	proto_st32(p + 16, d->start_token_idx);
	proto_st32(p + 20, d->end_token_idx);
	proto_st16(p + 24, d->cache_id);
	return 0;
}

/* ---- The second tier (section 9) ---- */

/* The builder's type if it is one of the two, else the first (build_room refuses it). */
static uint8_t
either(const struct proto_builder *b, uint8_t l2, uint8_t sh)
{
	return b->type == sh ? sh : l2;
}

static void
st_l2col(uint8_t *p, const struct proto_l2col *c, uint8_t type)
{
	if (proto_col_len(type) == PROTO_SHCOL_LEN) {
		proto_st64(p + 64, c->object_id);
		proto_st32(p + 72, c->gen_global);
		proto_st32(p + 76, c->gen_org);
		proto_st32(p + 80, c->layout);
	}
	proto_st64(p, c->key);
	proto_st64(p + 8, c->parent);
	proto_st64(p + 16, c->isolation_id);
	proto_st64(p + 24, c->prompt_id);
	proto_st64(p + 32, c->evict_count);
	proto_st64(p + 40, c->first_use_ns);
	proto_st32(p + 48, c->start_token_idx);
	proto_st32(p + 52, c->num_tokens);
	proto_st16(p + 56, c->cache_id);
}

int
proto_build_l2_down(struct proto_builder *b, const struct proto_l2col *c)
{
	int err;
	uint8_t t = either(b, PROTO_T_L2_DOWN, PROTO_T_SH_DOWN);
	uint8_t *p = build_room(b, t, proto_col_len(t), true, &err);

	if (p == NULL)
		return err;
	st_l2col(p, c, t);
	return 0;
}

int
proto_build_l2_up_hdr(struct proto_builder *b, const struct proto_evict_hdr *e)
{
	int err;
	uint8_t *p;

	if (b->len != PROTO_HDR_LEN)
		return -EINVAL;
	p = build_room(b, either(b, PROTO_T_L2_UP, PROTO_T_SH_UP), PROTO_EVICT_HDR_LEN, false, &err);
	if (p == NULL)
		return err;
	proto_st64(p, e->batch_no);
	proto_st16(p + 8, e->num_caches);
	proto_st16(p + 10, e->g);
	proto_st16(p + 12, e->ncols);
	return 0;
}

int
proto_build_l2_up_entry(struct proto_builder *b, const struct proto_evict_entry *e)
{
	int err;
	uint8_t *p;

	if (b->len < PROTO_HDR_LEN + PROTO_EVICT_HDR_LEN)
		return -EINVAL;
	p = build_room(b, either(b, PROTO_T_L2_UP, PROTO_T_SH_UP), PROTO_EVICT_ENTRY_LEN, true, &err);
	if (p == NULL)
		return err;
	proto_st64(p, e->prompt_id);
	proto_st32(p + 8, e->token_idx);
	proto_st32(p + 12, e->sequence_id);
	return 0;
}

int
proto_build_l2_up_col(struct proto_builder *b, const struct proto_l2col *c)
{
	int err;
	uint8_t *p, t;

	if (b->len < PROTO_HDR_LEN + PROTO_EVICT_HDR_LEN)
		return -EINVAL;
	t = either(b, PROTO_T_L2_UP, PROTO_T_SH_UP);
	p = build_room(b, t, proto_col_len(t), false, &err);
	if (p == NULL)
		return err;
	st_l2col(p, c, t);
	return 0;
}

int
proto_build_l2_delete(struct proto_builder *b, const struct proto_l2del *d)
{
	int err;
	uint8_t *p = build_room(b, PROTO_T_L2_DELETE, PROTO_L2DEL_LEN, true, &err);

	if (p == NULL)
		return err;
	proto_st64(p, d->key);
	proto_st64(p + 8, d->isolation_id);
	proto_st64(p + 16, d->evict_count);
	proto_st16(p + 24, d->cache_id);
	return 0;
}

int
proto_build_l2_done(struct proto_builder *b, const struct proto_l2done *d)
{
	int err;
	uint8_t *p = build_room(b, PROTO_T_L2_DONE, PROTO_L2DONE_LEN, true, &err);

	if (p == NULL)
		return err;
	proto_st64(p, d->key);
	proto_st64(p + 8, d->isolation_id);
	proto_st16(p + 16, d->cache_id);
	p[18] = d->op;
	proto_st16(p + 20, d->status);
	return 0;
}

int
proto_build_l2_inventory_hdr(struct proto_builder *b, uint32_t total, uint32_t first)
{
	int err;
	uint8_t *p;

	if (b->len != PROTO_HDR_LEN)
		return -EINVAL;
	p = build_room(b, PROTO_T_L2_INVENTORY, PROTO_L2INV_HDR_LEN, false, &err);
	if (p == NULL)
		return err;
	proto_st32(p, total);
	proto_st32(p + 4, first);
	return 0;
}

int
proto_build_l2_inventory_col(struct proto_builder *b, const struct proto_l2col *c)
{
	int err;
	uint8_t *p;

	if (b->len < PROTO_HDR_LEN + PROTO_L2INV_HDR_LEN)
		return -EINVAL;
	p = build_room(b, PROTO_T_L2_INVENTORY, PROTO_L2COL_LEN, true, &err);
	if (p == NULL)
		return err;
	st_l2col(p, c, PROTO_T_L2_INVENTORY);
	return 0;
}

int
proto_build_status(struct proto_builder *b, const struct proto_status *s)
{
	int err;
	uint8_t *p;

	if (b->len != PROTO_HDR_LEN)
		return -EINVAL;
	p = build_room(b, PROTO_T_STATUS, PROTO_STATUS_LEN, false, &err);
	if (p == NULL)
		return err;
	proto_st64(p, s->batches_complete);
	proto_st64(p + 8, s->reports);
	proto_st64(p + 16, s->uptime_ns);
	proto_st32(p + 24, s->flags);
	proto_st32(p + 28, s->driver_epoch);
	return 0;
}

int
proto_build_cache_info(struct proto_builder *b, const struct proto_cache_info *c)
{
	int err;
	uint8_t *p;

	if (b->len < PROTO_HDR_LEN + PROTO_STATUS_LEN)
		return -EINVAL;
	p = build_room(b, PROTO_T_STATUS, PROTO_CACHE_INFO_LEN, true, &err);
	if (p == NULL)
		return err;
	proto_st16(p, c->cache_id);
	proto_st16(p + 2, c->num_buffers);
	proto_st32(p + 4, c->bytes_per_token);
	proto_st64(p + 8, c->capacity_tokens);
	proto_st64(p + 16, c->stored_tokens);
	proto_st64(p + 24, c->prompts);
	proto_st64(p + 32, c->l2_capacity_tokens);
	proto_st64(p + 40, c->l2_stored_tokens);
	return 0;
}

int
proto_build_ack(struct proto_builder *b, const struct proto_ack *a)
{
	int err;
	uint8_t *p;

	if (b->len != PROTO_HDR_LEN)
		return -EINVAL;
	p = build_room(b, PROTO_T_ACK, PROTO_ACK_LEN, false, &err);
	if (p == NULL)
		return err;
	proto_st64(p, a->cum_seq);
	proto_st64(p + 8, a->recv_seq);
	return 0;
}

int
proto_build_report_ack(struct proto_builder *b, uint64_t cum)
{
	int err;
	uint8_t *p;

	if (b->len != PROTO_HDR_LEN)
		return -EINVAL;
	p = build_room(b, PROTO_T_REPORT_ACK, PROTO_ACK_LEN, false, &err);
	if (p == NULL)
		return err;
	proto_st64(p, cum);
	return 0;
}

int
proto_build_error(struct proto_builder *b, const struct proto_error *e)
{
	int err;
	uint8_t *p = build_room(b, PROTO_T_ERROR, PROTO_ERROR_LEN, true, &err);

	if (p == NULL)
		return err;
	proto_st64(p, e->seq);
	proto_st64(p + 8, e->prompt_id);
	proto_st32(p + 16, e->token_idx);
	proto_st16(p + 20, e->cache_id);
	proto_st16(p + 22, e->code);
	return 0;
}

int
proto_build_refill_done(struct proto_builder *b, const struct proto_refill_done *d)
{
	int err;
	uint8_t *p = build_room(b, PROTO_T_REFILL_DONE, PROTO_REFILL_DONE_LEN, true, &err);

	if (p == NULL)
		return err;
	proto_st64(p, d->refill_id);
	proto_st32(p + 8, d->tokens);
	proto_st32(p + 12, d->status);
	proto_st64(p + 16, d->bytes);
	return 0;
}

int
proto_build_lost(struct proto_builder *b, const struct proto_lost *l)
{
	int err;
	uint8_t *p = build_room(b, PROTO_T_TOKEN_LOST, PROTO_LOST_LEN, true, &err);

	if (p == NULL)
		return err;
	proto_st64(p, l->prompt_id);
	proto_st32(p + 8, l->token_idx);
	proto_st32(p + 12, l->count);
	proto_st16(p + 16, l->cache_id);
	return 0;
}

int
proto_build_data_hdr(struct proto_builder *b, const struct proto_data_hdr *d)
{
	int err;
	uint8_t *p;

	if (b->len != PROTO_HDR_LEN)
		return -EINVAL;
	p = build_room(b, PROTO_T_EVICT_DATA, PROTO_DATA_HDR_LEN, false, &err);
	if (p == NULL)
		return err;
	proto_st64(p, d->batch_no);
	proto_st16(p + 8, d->cache_id);
	proto_st32(p + 12, d->stream_offset);
	proto_st32(p + 16, d->stream_len);
	proto_st32(p + 20, d->driver_epoch);
	return 0;
}

int
proto_build_refill_data_hdr(struct proto_builder *b, const struct proto_refill_data_hdr *d)
{
	int err;
	uint8_t *p;

	if (b->len != PROTO_HDR_LEN)
		return -EINVAL;
	p = build_room(b, PROTO_T_REFILL_DATA, PROTO_REFILL_DATA_HDR_LEN, false, &err);
	if (p == NULL)
		return err;
	proto_st64(p, d->refill_id);
	proto_st32(p + 8, d->sequence_id);
	proto_st32(p + 12, d->cache_idx);
	proto_st16(p + 16, d->cache_id);
	proto_st16(p + 18, d->buffer_id);
	proto_st32(p + 20, d->stream_offset);
	proto_st32(p + 24, d->stream_len);
	return 0;
}

int
proto_build_bytes(struct proto_builder *b, const void *src, uint32_t len)
{
	if (b->type != PROTO_T_EVICT_DATA && b->type != PROTO_T_REFILL_DATA)
		return -EINVAL;
	if (b->len == PROTO_HDR_LEN)
		return -EINVAL; /* the data header comes first */
	if (len > b->cap - b->len)
		return -ENOSPC;
	if (src != b->buf + b->len) /* else written in place already */
		memcpy(b->buf + b->len, src, len);
	b->len += len;
	return 0;
}

int
proto_build_gather(struct proto_builder *b, uint32_t len)
{
	if (b->type != PROTO_T_EVICT_DATA && b->type != PROTO_T_REFILL_DATA)
		return -EINVAL;
	if (b->len == PROTO_HDR_LEN)
		return -EINVAL; /* the data header comes first */
	if (len > PROTO_PAYLOAD_MAX - b->len - b->gather)
		return -ENOSPC;
	b->gather += len;
	return 0;
}

uint32_t
proto_build_end(struct proto_builder *b)
{
	uint8_t *p = b->buf;

	proto_st16(p + 14, (uint16_t)b->count);
	proto_st32(p + 20, b->len + b->gather - PROTO_HDR_LEN);
	if (b->type == PROTO_T_EVICT && b->len >= PROTO_HDR_LEN + PROTO_EVICT_HDR_LEN) {
		uint16_t nc = proto_ld16(p + PROTO_HDR_LEN + 8);

		/* G follows from the entries added, so callers need not predict it. */
		if (nc != 0 && b->count % nc == 0)
			proto_st16(p + PROTO_HDR_LEN + 10, (uint16_t)(b->count / nc));
	}
	return b->len;
}

void
proto_write_l2l4(void *hdr, const struct proto_addr *a, uint32_t payload_len)
{
	uint8_t *p = hdr;
	uint8_t *ip;
	uint32_t l3 = PROTO_ETH_LEN;

	memcpy(p, a->dst_mac, 6);
	memcpy(p + 6, a->src_mac, 6);
	if (a->has_vlan) {
		put_be16(p + 12, ETH_P_VLAN);
		put_be16(p + 14, a->vlan_tci);
		l3 += PROTO_VLAN_LEN;
	}
	put_be16(p + l3 - 2, ETH_P_IPV4);
	ip = p + l3;
	ip[0] = 0x45;
	ip[1] = 0;
	put_be16(ip + 2, (uint16_t)(PROTO_IP4_LEN + PROTO_UDP_LEN + payload_len));
	put_be16(ip + 4, 0);
	put_be16(ip + 6, IP4_DF);
	ip[8] = PROTO_TTL;
	ip[9] = IPPROTO_UDP_NUM;
	put_be16(ip + 10, 0);
	put_be32(ip + 12, a->src_ip);
	put_be32(ip + 16, a->dst_ip);
	put_be16(ip + 10, proto_ip4_cksum(ip, PROTO_IP4_LEN));
	put_be16(ip + 20, a->src_port);
	put_be16(ip + 22, a->dst_port);
	put_be16(ip + 24, (uint16_t)(PROTO_UDP_LEN + payload_len));
	put_be16(ip + 26, 0);
}

uint32_t
proto_build_frame(void *frame, uint32_t cap, const struct proto_addr *a, const void *payload,
		  uint32_t payload_len)
{
	uint32_t hl = proto_l2l4_len(a);

	if (payload_len > PROTO_PAYLOAD_MAX || (uint64_t)hl + payload_len > cap)
		return 0;
	proto_write_l2l4(frame, a, payload_len);
	memmove((uint8_t *)frame + hl, payload, payload_len);
	return hl + payload_len;
}
