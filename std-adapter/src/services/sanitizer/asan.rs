//! The host AddressSanitizer runtime's entry point for errors found outside the process's own
//! code, looked up at run time, and the call ROCm's host makes through it.
//!
//! The signature, from LLVM compiler-rt (the AMDGPU nonself tests in `compiler-rt/test/asan`) and
//! ROCclr (`device/devsanitizer.hpp`), which declare it alike:
//!
//! ```c
//! void __asan_report_nonself_error(uptr *callstack, u32 n_callstack, uptr *addrs, u32 n_addrs,
//!                                  u64 *tids, u32 n_tids, bool is_write, u32 access_size,
//!                                  bool is_abort, const char *name, s64 vma_adjust, int fd,
//!                                  u64 file_extent_size, u64 file_extent_start);
//! ```

use std::ffi::{c_char, c_int, CStr};
use std::fs::File;
use std::os::fd::AsRawFd;

use super::report::SanitizerReport;
use super::uri::CodeObjectUri;
use crate::backend::hsa::LoadedCodeObject;

/// The symbol looked up.
pub const SYMBOL: &CStr = c"__asan_report_nonself_error";

/// The name ROCm passes as the reporting entity (`nonself_name`).
pub const NAME: &CStr = c"amdgpu";

/// `__asan_report_nonself_error`'s C type (see the [module docs](self)).
pub type ReportNonselfError = unsafe extern "C" fn(
    callstack: *mut u64,
    n_callstack: u32,
    addrs: *mut u64,
    n_addrs: u32,
    tids: *mut u64,
    n_tids: u32,
    is_write: bool,
    access_size: u32,
    is_abort: bool,
    name: *const c_char,
    vma_adjust: i64,
    fd: c_int,
    file_extent_size: u64,
    file_extent_start: u64,
);

/// The process's `__asan_report_nonself_error`, if any object in its global scope defines it
/// (`dlsym(RTLD_DEFAULT, ...)`: the executable and libraries loaded with `RTLD_GLOBAL`, as a
/// host built with `-fsanitize=address` links its runtime).
pub fn lookup() -> Option<ReportNonselfError> {
    // SAFETY: `dlsym` with the RTLD_DEFAULT pseudo-handle and a NUL-terminated name; it only
    // reads the loader's tables.
    let address = unsafe { libc::dlsym(libc::RTLD_DEFAULT, SYMBOL.as_ptr()) };
    // SAFETY: a non-null address of a symbol of this name is that function (declared as above by
    // compiler-rt); a null pointer is not a function, and is mapped to `None`.
    (!address.is_null())
        .then(|| unsafe { std::mem::transmute::<*mut libc::c_void, ReportNonselfError>(address) })
}

/// What `__asan_report_nonself_error` gets for the code object holding the pc, as ROCclr's
/// `UriLocator` derives it: the load delta; for a `file://` URI an open descriptor of the file,
/// the code object's size (the range's, else the file's) and offset; for a `memory://` URI the
/// range and no descriptor (-1); nothing known: `0, -1, 0, 0`.
#[derive(Debug, Default)]
pub struct CodeObjectFile {
    /// `vma_adjust`: the load delta.
    pub delta: i64,
    /// The open file (its descriptor is `fd`; -1 when `None`). Closed on drop.
    pub file: Option<File>,
    /// `file_extent_size`.
    pub size: u64,
    /// `file_extent_start`.
    pub offset: u64,
}

impl CodeObjectFile {
    /// Opens what `code_object` names (see the type's docs).
    pub fn open(code_object: Option<&LoadedCodeObject>) -> Self {
        let Some(object) = code_object else { return Self::default() };
        let delta = object.load_delta;
        match CodeObjectUri::parse(&object.uri) {
            Some(CodeObjectUri::File { path, offset, size }) => {
                let file = File::open(path).ok();
                let file_size = file.as_ref().and_then(|f| f.metadata().ok()).map_or(0, |m| m.len());
                Self { delta, file, size: size.filter(|&s| s != 0).unwrap_or(file_size), offset }
            }
            Some(CodeObjectUri::Memory { offset, size, .. }) => Self { delta, file: None, size, offset },
            None => Self { delta, ..Self::default() },
        }
    }

    /// The descriptor to pass: the open file's, else -1.
    pub fn fd(&self) -> c_int {
        self.file.as_ref().map_or(-1, |file| file.as_raw_fd())
    }
}

/// Calls `report_error` as ROCm's host does: `(&pc, 1, addrs, n, ids, n + 4, is_write, size,
/// is_abort, "amdgpu", delta, fd, size, offset)`, `ids = [device, wg x, wg y, wg z, local id per
/// lane]`. `is_abort` is passed as given (the caller applies its abort policy).
///
/// # Safety
/// `report_error` must be an `__asan_report_nonself_error` (e.g. from [`lookup`]).
pub unsafe fn report(
    report_error: ReportNonselfError,
    report: &SanitizerReport,
    is_abort: bool,
    code_object: &CodeObjectFile,
) {
    let mut callstack = [report.pc];
    let mut addrs = report.addresses();
    let mut ids = report.ids();
    let n = addrs.len() as u32; // at most 64 lanes
                                // SAFETY: the arrays live across the call with the lengths passed (`ids` has n + 4 entries);
                                // `NAME` is NUL-terminated and static; the descriptor stays open until `code_object` drops;
                                // the function is the one the caller's contract names.
    unsafe {
        report_error(
            callstack.as_mut_ptr(),
            1,
            addrs.as_mut_ptr(),
            n,
            ids.as_mut_ptr(),
            n + 4,
            report.is_write(),
            report.size as u32,
            is_abort,
            NAME.as_ptr(),
            code_object.delta,
            code_object.fd(),
            code_object.size,
            code_object.offset,
        )
    }
}
