//! Target 2: producer and host operations with hostile scribbles, checked against a model (see
//! `hostcall_fuzz_targets`).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| hostcall_fuzz_targets::producer_consumer_ops(data));
