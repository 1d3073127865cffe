//! How an idle listener waits: the [`WaitPolicy`], its presets, its nap schedule as a pure
//! function, the timer slack of the listener's threads, and the policy a running listener can be
//! given ([`LiveWait`]).
//!
//! A device that never rings (LLVM libc's RPC client; any client that pushes without ringing)
//! is seen only by a poll, so an idle listener's poll period is the bound on how late such a call
//! is served, and the number of polls a second is its idle cost. The policy states both: after
//! work the listener polls without sleeping ([`WaitPolicy::spin_polls`] polls); then it naps on
//! its doorbell, first for [`WaitPolicy::min_wait`], each further nap twice the last, never more
//! than [`WaitPolicy::max_wait`]; every wake-up, a ring or the end of a nap, polls every buffer.
//! So a call after any idle gap is polled within `max_wait` plus the thread's timer slack (how
//! late the kernel may end a sleep: [`WaitPolicy::timer_slack`]) and a wake-up, and an idle
//! listener wakes about `1 / (max_wait + slack)` times a second, each wake-up one doorbell
//! nap (a system call) and one poll of every buffer.
//!
//! A doorbell that is rung ends the nap at once where the doorbell can wake a sleeper
//! ([`crate::ParkingDoorbell`]'s [`Doorbell::ring`](crate::doorbell::Doorbell::ring), an HSA
//! interrupt signal rung by ROCm's device code during a nap longer than ROCr's busy-wait): the
//! listener then spins again. A ring that wakes nobody (a device's raw add to a host-memory
//! signal, the CUDA doorbell's store) is seen at the end of the nap, like a call that rang
//! nothing. See [`Doorbell::nap`](crate::doorbell::Doorbell::nap).

use super::ListenerConfig;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Duration;

/// How an idle listener waits for work (see the module docs above for the schedule). Presets:
/// [`WaitPolicy::bounded_latency`] (the default), [`WaitPolicy::spinning`],
/// [`WaitPolicy::power_saving`].
///
/// ```
/// use hostcall::WaitPolicy;
/// use std::time::Duration;
/// let policy = WaitPolicy::default();
/// assert_eq!(policy, WaitPolicy::bounded_latency());
/// // However long the listener has been idle, it never sleeps longer than `max_wait`.
/// assert!((0..1000).all(|naps| policy.nap(naps) <= policy.max_wait));
/// assert_eq!(policy.longest_nap(), Some(Duration::from_micros(200)));
/// assert_eq!(WaitPolicy::spinning().longest_nap(), None); // never naps
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct WaitPolicy {
    /// Polls without work before the first nap. `u32::MAX`: never nap (a spinning listener:
    /// lowest latency, one core busy).
    pub spin_polls: u32,
    /// The first nap after work (or after a ring).
    pub min_wait: Duration,
    /// The longest nap: the bound on how late a call that rang no doorbell is polled (plus the
    /// timer slack and a wake-up).
    pub max_wait: Duration,
    /// The timer slack the listener's threads ask for (Linux `prctl(PR_SET_TIMERSLACK)`): how
    /// much later than asked the kernel may end a nap, to coalesce wake-ups. `None`: leave the
    /// slack the thread has (inherited: 50 µs unless the process changed it; or an earlier
    /// policy's). `Some(ZERO)` resets it to
    /// the thread's default. Not applied elsewhere than on Linux.
    pub timer_slack: Option<Duration>,
}

setters!(WaitPolicy {
    with_spin_polls: spin_polls: u32,
    with_min_wait: min_wait: Duration,
    with_max_wait: max_wait: Duration,
    with_timer_slack: timer_slack: Option<Duration>,
});

impl Default for WaitPolicy {
    /// [`WaitPolicy::bounded_latency`].
    fn default() -> Self {
        Self::bounded_latency()
    }
}

impl WaitPolicy {
    /// The default: 64 polls after work, then naps from 50 µs doubling to 200 µs, with a timer
    /// slack of 5 µs. A call after any idle gap is polled within about 200 µs plus a wake-up; an
    /// idle listener wakes about 5,000 times a second (the figures, measured: `docs/performance.md`,
    /// "Wait policies").
    pub fn bounded_latency() -> Self {
        Self {
            spin_polls: 64,
            min_wait: Duration::from_micros(50),
            max_wait: Duration::from_micros(200),
            timer_slack: Some(Duration::from_micros(5)),
        }
    }

    /// Never naps: polls in a loop. A call is served within one poll (microseconds) whatever
    /// the gap; one core is busy for as long as the listener runs (what llvm-gpu-loader does).
    pub fn spinning() -> Self {
        Self { spin_polls: u32::MAX, ..Self::bounded_latency() }
    }

    /// For devices that ring (ROCm's device code on an HSA signal, this project's CUDA and
    /// emulated clients), or when an idle core matters more than latency: 64 polls after work,
    /// then naps from 1 ms doubling to 10 ms, the inherited timer slack. An idle listener wakes
    /// about 100 times a second; a call that rings no doorbell waits up to about 10 ms.
    pub fn power_saving() -> Self {
        Self {
            spin_polls: 64,
            min_wait: Duration::from_millis(1),
            max_wait: Duration::from_millis(10),
            timer_slack: None,
        }
    }

    /// Whether the listener never naps.
    pub fn spins(&self) -> bool {
        self.spin_polls == u32::MAX
    }

    /// The length of nap number `naps_since_work` (0: the first after work or a ring):
    /// `min_wait` doubled that many times, never more than `max_wait`. A pure function: the
    /// listener's schedule.
    pub fn nap(&self, naps_since_work: u32) -> Duration {
        let doubled = self.min_wait.saturating_mul(1u32 << naps_since_work.min(31));
        doubled.min(self.max_wait)
    }

    /// The longest the listener sleeps between two polls (before the timer slack), `None` if it
    /// never naps.
    pub fn longest_nap(&self) -> Option<Duration> {
        (!self.spins()).then_some(self.max_wait)
    }
}

impl ListenerConfig {
    /// A listener that never sleeps: it polls its buffers in a loop ([`WaitPolicy::spinning`]).
    pub fn spinning() -> Self {
        Self { wait: WaitPolicy::spinning(), ..Self::default() }
    }

    /// A listener that naps up to 10 ms when idle ([`WaitPolicy::power_saving`]): for devices
    /// that ring, or when an idle core matters more than latency.
    pub fn power_saving() -> Self {
        Self { wait: WaitPolicy::power_saving(), ..Self::default() }
    }

    /// Sets [`WaitPolicy::spin_polls`] of [`ListenerConfig::wait`].
    #[must_use]
    pub fn with_spin_polls(mut self, value: u32) -> Self {
        self.wait.spin_polls = value;
        self
    }

    /// Sets [`WaitPolicy::min_wait`] of [`ListenerConfig::wait`].
    #[must_use]
    pub fn with_min_wait(mut self, value: Duration) -> Self {
        self.wait.min_wait = value;
        self
    }

    /// Sets [`WaitPolicy::max_wait`] of [`ListenerConfig::wait`].
    #[must_use]
    pub fn with_max_wait(mut self, value: Duration) -> Self {
        self.wait.max_wait = value;
        self
    }
}

/// A listener's policy, which [`super::Listener::set_wait_policy`] (or its runtime) may change
/// while it runs: the policy under a lock, and a generation the thread checks before each nap.
#[derive(Debug)]
pub(crate) struct LiveWait {
    policy: Mutex<WaitPolicy>,
    /// Bumped after each change of `policy`.
    generation: AtomicU64,
}

impl LiveWait {
    pub(crate) fn new(policy: WaitPolicy) -> Self {
        Self { policy: Mutex::new(policy), generation: AtomicU64::new(0) }
    }

    pub(crate) fn get(&self) -> WaitPolicy {
        *self.policy.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Replaces the policy; a thread sees it at its next check ([`LiveWait::changed`]).
    pub(crate) fn set(&self, policy: WaitPolicy) {
        *self.policy.lock().unwrap_or_else(|p| p.into_inner()) = policy;
        // Release: pairs with the Acquire load in `changed`; the policy itself is read under
        // the lock, so this only says "read it again".
        self.generation.fetch_add(1, Ordering::Release);
    }

    /// The policy if it changed since generation `seen` (which it updates).
    pub(crate) fn changed(&self, seen: &mut u64) -> Option<WaitPolicy> {
        // Acquire: pairs with the Release add in `set`.
        let now = self.generation.load(Ordering::Acquire);
        if now == *seen {
            return None;
        }
        *seen = now;
        Some(self.get())
    }
}

/// Asks the kernel for `policy`'s timer slack on the calling thread (a listener thread, at its
/// start and after each change of policy). Best effort: a refusal is logged once per call.
pub(crate) fn apply_timer_slack(policy: &WaitPolicy, thread: &str) {
    let Some(slack) = policy.timer_slack else { return };
    #[cfg(target_os = "linux")]
    {
        let nanos = libc::c_ulong::try_from(slack.as_nanos()).unwrap_or(libc::c_ulong::MAX);
        // SAFETY: PR_SET_TIMERSLACK takes one integer argument and changes only this thread's
        // timer slack; no memory is passed.
        let result = unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, nanos, 0, 0, 0) };
        if result != 0 {
            log::warn!(
                "{thread}: could not set the timer slack to {slack:?}: {}",
                std::io::Error::last_os_error()
            );
        }
    }
    #[cfg(not(target_os = "linux"))]
    log::debug!("{thread}: timer slack {slack:?} not applied: not Linux");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_never_sleeps_longer_than_its_bound_however_long_it_is_idle() {
        let policy = WaitPolicy::default();
        let longest = (0..10_000).map(|naps| policy.nap(naps)).max().unwrap();
        assert_eq!(longest, policy.max_wait);
        assert!(longest <= Duration::from_micros(200), "{longest:?}");
        assert_eq!(policy.longest_nap(), Some(longest));
        // A short slack: a nap ends at most a few microseconds late.
        assert!(policy.timer_slack.is_some_and(|s| s <= Duration::from_micros(10)));
    }

    #[test]
    fn naps_double_from_min_wait_to_max_wait() {
        let policy = WaitPolicy::default().with_min_wait(Duration::from_micros(50));
        let naps: Vec<u128> = (0..5).map(|n| policy.nap(n).as_micros()).collect();
        assert_eq!(naps, [50, 100, 200, 200, 200]);
        let flat = WaitPolicy::default().with_min_wait(Duration::from_micros(300));
        assert_eq!(flat.nap(0), flat.max_wait, "min_wait above max_wait: max_wait bounds it");
        assert_eq!(flat.nap(u32::MAX), flat.max_wait);
    }

    #[test]
    fn the_presets_state_their_bounds() {
        assert!(WaitPolicy::spinning().spins());
        assert_eq!(WaitPolicy::spinning().longest_nap(), None);
        let saving = WaitPolicy::power_saving();
        assert_eq!(saving.longest_nap(), Some(Duration::from_millis(10)));
        assert_eq!((0..64).map(|n| saving.nap(n)).max(), Some(Duration::from_millis(10)));
    }

    #[test]
    fn a_live_policy_reports_each_change_once() {
        let live = LiveWait::new(WaitPolicy::default());
        let mut seen = 0;
        assert_eq!(live.changed(&mut seen), None);
        live.set(WaitPolicy::spinning());
        assert_eq!(live.changed(&mut seen), Some(WaitPolicy::spinning()));
        assert_eq!(live.changed(&mut seen), None);
    }
}
