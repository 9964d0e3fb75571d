/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * STATUS (PROTOCOL.md section 5): what the shard holds in both of its tiers,
 * its completed batches and its uptime, sent to the driver's last control
 * source. It reads the store and the second tier (level_disk.c) and sends through
 * tx.c, so it sits above both: tx.c never calls back into the tier.
 */
#include <rte_cycles.h>

#include "mono.h"
#include "shard.h"

void
shard_send_status(struct kvss_shard_inst *me, struct kvss_lcore_stats *st)
{
	uint8_t buf[PROTO_HDR_LEN + PROTO_STATUS_LEN + KVSTORE_MAX_CACHES * PROTO_CACHE_INFO_LEN];
	const struct kvstore_params *kp = kvstore_params(me->store);
	const struct shard_level *disk = shard_level_of(me, SHARD_LEVEL_DISK);
	/* Exact (mono_ticks_to): a driver orders STATUS frames by it (version 2). */
	uint64_t up = rte_get_tsc_cycles() - kvss.start_tsc, hz = me->st->hz;
	struct proto_status s = {
		.batches_complete = kvstore_batches_complete(me->store),
		.reports = me->st->rep_next ? me->st->rep_next - 1 : 0, /* v2 */
		.uptime_ns = mono_ticks_to(up, hz, 1000000000ull),
		.flags = (me->st->evictq.head != me->st->evictq.tail &&
					  me->st->evictq.since[me->st->evictq.head % SHARD_QMAX]
				  ? PROTO_STATUS_F_STALLED
				  : 0) |
			 (disk != NULL ? PROTO_STATUS_F_L2 : 0) |
			 (shard_level_of(me, SHARD_LEVEL_SHARED) != NULL ? PROTO_STATUS_F_SHARED
									 : 0),
		.driver_epoch = me->driver_epoch};
	struct proto_builder b;
	uint16_t c;

	shard_begin_reply(me, &b, buf, sizeof(buf), PROTO_T_STATUS);
	proto_build_status(&b, &s);
	for (c = 0; c < kp->num_caches; c++) {
		struct kvstore_cache_stats cs;
		struct proto_cache_info ci;

		kvstore_cache_stats(me->store, c, &cs);
		ci = (struct proto_cache_info){c, cs.num_buffers, cs.bytes_per_token,
					       cs.capacity_tokens, cs.stored_tokens, cs.prompts, 0, 0};
		level_disk_tokens(disk, c, &ci.l2_capacity_tokens, &ci.l2_stored_tokens);
		proto_build_cache_info(&b, &ci);
	}
	shard_send_control(me, st, buf, proto_build_end(&b));
	st->status_sent++;
}
