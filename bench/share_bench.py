#!/usr/bin/env python3
"""Issue 4 benchmark, one run: 8 local processes of one job on the 200-op model, with compile
sharing off (every process compiles) and on (the leader compiles, the others load its executable):
total CPU time of the job and when followers finish relative to the leader. Then a remote-cache hit
on a fresh machine (empty local cache) against a local hit.

Usage: bench/share_bench.py [BUILD_DIR]"""
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
BUILD = sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "..", "build")
KILN = os.path.join(BUILD, "bin", "kiln")
N = 8


def children_cpu():
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def run_job(work, model, url, share, job):
    start_cpu, start = children_cpu(), time.perf_counter()
    procs = []
    for i in range(N):
        env = dict(os.environ, KILN_CACHE_DIR=os.path.join(work, f"{job}-{i}"),
                   KILN_SHARE_BINARY_BETWEEN_HOSTS="true" if share else "false")
        procs.append(subprocess.Popen(
            [KILN, "run", model, "--fill", "ones", "--coordinator", url, "--num-processes", str(N),
             "--process-id", str(i), "--job", job], env=env, stdout=subprocess.DEVNULL))
    finished = {}
    while len(finished) < N:
        for i, p in enumerate(procs):
            if i not in finished and p.poll() is not None:
                if p.returncode != 0:
                    sys.exit(f"process {i} failed")
                finished[i] = time.perf_counter() - start
        time.sleep(0.001)
    return children_cpu() - start_cpu, finished


def timed_run(model, env):
    t = time.perf_counter()
    subprocess.run([KILN, "run", model, "--fill", "ones"], env=env, check=True,
                   stdout=subprocess.DEVNULL)
    return (time.perf_counter() - t) * 1000


def main():
    work = tempfile.mkdtemp()
    port = 20000 + os.getpid() % 20000
    redis = subprocess.Popen(["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save",
                              "", "--appendonly", "no"], stdout=subprocess.DEVNULL)
    url = f"redis://127.0.0.1:{port}"
    try:
        time.sleep(0.3)
        model = os.path.join(work, "chain200.mlir")
        subprocess.run([sys.executable, os.path.join(HERE, "make_chain_model.py"), model, "100"],
                       check=True)
        off_cpu, off_done = run_job(work, model, url, False, "off")
        on_cpu, on_done = run_job(work, model, url, True, "on")
        leader = on_done[0]
        lag = [on_done[i] - leader for i in range(1, N)]
        print(f"8 processes, 200-op model, O2")
        print(f"  sharing off: job CPU {off_cpu:7.2f} s, last process done at {max(off_done.values()):6.2f} s")
        print(f"  sharing on:  job CPU {on_cpu:7.2f} s, leader done at {leader:6.2f} s; followers "
              f"finish {statistics.median(lag) * 1000:+.0f} ms (median), {max(lag) * 1000:+.0f} ms (max) "
              f"after the leader")
        print(f"  CPU saved: {off_cpu / on_cpu:.1f}x less with sharing")

        # Remote hit on a fresh machine vs a local hit.
        warm = dict(os.environ, KILN_CACHE_DIR=os.path.join(work, "writer"), KILN_REMOTE_CACHE=url)
        timed_run(model, warm)
        remote_ms, local_ms = [], []
        for i in range(10):
            fresh = dict(os.environ, KILN_CACHE_DIR=os.path.join(work, f"fresh{i}"),
                         KILN_REMOTE_CACHE=url)
            remote_ms.append(timed_run(model, fresh))  # empty local cache: served by Redis
            local_ms.append(timed_run(model, fresh))   # now a local hit
        r, l = statistics.median(remote_ms), statistics.median(local_ms)
        print(f"warm remote hit on an empty local cache: {r:.1f} ms; local hit: {l:.1f} ms; "
              f"difference {r - l:+.1f} ms (median of 10)")
    finally:
        redis.kill()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
