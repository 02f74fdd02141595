//! GPU end-to-end tests. They need an NVIDIA GPU with a driver, so they are
//! ignored by default; scripts/gpu-check.sh runs them on a GPU machine with
//! `cargo test -p tests --test probe_gpu -- --ignored` (or the carried test binary).

use tests::*;
use std::process::Command;

use serde_json::Value;

/// The binary under test; MEMPROBE_BIN overrides it when this test executable
/// was built on another machine and carried to the GPU one (scripts/gpu-check.sh).
fn bin() -> String {
    std::env::var("MEMPROBE_BIN").unwrap_or_else(|_| memprobe_bin().display().to_string())
}

fn bench(args: &[&str]) -> Value {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("r.json");
    let mut all = vec!["bench", "--device", "cuda", "--json", json.to_str().unwrap()];
    all.extend_from_slice(args);
    let o = Command::new(bin()).args(&all).output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap()
}

fn variant<'a>(r: &'a Value, id: &str) -> &'a Value {
    r["variants"].as_array().unwrap().iter().find(|v| v["id"] == id).unwrap()
}

fn mem(v: &Value, metric: &str) -> Option<f64> {
    v["summary"]["memory"].as_array()?.iter().find(|m| m["metric"] == metric)?["median_bytes"].as_f64()
}

#[test]
#[ignore = "needs an NVIDIA GPU and driver"]
fn cuda_bench_reports_events_allocator_and_nvml_figures() {
    let r = bench(&["--workload", "mlp", "--amp", "bf16", "--accum", "4", "--runs", "2", "--steps", "5"]);
    assert_eq!(r["environment"]["device_kind"], "cuda");
    assert!(r["environment"]["driver_version"].is_string());
    let b = variant(&r, "baseline");
    assert!(b["runs"][0]["timing_source"].as_str().unwrap().contains("CUDA events"));
    let alloc = mem(b, "allocator-peak-allocated").expect("allocator peak");
    let reserved = mem(b, "allocator-peak-reserved").expect("reserved peak");
    assert!(alloc > 0.0 && reserved >= alloc);
    let acc = variant(&r, "accum-4");
    assert!(mem(acc, "allocator-peak-allocated").unwrap() < alloc, "accumulation lowers the allocator peak");
    assert!(acc["correctness"][0]["value"].as_f64().unwrap() <= 1e-5);
    assert!(r["sampler"]["samples"].as_u64().unwrap() > 0, "NVML sampler ran");
}

#[test]
#[ignore = "needs an NVIDIA GPU and driver"]
fn cuda_fp16_grad_scaler_and_cudnn_rows_run() {
    let r = bench(&[
        "--workload", "convnet", "--amp", "fp16", "--cudnn-benchmark", "--dynamic-shapes", "--channels-last",
        "--pin-memory", "--runs", "1", "--steps", "3",
    ]);
    for id in ["baseline", "amp-fp16", "cudnn-benchmark", "dynamic-shapes", "cudnn-benchmark-dynamic", "channels-last", "pin-memory"] {
        assert_eq!(variant(&r, id)["status"]["state"], "ok", "{id}: {}", variant(&r, id)["status"]);
    }
    let amp = variant(&r, "amp-fp16");
    assert!(amp["correctness"][0]["passed"].as_bool().unwrap(), "{}", amp["correctness"]);
}

fn run_steps(leak: bool) -> Value {
    run_steps_with(leak, &[]).0
}

fn run_steps_with(leak: bool, extra: &[&str]) -> (Value, String) {
    let dir = tempfile::tempdir().unwrap();
    let s = dir.path().join("train.py");
    std::fs::write(&s, validation_leak_script("cuda")).unwrap();
    let json = dir.path().join("run.json");
    let py = std::env::var("MEMPROBE_PYTHON").unwrap_or_else(|_| "python3".into());
    let mut cmd = Command::new(bin());
    cmd.args(["run", "--torch", "--quiet", "--json", json.to_str().unwrap()]).args(extra).args(["--", &py, s.to_str().unwrap()]);
    if leak {
        cmd.arg("--leak");
    }
    let o = cmd.output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    (serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap(), String::from_utf8_lossy(&o.stdout).to_string())
}

#[test]
#[ignore = "needs an NVIDIA GPU and driver"]
fn cuda_steps_give_allocator_peaks_and_a_leak_verdict() {
    let v = run_steps(true);
    let st = &v["summary"]["steps"];
    assert_eq!(st["cuda"], true, "{st}");
    assert_eq!(st["kind"], "optimizer");
    assert_eq!(st["steps"], 30);
    assert_eq!(st["growth"]["verdict"], "grows", "{st}");
    let retained = VALIDATION_LEAK_BYTES_PER_STEP;
    let slope = st["growth"]["slope_bytes_per_step"].as_f64().unwrap();
    assert!((slope - retained).abs() <= 0.2 * retained, "slope {slope} vs {retained}");
    // Each step's peak is at least what it leaves allocated.
    let series = &v["torch"]["steps"][0];
    let peaks = series["peak_bytes"].as_array().unwrap();
    let left = series["left_bytes"].as_array().unwrap();
    assert!(peaks.iter().zip(left).all(|(p, l)| p.as_u64() >= l.as_u64()), "{series}");

    let v = run_steps(false);
    let st = &v["summary"]["steps"];
    assert_eq!(st["growth"]["verdict"], "flat", "{st}");
    assert!(st["step_median_s"].as_f64().is_some_and(|t| t > 0.0));

    // --keep-peak-stats: the script's own max_memory_allocated() stays its
    // lifetime peak, the largest step peak.
    let (v, out) = run_steps_with(false, &["--keep-peak-stats"]);
    let own: u64 = out.lines().find_map(|l| l.strip_prefix("max_memory_allocated ")).and_then(|x| x.trim().parse().ok()).expect("printed");
    let peaks = v["torch"]["steps"][0]["peak_bytes"].as_array().unwrap().iter().filter_map(Value::as_u64).max().unwrap();
    assert!(own >= peaks, "the script saw {own}, the steps peaked at {peaks}");
    assert!(v["notes"].as_array().unwrap().iter().any(|n| n.as_str().unwrap().contains("--keep-peak-stats")), "{}", v["notes"]);
}
