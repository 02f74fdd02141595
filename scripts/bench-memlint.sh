#!/usr/bin/env bash
# Benchmark: wall time and peak RSS of `memlint check` over real PyTorch code
# bases from PyPI, next to ruff's default rules over the same files
# (`--isolated --no-cache`, so neither tool reads the package's own
# configuration), in one run: compare the ratios, not the absolute times, on a
# shared and noisy machine. Then memlint on 1x, 2x and 4x copies of the last
# corpus, to show that time grows linearly with the corpus (the project index
# joins per-file summaries; nothing is quadratic in the number of files).
#
#   scripts/bench-memlint.sh                   # timm and transformers sdists, 5 runs each
#   RUNS=10 CORPORA="timm==1.0.31" scripts/bench-memlint.sh
#   SCALING=0 scripts/bench-memlint.sh         # skip the 1x/2x/4x part
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS="${RUNS:-5}"
CORPORA="${CORPORA:-timm==1.0.31 transformers==4.57.1}"
SCALING="${SCALING:-1}"
WORK="${BENCH_DIR:-${TMPDIR:-/tmp}/memlint-bench}"
mkdir -p "$WORK"

cargo build --release -q -p memlint
MEMLINT="$PWD/target/release/memlint"

if [ ! -x "$WORK/venv/bin/ruff" ]; then
    python3 -m venv "$WORK/venv"
    "$WORK/venv/bin/pip" install -q --disable-pip-version-check ruff
fi
RUFF="$WORK/venv/bin/ruff"

# command... -> "median_wall_seconds max_peak_rss_mib" over $RUNS runs; the
# peak RSS of each run comes from wait4's rusage of that child alone.
measure() {
    python3 - "$RUNS" "$@" <<'PY'
import os, statistics, subprocess, sys, time
runs, cmd = int(sys.argv[1]), sys.argv[2:]
times, rss = [], []
for _ in range(runs):
    t0 = time.perf_counter()
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, _, usage = os.wait4(p.pid, 0)
    times.append(time.perf_counter() - t0)
    rss.append(usage.ru_maxrss / 1024)
print(f"{statistics.median(times):.3f} {max(rss):.1f}")
PY
}

fetch() { # spec -> extracted root directory
    local spec="$1" dir="$WORK/src/$1"
    if [ ! -d "$dir" ]; then
        mkdir -p "$dir"
        "$WORK/venv/bin/pip" download -q --disable-pip-version-check --no-deps --no-binary :all: "$spec" -d "$dir"
        tar -xzf "$dir"/*.tar.gz -C "$dir"
    fi
    find "$dir" -mindepth 1 -maxdepth 1 -type d | head -n 1
}

printf '%-22s %6s %6s %10s %10s %10s %10s %7s %7s\n' corpus files MB memlint_s ruff_s memlint_MiB ruff_MiB t_ratio m_ratio
for spec in $CORPORA; do
    root=$(fetch "$spec")
    files=$(find "$root" -name '*.py' | wc -l)
    mb=$(find "$root" -name '*.py' -print0 | xargs -0 cat | wc -c | awk '{printf "%.1f", $1/1e6}')
    # Warm the page cache once.
    "$MEMLINT" check "$root" --exit-zero -q > /dev/null 2>&1 || true
    read -r mt mm < <(measure "$MEMLINT" check "$root" --exit-zero --format concise)
    read -r rt rm < <(measure "$RUFF" check "$root" --isolated --no-cache --exit-zero --quiet)
    printf '%-22s %6d %6s %10.3f %10.3f %10.1f %10.1f %7.2f %7.2f\n' "$spec" "$files" "$mb" "$mt" "$rt" "$mm" "$rm" \
        "$(python3 -c "print($mt / $rt)")" "$(python3 -c "print($mm / $rm)")"
done
echo "memlint: default rules, project index over the whole tree; ruff: default rules (E4, E7, E9, F), --isolated --no-cache; $RUNS runs, median wall time, max peak RSS"

if [ "$SCALING" = "1" ]; then
    echo
    echo "memlint on copies of $spec (same module paths: the index joins all copies as one project):"
    printf '%-8s %8s %10s %10s %10s\n' copies files seconds per_1x MiB
    base=""
    for k in 1 2 4; do
        tree="$WORK/copies-$k"
        if [ ! -d "$tree" ]; then
            mkdir -p "$tree"
            for i in $(seq 1 "$k"); do cp -r "$root" "$tree/copy$i"; done
        fi
        files=$(find "$tree" -name '*.py' | wc -l)
        read -r t m < <(measure "$MEMLINT" check "$tree" --exit-zero --format concise)
        [ -z "$base" ] && base="$t"
        printf '%-8s %8d %10.3f %10.2f %10.1f\n' "${k}x" "$files" "$t" "$(python3 -c "print($t / $base)")" "$m"
    done
fi
"$MEMLINT" check "$root" --format json --exit-zero | python3 -c 'import json,sys; d=json.load(sys.stdin); print("findings in", sys.argv[1], d["summary"]["by_code"])' "$spec"
