//! The host files a buffer's device opened: a table of C `FILE`s (the host's C library does the
//! I/O, as in LLVM's server, so `fread`, `fgets`, `ungetc`, `fseek` behave as they do there), each
//! handed to the device as a handle the host checks, never a host pointer.
//!
//! A handle is `(generation << 32 | (index + 1)) << 2`: its low two bits 0 (the tag of a
//! non-standard stream, beside stdin 1, stdout 2, stderr 3), never 0 (C's null `FILE`), and a
//! handle kept after its `fclose` does not name the file opened next in its slot. The table holds
//! at most [`RpcLimits::open_files`](super::RpcLimits::open_files) files; they are closed when
//! the table is dropped (the buffer is no longer served). The pool's threads serving stripes of
//! one buffer share its table ([`SharedFiles`]), so a `FILE` opened on one port is good on all.
//!
//! Every path is resolved as the policy's [`FilesScope`] says: beneath the directory the host
//! named (`beneath`: the kernel resolves it, refusing any way out), or, after the `unsafe`
//! [`RpcPolicy::with_files_anywhere`](super::RpcPolicy::with_files_anywhere), as the host
//! process's C library resolves it.

use super::beneath::{open_flags, Beneath, Refused};
use super::policy::FilesScope;
use std::ffi::CString;
use std::os::fd::IntoRawFd;
use std::sync::{Arc, Mutex};

/// A C `FILE` the table owns.
struct CFile(std::ptr::NonNull<libc::FILE>);

// SAFETY: a C `FILE` may be used from any thread (POSIX stdio locks each `FILE` in every call);
// the table hands it to one call at a time, under its lock.
unsafe impl Send for CFile {}

impl Drop for CFile {
    fn drop(&mut self) {
        // SAFETY: the table owns the `FILE` (from `fopen`) and drops it once.
        unsafe { libc::fclose(self.0.as_ptr()) };
    }
}

struct Slot {
    generation: u32,
    file: Option<CFile>,
}

/// Where a table's paths lead.
enum Scope {
    /// The files group is off: nothing is opened.
    None,
    /// Beneath a directory.
    Beneath(Beneath),
    /// Wherever the host's C library resolves them.
    Anywhere,
}

/// One buffer's open files.
pub(crate) struct FileTable {
    slots: Vec<Slot>,
    budget: usize,
    scope: Scope,
}

/// A buffer's file table, shared by the hosts of its stripes.
#[derive(Clone)]
pub(crate) struct SharedFiles(Arc<Mutex<FileTable>>);

impl SharedFiles {
    /// A table of at most `budget` open files, its paths resolved as `scope` says (`None`: the
    /// files group is off).
    pub(crate) fn new(budget: u32, scope: Option<&FilesScope>) -> Self {
        let scope = match scope {
            None => Scope::None,
            Some(FilesScope::Beneath(dir)) => Scope::Beneath(Beneath::open(dir)),
            Some(FilesScope::Anywhere) => Scope::Anywhere,
        };
        Self(Arc::new(Mutex::new(FileTable { slots: Vec::new(), budget: budget as usize, scope })))
    }

    /// The table, for one call's work (a C stdio call holds no other lock of ours).
    pub(crate) fn lock(&self) -> std::sync::MutexGuard<'_, FileTable> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl std::fmt::Debug for SharedFiles {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SharedFiles").field("open", &self.lock().open()).finish()
    }
}

/// Why a file was not opened.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum OpenError {
    /// The table holds its budget of files.
    Budget,
    /// The host's `fopen` failed (or the path or mode held a NUL).
    Failed,
    /// The path leads outside the files directory, or cannot be confined.
    Refused(Refused),
}

/// The bytes before the first NUL, as a C string.
pub(crate) fn c_string(bytes: &[u8]) -> CString {
    let end = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
    // Cannot fail: no NUL before `end`.
    CString::new(&bytes[..end]).unwrap_or_default()
}

impl FileTable {
    /// Closes every file (the buffer is no longer served); handles given out name nothing.
    pub(crate) fn close_all(&mut self) {
        for slot in &mut self.slots {
            if slot.file.take().is_some() {
                slot.generation = slot.generation.wrapping_add(1);
            }
        }
    }

    /// Files open now.
    pub(crate) fn open(&self) -> usize {
        self.slots.iter().filter(|s| s.file.is_some()).count()
    }

    /// `fopen(path, mode)`: the handle for the device.
    pub(crate) fn fopen(&mut self, path: &[u8], mode: &[u8]) -> Result<u64, OpenError> {
        if self.open() >= self.budget {
            return Err(OpenError::Budget);
        }
        let file = match &self.scope {
            Scope::None => {
                return Err(OpenError::Refused(Refused::Unconfinable("the files group is off".into())))
            }
            Scope::Anywhere => {
                let (path, mode) = (c_string(path), c_string(mode));
                // SAFETY: two NUL-terminated strings; `fopen` returns an owned `FILE` or null.
                unsafe { libc::fopen(path.as_ptr(), mode.as_ptr()) }
            }
            Scope::Beneath(dir) => {
                let (flags, mode) = open_flags(mode).ok_or(OpenError::Failed)?;
                let fd = dir.open_file(&c_string(path), flags).map_err(OpenError::Refused)?;
                let fd = fd.map_err(|_| OpenError::Failed)?.into_raw_fd();
                // SAFETY: `fd` is open and ours; `mode` matches its access flags; on success the
                // `FILE` owns `fd`.
                let file = unsafe { libc::fdopen(fd, mode.as_ptr()) };
                if file.is_null() {
                    // SAFETY: `fdopen` failed, so `fd` is still ours, closed once here.
                    unsafe { libc::close(fd) };
                }
                file
            }
        };
        let file = std::ptr::NonNull::new(file).ok_or(OpenError::Failed)?;
        let index = match self.slots.iter().position(|s| s.file.is_none()) {
            Some(index) => index,
            None => {
                self.slots.push(Slot { generation: 0, file: None });
                self.slots.len() - 1
            }
        };
        let slot = &mut self.slots[index];
        slot.file = Some(CFile(file));
        Ok((u64::from(slot.generation) << 32 | (index as u64 + 1)) << 2)
    }

    /// C's `remove(path)` in the table's scope: 0 or -1, or refused.
    pub(crate) fn remove(&self, path: &[u8]) -> Result<i32, Refused> {
        match &self.scope {
            Scope::None => Err(Refused::Unconfinable("the files group is off".into())),
            // SAFETY: a NUL-terminated string, only read.
            Scope::Anywhere => Ok(unsafe { libc::remove(c_string(path).as_ptr()) }),
            Scope::Beneath(dir) => dir.remove(path).map(|r| if r.is_ok() { 0 } else { -1 }),
        }
    }

    /// C's `rename(from, to)` in the table's scope: 0 or -1, or refused.
    pub(crate) fn rename(&self, from: &[u8], to: &[u8]) -> Result<i32, Refused> {
        match &self.scope {
            Scope::None => Err(Refused::Unconfinable("the files group is off".into())),
            Scope::Anywhere => {
                let (from, to) = (c_string(from), c_string(to));
                // SAFETY: two NUL-terminated strings, only read.
                Ok(unsafe { libc::rename(from.as_ptr(), to.as_ptr()) })
            }
            Scope::Beneath(dir) => dir.rename(from, to).map(|r| if r.is_ok() { 0 } else { -1 }),
        }
    }

    fn slot(&mut self, handle: u64) -> Option<&mut Slot> {
        let value = handle >> 2;
        let index = (value & 0xffff_ffff).checked_sub(1)? as usize;
        let slot = self.slots.get_mut(index)?;
        (slot.file.is_some() && u64::from(slot.generation) == value >> 32).then_some(slot)
    }

    /// The `FILE` of a handle this table gave out and has not closed.
    pub(crate) fn get(&mut self, handle: u64) -> Option<*mut libc::FILE> {
        self.slot(handle).and_then(|s| s.file.as_ref()).map(|f| f.0.as_ptr())
    }

    /// `fclose`: its result, or `None` for a handle the table does not hold.
    pub(crate) fn fclose(&mut self, handle: u64) -> Option<i32> {
        let slot = self.slot(handle)?;
        let file = slot.file.take()?;
        slot.generation = slot.generation.wrapping_add(1);
        let raw = file.0.as_ptr();
        std::mem::forget(file);
        // SAFETY: the table owned the `FILE` (now forgotten, so closed once, here).
        Some(unsafe { libc::fclose(raw) })
    }
}

/// The host process's stdin as a C `FILE` (one for the process: C's own `stdin` is not visible
/// through the `libc` crate), made at the first read.
pub(crate) fn stdin() -> Option<*mut libc::FILE> {
    static STDIN: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    // SAFETY: `fdopen` of descriptor 0 read-only; the `FILE` lives for the process.
    let file = *STDIN.get_or_init(|| unsafe { libc::fdopen(0, c"r".as_ptr()) } as usize);
    (file != 0).then_some(file as *mut libc::FILE)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[cfg_attr(
        miri,
        ignore = "opens files in a temporary directory (the OS; Miri isolates the program from it)"
    )]
    fn handles_are_checked_budgeted_and_not_reused_stale() {
        let dir = std::env::temp_dir().join(format!("hostcall-files-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("a.txt");
        let path = path.to_str().unwrap().as_bytes();
        let files = SharedFiles::new(1, Some(&FilesScope::Anywhere));
        let mut table = files.lock();
        let first = table.fopen(path, b"w\0").unwrap();
        assert_eq!((first & 3, first != 0), (0, true));
        assert_eq!(table.fopen(path, b"w"), Err(OpenError::Budget));
        assert!(table.get(first).is_some() && table.get(first + 4).is_none() && table.get(0).is_none());
        assert_eq!(table.fclose(first), Some(0));
        assert_eq!(table.fclose(first), None, "closed once");
        let second = table.fopen(path, b"r").unwrap();
        assert_ne!(first, second);
        assert!(table.get(first).is_none(), "a stale handle names nothing");
        assert_eq!(table.fopen(b"/nonexistent/dir/x", b"r"), Err(OpenError::Budget));
        assert_eq!(table.fclose(second), Some(0));
        assert_eq!(table.fopen(b"/nonexistent/dir/x", b"r"), Err(OpenError::Failed));
        drop(table);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
