//! Where listener threads run: CPU lists (Linux's `0-3,8,10-11` format), the CPUs this process
//! may use, and pinning the calling thread.
//!
//! A spinning listener thread is one busy core per thread; on a host with several GPUs each GPU's
//! threads belong on the cores of the GPU's NUMA node (its requests land in that node's memory
//! and cache), one thread per core. [`ListenerConfig::cpus`](crate::ListenerConfig::cpus) says
//! where, [`crate::ListenerPool`] spreads its threads over them one core each, and
//! [`share`] splits one node's cores between the GPUs attached to it. Pinning is best effort:
//! where the platform has no affinity call, or the call fails, the thread runs where the
//! scheduler puts it, and a warning is logged.

/// Parses a CPU list as Linux writes it (`/sys/.../cpulist`: `0-3,8,10-11`, maybe a trailing
/// newline): the CPUs in increasing order, no duplicates. `None` for a malformed list. Internal:
/// what the CUDA backend reads from sysfs.
pub(crate) fn parse_cpu_list(text: &str) -> Option<Vec<usize>> {
    /// Larger lists are refused rather than allocated (a corrupt file must not take memory).
    const MAX_CPUS: usize = 1 << 16;
    let mut cpus = Vec::new();
    for part in text.trim().split(',').filter(|p| !p.is_empty()) {
        let (low, high): (usize, usize) = match part.split_once('-') {
            Some((low, high)) => (low.trim().parse().ok()?, high.trim().parse().ok()?),
            None => {
                let cpu: usize = part.trim().parse().ok()?;
                (cpu, cpu)
            }
        };
        if low > high || high >= MAX_CPUS {
            return None;
        }
        cpus.extend(low..=high);
    }
    cpus.sort_unstable();
    cpus.dedup();
    Some(cpus)
}

/// The CPUs the calling thread may run on; empty where the platform does not say.
#[cfg(target_os = "linux")]
pub fn allowed_cpus() -> Vec<usize> {
    // SAFETY: `cpu_set_t` is plain data, valid when zeroed; `sched_getaffinity` writes at most
    // `size_of::<cpu_set_t>()` bytes into it.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) != 0 {
            return Vec::new();
        }
        (0..libc::CPU_SETSIZE as usize).filter(|&cpu| libc::CPU_ISSET(cpu, &set)).collect()
    }
}

/// The CPUs the calling thread may run on; empty where the platform does not say.
#[cfg(not(target_os = "linux"))]
pub fn allowed_cpus() -> Vec<usize> {
    Vec::new()
}

/// Restricts the calling thread to `cpus`. Whether it took: false for an empty list, CPUs
/// beyond the platform's set size, a failed call, or a platform without affinity.
#[cfg(target_os = "linux")]
pub fn pin_current_thread(cpus: &[usize]) -> bool {
    if cpus.is_empty() || cpus.iter().any(|&cpu| cpu >= libc::CPU_SETSIZE as usize) {
        return false;
    }
    // SAFETY: as in `allowed_cpus`; every CPU is below CPU_SETSIZE (checked above), and
    // `sched_setaffinity` only reads the set.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        for &cpu in cpus {
            libc::CPU_SET(cpu, &mut set);
        }
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) == 0
    }
}

/// Restricts the calling thread to `cpus`: not supported on this platform (always false).
#[cfg(not(target_os = "linux"))]
pub fn pin_current_thread(_cpus: &[usize]) -> bool {
    false
}

/// The CPUs of thread `k` of `threads` given the set `cpus`: one CPU each while there are enough
/// (a spinning thread owns its core, and never migrates), else the whole set (the scheduler
/// shares it out). Empty `cpus`: not pinned.
pub(crate) fn thread_cpus(cpus: &[usize], threads: usize, k: usize) -> Vec<usize> {
    if threads <= cpus.len() {
        vec![cpus[k % cpus.len()]]
    } else {
        cpus.to_vec()
    }
}

/// The physical core of `cpu`: the first CPU of its `thread_siblings_list` in sysfs (SMT
/// siblings share one); `cpu` itself where sysfs does not say.
pub(crate) fn core_of(cpu: usize) -> usize {
    let path = format!("/sys/devices/system/cpu/cpu{cpu}/topology/thread_siblings_list");
    std::fs::read_to_string(path)
        .ok()
        .and_then(|text| parse_cpu_list(&text))
        .and_then(|siblings| siblings.first().copied())
        .unwrap_or(cpu)
}

/// Splits CPU sets between the devices that share them, by physical core ([`core_of`]): device
/// `i` near `near[i]` gets an equal contiguous share of the cores of its set, counted among the
/// devices with the same set (two GPUs on one NUMA node get half of its cores each, never two
/// SMT siblings of one core, which would halve each other's spinning threads). Each device's list
/// holds one CPU of each of its cores first, then their siblings, so that
/// [`thread_cpus`] puts the first threads on distinct cores. Devices with disjoint sets keep
/// theirs whole (reordered the same way); an empty set (the node is unknown) stays empty.
pub(crate) fn share(near: &[Vec<usize>]) -> Vec<Vec<usize>> {
    share_by(near, core_of)
}

/// [`share`] with the core of each CPU given by `core_of`.
pub(crate) fn share_by(near: &[Vec<usize>], core_of: impl Fn(usize) -> usize) -> Vec<Vec<usize>> {
    near.iter()
        .enumerate()
        .map(|(i, set)| {
            // The set's cores in order of their first CPU, each with its CPUs of the set.
            let mut cores: Vec<(usize, Vec<usize>)> = Vec::new();
            for &cpu in set {
                let core = core_of(cpu);
                match cores.iter_mut().find(|(c, _)| *c == core) {
                    Some((_, cpus)) => cpus.push(cpu),
                    None => cores.push((core, vec![cpu])),
                }
            }
            let sharing: Vec<usize> = (0..near.len()).filter(|&j| near[j] == *set).collect();
            let (n, rank) = (sharing.len(), sharing.iter().position(|&j| j == i).unwrap_or(0));
            let mine = if cores.len() < n {
                &cores[..] // fewer cores than devices: every device shares them all
            } else {
                let per = cores.len() / n;
                &cores[rank * per..(rank + 1) * per]
            };
            // One CPU of each core, then the second ones, and so on.
            let depth = mine.iter().map(|(_, cpus)| cpus.len()).max().unwrap_or(0);
            (0..depth)
                .flat_map(|level| mine.iter().filter_map(move |(_, cpus)| cpus.get(level).copied()))
                .collect()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::{parse_cpu_list, share_by, thread_cpus};

    #[test]
    fn cpu_lists_parse_as_linux_writes_them() {
        assert_eq!(parse_cpu_list("0-3,8,10-11\n"), Some(vec![0, 1, 2, 3, 8, 10, 11]));
        assert_eq!(parse_cpu_list(""), Some(vec![]));
        assert_eq!(parse_cpu_list("3-1"), None);
    }

    #[test]
    fn one_cpu_per_thread_while_there_are_enough() {
        assert_eq!(thread_cpus(&[4, 5, 6], 2, 1), vec![5]);
        assert_eq!(thread_cpus(&[4, 5, 6], 4, 1), vec![4, 5, 6]);
        assert!(thread_cpus(&[], 2, 0).is_empty());
    }

    #[test]
    fn devices_sharing_a_set_split_it_by_physical_core() {
        // 4 cores with 2 threads each, numbered as Linux does: CPU c and c + 4 are siblings.
        let core = |cpu: usize| cpu % 4;
        let node: Vec<usize> = (0..8).collect();
        assert_eq!(share_by(&[node.clone(), node.clone()], core), vec![vec![0, 1, 4, 5], vec![2, 3, 6, 7]]);
        assert_eq!(share_by(std::slice::from_ref(&node), core), vec![vec![0, 1, 2, 3, 4, 5, 6, 7]]);
        // No SMT: one CPU per core.
        let alone = |cpu: usize| cpu;
        assert_eq!(
            share_by(&[vec![0, 1, 2, 3], vec![0, 1, 2, 3], vec![8, 9]], alone),
            vec![vec![0, 1], vec![2, 3], vec![8, 9]]
        );
        assert_eq!(share_by(&[vec![], vec![]], alone), vec![Vec::<usize>::new(), vec![]]);
    }
}
