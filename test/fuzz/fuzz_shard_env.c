/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The process around the shard under fuzzing (fuzz_shard.c has the
 * design): what main.c, app.c and portgate.c are to the kvss binary, with
 * the seams the harness needs.
 *
 *  - EAL, once: rte_mempool and rte_ring need its memory (level.c's requests,
 *    the mbufs, the refill lcore's rings). No port: kvss_rx_burst and
 *    kvss_tx_burst are the harness's (portgate.c's are not linked), so
 *    what the shard receives is the input and what it sends is checked.
 *  - The shard's lcores and threads take turns, never two at once, so
 *    that a run is a function of its input; and they are all this
 *    process's one thread, each on a stack of its own (fibers, below), so
 *    that a turn is a switch of stacks, not a hand-off that waits for the
 *    kernel to schedule another thread. The ingest lcore is the fuzzer's
 *    own stack (kvss_shard_ingest, whose every poll begins in the rx hook,
 *    the scheduler); the refill lcore, when the input has one, runs
 *    kvss_shard_refill only while the scheduler gives it a turn, until its
 *    next poll ends, it waits for the ingest lcore, or (the input says
 *    when) it has sent so many REFILL_DATA frames: a refill stopped halfway
 *    while batches complete is the race with an overwrite, explored in a
 *    fixed order.
 *  - The tier thread (level.c's level_main over level_disk.c, the real one, started by level.c
 *    and made a fiber by the link's --wrap of pthread_create) parks,
 *    through the --wrap of kvdisk_inflight, where it would otherwise sleep
 *    idle: nothing to do, nothing on the disk, every request answered. The
 *    scheduler gives it its turn between two polls of the ingest lcore,
 *    until it parks again: what one poll gave it, it sees at once, whole,
 *    and it answers before the next.
 *  - The shared level's thread (level_main over level_shared.c, the real one, a fiber
 *    too) takes its turn beside the tier thread's, over lib/shared's API
 *    in memory (fuzz_shard_rados.c: a cluster that lies as the input
 *    says); it parks there when it can do nothing more without the input.
 *  - level.c's requests live in a DPDK mempool, where AddressSanitizer sees
 *    nothing: the gaps between its objects are poisoned, so that writing
 *    past one (as an L2_UP naming one token 200 times once did) is a
 *    report, not a heap quietly broken.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <sanitizer/asan_interface.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_lcore.h>
#include <rte_mbuf.h>
#include <rte_mempool.h>
#include <rte_ring.h>

#include "fuzz_shard.h"
#include "kvdisk.h"
#include "kvdisk_priv.h"
#include "kvss.h"
#include "shard/shard.h"

/* ---- What app.c and main.c define -------------------------------------- */

struct kvss_app kvss;
static struct shard_state fz_state;
struct kvss_shard_inst kvss_shards[KVSS_MAX_LOCAL_SHARDS] = {
	[0] = {.cfg = &kvss.cfg.local[0], .st = &fz_state},
	[1] = {.cfg = &kvss.cfg.local[1]},
	[2] = {.cfg = &kvss.cfg.local[2]},
	[3] = {.cfg = &kvss.cfg.local[3]},
};
struct kvss_shard_inst *const fz_shard = &kvss_shards[0]; /* the one shard fuzzed */

struct rte_mempool *fz_rx_pool;

void
kvss_stats_total(struct kvss_lcore_stats *t)
{
	unsigned int l;
	int r;

	memset(t, 0, sizeof(*t));
	for (l = 0; l < RTE_MAX_LCORE; l++) {
		const struct kvss_lcore_stats *s = &kvss.stats[l];

#define KVSS_STAT_ADD(n) t->n += s->n;
		KVSS_STATS(KVSS_STAT_ADD)
#undef KVSS_STAT_ADD
		for (r = 0; r < PROTO_R_MAX; r++)
			t->drops[r] += s->drops[r];
	}
}
static char l2_dir[64];
static size_t store_len;

/* ---- Fibers: the shard's threads as coroutines of this one --------------- */

/*
 * Each of the shard's other threads (the refill lcore, the second tier's worker (level.c, level_disk.c),
 * level_shared.c's) runs on a stack of its own in this thread, and only when
 * the scheduler switches to it; it switches back where the thread would
 * wait for the others (its turn is over). A switch is a switch of stacks
 * (fiber_switch, below), not a semaphore hand-off between threads that
 * the kernel must schedule in turn (hundreds of microseconds on a loaded
 * machine, at every poll).
 *
 * What is thread-local to the shard's code and differs between its
 * threads is switched with them: the lcore id (the refill lcore's stats
 * and batchers are lcore 1's, as in kvss; the tier and shared threads are
 * no lcore) and errno. The shard's __thread statics are each used by one
 * of its threads only (the refill lcore's are its own when it runs, the
 * ingest lcore's otherwise), so the threads sharing them changes nothing;
 * and what lasts from one poll to the next is the shard's (struct
 * shard_state, zeroed for each input), not a static of its code, so that
 * no input's run depends on the inputs before it. (Two statics do last:
 * the refill contexts, each ended with its mbufs before an input ends,
 * and when a cut batch was last said, which quiets a message only.)
 * AddressSanitizer is told of every switch (its stack bounds).
 */
#define FIBER_STACK (256u << 10)

/*
 * The switch: the callee-saved registers pushed on the stack left, its
 * stack pointer stored, the other's loaded and its registers popped. Not
 * libc's swapcontext: that one saves and sets the signal mask, a system
 * call at every switch (thousands an input); and not AddressSanitizer's
 * interceptor of it, which unpoisons the whole stack it switches to (the
 * redzones of the frames waiting on it lost). The annotations below tell
 * AddressSanitizer what it needs. Nothing here changes the floating-point
 * control words, so they are not switched.
 */
#if !defined(__x86_64__)
#error "fuzz_shard's fibers switch stacks for x86-64 only"
#endif
void fiber_switch(void **save_sp, void *load_sp);
__asm__(".text\n"
	".globl fiber_switch\n"
	".type fiber_switch, @function\n"
	"fiber_switch:\n"
	"	pushq %rbp\n"
	"	pushq %rbx\n"
	"	pushq %r12\n"
	"	pushq %r13\n"
	"	pushq %r14\n"
	"	pushq %r15\n"
	"	movq %rsp, (%rdi)\n"
	"	movq %rsi, %rsp\n"
	"	popq %r15\n"
	"	popq %r14\n"
	"	popq %r13\n"
	"	popq %r12\n"
	"	popq %rbx\n"
	"	popq %rbp\n"
	"	ret\n"
	".size fiber_switch, .-fiber_switch\n");

struct fiber {
	void *sp; /* where its stack was left (fiber_switch) */
	void *stack;
	void *(*fn)(void *);
	void *arg;
	char name[16];
	unsigned int lcore; /* its rte_lcore_id() */
	bool done;
};

static void *sched_sp;		 /* the scheduler's (the ingest lcore's) stack, left */
static const void *sched_bottom; /* its stack, for AddressSanitizer */
static size_t sched_size;
static __thread struct fiber *cur; /* the fiber running (NULL: the ingest lcore) */

/* Where a fiber begins: its first switch returns here (fiber_make's frame). */
static void __attribute__((noreturn))
fiber_start(void)
{
	struct fiber *f = cur;
	void *gone;

	__sanitizer_finish_switch_fiber(NULL, &sched_bottom, &sched_size);
	f->fn(f->arg);
	f->done = true;
	/* Gone: switched away from for good (its fake stack, if any, freed). */
	__sanitizer_start_switch_fiber(NULL, sched_bottom, sched_size);
	fiber_switch(&gone, sched_sp);
	__builtin_unreachable();
}

/* Make @p f (its stack reused) to run @p fn from the start at its next turn. */
static void
fiber_make(struct fiber *f, void *(*fn)(void *), void *arg, unsigned int lcore)
{
	uintptr_t *top;

	if (f->stack == NULL && (f->stack = malloc(FIBER_STACK)) == NULL)
		fz_fail("no memory for a fiber's stack");
	/* What a fiber left poisoned on it (its last frames never returned). */
	ASAN_UNPOISON_MEMORY_REGION(f->stack, FIBER_STACK);
	f->fn = fn;
	f->arg = arg;
	f->lcore = lcore;
	f->done = false;
	/*
	 * Its stack as fiber_switch leaves one: six registers (zero) and the
	 * address it returns to, fiber_start, entered as if called: a return
	 * address of 0 above, at a stack pointer 8 past a 16-byte boundary.
	 */
	top = (uintptr_t *)(((uintptr_t)f->stack + FIBER_STACK) & ~(uintptr_t)15);
	*--top = 0;
	*--top = (uintptr_t)fiber_start;
	top -= 6;
	memset(top, 0, 6 * sizeof(*top));
	f->sp = top;
}

/* The scheduler gives @p f its turn: until it yields or ends. */
static void
fiber_run(struct fiber *f)
{
	unsigned int lcore = RTE_PER_LCORE(_lcore_id);
	int e = errno;
	void *fake = NULL;

	if (f->done)
		return;
	cur = f;
	RTE_PER_LCORE(_lcore_id) = f->lcore;
	__sanitizer_start_switch_fiber(&fake, f->stack, FIBER_STACK);
	fiber_switch(&sched_sp, f->sp);
	__sanitizer_finish_switch_fiber(fake, NULL, NULL);
	cur = NULL;
	RTE_PER_LCORE(_lcore_id) = lcore;
	errno = e;
}

/* The fiber running ends its turn: back to the scheduler, until its next. */
static void
fiber_yield(void)
{
	struct fiber *f = cur;
	int e = errno;
	void *fake = NULL;

	__sanitizer_start_switch_fiber(&fake, sched_bottom, sched_size);
	fiber_switch(&f->sp, sched_sp);
	__sanitizer_finish_switch_fiber(fake, &sched_bottom, &sched_size);
	errno = e;
}

/*
 * level.c starts the levels' workers with pthread_create (the link wraps
 * it): while the shard opens its second tier, each one is made a fiber,
 * run at the scheduler's call. Any other thread is a thread.
 */
#define FIBERS_MAX 4
static struct fiber fibers[FIBERS_MAX];
static unsigned int nfibers;
static bool make_fibers;

int __real_pthread_create(pthread_t *t, const pthread_attr_t *a, void *(*fn)(void *), void *arg);
int __wrap_pthread_create(pthread_t *t, const pthread_attr_t *a, void *(*fn)(void *), void *arg);
int __real_pthread_setname_np(pthread_t t, const char *name);
int __wrap_pthread_setname_np(pthread_t t, const char *name);

int
__wrap_pthread_create(pthread_t *t, const pthread_attr_t *a, void *(*fn)(void *), void *arg)
{
	struct fiber *f;

	if (!make_fibers)
		return __real_pthread_create(t, a, fn, arg);
	if (nfibers == FIBERS_MAX)
		return EAGAIN;
	f = &fibers[nfibers++];
	fiber_make(f, fn, arg, LCORE_ID_ANY);
	*t = (pthread_t)(uintptr_t)f;
	return 0;
}

int
__wrap_pthread_setname_np(pthread_t t, const char *name)
{
	unsigned int i;

	for (i = 0; i < nfibers; i++)
		if ((pthread_t)(uintptr_t)&fibers[i] == t) {
			snprintf(fibers[i].name, sizeof(fibers[i].name), "%s", name);
			return 0;
		}
	return __real_pthread_setname_np(t, name);
}

/*
 * The tier and shared-level threads sleep a few microseconds when a round
 * of theirs found nothing to do (level_disk.c, level_shared.c; the link wraps
 * nanosleep): beside the others that is a pause, but a fiber's sleep is the
 * whole process's, and what it waits for can only come in its own next
 * round (the others run only when it yields). So a fiber's sleep ends at
 * once: it goes round again, as a thread woken would, until it parks. The
 * first round after a park is one such (it dequeued before parking).
 */
int __real_nanosleep(const struct timespec *req, struct timespec *rem);
int __wrap_nanosleep(const struct timespec *req, struct timespec *rem);

int
__wrap_nanosleep(const struct timespec *req, struct timespec *rem)
{
	if (cur == NULL)
		return __real_nanosleep(req, rem);
	if (rem != NULL)
		*rem = (struct timespec){0, 0};
	return 0;
}

static struct fiber *
fiber_named(const char *name)
{
	unsigned int i;

	for (i = 0; i < nfibers; i++)
		if (strcmp(fibers[i].name, name) == 0)
			return &fibers[i];
	return NULL;
}

/* ---- The refill lcore: a fiber that runs only on its turn --------------- */

enum { Y_NONE, Y_IDLE, Y_BUSY, Y_WAIT, Y_FRAMES, Y_EXIT };

static struct {
	struct fiber f;
	bool running;
	unsigned int stop_at; /* REFILL_DATA frames of this turn before it stops (0: never) */
	unsigned int frames;
	int why; /* how its last turn ended (Y_*) */
} rl;

static bool
on_refill_lcore(void)
{
	return cur == &rl.f;
}

static void
refill_yield(int why)
{
	if (__atomic_load_n(&kvss.quit, __ATOMIC_ACQUIRE))
		return; /* the input is over: it runs to its end */
	rl.why = why;
	fiber_yield();
	rl.frames = 0;
}

static void *
refill_main(void *arg)
{
	(void)arg;
	kvss_shard_refill(NULL);
	rl.why = Y_EXIT;
	return NULL;
}

void
fz_refill_turn(unsigned int frames)
{
	if (!rl.running || rl.why == Y_EXIT)
		return;
	rl.stop_at = frames;
	rl.frames = 0;
	fiber_run(&rl.f);
}

bool
fz_refill_idle(void)
{
	return !rl.running || rl.why == Y_IDLE || rl.why == Y_EXIT;
}

/* ---- Hooks: what portgate.c and app.c give the lcores ------------------- */

static unsigned int rx_given; /* frames the ingest lcore took this input (fz_env_begin) */
static bool check_reset;      /* FUZZ_SHARD_CHECK_RESET=1 */

uint16_t
kvss_rx_burst(uint16_t port, uint16_t queue, struct rte_mbuf **pkts, uint16_t n)
{
	uint16_t k;

	(void)port;
	(void)queue;
	k = fz_sched(pkts, n);
	rx_given += k;
	return k;
}

uint16_t
kvss_rx_burst_read(uint16_t port, uint16_t queue, struct rte_mbuf **pkts, uint16_t n, bool *read)
{
	*read = true; /* no gate here: the queue is always read */
	return kvss_rx_burst(port, queue, pkts, n);
}

uint16_t
kvss_tx_burst(uint16_t port, uint16_t queue, struct rte_mbuf **pkts, uint16_t n)
{
	uint16_t i;

	(void)port;
	for (i = 0; i < n; i++)
		if (!fz_check_tx(pkts[i], queue))
			rte_pktmbuf_free(pkts[i]);
	if (on_refill_lcore() && queue == 1) {
		rl.frames += n;
		if (rl.stop_at != 0 && rl.frames >= rl.stop_at)
			refill_yield(Y_FRAMES);
	}
	return n;
}

int
kvss_gate_shut(void)
{
	return 0;
}

void
kvss_intr_watch(uint16_t port, uint16_t q)
{
	(void)port;
	(void)q;
}

uint64_t
kvss_poll_busy(struct kvss_lcore_stats *st, uint64_t t0, unsigned int *empty)
{
	(void)t0;
	*empty = 0;
	st->busy_polls++;
	if (on_refill_lcore())
		refill_yield(Y_BUSY);
	return 0; /* no time here: a poll's cycles are not the fuzzer's to give */
}

void
kvss_poll_idle(struct kvss_lcore_stats *st, uint64_t t0, unsigned int *empty)
{
	(void)t0;
	(void)empty;
	st->idle_polls++;
	if (on_refill_lcore())
		refill_yield(Y_IDLE);
}

void
kvss_wait_turn(unsigned int *turns)
{
	(void)turns;
	if (on_refill_lcore())
		refill_yield(Y_WAIT); /* it waits for the ingest lcore: its turn */
	else if (cur != NULL)
		fiber_yield(); /* the tier thread, its results' ring full: the ingest lcore's turn */
}

/* ---- The tier thread's gate ---------------------------------------------- */

static struct {
	int gated; /* the scheduler has the rings: park when idle */
	struct fiber *f;
	struct rte_ring *to, *from;
	struct rte_mempool *pool;
	struct kvdisk *d; /* learnt where it parks: the harness empties it between inputs */
} tier;

unsigned int __real_kvdisk_inflight(const struct kvdisk *d);
unsigned int __wrap_kvdisk_inflight(const struct kvdisk *d);

/*
 * the second tier's worker (level.c, level_disk.c) asks this before it sleeps idle, and while it retries
 * a request. Idle with everything answered: it parks (its turn ends) until
 * the scheduler has more for it; then 1, so that it goes round once more
 * (a reap that finds nothing) instead of sleeping. Idle with only deletes
 * waiting for a put to take their slot (kvdisk_deferred()), it makes them
 * due now, to be written in its next rounds, and parks once they are: they
 * would wait their 50 ms of wall time otherwise, and be written at a
 * moment that depends on the machine, not on the input. A put in the same
 * input still takes a waiting delete's slot (its absorption path), before
 * the thread is idle.
 */
unsigned int
__wrap_kvdisk_inflight(const struct kvdisk *d)
{
	unsigned int n = __real_kvdisk_inflight(d), deferred = kvdisk_deferred(d);
	/* The pool's requests in use are the tier's answered ones, those of
	 * the shared level's thread (fuzz_shard_rados.c counts them), and one
	 * each waiting delete holds until its header is written or absorbed. */
	bool idle = __atomic_load_n(&tier.gated, __ATOMIC_ACQUIRE) && rte_ring_count(tier.to) == 0 &&
		    rte_mempool_in_use_count(tier.pool) ==
			    rte_ring_count(tier.from) + fz_sh_outstanding() + deferred;

	if (idle && n != 0 && n == deferred) {
		kvdisk_flush((struct kvdisk *)(uintptr_t)d);
		return n;
	}
	if (n != 0 || !idle)
		return n;
	tier.d = (struct kvdisk *)(uintptr_t)d;
	fiber_yield();
	return 1;
}

/*
 * The second tier's writes and reads, answered before kvdisk looks for them:
 * it submits, then peeks at the completions, and whether the kernel had
 * finished an op by then (a slot cleared, so free for a put) was a race
 * with the kernel's workers. Every op in flight has completed when the
 * submit returns, as on a disk that answers at once.
 */
int __real_io_uring_submit(struct io_uring *ring);
int __wrap_io_uring_submit(struct io_uring *ring);

int
__wrap_io_uring_submit(struct io_uring *ring)
{
	int rc = __real_io_uring_submit(ring);
	struct io_uring_cqe *cqe;

	if (tier.d != NULL && ring == &tier.d->ring)
		while (io_uring_cq_ready(ring) < tier.d->inflight)
			if (io_uring_wait_cqe_nr(ring, &cqe, tier.d->inflight) != 0)
				break;
	return rc;
}

void
fz_tier_settle(void)
{
	if (tier.to != NULL && rte_ring_count(tier.to) != 0)
		fiber_run(tier.f);
	fz_sh_settle(); /* and the shared level's thread: the two touch nothing in common */
}

/* The shared level's thread's turn (fuzz_shard_rados.c: when it has something to do). */
void
fz_sh_turn(void)
{
	fiber_run(fiber_named("kvss-shared"));
}

/* The shared level's thread ends its turn (it parks). */
void
fz_sh_park(void)
{
	fiber_yield();
}

unsigned int
fz_tier_backlog(void)
{
	return tier.pool == NULL ? 0 : rte_mempool_in_use_count(tier.pool);
}

static void
inv_take(void *arg, const struct kvdisk_meta *m)
{
	struct kvdisk_meta *all = arg;
	unsigned int i;

	for (i = 0; i < FZ_CACHES * FZ_L2_SLOTS * 2; i++)
		if (all[i].key == 0 && all[i].org == 0) {
			all[i] = *m;
			return;
		}
}

/* Every column gone (the tier thread is parked): each input starts on an empty L2. */
static void
tier_empty(void)
{
	struct kvdisk_meta all[FZ_CACHES * FZ_L2_SLOTS * 2];
	struct kvdisk_done done[32];
	unsigned int i;

	if (tier.d == NULL)
		return;
	memset(all, 0, sizeof(all));
	kvdisk_foreach(tier.d, inv_take, all);
	for (i = 0; i < RTE_DIM(all); i++) {
		if (all[i].key == 0 && all[i].org == 0)
			continue;
		while (kvdisk_del(tier.d, all[i].cache, all[i].key, all[i].org, 0) == -EBUSY)
			kvdisk_poll(tier.d, done, 32, true);
	}
	while (__real_kvdisk_inflight(tier.d) > 0)
		kvdisk_poll(tier.d, done, 32, true);
}

/*
 * The second tier's index as it was opened, on an empty file (fz_env_init):
 * each input's starts from it. Emptied (tier_empty), the index holds no
 * column, but the order of its free slots and of its ops is the last
 * input's (a deleted column's slot is given first), and which slot a column
 * takes, so which the inventory lists first, would depend on the inputs
 * before. The file's headers are all cleared by then, as on a new file; the
 * io_uring ring goes on as it is (its heads are the kernel's too).
 */
static struct {
	struct kvdisk d;
	struct slot *s[KVDISK_MAX_CACHES];
	uint32_t *bucket[KVDISK_MAX_CACHES], *free[KVDISK_MAX_CACHES];
	struct op *ops;
} disk0;

static void *
dup_mem(const void *p, size_t n)
{
	void *q = malloc(n);

	if (q == NULL)
		fz_fail("no memory for the second tier's first index");
	return memcpy(q, p, n);
}

static void
disk_snapshot(void)
{
	const struct kvdisk *d = tier.d;
	unsigned int c;

	if (d == NULL)
		fz_fail("the tier thread did not park on its kvdisk");
	disk0.d = *d;
	for (c = 0; c < d->nc; c++) {
		const struct region *r = &d->r[c];

		disk0.s[c] = dup_mem(r->s, r->g.slots * sizeof(r->s[0]));
		disk0.bucket[c] = dup_mem(r->bucket, r->nbucket * sizeof(r->bucket[0]));
		disk0.free[c] = dup_mem(r->free, r->g.slots * sizeof(r->free[0]));
	}
	disk0.ops = dup_mem(d->ops, d->qd * sizeof(d->ops[0]));
}

/* The index as opened (tier_empty has left it empty, nothing in flight). */
static void
disk_restore(void)
{
	struct kvdisk *d = tier.d;
	struct io_uring ring;
	uint64_t back;
	unsigned int c;

	if (d == NULL || disk0.ops == NULL)
		return;
	if (d->inflight != 0 || d->unsubmitted != 0 || d->nclears != 0 || d->npend != 0 ||
	    d->nheld != 0 || d->nready != 0)
		fz_fail("reset: the second tier is not idle (%u in flight, %u unsubmitted, "
			"%u clears, %u deferred, %u held, %u ready)",
			d->inflight, d->unsubmitted, d->nclears, d->npend, d->nheld, d->nready);
	for (c = 0; c < d->nc; c++) {
		struct region *r = &d->r[c];
		uint32_t i;

		for (i = 0; i < r->g.slots; i++)
			if (r->s[i].state != S_FREE || r->s[i].readers != 0)
				fz_fail("reset: slot %u of cache %u of the second tier is in use", i, c);
		memcpy(r->s, disk0.s[c], r->g.slots * sizeof(r->s[0]));
		memcpy(r->bucket, disk0.bucket[c], r->nbucket * sizeof(r->bucket[0]));
		memcpy(r->free, disk0.free[c], r->g.slots * sizeof(r->free[0]));
	}
	memcpy(d->ops, disk0.ops, d->qd * sizeof(d->ops[0]));
	ring = d->ring;
	back = d->ops_back;
	*d = disk0.d;
	d->ring = ring;
	/* The count of ops given back only grows, as in a process: the tier
	 * thread tries its waiting requests again when it differs from the one
	 * it last saw (level_disk.c), and a count put back to the first
	 * input's met that one again in a later input, whose waiting write was
	 * then never tried (a hang the campaign found). */
	d->ops_back = back;
}

/* The gaps around each request object, poisoned: level_msg.c must stay inside its own. */
static void
poison_obj(struct rte_mempool *mp, void *opaque, void *obj, unsigned int idx)
{
	uint8_t *o = obj;

	(void)opaque;
	(void)idx;
	ASAN_POISON_MEMORY_REGION(o - mp->header_size, mp->header_size);
	ASAN_POISON_MEMORY_REGION(o + mp->elt_size, mp->trailer_size);
}

/* ---- The clock ------------------------------------------------------------- */

/*
 * What the code under test reads for clock_gettime (the Makefile renames its
 * calls): a clock of the input's, the same at every run of it. The second
 * tier's deletes are deferred for 50 ms of it and the shared level's reads
 * time out after shared.op_timeout_ms; by the wall clock, whether they had
 * by a given poll depended on how fast the machine ran the input, and the
 * input's run with it. It starts at the same instant for each input and
 * moves a nanosecond a reading (it never stands still, and no wait ends by
 * it within an input: the harness makes deferred deletes due when the tier
 * is idle, and the cluster answers what it holds when the input says).
 */
#define FZ_CLOCK_MONO_NS 1000000000000ull	       /* a machine up for 1,000 s */
#define FZ_CLOCK_REAL_NS 1798761600000000000ull /* 2027-01-01 00:00:00 UTC */

static uint64_t clock_ns; /* readings of this input */

int fz_clock_gettime(clockid_t clk, struct timespec *ts);

int
fz_clock_gettime(clockid_t clk, struct timespec *ts)
{
	uint64_t t = clock_ns++;

	t += clk == CLOCK_REALTIME || clk == CLOCK_REALTIME_COARSE ? FZ_CLOCK_REAL_NS
								    : FZ_CLOCK_MONO_NS;
	ts->tv_sec = (time_t)(t / 1000000000ull);
	ts->tv_nsec = (long)(t % 1000000000ull);
	return 0;
}

/* ---- Start, and each input ------------------------------------------------ */

static void
shard_config(void)
{
	static const uint8_t smac[6] = {0x02, 0, 0, 0, 0, 0x02}, wmac[6] = {0x02, 0, 0, 0, 0, 0x01};
	struct kvss_shard_cfg *c = &kvss.cfg.local[0];

	kvss.cfg.udp = proto_ports_default;
	kvss.cfg.mtu = 9000;
	kvss.cfg.poll = KVSS_POLL_BUSY;
	kvss.epoch = 0x5eed5eed;
	c->port = 0;
	c->id = 0;
	c->model = 0;
	memcpy(c->addr.mac, smac, 6);
	c->addr.ipv4 = 0x0a000002;
	memcpy(c->wafer.mac, wmac, 6);
	c->wafer.ipv4 = 0x0a000001;
	c->store = (struct kvstore_params){
		.num_caches = FZ_CACHES,
		.cache = {{FZ_B0, FZ_B0 / FZ_SLICE, FZ_CAPACITY},
			  {FZ_B1, FZ_B1 / FZ_SLICE, FZ_CAPACITY}},
		/* Small, so that every limit is reached: prompts, spare slots
		 * (overwrites in flight), open batches, refills in flight. */
		.max_prompts = 12,
		.spare_tokens = 24,
		.max_open_batches = 8,
		.max_refills = 8,
		.max_refill_chunks = 4,
	};
	/* Wall time never fires a timeout (the shard's clock is slowed,
	 * fz_env_begin); OP_TIME fires them all at once. */
	c->batch_timeout_ms = 50;
	c->space_timeout_ms = 100;
	c->status_interval_ms = 3600000;
	c->routed = KVSS_ROUTED_WARN;
	snprintf(c->l2.path, sizeof(c->l2.path), "%s/shard.l2", l2_dir);
	c->l2.column = FZ_COLUMN;
	c->l2.queue_depth = 8;
	c->l2.op_timeout_ms = 10000; /* the configuration's default */
	c->l2.capacity_tokens[0] = c->l2.capacity_tokens[1] = FZ_COLUMN * FZ_L2_SLOTS;
	/* The shared level (fuzz_shard_rados.c stands in for the cluster): a
	 * depth small enough to be reached, and the writes' backlog with it. */
	snprintf(kvss.cfg.shared.conf, sizeof(kvss.cfg.shared.conf), "(fuzz_shard_rados.c)");
	snprintf(kvss.cfg.shared.pool, sizeof(kvss.cfg.shared.pool), "kvss");
	snprintf(kvss.cfg.shared.client, sizeof(kvss.cfg.shared.client), "client.admin");
	kvss.cfg.shared.op_timeout_ms = 5000;
	kvss.cfg.shared.depth = 4;
	kvss.cfg.shared.column = FZ_COLUMN;
}

/* Remove directory @p dir and the files in it. */
static void
remove_dir(const char *dir)
{
	char f[PATH_MAX + 256];
	struct dirent *de;
	DIR *d;

	if (dir[0] == '\0' || (d = opendir(dir)) == NULL)
		return;
	while ((de = readdir(d)) != NULL)
		if (strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0) {
			snprintf(f, sizeof(f), "%s/%s", dir, de->d_name);
			unlink(f);
		}
	closedir(d);
	rmdir(dir);
}

static char eal_dir[PATH_MAX];

/*
 * What this process made outside itself, its L2 directory and EAL's runtime
 * directory, goes as soon as it is set up: the L2 file stays open (kvdisk
 * holds it), and with --no-shconf EAL's directory holds nothing. So no run,
 * nor any of its crashes (libFuzzer ends those with _Exit), leaves a file.
 */
static void
remove_dirs(void)
{
	remove_dir(l2_dir);
	remove_dir(eal_dir);
}

int
fz_env_init(void)
{
	char prefix[64], err[512];
	char *argv[] = {"fuzz_shard",
			"--no-pci",
			"--no-huge",
			"--no-shconf",
			"-m",
			"512",
			"--log-level",
			"lib.eal:error",
			"--log-level",
			"lib.ethdev:crit",
			"--no-telemetry",
			"-l",
			"0",
			prefix,
			NULL};
	struct kvss_shard_cfg *c = &kvss.cfg.local[0];
	int rc;

	snprintf(prefix, sizeof(prefix), "--file-prefix=kvss_fuzz_shard_%d", (int)getpid());
	if (rte_eal_init((int)RTE_DIM(argv) - 1, argv) < 0) {
		fprintf(stderr, "fuzz_shard: EAL: %s\n", rte_strerror(rte_errno));
		return -1;
	}
	snprintf(eal_dir, sizeof(eal_dir), "%s", rte_eal_get_runtime_dir());
	check_reset = getenv("FUZZ_SHARD_CHECK_RESET") != NULL;
	atexit(remove_dirs);
	/* A real kvdisk file, in a directory of its own that only we can read
	 * (the columns are a customer's data), on tmpfs. */
	snprintf(l2_dir, sizeof(l2_dir), "/dev/shm/kvss_fuzz_shard_%d", (int)getpid());
	if (mkdir(l2_dir, 0700) != 0 && errno != EEXIST) {
		fprintf(stderr, "fuzz_shard: %s: %s\n", l2_dir, strerror(errno));
		return -1;
	}
	shard_config();
	/*
	 * Mbufs: no per-lcore caches, so that in-use counts are exact; and a
	 * stack, not a ring: the mbuf freed last is the next one given, in
	 * cache, where a ring's order goes round all 8191 (80 MB a pool, and
	 * its shadow): a cache miss at every mbuf's reset and first read.
	 */
	kvss.pool = rte_pktmbuf_pool_create_by_ops("kvss_pool", 8191, 0, 0,
						   RTE_PKTMBUF_HEADROOM + PROTO_FRAME_MAX,
						   SOCKET_ID_ANY, "stack");
	fz_rx_pool = rte_pktmbuf_pool_create_by_ops("fz_rx", 8191, 0, 0,
						    RTE_PKTMBUF_HEADROOM + PROTO_FRAME_MAX,
						    SOCKET_ID_ANY, "stack");
	fz_shard->ingest_to_refill = rte_ring_create("ingest_to_refill", 1024, SOCKET_ID_ANY,
						     RING_F_SP_ENQ | RING_F_SC_DEQ);
	fz_shard->refill_to_ingest = rte_ring_create("refill_to_ingest", 64, SOCKET_ID_ANY,
						     RING_F_SP_ENQ | RING_F_SC_DEQ);
	store_len = kvstore_memsize(&c->store);
	/* The store in plain memory: AddressSanitizer watches its edges. */
	fz_shard->store_mem = aligned_alloc(64, (store_len + 63) & ~(size_t)63);
	if (kvss.pool == NULL || fz_rx_pool == NULL || fz_shard->ingest_to_refill == NULL ||
	    fz_shard->refill_to_ingest == NULL || fz_shard->store_mem == NULL) {
		fprintf(stderr, "fuzz_shard: no memory for pools, rings or the store\n");
		return -1;
	}
	fz_shard->store = kvstore_init(fz_shard->store_mem, store_len, &c->store);
	kvss.start_tsc = rte_get_tsc_cycles();
	/* The workers of the two levels level.c starts: fibers of this one. */
	make_fibers = true;
	rc = fz_shard->store == NULL ? -1 : shard_levels_open(fz_shard, err, sizeof(err));
	make_fibers = false;
	tier.f = fiber_named("kvss-tier");
	if (rc != 0 || shard_level_of(fz_shard, SHARD_LEVEL_DISK) == NULL || tier.f == NULL ||
	    fiber_named("kvss-shared") == NULL) {
		fprintf(stderr, "fuzz_shard: the levels: %s\n", err);
		return -1;
	}
	tier.to = shard_level_of(fz_shard, SHARD_LEVEL_DISK)->to;
	tier.from = shard_level_of(fz_shard, SHARD_LEVEL_DISK)->from;
	tier.pool = fz_shard->levels->pool;
	fz_sh_gate(shard_level_of(fz_shard, SHARD_LEVEL_SHARED)->to,
		   shard_level_of(fz_shard, SHARD_LEVEL_SHARED)->from);
	remove_dirs();
	rte_mempool_obj_iter(tier.pool, poison_obj, NULL);
	__atomic_store_n(&tier.gated, 1, __ATOMIC_RELEASE);
	fiber_run(tier.f); /* to where it parks */
	disk_snapshot();
	printf("fuzz_shard: store %zu bytes, second tier %s (%s), %u request objects of %u bytes\n",
	       store_len, c->l2.path,
	       level_disk_direct(shard_level_of(fz_shard, SHARD_LEVEL_DISK)) ? "O_DIRECT"
									     : "page cache",
	       tier.pool->size, tier.pool->elt_size);
	return 0;
}

/*
 * The shard's ring of reports (tx.c: calloc'd at its first report, freed
 * as the ingest lcore ends) lives as long as kvss does; here the ingest
 * lcore ends with each input, and 2.3 MB allocated, zeroed and given to
 * AddressSanitizer's quarantine at every input was half of its time. So it
 * is taken from the shard as the input ends (fz_env_keep_reports) and given
 * to the next one's as calloc would: the entries used, zeroed.
 */
static struct shard_report *rep_kept;

void
fz_env_keep_reports(void)
{
	rep_kept = fz_shard->st->rep;
	fz_shard->st->rep = NULL;
}

static void
reports_give(void)
{
	unsigned int i;

	if (rep_kept == NULL)
		return;
	for (i = 0; i < SHARD_REPORTS; i++)
		if (rep_kept[i].sends != 0 || rep_kept[i].len != 0)
			memset(&rep_kept[i], 0, sizeof(rep_kept[i]));
	fz_state.rep = rep_kept;
	rep_kept = NULL;
}

/*
 * The shard's state zeroed, as a process starts it, but only where the last
 * input can have written: it is half a megabyte, most of it the two queues
 * (a thousand messages each) and the hold of data frames (a thousand), of
 * which an input uses a few entries, and zeroing all of it was a tenth of
 * an input's time. A queue's entries are written at its tail, which only
 * grows (nothing resets it but this), so those below its tail are the ones
 * used; the hold's at most one per frame the ingest lcore was given. The
 * rest is zeroed whole. FUZZ_SHARD_CHECK_RESET=1 checks, after each reset,
 * that every byte is what a whole memset leaves (fz_env_init).
 */
struct span {
	size_t off, size, used; /* an array of the state: where, its bytes, those written */
};

#define SPAN(field, entries)                                                                       \
	((struct span){offsetof(struct shard_state, field), sizeof(fz_state.field),                  \
		       (entries) * sizeof(fz_state.field[0])})

static bool
all_zero(const void *p, size_t len)
{
	const uint8_t *b = p;

	return len == 0 || (b[0] == 0 && memcmp(b, b + 1, len - 1) == 0);
}

static int
span_cmp(const void *a, const void *b)
{
	const struct span *x = a, *y = b;

	return x->off < y->off ? -1 : x->off > y->off;
}

static void
state_zero(void)
{
	size_t eq = fz_state.evictq.tail < SHARD_QMAX ? fz_state.evictq.tail : SHARD_QMAX;
	size_t rq = fz_state.refillq.tail < SHARD_QMAX ? fz_state.refillq.tail : SHARD_QMAX;
	size_t held = rx_given < SHARD_EARLY_MAX ? rx_given : SHARD_EARLY_MAX, at = 0;
	struct span sp[] = {
		SPAN(evictq.m, eq),	SPAN(evictq.rec, eq),  SPAN(evictq.seq, eq),
		SPAN(evictq.since, eq), SPAN(refillq.m, rq),   SPAN(refillq.rec, rq),
		SPAN(refillq.seq, rq),	SPAN(refillq.since, rq), SPAN(early, held),
		SPAN(early_rec, held),	SPAN(early_t, held),   SPAN(early_no, held),
	};
	uint8_t *s = (uint8_t *)&fz_state;
	unsigned int i;

	free(fz_state.gone); /* L2_GONE records an input left untold */
	qsort(sp, RTE_DIM(sp), sizeof(sp[0]), span_cmp);
	for (i = 0; i < RTE_DIM(sp); i++) {
		memset(s + at, 0, sp[i].off - at); /* what lies between them: whole */
		memset(s + sp[i].off, 0, sp[i].used);
		at = sp[i].off + sp[i].size;
	}
	memset(s + at, 0, sizeof(fz_state) - at);
	rx_given = 0;
}

void
fz_env_begin(bool refill_lcore, uint32_t mtu)
{
	struct kvss_shard_cfg *c = &kvss.cfg.local[0];

	struct kvss_shard_inst keep = *fz_shard;

	/* A shard as a process starts it: no stream, an empty store; only its
	 * configuration, memory and rings are kept. */
	state_zero();
	/* Its stats: lcore 0's (the ingest lcore) and 1's (the refill lcore);
	 * the tier and shared-level threads are no lcore and count none. */
	memset(kvss.stats, 0, 2 * sizeof(kvss.stats[0]));
	if (check_reset) {
		if (!all_zero(&fz_state, sizeof(fz_state)))
			fz_fail("reset: the shard's state is not what a memset leaves");
		if (!all_zero(kvss.stats, sizeof(kvss.stats)))
			fz_fail("reset: stats of an lcore other than 0 and 1 were counted");
	}
	reports_give();
	if (check_reset && fz_state.rep != NULL &&
	    !all_zero(fz_state.rep, SHARD_REPORTS * sizeof(fz_state.rep[0])))
		fz_fail("reset: the report ring given is not what calloc gives");
	memset(fz_shard, 0, sizeof(*fz_shard));
	fz_shard->cfg = keep.cfg;
	fz_shard->st = keep.st;
	fz_shard->levels = keep.levels;
	fz_shard->store_mem = keep.store_mem;
	fz_shard->ingest_to_refill = keep.ingest_to_refill;
	fz_shard->refill_to_ingest = keep.refill_to_ingest;
	fz_shard->routed_said = keep.routed_said; /* said once a process, as kvss does */
	fz_shard->refill_lcore_on = refill_lcore;
	fz_shard->store = kvstore_init(fz_shard->store_mem, store_len, &c->store);
	kvss.cfg.mtu = mtu;
	c->batch_timeout_ms = 50;
	c->space_timeout_ms = 100;
	__atomic_store_n(&kvss.quit, 0, __ATOMIC_RELEASE);
	tier_empty();
	disk_restore();
	clock_ns = 0;
	fz_sh_reset();
	rl.running = false;
	rl.why = Y_NONE;
	if (refill_lcore) {
		/* Its stats and batchers are lcore 1's, as in kvss. */
		fiber_make(&rl.f, refill_main, NULL, 1);
		rl.running = true;
	}
}

/* The refill lcore runs to its end (kvss.quit is set). */
static void
refill_stop(void)
{
	if (!rl.running)
		return;
	if (rl.why != Y_EXIT)
		fiber_run(&rl.f);
	if (!rl.f.done)
		fz_fail("the refill lcore did not end when the input did");
	rl.running = false;
}

void
fz_env_stop_refill(void)
{
	refill_stop();
}

bool
fz_env_end(void)
{
	void *p;
	unsigned int rx, tx;

	refill_stop();
	/* A DELETE (or L2 message) the ingest lcore took from the refill lcore
	 * and holds until what it waits for has run: the next input is a new
	 * shard, which never took it. */
	if (fz_shard->st->posted_waiting != NULL) {
		rte_pktmbuf_free(fz_shard->st->posted_waiting);
		fz_shard->st->posted_waiting = NULL;
	}
	while (rte_ring_dequeue(fz_shard->ingest_to_refill, &p) == 0)
		rte_pktmbuf_free(p);
	while (rte_ring_dequeue(fz_shard->refill_to_ingest, &p) == 0)
		rte_pktmbuf_free(p);
	fz_check_release();
	rx = rte_mempool_in_use_count(fz_rx_pool);
	tx = rte_mempool_in_use_count(kvss.pool);
	/* Every frame given back. */
	return rx == 0 && tx == 0;
}

void
fz_fail(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "fuzz_shard: FINDING: ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, " (ingest poll %" PRIu64 ")\n", fz.iter);
	fflush(stderr);
	abort();
}
