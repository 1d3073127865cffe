//! [`Cuda`]: the driver, loaded at run time, one device and its primary context.

use crate::buffer::Protocol;
use crate::error::Error;
use cudarc::driver::sys;
use std::ffi::CStr;
use std::fmt;
use std::sync::Arc;

/// Turns a driver status into a `Result`, naming the call.
pub(super) fn check(status: sys::CUresult, call: &str) -> Result<(), Error> {
    if status == sys::CUresult::CUDA_SUCCESS {
        return Ok(());
    }
    let mut text: *const std::ffi::c_char = std::ptr::null();
    // SAFETY: cuGetErrorString writes a pointer to a static string (or leaves it null) and reads
    // nothing else; the library is loaded (every caller made a driver call before).
    let known = unsafe { sys::cuGetErrorString(status, &mut text) } == sys::CUresult::CUDA_SUCCESS;
    let text = if known && !text.is_null() {
        // SAFETY: the driver returned a NUL-terminated static string.
        unsafe { CStr::from_ptr(text) }.to_string_lossy().into_owned()
    } else {
        "unknown error".into()
    };
    Err(Error::Cuda(format!("{call} failed: {status:?} ({text})")))
}

/// Whether a CUDA driver and a device exist here: the number of devices, or why not. Never
/// panics (it checks that `libcuda` can be opened before calling into it).
pub fn probe() -> Result<usize, String> {
    // SAFETY: only tries to open the library.
    if !unsafe { sys::is_culib_present() } {
        return Err("no CUDA driver library (libcuda.so) found".into());
    }
    // SAFETY: the library is present; cuInit takes flags 0 and may be called more than once.
    check(unsafe { sys::cuInit(0) }, "cuInit").map_err(|e| e.to_string())?;
    let mut count = 0;
    // SAFETY: writes the count into `count`.
    check(unsafe { sys::cuDeviceGetCount(&mut count) }, "cuDeviceGetCount").map_err(|e| e.to_string())?;
    if count <= 0 {
        return Err("the CUDA driver reports no device".into());
    }
    Ok(count as usize)
}

/// The CUDA driver, one device and its retained primary context.
pub struct Cuda {
    pub(super) device: sys::CUdevice,
    pub(super) context: sys::CUcontext,
    pub(super) name: String,
    pub(super) ordinal: usize,
}

// SAFETY: a CUcontext is a handle the driver lets any thread make current; we only pass it to
// the driver.
unsafe impl Send for Cuda {}
// SAFETY: as for Send; `&Cuda` only reads the handles.
unsafe impl Sync for Cuda {}

impl Cuda {
    /// Loads the driver, initialises it, retains device `ordinal`'s primary context and makes it
    /// current on this thread. An error (never a panic) where there is no CUDA: see [`probe`].
    pub fn new(ordinal: usize) -> Result<Arc<Self>, Error> {
        let count = probe().map_err(Error::Cuda)?;
        if ordinal >= count {
            return Err(Error::Cuda(format!("no CUDA device {ordinal} (there are {count})")));
        }
        let mut device = 0;
        // SAFETY: the driver is initialised (probe); writes the handle into `device`.
        check(unsafe { sys::cuDeviceGet(&mut device, ordinal as i32) }, "cuDeviceGet")?;
        let mut context = std::ptr::null_mut();
        // SAFETY: `device` is a valid handle; writes the context into `context`.
        check(unsafe { sys::cuDevicePrimaryCtxRetain(&mut context, device) }, "cuDevicePrimaryCtxRetain")?;
        let mut name = [0 as std::ffi::c_char; 256];
        // SAFETY: writes at most `name.len()` bytes, NUL-terminated.
        check(
            unsafe { sys::cuDeviceGetName(name.as_mut_ptr(), name.len() as i32, device) },
            "cuDeviceGetName",
        )?;
        // SAFETY: NUL-terminated by the driver within the array.
        let name = unsafe { CStr::from_ptr(name.as_ptr()) }.to_string_lossy().into_owned();
        let cuda = Arc::new(Self { device, context, name, ordinal });
        cuda.make_current()?;
        Ok(cuda)
    }

    /// Makes the primary context current on the calling thread.
    pub fn make_current(&self) -> Result<(), Error> {
        // SAFETY: the context is retained until drop.
        check(unsafe { sys::cuCtxSetCurrent(self.context) }, "cuCtxSetCurrent")
    }

    /// The device's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The device's ordinal (as given to [`Cuda::new`]; what its buffers report to services).
    pub fn ordinal(&self) -> usize {
        self.ordinal
    }

    /// The device's PCI address as sysfs names it, `dddd:bb:dd.0` (domain, bus, device; lower
    /// case hex), from the driver's `PCI_DOMAIN_ID`, `PCI_BUS_ID` and `PCI_DEVICE_ID` attributes.
    pub fn pci_bus_id(&self) -> Result<String, Error> {
        use sys::CUdevice_attribute as A;
        let domain = self.attribute(A::CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID)?;
        let bus = self.attribute(A::CU_DEVICE_ATTRIBUTE_PCI_BUS_ID)?;
        let device = self.attribute(A::CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID)?;
        Ok(format!("{domain:04x}:{bus:02x}:{device:02x}.0"))
    }

    /// A device attribute.
    pub fn attribute(&self, attribute: sys::CUdevice_attribute) -> Result<i32, Error> {
        let mut value = 0;
        // SAFETY: writes the value; `device` is valid.
        check(
            unsafe { sys::cuDeviceGetAttribute(&mut value, attribute, self.device) },
            "cuDeviceGetAttribute",
        )?;
        Ok(value)
    }

    /// Whether the GPU's atomics on host memory are atomic with the CPU's (platform atomics,
    /// `cudaDevAttrHostNativeAtomicSupported`). The stack protocol needs them.
    pub fn host_native_atomics(&self) -> Result<bool, Error> {
        Ok(self.attribute(sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_HOST_NATIVE_ATOMIC_SUPPORTED)? != 0)
    }

    /// Number of streaming multiprocessors.
    pub fn multiprocessors(&self) -> Result<u32, Error> {
        Ok(self.attribute(sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)? as u32)
    }

    /// The peak SM clock in kHz.
    pub fn clock_khz(&self) -> Result<u32, Error> {
        Ok(self.attribute(sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_CLOCK_RATE)? as u32)
    }

    /// Refuses a protocol this device cannot speak with the host: the stack protocol
    /// read-modify-writes `ready_stack` from both sides, which is unsafe without platform
    /// atomics (PROTOCOL.md section 1: packets served twice, waves hung). The phase protocol is
    /// always fine.
    pub fn check_protocol(&self, protocol: Protocol) -> Result<(), Error> {
        if protocol == Protocol::Stack && !self.host_native_atomics()? {
            return Err(Error::Unsupported(format!(
                "the stack protocol needs platform atomics, and {} reports \
                 CU_DEVICE_ATTRIBUTE_HOST_NATIVE_ATOMIC_SUPPORTED = 0: its atomics on host memory are \
                 not atomic with the CPU's, so packets would be served twice or lost; use the phase protocol",
                self.name
            )));
        }
        Ok(())
    }
}

impl Drop for Cuda {
    fn drop(&mut self) {
        // SAFETY: releases the retain of `new`; nothing uses the context afterwards (every type
        // holding one keeps an `Arc<Cuda>`).
        let _ = unsafe { sys::cuDevicePrimaryCtxRelease_v2(self.device) };
    }
}

impl fmt::Debug for Cuda {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Cuda").field("ordinal", &self.ordinal).field("name", &self.name).finish()
    }
}
