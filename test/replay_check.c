/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Captures recorded from the driver role (scripts/record-pcap.sh), replayed
 * into a shard in CI (scripts/test-replay-pcap.sh):
 *
 *   replay_check mix IN.pcap OUT.pcap
 *       IN with bad frames mixed in: after every 7th frame a copy broken in
 *       one of six ways (truncated, magic, version, body_len, IPv4 checksum,
 *       UDP length), which the shard must drop unanswered; and after the
 *       third control message four whole frames: a DELETE of a prompt nobody
 *       stored (ERROR UNKNOWN_PROMPT, nothing changes), a REFILL of it
 *       (REFILL_DONE with UNKNOWN_PROMPT, no data), a DELETE of another
 *       driver epoch (dropped, answered with STATUS) and a second copy of
 *       control message 2 (a duplicate, ignored). The two inserted messages
 *       take seq 4 and 5: every later control message's seq moves up by 2.
 *
 *   replay_check check EXPECT OUT.pcap... [--mixed]
 *       Everything the shard sent, against what the recording driver wrote
 *       to EXPECT (--record-expect): every refill's REFILL_DATA whole and
 *       every byte equal to the reference content of its tokens (PROTOCOL.md
 *       section 6), its REFILL_DONE ok with the right tokens and bytes, every
 *       control message acknowledged, no ERROR and no TOKEN_LOST; with
 *       --mixed, exactly the answers the inserted frames call for besides
 *       (the stale frame's STATUS is one of the periodic ones: the test
 *       counts it in the shard's stats instead).
 *       Prints one line "good: FRAMES BYTES DONE" of the good refills'
 *       traffic, equal for a clean and a mixed replay.
 */
#include <errno.h>
#include <inttypes.h>
#include <pcap/pcap.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "expect.h"
#include "frames.h"
#include "proto.h"
#include "wafer.h"

#define BAD_PROMPT 0x5EED00000000001ULL
#define BAD_REFILL 0xBAD0000000000001ULL

static struct frames_pcap out;
static unsigned int nbroken;

static void
dump(const uint8_t *f, uint32_t n)
{
	frames_pcap_write(&out, f, n, n);
}

static void
dump_broken(const uint8_t *f, uint32_t n, uint32_t off)
{
	uint8_t x[PROTO_FRAME_MAX + 64];

	if (n > sizeof(x) || n < off + PROTO_HDR_LEN)
		return;
	memcpy(x, f, n);
	dump(x, frames_break(x, n, off, nbroken++));
}

/* A control payload like @ref's header (model, shard, epoch) with one record. */
static uint32_t
build_ctl(uint8_t *buf, const struct proto_msg *ref, uint8_t type, uint64_t seq, uint32_t epoch)
{
	struct proto_builder b;
	struct proto_hdr h = {.version = PROTO_VERSION, .type = type, .model_id = ref->hdr.model_id,
			      .shard_id = ref->hdr.shard_id, .epoch = epoch, .seq = seq};

	proto_build_begin(&b, buf, PROTO_PAYLOAD_MAX, &h);
	if (type == PROTO_T_DELETE) {
		struct proto_delete d = {BAD_PROMPT, 0, 0, 9, 0};

		proto_build_delete(&b, &d);
	} else {
		struct proto_refill_req r = {.refill_id = BAD_REFILL, .evict_count = 0, .sequence_id = 1,
					     .cache_id = 0};
		struct proto_refill_chunk c = {BAD_PROMPT, 0, 8};

		proto_build_refill_req(&b, &r);
		proto_build_refill_chunk(&b, &c);
	}
	return proto_build_end(&b);
}

static int
mix(const char *in, const char *outfile)
{
	pcap_t *p = frames_pcap_read(in, "replay_check");
	struct pcap_pkthdr *ph;
	const u_char *d;
	static struct proto_msg m;
	static uint8_t copy[PROTO_FRAME_MAX + 64], seq2[PROTO_FRAME_MAX + 64];
	uint32_t seq2_len = 0, k = 0;
	int inserted = 0;

	if (p == NULL)
		return 2;
	if (frames_pcap_open(&out, outfile, 1, "replay_check") != 0)
		return 2;
	while (pcap_next_ex(p, &ph, &d) == 1) {
		uint32_t n = ph->caplen;

		if (n > sizeof(copy))
			continue;
		memcpy(copy, d, n);
		if (proto_parse(copy, n, &proto_ports_default, &m) == PROTO_OK &&
		    proto_type_is_control(m.hdr.type) && m.hdr.seq != 0) {
			if (inserted)
				proto_st64(copy + m.payload_off + 24, m.hdr.seq + 2);
			if (m.hdr.seq == 2) {
				memcpy(seq2, copy, n);
				seq2_len = n;
			}
		}
		dump(copy, n);
		if (++k % 7 == 0 && proto_parse(d, n, &proto_ports_default, &m) == PROTO_OK)
			dump_broken(d, n, m.payload_off);
		if (!inserted && proto_parse(d, n, &proto_ports_default, &m) == PROTO_OK &&
		    proto_type_is_control(m.hdr.type) && m.hdr.seq == 3) {
			uint8_t pl[PROTO_PAYLOAD_MAX], fr[PROTO_FRAME_MAX];
			uint32_t len, fl;

			len = build_ctl(pl, &m, PROTO_T_DELETE, 4, m.hdr.epoch);
			fl = proto_build_frame(fr, sizeof(fr), &m.addr, pl, len);
			dump(fr, fl);
			len = build_ctl(pl, &m, PROTO_T_REFILL, 5, m.hdr.epoch);
			fl = proto_build_frame(fr, sizeof(fr), &m.addr, pl, len);
			dump(fr, fl);
			len = build_ctl(pl, &m, PROTO_T_DELETE, 6, m.hdr.epoch ^ 0x5a5a5a5a);
			fl = proto_build_frame(fr, sizeof(fr), &m.addr, pl, len);
			dump(fr, fl);
			if (seq2_len)
				dump(seq2, seq2_len);
			inserted = 1;
		}
	}
	frames_pcap_close(&out);
	pcap_close(p);
	if (!inserted) {
		fprintf(stderr, "replay_check: %s: fewer than 3 control messages\n", in);
		return 2;
	}
	printf("mixed: %u frames, %u broken copies, 4 whole bad frames\n", out.n, nbroken);
	return 0;
}

/* ---- check ------------------------------------------------------------------------ */

struct exp_refill {
	uint64_t id;
	uint32_t ntok, bytes;
	uint64_t *hash;
	struct wafer_refill chk;
	int done, done_status;
	uint32_t done_tokens;
	uint64_t done_bytes;
};


static int
check(const char *expect, char **outs, int nouts, int mixed)
{
	FILE *f = fopen(expect, "r");
	struct exp_refill *rf = NULL;
	size_t nrf = 0, cap = 0, i;
	uint64_t messages = 0, max_ack = 0, good_frames = 0, good_bytes = 0;
	uint32_t epoch = 0, model = 0, shard = 0;
	unsigned int errors = 0, bad_delete_err = 0, lost = 0, status_ours = 0;
	int bad_refill_done = 0, unknown_data = 0, o;
	char *line = NULL;
	size_t lcap = 0;
	static struct proto_msg m;

	if (f == NULL) {
		fprintf(stderr, "replay_check: %s: %s\n", expect, strerror(errno));
		return 2;
	}
	while (getline(&line, &lcap, f) > 0) {
		char *p = line, *e;
		uint32_t mdl, sh, c, B, nb, n, t;
		uint64_t id;
		int used = 0;

		if (sscanf(line, "kvss-expect 1 driver-epoch %u", &epoch) == 1)
			continue;
		if (sscanf(line, "control model %u shard %u messages %" SCNu64, &model, &shard,
			   &messages) == 3)
			continue;
		if (sscanf(line, "refill %" SCNu64 " model %u shard %u cache %u bytes %u buffers %u tokens %u%n",
			   &id, &mdl, &sh, &c, &B, &nb, &n, &used) != 7)
			continue;
		if (nrf == cap) {
			cap = cap ? 2 * cap : 64;
			rf = realloc(rf, sizeof(*rf) * cap);
		}
		memset(&rf[nrf], 0, sizeof(rf[nrf]));
		rf[nrf].id = id;
		rf[nrf].ntok = n;
		rf[nrf].bytes = B;
		rf[nrf].hash = malloc(sizeof(uint64_t) * (n ? n : 1));
		p += used;
		for (t = 0; t < n; t++) {
			rf[nrf].hash[t] = strtoull(p, &e, 16);
			p = e;
		}
		{
			struct wafer_place at = {mdl, (uint16_t)sh, (uint16_t)c, B};

			if (wafer_refill_init(&rf[nrf].chk, &at, (uint16_t)nb, id, rf[nrf].hash, n) != 0)
				EXPECT(0, "refill %" PRIu64 ": bad expectation", id);
		}
		nrf++;
	}
	free(line);
	fclose(f);
	EXPECT(epoch != 0 && messages != 0, "%s: no header or no control line", expect);
	EXPECT(nrf > 0, "%s: the recording holds no refill", expect);

	for (o = 0; o < nouts; o++) {
		pcap_t *p = frames_pcap_read(outs[o], "replay_check");
		const uint8_t *d;

		if (p == NULL)
			return 2;
		while ((d = frames_pcap_next_msg(p, &m)) != NULL) {
			unsigned int k;

			switch (m.hdr.type) {
			case PROTO_T_REFILL_DATA:
				for (i = 0; i < nrf && rf[i].id != m.u.refill_data.refill_id; i++)
					;
				if (i == nrf) {
					unknown_data++;
					break;
				}
				wafer_refill_data(&rf[i].chk, &m.u.refill_data, d + m.data_off, m.data_len);
				good_frames++;
				good_bytes += m.data_len;
				break;
			case PROTO_T_REFILL_DONE:
				for (k = 0; k < m.hdr.count; k++) {
					struct proto_refill_done r;

					proto_get_refill_done(&m, k, &r);
					if (r.refill_id == BAD_REFILL) {
						bad_refill_done += r.status == PROTO_E_UNKNOWN_PROMPT &&
								   r.tokens == 0 && r.bytes == 0;
						continue;
					}
					for (i = 0; i < nrf && rf[i].id != r.refill_id; i++)
						;
					if (i == nrf) {
						EXPECT(0, "REFILL_DONE of unknown refill %" PRIu64, r.refill_id);
						continue;
					}
					rf[i].done++;
					rf[i].done_status = (int)r.status;
					rf[i].done_tokens = r.tokens;
					rf[i].done_bytes = r.bytes;
				}
				break;
			case PROTO_T_ACK:
				if (m.u.ack.cum_seq > max_ack)
					max_ack = m.u.ack.cum_seq;
				break;
			case PROTO_T_ERROR:
				for (k = 0; k < m.hdr.count; k++) {
					struct proto_error e;

					proto_get_error(&m, k, &e);
					if (e.code == PROTO_E_UNKNOWN_PROMPT && e.prompt_id == BAD_PROMPT &&
					    e.seq == 4)
						bad_delete_err++;
					else
						errors++;
					if (errors + bad_delete_err <= 5)
						fprintf(stderr, "  ERROR %s seq %" PRIu64 " prompt %" PRIx64
								" token %u\n", proto_err_name(e.code), e.seq,
							e.prompt_id, e.token_idx);
				}
				break;
			case PROTO_T_TOKEN_LOST:
				lost += m.hdr.count;
				break;
			case PROTO_T_STATUS:
				status_ours += m.u.status.driver_epoch == epoch;
				break;
			default:
				break;
			}
		}
		pcap_close(p);
	}
	for (i = 0; i < nrf; i++) {
		struct exp_refill *r = &rf[i];

		EXPECT(wafer_refill_whole(&r->chk), "refill %" PRIu64 ": %u tokens not whole", r->id,
		       r->ntok);
		EXPECT(r->chk.bad_bytes == 0, "refill %" PRIu64 ": %" PRIu64 " bytes differ from the reference",
		       r->id, r->chk.bad_bytes);
		EXPECT(r->chk.bad_frames == 0, "refill %" PRIu64 ": %" PRIu64 " frames out of place", r->id,
		       r->chk.bad_frames);
		EXPECT(r->done == 1 && r->done_status == 0 && r->done_tokens == r->ntok &&
			       r->done_bytes == (uint64_t)r->ntok * r->bytes,
		       "refill %" PRIu64 ": REFILL_DONE x%d status %d tokens %u bytes %" PRIu64, r->id,
		       r->done, r->done_status, r->done_tokens, r->done_bytes);
		free(r->hash);
	}
	free(rf);
	EXPECT(unknown_data == 0, "%d REFILL_DATA frames of no refill", unknown_data);
	EXPECT(errors == 0, "%u ERROR records besides the expected ones", errors);
	EXPECT(lost == 0, "%u tokens lost", lost);
	EXPECT(status_ours >= 1, "no STATUS with the recording's driver epoch (HELLO unanswered)");
	EXPECT(max_ack == messages + (mixed ? 2 : 0), "last ACK %" PRIu64 ", want %" PRIu64, max_ack,
	       messages + (mixed ? 2 : 0));
	if (mixed) {
		EXPECT(bad_delete_err == 1, "the DELETE of an unknown prompt: %u ERROR records, want 1",
		       bad_delete_err);
		EXPECT(bad_refill_done == 1, "the REFILL of an unknown prompt: no REFILL_DONE UNKNOWN_PROMPT");
	} else {
		EXPECT(bad_delete_err == 0 && bad_refill_done == 0, "answers to frames never sent");
	}
	printf("good: %" PRIu64 " %" PRIu64 " %zu\n", good_frames, good_bytes, nrf);
	printf("replay check: %zu refills, %" PRIu64 " control messages: %s\n", nrf, messages,
	       expect_fails ? "FAILED" : "every refilled byte and every answer as expected");
	return expect_fails ? 1 : 0;
}

int
main(int argc, char **argv)
{
	if (argc == 4 && strcmp(argv[1], "mix") == 0)
		return mix(argv[2], argv[3]);
	if (argc >= 4 && strcmp(argv[1], "check") == 0) {
		int mixed = strcmp(argv[argc - 1], "--mixed") == 0;

		return check(argv[2], argv + 3, argc - 3 - mixed, mixed);
	}
	fprintf(stderr, "usage: replay_check mix IN.pcap OUT.pcap | check EXPECT OUT.pcap... [--mixed]\n");
	return 2;
}
