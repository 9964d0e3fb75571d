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

static inline int
test_eal_start(const char *name)
{
	char prefix[64];
	char *argv[] = {(char *)name, "--no-pci", "--no-huge", "--no-shconf", "-m", "64",
			"--log-level", "lib.eal:error", "--no-telemetry", "-l", "0", prefix, NULL};

	snprintf(prefix, sizeof(prefix), "--file-prefix=kvss_test_%d", (int)getpid());
	return rte_eal_init((int)(sizeof(argv) / sizeof(argv[0])) - 1, argv);
}

/* Stop EAL and remove this process's file prefix (app.c): none is left behind. */
void kvss_eal_stop(void);

static inline void
test_eal_stop(void)
{
	kvss_eal_stop();
}

#endif
