#!/usr/bin/env bash
# Regenerates the measured effects shown in memlint's rule docs:
#
#   docs/evidence/measure.sh [RULE...]      # default: every rule measurable here
#
# For each rule it runs the flagged and the fixed scenario of
# docs/evidence/scenarios.py alternately under `memprobe ab`, keeps the A/B
# reports under docs/evidence/raw/, and writes docs/evidence/<RULE>.json (the
# figures, with device, date, torch version and the command) and
# docs/evidence/<RULE>.md (the section rendered into the rule doc). Then it
# regenerates docs/rules/ with `cargo xtask generate`.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$repo"
# shellcheck source=scripts/torch-env.sh
. scripts/torch-env.sh
cargo build --release -q -p memprobe
memprobe="$repo/target/release/memprobe"
py="${MEMPROBE_PYTHON:-python3}"
runs="${EVIDENCE_RUNS:-4}"
mkdir -p docs/evidence/raw

# rule  comparison-name  flagged-variant  fixed-variant  [runs per side]
pairs=(
    "ML201 eval grad nograd 6"
    "ML202 backward graph item"
    "ML202 no-backward no-backward-graph no-backward-item"
    "ML302 workers workers0 workers4"
    "ML305 item item interval"
    "ML308 frozen all trainable"
)
want=("$@")
for p in "${pairs[@]}"; do
    read -r rule name bad good n <<<"$p"
    if [ "${#want[@]}" -gt 0 ] && [[ ! " ${want[*]} " =~ " $rule " ]]; then continue; fi
    echo "== $rule $name: $bad vs $good" >&2
    "$memprobe" ab --runs "${n:-$runs}" --json "docs/evidence/raw/$rule-$name.json" -- \
        "$py" -W ignore docs/evidence/scenarios.py "$rule" "$bad" --- \
        "$py" -W ignore docs/evidence/scenarios.py "$rule" "$good"
done
"$py" docs/evidence/render.py
cargo xtask generate
