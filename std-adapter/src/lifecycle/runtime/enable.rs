//! Enabling and disabling buffers on a [`HostcallRuntime`]: ROCm's `enableHostcalls` and
//! `disableHostcalls`, the checks that refuse misuse, and the initialisation of each protocol's
//! buffer before the listener serves it.

use super::HostcallRuntime;
use crate::error::Error;
use crate::lifecycle::options::{self, Bitmap, EnableOptions};
use crate::lifecycle::registry::{self, Enabled};
use crate::lifecycle::{checked_len, Protocol, QueueId};
use crate::services::rpc::RpcOptions;
use crate::threads::listener::{BufferRegistration, Listener};
use hostcall_core::{phase, stack};
use std::sync::atomic::Ordering;

impl HostcallRuntime {
    /// ROCm's `enableHostcalls`: [`HostcallRuntime::enable_with`] with the default
    /// [`EnableOptions`] (the stack protocol, device 0). The buffer's size is implied:
    /// [`crate::lifecycle::buffer_size`]`(num_packets)`.
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
    /// The buffer's size is implied: [`crate::lifecycle::buffer_size_for`]`(options.protocol, num_packets)`;
    /// its alignment must be [`crate::lifecycle::buffer_align_for`]`(options.protocol)`. For the phase
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
    /// use hostcall::{buffer_size_for, EmulatedWave, EnableOptions, HostcallRuntime, QueueId};
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
    /// assert_eq!(hostcall::device_ordinal(buffer), Some(1));
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
                drop(listener); // logs after the runtime's lock: a logger may call back in
                log::debug!(
                    "enabled buffer {base:#x} for queue {:#x} ({:?}, {num_packets} packets, device {})",
                    queue.0,
                    options.protocol,
                    options.device_ordinal
                );
                Ok(())
            }
            Err(e) => {
                let entry = registry::lock().remove(base);
                drop(entry); // frees an owned bitmap, outside the registry's lock
                self.stop_if_idle(&mut listener);
                drop(listener);
                log::debug!("enable of buffer {base:#x} refused: {e}");
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
        drop(listener); // logs after the runtime's lock: a logger may call back in
        log::debug!("disabled buffer {base:#x} (queue {:#x})", queue.0);
        Ok(())
    }

    /// Starts the listener if needed, initialises the buffer and adds it to the listener.
    ///
    /// # Safety
    /// As [`HostcallRuntime::enable_with`], with `layout.len` the protocol's buffer size for
    /// `layout.num_packets` and `layout.buffer` non-null and aligned for the protocol.
    unsafe fn serve(&self, listener: &mut Option<Listener>, layout: Layout) -> Result<(), Error> {
        let Layout { buffer, len, num_packets, protocol, occupied, device, rpc } = layout;
        let n = num_packets;
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
            Protocol::Line => return Err(options::line_unsupported()),
            Protocol::Rpc { lanes } => {
                let view = unsafe { hostcall_core::rpc::View::from_raw(buffer, len, n, lanes) }?;
                view.init();
            }
        }
        // SAFETY: the caller's contract keeps the memory valid until `disable` removes it, and
        // the memory was initialised for `protocol` just above.
        let registration = unsafe { BufferRegistration::raw(protocol, buffer, len, u64::from(n)) };
        running.add(registration.on_device(device).with_rpc(rpc))
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
