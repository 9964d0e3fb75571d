/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * kvss-dump: decode KVSS frames in pcap files, one line per frame, the way
 * tshark would. With --json, one JSON object per frame and nothing else on
 * stdout. Frames are numbered from 1, continuing across files.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <pcap/pcap.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "args.h"
#include "proto.h"

/* Readable mode prints at most this many records of one message. */
#define TEXT_MAX_RECORDS 8

struct out {
	FILE *f;
	bool json;
	bool first; /* no field printed yet in the current object */
};

static void
field_u64(struct out *o, const char *k, uint64_t v)
{
	if (o->json)
		fprintf(o->f, "%s\"%s\": %" PRIu64, o->first ? "" : ", ", k, v);
	else
		fprintf(o->f, "%s%s=%" PRIu64, o->first ? "" : " ", k, v);
	o->first = false;
}

/* An epoch: a number in JSON, 0x%08x in text, as the header's epoch and the
 * logs print it. */
static void
field_epoch(struct out *o, const char *k, uint32_t v)
{
	if (o->json)
		fprintf(o->f, "%s\"%s\": %" PRIu32, o->first ? "" : ", ", k, v);
	else
		fprintf(o->f, "%s%s=0x%08" PRIx32, o->first ? "" : " ", k, v);
	o->first = false;
}

static void
field_str(struct out *o, const char *k, const char *v)
{
	if (o->json)
		fprintf(o->f, "%s\"%s\": \"%s\"", o->first ? "" : ", ", k, v);
	else
		fprintf(o->f, "%s%s=%s", o->first ? "" : " ", k, v);
	o->first = false;
}

/*
 * A field 64 bits wide on the wire. JSON numbers are doubles to most readers
 * (jq, JavaScript): above 2^53 they round, so a prompt_id read back would name
 * another prompt. JSON gets the exact decimal as a string, which is also what
 * /kvss/prompt takes; text mode prints the number as it is.
 */
static void
field_w64(struct out *o, const char *k, uint64_t v)
{
	char b[24];

	snprintf(b, sizeof(b), "%" PRIu64, v);
	field_str(o, k, b);
}

/* Open a list (JSON) or a bracketed group (text) named @k. */
static void
list_open(struct out *o, const char *k)
{
	if (o->json)
		fprintf(o->f, "%s\"%s\": [", o->first ? "" : ", ", k);
	else
		fprintf(o->f, "%s%s:", o->first ? "" : " ", k);
	o->first = true;
}

static void
list_close(struct out *o)
{
	if (o->json)
		fputc(']', o->f);
	o->first = false;
}

/* Begin record @i of a list; false when text mode stops listing. */
static bool
rec_open(struct out *o, unsigned int i, unsigned int n)
{
	if (!o->json && i == TEXT_MAX_RECORDS) {
		fprintf(o->f, " (+%u more)", n - i);
		return false;
	}
	if (!o->json && i > TEXT_MAX_RECORDS)
		return false;
	if (o->json)
		fprintf(o->f, "%s{", i ? ", " : "");
	else
		fprintf(o->f, " [");
	o->first = true;
	return true;
}

static void
rec_close(struct out *o)
{
	fputc(o->json ? '}' : ']', o->f);
	o->first = false;
}

/*
 * The list @k of @n records of @m, each one's fields printed by @one; text
 * mode lists the first TEXT_MAX_RECORDS (rec_open).
 */
static void
print_records(struct out *o, const char *k, const struct proto_msg *m, unsigned int n,
	      void (*one)(struct out *o, const struct proto_msg *m, unsigned int i))
{
	unsigned int i;

	list_open(o, k);
	for (i = 0; i < n && rec_open(o, i, n); i++) {
		one(o, m, i);
		rec_close(o);
	}
	list_close(o);
}

static void
evict_entry(struct out *o, const struct proto_msg *m, unsigned int i)
{
	struct proto_evict_entry e;

	proto_get_evict_entry(m, i, &e);
	field_u64(o, "token", i / m->u.evict.num_caches);
	field_u64(o, "cache_id", i % m->u.evict.num_caches);
	field_w64(o, "prompt_id", e.prompt_id);
	field_u64(o, "token_idx", e.token_idx);
	field_u64(o, "sequence_id", e.sequence_id);
}

/* An EvictBatch: EVICT's, and L2_UP's (which adds ncols) before its columns. */
static void
evict_batch(struct out *o, const struct proto_msg *m)
{
	field_w64(o, "batch_no", m->u.evict.batch_no);
	field_u64(o, "num_caches", m->u.evict.num_caches);
	field_u64(o, "g", m->u.evict.g);
	if (m->hdr.type == PROTO_T_L2_UP || m->hdr.type == PROTO_T_SH_UP)
		field_u64(o, "ncols", m->u.evict.ncols);
	print_records(o, "records", m, m->hdr.count, evict_entry);
}

/* An L2Column's fields (PROTOCOL.md section 9); a SharedColumn's (section 10) add four. */
static void
l2col_fields(struct out *o, const struct proto_l2col *c, unsigned int type)
{
	field_w64(o, "key", c->key);
	field_w64(o, "parent", c->parent);
	field_w64(o, "isolation_id", c->isolation_id);
	field_w64(o, "prompt_id", c->prompt_id);
	field_w64(o, "evict_count", c->evict_count);
	field_w64(o, "first_use_ns", c->first_use_ns);
	field_u64(o, "start_token_idx", c->start_token_idx);
	field_u64(o, "num_tokens", c->num_tokens);
	field_u64(o, "cache_id", c->cache_id);
	if (proto_col_len(type) == PROTO_SHCOL_LEN) {
		field_w64(o, "object_id", c->object_id);
		field_u64(o, "gen_global", c->gen_global);
		field_u64(o, "gen_org", c->gen_org);
		field_u64(o, "layout", c->layout);
	}
}

/* ---- One record of each message type ----------------------------------------- */

static void
reserve_rec(struct out *o, const struct proto_msg *m, unsigned int i)
{
	struct proto_reserve r;

	proto_get_reserve(m, i, &r);
	field_w64(o, "prompt_id", r.prompt_id);
	field_w64(o, "continue_id", r.continue_id);
	field_u64(o, "start_token_idx", r.start_token_idx);
	field_u64(o, "num_tokens", r.num_tokens);
	field_u64(o, "cache_id", r.cache_id);
}

static void
delete_rec(struct out *o, const struct proto_msg *m, unsigned int i)
{
	struct proto_delete d;

	proto_get_delete(m, i, &d);
	field_w64(o, "prompt_id", d.prompt_id);
	field_w64(o, "evict_count", d.evict_count);
	field_u64(o, "start_token_idx", d.start_token_idx);
	field_u64(o, "end_token_idx", d.end_token_idx);
	field_u64(o, "cache_id", d.cache_id);
}

static void
l2_down_rec(struct out *o, const struct proto_msg *m, unsigned int i)
{
	struct proto_l2col c;

	proto_get_l2_down(m, i, &c);
	l2col_fields(o, &c, m->hdr.type);
}

static void
l2_up_col(struct out *o, const struct proto_msg *m, unsigned int i)
{
	struct proto_l2col c;

	proto_get_l2_up_col(m, i, &c);
	l2col_fields(o, &c, m->hdr.type);
}

static void
l2_inventory_rec(struct out *o, const struct proto_msg *m, unsigned int i)
{
	struct proto_l2col c;

	proto_get_l2_inventory(m, i, &c);
	l2col_fields(o, &c, m->hdr.type);
}

static void
l2_delete_rec(struct out *o, const struct proto_msg *m, unsigned int i)
{
	struct proto_l2del d;

	proto_get_l2_delete(m, i, &d);
	field_w64(o, "key", d.key);
	field_w64(o, "isolation_id", d.isolation_id);
	field_w64(o, "evict_count", d.evict_count);
	field_u64(o, "cache_id", d.cache_id);
}

static void
l2_done_rec(struct out *o, const struct proto_msg *m, unsigned int i)
{
	struct proto_l2done d;
	const char *name;

	proto_get_l2_done(m, i, &d);
	name = proto_err_name(d.status);
	field_w64(o, "key", d.key);
	field_w64(o, "isolation_id", d.isolation_id);
	field_u64(o, "cache_id", d.cache_id);
	field_str(o, "op", d.op == PROTO_L2OP_L2_DOWN ? "L2_DOWN" : d.op == PROTO_L2OP_L2_UP ? "L2_UP" :
			   d.op == PROTO_L2OP_SH_DOWN ? "SH_DOWN" : d.op == PROTO_L2OP_SH_UP ? "SH_UP" :
			   d.op == PROTO_L2OP_L2_GONE ? "L2_GONE" : "UNKNOWN");
	field_u64(o, "status", d.status);
	field_str(o, "status_name", name ? name : "UNKNOWN");
}

static void
cache_info_rec(struct out *o, const struct proto_msg *m, unsigned int i)
{
	struct proto_cache_info c;

	proto_get_cache_info(m, i, &c);
	field_u64(o, "cache_id", c.cache_id);
	field_u64(o, "num_buffers", c.num_buffers);
	field_u64(o, "bytes_per_token", c.bytes_per_token);
	field_w64(o, "capacity_tokens", c.capacity_tokens);
	field_w64(o, "stored_tokens", c.stored_tokens);
	field_w64(o, "prompts", c.prompts);
	if (m->hdr.version >= 2) {
		field_w64(o, "l2_capacity_tokens", c.l2_capacity_tokens);
		field_w64(o, "l2_stored_tokens", c.l2_stored_tokens);
	}
}

static void
error_rec(struct out *o, const struct proto_msg *m, unsigned int i)
{
	struct proto_error e;
	const char *name;

	proto_get_error(m, i, &e);
	name = proto_err_name(e.code);
	field_w64(o, "seq", e.seq);
	field_w64(o, "prompt_id", e.prompt_id);
	field_u64(o, "token_idx", e.token_idx);
	field_u64(o, "cache_id", e.cache_id);
	field_u64(o, "code", e.code);
	field_str(o, "code_name", name ? name : "UNKNOWN");
}

static void
refill_done_rec(struct out *o, const struct proto_msg *m, unsigned int i)
{
	struct proto_refill_done d;

	proto_get_refill_done(m, i, &d);
	field_w64(o, "refill_id", d.refill_id);
	field_u64(o, "tokens", d.tokens);
	field_u64(o, "status", d.status);
	field_w64(o, "bytes", d.bytes);
}

static void
lost_rec(struct out *o, const struct proto_msg *m, unsigned int i)
{
	struct proto_lost l;

	proto_get_lost(m, i, &l);
	field_w64(o, "prompt_id", l.prompt_id);
	field_u64(o, "token_idx", l.token_idx);
	if (m->hdr.version >= 2)
		field_u64(o, "tokens", l.count);
	field_u64(o, "cache_id", l.cache_id);
}

/* ---- Messages with more than a list of records -------------------------------- */

/* REFILL: requests of variable length (walked in order), each with its chunks. */
static void
print_refill(struct out *o, const struct proto_msg *m)
{
	unsigned int i, j, n = m->hdr.count;
	struct proto_refill_req r;
	const uint8_t *ch;
	uint32_t off = 0;

	list_open(o, "records");
	for (i = 0; proto_next_refill(m, &off, &r, &ch); i++) {
		if (!rec_open(o, i, n))
			continue;
		field_w64(o, "refill_id", r.refill_id);
		field_w64(o, "evict_count", r.evict_count);
		field_u64(o, "sequence_id", r.sequence_id);
		field_u64(o, "cache_idx", r.cache_idx);
		field_u64(o, "cache_id", r.cache_id);
		field_u64(o, "num_chunks", r.num_chunks);
		list_open(o, "chunks");
		for (j = 0; j < r.num_chunks && rec_open(o, j, r.num_chunks); j++) {
			struct proto_refill_chunk c;

			proto_get_refill_chunk(ch, j, &c);
			field_w64(o, "prompt_id", c.prompt_id);
			field_u64(o, "start_token_idx", c.start_token_idx);
			field_u64(o, "num_tokens", c.num_tokens);
			rec_close(o);
		}
		list_close(o);
		rec_close(o);
	}
	list_close(o);
}

static void
print_l2_inventory(struct out *o, const struct proto_msg *m)
{
	uint32_t total, first;

	proto_get_l2_inventory_hdr(m, &total, &first);
	field_u64(o, "total", total);
	field_u64(o, "first", first);
	print_records(o, "records", m, m->hdr.count, l2_inventory_rec);
}

static void
print_status(struct out *o, const struct proto_msg *m)
{
	field_w64(o, "batches_complete", m->u.status.batches_complete);
	field_w64(o, m->hdr.version == 1 ? "last_seq_done" : "reports", m->u.status.reports);
	field_w64(o, "uptime_ns", m->u.status.uptime_ns);
	/* "flags" is the common header's; the body's are status_flags. */
	field_u64(o, "status_flags", m->u.status.flags);
	field_epoch(o, "driver_epoch", m->u.status.driver_epoch);
	print_records(o, "caches", m, m->hdr.count, cache_info_rec);
}

static void
print_evict_data(struct out *o, const struct proto_msg *m)
{
	field_w64(o, "batch_no", m->u.data.batch_no);
	field_u64(o, "cache_id", m->u.data.cache_id);
	field_u64(o, "stream_offset", m->u.data.stream_offset);
	field_u64(o, "stream_len", m->u.data.stream_len);
	if (m->hdr.version >= 2)
		field_epoch(o, "driver_epoch", m->u.data.driver_epoch);
	field_u64(o, "payload_len", m->data_len);
}

static void
print_refill_data(struct out *o, const struct proto_msg *m)
{
	field_w64(o, "refill_id", m->u.refill_data.refill_id);
	field_u64(o, "sequence_id", m->u.refill_data.sequence_id);
	field_u64(o, "cache_idx", m->u.refill_data.cache_idx);
	field_u64(o, "cache_id", m->u.refill_data.cache_id);
	field_u64(o, "buffer_id", m->u.refill_data.buffer_id);
	field_u64(o, "stream_offset", m->u.refill_data.stream_offset);
	field_u64(o, "stream_len", m->u.refill_data.stream_len);
	field_u64(o, "payload_len", m->data_len);
}

/* A message's body after its header: by type; an unknown type prints nothing. */
static void
print_body(struct out *o, const struct proto_msg *m)
{
	unsigned int n = m->hdr.count;

	switch (m->hdr.type) {
	case PROTO_T_RESERVE:
		print_records(o, "records", m, n, reserve_rec);
		break;
	case PROTO_T_EVICT:
		evict_batch(o, m);
		break;
	case PROTO_T_REFILL:
		print_refill(o, m);
		break;
	case PROTO_T_DELETE:
		print_records(o, "records", m, n, delete_rec);
		break;
	case PROTO_T_L2_DOWN:
	case PROTO_T_SH_DOWN:
		print_records(o, "records", m, n, l2_down_rec);
		break;
	case PROTO_T_L2_UP:
	case PROTO_T_SH_UP:
		evict_batch(o, m);
		print_records(o, "columns", m, m->u.evict.ncols, l2_up_col);
		break;
	case PROTO_T_L2_DELETE:
		print_records(o, "records", m, n, l2_delete_rec);
		break;
	case PROTO_T_L2_DONE:
		print_records(o, "records", m, n, l2_done_rec);
		break;
	case PROTO_T_L2_INVENTORY:
		print_l2_inventory(o, m);
		break;
	case PROTO_T_STATUS:
		print_status(o, m);
		break;
	case PROTO_T_REPORT_ACK:
		field_w64(o, "cum_seq", m->u.ack.cum_seq);
		break;
	case PROTO_T_ACK:
		field_w64(o, "cum_seq", m->u.ack.cum_seq);
		if (m->hdr.version >= 2)
			field_w64(o, "recv_seq", m->u.ack.recv_seq);
		break;
	case PROTO_T_ERROR:
		print_records(o, "records", m, n, error_rec);
		break;
	case PROTO_T_REFILL_DONE:
		print_records(o, "records", m, n, refill_done_rec);
		break;
	case PROTO_T_TOKEN_LOST:
		print_records(o, "records", m, n, lost_rec);
		break;
	case PROTO_T_EVICT_DATA:
		print_evict_data(o, m);
		break;
	case PROTO_T_REFILL_DATA:
		print_refill_data(o, m);
		break;
	default:
		break;
	}
}

static void
ip_str(char *b, size_t n, uint32_t ip)
{
	snprintf(b, n, "%u.%u.%u.%u", ip >> 24, (ip >> 16) & 0xff, (ip >> 8) & 0xff, ip & 0xff);
}

static void
print_frame(struct out *o, uint64_t no, const uint8_t *frame, uint32_t caplen,
	    const struct proto_ports *ports, struct proto_msg *m)
{
	enum proto_reason r = proto_parse(frame, caplen, ports, m);
	const struct proto_hdr *h = &m->hdr;

	o->first = true;
	if (o->json) {
		fputc('{', o->f);
		field_u64(o, "frame", no);
		if (r != PROTO_OK) {
			field_str(o, "error", proto_reason_name(r));
		} else {
			field_str(o, "type", proto_type_name(h->type));
			field_u64(o, "version", h->version);
			field_u64(o, "flags", h->flags);
			field_u64(o, "model_id", h->model_id);
			field_u64(o, "shard_id", h->shard_id);
			field_u64(o, "count", h->count);
			field_u64(o, "epoch", h->epoch);
			field_w64(o, "seq", h->seq);
			print_body(o, m);
		}
		fputs("}\n", o->f);
		return;
	}

	fprintf(o->f, "%" PRIu64 " ", no);
	if (r != PROTO_OK) {
		fprintf(o->f, "dropped: %s (%u bytes)\n", proto_reason_name(r), caplen);
		return;
	}
	{
		char s[16], d[16], shard[8];

		ip_str(s, sizeof(s), m->addr.src_ip);
		ip_str(d, sizeof(d), m->addr.dst_ip);
		if (h->shard_id == PROTO_SHARD_ALL)
			snprintf(shard, sizeof(shard), "all");
		else
			snprintf(shard, sizeof(shard), "%u", h->shard_id);
		fprintf(o->f, "%s:%u > %s:%u %s", s, m->addr.src_port, d, m->addr.dst_port,
			proto_type_name(h->type));
		if (m->addr.has_vlan)
			fprintf(o->f, " vlan=%u", m->addr.vlan_tci & 0xfff);
		fprintf(o->f, " seq=%" PRIu64 " epoch=0x%08x model=%u shard=%s flags=0x%x count=%u",
			h->seq, h->epoch, h->model_id, shard, h->flags, h->count);
	}
	o->first = false;
	print_body(o, m);
	fputc('\n', o->f);
}

static int
parse_ports(const char *s, struct proto_ports *p)
{
	unsigned int c, e, r;
	char tail;

	if (sscanf(s, "%u,%u,%u%c", &c, &e, &r, &tail) != 3 || c == 0 || e == 0 || r == 0 ||
	    c > 65535 || e > 65535 || r > 65535 || c == e || c == r || e == r)
		return -EINVAL;
	p->ctrl = (uint16_t)c;
	p->evict = (uint16_t)e;
	p->refill = (uint16_t)r;
	return 0;
}

static void
usage(FILE *f)
{
	fprintf(f, "usage: kvss-dump [--json] [--ports CTRL,EVICT,REFILL] FILE.pcap...\n"
		   "  --json         one JSON object per frame, nothing else on stdout\n"
		   "  --ports C,E,R  UDP ports of the control, evict-data and refill-data\n"
		   "                 streams (default 7400,7401,7402)\n"
		   "  --version      the release and the wire protocol version\n");
}

int
main(int argc, char **argv)
{
	static const struct option opts[] = {
		{"json", no_argument, NULL, 'j'},
		{"ports", required_argument, NULL, 'p'},
		{"help", no_argument, NULL, 'h'},
		{"version", no_argument, NULL, 'V'},
		{NULL, 0, NULL, 0},
	};
	struct proto_ports ports = proto_ports_default;
	struct out o = {0};

	ports.accept_v1 = true; /* captures of either version are read */
	static struct proto_msg msg;
	uint64_t no = 0;
	int c, i;

	args_check_stdout_at_exit("kvss-dump");
	o.f = stdout; /* the stream that helper made */
	while ((c = getopt_long(argc, argv, "jp:h", opts, NULL)) != -1) {
		switch (c) {
		case 'j':
			o.json = true;
			break;
		case 'p':
			if (parse_ports(optarg, &ports) != 0) {
				fprintf(stderr, "kvss-dump: --ports: want three distinct ports "
						"C,E,R, got '%s'\n", optarg);
				return 2;
			}
			break;
		case 'V':
			args_version("kvss-dump", PROTO_VERSION);
			return 0;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (optind >= argc) {
		usage(stderr);
		return 2;
	}
	for (i = optind; i < argc; i++) {
		char err[PCAP_ERRBUF_SIZE];
		struct pcap_pkthdr *ph;
		const u_char *data;
		pcap_t *p = pcap_open_offline(argv[i], err);
		int rc;

		if (p == NULL) {
			fprintf(stderr, "kvss-dump: %s: not a readable pcap file: %s\n", argv[i], err);
			return 2;
		}
		if (pcap_datalink(p) != DLT_EN10MB) {
			fprintf(stderr, "kvss-dump: %s: link type %s, want Ethernet\n", argv[i],
				pcap_datalink_val_to_name(pcap_datalink(p)));
			pcap_close(p);
			return 2;
		}
		while ((rc = pcap_next_ex(p, &ph, &data)) == 1)
			print_frame(&o, ++no, data, ph->caplen, &ports, &msg);
		if (rc == PCAP_ERROR) {
			fprintf(stderr, "kvss-dump: %s: %s\n", argv[i], pcap_geterr(p));
			pcap_close(p);
			return 2;
		}
		pcap_close(p);
	}
	return fflush(stdout) == 0 ? 0 : 1; /* a failure is said at exit */
}
