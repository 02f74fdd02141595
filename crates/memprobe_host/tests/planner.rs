//! The variant planner (no libtorch): validation, skips, comparisons, the
//! combined row, FLOPs per row.

use memprobe_host::plan::{DeviceChoice, VariantConfig};
use memprobe_host::variants::{apply, plan, validate, Flags, WorkloadTraits};
use memprobe_report::{AmpDtype, VariantId};

fn traits(batch: i64) -> WorkloadTraits {
    WorkloadTraits {
        batch_size: batch,
        num_blocks: 4,
        has_conv: false,
        inplace_unsupported: None,
        checkpoint_unsupported: None,
        freeze_unsupported: None,
        dynamic_unsupported: Some("no spatial dim".into()),
        forward_flops_per_sample: Some(100.0),
    }
}

#[test]
fn planner_rejects_bad_accumulation_and_freeze() {
    let t = traits(12);
    assert!(validate(&Flags { accum: Some(0), ..Default::default() }, &t).unwrap_err().is_usage());
    let e = validate(&Flags { accum: Some(5), ..Default::default() }, &t).unwrap_err();
    assert!(e.to_string().contains("does not divide the batch size 12"), "{e}");
    assert!(validate(&Flags { freeze: Some(4), ..Default::default() }, &t).is_err());
    assert!(validate(&Flags { accum: Some(3), freeze: Some(3), ..Default::default() }, &t).is_ok());
}

#[test]
fn planner_skips_what_cannot_apply_on_cpu_and_combines_the_rest() {
    let v = plan(&Flags { all: true, ..Default::default() }, &traits(16), DeviceChoice::Cpu);
    let get = |id: VariantId| v.iter().find(|s| s.info.id == id).unwrap_or_else(|| panic!("no {id}"));
    assert!(get(VariantId::CudnnBenchmark).skip.as_deref().unwrap().contains("CUDA"));
    assert!(get(VariantId::PinMemory).skip.is_some());
    assert!(get(VariantId::ChannelsLast).skip.is_some());
    assert!(get(VariantId::Checkpoint).skip.is_none());
    assert_eq!(get(VariantId::CudnnBenchmarkDynamic).info.compared_to, Some(VariantId::DynamicShapes));
    assert_eq!(get(VariantId::NoGradEval).info.compared_to, Some(VariantId::EvalGrad));
    let c = &get(VariantId::Combined).config;
    assert!(c.amp.is_some() && c.accum == 4 && c.checkpoint && c.inplace && c.set_to_none && c.freeze == 1);
    assert!(!c.pin_memory && !c.cudnn_benchmark && !c.channels_last, "skipped flags leak into combined");
    assert_eq!(get(VariantId::Baseline).info.flops_per_step, Some(3.0 * 100.0 * 16.0));
    assert_eq!(get(VariantId::NoGradEval).info.flops_per_step, Some(100.0 * 16.0));
    assert_eq!(get(VariantId::Combined).info.precision, "bf16");
}

#[test]
fn the_combined_row_is_every_applicable_row_applied_to_the_baseline() {
    let v = plan(
        &Flags { accum: Some(2), checkpoint: true, set_to_none: true, freeze: Some(1), ..Default::default() },
        &traits(16),
        DeviceChoice::Cpu,
    );
    let combined = v.iter().find(|s| s.info.id == VariantId::Combined).expect("combined row");
    let mut expect = VariantConfig::baseline();
    for id in [VariantId::Accum(2), VariantId::Checkpoint, VariantId::SetToNone, VariantId::Freeze(1)] {
        apply(id, &mut expect);
    }
    assert_eq!(combined.config, expect);
    // Each single row is the baseline with its own change only.
    for s in v.iter().filter(|s| !matches!(s.info.id, VariantId::Baseline | VariantId::Combined)) {
        let mut one = VariantConfig::baseline();
        apply(s.info.id, &mut one);
        assert_eq!(s.config, one, "{}", s.info.id);
    }
}

#[test]
fn variant_ids_round_trip_through_their_names() {
    for id in [
        VariantId::Baseline,
        VariantId::Amp(AmpDtype::Bf16),
        VariantId::Amp(AmpDtype::Fp16),
        VariantId::Accum(4),
        VariantId::CudnnBenchmarkDynamic,
        VariantId::Freeze(2),
        VariantId::NoGradEval,
    ] {
        let s = id.to_string();
        assert_eq!(s.parse::<VariantId>().unwrap(), id);
        assert_eq!(serde_json::to_string(&id).unwrap(), format!("\"{s}\""));
    }
    assert!("accum-x".parse::<VariantId>().unwrap_err().contains("accum-x"));
    assert!(serde_json::from_str::<VariantId>("\"turbo\"").is_err());
}
