//! `HOSTCALL_HSA_LIB` overrides the library `detect()` loads.
//!
//! This file holds exactly one test, so setting the variable races with nothing: each
//! integration-test file is its own process.

use hostcall::backend::hsa::HsaError;
use hostcall::backend::{detect, BackendKind};
use hsa_sys::{HsaLib, LoadError, LIBRARY_ENV};

#[test]
fn the_environment_variable_names_the_library() {
    let path = "/nonexistent/hostcall-env-test/libhsa-runtime64.so.1";
    std::env::set_var(LIBRARY_ENV, path);
    assert_eq!(hsa_sys::library_path(), path);
    match HsaLib::load() {
        Err(LoadError::Open { path: tried, .. }) => assert_eq!(tried, path),
        other => panic!("expected the override to be tried, got {other:?}"),
    }
    let backend = detect();
    assert_eq!(backend.kind, BackendKind::Host);
    assert!(
        matches!(&backend.fallback, Some(HsaError::Load(LoadError::Open { path: tried, .. })) if tried == path)
    );
    println!("{}", backend.reason);
}
