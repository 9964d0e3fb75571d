/* SPDX-License-Identifier: BSD-3-Clause */
/* kvss-trace's output beyond the table: usage, the second tier, the plot (trace_priv.h). */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "fleet.h"
#include "plot.h"
#include "proto.h"
#include "tier2.h"
#include "trace_priv.h"

const char *const admit_names[] = {"all", "seen2", "short", NULL};

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
		"  --documents N      with --generate: 60%% of requests read one of a library\n"
		"                     of N documents (make demo's built-in workload: 300)\n"
		"  --capacity N,...   shard capacity in tokens (1e6 or 1M; k, M, G); inf (or 0)\n"
		"                     for unlimited\n"
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
		"  --baseline         also a plain LRU over the trace's blocks (Mooncake format:\n"
		"                     refused on a trace without block ids)\n"
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
		"                     block used twice: fewer writes, fewer hits), short (a\n"
		"                     block used twice or whose request answered in at most\n"
		"                     63 tokens)\n"
		"  --recompute-tokens-per-s R  an L2 hit counts only when reading it is faster\n"
		"                     than computing it at R tokens/s (needs --kv-bytes-per-token;\n"
		"                     with --ttft, the prefill rate, and the replay takes every hit)\n"
		"  --l2-read-gbps G   L2 read bandwidth for that, GB/s (default 3)\n"
		"  --l2-latency-us U  and its latency per request (default 100)\n"
		"  --ttft             also each replay's time to first token (TTFT), p50 and p99,\n"
		"                     modelled (lib/wafermodel) on the same arrivals three ways:\n"
		"                     compute-only (no hit), io-only (every hit refilled) and\n"
		"                     adaptive (a hit refilled only where that beats computing\n"
		"                     it, the driver's rule); needs --recompute-tokens-per-s and\n"
		"                     --kv-bytes-per-token (docs/kvss-trace.md)\n"
		"  --arrivals A       trace (default: the trace's timestamps) or poisson\n"
		"  --time-scale X     with trace: the timestamps times X (default 1)\n"
		"  --arrival-rate R   with poisson: R requests a second (default 5)\n"
		"  --arrival-seed S   with poisson: its seed (default 1)\n"
		"  --max-inflight N   the wafer's run slots (default 8)\n"
		"  --prefill-overhead-us U  a prefill's fixed cost beside its tokens (default 0)\n"
		"  --refill-latency-us U    a refill from DRAM: U us (default 20)\n"
		"  --refill-read-gbps G     and its bytes at G GB/s (default 12.5); a hit's part\n"
		"                     from L2 adds --l2-latency-us and --l2-read-gbps's line\n"
		"  --multimodal-every N  with --generate: an image of 64 tokens ends every Nth\n"
		"                     prompt (a trace marks its own: \"multimodal\": [START, END, ...])\n"
		"  --org-ttl NAME:LAST:FIRST  organization NAME's TTLs by last and first use,\n"
		"                     seconds on the trace's clock (0: the global one); its hit\n"
		"                     ratio is reported apart (repeat for more)\n"
		"  --org-share NAME:SHARE[:CAP]  organization NAME's DRAM share and cap,\n"
		"                     fractions of the capacity (driver.orgs' dram_share and\n"
		"                     dram_cap): room is made from organizations above their\n"
		"                     share first; its hit ratio is reported apart (after any\n"
		"                     --org-ttl of it)\n"
		"  --orgs-from FILE   the same for every organization a kvss configuration's\n"
		"                     driver.orgs names (TTLs and shares), as the application\n"
		"                     applies them\n"
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
		"  --shared N,...     the fleet model (docs/kvss-trace.md): --replicas replicas,\n"
		"                     each with DRAM of the capacity and --disk, and a level of N\n"
		"                     tokens (inf) shared by all, of whole columns: hit ratio by\n"
		"                     level, against one replica holding all the fleet's memory\n"
		"  --shared-admit R,...  what goes down to it: evicted (what a replica's last\n"
		"                     local tier frees), all (every column once computed);\n"
		"                     default both\n"
		"  --shared-ttl SEC   the shared level's expiry by first use (0: none)\n"
		"  --shared-touch     a replica's local hit makes the shared copy most recent\n"
		"  --disk N           each replica's local disk in the fleet model, tokens\n"
		"  --restart R@I      replica R emptied (DRAM and disk) at request I: its hit\n"
		"                     ratio in its 500 requests before and after\n"
		"  --add-replica-at I a replica added at request I (the router moves a share\n"
		"                     of the organizations to it)\n"
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
	char names[8][64], l2name[96], err[512], name[512];
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
			 (double)o->l2[0], admit_names[__builtin_ctz(o->l2_admit)]);
		s[ns++] = (struct plot_series){l2name, cv->x, cv->l2, cv->n, true};
	}
	if (cv->n == 0) {
		fprintf(stderr, "kvss-trace: --plot: no finite capacity to draw\n");
		return -1;
	}
	if (plot_png(&p, s, ns, err, sizeof(err)) != 0) {
		fprintf(stderr, "kvss-trace: --plot %s: %s\n", plot_shown(o->plot, name, sizeof(name)), err);
		return -1;
	}
	fprintf(stderr, "kvss-trace: --plot: %s\n", plot_shown(o->plot, name, sizeof(name)));
	return 0;
}

/*
 * --l2: the two-tier model at L1 capacity @p cap for each L2 capacity and
 * admission rule asked, as a JSON array member or as text lines; with
 * --l2-dir the library's replay too, and with --ttft its times to first
 * token at @p arrival_ns (where its hits come from L2 as well).
 */
int
print_l2(const struct opts *o, const struct workload *wl, const struct oracle_blocks *b,
	 uint64_t cap, const uint64_t *arrival_ns)
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
				       ", \"l2_read_tokens_per_s\": %.1f, \"l2_read_tokens_per_s_peak\": %.1f"
				       ", \"l2_peak_window_s\": %u",
				       first ? "" : ", ", o->l2[i], admit_names[a], hr, r.hit_l1, r.hit_l2,
				       r.recompute_faster, r.written, r.read, (double)r.written / s,
				       r.written_peak, (double)r.read / s, r.read_peak, r.peak_window_s);
				if (o->kv_bytes)
					printf(", \"l2_write_gbps_peak\": %.3f, \"l2_read_gbps_peak\": %.3f",
					       gbps(o, r.written_peak), gbps(o, r.read_peak));
				if (o->l2_dir != NULL && o->l2[i] > 0) {
					printf(", \"library\": {\"hit_ratio\": %.4f, \"hit_tokens\": %" PRIu64
					       ", \"hit_tokens_l2\": %" PRIu64 ", \"l2_written_tokens\": %" PRIu64
					       ", \"l2_read_tokens\": %" PRIu64 ", \"recompute_faster_tokens\": %" PRIu64
					       ", \"l2_deletes\": %" PRIu64 ", \"l2_deletes_absorbed\": %" PRIu64
					       ", \"protocol_errors\": %" PRIu64
					       ", \"verify_failures\": %" PRIu64 ", \"wall_s\": %.1f",
					       lib.input ? (double)lib.hit / (double)lib.input : 0, lib.hit,
					       lib.l2_hit, lib.l2_down, lib.l2_read, lib.l2_slower, lib.l2_dels,
					       lib.l2_dels_absorbed, lib.perr, lib.vfail, lib.wall);
					if (o->ttft && ttft_print(o, arrival_ns, &lib, "") != 0) {
						free(lib.ttft);
						return -1;
					}
					printf("}");
				}
				printf("}");
			} else {
				printf("%-12s L2 %" PRIu64 " tokens (admit %s): hit ratio %.4f (L1 %.4f, L2 "
				       "%.4f), %" PRIu64 " L2 hit tokens recomputed (faster); L2 written %"
				       PRIu64 ", read %" PRIu64 " tokens; tokens/s written %.0f, busiest %u s "
				       "%.0f; read %.0f, busiest %.0f\n", "", o->l2[i], admit_names[a], hr,
				       r.input ? (double)r.hit_l1 / (double)r.input : 0,
				       r.input ? (double)r.hit_l2 / (double)r.input : 0, r.recompute_faster,
				       r.written, r.read, (double)r.written / s, r.peak_window_s, r.written_peak,
				       (double)r.read / s, r.read_peak);
				if (o->l2_dir != NULL && o->l2[i] > 0) {
					printf("%-12s   the driver library with its shards' L2 files: hit ratio "
					       "%.4f (L2 %.4f), %" PRIu64 " tokens down, %" PRIu64 " up; %" PRIu64
					       " protocol errors, %" PRIu64 " verify failures (%.1f s)\n", "",
					       lib.input ? (double)lib.hit / (double)lib.input : 0,
					       lib.input ? (double)lib.l2_hit / (double)lib.input : 0, lib.l2_down,
					       lib.l2_read, lib.perr, lib.vfail, lib.wall);
					if (o->ttft && ttft_print(o, arrival_ns, &lib, "  ") != 0) {
						free(lib.ttft);
						return -1;
					}
				}
			}
			bad |= lib.perr != 0 || lib.vfail != 0;
			free(lib.ttft);
			first = false;
		}
	if (o->json)
		printf("]");
	return bad ? 1 : 0;
}


/* ---- The fleet (fleet.h): --shared, --restart, --add-replica-at ---------------- */

/*
 * The fleet's options against each other and the trace of @p n requests:
 * 0, or a message naming the option and -1.
 */
int
fleet_check(const struct opts *o, size_t n, bool shaped)
{
	uint32_t nrep = o->replicas > 1 ? o->replicas : 1;
	unsigned int k;

	if (!fleet_asked(o)) {
		if (shaped || o->disk_set) {
			fprintf(stderr, "kvss-trace: --shared-admit, --shared-ttl, --shared-touch and --disk "
					"shape the fleet model: give --shared, --restart or --add-replica-at\n");
			return -1;
		}
		return 0;
	}
	if (o->policy != PREFIXCACHE_LRU || o->npol > 1 || o->ttl_last_s || o->ttl_first_s ||
	    o->nottl) {
		fprintf(stderr, "kvss-trace: --shared, --restart, --add-replica-at: the fleet model's "
				"tiers are LRU without local expiry: no --policy but lru, no --ttl-last, "
				"--ttl-first, --org-ttl, --orgs-from\n");
		return -1;
	}
	for (k = 0; k < o->ncap; k++)
		if (o->capacity[k] != 0 && o->capacity[k] < o->column) {
			fprintf(stderr, "kvss-trace: --capacity: %" PRIu64 " tokens is less than one column "
					"(%u tokens): a replica's DRAM holds whole columns\n",
				o->capacity[k], o->column);
			return -1;
		}
	for (k = 0; k < o->nshared; k++)
		if (o->shared[k] < o->column) {
			fprintf(stderr, "kvss-trace: --shared: %" PRIu64 " tokens is less than one column "
					"(%u tokens)\n", o->shared[k], o->column);
			return -1;
		}
	if (o->disk != 0 && o->disk < o->column) {
		fprintf(stderr, "kvss-trace: --disk: %" PRIu64 " tokens is less than one column (%u "
				"tokens)\n", o->disk, o->column);
		return -1;
	}
	if (o->add_at != 0 && o->add_at >= n) {
		fprintf(stderr, "kvss-trace: --add-replica-at: request %zu is not before the last of the "
				"%zu requests replayed\n", o->add_at, n);
		return -1;
	}
	if (o->add_at != 0 && nrep == ROUTE_MAX_REPLICAS) {
		fprintf(stderr, "kvss-trace: --add-replica-at: %u replicas already, the most\n", nrep);
		return -1;
	}
	if (o->restart_rep >= 0) {
		if (o->restart_at >= n) {
			fprintf(stderr, "kvss-trace: --restart: request %zu is not before the last of the "
					"%zu requests replayed\n", o->restart_at, n);
			return -1;
		}
		/* A restart is run apart from an added replica: of the replicas at the start. */
		if ((uint32_t)o->restart_rep >= nrep) {
			fprintf(stderr, "kvss-trace: --restart: replica %d is not one of the %u replicas "
					"(0 to %u)\n", o->restart_rep, nrep, nrep - 1);
			return -1;
		}
	}
	return 0;
}

/* One run of the fleet model and what it is. */
struct fleet_line {
	uint64_t shared; /* 0: none */
	int admit;	 /* -1: none */
	/* Nothing done (the events' windows watched: what the fleet would have
	 * had); the replica restarted; the replica added. */
	struct fleet_result r, rs, add;
};

static uint64_t
times(uint64_t a, uint64_t k)
{
	return a == FLEET_UNLIMITED || (k && a > FLEET_UNLIMITED / k) ? FLEET_UNLIMITED : a * k;
}

static uint64_t
plus(uint64_t a, uint64_t b)
{
	return a == FLEET_UNLIMITED || b == FLEET_UNLIMITED || a > FLEET_UNLIMITED - b ? FLEET_UNLIMITED
										       : a + b;
}

/* A size in tokens: 0 and unlimited as JSON has them (0, null) or as text does (none, inf). */
static const char *
size_str(const struct opts *o, uint64_t v, char *buf, size_t len, const char *none)
{
	if (v == 0)
		snprintf(buf, len, "%s", o->json ? "0" : none);
	else if (v == FLEET_UNLIMITED)
		snprintf(buf, len, "%s", o->json ? "null" : "inf");
	else
		snprintf(buf, len, "%" PRIu64, v);
	return buf;
}

static double
share(uint64_t part, uint64_t whole)
{
	return whole ? (double)part / (double)whole : 0.0;
}

static double
hit_ratio(const struct fleet_result *r)
{
	return share(r->hit_dram + r->hit_disk + r->hit_shared, r->input);
}

/*
 * After a restart, the first part of the after-window within 5 points of
 * the replica's hit ratio before the restart (@p same NULL), or of the same
 * part had it not restarted: the part's end in requests, or 0 (never).
 */
static unsigned int
back_after(const struct fleet_result *r, const struct fleet_result *same)
{
	double before = fleet_ratio(&r->rs_before);
	unsigned int j;

	for (j = 0; j < FLEET_PARTS; j++) {
		double ref = same != NULL ? fleet_ratio(&same->rs_part[j]) : before;

		if (r->rs_part[j].requests && fleet_ratio(&r->rs_part[j]) >= ref - 0.05)
			return (j + 1) * (FLEET_WINDOW / FLEET_PARTS);
	}
	return 0;
}

/* The after-window's parts; one the trace ended before: null (JSON) or - (text). */
static void
print_parts(const struct opts *o, const struct fleet_window *w)
{
	unsigned int j;

	for (j = 0; j < FLEET_PARTS; j++)
		if (w[j].requests)
			printf("%s%.4f", j ? (o->json ? ", " : ",") : "", fleet_ratio(&w[j]));
		else
			printf("%s%s", j ? (o->json ? ", " : ",") : "", o->json ? "null" : "-");
}

/* --restart: the run with the replica emptied (@p rs) against the one without (@p same). */
static void
print_restart(const struct opts *o, const struct fleet_result *rs, const struct fleet_result *same,
	      const char *sz, const char *admit)
{
	unsigned int b = back_after(rs, NULL), bs = back_after(rs, same);

	if (o->json) {
		printf(", \"restart\": {\"replica\": %d, \"at\": %zu, \"window\": %u"
		       ", \"before_requests\": %" PRIu64 ", \"before\": %.4f, \"after_requests\": %" PRIu64
		       ", \"after\": %.4f, \"after_same\": %.4f, \"parts\": [",
		       o->restart_rep, o->restart_at, FLEET_WINDOW, rs->rs_before.requests,
		       fleet_ratio(&rs->rs_before), rs->rs_after.requests, fleet_ratio(&rs->rs_after),
		       fleet_ratio(&same->rs_after));
		print_parts(o, rs->rs_part);
		printf("], \"parts_same\": [");
		print_parts(o, same->rs_part);
		printf("], \"back_after\": %u, \"back_after_same\": %u, \"fleet_hit_ratio\": %.4f"
		       ", \"first_input_tokens\": %" PRIu64 ", \"first_local_hit_tokens\": %" PRIu64
		       ", \"first_shared_hit_tokens\": %" PRIu64 ", \"first_local_hit_tokens_same\": %"
		       PRIu64 "}", b, bs, hit_ratio(rs), rs->rs_first_input, rs->rs_first_local,
		       rs->rs_first_shared, same->rs_first_local);
		return;
	}
	printf("%-12s fleet-restart shared_tokens=%s admit=%s replica=%d at=%zu before=%.4f "
	       "before_requests=%" PRIu64 " after=%.4f after_requests=%" PRIu64 " after_same=%.4f "
	       "parts=", "", sz, admit, o->restart_rep, o->restart_at, fleet_ratio(&rs->rs_before),
	       rs->rs_before.requests, fleet_ratio(&rs->rs_after), rs->rs_after.requests,
	       fleet_ratio(&same->rs_after));
	print_parts(o, rs->rs_part);
	printf(" parts_same=");
	print_parts(o, same->rs_part);
	if (b)
		printf(" back_after=%u", b);
	else
		printf(" back_after=never");
	if (bs)
		printf(" back_after_same=%u", bs);
	else
		printf(" back_after_same=never");
	printf(" fleet_hit_ratio=%.4f first_input=%" PRIu64 " first_local_hit=%" PRIu64
	       " first_shared_hit=%" PRIu64 " first_local_hit_same=%" PRIu64 "\n", hit_ratio(rs),
	       rs->rs_first_input, rs->rs_first_local, rs->rs_first_shared, same->rs_first_local);
}

/* --add-replica-at: the run with a replica added (@p ad) against the one without (@p same). */
static void
print_add(const struct opts *o, const struct fleet_result *ad, const struct fleet_result *same,
	  const char *sz, const char *admit)
{
	uint32_t nrep = (o->replicas > 1 ? o->replicas : 1) + 1;

	if (o->json)
		printf(", \"add\": {\"at\": %zu, \"replicas\": %u, \"orgs_moved\": %d, \"window\": %u"
		       ", \"before\": %.4f, \"after\": %.4f, \"after_same\": %.4f"
		       ", \"new_replica_requests\": %" PRIu64 ", \"new_replica\": %.4f"
		       ", \"fleet_hit_ratio\": %.4f}", o->add_at, nrep, ad->add_moved, FLEET_WINDOW,
		       fleet_ratio(&ad->add_before), fleet_ratio(&ad->add_after),
		       fleet_ratio(&same->add_after), ad->add_new.requests, fleet_ratio(&ad->add_new),
		       hit_ratio(ad));
	else
		printf("%-12s fleet-add shared_tokens=%s admit=%s at=%zu replicas=%u orgs_moved=%d "
		       "before=%.4f after=%.4f after_same=%.4f new_replica=%.4f new_replica_requests=%"
		       PRIu64 " fleet_hit_ratio=%.4f\n", "", sz, admit, o->add_at, nrep, ad->add_moved,
		       fleet_ratio(&ad->add_before), fleet_ratio(&ad->add_after),
		       fleet_ratio(&same->add_after), fleet_ratio(&ad->add_new), ad->add_new.requests,
		       hit_ratio(ad));
}

/* One size and rule (or none): the fleet, then its events; @p one the comparison's hit ratio. */
static void
print_run(const struct opts *o, const struct fleet_line *l, double one, bool first)
{
	const struct fleet_result *r = &l->r;
	const char *admit = l->admit >= 0 ? fleet_admit_names[l->admit] : NULL;
	char sz[32];

	size_str(o, l->shared, sz, sizeof(sz), "none");
	if (o->json)
		printf("%s{\"shared_tokens\": %s, \"admit\": %s%s%s, \"hit_ratio\": %.4f"
		       ", \"hit_ratio_dram\": %.4f, \"hit_ratio_disk\": %.4f, \"hit_ratio_shared\": %.4f"
		       ", \"vs_one\": %.4f, \"requests\": %" PRIu64 ", \"input_tokens\": %" PRIu64
		       ", \"hit_tokens_dram\": %" PRIu64 ", \"hit_tokens_disk\": %" PRIu64
		       ", \"hit_tokens_shared\": %" PRIu64 ", \"disk_written_tokens\": %" PRIu64
		       ", \"shared_written_tokens\": %" PRIu64 ", \"shared_exists_tokens\": %" PRIu64
		       ", \"shared_evicted_tokens\": %" PRIu64 ", \"shared_expired_tokens\": %" PRIu64
		       ", \"shared_peak_tokens\": %" PRIu64 ", \"shared_touched_tokens\": %" PRIu64,
		       first ? "" : ", ", sz, admit ? "\"" : "", admit ? admit : "null",
		       admit ? "\"" : "", hit_ratio(r), share(r->hit_dram, r->input),
		       share(r->hit_disk, r->input), share(r->hit_shared, r->input), hit_ratio(r) - one,
		       r->requests, r->input, r->hit_dram, r->hit_disk, r->hit_shared, r->disk_written,
		       r->shared_written, r->shared_exists, r->shared_evicted, r->shared_expired,
		       r->shared_peak, r->shared_touched);
	else
		printf("%-12s fleet shared_tokens=%s admit=%s hit_ratio=%.4f hit_dram=%.4f "
		       "hit_disk=%.4f hit_shared=%.4f vs_one=%+.4f input_tokens=%" PRIu64
		       " hit_tokens=%" PRIu64 " disk_written=%" PRIu64 " shared_written=%" PRIu64
		       " shared_exists=%" PRIu64 " shared_evicted=%" PRIu64 " shared_expired=%" PRIu64
		       " shared_peak=%" PRIu64 " shared_touched=%" PRIu64 "\n", "", sz, admit ? admit : "-", hit_ratio(r),
		       share(r->hit_dram, r->input), share(r->hit_disk, r->input),
		       share(r->hit_shared, r->input), hit_ratio(r) - one, r->input,
		       r->hit_dram + r->hit_disk + r->hit_shared, r->disk_written, r->shared_written,
		       r->shared_exists, r->shared_evicted, r->shared_expired, r->shared_peak,
		       r->shared_touched);
	if (o->restart_rep >= 0)
		print_restart(o, &l->rs, r, sz, admit ? admit : "-");
	if (o->add_at)
		print_add(o, &l->add, r, sz, admit ? admit : "-");
	if (o->json)
		printf("}");
}

/* fleet_run's failure @frc, said: -1. */
static int
fleet_failed(int frc)
{
	fprintf(stderr, "kvss-trace: the fleet model: %s\n",
		frc == -1 ? "out of memory" : "bad parameters");
	return -1;
}

/*
 * Run each of the @nl lines of @l over the first @n requests, with @p's
 * settings and the line's shared level and rule.
 */
static int
run_lines(const struct opts *o, const struct workload *wl, size_t n, struct fleet_params *p,
	    struct fleet_line *l, unsigned int nl)
{
	unsigned int i;
	int frc;

	for (i = 0; i < nl; i++) {
		struct fleet_params q;

		p->shared_tokens = l[i].shared;
		p->admit = l[i].admit >= 0 ? (enum fleet_admit)l[i].admit : FLEET_ADMIT_EVICTED;
		/* Nothing done, the events' windows watched; then each event alone. */
		q = *p;
		q.restart_watch_only = q.add_watch_only = true;
		frc = fleet_run(wl, n, &q, &l[i].r);
		q = *p;
		q.add_at = 0;
		if (frc == 0 && o->restart_rep >= 0)
			frc = fleet_run(wl, n, &q, &l[i].rs);
		q = *p;
		q.restart_replica = -1;
		if (frc == 0 && o->add_at)
			frc = fleet_run(wl, n, &q, &l[i].add);
		if (frc != 0)
			return fleet_failed(frc);
	}
	return 0;
}

/*
 * One replica holding all the fleet's memory (@nrep replicas' DRAM @dram
 * and disks), then with each shared level's tokens too: one[0..nshared].
 */
static int
run_one_replica(const struct opts *o, const struct workload *wl, size_t n, uint32_t nrep, uint64_t dram,
	  const uint64_t *iso, struct fleet_result *one)
{
	unsigned int s;
	int frc;

	for (s = 0; s <= o->nshared; s++) {
		struct fleet_params q = {.replicas = 1, .column = o->column, .minus_one = !o->no_minus_one,
					 .dram_tokens = times(dram, nrep), .disk_tokens = times(o->disk, nrep),
					 .restart_replica = -1, .iso = iso};

		if (s > 0)
			q.disk_tokens = plus(q.disk_tokens, o->shared[s - 1]);
		if ((frc = fleet_run(wl, n, &q, &one[s])) != 0)
			return fleet_failed(frc);
	}
	return 0;
}

/* The fleet's settings: the JSON object's opening keys, or the line above its runs. */
static void
print_fleet_head(const struct opts *o, uint32_t nrep, uint64_t dram)
{
	char b1[32], b2[32];

	if (o->json) {
		printf(", \"fleet\": {\"replicas\": %u, \"route\": \"%s\", \"column\": %u"
		       ", \"dram_tokens\": %s, \"disk_tokens\": %s, \"shared_ttl_s\": %" PRIu64
		       ", \"shared_touch\": %s, \"runs\": [", nrep, route_policy_name(o->route), o->column,
		       size_str(o, dram, b1, sizeof(b1), "0"), size_str(o, o->disk, b2, sizeof(b2), "0"),
		       o->shared_ttl_s, o->shared_touch ? "true" : "false");
	} else {
		printf("%-12s fleet: %u replicas (route %s), each DRAM %s and disk %s tokens; shared "
		       "level first-use TTL %" PRIu64 " s (0: none), local hits %s it; LRU of whole "
		       "columns of %u tokens\n", "", nrep, route_policy_name(o->route),
		       size_str(o, dram, b1, sizeof(b1), "0"), size_str(o, o->disk, b2, sizeof(b2), "0"),
		       o->shared_ttl_s, o->shared_touch ? "refresh" : "do not refresh", o->column);
	}
}

/* run_one_replica's results, one[0..nshared]: a JSON list's items, or a line each. */
static void
print_run_one_replica(const struct opts *o, const struct fleet_result *one, uint32_t nrep, uint64_t dram)
{
	char b1[32], b2[32];
	unsigned int s;

	for (s = 0; s <= o->nshared; s++) {
		const struct fleet_result *r = &one[s];
		uint64_t d = times(o->disk, nrep);

		if (s > 0)
			d = plus(d, o->shared[s - 1]);
		size_str(o, times(dram, nrep), b1, sizeof(b1), "0");
		size_str(o, d, b2, sizeof(b2), "0");
		if (o->json)
			printf("%s{\"dram_tokens\": %s, \"disk_tokens\": %s, \"with_shared\": %s"
			       ", \"hit_ratio\": %.4f, \"hit_ratio_dram\": %.4f, \"hit_ratio_disk\": %.4f}",
			       s ? ", " : "", b1, b2, s ? "true" : "false", hit_ratio(r),
			       share(r->hit_dram, r->input), share(r->hit_disk, r->input));
		else
			printf("%-12s fleet-one dram_tokens=%s disk_tokens=%s with_shared=%s hit_ratio=%.4f "
			       "hit_dram=%.4f hit_disk=%.4f\n", "", b1, b2, s ? "yes" : "no", hit_ratio(r),
			       share(r->hit_dram, r->input), share(r->hit_disk, r->input));
	}
}

int
print_fleet(const struct opts *o, const struct workload *wl, uint64_t cap)
{
	uint32_t nrep = o->replicas > 1 ? o->replicas : 1;
	size_t n = o->limit && o->limit < wl->n ? o->limit : wl->n, i;
	uint64_t dram = cap ? cap : FLEET_UNLIMITED, *iso = NULL;
	struct fleet_params p = {.replicas = nrep, .route = o->route, .column = o->column,
				 .minus_one = !o->no_minus_one, .dram_tokens = dram,
				 .disk_tokens = o->disk, .shared_ttl_ms = o->shared_ttl_s * 1000,
				 .shared_touch = o->shared_touch,
				 .restart_replica = o->restart_rep, .restart_at = o->restart_at,
				 .add_at = o->add_at};
	struct fleet_line *l = calloc(1 + 2 * (size_t)o->nshared, sizeof(*l));
	struct fleet_result one[9];
	unsigned int nl = 0, s, a;
	int rc = -1;

	if (l == NULL)
		return -1;
	if (o->orgs) {
		if ((iso = malloc(n * sizeof(uint64_t))) == NULL)
			goto out;
		for (i = 0; i < n; i++)
			iso[i] = proto_ref_isolation_id("org", 3) + wl->r[i].first_block % o->orgs;
		p.iso = iso;
	}
	/* The fleet without a shared level, then each size and rule. */
	l[nl++] = (struct fleet_line){.admit = -1};
	for (s = 0; s < o->nshared; s++)
		for (a = 0; fleet_admit_names[a] != NULL; a++)
			if (o->shared_admit & (1u << a))
				l[nl++] = (struct fleet_line){.shared = o->shared[s], .admit = (int)a};
	if (run_lines(o, wl, n, &p, l, nl) != 0 || run_one_replica(o, wl, n, nrep, dram, iso, one) != 0)
		goto out;
	print_fleet_head(o, nrep, dram);
	for (i = 0; i < nl; i++)
		print_run(o, &l[i], hit_ratio(&one[0]), i == 0);
	if (o->json)
		printf("], \"one\": [");
	print_run_one_replica(o, one, nrep, dram);
	if (o->json)
		printf("]}");
	rc = 0;
out:
	free(iso);
	free(l);
	return rc;
}
