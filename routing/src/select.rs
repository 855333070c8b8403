//! Pieces the balancing engines (minhop, updn/dnup) share when they pick an
//! output port: a min-heap of `load << LOAD_SHIFT | rank` keys, and the
//! per-LMC-block use counts that spread a port's 2^LMC LIDs over different
//! next switches and ports.

/// Bits of a heap key below the load: the candidate's rank (ties go to the
/// lowest rank).
pub(crate) const LOAD_SHIFT: u32 = 8;

/// Restores the min-heap property of `keys` below `i`.
pub(crate) fn sift_down(keys: &mut [u64], mut i: usize) {
    let n = keys.len();
    loop {
        let l = 2 * i + 1;
        if l >= n {
            return;
        }
        let r = l + 1;
        let c = if r < n && keys[r] < keys[l] { r } else { l };
        if keys[c] >= keys[i] {
            return;
        }
        keys.swap(i, c);
        i = c;
    }
}

/// Makes `keys` a min-heap.
pub(crate) fn heapify(keys: &mut [u64]) {
    for i in (0..keys.len() / 2).rev() {
        sift_down(keys, i);
    }
}

/// A lower bound on the most all-to-all paths one switch-to-switch port
/// must carry under any routing: the `local[s]` end ports of switch `s`
/// send a path to each of the LIDs elsewhere (`lids_at[s]` of them are on
/// `s` itself), and those paths leave `s` by one of its `degree(s)` cables
/// to other switches, so one of them carries at least the average.
pub(crate) fn egress_bound(local: &[u64], lids_at: &[u64], degree: impl Fn(usize) -> usize) -> u64 {
    let total: u64 = lids_at.iter().sum();
    (0..lids_at.len())
        .filter(|&s| degree(s) > 0)
        .map(|s| (local[s] * (total - lids_at[s])).div_ceil(degree(s) as u64))
        .max()
        .unwrap_or(0)
}

/// How often the LIDs of one LMC block already left by each next switch
/// and each port.
#[derive(Debug, Default)]
pub(crate) struct BlockUse {
    next: Vec<(u32, u32)>,
    port: Vec<(u8, u32)>,
}

impl BlockUse {
    pub(crate) fn clear(&mut self) {
        self.next.clear();
        self.port.clear();
    }

    /// (uses of `next`, uses of `port`): lower is better.
    pub(crate) fn score(&self, next: u32, port: u8) -> (u32, u32) {
        let un = self.next.iter().find(|u| u.0 == next).map_or(0, |u| u.1);
        let up = self.port.iter().find(|u| u.0 == port).map_or(0, |u| u.1);
        (un, up)
    }

    pub(crate) fn record(&mut self, next: u32, port: u8) {
        match self.next.iter_mut().find(|u| u.0 == next) {
            Some(u) => u.1 += 1,
            None => self.next.push((next, 1)),
        }
        match self.port.iter_mut().find(|u| u.0 == port) {
            Some(u) => u.1 += 1,
            None => self.port.push((port, 1)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn heap_and_counts() {
        let mut k = vec![5, 3, 9, 1, 7];
        heapify(&mut k);
        assert_eq!(k[0], 1);
        k[0] = 10;
        sift_down(&mut k, 0);
        assert_eq!(k[0], 3);
        let mut u = BlockUse::default();
        u.record(4, 2);
        u.record(4, 3);
        assert_eq!(u.score(4, 2), (2, 1));
        assert_eq!(u.score(5, 9), (0, 0));
        u.clear();
        assert_eq!(u.score(4, 2), (0, 0));
    }
}
