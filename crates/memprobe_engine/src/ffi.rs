//! Safe wrappers over the C++ shim (shim/shim.cpp).
//!
//! The shim catches every C++ exception and reports it through an error
//! buffer, so these wrappers return `Result` and never unwind across FFI.
#![allow(unsafe_code)] // FFI boundary: every call below passes valid tch tensor handles.

use std::ffi::{c_char, c_int, c_long, c_void, CStr};

use tch::{Device, Kind, Tensor};

use crate::EngineError;

extern "C" {
    fn memprobe_autocast_enter(
        device: c_int,
        dtype: c_int,
        prev_enabled: *mut c_int,
        prev_dtype: *mut c_int,
        err: *mut c_char,
        err_len: usize,
    ) -> c_int;
    fn memprobe_autocast_exit(
        device: c_int,
        prev_enabled: c_int,
        prev_dtype: c_int,
        err: *mut c_char,
        err_len: usize,
    ) -> c_int;
    fn memprobe_device_stats(device_index: c_int, out: *mut i64, err: *mut c_char, len: usize) -> c_int;
    fn memprobe_reset_peak_stats(device_index: c_int, err: *mut c_char, len: usize) -> c_int;
    fn memprobe_empty_cache(err: *mut c_char, len: usize) -> c_int;
    fn memprobe_set_cudnn_allow_tf32(allow: c_int, err: *mut c_char, len: usize) -> c_int;
    fn memprobe_amp_unscale(
        grads: *mut *mut c_void,
        n: usize,
        found_inf: *mut c_void,
        inv_scale: *mut c_void,
        err: *mut c_char,
        len: usize,
    ) -> c_int;
    fn memprobe_grad_set_none(tensor: *mut c_void, err: *mut c_char, len: usize) -> c_int;
    fn memprobe_backward_with_grad(output: *mut c_void, grad: *mut c_void, err: *mut c_char, len: usize) -> c_int;
    fn memprobe_is_channels_last(tensor: *mut c_void) -> c_int;
    fn memprobe_to_channels_last(tensor: *mut c_void, err: *mut c_char, len: usize) -> *mut c_void;
    fn memprobe_torch_version(major: *mut c_int, minor: *mut c_int, patch: *mut c_int);
    fn memprobe_cuda_runtime_version() -> c_long;
    fn memprobe_cudnn_version() -> c_long;
}

const ERR_LEN: usize = 1024;

fn call(what: &str, f: impl FnOnce(*mut c_char, usize) -> c_int) -> Result<(), EngineError> {
    let mut buf = [0 as c_char; ERR_LEN];
    let rc = f(buf.as_mut_ptr(), ERR_LEN);
    if rc == 0 {
        Ok(())
    } else {
        // SAFETY: the shim always NUL-terminates within ERR_LEN.
        let msg = unsafe { CStr::from_ptr(buf.as_ptr()) }.to_string_lossy().into_owned();
        Err(EngineError::Torch(format!("{what}: {msg}")))
    }
}

fn device_code(device: Device) -> c_int {
    if device.is_cuda() {
        1
    } else {
        0
    }
}

fn dtype_code(kind: Kind) -> c_int {
    if kind == Kind::Half {
        1
    } else {
        0
    }
}

/// An autocast region; the previous autocast state is restored on drop.
pub struct AutocastGuard {
    device: c_int,
    prev_enabled: c_int,
    prev_dtype: c_int,
}

impl AutocastGuard {
    /// Enables autocast on `device` with `kind` (BFloat16 or Half).
    pub fn enter(device: Device, kind: Kind) -> Result<AutocastGuard, EngineError> {
        let mut prev_enabled = 0;
        let mut prev_dtype = 0;
        let d = device_code(device);
        call("autocast enter", |e, l| unsafe {
            memprobe_autocast_enter(d, dtype_code(kind), &mut prev_enabled, &mut prev_dtype, e, l)
        })?;
        Ok(AutocastGuard { device: d, prev_enabled, prev_dtype })
    }
}

impl Drop for AutocastGuard {
    fn drop(&mut self) {
        // Restoring can only fail on an invalid device type, which enter() already accepted.
        let _ = call("autocast exit", |e, l| unsafe {
            memprobe_autocast_exit(self.device, self.prev_enabled, self.prev_dtype, e, l)
        });
    }
}

/// Caching allocator statistics (aggregate over pools).
#[derive(Debug, Clone, Copy, Default)]
pub struct AllocatorStats {
    /// Bytes allocated to tensors now.
    pub allocated_current: i64,
    /// Peak allocated since the last reset.
    pub allocated_peak: i64,
    /// Bytes reserved from the driver now.
    pub reserved_current: i64,
    /// Peak reserved since the last reset.
    pub reserved_peak: i64,
    /// Number of allocator OOMs.
    pub num_ooms: i64,
}

/// Allocator statistics of accelerator `index`; errors without an accelerator.
pub fn device_stats(index: i32) -> Result<AllocatorStats, EngineError> {
    let mut out = [0i64; 7];
    call("allocator stats", |e, l| unsafe { memprobe_device_stats(index, out.as_mut_ptr(), e, l) })?;
    Ok(AllocatorStats {
        allocated_current: out[0],
        allocated_peak: out[1],
        reserved_current: out[2],
        reserved_peak: out[3],
        num_ooms: out[6],
    })
}

/// Resets the allocator's peak statistics.
pub fn reset_peak_stats(index: i32) -> Result<(), EngineError> {
    call("reset peak stats", |e, l| unsafe { memprobe_reset_peak_stats(index, e, l) })
}

/// Returns cached, unused blocks to the driver.
pub fn empty_cache() -> Result<(), EngineError> {
    call("empty cache", |e, l| unsafe { memprobe_empty_cache(e, l) })
}

/// `torch.backends.cudnn.allow_tf32 = allow` for this process.
pub fn set_cudnn_allow_tf32(allow: bool) -> Result<(), EngineError> {
    call("set cudnn allow_tf32", |e, l| unsafe { memprobe_set_cudnn_allow_tf32(c_int::from(allow), e, l) })
}

/// `torch._amp_foreach_non_finite_check_and_unscale_`: grads *= inv_scale in
/// place; found_inf set to 1.0 when any gradient is inf or NaN.
pub fn amp_unscale(grads: &mut [Tensor], found_inf: &mut Tensor, inv_scale: &Tensor) -> Result<(), EngineError> {
    let mut ptrs: Vec<*mut c_void> = grads.iter_mut().map(|g| g.as_mut_ptr() as *mut c_void).collect();
    let fi = found_inf.as_mut_ptr() as *mut c_void;
    let is = inv_scale.as_ptr() as *mut c_void;
    call("amp unscale", |e, l| unsafe { memprobe_amp_unscale(ptrs.as_mut_ptr(), ptrs.len(), fi, is, e, l) })
}

/// Sets the gradient of `t` to undefined (PyTorch's `zero_grad(set_to_none=True)`).
pub fn grad_set_none(t: &mut Tensor) -> Result<(), EngineError> {
    let p = t.as_mut_ptr() as *mut c_void;
    call("set grad to none", |e, l| unsafe { memprobe_grad_set_none(p, e, l) })
}

/// `output.backward(grad_output)`: gradients accumulate into the leaves.
pub fn backward_with_grad(output: &Tensor, grad_output: &Tensor) -> Result<(), EngineError> {
    let y = output.as_ptr() as *mut c_void;
    let dy = grad_output.as_ptr() as *mut c_void;
    call("backward", |e, l| unsafe { memprobe_backward_with_grad(y, dy, e, l) })
}

/// Whether a 4-D tensor has channels-last strides.
pub fn is_channels_last(t: &Tensor) -> bool {
    unsafe { memprobe_is_channels_last(t.as_ptr() as *mut c_void) == 1 }
}

/// A channels-last copy of a 4-D tensor (`x.contiguous(memory_format=torch.channels_last)`).
pub fn to_channels_last(t: &Tensor) -> Result<Tensor, EngineError> {
    let mut buf = [0 as c_char; ERR_LEN];
    let p = unsafe { memprobe_to_channels_last(t.as_ptr() as *mut c_void, buf.as_mut_ptr(), ERR_LEN) };
    if p.is_null() {
        let msg = unsafe { CStr::from_ptr(buf.as_ptr()) }.to_string_lossy().into_owned();
        return Err(EngineError::Torch(format!("channels-last: {msg}")));
    }
    // SAFETY: the shim returns a heap-allocated at::Tensor*, which tch's Tensor owns and frees.
    Ok(unsafe { Tensor::from_ptr(p as *mut torch_sys::C_tensor) })
}

/// libtorch version string, e.g. `2.11.0`.
pub fn torch_version() -> String {
    let (mut a, mut b, mut c) = (0, 0, 0);
    unsafe { memprobe_torch_version(&mut a, &mut b, &mut c) };
    format!("{a}.{b}.{c}")
}

fn fmt_cuda_version(v: c_long) -> Option<String> {
    (v > 0).then(|| format!("{}.{}", v / 1000, (v % 1000) / 10))
}

/// CUDA runtime version libtorch was built with, when libtorch_cuda is loaded.
pub fn torch_cuda_version() -> Option<String> {
    fmt_cuda_version(unsafe { memprobe_cuda_runtime_version() })
}

/// cuDNN version libtorch was built with, when available.
pub fn cudnn_version() -> Option<String> {
    let v = unsafe { memprobe_cudnn_version() };
    (v > 0).then(|| {
        // cuDNN 9 encodes major*10000 + minor*100 + patch.
        if v >= 90000 {
            format!("{}.{}.{}", v / 10000, (v % 10000) / 100, v % 100)
        } else {
            format!("{}.{}.{}", v / 1000, (v % 1000) / 100, v % 100)
        }
    })
}

/// Formats a CUDA driver API version (e.g. 13000 -> "13.0").
pub fn format_cuda_version(v: i32) -> Option<String> {
    fmt_cuda_version(v as c_long)
}
