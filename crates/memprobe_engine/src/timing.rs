//! Step timers: host wall clock on CPU, CUDA events on the GPU.

use std::time::Instant;

use crate::EngineError;

/// Times steps. CUDA events are recorded on the legacy default stream, which
/// libtorch uses unless told otherwise, and read after the last step so the
/// step loop is never synchronised by the timer.
pub enum StepTimer {
    /// Wall clock after each step (CPU ops are synchronous).
    Host {
        /// Start of the current step.
        start: Option<Instant>,
        /// Finished step times.
        times_ms: Vec<f64>,
    },
    /// CUDA event pairs.
    Cuda(CudaEvents),
}

impl StepTimer {
    /// A host timer.
    pub fn host() -> StepTimer {
        StepTimer::Host { start: None, times_ms: Vec::new() }
    }

    /// CUDA event timer on device 0; errors when the driver is missing.
    pub fn cuda() -> Result<StepTimer, EngineError> {
        Ok(StepTimer::Cuda(CudaEvents::new()?))
    }

    /// Describes the source for the report.
    pub fn source(&self) -> &'static str {
        match self {
            StepTimer::Host { .. } => {
                "host wall clock (Instant) around each step; CPU ops complete before the step returns"
            }
            StepTimer::Cuda(_) => "CUDA events (cudarc, cuEventElapsedTime) around each step on the default stream",
        }
    }

    /// Marks the start of a measured step.
    pub fn start(&mut self) -> Result<(), EngineError> {
        match self {
            StepTimer::Host { start, .. } => {
                *start = Some(Instant::now());
                Ok(())
            }
            StepTimer::Cuda(c) => c.record_start(),
        }
    }

    /// Marks the end of a measured step.
    pub fn stop(&mut self) -> Result<(), EngineError> {
        match self {
            StepTimer::Host { start, times_ms } => {
                if let Some(s) = start.take() {
                    times_ms.push(s.elapsed().as_secs_f64() * 1e3);
                }
                Ok(())
            }
            StepTimer::Cuda(c) => c.record_stop(),
        }
    }

    /// All step times in milliseconds (synchronises for CUDA).
    pub fn finish(self) -> Result<Vec<f64>, EngineError> {
        match self {
            StepTimer::Host { times_ms, .. } => Ok(times_ms),
            StepTimer::Cuda(c) => c.elapsed(),
        }
    }
}

/// Event pairs on CUDA device 0.
pub struct CudaEvents {
    ctx: std::sync::Arc<cudarc::driver::CudaContext>,
    stream: std::sync::Arc<cudarc::driver::CudaStream>,
    pairs: Vec<(cudarc::driver::CudaEvent, Option<cudarc::driver::CudaEvent>)>,
}

fn drv(what: &str, e: cudarc::driver::DriverError) -> EngineError {
    EngineError::Torch(format!("CUDA driver ({what}): {e:?}"))
}

impl CudaEvents {
    fn new() -> Result<CudaEvents, EngineError> {
        if !crate::env::cuda_driver_present() {
            return Err(EngineError::DeviceUnavailable("no NVIDIA driver found (libcuda not loadable)".into()));
        }
        // Retains the primary context, the one libtorch's runtime calls use.
        let ctx = cudarc::driver::CudaContext::new(0).map_err(|e| drv("context", e))?;
        let stream = ctx.default_stream();
        Ok(CudaEvents { ctx, stream, pairs: Vec::new() })
    }

    fn event(&self) -> Result<cudarc::driver::CudaEvent, EngineError> {
        // CU_EVENT_DEFAULT: timing enabled (cudarc's None would disable it).
        self.ctx
            .new_event(Some(cudarc::driver::sys::CUevent_flags::CU_EVENT_DEFAULT))
            .map_err(|e| drv("event", e))
    }

    fn record_start(&mut self) -> Result<(), EngineError> {
        let e = self.event()?;
        e.record(&self.stream).map_err(|e| drv("record", e))?;
        self.pairs.push((e, None));
        Ok(())
    }

    fn record_stop(&mut self) -> Result<(), EngineError> {
        let e = self.event()?;
        e.record(&self.stream).map_err(|e| drv("record", e))?;
        if let Some(last) = self.pairs.last_mut() {
            last.1 = Some(e);
        }
        Ok(())
    }

    fn elapsed(self) -> Result<Vec<f64>, EngineError> {
        let mut out = Vec::with_capacity(self.pairs.len());
        for (s, e) in &self.pairs {
            if let Some(e) = e {
                out.push(s.elapsed_ms(e).map_err(|e| drv("elapsed", e))? as f64);
            }
        }
        Ok(out)
    }
}
