#!/usr/bin/python3
"""One f32 linalg.matmul per shape, run alone under kiln (pinned to one CPU, inputs uniform in
[-1, 1) from .npy files), to compare a product's speed alone with its time inside a model:

    /usr/bin/python3 bench/matmul_shapes.py [MxKxN ...] [--cpu 0] [--repeat 300]
"""
import argparse
import os
import re
import subprocess
import tempfile

import numpy as np

DEFAULT = ["49x1152x192", "49x192x1152", "49x320x1280", "196x112x672", "112x672x196",
           "96x16x12544", "144x24x3136", "64x576x3136", "512x512x512", "169x512x1000"]

PROGRAM = """func.func @main(%a: tensor<{m}x{k}xf32>, %b: tensor<{k}x{n}xf32>) -> tensor<{m}x{n}xf32> {{
  %z = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<{m}x{n}xf32>
  %f = linalg.fill ins(%z : f32) outs(%e : tensor<{m}x{n}xf32>) -> tensor<{m}x{n}xf32>
  %r = linalg.matmul ins(%a, %b : tensor<{m}x{k}xf32>, tensor<{k}x{n}xf32>)
      outs(%f : tensor<{m}x{n}xf32>) -> tensor<{m}x{n}xf32>
  return %r : tensor<{m}x{n}xf32>
}}
"""


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("shapes", nargs="*", default=DEFAULT)
    ap.add_argument("--kiln", default=os.path.join(os.path.dirname(__file__), "..", "build", "bin",
                                                   "kiln"))
    ap.add_argument("--cpu", default="0")
    ap.add_argument("--repeat", type=int, default=300)
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    print(f"{'shape':>14} {'median ms':>10} {'GFLOP/s':>8}")
    with tempfile.TemporaryDirectory() as tmp:
        for shape in args.shapes:
            m, k, n = (int(v) for v in shape.split("x"))
            program = os.path.join(tmp, "mm.mlir")
            with open(program, "w") as f:
                f.write(PROGRAM.format(m=m, k=k, n=n))
            a, b = os.path.join(tmp, "a.npy"), os.path.join(tmp, "b.npy")
            np.save(a, rng.uniform(-1, 1, (m, k)).astype(np.float32))
            np.save(b, rng.uniform(-1, 1, (k, n)).astype(np.float32))
            out = subprocess.run(["taskset", "-c", args.cpu, args.kiln, "run", program, "--input",
                                  a, "--input", b, "--repeat", str(args.repeat), "--no-cache"],
                                 capture_output=True, text=True, check=True).stdout
            ms = float(re.search(r"median ([0-9.]+) ms", out).group(1))
            print(f"{shape:>14} {ms:10.3f} {2 * m * k * n / ms / 1e6:8.0f}")


if __name__ == "__main__":
    main()
