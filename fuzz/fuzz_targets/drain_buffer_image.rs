//! Target 1: the host drains a buffer image the device chose (see `hostcall_fuzz_targets`).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| hostcall_fuzz_targets::drain_buffer_image(data));
