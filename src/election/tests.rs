//! Several election cores on a model fabric in virtual time: discoveries,
//! polls and SMInfo Sets travel with seeded loss and fixed delays, SMs are
//! killed and revived, and invariants are checked at every step (never two
//! masters programming at once). A failing scenario prints its seed.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::time::Duration;

use rand::{Rng, SeedableRng};

use super::*;
use crate::mad::{SmControl, SmInfoRepr, SmState};
use crate::types::{Guid, Lid};

const MS: Duration = Duration::from_millis(1);
/// One attempt's wait and the attempts of a transaction (the SM's defaults).
const ATTEMPT: Duration = Duration::from_millis(200);
const ATTEMPTS: u32 = 4;
const RTT: Duration = Duration::from_millis(2);
const DISCOVERY: Duration = Duration::from_millis(400);
const PROGRAMMING: Duration = Duration::from_millis(300);

#[derive(Debug)]
enum Delivery {
    Event(usize, Event),
    /// Handle a control at the receiver, then tell the sender how it went.
    Control {
        to: usize,
        from: usize,
        control: SmControl,
        from_info: SmInfoRepr,
    },
    TakeChargeDone(usize),
}

struct Sm {
    core: Election,
    alive: bool,
    /// Our own port is up.
    port_up: bool,
    /// The SM's incarnation: events for an earlier one are dropped.
    life: u32,
    take_charges: Vec<(Duration, bool)>,
    changes: Vec<(Duration, State, State)>,
    reports: Vec<ElectionError>,
}

struct World {
    now: Duration,
    sms: Vec<Sm>,
    queue: BinaryHeap<Reverse<(Duration, u64, usize)>>,
    pending: Vec<Option<(u32, Delivery)>>,
    seq: u64,
    loss: f64,
    rng: rand_chacha::ChaCha8Rng,
    seed: u64,
    /// Per SM: when a TakeCharge started and ends.
    programming: Vec<Option<Duration>>,
}

fn guid(i: usize) -> Guid {
    Guid(0x0002_c900_0000_0100 + i as u64)
}

fn cfg(priority: u8) -> ElectionConfig {
    ElectionConfig {
        priority,
        sm_key: 1,
        poll_interval: Duration::from_millis(2000),
        poll_misses: 4,
        master_preemption: true,
        handover_timeout: Duration::from_secs(5),
    }
}

impl World {
    fn new(seed: u64, loss: f64, configs: &[ElectionConfig]) -> World {
        let mut w = World {
            now: Duration::ZERO,
            sms: Vec::new(),
            queue: BinaryHeap::new(),
            pending: Vec::new(),
            seq: 0,
            loss,
            rng: rand_chacha::ChaCha8Rng::seed_from_u64(seed),
            seed,
            programming: Vec::new(),
        };
        for (i, c) in configs.iter().enumerate() {
            w.sms.push(Sm {
                core: Election::new(*c, guid(i)),
                alive: true,
                port_up: true,
                life: 0,
                take_charges: Vec::new(),
                changes: Vec::new(),
                reports: Vec::new(),
            });
            w.programming.push(None);
        }
        for i in 0..w.sms.len() {
            w.drain(i);
        }
        w
    }

    fn at(&mut self, delay: Duration, sm: usize, d: Delivery) {
        let life = self.sms[sm].life;
        self.pending.push(Some((life, d)));
        self.seq += 1;
        self.queue.push(Reverse((self.now + delay, self.seq, self.pending.len() - 1)));
    }

    /// One MAD crosses the fabric.
    fn lost(&mut self) -> bool {
        self.rng.gen_bool(self.loss)
    }

    /// A transaction to `to`: Some(delay to the answer), or None after all
    /// attempts timed out.
    fn transaction(&mut self, to: usize) -> Result<Duration, Duration> {
        for attempt in 0..ATTEMPTS {
            let request_lost = self.lost();
            let response_lost = self.lost();
            if self.sms[to].alive && !request_lost && !response_lost {
                return Ok(ATTEMPT * attempt + RTT);
            }
        }
        Err(ATTEMPT * ATTEMPTS)
    }

    fn peer(&self, i: usize) -> Peer {
        Peer { info: self.sms[i].core.sm_info(true), addr: PeerAddr { lid: Lid(i as u16 + 1), path: None } }
    }

    fn index_of(&self, g: Guid) -> usize {
        (0..self.sms.len()).find(|&i| guid(i) == g).expect("a known SM")
    }

    /// Carries out every action SM `i` has queued.
    fn drain(&mut self, i: usize) {
        while let Some(a) = self.sms[i].core.poll_action() {
            match a {
                Action::Discover => {
                    let mut peers = Vec::new();
                    let me = Peer {
                        info: self.sms[i].core.own_info(),
                        addr: PeerAddr { lid: Lid(i as u16 + 1), path: None },
                    };
                    for j in 0..self.sms.len() {
                        if j != i && self.sms[i].port_up && self.transaction(j).is_ok() {
                            peers.push(self.peer(j));
                            // Our SubnGet(SMInfo) tells it about us.
                            self.at(RTT / 2, j, Delivery::Event(j, Event::PeerSeen { peer: me }));
                        }
                    }
                    self.at(DISCOVERY, i, Delivery::Event(i, Event::DiscoveryDone { peers }));
                }
                Action::TakeCharge { takeover } => {
                    self.sms[i].take_charges.push((self.now, takeover));
                    self.check_single_programmer(i);
                    self.programming[i] = Some(self.now + PROGRAMMING);
                    self.at(PROGRAMMING, i, Delivery::TakeChargeDone(i));
                }
                Action::Poll { master } => {
                    let m = self.index_of(master.info.guid);
                    let ev = match (self.sms[i].port_up, self.transaction(m)) {
                        (true, Ok(d)) => (d, Event::PollAnswered { info: self.sms[m].core.sm_info(true) }),
                        (_, Err(d)) | (false, Ok(d)) => (d, Event::PollFailed { why: "timeout".into() }),
                    };
                    self.at(ev.0, i, Delivery::Event(i, ev.1));
                }
                Action::CheckOwnPort => {
                    let up = self.sms[i].port_up;
                    self.at(RTT, i, Delivery::Event(i, Event::OwnPort { up, why: "port state".into() }));
                }
                Action::Send { to, control, from } => {
                    let j = self.index_of(to.info.guid);
                    let from_info = from;
                    match self.transaction(j) {
                        Ok(d) => self.at(d / 2, j, Delivery::Control { to: j, from: i, control, from_info }),
                        Err(d) if control == SmControl::Handover => {
                            let ev = Event::HandoverSent { to: to.info.guid, result: Err("timeout".into()) };
                            self.at(d, i, Delivery::Event(i, ev));
                        }
                        Err(_) => {}
                    }
                }
                Action::StateChanged { from, to, .. } => self.sms[i].changes.push((self.now, from, to)),
                Action::Report(e) => self.sms[i].reports.push(e),
            }
        }
    }

    /// Never two masters programming at once: when SM `i` starts, every
    /// other SM that is still programming must have handed over to it.
    fn check_single_programmer(&self, i: usize) {
        for (j, until) in self.programming.iter().enumerate() {
            if j != i && until.is_some_and(|u| u > self.now) && self.sms[j].alive {
                panic!(
                    "seed {}: SM {i} starts programming at {:?} while SM {j} programs until {:?}",
                    self.seed, self.now, until
                );
            }
        }
    }

    fn step(&mut self) -> bool {
        let next_queue = self.queue.peek().map(|Reverse((t, ..))| *t);
        let next_timer = (0..self.sms.len())
            .filter(|&i| self.sms[i].alive)
            .filter_map(|i| self.sms[i].core.poll_timeout().map(|t| (t, i)))
            .min();
        match (next_queue, next_timer) {
            (Some(q), Some((t, i))) if t < q => self.fire_timer(t, i),
            (None, Some((t, i))) => self.fire_timer(t, i),
            (Some(_), _) => {
                let Reverse((t, _, slot)) = self.queue.pop().expect("peeked");
                self.now = t;
                if let Some((life, d)) = self.pending[slot].take() {
                    self.deliver(life, d);
                }
            }
            (None, None) => return false,
        }
        true
    }

    fn fire_timer(&mut self, t: Duration, i: usize) {
        self.now = t;
        self.sms[i].core.handle_timeout(t);
        self.drain(i);
    }

    fn deliver(&mut self, life: u32, d: Delivery) {
        let target = match &d {
            Delivery::Event(i, _) | Delivery::TakeChargeDone(i) => *i,
            Delivery::Control { to, .. } => *to,
        };
        if !self.sms[target].alive || self.sms[target].life != life {
            return;
        }
        match d {
            Delivery::Event(i, e) => {
                self.sms[i].core.handle(self.now, e);
                self.drain(i);
            }
            Delivery::TakeChargeDone(i) => {
                self.programming[i] = None;
                self.sms[i].core.handle(self.now, Event::Programmed);
                self.drain(i);
            }
            Delivery::Control { to, from, control, from_info } => {
                let addr = PeerAddr { lid: Lid(from as u16 + 1), path: None };
                self.sms[to].core.handle(self.now, Event::Control { control, from: from_info, addr });
                let answer = self.sms[to].core.sm_info(true);
                self.drain(to);
                if control == SmControl::Handover {
                    let lost = self.lost();
                    let result = if lost { Err("response lost".into()) } else { Ok(answer) };
                    let ev = Event::HandoverSent { to: guid(to), result };
                    self.at(RTT / 2, from, Delivery::Event(from, ev));
                }
            }
        }
    }

    /// Runs until `until` (virtual), at most `cap` steps.
    fn run_until(&mut self, until: Duration) {
        for _ in 0..200_000 {
            let next = self
                .queue
                .peek()
                .map(|Reverse((t, ..))| *t)
                .into_iter()
                .chain(
                    (0..self.sms.len()).filter(|&i| self.sms[i].alive).filter_map(|i| self.sms[i].core.poll_timeout()),
                )
                .min();
            match next {
                Some(t) if t <= until => {
                    self.step();
                }
                _ => {
                    self.now = until;
                    return;
                }
            }
        }
        panic!("seed {}: no quiescence after 200000 steps (livelock?) at {:?}", self.seed, self.now);
    }

    fn kill(&mut self, i: usize) {
        self.sms[i].alive = false;
        self.programming[i] = None;
    }

    /// Restarts SM `i` as a fresh process.
    fn revive(&mut self, i: usize) {
        let c = *self.sms[i].core.config();
        self.sms[i].alive = true;
        self.sms[i].life += 1;
        self.sms[i].core = Election::new(c, guid(i));
        self.drain(i);
    }

    fn masters(&self) -> Vec<usize> {
        (0..self.sms.len()).filter(|&i| self.sms[i].alive && self.sms[i].core.state() == State::Master).collect()
    }

    fn states(&self) -> Vec<State> {
        self.sms.iter().map(|s| s.core.state()).collect()
    }

    /// Checks that SM `m` is the single master and the other live SMs are
    /// standbys watching it.
    fn history(&self) -> String {
        let mut out = String::new();
        for (i, s) in self.sms.iter().enumerate() {
            out += &format!("\nSM {i}: changes {:?}\n  take charge {:?}\n  reports:", s.changes, s.take_charges);
            for r in s.reports.iter().filter(|r| !matches!(r, ElectionError::PollMissed { .. })) {
                out += &format!("\n    {r}");
            }
        }
        out
    }

    fn assert_settled(&self, m: usize) {
        assert_eq!(self.masters(), vec![m], "seed {}: states {:?}{}", self.seed, self.states(), self.history());
        for (i, s) in self.sms.iter().enumerate() {
            if i != m && s.alive {
                assert_eq!(s.core.state(), State::Standby, "seed {}: SM {i}", self.seed);
                assert_eq!(s.core.master().map(|p| p.info.guid), Some(guid(m)), "seed {}: SM {i}", self.seed);
            }
        }
    }

    fn became_master_at(&self, i: usize, after: Duration) -> Option<Duration> {
        self.sms[i].changes.iter().find(|(t, _, to)| *t >= after && *to == State::Master).map(|c| c.0)
    }
}

const S: Duration = Duration::from_secs(1);

#[test]
fn two_sms_elect_the_higher_priority_and_stay_put_under_loss() {
    for seed in 0..20 {
        let mut w = World::new(seed, 0.10, &[cfg(1), cfg(5)]);
        w.run_until(5 * S);
        w.assert_settled(1);
        let changes = w.sms[0].changes.len() + w.sms[1].changes.len();
        // 10 virtual minutes at 10% loss: no false takeover, nothing moves.
        w.run_until(600 * S);
        w.assert_settled(1);
        assert_eq!(w.sms[0].changes.len() + w.sms[1].changes.len(), changes, "seed {seed}: a state moved under loss");
        assert_eq!(w.sms[0].take_charges.len(), 0, "seed {seed}: the standby programmed");
        assert!(
            w.sms[0].reports.iter().any(|r| matches!(r, ElectionError::PollMissed { .. })) || seed > 0,
            "seed {seed}: loss was seen"
        );
    }
}

#[test]
fn equal_priority_goes_to_the_lower_guid() {
    let mut w = World::new(3, 0.0, &[cfg(4), cfg(4), cfg(4)]);
    w.run_until(5 * S);
    w.assert_settled(0);
}

#[test]
fn standby_takes_over_within_the_detection_time() {
    for seed in 0..10 {
        let mut w = World::new(seed, 0.05, &[cfg(5), cfg(1)]);
        w.run_until(10 * S);
        w.assert_settled(0);
        let killed = w.now;
        w.kill(0);
        w.run_until(killed + 30 * S);
        w.assert_settled(1);
        let up = w.became_master_at(1, killed).expect("SM 1 became master");
        let limit = cfg(1).detection_time() + DISCOVERY + S;
        assert!(up - killed <= limit, "seed {seed}: took {:?}, limit {limit:?}", up - killed);
        let (_, takeover) = *w.sms[1].take_charges.last().expect("it programmed");
        assert!(takeover, "seed {seed}: the new master must not rewrite what is right");
    }
}

#[test]
fn three_sms_exactly_one_standby_takes_over() {
    for seed in 0..10 {
        let mut w = World::new(seed, 0.02, &[cfg(9), cfg(3), cfg(3)]);
        w.run_until(10 * S);
        w.assert_settled(0);
        let killed = w.now;
        w.kill(0);
        w.run_until(killed + 40 * S);
        // Equal priority: the lower GUID (SM 1) wins, SM 2 watches it.
        w.assert_settled(1);
        assert!(w.became_master_at(2, killed).is_none(), "seed {seed}: SM 2 was master too: {:?}", w.sms[2].changes);
    }
}

#[test]
fn higher_priority_sm_is_handed_the_subnet_without_a_gap() {
    for seed in 0..10 {
        let mut w = World::new(seed, 0.02, &[cfg(2), cfg(8)]);
        w.kill(1);
        // SM 0 first waits for the dead higher-ranked SM it saw starting.
        w.run_until(20 * S);
        w.assert_settled(0);
        let joined = w.now;
        w.revive(1);
        // The master sweeps every 10 s; a heavy sweep within that finds
        // the new standby. Check at every step that some SM is master.
        let mut t = joined;
        while t < joined + 25 * S {
            t += 50 * MS;
            w.run_until(t);
            assert!(!w.masters().is_empty() || t < joined + 2 * S, "seed {seed}: no master at {t:?}");
            if t.as_millis().is_multiple_of(10_000) {
                // The runtime's periodic heavy sweep.
                for i in w.masters() {
                    w.sms[i].core.handle(w.now, Event::SweepWanted);
                    w.drain(i);
                }
            }
        }
        w.assert_settled(1);
        let up = w.became_master_at(1, joined).expect("SM 1 became master");
        assert!(up - joined <= 12 * S, "seed {seed}: handover took {:?}", up - joined);
        let first = w.sms[1].take_charges.iter().find(|(t, _)| *t >= joined).expect("SM 1 programmed");
        assert!(first.1, "seed {seed}: handover is a takeover");
    }
}

#[test]
fn without_preemption_the_master_keeps_the_subnet_until_the_operator_asks() {
    let low = ElectionConfig { master_preemption: false, ..cfg(2) };
    let mut w = World::new(1, 0.0, &[low, cfg(8)]);
    w.kill(1);
    w.run_until(20 * S);
    w.assert_settled(0);
    w.revive(1);
    for k in 1..6 {
        w.run_until((20 + 10 * k) * S);
        w.sms[0].core.handle(w.now, Event::SweepWanted);
        w.drain(0);
    }
    w.run_until(80 * S);
    w.assert_settled(0);
    w.sms[0].core.handle(w.now, Event::OperatorHandover);
    w.drain(0);
    w.run_until(90 * S);
    w.assert_settled(1);
}

#[test]
fn a_lossy_master_is_not_preempted_by_a_standby_that_missed_a_poll() {
    // Loss high enough that single polls fail now and then (each needs
    // four attempts to fail), but never four in a row.
    for seed in 0..10 {
        let mut w = World::new(seed, 0.0, &[cfg(6), cfg(1)]);
        w.run_until(10 * S);
        w.assert_settled(0);
        w.loss = 0.30;
        w.run_until(400 * S);
        let missed = w.sms[1].reports.iter().filter(|r| matches!(r, ElectionError::PollMissed { .. })).count();
        assert!(missed > 0, "seed {seed}: the loss made no poll fail, the test proves nothing");
        w.assert_settled(0);
        // It may look again after a run of misses, but never takes over.
        assert!(w.became_master_at(1, Duration::ZERO).is_none(), "seed {seed}: false takeover{}", w.history());
        assert!(w.sms[1].take_charges.is_empty(), "seed {seed}: the standby programmed");
    }
}

#[test]
fn a_standby_that_loses_its_own_port_keeps_its_state() {
    let mut w = World::new(4, 0.0, &[cfg(6), cfg(1)]);
    w.run_until(10 * S);
    w.sms[1].port_up = false;
    w.run_until(60 * S);
    assert_eq!(w.sms[1].core.state(), State::Standby);
    assert!(w.sms[1]
        .reports
        .iter()
        .any(|r| matches!(r, ElectionError::OwnPortDown { master, .. } if *master == guid(0))));
    assert!(w.sms[1].take_charges.is_empty());
    w.sms[1].port_up = true;
    // Back: the master answers again, and the misses counted while the
    // port was down (or by a poll that was out as it came back) are no
    // reason to look for a new master.
    for step in 1..=1000u32 {
        w.run_until(60 * S + step * 10 * MS);
        assert_eq!(w.sms[1].core.state(), State::Standby, "{} ms after the port came back", step * 10);
    }
    w.assert_settled(0);
}

#[test]
fn a_flapping_higher_priority_sm_never_makes_two_masters() {
    for seed in 0..10 {
        let mut w = World::new(seed, 0.02, &[cfg(2), cfg(9)]);
        w.kill(1);
        w.run_until(10 * S);
        // SM 1 comes and goes every 3 s for two minutes; the runtime of the
        // master sweeps every 10 s. `check_single_programmer` panics on overlap.
        let mut t = 10 * S;
        let mut on = false;
        while t < 130 * S {
            t += 3 * S;
            w.run_until(t);
            if on {
                w.kill(1);
            } else {
                w.revive(1);
            }
            on = !on;
            if t.as_secs().is_multiple_of(9) {
                for i in w.masters() {
                    w.sms[i].core.handle(w.now, Event::SweepWanted);
                    w.drain(i);
                }
            }
        }
        w.kill(1);
        w.run_until(200 * S);
        w.assert_settled(0);
    }
}

#[test]
fn controls_with_a_wrong_key_or_from_strangers_are_refused() {
    let keyed = ElectionConfig { sm_key: 0x1234, ..cfg(5) };
    let mut e = Election::new(keyed, guid(0));
    let addr = PeerAddr { lid: Lid(9), path: None };
    // Discovery found SM 7, not active: it may control us, if it outranks us.
    let seven = SmInfoRepr { guid: guid(7), sm_key: 0x1234, act_count: 0, priority: 15, sm_state: SmState::NotActive };
    e.handle(Duration::ZERO, Event::DiscoveryDone { peers: vec![Peer { info: seven, addr }] });
    assert_eq!(e.state(), State::Master);
    let rogue = SmInfoRepr { guid: guid(7), sm_key: 0x9999, act_count: 0, priority: 15, sm_state: SmState::Master };
    e.handle(S, Event::Control { control: SmControl::Disable, from: rogue, addr });
    assert_eq!(e.state(), State::Master, "wrong key");
    // The right key, but from an SM that does not outrank us.
    let low = SmInfoRepr { sm_key: 0x1234, priority: 1, ..rogue };
    e.handle(2 * S, Event::Control { control: SmControl::Standby, from: low, addr });
    assert_eq!(e.state(), State::Master, "lower-ranked SM");
    // ACKNOWLEDGE out of the blue.
    e.handle(3 * S, Event::Control { control: SmControl::Acknowledge, from: low, addr });
    assert_eq!(e.state(), State::Master);
    e.handle(4 * S, Event::Control { control: SmControl::Unknown(77), from: low, addr });
    // The right key and a high priority, from a port no discovery found an SM on.
    let stranger = SmInfoRepr { guid: guid(8), priority: 15, ..low };
    assert!(!e.control(4 * S, SmControl::Disable, stranger, addr), "refused, and the runtime says so");
    assert_eq!(e.state(), State::Master, "an SM nobody found");
    let reports: Vec<ElectionError> = std::iter::from_fn(|| e.poll_action())
        .filter_map(|a| if let Action::Report(r) = a { Some(r) } else { None })
        .collect();
    assert!(matches!(reports[0], ElectionError::WrongKey { from, .. } if from == guid(7)), "{reports:?}");
    assert!(matches!(reports[1], ElectionError::ControlFromStranger { .. }), "{reports:?}");
    assert!(matches!(reports[2], ElectionError::ControlFromStranger { .. }), "{reports:?}");
    assert!(matches!(reports[3], ElectionError::UnknownControl { code: 77, .. }), "{reports:?}");
    assert!(
        matches!(&reports[4], ElectionError::ControlFromStranger { from, expected, .. }
            if *from == guid(8) && expected.contains("discovery found")),
        "{reports:?}"
    );
    // SM_Key is shown only to a requester that presents it.
    assert_eq!(e.sm_info(false).sm_key, 0);
    assert_eq!(e.sm_info(true).sm_key, 0x1234);
    // The right key from a higher-ranked SM is obeyed.
    let high = SmInfoRepr { priority: 15, ..low };
    assert!(e.control(5 * S, SmControl::Disable, high, addr));
    assert_eq!(e.state(), State::NotActive);
    e.handle(6 * S, Event::Control { control: SmControl::Discover, from: high, addr });
    assert_eq!(e.state(), State::Discovering);
}

#[test]
fn impossible_peers_are_reported_not_followed() {
    let mut e = Election::new(cfg(1), guid(0));
    let addr = PeerAddr { lid: Lid(3), path: None };
    let zero = SmInfoRepr { guid: Guid(0), sm_key: 1, act_count: 0, priority: 15, sm_state: SmState::Master };
    let bad_state = SmInfoRepr { guid: guid(5), sm_state: SmState::Unknown(9), ..zero };
    let me = SmInfoRepr { guid: guid(0), ..zero };
    let other_key = SmInfoRepr { guid: guid(6), sm_key: 0x77, ..zero };
    let peers = [zero, bad_state, me, other_key].map(|info| Peer { info, addr }).to_vec();
    e.handle(S, Event::DiscoveryDone { peers });
    assert_eq!(e.state(), State::Master, "none of them is a master to follow");
    let bad: Vec<String> = std::iter::from_fn(|| e.poll_action())
        .filter_map(|a| match a {
            Action::Report(r @ ElectionError::BadPeer { .. }) => Some(r.to_string()),
            _ => None,
        })
        .collect();
    assert_eq!(bad.len(), 4, "{bad:?}");
    assert!(
        bad[3].contains("0x0002c90000000106") && bad[3].contains("SM_Key 0x77") && bad[3].contains("LID 3"),
        "{}",
        bad[3]
    );
}

#[test]
fn unexpected_events_are_errors_not_panics() {
    let mut e = Election::new(cfg(1), guid(0));
    e.handle(S, Event::OperatorHandover);
    e.handle(S, Event::HandoverSent { to: guid(3), result: Ok(e.own_info()) });
    e.handle(S, Event::PollAnswered { info: e.own_info() });
    let acts: Vec<Action> = std::iter::from_fn(|| e.poll_action()).collect();
    assert!(acts
        .iter()
        .any(|a| matches!(a, Action::Report(ElectionError::Unexpected { event: "OperatorHandover", .. }))));
    assert_eq!(e.state(), State::Discovering);
}
