/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The driver's fault injector (faults.h). The control lcore alone calls it:
 * the driver sends and receives there.
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <rte_cycles.h>
#include <rte_ether.h>
#include <rte_ip.h>
#include <rte_mbuf.h>
#include <rte_udp.h>

#include "faults.h"

#define HOLD_MAX 512

static const char *const names[KVSS_F_N] = {"drop", "dup", "reorder", "delay", "truncate",
					     "corrupt"};

struct held {
	struct rte_mbuf *m;
	uint64_t due; /* tsc */
	uint32_t tag;
};

static struct {
	struct kvss_faults_cfg c;
	struct rte_mempool *pool;
	uint64_t hz;
	uint64_t seen[2];
	uint64_t done[2][KVSS_F_N];
	uint64_t skipped[2]; /* faults not made: the hold queue was full, or no copy */
	struct held h[2][HOLD_MAX];
	unsigned int nh[2];
	bool releasing[2]; /* kvss_faults_due() runs: a call from its callback returns */
} F;

/* splitmix64's finalizer: a well-mixed word from any input. */
static uint64_t
mix(uint64_t z)
{
	z += 0x9E3779B97F4A7C15ull;
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
	return z ^ (z >> 31);
}

/* ---- The plan ---------------------------------------------------------------- */

int
kvss_faults_parse(const char *spec, struct kvss_faults_cfg *f, char *err, size_t errlen)
{
	char buf[256], *save = NULL, *tok;
	bool seeded = false, rates = false;
	unsigned int k;

	memset(f, 0, sizeof(*f));
	f->delay_max_us = 5000;
	f->reorder_max_us = 200;
	if (snprintf(buf, sizeof(buf), "%s", spec) >= (int)sizeof(buf)) {
		snprintf(err, errlen, "--faults: too long");
		return -1;
	}
	for (tok = strtok_r(buf, ",", &save); tok != NULL; tok = strtok_r(NULL, ",", &save)) {
		char *eq = strchr(tok, '='), *end;
		double v;

		if (eq == NULL) {
			snprintf(err, errlen, "--faults: '%s' is not NAME=VALUE", tok);
			return -1;
		}
		*eq = '\0';
		errno = 0;
		if (strcmp(tok, "seed") == 0) {
			unsigned long long s = strtoull(eq + 1, &end, 0);

			if (errno != 0 || end == eq + 1 || *end != '\0') {
				snprintf(err, errlen, "--faults: seed '%s' is not a number", eq + 1);
				return -1;
			}
			f->seed = s;
			seeded = true;
			continue;
		}
		v = strtod(eq + 1, &end);
		if (errno != 0 || end == eq + 1 || *end != '\0' || !isfinite(v) || v < 0) {
			snprintf(err, errlen, "--faults: %s '%s' is not a finite number >= 0", tok, eq + 1);
			return -1;
		}
		if (strcmp(tok, "delay_ms") == 0) {
			if (v > 1000) {
				snprintf(err, errlen, "--faults: delay_ms %g is over 1000", v);
				return -1;
			}
			f->delay_max_us = (uint32_t)(v * 1000);
			continue;
		}
		for (k = 0; k < KVSS_F_N && strcmp(tok, names[k]) != 0; k++)
			;
		if (k == KVSS_F_N) {
			snprintf(err, errlen, "--faults: no fault '%s' (seed, drop, dup, reorder, "
					      "delay, delay_ms, truncate, corrupt)", tok);
			return -1;
		}
		if (v > 50) {
			snprintf(err, errlen, "--faults: %s %g%% is over 50%%", tok, v);
			return -1;
		}
		f->ppm[k] = (uint32_t)(v * 10000 + 0.5);
		rates = true;
	}
	if (!seeded) {
		snprintf(err, errlen, "--faults: give seed=N (the plan replays from it)");
		return -1;
	}
	if (!rates) {
		/* The seed chooses: each fault on with even odds, at up to 1% of
		 * frames each way (truncate and corrupt up to 0.5%), delays up to
		 * 1-20 ms. */
		uint64_t r = mix(f->seed ^ 0x5EEDFA17ull);

		for (k = 0; k < KVSS_F_N; k++) {
			uint64_t x = mix(r + k);
			uint32_t top = k == KVSS_F_TRUNCATE || k == KVSS_F_CORRUPT ? 5000 : 10000;

			f->ppm[k] = (x & 1) ? (uint32_t)((x >> 8) % (top + 1)) : 0;
		}
		f->delay_max_us = 1000 + (uint32_t)(mix(r + 99) % 19001);
	}
	f->on = true;
	return 0;
}

void
kvss_faults_init(const struct kvss_faults_cfg *f, struct rte_mempool *pool)
{
	memset(&F, 0, sizeof(F));
	F.c = *f;
	F.pool = pool;
	F.hz = rte_get_tsc_hz();
}

bool
kvss_faults_on(void)
{
	return F.c.on;
}

void
kvss_faults_describe(FILE *f)
{
	unsigned int k;

	fprintf(f, "kvss: driver: faults injected, seed %" PRIu64 ", each way:", F.c.seed);
	for (k = 0; k < KVSS_F_N; k++)
		fprintf(f, " %s %.2f%%", names[k], F.c.ppm[k] / 10000.0);
	fprintf(f, " (delays up to %.1f ms, reorders up to %u us; corrupted frames carry a UDP "
		   "checksum)\n", F.c.delay_max_us / 1000.0, F.c.reorder_max_us);
}

/* ---- Frames ---------------------------------------------------------------------- */

/* A linear copy the injector may change; NULL without room. */
static struct rte_mbuf *
copy(const struct rte_mbuf *m)
{
	return rte_pktmbuf_copy(m, F.pool, 0, UINT32_MAX);
}

/*
 * The UDP checksum its sender would have written, then one bit flipped
 * somewhere from the IPv4 header on: the receiver's IPv4 or UDP checksum
 * catches it. false: not IPv4/UDP in one segment (left whole).
 */
static bool
corrupt(struct rte_mbuf *c, uint64_t r)
{
	uint8_t *p = rte_pktmbuf_mtod(c, uint8_t *);
	uint32_t len = rte_pktmbuf_data_len(c), l3 = 14, pos;
	uint16_t et;
	struct rte_ipv4_hdr *ip;
	struct rte_udp_hdr *u;

	if (c->nb_segs != 1 || len < 14 + 4)
		return false;
	et = (uint16_t)(p[12] << 8 | p[13]);
	if (et == RTE_ETHER_TYPE_VLAN) {
		et = (uint16_t)(p[16] << 8 | p[17]);
		l3 = 18;
	}
	if (et != RTE_ETHER_TYPE_IPV4 || len < l3 + 28 || (p[l3] & 0xf) != 5 || p[l3 + 9] != 17)
		return false;
	ip = (struct rte_ipv4_hdr *)(p + l3);
	u = (struct rte_udp_hdr *)(p + l3 + 20);
	if (l3 + rte_be_to_cpu_16(ip->total_length) > len)
		return false;
	u->dgram_cksum = 0;
	u->dgram_cksum = rte_ipv4_udptcp_cksum(ip, u);
	pos = l3 + (uint32_t)(r % rte_be_to_cpu_16(ip->total_length));
	p[pos] ^= (uint8_t)(1u << ((r >> 40) & 7));
	return true;
}

static bool
hold(enum kvss_fault_dir d, struct rte_mbuf *m, uint32_t tag, uint64_t wait_us)
{
	struct held *h;

	if (F.nh[d] == HOLD_MAX)
		return false;
	h = &F.h[d][F.nh[d]++];
	h->m = m;
	h->tag = tag;
	h->due = rte_get_tsc_cycles() + F.hz / 1000000 * wait_us;
	return true;
}

unsigned int
kvss_faults_pass(enum kvss_fault_dir d, struct rte_mbuf *m, uint32_t tag, struct rte_mbuf **out)
{
	uint64_t r = mix(F.c.seed ^ mix(((uint64_t)d + 1) << 56 ^ F.seen[d]++)), r2 = mix(r);
	uint32_t u = (uint32_t)(r % 1000000), acc = 0;
	struct rte_mbuf *c;
	unsigned int k;

	for (k = 0; k < KVSS_F_N; k++) {
		acc += F.c.ppm[k];
		if (u < acc)
			break;
	}
	out[0] = m;
	switch (k) {
	case KVSS_F_DROP:
		rte_pktmbuf_free(m);
		F.done[d][k]++;
		return 0;
	case KVSS_F_DUP:
		c = copy(m);
		if (c == NULL)
			break;
		out[1] = c;
		F.done[d][k]++;
		return 2;
	case KVSS_F_REORDER:
	case KVSS_F_DELAY:
		if (!hold(d, m, tag, 1 + r2 % (k == KVSS_F_DELAY ? F.c.delay_max_us : F.c.reorder_max_us)))
			break;
		F.done[d][k]++;
		return 0;
	case KVSS_F_TRUNCATE:
	case KVSS_F_CORRUPT:
		c = copy(m);
		if (c == NULL || c->nb_segs != 1 || rte_pktmbuf_pkt_len(c) <= 15) {
			rte_pktmbuf_free(c);
			break;
		}
		if (k == KVSS_F_TRUNCATE) {
			uint32_t len = rte_pktmbuf_pkt_len(c), keep = 14 + (uint32_t)(r2 % (len - 14));

			rte_pktmbuf_trim(c, (uint16_t)(len - keep));
		} else if (!corrupt(c, r2)) {
			rte_pktmbuf_free(c);
			break;
		}
		rte_pktmbuf_free(m);
		out[0] = c;
		F.done[d][k]++;
		return 1;
	default:
		return 1;
	}
	F.skipped[d]++;
	return 1;
}

unsigned int
kvss_faults_due(enum kvss_fault_dir d, void (*fn)(void *arg, struct rte_mbuf *m, uint32_t tag),
		void *arg)
{
	static struct held due[HOLD_MAX]; /* the control lcore's alone */
	uint64_t now;
	unsigned int i, j = 0, n = 0;

	if (F.nh[d] == 0 || F.releasing[d])
		return 0;
	F.releasing[d] = true;
	now = rte_get_tsc_cycles();
	/* Due ones leave the queue before any callback runs (it may send, and
	 * so flush, and so come back here: it returns at once then). */
	for (i = 0; i < F.nh[d]; i++) {
		if (F.h[d][i].due <= now)
			due[n++] = F.h[d][i];
		else
			F.h[d][j++] = F.h[d][i];
	}
	F.nh[d] = j;
	for (i = 0; i < n; i++)
		fn(arg, due[i].m, due[i].tag);
	F.releasing[d] = false;
	return n;
}

void
kvss_faults_fini(void)
{
	unsigned int d, i;

	for (d = 0; d < 2; d++) {
		for (i = 0; i < F.nh[d]; i++)
			rte_pktmbuf_free(F.h[d][i].m);
		F.nh[d] = 0;
	}
}

uint64_t
kvss_faults_total(void)
{
	uint64_t t = 0;
	unsigned int d, k;

	for (d = 0; d < 2; d++)
		for (k = 0; k < KVSS_F_N; k++)
			t += F.done[d][k];
	return t;
}

int
kvss_faults_json(char *buf, size_t len)
{
	size_t o;
	unsigned int d, k;

	if (!F.c.on)
		return snprintf(buf, len, "null");
	o = (size_t)snprintf(buf, len, "{\"seed\":%" PRIu64, F.c.seed);
	for (d = 0; d < 2 && o < len; d++) {
		o += (size_t)snprintf(buf + o, len - o, ",\"%s\":{\"frames\":%" PRIu64,
				      d == KVSS_F_OUT ? "out" : "in", F.seen[d]);
		for (k = 0; k < KVSS_F_N && o < len; k++)
			o += (size_t)snprintf(buf + o, len - o, ",\"%s\":%" PRIu64, names[k],
					      F.done[d][k]);
		if (o < len)
			o += (size_t)snprintf(buf + o, len - o, ",\"skipped\":%" PRIu64 "}",
					      F.skipped[d]);
	}
	if (o < len)
		o += (size_t)snprintf(buf + o, len - o, "}");
	return (int)o;
}
