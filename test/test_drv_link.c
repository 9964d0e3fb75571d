/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The driver's link (link.c) on a real port: net_ring loops what it
 * sends back to its receive side, so every frame the link sends is read
 * back and parsed. Control messages go out in seq order as the window
 * allows, come again after the retransmission timeout, and an ACK stops
 * that; a batch's EVICT_DATA leaves only once its EVICT has, and the fault
 * injector withholds what it is told to.
 */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <string.h>

#include <rte_cycles.h>
#include <rte_ethdev.h>
#include <rte_malloc.h>
#include <rte_mbuf.h>

#include "driver/driver_priv.h"
#include "eal_fixture.h"
#include "emulator/emulator.h"
#include "kvss.h"

#define B 64

static struct drv_link L;
static struct drv_shard sh;
static struct kvss_shard_ref ref = {.id = 3, .port = 0, .bytes_per_token = {B}, .buffers = {1}};
static struct kvss_drv_stats st;
static struct prefixcache *pc;
static struct prefixcache_params pp;
static struct workload wl;
static struct emu *emu;

static bool
up(void *arg, uint16_t k)
{
	(void)arg;
	(void)k;
	return true;
}

static bool
model_up(void *arg, uint16_t m)
{
	(void)arg;
	(void)m;
	return true;
}

static const struct emu_hooks hooks = {.model_up = model_up, .shard_up = up};

static void
setup(void)
{
	struct emu_shard es = {0, 3, {B}};
	struct emu_params ep;

	cr_assert_eq(test_eal_start_ring(&kvss.pool), 0, "EAL and a net_ring port");
	kvss.cfg.mtu = 1500;
	kvss.cfg.udp = proto_ports_default;
	kvss.epoch = 0x77;
	memset(&L, 0, sizeof(L));
	L.st = &st;
	cr_assert_eq(drv_link_add_port(&L, 0), 0);
	cr_assert_eq(drv_link_add_port(&L, 0), 0, "a port is taken once");
	cr_assert_eq(L.nports, 1);
	memset(&sh, 0, sizeof(sh));
	sh.ref = &ref;
	sh.up = true;
	sh.ctrl.dst_port = PROTO_PORT_CTRL_DEFAULT;
	sh.ctrl.src_port = PROTO_PORT_CTRL_DEFAULT;
	sh.evict.dst_port = PROTO_PORT_EVICT_DEFAULT;
	sh.evict.src_port = PROTO_PORT_CTRL_DEFAULT;
	/* One RTT sample's worth: 1 ms of TSC, so that a test can pass it. */
	cr_assert_eq(proto_stream_init(&sh.stream, 4, rte_get_tsc_hz() / 1000), 0);
	pp.num_models = 1;
	pp.model[0].num_caches = 1;
	pp.model[0].cache[0] = (struct prefixcache_cache){0, PREFIXCACHE_FULL, 0, 0, 1000};
	pc = prefixcache_create(&pp, &(struct prefixcache_sink){0});
	cr_assert_not_null(pc);
	cr_assert_eq(workload_generate(1, &wl), 0);
	ep = (struct emu_params){.pc = pc, .pcp = &pp, .wl = &wl, .nreq = 0, .num_models = 1,
				 .max_inflight = 1, .step_tokens = 1, .nshards = 1, .shard = &es,
				 .hooks = &hooks};
	emu = emu_create(&ep);
	cr_assert_not_null(emu);
}

static void
teardown(void)
{
	drv_ctlq_clear(&sh.q);
	proto_stream_fini(&sh.stream);
	drv_link_free(&L);
	emu_free(emu);
	prefixcache_free(pc);
	workload_free(&wl);
	rte_eth_dev_stop(0);
	rte_eth_dev_close(0);
	rte_mempool_free(kvss.pool);
	test_eal_stop();
}

TestSuite(drv_link, .init = setup, .fini = teardown);

/* Frames the port sent, parsed; their types in @p types, seqs in @p seqs. */
static unsigned int
receive(uint8_t *types, uint64_t *seqs, uint64_t *data_bytes, unsigned int max)
{
	struct rte_mbuf *pkts[64];
	static struct proto_msg m;
	unsigned int got = 0;
	uint16_t n, i;

	while ((n = rte_eth_rx_burst(0, 0, pkts, 64)) > 0)
		for (i = 0; i < n; i++) {
			cr_assert_eq(proto_parse_mbuf(pkts[i], &proto_ports_default, &m), PROTO_OK);
			if (got < max) {
				types[got] = m.hdr.type;
				seqs[got] = m.hdr.seq;
			}
			got++;
			if (m.hdr.type == PROTO_T_EVICT_DATA && data_bytes != NULL)
				*data_bytes += m.data_len;
			rte_pktmbuf_free(pkts[i]);
		}
	return got;
}

/* Queue a DELETE (or, with @p batch, an EVICT of that batch) for the shard. */
static void
queue_msg(uint8_t type, uint64_t batch)
{
	uint8_t buf[256];
	struct proto_builder b;
	struct proto_hdr h;

	drv_hdr_for(&h, &sh, 0x55, type);
	proto_build_begin(&b, buf, sizeof(buf), &h);
	if (type == PROTO_T_EVICT) {
		struct proto_evict_hdr eh = {batch, 1, 2, 0};
		struct proto_evict_entry e = {0, 0, 0};

		proto_build_evict_hdr(&b, &eh);
		proto_build_evict_entry(&b, &e);
		proto_build_evict_entry(&b, &e);
	} else {
		struct proto_delete d = {9, 0, 0, 0, 0};

		proto_build_delete(&b, &d);
	}
	cr_assert_eq(drv_ctlq_push(&sh.q, buf, proto_build_end(&b), batch), 0);
}

Test(drv_link, the_window_bounds_what_goes_and_an_ack_lets_the_rest_go)
{
	uint64_t t = rte_get_tsc_cycles(), seqs[16];
	uint8_t types[16];
	int i;

	for (i = 0; i < 6; i++)
		queue_msg(PROTO_T_DELETE, 0);
	drv_link_pump_streams(&L, &sh, 1, t);
	drv_link_flush(&L);
	cr_assert_eq(receive(types, seqs, NULL, 16), 4, "a window of 4");
	for (i = 0; i < 4; i++) {
		cr_assert_eq(types[i], PROTO_T_DELETE);
		cr_assert_eq(seqs[i], (uint64_t)i + 1, "in seq order");
	}
	cr_assert_eq(sh.q.backlog, 2);
	drv_link_ack(&sh, 4, 4, t);
	drv_link_pump_streams(&L, &sh, 1, t);
	drv_link_flush(&L);
	cr_assert_eq(receive(types, seqs, NULL, 16), 2);
	cr_assert_eq(seqs[0], 5);
	cr_assert_eq(seqs[1], 6);
	cr_assert_eq(sh.q.backlog, 0);
}

Test(drv_link, what_is_not_acknowledged_is_sent_again_after_the_timeout)
{
	uint64_t t = rte_get_tsc_cycles(), seqs[16], hz = rte_get_tsc_hz();
	uint8_t types[16];

	queue_msg(PROTO_T_DELETE, 0);
	drv_link_pump_streams(&L, &sh, 1, t);
	drv_link_flush(&L);
	cr_assert_eq(receive(types, seqs, NULL, 16), 1);
	drv_link_pump_streams(&L, &sh, 1, t + hz / 10000);
	drv_link_flush(&L);
	cr_assert_eq(receive(types, seqs, NULL, 16), 0, "not before the timeout");
	drv_link_pump_streams(&L, &sh, 1, t + hz);
	drv_link_flush(&L);
	cr_assert_eq(receive(types, seqs, NULL, 16), 1, "resent after it");
	cr_assert_eq(seqs[0], 1);
	drv_link_ack(&sh, 1, 1, t + hz);
	drv_link_pump_streams(&L, &sh, 1, t + 10 * hz);
	drv_link_flush(&L);
	cr_assert_eq(receive(types, seqs, NULL, 16), 0, "acknowledged: never again");
}

Test(drv_link, a_batchs_data_waits_for_its_evict_then_goes_whole)
{
	struct proto_evict_entry e[2] = {{0, 0, 0}, {0, 1, 0}};
	uint64_t t = rte_get_tsc_cycles(), seqs[64], bytes = 0;
	uint8_t types[64];
	unsigned int n;

	cr_assert_eq(emu_evict(emu, 0, 1, 1, 2, e), 0);
	cr_assert_eq(drv_link_pump_data(&L, emu, &sh, 1), 0, "its EVICT has not gone out");
	queue_msg(PROTO_T_EVICT, 1);
	drv_link_pump_streams(&L, &sh, 1, t);
	cr_assert_eq(sh.evict_sent, 1);
	cr_assert_gt(drv_link_pump_data(&L, emu, &sh, 1), 0);
	drv_link_flush(&L);
	n = receive(types, seqs, &bytes, 64);
	cr_assert_eq(types[0], PROTO_T_EVICT, "control first");
	cr_assert_eq(types[n - 1], PROTO_T_EVICT_DATA);
	cr_assert_eq(bytes, 2 * B, "the whole stream: 2 tokens of %u bytes", B);
	cr_assert_eq(st.evict_bytes, 2 * B);
	cr_assert_eq(emu_jobs_pending(emu, 1), 0, "the job is done");
}

Test(drv_link, the_fault_injector_withholds_every_nth_data_frame)
{
	struct proto_evict_entry e[2] = {{0, 0, 0}, {0, 1, 0}};
	uint64_t t = rte_get_tsc_cycles(), seqs[64], bytes = 0;
	uint8_t types[64];

	L.lose_data_every = 1;
	cr_assert_eq(emu_evict(emu, 0, 1, 1, 2, e), 0);
	queue_msg(PROTO_T_EVICT, 1);
	drv_link_pump_streams(&L, &sh, 1, t);
	drv_link_pump_data(&L, emu, &sh, 1);
	drv_link_flush(&L);
	cr_assert_eq(receive(types, seqs, &bytes, 64), 1, "the EVICT alone");
	cr_assert_eq(bytes, 0);
	cr_assert_eq(st.data_withheld, 1);
}

/* ---- --faults SPEC: what is not a rate is refused, by name (no EAL) ---- */

struct bad_spec {
	char spec[48];
	char want[64];
};

static struct bad_spec bad_specs[] = {
	{"seed=1,drop=nan", "drop 'nan' is not a finite number >= 0"},
	{"seed=1,dup=inf", "dup 'inf' is not a finite number >= 0"},
	{"seed=1,corrupt=-1", "corrupt '-1' is not a finite number >= 0"},
	{"seed=1,reorder=51", "reorder 51% is over 50%"},
	{"seed=1,delay_ms=nan", "delay_ms 'nan' is not a finite number >= 0"},
	{"drop=1", "give seed=N"},
};

ParameterizedTestParameters(faults_spec, a_rate_that_is_not_one_is_refused_by_name)
{
	return cr_make_param_array(struct bad_spec, bad_specs, sizeof(bad_specs) / sizeof(bad_specs[0]));
}

ParameterizedTest(struct bad_spec *b, faults_spec, a_rate_that_is_not_one_is_refused_by_name)
{
	struct kvss_faults_cfg f;
	char err[256] = "";

	memset(&f, 0, sizeof(f));
	cr_assert_eq(kvss_faults_parse(b->spec, &f, err, sizeof(err)), -1, "accepted: %s", b->spec);
	cr_assert_not_null(strstr(err, b->want), "'%s': message '%s' lacks '%s'", b->spec, err,
			   b->want);
}

/* ---- The port's link: down, restarted, up again ------------------------------------------ */

static unsigned int downs, ups;

static void
went_down(void *arg, struct drv_shard *s, uint64_t tsc)
{
	(void)arg;
	(void)tsc;
	cr_assert_eq(s, &sh);
	downs++;
}

static void
came_up(void *arg, struct drv_shard *s, uint64_t tsc)
{
	(void)arg;
	(void)tsc;
	cr_assert_eq(s, &sh);
	ups++;
}

Test(drv_link, a_link_down_is_said_once_restarted_after_a_second_and_its_return_said_once)
{
	uint64_t t = rte_get_tsc_cycles(), hz = rte_get_tsc_hz();

	downs = ups = 0;
	drv_link_watch(&L, &sh, 1, t, went_down, came_up, NULL);
	cr_assert_eq(downs + ups, 0, "up all along: nothing said");
	cr_assert_eq(rte_eth_dev_set_link_down(0), 0);
	drv_link_watch(&L, &sh, 1, t + 1, went_down, came_up, NULL);
	drv_link_watch(&L, &sh, 1, t + 2, went_down, came_up, NULL);
	cr_assert_eq(downs, 1, "down: said once");
	cr_assert_eq(st.link_restarts, 0, "not restarted before a second");
	/* A second on: the port is restarted (net_ring's start brings its link up). */
	drv_link_watch(&L, &sh, 1, t + 1 + hz, went_down, came_up, NULL);
	cr_assert_eq(st.link_restarts, 1);
	cr_assert_eq(ups, 0, "not seen up yet");
	drv_link_watch(&L, &sh, 1, t + 2 + hz, went_down, came_up, NULL);
	cr_assert_eq(ups, 1, "up again: said once, so the driver asks who is there");
	drv_link_watch(&L, &sh, 1, t + 3 + hz, went_down, came_up, NULL);
	cr_assert_eq(ups, 1);
	cr_assert_eq(downs, 1);
	/* Down and up again between two looks at it: not seen, nothing said. */
	cr_assert_eq(rte_eth_dev_set_link_down(0), 0);
	cr_assert_eq(rte_eth_dev_set_link_up(0), 0);
	drv_link_watch(&L, &sh, 1, t + 4 + hz, went_down, came_up, NULL);
	cr_assert_eq(downs + ups, 2);
}
