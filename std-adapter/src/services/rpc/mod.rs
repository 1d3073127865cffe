//! LLVM libc's GPU RPC opcodes served on the host ([`hostcall_core::rpc`] is the wire): the
//! `'c'` namespace as LLVM's own server does it, ROCm clr's `'r'` namespace onto this crate's
//! hostcall services, an opcode group policy ([`RpcPolicy`]) and budgets ([`RpcLimits`]).
//!
//! [`RpcHost`] keeps, per port, the call in progress: each turn the port is the host's, it
//! does what LLVM's server does between two waits for ownership, then hands the port back. It
//! never waits on a device, so a client that stops mid-call holds only its own port's few
//! words of state (and at most [`RpcLimits::stream_bytes`] a lane, within the budgets below).
//!
//! # Budgets
//!
//! | bound | default | when exceeded |
//! | --- | --- | --- |
//! | one lane's stream ([`RpcLimits::stream_bytes`]) | 64 KiB | the lane is read to its end, dropped, answered failed ([`RpcCounters::over_limit_lanes`]) |
//! | bytes the calls in progress of one buffer hold ([`RpcLimits::max_held_bytes_per_buffer`]) | 64 MiB, as PRINTF's | a lane that would pass it is followed to its end and answered failed ([`RpcCounters::held_refused_lanes`], logged) |
//! | bytes the calls in progress of all RPC buffers of one registry hold ([`RpcLimits::max_held_bytes`]) | 256 MiB, as PRINTF's | as above |
//! | work of one poll on one buffer's calls ([`RpcLimits::poll_work_bytes`]) | 1 MiB | the turn waits for the next poll ([`RpcCounters::deferred_turns`]) |
//! | host files open ([`RpcLimits::open_files`]) | 64 | `fopen` answers null ([`RpcCounters::open_files_refused`]) |
//!
//! The held bytes are charged with the message assembler's mechanism (each stream at its
//! declared size when it begins, so what a lane keeps is known before it arrives); the work of a
//! poll bounds what answering many held calls at once costs the listener's other buffers: a
//! printf of many large lanes is answered lane by lane over several polls. Where LLVM's server
//! allocates whatever the device declares and answers every lane in one go, this host refuses
//! past the budget and spreads the answers; the details, and why, are in `budget.rs`.
//!
//! Served: every opcode of LLVM's server at [`hostcall_core::rpc::UPSTREAM`]: `NOOP`, the console
//! writes, the printf family (to stdout, stderr or an opened file), `MALLOC` and `FREE` (through
//! the DEVMEM service), the files (`fopen`, `fclose`, `fread`, `fgets`, the stream calls,
//! `remove`, `rename`: C stdio on the host, every path beneath the directory the host names,
//! `FILE`s as checked handles, see `files`), `EXIT` and `ABORT` (ending the host only where
//! [`crate::services::ending`] allows it), `HOST_CALL`, `SYSTEM`, and the `'r'` and `'h'` opcodes (through the buffer's
//! [`Dispatch`]); each group only as the buffer's [`RpcPolicy`] allows (a refused call is
//! followed to its end and answered with C's failure value, counted in
//! [`RpcCounters::refused_lanes`] and logged, rate-limited; so are a stream past
//! [`RpcLimits::stream_bytes`] and an `fopen` past [`RpcLimits::open_files`], each in its own
//! counter). Any other opcode is answered as
//! LLVM's server answers an opcode it has no handler for (the port is handed back untouched,
//! `RPC_UNHANDLED_OPCODE`), counted in [`RpcCounters::unhandled`] and logged (rate-limited).
//! A listener keeps one host per RPC buffer it serves ([`crate::threads::listener::BufferOptions`]).
//!
//! ```
//! use hostcall::services::printf::Streams;
//! use hostcall::services::rpc::{RpcHost, RpcLimits, RpcPolicy};
//! use hostcall_core::rpc::{opcode::libc, Client, Header, LaneBuffer, Parts, View};
//! use hostcall_core::sync::AtomicU32;
//! use hostcall_core::ServiceTable;
//!
//! let words = |n| (0..n).map(|_| AtomicU32::new(0)).collect::<Vec<_>>();
//! let (a, b, locks) = (words(1), words(1), words(1));
//! let (headers, buffers) = (vec![Header::default()], vec![LaneBuffer::default()]);
//! let parts = Parts { lanes: 1, host_mailbox: &a, device_mailbox: &b, headers: &headers, buffers: &buffers };
//! let view = View::from_parts(parts).unwrap();
//! let mut host = RpcHost::new(1, RpcPolicy::default(), RpcLimits::default());
//! let mut sink = Streams { stdout: Vec::new(), stderr: Vec::new() };
//! let services = ServiceTable::<1>::new();
//!
//! let client = Client::new(view, &locks).unwrap();
//! std::thread::scope(|s| {
//!     s.spawn(|| {
//!         let mut port = client.try_open(libc::WRITE_TO_STDOUT_NEWLINE, 1, 0).unwrap();
//!         port.send_n(|_| b"hello from the device", &mut |_| true).unwrap();
//!         let mut written = 0;
//!         port.recv(|_, w| written = w[0], &mut |_| true).unwrap();
//!         port.close();
//!         assert_eq!(written, 22);
//!     });
//!     while host.counters().calls_done < 1 {
//!         host.drain(&view, &mut sink, &services);
//!     }
//! });
//! assert_eq!(sink.stdout, b"hello from the device\n");
//! ```

mod beneath;
mod budget;
mod call;
mod call_turn;
pub mod client;
mod console;
mod counters;
mod file_calls;
#[cfg(test)]
mod file_tests;
mod files;
mod gather;
mod memory;
mod options;
mod packet_turn;
mod policy;
mod printf;
mod stream_file;
#[cfg(test)]
mod tests;

pub use counters::RpcCounters;
pub use options::{
    RpcLimits, RpcOptions, SharedSink, DEFAULT_OPEN_FILES, DEFAULT_POLL_WORK_BYTES, DEFAULT_STREAM_BYTES,
};
pub use policy::{OpcodeGroup, RpcPolicy};

use call::Call;
pub(crate) use call::Context;

use crate::services::held::HeldAccount;
use crate::services::printf::PrintfSink;
use budget::{Held, PollWork};
use hostcall_core::rpc::{service_of, Turn, View};
use hostcall_core::{Dispatch, PacketRequest, Payload};
use std::sync::Arc;

/// The work a turn's packet costs, a lane (its 64 bytes read or written).
const PACKET_WORK: usize = 64;

/// The host of one LLVM-RPC buffer: the call in progress on each port, the policy and budgets,
/// the counters.
#[derive(Debug)]
pub struct RpcHost {
    policy: RpcPolicy,
    limits: RpcLimits,
    calls: Vec<Option<Call>>,
    counters: RpcCounters,
    /// Where `'r'` opcodes' lanes are copied for the hostcall services (host memory, never the
    /// shared buffer).
    scratch: Box<Payload>,
    /// The files the buffer's device opened (closed when the last host of the buffer goes).
    files: files::SharedFiles,
    /// What the calls hold, charged to the buffer's and all buffers' budgets.
    held: Held,
    /// The work budget of the drain in progress.
    work: PollWork,
    /// Whether the last turn counted a refusal.
    refused: bool,
    /// The last finished console write, kept for the next one's buffers (`console.rs`).
    spare_write: Option<Box<console::Write>>,
}

impl RpcHost {
    /// The host of a buffer of `ports` ports (its held bytes on budgets of its own: "all
    /// buffers" is this host's alone).
    pub fn new(ports: u32, policy: RpcPolicy, limits: RpcLimits) -> Self {
        let files = files::SharedFiles::new(limits.open_files, policy.files_scope());
        Self::with_shared(ports, policy, limits, files, Arc::default(), Arc::default())
    }

    /// A host of a buffer whose file table `files` and account of held bytes `buffer` other
    /// hosts (of other ports) share, `all` the account of every buffer of its registry.
    pub(crate) fn with_shared(
        ports: u32,
        policy: RpcPolicy,
        limits: RpcLimits,
        files: files::SharedFiles,
        buffer: Arc<HeldAccount>,
        all: Arc<HeldAccount>,
    ) -> Self {
        Self {
            policy,
            limits,
            calls: (0..ports).map(|_| None).collect(),
            counters: RpcCounters::default(),
            refused: false,
            spare_write: None,
            scratch: Box::default(),
            files,
            held: Held::new(&limits, buffer, all),
            work: PollWork::new(limits.poll_work_bytes),
        }
    }

    /// Host files the buffer's device holds open.
    pub fn open_files(&self) -> usize {
        self.files.lock().open()
    }

    /// The buffer is no longer served: closes its files (also those other hosts of its ports
    /// share) and drops the calls in progress.
    pub(crate) fn retire(&mut self) {
        self.files.lock().close_all();
        self.calls.iter_mut().for_each(|call| *call = None);
        self.spare_write = None;
        self.held.clear();
        self.counters.held_bytes = 0;
    }

    /// The counters so far.
    pub fn counters(&self) -> RpcCounters {
        self.counters
    }

    /// The counters so far, borrowed, and whether the last turn counted a refusal.
    pub(crate) fn counters_after_turn(&self) -> (&RpcCounters, bool) {
        (&self.counters, self.refused)
    }

    /// The most work one drain of this host's ports did so far, as counted against
    /// [`RpcLimits::poll_work_bytes`] (see the [budgets](self#budgets)).
    pub fn most_poll_work(&self) -> usize {
        self.work.most()
    }

    /// Ports with a call in progress (waiting for the device's next packet).
    pub fn calls_in_progress(&self) -> usize {
        self.calls.iter().flatten().count()
    }

    /// Bytes of device data the calls in progress hold, as charged to the budgets (streams at
    /// their declared size, a printf's walk of its format, bytes read): at most
    /// [`RpcLimits::max_held_bytes_per_buffer`], whatever the device sends (see the
    /// [budgets](self#budgets)).
    pub fn held_bytes(&self) -> usize {
        self.held.held()
    }

    /// Takes one turn on every port of `view` that is the host's; returns the turns taken.
    /// Console output goes to `sink`, `'r'` opcodes to `services`.
    pub fn drain<D: Dispatch + ?Sized>(
        &mut self,
        view: &View<'_>,
        sink: &mut dyn PrintfSink,
        services: &D,
    ) -> u32 {
        let ports = view.ports().min(self.calls.len() as u32);
        let mut turns = 0;
        for port in 0..ports {
            if let Some(turn) = view.turn(port) {
                self.serve(turn, sink, services);
                turns += 1;
            }
        }
        turns
    }

    /// Takes one turn: continues the port's call, or begins one from the header, then hands the
    /// port back.
    pub fn serve<D: Dispatch + ?Sized>(
        &mut self,
        mut turn: Turn<'_>,
        sink: &mut dyn PrintfSink,
        services: &D,
    ) {
        self.take_turn(&mut turn, sink, services);
        turn.finish();
    }

    /// [`RpcHost::serve`] without handing the port back (the caller finishes the turn, as a
    /// poller's drain does). Returns `false` when the turn was an opcode this host does not serve
    /// (the port is left untouched) or a port past this host's count.
    pub fn take_turn<D: Dispatch + ?Sized>(
        &mut self,
        turn: &mut Turn<'_>,
        sink: &mut dyn PrintfSink,
        services: &D,
    ) -> bool {
        let (mask, opcode) = turn.header();
        let mut packets = |p: &mut PacketRequest<'_>| services.dispatch(p);
        if let Some(service) = service_of(opcode) {
            if self.packet_turn(turn, mask, service, &mut packets).is_some() {
                return true;
            }
        }
        self.take_call_turn(turn, sink, &mut packets).is_some()
    }
}
