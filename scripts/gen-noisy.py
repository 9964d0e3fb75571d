#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""A noisy neighbour, as a trace: 2,000 requests, 90% from one organization
("noisy"), each a new 4,000-token prompt; four quiet ones ("quiet0".."quiet3")
re-read two 4,000-token documents each, with 50 tokens of their own (one
request in ten). The same seed gives the same trace.

  gen-noisy.py DIR   writes DIR/nn.jsonl (all of it) and DIR/nn_qK.jsonl
                     (quiet K's requests alone, K = 0..3)

test-trace.sh models it (kvss-trace), test-e2e 1n runs it (kvss): with
DRAM shares each quiet organization hits as it does alone in its share."""
import json
import random
import sys

if len(sys.argv) != 2:
    sys.exit(__doc__)
rng = random.Random(11)
docs = {q: [[rng.randrange(1, 1 << 31) for _ in range(4000)] for _ in range(2)] for q in range(4)}
alone = [open("%s/nn_q%d.jsonl" % (sys.argv[1], q), "w") for q in range(4)]
with open(sys.argv[1] + "/nn.jsonl", "w") as m:
    for i in range(2000):
        if rng.random() < 0.1:
            q = rng.randrange(4)
            toks = docs[q][rng.randrange(2)] + [rng.randrange(1, 1 << 31) for _ in range(50)]
            line = json.dumps({"org": "quiet%d" % q, "timestamp": i * 100, "tokens": toks, "output_length": 8})
            alone[q].write(line + "\n")
        else:
            line = json.dumps({"org": "noisy", "timestamp": i * 100,
                               "tokens": [rng.randrange(1, 1 << 31) for _ in range(4000)], "output_length": 8})
        m.write(line + "\n")
for f in alone:
    f.close()
