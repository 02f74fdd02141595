//! The process tree of a command, read from /proc: which processes descend
//! from the root PID, and each one's resident set size and high-water mark.

use std::collections::BTreeSet;
use std::fs;

/// One process's memory at one instant.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProcMem {
    /// Process id.
    pub pid: u32,
    /// Parent process id.
    pub ppid: u32,
    /// VmRSS, bytes.
    pub rss_bytes: u64,
    /// VmHWM (peak RSS so far), bytes.
    pub hwm_bytes: Option<u64>,
}

/// `root` and every live descendant. Uses the kernel's per-task `children`
/// lists when present, else a scan of /proc for parent PIDs.
pub fn descendants(root: u32) -> Vec<u32> {
    let mut out = vec![root];
    let mut seen = BTreeSet::from([root]);
    let have_children_files = fs::metadata(format!("/proc/{root}/task/{root}/children")).is_ok();
    if have_children_files {
        let mut i = 0;
        while i < out.len() {
            let pid = out[i];
            i += 1;
            let Ok(tasks) = fs::read_dir(format!("/proc/{pid}/task")) else { continue };
            for t in tasks.flatten() {
                let Ok(text) = fs::read_to_string(t.path().join("children")) else { continue };
                for c in text.split_ascii_whitespace().filter_map(|s| s.parse::<u32>().ok()) {
                    if seen.insert(c) {
                        out.push(c);
                    }
                }
            }
        }
        return out;
    }
    // Fallback: parent PIDs of every process.
    let mut parent = Vec::new();
    if let Ok(rd) = fs::read_dir("/proc") {
        for e in rd.flatten() {
            let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else { continue };
            if let Some(pp) = read_ppid(pid) {
                parent.push((pid, pp));
            }
        }
    }
    let mut changed = true;
    while changed {
        changed = false;
        for &(pid, pp) in &parent {
            if seen.contains(&pp) && seen.insert(pid) {
                out.push(pid);
                changed = true;
            }
        }
    }
    out
}

/// Whether the process exists, is not a zombie and has not begun to exit
/// (the kernel sets `PF_EXITING` before it releases the memory).
pub fn is_alive(pid: u32) -> bool {
    const PF_EXITING: u64 = 0x4;
    let Ok(stat) = fs::read_to_string(format!("/proc/{pid}/stat")) else { return false };
    // Fields after the command's closing parenthesis: state, ppid, pgrp,
    // session, tty_nr, tpgid, flags, ...
    let Some(rest) = stat.rfind(')').map(|i| &stat[i + 1..]) else { return false };
    let mut fields = rest.split_ascii_whitespace();
    let state = fields.next().unwrap_or("X");
    let flags: u64 = fields.nth(5).and_then(|f| f.parse().ok()).unwrap_or(0);
    state != "Z" && state != "X" && flags & PF_EXITING == 0
}

fn read_ppid(pid: u32) -> Option<u32> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // comm may contain spaces and parentheses: fields after the last ')'.
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_ascii_whitespace().nth(1)?.parse().ok()
}

/// CPU time the process has used so far (user + system, its threads
/// included, not its children), seconds, from /proc/PID/stat.
pub fn cpu_seconds(pid: u32) -> Option<f64> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &stat[stat.rfind(')')? + 1..];
    // After the command: state(0) ppid(1) ... utime(11) stime(12), in clock ticks.
    let mut f = rest.split_ascii_whitespace().skip(11);
    let utime: u64 = f.next()?.parse().ok()?;
    let stime: u64 = f.next()?.parse().ok()?;
    Some((utime + stime) as f64 / clock_ticks())
}

fn clock_ticks() -> f64 {
    static TICKS: std::sync::OnceLock<f64> = std::sync::OnceLock::new();
    *TICKS.get_or_init(|| {
        #[allow(unsafe_code)] // sysconf(3) with a constant name.
        let t = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
        if t > 0 {
            t as f64
        } else {
            100.0
        }
    })
}

/// Memory of one process from /proc/PID/status; `None` when it is gone (or a
/// zombie without memory).
pub fn proc_mem(pid: u32) -> Option<ProcMem> {
    let status = fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let mut rss = None;
    let mut hwm = None;
    let mut ppid = 0;
    for line in status.lines() {
        if let Some(v) = line.strip_prefix("VmRSS:") {
            rss = kib(v);
        } else if let Some(v) = line.strip_prefix("VmHWM:") {
            hwm = kib(v);
        } else if let Some(v) = line.strip_prefix("PPid:") {
            ppid = v.trim().parse().unwrap_or(0);
        }
    }
    Some(ProcMem { pid, ppid, rss_bytes: rss?, hwm_bytes: hwm })
}

/// `(Pss, Private_Clean + Private_Dirty)` of /proc/PID/smaps_rollup: the
/// proportional set size (a page shared by n processes counts 1/n in each,
/// so the sum over a tree is its real footprint: a forked DataLoader
/// worker's pages shared with its parent count once) and the unique set
/// size (what freeing this process alone would return). `None` where the
/// kernel does not give them. Costlier than /proc/PID/status: the kernel
/// walks the page tables.
pub fn smaps_rollup(pid: u32) -> (Option<u64>, Option<u64>) {
    let Ok(text) = fs::read_to_string(format!("/proc/{pid}/smaps_rollup")) else { return (None, None) };
    parse_smaps_rollup(&text)
}

/// The PSS and USS of a smaps_rollup text.
pub fn parse_smaps_rollup(text: &str) -> (Option<u64>, Option<u64>) {
    let mut pss = None;
    let (mut clean, mut dirty) = (None, None);
    for line in text.lines() {
        if let Some(v) = line.strip_prefix("Pss:") {
            pss = kib(v);
        } else if let Some(v) = line.strip_prefix("Private_Clean:") {
            clean = kib(v);
        } else if let Some(v) = line.strip_prefix("Private_Dirty:") {
            dirty = kib(v);
        }
    }
    let uss = match (clean, dirty) {
        (Some(c), Some(d)) => Some(c + d),
        _ => None,
    };
    (pss, uss)
}

fn kib(v: &str) -> Option<u64> {
    v.split_ascii_whitespace().next()?.parse::<u64>().ok().map(|k| k * 1024)
}

/// The command line of a process, arguments joined by spaces, at most
/// `max` characters.
pub fn cmdline(pid: u32, max: usize) -> String {
    let raw = fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
    let mut s: String =
        raw.split(|&b| b == 0).filter(|a| !a.is_empty()).map(|a| String::from_utf8_lossy(a).into_owned()).collect::<Vec<_>>().join(" ");
    if s.is_empty() {
        s = fs::read_to_string(format!("/proc/{pid}/comm")).map(|c| format!("[{}]", c.trim())).unwrap_or_default();
    }
    if s.chars().count() > max {
        s = s.chars().take(max.saturating_sub(1)).collect::<String>() + "…";
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_has_memory_and_a_command_line() {
        let me = std::process::id();
        let m = proc_mem(me).expect("own status");
        assert!(m.rss_bytes > 0 && m.hwm_bytes.unwrap_or(0) >= m.rss_bytes);
        assert!(!cmdline(me, 200).is_empty());
        assert_eq!(descendants(me)[0], me);
        assert!(proc_mem(u32::MAX - 1).is_none());
        assert!(smaps_rollup(me).0.is_some_and(|p| p > 0 && p <= m.rss_bytes), "{m:?}");
        let before = cpu_seconds(me).unwrap();
        let mut x = 0u64;
        let started = std::time::Instant::now();
        while started.elapsed() < std::time::Duration::from_millis(200) {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
        }
        std::hint::black_box(x);
        let used = cpu_seconds(me).unwrap() - before;
        assert!(used >= 0.05, "200 ms of spinning counted {used} s of CPU");
    }

    #[test]
    fn pss_and_uss_of_a_smaps_rollup() {
        let text = "00400000-7ffd [rollup]\nRss:  300 kB\nPss:  120 kB\nShared_Clean: 100 kB\nPrivate_Clean: 20 kB\nPrivate_Dirty: 80 kB\n";
        assert_eq!(parse_smaps_rollup(text), (Some(120 * 1024), Some(100 * 1024)));
        assert_eq!(parse_smaps_rollup(""), (None, None));
    }

    #[test]
    fn children_are_found() {
        let mut c = std::process::Command::new("sleep").arg("5").spawn().expect("sleep");
        let d = descendants(std::process::id());
        let _ = c.kill();
        let _ = c.wait();
        assert!(d.contains(&c.id()), "{d:?}");
    }
}
