#!/usr/bin/env bash
# Benchmark (not a test): memprobe's baseline training step vs the same model
# and batch in PyTorch eager, on this machine, in one run. Prints the ratio.
#   scripts/bench-vs-pytorch.sh [mlp|transformer] [extra args for the .py]
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"
# shellcheck source=scripts/torch-env.sh
. scripts/torch-env.sh
target="${CARGO_TARGET_DIR:-$repo/target}"
cargo build --release -q -p memprobe -p memprobe_worker
workload="${1:-mlp}"
shift || true
exec "$VIRTUAL_ENV/bin/python" scripts/bench-vs-pytorch.py --memprobe "$target/release/memprobe" --workload "$workload" "$@"
