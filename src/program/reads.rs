//! Gets in bulk, as the programmer needs them before it writes (LFT
//! blocks, QoS tables, GUIDInfo and P_Key blocks it knows nothing of): one
//! read core, run through the SM's driver, with the same resend rounds as
//! Sets.

use crate::exchange::SmpError;
use crate::mad::{AttributeId, DrPath};
use crate::sweep::core::{SmpCore, SmpDriver, SmpRequest};

/// Gets, driven by the SM's driver; `answer` then sees each result
/// with the key it was asked under. Reads whose every attempt timed out are
/// asked again, up to [`RESEND_ROUNDS`] times, as Sets are.
pub(super) async fn read_all<D: SmpDriver, K: Send>(
    driver: &D,
    reads: impl Iterator<Item = (K, DrPath, AttributeId, u32)> + Send,
    mut answer: impl FnMut(K, DrPath, Result<[u8; 64], SmpError>),
) {
    // Collected first: the core then holds no closure borrowing the caller.
    let mut reads: Vec<_> = reads.collect();
    for round in 0..=RESEND_ROUNDS {
        let mut core = ReadCore { reads: reads.into_iter(), answers: Vec::new(), outstanding: 0, exhausted: false };
        driver.drive(&mut core).await;
        reads = Vec::new();
        for ((key, path, attr, amod), result) in core.answers {
            match result {
                Err(e) if round < RESEND_ROUNDS && is_timeout(&e) => reads.push((key, path, attr, amod)),
                result => answer(key, path, result),
            }
        }
        if reads.is_empty() {
            return;
        }
    }
}

pub(super) fn is_timeout(e: &SmpError) -> bool {
    matches!(e, SmpError::Transport(crate::exchange::TransportError::Timeout { .. }))
}

/// A read as asked: the caller's key, where, what.
type ReadToken<K> = (K, DrPath, AttributeId, u32);

type ReadAnswer = Result<[u8; 64], SmpError>;

/// Reads as an I/O-free core: one Get per item; the answers are kept, in
/// the order they came, for the caller.
struct ReadCore<K, I> {
    reads: I,
    answers: Vec<(ReadToken<K>, ReadAnswer)>,
    outstanding: usize,
    exhausted: bool,
}

impl<K, I: Iterator<Item = (K, DrPath, AttributeId, u32)>> SmpCore for ReadCore<K, I> {
    type Token = ReadToken<K>;

    fn poll_request(&mut self) -> Option<(Self::Token, SmpRequest)> {
        let Some((key, path, attr, amod)) = self.reads.next() else {
            self.exhausted = true;
            return None;
        };
        self.outstanding += 1;
        Some(((key, path, attr, amod), SmpRequest::get(path, attr, amod)))
    }

    fn handle_answer(&mut self, token: Self::Token, answer: Result<[u8; 64], SmpError>) {
        self.outstanding -= 1;
        self.answers.push((token, answer));
    }

    fn is_done(&self) -> bool {
        self.exhausted && self.outstanding == 0
    }
}

/// Extra rounds for the reads and Sets whose every attempt timed out.
pub(super) const RESEND_ROUNDS: usize = 2;
