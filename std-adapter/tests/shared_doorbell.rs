//! A doorbell shared by several listeners keeps working when one of them shuts down: the others
//! stay asleep when idle (they do not busy-poll) and go on serving. Every call that must return
//! runs under a watchdog, so a hang fails the test instead of stalling it.
//!
//! The CPU time of a listener thread is read from `/proc/self/task/<tid>/stat` (Linux), the
//! thread found by its name.
#![cfg(target_os = "linux")]

use hostcall::prelude::*;

use hostcall::{HostMemory, HostcallBuffer, Listener, ListenerConfig, ListenerPool, ParkingDoorbell, Wave};
use std::sync::{mpsc, Arc};
use std::thread;
use std::time::{Duration, Instant};

const ADD: u32 = 100;
/// How long the survivor is watched, and the most CPU it may use meanwhile (an idle listener
/// that naps 10 ms at a time uses well under 1 %; one that busy-polls uses all it gets).
const WINDOW: Duration = Duration::from_millis(500);
const MOST_CPU: Duration = Duration::from_millis(100);

/// Runs `f` on a thread; fails the test if it has not returned within `limit`.
fn within<T: Send + 'static>(limit: Duration, what: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = mpsc::channel();
    thread::spawn(move || {
        let _ = tx.send(f());
    });
    rx.recv_timeout(limit).unwrap_or_else(|e| panic!("{what} did not return within {limit:?} ({e})"))
}

/// The CPU time (user + system) so far of this process's thread named `name`.
fn thread_cpu(name: &str) -> Duration {
    for task in std::fs::read_dir("/proc/self/task").unwrap() {
        let path = task.unwrap().path();
        let comm = std::fs::read_to_string(path.join("comm")).unwrap_or_default();
        if comm.trim_end() != name {
            continue;
        }
        let stat = std::fs::read_to_string(path.join("stat")).unwrap();
        // Fields after the parenthesised name: state is field 3, utime 14, stime 15.
        let fields: Vec<&str> = stat[stat.rfind(')').unwrap() + 2..].split(' ').collect();
        let ticks: u64 = fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap();
        // SAFETY: `sysconf` has no preconditions.
        let per_second = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as u64;
        return Duration::from_micros(ticks * 1_000_000 / per_second);
    }
    panic!("no thread named {name:?}");
}

/// Asserts that the thread `name` stays (nearly) idle for [`WINDOW`].
fn assert_idle(name: &str) {
    thread::sleep(Duration::from_millis(50)); // the spurious ring's one poll
    let (cpu, wall) = (thread_cpu(name), Instant::now());
    thread::sleep(WINDOW);
    let (cpu, wall) = (thread_cpu(name) - cpu, wall.elapsed());
    println!("{name}: {cpu:?} of CPU in {wall:?}");
    assert!(cpu < MOST_CPU, "the idle listener {name:?} used {cpu:?} of CPU in {wall:?}: it busy-polls");
}

/// The power-saving policy: its naps are 10 ms, so the listener's own polls cost next to nothing
/// and any CPU it uses comes from wake-ups the doorbell gives it (a doorbell the stopped
/// listener left rung would end every nap at once). The default policy's 200 µs naps cost a
/// few % of a core on a quiet machine and far more on a loaded virtual one, which would blur
/// the line between napping and busy-polling; its idle cost is measured by the benchmark
/// (`docs/performance.md`, "Wait policies"), not here.
fn config(name: &str) -> ListenerConfig {
    ListenerConfig::power_saving().with_thread_name(name.into())
}

fn add_call(buffer: &Arc<HostcallBuffer>) -> [u64; 2] {
    let wave = Wave::new(buffer.clone(), 1).with_timeout(Duration::from_secs(5));
    within(Duration::from_secs(10), "a call", move || {
        wave.call(ADD, |_| [40, 2, 0, 0, 0, 0, 0, 0]).expect("a reply").lane(0)
    })
}

#[test]
fn stopping_one_listener_leaves_another_on_its_doorbell_asleep_and_serving() {
    let doorbell: Arc<dyn Doorbell> = Arc::new(ParkingDoorbell::new());
    let stopping = Listener::start(doorbell.clone(), config("hc-stopping")).unwrap();
    let survivor = Arc::new(Listener::start(doorbell.clone(), config("hc-survivor")).unwrap());
    survivor.services().register_lane(ADD, "add", |r| Ok([r[0] + r[1], 0])).unwrap();
    let buffer = Arc::new(HostcallBuffer::new(Arc::new(HostMemory), 4, doorbell.clone()).unwrap());
    survivor.add(buffer.clone()).unwrap();
    assert_eq!(add_call(&buffer), [42, 0]);

    within(Duration::from_secs(10), "shutdown of the other listener", move || stopping.shutdown());
    assert_idle("hc-survivor");
    assert_eq!(add_call(&buffer), [42, 0], "the survivor still serves");
    within(Duration::from_secs(10), "shutdown of the survivor", move || survivor.shutdown());
}

#[test]
fn stopping_one_thread_of_a_pool_leaves_the_others_asleep_and_serving() {
    let doorbell: Arc<dyn Doorbell> = Arc::new(ParkingDoorbell::new());
    let pool = Arc::new(ListenerPool::start(2, doorbell.clone(), config("hc-pool")).unwrap());
    pool.services().register_lane(ADD, "add", |r| Ok([r[0] + r[1], 0])).unwrap();
    // Stack buffers go whole to the threads in turn: the first to thread 0, the second to 1.
    let buffers: Vec<Arc<HostcallBuffer>> = (0..2)
        .map(|_| Arc::new(HostcallBuffer::new(Arc::new(HostMemory), 4, doorbell.clone()).unwrap()))
        .collect();
    for buffer in &buffers {
        pool.add(buffer.clone()).unwrap();
    }
    assert_eq!(add_call(&buffers[1]), [42, 0]);

    let stopping = pool.clone();
    within(Duration::from_secs(10), "shutdown of thread 0", move || stopping.listeners()[0].shutdown());
    assert_idle("hc-pool-1");
    assert_eq!(add_call(&buffers[1]), [42, 0], "the surviving thread still serves");
    within(Duration::from_secs(10), "shutdown of the pool", move || pool.shutdown());
}
