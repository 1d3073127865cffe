//! Where the backend puts memory and which links it trusts: the CPU agent nearest each GPU, access
//! for every GPU, the kernel-argument pool passed over, links without 64-bit atomics.

use super::*;

/// The summed NUMA distance from `gpu` to `pool` over its link hops.
fn distance(runtime: &HsaRuntime, gpu: HsaAgent, pool: hsa_sys::AmdMemoryPool) -> u32 {
    let lib = runtime.library();
    let mut hops = 0u32;
    let mut links = [AmdMemoryPoolLinkInfo::default(); 4];
    // SAFETY: NUM_LINK_HOPS is a u32; LINK_INFO fills `hops` (<= 4 here) link infos.
    unsafe {
        let info = lib.hsa_amd_agent_memory_pool_get_info;
        assert!(info(gpu, pool, AmdAgentMemoryPoolInfo::NUM_LINK_HOPS, (&mut hops as *mut u32).cast())
            .is_success());
        assert!(hops as usize <= links.len());
        assert!(info(gpu, pool, AmdAgentMemoryPoolInfo::LINK_INFO, links.as_mut_ptr().cast()).is_success());
    }
    links[..hops as usize].iter().map(|link| link.numa_distance).sum()
}

#[test]
fn the_buffer_goes_to_the_cpu_agent_nearest_the_gpu() {
    with_watchdog(LIMIT, || {
        // Two NUMA nodes; the only GPU sits on node 1.
        let standin = StandIn::new("nearest-cpu", "cpus=2;gpus=1;gpu_numa=1", "");
        let backend = hsa_backend(&standin);
        let runtime = backend.runtime.clone().unwrap();
        let (cpus, gpu) = (runtime.cpu_agents().unwrap(), runtime.gpu_agents().unwrap()[0].handle);
        let fine = |cpu: HsaAgent| runtime.memory_pools(cpu).unwrap()[0];
        let (near, far) =
            (distance(&runtime, gpu, fine(cpus[1].handle)), distance(&runtime, gpu, fine(cpus[0].handle)));
        assert!(near < far);
        // SAFETY: HSA_AMD_AGENT_INFO_NEAREST_CPU (0xA113, ROCm 6) is an hsa_agent_t.
        let nearest = unsafe { runtime.agent_info(gpu, AgentInfo(0xA113), HsaAgent::default()) }.unwrap();
        assert_eq!(nearest, cpus[1].handle);
        // ROCclr's choice (`Device::setupCpuAgent`): the least NUMA distance over the link hops.
        let placement = backend.placement.clone().unwrap();
        assert_eq!((placement.cpu.name.as_str(), placement.distance), ("cpu1", near));
        let block = DeviceAllocation::new(backend.memory.clone(), 64, 64).unwrap();
        assert_eq!(standin.block_holding(block.as_ptr() as u64).pool, "cpu1.fine");
        drop((block, runtime, backend));
        standin.assert_released();
    });
}

#[test]
fn each_gpu_gets_the_cpu_agent_nearest_it_and_every_gpu_access() {
    with_watchdog(LIMIT, || {
        // GPU 0 on node 1, GPU 1 on node 0.
        let standin = StandIn::new("per-gpu", "cpus=2;gpus=2;gpu_numa=1,0", "");
        for (gpu, cpu) in [(0, "cpu1"), (1, "cpu0")] {
            let options = standin.options(AtomicsRequirement::Required).with_gpu(gpu);
            let backend = detect_with(&options);
            assert_eq!(backend.kind, BackendKind::Hsa, "{}", backend.reason);
            let buffer = backend.buffer(64, Protocol::Phase, backend.doorbell.clone()).unwrap();
            let block = standin.block_holding(buffer.as_ptr() as u64);
            assert_eq!(block.pool, format!("{cpu}.fine"));
            assert_eq!(block.granted, ["gpu0", "gpu1"]);
            let bitmap = buffer.device_occupied().unwrap();
            assert_eq!(standin.block_holding(bitmap.device_address()).pool, format!("gpu{gpu}.coarse"));
            assert!(backend.reason.contains(&format!("CPU agent {cpu}")), "{}", backend.reason);
            drop((buffer, backend));
            standin.assert_released();
        }
    });
}

#[test]
fn the_kernel_argument_pool_is_passed_over() {
    with_watchdog(LIMIT, || {
        let standin = StandIn::new("kernarg-first", "kernarg_first=1", "");
        let backend = hsa_backend(&standin);
        let block = DeviceAllocation::new(backend.memory.clone(), 64, 64).unwrap();
        // ROCclr prefers a CPU's fine-grained pool without KERNARG_INIT, whatever the order.
        assert_eq!(standin.block_holding(block.as_ptr() as u64).pool, "cpu0.fine");
        drop((block, backend));
        standin.assert_released();
    });
}

#[test]
fn links_without_64_bit_atomics_refuse_the_stack_protocol() {
    with_watchdog(LIMIT, || {
        let standin = StandIn::new("no-atomics", "atomics64=0", "");
        let backend = detect_with(&standin.options(AtomicsRequirement::Required));
        assert_eq!(backend.kind, BackendKind::Host);
        assert_eq!(
            backend.fallback,
            Some(HsaError::NoPlatformAtomics { gpu: "gpu0".into(), hop: 0, link: AmdLinkInfoType::PCIE })
        );
        assert!(backend.reason.contains("phase protocol"), "{}", backend.reason);
        standin.assert_released(); // the runtime set up for detection is shut down again
        let backend = detect_with(&standin.options(AtomicsRequirement::NotRequired));
        assert_eq!(backend.kind, BackendKind::Hsa, "{}", backend.reason);
        assert!(backend.reason.contains("Missing"), "{}", backend.reason);
        let runtime = backend.runtime.clone().unwrap();
        let memory = HsaMemory::new(runtime, AtomicsRequirement::NotRequired).unwrap();
        assert!(matches!(memory.platform_atomics(), PlatformAtomics::Missing { hop: 0, .. }));
        // Such a backend makes phase buffers only.
        let refused = backend.buffer(4, Protocol::Stack, backend.doorbell.clone()).unwrap_err();
        assert!(matches!(refused, Error::Unsupported(_)), "{refused:?}");
        let phase = backend.buffer(4, Protocol::Phase, backend.doorbell.clone()).unwrap();
        drop((phase, memory, backend));
        standin.assert_released();
    });
}
