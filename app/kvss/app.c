/* SPDX-License-Identifier: BSD-3-Clause */
/* The application's state, shared by its files (see kvss.h). */
#include <rte_lcore.h>

#include "kvss.h"

struct kvss_app kvss;

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
		for (r = 0; r < PROTO_E_MAX; r++)
			t->errors[r] += s->errors[r];
		t->busy_cycles += s->busy_cycles;
		t->idle_cycles += s->idle_cycles;
	}
}
