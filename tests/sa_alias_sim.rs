//! Alias GUIDs end to end, the whole runtime on the in-process fabric in
//! virtual time: a host sets an alias GUID for its own port through
//! SubnAdmSet(GUIDInfoRecord); within a second the SM has written it into
//! the port's GUIDInfo (a SubnGet of the port shows it) without a sweep,
//! and another host's PathRecord Get to the alias GID finds the port.
//! Deleting the alias clears the port's entry, and the alias GID is then
//! unknown to the SA.

use std::time::Duration;

use ibsm::config::Config;
use ibsm::mad::sa::{guid_info_mask, path_mask, sa_status, GuidInfoRecordRepr, PathRecordRepr, SA_DATA_OFFSET};
use ibsm::mad::{AttributeId, GuidInfoBlockRepr, Method, PortState, SaRecord, SmpAttribute};
use ibsm::runtime::{run, RunOptions};
use ibsm::sim::{FabricBuilder, SharedFabric, SimDevice, VirtualClock, VirtualTransport};
use ibsm::topology::{NodeIdx, PortRef, Topology};
use ibsm::transport::txn::TxnConfig;
use ibsm::transport::{Datagram, MadAddress, SmpClient, Transport};
use ibsm::types::{Guid, Lid};

const TOPO: &str = "fattree2:radix=8,leaves=4,spines=2,hosts=4";
const SM_HOST: usize = 0;
/// The host whose port gets the alias (it sets it itself: no SA key).
const VPORT_HOST: usize = 5;
/// Reads GUIDInfo and asks for PathRecords.
const PROBE_HOST: usize = 6;
const ALIAS: u64 = 0x0002_c903_00ab_cd01;

struct Net {
    topo: Topology,
    fabric: SharedFabric,
    clock: VirtualClock,
}

impl Net {
    fn host(&self, i: usize) -> PortRef {
        let node: NodeIdx = self.topo.hosts().nth(i).unwrap();
        PortRef { node, port: 1 }
    }

    fn transport(&self, host: usize) -> VirtualTransport {
        let dev = SimDevice::attach(&self.fabric, self.host(host).node, 1).unwrap();
        VirtualTransport::spawn(dev, TxnConfig::default(), &self.clock).0
    }

    fn all_active(&self) -> bool {
        let f = self.fabric.lock().unwrap();
        self.topo.links.iter().all(|l| [l.a, l.b].iter().all(|&e| f.port_state(e).ok() == Some(PortState::Active)))
    }

    fn count(&self, attr: AttributeId, method: Method) -> u64 {
        self.fabric.lock().unwrap().smp_count(attr, method)
    }
}

/// An SA request MAD (IBA 15.2.1.1): `method` of `R`, `rec`'s bytes.
fn sa_request<R: SaRecord>(to: Lid, method: u8, mask: u64, rec: &R) -> Datagram {
    let mad = ibsm::transport::sa_client::request_mad(Method::from(method), 0, mask, rec).unwrap();
    Datagram { addr: MadAddress::gsi(to, 0), mad }
}

/// The answer's SA status code and its first record.
async fn ask<R: SaRecord>(t: &VirtualTransport, method: u8, mask: u64, rec: &R) -> (u16, R) {
    let sm = t.local_port().sm_lid;
    let answer = t.request(sa_request(sm, method, mask, rec)).await.unwrap();
    let status = u16::from_be_bytes([answer.mad[4], answer.mad[5]]);
    let r = R::parse_bytes(&answer.mad[SA_DATA_OFFSET..SA_DATA_OFFSET + R::LEN]).unwrap();
    (sa_status::code(status), r)
}

fn alias_gid() -> [u8; 16] {
    let mut g = [0u8; 16];
    g[..8].copy_from_slice(&0xfe80_0000_0000_0000u64.to_be_bytes());
    g[8..].copy_from_slice(&ALIAS.to_be_bytes());
    g
}

async fn block0(probe: &SmpClient<VirtualTransport>, lid: Lid) -> GuidInfoBlockRepr {
    let smp = probe.lid_get(lid, AttributeId::GuidInfo, 0).await.unwrap();
    GuidInfoBlockRepr::parse_data(&smp.data).unwrap()
}

/// Virtual time until `cond`, at most `limit`.
async fn within(what: &str, limit: Duration, mut cond: impl AsyncFnMut() -> bool) -> Duration {
    let start = tokio::time::Instant::now();
    while start.elapsed() <= limit {
        if cond().await {
            return start.elapsed();
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("{what}: not within {limit:?} (virtual)");
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn an_alias_set_through_the_sa_reaches_the_port_and_its_paths() {
    let topo = Topology::from_spec_or_file(TOPO).unwrap();
    let fabric = FabricBuilder::new(&topo).seed(11).build_shared().unwrap();
    let clock = VirtualClock::new(&fabric);
    let net = Net { topo, fabric, clock };
    let dev = SimDevice::attach(&net.fabric, net.host(SM_HOST).node, 1).unwrap();
    dev.set_is_sm(true);
    let (transport, unsolicited) = VirtualTransport::spawn(dev, TxnConfig::default(), &net.clock);
    let options = RunOptions { persist_lids: false, ..RunOptions::default() };
    let sm = tokio::spawn(run(transport, unsolicited, Config::default(), options, std::future::pending::<()>()));
    within("bring-up", Duration::from_secs(30), async || net.all_active()).await;
    // Let the follow-up sweeps of bring-up settle.
    tokio::time::sleep(Duration::from_secs(3)).await;

    let vport = net.transport(VPORT_HOST);
    let probe_t = net.transport(PROBE_HOST);
    let probe = SmpClient::new(probe_t.clone());
    let me = vport.local_port();
    let vport_lid = me.lid;
    assert!(me.sm_lid.is_unicast());
    assert_eq!(block0(&probe, vport_lid).await.guids[..2], [me.port_guid, Guid(0)]);

    // Before: the alias GID is nobody's.
    let to_alias = PathRecordRepr { dgid: alias_gid(), ..Default::default() };
    let (status, _) = ask(&probe_t, 0x01, path_mask::DGID, &to_alias).await;
    assert_eq!(status, sa_status::INVALID_GID);

    // The vPort's host asks for the alias at index 1.
    let node_info_before = net.count(AttributeId::NodeInfo, Method::Get);
    let mut rec = GuidInfoRecordRepr { lid: vport_lid, block_num: 0, ..Default::default() };
    rec.guid_info.guids[1] = Guid(ALIAS);
    let mask = guid_info_mask::LID | guid_info_mask::BLOCK_NUM | guid_info_mask::guid(1);
    let (status, answer) = ask(&vport, 0x02, mask, &rec).await;
    assert_eq!((status, answer.guid_info.guids[0], answer.guid_info.guids[1]), (0, me.port_guid, Guid(ALIAS)));

    let took = within("the alias in the port's GUIDInfo", Duration::from_secs(1), async || {
        block0(&probe, vport_lid).await.guids[1] == Guid(ALIAS)
    })
    .await;
    eprintln!("alias programmed {took:?} after the SA answered");
    assert_eq!(net.count(AttributeId::GuidInfo, Method::Set), 1, "one block, once");
    assert_eq!(net.count(AttributeId::NodeInfo, Method::Get), node_info_before, "no sweep for it");

    // A PathRecord to the alias GID: the vPort's port, the GID as asked.
    let (status, path) = ask(&probe_t, 0x01, path_mask::DGID, &to_alias).await;
    assert_eq!((status, path.dlid, path.dgid), (0, vport_lid.0, alias_gid()));
    assert_eq!(path.slid, probe_t.local_port().lid.0);

    // Deleted: the entry goes back to 0 and the GID is unknown again.
    let (status, answer) = ask(&vport, 0x15, mask, &rec).await;
    assert_eq!((status, answer.guid_info.guids[1]), (0, Guid(0)));
    within("the alias gone from the port", Duration::from_secs(1), async || {
        block0(&probe, vport_lid).await.guids[1] == Guid(0)
    })
    .await;
    assert_eq!(net.count(AttributeId::GuidInfo, Method::Set), 2);
    let (status, _) = ask(&probe_t, 0x01, path_mask::DGID, &to_alias).await;
    assert_eq!(status, sa_status::INVALID_GID);
    assert_eq!(block0(&probe, vport_lid).await.guids[0], me.port_guid, "the port GUID stays");

    sm.abort();
    let _ = sm.await;
}
