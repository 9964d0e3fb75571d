/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * lib/workload's trace reader against files that are not traces: what is
 * not a regular file is refused before anything is read (a FIFO with no
 * writer must not block it), a line with no end and a trace with no end
 * stop with an error naming the file and line, and nothing is left loaded.
 */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "workload.h"

static char dir[64], path[128], err[512];
static struct workload w;

static void
setup(void)
{
	snprintf(dir, sizeof(dir), "/tmp/kvss_test_workload_%d", (int)getpid());
	cr_assert_eq(mkdir(dir, 0700), 0);
	memset(&w, 0, sizeof(w));
}

static void
teardown(void)
{
	char cmd[160];

	workload_free(&w);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	cr_assert_eq(system(cmd), 0);
}

TestSuite(workload, .init = setup, .fini = teardown, .timeout = 20);

static const char *
file_of(const char *name, const char *text)
{
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	f = fopen(path, "w");
	cr_assert_not_null(f);
	fputs(text, f);
	fclose(f);
	return path;
}

Test(workload, a_device_is_refused_before_anything_is_read)
{
	cr_assert_eq(workload_load("/dev/zero", 512, 0, &w, err, sizeof(err)), -1);
	cr_assert_str_eq(err, "/dev/zero: not a regular file (a character device)");
	cr_assert_eq(w.n, 0);
}

Test(workload, a_fifo_with_no_writer_is_refused_at_once)
{
	snprintf(path, sizeof(path), "%s/fifo", dir);
	cr_assert_eq(mkfifo(path, 0600), 0);
	/* Opened the usual way, this would block until the test's timeout. */
	cr_assert_eq(workload_load(path, 512, 0, &w, err, sizeof(err)), -1);
	cr_assert(strstr(err, "not a regular file (a FIFO)") != NULL, "%s", err);
}

Test(workload, a_directory_is_refused)
{
	cr_assert_eq(workload_load(dir, 512, 0, &w, err, sizeof(err)), -1);
	cr_assert(strstr(err, "not a regular file (a directory)") != NULL, "%s", err);
}

Test(workload, a_line_with_no_end_stops_at_the_bound)
{
	char big[1001];

	memset(big, 'x', 1000);
	big[1000] = '\0';
	file_of("long.jsonl", "{\"tokens\": [1, 2, 3]}\n");
	{
		FILE *f = fopen(path, "a");

		fputs(big, f);
		fclose(f);
	}
	cr_assert_eq(workload_load_bounded(path, 512, 0, 100, 100, &w, err, sizeof(err)), -1);
	cr_assert(strstr(err, "long.jsonl:2: a line longer than 100 bytes") != NULL, "%s", err);
	cr_assert_eq(w.n, 0, "nothing half-loaded stays behind");
}

Test(workload, a_file_of_zeros_with_no_newline_stops_at_the_default_bound)
{
	int fd;

	snprintf(path, sizeof(path), "%s/zeros", dir);
	fd = open(path, O_CREAT | O_WRONLY, 0600);
	cr_assert_geq(fd, 0);
	/* Sparse: 300 MB of zeros that take no disk. */
	cr_assert_eq(ftruncate(fd, (off_t)WL_MAX_LINE + (50 << 20)), 0);
	close(fd);
	cr_assert_eq(workload_load(path, 512, 0, &w, err, sizeof(err)), -1);
	cr_assert(strstr(err, ":1: a line longer than") != NULL, "%s", err);
}

Test(workload, a_trace_with_too_many_requests_stops_with_an_error_a_limit_reads_fewer)
{
	file_of("many.jsonl", "{\"tokens\": [1]}\n{\"tokens\": [2]}\n\n{\"tokens\": [3]}\n"
			      "{\"tokens\": [4]}\n");
	cr_assert_eq(workload_load_bounded(path, 512, 0, 1000, 3, &w, err, sizeof(err)), -1);
	cr_assert(strstr(err, "many.jsonl:5: more than 3 requests") != NULL, "%s", err);
	cr_assert_eq(w.n, 0);
	cr_assert_eq(workload_load_bounded(path, 512, 3, 1000, 3, &w, err, sizeof(err)), 0, "%s",
		     err);
	cr_assert_eq(w.n, 3);
	cr_assert_eq(w.r[2].tokens[0], 3);
}
