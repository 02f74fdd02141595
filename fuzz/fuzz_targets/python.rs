#![no_main]
//! memlint on arbitrary Python source: rules, renderers, fix loop.

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        memlint_fuzz::check_python(text);
    }
});
