/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The driver's verdict and summary (report.c) on the whole driver as the
 * program makes it (drv_fixture.h: EAL with one net_ring port,
 * config/all-in-one.cfg read for the driver role, kvss_driver_load() and
 * kvss_driver_init()). Each case sets the counters a run would have left,
 * in the driver (d->st) or in its emulator (the counters the driver copies
 * from it when it reports), and checks the exit status (docs/kvss.md,
 * "Exit status"), the shards' account against the driver's, and the
 * summary's JSON line as a script reads it.
 */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "drv_fixture.h"
#include "emulator/emulator_priv.h"
#include "faults.h"
#include "kvss.h"

#define CFG "config/all-in-one.cfg"

static struct drv *d;

static void
setup(void)
{
	d = test_driver_loaded(CFG, 0x0d0d0d0du);
	cr_assert_eq(kvss_driver_init(d), 0);
	/* One model, one shard of one cache, no second tier, no faults. */
	cr_assert_eq(d->nsh, 1);
	cr_assert_eq(kvss.cfg.driver.pc.model[0].num_caches, 1);
	cr_assert_not(drv_l2_model(0));
	cr_assert_not_null(d->emu);
	cr_assert_not(kvss_faults_on());
}

static void
teardown(void)
{
	struct kvss_faults_cfg off = {0};

	kvss_faults_init(&off, NULL);
	test_driver_stop(d);
}

TestSuite(drv_report, .init = setup, .fini = teardown);

/* The emulator's counters, which the driver copies when it reports. */
static struct emu_stats *
emu_st(void)
{
	return &d->emu->st;
}

/*
 * The order the status is decided in: a wrong byte first, whatever else
 * happened; then what could not run (a fatal of 2 is the configuration's);
 * then a file the command line asked for and did not get; then counted
 * failures. Each step adds a worse thing to the ones before.
 * Catches: a fatal or a missing plot hiding a wrong byte; a degraded run
 * reported as fine; the order changed.
 */
Test(drv_report, the_status_says_wrong_first_then_not_run_then_the_plot_then_degraded)
{
	cr_assert_eq(kvss_driver_status(d), KVSS_EXIT_OK, "nothing happened: 0");
	emu_st()->refill_timeouts = 1;
	cr_assert_eq(kvss_driver_status(d), KVSS_EXIT_DEGRADED);
	d->plot_failed = true;
	cr_assert_eq(kvss_driver_status(d), KVSS_EXIT_CONFIG, "asked for a plot, did not get it");
	d->fatal = 1;
	cr_assert_eq(kvss_driver_status(d), KVSS_EXIT_NOT_RUN);
	d->fatal = 2;
	cr_assert_eq(kvss_driver_status(d), KVSS_EXIT_CONFIG, "a fatal of 2 is the configuration's");
	emu_st()->verify_failures = 1;
	cr_assert_eq(kvss_driver_status(d), KVSS_EXIT_WRONG, "a wrong byte whatever else happened");
}

/* Catches: one of the four wrong things not making the run exit 1. */
Test(drv_report, each_wrong_thing_alone_exits_1)
{
	emu_st()->verify_failures = 1;
	cr_assert_eq(kvss_driver_status(d), KVSS_EXIT_WRONG, "a wrong byte");
	emu_st()->verify_failures = 0;
	emu_st()->expired_served = 1;
	cr_assert_eq(kvss_driver_status(d), KVSS_EXIT_WRONG, "an expired token served");
	emu_st()->expired_served = 0;
	d->st.over_capacity = 1;
	cr_assert_eq(kvss_driver_status(d), KVSS_EXIT_WRONG, "a cache over its capacity");
	d->st.over_capacity = 0;
	cr_assert_eq(kvss_driver_status(d), KVSS_EXIT_OK);
	/* The shard holds 5 tokens the driver does not account for. */
	d->sh[0].up = true;
	d->sh[0].stored[0] = 5;
	cr_assert_eq(kvss_driver_status(d), KVSS_EXIT_OK, "the account is checked when the run finished");
	d->finished = true;
	cr_assert_eq(kvss_driver_status(d), KVSS_EXIT_WRONG, "a wrong account");
}

/*
 * Every counted failure alone makes the run degraded (3), and none does
 * when faults were injected on purpose (--faults): then they are the
 * point of the run. The wrong things stay wrong under faults.
 * Catches: a failure the status forgets; --faults runs exiting 3; --faults
 * hiding a wrong byte.
 */
Test(drv_report, each_counted_failure_alone_degrades_unless_faults_were_injected)
{
	uint64_t *failures[] = {&d->st.errors, &emu_st()->refill_failures, &emu_st()->refill_timeouts,
				&d->st.rx_drops, &d->st.too_big, &d->st.lost_tokens, &d->st.resyncs,
				&d->st.shard_restarts, &d->st.shards_away};
	struct kvss_faults_cfg f;
	char err[128] = "";
	unsigned int i;

	for (i = 0; i < sizeof(failures) / sizeof(failures[0]); i++) {
		*failures[i] = 1;
		cr_assert_eq(kvss_driver_status(d), KVSS_EXIT_DEGRADED, "failure %u alone: degraded", i);
		*failures[i] = 0;
		cr_assert_eq(kvss_driver_status(d), KVSS_EXIT_OK, "failure %u gone: fine again", i);
	}
	cr_assert_eq(kvss_faults_parse("seed=7", &f, err, sizeof(err)), 0, "%s", err);
	kvss_faults_init(&f, kvss.pool);
	cr_assert(kvss_faults_on());
	for (i = 0; i < sizeof(failures) / sizeof(failures[0]); i++)
		*failures[i] = 1;
	cr_assert_eq(kvss_driver_status(d), KVSS_EXIT_OK, "faults injected: every failure expected");
	emu_st()->verify_failures = 1;
	cr_assert_eq(kvss_driver_status(d), KVSS_EXIT_WRONG, "a wrong byte is wrong under faults too");
}

/*
 * The shards' account: each shard that is up, each cache, what its last
 * STATUS said against what the driver accounts for; only once the run
 * finished (before, EVICTs are still on their way); never in open loop
 * (a recording: nothing is acknowledged). A shard whose model has no
 * second tier counts none of what its tier says it holds.
 * Catches: a shard that is down counted; an unfinished run judged; the
 * second tier's count of a model without one judged.
 */
Test(drv_report, the_account_counts_the_shards_up_and_only_a_finished_run)
{
	d->sh[0].stored[0] = 5;
	cr_assert_eq(drv_account_off(d, false), 0, "a shard that is down is not counted");
	d->sh[0].up = true;
	cr_assert_eq(drv_account_off(d, false), 5, "5 held, none accounted for");
	cr_assert_eq(drv_unaccounted(d, false), 0, "not finished: not judged");
	d->finished = true;
	cr_assert_eq(drv_unaccounted(d, false), 5);
	d->open_loop = true;
	cr_assert_eq(drv_unaccounted(d, false), 0, "open loop: nothing to hold the shards to");
	d->open_loop = false;
	d->sh[0].l2_stored[0] = 7;
	d->sh[0].l2_capacity[0] = 100;
	cr_assert_eq(drv_l2_account_off(d), 0, "a tier the model does not use is not counted");
}

/* ---- The summary as a script reads it ---- */

static char out[1 << 16];

/* The summary printed, its standard output in out[]; the JSON line returned. */
static const char *
summary_json_line(void)
{
	char path[] = "/tmp/kvss_drv_report_XXXXXX";
	int fd = mkstemp(path), saved;
	ssize_t n;
	char *j;

	cr_assert_geq(fd, 0);
	unlink(path);
	fflush(stdout);
	saved = dup(1);
	cr_assert_geq(saved, 0);
	cr_assert_geq(dup2(fd, 1), 0);
	kvss_driver_summary(d);
	fflush(stdout);
	cr_assert_geq(dup2(saved, 1), 0);
	close(saved);
	n = pread(fd, out, sizeof(out) - 1, 0);
	close(fd);
	cr_assert_gt(n, 0, "the summary printed");
	out[n] = '\0';
	j = strstr(out, "\n{\"requests\":");
	cr_assert_not_null(j, "a JSON line: %s", out);
	j++;
	cr_assert_not_null(strchr(j, '\n'), "the JSON line ends");
	*strchr(j, '\n') = '\0';
	return j;
}

/*
 * What a JSON parser needs of the line: brackets that close in order
 * outside strings, and every value a string, a number, true, false, null,
 * an object or an array (no nan, no inf, no empty value).
 */
static void
assert_json(const char *j)
{
	char stack[64];
	unsigned int depth = 0;
	bool in_str = false;
	const char *p;

	for (p = j; *p != '\0'; p++) {
		if (in_str) {
			if (*p == '\\')
				p++;
			else if (*p == '"')
				in_str = false;
			continue;
		}
		switch (*p) {
		case '"':
			in_str = true;
			break;
		case '{':
		case '[':
			cr_assert_lt(depth, sizeof(stack));
			stack[depth++] = *p == '{' ? '}' : ']';
			break;
		case '}':
		case ']':
			cr_assert_gt(depth, 0, "closes nothing at %ld: %s", (long)(p - j), j);
			cr_assert_eq(stack[--depth], *p, "closed out of order at %ld: %s", (long)(p - j), j);
			break;
		case ':':
		case ',': {
			const char *v = p + 1;

			cr_assert(*v == '"' || *v == '-' || (*v >= '0' && *v <= '9') || *v == '{' ||
					  *v == '[' || !strncmp(v, "true", 4) || !strncmp(v, "false", 5) ||
					  !strncmp(v, "null", 4) || (*p == ',' && *v == '"'),
				  "no value at %ld: %.40s", (long)(p - j), p);
			break;
		}
		default:
			break;
		}
		cr_assert(strncmp(p, "nan", 3) && strncmp(p, "inf", 3), "not a JSON number: %.40s", p);
	}
	cr_assert_not(in_str, "a string left open");
	cr_assert_eq(depth, 0, "left open: %s", j);
}

/* The summary printed: its JSON line, which must parse and say exit status @p status. */
static const char *
summary_saying(int status)
{
	const char *j = summary_json_line();
	char want[64];

	assert_json(j);
	snprintf(want, sizeof(want), "\"exit_status\":%d,", status);
	cr_assert_not_null(strstr(j, want), "%s", j);
	return j;
}

/*
 * A run stopped early with a timed-out refill and a shard away: the JSON
 * line parses, says the status the program exits with (3), and says null
 * for what was not checked or not measured (the account, a hit ratio
 * after a return that never came), not 0.
 * Catches: a summary that says one status and exits another; an
 * unchecked account printed as 0 (which reads "right"); a ratio of no
 * requests printed as a number.
 */
Test(drv_report, the_json_line_parses_and_says_the_exit_status_and_null_for_what_was_not_checked)
{
	const char *j;

	emu_st()->refill_timeouts = 1;
	d->st.shards_away = 1;
	cr_assert_eq(kvss_driver_status(d), KVSS_EXIT_DEGRADED);
	j = summary_saying(KVSS_EXIT_DEGRADED);
	cr_assert_not_null(strstr(j, "\"unaccounted_tokens\":null"), "%s", j);
	cr_assert_not_null(strstr(j, "\"hit_ratio_after_return\":null"), "%s", j);
	cr_assert_not_null(strstr(j, "\"finished\":false}"), "%s", j);
	cr_assert_not_null(strstr(out, "the shards hold what the driver accounts for: not checked"), "%s", out);
}

/* Finished with the account off: the number in the JSON, "NO" in the line, and exit 1. */
Test(drv_report, a_finished_run_with_the_account_off_says_by_how_much)
{
	const char *j;

	d->finished = true;
	d->sh[0].up = true;
	d->sh[0].stored[0] = 5;
	j = summary_saying(KVSS_EXIT_WRONG);
	cr_assert_not_null(strstr(j, "\"unaccounted_tokens\":5,"), "%s", j);
	cr_assert_not_null(strstr(out, "accounts for: NO (5 tokens off)"), "%s", out);
	cr_assert_not_null(strstr(out, "shard 0 of model 0 holds 5 tokens in cache 0; the driver "
				   "accounts for 0"), "%s", out);
}
