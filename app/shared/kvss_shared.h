/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * kvss-shared's parts: the command line and the read-only commands
 * (kvss_shared.c), the sweep (sweep.c), and what both use (listing.c).
 */
#ifndef KVSS_SHARED_TOOL_H
#define KVSS_SHARED_TOOL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "shared.h"

/* Exit codes. */
#define KS_OK 0
#define KS_FAILED 1 /* the cluster refused or failed something */
#define KS_USAGE 2

/** One object of a listing; what was parsed from its names. */
struct ks_obj {
	char *ns;
	char *name;
	bool org_ns;	   /* ns is "o<16 hex>" (an organization's) */
	uint64_t org;	   /* if org_ns */
	int kind;	   /* 0: not ours (or the generation), SHARED_SLICE, SHARED_RECORD */
	bool gen_obj;	   /* the generation object */
	uint64_t object_id;/* slice or record */
};

/** Objects sorted by namespace, then name. */
struct ks_list {
	struct ks_obj *v;
	uint32_t n, cap;
	uint32_t names_skipped; /* names with a NUL (shared_list skips them) */
};

/** List @p ns (NULL: every namespace) into @p l (sorted). 0 or -errno. */
int ks_list_all(struct shared *s, const char *ns, struct ks_list *l);
void ks_list_free(struct ks_list *l);

/* Names from the cluster are printed through these (a name may hold any
 * byte: control characters come out as \xNN, a long one is cut "..."). */
#define KS_SAFE_LEN 96
const char *ks_safe(const char *str, char *buf, size_t len);
/** A namespace for printing: "(default)" for "". */
const char *ks_ns_label(const char *ns, char *buf, size_t len);

struct ks_sweep_opts {
	uint64_t ttl_first_s; /* 0: no expiry by first use */
	uint64_t grace_s;     /* a slice without its record is kept this long */
	bool dry_run;
	bool verbose;
};

/** The sweep (sweep.c): its report on stdout; KS_OK or KS_FAILED. */
int ks_sweep(struct shared *s, const struct ks_sweep_opts *o);

/** A generation read's failure in words (-EBADMSG, -ERANGE, or strerror). */
const char *ks_gen_why(int rc);

/** The generations the records of a namespace (or of all) were written under. */
struct ks_gens {
	uint64_t records;     /* records that passed every check */
	uint64_t unreadable;  /* records whose read failed */
	uint32_t max_global;  /* the highest global generation among them */
	uint32_t max_org;     /* the highest organization's generation among them */
};

/** Read every record of @p ns (NULL: every namespace) for its generations. 0 or -errno. */
int ks_record_gens(struct shared *s, const char *ns, struct ks_gens *g);

#endif /* KVSS_SHARED_TOOL_H */
