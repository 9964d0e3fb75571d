/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * shard_scenario check-backoff: how a shard resends its reliable reports
 * (ERROR, TOKEN_LOST, L2_DONE) that no REPORT_ACK answers, read off the
 * capture's timestamps (PROTOCOL.md section 5: the wait starts at 5 ms and
 * doubles up to 200 ms). A capture replay sends no REPORT_ACK, so the
 * oldest report the shard made is resent, alone, until it exits (until
 * 2026-11-27 every report not acknowledged went at each timeout).
 *
 * Each report frame is known by its header's seq (the report seq); the gaps
 * between its sends are the timer. The check takes the median of every
 * report's gaps past the sixth (by then the wait is at its cap): 200 ms,
 * give or take the loop's poll (a stall of this shared machine moves one
 * gap, not the median). Doubling past the cap (160 to 320 ms, found by the
 * trust review) makes the median 320.
 */
#include <stdio.h>
#include <stdlib.h>

#include "expect.h"
#include "percentile.h"
#include "shard_scenario.h"

#define MAX_SENDS 256
#define MAX_REPORTS 64

struct sends {
	uint64_t seq;
	unsigned int n;
	double t[MAX_SENDS]; /* seconds */
};

/*
 * Every frame of the captures @p files that parses, with its capture time
 * in seconds, to @p fn. @return 0, or 2: a capture would not open.
 */
static int
each_frame(char **files, int nfiles, void (*fn)(const struct proto_msg *m, double t, void *arg),
	   void *arg)
{
	int f;

	for (f = 0; f < nfiles; f++) {
		pcap_t *p = frames_pcap_read(files[f], "shard_scenario");
		struct pcap_pkthdr *ph;
		const u_char *d;
		struct proto_msg m;

		if (p == NULL)
			return 2;
		while (pcap_next_ex(p, &ph, &d) == 1)
			if (proto_parse(d, ph->caplen, &proto_ports_default, &m) == PROTO_OK)
				fn(&m, (double)ph->ts.tv_sec + (double)ph->ts.tv_usec / 1e6, arg);
		pcap_close(p);
	}
	return 0;
}

/* The sends of each report (ERROR, TOKEN_LOST, L2_DONE), by its report seq. */
struct reports {
	struct sends r[MAX_REPORTS];
	unsigned int n;
};

static void
note_report(const struct proto_msg *m, double t, void *arg)
{
	struct reports *rs = arg;
	unsigned int i;

	if (m->hdr.type != PROTO_T_ERROR && m->hdr.type != PROTO_T_TOKEN_LOST && m->hdr.type != PROTO_T_L2_DONE)
		return;
	for (i = 0; i < rs->n && rs->r[i].seq != m->hdr.seq; i++)
		;
	if (i == rs->n) {
		if (rs->n == MAX_REPORTS)
			return;
		rs->r[rs->n++].seq = m->hdr.seq;
	}
	if (rs->r[i].n < MAX_SENDS)
		rs->r[i].t[rs->r[i].n++] = t;
}

int
check_backoff(char **files, int nfiles)
{
	static struct reports rs;
	static double late[MAX_REPORTS * MAX_SENDS];
	struct sends *r = rs.r;
	unsigned int nr, nl = 0, i, k, firsts = 0, again = 0;
	double first_max = 0, med;

	if (each_frame(files, nfiles, note_report, &rs) != 0)
		return 2;
	nr = rs.n;
	for (i = 0; i < nr; i++) {
		again += r[i].n > 1;
		for (k = 1; k < r[i].n; k++) {
			double gap = r[i].t[k] - r[i].t[k - 1];

			if (k == 1) {
				firsts++;
				if (gap > first_max)
					first_max = gap;
			}
			if (k > 6)
				late[nl++] = gap;
		}
	}
	EXPECT(nr > 0, "no report in the capture");
	/* A timeout sends the oldest alone: with none acknowledged, no other
	 * report is ever sent twice (every one was, each timeout, before). */
	EXPECT(again == 1, "%u of %u reports were sent again, want only the oldest", again, nr);
	EXPECT(nl >= 3, "%u resends past the sixth: the run was too short to reach the cap", nl);
	if (nl == 0)
		return 1;
	percentile_sort_double(late, nl);
	med = percentile_double(late, nl, 50);
	EXPECT(med >= 0.150 && med <= 0.250,
	       "the capped wait: median %.0f ms over %u resends, want 200 ms (PROTOCOL.md section 5)",
	       med * 1e3, nl);
	EXPECT(firsts == 0 || first_max < 0.100, "the first resend came %.0f ms after the report, "
	       "want about 5 ms", first_max * 1e3);
	printf("report resends: %u reports, %u sent again, the capped wait %.0f ms (median of %u), "
	       "the first at most %.1f ms: %s\n", nr, again, med * 1e3, nl, first_max * 1e3,
	       expect_fails ? "FAILED" : "as section 5 says");
	return expect_fails ? 1 : 0;
}

/*
 * gen-busy: a shard kept busy (test/data/shard-busy.cfg: 16 KiB tokens,
 * STATUS every millisecond). After the HELLO, BUSY_BATCHES batches of 64
 * tokens of prompt A and their data follow back to back, 64 MiB the shard
 * reads at every poll. check-busy: some STATUS came while it was busy (its
 * batches_complete between the first batch and the last). A shard sent
 * STATUS only when a poll found nothing, so one fed without a pause said
 * nothing, and its driver declared it away after away_ms.
 */
#define BUSY_B 16384
#define BUSY_G 64
#define BUSY_BATCHES 64

void
gen_busy(void)
{
	static const struct wafer_place at = {.bytes_per_token = BUSY_B};
	static uint64_t hash[BUSY_G];
	uint8_t buf[PROTO_PAYLOAD_MAX];
	struct proto_builder b;
	unsigned int k, t;

	begin(&b, buf, PROTO_T_HELLO, 0);
	send_payload(buf, proto_build_end(&b), PROTO_PORT_CTRL_DEFAULT);
	for (k = 0; k < BUSY_BATCHES; k++) {
		uint64_t pr[BUSY_G];
		uint32_t tk[BUSY_G], n;
		struct wafer_evict w;

		for (t = 0; t < BUSY_G; t++) {
			pr[t] = A_ID;
			tk[t] = k * BUSY_G + t;
			hash[t] = href(A_ID, tk[t]);
		}
		evict(k + 1, k + 1, pr, tk, BUSY_G);
		wafer_evict_init(&w, &at, k + 1, hash, BUSY_G, 77);
		w.stream = cur_epoch;
		while ((n = wafer_evict_next(&w, buf, PROTO_PAYLOAD_MAX - 64)) > 0)
			send_payload(buf, n, PROTO_PORT_EVICT_DEFAULT);
	}
}

int
check_busy(char **files, int nfiles)
{
	static struct proto_msg m;
	struct captures cap = {.files = files, .n = nfiles};
	int during = 0, statuses = 0;
	uint64_t last = 0;

	while (captures_next(&cap, &m) != NULL) {
		if (m.hdr.type != PROTO_T_STATUS)
			continue;
		statuses++;
		if (m.u.status.batches_complete > 0 && m.u.status.batches_complete < BUSY_BATCHES)
			during++;
		last = m.u.status.batches_complete;
	}
	if (cap.bad)
		return 2;
	EXPECT(last == BUSY_BATCHES, "the last STATUS says %lu batches complete, want %d",
	       (unsigned long)last, BUSY_BATCHES);
	EXPECT(during >= 1, "no STATUS while the shard was busy (of %d): a driver would call it "
	       "away", statuses);
	printf("busy shard: %d of %d STATUS frames sent while it read at every poll: %s\n", during,
	       statuses, expect_fails ? "FAILED" : "it keeps saying it is there");
	return expect_fails ? 1 : 0;
}

/*
 * gen-early: lost data found by the data that follows (PROTOCOL.md section
 * 5, "Sooner on evidence"), on a shard whose batch timeout is five seconds
 * (test/data/shard-slow-loss.cfg). Batch 1 (A 0..3) misses token 1's bytes;
 * batch 2 (B 0..3) comes whole after it; batch 3 (C 0..3) misses token 2's
 * bytes and nothing follows it. check-early: A is reported lost from token 1
 * (3 tokens) within a second of the shard's first answer, which only the
 * evidence of batch 2's data allows (the shard exits 300 ms after the last
 * frame, long before the batch timeout); C is not reported at all (no data
 * came after it, so it waits for its batch timeout, and the run ends
 * first). Before the evidence rule there was no TOKEN_LOST at all.
 */
void
gen_early(void)
{
	uint8_t buf[PROTO_PAYLOAD_MAX];
	struct proto_builder b;
	uint64_t pa[4] = {A_ID, A_ID, A_ID, A_ID}, pb[4] = {B_ID, B_ID, B_ID, B_ID};
	uint64_t pc[4] = {C_ID, C_ID, C_ID, C_ID};
	uint32_t t4[4] = {0, 1, 2, 3};

	begin(&b, buf, PROTO_T_HELLO, 0);
	send_payload(buf, proto_build_end(&b), PROTO_PORT_CTRL_DEFAULT);
	evict(1, 1, pa, t4, 4);
	data(1, pa, t4, 4, 0, B);
	data(1, pa, t4, 4, 2 * B, 4 * B); /* token 1's bytes never come */
	evict(2, 2, pb, t4, 4);
	data(2, pb, t4, 4, 0, 4 * B);
	evict(3, 3, pc, t4, 4);
	data(3, pc, t4, 4, 0, 2 * B); /* tokens 2 and 3 never come, nor anything after */
}

/* The first answer's time, and the TOKEN_LOST records (not resent): A's and the others. */
struct early {
	double first, lost_at;
	int lost_a, lost_other;
};

static void
note_lost(const struct proto_msg *m, double t, void *arg)
{
	struct early *e = arg;
	unsigned int i;

	if (e->first == 0 || t < e->first)
		e->first = t;
	if (m->hdr.type != PROTO_T_TOKEN_LOST || (m->hdr.flags & PROTO_F_RETRANSMIT))
		return;
	for (i = 0; i < m->hdr.count; i++) {
		struct proto_lost l;

		proto_get_lost(m, i, &l);
		if (l.prompt_id == A_ID && l.token_idx == 1 && l.count == 3) {
			e->lost_a++;
			e->lost_at = t;
		} else {
			e->lost_other++;
		}
	}
}

int
check_early(char **files, int nfiles)
{
	struct early e = {0};
	double first, lost_at;
	int lost_a, lost_other;

	if (each_frame(files, nfiles, note_lost, &e) != 0)
		return 2;
	first = e.first, lost_at = e.lost_at, lost_a = e.lost_a, lost_other = e.lost_other;
	EXPECT(lost_a == 1, "TOKEN_LOST of A from token 1 (3 tokens): %d, want 1 (batch 2's data "
	       "says batch 1 lost it)", lost_a);
	EXPECT(lost_other == 0, "other TOKEN_LOST records: %d, want 0 (batch 3 has no data after it: "
	       "it waits for its five-second batch timeout)", lost_other);
	EXPECT(lost_a == 0 || lost_at - first < 1.0,
	       "A reported lost %.0f ms after the first answer, want well under the 5 s batch timeout",
	       (lost_at - first) * 1e3);
	if (lost_a == 1)
		printf("lost data found by later data: A reported %.0f ms after the shard's first "
		       "answer (batch timeout 5000 ms)\n", (lost_at - first) * 1e3);
	return expect_fails ? 1 : 0;
}
