/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * lib/kvdisk: a shard's second tier (L2) on its local disk. It
 * stores whole columns and executes what it is told: put a column, get
 * one, delete one; it decides nothing (the driver chooses what goes down,
 * what comes up and what is deleted, and knows what each shard's L2 holds).
 *
 * The file (or block device): a 4 KiB superblock saying whose it is (the
 * model and shard, a random 128-bit file id made when it was formatted)
 * and its geometry, then per cache a region of fixed slots, each one
 * column: a 64-byte header (the column's organization-scoped chained hash
 * as its key, its parent's, its organization, first use, first token,
 * tokens, and XXH3-64 of the bytes and of the header, both seeded with the
 * file id, the header's with the slot's place too) and the column's bytes,
 * the slot rounded up to 4 KiB. A put is one write of the whole slot; a
 * delete clears the slot's header on disk before it is done (a deleted or
 * expired column cannot come back after a restart): by the write of a put
 * that takes its slot, when one comes soon (one I/O instead of two;
 * in the demo half the deletes), else by a cleared header, which waits
 * at most 50 ms for such a put (kvdisk_del()). Every get checks both
 * checksums and the key, and a column that fails is dropped (its header
 * cleared) and reported, never returned. A slot copied from another file,
 * or to another place in this one, fails its checksums: dropped at open
 * (rebuild_dropped).
 *
 * XXH3 is a checksum, not a MAC: it catches torn writes, flipped bits,
 * misdirected writes and another shard's file, not a local user who can
 * read the file (the file id is in it) and write it. What keeps them out is
 * the file's and directory's permissions, which kvdisk_open() checks
 * (docs/SECURITY.md).
 *
 * Keys mean the same in any process and after any restart: they are the
 * chained hashes the driver computes from the organization's isolation id
 * and the tokens (never a process-random seed), so a file outlives the
 * process and could be shared by replicas later.
 *
 * Opening rebuilds the index from the headers. A file of another owner
 * (model, shard) or geometry (caches, bytes per token, column, capacity),
 * or of an older on-disk version, is refused with one line saying both;
 * a file or device that is not blank (its first MiB, or all of it when
 * smaller, not zero) and not a kvss second tier is never formatted over
 * (what is recognised, a file system, a partition table, swap, LUKS, is
 * named) unless the caller sets kvdisk_params.format. A new file is
 * allocated whole (fallocate), so that a disk too small fails at open,
 * not in the middle of a run.
 *
 * The path is opened with O_NOFOLLOW (a symbolic link is refused, but to a
 * block device), a file is created 0600 (O_EXCL); a regular file must be
 * this user's, have one link and not be writable by group or others (it is
 * made 0600 if it was readable by them), and its directory this user's (or
 * root's) and not writable by group or others. A block device's owner and
 * mode are its administrator's and not checked.
 *
 * I/O is O_DIRECT through io_uring (liburing), batched up to
 * the queue depth, on the thread that calls kvdisk_poll(); where the file
 * system refuses O_DIRECT (tmpfs) it falls back to the page cache, and says
 * so (kvdisk_direct()).
 *
 * Sealed files (kvdisk_params.ring, the shard's l2.key_file): every
 * column's bytes are written encrypted and authenticated, AES-256-GCM under
 * a key of that write's own, derived (seal_derive(), info "disk" || u64le
 * org || the file id || u32le model || u32le shard || u16le cache || u32le
 * slot || the nonce) from the master key with a random 96-bit nonce; the
 * additional data is the header's identity (its first 48 bytes: the
 * column's key, parent, organization, first use, first token and tokens,
 * its cache), the file id, the owner, the slot's place and the master
 * key's id. Each slot holds a 32-byte trailer after the bytes: the master
 * key's id, the nonce, the tag (which stands for the bytes' XXH3: a sealed
 * header's data_hash is 0). Its header's hdr_hash is a MAC (kd_hdr_sum(),
 * kvdisk_priv.h) under a key of the file's and owner's: a header forged
 * without a key, a slot moved within the file (its place is in the MAC),
 * or a file copied to another shard are dropped at open, so the inventory
 * holds none of them. A get opens the column before it is returned: bytes
 * put under another column's valid header, or a trailer tampered with,
 * fail the tag and are dropped as a failed checksum is (EBADMSG), counted
 * (bad_tag, bad_key); libcrypto failing here is a failed read (EIO), the
 * column kept. The file, a copy of it or a backup gives no KV byte without
 * the key. A file more of whose headers fail under the keys given than
 * hold (a key file swapped; a rotation rolled back; the new key given
 * without the old one while few columns were rewritten yet) is refused
 * (EKEYREJECTED), nothing cleared. What sealing does not stop: a holder of the file's
 * write access putting back an older slot of the same column and place
 * (the same bytes, or the column's before a delete: the driver decides
 * what is there, and deletes what it did not ask for).
 *
 * One thread uses a kvdisk (the shard's tier lcore or thread): no lock.
 */
#ifndef KVDISK_H
#define KVDISK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "seal.h"

#define KVDISK_MAX_CACHES 16
#define KVDISK_ALIGN 4096u
#define KVDISK_HDR_LEN 64u

struct kvdisk_cache_params {
	uint32_t bytes_per_token; /**< B_c */
	uint32_t column_tokens;	  /**< tokens of a whole column */
	uint64_t capacity_tokens; /**< columns = capacity / column_tokens */
};

struct kvdisk_params {
	uint16_t num_caches;
	struct kvdisk_cache_params cache[KVDISK_MAX_CACHES];
	uint32_t queue_depth; /**< operations in flight at most (0: 64); writes hold three quarters at most (all but one of 2 or 3), the rest are kept for reads */
	uint32_t model;	      /**< whose file: the model's ... */
	uint32_t shard;	      /**< ... shard (a file of another is refused) */
	/**
	 * Format whatever is at the path when it is not this owner's file of
	 * this geometry (another shard's, an older version's, a file system):
	 * its contents are lost. false: only what is blank is formatted.
	 */
	bool format;
	/**
	 * Every delete writes its cleared header at once, the old way
	 * (a benchmark's baseline); false: a delete may wait for a put to take
	 * its slot (kvdisk_del()).
	 */
	bool clear_at_once;
	/**
	 * Seal every column (AES-256-GCM, a key per organization, file and
	 * slot derived from the ring's current master key; those of its old
	 * key still open): see "Sealed files" above. NULL: plain columns. A
	 * sealed file opened without a ring, or a plain one with a ring, is
	 * another geometry (refused, or formatted with @p format). The keys
	 * are copied; the ring's organization keys are not taken from here
	 * (kvdisk_set_orgs()).
	 */
	const struct seal_ring *ring;
};

/** What a column's header says (also what a put is given). */
struct kvdisk_meta {
	uint64_t key;	 /**< organization-scoped chained hash of the column's last token */
	uint64_t parent; /**< the key of the column before it (0: the first) */
	uint64_t org;	 /**< the organization's isolation id */
	uint64_t first_use_ns; /**< wall clock (CLOCK_REALTIME) of its first use */
	uint32_t start;	 /**< its first token's index in the prompt */
	uint32_t tokens; /**< its tokens (a whole column) */
	uint16_t cache;
};

enum kvdisk_op_type { KVDISK_PUT, KVDISK_GET, KVDISK_DEL };

/** A finished operation, from kvdisk_poll(). */
struct kvdisk_done {
	enum kvdisk_op_type type;
	uint64_t cookie;     /**< the caller's */
	int status;	     /**< 0, or -errno: ENOENT (no such column), EBADMSG (checksum:
			      *   dropped), EIO, ENOSPC (a short write) */
	struct kvdisk_meta meta;
	const uint8_t *data; /**< GET: the column's bytes, valid until the next kvdisk_poll() */
	uint32_t len;
};

struct kvdisk_stats {
	uint64_t puts, gets, dels;
	uint64_t dels_absorbed; /**< deletes whose slot a put took: its write was the clear */
	uint64_t dels_written;	/**< deletes that wrote a cleared header */
	uint64_t bytes_written, bytes_read;
	uint64_t corrupt;      /**< columns whose checksum or key failed: dropped */
	uint64_t write_errors; /**< failed or short writes: the column is not stored */
	uint64_t read_errors;
	uint64_t rebuilt;      /**< columns found at open */
	uint64_t rebuild_dropped; /**< headers found at open that did not check */
	uint64_t stored[KVDISK_MAX_CACHES]; /**< columns held, per cache */
	/* A sealed file's: columns sealed (puts) and opened (gets); gets
	 * dropped for a tag that failed (forged, tampered, moved) or a key
	 * id not held (both in corrupt too); seals that failed here. */
	uint64_t sealed, opened, bad_tag, bad_key, seal_errors;
	/* Columns let go because their organization's key was retired
	 * (kvdisk_retire_orgs()), held or being written. */
	uint64_t retired;
};

struct kvdisk;

/**
 * Open (or create) @p path for @p p, rebuilding the index from what it
 * holds. @return the L2, or NULL with one line in @p err naming the file
 * and errno set: EEXIST when what is there is not this owner's second tier
 * and @p p->format would format it over, EACCES when the path is refused
 * (a link, an owner, a mode), EBUSY when another process has it open (a
 * held lock is asked for again for a second first: one that just ended
 * may hold it a moment), flock's errno (ENOLCK) when it cannot be locked,
 * EKEYREJECTED when it is sealed and more of its column headers fail
 * under the keys given than hold (another key's file: nothing is cleared,
 * even with @p p->format), else ENOSPC, EIO, ENOMEM, EINVAL.
 */
struct kvdisk *kvdisk_open(const char *path, const struct kvdisk_params *p, char *err,
			   size_t errlen);

/**
 * May a second tier's file be made in directory @p dir (the check
 * kvdisk_open() makes of a new file's directory: this user's or root's,
 * writable by no one else; and this user may make a file in it)? For a caller that makes files there later and
 * would rather refuse the directory at its start. 0, or -1 with why in
 * @p err.
 */
int kvdisk_dir_check(const char *dir, char *err, size_t errlen);
void kvdisk_close(struct kvdisk *d);

/**
 * Seal and open a sealed file's columns under organization keys
 * (lib/seal/orgkeys.h): each column's key derived from the master key
 * mixed with its organization's key in @p o (seal_key_with_org()), the
 * pair's id in its trailer. @p o is borrowed: the caller keeps it until it
 * gives another (or NULL: the master keys alone) or closes the file. A
 * column sealed under a key that @p o no longer holds (a reset retired its
 * organization's key) is refused by its key id when read (counted
 * bad_key): lost, never served. The headers' MACs stay the master key's,
 * so the file opens whatever the store. 0, or -EINVAL on a plain file.
 */
int kvdisk_set_orgs(struct kvdisk *d, struct seal_orgs *o);

/**
 * kvdisk_set_orgs(@p d, @p o), and at once let go of every column the new
 * store makes unreadable: each of an organization whose key @p o gives
 * otherwise than the store held before (a reset retired its key, or the
 * organization was named and its default key is no longer its own). A
 * column held leaves the index (never served again, its header cleared as
 * for a delete) and is given to @p gone, if not NULL; a column being
 * written finishes as a failed put (-ESTALE), also counted. A read in
 * flight ends as it would have (bad_key). Returns the columns held that
 * were let go, or -EINVAL on a plain file. Waiting for them to be asked
 * for would cost each a refill that loses its tokens.
 */
int kvdisk_retire_orgs(struct kvdisk *d, struct seal_orgs *o,
		       void (*gone)(void *arg, const struct kvdisk_meta *m), void *arg);

/**
 * Once a sealed file is open and has its organization keys
 * (kvdisk_set_orgs()), before anything else is asked of it: let go of
 * every column sealed under a key its ring no longer makes (the file was
 * written under a store a reset has replaced since), reading the key id
 * in each column's trailer (one or two 4 KiB reads a column held, as many
 * at once as the queue). They leave the index (a restarted shard's
 * inventory does not list them) and their headers are cleared by the next
 * poll; counted in retired. Returns how many, -EINVAL on a plain file,
 * -EBUSY with operations out, -EIO when the ring fails.
 */
int kvdisk_retire_unheld(struct kvdisk *d);

/** Does it use O_DIRECT (false: the file system refused it; the page cache is used)? */
bool kvdisk_direct(const struct kvdisk *d);

/** Columns a cache holds at most. */
uint64_t kvdisk_slots(const struct kvdisk *d, uint16_t cache);

/**
 * Store a column: @p len bytes (tokens x B_c, in the caller's layout) as
 * @p m says. It replaces a column of the same key. @return 0 when
 * submitted (its kvdisk_done says how it went), -ENOSPC when the cache's
 * slots are all used (the driver deletes first; a replacement needs a free
 * slot too: it is written before the column it replaces is cleared), -EAGAIN
 * when a column of the same key is still being written or the only room
 * is a deleted column's slot whose cleared header is still being written,
 * -EBUSY when the queue is full (for either: poll, then again), -EINVAL on
 * a bad cache or length. A slot whose delete is still deferred (its
 * cleared header not submitted) is taken before a free one: this put's
 * write of the whole slot clears it, and that delete finishes when it
 * lands (or, when it fails, once a cleared header is written after it).
 */
int kvdisk_put(struct kvdisk *d, const struct kvdisk_meta *m, const void *data, uint32_t len,
	       uint64_t cookie);

/**
 * Is a column of @p key of organization @p org in @p cache being written
 * (a kvdisk_put() submitted, its kvdisk_done not yet taken)? Until then it
 * is not found: kvdisk_get() and kvdisk_del() see the column it replaces,
 * or none. A caller that must read or delete what it just wrote waits for
 * that write only, not for every write in flight.
 */
bool kvdisk_writing(const struct kvdisk *d, uint16_t cache, uint64_t key, uint64_t org);

/**
 * Read the column @p key of organization @p org in @p cache. -ENOENT;
 * -EBUSY when no op is free. Writes hold three quarters of the queue at
 * most, all but one op of a queue of two or three (kvdisk_put() and
 * kvdisk_del() answer -EBUSY past that): a read finds an op while writes
 * are slow, unless the queue is one op.
 */
int kvdisk_get(struct kvdisk *d, uint16_t cache, uint64_t key, uint64_t org, uint64_t cookie);

/**
 * kvdisk_get() whose column lands in @p dst, at most @p cap bytes: a
 * sealed column is opened straight into it (no copy after the cipher), a
 * plain one checked in the read's buffer, then copied. Its kvdisk_done's
 * data is @p dst. -EMSGSIZE at once for a column longer than @p cap (the
 * column kept); -EINVAL also for a @p cap with no @p dst. On any failed
 * read @p dst holds nothing to use (a column that failed its tag or
 * checksum: zeros).
 */
int kvdisk_get_into(struct kvdisk *d, uint16_t cache, uint64_t key, uint64_t org, void *dst,
		    uint32_t cap, uint64_t cookie);

/**
 * Delete a column: not served, found or listed from now on; its header is
 * cleared on disk before its kvdisk_done comes, by a put that takes its
 * slot (kvdisk_put()) or by a cleared header. The latter waits, deferred
 * (no op held), until a kvdisk_poll() that would otherwise wait for
 * nothing, or for 50 ms, or until 256 deletes wait (the oldest is written
 * then), or after kvdisk_flush(); with kvdisk_params.clear_at_once, or
 * while the column is read, it is written at once (when its reads end).
 * Until its kvdisk_done, a crash may bring the column back; after it,
 * never. -ENOENT; -EBUSY when a header must be written now and no op is
 * free.
 */
int kvdisk_del(struct kvdisk *d, uint16_t cache, uint64_t key, uint64_t org, uint64_t cookie);

/** Is the column there (for the driver's inventory and tests)? */
bool kvdisk_has(const struct kvdisk *d, uint16_t cache, uint64_t key, uint64_t org);

/**
 * Submit what is queued and take up to @p max finished operations into
 * @p out, waiting for at least one when @p wait and any is in flight
 * (deferred deletes are written then when nothing else is). @return how
 * many.
 */
unsigned int kvdisk_poll(struct kvdisk *d, struct kvdisk_done *out, unsigned int max, bool wait);

/** kvdisk_poll_for()'s wait with no bound: kvdisk_poll(..., true). */
#define KVDISK_WAIT_FOREVER UINT32_MAX

/**
 * kvdisk_poll(), waiting at most @p wait_us microseconds for one to finish
 * (0: not at all; KVDISK_WAIT_FOREVER: until one does). A caller that must
 * go on noticing time while the disk says nothing (a disk that stopped
 * answering is told from one that is slow by the caller's clock) waits so.
 */
unsigned int kvdisk_poll_for(struct kvdisk *d, struct kvdisk_done *out, unsigned int max,
			     uint32_t wait_us);

/**
 * Ops given back so far, a count that only rises. A read's op is held
 * until the poll after its kvdisk_done (its bytes are the caller's until
 * then), and a poll may take ops too (deferred deletes written): a caller
 * waiting for an op (-EBUSY) tries again when this moved, not only when
 * an operation finished.
 */
uint64_t kvdisk_ops_back(const struct kvdisk *d);

/** Operations not yet given back: in flight, queued, deferred deletes, finished ones. */
unsigned int kvdisk_inflight(const struct kvdisk *d);

/**
 * Deletes deferred, waiting for a put to take their slot (counted in
 * kvdisk_inflight()). A caller with nothing else in flight that polls with
 * wait has them written; one that only idles may sleep instead and poll
 * without waiting: they are written within 50 ms all the same.
 */
unsigned int kvdisk_deferred(const struct kvdisk *d);

/**
 * The deferred deletes are due now: written by the next kvdisk_poll()
 * calls, as the queue allows. For a caller short of what they hold (the
 * shard's tier: a waiting delete holds one of its requests).
 */
void kvdisk_flush(struct kvdisk *d);

/** Every column held, in no order (the inventory a restarted shard gives). */
void kvdisk_foreach(const struct kvdisk *d, void (*fn)(void *arg, const struct kvdisk_meta *m),
		    void *arg);

void kvdisk_stats(const struct kvdisk *d, struct kvdisk_stats *st);

#endif
