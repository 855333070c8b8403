//! The SA core driven with snapshots of real sweeps of the in-process
//! fabric: every MAD in is a byte buffer a requester could send, every
//! answer is read back from the bytes the agent emits.

use std::sync::{Arc, OnceLock};
use std::time::{Duration, SystemTime};

use super::sends::SendError;
use super::*;
use crate::config::SmConfig;
use crate::datagram::MadAddress;
use crate::exchange::txn::TxnConfig;
use crate::mad::sa::*;
use crate::mad::sa::{SaMad, SA_DATA_OFFSET};
use crate::mad::{MadHeader, NoticeRepr, NoticeType, MAD_SIZE};
use crate::program::SubnetManager;
use crate::sim::{FabricBuilder, SimDevice};
use crate::subnet::snapshot::Snapshot;
use crate::subnet::SweepReport;
use crate::topology::Topology;
use crate::transport::io_thread::MadTransport;
use crate::types::Lid;

pub(super) const SPEC: &str = "fattree2:radix=8,leaves=4,spines=2,hosts=4";

/// One sweep of a small fat tree by an SM on the first host, done once for
/// all tests (each test builds its own agent on it).
pub(super) fn swept() -> &'static SweepReport {
    static REPORT: OnceLock<SweepReport> = OnceLock::new();
    REPORT.get_or_init(|| {
        let topo = Topology::from_spec_or_file(SPEC).unwrap();
        let fabric = FabricBuilder::new(&topo).seed(9).build_shared().unwrap();
        let host = topo.hosts().next().unwrap();
        let dev = SimDevice::attach(&fabric, host, 1).unwrap();
        dev.set_is_sm(true);
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        rt.block_on(async {
            let txn = TxnConfig { window: 16, timeout: Duration::from_millis(200), retries: 3, ..TxnConfig::default() };
            let (transport, _unsolicited) = MadTransport::spawn(dev, txn);
            let mut sm = SubnetManager::new(transport, SmConfig::default(), false);
            let report = sm.sweep().await.unwrap();
            assert!(report.subnet_up(), "the fixture fabric comes up");
            report
        })
    })
}

pub(super) fn snapshot(sequence: u64, sweep: SweepReport) -> Arc<Snapshot> {
    let (node, port) = sweep.subnet.sm_port.unwrap();
    let master = sweep.subnet.node(node).port_guid(port);
    let master_lid = sweep.subnet.current_lid(node, port).unwrap();
    Arc::new(Snapshot { sequence, taken_at: SystemTime::UNIX_EPOCH, master, master_lid, sweep })
}

pub(super) const SA_KEY: u64 = 0x5A;

/// An agent serving the fixture's snapshot.
pub(super) fn agent() -> SaAgent {
    let snap = snapshot(1, swept().clone());
    let mut a = SaAgent::new(SaConfig { sa_key: SA_KEY, ..SaConfig::default() }, snap.master);
    a.new_snapshot(Duration::ZERO, snap);
    a.set_serving(Duration::ZERO, Serving::Master);
    a
}

/// An SA request MAD from `lid`.
pub(super) fn request(method: u8, attr: u16, mask: u64, sm_key: u64, data: &[u8], lid: u16) -> Datagram {
    let mut mad = vec![0u8; MAD_SIZE];
    mad[..4].copy_from_slice(&[1, 0x03, 2, method]);
    mad[8..16].copy_from_slice(&(0xC0DE_0000_0000_0000u64 | u64::from(lid)).to_be_bytes());
    mad[16..18].copy_from_slice(&attr.to_be_bytes());
    {
        let mut sa = SaMad::new_checked(&mut mad[..]).unwrap();
        sa.set_sm_key(sm_key);
        sa.set_component_mask(mask);
    }
    let n = data.len().min(MAD_SIZE - SA_DATA_OFFSET);
    mad[SA_DATA_OFFSET..SA_DATA_OFFSET + n].copy_from_slice(&data[..n]);
    Datagram { addr: MadAddress::gsi(Lid(lid), 0), mad }
}

/// Everything the agent has to send now.
pub(super) fn drain(a: &mut SaAgent, now: Duration) -> Vec<Datagram> {
    std::iter::from_fn(|| a.poll_transmit(now)).collect()
}

pub(super) fn status_of(d: &Datagram) -> u16 {
    MadHeader::new_checked(&d.mad[..24]).unwrap().status()
}

pub(super) fn method_of(d: &Datagram) -> u8 {
    d.mad[3]
}

/// The one answer to one request.
pub(super) fn ask(a: &mut SaAgent, d: &Datagram) -> Datagram {
    a.handle_mad(Duration::ZERO, d);
    let mut out = drain(a, Duration::ZERO);
    assert_eq!(out.len(), 1, "one answer");
    out.remove(0)
}

/// A request carrying `rec`'s wire bytes.
pub(super) fn query<R: SaRecord>(method: u8, rec: &R, mask: u64, sm_key: u64, lid: u16) -> Datagram {
    request(method, u16::from(R::ATTRIBUTE), mask, sm_key, &rec.to_bytes(), lid)
}

/// One whole answer as a requester reads it: its status, method,
/// AttributeOffset and SA data (every RMPP segment reassembled, each ACKed
/// back to the agent).
#[derive(Debug)]
pub(super) struct Answer {
    pub status: u16,
    pub method: u8,
    pub attribute_offset: u16,
    pub data: Vec<u8>,
    pub segments: usize,
}

impl Answer {
    /// The records, `attribute_offset` words apart, each cut to `len`.
    pub fn records(&self, len: usize) -> Vec<&[u8]> {
        let stride = usize::from(self.attribute_offset) * 8;
        if stride == 0 {
            // A GetResp or DeleteResp: one record, when the status says
            // so; an empty GetTableResp or GetMultiResp: none.
            let table = matches!(self.method, 0x92 | 0x94);
            return if self.status == 0 && !table { vec![&self.data[..len]] } else { Vec::new() };
        }
        self.data.chunks(stride).filter(|c| c.len() >= len).map(|c| &c[..len]).collect()
    }
    pub fn parse<R: SaRecord>(&self) -> Vec<R> {
        self.records(R::LEN).into_iter().map(|b| R::parse_bytes(b).unwrap()).collect()
    }
}

pub(super) fn fetch(a: &mut SaAgent, d: &Datagram) -> Answer {
    fetch_at(a, d, Duration::ZERO)
}

pub(super) fn fetch_at(a: &mut SaAgent, d: &Datagram, start: Duration) -> Answer {
    use crate::rmpp::{RmppConfig, RmppReceiver};
    a.handle_mad(start, d);
    let mut rx = RmppReceiver::new(start, RmppConfig::default());
    let mut segments = 0;
    let mut now = start;
    for _ in 0..100_000 {
        let mut moved = false;
        while let Some(seg) = a.poll_transmit(now) {
            moved = true;
            segments += 1;
            let h = MadHeader::new_checked(&seg.mad[..24]).unwrap();
            let (status, method) = (h.status(), seg.mad[3]);
            let attribute_offset = SaMad::new_checked(&seg.mad[..]).unwrap().attribute_offset();
            let flags = seg.mad[26] & 0x07;
            if flags & 1 == 0 || flags == 0x07 {
                // One MAD (a GetResp, or the only RMPP segment).
                let data = if flags == 0x07 {
                    let payload = u32::from_be_bytes(seg.mad[32..36].try_into().unwrap()) as usize;
                    seg.mad[SA_DATA_OFFSET..SA_DATA_OFFSET + payload.saturating_sub(20).min(200)].to_vec()
                } else {
                    seg.mad[SA_DATA_OFFSET..].to_vec()
                };
                assert!(drain(a, now).is_empty(), "nothing after a one-MAD answer");
                return Answer { status, method, attribute_offset, data, segments };
            }
            rx.handle_mad(now, &seg.mad).unwrap();
            while let Some(ack) = rx.poll_transmit() {
                a.handle_mad(now, &Datagram { addr: d.addr, mad: ack });
            }
            if let Some(whole) = rx.take_result() {
                let whole = whole.unwrap();
                return Answer { status, method, attribute_offset, data: whole[SA_DATA_OFFSET..].to_vec(), segments };
            }
        }
        if !moved {
            now = a.poll_timeout().expect("a transfer in progress has a timeout").max(now);
            a.handle_timeout(now);
        }
    }
    panic!("no whole answer");
}

pub(super) fn sa_status_of(a: &Answer) -> u16 {
    a.status >> 8
}

/// The SM's own port (the requester of most tests) and another host port.
pub(super) fn sm_lid() -> u16 {
    snapshot(1, swept().clone()).master_lid.0
}

pub(super) fn other_host() -> (Guid, u16) {
    other_hosts()[0]
}

/// The fixture's CA ports other than the SM's: (GUID, LID).
pub(super) fn other_hosts() -> Vec<(Guid, u16)> {
    let r = swept();
    let master = snapshot(1, r.clone()).master;
    r.subnet
        .ids()
        .filter(|&id| !r.subnet.node(id).is_switch())
        .map(|id| r.subnet.node(id).port_guid(1))
        .filter(|&g| g != master)
        .map(|g| (g, r.lids.ranges[&g].base().0))
        .collect()
}

pub(super) fn a_switch() -> (Guid, u16) {
    let r = swept();
    let id = r.subnet.switches().next().unwrap();
    let g = r.subnet.node(id).guid();
    (g, r.lids.ranges[&r.subnet.node(id).port_guid(0)].base().0)
}

#[test]
fn a_standby_or_unswept_sa_answers_busy_or_nothing() {
    let snap = snapshot(1, swept().clone());
    let mut a = SaAgent::new(SaConfig::default(), snap.master);
    let q = request(0x01, 0x0011, 0, 0, &[], 5);
    // No snapshot, not master.
    let r = ask(&mut a, &q);
    assert_eq!((status_of(&r), method_of(&r)), (0x0001, 0x81), "BUSY, as a GetResp");
    assert_eq!(&r.mad[8..16], &q.mad[8..16], "same TID");
    a.set_serving(Duration::ZERO, Serving::MasterNotSwept);
    assert_eq!(status_of(&ask(&mut a, &q)), 0x0001);
    a.new_snapshot(Duration::ZERO, snap.clone());
    a.set_serving(Duration::ZERO, Serving::Master);
    assert_ne!(status_of(&ask(&mut a, &q)), 0x0001, "served once master with a snapshot");

    let mut silent = SaAgent::new(SaConfig { not_serving: NotServing::Silent, ..SaConfig::default() }, snap.master);
    silent.new_snapshot(Duration::ZERO, snap);
    silent.handle_mad(Duration::ZERO, &q);
    assert!(drain(&mut silent, Duration::ZERO).is_empty());
    assert_eq!(silent.stats().drops.not_serving, 1);
}

#[test]
fn versions_methods_and_keys() {
    let mut a = agent();
    let mut q = request(0x01, 0x0011, 0, 0, &[], 5);
    q.mad[2] = 1;
    assert_eq!(status_of(&ask(&mut a, &q)), 0x0004, "BAD_VERSION");
    let r = ask(&mut a, &request(0x7E, 0x0011, 0, 0, &[], 5));
    assert_eq!(status_of(&r), 0x0008, "no such SA method");
    // One-way methods are never answered.
    a.handle_mad(Duration::ZERO, &request(0x03, 0x0011, 0, 0, &[], 5));
    a.handle_mad(Duration::ZERO, &request(0x06, 0x0002, 0, 0, &[], 5));
    assert!(drain(&mut a, Duration::ZERO).is_empty());
    assert_eq!(a.stats().drops.malformed, 2);
    let r = ask(&mut a, &request(0x13, 0x0039, 0, 0, &[], 5));
    assert_eq!(status_of(&r), 0x0008, "GetTraceTable is not served");
    let r = ask(&mut a, &request(0x01, 0x0016, 0, 0, &[], 5));
    assert_eq!(status_of(&r), 0x000C, "RandomForwardingTableRecord is not served");
    // A wrong non-zero SM_Key is dropped; its count says so.
    a.handle_mad(Duration::ZERO, &request(0x01, 0x0011, 0, 0x77, &[], 5));
    assert!(drain(&mut a, Duration::ZERO).is_empty());
    assert_eq!(a.stats().drops.bad_sm_key, 1);
    // Responses nobody waits for are counted, never answered.
    a.handle_mad(Duration::ZERO, &request(0x86, 0x0002, 0, 0, &[], 5));
    a.handle_mad(Duration::ZERO, &request(0x81, 0x0011, 0, 0, &[], 5));
    assert!(drain(&mut a, Duration::ZERO).is_empty());
    assert_eq!(a.stats().drops.stray_responses, 2);
}

/// Attribute IDs the SA knows, and some it does not.
const ATTRS: [u16; 20] = [
    0x0001, 0x0002, 0x0003, 0x0011, 0x0012, 0x0013, 0x0014, 0x0015, 0x0016, 0x0017, 0x0018, 0x0020, 0x0030, 0x0031,
    0x0033, 0x0035, 0x0036, 0x0038, 0x003A, 0x00F3,
];
const METHODS: [u8; 8] = [0x01, 0x02, 0x12, 0x14, 0x15, 0x06, 0x86, 0x92];

proptest::proptest! {
    #[test]
    fn arbitrary_bytes_never_panic(
        bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..400),
        attr in proptest::prelude::any::<u16>(),
        method in proptest::prelude::any::<u8>(),
        known in 0usize..20,
        trusted in proptest::prelude::any::<bool>(),
        rmpp in proptest::prelude::any::<[u8; 12]>(),
    ) {
        let mut a = agent();
        a.handle_mad(Duration::ZERO, &Datagram { addr: MadAddress::gsi(Lid(3), 0), mad: bytes.clone() });
        // The same bytes behind a valid SA header, so they reach the
        // record handlers: a known attribute and method most of the time,
        // an SM_Key the agent accepts, the rest (mask, data) arbitrary.
        let attr = if known < ATTRS.len() && attr % 4 != 0 { ATTRS[known] } else { attr };
        let method = if method % 4 != 0 { METHODS[usize::from(method) % METHODS.len()] } else { method };
        let key = if trusted { SA_KEY } else { 0 };
        let lid = sm_lid();
        let mut mad = request(method, attr, 0, key, &[], lid).mad;
        let n = bytes.len().min(MAD_SIZE - 44);
        mad[44..44 + n].copy_from_slice(&bytes[..n]);
        if bytes.len() > MAD_SIZE - 44 {
            mad.extend_from_slice(&bytes[MAD_SIZE - 44..]);
        }
        if rmpp[0] % 3 == 0 {
            mad[24..36].copy_from_slice(&rmpp);
        }
        let d = Datagram { addr: MadAddress::gsi(Lid(lid), 0), mad };
        let mut now = Duration::ZERO;
        for _ in 0..3 {
            a.handle_mad(now, &d);
            let out = drain(&mut a, now);
            // Whatever went out is of the SA class, and a whole MAD unless
            // it is a one-MAD table answer cut to its records: as long as
            // its PayloadLength says (20 bytes of SA header plus records).
            for m in &out {
                proptest::prop_assert!(m.mad.len() >= 56 && m.mad[1] == 0x03);
                if m.mad.len() != MAD_SIZE {
                    let payload = u32::from_be_bytes([m.mad[32], m.mad[33], m.mad[34], m.mad[35]]) as usize;
                    proptest::prop_assert_eq!(m.mad.len(), 36 + payload);
                }
            }
            now += Duration::from_secs(1);
            a.handle_timeout(now);
        }
        let _ = drain(&mut a, now);
    }
}

// ---- Records.

#[test]
fn node_records_by_key_by_mask_and_whole() {
    let mut a = agent();
    let r = swept();
    let lid = sm_lid();
    let key = NodeRecordRepr { lid: Lid(lid), ..Default::default() };
    let got = fetch(&mut a, &query(0x01, &key, node_mask::LID, 0, lid));
    assert_eq!((got.status, got.method), (0, 0x81));
    let rec = &got.parse::<NodeRecordRepr>()[0];
    let (node, port) = r.subnet.sm_port.unwrap();
    assert_eq!(rec.node_info.port_guid, r.subnet.node(node).port_guid(port));
    assert_eq!(rec.node_info.local_port_num, port);
    assert_eq!(rec.node_description.text, r.subnet.node(node).description.clone().unwrap_or_default());

    // GetTable of everything: one per switch and one per CA port with a LID,
    // more than one MAD holds.
    let all = fetch(&mut a, &query(0x12, &key, 0, 0, lid));
    assert_eq!((all.status, all.method, all.attribute_offset), (0, 0x92, 14));
    let expected = r.lids.ranges.len();
    assert_eq!(all.parse::<NodeRecordRepr>().len(), expected);
    assert!(all.segments > 1, "{} records need RMPP", expected);
    assert_eq!(a.stats().rmpp.completed, 1);

    // Switches only, by NodeType.
    let mut sw = NodeRecordRepr::default();
    sw.node_info.node_type = crate::mad::NodeType::Switch;
    let switches = fetch(&mut a, &query(0x12, &sw, node_mask::NODE_TYPE, 0, lid));
    assert_eq!(switches.parse::<NodeRecordRepr>().len(), r.subnet.switches().count());
    // By NodeGUID of a switch (indexed): exactly that switch.
    let (sw_guid, sw_lid) = a_switch();
    let mut by_guid = NodeRecordRepr::default();
    by_guid.node_info.node_guid = sw_guid;
    let one = fetch(&mut a, &query(0x01, &by_guid, node_mask::NODE_GUID, 0, lid));
    assert_eq!(one.parse::<NodeRecordRepr>()[0].lid, Lid(sw_lid));
    // A field outside the mask is ignored, one inside must match.
    by_guid.lid = Lid(0x7777);
    assert_eq!(fetch(&mut a, &query(0x01, &by_guid, node_mask::NODE_GUID, 0, lid)).status, 0);
    let miss = fetch(&mut a, &query(0x01, &by_guid, node_mask::NODE_GUID | node_mask::LID, 0, lid));
    assert_eq!(sa_status_of(&miss), sa_status::NO_RECORDS);
    // Get of many, unknown bits, GetTable of none.
    assert_eq!(sa_status_of(&fetch(&mut a, &query(0x01, &key, 0, 0, lid))), sa_status::TOO_MANY_RECORDS);
    assert_eq!(sa_status_of(&fetch(&mut a, &query(0x12, &key, 1 << 15, 0, lid))), sa_status::REQ_INVALID);
    let none = fetch(&mut a, &query(0x12, &by_guid, node_mask::NODE_GUID | node_mask::LID, 0, lid));
    // AttributeOffset 0 in an empty GetTableResp (as OpenSM; saquery
    // divides the payload by it).
    assert_eq!((none.status, none.method, none.data.len(), none.attribute_offset), (0, 0x92, 0, 0));
    // A short record is invalid: cut the data area to 50 bytes.
    let mut short = query(0x01, &key, node_mask::LID, 0, lid);
    short.mad.truncate(SA_DATA_OFFSET + 50);
    assert_eq!(sa_status_of(&fetch(&mut a, &short)), sa_status::REQ_INVALID);
}

#[test]
fn port_info_records_cover_switch_ports_and_hide_m_keys() {
    let mut report = swept().clone();
    // Give every port an M_Key, so hiding it shows.
    for n in &mut report.subnet.nodes {
        for p in &mut n.ports {
            if let Some(i) = p.info.as_mut() {
                i.m_key = 0x1122_3344_5566_7788;
            }
        }
    }
    let snap = snapshot(2, report.clone());
    let mut a = SaAgent::new(SaConfig { sa_key: SA_KEY, ..SaConfig::default() }, snap.master);
    a.new_snapshot(Duration::ZERO, snap);
    a.set_serving(Duration::ZERO, Serving::Master);
    let lid = sm_lid();
    let (sw_guid, sw_lid) = a_switch();
    let key = PortInfoRecordRepr {
        endport_lid: Lid(sw_lid),
        port_num: 0,
        options: 0,
        port_info: report.subnet.nodes[0].ports.iter().find_map(|p| p.info).unwrap(),
    };
    let sw = fetch(&mut a, &query(0x12, &key, port_info_mask::ENDPORT_LID, 0, lid));
    let recs = sw.parse::<PortInfoRecordRepr>();
    let node = report.subnet.by_guid(sw_guid).unwrap();
    assert_eq!(recs.len(), node.ports.iter().filter(|p| p.info.is_some()).count(), "port 0 and every port read");
    assert!(recs.iter().any(|r| r.port_num == 0));
    assert!(recs.iter().all(|r| r.endport_lid == Lid(sw_lid) && r.port_info.m_key == 0), "untrusted: M_Key zeroed");
    let trusted = fetch(&mut a, &query(0x12, &key, port_info_mask::ENDPORT_LID, SA_KEY, lid));
    assert!(trusted.parse::<PortInfoRecordRepr>().iter().all(|r| r.port_info.m_key == 0x1122_3344_5566_7788));
    // An untrusted requester cannot find records by guessing the M_Key.
    let mut guess = key;
    guess.port_info.m_key = 0x1122_3344_5566_7788;
    let mask = port_info_mask::ENDPORT_LID | port_info_mask::M_KEY;
    assert_eq!(fetch(&mut a, &query(0x12, &guess, mask, 0, lid)).data.len(), 0);
    assert_eq!(fetch(&mut a, &query(0x12, &guess, mask, SA_KEY, lid)).parse::<PortInfoRecordRepr>().len(), recs.len());
    // Options is a request flag: any value matches.
    let mut opt = key;
    opt.options = 0x80;
    let with_options = port_info_mask::ENDPORT_LID | port_info_mask::OPTIONS;
    assert_eq!(fetch(&mut a, &query(0x12, &opt, with_options, 0, lid)).parse::<PortInfoRecordRepr>().len(), recs.len());
    // The CapabilityMask match (AttributeModifier bit 31): ports with IsSM
    // set, whatever their other bits.
    let mut cap = key;
    cap.port_info.capability_mask = crate::mad::CapabilityMask::IS_SM;
    let mut d = query(0x12, &cap, port_info_mask::CAPABILITY_MASK, 0, lid);
    d.mad[20..24].copy_from_slice(&(1u32 << 31).to_be_bytes());
    let sms = fetch(&mut a, &d).parse::<PortInfoRecordRepr>();
    assert!(!sms.is_empty());
    assert!(sms.iter().all(|r| r.port_info.capability_mask & crate::mad::CapabilityMask::IS_SM != 0));
    assert!(sms.iter().any(|r| r.endport_lid.0 == lid), "the SM's own port");
    // Without the bit, the mask is compared exactly: none has only IsSM.
    d.mad[20..24].fill(0);
    assert_eq!(fetch(&mut a, &d).data.len(), 0);
}

#[test]
fn switch_info_link_lft_and_mft_records() {
    let mut a = agent();
    let r = swept();
    let lid = sm_lid();
    let si = fetch(&mut a, &query(0x12, &SwitchInfoRecordRepr::default(), 0, 0, lid));
    assert_eq!(si.parse::<SwitchInfoRecordRepr>().len(), r.subnet.switches().count());

    // Both directions of every cable.
    let links = fetch(&mut a, &query(0x12, &LinkRecordRepr::default(), 0, 0, lid)).parse::<LinkRecordRepr>();
    assert_eq!(links.len(), r.subnet.cabled_ports().count());
    for l in &links {
        let back =
            LinkRecordRepr { from_lid: l.to_lid, from_port: l.to_port, to_port: l.from_port, to_lid: l.from_lid };
        assert!(links.contains(&back), "{l:?} has its way back");
    }
    let (node, port) = r.subnet.sm_port.unwrap();
    let (far, far_port) = r.subnet.node(node).ports[port as usize].remote.unwrap();
    let from = LinkRecordRepr { from_lid: Lid(lid), from_port: port, ..Default::default() };
    let mine = fetch(&mut a, &query(0x01, &from, link_mask::FROM_LID | link_mask::FROM_PORT, 0, lid));
    let l = mine.parse::<LinkRecordRepr>()[0];
    assert_eq!(l.to_port, far_port);
    assert_eq!(l.to_lid, r.lids.ranges[&r.subnet.node(far).port_guid(0)].base());

    // The LFT of one switch, block by block, as routed.
    let (sw_guid, sw_lid) = a_switch();
    let table = &r.routes.lfts[&sw_guid];
    let key = LftRecordRepr { lid: sw_lid, block_num: 0, block: Default::default() };
    let b0 = fetch(&mut a, &query(0x01, &key, lft_mask::LID | lft_mask::BLOCK_NUM, 0, lid)).parse::<LftRecordRepr>();
    let n = table.len().min(64);
    assert_eq!(&b0[0].block.ports[..n], &table[..n]);
    let blocks = fetch(&mut a, &query(0x12, &key, lft_mask::LID, 0, lid)).parse::<LftRecordRepr>();
    assert_eq!(blocks.len(), usize::from(r.lids.max_lid.0) / 64 + 1);
    let every = fetch(&mut a, &query(0x12, &key, 0, 0, lid)).parse::<LftRecordRepr>();
    assert_eq!(every.len(), blocks.len() * r.subnet.switches().count());
    let past = LftRecordRepr { block_num: 500, ..key };
    assert_eq!(sa_status_of(&fetch(&mut a, &query(0x01, &past, lft_mask::LID | lft_mask::BLOCK_NUM, 0, lid))), 3);

    // No multicast group was routed: an empty table.
    let mft = fetch(&mut a, &query(0x12, &MftRecordRepr::default(), 0, 0, lid));
    assert_eq!((mft.status, mft.data.len(), mft.attribute_offset), (0, 0, 0));
}

#[test]
fn multicast_forwarding_records_are_the_routed_trees_block_by_block() {
    use ibsm_routing::mcast::PortSet;
    let mut report = swept().clone();
    let (sw_guid, sw_lid) = a_switch();
    let id = report.subnet.by_guid[&sw_guid];
    let (num_ports, cap) =
        (report.subnet.node(id).info.num_ports, report.subnet.node(id).switch_info.unwrap().multicast_fdb_cap);
    assert!(cap > 0x40, "the fixture's switches hold 2 blocks at least");
    let ports = |p: &[u8]| {
        let mut s = PortSet::EMPTY;
        p.iter().for_each(|&p| s.insert(p));
        s
    };
    // MLID 0xC000 to ports 1 and 3, 0xC021 (block 1, entry 1) to port 0
    // and 2, and one past the switch's cap (left out, as the SM does).
    let table: std::collections::BTreeMap<u16, PortSet> =
        [(0xC000, ports(&[1, 3])), (0xC021, ports(&[0, 2])), (0xC000 + cap, ports(&[1]))].into();
    report.mcast_tables.insert(sw_guid, table);
    let mut a = SaAgent::new(SaConfig { sa_key: SA_KEY, ..SaConfig::default() }, snapshot(1, swept().clone()).master);
    a.new_snapshot(Duration::ZERO, snapshot(2, report));
    a.set_serving(Duration::ZERO, Serving::Master);
    let lid = sm_lid();
    let all = fetch(&mut a, &query(0x12, &MftRecordRepr::default(), 0, 0, lid));
    assert_eq!(all.attribute_offset, 9, "72-byte records");
    let recs = all.parse::<MftRecordRepr>();
    // Blocks 0 and 1, every position the switch has (ports 0..=8: one).
    let positions = usize::from(num_ports) / 16 + 1;
    assert_eq!(recs.len(), 2 * positions, "{recs:?}");
    assert!(recs.iter().all(|r| r.lid == sw_lid));
    let b0 = recs.iter().find(|r| (r.block_num, r.position) == (0, 0)).unwrap();
    assert_eq!(b0.block.port_masks[0], 0b1010);
    assert!(b0.block.port_masks[1..].iter().all(|&m| m == 0));
    let b1 = recs.iter().find(|r| (r.block_num, r.position) == (1, 0)).unwrap();
    assert_eq!((b1.block.port_masks[0], b1.block.port_masks[1]), (0, 0b101));
    // By LID and block; a block past the last in use has no record.
    let key = MftRecordRepr { lid: sw_lid, block_num: 1, ..Default::default() };
    let one = fetch(&mut a, &query(0x01, &key, mft_mask::LID | mft_mask::BLOCK_NUM, 0, lid)).parse::<MftRecordRepr>();
    assert_eq!(one, vec![*b1]);
    let past = MftRecordRepr { block_num: 2, ..key };
    let none = fetch(&mut a, &query(0x01, &past, mft_mask::LID | mft_mask::BLOCK_NUM, 0, lid));
    assert_eq!(sa_status_of(&none), sa_status::NO_RECORDS);
    // The switch's records belong to its port 0: a host in no partition
    // with it sees none.
    let iso = isolated(true);
    let mut sweep = iso.snap.sweep.clone();
    sweep.mcast_tables = [(sw_guid, [(0xC000, ports(&[1, 3]))].into())].into();
    let snap = Arc::new(Snapshot { sweep, ..*snapshot(3, swept().clone()) });
    let mut b = agent_on(snap);
    assert_eq!(fetch(&mut b, &query(0x12, &MftRecordRepr::default(), 0, 0, iso.a.1)).parse::<MftRecordRepr>(), vec![]);
    assert_eq!(
        fetch(&mut b, &query(0x12, &MftRecordRepr::default(), 0, 0, lid)).parse::<MftRecordRepr>().len(),
        positions
    );
}

#[test]
fn p_key_tables_only_for_trusted_requesters() {
    let mut a = agent();
    let lid = sm_lid();
    let key = PKeyTableRecordRepr { lid: Lid(lid), ..Default::default() };
    let refused = fetch(&mut a, &query(0x01, &key, pkey_table_mask::LID, 0, lid));
    assert_eq!(sa_status_of(&refused), sa_status::REQ_INVALID);
    // The SM's port holds two blocks (64 P_Keys): a Get names the block.
    let both = fetch(&mut a, &query(0x12, &key, pkey_table_mask::LID, SA_KEY, lid)).parse::<PKeyTableRecordRepr>();
    assert_eq!(both.iter().map(|r| r.block_num).collect::<Vec<_>>(), vec![0, 1]);
    let mask = pkey_table_mask::LID | pkey_table_mask::BLOCK_NUM;
    let got = fetch(&mut a, &query(0x01, &key, mask, SA_KEY, lid)).parse::<PKeyTableRecordRepr>();
    assert!(got[0].pkey_table.pkeys.contains(&0xFFFF), "the default partition the SM put there");
    let all = fetch(&mut a, &query(0x12, &key, 0, SA_KEY, lid)).parse::<PKeyTableRecordRepr>();
    // One record per block of every port the SM programmed: end ports,
    // switch port 0 and the switch ports facing hosts.
    let s = swept();
    let blocks: usize = s.program.pkey_blocks.values().map(Vec::len).sum();
    assert_eq!(all.len(), blocks);
    // A switch: port 0 and each port cabled to a host (part_enforce is
    // "both" by default), as the switch holds them; no inter-switch port.
    let (sw_guid, sw_lid) = a_switch();
    let id = s.subnet.by_guid[&sw_guid];
    let node = s.subnet.node(id);
    let facing_hosts: Vec<u8> = node
        .external_ports()
        .filter(|&p| node.ports[p as usize].remote.is_some_and(|(far, _)| !s.subnet.node(far).is_switch()))
        .collect();
    let key = PKeyTableRecordRepr { lid: Lid(sw_lid), ..Default::default() };
    let sw = fetch(&mut a, &query(0x12, &key, pkey_table_mask::LID, SA_KEY, lid)).parse::<PKeyTableRecordRepr>();
    let mut ports: Vec<u8> = sw.iter().map(|r| r.port_num).collect();
    ports.dedup();
    assert_eq!(ports, [&[0u8][..], &facing_hosts].concat(), "{sw:?}");
    for r in &sw {
        assert_eq!(r.pkey_table, s.program.pkey_blocks[&(sw_guid, r.port_num)][usize::from(r.block_num)]);
    }
    let p = facing_hosts[0];
    let one = PKeyTableRecordRepr { lid: Lid(sw_lid), port_num: p, block_num: 0, ..Default::default() };
    let mask = pkey_table_mask::LID | pkey_table_mask::PORT_NUM | pkey_table_mask::BLOCK_NUM;
    let got = fetch(&mut a, &query(0x01, &one, mask, SA_KEY, lid)).parse::<PKeyTableRecordRepr>();
    assert!(got[0].pkey_table.pkeys.contains(&0xFFFF), "the host's default key, enforced on its switch port");
}

#[test]
fn sm_info_records_hide_the_key_from_untrusted_requesters() {
    let mut a = agent();
    let snap = snapshot(1, swept().clone());
    let ours = SmInfoRepr {
        guid: snap.master,
        sm_key: 0xABCD,
        act_count: 42,
        priority: 5,
        sm_state: crate::mad::SmState::Master,
    };
    a.set_sm_info(ours);
    let lid = sm_lid();
    let key = SmInfoRecordRepr { lid: Lid(lid), sm_info: ours };
    let got = fetch(&mut a, &query(0x01, &key, sm_info_mask::LID, 0, lid)).parse::<SmInfoRecordRepr>();
    assert_eq!((got[0].sm_info.guid, got[0].sm_info.priority, got[0].sm_info.sm_key), (snap.master, 5, 0));
    let got = fetch(&mut a, &query(0x01, &key, sm_info_mask::LID, SA_KEY, lid)).parse::<SmInfoRecordRepr>();
    assert_eq!(got[0].sm_info.sm_key, 0xABCD);
    assert_eq!(fetch(&mut a, &query(0x12, &key, 0, 0, lid)).parse::<SmInfoRecordRepr>().len(), 1, "no other SM");
}

#[test]
fn qos_tables_programmed_become_records_and_stay() {
    use crate::mad::sl_to_vl::{ATTR_MOD_ALL_INPUT_PORTS, ATTR_MOD_ALL_OUTPUT_PORTS};
    let mut report = swept().clone();
    let (sw_guid, sw_lid) = a_switch();
    let id = report.subnet.by_guid[&sw_guid];
    let table = crate::program::qos::identity_table(4);
    let path = report.subnet.node(id).path;
    report.routes.qos = vec![
        crate::subnet::QosSet {
            node: id,
            path,
            attr: crate::mad::AttributeId::SlToVlMappingTable,
            amod: ATTR_MOD_ALL_INPUT_PORTS | ATTR_MOD_ALL_OUTPUT_PORTS,
            data: crate::mad::SmpAttribute::to_data(&table),
        },
        crate::subnet::QosSet {
            node: id,
            path,
            attr: crate::mad::AttributeId::VlArbitrationTable,
            amod: crate::mad::vl_arb::attribute_modifier(crate::mad::VlArbBlock::LowFirst, 3),
            data: [0x01; 64],
        },
    ];
    let snap = snapshot(2, report.clone());
    let mut a = SaAgent::new(SaConfig::default(), snap.master);
    a.new_snapshot(Duration::ZERO, snap);
    a.set_serving(Duration::ZERO, Serving::Master);
    let lid = sm_lid();
    let key = SlToVlRecordRepr { lid: sw_lid, input_port_num: 1, output_port_num: 2, table: Default::default() };
    let mask = sl_to_vl_mask::LID | sl_to_vl_mask::INPUT_PORT_NUM | sl_to_vl_mask::OUTPUT_PORT_NUM;
    let one = fetch(&mut a, &query(0x01, &key, mask, 0, lid)).parse::<SlToVlRecordRepr>();
    assert_eq!(one[0].table, table);
    let n = report.subnet.node(id).ports.len();
    let all = fetch(&mut a, &query(0x12, &key, sl_to_vl_mask::LID, 0, lid)).parse::<SlToVlRecordRepr>();
    assert_eq!(all.len(), n * (n - 1) - (n - 1), "every input (port 0 too) to every other external port");
    let vk = VlArbRecordRepr { lid: sw_lid, output_port_num: 3, block_num: 1, table: Default::default() };
    let v = fetch(&mut a, &query(0x12, &vk, vl_arb_mask::LID, 0, lid)).parse::<VlArbRecordRepr>();
    assert_eq!((v.len(), v[0].output_port_num, v[0].block_num), (1, 3, 1));
    // The next sweep programs nothing new: the tables are still answered.
    report.routes.qos.clear();
    a.new_snapshot(Duration::ZERO, snapshot(3, report));
    assert_eq!(
        fetch(&mut a, &query(0x12, &key, sl_to_vl_mask::LID, 0, lid)).parse::<SlToVlRecordRepr>().len(),
        all.len()
    );
}

#[test]
fn class_port_info_says_what_is_served() {
    let mut a = agent();
    let got = fetch(&mut a, &request(0x01, 0x0001, 0, 0, &[], sm_lid()));
    let cpi = crate::mad::class_port_info::ClassPortInfoRepr::parse_bytes(&got.data).unwrap();
    assert_eq!((got.status, cpi.base_version, cpi.class_version), (0, 1, 2));
    use crate::mad::class_port_info::{sa_cap, sa_cap2};
    assert_ne!(cpi.capability_mask & sa_cap::IS_PORT_INFO_CAPMASK_MATCH_SUPPORTED, 0);
    assert_ne!(cpi.capability_mask & sa_cap::IS_UD_MULTICAST_SUPPORTED, 0, "MCMemberRecord joins");
    // Without bit 12 the kernel's IPoIB joins send-only groups as
    // SendOnlyNonMember; MulticastFDBTop is left to the switches.
    assert_ne!(cpi.capability_mask2 & sa_cap2::IS_SEND_ONLY_FULL_MEMBER_SUPPORTED, 0);
    assert_eq!(cpi.capability_mask2 & sa_cap2::IS_MCAST_TOP_SUPPORTED, 0);
    assert_eq!((cpi.capability_mask, cpi.capability_mask2), (0x2704, 0x0002_B4E0), "as sa_ibsim measures them");
    assert_ne!(cpi.capability_mask2 & sa_cap2::IS_ALIAS_GUIDS_SUPPORTED, 0);
    assert_eq!(status_of(&ask(&mut a, &request(0x12, 0x0001, 0, 0, &[], sm_lid()))), 0x000C, "Get only");
}

// ---- What requesters register.

fn service(id: u64, gid: [u8; 16], lease: u32, key: u8) -> ServiceRecordRepr {
    let mut r = ServiceRecordRepr::parse_bytes(&[0u8; SERVICE_RECORD_LEN]).unwrap();
    r.service_id = id;
    r.service_gid = gid;
    r.service_lease = lease;
    r.service_key = [key; 16];
    r.service_name[..4].copy_from_slice(b"ibsm");
    r
}

const RID: u64 = service_mask::SERVICE_ID | service_mask::SERVICE_GID;

#[test]
fn service_records_set_get_delete_and_lease() {
    let mut a = agent();
    let (host, host_lid) = other_host();
    let gid = index::gid(index::DEFAULT_SUBNET_PREFIX, host);
    let set_mask = RID | service_mask::SERVICE_LEASE | service_mask::SERVICE_KEY;
    let rec = service(0x1000, gid, 30, 7);
    let set = fetch(&mut a, &query(0x02, &rec, set_mask, 0, host_lid));
    assert_eq!((set.status, set.method), (0, 0x81));
    let stored = &set.parse::<ServiceRecordRepr>()[0];
    assert_eq!((stored.service_pkey, stored.service_lease, stored.service_key), (0xFFFF, 30, [0; 16]));
    // A second, with an infinite lease (no lease in the mask).
    fetch(&mut a, &query(0x02, &service(0x2000, gid, 5, 0), RID, 0, host_lid));
    assert_eq!(a.stats().services, 2);

    let by_id = service(0x1000, [0; 16], 0, 0);
    let got = fetch(&mut a, &query(0x01, &by_id, service_mask::SERVICE_ID, 0, sm_lid()));
    let r = &got.parse::<ServiceRecordRepr>()[0];
    assert_eq!((r.service_gid, r.service_key, &r.service_name[..4]), (gid, [0; 16], &b"ibsm"[..]), "key hidden");
    let got = fetch(&mut a, &query(0x01, &by_id, service_mask::SERVICE_ID, SA_KEY, sm_lid()));
    assert_eq!(got.parse::<ServiceRecordRepr>()[0].service_key, [7; 16], "a trusted requester sees it");
    assert_eq!(fetch(&mut a, &query(0x12, &by_id, 0, 0, sm_lid())).parse::<ServiceRecordRepr>().len(), 2);

    // The key protects it: a Delete without it is denied, with it done.
    let denied = fetch(&mut a, &query(0x15, &rec, RID, 0, sm_lid()));
    assert_eq!(sa_status_of(&denied), sa_status::DENIED);
    let deleted = fetch(&mut a, &query(0x15, &rec, RID | service_mask::SERVICE_KEY, 0, sm_lid()));
    assert_eq!((deleted.status, deleted.method), (0, 0x95));
    assert_eq!(sa_status_of(&fetch(&mut a, &query(0x15, &rec, RID, 0, sm_lid()))), sa_status::NO_RECORDS);
    let no_gid = fetch(&mut a, &query(0x02, &rec, service_mask::SERVICE_ID, 0, host_lid));
    assert_eq!(sa_status_of(&no_gid), sa_status::REQ_INVALID, "Set needs ServiceID and ServiceGID");

    // A lease runs out: the SA wakes for it and the record is gone.
    fetch(&mut a, &query(0x02, &service(0x3000, gid, 2, 0), RID | service_mask::SERVICE_LEASE, 0, host_lid));
    assert_eq!(a.poll_timeout(), Some(Duration::from_secs(2)));
    a.handle_timeout(Duration::from_secs(2));
    assert_eq!(a.stats().leases_expired, 1);
    let gone = service(0x3000, [0; 16], 0, 0);
    assert_eq!(sa_status_of(&fetch(&mut a, &query(0x01, &gone, service_mask::SERVICE_ID, 0, sm_lid()))), 3);
    assert_eq!(a.stats().services, 1);
}

#[test]
fn service_record_floods_are_capped_per_port_and_counted() {
    let snap = snapshot(1, swept().clone());
    let cfg = SaConfig { max_services_per_port: 4, max_services: 6, ..SaConfig::default() };
    let mut a = SaAgent::new(cfg, snap.master);
    a.new_snapshot(Duration::ZERO, snap);
    a.set_serving(Duration::ZERO, Serving::Master);
    let (host, host_lid) = other_host();
    let gid = index::gid(index::DEFAULT_SUBNET_PREFIX, host);
    let statuses: Vec<u16> =
        (0..1000).map(|i| fetch(&mut a, &query(0x02, &service(i, gid, 0, 0), RID, 0, host_lid)).status).collect();
    assert_eq!(statuses.iter().filter(|&&s| s == 0).count(), 4);
    assert!(statuses[4..].iter().all(|&s| s >> 8 == sa_status::NO_RESOURCES));
    assert_eq!(a.stats().drops.service_cap, 996);
    // Another port still has room, up to the total.
    let sm = sm_lid();
    let ok = (0..5).filter(|&i| fetch(&mut a, &query(0x02, &service(5000 + i, gid, 0, 0), RID, 0, sm)).status == 0);
    assert_eq!(ok.count(), 2, "six in all");
}

#[test]
fn alias_guids_are_set_read_deleted_and_die_with_their_port() {
    let mut a = agent();
    let (host, host_lid) = other_host();
    let mut rec = GuidInfoRecordRepr { lid: Lid(host_lid), block_num: 0, guid_info: Default::default() };
    rec.guid_info.guids[1] = Guid(0xA11A5);
    let mask = guid_info_mask::LID | guid_info_mask::BLOCK_NUM | guid_info_mask::guid(1);
    // Another port may not give this one aliases; the port itself may.
    let denied = fetch(&mut a, &query(0x02, &rec, mask, 0, sm_lid()));
    assert_eq!(sa_status_of(&denied), sa_status::DENIED);
    let set = fetch(&mut a, &query(0x02, &rec, mask, 0, host_lid));
    assert_eq!(set.status, 0, "{set:?}");
    let block = set.parse::<GuidInfoRecordRepr>()[0].guid_info;
    // ibsim ports have GUIDCap 1 or more; past it the alias reads 0.
    let cap = swept()
        .subnet
        .nodes
        .iter()
        .flat_map(|n| &n.ports)
        .find_map(|p| p.info.filter(|i| i.lid.0 == host_lid))
        .unwrap()
        .guid_cap;
    assert_eq!(block.guids[0], host);
    if cap > 1 {
        assert_eq!(block.guids[1], Guid(0xA11A5));
        let key = GuidInfoRecordRepr { lid: Lid(host_lid), ..Default::default() };
        let read = fetch(&mut a, &query(0x01, &key, guid_info_mask::LID | guid_info_mask::BLOCK_NUM, 0, sm_lid()));
        let blocks = fetch(&mut a, &query(0x12, &key, guid_info_mask::LID, 0, sm_lid())).parse::<GuidInfoRecordRepr>();
        assert_eq!(blocks.len(), usize::from(cap).div_ceil(8), "GUIDCap {cap} in blocks of 8");
        assert_eq!(read.parse::<GuidInfoRecordRepr>()[0].guid_info.guids[1], Guid(0xA11A5));
        // Kept across a snapshot with the port.
        a.new_snapshot(Duration::ZERO, snapshot(2, swept().clone()));
        assert_eq!(a.stats().alias_guids, 1);
        let del = fetch(&mut a, &query(0x15, &rec, mask, SA_KEY, sm_lid()));
        assert_eq!((del.method, del.parse::<GuidInfoRecordRepr>()[0].guid_info.guids[1]), (0x95, Guid(0)));
        fetch(&mut a, &query(0x02, &rec, mask, 0, host_lid));
        assert_eq!(a.stats().alias_guids, 1);
        // Gone with its port.
        let mut report = swept().clone();
        report.lids.ranges.remove(&host);
        a.new_snapshot(Duration::ZERO, snapshot(3, report));
        assert_eq!(a.stats().alias_guids, 0);
    } else {
        assert_eq!(block.guids[1], Guid(0), "past GUIDCap");
    }
    // The port GUID itself cannot be changed.
    let mut own = rec;
    own.guid_info.guids[0] = Guid(0xBAD);
    let out = fetch(&mut a, &query(0x02, &own, guid_info_mask::LID | guid_info_mask::guid(0), SA_KEY, sm_lid()));
    assert_ne!(out.parse::<GuidInfoRecordRepr>().first().map(|r| r.guid_info.guids[0]), Some(Guid(0xBAD)));
}

fn inform(trap_number: u16, subscribe: bool) -> InformInfoRepr {
    InformInfoRepr {
        gid: [0; 16],
        lid_range_begin: 0xFFFF,
        lid_range_end: 0,
        subscribe,
        notice_type: 0xFFFF,
        kind: InformKind::Generic { trap_number, producer_type: 0x00FF_FFFF },
        qpn: 0,
        resp_time_value: 0,
    }
}

/// The Reports among `out`, with their notices.
fn reports(out: &[Datagram]) -> Vec<(Datagram, NoticeRepr)> {
    out.iter()
        .filter(|d| d.mad[3] == 0x06)
        .map(|d| (d.clone(), NoticeRepr::parse_bytes(&d.mad[SA_DATA_OFFSET..SA_DATA_OFFSET + 80]).unwrap()))
        .collect()
}

#[test]
fn a_port_leaving_is_reported_as_trap_65_until_report_resp() {
    let mut a = agent();
    let sm = sm_lid();
    let ok = fetch(&mut a, &query(0x02, &inform(65, true), 0, 0, sm));
    assert_eq!((ok.status, ok.method), (0, 0x81));
    assert!(InformInfoRepr::parse_bytes(&ok.data).unwrap().subscribe, "the InformInfo echoed");
    assert_eq!(a.stats().subscriptions, 1);
    let iir = fetch(&mut a, &query(0x12, &InformInfoRecordRepr::default(), 0, 0, sm)).parse::<InformInfoRecordRepr>();
    assert_eq!(iir.len(), 1);

    // Another host's port goes down by the next sweep.
    let (host, _) = other_host();
    let mut report = swept().clone();
    for n in &mut report.subnet.nodes {
        for (p, slot) in n.ports.iter_mut().enumerate() {
            if !n.info.node_type.eq(&crate::mad::NodeType::Switch)
                && n.port_guids.get(p).copied().flatten() == Some(host)
            {
                slot.info.as_mut().unwrap().port_state = crate::mad::PortState::Down;
            }
        }
    }
    a.new_snapshot(Duration::ZERO, snapshot(2, report));
    let out = drain(&mut a, Duration::ZERO);
    let sent = reports(&out);
    assert_eq!(sent.len(), 1, "one Report: the subscription asked for 65 only");
    let (d, n) = &sent[0];
    assert_eq!((d.addr.lid.0, d.addr.qkey), (sm, crate::datagram::MadAddress::QP1_QKEY));
    assert_eq!((n.trap_number, n.producer_type, n.issuer_lid.0), (65, 4, sm));
    assert_eq!(&n.data_details[6..22], &index::gid(index::DEFAULT_SUBNET_PREFIX, host)[..], "the GID gone");
    let tid = u64::from_be_bytes(d.mad[8..16].try_into().unwrap());
    assert_eq!(tid >> 31 & 1, 1, "TIDs with bit 31 set");

    // No ReportResp: sent again after the timeout, then given up.
    let t = a.config().report_timeout();
    assert_eq!(a.poll_timeout(), Some(t));
    a.handle_timeout(t);
    let again = reports(&drain(&mut a, t));
    assert_eq!(again.len(), 1);
    assert_eq!(again[0].0.mad, d.mad, "the same Report, same TID");
    // A ReportResp (the kernel set the high TID bits) retires it.
    let mut resp = again[0].0.clone();
    resp.mad[3] = 0x86;
    resp.mad[8..12].copy_from_slice(&[0xAB, 0xCD, 0, 1]);
    a.handle_mad(t, &resp);
    assert_eq!(a.stats().reports.acknowledged, 1);
    assert_eq!(a.poll_timeout(), None);

    // The port coming back is trap 64, which nobody asked for.
    a.new_snapshot(t, snapshot(3, swept().clone()));
    assert!(reports(&drain(&mut a, t)).is_empty());
    assert_eq!(a.stats().reports.gid_in_service, 1);
}

#[test]
fn reports_give_up_after_their_retries_and_subscriptions_die_with_their_port() {
    let mut a = agent();
    let (host, host_lid) = other_host();
    fetch(&mut a, &query(0x02, &inform(0xFFFF, true), 0, 0, host_lid));
    let (sw_guid, sw_lid) = a_switch();
    let _ = sw_guid;
    let notice = NoticeRepr {
        is_generic: true,
        notice_type: NoticeType::Urgent,
        producer_type: 2,
        trap_number: 128,
        issuer_lid: Lid(sw_lid),
        notice_toggle: false,
        notice_count: 0,
        data_details: [0; 54],
        issuer_gid: [0; 16],
    };
    a.handle_trap(Duration::ZERO, &notice, Lid(sw_lid));
    let sent = reports(&drain(&mut a, Duration::ZERO));
    assert_eq!(sent.len(), 1);
    assert_eq!(sent[0].0.addr.lid.0, host_lid);
    assert_ne!(sent[0].1.issuer_gid, [0; 16], "IssuerGID filled in from the switch's port");
    let t = a.config().report_timeout();
    let mut now = Duration::ZERO;
    let mut sends = 1;
    while let Some(at) = a.poll_timeout() {
        now = at;
        a.handle_timeout(now);
        sends += reports(&drain(&mut a, now)).len();
        assert!(now <= t * 10, "bounded retries");
    }
    assert_eq!(sends as u32, 1 + a.config().report_retries);
    assert_eq!(a.stats().reports.given_up, 1);
    // Security traps go only to trusted subscribers.
    let mut bad_key = notice;
    bad_key.trap_number = 256;
    a.handle_trap(now, &bad_key, Lid(sw_lid));
    assert!(reports(&drain(&mut a, now)).is_empty());
    let refused = fetch_at(&mut a, &query(0x02, &inform(256, true), 0, 0, host_lid), now);
    assert_eq!(sa_status_of(&refused), sa_status::DENIED);
    assert!(!InformInfoRepr::parse_bytes(&refused.data).unwrap().subscribe, "Subscribe 0 in the refusal");
    assert_eq!(fetch_at(&mut a, &query(0x02, &inform(256, true), 0, SA_KEY, host_lid), now).status, 0);
    // Unsubscribing what is not subscribed is invalid.
    let bad = fetch_at(&mut a, &query(0x02, &inform(77, false), 0, 0, host_lid), now);
    assert_eq!(sa_status_of(&bad), sa_status::REQ_INVALID);
    assert_eq!(fetch_at(&mut a, &query(0x02, &inform(0xFFFF, false), 0, 0, host_lid), now).status, 0);
    assert_eq!(a.stats().subscriptions, 1);
    // The subscriber's port leaves the fabric: its subscription goes.
    let mut report = swept().clone();
    report.lids.ranges.remove(&host);
    a.new_snapshot(now, snapshot(2, report));
    assert_eq!(a.stats().subscriptions, 0);
}

#[test]
fn a_subscriber_that_never_answers_holds_only_its_share_of_reports() {
    let snap = snapshot(1, swept().clone());
    let cfg = SaConfig { max_reports_per_subscriber: 2, ..SaConfig::default() };
    let mut a = SaAgent::new(cfg, snap.master);
    a.new_snapshot(Duration::ZERO, snap);
    a.set_serving(Duration::ZERO, Serving::Master);
    let ((_, host_lid), sm) = (other_host(), sm_lid());
    fetch(&mut a, &query(0x02, &inform(0xFFFF, true), 0, 0, host_lid));
    let (_, sw_lid) = a_switch();
    let trap = |n: u16| NoticeRepr {
        is_generic: true,
        notice_type: NoticeType::Urgent,
        producer_type: 2,
        trap_number: n,
        issuer_lid: Lid(sw_lid),
        notice_toggle: false,
        notice_count: 0,
        data_details: [0; 54],
        issuer_gid: [0; 16],
    };
    for n in [128, 129, 130] {
        a.handle_trap(Duration::ZERO, &trap(n), Lid(sw_lid));
    }
    let sent = reports(&drain(&mut a, Duration::ZERO));
    assert_eq!(sent.iter().map(|(_, n)| n.trap_number).collect::<Vec<_>>(), vec![128, 129]);
    assert_eq!((a.stats().drops.report_subscriber_cap, a.stats().drops.report_cap), (1, 0));
    // Another subscriber still hears of the next trap.
    fetch(&mut a, &query(0x02, &inform(0xFFFF, true), 0, 0, sm));
    a.handle_trap(Duration::ZERO, &trap(131), Lid(sw_lid));
    let sent = reports(&drain(&mut a, Duration::ZERO));
    assert_eq!(sent.iter().map(|(d, _)| d.addr.lid.0).collect::<Vec<_>>(), vec![sm]);
    assert_eq!(a.stats().drops.report_subscriber_cap, 2);
}

// ---- Multi-MAD answers.

fn pir_key() -> PortInfoRecordRepr {
    let info = swept().subnet.nodes.iter().flat_map(|n| &n.ports).find_map(|p| p.info).unwrap();
    PortInfoRecordRepr { endport_lid: Lid(0), port_num: 0, options: 0, port_info: info }
}

#[test]
fn rmpp_answers_are_bounded_deduplicated_and_survive_loss() {
    let snap = snapshot(1, swept().clone());
    let cfg = SaConfig { max_rmpp_sends: 1, ..SaConfig::default() };
    let mut a = SaAgent::new(cfg, snap.master);
    a.new_snapshot(Duration::ZERO, snap);
    a.set_serving(Duration::ZERO, Serving::Master);
    let table = query(0x12, &pir_key(), 0, 0, sm_lid());
    a.handle_mad(Duration::ZERO, &table);
    let first = a.poll_transmit(Duration::ZERO).unwrap();
    assert_eq!(first.mad[26] & 0x07, 0x03, "active and first, not last");
    assert!(a.poll_transmit(Duration::ZERO).is_none(), "the window is one segment until an ACK");
    // The same request again starts nothing; another requester finds the
    // table full.
    a.handle_mad(Duration::ZERO, &table);
    assert_eq!(a.stats().drops.duplicate_requests, 1);
    let (_, other) = other_host();
    let busy = fetch(&mut a, &query(0x12, &pir_key(), 0, 0, other));
    assert_eq!(sa_status_of(&busy), sa_status::NO_RESOURCES);
    assert_eq!(a.stats().drops.rmpp_busy, 1);
    // No ACK ever: the first segment is sent again, then the transfer ends.
    let mut now = Duration::ZERO;
    let mut resent = 0;
    while let Some(at) = a.poll_timeout() {
        now = at;
        a.handle_timeout(now);
        resent += drain(&mut a, now).len();
        assert!(now < Duration::from_secs(60));
    }
    assert!(resent >= 1);
    assert_eq!((a.stats().rmpp.failed, a.stats().rmpp.in_flight), (1, 0));
    // With room again, the whole table comes through an ACKing receiver.
    let whole = fetch_at(&mut a, &table, now);
    assert_eq!(whole.parse::<PortInfoRecordRepr>().len(), a.records.as_ref().unwrap().port_info.len());
    // An ACK for no transfer is counted, not answered.
    let mut stray = first.clone();
    stray.mad[25] = 2;
    a.handle_mad(now, &stray);
    assert_eq!(a.stats().drops.stray_rmpp, 1);
}

#[test]
fn rmpp_room_is_checked_before_building_and_each_requester_is_capped() {
    let snap = snapshot(1, swept().clone());
    let cfg = SaConfig { max_rmpp_sends_per_requester: 2, ..SaConfig::default() };
    let mut a = SaAgent::new(cfg, snap.master);
    a.new_snapshot(Duration::ZERO, snap.clone());
    a.set_serving(Duration::ZERO, Serving::Master);
    let (sm, (_, other)) = (sm_lid(), other_host());
    // TIDs apart from `request`'s (its low 32 bits are the LID).
    let table = |tid: u64, lid: u16| {
        let mut d = query(0x12, &pir_key(), 0, 0, lid);
        d.mad[8..16].copy_from_slice(&(0x1000_0000 | tid).to_be_bytes());
        d
    };
    for tid in [1, 2] {
        a.handle_mad(Duration::ZERO, &table(tid, sm));
    }
    assert_eq!((a.stats().rmpp.in_flight, drain(&mut a, Duration::ZERO).len()), (2, 2), "two first segments");
    // A third from the same LID: no room for it, known before building.
    let third = table(3, sm);
    let wire::Received::Request(r) = wire::classify(&third) else { panic!() };
    let b = a.budget(&r);
    assert_eq!((b.bytes, b.rmpp), (SA_DATA_LEN, Some(SendError::RequesterBusy)));
    assert_eq!(sa_status_of(&fetch(&mut a, &third)), sa_status::NO_RESOURCES);
    assert_eq!((a.stats().drops.rmpp_requester_cap, a.stats().drops.answer_too_large), (1, 0));
    // An answer of one MAD needs no send: still answered.
    let one = NodeRecordRepr { lid: Lid(sm), ..Default::default() };
    assert_eq!(fetch(&mut a, &query(0x12, &one, node_mask::LID, 0, sm)).status, 0);
    // Another requester has room.
    a.handle_mad(Duration::ZERO, &table(1, other));
    assert_eq!(a.stats().rmpp.in_flight, 3);

    // Bytes: the first table leaves 1000 bytes of max_rmpp_bytes; a query
    // is built to that and refused as RMPP-busy, not as too large.
    let pir_bytes = fetch(&mut agent(), &table(1, sm)).data.len();
    let cfg = SaConfig { max_rmpp_bytes: pir_bytes + 1000, ..SaConfig::default() };
    let mut a = SaAgent::new(cfg, snap.master);
    a.new_snapshot(Duration::ZERO, snap);
    a.set_serving(Duration::ZERO, Serving::Master);
    a.handle_mad(Duration::ZERO, &table(1, sm));
    assert_eq!((a.stats().rmpp.in_flight, drain(&mut a, Duration::ZERO).len()), (1, 1));
    let nodes = query(0x12, &NodeRecordRepr::default(), 0, 0, other);
    let wire::Received::Request(r) = wire::classify(&nodes) else { panic!() };
    let b = a.budget(&r);
    assert_eq!((b.bytes, b.rmpp), (1000, Some(SendError::Busy)));
    assert!(swept().subnet.nodes.len() * 112 > 1000, "the node table is larger");
    assert_eq!(sa_status_of(&fetch(&mut a, &nodes)), sa_status::NO_RESOURCES);
    let paths = query(0x12, &PathRecordRepr { slid: other, ..Default::default() }, path_mask::SLID, 0, other);
    assert_eq!(sa_status_of(&fetch(&mut a, &paths)), sa_status::NO_RESOURCES, "PathRecords too");
    assert_eq!((a.stats().drops.rmpp_busy, a.stats().drops.answer_too_large), (2, 0));
    // A Get is never cut.
    let get = query(0x01, &one, node_mask::LID, 0, other);
    let wire::Received::Request(g) = wire::classify(&get) else { panic!() };
    assert_eq!(a.budget(&g).bytes, a.config().max_answer_bytes);
}

#[test]
fn answers_over_the_cap_are_refused() {
    let snap = snapshot(1, swept().clone());
    let mut a = SaAgent::new(SaConfig { max_answer_bytes: 1000, ..SaConfig::default() }, snap.master);
    a.new_snapshot(Duration::ZERO, snap);
    a.set_serving(Duration::ZERO, Serving::Master);
    let got = fetch(&mut a, &query(0x12, &NodeRecordRepr::default(), 0, 0, sm_lid()));
    assert_eq!(sa_status_of(&got), sa_status::NO_RESOURCES);
    assert_eq!(a.stats().drops.answer_too_large, 1);
    let one = NodeRecordRepr { lid: Lid(sm_lid()), ..Default::default() };
    assert_eq!(fetch(&mut a, &query(0x12, &one, node_mask::LID, 0, sm_lid())).status, 0, "small ones still go");
}

#[test]
fn leaving_master_stops_sends_and_reports() {
    let mut a = agent();
    a.handle_mad(Duration::ZERO, &query(0x12, &NodeRecordRepr::default(), 0, 0, sm_lid()));
    assert_eq!(a.stats().rmpp.in_flight, 1);
    a.set_serving(Duration::ZERO, Serving::NotMaster);
    assert_eq!(a.stats().rmpp.in_flight, 0);
    assert!(a.poll_transmit(Duration::ZERO).is_none());
    assert_eq!(a.poll_timeout(), None);
}

// ---- Paths (computed by `path`; here: how the agent answers them).

#[test]
fn path_records_by_get_get_table_and_get_multi() {
    let mut a = agent();
    let sm = sm_lid();
    let (host, host_lid) = other_host();
    let q = PathRecordRepr { slid: sm, dlid: host_lid, ..Default::default() };
    let one = fetch(&mut a, &query(0x01, &q, path_mask::SLID | path_mask::DLID, 0, sm));
    assert_eq!((one.status, one.method), (0, 0x81));
    let p = one.parse::<PathRecordRepr>()[0];
    assert_eq!((p.slid, p.dlid, p.packet_life_time), (sm, host_lid, a.config().subnet_timeout));
    // From the requester to every port: one record per LID-bearing port.
    let all = fetch(&mut a, &query(0x12, &q, path_mask::SLID, 0, sm));
    assert_eq!((all.status, all.method, all.attribute_offset), (0, 0x92, 8));
    assert_eq!(all.parse::<PathRecordRepr>().len(), swept().lids.ranges.len());
    assert_eq!(sa_status_of(&fetch(&mut a, &query(0x01, &q, path_mask::SLID, 0, sm))), sa_status::TOO_MANY_RECORDS);
    let bad_gid = PathRecordRepr { dgid: [0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x99], ..q };
    let e = fetch(&mut a, &query(0x01, &bad_gid, path_mask::DGID, 0, sm));
    assert_eq!(sa_status_of(&e), sa_status::INVALID_GID);
    assert_eq!(status_of(&ask(&mut a, &query(0x02, &q, 0, 0, sm))), 0x000C);

    // GetMulti, sent as a dual-sided RMPP segment: ACKed, then answered.
    let gid = |g: Guid| index::gid(index::DEFAULT_SUBNET_PREFIX, g);
    let master = snapshot(1, swept().clone()).master;
    let mut mpr = MultiPathRecordRepr::parse_bytes(&[0u8; 24]).unwrap();
    mpr.sgid_count = 1;
    mpr.dgid_count = 1;
    mpr.gids = vec![gid(master), gid(host)];
    let mut b = vec![0u8; SA_DATA_LEN];
    mpr.emit(&mut b).unwrap();
    let mut d = request(0x14, 0x003A, multi_path_mask::SGID_COUNT | multi_path_mask::DGID_COUNT, 0, &b, sm);
    d.mad[24..36].copy_from_slice(&[1, 1, 0xF8 | 0x07, 0, 0, 0, 0, 1, 0, 0, 0, 20 + 56]);
    a.handle_mad(Duration::ZERO, &d);
    let out = drain(&mut a, Duration::ZERO);
    assert_eq!(out.len(), 2, "an ACK and the answer");
    assert_eq!(out[0].mad[25], 2, "RMPP ACK first");
    assert_eq!((out[1].mad[3], status_of(&out[1])), (0x94, 0));
    assert_eq!(&out[1].mad[16..18], &[0, 0x35], "a GetMultiResp carries PathRecord (o15-0.2.7)");
    let paths: Vec<PathRecordRepr> =
        vec![PathRecordRepr::parse_bytes(&out[1].mad[SA_DATA_OFFSET..SA_DATA_OFFSET + 64]).unwrap()];
    assert_eq!((paths[0].slid, paths[0].dlid), (sm, host_lid));
}

/// A MultiPathRecord GetMulti from LID `lid`: the master's port as the one
/// SGID, `dgids` as DGIDs, `numb_path` paths. Its header (to segment by)
/// and its payload.
fn multi_path_from_master(dgids: &[Guid], numb_path: u8, lid: u16) -> (Datagram, Vec<u8>) {
    let master = snapshot(1, swept().clone()).master;
    let gid = |g: Guid| index::gid(index::DEFAULT_SUBNET_PREFIX, g);
    let mut mpr = MultiPathRecordRepr::parse_bytes(&[0u8; 24]).unwrap();
    mpr.sgid_count = 1;
    mpr.dgid_count = dgids.len() as u8;
    mpr.numb_path = numb_path;
    mpr.gids = std::iter::once(gid(master)).chain(dgids.iter().map(|&g| gid(g))).collect();
    let mut payload = vec![0u8; 24 + 16 * mpr.gids.len()];
    mpr.emit(&mut payload).unwrap();
    let mask = multi_path_mask::SGID_COUNT | multi_path_mask::DGID_COUNT | multi_path_mask::NUMB_PATH;
    (request(0x14, 0x003A, mask, 0, &[], lid), payload)
}

/// A MultiPathRecord naming more GIDs than one MAD holds, sent in two
/// RMPP segments by the project's own sender: the SA ACKs them,
/// reassembles the request and answers every GID it named. A segment of
/// no transfer is dropped and counted; a fifth transfer from one
/// requester at once is refused with ERR_NO_RESOURCES.
#[test]
fn a_multi_segment_request_is_reassembled_and_answered() {
    use crate::rmpp::{RmppConfig, RmppSender};
    let mut a = agent();
    let sm = sm_lid();
    let hosts: Vec<(Guid, u16)> = other_hosts().into_iter().take(12).collect();
    let dgids: Vec<Guid> = hosts.iter().map(|h| h.0).collect();
    let (template, payload) = multi_path_from_master(&dgids, 3, sm);
    assert!(payload.len() > MAD_SIZE - SA_DATA_OFFSET, "more than one MAD holds");
    let payload_again = payload.clone();
    let mut tx =
        RmppSender::new(Duration::ZERO, &template.mad[..SA_DATA_OFFSET], payload, RmppConfig::default()).unwrap();
    assert_eq!(tx.segments(), 2);
    let mut answers = Vec::new();
    for _ in 0..10 {
        while let Some(seg) = tx.poll_transmit(Duration::ZERO) {
            a.handle_mad(Duration::ZERO, &Datagram { addr: template.addr, mad: seg });
        }
        for d in drain(&mut a, Duration::ZERO) {
            if d.mad[25] == 2 {
                tx.handle_mad(Duration::ZERO, &d.mad).unwrap();
            } else {
                answers.push(d);
            }
        }
    }
    assert!(tx.is_done() && tx.state() == &crate::rmpp::TransferState::Done, "every segment ACKed: {:?}", tx.state());
    assert_eq!(answers.len(), 1, "one answer");
    let d = &answers[0];
    assert_eq!((d.mad[3], status_of(d)), (0x94, 0), "a GetMultiResp with status 0");
    let n = (0..3).filter(|i| d.mad[SA_DATA_OFFSET + 64 * i + 8..SA_DATA_OFFSET + 64 * i + 12] != [0; 4]).count();
    let paths: Vec<PathRecordRepr> = (0..n)
        .map(|i| PathRecordRepr::parse_bytes(&d.mad[SA_DATA_OFFSET + 64 * i..SA_DATA_OFFSET + 64 * (i + 1)]).unwrap())
        .collect();
    assert_eq!(paths.len(), 3, "NumbPath 3 of the twelve DGIDs");
    for p in &paths {
        assert_eq!(p.slid, sm);
        assert!(hosts.iter().any(|h| h.1 == p.dlid), "DLID {} is one of the GIDs named", p.dlid);
    }
    assert_eq!(a.stats().rmpp.requests_received, 1);
    assert_eq!(a.stats().drops.segmented_requests, 0);
    // The last segment again (the final ACK lost): ACKed again, not answered again.
    let mut again =
        RmppSender::new(Duration::ZERO, &template.mad[..SA_DATA_OFFSET], payload_again, RmppConfig::default()).unwrap();
    let last = std::iter::from_fn(|| again.poll_transmit(Duration::ZERO)).last().unwrap();
    a.handle_mad(Duration::ZERO, &Datagram { addr: template.addr, mad: last });
    let repeat = drain(&mut a, Duration::ZERO);
    assert_eq!(repeat.iter().map(|d| d.mad[25]).collect::<Vec<u8>>(), vec![2], "one ACK, no second answer");
    assert_eq!(a.stats().rmpp.requests_received, 1);

    // Segment 2 of no transfer: dropped, counted, unanswered.
    let mut stray = template.clone();
    stray.mad[8..16].copy_from_slice(&0xDEADu64.to_be_bytes());
    stray.mad[24..28].copy_from_slice(&[1, 1, 0x01, 0]);
    stray.mad[28..32].copy_from_slice(&2u32.to_be_bytes());
    a.handle_mad(Duration::ZERO, &stray);
    assert!(drain(&mut a, Duration::ZERO).is_empty());
    assert_eq!(a.stats().drops.segmented_requests, 1);
    // Four first segments from one LID hold four transfers; a fifth is refused.
    for tid in 0..5u64 {
        let mut first = template.clone();
        first.mad[8..16].copy_from_slice(&(0xAB00 + tid).to_be_bytes());
        first.mad[24..28].copy_from_slice(&[1, 1, 0x03, 0]);
        first.mad[28..32].copy_from_slice(&1u32.to_be_bytes());
        a.handle_mad(Duration::ZERO, &first);
    }
    let out = drain(&mut a, Duration::ZERO);
    assert_eq!(out.iter().filter(|d| d.mad[25] == 2).count(), 4, "four transfers ACKed");
    let refused: Vec<&Datagram> = out.iter().filter(|d| d.mad[25] != 2).collect();
    assert_eq!(refused.len(), 1);
    assert_eq!(status_of(refused[0]) >> 8, sa_status::NO_RESOURCES);
    // They time out: ABORTed (status 118), counted, forgotten.
    // (The finished transfer is forgotten first, after 10 s.)
    let mut aborts = Vec::new();
    for _ in 0..4 {
        let Some(t) = a.poll_timeout() else { break };
        a.handle_timeout(t);
        aborts.extend(drain(&mut a, t));
    }
    assert_eq!(aborts.iter().filter(|d| d.mad[25] == 4 && d.mad[27] == 118).count(), 4, "ABORT 118 each");
    assert_eq!(a.stats().drops.segmented_requests, 1 + 1 + 4);
}

#[test]
fn subscription_floods_are_capped_and_counted() {
    let snap = snapshot(1, swept().clone());
    let cfg = SaConfig { max_subscriptions_per_port: 3, max_subscriptions: 4, ..SaConfig::default() };
    let mut a = SaAgent::new(cfg, snap.master);
    a.new_snapshot(Duration::ZERO, snap);
    a.set_serving(Duration::ZERO, Serving::Master);
    let (_, host_lid) = other_host();
    let ok = (0..500u16).filter(|&t| fetch(&mut a, &query(0x02, &inform(t, true), 0, 0, host_lid)).status == 0).count();
    assert_eq!(ok, 3);
    // Traps 256-259 are denied to an untrusted requester before any cap.
    assert_eq!(a.stats().drops.subscription_cap, 497 - 4);
    let sm = sm_lid();
    let ok = (0..5u16).filter(|&t| fetch(&mut a, &query(0x02, &inform(t, true), 0, 0, sm)).status == 0).count();
    assert_eq!((ok, a.stats().subscriptions), (1, 4), "four in all");
}

// ---- Partitions: what an untrusted requester may see.

/// Four CA ports (GUID, LID) of the fixture besides the SM's: A a full
/// member of partition 0x10 only, B of 0x20 only, C and D limited members
/// of 0x10 only.
struct Isolated {
    snap: Arc<Snapshot>,
    a: (Guid, u16),
    b: (Guid, u16),
    c: (Guid, u16),
    d: (Guid, u16),
}

/// The fixture with partitions that isolate A, B, C and D ([`Isolated`]);
/// every other port (switch port 0, the SM's, the other hosts) is a full
/// member of the default partition only. The P_Key tables hold what the
/// SM would program; `with_set`: the snapshot carries the PartitionSet too
/// (else readers fall back on the tables).
fn isolated(with_set: bool) -> Isolated {
    use crate::partition::{Membership as M, PartitionSet, PortPartitions};
    let hosts = other_hosts();
    let (a, b, c, d) = (hosts[0], hosts[1], hosts[2], hosts[3]);
    let mut sweep = swept().clone();
    let mut set = PartitionSet::default();
    let subnet = &sweep.subnet;
    for (id, port) in subnet.lid_ports().collect::<Vec<_>>() {
        let g = subnet.node(id).port_guid(port);
        let members = match g {
            g if g == a.0 => vec![(0x10, M::Full)],
            g if g == b.0 => vec![(0x20, M::Full)],
            g if g == c.0 || g == d.0 => vec![(0x10, M::Limited)],
            _ => vec![(0x7fff, M::Full)],
        };
        let pp = PortPartitions { members, index0: None };
        let mut block = crate::mad::PKeyTableBlockRepr::default();
        for (i, k) in pp.pkeys().into_iter().enumerate() {
            block.pkeys[i] = k;
        }
        sweep.program.pkey_blocks.insert((subnet.node(id).guid(), port), vec![block]);
        set.ports.insert(g, pp);
    }
    let base = snapshot(1, sweep);
    let snap = Arc::new(Snapshot {
        sequence: 1,
        taken_at: SystemTime::UNIX_EPOCH,
        master: base.master,
        master_lid: base.master_lid,
        sweep: SweepReport { partitions: with_set.then(|| Arc::new(set)), ..base.sweep.clone() },
    });
    Isolated { snap, a, b, c, d }
}

fn agent_on(snap: Arc<Snapshot>) -> SaAgent {
    let mut a = SaAgent::new(SaConfig { sa_key: SA_KEY, ..SaConfig::default() }, snap.master);
    a.new_snapshot(Duration::ZERO, snap);
    a.set_serving(Duration::ZERO, Serving::Master);
    a
}

/// The port GUIDs of a NodeRecord GetTable from `lid`.
fn node_table(a: &mut SaAgent, lid: u16, key: u64) -> std::collections::BTreeSet<Guid> {
    let got = fetch(a, &query(0x12, &NodeRecordRepr::default(), 0, key, lid));
    assert_eq!(got.status, 0);
    got.parse::<NodeRecordRepr>().iter().map(|r| r.node_info.port_guid).collect()
}

#[test]
fn untrusted_requesters_see_only_the_ports_they_share_a_partition_with() {
    for with_set in [true, false] {
        let iso = isolated(with_set);
        let (a_, b_, c_, d_) = (iso.a, iso.b, iso.c, iso.d);
        let mut a = agent_on(iso.snap.clone());
        let label = if with_set { "PartitionSet" } else { "P_Key tables" };
        // A (full in 0x10) sees itself and the limited members C and D;
        // not B, not the switches, not the SM nor the other hosts.
        let seen = node_table(&mut a, a_.1, 0);
        assert_eq!(seen, [a_.0, c_.0, d_.0].into(), "{label}: A's NodeRecords");
        assert_eq!(node_table(&mut a, b_.1, 0), [b_.0].into(), "{label}: B alone in 0x20");
        // Two limited members do not see each other.
        assert_eq!(node_table(&mut a, c_.1, 0), [a_.0, c_.0].into(), "{label}: C's NodeRecords");
        // A Get of B's NodeRecord by LID, from A: no record.
        let by_lid = NodeRecordRepr { lid: Lid(b_.1), ..Default::default() };
        assert_eq!(sa_status_of(&fetch(&mut a, &query(0x01, &by_lid, node_mask::LID, 0, a_.1))), sa_status::NO_RECORDS);
        // Trusted: every port, and B's record by LID.
        let all = node_table(&mut a, a_.1, SA_KEY);
        assert_eq!(
            all.len(),
            fetch(&mut a, &query(0x12, &NodeRecordRepr::default(), 0, SA_KEY, sm_lid()))
                .parse::<NodeRecordRepr>()
                .len()
        );
        assert!(all.contains(&b_.0) && all.len() > 4, "{label}: the trusted table");
        assert_eq!(fetch(&mut a, &query(0x01, &by_lid, node_mask::LID, SA_KEY, a_.1)).status, 0);
        // A port of the default partition sees every port but the four.
        let others = node_table(&mut a, sm_lid(), 0);
        assert_eq!(others.len(), all.len() - 4, "{label}: the SM's view");
        assert!(![a_.0, b_.0, c_.0, d_.0].iter().any(|g| others.contains(g)));

        // LinkRecords from A: both directions of the cables of A, C and D
        // (a switch port facing a host is the host's); no inter-switch one.
        let links = fetch(&mut a, &query(0x12, &LinkRecordRepr::default(), 0, 0, a_.1)).parse::<LinkRecordRepr>();
        let lids = [a_.1, c_.1, d_.1];
        assert_eq!(links.len(), 6, "{label}: {links:?}");
        assert!(links.iter().all(|l| lids.contains(&l.from_lid.0) || lids.contains(&l.to_lid.0)));
        // PortInfoRecords: the three hosts' ports and the switch ports
        // facing them.
        let pirs =
            fetch(&mut a, &query(0x12, &PortInfoRecordRepr::default(), 0, 0, a_.1)).parse::<PortInfoRecordRepr>();
        assert_eq!(pirs.len(), 6, "{label}");
        // No switch, LFT or SM of the default partition for A.
        let sir = SwitchInfoRecordRepr::default();
        assert_eq!(fetch(&mut a, &query(0x12, &sir, 0, 0, a_.1)).parse::<SwitchInfoRecordRepr>().len(), 0);
        assert!(!fetch(&mut a, &query(0x12, &sir, 0, 0, sm_lid())).parse::<SwitchInfoRecordRepr>().is_empty());
        let lft = LftRecordRepr::default();
        assert_eq!(fetch(&mut a, &query(0x12, &lft, 0, 0, a_.1)).parse::<LftRecordRepr>().len(), 0);
        assert!(!fetch(&mut a, &query(0x12, &lft, 0, 0, sm_lid())).parse::<LftRecordRepr>().is_empty());
        let smi = SmInfoRecordRepr::default();
        assert_eq!(fetch(&mut a, &query(0x12, &smi, 0, 0, a_.1)).parse::<SmInfoRecordRepr>().len(), 0);
        assert_eq!(fetch(&mut a, &query(0x12, &smi, 0, 0, sm_lid())).parse::<SmInfoRecordRepr>().len(), 1);
        let gir = GuidInfoRecordRepr::default();
        let girs = fetch(&mut a, &query(0x12, &gir, 0, 0, a_.1)).parse::<GuidInfoRecordRepr>();
        assert_eq!(girs.iter().map(|r| r.lid.0).collect::<std::collections::BTreeSet<_>>(), lids.into());
        // A requester whose LID names no port sees none of them.
        assert!(node_table(&mut a, 0xBFFF, 0).is_empty());

        // ServiceRecords: A's service is seen by the ports A shares a
        // partition with (C) and by a trusted requester, not by B.
        let a_gid = {
            let mut g = [0u8; 16];
            g[..8].copy_from_slice(&0xfe80_0000_0000_0000u64.to_be_bytes());
            g[8..].copy_from_slice(&a_.0 .0.to_be_bytes());
            g
        };
        let svc = service(0x1000_0000_0000_00a1, a_gid, 0xFFFF_FFFF, 1);
        let set = fetch(&mut a, &query(0x02, &svc, service_mask::SERVICE_ID | service_mask::SERVICE_GID, 0, a_.1));
        assert_eq!(set.status, 0, "{label}: A registers its service");
        let services = |a: &mut SaAgent, lid: u16, key: u64| {
            fetch(a, &query(0x12, &ServiceRecordRepr::default(), 0, key, lid)).parse::<ServiceRecordRepr>().len()
        };
        assert_eq!(services(&mut a, a_.1, 0), 1, "{label}: A sees its own");
        assert_eq!(services(&mut a, c_.1, 0), 1, "{label}: C shares 0x10 with A");
        assert_eq!(services(&mut a, b_.1, 0), 0, "{label}: B shares nothing with A");
        assert_eq!(services(&mut a, b_.1, SA_KEY), 1, "{label}: trusted");
        let del = fetch(&mut a, &query(0x15, &svc, service_mask::SERVICE_ID | service_mask::SERVICE_GID, 0, a_.1));
        assert_eq!(del.status, 0);
        // InformInfoRecords likewise: A's subscription, seen by C, not B.
        assert_eq!(fetch(&mut a, &query(0x02, &inform(64, true), 0, 0, a_.1)).status, 0, "{label}: A subscribes");
        let subs = |a: &mut SaAgent, lid: u16, key: u64| {
            fetch(a, &query(0x12, &InformInfoRecordRepr::default(), 0, key, lid)).parse::<InformInfoRecordRepr>().len()
        };
        assert_eq!((subs(&mut a, c_.1, 0), subs(&mut a, b_.1, 0), subs(&mut a, b_.1, SA_KEY)), (1, 0, 1), "{label}");
        assert_eq!(fetch(&mut a, &query(0x02, &inform(64, false), 0, 0, a_.1)).status, 0, "{label}: A unsubscribes");

        // PathRecords: none between A and B (no shared P_Key, whoever
        // asks), none between the two limited members, one between A and C.
        let path = |s: u16, d: u16| PathRecordRepr { slid: s, dlid: d, ..Default::default() };
        let pm = path_mask::SLID | path_mask::DLID;
        for (from, key) in [(a_.1, 0), (a_.1, SA_KEY), (sm_lid(), SA_KEY)] {
            let got = fetch(&mut a, &query(0x01, &path(a_.1, b_.1), pm, key, from));
            assert_eq!(sa_status_of(&got), sa_status::NO_RECORDS, "{label}: A-B asked from {from}");
        }
        assert_eq!(sa_status_of(&fetch(&mut a, &query(0x01, &path(c_.1, d_.1), pm, 0, c_.1))), sa_status::NO_RECORDS);
        let table = fetch(&mut a, &query(0x12, &path(c_.1, d_.1), pm, 0, c_.1));
        assert_eq!((table.status, table.parse::<PathRecordRepr>().len()), (0, 0));
        let ac = fetch(&mut a, &query(0x01, &path(a_.1, c_.1), pm, 0, a_.1)).parse::<PathRecordRepr>();
        assert_eq!((ac.len(), ac[0].pkey), (1, 0x8010), "{label}: A's full key");
        let ca = fetch(&mut a, &query(0x01, &path(c_.1, a_.1), pm, 0, c_.1)).parse::<PathRecordRepr>();
        assert_eq!(ca[0].pkey, 0x0010, "C's limited key");
        // A third party: the SM (default partition) may not have A-C's
        // path untrusted, a trusted requester may.
        let from_sm = fetch(&mut a, &query(0x01, &path(a_.1, c_.1), pm, 0, sm_lid()));
        assert_eq!(sa_status_of(&from_sm), sa_status::NO_RECORDS, "{label}");
        assert_eq!(fetch(&mut a, &query(0x01, &path(a_.1, c_.1), pm, SA_KEY, sm_lid())).status, 0);
        // "From me to all": A reaches itself, C and D.
        let mine = fetch(&mut a, &query(0x12, &PathRecordRepr::default(), 0, 0, a_.1)).parse::<PathRecordRepr>();
        let dlids: std::collections::BTreeSet<u16> = mine.iter().map(|r| r.dlid).collect();
        assert_eq!(dlids, lids.into(), "{label}");
    }
}

/// Malformed RMPP at the SA (issue 22, bad input). An ACK granting a
/// window of 0 (NewWindowLast below the segment it ACKs) ends that answer
/// with an ABORT carrying "NewWindowLast too small", counted as failed;
/// the SA serves the next query as before.
#[test]
fn an_ack_with_a_window_of_zero_aborts_the_answer() {
    use crate::mad::rmpp::{RmppHeaderRepr, RmppStatus, RmppType};
    let mut a = agent();
    let table = query(0x12, &pir_key(), 0, 0, sm_lid());
    a.handle_mad(Duration::ZERO, &table);
    let first = a.poll_transmit(Duration::ZERO).expect("the first segment");
    assert_eq!(first.mad[26] & 0x07, 0x03, "active and first, not last");
    let mut ack = first.clone();
    ack.mad[3] = table.mad[3];
    RmppHeaderRepr::ack(1, 0).emit_bytes(&mut ack.mad).unwrap();
    a.handle_mad(Duration::ZERO, &ack);
    let out = drain(&mut a, Duration::ZERO);
    let abort =
        out.iter().map(|d| RmppHeaderRepr::parse_bytes(&d.mad).unwrap()).find(|h| h.rmpp_type == RmppType::Abort);
    assert_eq!(abort.map(|h| h.status), Some(RmppStatus::NewWindowLastTooSmall), "{out:?}");
    assert_eq!((a.stats().rmpp.failed, a.stats().rmpp.in_flight), (1, 0));
    // The next query is served.
    let whole = fetch_at(&mut a, &table, Duration::from_millis(1));
    assert_eq!(whole.parse::<PortInfoRecordRepr>().len(), a.records.as_ref().unwrap().port_info.len());
}

/// A multi-segment request whose segments come out of order: a segment
/// past a gap is not taken, the SA ACKs what it holds in order, and once
/// the missing segment and the rest come it answers once.
#[test]
fn a_request_segment_out_of_order_is_acked_back_to_the_gap() {
    use crate::mad::rmpp::{RmppHeaderRepr, RmppType};
    use crate::rmpp::{RmppConfig, RmppSender};
    let mut a = agent();
    let sm = sm_lid();
    let hosts: Vec<(Guid, u16)> = other_hosts().into_iter().take(4).collect();
    // Enough DGIDs (the same few, repeated) for three segments.
    let dgids: Vec<Guid> = (0..30).map(|i| hosts[i % hosts.len()].0).collect();
    let (template, payload) = multi_path_from_master(&dgids, 2, sm);
    let mut tx =
        RmppSender::new(Duration::ZERO, &template.mad[..SA_DATA_OFFSET], payload, RmppConfig::default()).unwrap();
    assert_eq!(tx.segments(), 3);
    let deliver = |a: &mut SaAgent, mad: Vec<u8>| {
        a.handle_mad(Duration::ZERO, &Datagram { addr: template.addr, mad });
        drain(a, Duration::ZERO)
    };
    let ack_of = |out: &[Datagram]| -> Vec<u32> {
        out.iter()
            .map(|d| RmppHeaderRepr::parse_bytes(&d.mad).unwrap())
            .filter(|h| h.rmpp_type == RmppType::Ack)
            .map(|h| h.data1)
            .collect()
    };
    // Segment 1 alone opens the window.
    let one = tx.poll_transmit(Duration::ZERO).unwrap();
    let out = deliver(&mut a, one);
    assert_eq!(ack_of(&out), vec![1]);
    tx.handle_mad(Duration::ZERO, &out[0].mad).unwrap();
    let two = tx.poll_transmit(Duration::ZERO).unwrap();
    let three = tx.poll_transmit(Duration::ZERO).unwrap();
    // 3 before 2: not taken, ACKed back to 1, nothing answered.
    let out = deliver(&mut a, three.clone());
    assert_eq!(ack_of(&out), vec![1], "the ACK names the last segment in order");
    assert_eq!(out.len(), 1, "no answer yet");
    assert_eq!(a.stats().rmpp.requests_received, 0);
    // 2, then 3 again: whole, answered once.
    assert_eq!(ack_of(&deliver(&mut a, two)), Vec::<u32>::new(), "2 is inside the window: no ACK of its own");
    let out = deliver(&mut a, three);
    assert_eq!(ack_of(&out), vec![3]);
    let answers: Vec<&Datagram> = out.iter().filter(|d| d.mad[3] == 0x94 && d.mad[25] != 2).collect();
    assert_eq!(answers.len(), 1, "{out:?}");
    assert_eq!(status_of(answers[0]), 0);
    assert_eq!(a.stats().rmpp.requests_received, 1);
    assert_eq!(a.stats().drops.segmented_requests, 0);
}

#[test]
fn a_get_answered_in_place_is_the_answer_handle_mad_queues_and_nothing_else_is_taken() {
    let (mut by_queue, mut in_place) = (agent(), agent());
    let sm = sm_lid();
    let (_, host_lid) = other_host();
    let path = PathRecordRepr { slid: sm, dlid: host_lid, ..Default::default() };
    let gets = [
        query(0x01, &path, path_mask::SLID | path_mask::DLID, 0, sm),
        // Too many records, an unknown GID, a NodeRecord, a bad SM_Key.
        query(0x01, &path, path_mask::SLID, 0, sm),
        query(
            0x01,
            &PathRecordRepr { dgid: [0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x99], ..path },
            path_mask::DGID,
            0,
            sm,
        ),
        request(0x01, 0x0011, 0, 0, &[], host_lid),
        request(0x01, 0x0011, 0, SA_KEY + 1, &[], host_lid),
    ];
    for q in &gets {
        assert!(SaAgent::is_get(&q.mad));
        by_queue.handle_mad(Duration::ZERO, q);
        let queued = drain(&mut by_queue, Duration::ZERO);
        let answered = in_place.answer_get(Duration::ZERO, q).expect("a Get is taken");
        assert_eq!(
            answered.iter().map(|d| &d.mad).collect::<Vec<_>>(),
            queued.iter().map(|d| &d.mad).collect::<Vec<_>>()
        );
        assert!(drain(&mut in_place, Duration::ZERO).is_empty(), "nothing left queued");
    }
    assert_eq!(in_place.stats().drops.bad_sm_key, 1);
    assert_eq!(in_place.stats().received, by_queue.stats().received);
    // A GetTable, a Set, a response and a sync MAD are handle_mad's.
    let others = [
        query(0x12, &path, path_mask::SLID, 0, sm),
        request(0x02, 0x0031, 0, 0, &[], host_lid),
        request(0x81, 0x0011, 0, 0, &[], host_lid),
        request(0x01, crate::mad::sm_sync::SM_SYNC_ATTRIBUTE, 0, 0, &[], host_lid),
    ];
    for q in &others {
        assert!(in_place.answer_get(Duration::ZERO, q).is_err(), "{:x?}", &q.mad[..4]);
    }
    assert_eq!(in_place.stats().received, by_queue.stats().received, "what is not taken is not counted");
}
