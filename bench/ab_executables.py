#!/usr/bin/python3
"""Compiled executables (.kx) of one program timed side by side, interleaved: for comparing builds
that differ in the compiler or the importer (compile each with `kiln compile MODEL -o X.kx` from
the build under test, then run them all from one kiln). Each round runs every file once
(`kiln run X.kx --input INPUT --repeat N`), in rotating order; per file it prints the median and
the fastest of the round medians, the median of its per-round ratios to the first file, then every
round's median.

    /usr/bin/python3 bench/ab_executables.py INPUT.npy a.kx b.kx [c.kx ...] --rounds 20 --repeat 21
"""
import argparse
import os
import re
import statistics
import subprocess


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("input")
    ap.add_argument("executables", nargs="+")
    ap.add_argument("--kiln", default=os.path.join(os.path.dirname(__file__), "..", "build",
                                                   "bin", "kiln"))
    ap.add_argument("--rounds", type=int, default=20)
    ap.add_argument("--repeat", type=int, default=21, help="runs per kiln invocation")
    ap.add_argument("--threads", default="1", help="KILN_NUM_THREADS")
    ap.add_argument("--cpus", default="",
                    help="CPUs every run is pinned to, comma-separated (default: the lowest "
                    "THREADS ones allowed; this VM's vCPUs differ in speed)")
    a = ap.parse_args()
    allowed = [int(c) for c in a.cpus.split(",")] if a.cpus else sorted(os.sched_getaffinity(0))
    cpus = set(allowed[:int(a.threads)])
    medians = {x: [] for x in a.executables}
    for r in range(a.rounds):
        order = a.executables[r % len(a.executables):] + a.executables[:r % len(a.executables)]
        for x in order:
            out = subprocess.run([a.kiln, "run", x, "--input", a.input, "--repeat", str(a.repeat),
                                  "--set", "KILN_NUM_THREADS=" + a.threads],
                                 capture_output=True, text=True, check=True,
                                 preexec_fn=lambda: os.sched_setaffinity(0, cpus)).stdout
            m = re.search(r"median ([0-9.]+) ms", out)
            if not m:
                raise SystemExit("no median in kiln's output for " + x + ":\n" + out)
            medians[x].append(float(m.group(1)))
    first = a.executables[0]
    for x, v in medians.items():
        # This VM's speed changes within minutes: the ratio to the first file within each round
        # compares like with like where the medians straddle a change.
        ratios = [t / f for t, f in zip(v, medians[first])]
        print("%-40s median %.3f ms, fastest round %.3f ms, per-round ratio to the first file: "
              "median %.3f; rounds: %s" % (x, statistics.median(v), min(v),
                                          statistics.median(ratios),
                                          " ".join("%.2f" % t for t in v)))


if __name__ == "__main__":
    main()
