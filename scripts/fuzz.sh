#!/usr/bin/env bash
# Builds kiln's libFuzzer targets (clang-22, ASan+UBSan, into build-fuzz/) and runs each for
# SECONDS (default 30), seeded from real artefacts: the repository's MLIR programs, and the
# .npy outputs, cache entries, bundle, .kx and PGLE profile that the real `kiln` writes for them.
# Exits non-zero on any crash, leak, hang or sanitizer report; prints executions per target.
# Usage: bash scripts/fuzz.sh [SECONDS]   (CI runs a short one; nightly: bash scripts/fuzz.sh 3600)
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${1:-30}"
root="$PWD"

need=()
for p in clang-22 libclang-rt-22-dev; do dpkg -s "$p" >/dev/null 2>&1 || need+=("$p"); done
if [ ${#need[@]} -gt 0 ]; then
  sudo_cmd=""
  [ "$(id -u)" -ne 0 ] && sudo_cmd="sudo"
  $sudo_cmd apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq "${need[@]}"
fi
[ -x build/bin/kiln ] || bash scripts/setup.sh

cmake -S . -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_C_COMPILER=clang-22 \
  -DCMAKE_CXX_COMPILER=clang++-22 -DKILN_FUZZ=ON -DKILN_BUILD_TESTS=OFF \
  -DKILN_BUILD_BENCHMARKS=OFF >/dev/null
ninja -C build-fuzz -j2 kiln_fuzzers

# Seeds from the real tool.
seeds="$root/build-fuzz/seeds"
rm -rf "$seeds" && mkdir -p "$seeds"/{npy,cache_entry,bundle,executable,mlir_text,fdo_profile,onnx_model}
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
kiln="$root/build/bin/kiln"
find tests/programs examples -name '*.mlir' -size -64k -exec cp {} "$seeds/mlir_text/" \;
for program in examples/mlp.mlir tests/programs/batch_matmul_i32.mlir tests/programs/scalars.mlir \
  tests/programs/pgle_mlp.mlir; do
  name="$(basename "$program" .mlir)"
  "$kiln" --cache-dir "$work/cache" run "$program" --output "$seeds/npy/$name.npy" >/dev/null 2>&1 ||
    "$kiln" --cache-dir "$work/cache" run "$program" >/dev/null
  "$kiln" compile "$program" -O O1 -o "$seeds/executable/$name.kx" >/dev/null
done
"$kiln" --cache-dir "$work/cache" run tests/programs/pgle_mlp.mlir --pgle >/dev/null
find "$work/cache" -name '*.kprof' -exec cp {} "$seeds/fdo_profile/" \;
for entry in "$work"/cache/entries/*.kce; do
  key="$(basename "$entry" .kce)"
  { printf '%s\n' "$key"; cat "$entry"; } >"$seeds/cache_entry/$key"
done
# ONNX: small models of the backend tests (libonnx-testdata) and their TensorProto inputs.
for test in /usr/share/libonnx-testdata/data/node/test_{conv_with_strides_padding,gemm_default_matrix_bias,reshape_reordered_all_dims,slice,softmax_axis_0,maxpool_2d_pads,concat_2d_axis_0,gather_0,layer_normalization_2d_axis0,where_example}; do
  [ -f "$test/model.onnx" ] || continue
  cp "$test/model.onnx" "$seeds/onnx_model/$(basename "$test").onnx"
  cp "$test/test_data_set_0/input_0.pb" "$seeds/onnx_model/$(basename "$test")_input_0.pb"
done
"$kiln" --cache-dir "$work/cache" cache export "$seeds/bundle/unsigned.kcb" >/dev/null
KILN_REMOTE_CACHE_SECRET=fuzz-secret "$kiln" --cache-dir "$work/cache" cache export \
  "$seeds/bundle/signed.kcb" >/dev/null

status=0
printf '%-20s %8s %12s %8s\n' target seconds executions corpus
for target in npy cache_entry bundle executable mlir_text fdo_profile onnx_model; do
  corpus="$root/build-fuzz/corpus/$target"
  mkdir -p "$corpus"
  log="$work/$target.log"
  if ! (cd "$work" && "$root/build-fuzz/bin/fuzz_$target" -max_total_time="$seconds" \
    -timeout=10 -rss_limit_mb=2048 -max_len=1048576 -print_final_stats=1 \
    "$corpus" "$seeds/$target" >"$log" 2>&1); then
    echo "fuzz_$target FAILED: see below"
    tail -40 "$log"
    cp "$work"/crash-* "$work"/timeout-* "$work"/leak-* "$work"/oom-* "$root/build-fuzz/" 2>/dev/null || true
    status=1
    continue
  fi
  execs="$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")"
  units="$(ls "$corpus" | wc -l)"
  printf '%-20s %8s %12s %8s\n' "fuzz_$target" "$seconds" "$execs" "$units"
done
[ "$status" -eq 0 ] && echo "fuzz: all targets clean (0 crashes)"
exit "$status"
