/* SPDX-License-Identifier: BSD-3-Clause */
/* kvss-trace's output beyond the table: usage, the second tier, the plot (trace_priv.h). */
#include <inttypes.h>
#include <string.h>

#include "plot.h"
#include "tier2.h"
#include "trace_priv.h"

const char *const admit_names[] = {"all", "seen2", NULL};

double
gbps(const struct opts *o, double tokens_per_s)
{
	return tokens_per_s * (double)o->kv_bytes * 8 / 1e9;
}

void
usage(FILE *f)
{
	fprintf(f,
		"usage: kvss-trace --trace FILE|--generate N --capacity N[,N...] [options]\n"
		"       kvss-trace --version\n"
		"  --generate N       the built-in workload (chats, system prompts, orgs)\n"
		"  --capacity N,...   shard capacity in tokens; inf (or 0) for unlimited\n"
		"  --column C         tokens per cache column (default 64)\n"
		"  --policy P[,P...]  lru (default), lfu, priority, slru, admit, followup (a list:\n"
		"                     each in turn)\n"
		"  --probation PCT    slru: share of capacity for columns seen once (default 10)\n"
		"  --followup PCT     followup: answer-length classes whose stored tokens are\n"
		"                     used again less than this share go cold (default 10)\n"
		"  --ttl-last SEC     expire entries this long after last use\n"
		"  --ttl-first SEC    expire entries this long after first use\n"
		"  --block-tokens N   Mooncake block size (default 512)\n"
		"  --orgs N           spread requests over N organizations by first block\n"
		"  --limit N          replay the first N requests only\n"
		"  --json             one JSON object per capacity on stdout\n"
		"  --baseline         also a plain LRU over the trace's blocks (Mooncake format)\n"
		"  --oracle           also offline references over the blocks: Belady with bypass\n"
		"                     (told of every block; not told of first sightings), and LRU\n"
		"                     told which blocks return (ever; within 120 s), and a cache\n"
		"                     told how many more times each block is used, not when,\n"
		"                     or also when the last use comes, or only the mean gap\n"
		"                     between a block's uses over its life;\n"
		"                     and replacement by a table of reuse by kind of access and\n"
		"                     age fitted on the whole trace in hindsight\n"
		"  --no-minus-one     replay the last prompt token too (beyond the design)\n"
		"  --kv-bytes-per-token B  KV bytes of one token over a model's shards: the\n"
		"                     eviction and refill rates also in Gb/s\n"
		"  --replicas R       R independent drivers, each with the capacity given\n"
		"  --route P          which replica gets a request: affinity (default), random,\n"
		"                     org, prefix, chash (consistent hashing, bounded loads)\n"
		"  --l2 N,...         also a second tier of N tokens behind each capacity, over\n"
		"                     the trace's blocks (Mooncake format): hit ratio by tier,\n"
		"                     L2 tokens written and read (docs/kvss-trace.md)\n"
		"  --l2-admit R,...   what L2 takes of what L1 frees: all (default), seen2 (a\n"
		"                     block used twice: fewer writes, fewer hits)\n"
		"  --recompute-tokens-per-s R  an L2 hit counts only when reading it is faster\n"
		"                     than computing it at R tokens/s (needs --kv-bytes-per-token)\n"
		"  --l2-read-gbps G   L2 read bandwidth for that, GB/s (default 3)\n"
		"  --l2-latency-us U  and its latency per request (default 100)\n"
		"  --multimodal-every N  with --generate: an image of 64 tokens ends every Nth\n"
		"                     prompt (a trace marks its own: \"multimodal\": [START, END, ...])\n"
		"  --org-ttl NAME:LAST:FIRST  organization NAME's TTLs by last and first use,\n"
		"                     seconds on the trace's clock (0: the global one); its hit\n"
		"                     ratio is reported apart (repeat for more)\n"
		"  --orgs-from FILE   the same for every organization a kvss configuration's\n"
		"                     driver.orgs names, as the application applies them\n"
		"  --plot FILE.png    draw hit ratio against capacity (gnuplot): each policy of\n"
		"                     --policy P,P..., and --baseline, --oracle's Belady, --l2\n"
		"  --l2-dir DIR       with --l2, also replay through the driver library's own\n"
		"                     second tier, its shards' L2 in lib/kvdisk files in DIR\n"
		"                     (removed at the end), every refilled byte checked\n"
		"  --draft CAP        also a draft model beside the target: its own PrefixMap and\n"
		"                     shard of CAP tokens (inf: unlimited), the same requests;\n"
		"                     its hit ratio, and requests that hit in one model only\n"
		"  --speculate K      speculative decoding: after each verified answer token, K\n"
		"                     proposals; the target accepts up to the first it rejects;\n"
		"                     rejected ones are evicted, then overwritten in place\n"
		"  --spec-reject-pct P  the share of proposals rejected (default 20)\n"
		"  --spec-seed S      the seed of those choices (default 1): runs replay exactly\n"
		"A k-token answer evicts k-1 tokens: the wafer never runs its last token (the\n"
		"design's generated-token caching).\n");
}

int
draw(const struct opts *o, const struct curves *cv)
{
	struct plot_series s[12];
	struct plot p = {.png = o->plot, .title = "kvss-trace: hit ratio against shard capacity",
			 .xlabel = "capacity (tokens per cache)", .ylabel = "hit ratio", .logx = true,
			 .ymin = 0, .ymax = 1};
	char names[8][64], l2name[96], err[512];
	unsigned int k, ns = 0;

	for (k = 0; k < o->npol; k++) {
		snprintf(names[k], sizeof(names[k]), "%s (the driver library)",
			 prefixcache_policy_names[o->pols[k]]);
		s[ns++] = (struct plot_series){names[k], cv->x, cv->hit[k], cv->n, true};
	}
	if (o->baseline)
		s[ns++] = (struct plot_series){"plain LRU over blocks (baseline)", cv->x, cv->base, cv->n,
					       true};
	if (o->oracle)
		s[ns++] = (struct plot_series){"Belady with bypass (the offline optimum)", cv->x,
					       cv->belady, cv->n, true};
	if (o->nl2) {
		snprintf(l2name, sizeof(l2name), "with an L2 of %.3g tokens behind (model, admit %s)",
			 (double)o->l2[0], o->l2_admit & 1 ? "all" : "seen2");
		s[ns++] = (struct plot_series){l2name, cv->x, cv->l2, cv->n, true};
	}
	if (cv->n == 0) {
		fprintf(stderr, "kvss-trace: --plot: no finite capacity to draw\n");
		return -1;
	}
	if (plot_png(&p, s, ns, err, sizeof(err)) != 0) {
		fprintf(stderr, "kvss-trace: --plot %s: %s\n", o->plot, err);
		return -1;
	}
	fprintf(stderr, "kvss-trace: --plot: %s\n", o->plot);
	return 0;
}

/*
 * --l2: the two-tier model at L1 capacity @p cap for each L2 capacity and
 * admission rule asked, as a JSON array member or as text lines.
 */
int
print_l2(const struct opts *o, const struct workload *wl, const struct oracle_blocks *b,
	 uint64_t cap)
{
	unsigned int i, a;
	bool first = true, bad = false;

	if (o->json)
		printf(", \"l2\": [");
	for (i = 0; i < o->nl2; i++)
		for (a = 0; admit_names[a] != NULL; a++) {
			struct tier2_params tp = {.l1_tokens = cap, .l2_tokens = o->l2[i],
						  .block = o->block, .admit = (enum tier2_admit)a,
						  .bytes_per_token = o->kv_bytes,
						  .recompute_tokens_per_s = o->recompute_tps,
						  .l2_read_gbps = o->l2_gbps,
						  .l2_read_latency_us = o->l2_lat_us};
			struct tier2_result r;
			struct result lib = {0};
			double hr, s;

			if (!(o->l2_admit & (1u << a)))
				continue;
			if (tier2_run(b, &tp, &r) != 0) {
				fprintf(stderr, "kvss-trace: out of memory\n");
				return -1;
			}
			hr = r.input ? (double)(r.hit_l1 + r.hit_l2) / (double)r.input : 0;
			s = r.seconds > 0 ? r.seconds : 1;
			if (o->l2_dir != NULL && o->l2[i] > 0) {
				/* The driver library itself, its shards' L2 in real files. */
				if (run_tiers(o, wl, cap, o->l2[i], a, &lib) != 0)
					return -1;
			}
			if (o->json) {
				printf("%s{\"l2_tokens\": %" PRIu64 ", \"admit\": \"%s\", \"hit_ratio\": %.4f"
				       ", \"hit_tokens_l1\": %" PRIu64 ", \"hit_tokens_l2\": %" PRIu64
				       ", \"recompute_faster_tokens\": %" PRIu64
				       ", \"l2_written_tokens\": %" PRIu64 ", \"l2_read_tokens\": %" PRIu64
				       ", \"l2_write_tokens_per_s\": %.1f, \"l2_write_tokens_per_s_peak\": %.1f"
				       ", \"l2_read_tokens_per_s\": %.1f, \"l2_read_tokens_per_s_peak\": %.1f",
				       first ? "" : ", ", o->l2[i], admit_names[a], hr, r.hit_l1, r.hit_l2,
				       r.recompute_faster, r.written, r.read, (double)r.written / s,
				       r.written_peak, (double)r.read / s, r.read_peak);
				if (o->kv_bytes)
					printf(", \"l2_write_gbps_peak\": %.3f, \"l2_read_gbps_peak\": %.3f",
					       gbps(o, r.written_peak), gbps(o, r.read_peak));
				if (o->l2_dir != NULL && o->l2[i] > 0)
					printf(", \"library\": {\"hit_ratio\": %.4f, \"hit_tokens\": %" PRIu64
					       ", \"hit_tokens_l2\": %" PRIu64 ", \"l2_written_tokens\": %" PRIu64
					       ", \"l2_read_tokens\": %" PRIu64 ", \"recompute_faster_tokens\": %" PRIu64
					       ", \"protocol_errors\": %" PRIu64
					       ", \"verify_failures\": %" PRIu64 ", \"wall_s\": %.1f}",
					       lib.input ? (double)lib.hit / (double)lib.input : 0, lib.hit,
					       lib.l2_hit, lib.l2_down, lib.l2_read, lib.l2_slower, lib.perr,
					       lib.vfail, lib.wall);
				printf("}");
			} else {
				printf("%-12s L2 %" PRIu64 " tokens (admit %s): hit ratio %.4f (L1 %.4f, L2 "
				       "%.4f), %" PRIu64 " L2 hit tokens recomputed (faster); L2 written %"
				       PRIu64 ", read %" PRIu64 " tokens; tokens/s written %.0f, busiest 10 s "
				       "%.0f; read %.0f, busiest %.0f\n", "", o->l2[i], admit_names[a], hr,
				       r.input ? (double)r.hit_l1 / (double)r.input : 0,
				       r.input ? (double)r.hit_l2 / (double)r.input : 0, r.recompute_faster,
				       r.written, r.read, (double)r.written / s, r.written_peak,
				       (double)r.read / s, r.read_peak);
				if (o->l2_dir != NULL && o->l2[i] > 0)
					printf("%-12s   the driver library with its shards' L2 files: hit ratio "
					       "%.4f (L2 %.4f), %" PRIu64 " tokens down, %" PRIu64 " up; %" PRIu64
					       " protocol errors, %" PRIu64 " verify failures (%.1f s)\n", "",
					       lib.input ? (double)lib.hit / (double)lib.input : 0,
					       lib.input ? (double)lib.l2_hit / (double)lib.input : 0, lib.l2_down,
					       lib.l2_read, lib.perr, lib.vfail, lib.wall);
			}
			bad |= lib.perr != 0 || lib.vfail != 0;
			first = false;
		}
	if (o->json)
		printf("]");
	return bad ? 1 : 0;
}

