#!/usr/bin/env python3
"""Writes a ~200-op linalg model: 100 layers of (16x64 @ 64x64 matmul, then tanh(x) + x).

Usage: make_chain_model.py OUT.mlir [LAYERS] [--runner]
--runner adds an argument-free @runner_main that feeds constants and prints the result with
printMemrefF32, so mlir-runner and `kiln run -e runner_main --entry-point-result=void` run it."""
import sys

args = [a for a in sys.argv[1:] if a != "--runner"]
runner = "--runner" in sys.argv
out, layers = args[0], int(args[1]) if len(args) > 1 else 100
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
lines += [f"    return {cur} : {t}", "  }"]
if runner:
    lines += ["  func.func private @printMemrefF32(memref<*xf32>) attributes {llvm.emit_c_interface}",
              "  func.func @runner_main() {",
              f"    %x = arith.constant dense<0.01> : {t}",
              f"    %w = arith.constant dense<0.02> : {w}",
              f"    %y = call @main(%x, %w) : ({t}, {w}) -> {t}",
              f"    %m = bufferization.to_buffer %y : {t} to memref<16x64xf32>",
              "    %u = memref.cast %m : memref<16x64xf32> to memref<*xf32>",
              "    call @printMemrefF32(%u) : (memref<*xf32>) -> ()",
              "    return",
              "  }"]
lines += ["}"]
open(out, "w").write("\n".join(lines) + "\n")
