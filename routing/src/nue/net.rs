//! The switch graph nue routes on: directed channels, connected parts
//! and the index space of the complete dependency graph.

use crate::fabric::{RoutingFabric, SwitchId};

use super::cdg::{BLOCKED, UNUSED};
use super::NONE;

/// The switch graph with directed channels and the complete dependency
/// graph's index space.
pub(super) struct Net {
    /// Internal index (GUID order) -> fabric switch.
    pub(super) order: Vec<SwitchId>,
    /// Out-channels of switch v: `ch_base[v]..ch_base[v + 1]`, port order.
    pub(super) ch_base: Vec<u32>,
    pub(super) ch_tail: Vec<u32>,
    pub(super) ch_head: Vec<u32>,
    pub(super) ch_port: Vec<u8>,
    pub(super) ch_rev: Vec<u32>,
    /// Dependencies through switch v: `dep_base[v] + k * deg + j` is "in
    /// over the cable of out-channel k, out over out-channel j".
    pub(super) dep_base: Vec<usize>,
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
        let mut pos = vec![0u32; n];
        for (i, s) in order.iter().enumerate() {
            pos[s.index()] = i as u32;
        }
        let mut ch_base = Vec::with_capacity(n + 1);
        let (mut ch_tail, mut ch_head, mut ch_port, mut remote) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        for (v, &s) in order.iter().enumerate() {
            ch_base.push(ch_tail.len() as u32);
            for e in f.switch_neighbors(s) {
                // A cable looped back to its own switch never helps a route.
                if e.neighbor == s {
                    continue;
                }
                ch_tail.push(v as u32);
                ch_head.push(pos[e.neighbor.index()]);
                ch_port.push(e.port);
                remote.push(e.remote_port);
            }
        }
        ch_base.push(ch_tail.len() as u32);
        let ch_rev = (0..ch_tail.len())
            .map(|c| {
                let b = ch_head[c] as usize;
                let range = ch_base[b] as usize..ch_base[b + 1] as usize;
                let i = ch_port[range.clone()].binary_search(&remote[c]).expect("a cable has two ends");
                (range.start + i) as u32
            })
            .collect::<Vec<u32>>();
        let mut dep_base = Vec::with_capacity(n + 1);
        let mut total = 0usize;
        for v in 0..n {
            dep_base.push(total);
            let g = (ch_base[v + 1] - ch_base[v]) as usize;
            total += g * g;
        }
        dep_base.push(total);
        let mut template = vec![UNUSED; total];
        for v in 0..n {
            let (b, g) = (ch_base[v] as usize, (ch_base[v + 1] - ch_base[v]) as usize);
            for k in 0..g {
                for j in 0..g {
                    // In from the neighbour behind cable k, out to the same
                    // neighbour (over any cable): a U-turn.
                    if ch_head[b + k] == ch_head[b + j] {
                        template[dep_base[v] + k * g + j] = BLOCKED;
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
                for c in ch_base[u]..ch_base[u + 1] {
                    let w = ch_head[c as usize] as usize;
                    if part[w] == NONE {
                        part[w] = id;
                        nodes.push(w as u32);
                    }
                }
            }
            parts.push(nodes);
        }
        Net { order, ch_base, ch_tail, ch_head, ch_port, ch_rev, dep_base, hosts, part, parts, template }
    }

    pub(super) fn n(&self) -> usize {
        self.order.len()
    }
    pub(super) fn channels(&self) -> usize {
        self.ch_tail.len()
    }
    pub(super) fn deg(&self, v: usize) -> usize {
        (self.ch_base[v + 1] - self.ch_base[v]) as usize
    }
    pub(super) fn out(&self, v: usize) -> std::ops::Range<u32> {
        self.ch_base[v]..self.ch_base[v + 1]
    }
    /// The dependency "`c_in` then `c_out`" (head of `c_in` = tail of `c_out`).
    #[inline(always)]
    pub(super) fn dep(&self, c_in: u32, c_out: u32) -> usize {
        let v = self.ch_head[c_in as usize] as usize;
        debug_assert_eq!(self.ch_tail[c_out as usize] as usize, v);
        let k = (self.ch_rev[c_in as usize] - self.ch_base[v]) as usize;
        let j = (c_out - self.ch_base[v]) as usize;
        self.dep_base[v] + k * self.deg(v) + j
    }
}
