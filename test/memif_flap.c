/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * A memif link that keeps going away under traffic, in one process: the
 * regression test of the port gate (app/kvss/portgate.c).
 *
 *   memif_flap [EAL options] -- SECONDS [--no-gate]
 *
 * EAL options must create a memif server on port 0 and a client on port 1
 * of the same socket. A worker lcore sends 1,500-byte frames on the server
 * and receives them on the client, through kvss_tx_burst / kvss_rx_burst,
 * two bursts sent per burst received, so the client's ring stays full. The
 * main lcore, every 2 to 5 ms once frames flow, restarts the server port
 * (with the worker held off and inside the gate, as kvss's driver restarts
 * a port): the server sends DISCONNECT, and EAL's interrupt thread tears the
 * client's connection down, unmapping the rings the worker receives from.
 * Then it restarts the client, which connects again. It prints the cycles
 * done and the frames moved, and exits 0 after SECONDS with at least 20
 * cycles in which frames flowed (the test asks for 100 in 8 s).
 *
 * With --no-gate the gate stays off: the interrupt thread frees the client's
 * rings while the worker is inside a receive, and the process soon dies of
 * SIGSEGV (this is what the gate is for).
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <rte_cycles.h>
#include <rte_eal.h>
#include <rte_ethdev.h>
#include <rte_lcore.h>
#include <rte_mbuf.h>
#include <rte_pause.h>
#include <rte_random.h>

#include "kvss.h"

#define BURST 32
#define FRAME 1500

static volatile int stop;
static int hold, held; /* main asks the worker to keep off the ports; it does */
static uint64_t rx_frames, tx_frames; /* written by the worker only */
static struct rte_mempool *pool;

static int
worker(void *arg)
{
	struct rte_mbuf *m[BURST];

	(void)arg;
	while (!stop) {
		uint16_t i, n;
		int k;

		if (__atomic_load_n(&hold, __ATOMIC_ACQUIRE)) {
			__atomic_store_n(&held, 1, __ATOMIC_RELEASE);
			while (__atomic_load_n(&hold, __ATOMIC_ACQUIRE))
				rte_pause();
			__atomic_store_n(&held, 0, __ATOMIC_RELEASE);
		}

		/* Two bursts sent per burst received: the client's ring stays full,
		 * so a receive is mostly copying frames when the rings go. */
		for (k = 0; k < 2; k++) {
			if (rte_pktmbuf_alloc_bulk(pool, m, BURST) != 0)
				break;
			for (i = 0; i < BURST; i++) {
				m[i]->data_len = FRAME;
				m[i]->pkt_len = FRAME;
				memset(rte_pktmbuf_mtod(m[i], void *), (int)i, 64);
			}
			n = kvss_tx_burst(0, 0, m, BURST);
			__atomic_store_n(&tx_frames, tx_frames + n, __ATOMIC_RELAXED);
			if (n < BURST)
				rte_pktmbuf_free_bulk(m + n, BURST - n);
		}
		n = kvss_rx_burst(1, 0, m, BURST);
		__atomic_store_n(&rx_frames, rx_frames + n, __ATOMIC_RELAXED);
		rte_pktmbuf_free_bulk(m, n);
		if (n == 0) { /* as kvss's lcores do when a poll finds nothing */
			kvss_gate_idle();
			rte_pause();
		}
	}
	return 0;
}

static int
port_setup(uint16_t port)
{
	struct rte_eth_conf conf = {0};

	if (rte_eth_dev_configure(port, 1, 1, &conf) != 0 ||
	    rte_eth_rx_queue_setup(port, 0, 1024, (unsigned int)rte_socket_id(), NULL, pool) != 0 ||
	    rte_eth_tx_queue_setup(port, 0, 1024, (unsigned int)rte_socket_id(), NULL) != 0 ||
	    rte_eth_dev_start(port) != 0)
		return -1;
	return 0;
}

static int
link_up(uint16_t port)
{
	struct rte_eth_link l;

	return rte_eth_link_get_nowait(port, &l) == 0 && l.link_status;
}

/*
 * Restart @p port while the worker keeps off the ports (a stopped port must
 * not see a burst at all) and the interrupt thread is parked (the gate, as
 * kvss's driver restarts a port).
 */
static void
restart(uint16_t port)
{
	int in;

	__atomic_store_n(&hold, 1, __ATOMIC_RELEASE);
	while (!__atomic_load_n(&held, __ATOMIC_ACQUIRE))
		rte_pause();
	in = kvss_gate_wait(1000);
	if (!in)
		fprintf(stderr, "memif_flap: the interrupt thread did not park\n");
	rte_eth_dev_stop(port);
	if (rte_eth_dev_start(port) != 0)
		fprintf(stderr, "memif_flap: port %u did not start again\n", port);
	if (in)
		kvss_gate_leave();
	__atomic_store_n(&hold, 0, __ATOMIC_RELEASE);
}

/* Wait up to 1 s for @p port's link to be @p up. */
static void
wait_link(uint16_t port, int up)
{
	uint64_t t = rte_get_tsc_cycles(), hz = rte_get_tsc_hz();

	while (link_up(port) != up && rte_get_tsc_cycles() - t < hz)
		usleep(100);
}

int
main(int argc, char **argv)
{
	int n = rte_eal_init(argc, argv), gate = 1, rc = 0;
	unsigned int worker_lcore;
	uint64_t hz, end, cycles = 0, flowing = 0;
	double secs;

	if (n < 0) {
		fprintf(stderr, "memif_flap: EAL init failed\n");
		return 2;
	}
	argc -= n;
	argv += n;
	if (argc < 2 || (secs = atof(argv[1])) <= 0) {
		fprintf(stderr, "usage: memif_flap [EAL options] -- SECONDS [--no-gate]\n");
		rte_eal_cleanup();
		return 2;
	}
	if (argc > 2 && strcmp(argv[2], "--no-gate") == 0)
		gate = 0;
	worker_lcore = rte_get_next_lcore(-1, 1, 0);
	pool = rte_pktmbuf_pool_create("flap", 8191, 256, 0, RTE_MBUF_DEFAULT_BUF_SIZE,
				       (int)rte_socket_id());
	if (rte_eth_dev_count_avail() != 2 || worker_lcore >= RTE_MAX_LCORE || pool == NULL ||
	    port_setup(0) != 0 || port_setup(1) != 0) {
		fprintf(stderr, "memif_flap: need a memif server (port 0), a client (port 1) "
				"and a worker lcore\n");
		rte_eal_cleanup();
		return 2;
	}
	if (gate && kvss_gate_init() != 0) {
		rte_eal_cleanup();
		return 2;
	}
	printf("memif_flap: %s, %.1f s\n", gate ? "gate on" : "gate OFF", secs);
	fflush(stdout);
	rte_eal_remote_launch(worker, NULL, worker_lcore);
	hz = rte_get_tsc_hz();
	end = rte_get_tsc_cycles() + (uint64_t)(secs * (double)hz);
	while (rte_get_tsc_cycles() < end) {
		uint64_t rx0;

		wait_link(0, 1);
		wait_link(1, 1);
		rx0 = __atomic_load_n(&rx_frames, __ATOMIC_RELAXED);
		usleep(2000 + (unsigned int)(rte_rand() % 3000));
		if (__atomic_load_n(&rx_frames, __ATOMIC_RELAXED) > rx0)
			flowing++;
		/*
		 * The server goes away: it sends DISCONNECT, and the interrupt
		 * thread unmaps the client's rings while the worker receives.
		 */
		restart(0);
		wait_link(1, 0);
		restart(1); /* a memif client connects when it starts */
		cycles++;
	}
	stop = 1;
	rte_eal_mp_wait_lcore();
	printf("memif_flap: %" PRIu64 " cycles, %" PRIu64 " with frames flowing; %" PRIu64
	       " frames sent, %" PRIu64 " received\n", cycles, flowing, tx_frames, rx_frames);
	if (flowing < 20) {
		fprintf(stderr, "memif_flap: frames flowed in only %" PRIu64 " cycles\n", flowing);
		rc = 1;
	}
	fflush(stdout);
	/*
	 * Exit with the ports up and the interrupt thread parked. Tearing the
	 * two ends of one socket down in one process runs into DPDK 22.11
	 * memif bugs of its own (a closed control fd left registered: EAL
	 * panics adding it to epoll; a listener's interrupt source freed while
	 * registered), none on the path this tool tests. Only the runtime
	 * directory is removed.
	 */
	kvss_eal_leave();
	return rc;
}
