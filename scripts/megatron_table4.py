#!/usr/bin/env python3
"""One transformer layer of the 22B model, forward and backward, simulated
against Megatron-LM's measured times: Korthikanti et al. 2022, "Reducing
Activation Recomputation in Large Transformer Models" (arXiv 2205.05198),
Table 4, under each of its five settings (no recomputation, sequence
parallelism, full recomputation, selective recomputation, and sequence
parallelism with selective recomputation).

Where scripts/megatron_table5.sh compares whole iterations, this says which
part of one a difference lives in. A layer's time is the difference of two
`loom simulate --trace` runs of the gpt-22b preset, with 48 layers and with
47, on the `a100` preset as Table 5 runs it (mp 8, one micro-batch of 4
sequences, bf16 O2, dropout 0.1): the span of rank 0's forward job, and of
its backward job, in one run less the other, so that the embedding, the
logits and the loss drop out. The optimizer's share of the layer is left
out, as the paper's table leaves it out.

Prints a markdown table: per setting, Loom's forward, backward and
combined milliseconds against the paper's, and the combined ratio.

  scripts/megatron_table4.py [--only REGEX]

LOOM (environment) names the loom binary (default build/bin/loom); CLUSTER
a cluster preset or file to simulate on instead of a100.
"""

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

LOOM = os.environ.get("LOOM", "build/bin/loom")
CLUSTER = os.environ.get("CLUSTER", "a100")
LAYERS = 48  # the 22B model's

# Setting, its loom flags, and the paper's forward and backward ms (Table 4).
SETTINGS = [
    ("no recomputation", [], 7.7, 11.9),
    ("sequence parallelism", ["--sequence_parallel"], 7.2, 11.8),
    ("full recomputation", ["--recompute", "full"], 7.7, 19.5),
    ("selective recomputation", ["--recompute", "selective"], 7.7, 13.2),
    ("SP + selective", ["--sequence_parallel", "--recompute", "selective"], 7.2, 13.1),
]


def phase_spans(trace_path):
    """Milliseconds from the first start to the last end of rank 0's forward
    and backward instructions, by phase ("forward", "backward")."""
    with open(trace_path) as f:
        events = json.load(f)["traceEvents"]
    spans = {}
    for e in events:
        if e.get("ph") != "X" or e.get("pid") != 0:
            continue
        lo, hi = spans.get(e["cat"], (float("inf"), float("-inf")))
        spans[e["cat"]] = (min(lo, e["ts"]), max(hi, e["ts"] + e["dur"]))
    for phase in ("forward", "backward"):
        if phase not in spans:
            sys.exit(f"megatron_table4.py: {trace_path} has no {phase} instructions on rank 0")
    # Chrome trace times are microseconds.
    return {p: (hi - lo) / 1e3 for p, (lo, hi) in spans.items()}


def simulate(layers, flags, trace_path):
    cmd = [LOOM, "simulate", "--cluster", CLUSTER, "--amp_level", "O2", "--dropout", "0.1",
           "--recipe", "none", "--preset", "gpt-22b", "--layers", str(layers), "--mp", "8",
           "--micro_batches", "1", "--batch_size", "4", "--trace", trace_path] + flags
    run = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if run.returncode != 0:
        sys.exit(f"megatron_table4.py: {' '.join(cmd)} failed:\n{run.stdout}")
    return phase_spans(trace_path)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", default=".", help="the settings whose name matches this regex")
    args = parser.parse_args()
    print("| setting | forward: Loom ms | paper ms | backward: Loom ms | paper ms "
          "| combined: Loom ms | paper ms | Loom/paper |")
    print("|---|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory(prefix="loom_table4_") as tmp:
        for name, flags, paper_fwd, paper_bwd in SETTINGS:
            if not re.search(args.only, name):
                continue
            full = simulate(LAYERS, flags, os.path.join(tmp, "all.json"))
            less = simulate(LAYERS - 1, flags, os.path.join(tmp, "less.json"))
            fwd = full["forward"] - less["forward"]
            bwd = full["backward"] - less["backward"]
            paper = paper_fwd + paper_bwd
            print(f"| {name} | {fwd:.2f} | {paper_fwd:.1f} | {bwd:.2f} | {paper_bwd:.1f} "
                  f"| {fwd + bwd:.2f} | {paper:.1f} | {(fwd + bwd) / paper:.3f} |")


if __name__ == "__main__":
    main()
