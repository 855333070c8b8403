//! The group manager on a hand-made fabric: every rule of the module
//! docs, and a property test over random join/leave/snapshot sequences.

use std::collections::HashMap;

use proptest::prelude::*;

use super::*;
use crate::mad::sa::sa_status;
use crate::partition::{GroupParams, PartitionSet, PortPartitions};

const PREFIX: u64 = 0xfe80_0000_0000_0000;
const MTU_2048: u8 = 4;
const MTU_4096: u8 = 5;
const RATE_40: u8 = 7;
const RATE_100: u8 = 16;

/// Ports by GUID; a port's node is its GUID / 10 (so ports 11 and 12 share
/// node 1). Without partitions every port is a full member of the default.
#[derive(Default)]
struct Fabric {
    ports: HashMap<Guid, PortCaps>,
    partitions: Option<PartitionSet>,
}

impl Fabric {
    fn with_ports(guids: &[u64]) -> Self {
        let mut f = Fabric::default();
        for &g in guids {
            f.add(g, MTU_4096, RATE_100);
        }
        f
    }
    fn add(&mut self, guid: u64, mtu: u8, rate: u8) {
        let caps = PortCaps { guid: Guid(guid), node: Guid(guid / 10), gid_prefix: PREFIX, mtu, rate };
        self.ports.insert(Guid(guid), caps);
    }
    fn caps(&self, guid: u64) -> PortCaps {
        self.ports[&Guid(guid)]
    }
    fn me(&self, guid: u64) -> Requester {
        Requester { port: self.caps(guid), trusted: false }
    }
    fn trusted(&self, guid: u64) -> Requester {
        Requester { port: self.caps(guid), trusted: true }
    }
}

impl McFabric for Fabric {
    fn port(&self, guid: Guid) -> Option<PortCaps> {
        self.ports.get(&guid).copied()
    }
    fn membership(&self, port: Guid, pkey: u16) -> Option<Membership> {
        match &self.partitions {
            Some(p) => p.ports.get(&port)?.membership(pkey),
            None => (pkey & PARTITION_MASK == PARTITION_MASK).then_some(Membership::Full),
        }
    }
    fn share_partition(&self, a: Guid, b: Guid) -> bool {
        match &self.partitions {
            Some(p) => p.shared(a, b, None).is_some(),
            None => true,
        }
    }
}

pub(super) fn limits() -> McLimits {
    McLimits {
        max_groups: 100,
        max_members_per_group: 100,
        max_groups_per_port: 100,
        max_members: 1000,
        mlids: MLID_SPACE,
        packet_life_time: 18,
        consolidate_ipv6_snm: false,
    }
}

pub(super) fn gid(guid: u64) -> [u8; 16] {
    crate::sa::index::gid(PREFIX, Guid(guid))
}

fn mgid(s: &str) -> [u8; 16] {
    s.parse::<std::net::Ipv6Addr>().unwrap().octets()
}

const CREATE: u64 = JOIN_MASK | CREATE_MASK;

/// A creating join of `port` to `group` as JoinState `state`, Q_Key 0x1234,
/// default P_Key.
fn join_rec(group: &str, port: u64, state: u8) -> McMemberRecordRepr {
    McMemberRecordRepr {
        mgid: mgid(group),
        port_gid: gid(port),
        q_key: 0x1234,
        pkey: 0xffff,
        join_state: state,
        ..Default::default()
    }
}

const G1: &str = "ff15::1";
const G2: &str = "ff15::2";

#[test]
fn the_first_join_creates_at_0xc000_and_the_next_joins_it() {
    let f = Fabric::with_ports(&[10, 20]);
    let mut g = McGroups::new();
    let r = g.join(&join_rec(G1, 10, js::FULL), CREATE, &f.me(10), &f, &limits()).unwrap();
    assert_eq!((r.mlid, r.join_state, r.port_gid, r.proxy_join), (0xC000, js::FULL, gid(10), false));
    assert_eq!((r.mtu_selector, r.mtu, r.rate_selector, r.rate), (2, MTU_4096, 2, RATE_100), "the port's link");
    assert_eq!((r.q_key, r.pkey, r.scope, r.hop_limit, r.packet_life_time), (0x1234, 0xffff, 5, 0xFF, 18));
    assert_eq!(g.take_events(), vec![McEvent::Created { mgid: mgid(G1), pkey: 0xffff }]);
    let v = g.version();
    // The second needs no creation components.
    let r = g.join(&join_rec(G1, 20, js::NON_MEMBER), JOIN_MASK, &f.me(20), &f, &limits()).unwrap();
    assert_eq!((r.mlid, r.join_state), (0xC000, js::NON_MEMBER));
    assert!(g.take_events().is_empty(), "the group existed");
    assert!(g.version() > v);
    let group = g.group(&mgid(G1)).unwrap();
    assert_eq!(group.counts(), JoinCounts { full: 1, non_member: 1, ..Default::default() });
    assert_eq!(g.membership()[0].receivers, vec![Guid(10), Guid(20)]);
    assert_eq!(g.mcast_table().members(Lid(0xC000)), &[Guid(10), Guid(20)]);
    // A re-join ORs the bits in; the same bits again change nothing.
    let r = g.join(&join_rec(G1, 20, js::SEND_ONLY_FULL), JOIN_MASK, &f.me(20), &f, &limits()).unwrap();
    assert_eq!(r.join_state, js::NON_MEMBER | js::SEND_ONLY_FULL);
    let v = g.version();
    g.join(&join_rec(G1, 20, js::NON_MEMBER), JOIN_MASK, &f.me(20), &f, &limits()).unwrap();
    assert_eq!(g.version(), v);
    assert_eq!(g.group(&mgid(G1)).unwrap().keepers(), 2);
    g.check_invariants().unwrap();
}

#[test]
fn missing_components_and_creation_rules() {
    let f = Fabric::with_ports(&[10]);
    let mut g = McGroups::new();
    let me = f.me(10);
    let rec = join_rec(G1, 10, js::FULL);
    assert_eq!(
        g.join(&rec, m::MGID | m::PORT_GID, &me, &f, &limits()),
        Err(McError::Insufficient { missing: m::JOIN_STATE })
    );
    assert_eq!(
        g.join(&rec, CREATE & !m::Q_KEY & !m::SL, &me, &f, &limits()),
        Err(McError::Insufficient { missing: m::Q_KEY | m::SL })
    );
    let non = join_rec(G1, 10, js::NON_MEMBER);
    assert_eq!(
        g.join(&non, CREATE, &me, &f, &limits()),
        Err(McError::CreateNeedsFullMember { join_state: js::NON_MEMBER })
    );
    let so = join_rec(G1, 10, js::SEND_ONLY_NON_MEMBER);
    assert!(matches!(g.join(&so, CREATE, &me, &f, &limits()), Err(McError::CreateNeedsFullMember { .. })));
    assert_eq!(g.join(&join_rec(G1, 10, 0), CREATE, &me, &f, &limits()), Err(McError::JoinStateZero));
    for bad in ["fe80::1", "ff32::1", "ff12:a01b::1"] {
        assert_eq!(g.join(&join_rec(bad, 10, js::FULL), CREATE, &me, &f, &limits()), Err(McError::BadMgid(mgid(bad))));
    }
    let mut pk0 = rec;
    pk0.pkey = 0x8000;
    assert_eq!(g.join(&pk0, CREATE, &me, &f, &limits()), Err(McError::BadPKey(0x8000)));
    let mut scoped = rec;
    scoped.scope = 2;
    assert!(matches!(
        g.join(&scoped, CREATE | m::SCOPE, &me, &f, &limits()),
        Err(McError::Mismatch { field: "Scope", .. })
    ));
    assert_eq!(g.join(&join_rec(G1, 99, js::FULL), CREATE, &me, &f, &limits()), Err(McError::UnknownPort(Guid(99))));
    let mut other_prefix = rec;
    other_prefix.port_gid[..8].copy_from_slice(&0xfec0_0000_0000_0000u64.to_be_bytes());
    assert_eq!(g.join(&other_prefix, CREATE, &me, &f, &limits()).unwrap_err().status(), sa_status::INVALID_GID);
    assert!(g.is_empty() && g.take_events().is_empty(), "nothing was created by a refusal");
    // SendOnlyFullMember creates (IBA 1.3, as OpenSM).
    assert!(g.join(&join_rec(G1, 10, js::SEND_ONLY_FULL), CREATE, &me, &f, &limits()).is_ok());
    g.check_invariants().unwrap();
}

#[test]
fn the_sa_picks_distinct_mgids_for_mgid_zero() {
    let f = Fabric::with_ports(&[10]);
    let mut g = McGroups::new();
    let mut rec = join_rec("::", 10, js::FULL);
    let a = g.join(&rec, CREATE, &f.me(10), &f, &limits()).unwrap();
    let b = g.join(&rec, CREATE, &f.me(10), &f, &limits()).unwrap();
    assert_eq!(&a.mgid[..4], &[0xff, 0x12, 0xa0, 0x1b], "link-local with the SA signature");
    assert_eq!(&a.mgid[4..12], &PREFIX.to_be_bytes());
    assert_ne!(a.mgid, b.mgid);
    assert_eq!((a.mlid, b.mlid), (0xC000, 0xC001));
    rec.scope = 5;
    let c = g.join(&rec, CREATE | m::SCOPE, &f.me(10), &f, &limits()).unwrap();
    assert_eq!((c.mgid[1], c.scope), (0x15, 5));
    // A counter value already in use is skipped.
    g.next_mgid = 0;
    let d = g.join(&join_rec("::", 10, js::FULL), CREATE, &f.me(10), &f, &limits()).unwrap();
    assert!(![a.mgid, b.mgid, c.mgid].contains(&d.mgid));
    g.check_invariants().unwrap();
}

#[test]
fn parameters_of_an_existing_group_must_agree() {
    let f = Fabric::with_ports(&[10, 20]);
    let mut g = McGroups::new();
    g.join(&join_rec(G1, 10, js::FULL), CREATE, &f.me(10), &f, &limits()).unwrap();
    type Change = fn(&mut McMemberRecordRepr);
    let cases: [(&str, Change); 7] = [
        ("Q_Key", |r| r.q_key = 0x4321),
        ("P_Key", |r| r.pkey = 0x8001),
        ("TClass", |r| r.tclass = 1),
        ("SL", |r| r.sl = 3),
        ("FlowLabel", |r| r.flow_label = 9),
        ("HopLimit", |r| r.hop_limit = 1),
        ("MLID", |r| r.mlid = 0xC005),
    ];
    for (field, change) in cases {
        let mut r = join_rec(G1, 20, js::FULL);
        r.hop_limit = 0xFF;
        change(&mut r);
        let mask = CREATE | m::HOP_LIMIT | m::MLID;
        let err = g.join(&r, mask, &f.me(20), &f, &limits()).unwrap_err();
        assert!(matches!(err, McError::Mismatch { field: f, .. } if f == field), "{field}: {err:?}");
        assert_eq!(err.status(), sa_status::REQ_INVALID);
    }
    // The limited key of the same partition is the same group; MLID 0 is a wildcard.
    let mut r = join_rec(G1, 20, js::FULL);
    (r.pkey, r.hop_limit, r.mlid) = (0x7fff, 0xFF, 0);
    assert!(g.join(&r, CREATE | m::HOP_LIMIT | m::MLID, &f.me(20), &f, &limits()).is_ok());
    g.check_invariants().unwrap();
}

#[test]
fn mtu_and_rate_selectors_against_the_port_and_the_group() {
    let mut f = Fabric::with_ports(&[10]);
    f.add(20, MTU_2048, RATE_40);
    let mut g = McGroups::new();
    let sel = |s: &str, mtu: (u8, u8), rate: Option<(u8, u8)>| {
        let mut r = join_rec(s, 20, js::FULL);
        (r.mtu_selector, r.mtu) = mtu;
        let mut mask = CREATE | m::MTU_SELECTOR | m::MTU;
        if let Some((rs, rv)) = rate {
            (r.rate_selector, r.rate) = (rs, rv);
            mask |= m::RATE_SELECTOR | m::RATE;
        }
        (r, mask)
    };
    let me = f.me(20);
    // Exactly 4096 on a 2048 port: impossible.
    let (r, mask) = sel("ff15::a", (2, MTU_4096), None);
    let err = g.join(&r, mask, &me, &f, &limits()).unwrap_err();
    assert_eq!(err, McError::Unrealizable { field: "MTU", selector: 2, asked: MTU_4096, have: MTU_2048 });
    assert_eq!(err.status(), sa_status::REQ_INVALID);
    // Greater than 2048: impossible; greater than 1024: the port's 2048.
    let (r, mask) = sel("ff15::a", (0, MTU_2048), None);
    assert!(g.join(&r, mask, &me, &f, &limits()).is_err());
    let (r, mask) = sel("ff15::a", (0, 3), None);
    assert_eq!(g.join(&r, mask, &me, &f, &limits()).unwrap().mtu, MTU_2048);
    // Less than 2048: 1024; less than 4096: the port's 2048; less than 256: impossible.
    let (r, mask) = sel("ff15::b", (1, MTU_2048), None);
    assert_eq!(g.join(&r, mask, &me, &f, &limits()).unwrap().mtu, 3);
    let (r, mask) = sel("ff15::c", (1, MTU_4096), None);
    assert_eq!(g.join(&r, mask, &me, &f, &limits()).unwrap().mtu, MTU_2048);
    let (r, mask) = sel("ff15::d", (1, 1), None);
    assert!(g.join(&r, mask, &me, &f, &limits()).is_err());
    // Largest: the port's; a value that is no code is refused unless "largest".
    let (r, mask) = sel("ff15::d", (3, 0), None);
    assert_eq!(g.join(&r, mask, &me, &f, &limits()).unwrap().mtu, MTU_2048);
    let (r, mask) = sel("ff15::e", (2, 6), None);
    assert_eq!(g.join(&r, mask, &me, &f, &limits()), Err(McError::BadCode { field: "MTU", value: 6 }));
    // Rates: exactly 100 Gb/s on a 40 Gb/s port, impossible; less than 100: 40.
    let (r, mask) = sel("ff15::e", (3, 0), Some((2, RATE_100)));
    assert!(matches!(g.join(&r, mask, &me, &f, &limits()), Err(McError::Unrealizable { field: "Rate", .. })));
    let (r, mask) = sel("ff15::e", (3, 0), Some((1, RATE_100)));
    assert_eq!(g.join(&r, mask, &me, &f, &limits()).unwrap().rate, RATE_40);
    // A 4096 / 100 Gb/s group, made by the fast port: the slow one cannot join.
    let fast = g.join(&join_rec("ff15::f", 10, js::FULL), CREATE, &f.me(10), &f, &limits()).unwrap();
    assert_eq!((fast.mtu, fast.rate), (MTU_4096, RATE_100));
    let err = g.join(&join_rec("ff15::f", 20, js::FULL), JOIN_MASK, &me, &f, &limits()).unwrap_err();
    assert_eq!(err, McError::PortTooSlow { field: "MTU", port: MTU_2048, group: MTU_4096 });
    // Selectors of a join must hold for the group: exactly 2048 of a 4096 group.
    let mut r = join_rec("ff15::f", 10, js::NON_MEMBER);
    (r.mtu_selector, r.mtu) = (2, MTU_2048);
    assert!(g.join(&r, JOIN_MASK | m::MTU_SELECTOR | m::MTU, &f.me(10), &f, &limits()).is_err());
    r.mtu_selector = 0;
    assert!(g.join(&r, JOIN_MASK | m::MTU_SELECTOR | m::MTU, &f.me(10), &f, &limits()).is_ok(), "4096 > 2048");
    g.check_invariants().unwrap();
}

#[test]
fn leaves_clear_bits_and_the_last_keeper_frees_the_mlid() {
    let f = Fabric::with_ports(&[10, 20]);
    let mut g = McGroups::new();
    g.join(&join_rec(G1, 10, js::FULL | js::NON_MEMBER), CREATE, &f.me(10), &f, &limits()).unwrap();
    g.join(&join_rec(G1, 20, js::NON_MEMBER), JOIN_MASK, &f.me(20), &f, &limits()).unwrap();
    g.take_events();
    // Errors first.
    let leave = |g: &mut McGroups, port: u64, bits: u8| g.leave(&join_rec(G1, port, bits), JOIN_MASK, &f.me(port), &f);
    assert_eq!(g.leave(&join_rec(G2, 10, js::FULL), JOIN_MASK, &f.me(10), &f), Err(McError::NoSuchGroup(mgid(G2))));
    assert_eq!(
        g.leave(&join_rec(G1, 10, js::FULL), m::MGID | m::PORT_GID, &f.me(10), &f),
        Err(McError::Insufficient { missing: m::JOIN_STATE })
    );
    assert_eq!(leave(&mut g, 20, js::FULL), Err(McError::LeaveBits { asked: js::FULL, held: js::NON_MEMBER }));
    assert_eq!(leave(&mut g, 20, 0), Err(McError::LeaveBits { asked: 0, held: js::NON_MEMBER }));
    let mut never = Fabric::with_ports(&[10, 20]);
    never.add(30, MTU_4096, RATE_100);
    assert_eq!(
        g.leave(&join_rec(G1, 30, js::FULL), JOIN_MASK, &never.me(30), &never),
        Err(McError::NotMember(Guid(30)))
    );
    // Part of port 10's bits, then the rest: the group goes with its last keeper.
    assert_eq!(leave(&mut g, 10, js::NON_MEMBER).unwrap().join_state, js::FULL);
    assert!(g.take_events().is_empty());
    let r = leave(&mut g, 10, js::FULL).unwrap();
    assert_eq!((r.join_state, r.mlid), (0, 0xC000));
    assert_eq!(g.take_events(), vec![McEvent::Deleted { mgid: mgid(G1), pkey: 0xffff }]);
    assert!(g.is_empty(), "port 20's NonMember went with the group");
    assert_eq!((g.member_count(), g.groups_of(Guid(20))), (0, 0));
    // The MLID is free again.
    let r = g.join(&join_rec(G2, 20, js::FULL), CREATE, &f.me(20), &f, &limits()).unwrap();
    assert_eq!(r.mlid, 0xC000);
    g.check_invariants().unwrap();
}

/// OpenSM's PR #43: a send-only-full join and a partial leave leaked the
/// MLID (its leave path tests only FullMember). Here every such sequence
/// ends with the group gone and 0xC000 free, 2,000 times over.
#[test]
fn send_only_full_joins_and_partial_leaves_leak_nothing() {
    let f = Fabric::with_ports(&[10, 20]);
    let mut g = McGroups::new();
    for i in 0..2000u32 {
        let (join, partial) = match i % 3 {
            0 => (js::SEND_ONLY_FULL | js::NON_MEMBER, js::SEND_ONLY_FULL),
            1 => (js::SEND_ONLY_FULL | js::FULL, js::FULL),
            _ => (js::SEND_ONLY_FULL | js::SEND_ONLY_NON_MEMBER, js::SEND_ONLY_NON_MEMBER),
        };
        let r = g.join(&join_rec(G1, 10, join), CREATE, &f.me(10), &f, &limits()).unwrap();
        assert_eq!(r.mlid, 0xC000, "round {i}");
        g.join(&join_rec(G1, 20, js::NON_MEMBER), JOIN_MASK, &f.me(20), &f, &limits()).unwrap();
        let left = g.leave(&join_rec(G1, 10, partial), JOIN_MASK, &f.me(10), &f).unwrap();
        if left.join_state != 0 {
            assert!(left.join_state & (js::FULL | js::SEND_ONLY_FULL) != 0, "alive only with a keeper");
            g.leave(&join_rec(G1, 10, left.join_state), JOIN_MASK, &f.me(10), &f).unwrap();
        }
        assert!(g.is_empty(), "round {i}: the group and its NonMember are gone");
        assert_eq!(g.take_events().len(), 2, "one 66, one 67");
    }
    g.check_invariants().unwrap();
}

#[test]
fn caps_bound_groups_members_and_one_port() {
    let f = Fabric::with_ports(&[10, 20, 30]);
    let mut g = McGroups::new();
    let lim = McLimits { max_groups: 4, max_groups_per_port: 3, max_members_per_group: 2, max_members: 6, ..limits() };
    for i in 1..=3 {
        g.join(&join_rec(&format!("ff15::{i}"), 10, js::FULL), CREATE, &f.me(10), &f, &lim).unwrap();
    }
    let flood = g.join(&join_rec("ff15::4", 10, js::FULL), CREATE, &f.me(10), &f, &lim);
    assert_eq!(flood, Err(McError::Full(Cap::GroupsPerPort)));
    assert_eq!(flood.unwrap_err().status(), sa_status::NO_RESOURCES);
    g.join(&join_rec("ff15::4", 20, js::FULL), CREATE, &f.me(20), &f, &lim).unwrap();
    assert_eq!(
        g.join(&join_rec("ff15::5", 20, js::FULL), CREATE, &f.me(20), &f, &lim),
        Err(McError::Full(Cap::Groups))
    );
    g.join(&join_rec("ff15::1", 20, js::NON_MEMBER), JOIN_MASK, &f.me(20), &f, &lim).unwrap();
    assert_eq!(
        g.join(&join_rec("ff15::1", 30, js::NON_MEMBER), JOIN_MASK, &f.me(30), &f, &lim),
        Err(McError::Full(Cap::MembersPerGroup))
    );
    g.join(&join_rec("ff15::2", 30, js::NON_MEMBER), JOIN_MASK, &f.me(30), &f, &lim).unwrap();
    assert_eq!(g.member_count(), 6);
    assert_eq!(
        g.join(&join_rec("ff15::3", 30, js::NON_MEMBER), JOIN_MASK, &f.me(30), &f, &lim),
        Err(McError::Full(Cap::Members))
    );
    // Re-joining a group one is in needs no room.
    assert!(g.join(&join_rec("ff15::1", 10, js::NON_MEMBER), JOIN_MASK, &f.me(10), &f, &lim).is_ok());
    assert_eq!(g.len(), 4);
    g.check_invariants().unwrap();
}

#[test]
fn mlids_are_the_asked_one_when_free_else_the_lowest_within_the_cap() {
    let f = Fabric::with_ports(&[10]);
    let mut g = McGroups::new();
    let lim = McLimits { mlids: 3, ..limits() };
    let mut r = join_rec("ff15::1", 10, js::FULL);
    r.mlid = 0xC002;
    assert_eq!(g.join(&r, CREATE | m::MLID, &f.me(10), &f, &lim).unwrap().mlid, 0xC002);
    r.mgid = mgid("ff15::2");
    assert_eq!(g.join(&r, CREATE | m::MLID, &f.me(10), &f, &lim).unwrap().mlid, 0xC000, "taken: the lowest");
    r.mgid = mgid("ff15::3");
    r.mlid = 0xC003;
    assert_eq!(g.join(&r, CREATE | m::MLID, &f.me(10), &f, &lim).unwrap().mlid, 0xC001, "beyond the cap");
    r.mgid = mgid("ff15::4");
    assert_eq!(g.join(&r, CREATE, &f.me(10), &f, &lim), Err(McError::Full(Cap::Mlids)));
    assert_eq!(g.len(), 3, "the refused group left nothing behind");
    g.check_invariants().unwrap();
}

#[test]
fn proxy_joins_need_trust_or_the_same_node() {
    let f = Fabric::with_ports(&[11, 12, 20]);
    let mut g = McGroups::new();
    // Port 20 (another node), untrusted, for port 11: denied.
    let err = g.join(&join_rec(G1, 11, js::FULL), CREATE, &f.me(20), &f, &limits()).unwrap_err();
    assert_eq!(err, McError::ProxyDenied { requester: Guid(20), port: Guid(11) });
    assert_eq!(err.status(), sa_status::DENIED);
    assert!(g.is_empty());
    // Trusted: allowed, marked ProxyJoin.
    let r = g.join(&join_rec(G1, 11, js::FULL), CREATE, &f.trusted(20), &f, &limits()).unwrap();
    assert!(r.proxy_join);
    // Port 12 (same node as 11) may change the proxied member.
    assert!(g.join(&join_rec(G1, 11, js::NON_MEMBER), JOIN_MASK, &f.me(12), &f, &limits()).is_ok());
    // Port 11 joins G2 itself: port 12 may not change that member (o15-0.2.1).
    g.join(&join_rec(G2, 11, js::FULL), CREATE, &f.me(11), &f, &limits()).unwrap();
    assert_eq!(
        g.join(&join_rec(G2, 11, js::NON_MEMBER), JOIN_MASK, &f.me(12), &f, &limits()),
        Err(McError::NotOwner(Guid(11)))
    );
    assert_eq!(g.leave(&join_rec(G2, 11, js::FULL), JOIN_MASK, &f.me(12), &f), Err(McError::NotOwner(Guid(11))));
    assert!(matches!(g.leave(&join_rec(G2, 11, js::FULL), JOIN_MASK, &f.me(20), &f), Err(McError::ProxyDenied { .. })));
    // A trusted requester may; and port 12 may leave the proxied one.
    assert!(g.leave(&join_rec(G2, 11, js::FULL), JOIN_MASK, &f.trusted(20), &f).is_ok());
    assert!(g.leave(&join_rec(G1, 11, js::FULL | js::NON_MEMBER), JOIN_MASK, &f.me(12), &f).is_ok());
    assert!(g.is_empty());
    g.check_invariants().unwrap();
}

fn partitions(members: &[(u64, Vec<(u16, Membership)>)], groups: Vec<WellKnownGroup>) -> PartitionSet {
    let mut set = PartitionSet { groups, ..Default::default() };
    for (g, m) in members {
        set.ports.insert(Guid(*g), PortPartitions { members: m.clone(), index0: None });
    }
    set
}

fn broadcast(pkey: u16, params: GroupParams) -> WellKnownGroup {
    WellKnownGroup { mgid: ipoib_broadcast(2, pkey), pkey, params, ipoib_broadcast: true }
}

/// The join IPoIB sends for a group other than the broadcast one: the
/// broadcast group's parameters, "exactly".
fn ipoib_join(group: &str, port: u64, bcast: &McMemberRecordRepr) -> (McMemberRecordRepr, u64) {
    let r = McMemberRecordRepr {
        mgid: mgid(group),
        port_gid: gid(port),
        join_state: js::FULL,
        proxy_join: false,
        ..*bcast
    };
    let mask = CREATE | m::MTU_SELECTOR | m::MTU | m::RATE_SELECTOR | m::RATE | m::HOP_LIMIT;
    (r, mask)
}

/// Ports 10 and 20, both full members of the default partition, whose
/// IPoIB broadcast group is well known; and those groups.
fn default_partition_fabric() -> (Fabric, Vec<WellKnownGroup>) {
    let mut f = Fabric::with_ports(&[10, 20]);
    let set = partitions(
        &[(10, vec![(0x7fff, Membership::Full)]), (20, vec![(0x7fff, Membership::Full)])],
        vec![broadcast(0xffff, GroupParams::default())],
    );
    let wk = set.groups.clone();
    f.partitions = Some(set);
    (f, wk)
}

#[test]
fn well_known_groups_live_from_the_snapshot_and_leaves_never_delete_them() {
    let (f, wk) = default_partition_fabric();
    let mut g = McGroups::new();
    let rep = g.sync(&wk, &f, &limits());
    assert_eq!((rep.created, rep.unplaced), (1, 0));
    let b = *g.group(&ipoib_broadcast(2, 0xffff)).unwrap().record();
    assert_eq!((b.mlid, b.q_key, b.mtu, b.rate, b.pkey, b.scope, b.hop_limit), (0xC000, 0x0b1b, 4, 3, 0xffff, 2, 0));
    assert!(g.take_events().is_empty(), "no member yet");
    // The broadcast join IPoIB sends first: MGID, PortGID, JoinState, Q_Key.
    let mut r = join_rec("ff12:401b:ffff::ffff:ffff", 10, js::FULL);
    r.q_key = 0x0b1b;
    let got = g.join(&r, JOIN_MASK | m::Q_KEY, &f.me(10), &f, &limits()).unwrap();
    assert_eq!((got.mlid, got.mtu, got.join_state), (0xC000, 4, js::FULL));
    assert_eq!(g.take_events(), vec![McEvent::Created { mgid: b.mgid, pkey: 0xffff }], "first full member");
    g.leave(&r, JOIN_MASK, &f.me(10), &f).unwrap();
    assert_eq!(g.take_events(), vec![McEvent::Deleted { mgid: b.mgid, pkey: 0xffff }], "last full member");
    assert_eq!(g.group(&b.mgid).unwrap().mlid(), 0xC000, "still there");
    // Joined again, a new snapshot keeps it; the partitions changing its MTU update it.
    g.join(&r, JOIN_MASK, &f.me(10), &f, &limits()).unwrap();
    let wk4096 = vec![broadcast(0xffff, GroupParams { mtu: MTU_4096, ..GroupParams::default() })];
    g.sync(&wk4096, &f, &limits());
    assert_eq!(g.group(&b.mgid).unwrap().record().mtu, MTU_4096);
    assert_eq!(g.group(&b.mgid).unwrap().keepers(), 1);
    // No longer declared: an ordinary group, kept by its member, then gone with it.
    g.sync(&[], &f, &limits());
    assert!(!g.group(&b.mgid).unwrap().well_known());
    g.leave(&r, JOIN_MASK, &f.me(10), &f).unwrap();
    assert!(g.is_empty());
    // Declared again with no member, then dropped: gone at once.
    g.sync(&wk, &f, &limits());
    assert_eq!(g.sync(&[], &f, &limits()).groups_dropped, 1);
    assert!(g.is_empty());
    g.check_invariants().unwrap();
}

#[test]
fn ipoib_groups_are_made_on_demand_as_their_broadcast_group_says() {
    let mut f = Fabric::with_ports(&[10, 20]);
    let wk = vec![broadcast(0xffff, GroupParams::default())];
    f.partitions =
        Some(partitions(&[(10, vec![(0x7fff, Membership::Full)]), (20, vec![(0x7fff, Membership::Full)])], wk.clone()));
    let mut g = McGroups::new();
    g.sync(&wk, &f, &limits());
    let b = *g.group(&ipoib_broadcast(2, 0xffff)).unwrap().record();
    for (i, group) in ["ff12:401b:ffff::1", "ff12:601b:ffff::1", "ff12:601b:ffff::1:ff00:0010"].iter().enumerate() {
        let (r, mask) = ipoib_join(group, 10, &b);
        let got = g.join(&r, mask, &f.me(10), &f, &limits()).unwrap();
        assert_eq!(got.mlid, 0xC001 + i as u16);
        assert_eq!((got.q_key, got.mtu, got.rate, got.pkey, got.sl), (b.q_key, b.mtu, b.rate, b.pkey, b.sl));
    }
    // Without MTU or Rate in the mask the broadcast group's still hold,
    // though port 20's link carries 4096.
    let r = McMemberRecordRepr { mgid: mgid("ff12:401b:ffff::2"), port_gid: gid(20), join_state: js::FULL, ..b };
    assert_eq!(g.join(&r, CREATE, &f.me(20), &f, &limits()).unwrap().mtu, b.mtu);
    // Disagreeing with the broadcast group: refused, nothing made.
    let (mut r, mask) = ipoib_join("ff12:401b:ffff::fb", 10, &b);
    r.q_key = 0x1234;
    assert!(matches!(g.join(&r, mask, &f.me(10), &f, &limits()), Err(McError::Mismatch { field: "Q_Key", .. })));
    let (mut r, mask) = ipoib_join("ff12:401b:ffff::fb", 10, &b);
    (r.mtu_selector, r.mtu) = (2, MTU_4096);
    assert!(matches!(g.join(&r, mask, &f.me(10), &f, &limits()), Err(McError::Unrealizable { field: "MTU", .. })));
    // A partition with no broadcast group.
    let (r, mask) = ipoib_join("ff12:401b:8001::1", 10, &McMemberRecordRepr { pkey: 0x8001, ..b });
    assert_eq!(g.join(&r, mask, &f.me(10), &f, &limits()), Err(McError::NoBroadcastGroup(ipoib_broadcast(2, 0x8001))));
    assert_eq!(g.len(), 5);
    g.check_invariants().unwrap();
}

#[test]
fn partitions_decide_who_joins_and_who_stays() {
    let mut f = Fabric::with_ports(&[10, 20]);
    f.partitions = Some(partitions(
        &[(10, vec![(0x7fff, Membership::Full), (0x0010, Membership::Full)]), (20, vec![(0x7fff, Membership::Full)])],
        vec![],
    ));
    let mut g = McGroups::new();
    let mut r = join_rec(G1, 10, js::FULL);
    r.pkey = 0x8010;
    g.join(&r, CREATE, &f.me(10), &f, &limits()).unwrap();
    let mut r20 = r;
    r20.port_gid = gid(20);
    assert_eq!(
        g.join(&r20, JOIN_MASK, &f.me(20), &f, &limits()),
        Err(McError::NotInPartition { port: Guid(20), pkey: 0x8010 })
    );
    // Port 10 leaves partition 0x10: the next snapshot drops it, and the group.
    f.partitions.as_mut().unwrap().ports.get_mut(&Guid(10)).unwrap().members.pop();
    g.take_events();
    assert_eq!(g.sync(&[], &f, &limits()).members_dropped, 1);
    assert!(g.is_empty());
    assert_eq!(g.take_events(), vec![McEvent::Deleted { mgid: mgid(G1), pkey: 0x8010 }]);
    g.check_invariants().unwrap();
}

#[test]
fn ports_gone_from_the_fabric_leave_everything() {
    let mut f = Fabric::with_ports(&[10, 20]);
    let mut g = McGroups::new();
    g.join(&join_rec(G1, 10, js::FULL), CREATE, &f.me(10), &f, &limits()).unwrap();
    g.join(&join_rec(G1, 20, js::FULL), JOIN_MASK, &f.me(20), &f, &limits()).unwrap();
    g.join(&join_rec(G2, 20, js::SEND_ONLY_FULL), CREATE, &f.me(20), &f, &limits()).unwrap();
    assert_eq!(g.membership()[1].send_only, vec![Guid(20)]);
    g.take_events();
    f.ports.remove(&Guid(20));
    let rep = g.sync(&[], &f, &limits());
    assert_eq!(rep.members_dropped, 2);
    assert_eq!(g.len(), 1, "G1 keeps port 10");
    assert_eq!(g.take_events(), vec![McEvent::Deleted { mgid: mgid(G2), pkey: 0xffff }]);
    assert_eq!(g.groups_of(Guid(20)), 0);
    g.check_invariants().unwrap();
}

// ---- Random sequences.

#[derive(Debug, Clone)]
enum Op {
    Join {
        port: usize,
        group: usize,
        bits: u8,
        create: bool,
    },
    Leave {
        port: usize,
        group: usize,
        bits: u8,
    },
    /// A snapshot: port `gone` (if any) left the fabric; the well-known
    /// group declared or not.
    Sync {
        gone: Option<usize>,
        well_known: bool,
    },
}

const PORTS: [u64; 4] = [10, 11, 20, 30];
const GROUPS: [&str; 5] = ["ff12:401b:ffff::ffff:ffff", "ff12:401b:ffff::1", "ff15::1", "ff15::2", "::"];

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (0..4usize, 0..5usize, 0u8..16, any::<bool>())
            .prop_map(|(port, group, bits, create)| Op::Join { port, group, bits, create }),
        4 => (0..4usize, 0..5usize, 0u8..16).prop_map(|(port, group, bits)| Op::Leave { port, group, bits }),
        1 => (proptest::option::of(0..4usize), any::<bool>()).prop_map(|(gone, well_known)| Op::Sync { gone, well_known }),
    ]
}

proptest! {
    /// Whatever joins, leaves and snapshots come: the invariants hold after
    /// every step (MLIDs in use are exactly the live groups', counts
    /// recount, no group without a keeper but well-known ones); and at the
    /// end every MLID not held by a live group can be taken again.
    #[test]
    fn no_sequence_leaks_an_mlid_or_a_count(ops in proptest::collection::vec(op(), 1..120)) {
        let mut f = Fabric::with_ports(&PORTS);
        let lim = McLimits { mlids: 6, max_groups_per_port: 4, ..limits() };
        let wk = vec![broadcast(0xffff, GroupParams::default())];
        let mut g = McGroups::new();
        g.sync(&wk, &f, &lim);
        let bcast = *g.group(&ipoib_broadcast(2, 0xffff)).unwrap().record();
        for op in ops {
            match op {
                Op::Join { port, group, bits, create } => {
                    let Some(&caps) = f.ports.get(&Guid(PORTS[port])) else { continue };
                    let (mut r, mut mask) = ipoib_join(GROUPS[group], caps.guid.0, &bcast);
                    r.join_state = bits;
                    if !create {
                        mask = JOIN_MASK;
                    }
                    let before = g.len();
                    let who = Requester { port: caps, trusted: false };
                    match g.join(&r, mask, &who, &f, &lim) {
                        Ok(a) => {
                            prop_assert_eq!(a.join_state & bits, bits & js::ALL);
                            prop_assert!(g.len() <= before + 1);
                        }
                        Err(_) => prop_assert_eq!(g.len(), before, "a refused join creates nothing"),
                    }
                }
                Op::Leave { port, group, bits } => {
                    let Some(&caps) = f.ports.get(&Guid(PORTS[port])) else { continue };
                    let mut r = join_rec(GROUPS[group], caps.guid.0, bits);
                    if GROUPS[group] == "::" {
                        // Leave the first SA-made group, if any.
                        if let Some(made) = g.groups().find(|x| mgid::signature(&x.mgid()) == mgid::SA_ASSIGNED) {
                            r.mgid = made.mgid();
                        }
                    }
                    let who = Requester { port: caps, trusted: false };
                    let _ = g.leave(&r, JOIN_MASK, &who, &f);
                }
                Op::Sync { gone, well_known } => {
                    if let Some(p) = gone {
                        f.ports.remove(&Guid(PORTS[p]));
                    }
                    g.sync(if well_known { &wk } else { &[] }, &f, &lim);
                }
            }
            if let Err(e) = g.check_invariants() {
                return Err(TestCaseError::fail(e));
            }
            prop_assert!(g.len() <= usize::from(lim.mlids));
        }
        // Every MLID no live group holds is free: exactly that many new
        // groups fit, then the MLIDs run out.
        let free = usize::from(lim.mlids) - g.len();
        f = Fabric::with_ports(&[90, 91, 92, 93, 94, 95]);
        let mut taken = 0;
        for i in 0..free {
            let port = 90 + i as u64;
            let r = join_rec(&format!("ff15::9:{i}"), port, js::FULL);
            let who = Requester { port: f.caps(port), trusted: false };
            let a = g.join(&r, CREATE, &who, &f, &lim);
            prop_assert!(a.is_ok(), "MLID {} of {} free: {:?}", i, free, a);
            taken += 1;
        }
        prop_assert_eq!(taken, free);
        let who = Requester { port: f.caps(90), trusted: false };
        prop_assert_eq!(
            g.join(&join_rec("ff15::9:ff", 90, js::FULL), CREATE, &who, &f, &lim),
            Err(McError::Full(Cap::Mlids))
        );
        let mut mlids: Vec<u16> = g.groups().map(|x| x.mlid()).collect();
        mlids.sort();
        prop_assert_eq!(mlids, (0..lim.mlids).map(|i| MLID_BASE + i).collect::<Vec<_>>());
    }
}

#[test]
fn an_sa_that_stops_being_master_forgets_every_membership_but_keeps_the_well_known_groups() {
    let (f, wk) = default_partition_fabric();
    let mut g = McGroups::new();
    g.sync(&wk, &f, &limits());
    let mut b = join_rec("ff12:401b:ffff::ffff:ffff", 10, js::FULL);
    b.q_key = 0x0b1b;
    g.join(&b, JOIN_MASK | m::Q_KEY, &f.me(10), &f, &limits()).unwrap();
    let other = g.join(&join_rec(G1, 20, js::FULL), CREATE, &f.me(20), &f, &limits()).unwrap();
    assert_eq!(other.mlid, 0xC001);
    let version = g.version();
    assert_eq!(g.forget_members(), 2);
    assert!(g.version() > version, "the owner must hear of it");
    assert_eq!(g.len(), 1, "only the well-known group is left");
    let bcast = g.group(&ipoib_broadcast(2, 0xffff)).unwrap();
    assert_eq!((bcast.mlid(), bcast.members().count(), bcast.keepers()), (0xC000, 0, 0));
    assert!(g.take_events().is_empty(), "no traps from an SA that is not master");
    g.check_invariants().unwrap();
    // 0xC001 is free again.
    let again = g.join(&join_rec(G2, 20, js::FULL), CREATE, &f.me(20), &f, &limits()).unwrap();
    assert_eq!(again.mlid, 0xC001);
    assert_eq!(g.forget_members(), 1);
    assert_eq!(g.forget_members(), 0);
}
