//! MultiPathRecord (IBA 15.2.5.20): up to NumbPath PathRecords between a
//! set of source GIDs and a set of destination GIDs, answered as
//! PathRecords (o15-0.2.7).
//!
//! What this SA does:
//! - SGIDCount and DGIDCount must both be in the component mask
//!   (ERR_REQ_INSUFFICIENT_COMPONENTS) and both non-zero (ERR_REQ_INVALID),
//!   as OpenSM; a GID no port has is ERR_REQ_INVALID_GID.
//! - The other fixed fields bind every path as the same fields of a
//!   PathRecord query do (`super` module docs): selectors, SL, P_Key,
//!   Reversible, and the fields answered as asked.
//! - NumbPath (127 when not masked, OpenSM's cap) bounds the answer in all.
//!   Each (source, destination) port pair offers its (SLID, DLID) pairs in
//!   PathRecord order (the diagonal of the two LMC ranges first), at most
//!   NumbPath of them.
//! - Without an IndependenceSelector (or with 0) the answer takes one path
//!   of every port pair in turn, so it spreads over all the GIDs given and
//!   then over their LMC ranges. OpenSM instead takes pairs one after the
//!   other, and treats two sources, two destinations and NumbPath 2 (the
//!   APM case) apart.
//! - With a non-zero IndependenceSelector the paths are to be as
//!   fault-independent as the fabric allows: each next path is the one
//!   sharing the fewest switches, then the fewest links, with the paths
//!   already chosen, preferring (at equal sharing) a source and a
//!   destination port not used yet; ties go to the order above. The finer
//!   meaning the IBA may give values 2 and 3 is not modelled: every
//!   non-zero value asks for this. So two sources and two destinations
//!   with NumbPath 2 get two paths on disjoint ports that share as little
//!   of the fabric as the routes allow, which is what APM wants.

use std::collections::HashSet;

use super::{evaluate, lid_pairs, Ask, Constraints, LidRun, PathConfig, PathIndex};
use crate::mad::sa::{multi_path_mask as mm, path_mask as pm, sa_status, unknown_components};
use crate::mad::sa::{MultiPathRecordRepr, PathRecordRepr, SaRecord};
use crate::types::Lid;

/// NumbPath when the query does not bound it (OpenSM's
/// `OSM_SA_MPR_MAX_NUM_PATH`, the largest the 7-bit field holds).
const DEFAULT_NUMB_PATH: usize = 127;

/// The PathRecord query that binds paths as `req`'s fixed fields do, with
/// its component mask.
fn as_path_query(req: &MultiPathRecordRepr, mask: u64) -> (PathRecordRepr, u64) {
    let q = PathRecordRepr {
        service_id: req.service_id,
        raw_traffic: req.raw_traffic,
        flow_label: req.flow_label,
        hop_limit: req.hop_limit,
        tclass: req.tclass,
        reversible: req.reversible,
        numb_path: req.numb_path,
        pkey: req.pkey,
        qos_class: req.qos_class,
        sl: req.sl,
        mtu_selector: req.mtu_selector,
        mtu: req.mtu,
        rate_selector: req.rate_selector,
        rate: req.rate,
        packet_life_time_selector: req.packet_life_time_selector,
        packet_life_time: req.packet_life_time,
        ..PathRecordRepr::default()
    };
    let map = [
        (mm::RAW_TRAFFIC, pm::RAW_TRAFFIC),
        (mm::FLOW_LABEL, pm::FLOW_LABEL),
        (mm::HOP_LIMIT, pm::HOP_LIMIT),
        (mm::TCLASS, pm::TCLASS),
        (mm::REVERSIBLE, pm::REVERSIBLE),
        (mm::NUMB_PATH, pm::NUMB_PATH),
        (mm::PKEY, pm::PKEY),
        (mm::QOS_CLASS, pm::QOS_CLASS),
        (mm::SL, pm::SL),
        (mm::MTU_SELECTOR, pm::MTU_SELECTOR),
        (mm::MTU, pm::MTU),
        (mm::RATE_SELECTOR, pm::RATE_SELECTOR),
        (mm::RATE, pm::RATE),
        (mm::PACKET_LIFE_TIME_SELECTOR, pm::PACKET_LIFE_TIME_SELECTOR),
        (mm::PACKET_LIFE_TIME, pm::PACKET_LIFE_TIME),
        // ServiceID's halves: 8 MSB (bit 16) and 56 LSB (bit 21).
        (1 << 16, 1 << 0),
        (1 << 21, 1 << 1),
    ];
    let pr_mask = map.iter().filter(|(from, _)| mask & from != 0).fold(0, |m, (_, to)| m | to);
    (q, pr_mask)
}

/// One path a port pair offers, with what it crosses.
struct Candidate {
    record: PathRecordRepr,
    src: u32,
    dst: u32,
    switches: Vec<u32>,
    links: Vec<(u32, u8)>,
}

/// The PathRecords a SubnAdmGetMulti(MultiPathRecord) asks for; see the
/// module docs. The error is the SA status to answer with.
/// `requester_lid` is the SLID the query came from: with
/// [`PathConfig::requester_must_share`] a port pair is offered only when
/// both ports share a partition with the requester's port. Cost: O(port pairs × NumbPath × hops) to gather the candidates,
/// and O(NumbPath² × candidates × hops) more with an IndependenceSelector.
pub fn multipath_records(
    index: &PathIndex,
    req: &MultiPathRecordRepr,
    mask: u64,
    requester_lid: Lid,
    cfg: &PathConfig,
) -> Result<Vec<PathRecordRepr>, u16> {
    if unknown_components(MultiPathRecordRepr::COMPONENTS, mask) != 0 {
        return Err(sa_status::REQ_INVALID);
    }
    if mask & mm::SGID_COUNT == 0 || mask & mm::DGID_COUNT == 0 {
        return Err(sa_status::INSUFFICIENT_COMPONENTS);
    }
    let (sgids, dgids) = (req.sgids(), req.dgids());
    if sgids.is_empty() || dgids.is_empty() || req.check().is_err() {
        return Err(sa_status::REQ_INVALID);
    }
    let (q, pr_mask) = as_path_query(req, mask);
    let c = Constraints::from_path_query(&q, pr_mask)?;
    let resolve = |gids: &[[u8; 16]]| -> Result<Vec<(u32, [u8; 16])>, u16> {
        gids.iter().map(|g| super::end_by_gid(index, g).map(|e| (e, *g))).collect()
    };
    let (sources, dests) = (resolve(sgids)?, resolve(dgids)?);
    let max_paths = c.numb_path.map_or(DEFAULT_NUMB_PATH, usize::from).min(cfg.max_records);

    // Every port pair's candidates, in PathRecord order.
    let independent = mask & mm::INDEPENDENCE_SELECTOR != 0 && req.independence_selector != 0;
    let mut per_pair: Vec<Vec<Candidate>> = Vec::new();
    let requester = index.end_by_lid(requester_lid);
    for &(src, sgid) in &sources {
        for &(dst, dgid) in &dests {
            if !super::requester_may_see(index, cfg, requester, src, dst) {
                continue;
            }
            let (slids, dlids) = (LidRun::of(index.end(src)), LidRun::of(index.end(dst)));
            let mut found = Vec::new();
            for (slid, dlid, preference) in lid_pairs(slids, dlids) {
                if found.len() >= max_paths {
                    break;
                }
                let ask = Ask { src, dst, slid, dlid, preference, sgid, dgid };
                let Some(record) = evaluate(index, &c, cfg, &ask) else { continue };
                let links = if independent {
                    index.route_links(src, dlid).map(|(_, l)| l).unwrap_or_default()
                } else {
                    Vec::new()
                };
                let mut switches: Vec<u32> =
                    links.iter().map(|&(n, _)| n).filter(|&n| n != index.end(src).node).collect();
                switches.dedup();
                found.push(Candidate { record, src, dst, switches, links });
            }
            per_pair.push(found);
        }
    }
    // Round-robin over the pairs: candidate 0 of each, then 1, ...
    let depth = per_pair.iter().map(Vec::len).max().unwrap_or(0);
    let mut order: Vec<Candidate> = Vec::new();
    let mut columns: Vec<std::vec::IntoIter<Candidate>> = per_pair.into_iter().map(Vec::into_iter).collect();
    for _ in 0..depth {
        order.extend(columns.iter_mut().filter_map(Iterator::next));
    }
    if !independent {
        return Ok(order.into_iter().take(max_paths).map(|c| c.record).collect());
    }

    let mut chosen: Vec<PathRecordRepr> = Vec::new();
    let (mut used_switches, mut used_links) = (HashSet::new(), HashSet::new());
    let (mut used_src, mut used_dst) = (HashSet::new(), HashSet::new());
    while chosen.len() < max_paths && !order.is_empty() {
        let score = |c: &Candidate| {
            let switches = c.switches.iter().filter(|s| used_switches.contains(*s)).count();
            let links = c.links.iter().filter(|l| used_links.contains(*l)).count();
            let ports = usize::from(used_src.contains(&c.src)) + usize::from(used_dst.contains(&c.dst));
            (switches, links, ports)
        };
        let best = (0..order.len()).min_by_key(|&i| (score(&order[i]), i)).expect("order is not empty");
        let c = order.remove(best);
        used_switches.extend(c.switches.iter().copied());
        used_links.extend(c.links.iter().copied());
        used_src.insert(c.src);
        used_dst.insert(c.dst);
        chosen.push(c.record);
    }
    Ok(chosen)
}
