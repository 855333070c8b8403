//! `auto`: the routing engine picked by topology, the default when the
//! operator names none. Its tables are always checked free of credit loops
//! before they are returned.
//!
//! ## The rules, in order
//! 1. **ftree** when it accepts the fabric. It refuses anything that is not
//!    a fat tree (full, partially populated or degraded), so acceptance is
//!    the detection. On a fat tree its up/down paths are minimal, balanced
//!    for shift all-to-all, and need one VL and no SLs.
//! 2. **dor** when the switches form meshes, tori or hypercubes and the
//!    shape fits `options.max_vls` (1 VL on a mesh, 2 on a torus with
//!    datelines). Its paths are minimal and balanced there, where every
//!    single-VL engine must take long detours round the rings. A torus's
//!    datelines put paths on SL 1-15, so applications must use the SL
//!    their PathRecord names (as with any multi-VL engine).
//! 3. Anything else: **the best single-VL deadlock-free engine**. updn and
//!    nue both run with one VL; the one whose busiest switch-to-switch link
//!    (all-to-all among end ports, [`crate::analysis::Report::inter_switch_load`])
//!    carries fewer routes wins, updn on a tie (it sets no SLs at all). One
//!    VL, because many fabrics spend their VLs on QoS, and because a
//!    default must stay deadlock free when an application ignores the
//!    PathRecord's SL, which layered engines (dfsssp, nue on several VLs)
//!    rely on. On a dragonfly, nue's one-VL tables start from
//!    [`crate::dragonfly`]'s minimal routing, and the reason says so.
//!
//! Every candidate's tables go through [`analyze_cdg`] (end-port traffic,
//! [`CdgScope::default`]) before they are accepted, and updn's and nue's
//! through [`validate`] as well (their busiest links come from it; tables
//! that loop or drop traffic are passed over too). A candidate with a
//! credit loop is passed over with the cycle's VL and length: the engines
//! here claim deadlock freedom, so that is a bug, and the next rule still
//! gives a safe fabric. updn is acyclic by construction and is the last
//! resort: if even its tables fail the check they are returned with
//! [`AutoChoice::deadlock_free`] false, as programming nothing is worse.
//!
//! A disconnected fabric is no reason to move on (as in
//! [`crate::engine::route_chain`]): a candidate that routes each part and
//! reports [`RoutingError::Disconnected`] is judged on those partial routes
//! like any other. [`choose`] returns them with [`AutoOutcome::parts`] set;
//! [`route_auto`] returns the error, carrying them, like every engine.
//! A VL budget outside 1-15 and unusable GUID lists are the caller's
//! mistakes and are returned at once.
//!
//! ## Cost
//! On a fat tree: ftree, its tree detection a second time for the reason
//! ([`crate::ftree::layout`]) and one credit-loop check, O(L·S) for L LIDs
//! and S switches. On a mesh or torus: ftree's refusal (usually found early)
//! plus dor and its check. Elsewhere: both refusals, then updn and nue, each
//! followed by a credit-loop check and a full validation (O(L·S) plus a
//! breadth-first search per destination switch). So on irregular fabrics
//! auto costs about updn + nue + four table walks; the result is the one
//! an operator would pick after running `ibsm route` with each.
//!
//! ## In a chain
//! `auto` may end a chain: `ftree,auto` tries ftree, then lets ibsm pick.
//! It may not stand before another engine ([`check_chain`]): it routes every
//! fabric that any engine routes, so the engines after it would never run.
//! An empty chain means `auto`.

use std::fmt;
use std::str::FromStr;

use crate::analysis::validate;
use crate::cdg::{analyze_cdg, CdgScope};
use crate::engine::{route, EngineKind};
use crate::error::{PartialRoutes, RoutingError};
use crate::fabric::RoutingFabric;
use crate::lft::Routes;
use crate::options::EngineOptions;

/// The name of this choice in an engine chain.
pub const AUTO: &str = "auto";

/// Why a candidate was not used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PassReason {
    /// The engine refused the fabric (not a fat tree, no torus, too few
    /// VLs).
    Refused(RoutingError),
    /// Its tables have a credit loop: the first cyclic VL and the number of
    /// channels of the cycle found there.
    CreditLoop { vl: u8, channels: usize },
    /// Its tables loop, drop or misdeliver (source, LID) pairs the cabling
    /// connects.
    Broken { loops: u64, black_holes: u64, wrong_destination: u64 },
    /// Deadlock free, but its busiest switch-to-switch link carries more
    /// routes than the winner's.
    Busier { busiest: u64, winner: EngineKind, winner_busiest: u64 },
}

impl fmt::Display for PassReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PassReason::Refused(e) => write!(f, "{e}"),
            PassReason::CreditLoop { vl, channels } => {
                write!(f, "its tables have a credit loop on VL {vl} ({channels} channels)")
            }
            PassReason::Broken { loops, black_holes, wrong_destination } => write!(
                f,
                "its tables fail delivery: {loops} looping, {black_holes} dropped, {wrong_destination} misdelivered \
                 (source, LID) pairs"
            ),
            PassReason::Busier { busiest, winner, winner_busiest } => {
                write!(f, "busiest link {busiest} routes, {winner}'s {winner_busiest}")
            }
        }
    }
}

/// A candidate auto did not use, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PassedOver {
    pub engine: EngineKind,
    pub why: PassReason,
}

impl fmt::Display for PassedOver {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} passed over: {}", self.engine, self.why)
    }
}

/// What auto chose and why, without the tables.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AutoChoice {
    /// The engine whose tables these are.
    pub engine: EngineKind,
    /// One line for the log: what the fabric is and why this engine, e.g.
    /// "fat tree detected: 2 levels, 36 leaves → ftree".
    pub reason: String,
    /// Candidates tried before or beside it, in the order tried.
    pub passed_over: Vec<PassedOver>,
    /// The tables passed the credit-loop check. False only when even the
    /// last resort (updn) failed it.
    pub deadlock_free: bool,
}

/// The fabric is in several connected parts (as [`RoutingError::Disconnected`]
/// says, without the routes).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Parts {
    pub components: usize,
    /// GUIDs outside the part(s) the engine routed as the main one.
    pub unreachable: Vec<u64>,
}

impl Parts {
    /// Splits a [`RoutingError::Disconnected`] into its parts and routes.
    pub fn from_error(e: RoutingError) -> Result<(Parts, Routes), RoutingError> {
        match e {
            RoutingError::Disconnected { components, unreachable, partial } => {
                Ok((Parts { components, unreachable }, *partial.0))
            }
            other => Err(other),
        }
    }

    /// The error every engine returns for these parts and routes.
    pub fn into_error(self, routes: Routes) -> RoutingError {
        RoutingError::Disconnected {
            components: self.components,
            unreachable: self.unreachable,
            partial: PartialRoutes(Box::new(routes)),
        }
    }
}

impl fmt::Display for Parts {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The error's own wording, so a chain with and without auto reports
        // a split fabric alike.
        Parts::into_error(self.clone(), Routes::default()).fmt(f)
    }
}

/// Auto's tables and choice.
#[derive(Debug, Clone)]
pub struct AutoOutcome {
    pub routes: Routes,
    pub choice: AutoChoice,
    /// Set when the fabric is disconnected: `routes` are then the chosen
    /// engine's routes of each part.
    pub parts: Option<Parts>,
}

/// Picks and runs an engine by topology; see the module documentation for
/// the rules. A disconnected fabric comes back as [`RoutingError::Disconnected`]
/// carrying the chosen engine's routes of every part (use [`choose`] to
/// keep the choice too).
pub fn route_auto(fabric: &RoutingFabric, options: &EngineOptions) -> Result<AutoOutcome, RoutingError> {
    let mut out = choose(fabric, options)?;
    match out.parts.take() {
        Some(parts) => Err(parts.into_error(out.routes)),
        None => Ok(out),
    }
}

/// [`route_auto`], but a disconnected fabric is an `Ok` with
/// [`AutoOutcome::parts`] set, so the caller learns which engine routed the
/// parts and why.
///
/// Errors: [`RoutingError::VlBudget`] and [`RoutingError::Input`] (bad
/// options, see [`EngineOptions::check_against`]) at once; otherwise only
/// if no candidate routes at all, which updn's construction rules out.
pub fn choose(fabric: &RoutingFabric, options: &EngineOptions) -> Result<AutoOutcome, RoutingError> {
    options.check()?;
    options.check_against(fabric)?;
    let mut passed = Vec::new();

    // 1. A fat tree.
    if let Some(r) = attempt(EngineKind::FTree, fabric, options, &mut passed)? {
        if credit_loop_free(EngineKind::FTree, fabric, &r.routes, &mut passed) {
            let reason = match crate::ftree::layout(fabric, options) {
                Ok(l) => format!("fat tree detected: {} levels, {} leaves → ftree", l.levels, l.leaves.len()),
                Err(_) => "fat tree detected → ftree".into(),
            };
            return Ok(r.into_outcome(EngineKind::FTree, reason, passed, true));
        }
    }

    // 2. A mesh or torus within the VL budget.
    if let Some(r) = attempt(EngineKind::Dor, fabric, options, &mut passed)? {
        if credit_loop_free(EngineKind::Dor, fabric, &r.routes, &mut passed) {
            let reason = match crate::dor::shapes(fabric) {
                Ok(shapes) => {
                    let needed = shapes.iter().map(|s| s.vls_needed()).max().unwrap_or(1);
                    let names: Vec<String> = shapes.iter().map(|s| s.describe()).collect();
                    format!("{} within {} (needs {needed}) → dor", names.join(", "), vl_count(options.max_vls))
                }
                Err(_) => "mesh or torus detected → dor".into(),
            };
            return Ok(r.into_outcome(EngineKind::Dor, reason, passed, true));
        }
    }

    // 3. The better single-VL engine; updn first, so it wins ties.
    let one_vl = EngineOptions { max_vls: 1, ..options.clone() };
    let mut fallback = None;
    let mut scored: Vec<(EngineKind, u64, Routed)> = Vec::new();
    // The dragonfly's groups when nue's tables grew from its routing, for
    // the reason.
    let mut nue_on_dragonfly = None;
    for kind in [EngineKind::UpDn, EngineKind::Nue] {
        let routed = if kind == EngineKind::Nue {
            let options = one_vl.with_port_guids(fabric);
            attempt_with(kind, &mut passed, || {
                crate::nue::nue_with_stats(fabric, &options).map(|(routes, stats)| {
                    nue_on_dragonfly = stats.from_dragonfly;
                    routes
                })
            })?
        } else {
            attempt(kind, fabric, &one_vl, &mut passed)?
        };
        let Some(r) = routed else { continue };
        let loop_free = credit_loop_free(kind, fabric, &r.routes, &mut passed);
        let report = validate(fabric, &r.routes);
        if loop_free && !report.is_clean() {
            passed.push(PassedOver {
                engine: kind,
                why: PassReason::Broken {
                    loops: report.loops,
                    black_holes: report.black_holes,
                    wrong_destination: report.wrong_destination,
                },
            });
        }
        if loop_free && report.is_clean() {
            scored.push((kind, report.inter_switch_load.max, r));
        } else if kind == EngineKind::UpDn {
            fallback = Some(r);
        }
    }
    let why_here = format!("no fat tree, and no mesh or torus within {}", vl_count(options.max_vls));
    // Stable: on equal loads updn, tried first, stays first.
    scored.sort_by_key(|&(_, busiest, _)| busiest);
    let mut scored = scored.into_iter();
    if let Some((winner, winner_busiest, routes)) = scored.next() {
        let mut over = String::new();
        for (kind, busiest, _) in scored {
            over += &if busiest == winner_busiest {
                format!(" over {kind} (also {busiest}; a tie goes to updn, which sets no SLs)")
            } else {
                format!(" over {kind} ({busiest})")
            };
            passed.push(PassedOver { engine: kind, why: PassReason::Busier { busiest, winner, winner_busiest } });
        }
        let how = nue_on_dragonfly.filter(|_| winner == EngineKind::Nue).map_or_else(String::new, |groups| {
            format!(
                ", from the dragonfly routing ({groups} groups; outbound and inbound local cables apart, every global hop minimal)"
            )
        });
        let reason = format!("{why_here} → {winner} (busiest link {winner_busiest}){how}{over} on 1 VL");
        return Ok(routes.into_outcome(winner, reason, passed, true));
    }
    if let Some(r) = fallback {
        let reason = format!("{why_here}, and no candidate passed the credit-loop check → updn as the last resort");
        return Ok(r.into_outcome(EngineKind::UpDn, reason, passed, false));
    }
    // Only reachable if updn itself refused, which it does for bad input
    // alone (returned above): report the last refusal.
    Err(passed
        .into_iter()
        .rev()
        .find_map(|p| match p.why {
            PassReason::Refused(e) => Some(e),
            _ => None,
        })
        .unwrap_or(RoutingError::NotApplicable { engine: AUTO, reason: "no engine routes this fabric".into() }))
}

/// "1 VL", "8 VLs".
fn vl_count(n: u8) -> String {
    if n == 1 {
        "1 VL".into()
    } else {
        format!("{n} VLs")
    }
}

/// A candidate's tables, with the parts when the fabric is disconnected.
struct Routed {
    routes: Routes,
    parts: Option<Parts>,
}

impl Routed {
    fn into_outcome(self, engine: EngineKind, reason: String, passed: Vec<PassedOver>, ok: bool) -> AutoOutcome {
        AutoOutcome {
            routes: self.routes,
            choice: AutoChoice { engine, reason, passed_over: passed, deadlock_free: ok },
            parts: self.parts,
        }
    }
}

/// Runs one candidate. `Ok(None)`: it refused (recorded in `passed`);
/// `Err`: bad options, which no other candidate would take either.
fn attempt(
    kind: EngineKind,
    fabric: &RoutingFabric,
    options: &EngineOptions,
    passed: &mut Vec<PassedOver>,
) -> Result<Option<Routed>, RoutingError> {
    attempt_with(kind, passed, || route(kind, fabric, options))
}

/// [`attempt`] with the engine run by `run` (options already checked).
fn attempt_with(
    kind: EngineKind,
    passed: &mut Vec<PassedOver>,
    run: impl FnOnce() -> Result<Routes, RoutingError>,
) -> Result<Option<Routed>, RoutingError> {
    match run() {
        Ok(routes) => Ok(Some(Routed { routes, parts: None })),
        Err(e @ (RoutingError::VlBudget { .. } | RoutingError::Input { .. })) => Err(e),
        Err(e @ RoutingError::Disconnected { .. }) => {
            let (parts, routes) = Parts::from_error(e)?;
            Ok(Some(Routed { routes, parts: Some(parts) }))
        }
        Err(e) => {
            passed.push(PassedOver { engine: kind, why: PassReason::Refused(e) });
            Ok(None)
        }
    }
}

/// The credit-loop check every candidate passes before it is used; a
/// failure is recorded in `passed`.
fn credit_loop_free(kind: EngineKind, fabric: &RoutingFabric, routes: &Routes, passed: &mut Vec<PassedOver>) -> bool {
    let report = analyze_cdg(fabric, routes, CdgScope::default());
    match report.first_cycle() {
        None => true,
        Some(v) => {
            let channels = v.cycle.as_ref().map_or(0, Vec::len);
            passed.push(PassedOver { engine: kind, why: PassReason::CreditLoop { vl: v.vl, channels } });
            false
        }
    }
}

/// One entry of a routing engine chain: an engine, or [`AUTO`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ChainEntry {
    Engine(EngineKind),
    Auto,
}

impl fmt::Display for ChainEntry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ChainEntry::Engine(k) => k.fmt(f),
            ChainEntry::Auto => f.write_str(AUTO),
        }
    }
}

impl FromStr for ChainEntry {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        if s.trim() == AUTO {
            return Ok(ChainEntry::Auto);
        }
        s.parse::<EngineKind>().map(ChainEntry::Engine).map_err(|_| {
            let names: Vec<&str> = std::iter::once(AUTO).chain(EngineKind::ALL.iter().map(|k| k.name())).collect();
            format!("unknown routing engine `{s}` (known: {})", names.join(", "))
        })
    }
}

/// Checks where `auto` stands: alone or last (see the module documentation).
pub fn check_chain(chain: &[ChainEntry]) -> Result<(), String> {
    match chain.iter().position(|e| *e == ChainEntry::Auto) {
        Some(i) if i + 1 < chain.len() => Err(format!(
            "`{AUTO}` must be the last engine of the chain: it routes every fabric, so {} after it would never run",
            chain[i + 1..].iter().map(|e| e.to_string()).collect::<Vec<_>>().join(", ")
        )),
        _ => Ok(()),
    }
}

/// What a chain with or without `auto` produced.
#[derive(Debug, Clone)]
pub struct ChainRouted {
    pub routes: Routes,
    /// The engine whose tables these are.
    pub engine: EngineKind,
    /// Engines named in the chain that refused, in order.
    pub skipped: Vec<(EngineKind, RoutingError)>,
    /// Set when `auto` chose the engine.
    pub auto: Option<AutoChoice>,
    /// Set when the fabric is disconnected: `routes` are per part.
    pub parts: Option<Parts>,
}

/// Runs a chain as [`crate::engine::route_chain`] does (the first engine
/// that routes wins; a disconnected fabric's partial routes are an answer,
/// reported in [`ChainRouted::parts`]), where `auto` is [`choose`]. An
/// empty chain is `auto`. When every engine refuses, the last refusal is
/// returned.
pub fn route_chain_auto(
    chain: &[ChainEntry],
    fabric: &RoutingFabric,
    options: &EngineOptions,
) -> Result<ChainRouted, RoutingError> {
    check_chain(chain).map_err(|reason| RoutingError::NotApplicable { engine: AUTO, reason })?;
    let chain = if chain.is_empty() { &[ChainEntry::Auto][..] } else { chain };
    let mut skipped = Vec::new();
    for entry in chain {
        match *entry {
            ChainEntry::Auto => {
                let out = choose(fabric, options)?;
                return Ok(ChainRouted {
                    routes: out.routes,
                    engine: out.choice.engine,
                    skipped,
                    auto: Some(out.choice),
                    parts: out.parts,
                });
            }
            ChainEntry::Engine(kind) => match route(kind, fabric, options) {
                Ok(routes) => return Ok(ChainRouted { routes, engine: kind, skipped, auto: None, parts: None }),
                Err(e @ RoutingError::Disconnected { .. }) => {
                    let (parts, routes) = Parts::from_error(e)?;
                    return Ok(ChainRouted { routes, engine: kind, skipped, auto: None, parts: Some(parts) });
                }
                Err(e) => skipped.push((kind, e)),
            },
        }
    }
    Err(skipped.pop().map(|(_, e)| e).expect("a non-empty chain without auto ends in a refusal"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testfab::{self, FatTree};

    #[test]
    fn chain_entries_parse_and_auto_must_come_last() {
        let parse = |s: &str| s.split(',').map(str::parse::<ChainEntry>).collect::<Result<Vec<_>, _>>();
        assert_eq!(parse("auto").unwrap(), [ChainEntry::Auto]);
        assert_eq!(parse("ftree, auto").unwrap(), [ChainEntry::Engine(EngineKind::FTree), ChainEntry::Auto]);
        let e = parse("lash").unwrap_err();
        assert!(e.starts_with("unknown routing engine `lash` (known: auto, minhop"), "{e}");
        assert!(check_chain(&parse("ftree,auto").unwrap()).is_ok());
        assert!(check_chain(&[]).is_ok());
        let e = check_chain(&parse("auto,minhop").unwrap()).unwrap_err();
        assert!(e.contains("`auto` must be the last") && e.contains("minhop after it"), "{e}");
    }

    #[test]
    fn an_explicit_engine_before_auto_is_obeyed() {
        let f = FatTree::full(4, 2).build();
        let chain = [ChainEntry::Engine(EngineKind::MinHop), ChainEntry::Auto];
        let r = route_chain_auto(&chain, &f, &EngineOptions::default()).unwrap();
        assert_eq!((r.engine, r.auto), (EngineKind::MinHop, None));
        assert_eq!(r.routes, crate::minhop::minhop(&f).unwrap());
        // ftree refuses a ring; auto takes over and says it did.
        let ring = testfab::ring(6, 1);
        let chain = [ChainEntry::Engine(EngineKind::FTree), ChainEntry::Auto];
        let r = route_chain_auto(&chain, &ring, &EngineOptions::default()).unwrap();
        assert_eq!(r.skipped.len(), 1);
        assert_eq!(r.skipped[0].0, EngineKind::FTree);
        assert_eq!(r.engine, EngineKind::Dor);
        assert!(r.auto.unwrap().reason.contains("torus"));
        // An empty chain is auto.
        let r = route_chain_auto(&[], &f, &EngineOptions::default()).unwrap();
        assert_eq!(r.engine, EngineKind::FTree);
    }

    #[test]
    fn bad_options_are_returned_not_passed_over() {
        let f = FatTree::full(4, 2).build();
        let e = choose(&f, &EngineOptions { max_vls: 0, ..EngineOptions::default() }).unwrap_err();
        assert_eq!(e, RoutingError::VlBudget { given: 0 });
        let e = choose(&f, &EngineOptions { root_guids: vec![0x1234], ..EngineOptions::default() }).unwrap_err();
        assert!(matches!(e, RoutingError::Input { .. }), "{e:?}");
    }

    #[test]
    fn tables_with_a_credit_loop_are_passed_over() {
        // minhop closes the ring of a 5-switch torus on its one VL.
        let ring = testfab::ring(5, 1);
        let mut passed = Vec::new();
        let cyclic = crate::minhop::minhop(&ring).unwrap();
        assert!(!credit_loop_free(EngineKind::MinHop, &ring, &cyclic, &mut passed));
        let [PassedOver { engine: EngineKind::MinHop, why: PassReason::CreditLoop { vl: 0, channels } }] = passed[..]
        else {
            panic!("{passed:?}")
        };
        assert_eq!(channels, 5);
        assert!(passed[0].to_string().contains("credit loop on VL 0 (5 channels)"), "{}", passed[0]);
        let dor = crate::dor::dor(&ring, &EngineOptions::default()).unwrap();
        assert!(credit_loop_free(EngineKind::Dor, &ring, &dor, &mut passed));
        assert_eq!(passed.len(), 1);
    }

    #[test]
    fn parts_print_as_the_error_does() {
        let parts = Parts { components: 2, unreachable: vec![0x10] };
        let e = parts.clone().into_error(Routes::default());
        assert_eq!(parts.to_string(), e.to_string());
        assert_eq!(Parts::from_error(e).unwrap().0, parts);
    }
}
