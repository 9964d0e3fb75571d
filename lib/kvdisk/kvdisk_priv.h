/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * lib/kvdisk's own (kvdisk.h is the interface): the on-disk layout
 * (superblock, slot headers, their checksums), the slot state and its
 * index, and the op pool on the io_uring ring, shared by the I/O paths
 * (kvdisk.c), open, rebuild and close (kvdisk_open.c), and the path's
 * checks and what its first MiB holds (kvdisk_file.c).
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
/*
 * 2: the superblock says whose file it is (model, shard, a random file id)
 * and every slot's checksums are seeded with the file id. A version 1 file
 * (no owner) is refused, never upgraded: whose columns it holds is unknown.
 */
#define VERSION 2
/*
 * The superblock's flags (zero in a plain file). KD_SB_SEALED: every slot
 * is sealed (kvdisk.h, "Sealed files") and holds a KD_TRAILER_LEN trailer
 * after its bytes: u32 master key id, the nonce, the tag.
 */
#define KD_SB_SEALED 1u
#define KD_TRAILER_LEN (4u + SEAL_NONCE_LEN + SEAL_TAG_LEN)
#define KD_PROBE_LEN (1u << 20) /* the bytes read to tell blank from not blank */
/* How many times, a millisecond apart, a held lock is asked for again at
 * open: a process that just ended may hold it until the kernel has torn
 * its ring down (kvdisk_open.c). */
#define KD_LOCK_WAIT_MS 1000u
/*
 * How long a deleted column's cleared header waits, at most, for a put to
 * take its slot (kvdisk.c). The driver deletes to make room, then puts
 * (the tier thread's next burst brings the puts), but most of the demo's
 * deletes are of columns that came up, let go after their batch, in runs
 * of hundreds, and the puts that take their slots come later: waiting
 * 10 ms absorbed 44-48% of the demo's deletes, 50 ms 64-67%. Checked when
 * the caller polls. And how many deletes wait at most (all caches): with
 * 32, half the queue depth, the demo's first 1,500 requests wrote 55% of
 * their deletes for want of room; a shard's tier holds 511 requests in
 * all (a waiting delete holds its own): half of them at most waiting.
 */
#define KD_DEFER_NS (50u * 1000 * 1000)
#define KD_DEFER_MAX 256u

/* The superblock, at offset 0: whose file it is and what it was made for. */
struct sb_cache {
	uint32_t bytes_per_token, column_tokens;
	uint64_t slots, slot_bytes, offset;
};

struct sb {
	uint64_t magic;
	uint32_t version; /* at offset 8 in every version: an old file is told by it */
	uint16_t num_caches, flags; /* KD_SB_SEALED; no other bit is set */
	uint32_t model, shard;	    /* the owner (kvdisk_params) */
	uint8_t file_id[16];	    /* random, made at format (getrandom) */
	struct sb_cache cache[KVDISK_MAX_CACHES];
	uint64_t hash; /* XXH3 of everything before it */
};
_Static_assert(sizeof(struct sb) <= KVDISK_ALIGN, "the superblock fits its 4 KiB");

/* A slot's header on disk: 64 bytes. */
struct hdr {
	uint32_t magic;
	uint16_t version;
	uint16_t cache;
	uint64_t key, parent, org, first_use_ns;
	uint32_t start, tokens;
	uint64_t data_hash; /* XXH3 of the bytes, seeded with the file's seed (a
			     * sealed file's: 0, its trailer's tag stands for it) */
	uint64_t hdr_hash;  /* XXH3 of the 56 bytes before it, seeded with the file's
			     * seed and the slot's place (see hdr_hash()); a sealed
			     * file's: a MAC of them and the place (kd_hdr_sum()) */
};
_Static_assert(sizeof(struct hdr) == KVDISK_HDR_LEN, "the header is 64 bytes");

/*
 * S_CLEAR: deleted (or dropped), not served, its cleared header not yet
 * written; the slot is free once it is, or taken by a put whose whole-slot
 * write is that clear (a deferred delete's, kvdisk.c).
 */
enum slot_state { S_FREE, S_LIVE, S_PUT, S_CLEAR };

struct slot {
	struct kvdisk_meta m;
	uint32_t hnext;
	uint16_t readers; /* gets in flight */
	uint8_t state;
	uint8_t del_pending; /* deleted while read: cleared when the reads end */
	uint32_t del_op;     /* ... by this op (a caller's DEL), or NIL */
	/* S_PUT: sealed under an organization key retired since
	 * (kvdisk_retire_orgs()): its write ends as a failed put. */
	uint8_t stale;
};

/* A deferred delete (kvdisk.c): a caller's DEL whose cleared header is not written yet. */
struct pend_del {
	uint32_t slot;
	uint64_t cookie;
	uint64_t since_ns; /* when deferred (CLOCK_MONOTONIC); 0: to be written now */
	struct kvdisk_meta gone; /* the column it deletes (a put that takes the slot
				  * changes the slot's) */
};

struct region {
	struct sb_cache g;
	struct slot *s;
	uint32_t *bucket, nbucket;
	uint32_t *free, nfree;
	uint32_t clearing; /* slots being cleared: free once their cleared header is written
			    * (a deferred delete's slot counts too: a put may take it) */
	/* Deferred deletes, oldest first: a ring of KD_DEFER_MAX + qd (a put
	 * whose write failed gives its delete back, at the head). */
	struct pend_del *pend;
	uint32_t pend_head, npend;
};

struct op {
	enum kvdisk_op_type type;
	uint16_t cache;
	uint32_t slot;
	uint32_t old; /* PUT: the slot of the column it replaces, or NIL */
	uint64_t cookie;
	/* PUT: the deferred delete whose slot it took (this write is that
	 * delete's clear) when absorbs; a caller's DEL: del.gone, the column
	 * it deletes. */
	struct pend_del del;
	bool absorbs;
	bool clear_only; /* a clear with no caller waiting (a replaced or corrupt column) */
	bool write;	 /* held by a write (kd_wop_get): counted in kvdisk.writing */
	uint8_t *buf;	 /* slot_bytes, aligned */
	/* GET: where its column's bytes go (kvdisk_get_into()), NULL: they
	 * stay in buf. The room there was checked at submit against the
	 * column's length, which cannot change while the read is out: a slot
	 * with readers is neither free nor pending (clear_slot() defers its
	 * clear until they end), so no put takes it. */
	uint8_t *dst;
	uint32_t next_free;
};

struct clear_req {
	uint16_t cache;
	uint32_t slot;
};

struct kvdisk {
	int fd;
	bool direct;
	uint8_t file_id[16]; /* the superblock's */
	uint64_t seed;	     /* XXH3 of file_id: every slot checksum's seed */
	bool fixed; /* the op buffers are registered with the ring */
	/* A regular file this open made (formatted and written once, zeros):
	 * every slot is free, known without reading a header back. */
	bool made;
	struct io_uring ring;
	uint32_t qd;
	struct region r[KVDISK_MAX_CACHES];
	uint16_t nc;
	struct op *ops;
	uint32_t op_free, inflight, unsubmitted;
	uint64_t ops_back; /* ops given back to the free list so far (kvdisk_ops_back()) */
	/* Ops held by writes (puts, cleared headers): at most kd_write_ops(),
	 * so that a read always finds one however slow the writes are. */
	uint32_t writing;
	uint8_t *bufs;
	uint64_t max_slot;
	uint32_t *held, nheld; /* GET ops whose bytes the caller holds until the next poll */
	struct clear_req *clears; /* slots waiting for a free op to be cleared */
	uint32_t nclears, clears_cap;
	/*
	 * Deferred deletes (kvdisk.c): how many in all caches' rings
	 * (KD_DEFER_MAX at most, but for those given back by a failed put);
	 * and the deletes a put's write finished, given by kvdisk_poll() (at
	 * most one a put in flight: qd).
	 */
	uint32_t npend;
	struct kvdisk_done *ready;
	uint32_t nready;
	bool clear_at_once; /* kvdisk_params.clear_at_once: no delete is deferred */
	uint8_t *zero; /* a cleared header block */
	/* A sealed file's keys (kvdisk_params.ring, copied), else NULL. */
	struct seal_ring *keys;
	/* Their header keys (kd_hdr_sum()): [0] the current key's, [1] the old one's. */
	uint8_t hdr_key[2][SEAL_KEY_LEN];
	uint32_t unopened; /* at open: kvdisk headers that did not hold (rebuild()) */
	uint32_t model, shard; /* the owner, bound into each sealed column */
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

/*
 * Ops writes may hold at once: all but a quarter of the queue (one op at
 * least from a queue of two), kept for reads. Writes into a file's
 * unallocated blocks go through the kernel's io_uring workers and were
 * seen here to finish nothing for 20 s beside two CPU hogs while reads
 * went on; a read queued behind them would wait as long. A queue of one
 * op has none to keep.
 */
static inline uint32_t
kd_write_ops(const struct kvdisk *d)
{
	uint32_t keep = d->qd / 4 > 0 ? d->qd / 4 : d->qd > 1;

	return d->qd - keep;
}

/* Each cache's ring of deferred deletes: KD_DEFER_MAX, and those a failed put gives back. */
static inline uint32_t
kd_pend_cap(const struct kvdisk *d)
{
	return KD_DEFER_MAX + d->qd;
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

/*
 * A slot's checksums. The file's seed makes a slot copied from another file
 * (another shard's, or this shard's before a format) fail, and the slot's
 * cache and index make one written at the wrong place (a misdirected write,
 * a slot copied within the file) fail too. XXH3 is a checksum, not a MAC:
 * whoever can read the file can read its file id and forge a slot; the
 * file's permissions keep them out (kvdisk_file.c, docs/SECURITY.md).
 */
static inline uint64_t
hdr_hash(const struct kvdisk *d, const struct hdr *h, uint16_t cache, uint32_t slot)
{
	uint64_t place = ((uint64_t)cache << 32 | slot) * 0x9E3779B97F4A7C15ULL;

	return XXH3_64bits_withSeed(h, offsetof(struct hdr, hdr_hash), d->seed ^ place);
}

/* The bytes a slot holds after its column's: a sealed file's trailer. */
static inline uint32_t
kd_trailer(const struct kvdisk *d)
{
	return d->keys != NULL ? KD_TRAILER_LEN : 0;
}

static inline uint64_t
data_hash(const struct kvdisk *d, const void *data, size_t len)
{
	return XXH3_64bits_withSeed(data, len, d->seed);
}

/*
 * A sealed file's columns (kvdisk_seal.c). kd_seal(): @p len bytes of
 * @p in sealed into @p out, the trailer after them, for slot @p slot of
 * cache @p c whose header is @p h (its identity filled in); 0, or -1 when
 * libcrypto failed. kd_open(): the @p len bytes at @p buf, the trailer
 * after them, opened into @p out (which may be @p buf; on a result other
 * than KD_OPEN_OK it holds nothing to use).
 */
enum kd_open_result { KD_OPEN_OK = 0, KD_OPEN_TAG, KD_OPEN_KEY, KD_OPEN_LOCAL };
int kd_seal(struct kvdisk *d, uint16_t c, uint32_t slot, const struct hdr *h, const uint8_t *in,
	    uint8_t *out, uint32_t len);
int kd_open(struct kvdisk *d, uint16_t c, uint32_t slot, const struct hdr *h, const uint8_t *buf,
	    uint8_t *out, uint32_t len);
/*
 * A slot header's own checksum, its hdr_hash: in a plain file hdr_hash()
 * (XXH3); in a sealed one a MAC, the first 8 bytes of HMAC-SHA256 under a
 * key of the file's (seal_derive(info "disk header" || file id)) of the
 * same bytes and place, so that a header forged by a writer of the file
 * who holds no key is dropped at open, before it is in the index (the
 * inventory a restarted shard gives its driver). kd_hdr_ok(): does @p h's
 * hold, under the current key or the old one?
 */
uint64_t kd_hdr_sum(const struct kvdisk *d, const struct hdr *h, uint16_t c, uint32_t slot);
bool kd_hdr_ok(const struct kvdisk *d, const struct hdr *h, uint16_t c, uint32_t slot);
/* The header keys of a sealed file's ring (at open, once its file id is known). 0 or -1. */
int kd_hdr_keys(struct kvdisk *d);

/* The op pool and the ring (kvdisk.c). */
struct op *kd_op_get(struct kvdisk *d);
struct op *kd_wop_get(struct kvdisk *d);
void kd_op_put(struct kvdisk *d, struct op *o);
void kd_submit(struct kvdisk *d, struct op *o, bool write, uint32_t len, uint64_t off);
/* What is queued submitted, one completion waited for (*@p cqe, to be
 * marked seen), its op given: at open, when nothing else is out. NULL: the
 * ring failed. */
struct op *kd_submit_wait(struct kvdisk *d, struct io_uring_cqe **cqe);

/*
 * The path (kvdisk_file.c): opened read-write, O_CLOEXEC, O_NONBLOCK (a
 * FIFO does not block), O_DIRECT where the file system takes it, never
 * through a symbolic link (but to a block device), created 0600 (O_EXCL)
 * when missing. A regular file and its directory must be this user's
 * (the directory may be root's) and writable by no one else; the file is
 * made 0600. A block device's permissions are its administrator's.
 * @return 0, or -1 with one line in @p err (not naming the path: the
 * caller does).
 */
struct kd_file {
	int fd;
	bool direct;  /* O_DIRECT taken */
	bool created; /* made now: blank */
	bool blk;     /* a block device */
	uint64_t size;
};
int kd_file_open(const char *path, struct kd_file *f, char *err, size_t errlen);

/*
 * What the first @p n bytes of a file that is not a kvdisk file are: NULL
 * when all zero (blank), else what was recognised ("an ext2/3/4 file
 * system (magic 0xEF53 at byte 1080)"), or "not blank" with the first
 * nonzero byte's offset, in @p what.
 */
const char *kd_file_content(const uint8_t *head, size_t n, char *what, size_t cap);

#endif
