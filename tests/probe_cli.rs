//! End-to-end tests of the real `memprobe bench` on the CPU: report schema,
//! measured figures, correctness checks, bad input, worker faults, Ctrl-C,
//! and the parent/worker split. `memprobe` and `memprobe-worker` are built
//! on demand (the worker links libtorch: source `scripts/torch-env.sh`
//! first). Sizes are small so the whole file runs in well under a minute on
//! 2 cores.

use tests::*;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

static BIN: std::sync::LazyLock<std::path::PathBuf> = std::sync::LazyLock::new(memprobe_bin);

/// `memprobe-worker`, built next to the binary under test (it links
/// libtorch: the torch environment of `scripts/torch-env.sh` must be set).
fn worker() -> PathBuf {
    let w = bin("memprobe_worker", "memprobe-worker");
    assert_eq!(w.parent(), BIN.parent(), "the worker is found next to `memprobe`");
    w
}

/// Benches of this file run one at a time: tests run in parallel threads,
/// and two benches on a 2-core machine measure each other.
static BENCH: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn bench_lock() -> std::sync::MutexGuard<'static, ()> {
    BENCH.lock().unwrap_or_else(|e| e.into_inner())
}

fn memprobe(args: &[&str]) -> Output {
    worker();
    let _one_at_a_time = bench_lock();
    Command::new(&*BIN).args(args).env_remove("MEMPROBE_FAULT").output().expect("run memprobe")
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn read_json(p: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(p).expect("report written")).expect("valid JSON")
}

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("probe-fixtures").join(name)
}

fn variant<'a>(r: &'a Value, id: &str) -> &'a Value {
    r["variants"].as_array().unwrap().iter().find(|v| v["id"] == id).unwrap_or_else(|| panic!("no variant {id}"))
}

fn peak_rss(v: &Value) -> f64 {
    v["summary"]["memory"].as_array().unwrap().iter().find(|m| m["metric"] == "peak-rss").unwrap()["median_bytes"]
        .as_f64()
        .unwrap()
}

/// Checks the fields and types every report must have.
fn validate_schema(r: &Value) {
    assert_eq!(r["schema_version"], 1);
    assert_eq!(r["tool"]["name"], "memprobe");
    assert!(r["created_unix_s"].as_u64().unwrap() > 1_600_000_000);
    assert!(r["command"].is_array());
    assert!(r["complete"].is_boolean());
    let env = &r["environment"];
    for k in ["device_kind", "device_name", "torch_version", "cpu_model", "os"] {
        assert!(env[k].is_string(), "environment.{k}");
    }
    assert_eq!(env["torch_version"], "2.11.0");
    assert!(env["cpu_logical_cores"].as_u64().unwrap() >= 1);
    let w = &r["workload"];
    for k in ["name", "size", "description", "loss", "optimizer", "flops_source"] {
        assert!(w[k].is_string(), "workload.{k}");
    }
    assert!(w["batch_size"].as_u64().unwrap() > 0);
    assert!(w["parameters"].as_u64().unwrap() > 0);
    let s = &r["settings"];
    for k in ["runs", "warmup_steps", "measured_steps", "seed"] {
        assert!(s[k].is_u64(), "settings.{k}");
    }
    assert!(s["schedule"].is_array());
    let vs = r["variants"].as_array().unwrap();
    assert_eq!(vs[0]["id"], "baseline");
    for v in vs {
        for k in ["id", "label", "description", "precision", "mode"] {
            assert!(v[k].is_string(), "variant.{k}");
        }
        assert!(v["status"]["state"].is_string());
        assert!(v["runs"].is_array() && v["correctness"].is_array());
        for run in v["runs"].as_array().unwrap() {
            assert!(run["timing_source"].is_string());
            assert!(run["pid"].as_u64().unwrap() > 0);
            for m in run["memory"].as_array().unwrap() {
                assert!(m["metric"].is_string() && m["source"].is_string());
                assert!(m["bytes"].is_u64() || (m["bytes"].is_null() && m["note"].is_string()));
            }
        }
    }
}

/// Every measured figure is finite and positive.
fn assert_positive_figures(v: &Value, runs: usize, steps: usize) {
    assert_eq!(v["status"]["state"], "ok", "{}: {}", v["id"], v["status"]);
    let rs = v["runs"].as_array().unwrap();
    assert_eq!(rs.len(), runs, "{}", v["id"]);
    for run in rs {
        let t = run["step_times_ms"].as_array().unwrap();
        assert_eq!(t.len(), steps);
        for x in t {
            let x = x.as_f64().unwrap();
            assert!(x.is_finite() && x > 0.0, "{}: step time {x}", v["id"]);
        }
        for l in run["losses"].as_array().unwrap() {
            let l = l.as_f64().unwrap();
            assert!(l.is_finite() && l > 0.0, "{}: loss {l}", v["id"]);
        }
        let rss = run["memory"].as_array().unwrap().iter().find(|m| m["metric"] == "peak-rss").unwrap();
        assert!(rss["bytes"].as_u64().unwrap() > 10 << 20);
        assert!(run["worker_wall_s"].as_f64().unwrap() > 0.0);
    }
    let s = &v["summary"];
    for k in ["samples_per_s", "achieved_tflops"] {
        let x = s[k].as_f64().unwrap();
        assert!(x.is_finite() && x > 0.0, "{}: {k} {x}", v["id"]);
    }
    let med = s["step_time_ms"]["median"].as_f64().unwrap();
    assert!(med.is_finite() && med > 0.0);
}

#[test]
fn cpu_bench_amp_and_accumulation_report() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("report.json");
    let md = dir.path().join("report.md");
    // Batch 4096 of the small MLP: activations (~4 MiB per layer output) dwarf
    // the 0.9 MiB of parameters, so accumulation must lower the peak RSS.
    let o = memprobe(&[
        "bench", "--device", "cpu", "--workload", "mlp", "--amp", "bf16", "--accum", "4",
        "--batch-size", "4096", "--runs", "1", "--warmup", "1", "--steps", "2",
        "--json", json.to_str().unwrap(), "--markdown", md.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "exit {:?}: {}", o.status, stderr(&o));
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(stdout.contains("device: ") && stdout.contains("torch: 2.11.0"), "{stdout}");
    assert!(stdout.contains("accum 4") && stdout.contains("amp bf16"));

    let r = read_json(&json);
    validate_schema(&r);
    assert_eq!(r["complete"], true);
    assert_eq!(r["environment"]["device_kind"], "cpu");
    let ids: Vec<&str> = r["variants"].as_array().unwrap().iter().map(|v| v["id"].as_str().unwrap()).collect();
    assert_eq!(ids, ["baseline", "amp-bf16", "accum-4", "combined"]);
    for id in &ids {
        assert_positive_figures(variant(&r, id), 1, 2);
    }

    // Accumulation: same effective batch, a quarter of the activations.
    let base = peak_rss(variant(&r, "baseline"));
    let acc = peak_rss(variant(&r, "accum-4"));
    assert!(acc < base - (20 << 20) as f64, "accum peak RSS {acc} not clearly below baseline {base}");

    let accum = variant(&r, "accum-4");
    let c = accum["correctness"].as_array().unwrap().iter().find(|c| c["kind"] == "accum-grad-rel-err").expect("accum check");
    assert!(c["value"].as_f64().unwrap() <= 1e-5, "{c}");
    assert_eq!(c["passed"], true);
    let amp = variant(&r, "amp-bf16");
    let c = amp["correctness"].as_array().unwrap().iter().find(|c| c["kind"] == "amp-loss-rel-diff").expect("amp check");
    let d = c["value"].as_f64().unwrap();
    assert!(d > 0.0 && d < 2e-2, "bf16 loss diff {d}");
    // Every variant starts from the same weights and data.
    let l0 = |id: &str| variant(&r, id)["runs"][0]["losses"][0].as_f64().unwrap();
    assert!((l0("accum-4") - l0("baseline")).abs() / l0("baseline") < 1e-3);

    let m = std::fs::read_to_string(&md).unwrap();
    assert!(m.starts_with("# memprobe bench: mlp (small)"));
    assert!(m.contains("| accum 4 |") && m.contains("grad Δrel"));
}

#[test]
fn bad_input_exits_2_with_a_clear_message() {
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (vec!["bench", "--device", "cpu", "--accum", "0"], "--accum 0"),
        (vec!["bench", "--device", "cpu", "--accum", "3"], "does not divide the batch size 8192"),
        (vec!["bench", "--device", "cpu", "--workload", "resnet999"], "resnet999"),
        (vec!["bench", "--device", "cpu", "--model", "/nonexistent/m.pt", "--input-shape", "4,16"], "/nonexistent/m.pt"),
        (vec!["bench", "--device", "cpu", "--freeze", "99"], "--freeze 99"),
        // Zero threads crashed the worker with a C++ backtrace.
        (vec!["bench", "--device", "cpu", "--threads", "0"], "--threads"),
        (vec!["bench", "--device", "cpu", "--json", "/nonexistent-dir/b.json"], "does not exist"),
    ];
    for (args, needle) in cases {
        let o = memprobe(&args);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
        assert!(stderr(&o).contains(needle), "{args:?}: {}", stderr(&o));
    }
}

#[test]
fn unloadable_or_mismatched_model_exits_2() {
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("broken.pt");
    std::fs::write(&bad, b"this is not a TorchScript archive").unwrap();
    let o = memprobe(&["bench", "--device", "cpu", "--model", bad.to_str().unwrap(), "--input-shape", "4,16"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("broken.pt"), "{}", stderr(&o));

    let good = fixture("tiny_mlp.pt");
    let o = memprobe(&["bench", "--device", "cpu", "--model", good.to_str().unwrap(), "--input-shape", "4,17"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("input shape [4, 17]"), "{}", stderr(&o));
}

#[test]
fn cuda_without_gpu_exits_2() {
    if Path::new("/dev/nvidiactl").exists() {
        return; // a GPU machine: covered by the ignored GPU tests instead
    }
    let o = memprobe(&["bench", "--device", "cuda"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("--device cuda: no NVIDIA driver found"), "{}", stderr(&o));
}

#[test]
fn torchscript_model_trains_and_opaque_flags_are_skipped() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("ts.json");
    let model = fixture("tiny_mlp.pt");
    let o = memprobe(&[
        "bench", "--device", "cpu", "--model", model.to_str().unwrap(), "--input-shape", "32,16",
        "--loss", "cross-entropy", "--accum", "2", "--checkpoint", "--no-grad-eval",
        "--runs", "1", "--warmup", "1", "--steps", "2", "--json", json.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let r = read_json(&json);
    validate_schema(&r);
    assert_eq!(r["workload"]["name"], "torchscript");
    assert_eq!(r["workload"]["parameters"], 16 * 32 + 32 + 32 * 4 + 4);
    assert!(r["workload"]["train_flops_per_step"].is_null());
    assert_eq!(variant(&r, "baseline")["status"]["state"], "ok");
    let ck = variant(&r, "checkpoint");
    assert_eq!(ck["status"]["state"], "skipped");
    assert!(ck["status"]["reason"].as_str().unwrap().contains("opaque"));
    let acc = variant(&r, "accum-2");
    assert!(acc["correctness"][0]["value"].as_f64().unwrap() < 1e-5);
    let ev = variant(&r, "no-grad-eval");
    assert_eq!(ev["compared_to"], "eval-grad");
    assert_eq!(ev["correctness"][0]["kind"], "no-grad-eval-max-abs-diff");
    assert_eq!(ev["correctness"][0]["value"].as_f64().unwrap(), 0.0);
}

#[test]
fn oom_and_crashed_workers_are_reported_and_others_go_on() {
    let dir = tempfile::tempdir().unwrap();
    // Two repeats for the OOM case show the failed variant is not retried while
    // the others run every repeat; one is enough for the crash case.
    for (fault, state, runs) in [("accum-2:oom", "oom", 2usize), ("accum-2:crash", "crashed", 1)] {
        let json = dir.path().join(format!("{state}.json"));
        let runs_arg = runs.to_string();
        worker();
        let _one_at_a_time = bench_lock();
        let o = Command::new(&*BIN)
            .args([
                "bench", "--device", "cpu", "--batch-size", "256", "--accum", "2", "--set-to-none",
                "--runs", &runs_arg, "--warmup", "0", "--steps", "1", "--json", json.to_str().unwrap(),
            ])
            .env("MEMPROBE_FAULT", fault)
            .output()
            .unwrap();
        assert!(o.status.success(), "{fault}: {}", stderr(&o));
        let r = read_json(&json);
        validate_schema(&r);
        let acc = variant(&r, "accum-2");
        assert_eq!(acc["status"]["state"], state, "{}", acc["status"]);
        assert!(acc["runs"].as_array().unwrap().is_empty());
        if state == "oom" {
            assert!(acc["status"]["message"].as_str().unwrap().contains("memory"));
        } else {
            assert!(acc["status"]["exit_status"].as_str().unwrap().contains("signal: 6"), "{}", acc["status"]);
        }
        // The others still ran every repeat.
        for id in ["baseline", "set-to-none"] {
            assert_positive_figures(variant(&r, id), runs, 1);
        }
        let table = String::from_utf8_lossy(&o.stdout);
        assert!(table.contains(if state == "oom" { "OOM" } else { "crashed (signal: 6" }), "{table}");
    }
}

#[test]
fn ctrl_c_writes_a_partial_report() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("partial.json");
    worker();
    let _one_at_a_time = bench_lock();
    let child = Command::new(&*BIN)
        .args([
            "bench", "--device", "cpu", "--batch-size", "256", "--set-to-none", "--runs", "500",
            "--warmup", "0", "--steps", "1", "--json", json.to_str().unwrap(),
        ])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Wait until the bench is running workers (so the measured loop is what
    // gets interrupted; the Python that names the torch to use is a child
    // too, earlier), then let a couple of them finish.
    let children = format!("/proc/{0}/task/{0}/children", child.id());
    let worker_running = || {
        std::fs::read_to_string(&children).unwrap_or_default().split_whitespace().any(|pid| {
            std::fs::read_to_string(format!("/proc/{pid}/comm")).is_ok_and(|c| c.trim() == "memprobe-worker")
        })
    };
    let t0 = std::time::Instant::now();
    while !worker_running() {
        assert!(t0.elapsed().as_secs() < 120, "no worker started within 120 s");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    std::thread::sleep(std::time::Duration::from_secs(2));
    // SIGINT to the parent only, as `kill -INT`; a terminal's Ctrl-C also reaches the worker.
    let rc = Command::new("kill").args(["-INT", &child.id().to_string()]).status().unwrap();
    assert!(rc.success());
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(130), "{}", stderr(&out));
    let r = read_json(&json);
    validate_schema(&r);
    assert_eq!(r["complete"], false);
    let base = variant(&r, "baseline");
    assert!(base["runs"].as_array().unwrap().len() < 500);
    assert_eq!(base["status"]["state"], "interrupted");
}

#[test]
fn help_lists_every_optimization_flag() {
    let o = memprobe(&["bench", "--help"]);
    let h = String::from_utf8_lossy(&o.stdout);
    for f in [
        "--amp", "--accum", "--cudnn-benchmark", "--dynamic-shapes", "--channels-last", "--checkpoint",
        "--inplace", "--no-grad-eval", "--pin-memory", "--set-to-none", "--freeze", "--all", "--model",
        "--input-shape", "--loss", "--size", "--json", "--markdown", "--runs",
    ] {
        assert!(h.contains(f), "missing {f}");
    }
}

#[test]
fn the_parent_does_not_link_libtorch_and_the_worker_does() {
    // What the dynamic loader maps for each (ldd, from the C library).
    let libs = |exe: &Path| {
        let o = Command::new("ldd").arg(exe).output().expect("ldd");
        String::from_utf8_lossy(&o.stdout).lines().filter_map(|l| l.split_whitespace().next().map(str::to_string)).collect::<Vec<_>>()
    };
    let parent = libs(&BIN);
    assert!(!parent.is_empty(), "ldd listed nothing for {}", BIN.display());
    assert!(parent.iter().all(|l| !l.starts_with("libtorch") && !l.starts_with("libc10")), "memprobe links {parent:?}");
    let w = libs(&worker());
    assert!(w.iter().any(|l| l == "libtorch_cpu.so"), "memprobe-worker should link libtorch: {w:?}");
}

#[test]
fn bench_without_the_worker_says_how_to_get_it() {
    // A copy of the parent alone in a directory: nothing to start.
    let dir = tempfile::tempdir().unwrap();
    let lone = dir.path().join("memprobe");
    std::fs::copy(&*BIN, &lone).unwrap();
    let o = Command::new(&lone).args(["bench", "--device", "cpu"]).env_remove("MEMPROBE_WORKER").output().unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let e = stderr(&o);
    assert!(e.contains("needs memprobe-worker") && e.contains(&dir.path().join("memprobe-worker").display().to_string()), "{e}");
    assert!(e.contains("cargo build --release -p memprobe_worker"), "{e}");

    let o = Command::new(&*BIN).args(["bench", "--device", "cpu"]).env("MEMPROBE_WORKER", "/nonexistent/w").output().unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("MEMPROBE_WORKER=/nonexistent/w: no such file"), "{}", stderr(&o));

    // A worker that cannot load its libtorch (here: a script that fails like the loader).
    let fake = dir.path().join("memprobe-worker");
    std::fs::write(
        &fake,
        "#!/bin/sh\necho 'memprobe-worker: error while loading shared libraries: libtorch_cpu.so: cannot open shared object file' >&2\nexit 127\n",
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).unwrap();
    let o = Command::new(&lone).args(["bench", "--device", "cpu"]).env_remove("MEMPROBE_WORKER").output().unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let e = stderr(&o);
    assert!(e.contains("cannot start") && e.contains("libtorch") && e.contains("pip install torch==2.11.0"), "{e}");
}

/// Multiplies every step time of `id` by `factor` (a doctored copy).
fn scale_step_times(r: &mut Value, id: &str, factor: f64) {
    let v = r["variants"].as_array_mut().unwrap().iter_mut().find(|v| v["id"] == id).unwrap();
    for run in v["runs"].as_array_mut().unwrap() {
        for t in run["step_times_ms"].as_array_mut().unwrap() {
            *t = Value::from(t.as_f64().unwrap() * factor);
        }
    }
}

#[test]
fn compare_flags_a_doctored_slowdown_passes_noise_and_rejects_other_schemas() {
    let dir = tempfile::tempdir().unwrap();
    let base = dir.path().join("base.json");
    // The spread of the per-run medians decides what a 20 % change means. On
    // a busy machine it can be too large for any test: measure again (up to
    // three times, as one would by hand) until the runs agree within 10 %.
    let run_cv = |r: &Value, id: &str| {
        let v = r["variants"].as_array().unwrap().iter().find(|v| v["id"] == id).unwrap();
        let meds: Vec<f64> = v["runs"]
            .as_array()
            .unwrap()
            .iter()
            .map(|run| {
                let mut t: Vec<f64> = run["step_times_ms"].as_array().unwrap().iter().map(|x| x.as_f64().unwrap()).collect();
                t.sort_by(f64::total_cmp);
                (t[(t.len() - 1) / 2] + t[t.len() / 2]) / 2.0
            })
            .collect();
        let mean = meds.iter().sum::<f64>() / meds.len() as f64;
        (meds.iter().map(|m| (m - mean).powi(2)).sum::<f64>() / (meds.len() - 1) as f64).sqrt() / mean
    };
    let mut original = Value::Null;
    let mut quiet = false;
    for _attempt in 0..3 {
        let o = memprobe(&[
            "bench", "--device", "cpu", "--batch-size", "512", "--set-to-none", "--runs", "8", "--warmup", "2",
            "--steps", "10", "--threads", "1", "--quiet", "--json", base.to_str().unwrap(),
        ]);
        assert!(o.status.success(), "{}", stderr(&o));
        original = read_json(&base);
        if run_cv(&original, "set-to-none") < 0.10 {
            quiet = true;
            break;
        }
    }
    let write = |name: &str, v: &Value| {
        let p = dir.path().join(name);
        std::fs::write(&p, serde_json::to_string(v).unwrap()).unwrap();
        p
    };
    let compare = |new: &Path, extra: &[&str]| {
        let mut args = vec!["compare", base.to_str().unwrap(), new.to_str().unwrap()];
        args.extend_from_slice(extra);
        Command::new(&*BIN).args(&args).output().unwrap()
    };

    // The same report: nothing changed.
    let o = compare(&base, &[]);
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stdout));

    // 20 % slower set-to-none: a regression, and the row is named.
    let mut slow = original.clone();
    scale_step_times(&mut slow, "set-to-none", 1.2);
    let p = write("slow.json", &slow);
    let o = compare(&p, &[]);
    let out = String::from_utf8_lossy(&o.stdout);
    if !quiet {
        // Three measurements too noisy to tell 20 % apart: the honest answer
        // is no verdict, and compare must say why.
        assert!(out.contains("spread too much to conclude"), "{out}");
        eprintln!("compare test: the machine was too busy for a 20 % verdict; checked the spread warning instead");
    } else {
        assert_eq!(o.status.code(), Some(1), "{out}");
        assert!(out.contains("REGRESSION in set-to-none"), "{out}");
        assert!(stderr(&o).contains("regression in set-to-none"));
        assert!(out.contains("slower (+20.0%"), "{out}");
        let o = compare(&p, &["--format", "json"]);
        let j: Value = serde_json::from_slice(&o.stdout).unwrap();
        assert_eq!(j["regressions"], serde_json::json!(["set-to-none"]));
        let o = compare(&p, &["--format", "markdown"]);
        assert!(String::from_utf8_lossy(&o.stdout).starts_with("## memprobe compare: mlp (small)"));
        // Allowed when the threshold is above the change.
        assert_eq!(compare(&p, &["--max-time-regression", "25%"]).status.code(), Some(0));
    }

    // Within noise: +1 % on every variant is below the 5 % threshold.
    let mut noise = original.clone();
    scale_step_times(&mut noise, "baseline", 1.01);
    scale_step_times(&mut noise, "set-to-none", 1.01);
    let p = write("noise.json", &noise);
    let o = compare(&p, &[]);
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stdout));
    assert!(String::from_utf8_lossy(&o.stdout).contains("no regression"));

    // Another schema version, another workload, not a report: exit 2, saying which.
    let mut other = original.clone();
    other["schema_version"] = Value::from(2);
    let p = write("v2.json", &other);
    let o = compare(&p, &[]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("v2.json: unsupported report schema version 2"), "{}", stderr(&o));
    let mut other = original.clone();
    other["workload"]["name"] = Value::from("convnet");
    let p = write("convnet.json", &other);
    let o = compare(&p, &[]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("different workloads: BASE is mlp"), "{}", stderr(&o));
    let p = write("junk.json", &Value::from("hello"));
    assert_eq!(compare(&p, &[]).status.code(), Some(2));
    assert_eq!(compare(Path::new("/nonexistent/x.json"), &[]).status.code(), Some(2));
}

/// A file saved with `torch.save` (a state_dict, a pickled module) is named
/// as such, with what to do, instead of "corrupted".
#[test]
fn a_state_dict_is_named_as_one() {
    let py = std::env::var("MEMPROBE_PYTHON").unwrap_or_else(|_| "python3".into());
    let dir = tempfile::tempdir().unwrap();
    let sd = dir.path().join("weights.pt");
    let script = format!("import torch; torch.save(torch.nn.Linear(16, 4).state_dict(), {:?})", sd.to_str().unwrap());
    let made = std::process::Command::new(&py).args(["-W", "ignore", "-c", &script]).status();
    assert!(made.is_ok_and(|s| s.success()), "{py} with torch saves a state_dict (run after `. scripts/torch-env.sh`)");
    let o = memprobe(&["bench", "--device", "cpu", "--model", sd.to_str().unwrap(), "--input-shape", "4,16"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("saved with torch.save") && stderr(&o).contains("torch.jit.script"), "{}", stderr(&o));
}
