/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The shared level under the shard fuzzer (fuzz_shard.c has the design):
 * lib/shared's API (shared.h) over objects in this process's memory
 * (test/rados_mem.c, which the driver's unit tests use too), in place of
 * librados, so that the shard's shared-level thread
 * (app/kvss/shard/level_shared.c, the real one) runs as in kvss, at the
 * fuzzer's pace, with a cluster that lies as the input says.
 *
 * Why not a real cluster: an input runs in milliseconds and starts on an
 * empty shared level; a Ceph cluster here takes 20 s to come up and an
 * operation milliseconds. The real cluster is test-shared-kvss's; this
 * stand-in is what it must be to fuzz the thread and the checks with the
 * shard's state: semantics as documented in shared.h (rados_mem.c: an exclusive create
 * that finds the name taken completes -EEXIST and keeps the old object; a
 * read of an object larger than asked completes -EFBIG; a missing one
 * -ENOENT; -EBUSY at the depth), and on top of them the input's lies:
 *
 *  - an operation fails (-ETIMEDOUT, -EIO; a timed-out write that landed
 *    all the same), or is held until the input releases it (OP_FLUSH, and
 *    the drain), so that an SH_UP's batch times out while its slice is
 *    being read and answers arrive in another order than asked;
 *  - a read returns bytes that are not the object written under that name:
 *    a bit flipped in the header or the payload, cut short, longer,
 *    another object's bytes, or a header with a field changed and its
 *    checksums made again (a replica of another generation, geometry or
 *    range). Each is a lie the shard's check must see: the request's
 *    answer must be SHARED_BAD (fz_sh_check_lies, at the thread's next
 *    call here), whatever the model knows; unless the bytes delivered
 *    decode and name exactly the slice asked (names_the_slice_asked): on
 *    this plain level that is a forgery no check without a key can see;
 *  - an object rots or vanishes where it lies (FZ_SH_ROT, FZ_SH_GONE).
 *
 * Every PUT is checked as it comes: an object that decodes (both
 * checksums), a slice of shard 0 whose every token is one batch's write
 * as the wafer made it, or zeros (the shard never writes what it did not
 * store).
 *
 * Turns: the shard's shared-level thread takes its turn with the tier
 * thread's (fuzz_shard_env.c): it parks where it would wait, here, when
 * it can do nothing more without the input (every request answered, or
 * what is left held).
 */
#include <errno.h>
#include <string.h>

#include <rte_mempool.h>
#include <rte_ring.h>

#include "../rados_mem.h"
#include "fuzz_shard.h"
#include "kvss.h"
#include "shard/level.h"
#include "shared.h"

#define OBJS 64
#define OPS 64

static struct {
	/* What the input asks of the next operations, in order of submission. */
	uint8_t fault[OPS];
	unsigned int fhead, fn;
	/* Reads answered with a lie: their answers are checked at the next call. */
	const struct level_req *lied[OPS];
	unsigned int nlied;
	/* The bits rotted in objects (an object's version: a write makes a new
	 * one), so that a read is told a lie only when its bytes are not the
	 * ones written: a lie that flips back a rotted bit is the truth. */
	struct {
		uint64_t ver;
		uint32_t at;
		uint8_t mask;
	} rot[OBJS];
	unsigned int nrot;
	/* The thread's turns (fuzz_shard_env.c). */
	int gated;
	struct rte_ring *to, *from;
	uint64_t outstanding; /* requests given to the thread, not taken back */
} R;

/* ---- What the harness asks ------------------------------------------------ */

void
fz_sh_reset(void)
{
	rmem_clear();
	R.fhead = R.fn = 0;
	R.nlied = 0;
	R.nrot = 0;
}

void
fz_sh_fault(uint8_t fault)
{
	if (R.fn < OPS)
		R.fault[(R.fhead + R.fn++) % OPS] = fault;
}

void
fz_sh_act(uint8_t how, uint8_t which)
{
	struct rmem_obj *o = rmem_nth(which);

	if (o == NULL)
		return;
	if ((how & 1) == 0) {
		/* A bit rots on an OSD (replicated: the same on every copy). */
		uint32_t at = (which * 131u + how) % o->len;
		uint8_t mask = (uint8_t)(1u << (how >> 5));

		if (R.nrot == OBJS)
			return; /* no room to remember it: no rot */
		R.rot[R.nrot].ver = o->ver;
		R.rot[R.nrot].at = at;
		R.rot[R.nrot++].mask = mask;
		o->b[at] ^= mask;
		FZ_TRACE("  cluster: %s/%s rots\n", o->ns, o->name);
	} else {
		/* Gone: swept, or reset, by another replica's kvss-shared. */
		FZ_TRACE("  cluster: %s/%s deleted\n", o->ns, o->name);
		rmem_drop(o);
	}
}

void
fz_sh_release(void)
{
	rmem_release();
}

/* ---- The thread's turns ----------------------------------------------------- */

bool
fz_sh_idle(void)
{
	if (R.to == NULL)
		return true;
	return rmem_all_held() && rte_ring_count(R.to) == 0;
}

/* The thread's answers to the lies of its last reap: each one refused. */
static void
check_lies(void)
{
	unsigned int i;

	for (i = 0; i < R.nlied; i++)
		/* An SH_DOWN's read-back of a name taken: a lie there is not
		 * taken either, but written over (answered 0 once written). */
		if (R.lied[i]->op != LEVEL_PUT && R.lied[i]->status != PROTO_E_SHARED_BAD)
			fz_fail("the shared level's thread took a slice that is not the object "
				"written under its name (key %" PRIu64 " org %" PRIu64
				" cache %u): answered %s",
				R.lied[i]->meta.key, R.lied[i]->meta.org, R.lied[i]->meta.cache,
				R.lied[i]->status ? proto_err_name(R.lied[i]->status) : "ok");
	R.nlied = 0;
}

void
fz_sh_gate(struct rte_ring *to, struct rte_ring *from)
{
	R.to = to;
	R.from = from;
	__atomic_store_n(&R.gated, 1, __ATOMIC_RELEASE);
	fz_sh_turn(); /* to where it parks */
}

void
fz_sh_settle(void)
{
	if (!fz_sh_idle())
		fz_sh_turn();
}

uint64_t
fz_sh_outstanding(void)
{
	return R.outstanding;
}

/*
 * The ingest lcore hands the levels their requests and takes them back
 * through these (level.c; the link wraps them): the shared level's are
 * counted.
 */
int __real_shard_level_give(struct shard_levels *ls, struct level_req *q);
int __wrap_shard_level_give(struct shard_levels *ls, struct level_req *q);
unsigned int __real_shard_level_take(struct shard_levels *ls, void **qs, unsigned int n);
unsigned int __wrap_shard_level_take(struct shard_levels *ls, void **qs, unsigned int n);

int
__wrap_shard_level_give(struct shard_levels *ls, struct level_req *q)
{
	bool shared = q->level == SHARD_LEVEL_SHARED; /* read before the worker has it */
	int rc = __real_shard_level_give(ls, q);

	R.outstanding += rc == 0 && shared;
	return rc;
}

unsigned int
__wrap_shard_level_take(struct shard_levels *ls, void **qs, unsigned int n)
{
	unsigned int k = __real_shard_level_take(ls, qs, n), i;

	for (i = 0; i < k; i++)
		R.outstanding -= ((struct level_req *)qs[i])->level == SHARD_LEVEL_SHARED;
	return k;
}

/* ---- The cluster's say in each op (rados_mem.h's hooks) ----------------------- */

/* Every token of a slice's payload: one batch's write of it, or zeros. */
static void
check_put(const uint8_t *buf, uint32_t len)
{
	struct shared_hdr h;
	enum shared_bad why = shared_obj_decode(buf, len, &h);
	uint32_t t;

	if (why != SHARED_OK)
		fz_fail("the shard wrote an object that does not check: %s", shared_bad_name(why));
	if (h.kind != SHARED_SLICE || h.shard != 0 || h.cache >= FZ_CACHES ||
	    h.bytes_per_token != (h.cache == 0 ? FZ_B0 : FZ_B1))
		fz_fail("the shard wrote a slice of kind %u shard %u cache %u, %u bytes per token",
			h.kind, h.shard, h.cache, h.bytes_per_token);
	for (t = 0; t < h.tokens; t++)
		if (!fz_token_written(h.cache,
				      buf + SHARED_HDR_LEN + (size_t)t * h.bytes_per_token))
			fz_fail("the shard wrote token %u of a slice (key %" PRIu64 " org %" PRIu64
				" cache %u, tokens %u from %u): not one batch's write",
				t, h.key, h.org, h.cache, h.tokens, h.start);
}

/* An op taken: the input's next fault is its, and a PUT is checked as it comes. */
static void
submitted(struct rmem_op *o)
{
	if (R.fn > 0) {
		o->tag = R.fault[R.fhead];
		R.fhead = (R.fhead + 1) % OPS;
		R.fn--;
	}
	o->held = (o->tag & 0x0f) == FZ_SH_HOLD;
	if (o->kind == SHARED_OP_PUT)
		check_put(o->buf, o->len);
}

/* The op's fault, if it fails: answered here. */
static bool
fails(const struct rmem_op *o, struct rmem_obj *x, struct shared_done *d)
{
	uint8_t how = o->tag & 0x0f;

	if (how != FZ_SH_TIMEOUT && how != FZ_SH_EIO)
		return false;
	/* A write that timed out may have landed all the same. */
	if (o->kind == SHARED_OP_PUT && how == FZ_SH_TIMEOUT && x == NULL && ((o->tag >> 4) & 1))
		rmem_write(o->ns, o->name, o->buf, o->len);
	d->status = how == FZ_SH_TIMEOUT ? -ETIMEDOUT : -EIO;
	return true;
}

/* A read's bytes as the input has them lie: true when they are not the object's. */
static bool
lie(const struct rmem_op *o, struct rmem_obj *x, struct shared_done *d)
{
	uint8_t how = o->tag & 0x0f, arg = o->tag >> 4;
	struct shared_hdr h;
	struct rmem_obj *other;

	switch (how) {
	case FZ_SH_FLIP_HDR:
		o->buf[arg * 7 % SHARED_HDR_LEN] ^= 0x10;
		return true;
	case FZ_SH_FLIP_DATA:
		if (d->len <= SHARED_HDR_LEN)
			return false;
		o->buf[SHARED_HDR_LEN + arg * 13u % (d->len - SHARED_HDR_LEN)] ^= 0x01;
		return true;
	case FZ_SH_SHORT:
		d->len -= 1 + arg % (d->len < 16 ? d->len : 16);
		return true;
	case FZ_SH_LONGER:
		d->status = -EFBIG; /* what the library answers: never a silent cut */
		d->len = 0;
		return true;
	case FZ_SH_OTHER:
		other = rmem_nth(arg);
		if (other == NULL || other == x || other->len > o->len ||
		    (other->len == x->len && memcmp(other->b, x->b, x->len) == 0))
			return false;
		memcpy(o->buf, other->b, other->len);
		d->len = other->len;
		return true;
	case FZ_SH_RESIGN:
		/* Another replica's header, checksums made again: a field that names. */
		if (shared_obj_decode(o->buf, d->len, &h) != SHARED_OK)
			return false;
		switch (arg % 6) {
		case 0:
			h.gen_org++;
			break;
		case 1:
			h.layout ^= 1;
			break;
		case 2:
			h.start += FZ_COLUMN;
			break;
		case 3:
			h.parent ^= 2;
			break;
		case 4:
			h.model ^= 1;
			break;
		default:
			h.org ^= 3;
		}
		shared_hdr_encode(o->buf, &h, o->buf + SHARED_HDR_LEN);
		return true;
	default:
		return false;
	}
}

/* Are the @p d->len bytes a read delivered into @p o->buf the ones written as @p x? */
static bool
as_written(const struct rmem_op *o, const struct rmem_obj *x, const struct shared_done *d)
{
	uint32_t i, j;

	if (d->status != 0 || d->len != x->len)
		return false;
	for (i = 0; i < x->len; i++) {
		uint8_t b = x->b[i];

		for (j = 0; j < R.nrot; j++)
			if (R.rot[j].ver == x->ver && R.rot[j].at == i)
				b ^= R.rot[j].mask; /* undone: the byte as written */
		if (o->buf[i] != b)
			return false;
	}
	return true;
}

/*
 * Do the @p d->len bytes a read delivered decode (both checksums) and name
 * exactly the slice its request asks for, as the shard's check sees it
 * (level_shared.c, hdr_of)? Then no check of a plain level can tell them
 * from the slice's own: a lie that lands there (a header moved by a column
 * onto the column asked, where the SH_UP named an object of the column
 * before it) is a forgery only a key refuses, which docs/SECURITY.md says
 * of a level without one. This stand-in's level is plain.
 */
static bool
names_the_slice_asked(const struct rmem_op *o, const struct shared_done *d)
{
	const struct level_req *q = (const struct level_req *)(uintptr_t)o->cookie;
	struct shared_hdr h;

	/* Field by field here, not by lib/shared's shared_hdr_match(): a
	 * field that function failed to compare would hide itself. */
	return d->status == 0 && shared_obj_decode(o->buf, d->len, &h) == SHARED_OK &&
	       h.kind == SHARED_SLICE && h.org == q->meta.org && h.key == q->meta.key &&
	       h.parent == q->meta.parent && h.object_id == q->object_id &&
	       h.gen_global == q->gen_global && h.gen_org == q->gen_org && h.layout == q->layout &&
	       h.model == fz_shard->cfg->model && h.shard == fz_shard->cfg->id &&
	       h.cache == q->meta.cache && h.start == q->meta.start && h.tokens == q->meta.tokens &&
	       h.bytes_per_token == q->bytes_per_token && h.payload_len == q->len &&
	       /* and not older than asked past the skew (an earlier write of it) */
	       !(q->meta.first_use_ns > h.first_use_ns &&
		 q->meta.first_use_ns - h.first_use_ns > SHARED_SKEW_NS);
}

static void
read_done(const struct rmem_op *o, struct rmem_obj *x, struct shared_done *d)
{
	if (lie(o, x, d) && !as_written(o, x, d) && !names_the_slice_asked(o, d)) {
		if (R.nlied < OPS)
			R.lied[R.nlied++] = (const struct level_req *)(uintptr_t)o->cookie;
		FZ_TRACE("  cluster: the read of %s/%s lies (%u)\n", o->ns, o->name, o->tag & 0x0f);
	}
}

static void
polled(uint32_t wait_ms)
{
	check_lies();
	/* Nothing to answer, nothing coming: the thread can do no more until
	 * the input releases what is held. */
	if (wait_ms > 0 && __atomic_load_n(&R.gated, __ATOMIC_ACQUIRE) && fz_sh_idle())
		fz_sh_park();
}

static void
inflight(void)
{
	check_lies();
	/* Idle: nothing in flight, every request it was given answered. */
	if (rmem_nops() == 0 && __atomic_load_n(&R.gated, __ATOMIC_ACQUIRE) &&
	    __atomic_load_n(&R.outstanding, __ATOMIC_ACQUIRE) == rte_ring_count(R.from))
		fz_sh_park();
}

/*
 * The store as the fuzzer has it: 64 objects (a full one drops its first),
 * ops answered newest first (in another order than asked), no Ceph
 * configuration to find.
 */
static void __attribute__((constructor))
rados_setup(void)
{
	rmem_setup(&(struct rmem_params){
		.max_objs = OBJS, .max_ops = OPS, .newest_first = true, .any_conf = true,
		.hooks = {.submitted = submitted, .complete = fails, .read = read_done,
			  .poll = polled, .inflight = inflight}});
}
