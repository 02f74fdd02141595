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
