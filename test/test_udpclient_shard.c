/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * kvss-udp-client against a fake shard that lies: the real client binary
 * (beside this test's directory: build/kvss-udp-client, or
 * build/asan/kvss-udp-client for the sanitizer build; KVSS_UDP_CLIENT
 * names another) run against a shard played here on 127.0.0.1 with
 * lib/proto's builders. The shard is honest (it stores nothing: the
 * reference content is computed from the token ids the client derives
 * from --org and --seed) until its scenario lies: a STATUS of 0 bytes a
 * token, of 17 caches, of another shard, of caches that would cost
 * gigabytes; an ACK of a message never sent; REFILL_DATA outside its
 * stream; a flood of ERROR reports; a contradicting copy of refill bytes
 * after they were checked; silence; another protocol version. Each run
 * asserts the client's exit status and its key line, and that the run
 * was bounded: it ended by itself before HARD_LIMIT_S (the deadline it
 * was given is a few seconds) and said at most a screen of lines.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "mono.h"
#include "proto.h"
#include "ucwire.h"

#define HARD_LIMIT_S 60 /* a run still going then is unbounded: killed, failed */
#define MODEL 1
#define SHARD 2
#define MAX_TOKENS 100000

/* What the fake shard says, and its lie. */
struct scen {
	unsigned int ncaches;	/* 0: 2 */
	uint32_t bpt;		/* bytes per token (0 stays 0 with zero_bpt) */
	uint16_t buffers;
	bool zero_bpt;
	unsigned int status_count; /* caches a STATUS lists (0: ncaches) */
	uint8_t version;	   /* 0: 2 */
	bool silent;
	uint16_t other_shard;	/* after the first EVICT, a STATUS from this shard id (0: none) */
	bool ack_future;	/* the first ACK says every seq up to 2^64-1 was received */
	bool bad_data;		/* REFILL_DATA outside its stream, and of a wrong stream length */
	bool flood;		/* ERROR reports without end once the REFILL came, nothing else */
	bool late_copy;		/* a byte of refill 1000 again, flipped, once it was checked */
	bool lost_wrap;		/* a TOKEN_LOST whose range ends past 2^32 */
	uint64_t capacity;	/* 0: 4096 */
};

struct fake {
	struct scen s;
	int ctl, evict;
	uint16_t ctl_port, evict_port, rport;
	struct sockaddr_in client; /* where its control messages come from */
	bool have_client;
	uint32_t depoch, sepoch;
	uint64_t recv_seq, batches, stored, prompts, reports, uptime;
	uint32_t tokens;
	uint64_t prompt;
	uint64_t h[MAX_TOKENS];
	bool refill_seen, late_sent, other_sent, acked_future;
	uint8_t buf[65536]; /* what came: a REFILL's requests are read from it while ... */
	uint8_t tx[65536];  /* ... what goes is built here */
};

static struct proto_msg pm;

/* ---- the client's prompt, derived as it does (udpclient.c, main) -------- */

static void
derive(struct fake *f, const char *org, uint64_t seed)
{
	uc_ref_prompt(uc_ref_isolation(org, strlen(org)), seed, f->tokens, f->h);
}

/* ---- sending ------------------------------------------------------------ */

static int
bound_socket(uint16_t *port)
{
	int fd = socket(AF_INET, SOCK_DGRAM, 0);
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t al = sizeof(a);
	int big = 8 << 20;

	cr_assert_geq(fd, 0);
	setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &big, sizeof(big));
	cr_assert_eq(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0, "bind: %s", strerror(errno));
	cr_assert_eq(getsockname(fd, (struct sockaddr *)&a, &al), 0);
	*port = ntohs(a.sin_port);
	return fd;
}

static void
send_client(struct fake *f, uint32_t len, bool refill_port)
{
	struct sockaddr_in to = f->client;

	if (!f->have_client)
		return;
	if (f->s.version != 0)
		f->tx[4] = f->s.version; /* another protocol version: the same bytes otherwise */
	if (refill_port) {
		to.sin_port = htons(f->rport);
		to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	}
	/* A full socket buffer at the client loses the datagram, as a rail would. */
	sendto(f->ctl, f->tx, len, MSG_DONTWAIT, (struct sockaddr *)&to, sizeof(to));
}

static struct proto_builder
begin(struct fake *f, uint8_t type, uint16_t shard, uint64_t seq)
{
	struct proto_builder b;
	struct proto_hdr h = {.type = type, .model_id = MODEL, .shard_id = shard, .epoch = f->sepoch,
			      .seq = seq};

	cr_assert_eq(proto_build_begin(&b, f->tx, sizeof(f->tx), &h), 0);
	return b;
}

static void
send_status(struct fake *f, uint16_t shard)
{
	struct proto_builder b = begin(f, PROTO_T_STATUS, shard, 0);
	struct proto_status st = {f->batches, f->reports, f->uptime += 1000, 0, f->depoch};
	unsigned int n = f->s.status_count ? f->s.status_count : f->s.ncaches;

	proto_build_status(&b, &st);
	for (unsigned int k = 0; k < n; k++) {
		struct proto_cache_info ci = {(uint16_t)k, f->s.buffers, f->s.bpt,
					      f->s.capacity, f->stored, f->prompts, 0, 0};

		cr_assert_eq(proto_build_cache_info(&b, &ci), 0);
	}
	send_client(f, proto_build_end(&b), false);
}

static void
send_ack(struct fake *f)
{
	struct proto_builder b = begin(f, PROTO_T_ACK, SHARD, 0);
	struct proto_ack a = {f->recv_seq, f->recv_seq};

	if (f->s.ack_future && !f->acked_future) {
		a.cum_seq = a.recv_seq = UINT64_MAX; /* a message never sent */
		f->acked_future = true;
	}
	proto_build_ack(&b, &a);
	send_client(f, proto_build_end(&b), false);
}

static void
send_refill_done(struct fake *f, uint64_t id, uint32_t tokens, uint32_t status, uint64_t bytes)
{
	struct proto_builder b = begin(f, PROTO_T_REFILL_DONE, SHARD, 0);
	struct proto_refill_done d = {id, tokens, status, bytes};

	proto_build_refill_done(&b, &d);
	send_client(f, proto_build_end(&b), false);
}

static void
send_error(struct fake *f, uint16_t code)
{
	struct proto_builder b = begin(f, PROTO_T_ERROR, SHARD, ++f->reports);
	struct proto_error e = {1, f->prompt, 0, 0, code};

	for (int i = 0; i < 40; i++) /* 40 records a report: 40 failures a datagram */
		proto_build_error(&b, &e);
	send_client(f, proto_build_end(&b), false);
}

static void
send_lost(struct fake *f)
{
	struct proto_builder b = begin(f, PROTO_T_TOKEN_LOST, SHARD, ++f->reports);
	struct proto_lost l = {f->prompt, 0xFFFFFFF0u, 0x20, 0};

	proto_build_lost(&b, &l);
	send_client(f, proto_build_end(&b), false);
}

/* One REFILL_DATA frame: @p len bytes at @p off of a stream of @p slen. */
static void
send_data(struct fake *f, const struct proto_refill_req *q, uint16_t buffer, uint32_t off,
	  uint32_t slen, const uint8_t *bytes, uint32_t len)
{
	struct proto_builder b = begin(f, PROTO_T_REFILL_DATA, SHARD, 0);
	struct proto_refill_data_hdr d = {q->refill_id, q->sequence_id, q->cache_idx, q->cache_id,
					  buffer, off, slen};

	proto_build_refill_data_hdr(&b, &d);
	proto_build_bytes(&b, bytes, len);
	send_client(f, proto_build_end(&b), true);
}

/* A refill the shard can serve: every buffer's stream, the reference content, in frames. */
static void
serve(struct fake *f, const struct proto_refill_req *q, const uint8_t *chunks)
{
	uint32_t bb = f->s.bpt / f->s.buffers, ntok = 0, j = 0;
	static uint32_t at[MAX_TOKENS * 2];
	static uint8_t stream[1 << 22];

	for (unsigned int k = 0; k < q->num_chunks; k++) {
		struct proto_refill_chunk c;

		proto_get_refill_chunk(chunks, k, &c);
		for (uint32_t t = c.start_token_idx; t < c.start_token_idx + c.num_tokens; t++)
			at[ntok++] = t;
	}
	cr_assert_leq((uint64_t)ntok * bb, sizeof(stream));
	for (uint16_t b = 0; b < f->s.buffers; b++) {
		uint32_t slen = ntok * bb;

		for (j = 0; j < ntok; j++)
			uc_ref_bytes(f->h[at[j]], MODEL, SHARD, q->cache_id, (uint64_t)b * bb,
				     stream + (size_t)j * bb, bb);
		for (uint32_t off = 0; off < slen; off += 1400)
			send_data(f, q, b, off, slen, stream + off, slen - off < 1400 ? slen - off : 1400);
		if (f->s.bad_data && b == 0) {
			/* A range past its stream (the parser drops it), a stream of the wrong length. */
			send_data(f, q, b, UINT32_MAX - 8, slen, stream, 64);
			send_data(f, q, b, 0, slen + 1, stream, 64);
		}
	}
	send_refill_done(f, q->refill_id, ntok, 0, (uint64_t)ntok * f->s.bpt);
}

static void
on_refill(struct fake *f)
{
	uint32_t off = 0;
	struct proto_refill_req q;
	const uint8_t *chunks;

	f->refill_seen = true;
	while (proto_next_refill(&pm, &off, &q, &chunks)) {
		uint32_t status = 0;

		for (unsigned int k = 0; k < q.num_chunks; k++) {
			struct proto_refill_chunk c;

			proto_get_refill_chunk(chunks, k, &c);
			if (c.prompt_id != f->prompt || f->prompts == 0)
				status = 4; /* UNKNOWN_PROMPT */
			else if ((uint64_t)c.start_token_idx + c.num_tokens > f->tokens)
				status = 5; /* RANGE */
		}
		if (q.cache_id >= f->s.ncaches)
			status = 8; /* BAD_CACHE */
		if (status != 0)
			send_refill_done(f, q.refill_id, 0, status, 0);
		else
			serve(f, &q, chunks);
	}
}

/* A bit of refill 1000's buffer 0 again, flipped: the client checked it before its DELETE. */
static void
late_copy(struct fake *f)
{
	struct proto_refill_req q = {1000, 0, 500, 0, 0, 1};
	uint32_t bb = f->s.bpt / f->s.buffers;
	uint8_t x[16];

	uc_ref_bytes(f->h[0], MODEL, SHARD, 0, 0, x, sizeof(x));
	x[3] ^= 0x40;
	send_data(f, &q, 0, 0, f->tokens * bb, x, sizeof(x));
	f->late_sent = true;
}

/* A control message from the client: taken once, in order, ACKed, a STATUS after it. */
static void
on_control(struct fake *f)
{
	const struct proto_hdr *h = &pm.hdr;

	if (h->type == PROTO_T_HELLO) {
		f->depoch = h->epoch;
		send_status(f, SHARD);
		return;
	}
	if (h->type == PROTO_T_REPORT_ACK || h->seq == 0)
		return;
	if (f->s.flood && (f->refill_seen || h->type == PROTO_T_REFILL)) {
		f->refill_seen = true; /* from the REFILL on, only the flood: no ACK, no data */
		return;
	}
	if (h->seq == f->recv_seq + 1) {
		f->recv_seq = h->seq;
		switch (h->type) {
		case PROTO_T_EVICT: {
			struct proto_evict_entry e;

			f->batches = pm.u.evict.batch_no;
			for (unsigned int i = 0; i < h->count; i++) {
				proto_get_evict_entry(&pm, i, &e);
				if (e.token_idx + 1u > f->stored)
					f->stored = e.token_idx + 1u;
			}
			f->prompts = 1;
			break;
		}
		case PROTO_T_DELETE:
			f->stored = f->prompts = 0;
			if (f->s.late_copy)
				late_copy(f);
			break;
		case PROTO_T_REFILL:
			on_refill(f);
			break;
		default:
			break;
		}
	}
	send_ack(f);
	if (f->s.other_shard != 0 && f->batches > 0 && !f->other_sent) {
		send_status(f, f->s.other_shard);
		f->other_sent = true;
	}
	send_status(f, SHARD);
	if (f->s.lost_wrap && f->refill_seen && f->reports == 0)
		send_lost(f);
}

/* ---- the run ------------------------------------------------------------ */

struct run {
	int status; /* the exit status, or -1: killed at HARD_LIMIT_S */
	char out[65536], err[65536];
	unsigned int err_lines;
};

static const char *
client_path(void)
{
	static char p[4096];
	char exe[4096];
	ssize_t n;

	if (getenv("KVSS_UDP_CLIENT") != NULL)
		return getenv("KVSS_UDP_CLIENT");
	n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	cr_assert_gt(n, 0);
	exe[n] = '\0';
	/* BUILD/test/test_udpclient_shard -> BUILD/kvss-udp-client */
	snprintf(p, sizeof(p), "%s/kvss-udp-client", dirname(dirname(exe)));
	return p;
}

static void
slurp(int fd, char *to, size_t cap)
{
	ssize_t n = pread(fd, to, cap - 1, 0);

	to[n > 0 ? n : 0] = '\0';
	close(fd);
}

/* Run the client with @p args (after the fake shard's address and ports) against @p s. */
static void
play(const struct scen *s, struct run *r, uint64_t as_limit, const char *const *args)
{
	static struct fake f;
	char ports[64], tmpl_o[] = "/tmp/ucshard_outXXXXXX", tmpl_e[] = "/tmp/ucshard_errXXXXXX";
	const char *argv[48];
	unsigned int a = 0;
	int fo = mkstemp(tmpl_o), fe = mkstemp(tmpl_e), probe, ws;
	uint64_t t0 = mono_ms() / 1000, next_status = 0, t;
	pid_t pid, done = 0;

	cr_assert(fo >= 0 && fe >= 0);
	unlink(tmpl_o);
	unlink(tmpl_e);
	memset(&f, 0, sizeof(f));
	f.s = *s;
	if (f.s.ncaches == 0)
		f.s.ncaches = 2;
	if (f.s.bpt == 0 && !f.s.zero_bpt)
		f.s.bpt = 256;
	if (f.s.buffers == 0)
		f.s.buffers = 2;
	if (f.s.capacity == 0)
		f.s.capacity = 4096;
	f.sepoch = 0x5eed0001;
	f.ctl = bound_socket(&f.ctl_port);
	f.evict = bound_socket(&f.evict_port);
	probe = bound_socket(&f.rport); /* a free port for the client's REFILL_DATA */
	close(probe);
	f.prompt = 1000;
	f.tokens = 60;
	snprintf(ports, sizeof(ports), "%u,%u,%u", f.ctl_port, f.evict_port, f.rport);
	argv[a++] = client_path();
	argv[a++] = "--shard";
	argv[a++] = "127.0.0.1";
	argv[a++] = "--bind";
	argv[a++] = "127.0.0.1";
	argv[a++] = "--ports";
	argv[a++] = ports;
	argv[a++] = "--model";
	argv[a++] = "1";
	argv[a++] = "--tokens"; /* 60 unless the scenario says (the last one counts) */
	argv[a++] = "60";
	for (unsigned int i = 0; args[i] != NULL; i++) {
		if (strcmp(args[i], "--tokens") == 0)
			f.tokens = (uint32_t)strtoul(args[i + 1], NULL, 10);
		argv[a++] = args[i];
	}
	argv[a] = NULL;
	cr_assert_leq(f.tokens, MAX_TOKENS);
	derive(&f, "acme", 1);
	fflush(NULL);
	pid = fork();
	cr_assert_geq(pid, 0);
	if (pid == 0) {
		struct rlimit rl = {as_limit, as_limit};

		dup2(fo, 1);
		dup2(fe, 2);
		/* Under the sanitizers a report is exit 86, never a verdict's 1. */
		setenv("ASAN_OPTIONS", "exitcode=86", 1);
		setenv("UBSAN_OPTIONS", "exitcode=86:print_stacktrace=1", 1);
		if (as_limit != 0)
			setrlimit(RLIMIT_AS, &rl);
		execv(argv[0], (char *const *)argv);
		fprintf(stderr, "exec %s: %s\n", argv[0], strerror(errno));
		_exit(127);
	}
	while (done == 0) {
		struct pollfd pf[2] = {{.fd = f.ctl, .events = POLLIN}, {.fd = f.evict, .events = POLLIN}};

		done = waitpid(pid, &ws, WNOHANG);
		if (done != 0)
			break;
		if (mono_ms() / 1000 - t0 > HARD_LIMIT_S) {
			kill(pid, SIGKILL);
			waitpid(pid, &ws, 0);
			r->status = -1;
			goto out;
		}
		if (f.s.flood && f.refill_seen) {
			for (int i = 0; i < 64; i++)
				send_error(&f, 7 /* MALFORMED */);
		}
		if (poll(pf, 2, f.s.flood && f.refill_seen ? 0 : 10) > 0) {
			if (pf[1].revents & POLLIN) /* EVICT_DATA: nothing stored, read and let go */
				while (recv(f.evict, f.buf, sizeof(f.buf), MSG_DONTWAIT) > 0)
					;
			if (pf[0].revents & POLLIN) {
				for (;;) {
					struct sockaddr_in from;
					socklen_t fl = sizeof(from);
					ssize_t n = recvfrom(f.ctl, f.buf, sizeof(f.buf), MSG_DONTWAIT,
							     (struct sockaddr *)&from, &fl);

					if (n <= 0)
						break;
					f.client = from;
					f.have_client = true;
					if (f.s.silent)
						continue;
					if (proto_parse_payload(f.buf, (uint32_t)n, 7400, &proto_ports_default,
								&pm) != PROTO_OK)
						continue;
					on_control(&f);
				}
			}
		}
		/* A shard's STATUS every 100 ms or so. */
		if (!f.s.silent && f.depoch != 0 && (t = mono_ms()) >= next_status) {
			send_status(&f, SHARD);
			next_status = t + 100;
		}
	}
	r->status = WIFEXITED(ws) ? WEXITSTATUS(ws) : 128 + WTERMSIG(ws);
out:
	close(f.ctl);
	close(f.evict);
	slurp(fo, r->out, sizeof(r->out));
	slurp(fe, r->err, sizeof(r->err));
	r->err_lines = 0;
	for (const char *p = r->err; *p; p++)
		r->err_lines += *p == '\n';
	cr_log_info("client (%s) exit %d\n--- stdout\n%s--- stderr\n%s", argv[0], r->status, r->out,
		    r->err);
}

static struct run R;

/* The verdict: exit @p status, @p line in stdout or stderr, and a bounded run. */
static void
verdict(const struct scen *s, int status, const char *line, const char *const *args)
{
	play(s, &R, 0, args);
	cr_assert_neq(R.status, -1, "the client still ran after %d s: unbounded\n%s", HARD_LIMIT_S,
		      R.err);
	cr_assert(strstr(R.err, "Sanitizer") == NULL && strstr(R.err, "runtime error") == NULL,
		  "a sanitizer's report\n%s", R.err);
	cr_assert_eq(R.status, status, "exit %d, expected %d\n--- stdout\n%s--- stderr\n%s", R.status,
		     status, R.out, R.err);
	cr_assert(strstr(R.out, line) != NULL || strstr(R.err, line) != NULL,
		  "no line with '%s'\n--- stdout\n%s--- stderr\n%s", line, R.out, R.err);
	cr_assert_leq(R.err_lines, 30, "%u lines on stderr: unbounded", R.err_lines);
	if (status != 0)
		cr_assert(strstr(R.out, "udp-client: PASS") == NULL, "a PASS line in a failed run");
}

#define ARGS(...) ((const char *const[]){__VA_ARGS__, NULL})
#define QUICK "--timeout", "4000"

/* ---- an honest shard: the client works with every cache count ------------ */

Test(honest, one_cache_passes)
{
	struct scen s = {.ncaches = 1};

	verdict(&s, 0, "udp-client: PASS: 7 refills, 34560 bytes checked", ARGS("--timeout", "20000"));
}

Test(honest, four_caches_pass)
{
	struct scen s = {.ncaches = 4};

	verdict(&s, 0, "udp-client: PASS: 16 refills", ARGS("--timeout", "20000"));
}

/* Five caches need 19 refills: the client's table held 16. */
Test(honest, five_caches_pass)
{
	struct scen s = {.ncaches = 5};

	verdict(&s, 0, "udp-client: PASS: 19 refills", ARGS("--timeout", "20000"));
}

/* Sixteen: 52 refills, a REFILL of them in several datagrams of the MTU. */
Test(honest, sixteen_caches_pass)
{
	struct scen s = {.ncaches = 16, .buffers = 4};

	verdict(&s, 0, "udp-client: PASS: 52 refills", ARGS("--timeout", "30000"));
}

/* ---- the lies ------------------------------------------------------------ */

Test(lie, zero_bytes_per_token_is_refused)
{
	struct scen s = {.zero_bpt = true};

	verdict(&s, 1, "0 bytes per token: nothing to check; refused", ARGS(QUICK));
}

Test(lie, seventeen_caches_are_refused_not_cut)
{
	struct scen s = {.ncaches = 17, .status_count = 17};

	verdict(&s, 1, "the shard's STATUS lists 17 caches; this client takes at most 16", ARGS(QUICK));
}

Test(lie, a_status_of_another_shard_is_refused)
{
	struct scen s = {.other_shard = 9};

	verdict(&s, 1, "a STATUS from shard 9, not shard 2: refused", ARGS(QUICK));
}

Test(lie, caches_that_cost_gigabytes_are_refused_before_any_is_taken)
{
	struct scen s = {.ncaches = 16, .bpt = 1u << 20, .buffers = 16};

	verdict(&s, 1, "--max-mib is 1024: refused", ARGS(QUICK, "--tokens", "600"));
	cr_assert(strstr(R.out, "evicted") == NULL, "it sent data");
}

Test(lie, an_ack_of_a_message_never_sent_is_a_protocol_error)
{
	struct scen s = {.ack_future = true};

	verdict(&s, 1, "recv_seq 18446744073709551615, but the last control message sent was 1: a "
		       "protocol error", ARGS(QUICK));
}

Test(lie, refill_data_outside_its_stream_fails)
{
	struct scen s = {.bad_data = true};

	verdict(&s, 1, "a REFILL_DATA header says sequence 500 cache_idx 0 cache 0 buffer 0 stream_len 7681",
		ARGS(QUICK));
	cr_assert(strstr(R.err, "bad data range") != NULL, "%s", R.err);
}

Test(lie, a_flood_of_error_reports_does_not_hold_the_deadline)
{
	struct scen s = {.flood = true};

	verdict(&s, 1, "more failure(s) not printed", ARGS("--timeout", "2000"));
	cr_assert(strstr(R.err, "ERROR MALFORMED (7)") != NULL, "%s", R.err);
}

Test(lie, a_contradicting_copy_after_the_check_fails)
{
	struct scen s = {.late_copy = true};

	verdict(&s, 1, "refill 1000 (the whole prompt): bytes came again after the check, differently",
		ARGS(QUICK));
	cr_assert(strstr(R.out, "udp-client: FAIL: ") != NULL, "%s", R.out);
}

Test(lie, a_token_lost_range_is_printed_without_wrapping)
{
	struct scen s = {.lost_wrap = true};

	verdict(&s, 1, "TOKEN_LOST: prompt 1000 tokens [4294967280, 4294967312) of cache 0", ARGS(QUICK));
}

Test(lie, silence_fails_at_the_deadline)
{
	struct scen s = {.silent = true};

	verdict(&s, 1, "did not answer HELLO with a STATUS of our epoch", ARGS("--timeout", "1000"));
}

Test(lie, another_protocol_version_is_dropped)
{
	struct scen s1 = {.version = 1}, s3 = {.version = 3};

	verdict(&s1, 1, "datagram: bad version", ARGS("--timeout", "1000"));
	cr_assert(strstr(R.err, "did not answer HELLO") != NULL, "%s", R.err);
	verdict(&s3, 1, "datagram: bad version", ARGS("--timeout", "1000"));
}

Test(lie, no_room_for_the_prompt_is_refused)
{
	struct scen s = {.capacity = 10};

	verdict(&s, 1, "no room for the prompt; refused", ARGS(QUICK));
}

/* ---- the client's own errors: exit 2, said on stderr ------------------------ */

Test(errors, a_usage_error_is_2)
{
	struct scen s = {.silent = true};

	verdict(&s, 2, "--tokens: ", ARGS("--tokens", "0"));
}

/*
 * The refills' buffers of 100,000 tokens (within --max-mib) under a 256 MiB
 * address space: an allocation fails before any byte is sent. Not under
 * AddressSanitizer, whose shadow memory needs terabytes of address space.
 */
Test(errors, a_failed_allocation_is_2_and_said)
{
	struct scen s = {.ncaches = 1, .bpt = 1024, .capacity = 200000};

	if (strstr(client_path(), "/asan/") != NULL)
		cr_skip_test("the sanitizer build reserves its shadow: no RLIMIT_AS");
	play(&s, &R, 256ull << 20, ARGS(QUICK, "--tokens", "100000"));
	cr_assert_eq(R.status, 2, "exit %d\n%s%s", R.status, R.out, R.err);
	cr_assert(strstr(R.err, "udp-client: cannot allocate ") != NULL, "%s", R.err);
	cr_assert(strstr(R.out, "evicted") == NULL, "it sent data first\n%s", R.out);
}
