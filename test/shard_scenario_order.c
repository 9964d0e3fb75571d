/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * shard_scenario's scenarios of the refill queue's order (shard_scenario.h):
 *
 *   gen-ahead / check-ahead: REFILLs that may and may not run before a
 *     DELETE waiting for its batch (gen_ahead);
 *   gen-reevict / check-reevict: REFILLs against prompts deleted and
 *     evicted again, before and after the batch that evicts them again
 *     completes (gen_reevict).
 *
 * Both run with test/data/shard-slow-batch.cfg (a batch timeout of one
 * second), with and without a refill lcore.
 */
#include <pcap/pcap.h>
#include <stdio.h>
#include <string.h>

#include "expect.h"
#include "shard_scenario.h"

/*
 * A DELETE waits for its batch; REFILLs behind it. Batch 1 stores A 0..3
 * and B 0..3; batch 2 stores C 0, whose data never comes, so batch 2
 * completes only at the batch timeout (TOKEN_LOST C 0). Then, in order: a
 * DELETE of B 2..3 naming batch 2 (waits for it), a REFILL (id 1) of A 0..3
 * (needs batch 1 only and reads no prompt the DELETE names: runs ahead of
 * it, before the batch timeout), a REFILL (id 2) of B 0..1 (reads B: waits
 * for the DELETE) and a REFILL (id 3) of A 0..3 naming batch 2 (waits for
 * it, though it reads no prompt the DELETE names). Last, a DELETE of A 2..3
 * and a REFILL (id 4) of A 0..3 right behind it: run in order, it finds A
 * cut and fails (the refill lcore hands DELETEs to the ingest lcore, and a
 * REFILL must wait until those before it are applied).
 */
void
gen_ahead(void)
{
	uint8_t buf[PROTO_PAYLOAD_MAX];
	struct proto_builder b;
	uint64_t p1[8] = {A_ID, A_ID, A_ID, A_ID, B_ID, B_ID, B_ID, B_ID}, pc[1] = {C_ID};
	uint32_t t1[8] = {0, 1, 2, 3, 0, 1, 2, 3}, tc[1] = {0};
	struct proto_delete d = {B_ID, 2, 2, 3, 0};
	struct proto_refill_req rq = {.refill_id = 2, .evict_count = 1, .sequence_id = 9,
				      .cache_idx = 0, .cache_id = 0};
	struct proto_refill_chunk ch = {B_ID, 0, 2};

	begin(&b, buf, PROTO_T_HELLO, 0);
	send_payload(buf, proto_build_end(&b), PROTO_PORT_CTRL_DEFAULT);
	evict(1, 1, p1, t1, 8);
	data(1, p1, t1, 8, 0, 8 * B);
	evict(2, 2, pc, tc, 1);
	begin(&b, buf, PROTO_T_DELETE, 3);
	proto_build_delete(&b, &d);
	send_payload(buf, proto_build_end(&b), PROTO_PORT_CTRL_DEFAULT);
	refill_a(4, 1, 1, 4);
	begin(&b, buf, PROTO_T_REFILL, 5);
	proto_build_refill_req(&b, &rq);
	proto_build_refill_chunk(&b, &ch);
	send_payload(buf, proto_build_end(&b), PROTO_PORT_CTRL_DEFAULT);
	refill_a(6, 3, 2, 4);
	d = (struct proto_delete){A_ID, 2, 2, 3, 0};
	begin(&b, buf, PROTO_T_DELETE, 7);
	proto_build_delete(&b, &d);
	send_payload(buf, proto_build_end(&b), PROTO_PORT_CTRL_DEFAULT);
	refill_a(8, 4, 2, 4);
}

/*
 * What the shard sent for gen_ahead (one capture per TX queue): every refill
 * whole and right, refill 4 failed with nothing sent; with one capture
 * (one TX queue, so the order of sending), refill 1 done and every message
 * (seq 6) acknowledged before the TOKEN_LOST that ends batch 2, refills 2
 * and 3 done after it.
 */
int
check_ahead(char **files, int nfiles)
{
	static const struct wafer_place at = {.bytes_per_token = B};
	static struct proto_msg m;
	struct wafer_refill wr[4];
	uint64_t hash[2][4];
	long at_done[5] = {-1, -1, -1, -1, -1}, at_lost = -1, at_ack6 = -1, n = 0;
	unsigned int status4 = 0;
	struct captures cap = {.files = files, .n = nfiles};
	const uint8_t *d;
	int k, lost = 0;

	for (k = 0; k < 4; k++) {
		hash[0][k] = href(A_ID, (uint32_t)k);
		hash[1][k] = href(B_ID, (uint32_t)k);
	}
	wafer_refill_init(&wr[1], &at, NB, 1, hash[0], 4);
	wafer_refill_init(&wr[2], &at, NB, 2, hash[1], 2);
	wafer_refill_init(&wr[3], &at, NB, 3, hash[0], 4);
	while ((d = captures_next(&cap, &m)) != NULL) {
		unsigned int i;

		n++;
		if (m.hdr.type == PROTO_T_ACK && m.u.ack.cum_seq >= 6 && at_ack6 < 0)
			at_ack6 = n;
		if (m.hdr.type == PROTO_T_TOKEN_LOST) {
			for (i = 0; i < m.hdr.count; i++) {
				struct proto_lost l;

				proto_get_lost(&m, i, &l);
				lost++;
				EXPECT(l.prompt_id == C_ID && l.token_idx == 0, "TOKEN_LOST of %lx token %u",
				       (unsigned long)l.prompt_id, l.token_idx);
				at_lost = n;
			}
		} else if (m.hdr.type == PROTO_T_REFILL_DONE) {
			for (i = 0; i < m.hdr.count; i++) {
				struct proto_refill_done r;

				proto_get_refill_done(&m, i, &r);
				EXPECT(r.refill_id >= 1 && r.refill_id <= 4 && (r.status == 0) == (r.refill_id < 4),
				       "REFILL_DONE of refill %lu, status %u", (unsigned long)r.refill_id,
				       r.status);
				if (r.refill_id >= 1 && r.refill_id <= 4)
					at_done[r.refill_id] = n;
				if (r.refill_id == 4)
					status4 = r.status;
			}
		} else if (m.hdr.type == PROTO_T_REFILL_DATA) {
			const struct proto_refill_data_hdr *h = &m.u.refill_data;

			EXPECT(h->refill_id >= 1 && h->refill_id <= 3 && h->buffer_id < NB,
			       "REFILL_DATA of refill %lu", (unsigned long)h->refill_id);
			if (h->refill_id >= 1 && h->refill_id <= 3 && h->buffer_id < NB)
				wafer_refill_data(&wr[h->refill_id], h, d + m.data_off, m.data_len);
		}
	}
	if (cap.bad)
		return 2;
	for (k = 1; k <= 3; k++)
		EXPECT(wafer_refill_whole(&wr[k]) && wr[k].bad_bytes == 0 && wr[k].bad_frames == 0,
		       "refill %d: whole %d, %lu bad bytes, %lu bad frames", k,
		       wafer_refill_whole(&wr[k]), (unsigned long)wr[k].bad_bytes,
		       (unsigned long)wr[k].bad_frames);
	EXPECT(lost == 1, "%d TOKEN_LOST records, want 1 (C 0)", lost);
	EXPECT(at_done[1] > 0 && at_done[2] > 0 && at_done[3] > 0 && at_done[4] > 0,
	       "REFILL_DONE of refills 1, 2, 3, 4 at frames %ld, %ld, %ld, %ld", at_done[1],
	       at_done[2], at_done[3], at_done[4]);
	EXPECT(status4 != 0, "refill 4 of A 0..3 ran before the DELETE of A 2..3 ahead of it");
	if (nfiles == 1) {
		EXPECT(at_done[1] < at_lost, "refill 1 waited for batch 2 (done at frame %ld, batch 2 at %ld)",
		       at_done[1], at_lost);
		EXPECT(at_done[2] > at_lost, "refill 2 ran before the DELETE of B (done at frame %ld, "
		       "batch 2 at %ld)", at_done[2], at_lost);
		EXPECT(at_done[3] > at_lost, "refill 3 ran before its batch 2 (done at frame %ld, "
		       "batch 2 at %ld)", at_done[3], at_lost);
		/* Queued is acknowledged: the DELETE and the REFILLs waiting at
		 * their gates are not left to look lost until batch 2 ends. */
		EXPECT(at_ack6 > 0 && at_ack6 < at_lost,
		       "no ACK of seq 6 before batch 2 ended (first at frame %ld, batch 2 at %ld)",
		       at_ack6, at_lost);
	}
	printf("shard run-ahead scenario: %s\n",
	       expect_fails ? "FAILED" : "the refill of A ran ahead of the waiting DELETE; B's and the one waiting for its batch did not; the one behind A's DELETE found A cut");
	return expect_fails ? 1 : 0;
}

/* ---- Deleted and evicted again ------------------------------------------ */

#define D_ID 0xD000000000000004ULL
#define E_ID 0xE000000000000005ULL
#define F_ID 0xF000000000000006ULL

/* One REFILL (id @p id, waiting for batch @p ec) of prompt @p pr tokens [a, a + n). */
static void
refill_x(uint64_t seq, uint64_t id, uint64_t ec, uint64_t pr, uint32_t a, uint32_t n)
{
	uint8_t buf[PROTO_PAYLOAD_MAX];
	struct proto_builder b;
	struct proto_refill_req rq = {.refill_id = id, .evict_count = ec, .sequence_id = 9,
				      .cache_idx = 0, .cache_id = 0};
	struct proto_refill_chunk ch = {pr, a, n};

	begin(&b, buf, PROTO_T_REFILL, seq);
	proto_build_refill_req(&b, &rq);
	proto_build_refill_chunk(&b, &ch);
	send_payload(buf, proto_build_end(&b), PROTO_PORT_CTRL_DEFAULT);
}

/* One DELETE message of @p n records. */
static void
delete_msg(uint64_t seq, const struct proto_delete *d, unsigned int n)
{
	uint8_t buf[PROTO_PAYLOAD_MAX];
	struct proto_builder b;
	unsigned int i;

	begin(&b, buf, PROTO_T_DELETE, seq);
	for (i = 0; i < n; i++)
		proto_build_delete(&b, &d[i]);
	send_payload(buf, proto_build_end(&b), PROTO_PORT_CTRL_DEFAULT);
}

/* What each refill of gen_reevict must get: a code, or tokens of these generations. */
static const struct reevict_want {
	uint64_t prompt;
	uint32_t start, n;
	uint16_t status;
	unsigned int gen[4];
	const char *why;
} rw[] = {
	[1] = {A_ID, 0, 2, PROTO_E_UNKNOWN_PROMPT, {0}, "A, deleted, only in open batch 2"},
	[2] = {B_ID, 0, 4, PROTO_E_RANGE, {0}, "B 2..3, deleted, again only in open batch 2"},
	[3] = {B_ID, 0, 2, 0, {0, 0}, "B 0..1, untouched"},
	[4] = {C_ID, 0, 4, 0, {0, 0, 0, 0}, "C, its overwrite of 0 still open"},
	[5] = {D_ID, 0, 6, PROTO_E_RANGE, {0}, "D 4..5 only in open batch 2"},
	[6] = {D_ID, 0, 3, 0, {0, 0, 0}, "D 0..2, after the DELETE of 3..5 while batch 2 was open"},
	[7] = {F_ID, 0, 2, PROTO_E_UNKNOWN_PROMPT, {0}, "F, deleted, only in open batch 3"},
	[8] = {F_ID, 0, 2, 0, {1, 1}, "F, evicted again, once batch 3 completed"},
	[9] = {B_ID, 0, 2, 0, {1, 0}, "B 0 overwritten by batch 3"},
	[10] = {E_ID, 0, 2, PROTO_E_UNKNOWN_PROMPT, {0}, "E, deleted while batch 3 was open"},
	[11] = {A_ID, 0, 2, PROTO_E_UNKNOWN_PROMPT, {0}, "A, batch 2 lost"},
	[12] = {C_ID, 0, 4, PROTO_E_UNKNOWN_PROMPT, {0}, "C, its overwrite lost in batch 2"},
};
#define NRW (sizeof(rw) / sizeof(rw[0]))

/*
 * A refill reads what complete batches left; DELETE and
 * EVICT act on what was accepted. Batch 1 stores A, B, C, D and F 0..3.
 * A DELETE (waiting for batch 1) removes A and F whole and B 2..3; batch 2
 * evicts A 0..1 and B 2..3 again, overwrites C 0 and grows D by 4..5, and
 * its data never comes (lost at the batch timeout, 1 s). Before it is lost:
 * refills 1-6 (batch 1 only) and a DELETE of D 3..5 (counting batch 2's
 * growth). Batch 3 evicts F 0..1 again, overwrites B 0 and creates E, with
 * its data; it completes right after batch 2. Refill 7 (batch 1) runs
 * before; E is deleted while batch 3 is open; refills 8-12 wait for batches
 * 2 or 3. Refills 1 and 7 were answered RANGE before the fix.
 */
void
gen_reevict(void)
{
	uint8_t buf[PROTO_PAYLOAD_MAX];
	struct proto_builder b;
	uint64_t p1[20];
	uint32_t t1[20];
	const uint64_t p2[7] = {A_ID, A_ID, B_ID, B_ID, C_ID, D_ID, D_ID};
	const uint32_t t2[7] = {0, 1, 2, 3, 0, 4, 5};
	const uint64_t p3[5] = {F_ID, F_ID, B_ID, E_ID, E_ID};
	const uint32_t t3[5] = {0, 1, 0, 0, 1};
	const struct proto_delete d1[3] = {{A_ID, 1, 0, 3, 0}, {F_ID, 1, 0, 3, 0}, {B_ID, 1, 2, 3, 0}};
	const struct proto_delete dd = {D_ID, 1, 3, 5, 0}, de = {E_ID, 1, 0, 1, 0};
	const uint64_t ids[5] = {A_ID, B_ID, C_ID, D_ID, F_ID};
	unsigned int i;

	for (i = 0; i < 20; i++) {
		p1[i] = ids[i / 4];
		t1[i] = i % 4;
	}
	begin(&b, buf, PROTO_T_HELLO, 0);
	send_payload(buf, proto_build_end(&b), PROTO_PORT_CTRL_DEFAULT);
	evict(1, 1, p1, t1, 20);
	data(1, p1, t1, 20, 0, 20 * B);
	delete_msg(2, d1, 3);
	evict(3, 2, p2, t2, 7); /* no data */
	for (i = 1; i <= 5; i++)
		refill_x(3 + i, i, 1, rw[i].prompt, rw[i].start, rw[i].n);
	delete_msg(9, &dd, 1);
	refill_x(10, 6, 1, rw[6].prompt, rw[6].start, rw[6].n);
	evict(11, 3, p3, t3, 5);
	sc_gen = 1;
	data(3, p3, t3, 5, 0, 5 * B);
	sc_gen = 0;
	refill_x(12, 7, 1, rw[7].prompt, rw[7].start, rw[7].n);
	delete_msg(13, &de, 1);
	for (i = 8; i <= 12; i++)
		refill_x(6 + i, i, i <= 10 ? 3 : 2, rw[i].prompt, rw[i].start, rw[i].n);
}

/*
 * What the shard sent for gen_reevict: each refill's code, or every byte of
 * the generation it must read; no ERROR; TOKEN_LOST for what batch 2 lost:
 * A 0..1, B 2..3, C 0..3 (its overwrite of 0 lost cuts it there) and
 * nothing of D (its 4..5 were deleted before the loss).
 */
int
check_reevict(char **files, int nfiles)
{
	static const struct wafer_place at = {.bytes_per_token = B};
	static struct proto_msg m;
	static uint64_t hash[NRW][4]; /* the checkers keep a pointer to them */
	struct wafer_refill wr[NRW];
	struct captures cap = {.files = files, .n = nfiles};
	int done[NRW] = {0}, status[NRW], errors = 0, lost_ok = 0, lost_other = 0;
	uint64_t max_ack = 0;
	const uint8_t *d;
	unsigned int k, t;

	for (k = 1; k < NRW; k++) {
		status[k] = -1;
		for (t = 0; t < rw[k].n && rw[k].status == 0; t++)
			hash[k][t] = href_gen(rw[k].prompt, rw[k].start + t, rw[k].gen[t]);
		wafer_refill_init(&wr[k], &at, NB, k, hash[k], rw[k].status == 0 ? rw[k].n : 0);
	}
	while ((d = captures_next(&cap, &m)) != NULL) {
		unsigned int i;

		if (m.hdr.type == PROTO_T_ACK && m.u.ack.cum_seq > max_ack)
			max_ack = m.u.ack.cum_seq;
		if (m.hdr.type == PROTO_T_ERROR)
			errors += m.hdr.count;
		if (m.hdr.type == PROTO_T_TOKEN_LOST) {
			for (i = 0; i < m.hdr.count; i++) {
				struct proto_lost l;

				uint32_t tk;

				proto_get_lost(&m, i, &l);
				/* Version 2: a range; each of its tokens counted. */
				for (tk = l.token_idx; tk < l.token_idx + l.count; tk++) {
					if ((l.prompt_id == A_ID && tk <= 1) ||
					    (l.prompt_id == B_ID && tk >= 2 && tk <= 3) ||
					    (l.prompt_id == C_ID && tk <= 3))
						lost_ok++;
					else
						lost_other++;
				}
			}
		} else if (m.hdr.type == PROTO_T_REFILL_DONE) {
			for (i = 0; i < m.hdr.count; i++) {
				struct proto_refill_done r;

				proto_get_refill_done(&m, i, &r);
				EXPECT(r.refill_id >= 1 && r.refill_id < NRW, "REFILL_DONE of refill %lu",
				       (unsigned long)r.refill_id);
				if (r.refill_id < 1 || r.refill_id >= NRW)
					continue;
				done[r.refill_id]++;
				status[r.refill_id] = r.status;
			}
		} else if (m.hdr.type == PROTO_T_REFILL_DATA) {
			const struct proto_refill_data_hdr *h = &m.u.refill_data;

			EXPECT(h->refill_id >= 1 && h->refill_id < NRW && rw[h->refill_id].status == 0 &&
				       h->buffer_id < NB,
			       "REFILL_DATA of refill %lu, which must send none",
			       (unsigned long)h->refill_id);
			if (h->refill_id >= 1 && h->refill_id < NRW && h->buffer_id < NB)
				wafer_refill_data(&wr[h->refill_id], h, d + m.data_off, m.data_len);
		}
	}
	if (cap.bad)
		return 2;
	for (k = 1; k < NRW; k++) {
		EXPECT(done[k] == 1 && status[k] == rw[k].status,
		       "refill %u (%s): %d answers, status %d, want %u", k, rw[k].why, done[k], status[k],
		       rw[k].status);
		if (rw[k].status == 0)
			EXPECT(wafer_refill_whole(&wr[k]) && wr[k].bad_bytes == 0 && wr[k].bad_frames == 0,
			       "refill %u (%s): whole %d, %lu bad bytes, %lu bad frames", k, rw[k].why,
			       wafer_refill_whole(&wr[k]), (unsigned long)wr[k].bad_bytes,
			       (unsigned long)wr[k].bad_frames);
	}
	EXPECT(max_ack == 18, "cumulative ACK %lu, want 18", (unsigned long)max_ack);
	EXPECT(errors == 0, "%d ERROR records", errors);
	EXPECT(lost_ok == 8 && lost_other == 0,
	       "TOKEN_LOST: %d of A 0..1, B 2..3, C 0..3 (want 8), %d others", lost_ok, lost_other);
	printf("shard re-evict scenario: %s\n",
	       expect_fails ? "FAILED" : "every refill saw what complete batches left");
	return expect_fails ? 1 : 0;
}


/* ---- A shard with no second tier ----------------------------------------- */

/*
 * PROTOCOL.md section 9, "Without a second tier": batch 1 stores A 0..3;
 * an L2_DOWN of two columns (seq 2), an L2_UP as batch 2 of A 4..5 (seq 3)
 * and an L2_DELETE (seq 4) are each refused with NO_TIER, one record each
 * (the UP whole, its tokens lost); each takes its seq, so a REFILL of A
 * 0..3 after batch 2 (seq 5) is whole, and batch 3 (B 0..1, seq 6) and a
 * REFILL of B 0..1 (seq 7) work as ever.
 */
void
gen_notier(void)
{
	uint8_t buf[PROTO_PAYLOAD_MAX];
	struct proto_builder b;
	const uint64_t pa[4] = {A_ID, A_ID, A_ID, A_ID}, pb[2] = {B_ID, B_ID};
	const uint32_t t1[4] = {0, 1, 2, 3}, t3[2] = {0, 1};
	struct proto_l2col c = {.key = 0x1111, .parent = 0x2222, .isolation_id = 0x3333,
				.prompt_id = A_ID, .evict_count = 1, .start_token_idx = 0,
				.num_tokens = 2, .cache_id = 0};
	struct proto_evict_hdr eh = {.batch_no = 2, .num_caches = 1, .g = 2, .ncols = 1};
	struct proto_l2del d = {0x1111, 0x3333, 0, 0};
	unsigned int k;

	begin(&b, buf, PROTO_T_HELLO, 0);
	send_payload(buf, proto_build_end(&b), PROTO_PORT_CTRL_DEFAULT);
	evict(1, 1, pa, t1, 4);
	data(1, pa, t1, 4, 0, 4 * B);
	begin(&b, buf, PROTO_T_L2_DOWN, 2);
	proto_build_l2_down(&b, &c);
	c.key = 0x1112;
	c.start_token_idx = 2;
	proto_build_l2_down(&b, &c);
	send_payload(buf, proto_build_end(&b), PROTO_PORT_CTRL_DEFAULT);
	begin(&b, buf, PROTO_T_L2_UP, 3);
	proto_build_l2_up_hdr(&b, &eh);
	for (k = 0; k < 2; k++) {
		struct proto_evict_entry e = {A_ID, 4 + k, 1};

		proto_build_l2_up_entry(&b, &e);
	}
	c.start_token_idx = 4;
	proto_build_l2_up_col(&b, &c);
	send_payload(buf, proto_build_end(&b), PROTO_PORT_CTRL_DEFAULT);
	begin(&b, buf, PROTO_T_L2_DELETE, 4);
	proto_build_l2_delete(&b, &d);
	send_payload(buf, proto_build_end(&b), PROTO_PORT_CTRL_DEFAULT);
	refill_a(5, 1, 2, 4);
	evict(6, 3, pb, t3, 2);
	data(3, pb, t3, 2, 0, 2 * B);
	refill_x(7, 2, 3, B_ID, 0, 2);
}

int
check_notier(char **files, int nfiles)
{
	static const struct wafer_place at = {.bytes_per_token = B};
	static struct proto_msg m;
	static uint64_t hash[4], hashb[2];
	struct wafer_refill wr[3];
	struct captures cap = {.files = files, .n = nfiles};
	int notier = 0, other = 0, lost = 0, done[3] = {0};
	uint64_t max_ack = 0;
	const uint8_t *d;
	unsigned int k;

	for (k = 0; k < 4; k++)
		hash[k] = href(A_ID, k);
	for (k = 0; k < 2; k++)
		hashb[k] = href(B_ID, k);
	wafer_refill_init(&wr[1], &at, NB, 1, hash, 4);
	wafer_refill_init(&wr[2], &at, NB, 2, hashb, 2);
	while ((d = captures_next(&cap, &m)) != NULL) {
		unsigned int i;

		if (m.hdr.type == PROTO_T_ACK && m.u.ack.cum_seq > max_ack)
			max_ack = m.u.ack.cum_seq;
		for (i = 0; m.hdr.type == PROTO_T_ERROR && i < m.hdr.count; i++) {
			struct proto_error e;

			proto_get_error(&m, i, &e);
			if (e.code == PROTO_E_NO_TIER && e.seq >= 2 && e.seq <= 4)
				notier++;
			else
				other++;
		}
		for (i = 0; m.hdr.type == PROTO_T_TOKEN_LOST && i < m.hdr.count; i++) {
			struct proto_lost l;

			proto_get_lost(&m, i, &l);
			/* Version 2: one range, A 4..5. */
			if (l.prompt_id == A_ID && l.token_idx == 4)
				lost += (int)(l.count < 2 ? l.count : 2);
			else if (l.prompt_id == A_ID && l.token_idx == 5)
				lost += 1;
		}
		for (i = 0; m.hdr.type == PROTO_T_REFILL_DONE && i < m.hdr.count; i++) {
			struct proto_refill_done r;

			proto_get_refill_done(&m, i, &r);
			EXPECT(r.refill_id >= 1 && r.refill_id <= 2 && r.status == 0,
			       "REFILL_DONE of refill %lu: status %u", (unsigned long)r.refill_id, r.status);
			if (r.refill_id >= 1 && r.refill_id <= 2)
				done[r.refill_id]++;
		}
		if (m.hdr.type == PROTO_T_REFILL_DATA) {
			const struct proto_refill_data_hdr *h = &m.u.refill_data;

			if (h->refill_id >= 1 && h->refill_id <= 2 && h->buffer_id < NB)
				wafer_refill_data(&wr[h->refill_id], h, d + m.data_off, m.data_len);
		}
	}
	if (cap.bad)
		return 2;
	EXPECT(notier == 4, "%d NO_TIER records for seq 2..4, want 4 (two DOWN records, the UP, "
	       "the DELETE)", notier);
	EXPECT(other == 0, "%d other ERROR records", other);
	EXPECT(lost == 2, "TOKEN_LOST of A 4..5 (the refused UP's tokens): %d", lost);
	EXPECT(max_ack == 7, "cumulative ACK %lu, want 7: every second-tier message took its seq",
	       (unsigned long)max_ack);
	for (k = 1; k <= 2; k++)
		EXPECT(done[k] == 1 && wafer_refill_whole(&wr[k]) && wr[k].bad_bytes == 0,
		       "refill %u: %d answers, whole %d, %lu bad bytes", k, done[k],
		       wafer_refill_whole(&wr[k]), (unsigned long)wr[k].bad_bytes);
	printf("shard without a second tier: %s\n",
	       expect_fails ? "FAILED" : "each L2 message refused NO_TIER, its seq taken, the rest as ever");
	return expect_fails ? 1 : 0;
}
