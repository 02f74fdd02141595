//! Background NVML sampler: device and per-process GPU memory, read every
//! `interval` on its own thread while the measured steps run. Its own cost
//! (time per sample, CPU share of its thread) is measured and reported.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use memprobe_report::SamplerCost;
use nvml_wrapper::enums::device::UsedGpuMemory;
use nvml_wrapper::Nvml;

use crate::env::{nvml_index, thread_cpu_seconds};

/// Peaks seen by the sampler.
#[derive(Debug, Clone, Default)]
pub struct NvmlPeaks {
    /// Peak device used memory (all processes), bytes.
    pub device_peak: Option<u64>,
    /// Peak memory NVML attributes to this process, bytes.
    pub process_peak: Option<u64>,
    /// Why the per-process figure is missing, when it is.
    pub process_note: Option<String>,
    /// Sampler cost.
    pub cost: Option<SamplerCost>,
}

/// Runs `f` while sampling NVML every `interval`. Without NVML, `f` runs alone
/// and the peaks say why they are missing.
pub fn sample_during<R>(interval: Duration, f: impl FnOnce() -> R) -> (R, NvmlPeaks, Option<String>) {
    let nvml = match Nvml::init() {
        Ok(n) => n,
        Err(e) => return (f(), NvmlPeaks::default(), Some(format!("NVML unavailable: {e}"))),
    };
    let stop = AtomicBool::new(false);
    let pid = std::process::id();
    std::thread::scope(|s| {
        let handle = s.spawn(|| {
            let mut peaks = NvmlPeaks::default();
            let Ok(dev) = nvml.device_by_index(nvml_index()) else {
                return (peaks, Some("NVML has no device at the CUDA device's index".to_string()));
            };
            let cpu0 = thread_cpu_seconds();
            let wall0 = Instant::now();
            let mut samples = 0u64;
            let mut sample_time = Duration::ZERO;
            let mut process_seen = false;
            let mut process_unavailable = false;
            loop {
                let t = Instant::now();
                if let Ok(m) = dev.memory_info() {
                    peaks.device_peak = Some(peaks.device_peak.unwrap_or(0).max(m.used));
                }
                if let Ok(procs) = dev.running_compute_processes() {
                    if let Some(p) = procs.iter().find(|p| p.pid == pid) {
                        process_seen = true;
                        match p.used_gpu_memory {
                            UsedGpuMemory::Used(b) => {
                                peaks.process_peak = Some(peaks.process_peak.unwrap_or(0).max(b))
                            }
                            UsedGpuMemory::Unavailable => process_unavailable = true,
                        }
                    }
                }
                sample_time += t.elapsed();
                samples += 1;
                if stop.load(Ordering::Relaxed) {
                    break;
                }
                std::thread::sleep(interval);
            }
            let wall = wall0.elapsed().as_secs_f64();
            let cpu = thread_cpu_seconds() - cpu0;
            if peaks.process_peak.is_none() {
                peaks.process_note = Some(if process_unavailable {
                    "NVML reports per-process memory as unavailable (common in containers)".into()
                } else if !process_seen {
                    "this PID is not in NVML's process list (PID namespace differs, e.g. a container)".into()
                } else {
                    "no per-process sample".into()
                });
            }
            peaks.cost = Some(SamplerCost {
                what: "NVML device + per-process memory".into(),
                interval_ms: interval.as_secs_f64() * 1e3,
                samples,
                mean_sample_us: if samples > 0 { sample_time.as_secs_f64() * 1e6 / samples as f64 } else { 0.0 },
                cpu_fraction: if wall > 0.0 { cpu / wall } else { 0.0 },
            });
            (peaks, None)
        });
        let r = f();
        stop.store(true, Ordering::Relaxed);
        let (peaks, note) = handle.join().unwrap_or_else(|_| (NvmlPeaks::default(), Some("sampler thread panicked".into())));
        (r, peaks, note)
    })
}
