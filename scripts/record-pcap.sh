#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
#
# Record, from the driver role with a net_pcap tx device, the frames of a
# small run into pcap/ (a few hundred KB), for CI to replay into a shard
# (scripts/test-replay-pcap.sh):
#   pcap/driver-replay.pcap     HELLO, RESERVE, EVICT, EVICT_DATA, REFILL,
#                               DELETE of a short workload: two organizations'
#                               system prompts hit again and again, a chat that
#                               goes on (its answer cached), two one-off
#                               documents that make the 4096-token shard full
#   pcap/driver-replay.expect   what every refill must bring back (the
#                               recording driver's --record-expect)
#   pcap/driver-replay-bad.pcap the same with malformed and illegal frames
#                               mixed in (tools/replay_check mix)
# The run is open loop: no shard answers while recording. Re-run after a
# change to the protocol or the driver, and commit the three files.
set -eu
BUILD=${1:-build}
cd "$(dirname "$0")/.."
tmp=$(mktemp -d)
prefix=kvss_rec_$$
trap 'rm -rf "$tmp" /var/run/dpdk/$prefix' EXIT

python3 - "$tmp/trace.jsonl" <<'PY'
import json, sys
def answer(pos): return (pos * 2654435761) & 0xffffffff
s1 = [100000 + i for i in range(640)]
s2 = [200000 + i for i in range(384)]
out = []
def q(k, n): return [300000 + 1000 * k + i for i in range(n)]
def req(org, toks, allowed=None, output=16):
    out.append({"org": org, "tokens": toks, "cache_length_allowed": allowed or len(toks),
                "output_length": output})
chat = s2 + q(1, 50)
req("acme", s1 + q(2, 60))
req("globex", chat, len(chat) + 16)
req("acme", s1 + q(3, 60))
req("acme", [400000 + i for i in range(2000)])
req("acme", s1 + q(4, 60))
chat = chat + [answer(p) for p in range(len(chat), len(chat) + 16)] + q(5, 40)
req("globex", chat, len(chat) + 16)
req("globex", [500000 + i for i in range(1500)])
req("acme", s1 + q(6, 60))
req("globex", s2 + q(7, 30))
with open(sys.argv[1], "w") as f:
    for r in out:
        f.write(json.dumps(r) + "\n")
PY
python3 -c 'import struct,sys; open(sys.argv[1],"wb").write(struct.pack("<IHHiIII",0xa1b2c3d4,2,4,0,0,65535,1))' \
	"$tmp/empty.pcap"
mkdir -p pcap
"$BUILD/kvss" --no-pci --no-huge -m 256 --file-prefix "$prefix" -l 0 --log-level lib.eal:error \
	--no-telemetry --vdev "net_pcap0,rx_pcap=$tmp/empty.pcap,tx_pcap=pcap/driver-replay.pcap" \
	-- --config config/record-driver.cfg --trace "$tmp/trace.jsonl" \
	--record-expect pcap/driver-replay.expect | grep -E "summary|recording"
"$BUILD/tools/replay_check" mix pcap/driver-replay.pcap pcap/driver-replay-bad.pcap
ls -l pcap/driver-replay*
