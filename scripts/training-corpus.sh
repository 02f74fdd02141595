#!/usr/bin/env bash
# The training-code corpus of docs/accuracy.md: public repositories of
# training scripts, research code, reinforcement learning and course
# notebooks (not libraries), pinned by commit. Fetches each once into
# $CORPUS_DIR (default: ${TMPDIR:-/tmp}/memlint-training), then lints each
# with the default rules and prints the findings per repository and rule.
#
#   scripts/training-corpus.sh                 # fetch (needs git and github.com) and lint
#   SELECT=ML107 scripts/training-corpus.sh    # another selection (here: the info rule)
set -euo pipefail
cd "$(dirname "$0")/.."
DIR="${CORPUS_DIR:-${TMPDIR:-/tmp}/memlint-training}"
SELECT="${SELECT:-}"
mkdir -p "$DIR"

# owner/name commit
REPOS="
pytorch/examples 77f55b912142e11fcfdf5b530231fb9c52f181e8
karpathy/nanoGPT 3adf61e154c3fe3fca428ad6bc3818b27a3b8291
karpathy/minGPT 37baab71b9abea1b76ab957409a1cc2fbfba8a26
vwxyzjn/cleanrl fe8d8a03c41a7ef5b523e2e354bd01c363e786bb
sfujim/TD3 34770ccdcb51df6f6c7d85c1ba7e40d71b940d16
pranz24/pytorch-soft-actor-critic c1805660b3961694be54079a355155a5cad492f5
higgsfield/RL-Adventure-2 277966f7a7a852899a98e989f32b2732646c0704
eriklindernoren/PyTorch-GAN 36d3c77e5ff20ebe0aeefd322326a134a279b93e
martinarjovsky/WassersteinGAN f7a01e82007ea408647c451b9e1c8f1932a3db67
yunjey/pytorch-tutorial 0500d3df5a2a8080ccfccbc00aca0eacc21818db
znxlwm/pytorch-generative-model-collections 0d183bb5ea2fbe069e1c6806c4a9a1fd8e81656f
ikostrikov/pytorch-a2c-ppo-acktr-gail 41332b78dfb50321c29bade65f9d244387f68a60
udacity/deep-learning-v2-pytorch c9404fc86181fc3f0906b368697268257f348535
bentrevett/pytorch-seq2seq b3cd54c72cd6e4e63f672d334c795b4fe744ef92
Atcold/NYU-DLSP20 3049c83260ba05700e2ab9b7ed13cdbe5ddba0fd
"

cargo build --release -q -p memlint
MEMLINT="$PWD/target/release/memlint"

echo "$REPOS" | while read -r repo commit; do
    [ -n "$repo" ] || continue
    name="${repo#*/}"
    dest="$DIR/$name"
    if [ ! -d "$dest/.git" ]; then
        git init -q "$dest"
        git -C "$dest" fetch -q --depth 1 "https://github.com/$repo" "$commit"
        git -C "$dest" checkout -q FETCH_HEAD
    fi
    args=(check "$dest" --format json-lines --exit-zero --quiet)
    [ -n "$SELECT" ] && args+=(--select "$SELECT")
    "$MEMLINT" "${args[@]}" | python3 -c '
import collections, json, sys
counts = collections.Counter(json.loads(l)["code"] for l in sys.stdin if l.strip())
print(f"{sys.argv[1]:45} {sum(counts.values()):4}  " + "  ".join(f"{c} {n}" for c, n in sorted(counts.items())))
' "$repo@${commit:0:8}"
done
