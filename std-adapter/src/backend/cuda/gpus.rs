//! [`CudaGpu`] and [`open_gpus`]: every GPU of the host served by one process.
//!
//! Per GPU: its own primary context ([`Cuda`]); its buffers in pinned, mapped host memory
//! allocated under that context on the GPU's NUMA node ([`CudaMemory::near`]); its own doorbell
//! ([`MappedDoorbell`], in that memory); a share of the CPUs near it for its listener threads.
//! [`CudaGpu::group`] is what [`DeviceListeners`](crate::threads::devices::DeviceListeners) needs to
//! start the GPU's thread group, and [`CudaGpu::phase_buffer`] makes buffers that report the
//! GPU's ordinal, so the listeners route them to that group.
//!
//! Why one doorbell per GPU rather than one shared: a spinning listener never reads it, but a
//! sleeping group is woken only by its own GPU; and two GPUs ringing one word would store to one
//! cache line from two PCIe links.

use super::doorbell::MappedDoorbell;
use super::driver::{probe, Cuda};
use super::launch::Module;
use super::memory::{line_buffer, phase_buffer, rpc_buffer, CudaMemory, DeviceBuffer};
use super::topology::Topology;
use crate::buffer::HostcallBuffer;
use crate::doorbell::Doorbell;
use crate::error::Error;
use crate::threads::affinity;
use crate::threads::devices::DeviceGroup;
use std::sync::Arc;

/// One GPU of the host, set up to be served alongside the others.
#[derive(Debug)]
pub struct CudaGpu {
    /// The device and its primary context.
    pub cuda: Arc<Cuda>,
    /// Pinned, mapped host memory of this GPU, on its NUMA node where that is known.
    pub memory: Arc<CudaMemory>,
    /// The doorbell its buffers ring.
    pub doorbell: Arc<MappedDoorbell>,
    /// Where it sits.
    pub topology: Topology,
    /// The CPUs for its listener threads: its share of [`Topology::local_cpus`] (GPUs near the
    /// same CPUs split them by physical core, SMT siblings never split between GPUs).
    pub cpus: Vec<usize>,
}

impl CudaGpu {
    /// What its listener group needs.
    pub fn group(&self) -> DeviceGroup {
        DeviceGroup {
            ordinal: self.cuda.ordinal() as u32,
            doorbell: self.doorbell.clone(),
            cpus: self.cpus.clone(),
        }
    }

    /// A phase buffer of `num_packets` packets for this GPU's kernels, reporting its ordinal
    /// ([`phase_buffer`]); keep the returned device state alive as long as the buffer is used.
    pub fn phase_buffer(&self, num_packets: u64) -> Result<(Arc<HostcallBuffer>, DeviceBuffer), Error> {
        let doorbell: Arc<dyn Doorbell> = self.doorbell.clone();
        phase_buffer(&self.cuda, self.memory.clone(), num_packets, doorbell)
    }

    /// A line buffer of `num_packets` packets for this GPU's kernels ([`line_buffer`]); keep the
    /// returned device state alive as long as the buffer is used.
    pub fn line_buffer(&self, num_packets: u64) -> Result<(Arc<HostcallBuffer>, DeviceBuffer), Error> {
        let doorbell: Arc<dyn Doorbell> = self.doorbell.clone();
        line_buffer(&self.cuda, self.memory.clone(), num_packets, doorbell)
    }

    /// An LLVM-RPC buffer of `ports` ports for this GPU's kernels in `module` ([`rpc_buffer`]: the
    /// client object is written into the module); keep the returned port state alive as long as
    /// the buffer is used.
    pub fn rpc_buffer(
        &self,
        ports: u64,
        module: &Module,
    ) -> Result<(Arc<HostcallBuffer>, DeviceBuffer), Error> {
        let doorbell: Arc<dyn Doorbell> = self.doorbell.clone();
        rpc_buffer(&self.cuda, self.memory.clone(), ports, doorbell, module)
    }
}

/// Opens the first `count` GPUs (`None`: every visible one), each with its context, memory,
/// doorbell and CPUs. An error (never a panic) where there is no CUDA or fewer GPUs.
pub fn open_gpus(count: Option<usize>) -> Result<Vec<CudaGpu>, Error> {
    let visible = probe().map_err(Error::Cuda)?;
    let count = count.unwrap_or(visible);
    if count == 0 || count > visible {
        return Err(Error::Cuda(format!("{count} GPUs asked for, {visible} visible")));
    }
    let mut opened = Vec::with_capacity(count);
    for ordinal in 0..count {
        let cuda = Cuda::new(ordinal)?;
        let topology = Topology::of(&cuda)?;
        opened.push((cuda, topology));
    }
    let near: Vec<Vec<usize>> = opened.iter().map(|(_, t)| t.local_cpus.clone()).collect();
    let shares = affinity::share(&near);
    opened
        .into_iter()
        .zip(shares)
        .map(|((cuda, topology), cpus)| {
            // The node's CPUs (not only this GPU's share) for allocations: any of them is near.
            let memory = Arc::new(CudaMemory::near(cuda.clone(), topology.local_cpus.clone()));
            let doorbell = Arc::new(MappedDoorbell::new(memory.clone())?);
            Ok(CudaGpu { cuda, memory, doorbell, topology, cpus })
        })
        .collect()
}
