//! Partitions resolved against the ports a sweep found: which P_Keys every
//! end port (CA and router ports, switch port 0) should hold, and which
//! multicast groups exist because the partitions say so.
//!
//! # Semantics (OpenSM's, `osm_prtn.c` and `osm_prtn_config.c`)
//! - Member items apply in file order, OpenSM's implicit default members
//!   (`ALL=limited, SELF=full` with a file, `ALL=full` without) first. For
//!   one port and one partition the last item that names it wins:
//!   `ALL=full, 0x...=limited` makes that one port limited, and
//!   `SELF=full` followed by `ALL=limited` makes the SM port limited too.
//! - `=both` gives both keys only with [`PolicyOptions::allow_both_pkeys`];
//!   without it, as in OpenSM, it gives the full key (and a warning).
//! - `ALL` is every port given; `ALL_CAS`, `ALL_SWITCHES` (switch port 0)
//!   and `ALL_ROUTERS` those of that kind; `SELF` the SM's port.
//! - `indx0` pins its partition at index 0 of each port of that item; the
//!   last item that pins one for a port wins, and a later item of the same
//!   partition without `indx0` unpins it (OpenSM's `indx0_pkey`).
//! - The default partition always exists, and the SM port is always its
//!   full member: a file that makes it limited is overridden with a warning
//!   (OpenSM lets the file demote it, and the SM can then no longer answer
//!   limited members).
//! - A partition with no member among the ports is left out with its
//!   groups, as OpenSM deletes it (a warning; never the default partition).
//! - A GUID no port has is not an error (the port may be down): a warning
//!   with the file position, which also says when it is a node GUID.
//! - Without [`PolicyOptions::qos`], SLs from the file are replaced by 0,
//!   as OpenSM does when QoS is off, with a warning.
//!
//! # Too many partitions for a port
//! A port whose P_Key table (`pkey_cap` entries) cannot hold all its keys
//! keeps the partitions that fit whole, its `indx0` partition first, then
//! in declaration order (the default partition is declared first): the
//! order the table planner ([`super::table`]) keeps. The others are left
//! out of that port's [`PortPartitions`], so the SA never grants it paths
//! in a partition it cannot hold, and a [`PolicyIssue::TableFull`] names
//! the port, what it wanted and what was left out. That is the one issue
//! [`PolicyIssue::is_error`] calls an error: the caller keeps the
//! partitions in force when it has some, and uses this set when it has
//! none. A `pkey_cap` of 0 (not reported; IBA 14.2.5.3 says at least 1)
//! sets no limit.
//!
//! O(items x ports + memberships).

use std::collections::HashMap;
use std::path::Path;

use super::conf::{ConfPartition, MemberSpec, PartitionConf, PortSpec, Pos};
use super::{
    GroupParams, Membership, Partition, PartitionSet, PortPartitions, WellKnownGroup, DEFAULT_PARTITION, FULL_MEMBER,
};
use crate::topology::NodeKind;
use crate::types::Guid;

/// One end port as a sweep found it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PolicyPort {
    pub port_guid: Guid,
    pub node_guid: Guid,
    pub kind: NodeKind,
    pub is_sm_port: bool,
    /// Entries in its P_Key table: NodeInfo.PartitionCap (CAs, routers,
    /// switch port 0; IBA 14.2.5.3). 0: not known, no limit.
    pub pkey_cap: u16,
}

/// OpenSM options that change the resolution.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PolicyOptions {
    /// OpenSM's `allow_both_pkeys` (default false): `=both` gives a port
    /// the full and the limited key.
    pub allow_both_pkeys: bool,
    /// OpenSM's `qos`: SLs from the file are used only with QoS on.
    pub qos: bool,
}

/// Something the resolution met. Positions are in the file the conf was
/// read from; [`PolicyIssue::message`] adds its path.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PolicyIssue {
    #[error("{at}: no port has GUID {guid} (partition {pkey:#06x}){}", node_hint(ports_of_node))]
    UnknownGuid { guid: Guid, pkey: u16, at: Pos, ports_of_node: Vec<Guid> },
    #[error("{at}: SELF, but no port is the SM's (partition {pkey:#06x})")]
    NoSmPort { pkey: u16, at: Pos },
    #[error("{at}: '=both' gives the full key only, as allow_both_pkeys is off")]
    BothMeansFull { at: Pos },
    #[error("{}partition '{name}' ({pkey:#06x}) has no member among the ports found: it is left out, with its multicast groups", pos(at))]
    EmptyPartition { name: String, pkey: u16, at: Option<Pos> },
    #[error("{}the SM port {guid} stays a full member of the default partition", pos(at))]
    SmPortKeptFull { guid: Guid, at: Option<Pos> },
    #[error("{at}: indx0 of partition {pkey:#06x} replaces that of another partition on {ports} port(s)")]
    Index0Replaced { pkey: u16, at: Pos, ports: usize },
    #[error("{}partition {pkey:#06x}: SL {sl} is not used as QoS is off (SL 0 instead)", pos(at))]
    SlIgnored { pkey: u16, sl: u8, at: Option<Pos> },
    #[error("port {guid} (node {node_guid}) is a member of {wanted} P_Keys but its table holds {cap}: partitions {} left out there", list(dropped))]
    TableFull { guid: Guid, node_guid: Guid, wanted: usize, cap: u16, dropped: Vec<u16> },
}

fn node_hint(ports: &[Guid]) -> String {
    if ports.is_empty() {
        return String::new();
    }
    let ports: Vec<String> = ports.iter().map(|g| g.to_string()).collect();
    format!("; it is the node GUID of port(s) {}: partitions.conf names port GUIDs", ports.join(", "))
}

fn pos(at: &Option<Pos>) -> String {
    at.map_or_else(String::new, |p| format!("{p}: "))
}

fn list(pkeys: &[u16]) -> String {
    pkeys.iter().map(|p| format!("{p:#06x}")).collect::<Vec<_>>().join(", ")
}

impl PolicyIssue {
    /// The issue that should keep the partitions in force (see the module
    /// docs); the rest are warnings.
    pub fn is_error(&self) -> bool {
        matches!(self, PolicyIssue::TableFull { .. })
    }

    /// Where in the file, when it comes from an item.
    pub fn at(&self) -> Option<Pos> {
        match self {
            PolicyIssue::UnknownGuid { at, .. }
            | PolicyIssue::NoSmPort { at, .. }
            | PolicyIssue::BothMeansFull { at }
            | PolicyIssue::Index0Replaced { at, .. } => Some(*at),
            PolicyIssue::EmptyPartition { at, .. }
            | PolicyIssue::SmPortKeptFull { at, .. }
            | PolicyIssue::SlIgnored { at, .. } => *at,
            PolicyIssue::TableFull { .. } => None,
        }
    }

    /// The issue as an operator reads it: `partitions.conf:7:12: ...`.
    pub fn message(&self, path: Option<&Path>) -> String {
        match (path, self.at()) {
            (Some(p), Some(_)) => format!("{}:{self}", p.display()),
            (Some(p), None) => format!("{}: {self}", p.display()),
            (None, _) => self.to_string(),
        }
    }
}

/// Per port (index into the ports given): its membership in one
/// partition, and the item that gave it. Sparse: a file may declare
/// thousands of partitions of a few ports each.
type Members = HashMap<usize, (Membership, Option<Pos>)>;

/// Resolves `conf` against `ports`. Always gives a usable set (see the
/// module docs for what it does with ports that cannot hold all their
/// partitions), and the issues met on the way, errors first.
pub fn resolve(conf: &PartitionConf, ports: &[PolicyPort], opts: &PolicyOptions) -> (PartitionSet, Vec<PolicyIssue>) {
    let mut issues = Vec::new();

    // A hand-made conf without the default partition gets OpenSM's implicit
    // one (a parsed conf always has it, first).
    let implicit;
    let parts: Vec<&ConfPartition> = if conf.partition(DEFAULT_PARTITION).is_some() {
        conf.partitions.iter().collect()
    } else {
        implicit = implicit_default();
        std::iter::once(&implicit).chain(&conf.partitions).collect()
    };
    let default_idx = parts.iter().position(|p| p.pkey == DEFAULT_PARTITION).unwrap_or(0);

    let mut by_guid: HashMap<Guid, usize> = HashMap::with_capacity(ports.len());
    let mut by_node: HashMap<Guid, Vec<Guid>> = HashMap::new();
    for (i, p) in ports.iter().enumerate() {
        by_guid.entry(p.port_guid).or_insert(i);
        by_node.entry(p.node_guid).or_default().push(p.port_guid);
    }
    let sm_ports: Vec<usize> = (0..ports.len()).filter(|&i| ports[i].is_sm_port).collect();

    // Every item, in file order; the implicit ones (no position) first.
    let mut items: Vec<(usize, &MemberSpec)> =
        parts.iter().enumerate().flat_map(|(pi, p)| p.members.iter().map(move |m| (pi, m))).collect();
    items.sort_by_key(|(_, m)| m.at);

    // state[partition][port]: the membership and the item that gave it.
    let mut state: Vec<Members> = vec![Members::new(); parts.len()];
    let mut index0: Vec<Option<usize>> = vec![None; ports.len()];
    let mut targets = Vec::with_capacity(ports.len());
    for (pi, item) in items {
        let pkey = parts[pi].pkey;
        targets.clear();
        match item.port {
            PortSpec::All => targets.extend(0..ports.len()),
            PortSpec::AllCas => targets.extend((0..ports.len()).filter(|&i| ports[i].kind == NodeKind::Ca)),
            PortSpec::AllSwitches => targets.extend((0..ports.len()).filter(|&i| ports[i].kind == NodeKind::Switch)),
            PortSpec::AllRouters => targets.extend((0..ports.len()).filter(|&i| ports[i].kind == NodeKind::Router)),
            PortSpec::SelfPort => {
                targets.extend(&sm_ports);
                if let (true, Some(at)) = (sm_ports.is_empty(), item.at) {
                    issues.push(PolicyIssue::NoSmPort { pkey, at });
                }
            }
            PortSpec::Guid(g) => match by_guid.get(&g) {
                Some(&i) => targets.push(i),
                None => {
                    if let Some(at) = item.at {
                        let ports_of_node = by_node.get(&g).cloned().unwrap_or_default();
                        issues.push(PolicyIssue::UnknownGuid { guid: g, pkey, at, ports_of_node });
                    }
                }
            },
        }
        let membership = match item.membership {
            Membership::Both if !opts.allow_both_pkeys => {
                if let Some(at) = item.at {
                    issues.push(PolicyIssue::BothMeansFull { at });
                }
                Membership::Full
            }
            m => m,
        };
        let mut replaced = 0;
        for &t in &targets {
            state[pi].insert(t, (membership, item.at));
            if item.indx0 {
                replaced += usize::from(index0[t].is_some_and(|old| old != pi));
                index0[t] = Some(pi);
            } else if index0[t] == Some(pi) {
                index0[t] = None;
            }
        }
        if let (true, Some(at)) = (replaced > 0, item.at) {
            issues.push(PolicyIssue::Index0Replaced { pkey, at, ports: replaced });
        }
    }

    // The SM port is always a full member of the default partition.
    for &sm in &sm_ports {
        let slot = state[default_idx].entry(sm).or_insert((Membership::Full, None));
        if slot.0 == Membership::Limited {
            issues.push(PolicyIssue::SmPortKeptFull { guid: ports[sm].port_guid, at: slot.1 });
            slot.0 = Membership::Full;
        }
    }

    // Partitions without members go, with their groups.
    let kept: Vec<bool> = (0..parts.len())
        .map(|pi| {
            let keep = pi == default_idx || !state[pi].is_empty();
            if !keep {
                let p = parts[pi];
                issues.push(PolicyIssue::EmptyPartition { name: p.name.clone(), pkey: p.pkey, at: p.at });
            }
            keep
        })
        .collect();

    let mut set = PartitionSet::default();
    for (_, p) in parts.iter().enumerate().filter(|&(pi, _)| kept[pi]) {
        let mut params = p.params;
        let mut groups: Vec<WellKnownGroup> = p
            .groups
            .iter()
            .map(|g| WellKnownGroup {
                mgid: g.mgid,
                pkey: p.pkey | FULL_MEMBER,
                params: g.params,
                ipoib_broadcast: g.ipoib_broadcast,
            })
            .collect();
        if !opts.qos {
            let first_sl = std::iter::once((params.sl, p.sl_at))
                .chain(p.groups.iter().map(|g| (g.params.sl, g.at)))
                .find(|&(sl, _)| sl != 0);
            if let Some((sl, at)) = first_sl {
                issues.push(PolicyIssue::SlIgnored { pkey: p.pkey, sl, at });
            }
            params.sl = 0;
            groups.iter_mut().for_each(|g| g.params.sl = 0);
        }
        set.partitions.push(Partition { name: p.name.clone(), pkey: p.pkey, ipoib: p.ipoib, params });
        set.groups.extend(groups);
    }

    // Partitions in declaration order outside, so each port's list is too.
    let mut members: Vec<Vec<(u16, Membership)>> = vec![Vec::new(); ports.len()];
    for pi in (0..parts.len()).filter(|&pi| kept[pi]) {
        for (&t, &(m, _)) in &state[pi] {
            members[t].push((parts[pi].pkey, m));
        }
    }
    for ((t, port), members) in ports.iter().enumerate().zip(members) {
        let pin = index0[t].map(|pi| parts[pi].pkey);
        let mut pp = PortPartitions { members, index0: pin };
        if let Some(issue) = fit(&mut pp, port) {
            issues.push(issue);
        }
        set.ports.entry(port.port_guid).or_insert(pp);
    }

    // Errors first, the rest in the order met.
    issues.sort_by_key(|i| !i.is_error());
    (set, issues)
}

/// Keeps what fits in the port's table (see the module docs).
fn fit(pp: &mut PortPartitions, port: &PolicyPort) -> Option<PolicyIssue> {
    let cap = usize::from(port.pkey_cap);
    let keys = |m: Membership| m.keys(0).count();
    let wanted: usize = pp.members.iter().map(|&(_, m)| keys(m)).sum();
    if cap == 0 || wanted <= cap {
        return None;
    }
    let mut order: Vec<usize> = (0..pp.members.len()).collect();
    if let Some(pin) = pp.index0 {
        order.sort_by_key(|&i| pp.members[i].0 != pin);
    }
    let mut room = cap;
    let mut keep = vec![false; pp.members.len()];
    for i in order {
        let n = keys(pp.members[i].1);
        if n <= room {
            room -= n;
            keep[i] = true;
        }
    }
    let mut dropped = Vec::new();
    let mut k = keep.iter();
    pp.members.retain(|&(p, _)| {
        let kept = k.next().copied().unwrap_or(false);
        if !kept {
            dropped.push(p);
        }
        kept
    });
    if pp.index0.is_some_and(|p| dropped.contains(&p)) {
        pp.index0 = None;
    }
    Some(PolicyIssue::TableFull {
        guid: port.port_guid,
        node_guid: port.node_guid,
        wanted,
        cap: port.pkey_cap,
        dropped,
    })
}

/// OpenSM's default partition when a file does not name it (the one
/// [`PartitionConf::parse`] puts first).
fn implicit_default() -> ConfPartition {
    let member = |port, membership| MemberSpec { port, membership, indx0: false, at: None };
    ConfPartition {
        name: "Default".into(),
        pkey: DEFAULT_PARTITION,
        pkey_generated: false,
        at: None,
        ipoib: false,
        params: GroupParams::default(),
        sl_at: None,
        members: vec![member(PortSpec::All, Membership::Limited), member(PortSpec::SelfPort, Membership::Full)],
        groups: Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SM: Guid = Guid(0x0002_c903_0000_0001);
    const H1: Guid = Guid(0x0002_c903_00a1_b2c1);
    const H2: Guid = Guid(0x0002_c903_00a1_b2c2);
    const SW: Guid = Guid(0x0002_c903_0000_5000);
    const RT: Guid = Guid(0x0002_c903_0000_7000);

    fn port(guid: Guid, kind: NodeKind) -> PolicyPort {
        PolicyPort {
            port_guid: guid,
            node_guid: Guid(guid.0 ^ 0xff00_0000),
            kind,
            is_sm_port: guid == SM,
            pkey_cap: 32,
        }
    }

    fn fabric() -> Vec<PolicyPort> {
        vec![
            port(SM, NodeKind::Ca),
            port(H1, NodeKind::Ca),
            port(H2, NodeKind::Ca),
            PolicyPort { node_guid: SW, ..port(SW, NodeKind::Switch) },
            port(RT, NodeKind::Router),
        ]
    }

    fn conf(text: &str) -> PartitionConf {
        PartitionConf::parse(text, Path::new("partitions.conf")).unwrap_or_else(|e| panic!("{e}"))
    }

    fn run(text: &str) -> (PartitionSet, Vec<PolicyIssue>) {
        resolve(&conf(text), &fabric(), &PolicyOptions::default())
    }

    fn of(set: &PartitionSet, g: Guid) -> Vec<(u16, Membership)> {
        set.ports[&g].members.clone()
    }

    use Membership::{Both, Full, Limited};

    fn at(line: u32, col: u32) -> Pos {
        Pos { line, col }
    }

    #[test]
    fn the_reference_example() {
        let (set, issues) = run("Default=0x7fff, ipoib, mtu=5, rate=7 : ALL=full ;\n\
             storage=0x0010, ipoib, defmember=full : 0x0002c90300a1b2c1, 0x0002c90300a1b2c2=limited, SELF ;\n\
             Default=0x7fff : mgid=ff12:401b::0707,sl=1 ;\n");
        assert_eq!(set.ports.len(), 5);
        assert_eq!(of(&set, SM), vec![(0x7fff, Full), (0x10, Full)]);
        assert_eq!(of(&set, H1), vec![(0x7fff, Full), (0x10, Full)]);
        assert_eq!(of(&set, H2), vec![(0x7fff, Full), (0x10, Limited)]);
        assert_eq!(of(&set, SW), vec![(0x7fff, Full)]);
        assert_eq!(set.ports[&H2].pkeys(), vec![0xffff, 0x0010]);
        let parts: Vec<_> = set.partitions.iter().map(|p| (p.name.as_str(), p.pkey, p.ipoib)).collect();
        assert_eq!(parts, vec![("Default", 0x7fff, true), ("storage", 0x10, true)]);
        assert_eq!(set.groups.len(), 3);
        let bcast = &set.groups[0];
        assert_eq!(bcast.mgid, [0xff, 0x12, 0x40, 0x1b, 0xff, 0xff, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff]);
        assert_eq!((bcast.pkey, bcast.ipoib_broadcast, bcast.params.mtu, bcast.params.rate), (0xffff, true, 5, 7));
        assert_eq!(bcast.params.q_key, 0x0b1b);
        let extra = &set.groups[1];
        assert_eq!(extra.mgid, [0xff, 0x12, 0x40, 0x1b, 0xff, 0xff, 0, 0, 0, 0, 0, 0, 0, 0, 0x07, 0x07]);
        assert_eq!((extra.pkey, extra.ipoib_broadcast), (0xffff, false));
        let storage = &set.groups[2];
        assert_eq!(storage.mgid, [0xff, 0x12, 0x40, 0x1b, 0x80, 0x10, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff]);
        assert_eq!((storage.pkey, storage.params.mtu, storage.params.rate), (0x8010, 4, 3));
        // QoS off: the group's sl=1 becomes 0, with a warning at the line.
        assert_eq!(extra.params.sl, 0);
        assert_eq!(issues, vec![PolicyIssue::SlIgnored { pkey: 0x7fff, sl: 1, at: Some(at(3, 18)) }]);
        // With QoS the SL stays.
        let (set, issues) = resolve(
            &conf("Default=0x7fff, ipoib, sl=2 : ALL=full ;"),
            &fabric(),
            &PolicyOptions { qos: true, ..Default::default() },
        );
        assert!(issues.is_empty(), "{issues:?}");
        assert_eq!((set.partitions[0].params.sl, set.groups[0].params.sl), (2, 2));
    }

    #[test]
    fn no_file_makes_everyone_a_full_member_with_a_broadcast_group() {
        let (set, issues) = resolve(&PartitionConf::default_no_file(), &fabric(), &PolicyOptions::default());
        assert!(issues.is_empty());
        for p in fabric() {
            assert_eq!(of(&set, p.port_guid), vec![(0x7fff, Full)]);
        }
        assert_eq!(set.groups.len(), 1);
        assert_eq!(set.groups[0].mgid, [0xff, 0x12, 0x40, 0x1b, 0xff, 0xff, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff]);
        assert_eq!(set.groups[0].params, GroupParams::default());
        assert!(set.partitions[0].ipoib);
    }

    #[test]
    fn a_file_without_default_line_makes_everyone_limited_but_the_sm() {
        let (set, issues) = run("p=0x10: ALL=full;");
        assert!(issues.is_empty(), "{issues:?}");
        assert_eq!(of(&set, SM), vec![(0x7fff, Full), (0x10, Full)]);
        assert_eq!(of(&set, H1), vec![(0x7fff, Limited), (0x10, Full)]);
        // No IPoIB group in the default partition: the file did not ask.
        assert!(set.groups.is_empty());
        assert!(!set.partitions[0].ipoib);
        // Two limited members of Default may not talk; through 0x10 they may.
        assert_eq!(set.shared(H1, H2, Some(0x7fff)), None);
        assert_eq!(set.shared(H1, H2, None), Some(0x10));
        assert_eq!(set.shared(H1, SM, Some(0xffff)), Some(0x7fff));
    }

    #[test]
    fn limited_limited_share_nothing() {
        let (set, _) = run("Default=0x7fff: ALL=limited, SELF=full;\np=0x10: 0x0002c90300a1b2c1, 0x0002c90300a1b2c2;");
        assert_eq!(of(&set, H1), vec![(0x7fff, Limited), (0x10, Limited)]);
        assert_eq!(set.shared(H1, H2, None), None);
        assert_eq!(set.shared(H1, SM, None), Some(0x7fff));
    }

    #[test]
    fn each_portspec() {
        let (set, _) = run("a=0x1: ALL;\nb=0x2: ALL_CAS;\nc=0x3: ALL_SWITCHES;\nd=0x4: ALL_ROUTERS;\ne=0x5: SELF;\n\
             f=0x6: 0x0002c90300a1b2c2;\ng=0x7: NONE;\n");
        let members = |pkey: u16| {
            let mut v: Vec<Guid> =
                set.ports.iter().filter(|(_, p)| p.membership(pkey).is_some()).map(|(g, _)| *g).collect();
            v.sort();
            v
        };
        let mut all = vec![SM, H1, H2, SW, RT];
        all.sort();
        assert_eq!(members(1), all);
        assert_eq!(members(2), {
            let mut v = vec![SM, H1, H2];
            v.sort();
            v
        });
        assert_eq!(members(3), vec![SW]);
        assert_eq!(members(4), vec![RT]);
        assert_eq!(members(5), vec![SM]);
        assert_eq!(members(6), vec![H2]);
        // NONE: no members, so the partition is left out.
        assert!(set.partitions.iter().all(|p| p.pkey != 7));
    }

    #[test]
    fn the_last_item_for_a_port_wins() {
        let (set, _) = run("p=0x10: ALL=full, 0x0002c90300a1b2c1=limited;\np=0x10: 0x0002c90300a1b2c2=limited;");
        assert_eq!(set.ports[&H1].membership(0x10), Some(Limited));
        assert_eq!(set.ports[&H2].membership(0x10), Some(Limited));
        assert_eq!(set.ports[&SM].membership(0x10), Some(Full));
        // The man page's YetAnotherOne: SELF=full, then ALL=limited.
        let (set, _) = run("YetAnotherOne = 0x300 : SELF=full ;\nYetAnotherOne = 0x300 : ALL=limited ;");
        assert_eq!(set.ports[&SM].membership(0x300), Some(Limited));
    }

    #[test]
    fn both_needs_allow_both_pkeys() {
        let c = conf("p=0x10: 0x0002c90300a1b2c1=both;");
        let (set, issues) = resolve(&c, &fabric(), &PolicyOptions::default());
        assert_eq!(set.ports[&H1].membership(0x10), Some(Full));
        assert_eq!(issues, vec![PolicyIssue::BothMeansFull { at: at(1, 9) }]);
        let (set, issues) = resolve(&c, &fabric(), &PolicyOptions { allow_both_pkeys: true, ..Default::default() });
        assert_eq!(set.ports[&H1].membership(0x10), Some(Both));
        assert_eq!(set.ports[&H1].pkeys(), vec![0x7fff, 0x8010, 0x0010]);
        assert!(issues.is_empty());
    }

    #[test]
    fn the_sm_port_stays_a_full_member_of_default() {
        let (set, issues) = run("Default=0x7fff: ALL=limited;");
        assert_eq!(set.ports[&SM].membership(0x7fff), Some(Full));
        assert_eq!(set.ports[&H1].membership(0x7fff), Some(Limited));
        assert_eq!(issues, vec![PolicyIssue::SmPortKeptFull { guid: SM, at: Some(at(1, 17)) }]);
        // With no SM port among the ports, SELF is noted.
        let ports: Vec<_> = fabric().into_iter().map(|p| PolicyPort { is_sm_port: false, ..p }).collect();
        let (_, issues) = resolve(&conf("p=0x10: SELF, ALL;"), &ports, &PolicyOptions::default());
        assert_eq!(issues, vec![PolicyIssue::NoSmPort { pkey: 0x10, at: at(1, 9) }]);
    }

    #[test]
    fn index0() {
        let (set, issues) = run("p=0x10, indx0: ALL;\nq=0x20: ALL;");
        assert!(issues.is_empty());
        assert_eq!(set.ports[&H1].index0, Some(0x10));
        // A later item of the same partition without indx0 unpins it.
        let (set, _) = run("p=0x10, indx0: ALL;\np=0x10: 0x0002c90300a1b2c1;");
        assert_eq!((set.ports[&H1].index0, set.ports[&H2].index0), (None, Some(0x10)));
        // Two partitions pin one port: the later wins, with a warning.
        let (set, issues) = run("p=0x10, indx0: ALL;\nq=0x20, indx0: 0x0002c90300a1b2c1;");
        assert_eq!((set.ports[&H1].index0, set.ports[&H2].index0), (Some(0x20), Some(0x10)));
        assert_eq!(issues, vec![PolicyIssue::Index0Replaced { pkey: 0x20, at: at(2, 16), ports: 1 }]);
    }

    #[test]
    fn unknown_guids_are_warnings_with_their_position() {
        let (set, issues) = run("p=0x10: 0x0002c90300a1b2c1,\n  0x1234, 0x0002c903ffa1b2c1;");
        assert_eq!(set.ports[&H1].membership(0x10), Some(Limited));
        assert_eq!(
            issues,
            vec![
                PolicyIssue::UnknownGuid { guid: Guid(0x1234), pkey: 0x10, at: at(2, 3), ports_of_node: vec![] },
                PolicyIssue::UnknownGuid {
                    guid: Guid(0x0002_c903_ffa1_b2c1),
                    pkey: 0x10,
                    at: at(2, 11),
                    ports_of_node: vec![H1]
                },
            ]
        );
        assert!(!issues[0].is_error());
        assert_eq!(
            issues[0].message(Some(Path::new("/etc/opensm/partitions.conf"))),
            "/etc/opensm/partitions.conf:2:3: no port has GUID 0x0000000000001234 (partition 0x0010)"
        );
        assert!(issues[1].to_string().contains("node GUID of port(s) 0x0002c90300a1b2c1"), "{}", issues[1]);
    }

    #[test]
    fn partitions_without_members_are_left_out_with_their_groups() {
        let (set, issues) = run("gone=0x10, ipoib: 0x99;\nkept=0x20, ipoib: ALL;");
        assert_eq!(set.partitions.iter().map(|p| p.pkey).collect::<Vec<_>>(), vec![0x7fff, 0x20]);
        assert_eq!(set.groups.iter().map(|g| g.pkey).collect::<Vec<_>>(), vec![0x8020]);
        assert!(issues.contains(&PolicyIssue::EmptyPartition { name: "gone".into(), pkey: 0x10, at: Some(at(1, 1)) }));
        // The default partition stays even on an empty fabric.
        let (set, _) = resolve(&PartitionConf::default_no_file(), &[], &PolicyOptions::default());
        assert_eq!((set.partitions.len(), set.groups.len()), (1, 1));
    }

    #[test]
    fn a_port_with_too_small_a_table_keeps_what_fits() {
        let text = "a=0x1: ALL;\nb=0x2, indx0: ALL;\nc=0x3: ALL;\nd=0x4: 0x0002c90300a1b2c1=both;";
        let mut ports = fabric();
        ports[1].pkey_cap = 3; // H1
        ports[2].pkey_cap = 0; // H2: not reported, no limit
        let opts = PolicyOptions { allow_both_pkeys: true, ..Default::default() };
        let (set, issues) = resolve(&conf(text), &ports, &opts);
        // H1 wants Default, 1, 2, 3 and both keys of 4: 6 keys, 3 entries.
        // indx0's partition first, then declaration order.
        let h1 = &set.ports[&H1];
        assert_eq!(h1.members, vec![(0x7fff, Limited), (0x1, Limited), (0x2, Limited)]);
        assert_eq!(h1.index0, Some(0x2));
        assert_eq!(
            issues,
            vec![PolicyIssue::TableFull {
                guid: H1,
                node_guid: Guid(H1.0 ^ 0xff00_0000),
                wanted: 6,
                cap: 3,
                dropped: vec![3, 4]
            }]
        );
        assert!(issues[0].is_error());
        assert!(issues[0].to_string().contains("0x0003, 0x0004"), "{}", issues[0]);
        assert_eq!(set.ports[&H2].members.len(), 4);
        // Two entries only: the pinned one before the default.
        ports[1].pkey_cap = 2;
        let (set, _) = resolve(&conf(text), &ports, &opts);
        assert_eq!(set.ports[&H1].members, vec![(0x7fff, Limited), (0x2, Limited)]);
        // One entry: the pinned partition only.
        ports[1].pkey_cap = 1;
        let (set, _) = resolve(&conf(text), &ports, &opts);
        assert_eq!((set.ports[&H1].members.clone(), set.ports[&H1].index0), (vec![(0x2, Limited)], Some(0x2)));
    }

    #[test]
    fn errors_come_first() {
        let mut ports = fabric();
        ports[1].pkey_cap = 1;
        let (_, issues) = resolve(&conf("p=0x10: ALL, 0x77;"), &ports, &PolicyOptions::default());
        assert_eq!(issues.len(), 2);
        assert!(issues[0].is_error() && !issues[1].is_error());
    }

    #[test]
    fn a_conf_without_the_default_partition_gets_the_implicit_one() {
        let mut c = conf("p=0x10: ALL;");
        c.partitions.remove(0);
        let (set, _) = resolve(&c, &fabric(), &PolicyOptions::default());
        assert_eq!(of(&set, H1), vec![(0x7fff, Limited), (0x10, Limited)]);
        assert_eq!(of(&set, SM), vec![(0x7fff, Full), (0x10, Limited)]);
    }
}
