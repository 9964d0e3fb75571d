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
#define KS_FAILED 1 /* the cluster or the key store refused or failed something */
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

/** ORG as the command line gives it: a name (hashed as the driver does) or 0x and hex; 0 or -1. */
int ks_parse_org(const char *s, uint64_t *org);

/* ---- Organization keys (keys.c) ---------------------------------------------- */

/**
 * keys --org-keys PATH [--init] [--org ORG]: make a store (init), give an
 * organization a key of its own (@p have_org; @p org_arg as typed), or
 * show its key ids.
 */
int ks_keys(const char *path, bool init, bool have_org, uint64_t org, const char *org_arg);

/**
 * reset --org-keys PATH: a new key for organization @p org (@p org_arg as
 * typed), or with !@p have_org every key. KS_OK, or KS_USAGE / KS_FAILED
 * with nothing written (the reset must then not go on).
 */
int ks_keys_retire(const char *path, bool have_org, uint64_t org, const char *org_arg);

/* ---- Shares of the shared level (shares.c) ---------------------------------- */

#define KS_MAX_SHARES 64
#define KS_WHOLE 1000000000u /* a share's unit: billionths of the capacity, exact */

/** An organization's guaranteed share and cap, in billionths of the capacity. */
struct ks_share {
	uint64_t org; /* isolation id */
	uint32_t share, cap; /* cap 0: --share-default's */
	char label[KS_SAFE_LEN]; /* as given, made printable */
};

/**
 * The level's size and its organizations' shares (sweep --capacity-tokens,
 * --share, --share-default). capacity_tokens 0: no shares, nothing deleted
 * for room. Organizations not named have the default: share 0, cap the
 * whole, unless --share-default says otherwise.
 */
struct ks_shares {
	uint64_t capacity_tokens;
	struct ks_share org[KS_MAX_SHARES];
	uint32_t n;
	uint32_t share_default, cap_default; /* cap_default 0: never given (the whole) */
	bool default_given;
};

/** One --share ORG:SHARE[:CAP] (or, @p is_default, --share-default SHARE[:CAP]); 0 or -1, said in @p err. */
int ks_share_parse(const char *arg, bool is_default, struct ks_shares *sh, char *err, size_t errlen);
/** The shares together: given only with a capacity, summing to at most 1, caps not below shares; 0 or -1, said. */
int ks_shares_check(const struct ks_shares *sh, char *err, size_t errlen);

/** Why a live column goes, or not. */
enum ks_victim { KS_KEPT = 0, KS_OVER_CAP, KS_OVER_SHARE };

/** A live column as the sweep read its record. */
struct ks_live {
	uint64_t org, object_id;
	uint64_t key, parent; /* the column's chained hash, and the one before it */
	uint32_t layout;      /* its model's geometry: a child's parent has the same */
	uint64_t first_use_ns, written_ns;
	uint32_t tokens;
	uint32_t obj; /* its record's index in the listing */
	enum ks_victim victim;
	uint32_t up, kids; /* ks_shares_pick's: its parent's index (or UINT32_MAX), children kept */
};

/** An organization's use of the level (ks_shares_pick). */
struct ks_org_use {
	uint64_t org;
	uint64_t tokens;	      /* live, after what is picked */
	uint64_t guaranteed, cap;     /* in tokens */
	uint64_t deleted, deleted_tokens;
	uint32_t first, end;	      /* its columns in ks_lives.v, oldest first */
	uint32_t nleaf;		      /* its leaves (columns nothing kept hangs on), a heap by age */
};

/** Every live column of the pool, and after ks_shares_pick each organization's use. */
struct ks_lives {
	struct ks_live *v;
	uint32_t n, cap;
	struct ks_org_use *org;
	uint32_t norg;
	uint32_t *leaf;	       /* the organizations' leaf heaps, each in [first, end) */
	uint64_t total_tokens; /* live after what is picked */
	uint64_t guaranteed_tokens; /* the guarantees of the organizations present, summed */
};

int ks_lives_add(struct ks_lives *lv, const struct ks_live *x);
void ks_lives_free(struct ks_lives *lv);
/**
 * Pick what goes (each column's victim), as the DRAM shares do, by leaves
 * (a column nothing kept hangs on: taking it leaves every other column
 * reachable): every organization within its cap, then the level within
 * its capacity, the organization furthest above its guarantee giving its
 * oldest leaf each time; none at or below its guarantee gives any. Sorts
 * lv->v by organization, then age. 0 or -ENOMEM.
 */
int ks_shares_pick(const struct ks_shares *sh, struct ks_lives *lv);

struct ks_sweep_opts {
	uint64_t ttl_first_s; /* 0: no expiry by first use */
	uint64_t grace_s;     /* a slice without its record is kept this long */
	bool dry_run;
	bool verbose;
	struct ks_shares shares;
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
