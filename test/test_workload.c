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
#include <math.h>
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

/* The timeout catches a hang (a FIFO's open, a load that never stops), not
 * a pace: the longest test takes about a second alone, and 20 s was passed
 * three runs in five beside two CPU hogs and make check's other suites. */
TestSuite(workload, .init = setup, .fini = teardown, .timeout = 120);

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

Test(workload, a_cache_salt_is_read_as_its_id_and_null_or_none_is_no_salt)
{
	char big[400], text[600];

	file_of("salt.jsonl", "{\"tokens\": [1, 2], \"cache_salt\": \"user-42\"}\n"
			      "{\"tokens\": [1, 2]}\n"
			      "{\"tokens\": [1, 2], \"cache_salt\": null}\n"
			      "{\"hash_ids\": [5], \"input_length\": 3, \"cache_salt\": \"a+/=~!\"}\n");
	cr_assert_eq(workload_load(path, 512, 0, &w, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(w.n, 4);
	cr_assert_eq(w.r[0].salt, proto_ref_salt("user-42", 7));
	cr_assert_eq(w.r[1].salt, 0, "no field: no salt");
	cr_assert_eq(w.r[2].salt, 0, "null: no salt");
	cr_assert_eq(w.r[3].salt, proto_ref_salt("a+/=~!", 6), "Mooncake's lines carry one too");
	workload_free(&w);
	/* 256 bytes is a salt, 257 is not, naming the line. */
	memset(big, 'x', 256);
	big[256] = '\0';
	snprintf(text, sizeof(text), "{\"tokens\": [1]}\n{\"tokens\": [1], \"cache_salt\": \"%s\"}\n", big);
	file_of("salt256.jsonl", text);
	cr_assert_eq(workload_load(path, 512, 0, &w, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(w.r[1].salt, proto_ref_salt(big, 256));
	workload_free(&w);
	big[256] = 'x';
	big[257] = '\0';
	snprintf(text, sizeof(text), "{\"tokens\": [1]}\n{\"tokens\": [1], \"cache_salt\": \"%s\"}\n", big);
	file_of("salt257.jsonl", text);
	cr_assert_eq(workload_load(path, 512, 0, &w, err, sizeof(err)), -1);
	cr_assert(strstr(err, ":2: cache_salt: want null, or 1 to 256") != NULL, "%s", err);
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
	/* A cache salt: 1 to 256 printable ASCII bytes, no space, quote or backslash. */
	{"{\"tokens\": [1], \"cache_salt\": \"\"}", ":1: cache_salt: want null, or 1 to 256"},
	{"{\"tokens\": [1], \"cache_salt\": 7}", ":1: cache_salt: want null, or 1 to 256"},
	{"{\"tokens\": [1], \"cache_salt\": \"a b\"}", ":1: cache_salt: want null, or 1 to 256"},
	{"{\"tokens\": [1], \"cache_salt\": \"a\\\"b\"}", ":1: cache_salt: want null, or 1 to 256"},
	{"{\"tokens\": [1], \"cache_salt\": \"caf\xc3\xa9\"}", ":1: cache_salt: want null, or 1 to 256"},
	{"{\"tokens\": [1], \"cache_salt\": \"a\tb\"}", ":1: cache_salt: want null, or 1 to 256"},
	{"{\"tokens\": [1], \"cache_salt\": nullx}", ":1: cache_salt: want null, or 1 to 256"},
	{"{\"tokens\": [1], \"cache_salt\": [\"a\"]}", ":1: cache_salt: want null, or 1 to 256"},
	/* Read one way here and another by other JSON readers: refused. */
	{"{\"tokens\": [1], \"cache_salt\": \"a\", \"cache_salt\": \"b\"}", ":1: cache_salt: given twice"},
	{"{\"tokens\": [1], \"org\": \"a\", \"org\": \"b\"}", ":1: org: given twice"},
	{"{\"tokens\": [1], \"cache_salt\" \"k\"}", ":1: a key with no ':' after it"},
	{"{\"tokens\": [1], \"cache_\\u0073alt\": \"k\"}", ":1: a key written with an escape"},
	{"{\"tokens\": [1], \"x\": \"cache_salt\": \"k\"}", ":1: a ':' after a value"},
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

/* ---- Arrivals (workload_arrivals) ----------------------------------------------------------- */

/* @p text loaded into w (emptied first): 0, or the load's failure with err. */
static int
load_text(const char *name, const char *text)
{
	workload_free(&w);
	memset(&w, 0, sizeof(w));
	file_of(name, text);
	return workload_load(path, 512, 0, &w, err, sizeof(err));
}

/*
 * At the trace's times: request i arrives (ts_i - ts_0) ms x scale after
 * the first, exactly; equal timestamps arrive together (not a line going
 * backwards); n past the trace is cut to it, and nothing past n is written.
 * Catches: the scale dropped or inverted, ms taken for us (x1e3) or s, the
 * first timestamp not subtracted, equal timestamps taken for backwards
 * (<= for <), n not cut to the trace (out_ns written past it).
 */
Test(workload, trace_arrivals_are_the_timestamps_times_the_scale_after_the_first)
{
	static const struct {
		double scale;
		uint64_t want[4];
	} c[] = {
		{1.0, {0, 0, 250000000ull, 3000000000ull}},
		{0.5, {0, 0, 125000000ull, 1500000000ull}},
		{0.25, {0, 0, 62500000ull, 750000000ull}},
		{2.0, {0, 0, 500000000ull, 6000000000ull}},
	};
	uint64_t out[6];
	unsigned int i, k;

	cr_assert_eq(load_text("ts.jsonl", "{\"tokens\": [1], \"timestamp\": 1000}\n"
					   "{\"tokens\": [2], \"timestamp\": 1000}\n"
					   "\n"
					   "{\"tokens\": [3], \"timestamp\": 1250}\n"
					   "{\"tokens\": [4], \"timestamp\": 4000}\n"),
		     0, "%s", err);
	cr_assert_eq(w.n, 4);
	cr_assert_eq(w.ts_missing_line, 0);
	cr_assert_eq(w.ts_back_line, 0, "equal timestamps do not go backwards");
	for (i = 0; i < sizeof(c) / sizeof(c[0]); i++) {
		for (k = 0; k < 6; k++)
			out[k] = 0xdead;
		cr_assert_eq(workload_arrivals(&w, 6, c[i].scale, 0, 1, out, err, sizeof(err)), 0,
			     "scale %g: %s", c[i].scale, err);
		for (k = 0; k < 4; k++)
			cr_assert_eq(out[k], c[i].want[k], "scale %g, request %u: %lu ns, want %lu",
				     c[i].scale, k, (unsigned long)out[k], (unsigned long)c[i].want[k]);
		cr_assert(out[4] == 0xdead && out[5] == 0xdead, "written past the trace's 4 requests");
	}
	/* The first n only. */
	for (k = 0; k < 6; k++)
		out[k] = 0xdead;
	cr_assert_eq(workload_arrivals(&w, 3, 1.0, 0, 1, out, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(out[2], 250000000ull);
	cr_assert_eq(out[3], 0xdead, "written past n");
}

/* Gaps of out[0..n): their mean and standard deviation, in ns. */
static void
gaps_of(const uint64_t *out, size_t n, double *mean, double *sd)
{
	double s = 0, s2 = 0;
	size_t i;

	for (i = 1; i < n; i++) {
		double g = (double)(out[i] - out[i - 1]);

		s += g;
		s2 += g * g;
	}
	*mean = s / (double)(n - 1);
	*sd = sqrt(s2 / (double)(n - 1) - *mean * *mean);
}

/*
 * A Poisson process: the first at 0, never decreasing; the same seed the
 * same times, another seed other times; over 5,000 requests the mean gap
 * is 1/rate (within 5%: the mean of 4,999 exponential gaps is within 1.5%
 * one time in three) and the gaps spread as an exponential's do (standard
 * deviation near the mean, not a fixed period). The trace's timestamps are
 * not read: a trace without any is fine.
 * Catches: the seed ignored (a fixed or global state), the rate multiplied
 * instead of divided, s taken for ms, a fixed gap of 1/rate, a gap that can
 * be negative, the first arrival not at 0.
 */
Test(workload, poisson_arrivals_are_seeded_non_decreasing_and_one_over_the_rate_apart)
{
	enum { N = 5000 };
	static uint64_t a[N], b[N], c[N], d[N];
	double mean, sd;
	size_t i, differ = 0;

	cr_assert_eq(workload_generate(N, &w), 0);
	cr_assert_eq(workload_arrivals(&w, N, 1.0, 200.0, 7, a, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(workload_arrivals(&w, N, 1.0, 200.0, 7, b, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(workload_arrivals(&w, N, 1.0, 200.0, 8, c, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(memcmp(a, b, sizeof(a)), 0, "the same seed gave other times");
	cr_assert_eq(a[0], 0, "the first arrives at 0");
	cr_assert_eq(c[0], 0);
	for (i = 1; i < N; i++) {
		cr_assert_geq(a[i], a[i - 1], "request %zu arrives before %zu", i, i - 1);
		cr_assert_geq(c[i], c[i - 1], "request %zu arrives before %zu", i, i - 1);
		differ += a[i] != c[i];
	}
	cr_assert_gt(differ, N - 10, "seeds 7 and 8 gave %zu different times of %d", differ, N - 1);
	gaps_of(a, N, &mean, &sd);
	cr_assert(mean > 0.95 * 5e6 && mean < 1.05 * 5e6, "mean gap %.0f ns at 200/s, want 5e6", mean);
	cr_assert(sd > 0.9 * mean && sd < 1.1 * mean, "gaps' sd %.0f, mean %.0f: not exponential", sd,
		  mean);
	/* Ten times the rate: a tenth of the gap. */
	cr_assert_eq(workload_arrivals(&w, N, 1.0, 2000.0, 7, d, err, sizeof(err)), 0, "%s", err);
	gaps_of(d, N, &mean, &sd);
	cr_assert(mean > 0.95 * 5e5 && mean < 1.05 * 5e5, "mean gap %.0f ns at 2000/s, want 5e5", mean);
	/* No timestamps, or timestamps going backwards: Poisson does not read them. */
	cr_assert_eq(load_text("nots.jsonl", "{\"tokens\": [1]}\n{\"tokens\": [2], \"timestamp\": 9}\n"
					     "{\"tokens\": [3], \"timestamp\": 5}\n"),
		     0, "%s", err);
	cr_assert_eq(workload_arrivals(&w, 3, 1.0, 200.0, 7, d, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(memcmp(a, d, sizeof(uint64_t) * 3), 0, "the same seed, the same first times");
}

/*
 * Replayed at its times, a trace with a line lacking a timestamp is
 * refused naming that line (its line in the file: blank lines count, and
 * the first such line is named, not a later one); loading it is not.
 * Catches: the refusal dropped, the request's index named for the line
 * (3 here, the file's line is 4), the last missing line named for the first.
 */
Test(workload, trace_arrivals_refuse_a_line_without_a_timestamp_naming_it)
{
	uint64_t out[8];

	cr_assert_eq(load_text("missing.jsonl", "{\"tokens\": [1], \"timestamp\": 0}\n"
						"\n"
						"{\"tokens\": [2], \"timestamp\": 5}\n"
						"{\"tokens\": [3]}\n"
						"{\"tokens\": [4], \"timestamp\": 10}\n"
						"{\"tokens\": [5]}\n"),
		     0, "loading such a trace is fine: %s", err);
	cr_assert_eq(w.n, 5);
	cr_assert_eq(w.ts_missing_line, 4);
	err[0] = '\0';
	cr_assert_eq(workload_arrivals(&w, 5, 1.0, 0, 1, out, err, sizeof(err)), -1, "replayed without a time");
	cr_assert(strstr(err, "line 4 has no timestamp") != NULL, "%s", err);
}

/*
 * Replayed at its times, a trace whose timestamp goes back is refused
 * naming the first line that does (its file line), never reordered.
 * Catches: the refusal dropped, the check against the first request's
 * time instead of the line's before it (line 5 goes back from line 4 but
 * not from line 1), the index named for the line, the later line named.
 */
Test(workload, trace_arrivals_refuse_a_timestamp_going_backwards_naming_its_line)
{
	uint64_t out[8];

	cr_assert_eq(load_text("back.jsonl", "{\"tokens\": [1], \"timestamp\": 100}\n"
					     "{\"tokens\": [2], \"timestamp\": 200}\n"
					     "\n"
					     "{\"tokens\": [3], \"timestamp\": 300}\n"
					     "{\"tokens\": [4], \"timestamp\": 150}\n"
					     "{\"tokens\": [5], \"timestamp\": 50}\n"),
		     0, "loading such a trace is fine: %s", err);
	cr_assert_eq(w.ts_back_line, 5);
	cr_assert_eq(w.ts_missing_line, 0);
	cr_assert_eq(workload_arrivals(&w, 5, 1.0, 0, 1, out, err, sizeof(err)), -1, "replayed out of order");
	cr_assert(strstr(err, "line 5's timestamp is earlier than the line's before it") != NULL, "%s",
		  err);
}

/*
 * A span of a day at most (WL_MAX_ARRIVAL_NS): a day exactly is taken, a
 * millisecond more is refused, as is a day reached through the scale, or
 * through a slow Poisson process. A rate below 0 or a scale of 0 or below
 * (or NaN) is refused.
 * Catches: the bound dropped or off by the scale (compared before scaling),
 * < for <=, no check of rate and scale.
 */
Test(workload, arrivals_spanning_more_than_a_day_are_refused)
{
	uint64_t out[4];

	cr_assert_eq(load_text("day.jsonl", "{\"tokens\": [1], \"timestamp\": 5}\n"
					    "{\"tokens\": [2], \"timestamp\": 86400005}\n"),
		     0, "%s", err);
	cr_assert_eq(workload_arrivals(&w, 2, 1.0, 0, 1, out, err, sizeof(err)), 0, "a day: %s", err);
	cr_assert_eq(out[1], WL_MAX_ARRIVAL_NS);
	cr_assert_eq(workload_arrivals(&w, 2, 0.5, 0, 1, out, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(out[1], WL_MAX_ARRIVAL_NS / 2);
	err[0] = '\0';
	cr_assert_eq(workload_arrivals(&w, 2, 1.0000001, 0, 1, out, err, sizeof(err)), -1,
		     "scaled past a day");
	cr_assert(strstr(err, "request 2 would arrive 86400.0086 s after the first") != NULL &&
		      strstr(err, "more than a day") != NULL,
		  "%s", err);
	cr_assert_eq(load_text("day2.jsonl", "{\"tokens\": [1], \"timestamp\": 5}\n"
					     "{\"tokens\": [2], \"timestamp\": 86400006}\n"),
		     0, "%s", err);
	err[0] = '\0';
	cr_assert_eq(workload_arrivals(&w, 2, 1.0, 0, 1, out, err, sizeof(err)), -1, "a day and 1 ms");
	cr_assert(strstr(err, "would arrive 86400.001 s after the first: more than a day") != NULL,
		  "%s", err);
	/* At a tenth of the speed, 3 hours are 30. */
	cr_assert_eq(load_text("hours.jsonl", "{\"tokens\": [1], \"timestamp\": 0}\n"
					      "{\"tokens\": [2], \"timestamp\": 10800000}\n"),
		     0, "%s", err);
	cr_assert_eq(workload_arrivals(&w, 2, 1.0, 0, 1, out, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(workload_arrivals(&w, 2, 10.0, 0, 1, out, err, sizeof(err)), -1, "30 hours");
	/* One request a billion seconds: past a day at the second. */
	cr_assert_eq(workload_arrivals(&w, 2, 1.0, 1e-9, 1, out, err, sizeof(err)), -1,
		     "a Poisson gap of ~1e9 s");
	cr_assert(strstr(err, "more than a day") != NULL, "%s", err);
	/* Nothing that is not a rate or a scale. */
	cr_assert_eq(workload_arrivals(&w, 2, 1.0, -1.0, 1, out, err, sizeof(err)), -1, "rate -1");
	cr_assert_eq(workload_arrivals(&w, 2, 0.0, 0, 1, out, err, sizeof(err)), -1, "scale 0");
	cr_assert_eq(workload_arrivals(&w, 2, -1.0, 0, 1, out, err, sizeof(err)), -1, "scale -1");
	cr_assert_eq(workload_arrivals(&w, 2, 0.0 / 0.0, 0, 1, out, err, sizeof(err)), -1, "scale NaN");
	cr_assert_eq(workload_arrivals(&w, 2, 1.0, 0.0 / 0.0, 1, out, err, sizeof(err)), -1, "rate NaN");
}
