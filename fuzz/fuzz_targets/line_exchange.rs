//! Target 4: the line protocol's exchange with a scribbling device (see `hostcall_fuzz_targets`).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| hostcall_fuzz_targets::line_exchange(data));
