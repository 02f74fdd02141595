//! End-to-end tests of `memprobe run` on the CPU with real Python children:
//! peak and timeline of a known allocation, exit status, signal forwarding,
//! a process tree, bad input. No libtorch needed except the `--torch` test,
//! which uses the torch of `$MEMPROBE_PYTHON` when there is one.

use tests::*;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

static BIN: std::sync::LazyLock<std::path::PathBuf> = std::sync::LazyLock::new(memprobe_bin);
const MIB: f64 = 1024.0 * 1024.0;

/// A plain interpreter (not a shell shim, which would add processes).
fn python() -> String {
    std::env::var("MEMPROBE_PYTHON").ok().filter(|p| Path::new(p).exists()).unwrap_or_else(|| "/usr/bin/python3".into())
}

fn script(dir: &Path, name: &str, body: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, body).unwrap();
    p
}

/// Waits until the job under memprobe printed `ready` (its signal handler
/// is installed).
fn wait_ready(child: &mut std::process::Child) {
    let mut out = child.stdout.take().unwrap();
    let mut buf = [0u8; 6];
    std::io::Read::read_exact(&mut out, &mut buf).unwrap();
    assert_eq!(&buf, b"ready\n");
}

fn memprobe_run(args: &[&str]) -> Output {
    Command::new(&*BIN).arg("run").args(args).output().expect("run memprobe")
}

fn read_json(p: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(p).expect("report written")).expect("valid JSON")
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Parses and rasterises an SVG with resvg; `MEMPROBE_PNG_DIR` keeps the PNG.
fn assert_valid_svg(svg: &str, name: &str) {
    use resvg::{tiny_skia, usvg};
    let mut opt = usvg::Options::default();
    opt.fontdb_mut().load_system_fonts();
    let tree = usvg::Tree::from_str(svg, &opt).expect("valid SVG");
    let size = tree.size().to_int_size();
    let mut pixmap = tiny_skia::Pixmap::new(size.width(), size.height()).unwrap();
    pixmap.fill(tiny_skia::Color::WHITE);
    resvg::render(&tree, tiny_skia::Transform::default(), &mut pixmap.as_mut());
    let drawn = pixmap.pixels().iter().filter(|c| c.red() < 200 || c.green() < 200 || c.blue() < 200).count();
    assert!(drawn > 2000, "{name}: almost nothing drawn ({drawn} pixels)");
    if let Ok(dir) = std::env::var("MEMPROBE_PNG_DIR") {
        std::fs::write(Path::new(&dir).join(name), pixmap.encode_png().unwrap()).unwrap();
    }
}

const FOUR_STEPS: &str = r#"
import sys, time
time.sleep(0.5)
blocks = []
for i in range(4):
    blocks.append(bytearray(b"\x01") * (100 << 20))   # 100 MiB, every page touched
    time.sleep(0.5)
print("allocated", len(blocks))
sys.exit(3)
"#;

#[test]
fn four_steps_of_100_mib_show_as_a_400_mib_peak_and_a_staircase() {
    let dir = tempfile::tempdir().unwrap();
    let s = script(dir.path(), "four.py", FOUR_STEPS);
    let json = dir.path().join("run.json");
    let svg = dir.path().join("run.svg");
    let o = memprobe_run(&["--json", json.to_str().unwrap(), "--svg", svg.to_str().unwrap(), "--", &python(), s.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(3), "exit code passes through: {}", stderr(&o));
    assert_valid_svg(&std::fs::read_to_string(&svg).unwrap(), "run-four-steps.png");
    // `report` draws the same timeline from the JSON, and a markdown summary.
    let o2 = Command::new(&*BIN).args(["report", json.to_str().unwrap(), "--format", "svg"]).output().unwrap();
    assert!(o2.status.success());
    assert_valid_svg(&String::from_utf8_lossy(&o2.stdout), "report-four-steps.png");
    let o2 = Command::new(&*BIN).args(["report", json.to_str().unwrap(), "--format", "markdown"]).output().unwrap();
    assert!(String::from_utf8_lossy(&o2.stdout).contains("| host RSS, whole tree (1 process) "));
    assert_eq!(String::from_utf8_lossy(&o.stdout), "allocated 4\n", "stdout passes through");
    assert!(stderr(&o).contains("host RSS, whole tree"), "summary on stderr: {}", stderr(&o));

    let r = read_json(&json);
    assert_eq!(r["schema_version"], 1);
    assert_eq!(r["kind"], "run");
    assert_eq!(r["exit"]["code"], 3);
    assert_eq!(r["processes"].as_array().unwrap().len(), 1);
    let t: Vec<f64> = r["tree_rss"]["t_s"].as_array().unwrap().iter().map(|x| x.as_f64().unwrap()).collect();
    let b: Vec<f64> = r["tree_rss"]["bytes"].as_array().unwrap().iter().map(|x| x.as_f64().unwrap()).collect();
    assert!(b.len() > 100, "sampled every 10 ms over 2.5 s: {}", b.len());
    // The interpreter alone: the largest sample before the first allocation.
    let base = t.iter().zip(&b).filter(|(t, _)| **t > 0.2 && **t < 0.45).map(|(_, b)| *b).fold(0.0, f64::max);
    assert!(base > 1.0 * MIB && base < 60.0 * MIB, "interpreter RSS {:.1} MiB", base / MIB);
    let peak = b.iter().copied().fold(0.0, f64::max);
    let grown = peak - base;
    assert!((grown - 400.0 * MIB).abs() <= 40.0 * MIB, "peak - interpreter = {:.1} MiB, want 400 ± 10%", grown / MIB);
    // The timeline rises in four steps: levels 0..=4 appear in order, each
    // held over several samples, never going back down.
    let levels: Vec<i64> = b.iter().map(|x| ((x - base) / (100.0 * MIB)).round() as i64).collect();
    let mut runs: Vec<(i64, usize)> = Vec::new();
    for l in levels {
        match runs.last_mut() {
            Some((lv, n)) if *lv == l => *n += 1,
            _ => runs.push((l, 1)),
        }
    }
    let plateaus: Vec<i64> = runs.iter().filter(|(_, n)| *n >= 5).map(|(l, _)| *l).collect();
    assert_eq!(plateaus, vec![0, 1, 2, 3, 4], "plateaus {runs:?}");
    let summary = r["processes"][0]["hwm_bytes"].as_f64().unwrap();
    assert!(summary >= peak * 0.99, "VmHWM {summary} vs sampled peak {peak}");
}

#[test]
fn a_child_with_two_workers_shows_three_processes() {
    let dir = tempfile::tempdir().unwrap();
    let s = script(
        dir.path(),
        "spawn.py",
        "import subprocess, sys\n\
         ws = [subprocess.Popen([sys.executable, '-c', 'import time; x = bytearray(b\"\\\\x01\") * (30 << 20); time.sleep(1.0)']) for _ in range(2)]\n\
         print(sum(w.wait() for w in ws))\n",
    );
    let json = dir.path().join("run.json");
    let o = memprobe_run(&["--json", json.to_str().unwrap(), "--", &python(), s.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let r = read_json(&json);
    let procs = r["processes"].as_array().unwrap();
    assert_eq!(procs.len(), 3, "{:#?}", procs.iter().map(|p| p["command"].clone()).collect::<Vec<_>>());
    let root = procs[0]["pid"].as_u64().unwrap();
    assert!(procs[0]["command"].as_str().unwrap().contains("spawn.py"));
    for w in &procs[1..] {
        assert_eq!(w["ppid"].as_u64().unwrap(), root);
        assert!(w["command"].as_str().unwrap().contains("-c"));
        let peak = w["rss"]["bytes"].as_array().unwrap().iter().map(|x| x.as_f64().unwrap()).fold(0.0, f64::max);
        assert!(peak > 30.0 * MIB, "worker peak {:.1} MiB", peak / MIB);
    }
    // The tree sum sees both workers at once.
    let tree = r["tree_rss"]["bytes"].as_array().unwrap().iter().map(|x| x.as_f64().unwrap()).fold(0.0, f64::max);
    assert!(tree > 60.0 * MIB);
}

#[test]
fn sigint_reaches_the_child_and_the_report_is_complete() {
    let dir = tempfile::tempdir().unwrap();
    let mark = dir.path().join("got-signal");
    let s = script(
        dir.path(),
        "sig.py",
        &format!(
            "import signal, sys, time\n\
             def h(sig, frame):\n    open({:?}, 'w').write(str(sig)); sys.exit(42)\n\
             signal.signal(signal.SIGINT, h)\n\
             print('ready', flush=True)\n\
             time.sleep(60)\n",
            mark.to_str().unwrap()
        ),
    );
    let json = dir.path().join("run.json");
    let mut child = Command::new(&*BIN)
        .args(["run", "--json", json.to_str().unwrap(), "--", &python(), s.to_str().unwrap()])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Wait for the child to be ready (its handler installed).
    wait_ready(&mut child);
    let t0 = Instant::now();
    // SIGINT to memprobe only (as `kill -INT`), which must forward it.
    assert!(Command::new("kill").args(["-INT", &child.id().to_string()]).status().unwrap().success());
    let o = child.wait_with_output().unwrap();
    assert!(t0.elapsed() < Duration::from_secs(30), "the child did not stop");
    assert_eq!(o.status.code(), Some(42), "{}", stderr(&o));
    assert_eq!(std::fs::read_to_string(&mark).unwrap(), "2");
    let r = read_json(&json);
    assert_eq!(r["exit"]["code"], 42);
    assert!(r["forwarded_signals"][0].as_str().unwrap().starts_with("SIGINT (forwarded"), "{}", r["forwarded_signals"]);
    assert!(!r["tree_rss"]["bytes"].as_array().unwrap().is_empty());
    assert!(r["processes"][0]["command"].as_str().unwrap().contains("sig.py"));
    assert!(r["duration_s"].as_f64().unwrap() > 0.0);

    // A child killed by a signal: memprobe exits 128 + signal, as a shell does.
    let o = memprobe_run(&["--", "sh", "-c", "kill -TERM $$"]);
    assert_eq!(o.status.code(), Some(128 + 15), "{}", stderr(&o));
    assert!(stderr(&o).contains("killed by SIGTERM"), "{}", stderr(&o));
}

#[test]
fn bad_commands_and_options_fail_clearly() {
    let o = memprobe_run(&["--", "/nonexistent/prog"]);
    assert_eq!(o.status.code(), Some(127));
    assert!(stderr(&o).contains("cannot start /nonexistent/prog"), "{}", stderr(&o));
    let o = memprobe_run(&["--interval", "fast", "--", "true"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("not a duration"), "{}", stderr(&o));
    let o = memprobe_run(&[]);
    assert_eq!(o.status.code(), Some(2));
    // Refused before the command runs (usage error).
    let o = memprobe_run(&["--json", "/nonexistent-dir/r.json", "--", "true"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("/nonexistent-dir/r.json"), "{}", stderr(&o));
}

#[test]
fn torch_hook_reports_what_a_cpu_child_could_not_see() {
    let py = python();
    let has_torch = Command::new(&py).args(["-c", "import torch"]).stderr(Stdio::null()).status().is_ok_and(|s| s.success());
    if !has_torch {
        panic!("{py} has no torch: run the tests after `. scripts/torch-env.sh` (MEMPROBE_PYTHON)");
    }
    let dir = tempfile::tempdir().unwrap();
    // A user sitecustomize of their own still runs (the hook chains to it).
    let user = dir.path().join("user");
    std::fs::create_dir(&user).unwrap();
    std::fs::write(user.join("sitecustomize.py"), "import os\nos.environ['USER_SITECUSTOMIZE'] = 'ran'\n").unwrap();
    let s = script(
        dir.path(),
        "cpu_torch.py",
        "import os, torch\nx = torch.ones(1024, 1024)\nprint(os.environ.get('USER_SITECUSTOMIZE'), float(x.sum()))\n",
    );
    let json = dir.path().join("run.json");
    let o = Command::new(&*BIN)
        .args(["run", "--torch", "--interval", "20ms", "--json", json.to_str().unwrap(), "--", &py, s.to_str().unwrap()])
        .env("PYTHONPATH", &user)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(String::from_utf8_lossy(&o.stdout).trim(), "ran 1048576.0");
    let r = read_json(&json);
    let procs = r["torch"]["processes"].as_array().unwrap();
    assert_eq!(procs.len(), 1, "{}", r["torch"]);
    assert_eq!(procs[0]["torch_version"].as_str().unwrap().split('+').next(), Some("2.11.0"));
    assert_eq!(procs[0]["cuda"], false);
    assert!(procs[0]["note"].as_str().unwrap().contains("CUDA was never initialised"));
    assert!(r["torch"]["devices"].as_array().unwrap().is_empty());
    assert!(stderr(&o).contains("CUDA was never initialised"), "{}", stderr(&o));
}

#[test]
fn report_merges_the_nodes_of_a_job_and_rejects_bad_input() {
    let dir = tempfile::tempdir().unwrap();
    let mut paths = Vec::new();
    for node in 0..2 {
        let json = dir.path().join(format!("node{node}.json"));
        let o = memprobe_run(&["--quiet", "--json", json.to_str().unwrap(), "--", &python(), "-c", "x = bytearray(b'1') * (20 << 20)"]);
        assert!(o.status.success());
        // Two nodes of one job: give the second report its own host name.
        let mut r = read_json(&json);
        r["host"]["hostname"] = Value::from(format!("node{node}"));
        std::fs::write(&json, serde_json::to_string(&r).unwrap()).unwrap();
        paths.push(json.to_str().unwrap().to_string());
    }
    let o = Command::new(&*BIN).args(["report", &paths[0], &paths[1], "--merge", "--format", "svg"]).output().unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let svg = String::from_utf8_lossy(&o.stdout);
    assert!(svg.contains("node0: host RSS") && svg.contains("node1: host RSS"));
    assert_valid_svg(&svg, "merged.png");
    let o = Command::new(&*BIN).args(["report", &paths[0], &paths[1], "--merge", "--format", "markdown"]).output().unwrap();
    let md = String::from_utf8_lossy(&o.stdout);
    assert!(md.starts_with("# memprobe run, 2 nodes") && md.contains("## node0") && md.contains("## node1"), "{md}");
    // Several reports without --merge, a broken file, a missing file: exit 2 naming it.
    let o = Command::new(&*BIN).args(["report", &paths[0], &paths[1]]).output().unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("--merge"));
    let bad = dir.path().join("bad.json");
    std::fs::write(&bad, "{ not json").unwrap();
    let o = Command::new(&*BIN).args(["report", bad.to_str().unwrap()]).output().unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("bad.json"), "{}", stderr(&o));
    let out = dir.path().join("never.svg");
    let o = Command::new(&*BIN).args(["report", "/nonexistent/r.json", "-o", out.to_str().unwrap()]).output().unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(!out.exists(), "nothing half-written");
}

/// `--json -` is stdout; a device node and a symbolic link to it are
/// written, never replaced (as root, `/dev/stdout` was replaced by a file).
#[test]
fn report_to_stdout_and_special_files_is_written_in_place() {
    use std::os::unix::fs::FileTypeExt;
    let dir = tempfile::tempdir().unwrap();
    let o = Command::new(&*BIN).args(["run", "--quiet", "--json", "-", "--", "true"]).current_dir(dir.path()).output().unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let v: Value = serde_json::from_slice(&o.stdout).expect("the report on stdout");
    assert!(v.get("schema_version").is_some(), "{v}");
    assert!(!dir.path().join("-").exists(), "no file named -");
    let node = dir.path().join("null");
    if !Command::new("mknod").arg(&node).args(["c", "1", "3"]).status().is_ok_and(|s| s.success()) {
        eprintln!("device-node case skipped: mknod needs root");
        return;
    }
    std::os::unix::fs::symlink(&node, dir.path().join("stdout")).unwrap();
    let out = dir.path().join("stdout");
    let o = memprobe_run(&["--quiet", "--json", out.to_str().unwrap(), "--", "true"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(std::fs::symlink_metadata(&out).unwrap().file_type().is_symlink(), "the link stays a link");
    assert!(std::fs::metadata(&node).unwrap().file_type().is_char_device(), "the device stays a device");
}

/// An output path that cannot be written is refused before the job runs.
#[test]
fn output_paths_are_checked_before_the_job_runs() {
    let dir = tempfile::tempdir().unwrap();
    let marker = dir.path().join("ran");
    let missing = dir.path().join("missing/x.json");
    let o = memprobe_run(&["--json", missing.to_str().unwrap(), "--", "touch", marker.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("does not exist"), "{}", stderr(&o));
    assert!(!marker.exists(), "the job did not run");
}

/// A report that cannot be written after the job (its directory went
/// away) goes to the temporary directory, is named, and the exit status
/// is still the job's.
#[test]
fn a_failed_write_after_the_job_keeps_its_status_and_says_where_the_report_is() {
    let dir = tempfile::tempdir().unwrap();
    let out_dir = dir.path().join("out");
    std::fs::create_dir(&out_dir).unwrap();
    let json = out_dir.join("run.json");
    let job = format!("rm -rf '{}'; exit 3", out_dir.display());
    let o = memprobe_run(&["--quiet", "--json", json.to_str().unwrap(), "--", "sh", "-c", &job]);
    assert_eq!(o.status.code(), Some(3), "the job's status: {}", stderr(&o));
    let err = stderr(&o);
    let rescued = err.split("the JSON report is in ").nth(1).and_then(|r| r.split(" instead").next()).expect(&err);
    let v = read_json(Path::new(rescued));
    assert!(v.get("schema_version").is_some());
    let _ = std::fs::remove_file(rescued);
}

/// A NEW run that was killed (the OOM killer sends SIGKILL) or failed is a
/// regression, though it looks faster and smaller than BASE.
#[test]
fn compare_calls_a_crashed_run_a_regression() {
    let dir = tempfile::tempdir().unwrap();
    let (base, new, failed) = (dir.path().join("base.json"), dir.path().join("new.json"), dir.path().join("failed.json"));
    let py = python();
    let job = "import time; x = bytearray(64 << 20); time.sleep(0.5)";
    let o = memprobe_run(&["--quiet", "--json", base.to_str().unwrap(), "--", &py, "-c", job]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let o = memprobe_run(&["--quiet", "--json", new.to_str().unwrap(), "--", &py, "-c", "import os, signal; os.kill(os.getpid(), signal.SIGKILL)"]);
    assert_eq!(o.status.code(), Some(137), "{}", stderr(&o));
    let o = memprobe_run(&["--quiet", "--json", failed.to_str().unwrap(), "--", &py, "-c", "raise SystemExit(1)"]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    for (report, how) in [(&new, "killed by SIGKILL"), (&failed, "exited 1")] {
        let o = Command::new(&*BIN).args(["compare"]).arg(&base).arg(report).output().unwrap();
        let out = format!("{}{}", String::from_utf8_lossy(&o.stdout), stderr(&o));
        assert_eq!(o.status.code(), Some(1), "{out}");
        assert!(out.contains(&format!("NEW {how}: a failed run is a regression")), "{out}");
        assert!(out.contains("REGRESSION in run"), "{out}");
        let table = String::from_utf8_lossy(&o.stdout);
        assert!(table.lines().all(|l| l.chars().count() <= 100), "the terminal output fits 100 columns: {table}");
    }
}

/// Reports of different machines (CPU model, instruction sets) are not
/// compared unless asked: the difference would not be the code's.
#[test]
fn compare_refuses_reports_of_different_machines() {
    let dir = tempfile::tempdir().unwrap();
    let base = dir.path().join("base.json");
    let o = memprobe_run(&["--quiet", "--json", base.to_str().unwrap(), "--", "true"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let mut v = read_json(&base);
    assert!(v["host"]["cpu_flags"].is_array(), "the instruction sets are recorded: {}", v["host"]);
    v["host"]["cpu_model"] = "Another CPU".into();
    v["host"]["cpu_flags"] = serde_json::json!(["avx2", "avx512_bf16"]);
    let other = dir.path().join("other.json");
    std::fs::write(&other, serde_json::to_string(&v).unwrap()).unwrap();
    let o = Command::new(&*BIN).arg("compare").arg(&base).arg(&other).output().unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("CPU: BASE") && stderr(&o).contains("Another CPU"), "{}", stderr(&o));
    assert!(stderr(&o).contains("--allow-different-hosts"), "{}", stderr(&o));
    let o = Command::new(&*BIN).arg("compare").arg(&base).arg(&other).arg("--allow-different-hosts").output().unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("measured differently (allowed): CPU"), "{out}");
}

/// Forked workers share their parent's pages: the tree's footprint (PSS)
/// counts them once, RSS once per process. The report's peak tree PSS lies
/// within 10% of the smaps_rollup sum the job takes of itself.
#[test]
fn forked_workers_share_pages_and_pss_counts_them_once() {
    let dir = tempfile::tempdir().unwrap();
    let measured = dir.path().join("pss");
    let job = script(
        dir.path(),
        "fork.py",
        r#"
import os, sys, time
buf = bytearray(200 << 20)
for i in range(0, len(buf), 4096):
    buf[i] = 1
workers = []
for _ in range(2):
    pid = os.fork()
    if pid == 0:
        time.sleep(2.0)
        os._exit(0)
    workers.append(pid)
time.sleep(0.8)
def pss(pid):
    with open(f"/proc/{pid}/smaps_rollup") as f:
        return next(int(l.split()[1]) * 1024 for l in f if l.startswith("Pss:"))
open(sys.argv[1], "w").write(str(sum(pss(p) for p in [os.getpid()] + workers)))
for pid in workers:
    os.waitpid(pid, 0)
"#,
    );
    let json = dir.path().join("run.json");
    let o = memprobe_run(&["--quiet", "--json", json.to_str().unwrap(), "--", "/usr/bin/python3", job.to_str().unwrap(), measured.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let v = read_json(&json);
    let peak = |s: &Value| s["bytes"].as_array().unwrap().iter().filter_map(Value::as_u64).max().unwrap_or(0) as f64;
    let pss = peak(&v["tree_pss"]);
    let rss = peak(&v["tree_rss"]);
    let truth: f64 = std::fs::read_to_string(&measured).unwrap().trim().parse().unwrap();
    assert!((pss - truth).abs() / truth < 0.10, "tree PSS {:.0} MiB vs smaps_rollup sum {:.0} MiB", pss / MIB, truth / MIB);
    assert!(rss > 2.0 * pss, "RSS counts the shared pages once per process: RSS {:.0} MiB, PSS {:.0} MiB", rss / MIB, pss / MIB);
    let table = Command::new(&*BIN).args(["report", "--format", "markdown"]).arg(&json).output().unwrap();
    let table = String::from_utf8_lossy(&table.stdout);
    assert!(table.contains("host PSS, whole tree"), "{table}");
    // The JSON's summary holds what the table shows.
    assert_eq!(v["summary"]["peak_pss_bytes"].as_f64(), Some(pss));
    let rows = v["summary"]["rows"].as_array().unwrap();
    assert!(rows[0]["what"].as_str().unwrap().starts_with("host PSS, whole tree"), "{rows:?}");
    assert_eq!(rows[0]["peak_bytes"].as_f64(), Some(pss));
}

/// Short-lived helper processes (a shell loop, a pyenv shim) are one row,
/// and a command with line breaks stays on one line.
#[test]
fn short_lived_processes_are_one_row() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("run.json");
    let job = "for i in $(seq 20); do sleep 0.01; done\nexec /usr/bin/python3 -c 'import time\nx = bytearray(50 << 20)\ntime.sleep(1)'";
    let o = memprobe_run(&["--interval", "5ms", "--json", json.to_str().unwrap(), "--", "sh", "-c", job]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let table = stderr(&o);
    let rows = table.lines().filter(|l| l.starts_with('│')).count();
    assert!(rows <= 8, "{table}");
    assert!(table.contains("short-lived"), "{table}");
    let v = read_json(&json);
    assert!(v["processes"].as_array().unwrap().len() > 15, "each process is in the JSON");
    assert!(table.lines().next().unwrap().contains("time.sleep(1)"), "the command on one line: {table}");
}

/// A job that counts the SIGINTs it gets and stops a second after the first.
fn counting_job(dir: &Path) -> (PathBuf, PathBuf) {
    let count = dir.join("count");
    let s = script(
        dir,
        "count.py",
        &format!(
            "import signal, sys, time\n\
             n = 0\n\
             first = None\n\
             def h(sig, frame):\n    global n, first\n    n += 1\n    first = first or time.time()\n\
             signal.signal(signal.SIGINT, h)\n\
             print('ready', flush=True)\n\
             t = time.time()\n\
             while time.time() - t < 30 and not (first and time.time() - first > 1.0):\n    time.sleep(0.01)\n\
             open({:?}, 'w').write(str(n))\n\
             sys.exit(3)\n",
            count.to_str().unwrap()
        ),
    );
    (s, count)
}

/// A SIGINT sent to memprobe's whole process group (`kill -INT -PGID`, a
/// scheduler's killpg) reaches the command once, not twice.
#[test]
fn a_signal_to_the_process_group_reaches_the_command_once() {
    let dir = tempfile::tempdir().unwrap();
    let (job, count) = counting_job(dir.path());
    // memprobe leads a process group of its own, as a job in a shell does.
    let mut child = Command::new("setsid")
        .arg(&*BIN)
        .args(["run", "--quiet", "--", &python(), job.to_str().unwrap()])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_ready(&mut child);
    // setsid execs memprobe in place: its PID is the group's.
    assert!(Command::new("kill").args(["-INT", "--", &format!("-{}", child.id())]).status().unwrap().success());
    let o = child.wait_with_output().unwrap();
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    assert_eq!(std::fs::read_to_string(&count).unwrap(), "1", "the command got SIGINT once");
}

/// `timeout -s INT` signals memprobe and its group: the command gets it once.
#[test]
fn timeout_s_int_reaches_the_command_once() {
    let dir = tempfile::tempdir().unwrap();
    let (job, count) = counting_job(dir.path());
    let o = Command::new("timeout")
        .args(["--preserve-status", "-s", "INT", "2"])
        .arg(&*BIN)
        .args(["run", "--quiet", "--", &python(), job.to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    assert_eq!(std::fs::read_to_string(&count).unwrap(), "1", "the command got SIGINT once");
}

/// The command does not outlive memprobe: killed with it.
#[test]
fn the_command_dies_with_memprobe() {
    let dir = tempfile::tempdir().unwrap();
    let pidfile = dir.path().join("pid");
    let s = script(dir.path(), "sleeper.py", &format!("import os, time\nopen({:?}, 'w').write(str(os.getpid()))\ntime.sleep(60)\n", pidfile.to_str().unwrap()));
    let mut child = Command::new(&*BIN).args(["run", "--quiet", "--", &python(), s.to_str().unwrap()]).spawn().unwrap();
    let t0 = Instant::now();
    while std::fs::read_to_string(&pidfile).map(|p| p.is_empty()).unwrap_or(true) {
        assert!(t0.elapsed() < Duration::from_secs(30), "the job did not start");
        std::thread::sleep(Duration::from_millis(20));
    }
    let pid = std::fs::read_to_string(&pidfile).unwrap();
    child.kill().unwrap();
    child.wait().unwrap();
    let t0 = Instant::now();
    while Path::new(&format!("/proc/{pid}")).exists()
        && !std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default().contains(") Z")
    {
        assert!(t0.elapsed() < Duration::from_secs(10), "the job outlived memprobe");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// An `ab` report has a chart too: a panel per metric, A and B side by side.
#[test]
fn an_ab_report_renders_as_a_chart() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("ab.json");
    let py = python();
    let o = Command::new(&*BIN)
        .args(["ab", "--runs", "2", "--json", json.to_str().unwrap(), "--", &py, "-c", "x = bytearray(20 << 20)", "---", &py, "-c", "x = bytearray(60 << 20)"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let svg = dir.path().join("ab.svg");
    let o = Command::new(&*BIN).args(["report", "--format", "svg", "-o", svg.to_str().unwrap()]).arg(&json).output().unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let text = std::fs::read_to_string(&svg).unwrap();
    assert!(text.contains("wall time") && text.contains("peak PSS"), "a panel per metric");
    assert_valid_svg(&text, "ab.png");
}

#[test]
fn each_process_gets_its_cpu_time_and_share() {
    let dir = tempfile::tempdir().unwrap();
    // The parent spins for about 0.6 s while its child sleeps.
    let s = script(
        dir.path(),
        "cpu.py",
        "import subprocess, sys, time\nc = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(0.8)'])\n\
         t = time.time()\nx = 0\nwhile time.time() - t < 0.6:\n    x += 1\nc.wait()\n",
    );
    let json = dir.path().join("run.json");
    let o = memprobe_run(&["--json", json.to_str().unwrap(), "--", &python(), s.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let r = read_json(&json);
    let procs = r["processes"].as_array().unwrap();
    let cpu = |pick: &dyn Fn(&Value) -> bool| procs.iter().find(|p| pick(p)).and_then(|p| p["cpu_s"].as_f64()).unwrap();
    let parent = cpu(&|p| p["command"].as_str().unwrap().contains("cpu.py"));
    let child = cpu(&|p| p["command"].as_str().unwrap().contains("time.sleep"));
    // A loaded machine gives the spinning loop less than its 0.6 s of wall
    // time; the sleeping child still uses far less than it.
    assert!(parent >= 0.15 && parent > 3.0 * child, "the spinning parent used {parent} s of CPU, the sleeping child {child} s");
    assert!(stderr(&o).contains("% of a core)"), "{}", stderr(&o));
}
