#!/usr/bin/env bash
# Accuracy of the training-step rules (ML102, ML104, ML105, ML106) on
# training code: eleven public repositories full of training loops, pinned
# to the commits reviewed in docs/accuracy.md. Prints, per repository, the
# number of Python files, of files with both `.backward(` and `.step(`, and
# the findings per rule, then every finding (concise) for review.
#
#   scripts/accuracy-training.sh                      # clones into /tmp/memlint-accuracy/training
#   ACCURACY_DIR=/data/acc scripts/accuracy-training.sh
#   TREES=/data/trees scripts/accuracy-training.sh    # trees already there, as TREES/<owner>+<name>
#
# Cloning needs git and access to github.com; each repository is fetched at
# its commit only (depth 1) and kept for later runs.
set -euo pipefail
cd "$(dirname "$0")/.."
RULES="${RULES:-ML102,ML104,ML105,ML106}"
TREES="${TREES:-${ACCURACY_DIR:-/tmp/memlint-accuracy}/training}"
REPOS="
pytorch/examples@77f55b912142e11fcfdf5b530231fb9c52f181e8
karpathy/nanoGPT@3adf61e154c3fe3fca428ad6bc3818b27a3b8291
huggingface/pytorch-image-models@aa4b5850c1543fa488abf260f18390eda46cf85d
eriklindernoren/PyTorch-GAN@36d3c77e5ff20ebe0aeefd322326a134a279b93e
ultralytics/yolov5@5081342f04fb287fc2e5f2b5a4e06752b7937b1c
facebookresearch/mae@efb2a8062c206524e35e47d04501ed4f544c0ae8
microsoft/Swin-Transformer@f82860bfb5225915aca09c3227159ee9e1df874d
lucidrains/denoising-diffusion-pytorch@faed4db28e724735323fa91c70aa9b28a6e1cbac
facebookresearch/detr@29901c51d7fe8712168b8d0d64351170bc0f83e0
yunjey/pytorch-tutorial@0500d3df5a2a8080ccfccbc00aca0eacc21818db
huggingface/accelerate@16cb6eb80dd9aa8b4df1a63ef57863e455d53b83
"
mkdir -p "$TREES"
cargo build --release -q -p memlint
MEMLINT="$PWD/target/release/memlint"

printf '%-42s %6s %12s  %s\n' "repository" "files" "train files" "findings per rule"
all=""
for spec in $REPOS; do
    repo="${spec%@*}"
    commit="${spec#*@}"
    dir="$TREES/${repo/\//+}"
    if [ ! -d "$dir" ]; then
        git init -q "$dir"
        git -C "$dir" fetch -q --depth 1 "https://github.com/$repo" "$commit"
        git -C "$dir" checkout -q FETCH_HEAD
    fi
    files=$(find "$dir" -name '*.py' -not -path '*/.git/*' | wc -l)
    train=$(grep -rl --include='*.py' '\.backward(' "$dir" | xargs -r grep -l '\.step(' | wc -l)
    json=$("$MEMLINT" check "$dir" --select "$RULES" --format json --exit-zero --quiet)
    counts=$(printf '%s' "$json" | python3 -c 'import collections, json, sys
c = collections.Counter(d["code"] for d in json.load(sys.stdin)["diagnostics"])
print(", ".join(f"{k} {v}" for k, v in sorted(c.items())) or "none")')
    printf '%-42s %6s %12s  %s\n' "$repo" "$files" "$train" "$counts"
    all+=$("$MEMLINT" check "$dir" --select "$RULES" --format concise --exit-zero --quiet | sed "s#^$TREES/##")$'\n'
done
printf '\n%s' "$all" | sed '/^$/d'
