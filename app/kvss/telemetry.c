/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Telemetry: /kvss/stats, /kvss/caches, /kvss/lcores, answered from the
 * telemetry thread by reading the lcores' stats (approximate while running).
 */
#include <rte_lcore.h>
#include <rte_telemetry.h>

#include "kvss.h"

void
kvss_stats_total(struct kvss_lcore_stats *t)
{
	unsigned int l;
	int r;

	memset(t, 0, sizeof(*t));
	for (l = 0; l < RTE_MAX_LCORE; l++) {
		const struct kvss_lcore_stats *s = &kvss.stats[l];

#define KVSS_STAT_ADD(n) t->n += s->n;
		KVSS_STATS(KVSS_STAT_ADD)
#undef KVSS_STAT_ADD
		for (r = 0; r < PROTO_R_MAX; r++)
			t->drops[r] += s->drops[r];
		t->busy_cycles += s->busy_cycles;
		t->idle_cycles += s->idle_cycles;
	}
}

static int
tel_stats(const char *cmd, const char *params, struct rte_tel_data *d)
{
	struct kvss_lcore_stats t;
	int r;

	(void)cmd;
	(void)params;
	kvss_stats_total(&t);
	rte_tel_data_start_dict(d);
#define KVSS_STAT_TEL(n) rte_tel_data_add_dict_u64(d, #n, t.n);
	KVSS_STATS(KVSS_STAT_TEL)
#undef KVSS_STAT_TEL
	for (r = 1; r < PROTO_R_MAX; r++) {
		char key[48];

		snprintf(key, sizeof(key), "drop_%s", proto_reason_name((enum proto_reason)r));
		rte_tel_data_add_dict_u64(d, key, t.drops[r]);
	}
	rte_tel_data_add_dict_u64(d, "driver_epoch", kvss.driver_epoch);
	return 0;
}

static int
tel_caches(const char *cmd, const char *params, struct rte_tel_data *d)
{
	const struct kvstore_params *kp;
	uint16_t c;

	(void)cmd;
	(void)params;
	rte_tel_data_start_array(d, RTE_TEL_CONTAINER);
	if (kvss.store == NULL)
		return 0;
	kp = kvstore_params(kvss.store);
	for (c = 0; c < kp->num_caches; c++) {
		struct rte_tel_data *e = rte_tel_data_alloc();
		struct kvstore_cache_stats cs;

		if (e == NULL)
			return -ENOMEM;
		kvstore_cache_stats(kvss.store, c, &cs);
		rte_tel_data_start_dict(e);
		rte_tel_data_add_dict_u64(e, "cache_id", c);
		rte_tel_data_add_dict_u64(e, "bytes_per_token", cs.bytes_per_token);
		rte_tel_data_add_dict_u64(e, "buffers", cs.num_buffers);
		rte_tel_data_add_dict_u64(e, "capacity_tokens", cs.capacity_tokens);
		rte_tel_data_add_dict_u64(e, "stored_tokens", cs.stored_tokens);
		rte_tel_data_add_dict_u64(e, "prompts", cs.prompts);
		rte_tel_data_add_array_container(d, e, 0);
	}
	return 0;
}

static int
tel_lcores(const char *cmd, const char *params, struct rte_tel_data *d)
{
	static const char *const names[] = {"none", "ingest", "refill", "control"};
	unsigned int l;

	(void)cmd;
	(void)params;
	rte_tel_data_start_array(d, RTE_TEL_CONTAINER);
	RTE_LCORE_FOREACH(l) {
		struct rte_tel_data *e = rte_tel_data_alloc();

		if (e == NULL)
			return -ENOMEM;
		rte_tel_data_start_dict(e);
		rte_tel_data_add_dict_u64(e, "lcore", l);
		rte_tel_data_add_dict_string(e, "role", names[kvss.lcore_role[l]]);
		rte_tel_data_add_dict_u64(e, "busy_cycles", kvss.stats[l].busy_cycles);
		rte_tel_data_add_dict_u64(e, "idle_cycles", kvss.stats[l].idle_cycles);
		rte_tel_data_add_array_container(d, e, 0);
	}
	return 0;
}

int
kvss_telemetry_register(void)
{
	if (rte_telemetry_register_cmd("/kvss/stats", tel_stats,
				       "Frames, bytes, drops by reason, HELLO and STATUS counts") ||
	    rte_telemetry_register_cmd("/kvss/caches", tel_caches,
				       "Per cache: bytes per token, buffers, capacity, stored, prompts") ||
	    rte_telemetry_register_cmd("/kvss/lcores", tel_lcores,
				       "Per lcore: role, busy and idle cycles"))
		return -1;
	return 0;
}
