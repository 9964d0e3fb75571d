/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * lib/shared's librados client against a real cluster, started
 * and stopped by scripts/test-shared.sh around each phase:
 *
 *   test_shared_rados live         a healthy cluster: everything the API says
 *   test_shared_rados fixture      columns and garbage for kvss-shared's tests
 *   test_shared_rados badgen       a generation that is not a number (0x3333's)
 *   test_shared_rados sweptN       after kvss-shared's sweep N (0: none yet):
 *                                  what should be deleted is, the rest is kept
 *   test_shared_rados shares       two organizations' columns for sweep's shares
 *   test_shared_rados sharesswept  after the sweep with shares: what went, what stayed
 *   test_shared_rados degraded     one OSD killed: every object still read
 *   test_shared_rados down         every OSD killed: ops end -ETIMEDOUT in time
 *   test_shared_rados unreachable  the cluster stopped: shared_open fails in time
 *
 * The configuration comes from KVSS_CEPH_CONF. Prints a PASS or FAIL line
 * per check and "test_shared_rados PHASE: N passed, M failed"; exits 1 on
 * any failure. Plain main: the cluster is the fixture, and Criterion's
 * forked tests would each connect anew.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "mono.h"
#include "shared.h"

#define MIB (1u << 20)
#define NOBJ 64
#define DEPTH 16

static const char *conf;
static unsigned int passed, failed;

static void
check(bool ok, const char *name, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static void
check(bool ok, const char *name, const char *fmt, ...)
{
	va_list ap;

	if (ok) {
		passed++;
		printf("PASS: %s\n", name);
		return;
	}
	failed++;
	printf("FAIL: %s: ", name);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
}

static struct shared *
open_with(uint32_t timeout_ms, uint32_t inflight, const char *pool, char *err, size_t errlen)
{
	struct shared_params p = {
		.conf = conf,
		.pool = pool,
		.client = "client.admin",
		.op_timeout_ms = timeout_ms,
		.max_inflight = inflight,
	};

	return shared_open(&p, err, errlen);
}

/* Poll until the op with @p cookie completes (at most @p limit_s). */
static bool
wait_one(struct shared *s, uint64_t cookie, struct shared_done *d, double limit_s)
{
	double end = mono_s() + limit_s;
	struct shared_done got[8];
	unsigned int n, i;

	while (mono_s() < end) {
		n = shared_poll(s, got, 8, 100);
		for (i = 0; i < n; i++) {
			if (got[i].cookie == cookie) {
				*d = got[i];
				return true;
			}
		}
	}
	return false;
}

/* Submit one op and wait for it; the status (or -EINPROGRESS: it never ended). */
static int
put_sync(struct shared *s, const char *ns, const char *name, const void *b, uint32_t len)
{
	struct shared_done d;
	int rc = shared_put(s, ns, name, b, len, 1);

	if (rc < 0)
		return rc;
	return wait_one(s, 1, &d, 30) ? d.status : -EINPROGRESS;
}

static int
get_sync(struct shared *s, const char *ns, const char *name, void *b, uint32_t cap, uint32_t *len)
{
	struct shared_done d;
	int rc = shared_get(s, ns, name, b, cap, 2);

	if (rc < 0)
		return rc;
	if (!wait_one(s, 2, &d, 30))
		return -EINPROGRESS;
	*len = d.len;
	return d.status;
}

static int
del_sync(struct shared *s, const char *ns, const char *name)
{
	struct shared_done d;
	int rc = shared_del(s, ns, name, 3);

	if (rc < 0)
		return rc;
	return wait_one(s, 3, &d, 30) ? d.status : -EINPROGRESS;
}

/* Object i's bytes: each 8-byte word says (i, word), so a misplaced or
 * mixed object is caught. */
static void
fill(uint8_t *b, uint32_t len, uint64_t i)
{
	uint32_t w;

	for (w = 0; w + 8 <= len; w += 8) {
		uint64_t v = (i << 40) ^ w ^ 0x9e3779b97f4a7c15ull;

		memcpy(b + w, &v, 8);
	}
}

/* PUT NOBJ whole columns at DEPTH in flight, then GET them back. */
static void
many_round_trip(struct shared *s, const char *ns, bool write)
{
	uint8_t *bufs = malloc((size_t)DEPTH * MIB);
	uint8_t *want = malloc(MIB);
	struct shared_done d[DEPTH];
	unsigned int next = 0, done = 0, bad = 0, n, i;
	unsigned int buf_of[NOBJ], freebuf[DEPTH], nfree = DEPTH;
	char name[32];
	double t0 = mono_s(), end = t0 + 60;
	int rc;

	if (bufs == NULL || want == NULL) {
		check(false, "many: memory", "malloc");
		goto out;
	}
	/* Each op in flight has its own buffer (buf_of[cookie]) until reaped. */
	for (i = 0; i < DEPTH; i++)
		freebuf[i] = i;
	while (done < NOBJ && mono_s() < end) {
		while (next < NOBJ && nfree > 0) {
			uint8_t *b;

			buf_of[next] = freebuf[--nfree];
			b = bufs + (size_t)buf_of[next] * MIB;

			snprintf(name, sizeof(name), "col.%u", next);
			if (write) {
				fill(b, MIB, next);
				rc = shared_put(s, ns, name, b, MIB, next);
			} else {
				rc = shared_get(s, ns, name, b, MIB, next);
			}
			if (rc < 0) {
				bad++;
				break;
			}
			next++;
		}
		n = shared_poll(s, d, DEPTH, 200);
		for (i = 0; i < n; i++) {
			done++;
			freebuf[nfree++] = buf_of[d[i].cookie];
			if (d[i].status != 0) {
				bad++;
				continue;
			}
			if (!write) {
				fill(want, MIB, d[i].cookie);
				if (d[i].len != MIB ||
				    memcmp(bufs + (size_t)buf_of[d[i].cookie] * MIB, want, MIB) != 0)
					bad++;
			}
		}
		if (bad > 0)
			break;
	}
	char label[96];

	snprintf(label, sizeof(label), "%u objects of 1 MiB %s at depth %u: all %s", NOBJ,
		 write ? "written" : "read", DEPTH, write ? "completed 0" : "read back whole and right");
	check(done == NOBJ && bad == 0, label, "%u done, %u bad", done, bad);
	printf("  (%.2f s, %.0f MiB/s)\n", mono_s() - t0, done / (mono_s() - t0));
out:
	free(bufs);
	free(want);
}

struct bumper {
	uint32_t got[5];
	int rc;
	pthread_barrier_t *bar;
};

static void *
bump_thread(void *arg)
{
	struct bumper *b = arg;
	char err[256];
	struct shared *s = open_with(5000, 4, NULL, err, sizeof(err));
	int i;

	b->rc = -EIO;
	pthread_barrier_wait(b->bar);
	if (s == NULL)
		return NULL;
	for (i = 0; i < 5; i++) {
		b->rc = shared_gen_bump(s, "gen.t", &b->got[i]);
		if (b->rc < 0)
			break;
	}
	shared_close(s);
	return NULL;
}

struct listed {
	unsigned int in_t1, obj_a, all, ns_a, ns_b;
};

static int
on_obj(void *arg, const char *ns, const char *name)
{
	struct listed *l = arg;

	l->all++;
	if (strcmp(ns, "t1") == 0) {
		l->in_t1++;
		l->obj_a += strcmp(name, "obj.a") == 0;
	}
	l->ns_a += strcmp(ns, "cap.a") == 0 && strcmp(name, "x") == 0;
	l->ns_b += strcmp(ns, "cap.b") == 0 && strcmp(name, "x") == 0;
	return 0;
}

static int
stop_at_first(void *arg, const char *ns, const char *name)
{
	(void)ns;
	(void)name;
	++*(unsigned int *)arg;
	return 7;
}

static void
phase_live(void)
{
	char err[256];
	struct shared *s;
	uint8_t *a = malloc(MIB), *b = malloc(MIB);
	uint32_t len = 0, g;
	int rc, i;

	/* Opening: what goes wrong is named. */
	struct shared_params bad = { .conf = "/nonexistent/ceph.conf" };

	s = shared_open(&bad, err, sizeof(err));
	check(s == NULL && strstr(err, "/nonexistent/ceph.conf") != NULL,
	      "open: a missing configuration is named", "%s", err);
	s = open_with(5000, DEPTH, "no_such_pool", err, sizeof(err));
	check(s == NULL && strstr(err, "pool no_such_pool") != NULL && strstr(err, "missing"),
	      "open: a missing pool is named", "%s", err);
	s = open_with(2500, DEPTH, NULL, err, sizeof(err));
	if (s == NULL) {
		check(false, "open", "%s", err);
		return;
	}
	check(shared_op_timeout_ms(s) == 3000, "open: the op timeout is rounded up to whole seconds",
	      "%u", shared_op_timeout_ms(s));

	/* Round trip of a whole column, exclusive create, namespaces, cap. */
	fill(a, MIB, 12345);
	rc = put_sync(s, "t1", "obj.a", a, MIB);
	check(rc == 0, "put 1 MiB", "%d", rc);
	memset(b, 0, MIB);
	rc = get_sync(s, "t1", "obj.a", b, MIB, &len);
	check(rc == 0 && len == MIB && memcmp(a, b, MIB) == 0, "get 1 MiB: the same bytes",
	      "rc %d len %u", rc, len);
	rc = put_sync(s, "t1", "obj.a", b, 100);
	check(rc == -EEXIST, "a second put of a name: -EEXIST", "%d", rc);
	rc = get_sync(s, "t1", "obj.a", b, MIB, &len);
	check(rc == 0 && len == MIB && memcmp(a, b, MIB) == 0,
	      "the second put changed nothing", "rc %d len %u", rc, len);
	rc = get_sync(s, "t2", "obj.a", b, MIB, &len);
	check(rc == -ENOENT, "the same name in another namespace: -ENOENT", "%d", rc);
	rc = get_sync(s, "", "obj.a", b, MIB, &len);
	check(rc == -ENOENT, "the same name in the default namespace: -ENOENT", "%d", rc);
	len = 99;
	rc = get_sync(s, "t1", "obj.a", b, MIB - 1, &len);
	check(rc == -EFBIG && len == 0, "a get with a cap one byte short: -EFBIG, 0 bytes",
	      "rc %d len %u", rc, len);
	rc = get_sync(s, "t1", "obj.a", b, MIB, &len);
	check(rc == 0 && len == MIB, "a get with a cap of exactly its size", "rc %d len %u", rc,
	      len);
	len = 99;
	rc = get_sync(s, "t1", "obj.a", NULL, 0, &len);
	check(rc == -EFBIG && len == 0, "a get with no room (cap 0): -EFBIG", "rc %d len %u", rc,
	      len);
	rc = put_sync(s, "t1", "empty", a, 0);
	check(rc == 0, "put of 0 bytes", "%d", rc);
	rc = get_sync(s, "t1", "empty", b, MIB, &len);
	check(rc == 0 && len == 0, "get of 0 bytes", "rc %d len %u", rc, len);
	rc = get_sync(s, "t1", "empty", NULL, 0, &len);
	check(rc == 0 && len == 0, "get of 0 bytes with cap 0", "rc %d len %u", rc, len);

	/* An op keeps the namespace it was submitted with: the same name into
	 * four namespaces, submitted back to back, nothing reaped between. */
	{
		static const char *nss[] = { "cap.a", "cap.b", "cap.c", "cap.d" };
		uint8_t tag[4][64];
		struct shared_done d[8];
		unsigned int got = 0, ok = 0, n, k;
		double end = mono_s() + 30;

		for (k = 0; k < 4; k++) {
			memset(tag[k], 'A' + (int)k, sizeof(tag[k]));
			rc = shared_put(s, nss[k], "x", tag[k], sizeof(tag[k]), 100 + k);
			if (rc < 0)
				break;
		}
		while (got < 4 && mono_s() < end) {
			n = shared_poll(s, d, 8, 100);
			for (k = 0; k < n; k++) {
				got++;
				ok += d[k].status == 0;
			}
		}
		check(ok == 4, "puts of one name to 4 namespaces back to back: none -EEXIST",
		      "%u of 4 ok", ok);
		ok = 0;
		for (k = 0; k < 4; k++) {
			rc = get_sync(s, nss[k], "x", b, MIB, &len);
			ok += rc == 0 && len == 64 && memcmp(b, tag[k], 64) == 0;
		}
		check(ok == 4, "each namespace holds the bytes submitted for it", "%u of 4", ok);
		/* And gets submitted back to back read each their own. */
		uint8_t rb[4][64];

		for (k = 0; k < 4; k++)
			shared_get(s, nss[k], "x", rb[k], 64, 200 + k);
		got = ok = 0;
		end = mono_s() + 30;
		while (got < 4 && mono_s() < end) {
			n = shared_poll(s, d, 8, 100);
			for (k = 0; k < n; k++) {
				unsigned int j = (unsigned int)(d[k].cookie - 200);

				got++;
				ok += d[k].status == 0 && j < 4 && memcmp(rb[j], tag[j], 64) == 0;
			}
		}
		check(ok == 4, "gets of one name from 4 namespaces back to back: each its own",
		      "%u of 4", ok);
	}

	/* max_inflight: the next submit is refused, nothing is lost. */
	{
		struct shared_done d[DEPTH + 1];
		unsigned int got = 0, k;
		double end = mono_s() + 30;

		for (k = 0; k < DEPTH; k++)
			shared_get(s, "t1", "obj.a", b, MIB, 300 + k);
		rc = shared_get(s, "t1", "obj.a", b, MIB, 999);
		check(rc == -EBUSY && shared_inflight(s) == DEPTH,
		      "a submit past max_inflight: -EBUSY", "rc %d inflight %u", rc,
		      shared_inflight(s));
		while (got < DEPTH && mono_s() < end)
			got += shared_poll(s, d + got, DEPTH + 1 - got, 200);
		check(got == DEPTH && shared_inflight(s) == 0, "every op submitted completes once",
		      "%u of %u, %u in flight", got, DEPTH, shared_inflight(s));
		check(shared_poll(s, d, 1, 1000) == 0, "poll with nothing in flight returns at once",
		      "got one");
	}

	/* Names that are not ours are refused before librados sees them. */
	rc = shared_put(s, "t1", "", a, 1, 1);
	check(rc == -EINVAL, "an empty name: -EINVAL", "%d", rc);
	{
		char longname[300];

		memset(longname, 'n', sizeof(longname) - 1);
		longname[sizeof(longname) - 1] = '\0';
		rc = shared_get(s, "t1", longname, b, MIB, 1);
		check(rc == -ENAMETOOLONG, "a 299-byte name: -ENAMETOOLONG", "%d", rc);
	}

	/* Delete. */
	rc = del_sync(s, "t1", "empty");
	check(rc == 0, "del", "%d", rc);
	rc = get_sync(s, "t1", "empty", b, MIB, &len);
	check(rc == -ENOENT, "get after del: -ENOENT", "%d", rc);
	rc = del_sync(s, "t1", "empty");
	check(rc == -ENOENT, "del of a missing object: -ENOENT", "%d", rc);

	/* Whole columns at depth. */
	many_round_trip(s, "many", true);
	many_round_trip(s, "many", false);

	/* Generations. */
	g = 77;
	rc = shared_gen_read(s, "gen.t", &g);
	check(rc == 0 && g == 0, "gen_read of an absent generation: 0", "rc %d gen %u", rc, g);
	g = 77;
	rc = shared_gen_read(s, "", &g);
	check(rc == 0 && g == 0, "gen_read of the default namespace's absent generation: 0",
	      "rc %d gen %u", rc, g);
	{
		pthread_barrier_t bar;
		struct bumper bp[2] = { { .bar = &bar }, { .bar = &bar } };
		pthread_t th[2];
		uint32_t seen[11] = { 0 };
		bool distinct = true;
		int k;

		pthread_barrier_init(&bar, NULL, 2);
		for (k = 0; k < 2; k++)
			pthread_create(&th[k], NULL, bump_thread, &bp[k]);
		for (k = 0; k < 2; k++)
			pthread_join(th[k], NULL);
		pthread_barrier_destroy(&bar);
		for (k = 0; k < 2; k++) {
			for (i = 0; i < 5; i++) {
				uint32_t v = bp[k].got[i];

				if (bp[k].rc < 0 || v < 1 || v > 10 || seen[v]++ > 0)
					distinct = false;
			}
		}
		check(distinct, "two bumpers at once, 5 bumps each: 1 to 10, each once",
		      "rc %d %d", bp[0].rc, bp[1].rc);
		rc = shared_gen_read(s, "gen.t", &g);
		check(rc == 0 && g == 10, "gen_read after them: 10", "rc %d gen %u", rc, g);
		rc = shared_gen_bump(s, "gen.t", &g);
		check(rc == 0 && g == 11, "one more bump: 11", "rc %d gen %u", rc, g);
	}
	rc = put_sync(s, "gen.bad", SHARED_GEN_OBJECT, "twelve\n", 7);
	rc = rc == 0 ? shared_gen_read(s, "gen.bad", &g) : rc;
	check(rc == -EBADMSG, "a generation that is not a number: -EBADMSG", "%d", rc);
	rc = shared_gen_bump(s, "gen.bad", &g);
	check(rc == -EBADMSG, "bumping it: -EBADMSG (not overwritten)", "%d", rc);

	/* Listing. */
	{
		struct listed l = { 0 };
		unsigned int calls = 0;

		rc = shared_list(s, "t1", on_obj, &l);
		check(rc == 0 && l.in_t1 == 1 && l.obj_a == 1 && l.all == 1,
		      "list of one namespace: its one object", "rc %d in_t1 %u all %u", rc, l.in_t1,
		      l.all);
		memset(&l, 0, sizeof(l));
		rc = shared_list(s, NULL, on_obj, &l);
		check(rc == 0 && l.obj_a == 1 && l.ns_a == 1 && l.ns_b == 1 &&
			      l.all >= 1 + 4 + NOBJ + 2,
		      "list of every namespace: everything put, each in its namespace",
		      "rc %d obj_a %u a %u b %u all %u", rc, l.obj_a, l.ns_a, l.ns_b, l.all);
		rc = shared_list(s, NULL, stop_at_first, &calls);
		check(rc == 7 && calls == 1, "a nonzero return stops the listing and is returned",
		      "rc %d calls %u", rc, calls);
	}
	{
		struct shared_stats st;

		shared_stats_get(s, &st);
		check(st.exists == 1 && st.too_big == 2 && st.busy == 1 && st.timeouts == 0,
		      "the counters say what happened", "exists %" PRIu64 " too_big %" PRIu64
		      " busy %" PRIu64 " timeouts %" PRIu64, st.exists, st.too_big, st.busy,
		      st.timeouts);
	}
	shared_close(s);
	free(a);
	free(b);
}

/* ---- kvss-shared's fixture: columns and garbage for ls and sweep ----------- */

/*
 * Organization 0x1111 (layout: model 1, 2 shards, 64 tokens, one cache of 16
 * bytes a token on each shard) holds, under generations 0/0 (none bumped):
 *   live      column 1: record and both slices, first used now
 *   old       column 2: first used 2 hours ago (past --ttl-first 3600)
 *   orphan    column 3: slices only (young: kept until --grace 0)
 *   stale     column 4: written under global generation 5
 *   garbage   a record name holding random bytes; a record forged for
 *             organization 0x2222; a record under another column's name;
 *             a record-named object of 4 KiB; an object named "hello"
 * and a namespace and a name with terminal escapes in them.
 */
#define FX_ORG 0x1111u
#define FX_TOKENS 64
#define FX_BPT 16

/* The sweep of test-shared.sh that deletes an object (0: none does). */
enum fx_after { FX_SWEPT1 = 1, FX_SWEPT2 = 2, FX_SWEPT3 = 3 };

struct fx_obj {
	char ns[SHARED_NS_MAX + 32];
	char name[SHARED_NAME_MAX + 32];
	int gone_after; /* enum fx_after */
	const char *what;
};

static struct fx_obj fx[32];
static unsigned int nfx;

/* Without a handle the table is only rebuilt (the phases that check). */
static int
fx_put(struct shared *s, const char *ns, const char *name, const void *b, uint32_t len)
{
	return s != NULL ? put_sync(s, ns, name, b, len) : 0;
}

static uint32_t
fx_layout(void)
{
	uint32_t bpt = FX_BPT;

	return shared_layout(1, "fx", 2, FX_TOKENS, 1, &bpt);
}

static void
fx_add(const char *ns, const char *name, int gone_after, const char *what)
{
	struct fx_obj *o = &fx[nfx++];

	snprintf(o->ns, sizeof(o->ns), "%s", ns);
	snprintf(o->name, sizeof(o->name), "%s", name);
	o->gone_after = gone_after;
	o->what = what;
}

/* A column's record and slices (@p slices, @p record: which to write). */
static int
fx_column_go(struct shared *s, uint64_t org, uint64_t key, uint32_t gg, uint32_t go,
	     uint64_t first_use, bool record, int gone_rec, int gone_slices, const char *what);

/* The fixture's organization's generation (written by the fixture): its columns are of it. */
#define FX_GO 2

static int
fx_column(struct shared *s, uint64_t org, uint64_t key, uint32_t gg, uint64_t first_use,
	  bool record, int gone_rec, int gone_slices, const char *what)
{
	return fx_column_go(s, org, key, gg, FX_GO, first_use, record, gone_rec, gone_slices, what);
}

static int
fx_column_go(struct shared *s, uint64_t org, uint64_t key, uint32_t gg, uint32_t go,
	     uint64_t first_use, bool record, int gone_rec, int gone_slices, const char *what)
{
	uint8_t obj[SHARED_HDR_LEN + FX_TOKENS * FX_BPT];
	char ns[SHARED_NS_MAX], name[SHARED_NAME_MAX];
	struct shared_hdr h = {
		.org = org, .key = key, .parent = org, .first_use_ns = first_use,
		.written_ns = first_use, .gen_global = gg, .gen_org = go, .layout = fx_layout(),
		.model = 1, .start = 0, .tokens = FX_TOKENS,
	};
	uint16_t sh;
	int rc;

	h.object_id = shared_object_id(org, key, gg, go, h.layout);
	shared_ns(ns, org);
	for (sh = 0; sh < 2; sh++) {
		h.kind = SHARED_SLICE;
		h.shard = sh;
		h.cache = 0;
		h.bytes_per_token = FX_BPT;
		h.payload_len = FX_TOKENS * FX_BPT;
		fill(obj + SHARED_HDR_LEN, FX_TOKENS * FX_BPT, key * 2 + sh);
		shared_hdr_encode(obj, &h, obj + SHARED_HDR_LEN);
		shared_slice_name(name, h.object_id, sh, 0);
		rc = fx_put(s, ns, name, obj, sizeof(obj));
		if (rc != 0)
			return rc;
		fx_add(ns, name, gone_slices, what);
	}
	if (!record)
		return 0;
	h.kind = SHARED_RECORD;
	h.shard = 2;
	h.cache = 1;
	h.bytes_per_token = 0;
	h.payload_len = 0;
	shared_hdr_encode(obj, &h, NULL);
	shared_record_name(name, h.object_id);
	rc = fx_put(s, ns, name, obj, SHARED_HDR_LEN);
	if (rc == 0)
		fx_add(ns, name, gone_rec, what);
	return rc;
}

static uint64_t
wall_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Build the fixture's table; with @p s, write it too. */
static int
fx_build(struct shared *s)
{
	uint64_t now = wall_ns(), hour = 3600ull * 1000000000u;
	uint8_t obj[4096];
	char ns[SHARED_NS_MAX], name[SHARED_NAME_MAX];
	struct shared_hdr h;
	int rc = 0;

	nfx = 0;
	/* The fixture is written once; its table is rebuilt by every phase,
	 * with the same names (first use does not enter a name). */
	rc |= fx_column(s, FX_ORG, 1001, 0, now, true, FX_SWEPT3, FX_SWEPT3, "live column");
	rc |= fx_column(s, FX_ORG, 1002, 0, now - 2 * hour, true, FX_SWEPT1, FX_SWEPT1,
			"column past the TTL");
	rc |= fx_column(s, FX_ORG, 1003, 0, now, false, 0, FX_SWEPT2, "slices without a record");
	/* The organization's generation: FX_GO (a global one of 0 is never older). */
	shared_ns(ns, FX_ORG);
	if (s != NULL)
		rc |= fx_put(s, ns, SHARED_GEN_OBJECT, "2\n", 2);
	fx_add(ns, SHARED_GEN_OBJECT, 0, "the organization's generation");
	rc |= fx_column_go(s, FX_ORG, 1004, 0, FX_GO - 1, now, true, FX_SWEPT1, FX_SWEPT1,
			"column of an older generation");
	shared_ns(ns, FX_ORG);

	/* Random bytes under a record's name. */
	fill(obj, sizeof(obj), 77);
	shared_record_name(name, 0xdeadbeefcafef00dull);
	rc |= fx_put(s, ns, name, obj, SHARED_HDR_LEN);
	fx_add(ns, name, FX_SWEPT1, "random bytes named as a record");

	/* A well-formed record of organization 0x2222 put in 0x1111's namespace. */
	memset(&h, 0, sizeof(h));
	h.kind = SHARED_RECORD;
	h.org = 0x2222;
	h.key = 1005;
	h.parent = 0x2222;
	h.first_use_ns = now;
	h.layout = fx_layout();
	h.model = 1;
	h.shard = 2;
	h.cache = 1;
	h.tokens = FX_TOKENS;
	h.object_id = shared_object_id(0x2222, 1005, 0, 0, h.layout);
	shared_hdr_encode(obj, &h, NULL);
	shared_record_name(name, h.object_id);
	rc |= fx_put(s, ns, name, obj, SHARED_HDR_LEN);
	fx_add(ns, name, FX_SWEPT1, "another organization's record");

	/* A valid record of 0x1111 under another id's name. */
	h.org = FX_ORG;
	h.parent = FX_ORG;
	h.object_id = shared_object_id(FX_ORG, 1006, 0, 0, h.layout);
	shared_hdr_encode(obj, &h, NULL);
	shared_record_name(name, h.object_id ^ 1);
	rc |= fx_put(s, ns, name, obj, SHARED_HDR_LEN);
	fx_add(ns, name, FX_SWEPT1, "a record under another id's name");

	/* A valid record first used an hour ahead of every clock (it would never expire). */
	h.first_use_ns = now + hour;
	h.written_ns = now + hour;
	h.key = 1007;
	h.gen_org = FX_GO;
	h.object_id = shared_object_id(FX_ORG, 1007, 0, FX_GO, h.layout);
	shared_hdr_encode(obj, &h, NULL);
	shared_record_name(name, h.object_id);
	rc |= fx_put(s, ns, name, obj, SHARED_HDR_LEN);
	fx_add(ns, name, FX_SWEPT1, "a record first used in the future");

	/* A record whose id its own fields do not give (its name and header
	 * agree): no lookup finds it, and it would pass for the column of its
	 * key that a lookup does find. */
	h.first_use_ns = now;
	h.written_ns = now;
	h.key = 1008;
	h.gen_org = FX_GO;
	h.object_id = shared_object_id(FX_ORG, 1009, 0, FX_GO, h.layout);
	shared_hdr_encode(obj, &h, NULL);
	shared_record_name(name, h.object_id);
	rc |= fx_put(s, ns, name, obj, SHARED_HDR_LEN);
	fx_add(ns, name, FX_SWEPT1, "a record whose id its key does not give");

	/* 4 KiB under a record's name (a record is 128 bytes). */
	shared_record_name(name, 0x0123456789abcdefull);
	rc |= fx_put(s, ns, name, obj, sizeof(obj));
	fx_add(ns, name, FX_SWEPT1, "a record-named object of 4 KiB");

	rc |= fx_put(s, ns, "hello", "hi", 2);
	fx_add(ns, "hello", 0, "a name not ours");
	rc |= fx_put(s, "\x1b[31mevil\x07", "\x1b]0;pwned\x07", "x", 1);
	fx_add("\x1b[31mevil\x07", "\x1b]0;pwned\x07", 0, "terminal escapes in names");
	return rc;
}

static void
phase_fixture(void)
{
	char err[256];
	struct shared *s = open_with(5000, DEPTH, NULL, err, sizeof(err));
	int rc;

	if (s == NULL) {
		check(false, "open", "%s", err);
		return;
	}
	rc = fx_build(s);
	check(rc == 0, "kvss-shared's fixture written (4 columns, 6 strangers)", "%d", rc);
	shared_close(s);
}

/*
 * Round 3's "generation going backwards", in organization 0x4444's
 * namespace (under global generation 1, the test's by then): it was reset to
 * 3 and records were written under it, then its
 * generation object was removed (it reads 0), and a record of generation 0
 * (from before the reset) is still there.
 */
static void
phase_newer(void)
{
	char err[256];
	struct shared *s = open_with(5000, DEPTH, NULL, err, sizeof(err));
	int rc;

	if (s == NULL) {
		check(false, "open", "%s", err);
		return;
	}
	rc = fx_column_go(s, 0x4444, 2001, 1, 3, wall_ns(), true, 0, 0, "newer");
	rc |= fx_column_go(s, 0x4444, 2002, 1, 0, wall_ns(), true, 0, 0, "from before the reset");
	check(rc == 0, "a column of generation 3 and one of 0, the generation object absent", "%d",
	      rc);
	shared_close(s);
}

/*
 * The level's shares: a noisy organization (0x6666, no share) and a quiet
 * one (0x7777, guaranteed half of a 256-token level by test-shared.sh),
 * each column 64 tokens, a prompt's first, under global generation 1 (the
 * test's by then). The quiet one's columns are the oldest of all: the
 * sweep must take the noisy one's two oldest instead. With @p s, written;
 * without, the table only.
 */
static void fx_check(struct shared *s, int after);

static int
shares_fx(struct shared *s)
{
	uint64_t now = wall_ns(), hour = 3600ull * 1000000000u;
	int rc = 0, k;

	nfx = 0;
	for (k = 0; k < 4; k++)
		rc |= fx_column_go(s, 0x6666, 3001 + (uint64_t)k, 1, 0, now - (uint64_t)(4 - k) * hour,
				   true, k < 2, k < 2,
				   k < 2 ? "the noisy organization's two oldest columns"
					 : "its two younger columns");
	for (k = 0; k < 2; k++)
		rc |= fx_column_go(s, 0x7777, 3101 + (uint64_t)k, 1, 0, now - (uint64_t)(6 - k) * hour,
				   true, 0, 0, "the quiet organization's columns (older, guaranteed)");
	return rc;
}

/* The shares' columns written (@p after false), or after the sweep, exactly what should remain. */
static void
phase_shares(bool after)
{
	char err[256];
	struct shared *s = open_with(5000, DEPTH, NULL, err, sizeof(err));

	if (s == NULL) {
		check(false, "open", "%s", err);
		return;
	}
	if (!after) {
		check(shares_fx(s) == 0, "6 columns of two organizations written", "failed");
	} else {
		shares_fx(NULL);
		fx_check(s, 1);
	}
	shared_close(s);
}

/* A generation that is not a number, in organization 0x3333's namespace. */
static void
phase_badgen(void)
{
	char err[256], ns[SHARED_NS_MAX];
	struct shared *s = open_with(5000, DEPTH, NULL, err, sizeof(err));
	int rc;

	if (s == NULL) {
		check(false, "open", "%s", err);
		return;
	}
	shared_ns(ns, 0x3333);
	rc = put_sync(s, ns, SHARED_GEN_OBJECT, "zz\n", 3);
	check(rc == 0, "a garbage generation written", "%d", rc);
	shared_close(s);
}

/* The table's objects after sweep @p after (0: none yet): exactly what should remain does. */
static void
fx_check(struct shared *s, int after)
{
	char label[160];
	unsigned int i;
	uint64_t size;
	int64_t mtime;

	for (i = 0; i < nfx; i++) {
		bool gone = fx[i].gone_after != 0 && fx[i].gone_after <= after;
		int rc = shared_stat(s, fx[i].ns, fx[i].name, &size, &mtime);

		snprintf(label, sizeof(label), "%s: %s", fx[i].what, gone ? "deleted" : "kept");
		check(gone ? rc == -ENOENT : rc == 0, label, "%s: stat %d", fx[i].name, rc);
	}
}

/* After sweep @p after (0: none yet): exactly what should remain does. */
static void
phase_swept(int after)
{
	char err[256];
	struct shared *s = open_with(5000, DEPTH, NULL, err, sizeof(err));

	if (s == NULL) {
		check(false, "open", "%s", err);
		return;
	}
	fx_build(NULL);
	fx_check(s, after);
	shared_close(s);
}

static void
phase_degraded(void)
{
	char err[256];
	struct shared *s = open_with(5000, DEPTH, NULL, err, sizeof(err));

	if (s == NULL) {
		check(false, "open with one OSD down", "%s", err);
		return;
	}
	many_round_trip(s, "many", false);
	shared_close(s);
}

static void
phase_down(void)
{
	char err[256];
	uint8_t *b = malloc(MIB);
	struct shared_done d[DEPTH];
	struct shared *s = open_with(3000, DEPTH, NULL, err, sizeof(err));
	unsigned int got = 0, tmo = 0, k;
	double t0, took, end;

	if (s == NULL || b == NULL) {
		check(false, "open with every OSD down (the mon is up)", "%s", err);
		free(b);
		return;
	}
	t0 = mono_s();
	for (k = 0; k < 8; k++) {
		char name[32];

		snprintf(name, sizeof(name), "col.%u", k);
		shared_get(s, "many", name, b, MIB, k); /* the same buffer: none returns bytes */
	}
	shared_put(s, "t1", "after", b, 4096, 8);
	end = t0 + 3 + 2 + 5; /* watched past the bound, to measure a miss */
	while (got < 9 && mono_s() < end) {
		unsigned int n = shared_poll(s, d, DEPTH, 200);

		for (k = 0; k < n; k++)
			tmo += d[k].status == -ETIMEDOUT;
		got += n;
	}
	took = mono_s() - t0;
	check(got == 9 && tmo == 9, "8 gets and a put with every OSD down: -ETIMEDOUT",
	      "%u of 9 done, %u timed out", got, tmo);
	check(got == 9 && took <= 3 + 2, "... within the op timeout (3 s) + 2 s",
	      "took %.2f s", took);
	printf("  (all ended in %.2f s)\n", took);
	t0 = mono_s();
	uint32_t g;
	int rc = shared_gen_read(s, "gen.t", &g);

	took = mono_s() - t0;
	check(rc == -ETIMEDOUT && took <= 5, "a synchronous gen_read: -ETIMEDOUT within 5 s",
	      "rc %d in %.2f s", rc, took);
	t0 = mono_s();
	shared_close(s);
	check(mono_s() - t0 < 2, "close returns at once", "%.2f s", mono_s() - t0);
	free(b);
}

static void
phase_unreachable(void)
{
	char err[256] = "";
	double t0 = mono_s(), took;
	struct shared *s = open_with(2000, DEPTH, NULL, err, sizeof(err));

	took = mono_s() - t0;
	check(s == NULL && strstr(err, "unreachable") != NULL,
	      "open with the cluster stopped fails, saying unreachable", "%s", err);
	check(took <= 2 + 2, "... within the timeout (2 s) + 2 s", "took %.2f s", took);
	printf("  (%s; %.2f s)\n", err, took);
	shared_close(s);
}

int
main(int argc, char **argv)
{
	const char *phase = argc > 1 ? argv[1] : "live";

	conf = getenv("KVSS_CEPH_CONF");
	if (conf == NULL) {
		fprintf(stderr, "test_shared_rados: set KVSS_CEPH_CONF (scripts/test-shared.sh does)\n");
		return 2;
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (strcmp(phase, "live") == 0)
		phase_live();
	else if (strcmp(phase, "fixture") == 0)
		phase_fixture();
	else if (strcmp(phase, "badgen") == 0)
		phase_badgen();
	else if (strcmp(phase, "newer") == 0)
		phase_newer();
	else if (strcmp(phase, "shares") == 0 || strcmp(phase, "sharesswept") == 0)
		phase_shares(phase[6] != '\0');
	else if (strncmp(phase, "swept", 5) == 0 && phase[5] >= '0' && phase[5] <= '3' &&
		 phase[6] == '\0')
		phase_swept(phase[5] - '0');
	else if (strcmp(phase, "degraded") == 0)
		phase_degraded();
	else if (strcmp(phase, "down") == 0)
		phase_down();
	else if (strcmp(phase, "unreachable") == 0)
		phase_unreachable();
	else {
		fprintf(stderr, "usage: test_shared_rados live|fixture|badgen|newer|swept0..3|shares|"
				"sharesswept|degraded|down|unreachable\n");
		return 2;
	}
	printf("test_shared_rados %s: %u passed, %u failed\n", phase, passed, failed);
	return failed == 0 ? 0 : 1;
}
