//! The listener's wait policy, seen from outside and without timing assertions: the naps an idle
//! listener asks its doorbell for stay within the policy's bound however long it idles; a call
//! whose device never rings is served after an idle spell; a ring ends a long nap; a buffer is
//! removed while its listener naps; a new policy reaches a running listener; the timer slack is
//! the listener thread's.

#[macro_use]
mod common;

use common::watchdog::returns_within;
use common::waves::{register_add, ADD};

use hostcall::prelude::*;
use hostcall::{
    HostMemory, HostcallBuffer, Listener, ListenerConfig, ParkingDoorbell, WaitPolicy, Wave,
    DOORBELL_INIT as INIT,
};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// A doorbell no ring reaches (a device that never rings, as LLVM libc's RPC client): its value
/// never moves, and every wait or nap sleeps its whole timeout. It records the longest timeout
/// asked and how many were asked.
#[derive(Debug, Default)]
struct NeverRung {
    longest_nanos: AtomicU64,
    naps: AtomicU64,
}

impl NeverRung {
    fn record(&self, timeout: Duration) -> u64 {
        let nanos = u64::try_from(timeout.as_nanos()).unwrap_or(u64::MAX);
        // Relaxed (both): statistics the test reads after the naps it waited for.
        self.longest_nanos.fetch_max(nanos, Ordering::Relaxed);
        self.naps.fetch_add(1, Ordering::Relaxed);
        // Never longer than a second at once, so a broken schedule still lets the test end.
        std::thread::sleep(timeout.min(Duration::from_secs(1)));
        INIT
    }

    fn longest(&self) -> Duration {
        Duration::from_nanos(self.longest_nanos.load(Ordering::Relaxed))
    }
}

impl Doorbell for NeverRung {
    fn handle(&self) -> u64 {
        0x1000
    }
    fn ring(&self) {}
    fn value(&self) -> u64 {
        INIT
    }
    fn wait(&self, _last_seen: u64, timeout: Duration) -> u64 {
        self.record(timeout)
    }
    fn nap(&self, _last_seen: u64, timeout: Duration) -> u64 {
        self.record(timeout)
    }
}

fn buffer_on(doorbell: Arc<dyn Doorbell>) -> Arc<HostcallBuffer> {
    Arc::new(HostcallBuffer::new(Arc::new(HostMemory), 2, doorbell).unwrap())
}

fn add_call(buffer: &Arc<HostcallBuffer>) -> [u64; 2] {
    Wave::new(buffer.clone(), 1).call(ADD, |_| [40, 2, 0, 0, 0, 0, 0, 0]).unwrap().lane(0)
}

#[test]
fn an_idle_listener_never_naps_longer_than_the_default_bound_and_serves_a_silent_call() {
    returns_within("the idle listener", Duration::from_secs(60), || {
        let bell = Arc::new(NeverRung::default());
        let listener = Listener::start(bell.clone(), ListenerConfig::default()).unwrap();
        register_add(listener.services());
        let buffer = buffer_on(bell.clone());
        listener.add(buffer.clone()).unwrap();
        // Idle well past the point where a doubling schedule would have grown beyond its bound.
        while bell.naps.load(Ordering::Relaxed) < 40 {
            std::thread::sleep(Duration::from_millis(5));
        }
        std::thread::sleep(Duration::from_millis(50));
        let bound = WaitPolicy::default().max_wait;
        assert!(bound <= Duration::from_micros(200), "{bound:?}");
        assert!(bell.longest() <= bound, "an idle nap of {:?}, over the bound {bound:?}", bell.longest());
        // After that idle spell, a call that rings nothing is served (by a poll after a nap).
        assert_eq!(add_call(&buffer), [42, 0]);
        assert!(listener.stats().events.timeout_polls > 0);
        listener.shutdown();
    });
}

#[test]
fn the_power_saving_preset_naps_up_to_its_own_stated_bound() {
    returns_within("the power-saving listener", Duration::from_secs(60), || {
        let bell = Arc::new(NeverRung::default());
        let listener = Listener::start(bell.clone(), ListenerConfig::power_saving()).unwrap();
        while bell.naps.load(Ordering::Relaxed) < 8 {
            std::thread::sleep(Duration::from_millis(5));
        }
        assert_eq!(bell.longest(), WaitPolicy::power_saving().max_wait);
        listener.shutdown();
    });
}

/// A policy that never spins and naps ten minutes at a time: only a ring (or a new policy)
/// wakes such a listener within a test's patience.
fn naps_of_ten_minutes() -> WaitPolicy {
    WaitPolicy::default()
        .with_spin_polls(0)
        .with_min_wait(Duration::from_secs(600))
        .with_max_wait(Duration::from_secs(600))
}

#[test]
fn a_ring_ends_a_long_nap() {
    returns_within("a rung call during a 600 s nap", Duration::from_secs(30), || {
        let doorbell: Arc<dyn Doorbell> = Arc::new(ParkingDoorbell::new());
        let naps_of_ten_minutes = naps_of_ten_minutes();
        let config = ListenerConfig::default().with_wait(naps_of_ten_minutes);
        let listener = Listener::start(doorbell.clone(), config).unwrap();
        register_add(listener.services());
        let buffer = buffer_on(doorbell);
        listener.add(buffer.clone()).unwrap();
        std::thread::sleep(Duration::from_millis(20)); // asleep in its first nap
        assert_eq!(add_call(&buffer), [42, 0]); // the wave rings the listener's doorbell
        listener.shutdown();
    });
}

#[test]
fn a_new_policy_reaches_a_running_listener() {
    returns_within("a silent call after set_wait_policy", Duration::from_secs(30), || {
        let doorbell: Arc<dyn Doorbell> = Arc::new(ParkingDoorbell::new());
        let naps_of_ten_minutes = naps_of_ten_minutes();
        let listener =
            Listener::start(doorbell, ListenerConfig::default().with_wait(naps_of_ten_minutes)).unwrap();
        register_add(listener.services());
        // The buffer rings a doorbell nobody listens to: only a poll finds its calls.
        let buffer = buffer_on(Arc::new(ParkingDoorbell::new()));
        listener.add(buffer.clone()).unwrap();
        std::thread::sleep(Duration::from_millis(20)); // asleep in its first ten-minute nap
        listener.set_wait_policy(WaitPolicy::default());
        assert_eq!(listener.wait_policy(), WaitPolicy::default());
        assert_eq!(add_call(&buffer), [42, 0]);
        listener.shutdown();
    });
}

#[cfg(target_os = "linux")]
#[test]
fn the_timer_slack_is_the_listener_threads() {
    const SLACK: u32 = 101;
    fn slack_of_this_thread() -> u64 {
        // SAFETY: PR_GET_TIMERSLACK takes no argument and reads this thread's slack.
        unsafe { libc::prctl(libc::PR_GET_TIMERSLACK, 0, 0, 0, 0) as u64 }
    }
    returns_within("the timer slack calls", Duration::from_secs(30), || {
        let doorbell: Arc<dyn Doorbell> = Arc::new(ParkingDoorbell::new());
        let listener = Listener::start(doorbell.clone(), ListenerConfig::default()).unwrap();
        listener.services().register_lane(SLACK, "slack", |_| Ok([slack_of_this_thread(), 0])).unwrap();
        let buffer = buffer_on(doorbell);
        listener.add(buffer.clone()).unwrap();
        let slack = || Wave::new(buffer.clone(), 1).call(SLACK, |_| [0; 8]).unwrap().lane(0)[0];
        let default_slack = WaitPolicy::default().timer_slack.unwrap();
        assert_eq!(Duration::from_nanos(slack()), default_slack);
        let slacker = WaitPolicy::default().with_timer_slack(Some(Duration::from_micros(77)));
        listener.set_wait_policy(slacker);
        // The first call after the change may be served before the thread's next nap took it.
        let seen: Vec<u64> = (0..50).map(|_| slack()).collect();
        assert!(seen.contains(&77_000), "{seen:?}");
        assert_eq!(seen.last(), Some(&77_000), "{seen:?}");
        listener.shutdown();
    });
}

/// A listener asleep in a long nap holds nothing of its buffers: removing one returns at once,
/// not when the nap ends (the thread drops its poll session, whose pins a remover waits for,
/// before it naps).
#[test]
fn a_buffer_is_removed_while_its_listener_naps() {
    returns_within("a removal during a 600 s nap", Duration::from_secs(30), || {
        let doorbell: Arc<dyn Doorbell> = Arc::new(ParkingDoorbell::new());
        let config = ListenerConfig::default().with_wait(naps_of_ten_minutes());
        let listener = Listener::start(doorbell.clone(), config).unwrap();
        register_add(listener.services());
        let buffer = buffer_on(doorbell);
        listener.add(buffer.clone()).unwrap();
        // A served call: a poll has taken the buffer into the thread's session.
        assert_eq!(add_call(&buffer), [42, 0]);
        std::thread::sleep(Duration::from_millis(50)); // then asleep in a 600 s nap
        listener.remove_buffer(&buffer).unwrap();
        listener.shutdown();
    });
}
