//! Seeds of `rpc_exchange`: a geometry and a host each, then device writes, client streams and
//! drains.

use crate::rpc_exchange::{op, opcode_byte};
use hostcall_core::rpc::opcode::{self, libc};
use hostcall_core::DEVMEM;

/// A seed being written.
struct Script(Vec<u8>);

impl Script {
    /// `ports` ports (1..=4) of `lanes` lanes (1..=4), a stream limit of `limit` bytes (1 + 4k),
    /// and the flags (see [`op`]).
    fn new(ports: u8, lanes: u8, limit: u64, flags: u8) -> Self {
        Self(vec![ports - 1, lanes - 1, ((limit - 1) / 4) as u8, flags])
    }
    fn op(mut self, op: u8, port: u8) -> Self {
        self.0.extend([op, port]);
        self
    }
    fn opcode(mut self, opcode: u32) -> Self {
        let (byte, raw) = opcode_byte(opcode);
        self.0.push(byte);
        self.0.extend(raw.map(u32::to_le_bytes).into_iter().flatten());
        self
    }
    fn flip(self, port: u8) -> Self {
        self.op(op::FLIP, port)
    }
    fn raw_device(self, port: u8, value: u32) -> Self {
        let mut script = self.op(op::RAW_DEVICE, port);
        script.0.extend(value.to_le_bytes());
        script
    }
    fn raw_host(self, port: u8, value: u32) -> Self {
        let mut script = self.op(op::RAW_HOST, port);
        script.0.extend(value.to_le_bytes());
        script
    }
    fn header(self, port: u8, mask: u64, opcode: u32) -> Self {
        let mut script = self.op(op::HEADER, port);
        script.0.extend(mask.to_le_bytes());
        script.opcode(opcode)
    }
    fn word(self, port: u8, lane: u8, word: u8, value: u64) -> Self {
        let mut script = self.op(op::LANE_WORD, port);
        script.0.extend([lane, word, 1]);
        script.0.extend(value.to_le_bytes());
        script
    }
    fn stream_and_stop(self, port: u8, opcode: u32, mask: u64, declared: u64, packets: u8) -> Self {
        let mut script = self.op(op::STREAM_AND_STOP, port).opcode(opcode);
        script.0.extend(mask.to_le_bytes());
        script.0.extend(declared.to_le_bytes());
        script.0.push(packets);
        script
    }
    fn drain(self) -> Self {
        self.op(op::DRAIN, 0)
    }
}

pub(super) fn seeds() -> Vec<(&'static str, Vec<u8>)> {
    let hello = u64::from_le_bytes(*b"hello\n\0\0");
    let poller = op::BY_POLLER;
    vec![
        // RpcHost: a six-byte console write, answered; then the port's next call.
        (
            "console_write",
            Script::new(1, 1, 64, 0)
                .header(0, 1, libc::WRITE_TO_STDOUT)
                .word(0, 0, 0, 6)
                .word(0, 0, 1, hello)
                .flip(0)
                .drain()
                .flip(0)
                .drain(),
        ),
        // RpcHost: a stream that declares the most bytes there are, a few packets, then silence.
        (
            "huge_stream_then_stop",
            Script::new(2, 2, 64, 0)
                .header(1, u64::MAX, libc::WRITE_TO_STDOUT)
                .word(1, 0, 0, u64::MAX)
                .word(1, 1, 0, 1 << 40)
                .flip(1)
                .drain()
                .flip(1)
                .drain()
                .flip(1)
                .drain(),
        ),
        // RpcHost: a printf whose format and argument sizes are made up.
        (
            "printf_exchange",
            Script::new(1, 2, 256, 0)
                .header(0, 0b11, libc::PRINTF_TO_STDOUT)
                .word(0, 0, 0, 8)
                .word(0, 0, 1, u64::from_le_bytes(*b"%d %s\n\0\0"))
                .word(0, 1, 0, 300)
                .flip(0)
                .drain()
                .word(0, 0, 0, 16)
                .flip(0)
                .drain()
                .flip(0)
                .drain(),
        ),
        // RpcHost: a mailbox value that is neither 0 nor 1, an opcode nobody serves.
        (
            "raw_mailbox_unknown_opcode",
            Script::new(3, 1, 64, 0)
                .raw_device(2, 0xdead_beef)
                .header(2, 1, opcode::opcode(b'x', 0))
                .drain()
                .header(0, 1, 0x6300_0fff)
                .flip(0)
                .drain(),
        ),
        // The poller's host: unknown namespaces, an unknown 'h' id and a raw opcode beside a
        // served 'h' DEVMEM call, each handed back or answered, each unknown counted.
        (
            "poller_unknown_opcodes",
            Script::new(4, 4, 64, poller)
                .header(0, 0b1111, opcode::opcode(opcode::OFFLOAD, 1))
                .header(1, 0b0101, opcode::opcode(opcode::HOSTCALL, 0x00ab_cdef))
                .header(2, 0b1000, 0x0102_0304)
                .header(3, 0b0011, opcode::opcode(opcode::HOSTCALL, DEVMEM))
                .flip(0)
                .flip(1)
                .flip(2)
                .flip(3)
                .drain(),
        ),
        // The poller's host: a header naming all 64 lanes of ports of two.
        (
            "poller_lanes_beyond_the_buffer",
            Script::new(1, 2, 64, poller)
                .header(0, u64::MAX, opcode::rocm::DEVMEM)
                .flip(0)
                .drain()
                .flip(0)
                .drain(),
        ),
        // Both hosts: the client opens a stream of a huge length and stops after three packets;
        // the port stays locked, so the second open finds it taken.
        (
            "client_stream_then_stop",
            Script::new(2, 4, 64, 0)
                .stream_and_stop(0, libc::WRITE_TO_STDOUT, u64::MAX, 1 << 40, 3)
                .drain()
                .stream_and_stop(0, libc::WRITE_TO_STDERR, 0b1, 100, 1)
                .drain()
                .drain(),
        ),
        (
            "poller_client_stream_then_stop",
            Script::new(2, 4, 64, poller)
                .stream_and_stop(1, libc::WRITE_TO_STDOUT, u64::MAX, u64::MAX, 3)
                .drain()
                .stream_and_stop(0, opcode::opcode(opcode::HOSTCALL, DEVMEM), 0b11, 0, 1)
                .drain(),
        ),
        // Both hosts: the device writes the host's mailbox word (a flip the host did not make).
        (
            "host_mailbox_scribbled",
            Script::new(2, 1, 64, 0).raw_host(0, 7).drain().flip(0).drain().raw_host(1, 1).drain(),
        ),
        (
            "poller_host_mailbox_scribbled",
            Script::new(2, 1, 64, poller).raw_host(0, 7).drain().flip(0).drain().raw_host(1, 1).drain(),
        ),
    ]
    .into_iter()
    .map(|(name, script)| (name, script.0))
    .collect()
}
