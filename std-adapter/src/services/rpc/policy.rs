//! Which opcode groups the host serves. In LLVM's design the device holds the host's authority
//! (it may name any host function, run `system()`, exit the host); here each group is off until
//! the embedding runtime turns it on, and the two that run arbitrary host code only through an
//! `unsafe` opt-in.

use crate::services::ending::device_may_end_process;
use hostcall_core::rpc::opcode::{libc, namespace, HOSTCALL, LIBC, ROCM};

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
    /// writes or printf to an opened file (also needs the console or printf group). Off by
    /// default.
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
/// let policy = policy.with_files();
/// assert!(policy.allows(OpcodeGroup::Files) && !policy.allows(OpcodeGroup::System));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RpcPolicy {
    console: bool,
    printf: bool,
    memory: bool,
    files: bool,
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
            files: false,
            host_calls: false,
            system: false,
            rocm: true,
        }
    }
}

impl RpcPolicy {
    /// Nothing served: every call is followed and refused.
    pub fn none() -> Self {
        Self {
            console: false,
            printf: false,
            memory: false,
            files: false,
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
            OpcodeGroup::Files => self.files,
            OpcodeGroup::Exit => device_may_end_process(),
            OpcodeGroup::HostCall => self.host_calls,
            OpcodeGroup::System => self.system,
            OpcodeGroup::Rocm => self.rocm,
        }
    }

    /// Also serve files (the device opens, reads, writes and removes host files by path).
    pub fn with_files(mut self) -> Self {
        self.files = true;
        self
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
