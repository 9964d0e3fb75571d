/* SPDX-License-Identifier: BSD-3-Clause */
#include "frames.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char frames_golden_delete_hex[] =
	"4b5653530205000000000000ffff0100040302012000000007000000000000006f00000000000000"
	"e80300000000000004000000070000000000000000000000";
const char frames_golden_refill_hex[] =
	"4b5653530204000000000000ffff0100040302014000000008000000000000002a00000000000000"
	"140a000000000000090000000000000000000200000000006f000000000000000000000004000000"
	"de000000000000000400000008000000";

uint32_t
frames_unhex(const char *hex, uint8_t *out, uint32_t cap)
{
	uint32_t n = 0;
	unsigned int v;

	while (hex[0] != '\0' && hex[1] != '\0' && n < cap) {
		if (sscanf(hex, "%2x", &v) != 1)
			break;
		out[n++] = (uint8_t)v;
		hex += 2;
	}
	return n;
}

const char *
frames_protocol_md(void)
{
	const char *p = getenv("KVSS_PROTOCOL_MD");

	return p != NULL && p[0] != '\0' ? p : "docs/PROTOCOL.md";
}

/* The hex lines of the fenced block after "<!-- golden: NAME -->", concatenated. */
int
frames_golden_hex(const char *name, char *hex, size_t cap)
{
	FILE *f = fopen(frames_protocol_md(), "r");
	char line[512], want[128];
	size_t n = 0;
	int state = 0; /* 0: looking for the marker, 1: for the fence, 2: in the block */

	if (f == NULL)
		return -1;
	snprintf(want, sizeof(want), "<!-- golden: %s -->", name);
	while (fgets(line, sizeof(line), f) != NULL) {
		line[strcspn(line, "\r\n")] = '\0';
		if (state == 0 && strcmp(line, want) == 0)
			state = 1;
		else if (state == 1 && strncmp(line, "```", 3) == 0)
			state = 2;
		else if (state == 2 && strncmp(line, "```", 3) == 0)
			break;
		else if (state == 2) {
			size_t k = strlen(line);

			if (n + k + 1 > cap) {
				fclose(f);
				return -1;
			}
			memcpy(hex + n, line, k);
			n += k;
		}
	}
	fclose(f);
	if (state != 2)
		return -1;
	hex[n] = '\0';
	return (int)n;
}

uint32_t
frames_golden(const char *name, uint8_t *out, uint32_t cap)
{
	char hex[2048];
	uint32_t n;

	if (frames_golden_hex(name, hex, sizeof(hex)) <= 0)
		return 0;
	n = frames_unhex(hex, out, cap);
	return 2 * (size_t)n == strlen(hex) ? n : 0;
}

void
frames_addr(struct proto_addr *a, unsigned int type, bool vlan)
{
	static const uint8_t dmac[6] = {0x02, 0x00, 0x00, 0x00, 0x00, 0x02};
	static const uint8_t smac[6] = {0x02, 0x00, 0x00, 0x00, 0x00, 0x01};

	memset(a, 0, sizeof(*a));
	memcpy(a->dst_mac, dmac, 6);
	memcpy(a->src_mac, smac, 6);
	a->has_vlan = vlan;
	a->vlan_tci = vlan ? 0x2064 : 0; /* PCP 1, VID 100 */
	a->src_ip = 0x0a000001;          /* 10.0.0.1: never sent anywhere */
	a->dst_ip = 0x0a000002;
	a->src_port = 40000;
	if (type == PROTO_T_EVICT_DATA)
		a->dst_port = PROTO_PORT_EVICT_DEFAULT;
	else if (type == PROTO_T_REFILL_DATA)
		a->dst_port = PROTO_PORT_REFILL_DEFAULT;
	else
		a->dst_port = PROTO_PORT_CTRL_DEFAULT;
}

static const unsigned int sample_types[] = {
	PROTO_T_HELLO,	  PROTO_T_RESERVE,    PROTO_T_EVICT,	  PROTO_T_REFILL,
	PROTO_T_DELETE,	  PROTO_T_STATUS,     PROTO_T_ACK,	  PROTO_T_ERROR,
	PROTO_T_REFILL_DONE, PROTO_T_TOKEN_LOST, PROTO_T_EVICT_DATA, PROTO_T_REFILL_DATA,
	/* The second tier (PROTOCOL.md section 9), after the first ones. */
	PROTO_T_L2_DOWN,  PROTO_T_L2_UP,      PROTO_T_L2_DELETE,  PROTO_T_L2_DONE,
	PROTO_T_L2_INVENTORY,
	/* Version 2's reliable reports. */
	PROTO_T_REPORT_ACK,
	/* The shared level (section 10). */
	PROTO_T_SH_DOWN, PROTO_T_SH_UP,
};

unsigned int
frames_count(void)
{
	return sizeof(sample_types) / sizeof(sample_types[0]);
}

uint32_t
frames_payload(unsigned int i, uint8_t *buf, uint32_t cap, unsigned int *type)
{
	struct proto_builder b;
	struct proto_hdr h = {
		.type = (uint8_t)sample_types[i % frames_count()],
		.flags = PROTO_F_ACK_REQ,
		.model_id = 1,
		.shard_id = 3,
		.epoch = 0xA1B2C3D4,
		.seq = 1000 + i,
	};
	unsigned int k;

	*type = h.type;
	if (h.type == PROTO_T_HELLO || h.type == PROTO_T_REPORT_ACK || h.type >= PROTO_T_EVICT_DATA)
		h.seq = 0;
	if (proto_build_begin(&b, buf, cap, &h) != 0)
		return 0;
	switch (h.type) {
	case PROTO_T_RESERVE:
		for (k = 0; k < 2; k++) {
			struct proto_reserve r = {0x1111222233334444ULL + k, 0x99, 128 * k, 4096, 1};

			proto_build_reserve(&b, &r);
		}
		break;
	case PROTO_T_EVICT: {
		struct proto_evict_hdr e = {.batch_no = 77, .num_caches = 2, .g = 3};

		proto_build_evict_hdr(&b, &e);
		for (k = 0; k < 6; k++) {
			struct proto_evict_entry en = {k % 2 ? 0 : 0xABCDEF0123456789ULL,
						       500 + k / 2, 31};

			proto_build_evict_entry(&b, &en);
		}
		break;
	}
	case PROTO_T_REFILL:
		for (k = 0; k < 2; k++) {
			struct proto_refill_req r = {42 + k, 2580, 9, 64 * k, (uint16_t)k, 0};
			unsigned int c;

			proto_build_refill_req(&b, &r);
			for (c = 0; c <= k + 1; c++) {
				struct proto_refill_chunk ch = {111 + c, 64 * c, 64};

				proto_build_refill_chunk(&b, &ch);
			}
		}
		break;
	case PROTO_T_DELETE:
		for (k = 0; k < 3; k++) {
			struct proto_delete d = {0x8000000000000001ULL + k, 1000 + k, 4 * k,
						 4 * k + 3, (uint16_t)k};

			proto_build_delete(&b, &d);
		}
		break;
	case PROTO_T_STATUS: {
		struct proto_status s = {123456, 1001, 987654321, PROTO_STATUS_F_STALLED, 0xA1B2C3D4};

		proto_build_status(&b, &s);
		for (k = 0; k < 2; k++) {
			struct proto_cache_info c = {(uint16_t)k, 4, 4096 << k, 1000000, 1234 + k, 7, 8000000, 4096 * (k + 1)};

			proto_build_cache_info(&b, &c);
		}
		break;
	}
	case PROTO_T_ACK: {
		struct proto_ack a = {0x0102030405060708ULL, 0x0102030405060710ULL};

		proto_build_ack(&b, &a);
		break;
	}
	case PROTO_T_REPORT_ACK:
		proto_build_report_ack(&b, 0x0A0B0C0D0E0F1011ULL);
		break;
	case PROTO_T_ERROR:
		for (k = 0; k < 2; k++) {
			struct proto_error e = {1005, 111, 152 + k, 0, (uint16_t)(PROTO_E_HOLE + k)};

			proto_build_error(&b, &e);
		}
		break;
	case PROTO_T_REFILL_DONE: {
		struct proto_refill_done d = {42, 128, 0, 128 * 4096};
		struct proto_refill_done e = {43, 0, PROTO_E_RANGE, 0};

		proto_build_refill_done(&b, &d);
		proto_build_refill_done(&b, &e);
		break;
	}
	case PROTO_T_TOKEN_LOST: {
		struct proto_lost l = {0xFEEDFACE, 64, 130, 1};

		proto_build_lost(&b, &l);
		break;
	}
	case PROTO_T_EVICT_DATA: {
		struct proto_data_hdr d = {.batch_no = 77, .cache_id = 1, .stream_offset = 16,
					   .stream_len = 96, .driver_epoch = 0x0A0B0C0D};
		uint8_t pay[40];

		proto_ref_fill(0x1234, 1, 3, 1, 16, pay, sizeof(pay));
		proto_build_data_hdr(&b, &d);
		proto_build_bytes(&b, pay, sizeof(pay));
		break;
	}
	case PROTO_T_REFILL_DATA: {
		struct proto_refill_data_hdr d = {.refill_id = 42, .sequence_id = 9, .cache_idx = 128,
						  .cache_id = 0, .buffer_id = 2,
						  .stream_offset = 0, .stream_len = 64};
		uint8_t pay[64];

		proto_ref_fill(0x5678, 1, 3, 0, 0, pay, sizeof(pay));
		proto_build_refill_data_hdr(&b, &d);
		proto_build_bytes(&b, pay, sizeof(pay));
		break;
	}
	case PROTO_T_L2_DOWN:
	case PROTO_T_SH_DOWN: /* the same call: a SharedColumn in an SH_DOWN */
		for (k = 0; k < 2; k++) {
			struct proto_l2col c = {0x5EC0000000000001ULL + k, 0x5EC0000000000000ULL + k,
						0x44ad98655d8858e1ULL, 111, 1000, 1700000000000000000ULL,
						64 * k, 64, 0, 0x0B1EC70000000001ULL + k, 1, 2, 0x5a5a5a5a};

			proto_build_l2_down(&b, &c);
		}
		break;
	case PROTO_T_L2_UP:
	case PROTO_T_SH_UP: {
		struct proto_evict_hdr e = {.batch_no = 78, .num_caches = 1, .g = 2, .ncols = 1};
		struct proto_l2col c = {0x5EC0000000000001ULL, 0x5EC0000000000000ULL,
					0x44ad98655d8858e1ULL, 222, 0, 1700000000000000000ULL, 0, 64, 0,
					0x0B1EC70000000001ULL, 1, 2, 0x5a5a5a5a};

		proto_build_l2_up_hdr(&b, &e);
		for (k = 0; k < 2; k++) {
			struct proto_evict_entry en = {222, k, 31};

			proto_build_l2_up_entry(&b, &en);
		}
		proto_build_l2_up_col(&b, &c);
		break;
	}
	case PROTO_T_L2_DELETE: {
		struct proto_l2del d = {0x5EC0000000000001ULL, 0x44ad98655d8858e1ULL, 78, 0};

		proto_build_l2_delete(&b, &d);
		break;
	}
	case PROTO_T_L2_DONE: {
		struct proto_l2done d = {0x5EC0000000000001ULL, 0x44ad98655d8858e1ULL, 0, 1, 0};
		struct proto_l2done e = {0x5EC0000000000002ULL, 0x44ad98655d8858e1ULL, 0, 2,
					 PROTO_E_L2_FAILED};

		proto_build_l2_done(&b, &d);
		proto_build_l2_done(&b, &e);
		break;
	}
	case PROTO_T_L2_INVENTORY: {
		struct proto_l2col c = {0x5EC0000000000001ULL, 0x5EC0000000000000ULL,
					0x44ad98655d8858e1ULL, 0, 0, 1700000000000000000ULL, 0, 64, 0,
					0, 0, 0, 0};

		proto_build_l2_inventory_hdr(&b, 3, 2);
		proto_build_l2_inventory_col(&b, &c);
		break;
	}
	default:
		break;
	}
	return proto_build_end(&b);
}

uint32_t
frames_wrap(const uint8_t *payload, uint32_t len, unsigned int type, bool vlan, uint8_t *buf,
	    uint32_t cap)
{
	struct proto_addr a;

	frames_addr(&a, type, vlan);
	return proto_build_frame(buf, cap, &a, payload, len);
}

uint32_t
frames_frame(unsigned int i, bool vlan, uint8_t *buf, uint32_t cap)
{
	uint8_t pay[PROTO_PAYLOAD_MAX];
	unsigned int type;
	uint32_t n = frames_payload(i, pay, sizeof(pay), &type);

	return frames_wrap(pay, n, type, vlan, buf, cap);
}

uint32_t
frames_break(uint8_t *f, uint32_t n, uint32_t off, unsigned int kind)
{
	switch (kind % 6) {
	case 0:
		return n - 10;
	case 1:
		f[off] = 'X';
		break;
	case 2:
		f[off + 4] = 3; /* no such version */
		break;
	case 3:
		f[off + 20] ^= 1;
		break;
	case 4:
		f[off - PROTO_IP4_LEN - PROTO_UDP_LEN + 10] ^= 0x5a; /* IPv4 header checksum */
		break;
	default:
		f[off - PROTO_UDP_LEN + 5] -= 4; /* UDP length, low byte */
		break;
	}
	return n;
}

int
frames_pcap_open(struct frames_pcap *o, const char *file, uint32_t step_us, const char *tool)
{
	memset(o, 0, sizeof(*o));
	o->step_us = step_us;
	o->dead = pcap_open_dead(DLT_EN10MB, 65535);
	o->d = o->dead != NULL ? pcap_dump_open(o->dead, file) : NULL;
	if (o->d == NULL) {
		fprintf(stderr, "%s: %s: %s\n", tool, file,
			o->dead != NULL ? pcap_geterr(o->dead) : "cannot open a capture");
		if (o->dead != NULL)
			pcap_close(o->dead);
		return -1;
	}
	return 0;
}

void
frames_pcap_write(struct frames_pcap *o, const uint8_t *f, uint32_t caplen, uint32_t len)
{
	struct pcap_pkthdr h;
	uint64_t t = (uint64_t)o->n++ * o->step_us;

	memset(&h, 0, sizeof(h));
	h.ts.tv_sec = 1700000000 + (time_t)(t / 1000000);
	h.ts.tv_usec = (suseconds_t)(t % 1000000);
	h.caplen = caplen;
	h.len = len;
	pcap_dump((u_char *)o->d, &h, f);
}

void
frames_pcap_close(struct frames_pcap *o)
{
	pcap_dump_close(o->d);
	pcap_close(o->dead);
}

pcap_t *
frames_pcap_read(const char *file, const char *tool)
{
	char err[PCAP_ERRBUF_SIZE];
	pcap_t *p = pcap_open_offline(file, err);

	if (p == NULL)
		fprintf(stderr, "%s: %s: %s\n", tool, file, err);
	return p;
}

const uint8_t *
frames_pcap_next_msg(pcap_t *p, struct proto_msg *m)
{
	struct pcap_pkthdr *ph;
	const u_char *d;

	while (pcap_next_ex(p, &ph, &d) == 1) {
		if (proto_parse(d, ph->caplen, &proto_ports_default, m) != PROTO_OK)
			continue;
		/* Version 2: a shard resends a report (ERROR, TOKEN_LOST, L2_DONE)
		 * until a REPORT_ACK, which no capture replay sends; a receiver
		 * takes each once, by its report seq, so the copies are skipped. */
		if ((m->hdr.type == PROTO_T_ERROR || m->hdr.type == PROTO_T_TOKEN_LOST ||
		     m->hdr.type == PROTO_T_L2_DONE) && (m->hdr.flags & PROTO_F_RETRANSMIT))
			continue;
		return d;
	}
	return NULL;
}
