//! The listener's own cost per packet, producer and listener on one thread (also the callgrind
//! mode).

use crate::measure::Sample;
use crate::options::Options;
use crate::{echo, request, ECHO};
use hostcall::core::stack::View;
use hostcall::core::{Poller, Protocol, LANES};
use hostcall::prelude::*;
use std::sync::Arc;
use std::time::Instant;

/// Producer and listener on one thread: the listener's own work per packet, no cross-core traffic.
pub(crate) struct CostLoop {
    pub(crate) buffer: HostcallBuffer,
    pub(crate) poller: Poller<1>,
    pub(crate) services: Services,
}

impl CostLoop {
    pub(crate) fn new() -> Self {
        let buffer =
            HostcallBuffer::new(Arc::new(HostMemory), 2, Arc::new(ParkingDoorbell::new())).expect("buffer");
        let poller = Poller::new();
        // SAFETY: `buffer` lives in the same struct as `poller` and is dropped after it (field
        // order), and is accessed only through views.
        unsafe { poller.add(Protocol::Stack, buffer.as_ptr(), buffer.len(), buffer.num_packets()) }.unwrap();
        let services = Services::new();
        services.register_lane(ECHO, "echo", |r| Ok(echo(r))).unwrap();
        Self { buffer, poller, services }
    }
}

/// `packets` times: claim, fill `lanes` lanes, submit, poll once (drain + dispatch), read the
/// replies, release. Returns a checksum of the replies. Not inlined: callgrind's
/// `--toggle-collect` names it.
#[inline(never)]
pub(crate) fn listener_loop(cost: &CostLoop, view: View<'_>, packets: u64, lanes: usize) -> u64 {
    let activemask = if lanes == LANES { u64::MAX } else { (1u64 << lanes) - 1 };
    let services = cost.services.dispatcher(); // what the listener thread dispatches through
    let mut checksum = 0u64;
    for i in 0..packets {
        let mut claimed = view.claim().expect("a sound buffer").expect("a free packet");
        for lane in 0..lanes {
            claimed.write_lane(lane, &request(i, lane));
        }
        let submitted = claimed.submit(ECHO, activemask);
        let report = cost.poller.poll_once(&services);
        debug_assert_eq!(report.packets, 1);
        let done = submitted.wait_until(|_| false).expect("served by the poll");
        for lane in 0..lanes {
            checksum = checksum.wrapping_add(done.reply(lane)[0]);
        }
        done.release();
    }
    checksum
}

pub(crate) fn listener_cost(o: &Options, lanes: u32) -> Sample {
    let cost = CostLoop::new();
    let view = cost.buffer.view().stack().expect("a stack-protocol buffer");
    let packets = o.cost_packets * 64 / u64::from(lanes).max(8); // about as long for 1 lane
    std::hint::black_box(listener_loop(&cost, view, packets / 10, lanes as usize));
    let t = Instant::now();
    let checksum = listener_loop(&cost, view, packets, lanes as usize);
    let elapsed = t.elapsed();
    let expected: u64 = (0..packets).map(|i| (i + 1) * u64::from(lanes)).sum();
    assert_eq!(checksum, expected, "every lane answered");
    Sample::Cost { ns_per_packet: elapsed.as_nanos() as f64 / packets as f64, lanes }
}

pub(crate) fn run_callgrind(packets: u64, lanes: u32) {
    let cost = CostLoop::new();
    let t = Instant::now();
    let checksum = listener_loop(
        &cost,
        cost.buffer.view().stack().expect("a stack-protocol buffer"),
        packets,
        lanes as usize,
    );
    let ns = t.elapsed().as_nanos() as f64 / packets.max(1) as f64;
    println!("callgrind-listener: packets={packets} lanes={lanes} checksum={checksum} ns_per_packet={ns:.0}");
}
