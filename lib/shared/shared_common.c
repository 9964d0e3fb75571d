/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * What every client of shared.h does alike, apart from how it reaches the
 * objects: the Ceph configuration's check and how a completion is counted.
 * The librados client (shared_rados.c) and the one over objects in memory
 * the driver's tests and the shard fuzzer link instead (test/rados_mem.c)
 * both call these, so the tests check the same refusals and counts kvss
 * gets. Pure C: no librados, no DPDK.
 */
#include <errno.h>
#include <stdio.h>

#include "fileio.h"
#include "shared.h"

int
shared_conf_check(const char *path, char *err, size_t errlen)
{
	char why[600];
	FILE *f = fileio_open(path, why, sizeof(why));

	if (f == NULL) {
		if (err != NULL && errlen > 0)
			snprintf(err, errlen, "Ceph configuration %s", why);
		return -1;
	}
	fclose(f);
	return 0;
}

void
shared_stats_count(struct shared_stats *st, uint8_t op, int status)
{
	switch (status) {
	case 0:
		st->ok[op]++;
		break;
	case -EEXIST:
		st->exists++;
		break;
	case -ENOENT:
		st->missing++;
		break;
	case -ETIMEDOUT:
		st->timeouts++;
		break;
	case -EFBIG:
		st->too_big++;
		break;
	default:
		st->other_errors++;
	}
}
