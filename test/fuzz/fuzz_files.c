/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * libFuzzer target: the files kvss reads from outside. The first byte, modulo
 * 3, picks the reader: 0, a kvss configuration (kvss_config_load: libconfig,
 * then every check); 1, a trace (workload_load: Mooncake or native JSONL);
 * 2, a kvss-plan cluster (kvss_cluster_load, then plan_run). The rest is the file.
 * Each must accept it or refuse it with one line naming the file; never
 * crash, hang or leak.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config.h"
#include "plan.h"
#include "workload.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

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
	if (data[0] % 3 == 0) {
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
