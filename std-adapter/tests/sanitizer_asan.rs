//! SANITIZER through a host ASan runtime: a stand-in `__asan_report_nonself_error`
//! (`tests/asan-standin/asan_report.c`, loaded `RTLD_GLOBAL` so that `dlsym(RTLD_DEFAULT)` finds
//! it) prints the arguments it gets; child processes of this test binary report, the parent
//! checks the arguments are exactly ROCm's: `(&pc, 1, addrs, n, ids, n + 4, is_write, size,
//! is_abort, "amdgpu", delta, fd, size, offset)`, `ids = [device, wg x, wg y, wg z, lid per lane]`.
//! (Own binary: the stand-in stays loaded in the process that loads it.)

use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::process::ExitStatusExt;
use std::path::PathBuf;
use std::process::Command;
use std::sync::Arc;

use hostcall::backend::hsa::LoadedCodeObject;
use hostcall::prelude::*;
use hostcall::services::sanitizer::{asan, SanitizerConfig};
use hostcall::{HostMemory, HostcallBuffer, Listener, ListenerConfig, ParkingDoorbell, Wave};

const NO_ABORT: u64 = 0xffff_ffff_0000_0000;

/// Builds the stand-in ASan library (once per process).
fn library() -> PathBuf {
    static LIBRARY: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    LIBRARY.get_or_init(build).clone()
}

fn build() -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("asan-standin");
    std::fs::create_dir_all(&dir).unwrap();
    let output = dir.join(format!("libasan-standin-{}.so", std::process::id()));
    let source = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/asan-standin/asan_report.c");
    let compiler = std::env::var("CC").ok().filter(|cc| !cc.is_empty()).unwrap_or_else(|| "cc".into());
    let result = Command::new(compiler)
        .args(["-std=c11", "-Wall", "-Wextra", "-Werror", "-fPIC", "-shared", "-o"])
        .arg(&output)
        .arg(source)
        .output()
        .unwrap();
    assert!(result.status.success(), "{}", String::from_utf8_lossy(&result.stderr));
    output
}

/// The code object file the report names: 100 bytes, in a directory with a space in its name.
fn code_object_file() -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("asan standin");
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join(format!("kernels-{}.co", std::process::id()));
    std::fs::write(&file, [0u8; 100]).unwrap();
    file
}

/// The child half: loads the stand-in `RTLD_GLOBAL` and reports one packet of 3 lanes
/// (`SANITIZER_ASAN_CHILD=abort|refused-abort|no-abort`: an aborting report where devices may end
/// the process, the same where they may not (the default), a "no abort" report).
#[test]
fn child_process_entry() {
    let Ok(mode) = std::env::var("SANITIZER_ASAN_CHILD") else { return };
    if mode == "abort" {
        hostcall::services::ending::allow_device_to_end_process(true);
    }
    assert!(asan::lookup().is_none(), "no ASan runtime before the stand-in is loaded");
    let path = CString::new(std::env::var_os("ASAN_STANDIN").unwrap().as_bytes()).unwrap();
    // SAFETY: loading the stand-in runs no initialiser of its own.
    let handle = unsafe { libc::dlopen(path.as_ptr(), libc::RTLD_NOW | libc::RTLD_GLOBAL) };
    assert!(!handle.is_null());
    assert!(asan::lookup().is_some(), "dlsym(RTLD_DEFAULT) finds the stand-in");

    let uri = format!("file://{}#offset=16&size=32", code_object_file().display()).replace(' ', "%20");
    let objects =
        vec![LoadedCodeObject { uri, load_base: 0x10_0000, load_size: 0x1_0000, load_delta: 0x0f_0000 }];
    let doorbell: Arc<dyn Doorbell> = Arc::new(ParkingDoorbell::new());
    let listener = Listener::start(doorbell.clone(), ListenerConfig::default()).unwrap();
    listener
        .services()
        .enable_sanitizer(SanitizerConfig::default().with_code_objects(Arc::new(objects)))
        .unwrap();
    let buffer =
        Arc::new(HostcallBuffer::new(Arc::new(HostMemory), 4, doorbell).unwrap().with_device_ordinal(5));
    listener.add(buffer.clone()).unwrap();
    let info = if mode == "no-abort" { NO_ABORT | 1 } else { 1 };
    Wave::with_activemask(buffer, 0b1011)
        .call(4, |lane| [0xa000 + lane as u64, 0x10_2040, 7, 8, 9, 60 + lane as u64, info, 4])
        .unwrap();
    eprintln!("survived");
    listener.shutdown();
}

fn run_child(mode: &str) -> (std::process::ExitStatus, String) {
    let output = Command::new(std::env::current_exe().unwrap())
        .args(["child_process_entry", "--exact", "--nocapture", "--test-threads=1"])
        .env("SANITIZER_ASAN_CHILD", mode)
        .env("ASAN_STANDIN", library())
        .output()
        .unwrap();
    (output.status, String::from_utf8_lossy(&output.stderr).into_owned())
}

fn expected(is_abort: u8) -> String {
    format!(
        "asan-standin: callstack=0x102040 n_callstack=1 addrs=0xa000,0xa001,0xa003 n_addrs=3 \
         ids=5,7,8,9,60,61,63 n_ids=7 is_write=1 access_size=4 is_abort={is_abort} name=amdgpu \
         vma_adjust=983040 fd_open=1 fd_size=100 extent_size=32 extent_start=16"
    )
}

#[test]
fn an_aborting_report_reaches_asan_with_rocms_arguments_then_stops() {
    let (status, stderr) = run_child("abort");
    assert!(stderr.lines().any(|line| line == expected(1)), "{stderr}");
    assert_eq!(status.signal(), Some(libc::SIGABRT), "{stderr}");
    assert!(!stderr.contains("survived"));
}

#[test]
fn an_aborting_report_where_devices_may_not_end_the_host_reaches_asan_as_no_abort() {
    let (status, stderr) = run_child("refused-abort");
    assert!(stderr.lines().any(|line| line == expected(0)), "{stderr}");
    assert!(status.success(), "{stderr}");
    assert!(stderr.contains("not aborting: allow_device_to_end_process is off"), "{stderr}");
    assert!(stderr.contains("survived"));
}

#[test]
fn a_no_abort_report_reaches_asan_and_the_program_goes_on() {
    let (status, stderr) = run_child("no-abort");
    assert!(stderr.lines().any(|line| line == expected(0)), "{stderr}");
    assert!(status.success(), "{stderr}");
    assert!(stderr.contains("survived"));
}
