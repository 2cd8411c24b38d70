#!/usr/bin/env bash
# The nightly-size differential run of the cache-key fuzzer (CI runs 3000 mutations):
#   bash scripts/fuzz_keys.sh [MUTATIONS] [SEED]
set -euo pipefail
cd "$(dirname "$0")/.."
[ -x build/bin/kiln_key_fuzz ] || bash scripts/setup.sh
build/bin/kiln_key_fuzz --mutations "${1:-100000}" --seed "${2:-20261202}" \
  tests/programs/*.mlir tests/programs/runner/*.mlir tests/programs/model_shaped/*.mlir \
  examples/*.mlir
