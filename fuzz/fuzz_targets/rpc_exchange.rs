//! Target 6: an LLVM-RPC buffer written by a hostile device, drained by the RPC host (see
//! `hostcall_fuzz_targets`).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| hostcall_fuzz_targets::rpc_exchange(data));
