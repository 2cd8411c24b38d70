#!/usr/bin/env python3
"""Writes a ~200-op linalg model: 100 layers of (16x64 @ 64x64 matmul, then tanh(x) + x).

Usage: make_chain_model.py OUT.mlir [LAYERS]"""
import sys

out, layers = sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 100
t, w = "tensor<16x64xf32>", "tensor<64x64xf32>"
lines = [f"module @chain{layers} {{",
         f"  func.func @main(%x: {t}, %w: {w}) -> {t} {{",
         "    %zero = arith.constant 0.0 : f32",
         f"    %init = tensor.empty() : {t}",
         f"    %acc = linalg.fill ins(%zero : f32) outs(%init : {t}) -> {t}"]
cur = "%x"
for i in range(layers):
    lines.append(f"    %m{i} = linalg.matmul ins({cur}, %w : {t}, {w}) outs(%acc : {t}) -> {t}")
    lines.append(f"    %a{i} = linalg.generic {{indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>], "
                 f"iterator_types = [\"parallel\", \"parallel\"]}} ins(%m{i} : {t}) outs(%init : {t}) {{\n"
                 f"    ^bb0(%v: f32, %o: f32):\n      %th = math.tanh %v : f32\n      %s = arith.addf %th, %v : f32\n"
                 f"      linalg.yield %s : f32\n    }} -> {t}")
    cur = f"%a{i}"
lines += [f"    return {cur} : {t}", "  }", "}"]
open(out, "w").write("\n".join(lines) + "\n")
