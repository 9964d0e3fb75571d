#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
#
# Reports sent again on a lossless link: the memif demo's
# processes (scripts/demo.sh: a driver and two shards, each with a second
# tier) replay 1,000 requests; every report (ERROR, TOKEN_LOST, L2_DONE)
# that a shard sends again went again only because its REPORT_ACK came after
# the shard's timeout. The share resent, over both shards: a note, not a
# figure against a baseline (the old fixed 5 ms timeout, resending every
# report at each timeout, is no longer in the code to run beside it; what it
# resent is in docs/results.md, "Lost data and resent reports
# (2026-11-27)": 13.3%, 11.6% and 10.0% in three runs at 8594057). A timing
# figure (three processes on two shared cores), so make bench, not a test.
#
#   scripts/bench-reports.sh [BUILD]
set -u
BUILD=${1:-build}
cd "$(dirname "$0")/.."
tmp=$(mktemp /tmp/kvss-bench-reports.XXXXXX)
trap 'rm -f "$tmp"' EXIT
KVSS_DEMO_LIMIT=${KVSS_BENCH_REPORTS_LIMIT:-1000} KVSS_DEMO_TAG=bench_reports$$ \
	KVSS_DEMO_STATS_WIDTH=100000 timeout 600 scripts/demo.sh "$BUILD" >"$tmp" 2>&1
rc=$?
if [ $rc -ne 0 ]; then
	echo "bench: reports: the demo ended with status $rc" >&2
	grep 'demo: FAIL' "$tmp" >&2
	exit 1
fi
python3 - "$tmp" <<'PY'
import re, sys
sent = resent = 0
for line in open(sys.argv[1], errors="replace"):
    if re.match(r"demo: shard \d+: ", line):
        m = re.search(r"\breports=(\d+)", line)
        n = re.search(r"\breports_resent=(\d+)", line)
        sent += int(m.group(1)) if m else 0
        resent += int(n.group(1)) if n else 0
if sent == 0:
    print("bench: reports: no report sent (no shard stats in the demo's output)", file=sys.stderr)
    sys.exit(1)
share = 100.0 * resent / sent
print(f"bench: note demo_reports_resent {share:.1f} %: {resent} of {sent} reports sent again on the "
      "memif demo's lossless link (10.0-13.3% with the fixed 5 ms timeout, docs/results.md)")
PY
