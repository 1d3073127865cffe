//! [`Gpu`]: one device, its module, memory, doorbell and (shared) services; launching the kernels and
//! reading back what they measured ([`Run`]).

use crate::options::Policy;
use crate::variants::Kind;
use crate::{mix, MIX};
use hostcall::{
    backend::cuda::{Cuda, CudaGpu, CudaMemory, DeviceBuffer, Kernel, Module, Stream},
    services::message::MessageLimits,
    services::printf::{PrintfSink, Stream as PrintStream},
    DeviceAllocation, DeviceListeners, DeviceMemory, Doorbell, Error, HostcallBuffer, ListenerConfig,
    ListenerPool, Services,
};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Everything a run on one GPU needs.
pub(crate) struct Gpu {
    pub(crate) cuda: Arc<Cuda>,
    pub(crate) module: Arc<Module>,
    pub(crate) memory: Arc<CudaMemory>,
    pub(crate) doorbell: Arc<dyn Doorbell>,
    pub(crate) stream: Stream,
    pub(crate) sms: u32,
    /// Shared by every GPU: one registry for the process.
    pub(crate) services: Arc<Services>,
    pub(crate) printed: Arc<Mutex<Vec<u8>>>,
    /// Its context, memory, doorbell, topology and CPUs ([`cuda::open_gpus`]).
    pub(crate) host: CudaGpu,
}

/// What serves the buffers of a run: one pool (one GPU), or a group per GPU.
pub(crate) trait Serve: Sync {
    fn add(&self, buffer: Arc<HostcallBuffer>) -> Result<(), Error>;
    fn remove(&self, buffer: &HostcallBuffer) -> Result<(), Error>;
}

impl Serve for ListenerPool {
    fn add(&self, buffer: Arc<HostcallBuffer>) -> Result<(), Error> {
        ListenerPool::add(self, buffer)
    }
    fn remove(&self, buffer: &HostcallBuffer) -> Result<(), Error> {
        self.remove_buffer(buffer)
    }
}

impl Serve for DeviceListeners {
    fn add(&self, buffer: Arc<HostcallBuffer>) -> Result<(), Error> {
        DeviceListeners::add(self, buffer)
    }
    fn remove(&self, buffer: &HostcallBuffer) -> Result<(), Error> {
        self.remove_buffer(buffer)
    }
}

/// How the RPC client learns whether a port is its own at open.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum RpcOpen {
    /// From its port state in device memory (no read of host memory for a clean port).
    PortState,
    /// From both mailboxes in host memory, at every open (LLVM's client).
    Mailboxes,
}

/// The ports of an RPC buffer for `warps` warps: one each (from 32, in multiples of 16, which
/// keeps the lane buffers 128-byte aligned), at most the port limit.
pub(crate) fn rpc_ports(warps: u32) -> u64 {
    u64::from(warps.max(32).next_multiple_of(16).min(hostcall_core::rpc::MAX_PORT_COUNT))
}

/// What printf printed, kept for checking.
pub(crate) type Printed = Arc<Mutex<Vec<u8>>>;

/// The registry every GPU's listeners share: the lane service `mix`, printf, FUNCTION_CALL.
pub(crate) fn services() -> Result<(Arc<Services>, Printed), Error> {
    let services = Arc::new(Services::new());
    services.register_lane(MIX, "mix", |r| Ok([mix(r), r[0].wrapping_add(r[1])]))?;
    let printed = Arc::new(Mutex::new(Vec::new()));
    services.enable_printf(Capture(printed.clone()), MessageLimits::default())?;
    // SAFETY: only our own kernels reach these buffers, and they send the address of
    // `add_mul`, a function of exactly the FUNCTION_CALL signature, alive for the whole run.
    unsafe { services.enable_function_calls()? };
    Ok((services, printed))
}

/// Printf output goes to stdout and is kept for checking.
pub(crate) struct Capture(Arc<Mutex<Vec<u8>>>);

impl PrintfSink for Capture {
    fn write_stream(&mut self, _stream: PrintStream, bytes: &[u8]) -> std::io::Result<()> {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).extend_from_slice(bytes);
        use std::io::Write;
        let mut out = std::io::stdout().lock();
        out.write_all(bytes)?;
        out.flush()
    }
}

/// What one run of the calls kernel gave.
pub(crate) struct Run {
    pub(crate) warps: u32,
    pub(crate) calls: u32,
    pub(crate) seconds: f64,
    pub(crate) errors: u64,
    pub(crate) checked: u64,
    pub(crate) expected: u64,
    /// Warp 0's calls: total cycles and global-timer ns over the loop, and each call's cycles.
    pub(crate) clocks: [u64; 4],
    pub(crate) per_call: Vec<u64>,
    /// Per-step cycles of every warp's leader, summed: claim, fill, release, wait, reply, calls.
    pub(crate) steps: [u64; 6],
    /// When the launch was made and when the kernel was seen done (host clock).
    pub(crate) window: (Instant, Instant),
}

impl Run {
    pub(crate) fn warp_calls_per_s(&self) -> f64 {
        f64::from(self.warps) * f64::from(self.calls) / self.seconds
    }
    pub(crate) fn ns_per_cycle(&self) -> f64 {
        let cycles = self.clocks[1].saturating_sub(self.clocks[0]) as f64;
        let ns = self.clocks[3].saturating_sub(self.clocks[2]) as f64;
        if cycles > 0.0 {
            ns / cycles
        } else {
            0.0
        }
    }
    /// Warp 0's mean call, from the global timer.
    pub(crate) fn mean_us(&self) -> f64 {
        self.clocks[3].saturating_sub(self.clocks[2]) as f64 / f64::from(self.calls) / 1e3
    }
    pub(crate) fn percentile_us(&self, p: f64) -> f64 {
        let mut v = self.per_call.clone();
        if v.is_empty() {
            return 0.0;
        }
        v.sort_unstable();
        let at = ((v.len() as f64 - 1.0) * p).round() as usize;
        v[at] as f64 * self.ns_per_cycle() / 1e3
    }
    pub(crate) fn ok(&self) -> bool {
        self.errors == 0 && self.checked == self.expected
    }
}

impl Gpu {
    pub(crate) fn new(
        host: CudaGpu,
        module: &std::path::Path,
        services: Arc<Services>,
        printed: Printed,
    ) -> Result<Self, Error> {
        let cuda = host.cuda.clone();
        let module = Module::load(cuda.clone(), module)?;
        let memory = host.memory.clone();
        let doorbell: Arc<dyn Doorbell> = host.doorbell.clone();
        let stream = Stream::new(cuda.clone())?;
        let sms = cuda.multiprocessors()?;
        Ok(Self { cuda, module, memory, doorbell, stream, sms, services, printed, host })
    }

    /// A pool of `threads` spinning listener threads for this GPU alone, on its CPUs.
    pub(crate) fn pool(&self, threads: usize) -> Result<ListenerPool, Error> {
        let config = ListenerConfig::spinning()
            .with_thread_name(format!("cuda-listener-{threads}t"))
            .with_cpus(self.host.cpus.clone());
        ListenerPool::start_with_services(threads, self.doorbell.clone(), config, self.services.clone())
    }

    pub(crate) fn buffer(&self, packets: u32) -> Result<(Arc<HostcallBuffer>, DeviceBuffer), Error> {
        self.host.phase_buffer(u64::from(packets.max(2)))
    }

    /// 1-D launch shape for `warps` warps of 32 lanes, spread over the SMs.
    pub(crate) fn shape(&self, warps: u32) -> (u32, u32) {
        if warps <= self.sms {
            return (warps, 32);
        }
        let per_block = warps.div_ceil(self.sms).min(32);
        (warps.div_ceil(per_block), per_block * 32)
    }

    /// Runs `kernel` (one of the `hc_calls*` kernels) on a fresh phase buffer: `shape` is
    /// (warps, calls per warp).
    pub(crate) fn calls(
        &self,
        pool: &dyn Serve,
        kernel: &Kernel,
        shape: (u32, u32),
        policy: Policy,
    ) -> Result<Run, Error> {
        self.run(Kind::Phase, pool, kernel, shape, policy, false)
    }

    /// Runs `kernel` of a variant of `kind` on a fresh buffer of its protocol: `shape` is
    /// (warps, calls per warp). A line buffer is split between the pool's threads in disjoint
    /// packet ranges, as a phase buffer is. An LLVM-RPC buffer has [`rpc_ports`] ports, its client
    /// object written into this GPU's module (`include/hostcall_cuda_rpc.cuh`, the `'h'`
    /// opcodes); its [`RpcOpen`] says whether the warps keep the port state in device memory or
    /// read the mailboxes at every open, as LLVM's client does.
    pub(crate) fn run(
        &self,
        kind: Kind,
        pool: &dyn Serve,
        kernel: &Kernel,
        shape: (u32, u32),
        policy: Policy,
        timed: bool,
    ) -> Result<Run, Error> {
        let packets = shape.0.max(32);
        // The buffer and its device state (alive until the run ends).
        let (buffer, state) = match kind {
            Kind::Phase => self.buffer(packets)?,
            Kind::Line => self.host.line_buffer(u64::from(packets))?,
            Kind::Rpc(_) => self.host.rpc_buffer(rpc_ports(shape.0), &self.module)?,
        };
        // The kernel's first argument.
        let target = match kind {
            Kind::Rpc(RpcOpen::PortState) => state.device_address(),
            Kind::Rpc(RpcOpen::Mailboxes) => 0,
            Kind::Phase | Kind::Line => buffer.device_address(),
        };
        self.served_calls(pool, &buffer, target, kernel, shape, policy, timed)
    }

    /// Runs `kernel` on `target` while `pool` serves `buffer` (added for the run, then removed):
    /// `shape` is (warps, calls per warp).
    #[allow(clippy::too_many_arguments)]
    fn served_calls(
        &self,
        pool: &dyn Serve,
        buffer: &Arc<HostcallBuffer>,
        target: u64,
        kernel: &Kernel,
        shape: (u32, u32),
        policy: Policy,
        timed: bool,
    ) -> Result<Run, Error> {
        pool.add(buffer.clone())?;
        let result = self.calls_on(target, kernel, shape.0, shape.1, policy, timed);
        pool.remove(buffer)?;
        result
    }

    /// Launches `kernel` on `target` (its first argument: the buffer's device address, or the
    /// RPC client's port state) and reads back what it measured.
    pub(crate) fn calls_on(
        &self,
        target: u64,
        kernel: &Kernel,
        warps: u32,
        calls: u32,
        policy: Policy,
        timed: bool,
    ) -> Result<Run, Error> {
        let (grid, block) = self.shape(warps);
        let warps = grid * block / 32;
        let counters = DeviceBuffer::new(self.cuda.clone(), 16)?;
        let timing = DeviceBuffer::new(self.cuda.clone(), if timed { warps as usize * 48 } else { 8 })?;
        let per_call = DeviceBuffer::new(self.cuda.clone(), calls as usize * 8)?;
        let clocks = DeviceBuffer::new(self.cuda.clone(), 32)?;
        let args = [
            target,
            u64::from(calls),
            u64::from(policy.spin_ns),
            u64::from(policy.min_sleep_ns),
            u64::from(policy.max_sleep_ns),
            u64::from(policy.poll_stagger_ns),
            counters.device_address(),
            if timed { timing.device_address() } else { 0 },
            per_call.device_address(),
            clocks.device_address(),
        ];
        let started = Instant::now();
        // SAFETY: the arguments match `CALLS_KERNEL` in kernels.cu in order and size (the buffer,
        // `calls` and the four wait-policy values as 32-bit integers, four device pointers); the
        // buffer and the device buffers outlive the kernel, which we wait for below.
        unsafe { kernel.launch(&self.stream, grid, block, &args)? };
        self.stream.synchronize_for(Duration::from_secs(120))?;
        let ended = Instant::now();
        let seconds = (ended - started).as_secs_f64();
        let c = counters.read_u64(2)?;
        let mut steps = [0u64; 6];
        if timed {
            for warp in timing.read_u64(warps as usize * 6)?.chunks_exact(6) {
                for (sum, v) in steps.iter_mut().zip(warp) {
                    *sum += v;
                }
            }
        }
        let clocks = clocks.read_u64(4)?;
        Ok(Run {
            warps,
            calls,
            seconds,
            errors: c[0],
            checked: c[1],
            expected: u64::from(warps) * 32 * u64::from(calls),
            clocks: [clocks[0], clocks[1], clocks[2], clocks[3]],
            per_call: per_call.read_u64(calls as usize)?,
            steps,
            window: (started, ended),
        })
    }

    /// The ping-pong floor: mean round trip in ns, one word each way.
    /// The link's bandwidth in GB/s between this GPU and mapped host memory (kernels.cu
    /// `hc_link`; `mode` as there), moving 256 MiB after one warm-up pass.
    pub(crate) fn link_gb_per_s(&self, mode: u32) -> Result<f64, Error> {
        const BYTES: usize = 256 << 20;
        let host = DeviceAllocation::new(self.memory.clone(), BYTES, 4096)?;
        let sink = DeviceBuffer::new(self.cuda.clone(), 8)?;
        let kernel = self.module.kernel("hc_link")?;
        let groups = (BYTES / 4096) as u64;
        let args = [
            self.memory.device_address(host.as_ptr().cast_const()),
            groups,
            u64::from(mode),
            sink.device_address(),
        ];
        let mut seconds = 0.0;
        for _ in 0..2 {
            let t = Instant::now();
            // SAFETY: matches `hc_link(uint64_t*, unsigned long long, unsigned, unsigned long long*)`;
            // the kernel touches `groups` x 4 KB of `host` (exactly its size) and 8 bytes of `sink`,
            // both of which outlive it (synchronized below).
            unsafe { kernel.launch(&self.stream, self.sms * 8, 256, &args) }?;
            self.stream.synchronize_for(Duration::from_secs(60))?;
            seconds = t.elapsed().as_secs_f64();
        }
        Ok(BYTES as f64 / seconds / 1e9)
    }

    pub(crate) fn floor(&self, rounds: u32, fence: bool) -> Result<f64, Error> {
        let words = DeviceAllocation::new(self.memory.clone(), 256, 128)?;
        // SAFETY: the allocation is 256 bytes, 128-aligned, outlives both views (the kernel and
        // the host thread are done before it drops) and is only accessed atomically.
        let (to_host, from_host) =
            unsafe { (&*words.as_ptr().cast::<AtomicU32>(), &*words.as_ptr().add(128).cast::<AtomicU32>()) };
        // Relaxed: published by the kernel launch below.
        to_host.store(0, Ordering::Relaxed);
        from_host.store(0, Ordering::Relaxed);
        let out = DeviceBuffer::new(self.cuda.clone(), 8)?;
        let kernel = self.module.kernel("hc_floor")?;
        let stop = AtomicBool::new(false);
        std::thread::scope(|scope| -> Result<f64, Error> {
            let echo = scope.spawn(|| {
                let mut next = 1;
                // Relaxed: statistics-free ping-pong of one word; nothing else is published.
                while next <= rounds && !stop.load(Ordering::Relaxed) {
                    if to_host.load(Ordering::Relaxed) == next {
                        from_host.store(next, Ordering::Relaxed);
                        next += 1;
                    } else {
                        std::hint::spin_loop();
                    }
                }
            });
            let device = self.memory.device_address(words.as_ptr().cast_const());
            let args = [device, device + 128, u64::from(rounds), u64::from(fence), out.device_address()];
            // SAFETY: matches `hc_floor(unsigned*, const unsigned*, unsigned, unsigned, u64*)`;
            // every address outlives the kernel.
            let launched = unsafe { kernel.launch(&self.stream, 1, 1, &args) };
            let done = launched.and_then(|()| self.stream.synchronize_for(Duration::from_secs(60)));
            // Relaxed: a stop flag for the echo thread; the join orders the rest.
            stop.store(true, Ordering::Relaxed);
            let _ = echo.join();
            done?;
            Ok(out.read_u64(1)?[0] as f64 / f64::from(rounds))
        })
    }
}
