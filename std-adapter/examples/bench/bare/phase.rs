//! `bare_1l_phase`: ROCm's phase algorithm alone (PROTOCOL.md section 2), one lane, two packets.
//!
//! The memory is laid out as `hostcall::core::phase::Layout` lays out a two-packet buffer (each
//! array on its own line), so the same lines cross between the cores as on the full path. Left
//! out: the host's phase-bit check and report, the scan window, the lane prefetch, the registry,
//! poller and counters.

use super::Peer;
use crate::latency::Line;
use crate::measure::{round_trips, Sample};
use crate::options::Options;
use crate::{echo, request, ECHO};
use hostcall::core::{phase, SLOT_WORDS};
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
    payloads: [[[AtomicU64; SLOT_WORDS]; 64]; PACKETS],
}

const LAYOUT: phase::Layout = match phase::Layout::new(PACKETS) {
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
            payloads: std::array::from_fn(|_| {
                std::array::from_fn(|_| std::array::from_fn(|_| AtomicU64::new(0)))
            }),
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
            let mut lanes = mask;
            while lanes != 0 {
                let lane = lanes.trailing_zeros() as usize;
                lanes &= lanes - 1;
                let slot = &self.payloads[index][lane];
                let words = std::array::from_fn(|w| slot[w].load(Ordering::Relaxed));
                for (word, value) in slot.iter().zip(echo(&words)) {
                    word.store(value, Ordering::Relaxed);
                }
            }
            // Release: publishes the replies; pairs with the device's Acquire poll.
            self.host_phase.0[index].store(device, Ordering::Release);
            served = true;
        }
        served
    }
}

pub(crate) fn bare_phase(o: &Options) -> Sample {
    let buffer = Buffer::new();
    let doorbell = Arc::new(Line::default());
    let host = {
        let buffer = buffer.clone();
        Peer::start(o, move || buffer.scan())
    };
    let mut i = 0u64;
    let sample = round_trips(o, || {
        i += 1;
        let index = buffer.claim();
        let words = request(i, 0);
        for (word, value) in buffer.payloads[index][0].iter().zip(words) {
            word.store(value, Ordering::Relaxed);
        }
        let header = &buffer.headers.0[index];
        // Relaxed: published by the Release store of `device_phase`.
        header.activemask.store(1, Ordering::Relaxed);
        header.service.store(ECHO, Ordering::Relaxed);
        // Relaxed: the device is this word's only writer.
        let phase = buffer.device_phase.0[index].load(Ordering::Relaxed) ^ 1;
        // Release: publishes the header and the request; pairs with the host's fence.
        buffer.device_phase.0[index].store(phase, Ordering::Release);
        // The ring: ROCm's signal add (Release); the spinning host never reads it.
        doorbell.0.fetch_add(1, Ordering::Release);
        // Acquire: pairs with the host's Release store of `host_phase`.
        while buffer.host_phase.0[index].load(Ordering::Acquire) & 1 != phase {
            spin_loop();
        }
        let slot = &buffer.payloads[index][0];
        let reply = [slot[0].load(Ordering::Relaxed), slot[1].load(Ordering::Relaxed)];
        assert_eq!(reply, echo(&words));
        // Release: pairs with the next claimer's Acquire `fetch_or`.
        buffer.occupied.0[0].fetch_and(!(1 << index), Ordering::Release);
    });
    host.stop();
    sample
}
