//! SA MADs waiting to be served, queued per requester and served in turn,
//! so one client's flood cannot take another client's service.
//!
//! A MAD is queued under the LID it came from. Requesters are served round
//! robin, one MAD each per turn, so a client with one query waiting is
//! answered after at most one MAD of every other requester, however many a
//! flooding one has queued. Room is max-min fair: one requester holds at
//! most `per_requester`, and when all `total` places are taken a newcomer
//! takes the place of the newest MAD of the longest queue (unless its own
//! is as long). What is dropped is counted by the caller, naming the LID.
//!
//! A requester's queue is forgotten once empty: memory follows what waits,
//! not how many clients ever asked.

use std::collections::{HashMap, VecDeque};

use crate::types::Lid;

/// MADs waiting per requester, served in turn.
#[derive(Debug)]
pub struct FairQueue<T> {
    queues: HashMap<Lid, VecDeque<T>>,
    /// Requesters with something queued, in the order they are served.
    turn: VecDeque<Lid>,
    len: usize,
    per_requester: usize,
    total: usize,
}

impl<T> FairQueue<T> {
    /// At most `per_requester` MADs of one requester and `total` in all
    /// (both at least 1).
    pub fn new(per_requester: usize, total: usize) -> Self {
        FairQueue {
            queues: HashMap::new(),
            turn: VecDeque::new(),
            len: 0,
            per_requester: per_requester.max(1),
            total: total.max(1),
        }
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Queues `item` from `from`. Returns the requester a MAD was dropped
    /// of to keep within the bounds: `from` itself when its own share is
    /// full, or the longest queue's when every place was taken.
    pub fn push(&mut self, from: Lid, item: T) -> Option<Lid> {
        let mine = self.queues.get(&from).map_or(0, VecDeque::len);
        if mine >= self.per_requester {
            return Some(from);
        }
        let mut dropped = None;
        if self.len >= self.total {
            // The longest queue gives up its newest MAD, unless the
            // newcomer's own queue is as long: then the newcomer's goes.
            let (&longest, q) = self.queues.iter_mut().max_by_key(|(_, q)| q.len()).expect("len > 0");
            if q.len() <= mine + 1 {
                return Some(from);
            }
            q.pop_back();
            self.len -= 1;
            dropped = Some(longest);
        }
        let q = self.queues.entry(from).or_default();
        if q.is_empty() {
            self.turn.push_back(from);
        }
        q.push_back(item);
        self.len += 1;
        dropped
    }

    /// The next MAD to serve: the oldest of the requester whose turn it is.
    pub fn pop(&mut self) -> Option<(Lid, T)> {
        let from = self.turn.pop_front()?;
        let q = self.queues.get_mut(&from).expect("a requester in turn has a queue");
        let item = q.pop_front().expect("a requester in turn has something queued");
        self.len -= 1;
        if q.is_empty() {
            self.queues.remove(&from);
        } else {
            self.turn.push_back(from);
        }
        Some((from, item))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requesters_are_served_in_turn() {
        let mut q = FairQueue::new(100, 1000);
        for i in 0..5 {
            assert_eq!(q.push(Lid(1), (1, i)), None);
        }
        q.push(Lid(2), (2, 0));
        q.push(Lid(3), (3, 0));
        q.push(Lid(2), (2, 1));
        let order: Vec<(u16, i32)> = std::iter::from_fn(|| q.pop().map(|(_, x)| x)).collect();
        assert_eq!(order, vec![(1, 0), (2, 0), (3, 0), (1, 1), (2, 1), (1, 2), (1, 3), (1, 4)]);
        assert!(q.is_empty() && q.queues.is_empty() && q.turn.is_empty(), "nothing kept once served");
    }

    #[test]
    fn a_flood_fills_only_its_own_share() {
        let mut q = FairQueue::new(4, 6);
        let dropped: Vec<Option<Lid>> = (0..6).map(|i| q.push(Lid(9), i)).collect();
        assert_eq!(dropped, vec![None, None, None, None, Some(Lid(9)), Some(Lid(9))]);
        q.push(Lid(1), 100);
        q.push(Lid(2), 200);
        assert_eq!(q.len(), 6, "full");
        // A third requester takes the flood's newest place.
        assert_eq!(q.push(Lid(3), 300), Some(Lid(9)));
        assert_eq!(q.len(), 6);
        // One whose queue is as long as the longest is refused its own.
        assert_eq!(q.push(Lid(1), 101), Some(Lid(9)), "9 still holds 3");
        assert_eq!(q.push(Lid(2), 201), Some(Lid(2)), "9 and 2 both hold 2 now: 2's own goes");
        let served: Vec<i32> = std::iter::from_fn(|| q.pop().map(|(_, x)| x)).collect();
        assert_eq!(served, vec![0, 100, 200, 300, 1, 101]);
    }

    #[test]
    fn bounds_of_zero_still_hold_one() {
        let mut q = FairQueue::new(0, 0);
        assert_eq!(q.push(Lid(1), ()), None);
        assert_eq!(q.push(Lid(1), ()), Some(Lid(1)));
        assert_eq!(q.push(Lid(2), ()), Some(Lid(2)));
        assert_eq!(q.pop(), Some((Lid(1), ())));
        assert_eq!(q.pop(), None);
    }
}
