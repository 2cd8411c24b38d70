#!/usr/bin/python3
"""Python's cost over C++: `import kiln` time (fresh interpreters) and the per-call overhead of
Executable.__call__ over Executable::execute for a tiny program, side by side in one run.

    PYTHONPATH=build/python /usr/bin/python3 bench/python_overhead.py [--calls N]
Targets (issue 15): import <= 50 ms, call overhead <= 5 us."""
import argparse
import statistics
import subprocess
import sys
import time

import numpy as np

TINY = """
func.func @add(%a: tensor<4xf32>, %b: tensor<4xf32>) -> tensor<4xf32> {
  %e = tensor.empty() : tensor<4xf32>
  %r = linalg.add ins(%a, %b : tensor<4xf32>, tensor<4xf32>) outs(%e : tensor<4xf32>) -> tensor<4xf32>
  return %r : tensor<4xf32>
}
"""


def import_ms(runs):
    times = []
    for _ in range(runs):
        out = subprocess.run([sys.executable, "-c",
                              "import time; t = time.perf_counter(); import kiln; "
                              "print((time.perf_counter() - t) * 1000)"],
                             capture_output=True, text=True, check=True)
        times.append(float(out.stdout))
    return statistics.median(times)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=20000)
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    import kiln
    exe = kiln.compile(TINY, optimization_level="O2")
    a = np.ones(4, np.float32)
    b = np.ones(4, np.float32)
    exe(a, b)
    python_us, cpp_us = [], []
    for _ in range(args.rounds):
        start = time.perf_counter()
        for _ in range(args.calls):
            exe(a, b)
        python_us.append((time.perf_counter() - start) / args.calls * 1e6)
        cpp_us.append(exe._native.time_execute("add", args.calls, a, b) / args.calls * 1e6)
    py_median, cpp_median = statistics.median(python_us), statistics.median(cpp_us)
    print(f"import kiln: median {import_ms(9):.1f} ms (fresh interpreters, 9 runs)")
    print(f"tiny call: Python {py_median:.2f} us, C++ execute {cpp_median:.2f} us, "
          f"overhead {py_median - cpp_median:.2f} us (medians of {args.rounds} x {args.calls})")


if __name__ == "__main__":
    main()
