/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The KVSS wire protocol (docs/PROTOCOL.md, version 2) as a small,
 * independent encoder and decoder of UDP payloads, for kvss-udp-client:
 * written from the document, not from lib/proto, so that the client is a
 * second producer of the protocol beside the emulator. The kernel's UDP
 * socket does Ethernet, IPv4 and UDP; everything here starts at the KVSS
 * header (offset 0 of the UDP payload), little-endian and packed.
 *
 * Builders write into a caller's buffer and return the payload length, or
 * 0 when it does not fit. The parser checks what section 2 asks of a
 * receiver (magic, version, a known type, body_len, count against
 * body_len) and never reads past the payload.
 */
#ifndef KVSS_UCWIRE_H
#define KVSS_UCWIRE_H

#include <stddef.h>
#include <stdint.h>

#define UC_VERSION 2
#define UC_HDR 32
#define UC_SHARD_ALL 0xFFFF
#define UC_F_ACK_REQ 0x0001
#define UC_F_RETRANSMIT 0x0002

/* Section 3's types this client sends or takes. */
enum uc_type {
	UC_HELLO = 0x01,
	UC_RESERVE = 0x02,
	UC_EVICT = 0x03,
	UC_REFILL = 0x04,
	UC_DELETE = 0x05,
	UC_REPORT_ACK = 0x09,
	UC_STATUS = 0x10,
	UC_ACK = 0x11,
	UC_ERROR = 0x12,
	UC_REFILL_DONE = 0x13,
	UC_TOKEN_LOST = 0x14,
	UC_L2_DONE = 0x15,
	UC_L2_INVENTORY = 0x16,
	UC_EVICT_DATA = 0x20,
	UC_REFILL_DATA = 0x21,
};

/* Record sizes (section 3). */
#define UC_RESERVE_LEN 32
#define UC_EVICT_HDR_LEN 16
#define UC_EVICT_ENTRY_LEN 16
#define UC_REFILL_REQ_LEN 32
#define UC_CHUNK_LEN 16
#define UC_DELETE_LEN 32
#define UC_STATUS_LEN 32
#define UC_CACHE_INFO_LEN 48
#define UC_ACK_LEN 16
#define UC_ERROR_LEN 32
#define UC_REFILL_DONE_LEN 24
#define UC_LOST_LEN 24
#define UC_DATA_HDR_LEN 24
#define UC_REFILL_DATA_HDR_LEN 32

/** The common header (section 2). */
struct uc_hdr {
	uint8_t type;
	uint16_t flags;
	uint32_t model;
	uint16_t shard;
	uint16_t count;
	uint32_t epoch;
	uint32_t body_len; /* builders fill it in */
	uint64_t seq;
};

struct uc_reserve {
	uint64_t prompt, continue_id;
	uint32_t start, tokens;
	uint16_t cache;
};

struct uc_entry {
	uint64_t prompt;
	uint32_t token, sequence;
};

struct uc_chunk {
	uint64_t prompt;
	uint32_t start, tokens;
};

struct uc_refill_req {
	uint64_t refill_id, evict_count;
	uint32_t sequence, cache_idx;
	uint16_t cache, nchunks;
	const struct uc_chunk *chunk;
};

struct uc_delete {
	uint64_t prompt, evict_count;
	uint32_t start, end;
	uint16_t cache;
};

struct uc_data_hdr {
	uint64_t batch;
	uint16_t cache;
	uint32_t offset, stream_len, driver_epoch;
};

/* ---- builders ---- */

/** HELLO: no body, seq 0. */
size_t uc_build_hello(uint8_t *p, size_t cap, const struct uc_hdr *h);
/** RESERVE of @p n records. */
size_t uc_build_reserve(uint8_t *p, size_t cap, const struct uc_hdr *h, const struct uc_reserve *r,
			unsigned int n);
/** EVICT: batch @p batch, @p ncaches caches, @p g tokens; @p e holds g x ncaches entries. */
size_t uc_build_evict(uint8_t *p, size_t cap, const struct uc_hdr *h, uint64_t batch,
		      uint16_t ncaches, uint16_t g, const struct uc_entry *e);
/** REFILL of @p n requests, each with its chunks. */
size_t uc_build_refill(uint8_t *p, size_t cap, const struct uc_hdr *h, const struct uc_refill_req *r,
		       unsigned int n);
/** DELETE of @p n records. */
size_t uc_build_delete(uint8_t *p, size_t cap, const struct uc_hdr *h, const struct uc_delete *d,
		       unsigned int n);
/** REPORT_ACK: every report through @p cum taken (seq 0). */
size_t uc_build_report_ack(uint8_t *p, size_t cap, const struct uc_hdr *h, uint64_t cum);
/** EVICT_DATA: the DataHeader and @p len bytes of the stream. */
size_t uc_build_evict_data(uint8_t *p, size_t cap, const struct uc_hdr *h,
			   const struct uc_data_hdr *d, const uint8_t *bytes, uint32_t len);

/* ---- the parser ---- */

struct uc_msg {
	struct uc_hdr h;
	const uint8_t *body; /* h.body_len bytes */
};

/**
 * Check and decode one payload of @p len bytes. @return NULL, or a short
 * reason ("bad magic", "bad version", "bad type", "bad body_len",
 * "bad count") for a payload to drop.
 */
const char *uc_parse(const uint8_t *p, size_t len, struct uc_msg *m);

struct uc_status {
	uint64_t batches_complete, reports, uptime_ns;
	uint32_t flags, driver_epoch;
};
struct uc_cache_info {
	uint16_t cache, buffers;
	uint32_t bytes_per_token;
	uint64_t capacity, stored, prompts, l2_capacity, l2_stored;
};
struct uc_ack {
	uint64_t cum_seq, recv_seq;
};
struct uc_error {
	uint64_t seq, prompt;
	uint32_t token;
	uint16_t cache, code;
};
struct uc_refill_done {
	uint64_t refill_id;
	uint32_t tokens, status;
	uint64_t bytes;
};
struct uc_lost {
	uint64_t prompt;
	uint32_t token, tokens;
	uint16_t cache;
};
struct uc_refill_data {
	uint64_t refill_id;
	uint32_t sequence, cache_idx;
	uint16_t cache, buffer;
	uint32_t offset, stream_len;
	const uint8_t *bytes; /* the payload after the header */
	uint32_t len;
};

/* Accessors over a parsed message of the right type; @p i < h.count. */
void uc_get_status(const struct uc_msg *m, struct uc_status *s);
void uc_get_cache_info(const struct uc_msg *m, unsigned int i, struct uc_cache_info *c);
void uc_get_ack(const struct uc_msg *m, struct uc_ack *a);
void uc_get_error(const struct uc_msg *m, unsigned int i, struct uc_error *e);
void uc_get_refill_done(const struct uc_msg *m, unsigned int i, struct uc_refill_done *d);
void uc_get_lost(const struct uc_msg *m, unsigned int i, struct uc_lost *l);
void uc_get_refill_data(const struct uc_msg *m, struct uc_refill_data *d);

/** Section 3's error code names ("HOLE", ...; "?" for another). */
const char *uc_err_name(unsigned int code);

/* ---- the reference wafer content (section 6) ---- */

/** The isolation id of an organization named @p name. */
uint64_t uc_ref_isolation(const char *name, size_t len);
/** A cache salt's id: xxh3 of its bytes (seed 0), 1 where that is 0. */
uint64_t uc_ref_salt(const char *salt, size_t len);
/** Where a prompt's chain starts: the isolation id, or salted (@p salt_id nonzero). */
uint64_t uc_ref_root(uint64_t isolation, uint64_t salt_id);
/** h(i) from h(i-1) and token id @p token. */
uint64_t uc_ref_next(uint64_t prev, uint32_t token);
/**
 * The client's prompt: @p n token ids drawn from @p seed (a splitmix64
 * stream, ids 1..128000), and h(i) of each from the chain's root @p root
 * (h(-1): the isolation id, or its salted root) into @p h[0..n).
 */
void uc_ref_prompt(uint64_t root, uint64_t seed, uint64_t n, uint64_t *h);
/** Bytes [@p off, @p off + @p len) of a token's stream for (model, shard, cache). */
void uc_ref_bytes(uint64_t h, uint32_t model, uint32_t shard, uint32_t cache, uint64_t off,
		  uint8_t *out, size_t len);

#endif
