//! NVML sampling of every GPU of the node for `memprobe run`: per-PID memory
//! matched against the command's process tree, device-level used memory,
//! utilisation, power and the energy counter. Without an NVIDIA driver,
//! [`GpuSampler::new`] returns why, and `run` records it instead of series.
//!
//! Not yet exercised on a GPU: `scripts/gpu-check.sh` does that on a machine
//! with an NVIDIA GPU.

use std::collections::HashMap;

use memprobe_report::run::{GpuProcessSeries, GpuSeries, MemorySeries};
use nvml_wrapper::enums::device::UsedGpuMemory;
use nvml_wrapper::Nvml;

/// Samples all GPUs of the node.
pub struct GpuSampler {
    nvml: Nvml,
    series: Vec<GpuSeries>,
    energy_start_mj: Vec<Option<u64>>,
    per_pid: Vec<HashMap<u32, MemorySeries>>,
    per_pid_unavailable: Vec<bool>,
}

impl GpuSampler {
    /// Initialises NVML; `Err(reason)` without a driver or devices.
    pub fn new() -> Result<GpuSampler, String> {
        let nvml = Nvml::init().map_err(|e| format!("NVML unavailable ({e}): no NVIDIA driver found, host memory only"))?;
        let count = nvml.device_count().map_err(|e| format!("NVML device count failed: {e}"))?;
        if count == 0 {
            return Err("NVML found no GPU on this node".into());
        }
        let mut series = Vec::new();
        let mut energy = Vec::new();
        for i in 0..count {
            let (name, total, e0) = match nvml.device_by_index(i) {
                Ok(d) => (
                    d.name().unwrap_or_else(|_| format!("GPU {i}")),
                    d.memory_info().ok().map(|m| m.total),
                    d.total_energy_consumption().ok(),
                ),
                Err(_) => (format!("GPU {i}"), None, None),
            };
            energy.push(e0);
            series.push(GpuSeries {
                index: i,
                name,
                memory_total_bytes: total,
                tree_process: MemorySeries::default(),
                processes: Vec::new(),
                device_used: MemorySeries::default(),
                utilization_pct: Vec::new(),
                power_mw: Vec::new(),
                energy_j: None,
                notes: Vec::new(),
            });
        }
        let n = series.len();
        Ok(GpuSampler { nvml, series, energy_start_mj: energy, per_pid: vec![HashMap::new(); n], per_pid_unavailable: vec![false; n] })
    }

    /// One sample of every GPU at `t_s`, attributing memory to `tree` PIDs.
    pub fn sample(&mut self, t_s: f64, tree: &[u32]) {
        for (i, s) in self.series.iter_mut().enumerate() {
            let Ok(d) = self.nvml.device_by_index(s.index) else { continue };
            if let Ok(m) = d.memory_info() {
                s.device_used.push(t_s, m.used);
                s.utilization_pct.push(d.utilization_rates().map(|u| u.gpu).unwrap_or(0));
                s.power_mw.push(d.power_usage().unwrap_or(0));
            }
            match d.running_compute_processes() {
                Ok(procs) => {
                    let mut sum = 0u64;
                    let mut any = false;
                    for p in procs.iter().filter(|p| tree.contains(&p.pid)) {
                        if let UsedGpuMemory::Used(b) = p.used_gpu_memory {
                            sum += b;
                            any = true;
                            self.per_pid[i].entry(p.pid).or_default().push(t_s, b);
                        } else {
                            self.per_pid_unavailable[i] = true;
                        }
                    }
                    if any || !s.tree_process.bytes.is_empty() {
                        s.tree_process.push(t_s, sum);
                    }
                }
                Err(_) => self.per_pid_unavailable[i] = true,
            }
        }
    }

    /// The series, with energy and the caveats filled in.
    pub fn finish(mut self) -> Vec<GpuSeries> {
        for (i, s) in self.series.iter_mut().enumerate() {
            if let (Ok(d), Some(e0)) = (self.nvml.device_by_index(s.index), self.energy_start_mj[i]) {
                if let Ok(e1) = d.total_energy_consumption() {
                    s.energy_j = Some(e1.saturating_sub(e0) as f64 / 1000.0);
                }
            }
            if s.energy_j.is_none() {
                s.notes.push("energy counter unavailable on this GPU".into());
            }
            let mut procs: Vec<GpuProcessSeries> =
                std::mem::take(&mut self.per_pid[i]).into_iter().map(|(pid, used)| GpuProcessSeries { pid, used }).collect();
            procs.sort_by_key(|p| p.pid);
            s.processes = procs;
            if s.tree_process.bytes.is_empty() {
                s.notes.push(if self.per_pid_unavailable[i] {
                    "NVML could not attribute memory to processes on this GPU (container PID namespace or driver limits): only device-level memory, which counts every process on the device".into()
                } else {
                    "no process of the command's tree used this GPU (device-level memory counts other processes too)".into()
                });
            }
        }
        self.series
    }

    /// NVIDIA driver version.
    pub fn driver_version(&self) -> Option<String> {
        self.nvml.sys_driver_version().ok()
    }
}
