//! The snapshot types: [`Stats`] of a registry (its listeners), [`ServiceStats`] of one service,
//! [`BufferStats`] of one buffer, [`ListenerEvents`]; `Display` prints them as a table.

use super::histogram::Histogram;
use super::reason::ReasonCounts;
use hostcall_core::Protocol;
use std::collections::BTreeMap;
use std::fmt;

/// What one service (or all of them) did so far.
#[non_exhaustive]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ServiceStats {
    /// Packets dispatched.
    pub packets: u64,
    /// Lanes over those packets.
    pub lane_calls: u64,
    /// Lanes answered with an error reply.
    pub errors: u64,
    /// How long the service took per packet.
    pub service_time: Histogram,
    /// How long each packet waited, from the start of the poll that found it to the start of
    /// its service (behind the packets served before it in that poll). Counted by listener
    /// threads; a [`Services`](crate::Services) used directly as a dispatcher does not know when
    /// a poll starts and counts none. Time before the listener looked is not visible to the host.
    pub queue_wait: Histogram,
}

impl ServiceStats {
    /// Adds `other` into these.
    pub(crate) fn add(&mut self, other: &ServiceStats) {
        self.packets += other.packets;
        self.lane_calls += other.lane_calls;
        self.errors += other.errors;
        self.service_time.add(&other.service_time);
        self.queue_wait.add(&other.queue_wait);
    }
}

/// What the listener threads of a registry did besides serving.
#[non_exhaustive]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ListenerEvents {
    /// Doorbell waits that ended with a ring.
    pub doorbell_wakes: u64,
    /// Doorbell waits that ended with the timeout (each is followed by a poll: the bound on a
    /// missed ring).
    pub timeout_polls: u64,
    /// Polls that found no packet.
    pub empty_scans: u64,
}

/// What one buffer's packets did so far.
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BufferStats {
    /// The buffer's protocol.
    pub protocol: Protocol,
    /// Its packets.
    pub num_packets: u64,
    /// Packets served from it.
    pub packets: u64,
    /// Lanes over those packets.
    pub lane_calls: u64,
    /// Lanes answered with an error reply.
    pub errors: u64,
    /// Its refusals, by reason.
    pub refusals: ReasonCounts,
}

/// Counters of a registry: its services, its refusals by reason, its listeners, its buffers.
/// `Display` prints a table.
///
/// ```
/// use hostcall::prelude::*;
/// use hostcall::{HostcallBuffer, HostMemory, Listener, ListenerConfig, ParkingDoorbell, Wave};
/// use hostcall::observe::Reason;
/// use std::sync::Arc;
///
/// let doorbell: Arc<dyn Doorbell> = Arc::new(ParkingDoorbell::new());
/// let listener = Listener::start(doorbell.clone(), ListenerConfig::default()).unwrap();
/// listener.services().register_lane(100, "add", |r| Ok([r[0] + r[1], 0])).unwrap();
/// let buffer = Arc::new(HostcallBuffer::new(Arc::new(HostMemory), 8, doorbell).unwrap());
/// listener.add(buffer.clone()).unwrap();
/// Wave::new(buffer.clone(), 4).call(100, |lane| [lane as u64, 1, 0, 0, 0, 0, 0, 0]).unwrap();
/// Wave::new(buffer.clone(), 4).call(77, |_| [0; 8]).unwrap(); // nobody serves 77
///
/// let stats = listener.stats();
/// assert_eq!(stats.services[&100].1.lane_calls, 4);
/// assert_eq!(stats.refusals.get(Reason::UnknownService), 4);
/// assert_eq!(stats.buffers[&(buffer.as_ptr() as usize)].packets, 2);
/// assert!(stats.to_string().contains("unknown service 4"));
/// listener.shutdown();
/// ```
#[non_exhaustive]
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// Per registered service id: its name and counters.
    pub services: BTreeMap<u32, (String, ServiceStats)>,
    /// Packets whose service id was not registered.
    pub unknown: ServiceStats,
    /// The first [`REMEMBERED_UNKNOWN_IDS`](crate::REMEMBERED_UNKNOWN_IDS)
    /// distinct unknown service ids seen, with their packet counts.
    pub unknown_ids: BTreeMap<u32, u64>,
    /// Packets of unknown ids seen after that table was full (not remembered one by one).
    pub unknown_ids_not_remembered: u64,
    /// Malformed shared state found (broken chains, packets without READY).
    pub malformed: u64,
    /// Everything refused, by reason (see [`Reason`](super::Reason) for what one count is).
    pub refusals: ReasonCounts,
    /// What the listener threads did besides serving.
    pub events: ListenerEvents,
    /// Log lines the rate limit suppressed while this registry's services ran.
    pub log_lines_suppressed: u64,
    /// The buffers served now, by base address.
    pub buffers: BTreeMap<usize, BufferStats>,
}

impl Stats {
    /// Everything together.
    pub fn total(&self) -> ServiceStats {
        let mut total = self.unknown;
        for (_, s) in self.services.values() {
            total.add(s);
        }
        total
    }
}

impl fmt::Display for Stats {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "{:<16} {:>10} {:>8} {:>12} {:>8}  {:<26} queue wait",
            "service", "id", "packets", "lanes", "errors", "service time"
        )?;
        let row = |f: &mut fmt::Formatter<'_>, name: &str, id: &str, s: &ServiceStats| {
            let time = s.service_time.to_string();
            writeln!(
                f,
                "{name:<16} {id:>10} {:>8} {:>12} {:>8}  {time:<26} {}",
                s.packets, s.lane_calls, s.errors, s.queue_wait
            )
        };
        for (id, (name, s)) in &self.services {
            row(f, name, &id.to_string(), s)?;
        }
        if self.unknown.packets > 0 {
            row(f, "(unknown ids)", &format!("{}", self.unknown_ids.len()), &self.unknown)?;
        }
        writeln!(f, "refusals: {}", self.refusals)?;
        let e = &self.events;
        writeln!(
            f,
            "listener: {} doorbell wakes, {} timeout polls, {} empty scans; {} log lines suppressed",
            e.doorbell_wakes, e.timeout_polls, e.empty_scans, self.log_lines_suppressed
        )?;
        for (base, b) in &self.buffers {
            writeln!(
                f,
                "buffer {base:#x} ({:?}, {} packets): {} packets, {} lanes, {} errors; refusals: {}",
                b.protocol, b.num_packets, b.packets, b.lane_calls, b.errors, b.refusals
            )?;
        }
        Ok(())
    }
}
