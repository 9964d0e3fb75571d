/* SPDX-License-Identifier: BSD-3-Clause */
/* The application's state shared by its files, and helpers they share (see kvss.h). */
#include <dirent.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <rte_cycles.h>
#include <rte_eal.h>
#include <rte_epoll.h>
#include <rte_ethdev.h>
#include <rte_lcore.h>
#include <rte_pause.h>

#include "kvss.h"
#include "mono.h"

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
		for (r = 0; r < PROTO_E_MAX; r++) {
			t->errors[r] += s->errors[r];
			t->refill_errors[r] += s->refill_errors[r];
		}
		t->busy_cycles += s->busy_cycles;
		t->idle_cycles += s->idle_cycles;
	}
}

void
kvss_shard_time(struct kvss_shard_time *t)
{
	uint64_t ingest = 0, refill = 0, idle = 0, hz = rte_get_tsc_hz();
	unsigned int l;

	for (l = 0; l < RTE_MAX_LCORE; l++) {
		if (kvss.lcore_role[l] != KVSS_LCORE_INGEST && kvss.lcore_role[l] != KVSS_LCORE_REFILL)
			continue;
		ingest += kvss.stats[l].ingest_cycles;
		refill += kvss.stats[l].refill_cycles;
		idle += kvss.stats[l].idle_cycles;
	}
	t->ingest_busy_us = mono_ticks_to(ingest, hz, 1000000);
	t->refill_busy_us = mono_ticks_to(refill, hz, 1000000);
	t->idle_us = mono_ticks_to(idle, hz, 1000000);
}

uint64_t
kvss_poll_busy(struct kvss_lcore_stats *st, uint64_t t0, unsigned int *empty)
{
	uint64_t c = rte_get_tsc_cycles() - t0;

	*empty = 0;
	st->busy_polls++;
	st->busy_cycles += c;
	return c;
}

/* poll_mode "interrupt": ports whose RX queues can wake an lcore. */
static bool intr_ok[RTE_MAX_ETHPORTS];

/* The RX queues the calling lcore watches (it registered each in its epoll). */
#define INTR_QUEUES_MAX 16
static __thread struct {
	uint16_t port[INTR_QUEUES_MAX], q[INTR_QUEUES_MAX];
	unsigned int n;
} watched;

void
kvss_intr_port_probe(uint16_t port)
{
	if (port >= RTE_MAX_ETHPORTS)
		return;
	/* A queue with an event fd can wake an lcore (net_tap's is its tap's fd,
	 * readable while frames wait; some PMDs arm it with intr_enable too). */
	intr_ok[port] = rte_eth_dev_rx_intr_ctl_q_get_fd(port, 0) >= 0;
}

bool
kvss_intr_port_ok(uint16_t port)
{
	return port < RTE_MAX_ETHPORTS && intr_ok[port];
}

void
kvss_intr_watch(uint16_t port, uint16_t q)
{
	if (kvss.cfg.poll != KVSS_POLL_INTERRUPT || !kvss_intr_port_ok(port) ||
	    watched.n == INTR_QUEUES_MAX)
		return;
	if (rte_eth_dev_rx_intr_ctl_q(port, q, RTE_EPOLL_PER_THREAD, RTE_INTR_EVENT_ADD, NULL) != 0)
		return;
	watched.port[watched.n] = port;
	watched.q[watched.n++] = q;
}

/* Sleep until a watched queue has a frame, or 1 ms. */
static void
intr_sleep(struct kvss_lcore_stats *st)
{
	struct rte_epoll_event ev[INTR_QUEUES_MAX];
	unsigned int i;

	for (i = 0; i < watched.n; i++)
		rte_eth_dev_rx_intr_enable(watched.port[i], watched.q[i]);
	/* Level-triggered: a frame that came before the enable wakes it at once. */
	if (rte_epoll_wait(RTE_EPOLL_PER_THREAD, ev, INTR_QUEUES_MAX, 1) > 0)
		st->intr_wakeups++;
	for (i = 0; i < watched.n; i++)
		rte_eth_dev_rx_intr_disable(watched.port[i], watched.q[i]);
	st->intr_sleeps++;
}

void
kvss_poll_idle(struct kvss_lcore_stats *st, uint64_t t0, unsigned int *empty)
{
	st->idle_polls++;
	if (*empty <= 64)
		++*empty;
	if (*empty <= 64) {
		rte_pause();
	} else {
		kvss_gate_idle(); /* nothing to do: a good moment for memif's control */
		if (kvss.cfg.poll == KVSS_POLL_INTERRUPT && watched.n > 0)
			intr_sleep(st);
		else if (kvss.cfg.poll != KVSS_POLL_BUSY)
			usleep(50); /* cores are shared: let the other side run */
		else
			rte_pause();
	}
	st->idle_cycles += rte_get_tsc_cycles() - t0;
}

void
kvss_wait_turn(unsigned int *turns)
{
	if (kvss.cfg.poll != KVSS_POLL_BUSY && ++*turns > 16)
		usleep(20);
	else
		rte_pause();
}

void
kvss_remove_dir(const char *dir)
{
	DIR *d;
	struct dirent *de;

	if (dir[0] == '\0' || (d = opendir(dir)) == NULL)
		return;
	while ((de = readdir(d)) != NULL) {
		char f[PATH_MAX + 256];

		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		snprintf(f, sizeof(f), "%s/%s", dir, de->d_name);
		unlink(f);
	}
	closedir(d);
	rmdir(dir);
}

void
kvss_eal_stop(void)
{
	char dir[PATH_MAX];
	int primary = rte_eal_process_type() == RTE_PROC_PRIMARY;

	snprintf(dir, sizeof(dir), "%s", rte_eal_get_runtime_dir());
	rte_eal_cleanup();
	if (primary)
		kvss_remove_dir(dir);
}

void
kvss_eal_leave(void)
{
	if (rte_eal_process_type() == RTE_PROC_PRIMARY)
		kvss_remove_dir(rte_eal_get_runtime_dir());
}
