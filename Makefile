# The two set-up commands of the README. Both work on a fresh machine: the
# torch virtualenv that memprobe links against is created on first use
# (scripts/torch-env.sh), everything else comes from crates.io.
SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c

.PHONY: demo test docs wheel wheel-memprobe

## Build both tools, lint the bundled example, and bench real training steps on the CPU.
demo:
	. scripts/torch-env.sh && cargo build --release -p memlint -p memprobe -p memprobe_worker
	./target/release/memlint check examples/ --exit-zero
	./target/release/memprobe bench --device cpu --workload mlp --amp bf16 --accum 4 --batch-size 1024 --runs 4 --warmup 1 --steps 3

## Run the whole test suite (and check that the generated rule docs are fresh),
## then the wheel tests: build the memlint and memprobe wheels, install each into a fresh venv, run it,
## then prove the runnable fixtures (Python: ML101, ML102, ML104, ML105, ML106, ML304) under torch on the CPU
## (the Rust fixtures are compiled and proven by `cargo test` in crates/memlint_tch_fixtures).
## (The binaries are built first so that the end-to-end tests in tests/ find them up to date.)
## (The wheel test is #[ignore]d for plain `cargo test`; it is selected here by
## name over the same workspace build, so nothing is compiled twice.)
test:
	. scripts/torch-env.sh && cargo xtask generate --check \
		&& cargo build --workspace --bins && cargo test --workspace \
		&& cargo test --workspace -- --ignored --exact --test-threads 1 wheel_installs_into_a_fresh_venv_and_checks_a_fixture \
			memprobe_wheel_installs_into_a_fresh_venv_and_benches_on_the_cpu \
		&& "$$MEMPROBE_PYTHON" -W ignore scripts/prove-fixtures.py

## Build the memlint wheel into target/wheels (maturin from PyPI into target/wheel-test/tools).
wheel:
	test -x target/wheel-test/tools/bin/maturin || { python3 -m venv target/wheel-test/tools && target/wheel-test/tools/bin/pip install --quiet "maturin>=1.7,<2"; }
	target/wheel-test/tools/bin/maturin build --release --out target/wheels

## Build the memprobe wheel into target/wheels (memprobe, and memprobe-worker without
## this machine's rpath; bench finds torch at run time). See scripts/memprobe-wheel.sh.
wheel-memprobe:
	bash scripts/memprobe-wheel.sh target/wheels

## Regenerate docs/rules/*.md from the rules' doc comments.
docs:
	cargo xtask generate
