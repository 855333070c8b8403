//! The SA core driven with snapshots of real sweeps of the in-process
//! fabric: every MAD in is a byte buffer a requester could send, every
//! answer is read back from the bytes the agent emits.

use std::sync::{Arc, OnceLock};
use std::time::{Duration, SystemTime};

use super::*;
use crate::config::SmConfig;
use crate::mad::sa::{SaMad, SA_DATA_OFFSET};
use crate::mad::{MadHeader, MAD_SIZE};
use crate::program::{SubnetManager, SweepReport};
use crate::runtime::snapshot::Snapshot;
use crate::sim::{FabricBuilder, SimDevice};
use crate::topology::Topology;
use crate::transport::io_thread::MadTransport;
use crate::transport::txn::TxnConfig;
use crate::transport::MadAddress;

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
    let r = ask(&mut a, &request(0x03, 0x0011, 0, 0, &[], 5));
    assert_eq!(status_of(&r), 0x0008, "Send is no SA method");
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

proptest::proptest! {
    #[test]
    fn arbitrary_bytes_never_panic(
        bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..400),
        attr in proptest::prelude::any::<u16>(),
        method in proptest::prelude::any::<u8>(),
    ) {
        let mut a = agent();
        a.handle_mad(Duration::ZERO, &Datagram { addr: MadAddress::gsi(Lid(3), 0), mad: bytes.clone() });
        // The same bytes behind a valid SA header, so they reach the
        // record handlers.
        let mut mad = request(method, attr, 0, 0, &[], 3).mad;
        let n = bytes.len().min(MAD_SIZE - 36);
        mad[36..36 + n].copy_from_slice(&bytes[..n]);
        if bytes.len() > 256 {
            mad.extend_from_slice(&bytes[256..]);
        }
        a.handle_mad(Duration::ZERO, &Datagram { addr: MadAddress::gsi(Lid(3), 0), mad });
        a.handle_timeout(Duration::from_secs(1));
        let _ = drain(&mut a, Duration::from_secs(1));
    }
}
