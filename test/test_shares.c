/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * kvss-shared sweep's shares of the shared level (app/shared/shares.c):
 * the command line's --share and --share-default, refused when hostile,
 * and the columns picked to go, on hand-worked pools: a level with room
 * loses nothing, a cap is kept, the organization furthest above its
 * guarantee gives its oldest columns, and one at or below its guarantee
 * gives none for another's sake.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "kvss_shared.h"
#include "proto.h"

static struct ks_shares sh;
static char err[256];
static struct ks_lives lv;

static void fresh(void);
static void col(uint64_t org, uint64_t t, uint32_t tokens);
static uint32_t gone(uint64_t org, enum ks_victim why, uint64_t *tokens);

static void
reset(uint64_t capacity)
{
	memset(&sh, 0, sizeof(sh));
	sh.capacity_tokens = capacity;
}

/* ---- The command line ------------------------------------------------------- */

Test(shares, an_organization_by_name_or_by_id)
{
	reset(1000);
	cr_assert_eq(ks_share_parse("acme:0.25:0.5", false, &sh, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(ks_share_parse("0x2a:.1", false, &sh, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(sh.n, 2);
	cr_assert_eq(sh.org[0].org, proto_ref_isolation_id("acme", 4), "hashed as the driver does");
	cr_assert_eq(sh.org[0].share, 250000000, "billionths, exactly");
	cr_assert_eq(sh.org[0].cap, 500000000);
	cr_assert_str_eq(sh.org[0].label, "acme");
	cr_assert_eq(sh.org[1].org, 0x2a);
	cr_assert_eq(sh.org[1].share, 100000000);
	cr_assert_eq(sh.org[1].cap, 0, "no cap given: the default's");
	cr_assert_eq(ks_share_parse("0.05:0.2", true, &sh, err, sizeof(err)), 0, "%s", err);
	cr_assert(sh.default_given);
	cr_assert_eq(sh.share_default, 50000000);
	cr_assert_eq(sh.cap_default, 200000000);
	cr_assert_eq(ks_shares_check(&sh, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(ks_share_parse("1", true, &sh, err, sizeof(err)), -1, "the default twice");
	cr_assert_not_null(strstr(err, "given twice"), "%s", err);
	reset(1000);
	cr_assert_eq(ks_share_parse("a:1", false, &sh, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(sh.org[0].share, 1000000000);
	cr_assert_eq(ks_share_parse("b:0.000000001", false, &sh, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(sh.org[1].share, 1);
}

struct bad {
	const char *arg;
	bool is_default;
	const char *says;
};

static struct bad bads[] = {
	{"acme", false, "is not ORG:SHARE[:CAP]"},
	{":0.5", false, "is not ORG:SHARE[:CAP]"},
	{"acme:", false, "fractions of the capacity"},
	{"acme:-0.1", false, "fractions of the capacity"},
	{"acme:1.5", false, "fractions of the capacity"},
	{"acme:nan", false, "fractions of the capacity"},
	{"acme:inf", false, "fractions of the capacity"},
	{"acme:1e-1", false, "fractions of the capacity"},
	{"acme:1.1", false, "fractions of the capacity"},
	{"acme:2", false, "fractions of the capacity"},
	{"acme:0.0000000001", false, "at most 9 decimals"},
	{"acme:1.0000000001", false, "fractions of the capacity"},
	{"acme:99999999999999999999", false, "fractions of the capacity"},
	{"acme:0x0.8", false, "fractions of the capacity"},
	{"acme:0.1.2", false, "fractions of the capacity"},
	{"acme:.", false, "fractions of the capacity"},
	{"acme:0.5:0.4", false, "at least the share"},
	{"acme:0:0", false, "the cap must be above 0"},
	{"acme:0.1:0.2:0.3", false, "fractions of the capacity"},
	{"acme:0.1 ", false, "fractions of the capacity"},
	{"0xzz:0.1", false, "neither a name nor 0x"},
	{"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa:0.1",
	 false, "ORG is longer than 95 characters"},
	{"0x12345678901234567:0.1", false, "neither a name nor 0x"},
	{"0.5:0.4", true, "at least the share"},
	{"acme:0.1", true, "fractions of the capacity"},
	{"", true, "fractions of the capacity"},
};

Test(shares, hostile_arguments_are_refused_saying_why)
{
	for (size_t i = 0; i < sizeof(bads) / sizeof(bads[0]); i++) {
		const struct bad *b = &bads[i];

		reset(1000);
		err[0] = '\0';
		cr_expect_eq(ks_share_parse(b->arg, b->is_default, &sh, err, sizeof(err)), -1,
			     "'%s' taken", b->arg);
		cr_expect_not_null(strstr(err, b->says), "'%s': %s", b->arg, err);
		cr_expect_eq(sh.n, 0, "'%s': a refused share was kept", b->arg);
	}
}

Test(shares, a_name_with_escapes_is_shown_made_printable)
{
	reset(1000);
	cr_assert_eq(ks_share_parse("\x1b[31mred:0.1", false, &sh, err, sizeof(err)), 0, "%s", err);
	cr_assert_null(strchr(sh.org[0].label, '\x1b'), "an escape in the label: %s", sh.org[0].label);
	cr_assert_eq(ks_share_parse("\x1b[31mred:0.2", false, &sh, err, sizeof(err)), -1);
	cr_assert_null(strchr(err, '\x1b'), "an escape in the message: %s", err);
}

Test(shares, an_organization_twice_and_the_65th_are_refused)
{
	char a[32];

	reset(1000);
	cr_assert_eq(ks_share_parse("acme:0.1", false, &sh, err, sizeof(err)), 0);
	cr_assert_eq(ks_share_parse("acme:0.2", false, &sh, err, sizeof(err)), -1);
	cr_assert_not_null(strstr(err, "given twice"), "%s", err);
	/* The same organization by its id is the same organization. */
	snprintf(a, sizeof(a), "0x%llx:0.2", (unsigned long long)proto_ref_isolation_id("acme", 4));
	cr_assert_eq(ks_share_parse(a, false, &sh, err, sizeof(err)), -1);
	reset(1000);
	for (int i = 0; i < KS_MAX_SHARES; i++) {
		snprintf(a, sizeof(a), "0x%x:0", i + 1);
		cr_assert_eq(ks_share_parse(a, false, &sh, err, sizeof(err)), 0, "%s", err);
	}
	cr_assert_eq(ks_share_parse("0xffff:0", false, &sh, err, sizeof(err)), -1);
	cr_assert_not_null(strstr(err, "more than 64"), "%s", err);
}

Test(shares, shares_past_the_whole_or_without_a_capacity_are_refused)
{
	reset(1000);
	cr_assert_eq(ks_share_parse("a:0.6", false, &sh, err, sizeof(err)), 0);
	cr_assert_eq(ks_share_parse("b:0.4", false, &sh, err, sizeof(err)), 0);
	cr_assert_eq(ks_shares_check(&sh, err, sizeof(err)), 0, "summing to 1 is the whole: %s", err);
	cr_assert_eq(ks_share_parse("0.01", true, &sh, err, sizeof(err)), 0);
	cr_assert_eq(ks_shares_check(&sh, err, sizeof(err)), -1);
	cr_assert_not_null(strstr(err, "sum to 1.010000000 (with --share-default's), above the whole"),
			   "%s", err);
	reset(0);
	cr_assert_eq(ks_shares_check(&sh, err, sizeof(err)), 0, "no shares, no capacity: a sweep");
	cr_assert_eq(ks_share_parse("a:0.1", false, &sh, err, sizeof(err)), 0);
	cr_assert_eq(ks_shares_check(&sh, err, sizeof(err)), -1);
	cr_assert_not_null(strstr(err, "need --capacity-tokens"), "%s", err);
}

Test(shares, a_share_without_its_cap_takes_the_defaults)
{
	reset(100);
	cr_assert_eq(ks_share_parse("0x77:0.3", false, &sh, err, sizeof(err)), 0);
	cr_assert_eq(ks_share_parse("0:0.2", true, &sh, err, sizeof(err)), 0);
	cr_assert_eq(ks_shares_check(&sh, err, sizeof(err)), -1, "0.3 above the default cap 0.2");
	cr_assert_not_null(strstr(err, "give it a cap of its own"), "%s", err);
	reset(100);
	cr_assert_eq(ks_share_parse("0x77:0.3", false, &sh, err, sizeof(err)), 0);
	cr_assert_eq(ks_share_parse("0:0.5", true, &sh, err, sizeof(err)), 0);
	cr_assert_eq(ks_shares_check(&sh, err, sizeof(err)), 0, "%s", err);
	fresh();
	col(0x77, 1, 10);
	cr_assert_eq(ks_shares_pick(&sh, &lv), 0);
	cr_assert_eq(lv.org[0].guaranteed, 30);
	cr_assert_eq(lv.org[0].cap, 50, "the default's cap, as the driver's org_default gives it");
	fresh();
}

Test(shares, shares_are_exact_where_a_double_is_not)
{
	uint64_t tok;

	/* 0.57 x 100 is 56.99999999999999 as doubles: floor gave 56. */
	reset(100);
	cr_assert_eq(ks_share_parse("0x1:0.29:0.57", false, &sh, err, sizeof(err)), 0);
	fresh();
	col(1, 1, 57);
	cr_assert_eq(ks_shares_pick(&sh, &lv), 0);
	cr_assert_eq(lv.org[0].guaranteed, 29);
	cr_assert_eq(lv.org[0].cap, 57);
	cr_assert_eq(gone(1, KS_OVER_CAP, &tok), 0, "exactly at its cap: kept");
	fresh();
	/* The largest capacity and a billionth: no overflow on the way. */
	reset(1ull << 50);
	cr_assert_eq(ks_share_parse("0x1:0.000000001:1", false, &sh, err, sizeof(err)), 0);
	col(1, 1, 1);
	cr_assert_eq(ks_shares_pick(&sh, &lv), 0);
	cr_assert_eq(lv.org[0].guaranteed, (1ull << 50) / 1000000000ull);
	cr_assert_eq(lv.org[0].cap, 1ull << 50);
	fresh();
}


/* ---- What goes ----------------------------------------------------------------- */

static uint32_t next_obj;

/* A live column of @p org, first used at @p t (seconds), of @p tokens. */
static void
col(uint64_t org, uint64_t t, uint32_t tokens)
{
	struct ks_live x = {.org = org, .object_id = 1000 + next_obj, .key = 1000 + next_obj,
			    .parent = 1 /* no column's key: a prompt's first */,
			    .first_use_ns = t * 1000000000ull,
			    .written_ns = t * 1000000000ull + 5, .tokens = tokens, .obj = next_obj};

	next_obj++;
	cr_assert_eq(ks_lives_add(&lv, &x), 0);
}

static void
fresh(void)
{
	ks_lives_free(&lv);
	next_obj = 0;
}

/* Columns of @p org picked to go, and their tokens. */
static uint32_t
gone(uint64_t org, enum ks_victim why, uint64_t *tokens)
{
	uint32_t n = 0, i;

	*tokens = 0;
	for (i = 0; i < lv.n; i++)
		if (lv.v[i].org == org && lv.v[i].victim == why) {
			n++;
			*tokens += lv.v[i].tokens;
		}
	return n;
}

/* The first-use time (s) of the youngest column of @p org picked, and of the oldest kept. */
static void
ages(uint64_t org, uint64_t *youngest_gone, uint64_t *oldest_kept)
{
	uint32_t i;

	*youngest_gone = 0;
	*oldest_kept = UINT64_MAX;
	for (i = 0; i < lv.n; i++) {
		uint64_t t = lv.v[i].first_use_ns / 1000000000ull;

		if (lv.v[i].org != org)
			continue;
		if (lv.v[i].victim != KS_KEPT && t > *youngest_gone)
			*youngest_gone = t;
		if (lv.v[i].victim == KS_KEPT && t < *oldest_kept)
			*oldest_kept = t;
	}
}

Test(shares, a_level_with_room_loses_nothing_however_shared)
{
	uint64_t tok;

	reset(10000);
	cr_assert_eq(ks_share_parse("0x1:0.9", false, &sh, err, sizeof(err)), 0);
	fresh();
	/* Organization 2 has no guarantee and uses 9,000 of 10,000: lent, kept. */
	for (int i = 0; i < 90; i++)
		col(2, (uint64_t)i, 100);
	for (int i = 0; i < 10; i++)
		col(1, (uint64_t)i, 100);
	cr_assert_eq(ks_shares_pick(&sh, &lv), 0);
	cr_assert_eq(gone(2, KS_OVER_SHARE, &tok) + gone(1, KS_OVER_SHARE, &tok), 0);
	cr_assert_eq(lv.total_tokens, 10000);
	cr_assert_eq(lv.norg, 2);
	fresh();
}

Test(shares, a_full_level_takes_back_from_the_borrower_oldest_first)
{
	uint64_t tok, young, old;

	/* 10,000 tokens; quiet (0x1) guaranteed 0.3, noisy (0x2) nothing. */
	reset(10000);
	cr_assert_eq(ks_share_parse("0x1:0.3", false, &sh, err, sizeof(err)), 0);
	fresh();
	for (int i = 0; i < 100; i++)
		col(2, (uint64_t)(1000 - i), 100); /* 10,000 tokens, written in any order */
	for (int i = 0; i < 25; i++)
		col(1, (uint64_t)i, 100); /* 2,500: within its 3,000 */
	cr_assert_eq(ks_shares_pick(&sh, &lv), 0);
	/* 12,500 in 10,000: 2,500 go, all of the noisy one's, its oldest. */
	cr_assert_eq(gone(1, KS_OVER_SHARE, &tok), 0, "the quiet one, within its guarantee, lost %lu",
		     (unsigned long)tok);
	cr_assert_eq(gone(2, KS_OVER_SHARE, &tok), 25);
	cr_assert_eq(tok, 2500);
	ages(2, &young, &old);
	cr_assert_lt(young, old, "a younger column went (%lu) before an older one (%lu)",
		     (unsigned long)young, (unsigned long)old);
	cr_assert_eq(lv.total_tokens, 10000);
	fresh();
}

Test(shares, the_one_furthest_above_its_guarantee_gives_first)
{
	uint64_t t1, t2, t3;

	/* 10,000 tokens, each of three guaranteed 0.2 (2,000). */
	reset(10000);
	cr_assert_eq(ks_share_parse("0x1:0.2", false, &sh, err, sizeof(err)), 0);
	cr_assert_eq(ks_share_parse("0x2:0.2", false, &sh, err, sizeof(err)), 0);
	cr_assert_eq(ks_share_parse("0x3:0.2", false, &sh, err, sizeof(err)), 0);
	fresh();
	for (int i = 0; i < 60; i++)
		col(1, (uint64_t)i, 100); /* 6,000: 4,000 above */
	for (int i = 0; i < 40; i++)
		col(2, (uint64_t)i, 100); /* 4,000: 2,000 above */
	for (int i = 0; i < 15; i++)
		col(3, (uint64_t)i, 100); /* 1,500: below */
	cr_assert_eq(ks_shares_pick(&sh, &lv), 0);
	/* 11,500 in 10,000: 1,500 go, all from 0x1 (4,000 above; after
	 * giving 1,500 it is still 2,500 above, more than 0x2's 2,000). */
	gone(1, KS_OVER_SHARE, &t1);
	gone(2, KS_OVER_SHARE, &t2);
	gone(3, KS_OVER_SHARE, &t3);
	cr_assert_eq(t1, 1500);
	cr_assert_eq(t2, 0);
	cr_assert_eq(t3, 0);
	/* Fuller: 0x1 and 0x2 give until they are equally above, then in turn. */
	for (int i = 0; i < 30; i++)
		col(3, (uint64_t)(100 + i), 100); /* 0x3 now 4,500: 2,500 above */
	cr_assert_eq(ks_shares_pick(&sh, &lv), 0);
	gone(1, KS_OVER_SHARE, &t1);
	gone(2, KS_OVER_SHARE, &t2);
	gone(3, KS_OVER_SHARE, &t3);
	/* 14,500 in 10,000: 4,500 go, leaving each at 2,000 + (8,500 - 6,000) / 3 above... */
	cr_assert_eq(t1 + t2 + t3, 4500);
	cr_assert_eq(lv.total_tokens, 10000);
	/* ...as near equal as whole columns allow: no one more than a column above another. */
	for (uint32_t k = 0; k < lv.norg; k++)
		for (uint32_t m = 0; m < lv.norg; m++) {
			uint64_t a = lv.org[k].tokens - lv.org[k].guaranteed;
			uint64_t b = lv.org[m].tokens - lv.org[m].guaranteed;

			cr_assert_leq(a, b + 100, "org %lu %lu above, org %lu %lu",
				      (unsigned long)lv.org[k].org, (unsigned long)a,
				      (unsigned long)lv.org[m].org, (unsigned long)b);
		}
	fresh();
}

Test(shares, a_cap_is_kept_even_with_room)
{
	uint64_t tok;

	reset(100000);
	cr_assert_eq(ks_share_parse("0x7:0.01:0.02", false, &sh, err, sizeof(err)), 0);
	fresh();
	for (int i = 0; i < 50; i++)
		col(7, (uint64_t)i, 64); /* 3,200 tokens; its cap 2,000 */
	cr_assert_eq(ks_shares_pick(&sh, &lv), 0);
	cr_assert_eq(gone(7, KS_OVER_CAP, &tok), 19, "3,200 - 19 x 64 = 1,984 <= 2,000");
	cr_assert_eq(lv.org[0].tokens, 3200 - 19 * 64);
	cr_assert_eq(gone(7, KS_OVER_SHARE, &tok), 0);
	fresh();
}

Test(shares, the_default_applies_to_those_not_named)
{
	uint64_t tok;

	reset(10000);
	cr_assert_eq(ks_share_parse("0.1:0.15", true, &sh, err, sizeof(err)), 0);
	fresh();
	for (int i = 0; i < 20; i++)
		col(9, (uint64_t)i, 100); /* 2,000: its default cap 1,500 */
	cr_assert_eq(ks_shares_pick(&sh, &lv), 0);
	cr_assert_eq(gone(9, KS_OVER_CAP, &tok), 5);
	cr_assert_eq(lv.org[0].guaranteed, 1000);
	cr_assert_eq(lv.org[0].cap, 1500);
	fresh();
}

Test(shares, guarantees_alone_past_the_level_lose_nothing)
{
	uint64_t tok;
	uint32_t i;

	/*
	 * 0x1 named with 0.6, every other organization 0.2 by default: the
	 * shares sum to 0.8 as given, but three organizations take the
	 * default. Each holds exactly its guarantee, 12,000 in 10,000 tokens:
	 * none is above, none gives, and the level stays above (said).
	 */
	reset(10000);
	cr_assert_eq(ks_share_parse("0x1:0.6", false, &sh, err, sizeof(err)), 0);
	cr_assert_eq(ks_share_parse("0.2", true, &sh, err, sizeof(err)), 0);
	cr_assert_eq(ks_shares_check(&sh, err, sizeof(err)), 0, "%s", err);
	fresh();
	for (i = 0; i < 60; i++)
		col(1, i, 100);
	for (i = 0; i < 20; i++) {
		col(4, i, 100);
		col(5, i, 100);
		col(6, i, 100);
	}
	cr_assert_eq(ks_shares_pick(&sh, &lv), 0);
	for (uint64_t o = 1; o <= 6; o++)
		cr_assert_eq(gone(o, KS_OVER_SHARE, &tok) + gone(o, KS_OVER_CAP, &tok), 0,
			     "organization %lu, at its guarantee, gave %lu tokens", (unsigned long)o,
			     (unsigned long)tok);
	cr_assert_eq(lv.total_tokens, 12000, "the level stays above");
	cr_assert_eq(lv.guaranteed_tokens, 12000);
	/* One column more of 0x5: it alone is above, and gives just that much. */
	col(5, 100, 100);
	cr_assert_eq(ks_shares_pick(&sh, &lv), 0);
	cr_assert_eq(gone(5, KS_OVER_SHARE, &tok), 1);
	cr_assert_eq(tok, 100);
	cr_assert_eq(lv.total_tokens, 12000);
	fresh();
}

Test(shares, the_furthest_above_gives_whatever_its_id)
{
	uint64_t tok;

	reset(1000);
	fresh();
	for (int i = 0; i < 6; i++)
		col(9, (uint64_t)i, 100); /* 600 */
	for (int i = 0; i < 5; i++)
		col(1, (uint64_t)i, 100); /* 500 */
	cr_assert_eq(ks_shares_pick(&sh, &lv), 0);
	cr_assert_eq(gone(9, KS_OVER_SHARE, &tok), 1, "0x9, 600 above 0, gives first");
	cr_assert_eq(gone(1, KS_OVER_SHARE, &tok), 0);
	fresh();
}


Test(shares, the_same_pool_gives_the_same_pick_in_any_listing_order)
{
	enum ks_victim by_id[32];
	uint32_t i, k;

	reset(1000);
	for (int run = 0; run < 2; run++) {
		fresh();
		/* Equal ages and sizes: the ties are broken by write, then id. */
		for (k = 0; k < 32; k++) {
			i = run ? 31 - k : k;
			struct ks_live x = {.org = 1 + (i % 2), .object_id = 5000 + i, .key = 5000 + i,
					    .parent = 1,
					    .first_use_ns = 5, .written_ns = 5, .tokens = 50, .obj = i};

			cr_assert_eq(ks_lives_add(&lv, &x), 0);
		}
		cr_assert_eq(ks_shares_pick(&sh, &lv), 0);
		for (k = 0; k < lv.n; k++) {
			uint32_t id = (uint32_t)(lv.v[k].object_id - 5000);

			if (run == 0)
				by_id[id] = lv.v[k].victim;
			else
				cr_assert_eq(by_id[id], lv.v[k].victim, "column %u", id);
		}
	}
	/* 1,600 in 1,000: 12 columns went, 6 of each (equally above, in turn). */
	for (k = 0, i = 0; k < 32; k++)
		i += by_id[k] == KS_OVER_SHARE;
	cr_assert_eq(i, 12);
	fresh();
}

/* A column of @p org with its key and parent given. */
static void
linked(uint64_t org, uint64_t key, uint64_t parent, uint64_t t, uint32_t tokens)
{
	struct ks_live x = {.org = org, .object_id = key + 77, .key = key, .parent = parent,
			    .layout = 9, .first_use_ns = t * 1000000000ull, .written_ns = t,
			    .tokens = tokens, .obj = next_obj++};

	cr_assert_eq(ks_lives_add(&lv, &x), 0);
}

static enum ks_victim
victim_of(uint64_t key)
{
	for (uint32_t i = 0; i < lv.n; i++)
		if (lv.v[i].key == key)
			return lv.v[i].victim;
	cr_assert_fail("no column %lu", (unsigned long)key);
	return KS_KEPT;
}

Test(shares, a_prompt_shrinks_from_its_end)
{
	/* A prompt of three columns (a <- b <- c) and one of two (d <- e),
	 * younger; a column of another model under a's key is not its child. */
	reset(450);
	fresh();
	linked(5, 0xa, 1, 10, 100);
	linked(5, 0xb, 0xa, 11, 100);
	linked(5, 0xc, 0xb, 12, 100);
	linked(5, 0xd, 1, 20, 100);
	linked(5, 0xe, 0xd, 21, 100);
	{
		struct ks_live x = {.org = 5, .object_id = 0xf0, .key = 0xf, .parent = 0xa, .layout = 8,
				    .first_use_ns = 30ull * 1000000000ull, .tokens = 50, .obj = next_obj++};

		cr_assert_eq(ks_lives_add(&lv, &x), 0);
	}
	/* 550 in 450 (its cap, the whole level): the oldest leaf (c) goes;
	 * a, the oldest column, stays: taking it would strand b and c. */
	cr_assert_eq(ks_shares_pick(&sh, &lv), 0);
	cr_assert_eq(victim_of(0xc), KS_OVER_CAP);
	cr_assert_eq(victim_of(0xa), KS_KEPT);
	cr_assert_eq(victim_of(0xb), KS_KEPT);
	cr_assert_eq(victim_of(0xd), KS_KEPT);
	cr_assert_eq(victim_of(0xe), KS_KEPT);
	cr_assert_eq(victim_of(0xf), KS_KEPT);
	cr_assert_eq(lv.total_tokens, 450);
	/* 250 in it: c, then b (a leaf once c is gone), then a: the oldest
	 * leaf each time; the younger prompt d <- e stays whole. */
	sh.capacity_tokens = 250;
	cr_assert_eq(ks_shares_pick(&sh, &lv), 0);
	cr_assert_eq(victim_of(0xc), KS_OVER_CAP);
	cr_assert_eq(victim_of(0xb), KS_OVER_CAP);
	cr_assert_eq(victim_of(0xa), KS_OVER_CAP);
	cr_assert_eq(victim_of(0xe), KS_KEPT);
	cr_assert_eq(lv.total_tokens, 250);
	fresh();
}

/*
 * An organization above its guarantee gives leaves, not the root its
 * children hang on: one token over, it gives one token.
 */
Test(shares, over_its_guarantee_it_gives_a_leaf_not_its_tree)
{
	reset(10000);
	cr_assert_eq(ks_share_parse("0x1:0.5", false, &sh, err, sizeof(err)), 0);
	cr_assert_eq(ks_share_parse("0x2:0.5", false, &sh, err, sizeof(err)), 0);
	fresh();
	linked(1, 0x100, 1, 0, 5100); /* a system prompt */
	for (uint64_t i = 1; i <= 50; i++)
		linked(1, 0x100 + i, 0x100, i, 1); /* 50 answers hanging on it */
	linked(2, 0x200, 1, 0, 4851);
	/* 10,001 in 10,000: 0x1 is 151 above its 5,000 and gives its oldest leaf. */
	cr_assert_eq(ks_shares_pick(&sh, &lv), 0);
	cr_assert_eq(victim_of(0x100), KS_KEPT, "the root, with 50 columns on it");
	cr_assert_eq(victim_of(0x101), KS_OVER_SHARE);
	cr_assert_eq(lv.org[0].deleted, 1);
	cr_assert_eq(lv.total_tokens, 10000);
	fresh();
}


/*
 * Records are the pool's: a forged chain as deep as the pool, and forged
 * parents in a cycle, are taken without recursion and end.
 */
Test(shares, a_forged_chain_a_million_deep_and_a_cycle_end)
{
	const uint32_t deep = 1000000;
	uint32_t i;

	reset(10);
	fresh();
	for (i = 0; i < deep; i++)
		linked(3, 100 + i, i ? 100 + i - 1 : 1, i, 1);
	/* A cycle: x's parent is y, y's is x. Neither is ever a leaf. */
	linked(3, 50, 51, 0, 1);
	linked(3, 51, 50, 0, 1);
	cr_assert_eq(ks_shares_pick(&sh, &lv), 0);
	/* The chain gives from its end until 10 tokens are left, the cycle's 2 among them. */
	cr_assert_eq(lv.org[0].deleted, deep - 8);
	cr_assert_eq(lv.total_tokens, 10);
	cr_assert_eq(victim_of(50), KS_KEPT);
	cr_assert_eq(victim_of(51), KS_KEPT);
	cr_assert_eq(victim_of(100), KS_KEPT, "the chain's root");
	fresh();
}
