/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The second tier's messages (docs/PROTOCOL.md section 9) against the
 * document's golden vectors (section 8), read from the document itself:
 * each built byte for byte by lib/proto's builders and parsed back to its
 * fields; and the parser's refusals of bodies that do not add up.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <string.h>

#include "frames.h"
#include "proto.h"

#define FU 1700000000000000000ULL

static struct proto_msg msg;

static const struct proto_l2col down_col = {0x1111, 0x2222, 0x3333, 111, 1000, FU, 64, 64, 0, 0, 0, 0, 0};
static const struct proto_l2col up_col = {0x1111, 0x2222, 0x3333, 222, 0, FU, 64, 64, 0, 0, 0, 0, 0};
static const struct proto_l2col inv_col = {0x1111, 0x2222, 0x3333, 0, 0, FU, 64, 64, 0, 0, 0, 0, 0};

/* The driver's frames carry its epoch; a shard's, the shard's own (0x05060708). */
#define SHARD_EPOCH 0x05060708u

static void
begin(struct proto_builder *b, uint8_t *buf, uint32_t cap, uint8_t type, uint64_t seq,
      uint16_t shard)
{
	struct proto_hdr h = {.type = type, .shard_id = shard,
			      .epoch = type >= PROTO_T_STATUS ? SHARD_EPOCH : 0x01020304, .seq = seq};

	cr_assert_eq(proto_build_begin(b, buf, cap, &h), 0);
}

/* Built by @p got against vector @p name: byte for byte. */
static void
same(const char *name, const uint8_t *got, uint32_t n)
{
	uint8_t want[512];
	uint32_t w = frames_golden(name, want, sizeof(want));

	cr_assert_gt(w, 0, "no vector %s in %s", name, frames_protocol_md());
	cr_assert_eq(n, w, "%s: %u bytes built, the document has %u", name, n, w);
	cr_assert_arr_eq(got, want, n, "%s differs from the document", name);
}

static void
parse(const char *name, uint8_t type)
{
	uint8_t p[512];
	uint32_t n = frames_golden(name, p, sizeof(p));

	cr_assert_eq(proto_parse_payload(p, n, 7400, &proto_ports_default, &msg), PROTO_OK, "%s",
		     name);
	cr_assert_eq(msg.hdr.type, type);
	cr_assert_eq(msg.hdr.epoch, type >= PROTO_T_STATUS ? SHARD_EPOCH : 0x01020304);
}

static void
col_is(const struct proto_l2col *c, const struct proto_l2col *w)
{
	cr_assert_eq(c->key, w->key);
	cr_assert_eq(c->parent, w->parent);
	cr_assert_eq(c->isolation_id, w->isolation_id);
	cr_assert_eq(c->prompt_id, w->prompt_id);
	cr_assert_eq(c->evict_count, w->evict_count);
	cr_assert_eq(c->first_use_ns, w->first_use_ns);
	cr_assert_eq(c->start_token_idx, w->start_token_idx);
	cr_assert_eq(c->num_tokens, w->num_tokens);
	cr_assert_eq(c->cache_id, w->cache_id);
}

Test(l2_golden, l2_down_is_built_and_parsed)
{
	uint8_t got[512];
	struct proto_builder b;
	struct proto_l2col c;

	begin(&b, got, sizeof(got), PROTO_T_L2_DOWN, 9, PROTO_SHARD_ALL);
	cr_assert_eq(proto_build_l2_down(&b, &down_col), 0);
	same("l2_down", got, proto_build_end(&b));
	parse("l2_down", PROTO_T_L2_DOWN);
	cr_assert_eq(msg.hdr.seq, 9);
	cr_assert_eq(msg.hdr.count, 1);
	proto_get_l2_down(&msg, 0, &c);
	col_is(&c, &down_col);
}

Test(l2_golden, l2_up_is_built_and_parsed)
{
	uint8_t got[512];
	struct proto_builder b;
	struct proto_evict_hdr eh = {.batch_no = 1001, .num_caches = 1, .g = 2, .ncols = 1};
	struct proto_evict_entry e[2] = {{222, 64, 9}, {222, 65, 9}}, x;
	struct proto_l2col c;

	begin(&b, got, sizeof(got), PROTO_T_L2_UP, 10, PROTO_SHARD_ALL);
	cr_assert_eq(proto_build_l2_up_hdr(&b, &eh), 0);
	cr_assert_eq(proto_build_l2_up_entry(&b, &e[0]), 0);
	cr_assert_eq(proto_build_l2_up_entry(&b, &e[1]), 0);
	cr_assert_eq(proto_build_l2_up_col(&b, &up_col), 0);
	same("l2_up", got, proto_build_end(&b));
	parse("l2_up", PROTO_T_L2_UP);
	cr_assert_eq(msg.hdr.count, 2);
	cr_assert_eq(msg.u.evict.batch_no, 1001);
	cr_assert_eq(msg.u.evict.num_caches, 1);
	cr_assert_eq(msg.u.evict.g, 2);
	cr_assert_eq(msg.u.evict.ncols, 1);
	proto_get_evict_entry(&msg, 1, &x);
	cr_assert_eq(x.prompt_id, 222);
	cr_assert_eq(x.token_idx, 65);
	proto_get_l2_up_col(&msg, 0, &c);
	col_is(&c, &up_col);
}

Test(l2_golden, l2_delete_is_built_and_parsed)
{
	uint8_t got[512];
	struct proto_builder b;
	struct proto_l2del d = {0x1111, 0x3333, 1001, 0}, x;

	begin(&b, got, sizeof(got), PROTO_T_L2_DELETE, 11, PROTO_SHARD_ALL);
	cr_assert_eq(proto_build_l2_delete(&b, &d), 0);
	same("l2_delete", got, proto_build_end(&b));
	parse("l2_delete", PROTO_T_L2_DELETE);
	proto_get_l2_delete(&msg, 0, &x);
	cr_assert_eq(x.key, 0x1111);
	cr_assert_eq(x.isolation_id, 0x3333);
	cr_assert_eq(x.evict_count, 1001);
	cr_assert_eq(x.cache_id, 0);
}

Test(l2_golden, l2_done_is_built_and_parsed)
{
	uint8_t got[512];
	struct proto_builder b;
	struct proto_l2done d = {0x1111, 0x3333, 0, 1, 0}, x;

	begin(&b, got, sizeof(got), PROTO_T_L2_DONE, 4, 0);
	cr_assert_eq(proto_build_l2_done(&b, &d), 0);
	same("l2_done", got, proto_build_end(&b));
	parse("l2_done", PROTO_T_L2_DONE);
	cr_assert_eq(msg.hdr.seq, 4, "a report: its report seq, never 0");
	proto_get_l2_done(&msg, 0, &x);
	cr_assert_eq(x.key, 0x1111);
	cr_assert_eq(x.op, 1);
	cr_assert_eq(x.status, 0);
}

Test(l2_golden, l2_inventory_is_built_and_parsed)
{
	uint8_t got[512];
	struct proto_builder b;
	struct proto_l2col c;
	uint32_t total, first;

	begin(&b, got, sizeof(got), PROTO_T_L2_INVENTORY, 0, 0);
	cr_assert_eq(proto_build_l2_inventory_hdr(&b, 1, 0), 0);
	cr_assert_eq(proto_build_l2_inventory_col(&b, &inv_col), 0);
	same("l2_inventory", got, proto_build_end(&b));
	parse("l2_inventory", PROTO_T_L2_INVENTORY);
	proto_get_l2_inventory_hdr(&msg, &total, &first);
	cr_assert_eq(total, 1);
	cr_assert_eq(first, 0);
	proto_get_l2_inventory(&msg, 0, &c);
	col_is(&c, &inv_col);
}

/* ---- The shared level (section 10): SharedColumns ---- */

static enum proto_reason parse_changed(const char *name, uint32_t off, uint32_t v);

static const struct proto_l2col sh_col = {0x1111, 0x2222, 0x3333, 111, 1000, FU, 64, 64, 0,
					  0x0123456789abcdefull, 1, 2, 0x5a5a5a5a};

static void
sh_is(const struct proto_l2col *c, const struct proto_l2col *w)
{
	col_is(c, w);
	cr_assert_eq(c->object_id, w->object_id);
	cr_assert_eq(c->gen_global, w->gen_global);
	cr_assert_eq(c->gen_org, w->gen_org);
	cr_assert_eq(c->layout, w->layout);
}

Test(l2_golden, sh_down_is_built_and_parsed)
{
	uint8_t got[512];
	struct proto_builder b;
	struct proto_l2col c;

	begin(&b, got, sizeof(got), PROTO_T_SH_DOWN, 12, PROTO_SHARD_ALL);
	cr_assert_eq(proto_build_l2_down(&b, &sh_col), 0);
	same("sh_down", got, proto_build_end(&b));
	parse("sh_down", PROTO_T_SH_DOWN);
	cr_assert_eq(msg.hdr.count, 1);
	proto_get_l2_down(&msg, 0, &c);
	sh_is(&c, &sh_col);
}

Test(l2_golden, sh_up_is_built_and_parsed)
{
	uint8_t got[512];
	struct proto_builder b;
	struct proto_evict_hdr eh = {.batch_no = 1002, .num_caches = 1, .g = 2, .ncols = 1};
	struct proto_evict_entry e[2] = {{222, 64, 9}, {222, 65, 9}};
	struct proto_l2col c, w = sh_col;

	w.prompt_id = 222;
	w.evict_count = 0;
	begin(&b, got, sizeof(got), PROTO_T_SH_UP, 13, PROTO_SHARD_ALL);
	cr_assert_eq(proto_build_l2_up_hdr(&b, &eh), 0);
	cr_assert_eq(proto_build_l2_up_entry(&b, &e[0]), 0);
	cr_assert_eq(proto_build_l2_up_entry(&b, &e[1]), 0);
	cr_assert_eq(proto_build_l2_up_col(&b, &w), 0);
	same("sh_up", got, proto_build_end(&b));
	parse("sh_up", PROTO_T_SH_UP);
	cr_assert_eq(msg.u.evict.ncols, 1);
	cr_assert_eq(msg.u.evict.batch_no, 1002);
	proto_get_l2_up_col(&msg, 0, &c);
	sh_is(&c, &w);
}

/*
 * One L2_DONE record @p d in a report of seq @p seq: built as golden frame
 * @p name is, that frame parsed, its record into @p x.
 */
static void
l2done_golden(const char *name, uint64_t seq, const struct proto_l2done *d, struct proto_l2done *x)
{
	uint8_t got[512];
	struct proto_builder b;

	begin(&b, got, sizeof(got), PROTO_T_L2_DONE, seq, 0);
	cr_assert_eq(proto_build_l2_done(&b, d), 0);
	same(name, got, proto_build_end(&b));
	parse(name, PROTO_T_L2_DONE);
	cr_assert_eq(msg.hdr.seq, seq, "%s: a report: its report seq, never 0", name);
	proto_get_l2_done(&msg, 0, x);
}

Test(l2_golden, sh_done_is_built_and_parsed)
{
	struct proto_l2done d = {0x1111, 0x3333, 0, 4, PROTO_E_SHARED_BAD}, x;

	l2done_golden("sh_done", 5, &d, &x);
	cr_assert_eq(x.op, 4);
	cr_assert_eq(x.status, PROTO_E_SHARED_BAD);
	cr_assert_str_eq(proto_err_name(x.status), "SHARED_BAD");
}

Test(l2_golden, sh_key_is_built_and_parsed)
{
	struct proto_l2done d = {0x1111, 0x3333, 0, PROTO_L2OP_SH_UP, PROTO_E_SHARED_KEY}, x;

	l2done_golden("sh_key", 7, &d, &x);
	cr_assert_eq(x.status, 13);
	cr_assert_str_eq(proto_err_name(x.status), "SHARED_KEY");
}

Test(l2_golden, sh_down_key_is_built_and_parsed)
{
	struct proto_l2done d = {0x1111, 0x3333, 0, PROTO_L2OP_SH_DOWN, PROTO_E_SHARED_KEY}, x;

	l2done_golden("sh_down_key", 8, &d, &x);
	cr_assert_eq(x.op, PROTO_L2OP_SH_DOWN);
	cr_assert_eq(x.status, 13);
	cr_assert_str_eq(proto_err_name(x.status), "SHARED_KEY");
}

Test(l2_golden, l2_gone_is_built_and_parsed)
{
	struct proto_l2done d = {0x1111, 0x3333, 1, PROTO_L2OP_L2_GONE, PROTO_E_L2_FAILED}, x;

	l2done_golden("l2_gone", 6, &d, &x);
	cr_assert_eq(x.op, 5);
	cr_assert_eq(x.cache_id, 1);
	cr_assert_eq(x.status, PROTO_E_L2_FAILED);
}

Test(l2_golden, a_shared_column_is_not_an_l2_column)
{
	uint8_t p[512];
	uint32_t n = frames_golden("sh_down", p, sizeof(p));

	/* An SH_DOWN's 88-byte record retyped as an L2_DOWN does not add up. */
	p[5] = PROTO_T_L2_DOWN;
	cr_assert_eq(proto_parse_payload(p, n, 7400, &proto_ports_default, &msg), PROTO_R_BAD_COUNT);
	/* An SH_UP whose ncols says two columns for the one it carries. */
	cr_assert_eq(parse_changed("sh_up", 32 + 12, 2), PROTO_R_BAD_COUNT);
	/* Builders refuse to mix: an L2 column into an SH_UP begun as such is a SharedColumn. */
	{
		uint8_t got[512];
		struct proto_builder b;

		begin(&b, got, sizeof(got), PROTO_T_SH_DOWN, 1, 0);
		cr_assert_eq(proto_build_l2_delete(&b, &(struct proto_l2del){1, 2, 0, 0}), -EINVAL);
	}
}

/* A golden payload with one 32-bit field changed at @p off. */
static enum proto_reason
parse_changed(const char *name, uint32_t off, uint32_t v)
{
	uint8_t p[512];
	uint32_t n = frames_golden(name, p, sizeof(p));

	proto_st32(p + off, v);
	return proto_parse_payload(p, n, 7400, &proto_ports_default, &msg);
}

Test(l2_golden, bodies_that_do_not_add_up_are_refused)
{
	/* L2_UP: ncols (body offset 12) says two columns, the body holds one. */
	cr_assert_eq(parse_changed("l2_up", 32 + 12, 2), PROTO_R_BAD_COUNT);
	/* ... or G (offset 10, with num_caches) says three tokens for two entries. */
	cr_assert_eq(parse_changed("l2_up", 32 + 8, 1 | 3 << 16), PROTO_R_BAD_COUNT);
	/* L2_DOWN with count 2 for one record. */
	cr_assert_eq(parse_changed("l2_down", 12, 0xffff | 2 << 16), PROTO_R_BAD_COUNT);
	/* L2_INVENTORY with count 2. */
	cr_assert_eq(parse_changed("l2_inventory", 12, 0 | 2 << 16), PROTO_R_BAD_COUNT);
	/* The same field rewritten as it was: still fine (the test can tell). */
	cr_assert_eq(parse_changed("l2_done", 12, 0 | 1 << 16), PROTO_OK);
}
