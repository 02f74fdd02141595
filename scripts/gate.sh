#!/usr/bin/env bash
# The findings gate: every rule (`--select ALL`) on the fixtures, the
# examples and the pinned corpora of docs/accuracy.md, as sorted JSON lines,
# compared with the committed baseline in tests/gate/. A change of the
# semantic model that must not change findings keeps the diff empty; one
# that changes findings on purpose shows each change here, to be reviewed
# and named in its commit, then recorded with --bless.
#
#   scripts/gate.sh             # compare; exit 1 and print the differences when any
#   scripts/gate.sh --bless     # write the current findings as the baseline
#   GATE_SETS="fixtures examples" scripts/gate.sh   # only some sets (no download)
#
# The corpora are sdists from PyPI, downloaded once into $GATE_DIR
# (default: ${TMPDIR:-/tmp}/memlint-gate).
set -euo pipefail
cd "$(dirname "$0")/.."
BLESS=0
[ "${1:-}" = "--bless" ] && BLESS=1
SETS="${GATE_SETS:-fixtures examples timm==1.0.31 transformers==4.57.1 lightning==2.6.6 accelerate==1.16.0}"
WORK="${GATE_DIR:-${TMPDIR:-/tmp}/memlint-gate}"
BASE="tests/gate"
mkdir -p "$WORK" "$BASE"

cargo build --release -q -p memlint
MEMLINT="$PWD/target/release/memlint"

fetch() { # spec -> extracted root directory
    local spec="$1" dir="$WORK/src/$1"
    if [ ! -d "$dir" ]; then
        mkdir -p "$dir"
        python3 -m pip download -q --disable-pip-version-check --no-deps --no-binary :all: "$spec" -d "$dir" >&2
        tar -xzf "$dir"/*.tar.gz -C "$dir"
    fi
    find "$dir" -mindepth 1 -maxdepth 1 -type d | head -n 1
}

# findings DIR PATH... -> sorted, normalised JSON lines on stdout (paths as
# memlint prints them when run in DIR; `name` and `help` follow from the code
# and are left out).
findings() {
    local dir="$1"
    shift
    (cd "$dir" && "$MEMLINT" check "$@" --select ALL --format json-lines --exit-zero --quiet) |
        python3 -c '
import json, sys
rows = [json.loads(l) for l in sys.stdin if l.strip()]
for r in rows:
    r.pop("name", None); r.pop("help", None)
rows.sort(key=lambda r: (r["path"], r["line"], r["column"], r["code"], r["message"]))
for r in rows:
    print(json.dumps(r, sort_keys=True, ensure_ascii=False))
'
}

status=0
for set in $SETS; do
    case "$set" in
        fixtures) out=$(findings . fixtures/python fixtures/rust fixtures/notebooks fixtures/fix) ;;
        examples) out=$(findings . examples) ;;
        *) root=$(fetch "$set"); out=$(findings "$root" .) ;;
    esac
    name="${set%%==*}"
    file="$BASE/$name.jsonl"
    if [ "$BLESS" = 1 ]; then
        printf '%s\n' "$out" | sed '/^$/d' > "$file"
        echo "gate: $name: $(grep -c . "$file" || true) findings recorded in $file"
        continue
    fi
    if [ ! -f "$file" ]; then
        echo "gate: $name: no baseline ($file); record one with --bless" >&2
        status=1
        continue
    fi
    if diff -u "$file" <(printf '%s\n' "$out" | sed '/^$/d') > "$WORK/$name.diff"; then
        echo "gate: $name: unchanged ($(grep -c . "$file" || true) findings)"
    else
        status=1
        added=$(grep -c '^+{' "$WORK/$name.diff" || true)
        removed=$(grep -c '^-{' "$WORK/$name.diff" || true)
        echo "gate: $name: CHANGED: $added added, $removed removed (diff in $WORK/$name.diff)"
        grep '^[-+]{' "$WORK/$name.diff" | python3 -c '
import collections, json, sys
count = collections.Counter()
for l in sys.stdin:
    count[(l[0], json.loads(l[1:])["code"])] += 1
for (sign, code), n in sorted(count.items()):
    print(f"  {sign}{n} {code}")
'
    fi
done
exit "$status"
