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
/// newline): the CPUs in increasing order, no duplicates. `None` for a malformed list.
///
/// ```
/// use hostcall::serve::affinity::parse_cpu_list;
/// assert_eq!(parse_cpu_list("0-3,8,10-11\n"), Some(vec![0, 1, 2, 3, 8, 10, 11]));
/// assert_eq!(parse_cpu_list(""), Some(vec![]));
/// assert_eq!(parse_cpu_list("3-1"), None);
/// ```
pub fn parse_cpu_list(text: &str) -> Option<Vec<usize>> {
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
///
/// ```
/// use hostcall::serve::affinity::thread_cpus;
/// assert_eq!(thread_cpus(&[4, 5, 6], 2, 1), vec![5]);
/// assert_eq!(thread_cpus(&[4, 5, 6], 4, 1), vec![4, 5, 6]);
/// assert!(thread_cpus(&[], 2, 0).is_empty());
/// ```
pub fn thread_cpus(cpus: &[usize], threads: usize, k: usize) -> Vec<usize> {
    if threads <= cpus.len() {
        vec![cpus[k % cpus.len()]]
    } else {
        cpus.to_vec()
    }
}

/// Splits CPU sets between the devices that share them: device `i` near `near[i]` gets an equal
/// contiguous share of its set, counted among the devices with the same set (two GPUs on one
/// NUMA node get one half of its cores each). Devices with disjoint sets keep theirs whole; an
/// empty set (the node is unknown) stays empty.
///
/// ```
/// use hostcall::serve::affinity::share;
/// let node0 = vec![0, 1, 2, 3];
/// let node1 = vec![4, 5, 6, 7];
/// assert_eq!(share(&[node0.clone(), node0.clone(), node1.clone()]), vec![vec![0, 1], vec![2, 3], node1]);
/// assert_eq!(share(&[vec![], vec![]]), vec![Vec::<usize>::new(), vec![]]);
/// ```
pub fn share(near: &[Vec<usize>]) -> Vec<Vec<usize>> {
    near.iter()
        .enumerate()
        .map(|(i, set)| {
            let sharing: Vec<usize> = (0..near.len()).filter(|&j| near[j] == *set).collect();
            let (n, rank) = (sharing.len(), sharing.iter().position(|&j| j == i).unwrap_or(0));
            if set.len() < n {
                return set.clone(); // fewer cores than devices: every device shares them all
            }
            let per = set.len() / n;
            set[rank * per..(rank + 1) * per].to_vec()
        })
        .collect()
}
