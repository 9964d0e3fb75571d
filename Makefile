# SPDX-License-Identifier: BSD-3-Clause
#
# kvss: one non-recursive Makefile. `make` builds everything; `make check`
# and `make demo` first install what is missing (scripts/deps.sh), then
# re-enter make so that pkg-config sees the freshly installed packages.

.DEFAULT_GOAL := all

BUILD ?= build
CC ?= cc
CLANG ?= clang
FUZZ_SECONDS ?= 30
# Scripts run Debian's python3, the interpreter its python3-* packages
# (prometheus-client, yaml) are installed for, even where a version
# manager's shim comes first on PATH: pyenv's is a shell script of a dozen
# forks, and beside busy-polling lcores it cost about 3 s a call (test-e2e's
# telemetry section makes 25 calls: 98 s through the shim, 26 s without).
# dpdk-telemetry.py's "#!/usr/bin/env python3" finds the same one.
PYBIN := $(abspath $(BUILD))/pybin
ifneq ($(wildcard /usr/bin/python3),)
export PATH := $(PYBIN):$(PATH)
PYLINK := $(PYBIN)/python3
endif

PKGS := libdpdk libconfig libxxhash liburing
HAVE_PKGS := $(shell pkg-config --exists $(PKGS) criterion 2>/dev/null && echo yes)

ifeq ($(HAVE_PKGS),yes)
DPDK_CFLAGS := $(shell pkg-config --cflags libdpdk)
DPDK_LIBS := $(shell pkg-config --libs libdpdk)
DEP_LIBS := $(shell pkg-config --libs libconfig libxxhash) -lpcap -lm -lpthread -lcrypto
CRITERION_LIBS := $(shell pkg-config --libs criterion)
URING_LIBS := $(shell pkg-config --libs liburing)
# The shard's objects (every program linking them) reach the shared level.
DPDK_LIBS += $(URING_LIBS) -lrados
endif

WARN := -Wall -Wextra -Werror -Wshadow -Wstrict-prototypes -Wmissing-prototypes
# Every library's header is on the path; an app's own headers are not: an
# app includes its own ("kvss.h" beside it) and the libraries', never
# another app's. Tests and benchmarks reach into the apps they test.
LIB_INC := -Ilib/proto -Ilib/kvstore -Ilib/prefixcache -Ilib/config -Ilib/workload -Ilib/wafer \
	-Ilib/fileio -Ilib/args -Ilib/kvdisk -Ilib/plot -Ilib/shared -Ilib/mono -Ilib/seal \
	-Ilib/percentile -Ilib/ilist -Ilib/wafermodel
APP_INC := -Iapp/trace -Iapp/kvss -Iapp/plan
BASE_CFLAGS := -std=gnu11 -O2 -g $(WARN) -MMD -MP $(LIB_INC)
# Library code that needs no DPDK is built without its flags (no -march,
# no rte_config.h) so it stays portable and fuzzable.
CFLAGS_PURE := $(BASE_CFLAGS) $(EXTRA_CFLAGS)
CFLAGS_DPDK := $(BASE_CFLAGS) $(DPDK_CFLAGS) -Wno-missing-prototypes $(EXTRA_CFLAGS)

# ---- libraries -------------------------------------------------------------

# Every library builds by folder: all of its .c (lib_dir); only lib/proto
# names its one file that needs DPDK (mbufs), built apart.
lib_dir = $(sort $(wildcard lib/$(1)/*.c))
PROTO_PURE_SRC := $(filter-out lib/proto/proto_mbuf.c,$(call lib_dir,proto))
PROTO_DPDK_SRC := lib/proto/proto_mbuf.c

LIBPROTO := $(BUILD)/lib/libproto.a

KVSTORE_SRC := $(call lib_dir,kvstore)
LIBKVSTORE := $(BUILD)/lib/libkvstore.a

PREFIXCACHE_SRC := $(call lib_dir,prefixcache)
LIBPREFIXCACHE := $(BUILD)/lib/libprefixcache.a

# The configuration reader (kvss's files and kvss-plan's clusters): the
# only code that includes libconfig.
CONFIG_SRC := $(call lib_dir,config)
LIBCONFIG := $(BUILD)/lib/libkvssconfig.a

# Files from outside, opened without blocking and read with bounds.
FILEIO_SRC := $(call lib_dir,fileio)
LIBFILEIO := $(BUILD)/lib/libfileio.a
# Keys and AES-256-GCM (libcrypto) for what leaves DRAM: the disk tier's
# columns and the shared level's slices.
SEAL_SRC := $(call lib_dir,seal)
LIBSEAL := $(BUILD)/lib/libseal.a
# The shard's second tier on its own disk (io_uring, O_DIRECT).
KVDISK_SRC := $(call lib_dir,kvdisk)
LIBKVDISK := $(BUILD)/lib/libkvdisk.a
# Figures drawn by gnuplot (--plot, --plot-refills).
PLOT_SRC := $(call lib_dir,plot)
LIBPLOT := $(BUILD)/lib/libplot.a

# The shared level's object format (pure: no librados; fuzzed alone), and
# its client (librados: the shard's and the driver's threads, the tools).
SHARED_OBJ_SRC := lib/shared/shared_obj.c
SHARED_RADOS_SRC := lib/shared/shared_rados.c
# What the client and test/rados_mem.c, linked in its place, share (the
# configuration's check, through lib/fileio; the completion counts).
SHARED_COMMON_SRC := lib/shared/shared_common.c
RADOS_LIBS := -lrados

# Whole numbers from a command line (1e6 too; never a prefix).
ARGS_SRC := $(call lib_dir,args)
LIBARGS := $(BUILD)/lib/libargs.a

# A sample's p-th percentile, by one rule (benchmarks, test tools).
PERCENTILE_SRC := $(call lib_dir,percentile)
LIBPERCENTILE := $(BUILD)/lib/libpercentile.a

# A wafer's times to first token, computed (kvss-trace's sizing, kvss's baseline).
WAFERMODEL_SRC := $(call lib_dir,wafermodel)
LIBWAFERMODEL := $(BUILD)/lib/libwafermodel.a

# Requests: the trace reader and the built-in generator (kvss, kvss-trace).
WORKLOAD_SRC := $(call lib_dir,workload)
LIBWORKLOAD := $(BUILD)/lib/libworkload.a

# The emulated accelerator: EVICT_DATA produced, refilled bytes checked.
WAFER_SRC := $(call lib_dir,wafer)
LIBWAFER := $(BUILD)/lib/libwafer.a

REPLAY_SRC := app/trace/replay.c app/trace/replay_l2.c app/trace/route.c app/trace/fleet.c

# kvss (app/kvss) builds by folder, one folder per role: what both
# processes share (the launcher, ports, the port gate, telemetry, the fault
# injector) at the top, then shard/, driver/ and emulator/. Every .c of a
# folder is in its role; only the driver's parts that run without EAL are
# named, because they are built without DPDK's flags and unit-tested alone.
kvss_dir = $(sort $(wildcard app/kvss/$(1)*.c))
KVSS_COMMON_SRC := $(call kvss_dir,)
SHARD_SRC := $(call kvss_dir,shard/)
# What the shard's objects link with beside them: its levels' libraries.
SHARD_LIBS = $(LIBKVDISK) $(LIBSHARED) $(LIBSEAL) $(LIBFILEIO)
# The libraries the driver's own files call beyond those every role links.
DRIVER_LIBS = $(LIBPERCENTILE) $(LIBWAFERMODEL)
DRIVER_NOEAL_SRC := $(addprefix app/kvss/driver/,sink.c ctlq.c learn.c)
DRIVER_SRC := $(filter-out $(DRIVER_NOEAL_SRC),$(call kvss_dir,driver/))
# The wafer emulator needs no EAL either (test/test_emulator.c).
EMU_SRC := $(call kvss_dir,emulator/)

KVSS_APP_SRC := $(KVSS_COMMON_SRC) $(SHARD_SRC) $(DRIVER_SRC)
# The driver's parts that need no EAL: the wafer emulator, the sink, the
# control queues, refill-time learning (unit-tested without EAL).
KVSS_PURE_SRC := $(EMU_SRC) $(DRIVER_NOEAL_SRC)

obj = $(patsubst %.c,$(BUILD)/obj/%.o,$(1))

TEST_COMMON_SRC := test/frames.c
PURE_SRC := $(PROTO_PURE_SRC) $(KVSTORE_SRC) app/dump/kvss_dump.c test/test_proto.c \
	test/test_proto_ref.c test/test_proto_stream.c test/test_wafer.c $(CONFIG_SRC) $(WORKLOAD_SRC) $(WAFER_SRC) \
	$(FILEIO_SRC) $(ARGS_SRC) $(KVDISK_SRC) $(SEAL_SRC) $(PERCENTILE_SRC) $(WAFERMODEL_SRC) test/test_wafermodel.c test/test_percentile.c test/test_ilist.c test/test_mono.c \
	$(TEST_COMMON_SRC) test/gen_frames.c test/test_kvstore.c test/test_kvstore_model.c \
	bench/bench_kvstore.c bench/bench_wafer.c $(PREFIXCACHE_SRC) $(REPLAY_SRC) test/test_prefixcache.c \
	app/trace/kvss_trace.c app/trace/trace_run.c app/trace/trace_report.c app/trace/ttft.c app/trace/oracle.c app/trace/tier2.c bench/bench_prefixcache.c test/test_prefixcache_model.c \
	test/test_config.c test/shard_scenario.c test/shard_scenario_order.c test/shard_scenario_l2.c \
	test/shard_scenario_report.c test/replay_check.c \
	app/plan/plan.c app/plan/kvss_plan.c test/test_plan.c test/test_route.c \
	test/test_oracle.c test/test_linfit.c test/test_emulator.c test/test_workload.c test/test_args.c \
	test/test_kvdisk.c test/test_kvdisk_seal.c bench/bench_kvdisk.c bench/bench_seal.c test/test_prefixcache_l2.c \
	test/test_proto_l2.c test/test_prefixcache_bulk.c $(PLOT_SRC) $(KVSS_PURE_SRC) \
	$(SHARED_OBJ_SRC) $(SHARED_RADOS_SRC) test/test_shared_obj.c test/test_shared_seal.c test/test_orgkeys.c \
	test/test_seal_thread.c test/rados_mem.c
DPDK_SRC := $(PROTO_DPDK_SRC) test/test_proto_mbuf.c \
	$(filter-out $(KVDISK_SRC) $(SEAL_SRC) $(SHARED_OBJ_SRC) $(SHARED_RADOS_SRC),$(KVSS_APP_SRC)) test/test_kvss_refill.c \
	test/test_kvss_telemetry.c test/test_drv_link.c test/test_drv_rx.c test/test_drv_ttft.c test/test_drv_report.c test/test_drv_shared.c \
	test/memif_flap.c \
	bench/bench_shard.c

# The shared level's client (lib/shared, librados) in one archive, its
# operator's tool (app/shared), its test and benchmark: both start a
# throwaway cluster (scripts/ceph-cluster.sh). Built without DPDK.
RADOS_LIBS ?= -lrados
SHARED_SRC := $(call lib_dir,shared)
LIBSHARED := $(BUILD)/lib/libshared.a
KVSS_SHARED_SRC := $(sort $(wildcard app/shared/*.c))
PURE_SRC += $(filter-out $(PURE_SRC),$(SHARED_SRC)) $(KVSS_SHARED_SRC) test/test_shared_rados.c test/test_shares.c \
	bench/bench_shared.c

$(BUILD)/obj/test/%.o $(BUILD)/obj/bench/%.o: TEST_INC := $(APP_INC)
# kvss's roles include what both processes share (kvss.h) and each other's
# public headers by folder ("driver/driver.h").
$(BUILD)/obj/app/kvss/%.o: TEST_INC := -Iapp/kvss

$(call obj,$(PURE_SRC)): $(BUILD)/obj/%.o: %.c
	@mkdir -p $(@D)
	$(CC) $(CFLAGS_PURE) $(TEST_INC) -c $< -o $@

$(call obj,$(DPDK_SRC)): $(BUILD)/obj/%.o: %.c
	@mkdir -p $(@D)
	$(CC) $(CFLAGS_DPDK) $(TEST_INC) -c $< -o $@

# Every library is one archive of its folder's objects, made by one rule;
# each archive's objects are named once, below. An archive that uses
# another's (config and workload read files through fileio) is linked
# before it.
$(BUILD)/lib/%.a:
	@mkdir -p $(@D)
	rm -f $@
	ar rcs $@ $^

$(LIBPROTO): $(call obj,$(PROTO_PURE_SRC) $(PROTO_DPDK_SRC))
$(LIBKVSTORE): $(call obj,$(KVSTORE_SRC))
$(LIBPREFIXCACHE): $(call obj,$(PREFIXCACHE_SRC))
$(LIBCONFIG): $(call obj,$(CONFIG_SRC))
$(LIBWORKLOAD): $(call obj,$(WORKLOAD_SRC))
$(LIBWAFER): $(call obj,$(WAFER_SRC))
$(LIBSHARED): $(call obj,$(SHARED_SRC))
$(LIBFILEIO): $(call obj,$(FILEIO_SRC))
$(LIBKVDISK): $(call obj,$(KVDISK_SRC))
$(LIBSEAL): $(call obj,$(SEAL_SRC))
$(LIBARGS): $(call obj,$(ARGS_SRC))
$(LIBPERCENTILE): $(call obj,$(PERCENTILE_SRC))
$(LIBWAFERMODEL): $(call obj,$(WAFERMODEL_SRC))
$(LIBPLOT): $(call obj,$(PLOT_SRC))

# ---- programs --------------------------------------------------------------

KVSS_DUMP := $(BUILD)/kvss-dump
KVSS_PLAN := $(BUILD)/kvss-plan

$(KVSS_PLAN): $(call obj,app/plan/kvss_plan.c app/plan/plan.c) $(LIBARGS) $(LIBCONFIG) $(LIBPREFIXCACHE) \
		$(LIBKVSTORE) $(LIBPROTO) $(LIBFILEIO)
	$(CC) -o $@ $^ $(DEP_LIBS)
KVSS_TRACE := $(BUILD)/kvss-trace
KVSS := $(BUILD)/kvss

# The commit kvss is built from, for /kvss/build (the exporter's
# kvss_build_info); "unknown" outside a git checkout. $(BUILD)/commit is
# rewritten only when it changes, and telemetry.o rebuilt only then.
KVSS_COMMIT := $(shell git rev-parse --short=12 HEAD 2>/dev/null || echo unknown)
$(BUILD)/commit: FORCE
	@mkdir -p $(@D)
	@[ "$$(cat $@ 2>/dev/null)" = "$(KVSS_COMMIT)" ] || echo "$(KVSS_COMMIT)" >$@
FORCE:
$(BUILD)/obj/app/kvss/telemetry.o: $(BUILD)/commit
$(BUILD)/obj/app/kvss/telemetry.o: TEST_INC += -DKVSS_COMMIT='"$(KVSS_COMMIT)"'

$(KVSS): $(call obj,$(KVSS_APP_SRC) $(KVSS_PURE_SRC)) $(LIBARGS) $(LIBPLOT) $(LIBCONFIG) $(LIBWORKLOAD) \
		$(LIBWAFER) $(LIBPREFIXCACHE) $(LIBKVSTORE) $(LIBPROTO) $(SHARD_LIBS) $(DRIVER_LIBS)
	$(CC) -o $@ $^ $(DPDK_LIBS) -lrte_net_ring $(DEP_LIBS) $(RADOS_LIBS)

$(KVSS_TRACE): $(call obj,app/trace/kvss_trace.c app/trace/trace_run.c app/trace/trace_report.c \
		app/trace/ttft.c app/trace/oracle.c app/trace/tier2.c $(REPLAY_SRC)) $(LIBARGS) $(LIBPLOT) \
		$(LIBKVDISK) $(LIBSEAL) $(LIBCONFIG) $(LIBWORKLOAD) $(LIBWAFER) $(LIBPREFIXCACHE) $(LIBKVSTORE) \
		$(LIBPROTO) $(LIBFILEIO) $(LIBWAFERMODEL) $(LIBPERCENTILE)
	$(CC) -o $@ $^ $(DEP_LIBS) $(URING_LIBS)

$(KVSS_DUMP): $(call obj,app/dump/kvss_dump.c) $(LIBARGS) $(LIBPROTO)
	$(CC) -o $@ $^ $(DEP_LIBS)

KVSS_SHARED := $(BUILD)/kvss-shared

$(KVSS_SHARED): $(call obj,$(KVSS_SHARED_SRC)) $(LIBARGS) $(LIBSHARED) $(LIBSEAL) $(LIBPROTO) $(LIBFILEIO)
	$(CC) -o $@ $^ $(RADOS_LIBS) $(DEP_LIBS)

# kvss-shared sweep's shares of the level, picked without a cluster.
$(BUILD)/obj/test/test_shares.o: TEST_INC := -Iapp/shared
$(BUILD)/test/test_shares: $(call obj,test/test_shares.c app/shared/shares.c app/shared/listing.c) \
		$(LIBSHARED) $(LIBSEAL) $(LIBPROTO) $(LIBFILEIO)
	@mkdir -p $(@D)
	$(CC) -o $@ $^ $(CRITERION_LIBS) $(RADOS_LIBS) $(DEP_LIBS)

# Run by scripts/test-shared.sh against the cluster it starts (not a
# Criterion suite: run-tests.sh must not run it alone).
TEST_SHARED_RADOS := $(BUILD)/tools/test_shared_rados

$(TEST_SHARED_RADOS): $(call obj,test/test_shared_rados.c) $(LIBSHARED) $(LIBSEAL) $(LIBFILEIO)
	@mkdir -p $(@D)
	$(CC) -o $@ $^ $(RADOS_LIBS) $(DEP_LIBS)

# ---- tests -----------------------------------------------------------------

TESTS := $(BUILD)/test/test_proto $(BUILD)/test/test_proto_stream $(BUILD)/test/test_wafer \
	$(BUILD)/test/test_proto_ref \
	$(BUILD)/test/test_proto_mbuf \
	$(BUILD)/test/test_kvstore \
	$(BUILD)/test/test_kvstore_model $(BUILD)/test/test_prefixcache \
	$(BUILD)/test/test_prefixcache_model $(BUILD)/test/test_config $(BUILD)/test/test_kvss_refill \
	$(BUILD)/test/test_kvss_telemetry $(BUILD)/test/test_plan \
	$(BUILD)/test/test_route $(BUILD)/test/test_oracle $(BUILD)/test/test_linfit \
	$(BUILD)/test/test_emulator $(BUILD)/test/test_drv_link $(BUILD)/test/test_workload \
	$(BUILD)/test/test_args $(BUILD)/test/test_percentile $(BUILD)/test/test_ilist $(BUILD)/test/test_mono \
	$(BUILD)/test/test_wafermodel \
	$(BUILD)/test/test_kvdisk $(BUILD)/test/test_kvdisk_seal $(BUILD)/test/test_prefixcache_l2 \
	$(BUILD)/test/test_proto_l2 $(BUILD)/test/test_prefixcache_bulk $(BUILD)/test/test_shared_obj \
	$(BUILD)/test/test_shared_seal $(BUILD)/test/test_orgkeys $(BUILD)/test/test_seal_thread \
	$(BUILD)/test/test_drv_rx $(BUILD)/test/test_drv_ttft $(BUILD)/test/test_drv_report \
	$(BUILD)/test/test_drv_shared $(BUILD)/test/test_shares
GEN_FRAMES := $(BUILD)/tools/gen_frames
TEST_COMMON := $(call obj,$(TEST_COMMON_SRC))

$(BUILD)/test/test_shared_obj: $(call obj,test/test_shared_obj.c $(SHARED_OBJ_SRC)) $(TEST_COMMON) $(LIBPROTO)
	@mkdir -p $(@D)
	$(CC) -o $@ $^ $(CRITERION_LIBS) $(DEP_LIBS)

# Sealed slices: libcrypto's AES-256-GCM and HKDF (DEP_LIBS).
$(BUILD)/test/test_shared_seal: $(call obj,test/test_shared_seal.c lib/shared/shared_seal.c \
		$(SHARED_OBJ_SRC)) $(TEST_COMMON) $(LIBSEAL) $(LIBPROTO)
	@mkdir -p $(@D)
	$(CC) -o $@ $^ $(CRITERION_LIBS) $(DEP_LIBS)

# Each thread's sealing state: kept contexts, nonces, organization keys.
$(BUILD)/test/test_seal_thread: $(call obj,test/test_seal_thread.c) $(LIBSEAL) $(LIBPROTO)
	@mkdir -p $(@D)
	$(CC) -o $@ $^ $(CRITERION_LIBS) $(DEP_LIBS)

# Organization keys: the store, and slices sealed under its keys.
$(BUILD)/test/test_orgkeys: $(call obj,test/test_orgkeys.c lib/shared/shared_seal.c \
		$(SHARED_OBJ_SRC)) $(TEST_COMMON) $(LIBSEAL) $(LIBPROTO)
	@mkdir -p $(@D)
	$(CC) -o $@ $^ $(CRITERION_LIBS) $(DEP_LIBS)

$(BUILD)/test/test_proto_l2: $(call obj,test/test_proto_l2.c) $(TEST_COMMON) $(LIBPROTO)
	@mkdir -p $(@D)
	$(CC) -o $@ $^ $(CRITERION_LIBS) $(DEP_LIBS)

$(BUILD)/test/test_proto: $(call obj,test/test_proto.c) $(TEST_COMMON) $(LIBPROTO)
	@mkdir -p $(@D)
	$(CC) -o $@ $^ $(CRITERION_LIBS) $(DEP_LIBS)

$(BUILD)/test/test_proto_stream $(BUILD)/test/test_wafer $(BUILD)/test/test_proto_ref: $(BUILD)/test/%: \
		$(BUILD)/obj/test/%.o $(LIBWAFER) $(LIBPROTO)
	@mkdir -p $(@D)
	$(CC) -o $@ $^ $(CRITERION_LIBS) $(DEP_LIBS)

$(BUILD)/test/test_proto_mbuf: $(call obj,test/test_proto_mbuf.c app/kvss/app.c app/kvss/portgate.c) $(TEST_COMMON) $(LIBPROTO)
	@mkdir -p $(@D)
	$(CC) -o $@ $^ $(CRITERION_LIBS) $(DPDK_LIBS) $(DEP_LIBS)

$(BUILD)/test/test_kvstore $(BUILD)/test/test_kvstore_model: $(BUILD)/test/%: \
		$(BUILD)/obj/test/%.o $(LIBKVSTORE) $(LIBPROTO)
	@mkdir -p $(@D)
	$(CC) -o $@ $^ $(CRITERION_LIBS) $(DEP_LIBS)

STRESS := $(BUILD)/test/stress_kvstore $(BUILD)/test/stress_kvstore_tsan
STRESS_SRC := test/stress_kvstore.c $(KVSTORE_SRC) $(PROTO_PURE_SRC)

$(BUILD)/test/stress_kvstore: $(STRESS_SRC) test/kv_harness.h test/test_rng.h lib/kvstore/kvstore.h \
		lib/kvstore/kvstore_priv.h lib/proto/proto.h
	@mkdir -p $(@D)
	$(CC) -std=gnu11 -O2 -g $(WARN) -Ilib/proto -Ilib/kvstore -o $@ $(STRESS_SRC) -lxxhash -lpthread

# The same program under ThreadSanitizer (clang, like the fuzzer).
$(BUILD)/test/stress_kvstore_tsan: $(STRESS_SRC) test/kv_harness.h test/test_rng.h lib/kvstore/kvstore.h \
		lib/kvstore/kvstore_priv.h lib/proto/proto.h
	@mkdir -p $(@D)
	$(CLANG) -std=gnu11 -O1 -g -fsanitize=thread $(WARN) -Ilib/proto -Ilib/kvstore -o $@ \
		$(STRESS_SRC) -lxxhash -lpthread

$(BUILD)/test/test_prefixcache $(BUILD)/test/test_prefixcache_model $(BUILD)/test/test_prefixcache_l2 \
		$(BUILD)/test/test_prefixcache_bulk: $(BUILD)/test/%: \
		$(BUILD)/obj/test/%.o $(call obj,$(REPLAY_SRC)) $(LIBKVDISK) $(LIBSEAL) $(LIBWORKLOAD) $(LIBWAFER) \
		$(LIBPREFIXCACHE) $(LIBKVSTORE) $(LIBPROTO) $(LIBFILEIO)
	@mkdir -p $(@D)
	$(CC) -o $@ $^ $(CRITERION_LIBS) $(DEP_LIBS) $(URING_LIBS)

$(BUILD)/test/test_config: $(BUILD)/obj/test/test_config.o $(LIBCONFIG) \
		$(LIBPREFIXCACHE) $(LIBKVSTORE) $(LIBPROTO) $(LIBFILEIO)
	@mkdir -p $(@D)
	$(CC) -o $@ $^ $(CRITERION_LIBS) $(DEP_LIBS)

$(BUILD)/test/test_kvss_refill: $(call obj,test/test_kvss_refill.c app/kvss/app.c $(SHARD_SRC) \
		app/kvss/portgate.c) $(LIBCONFIG) $(LIBPREFIXCACHE) $(LIBKVSTORE) $(LIBPROTO) $(SHARD_LIBS)
	@mkdir -p $(@D)
	$(CC) -o $@ $^ $(CRITERION_LIBS) $(DPDK_LIBS) $(DEP_LIBS)

$(BUILD)/test/test_drv_link: $(call obj,test/test_drv_link.c app/kvss/driver/link.c app/kvss/app.c \
		$(SHARD_SRC) app/kvss/portgate.c app/kvss/faults.c $(KVSS_PURE_SRC)) $(LIBCONFIG) \
		$(LIBWORKLOAD) $(LIBWAFER) $(LIBPREFIXCACHE) $(LIBKVSTORE) $(LIBPROTO) $(SHARD_LIBS)
	@mkdir -p $(@D)
	$(CC) -o $@ $^ $(CRITERION_LIBS) $(DPDK_LIBS) $(DEP_LIBS)

# The driver's receive path, epochs and second-tier answers (rx.c, epoch.c,
# l2.c) on the whole driver as kvss_driver_init makes it: all its parts; its
# time-to-first-token figures (ttft.c) and its verdict and summary
# (report.c) with the same parts.
$(BUILD)/test/test_drv_rx $(BUILD)/test/test_drv_ttft $(BUILD)/test/test_drv_report: $(BUILD)/test/%: $(BUILD)/obj/test/%.o \
		$(call obj,$(DRIVER_SRC) $(KVSS_PURE_SRC) \
		app/kvss/app.c app/kvss/portgate.c app/kvss/faults.c) $(LIBARGS) $(LIBPLOT) \
		$(LIBCONFIG) $(LIBWORKLOAD) $(LIBWAFER) $(LIBPREFIXCACHE) $(LIBKVSTORE) $(LIBPROTO) \
		$(SHARD_LIBS) $(DRIVER_LIBS)
	@mkdir -p $(@D)
	$(CC) -o $@ $^ $(CRITERION_LIBS) $(DPDK_LIBS) -lrte_net_ring $(DEP_LIBS) $(RADOS_LIBS)

# The driver's shared level (shared.c) the same way, over a cluster in memory
# (test/rados_mem.c in place of lib/shared's librados client: no Ceph).
$(BUILD)/test/test_drv_shared: $(call obj,test/test_drv_shared.c test/rados_mem.c $(SHARED_OBJ_SRC) \
		$(SHARED_COMMON_SRC) \
		$(DRIVER_SRC) $(KVSS_PURE_SRC) app/kvss/app.c app/kvss/portgate.c app/kvss/faults.c) \
		$(LIBARGS) $(LIBPLOT) $(LIBCONFIG) $(LIBWORKLOAD) $(LIBWAFER) $(LIBPREFIXCACHE) \
		$(LIBKVSTORE) $(LIBPROTO) $(LIBKVDISK) $(LIBSEAL) $(LIBFILEIO) $(DRIVER_LIBS)
	@mkdir -p $(@D)
	$(CC) -o $@ $^ $(CRITERION_LIBS) $(DPDK_LIBS) -lrte_net_ring $(DEP_LIBS)

$(BUILD)/test/test_kvss_telemetry: $(call obj,test/test_kvss_telemetry.c app/kvss/app.c \
		app/kvss/telemetry.c app/kvss/portgate.c app/kvss/shard/hosted.c $(SHARED_OBJ_SRC)) $(LIBKVSTORE) $(LIBPROTO)
	@mkdir -p $(@D)
	$(CC) -o $@ $^ $(CRITERION_LIBS) $(DPDK_LIBS) $(DEP_LIBS)

$(BUILD)/test/test_plan: $(call obj,test/test_plan.c app/plan/plan.c) $(LIBCONFIG) \
		$(LIBPREFIXCACHE) $(LIBKVSTORE) $(LIBPROTO) $(LIBFILEIO)
	@mkdir -p $(@D)
	$(CC) -o $@ $^ $(CRITERION_LIBS) $(DEP_LIBS)

$(BUILD)/test/test_route: $(call obj,test/test_route.c app/trace/route.c app/trace/fleet.c) $(LIBPROTO)
	@mkdir -p $(@D)
	$(CC) -o $@ $^ $(CRITERION_LIBS) $(DEP_LIBS)

$(BUILD)/test/test_oracle: $(call obj,test/test_oracle.c app/trace/oracle.c app/trace/tier2.c)
	@mkdir -p $(@D)
	$(CC) -o $@ $^ $(CRITERION_LIBS) $(DEP_LIBS)

$(BUILD)/test/test_emulator: $(call obj,test/test_emulator.c $(KVSS_PURE_SRC)) $(LIBWORKLOAD) \
		$(LIBWAFER) $(LIBPREFIXCACHE) $(LIBKVSTORE) $(LIBPROTO) $(LIBFILEIO) $(LIBWAFERMODEL)
	@mkdir -p $(@D)
	$(CC) -o $@ $^ $(CRITERION_LIBS) $(DEP_LIBS)

$(BUILD)/test/test_workload: $(call obj,test/test_workload.c) $(LIBWORKLOAD) $(LIBPROTO) $(LIBFILEIO)
	@mkdir -p $(@D)
	$(CC) -o $@ $^ $(CRITERION_LIBS) $(DEP_LIBS)

$(BUILD)/test/test_kvdisk $(BUILD)/test/test_kvdisk_seal: $(BUILD)/test/%: $(BUILD)/obj/test/%.o \
		$(LIBKVDISK) $(LIBSEAL)
	@mkdir -p $(@D)
	$(CC) -o $@ $^ $(CRITERION_LIBS) $(DEP_LIBS) $(URING_LIBS)

$(BUILD)/test/test_args: $(call obj,test/test_args.c) $(LIBARGS)
	@mkdir -p $(@D)
	$(CC) -o $@ $^ $(CRITERION_LIBS) -lm

$(BUILD)/test/test_percentile: $(call obj,test/test_percentile.c) $(LIBPERCENTILE)
	@mkdir -p $(@D)
	$(CC) -o $@ $^ $(CRITERION_LIBS)

$(BUILD)/test/test_wafermodel: $(call obj,test/test_wafermodel.c) $(LIBWAFERMODEL)
	@mkdir -p $(@D)
	$(CC) -o $@ $^ $(CRITERION_LIBS)

# lib/mono is a header alone too.
$(BUILD)/test/test_mono: $(call obj,test/test_mono.c)
	@mkdir -p $(@D)
	$(CC) -o $@ $^ $(CRITERION_LIBS)

# lib/ilist is a header alone: its test is the whole program.
$(BUILD)/test/test_ilist: $(call obj,test/test_ilist.c)
	@mkdir -p $(@D)
	$(CC) -o $@ $^ $(CRITERION_LIBS)

$(BUILD)/test/test_linfit: $(call obj,test/test_linfit.c)
	@mkdir -p $(@D)
	$(CC) -o $@ $^ $(CRITERION_LIBS) -lm

SHARD_SCENARIO := $(BUILD)/tools/shard_scenario
REPLAY_CHECK := $(BUILD)/tools/replay_check
MEMIF_FLAP := $(BUILD)/tools/memif_flap

$(MEMIF_FLAP): $(call obj,test/memif_flap.c app/kvss/portgate.c app/kvss/app.c)
	@mkdir -p $(@D)
	$(CC) -o $@ $^ $(DPDK_LIBS) $(DEP_LIBS)

$(REPLAY_CHECK): $(call obj,test/replay_check.c) $(TEST_COMMON) $(LIBWAFER) $(LIBPROTO)
	@mkdir -p $(@D)
	$(CC) -o $@ $^ $(DEP_LIBS)

$(SHARD_SCENARIO): $(call obj,test/shard_scenario.c test/shard_scenario_order.c \
		test/shard_scenario_l2.c test/shard_scenario_report.c) $(TEST_COMMON) $(LIBWAFER) $(LIBPROTO) \
		$(LIBPERCENTILE)
	@mkdir -p $(@D)
	$(CC) -o $@ $^ $(DEP_LIBS)

$(GEN_FRAMES): $(call obj,test/gen_frames.c) $(TEST_COMMON) $(LIBPROTO)
	@mkdir -p $(@D)
	$(CC) -o $@ $^ $(DEP_LIBS)

# ---- benchmarks --------------------------------------------------------------

BENCHES := $(BUILD)/bench/bench_kvstore $(BUILD)/bench/bench_prefixcache $(BUILD)/bench/bench_shard \
	$(BUILD)/bench/bench_wafer $(BUILD)/bench/bench_seal

# Sealing a column on a shard's CPU beyond AES-256-GCM itself.
$(BUILD)/bench/bench_seal: $(call obj,bench/bench_seal.c) $(LIBKVDISK) $(LIBSEAL) $(LIBPROTO)
	@mkdir -p $(@D)
	$(CC) -o $@ $^ $(DEP_LIBS)

# The shared level against fio's rados engine (scripts/bench-shared.sh starts
# the cluster).
BENCH_SHARED := $(BUILD)/bench/bench_shared

$(BENCH_SHARED): $(call obj,bench/bench_shared.c) $(LIBSHARED) $(LIBSEAL) $(LIBFILEIO) $(LIBPERCENTILE)
	@mkdir -p $(@D)
	$(CC) -o $@ $^ $(RADOS_LIBS) $(DEP_LIBS)

$(BUILD)/bench/bench_kvdisk: $(call obj,bench/bench_kvdisk.c) $(LIBKVDISK) $(LIBSEAL)
	@mkdir -p $(@D)
	$(CC) -o $@ $^ $(DEP_LIBS) $(URING_LIBS)

$(BUILD)/bench/bench_kvstore: $(BUILD)/obj/bench/bench_kvstore.o $(LIBKVSTORE) $(LIBPROTO)
	@mkdir -p $(@D)
	$(CC) -o $@ $^ $(DEP_LIBS)

$(BUILD)/bench/bench_wafer: $(BUILD)/obj/bench/bench_wafer.o $(LIBWAFER) $(LIBPROTO)
	@mkdir -p $(@D)
	$(CC) -o $@ $^ $(DEP_LIBS)

$(BUILD)/bench/bench_prefixcache: $(BUILD)/obj/bench/bench_prefixcache.o $(LIBPREFIXCACHE) $(LIBPROTO)
	@mkdir -p $(@D)
	$(CC) -o $@ $^ $(DEP_LIBS)

# The application's shard lcore (shard.c, refill.c) on a net_ring port pair.
$(BUILD)/bench/bench_shard: $(call obj,bench/bench_shard.c app/kvss/app.c $(SHARD_SRC) \
		app/kvss/portgate.c) $(LIBCONFIG) $(LIBPREFIXCACHE) $(LIBKVSTORE) $(LIBPROTO) $(SHARD_LIBS)
	@mkdir -p $(@D)
	$(CC) -o $@ $^ $(DPDK_LIBS) -lrte_net_ring $(DEP_LIBS)

# ---- fuzzing ---------------------------------------------------------------

FUZZ_FLAGS := -std=gnu11 -O1 -g -fsanitize=fuzzer,address,undefined \
	-fno-sanitize-recover=undefined -Ilib/proto
FUZZ_PROTO := $(BUILD)/fuzz/fuzz_proto
FUZZ_CORPUS := $(BUILD)/fuzz/corpus_proto
FUZZ_SEEDS := $(BUILD)/fuzz/seeds_proto.stamp

$(FUZZ_PROTO): test/fuzz/fuzz_proto.c $(PROTO_PURE_SRC) lib/proto/proto.h lib/proto/proto_priv.h
	@mkdir -p $(@D)
	$(CLANG) $(FUZZ_FLAGS) -o $@ test/fuzz/fuzz_proto.c $(PROTO_PURE_SRC) -lxxhash

# The files kvss reads from outside: configurations and traces.
FUZZ_FILES := $(BUILD)/fuzz/fuzz_files
FUZZ_FILES_CORPUS := $(BUILD)/fuzz/corpus_files
FUZZ_FILES_SRC := test/fuzz/fuzz_files.c $(CONFIG_SRC) $(WORKLOAD_SRC) $(FILEIO_SRC) app/plan/plan.c \
	$(PREFIXCACHE_SRC) $(KVSTORE_SRC) $(PROTO_PURE_SRC) $(SEAL_SRC)

$(FUZZ_FILES): $(FUZZ_FILES_SRC) lib/config/config.h lib/config/cluster.h lib/workload/workload.h \
		app/plan/plan.h lib/seal/orgkeys.h lib/seal/seal.h
	@mkdir -p $(@D)
	$(CLANG) $(FUZZ_FLAGS) $(LIB_INC) -Iapp/plan -o $@ \
		$(FUZZ_FILES_SRC) -lconfig -lxxhash -lcrypto -lm

# The second tier's file (lib/kvdisk): mutated images opened, rebuilt and
# served; its seeds are written by the harness (scripts/fuzz-kvdisk.sh).
FUZZ_KVDISK := $(BUILD)/fuzz/fuzz_kvdisk
FUZZ_KVDISK_CORPUS := $(BUILD)/fuzz/corpus_kvdisk

$(FUZZ_KVDISK): test/fuzz/fuzz_kvdisk.c $(KVDISK_SRC) $(SEAL_SRC) lib/kvdisk/kvdisk.h \
		lib/kvdisk/kvdisk_priv.h lib/seal/seal.h
	@mkdir -p $(@D)
	$(CLANG) $(FUZZ_FLAGS) -Ilib/kvdisk -Ilib/mono -Ilib/seal -Ilib/proto -o $@ test/fuzz/fuzz_kvdisk.c \
		$(KVDISK_SRC) $(SEAL_SRC) -lxxhash $(URING_LIBS) -lcrypto

# Objects and names read from the shared level (lib/shared/shared_obj.c).
FUZZ_SHARED_OBJ := $(BUILD)/fuzz/fuzz_shared_obj
FUZZ_SHARED_OBJ_CORPUS := $(BUILD)/fuzz/corpus_shared_obj

$(FUZZ_SHARED_OBJ): test/fuzz/fuzz_shared_obj.c $(SHARED_OBJ_SRC) lib/shared/shared_seal.c \
		$(SEAL_SRC) lib/shared/shared_obj.h lib/shared/shared_seal.h lib/seal/seal.h lib/proto/proto.h
	@mkdir -p $(@D)
	$(CLANG) $(FUZZ_FLAGS) -Ilib/shared -Ilib/seal -Ilib/proto -o $@ test/fuzz/fuzz_shared_obj.c \
		$(SHARED_OBJ_SRC) lib/shared/shared_seal.c $(SEAL_SRC) -lxxhash -lcrypto

# The shard with its state (test/fuzz/fuzz_shard.c): its own code, as kvss
# runs it, under ASan and UBSan, over EAL without a port; objects of its
# own (clang, DPDK's flags). The link wraps pthread_create: the tier and
# shared-level workers level.c starts are fibers of the fuzzer's thread, run
# in turn (a switch of stacks, not a hand-off between threads), whose
# idle sleeps (nanosleep) end at once; and kvdisk_inflight: the tier thread parks where it would sleep idle; and
# the shared level's requests handed to its thread and back, counted.
# lib/shared's librados client is replaced by fuzz_shard_rados.c: the same
# API over objects in memory (test/rados_mem.c, the store the driver's unit
# tests use too), a cluster that lies as the input says.
FUZZ_SHARD := $(BUILD)/fuzz/fuzz_shard
FUZZ_SHARD_CORPUS := $(BUILD)/fuzz/corpus_shard
FUZZ_SHARD_SRC := $(addprefix test/fuzz/,fuzz_shard.c fuzz_shard_env.c fuzz_shard_check.c \
	fuzz_shard_rados.c) test/rados_mem.c \
	$(filter-out app/kvss/shard/hosted.c,$(SHARD_SRC)) $(KVDISK_SRC) $(SHARED_OBJ_SRC) \
	$(SHARED_COMMON_SRC) lib/shared/shared_seal.c $(SEAL_SRC) $(FILEIO_SRC) $(KVSTORE_SRC) \
	$(PROTO_PURE_SRC) $(PROTO_DPDK_SRC)
FUZZ_SHARD_OBJ := $(patsubst %.c,$(BUILD)/fuzz/obj/%.o,$(FUZZ_SHARD_SRC))

# Coverage: the code under test counts its edges, without libFuzzer's
# comparison tracing (-fsanitize=fuzzer's trace-cmp): a call at every
# comparison of the shard's, the store's and the protocol's loops over
# entries, bytes and slots (a quarter of the time, and more in libFuzzer's
# tables), for guidance the input's encoding mostly gives already (its
# operations build valid frames). The harness (test/fuzz/) has none: its
# branches (780 of 2,660 edges) are not the code under test, and libFuzzer
# spent as long on their features as on the shard's. Both keep ASan and
# UBSan. The harness is optimized further (-O2: its slices, frames and
# checks are a fifth of the time), the code under test stays at -O1, the
# edges its coverage has been counted by (at -O2 inlining merges them: 1,677
# edges reached where -O1 counts 1,882 in the same 30 s).
FUZZ_SHARD_CFLAGS := -std=gnu11 -g -fsanitize=address,undefined -fno-sanitize-recover=undefined
# The clocks the code under test reads are the harness's (fuzz_shard_env.c,
# fz_clock_gettime): the second tier's deferred deletes fell due, and the
# shared level's reads timed out, by the wall clock, so an input ran one way
# on a quick run and another on a slow one.
FUZZ_SHARD_COV := -fsanitize=fuzzer-no-link -fno-sanitize-coverage=trace-cmp \
	-Dclock_gettime=fz_clock_gettime
FUZZ_SHARD_OPT := -O1
FUZZ_SHARD_HARNESS_OPT := -O2
$(BUILD)/fuzz/obj/%.o: FUZZ_COV := $(FUZZ_SHARD_COV)
$(BUILD)/fuzz/obj/%.o: FUZZ_OPT := $(FUZZ_SHARD_OPT)
$(BUILD)/fuzz/obj/test/fuzz/%.o: FUZZ_COV :=
$(BUILD)/fuzz/obj/test/fuzz/%.o: FUZZ_OPT := $(FUZZ_SHARD_HARNESS_OPT)
$(BUILD)/fuzz/obj/test/fuzz/%.o: FUZZ_WARN := $(WARN) -Wno-missing-prototypes
# The in-memory cluster is the harness's too.
$(BUILD)/fuzz/obj/test/rados_mem.o: FUZZ_COV :=
$(BUILD)/fuzz/obj/test/rados_mem.o: FUZZ_OPT := $(FUZZ_SHARD_HARNESS_OPT)
$(BUILD)/fuzz/obj/test/rados_mem.o: FUZZ_WARN := $(WARN)
# The objects are made again when these flags change (an object built
# with the old ones would keep them).
FUZZ_SHARD_FLAGS := $(BUILD)/fuzz/obj/flags
FUZZ_SHARD_ALL_FLAGS := $(FUZZ_SHARD_CFLAGS) $(FUZZ_SHARD_COV) $(FUZZ_SHARD_OPT) $(FUZZ_SHARD_HARNESS_OPT)
$(FUZZ_SHARD_FLAGS): FORCE
	@mkdir -p $(@D)
	@echo '$(FUZZ_SHARD_ALL_FLAGS)' | cmp -s - $@ || echo '$(FUZZ_SHARD_ALL_FLAGS)' >$@
$(FUZZ_SHARD_OBJ): $(BUILD)/fuzz/obj/%.o: %.c $(FUZZ_SHARD_FLAGS)
	@mkdir -p $(@D)
	$(CLANG) $(FUZZ_SHARD_CFLAGS) $(FUZZ_OPT) $(FUZZ_COV) $(FUZZ_WARN) -MMD -MP $(DPDK_CFLAGS) $(LIB_INC) -Iapp/kvss -Ilib/proto -c $< -o $@

$(FUZZ_SHARD): $(FUZZ_SHARD_OBJ) $(BUILD)/fuzz/fuzz_shard_seeds
	$(CLANG) $(FUZZ_FLAGS) -o $@ $(FUZZ_SHARD_OBJ) $(DPDK_LIBS) $(DEP_LIBS) \
		-Wl,--wrap=kvdisk_inflight -Wl,--wrap=shard_level_give -Wl,--wrap=shard_level_take \
		-Wl,--wrap=pthread_create -Wl,--wrap=pthread_setname_np -Wl,--wrap=nanosleep \
		-Wl,--wrap=io_uring_submit

# Its seeds: whole valid streams in its input encoding (scripts/fuzz-shard.sh runs it).
$(BUILD)/fuzz/fuzz_shard_seeds: test/fuzz/fuzz_shard_seeds.c test/fuzz/fuzz_shard.h
	@mkdir -p $(@D)
	$(CC) -std=gnu11 -O2 $(WARN) -o $@ test/fuzz/fuzz_shard_seeds.c

-include $(FUZZ_SHARD_OBJ:.o=.d)

$(FUZZ_SEEDS): $(GEN_FRAMES)
	@mkdir -p $(FUZZ_CORPUS)
	$(GEN_FRAMES) corpus $(FUZZ_CORPUS)
	touch $@

# ---- top-level targets -----------------------------------------------------

ALL := $(LIBPROTO) $(LIBKVSTORE) $(LIBPREFIXCACHE) $(LIBCONFIG) $(LIBWORKLOAD) $(LIBWAFER) $(LIBFILEIO) \
	$(LIBKVDISK) $(LIBSEAL) $(LIBARGS) $(LIBPLOT) $(LIBPERCENTILE) $(LIBWAFERMODEL) $(KVSS) $(KVSS_DUMP) $(KVSS_TRACE) $(KVSS_PLAN) $(TESTS) $(GEN_FRAMES) \
	$(SHARD_SCENARIO) $(REPLAY_CHECK) $(MEMIF_FLAP) $(BENCHES) $(BUILD)/bench/bench_kvdisk

ALL += $(LIBSHARED) $(KVSS_SHARED) $(TEST_SHARED_RADOS) $(BENCH_SHARED)

# kvss-udp-client (app/udpclient): a driver and a wafer over plain UDP
# sockets, no DPDK (docs/INTEGRATION.md, scripts/test-udpclient.sh); its
# own encoder, tested against docs/PROTOCOL.md's vectors and lib/proto.
UDPCLIENT_SRC := $(sort $(wildcard app/udpclient/*.c))
KVSS_UDPCLIENT := $(BUILD)/kvss-udp-client

$(call obj,$(UDPCLIENT_SRC) test/test_udpclient.c test/test_udpclient_shard.c): $(BUILD)/obj/%.o: %.c
	@mkdir -p $(@D)
	$(CC) $(CFLAGS_PURE) -Iapp/udpclient -c $< -o $@

$(KVSS_UDPCLIENT): $(call obj,$(UDPCLIENT_SRC)) $(LIBARGS)
	$(CC) -o $@ $^ -lxxhash -lm

$(BUILD)/test/test_udpclient: $(call obj,test/test_udpclient.c app/udpclient/ucwire.c) $(TEST_COMMON) \
		$(LIBPROTO)
	@mkdir -p $(@D)
	$(CC) -o $@ $^ $(CRITERION_LIBS) $(DEP_LIBS)

# The client against a fake shard that lies (test/test_udpclient_shard.c):
# it runs the client built beside it ($(BUILD)/kvss-udp-client; in
# $(SAN_BUILD), the sanitizers' client).
$(BUILD)/test/test_udpclient_shard: $(call obj,test/test_udpclient_shard.c app/udpclient/ucwire.c) \
		$(LIBPROTO) | $(KVSS_UDPCLIENT)
	@mkdir -p $(@D)
	$(CC) -o $@ $(filter-out $(KVSS_UDPCLIENT),$^) $(CRITERION_LIBS) $(DEP_LIBS)

TESTS += $(BUILD)/test/test_udpclient $(BUILD)/test/test_udpclient_shard
ALL += $(KVSS_UDPCLIENT) $(BUILD)/test/test_udpclient $(BUILD)/test/test_udpclient_shard

# Its decoder, fuzzed alone (test/fuzz/fuzz_ucwire.c): what a shard, or
# anyone on the rail, can make the client read.
FUZZ_UCWIRE := $(BUILD)/fuzz/fuzz_ucwire
FUZZ_UCWIRE_CORPUS := $(BUILD)/fuzz/corpus_ucwire

$(FUZZ_UCWIRE): test/fuzz/fuzz_ucwire.c app/udpclient/ucwire.c app/udpclient/ucwire.h
	@mkdir -p $(@D)
	$(CLANG) $(FUZZ_FLAGS) -Iapp/udpclient -o $@ test/fuzz/fuzz_ucwire.c app/udpclient/ucwire.c -lxxhash

.PHONY: demo-shared
# The shared level in the whole system on a throwaway Ceph cluster: two
# replicas in turn over memif, the public trace's halves (scripts/demo-shared.sh).
demo-shared: deps
	@$(MAKE) --no-print-directory all $(PYLINK)
	@scripts/demo-shared.sh $(BUILD)

# The unit suites alone (Criterion: 40 s to 80 s here once built), between
# edits; make check runs them too, beside everything else.
.PHONY: test
test: need-deps $(TESTS) $(KVSS_PLAN)
	@f=0; for t in $(TESTS); do $$t --jobs $(JOBS) --short-filename || f=$$((f + 1)); done; \
		echo "make test: $(words $(TESTS)) suites, $$f failed"; [ $$f -eq 0 ]

.PHONY: all check check-run check-sanitize-build check-tsan bench bench-run demo soak fuzz fuzz-run clean deps need-deps

all: need-deps $(ALL)

$(PYBIN)/python3:
	@mkdir -p $(@D)
	ln -sf /usr/bin/python3 $@

need-deps:
ifneq ($(HAVE_PKGS),yes)
	@echo "missing packages ($(PKGS) criterion): run scripts/deps.sh" >&2; exit 2
endif

deps:
	@scripts/deps.sh

# The builds (plain, sanitizers, fuzzers) on every core; the tests after, in turn.
JOBS ?= $(shell nproc 2>/dev/null || echo 2)
check: deps
	@$(MAKE) --no-print-directory -j$(JOBS) check-run

check-run: all $(PYLINK) $(FUZZ_PROTO) $(FUZZ_SEEDS) $(FUZZ_FILES) $(FUZZ_KVDISK) $(FUZZ_SHARD) $(FUZZ_SHARED_OBJ) \
		$(FUZZ_UCWIRE) $(STRESS) \
		check-sanitize-build
	@scripts/run-tests.sh $(BUILD) $(FUZZ_SECONDS)

# The tests that need no DPDK, kvss-trace, and kvss with the tools its
# capture tests use, built again with AddressSanitizer and
# UndefinedBehaviorSanitizer in $(BUILD)/asan; any report fails the test
# (run-tests.sh runs them when they are there).
SAN_BUILD := $(BUILD)/asan
SAN_CC := $(CC) -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer
SAN_TESTS := $(filter-out test_proto_mbuf test_kvss_refill test_kvss_telemetry test_drv_link \
	test_drv_rx test_drv_ttft test_drv_report test_drv_shared,$(notdir $(TESTS)))

check-sanitize-build: need-deps
	@$(MAKE) --no-print-directory BUILD=$(SAN_BUILD) CC="$(SAN_CC)" \
		$(addprefix $(SAN_BUILD)/test/,$(SAN_TESTS)) $(SAN_BUILD)/kvss-trace \
		$(SAN_BUILD)/kvss $(SAN_BUILD)/kvss-dump $(addprefix $(SAN_BUILD)/tools/,gen_frames \
		replay_check shard_scenario memif_flap) $(SAN_BUILD)/kvss-shared \
		$(SAN_BUILD)/tools/test_shared_rados $(SAN_BUILD)/kvss-udp-client

check-tsan: $(BUILD)/test/stress_kvstore_tsan
	TSAN_OPTIONS=halt_on_error=1 $(BUILD)/test/stress_kvstore_tsan 1000000

fuzz: deps
	@$(MAKE) --no-print-directory fuzz-run

fuzz-run: $(FUZZ_PROTO) $(FUZZ_SEEDS) $(FUZZ_FILES) $(FUZZ_KVDISK) $(FUZZ_SHARD) $(FUZZ_SHARED_OBJ) \
		$(FUZZ_UCWIRE) $(GEN_FRAMES)
	@scripts/fuzz.sh $(FUZZ_PROTO) $(FUZZ_CORPUS) $(FUZZ_SECONDS)
	@scripts/fuzz-files.sh $(FUZZ_FILES) $(FUZZ_FILES_CORPUS) $(FUZZ_SECONDS)
	@scripts/fuzz-kvdisk.sh $(FUZZ_KVDISK) $(FUZZ_KVDISK_CORPUS) $(FUZZ_SECONDS)
	@scripts/fuzz-shard.sh $(FUZZ_SHARD) $(FUZZ_SHARD_CORPUS) $(FUZZ_SECONDS)
	@FUZZ_REGRESS=test/fuzz/regress_shared FUZZ_MAX_LEN=4096 scripts/fuzz.sh $(FUZZ_SHARED_OBJ) \
		$(FUZZ_SHARED_OBJ_CORPUS) $(FUZZ_SECONDS)
	@scripts/fuzz-ucwire.sh $(FUZZ_UCWIRE) $(FUZZ_UCWIRE_CORPUS) $(FUZZ_SECONDS) $(GEN_FRAMES)

bench: deps
	@$(MAKE) --no-print-directory bench-run

# In hugepages where the machine allows (scripts/bench.sh reserves them as
# root and gives them back). The last: make demo's processes on the same
# input, DRAM alone, both tiers, both tiers begun ahead of the pick, and fio
# on their file system (scripts/bench-demo.sh, about six minutes on the
# public trace).
bench-run: all $(PYLINK) $(BENCHES) $(BUILD)/bench/bench_kvdisk
	@scripts/bench.sh $(BUILD) $(BENCHES)

# Requests arrive at the workload's times (KVSS_DEMO_ARRIVALS), so the
# verdict gives the time to first token beside recomputing.
demo: deps
	@$(MAKE) --no-print-directory all $(PYLINK)
	@KVSS_DEMO_ARRIVALS=$${KVSS_DEMO_ARRIVALS-trace} scripts/demo.sh $(BUILD)

# The fault soak: SEEDS seeds from FIRST, each a whole workload through the
# seeded fault injector in one process (scripts/soak.sh), then PSEEDS with
# processes over memif, a shard or the driver killed mid-run
# (scripts/soak-procs.sh); a failing seed prints its replay.
SEEDS ?= 1000
FIRST ?= 1
PSEEDS ?= 30
soak: deps
	@$(MAKE) --no-print-directory all $(PYLINK)
	@SEEDS=$(SEEDS) FIRST=$(FIRST) scripts/soak.sh $(BUILD)
	@SEEDS=$(PSEEDS) FIRST=$(FIRST) scripts/soak-procs.sh $(BUILD)

clean:
	rm -rf $(BUILD)

-include $(shell find $(BUILD)/obj -name '*.d' 2>/dev/null)
