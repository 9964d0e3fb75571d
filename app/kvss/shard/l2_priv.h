/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * What l2.c (the ingest lcore's side of both levels, and the second tier's
 * thread) and shared.c (the shared level's thread) share: the request that
 * carries a column between the ingest lcore and a level's thread. Requests
 * come from one mempool (l2.c); each has room for the largest column's
 * bytes, an object header before them (SHARED_HDR_LEN: a slice is written
 * and read whole, header and bytes in one buffer), and an L2_UP's or
 * SH_UP's token positions after them.
 */
#ifndef KVSS_SHARD_L2_PRIV_H
#define KVSS_SHARD_L2_PRIV_H

#include <stdint.h>

#include "kvdisk.h"

enum l2_op { L2R_PUT, L2R_GET, L2R_DEL, L2R_INV, L2R_SHPUT, L2R_SHGET };

struct l2_req {
	uint8_t op;
	uint16_t status;  /* the result: 0 or a protocol code */
	uint32_t epoch;	  /* the driver epoch it was made in */
	uint64_t seq;	  /* its message's control seq (ERROR records) */
	struct kvdisk_meta meta;
	uint32_t len;	  /* PUT, GET: the column's bytes in data */
	/* GET (L2_UP): the batch, and where the column's tokens go in its stream. */
	uint64_t batch_no;
	uint32_t stream_len;
	uint16_t npos;
	uint16_t *pos;	  /* npos <= L2_POS_MAX pairs (stream token, column token), after data */
	/* INV: the columns, malloc'd by the tier thread. */
	struct kvdisk_meta *inv;
	uint32_t ninv;
	/* SHPUT, SHGET (section 10): the object the driver named. */
	uint64_t object_id;
	uint32_t gen_global, gen_org, layout;
	uint32_t bytes_per_token;
	uint8_t bad;	  /* SHGET refused by its check: enum shared_bad */
	uint8_t *obj;	  /* SHARED_HDR_LEN bytes of header, then data */
	uint8_t *data;
	/* SHPUT whose name was taken: the object there, read back (malloc'd by
	 * the shared level's thread, freed by it), and what it is doing. */
	uint8_t *back;
	uint8_t phase;	  /* enum sh_phase (shared.c) */
	uint64_t t_ns;	  /* SHGET: when the shared level's thread took it (CLOCK_MONOTONIC) */
};

/* ---- shared.c: the shared level's thread ---- */

/** Connect (shared = { ... }) and start the thread; 0 when not configured. -1: @p err says why. */
int shard_sh_open(char *err, size_t errlen);
void shard_sh_stop(void);
void shard_sh_close(void);
/** To the thread (SHPUT, SHGET); the ring holds every request of the pool. 0 or -ENOBUFS. */
int shard_sh_submit(struct l2_req *q);
/** What the thread finished, up to @p n. */
unsigned int shard_sh_take(void **qs, unsigned int n);

#endif
