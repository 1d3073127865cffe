//! [`DeviceListeners`]: one process serving the buffers of several devices (GPUs), a group of
//! listener threads per device, one service registry for all.
//!
//! Why a group per device rather than one pool over every buffer:
//!
//! - placement: a device's requests arrive in host memory near it (its NUMA node), so its
//!   threads run on that node's cores ([`DeviceGroup::cpus`]); a thread serving two GPUs on two
//!   nodes would read one of them across the socket link;
//! - isolation: a loaded GPU takes its own threads' time, not the threads of a GPU making one
//!   latency-bound call (each thread's poll walks only its own device's buffers);
//! - doorbells: each device rings its own ([`DeviceGroup::doorbell`], in memory mapped for it),
//!   so a sleeping group is woken by its own device only, and two GPUs never store to one line.
//!
//! Buffers go to the group of their [`device_ordinal`](HostcallBuffer::device_ordinal), split into
//! stripes over the group's threads as in [`ListenerPool`].

use crate::buffer::HostcallBuffer;
use crate::dispatch::registry::Services;
use crate::doorbell::Doorbell;
use crate::error::Error;
use crate::observe::Stats;
use crate::threads::listener::{BufferRegistration, ListenerConfig};
use crate::threads::pool::ListenerPool;
use hostcall_core::PollerError;
use std::sync::Arc;

/// What a device's listener group needs: the device's ordinal, the doorbell its buffers ring,
/// and the CPUs its threads run on (empty: not pinned).
#[derive(Clone, Debug)]
pub struct DeviceGroup {
    /// The ordinal its buffers report ([`HostcallBuffer::with_device_ordinal`]).
    pub ordinal: u32,
    /// The doorbell the device's buffers ring, and the group sleeps on.
    pub doorbell: Arc<dyn Doorbell>,
    /// The CPUs near the device, for its threads (one each while there are enough).
    pub cpus: Vec<usize>,
}

/// A [`ListenerPool`] per device, sharing one [`Services`] registry.
///
/// ```
/// use hostcall::prelude::*;
/// use hostcall::{HostMemory, HostcallBuffer, ListenerConfig, ParkingDoorbell, Protocol, Services, Wave};
/// use hostcall::{DeviceGroup, DeviceListeners};
/// use std::sync::Arc;
///
/// let groups: Vec<DeviceGroup> = (0..2)
///     .map(|ordinal| DeviceGroup { ordinal, doorbell: Arc::new(ParkingDoorbell::new()), cpus: vec![] })
///     .collect();
/// let listeners = DeviceListeners::start(&groups, 2, ListenerConfig::default(), Arc::new(Services::new())).unwrap();
/// listeners.services().register_lane(100, "add", |r| Ok([r[0] + r[1], 0])).unwrap();
/// for group in &groups {
///     let buffer = HostcallBuffer::with_protocol(Arc::new(HostMemory), 64, group.doorbell.clone(), Protocol::Phase);
///     let buffer = Arc::new(buffer.unwrap().with_device_ordinal(group.ordinal));
///     listeners.add(buffer.clone()).unwrap(); // served by this device's two threads
///     let reply = Wave::new(buffer.clone(), 4).call(100, |lane| [lane as u64, 40, 0, 0, 0, 0, 0, 0]).unwrap();
///     assert_eq!(reply.lane(3), [43, 0]);
///     listeners.remove_buffer(&buffer).unwrap();
/// }
/// assert_eq!(listeners.threads(), 4);
/// listeners.shutdown();
/// ```
pub struct DeviceListeners {
    /// (ordinal, its pool), in the order of the groups given.
    pools: Vec<(u32, ListenerPool)>,
    services: Arc<Services>,
}

impl DeviceListeners {
    /// Starts `threads_per_device` (at least 1) threads for each group, named
    /// `config.thread_name` with `-gpu<ordinal>-<k>` appended, on the group's CPUs. Ordinals must
    /// be distinct.
    pub fn start(
        groups: &[DeviceGroup],
        threads_per_device: usize,
        config: ListenerConfig,
        services: Arc<Services>,
    ) -> Result<Self, Error> {
        let mut pools: Vec<(u32, ListenerPool)> = Vec::with_capacity(groups.len());
        for group in groups {
            if pools.iter().any(|(ordinal, _)| *ordinal == group.ordinal) {
                return Err(Error::Unsupported(format!("device {} is given twice", group.ordinal)));
            }
            let config = ListenerConfig {
                thread_name: format!("{}-gpu{}", config.thread_name, group.ordinal),
                cpus: group.cpus.clone(),
                ..config.clone()
            };
            let pool = ListenerPool::start_with_services(
                threads_per_device,
                group.doorbell.clone(),
                config,
                services.clone(),
            )?;
            pools.push((group.ordinal, pool));
        }
        Ok(Self { pools, services })
    }

    /// The shared registry.
    pub fn services(&self) -> &Services {
        &self.services
    }

    /// The pool serving device `ordinal`.
    pub fn pool(&self, ordinal: u32) -> Option<&ListenerPool> {
        self.pools.iter().find(|(o, _)| *o == ordinal).map(|(_, pool)| pool)
    }

    /// Threads of every group together.
    pub fn threads(&self) -> usize {
        self.pools.iter().map(|(_, pool)| pool.threads()).sum()
    }

    fn pool_of(&self, ordinal: u32) -> Result<&ListenerPool, Error> {
        self.pool(ordinal)
            .ok_or_else(|| Error::Unsupported(format!("no listener group for device {ordinal}")))
    }

    /// Starts serving what `registration` says on the group of its device (a buffer's
    /// [`device_ordinal`](HostcallBuffer::device_ordinal), raw memory's
    /// [`on_device`](BufferRegistration::on_device)), as [`ListenerPool::add`] does. Refused with
    /// [`Error::Unsupported`] when no group serves that device.
    pub fn add(&self, registration: impl Into<BufferRegistration>) -> Result<(), Error> {
        let registration = registration.into();
        self.pool_of(registration.device()?)?.add(registration)
    }

    /// Stops serving `buffer`. When this returns no thread touches it.
    pub fn remove_buffer(&self, buffer: &HostcallBuffer) -> Result<(), Error> {
        self.pool_of(buffer.device_ordinal())?.remove_buffer(buffer)
    }

    /// Stops serving memory added with a [`BufferRegistration::raw`], in whichever group serves
    /// it. When this returns no thread touches it.
    pub fn remove_raw(&self, base: *mut u8) -> Result<(), Error> {
        for (_, pool) in &self.pools {
            match pool.remove_raw(base) {
                Err(Error::Poller(PollerError::NotRegistered { .. })) => {}
                done => return done,
            }
        }
        Err(Error::Poller(PollerError::NotRegistered { base: base as usize }))
    }

    /// The counters so far (every group: they share the registry).
    pub fn stats(&self) -> Stats {
        self.services.stats()
    }

    /// Stops every thread of every group (each answers what is in flight first). Idempotent.
    pub fn shutdown(&self) -> Stats {
        for (_, pool) in &self.pools {
            pool.shutdown();
        }
        self.stats()
    }
}

impl std::fmt::Debug for DeviceListeners {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let groups: Vec<(u32, usize)> = self.pools.iter().map(|(o, p)| (*o, p.threads())).collect();
        f.debug_struct("DeviceListeners").field("groups", &groups).finish()
    }
}
