/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * libFuzzer target for kvss-udp-client's decoder (app/udpclient/ucwire.c):
 * what a shard, or anyone who reaches the client's sockets, can make it
 * read. Input: one UDP payload, copied into a heap block of its exact size
 * so that ASan catches a read past it. A payload that parses has every
 * record of its type read back through the accessors, and what the client
 * relies on holds: the body is the rest of the payload, and a REFILL_DATA's
 * bytes lie inside their stream (udpclient.c writes them at offset + k of
 * a buffer of stream_len bytes).
 */
#include <stdlib.h>
#include <string.h>

#include "ucwire.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void
touch(const struct uc_msg *m)
{
	volatile uint64_t sink = 0;

	switch (m->h.type) {
	case UC_STATUS: {
		struct uc_status s;

		uc_get_status(m, &s);
		sink += s.uptime_ns;
		for (unsigned int i = 0; i < m->h.count; i++) {
			struct uc_cache_info c;

			uc_get_cache_info(m, i, &c);
			sink += c.l2_stored;
		}
		break;
	}
	case UC_ACK: {
		struct uc_ack a;

		uc_get_ack(m, &a);
		sink += a.recv_seq;
		break;
	}
	case UC_ERROR:
		for (unsigned int i = 0; i < m->h.count; i++) {
			struct uc_error e;

			uc_get_error(m, i, &e);
			sink += e.code;
			sink += uc_err_name(e.code)[0];
		}
		break;
	case UC_REFILL_DONE:
		for (unsigned int i = 0; i < m->h.count; i++) {
			struct uc_refill_done d;

			uc_get_refill_done(m, i, &d);
			sink += d.bytes;
		}
		break;
	case UC_TOKEN_LOST:
		for (unsigned int i = 0; i < m->h.count; i++) {
			struct uc_lost l;

			uc_get_lost(m, i, &l);
			sink += l.tokens;
		}
		break;
	case UC_REFILL_DATA: {
		struct uc_refill_data d;

		uc_get_refill_data(m, &d);
		if ((uint64_t)d.offset + d.len > d.stream_len)
			abort(); /* the client would write past its buffer */
		for (uint32_t k = 0; k < d.len; k++)
			sink += d.bytes[k];
		break;
	}
	default:
		break;
	}
	(void)sink;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint8_t *p = malloc(size ? size : 1);
	struct uc_msg m;

	memcpy(p, data, size);
	if (uc_parse(p, size, &m) == NULL) {
		if (m.body != p + 32 || (size_t)m.h.body_len != size - 32)
			abort();
		touch(&m);
	}
	free(p);
	return 0;
}
