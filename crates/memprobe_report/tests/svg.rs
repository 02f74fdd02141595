//! The SVG charts are valid pictures: each is parsed and rasterised with
//! resvg, and the bars and lines are found in the pixels.
//! `MEMPROBE_PNG_DIR=dir` keeps the PNGs for a look.

use memprobe_report::export::svg::{bench_svg, run_svg};
use memprobe_report::run::{AnyReport, ExitInfo, HostInfo, MemorySeries, ProcessSeries, RunReport};
use memprobe_report::{summarize, SamplerCost, ToolInfo};
use resvg::{tiny_skia, usvg};

fn rasterise(svg: &str, name: &str) -> tiny_skia::Pixmap {
    let mut opt = usvg::Options::default();
    opt.fontdb_mut().load_system_fonts();
    opt.fontdb_mut().set_sans_serif_family("DejaVu Sans");
    let tree = usvg::Tree::from_str(svg, &opt).expect("a valid SVG document");
    let size = tree.size().to_int_size();
    let mut pixmap = tiny_skia::Pixmap::new(size.width(), size.height()).expect("non-empty picture");
    pixmap.fill(tiny_skia::Color::WHITE);
    resvg::render(&tree, tiny_skia::Transform::default(), &mut pixmap.as_mut());
    let png = pixmap.encode_png().expect("PNG encoding");
    assert!(png.len() > 1000);
    if let Ok(dir) = std::env::var("MEMPROBE_PNG_DIR") {
        std::fs::write(std::path::Path::new(&dir).join(name), &png).expect("write PNG");
    }
    pixmap
}

/// Pixels close to `rgb` (after alpha blending on white).
fn count_near(p: &tiny_skia::Pixmap, rgb: (u8, u8, u8), tol: i32) -> usize {
    p.pixels()
        .iter()
        .filter(|c| {
            let c = c.demultiply();
            (c.red() as i32 - rgb.0 as i32).abs() <= tol
                && (c.green() as i32 - rgb.1 as i32).abs() <= tol
                && (c.blue() as i32 - rgb.2 as i32).abs() <= tol
        })
        .count()
}

fn blend(rgb: (u8, u8, u8), a: f64) -> (u8, u8, u8) {
    let f = |c: u8| (c as f64 * a + 255.0 * (1.0 - a)).round() as u8;
    (f(rgb.0), f(rgb.1), f(rgb.2))
}

#[test]
fn bench_bars_render() {
    let text = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/golden/report.json")).unwrap();
    let AnyReport::Bench(mut r) = AnyReport::from_json(&text).unwrap() else { panic!("a bench report") };
    summarize(&mut r);
    let svg = bench_svg(&r).unwrap();
    assert!(svg.starts_with("<svg"));
    let p = rasterise(&svg, "bench.png");
    assert_eq!(p.width(), 1100);
    let measured = r.variants.iter().filter(|v| v.summary.is_some()).count();
    // Every measured variant has a time bar (blue) and a memory bar (orange).
    let blue = count_near(&p, blend((31, 119, 180), 0.75), 6);
    let orange = count_near(&p, blend((255, 127, 14), 0.75), 6);
    assert!(blue > measured * 200 && orange > measured * 200, "blue {blue}, orange {orange}");
}

#[test]
fn run_timeline_renders_with_a_series_per_node() {
    let report = |host: &str, scale: u64| {
        let mut tree = MemorySeries::default();
        for i in 0..100 {
            tree.push(i as f64 * 0.05, (10 + (i / 25) * 100 * scale) << 20);
        }
        RunReport {
            schema_version: 1,
            kind: "run".into(),
            tool: ToolInfo { name: "memprobe".into(), version: "0".into() },
            created_unix_s: 0,
            host: HostInfo {
                hostname: host.into(),
                cpu_model: "cpu".into(),
                cpu_flags: Vec::new(),
                cpu_logical_cores: 2,
                memory_total_bytes: None,
                os: "linux".into(),
                driver_version: None,
            },
            command: vec!["python".into(), "train.py".into()],
            interval_ms: 50.0,
            duration_s: 5.0,
            exit: ExitInfo { code: Some(0), signal: None, signal_name: None },
            forwarded_signals: vec![],
            tree_rss: tree.clone(),
            tree_pss: MemorySeries::default(),
            processes: vec![ProcessSeries {
                pid: 1,
                ppid: 0,
                command: "python train.py".into(),
                rss: tree,
                hwm_bytes: None,
                pss: MemorySeries::default(),
                uss: MemorySeries::default(),
                cpu_s: None,
            }],
            gpus: vec![],
            gpu_note: Some("no NVIDIA driver found".into()),
            torch: None,
            sampler: SamplerCost { what: "x".into(), interval_ms: 50.0, samples: 100, mean_sample_us: 10.0, cpu_fraction: 0.01 },
            notes: vec![],
            step_settings: Default::default(),
            lint: None,
            summary: None,
        }
    };
    let one = run_svg(&[report("node0", 1)]).unwrap();
    let p = rasterise(&one, "run.png");
    let merged = run_svg(&[report("node0", 1), report("node1", 2)]).unwrap();
    assert!(merged.contains("node0: host RSS") && merged.contains("node1: host RSS"));
    let q = rasterise(&merged, "merged.png");
    let non_white = |p: &tiny_skia::Pixmap| p.pixels().iter().filter(|c| c.red() < 200 || c.green() < 200 || c.blue() < 200).count();
    assert!(non_white(&p) > 2000, "lines and axes drawn");
    assert!(non_white(&q) > non_white(&p), "two nodes draw more than one");
}
