#!/usr/bin/env python3
"""End to end on the same files, in one run: mlir-opt + mlir-runner (kiln's O2 pass lists, LLVM -O2),
`kiln run` with an empty cache (cold) and with a warm cache. Prints median wall times (measured
around each process with perf_counter) and the warm speed-up over mlir-runner.

Usage: bench/end_to_end.py [BUILD_DIR]"""
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
BUILD = sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "..", "build")
KILN = os.path.join(BUILD, "bin", "kiln")
LLVM_BIN = "/usr/lib/llvm-22/bin"
LIBS = "/usr/lib/llvm-22/lib/libmlir_runner_utils.so,/usr/lib/llvm-22/lib/libmlir_c_runner_utils.so"


def run(cmd, stdin=None):
    return subprocess.run(cmd, input=stdin, capture_output=True, check=True).stdout


def reference(path, passes):
    ir = open(path, "rb").read()
    for p in passes:
        ir = run([f"{LLVM_BIN}/mlir-opt", f"--pass-pipeline={p}"], ir)
    return run([f"{LLVM_BIN}/mlir-runner", "-e", "runner_main", "--entry-point-result=void", "-O2",
                f"--shared-libs={LIBS}"], ir)


def kiln(path, cache):
    return run([KILN, "--cache-dir", cache, "run", path, "-e", "runner_main",
                "--entry-point-result=void", "-O", "O2"])


def timed(fn, runs, before=None):
    times = []
    for _ in range(runs):
        if before:
            before()
        t = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t) * 1000)
    return statistics.median(times)


def main():
    work = tempfile.mkdtemp()
    try:
        run([sys.executable, os.path.join(HERE, "make_chain_model.py"),
             os.path.join(work, "chain200.mlir"), "100", "--runner"])
        shutil.copy(os.path.join(HERE, "mlp_runner.mlir"), os.path.join(work, "mlp.mlir"))
        # mlir-runner has no kiln runtime: its code allocates with plain malloc, and kiln's own
        # passes (kiln-parallelize: loops onto kiln's thread pool) are not in mlir-opt.
        passes = [re.sub(r"kiln-[a-z-]+(\{[^}]*\})?,\s*", "",
                         l.replace("use-generic-functions=true", "use-generic-functions=false"))
                  for l in run([KILN, "pipeline", "-O", "O2"]).decode().splitlines()
                  if l.startswith("builtin.module(")]
        print(f"{'model':10} {'mlir-runner ms':>16} {'kiln cold ms':>14} {'kiln warm ms':>14} "
              f"{'runner / kiln warm':>20}")
        for model, ref_runs in (("mlp", 5), ("chain200", 3)):
            path = os.path.join(work, model + ".mlir")
            strip = lambda b: re.sub(rb"base@ = 0x[0-9a-f]+", b"", b)
            if strip(reference(path, passes)) != strip(kiln(path, os.path.join(work, "check"))):
                sys.exit(f"outputs differ for {model}")
            cold = os.path.join(work, "cold")
            warm = os.path.join(work, "warm")
            ref_ms = timed(lambda: reference(path, passes), ref_runs)
            cold_ms = timed(lambda: kiln(path, cold), 3,
                            before=lambda: shutil.rmtree(cold, ignore_errors=True))
            kiln(path, warm)
            warm_ms = timed(lambda: kiln(path, warm), 10)
            print(f"{model:10} {ref_ms:16.1f} {cold_ms:14.1f} {warm_ms:14.1f} {ref_ms / warm_ms:19.0f}x")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
