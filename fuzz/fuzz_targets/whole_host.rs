//! Target 4: device bytes against the whole host: poller or listener, the registry with its
//! built-in services, both protocols (see `hostcall_fuzz_targets`).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| hostcall_fuzz_targets::whole_host(data));
