#!/usr/bin/python3
"""kiln against ONNX Runtime and PyTorch eager on models exported from PyTorch, in one run.

usage: /usr/bin/python3 bench/onnx_bench.py [--threads 1,2] [--runs 20] [MODEL ...]

Per model and thread count T: kiln's cold compile (empty cache, whole process), warm start (a
second process served from the cache, spawn to exit), run time (median of RUNS, `kiln run
--repeat`), and beside it ONNX Runtime (npm onnxruntime-node: CPU provider, intra-op threads T,
graph optimisation 'all', spinning off for T > 1) and PyTorch eager (torch.set_num_threads(T)).
Each peer runs in its own process with OMP/OpenBLAS threads set to T; peak memory is that
process's own resident high-water mark (VmHWM; ru_maxrss would include the forking Python's).
Every timed process of a thread count T runs on the same T CPUs (the lowest this process may
use, or --cpus): on this VM the two vCPUs differ (resnet18 at T=1: kiln 18.8 ms on cpu0 and
22.9 on cpu1, ONNX Runtime 18.2 and 19.5), and unpinned peers landed on either.
The last column, at T >= 2, is the cache-line round trip between the two CPUs right after the row
(build/bin/kiln_core_round_trip): this VM's host places its vCPUs close (~130 ns) or far apart
(~450 ns) from one run to the next, and what a second thread gains depends on it.
Ratios > 1 mean kiln is faster. Models come from tests/onnx/export_models.py (random init,
seed 0, batch 1); ONNX Runtime is installed from npm into build/bench-ort on first use."""
import argparse
import json
import os
import re
import statistics
import subprocess
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
KILN = os.path.join(ROOT, "build", "bin", "kiln")
MODELS = os.path.join(ROOT, "build", "bench-onnx")
ORT_DIR = os.path.join(ROOT, "build", "bench-ort")
DEFAULT_MODELS = ["mlp", "transformer", "resnet18", "mobilenet_v2", "squeezenet1_1",
                  "efficientnet_b0"]


def run(argv, env=None, cpus=None):
    """Runs argv (on `cpus` when given); returns (stdout, wall seconds)."""
    start = time.perf_counter()
    pin = (lambda: os.sched_setaffinity(0, cpus)) if cpus else None
    proc = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
                          preexec_fn=pin)
    wall = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit("%s failed (%d): %s" % (" ".join(argv[:3]), proc.returncode,
                                                 proc.stderr.decode()[-2000:]))
    return proc.stdout.decode(), wall


def thread_env(threads):
    env = dict(os.environ)
    for name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "KILN_NUM_THREADS"):
        env[name] = str(threads)
    env["OMP_WAIT_POLICY"] = "PASSIVE"
    return env


def ensure_ort():
    if not os.path.isdir(os.path.join(ORT_DIR, "node_modules", "onnxruntime-node")):
        os.makedirs(ORT_DIR, exist_ok=True)
        subprocess.run(["npm", "install", "--silent", "--ignore-scripts", "--prefix", ORT_DIR,
                        "onnxruntime-node"], check=True)


def ensure_model(name):
    path = os.path.join(MODELS, name + "_opset17.onnx")
    if not os.path.exists(path):
        subprocess.run(["/usr/bin/python3", os.path.join(ROOT, "tests", "onnx", "export_models.py"),
                        MODELS, name], check=True, stdout=subprocess.DEVNULL)
    return path


TORCH_TIMER = r"""
import sys, time, json, statistics
import numpy as np, torch
sys.path.insert(0, sys.argv[1])
import export_models
torch.set_num_threads(int(sys.argv[3]))
torch.manual_seed(0)
model, shape = export_models.build(sys.argv[2])
model.eval()
x = torch.from_numpy(np.load(sys.argv[4]))
times = []
with torch.no_grad():
    model(x)
    for _ in range(int(sys.argv[5])):
        start = time.perf_counter()
        model(x)
        times.append((time.perf_counter() - start) * 1e3)
peak = [l for l in open("/proc/self/status") if l.startswith("VmHWM:")][0].split()[1]
print(json.dumps({"median_ms": statistics.median(times), "min_ms": min(times),
                  "peak_mib": int(peak) / 1024.0}))
"""


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--threads", default="1")
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--cpus", default="",
                        help="CPUs to time on, comma-separated (default: the lowest ones allowed)")
    parser.add_argument("models", nargs="*")
    args = parser.parse_args()
    models = args.models or DEFAULT_MODELS
    threads = [int(t) for t in args.threads.split(",")]
    allowed = ([int(c) for c in args.cpus.split(",")] if args.cpus
               else sorted(os.sched_getaffinity(0)))
    ensure_ort()
    import numpy as np
    rows = []
    for name in models:
        model = ensure_model(name)
        x = np.load(os.path.join(MODELS, name + ".input.npy")).astype(np.float32)
        for t in threads:
            env = thread_env(t)
            cpus = set(allowed[:t])
            with tempfile.TemporaryDirectory() as tmp:
                raw = os.path.join(tmp, "input.bin")
                x.tofile(raw)
                npy = os.path.join(MODELS, name + ".input.npy")
                kiln = [KILN, "--cache-dir", os.path.join(tmp, "cache"), "run", model, "--input",
                        npy]
                _, cold_s = run(kiln, env)
                warm = [run(kiln, env)[1] for _ in range(5)]
                out, _ = run(kiln + ["--repeat", str(args.runs), "--json"], env, cpus)
                kiln_ms = json.loads(out)["timings_ms"]["run_median"]
                kiln_rss = json.loads(out)["peak_memory_mib"]
                out, _ = run(["node", os.path.join(ROOT, "bench", "onnx", "ort_run.js"),
                                       model, raw, ",".join(map(str, x.shape)), str(t),
                                       str(args.runs)],
                                      dict(env, NODE_PATH=os.path.join(ORT_DIR, "node_modules")),
                                      cpus)
                ort_ms = json.loads(out)["median_ms"]
                ort_rss = json.loads(out)["peak_mib"]
                out, _ = run(["/usr/bin/python3", "-c", TORCH_TIMER,
                                         os.path.join(ROOT, "tests", "onnx"), name, str(t), npy,
                                         str(args.runs)], env, cpus)
                torch_ms = json.loads(out)["median_ms"]
                torch_rss = json.loads(out)["peak_mib"]
            rows.append((name, t, cold_s, statistics.median(warm) * 1e3, kiln_ms, ort_ms, torch_ms,
                         kiln_rss, ort_rss, torch_rss, round_trip_ns(sorted(cpus))))
            print_row(rows[-1], header=len(rows) == 1)
    for t in threads:
        sel = [r for r in rows if r[1] == t]
        if not sel:
            continue
        geo = lambda k: statistics.geometric_mean([r[k] / r[4] for r in sel])
        print("T=%d geometric mean: ORT/kiln %.2fx, torch/kiln %.2fx" % (t, geo(5), geo(6)))


def round_trip_ns(cpus):
    """The cache-line round trip between the first two CPUs timed on (bench/core_round_trip.cc),
    right after a row: on this VM it changes from run to run, and T=2 gains with it. '-' at T=1."""
    tool = os.path.join(os.path.dirname(KILN), "kiln_core_round_trip")
    if len(cpus) < 2 or not os.path.exists(tool):
        return None
    out = subprocess.run([tool, str(cpus[0]), str(cpus[1])], capture_output=True, text=True)
    m = re.search(r"round trip ([0-9]+) ns", out.stdout)
    return int(m.group(1)) if m else None


def print_row(r, header):
    if header:
        print("%-16s %2s %9s %9s %10s %10s %10s %8s %8s %18s %6s" % (
            "model", "T", "cold s", "warm ms", "kiln ms", "ORT ms", "torch ms", "ORT/kiln",
            "torch/k", "peak MiB k/ORT/pt", "rt ns"))
    name, t, cold, warm, k, o, p, kr, orr, pr, rt = r
    print("%-16s %2d %9.2f %9.1f %10.2f %10.2f %10.2f %7.2fx %7.2fx %6.0f/%5.0f/%5.0f %6s" % (
        name, t, cold, warm, k, o, p, o / k, p / k, kr, orr, pr, "-" if rt is None else rt),
        flush=True)


if __name__ == "__main__":
    main()
