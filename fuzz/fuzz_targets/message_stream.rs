//! Target 3: message streams and printf into the assembler and formatter (see `hostcall_fuzz_targets`).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| hostcall_fuzz_targets::message_stream(data));
