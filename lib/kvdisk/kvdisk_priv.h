/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * lib/kvdisk's own (kvdisk.h is the interface): the on-disk layout
 * (superblock, slot headers), the slot state and its index, and the op pool
 * on the io_uring ring, shared by the I/O paths (kvdisk.c) and open,
 * rebuild and close (kvdisk_open.c).
 */
#ifndef KVDISK_PRIV_H
#define KVDISK_PRIV_H

#include "kvdisk.h"

#include <liburing.h>
#include <stdbool.h>
#include <stddef.h>
#include <xxhash.h>

#define NIL UINT32_MAX
#define SB_MAGIC 0x3130324c53535b4bULL /* "K[SSL201" */
#define HDR_MAGIC 0x4c43564bu	       /* "KVCL" */
#define VERSION 1

/* The superblock, at offset 0: what the file was made for. */
struct sb_cache {
	uint32_t bytes_per_token, column_tokens;
	uint64_t slots, slot_bytes, offset;
};

struct sb {
	uint64_t magic;
	uint32_t version;
	uint16_t num_caches, pad;
	struct sb_cache cache[KVDISK_MAX_CACHES];
	uint64_t hash; /* XXH3 of everything before it */
};

/* A slot's header on disk: 64 bytes. */
struct hdr {
	uint32_t magic;
	uint16_t version;
	uint16_t cache;
	uint64_t key, parent, org, first_use_ns;
	uint32_t start, tokens;
	uint64_t data_hash;
	uint64_t hdr_hash; /* XXH3 of the 56 bytes before it */
};
_Static_assert(sizeof(struct hdr) == KVDISK_HDR_LEN, "the header is 64 bytes");

enum slot_state { S_FREE, S_LIVE, S_PUT, S_CLEAR };

struct slot {
	struct kvdisk_meta m;
	uint32_t hnext;
	uint16_t readers; /* gets in flight */
	uint8_t state;
	uint8_t del_pending; /* deleted while read: cleared when the reads end */
	uint32_t del_op;     /* ... by this op (a caller's DEL), or NIL */
};

struct region {
	struct sb_cache g;
	struct slot *s;
	uint32_t *bucket, nbucket;
	uint32_t *free, nfree;
	uint32_t clearing; /* slots being cleared: free once their cleared header is written */
};

struct op {
	enum kvdisk_op_type type;
	uint16_t cache;
	uint32_t slot;
	uint32_t old; /* PUT: the slot of the column it replaces, or NIL */
	uint64_t cookie;
	bool clear_only; /* a clear with no caller waiting (a replaced or corrupt column) */
	uint8_t *buf;	 /* slot_bytes, aligned */
	uint32_t next_free;
};

struct clear_req {
	uint16_t cache;
	uint32_t slot;
};

struct kvdisk {
	int fd;
	bool direct;
	bool fixed; /* the op buffers are registered with the ring */
	struct io_uring ring;
	uint32_t qd;
	struct region r[KVDISK_MAX_CACHES];
	uint16_t nc;
	struct op *ops;
	uint32_t op_free, inflight, unsubmitted;
	uint8_t *bufs;
	uint64_t max_slot;
	uint32_t *held, nheld; /* GET ops whose bytes the caller holds until the next poll */
	struct clear_req *clears; /* slots waiting for a free op to be cleared */
	uint32_t nclears, clears_cap;
	uint8_t *zero; /* a cleared header block */
	struct kvdisk_stats st;
};

static inline uint32_t
bucket_of(const struct region *r, uint64_t key)
{
	return (uint32_t)((key * 0x9E3779B97F4A7C15ULL) >> 32) % r->nbucket;
}

static inline uint32_t
find(const struct region *r, uint64_t key, uint64_t org)
{
	uint32_t i;

	for (i = r->bucket[bucket_of(r, key)]; i != NIL; i = r->s[i].hnext)
		if (r->s[i].m.key == key && r->s[i].m.org == org)
			return i;
	return NIL;
}

static inline void
index_add(struct region *r, uint32_t i)
{
	uint32_t b = bucket_of(r, r->s[i].m.key);

	r->s[i].hnext = r->bucket[b];
	r->bucket[b] = i;
	r->s[i].state = S_LIVE;
}

static inline void
index_del(struct region *r, uint32_t i)
{
	uint32_t *p = &r->bucket[bucket_of(r, r->s[i].m.key)];

	while (*p != i && *p != NIL)
		p = &r->s[*p].hnext;
	if (*p == i)
		*p = r->s[i].hnext;
	r->s[i].hnext = NIL;
}

static inline uint64_t
slot_off(const struct region *r, uint32_t i)
{
	return r->g.offset + (uint64_t)i * r->g.slot_bytes;
}

static inline uint64_t
hdr_hash(const struct hdr *h)
{
	return XXH3_64bits(h, offsetof(struct hdr, hdr_hash));
}

/* The op pool and the ring (kvdisk.c). */
struct op *kd_op_get(struct kvdisk *d);
void kd_op_put(struct kvdisk *d, struct op *o);
void kd_submit(struct kvdisk *d, struct op *o, bool write, uint32_t len, uint64_t off);

#endif
