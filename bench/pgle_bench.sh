#!/usr/bin/env bash
# The PGLE benchmarks of docs/BENCHMARKS.md: each model REPEAT times (default 3), one line each.
#   bash bench/pgle_bench.sh [BUILD_DIR] [REPEAT]
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
build="${1:-$here/../build}"
repeat="${2:-3}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
python3 "$here/make_attention_model.py" "$work/encoder_block.mlir"
python3 "$here/make_light_model.py" "$work/light.mlir"
run() {  # MODEL LEVEL
  for _ in $(seq "$repeat"); do
    "$build/bin/kiln_pgle_bench" "$1" --level "$2" | grep -E "^(model|compile|run|speed-up)"
  done
}
echo "== contraction-heavy: a serving MLP (batch 5, 784-1000-500-10) at O2"
run "$here/models/serve_mlp.mlir" O2
echo "== contraction-heavy: a ViT-S encoder block (197 tokens, width 384, 6 heads) at O2"
run "$work/encoder_block.mlir" O2
echo "== many light kernels: 4 heavy layers + 60 small side layers at O3"
run "$work/light.mlir" O3
