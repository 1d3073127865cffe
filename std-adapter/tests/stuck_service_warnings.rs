//! A stuck service call is reported (issue 26, defect 6): a rate-limited warning naming the
//! service id, the buffer and how long so far while it runs, and one more when it returns, with
//! how long it took. A capturing logger records the process's lines (one test in this binary, so
//! that no other test spends the rate limit).

#[macro_use]
mod common;

use common::logs;
use common::watchdog::returns_within;
use hostcall::prelude::*;
use hostcall::{
    observe::Reason, HostMemory, HostcallBuffer, Listener, ListenerConfig, ParkingDoorbell, Protocol, Wave,
};
use std::sync::Arc;
use std::time::{Duration, Instant};

const BLOCK: u32 = 300;
const PATIENCE: Duration = Duration::from_secs(30);

/// The captured lines that contain every one of `words`.
fn lines_with(words: &[&str]) -> Vec<String> {
    logs::lines().iter().filter(|line| words.iter().all(|w| line.contains(w))).cloned().collect()
}

/// Waits until a captured line contains every one of `words`.
fn wait_for_line(words: &[&str]) -> String {
    let started = Instant::now();
    loop {
        if let Some(line) = lines_with(words).pop() {
            return line;
        }
        assert!(started.elapsed() < PATIENCE, "no warning with {words:?}; captured: {:?}", *logs::lines());
        std::thread::sleep(Duration::from_millis(2));
    }
}

fn a_stuck_call_is_warned_about_and_its_return_too(protocol: Protocol) {
    // The lines of the protocol before are not this one's: its buffer may have had this one's
    // address, and its warning would match before this listener's watchdog counted anything.
    logs::lines().clear();
    let doorbell: Arc<dyn Doorbell> = Arc::new(ParkingDoorbell::new());
    let config = ListenerConfig::default().with_stuck_after(Duration::from_millis(20));
    let listener = Listener::start(doorbell.clone(), config).unwrap();
    let opener = common::gate::register_blocking(listener.services(), BLOCK, PATIENCE);
    let buffer =
        Arc::new(HostcallBuffer::with_protocol(Arc::new(HostMemory), 4, doorbell, protocol).unwrap());
    listener.add(buffer.clone()).unwrap();
    let wave = Wave::new(buffer.clone(), 1).with_timeout(PATIENCE);
    let call = std::thread::spawn(move || wave.call(BLOCK, |_| [0; 8]).unwrap().lane(0)[0]);
    opener.wait_arrived("the blocking service runs");

    let at = format!("{:#x}", buffer.as_ptr() as usize);
    let running = wait_for_line(&["service 300", &at, "has been running for"]);
    assert_eq!(listener.stats().refusals.get(Reason::StuckService), 1, "{running}");
    opener.open();
    assert_eq!(call.join().unwrap(), 7);
    let returned = wait_for_line(&["service 300", &at, "returned after"]);
    assert!(!returned.contains("after at least 0ns"), "{returned}");
    listener.shutdown();
}

#[test]
fn every_protocol_warns_about_a_stuck_call() {
    logs::install();
    returns_within("stuck-call warnings", PATIENCE * 4, || {
        for protocol in [Protocol::Stack, Protocol::Phase, Protocol::Line, common::RPC] {
            a_stuck_call_is_warned_about_and_its_return_too(protocol);
        }
    });
}
