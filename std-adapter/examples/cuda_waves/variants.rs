//! The device-side variants `--bench` measures, one list for the three wires the CUDA kernels
//! speak (phase, line, LLVM-RPC): each is a kernel of `examples/cuda/kernels.cu` (a
//! `hostcall::tuning` of `examples/cuda/variants.cuh` or a flag), the buffer it runs on, and
//! whether it gets a throughput table.

use crate::gpu::RpcOpen;
use crate::options::Wire;

/// The buffer a variant's kernel runs on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    /// A phase buffer (`phase_call`).
    Phase,
    /// A line buffer (`line_call`).
    Line,
    /// An LLVM-RPC buffer (`rpc_call`), opened as said.
    Rpc(RpcOpen),
}

impl Kind {
    pub(crate) fn wire(self) -> Wire {
        match self {
            Kind::Phase => Wire::Phase,
            Kind::Line => Wire::Line,
            Kind::Rpc(_) => Wire::Rpc,
        }
    }

    /// The protocol's name in the output.
    pub(crate) fn protocol(self) -> &'static str {
        self.wire().name()
    }
}

/// Which warp counts of the throughput table a variant runs at.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Table {
    /// None: one-warp rows only.
    None,
    /// Every warp count.
    All,
    /// 1,056 warps and more only (where the link is loaded).
    Loaded,
}

/// One variant.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Variant {
    pub(crate) name: &'static str,
    pub(crate) kernel: &'static str,
    pub(crate) kind: Kind,
    pub(crate) table: Table,
    /// Only lane 0 of each warp calls (and checks): a warp-call checks one reply.
    pub(crate) one_lane: bool,
}

const fn v(name: &'static str, kernel: &'static str, kind: Kind, table: Table) -> Variant {
    Variant { name, kernel, kind, table, one_lane: false }
}

use Kind::{Line, Phase, Rpc};
use RpcOpen::{Mailboxes, PortState};

/// Every variant, in the order of the output. Phase: `store-sys` (request stores at system
/// scope), `fence-sc` (SC fence before a relaxed phase store), `pipelined-poll` (two polls in
/// flight), `no-ring`, `lane-fill` / `transposed-fill` (always per-lane / always whole-line
/// stores; the default picks by load), `keep-packet` (the warp keeps its packet), `check-claim`
/// (the claim reads `host_phase`, as ROCm's device code does). Line: as phase where named alike;
/// `one-lane`: only lane 0 calls; `keep-packet-unbounded`: keep-packet's kernel without the
/// 64-register bound of 1,024-thread blocks (one-warp rows only). RPC: `llvm-open` reads both mailboxes at every open, as LLVM's
/// client (the default keeps the port state in device memory); `keep-port` keeps the port locked
/// between calls.
pub(crate) const VARIANTS: [Variant; 24] = [
    v("default", "hc_calls", Phase, Table::All),
    v("store-sys", "hc_calls_store_sys", Phase, Table::None),
    v("fence-sc", "hc_calls_fence_sc", Phase, Table::None),
    v("pipelined-poll", "hc_calls_pipelined", Phase, Table::None),
    v("no-ring", "hc_calls_no_ring", Phase, Table::None),
    v("lane-fill", "hc_calls_lane_fill", Phase, Table::Loaded),
    v("transposed-fill", "hc_calls_transposed_fill", Phase, Table::None),
    v("keep-packet", "hc_calls_keep_packet", Phase, Table::Loaded),
    v("check-claim", "hc_calls_check_claim", Phase, Table::None),
    v("default", "hc_line_calls", Line, Table::All),
    v("no-ring", "hc_line_calls_no_ring", Line, Table::None),
    v("keep-packet", "hc_line_calls_keep_packet", Line, Table::All),
    v("lane-fill", "hc_line_calls_lane_fill", Line, Table::Loaded),
    v("keep-packet-lane-fill", "hc_line_calls_keep_packet_lane_fill", Line, Table::Loaded),
    Variant { one_lane: true, ..v("one-lane", "hc_line_calls_one_lane", Line, Table::None) },
    v("keep-packet-pipelined-poll", "hc_line_calls_keep_packet_pipelined", Line, Table::All),
    v("keep-packet-unbounded", "hc_line_calls_keep_packet_unbounded", Line, Table::None),
    v("default", "hc_rpc_calls", Rpc(PortState), Table::All),
    v("llvm-open", "hc_rpc_calls", Rpc(Mailboxes), Table::All),
    v("keep-port", "hc_rpc_calls_keep_port", Rpc(PortState), Table::All),
    v("lane-fill", "hc_rpc_calls_lane_fill", Rpc(PortState), Table::Loaded),
    v("transposed-fill", "hc_rpc_calls_transposed_fill", Rpc(PortState), Table::None),
    v("keep-port-lane-fill", "hc_rpc_calls_keep_port_lane_fill", Rpc(PortState), Table::Loaded),
    v("store-sys", "hc_rpc_calls_store_sys", Rpc(PortState), Table::None),
];

/// The variant of `kind`'s protocol named `name`.
pub(crate) fn variant(wire: Wire, name: &str) -> Option<&'static Variant> {
    VARIANTS.iter().find(|v| v.kind.wire() == wire && v.name == name)
}
