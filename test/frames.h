/* SPDX-License-Identifier: BSD-3-Clause */
/* Sample frames for tests, fuzz seeds and pcap generation. */
#ifndef KVSS_TEST_FRAMES_H
#define KVSS_TEST_FRAMES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <pcap/pcap.h>

#include "proto.h"

/**
 * The golden DELETE and REFILL payloads, for the captures gen_frames
 * writes; test_proto checks they equal docs/PROTOCOL.md's.
 */
extern const char frames_golden_delete_hex[];
extern const char frames_golden_refill_hex[];

/** docs/PROTOCOL.md, or the file $KVSS_PROTOCOL_MD names. */
const char *frames_protocol_md(void);

/**
 * The hex of the golden vector @p name of docs/PROTOCOL.md section 10 (the
 * fenced block after its "golden:" marker, lines joined). @return its
 * length, or -1 when the file, the marker or the block is missing.
 */
int frames_golden_hex(const char *name, char *hex, size_t cap);

/** The same vector decoded; 0 when it is missing or not whole hex. */
uint32_t frames_golden(const char *name, uint8_t *out, uint32_t cap);

/** Decode a hex string into @p out; returns the byte count. */
uint32_t frames_unhex(const char *hex, uint8_t *out, uint32_t cap);

/** Addresses used by every sample frame (dst port chosen per type). */
void frames_addr(struct proto_addr *a, unsigned int type, bool vlan);

/** Number of sample messages: at least one of every type. */
unsigned int frames_count(void);

/**
 * Build sample message @p i (UDP payload only) with non-trivial values.
 * @return payload length; *@p type gets its type.
 */
uint32_t frames_payload(unsigned int i, uint8_t *buf, uint32_t cap, unsigned int *type);

/** Sample message @p i as a whole Ethernet frame. */
uint32_t frames_frame(unsigned int i, bool vlan, uint8_t *buf, uint32_t cap);

/** Wrap a UDP payload sent to the port of @p type in a frame. */
uint32_t frames_wrap(const uint8_t *payload, uint32_t len, unsigned int type, bool vlan,
		     uint8_t *buf, uint32_t cap);

/** A capture being written: frame n is stamped 1700000000 s + n x step_us. */
struct frames_pcap {
	pcap_t *dead;
	pcap_dumper_t *d;
	unsigned int n;	 /* frames written */
	uint32_t step_us;
};

/** Open @p file for writing. @return 0, or -1 after a message naming @p tool and the file. */
int frames_pcap_open(struct frames_pcap *o, const char *file, uint32_t step_us, const char *tool);
/** One frame: @p caplen bytes captured of @p len on the wire. */
void frames_pcap_write(struct frames_pcap *o, const uint8_t *f, uint32_t caplen, uint32_t len);
void frames_pcap_close(struct frames_pcap *o);

/** Open @p file for reading; NULL after a message naming @p tool and the file. */
pcap_t *frames_pcap_read(const char *file, const char *tool);
/**
 * The next frame of @p p that parses as a message, into @p m: returns the
 * frame (the message's data is at m->data_off), NULL at the end. A shard's
 * resent copies of a report (version 2: no replay sends REPORT_ACK) are
 * skipped, as a driver takes each report once.
 */
const uint8_t *frames_pcap_next_msg(pcap_t *p, struct proto_msg *m);

/**
 * Break a frame (untagged; its KVSS header at @p off) in way @p kind % 6:
 * truncated by 10 bytes, bad magic, bad version, bad body_len, bad IPv4
 * header checksum, bad UDP length. Every one must be dropped unanswered.
 * Changes @p f in place and returns its new length.
 */
uint32_t frames_break(uint8_t *f, uint32_t n, uint32_t off, unsigned int kind);

#endif
