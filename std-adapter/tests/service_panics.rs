//! A device that makes a service panic on every lane of every packet costs the host one
//! rate-limited log record per window, never the panic hook's output per panic: the test runs
//! itself as a child process (with `RUST_BACKTRACE=1`, where the default hook prints a backtrace
//! per panic), makes 2,000 panicking calls there, and counts the child's stderr lines.

use hostcall::prelude::*;
use hostcall::{
    observe::Reason, HostMemory, HostcallBuffer, Listener, ListenerConfig, PacketRequest, ParkingDoorbell,
    Wave, WARNINGS_PER_WINDOW, WARNING_WINDOW,
};
use hostcall_core::ErrorCode;
use std::process::Command;
use std::sync::Arc;
use std::time::Instant;

/// Set in the child's environment: run the panicking calls instead of spawning.
const CHILD: &str = "HOSTCALL_SERVICE_PANICS_CHILD";
const LANE_PANIC: u32 = 100;
const PACKET_PANIC: u32 = 101;
const CALLS: u64 = 2000;

struct PanickingPacketService;
impl PacketService for PanickingPacketService {
    fn serve(&self, packet: &mut PacketRequest<'_>) {
        panic!("packet service panics on packet {}", packet.index());
    }
}

/// The child: a listener whose two services always panic (a lane handler and a packet service),
/// and `CALLS` calls of a full wave alternating between them. Every lane must get the panic
/// error reply and be counted.
fn panicking_calls() {
    env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("warn")).init();
    let doorbell: Arc<dyn Doorbell> = Arc::new(ParkingDoorbell::new());
    let listener = Listener::start(doorbell.clone(), ListenerConfig::default()).unwrap();
    let services = listener.services();
    services
        .register_lane(LANE_PANIC, "lane-panic", |r| panic!("lane service panics on {:#x}", r[0]))
        .unwrap();
    services.register_packet(PACKET_PANIC, "packet-panic", PanickingPacketService).unwrap();
    let buffer = Arc::new(HostcallBuffer::new(Arc::new(HostMemory), 4, doorbell).unwrap());
    listener.add(buffer.clone()).unwrap();
    let wave = Wave::new(buffer, 64);
    for call in 0..CALLS {
        let service = if call % 2 == 0 { LANE_PANIC } else { PACKET_PANIC };
        let reply = wave.call(service, |lane| [call << 8 | lane as u64, 0, 0, 0, 0, 0, 0, 0]).unwrap();
        assert!((0..64).all(|lane| reply.lane(lane) == ErrorCode::ServicePanicked.reply()));
    }
    assert_eq!(listener.stats().refusals.get(Reason::HandlerPanic), CALLS * 64);
}

#[test]
fn panicking_services_print_at_most_the_rate_limit() {
    if std::env::var_os(CHILD).is_some() {
        return panicking_calls();
    }
    let started = Instant::now();
    let child = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "panicking_services_print_at_most_the_rate_limit",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD, "1")
        .env("RUST_BACKTRACE", "1")
        .env_remove("RUST_LOG")
        .output()
        .unwrap();
    let windows = 1 + (started.elapsed().as_secs_f64() / WARNING_WINDOW.as_secs_f64()) as usize;
    let stderr = String::from_utf8_lossy(&child.stderr);
    let lines = stderr.lines().count();
    assert!(
        child.status.success(),
        "the child failed:\n{}\n{stderr}",
        String::from_utf8_lossy(&child.stdout)
    );
    // Two call sites (lane handlers, packet services), each its own rate limit.
    let bound = 2 * WARNINGS_PER_WINDOW as usize * windows;
    assert!(lines <= bound, "{lines} lines on stderr for {} panics (at most {bound}):\n{stderr}", CALLS * 64);
    assert!(stderr.contains("lane-panic panicked") && stderr.contains("packet-panic panicked"), "{stderr}");
    assert!(stderr.contains("lane service panics on 0x"), "the record names the panic: {stderr}");
}
