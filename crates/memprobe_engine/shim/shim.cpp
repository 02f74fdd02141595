// Small C ABI over libtorch APIs that tch 0.24 does not wrap: autocast for any
// device/dtype, the caching allocator's statistics, and the fused AMP unscale.
// Every entry point catches C++ exceptions and reports them through `err`, so a
// missing accelerator or a bad argument never unwinds into Rust.
#include <ATen/ATen.h>
#include <ATen/DeviceAccelerator.h>
#include <ATen/autocast_mode.h>
#include <ATen/detail/CUDAHooksInterface.h>
#include <c10/core/CachingDeviceAllocator.h>
#include <torch/headeronly/version.h>

#include <cstdint>
#include <cstring>
#include <exception>
#include <vector>

namespace {
void write_err(char *err, size_t len, const char *msg) {
  if (err == nullptr || len == 0) return;
  std::strncpy(err, msg, len - 1);
  err[len - 1] = '\0';
}

at::DeviceType device_type(int device) {
  return device == 1 ? at::kCUDA : at::kCPU;
}

at::ScalarType scalar_type(int dtype) {
  return dtype == 1 ? at::kHalf : at::kBFloat16;
}
}  // namespace

extern "C" {

// Enables autocast for `device` (0 cpu, 1 cuda) with `dtype` (0 bf16, 1 fp16).
// Writes the previous enabled flag and dtype code so the caller can restore them.
int memprobe_autocast_enter(int device, int dtype, int *prev_enabled,
                            int *prev_dtype, char *err, size_t err_len) {
  try {
    auto dt = device_type(device);
    *prev_enabled = at::autocast::is_autocast_enabled(dt) ? 1 : 0;
    *prev_dtype = at::autocast::get_autocast_dtype(dt) == at::kHalf ? 1 : 0;
    at::autocast::set_autocast_dtype(dt, scalar_type(dtype));
    at::autocast::set_autocast_enabled(dt, true);
    at::autocast::increment_nesting();
    return 0;
  } catch (const std::exception &e) {
    write_err(err, err_len, e.what());
    return -1;
  }
}

// Mirrors torch.autocast.__exit__: the weight-cast cache is cleared when the
// outermost region ends, then the previous state is restored.
int memprobe_autocast_exit(int device, int prev_enabled, int prev_dtype,
                           char *err, size_t err_len) {
  try {
    auto dt = device_type(device);
    if (at::autocast::decrement_nesting() == 0) {
      at::autocast::clear_cache();
    }
    at::autocast::set_autocast_enabled(dt, prev_enabled != 0);
    at::autocast::set_autocast_dtype(dt, scalar_type(prev_dtype));
    return 0;
  } catch (const std::exception &e) {
    write_err(err, err_len, e.what());
    return -1;
  }
}

// Aggregate allocator statistics of the current accelerator (CUDA here).
// out: allocated current, allocated peak, reserved current, reserved peak,
//      active current, active peak, number of OOMs.
int memprobe_device_stats(int device_index, int64_t *out, char *err,
                          size_t err_len) {
  try {
    auto stats = at::accelerator::getDeviceStats(
        static_cast<c10::DeviceIndex>(device_index));
    const size_t agg = static_cast<size_t>(c10::CachingAllocator::StatType::AGGREGATE);
    out[0] = stats.allocated_bytes[agg].current;
    out[1] = stats.allocated_bytes[agg].peak;
    out[2] = stats.reserved_bytes[agg].current;
    out[3] = stats.reserved_bytes[agg].peak;
    out[4] = stats.active_bytes[agg].current;
    out[5] = stats.active_bytes[agg].peak;
    out[6] = stats.num_ooms;
    return 0;
  } catch (const std::exception &e) {
    write_err(err, err_len, e.what());
    return -1;
  }
}

int memprobe_reset_peak_stats(int device_index, char *err, size_t err_len) {
  try {
    at::accelerator::resetPeakStats(static_cast<c10::DeviceIndex>(device_index));
    return 0;
  } catch (const std::exception &e) {
    write_err(err, err_len, e.what());
    return -1;
  }
}

int memprobe_empty_cache(char *err, size_t err_len) {
  try {
    at::accelerator::emptyCache();
    return 0;
  } catch (const std::exception &e) {
    write_err(err, err_len, e.what());
    return -1;
  }
}

// torch.backends.cudnn.allow_tf32: cuDNN convolutions on Ampere and later
// GPUs run in TF32 by default (a 10-bit mantissa); the correctness checks
// compare fp32 arithmetic, so they turn it off for their own process.
int memprobe_set_cudnn_allow_tf32(int allow, char *err, size_t err_len) {
  try {
    at::globalContext().setAllowTF32CuDNN(allow != 0);
    return 0;
  } catch (const std::exception &e) {
    write_err(err, err_len, e.what());
    return -1;
  }
}

// The op torch.amp.GradScaler.unscale_ uses: multiplies every gradient by
// inv_scale in place and sets found_inf to 1 if any gradient is inf/NaN.
// `grads` are tch tensor handles (at::Tensor*), as are found_inf and inv_scale.
int memprobe_amp_unscale(void **grads, size_t n, void *found_inf,
                         void *inv_scale, char *err, size_t err_len) {
  try {
    std::vector<at::Tensor> list;
    list.reserve(n);
    for (size_t i = 0; i < n; ++i) {
      list.push_back(*static_cast<at::Tensor *>(grads[i]));
    }
    at::Tensor &fi = *static_cast<at::Tensor *>(found_inf);
    const at::Tensor &is = *static_cast<at::Tensor *>(inv_scale);
    at::_amp_foreach_non_finite_check_and_unscale_(list, fi, is);
    return 0;
  } catch (const std::exception &e) {
    write_err(err, err_len, e.what());
    return -1;
  }
}

// Sets a parameter's gradient to undefined (PyTorch's zero_grad(set_to_none=True)).
int memprobe_grad_set_none(void *tensor, char *err, size_t err_len) {
  try {
    at::Tensor &t = *static_cast<at::Tensor *>(tensor);
    t.mutable_grad() = at::Tensor();
    return 0;
  } catch (const std::exception &e) {
    write_err(err, err_len, e.what());
    return -1;
  }
}

// y.backward(dy): accumulates into the leaves' .grad like
// torch.autograd.backward(outputs, grad_outputs) in torch.utils.checkpoint,
// without materialising y * dy.
int memprobe_backward_with_grad(void *output, void *grad_output, char *err,
                                size_t err_len) {
  try {
    const at::Tensor &y = *static_cast<at::Tensor *>(output);
    const at::Tensor &dy = *static_cast<at::Tensor *>(grad_output);
    y.backward(dy);
    return 0;
  } catch (const std::exception &e) {
    write_err(err, err_len, e.what());
    return -1;
  }
}

// Returns 1 when `tensor` is laid out channels-last (NHWC strides).
int memprobe_is_channels_last(void *tensor) {
  try {
    const at::Tensor &t = *static_cast<at::Tensor *>(tensor);
    return t.dim() == 4 && t.is_contiguous(at::MemoryFormat::ChannelsLast) ? 1 : 0;
  } catch (...) {
    return 0;
  }
}

// Copies `tensor` into channels-last memory format (new tensor handle).
void *memprobe_to_channels_last(void *tensor, char *err, size_t err_len) {
  try {
    const at::Tensor &t = *static_cast<at::Tensor *>(tensor);
    return new at::Tensor(t.contiguous(at::MemoryFormat::ChannelsLast));
  } catch (const std::exception &e) {
    write_err(err, err_len, e.what());
    return nullptr;
  }
}

// libtorch version the binary runs with (compile-time headers match the lib).
void memprobe_torch_version(int *major, int *minor, int *patch) {
  *major = TORCH_VERSION_MAJOR;
  *minor = TORCH_VERSION_MINOR;
  *patch = TORCH_VERSION_PATCH;
}

// CUDA runtime version torch was built with (e.g. 13000), or -1 when the CUDA
// hooks are not loaded (libtorch_cuda missing).
long memprobe_cuda_runtime_version() {
  try {
    return at::detail::getCUDAHooks().versionCUDART();
  } catch (...) {
    return -1;
  }
}

// cuDNN version torch was built with, or -1.
long memprobe_cudnn_version() {
  try {
    return at::detail::getCUDAHooks().versionCuDNN();
  } catch (...) {
    return -1;
  }
}

}  // extern "C"
