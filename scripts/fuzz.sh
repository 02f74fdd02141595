#!/usr/bin/env bash
# Fuzzes memlint's per-file entry points with cargo fuzz (libFuzzer):
#   python    Python source through every rule, every output format and the fix loop
#   notebook  notebook JSON through the same
# (fuzz/src/lib.rs says what each input must satisfy.) The corpora are
# seeded with the fixtures, the examples and the saved regression inputs.
#
# Usage: scripts/fuzz.sh [SECONDS_PER_TARGET] [TARGET...]
#   default: 1800 seconds for each of python and notebook, one after the other.
# Needs a nightly toolchain and cargo-fuzz (both installed here when missing).
#
# A crash or a slow input (over 20 s) is written to fuzz/artifacts/TARGET/.
# Keep it: copy it into fuzz/regressions/TARGET/ with a name that says
# what it broke, fix the defect, and `cargo test -p tests --test
# fuzz_regressions` replays it on every test run (on stable, no fuzzer).
set -euo pipefail
cd "$(dirname "$0")/.."
secs="${1:-1800}"
shift || true
targets=("$@")
[ "${#targets[@]}" -gt 0 ] || targets=(python notebook)

rustup toolchain list | grep -q '^nightly' || rustup toolchain install nightly --profile minimal
command -v cargo-fuzz >/dev/null || cargo install cargo-fuzz --locked

for t in "${targets[@]}"; do
    case "$t" in
        python) seeds=(fixtures/python fixtures/fix examples); pattern='*.py' ;;
        notebook) seeds=(fixtures/notebooks); pattern='*.ipynb' ;;
        *) echo "fuzz.sh: unknown target $t (python, notebook)" >&2; exit 2 ;;
    esac
    corpus="fuzz/corpus/$t"
    mkdir -p "$corpus"
    find "${seeds[@]}" -type f -name "$pattern" -exec cp -n {} "$corpus/" \;
    find "fuzz/regressions/$t" -type f ! -name README.md -exec cp -n {} "$corpus/" \; 2>/dev/null || true
    echo "fuzz.sh: $t for $secs s, corpus $(find "$corpus" -type f | wc -l) inputs" >&2
    (cd fuzz && cargo +nightly fuzz run -s none "$t" "corpus/$t" -- \
        -max_total_time="$secs" -timeout=20 -rss_limit_mb=4096 -max_len=131072 -print_final_stats=1)
done
