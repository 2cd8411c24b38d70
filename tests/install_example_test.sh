#!/usr/bin/env bash
# Installs kiln into a scratch prefix, builds examples/cpp against it with find_package(kiln), and
# runs the example twice: the first run compiles, the second is a persistent-cache hit.
set -euo pipefail
build_dir=$1
source_dir=$2
example_link_flags=${3:-}  # -fsanitize=... when libkiln is a sanitizer build
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cmake --install "$build_dir" --prefix "$work/prefix" > /dev/null
cmake -S "$source_dir/examples/cpp" -B "$work/example" -G Ninja -DCMAKE_PREFIX_PATH="$work/prefix" \
  -DCMAKE_EXE_LINKER_FLAGS="$example_link_flags" > /dev/null
ninja -C "$work/example" > /dev/null
export KILN_CACHE_DIR="$work/cache"
first=$("$work/example/run_cached" "$source_dir/examples/mlp.mlir" main)
second=$("$work/example/run_cached" "$source_dir/examples/mlp.mlir" main)
echo "$first"
echo "$second"
[ "$first" = "cache miss, 1 result(s); first value 8321" ]
[ "$second" = "cache hit, 1 result(s); first value 8321" ]
