//! Which opcode groups the host serves. In LLVM's design the device holds the host's authority
//! (it may name any host function, run `system()`, open any path, exit the host); here each
//! group is off until the embedding runtime turns it on, the file calls reach only a directory
//! the host names, and the groups that run arbitrary host code or reach any path only through an
//! `unsafe` opt-in.
//!
//! The authority of each group, what a device that can reach the buffer may then do to the host:
//!
//! | group | on by default | a device may |
//! | --- | --- | --- |
//! | [`Console`](OpcodeGroup::Console) | yes | write bytes to the buffer's output sink (stdout, stderr) |
//! | [`Printf`](OpcodeGroup::Printf) | yes | the same, formatted (`%s` reads only the bytes it sent) |
//! | [`Memory`](OpcodeGroup::Memory) | yes | allocate and free device memory, within DEVMEM's budgets |
//! | [`Rocm`](OpcodeGroup::Rocm) | yes | call the listener's hostcall services (each has its own switch) |
//! | [`Files`](OpcodeGroup::Files) | no | read stdin; create, read, write, remove and rename files beneath the directory given to [`RpcPolicy::with_files`], with the host process's permissions; nothing outside it (no absolute path, no `..` above it, no symlink out, no `/proc` magic link) |
//! | files anywhere | no, `unsafe` | the same on any path the host process may open ([`RpcPolicy::with_files_anywhere`]: `/proc/self/mem` is the host's memory) |
//! | [`Exit`](OpcodeGroup::Exit) | no | end the host process: only where [`crate::services::ending`] allows it, for the whole process |
//! | [`HostCall`](OpcodeGroup::HostCall) | no, `unsafe` | run any host code at any address |
//! | [`System`](OpcodeGroup::System) | no, `unsafe` | run any shell command as the host process |

use crate::services::ending::device_may_end_process;
use hostcall_core::rpc::opcode::{libc, namespace, HOSTCALL, LIBC, ROCM};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// A group of opcodes that one switch of [`RpcPolicy`] turns on or off.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum OpcodeGroup {
    /// `NOOP` and the console writes (`WRITE_TO_STDOUT`, `_STDERR`, `_STDOUT_NEWLINE`, and
    /// `WRITE_TO_STREAM` to stdout or stderr), and the stream calls (`fflush`, `feof`, ...) on
    /// stdout and stderr, which touch nothing but the buffer's output sink. On by default.
    Console,
    /// The printf family to stdout or stderr. On by default.
    Printf,
    /// `MALLOC` and `FREE` through the backend's device memory. On by default.
    Memory,
    /// Files: open, close, read, `fgets`, the stream calls, remove, rename, reads of stdin, and
    /// writes or printf to an opened file (also needs the console or printf group), every path
    /// beneath the directory the host named ([`RpcPolicy::with_files`]). Off by default.
    Files,
    /// `EXIT` and `ABORT`, which end the host process: not a switch of the policy, but the one
    /// process-wide decision of [`crate::services::ending`] (off by default), which SANITIZER's
    /// abort consults too.
    Exit,
    /// `HOST_CALL`: a host function pointer the device names. Off; `unsafe` to enable.
    HostCall,
    /// `SYSTEM`: a shell command the device names. Off; `unsafe` to enable.
    System,
    /// ROCm clr's `'r'` opcodes and this project's `'h'` (any hostcall service id), served by the
    /// buffer's registered hostcall services (those services have their own switches). On by
    /// default.
    Rocm,
}

impl OpcodeGroup {
    /// The group of `opcode`, or `None` for an opcode this host does not know.
    pub fn of(opcode: u32) -> Option<Self> {
        if namespace(opcode) == ROCM {
            return (opcode & 0x00ff_ffff <= 3).then_some(Self::Rocm);
        }
        if namespace(opcode) == HOSTCALL {
            return Some(Self::Rocm);
        }
        if namespace(opcode) != LIBC {
            return None;
        }
        Some(match opcode {
            libc::NOOP
            | libc::WRITE_TO_STDOUT
            | libc::WRITE_TO_STDERR
            | libc::WRITE_TO_STDOUT_NEWLINE
            | libc::WRITE_TO_STREAM => Self::Console,
            libc::PRINTF_TO_STDOUT
            | libc::PRINTF_TO_STDERR
            | libc::PRINTF_TO_STREAM
            | libc::PRINTF_TO_STDOUT_PACKED
            | libc::PRINTF_TO_STDERR_PACKED
            | libc::PRINTF_TO_STREAM_PACKED => Self::Printf,
            libc::MALLOC | libc::FREE => Self::Memory,
            libc::EXIT | libc::ABORT => Self::Exit,
            libc::HOST_CALL => Self::HostCall,
            libc::SYSTEM => Self::System,
            libc::READ_FROM_STREAM..=libc::CLOSE_FILE
            | libc::FEOF..=libc::UNGETC
            | libc::REMOVE
            | libc::RENAME => Self::Files,
            _ => return None,
        })
    }
}

/// The opcode groups a buffer's host serves. The default serves console, printf, memory and
/// ROCm's opcodes; a refused call is still followed packet by packet (so the client does not
/// hang) and answered with its failure value, counted and logged.
///
/// ```
/// use hostcall::services::rpc::{OpcodeGroup, RpcPolicy};
/// let policy = RpcPolicy::default();
/// assert!(policy.allows(OpcodeGroup::Console) && !policy.allows(OpcodeGroup::Files));
/// let policy = policy.with_files(std::env::temp_dir());
/// assert!(policy.allows(OpcodeGroup::Files) && !policy.allows(OpcodeGroup::System));
/// assert_eq!(policy.files_dir(), Some(std::env::temp_dir().as_path()));
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RpcPolicy {
    console: bool,
    printf: bool,
    memory: bool,
    files: Option<FilesScope>,
    /// `false` only in [`RpcPolicy::none`]: exit and abort refused whatever the process allows.
    exit_not_denied: bool,
    host_calls: bool,
    system: bool,
    rocm: bool,
}

impl Default for RpcPolicy {
    fn default() -> Self {
        Self {
            console: true,
            printf: true,
            memory: true,
            files: None,
            exit_not_denied: true,
            host_calls: false,
            system: false,
            rocm: true,
        }
    }
}

impl RpcPolicy {
    /// Nothing served: every call is followed and refused (exit and abort too, even where the
    /// process lets devices end it).
    pub fn none() -> Self {
        Self {
            console: false,
            printf: false,
            memory: false,
            files: None,
            exit_not_denied: false,
            host_calls: false,
            system: false,
            rocm: false,
        }
    }

    /// Whether calls of `group` are served.
    pub fn allows(&self, group: OpcodeGroup) -> bool {
        match group {
            OpcodeGroup::Console => self.console,
            OpcodeGroup::Printf => self.printf,
            OpcodeGroup::Memory => self.memory,
            OpcodeGroup::Files => self.files.is_some(),
            OpcodeGroup::Exit => self.exit_not_denied && device_may_end_process(),
            OpcodeGroup::HostCall => self.host_calls,
            OpcodeGroup::System => self.system,
            OpcodeGroup::Rocm => self.rocm,
        }
    }

    /// Also serve files: the device opens, reads, writes, removes and renames host files by
    /// path, every path resolved beneath `dir` by the kernel (Linux 5.6's `openat2` with
    /// `RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS`; `remove` and `rename` relative to the path's
    /// parent opened that way). A path that leads out (absolute, `..` above `dir`, a symlink
    /// out, a magic link) is refused, counted in [`RpcCounters::refused_lanes`](super::RpcCounters::refused_lanes)
    /// and logged; where `openat2` is missing every file call is refused, saying so. `dir` is
    /// opened when the buffer's host is made (and held while it is served); one that does not open
    /// refuses every call, logged. LLVM's server resolves any path the device sends (see
    /// [`RpcPolicy::with_files_anywhere`]): this host does not, so that turning files on does not
    /// hand the device the host process's memory (`/proc/self/mem`) and every file it may open.
    pub fn with_files(mut self, dir: impl Into<PathBuf>) -> Self {
        self.files = Some(FilesScope::Beneath(dir.into().into()));
        self
    }

    /// Also serve files, on any path the host process may open, as LLVM's server does.
    ///
    /// # Safety
    /// The device then reads and writes whatever the host process may, its own memory included
    /// (`/proc/self/mem`): every kernel that can reach the buffer must be trusted with the whole
    /// host process, as for [`RpcPolicy::with_host_calls`].
    pub unsafe fn with_files_anywhere(mut self) -> Self {
        self.files = Some(FilesScope::Anywhere);
        self
    }

    /// The directory the file calls are confined to (`None`: files off, or anywhere).
    pub fn files_dir(&self) -> Option<&Path> {
        match &self.files {
            Some(FilesScope::Beneath(dir)) => Some(dir),
            _ => None,
        }
    }

    /// Where the file calls reach, if they are served.
    pub(crate) fn files_scope(&self) -> Option<&FilesScope> {
        self.files.as_ref()
    }

    /// Without the console writes (and the stream calls on stdout and stderr).
    pub fn without_console(mut self) -> Self {
        self.console = false;
        self
    }

    /// Without the printf family.
    pub fn without_printf(mut self) -> Self {
        self.printf = false;
        self
    }

    /// Without `MALLOC` and `FREE`.
    pub fn without_memory(mut self) -> Self {
        self.memory = false;
        self
    }

    /// Without ROCm's `'r'` opcodes and this project's `'h'`.
    pub fn without_rocm(mut self) -> Self {
        self.rocm = false;
        self
    }

    /// Also call host functions the device names.
    ///
    /// # Safety
    /// The device then runs any host code at any address with any argument: every kernel that
    /// can reach the buffer must be trusted with the whole host process.
    pub unsafe fn with_host_calls(mut self) -> Self {
        self.host_calls = true;
        self
    }

    /// Also run shell commands the device sends.
    ///
    /// # Safety
    /// As [`RpcPolicy::with_host_calls`]: the device gets the host process's authority.
    pub unsafe fn with_system(mut self) -> Self {
        self.system = true;
        self
    }
}

/// Where a buffer's file calls reach.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum FilesScope {
    /// Beneath this directory.
    Beneath(Arc<Path>),
    /// Any path (the `unsafe` opt-in).
    Anywhere,
}
