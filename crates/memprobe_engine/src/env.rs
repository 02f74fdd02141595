//! What machine this is: CPU, GPU, driver, CUDA and torch versions, device
//! peak throughput. Every probe is guarded so a machine without an NVIDIA
//! driver answers "none" instead of panicking.

use memprobe_report::{Environment, PeakFlops};

use crate::ffi;
use crate::plan::DeviceChoice;

/// Whether libcuda can be loaded (cudarc panics on first use otherwise).
#[allow(unsafe_code)] // cudarc marks the loader probe unsafe; it only dlopens libcuda.
pub fn cuda_driver_present() -> bool {
    unsafe { cudarc::driver::sys::is_culib_present() }
}

/// CUDA version supported by the driver (e.g. "13.0"), when a driver is present.
#[allow(unsafe_code)] // plain driver API query with a valid out-pointer.
pub fn cuda_driver_version() -> Option<String> {
    if !cuda_driver_present() {
        return None;
    }
    let mut v: std::ffi::c_int = 0;
    let rc = unsafe { cudarc::driver::sys::cuDriverGetVersion(&mut v) };
    (rc == cudarc::driver::sys::cudaError_enum::CUDA_SUCCESS).then_some(()).and_then(|_| ffi::format_cuda_version(v))
}

/// Why libtorch's CUDA half could not be loaded, when it could not.
static CUDA_LOAD_ERROR: std::sync::OnceLock<Option<String>> = std::sync::OnceLock::new();

/// Loads `libtorch_cuda.so` (and with it `libc10_cuda.so`) into the process.
///
/// The worker links only libtorch's CPU half, so one binary starts against a
/// CPU-only torch too; the CUDA half registers its hooks with libtorch when
/// loaded, which must happen before anything asks libtorch about CUDA. Call it
/// first thing in `main`. A torch without a CUDA half (a CPU build) is not an
/// error: CUDA is then simply unavailable, and [`cuda_load_error`] says why.
#[allow(unsafe_code)] // dlopen/dlerror with NUL-terminated strings we own.
pub fn load_torch_cuda() {
    CUDA_LOAD_ERROR.get_or_init(|| {
        let dir = std::env::var_os(memprobe_host::torch_lib::TORCH_LIB_DIR_ENV).map(std::path::PathBuf::from);
        let path = match &dir {
            Some(d) => {
                let p = d.join("libtorch_cuda.so");
                if !p.exists() {
                    return Some(format!("this torch has no CUDA support ({} has no libtorch_cuda.so: a CPU-only build)", d.display()));
                }
                p.into_os_string()
            }
            None => "libtorch_cuda.so".into(),
        };
        let Ok(c) = std::ffi::CString::new(std::os::unix::ffi::OsStringExt::into_vec(path)) else {
            return Some("the torch library path contains a NUL byte".into());
        };
        let handle = unsafe { libc::dlopen(c.as_ptr(), libc::RTLD_NOW | libc::RTLD_GLOBAL) };
        if handle.is_null() {
            let err = unsafe { libc::dlerror() };
            let msg = if err.is_null() {
                "dlopen failed".to_string()
            } else {
                unsafe { std::ffi::CStr::from_ptr(err) }.to_string_lossy().into_owned()
            };
            Some(format!("libtorch_cuda.so could not be loaded: {msg}"))
        } else {
            None
        }
    });
}

/// Why libtorch has no CUDA in this process, when [`load_torch_cuda`] failed.
pub fn cuda_load_error() -> Option<&'static str> {
    CUDA_LOAD_ERROR.get().and_then(|e| e.as_deref())
}

/// Whether libtorch sees a usable CUDA device.
pub fn torch_cuda_available() -> bool {
    cuda_load_error().is_none() && cuda_driver_present() && tch::Cuda::is_available()
}

/// Why CUDA is unavailable, in words for a `--device cuda` error.
pub fn cuda_unavailable_reason() -> String {
    if let Some(e) = cuda_load_error() {
        e.to_string()
    } else if cuda_driver_present() {
        "the NVIDIA driver is present but libtorch sees no CUDA device".to_string()
    } else {
        "no NVIDIA driver found".to_string()
    }
}

/// NVML index of CUDA device 0: the first entry of CUDA_VISIBLE_DEVICES when it
/// is a plain index, else 0.
pub fn nvml_index() -> u32 {
    std::env::var("CUDA_VISIBLE_DEVICES")
        .ok()
        .and_then(|v| v.split(',').next().and_then(|s| s.trim().parse().ok()))
        .unwrap_or(0)
}

fn cpu_model() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split_once(':').map(|(_, v)| v.trim().to_string()))
        })
        .unwrap_or_else(|| std::env::consts::ARCH.to_string())
}

fn os_name() -> String {
    let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").map(|s| s.trim().to_string()).ok();
    match release {
        Some(r) => format!("{} {r}", std::env::consts::OS),
        None => std::env::consts::OS.to_string(),
    }
}

/// Dense peak TFLOP/s from vendor datasheets, matched on the NVML device name.
/// Only devices listed here get an MFU; everything else says unavailable.
pub fn peak_flops_for(device_name: &str) -> Vec<PeakFlops> {
    let n = device_name.to_ascii_uppercase();
    // (name fragment, fp32, tf32, bf16/fp16 dense)
    let table: [(&str, f64, f64, f64, &str); 5] = [
        ("H200", 67.0, 494.7, 989.4, "NVIDIA H200 SXM datasheet (dense)"),
        ("H100", 67.0, 494.7, 989.4, "NVIDIA H100 SXM datasheet (dense)"),
        ("A100", 19.5, 156.0, 312.0, "NVIDIA A100 datasheet (dense)"),
        ("L40S", 91.6, 183.0, 362.0, "NVIDIA L40S datasheet (dense)"),
        ("A10G", 31.2, 62.5, 125.0, "NVIDIA A10G datasheet (dense)"),
    ];
    for (frag, fp32, tf32, half, src) in table {
        if n.contains(frag) {
            return vec![
                PeakFlops { precision: "fp32".into(), tflops: fp32, source: src.into() },
                PeakFlops { precision: "tf32".into(), tflops: tf32, source: src.into() },
                PeakFlops { precision: "bf16".into(), tflops: half, source: src.into() },
                PeakFlops { precision: "fp16".into(), tflops: half, source: src.into() },
            ];
        }
    }
    Vec::new()
}

/// Probes the environment for a bench on `device`.
pub fn probe(device: DeviceChoice) -> Environment {
    let cpu = cpu_model();
    let mut env = Environment {
        device_kind: device.name().into(),
        device_name: cpu.clone(),
        driver_version: None,
        cuda_driver_version: cuda_driver_version(),
        torch_cuda_version: ffi::torch_cuda_version(),
        cudnn_version: None,
        torch_version: ffi::torch_version(),
        cpu_model: cpu,
        cpu_flags: memprobe_report::host::cpu_flags(),
        cpu_logical_cores: std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1),
        torch_threads: i64::from(tch::get_num_threads()),
        os: os_name(),
        peak_flops: Vec::new(),
    };
    if let Ok(nvml) = nvml_wrapper::Nvml::init() {
        env.driver_version = nvml.sys_driver_version().ok();
        if device == DeviceChoice::Cuda {
            if let Ok(d) = nvml.device_by_index(nvml_index()) {
                if let Ok(name) = d.name() {
                    env.peak_flops = peak_flops_for(&name);
                    env.device_name = name;
                }
            }
        }
    }
    if device == DeviceChoice::Cuda {
        env.cudnn_version = ffi::cudnn_version();
    }
    env
}

/// Peak resident set size of this process in bytes (kernel high-water mark).
#[allow(unsafe_code)] // getrusage with a zeroed out-struct.
pub fn peak_rss_bytes() -> Option<u64> {
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    let rc = unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    // Linux reports ru_maxrss in KiB.
    (rc == 0 && ru.ru_maxrss > 0).then(|| ru.ru_maxrss as u64 * 1024)
}

/// CPU time consumed by the calling thread, seconds.
#[allow(unsafe_code)] // clock_gettime with a zeroed out-struct.
pub fn thread_cpu_seconds() -> f64 {
    let mut ts: libc::timespec = unsafe { std::mem::zeroed() };
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    if rc == 0 {
        ts.tv_sec as f64 + ts.tv_nsec as f64 * 1e-9
    } else {
        0.0
    }
}
