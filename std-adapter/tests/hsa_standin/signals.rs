//! HSA signals as doorbells: a device's raw atomic add wakes a sleeping listener, signal waits in
//! timestamp units, one signal per listener shared by all its buffers.

use super::*;

#[test]
fn a_raw_device_add_wakes_a_sleeping_listener() {
    with_watchdog(LIMIT, || {
        let standin = StandIn::new("raw-add", "", "");
        let backend = hsa_backend(&standin);
        // A listener that never spins and whose own timeout is far longer than the test: only
        // the signal can wake it.
        let sleepy = ListenerConfig::default()
            .with_spin_polls(0)
            .with_min_wait(Duration::from_secs(600))
            .with_max_wait(Duration::from_secs(600));
        let listener = listener_on(backend.doorbell.clone(), sleepy);
        let device: Arc<dyn Doorbell> = Arc::new(DeviceRing { signal: backend.doorbell.clone() });
        let buffer = Arc::new(HostcallBuffer::new(backend.memory.clone(), 4, device).unwrap());
        listener.add(buffer.clone()).unwrap();
        let wave = hostcall::Wave::new(buffer.clone(), 1).with_timeout(WAVE_TIMEOUT);
        let mut slowest = Duration::ZERO;
        for call in 0..20u64 {
            thread::sleep(Duration::from_millis(2)); // let the listener fall asleep
            let started = Instant::now();
            let reply = wave.call(ADD, |_| [call, 1, 7, 0, 0, 0, 0, 0]).unwrap();
            let took = started.elapsed();
            assert!(took < Duration::from_secs(2), "the listener slept through ring {call}: {took:?}");
            assert_eq!(reply.lane(0), [call + 1, 7]);
            slowest = slowest.max(took);
        }
        println!("slowest call woken by a raw add: {slowest:?}");
        assert_eq!(standin.count("calls:hsa_signal_add_screlease"), 0);
        listener.shutdown(); // rings through the runtime, which wakes the listener
        drop((wave, listener, buffer, backend));
        standin.assert_released();
    });
}

#[test]
fn signal_waits_honour_timestamp_units_and_raw_adds() {
    with_watchdog(LIMIT, || {
        let standin = StandIn::new("signal", "", "");
        let runtime = Arc::new(HsaRuntime::from_path(standin.path()).unwrap());
        let bell = Arc::new(HsaDoorbell::new(runtime).unwrap());
        assert_eq!(bell.value(), INIT);
        bell.ring();
        assert_eq!(bell.value(), INIT + 1);
        // The stand-in counts 100 M ticks a second: a timeout converted as nanoseconds would last
        // ten times too long.
        let started = Instant::now();
        assert_eq!(bell.wait(INIT + 1, Duration::from_millis(50)), INIT + 1);
        let waited = started.elapsed();
        assert!(waited >= Duration::from_millis(50) && waited < Duration::from_millis(450), "{waited:?}");
        let device = DeviceRing { signal: bell.clone() };
        let ringer = thread::spawn(move || {
            thread::sleep(Duration::from_millis(20));
            device.ring();
        });
        let started = Instant::now();
        assert_eq!(bell.wait(INIT + 1, Duration::from_secs(30)), INIT + 2);
        assert!(started.elapsed() < Duration::from_secs(2));
        ringer.join().unwrap();
        drop(bell);
        standin.assert_released();
    });
}

#[test]
fn one_signal_per_listener_shared_by_all_its_buffers() {
    with_watchdog(LIMIT, || {
        let standin = StandIn::new("signal-per-listener", "", "");
        let backend = hsa_backend(&standin);
        let listener = listener_on(backend.doorbell.clone(), ListenerConfig::default());
        let buffers: Vec<_> = [Protocol::Stack, Protocol::Phase, Protocol::Stack]
            .into_iter()
            .map(|protocol| Arc::new(backend.buffer(4, protocol, listener.doorbell().clone()).unwrap()))
            .collect();
        for buffer in &buffers {
            listener.add(buffer.clone()).unwrap();
        }
        run_waves(&buffers[1], 2, 4, 10, Some(WAVE_TIMEOUT));
        // As ROCm: one signal, `hsa_signal_create(1, 0, NULL, &signal)`, in every buffer.
        assert_eq!(standin.count("signals_created"), 1);
        let created = standin.calls("hsa_signal_create");
        assert!(created[0].contains("initial=1 consumers=0 "), "{created:?}");
        let handle = backend.doorbell.handle();
        for buffer in &buffers {
            let field = if buffer.protocol() == Protocol::Stack { 16 } else { 40 };
            assert_eq!(word(buffer.as_ptr() as u64, field), handle);
        }
        // Another listener gets a signal of its own.
        let other = listener_on(backend.new_doorbell().unwrap(), ListenerConfig::default());
        assert_eq!(standin.count("signals"), 2);
        drop((other, listener, buffers));
        assert_eq!(standin.count("signals"), 1, "the other listener's signal is destroyed with it");
        drop(backend);
        standin.assert_released();
    });
}
