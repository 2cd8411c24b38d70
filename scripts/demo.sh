#!/usr/bin/env bash
# kiln's main job on the bundled example: compile an MLIR program and run it, then run it again
# from the persistent cache (no compile), then run a serialised executable file.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
kiln=build/bin/kiln
example=examples/mlp.mlir
work=$(mktemp -d)
export KILN_CACHE_DIR="$work/cache"
echo "== kiln run $example   (first run: compiles, stores in $KILN_CACHE_DIR)"
$kiln run "$example"
echo "== kiln run $example   (second run: a cache hit, nothing compiled)"
$kiln run "$example"
echo "== kiln cache stats"
$kiln cache stats
echo "== kiln compile $example -o mlp.kx; kiln run mlp.kx   (ahead-of-time file)"
$kiln compile "$example" -o "$work/mlp.kx"
$kiln run "$work/mlp.kx"
rm -rf "$work"
