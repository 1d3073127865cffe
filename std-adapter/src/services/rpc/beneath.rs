//! The Files group's confinement: every path a device names is resolved beneath the directory the
//! host named ([`RpcPolicy::with_files`](super::RpcPolicy::with_files)), by the kernel, never by
//! string checks: Linux's `openat2` with `RESOLVE_BENEATH` (no absolute path, no `..` above the
//! directory, no symlink that leads out of it, at any step) and `RESOLVE_NO_MAGICLINKS` (no
//! `/proc/*/fd`-style links). `remove` and `rename` resolve the path's parent that way and then
//! act on its last component relative to the parent's descriptor (`unlinkat`, `renameat`), which
//! follows no link. Where `openat2` is not there (Linux before 5.6, another Unix, a seccomp filter
//! answering `ENOSYS`) nothing is opened: every call is refused, saying why.

use std::ffi::{CStr, CString};
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::Path;

/// Why a path was not used.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Refused {
    /// It leads outside the directory (absolute, `..` above it, a symlink out, a magic link), or
    /// ends in `.` or `..` for `remove` or `rename`.
    Outside(&'static str),
    /// The directory cannot confine it: `openat2` is missing, or the directory did not open.
    Unconfinable(String),
}

impl std::fmt::Display for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Outside(why) => write!(f, "outside the files directory ({why})"),
            Self::Unconfinable(why) => write!(f, "files cannot be confined: {why}"),
        }
    }
}

/// What a confined call gives: its C result (the host call failed: -1 / null, as C says), or a
/// refusal (counted and logged by the caller).
pub(crate) type Confined<T> = Result<io::Result<T>, Refused>;

/// The directory a buffer's files are confined to, open (`O_PATH`) while the buffer is served.
#[derive(Debug)]
pub(crate) struct Beneath {
    dir: Result<OwnedFd, String>,
}

impl Beneath {
    /// Opens `path` as the root of a buffer's files. A directory that does not open refuses every
    /// call, saying why.
    pub(crate) fn open(path: &Path) -> Self {
        let dir = CString::new(path.as_os_str().as_encoded_bytes())
            .map_err(|_| "the directory's path holds a NUL".to_string())
            .and_then(|c_path| {
                // SAFETY: a NUL-terminated path; `open` returns a new descriptor or -1.
                let fd = unsafe {
                    ::libc::open(c_path.as_ptr(), ::libc::O_PATH | ::libc::O_DIRECTORY | ::libc::O_CLOEXEC)
                };
                if fd < 0 {
                    return Err(format!("{}: {}", path.display(), io::Error::last_os_error()));
                }
                // SAFETY: `fd` is a descriptor just opened, owned by nobody else.
                Ok(unsafe { OwnedFd::from_raw_fd(fd) })
            });
        if let Err(why) = &dir {
            log::error!("rpc: the files directory does not open ({why}): every file call is refused");
        }
        Self { dir }
    }

    /// `openat2(dir, path, flags, 0o666)` beneath the directory (the mode only with `O_CREAT`:
    /// `openat2` refuses one otherwise).
    pub(crate) fn open_file(&self, path: &CStr, flags: i32) -> Confined<OwnedFd> {
        let dir = self.dir.as_ref().map_err(|why| Refused::Unconfinable(why.clone()))?;
        let mode = if flags & ::libc::O_CREAT != 0 { 0o666 } else { 0 };
        openat2(dir, path, flags | ::libc::O_CLOEXEC, mode)
    }

    /// C's `remove(path)` beneath the directory: `unlinkat`, then `AT_REMOVEDIR` for a directory.
    pub(crate) fn remove(&self, path: &[u8]) -> Confined<()> {
        let (parent, name) = self.parent_of(path)?;
        Ok(parent.and_then(|parent| {
            // SAFETY: `parent` is an open directory; `name` is NUL-terminated.
            let mut result = unsafe { ::libc::unlinkat(parent.as_raw_fd(), name.as_ptr(), 0) };
            if result != 0 && io::Error::last_os_error().raw_os_error() == Some(::libc::EISDIR) {
                // SAFETY: as above.
                result = unsafe { ::libc::unlinkat(parent.as_raw_fd(), name.as_ptr(), ::libc::AT_REMOVEDIR) };
            }
            c_result(result)
        }))
    }

    /// C's `rename(from, to)` beneath the directory: `renameat` between the two parents.
    pub(crate) fn rename(&self, from: &[u8], to: &[u8]) -> Confined<()> {
        let (from_parent, from_name) = self.parent_of(from)?;
        let (to_parent, to_name) = self.parent_of(to)?;
        Ok(from_parent.and_then(|from_parent| {
            let to_parent = to_parent?;
            // SAFETY: two open directories and two NUL-terminated names.
            c_result(unsafe {
                ::libc::renameat(
                    from_parent.as_raw_fd(),
                    from_name.as_ptr(),
                    to_parent.as_raw_fd(),
                    to_name.as_ptr(),
                )
            })
        }))
    }

    /// The directory holding `path`'s last component, opened beneath the root, and that
    /// component (never `.` or `..`: they would name the parent or above it).
    fn parent_of(&self, path: &[u8]) -> Result<(io::Result<OwnedFd>, CString), Refused> {
        let end = path.iter().position(|&b| b == 0).unwrap_or(path.len());
        let mut path = &path[..end];
        while path.len() > 1 && path.ends_with(b"/") {
            path = &path[..path.len() - 1];
        }
        let (parent, name) = match path.iter().rposition(|&b| b == b'/') {
            Some(slash) => (&path[..slash.max(1)], &path[slash + 1..]),
            None => (&b"."[..], path),
        };
        if matches!(name, b"" | b"." | b"..") {
            return Err(Refused::Outside("a path ending in `.`, `..` or `/`"));
        }
        // Cannot fail: no NUL before `end`.
        let (parent, name) =
            (CString::new(parent).unwrap_or_default(), CString::new(name).unwrap_or_default());
        let dir = self.dir.as_ref().map_err(|why| Refused::Unconfinable(why.clone()))?;
        let parent = openat2(dir, &parent, ::libc::O_PATH | ::libc::O_DIRECTORY | ::libc::O_CLOEXEC, 0)?;
        Ok((parent, name))
    }
}

/// A C call's 0 / -1 as a result.
fn c_result(result: i32) -> io::Result<()> {
    if result == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// `struct open_how` of `linux/openat2.h` (its first version, 24 bytes).
#[repr(C)]
struct OpenHow {
    flags: u64,
    mode: u64,
    resolve: u64,
}

/// `openat2(dir, path, {flags, mode, RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS})`, retried while the
/// kernel reports a concurrent rename (`EAGAIN`).
#[cfg(target_os = "linux")]
fn openat2(dir: &OwnedFd, path: &CStr, flags: i32, mode: u64) -> Confined<OwnedFd> {
    let how = OpenHow {
        flags: flags as u32 as u64,
        mode,
        resolve: ::libc::RESOLVE_BENEATH | ::libc::RESOLVE_NO_MAGICLINKS,
    };
    for _ in 0..8 {
        // SAFETY: `dir` is open, `path` NUL-terminated, `how` a valid `open_how` of the size
        // passed; the call returns a new descriptor or -1.
        let fd = unsafe {
            ::libc::syscall(
                ::libc::SYS_openat2,
                dir.as_raw_fd(),
                path.as_ptr(),
                &how as *const OpenHow,
                std::mem::size_of::<OpenHow>(),
            )
        };
        if fd >= 0 {
            // SAFETY: a descriptor just opened, owned by nobody else.
            return Ok(Ok(unsafe { OwnedFd::from_raw_fd(fd as i32) }));
        }
        let error = io::Error::last_os_error();
        match error.raw_os_error() {
            Some(::libc::EAGAIN) => continue,
            Some(::libc::EXDEV) => return Err(Refused::Outside("it resolves outside the directory")),
            Some(::libc::ELOOP) => return Err(Refused::Outside("a magic link, or too many symlinks")),
            Some(::libc::ENOSYS) => {
                return Err(Refused::Unconfinable(
                    "openat2 is not available (Linux 5.6 or later needed)".into(),
                ))
            }
            _ => return Ok(Err(error)),
        }
    }
    Ok(Err(io::Error::from_raw_os_error(::libc::EAGAIN)))
}

/// No `openat2` here: nothing can be confined.
#[cfg(not(target_os = "linux"))]
fn openat2(_dir: &OwnedFd, _path: &CStr, _flags: i32, _mode: u64) -> Confined<OwnedFd> {
    Err(Refused::Unconfinable("openat2 is Linux's (5.6 or later)".into()))
}

/// The `open` flags and the `fdopen` mode of a C `fopen` mode (`r`, `w`, `a`, each with `+`, and
/// `b`, `x`, `e`, `m`, `c` as glibc takes them), or `None` for a mode C refuses.
pub(crate) fn open_flags(mode: &[u8]) -> Option<(i32, &'static CStr)> {
    let end = mode.iter().position(|&b| b == 0).unwrap_or(mode.len());
    let (&first, rest) = mode[..end].split_first()?;
    let plus = rest.contains(&b'+');
    let exclusive = rest.contains(&b'x');
    let access = if plus {
        ::libc::O_RDWR
    } else if first == b'r' {
        ::libc::O_RDONLY
    } else {
        ::libc::O_WRONLY
    };
    let (flags, mode): (i32, &'static CStr) = match (first, plus) {
        (b'r', false) => (0, c"r"),
        (b'r', true) => (0, c"r+"),
        (b'w', false) => (::libc::O_CREAT | ::libc::O_TRUNC, c"w"),
        (b'w', true) => (::libc::O_CREAT | ::libc::O_TRUNC, c"w+"),
        (b'a', false) => (::libc::O_CREAT | ::libc::O_APPEND, c"a"),
        (b'a', true) => (::libc::O_CREAT | ::libc::O_APPEND, c"a+"),
        _ => return None,
    };
    let exclusive = if exclusive && first != b'r' { ::libc::O_EXCL } else { 0 };
    Some((access | flags | exclusive, mode))
}
