/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * What the shards send the driver (driver_priv.h): STATUS (a shard up, its epoch,
 * what it holds), ACK (into its control stream), ERROR and TOKEN_LOST (into
 * the library, and a resync), REFILL_DONE and REFILL_DATA (to the wafer
 * emulator, which checks every byte).
 */
#include <inttypes.h>
#include <stdio.h>

#include <rte_lcore.h>
#include <rte_mbuf.h>

#include "driver_priv.h"
#include "emulator/emulator.h"
#include "kvss.h"

static struct kvss_lcore_stats *
lst(void)
{
	return &kvss.stats[rte_lcore_id()];
}

static struct drv_shard *
shard_of(struct drv *d, uint32_t model, uint16_t id)
{
	uint16_t i;

	if (model >= PREFIXCACHE_MAX_MODELS || model >= kvss.cfg.driver.pc.num_models)
		return NULL;
	for (i = 0; i < d->nshards[model]; i++)
		if (d->sh[d->first_shard[model] + i].ref->id == id)
			return &d->sh[d->first_shard[model] + i];
	return NULL;
}

/* ---- Receiving --------------------------------------------------------------------- */

/*
 * A silent shard (driver.c, watch_silence) is heard again in its epoch: it
 * lost nothing (a restart would have brought a new epoch, which on_status
 * takes as one), so its model caches again with every prefix it had.
 */
static void
heard_again(struct drv *d, struct drv_shard *sh)
{
	sh->silent = false;
	d->st.shards_heard_again++;
	printf("kvss: driver: model %u shard %u heard again (epoch 0x%08x, as before): its model "
	       "caches again, its prefixes kept\n", sh->model, sh->ref->id, sh->epoch);
	fflush(stdout);
}

/*
 * The first STATUS of a shard's stream: where it is (routers away), that it
 * stores what the configuration says (its caches, their bytes per token);
 * then it is up. false: refused (d->fatal set, said).
 */
static bool
shard_comes_up(struct drv *d, struct drv_shard *sh, const struct proto_msg *msg, uint64_t tsc)
{
	uint16_t m = sh->model, c, n = msg->hdr.count;
	const struct prefixcache_model *pm = &kvss.cfg.driver.pc.model[m];

	sh->hops = proto_hops(&msg->addr);
	if (sh->hops != 0 && !sh->routed_said) {
		bool refuse = kvss.cfg.driver.routed == KVSS_ROUTED_REFUSE;

		sh->routed_said = true;
		d->st.routed_shards++;
		printf("kvss: driver: shard %u of model %u is %u router(s) away (its STATUS came with "
		       "IPv4 TTL %u): KVSS traffic belongs on the rail; %s\n", sh->ref->id, m,
		       sh->hops, msg->addr.ttl,
		       refuse ? "refusing to serve (driver.routed = \"refuse\")"
			      : "serving anyway (driver.routed = \"warn\")");
		fflush(stdout);
		if (refuse) {
			d->fatal = 2;
			return false;
		}
	}
	if (n != pm->num_caches) {
		fprintf(stderr, "kvss: driver: shard %u of model %u has %u caches; %s says %u\n",
			sh->ref->id, m, n, kvss.cfg.path, pm->num_caches);
		d->fatal = 2;
		return false;
	}
	for (c = 0; c < n; c++) {
		struct proto_cache_info ci;

		proto_get_cache_info(msg, c, &ci);
		if (ci.cache_id >= n || ci.bytes_per_token != sh->ref->bytes_per_token[ci.cache_id]) {
			fprintf(stderr,
				"kvss: driver: shard %u of model %u stores %u bytes per token in cache %u; "
				"%s: driver.models.[%u] says %u\n",
				sh->ref->id, m, ci.bytes_per_token, ci.cache_id, kvss.cfg.path, m,
				ci.cache_id < n ? sh->ref->bytes_per_token[ci.cache_id] : 0);
			d->fatal = 2;
			return false;
		}
		emu_shard_buffers(d->emu, sh->k, ci.cache_id, ci.num_buffers);
	}
	drv_l2_status(d, sh, msg);
	sh->up = true;
	sh->last_rx = tsc;
	sh->epoch = msg->hdr.epoch;
	sh->report_next = 1; /* its reports of this stream start at 1 */
	sh->status_reports = 0;
	proto_stream_reset(&sh->stream);
	printf("kvss: driver: shard %u of model %u is up (epoch 0x%08x)%s\n", sh->ref->id, m,
	       sh->epoch, sh->away ? ", back from away: its model caches again" : "");
	fflush(stdout);
	if (sh->away) {
		sh->away = false;
		d->st.shards_back++;
		const struct emu_stats *es = emu_stats(d->emu);

		d->back_at[0] = es->requests;
		d->back_at[1] = es->prompt_tokens;
		d->back_at[2] = es->hit_tokens;
	}
	return true;
}

static void
on_status(struct drv *d, struct drv_shard *sh, const struct proto_msg *msg, uint64_t tsc)
{
	const struct proto_status *st = &msg->u.status;
	uint16_t m = sh->model, c, n = msg->hdr.count;
	const struct prefixcache_model *pm = &kvss.cfg.driver.pc.model[m];

	d->st.statuses++;
	if (st->driver_epoch != d->model_epoch[m]) {
		if (sh->up)
			drv_model_restart(d, m, tsc, "no longer knows our epoch (it restarted)", sh,
				      &d->st.shard_restarts);
		return; /* not yet our HELLO's answer */
	}
	if (sh->up && msg->hdr.epoch != sh->epoch) {
		drv_model_restart(d, m, tsc, "has a new epoch", sh, &d->st.shard_restarts);
		return;
	}
	/* A STATUS older than one taken already (a fabric reordered or delayed
	 * it) says nothing new, and its counts are stale. */
	if (sh->up && st->uptime_ns < sh->status_uptime) {
		d->st.stale++;
		return;
	}
	sh->status_uptime = st->uptime_ns;
	if (sh->up && sh->silent)
		heard_again(d, sh);
	if (!sh->up && !shard_comes_up(d, sh, msg, tsc))
		return;
	sh->batches_complete = st->batches_complete;
	sh->status_reports = st->reports;
	sh->status_at = tsc;
	for (c = 0; c < n; c++) {
		struct proto_cache_info ci;

		proto_get_cache_info(msg, c, &ci);
		if (ci.cache_id < pm->num_caches) {
			prefixcache_status(d->pc, m, ci.cache_id, ci.capacity_tokens);
			sh->stored[ci.cache_id] = ci.stored_tokens;
			sh->l2_stored[ci.cache_id] = ci.l2_stored_tokens;
			sh->l2_capacity[ci.cache_id] = ci.l2_capacity_tokens;
			/* Never more than its capacity, on the shard or in the account. */
			if (ci.stored_tokens > ci.capacity_tokens ||
			    prefixcache_stored(d->pc, m, ci.cache_id) > ci.capacity_tokens)
				d->st.over_capacity++;
		}
	}
}

static void
on_refill_data(struct drv *d, struct drv_shard *sh, struct rte_mbuf *mb, const struct proto_msg *msg,
	       uint64_t tsc)
{
	const uint8_t *p = rte_pktmbuf_read(mb, msg->data_off, msg->data_len, d->scratch);

	if (p == NULL) {
		d->st.rx_drops++; /* its payload past the frame: it did not parse */
		return;
	}
	emu_refill_data(d->emu, sh->k, &msg->u.refill_data, p, msg->data_len, drv_now_ns(d, tsc));
}

static void
on_error(struct drv *d, struct drv_shard *sh, const struct proto_msg *msg, uint64_t tsc)
{
	uint16_t i, counted = 0;

	for (i = 0; i < msg->hdr.count; i++) {
		struct proto_error e;

		proto_get_error(msg, i, &e);
		if (e.code == PROTO_E_UNKNOWN_PROMPT && drv_l2_expected_unknown(d, sh, e.prompt_id)) {
			d->st.l2_unknown_expected++; /* its own L2_DOWN of that column failed too */
			continue;
		}
		d->st.errors++;
		counted++;
		d->st.errors_by_code[e.code < PROTO_E_MAX ? e.code : 0]++;
		if (d->st.errors <= 5)
			fprintf(stderr, "kvss: driver: shard %u: ERROR %s (seq %" PRIu64
					", prompt %" PRIx64 ", token %u, cache %u)\n",
				sh->ref->id, proto_err_name(e.code) ? proto_err_name(e.code) : "?",
				e.seq, e.prompt_id, e.token_idx, e.cache_id);
		prefixcache_error(d->pc, sh->model, sh->idx, e.cache_id, e.prompt_id, e.token_idx,
				  e.code);
	}
	if (counted > 0)
		drv_resync(d, sh, tsc, "refused a message");
}

static void
on_refill_done(struct drv *d, struct drv_shard *sh, const struct proto_msg *msg, uint64_t tsc)
{
	uint16_t i;

	for (i = 0; i < msg->hdr.count; i++) {
		struct proto_refill_done rd;

		proto_get_refill_done(msg, i, &rd);
		d->st.refill_done++;
		if (!emu_refill_done(d->emu, sh->k, rd.refill_id, rd.status, drv_now_ns(d, tsc)))
			continue;
		if (rd.status != 0 && drv_resync(d, sh, tsc, "does not hold what a refill named"))
			break;
	}
}

static void
on_token_lost(struct drv *d, struct drv_shard *sh, const struct proto_msg *msg, uint64_t tsc)
{
	uint16_t i;

	for (i = 0; i < msg->hdr.count; i++) {
		struct proto_lost l;

		proto_get_lost(msg, i, &l);
		d->st.lost_tokens += l.count;
		d->st.lost_records++;
		/* A range from its first token: the columns from the one that
		 * holds it, and their descendants, go (on_loss "exact"). */
		prefixcache_token_lost(d->pc, sh->model, sh->idx, l.cache_id, l.prompt_id, l.token_idx);
	}
	if (msg->hdr.count > 0)
		drv_resync(d, sh, tsc, "lost data (TOKEN_LOST)");
}

void
drv_receive(struct drv *d, struct rte_mbuf *mb, uint64_t tsc)
{
	struct proto_msg *msg = &d->msg;
	enum proto_reason why = proto_parse_mbuf(mb, &kvss.cfg.udp, msg);
	struct drv_shard *sh;

	lst()->rx_frames++;
	lst()->rx_bytes += rte_pktmbuf_pkt_len(mb);
	if (why != PROTO_OK) {
		lst()->drops[why]++;
		/* What is not kvss at all (ARP, IPv6 neighbour discovery, LLDP on a
		 * shared segment) is counted by its reason only: not an error. */
		d->st.rx_drops += why != PROTO_R_NOT_KVSS;
		return;
	}
	sh = shard_of(d, msg->hdr.model_id, msg->hdr.shard_id);
	if (sh == NULL) {
		d->st.stale++;
		return;
	}
	sh->last_rx = tsc;
	if (msg->hdr.type == PROTO_T_STATUS) {
		on_status(d, sh, msg, tsc);
		return;
	}
	if (!sh->up || (msg->hdr.type != PROTO_T_REFILL_DATA && msg->hdr.epoch != sh->epoch)) {
		d->st.stale++;
		return;
	}
	if (sh->silent)
		heard_again(d, sh);
	/*
	 * Version 2: ERROR, TOKEN_LOST and L2_DONE are reliable reports,
	 * numbered per stream: taken once and in order (a copy, or one ahead
	 * of a gap the shard will fill by resending, is dropped), each answered
	 * by a REPORT_ACK. Seq 0: an unsequenced report (the shard's window
	 * was full), taken as it comes.
	 */
	if ((msg->hdr.type == PROTO_T_ERROR || msg->hdr.type == PROTO_T_TOKEN_LOST ||
	     msg->hdr.type == PROTO_T_L2_DONE) && msg->hdr.seq != 0) {
		sh->report_ack_due = true;
		if (msg->hdr.seq != sh->report_next) {
			d->st.reports_dropped++;
			return;
		}
		sh->report_next++;
	}
	switch (msg->hdr.type) {
	case PROTO_T_ACK:
		d->st.acks++;
		drv_link_ack(sh, msg->u.ack.cum_seq, msg->u.ack.recv_seq, tsc);
		break;
	case PROTO_T_ERROR:
		on_error(d, sh, msg, tsc);
		break;
	case PROTO_T_REFILL_DONE:
		on_refill_done(d, sh, msg, tsc);
		break;
	case PROTO_T_TOKEN_LOST:
		on_token_lost(d, sh, msg, tsc);
		break;
	case PROTO_T_REFILL_DATA:
		on_refill_data(d, sh, mb, msg, tsc);
		break;
	case PROTO_T_L2_INVENTORY:
		drv_l2_inventory(d, sh, msg, tsc);
		break;
	case PROTO_T_L2_DONE:
		drv_l2_done(d, sh, msg);
		break;
	default:
		lst()->not_handled++;
		break;
	}
}
