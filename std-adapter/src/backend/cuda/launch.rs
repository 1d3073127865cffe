//! Loading and launching kernels: [`Module`], [`Kernel`], [`Stream`].

use super::driver::{check, Cuda};
use crate::error::Error;
use cudarc::driver::sys;
use std::ffi::{c_void, CString};
use std::fmt;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A loaded module (a PTX, cubin or fatbin file).
pub struct Module {
    cuda: Arc<Cuda>,
    module: sys::CUmodule,
}

// SAFETY: a CUmodule handle may be used from any thread with the context current.
unsafe impl Send for Module {}
// SAFETY: as for Send.
unsafe impl Sync for Module {}

impl Module {
    /// Loads the module in file `path` into the device's primary context.
    pub fn load(cuda: Arc<Cuda>, path: &Path) -> Result<Arc<Self>, Error> {
        cuda.make_current()?;
        let name = CString::new(path.as_os_str().as_encoded_bytes())
            .map_err(|_| Error::Cuda(format!("module path {} holds a NUL", path.display())))?;
        let mut module = std::ptr::null_mut();
        // SAFETY: `name` is NUL-terminated; writes the module handle.
        check(
            unsafe { sys::cuModuleLoad(&mut module, name.as_ptr()) },
            &format!("cuModuleLoad({})", path.display()),
        )?;
        Ok(Arc::new(Self { cuda, module }))
    }

    /// The kernel `name` (an `extern "C"` name).
    pub fn kernel(self: &Arc<Self>, name: &str) -> Result<Kernel, Error> {
        self.cuda.make_current()?;
        let cname =
            CString::new(name).map_err(|_| Error::Cuda(format!("kernel name {name:?} holds a NUL")))?;
        let mut function = std::ptr::null_mut();
        // SAFETY: the module is loaded; writes the function handle.
        check(
            unsafe { sys::cuModuleGetFunction(&mut function, self.module, cname.as_ptr()) },
            &format!("cuModuleGetFunction({name})"),
        )?;
        Ok(Kernel { module: self.clone(), function, name: name.to_owned() })
    }

    /// The device address and size in bytes of the module's global variable `name` (an
    /// unmangled name, such as the RPC client object's `__llvm_rpc_client`).
    pub fn global(&self, name: &str) -> Result<(u64, usize), Error> {
        self.cuda.make_current()?;
        let cname =
            CString::new(name).map_err(|_| Error::Cuda(format!("global name {name:?} holds a NUL")))?;
        let (mut address, mut size) = (0, 0);
        // SAFETY: the module is loaded; writes the global's address and size.
        check(
            unsafe { sys::cuModuleGetGlobal_v2(&mut address, &mut size, self.module, cname.as_ptr()) },
            &format!("cuModuleGetGlobal({name})"),
        )?;
        Ok((address, size))
    }

    /// Copies `bytes` into the global variable `name`, whose size must be `bytes.len()`
    /// (synchronously: no kernel may be using the global meanwhile).
    pub fn write_global(&self, name: &str, bytes: &[u8]) -> Result<(), Error> {
        let (address, size) = self.global(name)?;
        if size != bytes.len() {
            return Err(Error::Cuda(format!("global {name} has {size} bytes, {} given", bytes.len())));
        }
        // SAFETY: `bytes` is readable for its length, which is the global's size.
        check(unsafe { sys::cuMemcpyHtoD_v2(address, bytes.as_ptr().cast(), size) }, "cuMemcpyHtoD")
    }
}

impl Drop for Module {
    fn drop(&mut self) {
        let _ = self.cuda.make_current();
        // SAFETY: loaded in `load`; every `Kernel` holds an `Arc` of us, so none is left.
        let _ = unsafe { sys::cuModuleUnload(self.module) };
    }
}

impl fmt::Debug for Module {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Module").finish_non_exhaustive()
    }
}

/// A kernel of a loaded [`Module`].
pub struct Kernel {
    module: Arc<Module>,
    function: sys::CUfunction,
    name: String,
}

// SAFETY: a CUfunction handle may be used from any thread with the context current.
unsafe impl Send for Kernel {}
// SAFETY: as for Send.
unsafe impl Sync for Kernel {}

impl Kernel {
    /// Launches the kernel on `stream` with `grid` blocks of `block` threads (1-D). Each
    /// element of `args` is one kernel parameter: a pointer (device address), a 64-bit integer,
    /// or a 32-bit one in the low half (the driver reads as many bytes as the parameter has, and
    /// the host is little-endian).
    ///
    /// # Safety
    /// `args` must match the kernel's parameters in number and size (each at most 8 bytes), and
    /// every address in it must be valid for what the kernel does with it until the kernel ends.
    pub unsafe fn launch(&self, stream: &Stream, grid: u32, block: u32, args: &[u64]) -> Result<(), Error> {
        self.module.cuda.make_current()?;
        let mut values = args.to_vec();
        let mut pointers: Vec<*mut c_void> = values.iter_mut().map(|v| (v as *mut u64).cast()).collect();
        // SAFETY: the caller guarantees the parameters; `pointers` point into `values`, which
        // outlives the call (the driver copies the parameters at launch).
        check(
            unsafe {
                sys::cuLaunchKernel(
                    self.function,
                    grid,
                    1,
                    1,
                    block,
                    1,
                    1,
                    0,
                    stream.stream,
                    pointers.as_mut_ptr(),
                    std::ptr::null_mut(),
                )
            },
            &format!("cuLaunchKernel({})", self.name),
        )
    }

    /// The kernel's name.
    pub fn name(&self) -> &str {
        &self.name
    }
}

impl fmt::Debug for Kernel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Kernel").field("name", &self.name).finish()
    }
}

/// A stream (an ordinary one: it also waits for work on the legacy default stream, such as
/// copies and memsets issued before a launch).
pub struct Stream {
    cuda: Arc<Cuda>,
    stream: sys::CUstream,
}

// SAFETY: a CUstream handle may be used from any thread with the context current.
unsafe impl Send for Stream {}
// SAFETY: as for Send.
unsafe impl Sync for Stream {}

impl Stream {
    /// A new stream.
    pub fn new(cuda: Arc<Cuda>) -> Result<Self, Error> {
        cuda.make_current()?;
        let mut stream = std::ptr::null_mut();
        // SAFETY: writes the stream handle.
        check(
            unsafe { sys::cuStreamCreate(&mut stream, sys::CUstream_flags::CU_STREAM_DEFAULT as u32) },
            "cuStreamCreate",
        )?;
        Ok(Self { cuda, stream })
    }

    /// Waits until everything launched on the stream has finished; a kernel's fault shows here.
    pub fn synchronize(&self) -> Result<(), Error> {
        self.cuda.make_current()?;
        // SAFETY: the stream is live.
        check(unsafe { sys::cuStreamSynchronize(self.stream) }, "cuStreamSynchronize")
    }

    /// Waits like [`Stream::synchronize`], but gives up after `timeout` (a kernel whose waves
    /// wait for a host that never answers would otherwise hang the caller):
    /// `Err(Error::TimedOut)`, the kernel still running.
    pub fn synchronize_for(&self, timeout: Duration) -> Result<(), Error> {
        self.cuda.make_current()?;
        let deadline = Instant::now() + timeout;
        loop {
            // SAFETY: the stream is live.
            let status = unsafe { sys::cuStreamQuery(self.stream) };
            if status != sys::CUresult::CUDA_ERROR_NOT_READY {
                return check(status, "cuStreamQuery");
            }
            if Instant::now() >= deadline {
                return Err(Error::TimedOut);
            }
            std::thread::sleep(Duration::from_micros(50));
        }
    }
}

impl Drop for Stream {
    fn drop(&mut self) {
        let _ = self.cuda.make_current();
        // SAFETY: created in `new`, destroyed once.
        let _ = unsafe { sys::cuStreamDestroy_v2(self.stream) };
    }
}

impl fmt::Debug for Stream {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Stream").finish_non_exhaustive()
    }
}
