//! What the [`ListenerPool`](hostcall::threads::pool::ListenerPool) tests (`pool.rs`,
//! `pool_line.rs`) share: the echo service that records which thread served which packet, and a
//! host-memory buffer of a given protocol.
//!
//! A test binary includes this file with `#[path = "common/pool.rs"] mod pool_common;`.

use hostcall::buffer::Protocol;
use hostcall::core::PacketRequest;
use hostcall::prelude::*;
use hostcall::{HostMemory, HostcallBuffer};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::thread;

/// The service id [`Recorder`] is registered under.
pub const ECHO: u32 = 100;

/// Answers `request[0] + lane` and records which thread served which packet index.
#[derive(Clone, Default)]
pub struct Recorder {
    pub served_by: Arc<Mutex<HashMap<u32, HashMap<String, u64>>>>,
}

impl PacketService for Recorder {
    fn serve(&self, packet: &mut PacketRequest<'_>) {
        let name = thread::current().name().unwrap_or("?").to_owned();
        *self.served_by.lock().unwrap().entry(packet.index()).or_default().entry(name).or_default() += 1;
        let lanes: Vec<usize> = packet.lanes().collect();
        for lane in lanes {
            let r = packet.request(lane);
            packet.reply(lane, [r[0] + lane as u64, r[1]]);
        }
    }
}

/// A buffer of `packets` packets in host memory, speaking `protocol`, rung through `doorbell`.
pub fn buffer(doorbell: &Arc<dyn Doorbell>, packets: u64, protocol: Protocol) -> Arc<HostcallBuffer> {
    Arc::new(
        HostcallBuffer::with_protocol(Arc::new(HostMemory), packets, doorbell.clone(), protocol).unwrap(),
    )
}
