//! The rows of the benchmark: what each measures and what it compares to.

use crate::bare::{bare_phase, bare_row_of, bare_stack};
use crate::latency::{
    core_round_trip, core_round_trip_line_kept, crossbeam_round_trip, floor_ping_pong, hostcall_round_trip,
    wave_round_trip,
};
use crate::listener_cold::listener_cold;
use crate::listener_cost::{listener_cost, listener_cost_hot};
use crate::measure::Sample;
use crate::options::Options;
use crate::puts::{llvm_puts, rpc_puts};
use crate::rpc::{rpc_listener_round_trip, rpc_listener_throughput, rpc_round_trip, RpcServer};
use crate::throughput::{crossbeam_throughput, hostcall_throughput};
use crate::wire::{llvm_rpc, llvm_rpc_throughput, wire_line};
use hostcall::{ListenerConfig, Protocol};

/// Lanes per packet of the per-protocol listener-cost rows: a CUDA warp.
const COST_LANES: u32 = 32;

#[derive(Clone, Copy, PartialEq)]
pub(crate) enum Compare {
    /// Latency row: ratio to the floor row.
    Floor,
    /// Throughput row: ratio to crossbeam at this many clients.
    Crossbeam(usize),
    /// Per-protocol listener-cost row: ratio to the phase protocol's row of the same kind (see
    /// [`phase_row`]).
    Phase,
    None,
}

/// The phase protocol's row a per-protocol row `name` (`..._<protocol>`) compares to.
pub(crate) fn phase_row(name: &str) -> String {
    format!("{}_phase", name.rsplit_once('_').map_or(name, |(kind, _)| kind))
}

pub(crate) struct Row {
    pub(crate) name: String,
    pub(crate) compare: Compare,
    /// For crossbeam throughput rows: the client count others compare to.
    pub(crate) clients: Option<usize>,
    pub(crate) run: Box<dyn Fn(&Options) -> Sample>,
    pub(crate) samples: Vec<Sample>,
}

pub(crate) fn rows(o: &Options) -> Vec<Row> {
    let row = |name: String, compare, clients, run: Box<dyn Fn(&Options) -> Sample>| Row {
        name,
        compare,
        clients,
        run,
        samples: Vec::new(),
    };
    let mut rows = vec![
        row("floor_ping_pong".into(), Compare::None, None, Box::new(floor_ping_pong)),
        row(
            "core_1l_spinning".into(),
            Compare::Floor,
            None,
            Box::new(|o| core_round_trip(o, Protocol::Stack)),
        ),
        row("core_1l_phase".into(), Compare::Floor, None, Box::new(|o| core_round_trip(o, Protocol::Phase))),
        row("core_1l_line".into(), Compare::Floor, None, Box::new(|o| core_round_trip(o, Protocol::Line))),
        row("core_1l_line_kept".into(), Compare::Floor, None, Box::new(core_round_trip_line_kept)),
        row("wire_1l_line".into(), Compare::Floor, None, Box::new(wire_line)),
        row("llvm_rpc_1l".into(), Compare::Floor, None, Box::new(llvm_rpc)),
        row("core_1l_rpc".into(), Compare::Floor, None, Box::new(|o| rpc_round_trip(o, RpcServer::Core))),
        row("rpc_host_1l".into(), Compare::Floor, None, Box::new(|o| rpc_round_trip(o, RpcServer::Host))),
        row("hostcall_1l_rpc".into(), Compare::Floor, None, Box::new(rpc_listener_round_trip)),
        row("bare_1l_stack".into(), Compare::Floor, None, Box::new(bare_stack)),
        row("bare_1l_phase".into(), Compare::Floor, None, Box::new(bare_phase)),
        row(
            "hostcall_1l_spinning".into(),
            Compare::Floor,
            None,
            Box::new(|o| hostcall_round_trip(o, ListenerConfig::spinning(), Protocol::Stack)),
        ),
        row(
            "hostcall_1l_phase".into(),
            Compare::Floor,
            None,
            Box::new(|o| hostcall_round_trip(o, ListenerConfig::spinning(), Protocol::Phase)),
        ),
        row(
            "hostcall_1l_line".into(),
            Compare::Floor,
            None,
            Box::new(|o| hostcall_round_trip(o, ListenerConfig::spinning(), Protocol::Line)),
        ),
        row(
            "hostcall_1l_blocking".into(),
            Compare::Floor,
            None,
            Box::new(|o| hostcall_round_trip(o, ListenerConfig::default(), Protocol::Stack)),
        ),
        row("wave_1l_spinning".into(), Compare::Floor, None, Box::new(wave_round_trip)),
        row("crossbeam_spinning".into(), Compare::Floor, None, Box::new(|o| crossbeam_round_trip(o, true))),
        row("crossbeam_blocking".into(), Compare::Floor, None, Box::new(|o| crossbeam_round_trip(o, false))),
    ];
    for &(waves, lanes) in &o.throughput {
        let compare =
            if o.crossbeam_clients.contains(&waves) { Compare::Crossbeam(waves) } else { Compare::None };
        rows.push(row(
            format!("throughput_{waves}w_{lanes}l"),
            compare,
            None,
            Box::new(move |o| hostcall_throughput(o, waves, lanes)),
        ));
    }
    for &clients in &o.crossbeam_clients {
        rows.push(row(
            format!("crossbeam_tput_{clients}c"),
            Compare::None,
            Some(clients),
            Box::new(move |o| crossbeam_throughput(o, clients)),
        ));
    }
    rows.push(row("rpc_tput_1c".into(), Compare::None, None, Box::new(rpc_listener_throughput)));
    rows.push(row("llvm_rpc_tput_1c".into(), Compare::None, None, Box::new(llvm_rpc_throughput)));
    for clients in [1, 8] {
        rows.push(row(
            format!("rpc_puts_{clients}c"),
            Compare::None,
            None,
            Box::new(move |o| rpc_puts(o, clients)),
        ));
        rows.push(row(
            format!("llvm_puts_{clients}c"),
            Compare::None,
            None,
            Box::new(move |o| llvm_puts(o, clients)),
        ));
    }
    rows.push(row("listener_cost_1l".into(), Compare::None, None, Box::new(|o| listener_cost(o, 1))));
    rows.push(row("listener_cost_64l".into(), Compare::None, None, Box::new(|o| listener_cost(o, 64))));
    for (name, protocol) in [("stack", Protocol::Stack), ("phase", Protocol::Phase), ("line", Protocol::Line)]
    {
        let lanes = COST_LANES;
        let compare = if protocol == Protocol::Phase { Compare::None } else { Compare::Phase };
        rows.push(row(
            format!("listener_cost_{lanes}l_{name}"),
            compare,
            None,
            Box::new(move |o| listener_cost_hot(o, lanes, protocol)),
        ));
        rows.push(row(
            format!("listener_cold_{lanes}l_{name}"),
            compare,
            None,
            Box::new(move |o| listener_cold(o, lanes, protocol)),
        ));
    }
    if !o.only.is_empty() {
        let chosen = |name: &str| o.only.iter().any(|only| name.contains(only.as_str()));
        let compared: Vec<usize> = rows
            .iter()
            .filter(|r| chosen(&r.name))
            .filter_map(|r| match r.compare {
                Compare::Crossbeam(c) => Some(c),
                _ => None,
            })
            .collect();
        let phase_rows: Vec<String> = rows
            .iter()
            .filter(|r| chosen(&r.name) && r.compare == Compare::Phase)
            .map(|r| phase_row(&r.name))
            .collect();
        let bare_rows: Vec<&str> =
            rows.iter().filter(|r| chosen(&r.name)).filter_map(|r| bare_row_of(&r.name)).collect();
        rows.retain(|r| {
            r.name == "floor_ping_pong"
                || chosen(&r.name)
                || r.clients.is_some_and(|c| compared.contains(&c))
                || phase_rows.contains(&r.name)
                || bare_rows.contains(&r.name.as_str())
        });
    }
    rows
}
