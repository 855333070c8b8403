//! Following the forwarding tables: one packet hop by hop ([`trace`]), and
//! every switch towards one LID at once with memoised walks ([`Walker`],
//! which [`super::validate`] runs once per LID).

use serde::Serialize;

use super::{BlackHoleReason, Failure};
use crate::fabric::{NodeRef, PortEnd, RoutingFabric, SwitchId};
use crate::lft::{Routes, UNROUTED};

/// One hop of a [`trace`]: the switch and the port it forwarded by.
pub type Hop = (SwitchId, u8);

/// Where a single traced packet ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub enum TraceEnd {
    Delivered(NodeRef),
    WrongDestination(NodeRef),
    BlackHole {
        switch: SwitchId,
        port: u8,
        reason: BlackHoleReason,
    },
    /// The switch visited twice.
    Loop(SwitchId),
    /// The source end port has no cable.
    NoCable,
}

/// The hop-by-hop path of one packet.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Trace {
    pub hops: Vec<Hop>,
    pub end: TraceEnd,
}

/// The path a packet from `source` to `dlid` takes. O(path length).
pub fn trace(f: &RoutingFabric, routes: &Routes, source: NodeRef, dlid: u16) -> Trace {
    let owner = f.lid_owner(dlid);
    let mut hops = Vec::new();
    let mut cur = match source {
        NodeRef::Switch(s) => s,
        NodeRef::End(e) => match f.end_peer(e) {
            None => return Trace { hops, end: TraceEnd::NoCable },
            Some(PortEnd::End(o)) => return Trace { hops, end: arrive(owner, NodeRef::End(o)) },
            Some(PortEnd::Switch(s, _)) => s,
        },
    };
    let mut seen = vec![false; f.num_switches()];
    loop {
        if std::mem::replace(&mut seen[cur.index()], true) {
            return Trace { hops, end: TraceEnd::Loop(cur) };
        }
        match step(f, routes, cur, dlid) {
            Step::Terminal(port, end) => {
                hops.push((cur, port));
                let end = match end {
                    Terminal::Reached(node) => arrive(owner, node),
                    Terminal::Dropped(reason) => TraceEnd::BlackHole { switch: cur, port, reason },
                };
                return Trace { hops, end };
            }
            Step::Next(port, n) => {
                hops.push((cur, port));
                cur = n;
            }
        }
    }
}

fn arrive(owner: Option<NodeRef>, reached: NodeRef) -> TraceEnd {
    if owner == Some(reached) {
        TraceEnd::Delivered(reached)
    } else {
        TraceEnd::WrongDestination(reached)
    }
}

enum Terminal {
    /// The packet leaves the switch fabric at this node.
    Reached(NodeRef),
    Dropped(BlackHoleReason),
}

enum Step {
    Terminal(u8, Terminal),
    Next(u8, SwitchId),
}

/// One LFT lookup at switch `s`.
#[inline]
fn step(f: &RoutingFabric, routes: &Routes, s: SwitchId, dlid: u16) -> Step {
    let port = routes.port(s, dlid);
    if port == UNROUTED {
        return Step::Terminal(port, Terminal::Dropped(BlackHoleReason::Unrouted));
    }
    if port == 0 {
        return Step::Terminal(0, Terminal::Reached(NodeRef::Switch(s)));
    }
    if port > f.switch(s).num_ports {
        return Step::Terminal(port, Terminal::Dropped(BlackHoleReason::PortOutOfRange));
    }
    match f.switch_peer(s, port) {
        None => Step::Terminal(port, Terminal::Dropped(BlackHoleReason::NotCabled)),
        Some(PortEnd::End(e)) => Step::Terminal(port, Terminal::Reached(NodeRef::End(e))),
        Some(PortEnd::Switch(n, _)) => Step::Next(port, n),
    }
}

pub(super) const K_DELIVERED: u8 = 0;
pub(super) const K_LOOP: u8 = 1;
pub(super) const K_BLACK_HOLE: u8 = 2;
const K_WRONG: u8 = 3;
pub(super) const NONE: u32 = u32::MAX;

/// Per-LID scratch, reused: stamps avoid clearing O(S) arrays per LID.
pub(super) struct Walker {
    pub(super) stamp: u32,
    pub(super) done: Vec<u32>,
    on_path: Vec<u32>,
    path_pos: Vec<u32>,
    pub(super) kind: Vec<u8>,
    pub(super) hops: Vec<u32>,
    pub(super) term: Vec<u32>,
    pub(super) next: Vec<u32>,
    /// Switches in the order their outcome was fixed: every switch comes
    /// after its next hop, so the reverse order visits sources before sinks.
    pub(super) resolved: Vec<u32>,
    path: Vec<u32>,
    /// Failure terminals of the current LID (sources filled in later).
    pub(super) terms: Vec<Failure>,
}

impl Walker {
    pub(super) fn new(s: usize) -> Walker {
        Walker {
            stamp: 0,
            done: vec![0; s],
            on_path: vec![0; s],
            path_pos: vec![0; s],
            kind: vec![0; s],
            hops: vec![0; s],
            term: vec![NONE; s],
            next: vec![NONE; s],
            resolved: Vec::with_capacity(s),
            path: Vec::new(),
            terms: Vec::new(),
        }
    }

    pub(super) fn begin(&mut self) {
        self.stamp += 1;
        self.resolved.clear();
        self.terms.clear();
    }

    fn fix(&mut self, s: usize, kind: u8, hops: u32, term: u32) {
        self.done[s] = self.stamp;
        self.kind[s] = kind;
        self.hops[s] = hops;
        self.term[s] = term;
        self.resolved.push(s as u32);
    }

    /// Resolves switch `start` and everything on its forwarding path.
    pub(super) fn walk(&mut self, f: &RoutingFabric, routes: &Routes, owner: Option<NodeRef>, dlid: u16, start: usize) {
        let stamp = self.stamp;
        self.path.clear();
        let mut cur = start;
        // Outcome of the first node past the path: (kind, hops, term).
        let (kind, mut hops, term) = loop {
            if self.done[cur] == stamp {
                break (self.kind[cur], self.hops[cur], self.term[cur]);
            }
            if self.on_path[cur] == stamp {
                let cycle =
                    self.path[self.path_pos[cur] as usize..].iter().map(|&s| f.switches()[s as usize].guid).collect();
                self.terms.push(Failure::Loop { lid: dlid, cycle, sources: 0 });
                // The path's last node points back into it: resolve it and
                // the rest below as looping.
                let last = self.path.pop().expect("a cycle has a node");
                let t = self.terms.len() as u32 - 1;
                self.fix(last as usize, K_LOOP, 0, t);
                break (K_LOOP, 0, t);
            }
            self.on_path[cur] = stamp;
            self.path_pos[cur] = self.path.len() as u32;
            self.path.push(cur as u32);
            let sid = SwitchId(cur as u32);
            match step(f, routes, sid, dlid) {
                Step::Next(_, n) => {
                    self.next[cur] = n.0;
                    cur = n.index();
                }
                Step::Terminal(port, t) => {
                    self.next[cur] = NONE;
                    let guid = f.switches()[cur].guid;
                    let (k, h, tid) = match t {
                        Terminal::Reached(node) if Some(node) == owner => {
                            (K_DELIVERED, u32::from(matches!(node, NodeRef::End(_))), NONE)
                        }
                        Terminal::Reached(node) => {
                            let reached = f.guid_of(node);
                            self.terms.push(Failure::WrongDestination {
                                lid: dlid,
                                switch: guid,
                                port,
                                reached,
                                sources: 0,
                            });
                            (K_WRONG, 0, self.terms.len() as u32 - 1)
                        }
                        Terminal::Dropped(reason) => {
                            self.terms.push(Failure::BlackHole { lid: dlid, switch: guid, port, reason, sources: 0 });
                            (K_BLACK_HOLE, 0, self.terms.len() as u32 - 1)
                        }
                    };
                    self.path.pop();
                    self.fix(cur, k, h, tid);
                    break (k, h, tid);
                }
            }
        };
        while let Some(s) = self.path.pop() {
            hops += 1;
            self.fix(s as usize, kind, hops, term);
        }
    }
}
