//! A gate for tests of stuck calls: the code under test (a service, a sink) calls
//! [`Gate::pass`], which tells the test it arrived and blocks until the test opens the gate
//! ([`Opener::open`]) or the patience runs out (then it panics, so a forgotten gate fails the
//! test instead of hanging it).

use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::Mutex;
use std::time::Duration;

/// The side the code under test holds (shareable: `Send + Sync`).
pub struct Gate {
    arrived: Mutex<Sender<()>>,
    opened: Mutex<Receiver<()>>,
    patience: Duration,
}

/// The test's side.
pub struct Opener {
    arrived: Receiver<()>,
    open: Sender<()>,
    patience: Duration,
}

/// A closed gate whose waits (both sides) give up after `patience`.
pub fn gate(patience: Duration) -> (Gate, Opener) {
    let (arrived_tx, arrived) = channel();
    let (open, opened) = channel();
    (
        Gate { arrived: Mutex::new(arrived_tx), opened: Mutex::new(opened), patience },
        Opener { arrived, open, patience },
    )
}

impl Gate {
    /// Says "arrived" and waits for the gate to open.
    pub fn pass(&self) {
        self.arrived.lock().unwrap().send(()).unwrap();
        self.opened.lock().unwrap().recv_timeout(self.patience).expect("released by the test");
    }
}

impl Opener {
    /// Waits until the code under test is at the gate.
    pub fn wait_arrived(&self, what: &str) {
        self.arrived.recv_timeout(self.patience).unwrap_or_else(|e| panic!("{what}: {e}"));
    }

    /// Lets one pass through.
    pub fn open(&self) {
        self.open.send(()).unwrap();
    }
}

/// Registers service `id` ("block") on `services`: each call passes a gate (so it blocks until
/// the test opens it) and then answers `[7, 0]`. Returns the test's side of the gate.
pub fn register_blocking(services: &hostcall::Services, id: u32, patience: Duration) -> Opener {
    let (gate, opener) = gate(patience);
    services
        .register_lane(id, "block", move |_| {
            gate.pass();
            Ok([7, 0])
        })
        .unwrap();
    opener
}
