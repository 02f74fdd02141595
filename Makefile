# The two set-up commands of the README. Both work on a fresh machine: the
# torch virtualenv that memprobe links against is created on first use
# (scripts/torch-env.sh), everything else comes from crates.io.
SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c

.PHONY: demo test docs

## Build both tools, lint the bundled example, and bench real training steps on the CPU.
demo:
	. scripts/torch-env.sh && cargo build --release -p memlint -p memprobe -p memprobe_worker
	./target/release/memlint check examples/ --exit-zero
	./target/release/memprobe bench --device cpu --workload mlp --amp bf16 --accum 4 --batch-size 1024 --runs 2 --warmup 1 --steps 3

## Run the whole test suite (and check that the generated rule docs are fresh).
test:
	. scripts/torch-env.sh && cargo xtask generate --check && cargo test --workspace

## Regenerate docs/rules/*.md from the rules' doc comments.
docs:
	cargo xtask generate
