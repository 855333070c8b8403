//! Directed-route SMPs through the simulated fabric (IBA 14.2.2): the
//! return path, hop pointer and D bit on the wire, the LID-routed segments
//! DrSLID/DrDLID open at either end, and the status codes of the SMA.

mod sim_support;

use ibsm::mad::header::status;
use ibsm::mad::{
    AttributeId, DrPath, LftBlockRepr, Method, NodeDescriptionRepr, NodeInfoRepr, NodeType, PortInfoRepr, SmpRepr,
    SwitchInfoRepr,
};
use ibsm::sim::{DropReason, FabricBuilder};
use ibsm::transport::{Datagram, MadAddress, MadDevice};
use ibsm::{Guid, Lid};
use sim_support::*;

fn fabric() -> ibsm::sim::SharedFabric {
    FabricBuilder::new(&small()).seed(1).build_shared().unwrap()
}

#[test]
fn local_get_answers_for_the_sm_port_itself() {
    let f = fabric();
    let mut sm = TestSm::attach(&f, "H-0001", 1);
    let r = sm.dr_get(&[], AttributeId::NodeInfo, 0).unwrap();
    let ni = NodeInfoRepr::parse_bytes(&r.data).unwrap();
    assert_eq!(ni.node_type, NodeType::Ca);
    assert_eq!(ni.num_ports, 2);
    assert_eq!(ni.node_guid, Guid(0x100000));
    assert_eq!(ni.port_guid, Guid(0x100001));
    assert_eq!(ni.local_port_num, 1);
    assert_eq!(ni.partition_cap, 64);
    assert_eq!(ni.revision, 0xa1);
    let (inbound, hp, hc, _) = dr_route(&r);
    assert!(inbound);
    assert_eq!((hp, hc), (0, 0));
    assert_eq!(r.header.method, Method::GetResp);
}

#[test]
fn one_hop_response_bytes() {
    let f = fabric();
    let mut sm = TestSm::attach(&f, "H-0001", 1);
    let req =
        SmpRepr::directed_request(Method::Get, AttributeId::NodeInfo, 0, DrPath::from_ports(&[1]).unwrap(), 0, [0; 64]);
    let d = sm.exchange(req, MadAddress::smi_permissive()).unwrap();
    let b = &d.mad;
    assert_eq!(b.len(), 256);
    assert_eq!(&b[0..4], &[1, 0x81, 1, 0x81], "base, DR class, class version, GetResp");
    assert_eq!(&b[4..8], &[0x80, 0x00, 0x00, 0x01], "D bit, status 0, hop pointer 0, hop count 1");
    assert_eq!(&b[16..18], &[0x00, 0x11]);
    assert_eq!(&b[32..36], &[0xff, 0xff, 0xff, 0xff], "DrSLID/DrDLID stay permissive");
    assert_eq!(&b[128..130], &[0, 1], "initial path untouched");
    assert_eq!(&b[192..194], &[0, 1], "return path: entry 0 unused, entry 1 = switch ingress port");
    assert_eq!(b[64 + 2], 2, "NodeType switch");
    assert_eq!(b[64 + 36], 1, "LocalPortNum = port the SMP entered the switch by");
    assert_eq!(d.addr.lid, Lid::PERMISSIVE);
    // Switch NodeInfo mirrors ibsim's: 0101 0208 ... PartitionCap 8, rev a1.
    let ni = NodeInfoRepr::parse_bytes(&b[64..128]).unwrap();
    assert_eq!((ni.node_guid, ni.port_guid, ni.partition_cap), (Guid(0x200000), Guid(0x200000), 8));
}

#[test]
fn three_hops_fill_the_return_path_with_ingress_ports() {
    let f = fabric();
    let mut sm = TestSm::attach(&f, "H-0001", 1);
    // H1 -> S1 (in 1) -out 3-> S2 (in 1) -out 2-> H3 (in 1)
    let r = sm.dr_get(&[1, 3, 2], AttributeId::NodeDescription, 0).unwrap();
    assert_eq!(NodeDescriptionRepr::parse_bytes(&r.data).unwrap().text, "h-0003");
    let (inbound, hp, hc, ret) = dr_route(&r);
    assert!(inbound);
    assert_eq!((hp, hc), (0, 3));
    assert_eq!(ret.ports(), &[1, 1, 1]);
    // Into S2 through its port 1 and out again the same way it came.
    let r = sm.dr_get(&[1, 3, 1], AttributeId::NodeInfo, 0).unwrap();
    let ni = NodeInfoRepr::parse_bytes(&r.data).unwrap();
    assert_eq!(ni.node_guid, Guid(0x200000), "back at S1");
    assert_eq!(ni.local_port_num, 3);
    assert_eq!(dr_route(&r).3.ports(), &[1, 1, 3]);
    // From H2's side: S1 in 2.
    let mut sm2 = TestSm::attach(&f, "H-0002", 1);
    let r = sm2.dr_get(&[1, 1], AttributeId::NodeInfo, 0).unwrap();
    let ni = NodeInfoRepr::parse_bytes(&r.data).unwrap();
    assert_eq!((ni.node_guid, ni.local_port_num), (Guid(0x100000), 1));
    assert_eq!(dr_route(&r).3.ports(), &[2, 1]);
}

#[test]
fn bad_paths_are_dropped_silently() {
    let f = fabric();
    let mut sm = TestSm::attach(&f, "H-0001", 1);
    // Port 9 does not exist on the 8-port switch.
    assert!(sm.dr_get(&[1, 9], AttributeId::NodeInfo, 0).is_none());
    assert_eq!(f.lock().unwrap().dropped(DropReason::DrBadPort), 1);
    // Port 4 of S1 has no cable.
    assert!(sm.dr_get(&[1, 4], AttributeId::NodeInfo, 0).is_none());
    assert_eq!(f.lock().unwrap().dropped(DropReason::LinkDown), 1);
    // A CA in the middle of a path (H2) does not forward.
    assert!(sm.dr_get(&[1, 2, 1], AttributeId::NodeInfo, 0).is_none());
    assert_eq!(f.lock().unwrap().dropped(DropReason::DrEndNodeInPath), 1);
    // A CA sends only out of its own port: path 0,2 from port 1.
    assert!(sm.dr_get(&[2], AttributeId::NodeInfo, 0).is_none());
    assert_eq!(f.lock().unwrap().dropped(DropReason::DrBadPort), 2);
    // A request with a non-zero hop pointer at the source.
    let mut req =
        SmpRepr::directed_request(Method::Get, AttributeId::NodeInfo, 0, DrPath::from_ports(&[1]).unwrap(), 0, [0; 64])
            .to_bytes();
    req[6] = 1;
    sm.dev.send(&Datagram { addr: MadAddress::smi_permissive(), mad: req.to_vec() }).unwrap();
    let deadline = sm.dev.now() + TIMEOUT;
    assert!(sm.dev.recv(deadline).unwrap().is_none());
    assert_eq!(f.lock().unwrap().dropped(DropReason::DrHopPointer), 1);
}

#[test]
fn status_codes_of_the_sma() {
    let f = fabric();
    let mut sm = TestSm::attach(&f, "H-0001", 1);
    let st = |r: Option<SmpRepr>| r.expect("answered").header.status;
    assert_eq!(st(sm.dr_get(&[1], AttributeId::PortInfo, 9)), status::INVALID_FIELD, "port 9 of 8");
    assert_eq!(st(sm.dr_get(&[1], AttributeId::PortInfo, 8)), 0);
    assert_eq!(st(sm.dr_get(&[], AttributeId::PortInfo, 3)), status::INVALID_FIELD, "CA has 2 ports");
    assert_eq!(st(sm.dr_get(&[1], AttributeId::Unknown(0xff30), 0)), status::METHOD_ATTR_UNSUPPORTED);
    assert_eq!(st(sm.dr_get(&[], AttributeId::SwitchInfo, 0)), status::METHOD_ATTR_UNSUPPORTED, "CA");
    assert_eq!(st(sm.dr_get(&[], AttributeId::LinearForwardingTable, 0)), status::METHOD_ATTR_UNSUPPORTED);
    assert_eq!(
        st(sm.dr(Method::Set, &[1], AttributeId::NodeInfo, 0, [0; 64])),
        status::METHOD_ATTR_UNSUPPORTED,
        "NodeInfo is read-only"
    );
    assert_eq!(st(sm.dr(Method::Unknown(0x04), &[1], AttributeId::NodeInfo, 0, [0; 64])), status::METHOD_UNSUPPORTED);
    // LFT: 49152 entries = 768 blocks.
    assert_eq!(st(sm.dr_get(&[1], AttributeId::LinearForwardingTable, 767)), 0);
    assert_eq!(st(sm.dr_get(&[1], AttributeId::LinearForwardingTable, 768)), status::INVALID_FIELD);
    // P_Key: a switch's port 0 has 8 entries (1 block), external ports 64.
    assert_eq!(st(sm.dr_get(&[1], AttributeId::PKeyTable, 1)), status::INVALID_FIELD);
    assert_eq!(st(sm.dr_get(&[1], AttributeId::PKeyTable, (1 << 16) | 1)), 0);
    assert_eq!(st(sm.dr_get(&[1], AttributeId::PKeyTable, (9 << 16) | 1)), status::INVALID_FIELD);
    // MFT: 1024 entries = 32 blocks; 8 ports = position 0 only.
    assert_eq!(st(sm.dr_get(&[1], AttributeId::MulticastForwardingTable, 31)), 0);
    assert_eq!(st(sm.dr_get(&[1], AttributeId::MulticastForwardingTable, 32)), status::INVALID_FIELD);
    assert_eq!(st(sm.dr_get(&[1], AttributeId::MulticastForwardingTable, 1 << 28)), status::INVALID_FIELD);
    // No SM anywhere: SMInfo is unsupported (ibsim would stay silent).
    assert_eq!(st(sm.dr_get(&[1], AttributeId::SmInfo, 0)), status::METHOD_ATTR_UNSUPPORTED);
    // An invalid Set answers with the unchanged attribute.
    let before = sm.port_info(&[1], 2);
    let (s, after) = sm.set_port_info(&[1], 2, |pi| {
        pi.lid = Lid(77);
        pi.neighbor_mtu = 6;
    });
    assert_eq!(s, status::INVALID_FIELD);
    assert_eq!(after, PortInfoRepr { local_port_num: before.local_port_num, ..before });
}

#[test]
fn tables_read_back_what_was_set() {
    let f = fabric();
    let mut sm = TestSm::attach(&f, "H-0001", 1);
    // P_Key block 0 of H1 port 1 (its own port): default 0xffff then zeros.
    let r = sm.dr_get(&[], AttributeId::PKeyTable, 0).unwrap();
    assert_eq!(&r.data[..4], &[0xff, 0xff, 0, 0]);
    let mut d = [0u8; 64];
    d[..6].copy_from_slice(&[0xff, 0xff, 0x80, 0x01, 0x00, 0x02]);
    let r = sm.dr(Method::Set, &[], AttributeId::PKeyTable, 1, d).unwrap();
    assert_eq!(r.header.status, 0);
    assert_eq!(r.data, d);
    assert_eq!(f.lock().unwrap().pkeys(pr(H1, 1)).unwrap()[32..35], [0xffff, 0x8001, 0x0002]);
    // SL2VL of S1 in 1 out 2; other pairs keep the default.
    let mut t = [0u8; 64];
    t[..8].copy_from_slice(&[0x00, 0x00, 0x11, 0x11, 0, 0, 0, 0]);
    assert_eq!(sm.dr(Method::Set, &[1], AttributeId::SlToVlMappingTable, 0x0102, t).unwrap().data, t);
    assert_eq!(sm.dr_get(&[1], AttributeId::SlToVlMappingTable, 0x0102).unwrap().data, t);
    assert_eq!(
        &sm.dr_get(&[1], AttributeId::SlToVlMappingTable, 0x0201).unwrap().data[..8],
        &[0x01, 0x23, 0x45, 0x67, 0x89, 0xab, 0xcd, 0xe7]
    );
    // VLArb low table of S1 port 3: 8 entries.
    let r = sm.dr_get(&[1], AttributeId::VlArbitrationTable, (1 << 16) | 3).unwrap();
    assert_eq!(&r.data[..6], &[0, 0, 1, 4, 2, 4]);
    assert_eq!(sm.dr_get(&[1], AttributeId::VlArbitrationTable, (2 << 16) | 3).unwrap().header.status, 0x1c);
    // GUIDInfo: entry 0 is the port GUID and stays; entry 1 takes an alias.
    let mut g = [0u8; 64];
    g[..16].copy_from_slice(&[0, 0, 0, 0, 0, 0, 0, 9, 0xaa, 0, 0, 0, 0, 0, 0, 1]);
    let r = sm.dr(Method::Set, &[], AttributeId::GuidInfo, 0, g).unwrap();
    assert_eq!(&r.data[..16], &[0, 0, 0, 0, 0, 0x10, 0, 1, 0xaa, 0, 0, 0, 0, 0, 0, 1]);
    assert_eq!(sm.dr_get(&[], AttributeId::GuidInfo, 4).unwrap().header.status, 0x1c, "GuidCap 32 = 4 blocks");
    // MFT block 0 position 0 of S2.
    let mut m = [0u8; 64];
    m[..4].copy_from_slice(&[0x00, 0x06, 0x00, 0x01]);
    sm.dr(Method::Set, &[1, 3], AttributeId::MulticastForwardingTable, 0, m).unwrap();
    assert_eq!(sm.dr_get(&[1, 3], AttributeId::MulticastForwardingTable, 0).unwrap().data, m);
}

/// Programs LIDs and LFTs, then uses DrDLID (LID-routed last segment) and
/// DrSLID (LID-routed first segment).
#[test]
fn lid_routed_segments_at_either_end() {
    let topo = small();
    let f = FabricBuilder::new(&topo).build_shared().unwrap();
    let mut sm = TestSm::attach(&f, "H-0001", 1);
    let lids = bring_up(&mut sm, &topo, H1, 1);
    let (sm_lid, s1_lid, s2_lid, h3_lid) = (lids[&pr(H1, 1)], lids[&pr(S1, 0)], lids[&pr(S2, 0)], lids[&pr(H3, 1)]);

    // DR to S1, then LID-routed to H3 (DrDLID).
    let mut req =
        SmpRepr::directed_request(Method::Get, AttributeId::NodeInfo, 0, DrPath::from_ports(&[1]).unwrap(), 0, [0; 64]);
    if let ibsm::mad::smp::SmpRoute::Directed { dr_dlid, .. } = &mut req.route {
        *dr_dlid = h3_lid;
    }
    let d = sm.exchange(req, MadAddress::smi_permissive()).expect("DrDLID answered");
    let r = SmpRepr::parse_bytes(&d.mad).unwrap();
    assert_eq!(NodeInfoRepr::parse_bytes(&r.data).unwrap().node_guid, Guid(0x100005));
    let (inbound, hp, hc, ret) = dr_route(&r);
    assert!(inbound);
    assert_eq!((hp, hc, ret.ports()), (0, 1, &[1u8][..]));
    assert_eq!(&d.mad[32..36], &[0xff, 0xff, (h3_lid.0 >> 8) as u8, h3_lid.0 as u8]);

    // LID-routed to S2 first (DrSLID = SM LID), then DR out S2 port 2 to H3.
    let mut req =
        SmpRepr::directed_request(Method::Get, AttributeId::NodeInfo, 0, DrPath::from_ports(&[2]).unwrap(), 0, [0; 64]);
    if let ibsm::mad::smp::SmpRoute::Directed { dr_slid, .. } = &mut req.route {
        *dr_slid = sm_lid;
    }
    let d = sm.exchange(req, MadAddress::smi(s2_lid)).expect("DrSLID answered");
    let r = SmpRepr::parse_bytes(&d.mad).unwrap();
    assert_eq!(NodeInfoRepr::parse_bytes(&r.data).unwrap().node_guid, Guid(0x100005));
    let (inbound, hp, _, ret) = dr_route(&r);
    assert!(inbound);
    assert_eq!((hp, ret.ports()), (0, &[1u8][..]));
    assert_eq!(d.addr.lid, s2_lid, "the last segment came LID-routed from S2");

    // Both: LID-routed to S1, DR out port 3 to S2, LID-routed on to H3.
    let mut req = SmpRepr::directed_request(
        Method::Get,
        AttributeId::NodeDescription,
        0,
        DrPath::from_ports(&[3]).unwrap(),
        0,
        [0; 64],
    );
    if let ibsm::mad::smp::SmpRoute::Directed { dr_slid, dr_dlid, .. } = &mut req.route {
        *dr_slid = sm_lid;
        *dr_dlid = h3_lid;
    }
    let r = SmpRepr::parse_bytes(&sm.exchange(req, MadAddress::smi(s1_lid)).unwrap().mad).unwrap();
    assert_eq!(NodeDescriptionRepr::parse_bytes(&r.data).unwrap().text, "h-0003");
    assert_eq!(dr_route(&r).3.ports(), &[1], "S2 entered on port 1");

    // A CA at the end of the directed part cannot LID-route onwards.
    let mut req = SmpRepr::directed_request(
        Method::Get,
        AttributeId::NodeInfo,
        0,
        DrPath::from_ports(&[1, 2]).unwrap(),
        0,
        [0; 64],
    );
    if let ibsm::mad::smp::SmpRoute::Directed { dr_dlid, .. } = &mut req.route {
        *dr_dlid = h3_lid;
    }
    assert!(sm.exchange(req, MadAddress::smi_permissive()).is_none());
}

#[test]
fn lid_routing_follows_the_programmed_lfts() {
    let topo = small();
    let f = FabricBuilder::new(&topo).build_shared().unwrap();
    let mut sm = TestSm::attach(&f, "H-0001", 1);
    let lids = bring_up(&mut sm, &topo, H1, 1);
    for (port, guid) in [(pr(S2, 0), 0x200001), (pr(H3, 1), 0x100005), (pr(H2, 1), 0x100003), (pr(S1, 0), 0x200000)] {
        let r = sm.lid_req(Method::Get, lids[&port], AttributeId::NodeInfo, 0, [0; 64]).expect("LID-routed answer");
        assert_eq!(r.header.status, 0);
        assert_eq!(NodeInfoRepr::parse_bytes(&r.data).unwrap().node_guid, Guid(guid));
    }
    {
        let fab = f.lock().unwrap();
        for (port, lid) in &lids {
            for s in [S1, S2] {
                let path = fab.trace_lid_route(ibsm::topology::NodeIdx(s), *lid).unwrap();
                assert_eq!(path.last().unwrap(), port, "from {s} to {lid}");
            }
        }
        assert_eq!(fab.lid_of(pr(S2, 5)).unwrap(), lids[&pr(S2, 0)]);
        assert_eq!(fab.port_by_lid(lids[&pr(H3, 1)]), Some(pr(H3, 1)));
    }
    // Reprogram S2's entry for H3 to a dead port: LID-routed SMPs die there
    // and the tracer names the link.
    let h3 = lids[&pr(H3, 1)];
    let mut ports = [0xffu8; 64];
    let current = f.lock().unwrap().lft(ibsm::topology::NodeIdx(S2)).unwrap()[..64].to_vec();
    ports.copy_from_slice(&current);
    ports[h3.0 as usize] = 7;
    let r = sm.dr(Method::Set, &[1, 3], AttributeId::LinearForwardingTable, 0, LftBlockRepr { ports }.to_bytes());
    assert_eq!(r.unwrap().header.status, 0);
    assert!(sm.lid_req(Method::Get, h3, AttributeId::NodeInfo, 0, [0; 64]).is_none());
    let err = f.lock().unwrap().trace_lid_route(ibsm::topology::NodeIdx(S1), h3).unwrap_err();
    assert_eq!(err, ibsm::sim::TraceError::LinkDown { port: pr(S2, 7) });
    // LinearFDBTop below the LID: the switch drops it.
    let mut si = SwitchInfoRepr::parse_bytes(&sm.dr_get(&[1], AttributeId::SwitchInfo, 0).unwrap().data).unwrap();
    si.linear_fdb_top = 2;
    sm.dr(Method::Set, &[1], AttributeId::SwitchInfo, 0, si.to_bytes()).unwrap();
    let err = f.lock().unwrap().trace_lid_route(ibsm::topology::NodeIdx(S1), Lid(5)).unwrap_err();
    assert!(matches!(err, ibsm::sim::TraceError::BeyondTop { top: 2, .. }), "{err:?}");
    // A loop: S1 sends LID 3 to S2 and S2 sends it back.
    let mut a = [0xffu8; 64];
    a[..64].copy_from_slice(&f.lock().unwrap().lft(ibsm::topology::NodeIdx(S2)).unwrap()[..64]);
    a[3] = 1;
    sm.dr(Method::Set, &[1, 3], AttributeId::LinearForwardingTable, 0, LftBlockRepr { ports: a }.to_bytes()).unwrap();
    let mut b = [0xffu8; 64];
    b[..64].copy_from_slice(&f.lock().unwrap().lft(ibsm::topology::NodeIdx(S1)).unwrap()[..64]);
    b[3] = 3;
    si.linear_fdb_top = 64;
    sm.dr(Method::Set, &[1], AttributeId::SwitchInfo, 0, si.to_bytes()).unwrap();
    sm.dr(Method::Set, &[1], AttributeId::LinearForwardingTable, 0, LftBlockRepr { ports: b }.to_bytes()).unwrap();
    let err = f.lock().unwrap().trace_lid_route(ibsm::topology::NodeIdx(S1), Lid(3)).unwrap_err();
    assert!(matches!(err, ibsm::sim::TraceError::Loop { .. }), "{err:?}");
}
