//! [`HostcallRuntime`]: a listener that starts with the first enabled buffer and stops (its
//! thread joined) after the last one is disabled.

use super::registry;
use crate::backend::host::{HostMemory, ParkingDoorbell};
use crate::backend::{Backend, BackendKind, MemoryChoice};
use crate::dispatch::registry::Services;
use crate::doorbell::Doorbell;
use crate::error::Error;
use crate::memory::DeviceMemory;
use crate::services::devmem::DevMemLimits;
use crate::services::message::MessageLimits;
use crate::services::printf::StdStreams;
use crate::services::sanitizer::SanitizerConfig;
use crate::threads::listener::{Listener, ListenerConfig, LiveWait, WaitPolicy};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::time::Duration;

mod enable;

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
/// use hostcall::{buffer_size, EmulatedWave, HostcallRuntime, QueueId};
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
    /// The wait policy of every listener this runtime starts, and of the running one
    /// ([`HostcallRuntime::set_wait_policy`]); `config.wait` at first.
    wait: Arc<LiveWait>,
    /// The running listener, `Some` exactly while this runtime has enabled buffers. Also the
    /// lock that serialises this runtime's enables and disables (taken before the registry's).
    /// The read-only methods never take it: a disable holds it while it waits for a poll, and
    /// that poll's service may be asking how many buffers there are.
    listener: Mutex<Option<Listener>>,
    /// Buffers enabled on this runtime, written under `listener`'s lock.
    enabled: AtomicUsize,
    /// The backend it was made on ([`HostcallRuntime::with_backend`]), and why that one.
    backend: Option<(BackendKind, String)>,
}

static NEXT_RUNTIME_ID: AtomicU64 = AtomicU64::new(1);

/// The process-wide runtime ([`HostcallRuntime::global`]).
static GLOBAL: OnceLock<HostcallRuntime> = OnceLock::new();

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

    /// A runtime on a detected backend ([`crate::backend::detect`]): its device memory (for DEVMEM and the
    /// phase bitmaps: the GPU's own memory on HSA) and its doorbell (one signal per listener).
    pub fn with_backend(backend: &Backend, config: ListenerConfig) -> Self {
        let mut runtime =
            Self::with_device_memory(backend.device_memory.clone(), backend.doorbell.clone(), config);
        runtime.backend = Some((backend.kind, backend.reason.clone()));
        runtime
    }

    /// The kind of backend this runtime was made on and why it was chosen
    /// ([`HostcallRuntime::with_backend`]; `None` for a runtime given its memory directly).
    pub fn backend(&self) -> Option<(BackendKind, &str)> {
        self.backend.as_ref().map(|(kind, reason)| (*kind, reason.as_str()))
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
            wait: Arc::new(LiveWait::new(config.wait)),
            config,
            listener: Mutex::new(None),
            enabled: AtomicUsize::new(0),
            backend: None,
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
    /// first use on the memory [`HostcallRuntime::init_global`] chose, or else on the one the
    /// `HOSTCALL_MEMORY` environment variable names ([`MemoryChoice::from_env`]; unset: `auto`),
    /// as [`crate::backend::choose`] picks it: where HSA has a GPU, one HSA signal for its
    /// listener and DEVMEM blocks and phase bitmaps in the GPU's own memory, as ROCm's runtime
    /// does; where CUDA has a device (feature `cuda`), a mapped doorbell and stream-ordered device
    /// memory; elsewhere host memory and a host doorbell (an `amd_signal_t` all the same). A
    /// choice that does not fit here (a bad `HOSTCALL_MEMORY`, or memory that is missing) is
    /// logged as an error and host memory used: call [`HostcallRuntime::init_global`] first to
    /// have it refused instead. It is never dropped: at exit its listener thread (if buffers are
    /// still enabled) is simply ended with the process, and no exit handler waits for it or frees
    /// anything it uses.
    pub fn global() -> &'static HostcallRuntime {
        GLOBAL.get_or_init(|| {
            let backend = MemoryChoice::from_env().and_then(crate::backend::choose).unwrap_or_else(|e| {
                log::error!("hostcall: {e}; the process-wide runtime uses host memory");
                Backend::host(format!("{e}; using host memory"), None)
            });
            HostcallRuntime::with_backend(&backend, Self::default_config())
        })
    }

    /// The process-wide runtime if it has been created ([`HostcallRuntime::global`],
    /// [`HostcallRuntime::init_global`]); never creates it.
    pub fn global_if_created() -> Option<&'static HostcallRuntime> {
        GLOBAL.get()
    }

    /// Creates the process-wide runtime on the memory `choice` picks, or says why it cannot:
    /// [`Error::Unsupported`] for memory that does not fit here (no `cuda` feature, no device),
    /// or for a runtime already created on another kind of memory (choose before the first
    /// enable). With the runtime already there, `Auto` and its own kind succeed.
    ///
    /// ```
    /// use hostcall::backend::MemoryChoice;
    /// use hostcall::HostcallRuntime;
    /// let runtime = HostcallRuntime::init_global(MemoryChoice::Auto).unwrap();
    /// let (kind, reason) = runtime.backend().unwrap();
    /// println!("serving with {kind} memory: {reason}");
    /// ```
    pub fn init_global(choice: MemoryChoice) -> Result<&'static HostcallRuntime, Error> {
        static CHOOSING: Mutex<()> = Mutex::new(());
        if GLOBAL.get().is_none() {
            log::debug!("probing the memory of the process-wide runtime ({choice})");
        }
        let _one_at_a_time = CHOOSING.lock().unwrap_or_else(|p| p.into_inner());
        if GLOBAL.get().is_none() {
            let backend = crate::backend::choose(choice)?;
            // Under CHOOSING, and nothing else sets GLOBAL but `global`'s first use: if that won
            // the race, the check below judges its runtime.
            let _ = GLOBAL.set(HostcallRuntime::with_backend(&backend, Self::default_config()));
        }
        let runtime = GLOBAL.get().expect("set above");
        let (kind, reason) = runtime.backend().expect("the global runtime is made on a backend");
        let fits = match choice {
            MemoryChoice::Auto => true,
            MemoryChoice::Host => kind == BackendKind::Host,
            MemoryChoice::Hsa => kind == BackendKind::Hsa,
            MemoryChoice::Cuda => kind == BackendKind::Cuda,
        };
        if !fits {
            return Err(Error::Unsupported(format!(
                "{choice} memory was asked for, but the process-wide runtime already uses {kind} memory \
                 ({reason}): choose the memory before the first enable"
            )));
        }
        Ok(runtime)
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

    /// The wait policy of this runtime's listener (see [`WaitPolicy`]).
    pub fn wait_policy(&self) -> WaitPolicy {
        self.wait.get()
    }

    /// Sets the wait policy of this runtime's listener: the running one takes it before its next
    /// nap (woken by a ring to do so at once), and every listener started later runs with it.
    /// Never waits for an enable or disable in progress (a service may call it).
    ///
    /// ```
    /// use hostcall::{HostcallRuntime, WaitPolicy};
    /// let runtime = HostcallRuntime::new();
    /// runtime.set_wait_policy(WaitPolicy::power_saving());
    /// assert_eq!(runtime.wait_policy(), WaitPolicy::power_saving());
    /// ```
    pub fn set_wait_policy(&self, policy: WaitPolicy) {
        self.wait.set(policy);
        // A listener asleep on the doorbell takes the new policy when it wakes: wake it now (a
        // runtime without a listener only moves the doorbell's value, which nobody waits for).
        self.doorbell.ring();
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

    fn start_listener(&self) -> Result<Listener, Error> {
        let listener = Listener::start_live(
            self.doorbell.clone(),
            self.config.clone(),
            self.services.clone(),
            self.wait.clone(),
        )?;
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

/// The services every runtime starts with: PRINTF to the process's streams, DEVMEM from `memory`,
/// SANITIZER reporting as [`SanitizerConfig::default`] says (through the process's ASan runtime
/// where it has one, else to stderr; an aborting report stops the process only where
/// [`crate::services::ending`] allows it).
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
