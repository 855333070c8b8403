//! Port state machine, M_Key protection, SMInfo between SMs, traps and the
//! GSI path of the simulated fabric.

mod sim_support;

use std::time::Duration;

use ibsm::mad::header::status;
use ibsm::mad::{
    AttributeId, DrPath, Method, MgmtClass, PhysState, PortInfoRepr, PortState, SmInfoRepr, SmState, SmpRepr,
    SwitchInfoRepr,
};
use ibsm::sim::{DropReason, FabricBuilder, SimDevice};
use ibsm::topology::NodeIdx;
use ibsm::transport::{Datagram, MadAddress, MadDevice};
use ibsm::{Guid, Lid};
use sim_support::*;

#[test]
fn fresh_fabric_states_mirror_ibsim() {
    let f = FabricBuilder::new(&small()).build().unwrap();
    assert_eq!(f.port_state(pr(S1, 1)).unwrap(), PortState::Init);
    assert_eq!(f.phys_state(pr(S1, 1)).unwrap(), PhysState::LinkUp);
    assert_eq!(f.port_state(pr(S1, 4)).unwrap(), PortState::Down);
    assert_eq!(f.phys_state(pr(S1, 4)).unwrap(), PhysState::Polling);
    assert_eq!(f.port_state(pr(S1, 0)).unwrap(), PortState::Active);
    assert_eq!(f.port_state(pr(H1, 2)).unwrap(), PortState::Down);
    assert!(f.switch_info(NodeIdx(S1)).unwrap().port_state_change);
    assert!(f.switch_info(NodeIdx(S1)).unwrap().enhanced_port0);
    assert!(!f.switch_info(NodeIdx(S2)).unwrap().enhanced_port0);
    assert_eq!(f.lft(NodeIdx(S1)).unwrap().len(), 0);
    assert_eq!(f.lft(NodeIdx(H1)), None);
    // ibsim: capability masks 0x0050c048 (cabled CA port), 0x0010c048
    // (uncabled), 0xc048 (switch port 0), 0 (external switch port).
    assert_eq!(f.port_info(pr(H1, 1)).unwrap().capability_mask, 0x0050_c048);
    assert_eq!(f.port_info(pr(H1, 2)).unwrap().capability_mask, 0x0010_c048);
    assert_eq!(f.port_info(pr(S1, 0)).unwrap().capability_mask, 0xc048);
    assert_eq!(f.port_info(pr(S1, 5)).unwrap().capability_mask, 0);
    assert!(f.port_info(pr(H1, 0)).is_err(), "a CA has no port 0");
}

#[test]
fn active_needs_armed_at_both_ends() {
    let f = FabricBuilder::new(&small()).build_shared().unwrap();
    let mut sm = TestSm::attach(&f, "H-0001", 1);
    // Switch side of the S1-H2 link.
    assert_eq!(sm.set_state(&[1], 2, PortState::Active), status::INVALID_FIELD, "Init -> Active");
    assert_eq!(sm.set_state(&[1], 2, PortState::Init), status::INVALID_FIELD, "Init cannot be set");
    assert_eq!(sm.set_state(&[1], 4, PortState::Armed), status::INVALID_FIELD, "no link on port 4");
    assert_eq!(sm.set_state(&[1], 2, PortState::Armed), 0);
    assert_eq!(sm.set_state(&[1], 2, PortState::Armed), 0, "Armed again is no change");
    assert_eq!(sm.set_state(&[1], 2, PortState::Active), status::INVALID_FIELD, "neighbour still Init");
    assert_eq!(f.lock().unwrap().port_state(pr(S1, 2)).unwrap(), PortState::Armed);
    assert_eq!(sm.set_state(&[1, 2], 0, PortState::Armed), 0, "H2's own port");
    assert_eq!(sm.set_state(&[1], 2, PortState::Active), 0);
    assert_eq!(sm.set_state(&[1], 2, PortState::Armed), status::INVALID_FIELD, "Active -> Armed");
    // The neighbour is Active now; H2 may follow from Armed.
    assert_eq!(sm.set_state(&[1, 2], 0, PortState::Active), 0);
    let fab = f.lock().unwrap();
    assert_eq!(fab.port_state(pr(H2, 1)).unwrap(), PortState::Active);
    assert_eq!(fab.port_state(pr(S1, 2)).unwrap(), PortState::Active);
    // Nothing of this is a link event: PortStateChange is untouched... but
    // a fresh switch starts with it set.
    assert!(fab.switch_info(NodeIdx(S1)).unwrap().port_state_change);
}

#[test]
fn set_down_bounces_the_link_and_flags_the_neighbour_switch() {
    let topo = small();
    let f = FabricBuilder::new(&topo).build_shared().unwrap();
    let mut sm = TestSm::attach(&f, "H-0001", 1);
    let lids = bring_up(&mut sm, &topo, H1, 1);
    assert!(!f.lock().unwrap().switch_info(NodeIdx(S1)).unwrap().port_state_change);
    assert_eq!(sm.set_state(&[1], 3, PortState::Down), 0);
    {
        let fab = f.lock().unwrap();
        assert_eq!(fab.port_state(pr(S1, 3)).unwrap(), PortState::Init);
        assert_eq!(fab.port_state(pr(S2, 1)).unwrap(), PortState::Init);
        assert_eq!(fab.lid_of(pr(S2, 0)).unwrap(), lids[&pr(S2, 0)], "LIDs survive");
        assert!(fab.switch_info(NodeIdx(S2)).unwrap().port_state_change, "the far switch saw its link drop");
        assert!(!fab.switch_info(NodeIdx(S1)).unwrap().port_state_change, "no PortStateChange for an SM's Set");
    }
    // Disable H2's switch port: the link goes away at both ends.
    let (st, pi) = sm.set_port_info(&[1], 2, |pi| pi.port_physical_state = PhysState::Disabled);
    assert_eq!(st, 0);
    assert_eq!((pi.port_state, pi.port_physical_state), (PortState::Down, PhysState::Disabled));
    assert_eq!(f.lock().unwrap().phys_state(pr(H2, 1)).unwrap(), PhysState::Polling);
    assert!(sm.dr_get(&[1, 2], AttributeId::NodeInfo, 0).is_none());
    let (st, pi) = sm.set_port_info(&[1], 2, |pi| pi.port_physical_state = PhysState::Polling);
    assert_eq!(st, 0);
    assert_eq!((pi.port_state, pi.port_physical_state), (PortState::Init, PhysState::LinkUp));
    assert!(sm.dr_get(&[1, 2], AttributeId::NodeInfo, 0).is_some());
    assert_eq!(sm.set_port_info(&[1], 0, |pi| pi.port_physical_state = PhysState::Disabled).0, status::INVALID_FIELD);
}

#[test]
fn addressing_fields_take_effect() {
    let f = FabricBuilder::new(&small()).build_shared().unwrap();
    let mut sm = TestSm::attach(&f, "H-0001", 1);
    let (st, pi) = sm.set_port_info(&[], 0, |pi| {
        pi.lid = Lid(0x20);
        pi.lmc = 2;
        pi.master_sm_lid = Lid(0x20);
        pi.gid_prefix = 0xfe80_0000_0000_0000;
        pi.client_reregister = true;
        pi.operational_vls = 2;
    });
    assert_eq!(st, 0);
    assert_eq!((pi.lid, pi.lmc, pi.master_sm_lid, pi.operational_vls), (Lid(0x20), 2, Lid(0x20), 2));
    assert!(!pi.client_reregister, "the bit reads back 0");
    let fab = f.lock().unwrap();
    assert_eq!(fab.client_reregistrations(pr(H1, 1)).unwrap(), 1);
    assert_eq!(fab.port_by_lid(Lid(0x23)), Some(pr(H1, 1)), "LMC 2 covers 4 LIDs");
    assert_eq!(fab.port_by_lid(Lid(0x24)), None);
    drop(fab);
    assert_eq!(sm.dev.local_port().lid, Lid(0x20));
    assert_eq!(sm.dev.local_port().sm_lid, Lid(0x20));
    // A base port 0 keeps LMC 0; an enhanced one takes it.
    assert_eq!(sm.set_port_info(&[1, 3], 0, |pi| pi.lmc = 3).1.lmc, 0, "S2 has base port 0");
    assert_eq!(sm.set_port_info(&[1], 0, |pi| pi.lmc = 3).1.lmc, 3, "S1 has enhanced port 0");
    // The CA's SMA refuses to configure its other port.
    assert_eq!(sm.set_port_info(&[], 2, |pi| pi.lid = Lid(9)).0, status::INVALID_FIELD);
    // OperationalVLs above VLCap.
    assert_eq!(sm.set_port_info(&[], 0, |pi| pi.operational_vls = 5).0, status::INVALID_FIELD);
}

#[test]
fn m_key_protection_levels_and_lease() {
    let f = FabricBuilder::new(&small()).build_shared().unwrap();
    let mut sm = TestSm::attach(&f, "H-0001", 1);
    const KEY: u64 = 0x1234_5678_9abc_def0;
    // Protect S1 at level 1 with a 10 s lease (the switch's port 0 key
    // covers the whole switch).
    let (st, _) = sm.set_port_info(&[1], 0, |pi| {
        pi.m_key = KEY;
        pi.m_key_protect_bits = 1;
        pi.m_key_lease_period = 10;
    });
    assert_eq!(st, 0);
    // Level 1: a Get without the key works but hides the key.
    let pi = PortInfoRepr::parse_bytes(&sm.dr_get(&[1], AttributeId::PortInfo, 0).unwrap().data).unwrap();
    assert_eq!(pi.m_key, 0);
    sm.m_key = KEY;
    assert_eq!(sm.port_info(&[1], 0).m_key, KEY);
    // Level 2: a Get with a wrong key is dropped, and so is any Set.
    assert_eq!(sm.set_port_info(&[1], 0, |pi| pi.m_key_protect_bits = 2).0, 0);
    sm.m_key = 0;
    assert!(sm.dr_get(&[1], AttributeId::NodeInfo, 0).is_none());
    assert!(sm.dr_get(&[1], AttributeId::PortInfo, 5).is_none(), "any port of the switch");
    assert!(sm.dr(Method::Set, &[1], AttributeId::SwitchInfo, 0, [0; 64]).is_none());
    assert_eq!(f.lock().unwrap().dropped(DropReason::MKey), 3);
    sm.m_key = KEY;
    assert_eq!(sm.port_info(&[1], 0).m_key_violations, 3);
    // Other nodes are not protected.
    sm.m_key = 0;
    assert!(sm.dr_get(&[1, 3], AttributeId::NodeInfo, 0).is_some());
    // The lease started at the first violation and the good-key Get above
    // stopped it; a new violation starts it again, and after 10 s without
    // the key the protection falls to level 0.
    assert!(sm.dr_get(&[1], AttributeId::NodeInfo, 0).is_none());
    f.lock().unwrap().advance(Duration::from_secs(9));
    assert!(sm.dr_get(&[1], AttributeId::NodeInfo, 0).is_none(), "lease not over yet");
    f.lock().unwrap().advance(Duration::from_secs(2));
    let pi = PortInfoRepr::parse_bytes(&sm.dr_get(&[1], AttributeId::PortInfo, 0).unwrap().data).unwrap();
    assert_eq!((pi.m_key_protect_bits, pi.m_key), (0, KEY), "level 0 shows the key");
    // At level 0 a Set with the wrong key is still refused.
    assert_eq!(sm.dr(Method::Set, &[1], AttributeId::SwitchInfo, 0, [0; 64]), None);
    // Lease period 0 never expires.
    sm.m_key = KEY;
    sm.set_port_info(&[1], 0, |pi| {
        pi.m_key_protect_bits = 3;
        pi.m_key_lease_period = 0;
    });
    sm.m_key = 0;
    assert!(sm.dr_get(&[1], AttributeId::NodeInfo, 0).is_none());
    f.lock().unwrap().advance(Duration::from_secs(100_000));
    assert!(sm.dr_get(&[1], AttributeId::NodeInfo, 0).is_none());
}

#[test]
fn sm_info_between_two_sms() {
    let f = FabricBuilder::new(&small()).build_shared().unwrap();
    let mut a = TestSm::attach(&f, "H-0001", 1);
    let mut b = SimDevice::attach(&f, "H-0003", 1).unwrap();
    let info = SmInfoRepr { guid: Guid(0x100006), sm_key: 42, act_count: 7, priority: 3, sm_state: SmState::Master };
    b.set_sm_info(Some(info));
    let path = [1, 3, 2];
    // IsSM shows in B's PortInfo.
    assert_ne!(a.port_info(&path, 0).capability_mask & 2, 0);
    // A Get is answered from the registered SMInfo; SM_Key only with the key.
    let r = a.dr_get(&path, AttributeId::SmInfo, 0).unwrap();
    assert_eq!(SmInfoRepr::parse_bytes(&r.data).unwrap(), SmInfoRepr { sm_key: 0, ..info });
    let asked = SmInfoRepr { sm_key: 42, ..SmInfoRepr::parse_bytes(&[0; 64]).unwrap() };
    let r = a.dr(Method::Get, &path, AttributeId::SmInfo, 0, asked.to_bytes()).unwrap();
    assert_eq!(SmInfoRepr::parse_bytes(&r.data).unwrap().sm_key, 42);
    // A Set (handover) reaches B, which answers along the return path.
    let mut req =
        SmpRepr::directed_request(Method::Set, AttributeId::SmInfo, 1, DrPath::from_ports(&path).unwrap(), 0, [0; 64]);
    req.header.transaction_id = 0x77;
    a.dev.send(&Datagram { addr: MadAddress::smi_permissive(), mad: req.to_bytes().to_vec() }).unwrap();
    let got = b.recv(b.now() + TIMEOUT).unwrap().expect("B gets the Set");
    let mut resp = SmpRepr::parse_bytes(&got.mad).unwrap();
    assert_eq!(resp.header.method, Method::Set);
    assert_eq!(resp.header.attribute_modifier, 1);
    assert_eq!(dr_route(&resp).1, 4, "delivered with hop pointer = hop count + 1");
    resp.header.method = Method::GetResp;
    if let ibsm::mad::smp::SmpRoute::Directed { inbound, .. } = &mut resp.route {
        *inbound = true;
    }
    resp.data = info.to_bytes();
    b.send(&Datagram { addr: got.addr, mad: resp.to_bytes().to_vec() }).unwrap();
    let back = a.dev.recv(a.dev.now() + TIMEOUT).unwrap().expect("A gets B's answer");
    let back = SmpRepr::parse_bytes(&back.mad).unwrap();
    assert_eq!(back.header.transaction_id, 0x77);
    assert_eq!(back.header.method, Method::GetResp);
    assert_eq!(dr_route(&back).1, 0);
    assert_eq!(SmInfoRepr::parse_bytes(&back.data).unwrap().guid, Guid(0x100006));
    // Without registered SMInfo, a Get goes to the SM too.
    b.set_sm_info(None);
    assert!(a.dr_get(&path, AttributeId::SmInfo, 0).is_none());
    assert_eq!(b.recv(b.now() + TIMEOUT).unwrap().unwrap().mad[3], 0x01);
    // B leaves: IsSM clears and SMInfo is unsupported again.
    drop(b);
    assert_eq!(a.port_info(&path, 0).capability_mask & 2, 0);
    assert_eq!(a.dr_get(&path, AttributeId::SmInfo, 0).unwrap().header.status, status::METHOD_ATTR_UNSUPPORTED);
}

#[test]
fn link_events_raise_port_state_change_and_trap_128() {
    let topo = small();
    let f = FabricBuilder::new(&topo).build_shared().unwrap();
    let mut sm = TestSm::attach(&f, "H-0001", 1);
    let lids = bring_up(&mut sm, &topo, H1, 1);
    f.lock().unwrap().link_down(pr(H3, 1)).unwrap();
    {
        let fab = f.lock().unwrap();
        assert_eq!(fab.port_state(pr(S2, 2)).unwrap(), PortState::Down);
        assert_eq!(fab.phys_state(pr(H3, 1)).unwrap(), PhysState::Polling);
        assert!(fab.switch_info(NodeIdx(S2)).unwrap().port_state_change);
    }
    let trap = sm.dev.recv(sm.dev.now() + TIMEOUT).unwrap().expect("trap 128 from S2");
    assert_eq!(trap.addr.lid, lids[&pr(S2, 0)]);
    let t = SmpRepr::parse_bytes(&trap.mad).unwrap();
    assert_eq!((t.header.mgmt_class, t.header.method), (MgmtClass::SubnMgmtLid, Method::Trap));
    assert_eq!(t.header.attribute_id, AttributeId::Notice);
    assert_eq!(t.data[0], 0x81, "generic, urgent");
    assert_eq!(u16::from_be_bytes([t.data[4], t.data[5]]), 128);
    assert_eq!(u16::from_be_bytes([t.data[6], t.data[7]]), lids[&pr(S2, 0)].0);
    // The SM represses it; the switch takes that silently.
    let mut rep = t.clone();
    rep.header.method = Method::TrapRepress;
    sm.dev.send(&Datagram { addr: MadAddress::smi(trap.addr.lid), mad: rep.to_bytes().to_vec() }).unwrap();
    assert!(sm.dev.recv(sm.dev.now() + TIMEOUT).unwrap().is_none());
    // Clearing PortStateChange takes a Set with the bit.
    let mut si = SwitchInfoRepr::parse_bytes(&sm.dr_get(&[1, 3], AttributeId::SwitchInfo, 0).unwrap().data).unwrap();
    assert!(si.port_state_change);
    si.port_state_change = false;
    let r = sm.dr(Method::Set, &[1, 3], AttributeId::SwitchInfo, 0, si.to_bytes()).unwrap();
    assert!(SwitchInfoRepr::parse_bytes(&r.data).unwrap().port_state_change, "writing 0 leaves it");
    si.port_state_change = true;
    let r = sm.dr(Method::Set, &[1, 3], AttributeId::SwitchInfo, 0, si.to_bytes()).unwrap();
    assert!(!SwitchInfoRepr::parse_bytes(&r.data).unwrap().port_state_change, "writing 1 clears it");
    // Link back: Init at both ends, LIDs kept, flag and trap again.
    f.lock().unwrap().link_up(pr(S2, 2)).unwrap();
    {
        let fab = f.lock().unwrap();
        assert_eq!(fab.port_state(pr(H3, 1)).unwrap(), PortState::Init);
        assert_eq!(fab.port_state(pr(S2, 2)).unwrap(), PortState::Init);
        assert_eq!(fab.lid_of(pr(H3, 1)).unwrap(), lids[&pr(H3, 1)]);
        assert!(fab.switch_info(NodeIdx(S2)).unwrap().port_state_change);
    }
    assert!(sm.dev.recv(sm.dev.now() + TIMEOUT).unwrap().is_some());
}

#[test]
fn gmps_reach_the_device_at_a_lid_over_active_links_only() {
    let topo = small();
    let f = FabricBuilder::new(&topo).build_shared().unwrap();
    let mut sm = TestSm::attach(&f, "H-0001", 1);
    let lids = bring_up(&mut sm, &topo, H1, 1);
    let mut client = SimDevice::attach(&f, "H-0003", 1).unwrap();
    let mut q = vec![0u8; 256];
    q[..4].copy_from_slice(&[1, 0x03, 2, 0x01]); // SubnAdmGet
    q[15] = 9;
    let sm_lid = lids[&pr(H1, 1)];
    client.send(&Datagram { addr: MadAddress::gsi(sm_lid, 0), mad: q.clone() }).unwrap();
    let got = sm.dev.recv(sm.dev.now() + TIMEOUT).unwrap().expect("the SA side gets it");
    assert_eq!(got.mad, q);
    assert_eq!((got.addr.lid, got.addr.qpn), (lids[&pr(H3, 1)], 1));
    // The answer goes back by LID.
    let mut a = q.clone();
    a[3] = 0x81;
    sm.dev.send(&Datagram { addr: MadAddress::gsi(got.addr.lid, 0), mad: a.clone() }).unwrap();
    assert_eq!(client.recv(client.now() + TIMEOUT).unwrap().unwrap().mad, a);
    // An Armed link carries no GMP.
    sm.set_state(&[1, 3], 2, PortState::Down);
    sm.set_state(&[1, 3], 2, PortState::Armed);
    client.send(&Datagram { addr: MadAddress::gsi(sm_lid, 0), mad: q }).unwrap();
    assert!(sm.dev.recv(sm.dev.now() + TIMEOUT).unwrap().is_none());
    assert_eq!(f.lock().unwrap().dropped(DropReason::NotActive), 1);
}

#[test]
fn answers_take_hops_times_latency_plus_processing() {
    let f = FabricBuilder::new(&small())
        .hop_latency(Duration::from_micros(3))
        .processing_delay(Duration::from_micros(5))
        .build_shared()
        .unwrap();
    let mut sm = TestSm::attach(&f, "H-0001", 1);
    let t0 = sm.dev.now();
    sm.dr_get(&[1, 3, 2], AttributeId::NodeInfo, 0).unwrap();
    assert_eq!(sm.dev.now() - t0, Duration::from_micros(3 * 6 + 5));
    let t0 = sm.dev.now();
    sm.dr_get(&[], AttributeId::NodeInfo, 0).unwrap();
    assert_eq!(sm.dev.now() - t0, Duration::from_micros(5));
    // recv with nothing pending moves the clock to the deadline.
    let t = sm.dev.now() + Duration::from_millis(7);
    assert!(sm.dev.recv(t).unwrap().is_none());
    assert_eq!(sm.dev.now(), t);
}
