//! Replays the seed corpus of every fuzz target: each file in `fuzz/seeds/<target>/` (the
//! hand-made seeds, and every crash a fuzzer ever found, minimised) through the target's function.
//!
//! A crash found by `cargo fuzz run TARGET` becomes a regression test by copying its minimised
//! input (`cargo fuzz tmin TARGET fuzz/artifacts/TARGET/crash-...`) into `fuzz/seeds/TARGET/`.

use std::path::{Path, PathBuf};

fn seed_files(target: &str) -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../fuzz/seeds").join(target);
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|entry| entry.expect("a readable directory entry").path())
        .filter(|path| path.is_file())
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no seeds in {}", dir.display());
    files
}

fn replay(target: &str, body: fn(&[u8])) {
    for file in seed_files(target) {
        let data = std::fs::read(&file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        // Printed before the run, so a failing seed is named in the test's output.
        println!("replaying {}", file.display());
        body(&data);
    }
}

#[test]
fn drain_buffer_image_seeds() {
    replay("drain_buffer_image", hostcall_fuzz_targets::drain_buffer_image);
}

#[test]
fn producer_consumer_ops_seeds() {
    replay("producer_consumer_ops", hostcall_fuzz_targets::producer_consumer_ops);
}

#[test]
fn line_exchange_seeds() {
    replay("line_exchange", hostcall_fuzz_targets::line_exchange);
}

#[test]
fn message_stream_seeds() {
    replay("message_stream", hostcall_fuzz_targets::message_stream);
}

#[test]
fn whole_host_seeds() {
    replay("whole_host", hostcall_fuzz_targets::whole_host);
}

/// Inputs no seed covers: empty, one byte, every opcode with no operands.
#[test]
fn degenerate_inputs() {
    for data in [&[][..], &[0], &[0xff], &[0x1f], &[0, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10]] {
        hostcall_fuzz_targets::drain_buffer_image(data);
        hostcall_fuzz_targets::producer_consumer_ops(data);
        hostcall_fuzz_targets::message_stream(data);
        hostcall_fuzz_targets::line_exchange(data);
        hostcall_fuzz_targets::whole_host(data);
    }
}

#[test]
fn rpc_exchange_seeds() {
    replay("rpc_exchange", hostcall_fuzz_targets::rpc_exchange);
}
