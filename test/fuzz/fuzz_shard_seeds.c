/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Seeds for the shard's stateful fuzzer (fuzz_shard.c): a few whole,
 * valid streams in its input encoding (fuzz_shard.h), each of the
 * driver's and the wafer's messages used as a driver would, so that the
 * fuzzer starts from streams that reach deep (a refill of what batches
 * wrote, columns down and up again, to the shared level and back, a loss,
 * the refill lcore) and mutates
 * from there. None of them is a finding's reproduction.
 *
 * With --regress, it writes instead the reproductions of what the fuzzer
 * found, one small input each, named after it: the regression
 * inputs of test/fuzz/regress_shard/ are these files.
 *
 *   fuzz_shard_seeds [--regress] DIR
 */
#include <stdio.h>
#include <string.h>

#include "fuzz_shard.h"

#define MAX 4096

struct seed {
	unsigned char b[MAX];
	size_t n;
};

static void
begin(struct seed *s, unsigned char cfg)
{
	s->b[0] = cfg;
	s->n = 1;
}

static void
op(struct seed *s, unsigned int code, unsigned int flags, unsigned char a0, unsigned char a1,
   unsigned char a2, unsigned char a3, unsigned char a4, unsigned char a5, unsigned char a6)
{
	unsigned char *p = s->b + s->n;

	if (s->n + FZ_OP_LEN > MAX)
		return;
	p[0] = (unsigned char)(code | flags);
	p[1] = a0;
	p[2] = a1;
	p[3] = a2;
	p[4] = a3;
	p[5] = a4;
	p[6] = a5;
	p[7] = a6;
	s->n += FZ_OP_LEN;
}

static int
save(const char *dir, const char *name, const struct seed *s)
{
	char path[512];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	f = fopen(path, "wb");
	if (f == NULL || fwrite(s->b, 1, s->n, f) != s->n) {
		perror(path);
		if (f != NULL)
			fclose(f);
		return -1;
	}
	return fclose(f);
}

/* EVICT of prompt @p p, tokens start..start+g-1, in order, its data after it in whole frames. */
static void
evict(struct seed *s, unsigned int flags, unsigned char p, unsigned char start, unsigned int g,
      unsigned char mode)
{
	op(s, OP_EVICT, flags, p, start, (unsigned char)(g - 1), 0, mode, 0xf0, 0);
}

/* A REFILL of @p p start..start+n-1 of cache @p c, waiting for the last batch (gate 0). */
static void
refill(struct seed *s, unsigned int flags, unsigned char p, unsigned char start, unsigned char n,
       unsigned char c)
{
	op(s, OP_REFILL, flags, p, start, n, c, 0, 0, 0);
}

/* Prompts, refills, deletes, a look. */
static void
seed_basic(struct seed *s, unsigned char cfg)
{
	begin(s, cfg);
	op(s, OP_HELLO, 0, 1, 0, 0, 0, 0, 0, 0);
	op(s, OP_RESERVE, 0, 1, 0, 32, 0, 0, 0, 0);
	evict(s, 0, 1, 0, 16, 0);
	evict(s, 0, 1, 16, 16, 0);
	evict(s, 0, 2, 0, 8, 0);
	refill(s, 0, 1, 0, 32, 0);
	refill(s, 0, 1, 8, 16, 1);
	op(s, OP_RUN_REFILL, 0, 2, 0, 0, 0, 0, 0, 0);
	op(s, OP_DELETE, 0, 1, 16, 255, 0, 0, 0, 0);
	op(s, OP_DELETE, 0, 1, 16, 255, 1, 0, 0, 0);
	refill(s, 0, 1, 0, 16, 0);
	op(s, OP_RUN_REFILL, 0, 2, 0, 0, 0, 0, 0, 0);
	op(s, OP_HELLO, 0, 0, 0, 0, 0, 0, 0, 0);
}

/* Speculative decoding: tokens written again, their data late; a refill reading them. */
static void
seed_overwrite(struct seed *s, unsigned char cfg)
{
	begin(s, cfg);
	op(s, OP_HELLO, 0, 1, 0, 0, 0, 0, 0, 0);
	evict(s, 0, 2, 0, 40, 0);
	refill(s, 0, 2, 0, 40, 0);
	op(s, OP_EVICT, 0, 2, 0, 9, 0, 3 /* no data yet */, 0xf0, 0);
	op(s, OP_RUN_REFILL, 0, 0, 0, 0, 0, 0, 0, 0);
	op(s, OP_DATA, 0, 0, 0, 0, 0, 0, 0, 0);
	op(s, OP_RUN_REFILL, 0, 3, 0, 0, 0, 0, 0, 0);
	refill(s, 0, 2, 0, 40, 1);
	op(s, OP_RUN_REFILL, 0, 3, 0, 0, 0, 0, 0, 0);
}

/* Columns down to the second tier, deleted from DRAM, up again into another prompt. */
static void
seed_l2(struct seed *s, unsigned char cfg)
{
	begin(s, cfg);
	op(s, OP_HELLO, 0, 1, 0, 0, 0, 0, 0, 0);
	evict(s, 0, 3, 0, 16, 0);
	/* key 1: tokens 0..7 of prompt 3, cache 0; key 2: 8..15, and its cache 1 copy. */
	op(s, OP_L2_DOWN, 0, 1, 0, 3, 0, 7, 0, 0);
	op(s, OP_L2_DOWN, 0, 2, 0, 3, 8, 7, 0, 0);
	op(s, OP_L2_DOWN, 0, 1, 0, 3, 0, 7, 1, 0);
	op(s, OP_L2_DOWN, 0, 2, 0, 3, 8, 7, 1, 0);
	op(s, OP_DELETE, 0, 3, 0, 255, 0, 0, 0, 0);
	op(s, OP_DELETE, 0, 3, 0, 255, 1, 0, 0, 0);
	/* Up into prompt 4: 16 tokens, columns key 1 and 2 of both caches. */
	op(s, OP_L2_UP, 0, 4, 0, 15, 0, 4, 0, 0);
	refill(s, 0, 4, 0, 16, 0);
	refill(s, 0, 4, 0, 16, 1);
	op(s, OP_RUN_REFILL, 0, 3, 0, 0, 0, 0, 0, 0);
	op(s, OP_L2_DELETE, 0, 1, 0, 0, 0, 0, 0, 0);
	op(s, OP_HELLO, 0, 0, 0, 0, 0, 0, 0, 0);
	op(s, OP_REPORT_ACK, 0, 0, 0, 0, 0, 0, 0, 0);
}

/*
 * The shared level (FZ_CFG_SHARED): columns up to it, deleted from DRAM,
 * down again and refilled; then a read that lies (a bit of its payload),
 * and one the cluster holds while its batch times out.
 */
static void
seed_shared(struct seed *s, unsigned char cfg)
{
	begin(s, cfg | FZ_CFG_SHARED);
	op(s, OP_HELLO, 0, 1, 0, 0, 0, 0, 0, 0);
	evict(s, 0, 3, 0, 16, 0);
	/* key 1: tokens 0..7 of prompt 3, key 2: 8..15; cache 0, then cache 1. */
	op(s, OP_L2_DOWN, 0, 0x81, 0, 3, 0, 7, 0, 0);
	op(s, OP_L2_DOWN, 0, 0x82, 0, 3, 8, 7, 0, 0);
	op(s, OP_L2_DOWN, 0, 0x81, 0, 3, 0, 7, 1, 0);
	op(s, OP_L2_DOWN, 0, 0x82, 0, 3, 8, 7, 1, 0);
	op(s, OP_DELETE, 0, 3, 0, 255, 0, 0, 0, 0);
	op(s, OP_DELETE, 0, 3, 0, 255, 1, 0, 0, 0);
	/* Key 1 of both caches (the 4th and 2nd newest sent) into prompt 3's tokens 0..7. */
	op(s, OP_L2_UP, 0, 0x83, 1, 7, 0, 2, 1, 0);
	refill(s, 0, 3, 0, 8, 0);
	refill(s, 0, 3, 0, 8, 1);
	op(s, OP_RUN_REFILL, 0, 3, 0, 0, 0, 0, 0, 0);
	/* Key 2's, read with a bit of its payload flipped: refused. */
	op(s, OP_L2_UP, 0, 0x82 | (FZ_SH_FLIP_DATA << 3), 1, 7, 0, 1, 0, 0);
	/* Key 2's again, held by the cluster while the batch times out. */
	op(s, OP_L2_UP, 0, 0x82 | (FZ_SH_HOLD << 3), 1, 7, 0, 1, 0, 0);
	op(s, OP_TIME, 0, 0, 0, 0, 0, 0, 0, 0);
	op(s, OP_FLUSH, 0, 0, 0, 0, 0, 0, 0, 0);
	refill(s, 0, 3, 8, 8, 0);
	op(s, OP_RUN_REFILL, 0, 3, 0, 0, 0, 0, 0, 0);
	op(s, OP_HELLO, 0, 0, 0, 0, 0, 0, 0, 0);
}

/* A batch lost (a fragment never comes), TOKEN_LOST, the prompt cut and deleted. */
static void
seed_loss(struct seed *s, unsigned char cfg)
{
	begin(s, cfg);
	op(s, OP_HELLO, 0, 1, 0, 0, 0, 0, 0, 0);
	evict(s, 0, 5, 0, 24, 0);
	op(s, OP_EVICT, 0, 5, 24, 23, 0, 2 /* one fragment short */, 3, 0);
	op(s, OP_TIME, 0, 0, 0, 0, 0, 0, 0, 0);
	evict(s, 0, 5, 48, 4, 0); /* past the cut: HOLE */
	op(s, OP_REPORT_ACK, 0, 0, 0, 0, 0, 0, 0, 0);
	op(s, OP_DELETE, 0, 5, 24, 255, 0, 0, 0, 0);
	refill(s, 0, 5, 0, 24, 0);
	op(s, OP_RUN_REFILL, 0, 2, 0, 0, 0, 0, 0, 0);
}

/* More than fits: an EVICT waits for room, then NO_SPACE; data before its EVICT. */
static void
seed_space(struct seed *s, unsigned char cfg)
{
	begin(s, cfg);
	op(s, OP_HELLO, 0, 1, 0, 0, 0, 0, 0, 0);
	evict(s, 0, 1, 0, 64, 1 /* data first */);
	evict(s, 0, 2, 0, 64, 0);
	op(s, OP_TIME, 0, 0, 0, 0, 0, 0, 0, 0);
	op(s, OP_DELETE, 0, 1, 0, 255, 0, 0, 0, 0);
	evict(s, 0, 3, 0, 32, 0);
	refill(s, 0, 3, 0, 32, 0);
	op(s, OP_RUN_REFILL, 0, 2, 0, 0, 0, 0, 0, 0);
}

/* Control frames reordered, repeated, and strangers' copies beside them; small frames. */
static void
seed_reorder(struct seed *s, unsigned char cfg)
{
	begin(s, cfg);
	op(s, OP_HELLO, FZ_F_ODD, 1, 0, 0, 0, 0, 0, 4);
	op(s, OP_EVICT, FZ_F_DEFER, 6, 0, 11, 0, 5, 3, 0);
	op(s, OP_EVICT, FZ_F_DUP, 6, 12, 11, 0, 4, 7, 0);
	refill(s, FZ_F_ODD | FZ_F_MORE, 6, 0, 24, 0);
	op(s, OP_RUN_REFILL, 0, 1, 0, 0, 0, 0, 0, 0);
	op(s, OP_RELEASE, 0, 1, 2, 0, 0, 0, 0, 0);
	op(s, OP_ODD_DATA, 0, 0, 0, 0, 0, 0, 0, 0);
	op(s, OP_HELLO, 0, 1, 0, 0, 0, 0, 0, 0);
	evict(s, 0, 6, 0, 8, 0);
}

/* An L2_UP naming one token 200 times wrote past its tier request. */
static void
regress_l2_up_repeats(struct seed *s)
{
	begin(s, 0);
	op(s, OP_HELLO, 0, 1, 0, 0, 0, 0, 0, 0);
	/* Prompt 4 from token 0, 200 entries, all token 0 (pattern 1, span 1); one column. */
	op(s, OP_L2_UP, 0, 4, 0, 200, 1, 1, 0, 0);
}

/*
 * With a refill lcore, a refill stopped after two of its four
 * buffers while an overwrite's batch completes; its last buffers read the
 * overwrite.
 */
static void
regress_refill_two_versions(struct seed *s)
{
	begin(s, FZ_CFG_REFILL_LCORE);
	op(s, OP_HELLO, 0, 1, 0, 0, 0, 0, 0, 0);
	evict(s, 0, 2, 0, 40, 0);
	refill(s, 0, 2, 0, 40, 0);
	op(s, OP_EVICT, 0, 2, 0, 9, 0, 3 /* its data later */, 0xf0, 0);
	op(s, OP_RUN_REFILL, 0, 0, 2, 0, 0, 0, 0, 0);
	op(s, OP_DATA, 0, 0, 0, 0, 0, 0, 0, 0);
	op(s, OP_RUN_REFILL, 0, 3, 0, 0, 0, 0, 0, 0);
}

/* Two L2_DOWNs of one key left two columns. */
static void
regress_l2_down_twice(struct seed *s)
{
	begin(s, 0);
	op(s, OP_HELLO, 0, 1, 0, 0, 0, 0, 0, 0);
	evict(s, 0, 3, 0, 16, 0);
	op(s, OP_L2_DOWN, 0, 2, 0, 3, 8, 7, 0, 0);
	op(s, OP_L2_DOWN, FZ_F_MORE, 2, 0, 3, 8, 7, 0, 0);
	op(s, OP_L2_DOWN, 0, 2, 0, 3, 8, 7, 0, 0);
}

/*
 * The second half of the one above, as PROTOCOL.md section 9 now has it: a
 * replacement needs a free slot while it is written, so the fourth column
 * in the same message as a replacement, three being held, is refused
 * NO_SPACE; a driver deletes the older copy first. Passes when the shard
 * answers so, and counts the replaced key once.
 */
static void
regress_l2_replace_and_fourth(struct seed *s)
{
	begin(s, 0);
	op(s, OP_HELLO, 0, 1, 0, 0, 0, 0, 0, 0);
	evict(s, 0, 3, 0, 32, 0);
	op(s, OP_L2_DOWN, 0, 1, 0, 3, 0, 7, 0, 0);
	op(s, OP_L2_DOWN, 0, 2, 0, 3, 8, 7, 0, 0);
	op(s, OP_L2_DOWN, 0, 3, 0, 3, 16, 7, 0, 0);
	/* Key 3 again, and key 4 (tokens 24..31) in the same message. */
	op(s, OP_L2_DOWN, 0, 3, 0, 3, 16, 7, 0, (24 << 2) | 2);
}

/*
 * A refill cut short: with a refill lcore, a batch lost while a refill is
 * between its buffers cuts the prompt, the refill's last buffers send
 * nothing, and REFILL_DONE says it went whole.
 */
static void
regress_refill_cut_by_loss(struct seed *s)
{
	begin(s, FZ_CFG_REFILL_LCORE);
	op(s, OP_HELLO, 0, 1, 0, 0, 0, 0, 0, 0);
	evict(s, 0, 2, 0, 40, 0);
	refill(s, 0, 2, 0, 40, 0);
	op(s, OP_EVICT, 0, 2, 0, 9, 0, 2 /* a fragment short: lost */, 0xf0, 0);
	op(s, OP_RUN_REFILL, 0, 0, 2, 0, 0, 0, 0, 0);
	op(s, OP_TIME, 0, 0, 0, 0, 0, 0, 0, 0);
	op(s, OP_RUN_REFILL, 0, 3, 0, 0, 0, 0, 0, 0);
}

/*
 * A REFILL of a driver gone: the refill lcore checked its epoch, then
 * waited for a DELETE before it to be applied; meanwhile a new driver's
 * HELLO reset the store and its first EVICT wrote the prompt again, and
 * the old REFILL read the new stream's bytes (under the old refill's id).
 */
static void
regress_refill_across_epochs(struct seed *s)
{
	begin(s, FZ_CFG_REFILL_LCORE);
	op(s, OP_HELLO, 0, 1, 0, 0, 0, 0, 0, 0);
	evict(s, 0, 1, 0, 16, 0);
	evict(s, 0, 1, 16, 16, 0);
	refill(s, 0, 1, 0, 32, 0);
	op(s, OP_RUN_REFILL, 0, 2, 0, 0, 0, 0, 0, 0);
	op(s, OP_DELETE, 0, 1, 16, 255, 0, 0, 0, 0);
	refill(s, 0, 1, 0, 16, 0);
	op(s, OP_RUN_REFILL, 0, 2, 0, 0, 0, 0, 0, 0);
	op(s, OP_HELLO, 0, 1, 0, 0, 0, 0, 0, 0);
	evict(s, 0, 1, 0, 32, 0);
	op(s, OP_HELLO, 0, 0, 0, 0, 0, 0, 0, 0);
}

static int
regress(const char *dir)
{
	static struct seed s;
	int rc = 0;

	regress_l2_up_repeats(&s);
	rc |= save(dir, "finding1_l2_up_repeats", &s);
	regress_refill_two_versions(&s);
	rc |= save(dir, "finding3_refill_two_versions", &s);
	regress_l2_down_twice(&s);
	rc |= save(dir, "finding8_l2_down_twice", &s);
	regress_l2_replace_and_fourth(&s);
	rc |= save(dir, "finding8_l2_replace_needs_a_slot", &s);
	regress_refill_cut_by_loss(&s);
	rc |= save(dir, "refill_cut_by_loss", &s);
	regress_refill_across_epochs(&s);
	rc |= save(dir, "refill_across_epochs", &s);
	/* Reads of the shared level that lie, refused (with a refill lcore). */
	seed_shared(&s, FZ_CFG_REFILL_LCORE);
	rc |= save(dir, "shared_reads_that_lie", &s);
	return rc ? 1 : 0;
}

int
main(int argc, char **argv)
{
	static struct seed s;
	unsigned char refill_lcore;
	int rc = 0;

	if (argc == 3 && strcmp(argv[1], "--regress") == 0)
		return regress(argv[2]);
	if (argc != 2) {
		fprintf(stderr, "usage: fuzz_shard_seeds [--regress] DIR\n");
		return 2;
	}
	for (refill_lcore = 0; refill_lcore < 2; refill_lcore++) {
		unsigned char cfg = refill_lcore ? FZ_CFG_REFILL_LCORE : 0;
		char name[32];

#define SEED(fn, tag)                                                                              \
	do {                                                                                       \
		fn(&s, cfg);                                                                       \
		snprintf(name, sizeof(name), "seed_%s%s", tag, refill_lcore ? "_rl" : "");              \
		rc |= save(argv[1], name, &s);                                                     \
	} while (0)
		SEED(seed_basic, "basic");
		SEED(seed_overwrite, "overwrite");
		SEED(seed_l2, "l2");
		SEED(seed_loss, "loss");
		SEED(seed_space, "space");
		SEED(seed_shared, "shared");
#undef SEED
	}
	seed_reorder(&s, FZ_CFG_MTU_1500 | FZ_CFG_HOLD_REFILLS | FZ_CFG_REFILL_LCORE);
	rc |= save(argv[1], "seed_reorder", &s);
	return rc ? 1 : 0;
}
