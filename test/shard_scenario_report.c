/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * shard_scenario check-backoff: how a shard resends its reliable reports
 * (ERROR, TOKEN_LOST, L2_DONE) that no REPORT_ACK answers, read off the
 * capture's timestamps (PROTOCOL.md section 5: the wait starts at 5 ms and
 * doubles up to 200 ms). A capture replay sends no REPORT_ACK, so every
 * report the shard made is resent until it exits.
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
#include "shard_scenario.h"

#define MAX_SENDS 256
#define MAX_REPORTS 64

struct sends {
	uint64_t seq;
	unsigned int n;
	double t[MAX_SENDS]; /* seconds */
};

static int
by_value(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

int
check_backoff(char **files, int nfiles)
{
	static struct sends r[MAX_REPORTS];
	static double late[MAX_REPORTS * MAX_SENDS];
	unsigned int nr = 0, nl = 0, i, k, firsts = 0;
	double first_max = 0, med;
	int f;

	for (f = 0; f < nfiles; f++) {
		pcap_t *p = frames_pcap_read(files[f], "shard_scenario");
		struct pcap_pkthdr *ph;
		const u_char *d;
		struct proto_msg m;

		if (p == NULL)
			return 2;
		while (pcap_next_ex(p, &ph, &d) == 1) {
			if (proto_parse(d, ph->caplen, &proto_ports_default, &m) != PROTO_OK ||
			    (m.hdr.type != PROTO_T_ERROR && m.hdr.type != PROTO_T_TOKEN_LOST &&
			     m.hdr.type != PROTO_T_L2_DONE))
				continue;
			for (i = 0; i < nr && r[i].seq != m.hdr.seq; i++)
				;
			if (i == nr) {
				if (nr == MAX_REPORTS)
					continue;
				r[nr++].seq = m.hdr.seq;
			}
			if (r[i].n < MAX_SENDS)
				r[i].t[r[i].n++] = (double)ph->ts.tv_sec + (double)ph->ts.tv_usec / 1e6;
		}
		pcap_close(p);
	}
	for (i = 0; i < nr; i++) {
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
	EXPECT(nl >= 3, "%u resends past the sixth: the run was too short to reach the cap", nl);
	if (nl == 0)
		return 1;
	qsort(late, nl, sizeof(late[0]), by_value);
	med = late[nl / 2];
	EXPECT(med >= 0.150 && med <= 0.250,
	       "the capped wait: median %.0f ms over %u resends, want 200 ms (PROTOCOL.md section 5)",
	       med * 1e3, nl);
	EXPECT(firsts == 0 || first_max < 0.100, "the first resend came %.0f ms after the report, "
	       "want about 5 ms", first_max * 1e3);
	printf("report resends: %u reports, the capped wait %.0f ms (median of %u), the first "
	       "at most %.1f ms: %s\n", nr, med * 1e3, nl, first_max * 1e3,
	       expect_fails ? "FAILED" : "as section 5 says");
	return expect_fails ? 1 : 0;
}
