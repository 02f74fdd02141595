#!/usr/bin/env bash
# GPU validation of memprobe in one short run.
#
#   scripts/gpu-check.sh build   # here (no GPU needed): release memprobe and
#                                # memprobe-worker + GPU test binary, stripped,
#                                # into target/gpu-carry/
#   scripts/gpu-check.sh run     # on a machine with an NVIDIA GPU, from the repo
#                                # root, with target/gpu-carry copied over: the
#                                # ignored GPU tests, `memprobe run --torch` and
#                                # `memprobe ab` (AMP off/on) of a small PyTorch
#                                # training script, `memprobe bench --device cuda
#                                # --all` on convnet, mlp and transformer; reports
#                                # under docs/results/<date>-<gpu>/, and when OUT
#                                # names a directory, packed into
#                                # $OUT/gpu-results.tar.gz after each stage
#
# `run` takes the stages to run (default all: tests job fix bench); `fix` is
# `memprobe ab --fix ML202` on a CUDA script that keeps a validation loss's graph.
# MEMPROBE_GPU_RUNS (default 4) and MEMPROBE_GPU_SIZE (default medium) size it.
# Unpack the archive in the repo root and commit docs/results/.
#
# The binaries have an rpath to this machine's venv; on the GPU machine the
# torch 2.11 libraries are found through the local python's torch (or
# MEMPROBE_TORCH_LIB) and LD_LIBRARY_PATH, which takes precedence over RUNPATH.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"
carry="$repo/target/gpu-carry"

build() {
    # shellcheck source=scripts/torch-env.sh
    . scripts/torch-env.sh
    local target="${CARGO_TARGET_DIR:-$repo/target}"
    cargo build --release -q -p memprobe -p memprobe_worker
    local test_bin
    test_bin="$(cargo test --release -q -p tests --test probe_gpu --no-run --message-format=json 2>/dev/null \
        | python3 -c 'import json,sys
for l in sys.stdin:
    m = json.loads(l)
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m["target"]["name"] == "probe_gpu":
        print(m["executable"])' | tail -1)"
    [ -n "$test_bin" ] || { echo "gpu-check: could not find the gpu test binary" >&2; exit 1; }
    rm -rf "$carry" && mkdir -p "$carry"
    cp "$target/release/memprobe" "$carry/memprobe"
    cp "$target/release/memprobe-worker" "$carry/memprobe-worker"
    cp "$test_bin" "$carry/gpu-tests"
    strip "$carry/memprobe" "$carry/memprobe-worker" "$carry/gpu-tests"
    du -sh "$carry"/*
}

torch_lib() {
    if [ -n "${MEMPROBE_TORCH_LIB:-}" ]; then echo "$MEMPROBE_TORCH_LIB"; return; fi
    local py
    for py in "$repo/.venv/bin/python" python3 python; do
        if command -v "$py" >/dev/null 2>&1; then
            "$py" -c 'import os, torch; print(os.path.join(os.path.dirname(torch.__file__), "lib"))' 2>/dev/null && return
        fi
    done
    return 1
}

run() {
    [ -x "$carry/memprobe" ] || { echo "gpu-check: $carry/memprobe missing: run 'scripts/gpu-check.sh build' here and carry target/gpu-carry" >&2; exit 1; }
    local lib
    lib="$(torch_lib)" || { echo "gpu-check: no torch found on this machine (set MEMPROBE_TORCH_LIB)" >&2; exit 1; }
    export LD_LIBRARY_PATH="$lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv || true
    local gpu day dir
    gpu="$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1 | tr ' ' '-' | tr -cd 'A-Za-z0-9-')"
    day="$(date -u +%Y-%m-%d)"
    dir="docs/results/${day}-${gpu:-gpu}"
    mkdir -p "$dir"
    local status=0 w py tmp stages="${*:-tests job fix bench}"
    want() { case " $stages " in *" $1 "*) return 0 ;; *) return 1 ;; esac; }
    # The archive is rewritten after each stage, so a run stopped at a time
    # limit still hands back what finished.
    save() { if [ -n "${OUT:-}" ]; then tar -czf "$OUT/gpu-results.tar.gz" "$dir"; fi; }
    {
        echo "worker: $("$carry/memprobe-worker" --version 2>&1)"
        echo "python3: $(command -v python3) $(python3 -c 'import torch; print(torch.__version__, torch.cuda.is_available())' 2>/dev/null)"
        echo "smaps_rollup: $(test -r /proc/self/smaps_rollup && echo readable || echo missing)"
        echo "clear_refs: $(test -w /proc/self/clear_refs && echo writable || echo not writable)"
    } | tee "$dir/machine.txt"
    if want tests; then
        echo "== ignored GPU tests" >&2
        MEMPROBE_BIN="$carry/memprobe" MEMPROBE_PYTHON="$(command -v python3)" "$carry/gpu-tests" --ignored --test-threads 1 2>&1 \
            | tee "$dir/gpu-tests.txt" || status=1
        save
    fi
    # Your-own-job paths: `run --torch` on a small PyTorch training script, and
    # `ab` of that script without and with AMP.
    py="$(command -v python3 || command -v python)"
    tmp="$(mktemp -d)"
    cat >"$tmp/train.py" <<'PY'
import sys, torch, torch.nn as nn
amp = "--amp" in sys.argv
dev = "cuda"
model = nn.Sequential(nn.Linear(4096, 8192), nn.GELU(), nn.Linear(8192, 8192), nn.GELU(), nn.Linear(8192, 1000)).to(dev)
opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
x, y = torch.randn(4096, 4096, device=dev), torch.randint(0, 1000, (4096,), device=dev)
for _ in range(60):
    opt.zero_grad(set_to_none=True)
    with torch.autocast(dev, dtype=torch.bfloat16, enabled=amp):
        loss = nn.functional.cross_entropy(model(x), y)
    loss.backward()
    opt.step()
torch.cuda.synchronize()
print(f"loss {loss.item():.4f} peak allocated {torch.cuda.max_memory_allocated() / 2**20:.0f} MiB")
PY
    if want job; then
        echo "== memprobe run --torch" >&2
        "$carry/memprobe" run --torch --json "$dir/run-torch.json" --svg "$dir/run-torch.svg" --markdown "$dir/run-torch.md" \
            -- "$py" "$tmp/train.py" 2>&1 | tee "$dir/run-torch.txt" || status=1
        save
        echo "== memprobe ab: without vs with AMP" >&2
        "$carry/memprobe" ab --runs "${MEMPROBE_GPU_RUNS:-4}" --json "$dir/ab-amp.json" --markdown "$dir/ab-amp.md" \
            -- "$py" "$tmp/train.py" --- "$py" "$tmp/train.py" --amp 2>&1 | tee "$dir/ab-amp.txt" || status=1
        save
    fi
    # What memlint's ML202 fix buys on CUDA: a validation loss summed with
    # its graph each step, A as it is, B on a fixed copy of its project.
    if want fix; then
        mkdir -p "$tmp/project" && touch "$tmp/project/pyproject.toml"
        cat >"$tmp/project/train.py" <<'PY'
import torch, torch.nn as nn
torch.manual_seed(0)
dev = "cuda"
model = nn.Sequential(nn.Linear(1024, 8192), nn.ReLU(), nn.Linear(8192, 1000)).to(dev)
opt = torch.optim.SGD(model.parameters(), lr=1e-3)
x, y = torch.randn(1024, 1024, device=dev), torch.randint(0, 1000, (1024,), device=dev)
xv, yv = torch.randn(4096, 1024, device=dev), torch.randint(0, 1000, (4096,), device=dev)
val_total = 0.0
for step in range(40):
    opt.zero_grad(set_to_none=True)
    loss = nn.functional.cross_entropy(model(x), y)
    loss.backward()
    opt.step()
    val_loss = nn.functional.cross_entropy(model(xv), yv)
    val_total += val_loss
print(float(val_total) / 40)
PY
        echo "== memprobe ab --fix ML202" >&2
        (cd "$tmp/project" && "$carry/memprobe" ab --fix ML202 --runs "${MEMPROBE_GPU_RUNS:-4}" --json "$OLDPWD/$dir/ab-fix-ml202.json" \
            --markdown "$OLDPWD/$dir/ab-fix-ml202.md" -- "$py" train.py) 2>&1 | grep -v '^memprobe ab: [AB] run' \
            | tee "$dir/ab-fix-ml202.txt" || status=1
        save
    fi
    want bench || exit "$status"
    for w in convnet mlp transformer; do
        echo "== memprobe bench --device cuda --all --workload $w" >&2
        "$carry/memprobe" bench --device cuda --all --workload "$w" --size "${MEMPROBE_GPU_SIZE:-medium}" \
            --runs "${MEMPROBE_GPU_RUNS:-4}" --warmup 3 --steps 10 --quiet \
            --json "$dir/bench-$w.json" --markdown "$dir/bench-$w.md" | tee "$dir/bench-$w.txt" || status=1
        save
    done
    exit "$status"
}

case "${1:-}" in
    build) build ;;
    run) shift; run "$@" ;;
    *) echo "usage: $0 build | run [tests] [job] [fix] [bench]" >&2; exit 2 ;;
esac
