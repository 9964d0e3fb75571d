/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * A driver's and wafer's frames for one shard (config/ci-pcap-shard.cfg:
 * one cache, 64 bytes per token in 2 buffers), and the check of what the
 * shard sends back:
 *
 *   shard_scenario gen IN.pcap        write the frames the shard receives
 *   shard_scenario check OUT.pcap...  check what it sent
 *   shard_scenario gen-ahead / check-ahead, gen-reevict / check-reevict:
 *     the refill queue's order (shard_scenario_order.c)
 *   shard_scenario gen-space / check-space: the same for the space test
 *     (test/data/shard-small.cfg, 8 tokens): A fills 6; B's 4 tokens wait for
 *     the DELETE of A 2..5, then fit; C's 8 tokens never fit: after the
 *     space timeout 2 are stored and 6 answered NO_SPACE; B is refilled.
 *
 * The stream: data of a batch 3 of a stream before this one (dropped at
 * the HELLO: its batch 3 is not this stream's); HELLO; RESERVE; EVICT
 * batch 1 (prompt A, tokens 0..3) with its data in three fragments, out of
 * order; the data of batch 2 before its EVICT; seq 4 (REFILL of A 0..7,
 * waiting for batch 2) before seq 3 (EVICT batch 2: A 4..7); seq 2 again (a retransmission); EVICT batch 3 (prompt B
 * tokens 0..1, and A token 20: a HOLE) whose data for B's token 1 never
 * comes (TOKEN_LOST after the batch timeout); DELETE A 6..7; DELETE A 2..3
 * (not a suffix: ERROR); REFILL of A 0..5 waiting for batch 3.
 */
#include <pcap/pcap.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "expect.h"
#include "shard_scenario.h"

static struct frames_pcap out;
static uint64_t iso;

/*
 * Reference prefix hashes, which the wafer's bytes of a token are made from:
 * prompt X's tokens are 100 * (X's top hex digit) + i, and those of its
 * generation g (the same tokens evicted again, with other bytes) 10000 * g
 * further on.
 */
uint64_t
href_gen(uint64_t prompt, uint32_t token, unsigned int gen)
{
	uint64_t h = iso;
	uint32_t i, base = (uint32_t)(prompt >> 60) * 100 + gen * 10000;

	for (i = 0; i <= token; i++)
		h = proto_ref_hash_next(h, base + i);
	return h;
}

uint64_t
href(uint64_t prompt, uint32_t token)
{
	return href_gen(prompt, token, 0);
}

unsigned int sc_gen;

static int mix_bad;	  /* gen --mix-bad: a broken copy after every frame */
static unsigned int nbad; /* broken copies written */

static void
dump(const uint8_t *f, uint32_t n)
{
	frames_pcap_write(&out, f, n, n);
}

/*
 * Write a frame; with --mix-bad, then a copy broken in one of six ways, in
 * turn (truncated, magic, version, body_len, IPv4 checksum, UDP length),
 * which the shard must drop as if it had never come.
 */
static void
emit(const uint8_t *f, uint32_t n)
{
	uint8_t x[PROTO_FRAME_MAX];
	const uint32_t P = PROTO_L2L4_LEN;

	dump(f, n);
	if (!mix_bad)
		return;
	memcpy(x, f, n);
	n = frames_break(x, n, P, nbad++);
	dump(x, n);
}

uint32_t sc_src_ip = 0x0a630001; /* 10.99.0.1, the driver */

static void
addr(struct proto_addr *a, uint16_t dport)
{
	static const uint8_t drv[6] = {2, 0, 0, 0, 0, 1}, shd[6] = {2, 0, 0, 0, 1, 0};

	memset(a, 0, sizeof(*a));
	memcpy(a->src_mac, drv, 6);
	memcpy(a->dst_mac, shd, 6);
	a->src_ip = sc_src_ip;
	a->dst_ip = 0x0a63000a;
	a->src_port = dport;
	a->dst_port = dport;
}

void
send_payload(uint8_t *pay, uint32_t n, uint16_t dport)
{
	uint8_t f[PROTO_FRAME_MAX];
	struct proto_addr a;

	addr(&a, dport);
	emit(f, proto_build_frame(f, sizeof(f), &a, pay, n));
}

uint32_t cur_epoch = EPOCH;

void
begin(struct proto_builder *b, uint8_t *buf, uint8_t type, uint64_t seq)
{
	struct proto_hdr h = {.type = type, .shard_id = PROTO_SHARD_ALL, .epoch = cur_epoch, .seq = seq};

	proto_build_begin(b, buf, PROTO_PAYLOAD_MAX, &h);
}

void
evict(uint64_t seq, uint64_t batch, const uint64_t *prompt, const uint32_t *tok, uint16_t g)
{
	uint8_t buf[PROTO_PAYLOAD_MAX];
	struct proto_builder b;
	struct proto_evict_hdr eh = {batch, 1, g, 0};
	uint16_t i;

	begin(&b, buf, PROTO_T_EVICT, seq);
	proto_build_evict_hdr(&b, &eh);
	for (i = 0; i < g; i++) {
		struct proto_evict_entry e = {prompt[i], tok[i], 1};

		proto_build_evict_entry(&b, &e);
	}
	send_payload(buf, proto_build_end(&b), PROTO_PORT_CTRL_DEFAULT);
}

/* Bytes [a, z) of batch @batch's stream (tokens @prompt/@tok, g of them): the wafer's. */
void
data(uint64_t batch, const uint64_t *prompt, const uint32_t *tok, uint16_t g, uint32_t a,
     uint32_t z)
{
	static const struct wafer_place at = {.bytes_per_token = B};
	uint8_t buf[PROTO_PAYLOAD_MAX];
	uint64_t hash[64];
	struct wafer_evict w;
	uint16_t i;

	if (g > 64)
		abort(); /* a scenario's batch is small */
	for (i = 0; i < g; i++)
		hash[i] = href_gen(prompt[i], tok[i], sc_gen);
	wafer_evict_init(&w, &at, batch, hash, g, 77);
	w.stream = cur_epoch; /* version 2: data names its stream */
	w.next = a;
	send_payload(buf, wafer_evict_next(&w, buf, z - a), PROTO_PORT_EVICT_DEFAULT);
}

/* One REFILL of @n tokens of prompt A from token 0. */
void
refill_a(uint64_t seq, uint64_t refill_id, uint64_t evict_count, uint32_t n)
{
	uint8_t buf[PROTO_PAYLOAD_MAX];
	struct proto_builder b;
	struct proto_refill_req rq = {.refill_id = refill_id, .evict_count = evict_count,
				      .sequence_id = 9, .cache_idx = 0, .cache_id = 0};
	struct proto_refill_chunk ch = {A_ID, 0, n};

	begin(&b, buf, PROTO_T_REFILL, seq);
	proto_build_refill_req(&b, &rq);
	proto_build_refill_chunk(&b, &ch);
	send_payload(buf, proto_build_end(&b), PROTO_PORT_CTRL_DEFAULT);
}

/* The next message of @p c into @p m (its frame returned), or NULL at the end. */
const uint8_t *
captures_next(struct captures *c, struct proto_msg *m)
{
	const uint8_t *d;

	for (;;) {
		if (c->p == NULL) {
			if (c->i == c->n)
				return NULL;
			c->p = frames_pcap_read(c->files[c->i++], "shard_scenario");
			if (c->p == NULL) {
				c->bad = 1;
				return NULL;
			}
		}
		if ((d = frames_pcap_next_msg(c->p, m)) != NULL)
			return d;
		pcap_close(c->p);
		c->p = NULL;
	}
}

static void
gen(void)
{
	uint8_t buf[PROTO_PAYLOAD_MAX];
	struct proto_builder b;
	uint64_t p1[4] = {A_ID, A_ID, A_ID, A_ID}, p3[3] = {B_ID, B_ID, A_ID};
	uint64_t pc3[3] = {C_ID, C_ID, C_ID};
	uint32_t t1[4] = {0, 1, 2, 3}, t2[4] = {4, 5, 6, 7}, t3[3] = {0, 1, 20};

	/*
	 * Before the HELLO: data that a driver queued for the shard this one
	 * replaces (a restart), for a batch 3 of its stream, with the bytes of
	 * B's token 1 that this stream's batch 3 never sends. Held, it would
	 * make that token whole; it must be dropped at the HELLO.
	 */
	data(3, pc3, t3, 3, 64, 128);
	begin(&b, buf, PROTO_T_HELLO, 0);
	send_payload(buf, proto_build_end(&b), PROTO_PORT_CTRL_DEFAULT);
	{
		struct proto_reserve r = {A_ID, 0, 0, 8, 0};

		begin(&b, buf, PROTO_T_RESERVE, 1);
		proto_build_reserve(&b, &r);
		send_payload(buf, proto_build_end(&b), PROTO_PORT_CTRL_DEFAULT);
	}
	evict(2, 1, p1, t1, 4);
	data(1, p1, t1, 4, 100, 256);
	data(1, p1, t1, 4, 0, 50);
	data(1, p1, t1, 4, 50, 100);
	/* Batch 2's data before its EVICT, seq 4 before seq 3. */
	data(2, p1, t2, 4, 0, 256);
	{
		struct proto_refill_req rq = {.refill_id = 1, .evict_count = 2, .sequence_id = 9,
					      .cache_idx = 0, .cache_id = 0};
		struct proto_refill_chunk ch = {A_ID, 0, 8};

		begin(&b, buf, PROTO_T_REFILL, 4);
		proto_build_refill_req(&b, &rq);
		proto_build_refill_chunk(&b, &ch);
		send_payload(buf, proto_build_end(&b), PROTO_PORT_CTRL_DEFAULT);
	}
	evict(3, 2, p1, t2, 4);
	evict(2, 1, p1, t1, 4); /* a retransmission: ignored */
	/* Batch 3: B 0..1 and a HOLE; B's token 1 never arrives whole. */
	evict(5, 3, p3, t3, 3);
	data(3, p3, t3, 3, 0, 64 + 10);
	data(3, p3, t3, 3, 128, 192);
	{
		struct proto_delete d1 = {A_ID, 2, 6, 7, 0}, d2 = {A_ID, 2, 2, 3, 0};

		begin(&b, buf, PROTO_T_DELETE, 6);
		proto_build_delete(&b, &d1);
		send_payload(buf, proto_build_end(&b), PROTO_PORT_CTRL_DEFAULT);
		begin(&b, buf, PROTO_T_DELETE, 7);
		proto_build_delete(&b, &d2);
		send_payload(buf, proto_build_end(&b), PROTO_PORT_CTRL_DEFAULT);
	}
	{
		struct proto_refill_req rq = {.refill_id = 2, .evict_count = 3, .sequence_id = 9,
					      .cache_idx = 0, .cache_id = 0};
		struct proto_refill_chunk ch = {A_ID, 0, 6};

		begin(&b, buf, PROTO_T_REFILL, 8);
		proto_build_refill_req(&b, &rq);
		proto_build_refill_chunk(&b, &ch);
		send_payload(buf, proto_build_end(&b), PROTO_PORT_CTRL_DEFAULT);
	}
}

static void
gen_space(void)
{
	uint8_t buf[PROTO_PAYLOAD_MAX];
	struct proto_builder b;
	uint64_t pa[6] = {A_ID, A_ID, A_ID, A_ID, A_ID, A_ID}, pb[4] = {B_ID, B_ID, B_ID, B_ID};
	uint64_t pc[8] = {C_ID, C_ID, C_ID, C_ID, C_ID, C_ID, C_ID, C_ID};
	uint32_t ta[6] = {0, 1, 2, 3, 4, 5}, t8[8] = {0, 1, 2, 3, 4, 5, 6, 7};

	begin(&b, buf, PROTO_T_HELLO, 0);
	send_payload(buf, proto_build_end(&b), PROTO_PORT_CTRL_DEFAULT);
	evict(1, 1, pa, ta, 6);
	data(1, pa, ta, 6, 0, 6 * B);
	evict(2, 2, pb, t8, 4); /* 6 + 4 > 8: waits */
	data(2, pb, t8, 4, 0, 4 * B);
	{
		struct proto_delete d = {A_ID, 1, 2, 5, 0};

		begin(&b, buf, PROTO_T_DELETE, 3);
		proto_build_delete(&b, &d);
		send_payload(buf, proto_build_end(&b), PROTO_PORT_CTRL_DEFAULT);
	}
	evict(4, 3, pc, t8, 8); /* 6 + 8 > 8, and no DELETE comes */
	data(3, pc, t8, 8, 0, 8 * B);
	{
		struct proto_refill_req rq = {.refill_id = 1, .evict_count = 2, .sequence_id = 9,
					      .cache_idx = 0, .cache_id = 0};
		struct proto_refill_chunk ch = {B_ID, 0, 4};

		begin(&b, buf, PROTO_T_REFILL, 5);
		proto_build_refill_req(&b, &rq);
		proto_build_refill_chunk(&b, &ch);
		send_payload(buf, proto_build_end(&b), PROTO_PORT_CTRL_DEFAULT);
	}
}

/*
 * The driver restarts. Its first stream stores A 0..3 (batch 1), then
 * queues a DELETE of A from token 2 and a REFILL (id 1) of A 0..7, both
 * waiting for a batch 2 that this driver never sends. Then 40 frames for
 * another port (so the new HELLO comes in a later RX burst, after the
 * waiting messages went to the refill lcore). The restarted driver stores
 * A 0..3 and 4..7 as its batches 1 and 2 (batch numbers restart) and asks
 * for A 0..7 (REFILL id 2): the old DELETE and REFILL must never run, and
 * the new refill must get all 8 tokens. The old driver's data for its batch
 * 3, held before the restart, must not fill the new driver's batch 3 (C
 * 0..3, whose data never comes): C's four tokens are lost.
 */
static void
gen_restart(void)
{
	uint8_t buf[PROTO_PAYLOAD_MAX], junk[64] = {0};
	struct proto_builder b;
	uint64_t pa[4] = {A_ID, A_ID, A_ID, A_ID}, pc[4] = {C_ID, C_ID, C_ID, C_ID};
	uint32_t t1[4] = {0, 1, 2, 3}, t2[4] = {4, 5, 6, 7};
	struct proto_delete d = {A_ID, 2, 2, 8, 0};
	int i;

	begin(&b, buf, PROTO_T_HELLO, 0);
	send_payload(buf, proto_build_end(&b), PROTO_PORT_CTRL_DEFAULT);
	evict(1, 1, pa, t1, 4);
	data(1, pa, t1, 4, 0, 4 * B);
	begin(&b, buf, PROTO_T_DELETE, 2);
	proto_build_delete(&b, &d);
	send_payload(buf, proto_build_end(&b), PROTO_PORT_CTRL_DEFAULT);
	refill_a(3, 1, 2, 8);
	data(3, pc, t1, 4, 0, 4 * B); /* held: its EVICT has not come */
	for (i = 0; i < 40; i++)
		send_payload(junk, sizeof(junk), 9);
	cur_epoch = EPOCH2;
	begin(&b, buf, PROTO_T_HELLO, 0);
	send_payload(buf, proto_build_end(&b), PROTO_PORT_CTRL_DEFAULT);
	evict(1, 1, pa, t1, 4);
	data(1, pa, t1, 4, 0, 4 * B);
	evict(2, 2, pa, t2, 4);
	data(2, pa, t2, 4, 0, 4 * B);
	refill_a(3, 2, 2, 8);
	evict(4, 3, pc, t1, 4); /* no data: the old held data must not fill it */
}

static int space_mode, restart_mode;

/* Everything the shard sent, over one or more captures (one per TX queue). */
static int
check(char **files, int nfiles)
{
	int no_space = 0;
	uint64_t want_prompt = space_mode ? B_ID : A_ID;
	static struct proto_msg m;
	uint64_t max_ack = 0, rd_bytes[3][NB] = {{0}}, done_tokens[3] = {0}, done_bytes[3] = {0};
	int status = 0, hole = 0, not_right = 0, lost_b1 = 0, lost_other = 0, bad_bytes = 0, k;
	struct captures cap = {.files = files, .n = nfiles};
	const uint8_t *d;
	int status2 = 0, errors = 0, done_old = 0, lost_c = 0;
	/* The wafer's own checker too: tokens each refill must bring whole. */
	static const struct wafer_place at = {.bytes_per_token = B};
	const uint32_t want_tok[3] = {0, space_mode ? 4 : restart_mode ? 0 : 8,
				      restart_mode ? 8 : space_mode ? 0 : 6};
	struct wafer_refill wr[3];
	uint64_t hash[8];

	for (k = 0; k < 8; k++)
		hash[k] = href(want_prompt, (uint32_t)k);
	for (k = 1; k < 3; k++)
		wafer_refill_init(&wr[k], &at, NB, (uint64_t)k, hash, want_tok[k]);

	while ((d = captures_next(&cap, &m)) != NULL) {
		unsigned int i;

		switch (m.hdr.type) {
		case PROTO_T_STATUS:
			status += m.u.status.driver_epoch == EPOCH;
			status2 += m.u.status.driver_epoch == EPOCH2;
			break;
		case PROTO_T_ACK:
			if (m.u.ack.cum_seq > max_ack)
				max_ack = m.u.ack.cum_seq;
			break;
		case PROTO_T_ERROR:
			for (i = 0; i < m.hdr.count; i++) {
				struct proto_error e;

				proto_get_error(&m, i, &e);
				errors++;
				hole += e.code == PROTO_E_HOLE && e.prompt_id == A_ID && e.token_idx == 20 &&
					e.seq == 5;
				no_space += e.code == PROTO_E_NO_SPACE && e.prompt_id == C_ID &&
					    e.token_idx >= 2 && e.seq == 4;
				not_right += e.code == PROTO_E_DELETE_NOT_RIGHT && e.token_idx == 2 &&
					     e.seq == 7;
			}
			break;
		case PROTO_T_TOKEN_LOST:
			for (i = 0; i < m.hdr.count; i++) {
				struct proto_lost l;

				uint32_t t;

				proto_get_lost(&m, i, &l);
				/* Version 2: a range; each of its tokens counted. */
				for (t = l.token_idx; t < l.token_idx + l.count; t++) {
					lost_c += l.prompt_id == C_ID && t < 4;
					if (l.prompt_id == B_ID && t == 1)
						lost_b1++;
					else
						lost_other++;
				}
			}
			break;
		case PROTO_T_REFILL_DONE:
			for (i = 0; i < m.hdr.count; i++) {
				struct proto_refill_done r;

				proto_get_refill_done(&m, i, &r);
				done_old += r.refill_id == 1;
				if (r.refill_id >= 1 && r.refill_id <= 2 && r.status == 0) {
					done_tokens[r.refill_id] = r.tokens;
					done_bytes[r.refill_id] = r.bytes;
				}
			}
			break;
		case PROTO_T_REFILL_DATA: {
			const struct proto_refill_data_hdr *h = &m.u.refill_data;
			int64_t wrong;

			EXPECT(h->refill_id >= 1 && h->refill_id <= 2 && h->buffer_id < NB,
			       "REFILL_DATA of refill %lu buffer %u", (unsigned long)h->refill_id,
			       h->buffer_id);
			if (h->refill_id < 1 || h->refill_id > 2 || h->buffer_id >= NB)
				break;
			/* Every byte: glued token t is the prompt's token t. */
			rd_bytes[h->refill_id][h->buffer_id] += m.data_len;
			wrong = wafer_refill_data(&wr[h->refill_id], h, d + m.data_off, m.data_len);
			if (wrong > 0)
				bad_bytes += (int)wrong;
			EXPECT(h->sequence_id == 9, "REFILL_DATA sequence_id %u", h->sequence_id);
			break;
		}
		default:
			break;
		}
	}
	if (cap.bad)
		return 2;
	EXPECT(status >= 1, "no STATUS with the driver's epoch");
	for (k = 1; k < 3; k++) {
		if (want_tok[k] == 0)
			continue;
		EXPECT(wafer_refill_whole(&wr[k]) && wr[k].bad_bytes == 0 && wr[k].bad_frames == 0,
		       "the wafer's check of refill %d: whole %d, %lu bad bytes, %lu bad frames", k,
		       wafer_refill_whole(&wr[k]), (unsigned long)wr[k].bad_bytes,
		       (unsigned long)wr[k].bad_frames);
	}
	if (restart_mode) {
		EXPECT(status2 >= 1, "no STATUS with the restarted driver's epoch");
		EXPECT(max_ack == 4, "cumulative ACK %lu, want 4", (unsigned long)max_ack);
		EXPECT(done_old == 0 && rd_bytes[1][0] + rd_bytes[1][1] == 0,
		       "the old driver's REFILL ran after the restart (%d REFILL_DONE)", done_old);
		EXPECT(errors == 0, "%d ERROR records", errors);
		EXPECT(lost_c == 4 && lost_b1 + lost_other == 4,
		       "TOKEN_LOST: C 0..3 %d (want 4: the old held data filled them?), %d in all",
		       lost_c, lost_b1 + lost_other);
		EXPECT(done_tokens[2] == 8 && done_bytes[2] == 8 * B,
		       "the new driver's refill: %lu tokens %lu bytes, want 8 (the old DELETE ran?)",
		       (unsigned long)done_tokens[2], (unsigned long)done_bytes[2]);
		for (k = 0; k < NB; k++)
			EXPECT(rd_bytes[2][k] == 8 * B / NB, "new refill buffer %d: %lu bytes", k,
			       (unsigned long)rd_bytes[2][k]);
		EXPECT(bad_bytes == 0, "%d refilled bytes differ from the reference", bad_bytes);
		printf("shard restart scenario: %s\n",
		       expect_fails ? "FAILED" : "the old driver's DELETE and REFILL dropped, the new refill whole");
		return expect_fails ? 1 : 0;
	}
	if (space_mode) {
		EXPECT(max_ack == 5, "cumulative ACK %lu, want 5", (unsigned long)max_ack);
		EXPECT(no_space == 6, "NO_SPACE for C's tokens 2..7: %d, want 6", no_space);
		EXPECT(lost_b1 + lost_other == 0, "TOKEN_LOST: %d", lost_b1 + lost_other);
		EXPECT(done_tokens[1] == 4 && done_bytes[1] == 4 * B, "refill of B: %lu tokens",
		       (unsigned long)done_tokens[1]);
		for (k = 0; k < NB; k++)
			EXPECT(rd_bytes[1][k] == 4 * B / NB, "refill of B buffer %d: %lu bytes", k,
			       (unsigned long)rd_bytes[1][k]);
		EXPECT(bad_bytes == 0, "%d refilled bytes differ from the reference", bad_bytes);
		printf("shard space scenario: %s\n", expect_fails ? "FAILED" : "waited for the DELETE, then NO_SPACE, as expected");
		return expect_fails ? 1 : 0;
	}
	EXPECT(max_ack == 8, "cumulative ACK %lu, want 8", (unsigned long)max_ack);
	EXPECT(hole == 1, "the HOLE of A token 20 not reported (%d)", hole);
	EXPECT(not_right == 1, "the DELETE of A 2..3 not reported as DELETE_NOT_RIGHT (%d)", not_right);
	EXPECT(lost_b1 == 1 && lost_other == 0, "TOKEN_LOST: B token 1 %d times, others %d", lost_b1,
	       lost_other);
	EXPECT(done_tokens[1] == 8 && done_bytes[1] == 8 * B, "refill 1 done: %lu tokens %lu bytes",
	       (unsigned long)done_tokens[1], (unsigned long)done_bytes[1]);
	EXPECT(done_tokens[2] == 6 && done_bytes[2] == 6 * B, "refill 2 done: %lu tokens %lu bytes",
	       (unsigned long)done_tokens[2], (unsigned long)done_bytes[2]);
	for (k = 0; k < NB; k++) {
		EXPECT(rd_bytes[1][k] == 8 * B / NB, "refill 1 buffer %d: %lu bytes", k,
		       (unsigned long)rd_bytes[1][k]);
		EXPECT(rd_bytes[2][k] == 6 * B / NB, "refill 2 buffer %d: %lu bytes", k,
		       (unsigned long)rd_bytes[2][k]);
	}
	EXPECT(bad_bytes == 0, "%d refilled bytes differ from the reference", bad_bytes);
	printf("shard scenario: %s\n", expect_fails ? "FAILED" : "every answer and every refilled byte as expected");
	return expect_fails ? 1 : 0;
}

int
main(int argc, char **argv)
{
	iso = proto_ref_isolation_id("scenario", 8);
	if (argc == 4 && strcmp(argv[1], "gen") == 0 && strcmp(argv[3], "--mix-bad") == 0) {
		mix_bad = 1;
		argc = 3;
	}
	if (argc == 3 && (strcmp(argv[1], "gen") == 0 || strcmp(argv[1], "gen-space") == 0 ||
			  strcmp(argv[1], "gen-restart") == 0 || strcmp(argv[1], "gen-ahead") == 0 ||
			  strcmp(argv[1], "gen-reevict") == 0 || strcmp(argv[1], "gen-notier") == 0 ||
			  strcmp(argv[1], "gen-l2hostile") == 0 || strcmp(argv[1], "gen-l2hello") == 0 ||
			  strcmp(argv[1], "gen-l2uncov") == 0 ||
			  strcmp(argv[1], "gen-busy") == 0 || strcmp(argv[1], "gen-early") == 0)) {
		if (frames_pcap_open(&out, argv[2], 1, "shard_scenario") != 0)
			return 2;
		if (strcmp(argv[1], "gen") == 0)
			gen();
		else if (strcmp(argv[1], "gen-space") == 0)
			gen_space();
		else if (strcmp(argv[1], "gen-ahead") == 0)
			gen_ahead();
		else if (strcmp(argv[1], "gen-reevict") == 0)
			gen_reevict();
		else if (strcmp(argv[1], "gen-notier") == 0)
			gen_notier();
		else if (strcmp(argv[1], "gen-l2hostile") == 0)
			gen_l2hostile();
		else if (strcmp(argv[1], "gen-l2hello") == 0)
			gen_l2hello();
		else if (strcmp(argv[1], "gen-l2uncov") == 0)
			gen_l2uncov();
		else if (strcmp(argv[1], "gen-busy") == 0)
			gen_busy();
		else if (strcmp(argv[1], "gen-early") == 0)
			gen_early();
		else
			gen_restart();
		frames_pcap_close(&out);
		if (mix_bad)
			printf("bad frames: %u\n", nbad);
		return 0;
	}
	if (argc >= 3 && strcmp(argv[1], "check") == 0)
		return check(argv + 2, argc - 2);
	if (argc >= 3 && strcmp(argv[1], "check-restart") == 0) {
		restart_mode = 1;
		return check(argv + 2, argc - 2);
	}
	if (argc >= 3 && strcmp(argv[1], "check-ahead") == 0)
		return check_ahead(argv + 2, argc - 2);
	if (argc >= 3 && strcmp(argv[1], "check-reevict") == 0)
		return check_reevict(argv + 2, argc - 2);
	if (argc >= 3 && strcmp(argv[1], "check-notier") == 0)
		return check_notier(argv + 2, argc - 2);
	if (argc >= 3 && strcmp(argv[1], "check-l2hostile") == 0)
		return check_l2hostile(argv + 2, argc - 2);
	if (argc >= 3 && strcmp(argv[1], "check-l2hello") == 0)
		return check_l2hello(argv + 2, argc - 2);
	if (argc >= 3 && strcmp(argv[1], "check-l2uncov") == 0)
		return check_l2uncov(argv + 2, argc - 2);
	if (argc >= 3 && strcmp(argv[1], "check-busy") == 0)
		return check_busy(argv + 2, argc - 2);
	if (argc >= 3 && strcmp(argv[1], "check-early") == 0)
		return check_early(argv + 2, argc - 2);
	if (argc >= 3 && strcmp(argv[1], "check-backoff") == 0)
		return check_backoff(argv + 2, argc - 2);
	if (argc >= 3 && strcmp(argv[1], "check-space") == 0) {
		space_mode = 1;
		return check(argv + 2, argc - 2);
	}
	fprintf(stderr, "usage: shard_scenario gen FILE.pcap [--mix-bad] | "
			"gen-space|gen-restart|gen-ahead|gen-reevict|gen-notier|gen-l2hostile|gen-l2hello|gen-l2uncov|gen-busy|gen-early FILE.pcap | "
			"check|check-space|check-restart|check-ahead|check-reevict|check-notier|\n"
			"check-l2hostile|check-l2hello|check-l2uncov|check-backoff|check-busy|check-early "
			"FILE.pcap...\n");
	return 2;
}
