/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * lib/shared's API over objects in memory (rados_mem.h says what and why).
 */
#include <errno.h>
#include <sanitizer/asan_interface.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "rados_mem.h"

#define DEFAULT_TIMEOUT_MS 5000
#define DEFAULT_INFLIGHT 16
/* "4294967295\n" and room to see that an object is longer (shared_rados.c). */
#define GEN_TEXT_MAX 16

struct shared {
	uint32_t timeout_ms;
	uint32_t depth;
	struct shared_stats st;
};

static struct {
	struct shared s;
	struct rmem_params p;
	struct rmem_obj o[RMEM_OBJS_MAX];
	struct rmem_op op[SHARED_INFLIGHT_MAX];
	unsigned int nop;
	uint64_t ver;		/* the last version given */
	unsigned int nfail;
	int fail_err;
	uint64_t submitted[4];
} R = {.p = {.max_objs = RMEM_OBJS_MAX, .max_ops = SHARED_INFLIGHT_MAX}};

/*
 * An object's bytes live in its slot's memory, kept from one object to the
 * next: a malloc and a free each object were page faults of fresh memory,
 * and made libFuzzer run each of the shard fuzzer's inputs that stored one
 * twice (more mallocs than frees: a leak, maybe) and then look for leaks.
 * What lies past an object's bytes, and all of a slot with none, is
 * poisoned, as past and after a malloc'd block.
 */
static struct {
	uint8_t *b;
	uint32_t cap;
} mem[RMEM_OBJS_MAX];

/* Slot @p i holds @p len bytes now (not yet written). */
static uint8_t *
obj_bytes(unsigned int i, uint32_t len)
{
	if (len > mem[i].cap) {
		ASAN_UNPOISON_MEMORY_REGION(mem[i].b, mem[i].cap);
		free(mem[i].b);
		mem[i].cap = len < 4096 ? 4096 : len;
		if ((mem[i].b = malloc(mem[i].cap)) == NULL) {
			fprintf(stderr, "rados_mem: no memory for an object\n");
			abort();
		}
	}
	ASAN_POISON_MEMORY_REGION(mem[i].b, mem[i].cap);
	ASAN_UNPOISON_MEMORY_REGION(mem[i].b, len);
	return mem[i].b;
}

void
rmem_setup(const struct rmem_params *p)
{
	R.p = *p;
	if (R.p.max_objs == 0 || R.p.max_objs > RMEM_OBJS_MAX)
		R.p.max_objs = RMEM_OBJS_MAX;
	if (R.p.max_ops == 0 || R.p.max_ops > SHARED_INFLIGHT_MAX)
		R.p.max_ops = SHARED_INFLIGHT_MAX;
}

/* ---- The objects -------------------------------------------------------------------- */

void
rmem_drop(struct rmem_obj *o)
{
	ASAN_POISON_MEMORY_REGION(mem[o - R.o].b, mem[o - R.o].cap);
	*o = (struct rmem_obj){0};
}

void
rmem_clear(void)
{
	unsigned int i;

	for (i = 0; i < R.p.max_objs; i++)
		if (R.o[i].used)
			rmem_drop(&R.o[i]);
}

struct rmem_obj *
rmem_find(const char *ns, const char *name)
{
	unsigned int i;

	for (i = 0; i < R.p.max_objs; i++)
		if (R.o[i].used && strcmp(R.o[i].ns, ns) == 0 && strcmp(R.o[i].name, name) == 0)
			return &R.o[i];
	return NULL;
}

unsigned int
rmem_count(const char *ns)
{
	unsigned int i, n = 0;

	for (i = 0; i < R.p.max_objs; i++)
		n += R.o[i].used && (ns == NULL || strcmp(R.o[i].ns, ns) == 0);
	return n;
}

struct rmem_obj *
rmem_nth(unsigned int which)
{
	unsigned int i, n = rmem_count(NULL);

	if (n == 0)
		return NULL;
	which %= n;
	for (i = 0; i < R.p.max_objs; i++)
		if (R.o[i].used && which-- == 0)
			return &R.o[i];
	return NULL;
}

struct rmem_obj *
rmem_write(const char *ns, const char *name, const void *buf, uint32_t len)
{
	struct rmem_obj *x = rmem_find(ns, name);
	unsigned int i;

	if (x != NULL)
		rmem_drop(x);
	for (i = 0; i < R.p.max_objs && R.o[i].used; i++)
		;
	if (i == R.p.max_objs) {
		/* Full: the first slot's goes (another replica's sweep). */
		i = 0;
		rmem_drop(&R.o[0]);
	}
	R.o[i] = (struct rmem_obj){.used = true, .len = len, .b = obj_bytes(i, len),
				   .ver = ++R.ver, .mtime = (int64_t)time(NULL)};
	snprintf(R.o[i].ns, sizeof(R.o[i].ns), "%s", ns);
	snprintf(R.o[i].name, sizeof(R.o[i].name), "%s", name);
	memcpy(R.o[i].b, buf, len);
	return &R.o[i];
}

void
rmem_write_text(const char *ns, const char *name, const char *text)
{
	rmem_write(ns, name, text, (uint32_t)strlen(text));
}

bool
rmem_remove(const char *ns, const char *name)
{
	struct rmem_obj *x = rmem_find(ns, name);

	if (x != NULL)
		rmem_drop(x);
	return x != NULL;
}

/* ---- The ops -------------------------------------------------------------------------- */

void
rmem_fail(unsigned int n, int err)
{
	R.nfail = n;
	R.fail_err = err;
}

/* The error the next op fails with (0: none), one of those asked used up. */
static int
take_fail(void)
{
	if (R.nfail == 0)
		return 0;
	R.nfail--;
	return R.fail_err;
}

void
rmem_release(void)
{
	unsigned int i;

	for (i = 0; i < R.nop; i++)
		R.op[i].held = false;
}

unsigned int
rmem_nops(void)
{
	return R.nop;
}

bool
rmem_all_held(void)
{
	unsigned int i;

	for (i = 0; i < R.nop; i++)
		if (!R.op[i].held)
			return false;
	return true;
}

uint64_t
rmem_submitted(uint8_t kind)
{
	return kind == 0 ? R.submitted[1] + R.submitted[2] + R.submitted[3]
			 : kind < 4 ? R.submitted[kind] : 0;
}

/* ---- lib/shared's API: open and close ------------------------------------------------ */

struct shared *
shared_open(const struct shared_params *p, char *err, size_t errlen)
{
	if (!R.p.any_conf && shared_conf_check(p->conf, err, errlen) != 0)
		return NULL;
	R.s = (struct shared){0};
	R.s.timeout_ms = p->op_timeout_ms ? p->op_timeout_ms : DEFAULT_TIMEOUT_MS;
	R.s.timeout_ms = (R.s.timeout_ms + 999) / 1000 * 1000; /* whole seconds, as librados */
	R.s.depth = p->max_inflight ? p->max_inflight : DEFAULT_INFLIGHT;
	if (R.s.depth > R.p.max_ops)
		R.s.depth = R.p.max_ops;
	return &R.s;
}

static void complete(const struct rmem_op *o, struct shared_done *d);

void
shared_close(struct shared *s)
{
	struct shared_done d;
	unsigned int i;

	if (s == NULL)
		return;
	/* The library waits for what is in flight: it lands, unanswered. */
	for (i = 0; i < R.nop; i++)
		complete(&R.op[i], &d);
	R.nop = 0;
}

/* ---- Asynchronous ops ------------------------------------------------------------------ */

static int
submit(struct shared *s, uint8_t kind, bool over, const char *ns, const char *name, void *buf,
       uint32_t len, uint64_t cookie)
{
	struct rmem_op *o;

	if (R.nop >= s->depth) {
		s->st.busy++;
		return -EBUSY;
	}
	if (ns == NULL || name == NULL || strlen(ns) >= SHARED_NS_MAX ||
	    strlen(name) >= SHARED_NAME_MAX)
		return -ENAMETOOLONG;
	if (kind == SHARED_OP_PUT && len > SHARED_PUT_MAX)
		return -EFBIG;
	o = &R.op[R.nop++];
	*o = (struct rmem_op){.kind = kind, .over = over, .cookie = cookie,
			      .buf = buf, .len = len, .fail = take_fail()};
	strcpy(o->ns, ns);
	strcpy(o->name, name);
	s->st.submitted[kind]++;
	R.submitted[kind]++;
	if (R.p.hooks.submitted != NULL)
		R.p.hooks.submitted(o);
	return 0;
}

int
shared_put(struct shared *s, const char *ns, const char *name, const void *buf, uint32_t len,
	   uint64_t cookie)
{
	return submit(s, SHARED_OP_PUT, false, ns, name, (void *)(uintptr_t)buf, len, cookie);
}

int
shared_replace(struct shared *s, const char *ns, const char *name, const void *buf, uint32_t len,
	       uint64_t cookie)
{
	return submit(s, SHARED_OP_PUT, true, ns, name, (void *)(uintptr_t)buf, len, cookie);
}

int
shared_get(struct shared *s, const char *ns, const char *name, void *buf, uint32_t cap,
	   uint64_t cookie)
{
	return submit(s, SHARED_OP_GET, false, ns, name, buf, cap, cookie);
}

int
shared_del(struct shared *s, const char *ns, const char *name, uint64_t cookie)
{
	return submit(s, SHARED_OP_DEL, false, ns, name, NULL, 0, cookie);
}

static void
answer(const struct rmem_op *o, struct rmem_obj *x, struct shared_done *d)
{
	if (o->fail != 0) {
		d->status = o->fail;
		return;
	}
	if (R.p.hooks.complete != NULL && R.p.hooks.complete(o, x, d))
		return;
	if (o->kind == SHARED_OP_PUT) {
		if (x != NULL && !o->over)
			d->status = -EEXIST; /* the old object kept */
		else
			rmem_write(o->ns, o->name, o->buf, o->len);
		return;
	}
	if (x == NULL) {
		d->status = -ENOENT;
		return;
	}
	if (o->kind == SHARED_OP_DEL) {
		rmem_drop(x);
		return;
	}
	if (x->len > o->len) {
		d->status = -EFBIG; /* never a silent truncation */
		return;
	}
	memcpy(o->buf, x->b, x->len);
	d->len = x->len;
	if (R.p.hooks.read != NULL)
		R.p.hooks.read(o, x, d);
}

static void
complete(const struct rmem_op *o, struct shared_done *d)
{
	*d = (struct shared_done){.cookie = o->cookie, .op = o->kind};
	answer(o, rmem_find(o->ns, o->name), d);
	if (d->status != 0)
		d->len = 0;
	/* What the library counts of a completion (lib/shared/shared_common.c). */
	shared_stats_count(&R.s.st, o->kind, d->status);
}

unsigned int
shared_poll(struct shared *s, struct shared_done *out, unsigned int max, uint32_t wait_ms)
{
	unsigned int n = 0, i, k;

	(void)s;
	if (R.p.hooks.poll != NULL)
		R.p.hooks.poll(wait_ms);
	for (k = 0; k < R.nop && n < max;) {
		i = R.p.newest_first ? R.nop - 1 - k : k;
		if (R.op[i].held) {
			k++;
			continue;
		}
		complete(&R.op[i], &out[n++]);
		memmove(&R.op[i], &R.op[i + 1], (R.nop - i - 1) * sizeof(R.op[0]));
		R.nop--; /* the next one (older, or newer) now at the same k */
	}
	return n;
}

unsigned int
shared_inflight(const struct shared *s)
{
	(void)s;
	if (R.p.hooks.inflight != NULL)
		R.p.hooks.inflight();
	return R.nop;
}

void
shared_stats_get(const struct shared *s, struct shared_stats *out)
{
	*out = s->st;
}

uint32_t
shared_op_timeout_ms(const struct shared *s)
{
	return s->timeout_ms;
}

/* ---- Synchronous ops ----------------------------------------------------------------------- */

int
shared_gen_read_ver(struct shared *s, const char *ns, uint32_t *gen, uint64_t *ver)
{
	struct rmem_obj *x;
	int rc;

	(void)s;
	*gen = 0;
	*ver = 0;
	if (ns == NULL || strlen(ns) > SHARED_RADOS_NS_MAX)
		return -EINVAL;
	if ((rc = take_fail()) != 0)
		return rc;
	if ((x = rmem_find(ns, SHARED_GEN_OBJECT)) == NULL)
		return -ENOENT;
	*ver = x->ver;
	if (x->len >= GEN_TEXT_MAX)
		return -EBADMSG;
	return shared_gen_parse((const char *)x->b, x->len, gen);
}

int
shared_gen_read(struct shared *s, const char *ns, uint32_t *gen)
{
	uint64_t ver;
	int rc = shared_gen_read_ver(s, ns, gen, &ver);

	return rc == -ENOENT ? 0 : rc;
}

int
shared_gen_set(struct shared *s, const char *ns, uint32_t gen, uint64_t ver)
{
	struct rmem_obj *x;
	char b[GEN_TEXT_MAX];
	int rc;

	(void)s;
	if (ns == NULL || strlen(ns) > SHARED_RADOS_NS_MAX || gen > SHARED_GEN_MAX)
		return -EINVAL;
	if ((rc = take_fail()) != 0)
		return rc;
	x = rmem_find(ns, SHARED_GEN_OBJECT);
	if (ver == 0 ? x != NULL : x == NULL || x->ver != ver)
		return -ECANCELED; /* written or removed by another since the read */
	snprintf(b, sizeof(b), "%u\n", gen);
	rmem_write_text(ns, SHARED_GEN_OBJECT, b);
	return 0;
}

int
shared_gen_bump(struct shared *s, const char *ns, uint32_t *gen)
{
	uint32_t cur;
	uint64_t ver;
	int rc = shared_gen_read_ver(s, ns, &cur, &ver);

	if (rc < 0 && rc != -ENOENT)
		return rc;
	if (cur >= SHARED_GEN_MAX) {
		*gen = cur;
		return -EOVERFLOW; /* never wrapped */
	}
	/* One caller: no race to lose. */
	if ((rc = shared_gen_set(s, ns, cur + 1, ver)) != 0)
		return rc;
	*gen = cur + 1;
	return 0;
}

int
shared_stat(struct shared *s, const char *ns, const char *name, uint64_t *size, int64_t *mtime)
{
	struct rmem_obj *x;
	int rc;

	(void)s;
	if (ns == NULL || name == NULL || strlen(ns) >= SHARED_NS_MAX ||
	    strlen(name) >= SHARED_NAME_MAX)
		return -ENAMETOOLONG;
	if ((rc = take_fail()) != 0)
		return rc;
	if ((x = rmem_find(ns, name)) == NULL)
		return -ENOENT;
	*size = x->len;
	*mtime = x->mtime;
	return 0;
}

int
shared_list(struct shared *s, const char *ns,
	    int (*fn)(void *arg, const char *ns, const char *name), void *arg)
{
	unsigned int i;
	int rc;

	(void)s;
	if (fn == NULL || (ns != NULL && strlen(ns) > SHARED_RADOS_NS_MAX))
		return -EINVAL;
	if ((rc = take_fail()) != 0)
		return rc;
	for (i = 0; i < R.p.max_objs; i++) {
		/* Copied: @p fn may write or remove objects. */
		char n[SHARED_NS_MAX], o[SHARED_NAME_MAX];

		if (!R.o[i].used || (ns != NULL && strcmp(R.o[i].ns, ns) != 0))
			continue;
		memcpy(n, R.o[i].ns, sizeof(n));
		memcpy(o, R.o[i].name, sizeof(o));
		if ((rc = fn(arg, n, o)) != 0)
			return rc;
	}
	return 0;
}
