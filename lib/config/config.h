/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The kvss application's configuration: a libconfig file read and checked
 * completely at start by config.c into this plain struct that the rest of
 * the program reads. lib/config (this reader and cluster.c, kvss-plan's)
 * is the only code that includes libconfig.
 */
#ifndef KVSS_APP_CONFIG_H
#define KVSS_APP_CONFIG_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kvstore.h"
#include "prefixcache.h"
#include "proto.h"

#define KVSS_MAX_LCORES 8
#define KVSS_MAX_SHARDS 8
#define KVSS_MAX_LOCAL_SHARDS 4 /* shards one process hosts (role "all": one per model, say) */
#define KVSS_MAX_ORGS 64
#define KVSS_MAX_DRIVERS 16
#define KVSS_PATH_MAX 512

enum kvss_role {
	KVSS_ROLE_SHARD = 1,
	KVSS_ROLE_DRIVER = 2,
	KVSS_ROLE_ALL = 3, /* both, in one process, joined through net_ring */
};

enum kvss_poll {
	KVSS_POLL_BUSY, /* bare metal: spin */
	KVSS_POLL_IDLE, /* shared cores (tests, CI): pause, then sleep briefly, when idle */
	KVSS_POLL_INTERRUPT, /* idle: sleep until a frame comes (rx interrupts), where the port has them */
};

/** The most tokens one cache of a shard holds (shard.caches.capacity_tokens). */
#define KVSS_MAX_CAPACITY_TOKENS (1ull << 29)
/* The most bytes of one second-tier column (shard.l2.column x bytes_per_token):
 * a column moves as one request of 32-bit length, and the tier keeps a pool of
 * requests of that size. */
#define KVSS_L2_COLUMN_BYTES_MAX (1ull << 30)

/** An address on the rail: MAC, IPv4 (host order), optional VLAN id. */
struct kvss_endpoint {
	uint8_t mac[6];
	uint32_t ipv4;
	uint16_t vlan; /* 0: untagged */
};

/** A shard as the driver sees it. */
struct kvss_shard_ref {
	uint16_t id;
	uint16_t port; /* EAL port the shard is reached through (default: driver.port) */
	struct kvss_endpoint addr;
	uint32_t bytes_per_token[PREFIXCACHE_MAX_CACHES]; /* this shard's slice, per cache */
	uint64_t capacity_tokens[PREFIXCACHE_MAX_CACHES];
	/* Buffers per cache: the shard says so in STATUS; this is used only when
	 * recording open loop (--record-expect), where no STATUS comes. */
	uint16_t buffers[PREFIXCACHE_MAX_CACHES];
	/* Its second tier per cache, in tokens (l2_tokens; 0: none). */
	uint64_t l2_tokens[PREFIXCACHE_MAX_CACHES];
};

struct kvss_model_ref {
	/* The model's name (driver.models.[m].name): what its KV bytes are of.
	 * Part of its objects' names in the shared level, so that two models of
	 * one geometry never read each other's (required with shared = {...}). */
	char name[64];
	uint16_t num_shards;
	struct kvss_shard_ref shard[KVSS_MAX_SHARDS];
};

struct kvss_org_ttl {
	char name[64];
	uint64_t ttl_last_ns, ttl_first_ns;
	/* Its DRAM share and cap, fractions of each cache group's capacity
	 * (driver.org_default's when not given; prefixcache_org_dram_share). */
	double dram_share, dram_cap;
	double l2_share, l2_cap; /* the same of the second tier (prefixcache_org_l2_share) */
};

/* Where the refill-time estimates come from. */
enum kvss_refill_model {
	KVSS_MODEL_CONFIGURED, /* refill_latency_us + bytes / refill_gbps, as configured */
	KVSS_MODEL_LEARNED,    /* those to begin with, then the line fitted to the refills */
};

/* What a party does with traffic that crossed a router (IPv4 TTL below 64). */
enum kvss_routed {
	KVSS_ROUTED_WARN,   /* serve it, and say so (testing) */
	KVSS_ROUTED_REFUSE, /* refuse to serve it (production: the seed's rail-only rule) */
};

/* When the wafer emulator picks a sequence with a refill again. */
/* When the emulated wafer's requests arrive (wafer.arrivals). */
enum kvss_arrivals {
	KVSS_ARRIVALS_CLOSED,  /* each as soon as a slot is free: a closed loop, times ignored */
	KVSS_ARRIVALS_TRACE,   /* at the workload's timestamps, times wafer.time_scale */
	KVSS_ARRIVALS_POISSON, /* a Poisson process of wafer.arrival_rate a second (seeded) */
};

/* Which hits the driver has refilled (driver.refill_policy). */
enum kvss_refill_policy {
	KVSS_POLICY_ADAPTIVE,	  /* a hit only where refilling it beats computing it */
	KVSS_POLICY_IO_ONLY,	  /* every hit */
	KVSS_POLICY_COMPUTE_ONLY, /* none: the cache is off, every prompt computed */
	/* as adaptive, and a DRAM hit split: its front computed while its back
	 * refills (struct prefixcache_model's split) */
	KVSS_POLICY_SPLIT,
};

/* Does policy @p p refill a hit only where that beats computing it? */
static inline int
kvss_policy_adaptive(unsigned int p)
{
	return p == KVSS_POLICY_ADAPTIVE || p == KVSS_POLICY_SPLIT;
}

/* What the wafer does while its EVICT path is backed up (wafer.backpressure). */
enum kvss_backpressure {
	KVSS_BP_WAIT, /* it stops: no request begins, no prefill runs, until the path drains */
	KVSS_BP_SKIP, /* it goes on; a sequence with tokens to send stops caching there */
};

enum kvss_resume {
	KVSS_RESUME_ESTIMATE, /* the design: once its estimate has passed, and its data is whole */
	KVSS_RESUME_WHOLE,    /* as soon as its data is whole, whatever the estimate said */
};

/*
 * What the driver does when a shard says its state is not what the driver
 * sent (TOKEN_LOST, an ERROR record, a failed REFILL). See docs/DESIGN.md.
 */
enum kvss_on_loss {
	KVSS_LOSS_RESYNC, /* the model starts over with a new epoch */
	KVSS_LOSS_EXACT,  /* protocol v2: drop only the columns that hold lost tokens, and
			   * their descendants ("truncate", its name before v2, is taken too) */
};
#define KVSS_LOSS_DEFAULT KVSS_LOSS_EXACT

struct kvss_config {
	char path[KVSS_PATH_MAX];
	enum kvss_role role;
	enum kvss_poll poll;
	uint32_t mtu;
	struct proto_ports udp;

	/* Lcores: EAL lcore ids. */
	uint16_t num_ingest, num_refill;
	unsigned int ingest_lcore[KVSS_MAX_LCORES];
	unsigned int refill_lcore[KVSS_MAX_LCORES];
	unsigned int control_lcore;

	/* Shard role: the first shard (role "shard": the only one). */
	struct kvss_shard_cfg {
		uint16_t port; /* EAL port id */
		uint16_t id;
		uint32_t model;
		struct kvss_endpoint addr;
		struct kvss_endpoint wafer; /* where REFILL_DATA goes */
		struct kvstore_params store;
		uint32_t batch_timeout_ms;
		uint32_t space_timeout_ms;
		uint32_t status_interval_ms;
		/* shard.drivers: control is taken only from these IPv4 addresses
		 * (none listed: from any driver). */
		uint32_t driver_ip[KVSS_MAX_DRIVERS];
		uint16_t num_drivers;
		/* shard.routed: frames that crossed a router (the rail-optimized
		 * path must not): served with a warning, or refused. */
		uint8_t routed; /* enum kvss_routed */
		/* shard.l2: the second tier on the local disk; path ""
		 * when there is none. The file is shard.l2.path, or under
		 * shard.l2.dir "shard-MODEL-ID.l2". */
		struct {
			char path[KVSS_PATH_MAX];
			uint32_t column;	/* tokens of a whole column (the driver's) */
			uint32_t queue_depth;	/* operations in flight at most */
			/* shard.l2.op_timeout_ms: how long the disk may answer
			 * nothing while reads wait on it before it counts as
			 * hung (a busy machine's disk is slow, not hung). */
			uint32_t op_timeout_ms;
			uint64_t capacity_tokens[KVSTORE_MAX_CACHES];
			/* shard.l2.format: format the path even when it holds
			 * something else (another shard's file, a file system):
			 * false, only what is blank is. */
			bool format;
			/* shard.l2.key_file, old_key_file: the master keys its
			 * columns are sealed with and still opened by (lib/seal,
			 * lib/kvdisk "Sealed files"); "": plain columns. */
			char key_file[KVSS_PATH_MAX];
			char old_key_file[KVSS_PATH_MAX];
			/* shard.l2.org_key_file: the organization key store
			 * mixed with them (lib/seal/orgkeys.h); "": none. */
			char org_key_file[KVSS_PATH_MAX];
		} l2;
	} shard;
	/* Every shard the process hosts: role "shard" one (a copy of shard),
	 * role "all" one per element of its shard list (a group: one). */
	struct kvss_shard_cfg local[KVSS_MAX_LOCAL_SHARDS];
	uint16_t num_local;

	/* Driver role (with the wafer emulator). */
	struct {
		uint16_t port;
		struct kvss_endpoint addr;
		struct prefixcache_params pc;
		struct kvss_model_ref models[PREFIXCACHE_MAX_MODELS];
		uint32_t retransmit_ms;
		uint32_t hello_ms;	   /* HELLO again while a shard has not answered */
		uint32_t start_timeout_ms; /* every shard must answer within this */
		uint32_t refill_timeout_ms; /* a refill not whole by then fails */
		uint32_t away_ms;	    /* a shard silent this long: its model runs as misses (0: never) */
		uint32_t dead_ms;	    /* ... this long: its model's prefixes are dropped */
		uint32_t recompute_tokens_per_s; /* the wafer's prefill of missed tokens (0: free) */
		uint8_t refill_policy;		 /* enum kvss_refill_policy */
		uint8_t on_loss;	    /* enum kvss_on_loss */
		uint8_t routed;		    /* enum kvss_routed: a shard reached through a router */
		uint8_t refill_model;	    /* enum kvss_refill_model */
		uint8_t refill_short_pct;   /* learned: scaled so this share runs longer (0: unscaled) */
		uint16_t num_orgs;
		struct kvss_org_ttl org[KVSS_MAX_ORGS];
	} driver;

	/*
	 * shared: the level every replica shares, on Ceph RADOS (PROTOCOL.md
	 * section 10); conf "" when there is none. Read by both roles: a
	 * shard reads and writes its slices, the driver looks columns up,
	 * writes their records and follows the generations.
	 */
	struct kvss_shared_cfg {
		char conf[KVSS_PATH_MAX]; /* the cluster's Ceph configuration file */
		char pool[64];
		char client[64];	  /* "client.admin" */
		uint32_t op_timeout_ms;	  /* every RADOS op (rados_osd_op_timeout) */
		uint32_t depth;		  /* a shard's ops in flight */
		uint32_t column;	  /* a shard's largest column, tokens (the driver's column) */
		uint32_t deadline_ms;	  /* driver: a lookup not back by then is a miss */
		uint32_t generation_ms;	  /* driver: the generations read again this often */
		uint32_t lookahead;	  /* driver: requests looked up ahead of their start */
		uint32_t max_columns;	  /* driver: a lookup's columns at most */
		uint32_t staged;	  /* driver: found columns staged for lookups at most */
		uint32_t latency_us;	  /* driver: the shared level's line, its latency */
		double gbps;		  /* and bandwidth (learned from there, as the others) */
		uint32_t max_up;	  /* driver: columns awaiting their slices at most */
		uint8_t admit;		  /* driver: enum kvss_shared_admit */
		bool write;		  /* driver: false: reads only (a canary, a test) */
		/* shard: the master key its slices are sealed with ("": plain),
		 * and the one before it, still opened (a rotation's window). */
		char key_file[KVSS_PATH_MAX];
		char old_key_file[KVSS_PATH_MAX];
		/* shard: the organization key store mixed with them ("": none;
		 * lib/seal/orgkeys.h), read again when the file is replaced. */
		char org_key_file[KVSS_PATH_MAX];
	} shared;

	struct {
		char trace[KVSS_PATH_MAX]; /* "" or missing file: the built-in workload */
		uint32_t limit;		   /* requests; 0: all */
		uint32_t generate;	   /* requests of the built-in workload */
		uint32_t documents;	   /* its library of documents (0: one-off documents) */
		uint32_t max_inflight;	   /* sequences at once */
		uint32_t ahead_of_pick;	   /* sequences begun ahead of a free run slot */
		uint32_t multimodal_every; /* built-in workload: an image ends every Nth prompt (0: none) */
		uint32_t step_tokens;	   /* tokens a sequence sends per wafer step */
		/* Speculative decoding: a draft's proposals per round (0: none),
		 * the share the target rejects, the seed of those choices. */
		uint32_t spec_tokens, spec_reject_pct;
		uint64_t spec_seed;
		uint32_t lose_data_every;  /* fault injection: withhold every Nth EVICT_DATA (0: none) */
		uint8_t resume;		   /* enum kvss_resume */
		uint8_t backpressure;	   /* enum kvss_backpressure */
		uint8_t arrivals;	   /* enum kvss_arrivals */
		double time_scale;	   /* trace arrivals: a timestamp's ms times this after the first */
		double arrival_rate;	   /* Poisson arrivals: requests a second */
		uint64_t arrival_seed;	   /* and their seed */
		uint32_t prefill_overhead_us; /* a prefill's fixed cost beside its tokens' */
	} wafer;
};

/** What goes down to the shared level (shared.admit). */
enum kvss_shared_admit {
	KVSS_SHARED_ADMIT_L2,  /* "l2": every column the second tier takes, as it goes down */
	KVSS_SHARED_ADMIT_HIT, /* "hit": of those, the ones hit at least once */
	KVSS_SHARED_ADMIT_ALL, /* "all": every whole column, once recorded (verified) in DRAM */
};

/**
 * Read and check @p path. On error, @p err holds one line naming the file,
 * the line and the key ("f.cfg:12: shard.caches.[0].buffers: must divide
 * bytes_per_token (4096)").
 * @return 0, or -1 with @p err set.
 */
int kvss_config_load(const char *path, struct kvss_config *cfg, char *err, size_t errlen);

/**
 * kvss_config_load() for the role @p as (0: the file's own `role`): the
 * sections that role needs are read and checked, as if the file said so.
 */
int kvss_config_load_as(const char *path, enum kvss_role as, struct kvss_config *cfg, char *err,
			size_t errlen);

/**
 * The message every configuration reader here gives: "FILE:LINE: KEY: why",
 * KEY the setting's path ("shard.caches.[0].buffers"), for setting @p s and
 * its member @p child (may be NULL). Writes @p err; returns -1. For other
 * readers of libconfig files (kvss-plan); @p s is a config_setting_t.
 */
struct config_setting_t;
int kvss_cfg_vfail(const char *file, char *err, size_t errlen, const struct config_setting_t *s,
		   const char *child, const char *fmt, va_list ap);

/**
 * Read libconfig file @p path into @p lc (a config_t, initialized), as every
 * reader here does. Refused, with one line in @p err naming the file (and
 * the line): a path that is not a regular file, an @include directive
 * (libconfig 1.5 exits the whole process when an included path cannot be
 * read, "input in flex scanner failed"; kvss files are one file each), a
 * file over KVSS_CFG_MAX_BYTES, and whatever libconfig refuses.
 * @return 0 or -1.
 */
#define KVSS_CFG_MAX_BYTES (16u << 20)
struct config_t;
int kvss_cfg_read(struct config_t *lc, const char *path, char *err, size_t errlen);

/** Parse "02:00:00:00:00:01". @return 0 or -1. */
int kvss_parse_mac(const char *s, uint8_t mac[6]);

/** Parse a dotted IPv4 address into host order. @return 0 or -1. */
int kvss_parse_ipv4(const char *s, uint32_t *ip);

#endif
