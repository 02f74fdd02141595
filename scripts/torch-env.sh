# shellcheck shell=bash
# Source this file (`. scripts/torch-env.sh`) before building or testing memprobe.
#
# It makes sure a Python virtual environment with torch==2.11.0 exists (default:
# <repo>/.venv, override with MEMPROBE_VENV=/path), creating it and installing
# torch from PyPI when torch is missing, and exports what tch's build script
# needs to link against that torch (LIBTORCH_USE_PYTORCH=1, VIRTUAL_ENV, PATH).
# Idempotent: a second source with torch present does no network work.
# The install is about 4 GB (torch pulls the CUDA runtime wheels, which
# libtorch_cpu.so needs even on a CPU-only machine) and takes a minute or two.
# pip keeps no copy of the downloaded wheels (--no-cache-dir): that would be
# gigabytes more on the same disk. triton (about 0.6 GB), torch's compiler
# for GPU kernels, is removed again: nothing here compiles with torch
# (memprobe runs eager steps through libtorch; the fixtures run eagerly).

_memprobe_torch_env() {
    local here repo venv want
    here="$(cd "$(dirname "${BASH_SOURCE[0]:-$0}")" && pwd)" || return 1
    repo="$(cd "$here/.." && pwd)" || return 1
    venv="${MEMPROBE_VENV:-$repo/.venv}"
    want="${MEMPROBE_TORCH_VERSION:-2.11.0}"

    if [ ! -x "$venv/bin/python" ]; then
        echo "torch-env: creating virtual environment at $venv" >&2
        python3 -m venv "$venv" || { echo "torch-env: python3 -m venv failed (install python3-venv)" >&2; return 1; }
    fi
    # Compare the installed version (without the +cuXXX local tag) to the pin.
    local have
    have="$("$venv/bin/python" -c 'import torch; print(torch.__version__.split("+")[0])' 2>/dev/null)"
    if [ "$have" != "$want" ]; then
        echo "torch-env: installing torch==$want into $venv (about 4 GB, a few minutes)" >&2
        "$venv/bin/python" -m pip install --quiet --disable-pip-version-check --upgrade pip >&2 || return 1
        "$venv/bin/python" -m pip install --quiet --disable-pip-version-check --progress-bar off --no-cache-dir "torch==$want" >&2 \
            || { echo "torch-env: pip install torch==$want failed" >&2; return 1; }
        "$venv/bin/python" -m pip uninstall --quiet --disable-pip-version-check --yes triton >&2 2>/dev/null || true
        echo "torch-env: torch $want installed" >&2
    fi
    export VIRTUAL_ENV="$venv"
    case ":$PATH:" in
        *":$venv/bin:"*) ;;
        *) export PATH="$venv/bin:$PATH" ;;
    esac
    export LIBTORCH_USE_PYTORCH=1
    # Let scripts and tests find the same interpreter without relying on PATH order.
    export MEMPROBE_PYTHON="$venv/bin/python"
}

_memprobe_torch_env
_memprobe_torch_env_rc=$?
unset -f _memprobe_torch_env
if [ "$_memprobe_torch_env_rc" -ne 0 ]; then
    unset _memprobe_torch_env_rc
    return 1 2>/dev/null || exit 1
fi
unset _memprobe_torch_env_rc
