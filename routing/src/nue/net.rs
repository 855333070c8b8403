//! The switch graph nue routes on: directed channels, connected parts
//! and the index space of the complete dependency graph.

use crate::channels::{ChannelGraph, SelfLoops};
use crate::fabric::{RoutingFabric, SwitchId};

use super::cdg::{BLOCKED, UNUSED};
use super::NONE;

/// The switch graph with directed channels and the complete dependency
/// graph's index space.
pub(super) struct Net {
    /// Internal index (GUID order) -> fabric switch.
    pub(super) order: Vec<SwitchId>,
    /// Channels numbered in internal order, self-loops left out (a cable
    /// looped back to its own switch never helps a route).
    pub(super) ch: ChannelGraph,
    /// End ports cabled to each switch ([`RoutingFabric::end_ports_per_switch`]
    /// in internal order).
    pub(super) hosts: Vec<u64>,
    /// Connected parts: part of each switch, switches of each part.
    pub(super) part: Vec<u32>,
    pub(super) parts: Vec<Vec<u32>>,
    /// Dependency states with U-turns blocked and everything else unused.
    pub(super) template: Vec<u8>,
}

impl Net {
    pub(super) fn new(f: &RoutingFabric) -> Net {
        let n = f.num_switches();
        let mut order: Vec<SwitchId> = f.switch_ids().collect();
        order.sort_by_key(|s| f.switch(*s).guid);
        let ch = ChannelGraph::new(f, &order, SelfLoops::Skip);
        let mut template = vec![UNUSED; ch.num_deps()];
        for v in 0..n {
            let (b, g) = (ch.base[v] as usize, ch.degree(v));
            for k in 0..g {
                for j in 0..g {
                    // In from the neighbour behind cable k, out to the same
                    // neighbour (over any cable): a U-turn.
                    if ch.head[b + k] == ch.head[b + j] {
                        template[ch.dep_base[v] + k * g + j] = BLOCKED;
                    }
                }
            }
        }
        let per_switch = f.end_ports_per_switch();
        let hosts = order.iter().map(|s| per_switch[s.index()]).collect();
        let mut part = vec![NONE; n];
        let mut parts = Vec::new();
        for root in 0..n {
            if part[root] != NONE {
                continue;
            }
            let id = parts.len() as u32;
            let mut nodes = vec![root as u32];
            part[root] = id;
            let mut head = 0;
            while head < nodes.len() {
                let u = nodes[head] as usize;
                head += 1;
                for c in ch.channels(u) {
                    let w = ch.head[c] as usize;
                    if part[w] == NONE {
                        part[w] = id;
                        nodes.push(w as u32);
                    }
                }
            }
            parts.push(nodes);
        }
        Net { order, ch, hosts, part, parts, template }
    }

    pub(super) fn n(&self) -> usize {
        self.order.len()
    }

    /// The dependency "`c_in` then `c_out`" ([`ChannelGraph::dep`]).
    #[inline(always)]
    pub(super) fn dep(&self, c_in: u32, c_out: u32) -> usize {
        self.ch.dep(c_in as usize, c_out as usize)
    }
}
