#!/usr/bin/env bash
# Builds kiln with AddressSanitizer and UndefinedBehaviorSanitizer (build-asan/) and runs the test
# suite there; any sanitizer report fails the test that caused it.
# Usage: bash scripts/sanitize.sh [CTEST_ARGS...]   e.g. -R 'Cache|Npy|Cli'
set -euo pipefail
cd "$(dirname "$0")/.."
[ -x build/bin/kiln ] || bash scripts/setup.sh  # installs the dependencies
cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DKILN_SANITIZE=ON -DKILN_BUILD_PYTHON=OFF \
  -DKILN_BUILD_BENCHMARKS=OFF >/dev/null
ninja -C build-asan -j2
# Leak checks stay on for kiln's own code; LLVM and MLIR keep process-lifetime singletons.
export LSAN_OPTIONS="suppressions=$PWD/scripts/lsan.supp:print_suppressions=0"
export ASAN_OPTIONS="detect_leaks=1:abort_on_error=0:allocator_may_return_null=1"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
cd build-asan
ctest --output-on-failure -j2 --timeout 900 "$@"
