/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * shard_scenario's parts: shard_scenario.c (the frames a driver and a
 * wafer send, the whole-stream, space and restart scenarios) and
 * shard_scenario_order.c (scenarios of the order of the refill queue: runs
 * ahead of a waiting DELETE; refills against deletes and evicts again) and
 * shard_scenario_l2.c (the second tier's, for a shard that has one) and
 * shard_scenario_report.c (how unacknowledged reports are resent; lost
 * data found by the data that follows it).
 */
#ifndef KVSS_TEST_SHARD_SCENARIO_H
#define KVSS_TEST_SHARD_SCENARIO_H

#include <pcap/pcap.h>
#include <stdint.h>

#include "frames.h"
#include "proto.h"
#include "wafer.h"

/* config/ci-pcap-shard.cfg: one cache, 64 bytes per token in 2 buffers. */
#define B 64
#define NB 2
#define EPOCH 0x0BADCAFE
#define EPOCH2 0x0C0FFEE2 /* the restarted driver (gen-restart) */
#define A_ID 0xA000000000000001ULL
#define B_ID 0xB000000000000002ULL
#define C_ID 0xC000000000000003ULL

/* The reference hash of a prompt's token, of generation @p gen (0 by href). */
uint64_t href_gen(uint64_t prompt, uint32_t token, unsigned int gen);
uint64_t href(uint64_t prompt, uint32_t token);

/* The generation of the bytes data() sends. */
extern unsigned int sc_gen;
/* The driver epoch of the frames begin() starts. */
extern uint32_t cur_epoch;
/* The IPv4 source of the frames send_payload() sends (10.99.0.1: the driver). */
extern uint32_t sc_src_ip;

void send_payload(uint8_t *pay, uint32_t n, uint16_t dport);
void begin(struct proto_builder *b, uint8_t *buf, uint8_t type, uint64_t seq);
/* EVICT of g tokens (prompt[i], tok[i]) of cache 0 as batch @p batch. */
void evict(uint64_t seq, uint64_t batch, const uint64_t *prompt, const uint32_t *tok, uint16_t g);
/* Bytes [a, z) of the batch's stream, of generation sc_gen. */
void data(uint64_t batch, const uint64_t *prompt, const uint32_t *tok, uint16_t g, uint32_t a,
	  uint32_t z);
/* One REFILL of @p n tokens of prompt A from token 0. */
void refill_a(uint64_t seq, uint64_t refill_id, uint64_t evict_count, uint32_t n);

/* What a shard sent, over one capture per TX queue, taken in turn. */
struct captures {
	char **files;
	int n, i;
	pcap_t *p;
	int bad; /* a capture could not be read */
};

const uint8_t *captures_next(struct captures *c, struct proto_msg *m);

void gen_ahead(void);
int check_ahead(char **files, int nfiles);
void gen_reevict(void);
int check_reevict(char **files, int nfiles);
void gen_notier(void);
int check_notier(char **files, int nfiles);
/* shard_scenario_l2.c: a shard with a second tier (test/data/shard-l2.cfg). */
void gen_l2hostile(void);
int check_l2hostile(char **files, int nfiles);
void gen_l2hello(void);
int check_l2hello(char **files, int nfiles);
void gen_l2uncov(void);
int check_l2uncov(char **files, int nfiles);
/* shard_scenario_report.c: reliable reports resent as section 5 says. */
int check_backoff(char **files, int nfiles);
void gen_busy(void);
int check_busy(char **files, int nfiles);
void gen_early(void);
int check_early(char **files, int nfiles);

#endif
