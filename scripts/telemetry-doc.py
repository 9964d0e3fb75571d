#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""The telemetry keys of kvss, as a Markdown table, from the code itself.

Keys come from the X-macros that declare the counters (KVSS_STATS,
KVSS_DRV_STATS, EMU_STATS, DRV_SH_STATS, SHARD_SNAP_FIELDS, PROTO_REASONS, PROTO_ERRS) and from the
string literals each telemetry handler adds; descriptions from the comments
beside the X-macro entries, and for the few literal keys from the table
below. So docs/telemetry.md cannot drift from the code:

  scripts/telemetry-doc.py              print the document
  scripts/telemetry-doc.py --check F    exit 1 unless F is what it prints, and
                                        every library counter has a key
  scripts/telemetry-doc.py --keys EP    the keys of endpoint EP, one a line
"""
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# Keys a handler adds by name rather than through an X-macro.
LITERAL = {
    "driver_epoch": "the driver epoch a HELLO established, 0x%08x as in the logs (0x00000000: none); "
                    "of the process's first shard",
    "driver_epochs": "each shard's of this process, in order (shards of two models may have two drivers)",
    "ingest_busy_us": "the shard's lcores busy on ingest work (EVICT_DATA stored, control, EVICT, "
                      "DELETE, ACK, STATUS)",
    "refill_busy_us": "the shard's lcores busy on refill work (REFILLs received, REFILL_DATA "
                      "built and sent; a refill lcore's busy polls)",
    "idle_us": "the shard's lcores in polls that found no work",
    "gate_parks": "times the port gate parked EAL's interrupt thread (memif)",
    "driver_hops": "routers the latest control frame crossed (64 - its IPv4 TTL; 0: on the rail); "
                   "the most any shard of the process saw",
    "wafer_hops": "routers the latest EVICT_DATA frame crossed (64 - its IPv4 TTL; 0: on the rail); "
                  "the most any shard of the process saw",
    "shard": "the shard holding it (its id: a process may host several)",
    "model": "that shard's model",
    "cache_id": "the cache (one array element per cache of each shard)",
    "bytes_per_token": "this shard's slice of a token, all buffers",
    "buffers": "buffers per token",
    "capacity_tokens": "tokens the cache may hold",
    "stored_tokens": "tokens it holds",
    "prompts": "prompts it holds",
    "free_slots": "token slots free to take at once",
    "limbo_slots": "token slots freed and waiting for the refills reading them to end",
    "lcore": "the lcore id (one array element per lcore)",
    "role": "control, ingest, refill, or none",
    "busy_cycles": "TSC cycles of polls that found work",
    "idle_cycles": "TSC cycles of polls that found none",
    "tsc_hz": "TSC cycles per second (the cycles above into seconds)",
    "prompt_id": "the prompt asked for, as a decimal string (exact beyond 2^53)",
    "offset": "its first token held",
    "tokens": "tokens held from the offset",
    "error": "why there is no answer (no such prompt)",
    "entries": "cached columns (entries of every PrefixMap)",
    "isolation_id": "the organization's isolation id, as a decimal string (exact beyond 2^53)",
    "cached_tokens": "tokens of its cached columns",
    "hit_tokens": "prompt tokens hit",
    "requests": "requests looked up",
    "dram_tokens": "DRAM tokens it holds now, every model and cache group summed",
    "dram_share_tokens": "the DRAM tokens its share guarantees (`driver.orgs`' `dram_share` x each group's capacity, summed; 0: none)",
    "dram_cap_tokens": "the DRAM tokens its cap allows at most (`dram_cap` x capacity, summed)",
    "dram_yielded": "its columns deleted to make room for another organization's (only when it was above its share)",
    "l2_tokens": "tokens of its columns in the second tier (the shards' disks) now",
    "l2_share_tokens": "the second tier's tokens its share guarantees (`l2_share` x each group's second-tier capacity, summed; 0: none)",
    "l2_cap_tokens": "the second tier's tokens its cap allows at most (`l2_cap` x capacity, summed)",
    "l2_yielded": "its second-tier columns let go to make room for another organization's (only when it was above its share)",
    "heard_ms_ago": "ms since its last frame while the driver ran (its own stops left out; -1: never)",
    "status_ms_ago": "ms since its last STATUS (-1: never)",
    "epoch": "its epoch, 0x%08x as in the logs",
    "version": "kvss's release (as every tool's --version says it)",
    "commit": "the git commit it was built from (unknown: not built in a git checkout)",
    "dpdk": "the DPDK it runs on (rte_version())",
    "le_us": "the buckets' bounds, us (refill times: 1-2-5 from 10 us to 1 s; TTFT: 1 ms to 60 s)",
    "le_count": "those timed at most that bound (cumulative)",
    "count": "those timed (refill times: the summary's refills_timed; TTFT: its first_tokens)",
    "sum_us": "their times summed",
    "configured": "1: the configuration has a shared group (shared.conf)",
    "disk_puts": "second tier: columns written (L2_DOWN)",
    "disk_gets": "second tier: columns read (L2_UP, an SH_UP's column with object id 0)",
    "disk_dels": "second tier: columns deleted (L2_DELETE)",
    "disk_dels_absorbed": "second tier: deletes whose slot a put took (its write was the clear)",
    "disk_dels_written": "second tier: deletes that wrote a cleared header",
    "disk_bytes_written": "second tier: bytes written",
    "disk_bytes_read": "second tier: bytes read",
    "disk_corrupt": "second tier: columns whose checksum or key failed (dropped, never served)",
    "disk_write_errors": "second tier: failed or short writes (the column is not stored)",
    "disk_read_errors": "second tier: failed reads",
    "disk_rebuilt": "second tier: columns found at open",
    "disk_rebuild_dropped": "second tier: headers found at open that did not check",
    "disk_sealed": "second tier, sealed file: columns written sealed (AES-256-GCM)",
    "disk_opened": "second tier, sealed file: columns read and opened (their tag held)",
    "disk_bad_tag": "second tier, sealed file: columns whose tag failed (forged, tampered, moved): dropped",
    "disk_bad_key": "second tier, sealed file: columns sealed under a key not held: dropped",
    "disk_seal_errors": "second tier, sealed file: seals or opens that failed in libcrypto here",
    "disk_retired": "second tier, sealed file: columns let go at once, held or being written, "
                    "because a new organization key store retired their organization's key",
    "disk_gone_told": "second tier: of them, columns held that the driver was told of (L2_GONE)",
    "disk_gone_dels": "second tier: deletes of a column such a store let go, answered as done",
    "disk_columns": "second tier: columns held now, every cache",
    "disk_waited": "second tier: requests that could not start when taken (their column's write in flight, "
                   "or no op free: writes hold three quarters of the queue at most)",
    "shared_failed": "shared-level operations the cluster failed (SHARED_FAILED)",
    "shared_missing": "slices read that were not in the cluster",
    "shared_exists": "slices written that were there already (exclusive create, read back: the same slice)",
    "shared_replaced": "slices written over what was under their name (read back: not the slice)",
    "shared_kept_unknown_key": "taken names kept, not written over: a slice sealed under a key id the organization key store does not make (it may be newer); that SH_DOWN answered SHARED_KEY",
    "shared_shed": "slice writes answered SHARED_FAILED at once: too many waited",
    "shared_sealed": "slices sealed (AES-256-GCM) before they were written (shared.key_file)",
    "shared_opened": "sealed slices read whose tag matched (opened, then served)",
    "shared_org_keys_reloaded": "times the organization key store (shared.org_key_file) was read "
                                "again after its file was replaced (a reset retired a key)",
    "shared_org_keys_refused": "times a replaced organization key store was refused (the keys held "
                               "kept for reading; the log says why)",
    "shared_org_keys_behind_refused": "slices not written because the organization key store given "
                                      "was refused (nothing sealed under keys perhaps retired)",
    "disk_org_keys_reloaded": "times the second tier read its organization key store "
                              "(shard.l2.org_key_file) again after its file was replaced",
    "disk_org_keys_refused": "times a replaced organization key store was refused by the second "
                             "tier (the keys held kept for reading; the log says why)",
    "disk_org_keys_behind_refused": "columns neither written to nor read from the second tier "
                                    "because its organization key store was refused (L2_FAILED)",
    "shared_timeouts": "cluster operations past the op timeout (shared.op_timeout_ms)",
    "shared_busy": "cluster operations not begun: as many in flight as shared.depth",
    "shared_cluster_puts": "writes asked of the cluster (lib/shared: exclusive creates and writes over)",
    "shared_cluster_puts_ok": "... that it completed",
    "shared_cluster_gets": "reads asked of the cluster (slices, and names taken read back)",
    "shared_cluster_gets_ok": "... that it completed",
    "shared_cluster_dels": "deletes asked of the cluster (a shard asks none)",
    "shared_cluster_dels_ok": "... that it completed",
    "shared_cluster_exists": "cluster operations answered -EEXIST (a name taken)",
    "shared_cluster_missing": "cluster operations answered -ENOENT",
    "shared_cluster_too_big": "reads answered -EFBIG (an object larger than asked)",
    "shared_cluster_other_errors": "cluster operations that failed otherwise",
}


def level_counters():
    """[(key, description)] of every level's counters (app/kvss/shard/level_*.c), in their order."""
    out = []
    for prefix, path in (("disk_", "app/kvss/shard/level_disk.c"),
                         ("shared_", "app/kvss/shard/level_shared.c")):
        m = re.search(r"^counters\(.*?^}", (ROOT / path).read_text(), re.S | re.M)
        if m is None:
            sys.exit(f"telemetry-doc: no counters() in {path}")
        body = m.group(0)
        # The refusals by reason come first (level_shared.c), named as counted.
        if '"bad_", shared_bad_name' in body:
            out += [(prefix + "bad_" + k, "slices refused by their check: " + t)
                    for k, t in shared_bad()]
        for macro, name in re.findall(r'(?:^\s*DISK_COUNTER\((\w+)(?:,[^)]*)?\)|level_counter\)\{"",\s*"(\w+)")',
                                      body, re.M):
            key = prefix + (macro or name)
            if key not in LITERAL:
                sys.exit(f"telemetry-doc: key {key} of {path} has no description in LITERAL")
            out.append((key, LITERAL[key]))
    return out


def shared_bad():
    """[(name, text)] of lib/shared/shared_obj.h's SHARED_BAD_REASONS, names as counted."""
    text = (ROOT / "lib/shared/shared_obj.h").read_text()
    m = re.search(r"#define SHARED_BAD_REASONS\(X\)(.*?)(?<!\\)\n(?![\t ]*X\()", text, re.S)
    if m is None:
        sys.exit("telemetry-doc: no SHARED_BAD_REASONS in lib/shared/shared_obj.h")
    return [(k.lower(), t) for k, t in re.findall(r'X\((\w+),\s*"([^"]*)"\)', m.group(1))]

ENDPOINTS = [
    ("/kvss/stats", "app/kvss/telemetry.c", "tel_stats",
     "A shard process: every lcore's counters summed, over every shard it hosts."),
    ("/kvss/caches", "app/kvss/telemetry.c", "tel_caches",
     "A shard process: the caches of every shard it hosts, one array element per cache."),
    ("/kvss/lcores", "app/kvss/telemetry.c", "tel_lcores",
     "The process's lcores, one array element per lcore."),
    ("/kvss/prompt", "app/kvss/telemetry.c", "tel_prompt",
     "A shard process: `/kvss/prompt,CACHE,PROMPT_ID` (decimal, or hex with 0x), that prompt's range "
     "in the first shard it hosts that holds it."),
    ("/kvss/build", "app/kvss/telemetry.c", "tel_build", "Any kvss process: what it is."),
    ("/swdriver/stats", "app/kvss/driver/report.c", "tel_drv_stats",
     "The driver, from a snapshot the control lcore takes every 100 ms."),
    ("/swdriver/orgs", "app/kvss/driver/report.c", "tel_drv_orgs",
     "The driver, one dictionary per organization (by name when the configuration names it)."),
    ("/swdriver/shards", "app/kvss/driver/report.c", "tel_drv_shards",
     "The driver, one dictionary per shard, keyed `model<M>_shard<S>`."),
    ("/swdriver/refill_latency", "app/kvss/driver/report.c", "tel_drv_refill_latency",
     "The driver: each sequence's refill time, from its REFILLs sent to its data whole "
     "(refills that failed are not timed), by bucket."),
    ("/swdriver/ttft", "app/kvss/driver/report.c", "tel_drv_ttft",
     "The driver: each request's time to first token, from its arrival to the end of its "
     "prefill (queueing and refill included), by bucket."),
    ("/swdriver/shared", "app/kvss/driver/report.c", "tel_drv_shared",
     "The driver: the shared level (Ceph RADOS), as the summary's `shared` object counts it."),
]


def xmacro(path, name):
    """[(key, comment)] of #define NAME(X) X(key) /* comment */ ..."""
    text = (ROOT / path).read_text()
    m = re.search(r"#define " + name + r"\(X\)(.*?)(?<!\\)\n(?![\t ]*X\()", text, re.S)
    if m is None:
        sys.exit(f"telemetry-doc: no {name} in {path}")
    body = m.group(1)
    out = []
    for line in body.split("\n"):
        comment = re.search(r"/\*\s*(.*?)\s*\*/", line)
        keys = re.findall(r"\bX\((\w+)(?:,\s*(\"?[\w]+\"?))?\)", line)
        for i, (k, second) in enumerate(keys):
            key = second.strip('"') if second.startswith('"') else k
            out.append((key, comment.group(1) if comment and i == len(keys) - 1 else ""))
    return out


def handler(path, fn):
    text = (ROOT / path).read_text()
    m = re.search(r"^" + fn + r"\(.*?^}", text, re.S | re.M)
    if m is None:
        sys.exit(f"telemetry-doc: no {fn} in {path}")
    return m.group(0)


def keys_of(path, fn):
    """[(key, description)] of one handler, in the order it adds them."""
    body = handler(path, fn)
    out = []
    for line in body.split("\n"):
        if "KVSS_STATS(" in line:
            out += [(k, c) for k, c in xmacro("app/kvss/kvss.h", "KVSS_STATS")]
        elif "KVSS_DRV_STATS(" in line:
            out += [(k, c) for k, c in xmacro("app/kvss/driver/driver.h", "KVSS_DRV_STATS")]
        elif "EMU_STATS(" in line:
            out += [(k, c) for k, c in xmacro("app/kvss/emulator/emulator.h", "EMU_STATS")]
        elif '"store_" #n' in line:
            pass  # the macro that KVSTORE_STATS(KVSTORE_TEL) below expands
        elif "KVSTORE_STATS(KVSTORE_TEL)" in line:
            out += [("store_" + k, "the stores' own count: " + c)
                    for k, c in xmacro("lib/kvstore/kvstore.h", "KVSTORE_STATS")]
        elif "PREFIXCACHE_STATS(" in line:
            out += [(k, c) for k, c in xmacro("lib/prefixcache/prefixcache.h", "PREFIXCACHE_STATS")]
        elif "DRV_SH_STATS(" in line:
            out += [(k, c) for k, c in xmacro("app/kvss/driver/driver_priv.h", "DRV_SH_STATS")]
        elif "SHARD_SNAP_FIELDS(" in line:
            out += [(k, "") for k, _ in xmacro("app/kvss/driver/report.c", "SHARD_SNAP_FIELDS")]
        elif '"drop_%s"' in line:
            out += [("drop_" + k, "frames dropped: " + (c or k.replace("_", " ")))
                    for k, c in xmacro("lib/proto/proto.h", "PROTO_REASONS")]
        elif "tel_snap_hist(" in line and fn != "tel_snap_hist":
            out += keys_of(path, "tel_snap_hist")  # a histogram's keys, in its helpers
        elif "tel_cum_hist(" in line and fn != "tel_cum_hist":
            out += keys_of(path, "tel_cum_hist")
        elif "shard_level_counters(" in line:
            out += level_counters()
        elif '"shared_bad_%s"' in line:
            out += [("shared_bad_" + k, "slices refused by their check: " + t)
                    for k, t in shared_bad()]
        elif '"records_bad_%s"' in line:
            out += [("records_bad_" + k, "records refused (and deleted): " + t)
                    for k, t in shared_bad()]
        elif '"refill_failed_%s"' in line:
            out += [("refill_failed_" + k, "REFILLs answered with a failure, code " + k) for k, _ in
                    xmacro("lib/proto/proto.h", "PROTO_ERRS")]
        elif '"error_%s"' in line:
            what = "ERROR records sent" if "telemetry.c" in path else "ERROR records received"
            out += [("error_" + k, what + ", code " + k) for k, _ in
                    xmacro("lib/proto/proto.h", "PROTO_ERRS")]
        else:
            for k in re.findall(r'(?:add_dict_\w+|add_u64_array)\(\w+,\s*"(\w+)"', line):
                if k not in LITERAL:
                    sys.exit(f"telemetry-doc: key {k} of {fn} has no description in LITERAL")
                out.append((k, LITERAL[k]))
    return out


SNAP_DESC = {
    "model": "its model", "shard_id": "its id", "port": "the port it is reached through",
    "up": "1: it answered our HELLO",
    "seq_sent": "control messages sent", "seq_acked": "the highest acknowledged (done)",
    "seq_received": "the highest it says arrived (version 2 ACK recv_seq): never sent again",
    "backlog": "messages waiting for the window", "retransmits": "messages sent again",
    "rtt_samples": "round trips measured", "stale_acks": "ACKs of nothing new",
    "bogus_acks": "ACKs past what was sent", "srtt_us": "smoothed round trip",
    "timeout_us": "retransmission timeout", "evict_sent": "highest batch whose EVICT went out",
    "evict_acked": "highest batch whose EVICT ran", "batches_complete": "by its last STATUS",
    "stored_tokens": "tokens it holds, by its last STATUS",
    "l2_stored_tokens": "tokens its second tier holds, by its last STATUS (version 2)",
    "l2_capacity_tokens": "its second tier's capacity in tokens (0: none)",
    "reports_taken": "its reports (ERROR, TOKEN_LOST, L2_DONE) taken in order (version 2)",
    "model_refills_timed": "refills its model's estimate learned from",
    "model_estimate_latency_us": "its model's refill estimate in use: latency",
    "model_estimate_mbps": "... and bandwidth (0: no bandwidth term)",
    "hops": "routers its STATUS crossed when it came up (64 - IPv4 TTL; 0: on the rail)",
}


def document():
    lines = [
        "# Telemetry keys",
        "",
        "Generated by `scripts/telemetry-doc.py` from the X-macros and handlers that",
        "declare them (`make check` fails when this page and the code differ).",
        "Query a running kvss with DPDK's client: `echo /kvss/stats | dpdk-telemetry.py",
        "-f PREFIX` (PREFIX: its `--file-prefix`).",
    ]
    for ep, path, fn, what in ENDPOINTS:
        lines += ["", f"## {ep}", "", what, "", "| key | meaning |", "|---|---|"]
        for k, c in keys_of(path, fn):
            if ep == "/swdriver/shards" and not c:
                c = SNAP_DESC.get(k, "")
            if not c:
                sys.exit(f"telemetry-doc: {ep} key {k} has no description (a comment beside "
                         f"its X-macro entry)")
            lines.append(f"| `{k}` | {c} |")
    return "\n".join(lines) + "\n"


def struct_fields(path, name):
    """The field names of struct NAME in PATH (arrays by their name)."""
    m = re.search(r"^struct " + name + r" \{(.*?)^\};", (ROOT / path).read_text(), re.S | re.M)
    if m is None:
        sys.exit(f"telemetry-doc: no struct {name} in {path}")
    body = re.sub(r"/\*.*?\*/", "", m.group(1), flags=re.S)
    out = []
    for decl in body.split(";"):
        decl = decl.strip()
        if decl:
            out += [re.sub(r"\[.*", "", v.strip()).lstrip("*")
                    for v in re.sub(r"^[\w ]*?(\w+\s*(?:\[[^]]*\])?\s*(?:,|$))", r"\1", decl).split(",")]
    return out


# The libraries' counters, each a key of /kvss/stats (or said why not):
# struct, file, and a field's key (None: not shown, and why in the comment).
LIB_COUNTERS = [
    ("kvdisk_stats", "lib/kvdisk/kvdisk.h",
     lambda f: "disk_columns" if f == "stored" else "disk_" + f),
    ("shared_stats", "lib/shared/shared.h",
     lambda f: {"submitted": ["shared_cluster_puts", "shared_cluster_gets", "shared_cluster_dels"],
                "ok": ["shared_cluster_puts_ok", "shared_cluster_gets_ok", "shared_cluster_dels_ok"],
                "timeouts": "shared_timeouts", "busy": "shared_busy",
                # Listing's: a shard never lists (kvss-shared does, and says it).
                "names_skipped": None}.get(f, "shared_cluster_" + f)),
]


def unshown():
    """Library counters no telemetry key shows: [(struct, field, key)]."""
    keys = {k for k, _ in keys_of("app/kvss/telemetry.c", "tel_stats")}
    out = []
    for st, path, key in LIB_COUNTERS:
        for f in struct_fields(path, st):
            want = key(f)
            # An array field (one count per operation) is one key per element.
            for k in [] if want is None else [want] if isinstance(want, str) else want:
                if k not in keys:
                    out.append((st, f, k))
    return out


def main(argv):
    if len(argv) == 3 and argv[1] == "--check":
        missing = unshown()
        for st, f, k in missing:
            print(f"telemetry-doc: struct {st}'s {f} is counted and never shown (no key {k})",
                  file=sys.stderr)
        if missing:
            return 1
        want = document()
        have = Path(argv[2]).read_text() if Path(argv[2]).exists() else ""
        if have != want:
            print(f"telemetry-doc: {argv[2]} differs from the code; run "
                  f"scripts/telemetry-doc.py > {argv[2]}", file=sys.stderr)
            return 1
        return 0
    if len(argv) == 3 and argv[1] == "--keys":
        for ep, path, fn, _ in ENDPOINTS:
            if ep == argv[2]:
                print("\n".join(k for k, _ in keys_of(path, fn)))
                return 0
        print(f"telemetry-doc: no endpoint {argv[2]}", file=sys.stderr)
        return 2
    if len(argv) != 1:
        print(__doc__, file=sys.stderr)
        return 2
    sys.stdout.write(document())
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
