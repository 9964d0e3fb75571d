#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""The command lines the documents show: whether they can run, what they
print, and what they write.

  examples.py list     one line per kvss example: SOURCE<TAB>COMMAND (continuations joined)
  examples.py lint     one line per kvss example: OK|FAIL|SKIP<TAB>SOURCE<TAB>WHY
  examples.py writes   one line per documented command that writes a file:
                       OK|FAIL<TAB>SOURCE<TAB>WHAT (FAIL: into the checkout)
  examples.py run --build B --tmp DIR --suffix S
                       runs every example whose printed output a document
                       shows and compares it: OK|FAIL|SKIP<TAB>CHECK<TAB>WHY

kvss examples are the `build/kvss ...` lines of README.md's and
docs/kvss.md's sh blocks and of the comments at the head of config/*.cfg.
lint checks, for a machine of CPUS cores (--cpus, default 2): EAL's lcores
fit on those cores, the lcores the configuration gives its role are among
EAL's, and every file the command reads exists. A command with -a (a NIC)
is bare metal: SKIP.

Printed output, in a sh block of README.md or docs/*.md: the lines
`#   TEXT` (a hash and three spaces) after a command are what it prints,
`#     TEXT` (five spaces) continues the line before (the document wraps
it), `...` stands for text left out, and a figure that depends on timing
is written as the range it may take, `[LO..HI]`; every other figure must
be printed exactly. Each such line must match a line of the command's
stdout and stderr (runs of spaces are one). A block's commands up to the
last that shows output run in order, in bash, from the checkout, with
`build/` the build given, `/tmp/` the test's own directory and each
`--file-prefix` made the test's own; each must exit 0. A block that reads
the public trace (../shared/traces) is skipped where it is absent. The
deterministic tools (kvss-trace, kvss-dump, kvss-plan) may show no range.
Then the figures of docs/kvss-trace.md's tables and the sentences beside
them are compared with what its examples printed (PROSE below).
"""
import glob
import re
import shlex
import sys
import time


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


DOCS = ["README.md"] + sorted(glob.glob("docs/*.md"))
NUM = r"[-+]?\d+(?:\.\d+)?"
RANGE = r"\[(" + NUM + r")\.\.(" + NUM + r")\]"
DETERMINISTIC = ("kvss-trace", "kvss-dump", "kvss-plan")


def sh_blocks(path, fences=("```sh",)):
    """Each ```sh block of a document: [(line number, text)], its fence's
    indentation (a block inside a list item) taken off."""
    lines = open(path).read().split("\n")
    out, block, indent = [], None, 0
    for n, line in enumerate(lines, 1):
        s = line.strip()
        if block is None and s in fences:
            block, indent = [], len(line) - len(line.lstrip())
        elif block is not None and s.startswith("```"):
            out.append(block)
            block = None
        elif block is not None:
            block.append((n, line[indent:] if line[:indent].strip() == "" else line.strip()))
    return out


def steps(block):
    """A block's commands: [(line, command, [(line, expected output)])]."""
    out = []
    k = 0
    while k < len(block):
        n, line = block[k]
        m5 = re.match(r"#     (\S.*)$", line)
        m3 = re.match(r"#   (\S.*)$", line)
        if m5 and out and out[-1][2]:
            ln, text = out[-1][2][-1]
            out[-1][2][-1] = (ln, text + " " + m5.group(1))
        elif m3 and out:
            out[-1][2].append((n, m3.group(1)))
        elif line.strip() and not line.lstrip().startswith("#"):
            cmd = line.strip()
            while cmd.endswith("\\") and k + 1 < len(block):
                k += 1
                cmd = cmd[:-1].rstrip() + " " + block[k][1].strip()
            out.append((n, re.sub(r"\s+#\s.*$", "", cmd), []))
        k += 1
    return out


def output_blocks():
    """(document, [steps to run]) for each block that shows output."""
    got = []
    for path in DOCS:
        for block in sh_blocks(path):
            st = steps(block)
            last = max((i for i, s in enumerate(st) if s[2]), default=-1)
            if last >= 0:
                got.append((path, st[:last + 1]))
    return got


def pattern(expected):
    """A regex for one expected line, and the ranges its groups must fall in."""
    rx, ranges = "", []
    for tok in re.split(r"(\.\.\.|\[" + NUM + r"\.\." + NUM + r"\])", expected):
        if not tok:
            continue
        if tok == "...":
            rx += ".*?"
            continue
        m = re.fullmatch(RANGE, tok)
        if m:
            ranges.append((float(m.group(1)), float(m.group(2))))
            rx += r"(?<![\d.])(" + NUM + r")(?![\d]|\.\d)"
            continue
        lit = r"\s+".join(re.escape(w) for w in tok.split())
        if tok[:1].isspace():
            lit = r"\s+" + lit
        if tok[-1:].isspace():
            lit += r"\s+"
        if tok.strip()[:1].isdigit() and not tok[:1].isspace():
            lit = r"(?<![\d.])" + lit
        if tok.strip()[-1:].isdigit() and not tok[-1:].isspace():
            lit += r"(?![\d]|\.\d)"
        rx += lit
    return rx, ranges


def matches(expected, output):
    """None when a line of output is the expected one, else why not."""
    rx, ranges = pattern(expected)
    near = None
    for line in output.split("\n"):
        for m in re.finditer(rx, line):
            bad = [(float(v), r) for v, r in zip(m.groups(), ranges) if not r[0] <= float(v) <= r[1]]
            if not bad:
                return None
            near = "%s out of range in: %s" % (
                ", ".join("%g not in [%g..%g]" % (v, r[0], r[1]) for v, r in bad), line.strip())
    if near:
        return near
    import difflib
    close = difflib.get_close_matches(expected, [l.strip() for l in output.split("\n")], 1, 0.3)
    return "printed instead: %s" % (close[0] if close else "(nothing like it)")


def own(cmd, build, tmp, suffix):
    """A documented command as the test runs it."""
    cmd = re.sub(r"(--file-prefix\s+)([A-Za-z0-9_]+)", r"\g<1>\g<2>" + suffix, cmd)
    cmd = cmd.replace("/tmp/", tmp + "/")
    return re.sub(r"(^|[\s|;(&])build/", r"\g<1>" + build + "/", cmd)


def run_block(doc, st, build, tmp, suffix):
    """Run one block's steps; [(status, check, why)] and {command: output}."""
    import subprocess
    res, outs = [], {}
    if any("../shared/traces/" in c for _, c, _ in st) and not glob.glob("../shared/traces/*"):
        return [("SKIP", "%s:%d" % (doc, st[0][0]), "needs ../shared/traces (the public trace)")], outs
    for n, cmd, expect in st:
        src = "%s:%d" % (doc, n)
        t0 = time.time()
        try:
            p = subprocess.run(["bash", "-c", own(cmd, build, tmp, suffix) + " 2>&1"],
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=180)
            out, rc = p.stdout.decode(errors="replace"), p.returncode
        except subprocess.TimeoutExpired:
            out, rc = "", "timeout (180 s)"
        outs[(doc, cmd)] = out
        res.append(("OK" if rc == 0 else "FAIL", "%s: %s: exits 0 (%.1f s)" % (src, cmd[:60], time.time() - t0),
                    "status %s" % rc))
        for ln, e in expect:
            why = matches(e, out)
            res.append(("FAIL" if why else "OK", "%s:%d: prints '%s'" % (doc, ln, e[:70]), why or ""))
    for _, cmd, expect in st:
        tools = [t for t in DETERMINISTIC if re.search(r"(^|/)" + t + r"\s", cmd)]
        for ln, e in expect:
            if tools and re.search(RANGE, e):
                res.append(("FAIL", "%s:%d: %s is deterministic: no range" % (doc, ln, tools[0]),
                            "a range in its output: %s" % e))
    return res, outs


def doc_text(path):
    return " ".join(open(path).read().split())


def md_table(path, header):
    """The rows (lists of cells) of the table whose header starts so."""
    rows, on = [], False
    for line in open(path):
        line = line.strip()
        if line.startswith(header):
            on = True
            continue
        if on and line.startswith("|---"):
            continue
        if on and line.startswith("|"):
            rows.append([c.strip() for c in line.strip("|").split("|")])
        elif on:
            break
    return rows


def says(path, sentence):
    return ("OK", "%s says '%s'" % (path, sentence[:80]), "") if " ".join(sentence.split()) in doc_text(path) \
        else ("FAIL", "%s says '%s'" % (path, sentence[:80]), "the document says otherwise")


def tokens(name):
    """A size as the table writes it (4e6, inf, none) as the lines print it."""
    return None if name in ("none", "") else name if name == "inf" else str(int(float(name)))


def prose_l2(get):
    """docs/kvss-trace.md, "A second tier": its table and the sentences after it."""
    D = "docs/kvss-trace.md"
    a, b = get(D, "--l2-admit all,seen2"), get(D, "--capacity 1.1e7")
    if a is None or b is None:
        return []
    l2 = {m.group(2): m for m in re.finditer(
        r"L2 (\d+) tokens \(admit (\w+)\): hit ratio (\S+) \(L1 (\S+), L2 (\S+)\), \d+ L2 hit tokens "
        r"recomputed \(faster\); L2 written (\d+), read (\d+) tokens; tokens/s written \d+, busiest 10 s (\d+)", a)}
    res = []
    rows = md_table(D, "| L2 admits |")
    if not rows or set(r[0] for r in rows) != set(l2):
        return [("FAIL", D + ": the second tier's table has a row per rule printed", "rows %s, printed %s"
                 % ([r[0] for r in rows], sorted(l2)))]
    for r in rows:
        m = l2[r[0]]
        w, rd, peak = int(m.group(6)), int(m.group(7)), int(m.group(8))
        want = [r[0], m.group(3), m.group(4), m.group(5), "%.1fM tokens" % (w / 1e6),
                "%dk tokens/s" % round(peak / 1000), "%.2f" % (rd / w)]
        res.append(("OK" if r == want else "FAIL", "%s: the second tier's table, %s, is what the example printed"
                    % (D, r[0]), "the table: %s; printed: %s" % (r, want)))
    lib = re.search(r"^11000000\s+\d+\s+\d+\s+\d+\s+(\S+)", b, re.M)
    base = re.search(r"plain LRU over blocks: hit ratio (\S+)", b)
    bel = re.search(r"Belady with bypass (\S+),", a)
    if not (lib and base and bel):
        return res + [("FAIL", D + ": the second tier's examples print the library's, the block LRU's and "
                       "Belady's hit ratios", "")]
    hr = l2["all"].group(3)
    res.append(("OK" if base.group(1) == hr else "FAIL",
                "%s: two LRU tiers hold what one LRU of their sum holds (the block LRU at 1.1e7)" % D,
                "the block LRU at 1.1e7 %s, L1 1e6 + L2 1e7 %s" % (base.group(1), hr)))
    res.append(says(D, "%s, the block LRU at 1.1e7 (the library's LRU at 1.1e7 gets %s; ratio %.3f), against %s "
                    "for Belady with bypass at 1e6 alone" % (hr, lib.group(1), float(hr) / float(lib.group(1)),
                                                             bel.group(1))))
    w1, w2 = int(l2["all"].group(6)), int(l2["seen2"].group(6))
    res.append(says(D, "`seen2` writes %d%% fewer tokens but loses %.3f of hit ratio"
                    % (round(100 * (1 - w2 / w1)), float(hr) - float(l2["seen2"].group(3)))))
    peak = int(l2["all"].group(8))
    res.append(says(D, "(at %dk tokens/s and 320 KiB per token" % round(peak / 1000)))
    res.append(says(D, "%.1f GB/s over the model's shards" % (peak * 320 * 1024 / 1e9)))
    return res


def prose_fleet(get):
    """docs/kvss-trace.md, "A fleet and a level it shares": its table and the gains beside it."""
    D = "docs/kvss-trace.md"
    out = get(D, "--shared 4e6,1.6e7,inf")
    if out is None:
        return []
    runs, one = {}, {}
    for line in out.split("\n"):
        kv = dict(re.findall(r"(\w+)=(\S+)", line))
        if line.strip().startswith("fleet "):
            runs[(kv["shared_tokens"], kv["admit"])] = kv
        elif line.strip().startswith("fleet-one "):
            one[(kv["with_shared"], kv["disk_tokens"])] = kv
    res = []
    rows = md_table(D, "| shared level | admit | fleet |")
    if not rows:
        return [("FAIL", D + ": the fleet's table is there", "")]
    for r in rows:
        size, admit = tokens(r[0]), r[1] or "-"
        f = runs.get((size or "none", admit))
        if f is None:
            res.append(("FAIL", "%s: the fleet's table, %s %s, was printed" % (D, r[0], r[1]), ""))
            continue
        base = one.get(("no", "0"), {}).get("hit_ratio")
        withs = one.get(("yes", size), {}).get("hit_ratio") if size else None
        want = [r[0], r[1], f["hit_ratio"], f["hit_shared"] if size else "",
                r[4] and base, r[5] and withs]
        got = [r[0], r[1], r[2], r[3], r[4], r[5]]
        res.append(("OK" if got == [w or "" for w in want] else "FAIL",
                    "%s: the fleet's table, %s %s, is what the example printed" % (D, r[0], r[1]),
                    "the table: %s; printed: %s" % (got, want)))
    f = runs.get(("4000000", "evicted"))
    w = one.get(("yes", "4000000"))
    if f and w:
        res.append(says(D, "one replica holding all its DRAM (%+.3f)" % float(f["vs_one"])))
        res.append(says(D, "the shared level's tokens as well (%+.3f)" % (float(f["hit_ratio"]) - float(w["hit_ratio"]))))
    return res


def labels_named(text):
    """The label names of a phrase "labels a, b (note), c and d"."""
    text = re.sub(r"\([^)]*\)", "", text)
    return {w.strip("` ") for w in re.split(r",|\band\b", text) if w.strip("` ")}


def prose_labels(get):
    """The exporter's labels, as docs/kvss.md and kvss-exporter's docstring
    name them, are those of docs/metrics.md's table."""
    want = set()
    for line in open("docs/metrics.md"):
        c = line.split("|")
        if len(c) > 5 and c[1].strip().startswith("`kvss"):
            want |= {x.strip() for x in c[3].split(",") if x.strip()}
    res = []
    m = re.search(r"labels (`.*?), times in seconds", doc_text("docs/kvss.md"))
    got = labels_named(re.sub(r"`kvss_build_info`'s", "", m.group(1))) if m else set()
    res.append(("OK" if got == want else "FAIL", "docs/kvss.md names the exporter's labels as docs/metrics.md has them",
                "kvss.md only: %s; metrics.md only: %s" % (sorted(got - want), sorted(want - got))))
    doc = " ".join(open("tools/kvss-exporter").read().split('"""')[1].split())
    m = re.search(r"labels (.*?)\.", doc)
    got = labels_named(m.group(1)) if m else set()
    res.append(("OK" if got == want else "FAIL", "kvss-exporter's docstring names its labels as docs/metrics.md has them",
                "docstring only: %s; metrics.md only: %s" % (sorted(got - want), sorted(want - got))))
    return res


PROSE = [prose_l2, prose_fleet, prose_labels]


def help_choices(build):
    """An option's choices, `--opt a|b|c` in docs/kvss.md, are the ones
    `kvss --help` gives it."""
    import subprocess
    res = []
    try:
        text = subprocess.run([build + "/kvss", "--help"], stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, timeout=30).stdout.decode()
    except (OSError, subprocess.TimeoutExpired) as e:
        return [("FAIL", "kvss --help answers", str(e))]
    for opt, choices in sorted(set(re.findall(r"`(--[a-z-]+) ([a-z0-9]+(?:\|[a-z0-9]+)+)`",
                                               open("docs/kvss.md").read()))):
        lines = text.split("\n")
        at = next((k for k, l in enumerate(lines) if l.strip().startswith(opt + " ")), len(lines))
        end = at + 1
        while end < len(lines) and lines[end].startswith(" " * 10):
            end += 1
        line = " ".join(l.strip() for l in lines[at:end])
        missing = [c for c in choices.split("|") if not re.search(r"\b%s\b" % c, line)]
        res.append(("FAIL" if missing else "OK", "kvss --help gives %s the choices docs/kvss.md does (%s)"
                    % (opt, choices), "its line lacks %s: %s" % (", ".join(missing), line.strip())))
    return res


def run(build, tmp, suffix):
    from concurrent.futures import ThreadPoolExecutor
    blocks = output_blocks()
    # kvss itself takes both cores and its figures depend on timing: alone,
    # after the others, which run two at a time.
    alone = [i for i, (_, st) in enumerate(blocks) if any(re.search(r"(^|/)kvss\s", c) for _, c, _ in st)]
    got = {}
    with ThreadPoolExecutor(2) as pool:
        futs = {i: pool.submit(run_block, d, st, build, tmp, suffix)
                for i, (d, st) in enumerate(blocks) if i not in alone}
        for i, f in futs.items():
            got[i] = f.result()
    for i in alone:
        got[i] = run_block(blocks[i][0], blocks[i][1], build, tmp, suffix)
    outs = {}
    for i in sorted(got):
        for st, name, why in got[i][0]:
            print("%s\t%s\t%s" % (st, name, " ".join(why.split())))
        outs.update(got[i][1])

    def get(doc, needle):
        for (d, cmd), o in outs.items():
            if d == doc and needle in cmd:
                return o
        return None
    for st, name, why in [r for f in PROSE for r in f(get)] + help_choices(build):
        print("%s\t%s\t%s" % (st, name, " ".join(why.split())))


# What a command writes: redirections, and the options and vdev arguments
# that name an output file or directory.
WRITE_OPTS = ("--plot", "--plot-refills", "--emit-config", "--record-expect", "--l2-dir", "-w", "-o")


def written(cmd):
    got = re.findall(r"(?:^|[^<&0-9])[12]?>>?\s*([^\s;|&)]+)", cmd)
    got += re.findall(r"tx_pcap=([^,\s]+)", cmd)
    got += re.findall(r"\btee\s+(?:-a\s+)?([^\s;|&)]+)", cmd)
    try:
        argv = shlex.split(cmd, comments=True)
    except ValueError:
        argv = cmd.split()
    for k, a in enumerate(argv[:-1]):
        if a in WRITE_OPTS and not re.fullmatch(r"[A-Z_.]+", argv[k + 1]):
            got.append(argv[k + 1])
    return [w.strip("'\"") for w in got]


def outside(path):
    """A place outside the checkout: an absolute path not under it, a
    variable (a directory the reader made with mktemp), a device."""
    import os
    if path.startswith(("$", "/dev/", "&")):
        return True
    if not path.startswith(("/", "~")):
        return False
    real = os.path.realpath(os.path.expanduser(path))
    return not (real + "/").startswith(os.path.realpath(".") + "/")


def commands():
    """Every documented command: the sh blocks of README.md and docs/*.md,
    the commands in their inline code, the kvss examples of config/*.cfg."""
    got = []
    cmdlike = r"(build/|scripts/|tools/|make |kvss|tshark |dpdk-telemetry|ip netns exec )"
    for path in DOCS:
        for block in sh_blocks(path):
            for n, cmd, _ in steps(block):
                got.append(("%s:%d" % (path, n), cmd))
        for block in sh_blocks(path, ("```",)):
            for n, cmd, _ in steps(block):
                if re.match(cmdlike, cmd):
                    got.append(("%s:%d" % (path, n), cmd))
        text = open(path).read()
        for m in re.finditer(r"`([^`\n]*(?:\n[^`\n]*)?)`", text):
            code = " ".join(m.group(1).split())
            if re.match(cmdlike, code):
                got.append(("%s:%d" % (path, text.count("\n", 0, m.start()) + 1), code))
    return got + [(s, c) for s, c in examples() if s.startswith("config/")]


def writes():
    for src, cmd in commands():
        for w in written(cmd):
            st = "OK" if outside(w) else "FAIL"
            print("%s\t%s\t%s" % (st, src, "writes %s%s" % (w, "" if st == "OK" else ", in the checkout")))


def main():
    cpus = 2
    if "--cpus" in sys.argv:
        cpus = int(sys.argv[sys.argv.index("--cpus") + 1])
    what = sys.argv[1] if len(sys.argv) > 1 else "list"
    if what == "run":
        opt = {k: sys.argv[sys.argv.index(k) + 1] for k in ("--build", "--tmp", "--suffix")}
        run(opt["--build"], opt["--tmp"], opt["--suffix"])
        return
    if what == "writes":
        writes()
        return
    for src, cmd in examples():
        if what == "list":
            print("%s\t%s" % (src, cmd))
        else:
            st, why = lint(cmd, cpus)
            print("%s\t%s\t%s" % (st, src, why))


if __name__ == "__main__":
    main()
