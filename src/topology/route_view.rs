//! The routing view of a topology file or generator spec: a
//! [`RoutingFabric`] with LIDs given the way an SM would give them, so
//! engines and the analysis run offline on the same input as ibsim.
//!
//! What is in the view: every switch, and every *cabled* CA or router port
//! (an SM never discovers an uncabled port, so it gets no LID), with every
//! cable and its width and speed. Switch names and end-port names are the
//! nodes' descriptions, as OpenSM prints them in its dumps.
//!
//! LIDs ([`LidPlan`]):
//! - `NodeOrder`: 1, 2, 3... in the file's node order, a switch one LID
//!   (port 0), each cabled CA port 2^LMC aligned ones. Simple and
//!   independent of GUIDs; the default for offline runs.
//! - `Sm`: what ibsm's LID manager ([`crate::lid::assign_lids`]) gives on a
//!   cold fabric: the SM's port first, then ascending port GUID; with a
//!   persisted map (OpenSM's `guid2lid`, or the LIDs read from a dump) its
//!   entries first. Used to analyse OpenSM's tables on OpenSM's LIDs.

use std::collections::BTreeMap;

use ibsm_routing::dump::{LidClaim, NodeTypeText};
use ibsm_routing::fabric::{EndPort, EndPortId, FabricError, LinkRate, PortEnd, RoutingFabric, Switch, SwitchId};

use super::{NodeIdx, NodeKind, PortRef, Topology};
use crate::lid::{assign_lids, Guid2Lid, LidError, LidPolicy, LidRange, PortRole, SweptPort};
use crate::types::{Guid, Lid};

/// How the view's ports get their LIDs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LidPlan {
    /// 1..N in node order; see the module documentation.
    NodeOrder { lmc: u8 },
    /// ibsm's LID manager on a cold fabric. `sm_port` defaults to the first
    /// cabled port of the first CA (where `ibsm topology sm-node` puts the
    /// SM); `persisted` entries are honoured first, as guid2lid is.
    Sm { sm_port: Option<Guid>, persisted: Guid2Lid, lmc: u8 },
}

impl Default for LidPlan {
    fn default() -> Self {
        LidPlan::NodeOrder { lmc: 0 }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum RouteViewError {
    #[error("the topology does not make a routing fabric: {0}")]
    Fabric(#[from] FabricError),
    #[error("LID assignment failed: {0}")]
    Lid(#[from] LidError),
    #[error("LMC {0} is out of range (0..=7)")]
    BadLmc(u8),
    /// A LID plan entry (guid2lid line, dump line) names a port the
    /// topology lacks.
    #[error("{origin}: GUID {guid} (LIDs {lids}) is no port of the topology")]
    UnknownGuid { origin: String, guid: Guid, lids: String },
    /// A planned range could not be given (taken by another entry, or not
    /// aligned for the LMC).
    #[error("{origin}: port {guid} cannot have LIDs {wanted}: {why}")]
    Unplaceable { origin: String, guid: Guid, wanted: String, why: String },
    #[error("SM port {0} is no cabled port of the topology")]
    UnknownSmPort(Guid),
}

/// A topology's routing fabric, with the maps back to the topology.
#[derive(Debug, Clone)]
pub struct RouteView {
    pub fabric: RoutingFabric,
    /// The topology node of each [`SwitchId`].
    pub switch_nodes: Vec<NodeIdx>,
    /// The topology port of each [`EndPortId`].
    pub end_ports: Vec<PortRef>,
    /// Router ports are written as routers in dumps.
    pub end_kinds: Vec<NodeKind>,
}

impl RouteView {
    /// The node type word OpenSM's dumps use for an end port.
    pub fn end_kind_text(&self, e: EndPortId) -> NodeTypeText {
        match self.end_kinds.get(e.index()) {
            Some(NodeKind::Router) => NodeTypeText::Router,
            _ => NodeTypeText::ChannelAdapter,
        }
    }
}

/// One port of the view before LIDs: its GUID (switch: port 0) and role.
struct Member {
    guid: Guid,
    role: PortRole,
}

/// Builds the routing view of `topo` with LIDs from `plan`.
pub fn route_view(topo: &Topology, plan: &LidPlan) -> Result<RouteView, RouteViewError> {
    let idx = topo.index();
    // Members in node order: switches and cabled CA/router ports.
    let mut members: Vec<(PortRef, Member)> = Vec::new();
    for (i, node) in topo.nodes.iter().enumerate() {
        let n = NodeIdx(i);
        match node.kind {
            NodeKind::Switch => members.push((
                PortRef { node: n, port: 0 },
                Member { guid: node.port_guid(0), role: PortRole::SwitchPort0 { enhanced: node.enhanced_port0 } },
            )),
            NodeKind::Ca | NodeKind::Router => {
                for port in 1..=node.num_ports {
                    let p = PortRef { node: n, port };
                    if idx.neighbor(p).is_some() {
                        members.push((p, Member { guid: node.port_guid(port), role: PortRole::EndPort }));
                    }
                }
            }
        }
    }

    let ranges: Vec<(u16, u8)> = match plan {
        LidPlan::NodeOrder { lmc } => {
            let policy = LidPolicy::new(*lmc).map_err(|_| RouteViewError::BadLmc(*lmc))?;
            let mut next: u32 = 1;
            let mut out = Vec::with_capacity(members.len());
            for (_, m) in &members {
                let l = policy.lmc_for(m.role);
                let span = 1u32 << l;
                let base = next.div_ceil(span) * span;
                if base + span - 1 > 0xBFFF {
                    let unassigned = members.iter().skip(out.len()).map(|(_, m)| m.guid).collect();
                    return Err(LidError::Exhausted { unassigned }.into());
                }
                next = base + span;
                out.push((base as u16, l));
            }
            out
        }
        LidPlan::Sm { sm_port, persisted, lmc } => {
            let policy = LidPolicy::new(*lmc).map_err(|_| RouteViewError::BadLmc(*lmc))?;
            let swept: Vec<SweptPort> =
                members.iter().map(|(_, m)| SweptPort { guid: m.guid, role: m.role, lid: Lid(0), lmc: 0 }).collect();
            let sm = match sm_port {
                Some(g) => {
                    if !members.iter().any(|(_, m)| m.guid == *g) {
                        return Err(RouteViewError::UnknownSmPort(*g));
                    }
                    *g
                }
                None => members
                    .iter()
                    .find(|(p, _)| topo.node(p.node).kind == NodeKind::Ca)
                    .or(members.first())
                    .map_or(Guid(0), |(_, m)| m.guid),
            };
            let a = assign_lids(&swept, persisted, sm, &policy);
            if let Some(e) = a.error {
                return Err(e.into());
            }
            members
                .iter()
                .map(|(_, m)| {
                    let r = a.ranges.get(&m.guid).copied().expect("assign_lids gives every port a range or an error");
                    (r.base().0, r.lmc())
                })
                .collect()
        }
    };

    let mut b = RoutingFabric::builder();
    let mut switch_of: BTreeMap<usize, SwitchId> = BTreeMap::new();
    let mut end_of: BTreeMap<PortRef, EndPortId> = BTreeMap::new();
    let mut switch_nodes = Vec::new();
    let mut end_ports = Vec::new();
    let mut end_kinds = Vec::new();
    for ((p, _), (base, lmc)) in members.iter().zip(&ranges) {
        let node = topo.node(p.node);
        match node.kind {
            NodeKind::Switch => {
                let mut sw = Switch::new(node.node_guid.0, node.num_ports, *base).with_name(node.description.clone());
                if node.enhanced_port0 {
                    sw = sw.with_enhanced_port0(*lmc);
                }
                switch_of.insert(p.node.0, b.add_switch(sw)?);
                switch_nodes.push(p.node);
            }
            NodeKind::Ca | NodeKind::Router => {
                let ep = EndPort::new(node.node_guid.0, node.port_guid(p.port).0, p.port, *base)
                    .with_lmc(*lmc)
                    .with_name(node.description.clone());
                end_of.insert(*p, b.add_end_port(ep)?);
                end_ports.push(*p);
                end_kinds.push(node.kind);
            }
        }
    }
    let end = |p: PortRef| -> Option<PortEnd> {
        match switch_of.get(&p.node.0) {
            Some(&s) => Some(PortEnd::Switch(s, p.port)),
            None => end_of.get(&p).map(|&e| PortEnd::End(e)),
        }
    };
    for l in &topo.links {
        if let (Some(a), Some(z)) = (end(l.a), end(l.b)) {
            b.connect_with(a, z, LinkRate { width: l.width, speed: l.speed })?;
        }
    }
    Ok(RouteView { fabric: b.build()?, switch_nodes, end_ports, end_kinds })
}

/// Turns a dump's LID claims into a persisted map for [`LidPlan::Sm`]:
/// each port's LIDs become the smallest aligned 2^LMC range holding them
/// (LIDs of an LMC range that no table routes do not appear in a dump).
/// Switches may be named by node GUID (block headers) or port GUID
/// (comments). Returns the map and the LMC the claims imply.
pub fn claims_to_guid2lid(topo: &Topology, claims: &[LidClaim], file: &str) -> Result<(Guid2Lid, u8), RouteViewError> {
    let idx = topo.index();
    let mut map = Guid2Lid::new();
    let mut lmc = 0u8;
    let mut seen: BTreeMap<Guid, (LidRange, usize)> = BTreeMap::new();
    for c in claims {
        let lids = c.lids.iter().map(|l| format!("{l:#06x}")).collect::<Vec<_>>().join(",");
        let origin = format!("{file}:{}", c.line);
        // The port GUID the LID manager knows the port by.
        let (guid, is_switch) = match idx.port_by_guid(Guid(c.guid)) {
            Some(p) => (topo.node(p.node).port_guid(p.port), topo.node(p.node).kind == NodeKind::Switch),
            None => match idx.node_by_guid(Guid(c.guid)) {
                Some(n) if topo.node(n).kind == NodeKind::Switch => (topo.node(n).port_guid(0), true),
                _ => return Err(RouteViewError::UnknownGuid { origin, guid: Guid(c.guid), lids }),
            },
        };
        let (Some(&min), Some(&max)) = (c.lids.first(), c.lids.last()) else { continue };
        let span = u32::from(max) - u32::from(min) + 1;
        let l = span.next_power_of_two().trailing_zeros() as u8;
        let base = min & !((1u16 << l.min(15)) - 1);
        let range = LidRange::new(Lid(base), l).map_err(|e| RouteViewError::Unplaceable {
            origin: origin.clone(),
            guid,
            wanted: lids.clone(),
            why: e.to_string(),
        })?;
        // A switch named by both its node GUID and its port GUID: one range.
        if let Some((prev, line)) = seen.get(&guid) {
            if *prev != range {
                return Err(RouteViewError::Unplaceable {
                    origin,
                    guid,
                    wanted: lids,
                    why: format!("line {line} gives it {prev}"),
                });
            }
            continue;
        }
        map.insert(guid, range).map_err(|o| RouteViewError::Unplaceable {
            origin: origin.clone(),
            guid,
            wanted: lids.clone(),
            why: o.to_string(),
        })?;
        seen.insert(guid, (range, c.line));
        if !is_switch {
            lmc = lmc.max(l);
        }
    }
    Ok((map, lmc))
}

/// Checks that every port `persisted` names got exactly its range: the LID
/// manager falls back to fresh LIDs silently, which for a dump's LIDs would
/// turn into confusing table mismatches later.
pub fn check_planned(view: &RouteView, persisted: &Guid2Lid, origin: &str) -> Result<(), RouteViewError> {
    let mut got: BTreeMap<u64, (u16, u8)> = BTreeMap::new();
    for s in view.fabric.switches() {
        got.insert(s.guid, (s.base_lid, s.lmc));
    }
    for e in view.fabric.end_ports() {
        got.insert(e.port_guid, (e.base_lid, e.lmc));
    }
    for (guid, range) in persisted.iter() {
        match got.get(&guid.0) {
            Some(&(base, lmc)) if base == range.base().0 && (lmc == range.lmc() || lmc == 0) => {}
            Some(&(base, _)) => {
                return Err(RouteViewError::Unplaceable {
                    origin: origin.to_string(),
                    guid,
                    wanted: range.to_string(),
                    why: format!("it got base LID {base:#06x} instead (the LMC, or another port's LIDs)"),
                })
            }
            None => {
                return Err(RouteViewError::UnknownGuid { origin: origin.to_string(), guid, lids: range.to_string() })
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::topology::GeneratorSpec;

    fn gen(spec: &str) -> Topology {
        spec.parse::<GeneratorSpec>().unwrap().generate().unwrap()
    }

    #[test]
    fn node_order_numbers_switches_and_cabled_ports() {
        let t = gen("fattree2:radix=4");
        let v = route_view(&t, &LidPlan::default()).unwrap();
        let f = &v.fabric;
        assert_eq!((f.num_switches(), f.num_end_ports()), (6, 8));
        // Switches come first in the generated file: LIDs 1..6, hosts 7..14.
        let sl: Vec<u16> = f.switches().iter().map(|s| s.base_lid).collect();
        assert_eq!(sl, vec![1, 2, 3, 4, 5, 6]);
        let el: Vec<u16> = f.end_ports().iter().map(|e| e.base_lid).collect();
        assert_eq!(el, (7..=14).collect::<Vec<u16>>());
        assert_eq!(f.max_lid(), 14);
        assert_eq!(f.links().len(), 16);
        assert_eq!(f.switch(SwitchId(0)).name, "leaf0");
        assert_eq!(f.end_port(EndPortId(0)).name, "leaf0-h0");
        assert_eq!(f.end_port(EndPortId(0)).port_guid, t.node(v.end_ports[0].node).port_guid(1).0);

        let v = route_view(&t, &LidPlan::NodeOrder { lmc: 2 }).unwrap();
        let el: Vec<u16> = v.fabric.end_ports().iter().map(|e| e.base_lid).collect();
        // Switches keep one LID each (1..6); hosts from 8 in steps of 4.
        assert_eq!(el, (0..8).map(|i| 8 + 4 * i).collect::<Vec<u16>>());
        assert!(matches!(route_view(&t, &LidPlan::NodeOrder { lmc: 9 }), Err(RouteViewError::BadLmc(9))));
    }

    #[test]
    fn sm_plan_puts_the_sm_port_first_then_guid_order() {
        let t = gen("fattree2:radix=4");
        let v = route_view(&t, &LidPlan::Sm { sm_port: None, persisted: Guid2Lid::new(), lmc: 0 }).unwrap();
        let f = &v.fabric;
        // The first CA's port (leaf0-h0, GUID 0x100001) gets LID 1; then
        // ascending GUIDs: CA ports 0x100003.. (2..8), switches 0x200000.. (9..14).
        assert_eq!(f.end_port(EndPortId(0)).base_lid, 1);
        assert_eq!(f.end_port(EndPortId(1)).base_lid, 2);
        assert_eq!(f.switch(SwitchId(0)).base_lid, 9);
        let g = Guid(t.node(v.switch_nodes[5]).port_guid(0).0);
        let v2 = route_view(&t, &LidPlan::Sm { sm_port: Some(g), persisted: Guid2Lid::new(), lmc: 0 }).unwrap();
        assert_eq!(v2.fabric.switch(SwitchId(5)).base_lid, 1);
        assert!(matches!(
            route_view(&t, &LidPlan::Sm { sm_port: Some(Guid(7)), persisted: Guid2Lid::new(), lmc: 0 }),
            Err(RouteViewError::UnknownSmPort(Guid(7)))
        ));
    }

    #[test]
    fn uncabled_ports_are_left_out() {
        let mut t = gen("fattree2:radix=4");
        // Cut leaf0-h0's cable.
        let h = t.node_by_name("leaf0-h0").unwrap();
        t.links.retain(|l| l.a.node != h && l.b.node != h);
        let v = route_view(&t, &LidPlan::default()).unwrap();
        assert_eq!(v.fabric.num_end_ports(), 7);
        assert!(v.end_ports.iter().all(|p| p.node != h));
    }

    #[test]
    fn claims_become_a_persisted_plan() {
        let t = gen("fattree2:radix=4");
        let claims = vec![
            LidClaim { guid: 0x200000, lids: vec![2], line: 1 },
            LidClaim { guid: 0x100001, lids: vec![5, 6], line: 2 },
        ];
        let (map, lmc) = claims_to_guid2lid(&t, &claims, "d").unwrap();
        assert_eq!(lmc, 1);
        assert_eq!(map.get(Guid(0x100001)).unwrap().base(), Lid(4));
        let plan = LidPlan::Sm { sm_port: None, persisted: map.clone(), lmc };
        let v = route_view(&t, &plan).unwrap();
        check_planned(&v, &map, "d").unwrap();
        assert_eq!(v.fabric.switch(SwitchId(0)).base_lid, 2);
        assert_eq!(v.fabric.end_port(EndPortId(0)).base_lid, 4);

        let bad = vec![LidClaim { guid: 0xdead, lids: vec![3], line: 7 }];
        let e = claims_to_guid2lid(&t, &bad, "d").unwrap_err();
        assert!(e.to_string().starts_with("d:7: GUID 0x000000000000dead"), "{e}");
    }
}
