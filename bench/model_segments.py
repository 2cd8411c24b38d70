#!/usr/bin/python3
"""Where a CNN falls behind ONNX Runtime, stage by stage: the first k blocks of a torchvision
model (mobilenet_v2's or efficientnet_b0's `features`, random weights) exported for several k and
timed by kiln and ORT in one run. The growth of the gap between two cuts is what those blocks
cost kiln beyond ORT. (Early cuts have large outputs, whose copy out dominates ORT's time: read
the later increments.)

    /usr/bin/python3 bench/model_segments.py [--model mobilenet_v2] [--threads 1] [--cuts 7,11,14,17,19]

Needs onnxruntime-node as bench/onnx_bench.py installs it (build/bench-ort).
"""
import argparse
import json
import os
import subprocess
import tempfile

import numpy as np
import torch
import torchvision

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
KILN = os.path.join(ROOT, "build", "bin", "kiln")
ORT_DIR = os.path.join(ROOT, "build", "bench-ort")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default="mobilenet_v2")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--runs", type=int, default=31)
    ap.add_argument("--cuts", default="7,11,14,17,19")
    a = ap.parse_args()
    env = dict(os.environ, KILN_NUM_THREADS=str(a.threads),
               NODE_PATH=os.path.join(ORT_DIR, "node_modules"))
    torch.manual_seed(0)
    net = getattr(torchvision.models, a.model)(weights=None).eval()
    x = torch.rand(1, 3, 224, 224)
    previous = None
    print("%-14s %9s %9s %9s %12s" % ("blocks", "kiln ms", "ORT ms", "gap ms", "gap growth"))
    with tempfile.TemporaryDirectory() as tmp:
        npy, raw = os.path.join(tmp, "x.npy"), os.path.join(tmp, "x.bin")
        np.save(npy, x.numpy())
        x.numpy().tofile(raw)
        for cut in (int(c) for c in a.cuts.split(",")):
            path = os.path.join(tmp, "cut%d.onnx" % cut)
            torch.onnx.export(net.features[:cut], (x,), path, opset_version=17)
            kiln = subprocess.run([KILN, "run", path, "--input", npy, "--no-cache", "--repeat",
                                   str(a.runs), "--json"], env=env, capture_output=True,
                                  text=True, check=True)
            kiln_ms = json.loads(kiln.stdout)["timings_ms"]["run_min"]
            ort = subprocess.run(["node", os.path.join(ROOT, "bench", "onnx", "ort_run.js"), path,
                                  raw, "1,3,224,224", str(a.threads), str(a.runs)], env=env,
                                 capture_output=True, text=True, check=True)
            ort_ms = json.loads(ort.stdout)["min_ms"]
            gap = kiln_ms - ort_ms
            growth = "" if previous is None else "%+.3f" % (gap - previous)
            print("features[:%-2d] %9.3f %9.3f %+9.3f %12s" % (cut, kiln_ms, ort_ms, gap, growth),
                  flush=True)
            previous = gap


if __name__ == "__main__":
    main()
