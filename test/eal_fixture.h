/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Start EAL for a Criterion test process: no PCI, no hugepages, no shared
 * config, and a file prefix unique to the process so that parallel tests and
 * other runs never meet.
 */
#ifndef KVSS_TEST_EAL_FIXTURE_H
#define KVSS_TEST_EAL_FIXTURE_H

#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <rte_eal.h>
#include <rte_ethdev.h>
#include <rte_mbuf.h>

#include "proto.h"

static inline int
test_eal_start(const char *name)
{
	char prefix[64];
	char *argv[] = {(char *)name, "--no-pci", "--no-huge", "--no-shconf", "-m", "64",
			"--log-level", "lib.eal:error", "--no-telemetry", "-l", "0", prefix, NULL};

	snprintf(prefix, sizeof(prefix), "--file-prefix=kvss_test_%d", (int)getpid());
	return rte_eal_init((int)(sizeof(argv) / sizeof(argv[0])) - 1, argv);
}

/*
 * The same with one net_ring port (port 0: what it sends comes back on its
 * receive side) started with one RX and one TX queue, and a pool of mbufs
 * for whole frames. 0, or -1.
 */
static inline int
test_eal_start_ring(struct rte_mempool **pool)
{
	char prefix[64];
	char *argv[] = {"test", "--no-pci", "--no-huge", "--no-shconf", "-m", "128", "--log-level",
			"lib.eal:error", "--no-telemetry", "-l", "0", "--vdev", "net_ring0", prefix, NULL};
	struct rte_eth_conf conf = {0};

	snprintf(prefix, sizeof(prefix), "--file-prefix=kvss_test_%d", (int)getpid());
	if (rte_eal_init((int)(sizeof(argv) / sizeof(argv[0])) - 1, argv) < 0)
		return -1;
	*pool = rte_pktmbuf_pool_create("p", 4095, 0, 0, RTE_PKTMBUF_HEADROOM + PROTO_FRAME_MAX,
					SOCKET_ID_ANY);
	if (*pool == NULL || rte_eth_dev_configure(0, 1, 1, &conf) != 0 ||
	    rte_eth_rx_queue_setup(0, 0, 1024, SOCKET_ID_ANY, NULL, *pool) != 0 ||
	    rte_eth_tx_queue_setup(0, 0, 1024, SOCKET_ID_ANY, NULL) != 0 || rte_eth_dev_start(0) != 0)
		return -1;
	return 0;
}

/* Stop EAL and remove this process's file prefix (app.c): none is left behind. */
void kvss_eal_stop(void);

static inline void
test_eal_stop(void)
{
	kvss_eal_stop();
}

#endif
