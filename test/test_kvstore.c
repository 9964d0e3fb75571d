/* SPDX-License-Identifier: BSD-3-Clause */
/* lib/kvstore: the storage rules, batches, refills, memory, and a model test. */
#include <criterion/criterion.h>
#include <errno.h>
#include <inttypes.h>
#include <time.h>

#include "kv_harness.h"

#define B0 32 /* bytes per token of cache 0 */
#define NB0 2

static struct kvstore *s;
static void *mem;
static uint64_t next_batch;

static void
make_store(uint64_t capacity)
{
	struct kvstore_params p = {.num_caches = 1};

	p.cache[0] = (struct kvstore_cache_params){B0, NB0, capacity};
	p.spare_tokens = 64;
	p.max_prompts = 64;
	s = kvh_create(&p, &mem);
	cr_assert_not_null(s);
	next_batch = 1;
}

static void
setup(void)
{
	make_store(1000);
}

static void
teardown(void)
{
	free(mem);
}

TestSuite(rules, .init = setup, .fini = teardown);

/* Evict one token of cache 0 as a whole batch with its data; return the code. */
static uint16_t
evict1(uint64_t prompt, uint32_t token, uint32_t version)
{
	struct proto_evict_entry e = {prompt, token, 7};
	uint16_t code = 0xffff;
	uint64_t b = next_batch++;

	cr_assert_eq(kvstore_evict(s, b, 1, 1, &e, &code, 0), 0);
	cr_assert_eq(kvh_send(s, b, 0, B0, 1, &prompt, &token, &version, 13), 0);
	cr_assert_eq(kvstore_batches_complete(s), b);
	return code;
}

/* Evict tokens [from, to] of @prompt, 8 per batch. */
static void
evict_range(uint64_t prompt, uint32_t from, uint32_t to)
{
	while (from <= to) {
		struct proto_evict_entry e[8];
		uint64_t pr[8];
		uint32_t tk[8], ver[8] = {0}, g = 0, i;
		uint16_t codes[8];
		uint64_t b = next_batch++;

		for (; g < 8 && from <= to; g++, from++) {
			e[g] = (struct proto_evict_entry){prompt, from, 1};
			pr[g] = prompt;
			tk[g] = from;
		}
		cr_assert_eq(kvstore_evict(s, b, 1, (uint16_t)g, e, codes, 0), 0);
		for (i = 0; i < g; i++)
			cr_assert_eq(codes[i], 0, "token %u: code %u", tk[i], codes[i]);
		cr_assert_eq(kvh_send(s, b, 0, B0, g, pr, tk, ver, 100), 0);
	}
	cr_assert_eq(kvstore_batches_complete(s), next_batch - 1);
}

static void
assert_range(uint64_t prompt, uint32_t offset, uint32_t n)
{
	uint32_t o, k;

	cr_assert_eq(kvstore_prompt(s, 0, prompt, &o, &k), 0, "prompt %" PRIu64 " missing", prompt);
	cr_assert_eq(o, offset, "offset %u, want %u", o, offset);
	cr_assert_eq(k, n, "tokens %u, want %u", k, n);
}

static int
del(uint64_t prompt, uint32_t a, uint32_t z)
{
	struct proto_delete d = {.prompt_id = prompt, .start_token_idx = a, .end_token_idx = z};

	return kvstore_delete(s, &d);
}

/* ---- The design's examples: tokens 100..150 of a prompt stored ---------- */

static void
store_100_150(void)
{
	evict_range(111, 100, 150);
	assert_range(111, 100, 51);
}

Test(rules, evicting_152_after_100_to_150_is_a_hole)
{
	store_100_150();
	cr_assert_eq(evict1(111, 152, 0), PROTO_E_HOLE);
	assert_range(111, 100, 51);
}

Test(rules, deleting_only_125_is_not_a_suffix)
{
	store_100_150();
	cr_assert_eq(del(111, 125, 125), PROTO_E_DELETE_NOT_RIGHT);
	assert_range(111, 100, 51);
	cr_assert_eq(kvh_check_token(s, 0, B0, 111, 125, 0), 0);
}

Test(rules, deleting_100_alone_would_shrink_on_the_left)
{
	store_100_150();
	cr_assert_eq(del(111, 100, 100), PROTO_E_DELETE_NOT_RIGHT);
	assert_range(111, 100, 51);
}

Test(rules, evicting_99_would_grow_on_the_left)
{
	store_100_150();
	cr_assert_eq(evict1(111, 99, 0), PROTO_E_LEFT_GROWTH);
	assert_range(111, 100, 51);
}

Test(rules, evicting_151_and_deleting_150_are_fine)
{
	store_100_150();
	cr_assert_eq(evict1(111, 151, 0), 0);
	assert_range(111, 100, 52);
	cr_assert_eq(del(111, 151, 151), 0);
	cr_assert_eq(del(111, 150, 150), 0);
	assert_range(111, 100, 50);
	cr_assert_eq(kvh_check_token(s, 0, B0, 111, 149, 0), 0);
}

Test(rules, evicting_125_overwrites_in_place)
{
	store_100_150();
	cr_assert_eq(kvh_check_token(s, 0, B0, 111, 125, 0), 0);
	cr_assert_eq(evict1(111, 125, 5), 0);
	assert_range(111, 100, 51);
	cr_assert_eq(kvh_check_token(s, 0, B0, 111, 125, 5), 0);
	cr_assert_eq(kvh_check_token(s, 0, B0, 111, 124, 0), 0);
	cr_assert_eq(kvh_check_token(s, 0, B0, 111, 126, 0), 0);
}

/* ---- Delete errors, checked in the protocol's order ---------------------- */

Test(rules, delete_errors_leave_the_store_unchanged)
{
	struct proto_delete d = {.prompt_id = 111, .start_token_idx = 150, .end_token_idx = 150,
				 .cache_id = 1};

	store_100_150();
	cr_assert_eq(kvstore_delete(s, &d), PROTO_E_BAD_CACHE);
	cr_assert_eq(del(999, 0, 0), PROTO_E_UNKNOWN_PROMPT);
	cr_assert_eq(del(0, 0, 0), PROTO_E_UNKNOWN_PROMPT);
	cr_assert_eq(del(111, 151, 150), PROTO_E_MALFORMED);
	cr_assert_eq(del(111, 99, 150), PROTO_E_RANGE);
	cr_assert_eq(del(111, 140, 149), PROTO_E_DELETE_NOT_RIGHT);
	assert_range(111, 100, 51);
	cr_assert_eq(kvh_check_token(s, 0, B0, 111, 150, 0), 0);
}

/* Version 2: a DELETE of [k, end] removes everything from k on, wherever the
 * prompt now ends (v1 refused an end past the last token with RANGE). */
Test(rules, a_delete_past_the_end_removes_the_suffix)
{
	store_100_150();
	cr_assert_eq(del(111, 140, 151), 0);
	assert_range(111, 100, 40);
	cr_assert_eq(del(111, 145, 4000), 0); /* past what it holds: nothing, no error */
	assert_range(111, 100, 40);
	cr_assert_eq(del(111, 100, 4000), 0);
	cr_assert_neq(kvstore_prompt(s, 0, 111, &(uint32_t){0}, &(uint32_t){0}), 0);
}

Test(rules, a_prompt_deleted_to_zero_is_forgotten)
{
	struct kvstore_cache_stats st;
	uint32_t o, n;

	store_100_150();
	cr_assert_eq(del(111, 100, 150), 0);
	cr_assert_eq(kvstore_prompt(s, 0, 111, &o, &n), -ENOENT);
	kvstore_cache_stats(s, 0, &st);
	cr_assert_eq(st.prompts, 0);
	cr_assert_eq(st.stored_tokens, 0);
	/* A new prompt may now start anywhere under the same id. */
	cr_assert_eq(evict1(111, 7, 0), 0);
	assert_range(111, 7, 1);
}

Test(rules, prompt_zero_consumes_its_bytes_and_stores_nothing)
{
	struct kvstore_cache_stats st;

	cr_assert_eq(evict1(0, 5, 0), 0);
	kvstore_cache_stats(s, 0, &st);
	cr_assert_eq(st.prompts, 0);
	cr_assert_eq(st.stored_tokens, 0);
	cr_assert_eq(kvstore_batches_complete(s), 1);
}

/* ---- Fragments ------------------------------------------------------------ */

Test(rules, a_token_is_readable_only_when_all_its_bytes_are_there)
{
	struct proto_evict_entry e[3] = {{42, 0, 1}, {42, 1, 1}, {42, 2, 1}};
	uint8_t stream[3 * B0];
	uint32_t o, n, t;

	for (t = 0; t < 3; t++)
		kvh_fill(42, t, 0, 0, stream + t * B0, B0);
	cr_assert_eq(kvstore_evict(s, 1, 1, 3, e, NULL, 0), 0);
	/* Out of order, one fragment spanning two tokens, one repeated. */
	cr_assert_eq(kvstore_data(s, 1, 0, 40, 3 * B0, stream + 40, 56), 0);
	cr_assert_eq(kvstore_data(s, 1, 0, 40, 3 * B0, stream + 40, 56), 0);
	cr_assert_eq(kvstore_batches_complete(s), 0);
	cr_assert_eq(kvstore_prompt(s, 0, 42, &o, &n), -ENOENT,
		     "nothing readable before the batch completes");
	cr_assert_eq(kvstore_data(s, 1, 0, 0, 3 * B0, stream, 20), 0);
	cr_assert_eq(kvstore_batches_complete(s), 0);
	cr_assert_eq(kvstore_data(s, 1, 0, 20, 3 * B0, stream + 20, 20), 0);
	cr_assert_eq(kvstore_batches_complete(s), 1);
	assert_range(42, 0, 3);
	for (t = 0; t < 3; t++)
		cr_assert_eq(kvh_check_token(s, 0, B0, 42, t, 0), 0);
	/* Late duplicates of a complete batch are refused, not stored. */
	cr_assert_eq(kvstore_data(s, 1, 0, 0, 3 * B0, stream, 20), -ESTALE);
}

Test(rules, data_errors_are_reported_and_change_nothing)
{
	struct proto_evict_entry e = {42, 0, 1};
	uint8_t buf[2 * B0] = {0};

	cr_assert_eq(kvstore_data(s, 1, 0, 0, B0, buf, B0), -EAGAIN); /* EVICT not seen */
	cr_assert_eq(kvstore_evict(s, 1, 1, 1, &e, NULL, 0), 0);
	cr_assert_eq(kvstore_data(s, 1, 1, 0, B0, buf, B0), -EINVAL);	   /* no such cache */
	cr_assert_eq(kvstore_data(s, 1, 0, 0, 2 * B0, buf, B0), -EINVAL); /* wrong stream_len */
	cr_assert_eq(kvstore_data(s, 1, 0, 8, B0, buf, B0), -EINVAL);	   /* past the stream */
	cr_assert_eq(kvstore_batches_complete(s), 0);
}

/* ---- Batches ---------------------------------------------------------------- */

Test(rules, batches_complete_in_order)
{
	struct proto_evict_entry e1 = {1, 0, 1}, e2 = {2, 0, 1};
	uint64_t p1 = 1, p2 = 2;
	uint32_t t0 = 0, v0 = 0;

	cr_assert_eq(kvstore_evict(s, 1, 1, 1, &e1, NULL, 0), 0);
	cr_assert_eq(kvstore_evict(s, 3, 1, 1, &e2, NULL, 0), -EINVAL); /* not the next */
	cr_assert_eq(kvstore_evict(s, 2, 1, 1, &e2, NULL, 0), 0);
	cr_assert_eq(kvh_send(s, 2, 0, B0, 1, &p2, &t0, &v0, 64), 0);
	cr_assert_eq(kvstore_batches_complete(s), 0, "batch 2 must wait for batch 1");
	cr_assert_eq(kvh_send(s, 1, 0, B0, 1, &p1, &t0, &v0, 64), 0);
	cr_assert_eq(kvstore_batches_complete(s), 2);
	assert_range(2, 0, 1);
}

Test(rules, a_batch_with_the_wrong_number_of_caches_completes_empty)
{
	struct proto_evict_entry e[2] = {{1, 0, 1}, {1, 0, 1}};

	cr_assert_eq(kvstore_evict(s, 1, 2, 1, e, NULL, 0), -EPROTO);
	cr_assert_eq(kvstore_batches_complete(s), 1);
	next_batch = 2;
	cr_assert_eq(evict1(5, 0, 0), 0);
}

Test(rules, too_many_open_batches_is_busy)
{
	struct proto_evict_entry e = {1, 0, 1};
	uint64_t b;

	for (b = 1; b <= 64; b++) {
		e.token_idx = (uint32_t)(b - 1);
		cr_assert_eq(kvstore_evict(s, b, 1, 1, &e, NULL, 0), 0);
	}
	e.token_idx = 64;
	cr_assert_eq(kvstore_evict(s, 65, 1, 1, &e, NULL, 0), -EBUSY);
}

/* Two looks at the store's room (kvstore_room) equal field by field. */
static bool
room_eq(const struct kvstore_room *a, const struct kvstore_room *b)
{
	return a->gen == b->gen && a->oldest_reader == b->oldest_reader;
}

/*
 * What a refused EVICT waits for changes the store's room, and nothing
 * else does. The window: a refusal, again, leaves it as it was; data
 * completing the oldest batch changes it, and the EVICT then runs.
 * Catches: a path that makes room without saying so (a shard would not
 * try its waiting EVICT again until the space timeout, then refuse it).
 */
Test(rules, a_refused_evict_s_room_changes_when_the_window_moves)
{
	struct proto_evict_entry e = {1, 0, 1};
	struct kvstore_room r0, r1;
	uint64_t b, pr = 1;
	uint32_t tk = 0, ver = 0;

	for (b = 1; b <= 64; b++) {
		e.token_idx = (uint32_t)(b - 1);
		cr_assert_eq(kvstore_evict(s, b, 1, 1, &e, NULL, 0), 0);
	}
	e.token_idx = 64;
	kvstore_room(s, &r0);
	cr_assert_eq(kvstore_evict(s, 65, 1, 1, &e, NULL, 0), -EBUSY);
	cr_assert_eq(kvstore_evict(s, 65, 1, 1, &e, NULL, 0), -EBUSY);
	kvstore_room(s, &r1);
	cr_assert(room_eq(&r0, &r1), "a refusal makes no room");
	cr_assert_eq(kvh_send(s, 1, 0, B0, 1, &pr, &tk, &ver, 13), 0);
	kvstore_room(s, &r1);
	cr_assert_not(room_eq(&r0, &r1), "the oldest batch completed");
	cr_assert_eq(kvstore_evict(s, 65, 1, 1, &e, NULL, 0), 0);
}

/*
 * Capacity, with a refill in flight holding a retired slot (so the
 * oldest reader is in the look before and after): a DELETE frees its
 * count at once, its slot later, and the look changes by the DELETE alone.
 * Catches: a DELETE that does not say so (the reader's part of the look
 * would not have moved either).
 */
Test(rules, a_refused_evict_s_room_changes_with_a_delete_while_refills_hold_slots)
{
	struct proto_evict_entry e = {3, 0, 1};
	struct proto_delete d = {.prompt_id = 2, .start_token_idx = 0, .end_token_idx = 0};
	struct proto_refill_chunk ch = {1, 0, 1};
	struct kvstore_room r0, r1;
	struct kvstore_refill *rf;
	uint16_t code;

	teardown();
	make_store(2);
	evict1(1, 0, 1);
	evict1(2, 0, 1);
	rf = kvstore_refill_begin(s, 0, &ch, 1, &code);
	cr_assert_not_null(rf, "code %u", code);
	evict1(1, 0, 2); /* an overwrite: the old slot waits for the refill */
	kvstore_room(s, &r0);
	cr_assert_neq(r0.oldest_reader, 0, "a retired slot waits for the refill");
	cr_assert_eq(kvstore_evict(s, next_batch, 1, 1, &e, NULL, 0), -ENOSPC);
	cr_assert_eq(kvstore_delete(s, &d), 0);
	kvstore_room(s, &r1);
	cr_assert_eq(r1.oldest_reader, r0.oldest_reader, "the same refill holds the oldest slot");
	cr_assert_not(room_eq(&r0, &r1), "a DELETE made room");
	cr_assert_eq(kvstore_evict(s, next_batch, 1, 1, &e, NULL, 0), 0);
	kvstore_refill_end(rf);
}

/*
 * Slots, as a shard takes the look: before its try. A store whose every
 * slot is taken or retired (a refill holds the retired ones) refuses an
 * overwrite (it needs a slot, not a count); the refill ends after the try
 * and before the next look, as it may on the refill lcore. The look
 * differs from the one taken before the try, and the EVICT runs.
 * Catches: a reader's end lost between a try and its look (the EVICT would
 * wait for nothing until the space timeout).
 */
Test(rules, a_refused_evict_s_room_changes_when_a_refill_ends_after_the_try)
{
	struct kvstore_params p = {.num_caches = 1, .spare_tokens = 4, .max_prompts = 64};
	struct proto_refill_chunk ch = {1, 0, 1};
	struct proto_evict_entry e = {1, 4, 1};
	struct kvstore_cache_stats st;
	struct kvstore_room r0, r1;
	struct kvstore_refill *rf;
	uint16_t code;
	uint32_t t;

	teardown();
	p.cache[0] = (struct kvstore_cache_params){B0, NB0, 60};
	s = kvh_create(&p, &mem);
	cr_assert_not_null(s);
	next_batch = 1;
	for (t = 0; t < 60; t++)
		evict1(1, t, 1);
	rf = kvstore_refill_begin(s, 0, &ch, 1, &code);
	cr_assert_not_null(rf, "code %u", code);
	for (t = 0; t < 4; t++)
		evict1(1, t, 2); /* overwrites: their old slots wait for the refill */
	kvstore_cache_stats(s, 0, &st);
	cr_assert_eq(st.free_slots, 0, "every slot taken or retired (%" PRIu64 " limbo)", st.limbo_slots);
	kvstore_room(s, &r0);
	cr_assert_eq(kvstore_evict(s, next_batch, 1, 1, &e, NULL, 0), -ENOSPC, "no slot for the overwrite");
	kvstore_refill_end(rf);
	kvstore_room(s, &r1);
	cr_assert_not(room_eq(&r0, &r1), "the refill ended: its slots may be reused");
	cr_assert_eq(kvstore_evict(s, next_batch, 1, 1, &e, NULL, 0), 0);
}

static uint32_t lost_first[256], lost_count[256];
static unsigned int nlost;

/* Version 2: one record per cut, a range. */
static void
on_lost(void *arg, uint16_t cache_id, uint64_t prompt_id, uint32_t first, uint32_t count)
{
	(void)arg;
	cr_assert_eq(cache_id, 0);
	cr_assert_eq(prompt_id, 111);
	lost_first[nlost] = first;
	lost_count[nlost++] = count;
}

Test(rules, a_lost_token_truncates_its_prompt_there)
{
	struct proto_evict_entry e[3] = {{111, 151, 1}, {111, 152, 1}, {111, 153, 1}};
	uint8_t tok[B0];
	unsigned int i;

	store_100_150();
	cr_assert_eq(kvstore_evict(s, next_batch, 1, 3, e, NULL, 0), 0);
	/* Token 151 arrives, 152 only half, 153 whole. */
	kvh_fill(111, 151, 0, 0, tok, B0);
	cr_assert_eq(kvstore_data(s, next_batch, 0, 0, 3 * B0, tok, B0), 0);
	kvh_fill(111, 152, 0, 0, tok, B0);
	cr_assert_eq(kvstore_data(s, next_batch, 0, B0, 3 * B0, tok, B0 / 2), 0);
	kvh_fill(111, 153, 0, 0, tok, B0);
	cr_assert_eq(kvstore_data(s, next_batch, 0, 2 * B0, 3 * B0, tok, B0), 0);
	cr_assert_eq(kvstore_batches_complete(s), next_batch - 1);
	cr_assert_eq(kvstore_oldest_open(s), next_batch);
	nlost = 0;
	cr_assert_eq(kvstore_batch_lose(s, next_batch, on_lost, NULL), 2);
	cr_assert_eq(nlost, 1);
	cr_assert_eq(lost_first[0], 152);
	cr_assert_eq(lost_count[0], 2);
	cr_assert_eq(kvstore_batches_complete(s), next_batch);
	next_batch++;
	assert_range(111, 100, 52);
	for (i = 100; i <= 151; i++)
		cr_assert_eq(kvh_check_token(s, 0, B0, 111, i, 0), 0);
	/* Version 2: EVICTs from the cut on are refused until the driver, who
	 * heard of the loss, deletes from there (an EVICT it sent before it
	 * heard must not grow the prompt behind its back)... */
	cr_assert_eq(evict1(111, 152, 0), PROTO_E_HOLE);
	cr_assert_eq(evict1(111, 140, 2), 0); /* an overwrite before the cut is fine */
	/* ...a DELETE that starts after the cut does not clear the mark... */
	cr_assert_eq(del(111, 153, 200), 0);
	cr_assert_eq(evict1(111, 152, 0), PROTO_E_HOLE);
	/* ...one from the column that holds it does. */
	cr_assert_eq(del(111, 144, 200), 0);
	assert_range(111, 100, 44);
	evict_range(111, 144, 152);
	assert_range(111, 100, 53);
}

/* Version 2: a loss of a prompt's first token leaves it known and empty, so
 * that an EVICT still in flight cannot create it again at an offset the
 * driver does not know; the driver's DELETE forgets it. */
Test(rules, a_prompt_emptied_by_a_loss_stays_known_until_deleted)
{
	struct proto_evict_entry e[2] = {{111, 0, 1}, {111, 1, 1}};
	uint32_t o = 0, n = 9;

	cr_assert_eq(kvstore_evict(s, next_batch, 1, 2, e, NULL, 0), 0);
	nlost = 0;
	cr_assert_eq(kvstore_batch_lose(s, next_batch++, on_lost, NULL), 2);
	cr_assert_eq(nlost, 1);
	cr_assert_eq(lost_first[0], 0);
	cr_assert_eq(lost_count[0], 2);
	/* Absent to a reader, but known: not created again at token 2. */
	cr_assert_neq(kvstore_prompt(s, 0, 111, &o, &n), 0);
	cr_assert_eq(evict1(111, 2, 0), PROTO_E_HOLE);
	cr_assert_eq(evict1(111, 0, 0), PROTO_E_HOLE);
	cr_assert_eq(del(111, 0, 63), 0);
	cr_assert_neq(kvstore_prompt(s, 0, 111, &o, &n), 0, "deleted: forgotten");
	cr_assert_eq(evict1(111, 0, 0), 0);
	assert_range(111, 0, 1);
}

Test(rules, a_lost_overwrite_keeps_neither_old_nor_new_bytes)
{
	struct proto_evict_entry e = {111, 120, 1};
	struct kvstore_cache_stats st;

	store_100_150();
	cr_assert_eq(kvstore_evict(s, next_batch, 1, 1, &e, NULL, 0), 0);
	nlost = 0;
	cr_assert_eq(kvstore_batch_lose(s, next_batch, on_lost, NULL), 31);
	cr_assert_eq(nlost, 1);
	cr_assert_eq(lost_first[0], 120);
	cr_assert_eq(lost_count[0], 31);
	next_batch++;
	assert_range(111, 100, 20);
	kvstore_cache_stats(s, 0, &st);
	cr_assert_eq(st.stored_tokens, 20);
}

Test(rules, only_the_oldest_open_batch_can_be_lost)
{
	struct proto_evict_entry e = {1, 0, 1};

	cr_assert_eq(kvstore_batch_lose(s, 1, NULL, NULL), -EINVAL);
	cr_assert_eq(kvstore_evict(s, 1, 1, 1, &e, NULL, 0), 0);
	e.token_idx = 1;
	cr_assert_eq(kvstore_evict(s, 2, 1, 1, &e, NULL, 0), 0);
	cr_assert_eq(kvstore_batch_lose(s, 2, NULL, NULL), -EINVAL);
	cr_assert_eq(kvstore_batch_lose(s, 1, NULL, NULL), 2); /* token 0, and 1 after it */
}

/* ---- Capacity ---------------------------------------------------------------- */

Test(rules, an_evict_past_capacity_is_refused_whole)
{
	struct proto_evict_entry e[3] = {{9, 0, 1}, {9, 1, 1}, {9, 2, 1}};
	uint16_t codes[3];
	struct kvstore_cache_stats st;

	free(mem);
	make_store(10);
	evict_range(8, 0, 7);
	cr_assert_eq(kvstore_evict(s, next_batch, 1, 3, e, codes, 0), -ENOSPC);
	kvstore_cache_stats(s, 0, &st);
	cr_assert_eq(st.stored_tokens, 8);
	cr_assert_eq(st.prompts, 1);
	/* After the timeout: store what fits, NO_SPACE for the rest. */
	cr_assert_eq(kvstore_evict(s, next_batch, 1, 3, e, codes, KVSTORE_EVICT_FORCE), 0);
	cr_assert_eq(codes[0], 0);
	cr_assert_eq(codes[1], 0);
	cr_assert_eq(codes[2], PROTO_E_NO_SPACE);
	kvstore_cache_stats(s, 0, &st);
	cr_assert_eq(st.stored_tokens, 10);
	{
		uint64_t pr[3] = {9, 9, 9};
		uint32_t tk[3] = {0, 1, 2}, ver[3] = {0, 0, 0};

		cr_assert_eq(kvh_send(s, next_batch, 0, B0, 3, pr, tk, ver, 50), 0);
		cr_assert_eq(kvstore_batches_complete(s), next_batch);
		next_batch++;
	}
	assert_range(9, 0, 2);
	cr_assert_eq(kvh_check_token(s, 0, B0, 9, 1, 0), 0);
	/* Overwrites need no capacity. */
	cr_assert_eq(evict1(8, 3, 2), 0);
	cr_assert_eq(kvh_check_token(s, 0, B0, 8, 3, 2), 0);
}

Test(rules, memsize_is_slots_plus_metadata_and_too_little_memory_is_refused)
{
	struct kvstore_params p = {.num_caches = 2};
	size_t sz, meta;
	void *m = NULL;

	p.cache[0] = (struct kvstore_cache_params){4096, 4, 100000};
	p.cache[1] = (struct kvstore_cache_params){1024, 1, 50000};
	sz = kvstore_memsize(&p);
	meta = kvstore_meta_size(&p);
	cr_assert_gt(sz, meta);
	/*
	 * Slots: (capacity + spare) rounded up to blocks of 64, each block 64 x B
	 * bytes plus one cache line; spare is max(capacity / 256, 512) = 512.
	 */
	cr_assert_eq(sz - meta, (100512ull + 32) / 64 * (64 * 4096 + 64) +
					(50512ull + 48) / 64 * (64 * 1024 + 64));
	/* Metadata: under 50 bytes per token of capacity (1.2% of 4 KiB): 36
	 * for the tables, the limbo ring, prompts and batches, 12 for each
	 * slot's version (the slot an overwrite replaced and when: every
	 * buffer of a refill reads one version). */
	cr_assert_lt(meta, 50 * 150000, "metadata %zu bytes", meta);
	cr_assert_eq(posix_memalign(&m, 64, sz), 0);
	cr_assert_null(kvstore_init(m, sz - 1, &p));
	cr_assert_eq(errno, ENOSPC);
	cr_assert_not_null(kvstore_init(m, sz, &p));
	p.cache[1].bytes_per_token = 1023; /* not a multiple of 2 buffers */
	p.cache[1].num_buffers = 2;
	cr_assert_eq(kvstore_memsize(&p), 0);
	cr_assert_eq(errno, EINVAL);
	free(m);
}

/* ---- Refills ------------------------------------------------------------------ */

static void
check_refill(const struct proto_refill_chunk *ch, unsigned int n, uint32_t frame)
{
	uint16_t code;
	struct kvstore_refill *r = kvstore_refill_begin(s, 0, ch, n, &code);
	uint32_t b, i, k, tokens = 0;
	uint8_t *got, want[B0];

	cr_assert_not_null(r, "refill refused: code %u", code);
	for (i = 0; i < n; i++)
		tokens += ch[i].num_tokens;
	cr_assert_eq(kvstore_refill_tokens(r), tokens);
	cr_assert_eq(kvstore_refill_buffer_len(r), (uint64_t)tokens * (B0 / NB0));
	got = malloc((size_t)tokens * B0);
	for (b = 0; b < NB0; b++) {
		uint32_t t = 0;

		cr_assert_eq(kvh_gather(r, (uint16_t)b, frame, got), (uint64_t)tokens * (B0 / NB0));
		for (i = 0; i < n; i++)
			for (k = 0; k < ch[i].num_tokens; k++, t++) {
				kvh_fill(ch[i].prompt_id, ch[i].start_token_idx + k, 0, 0, want, B0);
				cr_assert_arr_eq(got + (size_t)t * (B0 / NB0),
						 want + b * (B0 / NB0), B0 / NB0,
						 "buffer %u token %u", b, t);
			}
	}
	kvstore_refill_end(r);
	free(got);
}

Test(rules, a_refill_glues_its_chunks_buffer_by_buffer)
{
	struct proto_refill_chunk ch[3] = {{111, 100, 3}, {222, 40, 37}, {111, 110, 40}};

	store_100_150();
	evict_range(222, 0, 99);
	check_refill(ch, 3, 1 << 20);
	check_refill(ch, 3, 40); /* small frames: segments split mid-token */
	check_refill(ch, 1, 7);
}

Test(rules, consecutive_tokens_come_out_as_few_segments)
{
	struct proto_refill_chunk ch = {222, 0, 64};
	struct kvstore_refill_pos pos;
	struct kvstore_seg segs[64];
	uint16_t code;
	struct kvstore_refill *r;

	evict_range(222, 0, 63);
	r = kvstore_refill_begin(s, 0, &ch, 1, &code);
	cr_assert_not_null(r);
	memset(&pos, 0, sizeof(pos));
	/* One prompt evicted alone fills one block: one segment per buffer. */
	cr_assert_eq(kvstore_refill_next(r, 1, &pos, 1 << 20, segs, 64), 1);
	cr_assert_eq(segs[0].len, 64 * B0 / NB0);
	kvstore_refill_end(r);
}

Test(rules, refills_of_what_is_not_stored_are_refused_with_a_code)
{
	struct proto_refill_chunk ch[2] = {{111, 100, 10}, {111, 145, 10}};
	struct proto_refill_chunk unknown = {7, 0, 1}, left = {111, 99, 2};
	uint16_t code;

	store_100_150();
	cr_assert_null(kvstore_refill_begin(s, 0, ch, 2, &code));
	cr_assert_eq(code, PROTO_E_RANGE);
	cr_assert_null(kvstore_refill_begin(s, 0, &left, 1, &code));
	cr_assert_eq(code, PROTO_E_RANGE);
	cr_assert_null(kvstore_refill_begin(s, 0, &unknown, 1, &code));
	cr_assert_eq(code, PROTO_E_UNKNOWN_PROMPT);
	cr_assert_null(kvstore_refill_begin(s, 3, ch, 1, &code));
	cr_assert_eq(code, PROTO_E_BAD_CACHE);
	/* Tokens of an open batch are not readable yet. */
	{
		struct proto_evict_entry e = {111, 151, 1};
		struct proto_refill_chunk c151 = {111, 150, 2};

		cr_assert_eq(kvstore_evict(s, next_batch, 1, 1, &e, NULL, 0), 0);
		cr_assert_null(kvstore_refill_begin(s, 0, &c151, 1, &code));
		cr_assert_eq(code, PROTO_E_RANGE);
	}
}

/* Open batch @b: entries (prompt, token) of cache 0, every one accepted. */
static void
evict_open(uint64_t b, const uint64_t *pr, const uint32_t *tk, uint16_t g)
{
	struct proto_evict_entry e[8];
	uint16_t codes[8], i;

	for (i = 0; i < g; i++)
		e[i] = (struct proto_evict_entry){pr[i], tk[i], 1};
	cr_assert_eq(kvstore_evict(s, b, 1, g, e, codes, 0), 0);
	for (i = 0; i < g; i++)
		cr_assert_eq(codes[i], 0, "batch %" PRIu64 " entry %u: code %u", b, i, codes[i]);
}

/* Refill chunk (prompt, a, n): the code, and when 0, each token's version checked. */
static uint16_t
refill_ver(uint64_t prompt, uint32_t a, uint32_t n, const uint32_t *ver)
{
	struct proto_refill_chunk ch = {prompt, a, n};
	uint8_t got[16 * B0 / NB0], want[B0];
	struct kvstore_refill *r;
	uint16_t code = 0;
	uint32_t k;

	r = kvstore_refill_begin(s, 0, &ch, 1, &code);
	if (r == NULL)
		return code;
	cr_assert_eq(code, 0);
	cr_assert_eq(kvh_gather(r, 0, 1 << 20, got), (uint64_t)n * (B0 / NB0));
	for (k = 0; k < n; k++) {
		kvh_fill(prompt, a + k, ver[k], 0, want, B0);
		cr_assert_arr_eq(got + k * (B0 / NB0), want, B0 / NB0, "prompt %" PRIu64 " token %u",
				 prompt, a + k);
	}
	kvstore_refill_end(r);
	return 0;
}

/*
 * DELETE, a new EVICT and REFILL in every order. DELETE
 * and EVICT act on what was accepted (open batches included); a REFILL
 * reads what complete batches left, so a prompt that only an open batch
 * holds is UNKNOWN_PROMPT until that batch completes (not RANGE), growth
 * still open is RANGE, an overwrite still open reads the old bytes, and
 * what a DELETE removed while its batch was open never comes back.
 */
Test(rules, a_refill_sees_what_complete_batches_left_whatever_was_deleted_and_evicted_again)
{
	static const uint32_t v0[4] = {0, 0, 0, 0}, v1[4] = {1, 1, 1, 1}, v10[4] = {1, 0, 0, 0};
	const uint64_t A = 1, Bp = 2, C = 3, D = 4;
	uint64_t pr[8] = {A, A, Bp, Bp, C, D, D, 0};
	uint32_t tk[8] = {0, 1, 2, 3, 0, 4, 5, 0}, ver[8] = {1, 1, 1, 1, 1, 1, 1, 0};
	uint64_t b;

	evict_range(A, 0, 3);
	evict_range(Bp, 0, 3);
	evict_range(C, 0, 3);
	evict_range(D, 0, 3);
	b = next_batch++;
	/* A deleted whole, Bp's suffix 2..3 deleted: then evicted again in
	 * batch b, with C 0 overwritten and D grown by 4..5. */
	cr_assert_eq(del(A, 0, 3), 0);
	cr_assert_eq(del(Bp, 2, 3), 0);
	evict_open(b, pr, tk, 7);
	/* While b is open. */
	cr_assert_eq(refill_ver(A, 0, 2, v1), PROTO_E_UNKNOWN_PROMPT, "A only in an open batch");
	cr_assert_eq(kvstore_prompt(s, 0, A, &(uint32_t){0}, &(uint32_t){0}), -ENOENT);
	cr_assert_eq(refill_ver(Bp, 0, 4, v0), PROTO_E_RANGE, "Bp 2..3 still open");
	cr_assert_eq(refill_ver(Bp, 0, 2, v0), 0);
	cr_assert_eq(refill_ver(C, 0, 4, v0), 0, "C 0's overwrite not seen yet");
	cr_assert_eq(refill_ver(D, 2, 4, v0), PROTO_E_RANGE, "D 4..5 still open");
	/* DELETE and EVICT count what was accepted: D's open growth can be
	 * deleted (RANGE if they did not), A's EVICT was taken as a new prompt. */
	cr_assert_eq(del(D, 3, 5), 0);
	cr_assert_eq(refill_ver(D, 0, 3, v0), 0);
	/* The data comes: b completes. */
	cr_assert_eq(kvh_send(s, b, 0, B0, 7, pr, tk, ver, 100), 0);
	cr_assert_eq(kvstore_batches_complete(s), b);
	cr_assert_eq(refill_ver(A, 0, 2, v1), 0, "A, evicted again");
	assert_range(A, 0, 2);
	cr_assert_eq(refill_ver(Bp, 0, 4, (const uint32_t[]){0, 0, 1, 1}), 0);
	cr_assert_eq(refill_ver(C, 0, 4, v10), 0, "C 0 overwritten");
	cr_assert_eq(refill_ver(D, 0, 5, v0), PROTO_E_RANGE, "D's deleted growth stays deleted");
	assert_range(D, 0, 3);
	/* Deleted again while a new batch re-creates it: gone until that completes. */
	b = next_batch++;
	cr_assert_eq(del(A, 0, 1), 0);
	evict_open(b, (const uint64_t[]){A}, (const uint32_t[]){0}, 1);
	cr_assert_eq(refill_ver(A, 0, 1, v0), PROTO_E_UNKNOWN_PROMPT);
	cr_assert_eq(del(A, 0, 0), 0, "a DELETE of a prompt only an open batch holds");
	cr_assert_eq(kvh_send(s, b, 0, B0, 1, (const uint64_t[]){A}, (const uint32_t[]){0},
			      (const uint32_t[]){2}, 100),
		     0);
	cr_assert_eq(refill_ver(A, 0, 1, v0), PROTO_E_UNKNOWN_PROMPT, "its data is dropped");
	cr_assert_eq(kvstore_prompt(s, 0, A, &(uint32_t){0}, &(uint32_t){0}), -ENOENT);
}

Test(rules, memory_a_refill_references_is_not_reused_until_it_ends)
{
	struct proto_refill_chunk ch = {111, 100, 51};
	struct kvstore_refill_pos pos;
	struct kvstore_seg segs[128];
	struct kvstore_cache_stats st;
	uint8_t before[51 * B0 / NB0], after[51 * B0 / NB0];
	uint16_t code;
	struct kvstore_refill *r;
	unsigned int n, i;
	uint32_t off = 0;

	free(mem);
	make_store(60); /* 60 tokens + 64 spare slots: rounded to 128 slots */
	store_100_150();
	r = kvstore_refill_begin(s, 0, &ch, 1, &code);
	cr_assert_not_null(r);
	memset(&pos, 0, sizeof(pos));
	n = kvstore_refill_next(r, 0, &pos, 1 << 20, segs, 128);
	for (i = 0; i < n; i++, off += segs[i - 1].len)
		memcpy(before + off, segs[i].addr, segs[i].len);
	/* Delete everything and fill the cache with other tokens. */
	cr_assert_eq(del(111, 100, 150), 0);
	kvstore_cache_stats(s, 0, &st);
	cr_assert_eq(st.limbo_slots, 51);
	evict_range(333, 0, 59);
	kvstore_cache_stats(s, 0, &st);
	cr_assert_eq(st.stored_tokens, 60);
	/* The segments still hold the deleted tokens' bytes. */
	for (i = 0, off = 0; i < n; off += segs[i].len, i++)
		memcpy(after + off, segs[i].addr, segs[i].len);
	cr_assert_arr_eq(before, after, sizeof(before));
	kvstore_refill_end(r);
	/* Once it ends, the memory comes back on the next reclaim. */
	cr_assert_eq(del(333, 59, 59), 0);
	kvstore_cache_stats(s, 0, &st);
	cr_assert_eq(st.limbo_slots, 0);
}

Test(rules, a_refill_sees_the_old_token_or_the_new_never_a_mix)
{
	struct proto_refill_chunk ch = {111, 120, 10};
	struct proto_evict_entry e = {111, 125, 1};
	struct kvstore_refill_pos pos;
	struct kvstore_seg segs[16];
	uint8_t got[10 * B0 / NB0], want[B0], half[B0];
	uint16_t code;
	struct kvstore_refill *r;
	uint32_t k, off = 0;
	unsigned int n, i;

	store_100_150();
	r = kvstore_refill_begin(s, 0, &ch, 1, &code);
	cr_assert_not_null(r);
	memset(&pos, 0, sizeof(pos));
	n = kvstore_refill_next(r, 0, &pos, 1 << 20, segs, 16);
	cr_assert_gt(n, 0);
	/* The overwrite of 125 arrives, first half, then all, and publishes,
	 * while the segments taken before it are still being sent. */
	cr_assert_eq(kvstore_evict(s, next_batch, 1, 1, &e, NULL, 0), 0);
	kvh_fill(111, 125, 9, 0, half, B0);
	cr_assert_eq(kvstore_data(s, next_batch, 0, 0, B0, half, B0 / 2), 0);
	cr_assert_eq(kvstore_data(s, next_batch, 0, B0 / 2, B0, half + B0 / 2, B0 / 2), 0);
	cr_assert_eq(kvstore_batches_complete(s), next_batch);
	next_batch++;
	for (i = 0; i < n; off += segs[i].len, i++)
		memcpy(got + off, segs[i].addr, segs[i].len);
	for (k = 0; k < 10; k++) {
		kvh_fill(111, 120 + k, 0, 0, want, B0);
		cr_assert_arr_eq(got + k * (B0 / NB0), want, B0 / NB0, "token %u", 120 + k);
	}
	kvstore_refill_end(r);
	/* A refill begun after the swap sees the new token whole. */
	ch.start_token_idx = 125;
	ch.num_tokens = 1;
	r = kvstore_refill_begin(s, 0, &ch, 1, &code);
	cr_assert_not_null(r);
	kvh_gather(r, 1, 1 << 20, got);
	cr_assert_arr_eq(got, half + B0 / NB0, B0 / NB0);
	kvstore_refill_end(r);
}

Test(rules, reset_forgets_everything)
{
	struct kvstore_cache_stats st;
	struct proto_evict_entry e = {111, 151, 1};
	uint32_t o, n;

	store_100_150();
	cr_assert_eq(kvstore_evict(s, next_batch, 1, 1, &e, NULL, 0), 0);
	kvstore_reset(s);
	kvstore_cache_stats(s, 0, &st);
	cr_assert_eq(st.prompts, 0);
	cr_assert_eq(st.stored_tokens, 0);
	cr_assert_eq(kvstore_prompt(s, 0, 111, &o, &n), -ENOENT);
	cr_assert_eq(kvstore_batches_complete(s), 0);
	next_batch = 1;
	cr_assert_eq(evict1(5, 0, 0), 0);
}

/*
 * A refill lcore reads a refill's buffers one after
 * another while the ingest lcore publishes batches. An overwrite published
 * between buffer 0's transfer and buffer 1's gave buffer 0 of the old
 * version and buffer 1 of the new: bytes that match neither. Every buffer
 * of a refill reads the version that was published when the refill began
 * (PROTOCOL.md section 4: a REFILL reads what complete batches left).
 */
Test(rules, every_buffer_of_a_refill_reads_the_version_it_began_with)
{
	struct proto_refill_chunk ch = {7, 0, 20};
	uint8_t got[20 * B0 / NB0], want[B0];
	struct proto_evict_entry e[3] = {{7, 0, 1}, {7, 5, 1}, {7, 10, 1}};
	uint64_t pr[3] = {7, 7, 7};
	uint32_t tk[3] = {0, 5, 10}, v9[3] = {9, 9, 9}, k, b, ver;
	uint16_t code = 0, codes[3];
	struct kvstore_refill *r;
	uint64_t bn;

	evict_range(7, 0, 19);
	r = kvstore_refill_begin(s, 0, &ch, 1, &code);
	cr_assert_not_null(r, "code %u", code);
	for (b = 0; b < NB0; b++) {
		if (b == 1) {
			/* Between the buffers: tokens 0, 5 and 10 overwritten, published. */
			bn = next_batch++;
			cr_assert_eq(kvstore_evict(s, bn, 1, 3, e, codes, 0), 0);
			cr_assert_eq(kvh_send(s, bn, 0, B0, 3, pr, tk, v9, 100), 0);
			cr_assert_eq(kvstore_batches_complete(s), bn);
		}
		cr_assert_eq(kvh_gather(r, (uint16_t)b, 1 << 20, got), 20ull * (B0 / NB0));
		for (k = 0; k < 20; k++) {
			kvh_fill(7, k, 0, 0, want, B0);
			cr_assert_arr_eq(got + k * (B0 / NB0), want + b * (B0 / NB0), B0 / NB0,
					 "buffer %u token %u: not the version the refill began with", b, k);
		}
	}
	kvstore_refill_end(r);
	/* A refill begun after the overwrite reads it, in every buffer. */
	r = kvstore_refill_begin(s, 0, &ch, 1, &code);
	cr_assert_not_null(r);
	for (b = 0; b < NB0; b++) {
		cr_assert_eq(kvh_gather(r, (uint16_t)b, 1 << 20, got), 20ull * (B0 / NB0));
		for (k = 0; k < 20; k++) {
			ver = k == 0 || k == 5 || k == 10 ? 9 : 0;
			kvh_fill(7, k, ver, 0, want, B0);
			cr_assert_arr_eq(got + k * (B0 / NB0), want + b * (B0 / NB0), B0 / NB0,
					 "after: buffer %u token %u", b, k);
		}
	}
	kvstore_refill_end(r);
}
