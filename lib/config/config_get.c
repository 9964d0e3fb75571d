/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Typed settings (config_priv.h): whole numbers, choices, strings,
 * endpoints, arrays and lcore lists, each checked against its range with
 * an error naming the file, line and key; and the MAC and IPv4 parsers
 * (config.h). config.c reads a configuration's sections with them.
 */
#include "config_priv.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

/*
 * A setting as a whole number: an integer, or a float with a whole value
 * (libconfig reads 1e6 as a float). NULL, or why not.
 */
const char *
cfg_whole(const config_setting_t *m, long long *v)
{
	switch (config_setting_type(m)) {
	case CONFIG_TYPE_INT:
	case CONFIG_TYPE_INT64:
		*v = config_setting_get_int64(m);
		return NULL;
	case CONFIG_TYPE_FLOAT: {
		double d = config_setting_get_float(m);

		if (!(d >= -9.2e18 && d <= 9.2e18))
			return "is too large";
		if (d != (double)(long long)d)
			return "must be a whole number";
		*v = (long long)d;
		return NULL;
	}
	default:
		return "must be a whole number";
	}
}

/* An integer member within [lo, hi]; @def when missing unless @required. */
int
cfg_get_int(struct ctx *c, const config_setting_t *g, const char *name, long long lo, long long hi,
	    long long def, bool required, long long *out)
{
	const config_setting_t *m = g ? cfg_member(c, g, name) : NULL;
	long long v;

	if (m == NULL) {
		if (required) {
			char what[96];

			snprintf(what, sizeof(what), "(an integer in %lld..%lld)", lo, hi);
			return cfg_missing(c, g, name, what);
		}
		*out = def;
		return 0;
	}
	{
		const char *why = cfg_whole(m, &v);

		if (why != NULL)
			return cfg_fail(c, g, name, "%s", why);
	}
	if (v < lo || v > hi)
		return cfg_fail(c, g, name, "%lld is out of range %lld..%lld", v, lo, hi);
	*out = v;
	return 0;
}

/*
 * A bandwidth member in Gb/s, in (0, 100000]: a float (12.5), or a whole
 * number in 1..100000 (libconfig types 10 as an integer); @def when missing.
 */
int
cfg_get_gbps(struct ctx *c, const config_setting_t *g, const char *name, long long def,
	     double *out)
{
	double v;

	if (config_setting_lookup_float(g, name, &v) == CONFIG_TRUE) {
		cfg_member(c, g, name); /* read: not an unknown key */
	} else {
		long long vi;

		if (cfg_get_int(c, g, name, 1, 100000, def, false, &vi) != 0)
			return -1;
		v = (double)vi;
	}
	/* Also refuses a float that overflowed to infinity (1e400), and NaN. */
	if (!(v > 0 && v <= 100000))
		return cfg_fail(c, g, name, "%.10g: must be positive (Gb/s, at most 100000)", v);
	*out = v;
	return 0;
}

/*
 * A number member (integer or float) within (@p lo, @p hi] (or [lo, hi]
 * with @p lo_ok); @p def when missing. NaN, infinity and values outside are
 * refused naming the key.
 */
int
cfg_get_real(struct ctx *c, const config_setting_t *g, const char *name, double lo, bool lo_ok,
	     double hi, double def, double *out)
{
	const config_setting_t *m = g ? cfg_member(c, g, name) : NULL;
	double v;

	if (m == NULL) {
		*out = def;
		return 0;
	}
	if (config_setting_type(m) == CONFIG_TYPE_FLOAT)
		v = config_setting_get_float(m);
	else if (config_setting_type(m) == CONFIG_TYPE_INT || config_setting_type(m) == CONFIG_TYPE_INT64)
		v = (double)config_setting_get_int64(m);
	else
		return cfg_fail(c, g, name, "must be a number");
	if (!(v == v) || !(lo_ok ? v >= lo : v > lo) || !(v <= hi))
		return cfg_fail(c, g, name, "%g is out of range %s%g, %g]", v, lo_ok ? "[" : "(", lo, hi);
	*out = v;
	return 0;
}

int
cfg_get_bool(struct ctx *c, const config_setting_t *g, const char *name, bool def, bool *out)
{
	const config_setting_t *m = g ? cfg_member(c, g, name) : NULL;

	if (m == NULL) {
		*out = def;
		return 0;
	}
	if (config_setting_type(m) != CONFIG_TYPE_BOOL)
		return cfg_fail(c, g, name, "must be true or false");
	*out = config_setting_get_bool(m);
	return 0;
}

/* A string member, one of @choices (NULL-terminated) if given; returns its index. */
int
cfg_get_choice(struct ctx *c, const config_setting_t *g, const char *name, const char *const *choices,
	       int def, bool required)
{
	const config_setting_t *m = g ? cfg_member(c, g, name) : NULL;
	const char *v;
	char list[256] = "";
	int i;

	if (m == NULL) {
		if (required)
			return cfg_missing(c, g, name, ""), -2;
		return def;
	}
	if (config_setting_type(m) != CONFIG_TYPE_STRING)
		return cfg_fail(c, g, name, "must be a string"), -2;
	v = config_setting_get_string(m);
	for (i = 0; choices[i] != NULL; i++) {
		if (strcmp(v, choices[i]) == 0)
			return i;
		strncat(list, i ? ", " : "", sizeof(list) - strlen(list) - 1);
		strncat(list, choices[i], sizeof(list) - strlen(list) - 1);
	}
	return cfg_fail(c, g, name, "'%s' is not one of %s", v, list), -2;
}

int
cfg_get_str(struct ctx *c, const config_setting_t *g, const char *name, char *out, size_t n)
{
	const config_setting_t *m = g ? cfg_member(c, g, name) : NULL;

	if (m == NULL)
		return 0;
	if (config_setting_type(m) != CONFIG_TYPE_STRING)
		return cfg_fail(c, g, name, "must be a string");
	if (strlen(config_setting_get_string(m)) >= n)
		return cfg_fail(c, g, name, "longer than %zu characters", n - 1);
	strcpy(out, config_setting_get_string(m));
	return 0;
}

int
kvss_parse_mac(const char *s, uint8_t mac[6])
{
	unsigned int b[6];
	char tail;
	int i;

	if (sscanf(s, "%x:%x:%x:%x:%x:%x%c", &b[0], &b[1], &b[2], &b[3], &b[4], &b[5], &tail) != 6)
		return -1;
	for (i = 0; i < 6; i++) {
		if (b[i] > 255)
			return -1;
		mac[i] = (uint8_t)b[i];
	}
	return 0;
}

int
kvss_parse_ipv4(const char *s, uint32_t *ip)
{
	unsigned int a, b, c, d;
	char tail;

	if (sscanf(s, "%u.%u.%u.%u%c", &a, &b, &c, &d, &tail) != 4 || a > 255 || b > 255 ||
	    c > 255 || d > 255)
		return -1;
	*ip = a << 24 | b << 16 | c << 8 | d;
	return 0;
}

/* { mac = "..."; ipv4 = "..."; vlan = N; } */
int
cfg_get_endpoint(struct ctx *c, const config_setting_t *g, const char *name, bool required,
	         struct kvss_endpoint *ep)
{
	const config_setting_t *e = g ? cfg_member(c, g, name) : NULL;
	const char *s;

	memset(ep, 0, sizeof(*ep));
	if (e == NULL)
		return required ? cfg_missing(c, g, name, "({ mac = ...; ipv4 = ...; })") : 0;
	if (!config_setting_is_group(e))
		return cfg_fail(c, g, name, "must be a group { mac = ...; ipv4 = ...; }");
	cfg_member(c, e, "mac");
	cfg_member(c, e, "ipv4");
	if (config_setting_lookup_string(e, "mac", &s) != CONFIG_TRUE || kvss_parse_mac(s, ep->mac) != 0)
		return cfg_fail(c, e, "mac", "want a MAC address like \"02:00:00:00:00:01\"");
	if (config_setting_lookup_string(e, "ipv4", &s) != CONFIG_TRUE ||
	    kvss_parse_ipv4(s, &ep->ipv4) != 0)
		return cfg_fail(c, e, "ipv4", "want a dotted IPv4 address");
	GET_INT(c, e, "vlan", 0, 4094, 0, false, ep->vlan);
	return 0;
}

/* An array of integers of exactly @n elements. */
int
cfg_get_u64_array(struct ctx *c, const config_setting_t *g, const char *name, unsigned int n,
	          uint64_t lo, uint64_t hi, uint64_t *out)
{
	const config_setting_t *a = g ? cfg_member(c, g, name) : NULL;
	unsigned int i;

	if (a == NULL || !config_setting_is_array(a))
		return cfg_fail(c, g, name, "missing (an array of %u integers, one per cache)", n);
	if ((unsigned int)config_setting_length(a) != n)
		return cfg_fail(c, g, name, "has %d elements, want %u (one per cache)",
			    config_setting_length(a), n);
	for (i = 0; i < n; i++) {
		const config_setting_t *el = config_setting_get_elem(a, i);
		const char *why;
		long long v;

		if ((why = cfg_whole(el, &v)) != NULL)
			return cfg_fail(c, g, name, "element %u %s", i, why);
		if (v < (long long)lo || (uint64_t)v > hi)
			return cfg_fail(c, g, name, "element %u (%lld) out of range %" PRIu64 "..%" PRIu64,
				    i, v, lo, hi);
		out[i] = (uint64_t)v;
	}
	return 0;
}

int
cfg_get_lcores(struct ctx *c, const config_setting_t *g, const char *name, unsigned int def,
	       bool may_be_empty, unsigned int *out, uint16_t *n)
{
	const config_setting_t *a = g ? cfg_member(c, g, name) : NULL;
	int i;

	if (a == NULL) {
		out[0] = def;
		*n = 1;
		return 0;
	}
	if (!config_setting_is_array(a) || config_setting_length(a) < (may_be_empty ? 0 : 1) ||
	    config_setting_length(a) > KVSS_MAX_LCORES)
		return cfg_fail(c, g, name, "want an array of %d..%d lcore ids", may_be_empty ? 0 : 1,
				KVSS_MAX_LCORES);
	for (i = 0; i < config_setting_length(a); i++) {
		const config_setting_t *el = config_setting_get_elem(a, i);
		long long v;
		int j;

		if (config_setting_type(el) != CONFIG_TYPE_INT && config_setting_type(el) != CONFIG_TYPE_INT64)
			return cfg_fail(c, g, name, "element %d: want a whole lcore id", i);
		v = config_setting_get_int64(el);
		if (v < 0 || v > 1023)
			return cfg_fail(c, g, name, "lcore %lld out of range 0..1023", v);
		out[i] = (unsigned int)v;
		/* An lcore runs one loop: a second shard on it would never run. */
		for (j = 0; j < i; j++)
			if (out[j] == out[i])
				return cfg_fail(c, g, name, "lcore %u listed twice (each runs one loop)",
						out[i]);
	}
	*n = (uint16_t)config_setting_length(a);
	return 0;
}
