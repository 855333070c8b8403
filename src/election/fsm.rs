//! The SM state machine of IBA 14.4.1: one `match (state, event)`, timers
//! in a table, side effects of a change in [`Election::change_state`].

use std::collections::{HashMap, VecDeque};
use std::fmt;
use std::time::Duration;

use rand::{Rng, SeedableRng};

use super::ElectionConfig;
use crate::mad::{DrPath, SmControl, SmInfoRepr, SmState};
use crate::types::{Guid, Lid};

/// The SM's own state (IBA 14.4.1, Figure 167).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum State {
    Discovering,
    Standby,
    NotActive,
    Master,
}

impl State {
    pub fn sm_state(self) -> SmState {
        match self {
            State::Discovering => SmState::Discovering,
            State::Standby => SmState::Standby,
            State::NotActive => SmState::NotActive,
            State::Master => SmState::Master,
        }
    }
}

impl fmt::Display for State {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            State::Discovering => "DISCOVERING",
            State::Standby => "STANDBY",
            State::NotActive => "NOTACTIVE",
            State::Master => "MASTER",
        })
    }
}

/// Where another SM's port is: its LID (0 while it has none) and the
/// directed route the sweep found it by.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PeerAddr {
    pub lid: Lid,
    pub path: Option<DrPath>,
}

impl fmt::Display for PeerAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.path {
            Some(p) => write!(f, "LID {} (path {p})", self.lid),
            None => write!(f, "LID {}", self.lid),
        }
    }
}

/// Another SM as it last described itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Peer {
    pub info: SmInfoRepr,
    pub addr: PeerAddr,
}

impl fmt::Display for Peer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "SM {} at {} (priority {}, {:?})", self.info.guid, self.addr, self.info.priority, self.info.sm_state)
    }
}

/// What happened, as the runtime tells the core.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// A heavy sweep is due (periodic, a trap, a light sweep's finding).
    /// Honoured as master and while discovering.
    SweepWanted,
    /// [`Action::Discover`] finished: the other SMs that answered SMInfo.
    DiscoveryDone { peers: Vec<Peer> },
    /// [`Action::Discover`] could not run (the own port is unreadable).
    DiscoveryFailed { why: String },
    /// [`Action::TakeCharge`] finished (whether or not the subnet is up).
    Programmed,
    /// A light sweep ran as master.
    LightSwept,
    /// [`Action::Poll`] was answered.
    PollAnswered { info: SmInfoRepr },
    /// [`Action::Poll`] got no (usable) answer.
    PollFailed { why: String },
    /// [`Action::CheckOwnPort`]: whether our own port is still up.
    OwnPort { up: bool, why: String },
    /// A SubnSet(SMInfo) arrived: `from` is its payload, the sender's SMInfo.
    Control { control: SmControl, from: SmInfoRepr, addr: PeerAddr },
    /// [`Action::Send`] of a HANDOVER was answered (the receiver's SMInfo)
    /// or failed.
    HandoverSent { to: Guid, result: Result<SmInfoRepr, String> },
    /// The operator asks the master to hand over now (to the best standby),
    /// whatever `master_preemption` says.
    OperatorHandover,
    /// Another SM described itself to us (the payload of its SubnGet(SMInfo)
    /// while it discovers): a contender that our own discovery may have
    /// probed too early to see.
    PeerSeen { peer: Peer },
}

impl Event {
    fn name(&self) -> &'static str {
        match self {
            Event::SweepWanted => "SweepWanted",
            Event::DiscoveryDone { .. } => "DiscoveryDone",
            Event::DiscoveryFailed { .. } => "DiscoveryFailed",
            Event::Programmed => "Programmed",
            Event::LightSwept => "LightSwept",
            Event::PollAnswered { .. } => "PollAnswered",
            Event::PollFailed { .. } => "PollFailed",
            Event::OwnPort { .. } => "OwnPort",
            Event::Control { .. } => "Control",
            Event::HandoverSent { .. } => "HandoverSent",
            Event::OperatorHandover => "OperatorHandover",
            Event::PeerSeen { .. } => "PeerSeen",
        }
    }
}

/// What the runtime should do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Discover the fabric and the SMs on it; answer with
    /// [`Event::DiscoveryDone`] or [`Event::DiscoveryFailed`].
    Discover,
    /// Assign LIDs, route and program what the last discovery found;
    /// answer with [`Event::Programmed`]. `takeover`: another master
    /// programmed this fabric, so nothing already right may be rewritten.
    TakeCharge { takeover: bool },
    /// SubnGet(SMInfo) to the master; answer with [`Event::PollAnswered`]
    /// or [`Event::PollFailed`].
    Poll { master: Peer },
    /// Read our own port's state; answer with [`Event::OwnPort`].
    CheckOwnPort,
    /// SubnSet(SMInfo) with this control to `to`, carrying `from` (our
    /// SMInfo as the control requires it). A HANDOVER is answered with
    /// [`Event::HandoverSent`]; other controls need no answer.
    Send { to: Peer, control: SmControl, from: SmInfoRepr },
    /// The state changed (for logs, metrics and the SMInfo we answer with).
    StateChanged { from: State, to: State, cause: TransitionCause },
    /// Something to log; the core has already recovered from it.
    Report(ElectionError),
}

/// Why the state changed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TransitionCause {
    /// Discovery found a master.
    MasterFound { master: Peer },
    /// Discovery found no master; we wait for a higher-ranked SM to take it.
    HigherRankedFound { peer: Peer },
    /// Discovery found no master and nobody who outranks us.
    Won,
    /// The master missed this many polls in a row.
    MasterLost { master: Peer, misses: u32 },
    /// The master says it is no longer master.
    MasterSteppedDown { master: Peer, now: SmState },
    /// Another master outranks us.
    OutrankedBy { master: Peer },
    /// A SubnSet(SMInfo) control from another SM.
    Control { control: SmControl, from: Guid },
    /// The SM we handed over to took the subnet.
    HandedOver { to: Peer },
}

impl fmt::Display for TransitionCause {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TransitionCause::MasterFound { master } => write!(f, "master found: {master}"),
            TransitionCause::HigherRankedFound { peer } => write!(f, "waiting for higher-ranked {peer}"),
            TransitionCause::Won => write!(f, "no master and no higher-ranked SM"),
            TransitionCause::MasterLost { master, misses } => write!(f, "{master} missed {misses} polls"),
            TransitionCause::MasterSteppedDown { master, now } => write!(f, "{master} now reports {now:?}"),
            TransitionCause::OutrankedBy { master } => write!(f, "outranked by master {master}"),
            TransitionCause::Control { control, from } => write!(f, "{control:?} from SM {from}"),
            TransitionCause::HandedOver { to } => write!(f, "handed over to {to}"),
        }
    }
}

/// Problems the election recovers from; each names the SM concerned.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ElectionError {
    // What other SMs sent.
    #[error("SubnSet(SMInfo) {control:?} from SM {from} at {addr}: wrong SM_Key; ignored")]
    WrongKey { control: SmControl, from: Guid, addr: PeerAddr },
    #[error("SubnSet(SMInfo) {control:?} from {from} at {addr}, which is not {expected}; ignored")]
    ControlFromStranger { control: SmControl, from: Guid, addr: PeerAddr, expected: String },
    #[error("SubnSet(SMInfo) with unknown control {code:#x} from SM {from} at {addr}; ignored")]
    UnknownControl { code: u32, from: Guid, addr: PeerAddr },
    #[error("SMInfo of SM {guid} at {addr} is unusable: {why}")]
    BadPeer { addr: PeerAddr, guid: Guid, why: String },
    #[error("{peer} is master too, and ranks below us; {}", if *.waiting { "waiting for it to step down before programming" } else { "it has not stepped down: programming regardless" })]
    LowerMaster { peer: Peer, waiting: bool },
    // What other SMs did not do.
    #[error("{master} missed a poll ({misses} of {limit}): {why}")]
    PollMissed { master: Peer, misses: u32, limit: u32, why: String },
    #[error("{master} answers, but its ActCount has stayed {act_count} for {secs} s: is it still sweeping?")]
    MasterIdle { master: Peer, act_count: u32, secs: u64 },
    #[error("HANDOVER to {to} failed: {why}; keeping mastership")]
    HandoverFailed { to: Peer, why: String },
    #[error("{to} did not ACKNOWLEDGE our HANDOVER within {secs} s; keeping mastership")]
    HandoverNotAcknowledged { to: Peer, secs: u64 },
    // Our own side.
    #[error("our own port is down ({why}): staying {state}, not declaring master {master} dead")]
    OwnPortDown { state: State, master: Guid, why: String },
    #[error("discovery failed: {why}; retrying in {retry_ms} ms")]
    DiscoveryFailed { why: String, retry_ms: u64 },
    #[error("event {event} is unexpected in state {state}; ignored")]
    Unexpected { state: State, event: &'static str },
}

impl ElectionError {
    /// Whether the problem is someone else's misbehaviour or a loss of
    /// service (logged as an error) rather than a passing fault (a warning).
    pub fn is_error(&self) -> bool {
        matches!(
            self,
            ElectionError::WrongKey { .. }
                | ElectionError::ControlFromStranger { .. }
                | ElectionError::LowerMaster { .. }
                | ElectionError::OwnPortDown { .. }
                | ElectionError::Unexpected { .. }
        )
    }
}

/// The core's timers, indexed into [`Election::timers`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Timer {
    /// The next poll of the master (standby).
    Poll,
    /// The end of our wait for ACKNOWLEDGE (master handing over).
    HandoverAck,
    /// The next discovery attempt after a failed one.
    Rediscover,
}

const TIMERS: usize = 3;

impl Timer {
    fn index(self) -> usize {
        self as usize
    }
    const ALL: [Timer; TIMERS] = [Timer::Poll, Timer::HandoverAck, Timer::Rediscover];
}

/// Polls of the master are spread by up to a quarter of the interval so two
/// standbys do not move together.
pub(super) fn max_jitter(interval: Duration) -> Duration {
    interval / 4
}

/// How long a master's ActCount may stand still before we say so.
const IDLE_MASTER: Duration = Duration::from_secs(60);

/// A higher-ranked peer that is not yet master may take this many polls to
/// become master before we look again.
const AWAIT_POLLS: u32 = 16;

/// How the standby watches its master.
#[derive(Debug, Clone, Copy)]
struct Watch {
    master: Peer,
    /// Poll intervals in a row that passed with no answer saying MASTER.
    misses: u32,
    /// A poll is out.
    polling: bool,
    /// An answer saying MASTER came in this interval.
    answered: bool,
    /// The peer outranked us but was not master yet when we chose it.
    awaiting: Option<u32>,
    /// The master's ActCount and since when it has stood still.
    act: Option<(u32, Duration)>,
    idle_reported: bool,
    /// The last look at our own port found it down: the misses since are
    /// our port's, not the master's.
    own_port_down: bool,
}

/// The election core.
pub struct Election {
    cfg: ElectionConfig,
    guid: Guid,
    state: State,
    act_count: u32,
    /// Standby: whom we poll.
    watch: Option<Watch>,
    /// Why the last poll failed, for the next miss's report.
    last_poll_failure: Option<String>,
    /// Master: the SM we handed over to, waiting for its ACKNOWLEDGE.
    handing_over: Option<Peer>,
    /// A discovery is running.
    discovering: bool,
    /// The next TakeCharge follows another master's reign.
    takeover: bool,
    /// Peers of the last discovery.
    peers: Vec<Peer>,
    /// SMs that asked for our SMInfo since the last discovery began.
    seen: Vec<Peer>,
    /// Master: discoveries in a row that found a lower-ranked master.
    lower_master_looks: u32,
    /// SMs a handover to failed, and until when we leave them alone.
    handover_backoff: HashMap<Guid, (Duration, u32)>,
    timers: [Option<Duration>; TIMERS],
    actions: VecDeque<Action>,
    rng: rand_chacha::ChaCha8Rng,
}

impl Election {
    /// A core for the SM on port `guid`, in DISCOVERING; its first action
    /// is a discovery.
    pub fn new(cfg: ElectionConfig, guid: Guid) -> Self {
        let mut e = Election {
            cfg,
            guid,
            state: State::Discovering,
            act_count: 0,
            watch: None,
            last_poll_failure: None,
            handing_over: None,
            discovering: false,
            takeover: false,
            peers: Vec::new(),
            seen: Vec::new(),
            lower_master_looks: 0,
            handover_backoff: HashMap::new(),
            timers: [None; TIMERS],
            actions: VecDeque::new(),
            rng: rand_chacha::ChaCha8Rng::seed_from_u64(guid.0 ^ 0x5eed_e1ec),
        };
        e.start_discovery();
        e
    }

    pub fn state(&self) -> State {
        self.state
    }

    pub fn config(&self) -> &ElectionConfig {
        &self.cfg
    }

    /// The SMInfo this SM answers a SubnGet(SMInfo) with. SM_Key only to
    /// an `authenticated` requester (IBA 14.4.1.1): one that presented
    /// the SM_Key in its payload or the right M_Key in its header (the
    /// runtime decides; OpenSM since 3.3.21 judges by M_Key alone).
    pub fn sm_info(&self, authenticated: bool) -> SmInfoRepr {
        SmInfoRepr {
            guid: self.guid,
            sm_key: if authenticated { self.cfg.sm_key } else { 0 },
            act_count: self.act_count,
            priority: self.cfg.priority,
            sm_state: self.state.sm_state(),
        }
    }

    /// Our own SMInfo with the key, as we send it in our Sets and Gets.
    pub fn own_info(&self) -> SmInfoRepr {
        self.sm_info(true)
    }

    /// The master a standby polls.
    pub fn master(&self) -> Option<Peer> {
        match self.state {
            State::Master => None,
            _ => self.watch.map(|w| w.master),
        }
    }

    /// Master: the SM we sent HANDOVER to and await ACKNOWLEDGE from.
    pub fn handing_over(&self) -> Option<Peer> {
        self.handing_over
    }

    /// The other SMs the last discovery found.
    pub fn peers(&self) -> &[Peer] {
        &self.peers
    }

    /// Bumps ActCount, as a master does for each piece of work (IBA 14.2.5.13).
    fn activity(&mut self) {
        self.act_count = self.act_count.wrapping_add(1);
    }

    pub fn poll_action(&mut self) -> Option<Action> {
        self.actions.pop_front()
    }

    pub fn poll_timeout(&self) -> Option<Duration> {
        self.timers.iter().flatten().min().copied()
    }

    fn arm(&mut self, t: Timer, at: Duration) {
        self.timers[t.index()] = Some(at);
    }

    fn disarm(&mut self, t: Timer) {
        self.timers[t.index()] = None;
    }

    fn report(&mut self, e: ElectionError) {
        self.actions.push_back(Action::Report(e));
    }

    fn unexpected(&mut self, event: &Event) {
        let e = ElectionError::Unexpected { state: self.state, event: event.name() };
        self.report(e);
    }

    /// Runs every timer due at `now`.
    pub fn handle_timeout(&mut self, now: Duration) {
        for t in Timer::ALL {
            if self.timers[t.index()].is_some_and(|at| at <= now) {
                self.disarm(t);
                self.on_timer(now, t);
            }
        }
    }

    fn on_timer(&mut self, now: Duration, t: Timer) {
        match (self.state, t) {
            // A miss is an interval that passed with no answer saying
            // MASTER (as OpenSM counts them), so a dead master costs
            // `poll_misses` intervals however long each poll's retries take.
            // One poll at a time is out; the cadence never waits for it.
            (State::Standby, Timer::Poll) => {
                if let Some(mut w) = self.watch {
                    if !w.answered {
                        w.misses += 1;
                        let limit = self.cfg.poll_misses.max(1);
                        let why =
                            self.last_poll_failure.take().unwrap_or_else(|| "no answer within the interval".into());
                        self.report(ElectionError::PollMissed { master: w.master, misses: w.misses, limit, why });
                        if w.misses >= limit {
                            // Before declaring the master dead, make sure it
                            // is not our own port that went away.
                            self.actions.push_back(Action::CheckOwnPort);
                        }
                    }
                    w.answered = false;
                    if !w.polling {
                        w.polling = true;
                        let master = w.master;
                        self.actions.push_back(Action::Poll { master });
                    }
                    self.watch = Some(w);
                }
                self.schedule_poll(now);
            }
            (State::Master, Timer::HandoverAck) => {
                if let Some(to) = self.handing_over.take() {
                    let secs = self.cfg.handover_timeout.as_secs();
                    self.back_off(now, to.info.guid);
                    self.report(ElectionError::HandoverNotAcknowledged { to, secs });
                    // Look again: the SM may have become master without telling us.
                    self.start_discovery();
                }
            }
            (State::Discovering | State::Master, Timer::Rediscover) => self.start_discovery(),
            // A timer of a state we have left: nothing to do.
            _ => {}
        }
    }

    fn start_discovery(&mut self) {
        if !self.discovering {
            self.discovering = true;
            self.seen.clear();
            self.actions.push_back(Action::Discover);
        }
    }

    fn schedule_poll(&mut self, now: Duration) {
        let jitter = max_jitter(self.cfg.poll_interval);
        let extra = if jitter.is_zero() { Duration::ZERO } else { self.rng.gen_range(Duration::ZERO..jitter) };
        self.arm(Timer::Poll, now + self.cfg.poll_interval + extra);
    }

    /// The one place a state changes, with its side effects.
    fn change_state(&mut self, now: Duration, to: State, cause: TransitionCause) {
        let from = self.state;
        self.state = to;
        self.actions.push_back(Action::StateChanged { from, to, cause });
        if from == to {
            return;
        }
        for t in Timer::ALL {
            self.disarm(t);
        }
        match to {
            State::Standby => self.schedule_poll(now),
            State::Master => {
                self.watch = None;
                self.lower_master_looks = 0;
                self.activity();
            }
            State::Discovering => {
                // The old master is no one to answer to any more.
                self.watch = None;
                self.handing_over = None;
                self.start_discovery();
            }
            State::NotActive => {
                self.watch = None;
                self.handing_over = None;
            }
        }
    }

    fn watch(&mut self, now: Duration, master: Peer, awaiting: bool, cause: TransitionCause) {
        self.watch = Some(Watch {
            master,
            misses: 0,
            polling: false,
            // The master just answered (discovery or a handover).
            answered: true,
            awaiting: awaiting.then_some(0),
            act: Some((master.info.act_count, now)),
            idle_reported: false,
            own_port_down: false,
        });
        self.change_state(now, State::Standby, cause);
        // Entering STANDBY from STANDBY (a new master) keeps timers: poll soon.
        if self.timers[Timer::Poll.index()].is_none() {
            self.schedule_poll(now);
        }
    }

    /// Feeds one event to the state machine.
    pub fn handle(&mut self, now: Duration, event: Event) {
        match (self.state, event) {
            // Heavy sweeps: the master's and the discovering SM's.
            (State::Master | State::Discovering, Event::SweepWanted) => {
                if self.handing_over.is_none() {
                    self.start_discovery();
                }
            }
            (State::Standby | State::NotActive, Event::SweepWanted) => {}
            (state, Event::DiscoveryDone { mut peers }) => {
                self.discovering = false;
                // A contender seen while we discovered counts, unless the
                // discovery read it itself (its answer is the newer).
                for p in std::mem::take(&mut self.seen) {
                    if !peers.iter().any(|q| q.info.guid == p.info.guid) {
                        peers.push(p);
                    }
                }
                let peers = self.valid_peers(peers);
                self.peers = peers.clone();
                self.on_discovered(now, state, peers);
            }
            (State::Discovering, Event::DiscoveryFailed { why }) => {
                self.discovering = false;
                let retry = self.cfg.poll_interval;
                self.report(ElectionError::DiscoveryFailed { why, retry_ms: retry.as_millis() as u64 });
                self.arm(Timer::Rediscover, now + retry);
            }
            (_, Event::DiscoveryFailed { why }) => {
                // A master keeps its state and tries again at the next sweep.
                self.discovering = false;
                self.report(ElectionError::DiscoveryFailed { why, retry_ms: 0 });
            }
            (State::Master, Event::Programmed | Event::LightSwept) => self.activity(),
            (_, Event::Programmed | Event::LightSwept) => {}

            // Standby: watching the master.
            (State::Standby, Event::PollAnswered { info }) => self.on_poll_answer(now, info),
            (State::Standby, Event::PollFailed { why }) => self.on_poll_failure(why),
            // Answers to polls of a state we have left.
            (_, Event::PollAnswered { .. } | Event::PollFailed { .. }) => {}
            (State::Standby, Event::OwnPort { up, why }) => self.on_own_port(now, up, why),
            (_, Event::OwnPort { .. }) => {}

            // SubnSet(SMInfo) from another SM.
            (_, Event::Control { control, from, addr }) => {
                self.control(now, control, from, addr);
            }

            // Our HANDOVER's answer.
            (State::Master, Event::HandoverSent { to, result }) => self.on_handover_sent(now, to, result),
            (_, Event::HandoverSent { .. }) => {}

            (State::Master, Event::OperatorHandover) if self.handing_over.is_some() => {}
            (State::Master, Event::OperatorHandover) => {
                let best = self.handover_candidate(now, true);
                match best {
                    Some(peer) => self.hand_over(now, peer),
                    None => self.report(ElectionError::HandoverFailed {
                        to: Peer { info: self.own_info(), addr: PeerAddr { lid: Lid(0), path: None } },
                        why: "no standby SM to hand over to".into(),
                    }),
                }
            }
            (_, e @ Event::OperatorHandover) => self.unexpected(&e),

            (state, Event::PeerSeen { peer }) => {
                let sane = peer.info.guid != Guid(0)
                    && peer.info.guid != self.guid
                    && !matches!(peer.info.sm_state, SmState::Unknown(_));
                if !sane {
                    return;
                }
                if self.discovering {
                    self.seen.retain(|p| p.info.guid != peer.info.guid);
                    self.seen.push(peer);
                } else if state == State::Master && self.handing_over.is_none() {
                    // A standby that outranks us polls us (ibsm's polls carry
                    // its SMInfo): hand over now rather than at the next
                    // sweep, if we would hand over to it at all.
                    let me = self.own_info();
                    // (An SM of another key takes no part: see valid_peers.)
                    let eligible = peer.info.sm_state == SmState::Standby
                        && peer.info.outranks(&me)
                        && (self.cfg.sm_key == 0 || peer.info.sm_key == self.cfg.sm_key)
                        && self.cfg.master_preemption
                        && !self.backing_off(now, peer.info.guid);
                    if eligible {
                        self.start_discovery();
                    }
                }
            }
        }
    }

    /// Drops what cannot be a peer, saying why.
    fn valid_peers(&mut self, peers: Vec<Peer>) -> Vec<Peer> {
        let mut out = Vec::new();
        for p in peers {
            let why = if p.info.guid == Guid(0) {
                Some("its GUID is 0".to_string())
            } else if p.info.guid == self.guid {
                Some("it carries our own GUID".to_string())
            } else if let SmState::Unknown(s) = p.info.sm_state {
                Some(format!("SMState {s} is not a state"))
            } else if self.cfg.sm_key != 0 && p.info.sm_key != self.cfg.sm_key {
                // OpenSM does the same: an SM that does not share our key
                // takes no part in our election.
                Some(format!("its SM_Key {:#x} is not ours; it takes no part in the election", p.info.sm_key))
            } else {
                None
            };
            match why {
                Some(why) => self.report(ElectionError::BadPeer { addr: p.addr, guid: p.info.guid, why }),
                None => out.push(p),
            }
        }
        out
    }

    fn best<'a>(peers: impl Iterator<Item = &'a Peer>) -> Option<Peer> {
        peers.fold(None, |best: Option<Peer>, p| match best {
            Some(b) if b.info.outranks(&p.info) => Some(b),
            _ => Some(*p),
        })
    }

    fn on_discovered(&mut self, now: Duration, state: State, peers: Vec<Peer>) {
        let me = self.own_info();
        let master = Self::best(peers.iter().filter(|p| p.info.sm_state == SmState::Master));
        match state {
            State::Discovering => {
                if let Some(master) = master {
                    self.takeover = true;
                    return self.watch(now, master, false, TransitionCause::MasterFound { master });
                }
                let live = peers.iter().filter(|p| {
                    matches!(p.info.sm_state, SmState::Standby | SmState::Discovering)
                        && !self.backing_off(now, p.info.guid)
                });
                if let Some(peer) = Self::best(live).filter(|p| p.info.outranks(&me)) {
                    return self.watch(now, peer, true, TransitionCause::HigherRankedFound { peer });
                }
                self.change_state(now, State::Master, TransitionCause::Won);
                let takeover = std::mem::take(&mut self.takeover);
                self.actions.push_back(Action::TakeCharge { takeover });
            }
            State::Master => {
                if let Some(master) = master {
                    if master.info.outranks(&me) {
                        self.takeover = true;
                        return self.watch(now, master, false, TransitionCause::OutrankedBy { master });
                    }
                    // Two masters must not program at once: wait for the
                    // lower one to find us and step down (OpenSM hands over
                    // to us at its next sweep). One that never does is
                    // rogue; after `poll_misses` looks we take charge anyway.
                    self.lower_master_looks += 1;
                    let waiting = self.lower_master_looks <= self.cfg.poll_misses;
                    self.report(ElectionError::LowerMaster { peer: master, waiting });
                    if waiting {
                        self.arm(Timer::Rediscover, now + self.cfg.poll_interval);
                        return;
                    }
                } else {
                    self.lower_master_looks = 0;
                }
                if self.handing_over.is_some() {
                    return;
                }
                if let Some(peer) = self.handover_candidate(now, false) {
                    return self.hand_over(now, peer);
                }
                let takeover = std::mem::take(&mut self.takeover);
                self.actions.push_back(Action::TakeCharge { takeover });
            }
            // A discovery that finished after we left DISCOVERING/MASTER.
            State::Standby | State::NotActive => {}
        }
    }

    /// The standby we should hand the subnet to now: the best-ranked one,
    /// if it outranks us (or the operator asks), and it is not backing off.
    fn handover_candidate(&self, now: Duration, operator: bool) -> Option<Peer> {
        if !operator && !self.cfg.master_preemption {
            return None;
        }
        let me = self.own_info();
        let standbys = self.peers.iter().filter(|p| p.info.sm_state == SmState::Standby);
        let best = Self::best(standbys)?;
        let eligible = operator || best.info.outranks(&me);
        let backing_off = self.handover_backoff.get(&best.info.guid).is_some_and(|&(until, _)| now < until);
        (eligible && (operator || !backing_off)).then_some(best)
    }

    fn hand_over(&mut self, now: Duration, to: Peer) {
        self.handing_over = Some(to);
        // However the send ends, the wait ends too.
        self.arm(Timer::HandoverAck, now + self.cfg.handover_timeout);
        let from = self.own_info();
        self.actions.push_back(Action::Send { to, control: SmControl::Handover, from });
    }

    fn backing_off(&self, now: Duration, guid: Guid) -> bool {
        self.handover_backoff.get(&guid).is_some_and(|&(until, _)| now < until)
    }

    fn back_off(&mut self, now: Duration, guid: Guid) {
        let entry = self.handover_backoff.entry(guid).or_insert((now, 0));
        entry.1 = (entry.1 + 1).min(6);
        // Each failure doubles the wait: an SM that flaps is not handed the
        // subnet every time it reappears.
        entry.0 = now + self.cfg.poll_interval * (1 << entry.1);
    }

    fn on_handover_sent(&mut self, now: Duration, to: Guid, result: Result<SmInfoRepr, String>) {
        let Some(peer) = self.handing_over.filter(|p| p.info.guid == to) else { return };
        match result {
            Ok(info) if info.sm_state == SmState::Master => {
                // It already says MASTER: as good as an ACKNOWLEDGE.
                self.handing_over = None;
                self.handover_backoff.remove(&to);
                let to = Peer { info, ..peer };
                self.watch(now, to, false, TransitionCause::HandedOver { to });
            }
            Ok(info) => {
                // Accepted (status 0). OpenSM answers with its state from
                // before the transition and never sends ACKNOWLEDGE, so the
                // answer is as good as one: watch the new master, giving it
                // the polls a higher-ranked SM gets to say MASTER.
                self.handing_over = None;
                self.handover_backoff.remove(&to);
                let to = Peer { info, ..peer };
                self.watch(now, to, true, TransitionCause::HandedOver { to });
            }
            Err(why) => {
                // The HANDOVER may have arrived even though its answer did
                // not: wait for an ACKNOWLEDGE as long as for an answered one,
                // then look before programming again.
                self.report(ElectionError::HandoverFailed { to: peer, why });
                self.arm(Timer::HandoverAck, now + self.cfg.handover_timeout);
            }
        }
    }

    fn on_poll_answer(&mut self, now: Duration, info: SmInfoRepr) {
        let Some(mut w) = self.watch else { return };
        w.polling = false;
        self.last_poll_failure = None;
        let master = Peer { info, ..w.master };
        if info.guid != w.master.info.guid {
            // Another SM answers at the master's port now.
            self.watch = Some(w);
            return self.change_state(
                now,
                State::Discovering,
                TransitionCause::MasterSteppedDown { master: w.master, now: info.sm_state },
            );
        }
        w.master = master;
        match (info.sm_state, w.awaiting) {
            (SmState::Master, _) => {
                w.misses = 0;
                w.answered = true;
                w.awaiting = None;
                match w.act {
                    Some((count, since)) if count == info.act_count => {
                        let idle = now.saturating_sub(since);
                        if idle >= IDLE_MASTER && !w.idle_reported {
                            w.idle_reported = true;
                            self.report(ElectionError::MasterIdle { master, act_count: count, secs: idle.as_secs() });
                        }
                    }
                    _ => {
                        w.act = Some((info.act_count, now));
                        w.idle_reported = false;
                    }
                }
            }
            (SmState::Standby | SmState::Discovering, Some(n)) if n < AWAIT_POLLS => {
                // Alive, and due to become master: not a miss.
                w.misses = 0;
                w.answered = true;
                w.awaiting = Some(n + 1);
            }
            (now_state, awaiting) => {
                if awaiting.is_some() && now_state != SmState::Master {
                    // It never became master: do not wait for it again at once.
                    self.back_off(now, master.info.guid);
                }
                self.watch = Some(w);
                return self.change_state(
                    now,
                    State::Discovering,
                    TransitionCause::MasterSteppedDown { master, now: now_state },
                );
            }
        }
        self.watch = Some(w);
    }

    fn on_poll_failure(&mut self, why: String) {
        let Some(mut w) = self.watch else { return };
        w.polling = false;
        self.last_poll_failure = Some(why);
        self.watch = Some(w);
    }

    fn on_own_port(&mut self, now: Duration, up: bool, why: String) {
        let Some(mut w) = self.watch else { return };
        if up && w.own_port_down {
            // Back from our own port's outage: the misses (and a poll that
            // was out as the port came back) say nothing of the master.
            // It gets a whole run of polls again.
            w.own_port_down = false;
            w.misses = 0;
            self.watch = Some(w);
            return;
        }
        if up && w.misses >= self.cfg.poll_misses.max(1) {
            let (master, misses) = (w.master, w.misses);
            self.takeover = true;
            return self.change_state(now, State::Discovering, TransitionCause::MasterLost { master, misses });
        }
        if !up {
            self.report(ElectionError::OwnPortDown { state: self.state, master: w.master.info.guid, why });
            // Keep counting from one short of the limit: the next miss asks again.
            w.misses = self.cfg.poll_misses.max(1) - 1;
            w.own_port_down = true;
            self.watch = Some(w);
        }
    }

    /// A SubnSet(SMInfo) from another SM; whether it was accepted (the
    /// runtime answers a refused one with an error status).
    pub fn control(&mut self, now: Duration, control: SmControl, from: SmInfoRepr, addr: PeerAddr) -> bool {
        let state = self.state;
        if from.sm_key != self.cfg.sm_key {
            self.report(ElectionError::WrongKey { control, from: from.guid, addr });
            return false;
        }
        // A sender we know is answered over the path discovery found.
        let known_peer = self
            .watch
            .map(|w| w.master)
            .into_iter()
            .chain(self.peers.iter().copied())
            .find(|p| p.info.guid == from.guid);
        let addr = known_peer.map(|p| p.addr).unwrap_or(addr);
        let peer = Peer { info: from, addr };
        let cause = TransitionCause::Control { control, from: from.guid };
        let refuse = |e: &mut Self, expected: &str| {
            let expected = expected.to_string();
            e.report(ElectionError::ControlFromStranger { control, from: from.guid, addr, expected });
            false
        };
        match (state, control) {
            // Our master (or, while discovering, any master: OpenSM hands
            // over to a discovering SM) gives us the subnet.
            (State::Standby | State::Discovering, SmControl::Handover) => {
                let expected = self.watch.map(|w| w.master.info.guid);
                if state == State::Standby && expected.is_some_and(|g| g != from.guid) {
                    return refuse(self, &format!("our master {}", expected.unwrap_or_default()));
                }
                // The ACKNOWLEDGE comes from the standby that was handed the
                // subnet (OpenSM refuses one whose sender says MASTER).
                let ack = SmInfoRepr { sm_state: SmState::Standby, ..self.own_info() };
                self.takeover = true;
                self.change_state(now, State::Master, cause);
                self.actions.push_back(Action::Send { to: peer, control: SmControl::Acknowledge, from: ack });
                // Take charge through a discovery of our own; a running one
                // (while discovering) serves.
                self.start_discovery();
                true
            }
            // Already master (another master stepping down to us): say so.
            (State::Master, SmControl::Handover) => {
                let ack = self.own_info();
                self.actions.push_back(Action::Send { to: peer, control: SmControl::Acknowledge, from: ack });
                true
            }
            (State::Master, SmControl::Acknowledge) => match self.handing_over {
                Some(to) if to.info.guid == from.guid => {
                    self.handing_over = None;
                    self.handover_backoff.remove(&from.guid);
                    let to = Peer { info: SmInfoRepr { sm_state: SmState::Master, ..from }, addr: to.addr };
                    self.watch(now, to, false, TransitionCause::HandedOver { to });
                    true
                }
                Some(to) => refuse(self, &format!("the SM we handed over to, {}", to.info.guid)),
                None => refuse(self, "an SM we handed over to (we handed over to none)"),
            },
            // The new master's ACKNOWLEDGE after we took its GetResp as one.
            (State::Standby, SmControl::Acknowledge) if self.watch.is_some_and(|w| w.master.info.guid == from.guid) => {
                true
            }
            // A master moves only for an SM that outranks it, and anyone
            // only for an SM our discovery found (or our master).
            (_, SmControl::Disable | SmControl::Standby | SmControl::Discover)
                if state == State::Master && !from.outranks(&self.own_info()) =>
            {
                refuse(self, "an SM that outranks us")
            }
            (_, SmControl::Disable | SmControl::Standby | SmControl::Discover) if known_peer.is_none() => {
                refuse(self, "an SM our discovery found")
            }
            (_, SmControl::Disable) => {
                self.change_state(now, State::NotActive, cause);
                true
            }
            (State::Standby, SmControl::Standby) => true,
            (_, SmControl::Standby | SmControl::Discover) => {
                self.change_state(now, State::Discovering, cause);
                true
            }
            (_, SmControl::Unknown(code)) => {
                self.report(ElectionError::UnknownControl { code, from: from.guid, addr });
                false
            }
            (state, control) => {
                let event = match control {
                    SmControl::Handover => "Control(HANDOVER)",
                    _ => "Control(ACKNOWLEDGE)",
                };
                self.report(ElectionError::Unexpected { state, event });
                false
            }
        }
    }
}
