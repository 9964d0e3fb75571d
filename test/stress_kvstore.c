/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Two threads on one store, as the app runs them: the owner (ingest side)
 * evicts tokens, overwrites some, streams their bytes in fragments and
 * applies deletes; the reader (refill side) builds refills, checks every
 * byte, and posts deletes to the owner over a ring, as the app's refill lcore
 * does. Each token's bytes must be one whole version: the one published when
 * the refill began or a later one, never a mix.
 *
 * Built twice by `make check`: plain, and with ThreadSanitizer.
 * usage: stress_kvstore [OPS] [SEED]
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kv_harness.h"
#include "test_rng.h"

#define NP 48	   /* prompts */
#define MAXT 2048  /* tokens per prompt at most */
#define B 96	   /* bytes per token */
#define NB 3	   /* buffers */
#define CAP 20000  /* capacity, tokens */
#define G 6	   /* tokens per batch */
#define QN 64	   /* delete ring */
#define SEGMAX 1024

static struct kvstore *s;
static uint64_t pid_of[NP];
/* Owner-written, reader-read (atomics). */
static uint32_t pub[NP];	/* published length (offset 0) */
static uint32_t ver[NP][MAXT];	/* latest version announced, published or about to be */
static int owner_done;
static int stalled;
/* Owner-only. */
static uint32_t claimed[NP];
static uint64_t next_batch = 1;

struct delreq {
	uint32_t prompt, from;
	int result;
	int done;
};
static struct delreq ring[QN];
static uint32_t q_head, q_tail; /* reader produces at tail, owner consumes at head */

static uint64_t ops_owner, ops_reader, refills_ok, refills_refused, tokens_checked,
	verify_failures, deletes_ok, overwrites, enospc_waits, deletes_in_flight, mixed;

static void
apply_deletes(void)
{
	uint32_t h = __atomic_load_n(&q_head, __ATOMIC_RELAXED);

	while (h != __atomic_load_n(&q_tail, __ATOMIC_ACQUIRE)) {
		struct delreq *d = &ring[h % QN];
		uint32_t p = d->prompt;

		if (d->from >= claimed[p]) {
			d->result = -1; /* nothing to delete there (any more) */
		} else {
			struct proto_delete rec = {pid_of[p], 0, d->from, claimed[p] - 1, 0};

			/* Unannounce first: refills chosen from now on stay inside. */
			__atomic_store_n(&pub[p], d->from, __ATOMIC_RELEASE);
			d->result = kvstore_delete(s, &rec);
			if (d->result == 0) {
				claimed[p] = d->from;
				deletes_ok++;
			}
		}
		__atomic_fetch_add(&ops_owner, 1, __ATOMIC_RELAXED);
		__atomic_store_n(&d->done, 1, __ATOMIC_RELEASE);
		h++;
		__atomic_store_n(&q_head, h, __ATOMIC_RELEASE);
	}
}

/* One batch of G tokens: growth mostly, some overwrites; bytes in fragments. */
static int
owner_batch(uint64_t *rng)
{
	struct proto_evict_entry e[G];
	uint64_t pr[G];
	uint32_t tk[G], vv[G], frag, i, off;
	uint16_t codes[G];
	int rc;

again:
	for (i = 0; i < G; i++) {
		uint32_t p = (uint32_t)(test_xorshift(rng) % NP);
		uint32_t t;

		/* Distinct prompts in a batch keep growth simple. */
		for (uint32_t j = 0; j < i; j++)
			if (pr[j] == pid_of[p]) {
				p = (p + 1) % NP;
				j = (uint32_t)-1;
			}
		if (claimed[p] > 0 && (test_xorshift(rng) % 8 == 0 || claimed[p] >= MAXT)) {
			t = (uint32_t)(test_xorshift(rng) % claimed[p]);
			overwrites++;
		} else {
			t = claimed[p];
		}
		e[i] = (struct proto_evict_entry){pid_of[p], t, 1};
		pr[i] = pid_of[p];
		tk[i] = t;
		vv[i] = ver[p][t] + 1;
	}
	rc = kvstore_evict(s, next_batch, 1, G, e, codes, 0);
	if (rc == -ENOSPC) {
		/* Full: wait for the reader's deletes, as the app's ingest does;
		 * they change what the batch may grow, so choose it again. */
		enospc_waits++;
		__atomic_store_n(&stalled, 1, __ATOMIC_RELEASE);
		apply_deletes();
		sched_yield();
		if (__atomic_load_n(&owner_done, __ATOMIC_ACQUIRE) != 0)
			return 0; /* stopping: give up the batch */
		goto again;
	}
	__atomic_store_n(&stalled, 0, __ATOMIC_RELEASE);
	__atomic_fetch_add(&ops_owner, 1, __ATOMIC_RELAXED); /* an executed EVICT */
	if (rc != 0) {
		fprintf(stderr, "stress: evict failed: %d\n", rc);
		return -1;
	}
	for (i = 0; i < G; i++) {
		uint32_t p = 0;

		if (codes[i] != 0) {
			fprintf(stderr, "stress: entry %u refused with %u\n", i, codes[i]);
			return -1;
		}
		while (pid_of[p] != pr[i])
			p++;
		if (tk[i] == claimed[p])
			claimed[p]++;
		/* Announce the version before it can be published. */
		__atomic_store_n(&ver[p][tk[i]], vv[i], __ATOMIC_RELEASE);
	}
	/* The stream in fragments of a random size, the halves swapped. */
	frag = 1 + (uint32_t)(test_xorshift(rng) % (G * B));
	{
		uint8_t stream[G * B];

		for (i = 0; i < G; i++)
			kvh_fill(pr[i], tk[i], vv[i], 0, stream + i * B, B);
		for (off = G * B / 2; off < G * B; off += frag) {
			uint32_t n = G * B - off < frag ? G * B - off : frag;

			if (kvstore_data(s, next_batch, 0, off, G * B, stream + off, n) != 0)
				return -1;
			__atomic_fetch_add(&ops_owner, 1, __ATOMIC_RELAXED);
		}
		for (off = 0; off < G * B / 2; off += frag) {
			uint32_t n = G * B / 2 - off < frag ? G * B / 2 - off : frag;

			if (kvstore_data(s, next_batch, 0, off, G * B, stream + off, n) != 0)
				return -1;
			__atomic_fetch_add(&ops_owner, 1, __ATOMIC_RELAXED);
		}
	}
	if (kvstore_batches_complete(s) != next_batch) {
		fprintf(stderr, "stress: batch %" PRIu64 " not complete\n", next_batch);
		return -1;
	}
	next_batch++;
	for (i = 0; i < G; i++) {
		uint32_t p = 0;

		while (pid_of[p] != pr[i])
			p++;
		if (tk[i] + 1 > __atomic_load_n(&pub[p], __ATOMIC_RELAXED))
			__atomic_store_n(&pub[p], tk[i] + 1, __ATOMIC_RELEASE);
	}
	return 0;
}

struct owner_arg {
	uint64_t ops;
	uint64_t seed;
	int rc;
};

/*
 * The owner evicts until told to stop (by then both sides did their share,
 * whatever the machine's load), serving the reader's deletes throughout.
 */
static void *
owner(void *argp)
{
	struct owner_arg *a = argp;
	uint64_t rng = a->seed | 1;

	while (__atomic_load_n(&owner_done, __ATOMIC_ACQUIRE) == 0) {
		apply_deletes();
		if (owner_batch(&rng) != 0) {
			__atomic_store_n(&a->rc, 1, __ATOMIC_RELAXED);
			break;
		}
	}
	while (__atomic_load_n(&owner_done, __ATOMIC_ACQUIRE) != 2) {
		apply_deletes();
		sched_yield();
	}
	return NULL;
}

static int
post_delete(uint32_t p, uint32_t from)
{
	uint32_t t = __atomic_load_n(&q_tail, __ATOMIC_RELAXED);
	struct delreq *d = &ring[t % QN];

	while (t - __atomic_load_n(&q_head, __ATOMIC_ACQUIRE) >= QN)
		sched_yield();
	d->prompt = p;
	d->from = from;
	__atomic_store_n(&d->done, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&q_tail, t + 1, __ATOMIC_RELEASE);
	/* Wait for it, as the refill queue is in order. */
	while (!__atomic_load_n(&d->done, __ATOMIC_ACQUIRE))
		sched_yield();
	ops_reader++;
	return d->result;
}

static void
reader_refill(uint64_t *rng)
{
	uint32_t p = (uint32_t)(test_xorshift(rng) % NP), n = __atomic_load_n(&pub[p], __ATOMIC_ACQUIRE);
	uint32_t a, k, t, b;
	static uint32_t lo[MAXT], seen[MAXT];
	static uint8_t got[MAXT * (B / NB)], want[B];
	struct proto_refill_chunk ch;
	struct kvstore_refill *r;
	uint16_t code;
	static struct kvstore_seg segs[NB][SEGMAX];
	unsigned int nseg[NB];

	if (n == 0)
		return;
	a = (uint32_t)(test_xorshift(rng) % n);
	k = 1 + (uint32_t)(test_xorshift(rng) % (n - a < 256 ? n - a : 256));
	for (t = 0; t < k; t++)
		lo[t] = __atomic_load_n(&ver[p][a + t], __ATOMIC_ACQUIRE);
	ch = (struct proto_refill_chunk){pid_of[p], a, k};
	r = kvstore_refill_begin(s, 0, &ch, 1, &code);
	ops_reader++;
	if (r == NULL) {
		/* The owner shrank it meanwhile (a delete we posted earlier, or
		 * growth we read ahead of): legal, but it must be a range error. */
		if (code != PROTO_E_RANGE && code != PROTO_E_UNKNOWN_PROMPT)
			verify_failures++;
		refills_refused++;
		return;
	}
	/* Take every segment first, as the app queues them on mbufs ... */
	for (b = 0; b < NB; b++) {
		struct kvstore_refill_pos pos;
		unsigned int ns;

		memset(&pos, 0, sizeof(pos));
		nseg[b] = 0;
		while ((ns = kvstore_refill_next(r, (uint16_t)b, &pos, 64 + (uint32_t)(test_xorshift(rng) % 4096),
						 segs[b] + nseg[b], SEGMAX - nseg[b])) > 0) {
			ops_reader++;
			nseg[b] += ns;
		}
	}
	/* ... then, sometimes, delete while they are in flight (this prompt or another). */
	if (test_xorshift(rng) % 3 == 0) {
		uint32_t q = test_xorshift(rng) % 2 ? p : (uint32_t)(test_xorshift(rng) % NP);
		uint32_t nq = __atomic_load_n(&pub[q], __ATOMIC_ACQUIRE);

		if (post_delete(q, nq ? (uint32_t)(test_xorshift(rng) % nq) : 0) == 0)
			deletes_in_flight++;
	}
	for (b = 0; b < NB; b++) {
		uint64_t total = 0;
		unsigned int i;

		for (i = 0; i < nseg[b]; i++) {
			memcpy(got + total, segs[b][i].addr, segs[b][i].len);
			total += segs[b][i].len;
		}
		if (total != (uint64_t)k * (B / NB))
			verify_failures++;
		for (t = 0; t < k; t++) {
			uint32_t hi = __atomic_load_n(&ver[p][a + t], __ATOMIC_ACQUIRE), v;
			bool ok = false;

			/* The store held the announced version or the one before it. */
			for (v = lo[t] ? lo[t] - 1 : 0; v <= hi && !ok; v++) {
				kvh_fill(pid_of[p], a + t, v, 0, want, B);
				ok = memcmp(got + (size_t)t * (B / NB), want + b * (B / NB), B / NB) == 0;
			}
			tokens_checked++;
			if (!ok) {
				if (verify_failures < 5)
					fprintf(stderr, "stress: prompt %u token %u buffer %u: bytes of no "
							"version in [%u, %u]\n", p, a + t, b, lo[t], hi);
				verify_failures++;
			} else if (b == 0) {
				seen[t] = v - 1; /* the version buffer 0 holds */
			} else if (seen[t] != v - 1) {
				/* Each buffer whole but of another version: bytes of none. */
				if (verify_failures < 5)
					fprintf(stderr, "stress: prompt %u token %u: buffer 0 of version "
							"%u, buffer %u of version %u\n", p, a + t, seen[t],
						b, v - 1);
				verify_failures++;
				mixed++;
			}
		}
	}
	kvstore_refill_end(r);
	ops_reader++;
	refills_ok++;
}

static int
oa_rc_ok(const struct owner_arg *oa)
{
	return __atomic_load_n(&oa->rc, __ATOMIC_RELAXED) == 0;
}

int
main(int argc, char **argv)
{
	time_t t_start;
	uint64_t ops = argc > 1 ? strtoull(argv[1], NULL, 0) : 1000000;
	uint64_t seed = argc > 2 ? strtoull(argv[2], NULL, 0) : (uint64_t)time(NULL);
	struct kvstore_params prm = {.num_caches = 1, .max_prompts = 256, .max_batch_entries = G};
	struct owner_arg oa = {.seed = seed};
	struct kvstore_cache_stats st;
	uint64_t rng = seed * 7 + 3, total;
	pthread_t th;
	void *mem;
	int i;

	printf("stress: seed %" PRIu64 " (stress_kvstore OPS SEED replays it)\n", seed);
	prm.cache[0] = (struct kvstore_cache_params){B, NB, CAP};
	s = kvh_create(&prm, &mem);
	if (s == NULL)
		return 2;
	for (i = 0; i < NP; i++)
		pid_of[i] = 0x1000000000ull * (uint64_t)(i + 1) + 7;
	/*
	 * Until both sides did @ops operations (the reader a quarter at least)
	 * and the reader checked enough refills, some with deletes under them;
	 * or two minutes passed (then the check below fails).
	 */
	oa.ops = ops / 2;
	t_start = time(NULL);
	pthread_create(&th, NULL, owner, &oa);
	while ((__atomic_load_n(&ops_owner, __ATOMIC_RELAXED) + ops_reader < ops ||
		ops_reader < ops / 4 || refills_ok < 2000 || deletes_in_flight < 200) &&
	       time(NULL) - t_start < 120 && oa_rc_ok(&oa)) {
		uint32_t p = (uint32_t)(test_xorshift(&rng) % NP);

		if (__atomic_load_n(&stalled, __ATOMIC_ACQUIRE) || test_xorshift(&rng) % 64 == 0) {
			uint32_t n = __atomic_load_n(&pub[p], __ATOMIC_ACQUIRE);

			if (post_delete(p, n ? (uint32_t)(test_xorshift(&rng) % n) : 0) == 0)
				continue;
		}
		reader_refill(&rng);
	}
	__atomic_store_n(&owner_done, 1, __ATOMIC_RELEASE);
	/* The owner may be waiting for room: serve nothing more, let it see the flag. */
	__atomic_store_n(&owner_done, 2, __ATOMIC_RELEASE);
	pthread_join(th, NULL);

	kvstore_cache_stats(s, 0, &st);
	total = ops_owner + ops_reader;
	printf("stress: %" PRIu64 " operations (owner %" PRIu64 ", reader %" PRIu64 "): "
	       "%" PRIu64 " refills checked (%" PRIu64 " tokens x %d buffers), %" PRIu64
	       " refused by races, %" PRIu64 " deletes (%" PRIu64 " under a refill), %" PRIu64 " overwrites, %" PRIu64
	       " waits for space; stored %" PRIu64 "/%d, limbo %" PRIu64 "\n",
	       total, ops_owner, ops_reader, refills_ok, tokens_checked / NB, NB, refills_refused,
	       deletes_ok, deletes_in_flight, overwrites, enospc_waits, st.stored_tokens, CAP, st.limbo_slots);
	free(mem);
	if (oa.rc != 0 || verify_failures != 0 || total < ops || refills_ok < 1000 ||
	    deletes_ok < 100 || deletes_in_flight < 100) {
		printf("stress: 0 passed, 1 failed (%" PRIu64 " verify failures, %" PRIu64
		       " tokens of two versions)\n", verify_failures, mixed);
		return 1;
	}
	printf("stress: 1 passed, 0 failed\n");
	return 0;
}
