//! The HSA stand-in (`tests/hsa-standin/hsa_standin.c`; its header comment says what it
//! implements) for the tests: built with the system C compiler (`$CC`, else `cc`) once per
//! version of its sources into the target's tmp dir, copied for each test so that every test has
//! a runtime of its own (the dynamic loader loads a file once per process, so two copies are two
//! independent runtimes, however the tests interleave), and observed through its `hsa_standin_*`
//! functions: the call log, the live blocks and signals, counters.
//!
//! A test binary includes this file with `#[path = "common/hsa_standin.rs"] mod standin;`.
#![allow(dead_code)] // each test binary uses its own part

use std::collections::hash_map::DefaultHasher;
use std::ffi::{c_char, c_int, c_void, CStr, CString};
use std::hash::{Hash, Hasher};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::mpsc::{channel, RecvTimeoutError};
use std::sync::OnceLock;
use std::time::Duration;

use hostcall::backend::hsa::AtomicsRequirement;
use hostcall::backend::DetectOptions;

/// Where the C sources are (the compiler runs there).
pub const SOURCE_DIR: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/hsa-standin");

/// The sources, compiled into the tests: a change rebuilds them and renames the built files.
pub const SOURCES: [&str; 3] = [
    include_str!("../hsa-standin/hsa_standin.c"),
    include_str!("../hsa-standin/hsa_types.h"),
    include_str!("../hsa-standin/selftest.c"),
];

/// The directory built and copied files go to.
pub fn scratch_dir() -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("hsa-standin");
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Runs the C compiler in [`SOURCE_DIR`] with `args`.
pub fn cc(args: &[&str]) -> Output {
    let compiler = std::env::var("CC").ok().filter(|cc| !cc.is_empty()).unwrap_or_else(|| "cc".into());
    Command::new(&compiler)
        .args(args)
        .current_dir(SOURCE_DIR)
        .output()
        .unwrap_or_else(|error| panic!("the HSA stand-in needs a C compiler (`{compiler}`): {error}"))
}

/// Compiles `args` into `<stem>-<hash of the sources><extension>` in [`scratch_dir`], unless that
/// file exists; the compiler writes a temporary file that is then renamed, so that concurrent
/// test processes never load half a file.
pub fn compile(stem: &str, extension: &str, args: &[&str]) -> PathBuf {
    let mut hasher = DefaultHasher::new();
    SOURCES.hash(&mut hasher);
    args.hash(&mut hasher);
    let output = scratch_dir().join(format!("{stem}-{:016x}{extension}", hasher.finish()));
    if !output.exists() {
        let partial = scratch_dir().join(format!(".{stem}.{}.partial", std::process::id()));
        let mut all = args.to_vec();
        all.extend(["-o", partial.to_str().unwrap()]);
        let result = cc(&all);
        assert!(
            result.status.success(),
            "compiling {stem} failed:\n{}",
            String::from_utf8_lossy(&result.stderr)
        );
        std::fs::rename(&partial, &output).unwrap();
    }
    output
}

/// The stand-in library, built once per process (and once per version of the sources).
pub fn library() -> PathBuf {
    static LIBRARY: OnceLock<PathBuf> = OnceLock::new();
    LIBRARY
        .get_or_init(|| {
            let flags =
                ["-std=c11", "-O2", "-g", "-Wall", "-Wextra", "-Werror", "-fPIC", "-shared", "-pthread"];
            compile("libhsa-standin", ".so", &[&flags[..], &["hsa_standin.c"]].concat())
        })
        .clone()
}

/// One live block of the stand-in: `hsa_standin_state`'s `alloc` line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Block {
    /// Its address.
    pub ptr: u64,
    /// Its size (rounded up to the 4 KiB granule).
    pub size: u64,
    /// The pool it came from, e.g. `cpu0.fine`.
    pub pool: String,
    /// The agents granted access with `hsa_amd_agents_allow_access`, e.g. `["gpu0", "gpu1"]`.
    pub granted: Vec<String>,
}

/// A private copy of the stand-in, loaded.
pub struct StandIn {
    path: PathBuf,
    handle: *mut c_void,
}

// SAFETY: `handle` is a `dlopen` handle, usable from any thread; the stand-in's functions are
// thread-safe (it takes its own lock).
unsafe impl Send for StandIn {}
// SAFETY: as for `Send`.
unsafe impl Sync for StandIn {}

impl StandIn {
    /// A runtime of its own for `test`, with `topology` (`HSA_STANDIN_TOPOLOGY` syntax, "" for the
    /// default: 1 CPU, 2 GPUs) and `failures` to inject (`HSA_STANDIN_FAIL` syntax, "" for none).
    pub fn new(test: &str, topology: &str, failures: &str) -> Self {
        let standin = Self::unconfigured(test);
        // SAFETY: the stand-in's `int hsa_standin_configure(const char*, const char*)`.
        let configure: unsafe extern "C" fn(*const c_char, *const c_char) -> c_int =
            unsafe { standin.symbol("hsa_standin_configure") };
        let (topology_c, failures_c) = (CString::new(topology).unwrap(), CString::new(failures).unwrap());
        // SAFETY: two NUL-terminated strings that outlive the call.
        let result = unsafe { configure(topology_c.as_ptr(), failures_c.as_ptr()) };
        assert_eq!(result, 0, "the stand-in refused topology {topology:?} and failures {failures:?}");
        standin
    }

    /// A copy for `test` that takes its configuration from the environment
    /// (`HSA_STANDIN_TOPOLOGY`, `HSA_STANDIN_FAIL`) at its first `hsa_init`.
    pub fn unconfigured(test: &str) -> Self {
        let path = scratch_dir().join(format!("libhsa-standin-{test}-{}.so", std::process::id()));
        let partial = path.with_extension("partial");
        std::fs::copy(library(), &partial).unwrap();
        std::fs::rename(&partial, &path).unwrap();
        let c_path = CString::new(path.as_os_str().as_bytes()).unwrap();
        // SAFETY: loading the stand-in runs no initialiser of its own.
        let handle = unsafe { libc::dlopen(c_path.as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL) };
        assert!(!handle.is_null(), "dlopen {path:?}: {}", dl_error());
        Self { path, handle }
    }

    /// Where this copy is: what `HOSTCALL_HSA_LIB` or [`DetectOptions::library`] names.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Detection options that load this copy.
    pub fn options(&self, atomics: AtomicsRequirement) -> DetectOptions {
        DetectOptions::default().with_library(Some(self.path.clone().into())).with_atomics(atomics)
    }

    /// # Safety
    /// `T` must be the C function's pointer type.
    unsafe fn symbol<T: Copy>(&self, name: &str) -> T {
        assert_eq!(std::mem::size_of::<T>(), std::mem::size_of::<*mut c_void>());
        let c_name = CString::new(name).unwrap();
        // SAFETY: `handle` is a live `dlopen` handle.
        let symbol = unsafe { libc::dlsym(self.handle, c_name.as_ptr()) };
        assert!(!symbol.is_null(), "the stand-in lacks {name}: {}", dl_error());
        // SAFETY: the caller names the function's type; it has the size of a pointer (above).
        unsafe { std::mem::transmute_copy(&symbol) }
    }

    fn text(&self, function: &str) -> String {
        // SAFETY: `size_t f(char* buf, size_t len)`, as `hsa_standin_log` and `hsa_standin_state`.
        let read: unsafe extern "C" fn(*mut c_char, usize) -> usize = unsafe { self.symbol(function) };
        let mut capacity = 4096;
        loop {
            let mut buffer = vec![0u8; capacity];
            // SAFETY: `buffer` has `buffer.len()` writable bytes; the function writes a
            // NUL-terminated string into at most that many and returns the whole text's length.
            let len = unsafe { read(buffer.as_mut_ptr().cast(), buffer.len()) };
            if len < buffer.len() {
                return CStr::from_bytes_until_nul(&buffer).unwrap().to_string_lossy().into_owned();
            }
            capacity = len + 4096; // it grew meanwhile: again, larger
        }
    }

    /// Replaces the code objects the loader extension lists: one per line,
    /// `executable base size delta uri` (base and size hexadecimal, delta decimal).
    pub fn set_code_objects(&self, spec: &str) {
        // SAFETY: `int hsa_standin_set_code_objects(const char*)`.
        let set: unsafe extern "C" fn(*const c_char) -> c_int =
            unsafe { self.symbol("hsa_standin_set_code_objects") };
        let spec_c = CString::new(spec).unwrap();
        // SAFETY: a NUL-terminated string that outlives the call.
        assert_eq!(unsafe { set(spec_c.as_ptr()) }, 0, "the stand-in refused code objects {spec:?}");
    }

    /// The call log, a line per call: `<function> <arguments>-> <status>`.
    pub fn log(&self) -> String {
        self.text("hsa_standin_log")
    }

    /// The log lines of the calls to `function`.
    pub fn calls(&self, function: &str) -> Vec<String> {
        self.log()
            .lines()
            .filter(|line| line.starts_with(&format!("{function} ")))
            .map(str::to_owned)
            .collect()
    }

    /// The live blocks and signals (`hsa_standin_state`).
    pub fn state(&self) -> String {
        self.text("hsa_standin_state")
    }

    /// A counter of the stand-in (see `hsa_standin_count`).
    pub fn count(&self, what: &str) -> i64 {
        // SAFETY: `int64_t hsa_standin_count(const char*)`.
        let count: unsafe extern "C" fn(*const c_char) -> i64 = unsafe { self.symbol("hsa_standin_count") };
        let c_what = CString::new(what).unwrap();
        // SAFETY: a NUL-terminated string that outlives the call.
        let n = unsafe { count(c_what.as_ptr()) };
        assert!(n >= 0, "the stand-in has no counter {what:?}");
        n
    }

    /// The live blocks.
    pub fn blocks(&self) -> Vec<Block> {
        self.state()
            .lines()
            .filter_map(|line| line.strip_prefix("alloc "))
            .map(|line| {
                let field = |name: &str| {
                    line.split(' ').find_map(|item| item.strip_prefix(name)).unwrap_or_default().to_owned()
                };
                Block {
                    ptr: parse_hex(&field("ptr=")),
                    size: field("size=").parse().unwrap(),
                    pool: field("pool="),
                    granted: field("granted=")
                        .split(',')
                        .filter(|s| !s.is_empty())
                        .map(str::to_owned)
                        .collect(),
                }
            })
            .collect()
    }

    /// The live block that holds the address `address`.
    pub fn block_holding(&self, address: u64) -> Block {
        self.blocks()
            .into_iter()
            .find(|block| (block.ptr..block.ptr + block.size).contains(&address))
            .unwrap_or_else(|| panic!("no live block holds {address:#x}; state:\n{}", self.state()))
    }

    /// The handles of the live signals.
    pub fn signals(&self) -> Vec<u64> {
        self.state()
            .lines()
            .filter_map(|line| line.strip_prefix("signal handle="))
            .map(|rest| parse_hex(rest.split(' ').next().unwrap()))
            .collect()
    }

    /// Asserts that the runtime was shut down with nothing left live and no call misused.
    pub fn assert_released(&self) {
        let counts = ["init_refs", "allocations", "signals", "errors"].map(|what| (what, self.count(what)));
        assert!(counts.iter().all(|&(_, n)| n == 0), "not released: {counts:?}\nlog:\n{}", self.log());
    }
}

impl Drop for StandIn {
    fn drop(&mut self) {
        // The library stays loaded (nothing unloads it); only the file goes.
        let _ = std::fs::remove_file(&self.path);
    }
}

fn parse_hex(text: &str) -> u64 {
    u64::from_str_radix(text.trim_start_matches("0x"), 16)
        .unwrap_or_else(|_| panic!("not an address: {text:?}"))
}

fn dl_error() -> String {
    // SAFETY: `dlerror` returns null or a NUL-terminated string valid until the next dl call.
    let text = unsafe { libc::dlerror() };
    if text.is_null() {
        return "no dlerror".into();
    }
    // SAFETY: non-null, NUL-terminated (above); copied out at once.
    unsafe { CStr::from_ptr(text) }.to_string_lossy().into_owned()
}

/// Runs `test` on a thread of its own and fails, instead of hanging, if it has not finished
/// within `limit` (the stuck thread is left behind; the test binary still ends).
pub fn with_watchdog(limit: Duration, test: impl FnOnce() + Send + 'static) {
    let (finished, done) = channel();
    let thread = std::thread::spawn(move || {
        test();
        let _ = finished.send(());
    });
    match done.recv_timeout(limit) {
        Ok(()) => thread.join().unwrap(),
        Err(RecvTimeoutError::Disconnected) => match thread.join() {
            Ok(()) => unreachable!("the test thread ended without reporting"),
            Err(panic) => std::panic::resume_unwind(panic),
        },
        Err(RecvTimeoutError::Timeout) => panic!("the test did not finish within {limit:?}: something hangs"),
    }
}
