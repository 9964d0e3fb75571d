/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * kvss-trace: replay a request trace through the real driver library, a real
 * kvstore and an emulated wafer that checks every refilled byte, with the
 * trace's clock, for each shard capacity asked: "what hit ratio do I get
 * from this much shard memory?"
 *
 * Formats, one JSON object per line:
 *  - Mooncake: {"timestamp": ms, "input_length": n, "output_length": k,
 *    "hash_ids": [...]}: 512-token blocks named by chained hash ids; token
 *    ids are made from (hash id, position in block), so equal ids give equal
 *    tokens; the last block may be partial.
 *  - native: {"org": "acme", "tokens": [...], "cache_length_allowed": n,
 *    "output_length": k, "timestamp": ms} (all but tokens optional).
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "replay.h"

struct req {
	uint64_t ts_ms;
	uint64_t iso;
	uint32_t *tokens;
	uint32_t n;
	uint32_t allowed;
	uint32_t out;
	uint64_t first_block; /* Mooncake: first hash id, for --orgs */
	uint64_t *ids;	      /* Mooncake: block hash ids, for --baseline */
	uint32_t nids;
};

struct trace {
	struct req *r;
	size_t n, cap;
	uint64_t tokens;
};

/* ---- A small JSON scanner for flat objects ------------------------------------ */

static const char *
skip_ws(const char *p)
{
	while (*p == ' ' || *p == '\t' || *p == '\r' || *p == '\n')
		p++;
	return p;
}

/* Find "key": in the object; return the value's start or NULL. */
static const char *
json_key(const char *line, const char *key)
{
	size_t kl = strlen(key);
	const char *p = line;

	while ((p = strchr(p, '"')) != NULL) {
		if (strncmp(p + 1, key, kl) == 0 && p[1 + kl] == '"') {
			const char *q = skip_ws(p + 2 + kl);

			if (*q == ':')
				return skip_ws(q + 1);
		}
		p++;
	}
	return NULL;
}

static int
json_u64(const char *line, const char *key, uint64_t *v)
{
	const char *p = json_key(line, key);
	char *end;

	if (p == NULL)
		return -ENOENT;
	errno = 0;
	*v = strtoull(p, &end, 10);
	if (end == p || errno != 0)
		return -EINVAL;
	return 0;
}

/* An array of unsigned integers; *out is malloc'd. */
static int
json_u64_array(const char *line, const char *key, uint64_t **out, size_t *n)
{
	const char *p = json_key(line, key);
	size_t cap = 64;
	uint64_t *a;

	*n = 0;
	if (p == NULL)
		return -ENOENT;
	if (*p != '[')
		return -EINVAL;
	a = malloc(sizeof(*a) * cap);
	if (a == NULL)
		return -ENOMEM;
	p = skip_ws(p + 1);
	while (*p != ']') {
		char *end;

		if (*n == cap) {
			uint64_t *b = realloc(a, sizeof(*a) * cap * 2);

			if (b == NULL) {
				free(a);
				return -ENOMEM;
			}
			a = b;
			cap *= 2;
		}
		a[*n] = strtoull(p, &end, 10);
		if (end == p) {
			free(a);
			return -EINVAL;
		}
		(*n)++;
		p = skip_ws(end);
		if (*p == ',')
			p = skip_ws(p + 1);
		else if (*p != ']') {
			free(a);
			return -EINVAL;
		}
	}
	*out = a;
	return 0;
}

static int
json_str(const char *line, const char *key, char *out, size_t cap)
{
	const char *p = json_key(line, key), *q;

	if (p == NULL)
		return -ENOENT;
	if (*p != '"')
		return -EINVAL;
	q = strchr(p + 1, '"');
	if (q == NULL || (size_t)(q - p - 1) >= cap)
		return -EINVAL;
	memcpy(out, p + 1, (size_t)(q - p - 1));
	out[q - p - 1] = '\0';
	return 0;
}

/* Token id of position @pos of the block named @hash_id: the same everywhere. */
static inline uint32_t
block_token(uint64_t hash_id, uint32_t pos)
{
	uint64_t x = hash_id * 0x9E3779B97F4A7C15ULL + pos + 1;

	x ^= x >> 31;
	x *= 0xBF58476D1CE4E5B9ULL;
	x ^= x >> 29;
	return (uint32_t)x;
}

static int
load(const char *path, uint32_t block, struct trace *t, char *err, size_t errlen)
{
	FILE *f = fopen(path, "r");
	char *line = NULL;
	size_t lcap = 0;
	ssize_t len;
	unsigned long lineno = 0;
	uint64_t default_iso = proto_ref_isolation_id("default", 7);

	if (f == NULL) {
		snprintf(err, errlen, "%s: %s", path, strerror(errno));
		return -1;
	}
	while ((len = getline(&line, &lcap, f)) >= 0) {
		struct req q = {0};
		uint64_t *ids = NULL, v;
		size_t nids = 0, i;
		char org[256];

		lineno++;
		if (len <= 1 || skip_ws(line)[0] == '\0')
			continue;
		if (json_u64(line, "timestamp", &q.ts_ms) != 0)
			q.ts_ms = lineno;
		if (json_u64(line, "output_length", &v) == 0)
			q.out = (uint32_t)v;
		q.iso = json_str(line, "org", org, sizeof(org)) == 0
				? proto_ref_isolation_id(org, strlen(org))
				: default_iso;
		if (json_u64_array(line, "hash_ids", &ids, &nids) == 0) {
			uint64_t in;

			if (json_u64(line, "input_length", &in) != 0 || in > (uint64_t)nids * block ||
			    (nids > 0 && in <= (uint64_t)(nids - 1) * block)) {
				snprintf(err, errlen, "%s:%lu: input_length does not match hash_ids",
					 path, lineno);
				goto bad;
			}
			q.n = (uint32_t)in;
			q.tokens = malloc(sizeof(uint32_t) * (q.n ? q.n : 1));
			for (i = 0; i < q.n; i++)
				q.tokens[i] = block_token(ids[i / block], (uint32_t)(i % block));
			q.first_block = nids ? ids[0] : 0;
			q.ids = ids;
			q.nids = (uint32_t)nids;
		} else if (json_u64_array(line, "tokens", &ids, &nids) == 0) {
			q.n = (uint32_t)nids;
			q.tokens = malloc(sizeof(uint32_t) * (nids ? nids : 1));
			for (i = 0; i < nids; i++)
				q.tokens[i] = (uint32_t)ids[i];
			q.first_block = nids ? ids[0] : 0;
			free(ids);
		} else {
			snprintf(err, errlen, "%s:%lu: neither hash_ids nor tokens", path, lineno);
			goto bad;
		}
		q.allowed = q.n;
		if (json_u64(line, "cache_length_allowed", &v) == 0)
			q.allowed = (uint32_t)v;
		if (t->n == t->cap) {
			t->cap = t->cap ? 2 * t->cap : 1024;
			t->r = realloc(t->r, sizeof(*t->r) * t->cap);
		}
		t->r[t->n++] = q;
		t->tokens += q.n;
	}
	free(line);
	fclose(f);
	if (t->n == 0) {
		snprintf(err, errlen, "%s: no requests", path);
		return -1;
	}
	return 0;
bad:
	free(line);
	fclose(f);
	return -1;
}

/*
 * The built-in workload, for when no trace is at hand: @n requests from 8
 * organizations, each with 2 system prompts (500-3000 tokens). 30% start a
 * chat (a system prompt and a first message), 60% continue one (the last
 * prompt, its answer and a new message: the answer is cached, since
 * cache_length_allowed covers it), 10% are one-off documents (5k-20k
 * tokens). About 5 requests a second. The replay generates answer token p
 * as p * 2654435761 (replay.c), so the generator writes the same.
 */
struct chat {
	uint32_t *tok;
	uint32_t n;
	uint64_t iso;
	uint32_t answer;
};

static uint64_t gen_rng = 0x5eed;

static uint32_t
grand(uint32_t n)
{
	gen_rng ^= gen_rng << 13;
	gen_rng ^= gen_rng >> 7;
	gen_rng ^= gen_rng << 17;
	return (uint32_t)(gen_rng % n);
}

static int
generate(size_t n, struct trace *t)
{
	enum { ORGS = 8, CHATS = 64 };
	static uint32_t sys[ORGS][2][3000];
	static uint32_t syslen[ORGS][2];
	struct chat chats[CHATS] = {{0}};
	uint64_t ts = 0;
	size_t i;
	unsigned int o, k;

	for (o = 0; o < ORGS; o++)
		for (k = 0; k < 2; k++) {
			syslen[o][k] = 500 + grand(2500);
			for (i = 0; i < syslen[o][k]; i++)
				sys[o][k][i] = 1000000 * (o + 1) + 1000 * k + (uint32_t)i;
		}
	t->cap = n;
	t->r = calloc(n, sizeof(*t->r));
	if (t->r == NULL)
		return -1;
	for (i = 0; i < n; i++) {
		struct req *q = &t->r[i];
		uint32_t kind = grand(10), c = grand(CHATS), msg = 50 + grand(350), j;

		ts += grand(400);
		q->ts_ms = ts;
		q->out = 50 + grand(250);
		if (kind == 0) {
			/* A one-off document. */
			o = grand(ORGS);
			q->n = 5000 + grand(15000);
			q->tokens = malloc(sizeof(uint32_t) * q->n);
			for (j = 0; j < q->n; j++)
				q->tokens[j] = 0x80000000u | (uint32_t)(i * 20011 + j);
			q->iso = proto_ref_isolation_id("org", 3) + o;
			q->allowed = q->n;
		} else if (kind <= 3 || chats[c].tok == NULL) {
			/* A new chat in slot c. */
			o = grand(ORGS);
			k = grand(2);
			free(chats[c].tok);
			chats[c].n = syslen[o][k] + msg;
			chats[c].tok = malloc(sizeof(uint32_t) * chats[c].n);
			memcpy(chats[c].tok, sys[o][k], sizeof(uint32_t) * syslen[o][k]);
			for (j = syslen[o][k]; j < chats[c].n; j++)
				chats[c].tok[j] = 0x40000000u | (uint32_t)(i * 1009 + j);
			chats[c].iso = proto_ref_isolation_id("org", 3) + o;
			goto emit;
		} else {
			/* The chat goes on: its answer, then a new message. */
			struct chat *ch = &chats[c];
			uint32_t n0 = ch->n + ch->answer;

			ch->tok = realloc(ch->tok, sizeof(uint32_t) * (n0 + msg));
			for (j = ch->n; j < n0; j++)
				ch->tok[j] = j * 2654435761u;
			for (j = n0; j < n0 + msg; j++)
				ch->tok[j] = 0x40000000u | (uint32_t)(i * 1009 + j);
			ch->n = n0 + msg;
emit:
			q->n = chats[c].n;
			q->tokens = malloc(sizeof(uint32_t) * q->n);
			memcpy(q->tokens, chats[c].tok, sizeof(uint32_t) * q->n);
			q->iso = chats[c].iso;
			q->allowed = q->n + q->out; /* the answer may be cached */
			chats[c].answer = q->out;
			if (chats[c].n > 60000) {
				free(chats[c].tok);
				chats[c].tok = NULL;
			}
		}
		t->tokens += q->n;
	}
	t->n = n;
	for (k = 0; k < CHATS; k++)
		free(chats[k].tok);
	return 0;
}

struct opts {
	size_t generate;
	const char *trace;
	uint64_t capacity[16];
	unsigned int ncap;
	uint32_t column;
	enum prefixcache_policy policy;
	uint64_t ttl_last_s, ttl_first_s;
	uint32_t block;
	bool json;
	bool baseline;
	bool no_minus_one;
	size_t limit;
	uint32_t orgs;
};

struct result {
	uint64_t capacity, requests, input, hit, evicted, deleted, expired, peak, perr, vfail;
	double wall;
	double baseline;
};

static double
now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int
run(const struct opts *o, const struct trace *t, uint64_t capacity, struct result *res)
{
	struct replay_params p = {.bytes_per_token = 8, .num_buffers = 1};
	struct prefixcache_stats ps;
	struct replay_stats rs;
	struct replay *r;
	size_t i, n = o->limit && o->limit < t->n ? o->limit : t->n, step = n / 20 ? n / 20 : 1;
	uint64_t cap = capacity ? capacity : t->tokens + 1024;
	double t0 = now_s();
	bool tty = isatty(2);

	p.pc.num_models = 1;
	p.pc.column = o->column;
	p.pc.policy = o->policy;
	p.pc.no_minus_one = o->no_minus_one;
	p.pc.ttl_last_ns = o->ttl_last_s * 1000000000ull;
	p.pc.ttl_first_ns = o->ttl_first_s * 1000000000ull;
	p.pc.model[0].num_caches = 1;
	p.pc.model[0].cache[0] = (struct prefixcache_cache){0, PREFIXCACHE_FULL, 0, 0, cap};
	p.pc.model[0].max_batch_tokens = 256;
	r = replay_create(&p);
	if (r == NULL) {
		fprintf(stderr, "kvss-trace: cannot set up capacity %" PRIu64 " (memory?)\n", cap);
		return -1;
	}
	memset(res, 0, sizeof(*res));
	res->capacity = capacity;
	for (i = 0; i < n; i++) {
		const struct req *q = &t->r[i];
		uint64_t now = q->ts_ms * 1000000ull;
		struct prefixcache_request rq = {
			.isolation_id = q->iso, .tokens = q->tokens, .num_tokens = q->n,
			.cache_length_allowed = q->allowed, .first_multimodal = UINT32_MAX,
			.sequence_id = (uint32_t)i};

		if (o->orgs)
			rq.isolation_id = proto_ref_isolation_id("org", 3) + q->first_block % o->orgs;
		res->hit += replay_request(r, 0, &rq, NULL, q->out, now);
		res->input += q->n;
		res->requests++;
		if (o->ttl_last_s || o->ttl_first_s)
			prefixcache_expire(replay_pc(r), now, 4096);
		if ((i + 1) % step == 0 && (tty || (i + 1) % (5 * step) == 0))
			fprintf(stderr, "%skvss-trace: capacity %" PRIu64 ": %zu/%zu requests, hit ratio %.3f%s",
				tty ? "\r" : "", capacity, i + 1, n,
				res->input ? (double)res->hit / res->input : 0, tty ? "" : "\n");
	}
	if (tty)
		fprintf(stderr, "\n");
	prefixcache_stats(replay_pc(r), &ps);
	replay_stats(r, &rs);
	res->evicted = ps.evicted_tokens;
	res->deleted = ps.deleted_tokens;
	res->expired = ps.expired_tokens;
	res->peak = ps.peak_stored_tokens;
	res->perr = rs.protocol_errors;
	res->vfail = rs.verify_failures;
	res->wall = now_s() - t0;
	if (rs.max_stored > cap)
		res->perr++;
	replay_free(r);
	return 0;
}

/*
 * The plain baseline: an LRU cache of the trace's 512-token blocks (by hash
 * id), holding at most capacity / block blocks. A request hits the blocks of
 * its longest cached prefix (a partial last block counts its tokens), then
 * all its blocks become most recent.
 */
struct lru_node {
	uint64_t id;
	uint32_t prev, next, hnext;
};

static double
baseline_lru(const struct trace *t, uint64_t capacity, uint32_t block, size_t limit)
{
	size_t n = limit && limit < t->n ? limit : t->n, i;
	uint64_t maxb = capacity ? capacity / block : UINT64_MAX, used = 0, hit = 0, input = 0;
	uint32_t nb = 1 << 22, head = UINT32_MAX, tail = UINT32_MAX, nn = 0, freel = UINT32_MAX;
	uint32_t *bucket = malloc(sizeof(uint32_t) * nb), cap = 1 << 16;
	struct lru_node *nd = malloc(sizeof(*nd) * cap);

	if (bucket == NULL || nd == NULL)
		return -1;
	memset(bucket, 0xff, sizeof(uint32_t) * nb);
	for (i = 0; i < n; i++) {
		const struct req *q = &t->r[i];
		uint32_t k;
		bool prefix = true;

		input += q->n;
		for (k = 0; k < q->nids; k++) {
			uint64_t id = q->ids[k];
			uint32_t b = (uint32_t)((id * 0x9E3779B97F4A7C15ULL) >> 42) & (nb - 1), x;

			for (x = bucket[b]; x != UINT32_MAX && nd[x].id != id; x = nd[x].hnext)
				;
			if (x != UINT32_MAX && prefix) {
				uint32_t end = (k + 1) * block < q->n ? (k + 1) * block : q->n;

				hit += end - k * block;
			} else if (x == UINT32_MAX) {
				prefix = false;
			}
			if (x == UINT32_MAX) {
				if (used == maxb) {
					/* Evict the least recent block. */
					uint32_t v = tail, *pp;

					tail = nd[v].prev;
					if (tail != UINT32_MAX)
						nd[tail].next = UINT32_MAX;
					else
						head = UINT32_MAX;
					pp = &bucket[(uint32_t)((nd[v].id * 0x9E3779B97F4A7C15ULL) >> 42) & (nb - 1)];
					while (*pp != v)
						pp = &nd[*pp].hnext;
					*pp = nd[v].hnext;
					nd[v].hnext = freel;
					freel = v;
					used--;
				}
				if (freel != UINT32_MAX) {
					x = freel;
					freel = nd[x].hnext;
				} else {
					if (nn == cap) {
						cap *= 2;
						nd = realloc(nd, sizeof(*nd) * cap);
						if (nd == NULL)
							return -1;
					}
					x = nn++;
				}
				nd[x].id = id;
				nd[x].hnext = bucket[b];
				bucket[b] = x;
				nd[x].prev = UINT32_MAX;
				nd[x].next = head;
				if (head != UINT32_MAX)
					nd[head].prev = x;
				else
					tail = x;
				head = x;
				used++;
			} else if (x != head) {
				/* Move to the front. */
				nd[nd[x].prev].next = nd[x].next;
				if (nd[x].next != UINT32_MAX)
					nd[nd[x].next].prev = nd[x].prev;
				else
					tail = nd[x].prev;
				nd[x].prev = UINT32_MAX;
				nd[x].next = head;
				nd[head].prev = x;
				head = x;
			}
		}
	}
	free(bucket);
	free(nd);
	return input ? (double)hit / input : 0;
}

static void
usage(FILE *f)
{
	fprintf(f,
		"usage: kvss-trace --trace FILE|--generate N --capacity N[,N...] [options]\n"
		"  --generate N       the built-in workload (chats, system prompts, orgs)\n"
		"  --capacity N,...   shard capacity in tokens; inf (or 0) for unlimited\n"
		"  --column C         tokens per cache column (default 64)\n"
		"  --policy P         lru (default), lfu, priority, adaptive\n"
		"  --ttl-last SEC     expire entries this long after last use\n"
		"  --ttl-first SEC    expire entries this long after first use\n"
		"  --block-tokens N   Mooncake block size (default 512)\n"
		"  --orgs N           spread requests over N organizations by first block\n"
		"  --limit N          replay the first N requests only\n"
		"  --json             one JSON object per capacity on stdout\n"
		"  --baseline         also a plain LRU over the trace's blocks (Mooncake format)\n"
		"  --no-minus-one     replay the last prompt token too (beyond the design)\n");
}

static int
parse_capacities(const char *s, struct opts *o)
{
	char buf[512], *tok, *save = NULL;

	if (strlen(s) >= sizeof(buf))
		return -EINVAL;
	strcpy(buf, s);
	for (tok = strtok_r(buf, ",", &save); tok != NULL; tok = strtok_r(NULL, ",", &save)) {
		char *end;
		double v;

		if (o->ncap == 16)
			return -EINVAL;
		if (strcmp(tok, "inf") == 0 || strcmp(tok, "unlimited") == 0) {
			o->capacity[o->ncap++] = 0;
			continue;
		}
		v = strtod(tok, &end);
		if (end == tok || *end != '\0' || v < 0 || v > 1e12)
			return -EINVAL;
		o->capacity[o->ncap++] = (uint64_t)v;
	}
	return o->ncap ? 0 : -EINVAL;
}

int
main(int argc, char **argv)
{
	static const struct option lo[] = {
		{"trace", required_argument, NULL, 't'}, {"capacity", required_argument, NULL, 'c'},
		{"column", required_argument, NULL, 'C'}, {"policy", required_argument, NULL, 'p'},
		{"ttl-last", required_argument, NULL, 'L'}, {"ttl-first", required_argument, NULL, 'F'},
		{"block-tokens", required_argument, NULL, 'b'}, {"json", no_argument, NULL, 'j'},
		{"limit", required_argument, NULL, 'n'}, {"orgs", required_argument, NULL, 'o'},
		{"baseline", no_argument, NULL, 'B'}, {"no-minus-one", no_argument, NULL, 'M'},
		{"generate", required_argument, NULL, 'g'},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0}};
	struct opts o = {.column = 64, .block = 512};
	struct trace t = {0};
	char err[512];
	unsigned int k;
	int c, bad = 0;
	size_t i;

	while ((c = getopt_long(argc, argv, "h", lo, NULL)) != -1) {
		switch (c) {
		case 't':
			o.trace = optarg;
			break;
		case 'c':
			if (parse_capacities(optarg, &o) != 0) {
				fprintf(stderr, "kvss-trace: --capacity: bad list '%s'\n", optarg);
				return 2;
			}
			break;
		case 'C':
			o.column = (uint32_t)atoi(optarg);
			bad |= o.column == 0 || o.column > 4096;
			break;
		case 'p':
			if (strcmp(optarg, "lru") == 0)
				o.policy = PREFIXCACHE_LRU;
			else if (strcmp(optarg, "lfu") == 0)
				o.policy = PREFIXCACHE_LFU;
			else if (strcmp(optarg, "priority") == 0)
				o.policy = PREFIXCACHE_PRIORITY;
			else if (strcmp(optarg, "adaptive") == 0)
				o.policy = PREFIXCACHE_ADAPTIVE;
			else {
				fprintf(stderr, "kvss-trace: --policy: unknown '%s'\n", optarg);
				return 2;
			}
			break;
		case 'L':
			o.ttl_last_s = strtoull(optarg, NULL, 10);
			break;
		case 'F':
			o.ttl_first_s = strtoull(optarg, NULL, 10);
			break;
		case 'b':
			o.block = (uint32_t)atoi(optarg);
			bad |= o.block == 0;
			break;
		case 'j':
			o.json = true;
			break;
		case 'n':
			o.limit = strtoull(optarg, NULL, 10);
			break;
		case 'o':
			o.orgs = (uint32_t)atoi(optarg);
			break;
		case 'B':
			o.baseline = true;
			break;
		case 'M':
			o.no_minus_one = true;
			break;
		case 'g':
			o.generate = strtoull(optarg, NULL, 10);
			bad |= o.generate == 0;
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (bad || (o.trace == NULL) == (o.generate == 0) || o.ncap == 0) {
		usage(stderr);
		return 2;
	}
	if (o.generate != 0) {
		if (generate(o.generate, &t) != 0) {
			fprintf(stderr, "kvss-trace: out of memory\n");
			return 1;
		}
	} else if (load(o.trace, o.block, &t, err, sizeof(err)) != 0) {
		fprintf(stderr, "kvss-trace: %s\n", err);
		return 2;
	}
	if (!o.json)
		printf("%-12s %8s %12s %12s %9s %12s %12s %10s %12s %6s %6s %7s\n", "capacity",
		       "requests", "input", "hit", "hit_ratio", "evicted", "deleted", "expired",
		       "peak_stored", "perr", "vfail", "wall_s");
	for (k = 0; k < o.ncap; k++) {
		struct result res;

		if (run(&o, &t, o.capacity[k], &res) != 0)
			return 1;
		res.baseline = o.baseline ? baseline_lru(&t, o.capacity[k], o.block, o.limit) : -1;
		bad |= res.perr != 0 || res.vfail != 0;
		if (o.json) {
			char cs[32];

			if (res.capacity)
				snprintf(cs, sizeof(cs), "%" PRIu64, res.capacity);
			else
				snprintf(cs, sizeof(cs), "null");
			printf("{\"capacity_tokens\": %s, \"requests\": %" PRIu64
			       ", \"input_tokens\": %" PRIu64 ", \"hit_tokens\": %" PRIu64
			       ", \"hit_ratio\": %.4f, \"evicted_tokens\": %" PRIu64
			       ", \"deleted_tokens\": %" PRIu64 ", \"expired_tokens\": %" PRIu64
			       ", \"peak_stored_tokens\": %" PRIu64 ", \"protocol_errors\": %" PRIu64
			       ", \"verify_failures\": %" PRIu64 ", \"wall_s\": %.2f",
			       cs, res.requests, res.input, res.hit,
			       res.input ? (double)res.hit / res.input : 0.0, res.evicted, res.deleted,
			       res.expired, res.peak, res.perr, res.vfail, res.wall);
			if (res.baseline >= 0)
				printf(", \"baseline_lru_hit_ratio\": %.4f", res.baseline);
			printf("}\n");
		} else {
			char cs[32];

			if (res.capacity)
				snprintf(cs, sizeof(cs), "%" PRIu64, res.capacity);
			else
				snprintf(cs, sizeof(cs), "unlimited");
			printf("%-12s %8" PRIu64 " %12" PRIu64 " %12" PRIu64 " %9.4f %12" PRIu64
			       " %12" PRIu64 " %10" PRIu64 " %12" PRIu64 " %6" PRIu64 " %6" PRIu64
			       " %7.1f\n",
			       cs, res.requests, res.input, res.hit,
			       res.input ? (double)res.hit / res.input : 0.0, res.evicted, res.deleted,
			       res.expired, res.peak, res.perr, res.vfail, res.wall);
			if (res.baseline >= 0)
				printf("%-12s plain LRU over blocks: hit ratio %.4f\n", "", res.baseline);
		}
		fflush(stdout);
	}
	for (i = 0; i < t.n; i++) {
		free(t.r[i].tokens);
		free(t.r[i].ids);
	}
	free(t.r);
	return bad ? 1 : 0;
}
