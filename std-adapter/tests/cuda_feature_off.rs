//! Without the `cuda` feature there is nothing CUDA to test: say so, on the uncaptured stderr,
//! so the run shows it (`cargo test -p hostcall --features cuda --test cuda` runs the real tests).
#![cfg(not(feature = "cuda"))]

#[test]
fn cuda_tests_are_skipped_without_the_feature() {
    use std::io::Write;
    let _ =
        writeln!(std::io::stderr(), "SKIPPED: built without the cuda feature (tests/cuda.rs not compiled)");
}
