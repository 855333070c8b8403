//! The shift pattern: end port i to end port i + k, for every k.

use std::fmt;

use serde::Serialize;

use super::DirectedLink;
use crate::fabric::{EndPortId, PortEnd, RoutingFabric, SwitchId};
use crate::lft::{Routes, UNROUTED};

/// How end ports are numbered for the shift pattern.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
pub enum ShiftOrder {
    /// Ascending port GUID.
    #[default]
    Guid,
    /// Ascending base LID.
    Lid,
}

/// Link loads of the shift pattern: with the N end ports numbered
/// 0..N, shift k sends one flow from every end port i to end port
/// (i + k) mod N, to its base LID. On a full fat tree a good routing
/// carries every shift with at most one flow per link.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ShiftBalance {
    pub order: ShiftOrder,
    /// End ports taking part: those with a LID that hang off a switch.
    pub end_ports: usize,
    /// Shifts evaluated (N - 1 unless sampled).
    pub shifts: usize,
    /// Only an evenly spaced subset of the shifts was evaluated.
    pub sampled: bool,
    /// The shift whose busiest link carries the most flows (the lowest k
    /// on ties), and that many flows.
    pub worst_shift: usize,
    pub worst_max: u64,
    /// The busiest link of the worst shift.
    pub worst_link: Option<DirectedLink>,
    /// The least, and the mean, over the shifts of the busiest link's flows.
    pub best_max: u64,
    pub mean_max: f64,
    /// Flows that did not reach their destination (broken tables).
    pub undelivered: u64,
}

impl fmt::Display for ShiftBalance {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "shift pattern ({} end ports by {:?}, {} shift(s){}): busiest link per shift: worst {} (shift {}",
            self.end_ports,
            self.order,
            self.shifts,
            if self.sampled { ", sampled" } else { "" },
            self.worst_max,
            self.worst_shift,
        )?;
        if let Some(l) = self.worst_link {
            write!(f, ", {:#018x} port {} -> {:#018x}", l.from, l.port, l.to)?;
        }
        write!(f, "), mean {:.2}, best {}", self.mean_max, self.best_max)?;
        if self.undelivered > 0 {
            write!(f, "; {} flows NOT delivered", self.undelivered)?;
        }
        Ok(())
    }
}

/// Evaluates the shift pattern for every shift k in 1..N, or for at most
/// `max_shifts` evenly spaced ones. Loads are counted on switch output
/// ports (to switches and to end ports); an end port's own link carries one
/// flow per shift. Cost: O(N·H) per shift for paths of H hops, so
/// O(N²·H) for all of them.
pub fn shift_balance(f: &RoutingFabric, routes: &Routes, order: ShiftOrder, max_shifts: Option<usize>) -> ShiftBalance {
    const NONE: u32 = u32::MAX;
    let mut ports: Vec<(u64, EndPortId, u32, u16)> = f
        .end_port_ids()
        .filter_map(|e| {
            let ep = f.end_port(e);
            let (s, _) = f.attached_switch(e)?;
            (ep.base_lid != 0).then(|| {
                let key = match order {
                    ShiftOrder::Guid => ep.port_guid,
                    ShiftOrder::Lid => u64::from(ep.base_lid),
                };
                (key, e, s.0, ep.base_lid)
            })
        })
        .collect();
    ports.sort_unstable_by_key(|p| (p.0, p.1));
    let n = ports.len();
    let all = n.saturating_sub(1);
    let ks: Vec<usize> = match max_shifts {
        Some(m) if m < all => (0..m).map(|j| 1 + j * all / m).collect(),
        _ => (1..=all).collect(),
    };

    // Per switch-port slot: the switch it leads to, or NONE.
    let mut next_switch = vec![NONE; f.num_switch_port_slots()];
    for s in f.switch_ids() {
        for e in f.switch_neighbors(s) {
            next_switch[f.switch_port_slot(s, e.port)] = e.neighbor.0;
        }
    }
    let base: Vec<usize> = f.switch_ids().map(|s| f.switch_port_slot(s, 0)).collect();
    let num_ports: Vec<u8> = f.switches().iter().map(|s| s.num_ports).collect();
    let max_hops = f.num_switches();

    // Shifts are evaluated BATCH at a time, the inner loop over the shifts
    // of a batch: one source's flows then go to consecutive end ports,
    // whose LIDs are usually close, so the table reads of a batch stay in
    // a few cache lines per switch. Counters are laid out slot-major for
    // the same reason. A link carries at most N < 2^16 flows per shift
    // (one per end port, and LIDs are 16-bit).
    const BATCH: usize = 32;
    let mut load = vec![0u16; f.num_switch_port_slots() * BATCH];
    let mut out = ShiftBalance {
        order,
        end_ports: n,
        shifts: ks.len(),
        sampled: ks.len() < all,
        worst_shift: 0,
        worst_max: 0,
        worst_link: None,
        best_max: 0,
        mean_max: 0.0,
        undelivered: 0,
    };
    let mut sum_max = 0u64;
    let mut first = true;
    for batch in ks.chunks(BATCH) {
        let mut kmax = [0u16; BATCH];
        let mut kslot = [NONE; BATCH];
        for (i, &(_, _, src, _)) in ports.iter().enumerate() {
            for (b, &k) in batch.iter().enumerate() {
                let (_, dst, _, dlid) = ports[(i + k) % n];
                let mut s = src as usize;
                let mut delivered = false;
                for _ in 0..max_hops {
                    let port = routes.lfts.get(s).map_or(UNROUTED, |l| l.port(dlid));
                    if port == 0 || port == UNROUTED || port > num_ports[s] {
                        break;
                    }
                    let slot = base[s] + usize::from(port);
                    let l = &mut load[slot * BATCH + b];
                    *l += 1;
                    if *l > kmax[b] {
                        kmax[b] = *l;
                        kslot[b] = slot as u32;
                    }
                    match next_switch[slot] {
                        NONE => {
                            delivered = f.switch_peer(SwitchId(s as u32), port) == Some(PortEnd::End(dst));
                            break;
                        }
                        nxt => s = nxt as usize,
                    }
                }
                if !delivered {
                    out.undelivered += 1;
                }
            }
        }
        load.fill(0);
        for (b, &k) in batch.iter().enumerate() {
            let m = u64::from(kmax[b]);
            sum_max += m;
            if first || m < out.best_max {
                out.best_max = m;
            }
            if first || m > out.worst_max {
                out.worst_max = m;
                out.worst_shift = k;
                out.worst_link = (kslot[b] != NONE).then(|| slot_link(f, kslot[b] as usize));
            }
            first = false;
        }
    }
    if !ks.is_empty() {
        out.mean_max = sum_max as f64 / ks.len() as f64;
    }
    out
}

/// The directed link leaving switch-port slot `slot`.
fn slot_link(f: &RoutingFabric, slot: usize) -> DirectedLink {
    // Slots are laid out switch by switch; find the owner by bisection.
    let ns = f.num_switches();
    let (mut lo, mut hi) = (0usize, ns);
    while hi - lo > 1 {
        let mid = (lo + hi) / 2;
        if f.switch_port_slot(SwitchId(mid as u32), 0) <= slot {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    let s = SwitchId(lo as u32);
    let port = (slot - f.switch_port_slot(s, 0)) as u8;
    let to = match f.switch_peer(s, port) {
        Some(PortEnd::Switch(n, _)) => f.switch(n).guid,
        Some(PortEnd::End(e)) => f.end_port(e).port_guid,
        None => 0,
    };
    DirectedLink { from: f.switch(s).guid, port, to }
}
