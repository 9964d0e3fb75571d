/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The shards this process hosts (kvss.h's struct kvss_shard_inst) and
 * their protocol states (shard.h): the shard role's own state, here in its
 * folder, not in the application's common file. The shard fuzzer hosts its
 * one shard over a state of its own and does not link this file.
 */
#include "shard.h"

static struct shard_state shard_states[KVSS_MAX_LOCAL_SHARDS];

#define INST(i) [i] = {.cfg = &kvss.cfg.local[i], .st = &shard_states[i]}
struct kvss_shard_inst kvss_shards[KVSS_MAX_LOCAL_SHARDS] = {INST(0), INST(1), INST(2), INST(3)};
#undef INST
_Static_assert(KVSS_MAX_LOCAL_SHARDS == 4, "kvss_shards[]'s initializer names each");
