//! [`HostcallRuntime`]: a listener that starts with the first enabled buffer and stops (its
//! thread joined) after the last one is disabled.

use super::options::{Bitmap, EnableOptions};
use super::registry::{self, Enabled};
use super::{checked_len, Protocol, QueueId};
use crate::backend::host::{HostMemory, ParkingDoorbell};
use crate::backend::Backend;
use crate::dispatch::registry::Services;
use crate::doorbell::Doorbell;
use crate::error::Error;
use crate::memory::DeviceMemory;
use crate::services::devmem::DevMemLimits;
use crate::services::message::MessageLimits;
use crate::services::printf::StdStreams;
use crate::services::rpc::RpcOptions;
use crate::services::sanitizer::SanitizerConfig;
use crate::threads::listener::{BufferOptions, Listener, ListenerConfig};
use hostcall_core::{phase, stack};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::time::Duration;

/// A listener managed by buffer lifecycle: ROCm's `enableHostcalls` / `disableHostcalls`.
///
/// [`HostcallRuntime::global`] is the process-wide default that [`super::enable`] and
/// [`super::disable`] use; create more for several listeners. All runtimes share one registry of
/// enabled buffers, so a buffer can never be registered with two of them.
///
/// The services and the doorbell belong to the runtime and outlive its listener threads: a
/// service registered once serves every later incarnation of the listener, and the doorbell handle
/// written into a buffer stays valid as long as the runtime lives.
///
/// Built in from the start, as in ROCm's runtime (so ROCm's device `printf` and device `malloc`
/// work through `enableHostcalls`): PRINTF (id 2) to the process's stdout and stderr, DEVMEM
/// (id 3) through the runtime's device memory ([`HostcallRuntime::device_memory`]), with the
/// default limits, and SANITIZER (id 4, [`crate::services::sanitizer`]). FUNCTION_CALL (id 1)
/// calls any address a device names, so it is there only after the `unsafe`
/// [`HostcallRuntime::enable_function_calls`]. To serve a built-in id differently, unregister it
/// first (`runtime.services().unregister(id)`) and register your own (e.g.
/// [`Services::enable_sanitizer`] with another configuration).
///
/// ```
/// use hostcall::lifecycle::{buffer_size, EmulatedWave, HostcallRuntime, QueueId};
/// let runtime = HostcallRuntime::new();
/// runtime.services().register_lane(100, "add", |r| Ok([r[0] + r[1], 0])).unwrap();
///
/// let mut memory = vec![0u64; buffer_size(4).unwrap() / 8]; // 8-aligned
/// let buffer = memory.as_mut_ptr().cast::<u8>();
/// // SAFETY: `memory` outlives the enablement and is only touched through the protocol.
/// unsafe { runtime.enable(buffer, 4, QueueId(1)) }.unwrap();
/// assert!(runtime.is_running());
///
/// // SAFETY: the buffer stays enabled while the wave is used.
/// let wave = unsafe { EmulatedWave::new(buffer, 4, 0b11) }.unwrap();
/// assert_eq!(wave.call(100, |lane| [lane as u64, 40, 0, 0, 0, 0, 0, 0]).unwrap().lane(1), [41, 0]);
///
/// runtime.disable(buffer, QueueId(1)).unwrap();
/// assert!(!runtime.is_running()); // the last buffer is gone: the thread was joined
/// ```
pub struct HostcallRuntime {
    /// Names this runtime in the registry.
    id: u64,
    doorbell: Arc<dyn Doorbell>,
    /// Where DEVMEM blocks and the phase bitmaps the runtime allocates come from.
    memory: Arc<dyn DeviceMemory>,
    services: Arc<Services>,
    config: ListenerConfig,
    /// The running listener, `Some` exactly while this runtime has enabled buffers. Also the
    /// lock that serialises this runtime's enables and disables (taken before the registry's).
    /// The read-only methods never take it: a disable holds it while it waits for a poll, and
    /// that poll's service may be asking how many buffers there are.
    listener: Mutex<Option<Listener>>,
    /// Buffers enabled on this runtime, written under `listener`'s lock.
    enabled: AtomicUsize,
}

static NEXT_RUNTIME_ID: AtomicU64 = AtomicU64::new(1);

impl Default for HostcallRuntime {
    fn default() -> Self {
        Self::new()
    }
}

impl HostcallRuntime {
    /// A runtime with a [`ParkingDoorbell`], host memory and [`HostcallRuntime::default_config`].
    pub fn new() -> Self {
        Self::with_config(Arc::new(ParkingDoorbell::new()), Self::default_config())
    }

    /// A runtime whose listeners sleep on `doorbell` and run with `config`; host memory.
    pub fn with_config(doorbell: Arc<dyn Doorbell>, config: ListenerConfig) -> Self {
        Self::with_device_memory(Arc::new(HostMemory), doorbell, config)
    }

    /// A runtime on a detected backend ([`crate::detect`]): its device memory (for DEVMEM and the
    /// phase bitmaps: the GPU's own memory on HSA) and its doorbell (one signal per listener).
    pub fn with_backend(backend: &Backend, config: ListenerConfig) -> Self {
        Self::with_device_memory(backend.device_memory.clone(), backend.doorbell.clone(), config)
    }

    /// A runtime whose DEVMEM blocks and phase bitmaps come from `memory`, whose listeners sleep
    /// on `doorbell` and run with `config`.
    pub fn with_device_memory(
        memory: Arc<dyn DeviceMemory>,
        doorbell: Arc<dyn Doorbell>,
        config: ListenerConfig,
    ) -> Self {
        Self {
            // Relaxed: only uniqueness matters.
            id: NEXT_RUNTIME_ID.fetch_add(1, Ordering::Relaxed),
            doorbell,
            services: Arc::new(builtin_services(&memory)),
            memory,
            config,
            listener: Mutex::new(None),
            enabled: AtomicUsize::new(0),
        }
    }

    /// The listener configuration of [`HostcallRuntime::new`]: the default one, without a
    /// shutdown grace period (a runtime stops its listener only once it serves no buffer, so
    /// there is nothing left to answer).
    pub fn default_config() -> ListenerConfig {
        ListenerConfig {
            shutdown_grace: Duration::ZERO,
            thread_name: "hostcall-runtime".into(),
            ..ListenerConfig::default()
        }
    }

    /// The process-wide default runtime (the one [`crate::enable`] and the C ABI use), created on
    /// first use on the detected backend ([`crate::detect`]), as ROCm's runtime does: where HSA
    /// has a GPU, one HSA signal for its listener and DEVMEM blocks and phase bitmaps in the GPU's
    /// own memory; elsewhere host memory and a host doorbell (an `amd_signal_t` all the same).
    /// It is never dropped: at exit its listener thread (if buffers are still enabled) is simply
    /// ended with the process, and no exit handler waits for it or frees anything it uses.
    pub fn global() -> &'static HostcallRuntime {
        static GLOBAL: OnceLock<HostcallRuntime> = OnceLock::new();
        GLOBAL.get_or_init(|| HostcallRuntime::with_backend(&crate::detect(), Self::default_config()))
    }

    /// The services this runtime's listeners dispatch to.
    pub fn services(&self) -> &Services {
        &self.services
    }

    /// Registers FUNCTION_CALL (id 1) on this runtime: see [`Services::enable_function_calls`].
    /// [`Error::ServiceTaken`] if id 1 is registered already (by an earlier call, or by you).
    ///
    /// # Safety
    /// As [`Services::enable_function_calls`]: the listener will call whatever address a device
    /// sends, so every device that can reach a buffer of this runtime must be trusted to send
    /// only addresses of functions `extern "C" fn(*mut [u64; 2], *const [u64; 7])` that stay
    /// valid while the runtime lives.
    pub unsafe fn enable_function_calls(&self) -> Result<(), Error> {
        // SAFETY: forwarded from this function's contract.
        unsafe { self.services.enable_function_calls() }
    }

    /// The device memory DEVMEM allocates from, and the phase bitmaps the runtime allocates.
    pub fn device_memory(&self) -> &Arc<dyn DeviceMemory> {
        &self.memory
    }

    /// The doorbell whose handle [`HostcallRuntime::enable`] writes into each buffer.
    pub fn doorbell(&self) -> &Arc<dyn Doorbell> {
        &self.doorbell
    }

    /// Whether a listener thread is running (this runtime has enabled buffers). Never waits for
    /// an enable or disable in progress (a service may call it).
    pub fn is_running(&self) -> bool {
        self.buffer_count() > 0
    }

    /// Number of buffers enabled on this runtime. Never waits for an enable or disable in
    /// progress (a service may call it).
    pub fn buffer_count(&self) -> usize {
        // Relaxed: a count, written under the `listener` lock; a caller that enabled or disabled
        // on this thread sees its own write, others a value from some recent moment.
        self.enabled.load(Ordering::Relaxed)
    }

    /// ROCm's `enableHostcalls`: [`HostcallRuntime::enable_with`] with the default
    /// [`EnableOptions`] (the stack protocol, device 0). The buffer's size is implied:
    /// [`super::buffer_size`]`(num_packets)`.
    ///
    /// # Safety
    /// As [`HostcallRuntime::enable_with`].
    pub unsafe fn enable(&self, buffer: *mut u8, num_packets: u32, queue: QueueId) -> Result<(), Error> {
        // SAFETY: forwarded from this function's contract.
        unsafe { self.enable_with(buffer, num_packets, queue, EnableOptions::default()) }
    }

    /// Initialises the buffer at `buffer` for `num_packets` packets of `options.protocol`
    /// (writing the doorbell's handle, and for the phase protocol the `occupied` bitmap's
    /// address, into it), starts the listener if it is not running, and serves the buffer on it.
    /// The buffer's size is implied: [`super::buffer_size_for`]`(options.protocol, num_packets)`;
    /// its alignment must be [`super::buffer_align_for`]`(options.protocol)`. For the phase
    /// protocol without a bitmap passed in, one is allocated through [`HostcallRuntime::device_memory`]
    /// and freed at disable.
    ///
    /// Refused with an error, leaving everything as it was: a null or misaligned `buffer`, a bad
    /// packet count, a buffer already enabled (here, for any queue, or on another runtime), one
    /// overlapping an enabled buffer, a queue that already has a buffer, a call from a listener
    /// thread; a bitmap given for the stack protocol ([`Error::Unsupported`]), a misaligned one,
    /// one overlapping the buffer or an enabled buffer; no memory for the bitmap.
    ///
    /// ```
    /// use hostcall::lifecycle::{buffer_size_for, EmulatedWave, EnableOptions, HostcallRuntime, QueueId};
    /// use hostcall::Protocol;
    /// let runtime = HostcallRuntime::new();
    /// runtime.services().register_lane(100, "add", |r| Ok([r[0] + r[1], 0])).unwrap();
    ///
    /// // A phase buffer (64-aligned) and its bitmap: ceil(4 / 32) = 1 zeroed word.
    /// #[repr(align(64))]
    /// struct Line([u8; 64]);
    /// let lines = buffer_size_for(Protocol::Phase, 4).unwrap() / 64;
    /// let mut memory: Vec<Line> = (0..lines).map(|_| Line([0; 64])).collect();
    /// let buffer = memory.as_mut_ptr().cast::<u8>();
    /// let mut occupied = [0u32; 1];
    /// let options = EnableOptions::default()
    ///     .with_protocol(Protocol::Phase)
    ///     .with_occupied(std::ptr::NonNull::new(occupied.as_mut_ptr()))
    ///     .with_device_ordinal(1);
    /// // SAFETY: `memory` and `occupied` outlive the enablement; only the protocol touches them.
    /// unsafe { runtime.enable_with(buffer, 4, QueueId(7), options) }.unwrap();
    /// assert_eq!(hostcall::lifecycle::device_ordinal(buffer), Some(1));
    ///
    /// // SAFETY: the buffer stays enabled while the wave is used.
    /// let wave = unsafe { EmulatedWave::new(buffer, 4, 0b1) }.unwrap();
    /// assert_eq!(wave.call(100, |_| [40, 2, 0, 0, 0, 0, 0, 0]).unwrap().lane(0), [42, 0]);
    /// runtime.disable(buffer, QueueId(7)).unwrap();
    /// # drop(memory);
    /// ```
    ///
    /// # Safety
    /// - `buffer` must point to `buffer_size_for(options.protocol, num_packets)` bytes valid for
    ///   reads and writes;
    /// - from now until [`HostcallRuntime::disable`] for it returns (or until the process ends, if
    ///   it is never disabled), that memory must stay valid and be accessed only atomically (by
    ///   this listener and by device code or emulated waves), never freed or reused;
    /// - the same for `options.occupied`, if given: `ceil(num_packets / 32)` `u32`s, zeroed,
    ///   touched only by device code (and emulated waves) until the disable returns.
    pub unsafe fn enable_with(
        &self,
        buffer: *mut u8,
        num_packets: u32,
        queue: QueueId,
        options: EnableOptions,
    ) -> Result<(), Error> {
        registry::refuse_listener_thread()?;
        let len = checked_len(buffer, num_packets, options.protocol)?;
        let base = buffer as usize;
        let mut listener = self.lock_listener();
        let bitmap = Bitmap::for_options(&options, base, len, num_packets, &self.memory)?;
        let occupied = bitmap.device_address();
        let entry = Enabled {
            len,
            num_packets,
            queue,
            runtime: self.id,
            doorbell: self.doorbell.clone(),
            ready: false,
            protocol: options.protocol,
            bitmap,
            device_ordinal: options.device_ordinal,
        };
        registry::lock().reserve(base, entry)?;
        let layout = Layout {
            buffer,
            len,
            num_packets,
            protocol: options.protocol,
            occupied,
            device: options.device_ordinal,
            rpc: RpcOptions::default().with_policy(options.rpc_policy).with_limits(options.rpc_limits),
        };
        // SAFETY: forwarded from this function's contract; `checked_len` checked the address.
        match unsafe { self.serve(&mut listener, layout) } {
            Ok(()) => {
                registry::lock().mark_ready(base);
                // Relaxed: see `buffer_count`.
                self.enabled.fetch_add(1, Ordering::Relaxed);
                Ok(())
            }
            Err(e) => {
                let entry = registry::lock().remove(base);
                drop(entry); // frees an owned bitmap, outside the registry's lock
                self.stop_if_idle(&mut listener);
                Err(e)
            }
        }
    }

    /// ROCm's `disableHostcalls`: stops serving the buffer. When this returns the listener no
    /// longer touches it: the memory may be reused or freed. After the last buffer, the listener
    /// stops and its thread is joined.
    ///
    /// Refused with an error: a null `buffer`, one not enabled (never, or already disabled),
    /// enabled on another runtime or for another queue, a call from a listener thread.
    pub fn disable(&self, buffer: *mut u8, queue: QueueId) -> Result<(), Error> {
        registry::refuse_listener_thread()?;
        if buffer.is_null() {
            return Err(Error::Layout(hostcall_core::LayoutError::Null));
        }
        let base = buffer as usize;
        let mut listener = self.lock_listener();
        registry::lock().check_disable(base, queue, self.id)?;
        if let Some(running) = listener.as_ref() {
            // Waits for a poll in progress: afterwards the listener never touches the buffer.
            running.remove_raw(buffer)?;
        }
        let entry = registry::lock().remove(base);
        drop(entry); // frees an owned bitmap, outside the registry's lock
                     // Relaxed: see `buffer_count`.
        self.enabled.fetch_sub(1, Ordering::Relaxed);
        self.stop_if_idle(&mut listener);
        Ok(())
    }

    /// Starts the listener if needed, initialises the buffer and adds it to the listener.
    ///
    /// # Safety
    /// As [`HostcallRuntime::enable_with`], with `layout.len` the protocol's buffer size for
    /// `layout.num_packets` and `layout.buffer` non-null and aligned for the protocol.
    unsafe fn serve(&self, listener: &mut Option<Listener>, layout: Layout) -> Result<(), Error> {
        let Layout { buffer, len, num_packets, protocol, occupied, device, rpc } = layout;
        let n = u64::from(num_packets);
        let running = match listener {
            Some(running) => running,
            None => listener.insert(self.start_listener()?),
        };
        // SAFETY (every arm): the caller's contract: `len` valid bytes, accessed only atomically.
        // No wave can use the buffer yet (it is enabled only once this returns), so initialising
        // is safe.
        match protocol {
            Protocol::Stack => {
                let view = unsafe { stack::View::from_raw(buffer, len, n) }?;
                view.init(buffer as u64, self.doorbell.handle());
            }
            Protocol::Phase => {
                let view = unsafe { phase::View::from_raw(buffer, len, n) }?;
                view.init(buffer as u64, self.doorbell.handle());
                view.set_occupied_address(occupied);
            }
            Protocol::Line => return Err(super::options::line_unsupported()),
            Protocol::Rpc { lanes } => {
                let view = unsafe { hostcall_core::rpc::View::from_raw(buffer, len, n, u64::from(lanes)) }?;
                view.init();
            }
        }
        let options = BufferOptions::default().with_rpc(rpc);
        // SAFETY: the caller's contract keeps the memory valid until `disable` removes it.
        unsafe { running.add_raw_protocol(protocol, buffer, len, n, device, &options) }
    }

    fn start_listener(&self) -> Result<Listener, Error> {
        let listener =
            Listener::start_with_services(self.doorbell.clone(), self.config.clone(), self.services.clone())?;
        if let Some(id) = listener.thread_id() {
            registry::add_listener_thread(id);
        }
        Ok(listener)
    }

    fn stop_if_idle(&self, listener: &mut Option<Listener>) {
        if listener.as_ref().is_some_and(|l| l.buffer_count() == 0) {
            if let Some(stopping) = listener.take() {
                stop(stopping);
            }
        }
    }

    fn lock_listener(&self) -> MutexGuard<'_, Option<Listener>> {
        // A panic while held leaves `Option<Listener>` whole; go on.
        self.listener.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// Where a buffer being enabled is, and how to initialise it.
struct Layout {
    buffer: *mut u8,
    len: usize,
    num_packets: u32,
    protocol: Protocol,
    /// A phase buffer's bitmap address for its prefix.
    occupied: u64,
    /// The device ordinal its packets report to services.
    device: u32,
    /// How an LLVM-RPC buffer is served.
    rpc: RpcOptions,
}

/// The services every runtime starts with: PRINTF to the process's streams, DEVMEM from `memory`,
/// SANITIZER reporting as [`SanitizerConfig::default`] says (through the process's ASan runtime
/// where it has one, else to stderr; an aborting report stops the process).
fn builtin_services(memory: &Arc<dyn DeviceMemory>) -> Services {
    let services = Services::new();
    services.enable_printf(StdStreams, MessageLimits::default()).expect("a new registry has no PRINTF");
    services.enable_devmem(memory.clone(), DevMemLimits::default()).expect("a new registry has no DEVMEM");
    services.enable_sanitizer(SanitizerConfig::default()).expect("a new registry has no SANITIZER");
    services
}

/// Shuts a listener down and joins its thread.
fn stop(listener: Listener) {
    if let Some(id) = listener.thread_id() {
        registry::remove_listener_thread(id);
    }
    listener.shutdown();
}

impl Drop for HostcallRuntime {
    /// Stops the listener (joining its thread) and forgets every buffer still enabled on this
    /// runtime: their memory is no longer touched and their addresses may be enabled again.
    /// (Do not drop a runtime from one of its own services: its listener thread cannot join
    /// itself.)
    fn drop(&mut self) {
        if let Some(running) = self.lock_listener().take() {
            stop(running);
        }
        // Relaxed: see `buffer_count`.
        self.enabled.store(0, Ordering::Relaxed);
        let entries = registry::lock().remove_runtime(self.id);
        drop(entries); // frees owned bitmaps, outside the registry's lock
    }
}

impl std::fmt::Debug for HostcallRuntime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HostcallRuntime")
            .field("id", &self.id)
            .field("buffers", &self.buffer_count())
            .finish()
    }
}
