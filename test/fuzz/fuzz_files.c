/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * libFuzzer target: the files kvss reads from outside. The first byte picks
 * the reader: 3, an organization key store (seal_orgs_load: what it read is
 * written out and read back the same); otherwise, modulo 3, 0, a kvss
 * configuration (kvss_config_load: libconfig, then every check); 1, a trace
 * (workload_load: Mooncake or native JSONL); 2, a kvss-plan cluster
 * (kvss_cluster_load, then plan_run). The rest is the file. Each must
 * accept it or refuse it with one line naming the file; never crash, hang
 * or leak.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config.h"
#include "orgkeys.h"
#include "plan.h"
#include "workload.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/*
 * A store accepted is written out (seal_orgs_write) and read back: the same
 * keys, so that what kvss-shared writes is what every replica reads.
 */
static void
orgkeys(const char *path, char *err, size_t errlen)
{
	struct seal_orgs *o, *back;
	uint32_t i;

	if (seal_orgs_load(path, &o, err, errlen) != 0) {
		if (err[0] == '\0' || strncmp(err, path, strlen(path)) != 0)
			abort(); /* a refusal must say why, naming the file */
		return;
	}
	if (seal_orgs_write(path, o, false, err, errlen) < 0 ||
	    seal_orgs_load(path, &back, err, errlen) != 0)
		abort();
	if (seal_orgs_count(back) != seal_orgs_count(o) ||
	    seal_orgs_default(back)->id != seal_orgs_default(o)->id)
		abort();
	for (i = 0; i < seal_orgs_count(o); i++) {
		const struct seal_key *a, *b;
		uint64_t x, y;

		seal_orgs_at(o, i, &x, &a);
		seal_orgs_at(back, i, &y, &b);
		if (x != y || a->id != b->id || memcmp(a->key, b->key, SEAL_KEY_LEN) != 0)
			abort();
	}
	seal_orgs_free(o);
	seal_orgs_free(back);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static char path[64];
	static struct kvss_config cfg;
	char err[512];
	FILE *f;

	if (size < 1)
		return 0;
	if (path[0] == '\0')
		snprintf(path, sizeof(path), "/dev/shm/kvss_fuzz_files_%d", (int)getpid());
	f = fopen(path, "wb");
	if (f == NULL)
		return 0;
	if (size > 1 && fwrite(data + 1, 1, size - 1, f) != size - 1) {
		fclose(f);
		unlink(path);
		return 0;
	}
	fclose(f);
	err[0] = '\0';
	/* The store's checks want its owner and mode 0600. */
	if (chmod(path, 0600) != 0) {
		unlink(path);
		return 0;
	}
	if (data[0] == 3) {
		orgkeys(path, err, sizeof(err));
	} else if (data[0] % 3 == 0) {
		memset(&cfg, 0, sizeof(cfg));
		if (kvss_config_load(path, &cfg, err, sizeof(err)) != 0 && err[0] == '\0')
			abort(); /* a refusal must say why */
	} else if (data[0] % 3 == 2) {
		static struct plan_cluster pc;
		static struct plan_result pr;

		if (kvss_cluster_load(path, &pc, err, sizeof(err)) != 0) {
			if (err[0] == '\0')
				abort();
		} else if (plan_run(&pc, &pr, err, sizeof(err)) != 0 && err[0] == '\0') {
			abort();
		}
	} else {
		struct workload w;

		memset(&w, 0, sizeof(w));
		if (workload_load(path, 512, 1000, &w, err, sizeof(err)) == 0)
			workload_free(&w);
		else if (err[0] == '\0')
			abort();
	}
	unlink(path); /* nothing left in /dev/shm, whatever ends the run */
	return 0;
}
