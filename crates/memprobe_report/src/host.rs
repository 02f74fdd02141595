//! What identifies the machine a report was measured on, beyond its CPU's
//! name: the instruction-set extensions that decide which kernels libtorch
//! runs (bf16 autocast on a CPU without AVX-512 BF16 or AMX is emulated and
//! can be many times slower than float32; with them it can be faster).

/// The instruction-set flags recorded in reports: those that change which
/// kernels run (x86: `/proc/cpuinfo` "flags"; Arm: "Features").
pub const RECORDED_FLAGS: &[&str] = &[
    "sse4_2",
    "avx",
    "avx2",
    "fma",
    "f16c",
    "avx512f",
    "avx512bw",
    "avx512vl",
    "avx512_vnni",
    "avx512_bf16",
    "avx512_fp16",
    "avx_vnni",
    "amx_tile",
    "amx_bf16",
    "amx_int8",
    "amx_fp16",
    "asimd",
    "asimdhp",
    "sve",
    "sve2",
    "bf16",
    "i8mm",
];

/// The [`RECORDED_FLAGS`] this machine's CPU has, in that order (empty when
/// `/proc/cpuinfo` cannot be read).
pub fn cpu_flags() -> Vec<String> {
    std::fs::read_to_string("/proc/cpuinfo").map(|text| cpu_flags_of(&text)).unwrap_or_default()
}

/// The [`RECORDED_FLAGS`] listed in a `/proc/cpuinfo` text (its first CPU).
pub fn cpu_flags_of(cpuinfo: &str) -> Vec<String> {
    let line = cpuinfo
        .lines()
        .find(|l| {
            let key = l.split(':').next().unwrap_or("").trim();
            key == "flags" || key == "Features"
        })
        .and_then(|l| l.split_once(':').map(|(_, v)| v))
        .unwrap_or("");
    let have: std::collections::HashSet<&str> = line.split_ascii_whitespace().collect();
    RECORDED_FLAGS.iter().filter(|f| have.contains(**f)).map(|f| (*f).to_string()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_of_x86_and_arm() {
        let x86 = "processor\t: 0\nmodel name\t: AMD EPYC\nflags\t\t: fpu sse4_2 avx avx2 fma avx512f avx512_bf16 xsave\n";
        assert_eq!(cpu_flags_of(x86), ["sse4_2", "avx", "avx2", "fma", "avx512f", "avx512_bf16"]);
        let arm = "processor\t: 0\nFeatures\t: fp asimd evtstrm sve bf16 i8mm\n";
        assert_eq!(cpu_flags_of(arm), ["asimd", "sve", "bf16", "i8mm"]);
        assert!(cpu_flags_of("").is_empty());
    }
}
