//! How a listener serves one LLVM-RPC buffer ([`RpcOptions`]): given when the buffer is added,
//! kept with the buffer's [`RpcHost`](super::RpcHost) while it is served.

use super::files::SharedFiles;
use super::RpcPolicy;
use crate::services::held::HeldAccount;
use crate::services::message::{DEFAULT_MAX_HELD_BYTES, DEFAULT_MAX_HELD_BYTES_PER_BUFFER};
use crate::services::printf::{PrintfSink, StdStreams, Stream};
use std::sync::{Arc, Mutex};

/// How a listener serves an LLVM-RPC buffer: which opcode groups ([`RpcPolicy`]), the budgets
/// ([`RpcLimits`]), and where console and printf output goes (the process's stdout and stderr
/// by default).
///
/// ```
/// use hostcall::services::rpc::{OpcodeGroup, RpcLimits, RpcOptions, RpcPolicy};
/// let options = RpcOptions::default()
///     .with_policy(RpcPolicy::default().with_files(std::env::temp_dir()))
///     .with_limits(RpcLimits::default().with_stream_bytes(4096));
/// assert!(options.policy.allows(OpcodeGroup::Files));
/// ```
#[derive(Clone, Debug, Default)]
#[non_exhaustive]
pub struct RpcOptions {
    /// The opcode groups served.
    pub policy: RpcPolicy,
    /// The budgets of the buffer's host.
    pub limits: RpcLimits,
    /// Where console writes and printf output to stdout and stderr go.
    pub sink: SharedSink,
    /// The buffer's file table, when the hosts of a pool's stripes share one (set by the pool;
    /// otherwise each host makes its own).
    pub(crate) files: Option<SharedFiles>,
    /// The buffer's account of held bytes, shared by the hosts of a pool's stripes as `files`.
    pub(crate) held: Option<Arc<HeldAccount>>,
}

/// Budgets of one buffer's RPC host.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct RpcLimits {
    /// Bytes kept of one lane's stream (a write, a path, a format string); a lane that declares
    /// more is read to its end, its bytes dropped, and answered as refused.
    pub stream_bytes: u64,
    /// Host files one buffer's device may hold open at once (its `FILE` table); an `fopen`
    /// past it gets a null `FILE`.
    pub open_files: u32,
    /// The most bytes the calls in progress on one buffer's ports may hold together (streams
    /// received, a printf's walk of its format, bytes read); a lane that would pass it is
    /// refused (followed to its end, answered with its call's failure value), counted and
    /// logged. 64 MiB by default, as PRINTF's open messages of one buffer
    /// ([`MessageLimits`](crate::services::message::MessageLimits)). See the
    /// [budgets](super#budgets).
    pub max_held_bytes_per_buffer: usize,
    /// The most bytes the calls in progress of all RPC buffers served through one registry (the
    /// listeners of one `Services`) may hold together, as for `max_held_bytes_per_buffer`;
    /// each buffer's calls are held to its own value of it. 256 MiB by default, as PRINTF's.
    pub max_held_bytes: usize,
    /// The most work one poll does for the calls of one buffer's host, in bytes: the packets
    /// its turns read and write (64 bytes a lane), the messages formatted and the bytes written
    /// or read for answers. A turn past it waits for the next poll, so other buffers of the
    /// listener are served meanwhile. At least one turn, and one lane's answer, a poll.
    /// 1 MiB by default; `usize::MAX` for no bound.
    pub poll_work_bytes: usize,
}

setters!(RpcLimits {
    with_stream_bytes: stream_bytes: u64,
    with_open_files: open_files: u32,
    with_max_held_bytes_per_buffer: max_held_bytes_per_buffer: usize,
    with_max_held_bytes: max_held_bytes: usize,
    with_poll_work_bytes: poll_work_bytes: usize,
});

/// 64 open files a buffer.
pub const DEFAULT_OPEN_FILES: u32 = 64;

/// 64 KiB a lane.
pub const DEFAULT_STREAM_BYTES: u64 = 64 << 10;

/// 1 MiB of work a poll.
pub const DEFAULT_POLL_WORK_BYTES: usize = 1 << 20;

impl Default for RpcLimits {
    fn default() -> Self {
        Self {
            stream_bytes: DEFAULT_STREAM_BYTES,
            open_files: DEFAULT_OPEN_FILES,
            max_held_bytes_per_buffer: DEFAULT_MAX_HELD_BYTES_PER_BUFFER,
            max_held_bytes: DEFAULT_MAX_HELD_BYTES,
            poll_work_bytes: DEFAULT_POLL_WORK_BYTES,
        }
    }
}

setters!(RpcOptions {
    with_policy: policy: RpcPolicy,
    with_limits: limits: RpcLimits,
    with_sink: sink: SharedSink,
});

impl RpcOptions {
    /// These options with one file table and one account of held bytes of their own, for every
    /// host made from them (the stripes of one buffer).
    pub(crate) fn with_one_file_table(mut self) -> Self {
        self.files = Some(SharedFiles::new(self.limits.open_files, self.policy.files_scope()));
        self.held = Some(Arc::default());
        self
    }

    /// The host of `ports` ports these options describe, its calls' held bytes charged to `all`
    /// too (the account of every RPC buffer of its registry).
    pub(crate) fn host(&self, ports: u32, all: Arc<HeldAccount>) -> super::RpcHost {
        let files = self
            .files
            .clone()
            .unwrap_or_else(|| SharedFiles::new(self.limits.open_files, self.policy.files_scope()));
        let buffer = self.held.clone().unwrap_or_default();
        super::RpcHost::with_shared(ports, self.policy.clone(), self.limits, files, buffer, all)
    }
}

/// A [`PrintfSink`] several hosts may write to (the stripes of a buffer a pool splits, or
/// several buffers): each write takes its lock.
///
/// ```
/// use hostcall::services::printf::{PrintfSink, Stream};
/// use hostcall::services::rpc::SharedSink;
/// let captured = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
/// let into = captured.clone();
/// let mut sink = SharedSink::from_fn(move |_stream, bytes| into.lock().unwrap().extend_from_slice(bytes));
/// sink.write_stream(Stream::Stdout, b"hi").unwrap();
/// assert_eq!(*captured.lock().unwrap(), b"hi");
/// ```
#[derive(Clone)]
pub struct SharedSink(Arc<Mutex<dyn PrintfSink + Send>>);

impl SharedSink {
    /// Shares `sink`.
    pub fn new(sink: impl PrintfSink + Send + 'static) -> Self {
        Self(Arc::new(Mutex::new(sink)))
    }

    /// A sink that hands each write to `write(stream, bytes)`.
    pub fn from_fn(write: impl FnMut(Stream, &[u8]) + Send + 'static) -> Self {
        struct Fn<F>(F);
        impl<F: FnMut(Stream, &[u8])> PrintfSink for Fn<F> {
            fn write_stream(&mut self, stream: Stream, bytes: &[u8]) -> std::io::Result<()> {
                (self.0)(stream, bytes);
                Ok(())
            }
        }
        Self::new(Fn(write))
    }
}

/// The process's stdout and stderr.
impl Default for SharedSink {
    fn default() -> Self {
        Self::new(StdStreams)
    }
}

impl PrintfSink for SharedSink {
    fn write_stream(&mut self, stream: Stream, bytes: &[u8]) -> std::io::Result<()> {
        // A sink that panicked holding the lock left nothing half-done that a write relies on.
        self.0.lock().unwrap_or_else(|p| p.into_inner()).write_stream(stream, bytes)
    }
}

impl std::fmt::Debug for SharedSink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SharedSink").finish_non_exhaustive()
    }
}
