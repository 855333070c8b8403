#![no_main]
//! The SA agent serving a real sweep, fed sequences of hostile MADs: it
//! never panics, and what it sends and counts stays consistent.
//!
//! # Input
//! Byte 0 picks the agent's "not serving" behaviour (bit 0: silent). The
//! rest is cut into 256-byte chunks, one operation each; a chunk's byte 0
//! is its opcode (bits 0-2) and flags (bits 3-7), and bytes 1-2, which a
//! forced header overwrites anyway, carry more choices:
//! - 0: the chunk as it is, a raw MAD, base version 1 (bit 4: byte 4)
//!   and from the requester byte 6 picks (bit 3: cut to byte 5's length);
//! - 1-3: a request: the chunk with base version 1, class 0x03, version 2
//!   (bit 3: byte 5's version), a method from `METHODS` by byte 3 (bit 7:
//!   byte 3 raw), a TID from `TIDS` by byte 8 (bit 4: raw), an attribute
//!   from `ATTRS` by byte 16 (byte 2 bit 6: raw), the requester from byte
//!   1; byte 2 picks SM_Key (0, the SA key, raw), ComponentMask (0, raw,
//!   its low 8 or 16 bits), keys planted from the fabric into the data
//!   (LID, PathRecord GIDs and LIDs, a GID) and whether the RMPP header and
//!   status stay raw (bit 7); bit 5 appends the next chunk as more data,
//!   as a reassembled RMPP request (one whole RMPP DATA segment);
//! - 4: an RMPP ACK/STOP/ABORT/DATA to a transfer (type by byte 25,
//!   segment by byte 31, NewWindowLast by byte 35; bit 5: both raw);
//! - 5: a trap the SM received (the Notice at byte 56; bit 3 plants a
//!   generic trap number from `TRAPS`);
//! - 6: time passes (bytes 1-2, ms), then `handle_timeout`;
//! - 7: jump to `poll_timeout`, or a new snapshot (the whole fabric or one
//!   with a host cable down), or a new serving state.
//!
//! After each operation the agent's output is drained (unless bit 6) and
//! every MAD checked; at the end timers run until every multi-MAD answer
//! has ended.
//!
//! # What is checked
//! Every MAD sent is 256 bytes (a one-MAD table answer may be cut to its
//! records, exactly as long as its PayloadLength says) of class 0x03,
//! base version 1, version 2 unless it echoes a BAD_VERSION/BUSY refusal.
//! A Report (IBA 13.4.8.2) carries a Notice, a TID with bit 31 set, QP1's
//! Q_Key, and goes to a fabric port on the QP a requester used; anything
//! else has the response bit set and goes to an address, TID and
//! attribute some MAD came from (PathRecord for MultiPathRecord, IBA
//! o15-0.2.7), with that request's response method unless it is an RMPP
//! control MAD. Answers carry SM_Key 0 (IBA C15-0.1.5); those that are not
//! echoes are RMPP exactly when they are GetTableResp/GetMultiResp.
//! Counters: `received` counts every MAD; MADs sent = `answered` +
//! `rmpp.segments`; RMPP started = completed + failed + in flight; query
//! errors = statuses counted (BUSY and BAD_VERSION aside), and every
//! counted status went out that often unless the queue overflowed; each
//! request is answered once (or dropped as a duplicate); Reports started
//! = queued - dropped at the cap; caps hold; after `handle_timeout(now)`
//! the next timeout is later than `now`.

use std::collections::{BTreeMap, HashSet};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, SystemTime};

use ibsm::config::SmConfig;
use ibsm::mad::NoticeRepr;
use ibsm::program::SubnetManager;
use ibsm::subnet::SweepReport;
use ibsm::subnet::snapshot::Snapshot;
use ibsm::sa::{NotServing, SaAgent, SaConfig, SaStats, Serving};
use ibsm::sim::{FabricBuilder, SimDevice};
use ibsm::topology::{PortRef, Topology};
use ibsm::transport::io_thread::MadTransport;
use ibsm::transport::txn::TxnConfig;
use ibsm::transport::{Datagram, MadAddress};
use ibsm::types::Lid;
use libfuzzer_sys::fuzz_target;

const SPEC: &str = "fattree2:radix=8,leaves=4,spines=2,hosts=4";
const SA_KEY: u64 = 0x5A;
const MAD: usize = 256;
const SA_DATA: usize = 56;

/// MAD status words the agent echoes (IBA 13.4.7, Table 107).
const BUSY: u16 = 0x0001;
const BAD_VERSION: u16 = 0x0004;
const METHOD_UNSUPPORTED: u16 = 0x0008;

/// SA methods (IBA 15.2.2, Table 190) and a few others.
const METHODS: [u8; 15] = [0x01, 0x02, 0x12, 0x15, 0x14, 0x03, 0x06, 0x86, 0x81, 0x13, 0x92, 0x07, 0x05, 0x94, 0x04];
const SERVED_METHODS: [u8; 5] = [0x01, 0x02, 0x12, 0x15, 0x14];
/// Every SA attribute (IBA 15.2.5, Table 194).
const ATTRS: [u16; 21] = [
    0x0001, 0x0002, 0x0003, 0x0011, 0x0012, 0x0013, 0x0014, 0x0015, 0x0016, 0x0017, 0x0018, 0x0020, 0x0030, 0x0031,
    0x0033, 0x0035, 0x0036, 0x0038, 0x0039, 0x003A, 0x00F3,
];
/// A few TIDs, so requests repeat and ACKs find their transfer: two share
/// the low 32 bits (the kernel owns the high ones), and Reports use
/// 0x8000_0000 upwards.
const TIDS: [u64; 8] = [1, 2, 3, 0xDEAD_0000_0000_0001, 0x8000_0000, 0x8000_0001, 0x8000_0002, 0xFFFF_FFFF_FFFF_FFFF];
/// Trap numbers (IBA 14.2.5.1, Table 264): 64-67 (SM), 128-131 and 144-145
/// (port events), 256-259 (security, for trusted subscribers only).
const TRAPS: [u16; 14] = [64, 65, 66, 67, 128, 129, 130, 131, 144, 145, 256, 257, 258, 259];

struct Fixture {
    /// The whole fabric swept, and swept again with one host cable down.
    full: Arc<Snapshot>,
    degraded: Arc<Snapshot>,
    /// LIDs and GIDs of the ports of both sweeps.
    lids: Vec<u16>,
    gids: Vec<[u8; 16]>,
}

fn snapshot(sequence: u64, sweep: SweepReport) -> Arc<Snapshot> {
    let (node, port) = sweep.subnet.sm_port.expect("the SM found its port");
    let master = sweep.subnet.node(node).port_guid(port);
    let master_lid = sweep.subnet.current_lid(node, port).expect("the SM has a LID");
    Arc::new(Snapshot { sequence, taken_at: SystemTime::UNIX_EPOCH, master, master_lid, sweep })
}

/// Sweeps the small fat tree once with ibsm's own SM (as src/sa/tests.rs
/// does), then again after a host cable went down.
fn fixture() -> &'static Fixture {
    static F: OnceLock<Fixture> = OnceLock::new();
    F.get_or_init(|| {
        let topo = Topology::from_spec_or_file(SPEC).unwrap();
        let fabric = FabricBuilder::new(&topo).seed(9).build_shared().unwrap();
        let hosts: Vec<_> = topo.hosts().collect();
        let dev = SimDevice::attach(&fabric, hosts[0], 1).unwrap();
        dev.set_is_sm(true);
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        let txn = TxnConfig { window: 16, timeout: Duration::from_millis(200), retries: 3, ..TxnConfig::default() };
        let (full, degraded) = rt.block_on(async {
            let (transport, _unsolicited) = MadTransport::spawn(dev, txn);
            let mut sm = SubnetManager::new(transport, SmConfig::default(), false);
            // No file: the default partition and its IPoIB broadcast group,
            // so joins meet a well-known group and partition checks.
            sm.load_partitions().unwrap();
            let full = sm.sweep().await.unwrap();
            assert!(full.subnet_up(), "the fixture fabric comes up");
            fabric.lock().unwrap().link_down(PortRef { node: hosts[5], port: 1 }).unwrap();
            let degraded = sm.sweep().await.unwrap();
            (full, degraded)
        });
        let (mut lids, mut gids) = (Vec::new(), Vec::new());
        for r in [&full, &degraded] {
            for (id, port) in r.subnet.lid_ports() {
                if let Some(lid) = r.subnet.current_lid(id, port) {
                    lids.push(lid.0);
                }
                let guid = r.subnet.node(id).port_guid(port).0;
                let mut gid = [0u8; 16];
                gid[..8].copy_from_slice(&0xFE80_0000_0000_0000u64.to_be_bytes());
                gid[8..].copy_from_slice(&guid.to_be_bytes());
                gids.push(gid);
            }
        }
        lids.sort_unstable();
        lids.dedup();
        gids.sort_unstable();
        gids.dedup();
        assert!(!lids.is_empty() && lids.len() < 64);
        Fixture { full: snapshot(1, full), degraded: snapshot(2, degraded), lids, gids }
    })
}

/// Small caps, so a short input reaches every one of them.
fn config(silent: bool) -> SaConfig {
    SaConfig {
        sa_key: SA_KEY,
        not_serving: if silent { NotServing::Silent } else { NotServing::Busy },
        max_rmpp_sends: 4,
        max_rmpp_sends_per_requester: 2,
        max_answer_bytes: 16 << 10,
        max_rmpp_bytes: 24 << 10,
        max_services_per_port: 3,
        max_services: 6,
        max_subscriptions_per_port: 3,
        max_subscriptions: 6,
        max_alias_guids_per_port: 5,
        max_alias_guids: 10,
        max_reports: 6,
        max_reports_per_subscriber: 3,
        max_queued: 12,
        ..SaConfig::default()
    }
}

fn be16(b: &[u8]) -> u16 {
    u16::from_be_bytes([b[0], b[1]])
}

fn be64(b: &[u8]) -> u64 {
    u64::from_be_bytes(b[..8].try_into().unwrap())
}

/// The response method to a request method (IBA 15.2.2: Set answers with
/// GetResp).
fn response_method(m: u8) -> u8 {
    if m == 0x02 {
        0x81
    } else {
        m | 0x80
    }
}

/// (LID, QPN, SL, P_Key index) of an address, the parts a Report keeps.
type Route = (u16, u32, u8, u16);

fn route(a: &MadAddress) -> Route {
    (a.lid.0, a.qpn, a.sl, a.pkey_index)
}

struct Harness {
    f: &'static Fixture,
    agent: SaAgent,
    cfg: SaConfig,
    now: Duration,
    fed: u64,
    /// (address, TID, attribute, response method) of every MAD fed.
    asked: HashSet<(Route, u32, u64, u16, u8)>,
    /// The same without the method, for RMPP control MADs.
    asked_any: HashSet<(Route, u32, u64, u16)>,
    /// (QPN, SL, P_Key index) requesters used.
    requester_qps: HashSet<(u32, u8, u16)>,
    sent: u64,
    /// Non-zero statuses of the non-control MADs sent.
    sent_status: BTreeMap<u16, u64>,
    report_resps: u64,
    left_master: bool,
}

impl Harness {
    fn addr(&self, sel: u8) -> MadAddress {
        let lids = &self.f.lids;
        let i = usize::from(sel & 0x1F) % (lids.len() + 3);
        let lid = lids.get(i).copied().unwrap_or_else(|| [0, 0xFFFF, 0xBEEF][i - lids.len()]);
        let qpn = [1, 1, 2, 0x00AB_CDEF][usize::from(sel >> 5 & 3)];
        MadAddress { lid: Lid(lid), qpn, qkey: MadAddress::QP1_QKEY, sl: sel >> 7, pkey_index: 0 }
    }

    fn feed(&mut self, d: &Datagram) {
        if d.mad.len() >= 24 {
            let (tid, attr) = (be64(&d.mad[8..16]), be16(&d.mad[16..18]));
            let r = route(&d.addr);
            // An answer to a MultiPathRecord query carries PathRecord
            // (IBA o15-0.2.7, as OpenSM); its refusals too.
            let answer_attr = if attr == 0x003A { 0x0035 } else { attr };
            for a in [attr, answer_attr] {
                self.asked.insert((r, d.addr.qkey, tid, a, response_method(d.mad[3])));
                self.asked_any.insert((r, d.addr.qkey, tid, a));
            }
            if d.mad[3] == 0x86 {
                self.report_resps += 1;
            }
        }
        self.requester_qps.insert((d.addr.qpn, d.addr.sl, d.addr.pkey_index));
        self.fed += 1;
        self.agent.handle_mad(self.now, d);
        self.check_stats(false);
    }

    fn timeout(&mut self) {
        self.agent.handle_timeout(self.now);
        if let Some(t) = self.agent.poll_timeout() {
            assert!(t > self.now, "handle_timeout({:?}) left a timeout at {t:?}", self.now);
        }
        self.check_stats(false);
    }

    fn drain(&mut self) {
        while let Some(d) = self.agent.poll_transmit(self.now) {
            self.check_out(&d);
            self.sent += 1;
            assert!(self.sent <= self.agent.stats().answered + self.agent.stats().rmpp.segments);
        }
        self.check_stats(true);
    }

    fn check_out(&mut self, d: &Datagram) {
        let m = &d.mad;
        if m.len() != MAD {
            // Only a one-MAD table answer may go out cut to its records,
            // as OpenSM sends them (the kernel pads it to 256 bytes); its
            // PayloadLength then says exactly how long it is.
            assert!((SA_DATA..MAD).contains(&m.len()), "a MAD of {} bytes", m.len());
            let table = m[3] == 0x92 || m[3] == 0x94;
            let single = m[24] == 1 && m[25] == 1 && m[26] & 0x07 == 0x07;
            let payload = u32::from_be_bytes(m[32..36].try_into().unwrap()) as usize;
            assert!(table && single && payload + 36 == m.len(), "a short MAD not a whole answer: {m:?}");
        }
        assert_eq!((m[0], m[1]), (1, 0x03), "base version 1, class SA");
        let (method, status, tid, attr) = (m[3], be16(&m[4..6]), be64(&m[8..16]), be16(&m[16..18]));
        let echo = status == BUSY || status == BAD_VERSION;
        let rmpp_active = m[26] & 1 != 0;
        let control = rmpp_active && m[25] != 1;
        if !echo {
            assert_eq!(m[2], 2, "class version 2");
        }
        if method == 0x06 {
            // A Report of ours (IBA 13.4.8.2): a Notice, TID bit 31 set.
            assert!(!rmpp_active && status == 0 && attr == 0x0002, "a Report");
            assert_ne!(tid as u32 & 0x8000_0000, 0, "Report TIDs keep bit 31");
            assert!(NoticeRepr::parse_bytes(&m[SA_DATA..]).is_ok());
            assert_eq!(d.addr.qkey, MadAddress::QP1_QKEY);
            assert!(self.f.lids.contains(&d.addr.lid.0), "Reports go to fabric ports: {:?}", d.addr);
            assert!(self.requester_qps.contains(&(d.addr.qpn, d.addr.sl, d.addr.pkey_index)));
            assert_eq!(be64(&m[36..44]), 0, "SM_Key 0");
            return;
        }
        assert_ne!(method & 0x80, 0, "the response bit: {method:#04x}");
        let r = route(&d.addr);
        if control {
            // An ACK of a dual-sided RMPP request, an ABORT of an answer,
            // or a BUSY/BAD_VERSION refusal echoing a requester's RMPP
            // header (not counted: an ACK may copy those statuses too).
            assert!(self.asked_any.contains(&(r, d.addr.qkey, tid, attr)), "RMPP control to a stranger: {d:?}");
            if !echo {
                assert_eq!(m[24], 1, "RMPP version 1");
            }
            return;
        }
        assert!(
            self.asked.contains(&(r, d.addr.qkey, tid, attr, method)),
            "an answer to nobody's request: {:?} tid {tid:#x} attr {attr:#06x} method {method:#04x}",
            d.addr
        );
        if status != 0 {
            *self.sent_status.entry(status).or_default() += 1;
        }
        assert_eq!(be64(&m[36..44]), 0, "the SA never sends an SM_Key (IBA C15-0.1.5)");
        if !echo {
            let table = method == 0x92 || method == 0x94;
            assert_eq!(rmpp_active, table, "only table answers are RMPP (method {method:#04x})");
            if rmpp_active {
                assert_eq!(m[24], 1, "RMPP version 1");
            } else {
                assert!(m[24..36].iter().all(|&b| b == 0), "no RMPP header in a one-MAD answer");
            }
        }
    }

    /// The counters agree with each other and with what went out
    /// (`drained`: nothing is left to send).
    fn check_stats(&self, drained: bool) {
        let s: &SaStats = self.agent.stats();
        assert_eq!(s.received, self.fed);
        assert!(s.rmpp.resent <= s.rmpp.segments);
        assert_eq!(s.rmpp.started, s.rmpp.completed + s.rmpp.failed + s.rmpp.in_flight, "{:?}", s.rmpp);
        assert!(s.rmpp.in_flight <= self.cfg.max_rmpp_sends as u64);
        assert!(s.services <= self.cfg.max_services as u64);
        assert!(s.subscriptions <= self.cfg.max_subscriptions as u64);
        assert!(s.alias_guids <= self.cfg.max_alias_guids as u64);
        let errors: u64 = s.by_query.values().map(|q| q.errors).sum();
        let ok: u64 = s.by_query.values().map(|q| q.ok).sum();
        let requests: u64 = s.by_query.values().map(|q| q.requests).sum();
        let statuses: u64 =
            s.by_status.iter().filter(|(k, _)| !matches!(**k, BUSY | BAD_VERSION)).map(|(_, v)| v).sum();
        assert_eq!(errors, statuses, "every refusal counts its status: {:?}", s.by_status);
        let unsupported = s.by_status.get(&METHOD_UNSUPPORTED).copied().unwrap_or(0);
        // Each request is answered once unless it repeats a transfer in
        // flight; unserved methods and segmented requests (when they get
        // past the serving and key checks) are refused without counting
        // as requests.
        let once = requests - s.drops.duplicate_requests + unsupported;
        assert!(
            once <= ok + errors && ok + errors <= once + s.drops.segmented_requests,
            "each request answered once: {:?} {:?}",
            s.by_query,
            s.drops
        );
        for (&(attr, method), q) in &s.by_query {
            // Unknown attributes and methods share one key.
            if (attr, method) != SaStats::OTHER_QUERY && !SERVED_METHODS.contains(&method) {
                assert_eq!((q.requests, q.ok), (0, 0), "method {method:#04x} is not served");
            }
        }
        let r = &s.reports;
        let started = r.queued - s.drops.report_cap - s.drops.report_subscriber_cap;
        assert_eq!(r.sent - r.resent, started, "{r:?}");
        assert!(r.acknowledged + r.given_up <= started, "{r:?}");
        assert!(r.acknowledged <= self.report_resps);
        if drained {
            assert_eq!(self.sent, s.answered + s.rmpp.segments, "every MAD sent is counted once");
            for (status, n) in &self.sent_status {
                assert!(*n <= s.by_status.get(status).copied().unwrap_or(0), "status {status:#06x} sent {n} times");
            }
            if s.drops.queue_full == 0 {
                for (status, n) in &s.by_status {
                    if !matches!(*status, BUSY | BAD_VERSION) {
                        assert_eq!(self.sent_status.get(status), Some(n), "status {status:#06x} counted, not sent");
                    }
                }
            }
        }
    }

    /// A request built from chunk `c` (see the module docs); `more`: the
    /// next chunk, for a long request.
    fn request(&self, c: &[u8], more: Option<&[u8]>) -> Datagram {
        let (op, sel) = (c[0], c[2]);
        let mut mad = c.to_vec();
        mad.resize(MAD, 0);
        mad[0] = 1;
        mad[1] = 0x03;
        mad[2] = if op & 0x08 != 0 { c[5] & 3 } else { 2 };
        let mraw = mad[3];
        mad[3] = if op & 0x80 != 0 { mraw } else { METHODS[usize::from(mraw) % METHODS.len()] };
        if op & 0x10 == 0 {
            let tid = TIDS[usize::from(mad[8] & 7)];
            mad[8..16].copy_from_slice(&tid.to_be_bytes());
        }
        if sel & 0x40 == 0 {
            let a = ATTRS[usize::from(mad[16]) % ATTRS.len()];
            mad[16..18].copy_from_slice(&a.to_be_bytes());
        }
        if sel & 0x80 == 0 {
            mad[4..8].fill(0);
            mad[24..36].fill(0);
        }
        match sel & 3 {
            1 => mad[36..44].copy_from_slice(&SA_KEY.to_be_bytes()),
            2 => {}
            _ => mad[36..44].fill(0),
        }
        let mask = be64(&mad[48..56]);
        let mask = match sel >> 2 & 3 {
            0 => 0,
            1 => mask,
            2 => mask & 0xFF,
            _ => mask & 0xFFFF,
        };
        mad[48..56].copy_from_slice(&mask.to_be_bytes());
        let f = self.f;
        let lid = |b: u8| f.lids[usize::from(b) % f.lids.len()].to_be_bytes();
        let gid = |b: u8| f.gids[usize::from(b) % f.gids.len()];
        let data = SA_DATA;
        match sel >> 4 & 3 {
            // The record's LID (NodeRecord, PortInfoRecord, ... at 0).
            1 => {
                let l = lid(mad[data]);
                mad[data..data + 2].copy_from_slice(&l);
            }
            // PathRecord: DGID 8, SGID 24, DLID 40, SLID 42 (IBA 15.2.5.16).
            2 => {
                let (dg, sg) = (gid(mad[data + 8]), gid(mad[data + 24]));
                let (dl, sl) = (lid(mad[data + 40]), lid(mad[data + 42]));
                mad[data + 8..data + 24].copy_from_slice(&dg);
                mad[data + 24..data + 40].copy_from_slice(&sg);
                mad[data + 40..data + 42].copy_from_slice(&dl);
                mad[data + 42..data + 44].copy_from_slice(&sl);
            }
            // A GID at 0 (InformInfo, and MultiPathRecord's first at 24).
            3 => {
                let g = gid(mad[data]);
                mad[data..data + 16].copy_from_slice(&g);
                let g = gid(mad[data + 24]);
                mad[data + 24..data + 40].copy_from_slice(&g);
            }
            _ => {}
        }
        if let Some(more) = more {
            // A reassembled RMPP request: one whole DATA segment's worth of
            // header, the data running past 256 bytes.
            mad.extend_from_slice(more);
            let payload = (mad.len() - 36) as u32;
            mad[24..28].copy_from_slice(&[1, 1, 0x1F << 3 | 0x07, 0]);
            mad[28..32].copy_from_slice(&1u32.to_be_bytes());
            mad[32..36].copy_from_slice(&payload.to_be_bytes());
        }
        Datagram { addr: self.addr(c[1]), mad }
    }

    /// An RMPP control MAD from a requester, for one of its transfers.
    fn rmpp_control(&self, c: &[u8]) -> Datagram {
        let op = c[0];
        let mut mad = c.to_vec();
        mad.resize(MAD, 0);
        mad[..3].copy_from_slice(&[1, 0x03, 2]);
        mad[3] = [0x12, 0x92, 0x14, 0x94, mad[3]][usize::from(mad[3]) % 5];
        let tid = TIDS[usize::from(mad[8] & 7)];
        mad[8..16].copy_from_slice(&tid.to_be_bytes());
        let a = ATTRS[usize::from(mad[16]) % ATTRS.len()];
        mad[16..18].copy_from_slice(&a.to_be_bytes());
        let rmpp_type = match mad[25] % 8 {
            0..=3 => 2,
            4 => 3,
            5 => 4,
            6 => 1,
            _ => mad[25],
        };
        if op & 0x08 == 0 {
            mad[24] = 1;
        }
        mad[25] = rmpp_type;
        mad[26] |= 1;
        if op & 0x10 == 0 {
            mad[27] = match rmpp_type {
                3 => 1,
                4 => 118 + mad[27] % 10,
                _ => 0,
            };
        }
        if op & 0x20 == 0 {
            let segment = u32::from(mad[31]);
            let nwl = segment + u32::from(mad[35] % 80);
            mad[28..32].copy_from_slice(&segment.to_be_bytes());
            mad[32..36].copy_from_slice(&nwl.to_be_bytes());
        }
        Datagram { addr: self.addr(c[1]), mad }
    }

    fn trap(&mut self, c: &[u8]) {
        let mut b = c.to_vec();
        b.resize(MAD, 0);
        let notice = &mut b[SA_DATA..SA_DATA + 80];
        if c[0] & 0x08 != 0 {
            notice[0] |= 0x80;
            let t = TRAPS[usize::from(notice[4]) % TRAPS.len()];
            notice[4..6].copy_from_slice(&t.to_be_bytes());
            let l = self.f.lids[usize::from(notice[6]) % self.f.lids.len()];
            notice[6..8].copy_from_slice(&l.to_be_bytes());
        }
        if let Ok(n) = NoticeRepr::parse_bytes(notice) {
            let from = self.addr(c[1]).lid;
            self.agent.handle_trap(self.now, &n, from);
            self.check_stats(false);
        }
    }

    fn admin(&mut self, c: &[u8]) {
        let (what, arg) = (c[1], c[2]);
        match what % 8 {
            4 | 5 => {
                let snap = if what % 8 == 4 { &self.f.full } else { &self.f.degraded };
                self.agent.new_snapshot(self.now, snap.clone());
                self.check_stats(false);
            }
            6 => {
                // Leaving MASTER drops the queue: send it first, so the
                // counts of what went out stay exact.
                self.drain();
                let s = [Serving::NotMaster, Serving::MasterNotSwept, Serving::Master][usize::from(arg) % 3];
                if s != Serving::Master && s != self.agent.serving() {
                    // Reports in flight are forgotten.
                    self.left_master = true;
                }
                self.agent.set_serving(self.now, s);
                self.check_stats(false);
            }
            _ => {
                if let Some(t) = self.agent.poll_timeout() {
                    self.now = self.now.max(t);
                }
                self.timeout();
            }
        }
    }

    /// Runs the timers until every multi-MAD answer and Report is over
    /// (leases may run longer): 40 s bounds an RMPP send, 4 s a Report.
    fn settle(&mut self) {
        self.drain();
        let until = self.now + Duration::from_secs(45);
        for _ in 0..10_000 {
            match self.agent.poll_timeout() {
                Some(t) if t <= until => {
                    self.now = self.now.max(t);
                    self.timeout();
                    self.drain();
                }
                _ => break,
            }
        }
        let s = self.agent.stats();
        assert_eq!(s.rmpp.in_flight, 0, "an RMPP send outlived its total timeout");
        if !self.left_master {
            let r = &s.reports;
            assert_eq!(
                r.acknowledged + r.given_up,
                r.queued - s.drops.report_cap - s.drops.report_subscriber_cap,
                "a Report neither answered nor given up: {r:?}"
            );
        }
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((&first, rest)) = data.split_first() else { return };
    let f = fixture();
    let cfg = config(first & 1 != 0);
    let mut agent = SaAgent::new(cfg.clone(), f.full.master);
    agent.new_snapshot(Duration::ZERO, f.full.clone());
    agent.set_serving(Duration::ZERO, Serving::Master);
    let mut h = Harness {
        f,
        agent,
        cfg,
        now: Duration::ZERO,
        fed: 0,
        asked: HashSet::new(),
        asked_any: HashSet::new(),
        requester_qps: HashSet::new(),
        sent: 0,
        sent_status: BTreeMap::new(),
        report_resps: 0,
        left_master: false,
    };
    let chunks: Vec<&[u8]> = rest.chunks(MAD).collect();
    let mut i = 0;
    while i < chunks.len() {
        let raw = chunks[i];
        i += 1;
        // Every operation reads a whole chunk; a raw MAD keeps its length.
        let mut padded = raw.to_vec();
        padded.resize(MAD, 0);
        let c = &padded[..];
        h.now += Duration::from_millis(1);
        let op = c[0];
        match op & 7 {
            0 => {
                // Byte 0 is the opcode, so the base version comes from byte
                // 4 (bit 4) or is 1.
                let mut mad = raw.to_vec();
                mad[0] = if op & 0x10 != 0 { c[4] } else { 1 };
                if op & 0x08 != 0 {
                    mad.truncate(usize::from(c[5]));
                }
                let d = Datagram { addr: h.addr(c[6]), mad };
                h.feed(&d);
            }
            1..=3 => {
                let more = if op & 0x20 != 0 && i < chunks.len() {
                    i += 1;
                    Some(chunks[i - 1])
                } else {
                    None
                };
                let d = h.request(c, more);
                h.feed(&d);
            }
            4 => {
                let d = h.rmpp_control(c);
                h.feed(&d);
            }
            5 => h.trap(c),
            6 => {
                let ms = be16(&c[1..3]);
                h.now += Duration::from_millis(u64::from(ms));
                h.timeout();
            }
            _ => h.admin(c),
        }
        if op & 0x40 == 0 {
            h.drain();
        }
    }
    h.settle();
});
