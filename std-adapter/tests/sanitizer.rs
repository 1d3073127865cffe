//! The SANITIZER service (id 4) end to end: emulated waves report out-of-bounds accesses; the
//! report (this project's own, no ASan runtime in this test binary) is checked line by line; the
//! code-object lookup against the HSA stand-in. (The abort policy: `device_ending.rs`.)

#[path = "common/hsa_standin.rs"]
mod standin;

use std::sync::{Arc, Mutex};

use hostcall::backend::hsa::{HsaRuntime, LoadedCodeObject};
use hostcall::prelude::*;
use hostcall::services::sanitizer::{
    CodeObjects, HsaCodeObjects, NoCodeObjects, SanitizerConfig, MAX_LIST_AGE, MIN_RELIST_INTERVAL,
};
use hostcall::{HostMemory, HostcallBuffer, Listener, ListenerConfig, ParkingDoorbell, Wave};

const SANITIZER: u32 = 4;
const WRITE: u64 = 1;
const NO_ABORT: u64 = 0xffff_ffff_0000_0000;

/// A listener with SANITIZER reporting into a string.
struct Setup {
    listener: Listener,
    buffer: Arc<HostcallBuffer>,
    printed: Arc<Mutex<String>>,
}

fn setup(config: SanitizerConfig, device: u32) -> Setup {
    let doorbell: Arc<dyn Doorbell> = Arc::new(ParkingDoorbell::new());
    let listener = Listener::start(doorbell.clone(), ListenerConfig::default()).unwrap();
    let printed = Arc::new(Mutex::new(String::new()));
    let sink = printed.clone();
    let config = config
        .with_sink(Arc::new(move |text: &str| sink.lock().unwrap().push_str(text)))
        .with_use_asan_runtime(false);
    listener.services().enable_sanitizer(config).unwrap();
    let buffer =
        Arc::new(HostcallBuffer::new(Arc::new(HostMemory), 4, doorbell).unwrap().with_device_ordinal(device));
    listener.add(buffer.clone()).unwrap();
    Setup { listener, buffer, printed }
}

/// Lanes 1, 4 and 9 of workgroup (7, 8, 9) write 4 bytes out of bounds at pc 0x10_2040.
fn three_lane_write(lane: usize) -> [u64; 8] {
    let access = WRITE | if lane == 1 { NO_ABORT } else { 0 }; // only the first lane's info counts
    let wg = if lane == 1 { [7, 8, 9] } else { [70, 80, 90] }; // ditto
    [0x7f00_0000_1000 + lane as u64 * 4, 0x10_2040, wg[0], wg[1], wg[2], 100 + lane as u64, access, 4]
}

#[test]
fn a_three_lane_out_of_bounds_write_is_reported_line_by_line() {
    let s = setup(SanitizerConfig::default().with_code_objects(Arc::new(NoCodeObjects)), 2);
    let reply = Wave::with_activemask(s.buffer.clone(), (1 << 1) | (1 << 4) | (1 << 9))
        .call(SANITIZER, three_lane_write)
        .unwrap();
    for lane in [1, 4, 9] {
        assert_eq!(reply.lane(lane), [0, 0], "lane {lane} is answered with zeros");
    }
    let printed = s.printed.lock().unwrap().clone();
    let lines: Vec<&str> = printed.lines().collect();
    assert_eq!(
        lines,
        [
            "==hostcall== AddressSanitizer: WRITE of size 4 on amdgpu device 2 by 3 lanes",
            "==hostcall==   pc 0x102040 (code object unknown)",
            "==hostcall==   workgroup (7, 8, 9)",
            "==hostcall==   lane 1: local id 101, address 0x7f0000001004",
            "==hostcall==   lane 4: local id 104, address 0x7f0000001010",
            "==hostcall==   lane 9: local id 109, address 0x7f0000001024",
            "==hostcall==   (a no-abort report: the program goes on)",
        ]
    );
    let stats = s.listener.shutdown();
    assert_eq!(stats.services[&SANITIZER].1.packets, 1);
    assert_eq!(stats.services[&SANITIZER].1.errors, 0);
}

#[test]
fn the_pc_is_named_by_its_code_object_and_offset() {
    let objects = vec![LoadedCodeObject {
        uri: "file:///opt/app/kernels%20v2.co#offset=4096&size=8192".into(),
        load_base: 0x10_0000,
        load_size: 0x1_0000,
        load_delta: 0x10_0000,
    }];
    let s = setup(SanitizerConfig::default().with_code_objects(Arc::new(objects)), 0);
    Wave::with_activemask(s.buffer.clone(), 0b10).call(SANITIZER, three_lane_write).unwrap();
    let printed = s.printed.lock().unwrap().clone();
    assert_eq!(
        printed.lines().nth(1),
        Some("==hostcall==   pc 0x102040 in file:///opt/app/kernels%20v2.co#offset=4096&size=8192 at offset 0x2040")
    );
    s.listener.shutdown();
}

#[test]
fn no_abort_reports_are_rate_limited_per_pc() {
    let config = SanitizerConfig::default().with_code_objects(Arc::new(NoCodeObjects)).with_reports_per_pc(2);
    let s = setup(config, 0);
    let wave = Wave::new(s.buffer.clone(), 1);
    for round in 0..5u64 {
        wave.call(SANITIZER, |_| [0x1000 + round, 0xabc, 0, 0, 0, 0, NO_ABORT, 1]).unwrap();
    }
    wave.call(SANITIZER, |_| [0x1000, 0xdef, 0, 0, 0, 0, NO_ABORT, 1]).unwrap(); // another pc
    let printed = s.printed.lock().unwrap().clone();
    assert_eq!(printed.matches("pc 0xabc ").count(), 2, "{printed}");
    assert_eq!(printed.matches("pc 0xdef ").count(), 1, "{printed}");
    s.listener.shutdown();
}

#[test]
fn code_objects_are_found_through_the_loader_extension_of_the_stand_in() {
    let standin = standin::StandIn::new("sanitizer-loader", "", "");
    standin.set_code_objects(
        "0 100000 10000 1048576 file:///tmp/a%20b.co#offset=0x1000&size=8192\n\
         1 7f0000 400 -16 memory://4242#offset=0x7f0000&size=1024",
    );
    let runtime = Arc::new(HsaRuntime::from_path(standin.path()).unwrap());
    let objects = runtime.loaded_code_objects().unwrap();
    assert_eq!(
        objects,
        [
            LoadedCodeObject {
                uri: "file:///tmp/a%20b.co#offset=0x1000&size=8192".into(),
                load_base: 0x10_0000,
                load_size: 0x1_0000,
                load_delta: 0x10_0000
            },
            LoadedCodeObject {
                uri: "memory://4242#offset=0x7f0000&size=1024".into(),
                load_base: 0x7f_0000,
                load_size: 0x400,
                load_delta: -16
            },
        ]
    );
    let lookup = HsaCodeObjects::with_runtime(runtime.clone());
    let tables = || standin.calls("hsa_system_get_major_extension_table").len();
    assert_eq!(tables(), 1, "the listing above");
    assert_eq!(lookup.find(0x10_2040).map(|o| o.load_base), Some(0x10_0000));
    assert_eq!(lookup.find(0x7f_03ff).map(|o| o.load_delta), Some(-16));
    assert_eq!(tables(), 2, "one listing, kept for the next lookups");
    for _ in 0..300 {
        assert_eq!(lookup.find(0x10_2040).map(|o| o.load_base), Some(0x10_0000));
    }
    assert_eq!(tables(), 2, "300 reports in the list's lifetime: no listing");

    // A pc outside every code object: listed again, at most once per interval.
    std::thread::sleep(MIN_RELIST_INTERVAL);
    assert_eq!(lookup.find(0x7f_0400), None);
    assert_eq!(lookup.find(0x7f_0400), None);
    assert_eq!(tables(), 3, "one listing for the first miss, none for the second");

    // Code objects gone: seen once the list is older than its age limit.
    standin.set_code_objects("");
    std::thread::sleep(MAX_LIST_AGE);
    assert_eq!(lookup.find(0x10_2040), None);
    drop(lookup);
    drop(runtime);
}

#[test]
fn without_an_hsa_runtime_the_code_object_is_unknown() {
    // This test binary never sets HOSTCALL_HSA_LIB; without ROCm installed the lookup finds nothing.
    if std::env::var_os("HOSTCALL_HSA_LIB").is_none() && HsaRuntime::new().is_err() {
        assert_eq!(HsaCodeObjects::default().find(0x1000), None);
    }
}
