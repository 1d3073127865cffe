//! CUDA backend (feature `cuda`): real GPU kernels make hostcalls against this crate's listener.
//!
//! The driver API is loaded at run time (cudarc with `dynamic-loading`), so this module builds
//! without CUDA and [`Cuda::new`] reports "no CUDA" as an error where there is none.
//!
//! - [`Cuda`]: the driver, one device and its primary context; device attributes, and
//!   [`Cuda::check_protocol`], which refuses the stack protocol where the GPU's atomics on host
//!   memory are not atomic with the CPU's (`CU_DEVICE_ATTRIBUTE_HOST_NATIVE_ATOMIC_SUPPORTED`).
//! - [`CudaMemory`]: a [`DeviceMemory`](crate::memory::DeviceMemory) of pinned, device-mapped host memory (`cuMemHostAlloc`
//!   with `DEVICEMAP | PORTABLE`; device addresses from `cuMemHostGetDevicePointer`): what the
//!   host and the GPU share.
//!   Its frees synchronise the context (`cuMemFreeHost` waits for every kernel), so it is for
//!   buffers set up before kernels run, not for what services allocate while they run.
//! - [`CudaDeviceMemory`]: device memory from a stream-ordered pool of our own on a non-blocking
//!   side stream, whose calls wait for no kernel: what DEVMEM (and LLVM libc's `MALLOC` / `FREE`)
//!   allocate from while kernels run, its frees on a side thread
//!   ([`CudaDeviceMemory::for_services`]).
//! - [`DeviceBuffer`]: device-local memory (`cuMemAlloc`), for what only the GPU touches: the
//!   phase protocol's `occupied` bitmap and the device state of `include/hostcall_cuda.cuh`.
//! - [`phase_buffer`]: a phase buffer in [`CudaMemory`] whose bitmap lives in a [`DeviceBuffer`];
//!   [`line_buffer`] likewise; [`rpc_buffer`]: an LLVM-RPC buffer whose client object goes into a
//!   module's `__llvm_rpc_client` ([`Module::write_global`]).
//! - [`MappedDoorbell`]: a `u64` in mapped host memory the device stores to; the listener may
//!   poll it (a spinning listener ignores it).
//! - [`Module`], [`Kernel`], [`Stream`]: load a PTX or cubin file, launch a kernel.
//! - Several GPUs, one process: [`open_gpus`] gives a [`CudaGpu`] per device (a context each,
//!   memory on its NUMA node, a doorbell each, a share of the CPUs near it from its
//!   [`Topology`]); [`DeviceListeners`](crate::threads::devices::DeviceListeners) starts a listener
//!   group per GPU, pinned to those CPUs, and routes each buffer by its device ordinal.
//!
//! Every driver call runs with the device's primary context current on the calling thread
//! ([`Cuda::make_current`] is done by each method), so any thread may use these types.

mod device_memory;
mod doorbell;
mod driver;
mod gpus;
mod launch;
mod memory;
#[cfg(test)]
mod tests;
mod topology;

pub use device_memory::CudaDeviceMemory;
pub use doorbell::MappedDoorbell;
pub use driver::{probe, Cuda};
pub use gpus::{open_gpus, CudaGpu};
pub use launch::{Kernel, Module, Stream};
pub use memory::{
    line_buffer, phase_buffer, rpc_buffer, stack_buffer, CudaMemory, DeviceBuffer, DeviceStateLayout,
};
pub use topology::Topology;
