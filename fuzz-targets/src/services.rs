//! The services both targets dispatch to, and the model of what they answer.
//!
//! The host side is the core's own [`ServiceTable`] (unknown ids answered with
//! [`ErrorCode::UnknownService`]); [`serve_model`] states independently what it must write.

use crate::memory::PayloadWords;
use hostcall_core::lanes;
use hostcall_core::{Dispatch, DrainError, DrainHandler, ErrorCode, PacketRequest, ServiceTable, SLOT_WORDS};

/// Answers `[r0 + r1, r2 ^ r7]`.
pub(crate) const MIX: u32 = 1;
/// Refuses odd `r0` with `BadRequest`, else answers `[r0 / 2, !r3]`.
pub(crate) const PICKY: u32 = 2;
/// Refuses every lane.
pub(crate) const REFUSE: u32 = 3;

/// A lane service (a [`hostcall_core::LaneService`]) as a plain function pointer, so that the
/// table can borrow it from a static and the model can call it directly.
type ServiceFn = fn(&[u64; SLOT_WORDS]) -> Result<[u64; 2], ErrorCode>;

fn mix(r: &[u64; SLOT_WORDS]) -> Result<[u64; 2], ErrorCode> {
    Ok([r[0].wrapping_add(r[1]), r[2] ^ r[7]])
}

fn picky(r: &[u64; SLOT_WORDS]) -> Result<[u64; 2], ErrorCode> {
    if r[0] & 1 == 1 {
        Err(ErrorCode::BadRequest)
    } else {
        Ok([r[0] >> 1, !r[3]])
    }
}

fn refuse(_: &[u64; SLOT_WORDS]) -> Result<[u64; 2], ErrorCode> {
    Err(ErrorCode::Refused)
}

static MIX_FN: ServiceFn = mix;
static PICKY_FN: ServiceFn = picky;
static REFUSE_FN: ServiceFn = refuse;

/// The host's service table.
pub(crate) fn table() -> ServiceTable<'static, 4> {
    let mut table = ServiceTable::new();
    for (id, service) in [(MIX, &MIX_FN), (PICKY, &PICKY_FN), (REFUSE, &REFUSE_FN)] {
        if table.register(id, service).is_err() {
            unreachable!("the table has room for three services");
        }
    }
    table
}

/// What the host must do to a served packet: the reply words of each active lane written into
/// `payload`; returns whether the packet gets the host-error flag.
pub(crate) fn serve_model(service: u32, activemask: u64, payload: &mut PayloadWords) -> bool {
    let known: Option<ServiceFn> = match service {
        MIX => Some(mix),
        PICKY => Some(picky),
        REFUSE => Some(refuse),
        _ => None,
    };
    // An unknown id flags the packet even when no lane is active.
    let mut host_error = known.is_none();
    for lane in lanes(activemask) {
        let outcome = match known {
            Some(service) => service(&payload[lane]),
            None => Err(ErrorCode::UnknownService),
        };
        let reply = outcome.unwrap_or_else(|code| {
            host_error = true;
            // `[ERROR_REPLY, code]`, but `[0, code]` under DEVMEM's id (REFUSE's here).
            code.reply_for(service)
        });
        payload[lane][..2].copy_from_slice(&reply);
    }
    host_error
}

/// Serves through the core's service table and records what the drain did.
pub(crate) struct Recorder<'t> {
    pub(crate) table: &'t ServiceTable<'static, 4>,
    pub(crate) served: Vec<u32>,
    pub(crate) errors: Vec<DrainError>,
}

impl DrainHandler for Recorder<'_> {
    fn serve(&mut self, packet: &mut PacketRequest<'_>) {
        self.served.push(packet.index());
        self.table.dispatch(packet);
    }
    fn malformed(&mut self, error: DrainError) {
        self.errors.push(error);
    }
}
