//! `ibsm sa join-flood`: multicast joins and leaves as fast as an SA takes
//! them, with the figures that say what they cost.
//!
//! Against a port (ours or OpenSM's SA, e.g. on ibsim under umad2sim) it
//! creates-or-joins `--groups` groups from that port, `--concurrency` at a
//! time, then leaves them (`--phase` picks one or both). The MGIDs are
//! fixed per group number ([`bench_mgid`]), so several hosts running the
//! same command join the same groups. It reports, per phase, the answers,
//! errors and losses, the rate and the SA's answer latency, with Unix
//! start and end times so a caller can line several clients up with an
//! SM's own records (`bench/mcast_join.py` counts the SM's MFT Sets so).
//!
//! With `--sim TOPOLOGY` everything runs in this process: ibsm's runtime
//! (SM, SA task, multicast passes) on the simulated fabric, as `ibsm run
//! --sim` runs it, and a load generator that joins from the hosts' own
//! ports. Three phases, each waited out until the MFTs stop changing:
//!
//! 1. every host but the SM's joins the IPoIB broadcast group (it exists
//!    from bring-up, as a well-known group), in random host order: the one
//!    group every host is in;
//! 2. `--groups` − 1 new groups, each of `--min-members`..=`--max-members`
//!    random hosts (uniform), all (group, host) joins in one random order;
//!    the first join of a group creates it;
//! 3. every membership of 1 and 2 leaves, in random order.
//!
//! For every join it times the SA's answer and, reading the simulated
//! switches' tables directly (no SMPs, so the fabric's counts are the
//! SM's alone), the moment the member's own switch forwards the group's
//! MLID to the member's port: the last hop of the tree, without which the
//! member receives nothing (for a leave, the moment that bit is cleared).
//! It counts the MulticastForwardingTable Sets that reached the switches
//! during the phase and, when they stop, checks every group's MFTs: a
//! flood from one member reaches exactly the other members and enters no
//! switch twice (after the leaves: no switch holds any of the MLIDs).
//!
//! Time: the simulated fabric is built with zero hop latency and zero
//! processing delay, so MADs arrive at the instant they are sent and the
//! fabric's virtual clock does not move (the report shows how far it
//! did). tokio's clock is real time in the binary (pausing it is for
//! tests), so every duration here is wall clock: what ibsm's SA, SM,
//! routing and I/O thread, the simulator and the load generator cost on
//! this machine. The load generator polls its ports from its own thread
//! and sleeps ~20 µs when nothing arrived, which bounds the resolution of
//! the SA latencies at about 0.1 ms; it looks at the switches' tables
//! every 0.1 ms while at most 64 last hops are pending and up to 5 ms
//! apart with thousands pending (the SM is then seconds behind).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use clap::{Args as ClapArgs, ValueEnum};
use futures::stream::{self, StreamExt};
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use serde::Serialize;

use super::latency::Latency;
use super::mcast as mc;
use crate::mad::header::MadHeader;
use crate::mad::sa::mc_member_record::{join_state, mc_member_mask as m, McMemberRecordRepr};
use crate::mad::sa::{path_mask, SA_DATA_OFFSET};
use crate::mad::{AttributeId, Method, PathRecordRepr};
use crate::runtime::backend::{self, PortArgs, Role};
use crate::transport::sa_client::{request_mad, SaClient, SaError};
use crate::transport::{Datagram, MadAddress, MadDevice, TransportError, TxnConfig};
use crate::types::Lid;

/// The Q_Key the bench's groups are created with (not a controlled Q_Key:
/// bit 31 clear).
pub const BENCH_Q_KEY: u32 = 0x0000_b0c4;
/// Bytes 2-3 of the bench's MGIDs: neither IPoIB's signatures nor the
/// SA's own, so no SA ties the groups to a broadcast group.
pub const BENCH_SIGNATURE: u16 = 0xb0c4;
/// The default P_Key, full member.
const PKEY: u16 = 0xffff;
/// First multicast LID (IBA 4.1.2).
const MLID_BASE: u16 = 0xC000;

/// The MGID of bench group `group`: `ff12:b0c4:<tag>::<group>`
/// (transient, link-local scope).
pub fn bench_mgid(tag: u16, group: u32) -> [u8; 16] {
    let mut g = [0u8; 16];
    g[0] = 0xff;
    g[1] = 0x12;
    g[2..4].copy_from_slice(&BENCH_SIGNATURE.to_be_bytes());
    g[4..6].copy_from_slice(&tag.to_be_bytes());
    g[12..16].copy_from_slice(&group.to_be_bytes());
    g
}

/// A join of `port_gid` to `mgid` as a full member; with `create`, the
/// components a new group needs (IBA o15-0.2.3: Q_Key, TClass, P_Key,
/// FlowLabel, SL), MTU and rate left to the SA (the joining port's).
pub fn join_record(mgid: [u8; 16], port_gid: [u8; 16], create: bool) -> (u64, McMemberRecordRepr) {
    let mut rec = McMemberRecordRepr { mgid, port_gid, pkey: PKEY, join_state: join_state::FULL, ..Default::default() };
    let mut mask = m::MGID | m::PORT_GID | m::PKEY | m::JOIN_STATE;
    if create {
        rec.q_key = BENCH_Q_KEY;
        mask |= m::Q_KEY | m::TCLASS | m::FLOW_LABEL | m::SL;
    }
    (mask, rec)
}

/// The leave of a full member (SubnAdmDelete: MGID, PortGID, JoinState).
pub fn leave_record(mgid: [u8; 16], port_gid: [u8; 16]) -> (u64, McMemberRecordRepr) {
    let rec = McMemberRecordRepr { mgid, port_gid, join_state: join_state::FULL, ..Default::default() };
    (m::MGID | m::PORT_GID | m::JOIN_STATE, rec)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Phase {
    Join,
    Leave,
    Both,
}

#[derive(Debug, Clone, ClapArgs)]
pub struct JoinFloodArgs {
    /// The port to join from; with --sim, the fabric ibsm's own SM and SA
    /// run on in-process (the SM on --sm-node, joins from every other host).
    #[command(flatten)]
    pub port: PortArgs,
    /// Groups. With --sim the IPoIB broadcast group is one of them (every
    /// host joins it) and the rest are created.
    #[arg(long, default_value = "1000")]
    pub groups: u32,
    /// Against a port: the first group number (groups are numbered from
    /// here; hosts given the same numbers join the same groups).
    #[arg(long, default_value = "1")]
    pub first_group: u32,
    /// Bytes 4-5 of the MGIDs, to keep runs apart.
    #[arg(long, default_value = "0", value_parser = parse_u16)]
    pub mgid_tag: u16,
    /// Against a port: join, leave, or join then leave.
    #[arg(long, value_enum, default_value = "both")]
    pub phase: Phase,
    /// Joins (or leaves) in flight at once.
    #[arg(long, default_value = "16")]
    pub concurrency: usize,
    /// How long one request waits for its answer before it counts as lost.
    #[arg(long, default_value = "1000")]
    pub timeout_ms: u64,
    /// Against a port: re-sends of a request before it counts as lost.
    #[arg(long, default_value = "0")]
    pub retries: u32,
    /// With --sim: fewest hosts in a created group.
    #[arg(long, default_value = "2")]
    pub min_members: usize,
    /// With --sim: most hosts in a created group.
    #[arg(long, default_value = "64")]
    pub max_members: usize,
    /// With --sim: leave the broadcast group out (every group is created).
    #[arg(long)]
    pub no_broadcast: bool,
    /// With --sim: skip the leave phase.
    #[arg(long)]
    pub no_leave: bool,
    /// With --sim: the SM's configuration file (as `ibsm run --config`).
    #[arg(long, short = 'c', value_name = "FILE")]
    pub config: Option<PathBuf>,
    #[arg(long, default_value = "0xfe80000000000000", value_parser = parse_u64)]
    pub subnet_prefix: u64,
    /// Print the report as JSON.
    #[arg(long)]
    pub json: bool,
}

fn parse_u16(s: &str) -> Result<u16, String> {
    crate::config::parse_u64(s)
        .and_then(|v| u16::try_from(v).ok())
        .ok_or_else(|| format!("`{s}` is not a 16-bit number"))
}

fn parse_u64(s: &str) -> Result<u64, String> {
    crate::config::parse_u64(s).ok_or_else(|| format!("`{s}` is not a number"))
}

fn unix_now() -> f64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0.0, |d| d.as_secs_f64())
}

// ---------------------------------------------------------------------------
// Reports

/// What one phase saw.
#[derive(Debug, Clone, Default, Serialize)]
pub struct PhaseReport {
    /// `join`, `leave`, or with --sim `broadcast join`, `group joins`, `leaves`.
    pub phase: String,
    /// Requests sent.
    pub ops: u64,
    pub answered: u64,
    /// Answers that were errors (a status, a wrong group or MLID).
    pub errors: u64,
    /// Requests with no answer within the timeout.
    pub lost: u64,
    /// Errors and losses by what they were.
    pub failures: BTreeMap<String, u64>,
    /// From the first request sent to the last answer (or loss), wall clock.
    pub elapsed_s: f64,
    /// Answered requests per second of `elapsed_s`.
    pub per_s: f64,
    /// The SA's answer time, wall clock.
    pub latency_ms: Latency,
    pub started_unix: f64,
    pub ended_unix: f64,
    /// Distinct MLIDs in the answers.
    pub mlids: usize,
    /// With --sim: what the switches' tables did.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mft: Option<MftFigures>,
}

/// The MFT side of a phase (in-process only).
#[derive(Debug, Clone, Default, Serialize)]
pub struct MftFigures {
    /// MulticastForwardingTable Sets that reached a switch from the first
    /// request of the phase until its MFTs stopped changing.
    pub sets: u64,
    /// MulticastForwardingTable Gets in that time.
    pub gets: u64,
    /// Sets per answered request.
    pub sets_per_op: f64,
    /// From a request sent to the moment its member's switch forwards the
    /// MLID to the member's port (a leave: no longer does), wall clock.
    pub last_hop_ms: Latency,
    /// Answered requests whose last hop never changed (within the cap).
    pub last_hop_missing: u64,
    /// From the first request to the last MFT Set of the phase.
    pub settled_s: f64,
    /// Answered requests per second of `settled_s`: joins through to the
    /// switches' tables.
    pub per_s_settled: f64,
    /// The flood check after the phase: "ok" or what was wrong.
    pub check: String,
    /// How far the fabric's virtual clock moved in the phase.
    pub fabric_clock_s: f64,
}

/// `ibsm sa join-flood --sim`'s whole report.
#[derive(Debug, Clone, Default, Serialize)]
pub struct SimReport {
    pub fabric: String,
    pub hosts: usize,
    pub switches: usize,
    /// From starting the runtime to the first snapshot of a subnet up.
    pub bring_up_s: f64,
    pub concurrency: usize,
    pub seed: u64,
    /// Groups with members (the broadcast group included).
    pub groups: usize,
    /// Hosts per created group: fewest, most, mean.
    pub created_members: (usize, usize, f64),
    /// Joins planned in all.
    pub memberships: usize,
    /// MFT Sets the bring-up sent (before any join).
    pub bring_up_mft_sets: u64,
    pub phases: Vec<PhaseReport>,
}

impl PhaseReport {
    fn render_text(&self) -> String {
        let l = &self.latency_ms;
        let mut s = format!(
            "{}: {} answered of {} in {:.2} s ({:.0}/s), {} errors, {} lost; SA answer ms p50 {:.3} p90 {:.3} p99 {:.3} max {:.3}; {} MLIDs\n",
            self.phase, self.answered, self.ops, self.elapsed_s, self.per_s, self.errors, self.lost, l.p50, l.p90,
            l.p99, l.max, self.mlids
        );
        if let Some(f) = &self.mft {
            let h = &f.last_hop_ms;
            s += &format!(
                "  MFTs: {} Sets ({:.2} per request), {} Gets; last hop written ms p50 {:.3} p90 {:.3} p99 {:.3} max {:.3} ({} never); settled after {:.2} s ({:.0}/s); check: {}; fabric clock moved {:.6} s\n",
                f.sets, f.sets_per_op, f.gets, h.p50, h.p90, h.p99, h.max, f.last_hop_missing, f.settled_s,
                f.per_s_settled, f.check, f.fabric_clock_s
            );
        }
        for (what, n) in &self.failures {
            s += &format!("  {n} x {what}\n");
        }
        s
    }
}

// ---------------------------------------------------------------------------
// Against a port

/// What went wrong with one request, for the tally: (lost, kind).
fn classify(e: &SaError) -> (bool, String) {
    match e {
        SaError::Transport(TransportError::Timeout { .. }) => (true, "lost (no answer in time)".into()),
        SaError::Status { status, .. } => (false, format!("SA status {status:#06x}")),
        other => (false, other.to_string()),
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Op {
    Join,
    Leave,
}

/// One phase from one port: every group once, `concurrency` at a time.
async fn port_phase<T: crate::transport::Transport>(
    client: &SaClient<T>,
    op: Op,
    mgids: &[[u8; 16]],
    port_gid: [u8; 16],
    concurrency: usize,
) -> PhaseReport {
    let started_unix = unix_now();
    let t0 = Instant::now();
    let results: Vec<(Result<McMemberRecordRepr, SaError>, [u8; 16], Duration)> = stream::iter(mgids.iter().copied())
        .map(|mgid| async move {
            let t = Instant::now();
            let r = match op {
                Op::Join => {
                    let (mask, rec) = join_record(mgid, port_gid, true);
                    client.set(mask, &rec).await
                }
                Op::Leave => {
                    let (mask, rec) = leave_record(mgid, port_gid);
                    client.delete(mask, &rec).await
                }
            };
            (r, mgid, t.elapsed())
        })
        .buffer_unordered(concurrency.max(1))
        .collect()
        .await;
    let elapsed = t0.elapsed().as_secs_f64();
    let mut r = PhaseReport {
        phase: if op == Op::Join { "join" } else { "leave" }.into(),
        ops: results.len() as u64,
        elapsed_s: elapsed,
        started_unix,
        ended_unix: unix_now(),
        ..Default::default()
    };
    let mut latency = Vec::new();
    let mut mlids = HashSet::new();
    for (res, mgid, took) in results {
        match res {
            Ok(rec) if rec.mgid != mgid => {
                r.errors += 1;
                *r.failures.entry("answer names another group".into()).or_default() += 1;
            }
            Ok(rec) if op == Op::Join && rec.mlid < MLID_BASE => {
                r.errors += 1;
                *r.failures.entry("answer with a unicast MLID".into()).or_default() += 1;
            }
            Ok(rec) => {
                r.answered += 1;
                latency.push(took.as_micros() as u64);
                mlids.insert(rec.mlid);
            }
            Err(e) => {
                let (lost, what) = classify(&e);
                if lost {
                    r.lost += 1;
                } else {
                    r.errors += 1;
                }
                *r.failures.entry(what).or_default() += 1;
            }
        }
    }
    r.per_s = if elapsed > 0.0 { r.answered as f64 / elapsed } else { 0.0 };
    r.latency_ms = Latency::of(latency);
    r.mlids = mlids.len();
    r
}

/// `ibsm sa join-flood` against the SA at a port's SM LID.
pub async fn run_port(args: &JoinFloodArgs) -> Result<Vec<PhaseReport>, String> {
    let cfg = TxnConfig {
        gmp_window: args.concurrency.max(1),
        timeout: Duration::from_millis(args.timeout_ms),
        retries: args.retries,
        ..TxnConfig::default()
    };
    let opened = backend::open(&args.port, cfg, Role::SaClient).map_err(|e| e.to_string())?;
    let client = SaClient::new(opened.transport).map_err(|e| e.to_string())?;
    let port_gid = mc::port_gid(args.subnet_prefix, client.local_port().port_guid.0);
    let last = args.first_group.checked_add(args.groups).ok_or("--first-group + --groups overflows")?;
    let mgids: Vec<[u8; 16]> = (args.first_group..last).map(|g| bench_mgid(args.mgid_tag, g)).collect();
    let mut out = Vec::new();
    if args.phase != Phase::Leave {
        out.push(port_phase(&client, Op::Join, &mgids, port_gid, args.concurrency).await);
    }
    if args.phase != Phase::Join {
        out.push(port_phase(&client, Op::Leave, &mgids, port_gid, args.concurrency).await);
    }
    Ok(out)
}

/// `ibsm sa join-flood`.
pub async fn run(args: JoinFloodArgs) -> ExitCode {
    if args.port.sim.is_some() {
        return match sim::run(&args).await {
            Ok(report) => {
                if args.json {
                    println!("{}", serde_json::to_string(&report).unwrap_or_default());
                } else {
                    println!(
                        "{}: {} hosts, {} switches, up in {:.2} s; {} groups, {} memberships, created groups of {}-{} hosts (mean {:.1}), {} in flight",
                        report.fabric,
                        report.hosts,
                        report.switches,
                        report.bring_up_s,
                        report.groups,
                        report.memberships,
                        report.created_members.0,
                        report.created_members.1,
                        report.created_members.2,
                        report.concurrency
                    );
                    for p in &report.phases {
                        print!("{}", p.render_text());
                    }
                }
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("ibsm sa join-flood: {e}");
                ExitCode::from(2)
            }
        };
    }
    match run_port(&args).await {
        Ok(reports) => {
            if args.json {
                println!("{}", serde_json::to_string(&reports).unwrap_or_default());
            } else {
                for p in &reports {
                    print!("{}", p.render_text());
                }
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("ibsm sa join-flood: {e}");
            ExitCode::from(2)
        }
    }
}

// ---------------------------------------------------------------------------
// In-process

mod sim {
    use super::*;
    use crate::config::Config;
    use crate::runtime::{run as run_sm, RunOptions};
    use crate::sim::{Fabric, FabricBuilder, SharedFabric, SimDevice};
    use crate::subnet::snapshot::Snapshots;
    use crate::topology::{NodeIdx, NodeKind, PortRef, Topology, TopologyIndex};
    use crate::transport::io_thread::MadTransport;

    /// The MFTs count as settled once no Set has reached a switch for this
    /// long after the last answer.
    const QUIET: Duration = Duration::from_millis(500);
    /// The longest a phase waits for its MFTs after the last answer.
    const SETTLE_CAP: Duration = Duration::from_secs(120);
    /// How often pending last hops are looked at (with 64 or fewer
    /// waiting; proportionally less often with more, up to the max).
    const HOP_CHECK: Duration = Duration::from_micros(100);
    const HOP_CHECK_MAX: Duration = Duration::from_millis(5);
    /// The load generator's nap when nothing arrived.
    const NAP: Duration = Duration::from_micros(20);

    /// A joining host: its port, addresses, and the switch port it is
    /// cabled to.
    struct Host {
        dev: SimDevice,
        lid: Lid,
        gid: [u8; 16],
        leaf: PortRef,
    }

    /// One request of a phase.
    #[derive(Clone, Copy)]
    struct Req {
        host: usize,
        group: usize,
        op: Op,
        create: bool,
    }

    struct Pending {
        req: Req,
        sent: Instant,
    }

    /// A last hop to watch: `want` is whether the bit should end up set.
    struct Hop {
        leaf: PortRef,
        mlid: u16,
        want: bool,
        sent: Instant,
    }

    /// Whether switch `sw`'s MFT forwards `mlid` to `port`, read from the
    /// simulated switch (IBA 14.2.5.12: positions of 16 ports, one 16-bit
    /// mask per MLID; the simulator keeps them position-major).
    fn mft_bit(f: &Fabric, sw: NodeIdx, port: u8, mlid: u16) -> bool {
        let Some(s) = f.switch_of(sw.0 as u32) else { return false };
        if s.mft.is_empty() || mlid < MLID_BASE {
            return false;
        }
        let cap = usize::from(s.info.multicast_fdb_cap);
        let off = usize::from(mlid - MLID_BASE);
        if off >= cap {
            return false;
        }
        s.mft.get(usize::from(port / 16) * cap + off).is_some_and(|mask| mask & (1 << (port % 16)) != 0)
    }

    /// Every port of `sw` its MFT forwards `mlid` to.
    fn mft_ports(f: &Fabric, topo: &Topology, sw: NodeIdx, mlid: u16) -> Vec<u8> {
        (0..=topo.node(sw).num_ports).filter(|&p| mft_bit(f, sw, p, mlid)).collect()
    }

    /// A flood of `mlid` from `from` through the switches' MFTs must reach
    /// every other member once, no other end port, and no switch twice.
    fn check_flood(
        f: &Fabric,
        topo: &Topology,
        idx: &TopologyIndex,
        mlid: u16,
        from: PortRef,
        members: &HashSet<PortRef>,
    ) -> Result<(), String> {
        let first = idx.neighbor(from).ok_or("a member without a cable")?;
        let mut entered = HashSet::new();
        let mut reached = HashSet::new();
        let mut queue = vec![first];
        while let Some(at) = queue.pop() {
            if !entered.insert(at.node) {
                return Err(format!("MLID {mlid:#06x}: the flood enters switch #{} twice", at.node.0));
            }
            for out in mft_ports(f, topo, at.node, mlid) {
                if out == at.port || out == 0 {
                    continue;
                }
                let far = idx
                    .neighbor(PortRef { node: at.node, port: out })
                    .ok_or_else(|| format!("MLID {mlid:#06x}: switch #{} port {out} is not cabled", at.node.0))?;
                if topo.node(far.node).kind == NodeKind::Switch {
                    queue.push(far);
                } else if !members.contains(&far) {
                    return Err(format!("MLID {mlid:#06x}: the flood reaches non-member #{}", far.node.0));
                } else if !reached.insert(far) {
                    return Err(format!("MLID {mlid:#06x}: the flood reaches #{} twice", far.node.0));
                }
            }
        }
        let missed = members.iter().filter(|p| **p != from && !reached.contains(p)).count();
        if missed > 0 {
            return Err(format!("MLID {mlid:#06x}: the flood misses {missed} of {} members", members.len()));
        }
        Ok(())
    }

    /// The whole run's state: the hosts, the groups' MLIDs and members.
    struct Bench {
        fabric: SharedFabric,
        topo: Topology,
        idx: TopologyIndex,
        hosts: Vec<Host>,
        mgids: Vec<[u8; 16]>,
        /// Per group: the MLID its answers named.
        mlid: Vec<Option<u16>>,
        /// Per group: the hosts that are members now.
        members: Vec<HashSet<usize>>,
        sa_lid: Lid,
        concurrency: usize,
        timeout: Duration,
        next_tid: u64,
    }

    impl Bench {
        fn mft_counts(&self) -> (u64, u64) {
            let f = self.fabric.lock().unwrap_or_else(|e| e.into_inner());
            (
                f.smp_count(AttributeId::MulticastForwardingTable, Method::Set),
                f.smp_count(AttributeId::MulticastForwardingTable, Method::Get),
            )
        }

        fn fabric_now(&self) -> Duration {
            self.fabric.lock().unwrap_or_else(|e| e.into_inner()).now()
        }

        fn request(&mut self, req: Req) -> Datagram {
            self.next_tid += 1;
            let mgid = self.mgids[req.group];
            let gid = self.hosts[req.host].gid;
            let (method, (mask, rec)) = match req.op {
                Op::Join => (Method::Set, join_record(mgid, gid, req.create)),
                Op::Leave => (Method::Delete, leave_record(mgid, gid)),
            };
            let mut mad = request_mad(method, 0, mask, &rec).expect("an MCMemberRecord fits in an SA MAD");
            MadHeader::new_checked(&mut mad[..]).expect("a whole MAD holds a header").set_transaction_id(self.next_tid);
            Datagram { addr: MadAddress::gsi(self.sa_lid, 0), mad }
        }

        /// Waits until the SA answers a PathRecord Get between two hosts.
        fn wait_for_sa(&mut self) -> Result<(), String> {
            let t0 = Instant::now();
            let (a, b) = (0, self.hosts.len() - 1);
            let rec = PathRecordRepr { slid: self.hosts[a].lid.0, dlid: self.hosts[b].lid.0, ..Default::default() };
            while t0.elapsed() < Duration::from_secs(60) {
                self.sa_lid = self.hosts[a].dev.local_port().sm_lid;
                if self.sa_lid != Lid(0) {
                    let mut mad = request_mad(Method::Get, 0, path_mask::SLID | path_mask::DLID, &rec)
                        .expect("a PathRecord fits in an SA MAD");
                    self.next_tid += 1;
                    let tid = self.next_tid;
                    MadHeader::new_checked(&mut mad[..]).expect("header").set_transaction_id(tid);
                    let dev = &mut self.hosts[a].dev;
                    dev.send(&Datagram { addr: MadAddress::gsi(self.sa_lid, 0), mad }).map_err(|e| e.to_string())?;
                    let asked = Instant::now();
                    while asked.elapsed() < Duration::from_millis(200) {
                        let now = dev.now();
                        match dev.recv(now).map_err(|e| e.to_string())? {
                            Some(d) => {
                                let h = MadHeader::new_checked(&d.mad[..]).map_err(|e| e.to_string())?;
                                if h.transaction_id() == tid && h.status() == 0 {
                                    return Ok(());
                                }
                            }
                            None => std::thread::sleep(Duration::from_millis(1)),
                        }
                    }
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            Err("the SA did not answer a PathRecord within 60 s of the subnet coming up".into())
        }

        /// Runs one phase: keeps `concurrency` requests in flight, then
        /// waits until the MFTs stop changing and checks them.
        fn phase(&mut self, name: &str, reqs: Vec<Req>) -> PhaseReport {
            let (sets0, gets0) = self.mft_counts();
            let clock0 = self.fabric_now();
            let started_unix = unix_now();
            let t0 = Instant::now();
            let mut report = PhaseReport { phase: name.into(), ..Default::default() };
            let mut inflight: HashMap<u64, Pending> = HashMap::new();
            let mut waiting: HashMap<usize, usize> = HashMap::new();
            let mut hops: Vec<Hop> = Vec::new();
            let (mut latency, mut hop_latency) = (Vec::new(), Vec::new());
            let mut mlids = HashSet::new();
            let mut next = 0;
            let mut last_answer = t0;
            let (mut last_sets, mut last_set_at) = (sets0, t0);
            let mut last_hop_check = t0;
            let mut answered_all_at: Option<Instant> = None;
            loop {
                while inflight.len() < self.concurrency.max(1) && next < reqs.len() {
                    let req = reqs[next];
                    next += 1;
                    let d = self.request(req);
                    let tid = self.next_tid;
                    report.ops += 1;
                    if let Err(e) = self.hosts[req.host].dev.send(&d) {
                        report.errors += 1;
                        *report.failures.entry(format!("send: {e}")).or_default() += 1;
                        continue;
                    }
                    inflight.insert(tid, Pending { req, sent: Instant::now() });
                    *waiting.entry(req.host).or_default() += 1;
                }
                let mut moved = false;
                let polled: Vec<usize> = waiting.keys().copied().collect();
                for h in polled {
                    loop {
                        let dev = &mut self.hosts[h].dev;
                        let now = dev.now();
                        let Ok(Some(d)) = dev.recv(now) else { break };
                        moved = true;
                        let Ok(head) = MadHeader::new_checked(&d.mad[..]) else { continue };
                        let Some(p) = inflight.remove(&head.transaction_id()) else { continue };
                        if let Some(n) = waiting.get_mut(&h) {
                            *n -= 1;
                            if *n == 0 {
                                waiting.remove(&h);
                            }
                        }
                        let took = p.sent.elapsed();
                        last_answer = Instant::now();
                        let status = head.status();
                        let rec =
                            d.mad.get(SA_DATA_OFFSET..).and_then(|data| McMemberRecordRepr::parse_bytes(data).ok());
                        match (status, rec) {
                            (0, Some(rec)) if rec.mlid >= MLID_BASE => {
                                report.answered += 1;
                                latency.push(took.as_micros() as u64);
                                mlids.insert(rec.mlid);
                                let g = p.req.group;
                                self.mlid[g] = Some(rec.mlid);
                                let want = p.req.op == Op::Join;
                                if want {
                                    self.members[g].insert(p.req.host);
                                } else {
                                    self.members[g].remove(&p.req.host);
                                }
                                hops.push(Hop {
                                    leaf: self.hosts[p.req.host].leaf,
                                    mlid: rec.mlid,
                                    want,
                                    sent: p.sent,
                                });
                            }
                            (0, _) => {
                                report.errors += 1;
                                *report.failures.entry("unreadable answer or unicast MLID".into()).or_default() += 1;
                            }
                            (s, _) => {
                                report.errors += 1;
                                *report.failures.entry(format!("SA status {s:#06x}")).or_default() += 1;
                            }
                        }
                    }
                }
                // Requests past their time are lost; a late answer is ignored.
                let timeout = self.timeout;
                let late: Vec<u64> =
                    inflight.iter().filter(|(_, p)| p.sent.elapsed() > timeout).map(|(&t, _)| t).collect();
                for tid in late {
                    if let Some(p) = inflight.remove(&tid) {
                        report.lost += 1;
                        *report.failures.entry("lost (no answer in time)".into()).or_default() += 1;
                        if let Some(n) = waiting.get_mut(&p.req.host) {
                            *n -= 1;
                            if *n == 0 {
                                waiting.remove(&p.req.host);
                            }
                        }
                    }
                }
                // Many hops waiting means the SM is behind by far more than
                // the check interval: look less often rather than take the
                // CPU it needs.
                let every = (HOP_CHECK * (hops.len() / 64).max(1) as u32).min(HOP_CHECK_MAX);
                if last_hop_check.elapsed() >= every {
                    last_hop_check = Instant::now();
                    let f = self.fabric.lock().unwrap_or_else(|e| e.into_inner());
                    let sets = f.smp_count(AttributeId::MulticastForwardingTable, Method::Set);
                    if sets != last_sets {
                        last_sets = sets;
                        last_set_at = last_hop_check;
                    }
                    hops.retain(|hop| {
                        if mft_bit(&f, hop.leaf.node, hop.leaf.port, hop.mlid) == hop.want {
                            hop_latency.push(hop.sent.elapsed().as_micros() as u64);
                            false
                        } else {
                            true
                        }
                    });
                }
                if next == reqs.len() && inflight.is_empty() {
                    let done_at = *answered_all_at.get_or_insert_with(Instant::now);
                    let quiet = last_set_at.elapsed() >= QUIET && done_at.elapsed() >= QUIET;
                    if (hops.is_empty() && quiet) || done_at.elapsed() >= SETTLE_CAP {
                        break;
                    }
                }
                if !moved {
                    std::thread::sleep(NAP);
                }
            }
            let elapsed = last_answer.duration_since(t0).as_secs_f64();
            let (sets1, gets1) = self.mft_counts();
            let settled = last_set_at.duration_since(t0).as_secs_f64().max(elapsed);
            report.elapsed_s = elapsed;
            report.per_s = if elapsed > 0.0 { report.answered as f64 / elapsed } else { 0.0 };
            report.latency_ms = Latency::of(latency);
            report.started_unix = started_unix;
            report.ended_unix = unix_now();
            report.mlids = mlids.len();
            let sets = sets1 - sets0;
            report.mft = Some(MftFigures {
                sets,
                gets: gets1 - gets0,
                sets_per_op: if report.answered > 0 { sets as f64 / report.answered as f64 } else { 0.0 },
                last_hop_ms: Latency::of(hop_latency),
                last_hop_missing: hops.len() as u64,
                settled_s: settled,
                per_s_settled: if settled > 0.0 { report.answered as f64 / settled } else { 0.0 },
                check: self.check(),
                fabric_clock_s: (self.fabric_now() - clock0).as_secs_f64(),
            });
            report
        }

        /// Every group's MFTs as the members say they should be: each group
        /// with members floods from its first member to exactly the others;
        /// an MLID whose group has none is held by no switch.
        fn check(&self) -> String {
            let f = self.fabric.lock().unwrap_or_else(|e| e.into_inner());
            let switches: Vec<NodeIdx> = self.topo.switches().collect();
            let mut problems = Vec::new();
            for (g, members) in self.members.iter().enumerate() {
                let Some(mlid) = self.mlid[g] else { continue };
                let ports: HashSet<PortRef> = members.iter().map(|&h| self.hosts[h].dev.port_ref()).collect();
                let r = match ports.iter().min() {
                    Some(&from) => check_flood(&f, &self.topo, &self.idx, mlid, from, &ports),
                    None => match switches.iter().find(|&&sw| !mft_ports(&f, &self.topo, sw, mlid).is_empty()) {
                        Some(sw) => Err(format!("MLID {mlid:#06x} has no members but switch #{} holds it", sw.0)),
                        None => Ok(()),
                    },
                };
                if let Err(e) = r {
                    problems.push(e);
                }
            }
            match problems.len() {
                0 => "ok".into(),
                n => format!("{n} groups wrong, first: {}", problems[0]),
            }
        }
    }

    /// The runtime on the fabric until its first snapshot of a subnet up.
    async fn bring_up(
        fabric: &SharedFabric,
        sm: NodeIdx,
        config: Config,
        spec: &str,
    ) -> Result<(tokio::task::JoinHandle<()>, Duration), String> {
        let txn = TxnConfig::of(&config.transport);
        let dev = SimDevice::attach(fabric, sm, 1).map_err(|e| e.to_string())?;
        dev.set_is_sm(true);
        let (transport, unsolicited) = MadTransport::spawn(dev, txn);
        let snapshots = Snapshots::new();
        let options = RunOptions {
            persist_lids: false,
            snapshots: snapshots.clone(),
            sa_placement: crate::runtime::sa_task::SaPlacement::OwnThread,
            ..RunOptions::default()
        };
        let t0 = Instant::now();
        let task = tokio::spawn(async move {
            if let Err(e) = run_sm(transport, unsolicited, config, options, std::future::pending::<()>()).await {
                eprintln!("ibsm sa join-flood: the SM stopped: {e}");
            }
        });
        loop {
            if snapshots.latest().is_some_and(|s| s.sweep.subnet_up()) {
                return Ok((task, t0.elapsed()));
            }
            if task.is_finished() || t0.elapsed() > Duration::from_secs(600) {
                task.abort();
                return Err(format!("ibsm did not bring {spec} up in-process"));
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// The requests of the three phases (the leaves are planned after
    /// the joins, from what joined).
    fn plan(
        rng: &mut rand_chacha::ChaCha8Rng,
        hosts: usize,
        groups: usize,
        first_created: usize,
        min: usize,
        max: usize,
    ) -> (Vec<Req>, Vec<Req>, Vec<usize>) {
        let mut bcast: Vec<Req> = if first_created > 0 {
            (0..hosts).map(|h| Req { host: h, group: 0, op: Op::Join, create: false }).collect()
        } else {
            Vec::new()
        };
        bcast.shuffle(rng);
        let mut created = Vec::new();
        let mut sizes = Vec::new();
        for g in first_created..groups {
            let n = rng.gen_range(min..=max).min(hosts);
            sizes.push(n);
            for h in rand::seq::index::sample(rng, hosts, n) {
                created.push(Req { host: h, group: g, op: Op::Join, create: true });
            }
        }
        created.shuffle(rng);
        (bcast, created, sizes)
    }

    pub async fn run(args: &JoinFloodArgs) -> Result<SimReport, String> {
        let spec = match args.port.sim.as_deref() {
            Some("builtin") | None => backend::BUILTIN_TOPOLOGY,
            Some(s) => s,
        };
        if args.min_members == 0 || args.min_members > args.max_members {
            return Err(format!(
                "--min-members {} --max-members {}: need 1 <= min <= max",
                args.min_members, args.max_members
            ));
        }
        let config = match &args.config {
            Some(p) => Config::load(p).map_err(|e| e.to_string())?,
            None => Config::default(),
        };
        let topo = Topology::from_spec_or_file(spec).map_err(|e| format!("topology {spec}: {e}"))?;
        // Zero latency: a MAD arrives when it is sent, so no thread has to
        // move the virtual clock for the load generator's MADs to arrive.
        let fabric = FabricBuilder::new(&topo)
            .seed(args.port.seed)
            .hop_latency(Duration::ZERO)
            .processing_delay(Duration::ZERO)
            .build_shared()
            .map_err(|e| e.to_string())?;
        let all_hosts: Vec<NodeIdx> = topo.hosts().collect();
        let sm = match &args.port.sm_node {
            Some(name) => topo.node_by_name(name).ok_or_else(|| format!("no node `{name}` in {spec}"))?,
            None => *all_hosts.first().ok_or("the fabric has no host")?,
        };
        let (task, bring_up) = bring_up(&fabric, sm, config, spec).await?;
        let bring_up_mft_sets = fabric
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .smp_count(AttributeId::MulticastForwardingTable, Method::Set);

        let idx = topo.index();
        let mut hosts = Vec::new();
        for &h in all_hosts.iter().filter(|&&h| h != sm) {
            let at = PortRef { node: h, port: 1 };
            let Some(leaf) = idx.neighbor(at) else { continue };
            let lid = fabric.lock().unwrap_or_else(|e| e.into_inner()).lid_of(at).map_err(|e| e.to_string())?;
            let dev = SimDevice::attach(&fabric, h, 1).map_err(|e| e.to_string())?;
            let gid = mc::port_gid(args.subnet_prefix, topo.node(h).port_guid(1).0);
            hosts.push(Host { dev, lid, gid, leaf });
        }
        if hosts.len() < 2 {
            task.abort();
            return Err(format!("{spec} has fewer than two cabled hosts besides the SM's"));
        }
        let groups = args.groups.max(1) as usize;
        let first_created = usize::from(!args.no_broadcast);
        let mut mgids = Vec::with_capacity(groups);
        if first_created == 1 {
            mgids.push(mc::broadcast_mgid(2, PKEY));
        }
        mgids.extend((first_created..groups).map(|g| bench_mgid(args.mgid_tag, g as u32)));
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(args.port.seed);
        let (bcast, created, sizes) =
            plan(&mut rng, hosts.len(), groups, first_created, args.min_members, args.max_members);
        let switches = topo.switches().count();
        let mut report = SimReport {
            fabric: spec.to_string(),
            hosts: all_hosts.len(),
            switches,
            bring_up_s: bring_up.as_secs_f64(),
            concurrency: args.concurrency.max(1),
            seed: args.port.seed,
            groups,
            created_members: (
                sizes.iter().copied().min().unwrap_or(0),
                sizes.iter().copied().max().unwrap_or(0),
                if sizes.is_empty() { 0.0 } else { sizes.iter().sum::<usize>() as f64 / sizes.len() as f64 },
            ),
            memberships: bcast.len() + created.len(),
            bring_up_mft_sets,
            phases: Vec::new(),
        };
        let bench = Bench {
            fabric: fabric.clone(),
            idx,
            topo,
            hosts,
            mlid: vec![None; groups],
            members: vec![HashSet::new(); groups],
            mgids,
            sa_lid: Lid(0),
            concurrency: args.concurrency.max(1),
            timeout: Duration::from_millis(args.timeout_ms),
            next_tid: 0,
        };
        let no_leave = args.no_leave;
        let seed = args.port.seed;
        // The load generator blocks on its own thread; the SM keeps this one.
        let driven = tokio::task::spawn_blocking(move || -> Result<Vec<PhaseReport>, String> {
            let mut bench = bench;
            bench.wait_for_sa()?;
            let mut phases = Vec::new();
            if !bcast.is_empty() {
                phases.push(bench.phase("broadcast join", bcast));
            }
            phases.push(bench.phase("group joins", created));
            if !no_leave {
                let mut leaves: Vec<Req> = bench
                    .members
                    .iter()
                    .enumerate()
                    .flat_map(|(g, hs)| {
                        hs.iter().map(move |&h| Req { host: h, group: g, op: Op::Leave, create: false })
                    })
                    .collect();
                leaves.sort_by_key(|r| (r.group, r.host));
                leaves.shuffle(&mut rand_chacha::ChaCha8Rng::seed_from_u64(seed ^ 0x1ea7e));
                phases.push(bench.phase("leaves", leaves));
            }
            Ok(phases)
        })
        .await;
        task.abort();
        report.phases = driven.map_err(|e| format!("the load generator failed: {e}"))??;
        Ok(report)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bench_mgids_are_requestable_and_not_ipoib() {
        let g = bench_mgid(7, 0x0102_0304);
        assert_eq!(mc::gid_text(&g), "ff12:b0c4:7::102:304");
        assert!(crate::sa::mcast::mgid::requestable(&g));
        assert!(!crate::sa::mcast::mgid::is_ipoib(&g));
        assert_ne!(bench_mgid(0, 1), bench_mgid(0, 2));
        assert_ne!(bench_mgid(0, 1), bench_mgid(1, 1));
    }

    #[test]
    fn a_creating_join_carries_what_o15_0_2_3_asks_and_no_mtu_or_rate() {
        let (mask, rec) = join_record(bench_mgid(0, 1), [1; 16], true);
        for bit in [m::MGID, m::PORT_GID, m::PKEY, m::JOIN_STATE, m::Q_KEY, m::TCLASS, m::FLOW_LABEL, m::SL] {
            assert_ne!(mask & bit, 0, "bit {bit:#x}");
        }
        assert_eq!(mask & (m::MTU | m::MTU_SELECTOR | m::RATE | m::RATE_SELECTOR), 0);
        assert_eq!((rec.q_key, rec.pkey, rec.join_state), (BENCH_Q_KEY, 0xffff, join_state::FULL));
        let (mask, _) = join_record(bench_mgid(0, 1), [1; 16], false);
        assert_eq!(mask, m::MGID | m::PORT_GID | m::PKEY | m::JOIN_STATE);
        let (mask, rec) = leave_record(bench_mgid(0, 1), [1; 16]);
        assert_eq!(mask, m::MGID | m::PORT_GID | m::JOIN_STATE);
        assert_eq!(rec.join_state, join_state::FULL);
    }
}
