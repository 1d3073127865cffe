//! The printf calls: every lane of a wave prints one line, and its reply (the characters printed)
//! is checked.

use hostcall::Wave;
use hostcall_core::lanes;
use hostcall_core::rpc::View;
use hostcall_core::LANES;
use hostcall_core::PRINTF;
use std::time::{Duration, Instant};

/// The format every lane prints with: wave, lane, call, and the lane as a fraction of 64.
const FORMAT: &[u8] = b"[wave %llu lane %d] call %llu: %.3f\n";

/// How long an LLVM-RPC printf waits for its answer before it counts as wrong.
const RPC_ANSWER_WITHIN: Duration = Duration::from_secs(10);

/// Every lane of `wave` prints one line: through the PRINTF message stream, or on an LLVM-RPC
/// buffer as LLVM libc's GPU printf does (`PRINTF_TO_STDOUT`: the format and the argument block
/// as streams, formatted on the host). Returns the number of wrong replies (each lane's reply is
/// the characters printed).
pub(crate) fn print_from_lanes(wave: &Wave, w: u64, c: u64) -> u64 {
    let line_length =
        |lane: usize| format!("[wave {w} lane {lane}] call {c}: {:.3}\n", lane as f64 / 64.0).len();
    let active = lanes(wave.activemask());
    if let Some(view) = wave.buffer().view().rpc() {
        return match print_through_rpc(view, wave, w, c) {
            Some(printed) => active.filter(|&l| printed[l] as usize != line_length(l)).count() as u64,
            None => {
                eprintln!("wave {w} call {c}: printf: no answer within {RPC_ANSWER_WITHIN:?}");
                active.len() as u64
            }
        };
    }
    let reply = wave.send_messages(PRINTF, |lane| {
        hostcall::services::printf::PrintfMessage::new(FORMAT)
            .uint(w)
            .int(lane as i64)
            .uint(c)
            .float(lane as f64 / 64.0)
            .into_words()
    });
    match reply {
        Ok(reply) => active.filter(|&l| reply.lane(l) != [line_length(l) as u64, 0]).count() as u64,
        Err(e) => {
            eprintln!("wave {w} call {c}: printf: {e}");
            active.len() as u64
        }
    }
}

/// LLVM libc's GPU printf from every active lane of `wave`, a client of `view` (its buffer's):
/// the characters each lane printed, or `None` when no answer came within [`RPC_ANSWER_WITHIN`].
fn print_through_rpc(view: View<'_>, wave: &Wave, w: u64, c: u64) -> Option<[i32; LANES]> {
    use hostcall::services::rpc::client::{printf, printf_opcode, CArg};
    let client = hostcall_core::rpc::Client::of(view).expect("a buffer's view has its client's lock bits");
    let args: Vec<[CArg<'_>; 4]> = (0..LANES)
        .map(|lane| {
            [
                CArg::Long(w as i64),
                CArg::Int(lane as i32),
                CArg::Long(c as i64),
                CArg::Double(lane as f64 / 64.0),
            ]
        })
        .collect();
    let started = Instant::now();
    let mut keep_waiting = |_| started.elapsed() < RPC_ANSWER_WITHIN;
    let call = |lane: u32| (FORMAT, &args[lane as usize][..]);
    printf(&client, w as u32, printf_opcode(0, false), wave.activemask(), None, &call, &mut keep_waiting).ok()
}
