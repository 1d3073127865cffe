//! How many lanes the buffers behind a service registry carry: the bound on a device's open
//! messages.
//!
//! A lane has at most one message open at a time (it sends one chunk per hostcall and waits for
//! the reply), and a wave in flight holds at most one packet; a runtime sizes its buffers to the
//! waves it runs at once (ROCm: at least one packet per wave in flight on the queue). So every
//! buffer a listener serves can carry at most 64 open messages per packet, and the registry's
//! message services (PRINTF) need no other bound on their count: more open messages than
//! lanes served is a device that begins messages it never ends, and its further BEGINs are
//! refused (see [`crate::services::message`]).
//!
//! A [`LaneCapacity`] is the running total: every [`Listener`](crate::threads::listener::Listener)
//! that dispatches through a [`Services`](crate::dispatch::registry::Services) registry adds the
//! packets it serves when it adds a buffer (a [`ServedPackets`] guard) and takes them back when it
//! removes the buffer or is dropped. A runtime that drives a core poller with the registry itself
//! reports its packets the same way.
//!
//! ```
//! use hostcall::dispatch::LaneCapacity;
//!
//! let capacity = LaneCapacity::new();
//! let first = capacity.serve(1024); // a buffer of 1024 packets
//! let second = capacity.serve(16);
//! assert_eq!(capacity.lanes(), (1024 + 16) * 64);
//! drop(first); // its buffer is no longer served
//! assert_eq!(capacity.packets(), 16);
//! drop(second);
//! assert_eq!(capacity.lanes(), 0);
//! ```

use hostcall_core::LANES;
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// The packets served by the listeners of one registry (shared: clones count together).
#[derive(Clone, Default)]
pub struct LaneCapacity {
    packets: Arc<AtomicU64>,
}

impl LaneCapacity {
    /// A total of zero packets.
    pub fn new() -> Self {
        Self::default()
    }

    /// Packets served now.
    pub fn packets(&self) -> u64 {
        // Relaxed: a bound read by a service when a BEGIN arrives. A packet of a buffer reaches a
        // service only after the buffer was added to a poller, which happened after the add in
        // `serve` (the poller's lock orders them), so no packet is served before it is counted.
        self.packets.load(Ordering::Relaxed)
    }

    /// Lanes served now: 64 per packet.
    pub fn lanes(&self) -> u64 {
        self.packets().saturating_mul(LANES as u64)
    }

    /// Counts `packets` more until the returned guard is dropped.
    pub fn serve(&self, packets: u64) -> ServedPackets {
        // Relaxed: see `packets`.
        self.packets.fetch_add(packets, Ordering::Relaxed);
        ServedPackets { packets: self.packets.clone(), count: packets }
    }
}

impl fmt::Debug for LaneCapacity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LaneCapacity").field("packets", &self.packets()).finish()
    }
}

/// Packets counted in a [`LaneCapacity`] while this lives (one buffer, or one listener's range of
/// it).
#[must_use = "the packets are counted only while the guard lives"]
pub struct ServedPackets {
    packets: Arc<AtomicU64>,
    count: u64,
}

impl ServedPackets {
    /// The packets this guard counts.
    pub fn count(&self) -> u64 {
        self.count
    }
}

impl Drop for ServedPackets {
    fn drop(&mut self) {
        // Relaxed: see `LaneCapacity::packets`.
        self.packets.fetch_sub(self.count, Ordering::Relaxed);
    }
}

impl fmt::Debug for ServedPackets {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ServedPackets").field("count", &self.count).finish()
    }
}
