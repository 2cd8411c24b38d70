#!/usr/bin/python3
"""A/B of one ONNX model under two configurations of kiln, interleaved: on a noisy machine the
same build measures differently from one minute to the next, so A and B alternate (ABBAAB...)
and each round's best time is kept; the median of those is printed per arm.

    /usr/bin/python3 bench/ab_interleaved.py MODEL.onnx INPUT.npy --b-disable-pass kiln-fuse-epilogues
    /usr/bin/python3 bench/ab_interleaved.py MODEL.onnx INPUT.npy --b-set KILN_NUM_THREADS=2

Arm A runs `kiln run MODEL --input INPUT --repeat N --no-cache`; arm B adds the given options.
"""
import argparse
import os
import re
import statistics
import subprocess


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("model")
    ap.add_argument("input")
    ap.add_argument("--kiln", default=os.path.join(os.path.dirname(__file__), "..", "build",
                                                   "bin", "kiln"))
    ap.add_argument("--rounds", type=int, default=8)
    ap.add_argument("--repeat", type=int, default=21, help="runs per kiln invocation")
    ap.add_argument("--threads", default="1", help="KILN_NUM_THREADS for both arms")
    ap.add_argument("--b-disable-pass", action="append", default=[],
                    help="a pipeline step arm B leaves out")
    ap.add_argument("--b-set", action="append", default=[], help="NAME=VALUE flag for arm B")
    a = ap.parse_args()
    base = [a.kiln, "run", a.model, "--input", a.input, "--repeat", str(a.repeat), "--no-cache",
            "--set", "KILN_NUM_THREADS=" + a.threads]
    extra = []
    for p in a.b_disable_pass:
        extra += ["--disable-pass", p]
    for s in a.b_set:
        extra += ["--set", s]
    best = {"A": [], "B": []}
    for r in range(a.rounds):
        for arm in ("A", "B") if r % 2 == 0 else ("B", "A"):
            command = base + (extra if arm == "B" else [])
            p = subprocess.run(command, capture_output=True, text=True)
            m = re.search(r"min ([0-9.]+) ms", p.stdout + p.stderr)
            if p.returncode != 0 or not m:
                raise SystemExit(f"kiln failed: {' '.join(command)}\n{p.stderr[-2000:]}")
            best[arm].append(float(m.group(1)))
    for arm in "AB":
        runs = " ".join("%.2f" % x for x in best[arm])
        print(f"{arm}: median of best {statistics.median(best[arm]):.3f} ms  ({runs})")


if __name__ == "__main__":
    main()
