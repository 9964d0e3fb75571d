/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The port gate: the data-plane lcores and EAL's interrupt thread take turns
 * on memif ports.
 *
 * DPDK 22.11's memif PMD runs its control channel in the interrupt thread.
 * When the peer goes away (a shard or driver restarts), that thread tears
 * the connection down (memif_disconnect: clear the connected flag, then
 * unmap the rings and buffers and free the region descriptors) while an
 * lcore may be inside rte_eth_rx_burst or rte_eth_tx_burst on the same port,
 * past the flag check: the burst then reads unmapped memory or freed
 * descriptors. The driver died of this in 2 of 76 shard-restart runs.
 *
 * The PMD takes no lock we could share, so the gate keeps the interrupt
 * thread itself out of the way: it parks it inside a callback of our own
 * (an eventfd registered with EAL's interrupt handling, which runs one
 * callback at a time), and an lcore bursts on the ports only while it is
 * parked there. An lcore idle for 64 polls lets it go after 1 ms parked, a
 * busy one after 20 ms: it waits until no lcore is inside a burst, posts the
 * semaphore the thread waits on, and asks at once for the next park. In
 * between, memif's control messages (connect, disconnect) run with no burst
 * under way; a burst tried then is skipped (it reads as an empty RX or a
 * full TX ring). Ports are stopped and closed at exit, and restarted by the
 * driver, inside the gate too.
 *
 * Entering is a counter increment and two loads (Dekker style, sequentially
 * consistent, against the releaser's flag); the gate is on only when a memif
 * port is there: NICs, net_pcap and net_ring bursts pay one predictable branch.
 */
/* rte_intr_instance_alloc and its setters are experimental in 22.11. */
#define ALLOW_EXPERIMENTAL_API
#include <errno.h>
#include <inttypes.h>
#include <semaphore.h>
#include <stdio.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <rte_cycles.h>
#include <rte_ethdev.h>
#include <rte_interrupts.h>
#include <rte_pause.h>

#include "kvss.h"

static struct {
	int on;
	int efd;
	struct rte_intr_handle *ih;
	sem_t go;	    /* the parked interrupt thread waits here */
	int parked;	    /* it is parked: lcores may burst */
	int releasing;	    /* an lcore is letting it go */
	int closing;	    /* kvss_gate_fini: do not park again */
	uint32_t inside;    /* lcores within a burst */
	uint64_t parked_at; /* tsc */
	uint64_t period;      /* an idle lcore lets it go after this */
	uint64_t busy_period; /* a busy one after this */
	uint64_t parks;
	uint64_t released_at; /* tsc of the last release */
	uint64_t shut, shut_max; /* cycles from a release to the next park */
} G;

/* The interrupt thread: the lcores asked it to park. */
static void
gate_park(void *arg)
{
	uint64_t v, now;

	(void)arg;
	if (read(G.efd, &v, sizeof(v)) != (ssize_t)sizeof(v))
		return;
	if (__atomic_load_n(&G.closing, __ATOMIC_ACQUIRE))
		return;
	now = rte_get_tsc_cycles();
	if (G.released_at != 0) {
		uint64_t d = now - G.released_at;

		G.shut += d;
		if (d > G.shut_max)
			G.shut_max = d;
	}
	__atomic_store_n(&G.parked_at, now, __ATOMIC_RELAXED);
	__atomic_fetch_add(&G.parks, 1, __ATOMIC_RELAXED);
	__atomic_store_n(&G.parked, 1, __ATOMIC_SEQ_CST);
	while (sem_wait(&G.go) != 0 && errno == EINTR)
		;
}

static void
ask_park(void)
{
	uint64_t one = 1;

	if (write(G.efd, &one, sizeof(one)) != (ssize_t)sizeof(one))
		fprintf(stderr, "kvss: port gate: eventfd write failed\n");
}

/* Let the parked interrupt thread go once no lcore is inside a burst. */
static void
gate_release(int again)
{
	while (__atomic_load_n(&G.inside, __ATOMIC_SEQ_CST) != 0)
		rte_pause();
	G.released_at = rte_get_tsc_cycles();
	__atomic_store_n(&G.parked, 0, __ATOMIC_SEQ_CST);
	sem_post(&G.go);
	if (again)
		ask_park();
}

int
kvss_gate_init(void)
{
	uint16_t port;
	int memif = 0;

	RTE_ETH_FOREACH_DEV(port) {
		struct rte_eth_dev_info info;

		if (rte_eth_dev_info_get(port, &info) == 0 && info.driver_name != NULL &&
		    strcmp(info.driver_name, "net_memif") == 0)
			memif = 1;
	}
	if (!memif)
		return 0;
	G.period = rte_get_tsc_hz() / 1000;
	G.busy_period = rte_get_tsc_hz() / 50;
	G.efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (G.efd < 0 || sem_init(&G.go, 0, 0) != 0) {
		fprintf(stderr, "kvss: port gate: %s\n", strerror(errno));
		return -1;
	}
	G.ih = rte_intr_instance_alloc(RTE_INTR_INSTANCE_F_PRIVATE);
	if (G.ih == NULL || rte_intr_fd_set(G.ih, G.efd) != 0 ||
	    rte_intr_type_set(G.ih, RTE_INTR_HANDLE_EXT) != 0 ||
	    rte_intr_callback_register(G.ih, gate_park, NULL) != 0) {
		fprintf(stderr, "kvss: port gate: cannot register with the interrupt thread\n");
		rte_intr_instance_free(G.ih);
		close(G.efd);
		return -1;
	}
	G.on = 1;
	ask_park();
	return 0;
}

void
kvss_gate_fini(void)
{
	int rc;

	if (!G.on)
		return;
	__atomic_store_n(&G.closing, 1, __ATOMIC_RELEASE);
	if (__atomic_load_n(&G.parked, __ATOMIC_SEQ_CST))
		gate_release(0);
	/* -EAGAIN while the callback runs (it is leaving). */
	while ((rc = rte_intr_callback_unregister(G.ih, gate_park, NULL)) == -EAGAIN) {
		if (__atomic_load_n(&G.parked, __ATOMIC_SEQ_CST))
			gate_release(0);
		usleep(100);
	}
	rte_intr_instance_free(G.ih);
	close(G.efd);
	sem_destroy(&G.go);
	G.on = 0;
	{
		double us = 1e6 / (double)rte_get_tsc_hz();

		printf("kvss: port gate: the interrupt thread was parked %" PRIu64 " times; shut "
		       "%.1f ms in all, longest %.0f us\n", G.parks, (double)G.shut * us / 1000,
		       (double)G.shut_max * us);
	}
}

int
kvss_gate_enter(void)
{
	if (!G.on)
		return 1;
	if (!__atomic_load_n(&G.parked, __ATOMIC_SEQ_CST))
		return 0;
	__atomic_fetch_add(&G.inside, 1, __ATOMIC_SEQ_CST);
	if (__atomic_load_n(&G.releasing, __ATOMIC_SEQ_CST) ||
	    !__atomic_load_n(&G.parked, __ATOMIC_SEQ_CST)) {
		__atomic_fetch_sub(&G.inside, 1, __ATOMIC_SEQ_CST);
		return 0;
	}
	return 1;
}

/* Let it go if it has been parked for @p after cycles (one lcore does). */
static void
maybe_release(uint64_t after)
{
	int no = 0;

	if (!__atomic_load_n(&G.parked, __ATOMIC_SEQ_CST) ||
	    rte_get_tsc_cycles() - __atomic_load_n(&G.parked_at, __ATOMIC_RELAXED) < after)
		return;
	/* One lcore lets it go; the others see releasing and stay out. */
	if (!__atomic_compare_exchange_n(&G.releasing, &no, 1, 0, __ATOMIC_SEQ_CST,
					 __ATOMIC_RELAXED))
		return;
	if (__atomic_load_n(&G.parked, __ATOMIC_SEQ_CST) && !__atomic_load_n(&G.closing, __ATOMIC_ACQUIRE))
		gate_release(1);
	__atomic_store_n(&G.releasing, 0, __ATOMIC_SEQ_CST);
}

int
kvss_gate_wait(unsigned int ms)
{
	unsigned int i;

	for (i = 0; i < ms * 10; i++) {
		if (kvss_gate_enter())
			return 1;
		usleep(100);
	}
	return 0;
}

void
kvss_gate_leave(void)
{
	if (!G.on)
		return;
	__atomic_fetch_sub(&G.inside, 1, __ATOMIC_SEQ_CST);
	maybe_release(G.busy_period);
}

void
kvss_gate_idle(void)
{
	if (G.on)
		maybe_release(G.period);
}

int
kvss_gate_shut(void)
{
	return G.on && (!__atomic_load_n(&G.parked, __ATOMIC_ACQUIRE) ||
			__atomic_load_n(&G.releasing, __ATOMIC_ACQUIRE));
}

uint64_t
kvss_gate_parks(void)
{
	return G.on ? __atomic_load_n(&G.parks, __ATOMIC_RELAXED) : 0;
}

uint16_t
kvss_rx_burst_read(uint16_t port, uint16_t queue, struct rte_mbuf **pkts, uint16_t n, bool *read)
{
	uint16_t got;

	*read = false;
	if (!kvss_gate_enter())
		return 0;
	got = rte_eth_rx_burst(port, queue, pkts, n);
	kvss_gate_leave();
	*read = true;
	return got;
}

uint16_t
kvss_rx_burst(uint16_t port, uint16_t queue, struct rte_mbuf **pkts, uint16_t n)
{
	bool read;

	return kvss_rx_burst_read(port, queue, pkts, n, &read);
}

uint16_t
kvss_tx_burst(uint16_t port, uint16_t queue, struct rte_mbuf **pkts, uint16_t n)
{
	uint16_t sent;

	if (!kvss_gate_enter())
		return 0;
	sent = rte_eth_tx_burst(port, queue, pkts, n);
	kvss_gate_leave();
	return sent;
}
