#!/usr/bin/env python3
"""Writes one transformer encoder block in linalg (the PGLE speed benchmark): odd sequence length,
multi-head attention and an MLP. Defaults match a ViT-S/16 block: 197 tokens, width 384, 6 heads.

Usage: make_attention_model.py OUT.mlir [TOKENS] [WIDTH] [HEADS]"""
import sys

out = sys.argv[1]
s = int(sys.argv[2]) if len(sys.argv) > 2 else 197
d = int(sys.argv[3]) if len(sys.argv) > 3 else 384
h = int(sys.argv[4]) if len(sys.argv) > 4 else 6
hd, f = d // h, 4 * d
T = lambda *dims: "tensor<" + "x".join(map(str, dims)) + "xf32>"
m2 = "affine_map<(i, j) -> (i, j)>"
L = [f"module @encoder_block_{s}x{d} {{",
     f"  func.func @main(%x: {T(s, d)}, %wq: {T(d, d)}, %wk: {T(d, d)}, %wv: {T(d, d)}, %wo: {T(d, d)}, "
     f"%w1: {T(d, f)}, %w2: {T(f, d)}) -> {T(s, d)} {{",
     "    %zero = arith.constant 0.0 : f32",
     "    %ninf = arith.constant -3.4e38 : f32",
     # 1/sqrt(head dim), and 3/width standing in for initialised weights (std ~ 1/sqrt(width)):
     # the benchmark feeds uniform(-1, 1) weights, whose raw scores (~10^3) would drive exp into
     # denormals, which no real model sees.
     f"    %scale = arith.constant {1.0 / hd ** 0.5 * 3.0 / d:.8f} : f32"]

def matmul(name, a, b, m, k, n):
    L.append(f"    %{name}_e = tensor.empty() : {T(m, n)}")
    L.append(f"    %{name}_z = linalg.fill ins(%zero : f32) outs(%{name}_e : {T(m, n)}) -> {T(m, n)}")
    L.append(f"    %{name} = linalg.matmul ins({a}, {b} : {T(m, k)}, {T(k, n)}) outs(%{name}_z : {T(m, n)}) -> {T(m, n)}")

def heads(name, src, perm, shape):
    # [s, d] -> [s, h, hd] -> transposed per head
    L.append(f"    %{name}_x = tensor.expand_shape {src} [[0], [1, 2]] output_shape [{s}, {h}, {hd}] : {T(s, d)} into {T(s, h, hd)}")
    L.append(f"    %{name}_e = tensor.empty() : {T(*shape)}")
    L.append(f"    %{name} = linalg.transpose ins(%{name}_x : {T(s, h, hd)}) outs(%{name}_e : {T(*shape)}) permutation = {perm}")

matmul("q", "%x", "%wq", s, d, d)
matmul("k", "%x", "%wk", s, d, d)
matmul("v", "%x", "%wv", s, d, d)
heads("qh", "%q", "[1, 0, 2]", (h, s, hd))
heads("kh", "%k", "[1, 2, 0]", (h, hd, s))
heads("vh", "%v", "[1, 0, 2]", (h, s, hd))
L.append(f"    %sc_e = tensor.empty() : {T(h, s, s)}")
L.append(f"    %sc_z = linalg.fill ins(%zero : f32) outs(%sc_e : {T(h, s, s)}) -> {T(h, s, s)}")
L.append(f"    %sc = linalg.batch_matmul ins(%qh, %kh : {T(h, s, hd)}, {T(h, hd, s)}) outs(%sc_z : {T(h, s, s)}) -> {T(h, s, s)}")
# softmax over the last dimension, scaled
m3, r3 = "affine_map<(b, i, j) -> (b, i, j)>", "affine_map<(b, i, j) -> (b, i)>"
L.append(f"    %mx_e = tensor.empty() : {T(h, s)}")
L.append(f"    %mx_i = linalg.fill ins(%ninf : f32) outs(%mx_e : {T(h, s)}) -> {T(h, s)}")
L.append(f"    %mx = linalg.generic {{indexing_maps = [{m3}, {r3}], iterator_types = [\"parallel\", \"parallel\", \"reduction\"]}} "
         f"ins(%sc : {T(h, s, s)}) outs(%mx_i : {T(h, s)}) {{\n    ^bb0(%a: f32, %acc: f32):\n      %r = arith.maximumf %a, %acc : f32\n      linalg.yield %r : f32\n    }} -> {T(h, s)}")
L.append(f"    %ex = linalg.generic {{indexing_maps = [{m3}, {r3}, {m3}], iterator_types = [\"parallel\", \"parallel\", \"parallel\"]}} "
         f"ins(%sc, %mx : {T(h, s, s)}, {T(h, s)}) outs(%sc_e : {T(h, s, s)}) {{\n    ^bb0(%a: f32, %m: f32, %o: f32):\n"
         f"      %t = arith.subf %a, %m : f32\n      %u = arith.mulf %t, %scale : f32\n      %e = math.exp %u : f32\n      linalg.yield %e : f32\n    }} -> {T(h, s, s)}")
L.append(f"    %sm_i = linalg.fill ins(%zero : f32) outs(%mx_e : {T(h, s)}) -> {T(h, s)}")
L.append(f"    %sm = linalg.generic {{indexing_maps = [{m3}, {r3}], iterator_types = [\"parallel\", \"parallel\", \"reduction\"]}} "
         f"ins(%ex : {T(h, s, s)}) outs(%sm_i : {T(h, s)}) {{\n    ^bb0(%a: f32, %acc: f32):\n      %r = arith.addf %a, %acc : f32\n      linalg.yield %r : f32\n    }} -> {T(h, s)}")
L.append(f"    %pr = linalg.generic {{indexing_maps = [{m3}, {r3}, {m3}], iterator_types = [\"parallel\", \"parallel\", \"parallel\"]}} "
         f"ins(%ex, %sm : {T(h, s, s)}, {T(h, s)}) outs(%sc_e : {T(h, s, s)}) {{\n    ^bb0(%a: f32, %t: f32, %o: f32):\n"
         f"      %r = arith.divf %a, %t : f32\n      linalg.yield %r : f32\n    }} -> {T(h, s, s)}")
L.append(f"    %cx_e = tensor.empty() : {T(h, s, hd)}")
L.append(f"    %cx_z = linalg.fill ins(%zero : f32) outs(%cx_e : {T(h, s, hd)}) -> {T(h, s, hd)}")
L.append(f"    %cx = linalg.batch_matmul ins(%pr, %vh : {T(h, s, s)}, {T(h, s, hd)}) outs(%cx_z : {T(h, s, hd)}) -> {T(h, s, hd)}")
L.append(f"    %ct_e = tensor.empty() : {T(s, h, hd)}")
L.append(f"    %ct = linalg.transpose ins(%cx : {T(h, s, hd)}) outs(%ct_e : {T(s, h, hd)}) permutation = [1, 0, 2]")
L.append(f"    %cf = tensor.collapse_shape %ct [[0], [1, 2]] : {T(s, h, hd)} into {T(s, d)}")
matmul("o", "%cf", "%wo", s, d, d)
L.append(f"    %res = linalg.generic {{indexing_maps = [{m2}, {m2}, {m2}], iterator_types = [\"parallel\", \"parallel\"]}} "
         f"ins(%o, %x : {T(s, d)}, {T(s, d)}) outs(%o_e : {T(s, d)}) {{\n    ^bb0(%a: f32, %b: f32, %c: f32):\n"
         f"      %r = arith.addf %a, %b : f32\n      linalg.yield %r : f32\n    }} -> {T(s, d)}")
matmul("u", "%res", "%w1", s, d, f)
L.append(f"    %g = linalg.generic {{indexing_maps = [{m2}, {m2}], iterator_types = [\"parallel\", \"parallel\"]}} "
         f"ins(%u : {T(s, f)}) outs(%u_e : {T(s, f)}) {{\n    ^bb0(%a: f32, %c: f32):\n"
         f"      %r = arith.maximumf %a, %zero : f32\n      linalg.yield %r : f32\n    }} -> {T(s, f)}")
matmul("dn", "%g", "%w2", s, f, d)
L.append(f"    %y = linalg.generic {{indexing_maps = [{m2}, {m2}, {m2}], iterator_types = [\"parallel\", \"parallel\"]}} "
         f"ins(%dn, %res : {T(s, d)}, {T(s, d)}) outs(%dn_e : {T(s, d)}) {{\n    ^bb0(%a: f32, %b: f32, %c: f32):\n"
         f"      %r = arith.addf %a, %b : f32\n      linalg.yield %r : f32\n    }} -> {T(s, d)}")
L += [f"    return %y : {T(s, d)}", "  }", "}"]
open(out, "w").write("\n".join(L) + "\n")
