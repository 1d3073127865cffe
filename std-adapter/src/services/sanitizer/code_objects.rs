//! Where the service looks a pc up: the code objects loaded in the process.

use std::sync::Arc;

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
/// ([`HsaRuntime::loaded_code_objects`]), listed afresh for each report.
#[derive(Clone, Debug, Default)]
pub struct HsaCodeObjects {
    /// The runtime to ask; `None`: the process's own, loaded and initialised for each lookup
    /// ([`HsaRuntime::new`]: `HOSTCALL_HSA_LIB`, else ROCm's library); where there is none (no
    /// ROCm, no GPU) the code object is unknown.
    pub runtime: Option<Arc<HsaRuntime>>,
}

impl HsaCodeObjects {
    /// Asks `runtime`.
    pub fn with_runtime(runtime: Arc<HsaRuntime>) -> Self {
        Self { runtime: Some(runtime) }
    }
}

impl CodeObjects for HsaCodeObjects {
    fn find(&self, pc: u64) -> Option<LoadedCodeObject> {
        let objects = match &self.runtime {
            Some(runtime) => runtime.loaded_code_objects(),
            None => HsaRuntime::new().and_then(|runtime| runtime.loaded_code_objects()),
        };
        objects.ok()?.into_iter().find(|object| object.contains(pc))
    }
}
