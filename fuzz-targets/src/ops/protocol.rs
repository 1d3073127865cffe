//! The protocol's own operations on the run: the producer's claim, lane writes, submit, wait,
//! complete and release, and the host's drain, each checked against the model while it holds.

use super::{advance, mix64, pick, tag_step, Done, Held, InFlight, Run, State};
use crate::memory::FREE_STACK_WORD;
use crate::services::{serve_model, Recorder};
use hostcall_core::lanes;
use hostcall_core::stack::{Completed, CONTROL_READY};
use hostcall_core::{DrainReport, Host as _, LANES, LANE_MASK, SLOT_WORDS};
impl<'a> Run<'a> {
    pub(super) fn claim(&mut self) {
        let top_before = self.buffer.load(FREE_STACK_WORD);
        let claimed = self.view.claim();
        let model = &mut self.model;
        match claimed {
            Ok(Some(handle)) => {
                let index = handle.index();
                if !model.broken {
                    assert_eq!(model.free.pop(), Some(index), "a claim takes the free-list top");
                    assert_eq!(top_before, model.raw[index], "packet {index}'s tagged pointer");
                    assert_eq!(model.state[index], State::Free);
                    model.state[index] = State::Claimed;
                }
                self.claimed.push(Held { handle, index });
            }
            Ok(None) => assert!(model.broken || model.free.is_empty(), "claim found no packet"),
            Err(e) => assert!(model.broken, "claim failed on an intact buffer: {e}"),
        }
    }

    pub(super) fn write_lane(&mut self, which: u8, lane: usize, seed: u16) {
        let Some(i) = pick(self.claimed.len(), which) else { return };
        let held = &mut self.claimed[i];
        let words: [u64; SLOT_WORDS] = core::array::from_fn(|w| {
            if w == 0 {
                u64::from(seed)
            } else {
                mix64(u64::from(seed) << 3 | w as u64)
            }
        });
        held.handle.write_lane(lane, &words);
        // Exact even when broken: this is the only writer of these words right now.
        self.model.payload[held.index][lane] = words;
    }

    pub(super) fn submit(&mut self, which: u8, service: u32, activemask: u64) {
        let Some(i) = pick(self.claimed.len(), which) else { return };
        let Held { handle, index } = self.claimed.swap_remove(i);
        let handle = handle.submit(service, activemask);
        let model = &mut self.model;
        if !model.broken {
            assert_eq!(model.state[index], State::Claimed);
            model.state[index] = State::Submitted;
            model.request[index] = (service, activemask);
            model.ready.push(index);
        }
        self.submitted.push(InFlight { handle, index });
    }

    pub(super) fn drain(&mut self, via_poller: bool) {
        let (report, served, errors) = if via_poller {
            (self.poller.poll_once(&self.table), None, None)
        } else {
            let mut recorder = Recorder { table: &self.table, served: Vec::new(), errors: Vec::new() };
            let report = self.view.host().drain(&mut recorder);
            (report, Some(recorder.served), Some(recorder.errors))
        };
        // True whatever the memory holds (single-threaded: nobody sets READY again).
        let n = self.n();
        assert!(report.packets as usize <= n, "{} packets served of {n}", report.packets);
        if let (Some(served), Some(errors)) = (&served, &errors) {
            assert_eq!(report.packets as usize, served.len());
            assert_eq!(report.malformed as usize, errors.len());
            let mut seen = vec![false; n];
            for &index in served {
                let index = index as usize;
                assert!(!std::mem::replace(&mut seen[index], true), "packet {index} served twice");
                // Relaxed: the drain ran on this thread (the target has no other), so its stores
                // come before this load.
                let control = self.view.header(index).control.load(hostcall_core::sync::Ordering::Relaxed);
                assert_eq!(control & CONTROL_READY, 0, "served {index} still READY");
            }
        }
        let model = &mut self.model;
        if model.broken {
            return;
        }
        let newest_first: Vec<u32> = model.ready.iter().rev().map(|&i| i as u32).collect();
        if let Some(served) = served {
            assert_eq!(served, newest_first, "a drain serves the submitted packets, newest first");
        }
        assert_eq!(errors.unwrap_or_default(), []);
        let mut expected = DrainReport::default();
        for index in model.ready.drain(..) {
            let (service, activemask) = model.request[index];
            model.host_error[index] = serve_model(service, activemask, &mut model.payload[index]);
            model.state[index] = State::Served;
            expected.packets += 1;
            expected.lane_calls += (activemask & LANE_MASK).count_ones();
        }
        assert_eq!(report, expected);
        self.check_payloads();
    }

    pub(super) fn try_complete(&mut self, which: u8) {
        let Some(i) = pick(self.submitted.len(), which) else { return };
        let InFlight { handle, index } = self.submitted.swap_remove(i);
        match handle.wait_until(|_| false) {
            Ok(handle) => self.completed(handle, index),
            Err(handle) => {
                let state = self.model.state[index];
                assert!(self.model.broken || state == State::Submitted, "packet {index} is {state:?}");
                self.submitted.push(InFlight { handle, index });
            }
        }
    }

    /// Waits for a packet, serving it first if the model says it is not served yet. The wait is
    /// bounded: an intact buffer must answer at once, a broken one may never.
    pub(super) fn wait(&mut self, which: u8) {
        let Some(i) = pick(self.submitted.len(), which) else { return };
        if !self.model.broken && self.model.state[self.submitted[i].index] == State::Submitted {
            self.drain(false);
        }
        let InFlight { handle, index } = self.submitted.swap_remove(i);
        match handle.wait_until(|polls| polls < 8) {
            Ok(handle) => self.completed(handle, index),
            Err(handle) => {
                assert!(self.model.broken, "packet {index} was served but its wait did not see it");
                self.submitted.push(InFlight { handle, index });
            }
        }
    }

    fn completed(&mut self, handle: Completed<'a>, index: usize) {
        let model = &mut self.model;
        if !model.broken {
            assert_eq!(model.state[index], State::Served, "packet {index} completed");
            assert_eq!(handle.index(), index);
            assert_eq!(handle.tagged().raw(), model.raw[index], "packet {index}'s tagged pointer");
            assert_eq!(handle.host_error(), model.host_error[index], "packet {index}'s host-error flag");
            // The active lanes, and the edges; the other lanes' words are compared with the model
            // in memory after every drain.
            let activemask = model.request[index].1 | 1 | 1 << (LANES - 1);
            for lane in lanes(activemask) {
                assert_eq!(
                    handle.reply(lane)[..],
                    model.payload[index][lane][..2],
                    "packet {index} lane {lane}"
                );
            }
            model.state[index] = State::Completed;
        }
        self.completed.push(Done { handle, index });
    }

    pub(super) fn release(&mut self, which: u8) {
        let Some(i) = pick(self.completed.len(), which) else { return };
        let Done { handle, index } = self.completed.swap_remove(i);
        handle.release();
        self.released(index, State::Completed);
    }

    pub(super) fn drop_claimed(&mut self, which: u8) {
        let Some(i) = pick(self.claimed.len(), which) else { return };
        let Held { handle, index } = self.claimed.swap_remove(i);
        drop(handle);
        self.released(index, State::Claimed);
    }

    /// The model of a release: the packet goes on top of the free-list, its tag one step on.
    fn released(&mut self, index: usize, from: State) {
        let step = tag_step(self.n());
        let model = &mut self.model;
        if model.broken {
            return;
        }
        assert_eq!(model.state[index], from);
        model.state[index] = State::Free;
        model.raw[index] = advance(model.raw[index], step);
        model.free.push(index);
        assert_eq!(self.buffer.load(FREE_STACK_WORD), model.raw[index], "released {index} on top");
    }
}
