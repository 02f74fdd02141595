//! The worker's stdin/stdout protocol, driven directly: a describe request on
//! the CPU, a measured run, and a malformed request.

use std::io::Write;
use std::process::{Command, Stdio};

use memprobe_host::plan::{
    BuiltinWorkload, DescribeRequest, DeviceChoice, DeviceRequest, SizePreset, VariantConfig, WorkerOutput, WorkerPlan,
    WorkerRequest, WorkerTask, WorkloadSpec,
};

const WORKER: &str = env!("CARGO_BIN_EXE_memprobe-worker");

fn ask(input: &[u8]) -> (i32, WorkerOutput) {
    let mut child = Command::new(WORKER)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start memprobe-worker");
    child.stdin.take().expect("stdin").write_all(input).expect("send request");
    let out = child.wait_with_output().expect("wait");
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text.lines().last().unwrap_or_else(|| panic!("no output; stderr: {}", String::from_utf8_lossy(&out.stderr)));
    (out.status.code().unwrap_or(-1), serde_json::from_str(line).expect("one JSON outcome"))
}

fn mlp() -> WorkloadSpec {
    WorkloadSpec::Builtin { workload: BuiltinWorkload::Mlp, size: SizePreset::Small, batch_size: Some(256) }
}

#[test]
fn describe_builds_the_workload_and_probes_the_machine() {
    let req = WorkerRequest::Describe(DescribeRequest { workload: mlp(), device: DeviceRequest::Cpu, seed: 0, threads: Some(1) });
    let (code, out) = ask(&serde_json::to_vec(&req).expect("json"));
    assert_eq!(code, 0);
    let WorkerOutput::Described(d) = out else { panic!("expected a description, got {out:?}") };
    assert_eq!(d.device, DeviceChoice::Cpu);
    assert_eq!(d.traits.batch_size, 256);
    assert!(d.traits.num_blocks >= 2);
    assert!(d.workload.parameters > 0);
    assert_eq!(d.environment.torch_version, "2.11.0");
    assert_eq!(d.environment.torch_threads, 1);
}

#[test]
fn describe_rejects_cuda_without_a_gpu_and_a_missing_model() {
    if std::path::Path::new("/dev/nvidiactl").exists() {
        return; // a GPU machine: --device cuda is valid there
    }
    let req = WorkerRequest::Describe(DescribeRequest { workload: mlp(), device: DeviceRequest::Cuda, seed: 0, threads: None });
    let (code, out) = ask(&serde_json::to_vec(&req).expect("json"));
    assert_eq!(code, 2);
    assert!(matches!(&out, WorkerOutput::Rejected { message } if message.contains("--device cuda")), "{out:?}");

    let req = WorkerRequest::Describe(DescribeRequest {
        workload: WorkloadSpec::TorchScript {
            path: "/nonexistent/m.pt".into(),
            input_shape: vec![2, 3],
            loss: memprobe_host::plan::LossKind::Mse,
        },
        device: DeviceRequest::Auto,
        seed: 0,
        threads: None,
    });
    let (code, out) = ask(&serde_json::to_vec(&req).expect("json"));
    assert_eq!(code, 2);
    assert!(matches!(&out, WorkerOutput::Rejected { message } if message.contains("/nonexistent/m.pt")), "{out:?}");
}

#[test]
fn measure_returns_step_times_and_peak_rss() {
    let plan = WorkerPlan {
        task: WorkerTask::Measure,
        workload: mlp(),
        device: DeviceChoice::Cpu,
        config: VariantConfig::baseline(),
        warmup_steps: 1,
        measured_steps: 2,
        seed: 0,
        repeat: 0,
        sample_interval_ms: 10,
        threads: Some(1),
    };
    let (code, out) = ask(&serde_json::to_vec(&WorkerRequest::Run(plan)).expect("json"));
    assert_eq!(code, 0);
    let WorkerOutput::Measured(m) = out else { panic!("expected a measurement, got {out:?}") };
    assert_eq!(m.step_times_ms.len(), 2);
    assert!(m.step_times_ms.iter().all(|t| t.is_finite() && *t > 0.0));
    assert_eq!(m.samples_per_step, 256);
    assert!(m.memory.iter().any(|f| f.bytes.is_some_and(|b| b > 50 << 20)));
}

#[test]
fn a_malformed_request_is_a_failed_outcome_not_a_panic() {
    let (code, out) = ask(b"{\"request\": \"nonsense\"}");
    assert_eq!(code, 3);
    assert!(matches!(&out, WorkerOutput::Failed { message } if message.contains("bad worker request")), "{out:?}");
}
