//! Environment probes and the NVML sampler must work, or say why not, on any
//! machine: a CPU-only one (no driver) answers "unavailable", never panics.

use std::time::Duration;

use memprobe_engine::plan::DeviceChoice;
use memprobe_engine::{env, ffi, sampler};

#[test]
fn environment_probe_names_torch_and_cpu() {
    let e = env::probe(DeviceChoice::Cpu);
    assert_eq!(e.torch_version, "2.11.0");
    assert_eq!(ffi::torch_version(), "2.11.0");
    assert_eq!(e.device_kind, "cpu");
    assert!(!e.cpu_model.is_empty());
    assert!(e.cpu_logical_cores >= 1 && e.torch_threads >= 1);
    if !env::cuda_driver_present() {
        assert!(e.driver_version.is_none() && e.cuda_driver_version.is_none());
        assert!(!env::torch_cuda_available());
    }
}

#[test]
fn peak_rss_is_measured() {
    let rss = env::peak_rss_bytes().expect("getrusage works on Linux");
    assert!(rss > 1 << 20);
}

#[test]
fn sampler_runs_the_closure_and_reports_cost_or_reason() {
    let (v, peaks, note) = sampler::sample_during(Duration::from_millis(5), || {
        std::thread::sleep(Duration::from_millis(30));
        42
    });
    assert_eq!(v, 42);
    match peaks.cost {
        Some(c) => {
            assert!(c.samples >= 1 && c.mean_sample_us > 0.0);
            assert!(peaks.device_peak.is_some());
        }
        None => assert!(note.expect("a reason when NVML is missing").contains("NVML unavailable")),
    }
}

#[test]
fn peak_flops_known_only_for_listed_devices() {
    assert!(env::peak_flops_for("NVIDIA H200").iter().any(|p| p.precision == "bf16" && p.tflops > 900.0));
    assert!(env::peak_flops_for("AMD EPYC").is_empty());
}
