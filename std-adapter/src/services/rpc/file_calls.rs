//! The calls on a stream, as LLVM's server does them: the one-turn calls (`CLOSE_FILE`, `FEOF`,
//! `FERROR`, `CLEARERR`, `FSEEK`, `FTELL`, `FFLUSH`, `UNGETC`: one packet in, word 0 answered),
//! and the reads (`READ_FROM_STREAM`: `{size, FILE}` in, the bytes out as a stream, then the
//! count; `READ_FGETS`: `{size, FILE}` in, the line and its NUL out as a stream, or nothing at
//! end of file).
//!
//! Which streams a device may use: stdout and stderr while the console group is on (they are the
//! buffer's output sink: `fflush` answers 0, `feof`/`ferror` 0, `fseek`/`ftell`/`ungetc` -1 as on
//! a pipe, a read gets no bytes); stdin and the files it opened only while the files group is on.
//! Anything else is refused, counted, and answered with C's failure value (`EOF` = -1 for
//! `fclose`, `fseek`, `ftell`, `fflush`, `ungetc`; 0 for `feof`; 1 for `ferror`; no bytes for a
//! read), where LLVM's server would use any pointer the device sent. Differences on purpose:
//! `fclose` of stdin, stdout or stderr is refused (the device cannot close the host's streams);
//! a read's size is cut to [`RpcLimits::stream_bytes`](super::RpcLimits::stream_bytes) (a short
//! read, counted as over the limit), where LLVM's server allocates whatever the device asks.
//! As there, a read of stdin (or of a pipe the device opened) waits for its bytes on the
//! listener thread: the files group is for kernels whose host I/O the runtime trusts.

use super::files::stdin;
use super::stream_file::StreamFile;
use super::Context;
use hostcall_core::rpc::opcode::libc as op;
use hostcall_core::rpc::{StreamOut, Turn};
use hostcall_core::LANES;

/// C's `EOF`, as the client's `int` reads word 0.
const EOF: u64 = -1i64 as u64;

/// What a call does with the stream a device's `FILE` value names.
enum Use<'f> {
    /// stdout or stderr: the console answer.
    Console,
    /// A C `FILE` (stdin, or an open file: the table stays locked while it is used).
    C(*mut ::libc::FILE, Option<std::sync::MutexGuard<'f, super::files::FileTable>>),
}

/// Resolves `value` for a call, or `None` (refused) when its stream is not allowed or not open.
fn resolve<'f>(cx: &'f Context<'_>, value: u64) -> Option<Use<'f>> {
    match StreamFile::decode(value) {
        StreamFile::Stdout | StreamFile::Stderr => cx.console_allowed.then_some(Use::Console),
        StreamFile::Stdin if cx.files_allowed => stdin().map(|f| Use::C(f, None)),
        StreamFile::Handle(_) if cx.files_allowed => {
            let mut table = cx.files.lock();
            let file = table.get(value)?;
            Some(Use::C(file, Some(table)))
        }
        StreamFile::Stdin | StreamFile::Handle(_) => None,
    }
}

/// Serves a one-turn stream call of the lanes of `mask`: reads each lane's packet, answers in
/// word 0 (`CLEARERR` answers nothing, as upstream).
pub(super) fn serve_stream_call(turn: &mut Turn<'_>, mask: u64, opcode: u32, cx: &mut Context<'_>) {
    for lane in turn.lanes(mask) {
        let words = turn.read(lane as u32);
        let answer = match opcode {
            op::CLOSE_FILE => Some(close(cx, words[0])),
            op::UNGETC => Some(on_stream(cx, words[1], EOF, EOF, |f| {
                // SAFETY: `f` is an open `FILE` (see `Use::C`).
                unsafe { ::libc::ungetc(words[0] as i32, f) as i64 as u64 }
            })),
            op::CLEARERR => {
                // SAFETY: as above.
                on_stream(cx, words[0], 0, 0, |f| unsafe { stream_call(opcode, f, &words) });
                None
            }
            _ => {
                let (console, refused) = match opcode {
                    op::FEOF => (0, 0),
                    op::FERROR => (0, 1),
                    op::FFLUSH => (0, EOF),
                    _ => (EOF, EOF), // FSEEK, FTELL: not on a pipe
                };
                // SAFETY: as above.
                Some(on_stream(cx, words[0], console, refused, |f| unsafe { stream_call(opcode, f, &words) }))
            }
        };
        if let Some(answer) = answer {
            turn.write_first::<1>(lane as u32, &[answer]);
        }
    }
}

/// `fclose` of a handle the table holds.
fn close(cx: &mut Context<'_>, value: u64) -> u64 {
    let closed = match StreamFile::decode(value) {
        StreamFile::Handle(_) if cx.files_allowed => cx.files.lock().fclose(value),
        _ => None,
    };
    closed.map_or_else(
        || {
            cx.counters.refused_lanes += 1;
            EOF
        },
        |r| r as i64 as u64,
    )
}

/// `call` on the C `FILE` `value` names; `console` for stdout and stderr; `refused` (counted)
/// when the stream may not be used.
fn on_stream(
    cx: &mut Context<'_>,
    value: u64,
    console: u64,
    refused: u64,
    call: impl FnOnce(*mut ::libc::FILE) -> u64,
) -> u64 {
    let answer = match resolve(cx, value) {
        Some(Use::Console) => Some(console),
        Some(Use::C(file, _locked)) => Some(call(file)),
        None => None,
    };
    answer.unwrap_or_else(|| {
        cx.counters.refused_lanes += 1;
        refused
    })
}

/// The C call of a one-turn stream opcode on `file` (word 0 the stream; `FSEEK`'s offset and
/// whence in words 1 and 2).
///
/// # Safety
/// `file` is an open `FILE`.
unsafe fn stream_call(opcode: u32, file: *mut ::libc::FILE, words: &[u64; 8]) -> u64 {
    // SAFETY: `file` is open (the contract); the calls take nothing else but integers.
    unsafe {
        match opcode {
            op::FEOF => ::libc::feof(file) as i64 as u64,
            op::FERROR => ::libc::ferror(file) as i64 as u64,
            op::CLEARERR => {
                ::libc::clearerr(file);
                0
            }
            op::FSEEK => {
                ::libc::fseek(file, words[1] as i64 as ::libc::c_long, words[2] as i32) as i64 as u64
            }
            op::FTELL => ::libc::ftell(file) as i64 as u64,
            _ => ::libc::fflush(file) as i64 as u64,
        }
    }
}

/// A `READ_FROM_STREAM` or `READ_FGETS` in progress: the bytes read, going out as a stream.
#[derive(Debug)]
pub(super) struct Read {
    mask: u64,
    fgets: bool,
    data: Vec<Vec<u8>>,
    out: StreamOut,
    /// The stream has gone; the count is next (`READ_FROM_STREAM` only).
    count_next: bool,
    /// Bytes charged to the held budgets (each lane's read, before it is made).
    charged: usize,
}

impl Read {
    /// A read of the lanes of `mask` (`fgets`: a line).
    pub(super) fn new(mask: u64, fgets: bool) -> Self {
        Self { mask, fgets, data: Vec::new(), out: StreamOut::new(), count_next: false, charged: 0 }
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
        if self.count_next {
            for lane in turn.lanes(self.mask) {
                turn.write_first::<1>(lane as u32, &[self.data[lane].len() as u64]);
            }
            return true;
        }
        if self.data.is_empty() {
            self.data = (0..LANES).map(|_| Vec::new()).collect();
            for lane in turn.lanes(self.mask) {
                let [size, stream, ..] = turn.read(lane as u32);
                // Held before it is read; a lane the budget refuses reads nothing (counted).
                let kept = size.min(cx.limit) as usize;
                if cx.hold(&mut self.charged, kept) {
                    cx.work.spend(kept);
                    self.data[lane] = self.read(cx, size, stream);
                }
            }
        }
        let data = &self.data;
        let last = self.out.send(turn, self.mask, |lane| &data[lane as usize]);
        if last && !self.fgets {
            self.count_next = true;
            return false;
        }
        last
    }

    /// One lane's read of up to `size` bytes (cut to the stream limit) from `stream`.
    fn read(&self, cx: &mut Context<'_>, size: u64, stream: u64) -> Vec<u8> {
        if size > cx.limit {
            cx.counters.over_limit_lanes += 1;
        }
        let size = size.min(cx.limit).min(i32::MAX as u64) as usize;
        let mut buffer = vec![0u8; size];
        let fgets = self.fgets;
        let got = on_stream(cx, stream, 0, 0, |file| {
            // SAFETY: `file` is open; `buffer` has `size` writable bytes (fgets writes at most
            // `size` including its NUL).
            unsafe {
                if fgets && size == 0 {
                    0 // C's fgets of no room reads nothing
                } else if fgets {
                    let line = ::libc::fgets(buffer.as_mut_ptr().cast(), size as i32, file);
                    if line.is_null() {
                        0
                    } else {
                        buffer.iter().position(|&b| b == 0).map_or(size, |n| n + 1) as u64
                    }
                } else {
                    ::libc::fread(buffer.as_mut_ptr().cast(), 1, size, file) as u64
                }
            }
        });
        buffer.truncate(got as usize);
        buffer
    }
}
