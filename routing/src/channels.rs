//! The channel graph every deadlock-aware engine and the analysis work on:
//! one numbering of directed switch-to-switch cables and of the
//! dependencies between them, and the cycle checks over those
//! dependencies.
//!
//! A *channel* is a directed switch-to-switch cable. A packet that enters a
//! switch by channel `a` and leaves by `b` makes `a` wait for buffer space
//! on `b`: the dependency `a -> b`. Credit-based flow control can deadlock
//! exactly when the dependencies of one VL close a cycle (Dally and Seitz,
//! "Deadlock-free message routing in multiprocessor interconnection
//! networks", IEEE ToC 1987).
//!
//! ## Numbering
//! Switches are numbered by the order the caller gives (the fabric's, or
//! GUID order); channels are numbered switch by switch, each switch's in
//! port order, so that the channels leaving switch `v` are
//! `base[v]..base[v + 1]`. Dependencies through switch `v` are numbered
//! densely as (in-channel row) × (out-channel column): "in over the cable
//! of out-channel `k`, out over out-channel `j`" is
//! `dep_base[v] + k * deg(v) + j`, Σ deg² in all (1.5 M for the 11,664-host
//! fat tree). The dependencies of a set of paths are then a bit set or a
//! count array over that index, with no per-channel lists.

use std::ops::Range;

use crate::fabric::{RoutingFabric, SwitchId};

/// "No channel": a port that leads to no switch, or no next hop.
pub(crate) const NO_CHANNEL: u32 = u32::MAX;

/// Whether a cable from a switch back to itself becomes a channel.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SelfLoops {
    /// As any other cable (tables may route over it, so its dependencies
    /// count).
    Keep,
    /// Left out: an engine that never routes over one.
    Skip,
}

/// Directed switch-to-switch cables of a fabric and the index space of
/// their dependencies; see the module documentation.
pub(crate) struct ChannelGraph {
    /// Channels leaving switch `v` are `base[v]..base[v + 1]`, in port order.
    pub(crate) base: Vec<u32>,
    /// The switch a channel leaves from and the one it leads to.
    pub(crate) tail: Vec<u32>,
    pub(crate) head: Vec<u32>,
    /// The port a channel leaves its switch by.
    pub(crate) port: Vec<u8>,
    /// The reverse of each channel (the same cable the other way).
    pub(crate) rev: Vec<u32>,
    /// Dependencies through switch `v` start at `dep_base[v]` (+ total).
    pub(crate) dep_base: Vec<usize>,
    /// Per switch: the fabric's slot of its port 0 and the number of its
    /// ports ([`RoutingFabric::switch_port_slot`]).
    slot_base: Vec<u32>,
    num_ports: Vec<u8>,
    /// Per fabric switch-port slot: the channel leaving by it, or
    /// [`NO_CHANNEL`].
    slot_chan: Vec<u32>,
}

impl ChannelGraph {
    /// The channels of `f` with switch `v` standing for `order[v]` (every
    /// switch once). O(S + C).
    pub(crate) fn new(f: &RoutingFabric, order: &[SwitchId], loops: SelfLoops) -> ChannelGraph {
        let n = order.len();
        let mut pos = vec![NO_CHANNEL; f.num_switches()];
        for (v, s) in order.iter().enumerate() {
            pos[s.index()] = v as u32;
        }
        let mut base = Vec::with_capacity(n + 1);
        let (mut tail, mut head, mut port) = (Vec::new(), Vec::new(), Vec::new());
        let mut slot_chan = vec![NO_CHANNEL; f.num_switch_port_slots()];
        let mut slot_base = Vec::with_capacity(n);
        let mut num_ports = Vec::with_capacity(n);
        for (v, &s) in order.iter().enumerate() {
            base.push(head.len() as u32);
            slot_base.push(f.switch_port_slot(s, 0) as u32);
            num_ports.push(f.switch(s).num_ports);
            for e in f.switch_neighbors(s) {
                if e.neighbor == s && loops == SelfLoops::Skip {
                    continue;
                }
                slot_chan[f.switch_port_slot(s, e.port)] = head.len() as u32;
                tail.push(v as u32);
                head.push(pos[e.neighbor.index()]);
                port.push(e.port);
            }
        }
        base.push(head.len() as u32);
        let mut rev = vec![NO_CHANNEL; head.len()];
        for &s in order {
            for e in f.switch_neighbors(s) {
                let c = slot_chan[f.switch_port_slot(s, e.port)];
                if c != NO_CHANNEL {
                    rev[c as usize] = slot_chan[f.switch_port_slot(e.neighbor, e.remote_port)];
                    debug_assert_ne!(rev[c as usize], NO_CHANNEL, "cables are symmetric");
                }
            }
        }
        let mut dep_base = Vec::with_capacity(n + 1);
        let mut total = 0usize;
        for v in 0..n {
            dep_base.push(total);
            let g = (base[v + 1] - base[v]) as usize;
            total += g * g;
        }
        dep_base.push(total);
        ChannelGraph { base, tail, head, port, rev, dep_base, slot_base, num_ports, slot_chan }
    }

    /// The channels of `f` numbered in the fabric's switch order.
    pub(crate) fn in_fabric_order(f: &RoutingFabric, loops: SelfLoops) -> ChannelGraph {
        let order: Vec<SwitchId> = f.switch_ids().collect();
        ChannelGraph::new(f, &order, loops)
    }

    pub(crate) fn num_switches(&self) -> usize {
        self.base.len() - 1
    }

    pub(crate) fn num_channels(&self) -> usize {
        self.head.len()
    }

    /// Size of the dependency index.
    pub(crate) fn num_deps(&self) -> usize {
        *self.dep_base.last().unwrap_or(&0)
    }

    /// The channels leaving switch `v`.
    #[inline]
    pub(crate) fn out(&self, v: usize) -> Range<u32> {
        self.base[v]..self.base[v + 1]
    }

    /// [`ChannelGraph::out`] as array indices.
    #[inline]
    pub(crate) fn channels(&self, v: usize) -> Range<usize> {
        self.base[v] as usize..self.base[v + 1] as usize
    }

    #[inline]
    pub(crate) fn degree(&self, v: usize) -> usize {
        (self.base[v + 1] - self.base[v]) as usize
    }

    /// The reverse of channel `c`.
    #[inline]
    pub(crate) fn reverse(&self, c: usize) -> usize {
        self.rev[c] as usize
    }

    /// The channel switch `v` forwards by when its table says `port`, or
    /// [`NO_CHANNEL`] (port 0, unrouted, an end port, an empty or missing
    /// port, a skipped self-loop).
    #[inline]
    pub(crate) fn chan_of_port(&self, v: usize, port: u8) -> u32 {
        if port > self.num_ports[v] {
            return NO_CHANNEL;
        }
        self.slot_chan[self.slot_base[v] as usize + usize::from(port)]
    }

    /// The first dependency out of channel `c`: `c -> base[head[c]] + j`
    /// is `dep_row(c) + j`.
    #[inline]
    pub(crate) fn dep_row(&self, c: usize) -> usize {
        let v = self.head[c] as usize;
        self.dep_base[v] + (self.rev[c] - self.base[v]) as usize * self.degree(v)
    }

    /// The dependency "`c_in` then `c_out`" (head of `c_in` = tail of
    /// `c_out`).
    #[inline]
    pub(crate) fn dep(&self, c_in: usize, c_out: usize) -> usize {
        debug_assert_eq!(self.head[c_in], self.tail[c_out]);
        let v = self.head[c_in] as usize;
        let first = self.base[v];
        let deg = (self.base[v + 1] - first) as usize;
        self.dep_base[v] + (self.rev[c_in] - first) as usize * deg + (c_out - first as usize)
    }
}
