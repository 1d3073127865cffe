//! An LLVM libc GPU RPC buffer through the C ABI: `hostcall_enable_ex` with the version-2 options
//! (lanes, the policy's groups, the budgets), served by the default runtime's listener opcode by
//! opcode, its refusals in the C stats, bad RPC options refused.

use hostcall_capi::options::*;
use hostcall_capi::stats::{HostcallBufferStats, HOSTCALL_REASON_SLOTS};
use hostcall_capi::status::{HOSTCALL_ERR_OPTIONS, HOSTCALL_OK};
use hostcall_capi::{
    hostcall_disable, hostcall_enable_ex, hostcall_get_buffer_stats, hostcall_rpc_buffer_size,
};
use hostcall_core::rpc::opcode::libc;
use hostcall_core::rpc::{Client, View};
use hostcall_core::sync::AtomicU32;
use hostcall_rs::{
    observe::Reason,
    services::rpc::client::one_lane::{fopen, one_packet, strings},
};
use std::ffi::c_void;
use std::time::{Duration, Instant};

const PORTS: u32 = 2;

fn options(rpc_lanes: u32, rpc_allow: u32) -> HostcallEnableOptions {
    HostcallEnableOptions {
        size: std::mem::size_of::<HostcallEnableOptions>() as u32,
        protocol: HOSTCALL_PROTOCOL_RPC,
        occupied: std::ptr::null_mut(),
        device_ordinal: 0,
        reserved: 0,
        rpc_lanes,
        rpc_allow,
        rpc_deny: 0,
        rpc_open_files: 0,
        rpc_stream_bytes: 0,
        rpc_files_dir: std::ptr::null(),
    }
}

fn patience() -> impl FnMut(u32) -> bool {
    let start = Instant::now();
    move |_| start.elapsed() < Duration::from_secs(10)
}

fn refusals(buffer: *mut c_void) -> [u64; HOSTCALL_REASON_SLOTS] {
    // SAFETY: a zeroed struct of integers is valid; `size` set as the C caller sets it.
    let mut stats: HostcallBufferStats = unsafe { std::mem::zeroed() };
    stats.size = std::mem::size_of::<HostcallBufferStats>() as u32;
    // SAFETY: `stats` is writable and its `size` set.
    assert_eq!(unsafe { hostcall_get_buffer_stats(buffer, &mut stats) }, HOSTCALL_OK);
    stats.refusals
}

#[test]
fn an_rpc_buffer_is_enabled_and_served_through_the_c_abi() {
    let len = hostcall_rpc_buffer_size(PORTS, 1);
    assert_eq!(len, 24 * 2 + 64 * 2);
    let dir = std::env::temp_dir().join(format!("hostcall-capi-rpc-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("out.txt");
    let path_bytes = b"out.txt".to_vec(); // beneath `dir`
    let c_dir = std::ffi::CString::new(dir.to_str().unwrap()).unwrap();
    let not_a_dir = std::ffi::CString::new(format!("{}/missing", dir.display())).unwrap();
    let with_dir = |allow, files_dir: &std::ffi::CStr| HostcallEnableOptions {
        rpc_files_dir: files_dir.as_ptr(),
        ..options(1, allow)
    };

    // Bad options first: no lanes; RPC fields on a stack buffer; an unknown group; files without
    // their directory, a directory without files, or one that is not there; the exit group
    // (hostcall_allow_device_to_end_process decides); files anywhere with a directory.
    let mut memory = vec![0u64; len / 8];
    let base = memory.as_mut_ptr().cast::<c_void>();
    let queue = 0x5150 as *const c_void;
    for bad in [
        options(0, 0),
        HostcallEnableOptions { protocol: HOSTCALL_PROTOCOL_STACK, ..options(1, 0) },
        options(1, 1 << 20),
        options(1, HOSTCALL_RPC_GROUP_FILES),
        with_dir(0, &c_dir),
        with_dir(HOSTCALL_RPC_GROUP_FILES, &not_a_dir),
        options(1, HOSTCALL_RPC_GROUP_EXIT),
        with_dir(HOSTCALL_RPC_GROUP_FILES_ANYWHERE_UNSAFE, &c_dir),
    ] {
        // SAFETY: `memory` outlives every enable (disabled below); options readable.
        assert_eq!(unsafe { hostcall_enable_ex(base, PORTS, queue, &bad) }, HOSTCALL_ERR_OPTIONS);
    }

    // SAFETY: as above.
    assert_eq!(
        unsafe { hostcall_enable_ex(base, PORTS, queue, &with_dir(HOSTCALL_RPC_GROUP_FILES, &c_dir)) },
        HOSTCALL_OK
    );
    // SAFETY: the buffer stays enabled (so valid) while the view is used.
    let view = unsafe { View::from_raw(base.cast(), len, PORTS, 1) }.unwrap();
    let locks = [AtomicU32::new(0)];
    let client = Client::new(view, &locks).unwrap();
    let w = &mut patience();
    let file = fopen(&client, 0, &path_bytes, b"w", w).unwrap();
    assert!(file != 0 && file & 3 == 0, "a handle, not a host pointer: {file:#x}");
    let closed = one_packet(&client, 0, libc::CLOSE_FILE, [file, 0, 0, 0, 0, 0, 0, 0], w).unwrap();
    let system = strings(&client, 0, libc::SYSTEM, &[b"true"], 0, w).unwrap();
    assert_eq!(fopen(&client, 0, b"/proc/self/mem", b"r+", w).unwrap(), 0, "outside the directory");
    let flushed = one_packet(&client, 0, libc::FFLUSH, [2, 0, 0, 0, 0, 0, 0, 0], w).unwrap();
    assert_eq!((closed, system, flushed), (0, u64::MAX, 0), "fclose served, system refused, stdout flushed");
    assert!(path.exists());
    let counted = refusals(base);
    assert_eq!(counted[Reason::RpcRefused as usize], 2, "the system() call, /proc/self/mem");
    assert_eq!(hostcall_disable(base, queue), HOSTCALL_OK);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `hostcall_allow_device_to_end_process` is the Rust switch, for the whole process.
#[test]
fn the_c_switch_is_the_one_decision() {
    use hostcall_rs::services::ending::device_may_end_process;
    assert!(!device_may_end_process(), "off by default");
    assert_eq!(hostcall_capi::hostcall_allow_device_to_end_process(1), HOSTCALL_OK);
    assert!(device_may_end_process());
    assert_eq!(hostcall_capi::hostcall_allow_device_to_end_process(0), HOSTCALL_OK);
    assert!(!device_may_end_process());
}
