/* SPDX-License-Identifier: BSD-3-Clause */
#ifndef KVSS_PROTO_H
#define KVSS_PROTO_H

/**
 * @file
 * KVSS wire protocol, version 2 (the contract: docs/PROTOCOL.md; version 1
 * is still decoded, for captures and kvss-dump).
 *
 * Bytes in, messages out: parsing and building keep no state between
 * calls. (The library's one stateful part is the driver's control-stream
 * sender, proto_stream.h: sequence numbers, window and retransmission
 * timer, with no I/O of its own.) The parsing core and the builders need
 * no DPDK and no EAL, so they can be unit-tested and fuzzed on their own;
 * only the mbuf entry points (proto_parse_mbuf and its kin, declared at
 * the end of this header and built from proto_mbuf.c) use DPDK.
 *
 * Parsing never reads outside the frame it is given, never crashes on any
 * input, and names every rejection with its own reason (enum proto_reason).
 * Building writes into caller memory and never overruns the capacity given.
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- Constants --------------------------------------------------------- */

#define PROTO_MAGIC "KVSS"
#define PROTO_VERSION 2
/* The oldest version the parser decodes (proto_ports.accept_v1). */
#define PROTO_VERSION_MIN 1

#define PROTO_PORT_CTRL_DEFAULT 7400
#define PROTO_PORT_EVICT_DEFAULT 7401
#define PROTO_PORT_REFILL_DEFAULT 7402

#define PROTO_ETH_LEN 14
#define PROTO_VLAN_LEN 4
#define PROTO_IP4_LEN 20
#define PROTO_UDP_LEN 8
/** Ethernet + IPv4 + UDP, untagged. */
#define PROTO_L2L4_LEN (PROTO_ETH_LEN + PROTO_IP4_LEN + PROTO_UDP_LEN)
/** Ethernet + 802.1Q + IPv4 + UDP. */
#define PROTO_L2L4_VLAN_LEN (PROTO_L2L4_LEN + PROTO_VLAN_LEN)

#define PROTO_HDR_LEN 32
#define PROTO_RESERVE_LEN 32
#define PROTO_EVICT_HDR_LEN 16
#define PROTO_EVICT_ENTRY_LEN 16
#define PROTO_REFILL_REQ_LEN 32
#define PROTO_REFILL_CHUNK_LEN 16
#define PROTO_DELETE_LEN 32
#define PROTO_STATUS_LEN 32
#define PROTO_CACHE_INFO_LEN 48 /* version 2; 32 in version 1 */
#define PROTO_CACHE_INFO_V1_LEN 32
#define PROTO_ACK_LEN 16
#define PROTO_ERROR_LEN 32
#define PROTO_REFILL_DONE_LEN 24
#define PROTO_LOST_LEN 24 /* version 2: a range; 16 in version 1, one token */
#define PROTO_LOST_V1_LEN 16
#define PROTO_DATA_HDR_LEN 24
#define PROTO_REFILL_DATA_HDR_LEN 32
#define PROTO_L2COL_LEN 64	/* L2Column (section 9) */
#define PROTO_L2DEL_LEN 32	/* L2Delete */
#define PROTO_L2DONE_LEN 24	/* L2Done */
#define PROTO_L2INV_HDR_LEN 16 /* InventoryHeader */
#define PROTO_SHCOL_LEN 88	/* SharedColumn (section 10): an L2Column and 24 bytes */

#define PROTO_MTU_DEFAULT 9000
/** Largest MTU accepted anywhere (jumbo). */
#define PROTO_MTU_MAX 9600
/** Largest UDP payload at PROTO_MTU_MAX (IPv4 and UDP headers excluded). */
#define PROTO_PAYLOAD_MAX (PROTO_MTU_MAX - PROTO_IP4_LEN - PROTO_UDP_LEN)
/** Largest frame at PROTO_MTU_MAX (tagged). */
#define PROTO_FRAME_MAX (PROTO_MTU_MAX + PROTO_ETH_LEN + PROTO_VLAN_LEN)

/** Header flag bits. */
#define PROTO_F_ACK_REQ 0x0001
#define PROTO_F_RETRANSMIT 0x0002

/** shard_id meaning "every shard of the model". */
#define PROTO_SHARD_ALL 0xFFFF

/** StatusBody.flags bit 0: the evict path is stalled waiting for space. */
#define PROTO_STATUS_F_STALLED 0x1
#define PROTO_STATUS_F_L2 0x2 /* the shard has a second tier (section 9) */
#define PROTO_STATUS_F_SHARED 0x4 /* the shard reaches the shared level (section 10) */

/**
 * Largest G x C of one EVICT at the given MTU (section 7):
 * (MTU - 28 - 32 - 16) / 16.
 */
static inline uint32_t
proto_evict_max_entries(uint32_t mtu)
{
	if (mtu < 28 + PROTO_HDR_LEN + PROTO_EVICT_HDR_LEN)
		return 0;
	return (mtu - 28 - PROTO_HDR_LEN - PROTO_EVICT_HDR_LEN) / PROTO_EVICT_ENTRY_LEN;
}

/** Message types (section 3). */
#define PROTO_TYPES(X)                                                                             \
	X(HELLO, 0x01)                                                                             \
	X(RESERVE, 0x02)                                                                           \
	X(EVICT, 0x03)                                                                             \
	X(REFILL, 0x04)                                                                            \
	X(DELETE, 0x05)                                                                            \
	X(L2_DOWN, 0x06)                                                                           \
	X(L2_UP, 0x07)                                                                             \
	X(L2_DELETE, 0x08)                                                                         \
	X(REPORT_ACK, 0x09)                                                                        \
	X(SH_DOWN, 0x0A)                                                                           \
	X(SH_UP, 0x0B)                                                                             \
	X(STATUS, 0x10)                                                                            \
	X(ACK, 0x11)                                                                               \
	X(ERROR, 0x12)                                                                             \
	X(REFILL_DONE, 0x13)                                                                       \
	X(TOKEN_LOST, 0x14)                                                                        \
	X(L2_DONE, 0x15)                                                                           \
	X(L2_INVENTORY, 0x16)                                                                      \
	X(EVICT_DATA, 0x20)                                                                        \
	X(REFILL_DATA, 0x21)

enum proto_type {
#define PROTO_TYPE_ENUM(name, val) PROTO_T_##name = val,
	PROTO_TYPES(PROTO_TYPE_ENUM)
#undef PROTO_TYPE_ENUM
};

/** Name of a message type ("DELETE"), or NULL for an unknown type. */
const char *proto_type_name(unsigned int type);

/** True for the control types (0x01-0x1f) that PROTOCOL.md defines. */
bool proto_type_is_control(unsigned int type);

/** Error codes carried in ErrorRecord.code and RefillDone.status. */
#define PROTO_ERRS(X)                                                                              \
	X(HOLE, 1)                                                                                 \
	X(LEFT_GROWTH, 2)                                                                          \
	X(DELETE_NOT_RIGHT, 3)                                                                     \
	X(UNKNOWN_PROMPT, 4)                                                                       \
	X(RANGE, 5)                                                                                \
	X(NO_SPACE, 6)                                                                             \
	X(MALFORMED, 7)                                                                            \
	X(BAD_CACHE, 8)                                                                            \
	X(NO_TIER, 9)                                                                              \
	X(L2_FAILED, 10)                                                                           \
	X(SHARED_FAILED, 11)                                                                       \
	X(SHARED_BAD, 12)                                                                          \
	X(SHARED_KEY, 13)

enum proto_err {
	PROTO_E_OK = 0,
#define PROTO_ERR_ENUM(name, val) PROTO_E_##name = val,
	PROTO_ERRS(PROTO_ERR_ENUM)
#undef PROTO_ERR_ENUM
	PROTO_E_MAX
};

/** Name of an error code ("HOLE"), "OK" for 0, or NULL if unknown. */
const char *proto_err_name(unsigned int code);

/**
 * Why a frame was rejected. One X-macro so that the enum, the names used by
 * kvss-dump and the telemetry keys cannot drift apart.
 */
#define PROTO_REASONS(X)                                                                           \
	X(NOT_KVSS, "not_kvss")                 /* not IPv4/UDP to a KVSS port */          \
	X(VLAN_STACKED, "vlan_stacked")         /* two VLAN tags (QinQ) */                 \
	X(IP_OPTIONS, "ip_options")             /* IPv4 header with options */             \
	X(IP_FRAGMENT, "ip_fragment")           /* MF set or nonzero fragment offset */    \
	X(BAD_IP_CHECKSUM, "bad_ip_checksum")   /* IPv4 header checksum wrong */           \
	X(BAD_UDP_LEN, "bad_udp_len")           /* UDP length disagrees with IPv4 */       \
	X(BAD_UDP_CHECKSUM, "bad_udp_checksum") /* nonzero UDP checksum wrong */           \
	X(TRUNCATED, "truncated")               /* frame shorter than its headers say */   \
	X(BAD_MAGIC, "bad_magic")                                                          \
	X(BAD_VERSION, "bad_version")                                                      \
	X(BAD_TYPE, "bad_type")                 /* unknown message type */                 \
	X(WRONG_PORT, "wrong_port")             /* type does not belong to the port */     \
	X(BAD_BODY_LEN, "bad_body_len")         /* body_len != UDP payload - 32, or short */ \
	X(BAD_COUNT, "bad_count")               /* count does not fit body_len */          \
	X(BAD_DATA_RANGE, "bad_data_range")     /* data payload outside its stream */

enum proto_reason {
	PROTO_OK = 0,
#define PROTO_REASON_ENUM(name, str) PROTO_R_##name,
	PROTO_REASONS(PROTO_REASON_ENUM)
#undef PROTO_REASON_ENUM
	PROTO_R_MAX
};

/** Short name of a reason ("bad_magic"); "ok" for PROTO_OK. */
const char *proto_reason_name(enum proto_reason r);

/* ---- Decoded records (host order; reserved fields are written as 0) ---- */

/** Common header (section 2). */
struct proto_hdr {
	uint8_t version;
	uint8_t type;
	uint16_t flags;
	uint32_t model_id;
	uint16_t shard_id;
	uint16_t count;
	uint32_t epoch;
	uint32_t body_len;
	uint64_t seq;
};

struct proto_reserve {
	uint64_t prompt_id;
	uint64_t continue_id;
	uint32_t start_token_idx;
	uint32_t num_tokens;
	uint16_t cache_id;
};

struct proto_evict_hdr {
	uint64_t batch_no;
	uint16_t num_caches;
	uint16_t g;
	uint16_t ncols; /**< L2_UP: its L2Columns after the entries; EVICT: 0 (reserved) */
};

struct proto_evict_entry {
	uint64_t prompt_id;
	uint32_t token_idx;
	uint32_t sequence_id;
};

struct proto_refill_req {
	uint64_t refill_id;
	uint64_t evict_count;
	uint32_t sequence_id;
	uint32_t cache_idx;
	uint16_t cache_id;
	uint16_t num_chunks;
};

struct proto_refill_chunk {
	uint64_t prompt_id;
	uint32_t start_token_idx;
	uint32_t num_tokens;
};

/**
 * L2Column (section 9): a column of the second tier; with the last four
 * fields, a SharedColumn (section 10: SH_DOWN, SH_UP), whose object the
 * driver names. They are 0 in an L2Column.
 */
struct proto_l2col {
	uint64_t key, parent, isolation_id, prompt_id, evict_count, first_use_ns;
	uint32_t start_token_idx, num_tokens;
	uint16_t cache_id;
	uint64_t object_id;
	uint32_t gen_global, gen_org, layout;
};

/** L2Delete. */
struct proto_l2del {
	uint64_t key, isolation_id, evict_count;
	uint16_t cache_id;
};

/** L2Done's op: which message's column it answers (PROTOCOL.md sections 9 and 10). */
enum proto_l2done_op {
	PROTO_L2OP_L2_DOWN = 1, /* a column written to the shard's disk */
	PROTO_L2OP_L2_UP = 2,	/* a column read from it (also an SH_UP's column of object id 0) */
	PROTO_L2OP_SH_DOWN = 3, /* a slice written to the shared level */
	PROTO_L2OP_SH_UP = 4,	/* a slice read from it */
	PROTO_L2OP_L2_GONE = 5, /* unasked: a column the shard's disk let go (its key retired) */
};

/** L2Done: @c op an enum proto_l2done_op. */
struct proto_l2done {
	uint64_t key, isolation_id;
	uint16_t cache_id;
	uint8_t op;
	uint16_t status;
};

struct proto_delete {
	uint64_t prompt_id;
	uint64_t evict_count;
	uint32_t start_token_idx;
	uint32_t end_token_idx;
	uint16_t cache_id;
};

struct proto_status {
	uint64_t batches_complete;
	uint64_t reports; /* v2: the highest report seq sent in the stream (v1: last_seq_done) */
	uint64_t uptime_ns;
	uint32_t flags;
	uint32_t driver_epoch;
};

struct proto_cache_info {
	uint16_t cache_id;
	uint16_t num_buffers;
	uint32_t bytes_per_token;
	uint64_t capacity_tokens;
	uint64_t stored_tokens;
	uint64_t prompts;
	uint64_t l2_capacity_tokens; /* version 2: the second tier (0: none) */
	uint64_t l2_stored_tokens;
};

struct proto_ack {
	uint64_t cum_seq;  /* done: every seq <= it ran (EVICT, RESERVE) or waits only for data */
	uint64_t recv_seq; /* version 2: every seq <= it was received in order (v1: = cum_seq) */
};

struct proto_error {
	uint64_t seq;
	uint64_t prompt_id;
	uint32_t token_idx;
	uint16_t cache_id;
	uint16_t code;
};

struct proto_refill_done {
	uint64_t refill_id;
	uint32_t tokens;
	uint32_t status;
	uint64_t bytes;
};

struct proto_lost {
	uint64_t prompt_id;
	uint32_t token_idx; /* the first lost token */
	uint32_t count;	    /* version 2: tokens lost from it on (v1: 1) */
	uint16_t cache_id;
};

struct proto_data_hdr {
	uint64_t batch_no;
	uint16_t cache_id;
	uint32_t stream_offset;
	uint32_t stream_len;
	uint32_t driver_epoch; /* version 2: the stream's driver epoch (v1: 0) */
};

struct proto_refill_data_hdr {
	uint64_t refill_id;
	uint32_t sequence_id;
	uint32_t cache_idx;
	uint16_t cache_id;
	uint16_t buffer_id;
	uint32_t stream_offset;
	uint32_t stream_len;
};

/* ---- Little-endian access ---------------------------------------------- */

/*
 * Each a copy of the bytes and, on a big-endian host, a swap: what the
 * compiler makes of a byte-by-byte assembly in an optimized build (one
 * load or store), and also what it makes under the sanitizers, where the
 * byte-by-byte form was a check of every byte's pointer and address and
 * too costly to inline (the shard fuzzer spent a tenth of its time in
 * these).
 */
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
#define PROTO_LE16(v) __builtin_bswap16(v)
#define PROTO_LE32(v) __builtin_bswap32(v)
#define PROTO_LE64(v) __builtin_bswap64(v)
#else
#define PROTO_LE16(v) (v)
#define PROTO_LE32(v) (v)
#define PROTO_LE64(v) (v)
#endif

static inline uint16_t
proto_ld16(const uint8_t *p)
{
	uint16_t v;

	memcpy(&v, p, sizeof(v));
	return PROTO_LE16(v);
}

static inline uint32_t
proto_ld32(const uint8_t *p)
{
	uint32_t v;

	memcpy(&v, p, sizeof(v));
	return PROTO_LE32(v);
}

static inline uint64_t
proto_ld64(const uint8_t *p)
{
	uint64_t v;

	memcpy(&v, p, sizeof(v));
	return PROTO_LE64(v);
}

static inline void
proto_st16(uint8_t *p, uint16_t v)
{
	v = PROTO_LE16(v);
	memcpy(p, &v, sizeof(v));
}

static inline void
proto_st32(uint8_t *p, uint32_t v)
{
	v = PROTO_LE32(v);
	memcpy(p, &v, sizeof(v));
}

static inline void
proto_st64(uint8_t *p, uint64_t v)
{
	v = PROTO_LE64(v);
	memcpy(p, &v, sizeof(v));
}

/* ---- Frame sources ------------------------------------------------------ */

/**
 * Read callback with the contract of rte_pktmbuf_read(): return a pointer to
 * bytes [off, off + len) of the frame, either into the frame itself when they
 * are contiguous there or into @p buf (which holds at least @p len bytes)
 * after copying them; NULL when the range is not inside the frame.
 */
typedef const void *(*proto_read_fn)(const void *ctx, uint32_t off, uint32_t len, void *buf);

/** One contiguous piece of a frame (for segmented sources). */
struct proto_seg {
	const uint8_t *data;
	uint32_t len;
};

/**
 * A frame to parse: a read callback over @p len bytes. A source set up by
 * proto_src_bytes() points into itself: do not copy it by value.
 */
struct proto_src {
	proto_read_fn read;
	const void *ctx;
	uint32_t len;
	struct proto_seg flat; /**< storage for proto_src_bytes() */
};

/** A frame made of @p nsegs pieces, in order (like an mbuf chain). */
struct proto_segs {
	const struct proto_seg *seg;
	unsigned int nsegs;
};

/** Frame source over one contiguous buffer (ctx must outlive the source). */
void proto_src_bytes(struct proto_src *src, const void *frame, uint32_t len);

/** Frame source over a segment list (@p segs must outlive the source). */
void proto_src_segs(struct proto_src *src, const struct proto_segs *segs);

/* ---- Parsing ----------------------------------------------------------- */

/** UDP ports (host order) that identify KVSS traffic. */
struct proto_ports {
	uint16_t ctrl;
	uint16_t evict;
	uint16_t refill;
	/* Decode version 1 frames too (kvss-dump, captures); the shard and the
	 * driver speak version 2 only and drop the others (bad_version). */
	bool accept_v1;
};

/** The defaults, 7400, 7401, 7402. */
extern const struct proto_ports proto_ports_default;

/** Addresses of a parsed or built frame (host order except the MACs). */
struct proto_addr {
	uint8_t dst_mac[6];
	uint8_t src_mac[6];
	bool has_vlan;
	uint16_t vlan_tci;
	uint32_t src_ip;
	uint32_t dst_ip;
	uint16_t src_port;
	uint16_t dst_port;
	uint8_t ttl; /* parsed: the IPv4 TTL received (builders send PROTO_TTL) */
};

/*
 * Every frame leaves with this IPv4 TTL; a router decrements it, so a frame
 * received with TTL t crossed PROTO_TTL - t routers (PROTOCOL.md section 1).
 */
#define PROTO_TTL 64

/** Routers a received frame crossed (0 also for a TTL above PROTO_TTL: not ours to read). */
static inline uint8_t
proto_hops(const struct proto_addr *a)
{
	return a->ttl < PROTO_TTL ? (uint8_t)(PROTO_TTL - a->ttl) : 0;
}

/** Bytes a parsed message may need to copy a body split across segments. */
#define PROTO_SCRATCH_LEN PROTO_PAYLOAD_MAX

/**
 * A parsed message. Large (it embeds a scratch area so that a body split
 * across segments can be made contiguous): keep one per lcore and reuse it.
 */
struct proto_msg {
	struct proto_addr addr;
	struct proto_hdr hdr;
	/** Offset of the UDP payload (the KVSS header) inside the frame. */
	uint32_t payload_off;
	/**
	 * Control messages: the whole body (hdr.body_len bytes), contiguous,
	 * pointing into the frame or into scratch. Data messages: NULL.
	 */
	const uint8_t *body;
	union {
		struct proto_evict_hdr evict;
		struct proto_status status;
		struct proto_ack ack;
		struct proto_data_hdr data;
		struct proto_refill_data_hdr refill_data;
	} u;
	/** Data messages: where the payload bytes are in the frame, and how many. */
	uint32_t data_off;
	uint32_t data_len;
	uint8_t scratch[PROTO_SCRATCH_LEN];
};

/**
 * Parse one Ethernet frame.
 *
 * Checks the framing of section 1 and the header and body consistency of
 * sections 2 and 3 (every record count against body_len, REFILL's chunk
 * counts, a data payload inside its stream). Semantic rules of section 4
 * (which token may be evicted) are the store's business, not the parser's.
 *
 * @return PROTO_OK and @p msg filled, or the reason the frame is rejected
 *   (then @p msg holds whatever was decoded before the failure).
 */
enum proto_reason proto_parse_src(const struct proto_src *src, const struct proto_ports *ports,
				  struct proto_msg *msg);

/** proto_parse_src() over one contiguous buffer. */
enum proto_reason proto_parse(const void *frame, uint32_t len, const struct proto_ports *ports,
			      struct proto_msg *msg);

/**
 * Parse a bare UDP payload (KVSS header and body) that arrived on
 * @p dst_port: the checks of sections 2 and 3 only.
 */
enum proto_reason proto_parse_payload(const void *payload, uint32_t len, uint16_t dst_port,
				      const struct proto_ports *ports, struct proto_msg *msg);

/* Record accessors over a parsed control message; @p i < hdr.count. */

static inline void
proto_get_reserve(const struct proto_msg *m, unsigned int i, struct proto_reserve *r)
{
	const uint8_t *p = m->body + (size_t)i * PROTO_RESERVE_LEN;

	r->prompt_id = proto_ld64(p);
	r->continue_id = proto_ld64(p + 8);
	r->start_token_idx = proto_ld32(p + 16);
	r->num_tokens = proto_ld32(p + 20);
	r->cache_id = proto_ld16(p + 24);
}

/** Entry @p i of an EVICT, in wire order: token i / C, cache i % C. */
static inline void
proto_get_evict_entry(const struct proto_msg *m, unsigned int i, struct proto_evict_entry *e)
{
	const uint8_t *p = m->body + PROTO_EVICT_HDR_LEN + (size_t)i * PROTO_EVICT_ENTRY_LEN;

	e->prompt_id = proto_ld64(p);
	e->token_idx = proto_ld32(p + 8);
	e->sequence_id = proto_ld32(p + 12);
}

/** A column record's length in a message of @p type: SharedColumn or L2Column. */
static inline uint32_t
proto_col_len(unsigned int type)
{
	return type == PROTO_T_SH_DOWN || type == PROTO_T_SH_UP ? PROTO_SHCOL_LEN : PROTO_L2COL_LEN;
}

/** An L2Column at @p p (section 9); a SharedColumn's (section 10) when @p len says so. */
static inline void
proto_get_l2col_at(const uint8_t *p, struct proto_l2col *c, uint32_t len)
{
	c->object_id = 0;
	c->gen_global = c->gen_org = c->layout = 0;
	if (len == PROTO_SHCOL_LEN) {
		c->object_id = proto_ld64(p + 64);
		c->gen_global = proto_ld32(p + 72);
		c->gen_org = proto_ld32(p + 76);
		c->layout = proto_ld32(p + 80);
	}
	c->key = proto_ld64(p);
	c->parent = proto_ld64(p + 8);
	c->isolation_id = proto_ld64(p + 16);
	c->prompt_id = proto_ld64(p + 24);
	c->evict_count = proto_ld64(p + 32);
	c->first_use_ns = proto_ld64(p + 40);
	c->start_token_idx = proto_ld32(p + 48);
	c->num_tokens = proto_ld32(p + 52);
	c->cache_id = proto_ld16(p + 56);
}

/** Record @p i of an L2_DOWN or an SH_DOWN. */
static inline void
proto_get_l2_down(const struct proto_msg *m, unsigned int i, struct proto_l2col *c)
{
	uint32_t len = proto_col_len(m->hdr.type);

	proto_get_l2col_at(m->body + (size_t)i * len, c, len);
}

/** Column @p i of an L2_UP or an SH_UP (after its u.evict.g x num_caches entries). */
static inline void
proto_get_l2_up_col(const struct proto_msg *m, unsigned int i, struct proto_l2col *c)
{
	uint32_t len = proto_col_len(m->hdr.type);

	proto_get_l2col_at(m->body + PROTO_EVICT_HDR_LEN + (size_t)m->hdr.count * PROTO_EVICT_ENTRY_LEN +
			   (size_t)i * len, c, len);
}

/** Record @p i of an L2_INVENTORY; its header's total and first. */
static inline void
proto_get_l2_inventory(const struct proto_msg *m, unsigned int i, struct proto_l2col *c)
{
	proto_get_l2col_at(m->body + PROTO_L2INV_HDR_LEN + (size_t)i * PROTO_L2COL_LEN, c,
			   PROTO_L2COL_LEN);
}

static inline void
proto_get_l2_inventory_hdr(const struct proto_msg *m, uint32_t *total, uint32_t *first)
{
	*total = proto_ld32(m->body);
	*first = proto_ld32(m->body + 4);
}

static inline void
proto_get_l2_delete(const struct proto_msg *m, unsigned int i, struct proto_l2del *d)
{
	const uint8_t *p = m->body + (size_t)i * PROTO_L2DEL_LEN;

	d->key = proto_ld64(p);
	d->isolation_id = proto_ld64(p + 8);
	d->evict_count = proto_ld64(p + 16);
	d->cache_id = proto_ld16(p + 24);
}

static inline void
proto_get_l2_done(const struct proto_msg *m, unsigned int i, struct proto_l2done *d)
{
	const uint8_t *p = m->body + (size_t)i * PROTO_L2DONE_LEN;

	d->key = proto_ld64(p);
	d->isolation_id = proto_ld64(p + 8);
	d->cache_id = proto_ld16(p + 16);
	d->op = p[18];
	d->status = proto_ld16(p + 20);
}

static inline void
proto_get_delete(const struct proto_msg *m, unsigned int i, struct proto_delete *d)
{
	const uint8_t *p = m->body + (size_t)i * PROTO_DELETE_LEN;

	d->prompt_id = proto_ld64(p);
	d->evict_count = proto_ld64(p + 8);
	d->start_token_idx = proto_ld32(p + 16);
	d->end_token_idx = proto_ld32(p + 20);
	d->cache_id = proto_ld16(p + 24);
}

static inline void
proto_get_cache_info(const struct proto_msg *m, unsigned int i, struct proto_cache_info *c)
{
	uint32_t rl = m->hdr.version == 1 ? PROTO_CACHE_INFO_V1_LEN : PROTO_CACHE_INFO_LEN;
	const uint8_t *p = m->body + PROTO_STATUS_LEN + (size_t)i * rl;

	c->cache_id = proto_ld16(p);
	c->num_buffers = proto_ld16(p + 2);
	c->bytes_per_token = proto_ld32(p + 4);
	c->capacity_tokens = proto_ld64(p + 8);
	c->stored_tokens = proto_ld64(p + 16);
	c->prompts = proto_ld64(p + 24);
	c->l2_capacity_tokens = m->hdr.version == 1 ? 0 : proto_ld64(p + 32);
	c->l2_stored_tokens = m->hdr.version == 1 ? 0 : proto_ld64(p + 40);
}

static inline void
proto_get_error(const struct proto_msg *m, unsigned int i, struct proto_error *e)
{
	const uint8_t *p = m->body + (size_t)i * PROTO_ERROR_LEN;

	e->seq = proto_ld64(p);
	e->prompt_id = proto_ld64(p + 8);
	e->token_idx = proto_ld32(p + 16);
	e->cache_id = proto_ld16(p + 20);
	e->code = proto_ld16(p + 22);
}

static inline void
proto_get_refill_done(const struct proto_msg *m, unsigned int i, struct proto_refill_done *d)
{
	const uint8_t *p = m->body + (size_t)i * PROTO_REFILL_DONE_LEN;

	d->refill_id = proto_ld64(p);
	d->tokens = proto_ld32(p + 8);
	d->status = proto_ld32(p + 12);
	d->bytes = proto_ld64(p + 16);
}

static inline void
proto_get_lost(const struct proto_msg *m, unsigned int i, struct proto_lost *l)
{
	if (m->hdr.version == 1) {
		const uint8_t *p = m->body + (size_t)i * PROTO_LOST_V1_LEN;

		l->prompt_id = proto_ld64(p);
		l->token_idx = proto_ld32(p + 8);
		l->cache_id = proto_ld16(p + 12);
		l->count = 1;
	} else {
		const uint8_t *p = m->body + (size_t)i * PROTO_LOST_LEN;

		l->prompt_id = proto_ld64(p);
		l->token_idx = proto_ld32(p + 8);
		l->count = proto_ld32(p + 12);
		l->cache_id = proto_ld16(p + 16);
	}
}

/**
 * Walk the requests of a parsed REFILL. Start with *@p off = 0; each call
 * decodes one request into @p req, points *@p chunks at its chunk records
 * (decode them with proto_get_refill_chunk()) and advances *@p off.
 *
 * @return 1 while a request was decoded, 0 at the end.
 */
static inline int
proto_next_refill(const struct proto_msg *m, uint32_t *off, struct proto_refill_req *req,
		  const uint8_t **chunks)
{
	const uint8_t *p;

	if (*off + PROTO_REFILL_REQ_LEN > m->hdr.body_len)
		return 0;
	p = m->body + *off;
	req->refill_id = proto_ld64(p);
	req->evict_count = proto_ld64(p + 8);
	req->sequence_id = proto_ld32(p + 16);
	req->cache_idx = proto_ld32(p + 20);
	req->cache_id = proto_ld16(p + 24);
	req->num_chunks = proto_ld16(p + 26);
	*chunks = p + PROTO_REFILL_REQ_LEN;
	*off += PROTO_REFILL_REQ_LEN + (uint32_t)req->num_chunks * PROTO_REFILL_CHUNK_LEN;
	return 1;
}

static inline void
proto_get_refill_chunk(const uint8_t *chunks, unsigned int i, struct proto_refill_chunk *c)
{
	const uint8_t *p = chunks + (size_t)i * PROTO_REFILL_CHUNK_LEN;

	c->prompt_id = proto_ld64(p);
	c->start_token_idx = proto_ld32(p + 8);
	c->num_tokens = proto_ld32(p + 12);
}

/* ---- Building ----------------------------------------------------------- */

/**
 * Incremental builder of one UDP payload (KVSS header and body) in caller
 * memory. Begin, add records, end. An add that does not fit returns -ENOSPC
 * and leaves the message as it was, so a caller can end it, send it and
 * begin the next one.
 */
struct proto_builder {
	uint8_t *buf;
	uint32_t cap;
	uint32_t len;
	uint32_t count;
	uint8_t type;
	/** Offset of the REFILL request that chunks are being added to. */
	uint32_t cur_req;
	/** Data messages: payload bytes that follow outside buf (a gather list). */
	uint32_t gather;
};

/**
 * Begin a message of type @p h->type in @p buf (at least 32 bytes).
 * count and body_len in @p h are ignored: proto_build_end() sets them.
 * @return 0, or -ENOSPC if @p cap is smaller than the header, -EINVAL for
 *   an unknown type.
 */
int proto_build_begin(struct proto_builder *b, void *buf, uint32_t cap, const struct proto_hdr *h);

int proto_build_reserve(struct proto_builder *b, const struct proto_reserve *r);
/** EVICT: the batch header; must be the first add. */
int proto_build_evict_hdr(struct proto_builder *b, const struct proto_evict_hdr *e);
/** EVICT: one entry; entries go token by token, cache by cache. */
int proto_build_evict_entry(struct proto_builder *b, const struct proto_evict_entry *e);
/** REFILL: a request with no chunks yet (num_chunks counts those added). */
int proto_build_refill_req(struct proto_builder *b, const struct proto_refill_req *r);
/** REFILL: one chunk of the last request added. */
int proto_build_refill_chunk(struct proto_builder *b, const struct proto_refill_chunk *c);
int proto_build_delete(struct proto_builder *b, const struct proto_delete *d);
/*
 * The second tier (section 9). L2_UP: its header (ncols set), its entries,
 * then its columns. The same calls build SH_DOWN and SH_UP (section 10) into
 * a builder begun with those types: their columns are SharedColumns.
 */
int proto_build_l2_down(struct proto_builder *b, const struct proto_l2col *c);
int proto_build_l2_up_hdr(struct proto_builder *b, const struct proto_evict_hdr *e);
int proto_build_l2_up_entry(struct proto_builder *b, const struct proto_evict_entry *e);
int proto_build_l2_up_col(struct proto_builder *b, const struct proto_l2col *c);
int proto_build_l2_delete(struct proto_builder *b, const struct proto_l2del *d);
int proto_build_l2_done(struct proto_builder *b, const struct proto_l2done *d);
/* L2_INVENTORY: its header first, then its columns. */
int proto_build_l2_inventory_hdr(struct proto_builder *b, uint32_t total, uint32_t first);
int proto_build_l2_inventory_col(struct proto_builder *b, const struct proto_l2col *c);
/** STATUS: the body; must be the first add. */
int proto_build_status(struct proto_builder *b, const struct proto_status *s);
int proto_build_cache_info(struct proto_builder *b, const struct proto_cache_info *c);
int proto_build_ack(struct proto_builder *b, const struct proto_ack *a);
/** REPORT_ACK's body (version 2): every report with seq <= @p cum arrived. */
int proto_build_report_ack(struct proto_builder *b, uint64_t cum);
int proto_build_error(struct proto_builder *b, const struct proto_error *e);
int proto_build_refill_done(struct proto_builder *b, const struct proto_refill_done *d);
int proto_build_lost(struct proto_builder *b, const struct proto_lost *l);
/** EVICT_DATA: the data header; payload bytes follow via proto_build_bytes(). */
int proto_build_data_hdr(struct proto_builder *b, const struct proto_data_hdr *d);
int proto_build_refill_data_hdr(struct proto_builder *b, const struct proto_refill_data_hdr *d);
/**
 * Append raw payload bytes (data messages). @p p may be where they go
 * (b->buf + b->len), when the caller wrote them in place.
 */
int proto_build_bytes(struct proto_builder *b, const void *p, uint32_t len);

/**
 * Data messages: @p len more payload bytes that the caller sends after the
 * built bytes, from elsewhere (a chain of mbufs over stored memory):
 * body_len counts them, the length proto_build_end() returns does not.
 * @return 0, -EINVAL before the data header or for another type, -ENOSPC
 *   when the message would pass PROTO_PAYLOAD_MAX.
 */
int proto_build_gather(struct proto_builder *b, uint32_t len);

/**
 * Finish the message: write count and body_len.
 * @return the payload length in bytes built in the buffer (without the
 *   bytes proto_build_gather() announced).
 */
uint32_t proto_build_end(struct proto_builder *b);

/** Room left for records, in bytes. */
static inline uint32_t
proto_build_room(const struct proto_builder *b)
{
	return b->cap - b->len;
}

/** Bytes of Ethernet, optional VLAN, IPv4 and UDP headers for @p a. */
static inline uint32_t
proto_l2l4_len(const struct proto_addr *a)
{
	return a->has_vlan ? PROTO_L2L4_VLAN_LEN : PROTO_L2L4_LEN;
}

/**
 * Write Ethernet (+802.1Q), IPv4 (DF set, correct header checksum, TTL 64)
 * and UDP (checksum 0) headers for a payload of @p payload_len bytes into
 * @p hdr, which holds proto_l2l4_len(@p a) bytes.
 */
void proto_write_l2l4(void *hdr, const struct proto_addr *a, uint32_t payload_len);

/**
 * Build a whole frame: headers for @p a, then @p payload.
 * @return the frame length, or 0 if it does not fit @p cap.
 */
uint32_t proto_build_frame(void *frame, uint32_t cap, const struct proto_addr *a,
			   const void *payload, uint32_t payload_len);

/** IPv4 header checksum of @p len bytes (with the checksum field as given). */
uint16_t proto_ip4_cksum(const void *iphdr, uint32_t len);

/* ---- mbuf entry points (proto_mbuf.c; the only part that needs DPDK) ---- */

struct rte_mbuf;
struct rte_mempool;

/**
 * proto_parse_src() over an mbuf chain. Every read goes through
 * rte_pktmbuf_read(), so a header split across segments parses and nothing
 * past any segment's data_len is read. Needs no EAL.
 */
enum proto_reason proto_parse_mbuf(const struct rte_mbuf *m, const struct proto_ports *ports,
				   struct proto_msg *msg);

/**
 * Prepend Ethernet/IPv4/UDP headers for @p a to a chain that holds the UDP
 * payload (all of pkt_len). The first segment needs proto_l2l4_len(@p a) bytes
 * of headroom.
 * @return 0, or -ENOSPC without headroom, -EMSGSIZE if the payload is too big.
 */
int proto_mbuf_encap(struct rte_mbuf *m, const struct proto_addr *a);

/**
 * Allocate one mbuf from @p mp holding a whole frame: headers for @p a and
 * @p payload. The caller owns the returned mbuf.
 * @return the mbuf, or NULL (rte_errno ENOMEM, or EMSGSIZE if it cannot fit
 *   one segment).
 */
struct rte_mbuf *proto_mbuf_frame(struct rte_mempool *mp, const struct proto_addr *a,
				  const void *payload, uint32_t payload_len);

/* ---- Reference wafer content (section 6) -------------------------------- */

/** isolation_id of an organization named by a string: xxh3(name, 0). */
uint64_t proto_ref_isolation_id(const void *name, size_t len);

/**
 * A cache salt's id (section 6): xxh3 of its @p len bytes (seed 0), 1
 * where that is 0 (0 is "no salt").
 */
uint64_t proto_ref_salt(const void *salt, size_t len);

/**
 * Where a prompt's chain of column keys starts (section 6): @p isolation_id
 * without a salt (@p salt 0); with one, xxh3 of 13 bytes, "salt", a zero
 * byte and the salt's id (u64 little-endian), seeded with @p isolation_id.
 * The 13 bytes are never a column's input (a multiple of 4 bytes): the
 * two domains do not share inputs. (XXH3 is no cryptographic hash: what
 * keeps another user out of a salted prompt's columns is that its keys
 * depend on a salt that user does not know.)
 */
uint64_t proto_ref_chain_root(uint64_t isolation_id, uint64_t salt);

/** One step of the prefix hash: h(i) = xxh3(u32le(token), h(i-1)). */
uint64_t proto_ref_hash_next(uint64_t prev, uint32_t token);

/**
 * Bytes [off, off + len) of a token's KV content for (model, shard, cache),
 * where @p h is the token's prefix hash h(i). Random access: any range of
 * the splitmix64 stream can be produced without the bytes before it.
 */
void proto_ref_fill(uint64_t h, uint32_t model, uint32_t shard, uint32_t cache, uint64_t off,
		    void *out, size_t len);

/**
 * Compare @p len bytes at @p p with the reference content at offset @p off.
 * @return 0 if equal, else 1 + the index of the first differing byte.
 */
size_t proto_ref_check(uint64_t h, uint32_t model, uint32_t shard, uint32_t cache, uint64_t off,
		       const void *p, size_t len);

/**
 * The fill and the check run four words at a time with AVX2 where the CPU
 * has it, else a word at a time; both make the same bytes. @p on = 0 or 1
 * chooses (1 only where the CPU has AVX2; for tests and benchmarks), -1
 * only asks.
 * @return 1 if the vector path was in use before the call, else 0.
 */
int proto_ref_simd(int on);

#ifdef __cplusplus
}
#endif

#endif /* KVSS_PROTO_H */
