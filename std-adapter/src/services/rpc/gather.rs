//! The calls that send the host strings, then get one word back, as LLVM's server does them:
//! `OPEN_FILE` (the path as a stream, then a packet with the mode; answered with the `FILE`),
//! `REMOVE` (the path), `RENAME` (two paths), `SYSTEM` (the command), `HOST_CALL` (the argument
//! block as a stream, then a packet with the function's address; answered with its result); and
//! `EXIT` and `ABORT` (an empty round trip, then the status).
//!
//! A refused call (its group off, a stream over the limit or past the held budget) is still
//! followed packet by packet and answered with C's failure value: a null `FILE`, -1 for
//! `remove`, `rename` and `system`, 0 for a host call. Differences on purpose: an `OPEN_FILE` over the buffer's budget of open files
//! gets a null `FILE` (counted); a host call of address 0 is refused rather than crashing the
//! host; `EXIT` and `ABORT` are refused by default (counted and logged: the device's side ends its
//! own program as it always does after the call, and the host process goes on), and where the
//! embedder lets devices end the process ([`crate::services::ending`]) end it by
//! `std::process::exit(status)` and `std::process::abort()` (LLVM's server: `quick_exit`, `abort`).

use super::files::{c_string, OpenError};
use super::stream_file::receive_held;
use super::Context;
use crate::rate_limit::warn_limited;
use hostcall_core::rpc::opcode::libc as op;
use hostcall_core::rpc::{packet_bytes, StreamIn, Turn};
use hostcall_core::LANES;

/// -1 as the client's `int` reads word 0.
const FAILED: u64 = -1i64 as u64;

/// A string-sending call in progress.
#[derive(Debug)]
pub(super) struct Gather {
    mask: u64,
    opcode: u32,
    allowed: bool,
    limit: u64,
    input: StreamIn,
    /// The streams received so far, per lane.
    streams: Vec<Vec<Vec<u8>>>,
    /// The stream in progress, per lane.
    current: Vec<Vec<u8>>,
    /// Lanes that sent a stream over the limit.
    over: u64,
    /// Bytes charged to the held budgets, and the lanes they refused (counted, answered failed).
    charged: usize,
    dropped: u64,
    /// The streams are in; the last packet (mode, function address) is next.
    last_packet: bool,
}

impl Gather {
    /// A call of `opcode` by the lanes of `mask`, refused (followed, answered failed) unless
    /// `allowed`.
    pub(super) fn new(mask: u64, opcode: u32, allowed: bool, limit: u64) -> Self {
        Self {
            mask,
            opcode,
            allowed,
            limit,
            input: StreamIn::new(mask, limit),
            streams: (0..LANES).map(|_| Vec::new()).collect(),
            current: (0..LANES).map(|_| Vec::new()).collect(),
            over: 0,
            charged: 0,
            dropped: 0,
            last_packet: false,
        }
    }

    /// The lanes of the call.
    pub(super) fn mask(&self) -> u64 {
        self.mask
    }

    /// Bytes charged to the held budgets.
    pub(super) fn charged(&self) -> usize {
        self.charged
    }

    /// One turn; `true` when the call is over.
    pub(super) fn turn(&mut self, turn: &mut Turn<'_>, cx: &mut Context<'_>) -> bool {
        if self.last_packet {
            for lane in turn.lanes(self.mask) {
                let words = turn.read(lane as u32);
                let answer = self.last(lane, &words, cx);
                turn.write_first::<1>(lane as u32, &[answer]);
            }
            return true;
        }
        let (mask, current) = (self.mask, &mut self.current);
        if !receive_held(&mut self.input, turn, mask, cx, &mut self.charged, &mut self.dropped, current) {
            return false;
        }
        for (streams, current) in self.streams.iter_mut().zip(&mut self.current) {
            streams.push(std::mem::take(current));
        }
        for lane in turn.lanes(self.mask) {
            if !self.input.kept(lane as u32) && self.over & 1 << lane == 0 {
                self.over |= 1 << lane;
                cx.counters.over_limit_lanes += 1;
            }
        }
        let received = self.streams.first().map_or(0, Vec::len);
        if self.opcode == op::RENAME && received < 2 {
            self.input = StreamIn::new(self.mask, self.limit);
            return false;
        }
        if matches!(self.opcode, op::OPEN_FILE | op::HOST_CALL) {
            self.last_packet = true;
            return false;
        }
        for lane in turn.lanes(self.mask) {
            let answer = self.now(lane, cx);
            turn.write_first::<1>(lane as u32, &[answer]);
        }
        true
    }

    /// Whether lane `lane` is served (else counted as refused, unless over the limit).
    fn served(&self, lane: usize, cx: &mut Context<'_>) -> bool {
        if (self.over | self.dropped) & 1 << lane != 0 {
            return false; // counted when it went over the limit or the held budget
        }
        if !self.allowed {
            cx.counters.refused_lanes += 1;
        }
        self.allowed
    }

    /// The answer of `REMOVE`, `RENAME` or `SYSTEM`, in the turn of the last stream's last packet.
    fn now(&self, lane: usize, cx: &mut Context<'_>) -> u64 {
        if !self.served(lane, cx) {
            return FAILED;
        }
        let streams = &self.streams[lane];
        let result = match self.opcode {
            op::REMOVE => cx.files.lock().remove(&streams[0]),
            op::RENAME => cx.files.lock().rename(&streams[0], &streams[1]),
            // SAFETY: a NUL-terminated string (`c_string`), only read.
            _ => Ok(unsafe { ::libc::system(c_string(&streams[0]).as_ptr()) }),
        };
        match result {
            Ok(result) => result as i64 as u64,
            Err(refused) => {
                refuse_path(cx, self.opcode, &streams[0], &refused);
                FAILED
            }
        }
    }

    /// The answer of `OPEN_FILE` or `HOST_CALL`, from its last packet `words`.
    fn last(&mut self, lane: usize, words: &[u64; 8], cx: &mut Context<'_>) -> u64 {
        if !self.served(lane, cx) {
            return 0;
        }
        if self.opcode == op::OPEN_FILE {
            let mode = packet_bytes(words);
            return match cx.files.lock().fopen(&self.streams[lane][0], &mode) {
                Ok(handle) => handle,
                Err(OpenError::Budget) => {
                    cx.counters.open_files_refused += 1;
                    0
                }
                Err(OpenError::Failed) => 0,
                Err(OpenError::Refused(refused)) => {
                    refuse_path(cx, op::OPEN_FILE, &self.streams[lane][0], &refused);
                    0
                }
            };
        }
        if words[0] == 0 {
            cx.counters.refused_lanes += 1;
            return 0;
        }
        type HostFunction = unsafe extern "C" fn(*mut std::ffi::c_void) -> u64;
        // SAFETY: the embedding runtime enabled host calls through `RpcPolicy::with_host_calls`,
        // whose contract makes every kernel that can reach this buffer trusted to name a host
        // function of this signature; the argument block is the lane's bytes, writable.
        unsafe {
            let function = std::mem::transmute::<usize, HostFunction>(words[0] as usize);
            function(self.streams[lane][0].as_mut_ptr().cast())
        }
    }
}

/// Counts and logs (rate-limited) a file call's path refused by the files directory.
fn refuse_path(cx: &mut Context<'_>, opcode: u32, path: &[u8], refused: &super::beneath::Refused) {
    cx.counters.refused_lanes += 1;
    let call = match opcode {
        op::OPEN_FILE => "fopen",
        op::REMOVE => "remove",
        _ => "rename",
    };
    let end = path.iter().position(|&b| b == 0).unwrap_or(path.len()).min(256);
    let path = String::from_utf8_lossy(&path[..end]);
    warn_limited!("rpc: {call}({path:?}) refused: {refused}");
}

/// An `EXIT` or `ABORT` in progress.
#[derive(Debug)]
pub(super) struct Ending {
    mask: u64,
    abort: bool,
    allowed: bool,
    /// The empty round trip is done; the status is next.
    status_next: bool,
}

impl Ending {
    /// An exit (`abort`: an abort) of the lanes of `mask`, ending the host only if `allowed`.
    pub(super) fn new(mask: u64, abort: bool, allowed: bool) -> Self {
        Self { mask, abort, allowed, status_next: false }
    }

    /// The lanes of the call.
    pub(super) fn mask(&self) -> u64 {
        self.mask
    }

    /// One turn; `true` when the call is over (if it is allowed, the process is).
    pub(super) fn turn(&mut self, turn: &mut Turn<'_>, cx: &mut Context<'_>) -> bool {
        if !self.status_next {
            self.status_next = true;
            return false;
        }
        let Some(lane) = turn.lanes(self.mask).next() else {
            return true;
        };
        let status = turn.read(lane as u32)[0] as i32;
        let what = if self.abort { "abort()".to_string() } else { format!("exit({status})") };
        if self.allowed {
            log::error!("rpc: port {}: the device called {what}: ending the host process", turn.port());
            if self.abort {
                std::process::abort();
            }
            std::process::exit(status);
        }
        cx.counters.refused_lanes += u64::from(self.mask.count_ones());
        warn_limited!(
            "rpc: port {}: the device called {what}; refused (allow_device_to_end_process lets it end the host)",
            turn.port()
        );
        true
    }
}
