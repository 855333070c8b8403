//! The SA's whole tables on a 648-host fat tree, in-process (issue 9,
//! items 2 and 5): ibsm's whole runtime on one port of the simulated
//! fabric, in virtual time, and its own SA client on another port reading
//! the NodeRecord and PortInfoRecord tables with one GetTable each (about
//! 390 and 960 RMPP segments), judged against the fabric itself; then the
//! same with 5% of the SA's answers lost on the way (RMPP resends what is
//! missing), and a short PathRecord flood with nothing lost.

use std::collections::BTreeMap;
use std::time::Duration;

use ibsm::cmd::sa::{flood, FloodKind, FloodPlan};
use ibsm::config::Config;
use ibsm::mad::sa::{NodeRecordRepr, PortInfoRecordRepr};
use ibsm::mad::{MgmtClass, NodeType};
use ibsm::runtime::{run, RunOptions};
use ibsm::sim::{Direction, FabricBuilder, Match, Rule, SharedFabric, SimDevice, VirtualClock, VirtualTransport};
use ibsm::subnet::snapshot::Snapshots;
use ibsm::topology::{NodeKind, PortRef, Topology};
use ibsm::transport::sa_client::SaClient;
use ibsm::transport::txn::TxnConfig;

/// 36 leaves of 18 hosts, 18 spines: 702 nodes, 2646 ports.
const FT648: &str = "fattree2:radix=36,leaves=36,spines=18,hosts=18";

async fn wait_for(what: &str, limit: Duration, mut cond: impl FnMut() -> bool) {
    let start = tokio::time::Instant::now();
    while !cond() {
        assert!(start.elapsed() < limit, "waited {limit:?} (virtual) for {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The SM on the first host, up; a client on the last host.
async fn up(topo: &Topology, seed: u64) -> (SharedFabric, SaClient<VirtualTransport>) {
    let fabric = FabricBuilder::new(topo).seed(seed).build_shared().unwrap();
    let clock = VirtualClock::new(&fabric);
    let sm_node = topo.hosts().next().unwrap();
    let dev = SimDevice::attach(&fabric, sm_node, 1).unwrap();
    dev.set_is_sm(true);
    let (transport, unsolicited) = VirtualTransport::spawn(dev, TxnConfig::default(), &clock);
    let snapshots = Snapshots::new();
    let options = RunOptions { persist_lids: false, snapshots: snapshots.clone(), ..RunOptions::default() };
    tokio::spawn(async move {
        let _ = run(transport, unsolicited, Config::default(), options, std::future::pending::<()>()).await;
    });
    wait_for("SUBNET UP", Duration::from_secs(120), || snapshots.latest().is_some_and(|s| s.sweep.subnet_up())).await;

    // The client's port learns its SM LID when it is opened: after the
    // sweep that set it.
    let cdev = SimDevice::attach(&fabric, topo.hosts().last().unwrap(), 1).unwrap();
    let (ct, unsolicited) = VirtualTransport::spawn(cdev, TxnConfig::default(), &clock);
    std::mem::forget(unsolicited);
    (fabric, SaClient::new(ct).expect("the client's port names the SM"))
}

/// Every node's NodeRecord: LID, type, ports, GUIDs, description, as the
/// fabric has them.
fn check_nodes(topo: &Topology, fabric: &SharedFabric, records: &[NodeRecordRepr]) {
    assert_eq!(records.len(), topo.nodes.len(), "one NodeRecord per node");
    let by_guid: BTreeMap<u64, &NodeRecordRepr> = records.iter().map(|r| (r.node_info.node_guid.0, r)).collect();
    assert_eq!(by_guid.len(), records.len(), "no node twice");
    let f = fabric.lock().unwrap();
    for (i, n) in topo.nodes.iter().enumerate() {
        let r = by_guid.get(&n.node_guid.0).unwrap_or_else(|| panic!("no NodeRecord for {}", n.name));
        let (port, ty) = match n.kind {
            NodeKind::Switch => (0, NodeType::Switch),
            _ => (1, NodeType::Ca),
        };
        let lid = f.lid_of(PortRef { node: ibsm::topology::NodeIdx(i), port }).unwrap();
        assert_eq!(r.lid, lid, "{}'s LID", n.name);
        assert_eq!(r.node_info.node_type, ty, "{}", n.name);
        assert_eq!(r.node_info.num_ports, n.num_ports, "{}", n.name);
        assert_eq!(r.node_info.port_guid, n.port_guid(port), "{}", n.name);
        assert_eq!(r.node_description.text, n.description, "{}", n.name);
    }
}

/// Every port's PortInfoRecord (a switch's port 0 to its last, a CA's
/// ports): the state and LID the fabric's port holds.
fn check_ports(topo: &Topology, fabric: &SharedFabric, records: &[PortInfoRecordRepr]) {
    let f = fabric.lock().unwrap();
    let mut want = BTreeMap::new();
    for (i, n) in topo.nodes.iter().enumerate() {
        let first = if n.kind == NodeKind::Switch { 0 } else { 1 };
        for port in first..=n.num_ports {
            let r = PortRef { node: ibsm::topology::NodeIdx(i), port };
            let lid = f.lid_of(r).unwrap();
            let pi = f.port_info(r).unwrap();
            want.insert((lid.0, port), (pi.port_state, pi.lid));
        }
    }
    let got: BTreeMap<(u16, u8), _> =
        records.iter().map(|r| ((r.endport_lid.0, r.port_num), (r.port_info.port_state, r.port_info.lid))).collect();
    assert_eq!(records.len(), want.len(), "one PortInfoRecord per port");
    assert_eq!(got, want, "each port's state and LID");
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn whole_tables_of_a_648_host_fabric_with_and_without_loss() {
    let topo = Topology::from_spec_or_file(FT648).unwrap();
    assert_eq!((topo.hosts().count(), topo.nodes.len()), (648, 702));
    let (fabric, client) = up(&topo, 31).await;

    let t0 = tokio::time::Instant::now();
    let nodes: Vec<NodeRecordRepr> = client.get_table(0, &NodeRecordRepr::default()).await.unwrap();
    let ports: Vec<PortInfoRecordRepr> = client.get_table(0, &PortInfoRecordRepr::default()).await.unwrap();
    eprintln!("{} NodeRecords, {} PortInfoRecords in {:.2?} (virtual)", nodes.len(), ports.len(), t0.elapsed());
    check_nodes(&topo, &fabric, &nodes);
    check_ports(&topo, &fabric, &ports);
    assert_eq!(ports.len(), 648 + 54 * 37);

    // 5% of everything the SA's port answers is lost: segments (and a
    // first segment, which the request's retries cover) go missing, the
    // sender resends after its timeout, the tables come out the same.
    let sm_node = topo.hosts().next().unwrap();
    let lossy = fabric.lock().unwrap().add_rule(Rule::drop_with(
        Match::any().class(MgmtClass::SubnAdm).node(sm_node).direction(Direction::Response),
        0.05,
    ));
    let t0 = tokio::time::Instant::now();
    let again: Vec<NodeRecordRepr> = client.get_table(0, &NodeRecordRepr::default()).await.unwrap();
    let ports_again: Vec<PortInfoRecordRepr> = client.get_table(0, &PortInfoRecordRepr::default()).await.unwrap();
    eprintln!("with 5% of the SA's answers lost: both tables again in {:.2?} (virtual)", t0.elapsed());
    assert_eq!(again, nodes, "the NodeRecord table through a lossy path");
    assert_eq!(ports_again, ports, "the PortInfoRecord table through a lossy path");
    fabric.lock().unwrap().remove_rule(lossy);

    // A PathRecord flood from the client: 32 in flight for 5 s (virtual),
    // every query answered.
    let lids: Vec<u16> = {
        let f = fabric.lock().unwrap();
        topo.hosts().map(|h| f.lid_of(PortRef { node: h, port: 1 }).unwrap().0).collect()
    };
    let pairs: Vec<(u16, u16)> =
        lids.iter().zip(lids.iter().rev()).map(|(&a, &b)| (a, b)).filter(|(a, b)| a != b).collect();
    let plan = FloodPlan {
        kind: FloodKind::Path,
        pairs,
        duration: Duration::from_secs(5),
        concurrency: 32,
        pace: None,
        each_once: false,
    };
    let report = flood(&client, &plan).await;
    eprintln!("{}", report.render(false).trim());
    assert!(report.answered > 0 && report.sent == report.answered, "{report:?}");
    assert_eq!((report.lost, report.errors), (0, 0), "{report:?}");
    // Each pair once, as an MPI job's start asks: exactly the pairs, every
    // one answered, well before the cap.
    let once = FloodPlan { each_once: true, duration: Duration::from_secs(600), ..plan.clone() };
    let report = flood(&client, &once).await;
    let asked = once.pairs.len() as u64;
    assert_eq!((report.sent, report.answered, report.lost), (asked, asked, 0), "{report:?}");
    assert!(report.elapsed_s < 600.0, "{report:?}");
}
