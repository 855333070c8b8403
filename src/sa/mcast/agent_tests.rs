//! MCMemberRecord through the SA agent, on snapshots of the in-process
//! fabric (`sa::tests`' fixture): every MAD in is bytes a requester could
//! send, every answer is read back from the bytes the agent emits.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use crate::datagram::Datagram;
use crate::mad::sa::{
    inform_wildcard as wildcard, join_state as js, mc_member_mask as m, InformInfoRepr, InformKind, McMemberRecordRepr,
    SaAttributeId, SA_DATA_OFFSET,
};
use crate::mad::NoticeRepr;
use crate::partition::{GroupParams, Membership, PartitionSet, PortPartitions, WellKnownGroup};
use crate::sa::index::{gid, DEFAULT_SUBNET_PREFIX};
use crate::sa::mcast::{ipoib_broadcast, CREATE_MASK, JOIN_MASK};
use crate::sa::tests::{
    agent, drain, fetch, other_hosts, query, sa_status_of, sm_lid, snapshot, swept, Answer, SA_KEY,
};
use crate::sa::{SaAgent, SaConfig, Serving};
use crate::subnet::snapshot::Snapshot;
use crate::types::Guid;

const SET: u8 = 0x02;
const GET: u8 = 0x01;
const GET_TABLE: u8 = 0x12;
const DELETE: u8 = 0x15;
const CREATE: u64 = JOIN_MASK | CREATE_MASK;

fn mgid(s: &str) -> [u8; 16] {
    s.parse::<std::net::Ipv6Addr>().unwrap().octets()
}

fn port_gid(g: Guid) -> [u8; 16] {
    gid(DEFAULT_SUBNET_PREFIX, g)
}

/// A join record: `port` to `group` as `state`, Q_Key 0x1234, default P_Key.
fn rec(group: &str, port: Guid, state: u8) -> McMemberRecordRepr {
    McMemberRecordRepr {
        mgid: mgid(group),
        port_gid: port_gid(port),
        q_key: 0x1234,
        pkey: 0xffff,
        join_state: state,
        ..Default::default()
    }
}

/// One MCMemberRecord request from `lid` and its whole answer.
fn ask(a: &mut SaAgent, method: u8, r: &McMemberRecordRepr, mask: u64, key: u64, lid: u16) -> Answer {
    fetch(a, &query(method, r, mask, key, lid))
}

fn one(answer: &Answer) -> McMemberRecordRepr {
    assert_eq!(answer.status, 0, "answered with status 0");
    McMemberRecordRepr::parse_bytes(&answer.data).unwrap()
}

/// Two CA ports besides the SM's: (GUID, LID).
fn hosts() -> [(Guid, u16); 2] {
    let h = other_hosts();
    [h[0], h[1]]
}

const G1: &str = "ff15::1:1";
const G2: &str = "ff15::1:2";

#[test]
fn joins_queries_and_leaves_and_the_last_leave_frees_the_mlid() {
    let mut a = agent();
    let [(ga, la), (gb, lb)] = hosts();
    let v0 = a.multicast().version();
    let r = one(&ask(&mut a, SET, &rec(G1, ga, js::FULL), CREATE, 0, la));
    assert_eq!((r.mlid, r.join_state, r.port_gid), (0xC000, js::FULL, port_gid(ga)));
    assert_eq!((r.mtu_selector, r.mtu, r.rate_selector), (2, 4, 2), "exactly the 2048-byte links of the fabric");
    let answer = ask(&mut a, SET, &rec(G1, gb, js::NON_MEMBER), JOIN_MASK, 0, lb);
    assert_eq!(answer.method, 0x81, "a GetResp");
    assert_eq!(one(&answer).mlid, 0xC000, "the same group");
    assert!(a.multicast().version() > v0);
    assert_eq!(a.multicast().mcast_table().members(crate::types::Lid(0xC000)).len(), 2);

    // An untrusted Get by MGID: the group, without member fields.
    let q = McMemberRecordRepr { mgid: mgid(G1), ..Default::default() };
    let g = one(&ask(&mut a, GET, &q, m::MGID, 0, la));
    assert_eq!((g.mlid, g.q_key, g.port_gid, g.join_state, g.proxy_join), (0xC000, 0x1234, [0; 16], 0, false));
    // Trusted: one record per member.
    let t = ask(&mut a, GET_TABLE, &q, m::MGID, SA_KEY, la).parse::<McMemberRecordRepr>();
    let mut members: Vec<([u8; 16], u8)> = t.iter().map(|r| (r.port_gid, r.join_state)).collect();
    members.sort();
    let mut want = vec![(port_gid(ga), js::FULL), (port_gid(gb), js::NON_MEMBER)];
    want.sort();
    assert_eq!(members, want);
    // Trusted Get of the group: two members, too many records.
    assert_eq!(sa_status_of(&ask(&mut a, GET, &q, m::MGID, SA_KEY, la)), 4);
    // A PortGID names one membership, for anyone (fields zeroed untrusted).
    let mine = McMemberRecordRepr { port_gid: port_gid(gb), ..q };
    let r = one(&ask(&mut a, GET, &mine, m::MGID | m::PORT_GID, SA_KEY, la));
    assert_eq!(r.join_state, js::NON_MEMBER);
    // Selectors in queries: the group's 2048 is not greater than 2048.
    let sel = McMemberRecordRepr { mtu_selector: 0, mtu: 4, ..q };
    assert!(ask(&mut a, GET_TABLE, &sel, m::MGID | m::MTU_SELECTOR | m::MTU, 0, la).records(52).is_empty());
    let sel = McMemberRecordRepr { mtu_selector: 0, mtu: 3, ..q };
    assert_eq!(ask(&mut a, GET_TABLE, &sel, m::MGID | m::MTU_SELECTOR | m::MTU, 0, la).records(52).len(), 1);
    // An unknown MGID: no record.
    let unknown = McMemberRecordRepr { mgid: mgid(G2), ..q };
    assert_eq!(sa_status_of(&ask(&mut a, GET, &unknown, m::MGID, 0, la)), 3, "ERR_NO_RECORDS");

    // Leaves: DeleteResp with what is left; the last keeper takes the group.
    let left = ask(&mut a, DELETE, &rec(G1, gb, js::NON_MEMBER), JOIN_MASK, 0, lb);
    assert_eq!((left.method, one(&left).join_state), (0x95, 0));
    let left = one(&ask(&mut a, DELETE, &rec(G1, ga, js::FULL), JOIN_MASK, 0, la));
    assert_eq!((left.mlid, left.join_state), (0xC000, 0));
    assert!(a.multicast().is_empty());
    assert!(ask(&mut a, GET_TABLE, &McMemberRecordRepr::default(), 0, SA_KEY, la).records(52).is_empty());
    // The next group takes 0xC000 again.
    assert_eq!(one(&ask(&mut a, SET, &rec(G2, gb, js::FULL), CREATE, 0, lb)).mlid, 0xC000);
    let s = a.stats();
    assert_eq!((s.mcast.joins, s.mcast.leaves, s.mcast.groups, s.mcast.members), (3, 2, 1, 1));
    let k = (u16::from(SaAttributeId::McMemberRecord), SET);
    assert_eq!(s.by_query[&k].ok, 3);
}

/// OpenSM's PR #43 through the agent: a send-only-full join, then a
/// partial leave, 2,000 times: the group and its MLID go every time.
#[test]
fn send_only_full_join_and_partial_leave_2000_times_leak_no_mlid() {
    let mut a = agent();
    let [(ga, la), (gb, lb)] = hosts();
    for i in 0..2000 {
        let r = one(&ask(&mut a, SET, &rec(G1, ga, js::SEND_ONLY_FULL | js::NON_MEMBER), CREATE, 0, la));
        assert_eq!(r.mlid, 0xC000, "round {i}");
        one(&ask(&mut a, SET, &rec(G1, gb, js::NON_MEMBER), JOIN_MASK, 0, lb));
        let left = one(&ask(&mut a, DELETE, &rec(G1, ga, js::SEND_ONLY_FULL), JOIN_MASK, 0, la));
        assert_eq!(left.join_state, 0, "round {i}: no keeper, so the group went with its NonMembers");
        assert!(a.multicast().is_empty(), "round {i}");
    }
    assert_eq!(a.stats().mcast.members, 0);
}

#[test]
fn bad_joins_and_leaves_get_an_error_status_and_leave_nothing() {
    let mut a = agent();
    let [(ga, la), (gb, lb)] = hosts();
    one(&ask(&mut a, SET, &rec(G1, ga, js::FULL), CREATE, 0, la));
    let status = |a: &mut SaAgent, method, r: &McMemberRecordRepr, mask, key, lid| {
        sa_status_of(&ask(a, method, r, mask, key, lid))
    };
    // Mismatched Q_Key and P_Key.
    let q_key = McMemberRecordRepr { q_key: 0x9999, ..rec(G1, gb, js::FULL) };
    assert_eq!(status(&mut a, SET, &q_key, CREATE, 0, lb), 2, "ERR_REQ_INVALID");
    let p_key = McMemberRecordRepr { pkey: 0x8001, ..rec(G1, gb, js::FULL) };
    assert_eq!(status(&mut a, SET, &p_key, CREATE, 0, lb), 2);
    // MTU exactly 4096 on a 2048-byte port, a rate no port has.
    let mtu = McMemberRecordRepr { mtu_selector: 2, mtu: 5, ..rec(G2, gb, js::FULL) };
    assert_eq!(status(&mut a, SET, &mtu, CREATE | m::MTU_SELECTOR | m::MTU, 0, lb), 2);
    let rate = McMemberRecordRepr { rate_selector: 2, rate: 24, ..rec(G2, gb, js::FULL) };
    assert_eq!(status(&mut a, SET, &rate, CREATE | m::RATE_SELECTOR | m::RATE, 0, lb), 2);
    // Missing components: a join, a create.
    assert_eq!(status(&mut a, SET, &rec(G1, gb, js::FULL), m::MGID | m::PORT_GID, 0, lb), 6);
    assert_eq!(status(&mut a, SET, &rec(G2, gb, js::FULL), JOIN_MASK | m::Q_KEY, 0, lb), 6);
    // A leave of a group never joined, of an unknown group, of bits not held.
    assert_eq!(status(&mut a, DELETE, &rec(G1, gb, js::FULL), JOIN_MASK, 0, lb), 2);
    assert_eq!(status(&mut a, DELETE, &rec(G2, gb, js::FULL), JOIN_MASK, 0, lb), 2);
    assert_eq!(status(&mut a, DELETE, &rec(G1, ga, js::NON_MEMBER), JOIN_MASK, 0, la), 2);
    // A mask bit past the record.
    assert_eq!(status(&mut a, SET, &rec(G1, gb, js::FULL), JOIN_MASK | 1 << 19, 0, lb), 2);
    // An untrusted proxy join (another node's port) is denied; a trusted one works.
    assert_eq!(status(&mut a, SET, &rec(G1, gb, js::FULL), JOIN_MASK, 0, la), 7, "ERR_REQ_DENIED");
    let proxied = one(&ask(&mut a, SET, &rec(G1, gb, js::FULL), JOIN_MASK, SA_KEY, la));
    assert!(proxied.proxy_join);
    assert_eq!(a.multicast().len(), 1, "no refusal made a group");
    let s = a.stats();
    assert_eq!((s.mcast.joins, s.mcast.join_errors, s.mcast.leave_errors), (2, 8, 3));
}

#[test]
fn a_join_flood_from_one_port_is_capped_and_others_still_join() {
    let snap = snapshot(1, swept().clone());
    let cfg = SaConfig { sa_key: SA_KEY, max_mcast_groups_per_port: 5, ..SaConfig::default() };
    let mut a = SaAgent::new(cfg, snap.master);
    a.new_snapshot(Duration::ZERO, snap);
    a.set_serving(Duration::ZERO, Serving::Master);
    let [(ga, la), (gb, lb)] = hosts();
    for i in 0..50 {
        let answer = ask(&mut a, SET, &rec(&format!("ff15::2:{i}"), ga, js::FULL), CREATE, 0, la);
        assert_eq!(sa_status_of(&answer), if i < 5 { 0 } else { 1 }, "join {i}: ERR_NO_RESOURCES past 5");
    }
    assert_eq!(a.multicast().len(), 5);
    assert_eq!(a.stats().drops.mcast_cap, 45);
    assert_eq!(one(&ask(&mut a, SET, &rec("ff15::2:99", gb, js::FULL), CREATE, 0, lb)).mlid, 0xC005);
}

fn inform(trap_number: u16) -> InformInfoRepr {
    InformInfoRepr {
        gid: [0; 16],
        lid_range_begin: wildcard::LID,
        lid_range_end: 0,
        subscribe: true,
        notice_type: wildcard::TYPE,
        kind: InformKind::Generic { trap_number, producer_type: wildcard::PRODUCER_TYPE },
        qpn: 0,
        resp_time_value: 0,
    }
}

fn reports(out: &[Datagram]) -> Vec<(u16, NoticeRepr)> {
    out.iter()
        .filter(|d| d.mad[3] == 0x06)
        .map(|d| (d.addr.lid.0, NoticeRepr::parse_bytes(&d.mad[SA_DATA_OFFSET..SA_DATA_OFFSET + 80]).unwrap()))
        .collect()
}

#[test]
fn traps_66_and_67_reach_subscribers_as_reports() {
    let mut a = agent();
    let [(ga, la), (_, lb)] = hosts();
    for t in [66, 67] {
        assert_eq!(fetch(&mut a, &query(SET, &inform(t), 0, 0, lb)).status, 0);
    }
    a.handle_mad(Duration::ZERO, &query(SET, &rec(G1, ga, js::FULL), CREATE, 0, la));
    let out = drain(&mut a, Duration::ZERO);
    assert_eq!(out[0].mad[3], 0x81, "the answer goes first");
    let sent = reports(&out);
    assert_eq!(sent.len(), 1);
    let (to, n) = &sent[0];
    assert_eq!((*to, n.trap_number, n.producer_type, n.issuer_lid.0), (lb, 66, 4, sm_lid()));
    assert_eq!(&n.data_details[6..22], &mgid(G1)[..], "the MGID");
    // A second member makes no trap; the last keeper's leave makes 67.
    a.handle_mad(Duration::ZERO, &query(SET, &rec(G1, ga, js::NON_MEMBER), JOIN_MASK, 0, la));
    assert!(reports(&drain(&mut a, Duration::ZERO)).is_empty());
    a.handle_mad(Duration::ZERO, &query(DELETE, &rec(G1, ga, js::FULL), JOIN_MASK, 0, la));
    let sent = reports(&drain(&mut a, Duration::ZERO));
    assert_eq!(sent.iter().map(|(_, n)| n.trap_number).collect::<Vec<_>>(), vec![67]);
    assert_eq!(&sent[0].1.data_details[6..22], &mgid(G1)[..]);
    assert_eq!((a.stats().reports.mcast_created, a.stats().reports.mcast_deleted), (1, 1));
}

/// A snapshot of the fixture whose partitions make every CA port a full
/// member of the default partition, with its IPoIB broadcast group, and
/// (when `p10`) `in_p10` also of partition 0x10.
fn partitioned(sequence: u64, in_p10: &[Guid]) -> Arc<Snapshot> {
    let base = snapshot(sequence, swept().clone());
    let mut set = PartitionSet {
        groups: vec![WellKnownGroup {
            mgid: ipoib_broadcast(2, 0xffff),
            pkey: 0xffff,
            params: GroupParams::default(),
            ipoib_broadcast: true,
        }],
        ..Default::default()
    };
    let subnet = &base.sweep.subnet;
    for id in subnet.ids().filter(|&id| !subnet.node(id).is_switch()) {
        let g = subnet.node(id).port_guid(1);
        let mut members = vec![(0x7fff, Membership::Full)];
        if in_p10.contains(&g) {
            members.push((0x0010, Membership::Full));
        }
        set.ports.insert(g, PortPartitions { members, index0: None });
    }
    Arc::new(Snapshot {
        sequence,
        taken_at: SystemTime::UNIX_EPOCH,
        master: base.master,
        master_lid: base.master_lid,
        sweep: crate::subnet::SweepReport { partitions: Some(Arc::new(set)), ..swept().clone() },
    })
}

#[test]
fn the_ipoib_broadcast_group_is_there_before_any_join_and_others_follow_it() {
    let snap = partitioned(1, &[]);
    let mut a = SaAgent::new(SaConfig { sa_key: SA_KEY, ..SaConfig::default() }, snap.master);
    a.new_snapshot(Duration::ZERO, snap);
    a.set_serving(Duration::ZERO, Serving::Master);
    let [(ga, la), (gb, lb)] = hosts();
    let bcast = ipoib_broadcast(2, 0xffff);
    // Before any join: seen by anyone in the partition, and by a trusted table read.
    let q = McMemberRecordRepr { mgid: bcast, ..Default::default() };
    let b = one(&ask(&mut a, GET, &q, m::MGID, 0, la));
    assert_eq!((b.mlid, b.q_key, b.pkey, b.mtu, b.rate, b.scope), (0xC000, 0x0b1b, 0xffff, 4, 3, 2));
    assert_eq!(ask(&mut a, GET_TABLE, &McMemberRecordRepr::default(), 0, SA_KEY, la).records(52).len(), 1);
    // IPoIB's broadcast join, then the IPv4 all-nodes group with the
    // broadcast group's parameters (what the kernel copies).
    let join = McMemberRecordRepr { port_gid: port_gid(ga), join_state: js::FULL, ..b };
    assert_eq!(one(&ask(&mut a, SET, &join, JOIN_MASK | m::Q_KEY, 0, la)).mlid, 0xC000);
    let ipoib_mask = CREATE | m::MTU_SELECTOR | m::MTU | m::RATE_SELECTOR | m::RATE | m::HOP_LIMIT;
    let all_nodes = McMemberRecordRepr { mgid: mgid("ff12:401b:ffff::1"), ..join };
    let r = one(&ask(&mut a, SET, &all_nodes, ipoib_mask, 0, la));
    assert_eq!((r.mlid, r.q_key, r.mtu, r.rate), (0xC001, 0x0b1b, 4, 3));
    let other = McMemberRecordRepr { port_gid: port_gid(gb), ..all_nodes };
    assert_eq!(one(&ask(&mut a, SET, &other, ipoib_mask, 0, lb)).mlid, 0xC001, "joined, not made again");
    // An IPoIB group that disagrees with the broadcast group: refused.
    let bad = McMemberRecordRepr { mgid: mgid("ff12:401b:ffff::2"), q_key: 0x1234, ..join };
    assert_eq!(sa_status_of(&ask(&mut a, SET, &bad, ipoib_mask, 0, la)), 2);
    assert_eq!(a.multicast().len(), 2);
    // The last member leaves: the broadcast group stays, all-nodes goes.
    for (g, l) in [(ga, la), (gb, lb)] {
        let leave = McMemberRecordRepr { port_gid: port_gid(g), ..all_nodes };
        one(&ask(&mut a, DELETE, &leave, JOIN_MASK, 0, l));
    }
    one(&ask(&mut a, DELETE, &join, JOIN_MASK, 0, la));
    assert_eq!(a.multicast().len(), 1);
    assert_eq!(one(&ask(&mut a, GET, &q, m::MGID, 0, la)).mlid, 0xC000);
}

#[test]
fn a_port_leaving_the_groups_partition_leaves_the_group() {
    let [(ga, la), (gb, lb)] = hosts();
    let snap = partitioned(1, &[ga, gb]);
    let mut a = SaAgent::new(SaConfig { sa_key: SA_KEY, ..SaConfig::default() }, snap.master);
    a.new_snapshot(Duration::ZERO, snap);
    a.set_serving(Duration::ZERO, Serving::Master);
    let p10 = McMemberRecordRepr { pkey: 0x8010, ..rec(G1, ga, js::FULL) };
    assert_eq!(one(&ask(&mut a, SET, &p10, CREATE, 0, la)).mlid, 0xC001, "after the broadcast group");
    one(&ask(&mut a, SET, &McMemberRecordRepr { port_gid: port_gid(gb), ..p10 }, JOIN_MASK, 0, lb));
    // Port A is no longer in 0x10: it leaves, B keeps the group.
    a.new_snapshot(Duration::ZERO, partitioned(2, &[gb]));
    let g = a.multicast().group(&mgid(G1)).unwrap();
    assert_eq!(g.members().map(|(p, _)| p).collect::<Vec<_>>(), vec![gb]);
    assert_eq!(a.stats().mcast.members_dropped, 1);
    // An untrusted requester outside 0x10 does not see the group.
    let q = McMemberRecordRepr { mgid: mgid(G1), ..Default::default() };
    assert_eq!(sa_status_of(&ask(&mut a, GET, &q, m::MGID, 0, la)), 3);
    assert_eq!(one(&ask(&mut a, GET, &q, m::MGID, 0, lb)).pkey, 0x8010);
    // Neither is in it any more: the group goes.
    a.new_snapshot(Duration::ZERO, partitioned(3, &[]));
    assert!(a.multicast().group(&mgid(G1)).is_none());
    assert_eq!(a.multicast().len(), 1, "the broadcast group stays");
}

/// `consolidate_ipv6_snm_req`: each host's IPv6 Solicited-Node group is
/// its own group (its own MGID in every answer), but the groups of one
/// scope and partition share an MLID, whose tree reaches every member;
/// the MLID stays while any of them has members. Off, each has its own.
#[test]
fn solicited_node_groups_share_one_mlid_when_consolidated() {
    let [(ga, la), (gb, lb)] = hosts();
    let ipoib_mask = CREATE | m::MTU_SELECTOR | m::MTU | m::RATE_SELECTOR | m::RATE | m::HOP_LIMIT;
    let run = |consolidate: bool| {
        let snap = partitioned(1, &[]);
        let cfg = SaConfig { sa_key: SA_KEY, consolidate_ipv6_snm_req: consolidate, ..SaConfig::default() };
        let mut a = SaAgent::new(cfg, snap.master);
        a.new_snapshot(Duration::ZERO, snap);
        a.set_serving(Duration::ZERO, Serving::Master);
        let q = McMemberRecordRepr { mgid: ipoib_broadcast(2, 0xffff), ..Default::default() };
        let b = one(&ask(&mut a, GET, &q, m::MGID, 0, la));
        let snm = |group: &str, g: Guid| McMemberRecordRepr {
            mgid: mgid(group),
            port_gid: port_gid(g),
            join_state: js::FULL,
            ..b
        };
        let (sa, sb) = ("ff12:601b:ffff::1:ff00:aa", "ff12:601b:ffff::1:ff00:bb");
        let ra = one(&ask(&mut a, SET, &snm(sa, ga), ipoib_mask, 0, la));
        let rb = one(&ask(&mut a, SET, &snm(sb, gb), ipoib_mask, 0, lb));
        assert_eq!((ra.mgid, rb.mgid), (mgid(sa), mgid(sb)), "each answered with its own MGID");
        // The IPv6 all-nodes group is no Solicited-Node group (other
        // scopes and partitions are other families: `mgid` tests).
        let rd = one(&ask(&mut a, SET, &snm("ff12:601b:ffff::1", ga), ipoib_mask, 0, la));
        assert_eq!(a.multicast().len(), 4);
        a.multicast().check_invariants().unwrap();
        let table = a.multicast().mcast_table();
        (a, ra.mlid, rb.mlid, rd.mlid, table)
    };
    let (_, a, b, d, _) = run(false);
    assert_eq!([a, b, d], [0xC001, 0xC002, 0xC003], "one MLID each, as OpenSM by default");

    let (mut agent, a, b, d, table) = run(true);
    assert_eq!([a, b, d], [0xC001, 0xC001, 0xC002]);
    let shared: Vec<Guid> = table.members(crate::types::Lid(0xC001)).to_vec();
    assert_eq!(
        shared,
        {
            let mut v = vec![ga, gb];
            v.sort();
            v
        },
        "the shared MLID's tree reaches both hosts"
    );
    // The first host leaves its group: the MLID stays for the other's.
    let leave = McMemberRecordRepr {
        mgid: mgid("ff12:601b:ffff::1:ff00:aa"),
        port_gid: port_gid(ga),
        join_state: js::FULL,
        ..Default::default()
    };
    one(&ask(&mut agent, DELETE, &leave, JOIN_MASK, 0, la));
    assert_eq!(agent.multicast().by_mlid(0xC001).map(|g| g.mgid()), Some(mgid("ff12:601b:ffff::1:ff00:bb")));
    agent.multicast().check_invariants().unwrap();
    // A new Solicited-Node group of the family joins the same MLID again.
    let again = McMemberRecordRepr { mgid: mgid("ff12:601b:ffff::1:ff00:cc"), ..leave };
    let ipoib_mask = CREATE | m::MTU_SELECTOR | m::MTU | m::RATE_SELECTOR | m::RATE | m::HOP_LIMIT;
    let q = McMemberRecordRepr { mgid: ipoib_broadcast(2, 0xffff), ..Default::default() };
    let b = one(&ask(&mut agent, GET, &q, m::MGID, 0, la));
    let again = McMemberRecordRepr {
        join_state: js::FULL,
        ..McMemberRecordRepr { mgid: again.mgid, port_gid: again.port_gid, ..b }
    };
    assert_eq!(one(&ask(&mut agent, SET, &again, ipoib_mask, 0, la)).mlid, 0xC001);
    // Both leave: the MLID is free.
    for (g, l, group) in [(gb, lb, "ff12:601b:ffff::1:ff00:bb"), (ga, la, "ff12:601b:ffff::1:ff00:cc")] {
        let leave =
            McMemberRecordRepr { mgid: mgid(group), port_gid: port_gid(g), join_state: js::FULL, ..Default::default() };
        one(&ask(&mut agent, DELETE, &leave, JOIN_MASK, 0, l));
    }
    assert!(agent.multicast().by_mlid(0xC001).is_none());
    agent.multicast().check_invariants().unwrap();
}
