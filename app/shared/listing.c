/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * kvss-shared: a pool's objects listed and classified by name. Whatever is
 * in the pool is another program's input: names are parsed by
 * shared_obj.h's own parsers, anything else is "not ours" and left alone.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kvss_shared.h"

/* Bounds what a listing holds in memory (about 100 bytes an object). */
#define KS_LIST_MAX (64u << 20)

static int
add(void *arg, const char *ns, const char *name)
{
	struct ks_list *l = arg;
	struct ks_obj *o;
	uint16_t shard, cache;

	if (l->n == l->cap) {
		uint32_t cap = l->cap != 0 ? l->cap * 2 : 1024;
		struct ks_obj *v;

		if (cap > KS_LIST_MAX)
			return -E2BIG;
		v = realloc(l->v, (size_t)cap * sizeof(*v));
		if (v == NULL)
			return -ENOMEM;
		l->v = v;
		l->cap = cap;
	}
	o = &l->v[l->n];
	memset(o, 0, sizeof(*o));
	o->ns = strdup(ns);
	o->name = strdup(name);
	if (o->ns == NULL || o->name == NULL) {
		free(o->ns);
		free(o->name);
		return -ENOMEM;
	}
	l->n++;
	o->org_ns = shared_parse_ns(ns, &o->org) == 0;
	if (strcmp(name, SHARED_GEN_OBJECT) == 0)
		o->gen_obj = true;
	else if (o->org_ns && shared_parse_name(name, &o->object_id, &shard, &cache) == 0)
		o->kind = shard == 0xffff && cache == 0xffff ? SHARED_RECORD : SHARED_SLICE;
	return 0;
}

static int
by_ns_name(const void *a, const void *b)
{
	const struct ks_obj *x = a, *y = b;
	int c = strcmp(x->ns, y->ns);

	return c != 0 ? c : strcmp(x->name, y->name);
}

int
ks_list_all(struct shared *s, const char *ns, struct ks_list *l)
{
	struct shared_stats st;
	int rc;

	memset(l, 0, sizeof(*l));
	rc = shared_list(s, ns, add, l);
	shared_stats_get(s, &st);
	l->names_skipped = (uint32_t)st.names_skipped;
	if (rc != 0) {
		ks_list_free(l);
		return rc < 0 ? rc : -EIO;
	}
	if (l->n > 1)
		qsort(l->v, l->n, sizeof(*l->v), by_ns_name);
	return 0;
}

void
ks_list_free(struct ks_list *l)
{
	uint32_t i;

	for (i = 0; i < l->n; i++) {
		free(l->v[i].ns);
		free(l->v[i].name);
	}
	free(l->v);
	memset(l, 0, sizeof(*l));
}

const char *
ks_safe(const char *str, char *buf, size_t len)
{
	static const char hex[] = "0123456789abcdef";
	size_t o = 0;

	for (; *str != '\0' && o + 5 < len; str++) {
		unsigned char c = (unsigned char)*str;

		if (c >= 0x20 && c < 0x7f && c != '\\') {
			buf[o++] = (char)c;
		} else {
			buf[o++] = '\\';
			buf[o++] = 'x';
			buf[o++] = hex[c >> 4];
			buf[o++] = hex[c & 15];
		}
	}
	if (*str != '\0' && o + 3 < len) {
		memcpy(buf + o, "...", 3);
		o += 3;
	}
	buf[o] = '\0';
	return buf;
}

const char *
ks_ns_label(const char *ns, char *buf, size_t len)
{
	if (ns[0] == '\0') {
		snprintf(buf, len, "(default)");
		return buf;
	}
	return ks_safe(ns, buf, len);
}

const char *
ks_gen_why(int rc)
{
	if (rc == -EBADMSG)
		return "not a number (a broken generation object)";
	if (rc == -ERANGE)
		return "4294967295, which is not a generation (no reset passes it: it would wrap to 0)";
	return strerror(-rc);
}
