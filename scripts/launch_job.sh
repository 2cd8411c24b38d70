#!/usr/bin/env bash
# Demo: N local processes of one job run the same program with compile sharing on. A private
# redis-server on a loopback port coordinates them; exactly one process compiles.
#   scripts/launch_job.sh [N] [FILE.mlir]
set -euo pipefail
cd "$(dirname "$0")/.."
n=${1:-4}
file=${2:-examples/mlp.mlir}
kiln=build/bin/kiln
port=$(( 20000 + RANDOM % 20000 ))
work=$(mktemp -d)
redis-server --port "$port" --bind 127.0.0.1 --save "" --appendonly no > "$work/redis.log" 2>&1 &
redis_pid=$!
trap 'kill $redis_pid 2>/dev/null; rm -rf "$work"' EXIT
for _ in $(seq 50); do redis-cli -p "$port" ping > /dev/null 2>&1 && break; sleep 0.1; done
for i in $(seq 0 $((n - 1))); do
  KILN_CACHE_DIR="$work/cache$i" KILN_SHARE_BINARY_BETWEEN_HOSTS=true \
    "$kiln" run "$file" --coordinator "redis://127.0.0.1:$port" --num-processes "$n" \
    --process-id "$i" --job "demo-$$" > "$work/out$i.txt" 2>&1 &
done
wait $(jobs -p | grep -v "^$redis_pid$") 2>/dev/null || true
for i in $(seq 0 $((n - 1))); do
  echo "== process $i"
  cat "$work/out$i.txt"
done
