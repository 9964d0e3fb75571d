/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * shard_scenario's second-tier scenarios (PROTOCOL.md section 9), for a
 * shard with a tier (test/data/shard-l2.cfg: one cache of 64 bytes a token
 * in 2 buffers, columns of 2 tokens, room for 8 columns).
 *
 * gen-l2hostile: what a driver that lies, or a hostile sender on the
 * fabric, may send a shard's second tier, each answered as the protocol
 * says and none of it able to hurt what the shard holds:
 *   seq 1  EVICT batch 1: A 0..3 (its data whole);
 *   seq 2  L2_DOWN: K1 = A 0..1, K2 = A 2..3;
 *   seq 3  L2_DOWN: K1 again (a replacement: one column of K1 after it);
 *   seq 4  L2_DELETE of K2 in cache 9: ERROR BAD_CACHE (not L2_FAILED);
 *   seq 5  L2_DELETE of key 0: ERROR MALFORMED;
 *   seq 6  L2_DOWN of key 0: L2_DONE MALFORMED;
 *   seq 7  L2_UP as batch 2: 500 entries, every one naming token 0 of B,
 *          and K1 as B's column 0..1 (a token may repeat in a batch: each
 *          entry gets the column's token 0; this wrote past the shard's
 *          request object and crashed it);
 *   seq 8  REFILL of B 0..0 after batch 2: A's token 0, byte for byte.
 * The shard then holds K1 once and K2 (scripts/test-shard-pcap.sh starts a
 * second shard on the same file and reads "2 columns kept").
 */
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "expect.h"
#include "shard_scenario.h"

#define L2_K1 0x5eed000000000001ULL
#define L2_K2 0x5eed000000000002ULL
#define L2_ISO 0x0000000000000777ULL
#define L2_REPEAT 500 /* entries naming one token: past the 2 x column + 32 pairs of room */

static void
l2_down(uint64_t seq, const struct proto_l2col *c, unsigned int n)
{
	uint8_t buf[PROTO_PAYLOAD_MAX];
	struct proto_builder b;
	unsigned int i;

	begin(&b, buf, PROTO_T_L2_DOWN, seq);
	for (i = 0; i < n; i++)
		proto_build_l2_down(&b, &c[i]);
	send_payload(buf, proto_build_end(&b), PROTO_PORT_CTRL_DEFAULT);
}

static void
l2_delete(uint64_t seq, uint64_t key, uint16_t cache)
{
	uint8_t buf[PROTO_PAYLOAD_MAX];
	struct proto_builder b;
	struct proto_l2del d = {key, L2_ISO, 0, cache};

	begin(&b, buf, PROTO_T_L2_DELETE, seq);
	proto_build_l2_delete(&b, &d);
	send_payload(buf, proto_build_end(&b), PROTO_PORT_CTRL_DEFAULT);
}

/* K1 = A 0..1 and K2 = A 2..3 of batch 1, as an L2_DOWN names them. */
static const struct proto_l2col cols[2] = {
	{.key = L2_K1, .parent = L2_ISO, .isolation_id = L2_ISO, .prompt_id = A_ID,
	 .evict_count = 1, .start_token_idx = 0, .num_tokens = 2, .cache_id = 0},
	{.key = L2_K2, .parent = L2_K1, .isolation_id = L2_ISO, .prompt_id = A_ID,
	 .evict_count = 1, .start_token_idx = 2, .num_tokens = 2, .cache_id = 0}};

/* What both scenarios begin with: the HELLO, then batch 1 (A 0..3) whole. */
static void
l2_start(void)
{
	uint8_t buf[PROTO_PAYLOAD_MAX];
	struct proto_builder b;
	const uint64_t pa[4] = {A_ID, A_ID, A_ID, A_ID};
	const uint32_t t1[4] = {0, 1, 2, 3};

	begin(&b, buf, PROTO_T_HELLO, 0);
	send_payload(buf, proto_build_end(&b), PROTO_PORT_CTRL_DEFAULT);
	evict(1, 1, pa, t1, 4);
	data(1, pa, t1, 4, 0, 4 * B);
}

void
gen_l2hostile(void)
{
	uint8_t buf[PROTO_PAYLOAD_MAX];
	struct proto_builder b;
	struct proto_l2col zero = cols[0];
	struct proto_evict_hdr eh = {.batch_no = 2, .num_caches = 1, .g = L2_REPEAT, .ncols = 1};
	struct proto_refill_req rq = {.refill_id = 1, .evict_count = 2, .sequence_id = 9,
				      .cache_idx = 0, .cache_id = 0};
	struct proto_refill_chunk ch = {B_ID, 0, 1};
	struct proto_l2col up = cols[0];
	unsigned int k;

	l2_start();
	l2_down(2, cols, 2);
	l2_down(3, cols, 1);
	l2_delete(4, L2_K2, 9);
	l2_delete(5, 0, 0);
	zero.key = 0;
	l2_down(6, &zero, 1);
	begin(&b, buf, PROTO_T_L2_UP, 7);
	proto_build_l2_up_hdr(&b, &eh);
	for (k = 0; k < L2_REPEAT; k++) {
		struct proto_evict_entry e = {B_ID, 0, 1};

		proto_build_l2_up_entry(&b, &e);
	}
	up.prompt_id = B_ID;
	up.evict_count = 0;
	proto_build_l2_up_col(&b, &up);
	send_payload(buf, proto_build_end(&b), PROTO_PORT_CTRL_DEFAULT);
	begin(&b, buf, PROTO_T_REFILL, 8);
	proto_build_refill_req(&b, &rq);
	proto_build_refill_chunk(&b, &ch);
	send_payload(buf, proto_build_end(&b), PROTO_PORT_CTRL_DEFAULT);
}

int
check_l2hostile(char **files, int nfiles)
{
	static const struct wafer_place at = {.bytes_per_token = B};
	static struct proto_msg m;
	struct wafer_refill wr;
	struct captures cap = {.files = files, .n = nfiles};
	uint64_t hash[1] = {href(A_ID, 0)};
	int bad_cache = 0, malformed = 0, other = 0, lost = 0, done = 0, down_ok = 0,
	    down_malformed = 0, done_other = 0;
	const uint8_t *d;

	wafer_refill_init(&wr, &at, NB, 1, hash, 1);
	while ((d = captures_next(&cap, &m)) != NULL) {
		unsigned int i;

		for (i = 0; m.hdr.type == PROTO_T_ERROR && i < m.hdr.count; i++) {
			struct proto_error e;

			proto_get_error(&m, i, &e);
			if (e.code == PROTO_E_BAD_CACHE && e.seq == 4)
				bad_cache++;
			else if (e.code == PROTO_E_MALFORMED && e.seq == 5)
				malformed++;
			else
				other++;
		}
		for (i = 0; m.hdr.type == PROTO_T_L2_DONE && i < m.hdr.count; i++) {
			struct proto_l2done l;

			proto_get_l2_done(&m, i, &l);
			if (l.op == 1 && l.status == 0 && (l.key == L2_K1 || l.key == L2_K2))
				down_ok++;
			else if (l.op == 1 && l.key == 0 && l.status == PROTO_E_MALFORMED)
				down_malformed++;
			else
				done_other++;
		}
		lost += m.hdr.type == PROTO_T_TOKEN_LOST ? m.hdr.count : 0;
		for (i = 0; m.hdr.type == PROTO_T_REFILL_DONE && i < m.hdr.count; i++) {
			struct proto_refill_done r;

			proto_get_refill_done(&m, i, &r);
			EXPECT(r.refill_id == 1 && r.status == 0, "REFILL_DONE of refill %lu: status %u",
			       (unsigned long)r.refill_id, r.status);
			done++;
		}
		if (m.hdr.type == PROTO_T_REFILL_DATA && m.u.refill_data.refill_id == 1 &&
		    m.u.refill_data.buffer_id < NB)
			wafer_refill_data(&wr, &m.u.refill_data, d + m.data_off, m.data_len);
	}
	if (cap.bad)
		return 2;
	EXPECT(bad_cache == 1, "ERROR BAD_CACHE for the L2_DELETE of cache 9 (seq 4): %d", bad_cache);
	EXPECT(malformed == 1, "ERROR MALFORMED for the L2_DELETE of key 0 (seq 5): %d", malformed);
	EXPECT(other == 0, "%d other ERROR records (an L2_FAILED sends the operator to the disk)",
	       other);
	EXPECT(down_ok == 3, "L2_DONE OK for K1, K2 and K1 again: %d, want 3", down_ok);
	EXPECT(down_malformed == 1, "L2_DONE MALFORMED for the L2_DOWN of key 0: %d",
	       down_malformed);
	EXPECT(done_other == 0, "%d other L2_DONE records (the L2_UP of a repeated token failed?)",
	       done_other);
	EXPECT(lost == 0, "%d TOKEN_LOST records: batch 2 came up whole", lost);
	EXPECT(done == 1 && wafer_refill_whole(&wr) && wr.bad_bytes == 0,
	       "the refill of B 0 (A's token 0 by way of K1): %d answers, whole %d, %lu bad bytes",
	       done, wafer_refill_whole(&wr), (unsigned long)wr.bad_bytes);
	printf("shard second tier, hostile: %s\n",
	       expect_fails ? "FAILED" : "each record answered by its fault, a repeated token "
					 "served, the replacement one column");
	return expect_fails ? 1 : 0;
}

/*
 * gen-l2hello (HELLO amplification): the driver's HELLO
 * takes control and an L2_DOWN puts K1 and K2 in the tier; then HELLOs of
 * the same epoch from 10.99.0.66, a host that learned the epoch from a
 * STATUS (any stale frame is answered with one) and names another's
 * address as its source. Each would have been answered with the whole
 * inventory, megabytes at a real tier's size: now ignored and counted
 * (hello_foreign). The driver's own repeated HELLO is answered as ever.
 */
void
gen_l2hello(void)
{
	uint8_t buf[PROTO_PAYLOAD_MAX];
	struct proto_builder b;
	unsigned int k;

	l2_start();
	l2_down(2, cols, 2);
	/* The driver again (a lost STATUS): answered, with the inventory. */
	begin(&b, buf, PROTO_T_HELLO, 0);
	send_payload(buf, proto_build_end(&b), PROTO_PORT_CTRL_DEFAULT);
	sc_src_ip = 0x0a630042; /* 10.99.0.66 */
	for (k = 0; k < 5; k++) {
		begin(&b, buf, PROTO_T_HELLO, 0);
		send_payload(buf, proto_build_end(&b), PROTO_PORT_CTRL_DEFAULT);
	}
	sc_src_ip = 0x0a630001;
}

int
check_l2hello(char **files, int nfiles)
{
	static struct proto_msg m;
	struct captures cap = {.files = files, .n = nfiles};
	int inv_driver = 0, inv_other = 0, status_other = 0;
	const uint8_t *d;

	while ((d = captures_next(&cap, &m)) != NULL) {
		bool to_driver = m.addr.dst_ip == 0x0a630001;

		if (m.hdr.type == PROTO_T_L2_INVENTORY) {
			if (to_driver)
				inv_driver++;
			else
				inv_other++;
		}
		if (m.hdr.type == PROTO_T_STATUS && !to_driver)
			status_other++;
	}
	if (cap.bad)
		return 2;
	EXPECT(inv_other == 0, "%d inventory frames to 10.99.0.66 (5 HELLOs of the epoch in force "
	       "from another address)", inv_other);
	EXPECT(status_other == 0, "%d STATUS frames to 10.99.0.66", status_other);
	EXPECT(inv_driver >= 2, "%d inventory frames to the driver, want one per HELLO of its own "
	       "(2)", inv_driver);
	printf("shard second tier, foreign HELLO: %s\n",
	       expect_fails ? "FAILED" : "the inventory only to the driver that took control");
	return expect_fails ? 1 : 0;
}

/*
 * gen-l2uncov: entries of an L2_UP that no accepted column covers, for a
 * shard with a second tier and no shared level (PROTOCOL.md sections 9,
 * 10). They are lost (TOKEN_LOST), never stored: until 2026-12 they were
 * stored as zeros and served as valid.
 *   seq 1  EVICT batch 1: A 0..3 (its data whole);
 *   seq 2  L2_DOWN: K1 = A 0..1;
 *   seq 3  L2_UP as batch 2: B 0..3, and K1 as B's column 0..1 only: B 2..3
 *          named by no column: lost from B 2 (2 tokens);
 *   seq 4  L2_UP as batch 3: C 0..1 and a column of key 0 (L2_DONE op 2
 *          MALFORMED): C lost from 0, the prompt emptied by the loss;
 *   seq 5  SH_DOWN of K1 (no shared level here): ERROR NO_TIER, not an
 *          L2_DONE;
 *   seq 6  REFILL of B 0..1 after batch 3: A's tokens 0..1, byte for byte;
 *   seq 7  REFILL of B 2..3: RANGE (the loss cut B at 2);
 *   seq 8  REFILL of C 0..1: UNKNOWN_PROMPT (a prompt a loss emptied holds
 *          no token: it is not there to a refill, as a prompt only open
 *          batches hold).
 */
void
gen_l2uncov(void)
{
	uint8_t buf[PROTO_PAYLOAD_MAX];
	struct proto_builder b;
	struct proto_evict_hdr eh = {.batch_no = 2, .num_caches = 1, .g = 4, .ncols = 1};
	struct proto_l2col up = cols[0];
	unsigned int k;

	l2_start();
	l2_down(2, cols, 1);
	begin(&b, buf, PROTO_T_L2_UP, 3);
	proto_build_l2_up_hdr(&b, &eh);
	for (k = 0; k < 4; k++) {
		struct proto_evict_entry e = {B_ID, k, 1};

		proto_build_l2_up_entry(&b, &e);
	}
	up.prompt_id = B_ID;
	up.evict_count = 0;
	proto_build_l2_up_col(&b, &up);
	send_payload(buf, proto_build_end(&b), PROTO_PORT_CTRL_DEFAULT);

	eh.batch_no = 3;
	eh.g = 2;
	begin(&b, buf, PROTO_T_L2_UP, 4);
	proto_build_l2_up_hdr(&b, &eh);
	for (k = 0; k < 2; k++) {
		struct proto_evict_entry e = {C_ID, k, 1};

		proto_build_l2_up_entry(&b, &e);
	}
	up.prompt_id = C_ID;
	up.key = 0;
	proto_build_l2_up_col(&b, &up);
	send_payload(buf, proto_build_end(&b), PROTO_PORT_CTRL_DEFAULT);

	{
		struct proto_l2col sc = cols[0];

		sc.object_id = 0x0123456789abcdefull;
		sc.gen_global = 1;
		sc.layout = 7;
		begin(&b, buf, PROTO_T_SH_DOWN, 5);
		proto_build_l2_down(&b, &sc);
		send_payload(buf, proto_build_end(&b), PROTO_PORT_CTRL_DEFAULT);
	}
	for (k = 0; k < 3; k++) {
		struct proto_refill_req rq = {.refill_id = 1 + k, .evict_count = 3, .sequence_id = 9,
					      .cache_idx = 0, .cache_id = 0};
		struct proto_refill_chunk ch = {k == 2 ? C_ID : B_ID, k == 1 ? 2 : 0, 2};

		begin(&b, buf, PROTO_T_REFILL, 6 + k);
		proto_build_refill_req(&b, &rq);
		proto_build_refill_chunk(&b, &ch);
		send_payload(buf, proto_build_end(&b), PROTO_PORT_CTRL_DEFAULT);
	}
}

int
check_l2uncov(char **files, int nfiles)
{
	static const struct wafer_place at = {.bytes_per_token = B};
	static struct proto_msg m;
	struct wafer_refill wr;
	struct captures cap = {.files = files, .n = nfiles};
	uint64_t hash[2] = {href(A_ID, 0), href(A_ID, 1)};
	int lost_b = 0, lost_c = 0, lost_other = 0, malformed = 0, done_other = 0, notier = 0,
	    err_other = 0, status[4] = {-1, -1, -1, -1}, statuses = 0, shared_flag = 0;
	const uint8_t *d;

	wafer_refill_init(&wr, &at, NB, 1, hash, 2);
	while ((d = captures_next(&cap, &m)) != NULL) {
		unsigned int i;

		if (m.hdr.type == PROTO_T_STATUS) {
			statuses++;
			shared_flag += (m.u.status.flags & PROTO_STATUS_F_SHARED) != 0;
		}
		for (i = 0; m.hdr.type == PROTO_T_TOKEN_LOST && i < m.hdr.count; i++) {
			struct proto_lost l;

			proto_get_lost(&m, i, &l);
			if (l.prompt_id == B_ID && l.token_idx == 2 && l.count == 2)
				lost_b++;
			else if (l.prompt_id == C_ID && l.token_idx == 0 && l.count == 2)
				lost_c++;
			else
				lost_other++;
		}
		for (i = 0; m.hdr.type == PROTO_T_L2_DONE && i < m.hdr.count; i++) {
			struct proto_l2done l;

			proto_get_l2_done(&m, i, &l);
			if (l.op == 2 && l.key == 0 && l.status == PROTO_E_MALFORMED)
				malformed++;
			else if (!(l.op == 1 && l.key == L2_K1 && l.status == 0))
				done_other++;
		}
		for (i = 0; m.hdr.type == PROTO_T_ERROR && i < m.hdr.count; i++) {
			struct proto_error e;

			proto_get_error(&m, i, &e);
			if (e.seq == 5 && e.code == PROTO_E_NO_TIER)
				notier++;
			else
				err_other++;
		}
		for (i = 0; m.hdr.type == PROTO_T_REFILL_DONE && i < m.hdr.count; i++) {
			struct proto_refill_done r;

			proto_get_refill_done(&m, i, &r);
			if (r.refill_id >= 1 && r.refill_id <= 3)
				status[r.refill_id] = (int)r.status;
		}
		if (m.hdr.type == PROTO_T_REFILL_DATA && m.u.refill_data.refill_id == 1 &&
		    m.u.refill_data.buffer_id < NB)
			wafer_refill_data(&wr, &m.u.refill_data, d + m.data_off, m.data_len);
	}
	if (cap.bad)
		return 2;
	EXPECT(lost_b == 1, "TOKEN_LOST of B 2..3 (named by no column of batch 2): %d records",
	       lost_b);
	EXPECT(lost_c == 1, "TOKEN_LOST of C 0..1 (its column refused MALFORMED): %d records",
	       lost_c);
	EXPECT(lost_other == 0, "%d other TOKEN_LOST records", lost_other);
	EXPECT(malformed == 1, "L2_DONE op 2 MALFORMED for the column of key 0: %d", malformed);
	EXPECT(done_other == 0, "%d other L2_DONE records", done_other);
	EXPECT(notier == 1, "ERROR NO_TIER for the SH_DOWN to a shard without the shared level: %d",
	       notier);
	EXPECT(err_other == 0, "%d other ERROR records", err_other);
	EXPECT(statuses > 0 && shared_flag == 0,
	       "STATUS bit 2 (the shared level) set in %d of %d, want none", shared_flag, statuses);
	EXPECT(status[1] == 0 && wafer_refill_whole(&wr) && wr.bad_bytes == 0,
	       "the refill of B 0..1 (A's tokens by way of K1): status %d, whole %d, %lu bad bytes",
	       status[1], wafer_refill_whole(&wr), (unsigned long)wr.bad_bytes);
	EXPECT(status[2] == PROTO_E_RANGE, "the refill of B 2..3 (lost): status %d, want RANGE",
	       status[2]);
	EXPECT(status[3] == PROTO_E_UNKNOWN_PROMPT,
	       "the refill of C 0..1 (emptied by its loss): status %d, want UNKNOWN_PROMPT", status[3]);
	printf("shard second tier, uncovered entries: %s\n",
	       expect_fails ? "FAILED" : "lost (TOKEN_LOST), never stored as zeros");
	return expect_fails ? 1 : 0;
}
