/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The whole driver as the program makes it, for the tests that drive its
 * parts directly (test_drv_rx, test_drv_shared): EAL with one net_ring
 * port, the configuration at a path read for the driver role, and the
 * driver made and loaded with a fixed epoch (kvss_driver_init is the
 * test's, which may first set up what the start reads). Criterion asserts.
 */
#ifndef KVSS_TEST_DRV_FIXTURE_H
#define KVSS_TEST_DRV_FIXTURE_H

#include <criterion/criterion.h>

#include "driver/driver_priv.h"
#include "eal_fixture.h"
#include "kvss.h"

/* EAL, @p cfg, and a driver loaded with driver epoch @p epoch. */
static inline struct drv *
test_driver_loaded(const char *cfg, uint32_t epoch)
{
	char err[512] = "";
	struct drv *d;

	cr_assert_eq(test_eal_start_ring(&kvss.pool), 0, "EAL and a net_ring port");
	cr_assert_eq(kvss_config_load_as(cfg, KVSS_ROLE_DRIVER, &kvss.cfg, err, sizeof(err)), 0,
		     "%s", err);
	kvss.epoch = epoch;
	d = kvss_driver_new();
	cr_assert_not_null(d);
	cr_assert_eq(kvss_driver_load(d), 0);
	return d;
}

/* The driver @p d freed (whatever of it was set up), the port and EAL stopped. */
static inline void
test_driver_stop(struct drv *d)
{
	kvss_driver_free(d);
	rte_eth_dev_stop(0);
	rte_eth_dev_close(0);
	rte_mempool_free(kvss.pool);
	test_eal_stop();
}

#endif
