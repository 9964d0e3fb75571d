/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Writes test inputs made with lib/proto's builders:
 *   gen_frames corpus DIR        fuzz seeds: every type, tagged and not
 *   gen_frames pcap FILE golden  section 8's two payloads, as frames
 *   gen_frames pcap FILE bad     truncated and corrupted copies of them
 *   gen_frames pcap FILE all     one sample frame of every type
 *   gen_frames pcap FILE shard   for a shard (config/ci-pcap-shard.cfg): HELLO,
 *                                bad frames, a stale DELETE, a new driver's HELLO
 */
#include <pcap/pcap.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "frames.h"

static int
write_seed(const char *dir, const char *name, const uint8_t *frame, uint32_t n)
{
	char path[1024];
	FILE *f;
	uint8_t split[2] = {(uint8_t)(n / 3), (uint8_t)(n / 2)};

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	f = fopen(path, "wb");
	if (f == NULL) {
		perror(path);
		return -1;
	}
	fwrite(split, 1, 2, f);
	fwrite(frame, 1, n, f);
	fclose(f);
	return 0;
}

static int
corpus(const char *dir)
{
	uint8_t frame[PROTO_FRAME_MAX], pay[256];
	char name[64];
	unsigned int i, v;
	uint32_t n;

	for (v = 0; v < 2; v++)
		for (i = 0; i < frames_count(); i++) {
			n = frames_frame(i, v, frame, sizeof(frame));
			snprintf(name, sizeof(name), "sample_%02u_%s", i, v ? "vlan" : "plain");
			if (write_seed(dir, name, frame, n) != 0)
				return 1;
		}
	n = frames_unhex(frames_golden_delete_hex, pay, sizeof(pay));
	n = frames_wrap(pay, n, PROTO_T_DELETE, false, frame, sizeof(frame));
	write_seed(dir, "golden_delete", frame, n);
	n = frames_unhex(frames_golden_refill_hex, pay, sizeof(pay));
	n = frames_wrap(pay, n, PROTO_T_REFILL, false, frame, sizeof(frame));
	write_seed(dir, "golden_refill", frame, n);
	return 0;
}

static struct frames_pcap out;

static void
emit(const uint8_t *frame, uint32_t caplen, uint32_t len)
{
	frames_pcap_write(&out, frame, caplen, len);
}

static void
fix_ip(uint8_t *frame)
{
	uint16_t ck;

	frame[24] = frame[25] = 0;
	ck = proto_ip4_cksum(frame + 14, 20);
	frame[24] = (uint8_t)(ck >> 8);
	frame[25] = (uint8_t)ck;
}

static uint32_t
golden(int which, uint8_t *frame)
{
	uint8_t pay[256];
	uint32_t n;

	if (which == 0) {
		n = frames_unhex(frames_golden_delete_hex, pay, sizeof(pay));
		return frames_wrap(pay, n, PROTO_T_DELETE, false, frame, PROTO_FRAME_MAX);
	}
	n = frames_unhex(frames_golden_refill_hex, pay, sizeof(pay));
	return frames_wrap(pay, n, PROTO_T_REFILL, false, frame, PROTO_FRAME_MAX);
}

static void
bad(void)
{
	uint8_t f[PROTO_FRAME_MAX];
	uint32_t n;
	const uint32_t P = PROTO_L2L4_LEN; /* payload offset */

	n = golden(0, f); /* truncated: the capture lost the tail */
	emit(f, n - 10, n - 10);
	n = golden(1, f); /* snaplen cut the frame */
	emit(f, 60, n);
	n = golden(0, f);
	f[P] = 'X';
	emit(f, n, n); /* bad_magic */
	n = golden(0, f);
	f[P + 4] = 3;
	emit(f, n, n); /* bad_version */
	n = golden(0, f);
	f[P + 5] = 0x7e;
	emit(f, n, n); /* bad_type */
	n = golden(0, f);
	f[P + 20] = 33;
	emit(f, n, n); /* bad_body_len */
	n = golden(1, f);
	f[P + 14] = 2;
	emit(f, n, n); /* bad_count */
	n = golden(0, f);
	f[20] = 0x20;
	fix_ip(f);
	emit(f, n, n); /* ip_fragment */
	n = golden(0, f);
	f[25] ^= 0x5a;
	emit(f, n, n); /* bad_ip_checksum */
	n = golden(0, f);
	f[39] -= 4;
	emit(f, n, n); /* bad_udp_len */
	n = golden(0, f);
	f[36] = 0;
	f[37] = 53;
	emit(f, n, n); /* not_kvss: DNS port */
	n = golden(1, f);
	emit(f, n, n); /* and a good one after all that */
}

/* A control message from the driver of the CI config to its shard. */
static uint32_t
to_shard(uint8_t *frame, uint8_t type, uint32_t epoch)
{
	static const uint8_t drv[6] = {2, 0, 0, 0, 0, 1}, shd[6] = {2, 0, 0, 0, 1, 0};
	uint8_t pay[128];
	struct proto_builder b;
	struct proto_hdr h = {.type = type, .shard_id = PROTO_SHARD_ALL, .epoch = epoch};
	struct proto_addr a = {.src_ip = 0x0a630001, .dst_ip = 0x0a63000a, .src_port = PROTO_PORT_CTRL_DEFAULT,
			       .dst_port = PROTO_PORT_CTRL_DEFAULT};

	memcpy(a.src_mac, drv, 6);
	memcpy(a.dst_mac, shd, 6);
	proto_build_begin(&b, pay, sizeof(pay), &h);
	if (type == PROTO_T_DELETE) {
		struct proto_delete d = {.prompt_id = 5, .end_token_idx = 3};

		h.seq = 1;
		proto_build_delete(&b, &d);
	}
	return proto_build_frame(frame, PROTO_FRAME_MAX, &a, pay, proto_build_end(&b));
}

static void
shard_set(void)
{
	uint8_t f[PROTO_FRAME_MAX];
	uint32_t n;

	n = to_shard(f, PROTO_T_HELLO, 0x11223344);
	emit(f, n, n);
	bad();
	n = to_shard(f, PROTO_T_DELETE, 0x99);
	emit(f, n, n);
	n = to_shard(f, PROTO_T_HELLO, 0x55667788);
	emit(f, n, n);
}

/* The CI driver's (10.99.0.1) frames to the CI shard (10.99.0.10) on @p port. */
static struct proto_addr
ci_addr(uint16_t port)
{
	static const uint8_t drv[6] = {2, 0, 0, 0, 0, 1}, shd[6] = {2, 0, 0, 0, 1, 0};
	struct proto_addr a = {.src_ip = 0x0a630001, .dst_ip = 0x0a63000a,
			       .src_port = PROTO_PORT_CTRL_DEFAULT, .dst_port = port};

	memcpy(a.src_mac, drv, 6);
	memcpy(a.dst_mac, shd, 6);
	return a;
}

/* Emit the message being built in @p b to @p a. */
static void
emit_built(const struct proto_addr *a, struct proto_builder *b)
{
	uint8_t f[PROTO_FRAME_MAX];
	uint32_t n = proto_build_frame(f, sizeof(f), a, b->buf, proto_build_end(b));

	emit(f, n, n);
}

/* HELLO in epoch @p e. */
static void
emit_hello(uint32_t e)
{
	struct proto_addr a = ci_addr(PROTO_PORT_CTRL_DEFAULT);
	struct proto_hdr h = {.type = PROTO_T_HELLO, .epoch = e};
	uint8_t pay[64];
	struct proto_builder b;

	proto_build_begin(&b, pay, sizeof(pay), &h);
	emit_built(&a, &b);
}

/* EVICT seq 1, batch 1: tokens 0..3 of prompt 5 (cache 0). */
static void
emit_evict5(uint32_t e)
{
	struct proto_addr a = ci_addr(PROTO_PORT_CTRL_DEFAULT);
	struct proto_hdr h = {.type = PROTO_T_EVICT, .epoch = e, .seq = 1};
	struct proto_evict_hdr eh = {1, 1, 4, 0};
	uint8_t pay[256];
	struct proto_builder b;
	uint32_t t;

	proto_build_begin(&b, pay, sizeof(pay), &h);
	proto_build_evict_hdr(&b, &eh);
	for (t = 0; t < 4; t++) {
		struct proto_evict_entry en = {5, t, 1};

		proto_build_evict_entry(&b, &en);
	}
	emit_built(&a, &b);
}

/* EVICT_DATA of batch @p batch: 4 tokens of 64 bytes, all @p fill. */
static void
emit_data(uint32_t e, uint64_t batch, uint8_t fill)
{
	struct proto_addr a = ci_addr(PROTO_PORT_EVICT_DEFAULT);
	struct proto_hdr h = {.type = PROTO_T_EVICT_DATA, .epoch = e};
	struct proto_data_hdr dh = {batch, 0, 0, 4 * 64, e};
	uint8_t pay[512];
	struct proto_builder b;

	proto_build_begin(&b, pay, sizeof(pay), &h);
	proto_build_data_hdr(&b, &dh);
	memset(pay + PROTO_HDR_LEN + PROTO_DATA_HDR_LEN, fill, 4 * 64);
	proto_build_bytes(&b, pay + PROTO_HDR_LEN + PROTO_DATA_HDR_LEN, 4 * 64);
	emit_built(&a, &b);
}

/* REFILL seq 2 of prompt 5's tokens 0..3 after batch 1, id @p id. */
static void
emit_refill5(uint32_t e, uint64_t id)
{
	struct proto_addr a = ci_addr(PROTO_PORT_CTRL_DEFAULT);
	struct proto_hdr h = {.type = PROTO_T_REFILL, .shard_id = PROTO_SHARD_ALL, .epoch = e, .seq = 2};
	struct proto_refill_req rq = {.refill_id = id, .evict_count = 1, .cache_id = 0};
	struct proto_refill_chunk ch = {5, 0, 4};
	uint8_t pay[128];
	struct proto_builder b;

	proto_build_begin(&b, pay, sizeof(pay), &h);
	proto_build_refill_req(&b, &rq);
	proto_build_refill_chunk(&b, &ch);
	emit_built(&a, &b);
}

/*
 * Frames not for the CI shard among a real stream (PROTOCOL.md section 1):
 * prompt 5 is stored (EVICT seq 1 and its data), then DELETEs of it with
 * seq 2 to another model, shard, IPv4 address and MAC (and, with @p src, one
 * from an address that is not the driver's), then the real REFILL of it
 * with seq 2. A shard that obeys any stray deletes the prompt and takes
 * seq 2, so the REFILL is dropped as a duplicate or finds nothing.
 */
static void
strangers_set(bool src)
{
	static const uint8_t other[6] = {2, 0, 0, 0, 1, 9};
	const uint32_t E = 0x5eed0001;
	struct proto_delete d = {.prompt_id = 5, .evict_count = 1, .end_token_idx = 3};
	uint8_t pay[128];
	struct proto_builder b;
	uint32_t k;

	emit_hello(E);
	emit_evict5(E);
	emit_data(E, 1, 0xa5);
	for (k = 0; k < (src ? 5u : 4u); k++) {
		struct proto_addr x = ci_addr(PROTO_PORT_CTRL_DEFAULT);
		struct proto_hdr h = {.type = PROTO_T_DELETE, .epoch = E, .seq = 2};

		if (k == 0)
			h.model_id = 1;
		else if (k == 1)
			h.shard_id = 5;
		else if (k == 2)
			x.dst_ip = 0x0a630063;
		else if (k == 3)
			memcpy(x.dst_mac, other, 6);
		else
			x.src_ip = 0x0a63004d; /* 10.99.0.77: not the driver */
		proto_build_begin(&b, pay, sizeof(pay), &h);
		proto_build_delete(&b, &d);
		emit_built(&x, &b);
	}
	emit_refill5(E, 77);
}

/*
 * Data that is never announced, against data that is (PROTOCOL.md section
 * 5, held data): 1,100 EVICT_DATA frames for batch 5000, far past any
 * EVICT; 1,100 for batch 9, near enough to hold but never announced; then
 * batch 1's data, its EVICT (seq 1), and a REFILL of it (seq 2).
 */
static void
junkdata_set(void)
{
	const uint32_t E = 0x5eed0002;
	uint32_t k;

	emit_hello(E);
	for (k = 0; k < 1100; k++)
		emit_data(E, 5000, 0x5a);
	for (k = 0; k < 1100; k++)
		emit_data(E, 9, 0x5a);
	emit_data(E, 1, 0x5a);
	emit_evict5(E);
	emit_refill5(E, 78);
}

static int
pcap_out(const char *file, const char *what)
{
	uint8_t frame[PROTO_FRAME_MAX];
	unsigned int i;

	if (frames_pcap_open(&out, file, 1000, "gen_frames") != 0)
		return 1;
	if (strcmp(what, "golden") == 0) {
		uint32_t n = golden(0, frame);

		emit(frame, n, n);
		n = golden(1, frame);
		emit(frame, n, n);
	} else if (strcmp(what, "bad") == 0) {
		bad();
	} else if (strcmp(what, "shard") == 0) {
		shard_set();
	} else if (strcmp(what, "junkdata") == 0) {
		junkdata_set();
	} else if (strcmp(what, "strangers") == 0 || strcmp(what, "strangers_src") == 0) {
		strangers_set(strcmp(what, "strangers_src") == 0);
	} else if (strcmp(what, "all") == 0) {
		for (i = 0; i < frames_count(); i++) {
			uint32_t n = frames_frame(i, i == 2, frame, sizeof(frame));

			emit(frame, n, n);
		}
	} else {
		fprintf(stderr, "gen_frames: unknown set %s\n", what);
		return 1;
	}
	frames_pcap_close(&out);
	return 0;
}

int
main(int argc, char **argv)
{
	if (argc == 3 && strcmp(argv[1], "corpus") == 0)
		return corpus(argv[2]);
	if (argc == 4 && strcmp(argv[1], "pcap") == 0)
		return pcap_out(argv[2], argv[3]);
	fprintf(stderr, "usage: gen_frames corpus DIR | pcap FILE golden|bad|all|shard|strangers|strangers_src|junkdata\n");
	return 2;
}
