//! Whole SMs (runtime, election, sweeps) on one in-process fabric in
//! virtual time: tokio's clock is paused and the fabric runs on it
//! (`sim::VirtualTransport`), so the defaults (polls every 2 s, 4 misses)
//! and minutes of loss cost milliseconds. Failover, handover, two standbys,
//! and 1-10% MAD loss with no false takeover, judged from the fabric and by
//! SubnGet(SMInfo) from a third port.

mod sm_support;

use std::time::Duration;

use ibsm::config::Config;
use ibsm::mad::{AttributeId, Method, SmState};
use ibsm::sim::{Match, Rule, VirtualTransport};
use ibsm::topology::PortRef;
use ibsm::transport::SmpClient;
use sm_support::{kill, sm_state, Net, Sm};

/// An SM on `host` with the default election timers.
fn start_sm(net: &Net, host: usize, priority: u8) -> Sm {
    let mut config = Config::default();
    config.sm.priority = priority;
    net.start_sm(host, config, None)
}

/// SM A (at `priority`, on host 0) once it has brought every port up.
async fn master_up(net: &Net, priority: u8) -> Sm {
    let a = start_sm(net, 0, priority);
    wait_for("A brings the fabric up", Duration::from_secs(30), async || net.lids_if_up().is_some()).await;
    a
}

fn probe(net: &Net, host: usize) -> SmpClient<VirtualTransport> {
    let (t, unsolicited) = net.transport(host);
    std::mem::forget(unsolicited);
    SmpClient::new(t)
}

/// The SM state of the SM on `sm`, once its port has a LID.
async fn state(net: &Net, probe: &SmpClient<VirtualTransport>, sm: PortRef) -> Option<SmState> {
    let lid = net.fabric.lock().unwrap().lid_of(sm).ok().filter(|l| l.is_unicast())?;
    sm_state(probe, lid).await
}

fn programming_sets(net: &Net) -> u64 {
    sm_support::programming_sets(&net.fabric)
}

async fn wait_for(what: &str, limit: Duration, cond: impl AsyncFnMut() -> bool) -> Duration {
    sm_support::wait_every(Duration::from_millis(50), what, limit, cond).await
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn failover_with_the_default_timers_in_virtual_time() {
    let net = Net::new(21);
    let probe = probe(&net, 5);
    let a = master_up(&net, 5).await;
    let b = start_sm(&net, 15, 1);
    let bp = b.port;
    wait_for("B standby", Duration::from_secs(30), async || state(&net, &probe, bp).await == Some(SmState::Standby))
        .await;
    // A minute of standby: only polls, no Set anywhere.
    let sets = programming_sets(&net);
    tokio::time::sleep(Duration::from_secs(60)).await;
    assert_eq!(programming_sets(&net), sets, "a Set on a quiet fabric with a standby");
    let before = net.lids_if_up().expect("up");
    kill(a).await;
    let took =
        wait_for("B master", Duration::from_secs(60), async || state(&net, &probe, bp).await == Some(SmState::Master))
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
    let probe = probe(&net, 5);
    let a = master_up(&net, 1).await;
    let before = net.lids_if_up().unwrap();
    let b = start_sm(&net, 15, 9);
    let start = tokio::time::Instant::now();
    loop {
        let (sa, sb) = (state(&net, &probe, a.port).await, state(&net, &probe, b.port).await);
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
    let probe = probe(&net, 5);
    let a = master_up(&net, 9).await;
    let b = start_sm(&net, 10, 3);
    let c = start_sm(&net, 15, 3);
    let (bp, cp) = (b.port, c.port);
    wait_for("B and C standby", Duration::from_secs(30), async || {
        state(&net, &probe, bp).await == Some(SmState::Standby)
            && state(&net, &probe, cp).await == Some(SmState::Standby)
    })
    .await;
    kill(a).await;
    wait_for("a new master", Duration::from_secs(60), async || {
        state(&net, &probe, bp).await == Some(SmState::Master) || state(&net, &probe, cp).await == Some(SmState::Master)
    })
    .await;
    // Two minutes later still exactly one.
    for _ in 0..120 {
        tokio::time::sleep(Duration::from_secs(1)).await;
        let (sb, sc) = (state(&net, &probe, bp).await, state(&net, &probe, cp).await);
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
        let probe = probe(&net, 5);
        let a = master_up(&net, 5).await;
        let b = start_sm(&net, 15, 1);
        let bp = b.port;
        wait_for("B standby", Duration::from_secs(30), async || {
            state(&net, &probe, bp).await == Some(SmState::Standby)
        })
        .await;
        let polls = net.fabric.lock().unwrap().smp_count(AttributeId::SmInfo, Method::Get);
        let sets = programming_sets(&net);
        let rule = net.fabric.lock().unwrap().add_rule(Rule::drop_with(Match::any(), loss));
        // Ten virtual minutes of loss everywhere.
        tokio::time::sleep(Duration::from_secs(600)).await;
        net.fabric.lock().unwrap().remove_rule(rule);
        let polled = net.fabric.lock().unwrap().smp_count(AttributeId::SmInfo, Method::Get) - polls;
        assert!(polled >= 250, "loss {loss}: only {polled} polls");
        assert_eq!(state(&net, &probe, bp).await, Some(SmState::Standby), "loss {loss}: false takeover");
        assert_eq!(
            state(&net, &probe, a.port).await,
            Some(SmState::Master),
            "loss {loss}: the lossy master was pre-empted"
        );
        assert_eq!(programming_sets(&net), sets, "loss {loss}: the standby programmed");
        kill(a).await;
        kill(b).await;
    }
}
