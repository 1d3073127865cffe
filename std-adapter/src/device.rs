//! Emulated waves: CPU threads that make hostcalls through the core's real producer path, so
//! tests, examples, benchmarks and firmware-like embedders exercise the protocol a GPU speaks.

use crate::buffer::HostcallBuffer;
use crate::error::Error;
use hostcall_core::layout::{LANES, REPLY_WORDS, SLOT_WORDS};
use hostcall_core::packet::Submitted;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// One wave of 1..=64 lanes bound to a buffer.
#[derive(Clone, Debug)]
pub struct Wave {
    buffer: Arc<HostcallBuffer>,
    activemask: u64,
    timeout: Option<Duration>,
    spin_wait: bool,
}

/// The replies of one hostcall.
#[derive(Clone, Debug)]
pub struct Reply {
    lanes: [[u64; REPLY_WORDS]; LANES],
    activemask: u64,
    host_error: bool,
}

impl Reply {
    /// Lane `lane`'s reply words (zeros for inactive lanes).
    pub fn lane(&self, lane: usize) -> [u64; REPLY_WORDS] {
        self.lanes[lane]
    }
    /// The lanes that made the call.
    pub fn activemask(&self) -> u64 {
        self.activemask
    }
    /// Whether the host answered at least one lane with an error reply.
    pub fn host_error(&self) -> bool {
        self.host_error
    }
}

impl Wave {
    /// A wave of `lanes` active lanes (the low bits of the activemask).
    ///
    /// # Panics
    /// If `lanes` is not in 1..=64.
    pub fn new(buffer: Arc<HostcallBuffer>, lanes: u32) -> Self {
        assert!((1..=LANES as u32).contains(&lanes), "a wave has 1..={LANES} lanes, not {lanes}");
        let activemask = if lanes == 64 { u64::MAX } else { (1u64 << lanes) - 1 };
        Self::with_activemask(buffer, activemask)
    }

    /// A wave with an arbitrary activemask (divergent lanes).
    pub fn with_activemask(buffer: Arc<HostcallBuffer>, activemask: u64) -> Self {
        Self { buffer, activemask, timeout: None, spin_wait: false }
    }

    /// Waits for packets and replies by spinning only (a CPU pause between polls), never yielding
    /// or sleeping: what a GPU wave does, and what latency benchmarks need. It burns the wave's
    /// core while it waits, so use it only where every waiting wave has a core of its own; the
    /// default waiting (spin, then yield, then sleep) leaves the host's core alone on small
    /// machines. A timeout set with [`Wave::with_timeout`] still applies.
    pub fn with_spin_wait(mut self) -> Self {
        self.spin_wait = true;
        self
    }

    /// Gives up with [`Error::TimedOut`] after `timeout` waiting for a packet or a reply (for
    /// tests that break the host on purpose). A timed-out packet is leaked, never reused.
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = Some(timeout);
        self
    }

    /// The active lanes.
    pub fn activemask(&self) -> u64 {
        self.activemask
    }

    /// The buffer.
    pub fn buffer(&self) -> &Arc<HostcallBuffer> {
        &self.buffer
    }

    /// One hostcall: every active lane sends `request(lane)` to service `service`; returns when
    /// the host has answered.
    pub fn call(&self, service: u32, request: impl Fn(usize) -> [u64; SLOT_WORDS]) -> Result<Reply, Error> {
        let mut backoff = Backoff::new(self.timeout, self.spin_wait);
        let view = self.buffer.view();
        let mut claimed = loop {
            match view.claim()? {
                Some(packet) => break packet,
                None => backoff.wait(false)?, // more waves than packets: wait for a release
            }
        };
        for lane in lanes(self.activemask) {
            claimed.write_lane(lane, &request(lane));
        }
        let submitted = claimed.submit(service, self.activemask);
        self.buffer.doorbell().ring();
        self.wait(submitted, backoff)
    }

    fn wait(&self, submitted: Submitted<'_>, mut backoff: Backoff) -> Result<Reply, Error> {
        backoff.restart();
        // `wait_until` pauses the CPU once per poll itself, hence `wait(true)`.
        let done = submitted.wait_until(|_| backoff.wait(true).is_ok()).map_err(|still_submitted| {
            std::mem::forget(still_submitted); // the host still owns it: leak, never reuse
            Error::TimedOut
        })?;
        let mut lanes_out = [[0; REPLY_WORDS]; LANES];
        for lane in lanes(self.activemask) {
            lanes_out[lane] = done.reply(lane);
        }
        Ok(Reply { lanes: lanes_out, activemask: self.activemask, host_error: done.host_error() })
    }
}

/// The set lanes of `mask`, lowest first (one step per active lane, not per lane).
fn lanes(mut mask: u64) -> impl Iterator<Item = usize> {
    mask &= hostcall_core::layout::LANE_MASK;
    std::iter::from_fn(move || {
        (mask != 0).then(|| {
            let lane = mask.trailing_zeros() as usize;
            mask &= mask - 1;
            lane
        })
    })
}

/// Spin, then yield, then sleep: a waiting wave must leave the host's core alone on small
/// machines, yet answer within microseconds on an idle one. With `spin_only` (see
/// [`Wave::with_spin_wait`]) it never leaves the spin phase.
///
/// The phases are short on purpose: the spin covers a round trip to an awake listener (about a
/// microsecond), and only a few yields follow, because with more waves than cores a yielding wave
/// is still runnable and takes turns with the listener, which then gets a sliver of a core. On the
/// 2-core development VM, in one run at moderate load, 64 waves that yielded up to 4096 times made
/// 0.7 x crossbeam-channel's request/response throughput at 64 clients, and waves that yield 32
/// times and then sleep about 1.5 x (the `bench` example, `throughput_64w_1l`; noisy, see the
/// README's Benchmarks section).
struct Backoff {
    polls: u32,
    /// The call's start, read only when there is a timeout to check (it costs a clock read).
    started: Option<Instant>,
    timeout: Option<Duration>,
    spin_only: bool,
}

impl Backoff {
    /// Polls spent spinning (a few microseconds).
    const SPINS: u32 = 64;
    /// Polls after which the wave sleeps instead of yielding (`YIELDS - SPINS` yields).
    const YIELDS: u32 = 96;
    /// One sleep between polls once yielding is over (the timer slack of the OS comes on top).
    const SLEEP: Duration = Duration::from_micros(50);

    fn new(timeout: Option<Duration>, spin_only: bool) -> Self {
        Self { polls: 0, started: timeout.map(|_| Instant::now()), timeout, spin_only }
    }

    /// Back to the spin phase (the deadline stays the call's).
    fn restart(&mut self) {
        self.polls = 0;
    }

    /// One wait between polls. `paused`: the caller already paused the CPU once for this poll,
    /// so the spin phase adds nothing (one pause per poll, like the ping-pong floor).
    fn wait(&mut self, paused: bool) -> Result<(), Error> {
        self.polls = self.polls.saturating_add(1);
        if self.polls < Self::SPINS || self.spin_only {
            if !paused {
                std::hint::spin_loop();
            }
        } else if self.polls < Self::YIELDS {
            std::thread::yield_now();
        } else {
            std::thread::sleep(Self::SLEEP);
        }
        match (self.timeout, self.started) {
            (Some(limit), Some(started)) if self.polls % 64 == 0 && started.elapsed() > limit => {
                Err(Error::TimedOut)
            }
            _ => Ok(()),
        }
    }
}
