//! Whole SMs (runtime, election, sweeps) on one in-process fabric in
//! virtual time: tokio's clock is paused and the fabric runs on it
//! (`sim::VirtualTransport`), so the defaults (polls every 2 s, 4 misses)
//! and minutes of loss cost milliseconds. Failover, handover, two standbys,
//! and 1-10% MAD loss with no false takeover, judged from the fabric and by
//! SubnGet(SMInfo) from a third port.

use std::collections::HashMap;
use std::time::Duration;

use ibsm::config::Config;
use ibsm::mad::{AttributeId, Method, PortState, SmInfoRepr, SmState};
use ibsm::runtime::{run, RunOptions};
use ibsm::sim::{FabricBuilder, Match, Rule, SharedFabric, SimDevice, VirtualClock, VirtualTransport};
use ibsm::topology::{NodeIdx, NodeKind, PortRef, Topology};
use ibsm::transport::txn::TxnConfig;
use ibsm::transport::SmpClient;
use ibsm::types::Lid;

const TOPO: &str = "fattree2:radix=8,leaves=4,spines=2,hosts=4";

struct Net {
    topo: Topology,
    fabric: SharedFabric,
    clock: VirtualClock,
}

impl Net {
    fn new(seed: u64) -> Net {
        let topo = Topology::from_spec_or_file(TOPO).unwrap();
        let fabric = FabricBuilder::new(&topo).seed(seed).build_shared().unwrap();
        let clock = VirtualClock::new(&fabric);
        Net { topo, fabric, clock }
    }

    fn host(&self, i: usize) -> NodeIdx {
        self.topo.hosts().nth(i).unwrap()
    }

    /// An SM with the default election timers.
    fn start_sm(&self, host: usize, priority: u8) -> Sm {
        let node = self.host(host);
        let dev = SimDevice::attach(&self.fabric, node, 1).unwrap();
        dev.set_is_sm(true);
        let (transport, unsolicited) = VirtualTransport::spawn(dev, TxnConfig::default(), &self.clock);
        let mut config = Config::default();
        config.sm.priority = priority;
        let options = RunOptions { persist_lids: false, ..RunOptions::default() };
        let task = tokio::spawn(async move {
            let _ = run(transport, unsolicited, config, options, std::future::pending::<()>()).await;
        });
        Sm { task, port: PortRef { node, port: 1 } }
    }

    /// SM A (at `priority`, on host 0) once it has brought every port up.
    async fn master_up(&self, priority: u8) -> Sm {
        let a = self.start_sm(0, priority);
        wait_for("A brings the fabric up", Duration::from_secs(30), async || self.lids_if_up().is_some()).await;
        a
    }

    fn probe(&self, host: usize) -> SmpClient<VirtualTransport> {
        let dev = SimDevice::attach(&self.fabric, self.host(host), 1).unwrap();
        let (t, unsolicited) = VirtualTransport::spawn(dev, TxnConfig::default(), &self.clock);
        std::mem::forget(unsolicited);
        SmpClient::new(t)
    }

    async fn state(&self, probe: &SmpClient<VirtualTransport>, sm: PortRef) -> Option<SmState> {
        let lid = self.fabric.lock().unwrap().lid_of(sm).ok().filter(|l| l.is_unicast())?;
        let smp = probe.lid_get(lid, AttributeId::SmInfo, 0).await.ok()?;
        SmInfoRepr::parse_bytes(&smp.data).ok().map(|i| i.sm_state)
    }

    /// Every cabled port ACTIVE, and every LID-bearing port's LID.
    fn lids_if_up(&self) -> Option<HashMap<PortRef, Lid>> {
        let f = self.fabric.lock().unwrap();
        let mut out = HashMap::new();
        for link in &self.topo.links {
            for end in [link.a, link.b] {
                if f.port_state(end).ok()? != PortState::Active {
                    return None;
                }
                let lid_port = match self.topo.node(end.node).kind {
                    NodeKind::Switch => PortRef { node: end.node, port: 0 },
                    _ => end,
                };
                out.insert(lid_port, f.lid_of(lid_port).ok()?);
            }
        }
        Some(out)
    }

    fn programming_sets(&self) -> u64 {
        let f = self.fabric.lock().unwrap();
        f.smp_counts().iter().filter(|((a, m), _)| *m == Method::Set && *a != AttributeId::SmInfo).map(|(_, n)| n).sum()
    }
}

struct Sm {
    task: tokio::task::JoinHandle<()>,
    port: PortRef,
}

async fn kill(sm: Sm) {
    sm.task.abort();
    let _ = sm.task.await;
}

async fn wait_for(what: &str, limit: Duration, mut cond: impl AsyncFnMut() -> bool) -> Duration {
    let start = tokio::time::Instant::now();
    while start.elapsed() < limit {
        if cond().await {
            return start.elapsed();
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("waited {limit:?} (virtual) for {what}");
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn failover_with_the_default_timers_in_virtual_time() {
    let net = Net::new(21);
    let probe = net.probe(5);
    let a = net.master_up(5).await;
    let b = net.start_sm(15, 1);
    let bp = b.port;
    wait_for("B standby", Duration::from_secs(30), async || net.state(&probe, bp).await == Some(SmState::Standby))
        .await;
    // A minute of standby: only polls, no Set anywhere.
    let sets = net.programming_sets();
    tokio::time::sleep(Duration::from_secs(60)).await;
    assert_eq!(net.programming_sets(), sets, "a Set on a quiet fabric with a standby");
    let before = net.lids_if_up().expect("up");
    kill(a).await;
    let took =
        wait_for("B master", Duration::from_secs(60), async || net.state(&probe, bp).await == Some(SmState::Master))
            .await;
    let detection = Config::default().sm.election().detection_time();
    eprintln!("virtual failover with the defaults: B MASTER {took:?} after the kill (bound {detection:?})");
    assert!(took <= detection + Duration::from_secs(2), "{took:?} > {detection:?} + 2 s");
    wait_for("every port ACTIVE under B", Duration::from_secs(30), async || net.lids_if_up().is_some()).await;
    assert_eq!(net.lids_if_up().unwrap(), before, "no LID moved");
    kill(b).await;
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn handover_to_a_higher_priority_sm_has_no_gap_in_virtual_time() {
    let net = Net::new(22);
    let probe = net.probe(5);
    let a = net.master_up(1).await;
    let before = net.lids_if_up().unwrap();
    let b = net.start_sm(15, 9);
    let start = tokio::time::Instant::now();
    loop {
        let (sa, sb) = (net.state(&probe, a.port).await, net.state(&probe, b.port).await);
        if sb == Some(SmState::Master) && sa == Some(SmState::Standby) {
            break;
        }
        assert!(sa == Some(SmState::Master) || sb == Some(SmState::Master), "no master: A {sa:?}, B {sb:?}");
        assert!(start.elapsed() < Duration::from_secs(12), "no handover within a sweep interval + 2 s");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    eprintln!("virtual handover: done {:?} after B started", start.elapsed());
    wait_for("every port ACTIVE", Duration::from_secs(30), async || net.lids_if_up().is_some()).await;
    assert_eq!(net.lids_if_up().unwrap(), before);
    kill(a).await;
    kill(b).await;
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn of_two_standbys_exactly_one_takes_over_in_virtual_time() {
    let net = Net::new(23);
    let probe = net.probe(5);
    let a = net.master_up(9).await;
    let b = net.start_sm(10, 3);
    let c = net.start_sm(15, 3);
    let (bp, cp) = (b.port, c.port);
    wait_for("B and C standby", Duration::from_secs(30), async || {
        net.state(&probe, bp).await == Some(SmState::Standby) && net.state(&probe, cp).await == Some(SmState::Standby)
    })
    .await;
    kill(a).await;
    wait_for("a new master", Duration::from_secs(60), async || {
        net.state(&probe, bp).await == Some(SmState::Master) || net.state(&probe, cp).await == Some(SmState::Master)
    })
    .await;
    // Two minutes later still exactly one.
    for _ in 0..120 {
        tokio::time::sleep(Duration::from_secs(1)).await;
        let (sb, sc) = (net.state(&probe, bp).await, net.state(&probe, cp).await);
        let masters = [sb, sc].iter().filter(|s| **s == Some(SmState::Master)).count();
        assert_eq!(masters, 1, "B {sb:?}, C {sc:?}");
    }
    kill(b).await;
    kill(c).await;
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn one_to_ten_percent_loss_makes_no_false_takeover_in_virtual_time() {
    for (seed, loss) in [(31, 0.01), (32, 0.05), (33, 0.10)] {
        let net = Net::new(seed);
        let probe = net.probe(5);
        let a = net.master_up(5).await;
        let b = net.start_sm(15, 1);
        let bp = b.port;
        wait_for("B standby", Duration::from_secs(30), async || net.state(&probe, bp).await == Some(SmState::Standby))
            .await;
        let polls = net.fabric.lock().unwrap().smp_count(AttributeId::SmInfo, Method::Get);
        let sets = net.programming_sets();
        let rule = net.fabric.lock().unwrap().add_rule(Rule::drop_with(Match::any(), loss));
        // Ten virtual minutes of loss everywhere.
        tokio::time::sleep(Duration::from_secs(600)).await;
        net.fabric.lock().unwrap().remove_rule(rule);
        let polled = net.fabric.lock().unwrap().smp_count(AttributeId::SmInfo, Method::Get) - polls;
        assert!(polled >= 250, "loss {loss}: only {polled} polls");
        assert_eq!(net.state(&probe, bp).await, Some(SmState::Standby), "loss {loss}: false takeover");
        assert_eq!(
            net.state(&probe, a.port).await,
            Some(SmState::Master),
            "loss {loss}: the lossy master was pre-empted"
        );
        assert_eq!(net.programming_sets(), sets, "loss {loss}: the standby programmed");
        kill(a).await;
        kill(b).await;
    }
}
