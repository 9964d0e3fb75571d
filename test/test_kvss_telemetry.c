/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The application's telemetry handlers, asked the way dpdk-telemetry.py asks
 * them: over the process's telemetry socket (SOCK_SEQPACKET in the runtime
 * directory), with EAL running and the commands registered by
 * kvss_telemetry_register(). The answers must be the lcores' stats summed,
 * the store's caches and prompts, and errors for bad parameters.
 */
#include <criterion/criterion.h>
#include <inttypes.h>
#include <stdarg.h>
#include <sys/socket.h>
#include <sys/un.h>

#include <rte_cycles.h>
#include <rte_eal.h>
#include <rte_lcore.h>
#include <rte_malloc.h>
#include <rte_version.h>

#include "args.h"
#include "eal_fixture.h"
#include "kvss.h"
#include "shard/shard_api.h"

/* The shard under test: the process's first. */
static struct kvss_shard_inst *const shard0 = &kvss_shards[0];

/* The shard's levels, as this test says they counted (telemetry.c's weak one replaced). */
static struct level_counter lv_counts[SHARD_LEVELS][8];
static unsigned int lv_n[SHARD_LEVELS];

unsigned int
shard_level_counters(enum shard_level_kind k, struct level_counter *c, const char **prefix)
{
	*prefix = k == SHARD_LEVEL_DISK ? "disk_" : "shared_";
	memcpy(c, lv_counts[k], lv_n[k] * sizeof(*c));
	return lv_n[k];
}

static int sock = -1;

static void
setup(void)
{
	char prefix[64];
	char *argv[] = {"test", "--no-pci", "--no-huge", "-m", "64", "--log-level", "lib.eal:error",
			"-l", "0", prefix, NULL};
	struct kvstore_params kp = {.num_caches = 1};
	struct sockaddr_un sun = {.sun_family = AF_UNIX};
	char info[1024];
	size_t sz;

	snprintf(prefix, sizeof(prefix), "--file-prefix=kvss_tel_%d", (int)getpid());
	cr_assert_geq(rte_eal_init((int)(sizeof(argv) / sizeof(argv[0])) - 1, argv), 0);
	kp.cache[0] = (struct kvstore_cache_params){64, 2, 1000};
	sz = kvstore_memsize(&kp);
	shard0->store_mem = rte_zmalloc("store", sz, 64);
	shard0->store = kvstore_init(shard0->store_mem, sz, &kp);
	cr_assert_not_null(shard0->store);
	cr_assert_eq(kvss_telemetry_register(), 0);
	snprintf(sun.sun_path, sizeof(sun.sun_path), "%s/dpdk_telemetry.v2", rte_eal_get_runtime_dir());
	sock = socket(AF_UNIX, SOCK_SEQPACKET, 0);
	cr_assert_geq(sock, 0);
	cr_assert_eq(connect(sock, (struct sockaddr *)&sun, sizeof(sun)), 0, "%s: %s", sun.sun_path,
		     strerror(errno));
	cr_assert_gt(read(sock, info, sizeof(info)), 0, "no greeting from the telemetry socket");
}

static void
teardown(void)
{
	if (sock >= 0)
		close(sock);
	rte_free(shard0->store_mem);
	shard0->store = NULL;
	test_eal_stop();
}

TestSuite(telemetry, .init = setup, .fini = teardown);

/* The answer @p a says @p s (a fragment of its JSON). */
#define assert_says(a, s) cr_assert_not_null(strstr((a), (s)), "%s", (a))

static const char *
ask(const char *cmd)
{
	static char buf[16384];
	ssize_t n;

	cr_assert_eq(write(sock, cmd, strlen(cmd)), (ssize_t)strlen(cmd));
	n = read(sock, buf, sizeof(buf) - 1);
	cr_assert_gt(n, 0);
	buf[n] = '\0';
	return buf;
}

/* Command @p cmd's answer says each fragment given (NULL after the last). */
static void
answers(const char *cmd, ...)
{
	const char *a = ask(cmd), *frag;
	va_list ap;

	va_start(ap, cmd);
	while ((frag = va_arg(ap, const char *)) != NULL)
		cr_assert_not_null(strstr(a, frag), "%s: no %s in %s", cmd, frag, a);
	va_end(ap);
}

Test(telemetry, stats_are_the_sum_of_every_lcore)
{
	const char *a;

	kvss.stats[0].rx_frames = 7;
	kvss.stats[3].rx_frames = 5;
	kvss.stats[3].drops[PROTO_R_BAD_MAGIC] = 3;
	kvss.stats[0].errors[PROTO_E_HOLE] = 2;
	shard0->driver_epoch = 0xE1;
	a = ask("/kvss/stats");
	assert_says(a, "\"rx_frames\":12");
	assert_says(a, "\"drop_bad_magic\":3");
	assert_says(a, "\"error_HOLE\":2");
	/* As the logs print epochs. */
	assert_says(a, "\"driver_epoch\":\"0x000000e1\"");
}

/* Store tokens @first.. @first + @n - 1 of prompt @id in @store's one cache as batch 1 (@B bytes each). */
static void
store_prompt_in(struct kvstore *store, uint32_t B, uint64_t id, uint32_t first, uint32_t n)
{
	struct proto_evict_entry e[8];
	uint8_t stream[8 * 64];
	uint32_t t;

	cr_assert_leq(n, 8);
	cr_assert_leq(B, 64);
	for (t = 0; t < n; t++)
		e[t] = (struct proto_evict_entry){id, first + t, 1};
	memset(stream, 0x5a, sizeof(stream));
	cr_assert_eq(kvstore_evict(store, 1, 1, (uint16_t)n, e, NULL, 0), 0);
	cr_assert_eq(kvstore_data(store, 1, 0, 0, n * B, stream, n * B), 0);
}

/* The same in shard 0's store (64 bytes a token). */
static void
store_prompt(uint64_t id, uint32_t first, uint32_t n)
{
	store_prompt_in(shard0->store, 64, id, first, n);
}

/* Every counter of each level reaches /kvss/stats under its level's prefix and group. */
Test(telemetry, the_levels_counters_are_shown)
{
	static const struct level_counter sh[] = {
		{"bad_", "payload_sum", 4, true}, {"bad_", "too_big", 2, true},
		{"bad_", "identity", 0, true},	  {"", "failed", 5, false},
		{"", "missing", 6, false},	  {"", "shed", 8, false}};
	static const struct level_counter disk[] = {{"", "puts", 3, false}, {"", "corrupt", 9, true}};
	const char *a;

	memcpy(lv_counts[SHARD_LEVEL_SHARED], sh, sizeof(sh));
	lv_n[SHARD_LEVEL_SHARED] = RTE_DIM(sh);
	memcpy(lv_counts[SHARD_LEVEL_DISK], disk, sizeof(disk));
	lv_n[SHARD_LEVEL_DISK] = RTE_DIM(disk);
	a = ask("/kvss/stats");
	assert_says(a, "\"shared_bad_payload_sum\":4");
	assert_says(a, "\"shared_bad_too_big\":2");
	assert_says(a, "\"shared_bad_identity\":0");
	assert_says(a, "\"shared_failed\":5");
	assert_says(a, "\"shared_missing\":6");
	assert_says(a, "\"shared_shed\":8");
	assert_says(a, "\"disk_puts\":3");
	assert_says(a, "\"disk_corrupt\":9");
}

Test(telemetry, caches_and_prompts_come_from_the_store)
{
	const char *a;

	store_prompt(0xAB, 10, 5);
	answers("/kvss/caches", "\"bytes_per_token\":[64]", "\"buffers\":[2]", "\"capacity_tokens\":[1000]",
		"\"stored_tokens\":[5]", "\"prompts\":[1]", NULL);
	answers("/kvss/prompt,0,0xab", "\"offset\":10", "\"tokens\":5", NULL);
	/* Bad parameters: no answer but null, and no crash. */
	a = ask("/kvss/prompt,zero,1");
	assert_says(a, "null");
	a = ask("/kvss/prompt");
	assert_says(a, "null");
}

/*
 * A process hosting two shards (role "all" with two models, say): the
 * telemetry thread is no shard's, so every shard is read, not the first
 * alone (it once showed shard 0's caches, prompts and driver epoch only).
 */
Test(telemetry, every_shard_of_the_process_is_shown)
{
	struct kvstore_params kp = {.num_caches = 1};
	struct kvss_shard_inst *two = &kvss_shards[1];
	size_t sz;

	kp.cache[0] = (struct kvstore_cache_params){32, 2, 500};
	sz = kvstore_memsize(&kp);
	two->store_mem = rte_zmalloc("store2", sz, 64);
	two->store = kvstore_init(two->store_mem, sz, &kp);
	cr_assert_not_null(two->store);
	kvss.num_shards = 2;
	two->cfg->id = 1; /* shard 1 of model 1: its own */
	two->cfg->model = 1;
	shard0->driver_epoch = 0x11;
	two->driver_epoch = 0x22;
	two->wafer_hops = 3;
	store_prompt(0xAB, 10, 5);
	store_prompt_in(two->store, 32, 0xCD, 4, 2);

	answers("/kvss/caches", "\"shard\":[0,1],\"model\":[0,1]", "\"bytes_per_token\":[64,32]",
		"\"capacity_tokens\":[1000,500]", "\"stored_tokens\":[5,2]", NULL);
	answers("/kvss/prompt,0,0xcd", "\"shard\":1,\"model\":1", "\"offset\":4", "\"tokens\":2", NULL);
	answers("/kvss/prompt,0,0xab", "\"shard\":0", NULL);
	answers("/kvss/stats", "\"driver_epochs\":[\"0x00000011\",\"0x00000022\"]", "\"wafer_hops\":3",
		"\"store_evicted_tokens\":7", NULL);

	kvss_telemetry_stores_gone(); /* both, as at the end of a run */
	rte_free(two->store_mem);
	two->store_mem = NULL;
	two->driver_epoch = 0;
	two->wafer_hops = 0;
	two->cfg->id = 0;
	two->cfg->model = 0;
	shard0->driver_epoch = 0;
	kvss.num_shards = 0;
}

/* At the end the stores go before EAL's telemetry thread does: a scrape then sees none. */
Test(telemetry, once_the_stores_are_gone_a_scrape_reads_none)
{
	const char *a;

	kvss.num_shards = 1; /* shard0 is shard 0 of this process */
	store_prompt(0xAB, 10, 5);
	a = ask("/kvss/stats");
	assert_says(a, "\"store_evicted_tokens\":5");
	kvss_telemetry_stores_gone();
	cr_assert_null(shard0->store);
	a = ask("/kvss/caches");
	assert_says(a, "\"cache_id\":[]");
	a = ask("/kvss/prompt,0,0xab");
	assert_says(a, "no such prompt");
	a = ask("/kvss/stats");
	assert_says(a, "\"store_evicted_tokens\":0");
}

/* Ids beyond 2^53 as kvss-dump --json writes them: decimal in, string out. */
Test(telemetry, prompt_ids_use_all_64_bits_and_nothing_else)
{
	static const char *const bad[] = {"/kvss/prompt,0,-1", "/kvss/prompt,0,",
					  "/kvss/prompt,0,018446744073709551615",
					  "/kvss/prompt,0,18446744073709551616", "/kvss/prompt,0,+1",
					  "/kvss/prompt,65536,1", "/kvss/prompt,-0,1", "/kvss/prompt, 0,1"};
	const char *a;
	unsigned int i;

	store_prompt(UINT64_MAX, 0, 3);
	a = ask("/kvss/prompt,0,18446744073709551615");
	assert_says(a, "\"prompt_id\":\"18446744073709551615\"");
	assert_says(a, "\"tokens\":3");
	a = ask("/kvss/prompt,0,0xffffffffffffffff");
	assert_says(a, "\"tokens\":3");
	/* A cache id past the store's caches reads nothing, not past its tables. */
	a = ask("/kvss/prompt,1,0xffffffffffffffff");
	assert_says(a, "no such prompt");
	/* A sign, an empty id, octal-looking or overflowing digits: refused. */
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		a = ask(bad[i]);
		cr_assert_not_null(strstr(a, "null"), "%s: %s", bad[i], a);
	}
}

Test(telemetry, lcores_say_their_role_and_cycles)
{
	const char *a;
	char hz[48];

	kvss.lcore_role[0] = KVSS_LCORE_INGEST;
	kvss.stats[0].busy_cycles = 1234;
	a = ask("/kvss/lcores");
	assert_says(a, "\"role\":[\"ingest\"]");
	assert_says(a, "\"busy_cycles\":[1234]");
	/* ... and how many make a second. */
	snprintf(hz, sizeof(hz), "\"tsc_hz\":%" PRIu64 "}", rte_get_tsc_hz());
	cr_assert_not_null(strstr(a, hz), "%s", a);
}

/*
 * The shard's time by role: its ingest and refill lcores' cycles summed, in
 * microseconds (exact: cycles past 2^64 / 10^6 do not wrap); a control
 * lcore's (role all: the driver's) are not the shard's.
 */
Test(telemetry, shard_time_is_its_lcores_cycles_by_role_in_microseconds)
{
	uint64_t hz = rte_get_tsc_hz();
	char want[96];
	const char *a;

	kvss.lcore_role[1] = KVSS_LCORE_INGEST;
	kvss.lcore_role[2] = KVSS_LCORE_REFILL;
	kvss.lcore_role[3] = KVSS_LCORE_CONTROL;
	kvss.stats[1].ingest_cycles = 3 * hz + hz / 2;
	kvss.stats[1].refill_cycles = hz / 4;
	kvss.stats[1].idle_cycles = 100000 * hz; /* 10^11 us: cycles x 10^6 would wrap */
	kvss.stats[2].refill_cycles = 2 * hz;
	kvss.stats[2].idle_cycles = hz;
	kvss.stats[3].ingest_cycles = kvss.stats[3].refill_cycles = kvss.stats[3].idle_cycles = 7 * hz;
	a = ask("/kvss/stats");
	assert_says(a, "\"ingest_busy_us\":3500000,");
	assert_says(a, "\"refill_busy_us\":2250000,");
	snprintf(want, sizeof(want), "\"idle_us\":%" PRIu64 ",", (uint64_t)100001 * 1000000);
	cr_assert_not_null(strstr(a, want), "%s", a);
}

/* What the process is: the release every tool's --version says, the commit
 * (the Makefile's, or "unknown"), the DPDK it runs on. */
Test(telemetry, build_says_release_commit_and_dpdk)
{
	const char *a = ask("/kvss/build");
	char want[96];

	snprintf(want, sizeof(want), "\"version\":\"%s\"", KVSS_RELEASE);
	cr_assert_not_null(strstr(a, want), "%s", a);
	assert_says(a, "\"commit\":\"");
	snprintf(want, sizeof(want), "\"dpdk\":\"%s\"", rte_version());
	cr_assert_not_null(strstr(a, want), "%s", a);
}
