#!/usr/bin/env bash
# Installs kiln's build dependencies (Debian 12 packages only) and builds kiln into build/.
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(
  build-essential cmake ninja-build pkg-config binutils python3 strace
  llvm-22-dev libmlir-22-dev mlir-22-tools lld-22
  libzstd-dev nettle-dev libxxhash-dev libhiredis-dev redis-server
  libcli11-dev nlohmann-json3-dev libspdlog-dev
  libgtest-dev libgmock-dev libbenchmark-dev libopenblas-dev
  libonnx-dev libprotobuf-dev protobuf-compiler libonnx-testdata
  python3-numpy python3-onnx python3-torch python3-torchvision
  python3-dev pybind11-dev python3-pytest python3-pip
)
missing=()
for p in "${packages[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "installing: ${missing[*]}"
  sudo_cmd=""
  [ "$(id -u)" -ne 0 ] && sudo_cmd="sudo"
  $sudo_cmd apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq "${missing[@]}"
fi

cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo
ninja -C build -j2
