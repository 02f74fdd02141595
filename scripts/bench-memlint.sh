#!/usr/bin/env bash
# Benchmark: wall time of `memlint check` over real PyTorch code bases from
# PyPI, next to ruff's default rules over the same files, in one run (compare
# the ratio, not the absolute times: machines here are shared and noisy).
#
#   scripts/bench-memlint.sh            # timm and transformers sdists, 5 runs each
#   RUNS=10 CORPORA="timm==1.0.31" scripts/bench-memlint.sh
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS="${RUNS:-5}"
CORPORA="${CORPORA:-timm==1.0.31 transformers==4.57.1}"
WORK="${BENCH_DIR:-${TMPDIR:-/tmp}/memlint-bench}"
mkdir -p "$WORK"

cargo build --release -q -p memlint
MEMLINT="$PWD/target/release/memlint"

if [ ! -x "$WORK/venv/bin/ruff" ]; then
    python3 -m venv "$WORK/venv"
    "$WORK/venv/bin/pip" install -q --disable-pip-version-check ruff
fi
RUFF="$WORK/venv/bin/ruff"

time_runs() { # command... -> median wall seconds over $RUNS runs
    python3 - "$RUNS" "$@" <<'PY'
import statistics, subprocess, sys, time
runs, cmd = int(sys.argv[1]), sys.argv[2:]
times = []
for _ in range(runs):
    t0 = time.perf_counter()
    subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    times.append(time.perf_counter() - t0)
print(f"{statistics.median(times):.3f}")
PY
}

printf '%-22s %7s %10s %12s %12s %7s\n' corpus files MB memlint_s ruff_s ratio
for spec in $CORPORA; do
    name="${spec%%==*}"
    dir="$WORK/src/$spec"
    if [ ! -d "$dir" ]; then
        mkdir -p "$dir"
        "$WORK/venv/bin/pip" download -q --disable-pip-version-check --no-deps --no-binary :all: "$spec" -d "$dir"
        tar -xzf "$dir"/*.tar.gz -C "$dir"
    fi
    root=$(find "$dir" -mindepth 1 -maxdepth 1 -type d | head -n 1)
    files=$(find "$root" -name '*.py' | wc -l)
    mb=$(find "$root" -name '*.py' -print0 | xargs -0 cat | wc -c | awk '{printf "%.1f", $1/1e6}')
    # Warm the page cache once.
    "$MEMLINT" check "$root" --exit-zero -q > /dev/null 2>&1 || true
    m=$(time_runs "$MEMLINT" check "$root" --exit-zero --format concise)
    r=$(time_runs "$RUFF" check "$root" --exit-zero --no-cache --quiet)
    printf '%-22s %7d %10s %12.3f %12.3f %7.2f\n' "$spec" "$files" "$mb" "$m" "$r" "$(python3 -c "print($m / $r)")"
done
echo "memlint: all default rules; ruff: its default rules (E4, E7, E9, F), --no-cache; $RUNS runs, median wall time"
"$MEMLINT" check "$root" --format json --exit-zero | python3 -c 'import json,sys; d=json.load(sys.stdin); print("findings in", sys.argv[1], d["summary"]["by_code"])' "$spec"
