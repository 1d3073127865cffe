//! Several devices, one process: [`DeviceListeners`] routes each buffer to its device's group,
//! refuses a buffer of a device it has no group for, and runs each group's threads on the CPUs
//! given.

use hostcall::prelude::*;
use hostcall::{allowed_cpus, Protocol};
use hostcall::{
    BufferRegistration, Error, HostMemory, HostcallBuffer, ListenerConfig, ParkingDoorbell, Services, Wave,
};
use hostcall::{DeviceGroup, DeviceListeners};
use hostcall_core::PacketRequest;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

const WHERE: u32 = 100;

/// Per device: the name and CPUs of the thread that served each packet.
type Seen = HashMap<u32, Vec<(String, Vec<usize>)>>;

/// Answers `[device ordinal, 0]` and records, per device, the serving threads' names and CPUs.
#[derive(Clone, Default)]
struct Where {
    seen: Arc<Mutex<Seen>>,
}

impl PacketService for Where {
    fn serve(&self, packet: &mut PacketRequest<'_>) {
        let name = std::thread::current().name().unwrap_or("?").to_owned();
        self.seen.lock().unwrap().entry(packet.device()).or_default().push((name, allowed_cpus()));
        let lanes: Vec<usize> = packet.lanes().collect();
        for lane in lanes {
            packet.reply(lane, [u64::from(packet.device()), 0]);
        }
    }
}

fn groups(cpus: &[Vec<usize>]) -> Vec<DeviceGroup> {
    cpus.iter()
        .enumerate()
        .map(|(i, cpus)| DeviceGroup {
            ordinal: 7 + i as u32,
            doorbell: Arc::new(ParkingDoorbell::new()),
            cpus: cpus.clone(),
        })
        .collect()
}

fn buffer(group: &DeviceGroup, ordinal: u32) -> Arc<HostcallBuffer> {
    let buffer =
        HostcallBuffer::with_protocol(Arc::new(HostMemory), 64, group.doorbell.clone(), Protocol::Phase);
    Arc::new(buffer.unwrap().with_device_ordinal(ordinal))
}

#[test]
fn each_device_is_served_by_its_own_group_on_its_cpus() {
    // Each group pinned to one CPU this process may use (the same one for both where there is
    // only one).
    let allowed = allowed_cpus();
    let pin = |i: usize| if allowed.is_empty() { vec![] } else { vec![allowed[i % allowed.len()]] };
    let groups = groups(&[pin(0), pin(1)]);
    let listeners =
        DeviceListeners::start(&groups, 2, ListenerConfig::default(), Arc::new(Services::new())).unwrap();
    let recorder = Where::default();
    listeners.services().register_packet(WHERE, "where", recorder.clone()).unwrap();
    for group in &groups {
        let buffer = buffer(group, group.ordinal);
        listeners.add(buffer.clone()).unwrap();
        for _ in 0..50 {
            let wave = Wave::new(buffer.clone(), 4);
            let reply = wave.call(WHERE, |_| [0; 8]).unwrap();
            assert_eq!(reply.lane(3), [u64::from(group.ordinal), 0]);
        }
        listeners.remove_buffer(&buffer).unwrap();
    }
    let seen = recorder.seen.lock().unwrap();
    for group in &groups {
        for (name, cpus) in &seen[&group.ordinal] {
            assert!(
                name.contains(&format!("-gpu{}-", group.ordinal)),
                "{name} served device {}",
                group.ordinal
            );
            if cfg!(target_os = "linux") && !group.cpus.is_empty() {
                assert_eq!(cpus, &group.cpus, "{name} runs on its group's CPUs");
            }
        }
    }
    assert_eq!(listeners.threads(), 4);
    listeners.shutdown();
}

#[test]
fn a_buffer_of_another_device_or_a_device_given_twice_is_refused() {
    let groups = groups(&[vec![], vec![]]);
    let listeners =
        DeviceListeners::start(&groups, 1, ListenerConfig::default(), Arc::new(Services::new())).unwrap();
    let stranger = buffer(&groups[0], 3);
    assert!(matches!(listeners.add(stranger.clone()), Err(Error::Unsupported(_))));
    assert!(matches!(listeners.remove_buffer(&stranger), Err(Error::Unsupported(_))));
    listeners.shutdown();
    let twice = [groups[0].clone(), groups[0].clone()];
    let refused = DeviceListeners::start(&twice, 1, ListenerConfig::default(), Arc::new(Services::new()));
    assert!(matches!(refused, Err(Error::Unsupported(_))));
}

/// Raw memory goes to the group of the device it is registered on, and its packets report that
/// ordinal; a `HostcallBuffer` registered on a device other than its own is refused.
#[test]
fn raw_memory_goes_to_the_group_of_its_device() {
    let groups = groups(&[vec![], vec![]]);
    let listeners =
        DeviceListeners::start(&groups, 1, ListenerConfig::default(), Arc::new(Services::new())).unwrap();
    listeners.services().register_packet(WHERE, "where", Where::default()).unwrap();
    let device = groups[1].ordinal;
    let buffer = buffer(&groups[1], device);
    let elsewhere = listeners.add(BufferRegistration::new(buffer.clone()).on_device(groups[0].ordinal));
    assert!(matches!(elsewhere, Err(Error::Unsupported(_))), "{elsewhere:?}");
    // SAFETY: `buffer` (initialised for the phase protocol, accessed only atomically) outlives
    // the listeners' use of its memory: removed below, before it is dropped.
    let raw = unsafe { BufferRegistration::raw(Protocol::Phase, buffer.as_ptr(), buffer.len(), 64) };
    listeners.add(raw.on_device(device)).unwrap();
    assert_eq!(listeners.pool(device).unwrap().listeners()[0].buffer_count(), 1);
    assert_eq!(listeners.pool(groups[0].ordinal).unwrap().listeners()[0].buffer_count(), 0);
    let reply = Wave::new(buffer.clone(), 4).call(WHERE, |_| [0; 8]).unwrap();
    assert_eq!(reply.lane(3), [u64::from(device), 0]);
    listeners.remove_raw(buffer.as_ptr()).unwrap();
    assert!(matches!(listeners.remove_raw(buffer.as_ptr()), Err(Error::Poller(_))), "removed twice");
    listeners.shutdown();
}
