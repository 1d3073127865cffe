//! `bare_1l_phase`: ROCm's phase algorithm alone (PROTOCOL.md section 2), one lane, two packets.
//!
//! The memory is laid out as `hostcall_core::phase::Layout` lays out a two-packet buffer (each
//! array on its own line), so the same lines cross between the cores as on the full path. Left
//! out: the host's phase-bit check and report, the scan window, the lane prefetch, the registry,
//! poller and counters.

use super::{fill, payload, reply, run, serve_in_place, Payload};
use crate::measure::Sample;
use crate::options::Options;
use crate::ECHO;
use hostcall_core::phase;
use std::hint::spin_loop;
use std::sync::atomic::{fence, AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;

const PACKETS: usize = 2;

/// One array of `u32` words, alone in its line.
#[repr(C, align(64))]
struct Words([AtomicU32; PACKETS]);

#[repr(C)]
struct Header {
    activemask: AtomicU64,
    service: AtomicU32,
}

#[repr(C, align(64))]
struct Headers([Header; PACKETS]);

#[repr(C, align(64))]
struct Buffer {
    _prefix: [u64; 7],
    device_phase: Words,
    occupied: Words,
    host_phase: Words,
    headers: Headers,
    payloads: [Payload; PACKETS],
}

const LAYOUT: phase::Layout = match phase::Layout::new(PACKETS as u32) {
    Some(layout) => layout,
    None => panic!("a two-packet layout exists"),
};
const _: () = assert!(std::mem::offset_of!(Buffer, device_phase) == LAYOUT.device_phase);
const _: () = assert!(std::mem::offset_of!(Buffer, occupied) == LAYOUT.occupied);
const _: () = assert!(std::mem::offset_of!(Buffer, host_phase) == LAYOUT.host_phase);
const _: () = assert!(std::mem::offset_of!(Buffer, headers) == LAYOUT.headers);
const _: () = assert!(std::mem::offset_of!(Buffer, payloads) == LAYOUT.payloads);

impl Buffer {
    fn new() -> Arc<Self> {
        let words = || Words(std::array::from_fn(|_| AtomicU32::new(0)));
        let header = || Header { activemask: AtomicU64::new(0), service: AtomicU32::new(0) };
        Arc::new(Self {
            _prefix: [0; 7],
            device_phase: words(),
            occupied: words(),
            host_phase: words(),
            headers: Headers(std::array::from_fn(|_| header())),
            payloads: std::array::from_fn(|_| payload()),
        })
    }

    /// Device: claims the first packet whose bit was clear and whose phases agree (ROCm's claim).
    fn claim(&self) -> usize {
        // One occupied word holds both packets' bits.
        let word = &self.occupied.0[0];
        loop {
            for index in 0..PACKETS {
                let bit = 1 << index;
                // Acquire: pairs with the Release `fetch_and` of the packet's last owner.
                if word.fetch_or(bit, Ordering::Acquire) & bit != 0 {
                    continue;
                }
                // Acquire: pairs with the host's Release store of `host_phase`.
                let host = self.host_phase.0[index].load(Ordering::Acquire);
                // Relaxed: the device is this word's only writer.
                if (self.device_phase.0[index].load(Ordering::Relaxed) ^ host) & 1 == 0 {
                    return index;
                }
                word.fetch_and(!bit, Ordering::Relaxed);
            }
        }
    }

    /// Host: one scan of every packet, serving those whose phases differ. False: none did.
    fn scan(&self) -> bool {
        let mut served = false;
        for index in 0..PACKETS {
            // Relaxed: a poll; the fence below orders what follows a flip it shows.
            let device = self.device_phase.0[index].load(Ordering::Relaxed);
            // Relaxed: the host's own word.
            if (device ^ self.host_phase.0[index].load(Ordering::Relaxed)) & 1 == 0 {
                continue;
            }
            // Acquire: pairs with the device's Release store of `device_phase`.
            fence(Ordering::Acquire);
            let header = &self.headers.0[index];
            let (_service, mask) =
                (header.service.load(Ordering::Relaxed), header.activemask.load(Ordering::Relaxed));
            serve_in_place(&self.payloads[index], mask);
            // Release: publishes the replies; pairs with the device's Acquire poll.
            self.host_phase.0[index].store(device, Ordering::Release);
            served = true;
        }
        served
    }
}

pub(crate) fn bare_phase(o: &Options) -> Sample {
    run(o, Buffer::new(), Buffer::scan, |buffer, words, doorbell| {
        let index = buffer.claim();
        fill(&buffer.payloads[index][0], words);
        let header = &buffer.headers.0[index];
        // Relaxed: published by the Release store of `device_phase`.
        header.activemask.store(1, Ordering::Relaxed);
        header.service.store(ECHO, Ordering::Relaxed);
        // Relaxed: the device is this word's only writer.
        let phase = buffer.device_phase.0[index].load(Ordering::Relaxed) ^ 1;
        // Release: publishes the header and the request; pairs with the host's fence.
        buffer.device_phase.0[index].store(phase, Ordering::Release);
        doorbell.0.fetch_add(1, Ordering::Release);
        // Acquire: pairs with the host's Release store of `host_phase`.
        while buffer.host_phase.0[index].load(Ordering::Acquire) & 1 != phase {
            spin_loop();
        }
        let reply = reply(&buffer.payloads[index][0]);
        // Release: pairs with the next claimer's Acquire `fetch_or`.
        buffer.occupied.0[0].fetch_and(!(1 << index), Ordering::Release);
        reply
    })
}
