#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
"""Stand-ins for kvss processes' DPDK telemetry sockets, for the exporter's
tests (scripts/test-exporter.sh): no DPDK, no hugepages.

  fake-telemetry.py RUNDIR STATS --live P [--live Q ...] [--driver D ...] [--hung H ...] [--delay S]

Under RUNDIR/PREFIX/dpdk_telemetry.v2 (what the exporter opens with
RUNTIME_DIRECTORY=RUNDIR), a --live prefix speaks telemetry v2 as DPDK 22.11
does: its greeting, then one JSON answer per command (after --delay
seconds), and like DPDK it closes at once any connection past its 10th. A
--driver prefix answers as a driver process does: its /kvss/stats all zeros and
its /kvss/caches without a cache (it has no shard). A --hung prefix accepts
and never says a word. STATS gets one JSON line,
rewritten at every change: the most connections each prefix held at once,
how many it accepted and how many it refused as DPDK would.
Runs until SIGTERM.
"""
import json
import os
import signal
import socket
import sys
import threading
import time

MAX_CONNECTIONS = 10  # DPDK 22.11 lib/telemetry/telemetry.c

rundir, statsfile = sys.argv[1], sys.argv[2]
live, hung, drivers, delay = [], [], [], 0.0
args = sys.argv[3:]
while args:
    opt, val, args = args[0], args[1], args[2:]
    if opt == "--live":
        live.append(val)
    elif opt == "--driver":
        live.append(val)
        drivers.append(val)
    elif opt == "--hung":
        hung.append(val)
    elif opt == "--delay":
        delay = float(val)
    else:
        sys.exit(f"fake-telemetry: unknown {opt}")

lock = threading.Lock()
stats = {p: {"active": 0, "max_active": 0, "accepted": 0, "refused": 0} for p in live + hung}
held = []  # the hung prefixes' connections, kept open


def save():
    tmp = statsfile + ".tmp"
    with open(tmp, "w") as f:
        json.dump({p: {k: v for k, v in s.items() if k != "active"} for p, s in stats.items()}, f)
        f.write("\n")
    os.replace(tmp, statsfile)


def answer(cmd, prefix):
    if prefix in drivers:
        return {"/": ["/", "/kvss/stats", "/kvss/caches", "/swdriver/stats"],
                "/kvss/stats": {"refills": 0, "batches": 0, "driver_hops": 0},
                "/kvss/caches": {"cache_id": [], "stored_tokens": []},
                "/swdriver/stats": {"requests": 40, "hit_tokens": 100}}.get(cmd)
    if cmd == "/":
        return ["/", "/kvss/stats", "/swdriver/stats"]
    if cmd == "/kvss/stats":
        return {"refills": 7, "batches": 3}
    if cmd == "/swdriver/stats":
        return {"requests": 300, "hit_tokens": 1000}
    return None


def serve(prefix, conn):
    try:
        conn.send(json.dumps({"version": "DPDK 22.11 (fake)", "pid": os.getpid(),
                              "max_output_len": 16384}).encode())
        while True:
            cmd = conn.recv(1024)
            if not cmd:
                break
            time.sleep(delay)
            c = cmd.decode()
            conn.send(json.dumps({c.split(",")[0]: answer(c, prefix)}).encode())
    except OSError:
        pass
    finally:
        conn.close()
        with lock:
            stats[prefix]["active"] -= 1
            save()


def bound(prefix):
    d = os.path.join(rundir, prefix)
    os.makedirs(d, exist_ok=True)
    path = os.path.join(d, "dpdk_telemetry.v2")
    if os.path.exists(path):
        os.unlink(path)
    s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    s.bind(path)
    s.listen(64)
    return s


def listen(prefix, s, is_live):
    while True:
        conn, _ = s.accept()
        with lock:
            st = stats[prefix]
            if is_live and st["active"] >= MAX_CONNECTIONS:
                st["refused"] += 1
                save()
                conn.close()
                continue
            st["active"] += 1
            st["accepted"] += 1
            st["max_active"] = max(st["max_active"], st["active"])
            save()
        if is_live:
            threading.Thread(target=serve, args=(prefix, conn), daemon=True).start()
        else:
            held.append(conn)


signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
with lock:
    save()
for p in live + hung:
    threading.Thread(target=listen, args=(p, bound(p), p in live), daemon=True).start()
print("fake-telemetry: ready", flush=True)
while True:
    time.sleep(3600)
