//! Snapshot tests of the exporters on a fixed report, plus schema round-trip.
//! Regenerate the golden files with `MEMPROBE_BLESS=1 cargo test -p memprobe_report`.

use std::path::PathBuf;

use memprobe_report::export::{Exporter, JsonExporter, MarkdownExporter, TableExporter};
use memprobe_report::*;

fn run(repeat: u32, times: &[f64], rss_mib: u64) -> RunRecord {
    RunRecord {
        repeat,
        pid: 1000 + repeat,
        step_times_ms: times.to_vec(),
        timing_source: "host wall clock".into(),
        losses: vec![2.3; times.len()],
        samples_per_step: 64,
        memory: vec![MemoryFigure {
            metric: MemoryMetric::PeakRss,
            bytes: Some(rss_mib << 20),
            source: "getrusage ru_maxrss".into(),
            note: None,
        }],
        worker_wall_s: 1.5,
        sampler: None,
    }
}

fn variant(id: &str, compared_to: Option<&str>, status: VariantStatus, runs: Vec<RunRecord>) -> Variant {
    let parse = |s: &str| s.parse::<VariantId>().expect("a variant id");
    Variant {
        info: VariantInfo {
            id: parse(id),
            label: id.replace('-', " "),
            flag: compared_to.map(|_| format!("--{id}")),
            description: format!("{id} description"),
            compared_to: compared_to.map(parse),
            mode: Mode::Train,
            flops_per_step: Some(6.4e9),
            precision: if id.starts_with("amp") { "bf16".into() } else { "fp32".into() },
        },
        status,
        runs,
        correctness: Vec::new(),
        summary: None,
    }
}

fn fixture() -> Report {
    let mut accum = variant(
        "accum-4",
        Some("baseline"),
        VariantStatus::Ok,
        vec![run(0, &[5.0, 6.0, 7.0], 300), run(1, &[5.5, 6.5, 6.0], 310)],
    );
    accum.correctness.push(CorrectnessCheck {
        kind: "accum-grad-rel-err".into(),
        value: 3.2e-7,
        tolerance: 1e-5,
        passed: true,
        detail: "accumulated vs full batch".into(),
    });
    let mut r = Report {
        schema_version: SCHEMA_VERSION,
        tool: ToolInfo { name: "memprobe".into(), version: "0.1.0".into() },
        created_unix_s: 1_800_000_000,
        command: vec!["memprobe".into(), "bench".into(), "--accum".into(), "4".into()],
        environment: Environment {
            device_kind: "cpu".into(),
            device_name: "Test CPU".into(),
            driver_version: None,
            cuda_driver_version: None,
            torch_cuda_version: Some("13.0".into()),
            cudnn_version: None,
            torch_version: "2.11.0".into(),
            cpu_model: "Test CPU".into(),
            cpu_flags: vec!["avx2".into()],
            cpu_logical_cores: 2,
            torch_threads: 2,
            os: "linux 6.1".into(),
            peak_flops: vec![PeakFlops { precision: "fp32".into(), tflops: 1.0, source: "test".into() }],
        },
        workload: WorkloadInfo {
            name: "mlp".into(),
            size: "small".into(),
            description: "MLP".into(),
            batch_size: 64,
            input_shape: vec![64, 32],
            parameters: 1234,
            loss: "cross-entropy".into(),
            optimizer: "Adam".into(),
            train_flops_per_step: Some(6.4e9),
            flops_source: "analytic".into(),
        },
        settings: Settings { runs: 2, warmup_steps: 1, measured_steps: 3, seed: 0, schedule: vec![VariantId::Baseline, VariantId::Accum(4)] },
        sampler: None,
        variants: vec![
            variant("baseline", None, VariantStatus::Ok, vec![run(0, &[10.0, 11.0, 12.0], 400), run(1, &[10.5, 11.5, 10.0], 420)]),
            accum,
            variant("amp-bf16", Some("baseline"), VariantStatus::Oom { message: "DefaultCPUAllocator: not enough memory".into() }, vec![]),
            variant("pin-memory", Some("baseline"), VariantStatus::Skipped { reason: "no CUDA device".into() }, vec![]),
            variant(
                "inplace",
                Some("baseline"),
                VariantStatus::Crashed { exit_status: "signal: 6 (SIGABRT)".into(), stderr_tail: "abort".into() },
                vec![],
            ),
        ],
        complete: true,
        notes: vec!["a note".into()],
    };
    summarize(&mut r);
    r
}

fn golden(name: &str, actual: &str) {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/golden").join(name);
    if std::env::var_os("MEMPROBE_BLESS").is_some() {
        std::fs::write(&path, actual).unwrap();
        return;
    }
    let expected = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e} (run with MEMPROBE_BLESS=1 to create it)", path.display()));
    assert_eq!(actual, expected, "{name} changed; rerun with MEMPROBE_BLESS=1 if intended");
}

#[test]
fn summaries_are_derived_from_raw_runs() {
    let r = fixture();
    let b = r.variant(VariantId::Baseline).unwrap().summary.as_ref().unwrap();
    assert_eq!(b.step_time_ms.n, 6);
    assert_eq!(b.step_time_ms.median, 10.75);
    let a = r.variant(VariantId::Accum(4)).unwrap().summary.as_ref().unwrap();
    assert_eq!(a.step_time_ms.median, 6.0);
    assert!((a.speedup.unwrap() - 10.75 / 6.0).abs() < 1e-12);
    assert!((a.samples_per_s - 64.0 / 0.006).abs() < 1e-6);
    let m = &a.memory[0];
    assert_eq!(m.median_bytes, 305 << 20);
    assert_eq!(m.delta_bytes, Some((305i64 - 410) << 20));
    // 6.4 GFLOP in 6 ms = 1.0667 TFLOP/s against a 1 TFLOP/s peak.
    assert!((a.achieved_tflops.unwrap() - 6.4e9 / 0.006 / 1e12).abs() < 1e-9);
    assert!(a.mfu.is_some());
    assert!(r.variant(VariantId::Amp(AmpDtype::Bf16)).unwrap().summary.is_none(), "an OOM variant has no summary");
    assert_eq!(r.variant(VariantId::Amp(AmpDtype::Bf16)).unwrap().summary, None);
}

#[test]
fn json_round_trips_and_is_stable() {
    let r = fixture();
    let s = JsonExporter.render(&r).unwrap();
    let back = Report::from_json(&s).unwrap();
    assert_eq!(back, r);
    golden("report.json", &s);
}

#[test]
fn other_schema_versions_are_rejected() {
    let mut v: serde_json::Value = serde_json::from_str(&JsonExporter.render(&fixture()).unwrap()).unwrap();
    v["schema_version"] = serde_json::json!(99);
    let e = Report::from_json(&v.to_string()).unwrap_err();
    assert!(e.to_string().contains("unsupported report schema version 99"), "{e}");
}

#[test]
fn markdown_snapshot() {
    let md = MarkdownExporter.render(&fixture()).unwrap();
    assert!(md.contains("| accum 4 | 6.00 ± 0.75 ms |"), "{md}");
    assert!(md.contains("| amp bf16 | OOM [1] |"));
    // The reasons are footnotes, not cells: the table stays narrow.
    assert!(md.contains("| pin memory | skipped [2] |"));
    assert!(md.contains("[2] pin memory: skipped: no CUDA device"));
    assert!(md.contains("inconcl. · inconcl."), "2 runs per row cannot reach 95%");
    assert!(md.contains("crashed (signal: 6 (SIGABRT))"));
    golden("report.md", &md);
}

#[test]
fn table_snapshot() {
    let t = TableExporter { width: Some(200) }.render(&fixture()).unwrap();
    assert!(t.contains("device: Test CPU (cpu) | driver: none | CUDA: torch built with 13.0, no driver | torch: 2.11.0"));
    assert!(t.contains("[c1] accum 4: grad Δrel 3.2e-7 ok (tol 1e-5)"), "{t}");
    assert!(t.contains("[3] inplace: crashed (signal: 6 (SIGABRT))"), "{t}");
    assert!(t.contains("use --runs 4 or more for verdicts"), "{t}");
    // The terminal output fits 100 columns, whatever width is asked for.
    assert!(t.lines().all(|l| l.chars().count() <= 100), "{t}");
    golden("report.txt", &t);
}

#[test]
fn the_terminal_table_warns_about_spread_as_the_markdown_does() {
    let mut r = fixture();
    let spread = "the new runs spread too much to conclude reliably (CV 18% > 10%): more runs or a quieter machine";
    let accum = r.variants.iter_mut().find(|v| v.info.id == VariantId::Accum(4)).unwrap();
    accum.summary.as_mut().unwrap().time_verdict.as_mut().unwrap().warnings.push(spread.into());
    let table = TableExporter { width: None }.render(&r).unwrap();
    assert!(table.contains("warning (accum 4, step time): the new runs spread too much"), "{table}");
    assert!(table.contains("more runs or a quieter machine"), "{table}");
    let markdown = MarkdownExporter.render(&r).unwrap();
    assert!(markdown.contains(spread));
}

#[test]
fn the_terminal_table_says_when_a_check_ran_batch_norm_in_eval_mode() {
    let mut r = fixture();
    let accum = r.variants.iter_mut().find(|v| v.info.id == VariantId::Accum(4)).unwrap();
    accum.correctness[0].detail =
        "gradient accumulated over 4 micro-batches vs one full batch, same weights/data (batch norm in eval mode so samples are independent)".into();
    let table = TableExporter { width: None }.render(&r).unwrap();
    assert!(table.contains("check (accum 4): gradient accumulated") && table.contains("in training mode the two"), "{table}");
}
