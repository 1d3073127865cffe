//! The host under test and the checks of each round.

use super::guarded::GuardedMemory;
use super::model::{DevMemModel, Model, Output, PrintfModel};
use super::words::{
    activemask_of, line_pending, line_words, read32, service_of, slot_of, write32, Geometry, Words,
};
use super::Budgets;
use hostcall::{
    services::devmem::DevMemLimits,
    services::printf::{PrintfSink, Stream},
    services::sanitizer::{NoCodeObjects, SanitizerConfig},
    Doorbell, HostcallBuffer, Listener, ListenerConfig, ParkingDoorbell, Protocol, Services, ThreadDispatch,
    REMEMBERED_UNKNOWN_IDS,
};
use hostcall_core::lanes;
use hostcall_core::line;
use hostcall_core::stack::{CONTROL_HOST_ERROR, CONTROL_READY};
use hostcall_core::SANITIZER;
use hostcall_core::{Dispatch, DrainError, PacketRequest, Poller, Registration};
use std::cell::RefCell;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How long the listener may take to serve one round before the target calls it a hang.
const LISTENER_DEADLINE: Duration = Duration::from_secs(10);

/// PRINTF's sink: every message's output, in order.
#[derive(Clone, Default)]
struct Printed(Arc<Mutex<Output>>);

impl PrintfSink for Printed {
    fn write_stream(&mut self, stream: Stream, bytes: &[u8]) -> std::io::Result<()> {
        self.0.lock().unwrap().push((stream, bytes.to_vec()));
        Ok(())
    }
}

/// Which packets a round serves, in order, and how many malformed things it reports.
struct Plan {
    served: Vec<usize>,
    malformed: u64,
}

/// What the host side consists of, and the model of what it must have done so far.
pub(crate) struct Host {
    pub(crate) geometry: Geometry,
    pub(crate) model: Model,
    buffer: Arc<HostcallBuffer>,
    buffer_memory: Arc<GuardedMemory>,
    devmem_memory: Arc<GuardedMemory>,
    devmem_limits: DevMemLimits,
    max_open: usize,
    printed: Printed,
    /// Reports SANITIZER printed.
    sanitizer_reports: Arc<AtomicUsize>,
    doorbell: Arc<ParkingDoorbell>,
    services: Arc<Services>,
    poller: Poller<1>,
    listener: Option<Listener>,
}

impl Host {
    /// Byte 0 of the input: bit 0 the protocol (stack or phase; bit 5 set: line), bits 1..=3 the
    /// packet count less 2.
    pub(crate) fn new(shape: u8, budgets: Budgets) -> Self {
        let protocol = match (shape & super::LINE != 0, shape & 1) {
            (true, _) => Protocol::Line,
            (false, 0) => Protocol::Stack,
            (false, _) => Protocol::Phase,
        };
        let n = 2 + usize::from(shape >> 1 & 7);
        let buffer_memory = Arc::new(GuardedMemory::default());
        let devmem_memory = Arc::new(GuardedMemory::default());
        let doorbell = Arc::new(ParkingDoorbell::new());
        let buffer =
            HostcallBuffer::with_protocol(buffer_memory.clone(), n as u64, doorbell.clone(), protocol);
        let buffer = Arc::new(buffer.expect("a small buffer"));
        let printed = Printed::default();
        let services = Arc::new(Services::new());
        services.enable_printf(printed.clone(), budgets.messages).expect("a fresh registry");
        services.enable_devmem(devmem_memory.clone(), budgets.devmem).expect("a fresh registry");
        let sanitizer_reports = Arc::new(AtomicUsize::new(0));
        if budgets.sanitizer {
            let reports = sanitizer_reports.clone();
            let config = SanitizerConfig::default()
                .with_use_asan_runtime(false)
                // Relaxed: a count read on this thread after the round that printed.
                .with_sink(Arc::new(move |_: &str| {
                    reports.fetch_add(1, Ordering::Relaxed);
                }))
                .with_code_objects(Arc::new(NoCodeObjects));
            services.enable_sanitizer(config).expect("a fresh registry");
        }
        let poller = Poller::new();
        // SAFETY: `buffer` (an `Arc` this struct holds) stays allocated until `finish` removes it
        // from the poller (or drops the poller first); its memory is accessed only atomically.
        unsafe { poller.add(Registration::new(protocol, buffer.as_ptr(), buffer.len(), n as u32).unwrap()) }
            .expect("a valid buffer");
        Self {
            geometry: Geometry::new(protocol, n),
            model: Model {
                devmem: DevMemModel::new(budgets.devmem),
                printf: PrintfModel::new(budgets.messages),
                sanitizer: budgets.sanitizer,
                sanitizer_packets: 0,
            },
            sanitizer_reports,
            buffer,
            buffer_memory,
            devmem_memory,
            devmem_limits: budgets.devmem,
            max_open: budgets.messages.max_open,
            printed,
            doorbell,
            services,
            poller,
            listener: None,
        }
    }

    /// The device's access to the buffer.
    pub(crate) fn words(&self) -> Words<'_> {
        Words::new(&self.buffer)
    }

    /// A packet index from an input byte.
    pub(crate) fn packet(&self, byte: u8) -> usize {
        usize::from(byte) % self.geometry.n
    }

    /// From now on each round registers the buffer with a listener thread, waits until it has
    /// served what the round must serve, and removes it again (so the device never writes while
    /// the listener polls, and every round is deterministic).
    pub(crate) fn switch_to_listener(&mut self) {
        if self.listener.is_some() {
            return;
        }
        self.poller.remove(self.buffer.as_ptr()).expect("registered in `new`");
        let config = ListenerConfig::default()
            .with_spin_polls(16)
            .with_min_wait(Duration::from_micros(50))
            .with_max_wait(Duration::from_millis(1))
            .with_shutdown_grace(Duration::ZERO);
        let doorbell: Arc<dyn Doorbell> = self.doorbell.clone();
        let listener = Listener::start_with_services(doorbell, config, self.services.clone());
        self.listener = Some(listener.expect("a listener thread"));
    }

    /// One host round: the poller (or the listener) serves the buffer; every invariant checked.
    pub(crate) fn round(&mut self) {
        let before = self.words().snapshot();
        let plan = plan(&self.geometry, &before);
        let malformed_before = self.services.stats().malformed;
        let recorded = match &self.listener {
            None => Some(self.poll(&before, &plan)),
            Some(listener) => {
                self.serve_with(listener, &plan);
                None
            }
        };
        let after = self.words().snapshot();
        let malformed = self.services.stats().malformed - malformed_before;
        assert_eq!(malformed, plan.malformed, "malformed reports");
        self.check(&before, &after, &plan, recorded);
        if self.listener.is_some() {
            // The round removed the buffer from the listener: the services forgot it (its open
            // messages dropped, its blocks owned by no buffer), and the next round's
            // registration starts with nothing of it.
            self.model.devmem.forget_buffer();
            self.model.printf.forget_buffer();
        }
    }

    /// Polls once through a recording dispatcher; returns each served packet's index and host
    /// error flag, in order.
    fn poll(&self, before: &[u64], plan: &Plan) -> Vec<(u32, bool)> {
        let recorder = Recorder { inner: self.services.dispatcher(), served: RefCell::default() };
        let report = self.poller.poll_once(&recorder);
        let lane_calls =
            plan.served.iter().map(|&i| activemask_of(before, &self.geometry, i).count_ones()).sum();
        assert_eq!(
            (report.packets, report.lane_calls, report.malformed),
            (plan.served.len() as u32, lane_calls, plan.malformed as u32),
            "the drain report"
        );
        recorder.served.into_inner()
    }

    /// Registers the buffer with the listener until it has served the plan.
    fn serve_with(&self, listener: &Listener, plan: &Plan) {
        listener.add(self.buffer.clone()).expect("the buffer is served by no one else");
        self.doorbell.ring();
        let deadline = Instant::now() + LISTENER_DEADLINE;
        while !self.served(plan) {
            assert!(Instant::now() < deadline, "the listener did not serve {:?} in time", plan.served);
            std::thread::yield_now();
        }
        listener.remove_buffer(&self.buffer).expect("added above");
    }

    /// Whether the buffer shows every packet of `plan` served (and, stack protocol, the
    /// ready-stack taken).
    fn served(&self, plan: &Plan) -> bool {
        let (g, words) = (&self.geometry, self.words());
        match g.protocol {
            Protocol::Rpc { .. } => unreachable!("whole_host draws stack, phase and line buffers only"),
            Protocol::Stack => {
                words.load(g.ready_stack()) == 0
                    && plan.served.iter().all(|&i| words.load32(g.service(i) + 4) & CONTROL_READY == 0)
            }
            Protocol::Phase => plan.served.iter().all(|&i| {
                let (device, host) = g.phases(i);
                words.load32(device) == words.load32(host)
            }),
            Protocol::Line => plan
                .served
                .iter()
                .all(|&i| words.load32(g.phases(i).1) == line::seq_of(words.load(g.header(i)))),
        }
    }

    /// The first reply word of lane `lane` of packet `i`, as the device reads it now.
    pub(crate) fn reply_word0(&self, i: usize, lane: usize) -> u64 {
        let (at, words) = (self.geometry.reply(i, lane), self.words());
        match self.geometry.protocol {
            Protocol::Line => line::decode_reply(&core::array::from_fn(|k| words.load(at + 8 * k)))[0],
            _ => words.load(at),
        }
    }

    /// The round's writes against the plan and the services' model; then the budgets.
    fn check(&mut self, before: &[u64], after: &[u64], plan: &Plan, recorded: Option<Vec<(u32, bool)>>) {
        let g = self.geometry;
        let mut expected = before.to_vec();
        if g.protocol == Protocol::Stack {
            expected[g.ready_stack() / 8] = 0;
        }
        for (k, &i) in plan.served.iter().enumerate() {
            let service = service_of(before, &g, i);
            let activemask = activemask_of(before, &g, i);
            if service == SANITIZER && activemask != 0 {
                self.model.sanitizer_packets += 1;
            }
            // Line protocol: the sequence of the call the round served.
            let seq = (g.protocol == Protocol::Line)
                .then(|| line_pending(before, &g, i).expect("a line packet in the plan is pending"));
            let mut host_error = false;
            for lane in lanes(activemask) {
                let at = g.reply(i, lane) / 8;
                let reply = match seq {
                    // Line protocol: 3 reply words, each carrying the call's sequence.
                    Some(seq) => {
                        let tagged: [u64; line::REPLY_LANE_WORDS] = line_words(after, at);
                        assert!(
                            tagged.iter().all(|&w| line::carries(w, seq)),
                            "packet {i} lane {lane}: a reply word not of sequence {seq}: {tagged:x?}"
                        );
                        expected[at..at + tagged.len()].copy_from_slice(&tagged);
                        line::decode_reply(&tagged)
                    }
                    None => {
                        expected[at..at + 2].copy_from_slice(&after[at..at + 2]);
                        [after[at], after[at + 1]]
                    }
                };
                host_error |= self.model.lane(service, lane, &slot_of(before, &g, i, lane), reply);
            }
            match g.protocol {
                Protocol::Rpc { .. } => unreachable!("whole_host draws stack, phase and line buffers only"),
                Protocol::Stack => {
                    write32(&mut expected, g.service(i) + 4, if host_error { CONTROL_HOST_ERROR } else { 0 })
                }
                Protocol::Phase => {
                    let (device, host) = g.phases(i);
                    write32(&mut expected, host, read32(before, device));
                }
                Protocol::Line => write32(&mut expected, g.phases(i).1, seq.expect("set for line packets")),
            }
            if let Some(recorded) = &recorded {
                assert_eq!(
                    recorded.get(k),
                    Some(&(i as u32, host_error)),
                    "served packet {k} of {:?}",
                    plan.served
                );
            }
        }
        if let Some(recorded) = &recorded {
            assert_eq!(recorded.len(), plan.served.len(), "packets served: {recorded:?}");
        }
        if after != expected {
            // One memcmp; the search runs only on failure.
            let w = (0..after.len()).find(|&w| after[w] != expected[w]).expect("they differ");
            panic!("buffer byte {:#x} is {:#x}, expected {:#x}", 8 * w, after[w], expected[w]);
        }
        self.check_budgets();
    }

    /// Memory outside the buffer untouched; DEVMEM, PRINTF and unknown-id bookkeeping within
    /// their budgets and in agreement with the model.
    fn check_budgets(&self) {
        self.buffer_memory.check(Some((self.buffer.as_ptr() as usize, self.buffer.len())));
        self.devmem_memory.check(None);
        let devmem = &self.model.devmem;
        assert!(devmem.bytes <= self.devmem_limits.max_total, "DEVMEM past its byte budget");
        assert!(devmem.blocks() <= self.devmem_limits.max_allocations, "DEVMEM past its count");
        assert_eq!(self.devmem_memory.live_count(), devmem.blocks(), "DEVMEM blocks live");
        assert_eq!(self.devmem_memory.live_bytes() as u64, devmem.pages(), "DEVMEM bytes live");
        assert!(self.model.printf.open.len() <= self.max_open, "more messages open than the bound");
        assert!(*self.printed.0.lock().unwrap() == self.model.printf.printed, "PRINTF's output");
        assert!(self.services.stats().unknown_ids.len() <= REMEMBERED_UNKNOWN_IDS);
        // Relaxed: see the sink in `new`.
        let reports = self.sanitizer_reports.load(Ordering::Relaxed);
        assert!(reports <= self.model.sanitizer_packets, "{reports} SANITIZER reports, more than packets");
    }

    /// The last round: it leaves nothing pending; then the host shuts down and frees everything.
    pub(crate) fn finish(mut self) {
        self.round();
        let plan = plan(&self.geometry, &self.words().snapshot());
        assert!(
            plan.served.is_empty() && plan.malformed == 0,
            "left pending after a round: {:?}",
            plan.served
        );
        if self.geometry.protocol == Protocol::Stack {
            assert_eq!(self.words().load(self.geometry.ready_stack()), 0, "the ready-stack was taken");
        }
        match self.listener.take() {
            Some(listener) => drop(listener), // shuts down and joins
            None => self.poller.remove(self.buffer.as_ptr()).expect("registered in `new`"),
        }
        let Self { services, devmem_memory, buffer, buffer_memory, .. } = self;
        assert_eq!(Arc::strong_count(&services), 1, "the listener let its registry go");
        drop(services);
        devmem_memory.check(None);
        assert_eq!(devmem_memory.live_count(), 0, "DEVMEM blocks outlived the registry");
        drop(buffer);
        buffer_memory.check(None);
        assert_eq!(buffer_memory.live_count(), 0, "the buffer was freed");
    }
}

/// Which packets a host round serves: the stack protocol's walk of the ready-stack (the host's
/// index mask, at most `n` links, stopping at an index out of range; packets without READY, or
/// served already in this walk, skipped), or every packet whose phases differ in bit 0, or every
/// line packet whose whole request carries a sequence it has not served, in index order (the
/// buffers here are small enough that every scan is a full one).
fn plan(g: &Geometry, words: &[u64]) -> Plan {
    let n = g.n;
    let (mut served, mut malformed) = (Vec::new(), 0);
    match g.protocol {
        Protocol::Rpc { .. } => unreachable!("whole_host draws stack, phase and line buffers only"),
        Protocol::Stack => {
            let mask = (n as u64).next_power_of_two() - 1;
            let mut next = words[g.ready_stack() / 8];
            let mut steps = 0;
            while next != 0 {
                let index = (next & mask) as usize;
                if index >= n || steps == n {
                    malformed += 1;
                    break;
                }
                steps += 1;
                next = words[g.header(index) / 8];
                let ready = read32(words, g.service(index) + 4) & CONTROL_READY != 0;
                if !ready || served.contains(&index) {
                    malformed += 1;
                } else {
                    served.push(index);
                }
            }
        }
        Protocol::Line => served.extend((0..n).filter(|&i| line_pending(words, g, i).is_some())),
        Protocol::Phase => {
            for i in 0..n {
                let (device, host) = g.phases(i);
                let (device, host) = (read32(words, device), read32(words, host));
                if (device ^ host) & 1 != 0 {
                    malformed += u64::from((device | host) & !1 != 0);
                    served.push(i);
                }
            }
        }
    }
    Plan { served, malformed }
}

/// Dispatches through the registry like a listener thread and records what it served.
struct Recorder<'s> {
    inner: ThreadDispatch<'s>,
    served: RefCell<Vec<(u32, bool)>>,
}

impl Dispatch for Recorder<'_> {
    fn dispatch(&self, packet: &mut PacketRequest<'_>) {
        self.inner.dispatch(packet);
        self.served.borrow_mut().push((packet.index(), packet.has_error()));
    }

    fn malformed(&self, buffer: usize, error: DrainError) {
        self.inner.malformed(buffer, error);
    }
}
