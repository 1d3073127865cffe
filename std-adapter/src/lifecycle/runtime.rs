//! [`HostcallRuntime`]: a listener that starts with the first enabled buffer and stops (its
//! thread joined) after the last one is disabled.

use super::registry::{self, Enabled};
use super::{checked_len, QueueId};
use crate::doorbell::{Doorbell, ParkingDoorbell};
use crate::error::Error;
use crate::serve::listener::{Listener, ListenerConfig};
use crate::serve::registry::Services;
use crate::services::sanitizer::SanitizerConfig;
use hostcall_core::stack;
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
/// Built in from the start: SANITIZER (id 4, [`crate::services::sanitizer`]), as in ROCm's
/// runtime. To serve it differently, unregister it first (`runtime.services().unregister(4)`) and
/// register your own (e.g. [`Services::enable_sanitizer`] with another configuration).
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
    /// A runtime with a [`ParkingDoorbell`] and [`HostcallRuntime::default_config`].
    pub fn new() -> Self {
        Self::with_config(Arc::new(ParkingDoorbell::new()), Self::default_config())
    }

    /// A runtime whose listeners sleep on `doorbell` and run with `config`.
    pub fn with_config(doorbell: Arc<dyn Doorbell>, config: ListenerConfig) -> Self {
        Self {
            // Relaxed: only uniqueness matters.
            id: NEXT_RUNTIME_ID.fetch_add(1, Ordering::Relaxed),
            doorbell,
            services: Arc::new(builtin_services()),
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

    /// The process-wide default runtime, created on first use. It is never dropped: at exit its
    /// listener thread (if buffers are still enabled) is simply ended with the process, and no
    /// exit handler waits for it or frees anything it uses.
    pub fn global() -> &'static HostcallRuntime {
        static GLOBAL: OnceLock<HostcallRuntime> = OnceLock::new();
        GLOBAL.get_or_init(HostcallRuntime::new)
    }

    /// The services this runtime's listeners dispatch to.
    pub fn services(&self) -> &Services {
        &self.services
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

    /// ROCm's `enableHostcalls`: initialises the buffer at `buffer` for `num_packets` packets
    /// (writing the doorbell's handle into it), starts the listener if it is not running, and
    /// serves the buffer on it. The buffer's size is implied: [`super::buffer_size`]`(num_packets)`.
    ///
    /// Refused with an error, leaving everything as it was: a null or misaligned `buffer`, a bad
    /// packet count, a buffer already enabled (here, for any queue, or on another runtime), one
    /// overlapping an enabled buffer, a queue that already has a buffer, a call from a listener
    /// thread.
    ///
    /// # Safety
    /// - `buffer` must point to `buffer_size(num_packets)` bytes valid for reads and writes;
    /// - from now until [`HostcallRuntime::disable`] for it returns (or until the process ends, if
    ///   it is never disabled), that memory must stay valid and be accessed only atomically (by
    ///   this listener and by device code or emulated waves), never freed or reused.
    pub unsafe fn enable(&self, buffer: *mut u8, num_packets: u32, queue: QueueId) -> Result<(), Error> {
        registry::refuse_listener_thread()?;
        let len = checked_len(buffer, num_packets)?;
        let base = buffer as usize;
        let mut listener = self.lock_listener();
        let entry = Enabled {
            len,
            num_packets,
            queue,
            runtime: self.id,
            doorbell: self.doorbell.clone(),
            ready: false,
        };
        registry::lock().reserve(base, entry)?;
        // SAFETY: forwarded from this function's contract; `checked_len` checked the address.
        match unsafe { self.serve(&mut listener, buffer, len, num_packets) } {
            Ok(()) => {
                registry::lock().mark_ready(base);
                // Relaxed: see `buffer_count`.
                self.enabled.fetch_add(1, Ordering::Relaxed);
                Ok(())
            }
            Err(e) => {
                registry::lock().remove(base);
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
        registry::lock().remove(base);
        // Relaxed: see `buffer_count`.
        self.enabled.fetch_sub(1, Ordering::Relaxed);
        self.stop_if_idle(&mut listener);
        Ok(())
    }

    /// Starts the listener if needed, initialises the buffer and adds it to the listener.
    ///
    /// # Safety
    /// As [`HostcallRuntime::enable`], with `len == buffer_size(num_packets)` and `buffer`
    /// non-null and aligned.
    unsafe fn serve(
        &self,
        listener: &mut Option<Listener>,
        buffer: *mut u8,
        len: usize,
        num_packets: u32,
    ) -> Result<(), Error> {
        let running = match listener {
            Some(running) => running,
            None => listener.insert(self.start_listener()?),
        };
        // SAFETY: the caller's contract: `len` valid bytes, accessed only atomically. No wave can
        // use the buffer yet (it is enabled only once this returns), so initialising is safe.
        let view = unsafe { stack::View::from_raw(buffer, len, u64::from(num_packets)) }?;
        view.init(buffer as u64, self.doorbell.handle());
        // SAFETY: the caller's contract keeps the memory valid until `disable` removes it.
        unsafe { running.add_raw(buffer, len, u64::from(num_packets)) }
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

/// The services every runtime starts with: SANITIZER (id 4), reporting as
/// [`SanitizerConfig::default`] says (through the process's ASan runtime where it has one, else to
/// stderr; an aborting report stops the process).
fn builtin_services() -> Services {
    let services = Services::new();
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
        registry::lock().remove_runtime(self.id);
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
