/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * kvss-udp-client: a minimal driver and wafer in one, over plain UDP
 * sockets (no DPDK), for one prompt against one real shard. It is the
 * second, independent producer of the KVSS protocol beside the emulator
 * (docs/INTEGRATION.md says what an accelerator or an engine must do; this
 * is that, as small as it gets):
 *
 *   HELLO                  until a STATUS carries our driver epoch; the
 *                          shard's caches (bytes per token, buffers) from it
 *   RESERVE, EVICT x n     the prompt's tokens in batches, each batch's
 *   + EVICT_DATA           bytes the reference content (PROTOCOL.md
 *                          section 6), computed here, never stored
 *   STATUS                 every batch complete, every token stored
 *   REFILL                 the whole prompt, two chunks glued in reverse
 *                          order, a middle range, per cache; an unknown
 *                          prompt, a range past the end, a cache the shard
 *                          does not have: each REFILL_DONE, every byte of
 *                          every REFILL_DATA stream checked
 *   DELETE, STATUS, REFILL the prompt gone: 0 tokens, UNKNOWN_PROMPT
 *
 * Control messages are resent until acknowledged (ACK recv_seq), reports
 * (ERROR, TOKEN_LOST, L2_DONE) are taken in order and answered with
 * REPORT_ACK. Exit 0 when every check held and bytes were checked, 1 when
 * one failed (each failure printed on stderr, the first MAX_SAID of them),
 * 2 for a usage, socket or allocation error.
 *
 * The shard is not trusted: what it says is checked before it sizes
 * anything (at most MAX_CACHES caches, the memory a run holds and the bytes
 * it sends within --max-mib), an ACK of a message never sent or a STATUS of
 * another shard ends the run as a FAIL, nothing that arrives can hold the
 * run past --timeout, and bytes of a refill that come again, differently,
 * fail it whenever they come.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <unistd.h>

#include "args.h"
#include "mono.h"
#include "ucwire.h"

#define MAX_CACHES 16 /* as many as a shard may have (PROTOCOL.md, CacheInfo) */
/* What run() asks: three refills per cache, three that must fail, one after the DELETE. */
#define MAX_REFILLS (3 * MAX_CACHES + 4)
#define MAX_SAID 20 /* failures printed on stderr; the others counted */
#define MAX_ENTRIES ((9000 - 28 - UC_HDR - UC_EVICT_HDR_LEN) / UC_EVICT_ENTRY_LEN)
#define RETRANSMIT_NS 50000000ULL /* a control message not received in 50 ms goes again */
#define IP_UDP 28

struct opts {
	const char *shard_ip, *bind_ip, *org;
	const char *salt; /* the request's cache salt (NULL: none) */
	uint16_t ctl_port, evict_port, refill_port;
	uint32_t model, mtu;
	uint64_t prompt, tokens, batch, seed, timeout_ms, max_mib;
	int64_t flip; /* the expected byte of refill 1, buffer 0 to flip (-1: none) */
	const char *data_gate; /* batch 1's data waits until this file exists (NULL: not) */
	bool no_csum, verbose;
};

/* One REFILL request and what came back for it. */
struct refill {
	uint64_t id;
	uint16_t cache;
	uint32_t sequence, cache_idx;
	unsigned int nchunks;
	struct uc_chunk chunk[2];
	unsigned int want_status; /* 0: data, else the REFILL_DONE code expected */
	const char *what;
	uint32_t tokens; /* glued */
	bool done;
	struct uc_refill_done d;
	unsigned int nbuf;
	uint32_t bb;		/* bytes per buffer per token */
	uint64_t blen;		/* bytes per buffer: tokens x bb */
	uint8_t *got, *have;	/* buffer b at b x blen */
	uint64_t *covered;	/* distinct bytes received per buffer */
	uint64_t frames, dup_frames, bad_frames, copies_differ;
	bool checked;		/* its bytes compared: a contradicting copy from now on fails at once */
};

struct client {
	struct opts o;
	int ctl, data, rfd;
	struct sockaddr_in to_ctl, to_evict;
	uint32_t shard_ip;
	uint32_t depoch, wepoch, sepoch;
	uint16_t shard_id;
	bool established;
	uint32_t sepoch_lost; /* the epoch of a shard that restarted under us (0: none) */
	unsigned int ncaches;
	struct uc_cache_info cache[MAX_CACHES]; /* the latest STATUS's */
	/* The caches' geometry as the STATUS that established the stream gave
	 * it: what every stream and buffer is sized by from then on. */
	unsigned int ngeo;
	struct uc_cache_info geo[MAX_CACHES];
	struct uc_status st;
	bool have_st;
	uint64_t st_count;
	/* the control stream */
	uint64_t seq, recv_seq, cum_seq;
	uint8_t pend[9000];
	size_t pend_len;
	uint64_t pend_seq, pend_sent, resent;
	/* reports */
	uint64_t reports_taken, errors, lost;
	/* what we hold: h(i) of each token (section 6) */
	uint64_t *h;
	uint64_t nbatches;
	struct refill rf[MAX_REFILLS];
	unsigned int nrf;
	uint64_t dropped, strangers, failures;
	bool stop;	/* the shard broke the protocol, restarted or changed its caches: said */
	bool sys_error; /* a socket or an allocation failed: said, exit 2 */
	uint64_t deadline;
	uint8_t buf[65536];
};

static void
fail(struct client *c, const char *fmt, ...)
{
	va_list ap;

	/* A shard can send failures without end (a flood of ERROR reports): the first are said. */
	if (c->failures++ >= MAX_SAID)
		return;
	fprintf(stderr, "udp-client: FAIL: ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

/* A socket or an allocation failed: not the shard's check, the run's (exit 2). */
static void
sys_fail(struct client *c, const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "udp-client: ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	c->sys_error = true;
	c->stop = true;
}

static void *
alloc(struct client *c, size_t n, const char *what)
{
	void *p = calloc(n ? n : 1, 1);

	if (p == NULL)
		sys_fail(c, "cannot allocate %zu bytes for %s", n, what);
	return p;
}

static struct uc_hdr
hdr(const struct client *c, uint16_t shard)
{
	return (struct uc_hdr){.model = c->o.model, .shard = shard, .epoch = c->depoch};
}

static int
send_to(struct client *c, int fd, const struct sockaddr_in *to, const uint8_t *p, size_t len)
{
	if (len == 0 || sendto(fd, p, len, 0, (const struct sockaddr *)to, sizeof(*to)) != (ssize_t)len) {
		if (len == 0)
			sys_fail(c, "a message to %s:%u does not fit its buffer", inet_ntoa(to->sin_addr),
				 ntohs(to->sin_port));
		else
			sys_fail(c, "sendto %s:%u (%zu bytes): %s", inet_ntoa(to->sin_addr),
				 ntohs(to->sin_port), len, strerror(errno));
		return -1;
	}
	return 0;
}

/* ---- what comes back ---------------------------------------------------- */

static void
on_status(struct client *c, const struct uc_msg *m)
{
	struct uc_status s;

	/* One shard: its id from the STATUS that established the stream (0xFFFF is no shard's). */
	if (m->h.shard == UC_SHARD_ALL || (c->established && m->h.shard != c->shard_id)) {
		fail(c, "a STATUS from shard %u, not shard %u: refused", m->h.shard, c->shard_id);
		c->stop = true;
		return;
	}
	if (m->h.count > MAX_CACHES) {
		fail(c, "the shard's STATUS lists %u caches; this client takes at most %d", m->h.count,
		     MAX_CACHES);
		c->stop = true;
		return;
	}
	uc_get_status(m, &s);
	/* A STATUS older than one taken is ignored (section 5, STATUS in order). */
	if (c->have_st && s.uptime_ns < c->st.uptime_ns && m->h.epoch == c->sepoch)
		return;
	if (c->established && m->h.epoch != c->sepoch) {
		fail(c, "the shard's epoch changed from 0x%08x to 0x%08x: it restarted, its data is gone",
		     c->sepoch, m->h.epoch);
		c->established = false;
		c->sepoch_lost = m->h.epoch;
		c->stop = true;
	}
	if (s.driver_epoch == c->depoch && !c->established && c->sepoch_lost == 0) {
		c->established = true;
		c->shard_id = m->h.shard;
	}
	c->sepoch = m->h.epoch;
	c->st = s;
	c->have_st = true;
	c->st_count++;
	c->ncaches = m->h.count;
	for (unsigned int i = 0; i < c->ncaches; i++)
		uc_get_cache_info(m, i, &c->cache[i]);
	if (c->ngeo == 0 || c->stop)
		return;
	for (unsigned int i = 0; i < c->ngeo; i++)
		if (c->ncaches != c->ngeo || c->cache[i].cache != c->geo[i].cache ||
		    c->cache[i].buffers != c->geo[i].buffers ||
		    c->cache[i].bytes_per_token != c->geo[i].bytes_per_token) {
			fail(c, "a STATUS of the same epoch gives the caches another geometry");
			c->stop = true;
			return;
		}
}

static void
send_report_ack(struct client *c)
{
	struct uc_hdr h = hdr(c, c->shard_id);
	size_t n = uc_build_report_ack(c->buf, sizeof(c->buf), &h, c->reports_taken);

	send_to(c, c->ctl, &c->to_ctl, c->buf, n);
}

/* ERROR, TOKEN_LOST, L2_DONE: once and in order (section 5), answered with REPORT_ACK. */
static void
on_report(struct client *c, const struct uc_msg *m)
{
	if (m->h.seq != 0 && m->h.seq != c->reports_taken + 1) {
		send_report_ack(c); /* a copy, or ahead of a gap: the shard resends */
		return;
	}
	if (m->h.seq != 0)
		c->reports_taken = m->h.seq;
	for (unsigned int i = 0; i < m->h.count; i++) {
		if (m->h.type == UC_ERROR) {
			struct uc_error e;

			uc_get_error(m, i, &e);
			fail(c, "ERROR %s (%u) for message seq %" PRIu64 ": prompt %" PRIu64
				" token %u cache %u", uc_err_name(e.code), e.code, e.seq, e.prompt,
			     e.token, e.cache);
			c->errors++;
		} else if (m->h.type == UC_TOKEN_LOST) {
			struct uc_lost l;

			uc_get_lost(m, i, &l);
			fail(c, "TOKEN_LOST: prompt %" PRIu64 " tokens [%u, %" PRIu64 ") of cache %u",
			     l.prompt, l.token, (uint64_t)l.token + l.tokens, l.cache);
			c->lost++;
		} else {
			fail(c, "an L2_DONE, but this client sent no second-tier message");
		}
	}
	send_report_ack(c);
}

static struct refill *
refill_of(struct client *c, uint64_t id)
{
	for (unsigned int i = 0; i < c->nrf; i++)
		if (c->rf[i].id == id)
			return &c->rf[i];
	return NULL;
}

static void
on_refill_done(struct client *c, const struct uc_msg *m)
{
	for (unsigned int i = 0; i < m->h.count; i++) {
		struct uc_refill_done d;
		struct refill *r;

		uc_get_refill_done(m, i, &d);
		r = refill_of(c, d.refill_id);
		if (r == NULL) {
			fail(c, "REFILL_DONE for refill %" PRIu64 ", which was never asked", d.refill_id);
			continue;
		}
		if (r->done)
			continue; /* a copy */
		r->done = true;
		r->d = d;
	}
}

static void
on_refill_data(struct client *c, const struct uc_msg *m)
{
	struct uc_refill_data d;
	struct refill *r;
	bool dup = true;

	uc_get_refill_data(m, &d);
	r = refill_of(c, d.refill_id);
	if (r == NULL || r->want_status != 0) {
		fail(c, "REFILL_DATA for refill %" PRIu64 ", which should send none", d.refill_id);
		return;
	}
	r->frames++;
	if (d.sequence != r->sequence || d.cache_idx != r->cache_idx || d.cache != r->cache ||
	    d.buffer >= r->nbuf || d.stream_len != r->blen ||
	    m->h.epoch != c->sepoch || m->h.shard != c->shard_id) {
		if (r->bad_frames++ == 0)
			fail(c, "refill %" PRIu64 ": a REFILL_DATA header says sequence %u cache_idx %u "
				"cache %u buffer %u stream_len %u epoch 0x%08x shard %u; expected %u %u %u "
				"<%u %" PRIu64 " 0x%08x %u",
			     r->id, d.sequence, d.cache_idx, d.cache, d.buffer, d.stream_len, m->h.epoch,
			     m->h.shard, r->sequence, r->cache_idx, r->cache, r->nbuf, r->blen, c->sepoch,
			     c->shard_id);
		return;
	}
	/* The parser holds offset + len within stream_len, and stream_len is blen here. */
	for (uint32_t k = 0; k < d.len; k++) {
		uint64_t at = (uint64_t)d.buffer * r->blen + d.offset + k;

		if (r->have[at]) {
			if (r->got[at] != d.bytes[k] && r->copies_differ++ == 0 && r->checked)
				fail(c, "refill %" PRIu64 " (%s): bytes came again after the check, "
					"differently (buffer %u stream byte %" PRIu64 ")",
				     r->id, r->what, d.buffer, (uint64_t)d.offset + k);
			continue;
		}
		dup = false;
		r->have[at] = 1;
		r->got[at] = d.bytes[k];
		r->covered[d.buffer]++;
	}
	if (dup && d.len > 0)
		r->dup_frames++;
}

static void
on_frame(struct client *c, const uint8_t *p, size_t len, const struct sockaddr_in *from,
	 bool refill_sock)
{
	struct uc_msg m;
	const char *why;

	if (from->sin_addr.s_addr != c->shard_ip) {
		c->strangers++;
		return;
	}
	if ((why = uc_parse(p, len, &m)) != NULL) {
		if (c->dropped++ == 0)
			fprintf(stderr, "udp-client: dropped a %zu-byte datagram: %s\n", len, why);
		return;
	}
	if (m.h.model != c->o.model || (refill_sock != (m.h.type == UC_REFILL_DATA))) {
		c->dropped++;
		return;
	}
	/* Once established, one shard: a STATUS of another fails (on_status), the rest is dropped. */
	if (c->established && m.h.shard != c->shard_id && m.h.type != UC_STATUS &&
	    m.h.type != UC_REFILL_DATA) {
		c->dropped++;
		return;
	}
	switch (m.h.type) {
	case UC_STATUS:
		on_status(c, &m);
		break;
	case UC_ACK:
		if (m.h.epoch == c->sepoch) {
			struct uc_ack a;

			uc_get_ack(&m, &a);
			/* Received or done past what was sent, or done before received: a lie. */
			if (a.recv_seq > c->seq || a.cum_seq > a.recv_seq) {
				fail(c, "an ACK of cum_seq %" PRIu64 " recv_seq %" PRIu64 ", but the last "
					"control message sent was %" PRIu64 ": a protocol error",
				     a.cum_seq, a.recv_seq, c->seq);
				c->stop = true;
				break;
			}
			if (a.recv_seq > c->recv_seq)
				c->recv_seq = a.recv_seq;
			if (a.cum_seq > c->cum_seq)
				c->cum_seq = a.cum_seq;
		}
		break;
	case UC_ERROR:
	case UC_TOKEN_LOST:
	case UC_L2_DONE:
		on_report(c, &m);
		break;
	case UC_REFILL_DONE:
		on_refill_done(c, &m);
		break;
	case UC_REFILL_DATA:
		on_refill_data(c, &m);
		break;
	default:
		c->dropped++;
	}
}

/*
 * Take what arrives for up to @p wait_ns; resend the pending control message
 * when due. Nothing that arrives holds it past the deadline: each socket is
 * read a burst at a time (a refill's frames come so), never once the
 * deadline has passed, so a flood neither starves the resend nor the clock.
 */
static void
pump(struct client *c, uint64_t wait_ns)
{
	struct pollfd pf[2] = {{.fd = c->ctl, .events = POLLIN}, {.fd = c->rfd, .events = POLLIN}};
	int ms = (int)(wait_ns / 1000000) + 1;

	if (poll(pf, 2, ms) > 0)
		for (int i = 0; i < 2; i++) {
			struct sockaddr_in from;
			socklen_t fl;
			ssize_t n;

			if (!(pf[i].revents & POLLIN))
				continue;
			for (unsigned int k = 0; k < 4096 && !c->stop && mono_ns() < c->deadline; k++) {
				fl = sizeof(from);
				n = recvfrom(pf[i].fd, c->buf, sizeof(c->buf), MSG_DONTWAIT,
					     (struct sockaddr *)&from, &fl);
				if (n < 0)
					break;
				on_frame(c, c->buf, (size_t)n, &from, i == 1);
			}
		}
	if (c->pend_len > 0 && c->recv_seq < c->pend_seq && !c->stop &&
	    mono_ns() - c->pend_sent > RETRANSMIT_NS) {
		c->pend[6] |= UC_F_RETRANSMIT; /* flags, bit 1 */
		send_to(c, c->ctl, &c->to_ctl, c->pend, c->pend_len);
		c->pend_sent = mono_ns();
		c->resent++;
	}
}

typedef bool (*pred_fn)(struct client *c, const void *arg);

/* Pump until @p done holds; -1 (said, naming @p what) when the deadline or a stop comes first. */
static int
wait_for(struct client *c, pred_fn done, const void *arg, const char *what)
{
	while (!c->stop && !done(c, arg)) {
		uint64_t t = mono_ns();

		if (t >= c->deadline) {
			fail(c, "timed out waiting for %s", what);
			return -1;
		}
		pump(c, c->deadline - t < 10000000 ? c->deadline - t : 10000000);
	}
	return c->stop ? -1 : 0; /* a stop was said when it came */
}

static bool
received(struct client *c, const void *arg)
{
	return c->recv_seq >= *(const uint64_t *)arg;
}

/* A control message: the next seq, ACK requested; kept to resend until received. */
static int
send_ctl(struct client *c, size_t len)
{
	uint64_t seq = c->seq;

	if (len == 0 || len > sizeof(c->pend) || len > c->o.mtu - IP_UDP) {
		sys_fail(c, "a control message of %zu bytes does not fit the MTU (%u)", len, c->o.mtu);
		return -1;
	}
	memcpy(c->pend, c->buf, len);
	c->pend_len = len;
	c->pend_seq = seq;
	c->pend_sent = mono_ns();
	return send_to(c, c->ctl, &c->to_ctl, c->pend, len);
}

static int
wait_received(struct client *c)
{
	char what[64];

	snprintf(what, sizeof(what), "the ACK of control message %" PRIu64, c->pend_seq);
	return wait_for(c, received, &c->pend_seq, what);
}

static struct uc_hdr
ctl_hdr(struct client *c)
{
	struct uc_hdr h = hdr(c, c->shard_id);

	h.flags = UC_F_ACK_REQ;
	h.seq = ++c->seq;
	return h;
}

/* ---- the steps ---------------------------------------------------------- */

/* The refills run() asks per cache: the middle range's length ... */
static uint32_t
mid_tokens(uint64_t n)
{
	return (uint32_t)(n / 4 ? n / 4 : 1);
}

/* ... and the tokens of all three (the whole prompt, two halves glued, the middle). */
static uint64_t
refill_plan_tokens(uint64_t n)
{
	return 2 * n + mid_tokens(n);
}

static int
hello(struct client *c)
{
	struct uc_hdr h = hdr(c, UC_SHARD_ALL);
	uint64_t next = 0, n = c->o.tokens, per_token = 0, held, sent;

	while (!c->established && !c->stop) {
		uint64_t t = mono_ns();

		if (t >= c->deadline) {
			fail(c, "the shard at %s:%u did not answer HELLO with a STATUS of our epoch",
			     c->o.shard_ip, c->o.ctl_port);
			return -1;
		}
		if (t >= next) {
			size_t len = uc_build_hello(c->buf, sizeof(c->buf), &h);

			send_to(c, c->ctl, &c->to_ctl, c->buf, len);
			next = t + 100000000ULL;
		}
		pump(c, 10000000);
	}
	if (c->stop)
		return -1;
	printf("udp-client: shard %u of model %u at %s: epoch 0x%08x, our driver epoch 0x%08x "
	       "established;", c->shard_id, c->o.model, c->o.shard_ip, c->sepoch, c->depoch);
	for (unsigned int i = 0; i < c->ncaches; i++)
		printf(" cache %u: %u B/token in %u buffer(s), room for %" PRIu64 " tokens%s",
		       c->cache[i].cache, c->cache[i].bytes_per_token, c->cache[i].buffers,
		       c->cache[i].capacity, i + 1 < c->ncaches ? ";" : "\n");
	if (c->ncaches == 0) {
		fail(c, "the shard's STATUS lists no cache");
		return -1;
	}
	for (unsigned int i = 0; i < c->ncaches; i++) {
		const struct uc_cache_info *k = &c->cache[i];
		const char *why = k->cache != i			? "its id is not its place"
				  : k->bytes_per_token == 0	? "0 bytes per token: nothing to check"
				  : k->buffers == 0		? "0 buffers"
				  : k->bytes_per_token % k->buffers ? "its buffers do not divide a token"
				  : k->bytes_per_token > (1u << 20) ? "more than 1 MiB a token"
				  : k->capacity < n		? "no room for the prompt"
								: NULL;

		if (why != NULL) {
			fail(c, "cache %u of the STATUS (id %u, %u buffers, %u B/token, room %" PRIu64
				"): %s; refused",
			     i, k->cache, k->buffers, k->bytes_per_token, k->capacity, why);
			return -1;
		}
		per_token += k->bytes_per_token;
	}
	/*
	 * What the shard's caches make this run cost, checked before any of it:
	 * the bytes it sends (every token of every cache) and the bytes it holds
	 * for its refills (received and a map of what came: the prompt twice and
	 * a quarter of it, per cache).
	 */
	sent = n * per_token;
	held = per_token * refill_plan_tokens(n) * 2;
	if (sent > (c->o.max_mib << 20) || held > (c->o.max_mib << 20)) {
		fail(c, "the shard's %u cache(s), %" PRIu64 " B a token in all, would make %" PRIu64
			" tokens cost %" PRIu64 " MiB sent and %" PRIu64 " MiB held; --max-mib is %" PRIu64
			": refused",
		     c->ncaches, per_token, n, sent >> 20, held >> 20, c->o.max_mib);
		return -1;
	}
	c->ngeo = c->ncaches;
	memcpy(c->geo, c->cache, sizeof(c->geo));
	return 0;
}

/* The bytes of tokens [first, first + g) of cache @p cc as one stream, sent in frames. */
static int
send_stream(struct client *c, uint64_t batch, unsigned int cc, uint32_t first, uint32_t g,
	    uint64_t *frames)
{
	uint32_t b = c->geo[cc].bytes_per_token, slen = g * b;
	uint32_t max = c->o.mtu - IP_UDP - UC_HDR - UC_DATA_HDR_LEN;
	uint8_t *s = alloc(c, slen, "an EVICT_DATA stream");
	struct uc_hdr h = {.model = c->o.model, .shard = c->shard_id, .epoch = c->wepoch};
	int rc = 0;

	if (s == NULL)
		return -1;
	for (uint32_t j = 0; j < g; j++)
		uc_ref_bytes(c->h[first + j], c->o.model, c->shard_id, cc, 0, s + (size_t)j * b, b);
	for (uint32_t off = 0; off < slen && rc == 0; off += max) {
		uint32_t len = slen - off < max ? slen - off : max;
		struct uc_data_hdr d = {.batch = batch, .cache = (uint16_t)cc, .offset = off,
					.stream_len = slen, .driver_epoch = c->depoch};
		size_t n = uc_build_evict_data(c->buf, sizeof(c->buf), &h, &d, s + off, len);

		rc = send_to(c, c->data, &c->to_evict, c->buf, n);
		(*frames)++;
	}
	free(s);
	return rc;
}

static bool
ran(struct client *c, const void *arg)
{
	return c->cum_seq >= *(const uint64_t *)arg;
}

static bool
gate_open(struct client *c, const void *arg)
{
	(void)c;
	return access((const char *)arg, F_OK) == 0;
}

static bool
batches_complete(struct client *c, const void *arg)
{
	return c->have_st && c->st.batches_complete >= *(const uint64_t *)arg;
}

static int
evict(struct client *c)
{
	uint32_t n = (uint32_t)c->o.tokens, nc = c->ngeo;
	uint32_t g = (uint32_t)((c->o.mtu - IP_UDP - UC_HDR - UC_EVICT_HDR_LEN) / UC_EVICT_ENTRY_LEN / nc);
	struct uc_reserve rs[MAX_CACHES];
	struct uc_hdr h;
	uint64_t frames = 0, bytes = 0;

	if (c->o.batch < g)
		g = (uint32_t)c->o.batch;
	for (unsigned int k = 0; k < nc; k++)
		rs[k] = (struct uc_reserve){c->o.prompt, 0, 0, n, (uint16_t)k};
	h = ctl_hdr(c);
	if (send_ctl(c, uc_build_reserve(c->buf, sizeof(c->buf), &h, rs, nc)) != 0 ||
	    wait_received(c) != 0)
		return -1;
	for (uint32_t first = 0; first < n; first += g) {
		uint32_t gg = n - first < g ? n - first : g;
		struct uc_entry e[MAX_ENTRIES];

		c->nbatches++;
		for (uint32_t j = 0; j < gg; j++)
			for (unsigned int k = 0; k < nc; k++)
				e[j * nc + k] = (struct uc_entry){c->o.prompt, first + j, 7};
		h = ctl_hdr(c);
		if (send_ctl(c, uc_build_evict(c->buf, sizeof(c->buf), &h, c->nbatches, (uint16_t)nc,
					       (uint16_t)gg, e)) != 0)
			return -1;
		/*
		 * --data-gate: a wafer late with batch 1's data. Its EVICT has run
		 * (done, cum_seq); the data goes once the test says (a shard
		 * stopped meanwhile finds it waiting in its receive queue).
		 * Otherwise its data goes right behind it: a shard holds data
		 * that comes before its EVICT too.
		 */
		bool gated = c->nbatches == 1 && c->o.data_gate != NULL;
		uint64_t before = frames;

		if (gated) {
			if (wait_for(c, ran, &c->pend_seq, "batch 1's EVICT to run") != 0)
				return -1;
			printf("udp-client: batch 1's EVICT ran; its data waits for %s\n", c->o.data_gate);
			fflush(stdout);
			if (wait_for(c, gate_open, c->o.data_gate, "the data gate file") != 0)
				return -1;
		}
		for (unsigned int k = 0; k < nc; k++) {
			if (send_stream(c, c->nbatches, k, first, gg, &frames) != 0)
				return -1;
			bytes += (uint64_t)gg * c->geo[k].bytes_per_token;
		}
		if (gated) {
			printf("udp-client: batch 1's data sent: %" PRIu64 " EVICT_DATA frames\n",
			       frames - before);
			fflush(stdout);
		}
		if (wait_received(c) != 0)
			return -1;
	}
	if (wait_for(c, batches_complete, &c->nbatches, "a STATUS with every batch complete") != 0)
		return -1;
	printf("udp-client: evicted prompt %" PRIu64 ", tokens [0, %u) of %u cache(s) in %" PRIu64
	       " batch(es): %" PRIu64 " bytes in %" PRIu64 " EVICT_DATA frames\n",
	       c->o.prompt, n, nc, c->nbatches, bytes, frames);
	for (unsigned int k = 0; k < nc; k++)
		if (c->cache[k].stored != n || c->cache[k].prompts != 1)
			fail(c, "after the evict, STATUS says cache %u holds %" PRIu64 " tokens of %" PRIu64
				" prompt(s); expected %u of 1",
			     k, c->cache[k].stored, c->cache[k].prompts, n);
	if (c->failures == 0)
		printf("udp-client: STATUS: %" PRIu64 " batches complete, %u tokens of 1 prompt in each "
		       "cache\n", c->st.batches_complete, n);
	return 0;
}

static struct refill *
add_refill(struct client *c, uint16_t cache, const char *what, unsigned int want, unsigned int nchunks,
	   const struct uc_chunk *ch)
{
	struct refill *r = &c->rf[c->nrf];

	if (c->nrf >= MAX_REFILLS) { /* run() asks at most MAX_REFILLS */
		sys_fail(c, "more than %d refills", MAX_REFILLS);
		return NULL;
	}
	memset(r, 0, sizeof(*r));
	r->id = 1000 + c->nrf;
	r->cache = cache;
	r->sequence = 500 + c->nrf;
	r->cache_idx = 4096 * c->nrf;
	r->want_status = want;
	r->what = what;
	r->nchunks = nchunks;
	for (unsigned int i = 0; i < nchunks; i++) {
		r->chunk[i] = ch[i];
		r->tokens += ch[i].tokens;
	}
	c->nrf++; /* counted before its buffers: freed at exit if they fail */
	if (want == 0) {
		r->nbuf = c->geo[cache].buffers;
		r->bb = c->geo[cache].bytes_per_token / r->nbuf;
		r->blen = (uint64_t)r->tokens * r->bb;
		/* tokens x bytes per token each: within what hello() let the caches cost */
		r->got = alloc(c, (size_t)r->tokens * c->geo[cache].bytes_per_token, "a refill's bytes");
		r->have = alloc(c, (size_t)r->tokens * c->geo[cache].bytes_per_token, "a refill's map");
		r->covered = alloc(c, r->nbuf * sizeof(*r->covered), "a refill's counts");
		if (r->got == NULL || r->have == NULL || r->covered == NULL)
			return NULL;
	}
	return r;
}

static bool
refills_over(struct client *c, const void *arg)
{
	unsigned int from = *(const unsigned int *)arg;

	for (unsigned int i = from; i < c->nrf; i++) {
		const struct refill *r = &c->rf[i];

		if (!r->done)
			return false;
		if (r->want_status == 0 && r->d.status == 0)
			for (unsigned int b = 0; b < r->nbuf; b++)
				if (r->covered[b] < r->blen)
					return false;
	}
	return true;
}

/* Every byte of a refill against the reference content of the tokens its chunks glue. */
static uint64_t
check_refill(struct client *c, struct refill *r, bool flip_here)
{
	uint64_t wrong = 0, missing = 0;
	uint8_t *want = alloc(c, r->bb, "a token's expected bytes");
	uint32_t j = 0;

	if (want == NULL)
		return 1;
	for (unsigned int k = 0; k < r->nchunks; k++)
		for (uint32_t t = r->chunk[k].start; t < r->chunk[k].start + r->chunk[k].tokens; t++, j++)
			for (unsigned int b = 0; b < r->nbuf; b++) {
				uint64_t base = (uint64_t)j * r->bb;

				uc_ref_bytes(c->h[t], c->o.model, c->shard_id, r->cache, (uint64_t)b * r->bb,
					     want, r->bb);
				if (flip_here && b == 0 && (uint64_t)c->o.flip >= base &&
				    (uint64_t)c->o.flip < base + r->bb)
					want[c->o.flip - base] ^= 0x01;
				for (uint32_t x = 0; x < r->bb; x++) {
					uint64_t at = b * r->blen + base + x;

					if (!r->have[at]) {
						missing++;
						continue;
					}
					if (r->got[at] == want[x])
						continue;
					if (wrong++ == 0)
						fail(c, "refill %" PRIu64 " (%s): cache %u buffer %u stream byte %" PRIu64
							" (token %u, byte %u of the buffer's %u) is 0x%02x, expected 0x%02x",
						     r->id, r->what, r->cache, b, base + x, t, x, r->bb,
						     r->got[at], want[x]);
				}
			}
	free(want);
	r->checked = true;
	if (wrong > 0)
		fail(c, "refill %" PRIu64 ": %" PRIu64 " byte(s) wrong", r->id, wrong);
	if (missing > 0)
		fail(c, "refill %" PRIu64 ": %" PRIu64 " byte(s) never arrived", r->id, missing);
	if (r->copies_differ > 0)
		fail(c, "refill %" PRIu64 ": %" PRIu64 " byte(s) came twice, differently", r->id,
		     r->copies_differ);
	return wrong + missing + r->copies_differ;
}

static int
run_refills(struct client *c, unsigned int from, uint64_t *checked)
{
	struct uc_refill_req rq[MAX_REFILLS];
	unsigned int n = c->nrf - from;
	bool timed_out = false;

	for (unsigned int i = 0; i < n; i++) {
		const struct refill *r = &c->rf[from + i];

		rq[i] = (struct uc_refill_req){r->id, c->nbatches, r->sequence, r->cache_idx, r->cache,
					      (uint16_t)r->nchunks, r->chunk};
	}
	/* As many requests a REFILL as one datagram of the MTU holds (with 16 caches, several). */
	for (unsigned int i = 0, k; i < n; i += k) {
		size_t room = c->o.mtu - IP_UDP - UC_HDR, body = 0;
		struct uc_hdr h = ctl_hdr(c);

		for (k = 0; i + k < n; k++) {
			size_t one = UC_REFILL_REQ_LEN + (size_t)rq[i + k].nchunks * UC_CHUNK_LEN;

			if (body + one > room)
				break;
			body += one;
		}
		if (send_ctl(c, uc_build_refill(c->buf, sizeof(c->buf), &h, rq + i, k)) != 0 ||
		    wait_received(c) != 0)
			return -1;
	}
	if (wait_for(c, refills_over, &from, "every REFILL_DONE and every REFILL_DATA byte") != 0) {
		for (unsigned int i = from; i < c->nrf; i++)
			if (!c->rf[i].done)
				fail(c, "refill %" PRIu64 " (%s): no REFILL_DONE", c->rf[i].id, c->rf[i].what);
		timed_out = true;
	}
	for (unsigned int i = from; i < c->nrf; i++) {
		struct refill *r = &c->rf[i];
		uint64_t bytes = (uint64_t)r->tokens * r->bb * r->nbuf;

		if (!r->done)
			continue;
		if (r->want_status != 0) {
			if (r->d.status != r->want_status || r->d.tokens != 0 || r->d.bytes != 0 ||
			    r->frames != 0)
				fail(c, "refill %" PRIu64 " (%s): REFILL_DONE %s (%u), %u tokens, %" PRIu64
					" bytes, %" PRIu64 " data frames; expected %s, 0, 0, 0",
				     r->id, r->what, uc_err_name(r->d.status), r->d.status, r->d.tokens,
				     r->d.bytes, r->frames, uc_err_name(r->want_status));
			else
				printf("udp-client: refill %" PRIu64 " (%s): REFILL_DONE %s, no data\n", r->id,
				       r->what, uc_err_name(r->d.status));
			continue;
		}
		if (r->d.status != 0 || r->d.tokens != r->tokens || r->d.bytes != bytes) {
			fail(c, "refill %" PRIu64 " (%s): REFILL_DONE %s, %u tokens, %" PRIu64
				" bytes; expected OK, %u, %" PRIu64,
			     r->id, r->what, uc_err_name(r->d.status), r->d.tokens, r->d.bytes, r->tokens,
			     bytes);
			continue;
		}
		if (check_refill(c, r, i == 0 && c->o.flip >= 0) == 0)
			printf("udp-client: refill %" PRIu64 " (%s): cache %u, %u tokens, %" PRIu64
			       " bytes in %u buffer(s), %" PRIu64 " frames%s: every byte as evicted\n",
			       r->id, r->what, r->cache, r->tokens, bytes, r->nbuf, r->frames,
			       r->dup_frames ? " (copies among them)" : "");
		*checked += bytes;
	}
	return timed_out ? -1 : 0;
}

static bool
deleted(struct client *c, const void *arg)
{
	(void)arg;
	if (!c->have_st)
		return false;
	for (unsigned int k = 0; k < c->ncaches; k++)
		if (c->cache[k].stored != 0 || c->cache[k].prompts != 0)
			return false;
	return true;
}

static bool
next_status(struct client *c, const void *arg)
{
	return c->st_count > *(const uint64_t *)arg;
}

static int
run(struct client *c)
{
	uint32_t n = (uint32_t)c->o.tokens;
	uint64_t checked = 0, sc;
	struct uc_delete del[MAX_CACHES];
	struct uc_hdr h;
	unsigned int from = 0;

	if (hello(c) != 0)
		return -1;
	/*
	 * What an engine asks: per cache, the prompt, two chunks glued, a middle
	 * range; then what must fail. Planned, their buffers taken, before a
	 * byte is sent: a run that cannot hold them stops before it starts.
	 */
	for (unsigned int k = 0; k < c->ngeo; k++) {
		struct uc_chunk whole = {c->o.prompt, 0, n};
		struct uc_chunk glued[2] = {{c->o.prompt, n / 2, n - n / 2}, {c->o.prompt, 0, n / 2}};
		struct uc_chunk mid = {c->o.prompt, n / 3, mid_tokens(n)};

		if (add_refill(c, (uint16_t)k, "the whole prompt", 0, 1, &whole) == NULL ||
		    add_refill(c, (uint16_t)k, "second half, then first, glued", 0, n > 1 ? 2 : 1,
			       n > 1 ? glued : &whole) == NULL ||
		    add_refill(c, (uint16_t)k, "a middle range", 0, 1, &mid) == NULL)
			return -1;
	}
	{
		struct uc_chunk unknown = {c->o.prompt + 1, 0, 1}, past = {c->o.prompt, n - 1, 2};
		struct uc_chunk any = {c->o.prompt, 0, 1};

		if (add_refill(c, 0, "a prompt never evicted", 4 /* UNKNOWN_PROMPT */, 1, &unknown) == NULL ||
		    add_refill(c, 0, "a range past the prompt's end", 5 /* RANGE */, 1, &past) == NULL ||
		    add_refill(c, (uint16_t)c->ngeo, "a cache the shard does not have", 8 /* BAD_CACHE */,
			       1, &any) == NULL)
			return -1;
	}
	if (evict(c) != 0 || run_refills(c, from, &checked) != 0)
		return -1;
	/* DELETE the prompt from every cache: STATUS says 0, a REFILL finds nothing. */
	for (unsigned int k = 0; k < c->ngeo; k++)
		del[k] = (struct uc_delete){c->o.prompt, c->nbatches, 0, n - 1, (uint16_t)k};
	h = ctl_hdr(c);
	if (send_ctl(c, uc_build_delete(c->buf, sizeof(c->buf), &h, del, c->ngeo)) != 0 ||
	    wait_received(c) != 0 || wait_for(c, deleted, NULL, "a STATUS with the prompt deleted") != 0)
		return -1;
	printf("udp-client: deleted: STATUS says 0 tokens, 0 prompts in every cache\n");
	{
		struct uc_chunk gone = {c->o.prompt, 0, n};

		from = c->nrf;
		if (add_refill(c, 0, "the deleted prompt", 4, 1, &gone) == NULL ||
		    run_refills(c, from, &checked) != 0)
			return -1;
	}
	/* Every report the shard sent taken (a clean run sends none); one more STATUS to be sure. */
	sc = c->st_count;
	if (wait_for(c, next_status, &sc, "a last STATUS") != 0)
		return -1;
	if (c->st.reports != c->reports_taken)
		fail(c, "the shard sent %" PRIu64 " report(s), this client took %" PRIu64, c->st.reports,
		     c->reports_taken);
	if (c->st.reports != 0)
		fail(c, "the shard sent %" PRIu64 " report(s) (ERROR, TOKEN_LOST); a clean run has none",
		     c->st.reports);
	if (checked == 0)
		fail(c, "no byte was checked: nothing to pass");
	printf("udp-client: %s: %u refills, %" PRIu64 " bytes checked, %" PRIu64
	       " control message(s) resent, %" PRIu64 " datagram(s) dropped, %" PRIu64 " failure(s)\n",
	       c->failures ? "FAIL" : "PASS", c->nrf, checked, c->resent, c->dropped, c->failures);
	return 0;
}

/* ---- setup -------------------------------------------------------------- */

static int
udp_socket(struct client *c, uint16_t port, bool big)
{
	int fd = socket(AF_INET, SOCK_DGRAM, 0), one = 1, ttl = 64, pmtu = IP_PMTUDISC_DO;
	int rcv = 16 << 20;
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port)};

	if (fd < 0) {
		fprintf(stderr, "udp-client: socket: %s\n", strerror(errno));
		return -1;
	}
	if (c->o.bind_ip != NULL && inet_pton(AF_INET, c->o.bind_ip, &a.sin_addr) != 1) {
		fprintf(stderr, "udp-client: --bind: '%s' is not an IPv4 address\n", c->o.bind_ip);
		close(fd);
		return -1;
	}
	/* Every frame leaves with TTL 64 (section 1, the rail), never fragmented. */
	setsockopt(fd, IPPROTO_IP, IP_TTL, &ttl, sizeof(ttl));
	setsockopt(fd, IPPROTO_IP, IP_MTU_DISCOVER, &pmtu, sizeof(pmtu));
	if (c->o.no_csum)
		setsockopt(fd, SOL_SOCKET, SO_NO_CHECK, &one, sizeof(one));
	if (big && setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &rcv, sizeof(rcv)) != 0)
		setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcv, sizeof(rcv));
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(fd, (struct sockaddr *)&a, sizeof(a)) != 0) {
		fprintf(stderr, "udp-client: bind %s:%u: %s\n", c->o.bind_ip ? c->o.bind_ip : "0.0.0.0",
			port, strerror(errno));
		close(fd);
		return -1;
	}
	return fd;
}

static uint32_t
nonzero_random(void)
{
	uint32_t v = 0;

	while (v == 0)
		if (getrandom(&v, sizeof(v), 0) != sizeof(v))
			v = (uint32_t)mono_ns() ^ (uint32_t)getpid();
	return v;
}

static void
usage(FILE *f)
{
	fprintf(f,
		"usage: kvss-udp-client --shard IPV4 [options]\n"
		"A driver and a wafer in one, over UDP sockets: evicts one prompt to a kvss shard\n"
		"and refills it, checking every byte (docs/INTEGRATION.md). Exit 0: every check\n"
		"held and bytes were checked; 1: one failed, or the shard said what this client\n"
		"refuses (the first %d failures said on stderr, the others counted); 2: a usage,\n"
		"socket or allocation error (said on stderr).\n"
		"  --shard IPV4       the shard's address (shard.address.ipv4)\n"
		"  --bind IPV4        this side's address (the shard's wafer and driver; default any)\n"
		"  --ports C,E,R      the shard's UDP ports: control, EVICT_DATA, REFILL_DATA\n"
		"                     (default 7400,7401,7402; REFILL_DATA comes to R here)\n"
		"  --model N          the shard's model (default 0)\n"
		"  --mtu N            IPv4 MTU of the path (default 1500; 9000 on a jumbo rail)\n"
		"  --prompt ID        the prompt's id (default 1000)\n"
		"  --tokens N         its length (default 600)\n"
		"  --batch N          tokens per EVICT at most (default: what one frame holds)\n"
		"  --org NAME         the organization (isolation id, reference content; default acme)\n"
		"  --salt S           a cache salt (1 to 256 printable ASCII bytes, no space, quote\n"
		"                     or backslash): the prompt's bytes are its salted chain's\n"
		"                     (PROTOCOL.md section 6; default none)\n"
		"  --seed N           the token ids' seed (default 1)\n"
		"  --timeout MS       the whole run's deadline, whatever arrives (default 10000)\n"
		"  --max-mib N        the most the shard's caches may make this run send, and\n"
		"                     hold for its refills, each in MiB (default 1024); a STATUS\n"
		"                     of more, or of more than %d caches, is refused\n"
		"  --no-udp-checksum  send UDP checksum 0 (needed on a veth, whose kernel leaves\n"
		"                     checksums to an offload that never runs)\n"
		"  --flip-expected K  for tests: flip byte K of what refill 1 (buffer 0) should be,\n"
		"                     so that a right shard must fail the check\n"
		"  --data-gate FILE   for tests: batch 1's EVICT_DATA waits, once its EVICT ran,\n"
		"                     until FILE exists (a wafer late with its data)\n"
		"  --help, --version\n",
		MAX_SAID, MAX_CACHES);
}

/* A cache salt as a trace gives it (PROTOCOL.md section 6). */
static bool
salt_ok(const char *s)
{
	size_t n;

	for (n = 0; s[n] != '\0'; n++)
		if (s[n] < 0x21 || s[n] > 0x7e || s[n] == '"' || s[n] == '\\' || n >= 256)
			return false;
	return n > 0;
}

/* One option @p ch (getopt's, its argument in optarg) into @p o: 0, or -1 (refused, said). */
static int
opt_one(int ch, struct opts *o)
{
	char err[160];
	uint64_t v;
	int rc = 0;

	switch (ch) {
	case 's':
		o->shard_ip = optarg;
		break;
	case 'b':
		o->bind_ip = optarg;
		break;
	case 'p': {
		unsigned int a, b, cc;
		char tail;

		if (sscanf(optarg, "%u,%u,%u%c", &a, &b, &cc, &tail) != 3 || a == 0 || b == 0 ||
		    cc == 0 || a > 65535 || b > 65535 || cc > 65535) {
			snprintf(err, sizeof(err), "--ports: '%s' is not three ports C,E,R", optarg);
			rc = -1;
		} else {
			o->ctl_port = (uint16_t)a;
			o->evict_port = (uint16_t)b;
			o->refill_port = (uint16_t)cc;
		}
		break;
	}
	case 'm':
		rc = args_u64("--model", optarg, 0, UINT32_MAX, &v, err, sizeof(err));
		o->model = (uint32_t)v;
		break;
	case 'M':
		rc = args_u64("--mtu", optarg, 576, 9000, &v, err, sizeof(err));
		o->mtu = (uint32_t)v;
		break;
	case 'P':
		rc = args_u64("--prompt", optarg, 1, UINT64_MAX - 1, &o->prompt, err, sizeof(err));
		break;
	case 'n':
		rc = args_u64("--tokens", optarg, 1, 1000000, &o->tokens, err, sizeof(err));
		break;
	case 'g':
		rc = args_u64("--batch", optarg, 1, 1024, &o->batch, err, sizeof(err));
		break;
	case 'o':
		o->org = optarg;
		break;
	case 'L':
		if (!salt_ok(optarg)) {
			fprintf(stderr, "udp-client: --salt: want 1 to 256 printable ASCII bytes "
					"without spaces, quotes or backslashes\n");
			return 2;
		}
		o->salt = optarg;
		break;
	case 'S':
		rc = args_u64("--seed", optarg, 0, UINT64_MAX, &o->seed, err, sizeof(err));
		break;
	case 't':
		rc = args_u64("--timeout", optarg, 1, 3600000, &o->timeout_ms, err, sizeof(err));
		break;
	case 'X':
		rc = args_u64("--max-mib", optarg, 1, 1 << 20, &o->max_mib, err, sizeof(err));
		break;
	case 'C':
		o->no_csum = true;
		break;
	case 'F':
		rc = args_u64("--flip-expected", optarg, 0, INT64_MAX, &v, err, sizeof(err));
		o->flip = (int64_t)v;
		break;
	case 'G':
		o->data_gate = optarg;
		break;
	case 'h':
		usage(stdout);
		exit(0);
	case 'V':
		args_version("kvss-udp-client", UC_VERSION);
		exit(0);
	default:
		usage(stderr);
		return -1;
	}
	if (rc != 0) {
		fprintf(stderr, "kvss-udp-client: %s\n", err);
		return -1;
	}
	return 0;
}

static int
parse_opts(int argc, char **argv, struct opts *o)
{
	static const struct option lo[] = {
		{"shard", required_argument, NULL, 's'},   {"bind", required_argument, NULL, 'b'},
		{"ports", required_argument, NULL, 'p'},   {"model", required_argument, NULL, 'm'},
		{"mtu", required_argument, NULL, 'M'},     {"prompt", required_argument, NULL, 'P'},
		{"tokens", required_argument, NULL, 'n'},  {"batch", required_argument, NULL, 'g'},
		{"org", required_argument, NULL, 'o'},     {"seed", required_argument, NULL, 'S'},
		{"timeout", required_argument, NULL, 't'}, {"no-udp-checksum", no_argument, NULL, 'C'},
		{"flip-expected", required_argument, NULL, 'F'}, {"max-mib", required_argument, NULL, 'X'},
		{"data-gate", required_argument, NULL, 'G'}, {"salt", required_argument, NULL, 'L'},
		{"help", no_argument, NULL, 'h'},	   {"version", no_argument, NULL, 'V'},
		{NULL, 0, NULL, 0}};
	int ch;

	*o = (struct opts){.org = "acme", .ctl_port = 7400, .evict_port = 7401, .refill_port = 7402,
			   .mtu = 1500, .prompt = 1000, .tokens = 600, .batch = 1024, .seed = 1,
			   .timeout_ms = 10000, .max_mib = 1024, .flip = -1};
	/* -h as every tool takes it. */
	while ((ch = getopt_long(argc, argv, "h", lo, NULL)) != -1)
		if (opt_one(ch, o) != 0)
			return -1;
	if (optind < argc) {
		fprintf(stderr, "kvss-udp-client: a stray argument '%s'\n", argv[optind]);
		return -1;
	}
	if (o->shard_ip == NULL) {
		fprintf(stderr, "kvss-udp-client: --shard IPV4 is missing (the shard's address)\n");
		return -1;
	}
	return 0;
}

int
main(int argc, char **argv)
{
	static struct client c;
	struct in_addr sa;
	int rc;

	args_check_stdout_at_exit("kvss-udp-client");
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (parse_opts(argc, argv, &c.o) != 0)
		return 2;
	if (inet_pton(AF_INET, c.o.shard_ip, &sa) != 1) {
		fprintf(stderr, "kvss-udp-client: --shard: '%s' is not an IPv4 address\n", c.o.shard_ip);
		return 2;
	}
	c.shard_ip = sa.s_addr;
	c.to_ctl = (struct sockaddr_in){.sin_family = AF_INET, .sin_port = htons(c.o.ctl_port),
					.sin_addr = sa};
	c.to_evict = c.to_ctl;
	c.to_evict.sin_port = htons(c.o.evict_port);
	/* Control from a port of its own (replies come back to it); REFILL_DATA to R. */
	if ((c.ctl = udp_socket(&c, 0, false)) < 0 || (c.data = udp_socket(&c, 0, false)) < 0 ||
	    (c.rfd = udp_socket(&c, c.o.refill_port, true)) < 0)
		return 2;
	c.depoch = nonzero_random();
	c.wepoch = nonzero_random();
	c.shard_id = UC_SHARD_ALL;
	c.deadline = mono_ns() + c.o.timeout_ms * 1000000ULL;
	/* The prompt: token ids from the seed, and h(i) of each (section 6). */
	c.h = alloc(&c, c.o.tokens * sizeof(*c.h), "the token hashes");
	if (c.h == NULL)
		return 2;
	uc_ref_prompt(uc_ref_root(uc_ref_isolation(c.o.org, strlen(c.o.org)),
				  c.o.salt != NULL ? uc_ref_salt(c.o.salt, strlen(c.o.salt)) : 0),
		      c.o.seed, c.o.tokens, c.h);
	rc = run(&c);
	if (c.failures > MAX_SAID)
		fprintf(stderr, "udp-client: FAIL: %" PRIu64 " more failure(s) not printed\n",
			c.failures - MAX_SAID);
	if (c.sys_error)
		return 2; /* said on stderr */
	if (rc != 0) {
		printf("udp-client: FAIL: stopped after %" PRIu64 " failure(s) (on stderr)\n",
		       c.failures);
		return 1;
	}
	return c.failures == 0 ? 0 : 1;
}
