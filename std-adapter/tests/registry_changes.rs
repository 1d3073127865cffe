//! The listener sees registry changes at the next packet, although each listener thread keeps its
//! own copy of the registry (`Services::dispatcher`): unregistering answers later calls with an error, registering
//! the id again serves them with the new handler, and alternating services are each served by
//! their own.

use hostcall::prelude::*;
use hostcall::{HostMemory, HostcallBuffer, Listener, ListenerConfig, ParkingDoorbell, Wave};
use hostcall_core::ErrorCode;
use std::sync::Arc;

const ID: u32 = 100;
const OTHER: u32 = 101;

fn call(wave: &Wave, service: u32, x: u64) -> [u64; 2] {
    wave.call(service, |_| [x, 0, 0, 0, 0, 0, 0, 0]).unwrap().lane(0)
}

#[test]
fn changes_take_effect_at_the_next_packet() {
    for config in [ListenerConfig::spinning(), ListenerConfig::default()] {
        let doorbell: Arc<dyn Doorbell> = Arc::new(ParkingDoorbell::new());
        let listener = Listener::start(doorbell.clone(), config).unwrap();
        let buffer = Arc::new(HostcallBuffer::new(Arc::new(HostMemory), 2, doorbell).unwrap());
        listener.add(buffer.clone()).unwrap();
        let wave = Wave::new(buffer, 1);
        let services = listener.services();

        services.register_lane(ID, "plus-one", |r| Ok([r[0] + 1, 0])).unwrap();
        services.register_lane(OTHER, "times-two", |r| Ok([r[0] * 2, 0])).unwrap();
        for x in 0..20 {
            assert_eq!(call(&wave, ID, x), [x + 1, 0]);
            assert_eq!(call(&wave, OTHER, x), [x * 2, 0]);
        }
        assert_eq!(call(&wave, ID, 5), [6, 0]); // the listener now remembers ID

        assert!(services.unregister(ID));
        assert_eq!(call(&wave, ID, 5), ErrorCode::UnknownService.reply());

        services.register_lane(ID, "plus-ten", |r| Ok([r[0] + 10, 0])).unwrap();
        assert_eq!(call(&wave, ID, 5), [15, 0]);
        assert_eq!(call(&wave, ID, 6), [16, 0]);

        let stats = listener.shutdown();
        assert_eq!(stats.services[&ID].0, "plus-ten");
        assert_eq!(stats.services[&ID].1.packets, 2);
        assert_eq!(stats.services[&OTHER].1.packets, 20);
        assert_eq!(stats.unknown.packets, 1);
    }
}
