#!/usr/bin/env python3
"""Writes a model with a few heavy kernels and many light ones (the PGLE compile-time benchmark).

Heavy: LAYERS layers of relu(x @ W) on 256x1024 activations with 1024x1024 weights.
Light: a side chain of SIDE small layers, g = tanh(g @ U) + g on 1x64 vectors, which together
take well under 1% of the run time but most of the compile time.

Usage: make_light_model.py OUT.mlir [LAYERS] [SIDE]"""
import sys

out = sys.argv[1]
layers = int(sys.argv[2]) if len(sys.argv) > 2 else 4
side = int(sys.argv[3]) if len(sys.argv) > 3 else 60
x, w, g, u = "tensor<256x1024xf32>", "tensor<1024x1024xf32>", "tensor<1x64xf32>", "tensor<64x64xf32>"
ident = "affine_map<(i, j) -> (i, j)>"
lines = [f"module @light{side} {{",
         f"  func.func @main(%x: {x}, %w: {w}, %g: {g}, %u: {u}) -> ({x}, {g}) {{",
         "    %zero = arith.constant 0.0 : f32",
         f"    %ex = tensor.empty() : {x}",
         f"    %fx = linalg.fill ins(%zero : f32) outs(%ex : {x}) -> {x}",
         f"    %eg = tensor.empty() : {g}",
         f"    %fg = linalg.fill ins(%zero : f32) outs(%eg : {g}) -> {g}"]
cur = "%x"
for i in range(layers):
    lines.append(f"    %h{i} = linalg.matmul ins({cur}, %w : {x}, {w}) outs(%fx : {x}) -> {x}")
    lines.append(f"    %r{i} = linalg.generic {{indexing_maps = [{ident}, {ident}], iterator_types = [\"parallel\", \"parallel\"]}} "
                 f"ins(%h{i} : {x}) outs(%ex : {x}) {{\n    ^bb0(%v: f32, %o: f32):\n"
                 f"      %m = arith.maximumf %v, %zero : f32\n      linalg.yield %m : f32\n    }} -> {x}")
    cur = f"%r{i}"
small = "%g"
for i in range(side):
    lines.append(f"    %s{i} = linalg.matmul ins({small}, %u : {g}, {u}) outs(%fg : {g}) -> {g}")
    lines.append(f"    %t{i} = linalg.generic {{indexing_maps = [{ident}, {ident}, {ident}], iterator_types = [\"parallel\", \"parallel\"]}} "
                 f"ins(%s{i}, {small} : {g}, {g}) outs(%eg : {g}) {{\n    ^bb0(%v: f32, %p: f32, %o: f32):\n"
                 f"      %th = math.tanh %v : f32\n      %a = arith.addf %th, %p : f32\n      linalg.yield %a : f32\n    }} -> {g}")
    small = f"%t{i}"
lines += [f"    return {cur}, {small} : {x}, {g}", "  }", "}"]
open(out, "w").write("\n".join(lines) + "\n")
