#!/usr/bin/env bash
# Accuracy check: lint pinned sdists of real PyTorch code bases from PyPI with
# the default rules, print findings per code base and rule, and write a seeded
# random sample of up to 30 findings per (code base, rule) as review sheets.
#
#   scripts/accuracy.sh                                  # all four code bases
#   ACCURACY_DIR=/data/acc scripts/accuracy.sh           # other cache dir
#   CORPORA="timm==1.0.31" SAMPLE=50 SEED=6 scripts/accuracy.sh
#
# Re-runnable: downloads and extractions are cached under $ACCURACY_DIR; the
# lint output and the review sheets are rewritten on every run.
set -euo pipefail
cd "$(dirname "$0")/.."
REPO="$PWD"
WORK="${ACCURACY_DIR:-/tmp/memlint-accuracy}"
CORPORA="${CORPORA:-timm==1.0.31 transformers==4.57.1 lightning==2.6.6 accelerate==1.16.0}"
SAMPLE="${SAMPLE:-30}"
SEED="${SEED:-6}"
CONTEXT="${CONTEXT:-3}"
mkdir -p "$WORK/src" "$WORK/out" "$WORK/review"

cargo build --release -q -p memlint
MEMLINT="$REPO/target/release/memlint"

for spec in $CORPORA; do
    name="${spec%%==*}"
    dir="$WORK/src/$spec"
    if [ ! -f "$dir/.extracted" ]; then
        mkdir -p "$dir"
        if ! ls "$dir"/*.tar.gz "$dir"/*.zip > /dev/null 2>&1; then
            python3 -m pip download -q --disable-pip-version-check --no-deps --no-binary :all: "$spec" -d "$dir"
        fi
        find "$dir" -mindepth 1 -maxdepth 1 -type d -exec rm -rf {} +
        for a in "$dir"/*.tar.gz "$dir"/*.zip; do
            [ -e "$a" ] || continue
            case "$a" in
                *.tar.gz) tar -xzf "$a" -C "$dir" ;;
                *.zip) python3 -m zipfile -e "$a" "$dir" ;;
            esac
        done
        touch "$dir/.extracted"
    fi
    root=$(find "$dir" -mindepth 1 -maxdepth 1 -type d | sort | head -n 1)
    "$MEMLINT" check "$root" --format json --exit-zero > "$WORK/out/$name.json"
    printf '%s\t%s\n' "$name" "$root" >> "$WORK/out/.roots.tmp"
done
mv "$WORK/out/.roots.tmp" "$WORK/out/roots.tsv"

python3 - "$WORK" "$SAMPLE" "$SEED" "$CONTEXT" <<'PY'
import collections, json, os, random, sys

work, sample_n, seed, ctx = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
roots = [l.rstrip("\n").split("\t") for l in open(os.path.join(work, "out", "roots.tsv"))]
review = os.path.join(work, "review")
for f in os.listdir(review):
    if f.endswith(".md"):
        os.remove(os.path.join(review, f))

def source_lines(path, cache={}):
    if path not in cache:
        try:
            with open(path, encoding="utf-8", errors="replace") as fh:
                cache[path] = fh.read().splitlines()
        except OSError:
            cache[path] = []
    return cache[path]

rows = []
for name, root in roots:
    data = json.load(open(os.path.join(work, "out", name + ".json")))
    by_rule = collections.defaultdict(list)
    for d in data["diagnostics"]:
        by_rule[d["code"]].append(d)
    for code in sorted(by_rule):
        found = sorted(by_rule[code], key=lambda d: (d["path"], d["line"], d["column"]))
        rng = random.Random(seed)
        picked = found if len(found) <= sample_n else sorted(
            rng.sample(found, sample_n), key=lambda d: (d["path"], d["line"], d["column"]))
        rows.append((name, code, len(found), len(picked)))
        sheet = os.path.join(review, f"{name}-{code}.md")
        with open(sheet, "w") as out:
            out.write(f"# {name} {code}: {len(picked)} of {len(found)} findings "
                      f"(random.Random({seed}).sample)\n\n")
            out.write("| # | path | line | verdict | note |\n|---|---|---|---|---|\n")
            for i, d in enumerate(picked, 1):
                rel = os.path.relpath(d["path"], root)
                out.write(f"| {i} | {rel} | {d['line']} | | |\n")
            out.write("\n")
            for i, d in enumerate(picked, 1):
                rel = os.path.relpath(d["path"], root)
                out.write(f"## {i}. {rel}:{d['line']} {d['code']}\n\n{d['message']}\n\n```python\n")
                lines = source_lines(d["path"])
                lo, hi = max(1, d["line"] - ctx), min(len(lines), d["line"] + ctx)
                for n in range(lo, hi + 1):
                    mark = ">>" if n == d["line"] else "  "
                    out.write(f"{mark}{n:6d}  {lines[n - 1]}\n")
                out.write("```\n\n")

print(f"{'codebase':<14} {'rule':<7} {'findings':>8} {'sample':>7}")
for name, code, n, k in rows:
    print(f"{name:<14} {code:<7} {n:>8} {k:>7}")
tot = collections.Counter()
for name, _, n, _ in rows:
    tot[name] += n
for name, _ in roots:
    print(f"{name:<14} {'all':<7} {tot[name]:>8}")
print(f"\nreview sheets: {review}/<codebase>-<rule>.md")
PY

cat <<EOF

Reproduce:
  ACCURACY_DIR=$WORK CORPORA="$CORPORA" SAMPLE=$SAMPLE SEED=$SEED scripts/accuracy.sh
  # or by hand, per code base:
  cargo build --release -p memlint
EOF
for spec in $CORPORA; do
    name="${spec%%==*}"
    root=$(awk -F'\t' -v n="$name" '$1 == n {print $2}' "$WORK/out/roots.tsv")
    echo "  python3 -m pip download --no-deps --no-binary :all: $spec -d $WORK/src/$spec && tar -xzf $WORK/src/$spec/*.tar.gz -C $WORK/src/$spec"
    echo "  target/release/memlint check $root --format json --exit-zero > $WORK/out/$name.json"
done
