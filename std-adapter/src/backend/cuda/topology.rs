//! [`Topology`]: where a GPU sits on the host (its PCI address, NUMA node and nearby CPUs), read
//! from Linux's sysfs.

use super::driver::Cuda;
use crate::error::Error;
use crate::threads::affinity;
use std::path::Path;

/// Where a GPU sits: what the listener threads serving it, and the memory of its buffers, should
/// be near.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Topology {
    /// `dddd:bb:dd.0`, as sysfs names it ([`Cuda::pci_bus_id`]).
    pub pci_bus_id: String,
    /// The NUMA node the device is attached to; `None` where the platform does not say (sysfs
    /// `numa_node` is -1 or missing, as on most virtual machines and single-node hosts).
    pub numa_node: Option<u32>,
    /// The CPUs near the device (sysfs `local_cpulist`) that this process may use; every CPU
    /// this process may use where sysfs does not say.
    pub local_cpus: Vec<usize>,
}

impl Topology {
    /// `cuda`'s device, from `/sys`.
    pub fn of(cuda: &Cuda) -> Result<Self, Error> {
        Ok(Self::from_sysfs(Path::new("/sys"), &cuda.pci_bus_id()?, &affinity::allowed_cpus()))
    }

    /// The device at PCI address `pci_bus_id` as the sysfs tree at `sys` describes it, its CPUs
    /// limited to `allowed` (empty: not limited). Never fails: what cannot be read is unknown.
    ///
    /// ```
    /// use hostcall::backend::cuda::Topology;
    /// let t = Topology::from_sysfs(std::path::Path::new("/nonexistent"), "0000:3b:00.0", &[0, 1]);
    /// assert_eq!((t.numa_node, t.local_cpus), (None, vec![0, 1]));
    /// ```
    pub fn from_sysfs(sys: &Path, pci_bus_id: &str, allowed: &[usize]) -> Self {
        let device = sys.join("bus/pci/devices").join(pci_bus_id);
        let read = |name: &str| std::fs::read_to_string(device.join(name)).ok();
        let numa_node =
            read("numa_node").and_then(|t| t.trim().parse::<i64>().ok()).and_then(|n| u32::try_from(n).ok());
        let near = read("local_cpulist").and_then(|t| affinity::parse_cpu_list(&t)).unwrap_or_default();
        let local_cpus: Vec<usize> = if allowed.is_empty() {
            near
        } else {
            let usable: Vec<usize> = near.iter().copied().filter(|cpu| allowed.contains(cpu)).collect();
            if usable.is_empty() {
                allowed.to_vec()
            } else {
                usable
            }
        };
        Self { pci_bus_id: pci_bus_id.to_owned(), numa_node, local_cpus }
    }
}
