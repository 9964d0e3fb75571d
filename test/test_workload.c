/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * lib/workload's trace reader against files that are not traces: what is
 * not a regular file is refused before anything is read (a FIFO with no
 * writer must not block it), a line with no end and a trace with no end
 * stop with an error naming the file and line, and nothing is left loaded.
 */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "proto.h"
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

static const char *file_of(const char *name, const char *text);

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

/* The stop hook: asked how often, and says stop from its third call on. */
static unsigned int stop_calls;

static bool
stop_on_third(void)
{
	return ++stop_calls >= 3;
}

Test(workload, a_signal_stops_a_long_load_within_the_lines_between_two_checks)
{
	FILE *f;
	unsigned int i;

	snprintf(path, sizeof(path), "%s/long.jsonl", dir);
	f = fopen(path, "w");
	cr_assert_not_null(f);
	for (i = 0; i < 20 * WL_STOP_EVERY; i++)
		fprintf(f, "{\"tokens\": [%u, 2, 3]}\n", i);
	fclose(f);
	/* No hook: all of it. */
	cr_assert_eq(workload_load(path, 512, 0, &w, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(w.n, 20 * WL_STOP_EVERY);
	workload_free(&w);
	memset(&w, 0, sizeof(w));
	/* A signal came before the third check: it stops there, nothing kept. */
	stop_calls = 0;
	workload_set_stop(stop_on_third);
	errno = 0;
	cr_assert_eq(workload_load(path, 512, 0, &w, err, sizeof(err)), -1);
	workload_set_stop(NULL);
	cr_assert_eq(errno, EINTR);
	cr_assert_eq(stop_calls, 3);
	cr_assert(strstr(err, "long.jsonl:3072: stopped (a signal)") != NULL, "%s", err);
	cr_assert_eq(w.n, 0);
	cr_assert_null(w.r);
}

Test(workload, a_nul_byte_in_a_line_is_refused_and_a_byte_order_mark_is_not_text)
{
	FILE *f;

	file_of("nul.jsonl", "");
	f = fopen(path, "w");
	cr_assert_not_null(f);
	fwrite("{\"tokens\": [1]}\0 garbage\n", 1, 25, f);
	fclose(f);
	cr_assert_eq(workload_load(path, 512, 0, &w, err, sizeof(err)), -1, "a NUL taken");
	cr_assert(strstr(err, ":1: a NUL byte in the line") != NULL, "%s", err);
	/* A NUL first: not a blank line to skip. */
	f = fopen(path, "w");
	cr_assert_not_null(f);
	fwrite("\0{\"tokens\": [1]}\n", 1, 17, f);
	fclose(f);
	cr_assert_eq(workload_load(path, 512, 0, &w, err, sizeof(err)), -1, "a leading NUL skipped");
	cr_assert(strstr(err, ":1: a NUL byte in the line") != NULL, "%s", err);
	file_of("bom.jsonl", "\xef\xbb\xbf{\"tokens\": [1, 2]}\n{\"tokens\": [3]}\n");
	cr_assert_eq(workload_load(path, 512, 0, &w, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(w.n, 2);
	cr_assert_eq(w.r[0].n, 2);
}

Test(workload, a_key_nested_in_another_object_is_not_the_requests)
{
	file_of("nested.jsonl", "{\"meta\": {\"tokens\": [9, 9], \"org\": \"x\"}, \"tokens\": [1, 2, 3], "
				"\"org\": \"acme\"}\n");
	cr_assert_eq(workload_load(path, 512, 0, &w, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(w.n, 1);
	cr_assert_eq(w.r[0].n, 3, "the request's own tokens, not meta's");
	cr_assert_eq(w.r[0].tokens[0], 1);
	cr_assert_eq(w.r[0].iso, proto_ref_isolation_id("acme", 4));
}

/* Arrays, not pointers: Criterion copies the parameters to its workers. */
struct bad_line {
	char line[96];
	char want[96];
};

static struct bad_line bad_lines[] = {
	{"{\"tokens\": [1, 18446744073709551616]}", ":1: tokens: want an array of token ids"},
	{"{\"tokens\": [1, -1]}", ":1: tokens: want an array of token ids"},
	{"{\"tokens\": [1e23]}", ":1: tokens: want an array of token ids"},
	{"{\"tokens\": [4294967296]}", ":1: tokens: want an array of token ids"},
	{"{\"tokens\": [1], \"timestamp\": -5}", ":1: timestamp: want whole milliseconds"},
	{"{\"tokens\": [1], \"timestamp\": 1e23}", ":1: timestamp: want whole milliseconds"},
	{"{\"tokens\": [1], \"timestamp\": 9007199254740993}", ":1: timestamp: want whole milliseconds"},
	{"{\"tokens\": [1], \"output_length\": \"many\"}", ":1: output_length: want a whole number"},
	{"{\"hash_ids\": [-1], \"input_length\": 5}", ":1: hash_ids: want an array of whole numbers"},
	{"{\"tokens\": [1], \"org\": 7}", ":1: org: want a name in quotes"},
	/* Not one JSON object: each was taken for a request. */
	{"{\"tokens\": [1, 2]", ":1: an object with no end"},
	{"{\"tokens\": [1, 2]} trailing", ":1: more after the object's end"},
	{"{\"tokens\": [1, 2]}}", ":1: more after the object's end"},
	{"{\"tokens\": [1, 2}", ":1: a closing bracket that does not match"},
	{"{\"tokens\": [1, 2], \"org\": \"acme}", ":1: a string with no closing quote"},
	{"[1, 2]", ":1: not a JSON object"},
	{"hello", ":1: not a JSON object"},
	{"{\"tokens\": [1, 2,]}", ":1: tokens: want an array of token ids"},
	/* input_length: what is wrong with it, not 'does not match' for all. */
	{"{\"hash_ids\": [1], \"input_length\": -5}", ":1: input_length: want a whole number"},
	{"{\"hash_ids\": [1], \"input_length\": 100.5}", ":1: input_length: want a whole number"},
	{"{\"hash_ids\": [1], \"tokens\": [1]}", ":1: input_length: missing"},
	{"{\"hash_ids\": [1, 2], \"input_length\": 5}", ":1: input_length 5 does not match hash_ids (2 blocks"},
};

ParameterizedTestParameters(workload, a_value_it_cannot_use_is_refused_with_line_and_field)
{
	return cr_make_param_array(struct bad_line, bad_lines,
				   sizeof(bad_lines) / sizeof(bad_lines[0]));
}

ParameterizedTest(struct bad_line *b, workload, a_value_it_cannot_use_is_refused_with_line_and_field)
{
	char text[128];

	snprintf(text, sizeof(text), "%s\n", b->line);
	file_of("bad.jsonl", text);
	cr_assert_eq(workload_load(path, 512, 0, &w, err, sizeof(err)), -1, "accepted: %s", b->line);
	cr_assert(strstr(err, b->want) != NULL, "'%s': %s", b->line, err);
	cr_assert_eq(w.n, 0);
}

/*
 * make demo's built-in workload: a library of documents read again and
 * again, far apart. The same arguments give the same requests; about 60% of
 * them are documents, each the library's own tokens every time; most
 * documents come back; and a library of 0 is the plain built-in workload.
 */
Test(workload, the_library_of_documents_recurs_and_replays_the_same)
{
	struct workload a = {0}, b = {0}, plain = {0}, zero = {0};
	size_t i, docs = 0, again = 0;
	uint32_t *seen;

	cr_assert_eq(workload_generate_docs(2000, 300, &a), 0);
	cr_assert_eq(workload_generate_docs(2000, 300, &b), 0);
	seen = calloc(300, sizeof(*seen));
	cr_assert_not_null(seen);
	for (i = 0; i < a.n; i++) {
		cr_assert_eq(a.r[i].n, b.r[i].n, "request %zu", i);
		cr_assert_eq(memcmp(a.r[i].tokens, b.r[i].tokens, sizeof(uint32_t) * a.r[i].n), 0);
		if ((a.r[i].tokens[0] & 0x80000000u) != 0) {
			/* A document: token j of document d is d * 20011 + j. */
			uint32_t d = (a.r[i].tokens[0] & 0x7fffffffu) / 20011;

			cr_assert_lt(d, 300);
			cr_assert_geq(a.r[i].n, 5000);
			cr_assert_lt(a.r[i].n, 20000);
			if (seen[d] != 0) {
				cr_assert_eq(seen[d], a.r[i].n, "document %u changed length", d);
				again++;
			}
			seen[d] = a.r[i].n;
			docs++;
		}
	}
	cr_assert(docs > 1000 && docs < 1400, "%zu of 2000 requests are documents", docs);
	cr_assert_gt(again, docs / 2, "%zu of %zu reads were of a document read before", again, docs);
	/* No library: the plain built-in workload, request for request. */
	cr_assert_eq(workload_generate(500, &plain), 0);
	cr_assert_eq(workload_generate_docs(500, 0, &zero), 0);
	for (i = 0; i < plain.n; i++) {
		cr_assert_eq(plain.r[i].n, zero.r[i].n);
		cr_assert_eq(memcmp(plain.r[i].tokens, zero.r[i].tokens, sizeof(uint32_t) * plain.r[i].n), 0);
	}
	free(seen);
	workload_free(&a);
	workload_free(&b);
	workload_free(&plain);
	workload_free(&zero);
}
