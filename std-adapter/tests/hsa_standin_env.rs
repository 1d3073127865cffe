//! `HOSTCALL_HSA_LIB` makes `detect()` load the HSA stand-in, configured through its own
//! environment variables (`HSA_STANDIN_TOPOLOGY`, `HSA_STANDIN_FAIL`, `HSA_STANDIN_LOG`).
//!
//! This file holds exactly one test, so setting the variables races with nothing: each
//! integration-test file is its own process.
#![cfg(target_os = "linux")]

#[path = "common/hsa_standin.rs"]
mod standin;

use std::time::Duration;

use hostcall::backend::{detect, BackendKind};
use hsa_sys::{HsaStatus, LIBRARY_ENV};
use standin::{with_watchdog, StandIn};

#[test]
fn the_environment_selects_and_configures_the_stand_in() {
    with_watchdog(Duration::from_secs(120), || {
        let standin = StandIn::unconfigured("env");
        let log = standin::scratch_dir().join(format!("env-{}.log", std::process::id()));
        let _ = std::fs::remove_file(&log);
        std::env::set_var(LIBRARY_ENV, standin.path());
        std::env::set_var("HSA_STANDIN_TOPOLOGY", "cpus=2;gpus=3");
        std::env::set_var("HSA_STANDIN_FAIL", "hsa_signal_create:2");
        std::env::set_var("HSA_STANDIN_LOG", &log);

        let backend = detect();
        assert_eq!(backend.kind, BackendKind::Hsa, "{}", backend.reason);
        assert!(backend.reason.contains("3 GPU agent(s) (gpu0, gpu1, gpu2)"), "{}", backend.reason);
        assert_eq!(backend.runtime.as_ref().unwrap().cpu_agents().unwrap().len(), 2);
        let error = backend.new_doorbell().unwrap_err();
        assert_eq!(error.status(), Some(HsaStatus::ERROR_OUT_OF_RESOURCES), "{error}");
        drop(backend);
        standin.assert_released();

        let written = std::fs::read_to_string(&log).unwrap();
        let _ = std::fs::remove_file(&log);
        assert_eq!(written, standin.log(), "the log file holds the same lines as the log");
        assert!(
            written.contains("hsa_init topology=\"cpus=2;gpus=3\" fail=\"hsa_signal_create:2\""),
            "{written}"
        );
        assert!(written.contains("-> ERROR_OUT_OF_RESOURCES (injected)"), "{written}");
    });
}
