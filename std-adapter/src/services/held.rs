//! Byte budgets on what devices make the host hold, one mechanism for every service that keeps
//! device data between calls: the message assembler's open messages (PRINTF's streams,
//! [`crate::services::message`]) and the LLVM-RPC calls in progress
//! ([`crate::services::rpc`]).
//!
//! A [`HeldAccount`] counts the bytes its holders hold. Every charge names two accounts, the
//! holder's buffer's and the one of all buffers, each with its limit, and lands in both or in
//! neither ([`charge_both`]): a device cannot take more than its buffer's share, nor the buffers
//! together more than the whole. What is charged comes back with [`release_both`] when the data
//! goes (the message ended or was dropped, the call answered).
//!
//! An account is an atomic word, so holders on several threads (the hosts of an RPC buffer's
//! stripes, each on its listener thread) share one without a lock. A charge never takes an
//! account past its limit, whatever other holders charge meanwhile: each account's check and
//! add is one compare-and-swap.
//!
//! ```
//! # use hostcall::services::message::MessageService;
//! // The assembler's budgets are accounts of this module: 64 MiB a buffer, 256 MiB in all.
//! let service = MessageService::new(|_: &[u64]| [0, 0]);
//! assert_eq!(service.assembler().held_bytes(), 0);
//! ```

use std::sync::atomic::{AtomicUsize, Ordering};

/// Bytes held by the holders that share this account. See the [module docs](self).
#[derive(Debug, Default)]
pub(crate) struct HeldAccount(AtomicUsize);

/// Which account refused a charge.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum OverBudget {
    /// The account of all buffers.
    All,
    /// The holder's buffer's account.
    Buffer,
}

impl HeldAccount {
    /// Bytes held now.
    pub(crate) fn held(&self) -> usize {
        // Relaxed: a count; no data is published through it.
        self.0.load(Ordering::Relaxed)
    }

    /// Adds `bytes` if the account then holds at most `limit`; returns whether it did.
    fn try_charge(&self, bytes: usize, limit: usize) -> bool {
        // Relaxed: the account orders no other memory; the compare-and-swap alone keeps the sum
        // within the limit, whichever holder charges first.
        self.0
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |held| {
                held.checked_add(bytes).filter(|&after| after <= limit)
            })
            .is_ok()
    }

    /// Gives back `bytes` charged before.
    fn release(&self, bytes: usize) {
        // Relaxed: as in `try_charge`.
        let before = self.0.fetch_sub(bytes, Ordering::Relaxed);
        debug_assert!(before >= bytes, "released more than was charged");
    }
}

/// Whether `bytes` more would fit `all` (within `all_limit`) and `buffer` (within
/// `buffer_limit`) now: a check only, for a holder that decides before it charges (the
/// assembler's BEGIN, which is refused when its first chunk could not grow).
pub(crate) fn fits_both(
    (all, all_limit): (&HeldAccount, usize),
    (buffer, buffer_limit): (&HeldAccount, usize),
    bytes: usize,
) -> Result<(), OverBudget> {
    let fits = |account: &HeldAccount, limit| account.held().checked_add(bytes).is_some_and(|a| a <= limit);
    if !fits(all, all_limit) {
        Err(OverBudget::All)
    } else if !fits(buffer, buffer_limit) {
        Err(OverBudget::Buffer)
    } else {
        Ok(())
    }
}

/// Charges `bytes` to `all` (within `all_limit`) and to `buffer` (within `buffer_limit`), or to
/// neither: the error names the account that had no room.
pub(crate) fn charge_both(
    (all, all_limit): (&HeldAccount, usize),
    (buffer, buffer_limit): (&HeldAccount, usize),
    bytes: usize,
) -> Result<(), OverBudget> {
    if !all.try_charge(bytes, all_limit) {
        return Err(OverBudget::All);
    }
    if !buffer.try_charge(bytes, buffer_limit) {
        all.release(bytes);
        return Err(OverBudget::Buffer);
    }
    Ok(())
}

/// Gives back `bytes` that [`charge_both`] charged to `all` and `buffer`.
pub(crate) fn release_both(all: &HeldAccount, buffer: &HeldAccount, bytes: usize) {
    all.release(bytes);
    buffer.release(bytes);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_charge_lands_in_both_accounts_or_in_neither() {
        let (all, a, b) = (HeldAccount::default(), HeldAccount::default(), HeldAccount::default());
        assert_eq!(charge_both((&all, 100), (&a, 60), 50), Ok(()));
        assert_eq!(charge_both((&all, 100), (&a, 60), 20), Err(OverBudget::Buffer));
        assert_eq!(charge_both((&all, 100), (&b, 60), 50), Ok(()));
        assert_eq!(charge_both((&all, 100), (&b, 60), 1), Err(OverBudget::All));
        assert_eq!((all.held(), a.held(), b.held()), (100, 50, 50));
        release_both(&all, &a, 50);
        assert_eq!(charge_both((&all, 100), (&b, 60), 10), Ok(()));
        assert_eq!((all.held(), a.held(), b.held()), (60, 0, 60));
    }

    #[test]
    fn holders_on_many_threads_never_pass_the_limit() {
        let (all, buffer) = (HeldAccount::default(), HeldAccount::default());
        let granted = std::sync::atomic::AtomicUsize::new(0);
        std::thread::scope(|s| {
            for _ in 0..4 {
                s.spawn(|| {
                    for _ in 0..1000 {
                        if charge_both((&all, 1000), (&buffer, 700), 3).is_ok() {
                            granted.fetch_add(3, Ordering::Relaxed);
                        }
                    }
                });
            }
        });
        assert_eq!(buffer.held(), granted.load(Ordering::Relaxed));
        assert!(buffer.held() <= 700 && buffer.held() > 690, "{}", buffer.held());
        assert_eq!(all.held(), buffer.held());
    }
}
