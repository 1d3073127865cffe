//! The SANITIZER service (id 4, PROTOCOL.md section 3.6): AddressSanitizer reports from device
//! code built with `-fsanitize=address`, handled once per packet as ROCm's host does.
//!
//! A faulting wave sends one packet; its active lanes are the faulting work-items. The service
//! decodes it ([`SanitizerReport`]: every lane's address and local id, lowest lane first; pc,
//! workgroup, access info and size from the first active lane), looks the pc up in the loaded
//! code objects ([`CodeObjects`]; by default the HSA loader extension's list, read once and kept),
//! and then:
//!
//! - where the process has an AddressSanitizer runtime (`__asan_report_nonself_error` found with
//!   `dlsym(RTLD_DEFAULT)`, [`asan::lookup`]), calls it exactly as ROCm does ([`asan::report`]):
//!   ASan prints the report, symbolised through the code object, and dies when asked to;
//! - otherwise prints this project's own report ([`SanitizerReport::text`]) to the configured
//!   [`ReportSink`] (stderr by default).
//!
//! Abort policy: a report the device marks as aborting stops the process after it is printed
//! (`std::process::abort`, as ASan does) only where the embedder lets devices end the process
//! ([`crate::services::ending`], off by default: ROCm aborts here; see there why this project
//! does not by default); otherwise it is printed, with a line saying the abort was refused (the
//! ASan runtime is then called with `is_abort = false`), counted with the service's packets, and
//! the program goes on. A "no abort" report never stops it. Reports that do not stop the process
//! are rate-limited per pc ([`SanitizerConfig::reports_per_pc`] per [`SanitizerConfig::window`],
//! in a table of at most [`MAX_PCS`] pcs). Every lane is answered with
//! `[0, 0]`; the device ignores the reply.
//!
//! ```
//! use hostcall::prelude::*;
//! use hostcall::{HostcallBuffer, HostMemory, Listener, ListenerConfig, ParkingDoorbell, Wave};
//! use hostcall::services::sanitizer::{NoCodeObjects, SanitizerConfig};
//! use std::sync::{Arc, Mutex};
//!
//! let doorbell: Arc<dyn Doorbell> = Arc::new(ParkingDoorbell::new());
//! let listener = Listener::start(doorbell.clone(), ListenerConfig::default()).unwrap();
//! let printed = Arc::new(Mutex::new(String::new()));
//! let sink = printed.clone();
//! let config = SanitizerConfig::default()
//!     .with_sink(Arc::new(move |text: &str| sink.lock().unwrap().push_str(text)))
//!     .with_code_objects(Arc::new(NoCodeObjects))
//!     .with_use_asan_runtime(false);
//! listener.services().enable_sanitizer(config).unwrap();
//! let buffer = Arc::new(HostcallBuffer::new(Arc::new(HostMemory), 4, doorbell).unwrap());
//! listener.add(buffer.clone()).unwrap();
//!
//! // A "no abort" 8-byte read by lane 0 (local id 3) of workgroup (1, 0, 0).
//! let no_abort_read = 0xffff_ffff_0000_0000;
//! Wave::new(buffer, 1).call(4, |_| [0xdead0, 0x1000, 1, 0, 0, 3, no_abort_read, 8]).unwrap();
//! assert!(printed.lock().unwrap().starts_with("==hostcall== AddressSanitizer: READ of size 8"));
//! listener.shutdown();
//! ```

pub mod asan;
mod code_objects;
mod limit;
mod report;
mod uri;

pub use code_objects::{CodeObjects, HsaCodeObjects, NoCodeObjects, MAX_LIST_AGE, MIN_RELIST_INTERVAL};
pub use limit::MAX_PCS;
pub use report::{slot, FaultingLane, SanitizerReport};
pub use uri::CodeObjectUri;

use std::io::Write;
use std::sync::Arc;
use std::time::Duration;

use hostcall_core::PacketRequest;

use crate::dispatch::registry::PacketService;
use crate::rate_limit::{WARNINGS_PER_WINDOW, WARNING_WINDOW};
use crate::services::ending::device_may_end_process;
use limit::PcLimits;

/// Where this project's own reports go (when no ASan runtime prints them): one call per report,
/// with its whole text.
pub trait ReportSink: Send + Sync {
    /// Print `text` (whole lines, each ending in `\n`).
    fn report(&self, text: &str);
}

impl<F: Fn(&str) + Send + Sync> ReportSink for F {
    fn report(&self, text: &str) {
        self(text)
    }
}

/// The process's stderr, the default [`ReportSink`].
#[derive(Clone, Copy, Debug, Default)]
pub struct Stderr;

impl ReportSink for Stderr {
    fn report(&self, text: &str) {
        let mut stderr = std::io::stderr().lock();
        let _ = stderr.write_all(text.as_bytes());
        let _ = stderr.flush();
    }
}

/// How the SANITIZER service reports.
#[derive(Clone)]
#[non_exhaustive]
pub struct SanitizerConfig {
    /// Call the process's `__asan_report_nonself_error` where it has one (default `true`).
    pub use_asan_runtime: bool,
    /// Where this project's own reports go (default: [`Stderr`]).
    pub sink: Arc<dyn ReportSink>,
    /// Where pcs are looked up (default: [`HsaCodeObjects`] of the process's HSA runtime).
    pub code_objects: Arc<dyn CodeObjects>,
    /// Reports that do not stop the process, printed per pc per [`SanitizerConfig::window`]
    /// (default [`WARNINGS_PER_WINDOW`]); the rest are counted and the next one printed says how
    /// many were suppressed.
    pub reports_per_pc: u32,
    /// The window of [`SanitizerConfig::reports_per_pc`] (default [`WARNING_WINDOW`]).
    pub window: Duration,
}

setters!(SanitizerConfig {
    with_use_asan_runtime: use_asan_runtime: bool,
    with_sink: sink: Arc<dyn ReportSink>,
    with_code_objects: code_objects: Arc<dyn CodeObjects>,
    with_reports_per_pc: reports_per_pc: u32,
    with_window: window: Duration,
});

impl Default for SanitizerConfig {
    fn default() -> Self {
        Self {
            use_asan_runtime: true,
            sink: Arc::new(Stderr),
            code_objects: Arc::new(HsaCodeObjects::default()),
            reports_per_pc: WARNINGS_PER_WINDOW,
            window: WARNING_WINDOW,
        }
    }
}

impl std::fmt::Debug for SanitizerConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SanitizerConfig")
            .field("use_asan_runtime", &self.use_asan_runtime)
            .field("reports_per_pc", &self.reports_per_pc)
            .field("window", &self.window)
            .finish_non_exhaustive()
    }
}

/// The line after a report the device marks as aborting, where devices may not end the process.
const REFUSED_ABORT_LINE: &str =
    "==hostcall==   (an aborting report; not aborting: allow_device_to_end_process is off)\n";

/// The SANITIZER packet service (see the [module docs](self)).
#[derive(Debug)]
pub struct SanitizerService {
    config: SanitizerConfig,
    limits: PcLimits,
}

impl SanitizerService {
    /// A service reporting as `config` says.
    pub fn new(config: SanitizerConfig) -> Self {
        let limits = PcLimits::new(config.reports_per_pc, config.window);
        Self { config, limits }
    }

    /// Reports one decoded packet: prints it (through ASan or the sink) unless rate-limited, and
    /// stops the process where the device asks and [`device_may_end_process`] allows it.
    pub fn report(&self, report: &SanitizerReport) {
        let refused_abort = report.is_abort() && !device_may_end_process();
        let stops = report.is_abort() && !refused_abort;
        let suppressed_before = if stops {
            0
        } else {
            match self.limits.admit(report.pc) {
                Some(suppressed) => suppressed,
                None => return,
            }
        };
        let code_object = self.config.code_objects.find(report.pc);
        let asan = if self.config.use_asan_runtime { asan::lookup() } else { None };
        match asan {
            Some(report_error) => {
                let file = asan::CodeObjectFile::open(code_object.as_ref());
                // SAFETY: `report_error` is the process's `__asan_report_nonself_error`.
                unsafe { asan::report(report_error, report, stops, &file) };
                if refused_abort {
                    self.config.sink.report(REFUSED_ABORT_LINE);
                }
            }
            None => {
                let mut text = report.text(code_object.as_ref());
                if suppressed_before > 0 {
                    text.push_str(&format!(
                        "==hostcall==   ({suppressed_before} earlier reports from this pc suppressed)\n"
                    ));
                }
                if refused_abort {
                    text.push_str(REFUSED_ABORT_LINE);
                }
                self.config.sink.report(&text);
            }
        }
        if stops {
            self.config.sink.report("==hostcall== ABORTING (allow_device_to_end_process)\n");
            std::process::abort();
        }
    }
}

impl PacketService for SanitizerService {
    fn serve(&self, packet: &mut PacketRequest<'_>) {
        if let Some(report) = SanitizerReport::from_packet(packet) {
            self.report(&report);
        }
        for lane in packet.lanes() {
            packet.reply(lane, [0, 0]);
        }
    }
}
