#!/usr/bin/env bash
# kiln's main job on the bundled example: compile an MLIR program, run it, run it again from the
# compiled artefact without compiling.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
kiln=build/bin/kiln
example=examples/mlp.mlir
work=$(mktemp -d)
echo "== kiln run $example (compiles, then runs)"
$kiln run "$example" --fill random
echo "== kiln compile $example -o mlp.kx"
$kiln compile "$example" -o "$work/mlp.kx"
echo "== kiln run mlp.kx (no compile: loads the native code and runs)"
$kiln run "$work/mlp.kx" --fill random
rm -rf "$work"
