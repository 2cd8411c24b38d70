#!/usr/bin/python3
"""Runs LLVM's MLIR CPU integration tests twice, as lit would with mlir-opt-22 | mlir-runner-22 and
with `kiln run` in their place, and compares FileCheck's verdicts.

The tests are not part of kiln: point this at a directory of them (for example files of
llvm-project's mlir/test/Integration/Dialect/*/CPU). Only tests whose RUN lines execute a program
(an mlir-runner stage) count; the measure is the share of the tests mlir-runner passes that kiln
passes too.

    /usr/bin/python3 bench/mlir_integration.py DIR [--kiln build/bin/kiln] [--verbose]

For kiln, each RUN pipeline's mlir-opt stage is dropped (kiln lowers the module itself and applies
a schedule embedded in it; -generate-runtime-verification becomes --verify-runtime) and the
mlir-runner stage becomes `kiln run FILE` with the same runner flags; what follows (FileCheck)
stays as it is.
"""
import argparse
import os
import re
import subprocess
import sys
import time

LLVM_BIN = "/usr/lib/llvm-22/bin"
LLVM_LIB = "/usr/lib/llvm-22/lib"


def logical_lines(text):
    """The file's directive lines (RUN:, DEFINE:, ...) with lit's `\\` continuations joined: a
    continuation is the next line with the same directive, whatever lies between."""
    out, pending, directive = [], "", None
    for raw in text.splitlines():
        line = raw.strip()
        if not line.startswith("//"):
            continue
        body = line[2:].strip()
        m = re.match(r"([A-Z-]+):", body)
        if pending:
            if not m or m.group(1) != directive:
                continue
            body = body[m.end():].strip()
        elif m:
            directive = m.group(1)
        if body.endswith("\\"):
            pending += body[:-1] + " "
        else:
            out.append(pending + body)
            pending = ""
    if pending:
        out.append(pending)
    return out


def parse(path):
    """The RUN commands, with DEFINE/REDEFINE substitutions expanded."""
    with open(path, encoding="utf-8", errors="replace") as f:
        text = f.read()
    defines, runs = {}, []
    for line in logical_lines(text):
        m = re.match(r"(RE)?DEFINE:\s*(%\{[\w.-]+\})\s*=\s*(.*)$", line)
        if m:
            defines[m.group(2)] = m.group(3).strip()
            continue
        m = re.match(r"RUN:\s*(.*)$", line)
        if m:
            command = m.group(1)
            for _ in range(8):  # definitions may refer to each other
                for name, value in defines.items():
                    command = command.replace(name, value)
            runs.append(command)
    return runs


def scratch_path(path):
    return "/tmp/kiln-itest-" + re.sub(r"[^\w.-]", "_", path) + ".tmp"


def substitute(command, path):
    subs = {
        "%t": scratch_path(path),
        "%mlir_c_runner_utils": f"{LLVM_LIB}/libmlir_c_runner_utils.so",
        "%mlir_runner_utils": f"{LLVM_LIB}/libmlir_runner_utils.so",
        "%mlir_async_runtime": f"{LLVM_LIB}/libmlir_async_runtime.so",
        "%mlir_lib_dir": LLVM_LIB,
        "%shlibext": ".so",
        "%s": path,
    }
    for key in sorted(subs, key=len, reverse=True):
        command = command.replace(key, subs[key])
    return command


def tool(stage):
    words = stage.strip().split()
    return os.path.basename(words[0]) if words else ""


def reference_command(command):
    # mlir-runner was called mlir-cpu-runner before LLVM 20; older copies of the tests say so.
    command = re.sub(r"(?<![\w/-])mlir-cpu-runner(?![\w-])", "mlir-runner", command)
    # Newer copies of the tests may spell LLVM 22's passes differently.
    command = command.replace("naive-convert-vector-to-llvm", "convert-vector-to-llvm")
    command = re.sub(r"(?<![\w/-])(mlir-opt|mlir-runner|FileCheck|not|count)(?![\w-])",
                     lambda m: f"{LLVM_BIN}/{m.group(1)}", command)
    return command


def kiln_command(command, path, kiln):
    """None when the pipeline runs no program (a RUN line that only prepares %t, say)."""
    command = re.sub(r"(?<![\w/-])mlir-cpu-runner(?![\w-])", "mlir-runner", command)
    stages = command.split("|")
    # A stage may be a sequence (`rm -f %t && mlir-opt ... -o %t && mlir-runner %t ...`): the
    # runner is the command that starts it or follows an `&&`.
    runner, before = None, ""
    for i, stage in enumerate(stages):
        parts = stage.split("&&")
        at = next((j for j, part in enumerate(parts) if tool(part) == "mlir-runner"), None)
        if at is not None:
            runner, stages[i] = i, parts[at]
            before = " ".join(stages[:i] + parts[:at])
            break
    if runner is None:
        return None
    verify = ""
    if "generate-runtime-verification" in before:
        # -test-cf-assert: a failed check is reported and the program goes on.
        verify = (" --verify-runtime-continue" if "test-cf-assert" in before
                  else " --verify-runtime")
    args = stages[runner].strip().split()[1:]
    # The module comes from the file itself; a trailing input argument would name it again.
    args = [a for a in args if a not in (path, scratch_path(path), "-")]
    head = f"{kiln} run {path} --no-cache{verify} " + " ".join(args)
    prefix = ""
    if tool(stages[0]) == "not":  # `not mlir-opt ... | mlir-runner` is rare; keep `not` on kiln
        prefix = f"{LLVM_BIN}/not "
    rest = "|".join(stages[runner + 1:])
    return reference_command(prefix + head + (" | " + rest if rest.strip() else ""))


def run(command, cwd):
    start = time.time()
    p = subprocess.run(["bash", "-o", "pipefail", "-c", command], cwd=cwd, capture_output=True,
                       text=True, timeout=300)
    return p.returncode == 0, p.stdout + p.stderr, time.time() - start


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("directory")
    ap.add_argument("--kiln", default=os.path.join(os.path.dirname(__file__), "..", "build",
                                                   "bin", "kiln"))
    ap.add_argument("--verbose", action="store_true", help="print kiln's output for failures")
    a = ap.parse_args()
    kiln = os.path.abspath(a.kiln)
    files = sorted(os.path.join(d, f) for d, _, fs in os.walk(a.directory) for f in fs
                   if f.endswith(".mlir"))
    rows, reference_passed, both_passed = [], 0, 0
    for path in files:
        path = os.path.abspath(path)
        runs = parse(path)
        name = os.path.relpath(path, a.directory)
        ref_cmds = [reference_command(substitute(r, path)) for r in runs]
        kiln_cmds = [kiln_command(substitute(r, path), path, kiln) for r in runs]
        kiln_cmds = [k for k in kiln_cmds if k is not None]
        if not kiln_cmds:
            rows.append((name, "-", "-", "no program run"))
            continue
        cwd = os.path.dirname(path)
        ref_ok = all(run(c, cwd)[0] for c in ref_cmds)
        kiln_ok, why = True, ""
        for c in kiln_cmds:
            ok, out, _ = run(c, cwd)
            if not ok:
                kiln_ok = False
                lines = [l for l in out.splitlines() if "error" in l.lower()] or out.splitlines()
                why = (lines[0] if lines else "")[:150]
                if a.verbose:
                    print(f"--- {name}: {c}\n{out[-3000:]}", file=sys.stderr)
                break
        reference_passed += ref_ok
        both_passed += ref_ok and kiln_ok
        rows.append((name, "pass" if ref_ok else "FAIL", "pass" if kiln_ok else "FAIL", why))
    width = max([len(r[0]) for r in rows] + [4])
    print(f"{'test':<{width}}  mlir-runner  kiln  (kiln's first error)")
    for name, ref, k, why in rows:
        print(f"{name:<{width}}  {ref:<11}  {k:<4}  {why}")
    share = 100.0 * both_passed / reference_passed if reference_passed else 0.0
    print(f"\nkiln passes {both_passed} of the {reference_passed} tests mlir-runner-22 passes "
          f"({share:.1f}%); {len(rows)} files, "
          f"{sum(1 for r in rows if r[1] == '-')} run no program")


if __name__ == "__main__":
    main()
