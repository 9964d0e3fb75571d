#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""The kvss command lines the documents show, and whether they can run.

  examples.py list   one line per example: SOURCE<TAB>COMMAND (continuations joined)
  examples.py lint   one line per example: OK|FAIL|SKIP<TAB>SOURCE<TAB>WHY

Examples are the `build/kvss ...` lines of README.md's and docs/kvss.md's
sh blocks and of the comments at the head of config/*.cfg. lint checks, for
a machine of CPUS cores (--cpus, default 2): EAL's lcores fit on those cores,
the lcores the configuration gives its role are among EAL's, and every file
the command reads exists. A command with -a (a NIC) is bare metal: SKIP.
"""
import glob
import re
import shlex
import sys


def examples():
    out = []
    for path in ["README.md", "docs/kvss.md"]:
        lines = open(path).read().split("\n")
        in_sh = False
        i = 0
        while i < len(lines):
            line = lines[i]
            if line.startswith("```"):
                in_sh = line.strip() == "```sh" and not in_sh
                i += 1
                continue
            if in_sh and line.startswith("build/kvss "):
                start = i
                cmd = line
                while cmd.endswith("\\"):
                    i += 1
                    cmd = cmd[:-1] + " " + lines[i].strip()
                out.append(("%s:%d" % (path, start + 1), cmd))
            i += 1
    for path in sorted(glob.glob("config/*.cfg")):
        lines = open(path).read().split("\n")
        i = 0
        while i < len(lines) and (lines[i].startswith("#") or not lines[i].strip()):
            body = lines[i].lstrip("#").strip()
            if body.startswith("build/kvss "):
                start = i
                cmd = body
                while cmd.endswith("\\"):
                    i += 1
                    cmd = cmd[:-1] + " " + lines[i].lstrip("#").strip()
                out.append(("%s:%d" % (path, start + 1), cmd))
            i += 1
    return out


def cpu_list(s):
    """'0-2,4' -> {0, 1, 2, 4}"""
    got = set()
    for part in s.split(","):
        a, _, b = part.partition("-")
        got.update(range(int(a), int(b or a) + 1))
    return got


def eal_lcores(argv):
    """(lcore ids, cpus they run on) from -l or --lcores."""
    for k, a in enumerate(argv):
        if a == "-l":
            ids = cpu_list(argv[k + 1])
            return ids, ids
        if a == "--lcores":
            ids, cpus = set(), set()
            # 0@0,1@1,2@1 or 0@(0-1),1@(0-1): an lcore, at a CPU or a set
            for lc, cs in re.findall(r"(\d+)(?:@(\(?[\d,-]+\)?))?(?:,|$)", argv[k + 1]):
                ids.add(int(lc))
                cpus |= cpu_list(cs.strip("()")) if cs else {int(lc)}
            return ids, cpus
    return None, None


def config_lcores(path, role):
    """The lcores a configuration gives its role, and its role."""
    text = open(path).read()
    m = re.search(r'^role\s*=\s*"(\w+)"', text, re.M)
    role = role or (m.group(1) if m else "shard")
    m = re.search(r"^lcores\s*=\s*\{([^}]*)\}", text, re.M)
    want = {}
    if m:
        for key in ("ingest", "refill"):
            k = re.search(key + r"\s*=\s*\[([\d,\s]*)\]", m.group(1))
            if k and k.group(1).strip():
                want[key] = [int(x) for x in k.group(1).split(",")]
        k = re.search(r"control\s*=\s*(\d+)", m.group(1))
        if k:
            want["control"] = [int(k.group(1))]
    if role == "driver":
        want = {k: v for k, v in want.items() if k == "control"}
    return role, want


def lint(cmd, cpus_here):
    argv = shlex.split(cmd.replace(" &", ""))
    if "-a" in argv:
        return "SKIP", "bare metal (a NIC)"
    ids, cpus = eal_lcores(argv)
    if ids is None:
        return "FAIL", "no -l or --lcores"
    if max(cpus) >= cpus_here:
        return "FAIL", "EAL's lcores want CPUs %s; this machine has %d" % (sorted(cpus), cpus_here)
    cfg = argv[argv.index("--config") + 1] if "--config" in argv else None
    if cfg is None:
        return "FAIL", "no --config"
    reads = [cfg]
    for a in argv:
        for kv in a.split(","):
            if kv.startswith("rx_pcap="):
                reads.append(kv[len("rx_pcap="):])
    if "--trace" in argv and argv[argv.index("--trace") + 1]:
        reads.append(argv[argv.index("--trace") + 1])
    for f in reads:
        if re.fullmatch(r"[A-Z_]+(\.[a-z]+)?", f.split("/")[-1]):
            return "SKIP", "%s stands for a file of yours" % f
        try:
            open(f).close()
        except OSError:
            return "FAIL", "reads %s, which is not there" % f
    role = argv[argv.index("--role") + 1] if "--role" in argv else None
    role, want = config_lcores(cfg, role)
    for key, lcs in want.items():
        for lc in lcs:
            if lc not in ids:
                return "FAIL", "%s names lcores.%s = %d, not in EAL's %s" % (cfg, key, lc, sorted(ids))
    return "OK", "%s %s, lcores %s on CPUs %s" % (role, cfg, sorted(ids), sorted(cpus))


def main():
    cpus = 2
    if "--cpus" in sys.argv:
        cpus = int(sys.argv[sys.argv.index("--cpus") + 1])
    what = sys.argv[1] if len(sys.argv) > 1 else "list"
    for src, cmd in examples():
        if what == "list":
            print("%s\t%s" % (src, cmd))
        else:
            st, why = lint(cmd, cpus)
            print("%s\t%s\t%s" % (st, src, why))


if __name__ == "__main__":
    main()
