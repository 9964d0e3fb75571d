/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Epochs and restarts. Every model has its own driver epoch. When a shard
 * restarts (a new shard epoch, or a STATUS that no longer names our epoch),
 * or its state is no longer what this driver sent it, everything the model
 * cached is gone as far as the driver can prove: prefixcache drops the
 * model's prefixes, the model takes a new driver epoch and says HELLO to all
 * its shards again, so they all forget the old data and count seq and
 * batch_no from 1 together.
 *
 * Called by what takes in the shards' frames (rx.c) and by the loop's watch
 * (driver.c); it calls down into the link, the second tier's books (l2.c),
 * the sink and the emulator, never back up.
 */
#include <inttypes.h>
#include <stdio.h>

#include <rte_random.h>

#include "driver_priv.h"
#include "emulator/emulator.h"
#include "kvss.h"

static uint32_t
new_epoch(void)
{
	uint32_t e;

	do {
		e = (uint32_t)rte_rand();
	} while (e == 0);
	return e;
}

/*
 * A shard of @p model lost what it held: the model's prefixes go, the model
 * takes a new driver epoch and all its shards start over with it.
 */
void
drv_model_restart(struct drv *d, uint16_t model, uint64_t tsc, const char *why, const struct drv_shard *who,
		  uint64_t *count)
{
	uint16_t i;

	(*count)++;
	if (why != NULL) {
		printf("kvss: driver: model %u shard %u %s: its prefixes are dropped, new epoch\n",
		       model, who->ref->id, why);
		fflush(stdout);
	}
	prefixcache_shard_restart(d->pc, model);
	d->model_epoch[model] = new_epoch();
	d->l2_pending[model] = drv_l2_model(model); /* the inventories list what L2 kept */
	drv_sink_l2_clear(&d->sink, model);
	drv_l2_forget_tolerated(d, model);
	drv_sh_model_restart(d, model);
	for (i = 0; i < d->nshards[model]; i++) {
		struct drv_shard *sh = &d->sh[d->first_shard[model] + i];

		drv_l2_forget_inventory(sh);
		drv_link_reset(sh);
		sh->up = false;
		sh->epoch = 0;
		drv_link_hello(&d->link, sh, d->model_epoch[model], tsc);
	}
	/* Its data jobs are stale; refills of the old epoch will not come. */
	emu_model_restart(d->emu, model, drv_now_ns(d, tsc));
}

/*
 * Shard @p sh says its state is not what this driver sent it: data was lost
 * (TOKEN_LOST), a message was refused (ERROR) or a refill named tokens it
 * does not hold. With driver.on_loss = "exact" (the default since protocol
 * version 2) nothing more happens here: the library drops the columns that
 * hold the lost or refused tokens and their descendants, and DELETEs them
 * (a v2 DELETE removes from its start wherever the prompt now ends, and a
 * prompt cut by a loss refuses EVICTs until then: PROTOCOL.md section 4).
 * With "resync" the model starts over (drv_model_restart), as version 1
 * needed (docs/DESIGN.md, "Lost data"). Returns 1 if it did.
 */
int
drv_resync(struct drv *d, struct drv_shard *sh, uint64_t tsc, const char *why)
{
	if (kvss.cfg.driver.on_loss != KVSS_LOSS_RESYNC || d->open_loop)
		return 0;
	if (d->st.resyncs < 5 || (d->st.resyncs + 1) % 1000 == 0) {
		printf("kvss: driver: model %u shard %u %s: the model starts over with a new epoch "
		       "(resync %" PRIu64 ")\n", sh->model, sh->ref->id, why, d->st.resyncs + 1);
		fflush(stdout);
	}
	drv_model_restart(d, sh->model, tsc, NULL, sh, &d->st.resyncs);
	return 1;
}
