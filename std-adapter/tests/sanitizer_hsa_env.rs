//! SANITIZER's default code-object lookup opens the process's HSA runtime (here the stand-in,
//! through `HOSTCALL_HSA_LIB`) once, at the first report, and never again: 300 reports through a
//! listener initialise HSA once and list the loader's code objects once a second at most (it cost an `hsa_init`
//! per report, 27.5 ms each with ROCm's runtime and no GPU).
//!
//! This file holds exactly one test, so setting the variable races with nothing: each
//! integration-test file is its own process.
#![cfg(target_os = "linux")]

#[path = "common/hsa_standin.rs"]
mod standin;

use hostcall::prelude::*;
use hostcall::{
    services::sanitizer::{HsaCodeObjects, SanitizerConfig, MAX_LIST_AGE},
    HostMemory, HostcallBuffer, Listener, ListenerConfig, ParkingDoorbell, Wave,
};
use hostcall_core::SANITIZER;
use hsa_sys::LIBRARY_ENV;
use standin::{with_watchdog, StandIn};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

#[test]
fn reports_open_the_hsa_runtime_once() {
    with_watchdog(Duration::from_secs(120), || {
        let standin = StandIn::unconfigured("sanitizer-env");
        std::env::set_var(LIBRARY_ENV, standin.path());
        standin.set_code_objects("0 100000 10000 1048576 file:///tmp/kernel.co#offset=0&size=65536");
        let reports = Arc::new(AtomicUsize::new(0));
        let counted = reports.clone();
        let config = SanitizerConfig::default()
            .with_use_asan_runtime(false)
            // Relaxed: read on this thread after the listener shut down.
            .with_sink(Arc::new(move |_: &str| {
                counted.fetch_add(1, Ordering::Relaxed);
            }))
            .with_code_objects(Arc::new(HsaCodeObjects::default()));
        let doorbell: Arc<dyn Doorbell> = Arc::new(ParkingDoorbell::new());
        let listener = Listener::start(doorbell.clone(), ListenerConfig::default()).unwrap();
        listener.services().enable_sanitizer(config).unwrap();
        let buffer = Arc::new(HostcallBuffer::new(Arc::new(HostMemory), 4, doorbell).unwrap());
        listener.add(buffer.clone()).unwrap();
        let wave = Wave::new(buffer, 4);
        // 300 reports from distinct pcs in the code object (no two rate-limited together), no-abort.
        let started = std::time::Instant::now();
        for pc in 0..300u64 {
            let report = |lane: usize| {
                [0x1000 + lane as u64, 0x10_0000 + pc * 4, 0, 0, 0, lane as u64, u64::MAX << 32, 4]
            };
            wave.call(SANITIZER, report).unwrap();
        }
        drop(listener);
        assert_eq!(standin.calls("hsa_init").len(), 1, "HSA initialised once:\n{}", standin.log());
        // Listed once, and again only each time the list grew older than its age limit.
        let ages = 1 + (started.elapsed().as_secs_f64() / MAX_LIST_AGE.as_secs_f64()) as usize;
        let listings = standin.calls("hsa_system_get_major_extension_table").len();
        assert!((1..=ages).contains(&listings), "{listings} listings in {:?}", started.elapsed());
        assert!(reports.load(Ordering::Relaxed) > 0, "the reports were made");
    });
}
