//! The HSA backend against the HSA stand-in (`tests/hsa-standin/hsa_standin.c`): detection,
//! hostcall buffers in HSA memory served through HSA signals to emulated waves, a device's raw
//! atomic ring waking the listener, topology choices, failures injected into every HSA call the
//! backend makes, and that everything is freed, destroyed and shut down at the end (asserted
//! from the stand-in's log and state).
//!
//! Each test loads a private copy of the stand-in (its own runtime state), through
//! [`DetectOptions::library`]; `tests/hsa_standin_env.rs` covers `HOSTCALL_HSA_LIB`. Each runs
//! under a watchdog and its waves have timeouts: a broken path fails, it does not hang.
//!
//! Where ROCm's runtime decides where memory goes (ROCclr), the tests assert the same choice:
//! the buffer in the fine-grained pool of the CPU agent nearest the GPU (not its kernel-argument
//! pool), access for every GPU, the phase bitmap and DEVMEM blocks in the GPU's own pool, one
//! signal per listener created as ROCm creates it.
#![cfg(target_os = "linux")]

#[macro_use]
mod common;
#[path = "common/hsa_standin.rs"]
mod standin;

// The tests by subject, beside this file (a test crate's root finds its modules through `path`).
#[path = "hsa_standin/failures.rs"]
mod failures;
#[path = "hsa_standin/headers.rs"]
mod headers;
#[path = "hsa_standin/signals.rs"]
mod signals;
#[path = "hsa_standin/topology.rs"]
mod topology;

use common::waves::{register_add, run_waves, ADD};

use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use hostcall::backend::hsa::{
    AtomicsRequirement, HsaDoorbell, HsaError, HsaMemory, HsaRuntime, PlatformAtomics,
};
use hostcall::{
    backend::{detect_with, Backend, BackendKind},
    buffer_align, buffer_size,
    services::devmem::DevMemLimits,
    DeviceAllocation, Doorbell, EmulatedWave, Error, HostcallBuffer, HostcallRuntime, Listener,
    ListenerConfig, MemoryError, Protocol, QueueId, DOORBELL_INIT as INIT,
};
use hostcall_core::DEVMEM;
use hsa_sys::{
    AgentInfo, AmdAgentMemoryPoolInfo, AmdLinkInfoType, AmdMemoryPoolLinkInfo, HsaAgent, HsaLib, HsaStatus,
};
use standin::{with_watchdog, StandIn};

const LIMIT: Duration = Duration::from_secs(120);
const WAVE_TIMEOUT: Duration = Duration::from_secs(20);

/// What a GPU kernel does to ring the doorbell (ROCm's device library): a release `fetch_add` of
/// 1 on the signal's value at handle + 8, then an interrupt only if the mailbox at handle + 16 is
/// set, which it never is here. No call into the runtime. Waiting is the host's and goes through
/// the runtime's signal.
#[derive(Debug)]
struct DeviceRing {
    signal: Arc<dyn Doorbell>,
}

impl Doorbell for DeviceRing {
    fn handle(&self) -> u64 {
        self.signal.handle()
    }

    fn ring(&self) {
        let value = (self.signal.handle() + 8) as *const AtomicI64;
        // SAFETY: the handle is the address of a live 64-aligned amd_signal_t (the signal outlives
        // every wave of the test); its value at +8 is only ever accessed atomically.
        unsafe { &*value }.fetch_add(1, Ordering::Release);
        let mailbox = (self.signal.handle() + 16) as *const AtomicU64;
        // SAFETY: as above, +16 is the signal's event_mailbox_ptr.
        assert_eq!(unsafe { &*mailbox }.load(Ordering::Acquire), 0, "a user signal has no mailbox");
    }

    fn value(&self) -> u64 {
        self.signal.value()
    }

    fn wait(&self, last_seen: u64, timeout: Duration) -> u64 {
        self.signal.wait(last_seen, timeout)
    }
}

/// Reads the u64 at `offset` of `base` (a field of a buffer's prefix or of a signal).
fn word(base: u64, offset: u64) -> u64 {
    // SAFETY: the callers pass live buffers and signals, whose fields are 8-aligned and accessed
    // atomically by everyone else.
    unsafe { &*((base + offset) as *const AtomicU64) }.load(Ordering::Acquire)
}

fn hsa_backend(standin: &StandIn) -> Backend {
    let backend = detect_with(&standin.options(AtomicsRequirement::Required));
    assert_eq!(backend.kind, BackendKind::Hsa, "{}\nlog:\n{}", backend.reason, standin.log());
    backend
}

fn listener_on(doorbell: Arc<dyn Doorbell>, config: ListenerConfig) -> Listener {
    let listener = Listener::start(doorbell, config).unwrap();
    register_add(listener.services());
    listener
}

#[test]
fn detection_finds_the_agents_and_shutting_down_releases_everything() {
    with_watchdog(LIMIT, || {
        let standin = StandIn::new("detection", "", "");
        let backend = hsa_backend(&standin);
        assert!(backend.reason.contains("2 GPU agent(s) (gpu0, gpu1)"), "{}", backend.reason);
        assert!(backend.reason.contains("platform atomics: Supported"), "{}", backend.reason);
        assert_eq!(backend.memory.name(), "hsa-fine-grained");
        let runtime = backend.runtime.clone().unwrap();
        assert_eq!(runtime.timestamp_frequency().unwrap(), 100_000_000);
        let names = |agents: Vec<hostcall::backend::hsa::Agent>| {
            agents.into_iter().map(|a| a.name).collect::<Vec<_>>()
        };
        assert_eq!(names(runtime.cpu_agents().unwrap()), ["cpu0"]);
        assert_eq!(names(runtime.gpu_agents().unwrap()), ["gpu0", "gpu1"]);
        let memory = HsaMemory::new(runtime.clone(), AtomicsRequirement::Required).unwrap();
        assert_eq!(memory.pool().alignment, 4096, "the pool's RUNTIME_ALLOC_ALIGNMENT");
        assert_eq!(memory.gpu_agents().len(), 2);
        assert_eq!(standin.count("init_refs"), 1);
        assert_eq!(standin.count("signals"), 1, "the backend's doorbell");
        let created = standin.calls("hsa_signal_create");
        assert!(created[0].contains("initial=1 consumers=0 "), "as ROCm's listener creates it: {created:?}");
        drop((memory, runtime, backend));
        standin.assert_released();
        assert_eq!(standin.calls("hsa_shut_down").len(), 1);
        assert_eq!(standin.calls("hsa_signal_destroy").len(), 1);
    });
}

fn waves_through_hsa_memory_and_signals(protocol: Protocol) {
    with_watchdog(LIMIT, move || {
        let standin = StandIn::new(&format!("waves-{protocol:?}"), "", "");
        let backend = hsa_backend(&standin);
        // Power saving: its naps reach 2 ms and more, which block in `hsa_signal_wait_scacquire`
        // (shorter ones sleep outside ROCr's busy wait: see the test after this one).
        let listener = listener_on(backend.doorbell.clone(), ListenerConfig::power_saving());
        let device: Arc<dyn Doorbell> = Arc::new(DeviceRing { signal: backend.doorbell.clone() });
        let buffer = Arc::new(backend.buffer(8, protocol, device).unwrap());

        // The buffer: one block of the CPU's fine-grained pool, every GPU granted access.
        let base = buffer.as_ptr() as u64;
        let block = standin.block_holding(base);
        assert_eq!(block.pool, "cpu0.fine");
        assert_eq!(block.granted, ["gpu0", "gpu1"]);
        assert_eq!(block.ptr % 4096, 0);
        // Its doorbell field holds the signal's handle; the signal is an amd_signal_t.
        let signal = backend.doorbell.handle();
        let doorbell_field = match protocol {
            Protocol::Stack => Some(16),
            Protocol::Phase | Protocol::Line => Some(40),
            // LLVM's layout has no prefix and its client rings nothing; the emulated waves ring
            // the buffer's doorbell all the same.
            Protocol::Rpc { .. } => None,
        };
        if let Some(field) = doorbell_field {
            assert_eq!(word(base, field), signal);
        }
        assert_eq!(standin.signals(), [signal]);
        assert_eq!(signal % 64, 0);
        assert_eq!(
            (word(signal, 0), word(signal, 8), word(signal, 16)),
            (1, INIT, 0),
            "kind, value, mailbox"
        );
        if protocol == Protocol::Phase {
            // The `occupied` bitmap (one bit a packet: one u32 here) in the GPU's own memory,
            // which only the device touches, zeroed by the runtime's fill; no grant needed.
            let bitmap = standin.block_holding(word(base, 16));
            assert_eq!((bitmap.pool.as_str(), bitmap.granted.len()), ("gpu0.coarse", 0));
            let fills = standin.calls("hsa_amd_memory_fill");
            assert_eq!(fills.len(), 1, "{fills:?}");
            assert!(fills[0].contains("value=0x0 count=1 pool=gpu0.coarse -> SUCCESS"), "{fills:?}");
            assert_eq!(word(base, 16) & 63, 0);
        }
        assert_eq!(standin.blocks().len(), if protocol == Protocol::Phase { 2 } else { 1 });

        listener.add(buffer.clone()).unwrap();
        run_waves(&buffer, 4, 16, 25, Some(WAVE_TIMEOUT));
        // With the device quiet the listener goes idle and sleeps on its signal (while waves call,
        // a loaded machine may keep it busy polling throughout).
        let deadline = Instant::now() + Duration::from_secs(10);
        while standin.count("calls:hsa_signal_wait_scacquire") == 0 {
            assert!(Instant::now() < deadline, "the idle listener never waited on its signal");
            thread::sleep(Duration::from_millis(1));
        }
        let stats = listener.shutdown();
        assert_eq!(stats.services[&ADD].1.packets, 100);
        assert_eq!(stats.services[&ADD].1.lane_calls, 100 * 16);
        assert_eq!(stats.total().errors, 0);
        // The device rang only raw; the one ring through the runtime is the listener waking
        // itself to stop (it never stores DONE: another listener may share the signal).
        assert_eq!(standin.count("calls:hsa_signal_add_screlease"), 1);
        assert_eq!(standin.count("calls:hsa_signal_store_screlease"), 0);
        assert!(standin.count("calls:hsa_signal_wait_scacquire") > 0);

        drop((listener, buffer, backend));
        standin.assert_released();
        let freed = standin.calls("hsa_amd_memory_pool_free");
        assert!(
            freed.iter().any(|line| line.contains(&format!("ptr={:#x} pool=cpu0.fine ", block.ptr))),
            "{freed:?}"
        );
        let destroyed = standin.calls("hsa_signal_destroy");
        assert!(destroyed.iter().any(|line| line.contains(&format!("signal={signal:#x} -> SUCCESS"))));
    });
}

for_every_protocol!(waves_through_hsa_memory_and_signals);

#[test]
fn runtimes_are_reference_counted_and_misuse_is_reported() {
    with_watchdog(LIMIT, || {
        let standin = StandIn::new("refcount", "", "");
        let lib = HsaLib::load_from(standin.path()).unwrap();
        // SAFETY: calls with no arguments, or a valid out-pointer; misuse is the point.
        unsafe {
            assert_eq!((lib.hsa_shut_down)(), HsaStatus::ERROR_NOT_INITIALIZED);
            let mut signal = hsa_sys::HsaSignal::default();
            assert_eq!(
                (lib.hsa_signal_create)(1, 0, std::ptr::null(), &mut signal),
                HsaStatus::ERROR_NOT_INITIALIZED
            );
        }
        let first = HsaRuntime::from_path(standin.path()).unwrap();
        let second = HsaRuntime::from_path(standin.path()).unwrap();
        assert_eq!(standin.count("init_refs"), 2);
        // SAFETY: a pointer no pool handed out: the runtime must refuse it, not crash.
        let status = unsafe { (first.library().hsa_amd_memory_pool_free)(8 as *mut _) };
        assert_eq!(status, HsaStatus::ERROR_INVALID_ALLOCATION);
        assert_eq!(first.status_text(status), "The allocation is not valid.");
        drop(first);
        assert_eq!(standin.count("init_refs"), 1);
        drop(second);
        assert_eq!(standin.count("init_refs"), 0);
        assert_eq!(standin.count("errors"), 3, "the two uninitialised calls and the bad free");
    });
}

#[test]
fn the_lifecycle_runtime_serves_buffers_in_hsa_memory() {
    with_watchdog(LIMIT, || {
        let standin = StandIn::new("lifecycle", "", "");
        let backend = hsa_backend(&standin);
        let runtime =
            HostcallRuntime::with_config(backend.doorbell.clone(), HostcallRuntime::default_config());
        runtime.services().register_lane(ADD, "add", |r| Ok([r[0] + r[1], 0])).unwrap();
        let n = 4;
        let blocks: Vec<_> = (0..2)
            .map(|_| {
                DeviceAllocation::new(backend.memory.clone(), buffer_size(n).unwrap(), buffer_align())
                    .unwrap()
            })
            .collect();
        for (queue, block) in blocks.iter().enumerate() {
            // SAFETY: the block outlives the enablement (disabled below before it is dropped).
            unsafe { runtime.enable(block.as_ptr(), n, QueueId(queue as u64)) }.unwrap();
            assert_eq!(word(block.as_ptr() as u64, 16), backend.doorbell.handle());
            assert_eq!(standin.block_holding(block.as_ptr() as u64).granted, ["gpu0", "gpu1"]);
        }
        for block in &blocks {
            // SAFETY: enabled above, disabled only after the calls.
            let wave =
                unsafe { EmulatedWave::new(block.as_ptr(), n, 0b101) }.unwrap().with_timeout(WAVE_TIMEOUT);
            for call in 0..10 {
                assert_eq!(
                    wave.call(ADD, |lane| [call, lane as u64, 0, 0, 0, 0, 0, 0]).unwrap().lane(2),
                    [call + 2, 0]
                );
            }
        }
        for (queue, block) in blocks.iter().enumerate() {
            runtime.disable(block.as_ptr(), QueueId(queue as u64)).unwrap();
        }
        // One signal serves the runtime's listener and all its buffers, as in ROCm.
        assert_eq!(standin.count("signals_created"), 1);
        // The default runtime (`HostcallRuntime::new`, and `hostcall::enable` through
        // `HostcallRuntime::global`) has a host doorbell: an amd_signal_t too (a device's add
        // lands in it), but in ordinary host memory, not an HSA signal.
        let default = HostcallRuntime::new();
        assert!(!standin.signals().contains(&default.doorbell().handle()));
        assert_eq!((word(default.doorbell().handle(), 0), word(default.doorbell().handle(), 8)), (1, INIT));
        drop((runtime, blocks));
        assert_eq!(standin.count("allocations"), 0, "every buffer freed");
        assert_eq!(standin.count("signals"), 1, "the backend still holds the signal");
        drop(backend);
        standin.assert_released();
    });
}

/// The default wait policy naps at most 200 µs: on HSA those naps are the OS's sleep, never
/// `hsa_signal_wait_scacquire`, whose first 200 µs ROCr spends busy-polling.
#[test]
fn an_idle_default_listener_naps_outside_the_hsa_wait() {
    with_watchdog(LIMIT, || {
        let standin = StandIn::new("default-naps", "", "");
        let backend = hsa_backend(&standin);
        let listener = listener_on(backend.doorbell.clone(), ListenerConfig::default());
        let before = listener.stats().events.timeout_polls;
        let deadline = Instant::now() + Duration::from_secs(10);
        while listener.stats().events.timeout_polls < before + 20 {
            assert!(Instant::now() < deadline, "the idle listener never napped");
            thread::sleep(Duration::from_millis(1));
        }
        assert_eq!(standin.count("calls:hsa_signal_wait_scacquire"), 0, "{}", standin.log());
        listener.shutdown();
    });
}

#[test]
fn devmem_blocks_come_from_the_gpu_pool() {
    with_watchdog(LIMIT, || {
        let standin = StandIn::new("devmem", "", "");
        let backend = hsa_backend(&standin);
        assert_eq!(backend.device_memory.name(), "hsa-device-local");
        let listener = listener_on(backend.doorbell.clone(), ListenerConfig::default());
        listener.services().enable_devmem(backend.device_memory.clone(), DevMemLimits::default()).unwrap();
        let device: Arc<dyn Doorbell> = Arc::new(DeviceRing { signal: backend.doorbell.clone() });
        let buffer = Arc::new(HostcallBuffer::new(backend.memory.clone(), 4, device).unwrap());
        listener.add(buffer.clone()).unwrap();
        let wave = hostcall::Wave::new(buffer.clone(), 1).with_timeout(WAVE_TIMEOUT);
        let address = wave.call(DEVMEM, |_| [0, 1 << 20, 0, 0, 0, 0, 0, 0]).unwrap().lane(0)[0];
        assert_ne!(address, 0);
        // ROCm's place for device memory: the GPU's own pool, zeroed there by the runtime.
        let block = standin.block_holding(address);
        assert_eq!(block.pool, "gpu0.coarse");
        let fill = format!("ptr={address:#x} value=0x0 count={} pool=gpu0.coarse -> SUCCESS", (1 << 20) / 4);
        assert!(
            standin.calls("hsa_amd_memory_fill").iter().any(|line| line.contains(&fill)),
            "{}",
            standin.log()
        );
        // DEVMEM aligns as ROCm's device allocator needs: blocks on 4 KiB, a 2 MiB slab on 2 MiB
        // (inside a larger block, since the pool aligns to 4 KiB only).
        assert_eq!(address % 4096, 0);
        let slab = wave.call(DEVMEM, |_| [0, 2 << 20, 0, 0, 0, 0, 0, 0]).unwrap().lane(0);
        assert_eq!((slab[0] % (2 << 20), slab[1]), (0, 0), "{slab:x?}");
        assert_eq!(standin.block_holding(slab[0]).pool, "gpu0.coarse");
        assert_eq!(wave.call(DEVMEM, |_| [slab[0], 0, 0, 0, 0, 0, 0, 0]).unwrap().lane(0), [0, 0]);
        assert_eq!(wave.call(DEVMEM, |_| [address, 0, 0, 0, 0, 0, 0, 0]).unwrap().lane(0), [0, 0]);
        assert_eq!(standin.blocks().len(), 1, "only the buffer is left");

        // Any alignment is honoured, above the pool's 4 KiB by over-allocating (and freeing the
        // whole block).
        for memory in [&backend.device_memory, &backend.memory] {
            let two_mib = DeviceAllocation::new(memory.clone(), 2 << 20, 2 << 20).unwrap();
            assert_eq!(two_mib.as_ptr() as usize % (2 << 20), 0);
            let block = standin.block_holding(two_mib.as_ptr() as u64);
            assert!(block.size >= (2 << 20) + (two_mib.as_ptr() as u64 - block.ptr), "{block:?}");
            drop(two_mib);
            assert_eq!(standin.blocks().len(), 1, "the over-aligned block is freed whole");
        }
        listener.shutdown();
        drop((wave, listener, buffer, backend));
        standin.assert_released();
    });
}
