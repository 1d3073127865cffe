//! Every way a device can end the host process is behind one switch,
//! `hostcall::services::ending::allow_device_to_end_process`, off by default: an aborting
//! SANITIZER report in a stack, phase or line packet, or in RPC's `'r'` and `'h'` opcodes, and
//! LLVM libc's `exit` and `abort` over RPC. Each case runs in a child process (this test binary,
//! re-run with `DEVICE_ENDING_CHILD` set), so a regression fails the parent's assertion instead of
//! killing the test runner; the parent bounds each child's run with a watchdog.

mod common;

use std::os::unix::process::ExitStatusExt;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::watchdog::exits_within;
use hostcall::prelude::*;
use hostcall::{
    services::ending::allow_device_to_end_process,
    services::rpc::client::one_lane::exit,
    services::sanitizer::{NoCodeObjects, SanitizerConfig},
    BufferRegistration, Protocol,
};
use hostcall::{
    DeviceAllocation, HostMemory, HostcallBuffer, Listener, ListenerConfig, ParkingDoorbell, Wave,
};
use hostcall_core::rpc::opcode::{self, libc, rocm};
use hostcall_core::rpc::{Client, View};
use hostcall_core::sync::AtomicU32;

const CHILD: &str = "DEVICE_ENDING_CHILD";
const SANITIZER: u32 = 4;
/// An 8-byte write by the lane, aborting (no "no abort" bits in the access info).
const ABORTING_WRITE: fn(usize) -> [u64; 8] = |lane| [0x40 + lane as u64, 0x77, 1, 2, 3, lane as u64, 1, 8];

fn patience() -> impl FnMut(u32) -> bool {
    let start = Instant::now();
    move |_| start.elapsed() < Duration::from_secs(20)
}

/// A listener serving SANITIZER with its default configuration (reports to stderr).
fn listener() -> (Listener, Arc<dyn Doorbell>) {
    let doorbell: Arc<dyn Doorbell> = Arc::new(ParkingDoorbell::new());
    let listener = Listener::start(doorbell.clone(), ListenerConfig::default()).unwrap();
    let config =
        SanitizerConfig::default().with_code_objects(Arc::new(NoCodeObjects)).with_use_asan_runtime(false);
    listener.services().enable_sanitizer(config).unwrap();
    (listener, doorbell)
}

/// The child half: `DEVICE_ENDING_CHILD="<case> <default|allowed>"`. Prints `survived` (and the
/// counts) if the process goes on.
#[test]
fn child_process_entry() {
    let Ok(spec) = std::env::var(CHILD) else { return };
    let (case, switch) = spec.split_once(' ').unwrap();
    if switch == "allowed" {
        allow_device_to_end_process(true);
    }
    let (listener, doorbell) = listener();
    let protocol = match case {
        "stack" => Some(Protocol::Stack),
        "phase" => Some(Protocol::Phase),
        "line" => Some(Protocol::Line),
        _ => None,
    };
    if let Some(protocol) = protocol {
        let buffer =
            Arc::new(HostcallBuffer::with_protocol(Arc::new(HostMemory), 4, doorbell, protocol).unwrap());
        listener.add(buffer.clone()).unwrap();
        Wave::new(buffer, 3).call(SANITIZER, ABORTING_WRITE).unwrap();
    } else {
        let protocol = Protocol::Rpc { lanes: 4 };
        let len = protocol.buffer_size(2).unwrap();
        let memory = DeviceAllocation::new(Arc::new(HostMemory), len, protocol.buffer_align()).unwrap();
        // SAFETY: `memory` stays allocated until after `remove_raw`, touched only atomically.
        listener.add(unsafe { BufferRegistration::raw(protocol, memory.as_ptr(), len, 2) }).unwrap();
        // SAFETY: as above; the view is used only while the listener serves the memory.
        let view = unsafe { View::from_raw(memory.as_ptr(), len, 2, 4) }.unwrap();
        let locks = [AtomicU32::new(0)];
        let client = Client::new(view, &locks).unwrap();
        match case {
            "rpc-r" | "rpc-h" => {
                let code =
                    if case == "rpc-r" { rocm::SANITIZER } else { opcode::opcode(opcode::HOSTCALL, 4) };
                let mut port = client.try_open(code, 0b111, 0).unwrap();
                port.send(|lane| ABORTING_WRITE(lane as usize), &mut patience()).unwrap();
                port.recv(|_, _| {}, &mut patience()).unwrap();
                port.close();
            }
            "rpc-exit" => exit(&client, 0, libc::EXIT, 7, &mut patience()).unwrap(),
            "rpc-abort" => exit(&client, 0, libc::ABORT, 0, &mut patience()).unwrap(),
            other => panic!("unknown case {other}"),
        }
        // The last packet of exit and abort: the client does not wait for the host to take it.
        let deadline = Instant::now() + Duration::from_secs(20);
        while listener.rpc_counters(memory.as_ptr()).unwrap().calls_done < 1 && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(1));
        }
        eprintln!("refused lanes: {}", listener.rpc_counters(memory.as_ptr()).unwrap().refused_lanes);
        listener.remove_raw(memory.as_ptr()).unwrap();
    }
    let stats = listener.shutdown();
    let packets = stats.services.get(&SANITIZER).map_or(0, |s| s.1.packets);
    eprintln!("sanitizer packets: {packets}");
    eprintln!("survived");
}

fn run_child(case: &str, switch: &str) -> (std::process::ExitStatus, String) {
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args(["child_process_entry", "--exact", "--nocapture", "--test-threads=1"])
        .env(CHILD, format!("{case} {switch}"))
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr = child.stderr.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut text = String::new();
        std::io::Read::read_to_string(&mut stderr, &mut text).unwrap();
        text
    });
    let status = exits_within(&mut child, &format!("the child ({case} {switch})"), Duration::from_secs(60));
    (status, reader.join().unwrap())
}

const SANITIZER_CASES: [&str; 5] = ["stack", "phase", "line", "rpc-r", "rpc-h"];

#[test]
fn by_default_an_aborting_sanitizer_report_is_printed_and_counted_and_the_host_goes_on() {
    for case in SANITIZER_CASES {
        let (status, stderr) = run_child(case, "default");
        assert!(status.success(), "{case}: {status:?}\n{stderr}");
        assert!(
            stderr.contains("==hostcall== AddressSanitizer: WRITE of size 8 on amdgpu device 0 by 3 lanes"),
            "{case}: {stderr}"
        );
        assert!(stderr.contains("not aborting: allow_device_to_end_process is off"), "{case}: {stderr}");
        assert!(stderr.contains("sanitizer packets: 1\n"), "{case}: {stderr}");
        assert!(stderr.contains("survived"), "{case}: {stderr}");
    }
}

#[test]
fn with_the_switch_on_an_aborting_sanitizer_report_aborts_on_every_protocol() {
    for case in SANITIZER_CASES {
        let (status, stderr) = run_child(case, "allowed");
        assert_eq!(status.signal(), Some(::libc::SIGABRT), "{case}: {status:?}\n{stderr}");
        assert!(stderr.contains("==hostcall== ABORTING (allow_device_to_end_process)"), "{case}: {stderr}");
        assert!(!stderr.contains("survived"), "{case}: {stderr}");
    }
}

#[test]
fn by_default_exit_and_abort_over_rpc_are_refused_counted_and_the_host_goes_on() {
    for case in ["rpc-exit", "rpc-abort"] {
        let (status, stderr) = run_child(case, "default");
        assert!(status.success(), "{case}: {status:?}\n{stderr}");
        assert!(stderr.contains("refused lanes: 1\n"), "{case}: {stderr}");
        assert!(stderr.contains("survived"), "{case}: {stderr}");
    }
}

#[test]
fn with_the_switch_on_exit_and_abort_over_rpc_end_the_host() {
    let (status, stderr) = run_child("rpc-exit", "allowed");
    assert_eq!(status.code(), Some(7), "{status:?}\n{stderr}");
    let (status, stderr) = run_child("rpc-abort", "allowed");
    assert_eq!(status.signal(), Some(::libc::SIGABRT), "{status:?}\n{stderr}");
}
