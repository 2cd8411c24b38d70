#!/usr/bin/env python3
"""Where a kiln executable spends its time, per generated function and per thread, from `perf`.

kiln loads an executable's code from an anonymous memory file, so `perf report` shows bare
addresses for it. This script takes the shared object out of the .kx (the serialised format of
src/backend/cpu/executable_format.cc: a 40-byte header, JSON metadata, then the object), reads
its symbols with `nm`, and files every sample of the memory file under the function that holds
its address. At T=2 each parallel kernel is its own function (parallel_compute_fn_N and the
async_dispatch_fn_N that runs its share); at T=1 most are inlined into `main`.

  KILN_NUM_THREADS=2 perf record -o P.data -F 4000 -- build/bin/kiln run M.kx --input M.npy \\
      --repeat 400
  /usr/bin/python3 bench/perf_kernels.py M.kx P.data [--top 30]
"""

import argparse
import bisect
import collections
import re
import struct
import subprocess
import sys
import tempfile

HEADER = struct.Struct("<8sIIQQQ")  # magic, format version, reserved, metadata, object, checksum


def extract_object(kx_path, so_path):
    with open(kx_path, "rb") as f:
        data = f.read()
    if len(data) < HEADER.size or data[:8] != b"KILNEXE1":
        sys.exit(f"{kx_path}: not a kiln executable (write one with `kiln compile M -o M.kx`)")
    _, _, _, metadata_size, object_size, _ = HEADER.unpack_from(data)
    start = HEADER.size + metadata_size
    if start + object_size > len(data):
        sys.exit(f"{kx_path}: truncated ({len(data)} bytes, the header promises more)")
    with open(so_path, "wb") as out:
        out.write(data[start:start + object_size])


def symbols(so_path):
    listing = subprocess.run(["nm", "-S", "--defined-only", so_path], capture_output=True,
                             text=True, check=True).stdout
    table = []
    for line in listing.splitlines():
        fields = line.split()
        if len(fields) == 4:
            table.append((int(fields[0], 16), int(fields[1], 16), fields[3]))
    table.sort()
    return table


def kernel_of(name):
    # A parallel kernel's pieces (compute function, dispatch, coroutine) under one name; MLIR
    # names the first kernel's without a suffix, the next ones _0, _1, ...
    m = re.match(r"(?:parallel_compute_fn|async_dispatch_fn|async_execute_fn)(_\d+)?", name)
    return "kernel" + (m.group(1) or "") if m else name


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("kx")
    parser.add_argument("perf_data")
    parser.add_argument("--top", type=int, default=30)
    args = parser.parse_args()
    with tempfile.NamedTemporaryFile(suffix=".so") as so:
        extract_object(args.kx, so.name)
        table = symbols(so.name)
    starts = [start for start, _, _ in table]
    # One line per (thread, object, symbol): perf names an address inside the memory file
    # relative to the object, which is where nm puts the functions.
    report = subprocess.run(
        ["perf", "report", "-i", args.perf_data, "--no-children", "--sort", "pid,dso,sym",
         "--percent-limit", "0", "-F", "sample,pid,dso,sym"],
        capture_output=True, text=True, check=True).stdout
    by_kernel = collections.Counter()
    by_thread = collections.defaultdict(collections.Counter)
    line_format = re.compile(r"\s*(\d+)\s+(\d+):\S*\s+(.*?)\s+\[[.k]\]\s+(\S+)")
    for line in report.splitlines():
        m = line_format.match(line)
        if not m:
            continue
        count, thread, dso, symbol = int(m.group(1)), m.group(2), m.group(3), m.group(4)
        if "kiln-executable" in dso:
            name = "?"
            if symbol.startswith("0x"):
                offset = int(symbol, 16)
                i = bisect.bisect_right(starts, offset) - 1
                if i >= 0 and offset < table[i][0] + table[i][1]:
                    name = kernel_of(table[i][2])
            by_kernel[name] += count
            by_thread[thread]["generated code"] += count
        elif "libkiln" in dso:
            by_thread[thread]["libkiln (pool, waits)"] += count
        else:
            by_thread[thread]["other"] += count
    total = sum(by_kernel.values())
    print(f"samples in generated code: {total}")
    for tid, counts in sorted(by_thread.items(), key=lambda kv: -sum(kv[1].values())):
        print(f"  thread {tid}: " + ", ".join(f"{k} {v}" for k, v in counts.most_common()))
    for name, count in by_kernel.most_common(args.top):
        print(f"{100.0 * count / max(total, 1):6.2f}%  {count:7d}  {name}")


if __name__ == "__main__":
    main()
