#!/usr/bin/python3
"""One f32 product per shape, run alone under kiln (pinned to one CPU, inputs uniform in
[-1, 1) from .npy files), to compare a product's speed alone with its time inside a model:

    /usr/bin/python3 bench/matmul_shapes.py [SHAPE ...] [--cpu 0] [--repeat 300] [--chain N [--shared]]

SHAPE is MxKxN (linalg.matmul) or BxMxKxN (linalg.batch_matmul, B products). --chain N runs N
products in a row, each with its own weights (the K x N operand), accumulating into one result:
weights that do not fit the caches come from memory, as a model's do; with --shared all N use the
same weights (they stay cached). The time printed is per product.
"""
import argparse
import os
import re
import subprocess
import tempfile

import numpy as np

DEFAULT = ["49x1152x192", "49x192x1152", "49x320x1280", "196x112x672", "112x672x196",
           "96x16x12544", "144x24x3136", "64x576x3136", "512x512x512", "169x512x1000"]


def tensor(dims):
    return "tensor<" + "x".join(str(d) for d in dims) + "xf32>"


def program(batch, m, k, n, weights, chain):
    """The MLIR text: one input A, `weights` inputs B, `chain` products accumulating."""
    lead = [batch] if batch else []
    a, b, c = tensor(lead + [m, k]), tensor(lead + [k, n]), tensor(lead + [m, n])
    op = "linalg.batch_matmul" if batch else "linalg.matmul"
    args = ", ".join(["%a: " + a] + [f"%b{i}: {b}" for i in range(weights)])
    lines = [f"func.func @main({args}) -> {c} {{",
             "  %z = arith.constant 0.0 : f32",
             f"  %e = tensor.empty() : {c}",
             f"  %acc0 = linalg.fill ins(%z : f32) outs(%e : {c}) -> {c}"]
    for i in range(chain):
        lines.append(f"  %acc{i + 1} = {op} ins(%a, %b{i % weights} : {a}, {b}) "
                     f"outs(%acc{i} : {c}) -> {c}")
    lines += [f"  return %acc{chain} : {c}", "}"]
    return "\n".join(lines) + "\n"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("shapes", nargs="*", default=DEFAULT)
    ap.add_argument("--kiln", default=os.path.join(os.path.dirname(__file__), "..", "build", "bin",
                                                   "kiln"))
    ap.add_argument("--cpu", default="0")
    ap.add_argument("--repeat", type=int, default=300)
    ap.add_argument("--chain", type=int, default=1, help="products in a row")
    ap.add_argument("--shared", action="store_true", help="the chained products share weights")
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    weights = 1 if args.shared else args.chain
    print(f"{'shape':>16} {'median ms':>10} {'GFLOP/s':>8}   (per product)")
    with tempfile.TemporaryDirectory() as tmp:
        for shape in args.shapes:
            dims = [int(v) for v in shape.split("x")]
            if len(dims) not in (3, 4):
                ap.error(f"'{shape}': a shape is MxKxN or BxMxKxN")
            batch, (m, k, n) = (dims[0], dims[1:]) if len(dims) == 4 else (0, dims)
            path = os.path.join(tmp, "mm.mlir")
            with open(path, "w") as f:
                f.write(program(batch, m, k, n, weights, args.chain))
            lead = (batch,) if batch else ()
            inputs = [os.path.join(tmp, "a.npy")]
            np.save(inputs[0], rng.uniform(-1, 1, lead + (m, k)).astype(np.float32))
            for i in range(weights):
                inputs.append(os.path.join(tmp, f"b{i}.npy"))
                np.save(inputs[-1], rng.uniform(-1, 1, lead + (k, n)).astype(np.float32))
            command = ["taskset", "-c", args.cpu, args.kiln, "run", path, "--repeat",
                       str(args.repeat), "--no-cache"]
            for i in inputs:
                command += ["--input", i]
            out = subprocess.run(command, capture_output=True, text=True, check=True).stdout
            ms = float(re.search(r"median ([0-9.]+) ms", out).group(1)) / args.chain
            flops = 2 * max(batch, 1) * m * k * n
            print(f"{shape:>16} {ms:10.3f} {flops / ms / 1e6:8.0f}")


if __name__ == "__main__":
    main()
