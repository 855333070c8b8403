//! Credit-loop check for tables that contain detours.
//!
//! Up/down routes cannot close a loop in the channel dependency graph
//! (every route climbs, then descends, so ordering channels as "all up
//! channels by level, then all down channels by level" makes every
//! dependency point forward). Detours in degraded trees turn from down to up
//! once, which that order no longer covers, so their tables are checked
//! explicitly.

use crate::fabric::{PortEnd, RoutingFabric, SwitchId};
use crate::lft::{Routes, UNROUTED};

use super::detect::Tree;

/// A cycle of channels (switch, output port) in the channel dependency graph
/// of `routes` on one virtual lane, if there is one. Every switch counts as
/// a source for every LID, so every table entry adds its dependency.
///
/// Cost: O(L · S) to collect dependencies into a bit set of 256 bits per
/// channel, then one depth-first search over the channels.
pub(super) fn credit_loop(f: &RoutingFabric, t: &Tree, routes: &Routes) -> Option<Vec<(SwitchId, u8)>> {
    let slots = f.num_switch_port_slots();
    let mut peer = vec![u32::MAX; slots];
    let mut owner = vec![(0u32, 0u8); slots];
    for &x in &t.by_order {
        let s = SwitchId(x);
        for (p, end) in f.switch_ports(s).iter().enumerate() {
            let c = f.switch_port_slot(s, p as u8);
            owner[c] = (x, p as u8);
            if let Some(PortEnd::Switch(n, _)) = *end {
                if n != s {
                    peer[c] = n.0;
                }
            }
        }
    }
    const WORDS: usize = 4;
    let ns = f.num_switches();
    let slot0: Vec<usize> = (0..ns).map(|s| f.switch_port_slot(SwitchId(s as u32), 0)).collect();
    let nports: Vec<u8> = f.switches().iter().map(|s| s.num_ports).collect();
    let mut deps = vec![0u64; slots * WORDS];
    for &x in &t.by_order {
        let xu = x as usize;
        let Some(table) = routes.lfts.get(xu) else { continue };
        for (lid, &p) in table.ports.iter().enumerate() {
            // 0 is the switch itself, UNROUTED (255) is past any port.
            if p == 0 || p > nports[xu] {
                continue;
            }
            let c = slot0[xu] + usize::from(p);
            let n = peer[c] as usize;
            if n == u32::MAX as usize {
                continue;
            }
            let q = routes.lfts[n].ports.get(lid).copied().unwrap_or(UNROUTED);
            if q == 0 || q > nports[n] || peer[slot0[n] + usize::from(q)] == u32::MAX {
                continue;
            }
            deps[c * WORDS + usize::from(q / 64)] |= 1 << (q % 64);
        }
    }

    // Iterative depth-first search: 0 = new, 1 = on the stack, 2 = done.
    let mut color = vec![0u8; slots];
    let mut stack: Vec<(usize, usize)> = Vec::new();
    for start in 0..slots {
        if peer[start] == u32::MAX || color[start] != 0 {
            continue;
        }
        color[start] = 1;
        stack.push((start, 0));
        while let Some(&mut (c, ref mut bit)) = stack.last_mut() {
            let mut next = None;
            while *bit < WORDS * 64 {
                let q = *bit;
                *bit += 1;
                if deps[c * WORDS + q / 64] >> (q % 64) & 1 == 1 {
                    next = Some(f.switch_port_slot(SwitchId(peer[c]), q as u8));
                    break;
                }
            }
            match next {
                Some(d) if color[d] == 1 => {
                    let from = stack.iter().position(|&(e, _)| e == d).unwrap_or(0);
                    return Some(stack[from..].iter().map(|&(e, _)| (SwitchId(owner[e].0), owner[e].1)).collect());
                }
                Some(d) if color[d] == 0 => {
                    color[d] = 1;
                    stack.push((d, 0));
                }
                Some(_) => {}
                None => {
                    color[c] = 2;
                    stack.pop();
                }
            }
        }
    }
    None
}
