/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The shared level's objects (docs/PROTOCOL.md section 10): what a replica
 * writes to Ceph RADOS and what every other replica reads back and checks
 * before anything is served. Pure C, no librados: the format is encoded,
 * named and checked here, and fuzzed alone (test/fuzz/fuzz_shared_obj.c).
 *
 * Every object is a 128-byte header then its payload:
 *  - a slice (kind 1): one shard's bytes of one cache of one whole column,
 *    written by that shard, named "<object_id>.s<shard>.c<cache>";
 *  - a record (kind 2): the column itself, written by the driver once every
 *    shard's slice is written; no payload; named "<object_id>.r". A column
 *    is in the shared level when its record is: slices without one are
 *    never read, and are swept.
 * Objects live in the organization's RADOS namespace "o<isolation id, 16
 * hex digits>"; the generations (the emergency reset) in the object
 * "generation" of the default namespace (every organization) and of the
 * organization's.
 *
 * The object id names a column for one generation and one layout: a hash of
 * (isolation id, key, both generations, layout), so a reset or another
 * geometry never finds the old or foreign objects by name; the header says
 * them all again and is checked field by field against what was asked.
 */
#ifndef KVSS_SHARED_OBJ_H
#define KVSS_SHARED_OBJ_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#define SHARED_OBJ_MAGIC 0x4F53564Bu /* "KVSO" */
#define SHARED_OBJ_VERSION 1
/* A sealed slice (shared_seal.h): its payload encrypted, its tag last. */
#define SHARED_OBJ_VERSION_SEALED 2
#define SHARED_SEAL_NONCE_LEN 12
/* The header's bytes a sealed slice's tag covers (the additional data):
 * everything from the magic to the bytes per token, then the key's id. */
#define SHARED_AAD_LEN 92
#define SHARED_HDR_LEN 128
/* The largest payload read or written (RADOS takes 128 MiB objects by default). */
#define SHARED_PAYLOAD_MAX (64u << 20)
/* A name: "<16 hex>.s<5 digits>.c<5 digits>" and its NUL; a namespace "o<16 hex>". */
#define SHARED_NAME_MAX 40
#define SHARED_NS_MAX 20
#define SHARED_GEN_OBJECT "generation"

enum shared_kind { SHARED_SLICE = 1, SHARED_RECORD = 2 };

struct shared_hdr {
	uint16_t kind;
	uint64_t org;	      /* isolation id */
	uint64_t key;	      /* the column's chained hash */
	uint64_t parent;      /* the key before it (the isolation id for a prompt's first) */
	uint64_t object_id;   /* shared_object_id() */
	uint64_t first_use_ns;/* wall clock of the column's first use */
	uint64_t written_ns;  /* wall clock when written */
	uint32_t gen_global;  /* the generations it was written under */
	uint32_t gen_org;
	uint32_t layout;      /* the model's geometry (shared_layout()) */
	uint16_t model;
	uint16_t shard;	      /* slice: the shard; record: how many shards */
	uint16_t cache;	      /* slice: the cache; record: how many caches */
	uint32_t start;	      /* the column's first token */
	uint32_t tokens;      /* its tokens (a whole column) */
	uint32_t bytes_per_token; /* slice: this shard's bytes of a token of the cache; record: 0 */
	uint32_t payload_len;
	uint64_t payload_xxh3;/* seeded with object_id */
	/* A sealed slice's (version SHARED_OBJ_VERSION_SEALED): the master
	 * key's id and the nonce; 0 and zeros in a plain object. */
	uint16_t version;
	uint32_t key_id;
	uint8_t nonce[SHARED_SEAL_NONCE_LEN];
};

/** Why an object was refused (counted per reason by whoever read it). */
#define SHARED_BAD_REASONS(X)                                                                     \
	X(SHORT, "shorter than its header or its payload")                                          \
	X(MAGIC, "not a kvss object (magic or version)")                                            \
	X(HEADER_SUM, "the header's checksum does not match")                                       \
	X(PAYLOAD_SUM, "the payload's checksum does not match")                                     \
	X(IDENTITY, "another column, organization, generation or layout than asked")                \
	X(GEOMETRY, "another shard, cache, token range or token size than asked")                   \
	X(FORMAT, "a field out of its range (kind, lengths, reserved bytes)")                       \
	X(TOO_BIG, "longer than the object asked for can be (a record: its 128-byte header)")      \
	X(FUTURE, "first used or written in the future, past the clock skew allowed")               \
	X(UNSEALED, "a plain slice where the level is sealed (a key file is configured)")          \
	X(SEALED, "a sealed slice, and this replica has no key file")                               \
	X(KEY, "sealed under a master key this replica does not hold")                              \
	X(TAG, "its seal's tag does not match: forged, tampered, moved or another key")            \
	X(LOCAL, "not opened: libcrypto failed on this replica (nothing known of the slice)")     \
	X(STALE, "first used earlier than its record says, past the clock skew allowed")

enum shared_bad {
	SHARED_OK = 0,
#define SHARED_BAD_ENUM(n, s) SHARED_BAD_##n,
	SHARED_BAD_REASONS(SHARED_BAD_ENUM)
#undef SHARED_BAD_ENUM
	SHARED_BAD_COUNT
};

/** A reason's short name ("payload_sum"), for counters and messages. */
const char *shared_bad_name(enum shared_bad why);
/** A reason in words. */
const char *shared_bad_text(enum shared_bad why);

/**
 * The model's layout id (PROTOCOL.md section 10): a hash of what makes a
 * slice usable (model index, shard count, column tokens, each cache's bytes
 * per token on each shard) and of the model's name (what its bytes are of:
 * two models of one geometry differ only there).
 * @p bpt: @p nvalues values, shard by shard, each shard's bytes per token of
 * each cache; at most the first 64 are hashed. @p name: at most 255 bytes.
 */
uint32_t shared_layout(uint16_t model, const char *name, uint16_t num_shards,
		       uint32_t column_tokens, uint16_t nvalues, const uint32_t *bpt);

/** The object id of a column (never 0). */
uint64_t shared_object_id(uint64_t org, uint64_t key, uint32_t gen_global, uint32_t gen_org,
			  uint32_t layout);

/** Names (return the length written, buffers of SHARED_NAME_MAX / SHARED_NS_MAX). */
int shared_ns(char *ns, uint64_t org);
int shared_slice_name(char *name, uint64_t object_id, uint16_t shard, uint16_t cache);
int shared_record_name(char *name, uint64_t object_id);
/** Parse a name back ("...r": shard and cache 0xffff); -1 if not one of ours. */
int shared_parse_name(const char *name, uint64_t *object_id, uint16_t *shard, uint16_t *cache);
/** An organization's namespace back to its isolation id; -1 if not one of ours. */
int shared_parse_ns(const char *ns, uint64_t *org);

/**
 * Write the header of @p h (payload_xxh3 computed here from @p payload's
 * payload_len bytes) into @p out (SHARED_HDR_LEN bytes). A sealed slice's
 * (h->version SHARED_OBJ_VERSION_SEALED) carries its key id and nonce.
 */
void shared_hdr_encode(uint8_t *out, struct shared_hdr *h, const void *payload);

/**
 * Decode and check an object read whole (@p len bytes at @p buf): magic,
 * version, the header's checksum, its fields' ranges, the payload's length
 * and checksum. Returns SHARED_OK and fills @p h, or the reason.
 */
enum shared_bad shared_obj_decode(const uint8_t *buf, size_t len, struct shared_hdr *h);

/** The additional data a sealed slice's tag covers (SHARED_AAD_LEN bytes): as encoded. */
void shared_hdr_aad(const struct shared_hdr *h, uint8_t aad[SHARED_AAD_LEN]);

/**
 * A decoded header against what was asked: kind, org, key, parent, object
 * id, generations, layout, model, shard, cache, start, tokens and bytes per
 * token must all be @p want's. First use and the time written are not
 * identities: the record's first use is the column's (expiry), and a driver
 * holds it only to its clock's tick; but @p got may not have been first
 * used earlier than @p want says by more than SHARED_SKEW_NS (a slice put
 * back under a record made younger would outlive its TTL). Returns
 * SHARED_OK or IDENTITY / GEOMETRY / STALE.
 */
enum shared_bad shared_hdr_match(const struct shared_hdr *got, const struct shared_hdr *want);

/**
 * Clocks of replicas differ: a record's first use or time written up to
 * this far ahead of the reader's wall clock is taken as now; further ahead
 * it is a bad record (SHARED_BAD_FUTURE), since a first use in the future
 * would never expire (a writer whose clock runs ahead would extend every
 * TTL by that much).
 */
#define SHARED_SKEW_NS (60ull * 1000000000ull)

/**
 * A decoded object's times against the reader's wall clock @p now_ns:
 * SHARED_BAD_FUTURE when its first use or its time written lies more than
 * SHARED_SKEW_NS ahead, else SHARED_OK.
 */
enum shared_bad shared_hdr_times(const struct shared_hdr *h, uint64_t now_ns);

/**
 * A record read whole (@p len bytes at @p buf) under the name of column
 * @p object_id of organization @p org, decoded into @p h and checked as every
 * reader of records checks one: the format, then that it is a record of that
 * organization and id (SHARED_BAD_IDENTITY), then its times against
 * @p now_ns (shared_hdr_times). What a driver's lookup checks beyond this
 * (key, parent, generations, layout) is the lookup's.
 */
enum shared_bad shared_record_check(const uint8_t *buf, uint32_t len, uint64_t org,
				    uint64_t object_id, uint64_t now_ns, struct shared_hdr *h);

/**
 * The largest generation used: 4294967295 is never one (a reset past it
 * would wrap to 0, where the oldest objects are; an object that says it is
 * read as broken, and no reset writes it).
 */
#define SHARED_GEN_MAX (UINT32_MAX - 1)

/**
 * A generation object's text (SHARED_GEN_OBJECT): "N" or "N\n", N a decimal
 * at most SHARED_GEN_MAX without leading zeros (but "0"). Read by every
 * driver and kvss-shared, each with this one parser.
 * @return 0; -ERANGE for 4294967295; -EBADMSG for anything else.
 */
int shared_gen_parse(const char *b, size_t n, uint32_t *gen);

/** What a generation read means to a reader that keeps the highest it saw. */
enum shared_gen_verdict {
	SHARED_GEN_SAME,   /**< the one followed */
	SHARED_GEN_UP,	   /**< higher: followed from now on (a reset) */
	SHARED_GEN_LOWER,  /**< below the highest seen: refused, the highest kept */
	SHARED_GEN_ABSENT, /**< no object where a higher one was seen: refused, the highest kept */
	SHARED_GEN_BROKEN, /**< not a generation (garbage, 4294967295): refused, the highest kept */
	SHARED_GEN_UNREAD, /**< the read failed (the cluster): nothing learned */
};

/**
 * Judge a generation read against @p highest, the highest this reader saw
 * (or has evidence of; 0 when none). @p rc is the read's status: 0 (with
 * @p got), -ENOENT (the object absent: generation 0 where nothing higher
 * was seen), -EBADMSG or -ERANGE (shared_gen_parse()), or another -errno.
 * A generation never goes down: what is lower, absent or broken is refused.
 */
enum shared_gen_verdict shared_gen_judge(uint32_t highest, int rc, uint32_t got);

/** The wall clock, ns since 1970: first use and the time written in headers. */
static inline uint64_t
shared_wall_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

#endif /* KVSS_SHARED_OBJ_H */
