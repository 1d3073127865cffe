//! Where the service looks a pc up: the code objects loaded in the process.

use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use crate::backend::hsa::{HsaRuntime, LoadedCodeObject};

/// Finds the loaded code object holding a device pc, at report time.
pub trait CodeObjects: Send + Sync {
    /// The loaded code object whose `load_base .. load_base + load_size` holds `pc`, if known.
    fn find(&self, pc: u64) -> Option<LoadedCodeObject>;
}

/// Knows no code object: every report says the code object is unknown.
#[derive(Clone, Copy, Debug, Default)]
pub struct NoCodeObjects;

impl CodeObjects for NoCodeObjects {
    fn find(&self, _pc: u64) -> Option<LoadedCodeObject> {
        None
    }
}

/// A fixed list (for tests, or a runtime that tracks its code objects itself).
impl CodeObjects for Vec<LoadedCodeObject> {
    fn find(&self, pc: u64) -> Option<LoadedCodeObject> {
        self.iter().find(|object| object.contains(pc)).cloned()
    }
}

/// The code objects the HSA runtime has loaded, through its loader extension
/// ([`HsaRuntime::loaded_code_objects`]), kept between reports.
///
/// Nothing here runs per report but a search of the kept list: the process's runtime (when
/// none is given) is opened once, at the first lookup, and kept (or, where there is none, its
/// absence is kept: every code object is then unknown, at no cost); the list is read again only
/// when it may have changed. The loader extension has no change notification, so "may have
/// changed" is: the list is older than [`MAX_LIST_AGE`], or a pc falls outside every code object
/// in it (a code object loaded since) and the list is older than [`MIN_RELIST_INTERVAL`]. So a
/// report costs at most one loader walk (bounded by
/// [`MAX_CODE_OBJECTS`](crate::backend::hsa::MAX_CODE_OBJECTS)), and a device sending reports
/// without end makes at most one walk per `MIN_RELIST_INTERVAL`.
#[derive(Debug, Default)]
pub struct HsaCodeObjects {
    /// The runtime given ([`HsaCodeObjects::with_runtime`]); `None`: the process's own.
    runtime: Option<Arc<HsaRuntime>>,
    /// The process's own runtime, opened at the first lookup ([`HsaRuntime::new`]:
    /// `HOSTCALL_HSA_LIB`, else ROCm's library); `None` inside where there is none.
    opened: OnceLock<Option<Arc<HsaRuntime>>>,
    /// The list last read, and when.
    list: Mutex<Option<(Instant, Vec<LoadedCodeObject>)>>,
}

/// The oldest a kept list of code objects is used.
pub const MAX_LIST_AGE: Duration = Duration::from_secs(1);
/// The least time between two readings of the list on a miss.
pub const MIN_RELIST_INTERVAL: Duration = Duration::from_millis(10);

impl HsaCodeObjects {
    /// Asks `runtime`.
    pub fn with_runtime(runtime: Arc<HsaRuntime>) -> Self {
        Self { runtime: Some(runtime), ..Self::default() }
    }

    /// The runtime to ask: the one given, or the process's own, opened once.
    fn runtime(&self) -> Option<&Arc<HsaRuntime>> {
        match &self.runtime {
            Some(runtime) => Some(runtime),
            None => self.opened.get_or_init(|| HsaRuntime::new().ok().map(Arc::new)).as_ref(),
        }
    }
}

impl CodeObjects for HsaCodeObjects {
    fn find(&self, pc: u64) -> Option<LoadedCodeObject> {
        let mut list = self.list.lock().unwrap_or_else(|p| p.into_inner());
        let now = Instant::now();
        if let Some((read, objects)) = list.as_ref() {
            let age = now.saturating_duration_since(*read);
            let found = objects.iter().find(|object| object.contains(pc));
            if age < MAX_LIST_AGE && (found.is_some() || age < MIN_RELIST_INTERVAL) {
                return found.cloned();
            }
        }
        let objects = self.runtime()?.loaded_code_objects().unwrap_or_default();
        let found = objects.iter().find(|object| object.contains(pc)).cloned();
        *list = Some((now, objects));
        found
    }
}
