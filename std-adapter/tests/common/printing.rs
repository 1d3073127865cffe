//! A listener with PRINTF writing into memory the test reads back, and one host-memory buffer.

use hostcall::prelude::*;
use hostcall::{
    services::message::MessageLimits, services::printf::Streams, HostMemory, HostcallBuffer, Listener,
    ListenerConfig, ParkingDoorbell, Protocol,
};
use std::io::Write;
use std::sync::{Arc, Mutex};

/// A `Write` that tests can read afterwards.
#[derive(Clone, Default)]
pub struct Captured(Arc<Mutex<Vec<u8>>>);

impl Write for Captured {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(bytes);
        Ok(bytes.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Captured {
    /// Everything written so far, as UTF-8.
    pub fn text(&self) -> String {
        String::from_utf8(self.0.lock().unwrap().clone()).unwrap()
    }
}

/// A listener with PRINTF (stdout and stderr captured) and one buffer of a protocol.
pub struct Printing {
    pub listener: Listener,
    pub buffer: Arc<HostcallBuffer>,
    pub stdout: Captured,
    pub stderr: Captured,
}

/// A listener with PRINTF within `limits`, serving one buffer of `packets` packets of `protocol`.
pub fn printing(packets: u64, limits: MessageLimits, protocol: Protocol) -> Printing {
    let doorbell: Arc<dyn Doorbell> = Arc::new(ParkingDoorbell::new());
    let listener = Listener::start(doorbell.clone(), ListenerConfig::default()).unwrap();
    let (stdout, stderr) = (Captured::default(), Captured::default());
    listener
        .services()
        .enable_printf(Streams { stdout: stdout.clone(), stderr: stderr.clone() }, limits)
        .unwrap();
    let buffer =
        Arc::new(HostcallBuffer::with_protocol(Arc::new(HostMemory), packets, doorbell, protocol).unwrap());
    listener.add(buffer.clone()).unwrap();
    Printing { listener, buffer, stdout, stderr }
}
